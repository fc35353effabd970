/* delta_join--0.1--0.2.sql */

\echo Use "ALTER EXTENSION delta_join UPDATE" to load this file. \quit

--
-- Version 0.2: every change to the SQL objects since the 0.1 release, in
-- the order made.  A fresh install of 0.2 runs delta_join--0.1.sql, then
-- this script, so a database made with 0.2 and one updated from 0.1 are the
-- same.  Add a change as a numbered section at the end, saying what it
-- changes and why.
--
-- The library (src/registry/catalog.c, catalog_version_problem) runs the
-- SQL objects of every version from DJ_OLDEST_VERSION to DJ_VERSION
-- (src/base/delta_join.h): a change that the library cannot run on the
-- older objects raises DJ_OLDEST_VERSION, and until ALTER EXTENSION
-- delta_join UPDATE the database's views then wait, saying so in
-- delta_join.status.
--

--
-- 1. Privileges of the internal objects (issue 18, item 9).
--
-- In 0.1 every function of the schema was executable by PUBLIC, internal
-- ones included: any role could call _prepare_node() and make the
-- database's replication slot, with an apply worker and no view, so that
-- WAL was retained and DROP DATABASE refused.  Each object the scripts
-- create, who may use it, and why:
--
--   interface: create_view, explain, drop_view, refresh, wait, the
--   aggregates first_value and last_value, the views views and status:
--   PUBLIC.  They check the caller's rights themselves (see README, "A view
--   is bound once, and runs as its target's owner").
--
--   Called by the public views as the role reading them (PostgreSQL checks
--   EXECUTE on a view's functions against that role): PUBLIC, and safe to
--   call directly.
--     _stat()					counters; retry_reason only for the roles that
--								can act as the target's owner, as in status
--     _database_state()		worker, slot, room: nothing of any view
--     _database_wait()			(new, section 2)
--     _additive(view_id)		(new, section 3) whether the worker adds the
--								view's batches: nothing of its rows
--     _name(), _owner(), _mode()
--								read pg_class, or compute from arguments
--     _is_coordinator(), _distributed_targets(), _shard_groups(),
--     _node_shard_groups()	Citus: the coordinator's shard_groups runs
--								_node_shard_groups() on every node as the
--								reader, which reads _local_status there as
--								that role
--     type _shard_group			the rows _shard_groups() reads from the nodes
--     views _local_status, shard_groups, distributed_views,
--     distributed_status		SELECT, as in 0.1
--
--   Internal, executable by superusers only (REVOKE from PUBLIC below):
--     _check_environment()	run by the install script
--     _prepare_node(), _sync_node(), _wait_node()
--								run on every Citus node by the coordinator's
--								create_view and wait(), which call them as
--								Citus's extension owner (distributed.c), the
--								role Citus itself reaches the nodes as
--     _keep_first(), _keep_last()
--								support functions of first_value and
--								last_value: PostgreSQL checks them against
--								the aggregates' owner
--     _on_distributed_catalog(), _guard_target()
--								trigger functions: a trigger runs without
--								EXECUTE, which only CREATE TRIGGER checks;
--								delta_join creates both triggers as a
--								superuser, and nobody else may put them on a
--								table of their own (_on_distributed_catalog
--								reads any row as a definition)
--     _on_ddl_start(), _on_ddl_end(), _on_sql_drop()
--								event trigger functions (likewise)
--
--   Tables (unchanged): view_catalog (SELECT on every column but
--   last_error, which may quote rows) and source_catalog (SELECT) are
--   written by the extension's functions as the bootstrap superuser;
--   distributed_catalog is written by create_view, refresh and drop_view on
--   the Citus coordinator as the caller, over the connections Citus opens
--   as the caller, and its trigger lets only a target's owner write its
--   row.  The sequence of view_catalog has no grant.  The schema: USAGE.
--
-- A new function is executable by PUBLIC unless its section revokes it
-- (sql/86_privileges lists what PUBLIC may execute, so that a new one is
-- noticed).
--
REVOKE EXECUTE ON FUNCTION
	delta_join._check_environment(),
	delta_join._prepare_node(),
	delta_join._sync_node(),
	delta_join._wait_node(text, bigint),
	delta_join._keep_first(anyelement, anyelement),
	delta_join._keep_last(anyelement, anyelement),
	delta_join._on_distributed_catalog(),
	delta_join._guard_target(),
	delta_join._on_ddl_start(),
	delta_join._on_ddl_end(),
	delta_join._on_sql_drop()
FROM PUBLIC;

--
-- 2. Why a database's views wait, whatever their own state (issue 18,
--    item 12, and upgrades): the library does not run the version of these
--    objects (until ALTER EXTENSION delta_join UPDATE, or a restart that
--    loads the library installed with them), or the database's replication
--    slot is being created and waits for transactions to end (a prepared
--    transaction ends only when committed or rolled back).  status shows
--    it as the reason of every view, stalled.
--
CREATE FUNCTION delta_join._database_wait()
RETURNS text
AS 'MODULE_PATHNAME', 'dj_database_wait'
LANGUAGE C STRICT VOLATILE;

