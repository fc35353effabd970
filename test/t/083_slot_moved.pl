# A database's replication slot moved on by hand while no apply worker held
# it: pg_replication_slot_advance (or pg_logical_slot_get_changes) after
# the worker was terminated, before the launcher started another.
#
# The changes it skipped are lost to the views, as those of a slot dropped
# by hand are.  The worker that takes the slot next finds it further on
# than its predecessor left it and puts the views in error, saying so;
# without that they stayed "active", wait() returned true, and their
# targets lacked the skipped rows for good.  A slot that was dropped and
# made anew, a restarted worker and a restarted server are not "moved".

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('slot_moved');
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
});

sub rows
{
	return $node->safe_psql('dj',
		q{SELECT string_agg(id || v, ',' ORDER BY id) FROM acct_copy});
}

sub stop_worker
{
	$node->safe_psql('postgres',
		"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		  . " WHERE backend_type = 'delta_join worker'");
	ok( $node->poll_query_until(
			'postgres',
			"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot' AND active"),
		'the worker let go of the slot');
}

# A terminated worker, with changes committed meanwhile, is no move
$node->safe_psql('dj', "INSERT INTO acct VALUES (2, 'two')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait()');
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
stop_worker();
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
$node->safe_psql('dj', "INSERT INTO acct VALUES (3, 'three')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after the worker was restarted');
is(rows(), '1one,2two,3three', 'the view is complete');

# Nor is a restarted server
$node->restart;
$node->safe_psql('dj', "INSERT INTO acct VALUES (4, 'four')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after a restart');
is(rows(), '1one,2two,3three,4four', 'the view is complete after a restart');

# Move the slot while no worker holds it: a session of the database that
# stays connected while new ones (the worker's) are refused
my $session = $node->background_psql('dj', on_error_stop => 1);
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
stop_worker();
$session->query_safe("INSERT INTO acct VALUES (5, 'skipped')");
$session->query_safe(
	"SELECT pg_replication_slot_advance('$slot', pg_current_wal_lsn())");
$session->quit;
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
$node->safe_psql('dj', "INSERT INTO acct VALUES (6, 'after')");

ok( $node->poll_query_until(
		'dj',
		"SELECT state = 'error' FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'the view that missed a change goes to error');
like(
	$node->safe_psql(
		'dj',
		"SELECT last_error FROM delta_join.status WHERE target = 'public.acct_copy'"),
	qr/^replication slot "$slot" was moved from [0-9A-F]+\/[0-9A-F]+ to [0-9A-F]+\/[0-9A-F]+ by another process while no apply worker held it; changes committed in between were not applied$/,
	'and says why');
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '5s')"),
	'f', 'wait() returns false');
unlike(rows(), qr/5skipped/, 'the skipped row is indeed missing');

# refresh() rebuilds it, and it follows changes again
$node->safe_psql('dj', "SELECT delta_join.refresh('acct_copy')");
$node->safe_psql('dj', "INSERT INTO acct VALUES (7, 'seven')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after refresh');
is( rows(), '1one,2two,3three,4four,5skipped,6after,7seven',
	'the view is complete again');

# A slot dropped by hand and made anew by refresh() is not "moved": the
# views are marked for the missing slot once, and are fine after refresh()
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
stop_worker();
$node->safe_psql('postgres', "SELECT pg_drop_replication_slot('$slot')");
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
$node->safe_psql('dj', "INSERT INTO acct VALUES (8, 'eight')");
$node->psql('dj', "SELECT delta_join.refresh('acct_copy')");
$node->safe_psql('dj', "INSERT INTO acct VALUES (9, 'nine')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after the slot was made anew');
is( $node->safe_psql('dj',
		"SELECT state FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'active', 'a new slot is not taken for a moved one');
is(rows(), '1one,2two,3three,4four,5skipped,6after,7seven,8eight,9nine',
	'the view is complete');

$node->stop;
done_testing();
