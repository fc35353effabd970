/* delta_join--0.1--0.2.sql */

\echo Use "ALTER EXTENSION delta_join UPDATE" to load this file. \quit

--
-- Version 0.2: every change to the SQL objects since the 0.1 release, in
-- the order made.  A fresh install of 0.2 runs delta_join--0.1.sql, then
-- this script, so a database made with 0.2 and one updated from 0.1 are the
-- same.  Add a change as a numbered section at the end, saying what it
-- changes and why.

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