-- _local_status as in 0.1, with _database_wait() as the first reason
CREATE OR REPLACE VIEW delta_join._local_status AS
SELECT delta_join._name(v.target) AS target,
	   CASE WHEN v.state = 'error' THEN 'error'
			WHEN r.reason IS NOT NULL THEN 'stalled'
			ELSE v.state END AS state,
	   coalesce(r.reason, CASE WHEN o.owner_sees THEN s.retry_reason END) AS reason,
	   p.applied_lsn,
	   CASE WHEN v.state = 'error' THEN NULL ELSE p.behind END AS lag_bytes,
	   -- now minus the commit time of the newest applied change; zero once
	   -- everything written so far is applied
	   CASE WHEN s.applied_commit_time IS NULL OR p.behind = 0 THEN interval '0'
			ELSE greatest(pg_catalog.now() - s.applied_commit_time, interval '0')
	   END AS lag,
	   coalesce(s.changes_seen, 0) AS changes_seen,
	   coalesce(s.keys_applied, 0) AS keys_applied,
	   coalesce(s.rows_upserted, 0) AS rows_upserted,
	   coalesce(s.rows_deleted, 0) AS rows_deleted,
	   coalesce(s.rows_unchanged, 0) AS rows_unchanged,
	   coalesce(s.lookups, 0) AS lookups,
	   coalesce(s.cache_hits, 0) AS cache_hits,
	   CASE WHEN o.owner_sees THEN v.last_error
			WHEN v.last_error IS NOT NULL THEN '(shown to the owner of the target only)' END AS last_error,
	   v.last_error_time,
	   v.stale_since_lsn,
	   s.last_recompute,		-- keyed and full recompute: when it last ran
	   delta_join._mode(v.path, v.options) AS mode
FROM delta_join.view_catalog v
LEFT JOIN delta_join._stat() s USING (view_id)
CROSS JOIN delta_join._database_state() d
CROSS JOIN delta_join._database_wait() dw(reason)
CROSS JOIN LATERAL (
	-- errors may quote rows: only roles acting as the target's owner see them
	SELECT pg_catalog.pg_has_role(delta_join._owner(v.target), 'USAGE') AS owner_sees) o
CROSS JOIN LATERAL (
	SELECT CASE WHEN pg_catalog.pg_is_in_recovery()
				THEN pg_catalog.pg_last_wal_replay_lsn()
				ELSE pg_catalog.pg_current_wal_lsn() END AS now_lsn) w
CROSS JOIN LATERAL (
	SELECT greatest(v.applied_lsn, s.applied_lsn) AS applied_lsn,
		   greatest(pg_catalog.pg_wal_lsn_diff(w.now_lsn,
											   greatest(v.applied_lsn, s.applied_lsn)),
					0)::bigint AS behind) p
