/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Reading and writing the extension's catalog tables.
 *
 * The catalog is two ordinary tables in schema delta_join (see the install
 * script): view_catalog, one row per view, and source_catalog, one row per
 * source, which logical decoding reads as a user catalog table.  A view's
 * query is not in the catalog: it is bound in the view's query view
 * (query.c), which view_catalog names.
 *
 * Users may read the catalog but not write it, so the statements here run
 * as the bootstrap superuser, restricted (runas.c); they are only called
 * after the caller's own rights were checked.  They use SPI, in the
 * caller's transaction, and return results allocated in the caller's
 * memory context.  The one exception is catalog_decode_sources(), which
 * the output plugin calls under a historic snapshot, where SPI cannot run:
 * it scans source_catalog directly.
 *
 * The catalog's layout is that of the extension's version installed in the
 * database, which may not be the one this library was made for: between
 * the installation of a new library and ALTER EXTENSION delta_join UPDATE
 * it is older.  catalog_version_check() says whether the library runs it
 * (delta_join.h, DJ_OLDEST_VERSION); where it does not, the apply worker
 * waits and the view functions refuse, naming what to do.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/options.h"
#include "base/runas.h"
#include "registry/catalog.h"

static char *installed_version(void);
static bool compare_versions(const char *a, const char *b, int *result);
static bool catalog_has_error_details(void);
static char *error_columns(int first);

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
	RunAs		runas;
	int			ret;

	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);

	/* Citus hides the shard tables of a node from pg_class: targets may be ones */
	if (GetConfigOption("citus.override_table_visibility", true, false) != NULL)
		(void) set_config_option("citus.override_table_visibility", "off", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);

	/*
	 * The DDL guard reads the definitions of distributed views, a reference
	 * table, also while Citus drops the shards of a table on this node
	 * (DROP TABLE on a coordinator that holds shards): Citus refuses that
	 * nested read unless allowed.  It reads this node's copy, which is
	 * whole.
	 */
	if (GetConfigOption("citus.allow_nested_distributed_execution", true, false) != NULL)
		(void) set_config_option("citus.allow_nested_distributed_execution", "on", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	ret = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	runas_end(&runas);

	if (ret < 0)
		elog(ERROR, "catalog statement failed: %s", SPI_result_code_string(ret));
	return ret;
}

static Datum
int2_array(int n, const AttrNumber *attnums)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		elems[i] = Int16GetDatum(attnums[i]);
	return PointerGetDatum(construct_array(elems, n, INT2OID, sizeof(int16), true,
										   TYPALIGN_SHORT));
}

/* The values of an int2[] (source_catalog.key_attnums), and how many */
static AttrNumber *
int2_array_values(Datum array, int *n)
{
	Datum	   *elems;
	AttrNumber *attnums;

	deconstruct_array(DatumGetArrayTypeP(array), INT2OID, sizeof(int16), true,
					  TYPALIGN_SHORT, &elems, NULL, n);
	attnums = palloc(sizeof(AttrNumber) * Max(*n, 1));
	for (int k = 0; k < *n; k++)
		attnums[k] = DatumGetInt16(elems[k]);
	return attnums;
}

/*
 * The source_catalog rows of a view (SourceRecord *).  SPI must be
 * connected.
 */
static void
insert_sources(int view_id, List *sources)
{
	ListCell   *lc;

	foreach(lc, sources)
	{
		SourceRecord *src = lfirst(lc);
		Oid			types[] = {INT4OID, INT4OID, OIDOID, INT2ARRAYOID, JSONBOID};
		Datum		values[5];

		values[0] = Int32GetDatum(view_id);
		values[1] = Int32GetDatum(src->ordinal);
		values[2] = ObjectIdGetDatum(src->relid);
		values[3] = int2_array(src->nkeys, src->key_attnums);
		values[4] = JsonbPGetDatum(hint_to_jsonb(&src->hint));
		catalog_exec("INSERT INTO delta_join.source_catalog "
					 "(view_id, ordinal, relid, key_attnums, options) "
					 "VALUES ($1, $2, $3, $4, $5)",
					 5, types, values, NULL);
	}
}

