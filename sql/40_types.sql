--
-- Data types through create_view: the target gets the query's column
-- types, typmods and collations, and the backfill copies every value
-- exactly (collated text, numeric, timestamptz, jsonb, NULLs, a TOASTed
-- value over 1 MB); join keys may be of any btree-comparable type,
-- including cross-type and binary-compatible comparisons.
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE SCHEMA types;
SET search_path = types, public;
SET timezone = 'America/New_York';      -- timestamptz output is stable
SET datestyle = 'ISO, YMD';

--
-- 1. A wide join with many types.  The join key sku is text with collation
--    "C" on both sides; the target keeps that collation, and one output
--    column gets another collation in the select list.
--
CREATE TABLE products (
  sku    text COLLATE "C" PRIMARY KEY,
  title  text,
  price  numeric(12,3),
  specs  jsonb);
CREATE TABLE stock (
  warehouse int,
  sku       text COLLATE "C",
  qty       numeric,
  counted   timestamptz,
  note      varchar(20),
  PRIMARY KEY (warehouse, sku));
CREATE INDEX stock_sku_idx ON stock (sku);

INSERT INTO products VALUES
  ('A-1', 'Anvil', 19.990, '{"weight": {"kg": 50}, "tags": ["iron", "heavy"]}'),
  ('a-1', 'anvil (small)', 0.001, '{"weight": {"kg": 0.5}}'),   -- differs from A-1 only in case
  ('B-2', NULL, NULL, NULL),                                    -- NULLs everywhere but the key
  ('C-3', 'Café crème ☕', 123456789.123, '[1, "two", null, {"x": [true, false]}]'),
  ('D-4', '', -0.5, '{}');
INSERT INTO stock VALUES
  (1, 'A-1', 12345678901234567890.123456789, '2024-03-10 01:59:59-05', 'before DST'),
  (1, 'a-1', 'NaN', '2024-03-10 03:00:00-04', 'after DST'),
  (2, 'A-1', 0, 'infinity', NULL),
  (2, 'B-2', NULL, NULL, NULL),
  (2, 'C-3', 'Infinity', '-infinity', 'xyz'),
  (3, 'D-4', -1e-20, '1999-12-31 23:59:59.999999+00', ''),
  (3, 'Z-9', 1, '2030-01-01 00:00:00+00', 'no such product');                      -- not in the join

SELECT $$
  SELECT s.warehouse, s.sku, p.title, p.title COLLATE "POSIX" AS title_posix,
         p.price, s.qty, s.counted, s.note, p.specs
  FROM stock s JOIN products p ON s.sku = p.sku
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('stock_wide', :'q');
-- sku keeps collation "C", title_posix gets "POSIX"; numeric(12,3) and
-- varchar(20) keep their typmods
\d stock_wide
SELECT * FROM stock_wide ORDER BY warehouse, sku;
SELECT * FROM diff('stock_wide', :'q');
-- the collation "C" orders upper case before lower case, in the target too
SELECT sku FROM stock_wide WHERE warehouse = 1 ORDER BY sku;
-- jsonb values compare equal to the source's
SELECT count(*) AS same_specs
FROM stock_wide w JOIN products p ON p.sku = w.sku
WHERE w.specs = p.specs;

--
-- 2. A TOASTed value over 1 MB, in a backfilled row: the target holds the
--    same value (same length and md5), not a truncated or detoasted copy.
--
CREATE TABLE documents (doc_id int PRIMARY KEY, owner_id int, body text);
CREATE INDEX documents_owner_id_idx ON documents (owner_id);
CREATE TABLE owners (owner_id int PRIMARY KEY, owner_name text);
INSERT INTO owners VALUES (1, 'big'), (2, 'small');
INSERT INTO documents
  SELECT 1, 1, string_agg(md5(g::text), '') FROM generate_series(1, 40000) g;
INSERT INTO documents VALUES (2, 2, 'short'), (3, 1, NULL);
-- the source value is over 1 MB and stored out of line, in the TOAST table
SELECT doc_id, length(body) FROM documents ORDER BY doc_id;
SELECT pg_relation_size(reltoastrelid) > 0 AS source_toasted
FROM pg_class WHERE oid = 'documents'::regclass;

