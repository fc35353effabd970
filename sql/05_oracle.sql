--
-- The test helper diff(target, query) of sql/include/setup.sql, which every
-- other file uses to compare a target with its query, shown able to fail.
--
-- diff() counts the rows of the query missing from the target and the
-- extra rows of the target (EXCEPT ALL both ways).  It is also a plan
-- oracle: it runs the query under several plans (dj_plans()), and when
-- they do not all compare alike with the target it warns that the query's
-- result depends on the plan -- a determinism bug, which create_view must
-- refuse, not a target that differs from its query.  The targets here are
-- plain tables holding what one plan returned.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA oracle;
SET search_path = oracle, public;

CREATE TABLE ties (id int PRIMARY KEY, a int, b int);
INSERT INTO ties VALUES (1, 1, 1), (2, 1, 2), (3, 2, 1), (4, 2, 2);
CREATE INDEX ON ties (a, b DESC);
ANALYZE ties;

SELECT label FROM dj_plans();

-- a table that equals the query, under every plan
CREATE TABLE ties_copy AS SELECT a, b FROM ties;
SELECT * FROM diff('ties_copy', 'SELECT a, b FROM ties');
-- one that does not: a row missing, an extra one, a duplicate (a multiset)
UPDATE ties_copy SET b = 3 WHERE a = 1 AND b = 2;
INSERT INTO ties_copy VALUES (2, 2);
SELECT * FROM diff('ties_copy', 'SELECT a, b FROM ties');

-- DISTINCT ON without an ORDER BY that breaks its ties keeps, for each a,
-- the b of whichever row comes first: a sequential scan and a sort give
-- b = 1, the index on (a, b DESC) b = 2.  The table holds what the
-- session's plan returned; other plans return other rows.
\set VERBOSITY terse
CREATE TABLE firsts AS SELECT DISTINCT ON (a) a, b FROM ties;
SELECT * FROM diff('firsts', 'SELECT DISTINCT ON (a) a, b FROM ties');
-- LIMIT after an ORDER BY that leaves ties
CREATE TABLE first_one AS SELECT a, b FROM ties ORDER BY a LIMIT 1;
SELECT * FROM diff('first_one', 'SELECT a, b FROM ties ORDER BY a LIMIT 1');
-- with the ties broken, every plan agrees
SELECT * FROM diff('firsts', 'SELECT DISTINCT ON (a) a, b FROM ties ORDER BY a, b');
\set VERBOSITY default

-- plans_differing(), which oracle_views() runs on the query of every view
-- (each file calls it before dropping its views), compares the plans
-- with each other, without a target
SELECT cardinality(plans_differing('SELECT DISTINCT ON (a) a, b FROM ties')) > 0 AS depends_on_the_plan;
SELECT cardinality(plans_differing('SELECT DISTINCT ON (a) a, b FROM ties ORDER BY a, b')) > 0 AS depends_on_the_plan;

-- diff() leaves the session's settings as they were
SELECT current_setting('enable_seqscan') AS enable_seqscan, current_setting('jit') AS jit,
       current_setting('max_parallel_workers_per_gather') AS max_parallel_workers_per_gather;

SET client_min_messages = warning;
DROP SCHEMA oracle CASCADE;
RESET client_min_messages;
RESET search_path;
