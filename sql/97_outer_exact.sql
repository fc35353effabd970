--
-- Outer joins, exact on every path (issue 18): filters that keep the NULLs
-- of a nullable side, chains of outer joins in upsert mode, TRUNCATE of a
-- nullable side, targets keyed on columns that can be NULL, and the names
-- the errors give.
--
-- try_create() runs create_view and, when it fails, prints the error as
-- lines: "SQLSTATE: message", then "DETAIL: ..." and "HINT: ...".
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA oexact;
SET search_path = oexact, public;

CREATE FUNCTION try_create(target text, query text,
                           strategy text DEFAULT NULL, options jsonb DEFAULT NULL)
RETURNS SETOF text LANGUAGE plpgsql AS $f$
DECLARE
  st text; msg text; det text; hnt text;
BEGIN
  PERFORM delta_join.create_view(target, query, strategy, options);
  RETURN NEXT 'created ' || target;
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT,
                          det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RETURN NEXT st || ': ' || msg;
  IF det <> '' THEN RETURN NEXT 'DETAIL: ' || det; END IF;
  IF hnt <> '' THEN RETURN NEXT 'HINT: ' || hnt; END IF;
END $f$;

CREATE TABLE users (id bigint PRIMARY KEY, firstname text);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text, verified bool);
CREATE INDEX ON domains (user_id);
INSERT INTO users VALUES (1, 'Ada'), (2, 'Alan'), (3, 'Grace');
INSERT INTO domains VALUES (10, 1, 'ada.example', true), (11, 2, 'enigma.example', NULL);

--
-- 1. A filter that keeps the NULLs of a nullable side.  "Users without a
--    domain" (an anti-join) keeps a user's row only while the user has no
--    partner; the joined rows it filters out are in neither the query nor
--    the target, and a decoded DELETE names a domain by its key only, so
--    when Ada's last domain goes nothing could say that Ada's row must
--    appear.  Such a condition -- true for NULLs of the side, not strict in
--    the planner's sense -- is refused by both delta modes and by keyed
--    recompute, and the error and explain() name it and say why.
--
\set anti 'SELECT u.id AS user_id, u.firstname, d.id AS domain_id FROM users u LEFT JOIN domains d ON d.user_id = u.id WHERE d.id IS NULL'
SELECT * FROM try_create('anti', :'anti');
SELECT * FROM try_create('anti', :'anti', options => '{"retract": true}');
SELECT * FROM try_create('anti_none', :'anti', strategy => 'none',
                          options => '{"refresh_interval": "10ms"}');
SELECT * FROM delta_join.explain(:'anti', strategy => 'auto');

-- the variants: a condition that is true for NULL, a FULL JOIN tested IS
-- NULL on either side, one that fails for the joined rows of a user who
-- gets a domain, and conditions above a chain of outer joins
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u LEFT JOIN domains d ON d.user_id = u.id
  WHERE coalesce(d.domain_name, 'none') <> 'x.example' $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u LEFT JOIN domains d ON d.user_id = u.id
  WHERE d.verified IS DISTINCT FROM false $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u FULL JOIN domains d ON d.user_id = u.id
  WHERE u.id IS NULL $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u FULL JOIN domains d ON d.user_id = u.id
  WHERE d.id IS NULL $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u LEFT JOIN domains d ON d.user_id = u.id
  WHERE d.domain_name IS NULL OR d.domain_name LIKE 'a%' $$);

CREATE TABLE certs (id bigint PRIMARY KEY, domain_id bigint, issuer text);
CREATE INDEX ON certs (domain_id);
INSERT INTO certs VALUES (100, 10, 'ca1');
-- a condition in WHERE on the last table of a chain; in the ON of an
-- outer join over another one (a cert for users without a domain); in the
-- ON of an outer join whose nullable side is itself an outer join
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u LEFT JOIN domains d ON d.user_id = u.id LEFT JOIN certs c ON c.domain_id = d.id
  WHERE c.issuer IS NULL $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u LEFT JOIN domains d ON d.user_id = u.id LEFT JOIN certs c ON c.domain_id = u.id AND d.id IS NULL $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u LEFT JOIN (domains d LEFT JOIN certs c ON c.domain_id = d.id)
    ON d.user_id = u.id AND c.issuer IS NULL $$);

