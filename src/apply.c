/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Applying one view's batch: find the view's delta plan, then hand the
 *	  dirty keys to the join or aggregate applier, which write through a
 *	  TargetWriter.
 *
 * The worker calls apply_view_batch() inside the batch's transaction, as the
 * target's owner with the view's pinned settings (runas.c).
 *
 * The delta plan cache: a view's plan is built once -- its query loaded
 * from its query view and analyzed, its target checked -- and kept across
 * batches, in memory of its own, until an invalidation says something it
 * was built from may have changed: a relcache invalidation of one of its
 * sources, its target or its query view (DDL, an index created or dropped,
 * privileges), a change of any function (CREATE OR REPLACE), or a change of
 * the view's catalog row (apply_forget_views, called by the worker when a
 * view was created, dropped or refreshed).  The resets of the system caches
 * around decoding do not count (apply_reset_system_caches).  A plan is always built as the
 * target's owner, since building it may evaluate immutable functions.
 *
 * Result rows reach the target through the executor's replication helpers
 * (execReplication.c), the way logical replication's apply does: the
 * existing row is found through the target's unique key index
 * (find_target_row), then updated (unless nothing changed), inserted or
 * deleted with ExecSimpleRelation*, keeping indexes, constraints and row
 * triggers right.  Statement triggers do not fire (the target's guard is
 * one).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/regproc.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "apply.h"
#include "catalog.h"
#include "target.h"

/* ----------------------------------------------------------------
 *		The delta plan cache
 * ----------------------------------------------------------------
 */

typedef struct CachedView
{
	int			view_id;		/* hash key */
	bool		valid;
	MemoryContext cxt;			/* holds the plan */
	DeltaPlan  *plan;
	int			nrelids;
	Oid		   *relids;			/* relations whose invalidation drops it */
} CachedView;

static HTAB *view_cache = NULL;
static uint64 invalidations = 0;	/* callbacks run so far */
static bool own_reset = false;	/* in apply_reset_system_caches */

static void
invalidate_all(void)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	invalidations++;
	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->valid = false;
}

static void
cache_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	if (own_reset)
		return;
	invalidations++;
	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		for (int i = 0; i < entry->nrelids && entry->valid; i++)
			if (!OidIsValid(relid) || entry->relids[i] == relid)
				entry->valid = false;
	}
}

static void
cache_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (!own_reset)
		invalidate_all();
}

/*
 * Reset the system caches around decoding, as logicalfuncs.c does (entries
 * built with the historic snapshots of decoding must not outlive it, nor
 * entries built before it serve it), keeping the plans: a reset says
 * nothing about what changed.  What DDL changed reaches the plan cache as
 * its own invalidation messages, at the start of a transaction or of a
 * lock; a reset that comes from an overflowed invalidation queue (changes
 * missed) still drops every plan.
 */
void
apply_reset_system_caches(void)
{
	own_reset = true;
	PG_TRY();
	{
		InvalidateSystemCaches();
	}
	PG_FINALLY();
	{
		own_reset = false;
	}
	PG_END_TRY();
}

/* Drop every cached plan: the views' catalog rows may have changed. */
void
apply_forget_views(void)
{
	invalidate_all();
}

/*
 * Free the plans of the views that views (the catalog's, ViewRecord *) no
 * longer lists.  A dropped view's plan is never built again, so nothing
 * else frees it, nor the rows its lookup caches hold: a node of
 * distributed views makes and drops a view with every shard group that
 * moves in or out.
 */
void
apply_forget_dropped(List *views)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		bool		listed = false;
		ListCell   *lc;

		foreach(lc, views)
			listed |= (((ViewRecord *) lfirst(lc))->view_id == entry->view_id);
		if (listed)
			continue;
		MemoryContextDelete(entry->cxt);
		(void) hash_search(view_cache, &entry->view_id, HASH_REMOVE, NULL);
	}
}

/*
 * The view's cache entry, its delta plan from the cache or built now (as
 * the current user, who must be the target's owner).
 */
