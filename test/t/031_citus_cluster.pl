# Distributed delta views on a real Citus cluster (issue 11): a coordinator
# and two worker nodes, a third worker added later, all on this machine,
# listening on 127.0.0.1 only.
#
# Over orders and items distributed and co-located by merchant_id, a join
# view and an aggregate view are made on the coordinator; concurrent random
# DML through the coordinator, with multi-shard statements and two-phase
# transactions, must leave them exact after wait() (the join under the
# residual rule: deleted rows may stay, no row is missing or stale).  Then
# the same after a shard move during writes, after a node is added and the
# shards rebalanced, and after a worker node's apply worker is killed and
# the node restarted.  The coordinator-side refusals, the managed shard
# views, status, explain, refresh, drop_view and an ordinary role are
# checked too.
#
# make test builds Citus from ../shared/vendor/citus when it is not
# installed; without it this test is skipped.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $pkglibdir = DeltaJoinTest::citus_pkglibdir();
plan skip_all => "Citus is not installed (no citus.so in pg_config --pkglibdir)"
  unless defined $pkglibdir;

my %conf = (
	shared_preload_libraries => 'citus,delta_join',
	max_connections => '100',
	max_worker_processes => '20',
	max_replication_slots => '20',
	max_wal_senders => '20',
	'citus.shard_count' => '4',
	listen_addresses => '127.0.0.1',
	'citus.local_hostname' => '127.0.0.1');
# Citus's shard moves decode with pgoutput and its splits with its own plugin
$conf{output_plugin_libraries} = 'pgoutput, test_decoding, delta_join, citus'
  if DeltaJoinTest::has_output_plugin_libraries();

sub citus_node
{
	my ($name) = @_;
	my $node = DeltaJoinTest::new_node($name, conf => \%conf, extension => 0);
	$node->safe_psql('postgres', 'CREATE EXTENSION citus');
	return $node;
}

my $coord = citus_node('coordinator');
my @workers = (citus_node('worker1'), citus_node('worker2'));
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $_->port . ")")
  foreach @workers;
$coord->safe_psql('postgres', 'CREATE EXTENSION delta_join');

$coord->safe_psql(
	'postgres', q{
	CREATE TABLE orders (merchant_id bigint, note text, order_id bigint, item_id bigint,
	                     amount int, PRIMARY KEY (merchant_id, order_id));
	CREATE TABLE items (merchant_id bigint, item_id bigint, name text,
	                    PRIMARY KEY (merchant_id, item_id));
	SELECT create_distributed_table('orders', 'merchant_id');
	SELECT create_distributed_table('items', 'merchant_id', colocate_with => 'orders');
	INSERT INTO items SELECT m, i, 'item ' || m || '/' || i
	  FROM generate_series(1, 40) m, generate_series(1, 5) i;
	INSERT INTO orders (merchant_id, order_id, item_id, amount) SELECT m, o, 1 + o % 5, o FROM generate_series(1, 40) m, generate_series(1, 20) o;});

