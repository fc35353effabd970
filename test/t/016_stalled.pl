# Nothing applies a view's changes: delta_join.status says so, with the
# reason, instead of showing an active view with no lag; wait() times out.
#
#  - no background worker slot is free for the database's apply worker
#    (max_worker_processes);
#  - delta_join.max_views: shared memory has room for the progress of so
#    many views; create_view refuses one more, rather than leaving it
#    without.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# the two launchers (logical replication's and ours) take both slots
my $node = DeltaJoinTest::new_node('stalled',
	conf => { max_worker_processes => '2', 'delta_join.max_views' => '3' });
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', '$DeltaJoinTest::wide_query')");
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 1, 1000, 5)');

ok( $node->poll_query_until(
		'postgres', "SELECT state = 'stalled' FROM delta_join.status WHERE target = 'public.wide'"),
	'with no worker slot free, the view is stalled');
like( $node->safe_psql('postgres',
		"SELECT reason FROM delta_join.status WHERE target = 'public.wide'"),
	qr/no apply worker runs for this database/,
	'and the status says why');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '2s')"),
	'f', 'wait() times out');
ok($node->log_contains(qr/could not start the delta_join worker for database \d+: no background worker slot is free/),
	'the server log says why');

$node->append_conf('postgresql.conf', 'max_worker_processes = 16');
$node->restart;
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'with a slot free, the worker applies the change');
is( $node->safe_psql('postgres',
		"SELECT state || coalesce(reason, '') FROM delta_join.status WHERE target = 'public.wide'"),
	'active', 'and the view is active again');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query,
	'once a worker slot is free');

# delta_join.max_views = 3: the fourth view is refused
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('summary', '$DeltaJoinTest::summary_query');"
	  . "SELECT delta_join.create_view('wide2', '$DeltaJoinTest::wide_query')");
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"),
	't', 'three views are maintained');
my ($ret, $out, $err) = $node->psql('postgres',
	"SELECT delta_join.create_view('summary2', '$DeltaJoinTest::summary_query')");
like($err, qr/ERROR:  too many delta views: shared memory has room for 3.*HINT:  Raise delta_join.max_views/s,
	'a fourth view is refused, naming the setting');
is($node->safe_psql('postgres', 'SELECT count(*) FROM delta_join.views'),
	'3', 'and nothing of it was registered');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('wide2')");
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('summary2', '$DeltaJoinTest::summary_query')");
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"),
	't', 'once one is dropped, another fits');

$node->stop;
done_testing();
