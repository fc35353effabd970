/*-------------------------------------------------------------------------
 *
 * apply.h
 *	  Applying a view's batch by its delta plan (apply.c), and the appliers
 *	  it dispatches to.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_APPLY_H
#define DJ_APPLY_H

#include "analysis/analyze.h"
#include "apply/writer.h"
#include "base/batch.h"
#include "registry/catalog.h"

/* apply.c */
extern void apply_view_batch(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts,
							 List **held_back);
extern void apply_view_held_back(ViewRecord *view, List *held_back, ApplyCounts *counts);
extern bool apply_view_whole(ViewRecord *view);
extern bool apply_view_together(ViewRecord *view, const ViewBatch *batch);
extern bool apply_view_held_in_backlog(ViewRecord *view);
extern void apply_view_difference(ViewRecord *view, DeltaPlan *plan, ApplyCounts *counts);
extern void apply_check_access(DeltaPlan *plan, Oid target);

/* the appliers */
extern void apply_join(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
					   ApplyCounts *counts);
extern void apply_join_forget_caches(DeltaPlan *plan);
extern void apply_aggregate(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
							ApplyCounts *counts);
extern void apply_outer(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
						ApplyCounts *counts);
extern void apply_full(DeltaPlan *plan, TargetWriter *writer);

/* apply_additive.c */
extern bool apply_additive_kept(DeltaPlan *plan, TargetWriter *writer);
extern bool apply_aggregate_additive(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer,
									 ApplyCounts *counts, List **recompute);

#endif							/* DJ_APPLY_H */
