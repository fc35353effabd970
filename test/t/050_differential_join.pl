# Differential test of delta join maintenance (DESIGN.md §6.1).
#
# For each seed of a fixed list, in a schema of its own: the orders/items
# schema of DESIGN.md §1 (DeltaJoinTest::worked_example) with a nullable
# text column and a numeric column on both sides, some data loaded before the view is created (backfill), then
# thousands of seeded random writes from several concurrent pgbench clients
# on BOTH sides of the join -- order upserts (new orders, and updates of
# amount and note through ON CONFLICT), multi-row order updates, item name
# and price updates (to and from NULL), inserts of items that orders already
# reference, multi-statement transactions and rolled-back ones -- and NO
# deletes.  After delta_join.wait() the target must equal the query's
# result as a multiset (EXCEPT ALL both ways empty).  Then every missing item
# is inserted (orders written long before their item now join), and the
# check is repeated.  The same view is kept twice more with the lookup
# cache on, with tiny (2 entries) and large sizes: both must be exact too,
# and the large one must serve lookups from the cache.
#
# Deletes leave residual rows by design (DESIGN.md §2): after deleting
# orders and items, the query's result must still be contained in the
# target (query EXCEPT ALL target empty), no row may be stale (a row of the
# target whose key the query returns has the query's values), and the
# residual rows must be exactly the rows whose order or item was deleted;
# refresh() removes them.
#
# Each comparison runs the query under several plans as well
# (DeltaJoinTest::target_ok): the result must not depend on the plan.
#
# Finally the comparison itself is checked: a row changed behind the
# worker's back is reported as a difference.
#
# The server applies with parallel apply (DeltaJoinTest::parallel_apply):
# every batch of the views that can be shared is split between the worker
# and two helpers.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my @seeds = (17, 4242, 90001);
my $merchants = 5;
my $items = 100;	   # item ids 1..100 referenced by orders
my $initial_items = 60;	# items 1..60 exist when the view is created

my $node = DeltaJoinTest::new_node('main',
	conf => { %DeltaJoinTest::parallel_apply });

# the view's query, in schema $s
sub join_query
{
	my ($s) = @_;
	return qq{SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, i.price, o.amount, o.note
  FROM $s.orders AS o
  JOIN $s.items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id};
}

# pgbench scripts writing to schema $s
sub join_scripts
{
	my ($s) = @_;
	my $pick = qq{\\set m random(1, $merchants)
\\set i random(1, $items)
\\set o random(1, 8)
\\set a random(0, 1000000)
\\set n random(0, 9)
};
	my $upsert_order = qq{INSERT INTO $s.orders VALUES (:m, :i, :o, :a / 100.0,
    CASE WHEN :n < 3 THEN NULL ELSE 'note ' || :n || ' ' || :a END)
  ON CONFLICT (merchant_id, item_id, order_id)
  DO UPDATE SET amount = excluded.amount, note = excluded.note;
};
	my $update_item = qq{UPDATE $s.items
  SET item_name = CASE WHEN :n < 2 THEN NULL ELSE 'item ' || :i || ' v' || :a END,
      price = CASE WHEN :n = 9 THEN NULL ELSE :a / 1000.0 END
  WHERE merchant_id = :m AND item_id = :i;
};
	return DeltaJoinWorkload::write_scripts(
		upsert_order => [ 5, $pick . $upsert_order ],
		update_orders => [
			3, $pick . qq{UPDATE $s.orders
  SET amount = amount + :n - 4.5,
      note = CASE WHEN :n = 0 THEN NULL WHEN :n = 1 THEN 'bulk ' || :a ELSE note END
  WHERE merchant_id = :m AND item_id = :i;
}
		],
		update_item => [ 3, $pick . $update_item ],
		insert_item => [
			1, $pick . qq{INSERT INTO $s.items VALUES (:m, :i,
    CASE WHEN :n < 2 THEN NULL ELSE 'new ' || :i END, :a / 1000.0)
  ON CONFLICT DO NOTHING;
}
		],
		# items first, then orders: no lock cycle between these scripts
		transaction => [
			2, $pick . qq{BEGIN;
$update_item\\set o random(1, 8)
$upsert_order\\set i random(1, $items)
\\set o random(1, 8)
$upsert_order\\set a random(0, 1000000)
$update_item
COMMIT;
}
		],
		rolled_back => [
			1, $pick . qq{BEGIN;
$update_item$upsert_order
\\set o random(9, 20)
$upsert_order
ROLLBACK;
}
		]);
}