CROSS JOIN LATERAL (
	SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL
				WHEN dw.reason IS NOT NULL THEN dw.reason
				WHEN NOT d.slot_exists
				THEN 'the replication slot of this database is missing: refresh the view'
				WHEN d.worker_failure IS NOT NULL AND p.behind > 0
				THEN 'the apply worker failed and is restarted: ' OPERATOR(pg_catalog.||) d.worker_failure
				WHEN d.worker_pid IS NULL AND p.behind > 0
				THEN 'no apply worker runs for this database (one starts within seconds; if this stays, see the server log: max_worker_processes)'
				WHEN s.view_id IS NULL AND NOT d.views_room
				THEN 'the view has no place in shared memory (delta_join.max_views): its changes are not applied'
		   END AS reason) r;

--
-- 3. The detail and hint of a view's error (issue 19): a view in error
--    keeps the detail and hint of the error that stopped it, not only its
--    message, and status shows them after the columns of 0.1 (to the
--    roles that can act as the target's owner only, as last_error: they
--    may quote rows; the new columns of view_catalog are not granted to
--    PUBLIC).  The library writes them only into a catalog that has them
--    (src/registry/catalog.c, catalog_has_error_details): until this
--    update, a view's error keeps its message alone.
--
ALTER TABLE delta_join.view_catalog
	ADD COLUMN last_error_detail text,
	ADD COLUMN last_error_hint text;

-- Whether the worker keeps a view by adding each batch to its groups (an
-- aggregate over joins, issue 22): status says so in its mode.
CREATE FUNCTION delta_join._additive(view_id int) RETURNS boolean
AS 'MODULE_PATHNAME', 'dj_additive'
LANGUAGE C STRICT STABLE;

-- _local_status as in section 2, with the error's detail and hint last,
-- and a mode that says when a view is kept by adding
CREATE OR REPLACE VIEW delta_join._local_status AS
SELECT delta_join._name(v.target) AS target,
	   CASE WHEN v.state = 'error' THEN 'error'
			WHEN r.reason IS NOT NULL THEN 'stalled'
			ELSE v.state END AS state,
	   coalesce(r.reason, CASE WHEN o.owner_sees THEN s.retry_reason END) AS reason,
	   p.applied_lsn,
	   CASE WHEN v.state = 'error' THEN NULL ELSE p.behind END AS lag_bytes,
	   -- now minus the commit time of the newest applied change; zero once
	   -- everything written so far is applied
	   CASE WHEN s.applied_commit_time IS NULL OR p.behind = 0 THEN interval '0'
			ELSE greatest(pg_catalog.now() - s.applied_commit_time, interval '0')
	   END AS lag,
	   coalesce(s.changes_seen, 0) AS changes_seen,
	   coalesce(s.keys_applied, 0) AS keys_applied,
	   coalesce(s.rows_upserted, 0) AS rows_upserted,
	   coalesce(s.rows_deleted, 0) AS rows_deleted,
	   coalesce(s.rows_unchanged, 0) AS rows_unchanged,
	   coalesce(s.lookups, 0) AS lookups,
	   coalesce(s.cache_hits, 0) AS cache_hits,
	   CASE WHEN o.owner_sees THEN v.last_error
			WHEN v.last_error IS NOT NULL THEN '(shown to the owner of the target only)' END AS last_error,
	   v.last_error_time,
	   v.stale_since_lsn,
	   s.last_recompute,		-- keyed and full recompute: when it last ran
	   CASE WHEN delta_join._additive(v.view_id)
			THEN 'keyed recompute (groups through joins, additive)'
			ELSE delta_join._mode(v.path, v.options) END AS mode,
	   CASE WHEN o.owner_sees THEN v.last_error_detail END AS last_error_detail,
	   CASE WHEN o.owner_sees THEN v.last_error_hint END AS last_error_hint
