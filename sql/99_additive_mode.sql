--
-- status.mode says 'keyed recompute (groups through joins, additive)' only
-- for a view the worker keeps by adding: not for one whose target, made
-- by the user, keeps its aggregates in other types than the query's (a
-- count in numeric), which the apply recomputes instead (apply_additive.c,
-- target_types_fit); nor for one with manual_writes, whose target others
-- may write: a group they delete or change is no base to add to, and a
-- change of its rows recomputes it.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA am;
SET search_path = am, public;
CREATE TABLE m (id int PRIMARY KEY, region text NOT NULL);
CREATE TABLE o (id int PRIMARY KEY, mid int NOT NULL, qty int NOT NULL);
CREATE INDEX ON o (mid);
ALTER TABLE m REPLICA IDENTITY FULL;
ALTER TABLE o REPLICA IDENTITY FULL;
INSERT INTO m SELECT g, 'r' || (g % 3) FROM generate_series(1, 9) g;
INSERT INTO o SELECT g, 1 + g % 9, g % 5 FROM generate_series(1, 60) g;
\set q 'SELECT m.region, count(*) AS n, sum(o.qty) AS q FROM o JOIN m ON m.id = o.mid GROUP BY m.region'
-- its own target: additive
SELECT delta_join.create_view('am.own', :'q', strategy => 'auto');
-- a target of the user's whose count and sum are numeric: recomputed
CREATE TABLE typed (region text PRIMARY KEY, n numeric, q numeric);
SELECT delta_join.create_view('am.typed', :'q', strategy => 'auto');
UPDATE o SET qty = qty + 1 WHERE id = 7;
SELECT delta_join.wait();
UPDATE o SET qty = qty + 1 WHERE id = 8;
SELECT delta_join.wait();
SELECT target, mode FROM delta_join.status WHERE target::text LIKE 'am.%' ORDER BY 1;
SELECT * FROM diff('am.own', :'q');
SELECT * FROM diff('am.typed', :'q');
-- manual_writes: explain() says why not, and a group written by hand is
-- recomputed once its rows change
SELECT line FROM delta_join.explain(:'q', strategy => 'auto', options => '{"manual_writes": true}') AS line
  WHERE line LIKE '%additive%';
SELECT delta_join.create_view('am.manual', :'q', strategy => 'auto',
  options => '{"manual_writes": true}');
UPDATE o SET qty = qty + 1 WHERE id = 9;
SELECT delta_join.wait();
DELETE FROM am.manual WHERE region = 'r0';
UPDATE am.manual SET n = 0, q = 0 WHERE region = 'r1';
INSERT INTO o VALUES (101, 3, 1), (102, 1, 1);
SELECT delta_join.wait();
SELECT target, mode FROM delta_join.status WHERE target = 'am.manual';
SELECT * FROM diff('am.manual', :'q');
SELECT delta_join.drop_view('am.own');
SELECT delta_join.drop_view('am.typed');
SELECT delta_join.drop_view('am.manual');
DROP SCHEMA am CASCADE;
