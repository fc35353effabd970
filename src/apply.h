/*-------------------------------------------------------------------------
 *
 * apply.h
 *	  Shared pieces of the appliers: writing result rows to the target.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_APPLY_H
#define DJ_APPLY_H

#include "analyze.h"
#include "batch.h"
#include "catalog.h"
#include "executor/execdesc.h"
#include "access/genam.h"
#include "nodes/execnodes.h"

/* Writes result rows into a target, by the target's unique key. */
typedef struct TargetWriter
{
	Relation	rel;
	Oid			key_index;
	Relation	key_rel;		/* the target's unique key index */
	ScanKeyData keys[INDEX_MAX_KEYS];	/* its columns; arguments per row */
	EState	   *estate;
	ResultRelInfo *rri;
	EPQState	epqstate;
	TupleTableSlot *newslot;	/* the row to write, target row type */
	TupleTableSlot *oldslot;	/* the row found by key */
	int			ncolumns;		/* output columns of the view */
	int		   *attnums;		/* output column i -> target attnum */
	ApplyCounts *counts;

	/* a region being replaced (target_region_begin) */
	bool		in_region;
	List	   *region_old;		/* ItemPointer *, rows of the region ... */
	HTAB	   *region_olds;	/* ... and the same as a set */
	HTAB	   *region_kept;	/* ItemPointerData: rows an upsert found */
} TargetWriter;

/*
 * Finds target rows by the values of some output columns, through an index
 * of the target whose leading columns they are.
 */
typedef struct TargetLookup
{
	Relation	idx;
	int			ncols;
	int		   *cols;			/* output columns, in index column order */
	ScanKeyData *keys;
	ScanKeyData *equal_keys;	/* the equality keys, kept while keys search NULLs */
} TargetLookup;

/* called for each target row found; may not write the target */
typedef void (*TargetRowFn) (TargetWriter *writer, TupleTableSlot *row, void *arg);

extern void apply_view_batch(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts);
extern void apply_forget_views(void);
extern void apply_forget_dropped(List *views);
extern void apply_prepare_view(ViewRecord *view);
extern bool apply_lock_view(ViewRecord *view, Snapshot snapshot);
extern bool apply_view_whole(ViewRecord *view);
extern bool apply_view_shareable(ViewRecord *view, ViewBatch *batch, int *share_by);
extern void apply_reset_system_caches(void);
extern void apply_check_access(DeltaPlan *plan);
extern void apply_coerce_query_output(Query *query, DeltaPlan *plan, Oid target);
extern List *apply_coerce_to_target(Oid target, DeltaPlan *plan, List *exprs);

extern TargetWriter *target_writer_begin(Oid target, DeltaPlan *plan, ApplyCounts *counts);
extern void target_upsert(TargetWriter *writer, const Datum *values, const bool *isnull);
extern TargetLookup *target_lookup_begin(TargetWriter *writer, int ncols, const int *cols,
										 bool missing_ok);
extern void target_lookup_rows(TargetWriter *writer, TargetLookup *tl, const Datum *values,
							   const bool *isnull, TargetRowFn fn, void *arg);
extern void target_lookup_end(TargetLookup *tl);
extern void target_scan_rows(TargetWriter *writer, TargetRowFn fn, void *arg);
extern void target_output_values(TargetWriter *writer, TupleTableSlot *row, Datum *values,
								 bool *isnull);
extern void target_delete_row(TargetWriter *writer, ItemPointer tid);
extern void target_insert_slot(TargetWriter *writer, TupleTableSlot *slot);
extern void target_region_begin(TargetWriter *writer);
extern void target_region_add(TargetWriter *writer, ItemPointer tid);
extern void target_region_end(TargetWriter *writer);
extern void target_delete(TargetWriter *writer, const Datum *values, const bool *isnull);
extern void target_writer_end(TargetWriter *writer);

extern void apply_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
					   ApplyCounts *counts);
extern void apply_aggregate(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
							ApplyCounts *counts);
extern void apply_receiver_init(DestReceiver *dest,
								bool (*receive) (TupleTableSlot *slot, DestReceiver *self));
extern void apply_full(DeltaPlan *plan, TargetWriter *writer);
extern void apply_outer(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
						ApplyCounts *counts);

#endif							/* DJ_APPLY_H */