# The error of a statement on a node, with its SQLSTATE
sub error_of
{
	my ($node, $sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

my $join = 'SELECT o.merchant_id, o.order_id, i.name, o.amount FROM orders o '
  . 'JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id';
my $agg = 'SELECT merchant_id, count(*) AS n, sum(amount) AS total, max(order_id) AS last_order '
  . 'FROM orders GROUP BY merchant_id';

like(
	$coord->safe_psql('postgres', "SELECT string_agg(e, E'\\n') FROM delta_join.explain(\$q\$ $join \$q\$) e"),
	qr/^Distributed: one view per shard group \(4 groups of tables co-located with orders\), on the node that holds it; the target is distributed by column merchant_id\nDelta Join/,
	'explain on the coordinator shows the shard-group plan');

my $t0 = time();
# the first distributed view of the cluster, by an ordinary role (it makes
# the definitions a reference table in a transaction of its own)
$coord->safe_psql(
	'postgres', q{
	CREATE ROLE early LOGIN;
	GRANT SELECT, UPDATE ON orders TO early;
	GRANT CREATE ON SCHEMA public TO early;});
$coord->safe_psql('postgres',
	"SET ROLE early; SELECT delta_join.create_view('totals', \$q\$ $agg \$q\$)");
$coord->safe_psql('postgres', "SELECT delta_join.create_view('wide', \$q\$ $join \$q\$)");
note sprintf('two distributed views created in %d s', time() - $t0);

is( $coord->safe_psql('postgres',
		q{SELECT string_agg(logicalrelid::text || ':' || colocationid::text, ',' ORDER BY logicalrelid::text)
		  FROM pg_dist_partition WHERE logicalrelid::text IN ('orders', 'wide', 'totals')}) =~
	  /^orders:(\d+),totals:\1,wide:\1$/ ? 'co-located' : 'not',
	'co-located', 'the targets are distributed tables co-located with the sources');
is( $coord->safe_psql('postgres',
		q{SELECT (SELECT count(*) FROM wide) = (SELECT count(*) FROM orders)}),
	't', 'create_view filled every shard group before returning');

# Each worker node holds the views of its two shard groups, marked as
# managed by the coordinator.
foreach my $w (@workers)
{
	is( $w->safe_psql('postgres',
			q{SELECT string_agg(DISTINCT managed_by, ',') || ' ' || count(*) FROM delta_join.views}),
		'public.totals,public.wide 4',
		'node ' . $w->name . ': two shard views per distributed view, managed by the coordinator');
}
my $shard_target =
  $workers[0]->safe_psql('postgres', "SELECT target FROM delta_join.views ORDER BY 1 LIMIT 1");
like(
	error_of($workers[0], "SELECT delta_join.drop_view('$shard_target')"),
	qr/55000: view "\Q$shard_target\E" is a shard group of distributed view "public.totals".*HINT:  Drop the distributed view on the coordinator: SELECT delta_join.drop_view\('public.totals'\);/s,
	'drop_view of a shard view on a node is refused, naming the coordinator');

# A column dropped now stays in the shards as a dropped column, but the
# shards a move or a split makes later lack it: their columns are numbered
# otherwise than the table's on their node.
$coord->safe_psql('postgres', 'ALTER TABLE orders DROP COLUMN note');

# -- the workload: single-row and multi-shard DML, two-phase transactions
my $scripts = DeltaJoinWorkload::write_scripts(
	order_update => [
		4, q{\set m random(1, 40)
\set o random(1, 30)
UPDATE orders SET amount = amount + 1, item_id = 1 + (item_id + :o) % 5 WHERE merchant_id = :m AND order_id = :o;
}
	],
	order_upsert => [
		3, q{\set m random(1, 40)
\set o random(1, 30)
INSERT INTO orders VALUES (:m, :o, 1 + :o % 5, :o) ON CONFLICT (merchant_id, order_id) DO UPDATE SET amount = orders.amount - 1;
}
	],
	order_delete => [
		1, q{\set m random(1, 40)
\set o random(1, 30)
DELETE FROM orders WHERE merchant_id = :m AND order_id = :o;
}
	],
	item_rename => [
		2, q{\set m random(1, 40)
\set i random(1, 5)
UPDATE items SET name = name || '+' WHERE merchant_id = :m AND item_id = :i;
}
	],
	two_phase => [
		2, q{\set m1 random(1, 40)
\set m2 random(1, 40)
\set o random(1, 30)
BEGIN;
UPDATE orders SET amount = amount + 10 WHERE merchant_id = :m1 AND order_id = :o;
UPDATE orders SET amount = amount - 10 WHERE merchant_id = :m2 AND order_id = :o;
UPDATE items SET name = 'x' || :o WHERE merchant_id = :m2 AND item_id = 1 + :o % 5;
COMMIT;
}
	],
	multi_shard => [
		1, q{\set o random(1, 30)
UPDATE orders SET amount = amount + 1 WHERE order_id = :o;
}
	]);

# The join under the residual rule (DeltaJoinTest::target_ok in mode
# upsert): every row of the query is in the target, and a target row whose
# key (merchant_id, order_id) the query has equals the query's row.
sub check_views
{
	my ($name) = @_;
	ok(DeltaJoinWorkload::wait_views($coord, undef, '120s'), "$name: wait() returned true");
	DeltaJoinTest::target_ok($coord, 'wide', $join, "$name: join", mode => 'upsert');
	DeltaJoinTest::target_ok($coord, 'totals', $agg, "$name: aggregate");
}

DeltaJoinWorkload::pgbench_ok($coord, $scripts, 'concurrent DML through the coordinator',
	clients => 4, transactions => 300, seed => 11);
check_views('after concurrent DML');

# -- create_view and refresh concurrently during writes (issue 21): each
# worker node fills its shard groups while the writers go on
my $bench_c = DeltaJoinWorkload::pgbench_start($coord, $scripts,
	clients => 2, seconds => 8, seed => 21);
sleep 1;
$coord->safe_psql('postgres',
	"SELECT delta_join.create_view('wide_c', \$q\$ $join \$q\$, concurrently => true)");
$coord->safe_psql('postgres',
	"SET ROLE early; SELECT delta_join.create_view('totals_c', \$q\$ $agg \$q\$, concurrently => true)");
is( $coord->safe_psql('postgres', "SELECT delta_join.refresh('wide', concurrently => true) >= 0"),
	't', 'refresh(concurrently) of a distributed view during writes');
my $res_c = DeltaJoinWorkload::pgbench_finish($bench_c);
ok($res_c->{rc} == 0 && $res_c->{processed} > 0,
	"writes went on during the concurrent create and refresh ($res_c->{processed} transactions)")
  or diag($res_c->{stderr});
check_views('after a concurrent create and refresh during writes');
DeltaJoinTest::target_ok($coord, 'wide_c', $join, 'a distributed view created concurrently during writes',
	mode => 'upsert');
DeltaJoinTest::target_ok($coord, 'totals_c', $agg,
	'an aggregate created concurrently during writes by an ordinary role');
foreach my $w (@workers)
{
	is( $w->safe_psql('postgres',
			q{SELECT count(*) || ' ' || bool_and(state = 'active') FROM delta_join.views
			  WHERE managed_by = 'public.wide_c'}),
		'2 true', 'node ' . $w->name . ': the concurrent create made the views of its two shard groups');
}
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('wide_c')");
$coord->safe_psql('postgres', "SET ROLE early; SELECT delta_join.drop_view('totals_c')");

is( $coord->safe_psql('postgres',
		q{SELECT string_agg(target || ' ' || state || ' ' || shard_groups, ', ' ORDER BY target)
		  FROM delta_join.distributed_status}),
	'public.totals active 4, public.wide active 4',
	'distributed_status: one row per distributed view, over its 4 shard groups');
is( $coord->safe_psql('postgres',
		q{SELECT count(DISTINCT node) || ' ' || count(*) || ' ' || CASE WHEN bool_and(state = 'active') THEN 'active' END
		  FROM delta_join.shard_groups}),
	'2 8 active', 'shard_groups: the 8 shard views on the 2 worker nodes, all active');
ok( $coord->safe_psql('postgres',
		q{SELECT changes_seen > 0 AND mode = 'delta (distributed, 4 shard groups)'
		  FROM delta_join.status WHERE target = 'public.totals'}) eq 't',
	'status on the coordinator has the distributed view, its counters summed');

# -- a shard move during writes
my $bench = DeltaJoinWorkload::pgbench_start($coord, $scripts,
	clients => 2, seconds => 6, seed => 12);
sleep 1;
my ($shard, $from_port) = split /\|/,
  $coord->safe_psql('postgres',
	q{SELECT shardid, nodeport FROM citus_shards WHERE table_name = 'orders'::regclass
	  ORDER BY shardid LIMIT 1});
my ($from) = grep { $_->port == $from_port } @workers;
my ($to) = grep { $_->port != $from_port } @workers;
$coord->safe_psql('postgres',
	    "SELECT citus_move_shard_placement($shard, '127.0.0.1', "
	  . $from->port
	  . ", '127.0.0.1', "
	  . $to->port
	  . ", shard_transfer_mode => 'force_logical')");
my $res = DeltaJoinWorkload::pgbench_finish($bench);
ok($res->{rc} == 0 && $res->{processed} > 0,
	"writes went on during the shard move ($res->{processed} transactions)")
  or diag($res->{stderr});
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
check_views('after a shard move during writes');
is( $to->safe_psql('postgres', 'SELECT count(*) FROM delta_join.views'),
	'6', 'the node the shard group moved to has its views');
ok( $from->poll_query_until('postgres', 'SELECT count(*) = 2 FROM delta_join.views'),
	'the node it left dropped them');

# -- a node added, then the shards rebalanced
my $new = citus_node('worker3');
$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $new->port . ")");
$coord->safe_psql('postgres',
	"SELECT citus_rebalance_start(shard_transfer_mode => 'force_logical'); SELECT citus_rebalance_wait()");
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
ok( $new->poll_query_until('postgres',
		q{SELECT count(*) > 0 AND bool_and(managed_by IS NOT NULL) FROM delta_join.views}),
	'the new node made the views of the groups moved to it, without being asked');
DeltaJoinWorkload::pgbench_ok($coord, $scripts, 'DML after the rebalance',
	clients => 3, transactions => 200, seed => 13);
check_views('after adding a node and rebalancing');
is( $coord->safe_psql('postgres',
		q{SELECT count(DISTINCT node) || ' ' || count(*) || ' ' || CASE WHEN bool_and(state = 'active') THEN 'active' END
		  FROM delta_join.shard_groups}),
	'3 8 active', 'shard_groups: the 8 shard views over 3 worker nodes');

# -- a shard split: the groups of both halves get views, the old one's go
my ($split_shard, $lo, $hi) = split /\|/,
  $coord->safe_psql('postgres',
	q{SELECT shardid, shardminvalue, shardmaxvalue FROM pg_dist_shard
	  WHERE logicalrelid = 'orders'::regclass ORDER BY shardid LIMIT 1});
# Both halves go to the two nodes that do not hold the shard.  A half
# kept on the shard's own node can hang the split for good (Citus issue
# 6790): its replica identity is made after the replication slot, so an
# UPDATE that commits in between reaches it without its key columns.
my $node_ids = $coord->safe_psql('postgres',
	qq{SELECT string_agg(nodeid::text, ',' ORDER BY nodeid) FROM pg_dist_node
	   WHERE groupid <> 0 AND groupid <> (SELECT groupid FROM pg_dist_placement
	                                     WHERE shardid = $split_shard)});
my $mid = int(($lo + $hi) / 2);
$bench = DeltaJoinWorkload::pgbench_start($coord, $scripts,
	clients => 2, seconds => 5, seed => 16);
$coord->safe_psql('postgres',
	"SELECT citus_split_shard_by_split_points($split_shard, ARRAY['$mid'], ARRAY[$node_ids], shard_transfer_mode => 'force_logical')"
);
$res = DeltaJoinWorkload::pgbench_finish($bench);
ok($res->{rc} == 0 && $res->{processed} > 0,
	"writes went on during a shard split ($res->{processed} transactions)")
  or diag($res->{stderr});
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
check_views('after a shard split during writes');
is( $coord->safe_psql('postgres',
		q{SELECT count(*) || ' ' || CASE WHEN bool_and(state = 'active') THEN 'active' END
		  FROM delta_join.shard_groups}),
	'10 active', 'shard_groups: the 5 groups of each view after the split, all active');

# -- a node without delta_join preloaded cannot join
my $bare = DeltaJoinTest::new_node('bare',
	conf => { %conf, shared_preload_libraries => 'citus' }, extension => 0);
$bare->safe_psql('postgres', 'CREATE EXTENSION citus');
like(
	error_of($coord, "SELECT citus_add_node('127.0.0.1', " . $bare->port . ")"),
	qr/delta_join.*shared_preload_libraries/,
	'a node without delta_join preloaded is refused with an error naming the setting');
$bare->stop;

# -- crashes: a node's apply worker killed, then a node restarted
my $victim = $workers[0];
my $pid = $victim->safe_psql('postgres', 'SELECT worker_pid FROM delta_join._database_state()');
ok($pid =~ /^\d+$/, "node worker1 runs an apply worker ($pid)");
$victim->safe_psql('postgres', "SELECT pg_terminate_backend($pid)");
DeltaJoinWorkload::pgbench_ok($coord, $scripts, 'DML while an apply worker restarts',
	clients => 3, transactions => 150, seed => 14);
$workers[1]->stop('immediate');
$workers[1]->start;
DeltaJoinWorkload::pgbench_ok($coord, $scripts, 'DML after a node restart',
	clients => 3, transactions => 150, seed => 15);
check_views('after a killed apply worker and a crashed node');

# -- refresh and the refusals
is($coord->safe_psql('postgres', 'SELECT delta_join.refresh(\'totals\')'),
	$coord->safe_psql('postgres', 'SELECT count(*) FROM totals'),
	'refresh on the coordinator refreshes every shard group, and returns the rows of the target');

$coord->safe_psql(
	'postgres', q{
	CREATE TABLE notes (merchant_id bigint PRIMARY KEY, note text);
	SELECT create_distributed_table('notes', 'merchant_id', colocate_with => 'none');
	CREATE INDEX ON orders (item_id);
	CREATE INDEX ON items (item_id);
	CREATE TABLE currencies (code text PRIMARY KEY, rate numeric);
	SELECT create_reference_table('currencies');
	CREATE TABLE plain (merchant_id bigint PRIMARY KEY);});
like(
	error_of($coord,
		q{SELECT delta_join.create_view('bad', 'SELECT o.merchant_id, o.order_id, n.note FROM orders o JOIN notes n ON n.merchant_id = o.merchant_id')}
	),
	qr/0A000: distributed delta view: sources public.orders and public.notes are not co-located.*HINT:  Distribute public.notes with colocate_with => 'public.orders'/s,
	'sources that are not co-located are refused');
like(
	error_of($coord,
		q{SELECT delta_join.create_view('bad', 'SELECT o.merchant_id, o.order_id, i.merchant_id AS item_merchant, i.item_id, i.name FROM orders o JOIN items i ON i.item_id = o.item_id')}
	),
	qr/0A000: distributed delta view: the join does not equate the distribution column of public.items with the others'.*HINT:  Add i.merchant_id = ... to the join condition/s,
	'a join key without the distribution column is refused');
$coord->safe_psql('postgres', 'ALTER TABLE orders REPLICA IDENTITY FULL');
like(
	error_of($coord,
		q{SELECT delta_join.create_view('bad', 'SELECT item_id, count(*) FROM orders GROUP BY item_id')}
	),
	qr/0A000: distributed delta view: no output column holds the distribution value.*HINT:  Group by the distribution column and select it/s,
	'a group key without the distribution column is refused');
like(
	error_of($coord,
		q{SELECT delta_join.create_view('bad', 'SELECT o.merchant_id, o.order_id, c.rate FROM orders o JOIN currencies c ON c.code = o.merchant_id::text')}
	),
	qr/0A000: /, 'a reference table as a lookup side is refused');
like(
	error_of($coord,
		q{SELECT delta_join.create_view('bad', 'SELECT o.merchant_id, o.order_id, p.merchant_id AS m FROM orders o JOIN plain p ON p.merchant_id = o.merchant_id')}
	),
	qr/0A000: distributed delta view: source public.plain is not a distributed table of Citus.*It is a local table/s,
	'a local table joined to a distributed one is refused');
$coord->safe_psql('postgres', 'CREATE TABLE local_target (merchant_id bigint, n bigint, total bigint, last_order bigint, PRIMARY KEY (merchant_id))');
like(
	error_of($coord, "SELECT delta_join.create_view('local_target', \$q\$ $agg \$q\$)"),
	qr/55000: target "local_target" is not distributed by column "merchant_id", co-located with orders/,
	'an existing target must be distributed and co-located');
# On a worker node (whose Citus catalog lists the distributed tables too)
# a view over them is refused, as everywhere but on the coordinator: the
# check read the options' "distributed" flag, which create_view and
# explain left uninitialised, and let the view be made (it went to error)
like(
	error_of($workers[0], "SELECT delta_join.create_view('on_worker', \$q\$ $agg \$q\$)"),
	qr/0A000: delta view rule 1: source "public.orders" is a distributed table of Citus.*HINT:  Create the view on the Citus coordinator/s,
	'create_view over a distributed table on a worker node is refused, naming the coordinator');
like(
	$workers[0]->safe_psql('postgres', "SELECT string_agg(e, E'\\n') FROM delta_join.explain(\$q\$ $agg \$q\$) e"),
	qr/delta view rule 1: source "public.orders" is a distributed table of Citus/,
	'and explain() there says why');

# An existing distributed target must be empty, its rows read through Citus
# from the worker nodes; once emptied, it is taken
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE full_target (merchant_id bigint, n bigint, total bigint, last_order bigint,
	                          PRIMARY KEY (merchant_id));
	SELECT create_distributed_table('full_target', 'merchant_id', colocate_with => 'orders');
	INSERT INTO full_target VALUES (3, 1, 1, 1);});
