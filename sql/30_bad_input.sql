--
-- Bad input to create_view and explain (DESIGN.md §6, invariant 5): each
-- gets a clean error with an SQLSTATE, and nothing is left behind: no row
-- in the catalog, no target table.
--
-- try_create() prints "SQLSTATE: message", then DETAIL and HINT lines.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA bad;
SET search_path = bad, public;

CREATE FUNCTION try_create(target text, query text)
RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  PERFORM delta_join.create_view(target, query);
  RETURN NEXT 'created ' || target;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN NEXT st || ': ' || msg;
  IF det <> '' THEN RETURN NEXT 'DETAIL: ' || det; END IF;
  IF hnt <> '' THEN RETURN NEXT 'HINT: ' || hnt; END IF;
END $f$;

-- the same for explain
CREATE FUNCTION try_explain(query text)
RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  RETURN QUERY SELECT * FROM delta_join.explain(query);
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN NEXT st || ': ' || msg;
  IF det <> '' THEN RETURN NEXT 'DETAIL: ' || det; END IF;
  IF hnt <> '' THEN RETURN NEXT 'HINT: ' || hnt; END IF;
END $f$;

CREATE TABLE orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric,
                     PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text,
                    PRIMARY KEY (merchant_id, item_id));
INSERT INTO orders VALUES (1, 1, 1, 10);
INSERT INTO items VALUES (1, 1, 'x');

SELECT count(*) AS views_before FROM delta_join.views;

-- empty text, blanks only, a lone semicolon, only a comment
SELECT * FROM try_create('bad_target', '');
SELECT * FROM try_create('bad_target', E'  \n\t ');
SELECT * FROM try_create('bad_target', ';');
SELECT * FROM try_create('bad_target', '-- nothing here');
-- statements that are not SELECT
SELECT * FROM try_create('bad_target', 'DELETE FROM orders');
SELECT * FROM try_create('bad_target', 'INSERT INTO items VALUES (2, 2, ''y'')');
SELECT * FROM try_create('bad_target', 'UPDATE items SET item_name = ''z''');
SELECT * FROM try_create('bad_target', 'DROP TABLE orders');
SELECT * FROM try_create('bad_target', 'VALUES (1)');
SELECT * FROM try_create('bad_target', 'SELECT merchant_id, item_id, order_id INTO copy_of_orders FROM orders');
-- the sources are untouched
SELECT count(*) AS orders, (SELECT count(*) FROM items) AS items FROM orders;
-- two statements (also when the second is harmless)
SELECT * FROM try_create('bad_target',
  'SELECT merchant_id, item_id, order_id FROM orders; DELETE FROM orders');
SELECT * FROM try_create('bad_target',
  'SELECT merchant_id, item_id, order_id FROM orders; SELECT 1');
-- one statement with a trailing semicolon is fine (checked with explain)
SELECT * FROM try_explain('SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id;');
-- syntax errors
SELECT * FROM try_create('bad_target', 'SELEC merchant_id FROM orders');
SELECT * FROM try_create('bad_target', 'SELECT merchant_id FROM orders WHERE');
SELECT * FROM try_create('bad_target', 'SELECT ''unterminated FROM orders');
SELECT * FROM try_create('bad_target', 'SELECT merchant_id FROM orders /* unterminated');
-- unknown table, unknown column, unknown function, type mismatch
SELECT * FROM try_create('bad_target', 'SELECT a FROM no_such_table');
SELECT * FROM try_create('bad_target', 'SELECT merchant_id, no_such_column FROM orders');
SELECT * FROM try_create('bad_target',
  'SELECT merchant_id, item_id, order_id, no_such_function(amount) AS f FROM orders');
SELECT * FROM try_create('bad_target',
  'SELECT o.merchant_id, o.item_id, o.order_id FROM orders o JOIN items i ON o.merchant_id = i.item_name');
