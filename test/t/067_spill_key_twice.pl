# A key spilled twice in one transaction, with the row of each of its
# changes: both records can come back in one chunk of spilled keys.  In
# retract mode, a join view whose driving source's key is not the
# target's replaces the key's slice -- the target rows holding the key --
# by what walking from its row gives.  Walking from both rows in one
# replacement wrote what the earlier, stale row gives, and the later row,
# giving nothing, could not delete it (it was not in the slice when the
# replacement began): an item shown, then hidden again, or moved to a
# category that exists, then back to one that does not, left its orders
# in the target for good, the view active and wait() true.
#
# A spilled key's row is now used only when the key did not change again
# after it spilled; otherwise it is fetched.  In upsert mode that keeps out
# rows no committed state had: an item shown only in passing, an order's
# amount it had only before it was deleted in the same transaction.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

# spills at 2 x 20 keys, read back in chunks of 20
my $node = DeltaJoinTest::new_node('spill_twice',
	conf => { log_min_messages => 'debug1', 'delta_join.max_batch_size' => 20 });

my %query = (
	shown => 'SELECT o.mid, o.iid, o.oid, o.amount, i.name FROM orders o '
	  . q{JOIN items i ON o.mid = i.mid AND o.iid = i.iid WHERE i.name <> 'hidden'},
	by_cat => 'SELECT o.mid, o.iid, o.oid, i.cat, c.cname FROM orders o '
	  . 'JOIN items i ON o.mid = i.mid AND o.iid = i.iid JOIN cats c ON c.id = i.cat');

$node->safe_psql(
	'postgres', q{
	CREATE TABLE items (mid int, iid int, name text, cat int, PRIMARY KEY (mid, iid));
	CREATE INDEX ON items (cat);
	CREATE TABLE orders (mid int, iid int, oid int, amount int, PRIMARY KEY (mid, iid, oid));
	CREATE TABLE cats (id int PRIMARY KEY, cname text);
	CREATE TABLE filler (id int PRIMARY KEY, v int);
	INSERT INTO cats VALUES (1, 'one');
	INSERT INTO items VALUES (1, 1, 'hidden', 99);
	INSERT INTO orders SELECT 1, 1, g, g FROM generate_series(1, 5) g;
	INSERT INTO filler SELECT g, 0 FROM generate_series(1, 200) g;
	SELECT delta_join.create_view('filled', 'SELECT id, v FROM filler');});
foreach my $view (sort keys %query)
{
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$, options => '{\"retract\": true}')");
}
# the same join in upsert mode, with and without the filter
my $plain_query = 'SELECT o.mid, o.iid, o.oid, o.amount, i.name FROM orders o '
  . 'JOIN items i ON o.mid = i.mid AND o.iid = i.iid';
$node->safe_psql(
	'postgres', qq{
	SELECT delta_join.create_view('shown_upsert', \$q\$ $query{shown} \$q\$,
	  options => '{"ignore_non_unique_key_filter": true}');
	SELECT delta_join.create_view('plain', \$q\$ $plain_query \$q\$);});

# Each round, in one transaction: the item shown and in category 1, then
# enough keys of another view to spill them all; the item hidden again and
# back in category 99 (which does not exist), then a spill again.  The
# item's two records are the view's only spilled keys: one chunk.
foreach my $round (1 .. 3)
{
	my $log_offset = -s $node->logfile;
	my $oid = 100 + $round;
	$node->safe_psql('postgres', "INSERT INTO orders VALUES (1, 1, $oid, $oid)");
	is($node->safe_psql('postgres', 'SELECT delta_join.wait()'), 't', "round $round: idle before");
	$node->safe_psql(
		'postgres', qq{
		BEGIN;
		UPDATE items SET name = 'shown', cat = 1;
		UPDATE orders SET amount = 777 WHERE oid = $oid;
		UPDATE filler SET v = v + 1 WHERE id <= 45;
		UPDATE items SET name = 'hidden', cat = 99;
		DELETE FROM orders WHERE oid = $oid;
		UPDATE filler SET v = v + 1 WHERE id > 100 AND id <= 145;
		COMMIT;});
	is($node->safe_psql('postgres', 'SELECT delta_join.wait()'), 't', "round $round: applied");
	like(
		slurp_file($node->logfile, $log_offset),
		qr/dirty keys: \d+ were spilled to disk/,
		"round $round: the transaction's keys spilled");
	foreach my $view (sort keys %query)
	{
		DeltaJoinTest::target_ok($node, $view, $query{$view},
			"round $round: an item changed and changed back between spills");
	}
	is($node->safe_psql('postgres', 'SELECT count(*) FROM shown_upsert'),
		'0', "round $round: upsert mode shows no row of the item shown only in passing");
	is($node->safe_psql('postgres', "SELECT amount FROM plain WHERE oid = $oid"),
		$oid, "round $round: the deleted order's residual row keeps its last committed amount");
}

is($node->safe_psql('postgres', "SELECT count(*) FROM delta_join.status WHERE state <> 'active'"),
	'0', 'every view is active');

done_testing();
