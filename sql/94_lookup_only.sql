--
-- Lookup-only sources: a table marked /*+ OPTIONS('lookup_only'='true') */
-- is read through its index when another source changes, but its own
-- changes trigger nothing (an enrichment with the value as of the time the
-- row was applied, e.g. exchange rates).  Rule 2 still applies to it.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA lk;
SET search_path = lk, public;

CREATE TABLE payments (id bigint PRIMARY KEY, currency text, amount numeric);
CREATE INDEX ON payments (currency);
CREATE TABLE rates (currency text PRIMARY KEY, usd numeric);
INSERT INTO rates VALUES ('EUR', 1.10), ('GBP', 1.25);
INSERT INTO payments VALUES (1, 'EUR', 100), (2, 'GBP', 10), (3, 'JPY', 500);

\set inner_q 'SELECT p.id, p.currency, p.amount * r.usd AS usd FROM payments p JOIN rates /*+ OPTIONS(''lookup_only''=''true'') */ r ON r.currency = p.currency'
SELECT * FROM delta_join.explain(:'inner_q');
SELECT delta_join.create_view('payments_usd', :'inner_q');
SELECT target, sources, lookup_only FROM delta_join.views;
SELECT * FROM payments_usd ORDER BY id;

-- a new rate is not applied to existing payments, only to those that change
UPDATE rates SET usd = 2 WHERE currency = 'EUR';
INSERT INTO rates VALUES ('JPY', 0.01);
INSERT INTO payments VALUES (4, 'EUR', 1);
UPDATE payments SET amount = 20 WHERE id = 2;
SELECT delta_join.wait('lk.payments_usd');
SELECT * FROM payments_usd ORDER BY id;
-- (the changes of rates are not even captured)
SELECT changes_seen FROM delta_join.status WHERE target = 'lk.payments_usd';

-- in an outer join, in retract mode: a payment without a rate is
-- null-extended, and stays so when the rate arrives, until it changes
\set outer_q 'SELECT p.id, p.currency, r.currency AS rate_currency, p.amount * r.usd AS usd FROM payments p LEFT JOIN rates /*+ OPTIONS(''lookup_only''=''true'') */ r ON r.currency = p.currency'
SELECT delta_join.create_view('payments_usd_exact', :'outer_q', options => '{"retract": true}');
INSERT INTO payments VALUES (5, 'CHF', 3);
DELETE FROM payments WHERE id = 1;
SELECT delta_join.wait('lk.payments_usd_exact');
INSERT INTO rates VALUES ('CHF', 1.2);
SELECT delta_join.wait('lk.payments_usd_exact');
SELECT * FROM payments_usd_exact ORDER BY id;
UPDATE payments SET amount = 4 WHERE id = 5;
SELECT delta_join.wait('lk.payments_usd_exact');
SELECT * FROM payments_usd_exact WHERE id = 5;

-- the two other combinations, the inner join in retract mode and the
-- outer join in upsert mode: the rates' changes trigger nothing there
-- either, and a payment that changes is joined with today's rate
SELECT delta_join.create_view('payments_usd_rt', :'inner_q', options => '{"retract": true}');
SELECT delta_join.create_view('payments_usd_outer', :'outer_q');
UPDATE rates SET usd = 3 WHERE currency = 'GBP';
DELETE FROM rates WHERE currency = 'JPY';
INSERT INTO payments VALUES (6, 'USD', 9);
UPDATE payments SET currency = 'GBP' WHERE id = 4;
SELECT delta_join.wait();
SELECT * FROM payments_usd_rt ORDER BY id;
SELECT * FROM payments_usd_outer ORDER BY id;
DELETE FROM payments WHERE id = 4;
SELECT delta_join.wait();
SELECT id FROM payments_usd_rt ORDER BY id;
SELECT id FROM payments_usd_outer ORDER BY id;

-- rule 2 still applies to it; and a join of lookup-only sources only
-- never changes
CREATE TABLE regions (currency text, region text);
SELECT * FROM delta_join.explain($$
  SELECT p.id, g.region FROM payments p
  JOIN regions /*+ OPTIONS('lookup_only'='true') */ g ON g.currency = p.currency $$);
