/*-------------------------------------------------------------------------
 *
 * apply_join.c
 *	  Delta join: for each dirty primary key of a source, take its row, look
 *	  up the other sources through index prefixes, and upsert the joined
 *	  rows into the target.
 *
 * No join state is kept: every result row is recomputed from the source
 * rows, so applying a key twice gives the same target (DESIGN.md §2).  The
 * dirty key's own row is the one its last change in the batch left, when
 * decoding kept it (batch.h), or else the row fetched by the key; the other
 * sources' rows are always looked up as they are now.  Batches are applied
 * in order (keys spilled to disk first, with their rows, then those in
 * memory), so a key's row as of its last change is applied last.  Keys
 * applied out of order -- those of a deferred view, or sent to a helper --
 * come without their rows and are fetched.  A dirty key whose row is gone
 * produces nothing; its earlier result rows stay (residual rows of the
 * upsert semantics) -- unless the view is in retract mode: then the target
 * rows holding the key (its slice) that the walk does not produce again
 * are deleted.
 *
 * The rows of all sources of one join are laid side by side in one "wide"
 * virtual slot: source s occupies attributes offset[s] + 1 ... offset[s] +
 * natts(s).  The query's conditions and select list are rewritten to read
 * that slot, then compiled once per batch with the executor's expression
 * machinery, so every type, operator, collation and NULL behaves exactly as
 * in the query.
 *
 * Memory: batch-lifetime state in the caller's context; per-row work in the
 * expression context's per-tuple memory, reset after each result row.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_am.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_opfamily.h"
#include "executor/executor.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/lookup.h"
#include "apply/lookup_cache.h"
#include "apply/target_shape.h"

/* The walk of one driving source, with its scans opened. */
typedef struct WalkScans
{
	LookupScan *fetch;			/* the driver, by primary key */
	TupleTableSlot *row_slot;	/* the driver's decoded rows, or NULL: they
								 * are not readable as its rows now */
	int			nlookups;
	DeltaLookup **lookups;
	LookupScan **scans;
	LookupCache **caches;		/* per lookup, or NULL: not cached */
	TupleTableSlot **cache_slots;	/* per cached lookup: its rows stored in */
} WalkScans;

/*
 * The lookup cache of a source, index, bound columns and types of the
 * values bound (DeltaPlan.caches)
 */
typedef struct PlanCache
{
	int			source;
	Oid			index;
	int			nkeys;
	Oid			types[INDEX_MAX_KEYS];	/* of the values looked up */
	LookupCache *cache;
} PlanCache;

typedef struct JoinApply
{
	DeltaPlan  *plan;
	int		   *offset;			/* per source: attributes before it */
	TupleTableSlot *wide;
	ExprContext *econtext;
	ExprState  *qual;
	ExprState **columns;		/* per output column */
	Datum	   *values;
	bool	   *isnull;
	TargetWriter *writer;
	ApplyCounts *counts;
	int64		emitted;		/* rows written so far */
} JoinApply;

typedef struct RemapContext
{
	DeltaPlan  *plan;
	int		   *offset;
} RemapContext;

/* Point every Var of the query at its place in the wide slot. */
static Node *
remap_vars_mutator(Node *node, RemapContext *context)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) copyObject(node);
		ListCell   *lc;

		foreach(lc, context->plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (src->rtindex == (int) var->varno)
			{
				var->varattno += context->offset[foreach_current_index(lc)];
				var->varno = 1;
				return (Node *) var;
			}
		}
		elog(ERROR, "variable of range-table entry %d is not a source", var->varno);
	}
	return expression_tree_mutator(node, remap_vars_mutator, (void *) context);
}

static ExprState *
compile_expression(JoinApply *ja, Node *node)
{
	RemapContext context = {ja->plan, ja->offset};

	node = remap_vars_mutator(node, &context);
	return ExecInitExpr(expression_planner((Expr *) node), NULL);
}

