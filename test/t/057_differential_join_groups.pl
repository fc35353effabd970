# Differential test of keyed recompute of groups through joins (issue 22,
# item 1; README "Strategies and paths").
#
# For each seed of a fixed list, in a schema of its own, three tables with
# REPLICA IDENTITY FULL, loaded before the views are created (backfill):
#
#   merchants (id PK, region, tier)
#   orders    (id PK, merchant_id, item_id, amount, status)
#   items     (id PK, category)
#
# (merchants also with an array column, tags, and one of a composite type,
# place) and six aggregate views, two SELECT DISTINCT views over inner joins
# (issue 22, item 2), two semi-joins and three anti-joins (issue 22, item
# 3), created with strategy auto, each of which must take the new path
# (views.mode):
#
#  - by_region: orders JOIN merchants grouped by a merchant column (NULL
#    for some merchants), with count, sum, avg, min and max;
#  - by_status: the same join grouped by an order column, with a filter on
#    merchants and HAVING count(*) > 3, which groups cross both ways;
#  - by_region_category: orders JOIN merchants JOIN items grouped by a
#    column of each of the two looked-up tables;
#  - by_tier_small: by_region's join grouped by two columns of two sources,
#    with a small max_batch_size so that the workload spans many batches;
#  - distinct_region_status: DISTINCT of a column of each side of
#    by_region's join, both NULL at times;
#  - distinct_merchant_item_small: DISTINCT over the three tables of
#    columns that give most rows one or two orders, so that the workload
#    often takes a row's last order away (and brings a first one), with a
#    small max_batch_size;
#  - semi_exists: merchants that have an order of one status (EXISTS,
#    correlated by the join key, with a filter of orders that status
#    changes flip);
#  - semi_in_small: items IN the items of orders of merchants of a tier
#    (a subquery that joins two tables), with a small max_batch_size;
#  - anti_exists: merchants that have no order of one status (NOT EXISTS,
#    correlated by the join key, with a filter that status changes flip);
#  - anti_items_small: items that no big order of a merchant of a tier has
#    (a subquery that joins two tables), with a small max_batch_size;
#  - anti_semi_merchants: the DISTINCT regions and ids of merchants whose
#    tier is an item's id and that have no big order without a status (a
#    semi-join and an anti-join);
#  - by_tags: by_region's join grouped by an array column of merchants
#    (NULL, or holding NULLs, at times), count and sum only (additive);
#  - by_place_status: grouped by a composite column of merchants (NULL,
#    or with NULL fields, at times) and an order column, with max.
#
# Several concurrent pgbench clients then write on every source: inserts,
# updates of amounts, moves of orders between merchants and items (join
# keys, to and from NULL), changes of group keys on every side (region,
# tier, category, status; to and from NULL), deletes of single rows and of
# whole groups, merchants and items deleted and recreated, multi-statement
# and rolled-back transactions.  After delta_join.wait() each target must
# equal its query exactly (EXCEPT ALL both ways empty, under every plan).
# A deterministic tail then moves a merchant's only orders away in the
# batch in which the merchant changes region: its old region must lose
# them although no order leads from the merchant to its old region any
# more (nor a DISTINCT row), and the merchant leaves semi_exists and
# enters anti_exists, which the merchant its orders moved to leaves.
#
# The seeds vary how a batch is applied: set-based apply or generic plans,
# and for the first seed the default delta_join.whole_recompute_fraction,
# under which a batch that dirties half of a target's groups (most batches
# of these small tables) recomputes the whole query and writes the
# difference; the other seeds recompute each batch's dirty groups only.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my @seeds = (31, 4242, 99991);
my $merchants = 25;
my $items = 15;
my $orders = 800;

my $node = DeltaJoinTest::new_node('main');

