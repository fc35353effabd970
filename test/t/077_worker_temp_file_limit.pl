# The apply worker under a temp_file_limit that ALTER DATABASE (or ALTER
# ROLE, or the server's configuration) sets for the database's users.
#
# A transaction that changes more keys than a batch holds has its dirty
# keys spilled to a temporary file of the worker, and a full recompute
# keeps its result in one.  With temp_file_limit reached, the worker failed
# in the decoding of that transaction, was restarted, and failed again at
# the same change, every two seconds for ever: the database's views
# stalled and its slot held WAL, until the setting changed.  The worker now
# runs without the limit, as the reorder buffer that spills the same
# transaction for it does.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('worker_temp_file_limit');
DeltaJoinTest::worked_example($node);

# set before the first view, so that the worker, started for it, takes them
$node->safe_psql(
	'postgres', q{
	ALTER DATABASE postgres SET temp_file_limit = 0;
	ALTER DATABASE postgres SET delta_join.max_batch_size = 5;});
my $session = 'SET temp_file_limit = -1; ';

$node->safe_psql('postgres',
	$session
	  . "SELECT delta_join.create_view('wide', \$q\$ $DeltaJoinTest::wide_query \$q\$);"
	  . "SELECT delta_join.create_view('summary', \$q\$ $DeltaJoinTest::summary_query \$q\$);"
	  . "SELECT delta_join.create_view('names', 'SELECT DISTINCT item_name FROM items', 'auto');");

# one transaction with many more keys than a batch holds
$node->safe_psql('postgres',
	q{UPDATE orders SET amount = amount + 1;
	  UPDATE items SET item_name = item_name || ' (new)';});
is($node->safe_psql('postgres', $session . "SELECT delta_join.wait(NULL, '60s')"),
	't', 'the views catch up with a transaction whose keys spill');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'the join view');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query, 'the aggregate view');
DeltaJoinTest::target_ok($node, 'names', 'SELECT DISTINCT item_name FROM items',
	'the full recompute');
is( $node->safe_psql(
		'postgres', "SELECT string_agg(state, ',' ORDER BY target::text) FROM delta_join.status"),
	'active,active,active',
	'every view is active');
ok(!$node->log_contains('temporary file size exceeds temp_file_limit'),
	'the worker never failed on the limit');

$node->stop;
done_testing();