static void
join_apply_init(JoinApply *ja, DeltaPlan *plan, TargetWriter *writer)
{
	TupleDesc	desc;
	int			natts = 0;
	int			col = 0;
	ListCell   *lc;
	RemapContext context;

	ja->plan = plan;
	ja->writer = writer;
	ja->offset = palloc(sizeof(int) * list_length(plan->sources));
	foreach(lc, plan->sources)
	{
		ja->offset[foreach_current_index(lc)] = natts;
		natts += ((DeltaSource *) lfirst(lc))->natts;
	}

	/* the wide row type: every source's columns, side by side */
	desc = CreateTemplateTupleDesc(natts);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		Relation	rel = RelationIdGetRelation(src->relid);

		for (int i = 0; i < src->natts; i++)
			TupleDescCopyEntry(desc, ja->offset[foreach_current_index(lc)] + i + 1,
							   RelationGetDescr(rel), i + 1);
		RelationClose(rel);
	}
	ja->wide = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);

	ja->econtext = CreateStandaloneExprContext();
	context.plan = plan;
	context.offset = ja->offset;
	ja->qual = ExecInitQual((List *) expression_planner((Expr *) remap_vars_mutator((Node *) plan->quals,
																				   &context)),
							NULL);
	ja->columns = palloc(sizeof(ExprState *) * plan->ncolumns);
	foreach(lc, target_coerced_outputs(RelationGetRelid(writer->rel), plan, plan->query))
		ja->columns[col++] = compile_expression(ja, lfirst(lc));
	ja->values = palloc(sizeof(Datum) * plan->ncolumns);
	ja->isnull = palloc(sizeof(bool) * plan->ncolumns);
}

/* Copy a source row into its place in the wide slot. */
static void
store_source(JoinApply *ja, int source, TupleTableSlot *slot)
{
	int			natts = ((DeltaSource *) list_nth(ja->plan->sources, source))->natts;

	slot_getallattrs(slot);
	memcpy(ja->wide->tts_values + ja->offset[source], slot->tts_values, sizeof(Datum) * natts);
	memcpy(ja->wide->tts_isnull + ja->offset[source], slot->tts_isnull, sizeof(bool) * natts);
}

/* All sources are bound: filter, project and upsert one joined row. */
static void
emit_row(JoinApply *ja)
{
	ExprContext *econtext = ja->econtext;

	ExecClearTuple(ja->wide);
	ExecStoreVirtualTuple(ja->wide);
	econtext->ecxt_scantuple = ja->wide;

	if (ExecQual(ja->qual, econtext))
	{
		for (int i = 0; i < ja->plan->ncolumns; i++)
			ja->values[i] = ExecEvalExprSwitchContext(ja->columns[i], econtext,
													  &ja->isnull[i]);
		writer_upsert(ja->writer, ja->values, ja->isnull);
		ja->emitted++;
	}
	ResetExprContext(econtext);
}

/* Look up the sources of the walk from `level` on, then emit. */
static void
walk_from(JoinApply *ja, WalkScans *ws, int level)
{
	DeltaLookup *lookup;
	LookupScan *scan;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	TupleTableSlot *slot;
	List	   *rows = NIL;

	if (level == ws->nlookups)
	{
		emit_row(ja);
		return;
	}

	lookup = ws->lookups[level];
	scan = ws->scans[level];
	for (int k = 0; k < lookup->nkeys; k++)
	{
		int			att = ja->offset[lookup->keys[k].from_source] + lookup->keys[k].from_attno - 1;

		values[k] = ja->wide->tts_values[att];
		isnull[k] = ja->wide->tts_isnull[att];
	}
	if (ws->caches[level] != NULL)
	{
		ListCell   *lc;

		for (int k = 0; k < lookup->nkeys; k++)
		{
			if (isnull[k])
				return;			/* equality never holds */
		}
		if (lookup_cache_get(ws->caches[level], values, &rows))
		{
			ja->counts->cache_hits++;
			foreach(lc, rows)
			{
				ExecStoreHeapTuple(lfirst(lc), ws->cache_slots[level], false);
				store_source(ja, lookup->source, ws->cache_slots[level]);
				walk_from(ja, ws, level + 1);
			}
			return;
		}
	}
	if (!lookup_rescan(scan, values, isnull))
		return;
	while ((slot = lookup_next(scan)) != NULL)
	{
		if (ws->caches[level] != NULL)
			rows = lappend(rows, lookup_cache_copy_row(ws->caches[level], slot));
		store_source(ja, lookup->source, slot);
		walk_from(ja, ws, level + 1);
	}
	if (ws->caches[level] != NULL)
		lookup_cache_put(ws->caches[level], values, rows);
}

/*
 * The lookup cache of a lookup, kept with the plan (in its memory), or
 * NULL when its source is not cached: the cache is off for it, or it is
 * lookup-only (its changes are not captured, so nothing would empty it).
 * Lookups of one source through one index share a cache only when they
 * bind values of the same types: walks from different sources may bind
 * one index column with values of different types (a text column looked
 * up by a text and by a name, a date by a date and by a timestamp), whose
 * images the cache could neither read nor tell apart.
 */
