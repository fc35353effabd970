--
-- Fallback maintenance (DESIGN.md §2): strategy auto uses the delta rewrite
-- when the query is eligible, else keyed recompute when it has a delta
-- view's shape, else full recompute; strategy none never uses the delta
-- rewrite.  Every path is exact after wait(); rule 4 holds on all of them.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA fall;
SET search_path = fall, public;

CREATE TABLE customers (id int PRIMARY KEY, name text, region text);
CREATE TABLE orders (id int PRIMARY KEY, customer_id int, amount int);
ALTER TABLE orders REPLICA IDENTITY FULL;
INSERT INTO customers SELECT g, 'c' || g, CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END
  FROM generate_series(1, 10) g;
INSERT INTO orders SELECT g, g % 10 + 1, g FROM generate_series(1, 50) g;

--
-- 1. Keyed recompute: a join on a column no index leads (rule 2), with
--    both keys in the select list; a filter is fine (nothing is left
--    behind).  A GROUP BY without an index; an aggregate without GROUP BY.
--
\set kjoin 'SELECT o.id, c.id AS customer_id, c.name, o.amount FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.amount > 5'
SELECT * FROM delta_join.explain(:'kjoin', strategy => 'auto');
SELECT delta_join.create_view('keyed_join', :'kjoin', strategy => 'auto');
\set kagg 'SELECT customer_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY customer_id'
SELECT * FROM delta_join.explain(:'kagg', strategy => 'auto');
SELECT delta_join.create_view('keyed_agg', :'kagg', strategy => 'auto');
\set kwhole 'SELECT count(*) AS n, sum(amount) AS total FROM orders'
SELECT * FROM delta_join.explain(:'kwhole', strategy => 'auto');
SELECT delta_join.create_view('keyed_whole', :'kwhole', strategy => 'auto');
-- a join on a partitioned table that leaves out its partition key; an
-- outer join on a column no index leads
CREATE TABLE shipments (id int, order_id int, region text, PRIMARY KEY (id, region))
  PARTITION BY LIST (region);
CREATE TABLE shipments_eu PARTITION OF shipments FOR VALUES IN ('eu');
CREATE TABLE shipments_us PARTITION OF shipments FOR VALUES IN ('us');
CREATE INDEX ON shipments (order_id);
INSERT INTO shipments VALUES (1, 1, 'eu'), (2, 2, 'us'), (3, 2, 'eu');
\set kpart 'SELECT o.id, o.amount, s.id AS shipment_id, s.region FROM orders o JOIN shipments s ON s.order_id = o.id'
SELECT * FROM delta_join.explain(:'kpart', strategy => 'auto');
SELECT delta_join.create_view('keyed_shipments', :'kpart', strategy => 'auto');
\set kouter 'SELECT c.id, c.name, o.id AS order_id, o.amount FROM customers c LEFT JOIN orders o ON o.customer_id = c.id'
SELECT * FROM delta_join.explain(:'kouter', strategy => 'auto');
SELECT delta_join.create_view('keyed_outer', :'kouter', strategy => 'auto');

