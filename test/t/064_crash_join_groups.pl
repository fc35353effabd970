# Crashes under keyed recompute of groups through joins (issue 22, item 1;
# DESIGN.md §6.2).
#
# Three aggregate views over inner joins of REPLICA IDENTITY FULL tables,
# on the groups-through-joins path: orders JOIN merchants grouped by a
# merchant column; orders JOIN merchants JOIN items grouped by a column of
# each of the looked-up tables, with HAVING; and the same without HAVING,
# of counts and sums only, which takes the additive apply
# (apply_additive.c: a batch decoded again after a crash must not be added
# twice, and the server log must show that batches were added); a SELECT
# DISTINCT over
# the three tables (issue 22, item 2), of a few orders a row; a
# semi-join (issue 22, item 3), the items that some order of a few
# merchants' regions has (IN); and an anti-join (issue 22, item 3), the
# merchants that no big order of a few items' categories has (NOT EXISTS
# over a join).  pgbench
# streams seeded random writes on every source (upserts, moves of orders
# between merchants and items, changes of regions and categories,
# deletes) while the apply worker is killed with SIGKILL, four times,
# aimed at a moment when it applies one of the views: the postmaster
# restarts every process, the stream's connections are cut and a new
# stream is started for each round.  The batch a killed worker was
# applying is decoded again from the slot's confirmed position: its dirty
# groups are found anew.  Then delta_join.wait() returns true, every
# target equals its query (EXCEPT ALL both ways) and every view is active
# with no error.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $seed = 6464;
my $merchants = 200;
my $items = 50;
my $orders = 5000;
my $rounds = 4;

# a killed backend must restart the server (PostgreSQL::Test::Cluster turns
# restart_after_crash off)
my $node = DeltaJoinTest::new_node('main',
	conf => { restart_after_crash => 'on', log_min_messages => 'debug1' });

my %queries = (
	region_sales => q{SELECT m.region, count(*) AS n, sum(o.amount) AS total, max(o.id) AS last_order
  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.region},
	region_totals => q{SELECT m.region, i.category, count(*) AS n, sum(o.amount) AS total
  FROM orders o JOIN merchants m ON m.id = o.merchant_id JOIN items i ON i.id = o.item_id
  GROUP BY m.region, i.category},
	region_category => q{SELECT m.region, i.category, count(*) AS n, sum(o.amount) AS total
  FROM orders o JOIN merchants m ON m.id = o.merchant_id JOIN items i ON i.id = o.item_id
  GROUP BY m.region, i.category HAVING count(*) > 20},
	merchant_categories => q{SELECT DISTINCT m.id AS merchant_id, m.region, i.category
  FROM orders o JOIN merchants m ON m.id = o.merchant_id JOIN items i ON i.id = o.item_id},
	items_sold_east => q{SELECT i.id, i.category FROM items i
  WHERE i.id IN (SELECT o.item_id FROM orders o JOIN merchants m ON m.id = o.merchant_id
    WHERE m.region IN ('r1', 'r2') AND o.amount > 900)},
	merchants_without_big_c1 => q{SELECT m.id, m.region FROM merchants m
  WHERE NOT EXISTS (SELECT 1 FROM orders o JOIN items i ON i.id = o.item_id
    WHERE o.merchant_id = m.id AND i.category = 'c1' AND o.amount > 500)});

$node->safe_psql(
	'postgres', qq{
	SELECT setseed(0.6464);
	CREATE TABLE merchants (id int PRIMARY KEY, region text);
	CREATE TABLE items (id int PRIMARY KEY, category text);
	CREATE TABLE orders (id int PRIMARY KEY, merchant_id int, item_id int, amount numeric(12,2));
	CREATE INDEX ON orders (merchant_id);
	CREATE INDEX ON orders (item_id);
	ALTER TABLE merchants REPLICA IDENTITY FULL;
	ALTER TABLE items REPLICA IDENTITY FULL;
	ALTER TABLE orders REPLICA IDENTITY FULL;
	INSERT INTO merchants SELECT i, 'r' || (i % 9) FROM generate_series(1, $merchants) i;
	INSERT INTO items SELECT i, 'c' || (i % 5) FROM generate_series(1, $items) i;
	INSERT INTO orders
	  SELECT i, 1 + (random() * ($merchants - 1))::int, 1 + (random() * ($items - 1))::int,
	         round((random() * 1000)::numeric, 2)
	  FROM generate_series(1, $orders) i;});
foreach my $t (sort keys %queries)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$t', \$q\$ $queries{$t} \$q\$, strategy => 'auto')");
	is( $node->safe_psql('postgres',
			"SELECT mode FROM delta_join.views WHERE target::regclass = '$t'::regclass"),
		'keyed recompute (groups through joins)',
		"$t is maintained by keyed recompute of groups through joins");
}

