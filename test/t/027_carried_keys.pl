# Consistent snapshots (issue 18, item 4): a batch is applied under one
# snapshot, taken before the WAL it covers is decoded.  A transaction whose
# commit record is in that WAL but which the snapshot does not see -- it
# has not left the proc array yet -- has its keys carried to a later
# batch, and neither the slot nor the views' positions move past it.
#
# A transaction waiting for a synchronous standby that does not exist stays
# in that state for as long as we like: its commit record is written and
# flushed, but no snapshot sees it.  Every other session commits locally.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('carried',
	conf => { synchronous_standby_names => 'nobody', synchronous_commit => 'local' });
DeltaJoinTest::worked_example($node);
$node->safe_psql(
	'postgres', qq{
	SELECT delta_join.create_view('wide', '$DeltaJoinTest::wide_query');
	SELECT delta_join.create_view('summary', '$DeltaJoinTest::summary_query');});

# A transaction that commits and then waits for the standby: T.
sub start_stuck
{
	my ($sql) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-d', $node->connstr('postgres'), '-c',
			"SET synchronous_commit = on; $sql" ],
		'>', \$out, '2>', \$err);
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
	  or die 'the transaction did not start waiting for the standby';
	return $h;
}

sub release_stuck
{
	my ($h) = @_;
	$node->safe_psql('postgres',
		"ALTER SYSTEM SET synchronous_standby_names = ''; SELECT pg_reload_conf()");
	$h->finish;
	$node->safe_psql('postgres',
		"ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()");
}

# T adds an order of merchant 1 and renames an item of merchant 2
my $h = start_stuck(q{BEGIN;
	INSERT INTO orders VALUES (1, 1, 1001, 500);
	UPDATE items SET item_name = 'renamed by T' WHERE merchant_id = 2 AND item_id = 2;
	COMMIT;});

# after T's commit record: changes of the same group, of other rows
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 2, 1002, 7)');
$node->poll_query_until('postgres',
	'SELECT count(*) = 1 FROM wide WHERE order_id = 1002')
  or die 'the change after T was not applied';
pass('a change committed after T is applied while T waits: the worker is not held up');

is($node->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE order_id = 1001'),
	'0', 'T\'s order is not in the join view: no snapshot sees it yet');
is( $node->safe_psql('postgres',
		'SELECT order_count, total_amount FROM summary WHERE merchant_id = 1'),
	'101|5057.00',
	'merchant 1\'s group counts the order after T, not T\'s: what a snapshot saw');
is( $node->safe_psql('postgres',
		"SELECT count(*) FROM wide WHERE item_name = 'renamed by T'"),
	'0', 'T\'s renamed item is not in the join view either');
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '1s')"),
	'f', 'wait() does not return true while a change committed before it is not applied');

release_stuck($h);
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '30s')"),
	't', 'once T is seen, its carried keys are applied');
DeltaJoinTest::target_ok($node, 'wide', $DeltaJoinTest::wide_query, 'once T is seen, the join view');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query,
	'once T is seen, the aggregate view');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE order_id = 1001'),
	'1', 'T\'s order is there');

# A full recompute over a table without a primary key (pg_ivm's tables): a
# DELETE logs no old tuple, yet dirties the view; T's must be carried too.
$node->safe_psql(
	'postgres', q{
	CREATE TABLE nokey (i int, j int);
	INSERT INTO nokey VALUES (1, 10), (2, 20), (3, 30);
	SELECT delta_join.create_view('nokey_copy', 'SELECT i, j FROM nokey', strategy => 'auto');});
$h = start_stuck('DELETE FROM nokey WHERE i = 2');
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (1, 3, 1003, 8)');
$node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM wide WHERE order_id = 1003')
  or die 'the change after T was not applied';
release_stuck($h);
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '30s')"),
	't', 'once T is seen, its carried change of a table without a key is applied');
DeltaJoinTest::target_ok($node, 'nokey_copy', 'SELECT i, j FROM nokey',
	'T\'s delete from a table without a key, carried: the full-recompute view');
$node->safe_psql('postgres', "SELECT delta_join.drop_view('nokey_copy')");

