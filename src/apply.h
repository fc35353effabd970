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
} TargetWriter;

extern void apply_view_batch(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts);
extern void apply_forget_views(void);
extern void apply_check_access(DeltaPlan *plan);
extern List *apply_coerce_to_target(Oid target, DeltaPlan *plan, List *exprs);

extern TargetWriter *target_writer_begin(Oid target, DeltaPlan *plan, ApplyCounts *counts);
extern void target_upsert(TargetWriter *writer, const Datum *values, const bool *isnull);
extern void target_delete(TargetWriter *writer, const Datum *values, const bool *isnull);
extern void target_writer_end(TargetWriter *writer);

extern void apply_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
					   ApplyCounts *counts);
extern void apply_aggregate(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
							ApplyCounts *counts);

#endif							/* DJ_APPLY_H */