static CachedView *
view_entry(ViewRecord *view)
{
	CachedView *entry;
	bool		found;
	MemoryContext oldcxt;
	uint64		seen = invalidations;
	ListCell   *lc;
	int			n = 0;

	if (view_cache == NULL)
	{
		HASHCTL		hctl;

		hctl.keysize = sizeof(int);
		hctl.entrysize = sizeof(CachedView);
		view_cache = hash_create("delta_join plans", 64, &hctl, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(cache_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, cache_syscache_callback, (Datum) 0);
	}

	entry = hash_search(view_cache, &view->view_id, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;
	if (found)
		MemoryContextDelete(entry->cxt);
	entry->valid = false;
	entry->cxt = AllocSetContextCreate(TopMemoryContext, "delta_join plan",
									   ALLOCSET_DEFAULT_SIZES);

	oldcxt = MemoryContextSwitchTo(entry->cxt);
	entry->plan = catalog_view_plan(view);
	target_validate(view->target, entry->plan, true);
	/*
	 * The sources, and the views the query reads (their placeholders); a
	 * full recompute's sources are also the tables under those views and
	 * the inheritance children of the tables it reads.
	 */
	entry->relids = palloc(sizeof(Oid) * (list_length(entry->plan->query->rtable) +
										  list_length(entry->plan->sources) + 2));
	foreach(lc, entry->plan->query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION)
			entry->relids[n++] = rte->relid;
	}
	foreach(lc, entry->plan->sources)
		entry->relids[n++] = ((DeltaSource *) lfirst(lc))->relid;
	entry->relids[n++] = view->target;
	entry->relids[n++] = view->query_view;
	entry->nrelids = n;
	MemoryContextSwitchTo(oldcxt);

	/* an invalidation that arrived while it was built leaves it invalid */
	entry->valid = (invalidations == seen);
	elog(DEBUG1, "delta_join: built the plan of view %d (target \"%s\")",
		 view->view_id, get_rel_name(view->target));
	return entry;
}

/* The view's delta plan (view_entry) */
static DeltaPlan *
view_plan(ViewRecord *view)
{
	return view_entry(view)->plan;
}

/*
 * Lookups read the sources directly: check, as the current user, the
 * rights the query needs, and that no row security applies to a source (a
 * revoked privilege, or a policy enabled later, puts the view in error).
 */
/* check_functions_in_node callback: a user-defined function the role does not act for */
static bool
foreign_function(Oid funcid, void *context)
{
	HeapTuple	tuple;
	Oid			owner;

	if (funcid < FirstNormalObjectId)
		return false;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tuple))
		return false;
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);
	if (has_privs_of_role(GetUserId(), owner) || superuser_arg(owner))
		return false;
	*(Oid *) context = funcid;
	return true;
}

static bool
foreign_function_walker(Node *node, Oid *funcid)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, foreign_function_walker, funcid, 0);
	if (IsA(node, Aggref))
	{
		HeapTuple	tuple = SearchSysCache1(AGGFNOID,
											ObjectIdGetDatum(((Aggref *) node)->aggfnoid));

		if (HeapTupleIsValid(tuple))
		{
			Form_pg_aggregate agg = (Form_pg_aggregate) GETSTRUCT(tuple);
			Oid			support[] = {agg->aggtransfn, agg->aggfinalfn, agg->aggcombinefn};
			bool		found = false;

			for (int i = 0; i < (int) lengthof(support) && !found; i++)
				found = OidIsValid(support[i]) && foreign_function(support[i], funcid);
			ReleaseSysCache(tuple);
			if (found)
				return true;
		}
	}
	if (check_functions_in_node(node, foreign_function, funcid))
		return true;
	return expression_tree_walker(node, foreign_function_walker, funcid);
}

/*
 * The code a view runs must be its owner's, or trusted: a user-defined
 * function (an operator's, an aggregate's, a cast's) of another role would
 * run with the target owner's rights at every apply, whatever its owner
 * made of it since (CREATE OR REPLACE FUNCTION).  Functions of roles the
 * owner acts for, and of superusers (extensions), are fine.
 */
static void
check_function_owners(DeltaPlan *plan)
{
	Oid			funcid = InvalidOid;
	HeapTuple	tuple;
	Oid			owner;

	if (!foreign_function_walker((Node *) plan->query, &funcid))
		return;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", funcid);
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("function %s of the view's query belongs to role \"%s\", which role \"%s\" does not act for",
					format_procedure(funcid),
					GetUserNameFromId(owner, false),
					GetUserNameFromId(GetUserId(), false)),
			 errdetail("The view's query runs as the owner of its target, at every change: another role's function would run with those rights, and may be replaced at any time."),
			 errhint("Use functions owned by the target's owner (ALTER FUNCTION ... OWNER TO), or by a role it is a member of.")));
}

void
apply_check_access(DeltaPlan *plan)
{
	ListCell   *lc;

	check_function_owners(plan);

#if PG_VERSION_NUM >= 160000
	(void) ExecCheckPermissions(plan->query->rtable, plan->query->rteperminfos, true);
#else
	(void) ExecCheckRTPerms(plan->query->rtable, true);
#endif
	foreach(lc, plan->branches)
		apply_check_access(lfirst(lc));
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (check_enable_rls(src->relid, InvalidOid, true) == RLS_ENABLED)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("row-level security applies to source \"%s\" for role \"%s\"",
							src->relname, GetUserNameFromId(GetUserId(), false)),
					 errdetail("Lookups read the sources directly, so row security policies could not be applied to them."),
					 errhint("Let the target's owner bypass row-level security on the table (own it, or have BYPASSRLS).")));
	}
}

