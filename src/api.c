/*-------------------------------------------------------------------------
 *
 * api.c
 *	  The SQL functions of schema delta_join that manage views:
 *	  create_view, explain, drop_view and refresh.
 *
 * They run with the caller's rights and search_path: the caller owns the
 * target and must be able to read every source (the backfill reads them as
 * the caller).  Catalog rows are written by catalog.c.  Every change to the
 * set of views ends with worker_notify(), so the database's apply worker
 * picks it up once the transaction commits.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"

#include "analyze.h"
#include "catalog.h"
#include "options.h"
#include "target.h"
#include "worker.h"

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

/* Resolve the options of create_view/explain from their arguments. */
static void
options_from_args(FunctionCallInfo fcinfo, int strategy_arg, DeltaOptions *options)
{
	char	   *strategy = PG_ARGISNULL(strategy_arg) ? NULL :
		text_to_cstring(PG_GETARG_TEXT_PP(strategy_arg));
	Jsonb	   *json = PG_ARGISNULL(strategy_arg + 1) ? NULL :
		PG_GETARG_JSONB_P(strategy_arg + 1);

	options_resolve(options, strategy, json);
}

/* The caller's search_path, as the list of schemas it resolves to. */
static char *
current_search_path(void)
{
	List	   *path = fetch_search_path(false);
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, path)
	{
		char	   *nspname = get_namespace_name(lfirst_oid(lc));

		if (nspname)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
							 quote_identifier(nspname));
	}
	return buf.data;
}

static char *
qualified_relname(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

static void
check_owner(Oid relid)
{
#if PG_VERSION_NUM >= 160000
	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
#else
	if (!pg_class_ownercheck(relid, GetUserId()))
#endif
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
}

/*
 * The view whose target is named by `target`, after checking the caller
 * owns it.  Raises an error if there is none.
 */
static Oid
lookup_view(const char *target, ViewRecord *view, LOCKMODE lockmode)
{
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(target));
	Oid			relid = RangeVarGetRelid(rv, lockmode, true);

	if (!OidIsValid(relid) || !catalog_find_view(relid, view))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("\"%s\" is not the target of a delta view", target),
				 errhint("delta_join.views lists the delta views.")));
	check_owner(relid);
	return relid;
}

/*
 * Analyze a query for create_view under its strategy.  Until the fallback of
 * strategies auto and none exists, a query that needs it is refused with an
 * error saying so.
 */
static DeltaPlan *
analyze_for_strategy(const char *query, DeltaOptions *options)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	DeltaPlan  *plan = NULL;

	if (options->strategy == DJ_STRATEGY_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("strategy \"none\" is not supported yet"),
				 errdetail("Strategy none maintains the view without the delta rewrite, by a fallback that does not exist yet."),
				 errhint("Use strategy eventual for a query that delta_join.explain shows eligible.")));

	if (options->strategy == DJ_STRATEGY_EVENTUAL)
		return analyze_view_query(query, options);

	PG_TRY();
	{
		plan = analyze_view_query(query, options);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		if (strncmp(edata->message, "delta view rule", 15) != 0)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("%s", edata->message),
				 errdetail("Strategy auto would maintain this query by a fallback that is not supported yet."),
				 edata->hint ? errhint("%s", edata->hint) : 0));
	}
	PG_END_TRY();
	return plan;
}

static bool
relation_is_empty(Oid relid)
{
	bool		empty;

	SPI_connect();
	if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", qualified_relname(relid)),
					true, 1) < 0)
		elog(ERROR, "SPI_execute failed");
	empty = (SPI_processed == 0);
	SPI_finish();
	return empty;
}

/* ----------------------------------------------------------------
 *		SQL functions
 * ----------------------------------------------------------------
 */

/*
 * create_view(target text, query text, strategy text, options jsonb)
 *		RETURNS regclass
 */
