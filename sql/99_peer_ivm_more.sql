--
-- The rest of pg_ivm's regression suite (sql/pg_ivm.sql, sql/outer_join.sql,
-- sql/create_immv.sql; 99_peer_ivm replays its semi-joins): its queries, as
-- delta views of every path they take, and its sequences of changes --
-- immediate maintenance, multi-statement transactions, self-joins, CTEs,
-- subqueries in FROM, NULL group keys, outer joins, TRUNCATE, foreign keys
-- that cascade --, each followed by wait() and the comparison of every
-- view with its query.  pg_ivm rolls each case back; here each change
-- commits, and the views see them all, in order.
--
-- Its tables have no primary key: here they get one (id), beside its
-- dropped columns, except nokey, which keeps pg_ivm's shape (full
-- recompute).  Its queries select no key: here they select the ids where a
-- delta view needs them (rule 8), and name their columns where two are
-- alike (pg_ivm gives the names with the target: mv(v1, v2)).
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA ivm2;
SET search_path = ivm2, public;

CREATE TABLE mv_base_a (x int, i int, y int, j int);
CREATE TABLE mv_base_b (x int, i int, y int, k int);
ALTER TABLE mv_base_a DROP COLUMN x, DROP COLUMN y, ADD id serial PRIMARY KEY;
ALTER TABLE mv_base_b DROP COLUMN x, DROP COLUMN y, ADD id serial PRIMARY KEY;
INSERT INTO mv_base_a VALUES (1,10), (2,20), (3,30), (4,40), (5,50);
INSERT INTO mv_base_b VALUES (1,101), (2,102), (3,103), (4,104);
CREATE INDEX ON mv_base_a (i);
CREATE INDEX ON mv_base_b (i);
ALTER TABLE mv_base_a REPLICA IDENTITY FULL;
ALTER TABLE mv_base_b REPLICA IDENTITY FULL;
-- self-joins and multiply-referenced CTEs (pg_ivm's base_t)
CREATE TABLE base_t (id serial PRIMARY KEY, i int, v int);
CREATE INDEX ON base_t (i);
INSERT INTO base_t (i, v) VALUES (1, 10), (2, 20), (3, 30);
-- NULLs, without a key (pg_ivm's base_t as it is)
CREATE TABLE nokey (i int, v int);
INSERT INTO nokey VALUES (1,10), (2, NULL), (NULL, 1), (NULL, 2), (1, 20);
-- outer joins (outer_join.sql's base_r, base_s, base_t)
CREATE TABLE base_r (id serial PRIMARY KEY, i int);
CREATE TABLE base_s (id serial PRIMARY KEY, i int, j int);
CREATE TABLE base_u (id serial PRIMARY KEY, j int);
CREATE INDEX ON base_r (i);
CREATE INDEX ON base_s (i);
CREATE INDEX ON base_s (j);
CREATE INDEX ON base_u (j);
INSERT INTO base_r (i) VALUES (1), (2), (3), (3);
INSERT INTO base_s (i, j) VALUES (2,1), (2,2), (3,1), (4,1), (4,2);
INSERT INTO base_u (j) VALUES (2), (3), (3);
-- foreign keys that cascade
CREATE TABLE ri1 (i int PRIMARY KEY);
CREATE TABLE ri2 (i int PRIMARY KEY REFERENCES ri1(i) ON UPDATE CASCADE ON DELETE CASCADE, v int);
INSERT INTO ri1 VALUES (1),(2),(3);
INSERT INTO ri2 VALUES (1),(2),(3);

-- make(target, query, strategy, options): the view, and the path it takes
-- (a full recompute at most every 10ms, not every second: wait() waits
-- for it)
CREATE TABLE ivm_cases (target text PRIMARY KEY, query text);
CREATE FUNCTION make(target text, query text, strategy text DEFAULT NULL, options jsonb DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM delta_join.create_view('ivm2.' || target, query, strategy => strategy,
                                 options => coalesce(options, '{}') || '{"refresh_interval": "10ms"}');
  INSERT INTO ivm2.ivm_cases VALUES (target, query);
  RETURN (SELECT v.mode FROM delta_join.views v WHERE v.target = 'ivm2.' || make.target);
END $f$;

-- join views
SELECT make('j', 'SELECT a.id AS aid, b.id AS bid, i, j, k FROM mv_base_a a INNER JOIN mv_base_b b USING (i)');
SELECT make('j_r', 'SELECT a.id AS aid, b.id AS bid, i, j, k FROM mv_base_a a INNER JOIN mv_base_b b USING (i)', options => '{"retract": true}');
SELECT make('j_nokey', 'SELECT i, j, k FROM mv_base_a a INNER JOIN mv_base_b b USING (i)', 'auto');
SELECT make('sub_r', 'SELECT aid, bid, i, j, k FROM (SELECT a.id AS aid, b.id AS bid, i, a.j, b.k FROM mv_base_b b INNER JOIN (SELECT * FROM mv_base_a) a USING (i)) tmp', options => '{"retract": true}');
SELECT make('cte_r', 'WITH b AS (SELECT * FROM (SELECT * FROM mv_base_b) b2) SELECT v.aid, v.bid, v.i, v.j FROM (WITH a AS (SELECT * FROM mv_base_a) SELECT a.id AS aid, b.id AS bid, a.i, a.j FROM a, b WHERE a.i = b.i) v', options => '{"retract": true}');
SELECT make('self_r', 'SELECT t1.id AS id1, t2.id AS id2, t1.v AS v1, t2.v AS v2 FROM base_t AS t1 JOIN base_t AS t2 ON t1.i = t2.i', options => '{"retract": true}');
SELECT make('cte_multi_r', 'WITH t AS (SELECT * FROM base_t) SELECT t1.id AS id1, t2.id AS id2, t1.v AS v1, t2.v AS v2 FROM t AS t1 JOIN t AS t2 ON t1.i = t2.i', options => '{"retract": true}');
SELECT make('ri_r', 'SELECT ri1.i AS i1, ri2.i AS i2 FROM ri1 JOIN ri2 USING (i)', options => '{"retract": true}');
-- aggregates, DISTINCT, duplicates
SELECT make('agg', 'SELECT i, SUM(j), COUNT(i), AVG(j) FROM mv_base_a GROUP BY i');
SELECT make('min_max', 'SELECT i, MIN(j), MAX(j) FROM mv_base_a GROUP BY i');
SELECT make('group0', 'SELECT SUM(j), COUNT(j), AVG(j) FROM mv_base_a', 'auto');
SELECT make('min_max0', 'SELECT MIN(j), MAX(j) FROM mv_base_a', 'auto');
SELECT make('dup', 'SELECT j FROM mv_base_a', 'auto');
SELECT make('dist', 'SELECT DISTINCT j FROM mv_base_a', 'auto');
SELECT make('exists_dist', 'SELECT DISTINCT a.i, a.j FROM mv_base_a a WHERE EXISTS (SELECT 1 FROM mv_base_b b WHERE a.i = b.i)', 'auto');
SELECT make('nokey_all', 'SELECT * FROM nokey', 'auto');
SELECT make('nokey_sum', 'SELECT i, sum(v), min(v), max(v) FROM nokey GROUP BY i', 'auto');
-- outer joins: 3-way FULL and FULL, LEFT and LEFT, in both modes
SELECT make('ff', 'SELECT r.id AS rid, s.id AS sid, t.id AS tid, r.i AS r, s.i AS si, s.j AS sj, t.j AS t FROM base_r AS r FULL JOIN base_s AS s ON r.i = s.i FULL JOIN base_u AS t ON s.j = t.j');
SELECT make('ff_r', 'SELECT r.id AS rid, s.id AS sid, t.id AS tid, r.i AS r, s.i AS si, s.j AS sj, t.j AS t FROM base_r AS r FULL JOIN base_s AS s ON r.i = s.i FULL JOIN base_u AS t ON s.j = t.j', options => '{"retract": true}');
SELECT make('ll', 'SELECT r.id AS rid, s.id AS sid, t.id AS tid, r.i AS r, s.i AS si, s.j AS sj, t.j AS t FROM base_r AS r LEFT JOIN base_s AS s ON r.i = s.i LEFT JOIN base_u AS t ON s.j = t.j');
SELECT make('ff_nokey', 'SELECT DISTINCT r.i AS r, s.i AS si, s.j AS sj, t.j AS t FROM base_r AS r FULL JOIN base_s AS s ON r.i = s.i FULL JOIN base_u AS t ON s.j = t.j', 'auto');

-- After each step (under the session's plan; setup.sql's plan oracle runs
-- once, at the end, over every view): do the exact views (every path but a
-- join's upsert mode) equal their queries; do the upsert join views hold
-- every row of their queries, and which of them keep residual rows; and
-- does a null-extended row of an upsert outer join sit beside a joined row
-- of the same source row (a row whose non-null ids are among another's).
CREATE FUNCTION ivm_step(OUT exact_views_exact boolean, OUT upsert_views_complete boolean,
                         OUT residual text, OUT null_extended_beside_joined bigint)
LANGUAGE plpgsql AS $f$
DECLARE
  c record;
  d record;
  upsert boolean;
  n bigint;
BEGIN
  IF NOT delta_join.wait() THEN
    RAISE WARNING 'wait() returned false';
  END IF;
  exact_views_exact := true;
  upsert_views_complete := true;
  null_extended_beside_joined := 0;
  FOR c IN SELECT k.target, k.query, v.kind, v.mode FROM ivm2.ivm_cases k
           JOIN delta_join.views v ON v.target = 'ivm2.' || k.target ORDER BY 1 LOOP
    EXECUTE format($q$
      WITH q AS MATERIALIZED (%s), t AS MATERIALIZED (TABLE ivm2.%I)
      SELECT (SELECT count(*) FROM (TABLE q EXCEPT ALL TABLE t) x) AS missing,
             (SELECT count(*) FROM (TABLE t EXCEPT ALL TABLE q) x) AS extra$q$, c.query, c.target)
      INTO d;
    upsert := (c.kind = 'join' AND c.mode = 'delta');
    IF NOT upsert AND (d.missing, d.extra) <> (0, 0) THEN
      exact_views_exact := false;
      RAISE WARNING '% (%) differs from its query: % missing, % extra', c.target, c.mode, d.missing, d.extra;
    END IF;
    IF upsert AND d.missing <> 0 THEN
      upsert_views_complete := false;
      RAISE WARNING '% lacks % rows of its query', c.target, d.missing;
    END IF;
    IF upsert AND d.extra > 0 THEN
      residual := concat_ws(', ', residual, c.target);
    END IF;
    IF upsert THEN
      EXECUTE format($q$
        WITH r AS (SELECT (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(to_jsonb(row_)) e
                           WHERE e.key LIKE '%%id' AND e.value <> 'null') AS ids FROM ivm2.%I row_)
        SELECT count(*) FROM r a, r b WHERE b.ids @> a.ids AND a.ids <> b.ids$q$, c.target) INTO n;
      null_extended_beside_joined := null_extended_beside_joined + n;
    END IF;
  END LOOP;
END $f$;

SELECT * FROM ivm_step();

-- mv_ivm_1's changes, one transaction each
INSERT INTO mv_base_b VALUES (5,105);
SELECT * FROM ivm_step();
UPDATE mv_base_a SET j = 0 WHERE i = 1;
SELECT * FROM ivm_step();
DELETE FROM mv_base_b WHERE (i,k) = (5,105);
SELECT * FROM ivm_step();
-- its columns renamed to camel style, then written
BEGIN;
ALTER TABLE mv_base_a RENAME i TO "I";
ALTER TABLE mv_base_a RENAME j TO "J";
UPDATE mv_base_a SET "J" = 1 WHERE "I" = 1;
COMMIT;
SELECT target, query FROM delta_join.views WHERE target = 'ivm2.j';
ALTER TABLE mv_base_a RENAME "I" TO i;
ALTER TABLE mv_base_a RENAME "J" TO j;
SELECT * FROM ivm_step();
-- the aggregates' changes
INSERT INTO mv_base_a VALUES (6,20), (2,100);
SELECT * FROM ivm_step();
UPDATE mv_base_a SET j = 200 WHERE (i,j) = (2,100);
DELETE FROM mv_base_a WHERE (i,j) = (2,20);
SELECT * FROM ivm_step();
INSERT INTO mv_base_a VALUES (1,0), (1,0), (2,30), (2,30);
SELECT * FROM ivm_step();
DELETE FROM mv_base_a WHERE (i,j) IN ((1,0), (2,30), (2,200));
SELECT * FROM ivm_step();
INSERT INTO mv_base_a VALUES (1,11), (1,12), (2,21), (2,22), (3,31), (3,32), (4,41), (4,42), (5,51), (5,52);
DELETE FROM mv_base_a WHERE (i,j) IN ((1,10), (2,21), (3,32));
SELECT * FROM ivm_step();
-- EXISTS's changes, then several tables in one statement
INSERT INTO mv_base_a VALUES (1,10), (6,60), (3,30), (3,300);
INSERT INTO mv_base_b VALUES (1,101), (1,111), (2,102), (6,106);
SELECT * FROM ivm_step();
UPDATE mv_base_a SET i = 1 WHERE j = 60;
UPDATE mv_base_b SET i = 10 WHERE k = 101;
UPDATE mv_base_b SET k = 1002 WHERE k = 102;
SELECT * FROM ivm_step();
DELETE FROM mv_base_a WHERE (i,j) = (1,60);
DELETE FROM mv_base_b WHERE i = 2;
SELECT * FROM ivm_step();
WITH
 ai AS (INSERT INTO mv_base_a VALUES (1,11),(2,22) RETURNING 0),
 bi AS (INSERT INTO mv_base_b VALUES (1,111),(3,133) RETURNING 0),
 bd AS (DELETE FROM mv_base_b WHERE i = 4 RETURNING 0)
SELECT;
SELECT * FROM ivm_step();
-- the self-join's: one table changed several times in one transaction,
-- with sub-transactions
INSERT INTO base_t (i, v) VALUES (4,40);
DELETE FROM base_t WHERE i = 1;
UPDATE base_t SET v = v*10 WHERE i=2;
SELECT * FROM ivm_step();
WITH
 ins_t1 AS (INSERT INTO base_t (i, v) VALUES (5,50) RETURNING 1),
 ins_t2 AS (INSERT INTO base_t (i, v) VALUES (6,60) RETURNING 1),
 upd_t AS (UPDATE base_t SET v = v + 100 RETURNING 1),
 dlt_t AS (DELETE FROM base_t WHERE i IN (4,5) RETURNING 1)
SELECT NULL;
BEGIN;
SAVEPOINT p1;
INSERT INTO base_t (i, v) VALUES (7,70);
RELEASE SAVEPOINT p1;
SAVEPOINT p2;
INSERT INTO base_t (i, v) VALUES (8,80);
ROLLBACK TO p2;
INSERT INTO base_t (i, v) VALUES (7,77);
COMMIT;
SELECT * FROM ivm_step();
-- foreign keys: the referencing rows follow the key and go with it
UPDATE ri1 SET i = 10 WHERE i = 1;
DELETE FROM ri1 WHERE i = 2;
SELECT * FROM ivm_step();
SELECT * FROM ri_r ORDER BY i1;
-- NULLs: a NULL group key is one group
UPDATE nokey SET v = v * 10;
SELECT * FROM ivm_step();
DELETE FROM nokey WHERE v = 10;
DELETE FROM nokey WHERE i IS NULL AND v = 20;
SELECT * FROM ivm_step();
SELECT * FROM nokey_sum ORDER BY i;
-- outer joins: inserts and deletes of each table, NULL join keys, join
-- keys changed, several tables in one statement
INSERT INTO base_r (i) VALUES (1),(2),(3),(4),(5);
SELECT * FROM ivm_step();
INSERT INTO base_s (i, j) VALUES (1,3), (2,3);
INSERT INTO base_u (j) VALUES (1),(2),(4);
SELECT * FROM ivm_step();
DELETE FROM base_r WHERE i IN (1, 2);
SELECT * FROM ivm_step();
DELETE FROM base_s WHERE i = 2;
DELETE FROM base_u WHERE j = 3;
SELECT * FROM ivm_step();
INSERT INTO base_s (i, j) VALUES (1, null), (null, 2);
SELECT * FROM ivm_step();
UPDATE base_s SET j = j + 1;
UPDATE base_r SET i = 4 WHERE i = 3;
SELECT * FROM ivm_step();
WITH
 rd AS (DELETE FROM base_r WHERE i = 4 RETURNING 0),
 si AS (INSERT INTO base_s (i, j) VALUES (5, 2) RETURNING 0),
 ud AS (DELETE FROM base_u WHERE j = 2 RETURNING 0)
SELECT;
SELECT * FROM ivm_step();
-- TRUNCATE of each kind of source
TRUNCATE base_s;
SELECT * FROM ivm_step();
TRUNCATE mv_base_b;
TRUNCATE nokey;
SELECT * FROM ivm_step();
TRUNCATE mv_base_a;
SELECT * FROM ivm_step();
SELECT * FROM group0;
SELECT * FROM min_max0;
INSERT INTO mv_base_a VALUES (1,10), (2,20);
INSERT INTO mv_base_b VALUES (1,101), (2,102);
INSERT INTO nokey VALUES (NULL, 5);
SELECT * FROM ivm_step();

-- a view over another view's target (create_immv.sql's mv_in_immv02)
SELECT make('chain_r', 'SELECT a.id AS aid, j.aid AS jaid, j.bid AS jbid, a.j FROM mv_base_a a JOIN j_r j ON j.aid = a.id', options => '{"retract": true}');
UPDATE mv_base_a SET j = 11 WHERE i = 1;
DELETE FROM mv_base_b WHERE i = 2;
SELECT * FROM ivm_step();
SELECT public.oracle_views() AS oracle;

-- The queries pg_ivm refuses that delta_join refuses too, on every path
-- (strategy auto): the SQLSTATE and the rule.  FOR UPDATE and FOR SHARE at
-- any level of the query (a recompute would lock the rows it reads).
CREATE VIEW b_locked AS SELECT id, i FROM mv_base_b FOR KEY SHARE;
CREATE MATERIALIZED VIEW b_mview AS SELECT i, k FROM mv_base_b;
CREATE FUNCTION refusal(query text) RETURNS text LANGUAGE plpgsql AS $f$
DECLARE
  state text;
  message text;
BEGIN
  PERFORM delta_join.create_view('ivm2.refused', query, strategy => 'auto');
  RETURN 'created';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, message = MESSAGE_TEXT;
  RETURN state || ': ' || message;
END $f$;
SELECT refusal('SELECT i, j FROM mv_base_a FOR UPDATE');
SELECT refusal('SELECT * FROM (SELECT i, j FROM mv_base_a FOR UPDATE) AS tmp');
SELECT refusal('WITH w AS (SELECT id, i FROM mv_base_b FOR UPDATE) SELECT a.id, w.id AS wid FROM mv_base_a a JOIN w ON w.i = a.i');
SELECT refusal('SELECT a.id, a.i FROM mv_base_a a WHERE EXISTS (SELECT 1 FROM mv_base_b b WHERE b.i = a.i FOR SHARE)');
SELECT refusal('SELECT a.id, v.id AS vid, a.i FROM mv_base_a a JOIN b_locked v ON v.i = a.i');
SELECT refusal('SELECT a.i, a.j FROM mv_base_a a, b_mview b WHERE a.i = b.i');
SELECT refusal('SELECT i, j, xmin::text AS x_min FROM mv_base_a');
SELECT refusal('SELECT i, j FROM mv_base_a TABLESAMPLE SYSTEM(50)');
SELECT refusal('SELECT i, j FROM mv_base_a WHERE i = random()::int');
SELECT refusal('SELECT i, j FROM mv_base_a LIMIT 10 OFFSET 5');
SELECT refusal('SELECT DISTINCT ON (i) i, j FROM mv_base_a');
SELECT refusal('WITH d AS (DELETE FROM mv_base_a RETURNING NULL) SELECT * FROM mv_base_a');

-- pg_ivm's user-defined type, whose "=" is in a btree operator class but
-- was made without MERGES: not mergejoinable, so it joins nothing on the
-- delta path, and rule 2 names the operator (not "no equality"); auto
-- maintains the join by recompute.
SET client_min_messages = warning;
CREATE TYPE mytype;
CREATE FUNCTION mytype_in(cstring) RETURNS mytype AS 'int4in' LANGUAGE internal STRICT IMMUTABLE;
CREATE FUNCTION mytype_out(mytype) RETURNS cstring AS 'int4out' LANGUAGE internal STRICT IMMUTABLE;
CREATE TYPE mytype (LIKE = int4, INPUT = mytype_in, OUTPUT = mytype_out);
RESET client_min_messages;
CREATE FUNCTION mytype_eq(mytype, mytype) RETURNS bool AS 'int4eq' LANGUAGE internal STRICT IMMUTABLE;
CREATE FUNCTION mytype_lt(mytype, mytype) RETURNS bool AS 'int4lt' LANGUAGE internal STRICT IMMUTABLE;
CREATE FUNCTION mytype_cmp(mytype, mytype) RETURNS integer AS 'btint4cmp' LANGUAGE internal STRICT IMMUTABLE;
CREATE OPERATOR = (leftarg = mytype, rightarg = mytype, procedure = mytype_eq);
CREATE OPERATOR < (leftarg = mytype, rightarg = mytype, procedure = mytype_lt);
CREATE OPERATOR CLASS mytype_ops DEFAULT FOR TYPE mytype USING btree AS
  OPERATOR 1 <, OPERATOR 3 =, FUNCTION 1 mytype_cmp(mytype, mytype);
CREATE TABLE my_k (x mytype PRIMARY KEY, v int);
CREATE TABLE my_r (id int PRIMARY KEY, x mytype);
CREATE INDEX ON my_r (x);
INSERT INTO my_k VALUES ('1', 10), ('2', 20);
INSERT INTO my_r VALUES (1, '1'), (2, '1'), (3, '3');
SELECT * FROM delta_join.explain('SELECT k.x, k.v, r.id FROM my_k k JOIN my_r r ON r.x = k.x') e
  WHERE e LIKE '%rule 2%';
SELECT * FROM delta_join.explain('SELECT k.x, r.id FROM my_k k LEFT JOIN my_r r ON r.x = k.x') e
  WHERE e LIKE '%rule 2%';
SELECT make('my_join', 'SELECT k.x, k.v, r.id FROM my_k k JOIN my_r r ON r.x = k.x', 'auto');
UPDATE my_r SET x = '2' WHERE id = 3;
DELETE FROM my_k WHERE x = '1';
SELECT * FROM ivm_step();
SELECT delta_join.drop_view('ivm2.my_join');
DELETE FROM ivm_cases WHERE target = 'my_join';

SELECT delta_join.drop_view('ivm2.chain_r');
SELECT count(delta_join.drop_view(target)) FROM delta_join.views WHERE target LIKE 'ivm2.%';
SET client_min_messages = warning;
DROP SCHEMA ivm2 CASCADE;