like(
	error_of($coord, "SELECT delta_join.create_view('full_target', \$q\$ $agg \$q\$)"),
	qr/55000: target "full_target" is not empty/,
	'an existing distributed target must be empty');
$coord->safe_psql('postgres',
	"TRUNCATE full_target; SELECT delta_join.create_view('full_target', \$q\$ $agg \$q\$)");
ok(DeltaJoinWorkload::wait_views($coord, 'full_target', '60s'),
	'an existing empty distributed target is taken');
DeltaJoinTest::target_ok($coord, 'full_target', $agg, 'a view into an existing distributed target');
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('full_target')");

# wait() in the transaction that made a view neither hangs nor fails (its
# nodes' sync never waits for the view lock that transaction holds)
like(
	$coord->safe_psql('postgres',
		"BEGIN; SELECT delta_join.create_view('in_txn', \$q\$ $agg \$q\$); SELECT delta_join.wait(NULL, '10s'); COMMIT;"),
	qr/^in_txn\n[tf]$/, 'wait() in the creating transaction returns');
ok(DeltaJoinWorkload::wait_views($coord, 'in_txn', '60s'), 'and after the commit the new view is fresh');
DeltaJoinTest::target_ok($coord, 'in_txn', $agg, 'a view made in a transaction block');
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('in_txn')");

