# The apply worker's life.
#
# A database gets its replication slot with its first delta view and loses
# it with its last; meanwhile one worker keeps the views fresh.
# delta_join.wait() gives read-your-writes, and returns false when its
# timeout passes while no worker runs.  A worker killed with SIGKILL (which
# makes the server restart) comes back and the views converge.
#
# The views live in their own database "dj", so that the test can keep the
# worker from starting by refusing connections to that database.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# restart_after_crash: a killed worker makes the server restart, as it
# does by default (the test framework turns it off)
my $node = DeltaJoinTest::new_node('worker',
	conf => { restart_after_crash => 'on' });
$node->safe_psql('postgres', 'CREATE DATABASE dj');
$node->safe_psql('dj', 'CREATE EXTENSION delta_join');
my $dboid = $node->safe_psql('postgres',
	"SELECT oid FROM pg_database WHERE datname = 'dj'");
my $slot = "delta_join_$dboid";

sub slot_count
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_replication_slots WHERE slot_name = '$slot'");
}

my $worker_query = "SELECT pid FROM pg_stat_activity"
  . " WHERE backend_type = 'delta_join worker' AND datname = 'dj'";

DeltaJoinTest::worked_example($node, dbname => 'dj');
my $view_query = $DeltaJoinTest::wide_query;

# ---- no view, no slot ----

is(slot_count(), '0', 'no slot before the first view');
is($node->safe_psql('dj', 'SELECT delta_join.wait()'),
	't', 'wait() with no view returns true at once');

# ---- the first view must be created before its transaction writes ----

my ($ret, $stdout, $stderr) = $node->psql(
	'dj', q{
	BEGIN;
	INSERT INTO items VALUES (9, 9, 'x');
	SELECT delta_join.create_view('wide', $$ } . $view_query . q{ $$);
	COMMIT;},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$stderr,
	qr/25001: cannot create the first delta view of a database in a transaction that has already written/,
	'the first view is refused in a transaction that has written');
is(slot_count(), '0', 'and no slot is left behind');

($ret, $stdout, $stderr) = $node->psql(
	'dj', q{
	BEGIN ISOLATION LEVEL REPEATABLE READ;
	SELECT delta_join.create_view('wide', $$ } . $view_query . q{ $$);
	COMMIT;},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$stderr,
	qr/0A000: delta views cannot be created or refreshed in a REPEATABLE READ or SERIALIZABLE transaction/,
	'a view is refused in a REPEATABLE READ transaction');

# ---- the first view brings the slot and a worker ----

$node->safe_psql('dj',
	"SELECT delta_join.create_view('wide', \$\$ $view_query \$\$)");
is(slot_count(), '1', 'create_view made the slot');
is( $node->safe_psql(
		'postgres',
		"SELECT plugin || ' ' || slot_type || ' ' || database"
		  . " FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'delta_join logical dj',
	'the slot decodes the database with our plugin');
ok($node->poll_query_until('postgres', "SELECT count(*) = 1 FROM ($worker_query) w"),
	'a worker runs for the database');

# ---- changes arrive, wait() gives read-your-writes ----

$node->safe_psql(
	'dj', q{
	INSERT INTO orders VALUES (1, 1, 1000, 5.5), (2, 2, 1001, 6.5);
	UPDATE items SET item_name = 'renamed' WHERE item_id = 3;
	UPDATE orders SET amount = amount * 2 WHERE order_id % 7 = 0;
});
is($node->safe_psql('dj', "SELECT delta_join.wait('wide', '60s')"),
	't', 'wait() returns true once the changes are applied');
DeltaJoinTest::target_ok($node, 'wide', $view_query, 'after the first writes', dbname => 'dj');
is( $node->safe_psql(
		'dj',
		"SELECT state, changes_seen > 0, keys_applied > 0, rows_upserted > 0"
		  . " FROM delta_join.status WHERE target = 'public.wide'"),
	'active|t|t|t',
	'status counts the changes decoded and applied');
# the worker's own commit is WAL too: lag is zero once it has read that
ok( $node->poll_query_until(
		'dj',
		"SELECT lag_bytes = 0 AND lag = interval '0'"
		  . " FROM delta_join.status WHERE target = 'public.wide'"),
	'status shows no lag once the worker has caught up');

($ret, $stdout, $stderr) = $node->psql(
	'dj',
	"SELECT delta_join.wait('orders')",
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like(
	$stderr,
	qr/42704: "orders" is not a delta view/,
	'wait() on a table that is no view is an error');

# ---- wait() times out while no worker runs ----

# A session opened now stays connected after the database stops accepting
# connections; the worker, terminated, cannot come back until it does.
my $session = $node->background_psql('dj');
$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS false');
$node->safe_psql('postgres', "SELECT pg_terminate_backend(pid) FROM ($worker_query) w");
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM ($worker_query) w"),
	'the worker is gone');

$session->query_safe("INSERT INTO orders VALUES (3, 3, 2000, 1)");
is($session->query_safe("SELECT delta_join.wait('wide', '500ms')"),
	'f', 'wait() returns false on timeout while no worker runs');
is($session->query_safe("SELECT delta_join.wait(NULL, '100ms')"),
	'f', 'so does wait() for all views');
is($session->query_safe("SELECT count(*) FROM wide WHERE order_id = 2000"),
	'0', 'and the change is not applied');

$node->safe_psql('postgres', 'ALTER DATABASE dj ALLOW_CONNECTIONS true');
is($session->query_safe("SELECT delta_join.wait('wide', '60s')"),
	't', 'the launcher starts the worker again, which catches up');
is($session->query_safe("SELECT count(*) FROM wide WHERE order_id = 2000"),
	'1', 'the change made meanwhile is applied');
$session->quit;

# ---- a worker killed with SIGKILL comes back ----

my $pid = $node->safe_psql('postgres', $worker_query);
kill 'KILL', $pid;
# The postmaster restarts every process; wait until it takes connections.
ok( $node->poll_query_until(
		'postgres', "SELECT count(*) = 1 FROM ($worker_query) w WHERE pid <> $pid"),
	'a worker runs again after SIGKILL');
$node->safe_psql('dj', q{
	UPDATE orders SET amount = amount + 1 WHERE merchant_id = 2;
	INSERT INTO orders VALUES (1, 2, 3000, 3);
});
is($node->safe_psql('dj', "SELECT delta_join.wait('wide', '60s')"),
	't', 'wait() succeeds after the restart');
DeltaJoinTest::target_ok($node, 'wide', $view_query, 'after the restart', dbname => 'dj');

# ---- the last view takes the slot and the worker with it ----

$node->safe_psql('dj', "SELECT delta_join.drop_view('wide')");
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM pg_replication_slots WHERE slot_name = '$slot'"),
	'the slot is dropped after the last view');
ok($node->poll_query_until('postgres', "SELECT count(*) = 0 FROM ($worker_query) w"),
	'and the worker exits');
ok( $node->log_contains(
		qr/delta_join worker for database $dboid exiting: no views left; replication slot "$slot" dropped/),
	'the worker says why it left');

$node->stop;
done_testing();
