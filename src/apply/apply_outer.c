/*-------------------------------------------------------------------------
 *
 * apply_outer.c
 *	  Join views with outer joins: the rows a changed source row is in, and
 *	  in retract mode the rows around them that its change may have made
 *	  wrong, recomputed by the planner (recompute.c) and written to the
 *	  target.
 *
 * Nouns (DESIGN.md §2, "Outer delta joins"):
 *
 *	null-extended	a row in which a source is NULL because the row of a
 *					preserved side had no partner on that side.
 *	present			a source is present in a row when it is not
 *					null-extended there (its key columns are not NULL).
 *	sub-row			of a row r: a row whose present sources are some of
 *					r's, with the same keys -- what r was before a partner
 *					joined it, or becomes when one leaves.
 *	super-row		of a row r: a row of which r is a sub-row.
 *	partner			of a changed row: a row of another source joined with it
 *					in a row of the result, before the change or after.
 *	anchor			one of the sources every row has at least one of
 *					(DeltaPlan.anchors); a row's first present anchor and its
 *					key name the row's slice.  A row and its sub-rows share
 *					their anchors, so replacing the slices of every row a
 *					change touches, before and after it, replaces all the
 *					rows the change can have made wrong.
 *
 * Upsert mode: for each dirty key of a source, the rows that source row is
 * in now are upserted, and writing a row deletes the target's sub-rows and
 * super-rows of it (upsert_row), so a user never sees "order 7, no item"
 * beside "order 7, item 3": when item 3 arrives the null-extended row
 * goes, and when the last item of order 7 goes, the null-extended row that
 * the query now returns replaces the joined one (which upsert mode would
 * otherwise have kept as a residual row).  Other residual rows stay.  A
 * TRUNCATE of a source is a delete of each of its rows: the rows it may be
 * in are found in the target and recomputed from their anchors.
 *
 * Retract mode: for each dirty key of a source that is in every row, the
 * region "rows with that key" is replaced by what the query gives for it:
 * upsert what it gives, delete what it no longer gives.  For a source that
 * can be null-extended, its rows are replaced so, and then, for each of
 * their partners (noted from the target before the batch writes, and
 * from the query), the partner's rows in which that source is absent
 * (replace_by_partners): a preserved row whose last partner went gets its
 * null-extended row back, one that found its first loses it.  With a
 * lookup-only source, whose rows the target cannot find by key, the
 * regions are instead the slices of the anchors of the rows the source row
 * was in and is in now.  A TRUNCATE of a source recomputes the whole
 * result.
 *
 * Memory: the queries, lookups and keys noted live in the caller's (batch)
 * context; the rows of a region query are handled in a context reset after
 * each (the executor's own is gone once the query ends).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/recompute.h"
#include "apply/target_shape.h"

/* rounds of widening the noted slices (close_anchors) */
#define CLOSE_ANCHOR_ROUNDS		4

/*
 * At most this many sources outer joins null-extend for a row's sub-rows
 * to be found by probing the target key (OuterApply.nullable): a probe
 * for each way of null-extending some of them.
 */
#define SUB_ROW_PROBE_SOURCES	3

/*
 * Retract mode, by partners: per source q, the keys of q's rows that the
 * changed rows of a source were joined with, before or now, and the same
 * keys by image (note_key).
 */
typedef struct PartnerNotes
{
	List	  **keys;
	HTAB	  **sets;
} PartnerNotes;

typedef struct OuterApply
{
	MemoryContext cxt;			/* what lives as long as the batch */
	MemoryContext row_cxt;		/* reset after each row of a region query */
	DeltaPlan  *plan;
	TargetWriter *writer;
	int			nsources;
	bool		twins_differ;	/* a null-extended source's key is in the target key */
	int			nnullable;		/* how many sources outer joins null-extend,
								 * when the target key is made of sources'
								 * keys (nullable_sources); else 0 */
	int		   *nullable;		/* ... those sources */
	TargetLookup *key_lookup;	/* target rows by the target key, for them */
	Datum	   *sub_values;		/* scratch: a row's sub-row's key */
	bool	   *sub_isnull;
	Datum		tag;			/* a UNION ALL branch's tag, in the target's type */
	int16		tag_len;
	bool		tag_byval;
	RegionQuery **by_source;	/* rows a source row is in, built on first use */
	RegionQuery **by_anchor;	/* slice queries, per anchor position */
	TargetLookup **lookups;		/* target rows by a source's key */
	bool	   *lookup_tried;	/* ... looked for, where it may be missing */
	TargetLookup **partner_lookups; /* target rows a source row was joined in */
	TargetLookup **slice_lookups;	/* per anchor position: the rows of its
									 * slices, when an index leads with them */
	bool	   *slice_tried;	/* ... looked for */
	KeyShape   *shapes;			/* per source: how its key is stored */
	FmgrInfo  **key_equal;		/* per source and key column: its equality */
	Oid		  **key_collation;	/* ... and the column's collation */
	Datum	   *values;			/* scratch: one output row */
	bool	   *isnull;
	List	  **anchor_keys;	/* per anchor position: DirtyKey * to replace */
	HTAB	  **anchor_sets;	/* ... and the same keys, by image (note_key) */
	int			changed;		/* retract mode, by partners: the source whose
								 * rows changed (replace_by_partners) */
	PartnerNotes **partners;	/* ... per changed source: its partners */
	RegionQuery **absent_queries;	/* per source: its rows with the changed
									 * source null-extended, built on first
									 * use */
	TargetLookup **absent_lookups;	/* ... and the target's, when an index
									 * leads with its key and the changed
									 * source's absent column */
	bool	   *absent_tried;	/* ... looked for */
	StringInfoData image;		/* scratch: one key's image */
} OuterApply;

/* A DestReceiver handing each row of a region query to a function */
typedef struct RowReceiver
{
	DestReceiver pub;
	OuterApply *oa;
	void		(*fn) (OuterApply *oa, Datum *values, bool *isnull);
	const int  *key_columns;	/* where the row's key of the query's source
								 * is, for the error context; or NULL */
} RowReceiver;

/* ----------------------------------------------------------------
 *		Rows, sources and keys
 * ----------------------------------------------------------------
 */

static bool
source_present(OuterApply *oa, int s, const bool *isnull)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);

	/* (a source outer joins cannot null-extend is in every row) */
	return src->key_in_output &&
		(bms_is_empty(src->nulling) || !isnull[src->key_output[0]]);
}

/*
 * Is source s's key compared to tell rows apart: is it one of those the
 * target key is made of?  (The key of a source the join ties to another's
 * column is not.)  Every source's is when the plan names none.
 */
static bool
source_compared(OuterApply *oa, int s)
{
	return bms_is_empty(oa->plan->key_sources) || bms_is_member(s, oa->plan->key_sources);
}

