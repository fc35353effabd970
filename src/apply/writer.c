/*-------------------------------------------------------------------------
 *
 * writer.c
 *	  The target writer: result rows into a view's target, by the target's
 *	  unique key; target rows found by other columns, and regions of the
 *	  target replaced.
 *
 * Result rows reach the target through the executor's replication helpers
 * (execReplication.c), the way logical replication's apply does: the
 * existing row is found through the target's unique key index
 * (find_target_row), then updated (unless nothing changed), inserted or
 * deleted with ExecSimpleRelation*, keeping indexes, constraints and row
 * triggers right.  Statement triggers do not fire (the target's guard is
 * one).  Every applier writes through here, as the target's owner, in the
 * apply's transaction.
 *
 * A target may have unique (or exclusion) indexes of its own beside its
 * key, which the result satisfies after every source transaction, but not
 * necessarily after each of the rows written one by one: two rows that
 * swap their values of such a column collide whichever is written first.
 * REFRESH MATERIALIZED VIEW CONCURRENTLY deletes the rows that change
 * before it inserts their new versions; the writer does the same for the
 * rows that would collide: such a row is held back, and the old versions
 * of all held-back rows are deleted before their new ones are written, at
 * the end of the view's work (writer_carry_out, writer_end).  What still
 * collides then is a result that breaks the index, and fails.
 *
 * Memory: a writer and what it finds live in the caller's memory context
 * (the apply's piece); the executor state is freed by writer_end.
 *
 * IDENTIFICATION
 *	  src/apply/writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "apply/lookup.h"
#include "apply/target_shape.h"
#include "apply/writer.h"
#include "base/compat.h"

/*
 * Has rel a deferrable constraint (its trigger: a deferrable unique index's
 * recheck, a foreign key, a constraint trigger)?  Its check would be
 * deferred to the commit of the apply's transaction, which PostgreSQL
 * refuses to queue from within the security-restricted operation an apply
 * runs in ("cannot fire deferred trigger within security-restricted
 * operation"), failing the view at its first change; so the writer makes
 * such checks immediate, run when the writer's rows are written.
 */
static bool
has_deferrable_trigger(Relation rel)
{
	TriggerDesc *trigdesc = rel->trigdesc;

	for (int i = 0; trigdesc != NULL && i < trigdesc->numtriggers; i++)
	{
		if (trigdesc->triggers[i].tgdeferrable)
			return true;
	}
	return false;
}

/*
 * Begin writing into target the rows of plan, counting them into counts:
 * the target, its key index and the executor state of its writes, in
 * CurrentMemoryContext.
 */
