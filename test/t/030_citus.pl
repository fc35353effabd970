# Citus on one node: a coordinator that holds its own shards.  A view of
# co-located distributed tables made there is a distributed view whose shard
# views are on the coordinator itself (031_citus_cluster runs the real
# cluster); what cannot run inside a shard group is refused with a clear
# error; views over the shard tables a node holds, writing into their
# co-located shard of a distributed target, are ordinary views; drop_view
# never drops a shard; and a table distributed after a view over it was
# made puts the view in error.
#
# make test builds Citus from ../shared/vendor/citus when it is not
# installed; without it this test is skipped.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $pkglibdir = DeltaJoinTest::citus_pkglibdir();
plan skip_all => "Citus is not installed (no citus.so in pg_config --pkglibdir)"
  unless defined $pkglibdir;

# (a split connects to the node over TCP, as citus.local_hostname)
my %conf = (
	shared_preload_libraries => 'citus,delta_join',
	max_connections => '60',
	listen_addresses => '127.0.0.1',
	'citus.local_hostname' => '127.0.0.1');
# Citus's splits decode with its own plugin
$conf{output_plugin_libraries} = 'pgoutput, test_decoding, delta_join, citus'
  if DeltaJoinTest::has_output_plugin_libraries();
my $node = DeltaJoinTest::new_node('citus', conf => \%conf, extension => 0);
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION citus;
	CREATE EXTENSION delta_join;}
);
$node->safe_psql('postgres',
	    "SELECT citus_set_coordinator_host('"
	  . $node->host . "', "
	  . $node->port . ");"
	  . "SELECT citus_set_node_property('"
	  . $node->host . "', "
	  . $node->port
	  . ", 'shouldhaveshards', true);");

$node->safe_psql(
	'postgres', q{
	CREATE TABLE orders (merchant_id bigint, order_id bigint, item_id bigint, amount int,
	                     PRIMARY KEY (merchant_id, order_id));
	CREATE TABLE items (merchant_id bigint, item_id bigint, name text,
	                    PRIMARY KEY (merchant_id, item_id));
	CREATE TABLE wide (merchant_id bigint, order_id bigint, name text, amount int,
	                   PRIMARY KEY (merchant_id, order_id));
	CREATE TABLE currencies (code text PRIMARY KEY, rate numeric);
	CREATE TABLE local_notes (merchant_id bigint PRIMARY KEY, note text);
	SELECT create_distributed_table('orders', 'merchant_id', shard_count => 4);
	SELECT create_distributed_table('items', 'merchant_id', colocate_with => 'orders');
	SELECT create_distributed_table('wide', 'merchant_id', colocate_with => 'orders');
	SELECT create_reference_table('currencies');
	INSERT INTO items SELECT m, i, 'item ' || m || '/' || i
	  FROM generate_series(1, 20) m, generate_series(1, 3) i;
	INSERT INTO orders SELECT m, o, 1 + o % 3, o FROM generate_series(1, 20) m, generate_series(1, 10) o;});

# The error of a statement, with its SQLSTATE (VERBOSITY verbose)
sub error_of
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', "\\set VERBOSITY verbose\n$sql");
	return $err;
}

my $join = 'SELECT o.merchant_id, o.order_id, i.name, o.amount FROM orders o '
  . 'JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id';

$node->safe_psql('postgres', "SELECT delta_join.create_view('joined', \$q\$ $join \$q\$)");
is( $node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || string_agg(DISTINCT managed_by, ',') FROM delta_join.views}),
	'4 public.joined',
	'a join of co-located distributed tables is a distributed view: one view per shard group, here on the coordinator');
