# A shared view whose source is truncated after the batch's snapshot.
#
# With parallel apply (delta_join.apply_workers > 1), the worker applies
# its own share of each shared view in the batch's transaction, under the
# batch's snapshot.  A view one of whose tables was truncated (or
# rewritten) by a transaction that snapshot does not see cannot be applied
# under it: apply_view answers VIEW_LATER, and hands the rest of the work
# back through its rest argument -- which the worker's share does not
# give.  The worker crashed (signal 11 in apply_view), and with it the
# whole server: every session of every database was cut off, and the
# server went through crash recovery.  The share must instead count as
# failed, and the worker applies the view again alone after the round
# (share_settle), as for any share that did not commit.
#
# The interleaving is made without timing: a first view whose target has
# a trigger that sleeps holds the worker in the batch's transaction, after
# its snapshot, while the source of the second, shared view (an aggregate)
# is truncated.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('share_truncated',
	conf => {
		'delta_join.apply_workers' => '2',
		'delta_join.parallel_apply_min_keys' => '1',
	});
$node->safe_psql(
	'postgres', q{
	CREATE TABLE slow (k int PRIMARY KEY, v int);
	INSERT INTO slow VALUES (1, 0);
	CREATE TABLE x (k int, id int, v int, PRIMARY KEY (k, id));
	INSERT INTO x SELECT 1 + g % 10, g, g FROM generate_series(1, 100) g;
	-- retract mode: not shared, the worker applies it
	SELECT delta_join.create_view('held', 'SELECT k, v FROM slow', options => '{"retract": true}');
	SELECT delta_join.create_view('agg', 'SELECT k, count(*) AS n, sum(v) AS s FROM x GROUP BY k');});
my $agg = 'SELECT k, count(*) AS n, sum(v) AS s FROM x GROUP BY k';

# held's target sleeps on each write: in the batch that writes it, the
# worker stays in the batch's transaction, under its snapshot, before it
# gets to agg
$node->safe_psql(
	'postgres', q{
	CREATE FUNCTION public.nap() RETURNS trigger LANGUAGE plpgsql
	  AS $$ BEGIN PERFORM pg_sleep(3); RETURN NULL; END $$;
	CREATE TRIGGER nap AFTER UPDATE ON held FOR EACH ROW EXECUTE FUNCTION public.nap();});

# the first batches build the plans (a plan built in the batch would lock
# agg's source before held is applied) and start the helper
for my $try (1 .. 40)
{
	$node->safe_psql('postgres', 'UPDATE x SET v = v + 1');
	DeltaJoinWorkload::wait_views($node, undef, '60s');
	last
	  if $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delta_join helper'") eq
	  '1';
	sleep 1;
}
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delta_join helper'"),
	'1', 'a helper runs');
DeltaJoinTest::target_ok($node, 'agg', $agg, 'agg before the truncation');

my $worker = DeltaJoinWorkload::worker_pid($node);
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres',
	'BEGIN; UPDATE slow SET v = v + 1; UPDATE x SET v = v + 1; COMMIT;');
ok( $node->poll_query_until(
		'postgres', qq{
		SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $worker}),
	'the worker writes held, whose trigger sleeps');
$node->safe_psql('postgres', 'TRUNCATE x');
$node->safe_psql('postgres', 'INSERT INTO x VALUES (3, 1, 7), (3, 2, 8), (11, 1, 9)');

ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), 'wait() returns true');
unlike(slurp_file($node->logfile, $log_offset), qr/terminated by signal/,
	'no process crashed');
is( $node->safe_psql('postgres',
		"SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join worker'"),
	$worker, 'the worker lives on');
DeltaJoinTest::target_ok($node, 'agg', $agg, 'agg after the truncation');
DeltaJoinTest::target_ok($node, 'held', 'SELECT k, v FROM slow', 'held');

$node->stop;
done_testing();