FROM delta_join.view_catalog v
LEFT JOIN delta_join._stat() s USING (view_id)
CROSS JOIN delta_join._database_state() d
CROSS JOIN delta_join._database_wait() dw(reason)
CROSS JOIN LATERAL (
	-- errors may quote rows: only roles acting as the target's owner see them
	SELECT pg_catalog.pg_has_role(delta_join._owner(v.target), 'USAGE') AS owner_sees) o
CROSS JOIN LATERAL (
	SELECT CASE WHEN pg_catalog.pg_is_in_recovery()
				THEN pg_catalog.pg_last_wal_replay_lsn()
				ELSE pg_catalog.pg_current_wal_lsn() END AS now_lsn) w
CROSS JOIN LATERAL (
	SELECT greatest(v.applied_lsn, s.applied_lsn) AS applied_lsn,
		   greatest(pg_catalog.pg_wal_lsn_diff(w.now_lsn,
											   greatest(v.applied_lsn, s.applied_lsn)),
					0)::bigint AS behind) p
CROSS JOIN LATERAL (
	SELECT CASE WHEN pg_catalog.pg_is_in_recovery() THEN NULL
				WHEN dw.reason IS NOT NULL THEN dw.reason
				WHEN NOT d.slot_exists
				THEN 'the replication slot of this database is missing: refresh the view'
				WHEN d.worker_failure IS NOT NULL AND p.behind > 0
				THEN 'the apply worker failed and is restarted: ' OPERATOR(pg_catalog.||) d.worker_failure
				WHEN d.worker_pid IS NULL AND p.behind > 0
				THEN 'no apply worker runs for this database (one starts within seconds; if this stays, see the server log: max_worker_processes)'
				WHEN s.view_id IS NULL AND NOT d.views_room
				THEN 'the view has no place in shared memory (delta_join.max_views): its changes are not applied'
		   END AS reason) r;

-- status as in 0.1, with the columns _local_status added (none for a
-- distributed view, whose shard groups report their errors' messages)
CREATE OR REPLACE VIEW delta_join.status AS
SELECT * FROM delta_join._local_status
UNION ALL
SELECT target, state, reason, NULL::pg_lsn, lag_bytes, lag, changes_seen, keys_applied,
	   rows_upserted, rows_deleted, rows_unchanged, lookups, cache_hits, last_error,
	   last_error_time, NULL::pg_lsn, NULL::timestamptz,
	   mode || ' (distributed, ' || shard_groups || ' shard groups)',
	   NULL::text, NULL::text
FROM delta_join.distributed_status;

--
-- 4. Aggregates over joins maintained per dirty group (issue 22, item 1):
--    a view's path may be 'join groups', keyed recompute of the groups a
--    batch's changed rows leave and enter, found through the join; views
--    and status name it in their mode.
--
ALTER TABLE delta_join.view_catalog
	DROP CONSTRAINT view_catalog_path_check,
	ADD CONSTRAINT view_catalog_path_check
		CHECK (path IN ('delta', 'keyed', 'full', 'join groups'));

CREATE OR REPLACE FUNCTION delta_join._mode(path text, options jsonb) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN path = 'keyed' THEN 'keyed recompute'
				  WHEN path = 'join groups' THEN 'keyed recompute (groups through joins)'
				  WHEN path = 'full' THEN 'full recompute'
				  WHEN (options ->> 'retract')::boolean THEN 'delta (retract)'
				  ELSE 'delta' END $$;

--
-- 5. Concurrent create and refresh (issue 21, items 1 to 3).
--
-- create_view(..., concurrently => true) and refresh(target, concurrently
-- => true) fill the target without locking writers of the sources out
-- (src/ops/concurrent.c): the view is registered in state 'backfilling',
-- whose changes the apply worker captures but holds back, then filled
-- under a newer snapshot, then made 'active'.  A view left 'backfilling' by
-- a process that ended is put in error by the worker.  The functions get
-- the new argument last, with a default, so every call of 0.1 means what
-- it meant; they are made again, and those of 0.1 dropped once their
-- privileges are carried over (a second signature would make the calls
-- of 0.1 ambiguous).  The library reads a missing argument as
-- false, so it runs the functions of 0.1 as before.
--
-- delta_join.progress shows each concurrent create or refresh running, as
-- pg_stat_progress_create_index does for CREATE INDEX CONCURRENTLY.
--
ALTER TABLE delta_join.view_catalog
	DROP CONSTRAINT view_catalog_state_check,
	ADD CONSTRAINT view_catalog_state_check
		CHECK (state IN ('active', 'error', 'backfilling'));

-- An object of the database's that depends on one of them (a function
-- whose body is SQL-standard, BEGIN ATOMIC, calling it) would keep the
-- update from dropping it: say so under the name the user knows.
DO $$
DECLARE
	dep record;