my $pick = qq{\\set m random(1, $merchants + 10)
\\set i random(1, $items + 5)
\\set o random(1, $orders + 500)
\\set a random(0, 100000)
\\set n random(0, 9)
};
my %order_scripts = (
	upsert_order => [
		5, $pick . q{INSERT INTO orders VALUES (:o, :m, :i, :a / 100.0)
  ON CONFLICT (id) DO UPDATE SET amount = excluded.amount;
}
	],
	move_order => [
		4, $pick . q{UPDATE orders SET merchant_id = :m, item_id = CASE WHEN :n < 3 THEN :i ELSE item_id END
  WHERE id = :o;
}
	],
	delete_order => [
		2, $pick . q{DELETE FROM orders WHERE id = :o;
}
	]);
# the odd rounds write orders only: their batches are added
my $order_scripts = DeltaJoinWorkload::write_scripts(%order_scripts);
my $scripts = DeltaJoinWorkload::write_scripts(
	%order_scripts,
	region => [
		2, $pick . q{INSERT INTO merchants VALUES (:m, 'r' || :n) ON CONFLICT (id) DO UPDATE
  SET region = CASE WHEN :n = 0 THEN NULL ELSE excluded.region END;
}
	],
	category => [
		1, $pick . q{INSERT INTO items VALUES (:i, 'c' || (:n % 6)) ON CONFLICT (id) DO UPDATE
  SET category = excluded.category;
}
	],
	delete_merchant => [
		1, $pick . q{DELETE FROM merchants WHERE id = :m AND :n = 0;
}
	]);

sub check_views
{
	my ($name, $changed) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'), "$name: wait() returns true");
	foreach my $t (sort keys %queries)
	{
		DeltaJoinTest::target_ok($node, $t, $queries{$t}, $name);
		DeltaJoinWorkload::status_ok($node, $t, $name) if $changed;
	}
}

# The pid of the worker once it applies one of the views (pg_stat_activity
# shows the view it applies), waiting up to $seconds; else the worker's pid
# as it is, and 0.
sub worker_applying
{
	my ($seconds) = @_;
	my $until = time() + $seconds;
	while (time() < $until)
	{
		my $pid = $node->safe_psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker' "
			  . "AND query IN ('public.region_sales', 'public.region_category', 'public.region_totals', "
			  . "'public.merchant_categories', 'public.merchants_without_big_c1')");
		return ($pid, 1) if $pid =~ /^\d+$/;
		usleep(10_000);
	}
	return (DeltaJoinWorkload::worker_pid($node), 0);
}

check_views('after backfill');

my ($crashes, $mid) = (0, 0);
for my $round (1 .. $rounds)
{
	my $stream = DeltaJoinWorkload::pgbench_start(
		$node, $round % 2 ? $order_scripts : $scripts,
		seed => $seed + $round,
		clients => 3,
		seconds => 4,
		rate => 600);
	usleep(500_000 + 300_000 * $round);
	my ($pid, $caught) = worker_applying(2);
	if (defined $pid)
	{
		kill 'KILL', $pid;
		$crashes++;
		$mid += $caught;
	}
	# the crash cuts the stream's connections; it ends on its own
	my $res = DeltaJoinWorkload::pgbench_finish($stream);
	note("SIGKILL round $round: "
		  . ($caught ? 'while applying a view' : 'not caught applying a view')
		  . ", the stream ran $res->{processed} transactions before the crash");
	DeltaJoinWorkload::poll_until($node, 'SELECT true', 30)
	  or BAIL_OUT('the server did not come back after the crash');
}
is($crashes, $rounds, "SIGKILL: the worker was found and killed $rounds times");
note("SIGKILL: $mid of $rounds kills landed while the worker applied a view");
$node->log_check(
	'SIGKILL: the postmaster restarted the server',
	0,
	log_like => [
		qr/terminated by signal 9: Killed/,
		qr/all server processes terminated; reinitializing/
	]);
ok(defined DeltaJoinWorkload::worker_pid($node, 30),
	'SIGKILL: a worker runs again after the restart');
check_views('after SIGKILL of the worker', 1);

# and the stream once more, uninterrupted, after the crashes
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'a last stream',
	seed => $seed, clients => 3, transactions => 300);
check_views('after a last stream', 1);

# and a stream of the orders alone, uninterrupted: its batches are added
# (the first batch after each restart recomputes its groups, and batches
# of the other streams changed two sources: this one alone says it)
my $orders_offset = -s $node->logfile;
DeltaJoinWorkload::pgbench_ok($node, $order_scripts, 'a stream of the orders',
	seed => $seed + 1000, clients => 3, transactions => 200);
check_views('after a stream of the orders', 1);
my @added = slurp_file($node->logfile, $orders_offset) =~ /additive apply: \d+ changed rows of public\.orders/g;
cmp_ok(scalar @added, '>', 0, 'region_totals: batches were added (' . scalar(@added) . ')');

$node->stop;
done_testing();
