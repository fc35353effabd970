--
-- Live maintenance of delta aggregate views: every group whose rows
-- changed is recomputed from the source; an emptied group is deleted.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA agg;
SET search_path = agg, public;

CREATE TABLE orders (
  merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2), note text,
  PRIMARY KEY (merchant_id, item_id, order_id));
INSERT INTO orders VALUES
  (1, 1, 100, 10.50, 'a'), (1, 1, 101, 20, NULL), (1, 2, 102, 30, 'c'),
  (2, 1, 103, 40, 'd'), (3, 1, 104, 7, 'e');

-- DESIGN.md §1's summary
\set summary 'SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount FROM orders GROUP BY merchant_id'
SELECT delta_join.create_view('merchant_summary', :'summary');
SELECT * FROM delta_join.explain(:'summary');
\d merchant_summary

-- every kind of aggregate Postgres evaluates, in one view
\set every 'SELECT merchant_id, count(*) AS n, count(note) AS n_notes, sum(amount) AS total, avg(amount) AS mean, min(amount) AS lo, max(amount) AS hi, string_agg(note, '','' ORDER BY order_id, item_id) AS notes, array_agg(order_id ORDER BY order_id) AS order_ids, bool_and(amount > 10) AS all_big, bool_or(amount > 35) AS any_huge, count(*) FILTER (WHERE amount >= 20) AS n_20, count(DISTINCT item_id) AS n_items, delta_join.first_value(note ORDER BY order_id, item_id) AS first_note, delta_join.last_value(note ORDER BY order_id, item_id) AS last_note FROM orders GROUP BY merchant_id'
SELECT delta_join.create_view('merchant_every', :'every');
\d merchant_every
SELECT * FROM merchant_every ORDER BY merchant_id;

-- inserts, updates and deletes all propagate
INSERT INTO orders VALUES (1, 3, 105, 5, NULL), (4, 1, 106, 100, 'new merchant');
UPDATE orders SET amount = 50, note = 'changed' WHERE order_id = 102;
DELETE FROM orders WHERE order_id = 100;
SELECT delta_join.wait();
SELECT * FROM merchant_summary ORDER BY merchant_id;
SELECT * FROM merchant_every ORDER BY merchant_id;
SELECT * FROM diff('merchant_summary', :'summary');
SELECT * FROM diff('merchant_every', :'every');

-- a group whose rows are all deleted disappears (-D)
DELETE FROM orders WHERE merchant_id = 3;
SELECT delta_join.wait();
SELECT merchant_id FROM merchant_summary ORDER BY merchant_id;
SELECT merchant_id FROM merchant_every ORDER BY merchant_id;

-- an update that moves a row to another group updates both groups
UPDATE orders SET merchant_id = 2 WHERE order_id = 105;
SELECT delta_join.wait();
SELECT * FROM merchant_summary ORDER BY merchant_id;
SELECT * FROM diff('merchant_every', :'every');

-- the status counts the deleted groups
SELECT state, rows_deleted AS groups_deleted, last_error
FROM delta_join.status WHERE target = 'agg.merchant_summary';

-- TRUNCATE of the source deletes every group (rows inserted after it in
-- the same batch come back)
BEGIN;
TRUNCATE orders;
INSERT INTO orders VALUES (5, 1, 200, 1, 'after truncate');
COMMIT;
SELECT delta_join.wait();
SELECT * FROM merchant_summary ORDER BY merchant_id;
SELECT * FROM diff('merchant_every', :'every');

--
-- NULL group keys: a group column outside the primary key needs REPLICA
-- IDENTITY FULL (so a decoded DELETE names the old group) and an index.
-- NULL forms one group, as in GROUP BY; the target's key is then a unique
-- constraint with NULLS NOT DISTINCT instead of a primary key.
--
CREATE TABLE tickets (ticket_id bigint PRIMARY KEY, queue text, amount int);
CREATE INDEX ON tickets (queue);
ALTER TABLE tickets REPLICA IDENTITY FULL;
INSERT INTO tickets VALUES (1, 'sales', 10), (2, NULL, 20), (3, NULL, 30), (4, 'support', 40);
\set byqueue 'SELECT queue, count(*) AS n, sum(amount) AS total FROM tickets GROUP BY queue'
SELECT delta_join.create_view('tickets_by_queue', :'byqueue');
\d tickets_by_queue
UPDATE tickets SET queue = NULL WHERE ticket_id = 1;       -- leaves 'sales' empty
UPDATE tickets SET queue = 'support' WHERE ticket_id = 2;  -- NULL group shrinks
INSERT INTO tickets VALUES (5, NULL, 50);
SELECT delta_join.wait();
SELECT * FROM tickets_by_queue ORDER BY queue NULLS FIRST;
SELECT * FROM diff('tickets_by_queue', :'byqueue');
DELETE FROM tickets WHERE queue IS NULL;
SELECT delta_join.wait();
SELECT * FROM tickets_by_queue ORDER BY queue NULLS FIRST;

--
-- Group keys that are equal but stored differently (numeric 1.0 and 1.00)
-- form one group, recomputed together.
--
CREATE TABLE readings (id int PRIMARY KEY, level numeric, v int);
CREATE INDEX ON readings (level);
ALTER TABLE readings REPLICA IDENTITY FULL;
INSERT INTO readings VALUES (1, 1.0, 10), (2, 1.00, 20), (3, 2.5, 30);
\set bylevel 'SELECT level, count(*) AS n, sum(v) AS total FROM readings GROUP BY level'
SELECT delta_join.create_view('readings_by_level', :'bylevel');
DELETE FROM readings WHERE id = 1;           -- the group keeps id 2
SELECT delta_join.wait();
SELECT level = 1 AS one, n, total FROM readings_by_level ORDER BY level;
UPDATE readings SET level = 2.50 WHERE id = 2; -- and now joins the other one
INSERT INTO readings VALUES (4, 1.000, 40);  -- group 1 comes back
SELECT delta_join.wait();
SELECT level = 1 AS one, n, total FROM readings_by_level ORDER BY level;
SELECT * FROM diff('readings_by_level', :'bylevel');

--
-- HAVING (accepted with ignore_non_unique_key_filter): a group that stops
-- passing keeps its earlier row; a group that is emptied is still deleted.
--
INSERT INTO orders VALUES (6, 1, 300, 100, NULL), (6, 1, 301, 100, NULL), (7, 1, 302, 500, NULL);
SELECT delta_join.create_view('big_merchants',
  'SELECT merchant_id, sum(amount) AS total FROM orders GROUP BY merchant_id HAVING sum(amount) > 150',
  options => '{"ignore_non_unique_key_filter": true}');
SELECT * FROM big_merchants ORDER BY merchant_id;
UPDATE orders SET amount = 1 WHERE order_id = 300;   -- merchant 6 drops to 101: residual row
DELETE FROM orders WHERE order_id = 302;             -- merchant 7 is emptied: deleted
SELECT delta_join.wait();
SELECT * FROM big_merchants ORDER BY merchant_id;

SELECT target, state, last_error FROM delta_join.status ORDER BY target;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA agg CASCADE;
RESET client_min_messages;
RESET search_path;
