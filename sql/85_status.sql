--
-- Honest state (DESIGN.md §6.6): wait() and refresh() tell the truth about
-- a view -- refresh() fails when it cannot make the view correct, wait()
-- returns false for a view in error and covers chains of views -- and
-- wait() takes any timeout.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA honest;
SET search_path = honest, public;

CREATE TABLE orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text,
  PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES (1, 1, 'apple'), (1, 2, 'pear');
INSERT INTO orders VALUES (1, 1, 100, 10), (1, 2, 101, 20);

--
-- 1. Chains: a view over another view's target.  wait() on either waits
--    for the changes to go all the way through.
--
\set wide 'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
\set per_item 'SELECT merchant_id, item_id, count(*) AS n, sum(amount) AS total FROM order_item_wide GROUP BY merchant_id, item_id'
SELECT delta_join.create_view('order_item_wide', :'wide');
SELECT delta_join.create_view('per_item', :'per_item');
INSERT INTO orders VALUES (1, 1, 102, 5), (1, 2, 103, 7);
UPDATE items SET item_name = 'green apple' WHERE item_id = 1;
SELECT delta_join.wait('honest.per_item');
SELECT * FROM per_item ORDER BY item_id;
SELECT * FROM diff('per_item', 'SELECT merchant_id, item_id, count(*) AS n, sum(amount) AS total
                                 FROM (' || :'wide' || ') w GROUP BY merchant_id, item_id');
INSERT INTO orders VALUES (1, 2, 104, 1);
SELECT delta_join.wait('honest.order_item_wide');
SELECT n FROM per_item WHERE item_id = 2;

--
-- 2. wait() takes any timeout: none (NULL), a huge one, a negative one.
--
SELECT delta_join.wait(NULL, NULL);
SELECT delta_join.wait('honest.per_item', interval '1000000 years');
SELECT delta_join.wait('honest.per_item', interval '-5 minutes') IS NOT NULL AS returns_at_once;
SELECT delta_join.wait('honest.no_such_view');

--
-- 2b. wait() in a REPEATABLE READ or SERIALIZABLE transaction block, whose
--     snapshot predates the call, is refused: it would return true while
--     the rest of the transaction still read the old rows.  Alone, the
--     call is its own transaction, and the next one sees what it waited
--     for.
--
INSERT INTO orders VALUES (1, 1, 106, 3);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT delta_join.wait('honest.order_item_wide');
ROLLBACK;
SET default_transaction_isolation = 'serializable';
SELECT delta_join.wait('honest.order_item_wide');
SELECT amount FROM order_item_wide WHERE order_id = 106;
RESET default_transaction_isolation;

--
-- 3. refresh() fails when it cannot make a view correct, and says why;
--    the view stays in error.
--
-- a target that rejects a row the query produces
ALTER TABLE order_item_wide ADD CONSTRAINT small CHECK (amount < 50);
INSERT INTO orders VALUES (1, 1, 105, 99);
SELECT delta_join.wait('honest.order_item_wide', '10s');
SELECT state, last_error FROM delta_join.status WHERE target = 'honest.order_item_wide';
SELECT delta_join.refresh('honest.order_item_wide');
SELECT state FROM delta_join.status WHERE target = 'honest.order_item_wide';
-- once the cause is gone, it succeeds
DELETE FROM orders WHERE order_id = 105;
SELECT delta_join.refresh('honest.order_item_wide');
SELECT state FROM delta_join.status WHERE target = 'honest.order_item_wide';
-- an owner that lost its rights on a source
CREATE ROLE dj_honest_owner;
GRANT SELECT ON orders, items TO dj_honest_owner;
GRANT USAGE ON SCHEMA honest TO dj_honest_owner;
ALTER TABLE order_item_wide OWNER TO dj_honest_owner;
REVOKE SELECT ON items FROM dj_honest_owner;
SELECT delta_join.refresh('honest.order_item_wide');
-- row-level security on a source: lookups could not apply its policies
GRANT SELECT ON items TO dj_honest_owner;
ALTER TABLE items ENABLE ROW LEVEL SECURITY;
SELECT delta_join.refresh('honest.order_item_wide');
ALTER TABLE items DISABLE ROW LEVEL SECURITY;
SELECT delta_join.refresh('honest.order_item_wide') > 0 AS refreshed;

-- a target another view reads is dropped after that view
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target DESC;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SET client_min_messages = warning;
DROP SCHEMA honest CASCADE;
DROP OWNED BY dj_honest_owner;
DROP ROLE dj_honest_owner;
RESET client_min_messages;
RESET search_path;
