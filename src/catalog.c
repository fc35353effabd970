/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Reading and writing the extension's catalog tables.
 *
 * The catalog is two ordinary tables in schema delta_join (see the install
 * script): view_catalog, one row per view, and source_catalog, one row per
 * source, which logical decoding reads as a user catalog table.  Users may
 * read them but not write them, so the functions here run their statements
 * as the bootstrap superuser; they are only called after the caller's own
 * rights were checked.  They use SPI, in the caller's transaction, and
 * return results allocated in the caller's memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"

#include "catalog.h"
#include "options.h"

/*
 * Act as role, with search_path, as a security-restricted operation (no
 * function it runs can change the session), until catalog_act_done().  An
 * error in between is undone by the (sub)transaction abort.
 */
void
catalog_act_as(Oid role, const char *search_path, ActingAs *acting)
{
	GetUserIdAndSecContext(&acting->save_userid, &acting->save_sec_context);
	SetUserIdAndSecContext(role,
						   acting->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	acting->nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", search_path,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

void
catalog_act_done(ActingAs *acting)
{
	AtEOXact_GUC(true, acting->nestlevel);
	SetUserIdAndSecContext(acting->save_userid, acting->save_sec_context);
}

/*
 * Run one catalog statement with SPI as the bootstrap superuser, with a
 * search_path of pg_catalog only and as a security-restricted operation, so
 * that nothing the caller defined (an operator or function in a schema of
 * their search_path) can run with those rights.  SPI must be connected.
 * Returns SPI's result code; the caller reads SPI_tuptable before
 * SPI_finish().
 */
int
catalog_exec(const char *sql, int nargs, Oid *argtypes, Datum *values,
			 const char *nulls)
{
	ActingAs	acting;
	int			ret;

	catalog_act_as(BOOTSTRAP_SUPERUSERID, "pg_catalog, pg_temp", &acting);
	ret = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	catalog_act_done(&acting);

	if (ret < 0)
		elog(ERROR, "catalog statement failed: %s", SPI_result_code_string(ret));
	return ret;
}

static Datum
name_array(Oid relid, int n, const AttrNumber *attnums)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		names[i] = DirectFunctionCall1(namein,
									   CStringGetDatum(get_attname(relid, attnums[i], false)));
	return PointerGetDatum(construct_array(names, n, NAMEOID, NAMEDATALEN, false,
										   TYPALIGN_CHAR));
}

/*
 * The source_catalog rows of a view, from its plan.  SPI must be connected.
 */
static void
insert_sources(int view_id, DeltaPlan *plan)
{
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		Oid			stypes[] = {INT4OID, INT4OID, OIDOID, TEXTOID, NAMEARRAYOID,
		OIDOID, NAMEARRAYOID, JSONBOID};
		Datum		svalues[8];
		char		snulls[8] = "        ";
		Relation	idx;
		AttrNumber *lookup_attnums;
		char	   *hint_json;

		svalues[0] = Int32GetDatum(view_id);
		svalues[1] = Int32GetDatum(src->rtindex);
		svalues[2] = ObjectIdGetDatum(src->relid);
		svalues[3] = CStringGetTextDatum(src->alias);
		svalues[4] = name_array(src->relid, src->key_natts, src->key_attnums);
		if (OidIsValid(src->lookup_index))
		{
			idx = index_open(src->lookup_index, AccessShareLock);
			lookup_attnums = palloc(sizeof(AttrNumber) * src->lookup_nkeys);
			for (int i = 0; i < src->lookup_nkeys; i++)
				lookup_attnums[i] = idx->rd_index->indkey.values[i];
			index_close(idx, AccessShareLock);
			svalues[5] = ObjectIdGetDatum(src->lookup_index);
			svalues[6] = name_array(src->relid, src->lookup_nkeys, lookup_attnums);
		}
		else
			snulls[5] = snulls[6] = 'n';
		if (src->cache_size >= 0)
			hint_json = psprintf("{\"cache_size\": %d, \"cache_enabled\": %s}",
								 src->cache_size, src->cache_enabled ? "true" : "false");
		else
			hint_json = psprintf("{\"cache_enabled\": %s}",
								 src->cache_enabled ? "true" : "false");
		svalues[7] = DirectFunctionCall1(jsonb_in, CStringGetDatum(hint_json));
		catalog_exec("INSERT INTO delta_join.source_catalog "
						 "(view_id, ordinal, relid, alias, key_columns, lookup_index, "
						 " lookup_columns, options) "
						 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
						 8, stypes, svalues, snulls);
	}

}

