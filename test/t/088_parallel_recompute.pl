# The whole query, recomputed by the apply worker, may run as a parallel
# plan, as REFRESH MATERIALIZED VIEW's does (recompute_run_all in
# recompute.c): a full recompute, and a batch of groups through joins that
# dirties most of its target.  On 10M orders the whole query took 26 s
# serial and 12 s with two workers.
#
# The worker runs it inside the view's subtransaction, after the batch
# wrote other views, as the target's owner.  Here every plan that may be
# parallel is made parallel (force_parallel_mode, debug_parallel_query
# from PostgreSQL 16, with parallel costs of 0), views on each path that
# recomputes the whole query take random changes, and each must equal its
# query; auto_explain must show the apply worker's whole query planned in
# parallel (the worker's catalog reads through SPI may be parallel anyway).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::init_node('parallel_recompute',
	conf => {
		max_parallel_workers_per_gather => 2,
		parallel_setup_cost => 0,
		parallel_tuple_cost => 0,
		min_parallel_table_scan_size => 0,
		min_parallel_index_scan_size => 0,
		shared_preload_libraries => 'delta_join, auto_explain',
		'auto_explain.log_min_duration' => 0,
		'delta_join.whole_recompute_fraction' => 0,
	});
$node->append_conf('postgresql.conf',
	($node->pg_version->major >= 16 ? 'debug_parallel_query' : 'force_parallel_mode') . " = on\n");
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION delta_join');

$node->safe_psql(
	'postgres', q{
	CREATE ROLE owner_role LOGIN;
	GRANT CREATE ON SCHEMA public TO owner_role;
	SET ROLE owner_role;
	CREATE TABLE merchants (id int PRIMARY KEY, region text);
	CREATE TABLE orders (id int PRIMARY KEY, merchant_id int, amount numeric, status text);
	CREATE INDEX ON orders (merchant_id);
	ALTER TABLE merchants REPLICA IDENTITY FULL;
	ALTER TABLE orders REPLICA IDENTITY FULL;
	INSERT INTO merchants SELECT g, 'region ' || g % 7 FROM generate_series(1, 200) g;
	INSERT INTO orders SELECT g, 1 + g % 200, g % 97, CASE WHEN g % 3 = 0 THEN 'paid' END
	  FROM generate_series(1, 5000) g;});

my %views = (
	# full recompute: a window function
	ranked => q{SELECT o.id, o.merchant_id,
	  rank() OVER (PARTITION BY o.merchant_id ORDER BY o.amount, o.id) AS r FROM orders o},
	# full recompute: an aggregate over a join with strategy none's fallback
	union_ids => q{SELECT o.merchant_id AS id FROM orders o WHERE o.status = 'paid'
	  UNION SELECT m.id FROM merchants m WHERE m.region = 'region 3'},
	# groups through joins, every batch the whole query (fraction 0)
	by_region => q{SELECT m.region, count(*) AS n, avg(o.amount) AS mean, max(o.status) AS top
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.region},
	# DISTINCT over a join, the same way
	regions_paid => q{SELECT DISTINCT m.region, o.status
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id},
);
foreach my $name (sort keys %views)
{
	$node->safe_psql('postgres',
		"SET ROLE owner_role; SELECT delta_join.create_view('$name', \$q\$ $views{$name} \$q\$, strategy => 'auto')"
	);
}
like(
	$node->safe_psql(
		'postgres', q{SELECT string_agg(target || ': ' || mode, ', ' ORDER BY target) FROM delta_join.views}),
	qr/by_region: keyed recompute \(groups through joins\).*ranked: full recompute.*regions_paid: keyed recompute \(groups through joins\).*union_ids: full recompute/,
	'two views recompute in full, two by groups through joins');

my $offset = -s $node->logfile;

srand(88);
for my $round (1 .. 6)
{
	my @sql = ('BEGIN');
	for (1 .. 40)
	{
		my $id = 1 + int(rand(5200));
		my $m = 1 + int(rand(220));
		my $r = rand();
		push @sql,
			$r < 0.3 ? "INSERT INTO orders VALUES ($id, $m, $id % 50, NULL) ON CONFLICT (id) DO UPDATE SET amount = orders.amount + 1"
		  : $r < 0.6 ? "UPDATE orders SET merchant_id = $m, status = CASE WHEN status IS NULL THEN 'paid' END WHERE id = $id"
		  : $r < 0.8 ? "DELETE FROM orders WHERE id = $id"
		  : $r < 0.9 ? "UPDATE merchants SET region = 'region ' || ($m % 9) WHERE id = $m"
		  :            "INSERT INTO merchants VALUES ($m, NULL) ON CONFLICT (id) DO UPDATE SET region = NULL";
	}
	$node->safe_psql('postgres', join(";\n", @sql, 'COMMIT'));
	is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', "round $round applied");
}
DeltaJoinTest::targets_ok($node, 'under parallel plans',
	[ map { [ $_, $views{$_}, name => "$_ under parallel plans" ] } sort keys %views ]);

ok( slurp_file($node->logfile, $offset) =~
	  /Query Text: delta_join: recompute a view\n(?:\t[^\n]*\n)*?\t\s*Workers Planned: \d/,
	"the apply worker's whole query ran as a parallel plan");
is( $node->safe_psql('postgres', "SELECT count(*) FROM delta_join.status WHERE state <> 'active'"),
	'0', 'every view is active');

$node->stop;
done_testing();
