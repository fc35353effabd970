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
 * An aggregate over inner joins (keyed recompute of groups through joins)
 * has no group key among its dirty keys: its dirty keys are images of the
 * changed rows of its sources, and finder queries (recompute.c) find the
 * groups they leave and enter before those are recomputed the same way
 * (apply_aggregate_join).
 *
 * Memory: the plan lives in the caller's context; each group's execution
 * uses the executor's own per-query context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
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
#include "utils/typcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/recompute.h"

static void apply_aggregate_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
								 ApplyCounts *counts);

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
	const int  *key_columns;	/* output columns of the key (set mode) */
} GroupReceiver;

/*
 * Groups recomputed together, a set per execution of the group query in
 * set mode (recompute.c): "key = ANY($1)" for a key of one column, else a
 * join with the keys' unnest -- up to GROUP_SET_SIZE groups an execution,
 * or, when the batch has enough of them for set-based apply, up to
 * RECOMPUTE_SET_CHUNK, planned for those groups.  Dirty keys are told
 * apart by their bytes (batch.c), so numeric 1.0 and 1.00 may be two dirty
 * keys of one group: a join would count each of its rows twice, so the
 * keys of one execution of a join are first made distinct (`asked`) by the
 * key's own hash and equality.  The groups an execution returns are noted
 * in `found`, on the same hash and equality; those it does not return are
 * gone.
 */
#define GROUP_SET_SIZE	512

typedef struct GroupSet
{
	GroupQuery *gq;
	int			nkeys;			/* key columns */
	Oid		   *elemtype;		/* per key column: its type ... */
	int16	   *typlen;
	bool	   *typbyval;
	char	   *typalign;
	Oid		   *collation;
	FmgrInfo   *hash;			/* ... and its equality's hash and equality */
	FmgrInfo   *eq;
	MemoryContext cxt;			/* the tables and their values, reset per set */
	HTAB	   *found;			/* groups returned: uint32 hash -> FoundValues */
	HTAB	   *asked;			/* groups asked for (a key of several columns) */
	Datum	   *row_key;		/* the key of a row returned, gathered */
} GroupSet;

typedef struct FoundValues
{
	uint32		hash;			/* hash key */
	List	   *values;			/* Datum[nkeys] of each group, equal hashes */
} FoundValues;

static uint32
group_set_hash(GroupSet *set, const Datum *values)
{
	uint32		hash = 0;

	for (int k = 0; k < set->nkeys; k++)
		hash = hash_combine(hash, DatumGetUInt32(FunctionCall1Coll(&set->hash[k],
																   set->collation[k],
																   values[k])));
	return hash;
}

/* Whether a group equal to values, of that hash, is in table */
static bool
group_set_lookup(GroupSet *set, HTAB *table, uint32 hash, const Datum *values)
{
	FoundValues *entry = hash_search(table, &hash, HASH_FIND, NULL);
	ListCell   *lc;

	if (entry == NULL)
		return false;
	foreach(lc, entry->values)
	{
		Datum	   *other = lfirst(lc);
		int			k;

		for (k = 0; k < set->nkeys; k++)
			if (!DatumGetBool(FunctionCall2Coll(&set->eq[k], set->collation[k], other[k],
												values[k])))
				break;
		if (k == set->nkeys)
			return true;
	}
	return false;
}

/* Whether a group equal to values is in table */
static bool
group_set_has(GroupSet *set, HTAB *table, const Datum *values)
{
	return group_set_lookup(set, table, group_set_hash(set, values), values);
}

/* Note a group in table; false when an equal one was there already */
static bool
group_set_add(GroupSet *set, HTAB *table, const Datum *values)
{
	uint32		hash = group_set_hash(set, values);
	MemoryContext old;
	bool		found;
	FoundValues *entry;
	Datum	   *copy;

	if (group_set_lookup(set, table, hash, values))
		return false;
	old = MemoryContextSwitchTo(set->cxt);
	entry = hash_search(table, &hash, HASH_ENTER, &found);
	if (!found)
		entry->values = NIL;
	copy = palloc(sizeof(Datum) * set->nkeys);
	for (int k = 0; k < set->nkeys; k++)
		copy[k] = datumCopy(values[k], set->typbyval[k], set->typlen[k]);
	entry->values = lappend(entry->values, copy);
	MemoryContextSwitchTo(old);
	return true;
}

