--
-- Rule 4 and the order of rows (row_order.c): whatever reads rows in their
-- order -- LIMIT and OFFSET, DISTINCT ON, window functions, ARRAY(subquery),
-- order-sensitive aggregates -- must not see rows that tie in an order the
-- plan chooses.  It is accepted when its order leaves no ties (it covers a
-- unique key of each table, or the GROUP BY) or when rows that tie cannot
-- be told apart where it matters (what depends on the order is a function
-- of keys whose equal values are the same value: not numeric, where
-- 1.0 = 1.00, nor float, interval, text under a nondeterministic
-- collation).  On every path; the full-recompute path shows it best.
--
-- Every query accepted here is then materialized over data full of ties,
-- changed, and compared with its query under several plans (index scans,
-- sequential scans, sorts instead of hashes, parallel scans, sorts on
-- disk), as text, so that 1.0 and 1.00 count as different.  The queries
-- refused are shown to give different results under those plans.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA ord;
SET search_path = ord, public;

CREATE TABLE scores (id int PRIMARY KEY, g int NOT NULL, x text, name varchar(10),
  n numeric, pos int, u int UNIQUE, r real);
CREATE INDEX ON scores (g, id DESC);
CREATE INDEX ON scores (x, id DESC);
ALTER TABLE scores REPLICA IDENTITY FULL;
INSERT INTO scores
  SELECT i, i % 7, chr(65 + i % 5), 'n' || i % 4, CASE WHEN i % 2 = 0 THEN 1.0 ELSE 1.00 END * (i % 3),
         i % 11, CASE WHEN i % 10 = 0 THEN NULL ELSE i END, i % 3
  FROM generate_series(1, 3000) i;
CREATE TABLE groups (g int PRIMARY KEY, label text);
INSERT INTO groups SELECT g, 'group ' || g FROM generate_series(0, 6) g;
ANALYZE scores, groups;

-- The rule 4 lines of the full-recompute path of a query, or its plan's
-- first line when it takes it
CREATE FUNCTION full_path(q text) RETURNS SETOF text LANGUAGE sql AS $$
  WITH lines AS (SELECT line, n FROM delta_join.explain(q, strategy => 'none') WITH ORDINALITY e(line, n)),
  start AS (SELECT min(n) AS n FROM lines
            WHERE line ~ '^(Not eligible for full recompute|Full Recompute)')
  SELECT line FROM lines, start
  WHERE lines.n >= start.n AND line ~ '^Full Recompute|rule 4' ORDER BY lines.n $$;

-- The plans a query's result is compared under
CREATE TABLE plans (name text PRIMARY KEY, settings text[]);
INSERT INTO plans VALUES
  ('default', '{}'),
  ('index scans', '{enable_seqscan=off,enable_bitmapscan=off}'),
  ('sequential scans', '{enable_indexscan=off,enable_indexonlyscan=off,enable_bitmapscan=off}'),
  ('no hash', '{enable_hashagg=off,enable_hashjoin=off}'),
  ('no sort', '{enable_sort=off,enable_incremental_sort=off}'),
  ('parallel', '{max_parallel_workers_per_gather=4,parallel_setup_cost=0,parallel_tuple_cost=0,min_parallel_table_scan_size=0,min_parallel_index_scan_size=0,parallel_leader_participation=off}'),
  ('sorts on disk', '{work_mem=64kB,enable_hashagg=off}');

