# pg_dump and restore of a database with delta views.
#
# The catalog is extension configuration: pg_dump saves its rows, naming the
# target and source tables (regclass columns), so that a restore into
# another database points them at the restored tables.  The restored
# database has no slot yet: the first view function creates one and says
# that the views may have missed changes; refresh() brings a view back, and
# it is maintained again.

use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use DeltaJoinTest;

my $node = DeltaJoinTest::new_node('dump');
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', 'CREATE EXTENSION delta_join');
DeltaJoinTest::worked_example($node, dbname => 'src', rows => 0);
$node->safe_psql(
	'src', q{
	INSERT INTO items VALUES (1, 1, 'apple'), (1, 2, 'pear');
	INSERT INTO orders VALUES (1, 1, 10, 5), (1, 2, 11, 7);
	SELECT delta_join.create_view('wide', $$
		SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
		FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);
	SELECT delta_join.create_view('summary', $$
		SELECT merchant_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY merchant_id $$);
});

DeltaJoinTest::dump_restore($node, 'src', 'copy', 'into another database');

is( $node->safe_psql('copy',
		'SELECT string_agg(target || \':\' || array_to_string(sources, \',\'), \' \' ORDER BY target) FROM delta_join.views'),
	'public.summary:orders public.wide:orders,items',
	'the restored catalog names the restored tables');
is( $node->safe_psql('copy',
		"SELECT count(*) FROM delta_join.view_catalog v JOIN pg_class c ON c.oid = v.target"),
	'2', 'its targets are the restored target tables');

$node->safe_psql('copy', "SELECT delta_join.refresh('wide')");
$node->safe_psql('copy', "SELECT delta_join.refresh('summary')");
$node->safe_psql('copy', q{
	UPDATE items SET item_name = 'green apple' WHERE item_id = 1;
	INSERT INTO orders VALUES (1, 1, 12, 3);
});
is($node->safe_psql('copy', 'SELECT delta_join.wait(NULL, \'30s\')'),
	't', 'wait() in the restored database');
is( $node->safe_psql('copy',
		'SELECT string_agg(order_id || item_name, \',\' ORDER BY order_id) FROM wide'),
	'10green apple,11pear,12green apple',
	'the restored join view is maintained');
is($node->safe_psql('copy', 'SELECT n || \'/\' || total FROM summary'),
	'3/15.00', 'the restored aggregate view is maintained');

# A restore makes the query views as plain views; refresh() makes them
# depend on the extension again, so that DROP EXTENSION ... CASCADE takes
# them along instead of leaving them to keep their sources.
my $query_views = q{
	SELECT count(*) FROM pg_class c
	WHERE c.relnamespace = 'delta_join'::regnamespace
	  AND c.relname IN ('public.wide', 'public.summary')};
is($node->safe_psql('copy', $query_views), '2', 'the restored database has both query views');
$node->safe_psql('copy', 'DROP EXTENSION delta_join CASCADE');
is($node->safe_psql('copy', $query_views), '0',
	'after refresh(), DROP EXTENSION ... CASCADE drops the restored query views');
$node->safe_psql('copy', 'DROP TABLE orders, items');

# the original database is not disturbed
$node->safe_psql('src', "INSERT INTO orders VALUES (1, 2, 13, 1)");
is($node->safe_psql('src', 'SELECT delta_join.wait(NULL, \'30s\')'),
	't', 'wait() in the original database');
is($node->safe_psql('src', 'SELECT n FROM summary'), '3',
	'the original views go on');

$node->stop;
done_testing();