/* ----------------------------------------------------------------
 *		TargetWriter
 * ----------------------------------------------------------------
 */

TargetWriter *
target_writer_begin(Oid target, DeltaPlan *plan, ApplyCounts *counts)
{
	TargetWriter *writer = palloc0(sizeof(TargetWriter));
	TupleDesc	desc;
	RangeTblEntry *rte;
	int			col = 0;

	writer->rel = table_open(target, RowExclusiveLock);
	writer->counts = counts;

	/* (a full recompute writes rows whole, found by their place) */
	writer->key_index = (plan->key_ncolumns > 0) ? target_key_index(writer->rel, plan) : InvalidOid;
	if (!OidIsValid(writer->key_index) && plan->path != DJ_PATH_FULL && !plan->whole)
		elog(ERROR, "target \"%s\" has no key index", RelationGetRelationName(writer->rel));

	writer->key_rel = OidIsValid(writer->key_index) ?
		index_open(writer->key_index, RowExclusiveLock) : NULL;
	for (int i = 0; writer->key_rel && i < writer->key_rel->rd_index->indnkeyatts; i++)
	{
		Relation	idx = writer->key_rel;
		Oid			op = get_opfamily_member(idx->rd_opfamily[i], idx->rd_opcintype[i],
											 idx->rd_opcintype[i], BTEqualStrategyNumber);

		if (!OidIsValid(op))
			elog(ERROR, "missing equality operator for column %d of index \"%s\"",
				 i + 1, RelationGetRelationName(idx));
		ScanKeyInit(&writer->keys[i], i + 1, BTEqualStrategyNumber, get_opcode(op), (Datum) 0);
		writer->keys[i].sk_collation = idx->rd_indcollation[i];
	}

	/* output column i -> target column (checked by target_validate) */
	desc = RelationGetDescr(writer->rel);
	writer->ncolumns = plan->ncolumns;
	writer->attnums = palloc(sizeof(int) * plan->ncolumns);
	for (int i = 0; i < desc->natts && col < plan->ncolumns; i++)
	{
		if (!TupleDescAttr(desc, i)->attisdropped)
			writer->attnums[col++] = i + 1;
	}
	if (col != plan->ncolumns)
		elog(ERROR, "target \"%s\" has fewer columns than the view outputs",
			 RelationGetRelationName(writer->rel));

	writer->estate = CreateExecutorState();
	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = target;
	rte->relkind = writer->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
#if PG_VERSION_NUM >= 160000
	ExecInitRangeTable(writer->estate, list_make1(rte), NIL);
#else
	ExecInitRangeTable(writer->estate, list_make1(rte));
#endif
	writer->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(writer->rri, writer->rel, 1, NULL, 0);
	/* as logical replication's apply: after-row triggers find it there */
	writer->estate->es_opened_result_relations =
		lappend(writer->estate->es_opened_result_relations, writer->rri);
	ExecOpenIndices(writer->rri, false);
	EvalPlanQualInit(&writer->epqstate, writer->estate, NULL, NIL, -1);
	writer->newslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
	writer->oldslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
	AfterTriggerBeginQuery();
	return writer;
}

/*
 * The output columns of a view in the target's column types: each
 * expression coerced by assignment, as INSERT ... SELECT would store it
 * (a numeric sum into a DECIMAL(38,2) column is rounded to 2 places).
 * Key columns have the query's types already (target_validate).
 */
/* A query's select list (its non-junk entries) in the target's column types */
void
apply_coerce_query_output(Query *query, DeltaPlan *plan, Oid target)
{
	List	   *outputs = NIL;
	int			col = 0;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			outputs = lappend(outputs, tle->expr);
	}
	outputs = apply_coerce_to_target(target, plan, outputs);
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			tle->expr = list_nth(outputs, col++);
	}
}

