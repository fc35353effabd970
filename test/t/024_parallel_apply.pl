# Parallel apply (issue 10): a database's large batches are split by a hash
# of view and key between the apply worker and its helpers, each share
# applied in a transaction of its own; the slot is confirmed only once every
# share has committed.
#
#  1. a batch of 5,000 keys starts the helpers (apply_workers - 1 of them),
#     is shared, and every view is exact; the counters of the shares add
#     up (keys_applied grows by the keys of the batch, once each);
#     a batch that spilled (delta_join.max_batch_size 300) is shared a
#     chunk at a time, each chunk once;
#  2. a join whose sources' keys share no column (orders by id, items by
#     id) is split by whole keys, so two shares write the same target rows
#     when both sides change: the conflicts (a unique-key race, a row
#     updated under a share, a deadlock) make the worker apply the view
#     again alone.  Concurrent writes on both sides, then exact;
#  3. a helper killed during a stream of writes: its share is applied by
#     the worker, a new helper is started, and the views are exact;
#  4. a share that fails for good (a CHECK constraint on the target) puts
#     the view in error with the constraint's message, as without helpers,
#     and the other views go on;
#  5. lowering delta_join.apply_workers to 1 stops the helpers; stopping the
#     worker stops them too;
#  6. an after-row trigger on a target fires, and leaks nothing;
#  7. a helper stopped (SIGSTOP) in a round is let go after the round's
#     time (10 s and the views' lookup_timeouts), and its share applied by
#     the worker.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('parallel',
	conf => {
		'delta_join.apply_workers' => '3',
		'delta_join.parallel_apply_min_keys' => '100',
		log_min_messages => 'debug1',
	});

DeltaJoinTest::worked_example($node);
my $wide = $DeltaJoinTest::wide_query;
my $summary = $DeltaJoinTest::summary_query;
$node->safe_psql(
	'postgres', qq{
	INSERT INTO items SELECT m, i, 'item ' || m || '/' || i
	  FROM generate_series(1, 50) m, generate_series(1, 20) i
	  ON CONFLICT DO NOTHING;
	SELECT delta_join.create_view('wide', \$q\$ $wide \$q\$);
	SELECT delta_join.create_view('summary', \$q\$ $summary \$q\$);
	-- keys without a common column: shared by whole keys
	CREATE TABLE o2 (id bigint PRIMARY KEY, item_id bigint, amount int);
	CREATE TABLE i2 (id bigint PRIMARY KEY, name text);
	CREATE INDEX ON o2 (item_id);
	INSERT INTO i2 SELECT g, 'i' || g FROM generate_series(1, 50) g;
	INSERT INTO o2 SELECT g, 1 + g % 50, g FROM generate_series(1, 2000) g;
	SELECT delta_join.create_view('wide2',
	  'SELECT o.id, o.item_id, i.name, o.amount FROM o2 o JOIN i2 i ON i.id = o.item_id');});

my $wide2 = 'SELECT o.id, o.item_id, i.name, o.amount FROM o2 o JOIN i2 i ON i.id = o.item_id';

sub helpers
{
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'delta_join helper'");
}

sub exact
{
	my ($label) = @_;
	ok(DeltaJoinWorkload::wait_views($node, undef, '60s'), "$label: wait() returns true");
	DeltaJoinTest::target_ok($node, 'wide', $wide, "$label: wide");
	DeltaJoinTest::target_ok($node, 'summary', $summary, "$label: summary");
	DeltaJoinTest::target_ok($node, 'wide2', $wide2, "$label: wide2");
}

sub keys_applied
{
	return $node->safe_psql('postgres',
		"SELECT keys_applied FROM delta_join.status WHERE target = 'public.wide'");
}

# --- 1. a large batch is shared ---

# The worker builds the views' plans at their first batch, alone; the
# next large batch starts the helpers, and is applied alone too: they are
# not ready yet.
$node->safe_psql('postgres',
	q{INSERT INTO orders SELECT 1 + g % 50, 1 + g % 20, g, g % 100 FROM generate_series(1, 5000) g
	  ON CONFLICT DO NOTHING});
exact('first batch');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 5000');
exact('second batch');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 2 FROM pg_stat_activity WHERE backend_type = 'delta_join helper'"),
	'apply_workers = 3: the worker started two helpers');

my $before = keys_applied();
my $log_offset;
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 5000');
exact('over 5,000 keys in one batch');
is(keys_applied() - $before,
	$node->safe_psql('postgres', 'SELECT count(*) FROM orders WHERE order_id <= 5000'),
	'the shares applied every key once: their counters add up to the batch');
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity
		  WHERE backend_type = 'delta_join helper' AND state = 'idle'}),
	'2',
	'both helpers applied a share (their activity is set only by a task)');

