--
-- Who a view runs as (DESIGN.md §5, §6.7): a view is backfilled, refreshed
-- and applied as the owner of its target, as a security-restricted
-- operation with search_path = pg_catalog, pg_temp; the query view that
-- holds its query belongs to that owner too.  No code an ordinary role
-- controls ever runs with more rights than its own.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE ROLE dj_alice;
CREATE ROLE dj_mallory;
CREATE ROLE dj_bob;
CREATE SCHEMA roles;
GRANT USAGE, CREATE ON SCHEMA roles TO dj_alice, dj_mallory, dj_bob;
GRANT CREATE ON SCHEMA public TO dj_mallory;

CREATE TABLE roles.orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE roles.items (merchant_id bigint, item_id bigint, item_name text,
  PRIMARY KEY (merchant_id, item_id));
INSERT INTO roles.items VALUES (1, 1, 'apple'), (1, 2, 'pear');
INSERT INTO roles.orders VALUES (1, 1, 100, 10), (1, 2, 101, 20);
GRANT SELECT ON roles.orders, roles.items TO dj_alice;
CREATE FUNCTION roles.shout(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper(t) $$;
\set alice_query 'SELECT o.merchant_id, o.order_id, o.item_id, shout(i.item_name) AS name FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'

--
-- 1. An ordinary role creates a view over tables it may read: the target
--    and the query view are its own, and the view runs as it.  Filling the
--    target locks the sources in SHARE mode, which keeps their writers
--    waiting: that takes the right LOCK TABLE ... IN SHARE MODE takes.
--
--    explain() checks the same rights of its caller (who would own a new
--    target), and reports what is missing as create_view words it: a query
--    is not eligible for a role create_view would refuse.
--
SET ROLE dj_alice;
SET search_path = public, roles;
SELECT * FROM delta_join.explain(:'alice_query');
SELECT delta_join.create_view('roles.alice_wide', :'alice_query');
RESET ROLE;
GRANT UPDATE ON roles.orders, roles.items TO dj_alice;
SET ROLE dj_alice;
SELECT * FROM delta_join.explain(:'alice_query');
SELECT delta_join.create_view('roles.alice_wide', :'alice_query');
RESET search_path;
RESET ROLE;
-- a role that may not read a source, or a column the query reads, at any
-- level of the query and on every path
GRANT UPDATE ON roles.orders, roles.items TO dj_bob;
GRANT SELECT (merchant_id, item_id) ON roles.items TO dj_bob;
SET ROLE dj_bob;
SET search_path = public, roles;
SELECT * FROM delta_join.explain(:'alice_query');
SELECT delta_join.create_view('roles.bob_wide', :'alice_query');
RESET ROLE;
GRANT SELECT ON roles.orders TO dj_bob;
SET ROLE dj_bob;
SELECT * FROM delta_join.explain(:'alice_query', strategy => 'auto');
SELECT delta_join.create_view('roles.bob_wide', :'alice_query', strategy => 'auto');
SELECT * FROM delta_join.explain('SELECT o.merchant_id, o.order_id, o.item_id FROM orders o JOIN items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id');
SELECT * FROM delta_join.explain('SELECT DISTINCT o.merchant_id FROM orders o WHERE o.item_id IN (SELECT item_id FROM items WHERE item_name <> ''pear'')', strategy => 'auto');
SELECT delta_join.create_view('roles.bob_some', 'SELECT DISTINCT o.merchant_id FROM orders o WHERE o.item_id IN (SELECT item_id FROM items WHERE item_name <> ''pear'')', strategy => 'auto');
SELECT * FROM delta_join.explain('WITH n AS (SELECT merchant_id, item_id, item_name FROM items) SELECT merchant_id, count(*) AS n FROM n GROUP BY merchant_id', strategy => 'auto');
RESET ROLE;
-- a view the role may read whose owner may not read its table: the owner
-- is the role named
CREATE VIEW roles.mallorys_items AS SELECT merchant_id, item_id, item_name FROM roles.items;
ALTER VIEW roles.mallorys_items OWNER TO dj_mallory;
GRANT SELECT ON roles.mallorys_items TO dj_bob;
SET ROLE dj_bob;
SELECT * FROM delta_join.explain('SELECT merchant_id, item_id, item_name FROM mallorys_items');
SELECT delta_join.create_view('roles.bob_items', 'SELECT merchant_id, item_id, item_name FROM mallorys_items');
RESET search_path;
RESET ROLE;
DROP VIEW roles.mallorys_items;
REVOKE ALL ON roles.orders, roles.items FROM dj_bob;
SELECT target, runs_as FROM delta_join.views WHERE target = 'roles.alice_wide';
SELECT relowner::regrole FROM pg_class WHERE oid = 'delta_join."roles.alice_wide"'::regclass;
-- nobody else may read the query view (it would read the sources as alice)
SET ROLE dj_mallory;
SELECT * FROM delta_join."roles.alice_wide";
-- nor drop or refresh alice's view
SELECT delta_join.drop_view('roles.alice_wide');
SELECT delta_join.refresh('roles.alice_wide');
RESET ROLE;

--
-- 2. A function created later in a schema of alice's search_path, to
--    shadow the one the query calls, is never run: the query is bound.
--
SET ROLE dj_mallory;
CREATE FUNCTION public.shout(t text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  ALTER ROLE dj_mallory SUPERUSER;
  RETURN 'pwned';
END $$;
RESET ROLE;
INSERT INTO roles.items VALUES (1, 3, 'fig');
INSERT INTO roles.orders VALUES (1, 3, 102, 5);
SELECT delta_join.wait('roles.alice_wide');
SELECT * FROM roles.alice_wide ORDER BY order_id;
SELECT rolsuper FROM pg_roles WHERE rolname = 'dj_mallory';

--
-- 3. A superuser's view whose target is given to another role runs as that
--    role from then on: a trigger the new owner puts on the target runs
--    with the new owner's rights, not the creator's.
--
SELECT delta_join.create_view('roles.admin_wide', $$
  SELECT o.merchant_id, o.order_id, o.item_id, i.item_name
  FROM roles.orders o JOIN roles.items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);
GRANT SELECT ON roles.orders, roles.items TO dj_mallory;
ALTER TABLE roles.admin_wide OWNER TO dj_mallory;
SELECT target, runs_as FROM delta_join.views WHERE target = 'roles.admin_wide';
SET ROLE dj_mallory;
CREATE FUNCTION roles.escalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  ALTER ROLE dj_mallory SUPERUSER;
  RETURN NEW;
END $$;
CREATE TRIGGER escalate AFTER INSERT ON roles.admin_wide FOR EACH ROW EXECUTE FUNCTION roles.escalate();
RESET ROLE;
INSERT INTO roles.orders VALUES (1, 1, 103, 1);
SELECT delta_join.wait('roles.admin_wide', '10s');
-- (the refusal of ALTER ROLE, as 15 and as 16 and later word it)
SELECT state, last_error IN ('must be superuser to alter superuser roles or change superuser attribute',
                             'permission denied to alter role') AS alter_role_refused
  FROM delta_join.status WHERE target = 'roles.admin_wide';
SELECT rolsuper FROM pg_roles WHERE rolname = 'dj_mallory';

--
-- 4. The owner of a source may change it even if that breaks another
--    role's view: the view goes into error rather than vetoing the owner.
--    The error may quote rows, so only the view's owner reads it.
--
CREATE TABLE roles.prices (item_id bigint PRIMARY KEY, price numeric);
ALTER TABLE roles.prices OWNER TO dj_bob;
INSERT INTO roles.prices VALUES (1, 9.5);
SET ROLE dj_bob;
GRANT SELECT, UPDATE ON roles.prices TO dj_alice;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_prices', 'SELECT item_id, price FROM roles.prices');
SET ROLE dj_bob;
ALTER TABLE roles.prices SET UNLOGGED;
SELECT target, state, last_error FROM delta_join.status WHERE target = 'roles.alice_prices';
SELECT last_error FROM delta_join.view_catalog;
SET ROLE dj_alice;
SELECT target, state, last_error FROM delta_join.status WHERE target = 'roles.alice_prices';
RESET ROLE;
-- but the owner of the view's target is held back, as always
ALTER TABLE roles.prices SET LOGGED;
SET ROLE dj_alice;
SELECT delta_join.refresh('roles.alice_prices');
RESET ROLE;
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
ALTER TABLE roles.prices OWNER TO dj_alice;
SET ROLE dj_alice;
ALTER TABLE roles.prices SET UNLOGGED;
SELECT delta_join.drop_view('roles.alice_prices');
RESET ROLE;

--
-- 5. Another role's function is refused in a view's query: it would run
--    with the view owner's rights at every change, whatever its owner made
--    of it since.  Functions of superusers (extensions, built-ins) are fine.
--
SET ROLE dj_bob;
CREATE FUNCTION roles.bobs_norm(t text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT lower(t) $$;
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_norm', $$
  SELECT o.merchant_id, o.order_id, o.item_id, roles.bobs_norm(i.item_name) AS name
  FROM roles.orders o JOIN roles.items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);
RESET ROLE;
-- The same for code a domain runs: a value coerced to a domain (in the
-- query, or on its way into a target column of that type) runs the
-- domain's CHECK constraints.  Another role's domain, whose owner may add
-- a constraint at any time, is refused, and so is a domain of the owner's
-- whose constraint calls another role's function; a domain of the
-- owner's own calling built-ins is fine.
SET ROLE dj_bob;
CREATE DOMAIN roles.bobs_name AS text CHECK (VALUE <> '');
CREATE FUNCTION roles.bobs_check(t text) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT t <> '' $$;
RESET ROLE;
SET ROLE dj_alice;
CREATE DOMAIN roles.alices_name AS text CHECK (roles.bobs_check(VALUE));
CREATE DOMAIN roles.alices_own_name AS text CHECK (VALUE <> '');
CREATE DOMAIN roles.alices_bobs_name AS roles.bobs_name;
\set dom_query 'SELECT o.merchant_id, o.order_id, o.item_id, i.item_name::roles.%s AS name FROM roles.orders o JOIN roles.items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id'
SELECT delta_join.create_view('roles.alice_dom', format(:'dom_query', 'bobs_name'));
SELECT delta_join.create_view('roles.alice_dom', format(:'dom_query', 'alices_name'));
SELECT delta_join.create_view('roles.alice_dom', format(:'dom_query', 'alices_bobs_name'));
CREATE TABLE roles.alice_dom (merchant_id bigint, order_id bigint, item_id bigint, name roles.bobs_name,
  PRIMARY KEY (merchant_id, order_id, item_id));
SELECT delta_join.create_view('roles.alice_dom', replace(format(:'dom_query', 'alices_own_name'), '::roles.alices_own_name', ''));
DROP TABLE roles.alice_dom;
SELECT delta_join.create_view('roles.alice_dom', format(:'dom_query', 'alices_own_name'));
SELECT delta_join.drop_view('roles.alice_dom', drop_table => true);
DROP DOMAIN roles.alices_name, roles.alices_own_name, roles.alices_bobs_name;
RESET ROLE;
-- An operator runs more than its function: the planner puts its negator in
-- its place under NOT, and its estimators call its commutator's function
-- on the statistics; its owner may change those at any time.  bob's
-- operators whose function is a built-in are refused as well, and so is
-- a range type whose subtype_diff (called by the planner's estimates) is
-- bob's.
SET ROLE dj_bob;
CREATE FUNCTION roles.bobs_ne(bigint, bigint) RETURNS boolean LANGUAGE sql IMMUTABLE AS $$ SELECT $1 <> $2 $$;
CREATE OPERATOR roles.!== (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = roles.bobs_ne);
CREATE OPERATOR roles.=== (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = int8eq,
  NEGATOR = OPERATOR(roles.!==));
CREATE FUNCTION roles.bobs_diff(bigint, bigint) RETURNS float8 LANGUAGE sql IMMUTABLE AS $$ SELECT ($1 - $2)::float8 $$;
CREATE TYPE roles.bobs_range AS RANGE (subtype = bigint, subtype_diff = roles.bobs_diff);
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_ops', $$
  SELECT merchant_id, item_id, order_id FROM roles.orders WHERE NOT (order_id OPERATOR(roles.===) 100) $$);
SELECT delta_join.create_view('roles.alice_ops', $$
  SELECT merchant_id, item_id, order_id FROM roles.orders WHERE order_id <@ roles.bobs_range(100, 200) $$);
RESET ROLE;
-- A view the query reads, which the analysis does not inline (DISTINCT):
-- the planner expands it, and its code runs as the view's owner too.  Its
-- query is looked at as it is at each apply (the view stays locked from
-- then on); its own owner's rights do not matter.
GRANT SELECT ON roles.items TO dj_bob;
SET ROLE dj_bob;
CREATE VIEW roles.bobs_items AS SELECT DISTINCT merchant_id, item_id, item_name FROM roles.items;
GRANT SELECT ON roles.bobs_items TO dj_alice;
CREATE VIEW roles.bobs_norm_items AS
  SELECT DISTINCT merchant_id, item_id, roles.bobs_norm(item_name) AS item_name FROM roles.items;
GRANT SELECT ON roles.bobs_norm_items TO dj_alice;
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_bobs', 'SELECT merchant_id, item_id, item_name FROM roles.bobs_norm_items', strategy => 'auto');
SELECT delta_join.create_view('roles.alice_bobs', 'SELECT merchant_id, item_id, item_name FROM roles.bobs_items', strategy => 'auto');
RESET ROLE;
SET ROLE dj_bob;
CREATE OR REPLACE VIEW roles.bobs_items AS
  SELECT DISTINCT merchant_id, item_id, roles.bobs_norm(item_name) AS item_name FROM roles.items;
RESET ROLE;
SELECT target, state, last_error FROM delta_join.status WHERE target = 'roles.alice_bobs';
SET ROLE dj_alice;
SELECT delta_join.refresh('roles.alice_bobs');
SELECT delta_join.drop_view('roles.alice_bobs', drop_table => true);
RESET ROLE;
DROP VIEW roles.bobs_items, roles.bobs_norm_items;
-- What the DDL guard runs in the session of a command's runner names its
-- operators with their schema: an operator of mallory's on the runner's
-- search_path, which a simple CASE would have taken for "=", never runs.
SET ROLE dj_mallory;
CREATE TABLE public.mallorys_log (who name);
GRANT INSERT ON public.mallorys_log TO PUBLIC;
CREATE FUNCTION public.mallorys_eq(oid, regclass) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN INSERT INTO public.mallorys_log VALUES (current_user); RETURN $1 OPERATOR(pg_catalog.=) $2::oid; END $$;
CREATE OPERATOR public.= (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = public.mallorys_eq);
RESET ROLE;
CREATE TABLE roles.unrelated (i int);
DROP TABLE roles.unrelated;
DROP OPERATOR public.= (oid, regclass);
SELECT count(*) AS mallorys_operator_ran FROM public.mallorys_log;
-- A superuser has every role's rights, but trusts only its own code and
-- that of roles it is a member of: a view it owns would run bob's code
-- with a superuser's rights, however bob changes it later.
DO $$
BEGIN
  PERFORM delta_join.create_view('roles.admin_norm', $q$
    SELECT o.merchant_id, o.order_id, o.item_id, roles.bobs_norm(i.item_name) AS name
    FROM roles.orders o JOIN roles.items i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $q$);
EXCEPTION WHEN insufficient_privilege THEN
  RAISE NOTICE 'refused: %', regexp_replace(SQLERRM, 'which role "[^"]*"', 'which role (the superuser)');
END $$;
-- The analysis runs no user-defined code: it folds a UNION ALL branch's
-- tag only through built-in casts.  It runs before the check of whose code
-- a view runs, and in the DDL guard in the session of whoever runs a DDL
-- command (a superuser's, say); a tag that needs alice's own implicit
-- cast is not folded, and the view is refused for want of a tag.
SET ROLE dj_alice;
CREATE TABLE roles.seen_by_cast (who name);
CREATE FUNCTION roles.note_cast() RETURNS void LANGUAGE sql VOLATILE AS
  $$ INSERT INTO roles.seen_by_cast VALUES (current_user) $$;
CREATE TYPE roles.channel1 AS ENUM ('web');
CREATE TYPE roles.channel2 AS ENUM ('web', 'store');
CREATE FUNCTION roles.channel_cast(roles.channel1) RETURNS roles.channel2 LANGUAGE plpgsql IMMUTABLE AS
  $$ BEGIN PERFORM roles.note_cast(); RETURN $1::text::roles.channel2; END $$;
CREATE CAST (roles.channel1 AS roles.channel2) WITH FUNCTION roles.channel_cast(roles.channel1) AS IMPLICIT;
SELECT delta_join.create_view('roles.alice_channels', $$
  SELECT 'web'::roles.channel1 AS channel, merchant_id, item_id, order_id FROM roles.orders
  UNION ALL SELECT 'store'::roles.channel2, merchant_id, item_id, 0 FROM roles.items $$);
SELECT count(*) AS casts_run FROM roles.seen_by_cast;
DROP CAST (roles.channel1 AS roles.channel2);
DROP FUNCTION roles.channel_cast(roles.channel1), roles.note_cast();
DROP TYPE roles.channel1, roles.channel2;
DROP TABLE roles.seen_by_cast;
RESET ROLE;
-- The planner casts a UNION's inputs to its column types as it plans: a
-- cast of bob's types (bob may make a new one at any time) is refused.
SET ROLE dj_bob;
CREATE TYPE roles.bobs_pair1 AS (v bigint);
CREATE TYPE roles.bobs_pair2 AS (v bigint);
CREATE CAST (roles.bobs_pair2 AS roles.bobs_pair1) WITH INOUT AS IMPLICIT;
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_pairs', $$
  SELECT 'web' AS channel, merchant_id, item_id, order_id, ROW(order_id)::roles.bobs_pair1 AS p FROM roles.orders
  UNION ALL SELECT 'store', merchant_id, item_id, 0, ROW(item_id)::roles.bobs_pair2 FROM roles.items $$);
RESET ROLE;
DROP TYPE roles.bobs_pair1, roles.bobs_pair2 CASCADE;
-- The planner folds the calls with constant arguments of the definitions
-- of the tables it reads (index expressions and predicates, CHECK
-- constraints, partition keys, statistics), as the role that plans: a
-- table of bob's that alice may read, whose index calls bob's function,
-- is refused, as is a composite type holding bob's range type.
SET ROLE dj_bob;
CREATE TABLE roles.bobs_table (id int PRIMARY KEY, v text, during roles.bobs_range);
CREATE INDEX ON roles.bobs_table (roles.bobs_norm(v || 'x'));
CREATE TYPE roles.bobs_pair AS (during roles.bobs_range);
GRANT SELECT, UPDATE ON roles.bobs_table TO dj_alice;
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_bobs', 'SELECT id, v FROM roles.bobs_table');
SELECT delta_join.create_view('roles.alice_bobs', $$
  SELECT merchant_id, item_id, order_id FROM roles.orders
  WHERE ('("[1,2)")'::roles.bobs_pair).during @> order_id $$);
RESET ROLE;
DROP TABLE roles.bobs_table;
DROP TYPE roles.bobs_pair;
-- Whoever owns the table, the code's owner counts: a table of a group
-- alice is in, given an index by bob, another member, with bob's function.
CREATE ROLE dj_group;
GRANT dj_group TO dj_alice, dj_bob;
GRANT USAGE, CREATE ON SCHEMA roles TO dj_group;
SET ROLE dj_group;
CREATE TABLE roles.group_table (id int PRIMARY KEY, v text);
RESET ROLE;
SET ROLE dj_bob;
CREATE INDEX ON roles.group_table (id) WHERE roles.bobs_norm('A') = 'a';
RESET ROLE;
SET ROLE dj_alice;
SELECT delta_join.create_view('roles.alice_group', 'SELECT id, v FROM roles.group_table');
RESET ROLE;
DROP TABLE roles.group_table;
REVOKE USAGE, CREATE ON SCHEMA roles FROM dj_group;
DROP ROLE dj_group;
--
-- 6. REASSIGN OWNED and DROP OWNED follow the target: the query view goes
--    with it, so the old owner can be dropped.
--
REASSIGN OWNED BY dj_mallory TO dj_bob;
SELECT target, runs_as FROM delta_join.views WHERE target = 'roles.admin_wide';
SELECT relowner::regrole FROM pg_class WHERE oid = 'delta_join."roles.admin_wide"'::regclass;
DROP OWNED BY dj_mallory;
DROP ROLE dj_mallory;
DROP OWNED BY dj_bob;
DROP ROLE dj_bob;
SELECT target, runs_as FROM delta_join.views ORDER BY target;

--
-- 7. What code on a target sees when the worker applies: the target's
--    owner as current_user, search_path = pg_catalog, pg_temp, and a
--    security-restricted operation (no temporary table, no SET ROLE).
--
SET ROLE dj_alice;
CREATE TABLE roles.seen (who name, path text, temp_table text, set_role text);
CREATE FUNCTION roles.note_apply() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  temp_table text := 'created';
  set_role text := 'done';
BEGIN
  BEGIN
    CREATE TEMP TABLE apply_scratch (x int);
  EXCEPTION WHEN OTHERS THEN
    temp_table := SQLERRM;
  END;
  BEGIN
    SET ROLE dj_alice;
  EXCEPTION WHEN OTHERS THEN
    set_role := SQLERRM;
  END;
  INSERT INTO roles.seen VALUES (current_user, current_setting('search_path'), temp_table, set_role);
  RETURN NULL;
END $$;
CREATE TRIGGER note_apply AFTER INSERT ON roles.alice_wide
  FOR EACH ROW EXECUTE FUNCTION roles.note_apply();
RESET ROLE;
INSERT INTO roles.orders VALUES (1, 2, 104, 7);
SELECT delta_join.wait('roles.alice_wide');
SELECT * FROM roles.seen;

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view('roles.alice_wide');
SET client_min_messages = warning;
DROP SCHEMA roles CASCADE;
DROP OWNED BY dj_alice;
DROP ROLE dj_alice;
RESET client_min_messages;