# -- an ordinary role
$coord->safe_psql(
	'postgres', q{
	CREATE ROLE alice LOGIN;
	CREATE ROLE bob LOGIN;
	GRANT SELECT, UPDATE ON orders, items TO alice;
	GRANT CREATE ON SCHEMA public TO alice;});
$coord->safe_psql('postgres',
	"SET ROLE alice; SELECT delta_join.create_view('alice_totals', \$q\$ $agg \$q\$)");
is($coord->safe_psql('postgres', 'SELECT count(*) FROM alice_totals'),
	$coord->safe_psql('postgres', 'SELECT count(*) FROM totals'),
	'an ordinary role with the rights create_view asks makes a distributed view');
like(
	error_of($coord,
		"SET ROLE bob; DELETE FROM delta_join.distributed_catalog WHERE target = 'public.alice_totals'"),
	qr/42501: must be owner of table alice_totals/,
	"another role cannot drop alice's shard views through the catalog");
like(
	error_of($coord, "SET ROLE bob; SELECT delta_join.drop_view('alice_totals')"),
	qr/42501: must be owner of table alice_totals/,
	"nor with drop_view");

# -- what the attacking review found (each crashed or misled before)
$coord->safe_psql(
	'postgres', q{
	CREATE SCHEMA bob AUTHORIZATION bob;
	SET ROLE bob;
	CREATE TABLE bob.ref (k bigint PRIMARY KEY, v int);
	SELECT create_reference_table('bob.ref');});
