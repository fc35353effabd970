--
-- Lookups into partitioned sources.  A key whose values give the partition
-- key is looked up in the one partition that may hold its rows, found as
-- PostgreSQL routes a new row (hash, list, range, the default partition, a
-- partition partitioned in turn); a key that does not give it -- a level's
-- partition key has a column the lookup does not bind, or binds by another
-- type or operator family than the partition key's -- reads every
-- partition it may be in.
-- Each view is compared with its query after every step, while rows move
-- between partitions and partitions are attached and detached.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA plook;
SET search_path = plook, public;

-- items: by list of merchant, with a default partition; one partition
-- hashed again by item
CREATE TABLE items (merchant_id int, item_id int, name text,
  PRIMARY KEY (merchant_id, item_id)) PARTITION BY LIST (merchant_id);
-- (whose columns are numbered otherwise than its root's, as are those of
-- one of its partitions)
CREATE TABLE items_1 (name text, merchant_id int NOT NULL, item_id int NOT NULL)
  PARTITION BY HASH (item_id);
CREATE TABLE items_1_h0 PARTITION OF items_1 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE items_1_h1 (item_id int NOT NULL, name text, merchant_id int NOT NULL);
ALTER TABLE items_1 ATTACH PARTITION items_1_h1 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE items_1_h2 PARTITION OF items_1 FOR VALUES WITH (MODULUS 3, REMAINDER 2);
ALTER TABLE items ATTACH PARTITION items_1 FOR VALUES IN (1);
CREATE TABLE items_2 PARTITION OF items FOR VALUES IN (2, 3);
CREATE TABLE items_4 (name text, item_id int NOT NULL, merchant_id int NOT NULL);
ALTER TABLE items ATTACH PARTITION items_4 FOR VALUES IN (4);
CREATE TABLE items_other PARTITION OF items DEFAULT;

-- orders: by range of merchant, a default, one range partitioned again by
-- order, which a lookup by merchant and item does not bind (its rows are
-- found in both its partitions)
CREATE TABLE orders (order_id int, merchant_id int, item_id int, amount int,
  PRIMARY KEY (order_id, merchant_id)) PARTITION BY RANGE (merchant_id);
CREATE TABLE orders_low PARTITION OF orders FOR VALUES FROM (MINVALUE) TO (2);
CREATE TABLE orders_mid PARTITION OF orders FOR VALUES FROM (2) TO (4)
  PARTITION BY RANGE (order_id);
CREATE TABLE orders_mid_a PARTITION OF orders_mid FOR VALUES FROM (MINVALUE) TO (100);
CREATE TABLE orders_mid_b PARTITION OF orders_mid FOR VALUES FROM (100) TO (MAXVALUE);
CREATE TABLE orders_rest PARTITION OF orders DEFAULT;
CREATE INDEX ON orders (merchant_id, item_id);

INSERT INTO items SELECT m, i, 'item ' || m || '/' || i
  FROM generate_series(1, 5) m, generate_series(1, 6) i;
INSERT INTO orders SELECT g, 1 + g % 6, 1 + g % 7, g FROM generate_series(1, 200) g;

-- the join both ways: a change of an order looks its item up (list, then
-- hash: two levels routed), a change of an item its orders (range, one
-- level routed, then every partition of orders_mid)
\set wide 'SELECT o.order_id, o.merchant_id, o.item_id, i.name, o.amount FROM orders o JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id'
SELECT delta_join.create_view('wide', :'wide', options => '{"retract": true}');
SELECT mode FROM delta_join.views WHERE target = 'plook.wide';
-- a lookup whose bound value is of another type than the partition key:
-- the partition is not routed, every one read
CREATE TABLE big_orders (order_id bigint PRIMARY KEY, merchant_id bigint, item_id bigint);
CREATE INDEX ON big_orders (merchant_id, item_id);
INSERT INTO big_orders SELECT g, 1 + g % 6, 1 + g % 7 FROM generate_series(1, 50) g;
\set cross 'SELECT b.order_id, i.merchant_id, i.item_id, i.name FROM big_orders b JOIN items i ON i.merchant_id = b.merchant_id AND i.item_id = b.item_id'
SELECT delta_join.create_view('cross_wide', :'cross', options => '{"retract": true}');
-- outer: the items without orders too
\set lefty 'SELECT i.merchant_id, i.item_id, i.name, o.order_id FROM items i LEFT JOIN orders o ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
SELECT delta_join.create_view('lefty', :'lefty', strategy => 'auto');
SELECT delta_join.wait();
SELECT * FROM diff('wide', :'wide');
SELECT * FROM diff('cross_wide', :'cross');
SELECT * FROM diff('lefty', :'lefty');