BEGIN
	SELECT pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid) AS what,
		   'delta_join.' OPERATOR(pg_catalog.||) p.proname OPERATOR(pg_catalog.||) '('
		   OPERATOR(pg_catalog.||) pg_catalog.pg_get_function_identity_arguments(p.oid)
		   OPERATOR(pg_catalog.||) ')' AS func
	INTO dep
	FROM pg_catalog.pg_depend d
	JOIN pg_catalog.pg_proc p ON p.oid OPERATOR(pg_catalog.=) d.refobjid
	WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
	  AND d.refobjid OPERATOR(pg_catalog.=) ANY (ARRAY[
			'delta_join.create_view(text, text, text, jsonb)'::pg_catalog.regprocedure,
			'delta_join.refresh(text)'::pg_catalog.regprocedure]::pg_catalog.oid[])
	  AND d.deptype OPERATOR(pg_catalog.=) 'n'
	ORDER BY 1
	LIMIT 1;
	IF FOUND THEN
		RAISE EXCEPTION 'cannot update delta_join: % depends on function %, which the update replaces',
			dep.what, dep.func
			USING ERRCODE = 'dependent_objects_still_exist',
				  DETAIL = 'The function gains the argument concurrently, so the update makes it anew.',
				  HINT = 'Drop that object, run ALTER EXTENSION delta_join UPDATE, then make it again.';
	END IF;
