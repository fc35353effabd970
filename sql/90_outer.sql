--
-- Outer delta joins (DESIGN.md §2): LEFT, RIGHT and FULL, 2 or more tables,
-- mixed with inner joins.  A preserved-side row without partners has exactly
-- one null-extended row, which disappears when its first partner appears;
-- a null-extended row never sits beside a joined row of the same
-- preserved-side row.  The target's key holds every source's key, UNIQUE
-- NULLS NOT DISTINCT where a side can be null-extended.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA outer_j;
SET search_path = outer_j, public;

-- seed 003's users and domains
CREATE TABLE users (id bigint PRIMARY KEY, firstname text, lastname text);
CREATE TABLE domains (id bigint PRIMARY KEY, user_id bigint, domain_name text);
CREATE INDEX ON domains (user_id);
INSERT INTO users VALUES (1, 'Ada', 'Lovelace'), (2, 'Alan', 'Turing'), (3, 'Grace', 'Hopper');
INSERT INTO domains VALUES (10, 1, 'ada.example'), (11, 1, 'analytical.example'), (12, 2, 'enigma.example');

--
-- 1. LEFT JOIN, 1:N: Grace has no domain and appears once, with NULLs.
--
\set ud 'SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name FROM users u LEFT JOIN domains d ON d.user_id = u.id'
SELECT * FROM delta_join.explain(:'ud');
SELECT delta_join.create_view('user_domains', :'ud');
\d user_domains
SELECT * FROM user_domains ORDER BY user_id, domain_id;

-- her first domain replaces the null-extended row; a new user gets one
INSERT INTO domains VALUES (13, 3, 'cobol.example');
INSERT INTO users VALUES (4, 'Edsger', 'Dijkstra');
SELECT delta_join.wait('outer_j.user_domains');
SELECT * FROM user_domains ORDER BY user_id, domain_id;
SELECT * FROM diff('user_domains', :'ud');

-- the last domain of a user deleted: the user's null-extended row comes
-- back in place of the joined one (a user never has both)
DELETE FROM domains WHERE id = 13;
SELECT delta_join.wait('outer_j.user_domains');
SELECT * FROM user_domains WHERE user_id = 3 ORDER BY domain_id;
-- a domain moved to another user: the same for its old user, and the new
-- one's null-extended row goes
UPDATE domains SET user_id = 4 WHERE id = 12;
SELECT delta_join.wait('outer_j.user_domains');
SELECT * FROM user_domains WHERE user_id IN (2, 4) ORDER BY user_id, domain_id;
SELECT * FROM diff('user_domains', :'ud');
-- upsert semantics: a domain deleted while its user has others leaves its
-- row behind (a residual row, as for an inner join)
DELETE FROM domains WHERE id = 10;
SELECT delta_join.wait('outer_j.user_domains');
SELECT * FROM user_domains WHERE user_id = 1 ORDER BY domain_id;
SELECT * FROM diff('user_domains', :'ud');
-- no user has a null-extended row beside a joined one
SELECT user_id FROM user_domains GROUP BY user_id
HAVING count(*) FILTER (WHERE domain_id IS NULL) > 0 AND count(*) FILTER (WHERE domain_id IS NOT NULL) > 0;

--
-- 2. LEFT JOIN, N:1, and RIGHT JOIN: an order whose item is missing or late
--    still appears.
--
CREATE TABLE orders (merchant_id bigint, item_id bigint, order_id bigint, amount numeric(18,2),
  PRIMARY KEY (merchant_id, item_id, order_id));
