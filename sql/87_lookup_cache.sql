--
-- The lookup cache lives with the view's delta plan, which the worker
-- builds again when a view is created, dropped or refreshed (the database's
-- generation, launcher.c).  A batch reads the views itself, so it may be
-- the first to apply a view whose creation the worker's loop has not
-- looked at yet: the plan it builds is of the new generation already, and
-- must not be dropped (its lookup cache with it) when the loop looks.
--
-- To make that order certain, the worker's periodic look at the catalog
-- (every 10 s) is made to wait for a lock on pg_extension, after it has
-- read the generation, while one transaction creates the view and writes
-- its first row; the batch that follows applies both.  (The worker waits
-- for a lock at most its lock_timeout: the transaction is kept short.)
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA lc;
SET search_path = lc, public;

-- another view, applied once: the worker runs its loop
CREATE TABLE other (id int PRIMARY KEY, v int);
SELECT delta_join.create_view('other_v', 'SELECT o.id, o.v FROM other o');
INSERT INTO other VALUES (1, 1);
SELECT delta_join.wait('other_v', '30s');
CREATE TABLE labels (code text PRIMARY KEY, label text);
CREATE TABLE tagged (tag_id int PRIMARY KEY, code text, n int);
CREATE INDEX tagged_code_idx ON tagged (code);
INSERT INTO labels VALUES ('short', 'short code');
SELECT $$
  SELECT t.tag_id, t.n, l.label FROM tagged t JOIN labels l ON t.code = l.code
$$ AS q \gset

BEGIN;
LOCK TABLE pg_catalog.pg_extension IN ACCESS EXCLUSIVE MODE;
DO $$
BEGIN
  FOR i IN 1..300 LOOP
    EXIT WHEN EXISTS (SELECT FROM pg_locks l JOIN pg_stat_activity a USING (pid)
                      WHERE l.relation = 'pg_catalog.pg_extension'::regclass
                        AND NOT l.granted AND a.backend_type = 'delta_join worker');
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT count(*) AS worker_waits FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE l.relation = 'pg_catalog.pg_extension'::regclass
  AND NOT l.granted AND a.backend_type = 'delta_join worker';
SELECT delta_join.create_view('tagged_labels', :'q', options => '{"cache_enabled": true}');
INSERT INTO tagged VALUES (1, 'short', 10);
COMMIT;
SELECT delta_join.wait('tagged_labels', '30s');
SELECT cache_hits FROM delta_join.status WHERE target = 'lc.tagged_labels';
-- the same code in another row, another transaction: a hit of the cache
INSERT INTO tagged VALUES (2, 'short', 20);
SELECT delta_join.wait('tagged_labels', '30s');
SELECT state, last_error, cache_hits FROM delta_join.status
WHERE target = 'lc.tagged_labels';
SELECT * FROM tagged_labels ORDER BY tag_id;
SELECT * FROM diff('tagged_labels', :'q');

-- Clean up.
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA lc CASCADE;
RESET client_min_messages;
RESET search_path;
