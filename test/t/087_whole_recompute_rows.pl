# Keyed recompute of groups through joins takes the whole query once a
# batch dirties delta_join.whole_recompute_fraction of the target's rows
# (issue 22; recompute_whole_pays in recompute.c).  Those rows are counted
# as the statistics count them, not estimated from the target's pages: a
# target whose groups are rewritten batch after batch grows dead row
# versions until a vacuum, and its pages then promise several times the
# rows it holds.  The decision used to take them at their word, and
# recomputed group after group what the whole query would have done in
# half the time (a worker's first batch after a restart, with a backlog of
# 100,000 orders on 10M: 13 s against 6 s).
#
# Here autovacuum is off and the target of 2,000 groups is rewritten four
# times over, until the planner (which estimates from pages as the old
# decision did) takes it for more than 2,400 rows; then a batch dirties
# 1,200 groups.  That is over half of 2,000, so the whole query is
# recomputed (the worker's DEBUG1 line says so), and the view is exact.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('whole_rows',
	conf => { autovacuum => 'off', log_min_messages => 'debug1' });

my $query = 'SELECT m.id AS merchant_id, count(*) AS n, avg(o.amount) AS mean
  FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.id';

$node->safe_psql(
	'postgres', qq{
	CREATE TABLE merchants (id int PRIMARY KEY, region text);
	CREATE TABLE orders (id int PRIMARY KEY, merchant_id int NOT NULL, amount numeric);
	CREATE INDEX ON orders (merchant_id);
	ALTER TABLE merchants REPLICA IDENTITY FULL;
	ALTER TABLE orders REPLICA IDENTITY FULL;
	INSERT INTO merchants SELECT g, 'region ' || g % 10 FROM generate_series(1, 2000) g;
	INSERT INTO orders SELECT g, 1 + g % 2000, g % 100 FROM generate_series(1, 20000) g;
	SELECT delta_join.create_view('by_merchant', \$q\$ $query \$q\$, strategy => 'auto');});
is( $node->safe_psql(
		'postgres', "SELECT mode FROM delta_join.views WHERE target = 'public.by_merchant'"),
	'keyed recompute (groups through joins)',
	'an average over a join: its dirty groups are recomputed');

# every group rewritten, four times: dead versions, no vacuum
for my $round (1 .. 4)
{
	$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1');
	is($node->safe_psql('postgres', "SELECT delta_join.wait('public.by_merchant', '60s')"),
		't', "rewrite $round applied");
}
my ($planned) = $node->safe_psql('postgres', 'EXPLAIN SELECT * FROM by_merchant') =~ /rows=(\d+)/;
cmp_ok($planned, '>', 2400,
	"the target's pages promise more than twice 1,200 rows ($planned): an estimate from them would recompute each group"
);

# the statistics count the target's 2,000 rows (the fill's inserts)
ok( $node->poll_query_until(
		'postgres',
		"SELECT n_live_tup = 2000 FROM pg_stat_user_tables WHERE relid = 'by_merchant'::regclass"),
	'the statistics count the target rows');

my $offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE merchant_id <= 1200');
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.by_merchant', '60s')"),
	't', 'the batch of 1,200 dirty groups is applied');
like(
	slurp_file($node->logfile, $offset),
	qr/1200 dirty groups of a target of about 2000 rows: the whole query recomputed/,
	'1,200 dirty groups of 2,000 rows: the whole query is recomputed');
DeltaJoinTest::target_ok($node, 'by_merchant', $query, 'after the whole query was recomputed');

$node->stop;
done_testing();
