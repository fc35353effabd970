# A database's replication slot invalidated by idle_replication_slot_timeout
# (PostgreSQL 18) while no worker held it.
#
# Such a slot keeps its restart_lsn, which is how 15 tells an invalidated
# slot (max_slot_wal_keep_size clears it): the worker took the slot for
# valid, its decoding failed on every start, and the views stayed stalled
# with nothing telling their owner to refresh them.  The worker now reads
# the cause of the invalidation, marks the views as having missed changes,
# naming it, and drops the slot; refresh() rebuilds them on a new one.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::init_node('slot_idle');
if ($node->pg_version < 18)
{
	plan skip_all => 'idle_replication_slot_timeout is from PostgreSQL 18 on';
}
$node->append_conf('postgresql.conf', "idle_replication_slot_timeout = '1s'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE dj');
$node->safe_psql('dj', 'CREATE EXTENSION delta_join');
my $dboid = $node->safe_psql('postgres', "SELECT oid FROM pg_database WHERE datname = 'dj'");
my $slot = "delta_join_$dboid";

$node->safe_psql(
	'dj', q{
	CREATE TABLE acct (id bigint PRIMARY KEY, v text);
	INSERT INTO acct VALUES (1, 'one');
	SELECT delta_join.create_view('acct_copy', 'SELECT id, v FROM acct');});
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"), 't', 'the view is applied');

# Keep the worker out of the database and stop it: the slot is idle.
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot' AND active"),
	'the worker let go of the slot');

# Once the slot has been idle longer than the timeout, a checkpoint
# invalidates it.
ok( $node->poll_query_until(
		'postgres', qq{SELECT inactive_since < now() - interval '2 s'
			FROM pg_replication_slots WHERE slot_name = '$slot'}),
	'the slot has been idle longer than the timeout');
$node->safe_psql('postgres', 'CHECKPOINT');
is( $node->safe_psql('postgres',
		"SELECT invalidation_reason FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'idle_timeout', 'the checkpoint invalidated it');

# The worker comes back: it marks the view and drops the slot.
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
ok( $node->poll_query_until(
		'dj', "SELECT state = 'error' FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'the view goes to error instead of staying stalled');
is( $node->safe_psql('dj', "SELECT last_error FROM delta_join.status WHERE target = 'public.acct_copy'"),
	qq{replication slot "$slot" was invalidated because it was idle longer than idle_replication_slot_timeout},
	'its error names the cause');
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'the invalidated slot is dropped');

# refresh() rebuilds it on a new slot, and it follows changes again
$node->safe_psql('dj', "SELECT delta_join.refresh('acct_copy')");
$node->safe_psql('dj', "INSERT INTO acct VALUES (3, 'after')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"), 't', 'wait() after refresh');
is($node->safe_psql('dj', q{SELECT string_agg(id || v, ',' ORDER BY id) FROM acct_copy}),
	'1one,3after', 'the view is complete again');

$node->stop;
done_testing();