/* Note the group of a row the group query returned */
static void
group_receive_note(GroupReceiver *receiver, TupleTableSlot *slot)
{
	GroupSet   *set = receiver->set;

	for (int k = 0; k < set->nkeys; k++)
	{
		if (slot->tts_isnull[receiver->key_columns[k]])
			return;
		set->row_key[k] = slot->tts_values[receiver->key_columns[k]];
	}
	group_set_add(set, set->found, set->row_key);
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
			if (receiver->set != NULL)
				group_receive_note(receiver, slot);
		}
		return true;
	}

	receiver->found = true;
	if (receiver->set != NULL)
		group_receive_note(receiver, slot);

	/* a group of a set: its key is in the row */
	if (receiver->set != NULL)
		apply_error_row(slot->tts_values, slot->tts_isnull, receiver->key_columns);
	writer_upsert(receiver->writer, slot->tts_values, slot->tts_isnull);
	apply_error_row_done();
	return true;
}

/* Forget the groups noted so far: new, empty tables. */
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
	set->asked = hash_create("delta_join groups asked for", GROUP_SET_SIZE, &hctl,
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
	recompute_run_groups(gp->gq, 1, key->values, key->isnull, (DestReceiver *) receiver);
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
 * The set path, when the equality of each group key column takes two
 * values of its type and has a hash function that can hash every value of
 * the type (not a composite, or an array, holding a type with none: its
 * equality's hash_record, or hash_array, would fail on the first value),
 * and the type has an array type -- and, for a key of several columns, is
 * not composite: the join reads the keys as the columns of unnest(), which
 * spreads a composite value over its fields (and cannot return the
 * pseudo-type record at all); NULL otherwise.
 */
static GroupSet *
group_set_begin(DeltaPlan *plan, Oid target)
{
	GroupSet   *set = palloc0(sizeof(GroupSet));
	int			n = list_length(plan->query->groupClause);
	ListCell   *lc;

	if (n == 0)
		return NULL;
	set->nkeys = n;
	set->elemtype = palloc(sizeof(Oid) * n);
	set->typlen = palloc(sizeof(int16) * n);
	set->typbyval = palloc(sizeof(bool) * n);
	set->typalign = palloc(sizeof(char) * n);
	set->collation = palloc(sizeof(Oid) * n);
	set->hash = palloc(sizeof(FmgrInfo) * n);
	set->eq = palloc(sizeof(FmgrInfo) * n);
	set->row_key = palloc(sizeof(Datum) * n);
	foreach(lc, plan->query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, plan->query->targetList);
		int			k = foreach_current_index(lc);
		Oid			lefttype;
		Oid			hashproc;

		op_input_types(sgc->eqop, &lefttype, &set->elemtype[k]);
		if (lefttype != set->elemtype[k] ||
			!OidIsValid(get_array_type(set->elemtype[k])) ||
			(n > 1 && type_is_rowtype(set->elemtype[k])) ||
			!get_op_hash_functions(sgc->eqop, &hashproc, NULL) ||
			!OidIsValid(lookup_type_cache(set->elemtype[k], TYPECACHE_HASH_PROC)->hash_proc))
			return NULL;
		get_typlenbyvalalign(set->elemtype[k], &set->typlen[k], &set->typbyval[k],
							 &set->typalign[k]);
		set->collation[k] = exprCollation((Node *) tle->expr);
		fmgr_info(hashproc, &set->hash[k]);
		fmgr_info(get_opcode(sgc->eqop), &set->eq[k]);
	}
	set->gq = recompute_prepare_groups(plan, target, NULL, true);
	set->cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join group set",
									 ALLOCSET_DEFAULT_SIZES);
	group_set_forget(set);
	return set;
}

/*
 * Recompute a set of groups (keys with no NULL) in one execution; delete
 * those that no longer have rows.
 */