List *
apply_coerce_to_target(Oid target, DeltaPlan *plan, List *exprs)
{
	Relation	rel = table_open(target, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *result = NIL;
	ListCell   *lc = list_head(exprs);

	for (int i = 0; i < desc->natts && lc != NULL; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Node	   *expr;
		Node	   *coerced;

		if (att->attisdropped)
			continue;
		expr = lfirst(lc);
		coerced = coerce_to_target_type(NULL, expr, exprType(expr),
										att->atttypid, att->atttypmod,
										COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
		if (coerced == NULL)
			elog(ERROR, "column \"%s\" of target \"%s\" cannot take the view's output",
				 NameStr(att->attname), RelationGetRelationName(rel));
		result = lappend(result, coerced);
		lc = lnext(exprs, lc);
	}
	table_close(rel, AccessShareLock);
	return result;
}

static void
receiver_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
receiver_shutdown(DestReceiver *self)
{
}

/*
 * A DestReceiver of the apply's own, whose rows go to receive; it lives on
 * the caller's stack, so there is nothing to destroy.
 */
void
apply_receiver_init(DestReceiver *dest, bool (*receive) (TupleTableSlot *slot, DestReceiver *self))
{
	dest->receiveSlot = receive;
	dest->rStartup = receiver_startup;
	dest->rShutdown = receiver_shutdown;
	dest->rDestroy = receiver_shutdown;
	dest->mydest = DestNone;
}

/* Put an output row into newslot, in the target's row type. */
static void
fill_new_slot(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	TupleTableSlot *slot = writer->newslot;

	ExecClearTuple(slot);
	for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++)
	{
		slot->tts_values[i] = (Datum) 0;
		slot->tts_isnull[i] = true;
	}
	for (int i = 0; i < writer->ncolumns; i++)
	{
		slot->tts_values[writer->attnums[i] - 1] = values[i];
		slot->tts_isnull[writer->attnums[i] - 1] = isnull[i];
	}
	ExecStoreVirtualTuple(slot);
}

/* Does the stored row equal the new one, column by column? */
static bool
rows_equal(TupleTableSlot *oldslot, TupleTableSlot *newslot)
{
	TupleDesc	desc = newslot->tts_tupleDescriptor;

	slot_getallattrs(oldslot);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (oldslot->tts_isnull[i] != newslot->tts_isnull[i])
			return false;
		if (!oldslot->tts_isnull[i] &&
			!datum_image_eq(oldslot->tts_values[i], newslot->tts_values[i],
							att->attbyval, att->attlen))
			return false;
	}
	return true;
}

/*
 * Find the target row whose key equals newslot's, into oldslot.
 *
 * Like RelationFindReplTupleByIndex() in execReplication.c, but a NULL key
 * column matches NULL (the key of a group whose key is NULL is a unique
 * constraint with NULLS NOT DISTINCT), which PostgreSQL 15's version does
 * not do; and the row is not locked: the worker is the only writer of a
 * target (the guard trigger refuses others; refresh() takes a lock that
 * excludes the worker), so locking would only cost a WAL record per row.
 * A row a concurrent transaction is writing is waited for all the same.
 */
static bool
find_target_row(TargetWriter *writer)
{
	Relation	idx = writer->key_rel;
	int			nkeys = idx->rd_index->indnkeyatts;

	for (int i = 0; i < nkeys; i++)
	{
		AttrNumber	attno = idx->rd_index->indkey.values[i];

		writer->keys[i].sk_argument = writer->newslot->tts_values[attno - 1];
		if (writer->newslot->tts_isnull[attno - 1])
			writer->keys[i].sk_flags |= (SK_ISNULL | SK_SEARCHNULL);
		else
			writer->keys[i].sk_flags &= ~(SK_ISNULL | SK_SEARCHNULL);
	}

	/*
	 * A scan per lookup: the writes between two lookups change the index
	 * under a scan that would be kept open (its pinned page, its killed
	 * items).
	 */
	for (;;)
	{
		SnapshotData dirty;
		IndexScanDesc scan;
		TransactionId xwait = InvalidTransactionId;
		bool		found;

		InitDirtySnapshot(dirty);
		scan = index_beginscan(writer->rel, idx, &dirty, nkeys, 0);
		index_rescan(scan, writer->keys, nkeys, NULL, 0);
		found = index_getnext_slot(scan, ForwardScanDirection, writer->oldslot);
		if (found)
			xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		index_endscan(scan);
		if (!TransactionIdIsValid(xwait))
			return found;
		XactLockTableWait(xwait, NULL, NULL, XLTW_None);
	}
}

/*
 * Make our own writes visible to the next lookup of the same key, and let
 * the next write run under a new command id.
 */
static void
next_command(TargetWriter *writer)
{
	CommandCounterIncrement();
	writer->estate->es_output_cid = GetCurrentCommandId(true);
}

