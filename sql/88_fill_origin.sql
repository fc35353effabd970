--
-- A target's fill is not decoded (issue 21): create_view and refresh()
-- mark the rows they write into a target with the replication origin
-- "delta_join fill", which the apply worker's decoding skips, unless
-- something may want them: a view of the target, a publication of it.
-- Seen here through test_decoding's only-local option, which leaves out
-- the changes of any origin.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA fills;
SET search_path = fills, public;

SELECT roname FROM pg_replication_origin WHERE roname = 'delta_join fill';

CREATE TABLE src (id int PRIMARY KEY, v int, pad text);
INSERT INTO src SELECT g, g % 7, repeat('x', g * 100) FROM generate_series(1, 40) g;
SELECT 'probe' FROM pg_create_logical_replication_slot('fills_probe', 'test_decoding', true);

-- the rows of a target's INSERTs decoded: all of them, and those with no
-- origin (only-local)
CREATE FUNCTION fill_rows(target text, OUT all_rows bigint, OUT unmarked bigint)
LANGUAGE sql AS $$
  SELECT count(*) FILTER (WHERE true), count(*) FILTER (WHERE local)
  FROM (SELECT c.data, l.lsn IS NOT NULL AS local
        FROM pg_logical_slot_peek_changes('fills_probe', NULL, NULL) c
        LEFT JOIN pg_logical_slot_peek_changes('fills_probe', NULL, NULL, 'only-local', '1') l
          USING (lsn, xid, data)) d
  WHERE data LIKE 'table fills.' || target || ': INSERT:%'
$$;
CREATE FUNCTION forget() RETURNS void LANGUAGE sql AS $$
  SELECT count(*) FROM pg_logical_slot_get_changes('fills_probe', NULL, NULL) $$;

-- 1. a new target, blocking and concurrently: its 40 rows are marked
SELECT delta_join.create_view('made', 'SELECT id, v, pad FROM src');
SELECT * FROM fill_rows('made');
SELECT delta_join.create_view('made_later', 'SELECT id, v FROM src', concurrently => true);
SELECT * FROM fill_rows('made_later');
SELECT forget();

-- 2. a refresh, and an existing table as target: marked too
SELECT delta_join.refresh('made') > 0 AS refreshed;
SELECT * FROM fill_rows('made');
CREATE TABLE given (id int PRIMARY KEY, v int);
SELECT delta_join.create_view('given', 'SELECT id, v FROM src');
SELECT * FROM fill_rows('given');
SELECT forget();

-- 3. a view reads the target: a refresh's rows are decoded, and reach it
SELECT delta_join.create_view('per_v', 'SELECT id, v + 1 AS w FROM made');
SELECT delta_join.refresh('made') > 0 AS refreshed;
SELECT * FROM fill_rows('made');
SELECT forget();
SELECT delta_join.wait('fills.per_v');
SELECT count(*) AS differ FROM (
  (TABLE per_v EXCEPT ALL SELECT id, v + 1 FROM src)
  UNION ALL (SELECT id, v + 1 FROM src EXCEPT ALL TABLE per_v)) d;
SELECT delta_join.drop_view('per_v');

-- 4. a target in a schema a publication publishes: unmarked
CREATE SCHEMA published;
CREATE PUBLICATION fills_pub FOR TABLES IN SCHEMA published;
SELECT delta_join.create_view('published.made', 'SELECT id, v FROM fills.src');
SELECT count(*) AS all_rows,
       (SELECT count(*) FROM pg_logical_slot_peek_changes('fills_probe', NULL, NULL, 'only-local', '1')
        WHERE data LIKE 'table published.made: INSERT:%') AS unmarked
FROM pg_logical_slot_peek_changes('fills_probe', NULL, NULL)
WHERE data LIKE 'table published.made: INSERT:%';
SELECT forget();
DROP PUBLICATION fills_pub;

-- 5. the marked rows are the target's all the same, and the view goes on
UPDATE src SET v = v + 1 WHERE id <= 5;
SELECT delta_join.wait('fills.made');
SELECT count(*) AS differ FROM (
  (TABLE made EXCEPT ALL SELECT id, v, pad FROM src)
  UNION ALL (SELECT id, v, pad FROM src EXCEPT ALL TABLE made)) d;

SELECT pg_drop_replication_slot('fills_probe');
SELECT delta_join.drop_view('published.made');
SELECT delta_join.drop_view('given');
SELECT delta_join.drop_view('made');
SELECT delta_join.drop_view('made_later');
DROP SCHEMA published CASCADE;
DROP SCHEMA fills CASCADE;
