--
-- Retract mode (option retract): exact join views.  The target is its own
-- join state: each row carries the key of every source row it came from,
-- and the target has an index per source key; a dirty key's slice is
-- recomputed from the current source rows and replaced.  Deletes, filter
-- flips and join-key changes are exact, with no replica identity needed
-- beyond the primary key; rule 6 does not apply.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA retract;
SET search_path = retract, public;

CREATE TABLE orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text, PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES (1, 1, 'mug'), (1, 2, 'cup'), (2, 1, 'pot');
INSERT INTO orders VALUES (1, 1, 100, 5), (1, 2, 101, 70), (2, 1, 102, 150), (1, 1, 103, 120);

-- a filter on a column outside the key is fine in retract mode
\set big 'SELECT o.merchant_id, o.item_id, o.order_id, i.item_name, o.amount FROM orders o JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id WHERE o.amount >= 100'
SELECT * FROM delta_join.explain(:'big');
SELECT * FROM delta_join.explain(:'big', options => '{"retract": true}');
SELECT delta_join.create_view('big_orders', :'big', options => '{"retract": true}');
\d big_orders
SELECT target, mode FROM delta_join.views;
SELECT * FROM big_orders ORDER BY order_id;

-- a delete, a filter flip both ways, an item deleted, an item's key moved
DELETE FROM orders WHERE order_id = 103;
UPDATE orders SET amount = 99 WHERE order_id = 102;
UPDATE orders SET amount = 100 WHERE order_id = 101;
DELETE FROM items WHERE merchant_id = 1 AND item_id = 2;
INSERT INTO items VALUES (1, 2, 'tumbler');
UPDATE orders SET item_id = 1, amount = 500 WHERE order_id = 100;
SELECT delta_join.wait('retract.big_orders');
SELECT * FROM big_orders ORDER BY order_id;
SELECT * FROM diff('big_orders', :'big');
UPDATE items SET item_id = 3 WHERE merchant_id = 1 AND item_id = 1;
SELECT delta_join.wait('retract.big_orders');
SELECT * FROM diff('big_orders', :'big');
SELECT rows_deleted > 0 AS deleted_rows FROM delta_join.status WHERE target = 'retract.big_orders';

-- a source truncated: the result is recomputed
TRUNCATE items;
SELECT delta_join.wait('retract.big_orders');
SELECT * FROM diff('big_orders', :'big');
INSERT INTO items VALUES (1, 1, 'mug'), (1, 2, 'cup'), (2, 1, 'pot');
SELECT delta_join.wait('retract.big_orders');
SELECT * FROM diff('big_orders', :'big');
-- both sources in one TRUNCATE
TRUNCATE items, orders;
INSERT INTO items VALUES (1, 1, 'mug');
INSERT INTO orders VALUES (1, 1, 104, 300);
SELECT delta_join.wait('retract.big_orders');
SELECT * FROM big_orders;
SELECT * FROM diff('big_orders', :'big');

-- every source's key must be in the select list (each row carries it)
SELECT * FROM delta_join.explain($$
  SELECT o.merchant_id, o.order_id, i.item_name FROM orders o
  JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id $$,
  options => '{"retract": true}');
-- deleted rows must be found by their key: REPLICA IDENTITY NOTHING is refused
CREATE TABLE tags (id bigint PRIMARY KEY, merchant_id bigint, item_id bigint, tag text);
CREATE INDEX ON tags (merchant_id, item_id);
ALTER TABLE tags REPLICA IDENTITY NOTHING;
SELECT * FROM delta_join.explain($$
  SELECT t.id AS tag_id, t.tag, i.merchant_id, i.item_id FROM tags t
  JOIN items i ON i.merchant_id = t.merchant_id AND i.item_id = t.item_id $$,
  options => '{"retract": true}');
ALTER TABLE tags REPLICA IDENTITY DEFAULT;