-- output columns need distinct names
SELECT * FROM try_create('bad_target', 'SELECT merchant_id, item_id, order_id, 1 FROM orders');
SELECT * FROM try_create('bad_target',
  'SELECT o.merchant_id, o.item_id, o.order_id, i.merchant_id
   FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id');
-- NULL arguments
SELECT * FROM try_create(NULL, 'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
SELECT * FROM try_create('bad_target', NULL);
SELECT * FROM try_explain(NULL);
-- bad target names: a schema that does not exist, too many dots, empty,
-- unbalanced quotes
SELECT * FROM try_create('no_such_schema.bad_target',
  'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
SELECT * FROM try_create('a.b.c.d',
  'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
SELECT * FROM try_create('',
  'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
SELECT * FROM try_create('"bad_target',
  'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
-- a target or a source in information_schema: pg_dump does not dump the
-- tables of that schema, so the catalog rows naming one would make the
-- restore of every view of the database fail
SELECT * FROM try_create('information_schema.bad_target',
  'SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id');
CREATE TABLE information_schema.bad_source (id int PRIMARY KEY, v text);
SELECT * FROM try_create('bad_target', 'SELECT id, v FROM information_schema.bad_source');
SELECT * FROM delta_join.explain('SELECT DISTINCT v FROM information_schema.bad_source', 'auto');
DROP TABLE information_schema.bad_source;
-- explain has the same errors for the same text
SELECT * FROM try_explain('');
SELECT * FROM try_explain('DELETE FROM orders');
SELECT * FROM try_explain('SELECT 1; SELECT 2');
SELECT * FROM try_explain('SELEC 1');
SELECT * FROM try_explain('SELECT * FROM no_such_table');

-- Nothing was left behind: no catalog rows, no target table.
SELECT count(*) AS views_after FROM delta_join.views;
SELECT count(*) AS view_rows FROM delta_join.view_catalog;
SELECT count(*) AS source_rows FROM delta_join.source_catalog;
SELECT to_regclass('bad.bad_target') AS bad_target, to_regclass('bad.copy_of_orders') AS copy_of_orders;

-- An error inside a transaction block aborts it, as any error does.
BEGIN;
SELECT delta_join.create_view('bad_target', 'DELETE FROM orders');
SELECT 1;
ROLLBACK;
-- A view created in a transaction that rolls back leaves nothing either.
BEGIN;
SELECT delta_join.create_view('rolled_back', $$
  SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id $$);
SELECT count(*) AS views_in_transaction FROM delta_join.views;
ROLLBACK;
SELECT count(*) AS views_after_rollback FROM delta_join.views;
SELECT to_regclass('bad.rolled_back') AS rolled_back;

-- The names in a query resolve with the caller's search_path, and a query
-- that is eligible still works after all these errors.
SELECT delta_join.create_view('good_target', $$
  SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id $$);
SELECT * FROM good_target;
SELECT target, sources FROM delta_join.views;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
-- drop_view() does not cascade: a dependent view stops it, with a hint
-- that fits drop_view() (not DROP TABLE's "Use DROP ... CASCADE")
CREATE VIEW reads_good_target AS SELECT * FROM good_target;
SELECT delta_join.drop_view('good_target');
SELECT target FROM delta_join.views;
DROP VIEW reads_good_target;
SELECT delta_join.drop_view('good_target');

-- Names that need quoting are shown quoted once: as they are written in
-- SQL, without more quotes around them
CREATE SCHEMA "Odd Schema";
CREATE TABLE "Odd Schema"."Src T" (id int PRIMARY KEY, "K k" int);
SELECT delta_join.create_view('"Odd Schema"."Wide n"', $$
  SELECT id, "K k" FROM "Odd Schema"."Src T" $$);
SELECT delta_join.create_view('"Odd Schema"."Wide n"', $$
  SELECT id, "K k" FROM "Odd Schema"."Src T" $$);
SELECT delta_join.refresh('"Odd Schema"."Nope"');
SELECT delta_join.create_view('"Odd Schema"."Self"', $$
  SELECT s1.id, s2."K k" FROM "Odd Schema"."Src T" s1 JOIN "Odd Schema"."Src T" s2 ON s1."K k" = s2.id $$);
ALTER TABLE "Odd Schema"."Wide n" ADD COLUMN extra int;
SELECT delta_join.drop_view('"Odd Schema"."Wide n"');
DROP SCHEMA "Odd Schema" CASCADE;

-- An existing target whose NOT NULL column takes a value that can be NULL
-- (a nullable group key, a column an outer join null-extends) is taken with
-- a WARNING: the view would go to error at the first NULL.  A target
-- lacking the key is told to add one that takes NULL.
CREATE TABLE nn_regions (id int PRIMARY KEY, region text, code text NOT NULL);
CREATE TABLE nn_orders (id int PRIMARY KEY, region_id int NOT NULL, amt int);
CREATE INDEX ON nn_orders (region_id);
CREATE TABLE nn_by_region (region text, n bigint NOT NULL);
SELECT delta_join.create_view('nn_by_region', $$
  SELECT r.region, count(*) AS n FROM nn_orders o JOIN nn_regions r ON o.region_id = r.id
  GROUP BY r.region $$, strategy => 'auto');
ALTER TABLE nn_by_region ADD PRIMARY KEY (region);
SELECT delta_join.create_view('nn_by_region', $$
  SELECT r.region, count(*) AS n FROM nn_orders o JOIN nn_regions r ON o.region_id = r.id
  GROUP BY r.region $$, strategy => 'auto');
-- the same over a NOT NULL column: no warning
CREATE TABLE nn_by_code (code text PRIMARY KEY, n bigint NOT NULL);
SELECT delta_join.create_view('nn_by_code', $$
  SELECT r.code, count(*) AS n FROM nn_orders o JOIN nn_regions r ON o.region_id = r.id
  GROUP BY r.code $$, strategy => 'auto');
-- a NOT NULL column of a table an outer join null-extends
CREATE TABLE nn_wide (id int PRIMARY KEY, rid int, code text NOT NULL);
SELECT delta_join.create_view('nn_wide', $$
  SELECT o.id, r.id AS rid, r.code FROM nn_orders o LEFT JOIN nn_regions r ON o.region_id = r.id $$,
  options => '{"retract": true}');
INSERT INTO nn_regions VALUES (1, NULL, 'x');
INSERT INTO nn_orders VALUES (1, 1, 5), (2, 2, 6);
SELECT delta_join.wait();
SELECT target, state FROM delta_join.status WHERE target::text LIKE '%nn\_%' ORDER BY 1;
SELECT * FROM nn_by_code;
SELECT delta_join.drop_view(t) FROM unnest(ARRAY['nn_by_region', 'nn_by_code', 'nn_wide']) t;

-- temporary objects other than tables (rule 1 refuses those): the session
-- that made them drops them when it ends, and the view with them; a
-- concurrent create, which reads the query in another session, refuses the
-- caller's temporary tables too (the name shadow would read bad.shadow there)
CREATE TABLE tmp_src (id int PRIMARY KEY, v int);
CREATE TABLE shadow (id int PRIMARY KEY, v int);
CREATE TEMP TABLE shadow (id int PRIMARY KEY, v int);
CREATE TEMP VIEW tmp_view AS SELECT id, v FROM tmp_src;
CREATE FUNCTION pg_temp.tmp_f(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE DOMAIN pg_temp.tmp_d AS int CHECK (VALUE > 0);
SELECT regexp_replace(t, 'pg_temp_\d+', 'pg_temp_N') FROM try_create('tmp1', 'SELECT id, v FROM tmp_view') t;
SELECT regexp_replace(t, 'pg_temp_\d+', 'pg_temp_N') FROM try_create('tmp2', 'SELECT id, pg_temp.tmp_f(v) AS w FROM tmp_src') t;
SELECT regexp_replace(t, 'pg_temp_\d+', 'pg_temp_N') FROM try_create('tmp3', 'SELECT id, v::pg_temp.tmp_d AS w FROM tmp_src') t;
SELECT regexp_replace(t, 'pg_temp_\d+', 'pg_temp_N') FROM try_create('tmp4', 'SELECT id, v FROM shadow') t;
SELECT delta_join.create_view('tmp5', 'SELECT id, v FROM shadow', concurrently => true);
SELECT count(*) FROM delta_join.views WHERE target::text LIKE 'bad.tmp%';
DROP TABLE shadow;

SET client_min_messages = warning;
DROP SCHEMA bad CASCADE;
RESET client_min_messages;
RESET search_path;