# --- 1b. a batch that spilled is shared a chunk at a time ---

# small batches (the worker's setting: a restart makes sure the worker has
# it): 5,000 keys spill beyond 2 x 300, and are read back in chunks of 300,
# each a round
$node->append_conf('postgresql.conf', "delta_join.max_batch_size = 300\n");
$node->restart;
$node->safe_psql('postgres',
	qq{SELECT delta_join.create_view('wide_small', \$q\$ $wide \$q\$)});
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 5000');
ok(DeltaJoinWorkload::wait_views($node, 'wide_small'), 'wait() for the view of small batches');
$before = $node->safe_psql('postgres',
	"SELECT keys_applied FROM delta_join.status WHERE target = 'public.wide_small'");
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 5000');
exact('a spilled batch');
DeltaJoinTest::target_ok($node, 'wide_small', $wide, 'a spilled batch: wide_small');
like(slurp_file($node->logfile, $log_offset), qr/were spilled to disk, applied in chunks of 300/,
	'the batch spilled');
is( $node->safe_psql('postgres',
		"SELECT keys_applied FROM delta_join.status WHERE target = 'public.wide_small'")
	  - $before,
	$node->safe_psql('postgres', 'SELECT count(*) FROM orders WHERE order_id <= 5000'),
	'each chunk applied once: the counters add up to the batch');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('wide_small')");
$node->append_conf('postgresql.conf', "delta_join.max_batch_size = 10000\n");
$node->restart;

# --- 2. shares that meet on target rows ---

my $both_sides = DeltaJoinWorkload::write_scripts(
	both_sides => [
		1, q{
\set o random(1, 2000)
\set i random(1, 50)
BEGIN;
UPDATE o2 SET amount = amount + 1, item_id = 1 + (:o * 7 + :i) % 50 WHERE id BETWEEN :o AND :o + 40;
UPDATE i2 SET name = name || 'x' WHERE id = :i;
UPDATE orders SET amount = amount + 1 WHERE merchant_id = 1 + :i % 50;
UPDATE items SET item_name = item_name || 'y' WHERE merchant_id = 1 + :i % 50 AND item_id = 1 + :o % 20;
COMMIT;
}
	]);
$log_offset = -s $node->logfile;
DeltaJoinWorkload::pgbench_ok($node, $both_sides, 'writes on both sides of the joins',
	clients => 4, transactions => 150, seed => 24);
exact('both sides changed in the same batches');
my $log = slurp_file($node->logfile, $log_offset);
my $redone = () = $log =~ /a share failed, the worker applies the view alone/g;
note("views applied again alone after a failed share: $redone");
unlike($log, qr/delta view "[^"]*" is in error/, 'no view went to error');

# --- 3. a helper killed during writes ---

my $stream = DeltaJoinWorkload::write_scripts(
	stream => [
		1, q{
\set o random(1, 5000)
UPDATE orders SET amount = amount + 1 WHERE order_id BETWEEN :o AND :o + 200;
}
	]);
my $pgb = DeltaJoinWorkload::pgbench_start($node, $stream, clients => 2, seconds => 6);
for my $round (1 .. 4)
{
	usleep(1_000_000);
	$node->safe_psql('postgres',
		q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		  WHERE backend_type = 'delta_join helper'});
}
my $res = DeltaJoinWorkload::pgbench_finish($pgb);
ok($res->{rc} == 0 && $res->{failed} == 0,
	"the write stream ran while helpers were killed ($res->{processed} transactions)")
  or diag($res->{stderr});
exact('helpers killed during writes');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 3000');
exact('the next large batch');

# helpers that ended unasked are started again by a large batch, after a
# pause of 10 s (one that cannot start must not be retried every batch)
my $restarted = 0;
for my $try (1 .. 40)
{
	$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 1000');
	DeltaJoinWorkload::wait_views($node, 'wide');
	last if ($restarted = (helpers() eq '2'));
	usleep(500_000);
}
ok($restarted, 'the killed helpers were started again');

# --- 4. a share that fails for good ---

$node->safe_psql('postgres',
	'ALTER TABLE wide ADD CONSTRAINT small_amounts CHECK (amount < 1000)');
# one key of a large batch breaks the constraint: its share fails, and so
# does the worker's apply of the whole view
$node->safe_psql('postgres',
	q{UPDATE orders SET amount = CASE WHEN order_id = 4321 THEN 5000 ELSE amount + 1 END
	  WHERE order_id <= 5000});
ok( $node->poll_query_until(
		'postgres',
		"SELECT state = 'error' FROM delta_join.status WHERE target = 'public.wide'"),
	'a share that cannot be applied puts the view in error');
like(
	$node->safe_psql('postgres',
		"SELECT last_error FROM delta_join.status WHERE target = 'public.wide'"),
	qr/small_amounts/,
	'with the constraint the target refused');
