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

# batches until the helper runs
my $helper;
for my $try (1 .. 40)
{
	$node->safe_psql('postgres', "UPDATE a SET v = 'v0' WHERE id <= 20");
	DeltaJoinWorkload::wait_views($node, 'ab');
	$helper = $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join helper'});
	last if $helper =~ /^\d+$/;
	usleep(500_000);
}
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

$node->stop;
done_testing();