/*
 * Does row a hold the same key as row b for source s (NULLs equal)?  By
 * the key's equality, not its bytes: a row written before its key went
 * from 1.0 to 1.00 (or from 'abc' to 'ABC' under a case-insensitive
 * collation) in the same batch is still a row of that source row.
 */
static bool
same_key(OuterApply *oa, int s, const Datum *a, const bool *a_isnull,
		 const Datum *b, const bool *b_isnull)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);

	for (int k = 0; k < src->key_natts; k++)
	{
		int			col = src->key_output[k];

		if (a_isnull[col] != b_isnull[col] ||
			(!a_isnull[col] &&
			 !DatumGetBool(FunctionCall2Coll(&oa->key_equal[s][k], oa->key_collation[s][k],
											 a[col], b[col]))))
			return false;
	}
	return true;
}

/*
 * Is row `sub` a sub-row of row `row` (fewer present sources, the same
 * keys)?  Only the keys of the sources that make up the result's key are
 * compared: every other source's row follows from theirs (a branch from
 * its account in accounts JOIN branches LEFT JOIN tellers), so a target
 * row that names another branch for the account is no preserved row of
 * its own but what the account joined before it moved, and goes as the
 * account's null extension does.  Sources whose key is not in the output
 * do not tell rows apart and are not compared at all.
 */
static bool
is_sub_row(OuterApply *oa, const Datum *sub_values, const bool *sub_isnull,
		   const Datum *values, const bool *isnull)
{
	bool		fewer = false;

	for (int s = 0; s < oa->nsources; s++)
	{
		bool		in_sub = source_present(oa, s, sub_isnull);
		bool		in_row = source_present(oa, s, isnull);
		bool		compared = source_compared(oa, s);

		if (in_sub && (!in_row ||
					   (compared && !same_key(oa, s, sub_values, sub_isnull, values, isnull))))
			return false;
		fewer |= (in_row && !in_sub);
	}
	return fewer;
}

/* The key of source s in a row, as a DirtyKey (copied) */
static DirtyKey *
row_key(OuterApply *oa, int s, const Datum *values, const bool *isnull)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);
	DirtyKey   *key = palloc0(sizeof(DirtyKey));

	key->values = palloc0(sizeof(Datum) * src->key_natts);
	key->isnull = palloc(sizeof(bool) * src->key_natts);
	for (int k = 0; k < src->key_natts; k++)
	{
		/* (a key whose NULLs are not distinct may hold some) */
		key->isnull[k] = isnull[src->key_output[k]];
		if (!key->isnull[k])
			key->values[k] = datumCopy(values[src->key_output[k]], oa->shapes[s].typbyval[k],
									   oa->shapes[s].typlen[k]);
	}
	return key;
}

/* Row values with source s's key set from a DirtyKey (to look it up) */
static void
key_to_row(OuterApply *oa, int s, DirtyKey *key, Datum *values, bool *isnull)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);

	for (int k = 0; k < src->key_natts; k++)
	{
		values[src->key_output[k]] = key->values[k];
		isnull[src->key_output[k]] = key->isnull[k];
	}
	if (oa->plan->tag_column >= 0)
	{
		values[oa->plan->tag_column] = oa->tag;
		isnull[oa->plan->tag_column] = false;
	}
}

/* Is a target row one of this plan's (not another UNION ALL branch's)? */
static bool
row_is_ours(OuterApply *oa, const Datum *values, const bool *isnull)
{
	int			col = oa->plan->tag_column;

	return col < 0 ||
		(!isnull[col] && datum_image_eq(values[col], oa->tag, oa->tag_byval, oa->tag_len));
}

/*
 * Target rows by source s's key, through an index that leads with its
 * columns: the target has one for each anchor (and for retract mode's
 * sources); for another source, NULL when it has none and missing_ok.
 */
static TargetLookup *
source_lookup(OuterApply *oa, int s, bool missing_ok)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);

	if (oa->lookups[s] == NULL && (!missing_ok || !oa->lookup_tried[s]))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);
		int			cols[INDEX_MAX_KEYS];
		int			ncols = target_region_columns(oa->plan, src, cols);

		oa->lookups[s] = writer_lookup_begin(oa->writer, ncols, cols, missing_ok);
		oa->lookup_tried[s] = true;
		MemoryContextSwitchTo(oldcxt);
	}
	return oa->lookups[s];
}

static TargetLookup *
lookup_for(OuterApply *oa, int s)
{
	return source_lookup(oa, s, false);
}

/*
 * The output column whose NULL says that the source of anchor position j
 * is absent from a row (source_present), or -1 when none does: its key is
 * not in the output, or no outer join null-extends it.
 */
static int
anchor_absent_column(OuterApply *oa, int j)
{
	DeltaSource *src = list_nth(oa->plan->sources, list_nth_int(oa->plan->anchors, j));

	return src->key_in_output && !bms_is_empty(src->nulling) ? src->key_output[0] : -1;
}

/*
 * Call fn for each target row that tl finds where source s has one of
 * keys and the output columns absent[0 .. nabsent - 1] are NULL.
 */
static void
lookup_key_rows(OuterApply *oa, int s, TargetLookup *tl, const int *absent, int nabsent,
				List *keys, TargetRowFn fn, void *arg)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);
	ListCell   *lc;

	foreach(lc, keys)
	{
		apply_error_key(src, lfirst(lc));
		key_to_row(oa, s, lfirst(lc), oa->values, oa->isnull);
		for (int j = 0; j < nabsent; j++)
			oa->isnull[absent[j]] = true;
		writer_lookup_rows(oa->writer, tl, oa->values, oa->isnull, fn, arg);
	}
	apply_error_clear();
}

/* Call fn for each target row where source s has one of keys */
static void
key_rows(OuterApply *oa, int s, List *keys, TargetRowFn fn, void *arg)
{
	lookup_key_rows(oa, s, lookup_for(oa, s), NULL, 0, keys, fn, arg);
}

static void note_target_row(TargetWriter *writer, TupleTableSlot *row, void *arg);
static void note_anchor_key(OuterApply *oa, int i, const Datum *values, const bool *isnull);

/*
 * Note the anchors of the target rows a row of source s, with one of keys,
 * was joined in: found by the output columns equal to its key columns
 * there, or by those of them the output holds (a superset of the rows);
 * when it holds none, or the target lacks their index (a view made before
 * it was made), every row's.
 */
