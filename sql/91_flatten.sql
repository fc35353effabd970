--
-- Flattening (flatten.c): plain Postgres views used as sources,
-- non-recursive CTEs and subqueries in FROM are inlined the way the
-- planner would, when they hold only joins, projections and filters; the
-- flattened query is then judged by the rules.  A view the query reads,
-- replaced, refreshes the delta view.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA flat;
SET search_path = flat, public;

CREATE TABLE users (id bigint PRIMARY KEY, name text, active boolean NOT NULL DEFAULT true);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX ON domains (user_id);
INSERT INTO users VALUES (1, 'ada', true), (2, 'alan', false), (3, 'grace', true);
INSERT INTO domains VALUES (10, 1, 'ada.example'), (11, 2, 'enigma.example');

--
-- 1. A view as a source: read as its query.  Its filter is a WHERE
--    condition of the flattened query (rule 6 applies to it in upsert mode).
--
CREATE VIEW active_users AS SELECT id, name FROM users WHERE active;
\set v 'SELECT u.id AS user_id, u.name, d.id AS domain_id, d.domain_name FROM active_users u JOIN domains d ON d.user_id = u.id'
SELECT * FROM delta_join.explain(:'v');
SELECT delta_join.create_view('via_view', :'v', options => '{"retract": true}');
SELECT * FROM via_view ORDER BY domain_id;
UPDATE users SET active = true WHERE id = 2;
UPDATE users SET active = false WHERE id = 1;
SELECT delta_join.wait('flat.via_view');
SELECT * FROM via_view ORDER BY domain_id;
SELECT * FROM diff('via_view', :'v');
-- the delta view reads the view it was bound to, by OID
SELECT sources FROM delta_join.views WHERE target = 'flat.via_view';

-- the view replaced: the delta view is refreshed in the same transaction
CREATE OR REPLACE VIEW active_users AS SELECT id, upper(name) AS name FROM users WHERE active;
SELECT * FROM via_view ORDER BY domain_id;
SELECT * FROM diff('via_view', :'v');
-- ... unless the new query cannot be maintained: then the change is refused
CREATE OR REPLACE VIEW active_users AS SELECT id, name || now()::text AS name FROM users WHERE active;

-- a security_barrier view is not inlined: its conditions come first
CREATE VIEW guarded_users WITH (security_barrier) AS SELECT id, name FROM users WHERE active;
SELECT * FROM delta_join.explain('SELECT u.id, u.name FROM guarded_users u');
-- (a rule like any other: strategy auto reads it through a full recompute)
SELECT * FROM delta_join.explain('SELECT u.id, u.name FROM guarded_users u', strategy => 'auto');
-- nor a view of more than joins, projections and filters
CREATE VIEW domain_counts AS SELECT user_id, count(*) AS n FROM domains GROUP BY user_id;
SELECT * FROM delta_join.explain('SELECT u.id, u.name, c.n FROM users u JOIN domain_counts c ON c.user_id = u.id');

--
-- 2. A non-recursive CTE, read twice, and a subquery in FROM.
--
\set cte 'WITH d AS (SELECT id, user_id, domain_name FROM domains WHERE domain_name LIKE ''%.example'') SELECT u.id AS user_id, d.id AS domain_id, d.domain_name FROM users u JOIN d ON d.user_id = u.id'
SELECT delta_join.create_view('via_cte', :'cte', options => '{"retract": true}');
INSERT INTO domains VALUES (12, 3, 'cobol.example'), (13, 3, 'cobol.test');
SELECT delta_join.wait('flat.via_cte');
SELECT * FROM via_cte ORDER BY domain_id;
SELECT * FROM diff('via_cte', :'cte');

\set sub 'SELECT x.user_id, x.domain_id, x.label FROM (SELECT u.id AS user_id, d.id AS domain_id, u.name || ''@'' || d.domain_name AS label FROM users u JOIN domains d ON d.user_id = u.id) x'
SELECT * FROM delta_join.explain(:'sub');
SELECT delta_join.create_view('via_subquery', :'sub');
UPDATE users SET name = 'Grace' WHERE id = 3;
SELECT delta_join.wait('flat.via_subquery');
SELECT * FROM via_subquery ORDER BY domain_id;
SELECT * FROM diff('via_subquery', :'sub');

