/*-------------------------------------------------------------------------
 *
 * apply_agg.c
 *	  Delta aggregate: recompute every group whose rows changed from the
 *	  current source rows, upsert it, and delete it from the target when it
 *	  has no rows left (-D).
 *
 * Aggregates are evaluated by Postgres itself: the view's query, with
 * "group column = ANY($1)" added to its WHERE clause (a one-column key:
 * up to GROUP_SET_SIZE groups an execution), or "group column = $n" (other
 * keys, and NULL keys: one group an execution) -- its group query
 * (recompute.c) -- is planned once per batch (a generic plan: the planner
 * reaches the groups through the group-key index) and executed for the
 * distinct dirty groups.  So every aggregate, with ORDER BY, FILTER or
 * DISTINCT inside the call, behaves exactly as in a plain GROUP BY.  A
 * HAVING clause (allowed with ignore_non_unique_key_filter) is moved into
 * an extra output column, so that a group that stops passing it is told
 * apart from a group that is gone: the first keeps its earlier row, the
 * second is deleted.
 *
 * Memory: the plan lives in the caller's context; each group's execution
 * uses the executor's own per-query context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "tcop/dest.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/fmgrprotos.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/recompute.h"

/* Receives the (at most one) row of a recomputed group. */
typedef struct GroupReceiver
{
	DestReceiver pub;
	TargetWriter *writer;
	int			ncolumns;
	bool		has_having;
	bool		retract;		/* a group failing HAVING is deleted */
	bool		found;
	struct GroupSet *set;		/* recomputing a set of groups, or NULL */
	int			key_column;		/* output column of the key (set mode) */
} GroupReceiver;

/*
 * Groups of a one-column key recomputed together: "key = ANY($1)", one
 * execution for up to GROUP_SET_SIZE groups.  The groups it returns are
 * noted in `found` (a hash table on the key's own hash and equality, so that
 * values equal but stored differently, like numeric 1.0 and 1.00, match);
 * those it does not return are gone.
 */
#define GROUP_SET_SIZE	512

typedef struct GroupSet
{
	GroupQuery *gq;
	Oid			elemtype;
	Oid			arraytype;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Oid			collation;
	FmgrInfo	hash;
	FmgrInfo	eq;
	MemoryContext cxt;			/* found and its values, reset per set */
	HTAB	   *found;			/* uint32 hash -> FoundValues */
} GroupSet;

typedef struct FoundValues
{
	uint32		hash;			/* hash key */
	List	   *values;			/* Datum *, equal hashes */
} FoundValues;

static uint32
group_set_hash(GroupSet *set, Datum value)
{
	return DatumGetUInt32(FunctionCall1Coll(&set->hash, set->collation, value));
}

static void
group_set_note(GroupSet *set, Datum value)
{
	MemoryContext old = MemoryContextSwitchTo(set->cxt);
	uint32		hash = group_set_hash(set, value);
	bool		found;
	FoundValues *entry = hash_search(set->found, &hash, HASH_ENTER, &found);
	Datum	   *copy = palloc(sizeof(Datum));

	if (!found)
		entry->values = NIL;
	*copy = datumCopy(value, set->typbyval, set->typlen);
	entry->values = lappend(entry->values, copy);
	MemoryContextSwitchTo(old);
}

static bool
group_set_returned(GroupSet *set, Datum value)
{
	uint32		hash = group_set_hash(set, value);
	FoundValues *entry = hash_search(set->found, &hash, HASH_FIND, NULL);
	ListCell   *lc;

	if (entry == NULL)
		return false;
	foreach(lc, entry->values)
	{
		if (DatumGetBool(FunctionCall2Coll(&set->eq, set->collation,
										   *(Datum *) lfirst(lc), value)))
			return true;
	}
	return false;
}

static bool
group_receive(TupleTableSlot *slot, DestReceiver *self)
{
	GroupReceiver *receiver = (GroupReceiver *) self;

	slot_getallattrs(slot);

	/*
	 * A group that fails HAVING keeps the row written earlier; in retract
	 * mode it is as if it had no rows: its row is deleted.
	 */
	if (receiver->has_having &&
		(slot->tts_isnull[receiver->ncolumns] ||
		 !DatumGetBool(slot->tts_values[receiver->ncolumns])))
	{
		if (!receiver->retract)
		{
			receiver->found = true;
			if (receiver->set != NULL && !slot->tts_isnull[receiver->key_column])
				group_set_note(receiver->set, slot->tts_values[receiver->key_column]);
		}
		return true;
	}

	receiver->found = true;
	if (receiver->set != NULL && !slot->tts_isnull[receiver->key_column])
		group_set_note(receiver->set, slot->tts_values[receiver->key_column]);

	/* a group of a set: its key is in the row */
	if (receiver->set != NULL)
		apply_error_row(slot->tts_values, slot->tts_isnull, &receiver->key_column);
	writer_upsert(receiver->writer, slot->tts_values, slot->tts_isnull);
	apply_error_row_done();
	return true;
}