-- changes of each side, in every partition: renames, rows moved between
-- partitions (by merchant, and within orders_mid by order)
UPDATE items SET name = name || '!' WHERE item_id IN (1, 4);
UPDATE items SET name = 'renamed' WHERE merchant_id = 4;
UPDATE orders SET amount = amount + 1 WHERE order_id % 5 = 0;
UPDATE orders SET merchant_id = 5 WHERE order_id BETWEEN 10 AND 20;
UPDATE orders SET order_id = order_id + 1000 WHERE merchant_id = 3 AND order_id < 100;
UPDATE big_orders SET item_id = item_id + 1 WHERE order_id % 3 = 0;
SELECT delta_join.wait();
SELECT * FROM diff('wide', :'wide');
SELECT * FROM diff('cross_wide', :'cross');
SELECT * FROM diff('lefty', :'lefty');

-- items moved between partitions (to the default one, to a hashed one),
-- an order without an item, deletes
UPDATE items SET merchant_id = 7 WHERE merchant_id = 2 AND item_id = 2;
UPDATE items SET merchant_id = 1, item_id = 7 WHERE merchant_id = 5 AND item_id = 6;
UPDATE items SET item_id = 9 WHERE merchant_id = 1 AND item_id = 3;
INSERT INTO orders VALUES (500, 7, 2, 1), (501, 1, 9, 2), (502, 1, NULL, 3);
DELETE FROM items WHERE merchant_id = 4 AND item_id = 5;
DELETE FROM orders WHERE order_id % 11 = 0;
SELECT delta_join.wait();
SELECT * FROM diff('wide', :'wide');
SELECT * FROM diff('cross_wide', :'cross');
SELECT * FROM diff('lefty', :'lefty');

-- a partition attached (its rows come in) and one detached (its rows go):
-- the DDL guard refreshes the views, and later changes are looked up in
-- the partitions as they are now
CREATE TABLE items_6 (merchant_id int NOT NULL, item_id int NOT NULL, name text);
INSERT INTO items_6 SELECT 6, i, 'six ' || i FROM generate_series(1, 6) i;
-- (the default partition must not hold rows of the new one)
DELETE FROM items_other WHERE merchant_id = 6;
ALTER TABLE items ATTACH PARTITION items_6 FOR VALUES IN (6);
ALTER TABLE items DETACH PARTITION items_2;
SELECT delta_join.wait();
SELECT * FROM diff('wide', :'wide');
SELECT * FROM diff('cross_wide', :'cross');
SELECT * FROM diff('lefty', :'lefty');
INSERT INTO orders VALUES (600, 6, 3, 6), (601, 2, 3, 7);
UPDATE items SET name = name || '?' WHERE merchant_id = 6;
UPDATE items_2 SET name = 'detached' WHERE item_id = 1;
SELECT delta_join.wait();
SELECT * FROM diff('wide', :'wide');
SELECT * FROM diff('cross_wide', :'cross');
SELECT * FROM diff('lefty', :'lefty');
SELECT count(*) FROM wide WHERE merchant_id = 6;

-- a partition key whose operator family orders otherwise than the lookup's
-- index, with the same equality: text_pattern_ops orders bytes, while the
-- column's case-insensitive collation finds 'a' equal to 'A' (in another
-- partition): the lookup reads both partitions
CREATE COLLATION plook_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE pat (t text COLLATE plook_ci PRIMARY KEY, label text)
  PARTITION BY RANGE (t text_pattern_ops);
CREATE TABLE pat_lo PARTITION OF pat FOR VALUES FROM (MINVALUE) TO ('a');
CREATE TABLE pat_hi PARTITION OF pat FOR VALUES FROM ('a') TO (MAXVALUE);
INSERT INTO pat VALUES ('A', 'upper'), ('b', 'lower');
CREATE TABLE pat_ref (id int PRIMARY KEY, t text COLLATE plook_ci);
CREATE INDEX ON pat_ref (t);
\set pat_q 'SELECT r.id, r.t AS rt, p.t AS pt, p.label FROM pat_ref r JOIN pat p ON p.t = r.t'
SELECT delta_join.create_view('pat_wide', :'pat_q', options => '{"retract": true}');
INSERT INTO pat_ref VALUES (1, 'a'), (2, 'B');
SELECT delta_join.wait();
SELECT * FROM pat_wide ORDER BY id;
SELECT * FROM diff('pat_wide', :'pat_q');

SELECT target, state FROM delta_join.views WHERE target::text LIKE 'plook.%' ORDER BY 1;
SELECT delta_join.drop_view(t) FROM unnest(ARRAY['wide', 'cross_wide', 'lefty', 'pat_wide']) t;
RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA plook CASCADE;
RESET client_min_messages;