/*
 * Register a view and its sources; returns the new view_id.
 */
int
catalog_insert_view(Oid target, Oid query_view, DeltaKind kind, DeltaPath path,
					const DeltaOptions *options, List *sources, Jsonb *settings,
					XLogRecPtr lsn, const char *managed_by)
{
	Oid			types[] = {OIDOID, OIDOID, TEXTOID, TEXTOID, JSONBOID, JSONBOID, PG_LSNOID,
		TEXTOID, TEXTOID};
	Datum		values[9];
	char		nulls[9] = "        ";
	int			view_id;
	bool		isnull;

	SPI_connect();

	values[0] = ObjectIdGetDatum(target);
	values[1] = ObjectIdGetDatum(query_view);
	values[2] = CStringGetTextDatum(dj_kind_name(kind));
	values[3] = CStringGetTextDatum(dj_strategy_name(options->strategy));
	values[4] = JsonbPGetDatum(options_to_jsonb(options));
	values[5] = JsonbPGetDatum(settings);
	values[6] = LSNGetDatum(lsn);
	values[7] = CStringGetTextDatum(dj_path_name(path));
	values[8] = managed_by ? CStringGetTextDatum(managed_by) : (Datum) 0;
	nulls[8] = managed_by ? ' ' : 'n';
	catalog_exec("INSERT INTO delta_join.view_catalog "
				 "(target, query_view, kind, strategy, options, settings, "
				 " created_lsn, applied_lsn, path, managed_by) "
				 "VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9) RETURNING view_id",
				 9, types, values, nulls);
	view_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
										  1, &isnull));

	insert_sources(view_id, sources);

	SPI_finish();
	return view_id;
}

/*
 * The distributed view whose shard group a view's target is (the name of
 * its target on the coordinator), or NULL.  Read from this node's catalog,
 * so that Citus is never asked from within a command it sent to a shard.
 */
char *
catalog_managed_by(Oid target)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(target)};
	char	   *result = NULL;
	MemoryContext cxt = CurrentMemoryContext;

	SPI_connect();
	catalog_exec("SELECT managed_by FROM delta_join.view_catalog"
				 " WHERE target OPERATOR(pg_catalog.=) $1", 1, types, values, NULL);
	if (SPI_processed > 0)
	{
		char	   *value = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (value != NULL)
			result = MemoryContextStrdup(cxt, value);
	}
	SPI_finish();
	return result;
}

#define VIEW_COLUMNS "view_id, target, query_view, kind, options, settings, " \
	"state, applied_lsn, path, xmin"

/* Fill *view from row i of the current SPI result (sources not read). */
static void
read_view_row(uint64 i, ViewRecord *view)
{
	HeapTuple	tuple = SPI_tuptable->vals[i];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	bool		isnull;
	Datum		value;

	memset(view, 0, sizeof(ViewRecord));
	view->view_id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
	view->target = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));
	value = SPI_getbinval(tuple, desc, 3, &isnull);
	view->query_view = isnull ? InvalidOid : DatumGetObjectId(value);
	view->kind = strcmp(SPI_getvalue(tuple, desc, 4), "join") == 0 ? DJ_KIND_JOIN :
		strcmp(SPI_getvalue(tuple, desc, 4), "aggregate") == 0 ? DJ_KIND_AGGREGATE :
		DJ_KIND_QUERY;
	options_resolve(&view->options, NULL,
					DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 5, &isnull)));
	view->settings = DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 6, &isnull));
	view->in_error = strcmp(SPI_getvalue(tuple, desc, 7), "error") == 0;
	view->backfilling = strcmp(SPI_getvalue(tuple, desc, 7), "backfilling") == 0;
	view->applied_lsn = DatumGetLSN(SPI_getbinval(tuple, desc, 8, &isnull));
	if (!dj_parse_path(SPI_getvalue(tuple, desc, 9), &view->path))
		elog(ERROR, "delta view %d has an unknown path", view->view_id);
	view->row_xmin = DatumGetTransactionId(SPI_getbinval(tuple, desc, 10, &isnull));
}