-- what stays a delta view: a condition that rejects NULLs of the side
-- (the outer join is then an inner join), an ON of an outer join over a
-- chain that rejects NULLs of the side below (a user without a domain
-- has no cert), and a condition on the nullable side inside its own ON
-- (which says who the partners are)
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u LEFT JOIN domains d ON d.user_id = u.id
  WHERE d.verified $$, options => '{"retract": true}');
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u LEFT JOIN domains d ON d.user_id = u.id LEFT JOIN certs c ON c.domain_id = d.id $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u
  LEFT JOIN domains d ON d.user_id = u.id AND d.verified IS NOT FALSE $$,
  options => '{"retract": true}');

-- under strategy auto (and none) the view is a full recompute, exact:
-- Ada loses her last domain and appears, Grace gets her first and goes
SELECT delta_join.create_view('anti', :'anti', strategy => 'auto',
                              options => '{"refresh_interval": "10ms"}');
SELECT target, mode FROM delta_join.views WHERE target IN ('oexact.anti', 'oexact.anti_none') ORDER BY target;
SELECT * FROM anti ORDER BY user_id;
DELETE FROM domains WHERE id = 10;
INSERT INTO domains VALUES (12, 3, 'cobol.example', true);
SELECT delta_join.wait('oexact.anti'), delta_join.wait('oexact.anti_none');
SELECT * FROM anti ORDER BY user_id;
SELECT * FROM diff('anti', :'anti');
SELECT * FROM diff('anti_none', :'anti');

--
-- 2. A condition in an ON clause is named as one (rule 6).
--
SELECT * FROM try_create('on_filter', $$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u
  LEFT JOIN domains d ON d.user_id = u.id AND d.domain_name LIKE '%.example' $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id FROM users u
  JOIN domains d ON d.user_id = u.id AND d.verified $$);

--
-- 3. A computed join key in a chain: rule 3 names the condition's tables,
--    and rule 2 the tables it failed to join (not the first table).
--
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u JOIN domains d ON d.user_id = u.id JOIN certs c ON c.domain_id = d.id + 1 $$);
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, c.id AS cert_id
  FROM users u LEFT JOIN domains d ON d.user_id = u.id LEFT JOIN certs c ON c.domain_id = d.id + u.id $$);

--
-- 4. Chains of outer joins in upsert mode.  In "a LEFT JOIN b ON b.id =
--    a.b_id LEFT JOIN c ON c.b_id = b.id" the join ties b's key to a's
--    b_id, so the target's key is (a_id, c_id): "a 1, b 7, no c" and "a 1,
--    no b" have one key.  When b 7, without a c of its own, becomes the
--    first partner of a 1 (and when it is deleted) the row is replaced in
--    place.  In a FULL chain one row is found through several anchors.
--
CREATE TABLE ca (id int PRIMARY KEY, b_id int, k int);
CREATE TABLE cb (id int PRIMARY KEY, k int, note text);
CREATE TABLE cc (id int PRIMARY KEY, b_id int, k int);
CREATE TABLE cd (id int PRIMARY KEY, c_id int);
CREATE INDEX ON ca (b_id); CREATE INDEX ON ca (k);
CREATE INDEX ON cb (k);
CREATE INDEX ON cc (b_id); CREATE INDEX ON cc (k);
CREATE INDEX ON cd (c_id);
INSERT INTO ca VALUES (1, 7, 1), (2, 8, 2);
INSERT INTO cc VALUES (30, 8, 5);
\set chain 'SELECT a.id AS a_id, a.b_id, b.id AS b_key, b.note, c.id AS c_id FROM ca a LEFT JOIN cb b ON b.id = a.b_id LEFT JOIN cc c ON c.b_id = b.id'
\set chain4 'SELECT a.id AS a_id, a.b_id, c.id AS c_id, d.id AS d_id FROM ca a LEFT JOIN cb b ON b.id = a.b_id LEFT JOIN cc c ON c.b_id = b.id LEFT JOIN cd d ON d.c_id = c.id'
\set full3 'SELECT a.id AS a_id, b.id AS b_id, c.id AS c_id FROM ca a FULL JOIN cb b ON b.k = a.k FULL JOIN cc c ON c.k = b.k'
SELECT * FROM delta_join.explain(:'chain');
SELECT delta_join.create_view('chain_up', :'chain');
SELECT delta_join.create_view('chain4_up', :'chain4');
SELECT delta_join.create_view('full3_up', :'full3');
SELECT delta_join.create_view('chain_rt', :'chain', options => '{"retract": true}');
INSERT INTO cb VALUES (7, 9, 'b7');
INSERT INTO cb VALUES (8, 2, 'b8');
SELECT delta_join.wait('oexact.chain_up'), delta_join.wait('oexact.chain4_up'),
       delta_join.wait('oexact.full3_up'), delta_join.wait('oexact.chain_rt');