static LookupCache *
plan_cache(DeltaPlan *plan, DeltaLookup *lookup)
{
	DeltaSource *src = list_nth(plan->sources, lookup->source);
	int			capacity;
	int16		typlen[INDEX_MAX_KEYS];
	bool		typbyval[INDEX_MAX_KEYS];
	PlanCache  *pc;
	MemoryContext plan_cxt = GetMemoryChunkContext(plan);
	MemoryContext oldcxt;
	ListCell   *lc;

	capacity = src->cache_size >= 0 ? src->cache_size :
		lookup->source == 0 ? plan->options.left_cache_size : plan->options.right_cache_size;
	if (!src->cache_enabled || src->lookup_only || capacity <= 0)
		return NULL;
	foreach(lc, plan->caches)
	{
		bool		same_types = true;

		pc = lfirst(lc);
		for (int k = 0; k < lookup->nkeys && k < pc->nkeys; k++)
			same_types &= (pc->types[k] == lookup->keys[k].from_type);
		if (pc->source == lookup->source && pc->index == lookup->index &&
			pc->nkeys == lookup->nkeys && same_types)
			return pc->cache;
	}
	for (int k = 0; k < lookup->nkeys; k++)
		get_typlenbyval(lookup->keys[k].from_type, &typlen[k], &typbyval[k]);
	oldcxt = MemoryContextSwitchTo(plan_cxt);
	pc = palloc(sizeof(PlanCache));
	pc->source = lookup->source;
	pc->index = lookup->index;
	pc->nkeys = lookup->nkeys;
	for (int k = 0; k < lookup->nkeys; k++)
		pc->types[k] = lookup->keys[k].from_type;
	pc->cache = lookup_cache_create(plan_cxt, capacity, lookup->nkeys, typlen, typbyval);
	plan->caches = lappend(plan->caches, pc);
	MemoryContextSwitchTo(oldcxt);
	return pc->cache;
}

/*
 * Empty the caches of the sources that changed in the batch, or all of them
 * when the batch says they may be older still.
 */
static void
reset_changed_caches(DeltaPlan *plan, ViewBatch *batch)
{
	ListCell   *lc;

	foreach(lc, plan->caches)
	{
		PlanCache  *pc = lfirst(lc);
		DeltaSource *src = list_nth(plan->sources, pc->source);
		ListCell   *lc2;

		if (batch->caches_stale)
		{
			lookup_cache_reset(pc->cache);
			continue;
		}
		foreach(lc2, batch->sources)
		{
			if (((SourceBatch *) lfirst(lc2))->ordinal == src->ordinal)
				lookup_cache_reset(pc->cache);
		}
	}
}

/*
 * Empty every lookup cache of the plan and of its branches: its work is a
 * recompute of the whole (retry.c dropped the keys it waited with), so
 * the changes of its sources that the dropped keys stood for empty no
 * cache, and the next batch's lookups would find rows older than them.
 */
void
apply_join_forget_caches(DeltaPlan *plan)
{
	ListCell   *lc;

	foreach(lc, plan->caches)
		lookup_cache_reset(((PlanCache *) lfirst(lc))->cache);
	foreach(lc, plan->branches)
		apply_join_forget_caches(lfirst(lc));
}

/*
 * Are two values of each of the first natts columns of the index equal
 * under its equality exactly when their bytes are?  Dirty keys are told
 * apart by their bytes (batch.c).  Where the index calls different bytes
 * equal -- numeric 1.0 and 1.00, text under a case-insensitive collation
 * -- two dirty keys of a batch may be one row, each with the row as of
 * another change, and only a fetch says which is current.  The btree
 * families of pg_catalog whose equality is that of the bytes (text's with
 * a deterministic collation) say yes; any other says no.
 */