SELECT $$
  SELECT d.doc_id, o.owner_name, d.body
  FROM documents d JOIN owners o ON d.owner_id = o.owner_id
$$ AS q \gset
SELECT delta_join.create_view('owner_documents', :'q');
SELECT t.doc_id, length(t.body) AS target_length,
       length(t.body) = length(d.body) AS same_length,
       md5(t.body) = md5(d.body) AS same_md5
FROM owner_documents t JOIN documents d USING (doc_id)
ORDER BY t.doc_id;
SELECT * FROM diff('owner_documents', :'q');
SELECT pg_relation_size(reltoastrelid) > 0 AS target_toasted
FROM pg_class WHERE oid = 'owner_documents'::regclass;

-- The same through live maintenance: a new large document, an owner rename
-- that rewrites the row of the large one (its body arrives from the source's
-- TOAST table), and an update that changes another column only.
INSERT INTO documents
  SELECT 4, 2, string_agg(md5((-g)::text), '') FROM generate_series(1, 50000) g;
UPDATE owners SET owner_name = 'bigger' WHERE owner_id = 1;
UPDATE documents SET owner_id = 1 WHERE doc_id = 2;
SELECT delta_join.wait('owner_documents', '30s');
SELECT t.doc_id, t.owner_name, length(t.body) AS target_length,
       md5(t.body) = md5(d.body) AS same_md5
FROM owner_documents t JOIN documents d USING (doc_id)
ORDER BY t.doc_id;
SELECT * FROM diff('owner_documents', :'q');