SELECT * FROM chain_up ORDER BY a_id, c_id;
INSERT INTO cd VALUES (300, 30);
DELETE FROM cb WHERE id = 7;
INSERT INTO cc VALUES (31, 9, 2);
SELECT delta_join.wait('oexact.chain_up'), delta_join.wait('oexact.chain4_up'),
       delta_join.wait('oexact.full3_up'), delta_join.wait('oexact.chain_rt');
SELECT * FROM chain_up ORDER BY a_id, c_id;
SELECT * FROM full3_up ORDER BY a_id, b_id, c_id;
SELECT target, state, last_error FROM delta_join.status
WHERE target LIKE 'oexact.chain%' OR target LIKE 'oexact.full3%' ORDER BY target;
SELECT * FROM diff('chain_up', :'chain');
SELECT * FROM diff('chain4_up', :'chain4');
-- (b 7, deleted, stays in the FULL JOIN as a residual row of upsert mode)
SELECT * FROM diff('full3_up', :'full3');
SELECT * FROM diff('chain_rt', :'chain');

--
-- 5. TRUNCATE of a source is a DELETE of each of its rows, for every
--    outer-join shape and in both modes: two copies of the same tables,
--    one truncated (t_), the other emptied by DELETE (d_), give the same
--    targets.  In the LEFT JOIN the nullable side's key is not in the
--    select list (the rows it was joined in are found by the columns the
--    join equates with it); in the FULL JOIN the rows of the other side
--    get their null-extended rows back; in the chain the middle table goes.
--
CREATE FUNCTION rows_differ(a regclass, b regclass) RETURNS bigint
LANGUAGE plpgsql AS $f$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM ((TABLE %s EXCEPT ALL TABLE %s) UNION ALL (TABLE %s EXCEPT ALL TABLE %s)) x',
                 a, b, b, a) INTO n;
  RETURN n;
END $f$;
CREATE TABLE t_orders (m int, o int, i int, PRIMARY KEY (m, o));
CREATE TABLE t_items (m int, i int, iname text, PRIMARY KEY (m, i));
CREATE TABLE t_cb (LIKE cb INCLUDING INDEXES);
CREATE TABLE d_orders (LIKE t_orders INCLUDING INDEXES);
CREATE TABLE d_items (LIKE t_items INCLUDING INDEXES);
CREATE TABLE d_cb (LIKE cb INCLUDING INDEXES);
INSERT INTO t_items VALUES (1, 1, 'mug'), (1, 2, 'cup');
INSERT INTO t_orders VALUES (1, 1, 1), (1, 2, 2), (1, 3, 3);
INSERT INTO t_cb VALUES (7, 9, 'b7'), (8, 2, 'b8');
INSERT INTO d_items TABLE t_items;
INSERT INTO d_orders TABLE t_orders;
INSERT INTO d_cb TABLE t_cb;
\set oi 'SELECT o.m, o.o, i.iname FROM X_orders o LEFT JOIN X_items i ON i.m = o.m AND i.i = o.i'
\set oif 'SELECT o.m, o.o, o.i, i.m AS item_m, i.i AS item_i, i.iname FROM X_orders o FULL JOIN X_items i ON i.m = o.m AND i.i = o.i'
SELECT count(delta_join.create_view(x || '_' || v || '_' || mode, replace(q, 'X_', x || '_'),
                                    options => jsonb_build_object('retract', mode = 'rt')))
