# DROP EXTENSION delta_join CASCADE, then CREATE EXTENSION delta_join, with
# the apply worker running and a view active (DESIGN.md §6.6: never
# silently wrong).
#
# The old extension's catalog goes with it (the old targets stay, as plain
# tables); the new extension has a new catalog, with new OIDs.  A view
# created after that must be maintained as any other: after writes to its
# sources, delta_join.wait() returns true and the target equals its query.
# (This once lost changes: the worker kept decoding with what it knew of
# the dropped extension.)  The cycle is run twice, the second time while
# writes go on, and with the old view's target taken over by the new view.
# Five more drops, each while a batch decodes the writes before it.  A
# DROP EXTENSION held open in a transaction, then two at once.  Then
# the comparison is shown able to fail.  Last, a view made with the
# new extension on a slot that must decode the old extension's changes.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes;
use DeltaJoinTest;
use DeltaJoinWorkload;

my $node = DeltaJoinTest::new_node('main');
DeltaJoinTest::worked_example($node);
my $wide = $DeltaJoinTest::wide_query;
my $summary = $DeltaJoinTest::summary_query;

# writes to both sources of the join: new orders, changed amounts, renamed
# items, orders of items that come later
my $scripts = DeltaJoinWorkload::write_scripts(
	orders => [
		3, q{\set m random(1, 3)
\set i random(1, 12)
\set o random(1, 150)
\set a random(1, 100000)
INSERT INTO orders VALUES (:m, :i, :o, :a / 100.0)
  ON CONFLICT (merchant_id, item_id, order_id) DO UPDATE SET amount = excluded.amount;
}
	],
	items => [
		1, q{\set m random(1, 3)
\set i random(1, 12)
\set a random(1, 100000)
INSERT INTO items VALUES (:m, :i, 'item ' || :i || ' v' || :a)
  ON CONFLICT (merchant_id, item_id) DO UPDATE SET item_name = excluded.item_name;
}
	]);

# ---- a view, the worker running ----

$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', \$q\$ $wide \$q\$)");
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'before the drop',
	seed => 18, clients => 2, transactions => 100);
DeltaJoinWorkload::check_views($node, { wide => $wide }, 'before the drop');
my $old_worker = DeltaJoinWorkload::worker_pid($node);
ok(defined $old_worker, 'a worker runs');

# ---- drop and create the extension, then a new view ----

$node->safe_psql('postgres',
	'DROP EXTENSION delta_join CASCADE; CREATE EXTENSION delta_join');
is($node->safe_psql('postgres', 'SELECT count(*) FROM delta_join.views'),
	'0', 'the new extension has no view');

$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide2', \$q\$ $wide \$q\$)");
$node->safe_psql(
	'postgres', q{
	INSERT INTO orders VALUES (1, 1, 1001, 10.5), (2, 13, 1002, 20);
	UPDATE orders SET amount = amount + 1 WHERE order_id % 7 = 0;
	UPDATE items SET item_name = 'renamed ' || item_id WHERE item_id % 3 = 0;
	INSERT INTO items VALUES (2, 13, 'late item');});
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'after the new extension',
	seed => 19, clients => 2, transactions => 100);
DeltaJoinWorkload::check_views($node, { wide2 => $wide },
	'a view of the new extension');
DeltaJoinWorkload::status_ok($node, 'wide2', 'a view of the new extension');
ok(defined DeltaJoinWorkload::worker_pid($node), 'a worker runs for the new extension');

# ---- again, while writes go on; the old target taken over ----

my $stream = DeltaJoinWorkload::pgbench_start($node, $scripts,
	seed => 20, clients => 2, seconds => 4);
sleep 1;
$node->safe_psql('postgres',
	'DROP EXTENSION delta_join CASCADE; CREATE EXTENSION delta_join');
# wide was left by the first drop without its guard: a plain table with the
# right columns and key, which create_view takes as the target once emptied
$node->safe_psql('postgres',
	"TRUNCATE wide; SELECT delta_join.create_view('wide', \$q\$ $wide \$q\$)");
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('summary', \$q\$ $summary \$q\$)");
my $res = DeltaJoinWorkload::pgbench_finish($stream);
ok($res->{rc} == 0 && $res->{failed} == 0 && $res->{processed} > 0,
	"the writes went on through the drop ($res->{processed} transactions)")
  or diag("pgbench exit status $res->{rc}\n$res->{stdout}\n$res->{stderr}");
DeltaJoinWorkload::check_views($node, { wide => $wide, summary => $summary },
	'views of the extension created again under writes');
DeltaJoinWorkload::pgbench_ok($node, $scripts, 'more writes',
	seed => 21, clients => 2, transactions => 100);
DeltaJoinWorkload::check_views($node, { wide => $wide, summary => $summary },
	'after more writes');