static void
note_partners(OuterApply *oa, int s, List *keys)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);
	int			cols[INDEX_MAX_KEYS];
	int			ncols;
	ListCell   *lc;

	if (bms_is_empty(src->nulling) || oa->plan->options.retract)
		return;
	ncols = target_partner_columns(oa->plan, src, cols);
	if (ncols > 0 && oa->partner_lookups[s] == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);

		oa->partner_lookups[s] = writer_lookup_begin(oa->writer, ncols, cols, true);
		MemoryContextSwitchTo(oldcxt);
	}
	if (oa->partner_lookups[s] == NULL)
	{
		writer_scan_rows(oa->writer, note_target_row, oa);
		return;
	}
	foreach(lc, keys)
	{
		DirtyKey   *key = lfirst(lc);

		apply_error_key(src, key);
		for (int k = 0; k < src->key_natts; k++)
		{
			if (src->partner_output[k] < 0)
				continue;
			oa->values[src->partner_output[k]] = key->values[k];
			oa->isnull[src->partner_output[k]] = key->isnull[k];
		}
		if (oa->plan->tag_column >= 0)
		{
			oa->values[oa->plan->tag_column] = oa->tag;
			oa->isnull[oa->plan->tag_column] = false;
		}
		writer_lookup_rows(oa->writer, oa->partner_lookups[s], oa->values, oa->isnull,
						   note_target_row, oa);
	}
	apply_error_clear();
}

static RegionQuery *
query_for_source(OuterApply *oa, int s)
{
	if (oa->by_source[s] == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);

		oa->by_source[s] = recompute_prepare(oa->plan, RelationGetRelid(oa->writer->rel),
											 s, NULL);
		MemoryContextSwitchTo(oldcxt);
	}
	return oa->by_source[s];
}

/* The slice query of anchor position i: its anchor, earlier anchors NULL */
static RegionQuery *
query_for_anchor(OuterApply *oa, int i)
{
	if (oa->by_anchor[i] == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);
		Bitmapset  *earlier = NULL;

		for (int j = 0; j < i; j++)
			earlier = bms_add_member(earlier, list_nth_int(oa->plan->anchors, j));
		oa->by_anchor[i] = recompute_prepare(oa->plan, RelationGetRelid(oa->writer->rel),
											 list_nth_int(oa->plan->anchors, i), earlier);
		MemoryContextSwitchTo(oldcxt);
	}
	return oa->by_anchor[i];
}

/* ----------------------------------------------------------------
 *		Running region queries
 * ----------------------------------------------------------------
 */

static bool
row_receive(TupleTableSlot *slot, DestReceiver *self)
{
	RowReceiver *receiver = (RowReceiver *) self;

	MemoryContext oldcxt = MemoryContextSwitchTo(receiver->oa->row_cxt);

	slot_getallattrs(slot);
	if (receiver->key_columns != NULL)
		apply_error_row(slot->tts_values, slot->tts_isnull, receiver->key_columns);
	receiver->fn(receiver->oa, slot->tts_values, slot->tts_isnull);
	apply_error_row_done();
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(receiver->oa->row_cxt);
	return true;
}

/* A receiver handing each row to fn */
static void
receiver_init(RowReceiver *receiver, OuterApply *oa,
			  void (*fn) (OuterApply *oa, Datum *values, bool *isnull))
{
	memset(receiver, 0, sizeof(RowReceiver));
	recompute_receiver_init(&receiver->pub, row_receive);
	receiver->oa = oa;
	receiver->fn = fn;
}

/* Run a region query for keys, each row going to fn */
static void
run_region(OuterApply *oa, RegionQuery *rq, List *keys,
		   void (*fn) (OuterApply *oa, Datum *values, bool *isnull))
{
	RowReceiver receiver;

	receiver_init(&receiver, oa, fn);
	if (rq->src->key_in_output)
		receiver.key_columns = rq->src->key_output;
	recompute_run(rq, keys, (DestReceiver *) &receiver);
}

/* ----------------------------------------------------------------
 *		Upsert mode
 * ----------------------------------------------------------------
 */

typedef struct RowMatch
{
	OuterApply *oa;
	Datum	   *values;			/* the row being written */
	bool	   *isnull;
	List	   *twins;			/* ItemPointer *: its sub- and super-rows */
	List	   *supers;			/* Datum * then bool *: the super-rows' values */
} RowMatch;

static void
match_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	RowMatch   *m = (RowMatch *) arg;
	Datum	   *values;
	bool	   *isnull;
	ListCell   *lc;

	/* a row that several of the row's anchors lead to is matched once */
	foreach(lc, m->twins)
	{
		if (ItemPointerEquals(lfirst(lc), &row->tts_tid))
			return;
	}
	values = palloc(sizeof(Datum) * writer->ncolumns);
	isnull = palloc(sizeof(bool) * writer->ncolumns);
	writer_output_values(writer, row, values, isnull);
	if (is_sub_row(m->oa, m->values, m->isnull, values, isnull))
		m->supers = lappend(lappend(m->supers, values), isnull);
	else if (!is_sub_row(m->oa, values, isnull, m->values, m->isnull))
		return;

	{
		ItemPointer tid = palloc(sizeof(ItemPointerData));

		*tid = row->tts_tid;
		m->twins = lappend(m->twins, tid);
	}
}

/*
 * Probe the target key for the sub-rows of a row (values, isnull): the row
 * with some of the sources of oa->nullable present in it null-extended,
 * for each set of them, each row found handed to match_row.
 */
static void
probe_sub_rows(OuterApply *oa, const Datum *values, const bool *isnull, RowMatch *m)
{
	int			present[SUB_ROW_PROBE_SOURCES];
	int			npresent = 0;

	for (int i = 0; i < oa->nnullable; i++)
	{
		if (source_present(oa, oa->nullable[i], isnull))
			present[npresent++] = oa->nullable[i];
	}
	for (int set = 1; set < (1 << npresent); set++)
	{
		memcpy(oa->sub_values, values, sizeof(Datum) * oa->plan->ncolumns);
		memcpy(oa->sub_isnull, isnull, sizeof(bool) * oa->plan->ncolumns);
		for (int i = 0; i < npresent; i++)
		{
			DeltaSource *src = list_nth(oa->plan->sources, present[i]);

			if ((set & (1 << i)) == 0)
				continue;
			for (int k = 0; k < src->key_natts; k++)
				oa->sub_isnull[src->key_output[k]] = true;
		}
		writer_lookup_rows(oa->writer, oa->key_lookup, oa->sub_values, oa->sub_isnull,
						   match_row, m);
	}
}

/*
 * Hand to match_row the target rows that may be super-rows of a row: none
 * when every source of oa->nullable is present in it.  A super-row holds
 * every source present in the row, with the same key where the key is
 * compared (is_sub_row), so the rows of one such source hold them all:
 * those of the last that outer joins null-extend, when the target has an
 * index for its key (a memo's rows, not its desk's), the fewest as a rule.
 * Else the rows of each anchor present in it.
 */