# An aggregate over a join kept by adding each change (apply_additive.c):
# T's carried keys keep their weights, so the batch that sees T adds them
# to their groups, as it adds the changes it decodes itself.  (A large
# transaction is often carried: the worker decodes its WAL as it is
# written, and a batch decoding its commit record may have taken its
# snapshot just before T left the proc array.  Recomputing every group
# such a batch touched cost seconds where adding costs milliseconds.)
my $by_item = 'SELECT i.item_name, count(*) AS n, sum(o.amount) AS total '
  . 'FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id '
  . 'GROUP BY i.item_name';
$node->safe_psql(
	'postgres', qq{
	ALTER TABLE orders REPLICA IDENTITY FULL;
	ALTER TABLE items REPLICA IDENTITY FULL;
	ALTER SYSTEM SET log_min_messages = debug1;
	SELECT pg_reload_conf();
	SELECT delta_join.create_view('by_item', '$by_item', strategy => 'auto');});
like(DeltaJoinTest::explain_text($node, $by_item, 'auto'),
	qr/added to their groups' counts and sums \(additive\)/,
	'the aggregate over the join is kept by adding');
my $carry_start = -s $node->logfile;
$h = start_stuck(q{BEGIN;
	INSERT INTO orders VALUES (1, 1, 3001, 40), (2, 2, 3002, 50);
	UPDATE orders SET amount = amount + 1 WHERE merchant_id = 3 AND order_id < 50;
	UPDATE orders SET item_id = 2 WHERE merchant_id = 2 AND item_id = 1;
	DELETE FROM orders WHERE merchant_id = 1 AND order_id < 20;
	COMMIT;});
# after T's commit record, a change of one of T's groups (of a row T did
# not lock): applied while T waits (the view then equals its query, which
# does not see T either)
$node->safe_psql('postgres',
	'UPDATE orders SET amount = amount + 2 WHERE merchant_id = 3 AND order_id = 77');
$node->poll_query_until('postgres',
	"SELECT (SELECT count(*) FROM (SELECT * FROM by_item EXCEPT ALL $by_item) a)
	      + (SELECT count(*) FROM ($by_item EXCEPT ALL SELECT * FROM by_item) b) = 0")
  or die 'the change after T was not applied';
# (test/t/023_spill.pl relies on this message)
like(slurp_file($node->logfile, $carry_start),
	qr{keys of transactions the batch's snapshot does not see, the first committed at [0-9A-F]+/[0-9A-F]+, are carried to the next batch},
	'the worker says when it carries keys to the next batch');
my $log_start = -s $node->logfile;
release_stuck($h);
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '30s')"),
	't', 'once T is seen, its carried keys are applied to the additive view');
DeltaJoinTest::target_ok($node, 'by_item', $by_item, 'T\'s carried changes, added');
like(slurp_file($node->logfile, $log_start),
	qr/additive apply: \d+ changed rows of public\.orders/,
	'the batch that sees T adds its carried keys, weighed, instead of recomputing their groups');
$node->safe_psql(
	'postgres', q{
	SELECT delta_join.drop_view('by_item');
	ALTER SYSTEM RESET log_min_messages;
	SELECT pg_reload_conf();});

# A crash while T waits: the slot was not confirmed past T, so its changes
# are decoded again after the restart.
$h = start_stuck(q{BEGIN;
	INSERT INTO orders VALUES (3, 3, 2001, 1);
	DELETE FROM orders WHERE merchant_id = 2 AND order_id = 5;
	COMMIT;});
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (3, 4, 2002, 2)');
$node->poll_query_until('postgres',
	'SELECT count(*) = 1 FROM wide WHERE order_id = 2002')
  or die 'the change after T was not applied';
$node->stop('immediate');
$h->finish;
$node->append_conf('postgresql.conf', "synchronous_standby_names = ''");
$node->start;
is($node->safe_psql('postgres', "SELECT delta_join.wait(timeout => '30s')"),
	't', 'after a crash while T waited, the views converge');
is($node->safe_psql('postgres', 'SELECT count(*) FROM wide WHERE order_id = 2001'),
	'1', 'T\'s insert was decoded again and applied');
DeltaJoinTest::target_ok($node, 'summary', $DeltaJoinTest::summary_query,
	'T\'s delete too: after the crash, the aggregate view');

$node->stop;
done_testing();