/* Insert or update the result row whose output values are given. */
void
target_upsert(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	fill_new_slot(writer, values, isnull);
	if (find_target_row(writer))
	{
		if (writer->in_region)
			(void) hash_search(writer->region_kept, &writer->oldslot->tts_tid, HASH_ENTER, NULL);
		if (rows_equal(writer->oldslot, writer->newslot))
		{
			writer->counts->rows_unchanged++;
			return;
		}
		EvalPlanQualSetSlot(&writer->epqstate, writer->oldslot);
		ExecSimpleRelationUpdate(writer->rri, writer->estate, &writer->epqstate,
								 writer->oldslot, writer->newslot);
	}
	else
		ExecSimpleRelationInsert(writer->rri, writer->estate, writer->newslot);
	writer->counts->rows_upserted++;
	next_command(writer);
}

/* Delete the target row in writer->oldslot. */
static void
delete_old_row(TargetWriter *writer)
{
	EvalPlanQualSetSlot(&writer->epqstate, writer->oldslot);
	ExecSimpleRelationDelete(writer->rri, writer->estate, &writer->epqstate,
							 writer->oldslot);
	writer->counts->rows_deleted++;
	next_command(writer);
}

/* Delete the result row whose key columns are given (others are ignored). */
void
target_delete(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	fill_new_slot(writer, values, isnull);
	if (find_target_row(writer))
		delete_old_row(writer);
}

/* ----------------------------------------------------------------
 *		Finding target rows by other columns than the key
 * ----------------------------------------------------------------
 */

/*
 * Prepare to find target rows by the output columns cols (ncols of them):
 * through the smallest valid btree index of the target whose leading
 * columns are those, in any order.  Without one: NULL if missing_ok, else
 * an error.
 */
TargetLookup *
target_lookup_begin(TargetWriter *writer, int ncols, const int *cols, bool missing_ok)
{
	TargetLookup *tl = NULL;
	Oid			best = InvalidOid;
	int			best_natts = INT_MAX;
	ListCell   *lc;

	foreach(lc, RelationGetIndexList(writer->rel))
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;
		bool		match = idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid &&
			form->indnkeyatts >= ncols &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL);

		for (int i = 0; match && i < ncols; i++)
		{
			bool		found = false;

			for (int c = 0; c < ncols; c++)
				found |= (form->indkey.values[i] == writer->attnums[cols[c]]);
			match = found;
		}
		if (match && form->indnatts < best_natts)
		{
			best = RelationGetRelid(idx);
			best_natts = form->indnatts;
		}
		index_close(idx, AccessShareLock);
	}
	if (!OidIsValid(best))
	{
		if (missing_ok)
			return NULL;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("target \"%s\" has no index to find the rows of a source by its key",
						RelationGetRelationName(writer->rel)),
				 errhint("Recreate the view with delta_join.drop_view() and create_view(), which creates it.")));
	}

	tl = palloc0(sizeof(TargetLookup));
	tl->idx = index_open(best, RowExclusiveLock);
	tl->ncols = ncols;
	tl->cols = palloc(sizeof(int) * ncols);
	tl->keys = palloc(sizeof(ScanKeyData) * ncols);
	for (int i = 0; i < ncols; i++)
	{
		Relation	idx = tl->idx;
		Oid			op = get_opfamily_member(idx->rd_opfamily[i], idx->rd_opcintype[i],
											 idx->rd_opcintype[i], BTEqualStrategyNumber);

		for (int c = 0; c < ncols; c++)
			if (idx->rd_index->indkey.values[i] == writer->attnums[cols[c]])
				tl->cols[i] = cols[c];
		if (!OidIsValid(op))
			elog(ERROR, "missing equality operator for column %d of index \"%s\"",
				 i + 1, RelationGetRelationName(idx));
		ScanKeyInit(&tl->keys[i], i + 1, BTEqualStrategyNumber, get_opcode(op), (Datum) 0);
		tl->keys[i].sk_collation = idx->rd_indcollation[i];
	}
	tl->equal_keys = palloc(sizeof(ScanKeyData) * ncols);
	memcpy(tl->equal_keys, tl->keys, sizeof(ScanKeyData) * ncols);
	return tl;
}

/*
 * Call fn for each target row whose lookup columns have the values given
 * (values and isnull are indexed by output column; a NULL finds NULLs, as
 * in a key whose NULLs are not distinct), as our own writes so far left
 * the target.  The scan ends before fn may write.
 */