/* A SourceRecord from row i of the current SPI result */
static SourceRecord *
read_source_row(uint64 i)
{
	HeapTuple	tuple = SPI_tuptable->vals[i];
	TupleDesc	desc = SPI_tuptable->tupdesc;
	SourceRecord *src = palloc0(sizeof(SourceRecord));
	bool		isnull;

	src->ordinal = DatumGetInt32(SPI_getbinval(tuple, desc, 2, &isnull));
	src->relid = DatumGetObjectId(SPI_getbinval(tuple, desc, 3, &isnull));
	src->key_attnums = int2_array_values(SPI_getbinval(tuple, desc, 4, &isnull), &src->nkeys);
	hint_from_jsonb(&src->hint, DatumGetJsonbPCopy(SPI_getbinval(tuple, desc, 5, &isnull)));
	src->hint.rtindex = src->ordinal;
	src->hint.relid = src->relid;
	return src;
}

/*
 * The views the catalog row filter "WHERE <where>" selects (all with NULL),
 * with their sources, as ViewRecords allocated in the caller's context.
 */
static List *
fetch_views(const char *where, Oid argtype, Datum arg)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *views = NIL;
	ListCell   *lc;

	SPI_connect();
	catalog_exec(psprintf("SELECT " VIEW_COLUMNS " FROM delta_join.view_catalog %s%s "
						  "ORDER BY view_id",
						  where ? "WHERE " : "", where ? where : ""),
				 where ? 1 : 0, &argtype, &arg, NULL);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(caller);
		ViewRecord *view = palloc(sizeof(ViewRecord));

		read_view_row(i, view);
		views = lappend(views, view);
		MemoryContextSwitchTo(spi);
	}

	if (views != NIL)
	{
		catalog_exec("SELECT view_id, ordinal, relid, key_attnums, options "
					 "FROM delta_join.source_catalog ORDER BY view_id, ordinal",
					 0, NULL, NULL, NULL);
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int			view_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
															  SPI_tuptable->tupdesc,
															  1, &isnull));

			foreach(lc, views)
			{
				ViewRecord *view = lfirst(lc);

				if (view->view_id == view_id)
				{
					MemoryContext spi = MemoryContextSwitchTo(caller);

					view->sources = lappend(view->sources, read_source_row(i));
					MemoryContextSwitchTo(spi);
				}
			}
		}
	}
	SPI_finish();
	return views;
}

/* The view whose target is `target`, if any. */
bool
catalog_find_view(Oid target, ViewRecord *view)
{
	List	   *views = fetch_views("target OPERATOR(pg_catalog.=) $1", OIDOID,
									ObjectIdGetDatum(target));

	if (views == NIL)
		return false;
	*view = *(ViewRecord *) linitial(views);
	return true;
}

/*
 * Was the view's catalog row written by a transaction that snapshot does
 * not see: a create_view or refresh() that committed after it was taken?
 * The row is read as it is now, in C, because only its tuple header tells
 * a frozen xmin from an old one.  The caller holds the locks that such a
 * transaction takes on the target, so that the row read now is the last
 * one.  A view whose row is gone was dropped meanwhile: true.
 */
