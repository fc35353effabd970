# An additive aggregate over joins that reads a transaction's spilled keys
# a chunk at a time (one source changed; apply_view.c, pieces_together)
# runs its delta query per chunk and sums the deltas of each group across
# the chunks, by the group key's bytes.  Equal values need not have equal
# bytes: numeric 1.0 and 1.00 are one group, and so are float8 0 and -0.
# Two chunks may then give one group under two spellings, which summed
# apart would write the group twice from one read of it (one delta lost,
# or an error).  Such a view takes the keyed recompute of its groups for a
# batch read in chunks (apply_additive.c, additive_source), and adds a
# batch in memory that only adds rows (one that removes rows recomputes
# its groups: 99_additive_spelling).  A view grouped by an integer is added in
# chunks, and so is one grouped by a long text kept out of line (its
# deltas name a group by a pointer to one of its rows: summed by value).
#
# Each view must equal its query after transactions that spill, whose
# orders hold each group under every spelling; and after one in which an
# order enters a group and leaves it again, its two images in chunks apart
# (a sum of none stays NULL, as when the images cancel in one query).
# A view of min and max by the long text finds each group once.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('chunked_keys',
	conf => { log_min_messages => 'debug1', 'delta_join.max_batch_size' => 20 });

my %query = (
	by_class => 'SELECT o.class, count(*) AS n, sum(o.amount) AS total
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY o.class',
	by_weight => 'SELECT o.weight, count(*) AS n, sum(o.amount) AS total
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY o.weight',
	by_merchant => 'SELECT m.id AS merchant_id, count(*) AS n, sum(o.amount) AS total
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.id',
	by_region => 'SELECT m.region, count(*) AS n, sum(o.amount) AS total
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.region',
	region_ranges => 'SELECT m.region, min(o.amount) AS low, max(o.amount) AS high
	  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.region');

# class: 1, 2 and 3, each spelt 1.0, 1.00 and 1.000 by turns; weight: 0
# and -0 by turns, and 1
$node->safe_psql(
	'postgres', q{
	CREATE TABLE merchants (id int PRIMARY KEY, region text);
	CREATE TABLE orders (id int PRIMARY KEY, merchant_id int NOT NULL, class numeric,
	                     weight float8, amount int);
	CREATE INDEX ON orders (merchant_id);
	ALTER TABLE merchants REPLICA IDENTITY FULL;
	ALTER TABLE orders REPLICA IDENTITY FULL;
	ALTER TABLE merchants ALTER region SET STORAGE EXTERNAL;
	INSERT INTO merchants SELECT g, repeat('region ', 500) || g % 2 FROM generate_series(1, 30) g;
	INSERT INTO orders
	  SELECT g, 1 + g % 30, round(1 + g % 3, g / 3 % 3 + 1),
	         CASE g % 3 WHEN 0 THEN 0::float8 WHEN 1 THEN '-0'::float8 ELSE 1 END, g % 100
	  FROM generate_series(1, 3000) g;});
foreach my $view (sort keys %query)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$, strategy => 'auto')");
}
is($node->safe_psql('postgres', 'SELECT count(DISTINCT class::text) FROM orders'),
	'9', 'three classes, each spelt three ways');

# (the first batch after a view is made is recomputed, not added)
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount WHERE id = 1');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'the views are fresh');

my $offset = -s $node->logfile;
for my $round (1 .. 3)
{
	# every order: more than 20 keys, so they spill and are read in chunks
	$node->safe_psql('postgres',
		"UPDATE orders SET amount = amount + $round, class = round(class, (id + $round) % 3 + 1),
		   weight = CASE WHEN weight = 0 THEN -weight ELSE weight END");
	is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '120s')"), 't',
		"round $round: the views are fresh");
	foreach my $view (sort keys %query)
	{
		DeltaJoinTest::target_ok($node, $view, $query{$view}, "round $round");
	}
}
# a batch in memory that only adds rows is added, by numeric and float8
# keys too (one that removes rows recomputes their groups: the key kept
# could be spelt as a row that left; see 99_additive_spelling)
my $small_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'INSERT INTO orders VALUES (6001, 1, 1.0, 1, 1), (6002, 1, 2.00, 1, 2), (6003, 1, 3.000, 1, 3)');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'a small batch is applied');
foreach my $view (sort keys %query)
{
	DeltaJoinTest::target_ok($node, $view, $query{$view}, 'after a small batch');
}
like(slurp_file($node->logfile, $small_offset),
	qr/additive apply: 3 changed rows of public\.orders, 3 groups, 0 of them recomputed\n[^\n]*CONTEXT:  applying delta view "public\.by_class"/,
	'by_class adds a batch in memory that only adds rows');

# An order that enters a group and leaves it again in one transaction, its
# two images in chunks apart, adds nothing to the group: not 0 to a sum of
# none, which stays NULL (found by an attack: it was written 0).
$node->safe_psql(
	'postgres', q{
	INSERT INTO merchants VALUES (31, repeat('region ', 500) || 1);
	INSERT INTO orders VALUES (5001, 31, 1, 1, NULL);});
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount WHERE id = 2');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'a merchant with one order of no amount');
my $null_offset = -s $node->logfile;
$node->safe_psql(
	'postgres', q{
	BEGIN;
	UPDATE orders SET merchant_id = 31 WHERE id = 1;
	UPDATE orders SET amount = amount + 1 WHERE id BETWEEN 2 AND 3000;
	UPDATE orders SET merchant_id = 2 WHERE id = 1;
	COMMIT;});
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '120s')"), 't',
	'an order in and out of a group, 6,000 rows apart');