-- The result of a query under a plan, as a sorted list of row images
CREATE FUNCTION result_under(q text, plan text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  s text;
  result text;
BEGIN
  FOREACH s IN ARRAY (SELECT settings FROM plans WHERE name = plan) LOOP
    PERFORM set_config(split_part(s, '=', 1), split_part(s, '=', 2), false);
  END LOOP;
  EXECUTE format('SELECT string_agg(r, E''\n'' ORDER BY r COLLATE "C") FROM (SELECT q::text AS r FROM (%s) q) d', q)
    INTO result;
  FOREACH s IN ARRAY (SELECT settings FROM plans WHERE name = plan) LOOP
    EXECUTE format('RESET %I', split_part(s, '=', 1));
  END LOOP;
  RETURN coalesce(result, '');
END $f$;

-- The plans under which a target differs from its query (as text)
CREATE FUNCTION differs_under(target regclass, q text) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce(string_agg(name, ', ' ORDER BY name), 'none') FROM plans
  WHERE result_under(q, name) <> result_under(format('TABLE %s', target), 'default') $$;

-- How many different results a query gives under the plans
CREATE FUNCTION results(q text) RETURNS bigint LANGUAGE sql AS $$
  SELECT count(DISTINCT result_under(q, name)) FROM plans $$;

--
-- 1. LIMIT and OFFSET: the ORDER BY must leave no ties, or the rows that
--    tie must be alike in the output.  FETCH FIRST ... WITH TIES keeps the
--    ties; OFFSET 0 and LIMIT ALL keep every row.
--
SELECT * FROM full_path('SELECT id, x FROM scores LIMIT 5');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x LIMIT 5');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x OFFSET 3');
SELECT * FROM full_path('SELECT n FROM scores ORDER BY n LIMIT 5');
-- u is unique, but NULLs tie
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY u LIMIT 5');
-- only rows that joined satisfy an outer join's ON condition
SELECT * FROM full_path('SELECT s.id, g.label FROM groups g LEFT JOIN scores s ON s.id = g.g ORDER BY s.id LIMIT 5');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x, id LIMIT 5');
SELECT * FROM full_path('SELECT x FROM scores ORDER BY x LIMIT 5');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x FETCH FIRST 5 ROWS WITH TIES');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x OFFSET 0');
SELECT * FROM full_path('SELECT id, x FROM scores ORDER BY x LIMIT ALL');
SELECT * FROM full_path('SELECT s.id, g.label FROM groups g LEFT JOIN scores s ON s.id = g.g ORDER BY g.g, s.id LIMIT 5');
-- a column the WHERE clause fixes counts as sorted on, and so do the
-- columns of a table whose key is sorted on
SELECT * FROM full_path('SELECT id, x FROM scores WHERE u = 3 ORDER BY x LIMIT 5');
SELECT * FROM full_path('SELECT s.id, g.label FROM scores s JOIN groups g USING (g) ORDER BY s.id LIMIT 5');
SELECT * FROM full_path('SELECT g, count(*) AS c FROM scores GROUP BY g ORDER BY g LIMIT 2');
SELECT * FROM full_path('SELECT g, count(*) AS c FROM scores GROUP BY g ORDER BY c LIMIT 2');
SELECT * FROM full_path('(SELECT x FROM scores UNION SELECT label FROM groups) ORDER BY x LIMIT 2');
SELECT * FROM full_path('(SELECT id, x FROM scores UNION ALL SELECT g, label FROM groups) ORDER BY id LIMIT 2');
-- ... in a subquery, a CTE, a scalar subquery
SELECT * FROM full_path('SELECT g, (SELECT s.id FROM scores s WHERE s.g = groups.g LIMIT 1) AS first_id FROM groups');
SELECT * FROM full_path('SELECT g, (SELECT s.id FROM scores s WHERE s.g = groups.g ORDER BY s.x, s.id LIMIT 1) AS first_id FROM groups');
SELECT * FROM full_path('WITH few AS (SELECT id FROM scores ORDER BY pos LIMIT 9) SELECT id FROM few');
SELECT * FROM full_path('SELECT t.id FROM (SELECT id, x FROM scores ORDER BY x LIMIT 9) t');

--
-- 2. DISTINCT ON keeps the first row of each group.
--
SELECT * FROM full_path('SELECT DISTINCT ON (g) g, id FROM scores');
SELECT * FROM full_path('SELECT DISTINCT ON (g) g, id FROM scores ORDER BY g, x');
SELECT * FROM full_path('SELECT DISTINCT ON (g) g, n FROM scores ORDER BY g, n');
SELECT * FROM full_path('SELECT DISTINCT ON (g) g, x FROM scores ORDER BY g, x');
SELECT * FROM full_path('SELECT DISTINCT ON (g) g, id, x FROM scores ORDER BY g, x, id');

