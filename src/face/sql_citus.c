/*-------------------------------------------------------------------------
 *
 * sql_citus.c
 *	  The internal SQL functions of distributed views, run on every Citus
 *	  node: the row trigger on the definitions, and what the coordinator
 *	  runs on each node (_prepare_node, _sync_node, _wait_node,
 *	  _backfill_node, _refresh_node_concurrently).
 *
 * Each reads its arguments and calls the node's side of the Citus layer
 * (citus/node.c).  The functions are not executable by PUBLIC: the
 * coordinator runs them as the owner of Citus (run_command_on_all_nodes),
 * and _prepare_node makes a replication slot.  None of them runs on a
 * standby.
 *
 * IDENTIFICATION
 *	  src/face/sql_citus.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/trigger.h"
#include "fmgr.h"
#include "utils/builtins.h"

#include "citus/node.h"
#include "ops/views.h"

PG_FUNCTION_INFO_V1(dj_on_distributed_catalog);
PG_FUNCTION_INFO_V1(dj_prepare_node);
PG_FUNCTION_INFO_V1(dj_sync_node);
PG_FUNCTION_INFO_V1(dj_wait_node);
PG_FUNCTION_INFO_V1(dj_backfill_node);
PG_FUNCTION_INFO_V1(dj_refresh_node_concurrently);

/*
 * The AFTER ROW trigger on delta_join.distributed_catalog: the node's shard
 * views follow the definition inserted, updated or deleted.
 */
Datum
dj_on_distributed_catalog(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		elog(ERROR, "dj_on_distributed_catalog: not called as an AFTER ROW trigger");
	node_on_definition(trigdata);
	return PointerGetDatum(NULL);
}

/*
 * _prepare_node() RETURNS void: make this database's slot, and keep it
 * while no shard group is here yet
 */
Datum
dj_prepare_node(PG_FUNCTION_ARGS)
{
	ops_check_primary("_prepare_node");
	node_prepare();
	PG_RETURN_VOID();
}

/*
 * _sync_node() RETURNS void: bring this node's shard views in line with
 * the definitions and the placements it holds
 */
Datum
dj_sync_node(PG_FUNCTION_ARGS)
{
	ops_check_primary("_sync_node");
	node_sync_asked();
	PG_RETURN_VOID();
}

/*
 * _wait_node(target text, timeout_ms bigint) RETURNS boolean: wait for this
 * node's shard views of one distributed view (all if NULL)
 */
Datum
dj_wait_node(PG_FUNCTION_ARGS)
{
	char	   *target = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		timeout_ms = PG_ARGISNULL(1) ? -1 : PG_GETARG_INT64(1);

	PG_RETURN_BOOL(node_wait(target, timeout_ms));
}

/*
 * _backfill_node(target text) RETURNS bigint: this node's part of a
 * concurrent create of a distributed view (the coordinator's create_view
 * runs it on every node as the owner of Citus)
 */
Datum
dj_backfill_node(PG_FUNCTION_ARGS)
{
	ops_check_primary("_backfill_node");
	PG_RETURN_INT64(node_backfill(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}

/*
 * _refresh_node_concurrently(target text) RETURNS bigint: this node's part
 * of a concurrent refresh of a distributed view (likewise)
 */
Datum
dj_refresh_node_concurrently(PG_FUNCTION_ARGS)
{
	ops_check_primary("_refresh_node_concurrently");
	PG_RETURN_INT64(node_refresh_concurrently(text_to_cstring(PG_GETARG_TEXT_PP(0))));
}