$node->safe_psql('postgres',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id < 5; DELETE FROM items WHERE merchant_id = 20');
is($node->safe_psql('postgres', "SELECT delta_join.wait('joined')"), 't', 'wait() covers its shard groups');
DeltaJoinTest::target_ok($node, 'joined', $join, 'a distributed view', mode => 'upsert');
is($node->safe_psql('postgres', "SELECT delta_join.refresh('joined') > 0"),
	't', 'refresh() of a distributed view on a coordinator that holds its shards');
DeltaJoinTest::target_ok($node, 'joined', $join, 'a distributed view refreshed', mode => 'exact');
is( $node->safe_psql('postgres',
		q{SELECT target || ' ' || state || ' ' || shard_groups FROM delta_join.distributed_status}),
	'public.joined active 4', 'distributed_status shows it, over its 4 shard groups');

# A shard split that keeps a half on the node of the shard it splits, as
# isolate_tenant_to_new_shard does (here every half: one node).  Citus's
# split subscription on that node lists the shard being split, the target
# shard of the group's view among them, although its decoder sends their
# rows to the halves only: the check that refuses a subscription writing a
# target refused it, and the split failed.
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT isolate_tenant_to_new_shard('orders', 11, 'CASCADE', shard_transfer_mode => 'force_logical')");
is($ret, 0, 'isolate_tenant_to_new_shard of the sources of a distributed view') or diag($err);
$node->safe_psql('postgres',
	'CALL citus_cleanup_orphaned_resources(); UPDATE orders SET amount = amount + 1 WHERE merchant_id BETWEEN 9 AND 12');
is($node->safe_psql('postgres', "SELECT delta_join.wait('joined', '60s')"), 't',
	'wait() after the split');
DeltaJoinTest::target_ok($node, 'joined', $join, 'a distributed view after its tenant was isolated',
	mode => 'upsert');
is( $node->safe_psql('postgres',
		q{SELECT target || ' ' || state || ' ' || shard_groups FROM delta_join.distributed_status}),
	'public.joined active 6', 'the split shard group became three, each with its view');

like(
	error_of(q{SELECT delta_join.create_view('rates', 'SELECT code, rate FROM currencies')}),
	qr/0A000: distributed delta view: source public.currencies is not a distributed table of Citus.*DETAIL:  It is a reference table/s,
	'a reference table is refused');
like(
	$node->safe_psql('postgres',
		q{SELECT e FROM delta_join.explain('SELECT code, rate FROM currencies') e LIMIT 1}),
	qr/^Distributed: refused: distributed delta view: source public.currencies is not a distributed table of Citus HINT: Distribute it with create_distributed_table/,
	'explain() on the coordinator says why a query cannot be a distributed view');
like(
	error_of(
		q{SELECT delta_join.create_view('noted', 'SELECT n.merchant_id, n.note, o.order_id FROM local_notes n JOIN orders o ON o.merchant_id = n.merchant_id')}
	),
	qr/0A000: distributed delta view: source public.local_notes is not a distributed table of Citus.*DETAIL:  It is a local table/s,
	'a local table joined to a distributed one is refused');
like(
	error_of(
		q{SELECT delta_join.create_view('merchants', 'SELECT merchant_id, amount FROM orders ORDER BY amount, merchant_id, order_id LIMIT 3', strategy => 'auto')}
	),
	qr/0A000: distributed delta view: only joins and aggregates of co-located tables can be distributed/,
	'a query for the full-recompute path is refused');
like(
	error_of(
		q{SELECT delta_join.create_view('wide', 'SELECT merchant_id, merchant_id AS order_id, note AS name, 0 AS amount FROM local_notes')}
	),
	qr/0A000: target "public.wide" is a distributed table of Citus/,
	'a distributed target of a view over local tables is refused');
is($node->safe_psql('postgres', "SELECT count(*) FROM delta_join.views WHERE managed_by IS NULL"),
	'0', 'no view was left behind');

# ---- create_view and refresh concurrently (issue 21) ----
#
# A writer's transaction, open on orders when the create starts, is waited
# for by each shard group's fill; other writers go on meanwhile, and the
# view is exact once made.

my $writer = $node->background_psql('postgres');
my $cerr = '';

# Start create_view($name, the join, concurrently) while the writer's
# transaction, begun here, has updated every order; returns the creator's
# harness (its stderr in $cerr) once a shard group's fill waits for it.
sub start_held_create
{
	my ($name, $what) = @_;
	$writer->query_safe('BEGIN');
	$writer->query_safe('UPDATE orders SET amount = amount + 1');
	$cerr = '';
	my $h = IPC::Run::start(
		[   'psql', '-XAtq', '-d', $node->connstr('postgres'),
			'-c', "SELECT delta_join.create_view('$name', \$q\$ $join \$q\$, concurrently => true)"
		],
		'<', \undef, '>', \my $out, '2>', \$cerr);
	ok( $node->poll_query_until(
			'postgres', qq{
			SELECT count(*) > 0 FROM delta_join.progress
			WHERE target LIKE 'public.${name}%' AND phase = 'waiting for writers'}),
		$what);
	return $h;
}

# What is left of distributed view $name: its shard views, its definition,
# whether its target is gone ('0 0 true': nothing)
sub leftovers
{
	my ($name) = @_;
	return qq{
		SELECT (SELECT count(*) FROM delta_join.views WHERE managed_by = 'public.$name')
		  || ' ' || (SELECT count(*) FROM delta_join.distributed_catalog WHERE target = 'public.$name')
		  || ' ' || (to_regclass('$name') IS NULL)};
}

my $creator = start_held_create('joined_c',
	'a concurrent create of a distributed view: a shard group\'s fill waits for a writer that began before it');
is( $node->safe_psql(
		'postgres', q{
		SELECT command || ', ' || phase || ', on ' || node FROM delta_join.progress
		WHERE target = 'public.joined_c'}),
	'create_view concurrently, waiting for writers, on ' . $node->host . ':' . $node->port,
	'the coordinator\'s progress shows the group its node is at, under the distributed view\'s name');
is( scalar $node->psql(
		'postgres', q{
		SET lock_timeout = '10s';
		BEGIN;
		LOCK TABLE items IN ACCESS EXCLUSIVE MODE;
		ROLLBACK;
		SELECT 'locked'}),
	0,
	'the caller of the create keeps no lock on a source that the writer does not write (which DDL would wait for, and writers behind the DDL)'
);
is( $node->safe_psql(
		'postgres', q{
		SET statement_timeout = '20s';
		INSERT INTO orders SELECT m, 500, 1, 5 FROM generate_series(1, 20) m;
		UPDATE items SET name = name || '+' WHERE item_id = 1;
		SELECT 'written'}),
	'written', 'and other writers of the sources do not wait for it');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM delta_join.views WHERE managed_by = 'public.joined_c'}) < 4
	  ? 'not all' : 'all',
	'not all', 'the groups are made one at a time');
