--
-- A view is bound once, like a Postgres view (DESIGN.md §5): its query is
-- analyzed at creation and kept, with object identities, in its query view
-- (schema delta_join, owned by the target's owner).  Renames are followed;
-- DROP COLUMN, ALTER COLUMN TYPE, DROP TABLE and DROP FUNCTION of what it
-- uses are refused with core's own errors; nothing created later under a
-- name the query used changes it.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA bind;
SET search_path = bind, public;

CREATE TABLE orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text, price numeric,
  PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES (1, 1, 'apple', 1.5), (1, 2, 'pear', 2.5);
INSERT INTO orders VALUES (1, 1, 100, 10), (1, 2, 101, 20);

-- an immutable function the query calls, resolved through the search_path
CREATE FUNCTION label(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper(t) $$;

SELECT delta_join.create_view('wide', $$
  SELECT o.merchant_id, o.order_id, o.item_id, label(i.item_name) AS item_label, i.price, o.amount
  FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);

-- The query view holds the query, and pg_depend what it uses.
SELECT query_view, runs_as FROM delta_join.views WHERE target = 'bind.wide';
SELECT pg_describe_object(refclassid, refobjid, refobjsubid) AS depends_on
FROM pg_depend
WHERE objid = (SELECT oid FROM pg_rewrite WHERE ev_class = 'delta_join."bind.wide"'::regclass)
  AND refobjid <> 'delta_join."bind.wide"'::regclass
ORDER BY 1;

--
-- 1. Renames are followed: of a table, of columns -- even two columns whose
--    names are swapped.  The view shows its query with today's names and
--    goes on.
--
ALTER TABLE items RENAME TO catalog_items;
ALTER TABLE catalog_items RENAME COLUMN price TO tmp;
ALTER TABLE catalog_items RENAME COLUMN item_name TO price;
ALTER TABLE catalog_items RENAME COLUMN tmp TO item_name;
SELECT query FROM delta_join.views WHERE target = 'bind.wide';
UPDATE catalog_items SET price = 'green apple', item_name = 9.99 WHERE item_id = 1;
SELECT delta_join.wait('bind.wide');
SELECT * FROM wide ORDER BY order_id;

--
-- 2. A table swapped in under the old name is not read: the view reads the
--    table it was bound to.
--
ALTER TABLE orders RENAME TO orders_2025;
CREATE TABLE orders (LIKE orders_2025 INCLUDING ALL);
INSERT INTO orders VALUES (1, 1, 999, 1);
INSERT INTO orders_2025 VALUES (1, 2, 102, 30);
SELECT delta_join.wait('bind.wide');
SELECT order_id FROM wide ORDER BY order_id;

--
-- 3. A function created later in a schema that comes first in the
--    creator's search_path changes nothing: the query calls the function it
--    was bound to.
--
CREATE SCHEMA shadow;
CREATE FUNCTION shadow.label(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'shadowed' $$;
SET search_path = shadow, bind, public;
INSERT INTO orders_2025 VALUES (1, 1, 103, 40);
SELECT delta_join.wait('bind.wide');
SELECT order_id, item_label FROM bind.wide ORDER BY order_id;
SELECT delta_join.refresh('bind.wide');
SELECT DISTINCT item_label FROM bind.wide ORDER BY 1;
SET search_path = bind, public;

--
-- 4. What the query uses cannot be dropped or changed under it: core
--    refuses, as for any view.
--
ALTER TABLE catalog_items DROP COLUMN price;
ALTER TABLE orders_2025 ALTER COLUMN amount TYPE float8;
DROP FUNCTION label(text);
DROP TABLE catalog_items;
-- what it does not use can be
ALTER TABLE orders_2025 ADD COLUMN note text;
ALTER TABLE orders_2025 ALTER COLUMN note TYPE varchar(20);
ALTER TABLE orders_2025 DROP COLUMN note;
SELECT state FROM delta_join.status WHERE target = 'bind.wide';

--
-- 5. DROP ... CASCADE drops the query view with the source: the view goes
--    to error, saying so, and cannot be refreshed; drop_view removes it.
--
DROP TABLE catalog_items CASCADE;
SELECT state, last_error FROM delta_join.status WHERE target = 'bind.wide';
SELECT query_view, query FROM delta_join.views WHERE target = 'bind.wide';
SELECT delta_join.wait('bind.wide', '1s');
SELECT delta_join.refresh('bind.wide');
SELECT delta_join.drop_view('bind.wide');
SELECT count(*) FROM delta_join.views;
-- no query view is left behind
SELECT count(*) FROM pg_class WHERE relnamespace = 'delta_join'::regnamespace AND relkind = 'v'
  AND relname NOT IN ('views', 'status', '_local_status', 'shard_groups', 'distributed_status', 'distributed_views', 'progress');

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SET client_min_messages = warning;
DROP SCHEMA bind CASCADE;
DROP SCHEMA shadow CASCADE;
RESET client_min_messages;
RESET search_path;
