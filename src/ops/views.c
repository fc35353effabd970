/*-------------------------------------------------------------------------
 *
 * views.c
 *	  The operations on views: create, drop and refresh a view, and the
 *	  view lock they take.  The SQL functions (face/sql_views.c), the DDL
 *	  guard and the distributed views of Citus call them.
 *
 * The caller's rights are checked as for the equivalent DDL: create_view
 * parses the query as the caller, who must own an existing target;
 * drop_view and refresh need the target's ownership.  Everything that
 * evaluates the query -- the backfill, a refresh, later the apply worker --
 * runs as the target's owner with the view's pinned settings (runas.c).
 *
 * The three operations that change views take, in this order (target.c has
 * the whole lock order):
 *
 *	- launcher_ensure_slot() first, before the transaction writes or locks
 *	  anything, so that every change committed from then on is decoded;
 *	- the view lock: ShareUpdateExclusiveLock on view_catalog, which
 *	  conflicts with itself, so that changes to the views of a database
 *	  happen one at a time and can never deadlock with each other;
 *	- then the sources (target_lock_sources), then the target.
 *
 * Every change ends with launcher_notify(), so the database's apply worker
 * picks it up once the transaction commits.  None of them runs on a
 * standby: its catalog is the primary's, and read-only.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "commands/tablecmds.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"

#include "analysis/view_plan.h"
#include "analysis/analyze.h"
#include "ops/views.h"
#include "apply/apply.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"
#include "base/shmem.h"
#include "process/launcher.h"
#include "base/progress.h"
#include "analysis/query.h"
#include "base/runas.h"
#include "apply/target_shape.h"
#include "ops/target.h"
#include "process/worker.h"

/* Refuse to run on a standby, naming the function. */
void
ops_check_primary(const char *function)
{
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("delta_join.%s() cannot run on a standby", function),
				 errdetail("Delta views are maintained on the primary; a standby receives their targets through replication."),
				 errhint("Run it on the primary.  delta_join.views and delta_join.status can be read here.")));
}

/*
 * The view lock's table is gone: a DROP EXTENSION committed after this
 * command's function was found, maybe while it waited for the lock (the
 * lock is on the table's OID, and is granted once the drop has ended).
 */
static void
extension_dropped(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extension \"delta_join\" was dropped"),
			 errdetail("DROP EXTENSION delta_join committed while this command ran or waited for its turn to change the views."),
			 errhint("Create the extension again (CREATE EXTENSION delta_join), then the views.")));
}

/*
 * One change to the views of this database at a time (see the banner), and
 * only to a catalog this library runs.
 */
void
ops_lock_views(void)
{
	Oid			catalog_oid = catalog_relid("view_catalog");

	if (!OidIsValid(catalog_oid))
		extension_dropped();
	LockRelationOid(catalog_oid, ShareUpdateExclusiveLock);
	/* the invalidations of a drop that the lock waited for are read by now */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(catalog_oid)))
		extension_dropped();
	catalog_require_version();
}

/* ops_lock_views if the lock is free now; false if not */
bool
ops_try_lock_views(void)
{
	Oid			catalog_oid = catalog_relid("view_catalog");

	if (!OidIsValid(catalog_oid))
		extension_dropped();
	if (!ConditionalLockRelationOid(catalog_oid, ShareUpdateExclusiveLock))
		return false;
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(catalog_oid)))
		extension_dropped();
	return true;
}

/* The qualified, quoted name of a relation */
char *
ops_relation_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* The caller must own the table (a target), as for its DDL */
void
ops_check_owner(Oid relid)
{
	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
}

/* RangeVarGetRelidExtended callback: no lock on another's table */
static void
check_owner_before_lock(const RangeVar *relation, Oid relid, Oid oldrelid, void *arg)
{
	if (OidIsValid(relid))
		ops_check_owner(relid);
}

