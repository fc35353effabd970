# A parallel worker of the apply worker's whole-query recompute may be
# terminated (pg_terminate_backend, an administrator's script that ends
# long queries).  Its leader, the apply worker, then raises its end as an
# error (57P01); that is an operator's intervention, which another try does
# not meet: the view is applied again later, not put in error (an attack
# found it in error for good, apply_view.c error_is_passing).
#
# Parallel plans are forced; a full-recompute view over 300,000 orders
# takes a change, and the parallel worker running its query is
# terminated.  The view must stay active and equal its query.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::init_node('parallel_terminated',
	conf => {
		max_parallel_workers_per_gather => 2,
		parallel_setup_cost => 0,
		parallel_tuple_cost => 0,
		min_parallel_table_scan_size => 0,
	});
$node->append_conf('postgresql.conf',
	($node->pg_version->major >= 16 ? 'debug_parallel_query' : 'force_parallel_mode') . " = on\n");
$node->start;

my $query = 'SELECT o.id, o.cust, sum(o.amount) OVER (PARTITION BY o.cust) AS s FROM orders o';
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION delta_join;
	CREATE TABLE orders (id bigint PRIMARY KEY, cust int NOT NULL, amount numeric(12,2));
	INSERT INTO orders SELECT g, (g * 7) % 5000 + 1, (g % 1000) / 10.0 FROM generate_series(1, 300000) g;
	SELECT delta_join.create_view('w', \$q\$ $query \$q\$, strategy => 'auto');});
is($node->safe_psql('postgres', "SELECT mode FROM delta_join.views WHERE target = 'public.w'"),
	'full recompute', 'a window function: full recompute');

my $worker = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
my $victim = qq{SELECT pid FROM pg_stat_activity
  WHERE backend_type = 'parallel worker' AND leader_pid = $worker
    AND query = 'delta_join: recompute a view' LIMIT 1};

# a change, then the recompute's parallel worker terminated; again if the
# recompute ended before it was found
my $terminated = 0;
for my $round (1 .. 5)
{
	$node->safe_psql('postgres', "UPDATE orders SET amount = amount + 1 WHERE id % 10 = $round");
	for (1 .. 400)
	{
		my $pid = $node->safe_psql('postgres', $victim);
		if ($pid ne '')
		{
			$terminated += $node->safe_psql('postgres', "SELECT pg_terminate_backend($pid)") eq 't';
			last;
		}
	}
	last if $terminated;
	$node->safe_psql('postgres', "SELECT delta_join.wait('public.w', '60s')");
}
ok($terminated, "a parallel worker of the view's recompute was terminated");

is($node->safe_psql('postgres', "SELECT delta_join.wait('public.w', '120s')"),
	't', 'the view is applied again');
is($node->safe_psql('postgres', "SELECT state FROM delta_join.status WHERE target = 'public.w'"),
	'active', 'and stays active');
DeltaJoinTest::target_ok($node, 'w', $query, 'after its parallel worker was terminated');

$node->stop;
done_testing();