like(
	error_of(q{SELECT delta_join.refresh('joined_c')}),
	qr/55000: distributed view "public.joined_c" is being created concurrently/,
	'a refresh of a distributed view while its concurrent create runs is refused');
$writer->query_safe('COMMIT');
$creator->finish;
is($cerr, '', 'the concurrent create ends once the writer has');
is($node->safe_psql('postgres', "SELECT delta_join.wait('joined_c')"), 't', 'wait() covers its shard groups');
is( $node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || bool_and(state = 'active')
		  FROM delta_join.views WHERE managed_by = 'public.joined_c'}),
	'6 true', 'every shard group has its view, active');
is( $node->safe_psql('postgres',
		q{SELECT refreshed IS NULL FROM delta_join.distributed_catalog WHERE target = 'public.joined_c'}),
	't', 'and the definition no longer says the create is running');
DeltaJoinTest::target_ok($node, 'joined_c', $join, 'a distributed view created concurrently',
	mode => 'upsert');

$node->safe_psql('postgres', q{
	UPDATE orders SET amount = amount * 2 WHERE merchant_id % 3 = 0;
	DELETE FROM orders WHERE order_id = 500 AND merchant_id < 10;
	TRUNCATE wide;});
is( $node->safe_psql('postgres', "SELECT delta_join.refresh('joined_c', concurrently => true) > 0"),
	't', 'refresh(concurrently) of a distributed view writes the difference on every node');