bool
catalog_view_written_after(ViewRecord *view, Snapshot snapshot)
{
	Oid			relid = get_relname_relid("view_catalog",
										  get_namespace_oid(DJ_SCHEMA, false));
	Relation	rel = table_open(relid, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		after = true;

	ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(view->view_id));
	scan = systable_beginscan(rel, RelationGetPrimaryKeyIndex_compat(rel), true,
							  GetLatestSnapshot(), 1, &key);
	if (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		TransactionId xmin = HeapTupleHeaderGetXmin(tuple->t_data);

		after = TransactionIdIsNormal(xmin) && XidInMVCCSnapshot(xmin, snapshot);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return after;
}

/* The OID of a relation of our schema, or InvalidOid */
Oid
catalog_relid(const char *relname)
{
	Oid			nspid = get_namespace_oid(DJ_SCHEMA, true);

	return OidIsValid(nspid) ? get_relname_relid(relname, nspid) : InvalidOid;
}

/*
 * Keep the extension from being dropped until the transaction ends or
 * catalog_unlock_extension: AccessShareLock on its pg_extension object,
 * which DROP EXTENSION locks before any object of the extension's.  Taken
 * by a background process before it reads the catalog, so that what it
 * found stays there for its reads, and for the decoding that relies on it
 * (decoding replays the changes of source_catalog, and builds its relcache
 * entry under the historic snapshot from the present pg_class: once the
 * extension is dropped, core fails there, "could not find pg_class entry").
 *
 * Never waited for: false when a DROP EXTENSION holds the lock or waits for
 * it (the caller comes back later; waiting would end in its lock_timeout,
 * an error, while a DROP sits in an open transaction).  True when locked,
 * or when the extension is not installed.
 */
static Oid	locked_extension = InvalidOid;	/* what catalog_lock_extension
											 * locked last */

bool
catalog_lock_extension(void)
{
	LOCKTAG		tag;

	locked_extension = get_extension_oid(DJ_EXTENSION_NAME, true);
	if (!OidIsValid(locked_extension))
		return true;
	SET_LOCKTAG_OBJECT(tag, MyDatabaseId, ExtensionRelationId, locked_extension, 0);
	if (LockAcquire(&tag, AccessShareLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		locked_extension = InvalidOid;
		return false;
	}
	return true;
}

/*
 * Let go, before the transaction ends, of the lock that the transaction's
 * last catalog_lock_extension took
 */
void
catalog_unlock_extension(void)
{
	if (OidIsValid(locked_extension))
		UnlockDatabaseObject(ExtensionRelationId, locked_extension, 0, AccessShareLock);
	locked_extension = InvalidOid;
}

/*
 * In a transaction: lock the extension (catalog_lock_extension) and its
 * catalog of views in mode, if both can be had at once.  False when a
 * DROP EXTENSION or a DDL of an update (ALTER EXTENSION ... UPDATE, left
 * open in a transaction) holds either: the caller, a background process,
 * comes back later.  Waiting would end in its lock_timeout, an error, and
 * a restart, again and again until that transaction ends.  True, with
 * nothing locked, when the extension is not installed.
 */
bool
catalog_lock_views(LOCKMODE mode)
{
	Oid			catalog;

	if (!catalog_lock_extension())
		return false;
	catalog = catalog_relid("view_catalog");
	return !OidIsValid(catalog) || ConditionalLockRelationOid(catalog, mode);
}

/*
 * Put every active view of this database in error: changes from its
 * applied_lsn on were not applied.  In the caller's transaction.  One
 * warning says how many (catalog_set_error puts one view in error).
 */
void
catalog_mark_views_stale(const char *reason)
{
	Oid			argtypes[3] = {TEXTOID, TEXTOID, TEXTOID};
	Datum		values[3] = {CStringGetTextDatum(reason), (Datum) 0, (Datum) 0};

	SPI_connect();
	if (catalog_exec(psprintf("UPDATE delta_join.view_catalog SET %s"
							  " WHERE state OPERATOR(pg_catalog.<>) 'error'",
							  error_columns(1)),
					 3, argtypes, values, " nn") != SPI_OK_UPDATE)
		elog(ERROR, "could not update delta_join.view_catalog");
	if (SPI_processed > 0)
		ereport(WARNING,
				(errmsg("%llu delta views missed changes and are now in error",
						(unsigned long long) SPI_processed),
				 errdetail("%s.", reason),
				 errhint("Rebuild them with delta_join.refresh().")));
	SPI_finish();
}

/*
 * The oldest applied_lsn of the views of this database: no view needs a
 * change that committed before it.  InvalidXLogRecPtr when there are none.
 */
XLogRecPtr
catalog_oldest_applied_lsn(void)
{
	XLogRecPtr	lsn = InvalidXLogRecPtr;
	bool		isnull;
	Datum		value;

	SPI_connect();
	if (catalog_exec("SELECT pg_catalog.min(applied_lsn) FROM delta_join.view_catalog",
					 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read delta_join.view_catalog");
	value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
		lsn = DatumGetLSN(value);
	SPI_finish();
	return lsn;
}

/* Every view of the database, in view_id order (ViewRecord *). */
List *
catalog_list_views(void)
{
	return fetch_views(NULL, InvalidOid, (Datum) 0);
}

/* The view view_id of views (ViewRecord *, catalog_list_views), or NULL */
ViewRecord *
catalog_view_in(List *views, int view_id)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (view->view_id == view_id)
			return view;
	}
	return NULL;
}

/* Run one statement on the view's catalog row, $1 being its view_id. */
static void
update_view(int view_id, const char *sql, int nargs, Oid *argtypes, Datum *args)
{
	Oid			types[4] = {INT4OID};
	Datum		values[4];

	values[0] = Int32GetDatum(view_id);
	for (int i = 0; i < nargs; i++)
	{
		types[i + 1] = argtypes[i];
		values[i + 1] = args[i];
	}
	SPI_connect();
	catalog_exec(sql, nargs + 1, types, values, NULL);
	SPI_finish();
}

/* Remove a view and (by cascade) its sources. */
void
catalog_delete_view(int view_id)
{
	update_view(view_id,
				"DELETE FROM delta_join.view_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
				0, NULL, NULL);
}

/*
 * Give a view a new view_id, keeping everything else of its row, with no
 * source rows: a refresh that registers other key columns (view_plan.c,
 * view_plan_load_to_rebuild) makes the view a new one to decoding and the
 * worker, which drop what they hold under the old id (keys of the old
 * columns, whose changes the refresh's fill covers) as for a dropped view.
 * Returns the new view_id.
 */
int
catalog_renumber_view(int view_id)
{
	bool		isnull;
	int			renumbered;

	update_view(view_id,
				"DELETE FROM delta_join.source_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
				0, NULL, NULL);
	SPI_connect();
	catalog_exec("UPDATE delta_join.view_catalog "
				 "SET view_id = pg_catalog.nextval('delta_join.view_catalog_view_id_seq') "
				 "WHERE view_id OPERATOR(pg_catalog.=) $1 RETURNING view_id",
				 1, (Oid[]) {INT4OID}, (Datum[]) {Int32GetDatum(view_id)}, NULL);
	if (SPI_processed != 1)
		elog(ERROR, "delta view %d is not in the catalog", view_id);
	renumbered = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											 1, &isnull));
	SPI_finish();
	return renumbered;
}

