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

-- One row per view.
CREATE TABLE delta_join.view_catalog (
	view_id			serial PRIMARY KEY,
	target			regclass NOT NULL UNIQUE,	-- dumped and restored by name
	target_name		text NOT NULL,			-- qualified name, for messages
	kind			text NOT NULL CHECK (kind IN ('join', 'aggregate')),
	strategy		text NOT NULL,
	options			jsonb NOT NULL,			-- effective options of the view
	query			text NOT NULL,
	search_path		text NOT NULL,			-- resolves the names in query
	owner			oid NOT NULL,			-- the view is applied as this role
	state			text NOT NULL DEFAULT 'active'
					CHECK (state IN ('active', 'error')),
	created_lsn		pg_lsn NOT NULL,
	applied_lsn		pg_lsn NOT NULL,		-- all changes up to here are applied
	last_error		text,
	last_error_time	timestamptz,
	stale_since_lsn	pg_lsn					-- changes from here on were not applied
);

-- One row per source of a view.  Logical decoding reads this table as of each
-- decoded change, so it must be a user catalog table.
CREATE TABLE delta_join.source_catalog (
	view_id			int NOT NULL REFERENCES delta_join.view_catalog ON DELETE CASCADE,
	ordinal			int NOT NULL,			-- range-table position in the query
	relid			regclass NOT NULL,		-- the source table (root if partitioned)
	alias			text NOT NULL,
	key_columns		name[] NOT NULL,		-- columns whose values make a dirty key
	lookup_index	oid,					-- btree index used to look this source up (rewritten by refresh)
	lookup_columns	name[],					-- its leading columns the lookup binds
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
REVOKE ALL ON delta_join.view_catalog, delta_join.source_catalog FROM PUBLIC;
GRANT SELECT ON delta_join.view_catalog, delta_join.source_catalog TO PUBLIC;

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

-- Counters of every view, from shared memory.
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
	OUT cache_hits bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'dj_stat'
LANGUAGE C STRICT VOLATILE;

CREATE VIEW delta_join.views AS
SELECT v.target_name AS target,
	   v.kind,
	   CASE WHEN v.kind = 'join' AND (v.options ->> 'retract')::boolean
			THEN 'retract' ELSE 'upsert' END AS mode,
	   v.strategy,
	   v.state,
	   ARRAY(SELECT s.relid::regclass::text
			 FROM delta_join.source_catalog s
			 WHERE s.view_id = v.view_id
			 ORDER BY s.ordinal) AS sources,
	   v.options,
	   v.query
FROM delta_join.view_catalog v;

CREATE VIEW delta_join.status AS
SELECT v.target_name AS target,
	   v.state,
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
	   v.last_error,
	   v.last_error_time,
	   v.stale_since_lsn
FROM delta_join.view_catalog v
LEFT JOIN delta_join._stat() s USING (view_id)
CROSS JOIN LATERAL (
	SELECT greatest(v.applied_lsn, s.applied_lsn) AS applied_lsn,
		   greatest(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(),
											   greatest(v.applied_lsn, s.applied_lsn)),
					0)::bigint AS behind) p;

GRANT SELECT ON delta_join.views, delta_join.status TO PUBLIC;

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
-- Dropping a target unregisters its view; dropping a source puts its views
-- in error (they can no longer be maintained; drop_view removes them).
--
CREATE FUNCTION delta_join._on_sql_drop()
RETURNS event_trigger
LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	DELETE FROM delta_join.view_catalog v
	USING pg_event_trigger_dropped_objects() d
	WHERE d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.objid = v.target;

	UPDATE delta_join.view_catalog v
	SET state = 'error',
		last_error = format('source %s was dropped', d.object_identity),
		last_error_time = now()
	FROM delta_join.source_catalog s, pg_event_trigger_dropped_objects() d
	WHERE s.view_id = v.view_id AND v.state <> 'error'
	  AND d.classid = 'pg_class'::regclass AND d.objsubid = 0 AND d.objid = s.relid;
END
$$;

CREATE EVENT TRIGGER delta_join_sql_drop ON sql_drop
EXECUTE FUNCTION delta_join._on_sql_drop();
