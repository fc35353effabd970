/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Applying one view's batch: load the view, then hand the dirty keys to
 *	  the join or aggregate applier, which write through a TargetWriter.
 *
 * The worker calls apply_view_batch() inside the batch's transaction, as the
 * view's owner.  The view's delta plan is rebuilt from its query at each
 * batch (with the creator's search_path), so a batch always applies the
 * view as the catalog has it now.
 *
 * Result rows reach the target through the executor's replication helpers
 * (execReplication.c), the way logical replication's apply does: the
 * existing row is found through the target's unique key index
 * (find_target_row), then updated (unless nothing changed), inserted or
 * deleted with ExecSimpleRelation*, keeping indexes, constraints and
 * triggers right.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "apply.h"
#include "catalog.h"
#include "target.h"

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
	writer->key_index = target_key_index(writer->rel, plan);
	if (!OidIsValid(writer->key_index))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("target \"%s\" lost its unique index on the result's key",
						RelationGetRelationName(writer->rel)),
				 errhint("Recreate the primary key, then call delta_join.refresh.")));

	writer->key_rel = index_open(writer->key_index, RowExclusiveLock);
	for (int i = 0; i < writer->key_rel->rd_index->indnkeyatts; i++)
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

	desc = RelationGetDescr(writer->rel);
	writer->ncolumns = plan->ncolumns;
	writer->attnums = palloc(sizeof(int) * plan->ncolumns);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (col >= plan->ncolumns)
			break;

		/* a source or the target changed type since the view was made */
		if (att->atttypid != plan->coltypes[col] ||
			(att->atttypmod != -1 && att->atttypmod != plan->coltypmods[col]))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of target \"%s\" no longer matches the query's output",
							NameStr(att->attname), RelationGetRelationName(writer->rel)),
					 errdetail("The target column is %s; the query now outputs %s.",
							   format_type_with_typemod(att->atttypid, att->atttypmod),
							   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
					 errhint("Drop and recreate the view.")));
		writer->attnums[col++] = i + 1;
	}
	/* a column added to the target after them would be overwritten with NULL */
	for (int i = col > 0 ? writer->attnums[col - 1] : 0; i < desc->natts; i++)
	{
		if (!TupleDescAttr(desc, i)->attisdropped)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("target \"%s\" has column \"%s\", which the query does not output",
							RelationGetRelationName(writer->rel),
							NameStr(TupleDescAttr(desc, i)->attname)),
					 errhint("Drop the column, or drop and recreate the view.")));
	}
	if (col != plan->ncolumns)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target \"%s\" no longer has the query's output columns",
						RelationGetRelationName(writer->rel)),
				 errhint("Drop and recreate the view.")));

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
	ExecOpenIndices(writer->rri, false);
	EvalPlanQualInit(&writer->epqstate, writer->estate, NULL, NIL, -1);
	writer->newslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
	writer->oldslot = table_slot_create(writer->rel, &writer->estate->es_tupleTable);
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
 * Find the target row whose key equals newslot's, into oldslot.
 *
 * Like RelationFindReplTupleByIndex() in execReplication.c, but a NULL key
 * column matches NULL (the key of a group whose key is NULL is a unique
 * constraint with NULLS NOT DISTINCT), which PostgreSQL 15's version does
 * not do; and the row is not locked: the worker is the only writer of a
 * target (refresh() takes a lock that excludes it), so locking would only
 * cost a WAL record per row.  A row a concurrent transaction is writing is
 * waited for all the same.
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

/* Delete the result row whose key columns are given (others are ignored). */
void
target_delete(TargetWriter *writer, const Datum *values, const bool *isnull)
{
	writer->estate->es_output_cid = GetCurrentCommandId(true);
	fill_new_slot(writer, values, isnull);
	if (!find_target_row(writer))
		return;
	EvalPlanQualSetSlot(&writer->epqstate, writer->oldslot);
	ExecSimpleRelationDelete(writer->rri, writer->estate, &writer->epqstate,
							 writer->oldslot);
	writer->counts->rows_deleted++;
	next_command(writer);
}

void
target_writer_end(TargetWriter *writer)
{
	ExecCloseIndices(writer->rri);
	AfterTriggerEndQuery(writer->estate);
	EvalPlanQualEnd(&writer->epqstate);
	ExecResetTupleTable(writer->estate->es_tupleTable, false);
	FreeExecutorState(writer->estate);
	index_close(writer->key_rel, NoLock);
	table_close(writer->rel, NoLock);
}

/* ----------------------------------------------------------------
 *		Entry point
 * ----------------------------------------------------------------
 */

void
apply_view_batch(int view_id, ViewBatch *batch, ApplyCounts *counts)
{
	ViewRecord	view;
	DeltaPlan  *plan;
	TargetWriter *writer;

	if (!catalog_get_view(view_id, &view))
		return;					/* dropped since the batch was decoded */

	plan = catalog_view_plan(&view);
	catalog_check_sources(view_id, plan);

	/*
	 * Lookups read the sources directly: check, as the view's owner, the
	 * rights a query would need (a revoked privilege puts the view in error).
	 */
#if PG_VERSION_NUM >= 160000
	(void) ExecCheckPermissions(plan->query->rtable, plan->query->rteperminfos, true);
#else
	(void) ExecCheckRTPerms(plan->query->rtable, true);
#endif

	writer = target_writer_begin(view.target, plan, counts);
	if (plan->kind == DJ_KIND_JOIN)
		apply_join(plan, batch, writer, counts);
	else
		apply_aggregate(plan, batch, writer, counts);
	target_writer_end(writer);
}