/*
 * After a refresh: the view is active again and complete up to lsn.
 */
void
catalog_reset_view(int view_id, XLogRecPtr lsn)
{
	Oid			types[] = {PG_LSNOID};
	Datum		values[] = {LSNGetDatum(lsn)};

	update_view(view_id,
				psprintf("UPDATE delta_join.view_catalog "
						 "SET state = 'active', applied_lsn = GREATEST(applied_lsn, $2), "
						 "    last_error = NULL, last_error_time = NULL, stale_since_lsn = NULL%s "
						 "WHERE view_id OPERATOR(pg_catalog.=) $1",
						 catalog_has_error_details() ?
						 ", last_error_detail = NULL, last_error_hint = NULL" : ""),
				1, types, values);
}

/*
 * A concurrent create or refresh (ops/concurrent.c) holds the view's
 * changes back until catalog_reset_view makes it active again.  Only in a
 * catalog of version 0.2 or later, which has the state (the functions of
 * 0.1 have no concurrently argument).
 */
void
catalog_set_backfilling(int view_id)
{
	update_view(view_id,
				"UPDATE delta_join.view_catalog SET state = 'backfilling' "
				"WHERE view_id OPERATOR(pg_catalog.=) $1",
				0, NULL, NULL);
}

/*
 * Are the SQL objects installed in this database of that version or later?
 * The library runs a 0.1 catalog until ALTER EXTENSION delta_join UPDATE
 * (catalog_version_check), using none of what 0.2 added.
 */
