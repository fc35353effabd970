# delta_join.wait() in a transaction that holds a lock the apply worker
# needs.
#
# The worker applies a view's changes by writing its target (ROW
# EXCLUSIVE) and reading its sources (ACCESS SHARE).  A transaction that
# holds its target in SHARE mode or stronger, or a source in ACCESS
# EXCLUSIVE mode, or rows of the target the worker must update, and then
# calls wait() waits for the worker, which waits for that transaction: a
# deadlock PostgreSQL cannot see, since the worker gives up on each lock
# after a second and tries again.  wait() ran to its timeout and returned
# false, or with a NULL timeout never returned.  It now fails with SQLSTATE
# 40P01: for a relation lock once the worker retries such a view, naming
# the lock; for rows, once it sees the worker wait for its transaction.
# With nothing to apply, it returns true as before.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('wait_own_lock');
DeltaJoinTest::worked_example($node);
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('wide', \$q\$ $DeltaJoinTest::wide_query \$q\$)");
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"), 't', 'the view is fresh');

my $session = $node->background_psql('postgres', on_error_stop => 0);
$session->query_safe('\\set VERBOSITY verbose');

# Each case: the lock taken, a change the view must apply committed by
# another session, then wait() in the locking transaction.
sub wait_under_lock
{
	my ($lock, $change) = @_;

	$session->query_safe('BEGIN;');
	$session->query_safe("$lock;");
	$node->safe_psql('postgres', $change) if $change;
	$session->query(q{SELECT delta_join.wait('wide', '30s');});
	my $stderr = $session->{stderr};
	my $out = $session->{stdout};

	# (BackgroundPsql leaves a failed query's stderr for the next to find)
	$session->{stderr} = '';
	$session->query_safe('ROLLBACK;');
	return ($out, $stderr);
}

my ($out, $err) = wait_under_lock('LOCK TABLE wide IN SHARE MODE');
is($err, '', 'nothing to apply: wait() under a lock on the target does not fail');

($out, $err) = wait_under_lock('LOCK TABLE wide IN SHARE MODE',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 1 AND order_id <= 5');
like(
	$err,
	qr/ERROR:  40P01: delta_join.wait\(\) would wait for its own transaction.*ShareLock on table "wide"/s,
	'a change to apply: wait() under a SHARE lock on the target fails instead of waiting for ever');
like($err, qr/HINT:  Call delta_join.wait\(\) before taking the lock/, 'and says what to do');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'once the lock is gone, the change is applied');

($out, $err) = wait_under_lock('LOCK TABLE orders IN ACCESS EXCLUSIVE MODE',
	q{UPDATE items SET item_name = item_name || ' (new)' WHERE merchant_id = 2 AND item_id = 3});
like(
	$err,
	qr/would wait for its own transaction.*AccessExclusiveLock on table "orders"/s,
	'wait() under an ACCESS EXCLUSIVE lock on a source the change is walked to fails too');

# Rows of the target locked: the worker waits for them only while it
# updates them (a second each try), which wait() looks for as it waits
($out, $err) = wait_under_lock(
	'SELECT count(*) FROM (SELECT * FROM wide WHERE merchant_id = 2 FOR UPDATE) locked',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 2 AND order_id <= 5');
like(
	$err,
	qr/would wait for its own transaction.*The apply worker waits for a lock this transaction holds/s,
	'wait() holding rows of the target that the worker must update fails too');
is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"),
	't', 'once the rows are free, the change is applied');

($out, $err) = wait_under_lock('LOCK TABLE wide IN ROW EXCLUSIVE MODE',
	'UPDATE orders SET amount = amount + 1 WHERE merchant_id = 3 AND order_id <= 5');
is($err, '', 'a lock that does not keep the worker out is no reason to fail');

$session->quit;

is($node->safe_psql('postgres', "SELECT delta_join.wait('wide', '60s')"), 't', 'every change is applied in the end');
ok(DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query), 'the target equals its query');

done_testing();