static void
recompute_group_set(DeltaPlan *plan, GroupSet *set, DirtyKey **keys, int nkeys,
					const int *key_output, GroupReceiver *receiver)
{
	Datum	   *arrays = palloc(sizeof(Datum) * set->nkeys);
	bool	   *no_nulls = palloc0(sizeof(bool) * set->nkeys);
	Datum	  **elems = palloc(sizeof(Datum *) * set->nkeys);
	int			n = 0;

	for (int k = 0; k < set->nkeys; k++)
		elems[k] = palloc(sizeof(Datum) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		/* a join takes each group once (a filter does anyway) */
		if (set->nkeys > 1 && !group_set_add(set, set->asked, keys[i]->values))
			continue;
		for (int k = 0; k < set->nkeys; k++)
			elems[k][n] = keys[i]->values[k];
		n++;
	}
	for (int k = 0; k < set->nkeys; k++)
		arrays[k] = PointerGetDatum(construct_array(elems[k], n, set->elemtype[k],
													set->typlen[k], set->typbyval[k],
													set->typalign[k]));

	receiver->set = set;
	receiver->key_columns = key_output;
	recompute_run_groups(set->gq, n, arrays, no_nulls, (DestReceiver *) receiver);
	receiver->set = NULL;

	for (int i = 0; i < nkeys; i++)
	{
		if (group_set_has(set, set->found, keys[i]->values))
			continue;
		apply_error_key(linitial(plan->sources), keys[i]);
		delete_group(plan, receiver->writer, keys[i], set->nkeys, key_output);
	}
	group_set_forget(set);
	for (int k = 0; k < set->nkeys; k++)
		pfree(elems[k]);
	pfree(elems);
	pfree(arrays);
	pfree(no_nulls);
}

/*
 * Where each group key column (group-clause order) is in the output: a
 * column of the result's key that shows the same column of the same source.
 */
static int *
group_key_output(DeltaPlan *plan)
{
	int			nkeys = list_length(plan->query->groupClause);
	int		   *key_output = palloc(sizeof(int) * Max(nkeys, 1));
	ListCell   *lc;

	foreach(lc, plan->query->groupClause)
	{
		int			k = foreach_current_index(lc);
		Var		   *group = (Var *) get_sortgroupclause_tle(lfirst(lc),
															plan->query->targetList)->expr;

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
				if (i++ == col && IsA(tle->expr, Var) && IsA(group, Var) &&
					((Var *) tle->expr)->varno == group->varno &&
					((Var *) tle->expr)->varattno == group->varattno)
					key_output[k] = col;
			}
		}
		if (key_output[k] < 0)
			elog(ERROR, "group key column %d is not in the output", k + 1);
	}
	return key_output;
}

/* Recomputes dirty groups: the group queries of one batch and their state */
typedef struct GroupRecompute
{
	DeltaPlan  *plan;
	const DeltaSource *src;		/* whose keys are the groups (errors), or
								 * NULL: groups through joins */
	int			nkeys;
	int		   *key_output;
	GroupReceiver receiver;
	List	   *plans;			/* GroupPlan * */
	GroupSet   *set;
	DirtyKey  **pending;		/* the groups of the set path, recomputed by
								 * group_recompute_flush */
	int			npending;
	int			maxpending;
} GroupRecompute;

static void
group_recompute_begin(GroupRecompute *gr, DeltaPlan *plan, TargetWriter *writer,
					  const DeltaSource *src)
{
	memset(gr, 0, sizeof(GroupRecompute));
	gr->plan = plan;
	gr->src = src;
	gr->nkeys = list_length(plan->query->groupClause);
	gr->key_output = group_key_output(plan);
	recompute_receiver_init(&gr->receiver.pub, group_receive);
	gr->receiver.writer = writer;
	gr->receiver.ncolumns = plan->ncolumns;
	gr->receiver.has_having = (plan->query->havingQual != NULL);
	gr->receiver.retract = plan->options.retract;
	gr->set = group_set_begin(plan, RelationGetRelid(writer->rel));
	gr->maxpending = GROUP_SET_SIZE;
	gr->pending = palloc(sizeof(DirtyKey *) * gr->maxpending);
}

/* Say which groups are recomputed, for an error's context */
static void
group_recompute_place(GroupRecompute *gr, DirtyKey *key, int n)
{
	if (gr->src != NULL)
		apply_error_keys(gr->src, key, n);
	else
		apply_error_clear();
}

/*
 * Recompute the groups of the set path, a set per execution: as many as
 * one execution planned for its groups takes when there are enough of
 * them, else GROUP_SET_SIZE (and no more than recompute_chunk_count says
 * their values allow).
 */
static void
group_recompute_flush(GroupRecompute *gr, ApplyCounts *counts)
{
	int			chunk = recompute_chunk_size(gr->npending, GROUP_SET_SIZE);

	for (int start = 0, n; start < gr->npending; start += n)
	{
		n = recompute_chunk_count(gr->pending + start, gr->npending - start, chunk,
								  gr->set->nkeys, gr->set->typlen, gr->set->typbyval);
		counts->lookups++;
		group_recompute_place(gr, gr->pending[start], n);
		recompute_group_set(gr->plan, gr->set, gr->pending + start, n, gr->key_output,
							&gr->receiver);
	}
	gr->npending = 0;
}

