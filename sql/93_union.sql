--
-- UNION ALL of delta branches: each branch is its own delta plan writing
-- into one target; the target's key tells the branches apart by a column
-- that is a different constant in each (the tag), or the error names the
-- column to add.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA uni;
SET search_path = uni, public;

CREATE TABLE customers (id bigint PRIMARY KEY, name text);
CREATE TABLE web_orders (id bigint PRIMARY KEY, customer_id bigint, amount int);
CREATE TABLE store_orders (id bigint PRIMARY KEY, customer_id bigint, amount int);
CREATE INDEX ON web_orders (customer_id);
CREATE INDEX ON store_orders (customer_id);
INSERT INTO customers VALUES (1, 'ann'), (2, 'bob');
INSERT INTO web_orders VALUES (1, 1, 10), (2, 2, 20);
INSERT INTO store_orders VALUES (1, 2, 5), (2, 9, 7);

\set all_orders 'SELECT ''web'' AS channel, w.id AS order_id, c.id AS customer_id, c.name, w.amount FROM web_orders w JOIN customers c ON c.id = w.customer_id UNION ALL SELECT ''store'', s.id, c.id, c.name, s.amount FROM store_orders s LEFT JOIN customers c ON c.id = s.customer_id'
SELECT * FROM delta_join.explain(:'all_orders');
SELECT delta_join.create_view('all_orders', :'all_orders');
\d all_orders
SELECT * FROM all_orders ORDER BY channel, order_id;

-- order 1 of each channel: the same order_id, told apart by the channel
UPDATE customers SET name = 'Bob' WHERE id = 2;
INSERT INTO customers VALUES (9, 'zed');
INSERT INTO web_orders VALUES (3, 9, 30);
SELECT delta_join.wait('uni.all_orders');
SELECT * FROM all_orders ORDER BY channel, order_id;
SELECT * FROM diff('all_orders', :'all_orders');

-- retract mode: each branch replaces only its own rows
SELECT delta_join.create_view('all_orders_exact', :'all_orders', options => '{"retract": true}');
DELETE FROM web_orders WHERE id = 1;
DELETE FROM customers WHERE id = 9;
UPDATE store_orders SET customer_id = 1 WHERE id = 1;
SELECT delta_join.wait('uni.all_orders_exact');
SELECT * FROM all_orders_exact ORDER BY channel, order_id;
SELECT * FROM diff('all_orders_exact', :'all_orders');

-- a tag of type float8, in a view made under extra_float_digits = 0 (which
-- the view pins): apply finds each branch's rows by the tag's value, not by
-- its text, which that setting rounds (0.30000000000000004 prints as 0.3)
SET extra_float_digits = 0;
\set float_tags 'SELECT ''0.30000000000000004''::float8 AS channel, w.id AS order_id, w.amount FROM web_orders w UNION ALL SELECT ''1''::float8, s.id, s.amount FROM store_orders s'
SELECT delta_join.create_view('float_tagged', :'float_tags', options => '{"retract": true}');
RESET extra_float_digits;
INSERT INTO web_orders VALUES (4, 1, 40);
DELETE FROM web_orders WHERE id = 2;
SELECT delta_join.wait('uni.float_tagged');
SELECT * FROM float_tagged ORDER BY channel, order_id;
SELECT * FROM diff('float_tagged', :'float_tags');