static bool
key_bytes_tell_equality(Relation index, int natts)
{
	static const char *const exact[] = {
		"integer_ops", "oid_ops", "bool_ops", "char_ops", "bytea_ops",
		"datetime_ops", "time_ops", "uuid_ops", "enum_ops", "pg_lsn_ops",
		"text_ops", "text_pattern_ops"
	};

	for (int i = 0; i < natts; i++)
	{
		HeapTuple	tuple;
		Form_pg_opfamily family;
		bool		ok = false;

		tuple = SearchSysCache1(OPFAMILYOID, ObjectIdGetDatum(index->rd_opfamily[i]));
		if (!HeapTupleIsValid(tuple))
			return false;
		family = (Form_pg_opfamily) GETSTRUCT(tuple);
		if (family->opfmethod == BTREE_AM_OID &&
			family->opfnamespace == PG_CATALOG_NAMESPACE)
		{
			for (int f = 0; f < (int) lengthof(exact); f++)
			{
				if (strcmp(NameStr(family->opfname), exact[f]) == 0)
					ok = true;
			}
		}
		ReleaseSysCache(tuple);
		if (ok && (index->rd_opfamily[i] == TEXT_BTREE_FAM_OID ||
				   index->rd_opfamily[i] == TEXT_PATTERN_BTREE_FAM_OID))
			ok = OidIsValid(index->rd_indcollation[i]) &&
				get_collation_isdeterministic(index->rd_indcollation[i]);
		if (!ok)
			return false;
	}
	return true;
}

static WalkScans *
walk_scans_begin(DeltaPlan *plan, DeltaWalk *walk, SourceBatch *sb)
{
	WalkScans  *ws = palloc0(sizeof(WalkScans));
	DeltaSource *driver = list_nth(plan->sources, walk->driver);
	LookupLeaf *plain;
	ListCell   *lc;

	ws->fetch = lookup_begin(driver->relid, driver->pk_index, driver->pk_natts, NULL, NULL,
							 GetActiveSnapshot());
	ws->fetch->match_nulls = driver->key_has_nulls;

	/*
	 * Decoded rows, unless the source has changed its columns since they
	 * were decoded, or its key's bytes do not tell equal keys.
	 */
	plain = ws->fetch->plain;
	if (plain != NULL && RelationGetRelid(plain->heap) == sb->relid &&
		(sb->rowdesc == NULL || row_type_fits(sb->rowdesc, RelationGetDescr(plain->heap))) &&
		key_bytes_tell_equality(plain->index, driver->pk_natts))
		ws->row_slot = MakeSingleTupleTableSlot(RelationGetDescr(plain->heap), &TTSOpsHeapTuple);
	ws->nlookups = list_length(walk->lookups);
	ws->lookups = palloc(sizeof(DeltaLookup *) * Max(ws->nlookups, 1));
	ws->scans = palloc(sizeof(LookupScan *) * Max(ws->nlookups, 1));
	ws->caches = palloc0(sizeof(LookupCache *) * Max(ws->nlookups, 1));
	ws->cache_slots = palloc0(sizeof(TupleTableSlot *) * Max(ws->nlookups, 1));
	foreach(lc, walk->lookups)
	{
		DeltaLookup *lookup = lfirst(lc);
		DeltaSource *src = list_nth(plan->sources, lookup->source);
		Oid			procs[INDEX_MAX_KEYS];
		Oid			subtypes[INDEX_MAX_KEYS];
		int			i = foreach_current_index(lc);

		for (int k = 0; k < lookup->nkeys; k++)
		{
			procs[k] = lookup->keys[k].proc;
			subtypes[k] = lookup->keys[k].from_type;
		}
		ws->lookups[i] = lookup;
		ws->scans[i] = lookup_begin(src->relid, lookup->index, lookup->nkeys, procs,
									subtypes, GetActiveSnapshot());
		ws->caches[i] = plan_cache(plan, lookup);
		if (ws->caches[i] != NULL)
			ws->cache_slots[i] = MakeSingleTupleTableSlot(ws->scans[i]->rootslot->tts_tupleDescriptor,
														  &TTSOpsHeapTuple);
	}
	return ws;
}

static int64
walk_scans_end(WalkScans *ws)
{
	int64		lookups = ws->fetch->count;

	lookup_end(ws->fetch);
	if (ws->row_slot != NULL)
		ExecDropSingleTupleTableSlot(ws->row_slot);
	for (int i = 0; i < ws->nlookups; i++)
	{
		lookups += ws->scans[i]->count;
		lookup_end(ws->scans[i]);
		if (ws->cache_slots[i] != NULL)
			ExecDropSingleTupleTableSlot(ws->cache_slots[i]);
	}
	return lookups;
}