static bool
key_has_null(const DirtyKey *key, int nkeys)
{
	for (int k = 0; k < nkeys; k++)
		if (key->isnull[k])
			return true;
	return false;
}

/* Recompute one dirty group (its key values in group-clause order) */
static void
group_recompute_one(GroupRecompute *gr, DirtyKey *key, ApplyCounts *counts)
{
	TargetWriter *writer = gr->receiver.writer;

	counts->keys_applied++;
	if (gr->set != NULL && !key_has_null(key, gr->nkeys))
	{
		/* a NULL key needs IS NULL: it takes the one-group path */
		if (gr->npending == gr->maxpending)
		{
			gr->maxpending *= 2;
			gr->pending = repalloc(gr->pending, sizeof(DirtyKey *) * gr->maxpending);
		}
		gr->pending[gr->npending++] = key;
		return;
	}
	counts->lookups++;
	group_recompute_place(gr, key, 1);
	recompute_group(gr->plan, group_plan_for(gr->plan, RelationGetRelid(writer->rel), &gr->plans,
											 key, gr->nkeys),
					gr->nkeys, gr->key_output, key, &gr->receiver);
}

void
apply_aggregate(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
				ApplyCounts *counts)
{
	DeltaSource *src = linitial(plan->sources);
	GroupRecompute gr;
	ListCell   *lc;

	if (plan->path == DJ_PATH_JOIN_GROUPS)
	{
		apply_aggregate_join(plan, batch, writer, counts);
		return;
	}
	if (batch->next_chunk != NULL)
		elog(ERROR, "keys read a chunk at a time reached an aggregate of one table");

	group_recompute_begin(&gr, plan, writer, src);
	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		List	   *keys = sb->keys;
		ListCell   *lc2;

		if (sb->truncated)
			keys = list_concat(target_groups(writer, gr.nkeys, gr.key_output), keys);
		foreach(lc2, keys)
			group_recompute_one(&gr, lfirst(lc2), counts);
	}
	group_recompute_flush(&gr, counts);
	apply_error_clear();
}

/* ----------------------------------------------------------------
 *		Groups through joins
 * ----------------------------------------------------------------
 */

/* Receives the groups a finder query finds, each once */
typedef struct FinderReceiver
{
	DestReceiver pub;
	KeyShape	shape;			/* of a group key */
	HTAB	   *seen;			/* the groups found so far, by image */
	HTAB	   *pointers;		/* and a long key by its TOAST pointers */
	StringInfoData image;
	MemoryContext cxt;			/* where the groups are kept */
	List	   *groups;			/* DirtyKey * */
} FinderReceiver;

static bool
finder_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FinderReceiver *receiver = (FinderReceiver *) self;
	KeyShape   *shape = &receiver->shape;
	Datum	   *values;
	bool	   *isnull = slot->tts_isnull;
	DirtyKey  **pointer = NULL;
	DirtyKey  **entry;
	MemoryContext old;

	slot_getallattrs(slot);
	values = slot->tts_values;

	/*
	 * A long group key may come as a pointer to one source row's TOAST
	 * data, another row's next time: the group is known by its value, read
	 * once for each pointer met (batch.c, dirty_key_pointer_image).
	 */
	if (dirty_key_is_toasted(shape, values, isnull))
	{
		pointer = key_set_enter_pointers(&receiver->pointers, &receiver->image, shape,
										 values, isnull, receiver->cxt);
		if (pointer != NULL && *pointer != NULL)
			return true;		/* its group is found */
		values = palloc(sizeof(Datum) * shape->nkeys);
		dirty_key_detoast(shape, slot->tts_values, isnull, values);
	}

	old = MemoryContextSwitchTo(receiver->cxt);
	resetStringInfo(&receiver->image);
	dirty_key_image(&receiver->image, shape, values, isnull);
	entry = key_set_enter(receiver->seen, 0, 0, &receiver->image, receiver->cxt);
	if (*entry == NULL)
	{
		*entry = dirty_key_make(shape, values, isnull);
		receiver->groups = lappend(receiver->groups, *entry);
	}
	MemoryContextSwitchTo(old);

	if (pointer != NULL)
		*pointer = *entry;
	if (values != slot->tts_values)
	{
		dirty_key_detoast_free(shape, slot->tts_values, values);
		pfree(values);
	}
	return true;
}

