# The delta plan cache (DESIGN.md §5 "A view is bound once"): a view's plan
# is built once and kept across batches; DDL on one of its relations makes
# the next batch build it again, DDL elsewhere does not.  The worker logs
# each build at DEBUG1 ("built the plan of view ..."), which this test
# counts.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# (autovacuum off: its ANALYZE of a source or target invalidates the
# relation's cache, and so the plan, which the counts below do not expect)
my $node = DeltaJoinTest::new_node('plans', conf => { autovacuum => 'off' });
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', '$DeltaJoinTest::wide_query');"
	  . "CREATE TABLE elsewhere (id int PRIMARY KEY, v int);"
	  . "ALTER SYSTEM SET log_min_messages = debug1;"
	  . "SELECT pg_reload_conf()");

my $order = 5000;

# n batches, one committed write each, waited for one by one
sub batches
{
	my ($n) = @_;
	for (1 .. $n)
	{
		$order++;
		$node->safe_psql('postgres', "INSERT INTO orders VALUES (1, 1, $order, 1)");
		$node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')") eq 't'
		  or die "wait() timed out";
	}
}

# the plan builds logged from offset on
sub builds_since
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @builds = ($log =~ /built the plan of view \d+ \(target "wide"\)/g);
	return scalar @builds;
}

# the first batch after the reload may build it; then it is kept
batches(1);
my $offset = -s $node->logfile;
batches(5);
is(builds_since($offset), 0, 'five batches use the plan built before');

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE INDEX elsewhere_v ON elsewhere (v)');
$node->safe_psql('postgres', 'UPDATE elsewhere SET v = 1');
batches(3);
is(builds_since($offset), 0, 'DDL on a table the view does not read builds nothing');

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'CREATE INDEX items_name ON items (item_name)');
batches(3);
is(builds_since($offset), 1, 'DDL on a source: the next batch builds the plan once again');

$offset = -s $node->logfile;
$node->safe_psql('postgres', 'ALTER TABLE wide ADD CONSTRAINT wide_amount CHECK (amount >= 0)');
batches(2);
is(builds_since($offset), 1, 'DDL on the target: built once again');

DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
	'after the plan was built again');

$node->stop;
done_testing();