bool
catalog_installed_at_least(const char *version)
{
	char	   *installed = installed_version();
	int			cmp;

	return installed != NULL && compare_versions(installed, version, &cmp) && cmp >= 0;
}

/* Does view_catalog have last_error_detail and last_error_hint?  From 0.2. */
static bool
catalog_has_error_details(void)
{
	return catalog_installed_at_least("0.2");
}

/*
 * The SET list that puts a view in error, its message in parameter $first,
 * its detail and hint in the next two when the catalog has them.
 */
static char *
error_columns(int first)
{
	return psprintf("state = 'error', last_error = $%d, last_error_time = pg_catalog.now(), "
					"stale_since_lsn = applied_lsn%s",
					first,
					catalog_has_error_details() ?
					psprintf(", last_error_detail = $%d, last_error_hint = $%d",
							 first + 1, first + 2) : "");
}

/*
 * Put a view in error (active, or backfilling), the one way every path does: it is no longer
 * maintained until a refresh rebuilds it; the changes from its applied
 * position on are not applied.  error says why (its message, detail and
 * hint are stored, and shown in delta_join.status; its context only goes to
 * the server log).  With report, a warning says so, with the error's
 * detail, hint (or, without one, to refresh the view) and context.
 *
 * Returns whether the view went to error now: false when it is gone or in
 * error already, which is then neither written nor reported.  In the
 * caller's transaction.
 */
bool
catalog_set_error(ViewRecord *view, const ErrorData *error, bool report)
{
	const char *message = error->message ? error->message : "unknown error";
	Oid			types[] = {INT4OID, TEXTOID, TEXTOID, TEXTOID};
	Datum		values[4];
	char		nulls[] = "    ";
	bool		done;

	values[0] = Int32GetDatum(view->view_id);
	values[1] = CStringGetTextDatum(message);
	values[2] = error->detail ? CStringGetTextDatum(error->detail) : (Datum) 0;
	nulls[2] = error->detail ? ' ' : 'n';
	values[3] = error->hint ? CStringGetTextDatum(error->hint) : (Datum) 0;
	nulls[3] = error->hint ? ' ' : 'n';

	SPI_connect();
	catalog_exec(psprintf("UPDATE delta_join.view_catalog SET %s "
						  "WHERE view_id OPERATOR(pg_catalog.=) $1 "
						  "  AND state OPERATOR(pg_catalog.<>) 'error'",
						  error_columns(2)),
				 4, types, values, nulls);
	done = (SPI_processed > 0);
	SPI_finish();

	view->in_error = true;
	if (done && report)
		ereport(WARNING,
				(errmsg("delta view %s is in error and no longer maintained: %s",
						dj_message_name(catalog_view_name(view)), message),
				 error->detail ? errdetail_internal("%s", error->detail) : 0,
				 error->hint ? errhint("%s", error->hint) :
				 errhint("Fix the cause, then rebuild the view with delta_join.refresh()."),
				 error->context ? errcontext("%s", error->context) : 0));
	return done;
}