--
-- 2. Full recompute: DISTINCT, a subquery, a window function, UNION, an
--    aggregate over a join, ORDER BY ... LIMIT.
--
-- (not groups through joins: customers does not log region in its old rows)
\set distinct_q 'SELECT DISTINCT c.region FROM orders o JOIN customers c ON c.id = o.customer_id'
SELECT * FROM delta_join.explain(:'distinct_q', strategy => 'auto');
SELECT delta_join.create_view('regions', :'distinct_q', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
\set exists_q 'SELECT c.id, c.name FROM customers c WHERE EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.amount > 40)'
SELECT delta_join.create_view('big_buyers', :'exists_q', strategy => 'none', options => '{"refresh_interval": "50ms"}');
\set window_q 'SELECT id, customer_id, rank() OVER (PARTITION BY customer_id ORDER BY amount DESC, id) AS rnk FROM orders'
SELECT delta_join.create_view('ranked', :'window_q', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
\set union_q 'SELECT region AS label FROM customers UNION SELECT name FROM customers WHERE id < 3'
SELECT delta_join.create_view('labels', :'union_q', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
\set join_agg 'SELECT c.region, count(*) AS n, sum(o.amount) AS total FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.region'
SELECT delta_join.create_view('region_totals', :'join_agg', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
\set top_q 'SELECT id, amount FROM orders ORDER BY amount DESC, id LIMIT 3'
SELECT delta_join.create_view('top_orders', :'top_q', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
\set both_q 'SELECT customer_id AS id FROM orders WHERE amount > 30 INTERSECT SELECT id FROM customers WHERE region = ''eu'''
SELECT delta_join.create_view('eu_big', :'both_q', strategy => 'auto', options => '{"refresh_interval": "50ms"}');
SELECT target, kind, mode, strategy FROM delta_join.views ORDER BY target;
\d regions
\d ranked

-- changes on every source, a delete, a move between groups
INSERT INTO shipments VALUES (4, 51, 'us');
UPDATE shipments SET order_id = 3 WHERE id = 1;
INSERT INTO customers VALUES (11, 'new', 'apac');
INSERT INTO orders VALUES (51, 11, 500), (52, 3, 1);
UPDATE customers SET name = 'C1' WHERE id = 1;
UPDATE orders SET customer_id = 2 WHERE id = 10;
DELETE FROM orders WHERE id IN (7, 50);
SELECT delta_join.wait();
SELECT * FROM diff('keyed_join', :'kjoin');
SELECT * FROM diff('keyed_agg', :'kagg');
SELECT * FROM diff('keyed_whole', :'kwhole');
SELECT * FROM diff('regions', :'distinct_q');
SELECT * FROM diff('big_buyers', :'exists_q');
SELECT * FROM diff('ranked', :'window_q');
SELECT * FROM diff('labels', :'union_q');
SELECT * FROM diff('region_totals', :'join_agg');
SELECT * FROM diff('top_orders', :'top_q');
SELECT * FROM diff('eu_big', :'both_q');
SELECT * FROM diff('keyed_shipments', :'kpart');
SELECT * FROM diff('keyed_outer', :'kouter');
SELECT * FROM top_orders ORDER BY amount DESC;
SELECT target FROM delta_join.status WHERE last_recompute IS NULL OR state <> 'active';
SELECT target, mode FROM delta_join.status ORDER BY target;

-- a recompute writes only what changed: an update no result sees writes nothing
SELECT sum(rows_upserted) AS written_before FROM delta_join.status WHERE target = 'fall.regions' \gset
UPDATE orders SET amount = amount WHERE id = 1;
SELECT delta_join.wait();
SELECT sum(rows_upserted) - :written_before AS written FROM delta_join.status WHERE target = 'fall.regions';

-- a source truncated
TRUNCATE orders;
INSERT INTO orders VALUES (1, 1, 10);
SELECT delta_join.wait();
SELECT * FROM diff('keyed_join', :'kjoin');
SELECT * FROM diff('keyed_whole', :'kwhole');
SELECT * FROM diff('regions', :'distinct_q');
SELECT * FROM diff('region_totals', :'join_agg');

-- a target without a key logs its old rows whole: a publication that
-- publishes deletes (one FOR ALL TABLES, say) does not keep the worker
-- from deleting its rows ("does not have a replica identity")
SELECT v.target, c.relreplident FROM delta_join.views v JOIN pg_class c ON c.oid = v.target::regclass
WHERE NOT EXISTS (SELECT FROM pg_index i WHERE i.indrelid = c.oid AND i.indisunique) ORDER BY 1;
CREATE PUBLICATION fall_everything FOR ALL TABLES;
DELETE FROM orders;
INSERT INTO orders VALUES (2, 2, 90);
SELECT delta_join.wait();
DROP PUBLICATION fall_everything;
SELECT * FROM diff('ranked', :'window_q');
SELECT * FROM diff('top_orders', :'top_q');
SELECT target, state FROM delta_join.status WHERE state <> 'active';
DELETE FROM orders;
INSERT INTO orders VALUES (1, 1, 10);
SELECT delta_join.wait();

-- varchar = char(n) compares as char(n), trailing blanks ignored: one
-- row of pads matches 'a' and 'a ' of padded, whose key the join does not
-- fix, so it stays in the result's key (the key was (id), and the second
-- row overwrote the first)
CREATE TABLE pads (id int PRIMARY KEY, c char(4));
CREATE INDEX ON pads (c);
CREATE TABLE padded (t varchar(10) PRIMARY KEY, name text);
INSERT INTO pads VALUES (1, 'a');
INSERT INTO padded VALUES ('a', 'A');
\set pad_q 'SELECT pads.id, padded.t, padded.name FROM pads JOIN padded ON padded.t = pads.c'
SELECT line FROM delta_join.explain(:'pad_q', strategy => 'auto') AS line WHERE line ~ '^[A-Z]';
SELECT delta_join.create_view('pad_join', :'pad_q', strategy => 'auto');
INSERT INTO padded VALUES ('a ', 'A with a blank');
SELECT delta_join.wait('fall.pad_join');
SELECT * FROM diff('pad_join', :'pad_q');

--
-- 3. How often: a full recompute runs when a source changed, at most once
--    per refresh_interval (the first change after creation is recomputed
--    at once; the next waits out the interval), and never otherwise.
--
SELECT last_recompute AS regions_recomputed FROM delta_join.status WHERE target = 'fall.regions' \gset
CREATE TABLE unrelated (id int PRIMARY KEY);
INSERT INTO unrelated VALUES (1);
SELECT delta_join.wait();
SELECT last_recompute = :'regions_recomputed' AS not_recomputed
FROM delta_join.status WHERE target = 'fall.regions';
SELECT delta_join.create_view('slow_regions', 'SELECT DISTINCT region FROM customers', strategy => 'auto',
  options => '{"refresh_interval": "1h"}');
INSERT INTO customers VALUES (12, 'x', 'mars');
SELECT delta_join.wait('fall.slow_regions', '30s');
SELECT * FROM slow_regions ORDER BY region;
INSERT INTO customers VALUES (13, 'y', 'venus');
SELECT delta_join.wait('fall.slow_regions', '1s');
SELECT * FROM slow_regions ORDER BY region;
SELECT state, lag_bytes > 0 AS behind FROM delta_join.status WHERE target = 'fall.slow_regions';
-- 6. A query the planner cannot plan: explain() raises the planner's
--    error, as create_view does (it described a keyed recompute of a
--    FULL JOIN whose ON has no equality, which no view could take).
\set nonequi 'SELECT o.id, c.id AS customer_id FROM orders o FULL JOIN customers c ON o.customer_id < c.id'
SELECT * FROM delta_join.explain(:'nonequi', strategy => 'auto');
SELECT delta_join.create_view('nonequi', :'nonequi', strategy => 'auto');

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view('fall.slow_regions');

--
-- 4. What no path takes: rule 4 on every path, unlogged tables.
--
SELECT * FROM delta_join.explain('SELECT DISTINCT region, now() AS t FROM customers', strategy => 'auto');
CREATE UNLOGGED TABLE scratch (id int PRIMARY KEY);
SELECT * FROM delta_join.explain('SELECT DISTINCT id FROM scratch', strategy => 'none');
-- strategy eventual does not fall back
SELECT * FROM delta_join.explain(:'distinct_q');

-- a data-modifying statement in WITH: refused on every path, by
-- create_view as by explain (flattening the query must not drop it)
\set modifying_q 'WITH gone AS (DELETE FROM orders WHERE id = 1 RETURNING id) SELECT id, amount FROM orders'
SELECT * FROM delta_join.explain(:'modifying_q', strategy => 'auto');
SELECT delta_join.create_view('modifying', :'modifying_q');
SELECT delta_join.create_view('modifying', :'modifying_q', strategy => 'auto');
SELECT delta_join.create_view('modifying', 'WITH gone AS (DELETE FROM orders WHERE id = 1 RETURNING id, amount) SELECT id, amount FROM gone',
  strategy => 'none');
SELECT count(*) AS orders_left_alone FROM orders WHERE id = 1;

-- row-level security: explain and create_view run the same checks, so
-- explain names no path that create_view then refuses
CREATE TABLE tenant_rows (id int PRIMARY KEY, tenant text);
ALTER TABLE tenant_rows ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON tenant_rows USING (tenant = current_user);
CREATE ROLE dj_fallback_tenant;
GRANT USAGE, CREATE ON SCHEMA fall TO dj_fallback_tenant;
GRANT SELECT, UPDATE ON tenant_rows TO dj_fallback_tenant;
SET ROLE dj_fallback_tenant;
SELECT * FROM delta_join.explain('SELECT DISTINCT tenant FROM fall.tenant_rows', strategy => 'auto');
SELECT delta_join.create_view('fall.tenants', 'SELECT DISTINCT tenant FROM fall.tenant_rows', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT id, tenant FROM fall.tenant_rows', strategy => 'auto');
RESET ROLE;
DROP TABLE tenant_rows;
REVOKE ALL ON SCHEMA fall FROM dj_fallback_tenant;
DROP ROLE dj_fallback_tenant;

-- a source without a primary key leaves no relation open behind the paths
-- it fails (no "relcache reference leak" warning)
CREATE TABLE loose_rows (a int, b text);
INSERT INTO loose_rows VALUES (1, 'x'), (1, 'x'), (2, NULL);
SELECT delta_join.create_view('loose_copy', 'SELECT a, b FROM loose_rows', strategy => 'auto',
  options => '{"refresh_interval": "10ms"}');
INSERT INTO loose_rows VALUES (3, 'y');
SELECT delta_join.wait('fall.loose_copy');
SELECT * FROM diff('loose_copy', 'SELECT a, b FROM loose_rows');

--
-- 4b. Inheritance: a table read without ONLY is read with its children,
--     which are sources of a full recompute too: rows written into them
--     reach the target, and a child created, attached, detached or dropped
--     later has the view refreshed in the same transaction, with its
--     sources (the delta paths refuse a table with children).
--
CREATE TABLE stock (id int PRIMARY KEY, sku text, qty int);
CREATE TABLE stock_north () INHERITS (stock);
INSERT INTO stock VALUES (1, 'bolt', 5);
INSERT INTO stock_north VALUES (2, 'bolt', 7), (3, 'nut', 1);
\set stock_q 'SELECT sku, sum(qty) AS qty, count(*) AS n FROM stock GROUP BY sku'
SELECT * FROM delta_join.explain(:'stock_q', strategy => 'auto');
SELECT delta_join.create_view('stock_by_sku', :'stock_q', strategy => 'auto',
  options => '{"refresh_interval": "10ms"}');
\set all_stock_q 'SELECT id, sku, qty FROM stock'
SELECT delta_join.create_view('all_stock', :'all_stock_q', strategy => 'auto',
  options => '{"refresh_interval": "10ms"}');
\set only_stock_q 'SELECT id, sku, qty FROM ONLY stock'
SELECT delta_join.create_view('only_stock', :'only_stock_q', strategy => 'auto');
SELECT target, mode, sources FROM delta_join.views WHERE target::text LIKE 'fall.%stock%' ORDER BY target;
-- rows into a child, the parent, and both
INSERT INTO stock_north VALUES (4, 'nut', 2);
UPDATE stock SET qty = qty + 10 WHERE id IN (1, 3);
SELECT delta_join.wait();
SELECT * FROM stock_by_sku ORDER BY sku;
SELECT * FROM diff('all_stock', :'all_stock_q');
SELECT * FROM diff('only_stock', :'only_stock_q');
-- a child created later, and its rows
CREATE TABLE stock_south () INHERITS (stock);
INSERT INTO stock_south VALUES (5, 'washer', 100);
SELECT delta_join.wait();
SELECT * FROM stock_by_sku ORDER BY sku;
-- a table that becomes a child brings its rows; a grandchild counts too
CREATE TABLE stock_east (id int PRIMARY KEY, sku text, qty int);
INSERT INTO stock_east VALUES (6, 'bolt', 1000);
ALTER TABLE stock_east INHERIT stock;
SELECT * FROM stock_by_sku ORDER BY sku;
CREATE TABLE stock_east_dock () INHERITS (stock_east);
INSERT INTO stock_east_dock VALUES (7, 'nut', 3);
SELECT delta_join.wait();
SELECT * FROM stock_by_sku ORDER BY sku;
-- a child that leaves takes its rows away
ALTER TABLE stock_north NO INHERIT stock;
SELECT * FROM stock_by_sku ORDER BY sku;
DROP TABLE stock_south;
SELECT * FROM stock_by_sku ORDER BY sku;
UPDATE stock_north SET qty = 0;
SELECT delta_join.wait();
SELECT * FROM diff('stock_by_sku', :'stock_q');
SELECT * FROM diff('all_stock', :'all_stock_q');
SELECT * FROM diff('only_stock', :'only_stock_q');
SELECT sources FROM delta_join.views WHERE target = 'fall.all_stock';
-- a child whose changes are not logged is refused
CREATE UNLOGGED TABLE stock_scratch () INHERITS (stock);
DO $$ BEGIN
  CREATE TEMPORARY TABLE stock_temp () INHERITS (fall.stock);
EXCEPTION WHEN feature_not_supported THEN
  RAISE NOTICE 'a temporary child is refused too';
END $$;
SELECT target, state FROM delta_join.status WHERE target::text LIKE 'fall.%stock%' ORDER BY target;
SELECT delta_join.drop_view('fall.stock_by_sku');
SELECT delta_join.drop_view('fall.all_stock');
SELECT delta_join.drop_view('fall.only_stock');

--
-- 5. The seeds' client parameters of asynchronous lookups: accepted as
--    options and table hints, reported as not applicable; the seeds' text
--    runs unchanged.
--
\set seeds_q 'SELECT o.id, c.id AS customer_id, c.name FROM orders o JOIN customers /*+ OPTIONS(''client.lookup.max-inflight-requests''=''64'') */ c ON c.id = o.id'
SELECT * FROM delta_join.explain(:'seeds_q',
  options => '{"client.lookup.queue-size": 1000, "table.exec.async-lookup.buffer-capacity": 100}');
SELECT delta_join.create_view('seed_lookups', :'seeds_q',
  options => '{"client.lookup.queue-size": 1000, "table.exec.async-lookup.buffer-capacity": 100}');
INSERT INTO orders VALUES (2, 2, 20);
SELECT delta_join.wait('fall.seed_lookups');
SELECT * FROM diff('seed_lookups', :'seeds_q');

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA fall CASCADE;
RESET client_min_messages;
RESET search_path;