is($node->safe_psql('postgres', "SELECT n, total IS NULL FROM by_merchant WHERE merchant_id = 31"),
	'1|t', 'its sum of no amount is still NULL');
foreach my $view (sort keys %query)
{
	DeltaJoinTest::target_ok($node, $view, $query{$view}, 'after an order in and out of a group');
}
like(slurp_file($node->logfile, $null_offset),
	qr/additive apply: \d+ changed rows of public\.orders, 31 groups, \d+ of them recomputed; read in \d+ chunks/,
	'that transaction was added in chunks');

# A spilled transaction that other commits follow: its batch reads on to
# its position through them (less than 16 MB of WAL: decoding.c) instead
# of being cut there, so the views read its keys in chunks, where a cut
# batch would have them hold every key in memory until the next one (an
# attack found the chunks skipped whenever any WAL followed).
my $pid = DeltaJoinWorkload::worker_pid($node);
ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), 'worker stopped');
my $follow_offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1');
$node->safe_psql('postgres', 'CREATE TABLE elsewhere (x int); INSERT INTO elsewhere VALUES (1)');
kill 'CONT', $pid;
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '120s')"), 't',
	'a spilled transaction, then others');
foreach my $view (sort keys %query)
{
	DeltaJoinTest::target_ok($node, $view, $query{$view}, 'after a spilled transaction and others');
}
like(slurp_file($node->logfile, $follow_offset),
	qr/additive apply: \d+ changed rows of public\.orders, \d+ groups, \d+ of them recomputed; read in \d+ chunks/,
	'its batch went on through the others, and was added in chunks');

# The lookup timeout bounds each chunk, as it bounds each piece of any
# view's spilled keys, not the whole: 400,000 orders read in 2,000 chunks
# take about 0.6 s, twice the timeout, each chunk a thousandth of that
# (the margin is for a loaded machine: a chunk that stalls past the
# timeout makes the view hold its keys for a retry).  (Found by an
# attack: the view timed out three times and went to error.)
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('timed', \$q\$ $query{by_merchant} \$q\$, strategy => 'auto', "
	  . q{options => '{"lookup_timeout": "300ms"}')});
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount WHERE id = 3');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '60s')"), 't', 'a view with a lookup timeout of 300 ms');
my $timed_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'INSERT INTO orders SELECT g, 1 + g % 30, 1, 1, g % 100 FROM generate_series(10001, 410000) g');
is($node->safe_psql('postgres', "SELECT delta_join.wait('timed', '300s')"), 't',
	'400,000 orders in one transaction: the view is fresh');
is($node->safe_psql('postgres', "SELECT state FROM delta_join.status WHERE target = 'public.timed'"),
	'active', 'and active');
DeltaJoinTest::target_ok($node, 'timed', $query{by_merchant}, 'after 400,000 orders');
my $timed_log = slurp_file($node->logfile, $timed_offset);
my ($timed_chunks) = $timed_log =~
  /additive apply: 400000 changed rows of public\.orders, 30 groups, \d+ of them recomputed; read in (\d+) chunks/;
cmp_ok($timed_chunks // 0, '>=', 2000, 'the keys were read in chunks');
unlike($timed_log, qr/delta view "public\.timed" could not be applied now/,
	'the view was applied at its first try: no chunk, nor the whole, met its timeout');
is($node->safe_psql('postgres', "SELECT delta_join.wait(NULL, '300s')"), 't', 'every view is fresh');
$query{timed} = $query{by_merchant};

my $log = slurp_file($node->logfile, $offset);

# by_region's two regions, each a long text out of line, a pointer to one
# of its merchants' rows in each chunk's deltas: summed by value, two
# groups (by their pointers, up to one per merchant)
my @chunked_sums = $log =~ /additive apply: \d+ changed rows of public\.orders, (\d+) groups, \d+ of them recomputed; read in/g;
my @by_region = grep { $_ != 30 && $_ != 31 } @chunked_sums;
cmp_ok(scalar(@by_region), '>=', 5, 'by_region added the transactions read in chunks');
is(join(',', grep { $_ != 2 } @by_region), '', 'a long group key out of line is summed by its value');
like($log, qr/additive apply: \d+ changed rows of public\.orders, \d+ groups, \d+ of them recomputed; read in \d+ chunks/,
	'a view grouped by an integer adds the chunks');
# region_ranges (min and max: not additive) finds the groups of each
# batch, the long regions coming from its finder query as pointers to its
# merchants' rows: two groups, each found once (by their pointers, up to
# one per merchant)
my @found = $log =~
  /groups through joins: (\d+) groups found from \d+ changed rows[^\n]*\n[^\n]*CONTEXT:  applying delta view "public\.region_ranges"/g;
cmp_ok(scalar(@found), '>=', 5, 'region_ranges found the groups of each transaction');
is(join(',', grep { $_ > 2 } @found), '', 'a long group key out of line is found by its value');
my @chunked_groups = $log =~ /groups through joins: \d+ groups found from \d+ changed rows read in \d+ chunks/g;
cmp_ok(scalar(@chunked_groups), '>=', 6,
	'the views grouped by numeric and float8 recompute their groups of each transaction read in chunks');
is($node->safe_psql('postgres', "SELECT count(*) FROM delta_join.status WHERE state <> 'active'"),
	'0', 'every view is active');

done_testing();
