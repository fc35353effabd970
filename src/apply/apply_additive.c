/*-------------------------------------------------------------------------
 *
 * apply_additive.c
 *	  Additive apply of an aggregate over joins (issue 22): a batch's
 *	  changed rows of one source, weighed, joined to the other sources and
 *	  added to the groups they leave and enter, in time that follows the
 *	  change instead of the groups' rows.
 *
 * Why this is exact.  Let s be the only source of the view that changed in
 * the batch.  Every other source reads, under the batch's snapshot, as it
 * read under the last one (the batch is weighed: its snapshot saw all
 * earlier changes of the view's sources and sees exactly this batch's on
 * top, worker.c), and a join is linear in each of its inputs: the rows the
 * query joins after the batch are those it joined before, less the old
 * rows of s joined to the others, plus the new ones.  The capture weighs
 * each distinct image of a changed row of s, +1 per new row and -1 per old
 * (DirtyKey.weight), so the delta query (recompute_prepare_delta) -- the
 * view's joins and conditions with s replaced by the weighed images --
 * yields, per group, the change of its count of rows and of each count and
 * sum: count(*) changes by the weights' sum, count(x) by the weights of the
 * rows whose x is not NULL, sum(x) by the weighed sum of x.  Exactly once:
 * the weights are added only when nothing wrote the target under a
 * snapshot that saw one of the batch's changes (worker.c,
 * worker_exactly_once), in the one transaction that stores the view's
 * applied position.
 *
 * What the target does not tell.  A group's count of rows is known only
 * from a count(*) column; a sum is NULL once its values are all NULL, which
 * a count of the same argument tells, or a sum other than 0 rules out.  A
 * group is recomputed instead (the caller's keyed recompute) when adding
 * cannot say its value: rows left it and no count(*) says whether any
 * remain; values left a sum of a column that may be NULL, with no count of
 * it, and the sum came to 0; or the numbers disagree with the target (a
 * group missing whose rows did not grow, a count below zero), which a
 * correct target never shows but a recompute repairs.  A group whose
 * count(*) falls to zero is deleted.
 *
 * A group's key is written as the batch's rows spell it.  Where equal keys
 * may be spelt apart (numeric 1.0 and 1.00), a batch that removes rows
 * recomputes their groups (additive_source): the spelling kept could be a
 * departed row's, which the query cannot return.
 *
 * IDENTIFICATION
 *	  src/apply/apply_additive.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "common/int.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"

#include "apply/apply.h"
#include "apply/recompute.h"

/* work_mem of a delta query, in kB, at least */
#define DELTA_WORK_MEM	65536

/* The rows of a delta query, copied */
typedef struct DeltaReceiver
{
	DestReceiver pub;
	MemoryContext cxt;
	List	   *rows;			/* HeapTuple */
	TupleDesc	desc;
} DeltaReceiver;

static bool
delta_receive(TupleTableSlot *slot, DestReceiver *self)
{
	DeltaReceiver *receiver = (DeltaReceiver *) self;
	MemoryContext old = MemoryContextSwitchTo(receiver->cxt);

	if (receiver->desc == NULL)
		receiver->desc = CreateTupleDescCopy(slot->tts_tupleDescriptor);
	receiver->rows = lappend(receiver->rows, ExecCopySlotHeapTuple(slot));
	MemoryContextSwitchTo(old);
	return true;
}

/* The target row of a group, as output values */
typedef struct FoundRow
{
	bool		found;
	Datum	   *values;
	bool	   *isnull;
} FoundRow;

/*
 * Does the target keep each aggregate in the type the query gives it, so
 * that a change can be added to it as it is?  (A target made by the user
 * may keep a count in an integer, a sum in a numeric of fixed scale: those
 * the recompute coerces.)
 */
static bool
target_types_fit(DeltaPlan *plan, TargetWriter *writer)
{
	TupleDesc	desc = RelationGetDescr(writer->rel);

	for (int c = 0; c < plan->ncolumns; c++)
	{
		AdditiveColumn *col = &plan->additive_columns[c];
		Form_pg_attribute attr;

		attr = TupleDescAttr(desc, writer->attnums[c] - 1);
		if (attr->atttypid != plan->coltypes[c])
			return false;
		if (col->role != ADDITIVE_GROUP &&
			((attr->atttypid != INT8OID && attr->atttypid != NUMERICOID) ||
			 attr->atttypmod != -1))
			return false;
	}
	return true;
}

