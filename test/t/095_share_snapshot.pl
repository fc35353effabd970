# Parallel apply and the rows decoding kept (issue 10).  A view a share of
# which failed is applied again by the worker alone, in a transaction after
# the batch's, under a newer snapshot; so is each chunk of a spilled batch
# shared in a round.  There the rows decoding kept of the keys must not be
# used: joined with what a later transaction wrote to the other sources,
# they make rows that no snapshot ever held.
#
# A batch changes every row of a (v0 to v1).  The helper is stopped idle
# before the batch is applied; the worker applies its own share under the
# batch's snapshot, commits it and waits for the helper.  Then one transaction
# changes b (w_old to w_new) and deletes every row of a, and the helper is
# terminated before it runs its share: the worker applies the view again
# alone.  No committed state ever joined v1 to w_new; the target must not
# either (it did, for every row, when the kept rows were used there).
#
# Then the same with a batch that spills (max_batch_size 50): its view is
# applied a chunk at a time, each chunk a round of its own.  The helper is
# stopped in the first round, the later transaction commits, and the
# helper goes on: the later rounds run under snapshots that see it (112 of
# 300 rows joined the batch's rows to x_new when the kept rows were used).

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('share_snapshot',
	conf => {
		'delta_join.apply_workers' => '2',
		'delta_join.parallel_apply_min_keys' => '1',
	});
$node->safe_psql(
	'postgres', q{
	CREATE TABLE b (id int PRIMARY KEY, w text);
	CREATE TABLE a (id int PRIMARY KEY, bid int, v text);
	CREATE INDEX ON a (bid);
	INSERT INTO b VALUES (1, 'w_old');
	INSERT INTO a SELECT g, 1, 'v0' FROM generate_series(1, 300) g;
	SELECT delta_join.create_view('ab',
	  'SELECT a.id, a.v, b.w FROM a JOIN b ON a.bid = b.id');});

# Batches that change the rows of a $where until the helper runs; its pid
sub start_helper
{
	my ($where) = @_;
	my $pid;
	for my $try (1 .. 40)
	{
		$node->safe_psql('postgres', "UPDATE a SET v = 'v0' WHERE $where");
		DeltaJoinWorkload::wait_views($node, 'ab');
		$pid = $node->safe_psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join helper'});
		return $pid if $pid =~ /^\d+$/;
		usleep(500_000);
	}
	return $pid;
}

my $helper = start_helper('id <= 20');
like($helper, qr/^\d+$/, 'the worker started its helper');

my $worker = DeltaJoinWorkload::worker_pid($node);
ok(DeltaJoinWorkload::stop_worker_idle($node, $worker), 'the worker is stopped while idle');
$node->safe_psql('postgres', "UPDATE a SET v = 'v1'");
ok(DeltaJoinWorkload::stop_worker_idle($node, $helper), 'the helper is stopped while idle');
kill 'CONT', $worker;

# the worker's own share is committed before it waits for the helper
ok( $node->poll_query_until('postgres', "SELECT count(*) > 0 FROM ab WHERE v = 'v1'"),
	"the worker committed its share of the batch");
$node->safe_psql('postgres',
	"BEGIN; UPDATE b SET w = 'w_new' WHERE id = 1; DELETE FROM a; COMMIT");
my $log_offset = -s $node->logfile;
kill 'TERM', $helper;
kill 'CONT', $helper;
ok(DeltaJoinWorkload::wait_views($node, 'ab', '60s'), 'wait() returns true');
like(slurp_file($node->logfile, $log_offset), qr/ended during a round: the worker applies its share/,
	'the helper ended in the round, and the worker applied the view again');

is($node->safe_psql('postgres', "SELECT count(*) FROM ab WHERE v = 'v1' AND w = 'w_new'"),
	'0', 'no target row joins the batch\'s rows to what a later transaction wrote');
is($node->safe_psql('postgres', "SELECT count(*) FROM ab WHERE w = 'w_old'"),
	'300', 'every row is one some snapshot held (upsert: the deleted rows stay)');
is($node->safe_psql('postgres', "SELECT state FROM delta_join.status WHERE target = 'public.ab'"),
	'active', 'the view is active');

# ---- the chunk rounds of a spilled batch ----

# max_batch_size 50: a batch of 300 keys spills, and the view is applied a
# chunk at a time, each chunk a round of its own, in transactions after the
# batch's.  The helper is stopped before the batch; the worker commits its
# share of the first chunk and waits for the helper.  Then a transaction
# changes b and deletes the rows of the batch, and the helper goes on: the
# rounds of the other chunks run under snapshots that see that transaction.
$node->safe_psql(
	'postgres', q{
	ALTER SYSTEM SET delta_join.max_batch_size = 50;
	ALTER SYSTEM SET log_min_messages = debug1;
	SELECT pg_reload_conf();
	INSERT INTO b VALUES (2, 'x_old');
	INSERT INTO a SELECT g, 2, 'v0' FROM generate_series(1001, 1300) g;});
ok(DeltaJoinWorkload::wait_views($node, 'ab', '60s'), 'the rows of b 2 are applied');
$helper = start_helper('id BETWEEN 1001 AND 1020');
like($helper, qr/^\d+$/, 'the worker started a helper again');

$worker = DeltaJoinWorkload::worker_pid($node);
ok(DeltaJoinWorkload::stop_worker_idle($node, $worker), 'the worker is stopped while idle');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', "UPDATE a SET v = 'v1' WHERE bid = 2");
ok(DeltaJoinWorkload::stop_worker_idle($node, $helper), 'the helper is stopped while idle');
kill 'CONT', $worker;
ok( $node->poll_query_until('postgres', "SELECT count(*) > 0 FROM ab WHERE v = 'v1' AND w = 'x_old'"),
	"the worker committed its share of the first chunk");
$node->safe_psql('postgres',
	"BEGIN; UPDATE b SET w = 'x_new' WHERE id = 2; DELETE FROM a WHERE bid = 2; COMMIT");
kill 'CONT', $helper;
ok(DeltaJoinWorkload::wait_views($node, 'ab', '60s'), 'wait() returns true');
like(slurp_file($node->logfile, $log_offset), qr/dirty keys: \d+ were spilled to disk, applied in chunks of 50/,
	'the batch spilled, and was applied in chunks');
is($node->safe_psql('postgres', "SELECT count(*) FROM ab WHERE v = 'v1' AND w = 'x_new'"),
	'0', 'no chunk joined the batch\'s rows to what a later transaction wrote');
is($node->safe_psql('postgres', "SELECT count(*) FROM ab WHERE w = 'x_old'"),
	'300', 'every row of b 2 is one some snapshot held');
is($node->safe_psql('postgres', "SELECT state FROM delta_join.status WHERE target = 'public.ab'"),
	'active', 'the view is active');

$node->stop;
done_testing();
