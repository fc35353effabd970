--
-- Rule 4: a view's query must give the same result each time a row is
-- recomputed (DESIGN.md §3).  Refused: volatile functions, functions of the
-- transaction's time or the session, user-defined stable functions,
-- aggregates whose support functions are not deterministic,
-- order-sensitive aggregates without ORDER BY, system columns and
-- whole-row references.  Allowed: immutable functions, and stable
-- built-ins whose result depends only on settings, which the view pins
-- (82_settings).  No input may crash the analyzer.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA det;
SET search_path = det, public;

CREATE TABLE orders (merchant_id bigint, order_id bigint, amount numeric(18,2), note text,
  placed_at timestamptz, PRIMARY KEY (merchant_id, order_id));
INSERT INTO orders VALUES (1, 1, 10, 'a', '2024-01-01 23:30+00'), (1, 2, 20, 'b', '2024-01-02 00:30+00');

-- explain lists the failures; create_view raises the first
CREATE FUNCTION rule4(q text) RETURNS SETOF text LANGUAGE sql AS $$
  SELECT line FROM delta_join.explain(q) AS line WHERE line ~ 'rule 4' $$;

-- functions of the transaction's time, in any spelling
SELECT * FROM rule4($$ SELECT merchant_id, order_id, now() AS seen FROM orders $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id, current_timestamp AS seen FROM orders $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id FROM orders WHERE placed_at < current_date $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id, localtimestamp AS t, transaction_timestamp() AS u FROM orders $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id, age(placed_at) AS a FROM orders $$);
-- of the session
SELECT * FROM rule4($$ SELECT merchant_id, order_id, current_user AS u, current_setting('work_mem') AS w FROM orders $$);
-- volatile
SELECT * FROM rule4($$ SELECT merchant_id, order_id, clock_timestamp() AS t FROM orders $$);

-- a user-defined stable function may read tables that are not sources
CREATE TABLE rates (cur text PRIMARY KEY, rate numeric);
CREATE FUNCTION to_eur(amount numeric) RETURNS numeric LANGUAGE sql STABLE
  AS $$ SELECT amount * (SELECT rate FROM det.rates WHERE cur = 'EUR') $$;