--
-- 3. Window functions: row_number, ntile, lag, lead (and first_value,
--    last_value, nth_value, aggregates over a ROWS frame) read places;
--    order-sensitive aggregates and first_value ... read their frame in
--    order; rank, dense_rank, percent_rank, cume_dist and other aggregates
--    over whole peer groups give rows that tie the same value.
--
SELECT * FROM full_path('SELECT id, row_number() OVER (ORDER BY x) AS rn FROM scores');
SELECT * FROM full_path('SELECT id, ntile(3) OVER (PARTITION BY g ORDER BY x) AS t FROM scores');
SELECT * FROM full_path('SELECT id, lead(id) OVER (PARTITION BY g ORDER BY pos) AS nxt FROM scores');
SELECT * FROM full_path('SELECT id, sum(pos) OVER (ORDER BY x ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM scores');
SELECT * FROM full_path('SELECT id, first_value(id) OVER (PARTITION BY g ORDER BY x) AS f FROM scores');
SELECT * FROM full_path('SELECT id, string_agg(x, '''') OVER (PARTITION BY g) AS xs FROM scores');
SELECT * FROM full_path('SELECT id, array_agg(n) OVER (PARTITION BY g ORDER BY n) AS ns FROM scores');
-- two windows that read places: a row's place in one does not follow its place in the other
SELECT * FROM full_path('SELECT g, row_number() OVER (ORDER BY g) AS a, row_number() OVER (ORDER BY g DESC) AS b FROM scores');
SELECT * FROM full_path('SELECT id, row_number() OVER (PARTITION BY g ORDER BY x, id) AS rn FROM scores');
SELECT * FROM full_path('SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x) AS rn FROM scores');
SELECT * FROM full_path('SELECT id, rank() OVER w AS r, dense_rank() OVER w AS d, percent_rank() OVER w AS p, cume_dist() OVER w AS c, sum(pos) OVER w AS s, count(*) OVER (PARTITION BY g) AS n FROM scores WINDOW w AS (PARTITION BY g ORDER BY x)');
SELECT * FROM full_path('SELECT id, string_agg(x, '''') OVER (PARTITION BY g ORDER BY x) AS acc FROM scores');
SELECT * FROM full_path('SELECT id, first_value(x) OVER (PARTITION BY g ORDER BY x) AS f FROM scores');
SELECT * FROM full_path('SELECT id, lag(x) OVER (PARTITION BY g ORDER BY id) AS prev FROM scores');
SELECT * FROM full_path('SELECT id, sum(pos) OVER (ORDER BY x ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS s FROM scores');

--
-- 4. ARRAY(subquery) lists rows in the subquery's order.
--
SELECT * FROM full_path('SELECT g, ARRAY(SELECT s.id FROM scores s WHERE s.g = groups.g) AS ids FROM groups');
SELECT * FROM full_path('SELECT g, ARRAY(SELECT s.id FROM scores s WHERE s.g = groups.g ORDER BY s.x) AS ids FROM groups');
SELECT * FROM full_path('SELECT g, ARRAY(SELECT s.x FROM scores s WHERE s.g = groups.g ORDER BY s.x) AS xs FROM groups');