--
-- 3. Under the nullable side of an outer join, a subquery is inlined if
--    its columns go NULL with its row: plain columns and strict
--    expressions (upper(x)), not constants.
--
\set nullable 'SELECT u.id AS user_id, d.id AS domain_id, d.host FROM users u LEFT JOIN (SELECT id, user_id, upper(domain_name) AS host FROM domains) d ON d.user_id = u.id'
SELECT delta_join.create_view('via_nullable', :'nullable');
INSERT INTO users VALUES (4, 'edsger', true);
SELECT delta_join.wait('flat.via_nullable');
SELECT * FROM via_nullable ORDER BY user_id, domain_id;
SELECT * FROM diff('via_nullable', :'nullable');
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, d.kind FROM users u
  LEFT JOIN (SELECT id, user_id, 'web' AS kind FROM domains) d ON d.user_id = u.id $$);

--
-- 4. What stays refused: a recursive CTE, a subquery with LIMIT, LATERAL.
--
SELECT * FROM delta_join.explain($$
  WITH RECURSIVE r AS (SELECT id FROM users UNION ALL SELECT id FROM r WHERE false)
  SELECT id FROM r $$);
SELECT * FROM delta_join.explain('SELECT x.id, x.name FROM (SELECT id, name FROM users LIMIT 2) x');
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u,
  LATERAL (SELECT id FROM domains WHERE domains.user_id = u.id) d $$);

--
-- 5. The view's own rights: a role may read a view without reading its
--    tables; the delta view's target owner needs SELECT on the view, and
--    the view reads its tables as its owner.
--
CREATE ROLE dj_flat_reader;
GRANT USAGE, CREATE ON SCHEMA flat TO dj_flat_reader;
GRANT SELECT ON active_users TO dj_flat_reader;
GRANT SELECT, UPDATE ON users TO dj_flat_reader;
SET ROLE dj_flat_reader;
SELECT delta_join.create_view('flat.reader_view', 'SELECT id, name FROM flat.active_users',
                              options => '{"retract": true}');
SELECT delta_join.create_view('flat.reader_table', 'SELECT id, domain_name FROM flat.domains');
RESET ROLE;
SELECT * FROM reader_view ORDER BY id;
REVOKE SELECT ON active_users FROM dj_flat_reader;
UPDATE users SET name = 'ADA' WHERE id = 1;
SELECT delta_join.wait('flat.reader_view', '5s');
SELECT state, last_error FROM delta_join.status WHERE target = 'flat.reader_view';

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();

--
-- 6. The tables of a view are checked as the view's owner, or as the
--    target's owner for a security_invoker view: a REVOKE puts the delta
--    view in error (on every major: from 16 the checks are
--    RTEPermissionInfos that come along with the inlined view).
--
CREATE ROLE dj_flat_owner;
GRANT USAGE, CREATE ON SCHEMA flat TO dj_flat_owner;
GRANT SELECT ON users TO dj_flat_owner;
SET ROLE dj_flat_owner;
CREATE VIEW owned_users AS SELECT id, name FROM flat.users;
GRANT SELECT ON owned_users TO dj_flat_reader;
RESET ROLE;
CREATE VIEW invoker_domains WITH (security_invoker = true) AS SELECT id, domain_name FROM domains;
GRANT SELECT ON invoker_domains TO dj_flat_reader;
GRANT SELECT, UPDATE ON domains TO dj_flat_reader;
SET ROLE dj_flat_reader;
SELECT delta_join.create_view('flat.reader_owned', 'SELECT id, name FROM flat.owned_users');
SELECT delta_join.create_view('flat.reader_invoker', 'SELECT id, domain_name FROM flat.invoker_domains');
RESET ROLE;
REVOKE SELECT ON users FROM dj_flat_owner;
REVOKE SELECT ON domains FROM dj_flat_reader;
SELECT target, state, last_error FROM delta_join.status
 WHERE target IN ('flat.reader_owned', 'flat.reader_invoker') ORDER BY target;

SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA flat CASCADE;
DROP OWNED BY dj_flat_reader;
DROP ROLE dj_flat_reader;
DROP OWNED BY dj_flat_owner;
DROP ROLE dj_flat_owner;
RESET client_min_messages;
RESET search_path;
