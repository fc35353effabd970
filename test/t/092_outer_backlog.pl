# A retract-mode outer join across a batch cut short (a backlog).
#
# The worker's batches hold one key (delta_join.max_batch_size 1), and it
# is stopped while two transactions commit: T1 changes q_b 1, T2 deletes
# q_c 12.  Its next batch is full after T1 and cut there, under a snapshot
# that already sees T2.  Applying q_b 1 replaces the rows of its partner
# q_c 12 in which q_b is absent -- "q_a 4, no q_b, q_c 12" goes, q_c 12
# being gone to that snapshot -- and the batch of T2 then found no row of
# q_c 12 to tell it that q_a 4 was its partner: "q_a 4" alone never came
# (found by an attack).  Such a view's keys are now held while batches are
# cut, as those of groups through joins are, and applied by the batch that
# reaches the end of the WAL, with all its changes at once.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('main', conf => { 'delta_join.max_batch_size' => '1' });

my $query = 'SELECT a.id AS aid, b.id AS bid, c.id AS cid '
  . 'FROM q_a a LEFT JOIN q_b b ON a.k2 = b.k2 FULL JOIN q_c c ON c.k = a.k';

$node->safe_psql(
	'postgres', qq{
	CREATE TABLE q_a (id int PRIMARY KEY, k int, k2 int);
	CREATE TABLE q_b (id int PRIMARY KEY, k2 int, v int);
	CREATE TABLE q_c (id int PRIMARY KEY, k int);
	CREATE INDEX ON q_a (k);
	CREATE INDEX ON q_a (k2);
	CREATE INDEX ON q_b (k2);
	CREATE INDEX ON q_c (k);
	INSERT INTO q_a VALUES (4, 2, NULL), (5, 2, 1);
	INSERT INTO q_b VALUES (1, 1, 0);
	INSERT INTO q_c VALUES (12, 2);
	SELECT delta_join.create_view('abc', \$q\$ $query \$q\$, options => '{"retract": true}');});
ok(DeltaJoinWorkload::wait_views($node), 'the view is made');
is($node->safe_psql('postgres', 'SELECT aid, bid, cid FROM abc ORDER BY 1, 2'),
	"4||12\n5|1|12", 'both rows of q_a join q_c 12');

# T1 and T2 commit while the worker is stopped; its next batch is cut
# after T1
foreach my $round (1 .. 3)
{
	my $pid = DeltaJoinWorkload::worker_pid($node);
	ok(DeltaJoinWorkload::stop_worker_idle($node, $pid), "round $round: worker stopped");
	$node->safe_psql('postgres', 'UPDATE q_b SET v = v + 1 WHERE id = 1');
	$node->safe_psql('postgres',
		$round == 1 ? 'DELETE FROM q_c WHERE id = 12'
		: $round == 2 ? 'INSERT INTO q_c VALUES (12, 2)'
		:               'UPDATE q_c SET k = 3 WHERE id = 12');
	kill 'CONT', $pid;
	ok(DeltaJoinWorkload::wait_views($node), "round $round: wait() returns true");
	DeltaJoinTest::target_ok($node, 'abc', $query, "round $round");
}
is($node->safe_psql('postgres', 'SELECT aid, bid, cid FROM abc ORDER BY 1, 2, 3'),
	"4||\n5|1|\n||12", 'q_a 4 and 5 without q_c, q_c 12 alone');

done_testing();