/*
 * Does the worker keep the view by adding its batches (as apply_aggregate_additive
 * does, when a batch allows it): the setting, the plan, and a target whose
 * aggregate columns are of the query's types?  What status.mode says
 * (ApplyCounts.additive).
 */
bool
apply_additive_kept(DeltaPlan *plan, TargetWriter *writer)
{
	return dj_additive_aggregates && plan->additive && target_types_fit(plan, writer);
}

/* The numeric values of PG_INT64_MIN, 0 and PG_INT64_MAX, made once */
typedef enum NumericConst
{
	NUMERIC_INT64_MIN,
	NUMERIC_ZERO,
	NUMERIC_INT64_MAX
} NumericConst;

static Datum
numeric_const(NumericConst which)
{
	static Datum consts[3];

	if (consts[0] == (Datum) 0)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		consts[NUMERIC_INT64_MIN] = NumericGetDatum(int64_to_numeric(PG_INT64_MIN));
		consts[NUMERIC_ZERO] = NumericGetDatum(int64_to_numeric(0));
		consts[NUMERIC_INT64_MAX] = NumericGetDatum(int64_to_numeric(PG_INT64_MAX));
		MemoryContextSwitchTo(old);
	}
	return consts[which];
}

/* A numeric delta as int64; false if it does not fit */
static bool
delta_int64(Datum delta, bool isnull, int64 *result)
{
	if (isnull)
	{
		*result = 0;
		return true;
	}
	if (!DatumGetBool(DirectFunctionCall2(numeric_le, delta,
										  numeric_const(NUMERIC_INT64_MAX))) ||
		!DatumGetBool(DirectFunctionCall2(numeric_ge, delta,
										  numeric_const(NUMERIC_INT64_MIN))))
		return false;
	*result = DatumGetInt64(DirectFunctionCall1(numeric_int8, delta));
	return true;
}

/*
 * The new value of an aggregate column of type type (int8 or numeric):
 * old (NULL: none yet) plus delta (NULL: nothing added).  False if it does
 * not fit.
 */
static bool
add_delta(Oid type, Datum old, bool old_null, Datum delta, bool delta_null,
		  Datum *result, bool *result_null)
{
	int64		d;

	*result_null = old_null && delta_null;
	if (delta_null)
	{
		*result = old;
		return true;
	}
	if (type == NUMERICOID)
	{
		*result = old_null ? delta : DirectFunctionCall2(numeric_add, old, delta);
		return true;
	}
	if (!delta_int64(delta, false, &d))
		return false;
	if (old_null)
	{
		*result = Int64GetDatum(d);
		return true;
	}
	if (pg_add_s64_overflow(DatumGetInt64(old), d, &d))
		return false;
	*result = Int64GetDatum(d);
	return true;
}

/* value (int8 or numeric, not NULL) compared with 0: -1, 0 or 1 */
static int
sign_of(Oid type, Datum value)
{
	if (type == INT8OID)
		return (DatumGetInt64(value) > 0) - (DatumGetInt64(value) < 0);
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, value, numeric_const(NUMERIC_ZERO)));
}

/*
 * Write one group's change (the delta query's row: group key, rows, then
 * per aggregate column its deltas), given its target row (fr) and the
 * group key's output columns already in values; false when the group must
 * be recomputed instead.
 */