/*
 * Register a view and its sources; returns the new view_id.
 */
int
catalog_insert_view(Oid target, const char *target_name, DeltaPlan *plan,
					const char *search_path, XLogRecPtr lsn)
{
	Oid			vtypes[] = {OIDOID, TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID,
	TEXTOID, OIDOID, PG_LSNOID};
	Datum		vvalues[9];
	int			view_id;
	bool		isnull;

	SPI_connect();

	vvalues[0] = ObjectIdGetDatum(target);
	vvalues[1] = CStringGetTextDatum(target_name);
	vvalues[2] = CStringGetTextDatum(plan->kind == DJ_KIND_JOIN ? "join" : "aggregate");
	vvalues[3] = CStringGetTextDatum(dj_strategy_name(plan->options.strategy));
	vvalues[4] = JsonbPGetDatum(options_to_jsonb(&plan->options));
	vvalues[5] = CStringGetTextDatum(plan->query_text);
	vvalues[6] = CStringGetTextDatum(search_path);
	vvalues[7] = ObjectIdGetDatum(GetUserId());
	vvalues[8] = LSNGetDatum(lsn);
	catalog_exec("INSERT INTO delta_join.view_catalog "
					 "(target, target_name, kind, strategy, options, query, search_path, "
					 " owner, created_lsn, applied_lsn) "
					 "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $9) RETURNING view_id",
					 9, vtypes, vvalues, NULL);
	view_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										  1, &isnull));

	insert_sources(view_id, plan);

	SPI_finish();
	return view_id;
}

/* Fill *view from the current SPI result row; copies into upper context. */
static void
read_view_row(ViewRecord *view)
{
	HeapTuple	tuple = SPI_tuptable->vals[0];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;

	view->view_id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	view->target = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));
	view->target_name = SPI_getvalue(tuple, desc, 3);
	view->kind = strcmp(SPI_getvalue(tuple, desc, 4), "join") == 0 ?
		DJ_KIND_JOIN : DJ_KIND_AGGREGATE;
	view->query = SPI_getvalue(tuple, desc, 5);
	view->search_path = SPI_getvalue(tuple, desc, 6);
	view->options = DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 7, &isnull));
	view->owner = DatumGetObjectId(SPI_getbinval(tuple, desc, 8, &isnull));
	view->in_error = strcmp(SPI_getvalue(tuple, desc, 9), "error") == 0;
	view->applied_lsn = DatumGetLSN(SPI_getbinval(tuple, desc, 10, &isnull));
}

#define VIEW_COLUMNS "view_id, target, target_name, kind, query, search_path, " \
	"options, owner, state, applied_lsn"

/*
 * The view the catalog row "WHERE <column> = $1" names, if any; strings are
 * allocated in the caller's memory context.
 */
static bool
fetch_view(const char *column, Oid argtype, Datum arg, ViewRecord *view)
{
	bool		found;
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	catalog_exec(psprintf("SELECT " VIEW_COLUMNS " FROM delta_join.view_catalog "
							  "WHERE %s = $1", column),
					 1, &argtype, &arg, NULL);
	found = (SPI_processed > 0);
	if (found)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);

		read_view_row(view);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return found;
}

/* The view whose target is `target`, if any. */
bool
catalog_find_view(Oid target, ViewRecord *view)
{
	return fetch_view("target", OIDOID, ObjectIdGetDatum(target), view);
}

