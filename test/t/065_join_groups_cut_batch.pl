# Keyed recompute of groups through joins across a batch cut short because
# it was full (a backlog larger than delta_join.max_batch_size).
#
# The path finds a batch's dirty groups by joining the images of its
# changed rows with the other sources as the batch's snapshot sees them.
# A batch cut short has a snapshot that already sees the changes left to
# the next batch.  Here one transaction deletes every order of a customer
# (and updates enough other orders to fill a batch), the next deletes the
# customer; both commit while the worker is stopped, so the batch that
# brings the orders is cut before the customer's delete, which its
# snapshot sees.  That batch joins the orders' old images with customers
# as they are now (the customer gone), the next the customer's old image
# with orders as they are now (its orders gone): neither found the
# customer's groups, which stayed in the target after wait() (found by a
# randomized soak with 50,000-row transactions, where the default batch
# size cut batches).  Such a view's keys are now held while batches are cut,
# and its groups found once a batch reaches its position, for all of them
# together.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('main', conf => { 'delta_join.max_batch_size' => '50' });

my $query = 'SELECT i.cat, o.cust_id, count(*) AS n, sum(o.amount) AS total, min(c.name) AS nm '
  . 'FROM ord o JOIN cust c ON c.id = o.cust_id JOIN item i ON i.id = o.item_id '
  . 'GROUP BY i.cat, o.cust_id';

$node->safe_psql(
	'postgres', q{
	CREATE TABLE wal_filler (pad text);
	CREATE TABLE cust (id int PRIMARY KEY, name text);
	CREATE TABLE item (id int PRIMARY KEY, cat text);
	ALTER TABLE item REPLICA IDENTITY FULL;
	CREATE TABLE ord (id int PRIMARY KEY, cust_id int, item_id int, amount numeric);
	CREATE INDEX ON ord (cust_id);
	CREATE INDEX ON ord (item_id);
	ALTER TABLE ord REPLICA IDENTITY FULL;
	INSERT INTO cust SELECT c, 'n' || c FROM generate_series(1, 200) c;
	INSERT INTO item SELECT i, 'c' || (i % 3) FROM generate_series(1, 40) i;
	INSERT INTO ord SELECT o, 1 + o % 200, 1 + o % 40, o FROM generate_series(1, 3000) o;});
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('v', \$q\$ $query \$q\$, strategy => 'auto')");
is($node->safe_psql('postgres', 'SELECT mode FROM delta_join.views'),
	'keyed recompute (groups through joins)', 'the view takes the groups-through-joins path');

# Stop the worker, commit the first transaction, then the second, let it
# go: the first fills a batch, which is cut before the second
sub two_batches
{
	my ($name, $first, $second) = @_;
	my $pid = DeltaJoinWorkload::worker_pid($node);
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), "$name: worker stopped");
	$node->safe_psql('postgres',
		"BEGIN; $first; UPDATE ord SET amount = amount + 1 WHERE id <= 300; COMMIT;");
	# more than 16 MB of WAL between them, so that the batch is cut even
	# when it spilled (a batch that spilled reads on through less:
	# decoding.c)
	$node->safe_psql('postgres',
		"INSERT INTO wal_filler SELECT repeat('x', 300) FROM generate_series(1, 80000)");
	$node->safe_psql('postgres', $second);
	kill 'CONT', $pid;
	ok(DeltaJoinWorkload::wait_views($node), "$name: wait() returns true");
	DeltaJoinTest::target_ok($node, 'v', $query, $name);
}

foreach my $cust (5, 7, 9)
{
	two_batches("customer $cust", "DELETE FROM ord WHERE cust_id = $cust",
		"DELETE FROM cust WHERE id = $cust");
	is($node->safe_psql('postgres', "SELECT count(*) FROM v WHERE cust_id = $cust"),
		'0', "customer $cust: its groups are gone");
}

# the other way round: the customer deleted in the batch that is cut, its
# orders moved to another customer in the next
two_batches('customer 11, orders moved', 'DELETE FROM cust WHERE id = 11',
	'UPDATE ord SET cust_id = 12 WHERE cust_id = 11');

is($node->safe_psql('postgres', 'SELECT state FROM delta_join.status'), 'active', 'the view is active');

done_testing();