like(
	error_of($coord,
		q{SET ROLE bob; INSERT INTO delta_join.distributed_catalog (target, query, search_path, settings) VALUES ('bob.ref', 'SELECT k, v FROM bob.ref', 'bob', '{}')}
	),
	qr/42809: "bob.ref" is not a hash-distributed table of Citus/,
	'a definition written by hand for a reference table is refused (a node crashed on it)');
is( $coord->safe_psql('postgres',
		q{SELECT string_agg(DISTINCT search_path, ' | ') FROM delta_join.distributed_catalog}),
	'public',
	'a definition keeps the schemas its names were read in, "$user" resolved (a node re-reads them as another role)');
like(
	error_of($coord,
		"UPDATE delta_join.distributed_catalog SET query = 'SELECT 1' WHERE target = 'public.wide'"),
	qr/0A000: a distributed view's definition cannot be changed/,
	'a definition cannot be edited');
like(
	error_of($coord, 'ALTER TABLE orders RENAME COLUMN amount TO amt'),
	qr/0A000: cannot rename "orders" or move it to another schema: distributed view "public.(alice_totals|totals|wide)" uses it/,
	'renaming a column of a source is refused (moved groups would not find it)');
like(
	error_of($coord, 'ALTER TABLE wide RENAME TO wide2'),
	qr/0A000: cannot rename "wide"/, 'so is renaming a target');
