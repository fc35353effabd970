/*-------------------------------------------------------------------------
 *
 * apply_full.c
 *	  Full recompute (DESIGN.md §2, "Fallback maintenance"): run the view's
 *	  query again and write only the difference into its target.
 *
 * The target's rows are read once and filed by the hash of their image
 * (each column's value as stored, datum_image_hash); then each row of the
 * query, planned and run here with its output coerced to the target's
 * column types as INSERT would store it, looks for an unmatched target row
 * of the same hash and the same image (datum_image_eq).  A row that finds
 * one is left alone; a target row no query row found is deleted; a query
 * row that found none is inserted, after the deletes (a row whose key
 * stays and whose values changed is deleted, then inserted again: the key
 * is free by then).  This is a multiset difference, right whether or not
 * the result has a key, and it rewrites no unchanged row.  It runs in the
 * apply's transaction, with its one snapshot: readers see the whole old
 * result or the whole new one.
 *
 * Values are compared by image, so a value that only prints otherwise
 * (1.0 against 1.00) is rewritten, and equal rows never are.
 *
 * Memory: about 30 bytes per target row (its place, matched or not, and
 * its hash's entry), and the rows to insert in a tuplestore, which spills
 * to disk beyond work_mem.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/recompute.h"

/* A target row: its place, whether a query row found it, the next of its hash */
typedef struct TargetRow
{
	ItemPointerData tid;
	bool		matched;
	int32		next;			/* index in rows, or -1 */
} TargetRow;

/* The target rows of one image hash: a list through rows */
typedef struct ImageEntry
{
	uint32		hash;
	char		status;			/* simplehash's */
	int32		head;			/* the first row, in rows */
} ImageEntry;

#define SH_PREFIX		images
#define SH_ELEMENT_TYPE	ImageEntry
#define SH_KEY_TYPE		uint32
#define SH_KEY			hash
#define SH_HASH_KEY(tb, key)	(key)	/* (already a hash) */
#define SH_EQUAL(tb, a, b)	((a) == (b))
#define SH_SCOPE		static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

typedef struct FullApply
{
	TargetWriter *writer;
	TupleDesc	desc;			/* the target's */
	int			ncolumns;		/* its columns, dropped ones left out */
	AttrNumber *attnums;
	images_hash *images;
	TargetRow  *rows;
	int32		nrows;
	int32		maxrows;
	TupleTableSlot *found;		/* a target row, fetched to compare */
	MemoryContext row_cxt;		/* reset after each row (detoasted values) */
} FullApply;

/* The hash of a row's image, over the target's columns */
static uint32
row_hash(FullApply *fa, Datum *values, bool *isnull)
{
	uint32		hash = 0;

	for (int c = 0; c < fa->ncolumns; c++)
	{
		Form_pg_attribute att = TupleDescAttr(fa->desc, fa->attnums[c] - 1);
		int			i = fa->attnums[c] - 1;

		hash = hash_combine(hash, isnull[i] ? 0x9e3779b9 :
							datum_image_hash(values[i], att->attbyval, att->attlen));
	}
	return hash;
}

/* (in the row context: detoasting a value allocates) */
static uint32
row_hash_in(FullApply *fa, TupleTableSlot *slot)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(fa->row_cxt);
	uint32		hash = row_hash(fa, slot->tts_values, slot->tts_isnull);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(fa->row_cxt);
	return hash;
}

static bool
rows_identical(FullApply *fa, TupleTableSlot *a, TupleTableSlot *b)
{
	for (int c = 0; c < fa->ncolumns; c++)
	{
		int			i = fa->attnums[c] - 1;
		Form_pg_attribute att = TupleDescAttr(fa->desc, i);

		if (a->tts_isnull[i] != b->tts_isnull[i])
			return false;
		if (!a->tts_isnull[i] &&
			!datum_image_eq(a->tts_values[i], b->tts_values[i], att->attbyval, att->attlen))
			return false;
	}
	return true;
}

/* File a target row by the hash of its image. */
static void
file_target_row(TargetWriter *writer, TupleTableSlot *slot, void *arg)
{
	FullApply  *fa = (FullApply *) arg;
	ImageEntry *entry;
	bool		found;

	slot_getallattrs(slot);
	entry = images_insert(fa->images, row_hash_in(fa, slot), &found);
	if (fa->nrows == fa->maxrows)
	{
		if (fa->maxrows > PG_INT32_MAX / 2)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("target \"%s\" has too many rows for a full recompute",
							RelationGetRelationName(writer->rel))));
		fa->maxrows *= 2;
		fa->rows = repalloc_huge(fa->rows, sizeof(TargetRow) * fa->maxrows);
	}
	fa->rows[fa->nrows].tid = slot->tts_tid;
	fa->rows[fa->nrows].matched = false;
	fa->rows[fa->nrows].next = found ? entry->head : -1;
	entry->head = fa->nrows++;
}