/*
 * The view whose target is named by `target`, after checking the caller
 * owns it.  Raises an error if there is none.
 */
Oid
ops_lookup_view(const char *target, ViewRecord *view, LOCKMODE lockmode)
{
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList_compat(target));
	Oid			relid = RangeVarGetRelidExtended(rv, lockmode, RVR_MISSING_OK,
												 check_owner_before_lock, NULL);

	if (!OidIsValid(relid) || !catalog_find_view(relid, view))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s is not the target of a delta view", dj_message_name(target)),
				 errhint("delta_join.views lists the delta views.")));
	return relid;
}

/* Is a table empty, read as the caller (through Citus for a distributed one)? */
bool
ops_relation_is_empty(Oid relid)
{
	bool		empty;

	SPI_connect();
	if (SPI_execute(psprintf("SELECT 1 FROM %s LIMIT 1", ops_relation_name(relid)),
					true, 1) < 0)
		elog(ERROR, "SPI_execute failed");
	empty = (SPI_processed == 0);
	SPI_finish();
	return empty;
}

/*
 * Check, as the target's owner, that the view can be evaluated: the rights
 * its query needs on the sources, and that no row security applies to them
 * (lookups read the sources directly).
 */
static void
check_owner_access(Oid target, DeltaPlan *plan, Jsonb *settings)
{
	RunAs		runas;

	runas_begin_view(runas_target_owner(target), settings, &runas);
	apply_check_access(plan, target);
	runas_end(&runas);
}

/*
 * Take the new view's place in shared memory, where its progress is kept;
 * refuse the view when there is none.
 */
static void
reserve_progress(int view_id)
{
	List	   *live = NIL;
	ListCell   *lc;

	foreach(lc, catalog_list_views())
		live = lappend_int(live, ((ViewRecord *) lfirst(lc))->view_id);
	if (!progress_reserve(view_id, live))
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many delta views: shared memory has room for %d", dj_max_views),
				 errhint("Raise delta_join.max_views and restart the server.")));
}

/* ----------------------------------------------------------------
 *		The operations
 * ----------------------------------------------------------------
 */

/*
 * Create a view of an analyzed query (query_parse) into target, a name:
 * an existing table, empty unless replace, or a new one.  settings are the
 * settings the view pins, or NULL for the caller's; managed_by the
 * distributed view it is a shard group of, or NULL.  The caller has made
 * sure the slot exists and holds the view lock (launcher_ensure_slot,
 * lock_views).  Returns the target.  Concurrently: only registered, in
 * state 'backfilling' (ops_register_view).
 */