DeltaJoinTest::target_ok($node, 'joined_c', $join, 'a distributed view refreshed concurrently',
	mode => 'exact');
like(
	error_of(q{BEGIN; SELECT delta_join.refresh('joined_c', concurrently => true); COMMIT;}),
	qr/25001: .*cannot run inside a transaction block/,
	'refresh(concurrently) of a distributed view is refused in a transaction block');
like(
	error_of(
		q{SET statement_timeout = '20s';
		WITH w AS (INSERT INTO orders VALUES (1, 600, 1, 1) RETURNING 1)
		SELECT delta_join.refresh('joined_c', concurrently => true) FROM w}),
	qr/25001: delta_join.refresh\(target, concurrently => true\) cannot run in a transaction that has written/,
	'refresh(concurrently) of a distributed view is refused in a transaction that has written a source (the node would wait for it, and it for the node)'
);

# A refresh() of a view whose concurrent create ended without finishing (as
# a restart of the coordinator leaves it; here its definition marked so by
# hand) rebuilds it; another refresh meanwhile waits for that one, and is not
# told that a create runs.
$node->safe_psql('postgres',
	q{UPDATE delta_join.distributed_catalog SET refreshed = '-infinity' WHERE target = 'public.joined_c'});
my $first = $node->background_psql('postgres');
$first->query_safe(q{BEGIN; SELECT delta_join.refresh('joined_c')});
like(
	error_of(q{SET lock_timeout = '2s'; SELECT delta_join.refresh('joined_c')}),
	qr/55P03: canceling statement due to lock timeout/,
	'a refresh of a view whose create ended unfinished waits for another such refresh');
$first->query_safe('COMMIT');
$first->quit;
is( $node->safe_psql('postgres',
		q{SELECT refreshed > '-infinity' FROM delta_join.distributed_catalog WHERE target = 'public.joined_c'}),
	't', 'which rebuilt it');

# A target whose name needs quoting, in a schema of its own
$node->safe_psql('postgres', q{CREATE SCHEMA "Odd Schema"});
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('\"Odd Schema\".\"Wide ''n'' Odd\"', \$q\$ $join \$q\$, concurrently => true)");
is( $node->safe_psql('postgres',
		q{SELECT count(*) || ' ' || bool_and(state = 'active') FROM delta_join.views
		  WHERE managed_by = '"Odd Schema"."Wide ''n'' Odd"'}),
	'6 true', 'a concurrent create into a target whose names need quoting');
is( $node->safe_psql('postgres',
		qq{SELECT count(*) FROM (($join) EXCEPT ALL SELECT * FROM "Odd Schema"."Wide 'n' Odd") missing}),
	'0', 'its target holds every row of the query');
$node->safe_psql('postgres', q{SELECT delta_join.drop_view('"Odd Schema"."Wide ''n'' Odd"')});

# A cancel of the caller while a node waits for a writer: nothing is left
# once the node's process has seen it
$creator = start_held_create('joined_x', 'a second concurrent create waits for a writer');
DeltaJoinTest::cancel_client($node, "create_view('joined_x'");
$creator->finish;
like($cerr, qr/canceling statement due to user request/, 'its caller is cancelled');
$writer->query_safe('COMMIT');
ok($node->poll_query_until('postgres', leftovers('joined_x'), '0 0 true'),
	'a cancelled concurrent create of a distributed view leaves no shard view, no definition and no target');

# drop_view() during the create does not wait for it: the create then fails
$creator = start_held_create('joined_d', 'a third concurrent create waits for a writer');
is( $node->safe_psql('postgres',
		"SET statement_timeout = '30s'; SELECT 'dropped' FROM delta_join.drop_view('joined_d')"),
	'dropped', 'drop_view() of a distributed view during its concurrent create does not wait for it');
