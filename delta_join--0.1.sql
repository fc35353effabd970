/* delta_join--0.1.sql */

\echo Use "CREATE EXTENSION delta_join" to load this file. \quit

-- Refuse to install on a server that cannot run delta views: the check names
-- the setting to change (wal_level, shared_preload_libraries,
-- output_plugin_libraries).
CREATE FUNCTION delta_join._check_environment()
RETURNS void
AS 'MODULE_PATHNAME', 'dj_check_environment'
LANGUAGE C STRICT;

SELECT delta_join._check_environment();

--
-- Catalog
--
-- A view's query is bound once, at creation, into a Postgres view of this
-- schema (query_view), owned by the target's owner: its rule records the
-- relations, columns, functions and operators it uses in pg_depend, follows
-- renames, and is dumped and restored with the database.  Nothing here is
-- ever re-parsed by name.
--

-- One row per view.
CREATE TABLE delta_join.view_catalog (
	view_id			serial PRIMARY KEY,
	target			regclass NOT NULL UNIQUE,	-- dumped and restored by name
	query_view		regclass UNIQUE,		-- the bound query; NULL once dropped
	kind			text NOT NULL CHECK (kind IN ('join', 'aggregate', 'query')),
	strategy		text NOT NULL,
	path			text NOT NULL DEFAULT 'delta'	-- how it is maintained
					CHECK (path IN ('delta', 'keyed', 'full')),
	options			jsonb NOT NULL,			-- effective options of the view
	settings		jsonb NOT NULL,			-- settings pinned at creation
	state			text NOT NULL DEFAULT 'active'
					CHECK (state IN ('active', 'error')),
	created_lsn		pg_lsn NOT NULL,
	applied_lsn		pg_lsn NOT NULL,		-- all changes up to here are applied
	last_error		text,
	last_error_time	timestamptz,
	stale_since_lsn	pg_lsn,					-- changes from here on were not applied
	managed_by		text					-- on a Citus node: the distributed view
											-- (its target's name) this view is a
											-- shard group of (distributed.c)
);

-- One row per source of a view.  Logical decoding reads this table as of each
-- decoded change, so it must be a user catalog table.
CREATE TABLE delta_join.source_catalog (
	view_id			int NOT NULL REFERENCES delta_join.view_catalog ON DELETE CASCADE,
	ordinal			int NOT NULL,			-- range-table position in the query
	relid			regclass NOT NULL,		-- the source table (root if partitioned)
	key_attnums		int2[] NOT NULL,		-- columns whose values make a dirty key
	options			jsonb NOT NULL DEFAULT '{}',	-- per-table hint options
	PRIMARY KEY (view_id, ordinal)
) WITH (user_catalog_table = true);

CREATE INDEX source_catalog_relid_idx ON delta_join.source_catalog (relid);

SELECT pg_catalog.pg_extension_config_dump('delta_join.view_catalog', '');
SELECT pg_catalog.pg_extension_config_dump('delta_join.view_catalog_view_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('delta_join.source_catalog', '');

-- Any role may create views over tables it can read; catalog rows are
-- written by the extension's functions only.
GRANT USAGE ON SCHEMA delta_join TO PUBLIC;
-- A view's last error may quote the data of its tables: only its owner
-- reads it (in delta_join.status).
REVOKE ALL ON delta_join.view_catalog, delta_join.source_catalog FROM PUBLIC;
GRANT SELECT (view_id, target, query_view, kind, strategy, path, options, settings, state,
			  created_lsn, applied_lsn, last_error_time, stale_since_lsn, managed_by)
	ON delta_join.view_catalog TO PUBLIC;
GRANT SELECT ON delta_join.source_catalog TO PUBLIC;

--
-- SQL interface
--

CREATE FUNCTION delta_join.create_view(target text, query text,
									   strategy text DEFAULT NULL,
									   options jsonb DEFAULT NULL)
RETURNS regclass
AS 'MODULE_PATHNAME', 'dj_create_view'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION delta_join.explain(query text,
								   strategy text DEFAULT NULL,
								   options jsonb DEFAULT NULL)
RETURNS SETOF text
AS 'MODULE_PATHNAME', 'dj_explain'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION delta_join.drop_view(target text, drop_table boolean DEFAULT true)
RETURNS void
AS 'MODULE_PATHNAME', 'dj_drop_view'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION delta_join.refresh(target text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'dj_refresh'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

CREATE FUNCTION delta_join.wait(target text DEFAULT NULL,
								timeout interval DEFAULT '30s')
RETURNS boolean
AS 'MODULE_PATHNAME', 'dj_wait'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Counters of every view of this database, from shared memory.
CREATE FUNCTION delta_join._stat(
	OUT view_id int,
	OUT applied_lsn pg_lsn,
	OUT applied_commit_time timestamptz,
	OUT changes_seen bigint,
	OUT keys_applied bigint,
	OUT rows_upserted bigint,
	OUT rows_deleted bigint,
	OUT rows_unchanged bigint,
	OUT lookups bigint,
	OUT cache_hits bigint,
	OUT retry_reason text,
	OUT last_recompute timestamptz)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dj_stat'
LANGUAGE C STRICT VOLATILE;

-- Whether this database's apply worker runs, its slot exists, shared
-- memory has room for the progress of one more view, and why the last
-- worker ended in error (until a worker applies a batch).
CREATE FUNCTION delta_join._database_state(OUT worker_pid int, OUT slot_exists boolean,
										   OUT views_room boolean, OUT worker_failure text)
RETURNS record
AS 'MODULE_PATHNAME', 'dj_database_state'
LANGUAGE C STRICT VOLATILE;

-- target: the target's qualified name as it is now.  (Citus hides the
-- shard tables of a node from pg_class, unless told not to: a target may be
-- one.)
CREATE FUNCTION delta_join._name(regclass) RETURNS text
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
SET citus.override_table_visibility = off
AS $$ SELECT format('%I.%I', n.nspname, c.relname)
	  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
	  WHERE c.oid = $1 $$;

-- the owner of a target
CREATE FUNCTION delta_join._owner(regclass) RETURNS oid
LANGUAGE sql STABLE STRICT
SET search_path = pg_catalog, pg_temp
SET citus.override_table_visibility = off
AS $$ SELECT relowner FROM pg_class WHERE oid = $1 $$;

-- how a view is maintained, in words (views.mode and status.mode)
CREATE FUNCTION delta_join._mode(path text, options jsonb) RETURNS text
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT CASE WHEN path = 'keyed' THEN 'keyed recompute'
				  WHEN path = 'full' THEN 'full recompute'
				  WHEN (options ->> 'retract')::boolean THEN 'delta (retract)'
				  ELSE 'delta' END $$;

CREATE VIEW delta_join.views AS
SELECT delta_join._name(v.target) AS target,
	   v.kind,
	   delta_join._mode(v.path, v.options) AS mode,
	   v.strategy,
	   v.state,
	   ARRAY(SELECT s.relid::text
			 FROM delta_join.source_catalog s
			 WHERE s.view_id = v.view_id
			 ORDER BY s.ordinal) AS sources,
	   -- sources read through their index whose changes trigger nothing
	   ARRAY(SELECT s.relid::text
			 FROM delta_join.source_catalog s
			 WHERE s.view_id = v.view_id AND (s.options ->> 'lookup_only')::boolean
			 ORDER BY s.ordinal) AS lookup_only,
	   v.options,
	   v.settings,
	   pg_catalog.pg_get_userbyid(delta_join._owner(v.target)) AS runs_as,
	   v.query_view::text AS query_view,
	   -- on a Citus node: the distributed view this shard group's view is of
	   v.managed_by,
	   -- the definition as it is now: today's names of what it was bound to
	   CASE WHEN v.query_view IS NOT NULL
			THEN pg_catalog.pg_get_viewdef(v.query_view) END AS query
FROM delta_join.view_catalog v;

-- state: the catalog's (active, error), or 'stalled' when the view is
-- active but nothing applies its changes: no worker runs for the database,
-- or it fails again and again, its slot is gone, or the view has no place
-- in shared memory.
CREATE VIEW delta_join._local_status AS
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
				WHEN NOT d.slot_exists
				THEN 'the replication slot of this database is missing: refresh the view'
				WHEN d.worker_failure IS NOT NULL AND p.behind > 0
				THEN 'the apply worker failed and is restarted: ' OPERATOR(pg_catalog.||) d.worker_failure
				WHEN d.worker_pid IS NULL AND p.behind > 0
				THEN 'no apply worker runs for this database (see the server log; max_worker_processes)'
				WHEN s.view_id IS NULL AND NOT d.views_room
				THEN 'the view has no place in shared memory (delta_join.max_views): its changes are not applied'
		   END AS reason) r;

--
-- Distributed views (Citus, distributed.c): one row per view made on a
-- coordinator over co-located distributed tables.  The coordinator makes
-- this table a Citus reference table with its first distributed view, so
-- that every node holds it; the row trigger makes each node's copy create,
-- refresh and drop the views of the shard groups it holds.  Names, not
-- OIDs: they differ from node to node.
--
CREATE TABLE delta_join.distributed_catalog (
	target			text PRIMARY KEY,		-- the distributed target, qualified
	query			text NOT NULL,			-- as given to create_view
	strategy		text,
	options			jsonb,					-- as given to create_view
	search_path		text NOT NULL,			-- the query's names are read under it
	sources			text[] NOT NULL DEFAULT '{}',	-- the relations they named then
	settings		jsonb NOT NULL,			-- settings pinned at creation
	created			timestamptz NOT NULL DEFAULT pg_catalog.now(),
	refreshed		timestamptz				-- refresh on the coordinator
);
SELECT pg_catalog.pg_extension_config_dump('delta_join.distributed_catalog', '');
-- Written by create_view, refresh and drop_view on the coordinator as the
-- caller; the trigger lets only the owner of a target write its row.
REVOKE ALL ON delta_join.distributed_catalog FROM PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON delta_join.distributed_catalog TO PUBLIC;

CREATE FUNCTION delta_join._on_distributed_catalog()
RETURNS trigger
AS 'MODULE_PATHNAME', 'dj_on_distributed_catalog'
LANGUAGE C;

CREATE TRIGGER distributed_catalog_sync
AFTER INSERT OR UPDATE OR DELETE ON delta_join.distributed_catalog
FOR EACH ROW EXECUTE FUNCTION delta_join._on_distributed_catalog();

-- What the coordinator runs on every node (run_command_on_all_nodes)
CREATE FUNCTION delta_join._prepare_node() RETURNS void
AS 'MODULE_PATHNAME', 'dj_prepare_node'
LANGUAGE C VOLATILE;

CREATE FUNCTION delta_join._sync_node() RETURNS void
AS 'MODULE_PATHNAME', 'dj_sync_node'
LANGUAGE C VOLATILE;

CREATE FUNCTION delta_join._wait_node(target text, timeout_ms bigint) RETURNS boolean
AS 'MODULE_PATHNAME', 'dj_wait_node'
LANGUAGE C VOLATILE;

-- This node's shard groups of distributed views: one row per placement it
-- holds, with its view's status ('missing' while the view is not made).
-- One shard group of a distributed view, as a node reports it
CREATE TYPE delta_join._shard_group AS (
	distributed_view text, shard_target text, state text, reason text,
	lag_bytes bigint, lag interval, changes_seen bigint, keys_applied bigint,
	rows_upserted bigint, rows_deleted bigint, rows_unchanged bigint,
	lookups bigint, cache_hits bigint, last_error text,
	last_error_time timestamptz, mode text);

CREATE FUNCTION delta_join._node_shard_groups()
RETURNS SETOF delta_join._shard_group
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET citus.override_table_visibility = off
AS $$
BEGIN
	IF to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
		RETURN;
	END IF;
	-- (the definitions, a Citus reference table, are read on their own:
	-- Citus would plan a join of them with the local catalog itself, with
	-- the caller's rights)
	RETURN QUERY EXECUTE $q$
		SELECT d.target, sh.name, coalesce(st.state, 'missing'),
			   CASE WHEN st.state IS NULL
					THEN 'the shard group has no view on this node yet' ELSE st.reason END,
			   st.lag_bytes, st.lag, st.changes_seen, st.keys_applied, st.rows_upserted,
			   st.rows_deleted, st.rows_unchanged, st.lookups, st.cache_hits,
			   st.last_error, st.last_error_time, st.mode
		FROM delta_join._distributed_targets() d(target)
		-- (by name, through pg_class: to_regclass would need USAGE on the schema)
		JOIN pg_class c ON true
		JOIN pg_namespace n ON n.oid = c.relnamespace
			 AND format('%I.%I', n.nspname, c.relname) = d.target
		JOIN pg_dist_shard s ON s.logicalrelid = c.oid AND s.shardminvalue IS NOT NULL
		JOIN pg_dist_placement p ON p.shardid = s.shardid
			 AND p.groupid = (SELECT groupid FROM pg_dist_local_group)
		CROSS JOIN LATERAL (SELECT CASE WHEN strpos(nm, '.') > 0 THEN nm
										ELSE quote_ident(n.nspname) || '.' || nm END AS name
							FROM shard_name(s.logicalrelid, s.shardid) nm) sh
		LEFT JOIN delta_join._local_status st ON st.target = sh.name
	$q$;
END $$;

-- The targets of the distributed views, read in a query of their own (see
-- _node_shard_groups)
CREATE FUNCTION delta_join._distributed_targets() RETURNS SETOF text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	targets text[] := ARRAY(SELECT target FROM delta_join.distributed_catalog);
BEGIN
	-- (a definition whose target was dropped is left out: the coordinator's
	-- worker deletes it)
	RETURN QUERY SELECT t FROM unnest(targets) t
		WHERE EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
					  WHERE format('%I.%I', n.nspname, c.relname) = t)
		ORDER BY t;
END $$;

-- Is this database a Citus coordinator?
CREATE FUNCTION delta_join._is_coordinator() RETURNS boolean
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF to_regclass('pg_catalog.pg_dist_local_group') IS NULL THEN
		RETURN false;
	END IF;
	RETURN (SELECT groupid = 0 FROM pg_dist_local_group);
END $$;

-- On a coordinator: every shard group of every distributed view, from
-- every node.
CREATE FUNCTION delta_join._shard_groups(
	OUT node text, OUT distributed_view text, OUT shard_target text, OUT state text,
	OUT reason text, OUT lag_bytes bigint, OUT lag interval,
	OUT changes_seen bigint, OUT keys_applied bigint, OUT rows_upserted bigint,
	OUT rows_deleted bigint, OUT rows_unchanged bigint, OUT lookups bigint,
	OUT cache_hits bigint, OUT last_error text, OUT last_error_time timestamptz,
	OUT mode text)
RETURNS SETOF record
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	IF NOT delta_join._is_coordinator()
	   OR NOT EXISTS (SELECT 1 FROM delta_join._distributed_targets()) THEN
		RETURN;
	END IF;
	-- a node that does not answer (down, or failing) puts every view in
	-- 'stalled', saying why
	RETURN QUERY EXECUTE $q$
		WITH r AS (
			SELECT n.nodename || ':' || n.nodeport AS node, r.success, r.result
			FROM run_command_on_all_nodes(
				'SELECT coalesce(json_agg(g), ''[]'') FROM delta_join._node_shard_groups() g') r
			JOIN pg_dist_node n ON n.nodeid = r.nodeid)
		SELECT r.node, g.*
		FROM r CROSS JOIN LATERAL json_populate_recordset(
			NULL::delta_join._shard_group, CASE WHEN r.success THEN r.result::json END) g
		UNION ALL
		SELECT r.node, d.target, NULL, 'stalled',
			   'node ' || r.node || ' did not answer: ' || coalesce(r.result, ''),
			   NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
		FROM r CROSS JOIN delta_join._distributed_targets() d(target)
		WHERE NOT r.success
	$q$;
END $$;



CREATE VIEW delta_join.distributed_views AS
SELECT target, query, strategy, options, created, refreshed
FROM delta_join.distributed_catalog;

CREATE VIEW delta_join.shard_groups AS
SELECT * FROM delta_join._shard_groups();

-- On a coordinator: one row per distributed view, its shard groups summed
-- up: the worst state and the largest lag of any, their counters added.
CREATE VIEW delta_join.distributed_status AS
SELECT d.target,
	   count(g.shard_target) AS shard_groups,
	   CASE WHEN bool_or(g.state = 'error') THEN 'error'
			WHEN bool_or(g.state IN ('stalled', 'missing')) THEN 'stalled'
			WHEN count(g.shard_target) = 0 THEN 'stalled'
			ELSE 'active' END AS state,
	   min(g.reason) FILTER (WHERE g.reason IS NOT NULL AND g.state <> 'active') AS reason,
	   max(g.lag_bytes) AS lag_bytes,
	   coalesce(max(g.lag), interval '0') AS lag,
	   coalesce(sum(g.changes_seen), 0)::bigint AS changes_seen,
	   coalesce(sum(g.keys_applied), 0)::bigint AS keys_applied,
	   coalesce(sum(g.rows_upserted), 0)::bigint AS rows_upserted,
	   coalesce(sum(g.rows_deleted), 0)::bigint AS rows_deleted,
	   coalesce(sum(g.rows_unchanged), 0)::bigint AS rows_unchanged,
	   coalesce(sum(g.lookups), 0)::bigint AS lookups,
	   coalesce(sum(g.cache_hits), 0)::bigint AS cache_hits,
	   min(g.last_error) AS last_error,
	   max(g.last_error_time) AS last_error_time,
	   min(g.mode) AS mode
FROM delta_join._distributed_targets() d(target)
LEFT JOIN delta_join.shard_groups g ON g.distributed_view = d.target
WHERE delta_join._is_coordinator()
GROUP BY d.target;

-- Every view of this database: its own (delta_join._local_status), and on
-- a coordinator its distributed views, one row each.
CREATE VIEW delta_join.status AS
SELECT * FROM delta_join._local_status
UNION ALL
SELECT target, state, reason, NULL::pg_lsn, lag_bytes, lag, changes_seen, keys_applied,
	   rows_upserted, rows_deleted, rows_unchanged, lookups, cache_hits, last_error,
	   last_error_time, NULL::pg_lsn, NULL::timestamptz,
	   mode || ' (distributed, ' || shard_groups || ' shard groups)'
FROM delta_join.distributed_status;



GRANT SELECT ON delta_join.views, delta_join.status, delta_join._local_status,
	delta_join.shard_groups, delta_join.distributed_views, delta_join.distributed_status
	TO PUBLIC;

--
-- Aggregates: the first / last non-null input in the call's ORDER BY order.
-- Call them qualified (pg_catalog.first_value is a window function).
--
CREATE FUNCTION delta_join._keep_first(anyelement, anyelement)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'dj_keep_first'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE FUNCTION delta_join._keep_last(anyelement, anyelement)
RETURNS anyelement
AS 'MODULE_PATHNAME', 'dj_keep_last'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;

CREATE AGGREGATE delta_join.first_value(anyelement) (
	SFUNC = delta_join._keep_first,
	STYPE = anyelement,
	PARALLEL = SAFE
);

CREATE AGGREGATE delta_join.last_value(anyelement) (
	SFUNC = delta_join._keep_last,
	STYPE = anyelement,
	PARALLEL = SAFE
);

--
-- The DDL guard (guard.c): DDL on a source or a target is checked against
-- the views it concerns once it is done, and refused (naming the view) when
-- it would leave a view wrong; partitions attached to, detached from or
-- dropped from a source refresh its views in the same transaction; a target
-- renamed or given to another owner takes its query view along.
--
CREATE FUNCTION delta_join._on_ddl_start()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dj_on_ddl_start'
LANGUAGE C;

CREATE EVENT TRIGGER delta_join_ddl_start ON ddl_command_start
EXECUTE FUNCTION delta_join._on_ddl_start();

CREATE FUNCTION delta_join._on_ddl_end()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dj_on_ddl_end'
LANGUAGE C;

CREATE EVENT TRIGGER delta_join_ddl_end ON ddl_command_end
EXECUTE FUNCTION delta_join._on_ddl_end();

CREATE FUNCTION delta_join._on_sql_drop()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'dj_on_sql_drop'
LANGUAGE C;

CREATE EVENT TRIGGER delta_join_sql_drop ON sql_drop
EXECUTE FUNCTION delta_join._on_sql_drop();

-- Statement trigger on every target: only delta_join writes a target,
-- unless the view's option manual_writes allows others to.
CREATE FUNCTION delta_join._guard_target()
RETURNS trigger
AS 'MODULE_PATHNAME', 'dj_guard_target'
LANGUAGE C;