sub queries
{
	my ($s) = @_;
	return (
		"$s.by_region" => qq{SELECT m.region, count(*) AS n, sum(o.amount) AS total,
    avg(o.amount) AS mean, min(o.amount) AS lo, max(o.amount) AS hi
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.region},
		"$s.by_status" => qq{SELECT o.status, count(*) AS n, sum(o.amount) AS total,
    max(o.id) AS last_id
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
  WHERE m.tier <> 0 GROUP BY o.status HAVING count(*) > 3},
		"$s.by_region_category" => qq{SELECT m.region, i.category, count(*) AS n,
    sum(o.amount) AS total, min(o.id) AS first_id
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
    JOIN $s.items i ON i.id = o.item_id
  GROUP BY m.region, i.category},
		"$s.by_tier_small" => qq{SELECT m.tier, o.status, count(*) AS n, sum(o.amount) AS total
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.tier, o.status},
		"$s.distinct_region_status" => qq{SELECT DISTINCT m.region, o.status
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id},
		"$s.distinct_merchant_item_small" => qq{SELECT DISTINCT m.id AS merchant, m.region,
    o.item_id, i.category
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
    JOIN $s.items i ON i.id = o.item_id},
		"$s.semi_exists" => qq{SELECT m.id, m.region, m.tier FROM $s.merchants m
  WHERE EXISTS (SELECT 1 FROM $s.orders o WHERE o.merchant_id = m.id AND o.status = 's1')},
		"$s.semi_in_small" => qq{SELECT i.id, i.category FROM $s.items i
  WHERE i.id IN (SELECT o.item_id FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
    WHERE m.tier <> 0)},
		"$s.anti_exists" => qq{SELECT m.id, m.region, m.tier FROM $s.merchants m
  WHERE NOT EXISTS (SELECT 1 FROM $s.orders o WHERE o.merchant_id = m.id AND o.status = 's1')},
		"$s.anti_items_small" => qq{SELECT i.id, i.category FROM $s.items i
  WHERE NOT EXISTS (SELECT 1 FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id
    WHERE o.item_id = i.id AND m.tier <> 0 AND o.amount > 950)},
		"$s.anti_semi_merchants" => qq{SELECT DISTINCT m.region, m.id AS merchant FROM $s.merchants m
  WHERE EXISTS (SELECT 1 FROM $s.items i WHERE i.id = m.tier)
    AND NOT EXISTS (SELECT 1 FROM $s.orders o2
      WHERE o2.merchant_id = m.id AND o2.status IS NULL AND o2.amount > 500)},
		"$s.by_tags" => qq{SELECT m.tags, count(*) AS n, sum(o.amount) AS total
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.tags},
		"$s.by_place_status" => qq{SELECT m.place, o.status, count(*) AS n, max(o.id) AS last_id
  FROM $s.orders o JOIN $s.merchants m ON m.id = o.merchant_id GROUP BY m.place, o.status});
}