SELECT * FROM delta_join.explain($$
  SELECT p.id, r.usd FROM payments /*+ OPTIONS('lookup_only'='true') */ p
  JOIN rates /*+ OPTIONS('lookup_only'='true') */ r ON r.currency = p.currency $$);

-- ... on every path, whatever the query: one table, an aggregate's only
-- source, a keyed recompute, a full recompute
SELECT delta_join.create_view('frozen', $$
  SELECT id, amount FROM payments /*+ OPTIONS('lookup_only'='true') */ $$);
SELECT delta_join.create_view('frozen', $$
  SELECT currency, count(*) AS n FROM payments /*+ OPTIONS('lookup_only'='true') */ GROUP BY currency $$);
SELECT * FROM delta_join.explain($$
  SELECT currency, count(*) AS n FROM payments /*+ OPTIONS('lookup_only'='true') */ GROUP BY currency $$,
  strategy => 'auto');
SELECT delta_join.create_view('frozen', $$
  SELECT count(*) AS n, sum(amount) AS total FROM payments /*+ OPTIONS('lookup_only'='true') */ $$,
  strategy => 'auto');
SELECT delta_join.create_view('frozen', $$
  SELECT DISTINCT p.currency FROM payments /*+ OPTIONS('lookup_only'='true') */ p
  JOIN rates /*+ OPTIONS('lookup_only'='true') */ r ON r.currency = p.currency $$, strategy => 'none');

-- explain shows lookup-only sources on every path: a keyed recompute (a
-- join on columns no index leads) ...
\set keyed_q 'SELECT p.id, r.currency AS rate_currency FROM payments p JOIN rates /*+ OPTIONS(''lookup_only''=''true'') */ r ON r.usd = p.amount'
SELECT * FROM delta_join.explain(:'keyed_q', strategy => 'auto');
-- ... and a full recompute, where the hinted table's changes are not
-- captured either: the view moves when another source changes
\set full_q 'SELECT p.currency, sum(p.amount * r.usd) AS usd FROM payments p JOIN rates /*+ OPTIONS(''lookup_only''=''true'') */ r ON r.currency = p.currency GROUP BY p.currency HAVING count(*) > 0'
SELECT * FROM delta_join.explain(:'full_q', strategy => 'none');
SELECT delta_join.create_view('usd_by_currency', :'full_q', strategy => 'none',
  options => '{"refresh_interval": "10ms"}');
SELECT target, mode, sources, lookup_only FROM delta_join.views WHERE target = 'lk.usd_by_currency';
SELECT * FROM usd_by_currency ORDER BY currency;
UPDATE rates SET usd = 100 WHERE currency = 'GBP';
SELECT delta_join.wait('lk.usd_by_currency');
SELECT * FROM usd_by_currency ORDER BY currency;
INSERT INTO payments VALUES (7, 'EUR', 1);
SELECT delta_join.wait('lk.usd_by_currency');
SELECT * FROM usd_by_currency ORDER BY currency;
SELECT * FROM diff('usd_by_currency', :'full_q');

-- a hint after a name that two tables of the query have (one inside an
-- aliased join, which hides it) is refused: it could land on the other
CREATE SCHEMA lk2;
CREATE TABLE lk2.rates (currency text PRIMARY KEY, usd numeric);
SELECT delta_join.explain($$
  SELECT p.id, rates.usd, j.usd AS usd2
  FROM payments p JOIN rates /*+ OPTIONS('lookup_only'='true') */ ON rates.currency = p.currency
  JOIN (lk2.rates JOIN payments q USING (currency)) AS j ON j.id = p.id $$);
SELECT delta_join.create_view('ambiguous', $$
  SELECT p.id, rates.usd, j.usd AS usd2
  FROM payments p JOIN rates /*+ OPTIONS('lookup_only'='true') */ ON rates.currency = p.currency
  JOIN (lk2.rates JOIN payments q USING (currency)) AS j ON j.id = p.id $$);
DROP SCHEMA lk2 CASCADE;

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA lk CASCADE;
RESET client_min_messages;
RESET search_path;
