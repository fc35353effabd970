# Locks and concurrency (DESIGN.md §6.3, §6.4):
#
#  - a lock held on one target, or on one of its rows, holds up that view
#    only: the worker gives up the wait after its lock_timeout, keeps the
#    view's changes, retries with a backoff (the status says so), and the
#    other views go on; once the lock goes, the view catches up;
#  - a view that cannot be applied for longer than its lookup_timeout, or
#    whose apply hits its lookup_timeout three times in a row, goes to error;
#  - create_view, drop_view and refresh, run over and over from several
#    sessions while writers change the sources, never deadlock.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('locks');
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', '$DeltaJoinTest::wide_query');"
	  . "SELECT delta_join.create_view('summary', '$DeltaJoinTest::summary_query')");

sub wait_view
{
	my ($target, $timeout) = @_;
	return $node->safe_psql('postgres', "SELECT delta_join.wait('$target', '$timeout')");
}

# ---- a table lock on one target ----

my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE wide IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 1, 1000, 5)');

is(wait_view('summary', '60s'), 't', 'a lock on one target does not hold up another view');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'active' AND reason ~ '^retrying \(\d+ tries\): canceling statement due to lock timeout'
		FROM delta_join.status WHERE target = 'public.wide'}),
	'the locked view is active and says it is retrying');
is(wait_view('wide', '2s'), 'f', 'wait() on the locked view times out');
$locker->query_safe('COMMIT');
is(wait_view('wide', '60s'), 't', 'once the lock goes, the view catches up');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
	'after a lock on the target');
is( $node->safe_psql('postgres',
		"SELECT state || coalesce(reason, '') FROM delta_join.status WHERE target = 'public.wide'"),
	'active', 'with no reason left');

# ---- the changes a held view waits for are merged: each key once ----

my ($keys_before, $seen_before) = split /\|/, $node->safe_psql('postgres',
	"SELECT keys_applied, changes_seen FROM delta_join.status WHERE target = 'public.summary'");
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE summary IN ACCESS EXCLUSIVE MODE');
foreach my $i (1 .. 20)
{
	# one merchant, in transactions apart: batches apart
	$node->safe_psql('postgres',
		"UPDATE orders SET amount = amount + 1 WHERE merchant_id = 2 AND order_id = $i;"
		  . 'SELECT pg_sleep(0.1)');
}
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT reason ~ '^retrying' AND changes_seen = $seen_before + 20
		FROM delta_join.status WHERE target = 'public.summary'}),
	'the held aggregate view is retrying, with every change decoded');
$locker->query_safe('COMMIT');
is(wait_view('summary', '60s'), 't', 'once the lock goes, it catches up');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query,
	'after changes merged while it waited');
is( $node->safe_psql('postgres',
		"SELECT keys_applied - $keys_before FROM delta_join.status WHERE target = 'public.summary'"),
	'1', 'its one group, changed in 20 transactions while it waited, was recomputed once');

# ---- a view dropped while it waits: nothing waits for it any more ----

$node->safe_psql('postgres',
	"SELECT delta_join.create_view('doomed', '$DeltaJoinTest::summary_query')");
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE doomed IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id = 3');
# dropped in its back-off (long after a few tries), not while the worker
# waits for the lock
ok( $node->poll_query_until(
		'postgres', q{
		SELECT substring(reason from '^retrying \((\d+) tries\)')::int >= 4 AND NOT EXISTS (
		         SELECT 1 FROM pg_locks WHERE relation = 'doomed'::regclass AND NOT granted)
		FROM delta_join.status WHERE target = 'public.doomed'}),
	'the view to drop is waiting for another try');
$locker->query_safe("SELECT delta_join.drop_view('doomed')");
$locker->query_safe('COMMIT');
my $dropped_at = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id = 4');
is(wait_view('summary', '60s'), 't', 'the other views go on');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT confirmed_flush_lsn >= '$dropped_at' FROM pg_replication_slots
		WHERE slot_name LIKE 'delta_join%'}),
	'the slot moves past the dropped view');
my $commits = $node->safe_psql('postgres',
	'SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()');
sleep 3;
cmp_ok(
	$node->safe_psql('postgres',
		"SELECT xact_commit - $commits FROM pg_stat_database WHERE datname = current_database()"),
	'<', 300,
	'and the worker does not spin on it (transactions in 3 quiet seconds)');

# ---- a row lock on a target row ----

$locker->query_safe('BEGIN');
$locker->query_safe('SELECT * FROM wide WHERE order_id = 1000 FOR UPDATE');
$node->safe_psql('postgres',
	"UPDATE items SET item_name = 'locked row' WHERE merchant_id = 1 AND item_id = 1;"
	  . "INSERT INTO orders VALUES (2, 2, 1001, 7)");
is(wait_view('summary', '60s'), 't', 'a row lock on one target does not hold up another view');
is(wait_view('wide', '2s'), 'f', 'the view with the locked row waits');
$locker->query_safe('COMMIT');
is(wait_view('wide', '60s'), 't', 'once the row lock goes, the view catches up');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
	'after a row lock on the target');

# ---- lookup_timeout: how long a view may stay blocked ----

$node->safe_psql('postgres', q{
	SELECT delta_join.create_view('impatient', $$
		SELECT merchant_id, order_id, item_id, amount FROM orders $$,
		options => '{"lookup_timeout": "1s"}')});
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE impatient IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (3, 3, 1002, 9)');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'lookup_timeout'
		FROM delta_join.status WHERE target = 'public.impatient'}),
	'a view blocked for longer than its lookup_timeout goes to error');
$locker->query_safe('COMMIT');
is($node->safe_psql('postgres', "SELECT delta_join.refresh('impatient') > 0"),
	't', 'refresh() brings it back');