/* The view with this id, if it exists. */
bool
catalog_get_view(int view_id, ViewRecord *view)
{
	return fetch_view("view_id", INT4OID, Int32GetDatum(view_id), view);
}

/* Remove a view and (by cascade) its sources. */
void
catalog_delete_view(int view_id)
{
	Oid			types[] = {INT4OID};
	Datum		values[1];

	values[0] = Int32GetDatum(view_id);
	SPI_connect();
	catalog_exec("DELETE FROM delta_join.view_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL);
	SPI_finish();
}

/*
 * After a refresh: the view is active again and complete up to lsn.
 */
void
catalog_reset_view(int view_id, XLogRecPtr lsn)
{
	Oid			types[] = {INT4OID, PG_LSNOID};
	Datum		values[2];

	values[0] = Int32GetDatum(view_id);
	values[1] = LSNGetDatum(lsn);
	SPI_connect();
	catalog_exec("UPDATE delta_join.view_catalog "
					 "SET state = 'active', applied_lsn = greatest(applied_lsn, $2), "
					 "    last_error = NULL, last_error_time = NULL, stale_since_lsn = NULL "
					 "WHERE view_id OPERATOR(pg_catalog.=) $1",
					 2, types, values, NULL);
	SPI_finish();
}

/*
 * Resolve names as the view's creator did, until AtEOXact_GUC(true, level)
 * with the level returned (or the end of the transaction).
 */
int
catalog_use_search_path(ViewRecord *view)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", view->search_path,
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/*
 * The delta plan of a registered view, analyzed as at its creation: with the
 * creator's search_path and the view's stored options.
 */
DeltaPlan *
catalog_view_plan(ViewRecord *view)
{
	DeltaOptions options;
	DeltaPlan  *plan;
	int			nestlevel = catalog_use_search_path(view);

	options_resolve(&options, NULL, view->options);
	plan = analyze_view_query(view->query, &options);
	AtEOXact_GUC(true, nestlevel);
	return plan;
}

/*
 * After a refresh: the sources as the view's query resolves now (a source
 * whose primary key changed captures other key columns from now on).
 */
void
catalog_rewrite_sources(int view_id, DeltaPlan *plan)
{
	Oid			types[] = {INT4OID};
	Datum		values[1];

	values[0] = Int32GetDatum(view_id);
	SPI_connect();
	catalog_exec("DELETE FROM delta_join.source_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
				 1, types, values, NULL);
	insert_sources(view_id, plan);
	SPI_finish();
}

/*
 * Check that the dirty keys decoding captures for the view (the key columns
 * recorded in source_catalog) are still the key columns of the plan, in the
 * same order: a source's primary key redefined since the view was made would
 * otherwise hand the wrong values to the lookups.
 */
void
catalog_check_sources(int view_id, DeltaPlan *plan)
{
	Oid			types[] = {INT4OID};
	Datum		values[1];
	ListCell   *lc;

	values[0] = Int32GetDatum(view_id);
	SPI_connect();
	catalog_exec("SELECT ordinal, array_to_string(key_columns, ',') "
				 "FROM delta_join.source_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
				 1, types, values, NULL);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		StringInfoData now;
		char	   *recorded = NULL;

		initStringInfo(&now);
		for (int k = 0; k < src->key_natts; k++)
			appendStringInfo(&now, "%s%s", k > 0 ? "," : "",
							 get_attname(src->relid, src->key_attnums[k], false));
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;

			if (DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
											1, &isnull)) == src->rtindex)
				recorded = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		}
		if (recorded == NULL || strcmp(recorded, now.data) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the key of source \"%s\" changed since the view was created",
							src->relname),
					 errdetail("Changes are captured by (%s); the key is now (%s).",
							   recorded ? recorded : "", now.data),
					 errhint("Rebuild the view with delta_join.refresh().")));
	}
	SPI_finish();
}