TargetWriter *
writer_begin(Oid target, DeltaPlan *plan, ApplyCounts *counts)
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
	if (writer->key_rel != NULL)
	{
		int			nkeys = writer->key_rel->rd_index->indnkeyatts;

		writer->equal_keys = lookup_equality_keys(writer->key_rel, nkeys, NULL, NULL);
		writer->keys = palloc(sizeof(ScanKeyData) * nkeys);
		memcpy(writer->keys, writer->equal_keys, sizeof(ScanKeyData) * nkeys);
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
	compat_init_range_table(writer->estate, rte);
	writer->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(writer->rri, writer->rel, 1, NULL, 0);
	/* as logical replication's apply: after-row triggers find it there */
	writer->estate->es_opened_result_relations =
		lappend(writer->estate->es_opened_result_relations, writer->rri);
	ExecOpenIndices(writer->rri, false);
	writer->cxt = CurrentMemoryContext;
	writer->scan_cxt = AllocSetContextCreate(writer->cxt, "delta_join target scan",
											 ALLOCSET_SMALL_SIZES);
	for (int i = 0; i < writer->rri->ri_NumIndices; i++)
	{
		Relation	idx = writer->rri->ri_IndexRelationDescs[i];
		IndexInfo  *info = writer->rri->ri_IndexRelationInfo[i];

		/* (a deferred constraint is checked at commit, after every row) */
		if ((info->ii_Unique || info->ii_ExclusionOps != NULL) &&
			info->ii_ReadyForInserts && idx->rd_index->indimmediate &&
			RelationGetRelid(idx) != writer->key_index)
		{
			/* the unique operators that the pre-check searches with */
			if (info->ii_Unique && info->ii_UniqueOps == NULL)
				BuildSpeculativeIndexInfo(idx, info);
			writer->other_unique = lappend(writer->other_unique,
										   list_make1_oid(RelationGetRelid(idx)));
		}
	}
	EvalPlanQualInit_compat(&writer->epqstate, writer->estate, NULL, NIL, -1);
	writer->newslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
	writer->oldslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
	if (has_deferrable_trigger(writer->rel))
	{
		ConstraintsSetStmt *immediate = makeNode(ConstraintsSetStmt);

		/* SET CONSTRAINTS ALL IMMEDIATE, for the rest of the transaction */
		immediate->deferred = false;
		AfterTriggerSetState(immediate);
	}
	AfterTriggerBeginQuery();
	return writer;
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
 * Begin an index scan of the target for one lookup, in the writer's scan
 * context, which writer_scan_end resets.  A scan copies its keys, and the
 * caches their functions keep (record_eq's, for a composite column) are
 * made anew in each scan's copy: in the scan context, not in the writer's,
 * where the lookups of a batch -- one or more per key -- would pile them up.
 */
static IndexScanDesc
writer_scan_begin(TargetWriter *writer, Relation idx, Snapshot snapshot, ScanKey keys,
				  int nkeys)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(writer->scan_cxt);
	IndexScanDesc scan;

	for (int i = 0; i < nkeys; i++)
		keys[i].sk_func.fn_mcxt = writer->scan_cxt;
	scan = index_beginscan_compat(writer->rel, idx, snapshot, nkeys, 0);
	index_rescan(scan, keys, nkeys, NULL, 0);
	MemoryContextSwitchTo(oldcxt);
	return scan;
}

static void
writer_scan_end(TargetWriter *writer, IndexScanDesc scan)
{
	index_endscan(scan);
	MemoryContextReset(writer->scan_cxt);
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

		lookup_set_key(&writer->keys[i], &writer->equal_keys[i],
					   writer->newslot->tts_values[attno - 1],
					   writer->newslot->tts_isnull[attno - 1]);
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
		scan = writer_scan_begin(writer, idx, &dirty, writer->keys, nkeys);
		found = index_getnext_slot(scan, ForwardScanDirection, writer->oldslot);
		if (found)
			xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		writer_scan_end(writer, scan);
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
	writer->found = WRITER_FOUND_UNKNOWN;
	CommandCounterIncrement();
	writer->estate->es_output_cid = GetCurrentCommandId(true);
}

/*
 * Would the row in newslot collide in one of the target's other unique or
 * exclusion indexes with a row other than self (the row it replaces, or
 * NULL)?
 */
static bool
collides_elsewhere(TargetWriter *writer, ItemPointer self)
{
	ListCell   *lc;

	foreach(lc, writer->other_unique)
	{
		ItemPointerData conflict;

		/* one index at a time: each may find the row being replaced */
		if (!ExecCheckIndexConstraints_compat(writer->rri, writer->newslot, writer->estate,
											  &conflict, lfirst(lc)) &&
			(self == NULL || !ItemPointerEquals(&conflict, self)))
			return true;
	}
	return false;
}

/*
 * Find the target row with newslot's key (into oldslot), noted as kept when
 * a region is being replaced.  Returns whether there is one; *same: it
 * holds newslot's values already (counted as an unchanged row).
 */
static bool
find_row_to_write(TargetWriter *writer, bool *same)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	*same = false;
	if (!find_target_row(writer))
		return false;
	if (writer->in_region)
		(void) hash_search(writer->region_kept, &writer->oldslot->tts_tid, HASH_ENTER, NULL);
	if (rows_equal(writer->oldslot, writer->newslot))
	{
		writer->counts->rows_unchanged++;
		*same = true;
	}
	return true;
}

/*
 * Write the row in newslot: update the row in oldslot, which has its key,
 * when found, else insert it; unless may_hold_back is false, a row that
 * would collide with another in an index other than the key is held back
 * for writer_end.
 */
static void
write_new_row(TargetWriter *writer, bool found, bool may_hold_back)
{
	if (may_hold_back && writer->other_unique != NIL &&
		collides_elsewhere(writer, found ? &writer->oldslot->tts_tid : NULL))
	{
		MemoryContext old = MemoryContextSwitchTo(writer->cxt);

		writer->held_back = lappend(writer->held_back,
									ExecCopySlotMinimalTuple(writer->newslot));
		MemoryContextSwitchTo(old);
		return;
	}
	if (found)
	{
		EvalPlanQualSetSlot(&writer->epqstate, writer->oldslot);
		ExecSimpleRelationUpdate(writer->rri, writer->estate, &writer->epqstate,
								 writer->oldslot, writer->newslot);
	}
	else
		ExecSimpleRelationInsert(writer->rri, writer->estate, writer->newslot);
	writer->counts->rows_upserted++;
	next_command(writer);
}

/* Insert or update the row in newslot (write_new_row) */
static void
upsert_new_row(TargetWriter *writer, bool may_hold_back)
{
	bool		same;
	bool		found = find_row_to_write(writer, &same);

	if (!same)
		write_new_row(writer, found, may_hold_back);
}