--
-- An aggregate in retract mode: a group that stops passing HAVING loses
-- its row, and gets it back when it passes again (in upsert mode it keeps
-- it, so there HAVING needs ignore_non_unique_key_filter; in retract mode
-- it needs nothing).
--
\set having 'SELECT merchant_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY merchant_id HAVING sum(amount) > 100'
SELECT delta_join.create_view('big_merchants', :'having');
SELECT * FROM delta_join.explain(:'having', options => '{"retract": true}');
SELECT delta_join.create_view('big_merchants', :'having', options => '{"retract": true}');
INSERT INTO orders VALUES (2, 1, 105, 200);
SELECT delta_join.wait('retract.big_merchants');
SELECT * FROM big_merchants ORDER BY merchant_id;
UPDATE orders SET amount = 1 WHERE order_id = 104;
SELECT delta_join.wait('retract.big_merchants');
SELECT * FROM big_merchants ORDER BY merchant_id;
SELECT * FROM diff('big_merchants', :'having');
UPDATE orders SET amount = 150 WHERE order_id = 104;
SELECT delta_join.wait('retract.big_merchants');
SELECT * FROM big_merchants ORDER BY merchant_id;
SELECT * FROM diff('big_merchants', :'having');

-- A source whose two key columns the join ties to one column: each has
-- its own output column to find its slice by, so a changed row that joins
-- nothing (k1 11, k2 6) finds no target row; with both in one column it
-- looked for c1 = 6 and deleted the row of (6, 6).  Without a column of
-- its own for k2, retract mode refuses the view (rule 8).
CREATE TABLE nodes (id int PRIMARY KEY, b bigint);
CREATE INDEX ON nodes (b);
CREATE TABLE cells (k1 int, k2 int, a int, PRIMARY KEY (k1, k2));
INSERT INTO nodes VALUES (2, 6);
INSERT INTO cells VALUES (6, 6, 0), (11, 6, 0);
SELECT $$
  SELECT n.id, c.k1, c.k2 FROM nodes n JOIN cells c ON n.b = c.k2 AND n.b = c.k1
$$ AS diag \gset
SELECT delta_join.create_view('diag', :'diag', options => '{"retract": true}');
UPDATE cells SET a = 4 WHERE k1 = 11;
SELECT delta_join.wait('retract.diag');
SELECT * FROM diag ORDER BY id;
SELECT * FROM diff('diag', :'diag');
SELECT * FROM delta_join.explain($$
  SELECT n.id, c.k1 FROM nodes n JOIN cells c ON n.b = c.k2 AND n.b = c.k1 $$,
  options => '{"retract": true}');

-- Many-to-many keys under a FULL JOIN: a changed row replaces its own
-- slice and its partners' null extensions, not the slices of every row
-- its partners are in (all 20 rows of mm_l with k 1, through their 30
-- partners each): with them, one changed row rewrote or compared the 600
-- rows of its key.  The counts say how many rows the change reached.
CREATE TABLE mm_l (id int PRIMARY KEY, k int, v int);
CREATE TABLE mm_r (id int PRIMARY KEY, k int, w int);
CREATE INDEX ON mm_l (k);
CREATE INDEX ON mm_r (k);
ALTER TABLE mm_l REPLICA IDENTITY FULL;
ALTER TABLE mm_r REPLICA IDENTITY FULL;
INSERT INTO mm_l SELECT g, g % 2, 0 FROM generate_series(1, 40) g;
INSERT INTO mm_r SELECT g, g % 2, 0 FROM generate_series(1, 60) g;
INSERT INTO mm_r VALUES (61, 7, 0);
SELECT $$
  SELECT l.id AS lid, r.id AS rid, l.k, l.v, r.w FROM mm_l l FULL JOIN mm_r r ON l.k = r.k
$$ AS mm \gset
SELECT delta_join.create_view('mm', :'mm', options => '{"retract": true}');
\set mm_counts 'SELECT rows_upserted AS upserted, rows_deleted AS deleted, rows_unchanged AS unchanged FROM delta_join.status WHERE target = $$retract.mm$$'
:mm_counts \gset
UPDATE mm_l SET v = 1 WHERE id = 3;
SELECT delta_join.wait('retract.mm');
SELECT c.upserted - :upserted AS upserted, c.deleted - :deleted AS deleted,
       c.unchanged - :unchanged AS unchanged FROM (:mm_counts) c;