static bool
apply_group_delta(DeltaPlan *plan, TargetWriter *writer, int nkeys, const Datum *delta,
				  const bool *delta_null, FoundRow *fr, Datum *values, bool *isnull)
{
	int64		rows;
	int			d = nkeys + 1;	/* the next delta column */
	int			count_rows = -1;
	bool	   *values_left = palloc0(sizeof(bool) * plan->ncolumns);

	if (!delta_int64(delta[nkeys], delta_null[nkeys], &rows))
		return false;
	for (int c = 0; c < plan->ncolumns; c++)
		if (plan->additive_columns[c].role == ADDITIVE_COUNT_ROWS)
			count_rows = c;

	/* rows left a group: does any remain? */
	if (fr->found && rows < 0 && count_rows < 0)
		return false;
	if (!fr->found && rows <= 0)
		return false;

	for (int c = 0; c < plan->ncolumns; c++)
	{
		AdditiveColumn *col = &plan->additive_columns[c];
		Oid			type = plan->coltypes[c];
		Datum		old = fr->found ? fr->values[c] : (Datum) 0;
		bool		old_null = fr->found ? fr->isnull[c] : true;
		int64		values_added;
		bool		added_null;

		switch (col->role)
		{
			case ADDITIVE_GROUP:
				continue;
			case ADDITIVE_COUNT_ROWS:
				if (!add_delta(type, old, old_null, delta[nkeys], delta_null[nkeys],
							   &values[c], &isnull[c]))
					return false;
				break;
			case ADDITIVE_COUNT:
				if (!add_delta(type, old, old_null, delta[d], delta_null[d], &values[c], &isnull[c]))
					return false;

				/*
				 * A count is never NULL: a new group whose rows hold no
				 * value of the argument counts 0 (its delta, a sum over
				 * no row, is NULL)
				 */
				if (isnull[c])
				{
					values[c] = type == INT8OID ? Int64GetDatum(0) :
						DirectFunctionCall1(int8_numeric, Int64GetDatum(0));
					isnull[c] = false;
				}
				d++;
				break;
			case ADDITIVE_SUM:
				if (!delta_int64(delta[d + 1], delta_null[d + 1], &values_added))
					return false;
				/* values left a sum that held none, or a group that was not */
				if (values_added < 0 && old_null)
					return false;

				/*
				 * A NaN entered or left (a numeric(p,s) column holds NaN):
				 * NaN - NaN is NaN, not the sum of the rows that remain
				 */
				if (type == NUMERICOID && !delta_null[d] &&
					numeric_is_nan(DatumGetNumeric(delta[d])))
					return false;

				/*
				 * Values that entered the group and left it again add
				 * nothing -- not 0 to a sum of none, which is NULL.  In one
				 * delta query their images cancel before they are summed;
				 * the sums of chunks read apart (DeltaSums) may hold an
				 * image at +1 from one chunk and at -1 from another.
				 */
				added_null = delta_null[d] ||
					(values_added == 0 && sign_of(NUMERICOID, delta[d]) == 0);
				if (!add_delta(type, old, old_null, delta[d], added_null, &values[c], &isnull[c]))
					return false;
				values_left[c] = (values_added < 0 && !col->arg_not_null);
				d += 2;
				break;
		}
		if (col->role != ADDITIVE_SUM && !isnull[c] && sign_of(type, values[c]) < 0)
			return false;		/* a count below zero: the target disagrees */
	}

	/*
	 * Values left a sum of a column that may be NULL: a sum of none is NULL.
	 * Its count says whether any is left; without one, a sum other than 0
	 * has some, and one of 0 may have none (recomputed).
	 */
	for (int c = 0; c < plan->ncolumns; c++)
	{
		int			counted_by = plan->additive_columns[c].counted_by;

		if (!values_left[c])
			continue;
		if (counted_by >= 0)
			isnull[c] |= (sign_of(plan->coltypes[counted_by], values[counted_by]) == 0);
		else if (sign_of(plan->coltypes[c], values[c]) == 0)
			return false;
	}

	if (count_rows >= 0 && !isnull[count_rows] &&
		sign_of(plan->coltypes[count_rows], values[count_rows]) == 0)
		writer_delete_found(writer);
	else
		writer_upsert_found(writer, values, isnull);
	return true;
}

/*
 * Where each output column of the group key is in the delta query's rows
 * (group-clause order), per output column (-1: an aggregate).  A group
 * column may be outside the target's key (shown twice, as in SELECT
 * m.region AS r1, m.region AS r2 ... GROUP BY 1, 2): key_output does not
 * name it.
 */
static int *
group_outputs(DeltaPlan *plan)
{
	int		   *group_of = palloc(sizeof(int) * Max(plan->ncolumns, 1));
	int			c = 0;
	ListCell   *lc;

	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		ListCell   *lc2;

		if (tle->resjunk)
			continue;
		group_of[c] = -1;
		if (plan->additive_columns[c].role == ADDITIVE_GROUP)
		{
			foreach(lc2, plan->query->groupClause)
			{
				if (((SortGroupClause *) lfirst(lc2))->tleSortGroupRef == tle->ressortgroupref)
					group_of[c] = foreach_current_index(lc2);
			}
			if (group_of[c] < 0)
				elog(ERROR, "output column %d of the group key is not in the group clause", c + 1);
		}
		c++;
	}
	return group_of;
}