like(
	error_of($coord, 'ALTER INDEX items RENAME TO items_x'),
	qr/0A000: cannot rename "items"/, 'so is renaming a source through ALTER INDEX');
$coord->safe_psql(
	'postgres', q{
	CREATE SCHEMA sx;
	CREATE TABLE sx.t (merchant_id bigint PRIMARY KEY, v int);
	SELECT create_distributed_table('sx.t', 'merchant_id', colocate_with => 'orders');
	SELECT delta_join.create_view('sx.tv', 'SELECT merchant_id, v FROM sx.t');
	CREATE TABLE free (k bigint PRIMARY KEY);
	SELECT create_distributed_table('free', 'k');});
like(
	error_of($coord, 'ALTER SCHEMA sx RENAME TO sy'),
	qr/0A000: cannot rename "sx"/, 'and renaming a schema that holds one of its tables');
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('sx.tv')");
$coord->safe_psql('postgres', 'ALTER TABLE free RENAME TO free2');
pass('a table no view uses renames freely');
like(
	error_of($coord,
		"BEGIN; UPDATE orders SET amount = amount WHERE merchant_id = 1; SELECT delta_join.create_view('late', \$q\$ $agg \$q\$); COMMIT"),
	qr/25001: cannot create a distributed delta view in a transaction that has already written or used distributed tables/,
	'create_view after a distributed write in its transaction is refused (it hung)');
$coord->safe_psql('postgres', q{
	CREATE TABLE again (merchant_id bigint PRIMARY KEY, n bigint);
	SELECT create_distributed_table('again', 'merchant_id', colocate_with => 'orders');});
$coord->safe_psql('postgres',
	"SELECT delta_join.create_view('again', \$q\$ SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id \$q\$)");
$coord->safe_psql('postgres', q{
	BEGIN;
	DROP TABLE again;
	CREATE TABLE again (merchant_id bigint PRIMARY KEY, n bigint);
	SELECT create_distributed_table('again', 'merchant_id', colocate_with => 'orders');
	INSERT INTO again VALUES (1, 30);
	COMMIT;});
sleep 2;
is( $coord->safe_psql('postgres', q{INSERT INTO again VALUES (2, 5); SELECT string_agg(merchant_id || ':' || n, ',' ORDER BY merchant_id) FROM again}),
	'1:30,2:5',
	'a table made again under a dropped target\'s name is an ordinary table (the old view took it over)');
# a third review: a source dropped, a schema dropped and made again, a
# target whose name Citus shortens for its shards
$coord->safe_psql(
	'postgres', q{
	CREATE TABLE src2 (merchant_id bigint, k bigint, v int, PRIMARY KEY (merchant_id, k));
	SELECT create_distributed_table('src2', 'merchant_id', colocate_with => 'orders');
	SELECT delta_join.create_view('v2', 'SELECT merchant_id, sum(v) AS s FROM src2 GROUP BY merchant_id');
	CREATE SCHEMA so;
	CREATE TABLE so.t (merchant_id bigint PRIMARY KEY, n bigint);
	SELECT create_distributed_table('so.t', 'merchant_id', colocate_with => 'orders');
	SELECT delta_join.create_view('so.t', 'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');});
