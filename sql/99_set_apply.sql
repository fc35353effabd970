--
-- Set-based apply (issue 22, item 4): a recompute execution of a set of
-- at least delta_join.set_apply_min_keys keys (by default 1,000; 1 here,
-- so that every set is) is planned for those keys, so that the planner
-- can join a large batch to the sources with a hash join.  The groups of
-- a key of several columns are recomputed as a join with the keys'
-- unnest.  Dirty keys are told apart by their bytes, so numeric 1.0 and
-- 1.00 are two dirty keys of one group: each group must be asked for
-- once, or the join would count each of its rows twice.  With the setting
-- at its maximum, every execution runs its batch's generic plan instead,
-- with the same results.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA sa;
SET search_path = sa, public;
SHOW delta_join.set_apply_min_keys;
ALTER SYSTEM SET delta_join.set_apply_min_keys = 1;
SELECT pg_reload_conf();

CREATE TABLE shops (id int PRIMARY KEY, region text, grade numeric);
CREATE TABLE sales (id int PRIMARY KEY, shop_id int, price numeric, kind text, qty int);
CREATE INDEX ON sales (shop_id);
CREATE INDEX ON sales (price, kind);
ALTER TABLE shops REPLICA IDENTITY FULL;
ALTER TABLE sales REPLICA IDENTITY FULL;
INSERT INTO shops VALUES (1, 'north', 1.0), (2, 'north', 1.00), (3, 'south', 2), (4, NULL, 1);
INSERT INTO sales VALUES (1, 1, 1.0, 'a', 1), (2, 2, 1.00, 'a', 2), (3, 3, 2, 'b', 3),
  (4, 4, NULL, 'a', 4), (5, 1, 1.000, NULL, 5);

-- a single-table aggregate, a join aggregate and a DISTINCT, each keyed
-- by two columns, one of them numeric
SELECT delta_join.create_view('by_price_kind',
  $q$ SELECT price, kind, count(*) AS n, sum(qty) AS q FROM sales GROUP BY price, kind $q$);
SELECT delta_join.create_view('by_region_grade',
  $q$ SELECT h.region, h.grade, count(*) AS n, sum(s.qty) AS q
      FROM sales s JOIN shops h ON h.id = s.shop_id GROUP BY h.region, h.grade $q$, strategy => 'auto');
SELECT delta_join.create_view('distinct_region_grade',
  $q$ SELECT DISTINCT h.region, h.grade FROM sales s JOIN shops h ON h.id = s.shop_id $q$,
  strategy => 'auto');
SELECT target, mode FROM delta_join.views ORDER BY 1;

\set by_price_kind 'SELECT price, kind, count(*) AS n, sum(qty) AS q FROM sales GROUP BY price, kind'
\set by_region_grade 'SELECT h.region, h.grade, count(*) AS n, sum(s.qty) AS q FROM sales s JOIN shops h ON h.id = s.shop_id GROUP BY h.region, h.grade'
\set distinct_region_grade 'SELECT DISTINCT h.region, h.grade FROM sales s JOIN shops h ON h.id = s.shop_id'

-- one batch dirties (1.0, 'a') and (1.00, 'a') of by_price_kind, and
-- ('north', 1.0) and ('north', 1.00) of the others: one group each
BEGIN;
UPDATE sales SET qty = qty + 10 WHERE id IN (1, 2);
UPDATE shops SET grade = grade WHERE id IN (1, 2);
COMMIT;
SELECT delta_join.wait();
SELECT v.target, d.* FROM (VALUES ('by_price_kind', :'by_price_kind'),
  ('by_region_grade', :'by_region_grade'), ('distinct_region_grade', :'distinct_region_grade')) v(target, query),
  diff(v.target::regclass, v.query) d ORDER BY 1;
SELECT price, kind, n, q FROM by_price_kind ORDER BY 1, 2;
SELECT region, grade, n, q FROM by_region_grade ORDER BY 1, 2;

-- groups that empty, groups with NULL keys (recomputed one at a time),
-- rows that move between groups
BEGIN;
DELETE FROM sales WHERE id = 3;
UPDATE sales SET price = 1.0, kind = 'a' WHERE id = 5;
INSERT INTO sales VALUES (6, 4, NULL, NULL, 6), (7, 3, 2.0, 'b', 7);
UPDATE shops SET region = 'east' WHERE id = 2;
COMMIT;
SELECT delta_join.wait();
SELECT v.target, d.* FROM (VALUES ('by_price_kind', :'by_price_kind'),
  ('by_region_grade', :'by_region_grade'), ('distinct_region_grade', :'distinct_region_grade')) v(target, query),
  diff(v.target::regclass, v.query) d ORDER BY 1;