/* The views listed were applied up to lsn (in the batch's transaction). */
void
catalog_set_applied(int nviews, const int *view_ids, XLogRecPtr lsn)
{
	Oid			types[] = {INT4ARRAYOID, PG_LSNOID};
	Datum		values[2];
	Datum	   *ids = palloc(sizeof(Datum) * Max(nviews, 1));

	if (nviews == 0)
		return;
	for (int i = 0; i < nviews; i++)
		ids[i] = Int32GetDatum(view_ids[i]);
	values[0] = PointerGetDatum(construct_array(ids, nviews, INT4OID, sizeof(int32), true,
												TYPALIGN_INT));
	values[1] = LSNGetDatum(lsn);
	SPI_connect();
	catalog_exec("UPDATE delta_join.view_catalog "
				 "SET applied_lsn = $2 "
				 "WHERE view_id OPERATOR(pg_catalog.=) ANY ($1) "
				 "AND applied_lsn OPERATOR(pg_catalog.<) $2",
				 2, types, values, NULL);
	SPI_finish();
}

/* The view's query view was dropped: forget it. */
void
catalog_forget_query_view(int view_id)
{
	update_view(view_id,
				"UPDATE delta_join.view_catalog SET query_view = NULL "
				"WHERE view_id OPERATOR(pg_catalog.=) $1",
				0, NULL, NULL);
}

/*
 * After a refresh: the sources as the view's query analyzes now
 * (SourceRecord *; a source whose primary key was redefined in a restored
 * database captures its new key columns from now on).
 */
void
catalog_rewrite_sources(int view_id, List *sources)
{
	update_view(view_id,
				"DELETE FROM delta_join.source_catalog WHERE view_id OPERATOR(pg_catalog.=) $1",
				0, NULL, NULL);
	SPI_connect();
	insert_sources(view_id, sources);
	SPI_finish();
}

/* The qualified name of a view's target, for messages */
char *
catalog_view_name(ViewRecord *view)
{
	char	   *relname = get_rel_name(view->target);

	if (relname == NULL)
		return psprintf("(dropped table %u)", view->target);
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(view->target)),
									  relname);
}

/* The table hints of a view's sources, as the analyzer takes them. */
List *
catalog_hints(ViewRecord *view)
{
	List	   *hints = NIL;
	ListCell   *lc;

	foreach(lc, view->sources)
		hints = lappend(hints, &((SourceRecord *) lfirst(lc))->hint);
	return hints;
}

/*
 * The (view, source) pairs whose source is relid, from source_catalog as
 * the current catalog snapshot sees it (for the output plugin: the
 * historic snapshot of the change being decoded).  catrel is
 * source_catalog, opened by the caller; catindex its relid index, or
 * InvalidOid to scan it whole.  Returns SourceKeys *, allocated in the
 * caller's context.
 */
List *
catalog_decode_sources(Relation catrel, Oid catindex, Oid relid)
{
	TupleDesc	desc = RelationGetDescr(catrel);
	List	   *result = NIL;
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;

	/* columns 1-5: view_id, ordinal, relid, key_attnums, options (install script) */
	ScanKeyInit(&skey, 3, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(catrel, catindex, OidIsValid(catindex), NULL, 1, &skey);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		SourceKeys *keys = palloc(sizeof(SourceKeys));
		bool		isnull;
		DeltaHint	hint;

		keys->view_id = DatumGetInt32(heap_getattr(tuple, 1, desc, &isnull));
		keys->ordinal = DatumGetInt32(heap_getattr(tuple, 2, desc, &isnull));
		keys->relid = relid;
		keys->key_attnums = int2_array_values(heap_getattr(tuple, 4, desc, &isnull),
											  &keys->nkeys);
		hint_from_jsonb(&hint, DatumGetJsonbP(heap_getattr(tuple, 5, desc, &isnull)));
		keys->lookup_only = hint.lookup_only;
		result = lappend(result, keys);
	}
	systable_endscan(scan);
	return result;
}

/* ----------------------------------------------------------------
 *		Versions (DJ_VERSION, DJ_OLDEST_VERSION in delta_join.h)
 * ----------------------------------------------------------------
 */

/*
 * The version of delta_join's SQL objects in this database
 * (pg_extension.extversion), or NULL when the extension is not installed.
 */