static void
find_super_rows(OuterApply *oa, Datum *values, bool *isnull, RowMatch *m)
{
	bool		absent = false;
	ListCell   *lc;

	for (int i = 0; i < oa->nnullable; i++)
		absent |= !source_present(oa, oa->nullable[i], isnull);
	if (!absent)
		return;
	for (int i = oa->nnullable - 1; i >= 0; i--)
	{
		int			q = oa->nullable[i];
		TargetLookup *tl;

		if (source_present(oa, q, isnull) && source_compared(oa, q) &&
			(tl = source_lookup(oa, q, true)) != NULL)
		{
			writer_lookup_rows(oa->writer, tl, values, isnull, match_row, m);
			return;
		}
	}
	foreach(lc, oa->plan->anchors)
	{
		if (source_present(oa, lfirst_int(lc), isnull))
			writer_lookup_rows(oa->writer, lookup_for(oa, lfirst_int(lc)), values, isnull,
							   match_row, m);
	}
}

/*
 * Write one row of upsert mode, and delete the target's rows that are its
 * sub-rows or super-rows: an outer join's result never holds a row and
 * its null extension together, so those are left from before -- "order 7,
 * no item" written before item 3 arrived, or "order 7, item 3" written
 * before the item went, which the null-extended row now replaces.
 *
 * They are deleted before the row is written.  A sub-row may have the
 * row's own target key (a source whose key the join ties to another's is
 * not in the target key: "order 7, item 3, no stock" and "order 7, no
 * item" differ only in columns outside it); writing first would update
 * that sub-row in place, and its TID, noted before, would then name a row
 * version this transaction already replaced.
 */
static void
upsert_row(OuterApply *oa, Datum *values, bool *isnull)
{
	RowMatch	m = {oa, values, isnull, NIL, NIL};
	ListCell   *lc;

	if (oa->twins_differ && oa->nnullable > 0)
	{
		/*
		 * Its sub-rows by the target key, its super-rows among the rows of
		 * one source, where searching every anchor's rows would read
		 * thousands for each row written (the many-to-many partners of a
		 * FULL JOIN, a desk's memos).
		 */
		probe_sub_rows(oa, values, isnull, &m);
		find_super_rows(oa, values, isnull, &m);
	}
	else if (oa->twins_differ)
	{
		/* the rows that share an anchor with this one */
		foreach(lc, oa->plan->anchors)
		{
			int			s = lfirst_int(lc);

			if (source_present(oa, s, isnull))
				writer_lookup_rows(oa->writer, lookup_for(oa, s), values, isnull,
								   match_row, &m);
		}
	}
	foreach(lc, m.twins)
		writer_delete_row(oa->writer, lfirst(lc));
	writer_upsert(oa->writer, values, isnull);

	/*
	 * A super-row deleted ("order 7, item 3" when item 3 left order 7) may
	 * leave the other rows it joined without partner: their anchors' rows
	 * are recomputed next (apply_outer).
	 */
	for (lc = list_head(m.supers); lc != NULL; lc = lnext(m.supers, lnext(m.supers, lc)))
	{
		Datum	   *super_values = lfirst(lc);
		bool	   *super_isnull = lfirst(lnext(m.supers, lc));
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);

		for (int i = 0; i < list_length(oa->plan->anchors); i++)
		{
			int			a = list_nth_int(oa->plan->anchors, i);

			if (source_present(oa, a, super_isnull) && !source_present(oa, a, isnull))
				note_anchor_key(oa, i, super_values, super_isnull);
		}
		MemoryContextSwitchTo(oldcxt);
	}
}

/*
 * Is a source that outer joins can null-extend absent from the row (or
 * is its presence not told by the output)?
 */
static bool
row_null_extended(OuterApply *oa, const bool *isnull)
{
	for (int s = 0; s < oa->nsources; s++)
	{
		DeltaSource *src = list_nth(oa->plan->sources, s);

		if (!bms_is_empty(src->nulling) && !source_present(oa, s, isnull))
			return true;
	}
	return false;
}

/*
 * Upsert a row of an anchor's slice recomputed because a row it held may
 * have lost a partner (a nullable source's row left, or a super-row was
 * deleted): only the rows in which a source is null-extended can be new.
 * One with every source present is already in the target, or is written
 * by the dirty key of the source row that made it; so a preserved row
 * with ten thousand partners, one of which moved, writes none of them
 * again.  Nor a null-extended row the target already holds unchanged: its
 * sub- and super-rows went when it was written, and searching its
 * anchor's rows for them again would cost, with two nullable sources
 * (desks LEFT JOIN memos LEFT JOIN tags, no memo tagged), a search of the
 * desk's ten thousand rows for each of its ten thousand rows.
 */
static void
upsert_null_extended_row(OuterApply *oa, Datum *values, bool *isnull)
{
	if (row_null_extended(oa, isnull) && !writer_holds(oa->writer, values, isnull))
		upsert_row(oa, values, isnull);
}

/* ----------------------------------------------------------------
 *		Retract mode
 * ----------------------------------------------------------------
 */

/*
 * Note the key of source s in a row, unless it is noted already: in *keys,
 * in the order noted, and in *set by its image (tagged set_tag), so that
 * noting the keys of every row of a large target (a TRUNCATE) takes a
 * probe per row, not a pass over the keys noted so far.
 */
static void
note_key(OuterApply *oa, int s, List **keys, HTAB **set, int set_tag,
		 const Datum *values, const bool *isnull)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);
	Datum		key_values[INDEX_MAX_KEYS];
	bool		key_isnull[INDEX_MAX_KEYS];
	DirtyKey  **noted;
	MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);

	/* the image of a varlena is of its plain bytes, as equal keys have */
	for (int k = 0; k < src->key_natts; k++)
	{
		key_isnull[k] = isnull[src->key_output[k]];
		key_values[k] = values[src->key_output[k]];
	}
	dirty_key_detoast(&oa->shapes[s], key_values, key_isnull, key_values);
	resetStringInfo(&oa->image);
	dirty_key_image(&oa->image, &oa->shapes[s], key_values, key_isnull);

	if (*set == NULL)
		*set = key_set_create(oa->cxt);
	noted = key_set_enter(*set, 0, set_tag, &oa->image, oa->cxt);
	if (*noted == NULL)
	{
		*noted = row_key(oa, s, values, isnull);
		*keys = lappend(*keys, *noted);
	}
	MemoryContextSwitchTo(oldcxt);
}

/* Note the key of anchor position i in a row: its slice, to be replaced */
static void
note_anchor_key(OuterApply *oa, int i, const Datum *values, const bool *isnull)
{
	note_key(oa, list_nth_int(oa->plan->anchors, i), &oa->anchor_keys[i],
			 &oa->anchor_sets[i], i, values, isnull);
}