/* Are the output columns of the source's key exactly the target's key? */
static bool
key_is_target_key(DeltaPlan *plan, DeltaSource *src)
{
	if (!src->key_in_output || src->key_natts != plan->key_ncolumns)
		return false;
	for (int k = 0; k < src->key_natts; k++)
	{
		bool		found = false;

		for (int c = 0; c < plan->key_ncolumns; c++)
			found |= (plan->key_columns[c] == src->key_output[k]);
		if (!found)
			return false;
	}
	return true;
}

static void
add_region_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	writer_region_add(writer, &row->tts_tid);
}

/* Begin replacing the slices of keys of a source: note their target rows */
static void
note_slices(JoinApply *ja, DeltaSource *src, List *keys)
{
	TargetLookup *tl = writer_lookup_begin(ja->writer, src->key_natts, src->key_output, false);
	ListCell   *lc;

	writer_region_begin(ja->writer);
	foreach(lc, keys)
	{
		DirtyKey   *key = lfirst(lc);

		apply_error_key(src, key);
		for (int k = 0; k < src->key_natts; k++)
		{
			ja->values[src->key_output[k]] = key->values[k];
			ja->isnull[src->key_output[k]] = key->isnull[k];
		}
		writer_lookup_rows(ja->writer, tl, ja->values, ja->isnull, add_region_row, NULL);
	}
	apply_error_clear();
	writer_lookup_end(tl);
}

void
apply_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer, ApplyCounts *counts)
{
	JoinApply	ja;
	ListCell   *lc;

	join_apply_init(&ja, plan, writer);
	ja.counts = counts;
	reset_changed_caches(plan, batch);

	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		DeltaWalk  *walk = NULL;
		DeltaSource *driver;
		bool		key_slice;
		WalkScans  *ws;
		ListCell   *lc2;

		foreach(lc2, plan->walks)
		{
			DeltaWalk  *w = lfirst(lc2);
			DeltaSource *w_driver = list_nth(plan->sources, w->driver);

			if (w_driver->ordinal == sb->ordinal)
				walk = w;
		}
		if (walk == NULL)
			elog(ERROR, "view has no source at position %d", sb->ordinal);

		/*
		 * A truncated source lost all its rows: under upsert semantics that
		 * leaves the target as it is (its rows become residual rows).
		 */
		if (sb->keys == NIL)
			continue;

		/*
		 * Retract mode: the rows of the target that hold one of the keys (the
		 * keys' slices) are replaced by those the walks produce.  When the
		 * driver's key is the target's key, a slice is at most the one row
		 * of that key: it is deleted if the walk writes nothing for it.
		 */
		driver = list_nth(plan->sources, walk->driver);
		key_slice = plan->options.retract && key_is_target_key(plan, driver);
		if (plan->options.retract && !key_slice)
			note_slices(&ja, driver, sb->keys);

		ws = walk_scans_begin(plan, walk, sb);
		foreach(lc2, sb->keys)
		{
			DirtyKey   *key = lfirst(lc2);
			TupleTableSlot *slot;
			int64		emitted = ja.emitted;

			apply_error_key(driver, key);
			counts->keys_applied++;
			if (key->row_known && ws->row_slot != NULL)
			{
				if (key->row != NULL)
				{
					ExecStoreHeapTuple(key->row, ws->row_slot, false);
					store_source(&ja, walk->driver, ws->row_slot);
					walk_from(&ja, ws, 0);
				}
			}
			else if (lookup_rescan(ws->fetch, key->values, key->isnull))
			{
				while ((slot = lookup_next(ws->fetch)) != NULL)
				{
					store_source(&ja, walk->driver, slot);
					walk_from(&ja, ws, 0);
				}
			}
			if (key_slice && ja.emitted == emitted)
			{
				memset(ja.isnull, true, sizeof(bool) * plan->ncolumns);
				for (int k = 0; k < driver->key_natts; k++)
				{
					ja.values[driver->key_output[k]] = key->values[k];
					ja.isnull[driver->key_output[k]] = key->isnull[k];
				}
				writer_delete(writer, ja.values, ja.isnull);
			}
		}
		if (plan->options.retract && !key_slice)
			apply_error_keys(driver, linitial(sb->keys), list_length(sb->keys));
		else
			apply_error_clear();
		counts->lookups += walk_scans_end(ws);
		if (plan->options.retract && !key_slice)
			writer_region_end(writer);
		apply_error_clear();
	}

	FreeExprContext(ja.econtext, true);
	ExecDropSingleTupleTableSlot(ja.wide);
}
