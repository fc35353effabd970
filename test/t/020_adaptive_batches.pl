# Adaptive batches (issue 10): the worker applies a batch as soon as
# decoding has caught up with the WAL there is, woken by the commit, so a
# change does not wait for batch_timeout -- here an hour; max_batch_size
# only bounds a batch, so a transaction larger than it converges; and a
# change committed asynchronously does not wait for the WAL writer.
# These are behaviours, not timings: wait() has a few seconds to return
# where the old batching would have taken an hour.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('adaptive',
	conf => { wal_writer_delay => '10s', 'delta_join.batch_timeout' => '1h' });

$node->safe_psql(
	'postgres', q{
	CREATE TABLE orders (id bigint PRIMARY KEY, item_id bigint, amount int);
	CREATE TABLE items (id bigint PRIMARY KEY, name text);
	CREATE INDEX ON orders (item_id);
	INSERT INTO items SELECT i, 'item ' || i FROM generate_series(1, 10) i;
	SELECT delta_join.create_view('wide',
	  'SELECT o.id, o.item_id, i.name, o.amount FROM orders o JOIN items i ON i.id = o.item_id',
	  options => '{"batch_timeout": "1h", "max_batch_size": 10}');});

my $query = 'SELECT o.id, o.item_id, i.name, o.amount FROM orders o JOIN items i ON i.id = o.item_id';

is( $node->safe_psql('postgres',
		"SELECT options->>'batch_timeout' FROM delta_join.views WHERE target = 'public.wide'"),
	'3600000', 'the view asks for batches of up to an hour');

# one committed change: applied without waiting for the hour
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 1, 10)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.wide', '20s')"),
	't', 'a single change is applied without waiting for batch_timeout');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wide'), '1', 'and it is there');

# an asynchronous commit, with the WAL writer asleep for 10 s
$node->safe_psql('postgres',
	'SET synchronous_commit = off; INSERT INTO orders VALUES (2, 2, 20)');
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.wide', '9s')"),
	't', 'a change committed asynchronously does not wait for the WAL writer (asleep 10 s)');

# one transaction of 1,000 rows, a hundred times max_batch_size
$node->safe_psql('postgres',
	'INSERT INTO orders SELECT g, 1 + g % 10, g FROM generate_series(3, 1002) g');
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.wide', '60s')"),
	't', 'a transaction larger than max_batch_size converges');
DeltaJoinTest::target_ok($node, 'wide', $query, 'a transaction larger than max_batch_size');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wide'), '1002', 'every row is there');

# an item renamed: its hundred orders follow, still without the hour
$node->safe_psql('postgres', "UPDATE items SET name = 'renamed' WHERE id = 3");
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.wide', '20s')"),
	't', 'a change fanning out to many rows is applied without waiting');
DeltaJoinTest::target_ok($node, 'wide', $query, 'a change fanning out to many rows');

# an idle worker sleeps: it wakes about once a second, not every 10 ms
my $pid = $node->safe_psql('postgres',
	"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'");
sub switches
{
	open my $fh, '<', "/proc/$pid/status" or return undef;
	my ($v) = map { /^voluntary_ctxt_switches:\s+(\d+)/ ? $1 : () } <$fh>;
	close $fh;
	return $v;
}
my $before = switches();
sleep 3;
my $after = switches();
SKIP:
{
	skip 'no /proc status for the worker', 1 unless defined $before && defined $after;
	cmp_ok($after - $before, '<', 30, 'an idle worker wakes up rarely (' . ($after - $before) . ' times in 3 s)');
}

$node->stop;
done_testing();