void
target_lookup_rows(TargetWriter *writer, TargetLookup *tl, const Datum *values,
				   const bool *isnull, TargetRowFn fn, void *arg)
{
	SnapshotData dirty;
	IndexScanDesc scan;
	List	   *tids = NIL;
	ListCell   *lc;

	for (int i = 0; i < tl->ncols; i++)
	{
		if (isnull[tl->cols[i]])
			ScanKeyEntryInitialize(&tl->keys[i], SK_ISNULL | SK_SEARCHNULL, i + 1,
								   InvalidStrategy, InvalidOid, InvalidOid, InvalidOid,
								   (Datum) 0);
		else
		{
			tl->keys[i] = tl->equal_keys[i];
			tl->keys[i].sk_argument = values[tl->cols[i]];
		}
	}

	InitDirtySnapshot(dirty);
	scan = index_beginscan(writer->rel, tl->idx, &dirty, tl->ncols, 0);
	index_rescan(scan, tl->keys, tl->ncols, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, writer->oldslot))
	{
		ItemPointer tid = palloc(sizeof(ItemPointerData));

		*tid = writer->oldslot->tts_tid;
		tids = lappend(tids, tid);
	}
	index_endscan(scan);

	foreach(lc, tids)
	{
		if (!table_tuple_fetch_row_version(writer->rel, lfirst(lc), SnapshotAny,
										   writer->oldslot))
			continue;
		fn(writer, writer->oldslot, arg);
	}
}

void
target_lookup_end(TargetLookup *tl)
{
	index_close(tl->idx, NoLock);
}

/*
 * Call fn for each row of the target, as the active snapshot sees it; fn
 * may not write the target.
 */
void
target_scan_rows(TargetWriter *writer, TargetRowFn fn, void *arg)
{
	TupleTableSlot *slot = table_slot_create(writer->rel, NULL);
	TableScanDesc scan = table_beginscan(writer->rel, GetActiveSnapshot(), 0, NULL);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		CHECK_FOR_INTERRUPTS();
		fn(writer, slot, arg);
	}
	table_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
}

/* A target row's values, as output columns */
void
target_output_values(TargetWriter *writer, TupleTableSlot *row, Datum *values, bool *isnull)
{
	slot_getallattrs(row);
	for (int i = 0; i < writer->ncolumns; i++)
	{
		values[i] = row->tts_values[writer->attnums[i] - 1];
		isnull[i] = row->tts_isnull[writer->attnums[i] - 1];
	}
}

/* Insert a row given in the target's row type (a full recompute's). */
void
target_insert_slot(TargetWriter *writer, TupleTableSlot *slot)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	ExecSimpleRelationInsert(writer->rri, writer->estate, slot);
	writer->counts->rows_upserted++;
	next_command(writer);
}

/* Delete the target row at tid. */
void
target_delete_row(TargetWriter *writer, ItemPointer tid)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	if (table_tuple_fetch_row_version(writer->rel, tid, SnapshotAny, writer->oldslot))
		delete_old_row(writer);
}

/* ----------------------------------------------------------------
 *		Regions
 *
 * Replacing a region of the target -- the rows some source key names --
 * by what the query now gives for it: target_region_begin, then
 * target_region_add for each row the region has now, then the upserts of
 * the new rows, then target_region_end deletes the rows of the region that
 * no upsert found.  Rows are told apart by where they are (their TID), so
 * that the key's own equality decides what an upsert found.
 * ----------------------------------------------------------------
 */