SELECT delta_join.create_view('eur', $$ SELECT merchant_id, order_id, to_eur(amount) AS eur FROM orders $$);
-- declared immutable (the user's promise), it is accepted
CREATE FUNCTION doubled(amount numeric) RETURNS numeric LANGUAGE sql IMMUTABLE AS $$ SELECT amount * 2 $$;
SELECT delta_join.create_view('doubled', $$ SELECT merchant_id, order_id, doubled(amount) AS d FROM orders $$);

-- a user aggregate whose state function is volatile (or stable) is refused;
-- the aggregate's own volatility says nothing
CREATE FUNCTION noisy_add(s numeric, v numeric) RETURNS numeric LANGUAGE sql VOLATILE
  AS $$ SELECT coalesce(s, 0) + v + random() * 0 $$;
CREATE AGGREGATE noisy_sum(numeric) (SFUNC = noisy_add, STYPE = numeric);
SELECT delta_join.create_view('noisy', $$
  SELECT merchant_id, noisy_sum(amount) AS s FROM orders GROUP BY merchant_id $$);
CREATE FUNCTION calm_add(s numeric, v numeric) RETURNS numeric LANGUAGE sql IMMUTABLE
  AS $$ SELECT coalesce(s, 0) + v $$;
CREATE AGGREGATE calm_sum(numeric) (SFUNC = calm_add, STYPE = numeric);
-- ... and, since nothing says whether its result depends on the order of
-- its input, it needs an ORDER BY that leaves no ties: on its arguments
-- (whose equal values must be the same: not numeric, where 1.0 = 1.00),
-- or on a unique key with the GROUP BY
SELECT * FROM rule4($$ SELECT merchant_id, calm_sum(amount) AS s FROM orders GROUP BY merchant_id $$);
SELECT * FROM rule4($$ SELECT merchant_id, calm_sum(amount ORDER BY note) AS s FROM orders GROUP BY merchant_id $$);
SELECT * FROM rule4($$ SELECT merchant_id, calm_sum(amount ORDER BY amount) AS s FROM orders GROUP BY merchant_id $$);
SELECT delta_join.create_view('calm', $$
  SELECT merchant_id, calm_sum(amount ORDER BY order_id) AS s FROM orders GROUP BY merchant_id $$);

-- order-sensitive aggregates need ORDER BY inside the call
SELECT * FROM rule4($$ SELECT merchant_id, delta_join.first_value(note) AS f FROM orders GROUP BY merchant_id $$);
SELECT * FROM rule4($$ SELECT merchant_id, delta_join.last_value(note) AS l FROM orders GROUP BY merchant_id $$);
SELECT * FROM rule4($$ SELECT merchant_id, string_agg(note, ',') AS s, array_agg(order_id) AS a FROM orders GROUP BY merchant_id $$);
-- with it, or with DISTINCT (which sorts), they are accepted
SELECT * FROM rule4($$ SELECT merchant_id, delta_join.first_value(note ORDER BY order_id) AS f,
  string_agg(DISTINCT note, ',') AS s FROM orders GROUP BY merchant_id $$);
-- the ORDER BY must leave no ties: rows tied on it may come in any order
SELECT * FROM rule4($$ SELECT merchant_id, string_agg(note, ',' ORDER BY placed_at) AS s FROM orders GROUP BY merchant_id $$);
-- ... it does not if it sorts on the arguments, or covers with the GROUP BY
-- a unique key of each table the rows come from
SELECT * FROM rule4($$ SELECT merchant_id, string_agg(note, ',' ORDER BY note) AS s,
  array_agg(amount ORDER BY order_id) AS a FROM orders GROUP BY merchant_id $$);
CREATE TABLE lines (merchant_id bigint, order_id bigint, line int, sku text,
  PRIMARY KEY (merchant_id, order_id, line));
SELECT * FROM rule4($$ SELECT o.merchant_id, string_agg(l.sku, ',' ORDER BY o.order_id) AS skus
  FROM orders o JOIN lines l ON l.merchant_id = o.merchant_id AND l.order_id = o.order_id
  GROUP BY o.merchant_id $$);
SELECT * FROM rule4($$ SELECT o.merchant_id, string_agg(l.sku, ',' ORDER BY o.order_id, l.line) AS skus
  FROM orders o JOIN lines l ON l.merchant_id = o.merchant_id AND l.order_id = o.order_id
  GROUP BY o.merchant_id $$);

-- text input of dates and times reads 'now', 'today', 'tomorrow' ...
SELECT * FROM rule4($$ SELECT merchant_id, order_id FROM orders WHERE placed_at < note::timestamptz $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id, note::date AS d FROM orders $$);
-- the catalogs and the server: regclass input, pg_ functions
SELECT * FROM rule4($$ SELECT merchant_id, order_id, note::regclass AS r FROM orders $$);
SELECT * FROM rule4($$ SELECT merchant_id, order_id, pg_partition_root(order_id::oid) AS r,
  pg_client_encoding() AS e FROM orders $$);
-- pure ones pass
SELECT * FROM rule4($$ SELECT merchant_id, order_id, pg_typeof(note) = 'text'::regtype AS t,
  pg_column_size(note) AS s FROM orders $$);

-- system columns and whole-row references: refused, and never a crash
SELECT * FROM delta_join.explain($$ SELECT merchant_id, order_id FROM orders WHERE ctid <> '(0,0)' $$);
SELECT * FROM delta_join.explain($$ SELECT merchant_id, order_id, xmin AS x FROM orders $$);
SELECT * FROM delta_join.explain($$ SELECT o.merchant_id, o.order_id, o.tableoid AS t FROM orders o
  JOIN orders p ON o.merchant_id = p.merchant_id AND o.order_id = p.order_id WHERE p.ctid = o.ctid $$);
SELECT * FROM delta_join.explain($$ SELECT merchant_id, order_id, o AS whole FROM orders o $$);
SELECT * FROM delta_join.explain($$ SELECT merchant_id, count(*) AS n FROM orders GROUP BY merchant_id HAVING max(ctid) IS NOT NULL $$);
SELECT delta_join.create_view('sys', $$ SELECT merchant_id, order_id FROM orders WHERE ctid <> '(0,0)' $$);
-- ... on every path: the fallback strategies refuse them too
SELECT * FROM delta_join.explain($$ SELECT merchant_id, order_id FROM orders WHERE ctid <> '(0,0)' $$,
  strategy => 'auto');
SELECT * FROM delta_join.explain($$ SELECT DISTINCT merchant_id, xmin AS x FROM orders $$, strategy => 'none');
SELECT * FROM delta_join.explain($$ SELECT DISTINCT o AS whole FROM orders o $$, strategy => 'auto');
SELECT delta_join.create_view('sys', $$ SELECT DISTINCT merchant_id, ctid AS c FROM orders $$,
  strategy => 'auto');

-- stable built-ins that depend only on pinned settings are allowed
SELECT delta_join.create_view('local_days', $$
  SELECT merchant_id, order_id, placed_at::date AS day, to_char(placed_at, 'HH24:MI') AS hhmi,
         placed_at::text AS placed_text
  FROM orders $$);

-- What rule 4 leaves to the plan, accepted with a note: float sums round in
-- the order of addition (a parallel plan of the query adds in another);
-- min(), max(), GROUP BY, DISTINCT and UNION keep one of values that are
-- equal but differ in their text (numeric 1.0 and 1.00, float -0 and 0,
-- bpchar's trailing blanks).  Not where equal values are identical: int,
-- text under a deterministic collation, numeric and char with a typmod
-- (one scale, one length), count(), sums of numeric.
CREATE TABLE loose (id int PRIMARY KEY, g int NOT NULL, f float8, r real, n numeric, n2 numeric(10,2),
  c bpchar, c3 char(3), t text);
CREATE INDEX ON loose (g);
ALTER TABLE loose REPLICA IDENTITY FULL;
SELECT * FROM delta_join.explain('SELECT g, sum(f) AS s, avg(r) AS a, stddev(f) AS d FROM loose GROUP BY g');
SELECT * FROM delta_join.explain('SELECT g, max(n) AS mn, min(c) AS mc, max(f) AS mf FROM loose GROUP BY g');
SELECT * FROM delta_join.explain('SELECT n, count(*) AS k FROM loose GROUP BY n', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT DISTINCT c, g FROM loose', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT n FROM loose UNION SELECT n2 FROM loose', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT g, sum(n) AS s, max(n2) AS m2, min(c3) AS m3, max(t) AS mt, max(g) AS mg, count(f) AS k FROM loose GROUP BY g');
SELECT * FROM delta_join.explain('SELECT DISTINCT n2, c3, t FROM loose', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT n, count(*) AS k FROM loose GROUP BY n HAVING n > 0', strategy => 'none');
-- (grouped by a numeric it does not show: nothing to choose)
SELECT * FROM delta_join.explain('SELECT g, count(*) AS k FROM loose GROUP BY g, n', strategy => 'auto');
-- the same queries create views (the note is explain's only)
SELECT delta_join.create_view('loose_sum', 'SELECT g, sum(f) AS s, avg(r) AS a, stddev(f) AS d FROM loose GROUP BY g');

SELECT target FROM delta_join.views ORDER BY target;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA det CASCADE;
RESET client_min_messages;
RESET search_path;