/* Insert or update the result row whose output values are given. */
void
writer_upsert(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	fill_new_slot(writer, values, isnull);
	upsert_new_row(writer, true);
}

/*
 * Does the target hold the result row whose output values are given, with
 * the same key and every column the same (as our own writes so far left
 * it)?  Counted as an unchanged row when it does.
 */
bool
writer_holds(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	bool		same;

	fill_new_slot(writer, values, isnull);
	(void) find_row_to_write(writer, &same);
	return same;
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
writer_delete(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	fill_new_slot(writer, values, isnull);
	if (find_target_row(writer))
		delete_old_row(writer);
}

/*
 * Find the target row whose key columns have the values given (the others
 * are ignored), and give its output values when there is one: for a write
 * of the same key that depends on them, writer_upsert_found or
 * writer_delete_found, which then need not search again.  Not in a region.
 */
bool
writer_find(TargetWriter *writer, const Datum *values, const bool *isnull,
			Datum *row_values, bool *row_isnull)
{
	Assert(!writer->in_region);
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	fill_new_slot(writer, values, isnull);
	if (!find_target_row(writer))
	{
		writer->found = WRITER_FOUND_NONE;
		return false;
	}
	writer->found = WRITER_FOUND_ROW;
	writer_output_values(writer, writer->oldslot, row_values, row_isnull);
	return true;
}

/* The result row of the key writer_find looked for, inserted or updated */
void
writer_upsert_found(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	bool		found = (writer->found == WRITER_FOUND_ROW);

	if (writer->found == WRITER_FOUND_UNKNOWN)
		elog(ERROR, "delta_join: a target row written by key was not found first");
	writer->found = WRITER_FOUND_UNKNOWN;
	fill_new_slot(writer, values, isnull);
	if (found && rows_equal(writer->oldslot, writer->newslot))
	{
		writer->counts->rows_unchanged++;
		return;
	}
	write_new_row(writer, found, true);
}

/* Delete the row writer_find found, if it found one */
void
writer_delete_found(TargetWriter *writer)
{
	WriterFound found = writer->found;

	if (found == WRITER_FOUND_UNKNOWN)
		elog(ERROR, "delta_join: a target row deleted by key was not found first");
	writer->found = WRITER_FOUND_UNKNOWN;
	if (found == WRITER_FOUND_ROW)
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
writer_lookup_begin(TargetWriter *writer, int ncols, const int *cols, bool missing_ok)
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
			match = found && target_index_column_fits(writer->rel, idx, i);
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
	for (int i = 0; i < ncols; i++)
	{
		for (int c = 0; c < ncols; c++)
			if (tl->idx->rd_index->indkey.values[i] == writer->attnums[cols[c]])
				tl->cols[i] = cols[c];
	}
	tl->equal_keys = lookup_equality_keys(tl->idx, ncols, NULL, NULL);
	tl->keys = palloc(sizeof(ScanKeyData) * ncols);
	memcpy(tl->keys, tl->equal_keys, sizeof(ScanKeyData) * ncols);
	return tl;
}

/*
 * Call fn for each target row whose lookup columns have the values given
 * (values and isnull are indexed by output column; a NULL finds NULLs, as
 * in a key whose NULLs are not distinct), as our own writes so far left
 * the target.  The scan ends before fn may write.
 */
void
writer_lookup_rows(TargetWriter *writer, TargetLookup *tl, const Datum *values,
				   const bool *isnull, TargetRowFn fn, void *arg)
{
	SnapshotData dirty;
	IndexScanDesc scan;
	ItemPointerData few[64];
	ItemPointer tids = few;
	Size		ntids = 0;
	Size		maxtids = lengthof(few);

	for (int i = 0; i < tl->ncols; i++)
		lookup_set_key(&tl->keys[i], &tl->equal_keys[i], values[tl->cols[i]],
					   isnull[tl->cols[i]]);

	InitDirtySnapshot(dirty);
	scan = writer_scan_begin(writer, tl->idx, &dirty, tl->keys, tl->ncols);
	while (index_getnext_slot(scan, ForwardScanDirection, writer->oldslot))
	{
		/* (freed below: a batch makes a lookup per key, each may find many) */
		if (ntids == maxtids)
		{
			maxtids *= 2;
			if (tids == few)
			{
				tids = palloc_extended(sizeof(ItemPointerData) * maxtids, MCXT_ALLOC_HUGE);
				memcpy(tids, few, sizeof(few));
			}
			else
				tids = repalloc_huge(tids, sizeof(ItemPointerData) * maxtids);
		}
		tids[ntids++] = writer->oldslot->tts_tid;
	}
	writer_scan_end(writer, scan);

	for (Size i = 0; i < ntids; i++)
	{
		if (table_tuple_fetch_row_version(writer->rel, &tids[i], SnapshotAny,
										  writer->oldslot))
			fn(writer, writer->oldslot, arg);
	}
	if (tids != few)
		pfree(tids);
}

void
writer_lookup_end(TargetLookup *tl)
{
	index_close(tl->idx, NoLock);
}

/*
 * Call fn for each row of the target, as the active snapshot sees it; fn
 * may not write the target.
 */
void
writer_scan_rows(TargetWriter *writer, TargetRowFn fn, void *arg)
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
writer_output_values(TargetWriter *writer, TupleTableSlot *row, Datum *values, bool *isnull)
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
writer_insert_slot(TargetWriter *writer, TupleTableSlot *slot)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	ExecSimpleRelationInsert(writer->rri, writer->estate, slot);
	writer->counts->rows_upserted++;
	next_command(writer);
}

