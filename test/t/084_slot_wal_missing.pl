# A database's replication slot whose WAL is not in pg_wal: a copy of the
# data directory that kept its slots (a low-level backup restored to a
# point in time, say) has none of the WAL from before the backup, and
# logical decoding reads pg_wal only.
#
# The worker failed on every start ("requested WAL segment ... has already
# been removed"), refresh() could not help, and the slot kept every WAL
# segment from then on.  It is now taken for invalidated: the views go to
# error, naming the cause, the slot is dropped, and refresh() starts them
# again.  Simulated by removing the segment of the slot's restart point
# while the server is down.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('slot_wal_missing');
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
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait()');

# Keep the worker out, so that the slot's restart point stays behind
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
$node->safe_psql('postgres',
	"SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
	  . " WHERE backend_type = 'delta_join worker'");
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot' AND active"),
	'the worker let go of the slot');
my $segment = $node->safe_psql('postgres',
	"SELECT pg_walfile_name(restart_lsn) FROM pg_replication_slots WHERE slot_name = '$slot'");
for my $i (1 .. 3)
{
	$node->safe_psql('postgres',
		'CREATE TABLE IF NOT EXISTS filler (x int); INSERT INTO filler VALUES (1);'
		  . ' SELECT pg_switch_wal(); CHECKPOINT');
}
$node->stop;
my $path = $node->data_dir . "/pg_wal/$segment";
ok(-f $path, 'the segment of the restart point is kept by the slot');
unlink($path) or die "could not remove $path: $!";
$node->start;
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');

ok( $node->poll_query_until(
		'dj',
		"SELECT state = 'error' FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'the view goes to error');
like(
	$node->safe_psql(
		'dj',
		"SELECT last_error FROM delta_join.status WHERE target = 'public.acct_copy'"),
	qr/^replication slot "$slot" was invalidated because the WAL it needs from [0-9A-F]+\/[0-9A-F]+ is not in pg_wal/,
	'and says why');
ok( $node->poll_query_until(
		'postgres',
		"SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'the slot is dropped, and holds no WAL');

# refresh() makes a slot and rebuilds the view
$node->safe_psql('dj', "INSERT INTO acct VALUES (2, 'two')");
$node->safe_psql('dj', "SELECT delta_join.refresh('acct_copy')");
$node->safe_psql('dj', "INSERT INTO acct VALUES (3, 'three')");
is($node->safe_psql('dj', "SELECT delta_join.wait('acct_copy', '30s')"),
	't', 'wait() after refresh');
is( $node->safe_psql('dj',
		q{SELECT string_agg(id || v, ',' ORDER BY id) FROM acct_copy}),
	'1one,2two,3three', 'the view is complete');
is( $node->safe_psql('dj',
		"SELECT state FROM delta_join.status WHERE target = 'public.acct_copy'"),
	'active', 'and active');

$node->stop;
done_testing();
