/*-------------------------------------------------------------------------
 *
 * target.h
 *	  Target tables: creation, validation, filling, and the write guard.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_TARGET_H
#define DJ_TARGET_H

#include "analysis/analyze.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"

extern Oid	target_create(RangeVar *rv, DeltaPlan *plan);
extern void target_add_key(Oid relid, DeltaPlan *plan);
extern void target_add_region_indexes(Oid relid, DeltaPlan *plan);
extern int	target_region_columns(DeltaPlan *plan, DeltaSource *src, int *cols);
extern int	target_partner_columns(DeltaPlan *plan, DeltaSource *src, int *cols);
extern void target_validate(Oid relid, DeltaPlan *plan, bool guarded);
extern Oid	target_key_index(Relation rel, DeltaPlan *plan);
extern void target_guard(Oid relid);
extern void target_unguard(Oid relid);
extern bool target_filling(Oid relid);
extern void target_lock_sources(DeltaPlan *plan);
extern uint64 target_fill(Oid relid, Oid query_view, Jsonb *settings, bool clear);

#endif							/* DJ_TARGET_H */