/* The keys noted for anchor position i, which are no longer noted */
static List *
take_anchor_keys(OuterApply *oa, int i)
{
	List	   *keys = oa->anchor_keys[i];

	oa->anchor_keys[i] = NIL;
	if (oa->anchor_sets[i] != NULL)
		hash_destroy(oa->anchor_sets[i]);
	oa->anchor_sets[i] = NULL;
	return keys;
}

/*
 * Note the slices of the anchors present in a row, to be replaced.  A slice
 * noted twice is replaced once all the same: its rows are found once each
 * (writer_region_add), and an upsert of a row already written finds it
 * unchanged.
 */
static void
note_anchors(OuterApply *oa, Datum *values, bool *isnull)
{
	ListCell   *lc;

	foreach(lc, oa->plan->anchors)
	{
		if (source_present(oa, lfirst_int(lc), isnull))
			note_anchor_key(oa, foreach_current_index(lc), values, isnull);
	}
}

static void
note_target_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	OuterApply *oa = (OuterApply *) arg;

	writer_output_values(writer, row, oa->values, oa->isnull);

	/* (a scan of every row meets the other UNION ALL branches' rows too) */
	if (row_is_ours(oa, oa->values, oa->isnull))
		note_anchors(oa, oa->values, oa->isnull);
}

/* The target rows of a slice: its anchor's key, earlier anchors NULL */
typedef struct SliceScan
{
	OuterApply *oa;
	int			position;		/* of the anchor */
} SliceScan;

/* Is a row of anchor position i's slices (no earlier anchor present)? */
static bool
row_in_slice(OuterApply *oa, int i, const bool *isnull)
{
	for (int j = 0; j < i; j++)
	{
		if (source_present(oa, list_nth_int(oa->plan->anchors, j), isnull))
			return false;
	}
	return true;
}

static void
add_slice_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	SliceScan  *scan = (SliceScan *) arg;

	writer_output_values(writer, row, scan->oa->values, scan->oa->isnull);
	if (row_in_slice(scan->oa, scan->position, scan->oa->isnull))
		writer_region_add(writer, &row->tts_tid);
}

/*
 * The lookup of anchor position i's slices: by the anchor's key and, NULL,
 * the first key column of each earlier anchor that can be absent, when an
 * index of the target leads with those columns.  The target key of a FULL
 * JOIN does: the slice "no order, item 3" is one probe of (order, item),
 * where the rows of item 3 are those of every order it is in.  NULL when
 * no index does: the anchor's rows are then filtered (row_in_slice).
 */
static TargetLookup *
slice_lookup_for(OuterApply *oa, int i)
{
	if (!oa->slice_tried[i])
	{
		DeltaSource *src = list_nth(oa->plan->sources, list_nth_int(oa->plan->anchors, i));
		int			cols[INDEX_MAX_KEYS];
		int			ncols = target_region_columns(oa->plan, src, cols);
		int			nown = ncols;

		for (int j = 0; j < i && ncols < INDEX_MAX_KEYS; j++)
		{
			int			col = anchor_absent_column(oa, j);
			bool		listed = false;

			for (int c = 0; c < ncols; c++)
				listed |= (cols[c] == col);
			if (col >= 0 && !listed)
				cols[ncols++] = col;
		}
		if (ncols > nown)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);

			oa->slice_lookups[i] = writer_lookup_begin(oa->writer, ncols, cols, true);
			MemoryContextSwitchTo(oldcxt);
		}
		oa->slice_tried[i] = true;
	}
	return oa->slice_lookups[i];
}

/* Call fn for each target row of the slices of anchor position i named by keys */
static void
slice_rows(OuterApply *oa, int i, List *keys, TargetRowFn fn, SliceScan *scan)
{
	int			s = list_nth_int(oa->plan->anchors, i);
	TargetLookup *tl = slice_lookup_for(oa, i);

	if (tl != NULL)
	{
		int		   *absent = palloc(sizeof(int) * Max(i, 1));
		int			nabsent = 0;

		/* the earlier anchors that can be absent, searched NULL */
		for (int j = 0; j < i; j++)
		{
			int			col = anchor_absent_column(oa, j);

			if (col >= 0)
				absent[nabsent++] = col;
		}
		lookup_key_rows(oa, s, tl, absent, nabsent, keys, fn, scan);
		pfree(absent);
	}
	else
		key_rows(oa, s, keys, fn, scan);
}

static void
note_slice_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	SliceScan  *scan = (SliceScan *) arg;

	writer_output_values(writer, row, scan->oa->values, scan->oa->isnull);
	if (row_in_slice(scan->oa, scan->position, scan->oa->isnull))
		note_anchors(scan->oa, scan->oa->values, scan->oa->isnull);
}

/*
 * Widen the noted slices to the anchors of their rows, in the target and
 * in the query, until no new anchor comes (or a few rounds): replacing a
 * slice deletes or writes rows whose other anchors may then need their
 * null-extended row back, or no longer.  Only the slice's own rows count
 * -- those of its anchor's key in which no earlier anchor is present --
 * for only they are replaced: a row of an earlier anchor that the key is
 * also in belongs to that anchor's slice, which the change did not touch
 * unless the row holds the changed source row, and then it was noted with
 * it.  So the rows of "order 7" in orders FULL JOIN items do not lead, through
 * the items of order 7, to every other order those items' key is in: with
 * many-to-many keys that widened one changed row to the whole result.
 * Later anchors only: the widening ends.
 */
static void
close_anchors(OuterApply *oa)
{
	int			nanchors = list_length(oa->plan->anchors);
	int		   *done = palloc0(sizeof(int) * Max(nanchors, 1));

	for (int round = 0; round < CLOSE_ANCHOR_ROUNDS; round++)
	{
		bool		grew = false;

		for (int i = 0; i < nanchors; i++)
		{
			List	   *fresh = list_copy_tail(oa->anchor_keys[i], done[i]);
			SliceScan	scan = {oa, i};

			if (fresh == NIL)
				continue;
			grew = true;
			done[i] = list_length(oa->anchor_keys[i]);
			slice_rows(oa, i, fresh, note_slice_row, &scan);
			run_region(oa, query_for_anchor(oa, i), fresh, note_anchors);
		}
		if (!grew)
			break;
	}
}

static void
region_upsert(OuterApply *oa, Datum *values, bool *isnull)
{
	writer_upsert(oa->writer, values, isnull);
}

static void
add_region_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	writer_region_add(writer, &row->tts_tid);
}

/* Replace the rows where source s (in every row) has one of keys. */
static void
replace_source_slices(OuterApply *oa, int s, List *keys)
{
	writer_region_begin(oa->writer);
	key_rows(oa, s, keys, add_region_row, NULL);
	run_region(oa, query_for_source(oa, s), keys, region_upsert);
	if (keys != NIL)
		apply_error_keys(list_nth(oa->plan->sources, s), linitial(keys), list_length(keys));
	writer_region_end(oa->writer);
	apply_error_clear();
}