--
-- 5. Order-sensitive aggregates: sorted on their arguments, of a type
--    whose equal values are the same (text, varchar under it, an int shown
--    as text), or on a unique key with the GROUP BY; DISTINCT keeps one of
--    equal values; ordered-set aggregates pick by place.
--
SELECT * FROM full_path('SELECT g, string_agg(x, '','' ORDER BY x) AS xs FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(name, '','' ORDER BY name) AS names FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(pos::text, '','' ORDER BY pos) AS ps FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, array_agg(DISTINCT x) AS xs, percentile_disc(0.5) WITHIN GROUP (ORDER BY pos) AS p FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(n::text, '','' ORDER BY n) AS ns FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(r::text, '','' ORDER BY r) AS rs FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, array_agg(DISTINCT n) AS ns FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, percentile_disc(0.5) WITHIN GROUP (ORDER BY n) AS p FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(x COLLATE "C", '','' ORDER BY x COLLATE "C") AS xs FROM scores GROUP BY g');
-- (the COLLATE of the sort alone is enough: it changes how values compare,
-- not the values, and under "C" equal values are the same)
SELECT * FROM full_path('SELECT g, string_agg(x, '','' ORDER BY x COLLATE "C") AS xs FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(x, '','' ORDER BY u) AS xs FROM scores GROUP BY g');
-- ties that cannot change the value: percentile_cont over an integer sorts
-- on its cast to float8, which is never -0; a char sorted on and shown as
-- text loses the trailing blanks that are all its equal values differ in
-- (not a real or a numeric, not a char kept as char)
CREATE TABLE pads (id int PRIMARY KEY, g int NOT NULL, c bpchar);
INSERT INTO pads SELECT i, i % 3, (ARRAY['a', 'a ', 'b', 'b  ', 'a   '])[1 + i % 5] FROM generate_series(1, 900) i;
ANALYZE pads;
SELECT * FROM full_path('SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY pos) AS m FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, percentile_cont(ARRAY[0.25, 0.75]) WITHIN GROUP (ORDER BY pos) AS m FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(c::text, '','' ORDER BY c) AS cs FROM pads GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(c, '','' ORDER BY c) AS cs FROM pads GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(c::text || ''|'', '','' ORDER BY c DESC) AS cs FROM pads GROUP BY g');
SELECT * FROM full_path('SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY r) AS m FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY n) AS m FROM scores GROUP BY g');
SELECT * FROM full_path('SELECT g, array_agg(c ORDER BY c) AS cs FROM pads GROUP BY g');
SELECT * FROM full_path('SELECT g, string_agg(c::text || id, '','' ORDER BY c) AS cs FROM pads GROUP BY g');
-- the delta path judges them the same way
SELECT * FROM delta_join.explain('SELECT g, string_agg(name, '','' ORDER BY name) AS names FROM scores GROUP BY g');
SELECT * FROM delta_join.explain('SELECT g, string_agg(n::text, '','' ORDER BY n) AS ns FROM scores GROUP BY g');

--
-- create_view raises the first of them, with its SQLSTATE, detail and hint
--
CREATE FUNCTION try_create(target text, query text) RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  PERFORM delta_join.create_view(target, query, strategy => 'auto');
  RETURN NEXT 'created ' || target;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN NEXT st || ': ' || msg;
  RETURN NEXT 'DETAIL: ' || det;
  RETURN NEXT 'HINT: ' || hnt;