$writer->query_safe('COMMIT');
$creator->finish;
like($cerr, qr/delta view "[^"]*joined_d_\d+" was dropped or changed during its concurrent backfill/,
	'the create then fails, naming the shard view');
is( $node->safe_psql('postgres', leftovers('joined_d')),
	'0 0 true', 'and nothing is left of it');

# drop_view(drop_table => false) during the create keeps the target, which
# the failed create then leaves alone; so it leaves a table of the target's
# name made after a drop_view() alone
foreach my $case (
	[ 'joined_k', "SELECT delta_join.drop_view('joined_k', drop_table => false)",
		'the target drop_view() kept' ],
	[ 'joined_r', "SELECT delta_join.drop_view('joined_r'); CREATE TABLE joined_r (note text)",
		'a table made under the target\'s name since' ])
{
	my ($name, $drop, $kept) = @$case;

	$creator = start_held_create($name, "a concurrent create of $name waits for a writer");
	$node->safe_psql('postgres', "SET statement_timeout = '30s'; $drop");
	$writer->query_safe('COMMIT');
	$creator->finish;
	like($cerr, qr/${name}\S*" was dropped/, "the create of $name fails");
	is($node->safe_psql('postgres', leftovers($name)), '0 0 false', "and $kept is still there");
	$node->safe_psql('postgres', "DROP TABLE $name");
}

# A failure on a node (here the fill's division by zero) is the caller's
# error, and leaves nothing behind.
my $zero = 'SELECT o.merchant_id, o.order_id, i.name, o.amount / (o.order_id - 7) AS amount '
  . 'FROM orders o JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id';
like(
	error_of("SELECT delta_join.create_view('joined_z', \$q\$ $zero \$q\$, concurrently => true)"),
	qr/delta_join failed on Citus node \d+: ERROR:  division by zero/,
	'a node\'s failure in a concurrent create is the caller\'s error');
is( $node->safe_psql('postgres', leftovers('joined_z')),
	'0 0 true', 'and leaves no shard view, no definition and no target');

# The same failure in the last shard group filled (merchant 18's), into the
# existing target wide, empty: the groups filled before it are emptied
is( $node->safe_psql(
		'postgres', q{
		SELECT get_shard_id_for_distribution_column('orders', 18) = max(shardid)
		FROM pg_dist_shard WHERE logicalrelid = 'orders'::regclass}),
	't', 'merchant 18 is in the last shard group');
(my $late_zero = $zero) =~ s/o\.order_id - 7/o.merchant_id - 18/;
like(
	error_of("SELECT delta_join.create_view('wide', \$q\$ $late_zero \$q\$, concurrently => true)"),
	qr/delta_join failed on Citus node \d+: ERROR:  division by zero/,
	'a concurrent create into an existing target fails in its last group');
is( $node->safe_psql('postgres', leftovers('wide') . q{ || ' ' || (SELECT count(*) FROM wide)}),
	'0 0 false 0', 'and leaves the target it found empty empty');

# A target that cannot be emptied (a foreign key references it) keeps those
# rows, with a warning; the rest of the create is undone all the same
$node->safe_psql(
	'postgres', q{
	CREATE TABLE wide_notes (merchant_id bigint, order_id bigint, note text,
	                         FOREIGN KEY (merchant_id, order_id) REFERENCES wide);
	SELECT create_distributed_table('wide_notes', 'merchant_id', colocate_with => 'orders');});
like(
	error_of("SELECT delta_join.create_view('wide', \$q\$ $late_zero \$q\$, concurrently => true)"),
	qr/division by zero/,
	'a concurrent create into a target a foreign key references fails in its last group');
is( $node->safe_psql('postgres', leftovers('wide') . q{ || ' ' || (SELECT count(*) > 0 FROM wide)}),
	'0 0 false true', 'and leaves no view and no definition, the rows it could not empty');
$node->safe_psql('postgres', 'DROP TABLE wide_notes; TRUNCATE wide');
like(
	error_of("BEGIN; SELECT delta_join.create_view('joined_t', \$q\$ $join \$q\$, concurrently => true); COMMIT;"),
	qr/25001: .*cannot run inside a transaction block/,
	'a concurrent create of a distributed view is refused in a transaction block');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('joined_c')");
is( $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM delta_join.views WHERE managed_by = 'public.joined_c')
		  || ' ' || (to_regclass('joined_c') IS NULL)}),
	'0 true', 'drop_view of a distributed view on a coordinator that holds shards drops its target');