/* Replace the slices of anchor position i named by keys. */
static void
replace_anchor_slices(OuterApply *oa, int i, List *keys)
{
	int			s = list_nth_int(oa->plan->anchors, i);
	SliceScan	scan = {oa, i};

	writer_region_begin(oa->writer);
	slice_rows(oa, i, keys, add_slice_row, &scan);
	run_region(oa, query_for_anchor(oa, i), keys, region_upsert);
	if (keys != NIL)
		apply_error_keys(list_nth(oa->plan->sources, s), linitial(keys), list_length(keys));
	writer_region_end(oa->writer);
	apply_error_clear();
}

/*
 * Retract mode, by partners.  A changed row of a source that outer joins
 * null-extend changes the rows that hold it, and, among the others, only
 * rows in which its source is absent: a row that holds another row of its
 * source depends on that row, not on this one, but a null-extended row
 * of a preserved row stands for "no partner", which the changed row may
 * have ended or begun.  Such a row holds a row that the changed row was
 * joined with, before or now.  So the rows that hold the changed rows are
 * replaced (as a source in every row replaces its rows), noting the rows
 * of the other sources they were joined with (the partners); then, for
 * each partner, its rows in which the changed source is absent.
 *
 * Where the slices of the first present anchor (replace_anchor_slices)
 * would replace every row of each partner: in l FULL JOIN r ON l.k = r.k,
 * a changed row of r rewrote the rows of each of its l partners, the
 * whole of its key with many-to-many keys, where this replaces its own
 * rows and probes the null-extended row of each partner.
 */

/* Note the partners of the changed source (oa->changed) in a row */
static void
note_row_partners(OuterApply *oa, const Datum *values, const bool *isnull)
{
	PartnerNotes *notes = oa->partners[oa->changed];

	for (int q = 0; q < oa->nsources; q++)
	{
		if (q != oa->changed && source_present(oa, q, isnull))
			note_key(oa, q, &notes->keys[q], &notes->sets[q], q, values, isnull);
	}
}

static void
note_partnered_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	OuterApply *oa = (OuterApply *) arg;

	writer_output_values(writer, row, oa->values, oa->isnull);
	note_row_partners(oa, oa->values, oa->isnull);
}

static void
upsert_partnered_row(OuterApply *oa, Datum *values, bool *isnull)
{
	note_row_partners(oa, values, isnull);
	writer_upsert(oa->writer, values, isnull);
}

/*
 * The region query of source q's rows with the changed source absent, and
 * the target's lookup of them: an index that leads with q's key and the
 * changed source's absent column, searched NULL; NULL when none does (q's
 * rows are then filtered).
 */
static RegionQuery *
absent_query_for(OuterApply *oa, int q)
{
	if (!oa->absent_tried[q])
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(oa->cxt);
		DeltaSource *src = list_nth(oa->plan->sources, q);
		DeltaSource *changed = list_nth(oa->plan->sources, oa->changed);
		int			cols[INDEX_MAX_KEYS];
		int			ncols = target_region_columns(oa->plan, src, cols);

		oa->absent_queries[q] = recompute_prepare(oa->plan, RelationGetRelid(oa->writer->rel),
												  q, bms_make_singleton(oa->changed));
		if (ncols < INDEX_MAX_KEYS)
		{
			cols[ncols++] = changed->key_output[0];
			oa->absent_lookups[q] = writer_lookup_begin(oa->writer, ncols, cols, true);
		}
		oa->absent_tried[q] = true;
		MemoryContextSwitchTo(oldcxt);
	}
	return oa->absent_queries[q];
}

static void
add_absent_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	OuterApply *oa = (OuterApply *) arg;

	writer_output_values(writer, row, oa->values, oa->isnull);
	if (row_is_ours(oa, oa->values, oa->isnull) &&
		!source_present(oa, oa->changed, oa->isnull))
		writer_region_add(writer, &row->tts_tid);
}

/* Replace the rows of source q's keys in which the changed source is absent */
static void
replace_absent_rows(OuterApply *oa, int q, List *keys)
{
	RegionQuery *rq = absent_query_for(oa, q);
	DeltaSource *changed = list_nth(oa->plan->sources, oa->changed);

	writer_region_begin(oa->writer);
	if (oa->absent_lookups[q] == NULL)
		key_rows(oa, q, keys, add_absent_row, oa);
	else
		lookup_key_rows(oa, q, oa->absent_lookups[q], &changed->key_output[0], 1, keys,
						add_absent_row, oa);
	run_region(oa, rq, keys, region_upsert);
	apply_error_keys(list_nth(oa->plan->sources, q), linitial(keys), list_length(keys));
	writer_region_end(oa->writer);
	apply_error_clear();
}

/*
 * Can a changed row of source s be replaced by partners?  Every source's
 * rows must be found by its key in the target (retract mode gives each
 * source but a lookup-only one such an index) and in the query.
 */
static bool
by_partners(OuterApply *oa, int s)
{
	ListCell   *lc;

	if (bms_is_empty(((DeltaSource *) list_nth(oa->plan->sources, s))->nulling))
		return false;
	foreach(lc, oa->plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (src->lookup_only || !src->key_in_output)
			return false;
	}
	return true;
}

/*
 * Note the partners of the rows of source s with keys that the target
 * holds, before the batch writes any row.  Each source's changes are
 * replaced in turn, and those of an earlier one may already have deleted
 * a row that joined a later one's changed row with a partner ("no r, s 3,
 * u 1" when r's rows and u 1 went in one transaction): the later one
 * would not find that partner, whose null-extended row ("no r, s 3, no
 * u") would never come.
 */
static void
note_old_partners(OuterApply *oa, int s, List *keys)
{
	if (oa->partners[s] == NULL)
	{
		oa->partners[s] = palloc(sizeof(PartnerNotes));
		oa->partners[s]->keys = palloc0(sizeof(List *) * oa->nsources);
		oa->partners[s]->sets = palloc0(sizeof(HTAB *) * oa->nsources);
	}
	oa->changed = s;
	key_rows(oa, s, keys, note_partnered_row, oa);
	oa->changed = -1;
}

/*
 * Replace by partners what the rows of source s with keys changed (their
 * partners in the target noted before, note_old_partners: a row found
 * now either was there then or was written by this batch from the
 * query, whose rows of s note theirs below).
 */
