/*-------------------------------------------------------------------------
 *
 * lookup_cache.h
 *	  An LRU cache of the rows index-prefix lookups of one source found.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_LOOKUP_CACHE_H
#define DJ_LOOKUP_CACHE_H

#include "access/htup.h"
#include "executor/tuptable.h"
#include "nodes/pg_list.h"

typedef struct LookupCache LookupCache;

extern LookupCache *lookup_cache_create(MemoryContext parent, int capacity, int nkeys,
										const int16 *typlen, const bool *typbyval);
extern void lookup_cache_reset(LookupCache *cache);
extern bool lookup_cache_get(LookupCache *cache, const Datum *values, List **rows);
extern void lookup_cache_put(LookupCache *cache, const Datum *values, List *rows);
extern HeapTuple lookup_cache_copy_row(LookupCache *cache, TupleTableSlot *slot);

#endif							/* DJ_LOOKUP_CACHE_H */