# One shard group by hand: the co-located shards of orders, items and wide
# that hold merchant 7, on this node.
my ($o_shard, $i_shard, $w_shard) = split /\n/,
  $node->safe_psql('postgres',
	q{SELECT rel || '_' || get_shard_id_for_distribution_column(rel, 7)
	  FROM unnest(ARRAY['orders', 'items', 'wide']) WITH ORDINALITY AS t(rel, n) ORDER BY n});
like($w_shard, qr/^wide_\d+$/, "the target's shard for merchant 7 is $w_shard");

my $shard_join = "SELECT o.merchant_id, o.order_id, i.name, o.amount FROM $o_shard o "
  . "JOIN $i_shard i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id";
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('$w_shard', \$q\$ $shard_join \$q\$)");

$node->safe_psql(
	'postgres', q{
	INSERT INTO orders SELECT m, 100 + o, 1 + o % 3, o FROM generate_series(1, 20) m, generate_series(1, 5) o;
	UPDATE items SET name = name || ' renamed' WHERE item_id = 2;
	DELETE FROM orders WHERE order_id % 4 = 0;
	BEGIN; UPDATE orders SET amount = amount + 1; COMMIT;});
is($node->safe_psql('postgres', "SELECT delta_join.wait('$w_shard', '60s')"),
	't', 'a view over one shard group follows writes made through the distributed tables');
DeltaJoinTest::target_ok($node, $w_shard, $shard_join,
	'its shard of the target, over its shards (upsert mode: deleted orders stay)',
	mode => 'upsert');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM wide WHERE merchant_id = 7") > 0 ? 'rows' : 'none',
	'rows', 'and the distributed target shows its rows');

like(
	error_of("SELECT delta_join.drop_view('$w_shard')"),
	qr/0A000: target "$w_shard" is a shard of Citus table "wide".*HINT:  Keep the table: SELECT delta_join.drop_view\('$w_shard', false\);/s,
	'drop_view refuses to drop a shard');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('$w_shard', false)");
is($node->safe_psql('postgres', 'SELECT count(*) > 0 FROM wide WHERE merchant_id = 7'),
	't', 'dropping the view with drop_table false keeps the distributed table whole');

# DROP TABLE of a distributed target deletes its definition (its shard
# views go with the shards)
$node->safe_psql('postgres', 'DROP TABLE joined');
is( $node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM delta_join.views WHERE managed_by = 'public.joined')
		  || ' ' || (SELECT count(*) FROM delta_join.distributed_catalog)}),
	'0 0', 'DROP TABLE of a distributed target drops its view');

# A table distributed after a view over it was made: its changes now go to
# the shards, so the view can no longer be fresh.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE later (id bigint PRIMARY KEY, v int);
	INSERT INTO later VALUES (1, 1);
	SELECT delta_join.create_view('later_copy', 'SELECT id, v FROM later');});
$node->safe_psql('postgres', "SELECT create_distributed_table('later', 'id')");
$node->safe_psql('postgres', 'INSERT INTO later VALUES (2, 2)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('later_copy', '1s')"),
	'f', 'wait() does not report a view over a table distributed since as fresh');
ok( $node->poll_query_until(
		'postgres', q{
		SELECT state = 'error' AND last_error ~ 'source "later" is now a distributed table of Citus'
		FROM delta_join.status WHERE target = 'public.later_copy'}),
	'and the worker puts the view in error, saying why');

done_testing();
