--
-- Queries that are eligible for a delta view (DESIGN.md §1 and §3).
--
-- For each: delta_join.explain() shows the delta plan, create_view()
-- creates and backfills the target, \d shows the target's columns and the
-- primary key derived from the query, and the backfilled target equals the
-- query's result as a multiset (EXCEPT ALL both ways finds nothing).
--
-- All data is loaded before each view is created and no source is changed
-- afterwards, so the output does not depend on the apply worker.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA accept;
SET search_path = accept, public;

--
-- 1. The worked example of DESIGN.md §1: orders N:1 items.
--    (merchant_id, item_id) is a prefix of both primary keys.
--
CREATE TABLE orders (
  merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (
  merchant_id bigint, item_id bigint, item_name text,
  PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES
  (1, 10, 'espresso machine'), (1, 11, 'coffee grinder'),
  (2, 20, 'tea kettle'),
  (3, 30, 'never ordered');                     -- no order: not in the join
INSERT INTO orders VALUES
  (1, 10, 1001, 249.00), (1, 11, 1002, 89.50), (1, 10, 1003, 249.00),
  (2, 20, 2001, 35.00),
  (9, 90, 9001, 1.00);                          -- no item: not in the join

SELECT $$
  SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
  FROM orders AS o
  JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id
$$ AS q \gset

-- The plan: the result's key is the primary key of orders (items' whole
-- key is bound by the join, so it adds nothing); orders is looked up by
-- its primary-key prefix (merchant_id, item_id), items by its whole key.
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('order_item_wide', :'q');
-- columns and types from the select list, primary key derived
\d order_item_wide
SELECT * FROM order_item_wide ORDER BY merchant_id, order_id;
SELECT * FROM diff('order_item_wide', :'q');

-- The catalog records each source with the columns whose changes make a
-- dirty key (by attribute number: renames are followed).
SELECT s.ordinal, s.relid::regclass AS source, s.key_attnums, s.options
FROM delta_join.source_catalog s
JOIN delta_join.view_catalog v USING (view_id)
WHERE v.target = 'accept.order_item_wide'::regclass
ORDER BY s.ordinal;
-- The query is bound into a view of schema delta_join, owned by the
-- target's owner: core records what it depends on.
SELECT query_view, runs_as FROM delta_join.views WHERE target = 'accept.order_item_wide';

--
-- 2. The aggregate of DESIGN.md §1: the group key merchant_id is the
--    leading column of the primary key of orders.
--
SELECT $$
  SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount
  FROM orders GROUP BY merchant_id
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('merchant_summary', :'q');
-- the primary key is the group key
\d merchant_summary
SELECT * FROM merchant_summary ORDER BY merchant_id;
SELECT * FROM diff('merchant_summary', :'q');

--
-- 3. users 1:N domains, joined on users.id = domains.user_id, with an
--    index on domains(user_id).  users' key is bound by the join, so the
--    result's key is domains.id, selected as domain_id.
--
CREATE TABLE users (id bigint PRIMARY KEY, firstname text, lastname text);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX domains_user_id_idx ON domains (user_id);
INSERT INTO users VALUES
  (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing'), (3, 'Grace', 'Hopper');
INSERT INTO domains VALUES
  (100, 1, 'ada.example'), (101, 1, 'analytical.example'),
  (200, 2, 'turing.example'),
  (900, 42, 'orphan.example');                  -- no such user

SELECT $$
  SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name
  FROM users u JOIN domains d ON u.id = d.user_id
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('user_domains', :'q');
-- primary key (domain_id)
\d user_domains
SELECT * FROM user_domains ORDER BY domain_id;
SELECT * FROM diff('user_domains', :'q');

--
-- 4. A 3-table cascade: orders -> items -> merchants.  Each change is
--    applied by a walk through the other two tables, shown per driver.
--
CREATE TABLE merchants (merchant_id bigint PRIMARY KEY, merchant_name text);
INSERT INTO merchants VALUES (1, 'Bean There'), (2, 'Leaf & Co'), (3, 'Idle Shop');

SELECT $$
  SELECT o.merchant_id, m.merchant_name, o.item_id, i.item_name, o.order_id, o.amount
  FROM orders o
  JOIN items i     ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id
  JOIN merchants m ON m.merchant_id = i.merchant_id
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('order_merchant_wide', :'q');
\d order_merchant_wide
SELECT * FROM order_merchant_wide ORDER BY merchant_id, order_id;
SELECT * FROM diff('order_merchant_wide', :'q');

--
-- 5. A join on a btree index that is not the primary key, on both sides:
--    accounts.country_code = countries.code.  Neither primary key is bound
--    by the join, so the result's key is both primary keys.
--
CREATE TABLE countries (country_id int PRIMARY KEY, code text NOT NULL, country_name text);
CREATE INDEX countries_code_name_idx ON countries (code, country_name);
CREATE TABLE accounts (account_id int PRIMARY KEY, country_code text, balance numeric);
CREATE INDEX accounts_country_code_idx ON accounts (country_code);
INSERT INTO countries VALUES (1, 'FR', 'France'), (2, 'DE', 'Germany'),
  (3, 'FR', 'France (old code)');               -- code is not unique
INSERT INTO accounts VALUES (1, 'FR', 10), (2, 'DE', 20), (3, 'DE', 30),
  (4, 'IT', 40), (5, NULL, 50);

SELECT $$
  SELECT a.account_id, a.balance, c.country_id, c.code, c.country_name
  FROM accounts a JOIN countries c ON a.country_code = c.code
$$ AS q \gset
-- countries is looked up by the leading column of countries_code_name_idx
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('account_countries', :'q');
-- primary key (account_id, country_id)
\d account_countries
SELECT * FROM account_countries ORDER BY account_id, country_id;
SELECT * FROM diff('account_countries', :'q');

--
-- 6. A partitioned source whose join key includes the partition key:
--    events is partitioned by tenant_id and joined on tenant_id.
--
CREATE TABLE tenants (tenant_id int PRIMARY KEY, tenant_name text);
CREATE TABLE events (tenant_id int, event_id bigint, payload text,
                     PRIMARY KEY (tenant_id, event_id))
  PARTITION BY LIST (tenant_id);
CREATE TABLE events_1 PARTITION OF events FOR VALUES IN (1);
CREATE TABLE events_2 PARTITION OF events FOR VALUES IN (2);
CREATE TABLE events_other PARTITION OF events DEFAULT;
INSERT INTO tenants VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO events VALUES (1, 1, 'a'), (1, 2, 'b'), (2, 1, 'c'), (3, 7, 'd'), (4, 1, 'no tenant');

SELECT $$
  SELECT e.tenant_id, e.event_id, t.tenant_name, e.payload
  FROM events e JOIN tenants t ON e.tenant_id = t.tenant_id
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('tenant_events', :'q');
-- the target is an ordinary table, keyed by the primary key of events
\d tenant_events
SELECT * FROM tenant_events ORDER BY tenant_id, event_id;
SELECT * FROM diff('tenant_events', :'q');

--
-- 7. The registered views.
--
SELECT target, kind, mode, strategy, state, sources
FROM delta_join.views ORDER BY target;
-- the effective options are stored complete, from the session's settings
SELECT options FROM delta_join.views WHERE target = 'accept.order_item_wide';
-- the query as it is bound now, and the settings pinned at creation
SELECT query FROM delta_join.views WHERE target = 'accept.user_domains';
SELECT settings ->> 'TimeZone' IS NOT NULL AS pins_timezone,
       settings ->> 'DateStyle' IS NOT NULL AS pins_datestyle
FROM delta_join.views WHERE target = 'accept.user_domains';

--
-- 8. refresh() rebuilds a target from the query and returns the rows
--    written; it clears rows the query no longer returns.  Only delta_join
--    writes a target, unless the view allows manual writes (for example to
--    purge logically deleted rows): then its owner may, and refresh() puts
--    the target back.
--
DELETE FROM user_domains WHERE domain_id = 100;
SELECT delta_join.drop_view('user_domains');
SELECT delta_join.create_view('user_domains', $$
  SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name
  FROM users u JOIN domains d ON u.id = d.user_id $$,
  options => '{"manual_writes": true}');
DELETE FROM user_domains WHERE domain_id = 100;            -- a lost row
INSERT INTO user_domains VALUES (0, 'Not', 'Real', 999, 'residual.example');
SELECT delta_join.refresh('user_domains');
SELECT * FROM diff('user_domains',
  'SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name
   FROM users u JOIN domains d ON u.id = d.user_id');
SELECT delta_join.refresh('merchant_summary');
-- a table that is not a view's target cannot be refreshed or dropped
SELECT delta_join.refresh('orders');
SELECT delta_join.drop_view('no_such_table');

--
-- 9. drop_view: with drop_table => false the table stays, as an ordinary
--    table with its rows; by default it is dropped too.
--
SELECT delta_join.drop_view('account_countries', drop_table => false);
SELECT count(*) FROM account_countries;
SELECT delta_join.drop_view('tenant_events');
SELECT to_regclass('accept.tenant_events') AS dropped_target;
SELECT target FROM delta_join.views ORDER BY target;
-- the sources of dropped views are gone from the catalog too
SELECT count(*) AS orphan_sources FROM delta_join.source_catalog s
WHERE NOT EXISTS (SELECT 1 FROM delta_join.view_catalog v WHERE v.view_id = s.view_id);
-- a dropped view's target can be used again
SELECT delta_join.create_view('tenant_events', $$
  SELECT e.tenant_id, e.event_id, t.tenant_name, e.payload
  FROM events e JOIN tenants t ON e.tenant_id = t.tenant_id $$);
SELECT count(*) FROM tenant_events;

-- Clean up: drop every view of this file, then the schema.
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SELECT count(*) FROM delta_join.views;
SET client_min_messages = warning;
DROP SCHEMA accept CASCADE;
RESET client_min_messages;
RESET search_path;
