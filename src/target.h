/*-------------------------------------------------------------------------
 *
 * target.h
 *	  Target tables: creation, validation, backfill and refresh.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_TARGET_H
#define DJ_TARGET_H

#include "analyze.h"
#include "utils/relcache.h"

extern Oid	target_create(RangeVar *rv, DeltaPlan *plan);
extern void target_validate(Oid relid, DeltaPlan *plan);
extern Oid	target_key_index(Relation rel, DeltaPlan *plan);
extern uint64 target_fill(Oid relid, DeltaPlan *plan, bool clear);

#endif							/* DJ_TARGET_H */