sub scripts
{
	my ($s) = @_;
	my $pick = qq{\\set m random(1, $merchants)
\\set i random(1, $items)
\\set o random(1, $orders)
\\set a random(-10000, 100000)
\\set n random(0, 9)
};
	my $region = q{CASE WHEN :n < 2 THEN NULL ELSE 'r' || (:n % 4) END};
	my $status = q{CASE WHEN :n = 0 THEN NULL ELSE 's' || (:n % 3) END};
	my $insert_order = qq{INSERT INTO $s.orders VALUES (:o,
    CASE WHEN :n = 9 THEN NULL ELSE :m END, CASE WHEN :n = 8 THEN NULL ELSE :i END,
    :a / 100.0, $status)
  ON CONFLICT (id) DO UPDATE SET amount = excluded.amount;
};
	my $move_order = qq{UPDATE $s.orders SET merchant_id = CASE WHEN :n = 9 THEN NULL ELSE :m END
  WHERE id = :o;
};
	my $move_item = qq{UPDATE $s.orders SET item_id = :i WHERE id = :o;
};
	my $update_order = qq{UPDATE $s.orders SET amount = :a / 100.0, status = $status WHERE id = :o;
};
	my $delete_order = qq{DELETE FROM $s.orders WHERE id = :o;
};
	my $update_merchant = qq{UPDATE $s.merchants SET region = $region, tier = :n % 3,
    tags = CASE WHEN :n = 1 THEN NULL ELSE ARRAY[:n % 3, NULLIF(:n % 2, 0)] END,
    place = CASE WHEN :n = 2 THEN NULL
      ELSE ROW(:n % 2, CASE WHEN :n = 5 THEN NULL ELSE 'p' || (:n % 3) END)::$s.spot END
  WHERE id = :m;
};
	my $update_item = qq{UPDATE $s.items SET category = CASE WHEN :n = 0 THEN NULL ELSE 'c' || (:n % 3) END
  WHERE id = :i;
};
	return DeltaJoinWorkload::write_scripts(
		insert_order => [ 6, $pick . $insert_order ],
		move_order => [ 4, $pick . $move_order ],
		move_item => [ 2, $pick . $move_item ],
		update_order => [ 4, $pick . $update_order ],
		delete_order => [ 3, $pick . $delete_order ],
		update_merchant => [ 3, $pick . $update_merchant ],
		update_item => [ 2, $pick . $update_item ],
		recreate_merchant => [
			1, $pick . qq{BEGIN;
DELETE FROM $s.merchants WHERE id = :m;
INSERT INTO $s.merchants VALUES (:m, $region, :n % 2) ON CONFLICT DO NOTHING;
COMMIT;
}
		],
		delete_merchant => [
			1, $pick . qq{\\if :n < 3
DELETE FROM $s.merchants WHERE id = :m;
\\else
INSERT INTO $s.merchants VALUES (:m, $region, 1) ON CONFLICT DO NOTHING;
\\endif
}
		],
		delete_item => [
			1, $pick . qq{\\if :n < 3
DELETE FROM $s.items WHERE id = :i;
\\else
INSERT INTO $s.items VALUES (:i, 'c' || (:n % 3)) ON CONFLICT DO NOTHING;
\\endif
}
		],
		delete_group => [
			1, $pick . qq{\\if :n = 0
DELETE FROM $s.orders WHERE merchant_id = :m;
\\endif
}
		],
		transaction => [
			2, $pick . qq{BEGIN;
$move_order$update_merchant\\set o random(1, $orders)
$update_order$update_item$delete_order
COMMIT;
}
		],
		rolled_back => [
			1, $pick . qq{BEGIN;
DELETE FROM $s.orders WHERE merchant_id = :m;
$update_merchant$insert_order
ROLLBACK;
}
		]);
}