static void
replace_by_partners(OuterApply *oa, int s, List *keys)
{
	DeltaSource *src = list_nth(oa->plan->sources, s);
	PartnerNotes *notes = oa->partners[s];

	oa->changed = s;
	for (int q = 0; q < oa->nsources; q++)
	{
		if (oa->absent_lookups[q] != NULL)
			writer_lookup_end(oa->absent_lookups[q]);
		oa->absent_lookups[q] = NULL;
		oa->absent_queries[q] = NULL;
		oa->absent_tried[q] = false;
	}

	writer_region_begin(oa->writer);
	key_rows(oa, s, keys, add_region_row, NULL);
	run_region(oa, query_for_source(oa, s), keys, upsert_partnered_row);
	apply_error_keys(src, linitial(keys), list_length(keys));
	writer_region_end(oa->writer);
	apply_error_clear();

	for (int q = 0; q < oa->nsources; q++)
	{
		if (notes->keys[q] != NIL)
			replace_absent_rows(oa, q, notes->keys[q]);
	}
	oa->changed = -1;
}

/*
 * Upsert mode, source s truncated: note the anchors of the target's rows
 * of this plan that s may be in -- those where it is present, or, when the
 * output does not hold its key (it cannot tell), every row -- as deletes
 * of each of its rows would through their partner columns (note_partners).
 * A source that no outer join null-extends leaves its rows residual, as
 * its deletes do.
 */
typedef struct TruncatedScan
{
	OuterApply *oa;
	int			s;
} TruncatedScan;

static void
note_truncated_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	TruncatedScan *scan = (TruncatedScan *) arg;
	OuterApply *oa = scan->oa;
	DeltaSource *src = list_nth(oa->plan->sources, scan->s);

	writer_output_values(writer, row, oa->values, oa->isnull);
	if (row_is_ours(oa, oa->values, oa->isnull) &&
		(!src->key_in_output || source_present(oa, scan->s, oa->isnull)))
		note_anchors(oa, oa->values, oa->isnull);
}

static void
note_truncated(OuterApply *oa, int s)
{
	TruncatedScan scan = {oa, s};

	if (bms_is_empty(((DeltaSource *) list_nth(oa->plan->sources, s))->nulling))
		return;
	writer_scan_rows(oa->writer, note_truncated_row, &scan);
}

/* A row of this plan's, into the region being replaced */
static void
add_own_row(TargetWriter *writer, TupleTableSlot *row, void *arg)
{
	OuterApply *oa = (OuterApply *) arg;

	writer_output_values(writer, row, oa->values, oa->isnull);
	if (row_is_ours(oa, oa->values, oa->isnull))
		writer_region_add(writer, &row->tts_tid);
}

/* The whole result, recomputed (a source was truncated). */
static void
replace_all(OuterApply *oa)
{
	RowReceiver receiver;

	apply_error_whole();
	writer_region_begin(oa->writer);
	writer_scan_rows(oa->writer, add_own_row, oa);

	receiver_init(&receiver, oa, region_upsert);
	recompute_run_all(oa->plan, RelationGetRelid(oa->writer->rel), (DestReceiver *) &receiver,
					  false);
	writer_region_end(oa->writer);
	apply_error_clear();
}

/* ----------------------------------------------------------------
 *		Entry point
 * ----------------------------------------------------------------
 */

/*
 * The sources of the plan that outer joins null-extend (into nullable, their
 * count returned), if the target key is made of key columns of sources
 * whose keys the output holds (and a UNION ALL branch's tag), and each of
 * them has its key in the output: then a row's sub-rows are that row with
 * some of them null-extended, each found by the target key with their key
 * columns NULL.  Else 0, as for more than SUB_ROW_PROBE_SOURCES of them.
 */
static int
nullable_sources(DeltaPlan *plan, int *nullable)
{
	int			n = 0;
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (bms_is_empty(src->nulling))
			continue;
		if (n == SUB_ROW_PROBE_SOURCES || !src->key_in_output)
			return 0;
		nullable[n++] = foreach_current_index(lc);
	}
	for (int c = 0; c < plan->key_ncolumns; c++)
	{
		int			col = plan->key_columns[c];
		bool		known = (col == plan->tag_column);

		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (!src->key_in_output)
				continue;
			for (int k = 0; k < src->key_natts; k++)
				known |= (src->key_output[k] == col);
		}
		if (!known)
			return 0;
	}
	return n;
}

static void
outer_apply_init(OuterApply *oa, DeltaPlan *plan, TargetWriter *writer)
{
	ListCell   *lc;

	memset(oa, 0, sizeof(OuterApply));
	oa->cxt = CurrentMemoryContext;
	oa->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join region row",
										ALLOCSET_DEFAULT_SIZES);
	oa->plan = plan;
	oa->writer = writer;
	oa->nsources = list_length(plan->sources);
	oa->by_source = palloc0(sizeof(RegionQuery *) * oa->nsources);
	oa->by_anchor = palloc0(sizeof(RegionQuery *) * Max(list_length(plan->anchors), 1));
	oa->lookups = palloc0(sizeof(TargetLookup *) * oa->nsources);
	oa->lookup_tried = palloc0(sizeof(bool) * oa->nsources);
	oa->partner_lookups = palloc0(sizeof(TargetLookup *) * oa->nsources);
	oa->shapes = palloc(sizeof(KeyShape) * oa->nsources);
	oa->key_equal = palloc(sizeof(FmgrInfo *) * oa->nsources);
	oa->key_collation = palloc(sizeof(Oid *) * oa->nsources);
	oa->values = palloc(sizeof(Datum) * plan->ncolumns);
	oa->isnull = palloc(sizeof(bool) * plan->ncolumns);
	oa->anchor_keys = palloc0(sizeof(List *) * Max(list_length(plan->anchors), 1));
	oa->anchor_sets = palloc0(sizeof(HTAB *) * Max(list_length(plan->anchors), 1));
	oa->slice_lookups = palloc0(sizeof(TargetLookup *) * Max(list_length(plan->anchors), 1));
	oa->slice_tried = palloc0(sizeof(bool) * Max(list_length(plan->anchors), 1));
	oa->changed = -1;
	oa->partners = palloc0(sizeof(PartnerNotes *) * oa->nsources);
	oa->absent_queries = palloc0(sizeof(RegionQuery *) * oa->nsources);
	oa->absent_lookups = palloc0(sizeof(TargetLookup *) * oa->nsources);
	oa->absent_tried = palloc0(sizeof(bool) * oa->nsources);
	initStringInfo(&oa->image);

	if (plan->tag_column >= 0)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(writer->rel),
											  writer->attnums[plan->tag_column] - 1);
		Node	   *tag;

		/* the branch's constant, as its rows store it in the target */
		tag = coerce_to_target_type(NULL, (Node *) plan->tag_const, plan->tag_const->consttype,
									att->atttypid, att->atttypmod,
									COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
		if (tag != NULL)
			tag = eval_const_expressions(NULL, tag);
		if (tag == NULL || !IsA(tag, Const) || ((Const *) tag)->constisnull)
			elog(ERROR, "the tag of a UNION ALL branch does not make a value of column %d of the target",
				 plan->tag_column + 1);
		oa->tag = ((Const *) tag)->constvalue;
		oa->tag_len = att->attlen;
		oa->tag_byval = att->attbyval;
	}

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		int			s = foreach_current_index(lc);

		oa->shapes[s].nkeys = src->key_natts;
		oa->shapes[s].typlen = palloc(sizeof(int16) * Max(src->key_natts, 1));
		oa->shapes[s].typbyval = palloc(sizeof(bool) * Max(src->key_natts, 1));
		oa->key_equal[s] = palloc(sizeof(FmgrInfo) * Max(src->key_natts, 1));
		oa->key_collation[s] = palloc(sizeof(Oid) * Max(src->key_natts, 1));
		for (int k = 0; k < src->key_natts; k++)
		{
			Oid			type;
			int32		typmod;
			TypeCacheEntry *typentry;

			get_atttypetypmodcoll(src->relid, src->key_attnums[k], &type, &typmod,
								  &oa->key_collation[s][k]);
			get_typlenbyval(type, &oa->shapes[s].typlen[k], &oa->shapes[s].typbyval[k]);
			typentry = lookup_type_cache(type, TYPECACHE_EQ_OPR_FINFO);
			if (!OidIsValid(typentry->eq_opr_finfo.fn_oid))
				elog(ERROR, "key column %d of source %u has no equality", k + 1, src->relid);
			fmgr_info_copy(&oa->key_equal[s][k], &typentry->eq_opr_finfo, CurrentMemoryContext);
		}

		/* a null-extended source whose key the target key holds */
		if (!bms_is_empty(src->nulling) && src->key_in_output)
		{
			for (int c = 0; c < plan->key_ncolumns; c++)
				if (plan->key_columns[c] == src->key_output[0])
					oa->twins_differ = true;
		}
	}
	oa->nullable = palloc(sizeof(int) * SUB_ROW_PROBE_SOURCES);
	oa->nnullable = nullable_sources(plan, oa->nullable);
	if (oa->twins_differ && oa->nnullable > 0)
		oa->key_lookup = writer_lookup_begin(writer, plan->key_ncolumns, plan->key_columns, true);
	if (oa->key_lookup == NULL)
		oa->nnullable = 0;
	oa->sub_values = palloc(sizeof(Datum) * plan->ncolumns);
	oa->sub_isnull = palloc(sizeof(bool) * plan->ncolumns);
}