/*
 * The source of the view whose changed rows the batch adds to their
 * groups, as an index into plan->sources; -1 when the view or the batch do
 * not allow it (see the file's comment).  A batch that reads its keys a
 * chunk at a time (ViewBatch.next_chunk) holds none itself: its one source
 * is the one its chunks changed.
 *
 * Where equal group keys may differ in bytes (additive_keys_bytewise), two
 * cases recompute their groups instead.  A batch that removes rows (an
 * image of weight below 0) could leave a group's key written as a
 * departed row spelt it.  And a batch read in chunks sums its chunks'
 * deltas by the key's bytes (DeltaSums): two chunks could give one group
 * under two spellings, summed apart and written one after the other, a
 * state between them that is no group's.
 */
static int
additive_source(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer)
{
	SourceBatch *changed = NULL;
	ListCell   *lc;

	if (!dj_additive_aggregates || !plan->additive || !batch->weighed ||
		(batch->next_chunk != NULL && !plan->additive_keys_bytewise))
		return -1;
	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);

		if (sb->truncated)
			return -1;
		if (sb->keys == NIL && batch->next_chunk == NULL)
			continue;
		if (changed != NULL)
			return -1;			/* two sources changed */
		changed = sb;
	}
	if (changed == NULL || !target_types_fit(plan, writer))
		return -1;
	if (!plan->additive_keys_bytewise)
	{
		foreach(lc, changed->keys)
			if (((DirtyKey *) lfirst(lc))->weight < 0)
				return -1;		/* rows leave their groups */
	}
	foreach(lc, plan->sources)
		if (((DeltaSource *) lfirst(lc))->ordinal == changed->ordinal)
			return foreach_current_index(lc);
	return -1;
}

/* The keys of a piece's source of that ordinal whose weight is not 0 */
static List *
weighed_keys(ViewBatch *piece, int ordinal, ApplyCounts *counts)
{
	List	   *keys = NIL;
	ListCell   *lc;

	foreach(lc, piece->sources)
	{
		SourceBatch *sb = lfirst(lc);
		ListCell   *lc2;

		if (sb->ordinal != ordinal)
			continue;
		counts->keys_applied += list_length(sb->keys);
		foreach(lc2, sb->keys)
		{
			DirtyKey   *key = lfirst(lc2);

			if (key->weight != 0)
				keys = lappend(keys, key);
		}
	}
	return keys;
}

/*
 * Run the delta query (fq) with keys, the weighed changed rows of its
 * source, its rows going to receiver.
 */
