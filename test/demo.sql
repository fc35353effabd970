--
-- delta_join demo: the e-commerce example of the design brief.
--
-- "make demo" runs this file with psql on a throwaway server set up for
-- delta_join (wal_level = logical, the library preloaded).  Orders reference
-- items; we keep a wide table of orders with their item names, and a summary
-- per merchant, up to date as the sources change.
--

CREATE EXTENSION delta_join;

-- The sources.  (merchant_id, item_id) is a prefix of both primary keys, so
-- either side can be looked up through its primary key index.
CREATE TABLE orders (
	merchant_id	bigint,
	item_id		bigint,
	order_id	bigint,
	amount		numeric(18,2),
	PRIMARY KEY (merchant_id, item_id, order_id));

CREATE TABLE items (
	merchant_id	bigint,
	item_id		bigint,
	item_name	text,
	PRIMARY KEY (merchant_id, item_id));

INSERT INTO items VALUES
	(1, 10, 'espresso machine'),
	(1, 11, 'coffee grinder'),
	(2, 20, 'tea kettle');

INSERT INTO orders VALUES
	(1, 10, 1001, 249.00),
	(1, 11, 1002, 89.50),
	(1, 10, 1003, 249.00),
	(2, 20, 2001, 35.00);

-- How delta_join would maintain the join: the driving side of each change,
-- the index each lookup uses, and the key of the result.
SELECT * FROM delta_join.explain($$
	SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
	FROM orders AS o
	JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);

-- A delta join: the wide table is created, filled, and from now on
-- maintained from the WAL, without triggers on the sources.
SELECT delta_join.create_view('order_item_wide', $$
	SELECT o.merchant_id, o.order_id, o.item_id, i.item_name, o.amount
	FROM orders AS o
	JOIN items  AS i ON o.merchant_id = i.merchant_id AND o.item_id = i.item_id $$);

-- A delta aggregate: the group key merchant_id is a leading prefix of the
-- primary key of orders.
SELECT delta_join.create_view('merchant_summary', $$
	SELECT merchant_id, count(*) AS order_count, sum(amount) AS total_amount
	FROM orders GROUP BY merchant_id $$);

-- Both targets are ordinary tables.
SELECT * FROM order_item_wide ORDER BY merchant_id, order_id;
SELECT * FROM merchant_summary ORDER BY merchant_id;

-- Live updates.  The writers below never wait for view maintenance: the
-- apply worker decodes their changes from the WAL after they commit.
INSERT INTO orders VALUES (1, 11, 1004, 89.50), (2, 20, 2002, 42.00);
UPDATE items SET item_name = 'espresso machine (v2)' WHERE merchant_id = 1 AND item_id = 10;
UPDATE orders SET amount = 199.00 WHERE order_id = 1003;
DELETE FROM orders WHERE order_id = 2001;

-- How far behind the views are right now (the worker may already be done)
SELECT target, changes_seen, lag_bytes FROM delta_join.status ORDER BY target;

-- Read-your-writes when you ask for it: wait until every change committed
-- before this call is applied.
SELECT delta_join.wait();

-- The renamed item reached both of its orders; the new orders are there;
-- the deleted order 2001 stays in the wide table (delta joins only upsert:
-- a residual row), while the merchant summary, an aggregate, counts it out.
SELECT * FROM order_item_wide ORDER BY merchant_id, order_id;
SELECT * FROM merchant_summary ORDER BY merchant_id;

-- Seed 003's users and domains, as a LEFT JOIN: every user appears, a
-- user with no domain once, with NULLs (Pavel, below).
CREATE TABLE users (
	id			bigint PRIMARY KEY,
	firstname	text,
	lastname	text);

CREATE TABLE domains (
	id			bigint PRIMARY KEY,
	user_id		bigint,
	domain_name	text);
-- the join key of domains must lead an index, for changes of users
CREATE INDEX ON domains (user_id);

INSERT INTO users VALUES (1, 'Egor', 'Myasnik'), (2, 'Pavel', 'Hvastun'), (3, 'Mitya', 'Volk');
INSERT INTO domains VALUES
	(1, 1, 'Approval'), (2, 1, 'Rejection'), (3, 1, 'Stoppage'), (4, 3, 'Cancellation');

SELECT delta_join.create_view('user_domains', $$
	SELECT u.id AS user_id, u.firstname, u.lastname, d.id AS domain_id, d.domain_name
	FROM users AS u
	LEFT JOIN domains AS d ON d.user_id = u.id $$);

-- The target's key is (user_id, domain_id), UNIQUE NULLS NOT DISTINCT:
-- domain_id is NULL in a user's null-extended row.
\d user_domains
SELECT * FROM user_domains ORDER BY user_id, domain_id;

-- Pavel's first domain arrives: his null-extended row is replaced by the
-- joined one -- never both.
INSERT INTO domains VALUES (5, 2, 'Escalation');
SELECT delta_join.wait('user_domains');
SELECT * FROM user_domains ORDER BY user_id, domain_id;

-- What the worker did, and how far behind it is now.
SELECT target, state, changes_seen, keys_applied, rows_upserted, rows_deleted,
	   lookups, lag_bytes, lag
FROM delta_join.status ORDER BY target;

-- The registered views.
SELECT target, kind, mode, strategy, state, sources
FROM delta_join.views ORDER BY target;