/* Forget the groups noted so far: a new, empty found table. */
static void
group_set_forget(GroupSet *set)
{
	HASHCTL		hctl;

	MemoryContextReset(set->cxt);
	hctl.keysize = sizeof(uint32);
	hctl.entrysize = sizeof(FoundValues);
	hctl.hcxt = set->cxt;
	set->found = hash_create("delta_join groups returned", GROUP_SET_SIZE, &hctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* The group query for one pattern of NULL key columns */
typedef struct GroupPlan
{
	Bitmapset  *nulls;
	GroupQuery *gq;
} GroupPlan;

static GroupPlan *
group_plan_for(DeltaPlan *plan, Oid target, List **plans, DirtyKey *key, int nkeys)
{
	Bitmapset  *nulls = NULL;
	GroupPlan  *gp;
	ListCell   *lc;

	for (int k = 0; k < nkeys; k++)
		if (key->isnull[k])
			nulls = bms_add_member(nulls, k);
	foreach(lc, *plans)
	{
		gp = lfirst(lc);
		if (bms_equal(gp->nulls, nulls))
			return gp;
	}
	gp = palloc(sizeof(GroupPlan));
	gp->nulls = nulls;
	gp->gq = recompute_prepare_groups(plan, target, nulls, false);
	*plans = lappend(*plans, gp);
	return gp;
}

/* Delete the target row of a group that has no rows left (-D). */
static void
delete_group(DeltaPlan *plan, TargetWriter *writer, DirtyKey *key, int nkeys,
			 const int *key_output)
{
	Datum	   *values = palloc0(sizeof(Datum) * plan->ncolumns);
	bool	   *isnull = palloc(sizeof(bool) * plan->ncolumns);

	memset(isnull, true, sizeof(bool) * plan->ncolumns);
	for (int k = 0; k < nkeys; k++)
	{
		values[key_output[k]] = key->values[k];
		isnull[key_output[k]] = key->isnull[k];
	}
	writer_delete(writer, values, isnull);
	pfree(values);
	pfree(isnull);
}

/*
 * Recompute one group (its key values in group-clause order) and write the
 * result: upsert, or delete when the group has no rows left.
 */
static void
recompute_group(DeltaPlan *plan, GroupPlan *gp, int nkeys,
				const int *key_output, DirtyKey *key, GroupReceiver *receiver)
{
	receiver->found = false;
	recompute_run_groups(gp->gq, key->values, key->isnull, (DestReceiver *) receiver);
	if (!receiver->found)
		delete_group(plan, receiver->writer, key, nkeys, key_output);
}

/*
 * After a TRUNCATE of the source every group in the target must be
 * recomputed (and, unless rows came back, deleted): their keys, read from
 * the target.
 */
typedef struct TargetGroups
{
	int			nkeys;
	const int  *key_output;
	List	   *keys;			/* DirtyKey * */
} TargetGroups;

static void
add_target_group(TargetWriter *writer, TupleTableSlot *slot, void *arg)
{
	TargetGroups *tg = (TargetGroups *) arg;
	DirtyKey   *key = palloc(sizeof(DirtyKey));

	slot_getallattrs(slot);
	key->values = palloc(sizeof(Datum) * tg->nkeys);
	key->isnull = palloc(sizeof(bool) * tg->nkeys);
	for (int k = 0; k < tg->nkeys; k++)
	{
		int			att = writer->attnums[tg->key_output[k]] - 1;
		Form_pg_attribute attr = TupleDescAttr(slot->tts_tupleDescriptor, att);

		key->isnull[k] = slot->tts_isnull[att];
		key->values[k] = key->isnull[k] ? (Datum) 0 :
			datumCopy(slot->tts_values[att], attr->attbyval, attr->attlen);
	}
	tg->keys = lappend(tg->keys, key);
}

static List *
target_groups(TargetWriter *writer, int nkeys, const int *key_output)
{
	TargetGroups tg = {nkeys, key_output, NIL};

	writer_scan_rows(writer, add_target_group, &tg);
	return tg.keys;
}

/*
 * The set path, when the group key is one column whose equality has a hash
 * function and whose type has an array type; NULL otherwise.
 */
static GroupSet *
group_set_begin(DeltaPlan *plan, Oid target)
{
	SortGroupClause *sgc;
	TargetEntry *tle;
	GroupSet   *set;
	Oid			lefttype;
	Oid			hashproc;

	if (list_length(plan->query->groupClause) != 1)
		return NULL;
	sgc = linitial(plan->query->groupClause);
	tle = get_sortgroupclause_tle(sgc, plan->query->targetList);

	set = palloc0(sizeof(GroupSet));
	op_input_types(sgc->eqop, &lefttype, &set->elemtype);
	set->arraytype = get_array_type(set->elemtype);
	if (!OidIsValid(set->arraytype) ||
		lefttype != set->elemtype ||
		!get_op_hash_functions(sgc->eqop, &hashproc, NULL))
		return NULL;

	get_typlenbyvalalign(set->elemtype, &set->typlen, &set->typbyval, &set->typalign);
	set->collation = exprCollation((Node *) tle->expr);
	fmgr_info(hashproc, &set->hash);
	fmgr_info(get_opcode(sgc->eqop), &set->eq);
	set->gq = recompute_prepare_groups(plan, target, NULL, true);
	set->cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join group set",
									 ALLOCSET_DEFAULT_SIZES);
	group_set_forget(set);
	return set;
}

/*
 * Recompute up to GROUP_SET_SIZE groups (non-NULL keys) in one execution;
 * delete those that no longer have rows.
 */
static void
recompute_group_set(DeltaPlan *plan, GroupSet *set, DirtyKey **keys, int nkeys,
					int key_output, GroupReceiver *receiver)
{
	Datum	   *elems = palloc(sizeof(Datum) * nkeys);
	Datum		array;
	bool		array_isnull = false;

	for (int i = 0; i < nkeys; i++)
		elems[i] = keys[i]->values[0];
	array = PointerGetDatum(construct_array(elems, nkeys, set->elemtype, set->typlen,
											set->typbyval, set->typalign));

	receiver->set = set;
	receiver->key_column = key_output;
	recompute_run_groups(set->gq, &array, &array_isnull, (DestReceiver *) receiver);
	receiver->set = NULL;

	for (int i = 0; i < nkeys; i++)
	{
		if (group_set_returned(set, keys[i]->values[0]))
			continue;
		apply_error_key(linitial(plan->sources), keys[i]);
		delete_group(plan, receiver->writer, keys[i], 1, &key_output);
	}
	group_set_forget(set);
	pfree(elems);
}

void
apply_aggregate(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
				ApplyCounts *counts)
{
	DeltaSource *src = linitial(plan->sources);
	int			nkeys = src->key_natts;
	int		   *key_output = palloc(sizeof(int) * nkeys);
	GroupReceiver receiver;
	List	   *plans = NIL;
	GroupSet   *set;
	DirtyKey  **chunk;
	int			nchunk = 0;
	ListCell   *lc;

	/* where each group key column (group-clause order) is in the output */
	for (int k = 0; k < nkeys; k++)
	{
		key_output[k] = -1;
		for (int c = 0; c < plan->key_ncolumns; c++)
		{
			int			col = plan->key_columns[c];
			int			i = 0;
			ListCell   *lc2;

			foreach(lc2, plan->query->targetList)
			{
				TargetEntry *tle = lfirst(lc2);

				if (tle->resjunk)
					continue;
				if (i++ == col && IsA(tle->expr, Var) &&
					((Var *) tle->expr)->varattno == src->key_attnums[k])
					key_output[k] = col;
			}
		}
		if (key_output[k] < 0)
			elog(ERROR, "group key column %d is not in the output", k + 1);
	}

	memset(&receiver, 0, sizeof(receiver));
	recompute_receiver_init(&receiver.pub, group_receive);
	receiver.writer = writer;
	receiver.ncolumns = plan->ncolumns;
	receiver.has_having = (plan->query->havingQual != NULL);
	receiver.retract = plan->options.retract;

	set = group_set_begin(plan, RelationGetRelid(writer->rel));
	chunk = palloc(sizeof(DirtyKey *) * GROUP_SET_SIZE);

	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		List	   *keys = sb->keys;
		ListCell   *lc2;

		if (sb->truncated)
			keys = list_concat(target_groups(writer, nkeys, key_output), keys);
		foreach(lc2, keys)
		{
			DirtyKey   *key = lfirst(lc2);

			counts->keys_applied++;
			if (set != NULL && !key->isnull[0])
			{
				/* a NULL key needs IS NULL: it takes the one-group path */
				chunk[nchunk++] = key;
				if (nchunk == GROUP_SET_SIZE)
				{
					counts->lookups++;
					apply_error_keys(src, chunk[0], nchunk);
					recompute_group_set(plan, set, chunk, nchunk, key_output[0], &receiver);
					nchunk = 0;
				}
				continue;
			}
			counts->lookups++;
			apply_error_key(src, key);
			recompute_group(plan, group_plan_for(plan, RelationGetRelid(writer->rel), &plans, key, nkeys), nkeys,
							key_output, key, &receiver);
		}
	}
	if (nchunk > 0)
	{
		counts->lookups++;
		apply_error_keys(src, chunk[0], nchunk);
		recompute_group_set(plan, set, chunk, nchunk, key_output[0], &receiver);
	}
	apply_error_clear();
}