void
target_region_begin(TargetWriter *writer)
{
	HASHCTL		hctl;

	hctl.keysize = sizeof(ItemPointerData);
	hctl.entrysize = sizeof(ItemPointerData);
	hctl.hcxt = CurrentMemoryContext;
	writer->region_kept = hash_create("delta_join region kept", 256, &hctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	writer->region_olds = hash_create("delta_join region rows", 256, &hctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	writer->region_old = NIL;
	writer->in_region = true;
}

/* A row the region has now (once, however often it is added) */
void
target_region_add(TargetWriter *writer, ItemPointer tid)
{
	bool		found;
	ItemPointer entry = hash_search(writer->region_olds, tid, HASH_ENTER, &found);

	if (!found)
		writer->region_old = lappend(writer->region_old, entry);
}

void
target_region_end(TargetWriter *writer)
{
	ListCell   *lc;

	writer->in_region = false;
	foreach(lc, writer->region_old)
	{
		if (!hash_search(writer->region_kept, lfirst(lc), HASH_FIND, NULL))
			target_delete_row(writer, lfirst(lc));
	}
	hash_destroy(writer->region_kept);
	hash_destroy(writer->region_olds);
	list_free(writer->region_old);
	writer->region_kept = NULL;
	writer->region_olds = NULL;
	writer->region_old = NIL;
}

void
target_writer_end(TargetWriter *writer)
{
	AfterTriggerEndQuery(writer->estate);
	/* the target's indexes, and the relations the triggers opened */
	ExecCloseResultRelations(writer->estate);
	EvalPlanQualEnd(&writer->epqstate);
	ExecResetTupleTable(writer->estate->es_tupleTable, false);
	FreeExecutorState(writer->estate);
	if (writer->key_rel)
		index_close(writer->key_rel, NoLock);
	table_close(writer->rel, NoLock);
}

/* ----------------------------------------------------------------
 *		Entry point
 * ----------------------------------------------------------------
 */

/* Apply a batch by the way the plan says */
static void
apply_plan(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer, ApplyCounts *counts)
{
	bool		truncated = false;
	ListCell   *lc;

	foreach(lc, batch->sources)
		truncated |= ((SourceBatch *) lfirst(lc))->truncated;

	/*
	 * Inner joins walk the join graph, in retract mode too (replacing the
	 * slices of the keys they walk from); outer joins, keyed recompute, the
	 * branches of a UNION ALL in retract mode and a TRUNCATE in retract mode
	 * recompute with region queries.
	 */
	if (plan->kind == DJ_KIND_AGGREGATE)
		apply_aggregate(plan, batch, writer, counts);
	else if (plan->has_outer || plan->path == DJ_PATH_KEYED ||
			 (plan->options.retract && (truncated || plan->tag_column >= 0)))
		apply_outer(plan, batch, writer, counts);
	else
		apply_join(plan, batch, writer, counts);
}

/*
 * Build the view's delta plan into the cache unless it is there, as the
 * current user (the target's owner), so that apply_view_shareable can judge
 * the view before its first apply.  Errors are the caller's.
 */
void
apply_prepare_view(ViewRecord *view)
{
	(void) view_plan(view);
}

/*
 * Was the relation created or its storage replaced (a rewrite, a TRUNCATE)
 * -- its pg_class row written -- by a transaction that snapshot does not
 * see?  Through the syscache, whose tuples tell a frozen xmin.
 */
static bool
relation_written_after(Oid relid, Snapshot snapshot)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		after = false;

	if (HeapTupleIsValid(tuple))
	{
		TransactionId xmin = HeapTupleHeaderGetXmin(tuple->t_data);

		after = TransactionIdIsNormal(xmin) && XidInMVCCSnapshot(xmin, snapshot);
		ReleaseSysCache(tuple);
	}
	return after;
}

/*
 * Lock what the view's apply reads and writes -- its sources (and their
 * partitions), the views its query reads, its target -- as the apply will,
 * before the apply reads under its snapshot.  A table rewrite (ALTER TABLE
 * ... TYPE) writes every row anew in its own transaction, and a TRUNCATE
 * gives the table new, empty storage: to a snapshot that does not see
 * them, the table would look empty.  When the snapshot was taken before
 * the locks (snapshot, the batch's), returns false if such a change of one
 * of the relations committed after it; the view must then be applied
 * under a later snapshot.  Without one, the caller takes its snapshot
 * once the locks are held, and always gets true.
 */
bool
apply_lock_view(ViewRecord *view, Snapshot snapshot)
{
	CachedView *entry = view_entry(view);
	bool		seen = true;

	for (int i = 0; i < entry->nrelids; i++)
	{
		Oid			relid = entry->relids[i];
		LOCKMODE	mode = (relid == view->target) ? RowExclusiveLock : AccessShareLock;

		LockRelationOid(relid, mode);
		if (snapshot != NULL && relation_written_after(relid, snapshot))
			seen = false;
		if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		{
			List	   *parts = find_all_inheritors(relid, mode, NULL);
			ListCell   *lc;

			foreach(lc, parts)
			{
				if (snapshot != NULL && relation_written_after(lfirst_oid(lc), snapshot))
					seen = false;
			}
		}
	}
	return seen;
}

/*
 * Is the view's apply one recompute of the whole (a full recompute, an
 * aggregate without GROUP BY), whatever its keys?
 */
bool
apply_view_whole(ViewRecord *view)
{
	DeltaPlan  *plan = view_plan(view);

	return plan->path == DJ_PATH_FULL || plan->whole;
}

/* The plan's source of that ordinal, or NULL */
static DeltaSource *
plan_source(DeltaPlan *plan, int ordinal)
{
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		if (((DeltaSource *) lfirst(lc))->ordinal == ordinal)
			return lfirst(lc);
	}
	return NULL;
}

