# One view's large batch does not hold up the others, and makes progress
# across tries (issue 18, item 11).
#
# A retract LEFT JOIN where each changed row of "a" has 300 partners in
# "b": a transaction of 3,000 rows of "a" means 900,000 target rows, several
# seconds of work.  The view's lookup_timeout is 2 s, less than that work:
# before time slices each try timed out and started again from scratch,
# three times, and the view went to error, while the other views of the
# database waited behind it.  Now the worker applies a view's part of a
# batch for at most its time slice (1 s, or half its lookup_timeout),
# commits what it did, and goes on with the rest in the next batches, while
# the other views' changes are applied in those batches too.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('slice');

my $slow_query = 'SELECT a.id AS a_id, a.k, b.id AS b_id, b.v FROM a LEFT JOIN b ON b.k = a.k';
my $fast_query = 'SELECT c.id, c.x, d.name FROM c JOIN d ON d.id = c.x';

$node->safe_psql(
	'postgres', qq{
	CREATE TABLE a (id int PRIMARY KEY, k int);
	CREATE INDEX ON a (k);
	CREATE TABLE b (id int PRIMARY KEY, k int, v text);
	CREATE INDEX ON b (k);
	INSERT INTO b SELECT i, i % 1000, 'v' || i FROM generate_series(1, 300000) i;
	CREATE TABLE c (id int PRIMARY KEY, x int);
	CREATE INDEX ON c (x);
	CREATE TABLE d (id int PRIMARY KEY, name text);
	INSERT INTO d SELECT i, 'd' || i FROM generate_series(1, 100) i;
	SELECT delta_join.create_view('slow', '$slow_query',
	  options => '{"retract": true, "lookup_timeout": "2s"}');
	SELECT delta_join.create_view('fast', '$fast_query');});

# the large transaction, then a change of the other view
$node->safe_psql('postgres',
	'INSERT INTO a SELECT i, i % 1000 FROM generate_series(1, 3000) i');
$node->safe_psql('postgres', 'INSERT INTO c VALUES (1, 5)');

my $started = time();
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.fast', '30s')"),
	't', 'the other view\'s change is applied');
my $waited = time() - $started;
my $slow_left = $node->safe_psql('postgres',
	"SELECT state || ': ' || coalesce(reason, '') FROM delta_join.status WHERE target = 'public.slow'");
note("the other view waited ${waited}s; the large view: $slow_left");
like($slow_left, qr/^active: applying the rest of a large batch/,
	'while the large view still applies the rest of its batch: the other view did not wait for it');

# the large view makes progress across batches and converges, never in error
my @applied;
for (1 .. 3)
{
	push @applied, $node->safe_psql('postgres',
		"SELECT keys_applied FROM delta_join.status WHERE target = 'public.slow'");
	sleep 1;
}
note('keys applied, a second apart: ' . join(', ', @applied));
ok($applied[-1] > $applied[0] || $applied[-1] == 3000,
	'each batch applies part of the large view\'s keys');
is($node->safe_psql('postgres', "SELECT delta_join.wait('public.slow', '180s')"),
	't', 'the large view converges');
is( $node->safe_psql('postgres',
		"SELECT state, reason IS NULL, last_error IS NULL FROM delta_join.status WHERE target = 'public.slow'"
	),
	'active|t|t',
	'without an error, its lookup_timeout never hit');
DeltaJoinTest::target_ok($node, 'slow', $slow_query, 'the large view');
DeltaJoinTest::target_ok($node, 'fast', $fast_query, 'the other view');
is($node->safe_psql('postgres', 'SELECT count(*) FROM slow'), '900000', 'every row is there');

# the same through deletes: the slices go back to null-extended rows
$node->safe_psql('postgres', 'DELETE FROM b WHERE k < 500');
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '180s')"),
	't', 'a large delete converges');
DeltaJoinTest::target_ok($node, 'slow', $slow_query, 'after the delete, the large view');

ok(!$node->log_contains('could not be applied now'),
	'no try of the large view failed: it was applied in slices');

$node->stop;
done_testing();