like(error_of($coord, 'DROP TABLE src2'),
	qr/2BP01: cannot drop a source of distributed view "public.v2"/,
	'a source of a distributed view is not dropped without CASCADE');
like(error_of($coord, 'DROP TABLE src2 CASCADE'),
	qr/NOTICE:  00000: drop cascades to distributed view "public.v2" \(its target stays\)/,
	'with CASCADE the view goes, and says so');
$coord->safe_psql('postgres', q{
	BEGIN;
	DROP SCHEMA so CASCADE;
	CREATE SCHEMA so;
	CREATE TABLE so.t (merchant_id bigint PRIMARY KEY, n bigint);
	SELECT create_distributed_table('so.t', 'merchant_id', colocate_with => 'orders');
	INSERT INTO so.t VALUES (1, 30);
	COMMIT;});
sleep 2;
is( $coord->safe_psql('postgres',
		q{SELECT (SELECT string_agg(merchant_id || ':' || n, ',') FROM so.t) || ' '
		  || (SELECT count(*) FROM delta_join.distributed_catalog WHERE target IN ('public.v2', 'so.t'))}),
	'1:30 0', 'DROP SCHEMA CASCADE takes the definitions of what it drops');
my $long = 'a_target_whose_name_citus_shortens_for_the_names_of_its_shards';
$coord->safe_psql('postgres',
	"SELECT delta_join.create_view('$long', \$q\$ SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id \$q\$)");
$coord->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 2');
is($coord->safe_psql('postgres', "SELECT delta_join.wait('$long', '60s')"),
	't', 'a target with shortened shard names is waited for');
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('$long', false)");
is( $workers[0]->safe_psql('postgres',
		"SELECT count(*) FROM delta_join.views WHERE managed_by = 'public.$long'"),
	'0', 'and drop_view drops its shard views');

$coord->safe_psql(
	'postgres', q{
	CREATE TABLE gone (merchant_id bigint PRIMARY KEY, n bigint);
	SELECT create_distributed_table('gone', 'merchant_id', colocate_with => 'orders');});
$coord->safe_psql('postgres',
	"SELECT delta_join.create_view('gone', \$q\$ SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id \$q\$)");
$coord->safe_psql('postgres', 'DROP TABLE gone');
ok( $coord->poll_query_until('postgres',
		q{SELECT count(*) = 0 FROM delta_join.distributed_catalog WHERE target = 'public.gone'}),
	'the definition of a target dropped with DROP TABLE goes too');
$new->stop('fast');
like(
	$coord->safe_psql('postgres',
		q{SELECT state || ': ' || reason FROM delta_join.status WHERE target = 'public.totals'}),
	qr/^stalled: node 127.0.0.1:\d+ did not answer/,
	'a node that is down makes status say so, rather than show its groups gone');
$new->start;
# (the restarted node's apply worker may not run yet, and until it does
# its views are stalled: waited for first)
ok( $coord->poll_query_until(
		'postgres', q{SELECT bool_and(state = 'active') FROM delta_join.status
		WHERE target IN ('public.totals', 'public.wide')}),
	'the views are active again once the node is back');
like(
	$coord->safe_psql('postgres',
		q{SET ROLE bob; SELECT string_agg(target || ' ' || state, ', ' ORDER BY target) FROM delta_join.status}),
	qr/public.totals active.*public.wide active/,
	'an ordinary role reads status across the nodes');

# -- a group's old shards dropped while the node drops its views
#
# After a shard group moved or split away, the node that held it drops the
# group's views (its sync: the apply worker once a second, or _sync_node()
# for the coordinator's wait()), while Citus's cleanup drops the group's
# old shards whenever it runs.  The sync read the views without a lock:
# a target shard dropped before the sync unguarded it was looked up by name
# and found none, and the node crashed (signal 11, during the shard split
# above, now and then).  Made here with locks: the sync, run by
# _sync_node() in a session, waits for the query view of the group's
# totals view, held by another session, while a third drops the target
# shard (with the event triggers off, as if its view had gone before);
# then the query view is let go.
my ($moved_shard, $moved_name, $moved_port) = split /\|/,
  $coord->safe_psql('postgres',
	q{SELECT shardid, shard_name, nodeport FROM citus_shards
	  WHERE table_name = 'totals'::regclass ORDER BY shardid LIMIT 1});