/*
 * May the view's batch be split into shares applied at once by several
 * transactions (parallel apply, parallel.h)?  Only when no key's apply
 * decides from target rows another share writes: the inner join's walk in
 * upsert mode, and the aggregate's groups (a group is a key).  Outer joins,
 * keyed recompute, UNION ALL, retract slices, truncations and recomputes of
 * the whole are applied by one transaction.  The plan must be in the cache
 * already: a plan is built as the target's owner, by an apply.
 *
 * share_by (one per source of the batch, in its order) is set to the key
 * column whose value picks a key's share, or -1 for the whole key.  When
 * the keys of several sources are shared and one output column holds a key
 * column of each of them in every row (merchant_id of orders and of items,
 * joined on it), sharing by that value keeps two shares from ever writing
 * the same row: a row is written only by keys with its value there.
 */
bool
apply_view_shareable(ViewRecord *view, ViewBatch *batch, int *share_by)
{
	CachedView *entry;
	DeltaPlan  *plan;
	SourceBatch *first;
	DeltaSource *first_src;
	int			nchanged = 0;
	ListCell   *lc;

	if (view_cache == NULL || view->path != DJ_PATH_DELTA || batch->sources == NIL)
		return false;
	entry = hash_search(view_cache, &view->view_id, HASH_FIND, NULL);
	if (entry == NULL || !entry->valid)
		return false;
	plan = entry->plan;
	if (plan->path != DJ_PATH_DELTA || plan->whole || plan->branches != NIL)
		return false;
	if (!(plan->kind == DJ_KIND_AGGREGATE ||
		  (plan->kind == DJ_KIND_JOIN && !plan->has_outer && !plan->options.retract)))
		return false;
	foreach(lc, batch->sources)
	{
		if (((SourceBatch *) lfirst(lc))->truncated ||
			plan_source(plan, ((SourceBatch *) lfirst(lc))->ordinal) == NULL)
			return false;
	}

	for (int i = 0; i < list_length(batch->sources); i++)
		share_by[i] = -1;
	if (plan->kind != DJ_KIND_JOIN)
		return true;

	/*
	 * A row of the target holds one row of each source: the keys of one
	 * source write rows apart from each other, and the whole key spreads
	 * them best (all of a hot merchant's orders are not one share).
	 */
	foreach(lc, batch->sources)
		nchanged += (((SourceBatch *) lfirst(lc))->keys != NIL);
	if (nchanged <= 1)
		return true;

	/* an output column that every source's key reaches */
	first = linitial(batch->sources);
	first_src = plan_source(plan, first->ordinal);
	for (int k = 0; k < first_src->key_natts; k++)
	{
		int			column = first_src->partner_output[k];
		bool		all = (column >= 0);

		foreach(lc, batch->sources)
		{
			DeltaSource *src = plan_source(plan, ((SourceBatch *) lfirst(lc))->ordinal);
			int			found = -1;

			for (int k2 = 0; all && found < 0 && k2 < src->key_natts; k2++)
			{
				if (src->partner_output[k2] == column)
					found = k2;
			}
			all &= (found >= 0);
			if (all)
				share_by[foreach_current_index(lc)] = found;
		}
		if (all)
			return true;
		for (int i = 0; i < list_length(batch->sources); i++)
			share_by[i] = -1;
	}
	return true;
}

/*
 * Apply one view's batch.  Runs as the target's owner, with the view's
 * pinned settings; raises an error (the worker rolls back the view's
 * subtransaction) if the view cannot be applied.
 */
void
apply_view_batch(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts)
{
	DeltaPlan  *plan = view_plan(view);
	TargetWriter *writer;

	/* a recompute of the whole runs once, with the batch's final part */
	if (batch->chunk && (plan->path == DJ_PATH_FULL || plan->whole))
		return;

	if (plan->path != DJ_PATH_DELTA)
		counts->recomputed_at = GetCurrentTimestamp();

	apply_check_access(plan);
	writer = target_writer_begin(view->target, plan, counts);

	/* full recompute, or an aggregate's one group: the query, the difference */
	if (plan->path == DJ_PATH_FULL || plan->whole)
	{
		counts->keys_applied++;
		apply_full(plan, writer);
		target_writer_end(writer);
		return;
	}

	if (plan->branches != NIL)
	{
		/* UNION ALL: each branch its own changes, in the one target */
		ListCell   *lc;

		foreach(lc, plan->branches)
		{
			ViewBatch	branch_batch = *batch;
			ListCell   *lc2;

			branch_batch.sources = NIL;
			foreach(lc2, batch->sources)
			{
				SourceBatch *sb = lfirst(lc2);

				if (DJ_ORDINAL_BRANCH(sb->ordinal) == foreach_current_index(lc))
					branch_batch.sources = lappend(branch_batch.sources, sb);
			}
			if (branch_batch.sources != NIL)
				apply_plan(lfirst(lc), &branch_batch, writer, counts);
		}
	}
	else
		apply_plan(plan, batch, writer, counts);
	target_writer_end(writer);
}