# the seeds this major runs (DeltaJoinTest::seeds); what follows the loop
# uses the first or the last of them
my @run = DeltaJoinTest::seeds($node, @seeds);
foreach my $seed (@run)
{
	my $s = "s$seed";
	my $t = "$s.order_item_wide";
	my $q = join_query($s);

	# ---- data before the view (backfilled), then the view ----
	DeltaJoinTest::worked_example($node, schema => $s, note => 1, price => 1, rows => 0);
	$node->safe_psql(
		'postgres', qq{
		SELECT setseed(1.0 / $seed);
		INSERT INTO $s.items
		  SELECT m, i, CASE WHEN random() < 0.2 THEN NULL ELSE 'item ' || i END,
		         round((random() * 1000)::numeric, 3)
		  FROM generate_series(1, $merchants) m, generate_series(1, $initial_items) i;
		INSERT INTO $s.orders
		  SELECT m, i, o, round((random() * 10000)::numeric, 2),
		         CASE WHEN random() < 0.3 THEN NULL ELSE 'first ' || o END
		  FROM generate_series(1, $merchants) m, generate_series(1, $items) i,
		       generate_series(1, 3) o
		  WHERE random() < 0.5;
		SELECT delta_join.create_view('$t', \$q\$ $q \$q\$);
		SELECT delta_join.create_view('$s.wide_cache_tiny', \$q\$ $q \$q\$,
		  options => '{"cache_enabled": true, "left_cache_size": 2, "right_cache_size": 2}');
		SELECT delta_join.create_view('$s.wide_cache_big', \$q\$ $q \$q\$,
		  options => '{"cache_enabled": true, "left_cache_size": 100000, "right_cache_size": 100000}');});
	DeltaJoinTest::target_ok($node, $t, $q,
		"seed $seed: after backfill");

	# ---- concurrent random writes on both sides, no deletes ----
	my $scripts = join_scripts($s);
	DeltaJoinWorkload::pgbench_ok(
		$node, $scripts, "seed $seed: random writes",
		seed => $seed,
		clients => 4,
		transactions => 1500);
	ok(DeltaJoinWorkload::wait_views($node, $t),
		"seed $seed: wait() returns true");
	DeltaJoinTest::target_ok($node, $t, $q,
		"seed $seed: after concurrent inserts and updates");
	DeltaJoinWorkload::status_ok($node, $t, "seed $seed");

	# the same view with the lookup cache on, tiny and large
	foreach my $cached ("$s.wide_cache_tiny", "$s.wide_cache_big")
	{
		ok(DeltaJoinWorkload::wait_views($node, $cached),
			"seed $seed: wait() returns true for $cached");
		DeltaJoinTest::target_ok($node, $cached, $q,
			"seed $seed: $cached, after concurrent inserts and updates");
	}
	cmp_ok(
		$node->safe_psql(
			'postgres',
			"SELECT cache_hits FROM delta_join.status WHERE target = '$s.wide_cache_big'"),
		'>', 0, "seed $seed: the large cache serves lookups");

	# ---- every item orders refer to now exists; then more updates ----
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO $s.items
		  SELECT DISTINCT merchant_id, item_id, 'late ' || item_id, item_id / 7.0
		  FROM $s.orders
		  ON CONFLICT DO NOTHING;});
	DeltaJoinWorkload::pgbench_ok(
		$node, $scripts, "seed $seed: more random writes",
		seed => $seed + 1,
		clients => 3,
		transactions => 200);
	ok(DeltaJoinWorkload::wait_views($node, $t),
		"seed $seed: wait() returns true after the late items");
	DeltaJoinTest::target_ok($node, $t, $q,
		"seed $seed: after inserting the missing items");
	foreach my $cached ("$s.wide_cache_tiny", "$s.wide_cache_big")
	{
		ok(DeltaJoinWorkload::wait_views($node, $cached),
			"seed $seed: wait() returns true for $cached after the late items");
		DeltaJoinTest::target_ok($node, $cached, $q,
			"seed $seed: $cached, after inserting the missing items");
	}
	is( $node->safe_psql(
			'postgres', qq{
		SELECT count(*) FROM $s.orders o
		WHERE NOT EXISTS (SELECT FROM $t w
		                  WHERE (w.merchant_id, w.item_id, w.order_id)
		                      = (o.merchant_id, o.item_id, o.order_id))}),
		'0',
		"seed $seed: every order is in the target");
}

