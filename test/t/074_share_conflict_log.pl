# A share of the worker's own that meets another share is not logged as a
# view that waits.
#
# With parallel apply, a join whose changed sources' keys reach no common
# output column is split by whole keys (024, part 2), so two shares may
# write the same target rows: one of them fails (a deadlock, a unique-key
# race) and the worker applies the view again alone, at once
# (share_settle).  A helper's share fails quietly; the worker's own share
# logged "could not be applied now, trying again later: deadlock
# detected" -- a view that waits for another try, which it did not: the
# view was applied in the same batch.  Under a backlog the log filled
# with these lines (a view is shared again after 8 large batches alone),
# which read as a livelock between the worker and its helpers.  Only a
# try that really leaves the view waiting may say so.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('share_conflict_log',
	conf => {
		'delta_join.apply_workers' => '2',
		'delta_join.parallel_apply_min_keys' => '50',
		log_min_messages => 'debug1',
	});
$node->safe_psql(
	'postgres', q{
	CREATE TABLE cc (id int PRIMARY KEY, name text);
	CREATE TABLE cb (id int PRIMARY KEY, c_id int, w int);
	CREATE TABLE ca (id int PRIMARY KEY, b_id int, v int);
	CREATE INDEX ON ca (b_id);
	CREATE INDEX ON cb (c_id);
	INSERT INTO cc SELECT g, 'c' || g FROM generate_series(1, 20) g;
	INSERT INTO cb SELECT g, 1 + g % 20, g FROM generate_series(1, 200) g;
	INSERT INTO ca SELECT g, 1 + g % 200, g FROM generate_series(1, 5000) g;
	SELECT delta_join.create_view('c3', $q$SELECT a.id, a.b_id, b.c_id, a.v, b.w, c.name
	  FROM ca a JOIN cb b ON a.b_id = b.id JOIN cc c ON b.c_id = c.id$q$);});
my $c3 = 'SELECT a.id, a.b_id, b.c_id, a.v, b.w, c.name
	  FROM ca a JOIN cb b ON a.b_id = b.id JOIN cc c ON b.c_id = c.id';

my $log_offset = -s $node->logfile;

# each transaction changes an end of the chain and the rows at the other
# end: their keys (ca.id, cc.id) reach no common column of the target
my $scripts = DeltaJoinWorkload::write_scripts(
	both => [
		1, q{
\set c random(1, 20)
\set r random(1, 100)
BEGIN;
UPDATE cc SET name = 'n' || :r WHERE id = :c;
UPDATE ca SET v = v + 1 WHERE id % 100 = :r;
COMMIT;
}
	]);
# (rounds until shares have met: how soon they do depends on the machine)
my ($log, $failed) = ('', 0);
for (my $round = 1; $round <= 4 && $failed == 0; $round++)
{
	DeltaJoinWorkload::pgbench_ok($node, $scripts, "writes at both ends, round $round",
		clients => 2, seconds => 15);
	ok(DeltaJoinWorkload::wait_views($node, undef, '120s'), "round $round: wait() returns true");
	DeltaJoinTest::target_ok($node, 'c3', $c3, "round $round: c3");
	$log = slurp_file($node->logfile, $log_offset);
	$failed = () = $log =~ /"public\.c3": a share failed, the worker applies the view alone/g;
}
ok($failed > 0, "shares met ($failed times), and the worker applied the view alone");
my @waits = $log =~ /(delta view \S*c3\S* could not be applied now[^\n]*)/g;
is(scalar(@waits), 0, 'no share said the view waits for another try')
  or diag(join("\n", @waits[0 .. ($#waits < 4 ? $#waits : 4)]));
unlike($log, qr/terminated by signal/, 'no process crashed');

$node->stop;
done_testing();