/* Delete the target row at tid. */
void
writer_delete_row(TargetWriter *writer, ItemPointer tid)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	if (table_tuple_fetch_row_version(writer->rel, tid, SnapshotAny, writer->oldslot))
		delete_old_row(writer);
}

/* ----------------------------------------------------------------
 *		Regions
 *
 * Replacing a region of the target -- the rows some source key names --
 * by what the query now gives for it: writer_region_begin, then
 * writer_region_add for each row the region has now, then the upserts of
 * the new rows, then writer_region_end deletes the rows of the region that
 * no upsert found.  Rows are told apart by where they are (their TID), so
 * that the key's own equality decides what an upsert found.
 * ----------------------------------------------------------------
 */

void
writer_region_begin(TargetWriter *writer)
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
writer_region_add(TargetWriter *writer, ItemPointer tid)
{
	bool		found;
	ItemPointer entry = hash_search(writer->region_olds, tid, HASH_ENTER, &found);

	if (!found)
		writer->region_old = lappend(writer->region_old, entry);
}

void
writer_region_end(TargetWriter *writer)
{
	ListCell   *lc;

	writer->in_region = false;
	foreach(lc, writer->region_old)
	{
		if (!hash_search(writer->region_kept, lfirst(lc), HASH_FIND, NULL))
			writer_delete_row(writer, lfirst(lc));
	}
	hash_destroy(writer->region_kept);
	hash_destroy(writer->region_olds);
	list_free(writer->region_old);
	writer->region_kept = NULL;
	writer->region_olds = NULL;
	writer->region_old = NIL;
}

/*
 * Write the rows held back: first delete the old versions of them all,
 * freeing their values, then write them, holding back again (unless last)
 * those that still collide.  A row may have been held back twice, or
 * written since by a later upsert: the second pass finds it.
 */
static void
write_held_back(TargetWriter *writer, bool last)
{
	List	   *rows = writer->held_back;
	ListCell   *lc;

	writer->held_back = NIL;
	foreach(lc, rows)
	{
		ExecForceStoreMinimalTuple(lfirst(lc), writer->newslot, false);
		slot_getallattrs(writer->newslot);
		writer->estate->es_output_cid = GetCurrentCommandId(true);
		if (find_target_row(writer) && !rows_equal(writer->oldslot, writer->newslot))
			delete_old_row(writer);
	}
	foreach(lc, rows)
	{
		ExecForceStoreMinimalTuple(lfirst(lc), writer->newslot, false);
		slot_getallattrs(writer->newslot);
		upsert_new_row(writer, !last);
	}
}

/*
 * A view's work is written a piece at a time, a writer each, in one
 * transaction: a row may collide with one that a later piece changes.
 * writer_carry_out writes the rows held back that no longer collide (the
 * old versions of the others deleted) and returns the others, for
 * writer_carry_in of the next piece's writer; writer_end writes what is
 * left, where a row that still collides fails.
 */
void
writer_carry_in(TargetWriter *writer, List *held_back)
{
	writer->held_back = list_concat(writer->held_back, held_back);
}

List *
writer_carry_out(TargetWriter *writer)
{
	List	   *rest;

	write_held_back(writer, false);
	rest = writer->held_back;
	writer->held_back = NIL;
	return rest;
}

void
writer_end(TargetWriter *writer)
{
	write_held_back(writer, true);
	AfterTriggerEndQuery(writer->estate);
	/* the target's indexes, and the relations the triggers opened */
	ExecCloseResultRelations(writer->estate);
	EvalPlanQualEnd(&writer->epqstate);
	ExecResetTupleTable(writer->estate->es_tupleTable, false);
	FreeExecutorState(writer->estate);
	if (writer->key_rel)
		index_close(writer->key_rel, NoLock);
	table_close(writer->rel, NoLock);
	MemoryContextDelete(writer->scan_cxt);
}