/*
 * Run the finder queries of a batch's images (see apply_aggregate_join),
 * the groups they find going to finder; notes whether a source, or a table
 * of an anti-join, was truncated.
 */
static void
find_groups(DeltaPlan *plan, ViewBatch *batch, FinderReceiver *finder, ApplyCounts *counts,
			bool *truncated, bool *anti_join_truncated)
{
	List	  **keys = palloc0(sizeof(List *) * list_length(plan->sources));
	Bitmapset  *changed = NULL;
	int			nchanged;
	ListCell   *lc;

	/* the images of each source that changed */
	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		ListCell   *lc2;

		*truncated |= sb->truncated;
		foreach(lc2, plan->sources)
		{
			DeltaSource *src = lfirst(lc2);

			if (src->ordinal != sb->ordinal)
				continue;
			*anti_join_truncated |= (sb->truncated && src->anti_join != 0);
			if (sb->keys == NIL)
				continue;
			keys[foreach_current_index(lc2)] = sb->keys;
			changed = bms_add_member(changed, foreach_current_index(lc2));
		}
	}

	/* every non-empty set of the sources that changed, as a bit mask */
	nchanged = bms_num_members(changed);
	for (uint32 mask = 1; mask < ((uint32) 1 << nchanged); mask++)
	{
		Bitmapset  *replaced = NULL;
		int			s = -1;
		int			bit = 0;
		int			anti_join = -1;
		bool		mixed = false;

		while ((s = bms_next_member(changed, s)) >= 0)
		{
			int			side = ((DeltaSource *) list_nth(plan->sources, s))->anti_join;

			if (!(mask & ((uint32) 1 << bit++)))
				continue;
			replaced = bms_add_member(replaced, s);
			mixed |= (anti_join >= 0 && side != anti_join);
			anti_join = side;
		}
		if (mixed)
			continue;
		s = bms_next_member(replaced, -1);
		counts->lookups++;
		apply_error_keys(list_nth(plan->sources, s), linitial(keys[s]), list_length(keys[s]));
		recompute_run_finder(recompute_prepare_finder(plan, replaced), keys,
							 (DestReceiver *) finder);
	}
}

/*
 * Keyed recompute of groups through joins (DJ_PATH_JOIN_GROUPS): the dirty
 * keys of a source are the images of its changed rows, old and new (the
 * columns its key_attnums name: what the group key and the conditions
 * between sources read); the groups they leave and enter are found through
 * the joins, then recomputed as any aggregate's.
 *
 * Why this finds every dirty group.  A group changed only if some
 * combination of joined rows that passed the query's conditions before the
 * batch, or passes them after it, holds a row that changed in the batch.
 * Let R be the sources of its changed rows: their images in the batch hold
 * those rows' versions before the batch and after each change, and the
 * combination's other rows did not change, so they are the current rows.
 * The finder query with the sources of R replaced by their images (and the
 * others read as they are) therefore yields the combination's group.  One
 * finder query runs for each non-empty set R of the sources that changed:
 * replacing one source only would miss, say, an order that moved from
 * merchant 1 to merchant 2 in the batch in which merchant 1 changed its
 * region, when no order of merchant 1 is left to lead from its old row to
 * its old region.  A finder query leaves out the conditions that read
 * columns outside an image, so it may find more groups, never fewer: a
 * clean group recomputed is written as it was.
 *
 * An anti-join (NOT EXISTS) keeps an outer row iff no row of its subquery's
 * tables joins it.  Such a row's group changed only if the row itself
 * changed -- found as above with the sources of the outer query replaced,
 * the anti-join left out (which finds more rows, never fewer) -- or if a
 * combination of the subquery's rows that joins it, before the batch or
 * after it, holds a changed row: the outer row, unchanged, is current, so
 * the finder query with the changed tables of that anti-join replaced by
 * their images, joined to the outer query as a semi-join is, yields it.
 * A set R that mixes the outer query's sources with an anti-join's, or two
 * anti-joins', finds nothing its outer part does not: it is not run.  The
 * group query, the view's query with its NOT EXISTS, recomputes each row
 * exactly.
 *
 * This needs every image of the batch at once: the view's apply takes its
 * keys as one piece (apply_view.c) -- or, when one source changed, a chunk
 * at a time (ViewBatch.next_chunk): R is then that source alone, and the
 * groups found from all its images are those found from each chunk's.  A
 * TRUNCATE leaves no images: every
 * group of the target is recomputed instead, and when it empties a table
 * of an anti-join, every row of the outer query too.
 */
