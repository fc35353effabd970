/*-------------------------------------------------------------------------
 *
 * sql_views.c
 *	  The SQL functions of schema delta_join that manage views: create_view,
 *	  explain, drop_view and refresh.
 *
 * Each reads its arguments and sends the call where it belongs: over
 * Citus distributed tables, on a coordinator, to the distributed views
 * (citus/distributed.c), which make one view per shard group on the nodes;
 * otherwise to the view operations (ops/views.c), which check the caller's
 * rights and take the locks.  None of them runs on a standby.
 *
 * IDENTIFICATION
 *	  src/face/sql_views.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"

#include "analysis/analyze.h"
#include "analysis/query.h"
#include "base/options.h"
#include "citus/distributed.h"
#include "ops/concurrent.h"
#include "ops/views.h"
#include "registry/catalog.h"

PG_FUNCTION_INFO_V1(dj_create_view);
PG_FUNCTION_INFO_V1(dj_explain);
PG_FUNCTION_INFO_V1(dj_drop_view);
PG_FUNCTION_INFO_V1(dj_refresh);

/* ----------------------------------------------------------------
 *		Helpers
 * ----------------------------------------------------------------
 */

static char *
required_text_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", name)));
	return text_to_cstring(PG_GETARG_TEXT_PP(argno));
}

/*
 * The concurrently argument, argno: false when NULL, or when the function
 * is that of version 0.1, which lacks it.
 */
static bool
concurrently_arg(FunctionCallInfo fcinfo, int argno)
{
	return PG_NARGS() > argno && !PG_ARGISNULL(argno) && PG_GETARG_BOOL(argno);
}

/* Resolve the options of create_view/explain from their arguments. */
static void
options_from_args(FunctionCallInfo fcinfo, int strategy_arg, DeltaOptions *options)
{
	char	   *strategy = PG_ARGISNULL(strategy_arg) ? NULL :
		text_to_cstring(PG_GETARG_TEXT_PP(strategy_arg));
	Jsonb	   *json = PG_ARGISNULL(strategy_arg + 1) ? NULL :
		PG_GETARG_JSONB_P(strategy_arg + 1);

	options_resolve(options, strategy, json);
	options->catalog_01 = !catalog_installed_at_least("0.2");
}

/*
 * create_view(target text, query text, strategy text, options jsonb,
 *			   concurrently boolean) RETURNS regclass
 */
Datum
dj_create_view(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	char	   *query_text = required_text_arg(fcinfo, 1, "query");
	DeltaOptions options;

	ops_check_primary("create_view");
	options_from_args(fcinfo, 2, &options);

	/* over Citus distributed tables, on a coordinator: one view per shard group */
	if (distributed_wanted(query_text))
	{
		char	   *strategy = PG_ARGISNULL(2) ? NULL : TextDatumGetCString(PG_GETARG_DATUM(2));
		Jsonb	   *options_json = PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3);

		if (concurrently_arg(fcinfo, 4))
			PG_RETURN_OID(ops_create_distributed_concurrently(target, query_text, strategy,
															  options_json, &options));
		PG_RETURN_OID(distributed_create_view(target, query_text, strategy, options_json,
											  &options));
	}
	if (concurrently_arg(fcinfo, 4))
		PG_RETURN_OID(ops_create_view_concurrently(target, query_text, &options));
	PG_RETURN_OID(ops_create_view_text(target, query_text, &options));
}

/*
 * explain(query text, strategy text, options jsonb) RETURNS SETOF text
 */
Datum
dj_explain(PG_FUNCTION_ARGS)
{
	char	   *text = required_text_arg(fcinfo, 0, "query");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DeltaOptions options;
	Query	   *query;
	List	   *hints;
	List	   *lines;
	ListCell   *lc;

	options_from_args(fcinfo, 1, &options);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	if (distributed_wanted(text))
		lines = distributed_explain(text, &options);
	else
	{
		query = query_parse(text, &hints);
		lines = explain_plan(query, hints, &options);
	}

	foreach(lc, lines)
	{
		Datum		value = CStringGetTextDatum(lfirst(lc));
		bool		isnull = false;

		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, &value, &isnull);
	}
	return (Datum) 0;
}

/*
 * drop_view(target text, drop_table boolean) RETURNS void
 *
 * The target is dropped as DROP TABLE would, never with CASCADE.  When
 * other objects depend on it, DROP TABLE's hint ("Use DROP ... CASCADE")
 * does not apply to drop_view(); say what does.
 */
Datum
dj_drop_view(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	bool		drop_table = PG_ARGISNULL(1) ? true : PG_GETARG_BOOL(1);
	MemoryContext cxt = CurrentMemoryContext;

	ops_check_primary("drop_view");
	PG_TRY();
	{
		if (!distributed_drop_view(target, drop_table))
			ops_drop_view_named(target, drop_table);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST || !drop_table)
			PG_RE_THROW();
		FlushErrorState();
		edata->hint = psprintf("Drop the objects that depend on the target first, or keep the target as an ordinary table: SELECT delta_join.drop_view(%s, drop_table => false);",
							   quote_literal_cstr(target));
		ReThrowError(edata);
	}
	PG_END_TRY();
	PG_RETURN_VOID();
}

/*
 * refresh(target text, concurrently boolean) RETURNS bigint
 */
Datum
dj_refresh(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	int64		distributed_rows;

	ops_check_primary("refresh");
	if (concurrently_arg(fcinfo, 1))
	{
		if ((distributed_rows = distributed_refresh_concurrently(target)) >= 0)
			PG_RETURN_INT64(distributed_rows);
		PG_RETURN_INT64((int64) ops_refresh_view_concurrently(target));
	}
	if ((distributed_rows = distributed_refresh(target)) >= 0)
		PG_RETURN_INT64(distributed_rows);
	PG_RETURN_INT64((int64) ops_refresh_view_named(target));
}