DeltaJoinWorkload::status_ok($node, $_, 'after more writes') foreach qw(summary wide);

# ---- dropped while a batch decodes the changes before the drop ----

# A drop that commits while a batch decodes changes made before it: the
# batch opens the old source_catalog to judge them, and building its
# relcache entry under the historic snapshot reads the present pg_class
# (a table decoding may read), where it is gone.  The worker once failed
# there, in five runs of six ("could not find pg_class entry", exit code 1,
# restarted; nothing in status).  It now leaves those changes alone, as
# those of a catalog dropped before the batch; and a batch whose next read
# of view_catalog finds it gone ends the worker without an error.  Five
# cycles, each under writes, the views made again at once.
# DJ_RECREATE_CYCLES=60 makes more of them (a few seconds each): a
# worker started while create_view made the new extension's first view
# once decoded the old extension's WAL from the slot's restart point, and
# failed in two cycles of forty (worker_start_decoding now waits for the
# view); a DROP committed while a batch decoded failed it likewise
# (worker_lock_extension).
my $log_offset = -s $node->logfile;
for my $cycle (1 .. ($ENV{DJ_RECREATE_CYCLES} // 5))
{
	my $writes = DeltaJoinWorkload::pgbench_start($node, $scripts,
		seed => 30 + $cycle, clients => 2, seconds => 2);
	select(undef, undef, undef, 0.5);
	$node->safe_psql('postgres',
		'DROP EXTENSION delta_join CASCADE; DROP TABLE wide, summary; CREATE EXTENSION delta_join');
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('wide', \$q\$ $wide \$q\$);
		 SELECT delta_join.create_view('summary', \$q\$ $summary \$q\$)");
	DeltaJoinWorkload::pgbench_finish($writes);
}
DeltaJoinWorkload::check_views($node, { wide => $wide, summary => $summary },
	'views made again at once, five times, under writes');
ok(!$node->log_contains(qr/could not find pg_class entry/, $log_offset),
	'no batch failed on the catalog dropped under it');
ok(!$node->log_contains(qr/delta_join worker.*exited with exit code 1/, $log_offset),
	'the worker never exited on an error');

# ---- a DROP EXTENSION left open, and two at once ----

# The worker never waits for the extension or its catalog of views: it
# would wait out its lock_timeout, fail and be restarted, again and again,
# for as long as a DROP EXTENSION (or a DDL of an ALTER EXTENSION ...
# UPDATE, here a LOCK TABLE of the catalog) sat in an open transaction.
# Its batches wait instead, a worker started meanwhile does not start
# decoding, and the views go on once the transaction ends.
$log_offset = -s $node->logfile;
foreach my $hold ('DROP EXTENSION delta_join CASCADE',
	'LOCK TABLE delta_join.view_catalog IN ACCESS EXCLUSIVE MODE')
{
	my $open = $node->background_psql('postgres');
	$open->query_safe('SET client_min_messages = warning');
	$open->query_safe('BEGIN');
	$open->query_safe($hold);
	$node->safe_psql('postgres', 'SELECT pg_terminate_backend(' . DeltaJoinWorkload::worker_pid($node) . ')')
	  if $hold =~ /^LOCK/;

	# wait() keeps to its timeout, whoever holds the catalog (it once
	# waited for the holder: 3.6 to 5.5 s for a wait of 2 s)
	# (statement_timeout: without that, the test would wait for itself)
	my $started = Time::HiRes::time();
	my ($out, $err) = ('', '');
	$node->psql('postgres', "SET statement_timeout = '10s'; SELECT delta_join.wait(NULL, '1s')",
		stdout => \$out, stderr => \$err);
	is($out, 'f', "wait() times out while $hold is held open") or diag($err);
	cmp_ok(Time::HiRes::time() - $started, '<', 3, '... after its timeout, not after the holder');
	for my $second (1 .. 4)
	{
		$node->safe_psql('postgres', 'UPDATE orders SET amount = amount + 1 WHERE order_id % 5 = 0');
		sleep 1;
	}
	$open->query_safe('ROLLBACK');
	$open->quit;
	DeltaJoinWorkload::check_views($node, { wide => $wide, summary => $summary },
		"after $hold held open for 4 s");
}
my @exits = slurp_file($node->logfile, $log_offset) =~ /exited with exit code 1/g;
is(scalar(@exits), 1, 'meanwhile the worker terminated on purpose was the only process to fail');
ok(!$node->log_contains(qr/lock timeout/, $log_offset),
	'and none waited out its lock_timeout');

# Two DROP EXTENSION IF EXISTS at once: the second waits for the first,
# then skips.  (The event trigger once read view_catalog before DROP
# EXTENSION locked the extension: each drop held the catalog, one waited
# for the extension, the other to drop the catalog, a deadlock.)
my $first = $node->background_psql('postgres');
$first->query_safe('SET client_min_messages = warning');
$first->query_safe('BEGIN');
$first->query_safe('DROP EXTENSION IF EXISTS delta_join CASCADE');
my ($second_out, $second_err) = ('', '');
my $second = IPC::Run::start(
	[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
		'DROP EXTENSION IF EXISTS delta_join CASCADE' ],
	'>', \$second_out, '2>', \$second_err);
ok( $node->poll_query_until(
		'postgres', q{
		SELECT count(*) > 0 FROM pg_locks
		WHERE NOT granted AND locktype = 'object' AND classid = 'pg_extension'::regclass}),
	'the second DROP EXTENSION waits for the first');
$first->query_safe('COMMIT');
$first->quit;
$second->finish;
is($second->result(0), 0, 'then it ends without an error')
  or diag($second_err);
like($second_err, qr/extension "delta_join" does not exist, skipping/, 'and skips the extension');
$node->safe_psql(
	'postgres', qq{
	CREATE EXTENSION delta_join;
	DROP TABLE wide, summary;
	SELECT delta_join.create_view('wide', \$q\$ $wide \$q\$);
	SELECT delta_join.create_view('summary', \$q\$ $summary \$q\$);});

# ---- the comparison can fail ----

# (refresh() fills the target by itself, whatever the worker does)
$node->safe_psql(
	'postgres', q{
	SELECT delta_join.refresh('wide');
	SELECT delta_join.drop_view('wide', false);
	UPDATE wide SET item_name = 'tampered'
	WHERE (merchant_id, item_id, order_id) = (SELECT merchant_id, item_id, order_id
	                                          FROM wide ORDER BY 1, 2, 3 LIMIT 1);});
my $c = DeltaJoinTest::target_diff($node, 'wide', $wide);
is("$c->{missing}|$c->{extra}|@{ $c->{dependent} }", '1|1|',
	'self-check: a tampered target row is reported, and nothing else');

# ---- the new extension on a slot that must decode the old one's changes ----

# The slot is confirmed after a batch's commit is flushed, at the worker's
# next round, and saved to disk at checkpoints: after a crash, it decodes
# again from where the last checkpoint left it.  Here that is before a view
# of the old extension was made, so the worker of the new extension meets
# the old one's rows of its source_catalog, a user catalog table core
# cannot open once dropped ("could not find pg_class entry").  It once
# failed on them on every start, for good, while status showed the new
# view stalled: no view needs that WAL, and the worker now skips what
# committed before every view's start.  DROP EXTENSION ... CASCADE once also
# left the old view's query view in schema delta_join, which kept its
# sources from being dropped.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE scratch_a (id int PRIMARY KEY, b_id int);
	CREATE TABLE scratch_b (id int PRIMARY KEY, label text);
	CREATE INDEX ON scratch_a (b_id);
	CHECKPOINT;});
