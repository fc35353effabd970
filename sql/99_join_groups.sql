--
-- Keyed recompute of groups through joins (issue 22, item 1): under
-- strategy auto an aggregate over inner joins, grouped by columns of any
-- source, is maintained per dirty group: the groups a batch's changed rows
-- leave and enter are found through the joins from the images of those
-- rows (the columns the group key and the join conditions read, which
-- must be in each source's replica identity), then recomputed.  Outer
-- joins, a cross join, no GROUP BY and strategy none stay on full
-- recompute; explain() says why.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA jg;
SET search_path = jg, public;

CREATE TABLE merchants (id int PRIMARY KEY, region text, tier int);
CREATE TABLE orders (id int PRIMARY KEY, merchant_id int, item_id int, amount numeric(10,2), status text);
CREATE TABLE items (id int PRIMARY KEY, category text);
INSERT INTO merchants SELECT g, CASE WHEN g % 3 = 0 THEN 'eu' WHEN g % 3 = 1 THEN 'us' ELSE NULL END, g % 2
  FROM generate_series(1, 6) g;
INSERT INTO items SELECT g, 'cat' || (g % 3) FROM generate_series(1, 5) g;
INSERT INTO orders SELECT g, g % 7, g % 6, g * 1.5, CASE WHEN g % 4 = 0 THEN 'void' ELSE 'paid' END
  FROM generate_series(1, 40) g;

--
-- 1. Not eligible while the join columns and group keys are not logged in
--    the old rows: explain() names the column, auto falls back to full
--    recompute.
--
\set by_region 'SELECT m.region, count(*) AS n, sum(o.amount) AS total, avg(o.amount) AS mean, min(o.amount) AS lo, max(o.amount) AS hi FROM orders o JOIN merchants m ON m.id = o.merchant_id GROUP BY m.region'
SELECT * FROM delta_join.explain(:'by_region', strategy => 'auto');
ALTER TABLE orders REPLICA IDENTITY FULL;
ALTER TABLE merchants REPLICA IDENTITY FULL;
ALTER TABLE items REPLICA IDENTITY FULL;

--
-- 2. Eligible: grouped by a column of merchants, of orders, over three
--    tables, with HAVING and a filter.
--
SELECT * FROM delta_join.explain(:'by_region', strategy => 'auto');
SELECT delta_join.create_view('by_region', :'by_region', strategy => 'auto');
\set by_order 'SELECT o.status, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN merchants m ON m.id = o.merchant_id WHERE m.tier = 1 GROUP BY o.status HAVING count(*) > 2'
SELECT * FROM delta_join.explain(:'by_order', strategy => 'auto');
SELECT delta_join.create_view('by_order', :'by_order', strategy => 'auto');
\set three 'SELECT m.region, i.category, count(*) AS n, sum(o.amount) AS total, max(o.id) AS last_id FROM orders o JOIN merchants m ON m.id = o.merchant_id JOIN items i ON i.id = o.item_id GROUP BY m.region, i.category'
SELECT * FROM delta_join.explain(:'three', strategy => 'auto');
SELECT delta_join.create_view('three', :'three', strategy => 'auto');
SELECT target, kind, mode, strategy FROM delta_join.views WHERE target LIKE 'jg.%' ORDER BY target;
\d by_region

-- changes of every source: amounts, join keys, group keys, NULL keys,
-- HAVING flips, a group emptied, a merchant moving region in the batch in
-- which its last order moves away
UPDATE orders SET amount = amount + 1 WHERE id % 5 = 0;
UPDATE orders SET merchant_id = 2 WHERE merchant_id = 6;
UPDATE merchants SET region = 'apac' WHERE id = 6;
UPDATE orders SET status = 'void' WHERE id IN (1, 2, 3);
UPDATE orders SET merchant_id = NULL WHERE id = 7;
UPDATE merchants SET region = NULL WHERE id = 3;
INSERT INTO merchants VALUES (7, 'latam', 1);
INSERT INTO orders VALUES (41, 7, 1, 10, 'paid'), (42, 7, NULL, 11, 'paid');
UPDATE items SET category = 'new' WHERE id = 2;
DELETE FROM orders WHERE merchant_id = 4;
DELETE FROM items WHERE id = 5;
SELECT delta_join.wait();
SELECT * FROM diff('by_region', :'by_region');
SELECT * FROM diff('by_order', :'by_order');
SELECT * FROM diff('three', :'three');
SELECT * FROM by_region ORDER BY region NULLS FIRST;

-- a TRUNCATE of one source empties every group
TRUNCATE items;
INSERT INTO items VALUES (1, 'cat1');
SELECT delta_join.wait();
SELECT * FROM diff('three', :'three');
SELECT * FROM three ORDER BY region NULLS FIRST, category;

-- a replica identity that no longer logs a join column or group key is
-- refused while the view reads the table
ALTER TABLE merchants REPLICA IDENTITY DEFAULT;
ALTER TABLE items REPLICA IDENTITY USING INDEX items_pkey;

--
-- 3. What stays on full recompute under auto: an outer join, a cross
--    join, no GROUP BY; and every aggregate over a join under strategy
--    none; eventual refuses.
--
\set outer_q 'SELECT m.region, count(o.id) AS n FROM merchants m LEFT JOIN orders o ON o.merchant_id = m.id GROUP BY m.region'
SELECT * FROM delta_join.explain(:'outer_q', strategy => 'auto');
\set cross_q 'SELECT m.region, count(*) AS n FROM orders o CROSS JOIN merchants m GROUP BY m.region'
SELECT * FROM delta_join.explain(:'cross_q', strategy => 'auto');
\set whole_q 'SELECT count(*) AS n, sum(o.amount) AS total FROM orders o JOIN merchants m ON m.id = o.merchant_id'
SELECT * FROM delta_join.explain(:'whole_q', strategy => 'auto');
SELECT * FROM delta_join.explain(:'by_region', strategy => 'none');
SELECT delta_join.create_view('by_region_eventual', :'by_region');

-- the views are dropped with the schema
SELECT delta_join.drop_view('by_region');
SELECT delta_join.drop_view('by_order');
SELECT delta_join.drop_view('three');
DROP SCHEMA jg CASCADE;