/* Does an unmatched target row have this row's image?  It is matched then. */
static bool
match_target_row(FullApply *fa, TupleTableSlot *row)
{
	ImageEntry *entry = images_lookup(fa->images, row_hash_in(fa, row));
	bool		matched = false;
	MemoryContext oldcxt = MemoryContextSwitchTo(fa->row_cxt);

	for (int32 r = entry ? entry->head : -1; r >= 0 && !matched; r = fa->rows[r].next)
	{
		if (fa->rows[r].matched ||
			!table_tuple_fetch_row_version(fa->writer->rel, &fa->rows[r].tid,
										   GetActiveSnapshot(), fa->found))
			continue;
		slot_getallattrs(fa->found);
		matched = fa->rows[r].matched = rows_identical(fa, row, fa->found);
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(fa->row_cxt);
	return matched;
}

/* A DestReceiver matching each row of the query with a target row */
typedef struct FullReceiver
{
	DestReceiver pub;
	FullApply  *fa;
	TupleTableSlot *row;		/* the query's row in the target's row type */
	Tuplestorestate *inserts;	/* the rows the target lacks */
} FullReceiver;

static bool
full_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FullReceiver *receiver = (FullReceiver *) self;
	FullApply  *fa = receiver->fa;
	TupleTableSlot *row = receiver->row;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	ExecClearTuple(row);
	memset(row->tts_isnull, true, sizeof(bool) * fa->desc->natts);
	for (int c = 0; c < fa->ncolumns; c++)
	{
		int			att = fa->attnums[c] - 1;

		row->tts_values[att] = slot->tts_values[c];
		row->tts_isnull[att] = slot->tts_isnull[c];
	}
	ExecStoreVirtualTuple(row);
	if (!match_target_row(fa, row))
		tuplestore_puttupleslot(receiver->inserts, row);
	return true;
}

void
apply_full(DeltaPlan *plan, TargetWriter *writer)
{
	FullApply	fa;
	FullReceiver receiver;
	TupleTableSlot *stored;
	double		reltuples = writer->rel->rd_rel->reltuples;

	apply_error_whole();
	memset(&fa, 0, sizeof(fa));
	fa.writer = writer;
	fa.desc = RelationGetDescr(writer->rel);
	fa.attnums = palloc(sizeof(AttrNumber) * fa.desc->natts);
	for (int i = 0; i < fa.desc->natts; i++)
	{
		if (!TupleDescAttr(fa.desc, i)->attisdropped)
			fa.attnums[fa.ncolumns++] = i + 1;
	}
	/* sized for the rows the target had at its last analyze */
	reltuples = Min(Max(reltuples, 1024), 64 * 1024 * 1024);
	fa.images = images_create(CurrentMemoryContext, (uint32) reltuples, NULL);
	fa.maxrows = (int32) reltuples;
	fa.rows = palloc_extended(sizeof(TargetRow) * fa.maxrows, MCXT_ALLOC_HUGE);
	fa.found = table_slot_create(writer->rel, NULL);
	fa.row_cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join full recompute row",
									   ALLOCSET_SMALL_SIZES);

	writer_scan_rows(fa.writer, file_target_row, &fa);

	/* the query's rows, in the target's column types: those it lacks are kept */
	memset(&receiver, 0, sizeof(receiver));
	recompute_receiver_init(&receiver.pub, full_receive);
	receiver.fa = &fa;
	receiver.row = MakeSingleTupleTableSlot(fa.desc, &TTSOpsVirtual);
	receiver.inserts = tuplestore_begin_heap(false, false, work_mem);
	recompute_run_all(plan, RelationGetRelid(writer->rel), &receiver.pub, true);

	/* the target rows no query row found go first, freeing their keys */
	for (int32 r = 0; r < fa.nrows; r++)
	{
		if (!fa.rows[r].matched)
			writer_delete_row(writer, &fa.rows[r].tid);
	}

	/* then the query rows the target lacked */
	stored = MakeSingleTupleTableSlot(fa.desc, &TTSOpsMinimalTuple);
	while (tuplestore_gettupleslot(receiver.inserts, true, false, stored))
		writer_insert_slot(writer, stored);
	ExecDropSingleTupleTableSlot(stored);

	tuplestore_end(receiver.inserts);
	ExecDropSingleTupleTableSlot(receiver.row);
	ExecDropSingleTupleTableSlot(fa.found);
	MemoryContextDelete(fa.row_cxt);
	apply_error_clear();
}