END $f$;
SELECT * FROM try_create('refused', 'SELECT id, x FROM scores LIMIT 5');
SELECT * FROM try_create('refused', 'SELECT id, x FROM scores ORDER BY x LIMIT 5');
SELECT * FROM try_create('refused', 'SELECT DISTINCT ON (g) g, id FROM scores');
SELECT * FROM try_create('refused', 'SELECT DISTINCT ON (g) g, id FROM scores ORDER BY g, x');
SELECT * FROM try_create('refused', 'SELECT id, row_number() OVER (ORDER BY x) AS rn FROM scores');
SELECT * FROM try_create('refused', 'SELECT id, string_agg(x, '''') OVER (PARTITION BY g) AS xs FROM scores');
SELECT * FROM try_create('refused', 'SELECT id, first_value(id) OVER (PARTITION BY g ORDER BY x) AS f FROM scores');
SELECT * FROM try_create('refused', 'SELECT g, ARRAY(SELECT s.id FROM scores s WHERE s.g = groups.g) AS ids FROM groups');
SELECT * FROM try_create('refused', 'SELECT g, ARRAY(SELECT s.id FROM scores s WHERE s.g = groups.g ORDER BY s.x) AS ids FROM groups');
SELECT * FROM try_create('refused', 'SELECT g, string_agg(n::text, '','' ORDER BY n) AS ns FROM scores GROUP BY g');
SELECT * FROM try_create('refused', 'SELECT g, string_agg(x, '','') AS xs FROM scores GROUP BY g');
SELECT * FROM try_create('refused', 'SELECT g, array_agg(DISTINCT n) AS ns FROM scores GROUP BY g');
-- an ordered-set aggregate's WITHIN GROUP takes no tie-breaking column:
-- the hint asks for a sort value whose equal values are the same
SELECT * FROM try_create('refused', 'SELECT g, percentile_disc(0.5) WITHIN GROUP (ORDER BY n) AS p FROM scores GROUP BY g');
SELECT * FROM try_create('refused', 'SELECT id FROM scores TABLESAMPLE SYSTEM (50) WHERE g IN (SELECT g FROM groups TABLESAMPLE BERNOULLI (50))');

--
-- 6. What is accepted is the same under every plan: materialized, changed
--    (ties come and go), and compared with its query under each plan.
--
\set limit_q 'SELECT x FROM scores ORDER BY x LIMIT 700'
\set ties_q 'SELECT id, x FROM scores ORDER BY x FETCH FIRST 10 ROWS WITH TIES'
\set distinct_on_q 'SELECT DISTINCT ON (g) g, id, x FROM scores ORDER BY g, x, id'
\set numbered_q 'SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x) AS rn FROM scores'
\set running_q 'SELECT id, string_agg(x, '''') OVER (PARTITION BY g ORDER BY x) AS acc, first_value(x) OVER (PARTITION BY g ORDER BY x) AS f FROM scores'
\set lists_q 'SELECT g, string_agg(name, '','' ORDER BY name) AS names, string_agg(pos::text, '','' ORDER BY pos) AS ps, string_agg(x, '','' ORDER BY x COLLATE "C") AS xs FROM scores GROUP BY g'
\set alike_q 'SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY pos) AS m, percentile_cont(ARRAY[0.25, 0.75]) WITHIN GROUP (ORDER BY u) AS q FROM scores GROUP BY g'
\set pads_q 'SELECT g, string_agg(c::text, '','' ORDER BY c) AS cs FROM pads GROUP BY g'
\set arrays_q 'SELECT g, ARRAY(SELECT s.x FROM scores s WHERE s.g = groups.g ORDER BY s.x) AS xs, (SELECT s.id FROM scores s WHERE s.g = groups.g ORDER BY s.x, s.id LIMIT 1) AS first_id FROM groups'
SELECT delta_join.create_view('limited', :'limit_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('with_ties', :'ties_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('first_rows', :'distinct_on_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('numbered', :'numbered_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('running', :'running_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('lists', :'lists_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('arrays', :'arrays_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('alike', :'alike_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT delta_join.create_view('pads_list', :'pads_q', strategy => 'none', options => '{"refresh_interval": "10ms"}');
SELECT target, mode FROM delta_join.views ORDER BY target;

INSERT INTO scores
  SELECT i, i % 7, chr(65 + i % 3), 'n' || i % 2, 2.000 * (i % 3), i % 5, i, i % 2
  FROM generate_series(3001, 3600) i;
UPDATE scores SET x = 'A', g = 6 WHERE id % 13 = 0;
DELETE FROM scores WHERE id % 17 = 0;
UPDATE pads SET c = 'b ' WHERE id % 7 = 0;
INSERT INTO pads SELECT i, i % 3, (ARRAY['a  ', 'b'])[1 + i % 2] FROM generate_series(901, 1200) i;
SELECT delta_join.wait();
SELECT differs_under('limited', :'limit_q') AS limited,
       differs_under('with_ties', :'ties_q') AS with_ties,
       differs_under('first_rows', :'distinct_on_q') AS first_rows,
       differs_under('numbered', :'numbered_q') AS numbered;
SELECT differs_under('running', :'running_q') AS running,
       differs_under('lists', :'lists_q') AS lists,
       differs_under('arrays', :'arrays_q') AS arrays;
SELECT differs_under('alike', :'alike_q') AS alike,
       differs_under('pads_list', :'pads_q') AS pads_list;
SELECT target FROM delta_join.status WHERE state <> 'active' OR last_error IS NOT NULL;

-- the comparison sees what a plan changes: the queries refused above give
-- other results under other plans
SELECT results('SELECT id, row_number() OVER (PARTITION BY g ORDER BY x) AS rn FROM scores') > 1 AS row_number_differs,
       results('SELECT DISTINCT ON (g) g, id FROM scores ORDER BY g, x') > 1 AS distinct_on_differs,
       results('SELECT id FROM scores ORDER BY x LIMIT 700') > 1 AS limit_differs,
       results('SELECT g, string_agg(id::text, '','') AS ids FROM scores GROUP BY g') > 1 AS string_agg_differs;

SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA ord CASCADE;
RESET client_min_messages;
RESET search_path;
