/*-------------------------------------------------------------------------
 *
 * plan_cache.h
 *	  The delta plan cache (plan_cache.c): each view's plan across batches,
 *	  what its apply locks, whether its batch can be shared.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_PLAN_CACHE_H
#define DJ_PLAN_CACHE_H

#include "utils/snapshot.h"

#include "analysis/analyze.h"
#include "base/batch.h"
#include "registry/catalog.h"

extern DeltaPlan *plan_cache_get(ViewRecord *view);
extern DeltaPlan *plan_cache_peek(ViewRecord *view);
extern void plan_cache_forget_all(void);
extern void plan_cache_forget_dropped(List *views);
extern void plan_cache_reset_system_caches(void);
extern bool plan_cache_lock_view(ViewRecord *view, Snapshot snapshot);
extern bool plan_cache_shareable(ViewRecord *view, ViewBatch *batch, int *share_by);

#endif							/* DJ_PLAN_CACHE_H */