CREATE TABLE items (merchant_id bigint, item_id bigint, item_name text, PRIMARY KEY (merchant_id, item_id));
INSERT INTO items VALUES (1, 1, 'mug');
INSERT INTO orders VALUES (1, 1, 100, 5), (1, 2, 101, 7);
\set oi 'SELECT o.merchant_id, o.item_id, o.order_id, i.item_name, o.amount FROM orders o LEFT JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id'
SELECT delta_join.create_view('order_items', :'oi');
\d order_items
SELECT * FROM order_items ORDER BY order_id;
INSERT INTO items VALUES (1, 2, 'cup');
SELECT delta_join.wait('outer_j.order_items');
SELECT * FROM order_items ORDER BY order_id;
SELECT * FROM diff('order_items', :'oi');
-- the item deleted: its orders are null-extended again (found by their
-- item columns, which the join equates with the item's key)
DELETE FROM items WHERE item_id = 2;
SELECT delta_join.wait('outer_j.order_items');
SELECT * FROM order_items ORDER BY order_id;
INSERT INTO items VALUES (1, 2, 'cup');
SELECT delta_join.wait('outer_j.order_items');
SELECT * FROM diff('order_items', :'oi');

\set io 'SELECT o.merchant_id, o.item_id, o.order_id, i.item_name FROM items i RIGHT JOIN orders o ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id'
SELECT delta_join.create_view('order_items_right', :'io');
INSERT INTO orders VALUES (2, 9, 102, 1);
SELECT delta_join.wait('outer_j.order_items_right');
SELECT * FROM diff('order_items_right', :'io');

--
-- 3. FULL JOIN: both sides preserved; the key is both sides' keys.
--
CREATE TABLE stock (merchant_id bigint, item_id bigint, qty int, PRIMARY KEY (merchant_id, item_id));
INSERT INTO stock VALUES (1, 1, 3), (5, 5, 1);
\set full 'SELECT i.merchant_id, i.item_id, i.item_name, s.merchant_id AS s_merchant_id, s.item_id AS s_item_id, s.qty FROM items i FULL JOIN stock s ON s.merchant_id = i.merchant_id AND s.item_id = i.item_id'
SELECT * FROM delta_join.explain(:'full');
SELECT delta_join.create_view('item_stock', :'full');
SELECT * FROM item_stock ORDER BY 1, 2, 4, 5;
INSERT INTO stock VALUES (1, 2, 8);
INSERT INTO items VALUES (5, 5, 'pot');
SELECT delta_join.wait('outer_j.item_stock');
SELECT * FROM item_stock ORDER BY 1, 2, 4, 5;
SELECT * FROM diff('item_stock', :'full');
-- a FULL JOIN whose key cannot be derived: one side's key is not selected
SELECT * FROM delta_join.explain('SELECT i.merchant_id, i.item_id, i.item_name, s.qty FROM items i FULL JOIN stock s ON s.merchant_id = i.merchant_id AND s.item_id = i.item_id');

--
-- 4. Three tables, inner and outer: orders of known merchants, with their
--    item if there is one.  A change of any source reaches the target.
--
CREATE TABLE merchants (merchant_id bigint PRIMARY KEY, merchant_name text);
INSERT INTO merchants VALUES (1, 'Acme'), (2, 'Bolt');
\set mix 'SELECT m.merchant_id, m.merchant_name, o.item_id, o.order_id, i.item_name FROM merchants m JOIN orders o ON o.merchant_id = m.merchant_id LEFT JOIN items i ON i.merchant_id = o.merchant_id AND i.item_id = o.item_id'
SELECT * FROM delta_join.explain(:'mix');
SELECT delta_join.create_view('merchant_orders', :'mix');
INSERT INTO items VALUES (2, 9, 'lamp');
UPDATE merchants SET merchant_name = 'Acme Inc' WHERE merchant_id = 1;
INSERT INTO orders VALUES (1, 3, 103, 2);
SELECT delta_join.wait('outer_j.merchant_orders');
SELECT * FROM merchant_orders ORDER BY order_id;
SELECT * FROM diff('merchant_orders', :'mix');

--
-- 5. The index prefix rule applies in each direction: without an index on
--    domains (user_id), a change of users cannot find its domains.
--
CREATE TABLE notes (id bigint PRIMARY KEY, user_id bigint, body text);
SELECT * FROM delta_join.explain('SELECT u.id AS user_id, n.id AS note_id, n.body FROM users u LEFT JOIN notes n ON n.user_id = u.id');
-- a WHERE condition that rejects NULLs makes a LEFT JOIN an inner join
SELECT * FROM delta_join.explain($$
  SELECT u.id AS user_id, d.id AS domain_id, d.domain_name FROM users u LEFT JOIN domains d ON d.user_id = u.id
  WHERE d.domain_name <> 'x' $$);

--
-- 6. TRUNCATE of a source in upsert mode: its rows are gone, as if deleted.
--    The nullable side truncated: every preserved row gets its
--    null-extended row back, in place of its joined rows.  The preserved
--    side truncated: its rows stay, residual, as deletes leave them -- and
--    in a FULL JOIN the other side's rows get their null-extended rows.
--
CREATE TABLE teams (id bigint PRIMARY KEY, name text);
CREATE TABLE players (id bigint PRIMARY KEY, team_id bigint, pname text);
CREATE INDEX ON players (team_id);
INSERT INTO teams VALUES (1, 'red'), (2, 'blue'), (3, 'green');
INSERT INTO players VALUES (10, 1, 'ann'), (11, 1, 'bob'), (12, 2, 'cy'), (13, 9, 'dee');
\set tp 'SELECT t.id AS team_id, t.name, p.id AS player_id, p.pname FROM teams t LEFT JOIN players p ON p.team_id = t.id'
\set tpf 'SELECT t.id AS team_id, t.name, p.id AS player_id, p.team_id AS p_team, p.pname FROM teams t FULL JOIN players p ON p.team_id = t.id'
SELECT delta_join.create_view('team_players', :'tp');
SELECT delta_join.create_view('team_players_full', :'tpf');
TRUNCATE players;
SELECT delta_join.wait('outer_j.team_players'), delta_join.wait('outer_j.team_players_full');
SELECT * FROM team_players ORDER BY team_id, player_id;
SELECT * FROM diff('team_players', :'tp');
SELECT * FROM team_players_full ORDER BY team_id, player_id;
SELECT * FROM diff('team_players_full', :'tpf');
INSERT INTO players VALUES (20, 1, 'eve'), (21, 3, 'fay');
SELECT delta_join.wait('outer_j.team_players'), delta_join.wait('outer_j.team_players_full');
TRUNCATE teams;
SELECT delta_join.wait('outer_j.team_players'), delta_join.wait('outer_j.team_players_full');
-- residual rows of the truncated teams; nothing the query has is missing
SELECT * FROM team_players ORDER BY team_id, player_id;
SELECT * FROM diff('team_players', :'tp');
-- the players' null-extended rows replace their joined ones
SELECT * FROM team_players_full ORDER BY team_id, player_id;
SELECT * FROM diff('team_players_full', :'tpf');

--
-- 7. Upsert mode, the select list holding only part of the nullable side's
--    key (the order's item_id is not in it): when the item goes, the rows
--    it was joined in are found by the part there is (merchant), and get
--    their null-extended row back in place of the joined one (it kept the
--    item's name before).  A select list with none of it is refused.
--
CREATE TABLE shop_orders (m bigint, o bigint, i bigint, PRIMARY KEY (m, o));
CREATE TABLE shop_items (m bigint, i bigint, iname text, PRIMARY KEY (m, i));
INSERT INTO shop_items VALUES (1, 1, 'a'), (1, 2, 'b'), (2, 1, 'c');
INSERT INTO shop_orders VALUES (1, 1, 1), (1, 2, 2), (1, 3, 1), (2, 1, 1);
\set so 'SELECT o.m, o.o, i.iname FROM shop_orders o LEFT JOIN shop_items i ON i.m = o.m AND i.i = o.i'
SELECT delta_join.create_view('shop_wide', :'so');
DELETE FROM shop_items WHERE m = 1 AND i = 2;
SELECT delta_join.wait('outer_j.shop_wide');
SELECT * FROM shop_wide ORDER BY m, o;
SELECT * FROM diff('shop_wide', :'so');
INSERT INTO shop_items VALUES (1, 2, 'b2');
SELECT delta_join.wait('outer_j.shop_wide');
SELECT * FROM diff('shop_wide', :'so');
CREATE TABLE shop_notes (note_id bigint PRIMARY KEY, note text);
CREATE INDEX ON shop_orders (i);
SELECT delta_join.create_view('shop_noted',
  'SELECT o.m, o.o, n.note FROM shop_orders o LEFT JOIN shop_notes n ON n.note_id = o.i');
-- ... nor by one of another type (an int key beside the bigint o.i)
CREATE TABLE shop_labels (label_id int PRIMARY KEY, label text);
SELECT delta_join.create_view('shop_labelled',
  'SELECT o.m, o.o, o.i, l.label FROM shop_orders o LEFT JOIN shop_labels l ON l.label_id = o.i');

--
-- 8. Upsert mode, a key whose equal values differ in their bytes (numeric
--    1.0 and 1.00): a preserved row whose key changes form in the same
--    transaction as its first partner arrives, or its last partner goes,
--    is still one row -- its null-extended row and its joined rows never
--    sit side by side.
--
CREATE TABLE tickets (ticket numeric PRIMARY KEY, queue int);
CREATE TABLE agents (agent text PRIMARY KEY, queue int);
CREATE INDEX ON tickets (queue);
CREATE INDEX ON agents (queue);
INSERT INTO tickets VALUES (1.0, 5), (2.0, 6);
INSERT INTO agents VALUES ('ann', 6);
SELECT $$
  SELECT t.ticket, t.queue, a.agent FROM tickets t LEFT JOIN agents a ON a.queue = t.queue
$$ AS tq \gset
SELECT delta_join.create_view('ticket_agents', :'tq');
BEGIN;
UPDATE tickets SET ticket = 1.00 WHERE ticket = 1;
INSERT INTO agents VALUES ('bob', 5);
COMMIT;
BEGIN;
UPDATE tickets SET ticket = 2 WHERE ticket = 2;
DELETE FROM agents WHERE agent = 'ann';
COMMIT;
SELECT delta_join.wait('outer_j.ticket_agents');
SELECT * FROM ticket_agents ORDER BY ticket, agent;
SELECT * FROM diff('ticket_agents', :'tq');

-- Two columns of the preserved side that an outer join's ON equates with
-- one column of the nullable side are equal only where the row has a
-- partner: the key keeps both (it was (k1, id): the rows (1, 2) and (1, 3)
-- without partners were one key, and only one of them was written).
CREATE TABLE pairs (k1 int, k2 int, PRIMARY KEY (k1, k2));
CREATE TABLE marks (id int PRIMARY KEY, v int);
CREATE INDEX ON marks (v);
SELECT $$
  SELECT p.k1, p.k2, m.id FROM pairs p LEFT JOIN marks m ON p.k1 = m.v AND p.k2 = m.v
$$ AS pm \gset
SELECT * FROM delta_join.explain(:'pm') LIMIT 1;
SELECT delta_join.create_view('pair_marks', :'pm');
SELECT delta_join.create_view('pair_marks_r', :'pm', options => '{"retract": true}');
INSERT INTO pairs VALUES (1, 1), (1, 2), (1, 3);
INSERT INTO marks VALUES (10, 1);
SELECT delta_join.wait();
SELECT * FROM pair_marks ORDER BY k1, k2;
SELECT * FROM diff('pair_marks', :'pm');
SELECT * FROM diff('pair_marks_r', :'pm');
DELETE FROM marks;
SELECT delta_join.wait();
SELECT * FROM diff('pair_marks', :'pm');
SELECT * FROM diff('pair_marks_r', :'pm');

-- A preserved row with many partners: 20,000 memos on one desk.  A change
-- of a few of them writes their rows and finds each one's sub-row by the
-- target key, not among the desk's 20,000 rows; the desk's slice, read
-- again because a partner may have left it, writes only rows with a
-- source null-extended (it wrote all 20,000, each searching the 20,000:
-- minutes for this batch).  Desk 2 loses its only memo to desk 3.
CREATE TABLE desks (id int PRIMARY KEY, name text);
CREATE TABLE memos (id int PRIMARY KEY, desk int, body text);
CREATE INDEX ON memos (desk);
INSERT INTO desks VALUES (1, 'big'), (2, 'small'), (3, 'empty');
INSERT INTO memos SELECT g, 1, 'n' || g FROM generate_series(1, 20000) g;
INSERT INTO memos VALUES (20001, 2, 'only');
SELECT $$
  SELECT d.id, d.name, n.id AS note, n.body FROM desks d LEFT JOIN memos n ON n.desk = d.id
$$ AS dn \gset
SELECT delta_join.create_view('desk_notes', :'dn');
BEGIN;
UPDATE memos SET body = body || '!' WHERE id <= 300;
UPDATE memos SET desk = 3 WHERE id = 20001;
COMMIT;
SELECT delta_join.wait(NULL, '60s');
SELECT * FROM desk_notes WHERE id <> 1 ORDER BY id, note;
SELECT count(*) FROM desk_notes WHERE id = 1 AND body LIKE '%!';
SELECT * FROM diff('desk_notes', :'dn');

-- Two nullable sources: desks LEFT JOIN memos LEFT JOIN tags, 20,000
-- memos on one desk and none with a tag, so every row of the desk is
-- null-extended (no tag).  The desk's slice, read again because a memo of
-- it changed, wrote each of its 20,000 rows, each searching the desk's
-- 20,000 rows for its sub- and super-rows (minutes); a row the target holds
-- unchanged is now left as it is.  Memo 20001 goes back to desk 2, then to 3.
CREATE TABLE memo_tags (id int PRIMARY KEY, memo int, tag text);
CREATE INDEX ON memo_tags (memo);
INSERT INTO memo_tags VALUES (1, 20001, 'only');
SELECT $$
  SELECT d.id, n.id AS note, n.body, t.id AS tag_id, t.tag
  FROM desks d LEFT JOIN memos n ON n.desk = d.id LEFT JOIN memo_tags t ON t.memo = n.id
$$ AS dnt \gset
SELECT delta_join.create_view('desk_note_tags', :'dnt');
BEGIN;
UPDATE memos SET body = body || '?' WHERE id <= 20;
UPDATE memos SET desk = 2 WHERE id = 20001;
COMMIT;
SELECT delta_join.wait(NULL, '60s');
SELECT * FROM desk_note_tags WHERE id <> 1 ORDER BY id, note;
SELECT count(*) FROM desk_note_tags WHERE id = 1 AND body LIKE '%?';
SELECT * FROM diff('desk_note_tags', :'dnt');
BEGIN;
UPDATE memos SET desk = 3 WHERE id = 20001;
INSERT INTO memo_tags VALUES (2, 5, 'five');
COMMIT;
SELECT delta_join.wait(NULL, '60s');
SELECT * FROM desk_note_tags WHERE id <> 1 OR note = 5 ORDER BY id, note;
SELECT * FROM diff('desk_note_tags', :'dnt');

-- A preserved side that is a join whose key is one source's: in
-- accounts JOIN branches LEFT JOIN tellers, the branch follows from the
-- account (target key (account, teller)).  Account 100 moves from a
-- branch without tellers to one with, and back.  The rows it had before
-- stayed beside the new ones in upsert mode ("account 100, branch 1, no
-- teller" beside "account 100, branch 2, teller 7", then the other way
-- round) when the select list held the branch's key, which was compared
-- as if the branch were a preserved row of its own.  Only the keys that
-- make up the result's key tell preserved rows apart.
CREATE TABLE branches (id int PRIMARY KEY, city text);
CREATE TABLE accounts (id int PRIMARY KEY, branch int);
CREATE TABLE tellers (id int PRIMARY KEY, branch int);
CREATE INDEX ON tellers (branch);
CREATE INDEX ON accounts (branch);
INSERT INTO branches VALUES (1, 'Oslo'), (2, 'Bergen');
INSERT INTO accounts VALUES (100, 1), (101, 1);
INSERT INTO tellers VALUES (7, 2);
SELECT $$
  SELECT a.id AS account, b.id AS branch, b.city, t.id AS teller
  FROM accounts a JOIN branches b ON b.id = a.branch LEFT JOIN tellers t ON t.branch = b.id
$$ AS abt \gset
SELECT delta_join.create_view('account_tellers', :'abt');
SELECT delta_join.create_view('account_tellers_r', :'abt', options => '{"retract": true}');
UPDATE accounts SET branch = 2 WHERE id = 100;
SELECT delta_join.wait();
SELECT * FROM account_tellers ORDER BY account, teller;
SELECT * FROM diff('account_tellers', :'abt');
SELECT * FROM diff('account_tellers_r', :'abt');
UPDATE accounts SET branch = 1 WHERE id = 100;
SELECT delta_join.wait();
SELECT * FROM account_tellers ORDER BY account, teller;
SELECT * FROM diff('account_tellers', :'abt');
SELECT * FROM diff('account_tellers_r', :'abt');

-- A source whose key the join ties to another's column is not in the
-- target key (the customer, by the order's cust_id), and does not tell
-- rows apart: "order 10, customer 1, item 100" is a super-row of "order
-- 10, customer 2, no item" all the same, which replaces it -- found among
-- the order's rows, not among those of customer 2 (where it is not).
CREATE TABLE buyers (id int PRIMARY KEY, name text);
CREATE TABLE purchases (id int PRIMARY KEY, buyer int);
CREATE INDEX ON purchases (buyer);
CREATE TABLE purchase_lines (id int PRIMARY KEY, purchase int);
CREATE INDEX ON purchase_lines (purchase);
INSERT INTO buyers VALUES (1, 'x'), (2, 'y');
INSERT INTO purchases VALUES (10, 1);
INSERT INTO purchase_lines VALUES (100, 10);
SELECT $$
  SELECT p.id AS purchase, b.id AS buyer, l.id AS line
  FROM purchases p LEFT JOIN buyers b ON b.id = p.buyer LEFT JOIN purchase_lines l ON l.purchase = p.id
$$ AS pbl \gset
SELECT delta_join.create_view('purchase_buyer_lines', :'pbl');
UPDATE purchases SET buyer = 2 WHERE id = 10;
DELETE FROM purchase_lines WHERE id = 100;
SELECT delta_join.wait();
SELECT * FROM purchase_buyer_lines ORDER BY 1, 2, 3;
-- the same with a FULL JOIN of an inner pair (sc by sb.cid, out of the
-- target key): sa 1 goes and sb 1 moves to sc 2 in one transaction;
-- "sa 1, sb 1, sc 1" is a super-row of "no sa, sb 1, sc 2"
CREATE TABLE sa (id int PRIMARY KEY, k int);
CREATE INDEX ON sa (k);
CREATE TABLE sb (id int PRIMARY KEY, cid int, k int);
CREATE INDEX ON sb (cid);
CREATE INDEX ON sb (k);
CREATE TABLE sc (id int PRIMARY KEY, v int);
INSERT INTO sa VALUES (1, 1);
INSERT INTO sc VALUES (1, 0), (2, 0);
INSERT INTO sb VALUES (1, 1, 1);
SELECT $$
  SELECT sa.id AS aid, sb.id AS bid, sc.id AS cid
  FROM sa FULL JOIN (sb JOIN sc ON sc.id = sb.cid) ON sa.k = sb.k
$$ AS sabc \gset
SELECT delta_join.create_view('sa_sb_sc', :'sabc');
SELECT delta_join.wait();
BEGIN;
DELETE FROM sa WHERE id = 1;
UPDATE sb SET cid = 2 WHERE id = 1;
COMMIT;
SELECT delta_join.wait();
SELECT * FROM sa_sb_sc ORDER BY 1, 2, 3;
SELECT * FROM diff('sa_sb_sc', :'sabc');

-- The preserved side keyed by a unique key whose NULLs are not distinct,
-- NULLs in it: a row of it whose partner leaves gets its null-extended
-- row back, found by its key with the NULLs (the key was taken without
-- them: the row never came, and a text key crashed the server).
CREATE TABLE nnd (x text, y text, k int, UNIQUE NULLS NOT DISTINCT (x, y));
CREATE INDEX ON nnd (k);
ALTER TABLE nnd REPLICA IDENTITY FULL;
CREATE TABLE nnd_partner (id int PRIMARY KEY, k int);
CREATE INDEX ON nnd_partner (k);
SELECT $$
  SELECT p.id AS pid, n.x, n.y FROM nnd n LEFT JOIN nnd_partner p ON n.k = p.k
$$ AS nndq \gset
SELECT delta_join.create_view('nnd_rows', :'nndq');
SELECT delta_join.create_view('nnd_rows_r', :'nndq', options => '{"retract": true}');
INSERT INTO nnd VALUES (NULL, NULL, 1), ('a', NULL, 1), (NULL, 'b', 2);
INSERT INTO nnd_partner VALUES (1, 1), (2, 2);
SELECT delta_join.wait();
UPDATE nnd_partner SET k = 2 WHERE id = 1;
SELECT delta_join.wait();
SELECT * FROM nnd_rows ORDER BY x, y, pid;
SELECT * FROM diff('nnd_rows', :'nndq');
SELECT * FROM diff('nnd_rows_r', :'nndq');

-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA outer_j CASCADE;
RESET client_min_messages;
RESET search_path;