static char *
installed_version(void)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *version = NULL;

	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber, F_NAMEEQ,
				CStringGetDatum(DJ_EXTENSION_NAME));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		value = heap_getattr(tuple, Anum_pg_extension_extversion,
										 RelationGetDescr(rel), &isnull);

		if (!isnull)
			version = text_to_cstring(DatumGetTextPP(value));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return version;
}

/*
 * Read one number of a version ("0.2", "1.10") at *p and step past it and
 * its dot; a version that has run out reads as zeros.  False when *p is not
 * of that form.
 */
static bool
version_part(const char **p, long *value)
{
	char	   *end;

	*value = 0;
	if (**p == '\0')
		return true;
	if (!isdigit((unsigned char) **p))
		return false;
	*value = strtol(*p, &end, 10);
	*p = end;
	if (**p == '.' && isdigit((unsigned char) (*p)[1]))
		(*p)++;
	return **p == '\0' || isdigit((unsigned char) **p);
}

/*
 * Compare two versions: *result <0, 0 or >0.  False when one of them is not
 * made of numbers separated by dots.
 */
static bool
compare_versions(const char *a, const char *b, int *result)
{
	*result = 0;
	while (*a != '\0' || *b != '\0')
	{
		long		x;
		long		y;

		if (!version_part(&a, &x) || !version_part(&b, &y))
			return false;
		if (x != y)
		{
			*result = (x < y) ? -1 : 1;
			return true;
		}
	}
	return true;
}

/*
 * Can this library run the SQL objects installed in this database?
 * CATALOG_VERSION_OK when it can (or the extension is not installed);
 * otherwise *installed is their version, and the answer says what to do:
 * update them (CATALOG_VERSION_OLDER), or restart the server so that it
 * loads the library installed with them (CATALOG_VERSION_NEWER, also for a
 * version this library cannot read).  Needs a transaction.
 */
CatalogVersion
catalog_version_check(char **installed)
{
	char	   *version = installed_version();
	int			cmp;

	*installed = version;
	if (version == NULL)
		return CATALOG_VERSION_OK;
	if (!compare_versions(version, DJ_OLDEST_VERSION, &cmp))
		return CATALOG_VERSION_NEWER;
	if (cmp < 0)
		return CATALOG_VERSION_OLDER;
	(void) compare_versions(version, DJ_VERSION, &cmp);
	return (cmp > 0) ? CATALOG_VERSION_NEWER : CATALOG_VERSION_OK;
}

/*
 * Why this library does not run the SQL objects of this database, as the
 * reason delta_join.status gives, or NULL when it runs them.
 */
char *
catalog_version_problem(void)
{
	char	   *installed;

	switch (catalog_version_check(&installed))
	{
		case CATALOG_VERSION_OK:
			return NULL;
		case CATALOG_VERSION_OLDER:
			return psprintf("the SQL objects of delta_join in this database are version %s, older than the library (version %s) runs: run ALTER EXTENSION delta_join UPDATE",
							installed, DJ_VERSION);
		case CATALOG_VERSION_NEWER:
			break;
	}
	return psprintf("the SQL objects of delta_join in this database are version %s, which the library (version %s) does not run: restart the server, so that it loads the library installed with them",
					installed, DJ_VERSION);
}

/*
 * Refuse to go on when this library does not run the SQL objects of this
 * database: views are not created, changed or waited for until they are
 * updated (or the library that goes with them is loaded).
 */
void
catalog_require_version(void)
{
	char	   *installed;
	CatalogVersion check = catalog_version_check(&installed);

	if (check == CATALOG_VERSION_OK)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the SQL objects of delta_join in this database are version %s, which the library (version %s) does not run",
					installed, DJ_VERSION),
			 errdetail("The library runs the objects of versions %s to %s.",
					   DJ_OLDEST_VERSION, DJ_VERSION),
			 check == CATALOG_VERSION_OLDER ?
			 errhint("Run ALTER EXTENSION delta_join UPDATE.") :
			 errhint("Restart the server, so that it loads the library installed with version %s.",
					 installed)));
}
