--
-- An additive view whose group key's equal values may be spelt apart:
-- numeric 1.0 and 1.00, float8 0 and -0, text under a nondeterministic
-- collation.  The key a group's target row keeps must be the spelling of a
-- row still in the group, as the query's is.  A batch that adds rows may
-- write its own; a batch that removes rows recomputes their groups
-- (apply_additive.c, additive_source): added, the group kept the
-- spelling of the row that left (found by an attack).  diff() compares
-- with =, which holds between spellings: the keys are shown as text.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA asp;
SET search_path = asp, public;
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE rm (id int PRIMARY KEY, g numeric, gc text COLLATE ci, gf float8);
CREATE TABLE ro (id int PRIMARY KEY, mid int NOT NULL, v int);
CREATE INDEX ON ro (mid);
ALTER TABLE rm REPLICA IDENTITY FULL;
ALTER TABLE ro REPLICA IDENTITY FULL;
INSERT INTO rm VALUES (1, 1.0, 'abc', 0), (2, 1.00, 'ABC', '-0'), (3, 2, 'x', 2);
INSERT INTO ro VALUES (1, 1, 10), (3, 3, 1);
\set q_num 'SELECT rm.g, count(*) AS c, sum(ro.v) AS s FROM ro JOIN rm ON rm.id = ro.mid GROUP BY rm.g'
\set q_ci 'SELECT rm.gc, count(*) AS c, sum(ro.v) AS s FROM ro JOIN rm ON rm.id = ro.mid GROUP BY rm.gc'
\set q_f 'SELECT rm.gf, count(*) AS c, sum(ro.v) AS s FROM ro JOIN rm ON rm.id = ro.mid GROUP BY rm.gf'
\set q_int 'SELECT rm.id, count(*) AS c, sum(ro.v) AS s FROM ro JOIN rm ON rm.id = ro.mid GROUP BY rm.id'
SELECT delta_join.create_view('asp.num', :'q_num', strategy => 'auto');
SELECT delta_join.create_view('asp.ci', :'q_ci', strategy => 'auto');
SELECT delta_join.create_view('asp.f', :'q_f', strategy => 'auto');
-- explain() says which batches are recomputed; not for an integer key
SELECT line FROM delta_join.explain(:'q_num', strategy => 'auto') AS line WHERE line LIKE '%spelt%';
SELECT count(*) FROM delta_join.explain(:'q_int', strategy => 'auto') AS line WHERE line LIKE '%spelt%';
-- a row of each spelling in the group, then the first one leaves: the
-- group's one row spells its key 1.00, ABC and -0
INSERT INTO ro VALUES (2, 2, 5);
SELECT delta_join.wait();
SELECT target, mode FROM delta_join.status WHERE target::text LIKE 'asp.%' ORDER BY 1;
DELETE FROM ro WHERE id = 1;
SELECT delta_join.wait();
SELECT g::text, c, s FROM num ORDER BY 1;
SELECT gc, c, s FROM ci ORDER BY 1;
SELECT gf::text, c, s FROM f ORDER BY 1;
-- the row moves to the other merchant: its key is spelt 1.0, abc and 0
UPDATE ro SET mid = 1 WHERE id = 2;
SELECT delta_join.wait();
SELECT g::text, c, s FROM num ORDER BY 1;
SELECT gc, c, s FROM ci ORDER BY 1;
SELECT gf::text, c, s FROM f ORDER BY 1;
-- an update that keeps the group (its batch removes a row image too, so
-- its groups are recomputed): the group keeps the key its rows spell
UPDATE ro SET v = v + 1;
SELECT delta_join.wait();
SELECT g::text, c, s FROM num ORDER BY 1;
SELECT gc, c, s FROM ci ORDER BY 1;
SELECT gf::text, c, s FROM f ORDER BY 1;
SELECT * FROM diff('asp.num', :'q_num');
SELECT * FROM diff('asp.ci', :'q_ci');
SELECT * FROM diff('asp.f', :'q_f');
SELECT delta_join.drop_view('asp.num');
SELECT delta_join.drop_view('asp.ci');
SELECT delta_join.drop_view('asp.f');
DROP SCHEMA asp CASCADE;