Datum
dj_create_view(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	char	   *query = required_text_arg(fcinfo, 1, "query");
	DeltaOptions options;
	DeltaPlan  *plan;
	RangeVar   *rv;
	Oid			relid;
	ListCell   *lc;
	ViewRecord	existing;

	/*
	 * The slot must exist before anything of this view is written, so that
	 * decoding starts before the view commits (and no change is missed); and
	 * before the analysis locks the sources, since creating it waits for the
	 * transactions in progress, which may want those tables.
	 */
	worker_ensure_slot();

	options_from_args(fcinfo, 2, &options);
	plan = analyze_for_strategy(query, &options);

	rv = makeRangeVarFromNameList(stringToQualifiedNameList(target));
	relid = RangeVarGetRelid(rv, ExclusiveLock, true);
	foreach(lc, plan->sources)
	{
		if (((DeltaSource *) lfirst(lc))->relid == relid)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("table \"%s\" cannot be both the target and a source of a view",
							qualified_relname(relid)),
					 errhint("Name a new table as the target.")));
	}
	if (OidIsValid(relid))
	{
		check_owner(relid);
		if (catalog_find_view(relid, &existing))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table \"%s\" is already the target of a delta view", target),
					 errhint("Drop that view first with delta_join.drop_view, or name another target.")));
		target_validate(relid, plan);
		if (!relation_is_empty(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("target \"%s\" is not empty", qualified_relname(relid)),
					 errhint("The target is filled from the query; empty it with TRUNCATE first.")));
	}
	else
		relid = target_create(rv, plan);

	(void) target_fill(relid, plan, false);
	(void) catalog_insert_view(relid, qualified_relname(relid), plan,
							   current_search_path(), GetXLogInsertRecPtr());
	worker_notify();

	PG_RETURN_OID(relid);
}

/*
 * explain(query text, strategy text, options jsonb) RETURNS SETOF text
 */
Datum
dj_explain(PG_FUNCTION_ARGS)
{
	char	   *query = required_text_arg(fcinfo, 0, "query");
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DeltaOptions options;
	List	   *lines;
	ListCell   *lc;

	options_from_args(fcinfo, 1, &options);
	InitMaterializedSRF(fcinfo, MAT_SRF_USE_EXPECTED_DESC);
	lines = explain_view_query(query, &options);

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
 */
Datum
dj_drop_view(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	bool		drop_table = PG_ARGISNULL(1) ? true : PG_GETARG_BOOL(1);
	ViewRecord	view;
	Oid			relid;

	relid = lookup_view(target, &view, AccessExclusiveLock);
	catalog_delete_view(view.view_id);
	if (drop_table)
	{
		ObjectAddress object;

		object.classId = RelationRelationId;
		object.objectId = relid;
		object.objectSubId = 0;
		performDeletion(&object, DROP_RESTRICT, 0);
	}
	worker_notify();
	PG_RETURN_VOID();
}

/*
 * refresh(target text) RETURNS bigint
 *
 * Rebuild the target from the query over the current sources: residual
 * rows disappear, and a view in error state becomes active again.
 */
Datum
dj_refresh(PG_FUNCTION_ARGS)
{
	char	   *target = required_text_arg(fcinfo, 0, "target");
	ViewRecord	view;
	Oid			relid;
	DeltaPlan  *plan;
	uint64		rows;
	int			nestlevel;

	/*
	 * As in create_view: the slot must exist (or be recreated) before the
	 * refresh writes anything, and the fill must see every change committed
	 * before its locks.
	 */
	worker_ensure_slot();

	relid = lookup_view(target, &view, AccessShareLock);

	/* the query text resolves names as it did for the view's creator */
	nestlevel = catalog_use_search_path(&view);
	plan = catalog_view_plan(&view);
	rows = target_fill(relid, plan, true);
	AtEOXact_GUC(true, nestlevel);
	catalog_rewrite_sources(view.view_id, plan);

	catalog_reset_view(view.view_id, GetXLogInsertRecPtr());
	worker_notify();
	PG_RETURN_INT64((int64) rows);
}