-- a tag under COLLATE: the parser leaves a collated literal in a branch of
-- type unknown (it gives the UNION ALL's type only to bare literals); the
-- branch takes the column's type, as the planner gives it, and the tag
-- keeps its collation, the target's key column's
\set collated_tags 'SELECT ''web'' COLLATE "C" AS channel, w.id AS order_id, w.amount FROM web_orders w UNION ALL SELECT ''store'', s.id, s.amount FROM store_orders s'
SELECT * FROM delta_join.explain(:'collated_tags');
SELECT delta_join.create_view('collated_tagged', :'collated_tags', options => '{"retract": true}');
SELECT atttypid::regtype, attcollation::regcollation
FROM pg_attribute WHERE attrelid = 'collated_tagged'::regclass AND attname = 'channel';
INSERT INTO store_orders VALUES (5, 1, 50);
DELETE FROM web_orders WHERE id = 4;
SELECT delta_join.wait('uni.collated_tagged');
SELECT * FROM collated_tagged ORDER BY channel, order_id;
SELECT * FROM diff('collated_tagged', :'collated_tags');

-- a source key of another type in one branch than in the result (an
-- integer order id beside a numeric one): the query casts it, while apply
-- finds a branch's rows in the target by its keys as they are -- refused,
-- where apply looks rows up by it (retract mode), instead of reading an
-- integer as a numeric
CREATE TABLE kiosk_orders (id int PRIMARY KEY, amount int);
CREATE TABLE legacy_orders (id numeric PRIMARY KEY, amount int);
INSERT INTO kiosk_orders VALUES (1, 10);
INSERT INTO legacy_orders VALUES (1.0, 20);
\set mixed_keys 'SELECT ''kiosk'' AS channel, k.id, k.amount FROM kiosk_orders k UNION ALL SELECT ''legacy'', l.id, l.amount FROM legacy_orders l'
SELECT delta_join.create_view('mixed_keys_exact', :'mixed_keys', options => '{"retract": true}');
-- (upsert mode finds rows by the target's key only, to which apply casts)
SELECT delta_join.create_view('mixed_keys', :'mixed_keys');
DELETE FROM kiosk_orders;
INSERT INTO kiosk_orders VALUES (2, 30);
SELECT delta_join.wait('uni.mixed_keys');
SELECT * FROM mixed_keys ORDER BY channel, id;

-- branches that cannot be told apart: the error names the column to add
SELECT * FROM delta_join.explain($$
  SELECT w.id AS order_id, w.amount FROM web_orders w
  UNION ALL SELECT s.id, s.amount FROM store_orders s $$);
-- the same constant in both branches does not tell them apart either
SELECT * FROM delta_join.explain($$
  SELECT 'shop' AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 'shop', s.id FROM store_orders s $$);
-- nor do constants that print otherwise but are one value of the column's
-- type, as the target's key compares them: numeric 1.0 and 1.00, an
-- integer 1 beside a numeric 1.0, bpchar 'w' and 'w  '
SELECT * FROM delta_join.explain($$
  SELECT 1.0 AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 1.00, s.id FROM store_orders s $$);
SELECT * FROM delta_join.explain($$
  SELECT 1 AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 1.0, s.id FROM store_orders s $$);
SELECT * FROM delta_join.explain($$
  SELECT 'w'::bpchar AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 'w  '::bpchar, s.id FROM store_orders s $$);
-- nor 'web' and 'WEB' under a case-insensitive collation
CREATE COLLATION uni_ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT * FROM delta_join.explain($$
  SELECT 'web' COLLATE uni_ci AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 'WEB', s.id FROM store_orders s $$);
-- UNION (without ALL) compares rows across branches
SELECT * FROM delta_join.explain($$
  SELECT 'web' AS channel, w.id AS order_id FROM web_orders w
  UNION SELECT 'store', s.id FROM store_orders s $$);
-- each branch follows the rules (the message names the branch)
SELECT * FROM delta_join.explain($$
  SELECT 'web' AS channel, w.id AS order_id FROM web_orders w
  UNION ALL SELECT 'store', s.id FROM store_orders s WHERE s.amount > 1 $$);
-- an aggregate branch
SELECT * FROM delta_join.explain($$
  SELECT 'web' AS channel, w.customer_id AS id, count(*) AS n FROM web_orders w GROUP BY w.customer_id
  UNION ALL SELECT 'store', s.id, 1 FROM store_orders s $$);

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA uni CASCADE;
RESET client_min_messages;
RESET search_path;
