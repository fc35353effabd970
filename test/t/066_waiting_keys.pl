# A view that waits keeps its dirty keys in the apply worker's memory, at
# most delta_join.max_waiting_keys of them: beyond, they are dropped and the
# view is recomputed whole when it is applied (retry.c, retry_add).
#
# Before the bound, a view held for an hour of writes (a lock on its
# target, retried), behind a backlog of millions of changes (keyed
# recompute of groups through joins, held until the worker catches up), or
# for a long concurrent backfill kept every key those changes touched: the
# worker of a database is one process, and the kernel killing it takes the
# whole server through crash recovery.  Each kind of view must come out
# exactly equal to its query after its whole recompute -- the joins in
# upsert mode too, whose residual rows the recompute removes.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('waiting',
	conf => { 'delta_join.max_waiting_keys' => 50, 'delta_join.max_batch_size' => 40 });
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	'ALTER TABLE orders REPLICA IDENTITY FULL; ALTER TABLE items REPLICA IDENTITY FULL;');

my %query = (
	wide => $DeltaJoinTest::wide_query,
	summary => $DeltaJoinTest::summary_query,
	outer_retract => 'SELECT i.merchant_id, i.item_id, i.item_name, o.merchant_id AS o_merchant_id, '
	  . 'o.item_id AS o_item_id, o.order_id, o.amount '
	  . 'FROM items i LEFT JOIN orders o ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id',
	by_name => 'SELECT i.item_name, count(*) AS n, sum(o.amount) AS total '
	  . 'FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id '
	  . 'GROUP BY i.item_name');
my %how = (
	outer_retract => q{, options => '{"retract": true}'},
	by_name => q{, strategy => 'auto'});
foreach my $view (sort keys %query)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$ " . ($how{$view} // '') . ')');
}
is( $node->safe_psql('postgres', q{SELECT mode FROM delta_join.views WHERE target = 'public.by_name'}),
	'keyed recompute (groups through joins)',
	'the aggregate over the join takes the groups-through-joins path');

sub check_all
{
	my ($what) = @_;
	is( $node->safe_psql('postgres',
			q{SELECT bool_and(delta_join.wait(target, '120s')) FROM delta_join.views}),
		't', "$what: every view is fresh");
	# (a whole recompute is exact under its batch's snapshot; the join in
	# upsert mode keeps residual rows of what later batches delete)
	DeltaJoinTest::target_ok($node, $_, $query{$_}, $what,
		mode => $_ eq 'wide' ? 'upsert' : 'exact')
	  foreach sort keys %query;
}

sub dropped_lines
{
	my ($offset) = @_;
	my @lines = slurp_file($node->logfile, $offset) =~
	  /delta_join view "(\w+)" waits with more than 50 dirty keys/g;
	return join ',', sort @lines;
}

# Every target locked by another session: every view waits, retried
my $locker = $node->background_psql('postgres');

sub lock_targets
{
	$locker->query_safe('BEGIN');
	$locker->query_safe('LOCK TABLE ' . join(', ', sort keys %query) . ' IN ACCESS EXCLUSIVE MODE');
}

sub views_wait
{
	my ($what) = @_;
	ok( $node->poll_query_until(
			'postgres', q{
			SELECT count(*) = 4 FROM delta_join.status WHERE reason ~ 'retrying \\('}),
		$what);
}

# ---- below the bound: the keys are kept ----

my $offset = -s $node->logfile;
lock_targets();
$node->safe_psql('postgres',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 1 AND order_id <= 20');
views_wait('every view waits behind the lock on its target');
$locker->query_safe('COMMIT');
check_all('20 keys waited');
is(dropped_lines($offset), '', 'no view dropped its keys');

# ---- beyond it, behind a lock: each view is recomputed whole ----

# A residual row of the join in upsert mode, which a whole recompute
# removes: an order deleted while nothing holds the view.
$node->safe_psql('postgres', 'DELETE FROM orders WHERE merchant_id = 3 AND order_id = 1');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"), 't', 'the delete is applied');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE merchant_id = 3 AND order_id = 1'),
	'1', 'the join in upsert mode keeps its row as a residual row');