FROM unnest(ARRAY['t', 'd']) x, unnest(ARRAY['up', 'rt']) mode,
     (VALUES ('oif', :'oif'), ('chain', replace(:'chain', 'cb b', 'X_cb b'))) q(v, q);
SELECT count(delta_join.create_view(x || '_oi_up', replace(:'oi', 'X_', x || '_')))
FROM unnest(ARRAY['t', 'd']) x;
TRUNCATE t_items;
DELETE FROM d_items;
TRUNCATE t_cb;
DELETE FROM d_cb;
SELECT delta_join.wait();
SELECT * FROM t_oi_up ORDER BY m, o;
SELECT * FROM t_oif_up ORDER BY m, o;
SELECT * FROM t_chain_up ORDER BY a_id, c_id;
SELECT v, rows_differ(('t_' || v)::regclass, ('d_' || v)::regclass) AS differ
FROM unnest(ARRAY['oi_up', 'oif_up', 'oif_rt', 'chain_up', 'chain_rt']) v;
-- the preserved side truncated: its rows stay, residual, as deleted ones
-- do; in the FULL JOIN the items' rows come back null-extended
TRUNCATE t_orders;
DELETE FROM d_orders;
INSERT INTO t_items VALUES (1, 1, 'mug');
INSERT INTO d_items VALUES (1, 1, 'mug');
SELECT delta_join.wait();
SELECT * FROM t_oif_up ORDER BY m, o;
SELECT v, rows_differ(('t_' || v)::regclass, ('d_' || v)::regclass) AS differ
FROM unnest(ARRAY['oi_up', 'oif_up', 'oif_rt']) v;
SELECT * FROM diff('t_oif_rt', replace(:'oif', 'X_', 't_'));

--
-- 6. Targets keyed on columns that can be NULL get the UNIQUE NULLS NOT
--    DISTINCT key of outer joins, on every path: an aggregate over an
--    outer join grouped by a column of the nullable side (full recompute;
--    domains.id is NOT NULL in its table, not in the join), keyed
--    recompute of an outer join, a UNION ALL whose branches leave a key
--    column NULL.
--
\set agg 'SELECT u.id AS user_id, d.id AS domain_id, count(c.id) AS certs FROM users u LEFT JOIN domains d ON d.user_id = u.id LEFT JOIN certs c ON c.domain_id = d.id GROUP BY u.id, d.id'
SELECT delta_join.create_view('user_certs', :'agg', strategy => 'auto',
                              options => '{"refresh_interval": "10ms"}');
\d user_certs
CREATE TABLE notes (id bigint PRIMARY KEY, user_id bigint, body text);
\set keyed 'SELECT u.id AS user_id, n.id AS note_id, n.body FROM users u LEFT JOIN notes n ON n.user_id = u.id'
SELECT * FROM delta_join.explain(:'keyed', strategy => 'auto');
SELECT delta_join.create_view('user_notes', :'keyed', strategy => 'auto');
\d user_notes
\set un 'SELECT ''dom'' AS kind, d.id AS domain_id, NULL::bigint AS user_id, d.domain_name AS name FROM domains d UNION ALL SELECT ''user'', NULL, u.id, u.firstname FROM users u'
SELECT delta_join.create_view('things', :'un');
\d things
INSERT INTO notes VALUES (1, 1, 'n1');
INSERT INTO domains VALUES (13, 1, 'ada2.example', true);
INSERT INTO certs VALUES (101, 13, 'ca2');
DELETE FROM domains WHERE id = 11;
SELECT delta_join.wait();
SELECT * FROM user_certs ORDER BY user_id, domain_id;
SELECT * FROM diff('user_certs', :'agg');
SELECT * FROM diff('user_notes', :'keyed');
-- (the deleted domain's row stays, residual)
SELECT * FROM diff('things', :'un');

SELECT target, state FROM delta_join.status WHERE state <> 'active';
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views WHERE target LIKE 'oexact.%' ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA oexact CASCADE;
RESET client_min_messages;
RESET search_path;
