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
my $target = 'v';

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
	DeltaJoinTest::target_ok($node, $target, $query, $name);
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

# An additive view (counts and sums, apply_additive.c) held the same way.
# Its held keys keep their weights, summed, so the batch that releases
# them adds every batch it held to the groups, as it adds one: one
# additive apply, no recompute.  (It recomputed their groups before: ten
# times the time of an add, for as long as batches were cut -- behind
# another database's bulk load, say.)
$node->safe_psql('postgres', "SELECT delta_join.drop_view('v')");
my $sums = 'SELECT o.cust_id, count(*) AS n, sum(o.amount) AS total '
  . 'FROM ord o JOIN cust c ON c.id = o.cust_id GROUP BY o.cust_id';
$node->safe_psql(
	'postgres', qq{
	ALTER TABLE cust REPLICA IDENTITY FULL;
	ALTER TABLE ord ALTER COLUMN amount TYPE numeric(12, 0);
	ALTER SYSTEM SET log_min_messages = debug1;
	SELECT pg_reload_conf();
	SELECT delta_join.create_view('s', '$sums', strategy => 'auto');});
like(DeltaJoinTest::explain_text($node, $sums, 'auto'),
	qr/added to their groups' counts and sums \(additive\)/,
	'the view of sums is kept by adding');
($query, $target) = ($sums, 's');

# (the first batch after create_view recomputes what it changed: the fill
# may have seen it)
$node->safe_psql('postgres', 'UPDATE ord SET amount = amount WHERE id = 1');
ok(DeltaJoinWorkload::wait_views($node), 'a first batch applied');

# The first batch updates rows 1 to 300 (two_batches), the second rows 250
# to 400 -- the old images of 250 to 300 are the first's new ones, whose
# weights cancel -- and deletes rows 2900 to 2910.  Images of weight other
# than 0 left: an old and a new one of each row up to 400, an old one of
# each deleted row: the first batch alone has fewer.
my $images = $node->safe_psql('postgres',
	'SELECT 2 * count(*) FILTER (WHERE id <= 400) + count(*) FILTER (WHERE id BETWEEN 2900 AND 2910) FROM ord');
my $log_start = -s $node->logfile;
two_batches('sums, updates and deletes', 'SELECT 1',
	'UPDATE ord SET amount = amount + 2 WHERE id BETWEEN 250 AND 400; '
	  . 'DELETE FROM ord WHERE id BETWEEN 2900 AND 2910');
my $log = slurp_file($node->logfile, $log_start);
my @adds = $log =~ /additive apply: (\d+) changed rows of public\.ord, \d+ groups, (\d+) of them recomputed/g;
is(scalar(@adds), 2, 'the held batches were added in one apply');
# (at least: the images of a key spilled and of one in memory are summed
# by the deltas, not counted as one)
cmp_ok($adds[0] // 0, '>=', $images, 'with the changed rows of both');
is($adds[1], 0, 'no group recomputed');

# held batches that changed both sources: their groups are recomputed, as
# for one such batch
two_batches('sums, both sources', 'SELECT 1',
	'DELETE FROM cust WHERE id = 13; UPDATE ord SET cust_id = 14 WHERE id = 5');
is($node->safe_psql('postgres', 'SELECT count(*) FROM s WHERE cust_id = 13'),
	'0', 'the groups of a customer deleted in the second batch are gone');

# a TRUNCATE held with the rest
two_batches('sums, truncated', 'SELECT 1',
	'TRUNCATE ord; INSERT INTO ord SELECT o, 1 + o % 200, 1 + o % 40, o FROM generate_series(1, 500) o');

is($node->safe_psql('postgres', 'SELECT state FROM delta_join.status'), 'active',
	'the view of sums is active');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET log_min_messages; SELECT pg_reload_conf();');

done_testing();