static void
apply_aggregate_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
					 ApplyCounts *counts)
{
	bool		truncated = false;
	bool		anti_join_truncated = false;
	FinderReceiver finder;
	GroupRecompute gr;
	List	   *groups = NIL;
	ListCell   *lc;

	group_recompute_begin(&gr, plan, writer, NULL);

	/* one source changed: its rows added to their groups (apply_additive.c) */
	if (apply_aggregate_additive(plan, batch, writer, counts, &groups))
	{
		foreach(lc, groups)
			group_recompute_one(&gr, lfirst(lc), counts);
		group_recompute_flush(&gr, counts);
		apply_error_clear();
		return;
	}

	memset(&finder, 0, sizeof(finder));
	recompute_receiver_init(&finder.pub, finder_receive);
	finder.cxt = CurrentMemoryContext;
	finder.seen = key_set_create(CurrentMemoryContext);
	initStringInfo(&finder.image);
	finder.shape.nkeys = gr.nkeys;
	finder.shape.typlen = palloc(sizeof(int16) * Max(gr.nkeys, 1));
	finder.shape.typbyval = palloc(sizeof(bool) * Max(gr.nkeys, 1));
	foreach(lc, plan->query->groupClause)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst(lc), plan->query->targetList);

		get_typlenbyval(exprType((Node *) tle->expr),
						&finder.shape.typlen[foreach_current_index(lc)],
						&finder.shape.typbyval[foreach_current_index(lc)]);
	}

	/*
	 * The groups the images lead to.  A batch read a chunk at a time (one
	 * source changed) leads to the groups its chunks lead to, each chunk in
	 * memory while its finder query runs; the groups found are kept.
	 */
	if (batch->next_chunk == NULL)
		find_groups(plan, batch, &finder, counts, &truncated, &anti_join_truncated);
	else
	{
		MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
														"delta_join groups of a chunk",
														ALLOCSET_DEFAULT_SIZES);
		ViewBatch  *chunk;
		int64		nkeys = 0;
		int			nchunks = 0;

		while ((chunk = batch->next_chunk(batch->next_chunk_arg)) != NULL)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(chunk_cxt);

			nkeys += view_batch_nkeys(chunk);
			nchunks++;
			find_groups(plan, chunk, &finder, counts, &truncated, &anti_join_truncated);
			apply_error_clear();	/* (it names keys of the chunk) */
			MemoryContextSwitchTo(oldcxt);
			MemoryContextReset(chunk_cxt);
		}
		MemoryContextDelete(chunk_cxt);
		elog(DEBUG1, "groups through joins: %d groups found from " INT64_FORMAT " changed rows read in %d chunks",
			 list_length(finder.groups), nkeys, nchunks);
	}

	/*
	 * A TRUNCATE of an anti-join's table may let any row of the outer query
	 * in: the finder query that replaces no source finds them all.
	 */
	if (anti_join_truncated)
	{
		counts->lookups++;
		apply_error_clear();
		recompute_run_finder(recompute_prepare_finder(plan, NULL),
							 palloc0(sizeof(List *) * list_length(plan->sources)),
							 (DestReceiver *) &finder);
	}

	groups = finder.groups;
	if (truncated)
		groups = list_concat(target_groups(writer, gr.nkeys, gr.key_output), groups);

	/*
	 * Most of the target dirty: the whole query, and only the difference
	 * written (apply_full, exact under the same snapshot), reads less than
	 * the groups one by one.  Only where the target's rows are the query's
	 * groups: a HAVING or a semi-join keeps fewer rows than the groups a
	 * batch can dirty, and in upsert mode a group that stops passing HAVING
	 * keeps its row, which the difference would delete.
	 */
	if (plan->query->havingQual == NULL && !plan->semi_join && !plan->anti_join &&
		recompute_whole_pays(writer->rel, list_length(groups)))
	{
		counts->keys_applied += list_length(groups);
		apply_full(plan, writer);
		return;
	}
	foreach(lc, groups)
		group_recompute_one(&gr, lfirst(lc), counts);
	group_recompute_flush(&gr, counts);
	apply_error_clear();
}