ok( DeltaJoinWorkload::wait_views($node, 'summary')
	  && DeltaJoinWorkload::wait_views($node, 'wide2'),
	'the other views go on');
DeltaJoinTest::target_ok($node, 'summary', $summary, 'summary, beside the view in error');
$node->safe_psql('postgres', q{
	ALTER TABLE wide DROP CONSTRAINT small_amounts;
	SELECT delta_join.refresh('wide')});
exact('after refresh');

# --- 5. helpers stop with the setting and with the worker ---

$node->append_conf('postgresql.conf', "delta_join.apply_workers = 1\n");
$node->reload;
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'delta_join helper'"),
	'apply_workers = 1: the helpers stop');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 3000');
exact('the worker alone');
is(helpers(), '0', 'and none is started');

$node->append_conf('postgresql.conf', "delta_join.apply_workers = 2\n");
$node->reload;
# (time for the worker to read the setting before the batch that uses it)
$node->safe_psql('postgres', 'SELECT pg_sleep(0.5)');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 3000');
exact('apply_workers = 2');
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'delta_join helper'"),
	'apply_workers = 2: one helper');
my $helper_pids = $node->safe_psql('postgres',
	q{SELECT string_agg(pid::text, ',') FROM pg_stat_activity WHERE backend_type = 'delta_join helper'});
$node->safe_psql('postgres',
	q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE backend_type = 'delta_join worker'});
ok($node->poll_query_until('postgres',
		"SELECT count(*) = 0 FROM pg_stat_activity WHERE pid IN ($helper_pids)"),
	'the helpers of a stopped worker stop');
$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id <= 3000');
exact('after the worker was stopped');

# --- 6. an after-row trigger on a target ---

# the trigger machinery opens the target again unless it finds the
# worker's own: each apply then leaked a relcache reference (a WARNING)
$node->safe_psql(
	'postgres', q{
	CREATE TABLE audit (id bigint);
	CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql
	  AS $$ BEGIN INSERT INTO public.audit VALUES (NEW.id); RETURN NULL; END $$;
	CREATE TRIGGER audit_wide2 AFTER INSERT OR UPDATE ON wide2
	  FOR EACH ROW EXECUTE FUNCTION audit_row();});
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE o2 SET amount = amount + 1 WHERE id <= 500');
exact('a target with an after-row trigger');
DeltaJoinWorkload::status_ok($node, 'public.wide2', 'the view with a trigger');
is($node->safe_psql('postgres', 'SELECT count(DISTINCT id) FROM audit'),
	'500', 'the trigger fired for every row written');
unlike(slurp_file($node->logfile, $log_offset), qr/reference leak/,
	'and no reference leaked');

# --- 7. a helper that does not finish is let go ---

# a view of its own (its round waits 10 s plus its lookup_timeout at most),
# and a helper stopped by SIGSTOP: the worker gives up on it, applies its
# share, and the view is fresh
$node->safe_psql(
	'postgres', q{
	CREATE TABLE o3 (id bigint PRIMARY KEY, item_id bigint, amount int);
	CREATE TABLE i3 (id bigint PRIMARY KEY, name text);
	CREATE INDEX ON o3 (item_id);
	INSERT INTO i3 SELECT g, 'i' || g FROM generate_series(1, 50) g;
	INSERT INTO o3 SELECT g, 1 + g % 50, g FROM generate_series(1, 2000) g;
	SELECT delta_join.create_view('wide3',
	  'SELECT o.id, o.item_id, i.name, o.amount FROM o3 o JOIN i3 i ON i.id = o.item_id',
	  options => '{"lookup_timeout": "1s"}');});
my $wide3 = 'SELECT o.id, o.item_id, i.name, o.amount FROM o3 o JOIN i3 i ON i.id = o.item_id';
for my $try (1 .. 40)
{
	$node->safe_psql('postgres', 'UPDATE o3 SET amount = amount + 1');
	DeltaJoinWorkload::wait_views($node, 'wide3');
	last if helpers() eq '1';
	usleep(500_000);
}
my $stuck = $node->safe_psql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'delta_join helper'});
ok(DeltaJoinWorkload::stop_worker_idle($node, $stuck), 'a helper is stopped while idle');
$log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'UPDATE o3 SET amount = amount + 1');
ok(DeltaJoinWorkload::wait_views($node, 'wide3', '60s'),
	'a helper stopped in a round: wait() returns true all the same');
kill 'CONT', $stuck;
DeltaJoinTest::target_ok($node, 'wide3', $wide3, 'wide3, its stuck share applied by the worker');
like(slurp_file($node->logfile, $log_offset), qr/did not finish its share in 11000 ms/,
	'the worker let the helper go');

$node->stop;
done_testing();
