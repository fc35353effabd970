# A view that waited with more than delta_join.max_waiting_keys keys is
# recomputed whole (066): the keys it dropped no longer say which of its
# sources changed while it waited.  A delta join with cache_enabled empties
# the lookup cache of a source before a batch in which that source changed;
# the whole recompute must empty them all, or the next batch's lookups find
# the rows as they were before the wait: an order inserted after an item was
# renamed behind the lock joined the item's old name, a row that no
# committed state had, in retract mode too, for good.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('whole_cache',
	conf => { 'delta_join.max_waiting_keys' => 5 });
$node->safe_psql(
	'postgres', q{
	CREATE TABLE items (id int PRIMARY KEY, name text);
	CREATE TABLE orders (id int PRIMARY KEY, item_id int);
	CREATE INDEX ON orders (item_id);
	CREATE TABLE returns (id int PRIMARY KEY, item_id int);
	CREATE INDEX ON returns (item_id);
	INSERT INTO items SELECT g, 'old ' || g FROM generate_series(1, 20) g;
	INSERT INTO orders VALUES (1, 1);
	INSERT INTO returns VALUES (1, 2);});

my %query = (
	joined => 'SELECT o.id, o.item_id, i.name FROM orders o JOIN items i ON o.item_id = i.id',
	either => q{SELECT 'order' AS kind, o.id, o.item_id, i.name FROM orders o JOIN items i ON o.item_id = i.id }
	  . q{UNION ALL SELECT 'return' AS kind, r.id, r.item_id, i.name FROM returns r JOIN items i ON r.item_id = i.id});
# (the join in retract mode, the branches of the UNION ALL in upsert mode,
# each with caches of its own)
my %mode = (joined => 'exact', either => 'upsert');
foreach my $view (sort keys %query)
{
	my $retract = $mode{$view} eq 'exact' ? 'true' : 'false';
	$node->safe_psql('postgres',
		"SELECT delta_join.create_view('$view', \$q\$ $query{$view} \$q\$, "
		  . qq{options => '{"retract": $retract, "cache_enabled": true}')});
}

# the items looked up are cached
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (2, 1); INSERT INTO returns VALUES (2, 2);');
is( $node->safe_psql('postgres',
		q{SELECT bool_and(delta_join.wait(target, '60s')) FROM delta_join.views}),
	't', 'the orders are applied');

# every item renamed while the targets are locked: more keys than kept
my $offset = -s $node->logfile;
my $locker = $node->background_psql('postgres');
$locker->query_safe('BEGIN');
$locker->query_safe('LOCK TABLE either, joined IN ACCESS EXCLUSIVE MODE');
$node->safe_psql('postgres', q{UPDATE items SET name = 'new ' || id});
ok( $node->poll_query_until(
		'postgres', q{
		SELECT count(*) = 2 FROM delta_join.status
		WHERE reason ~ '^to be recomputed whole \\(over max_waiting_keys\\): retrying \\('}),
	'the two views wait behind the lock on their target');
$locker->query_safe('COMMIT');
$locker->quit;
is( $node->safe_psql('postgres',
		q{SELECT bool_and(delta_join.wait(target, '60s')) FROM delta_join.views}),
	't', 'the views are applied after the lock');
is( join(',', sort(slurp_file($node->logfile, $offset) =~
		  /delta_join view "(\w+)" waits with more than 5 dirty keys/g)),
	'either,joined', 'each view dropped its keys, to be recomputed whole');
DeltaJoinTest::target_ok($node, $_, $query{$_}, "whole recompute of $_", mode => $mode{$_})
  foreach sort keys %query;

# new rows joined with the renamed items: looked up anew, not in the cache
$node->safe_psql('postgres', 'INSERT INTO orders VALUES (3, 1); INSERT INTO returns VALUES (3, 2);');
is( $node->safe_psql('postgres',
		q{SELECT bool_and(delta_join.wait(target, '60s')) FROM delta_join.views}),
	't', 'the new rows are applied');
DeltaJoinTest::target_ok($node, $_, $query{$_}, "a batch after the whole recompute of $_",
	mode => $mode{$_})
  foreach sort keys %query;
is( $node->safe_psql('postgres',
		q{SELECT count(*) FROM (TABLE joined UNION ALL SELECT id, item_id, name FROM either) t
		  WHERE name LIKE 'old %'}),
	'0', 'no row joins an item\'s name from before the lock');

done_testing();