my $scratch = 'SELECT a.id, a.b_id, b.label FROM scratch_a a JOIN scratch_b b ON b.id = a.b_id';
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('scratch_old', \$q\$ $scratch \$q\$)");
$node->safe_psql('postgres',
	"INSERT INTO scratch_b VALUES (1, 'b 1'); INSERT INTO scratch_a VALUES (1, 1)");
ok(DeltaJoinWorkload::wait_views($node, 'scratch_old'), 'a view of the old extension is fresh');
# in one transaction: the worker cannot see the new extension without a
# view, which would make it drop the old slot
$node->safe_psql(
	'postgres', qq{
	BEGIN;
	DROP EXTENSION delta_join CASCADE;
	CREATE EXTENSION delta_join;
	SELECT delta_join.create_view('scratch_new', \$q\$ $scratch \$q\$);
	COMMIT;});
is( $node->safe_psql(
		'postgres', q{
		SELECT count(*) FROM pg_class
		WHERE relnamespace = 'delta_join'::regnamespace AND relname = 'public.scratch_old'}),
	'0',
	'DROP EXTENSION ... CASCADE dropped the query view');
$node->stop('immediate');
$node->start;
$node->safe_psql('postgres',
	"INSERT INTO scratch_b VALUES (2, 'b 2'); INSERT INTO scratch_a VALUES (2, 2); UPDATE scratch_b SET label = 'again'");
DeltaJoinWorkload::check_views($node, { scratch_new => $scratch },
	'a view of the new extension after a crash');
DeltaJoinWorkload::status_ok($node, 'scratch_new', 'a view of the new extension after a crash');
# the old view's query view no longer keeps its source
$node->safe_psql('postgres',
	"SELECT delta_join.drop_view('scratch_new'); DROP TABLE scratch_a");
ok(1, 'a source of a view of a dropped extension can be dropped');

$node->stop;
done_testing();
