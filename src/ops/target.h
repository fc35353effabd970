/*-------------------------------------------------------------------------
 *
 * target.h
 *	  Making and filling the target of a view, and its guard (target.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_OPS_TARGET_H
#define DJ_OPS_TARGET_H

#include "analysis/analyze.h"
#include "utils/jsonb.h"

extern Oid	target_create(RangeVar *rv, DeltaPlan *plan);
extern void target_add_key(Oid relid, DeltaPlan *plan);
extern void target_add_region_indexes(Oid relid, DeltaPlan *plan);
extern void target_make_indexes(Oid relid, DeltaPlan *plan);
extern void target_guard(Oid relid);
extern void target_unguard(Oid relid);
extern bool target_filling(Oid relid);
extern void target_lock_sources(DeltaPlan *plan);
extern uint64 target_fill(Oid relid, Oid query_view, Jsonb *settings, bool clear);
extern int64 target_estimate_rows(Oid query_view, Oid owner, Jsonb *settings);
extern uint64 target_fill_counted(Oid relid, Oid query_view, Jsonb *settings, int view_id);

#endif							/* DJ_OPS_TARGET_H */
