--
-- Live maintenance of delta join views: changes committed to the sources
-- reach the target through the apply worker; delta_join.wait() returns once
-- everything committed before it is applied.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA live;
SET search_path = live, public;

CREATE TABLE orders (
  merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (
  merchant_id bigint, item_id bigint, item_name text,
  PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES (1, 1, 'apple'), (1, 2, 'pear'), (2, 1, 'plum');
INSERT INTO orders VALUES (1, 1, 100, 10.50), (1, 1, 101, 20), (1, 2, 102, 30), (2, 1, 103, 40);

\set wide 'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount FROM orders AS o JOIN items AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
SELECT delta_join.create_view('order_item_wide', :'wide');

-- inserts on both sides; an order whose item does not exist yet joins
-- nothing until the item arrives
INSERT INTO orders VALUES (1, 2, 104, 99.99), (3, 1, 105, 5);
INSERT INTO items VALUES (3, 1, 'fig');
SELECT delta_join.wait('order_item_wide');
SELECT * FROM order_item_wide ORDER BY merchant_id, order_id;

-- updates on both sides: an item rename fans out to all its orders
UPDATE orders SET amount = amount + 1 WHERE order_id = 100;
UPDATE items SET item_name = 'green apple' WHERE merchant_id = 1 AND item_id = 1;
SELECT delta_join.wait('order_item_wide');
SELECT * FROM order_item_wide ORDER BY merchant_id, order_id;
SELECT * FROM diff('order_item_wide', :'wide');

-- an update that writes the same values changes nothing in the target
SELECT rows_unchanged AS unchanged_before FROM delta_join.status WHERE target = 'live.order_item_wide' \gset
UPDATE items SET item_name = item_name WHERE merchant_id = 2;
SELECT delta_join.wait('order_item_wide');
SELECT rows_unchanged > :unchanged_before AS skipped_noop_update
FROM delta_join.status WHERE target = 'live.order_item_wide';

-- a join key change (order 101 moves to item 2): the primary key of orders
-- contains item_id, so this is a delete plus an insert; the old joined row
-- stays behind as a residual row, the new one appears
UPDATE orders SET item_id = 2 WHERE order_id = 101;
SELECT delta_join.wait('order_item_wide');
SELECT * FROM order_item_wide WHERE order_id = 101 ORDER BY item_id;

-- a delete leaves its result row in place (upsert semantics) ...
DELETE FROM orders WHERE order_id = 103;
SELECT delta_join.wait('order_item_wide');
SELECT * FROM order_item_wide WHERE order_id = 103;
-- ... so the query's rows are all there, plus exactly the residual rows
SELECT * FROM diff('order_item_wide', :'wide');
-- refresh clears residual rows
SELECT delta_join.refresh('order_item_wide');
SELECT * FROM diff('order_item_wide', :'wide');

-- the status of the view counts what happened
SELECT state, changes_seen > 0 AS saw_changes, keys_applied > 0 AS applied_keys,
       rows_upserted > 0 AS upserted, lookups > 0 AS looked_up, last_error
FROM delta_join.status WHERE target = 'live.order_item_wide';

--
-- A filter on a non-key column, accepted with ignore_non_unique_key_filter:
-- a row that stops passing the filter keeps its earlier result row.
--
SELECT delta_join.create_view('big_orders',
  'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
   FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id
   WHERE o.amount >= 50',
  options => '{"ignore_non_unique_key_filter": true}');
SELECT order_id, amount FROM big_orders ORDER BY order_id;
UPDATE orders SET amount = 60 WHERE order_id = 105;   -- starts passing: appears
UPDATE orders SET amount = 1 WHERE order_id = 104;    -- stops passing: residual, old amount
SELECT delta_join.wait('big_orders');
SELECT order_id, amount FROM big_orders ORDER BY order_id;

-- the logical-delete rewrite keeps the flag current instead
SELECT delta_join.create_view('orders_flagged',
  'SELECT o.merchant_id, o.order_id, o.item_id, o.amount,
          CASE WHEN o.amount >= 50 THEN 0 ELSE 1 END AS is_delete
   FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id');
UPDATE orders SET amount = 70 WHERE order_id = 104;
UPDATE orders SET amount = 2 WHERE order_id = 105;
SELECT delta_join.wait('orders_flagged');
SELECT order_id, amount, is_delete FROM orders_flagged ORDER BY order_id;

--
-- 1:N: users and their domains; the result's key is the domain's id
--
CREATE TABLE users (id bigint PRIMARY KEY, firstname text, lastname text);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX ON domains (user_id);
INSERT INTO users VALUES (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing');
INSERT INTO domains VALUES (10, 1, 'ada.example'), (11, 1, 'engine.example'), (20, 2, 'turing.example');
\set ud 'SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name FROM users u JOIN domains d ON u.id = d.user_id'
SELECT delta_join.create_view('user_domains', :'ud');
UPDATE users SET lastname = 'King' WHERE id = 1;            -- fans out to 2 rows
INSERT INTO domains VALUES (12, 1, 'analytical.example');  -- looks up its user
INSERT INTO domains VALUES (30, 3, 'later.example');       -- no user yet
INSERT INTO users VALUES (3, 'Grace', NULL);                -- now it joins
SELECT delta_join.wait('user_domains');
SELECT * FROM user_domains ORDER BY domain_id;
SELECT * FROM diff('user_domains', :'ud');

--
-- A 3-table cascade: a change in the middle table fans out both ways
--
CREATE TABLE merchants (merchant_id bigint PRIMARY KEY, merchant_name text);
INSERT INTO merchants VALUES (1, 'Acme'), (2, 'Globex'), (3, 'Initech');
\set cascade 'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, m.merchant_name FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id JOIN merchants m ON m.merchant_id = i.merchant_id'
SELECT delta_join.create_view('order_merchant_wide', :'cascade');
SELECT * FROM delta_join.explain(:'cascade');
UPDATE items SET item_name = 'pear (ripe)' WHERE merchant_id = 1 AND item_id = 2;  -- middle
UPDATE merchants SET merchant_name = 'Acme Corp' WHERE merchant_id = 1;           -- far end
INSERT INTO orders VALUES (2, 1, 106, 12);                                          -- near end
SELECT delta_join.wait('order_merchant_wide');
SELECT * FROM order_merchant_wide ORDER BY merchant_id, order_id, item_id;
SELECT * FROM diff('order_merchant_wide', :'cascade');

-- wait() for all views at once
INSERT INTO items VALUES (2, 2, 'kiwi');
INSERT INTO orders VALUES (2, 2, 107, 3);
SELECT delta_join.wait();
SELECT * FROM diff('order_merchant_wide', :'cascade');

SELECT target, state, last_error FROM delta_join.status ORDER BY target;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA live CASCADE;
RESET client_min_messages;
RESET search_path;