# an apply slower than lookup_timeout: three tries, then error
$node->safe_psql('postgres', q{
	CREATE FUNCTION slow_label(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE
	  AS $$ BEGIN IF t = 'slow' THEN PERFORM pg_sleep(2); END IF; RETURN t; END $$;
	SELECT delta_join.create_view('sluggish', $$
		SELECT merchant_id, item_id, slow_label(item_name) AS label FROM items $$,
		options => '{"lookup_timeout": "300ms"}')});
$node->safe_psql('postgres', "UPDATE items SET item_name = 'slow' WHERE item_id = 3");
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'lookup_timeout expired 3 times in a row'
		FROM delta_join.status WHERE target = 'public.sluggish'}),
	'an apply that keeps exceeding lookup_timeout goes to error after three tries');
is(wait_view('summary', '60s'), 't', 'meanwhile the other views go on');
$node->safe_psql('postgres',
	"SELECT delta_join.drop_view('sluggish'); SELECT delta_join.drop_view('impatient')");

# ---- view changes from several sessions, under write load ----

my $scripts = DeltaJoinWorkload::write_scripts(
	orders_items => [
		1, q{\set m random(1, 3)
\set i random(1, 10)
BEGIN;
UPDATE orders SET amount = amount + 1 WHERE merchant_id = :m AND item_id = :i;
UPDATE items SET item_name = item_name || '' WHERE merchant_id = :m AND item_id = :i;
COMMIT;
}
	],
	items_orders => [
		1, q{\set m random(1, 3)
\set i random(1, 10)
\set o random(1, 99999)
BEGIN;
UPDATE items SET item_name = item_name || '' WHERE merchant_id = :m AND item_id = :i;
INSERT INTO orders VALUES (:m, :i, 10000 + :client_id * 100000 + :o, 1)
  ON CONFLICT DO NOTHING;
COMMIT;
}
	]);
my $writers = DeltaJoinWorkload::pgbench_start($node, $scripts,
	seed => 7, clients => 3, seconds => 8);

my @sessions;
foreach my $n (1 .. 2)
{
	my $script = '';
	foreach my $round (1 .. 40)
	{
		$script .= "SELECT delta_join.create_view('churn_$n', '$DeltaJoinTest::wide_query');\n"
		  . "SELECT delta_join.refresh('churn_$n');\n"
		  . "SELECT delta_join.refresh('summary');\n"
		  . "SELECT delta_join.drop_view('churn_$n');\n";
	}
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres') ],
		'<', \$script, '>', \$out, '2>', \$err);
	push @sessions, [ $h, \$out, \$err ];
}
foreach my $s (@sessions)
{
	my ($h, $out, $err) = @$s;
	$h->finish;
	is($h->result(0), 0, 'a session creating, refreshing and dropping views ran to the end')
	  or diag($$err);
	unlike($$err, qr/deadlock/, 'without a deadlock');
}
my $res = DeltaJoinWorkload::pgbench_finish($writers);
ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
	"and no writer failed ($res->{processed} transactions)")
  or diag($res->{stdout} . $res->{stderr});
ok(DeltaJoinWorkload::wait_views($node), 'wait() returns true');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
	'view changes under write load');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query,
	'view changes under write load');

# ---- a source rewritten while the worker waits for its lock ----
#
# ALTER TABLE ... TYPE writes every row of the table anew, in its own
# transaction.  The worker locks what a view reads before it takes the
# snapshot it reads them under: with the snapshot taken first, a rewrite
# that committed while the worker waited for its lock left the table empty
# to that snapshot, so the walks from the other source's changes found no
# rows, and the view kept the old values for good.
# The same holds when the database's default isolation is REPEATABLE READ,
# which would fix one snapshot for the worker's whole batch: the worker
# runs its transactions READ COMMITTED whatever the database says.
$node->safe_psql('postgres', 'ALTER TABLE orders ADD COLUMN note int DEFAULT 1');
$node->safe_psql('postgres',
	"ALTER DATABASE postgres SET default_transaction_isolation = 'repeatable read'");
my $old_worker = DeltaJoinWorkload::worker_pid($node);
$node->safe_psql('postgres', "SELECT pg_terminate_backend($old_worker)");
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'delta_join worker' AND pid <> $old_worker}),
	'rewrite: a worker runs again, under the new database default');
is(wait_view('wide', '60s'), 't', 'rewrite: caught up before');
foreach my $round (1 .. 3)
{
	my $rewriter = $node->background_psql('postgres');
	$rewriter->query_safe('BEGIN');
	$rewriter->query_safe(
		'ALTER TABLE orders ALTER COLUMN note TYPE ' . ($round % 2 ? 'bigint' : 'int'));
	my $rewriter_pid = $rewriter->query_safe('SELECT pg_backend_pid()');
	$node->safe_psql('postgres', "UPDATE items SET item_name = 'rewrite $round, ' || item_id");
	# the worker begins the batch and waits for its lock on orders (for
	# less than its lock_timeout, or again after its back-off)
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT count(*) > 0 FROM pg_stat_activity
			WHERE backend_type = 'delta_join worker'
			  AND $rewriter_pid = ANY (pg_blocking_pids(pid))}),
		"rewrite $round: the worker waits for its lock on orders");
	$rewriter->query_safe('COMMIT');
	$rewriter->quit;
	is(wait_view('wide', '60s'), 't', "rewrite $round: caught up");
	DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
		"rewrite $round: with the new names", mode => 'upsert');
}
$node->safe_psql('postgres', 'ALTER DATABASE postgres RESET default_transaction_isolation');

$node->stop;
done_testing();