-- the same with generic plans only
ALTER SYSTEM SET delta_join.set_apply_min_keys = 2147483647;
SELECT pg_reload_conf();
BEGIN;
UPDATE sales SET qty = qty + 100 WHERE id IN (1, 2, 5);
UPDATE shops SET region = 'north' WHERE id = 2;
DELETE FROM sales WHERE id = 7;
COMMIT;
SELECT delta_join.wait();
SELECT v.target, d.* FROM (VALUES ('by_price_kind', :'by_price_kind'),
  ('by_region_grade', :'by_region_grade'), ('distinct_region_grade', :'distinct_region_grade')) v(target, query),
  diff(v.target::regclass, v.query) d ORDER BY 1;
ALTER SYSTEM SET delta_join.set_apply_min_keys = 1;
SELECT pg_reload_conf();

-- a key of several columns with a composite column takes the one-group
-- path: the join would read the keys as the columns of unnest(), which
-- spreads a composite value over its fields (and cannot return the
-- pseudo-type record, the type of the key's equality)
CREATE TYPE spot AS (x int, tag text);
CREATE TABLE visits (id int PRIMARY KEY, shop_id int, spot spot, n int);
CREATE INDEX ON visits (shop_id);
ALTER TABLE visits REPLICA IDENTITY FULL;
INSERT INTO visits SELECT g, g % 3, ROW(g % 2, 'a')::spot, g FROM generate_series(1, 12) g;
\set by_shop_spot 'SELECT shop_id, spot, count(*) AS n, sum(n) AS total FROM visits GROUP BY shop_id, spot'
SELECT delta_join.create_view('by_shop_spot', :'by_shop_spot');
SELECT target, mode FROM delta_join.views WHERE target = 'sa.by_shop_spot';
UPDATE visits SET n = n + 1, spot = ROW(1, 'a')::spot WHERE id % 4 = 0;
DELETE FROM visits WHERE id = 3;
SELECT delta_join.wait('sa.by_shop_spot');
SELECT * FROM diff('by_shop_spot', :'by_shop_spot');
SELECT state, last_error FROM delta_join.status WHERE target = 'sa.by_shop_spot';

-- a source keyed by a composite column: a region query reads its keys
-- from a tuplestore, where a composite value stays whole, so an outer
-- join keyed by it is a delta view (an array key likewise); retract mode,
-- which deletes the rows a shelf leaves, is exact
CREATE TABLE spots (id spot PRIMARY KEY, shop_id int);
CREATE INDEX ON spots (shop_id);
INSERT INTO spots SELECT ROW(g, 'b')::spot, g % 3 FROM generate_series(1, 4) g;
\set spot_visits 'SELECT p.id AS spot_id, v.id AS visit_id FROM spots p LEFT JOIN visits v ON v.shop_id = p.shop_id'
SELECT delta_join.create_view('spot_visits', :'spot_visits', options => '{"retract": true}');
SELECT target, mode FROM delta_join.views WHERE target = 'sa.spot_visits';
CREATE TABLE shelves (id int[] PRIMARY KEY, shop_id int);
CREATE INDEX ON shelves (shop_id);
INSERT INTO shelves SELECT ARRAY[g, NULL, g], g % 3 FROM generate_series(1, 4) g;
\set shelf_visits 'SELECT s.id AS shelf_id, v.id AS visit_id, v.spot FROM shelves s LEFT JOIN visits v ON v.shop_id = s.shop_id'
SELECT delta_join.create_view('shelf_visits', :'shelf_visits', options => '{"retract": true}');
SELECT target, mode FROM delta_join.views WHERE target = 'sa.shelf_visits';
UPDATE spots SET shop_id = shop_id + 1 WHERE (id).x = 1;
UPDATE shelves SET shop_id = shop_id + 1 WHERE id[1] > 2;
DELETE FROM spots WHERE (id).x = 2;
DELETE FROM shelves WHERE id[1] = 2;
INSERT INTO spots VALUES (ROW(9, NULL), 2);
INSERT INTO shelves VALUES (ARRAY[[9, 9], [NULL, 1]], 2);
UPDATE visits SET shop_id = 2 WHERE id IN (1, 4);
SELECT delta_join.wait();
SELECT * FROM diff('spot_visits', :'spot_visits');
SELECT * FROM diff('shelf_visits', :'shelf_visits');
SELECT * FROM shelf_visits WHERE shelf_id[1][1] = 9 OR shelf_id[1] = 3 ORDER BY 1, 2;
SELECT delta_join.drop_view('by_shop_spot');
SELECT delta_join.drop_view('spot_visits');
SELECT delta_join.drop_view('shelf_visits');

SELECT delta_join.drop_view('by_price_kind');
SELECT delta_join.drop_view('by_region_grade');
SELECT delta_join.drop_view('distinct_region_grade');
ALTER SYSTEM RESET delta_join.set_apply_min_keys;
SELECT pg_reload_conf();
DROP SCHEMA sa CASCADE;