# ---- deletes leave residual rows, and only those ----

{
	my $seed = $run[0];
	my $s = "s$seed";
	my $t = "$s.order_item_wide";
	my $q = join_query($s);

	$node->safe_psql(
		'postgres', qq{
		CREATE TABLE $s.deleted AS
		  SELECT merchant_id, item_id, order_id FROM $s.orders WHERE order_id = 2
		  UNION
		  SELECT o.merchant_id, o.item_id, o.order_id
		  FROM $s.orders o WHERE o.item_id % 10 = 3;
		DELETE FROM $s.orders WHERE order_id = 2;
		DELETE FROM $s.items WHERE item_id % 10 = 3;
		-- changes after the deletes: names of remaining items, amounts
		UPDATE $s.items SET item_name = 'after delete ' || item_id WHERE item_id % 10 = 4;
		UPDATE $s.orders SET amount = amount + 1 WHERE order_id = 1;});
	ok(DeltaJoinWorkload::wait_views($node, $t),
		'deletes: wait() returns true');
	my $residual = DeltaJoinTest::target_ok($node, $t, $q, 'deletes',
		mode => 'upsert')->{extra};
	ok($residual > 0, "deletes: deleted rows stay as residual rows ($residual)");
	is( $node->safe_psql(
			'postgres', qq{
		SELECT count(*) FROM (TABLE $t EXCEPT ALL ($q)) r
		WHERE NOT EXISTS (SELECT FROM $s.deleted d
		                  WHERE (d.merchant_id, d.item_id, d.order_id)
		                      = (r.merchant_id, r.item_id, r.order_id))}),
		'0',
		'deletes: every residual row is one whose order or item was deleted');

	# deleted rows come back: the residual row is overwritten
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO $s.items
		  SELECT DISTINCT merchant_id, item_id, 'back ' || item_id, 1.5
		  FROM $s.deleted WHERE item_id % 10 = 3;});
	ok(DeltaJoinWorkload::wait_views($node, $t),
		'deletes: wait() returns true after re-inserting items');
	DeltaJoinTest::target_ok($node, $t, $q, 'deletes: re-inserted items join again',
		mode => 'upsert');

	is($node->safe_psql('postgres', "SELECT delta_join.refresh('$t') > 0"),
		't', 'deletes: refresh() rewrites the target');
	DeltaJoinTest::target_ok($node, $t, $q,
		'deletes: after refresh() no residual row is left');
}

# ---- the comparison can fail ----

{
	my $s = "s$run[-1]";
	my $t = "$s.order_item_wide";
	my $q = join_query($s);

	# a changed value, a lost row: both seen, in both directions (the
	# target, once its view is dropped, may be tampered with)
	$node->safe_psql(
		'postgres', qq{
		SELECT delta_join.drop_view('$t', false);
		UPDATE $t SET note = 'tampered'
		WHERE (merchant_id, item_id, order_id) = (SELECT merchant_id, item_id, order_id
		                                          FROM $t ORDER BY 1, 2, 3 LIMIT 1);
		DELETE FROM $t
		WHERE (merchant_id, item_id, order_id) = (SELECT merchant_id, item_id, order_id
		                                          FROM $t ORDER BY 1 DESC, 2, 3 LIMIT 1);});
	my ($missing, $extra) = @{ DeltaJoinTest::target_diff($node, $t, $q) }{qw(missing extra)};
	is("$missing|$extra", '2|1',
		'self-check: a tampered and a deleted target row are both reported');
}

# parallel apply took part: helpers are started only for a batch to share
like(slurp_file($node->logfile), qr/delta_join helper \d+ for database \d+ started/,
	'helpers were started to apply shares');

$node->stop;
done_testing();
