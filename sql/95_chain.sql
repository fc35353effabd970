--
-- Chained views over outer-join targets: the target of a view with outer
-- joins has a UNIQUE NULLS NOT DISTINCT key (and REPLICA IDENTITY FULL),
-- and such a table can be the source of another view -- an aggregate, or
-- a join in which it is on the preserved side.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA chain;
SET search_path = chain, public;

CREATE TABLE users (id bigint PRIMARY KEY, name text, country text);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX ON domains (user_id);
INSERT INTO users VALUES (1, 'ada', 'uk'), (2, 'alan', 'uk'), (3, 'grace', 'us');
INSERT INTO domains VALUES (10, 1, 'ada.example'), (11, 1, 'engine.example');

\set ud 'SELECT u.id AS user_id, u.name, u.country, d.id AS domain_id, d.domain_name FROM users u LEFT JOIN domains d ON d.user_id = u.id'
SELECT delta_join.create_view('user_domains', :'ud', options => '{"retract": true}');
\d user_domains

-- an aggregate over it: domains per user (a user without any counts 0),
-- through the key's index
\set per_user 'SELECT user_id, count(domain_id) AS domains FROM chain.user_domains GROUP BY user_id'
SELECT delta_join.create_view('domains_per_user', :'per_user');
-- a join over it, with the users again
\set names 'SELECT x.user_id, x.domain_id, x.domain_name, u.name FROM chain.user_domains x JOIN users u ON u.id = x.user_id'
SELECT delta_join.create_view('user_domain_names', :'names', options => '{"retract": true}');

INSERT INTO domains VALUES (12, 2, 'enigma.example');
DELETE FROM domains WHERE id = 10;
UPDATE users SET name = 'Grace' WHERE id = 3;
INSERT INTO users VALUES (4, 'edsger', 'nl');
SELECT delta_join.wait();
SELECT * FROM domains_per_user ORDER BY user_id;
SELECT * FROM diff('domains_per_user', :'per_user');
SELECT * FROM user_domain_names ORDER BY user_id, domain_id;
SELECT * FROM diff('user_domain_names', :'names');

-- the target of an outer join in upsert mode can be a source too: the
-- aggregate over it counts what it holds, residual rows included (upsert
-- mode keeps the rows of joins that are gone, unless a null-extended row
-- takes their place, as for ada below: she lost her last domain)
\set ud_up 'SELECT u.id AS user_id, u.name, d.id AS domain_id, d.domain_name FROM users u LEFT JOIN domains d ON d.user_id = u.id'
SELECT delta_join.create_view('user_domains_up', :'ud_up');
\set per_user_up 'SELECT user_id, count(domain_id) AS domains, count(*) AS rows FROM chain.user_domains_up GROUP BY user_id'
SELECT delta_join.create_view('domains_per_user_up', :'per_user_up');
INSERT INTO domains VALUES (13, 4, 'dijkstra.example'), (14, 3, 'cobol.example');
DELETE FROM domains WHERE id = 11;
SELECT delta_join.wait();
SELECT * FROM user_domains_up ORDER BY user_id, domain_id;
SELECT * FROM domains_per_user_up ORDER BY user_id;
SELECT * FROM diff('domains_per_user_up', :'per_user_up');

-- a source whose key may be NULL cannot be null-extended itself: its rows
-- could not be told from its null extension
SELECT * FROM delta_join.explain($$
  SELECT u.id, x.user_id, x.domain_id FROM users u LEFT JOIN chain.user_domains x ON x.user_id = u.id $$);

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views
ORDER BY target IN ('chain.user_domains', 'chain.user_domains_up'), target;
SET client_min_messages = warning;
DROP SCHEMA chain CASCADE;
RESET client_min_messages;
RESET search_path;
