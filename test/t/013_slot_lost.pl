# A database whose replication slot was lost while it had views.
#
# Changes committed while no slot existed cannot be decoded: the next view
# function that recreates the slot puts the views in error ("missed
# changes"), and refresh() brings them back.  Should that function fail, its
# marking rolls back, so the slot it recreated is dropped again: the views
# are marked by the next one instead of staying "active" and stale.  While
# the slot is missing, wait() returns false instead of waiting for ever for
# what nothing applies.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('slot_lost');
$node->safe_psql('postgres', 'CREATE DATABASE dj');
$node->safe_psql('dj', 'CREATE EXTENSION delta_join');
my $dboid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'dj'");
my $slot = "delta_join_$dboid";

$node->safe_psql(
	'dj', q{
	CREATE TABLE acct (id bigint PRIMARY KEY, v text);
	INSERT INTO acct VALUES (1, 'one');
	SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct');
	CREATE TABLE other (id bigint PRIMARY KEY, w text);
});

sub slot_count
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'");
}

# Lose the slot: keep the worker out of the database, stop it, drop the slot.
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'delta_join worker'");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot' AND active"),
	'the worker let go of the slot');
$node->safe_psql('postgres', "SELECT pg_drop_replication_slot('$slot')");
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
is(slot_count(), '0', 'the slot is gone');

# A change nobody decodes
$node->safe_psql('dj', "INSERT INTO acct VALUES (2, 'missed')");

# A view function that recreates the slot, then fails: the slot goes again,
# and the view is not marked in the catalog (its marking rolled back with
# the function); the status says the slot is missing all the same.
my ($ret, $out, $err) = $node->psql('dj',
	"SELECT delta_join.create_view('bad', 'SELECT nope FROM acct')");
like($err, qr/column "nope" does not exist/, 'the failing create_view fails');
is(slot_count(), '0', 'the slot it recreated was dropped at abort');
is( $node->safe_psql('dj',
		"SELECT state FROM delta_join.views WHERE target = 'public.acct_copy'"),
	'active',
	'the view is not marked by the aborted function');
is( $node->safe_psql('dj',
		"SELECT state, reason FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'stalled|the replication slot of this database is missing: refresh the view',
	'while the slot is missing, the status says the view is stalled and why');

# wait() does not wait for ever for what nothing applies: it returns false,
# as for a view in error (it waited until statement_timeout, or for ever)
my ($wret, $wout, $werr) = $node->psql('dj',
	"SET statement_timeout = '20s'; SELECT delta_join.wait('acct_copy'); SELECT delta_join.wait()");
is($wout, "f\nf", 'wait() without a timeout returns false while the slot is missing');
is($werr, '', 'and fails nothing');

# The next view function recreates the slot for good and marks the view.
$node->safe_psql('dj',
	"SELECT delta_join.create_view('other_copy', 'SELECT id, w FROM other')");
is(slot_count(), '1', 'the slot exists again');
is( $node->safe_psql('dj',
		"SELECT state || ': ' || last_error FROM delta_join.status WHERE target = 'public.acct_copy'"),
	qq{error: replication slot "$slot" was missing; changes committed while it was missing were not applied},
	'the view that missed a change says so');
is($node->safe_psql('dj', 'SELECT count(*) FROM acct_copy'),
	'1', 'the missed row is indeed missing');

# refresh() rebuilds it, and it follows changes again
$node->safe_psql('dj', "SELECT delta_join.refresh('acct_copy')");
$node->safe_psql('dj', "INSERT INTO acct VALUES (3, 'after')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after refresh');
is( $node->safe_psql('dj',
		'SELECT string_agg(id || v, \',\' ORDER BY id) FROM acct_copy'),
	'1one,2missed,3after',
	'the view is complete again');
is( $node->safe_psql('dj',
		"SELECT state FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'active', 'and active');

$node->stop;
done_testing();