static void
run_delta(FinderQuery *fq, List *keys, DeltaReceiver *receiver, ApplyCounts *counts)
{
	int			nestlevel;

	memset(receiver, 0, sizeof(DeltaReceiver));
	recompute_receiver_init(&receiver->pub, delta_receive);
	receiver->cxt = CurrentMemoryContext;
	counts->lookups++;

	/*
	 * The delta query aggregates per group of the batch, a numeric state
	 * each: at least DELTA_WORK_MEM for its hash table, which would rather
	 * spill to disk under the default work_mem for a batch of thousands of
	 * groups (bounded by the batch's keys, not by the tables).
	 */
	nestlevel = NewGUCNestLevel();
	if (work_mem < DELTA_WORK_MEM)
		(void) set_config_option("work_mem", CppAsString2(DELTA_WORK_MEM), PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	recompute_run_delta(fq, keys, (DestReceiver *) receiver);
	AtEOXact_GUC(true, nestlevel);
}

/*
 * The deltas of a batch read a chunk at a time, summed per group: a delta
 * query's row (group key, then its numeric deltas) per group, the deltas of
 * the chunks that reached the group added up.  The delta query is linear in
 * its weighed rows, so these are the rows it gives for all the chunks at
 * once.  In memory: one row per dirty group, not per changed row (and,
 * for a group key kept out of line, one pointer image of some twenty
 * bytes per source row whose key the deltas named).
 */
typedef struct DeltaSums
{
	HTAB	   *groups;			/* group key image -> DirtyKey (the row) */
	HTAB	   *pointers;		/* and a long key by its TOAST pointers */
	List	   *rows;			/* DirtyKey *, the rows, first seen first */
	TupleDesc	desc;			/* of the rows; NULL until the first */
	KeyShape	key_shape;		/* of the group key */
	KeyShape	row_shape;		/* of the whole row */
	StringInfoData image;
	MemoryContext cxt;
} DeltaSums;

/* How the first n columns of rows of desc are stored, as a KeyShape */
static void
shape_of(KeyShape *shape, TupleDesc desc, int n)
{
	shape->nkeys = n;
	shape->typlen = palloc(sizeof(int16) * Max(n, 1));
	shape->typbyval = palloc(sizeof(bool) * Max(n, 1));
	for (int c = 0; c < n; c++)
	{
		shape->typlen[c] = TupleDescAttr(desc, c)->attlen;
		shape->typbyval[c] = TupleDescAttr(desc, c)->attbyval;
	}
}

/*
 * The row of the sums that a delta row (its group key first in delta) adds
 * to, or NULL when its group is new: the delta row is then the group's
 * row.  A long group key may come as a pointer to its source's TOAST
 * table, another row's in another chunk: the group is known by its value,
 * read once for each pointer met (batch.c, dirty_key_pointer_image), into
 * memory of detoast_cxt (the caller's chunk).
 */
static DirtyKey *
delta_sums_group(DeltaSums *sums, Datum *delta, bool *delta_null, MemoryContext detoast_cxt)
{
	KeyShape   *shape = &sums->key_shape;
	DirtyKey  **pointer = NULL;
	DirtyKey  **entry;
	bool		found;

	if (dirty_key_is_toasted(shape, delta, delta_null))
	{
		MemoryContext oldcxt;

		pointer = key_set_enter_pointers(&sums->pointers, &sums->image, shape,
										 delta, delta_null, sums->cxt);
		if (pointer != NULL && *pointer != NULL)
			return *pointer;
		oldcxt = MemoryContextSwitchTo(detoast_cxt);
		dirty_key_detoast(shape, delta, delta_null, delta);
		MemoryContextSwitchTo(oldcxt);
	}

	resetStringInfo(&sums->image);
	dirty_key_image(&sums->image, shape, delta, delta_null);
	entry = key_set_enter(sums->groups, 0, 0, &sums->image, sums->cxt);
	found = (*entry != NULL);
	if (!found)
	{
		*entry = dirty_key_make(&sums->row_shape, delta, delta_null);
		sums->rows = lappend(sums->rows, *entry);
	}
	if (pointer != NULL)
		*pointer = *entry;
	return found ? *entry : NULL;
}

static void
delta_sums_add(DeltaSums *sums, int nkeys, DeltaReceiver *receiver)
{
	int			natts;
	Datum	   *delta;
	bool	   *delta_null;
	MemoryContext oldcxt;
	ListCell   *lc;

	if (receiver->desc == NULL)
		return;					/* no row */
	natts = receiver->desc->natts;
	oldcxt = MemoryContextSwitchTo(sums->cxt);
	if (sums->groups == NULL)
	{
		sums->groups = key_set_create(sums->cxt);
		initStringInfo(&sums->image);
		sums->desc = CreateTupleDescCopy(receiver->desc);
		shape_of(&sums->row_shape, sums->desc, natts);
		sums->key_shape = sums->row_shape;
		sums->key_shape.nkeys = nkeys;
	}
	delta = palloc(sizeof(Datum) * natts);
	delta_null = palloc(sizeof(bool) * natts);
	foreach(lc, receiver->rows)
	{
		DirtyKey   *row;

		heap_deform_tuple(lfirst(lc), receiver->desc, delta, delta_null);
		row = delta_sums_group(sums, delta, delta_null, oldcxt);
		if (row == NULL)
			continue;			/* a new group: its deltas are its sums */
		for (int d = nkeys; d < natts; d++)
		{
			Datum		old = row->values[d];

			if (delta_null[d])
				continue;
			if (row->isnull[d])
				row->values[d] = datumCopy(delta[d], false, -1);
			else
			{
				row->values[d] = DirectFunctionCall2(numeric_add, old, delta[d]);
				pfree(DatumGetPointer(old));
			}
			row->isnull[d] = false;
		}
	}
	pfree(delta);
	pfree(delta_null);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Apply the batch by adding its weighed changed rows to their groups, if
 * the view and the batch allow it (see the file's comment); the groups
 * adding cannot settle are appended to *recompute (DirtyKey *, group key
 * values in group-clause order).  Returns false, having written nothing,
 * when the batch must take the keyed recompute instead.
 *
 * A batch that reads its keys a chunk at a time runs the delta query on
 * each chunk and sums the deltas per group (DeltaSums) before it writes a
 * group: each group is written once, as for a batch in memory.
 */
bool
apply_aggregate_additive(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
						 ApplyCounts *counts, List **recompute)
{
	int			nkeys = list_length(plan->query->groupClause);
	int			source = additive_source(plan, batch, writer);
	bool		chunked = (batch->next_chunk != NULL);
	int			ordinal;
	DeltaReceiver receiver;
	DeltaSums	sums;
	List	   *rows;
	TupleDesc	desc;
	int			nchanged = 0;
	int			nchunks = 0;
	KeyShape	shape;
	Datum	   *delta = NULL;
	bool	   *delta_null = NULL;
	Datum	   *values;
	bool	   *isnull;
	FoundRow	fr;
	int		   *group_of;
	ListCell   *lc;

	if (source < 0)
		return false;
	ordinal = ((DeltaSource *) list_nth(plan->sources, source))->ordinal;

	if (!chunked)
	{
		List	   *keys = weighed_keys(batch, ordinal, counts);

		if (keys == NIL)
			return true;		/* no row the query reads changed */
		nchanged = list_length(keys);
		run_delta(recompute_prepare_delta(plan, source), keys, &receiver, counts);
		rows = receiver.rows;
		desc = receiver.desc;
	}
	else
	{
		MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
														"delta_join delta of a chunk",
														ALLOCSET_DEFAULT_SIZES);
		FinderQuery *fq = recompute_prepare_delta(plan, source);
		ViewBatch  *chunk;

		memset(&sums, 0, sizeof(sums));
		sums.cxt = CurrentMemoryContext;
		while ((chunk = batch->next_chunk(batch->next_chunk_arg)) != NULL)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(chunk_cxt);
			List	   *keys = weighed_keys(chunk, ordinal, counts);

			nchunks++;
			if (keys != NIL)
			{
				nchanged += list_length(keys);
				run_delta(fq, keys, &receiver, counts);
				delta_sums_add(&sums, nkeys, &receiver);
			}
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(chunk_cxt);
		}
		MemoryContextDelete(chunk_cxt);
		rows = sums.rows;
		desc = sums.desc;
	}

	if (desc != NULL)
		shape_of(&shape, desc, nkeys);
	values = palloc0(sizeof(Datum) * plan->ncolumns);
	isnull = palloc0(sizeof(bool) * plan->ncolumns);
	fr.values = palloc(sizeof(Datum) * plan->ncolumns);
	fr.isnull = palloc(sizeof(bool) * plan->ncolumns);
	group_of = group_outputs(plan);
	if (!chunked && desc != NULL)
	{
		delta = palloc(sizeof(Datum) * desc->natts);
		delta_null = palloc(sizeof(bool) * desc->natts);
	}

	foreach(lc, rows)
	{
		if (!chunked)
			heap_deform_tuple(lfirst(lc), desc, delta, delta_null);
		else
		{
			delta = ((DirtyKey *) lfirst(lc))->values;
			delta_null = ((DirtyKey *) lfirst(lc))->isnull;
		}

		/* every output column of the group key, in the target's key or not */
		for (int c = 0; c < plan->ncolumns; c++)
		{
			if (group_of[c] < 0)
				continue;
			values[c] = delta[group_of[c]];
			isnull[c] = delta_null[group_of[c]];
		}
		fr.found = writer_find(writer, values, isnull, fr.values, fr.isnull);
		if (!apply_group_delta(plan, writer, nkeys, delta, delta_null, &fr, values, isnull))
			*recompute = lappend(*recompute, dirty_key_make(&shape, delta, delta_null));
	}
	elog(DEBUG1, "additive apply: %d changed rows of %s, %d groups, %d of them recomputed%s",
		 nchanged, ((DeltaSource *) list_nth(plan->sources, source))->relname,
		 list_length(rows), list_length(*recompute),
		 chunked ? psprintf("; read in %d chunks", nchunks) : "");
	return true;
}