$offset = -s $node->logfile;
lock_targets();
foreach my $m (1 .. 3)
{
	# transactions apart: batches apart, each merged into the waiting work
	$node->safe_psql(
		'postgres', qq{
		UPDATE orders SET amount = amount + $m WHERE merchant_id = $m AND order_id % 2 = 0;
		DELETE FROM orders WHERE merchant_id = $m AND order_id % 7 = 3;
		INSERT INTO orders SELECT $m, 1 + g % 10, 1000 + g, g FROM generate_series(1, 30) g;
		UPDATE items SET item_name = item_name || ' m$m' WHERE merchant_id = $m AND item_id <= 4;
		DELETE FROM items WHERE merchant_id = $m AND item_id = 9;});
}
views_wait('every view waits behind the lock again');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT string_agg(target::text, ',' ORDER BY 1) FROM delta_join.status
		 WHERE reason ~ '^to be recomputed whole \\(over max_waiting_keys\\): retrying \\('},
		'public.by_name,public.outer_retract,public.wide'),
	'status says which views will be recomputed whole, before why they wait');
$locker->query_safe('COMMIT');
check_all('hundreds of keys waited behind a lock');
is(dropped_lines($offset), 'by_name,outer_retract,wide',
	'each view with more keys than that dropped them, and said so in the log '
	  . '(the aggregate\'s keys are its three groups)');
is( $node->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE merchant_id = 3 AND order_id = 1'),
	'0', 'the whole recompute removed the residual row of the join in upsert mode');
is( $node->safe_psql('postgres', q{SELECT string_agg(target::text, ',' ORDER BY 1) FROM delta_join.status
	WHERE state <> 'active' OR reason IS NOT NULL
	   OR (last_recompute IS NULL AND target <> 'public.summary')}),
	'', 'every view is active, says nothing more, and those recomputed whole say when');

# ---- beyond it, behind a backlog: groups through joins held ----

# The groups-through-joins view holds its keys while batches are cut
# (065): an item's orders deleted in the first batch, the item itself in a
# later one, so that neither batch alone finds its group.  Its keys are the
# images of the changed rows (the columns that lead to the group key):
# sixty new items make more than fifty of them.
$offset = -s $node->logfile;
my $pid = DeltaJoinWorkload::worker_pid($node);
ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), 'worker stopped');
$node->safe_psql(
	'postgres', q{
	BEGIN;
	DELETE FROM orders WHERE merchant_id = 2 AND item_id = 5;
	INSERT INTO items SELECT 4, g, 'item ' || g || ' of 4' FROM generate_series(1, 60) g;
	INSERT INTO orders SELECT 4, g, 2000 + g, g FROM generate_series(1, 60) g;
	UPDATE orders SET amount = amount + 1 WHERE merchant_id = 1;
	COMMIT;});
# more than 16 MB of WAL between them, so that the batch is cut even when
# it spilled (a batch that spilled reads on through less: decoding.c)
$node->safe_psql('postgres',
	"CREATE TABLE wal_filler (pad text); INSERT INTO wal_filler SELECT repeat('x', 300) FROM generate_series(1, 80000)");
$node->safe_psql('postgres', q{
	UPDATE items SET item_name = 'gone soon' WHERE merchant_id = 2 AND item_id = 5;
	DELETE FROM items WHERE merchant_id = 2 AND item_id = 5;
	UPDATE orders SET amount = amount + 2 WHERE merchant_id = 2;});
kill 'CONT', $pid;
check_all('a backlog of cut batches');
like(dropped_lines($offset), qr/by_name/, 'the held view dropped its keys, and said so');
is($node->safe_psql('postgres', q{SELECT count(*) FROM by_name WHERE item_name = 'gone soon'}),
	'0', 'no group of the deleted item is left');

# ---- the bound raised: keys kept again ----

$node->safe_psql('postgres',
	"ALTER SYSTEM SET delta_join.max_waiting_keys = 100000; SELECT pg_reload_conf()");
# (time for the worker to read the setting before the batch it bounds)
$node->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
$offset = -s $node->logfile;
lock_targets();
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1');
views_wait('every view waits behind the lock, with the bound raised');
$locker->query_safe('COMMIT');
$locker->quit;
check_all('every order changed, the bound raised');
is(dropped_lines($offset), '', 'no view dropped its keys');

done_testing();