static Oid
create_view(const char *target, Query *query, List *hints,
			DeltaOptions *options, Jsonb *settings, bool replace,
			const char *managed_by, bool concurrently, int *view_id_out,
			bool *created_out)
{
	DeltaPlan  *plan;
	RangeVar   *rv;
	Oid			relid;
	Oid			target_nsp;
	bool		created = false;
	Oid			query_view;
	int			view_id;
	ListCell   *lc;
	ViewRecord	existing;

	plan = analyze_choose_path(query, hints, options);

	rv = makeRangeVarFromNameList(stringToQualifiedNameList_compat(target));
	relid = RangeVarGetRelidExtended(rv, ExclusiveLock, RVR_MISSING_OK,
									 check_owner_before_lock, NULL);
	target_nsp = OidIsValid(relid) ? get_rel_namespace(relid) : RangeVarGetCreationNamespace(rv);
	target_check_schema(target_nsp);
	foreach(lc, plan->sources)
	{
		if (((DeltaSource *) lfirst(lc))->relid == relid)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_OBJECT_DEFINITION),
					 errmsg("table %s cannot be both the target and a source of a view",
							dj_message_name(ops_relation_name(relid))),
					 errhint("Name a new table as the target.")));
	}
	if (OidIsValid(relid))
	{
		if (catalog_find_view(relid, &existing))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table %s is already the target of a delta view",
							dj_message_name(target)),
					 errhint("Drop that view first with delta_join.drop_view, or name another target.")));
		target_validate(relid, plan, false);
		target_check_key_index(relid, plan);
		target_warn_not_null(relid, plan);
		if (!replace && !ops_relation_is_empty(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("target %s is not empty", dj_message_name(ops_relation_name(relid))),
					 errhint("The target is filled from the query; empty it with TRUNCATE first.")));
	}
	else
	{
		target_check_branch_types(plan);
		relid = target_create(rv, plan);
		created = true;
	}

	if (settings == NULL)
		settings = runas_capture_settings();
	check_owner_access(relid, plan, settings);
	if (!concurrently)
	{
		analyze_check_lock_rights(plan);
		target_lock_sources(plan);
	}
	query_view = query_bind(query, relid);

	/*
	 * A target is filled before it gets its key and indexes: sorted index
	 * builds instead of an insert into each index per row.  A concurrent
	 * create makes them after its fill too, in the fill's transaction
	 * (concurrent.c); until then the DDL guard does not ask for them, and
	 * a refresh() makes them if the fill never ended (ops_refresh_view).
	 */
	if (!concurrently)
		(void) target_fill(relid, query_view, settings, replace);
	if (!(concurrently && created))
		target_make_indexes(relid, plan);
	target_guard(relid);
	view_id = catalog_insert_view(relid, query_view, plan->kind, plan->path, &plan->options,
								  view_plan_source_records(plan), settings,
								  GetXLogInsertRecPtr(), managed_by);
	reserve_progress(view_id);
	if (concurrently)
	{
		catalog_set_backfilling(view_id);
		progress_backfill_begin(view_id, BACKFILL_CREATE);
		*view_id_out = view_id;
		*created_out = created;
	}
	launcher_notify();
	return relid;
}

Oid
ops_create_view(const char *target, Query *query, List *hints,
					 DeltaOptions *options, Jsonb *settings, bool replace,
					 const char *managed_by)
{
	return create_view(target, query, hints, options, settings, replace, managed_by,
					   false, NULL, NULL);
}

/*
 * Step 1 of a concurrent create (concurrent.c): the view of an analyzed
 * query into target, registered in state 'backfilling' with its target
 * made (*created: without its key and indexes, made after the fill) or
 * checked (given the indexes apply finds rows by), but not filled.
 * No lock on the sources beyond what the analysis takes (ACCESS SHARE), so
 * the creator needs no right to lock them.  settings and managed_by as for
 * ops_create_view.  Returns the target; *view_id is the view's.
 */
Oid
ops_register_view(const char *target, Query *query, List *hints,
				  DeltaOptions *options, Jsonb *settings, const char *managed_by,
				  int *view_id, bool *created)
{
	return create_view(target, query, hints, options, settings, false, managed_by,
					   true, view_id, created);
}

/*
 * Unregister a view (its catalog rows and query view) and drop its target,
 * or keep the target as an ordinary table.
 */
void
ops_drop_view(ViewRecord *view, bool drop_table)
{
	catalog_delete_view(view->view_id);
	query_drop(view->query_view);
	if (drop_table)
	{
		ObjectAddress object;

		object.classId = RelationRelationId;
		object.objectId = view->target;
		object.objectSubId = 0;
		performDeletion(&object, DROP_RESTRICT, 0);
	}
	else
		target_unguard(view->target);
	launcher_notify();
}

/*
 * Rebuild a view's target from its query over the current sources, after
 * the checks the apply worker makes: residual rows disappear, and a view in
 * error becomes active again -- or the refresh fails, saying why the view
 * cannot be made correct.  Returns the rows written.  Also what the DDL
 * guard runs when a partition of a source was attached or detached: then
 * the refresh is delta_join's doing, not the caller's, who need not have
 * the right to lock the sources.
 */
