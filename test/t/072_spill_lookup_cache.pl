# The lookup caches of a delta join (cache_enabled) and spilled keys.
#
# A view's lookup caches are emptied for the sources that a piece of its
# batch names, and the first piece of a batch names every source that
# changed in it.  A transaction with more keys than
# delta_join.max_batch_size spills them, and the spilled chunks are applied
# first: each chunk must name every source of the batch too
# (capture_next_chunk), not only those of its own keys.  Otherwise an order
# inserted at the start of such a transaction that then deleted the
# order's item is walked, in the first chunk, to the item as the cache held
# it from an earlier batch: a joined row that no committed state had (the
# item was gone before the order existed), which upsert mode keeps for
# good, an item's delete being no reason to remove rows there -- and which
# DeltaJoinTest::target_ok in mode upsert takes for a residual row, so the
# test looks for it by name.  (Fails 3 of 12 when chunk pieces empty only
# the caches of the sources they hold keys of.)

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('spill_cache', conf => { 'delta_join.max_batch_size' => 10 });
$node->safe_psql(
	'postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, name text);
	CREATE TABLE orders (id int PRIMARY KEY, item_id int);
	CREATE INDEX ON orders (item_id);
	INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 50) g;
	INSERT INTO orders VALUES (1, 1);});

my $query = 'SELECT o.id, o.item_id, i.name FROM orders o JOIN items i ON o.item_id = i.id';
$node->safe_psql('postgres',
	"SELECT delta_join.create_view('joined', \$q\$ $query \$q\$, options => '{\"cache_enabled\": true}')");

foreach my $round (1 .. 3)
{
	my $item = $round;
	my $first = 1000 * $round;

	# an order of the item, in a batch of its own: the item is cached
	$node->safe_psql('postgres', "INSERT INTO orders VALUES ($first, $item)");
	is($node->safe_psql('postgres', q{SELECT delta_join.wait('joined', '60s')}),
		't', "round $round: the item's first order is applied");

	# one transaction: a new order of the item, 25 orders of other items
	# (the first 20 keys spill), then the item deleted (a key in memory)
	$node->safe_psql(
		'postgres', qq{
		BEGIN;
		INSERT INTO orders VALUES ($first + 1, $item);
		INSERT INTO orders SELECT $first + 1 + g, 10 + g FROM generate_series(1, 25) g;
		DELETE FROM items WHERE id = $item;
		COMMIT;});
	is($node->safe_psql('postgres', q{SELECT delta_join.wait('joined', '60s')}),
		't', "round $round: the transaction is applied");
	is($node->safe_psql('postgres', "SELECT count(*) FROM joined WHERE id = $first + 1"),
		'0', "round $round: the order made after its item was deleted is not joined with it");
	DeltaJoinTest::target_ok($node, 'joined', $query, "round $round", mode => 'upsert');
}

done_testing();