my ($holder_node) = grep { $_->port == $moved_port } (@workers, $new);
my ($other_node) = grep { $_->port != $moved_port } (@workers, $new);
$coord->safe_psql('postgres',
	'ALTER SYSTEM SET citus.defer_shard_delete_interval = -1; SELECT pg_reload_conf()');
my ($moved_view, $query_view) = split /\|/,
  $holder_node->safe_psql('postgres',
	"SELECT view_id, query_view::regclass FROM delta_join.view_catalog WHERE target = 'public.$moved_name'::regclass");
my $gate = $holder_node->background_psql('postgres');
my $gate_pid = $gate->query_safe('SELECT pg_backend_pid()');
$gate->query_safe('SELECT pg_advisory_lock(4711)');
$gate->query_safe('BEGIN');
$gate->query_safe("LOCK TABLE $query_view IN ACCESS SHARE MODE");
# the sync waits for the gate, holding off the node's own sync (the view lock)
my $syncer = $holder_node->background_psql('postgres');
my $syncer_pid = $syncer->query_safe('SELECT pg_backend_pid()');
$syncer->query_until(
	qr/syncing/, q{\echo syncing
DO $$
BEGIN
	LOCK TABLE delta_join.view_catalog IN SHARE UPDATE EXCLUSIVE MODE;
	PERFORM pg_advisory_xact_lock(4711);
	PERFORM delta_join._sync_node();
END $$;
});
ok( $holder_node->poll_query_until(
		'postgres', "SELECT $gate_pid = ANY (pg_blocking_pids($syncer_pid))"),
	'old shards: the sync waits, holding the view lock');
$coord->safe_psql('postgres',
	    "SELECT citus_move_shard_placement($moved_shard, '127.0.0.1', $moved_port, '127.0.0.1', "
	  . $other_node->port
	  . ", shard_transfer_mode => 'force_logical')");
$gate->query_safe('SELECT pg_advisory_unlock(4711)');
ok( $holder_node->poll_query_until(
		'postgres', qq{
		SELECT l.granted IS FALSE FROM pg_locks l
		WHERE l.pid = $syncer_pid AND l.relation = '$query_view'::regclass}),
	'old shards: the sync drops the moved group\'s views, and waits for the query view of one');
my $dropper = $holder_node->background_psql('postgres');
my $dropper_pid = $dropper->query_safe('SELECT pg_backend_pid()');
$dropper->query_safe(
	'SET citus.enable_manual_changes_to_shards = on; SET session_replication_role = replica');
$dropper->query_until(qr/dropping/, "\\echo dropping\nDROP TABLE public.$moved_name;\n");
ok( $holder_node->poll_query_until(
		'postgres', qq{
		SELECT to_regclass('public.$moved_name') IS NULL
		  OR $syncer_pid = ANY (pg_blocking_pids($dropper_pid))}),
	'old shards: the target shard is dropped, or waits for the sync');
$gate->query_safe('COMMIT');
is($syncer->query_safe("SELECT 'synced'"), 'synced', 'old shards: the sync is done');
is($dropper->query_safe("SELECT 'dropped'"), 'dropped', 'old shards: the target shard is dropped');
$_->quit foreach ($gate, $syncer, $dropper);
ok(!$holder_node->log_contains(qr/terminated by signal/), 'old shards: no process crashed');
is( $holder_node->safe_psql('postgres',
		"SELECT count(*) FROM delta_join.view_catalog WHERE view_id = $moved_view"),
	'0', 'old shards: the view of the dropped target shard is gone');
$coord->safe_psql('postgres',
	'ALTER SYSTEM RESET citus.defer_shard_delete_interval; SELECT pg_reload_conf()');
$coord->safe_psql('postgres', 'CALL citus_cleanup_orphaned_resources()');
DeltaJoinWorkload::pgbench_ok($coord, $scripts, 'DML after the old shards went',
	clients => 2, transactions => 100, seed => 17);
check_views('after a group\'s old shards were dropped while its views were');

# -- drop_view drops the distributed target and every shard view
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('wide')");
$coord->safe_psql('postgres', "SELECT delta_join.drop_view('totals', false)");
is( $coord->safe_psql('postgres',
		q{SELECT to_regclass('wide') IS NULL AND to_regclass('totals') IS NOT NULL}),
	't', 'drop_view drops the distributed target, or keeps it whole with false');
is($coord->safe_psql('postgres', 'SELECT count(*) > 0 FROM totals'),
	't', 'the kept target still reads through the coordinator');
foreach my $w (@workers, $new)
{
	is( $w->safe_psql('postgres',
			q{SELECT count(*) FROM delta_join.views WHERE managed_by <> 'public.alice_totals'}),
		'0', 'node ' . $w->name . ': no shard view of the dropped views is left');
}

done_testing();