static void
outer_apply_end(OuterApply *oa)
{
	if (oa->key_lookup != NULL)
		writer_lookup_end(oa->key_lookup);
	for (int s = 0; s < oa->nsources; s++)
	{
		if (oa->lookups[s] != NULL)
			writer_lookup_end(oa->lookups[s]);
		if (oa->partner_lookups[s] != NULL)
			writer_lookup_end(oa->partner_lookups[s]);
		if (oa->absent_lookups[s] != NULL)
			writer_lookup_end(oa->absent_lookups[s]);
	}
	for (int i = 0; i < list_length(oa->plan->anchors); i++)
	{
		if (oa->slice_lookups[i] != NULL)
			writer_lookup_end(oa->slice_lookups[i]);
	}
}

/* The index in plan->sources of the source of sb */
static int
plan_source_index(DeltaPlan *plan, SourceBatch *sb)
{
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		if (((DeltaSource *) lfirst(lc))->ordinal == sb->ordinal)
			return foreach_current_index(lc);
	}
	elog(ERROR, "view has no source at position %d", sb->ordinal);
	return -1;					/* keep compiler quiet */
}

void
apply_outer(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer, ApplyCounts *counts)
{
	OuterApply	oa;
	ListCell   *lc;

	outer_apply_init(&oa, plan, writer);

	/* a source truncated: in retract mode the whole result is recomputed, once */
	if (plan->options.retract)
	{
		foreach(lc, batch->sources)
		{
			SourceBatch *sb = lfirst(lc);

			if (sb->truncated)
			{
				replace_all(&oa);
				outer_apply_end(&oa);
				return;
			}
		}
	}

	/* the partners of changed rows, before any row is written */
	if (plan->options.retract)
	{
		foreach(lc, batch->sources)
		{
			SourceBatch *sb = lfirst(lc);
			int			s = plan_source_index(plan, sb);

			if (sb->keys != NIL && by_partners(&oa, s))
				note_old_partners(&oa, s, sb->keys);
		}
	}

	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		int			s = plan_source_index(plan, sb);
		DeltaSource *src = list_nth(plan->sources, s);

		counts->keys_applied += list_length(sb->keys);

		if (!plan->options.retract)
		{
			List	   *keys = sb->keys;

			/*
			 * A truncated source: its rows are gone, as if each had been
			 * deleted (and keys are the rows written since).  The rows an
			 * outer join can null-extend it in are recomputed from their
			 * anchors, as for deleted rows, so preserved rows they were
			 * joined in get their null-extended row back; other rows stay,
			 * residual, as deletes leave them.
			 */
			if (sb->truncated)
				note_truncated(&oa, s);

			/*
			 * The rows a nullable source's row was joined in: their preserved
			 * rows may have lost their last partner, and their null-extended
			 * row must replace the joined one.
			 */
			if (keys != NIL)
			{
				note_partners(&oa, s, keys);
				run_region(&oa, query_for_source(&oa, s), keys, upsert_row);
			}
			for (int round = 0; round < CLOSE_ANCHOR_ROUNDS; round++)
			{
				bool		any = false;

				for (int i = 0; i < list_length(plan->anchors); i++)
				{
					List	   *anchor_keys = take_anchor_keys(&oa, i);

					if (anchor_keys == NIL)
						continue;
					run_region(&oa, query_for_source(&oa, list_nth_int(plan->anchors, i)),
							   anchor_keys, upsert_null_extended_row);
					any = true;
				}
				if (!any)
					break;
			}
			for (int i = 0; i < list_length(plan->anchors); i++)
				(void) take_anchor_keys(&oa, i);
			continue;
		}

		if (bms_is_empty(src->nulling))
		{
			replace_source_slices(&oa, s, sb->keys);
			continue;
		}

		if (sb->keys != NIL && by_partners(&oa, s))
		{
			replace_by_partners(&oa, s, sb->keys);
			continue;
		}

		/* the slices of the rows it was in, and of those it is in now */
		key_rows(&oa, s, sb->keys, note_target_row, &oa);
		run_region(&oa, query_for_source(&oa, s), sb->keys, note_anchors);
		close_anchors(&oa);
		for (int i = 0; i < list_length(plan->anchors); i++)
		{
			List	   *keys = take_anchor_keys(&oa, i);

			if (keys != NIL)
				replace_anchor_slices(&oa, i, keys);
		}
	}

	outer_apply_end(&oa);
}