SELECT * FROM diff('mm', :'mm');
:mm_counts \gset
-- to the key of mm_r 61 (its null extension goes), then every row of k 0
-- gone (their partners' null extensions come)
UPDATE mm_l SET k = 7 WHERE id = 3;
SELECT delta_join.wait('retract.mm');
SELECT c.upserted - :upserted AS upserted, c.deleted - :deleted AS deleted,
       c.unchanged - :unchanged AS unchanged FROM (:mm_counts) c;
DELETE FROM mm_l WHERE k = 0;
SELECT delta_join.wait('retract.mm');
SELECT * FROM diff('mm', :'mm');
SELECT count(*) AS rows, count(*) FILTER (WHERE lid IS NULL) AS unmatched FROM mm;
-- A changed row of mm_r, the later source: its rows are in the slices of
-- its 19 partners of mm_l, which held 570 rows; it replaces its own 19
-- rows and probes the null-extended row of each partner (none comes), and
-- did not compare the other 551.
:mm_counts \gset
UPDATE mm_r SET w = 1 WHERE id = 5;
SELECT delta_join.wait('retract.mm');
SELECT c.upserted - :upserted AS upserted, c.deleted - :deleted AS deleted,
       c.unchanged - :unchanged AS unchanged FROM (:mm_counts) c;
SELECT * FROM diff('mm', :'mm');
-- and moved to the key of mm_l 3, the only row of k 7: its 19 rows go,
-- "mm_l 3, mm_r 5" comes beside "mm_l 3, mm_r 61"
:mm_counts \gset
UPDATE mm_r SET k = 7 WHERE id = 5;
SELECT delta_join.wait('retract.mm');
SELECT c.upserted - :upserted AS upserted, c.deleted - :deleted AS deleted,
       c.unchanged - :unchanged AS unchanged FROM (:mm_counts) c;
SELECT * FROM diff('mm', :'mm');
SELECT * FROM mm WHERE k = 7 OR rid IN (5, 61) ORDER BY lid, rid;

-- A batch of changes of two sources, the view's work taken in pieces (its
-- max_batch_size: a key at a time).  The rows of the changed q_b rows
-- name q_c 12 as a partner; replacing the rows where q_b is absent of
-- that partner deletes "q_a 4, no q_b, q_c 12, q_d 1" (q_c 12 went in the
-- same transaction).  A later piece, replacing q_c 12's own rows, no
-- longer found q_a 4 as its partner in the target, and "q_a 4" alone
-- never came: the view's work is now one piece, whose partners are all
-- noted before it writes.
CREATE TABLE q_a (id int PRIMARY KEY, k int, k2 int);
CREATE TABLE q_b (id int PRIMARY KEY, k2 int, v int);
CREATE TABLE q_c (id int PRIMARY KEY, k int, k2 int);
CREATE TABLE q_d (id int PRIMARY KEY, k2 int);
CREATE INDEX ON q_a (k);
CREATE INDEX ON q_a (k2);
CREATE INDEX ON q_b (k2);
CREATE INDEX ON q_c (k);
CREATE INDEX ON q_c (k2);
CREATE INDEX ON q_d (k2);
INSERT INTO q_a VALUES (4, 2, NULL), (5, 2, 1);
INSERT INTO q_b VALUES (1, 1, 0);
INSERT INTO q_b SELECT g, 100 + g, 0 FROM generate_series(2, 20) g;
INSERT INTO q_c VALUES (12, 2, 0);
INSERT INTO q_d VALUES (1, 0);
SELECT $$
  SELECT a.id AS aid, b.id AS bid, c.id AS cid, d.id AS did
  FROM q_a a LEFT JOIN q_b b ON a.k2 = b.k2 FULL JOIN q_c c ON c.k = a.k LEFT JOIN q_d d ON d.k2 = c.k2
$$ AS abcd \gset
SELECT delta_join.create_view('abcd', :'abcd', options => '{"retract": true, "max_batch_size": 1}');
SELECT * FROM abcd ORDER BY aid, bid;
BEGIN;
UPDATE q_b SET v = v + 1;
DELETE FROM q_c WHERE id = 12;
COMMIT;
SELECT delta_join.wait('retract.abcd');
SELECT * FROM abcd ORDER BY aid, bid;
SELECT * FROM diff('abcd', :'abcd');

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA retract CASCADE;
RESET client_min_messages;
RESET search_path;
