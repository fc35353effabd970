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

# Tables with dropped columns: a dump makes them anew without those, so
# the columns the catalog names by number (source_catalog.key_attnums) are
# others in the restored tables.  The worker refuses such a view; refresh()
# registers the restored tables' columns (under a new view_id, with none of
# the keys captured by the old ones) and the view is maintained again: a
# delta join (upsert mode) whose key moved, and an additive aggregate over the join
# whose group key, join and summed columns all moved.
$node->safe_psql('postgres', 'CREATE DATABASE holes');
$node->safe_psql(
	'holes', q{
	CREATE EXTENSION delta_join;
	CREATE TABLE shops (gone int, shop_id int PRIMARY KEY, region text NOT NULL);
	CREATE TABLE sales (sale_id int PRIMARY KEY, gone1 text, shop_id int NOT NULL,
	                    gone2 int, qty int NOT NULL, price numeric(10,2) NOT NULL);
	CREATE INDEX ON sales (shop_id);
	ALTER TABLE shops REPLICA IDENTITY FULL;
	ALTER TABLE sales REPLICA IDENTITY FULL;
	ALTER TABLE shops DROP COLUMN gone;
	ALTER TABLE sales DROP COLUMN gone1, DROP COLUMN gone2;
	INSERT INTO shops SELECT g, 'r' || (g % 3) FROM generate_series(1, 20) g;
	INSERT INTO sales SELECT g, 1 + g % 20, g % 7, g FROM generate_series(1, 400) g;
});
my %holes = (
	shop_sales => 'SELECT s.sale_id, s.qty, h.region FROM sales s JOIN shops h ON h.shop_id = s.shop_id',
	region_sums => 'SELECT h.region, count(*) AS n, sum(s.qty) AS q, sum(s.price) AS p
		FROM sales s JOIN shops h ON h.shop_id = s.shop_id GROUP BY h.region');
$node->safe_psql('holes',
	"SELECT delta_join.create_view('$_', \$q\$ $holes{$_} \$q\$, strategy => 'auto')")
  foreach sort keys %holes;
my $key_names = q{
	SELECT string_agg(v.target::text || ':' || s.relid::regclass::text || '('
	                  || (SELECT string_agg(attname, ',' ORDER BY k.i)
	                      FROM unnest(s.key_attnums) WITH ORDINALITY k(attnum, i)
	                      JOIN pg_attribute a ON a.attrelid = s.relid AND a.attnum = k.attnum) || ')',
	                  ' ' ORDER BY v.target::text, s.ordinal)
	FROM delta_join.source_catalog s JOIN delta_join.view_catalog v USING (view_id)};
my $keys_before = $node->safe_psql('holes', $key_names);

DeltaJoinTest::dump_restore($node, 'holes', 'holes_copy', 'tables with dropped columns');
isnt($node->safe_psql('holes_copy', $key_names), $keys_before,
	'the restored catalog numbers columns the restored tables do not have there');
foreach my $t (sort keys %holes)
{
	$node->safe_psql('holes_copy', "SELECT delta_join.refresh('$t')");
}
is($node->safe_psql('holes_copy', $key_names), $keys_before,
	'refresh() registers the same columns of the restored tables');
$node->safe_psql(
	'holes_copy', q{
	INSERT INTO sales SELECT g, 1 + g % 20, 3, 1.5 FROM generate_series(401, 450) g;
	UPDATE sales SET qty = qty + 1, price = price * 2 WHERE sale_id % 5 = 0;
	UPDATE sales SET shop_id = 1 + (shop_id + 4) % 20 WHERE sale_id % 7 = 0;
	DELETE FROM sales WHERE sale_id % 11 = 0;
	UPDATE shops SET region = 'r9' WHERE shop_id IN (4, 5);
	DELETE FROM sales WHERE shop_id = 6;
	DELETE FROM shops WHERE shop_id = 6;
});
is($node->safe_psql('holes_copy', "SELECT delta_join.wait(NULL, '60s')"),
	't', 'wait() after writes to the restored tables');
is($node->safe_psql('holes_copy',
		"SELECT string_agg(target || ' ' || state, ', ' ORDER BY target) FROM delta_join.status"),
	'public.region_sums active, public.shop_sales active', 'both views are active');
DeltaJoinTest::targets_ok($node, 'restored tables with dropped columns',
	[
		[ 'region_sums', $holes{region_sums}, dbname => 'holes_copy' ],
		[ 'shop_sales', $holes{shop_sales}, dbname => 'holes_copy', mode => 'upsert' ]
	]);

# the original database is not disturbed
$node->safe_psql('src', "INSERT INTO orders VALUES (1, 2, 13, 1)");
is($node->safe_psql('src', 'SELECT delta_join.wait(NULL, \'30s\')'),
	't', 'wait() in the original database');
is($node->safe_psql('src', 'SELECT n FROM summary'), '3',
	'the original views go on');

$node->stop;
done_testing();