uint64
ops_refresh_view(ViewRecord *view, bool by_caller)
{
	DeltaPlan  *plan;
	bool		rekey;
	uint64		rows;

	plan = view_plan_load_to_rebuild(view, &rekey);
	if (by_caller)
		analyze_check_lock_rights(plan);
	target_guard(view->target);
	target_validate(view->target, plan, true);
	check_owner_access(view->target, plan, view->settings);
	target_lock_sources(plan);

	/*
	 * Then the key and indexes the target lacks: a concurrent create whose
	 * fill never ended left them unmade, and the DDL guard does not ask for
	 * them while a view is backfilling or in error.
	 */
	rows = target_fill(view->target, view->query_view, view->settings, true);
	target_make_indexes(view->target, plan);
	query_depend_on_extension(view->query_view);

	/*
	 * Its sources' changes are captured by other columns from now on: under
	 * a new view_id, so that no key of the old columns (changes the fill
	 * covers, which the locks made commit before it) reaches the new plan.
	 */
	if (rekey)
		view->view_id = catalog_renumber_view(view->view_id);
	catalog_rewrite_sources(view->view_id, view_plan_source_records(plan));
	catalog_reset_view(view->view_id, GetXLogInsertRecPtr());
	launcher_notify();
	return rows;
}

/*
 * create_view of a query over this node's tables: the slot first, so that
 * decoding starts before the view commits (and no change is missed), and
 * before the analysis locks the sources, since creating it waits for the
 * transactions in progress, which may want those tables; then the view
 * lock, the query parsed as the caller, and the view.
 */
Oid
ops_create_view_text(const char *target, const char *text, DeltaOptions *options)
{
	Query	   *query;
	List	   *hints;

	launcher_ensure_slot();
	ops_lock_views();
	query = query_parse(text, &hints);
	return ops_create_view(target, query, hints, options, NULL, false, NULL);
}

/*
 * drop_view of a view of this node: not one of a distributed view's shard
 * groups, which the coordinator manages, nor a Citus shard's table.
 */
void
ops_drop_view_named(const char *target, bool drop_table)
{
	ViewRecord	view;
	Oid			relid;
	char	   *managed_by;

	ops_lock_views();
	relid = ops_lookup_view(target, &view, AccessExclusiveLock);
	if ((managed_by = catalog_managed_by(relid)) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("view %s is a shard group of distributed view %s",
						dj_message_name(target), dj_message_name(managed_by)),
				 errdetail("The coordinator manages the views of a distributed view's shard groups."),
				 errhint("Drop the distributed view on the coordinator: SELECT delta_join.drop_view(%s);",
						 quote_literal_cstr(managed_by))));
	if (drop_table && OidIsValid(citus_shard_of(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("target %s is a shard of Citus table \"%s\"",
						dj_message_name(target), get_rel_name(citus_shard_of(relid))),
				 errdetail("Dropping it would break its distributed table."),
				 errhint("Keep the table: SELECT delta_join.drop_view(%s, false);",
						 quote_literal_cstr(target))));
	ops_drop_view(&view, drop_table);
	CommandCounterIncrement();
	launcher_drop_slot_if_unused();
}

/*
 * refresh of a view of this node.  As in create_view: the slot must exist
 * (or be recreated) before the refresh writes anything, and the fill must
 * see every change committed before its locks.
 */
uint64
ops_refresh_view_named(const char *target)
{
	ViewRecord	view;

	launcher_ensure_slot();
	ops_lock_views();
	(void) ops_lookup_view(target, &view, AccessShareLock);

	/*
	 * A concurrent create or refresh owns the view until it ends: a refresh
	 * waiting for its fill's locks would rebuild it behind its back, and
	 * the create would fail although the view was made.
	 */
	if (view.backfilling)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta view %s is being backfilled", dj_message_name(target)),
				 errhint("Wait for the concurrent create or refresh that runs (delta_join.progress) to end.")));
	return ops_refresh_view(&view, true);
}
