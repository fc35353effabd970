--
-- Privileges of delta_join's own objects (issue 18, item 9): what an
-- ordinary role may use, and what it gets from each internal function.
-- delta_join--0.1--0.2.sql, section 1, says who calls each and why.  (TAP
-- test t/040_slot_pin.pl shows that no ordinary role makes the database's
-- replication slot or an apply worker without a view.)
--
\set ECHO none
\i sql/include/setup.sql
\set ECHO all
CREATE ROLE dj_eve;
CREATE SCHEMA eve AUTHORIZATION dj_eve;

--
-- 1. What an ordinary role may use.  It executes the interface and what the
--    public views call as the role reading them; the internal functions are
--    for superusers.  A function added later shows up here, to be decided
--    on: revoked from PUBLIC unless a view calls it as its reader.
--
SELECT p.oid::regprocedure AS function,
       has_function_privilege('dj_eve', p.oid, 'EXECUTE') AS executes
FROM pg_proc p
JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'delta_join')
ORDER BY p.oid::regprocedure::text;
SELECT c.oid::regclass AS relation, c.relkind,
       has_table_privilege('dj_eve', c.oid, 'SELECT') AS "select",
       has_table_privilege('dj_eve', c.oid, 'INSERT') AS "insert",
       has_table_privilege('dj_eve', c.oid, 'UPDATE') AS "update",
       has_table_privilege('dj_eve', c.oid, 'DELETE') AS "delete",
       has_table_privilege('dj_eve', c.oid, 'TRUNCATE') AS "truncate"
FROM pg_class c
JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e'
WHERE d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'delta_join')
ORDER BY c.oid::regclass::text;
-- a view's last error may quote rows: its column is not readable
SELECT has_column_privilege('dj_eve', 'delta_join.view_catalog', 'last_error', 'SELECT') AS last_error,
       has_column_privilege('dj_eve', 'delta_join.view_catalog', 'state', 'SELECT') AS state,
       has_type_privilege('dj_eve', 'delta_join._shard_group', 'USAGE') AS shard_group_type,
       has_schema_privilege('dj_eve', 'delta_join', 'USAGE') AS schema_usage,
       has_schema_privilege('dj_eve', 'delta_join', 'CREATE') AS schema_create;

--
-- 2. The internal functions, called by the ordinary role: refused, with
--    SQLSTATE 42501 (insufficient_privilege).  _prepare_node() made the
--    database's slot and an apply worker with no view, which kept WAL and
--    made DROP DATABASE fail.
--
SET ROLE dj_eve;
\set VERBOSITY sqlstate
SELECT delta_join._prepare_node();
\set VERBOSITY default
SELECT delta_join._prepare_node();
SELECT delta_join._sync_node();
SELECT delta_join._wait_node(NULL, 0);
SELECT delta_join._check_environment();
SELECT delta_join._keep_first(1, 2);
SELECT delta_join._keep_last(1, 2);
SELECT delta_join._on_ddl_start();
SELECT delta_join._on_ddl_end();
SELECT delta_join._on_sql_drop();
SELECT delta_join._guard_target();
SELECT delta_join._on_distributed_catalog();
-- nor may the role put the trigger functions on a table of its own (the
-- definitions' trigger would read its rows as definitions)
CREATE TABLE eve.defs (target text, query text);
CREATE TRIGGER defs AFTER INSERT ON eve.defs
  FOR EACH ROW EXECUTE FUNCTION delta_join._on_distributed_catalog();
CREATE TRIGGER guard BEFORE INSERT ON eve.defs
  FOR EACH STATEMENT EXECUTE FUNCTION delta_join._guard_target();
-- the aggregates whose support functions those are work for everyone
SELECT delta_join.first_value(x ORDER BY x) AS first, delta_join.last_value(x ORDER BY x) AS last
FROM generate_series(1, 3) x;
-- nor write the catalog, or take view numbers
INSERT INTO delta_join.view_catalog (target, kind, strategy, options, settings, created_lsn, applied_lsn)
  VALUES ('eve.defs', 'join', 'eventual', '{}', '{}', '0/0', '0/0');
DELETE FROM delta_join.source_catalog;
SELECT last_error FROM delta_join.view_catalog;
SELECT nextval('delta_join.view_catalog_view_id_seq');
-- the definitions of distributed views are written as the caller, and their
-- trigger checks the writer (here: no Citus at all)
INSERT INTO delta_join.distributed_catalog (target, query, search_path, settings)
  VALUES ('eve.defs', 'SELECT 1', 'eve', '{}');
-- nor change the extension's objects
ALTER VIEW delta_join.status RENAME TO my_status;
CREATE FUNCTION delta_join.mine() RETURNS int LANGUAGE sql AS 'SELECT 1';
RESET ROLE;

--
-- 3. What the public views call, called directly by the ordinary role: it
--    learns nothing the views would not show it.  _stat() gives a view's
--    retry reason (it quotes an error) only to roles that can act as the
--    target's owner, as delta_join.status does (t/040_slot_pin.pl shows
--    one).
--
CREATE TABLE eve.src (id int PRIMARY KEY, v text);
ALTER TABLE eve.src OWNER TO dj_eve;
SET ROLE dj_eve;
SELECT delta_join.create_view('eve.copy', 'SELECT id, v FROM eve.src');
SELECT s.view_id IS NOT NULL AS counted, s.retry_reason
FROM delta_join.views v
JOIN delta_join.view_catalog c ON c.target = 'eve.copy'::regclass
LEFT JOIN delta_join._stat() s ON s.view_id = c.view_id
WHERE v.target = 'eve.copy';
SELECT slot_exists, views_room FROM delta_join._database_state();
SELECT delta_join._database_wait();
SELECT delta_join._name('eve.copy'), delta_join._owner('eve.copy')::regrole,
       delta_join._mode('full', '{}');
-- (no Citus here: the distributed views' functions have nothing to say)
SELECT delta_join._is_coordinator();
SELECT count(*) FROM delta_join._distributed_targets();
SELECT count(*) FROM delta_join._node_shard_groups();
SELECT count(*) FROM delta_join._shard_groups();
SELECT delta_join.drop_view('eve.copy');
RESET ROLE;

DROP SCHEMA eve CASCADE;
DROP ROLE dj_eve;