END $$;
ALTER FUNCTION delta_join.create_view(text, text, text, jsonb) RENAME TO _create_view_0_1;
CREATE FUNCTION delta_join.create_view(target text, query text,
									   strategy text DEFAULT NULL,
									   options jsonb DEFAULT NULL,
									   concurrently boolean DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'dj_create_view'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

ALTER FUNCTION delta_join.refresh(text) RENAME TO _refresh_0_1;
CREATE FUNCTION delta_join.refresh(target text, concurrently boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dj_refresh'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The privileges an administrator gave the functions of 0.1 (REVOKE
-- EXECUTE ... FROM PUBLIC, so that only some roles make views; GRANT ...
-- TO a role) are the new functions' too: made anew, they were executable
-- by PUBLIC again.  Granted here, they would count as the extension's
-- initial privileges, which pg_dump leaves out and a restore would not
-- give back: the new functions keep none, as after a fresh install (the
-- shared dependency PostgreSQL 17 and later record for them goes too).
DO $$
DECLARE
	pair record;
	item record;
BEGIN
	FOR pair IN
		SELECT o.proacl, o.proowner, p.new
		FROM (VALUES ('delta_join._create_view_0_1(text, text, text, jsonb)'::pg_catalog.regprocedure,
					  'delta_join.create_view(text, text, text, jsonb, boolean)'::pg_catalog.regprocedure),
					 ('delta_join._refresh_0_1(text)'::pg_catalog.regprocedure,
					  'delta_join.refresh(text, boolean)'::pg_catalog.regprocedure)) AS p(old, new)
		JOIN pg_catalog.pg_proc o ON o.oid OPERATOR(pg_catalog.=) p.old
		WHERE o.proacl IS NOT NULL
	LOOP
		EXECUTE pg_catalog.format('REVOKE ALL ON FUNCTION %s FROM PUBLIC, %I', pair.new,
								  pg_catalog.pg_get_userbyid(pair.proowner));
		FOR item IN
			SELECT a.grantee, a.is_grantable FROM pg_catalog.aclexplode(pair.proacl) a
		LOOP
			EXECUTE pg_catalog.format('GRANT EXECUTE ON FUNCTION %s TO %s%s', pair.new,
									  CASE WHEN item.grantee OPERATOR(pg_catalog.=) 0 THEN 'PUBLIC'
										   ELSE pg_catalog.quote_ident(pg_catalog.pg_get_userbyid(item.grantee)) END,
									  CASE WHEN item.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
		END LOOP;
		DELETE FROM pg_catalog.pg_init_privs
		WHERE classoid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
		  AND objoid OPERATOR(pg_catalog.=) pair.new;
		DELETE FROM pg_catalog.pg_shdepend
		WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_proc'::pg_catalog.regclass
		  AND objid OPERATOR(pg_catalog.=) pair.new
		  AND deptype OPERATOR(pg_catalog.=) 'i';
	END LOOP;
END $$;
DROP FUNCTION delta_join._create_view_0_1(text, text, text, jsonb);
DROP FUNCTION delta_join._refresh_0_1(text);

-- the concurrent creates and refreshes running, from shared memory
CREATE FUNCTION delta_join._progress(OUT view_id int, OUT pid int, OUT command text,
									 OUT phase text, OUT rows_done bigint,
									 OUT rows_expected bigint,
									 OUT started timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dj_progress'
LANGUAGE C STRICT VOLATILE;

-- (the view over it, delta_join.progress, is made in section 8, with the
-- rows of distributed views)

--
-- 6. The replication origin of new targets' fills (issue 21): create_view
-- marks the rows it writes into a target it made, that no view and no
-- publication reads, with this origin, and the apply worker's decoding
-- skips them before queueing them (src/ops/target.c, fill_origin;
-- src/capture/plugin.c).  Origins belong to the cluster: the first
-- database to install or update the extension makes it, and it outlives
-- the extension (it holds no WAL and no state).  Without it fills are
-- decoded, and thrown away, as in 0.1.
--
DO $$
BEGIN
	IF NOT EXISTS (SELECT FROM pg_catalog.pg_replication_origin
				   WHERE roname OPERATOR(pg_catalog.=) 'delta_join fill') THEN
		PERFORM pg_catalog.pg_replication_origin_create('delta_join fill');
	END IF;
EXCEPTION
	WHEN unique_violation THEN
		NULL;					-- made meanwhile from another database
END
$$;

--
-- 7. Concurrent create and refresh of distributed views (issue 21): the
-- coordinator's create_view and refresh with concurrently => true run
-- these on every node, as Citus's extension owner, as they run
-- _prepare_node() (src/citus/distributed.c); internal, as those are.  A
-- definition whose create runs concurrently has refresh time '-infinity'
-- until every node has made its views (src/citus/definition.c): the table
-- stays as it was, since Citus would not give a new column to the nodes'
-- copies of a reference table.
--
CREATE FUNCTION delta_join._backfill_node(target text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dj_backfill_node'
LANGUAGE C STRICT VOLATILE;

CREATE FUNCTION delta_join._refresh_node_concurrently(target text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dj_refresh_node_concurrently'
LANGUAGE C STRICT VOLATILE;

REVOKE EXECUTE ON FUNCTION
	delta_join._backfill_node(text),
	delta_join._refresh_node_concurrently(text)
FROM PUBLIC;

--
-- 8. The progress of a distributed view's concurrent create or refresh, on
-- the coordinator (issue 21, item 3): each node fills its shard groups'
-- views one after the other, and delta_join.progress on the coordinator
-- shows, under the distributed view's name, the group each node is at,
-- with the node.  Like shard_groups, it asks every node as the reader
-- (_on_nodes, which both now use).  The functions are called by the public
-- views as their reader: PUBLIC, and they read only what those views show.
--
CREATE FUNCTION delta_join._node_progress(
	OUT distributed_view text, OUT pid int, OUT command text, OUT phase text,
	OUT rows_done bigint, OUT rows_expected bigint, OUT started timestamptz)
RETURNS SETOF record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT v.managed_by, p.pid, p.command, p.phase, p.rows_done, p.rows_expected, p.started
	FROM delta_join._progress() p
	JOIN delta_join.view_catalog v USING (view_id)
	WHERE v.managed_by IS NOT NULL
$$;

-- What a command gives on every node, as the caller (Citus's
-- run_command_on_all_nodes), each node named: nothing on a server that is
-- no Citus coordinator of distributed views.  Read by _shard_groups (0.1
-- ran the nodes itself) and _distributed_progress; PUBLIC, as they are, and
-- no more than the Citus function it calls, which PUBLIC may run.
CREATE FUNCTION delta_join._on_nodes(command text,
	OUT node text, OUT success boolean, OUT result text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT delta_join._is_coordinator()
	   OR NOT EXISTS (SELECT 1 FROM delta_join._distributed_targets()) THEN
		RETURN;
	END IF;
	RETURN QUERY EXECUTE $q$
		SELECT n.nodename || ':' || n.nodeport, r.success, r.result
		FROM run_command_on_all_nodes($1) r
		JOIN pg_dist_node n ON n.nodeid = r.nodeid
	$q$ USING command;
END $$;

-- a node that does not answer (down, or failing) puts every view in
-- 'stalled', saying why
CREATE OR REPLACE FUNCTION delta_join._shard_groups(
	OUT node text, OUT distributed_view text, OUT shard_target text, OUT state text,
	OUT reason text, OUT lag_bytes bigint, OUT lag interval,
	OUT changes_seen bigint, OUT keys_applied bigint, OUT rows_upserted bigint,
	OUT rows_deleted bigint, OUT rows_unchanged bigint, OUT lookups bigint,
	OUT cache_hits bigint, OUT last_error text, OUT last_error_time timestamptz,
	OUT mode text)
RETURNS SETOF record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	WITH r AS (
		SELECT * FROM delta_join._on_nodes(
			'SELECT coalesce(json_agg(g), ''[]'') FROM delta_join._node_shard_groups() g'))
	SELECT r.node, g.*
	FROM r CROSS JOIN LATERAL json_populate_recordset(
		NULL::delta_join._shard_group, CASE WHEN r.success THEN r.result::json END) g
	UNION ALL
	SELECT r.node, d.target, NULL, 'stalled',
		   'node ' || r.node || ' did not answer: ' || coalesce(r.result, ''),
		   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
	FROM r CROSS JOIN delta_join._distributed_targets() d(target)
	WHERE NOT r.success
$$;

-- a node that does not answer shows nothing here (shard_groups says why)
CREATE FUNCTION delta_join._distributed_progress(
	OUT target text, OUT pid int, OUT command text, OUT phase text,
	OUT rows_done bigint, OUT rows_expected bigint, OUT started timestamptz,
	OUT node text)
RETURNS SETOF record
LANGUAGE sql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
	SELECT p.distributed_view, p.pid, p.command, p.phase, p.rows_done,
		   p.rows_expected, p.started, r.node
	FROM delta_join._on_nodes(
		'SELECT coalesce(json_agg(p), ''[]'') FROM delta_join._node_progress() p') r
	CROSS JOIN LATERAL json_to_recordset(CASE WHEN r.success THEN r.result::json END)
		AS p(distributed_view text, pid int, command text, phase text,
			 rows_done bigint, rows_expected bigint, started timestamptz)
$$;

CREATE VIEW delta_join.progress AS
SELECT delta_join._name(v.target) AS target,
	   p.pid,
	   p.command,
	   p.phase,
	   p.rows_done,
	   p.rows_expected,
	   p.started,
	   NULL::text AS node
FROM delta_join._progress() p
JOIN delta_join.view_catalog v USING (view_id)
UNION ALL
SELECT * FROM delta_join._distributed_progress();

GRANT SELECT ON delta_join.progress TO PUBLIC;

--
-- 9. The replica identity of keyless targets.  A view without a unique key
-- of its result (a full recompute) writes a target without a primary key,
-- and a DELETE or UPDATE of such a table logs no old row under the default
-- replica identity: PostgreSQL refuses them outright once a publication
-- (FOR ALL TABLES, say) publishes them, which put the view in error.  0.2
-- makes such targets REPLICA IDENTITY FULL (src/ops/target.c); the targets
-- 0.1 made get it here.  A replica identity their owner chose (an index,
-- or NOTHING) stays.
--
DO $$
DECLARE
	target regclass;
BEGIN
	FOR target IN
		SELECT c.oid::regclass
		FROM delta_join.view_catalog v
		JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) v.target
		WHERE c.relkind OPERATOR(pg_catalog.=) 'r'
		  AND c.relreplident OPERATOR(pg_catalog.=) 'd'
		  AND NOT EXISTS (SELECT FROM pg_catalog.pg_index i
						  WHERE i.indrelid OPERATOR(pg_catalog.=) c.oid AND i.indisprimary)
		ORDER BY c.oid
	LOOP
		EXECUTE pg_catalog.format('ALTER TABLE %s REPLICA IDENTITY FULL', target);
	END LOOP;
END $$;

--
-- 10. Query views depend on the extension.  0.2 records that dependency
-- when it binds a view's query (src/analysis/query.c), so that DROP
-- EXTENSION ... CASCADE drops the query views, as it drops the guard
-- triggers of the targets.  The query views 0.1 made had none: DROP
-- EXTENSION ... CASCADE left them in schema delta_join, where they still
-- kept their sources from being dropped.  They get it here.
--
INSERT INTO pg_catalog.pg_depend
	(classid, objid, objsubid, refclassid, refobjid, refobjsubid, deptype)
SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, v.query_view, 0,
	   'pg_catalog.pg_extension'::pg_catalog.regclass, e.oid, 0, 'n'
FROM delta_join.view_catalog v, pg_catalog.pg_extension e
WHERE e.extname OPERATOR(pg_catalog.=) 'delta_join'
  AND v.query_view IS NOT NULL
  AND NOT EXISTS (SELECT FROM pg_catalog.pg_depend d
				  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass
					AND d.objid OPERATOR(pg_catalog.=) v.query_view
					AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
					AND d.refobjid OPERATOR(pg_catalog.=) e.oid);

--
-- 11. The DDL guard fires whatever session_replication_role says.  Event
-- triggers, like triggers, are skipped in a session whose
-- session_replication_role is replica (as a migration or bulk-load tool
-- sets it to keep triggers quiet) unless enabled ALWAYS: ALTER TABLE ...
-- DETACH PARTITION there left the partition's rows in the views' targets,
-- the views active and wait() true -- silently wrong -- because nothing
-- was refused and no refresh ran (test/t/069_replica_role_guard.pl).
--
ALTER EVENT TRIGGER delta_join_ddl_start ENABLE ALWAYS;
ALTER EVENT TRIGGER delta_join_ddl_end ENABLE ALWAYS;
ALTER EVENT TRIGGER delta_join_sql_drop ENABLE ALWAYS;