--
-- 3. Join keys of other types: a cross-type comparison (integer = bigint),
--    a binary-compatible one (varchar = text), a domain, and uuid.  None
--    of them computes the key, so none breaks rule 3.
--
CREATE DOMAIN account_no AS int CHECK (VALUE > 0);
CREATE TABLE accounts (acct account_no PRIMARY KEY, code varchar(8), ref uuid, label text);
CREATE INDEX accounts_code_idx ON accounts (code);
CREATE INDEX accounts_ref_idx ON accounts (ref);
CREATE TABLE ledger (entry_id bigint PRIMARY KEY, acct bigint, code text, ref uuid, amount numeric);
CREATE INDEX ledger_acct_idx ON ledger (acct);
CREATE INDEX ledger_code_idx ON ledger (code);
CREATE INDEX ledger_ref_idx ON ledger (ref);
INSERT INTO accounts VALUES
  (1, 'CASH', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'cash'),
  (2, 'BANK', 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', 'bank');
INSERT INTO ledger VALUES
  (10, 1, 'CASH', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 5),
  (11, 2, 'BANK', 'b0eebc99-9c0b-4ef8-bb6d-6bb9bd380a12', -5),
  (12, 3, 'NONE', NULL, 1);

-- integer domain = bigint
SELECT $$
  SELECT l.entry_id, a.acct, a.label, l.amount
  FROM ledger l JOIN accounts a ON l.acct = a.acct
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('ledger_by_acct', :'q');
\d ledger_by_acct
SELECT * FROM ledger_by_acct ORDER BY entry_id;
SELECT * FROM diff('ledger_by_acct', :'q');

-- in retract mode a source's key must be in the output in a column of its
-- own type: apply finds the target's rows by the key's values as they are,
-- and through an index of integers a bigint 4294967297 would be read as 1
CREATE TABLE wide_keys (id bigint PRIMARY KEY, note text);
CREATE TABLE narrow_refs (ref_id int PRIMARY KEY, id int);
CREATE INDEX narrow_refs_id_idx ON narrow_refs (id);
INSERT INTO wide_keys VALUES (1, 'one'), (4294967297, '2^32 + 1');
INSERT INTO narrow_refs VALUES (1, 1);
SELECT * FROM delta_join.explain($$
  SELECT r.ref_id, r.id, w.note
  FROM narrow_refs r JOIN wide_keys w ON r.id = w.id $$, options => '{"retract": true}');
-- with w.id in the output, the row of key 1 stays when key 4294967297 goes
SELECT $$
  SELECT r.ref_id, r.id, w.id AS wide_id, w.note
  FROM narrow_refs r JOIN wide_keys w ON r.id = w.id
$$ AS q \gset
SELECT delta_join.create_view('narrow_exact', :'q', options => '{"retract": true}');
DELETE FROM wide_keys WHERE id = 4294967297;
SELECT delta_join.wait('types.narrow_exact');
SELECT * FROM narrow_exact;
SELECT * FROM diff('narrow_exact', :'q');

-- varchar(8) = text, and uuid = uuid
SELECT $$
  SELECT l.entry_id, a.acct, a.code, l.ref
  FROM ledger l JOIN accounts a ON a.code = l.code AND a.ref = l.ref
$$ AS q \gset
SELECT * FROM delta_join.explain(:'q');
SELECT delta_join.create_view('ledger_by_code', :'q');
\d ledger_by_code
SELECT * FROM ledger_by_code ORDER BY entry_id;
SELECT * FROM diff('ledger_by_code', :'q');

--
-- 4. An aggregate over these types: the aggregates are Postgres's own, so
--    each gives exactly what the query gives (numeric sums, NaN,
--    timestamptz min/max, jsonb_agg, string_agg as LISTAGG, bool_and).
--
SELECT $$
  SELECT warehouse, count(*) AS n, count(qty) AS n_qty, sum(qty) AS total_qty,
         min(counted) AS first_counted, max(counted) AS last_counted,
         string_agg(sku, ',' ORDER BY sku) AS skus,
         jsonb_agg(note ORDER BY sku) AS notes,
         bool_and(note IS NOT NULL) AS all_noted
  FROM stock GROUP BY warehouse
$$ AS q \gset
SELECT delta_join.create_view('stock_by_warehouse', :'q');
\d stock_by_warehouse
SELECT * FROM stock_by_warehouse ORDER BY warehouse;
SELECT * FROM diff('stock_by_warehouse', :'q');

--
-- 5. A join key stored out of line (TOAST), through the lookup cache: the
--    cache keeps the value looked up, not a pointer into the TOAST table of
--    the row it came from -- that row may be deleted and vacuumed while
--    the cache, emptied only by changes of the source looked up, lives on.
--
CREATE TABLE labels (code text PRIMARY KEY, label text);
CREATE TABLE tagged (tag_id int PRIMARY KEY, code text, n int);
CREATE INDEX tagged_code_idx ON tagged (code);
ALTER TABLE tagged SET (autovacuum_enabled = off, toast.autovacuum_enabled = off);
-- a code that compresses to about 2.5 kB: out of line in the row, and
-- still small enough for a btree entry
SELECT repeat('c', 5000) || string_agg(md5(g::text), '') AS code
FROM generate_series(1, 72) g \gset
INSERT INTO labels VALUES (:'code', 'long code');
SELECT $$
  SELECT t.tag_id, t.n, l.label FROM tagged t JOIN labels l ON t.code = l.code
$$ AS q \gset
SELECT delta_join.create_view('tagged_labels', :'q', options => '{"cache_enabled": true}');
INSERT INTO tagged VALUES (1, :'code', 10);
SELECT delta_join.wait('tagged_labels', '30s');
SELECT pg_relation_size(reltoastrelid) > 0 AS code_toasted
FROM pg_class WHERE oid = 'tagged'::regclass;
-- the row whose code the cache looked up goes, and so does its TOAST
DELETE FROM tagged WHERE tag_id = 1;
SELECT delta_join.wait('tagged_labels', '30s');
SELECT reltoastrelid::regclass AS tagged_toast FROM pg_class WHERE oid = 'tagged'::regclass \gset
VACUUM :tagged_toast;
-- the same code again, in a new row: a hit of the cache
INSERT INTO tagged VALUES (1, :'code', 20);
SELECT delta_join.wait('tagged_labels', '30s');
SELECT state, last_error, cache_hits > 0 AS cache_hit FROM delta_join.status
WHERE target = 'types.tagged_labels';
SELECT * FROM tagged_labels ORDER BY tag_id;
SELECT * FROM diff('tagged_labels', :'q');

-- Clean up.
-- every view's query gives the same rows under every plan (setup.sql)
SELECT * FROM oracle_views();
SELECT delta_join.drop_view(target) FROM delta_join.views ORDER BY target;
SET client_min_messages = warning;
DROP SCHEMA types CASCADE;
RESET client_min_messages;
RESET search_path;
RESET timezone;
RESET datestyle;