# the seeds this major runs (DeltaJoinTest::seeds); what follows the loop
# uses the first or the last of them
my @run = DeltaJoinTest::seeds($node, @seeds);
foreach my $seed (@run)
{
	# set-based apply for every seed but the second, generic plans for that
	# one; the whole query recomputed when a batch dirties half of a target
	# (the default) for the first seed, never for the others
	DeltaJoinWorkload::set_based_apply($node, $seed != $seeds[1]);
	DeltaJoinWorkload::whole_recompute($node, $seed == $seeds[0] ? 'default' : 'never');
	my $s = "s$seed";
	my %views = queries($s);

	$node->safe_psql(
		'postgres', qq{
		SELECT setseed(1.0 / $seed);
		CREATE SCHEMA $s;
		CREATE TYPE $s.spot AS (a int, b text);
		CREATE TABLE $s.merchants (id int PRIMARY KEY, region text, tier int, tags int[],
		  place $s.spot);
		CREATE TABLE $s.items (id int PRIMARY KEY, category text);
		CREATE TABLE $s.orders (id int PRIMARY KEY, merchant_id int, item_id int,
		  amount numeric(12,2), status text);
		CREATE INDEX ON $s.orders (merchant_id);
		CREATE INDEX ON $s.orders (item_id);
		ALTER TABLE $s.merchants REPLICA IDENTITY FULL;
		ALTER TABLE $s.items REPLICA IDENTITY FULL;
		ALTER TABLE $s.orders REPLICA IDENTITY FULL;
		INSERT INTO $s.merchants
		  SELECT g, CASE WHEN random() < 0.15 THEN NULL ELSE 'r' || (g % 4) END, g % 3,
		         CASE WHEN random() < 0.1 THEN NULL ELSE ARRAY[g % 3, NULLIF(g % 2, 0)] END,
		         CASE WHEN random() < 0.1 THEN NULL
		           ELSE ROW(g % 2, CASE WHEN g % 5 = 0 THEN NULL ELSE 'p' || (g % 3) END)::$s.spot END
		  FROM generate_series(1, $merchants) g;
		INSERT INTO $s.items
		  SELECT g, CASE WHEN random() < 0.1 THEN NULL ELSE 'c' || (g % 3) END
		  FROM generate_series(1, $items) g;
		INSERT INTO $s.orders
		  SELECT g, CASE WHEN random() < 0.05 THEN NULL ELSE 1 + (random() * ($merchants - 1))::int END,
		         1 + (random() * ($items - 1))::int, round((random() * 1000)::numeric, 2),
		         CASE WHEN random() < 0.1 THEN NULL ELSE 's' || (g % 3) END
		  FROM generate_series(1, $orders, 2) g;});
	my @targets = sort keys %views;
	$node->safe_psql(
		'postgres',
		join('',
			map {
				my $options = /small/ ? q{'{"max_batch_size": 20}'} : q{'{}'};
				"SELECT delta_join.create_view('$_', \$q\$ $views{$_} \$q\$, strategy => 'auto', options => $options);\n"
			} @targets));
	my @modes = split /\n/, $node->safe_psql(
		'postgres',
		join('',
			map { "SELECT mode FROM delta_join.views WHERE target::regclass = '$_'::regclass;\n" }
			  @targets));
	is($modes[$_] // '', 'keyed recompute (groups through joins)',
		"seed $seed: $targets[$_] takes the new path")
	  foreach 0 .. $#targets;
	# (no source changes in between: each target still holds its backfill)
	DeltaJoinTest::targets_ok($node, "seed $seed: after backfill",
		[ map { [ $_, $views{$_} ] } @targets ]);

	DeltaJoinWorkload::pgbench_ok(
		$node, scripts($s), "seed $seed: random writes",
		seed => $seed,
		clients => 4,
		transactions => 600,
		rate => 1500);
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'), "seed $seed: wait() returns true");
	DeltaJoinTest::targets_ok($node, "seed $seed: after writes on every source",
		[ map { [ $_, $views{$_} ] } @targets ]);
	DeltaJoinWorkload::statuses_ok($node, \@targets, "seed $seed");

	# ---- a merchant's only orders move away as it changes region ----
	$node->safe_psql(
		'postgres', qq{
		INSERT INTO $s.merchants VALUES (1000, 'lonely', 1), (1001, 'other', 1);
		INSERT INTO $s.orders VALUES (100000, 1000, 1, 5, 's1'), (100001, 1000, 1, 6, 's1');});
	ok(DeltaJoinWorkload::wait_views($node), "seed $seed: wait() after the lonely merchant");
	$node->safe_psql(
		'postgres', qq{
		BEGIN;
		UPDATE $s.orders SET merchant_id = 1001 WHERE merchant_id = 1000;
		UPDATE $s.merchants SET region = 'moved' WHERE id = 1000;
		COMMIT;});
	ok(DeltaJoinWorkload::wait_views($node), "seed $seed: wait() after the move");
	DeltaJoinTest::targets_ok($node,
		"seed $seed: after a merchant's orders moved away as it changed region",
		[ map { [ $_, $views{$_} ] } @targets ]);
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM $s.by_region WHERE region IN ('lonely', 'moved')"),
		'0', "seed $seed: the old region of the moved orders is deleted");
	is($node->safe_psql('postgres',
			"SELECT count(*) FROM $s.distinct_region_status WHERE region IN ('lonely', 'moved')"),
		'0', "seed $seed: the DISTINCT row of the moved orders' old region is deleted");
	is($node->safe_psql('postgres', "SELECT count(*) FROM $s.semi_exists WHERE id = 1000"),
		'0', "seed $seed: the merchant whose orders moved away leaves the semi-join");
	is($node->safe_psql('postgres', "SELECT string_agg(id::text, ',' ORDER BY id) FROM $s.anti_exists WHERE id >= 1000"),
		'1000', "seed $seed: it enters the anti-join, which the merchant its orders moved to leaves");
}

# ---- the comparison can fail ----
{
	my $s = "s$run[0]";
	my $t = "$s.by_region";
	my %views = queries($s);
	$node->safe_psql('postgres',
		"SELECT delta_join.drop_view('$t', false);"
		  . "UPDATE $t SET n = n + 1 WHERE region = 'other'");
	my ($missing, $extra) =
	  @{ DeltaJoinTest::target_diff($node, $t, $views{$t}) }{qw(missing extra)};
	is("$missing|$extra", '1|1', 'self-check: a tampered group is reported');
}

$node->stop;
done_testing();
