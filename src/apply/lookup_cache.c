/*-------------------------------------------------------------------------
 *
 * lookup_cache.c
 *	  The lookup cache (DESIGN.md §5): the rows an index-prefix lookup of a
 *	  source found, by the values looked up, least recently used first out.
 *
 * A cache belongs to a view's delta plan (it lives as long as the plan,
 * apply.c) and to one source, index, number of bound columns and types
 * of the values bound (walks from two sources may bind one column with
 * values of two types, whose images do not compare).  It is emptied
 * before a batch in which its source changed (apply_join.c), so that a
 * change is never applied with rows of its source older than the change;
 * between such batches it serves the rows it read.  Values are
 * compared by their images (datum_image_eq): two values a btree would call
 * equal but that differ in image (1.0 and 1.00) are two entries, which only
 * costs a miss.  The values looked up are kept whole (detoasted), the rows
 * found as they are: a change of the source looked up empties the cache
 * before any of its rows could be gone.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/htup_details.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "lib/ilist.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "apply/lookup_cache.h"

/* One cached lookup: its values and the rows it found */
typedef struct CacheItem
{
	dlist_node	lru;			/* most recently used at the head */
	uint32		hash;
	Datum	   *values;
	List	   *rows;			/* HeapTuple */
} CacheItem;

/* The items of one hash value */
typedef struct CacheBucket
{
	uint32		hash;			/* hash key */
	List	   *items;			/* CacheItem * */
} CacheBucket;

struct LookupCache
{
	MemoryContext cxt;			/* everything below; reset to empty it */
	int			capacity;
	int			nkeys;
	int16	   *typlen;
	bool	   *typbyval;
	HTAB	   *buckets;
	dlist_head	lru;
	int			count;
};

static void
cache_init(LookupCache *cache)
{
	HASHCTL		hctl;

	hctl.keysize = sizeof(uint32);
	hctl.entrysize = sizeof(CacheBucket);
	hctl.hcxt = cache->cxt;
	cache->buckets = hash_create("delta_join lookup cache", Min(cache->capacity, 1024),
								 &hctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	dlist_init(&cache->lru);
	cache->count = 0;
}

LookupCache *
lookup_cache_create(MemoryContext parent, int capacity, int nkeys,
					const int16 *typlen, const bool *typbyval)
{
	LookupCache *cache = MemoryContextAllocZero(parent, sizeof(LookupCache));

	cache->capacity = capacity;
	cache->nkeys = nkeys;
	cache->typlen = MemoryContextAlloc(parent, sizeof(int16) * Max(nkeys, 1));
	cache->typbyval = MemoryContextAlloc(parent, sizeof(bool) * Max(nkeys, 1));
	memcpy(cache->typlen, typlen, sizeof(int16) * nkeys);
	memcpy(cache->typbyval, typbyval, sizeof(bool) * nkeys);
	cache->cxt = AllocSetContextCreate(parent, "delta_join lookup cache",
									   ALLOCSET_DEFAULT_SIZES);
	cache_init(cache);
	return cache;
}

/* Empty the cache: its source changed. */
void
lookup_cache_reset(LookupCache *cache)
{
	if (cache->count == 0)
		return;
	MemoryContextReset(cache->cxt);
	cache_init(cache);
}

static uint32
cache_hash(LookupCache *cache, const Datum *values)
{
	uint32		hash = 0;

	for (int k = 0; k < cache->nkeys; k++)
		hash = hash_combine(hash, datum_image_hash(values[k], cache->typbyval[k],
												   cache->typlen[k]));
	return hash;
}

static CacheItem *
cache_find(LookupCache *cache, const Datum *values, uint32 hash)
{
	CacheBucket *bucket = hash_search(cache->buckets, &hash, HASH_FIND, NULL);
	ListCell   *lc;

	if (bucket == NULL)
		return NULL;
	foreach(lc, bucket->items)
	{
		CacheItem  *item = lfirst(lc);
		bool		same = true;

		for (int k = 0; k < cache->nkeys && same; k++)
			same = datum_image_eq(item->values[k], values[k], cache->typbyval[k],
								  cache->typlen[k]);
		if (same)
			return item;
	}
	return NULL;
}

/*
 * The rows cached for these values (none of them NULL), or false on a
 * miss.  A hit makes the entry the most recently used.
 */
bool
lookup_cache_get(LookupCache *cache, const Datum *values, List **rows)
{
	CacheItem  *item = cache_find(cache, values, cache_hash(cache, values));

	if (item == NULL)
		return false;
	dlist_move_head(&cache->lru, &item->lru);
	*rows = item->rows;
	return true;
}

/* Drop the least recently used entry. */
static void
cache_evict(LookupCache *cache)
{
	CacheItem  *item = dlist_container(CacheItem, lru, dlist_tail_node(&cache->lru));
	CacheBucket *bucket = hash_search(cache->buckets, &item->hash, HASH_FIND, NULL);
	ListCell   *lc;

	dlist_delete(&item->lru);
	bucket->items = list_delete_ptr(bucket->items, item);
	if (bucket->items == NIL)
		hash_search(cache->buckets, &item->hash, HASH_REMOVE, NULL);
	foreach(lc, item->rows)
		heap_freetuple(lfirst(lc));
	list_free(item->rows);
	for (int k = 0; k < cache->nkeys; k++)
		if (!cache->typbyval[k])
			pfree(DatumGetPointer(item->values[k]));
	pfree(item->values);
	pfree(item);
	cache->count--;
}

/*
 * Remember the rows found for these values: copies of the slots' rows,
 * taken by the caller in lookup_cache_copy_row.
 */
void
lookup_cache_put(LookupCache *cache, const Datum *values, List *rows)
{
	uint32		hash = cache_hash(cache, values);
	MemoryContext oldcxt;
	CacheBucket *bucket;
	CacheItem  *item;
	bool		found;

	if (cache->capacity <= 0 || cache_find(cache, values, hash) != NULL)
		return;
	while (cache->count >= cache->capacity)
		cache_evict(cache);

	oldcxt = MemoryContextSwitchTo(cache->cxt);
	item = palloc(sizeof(CacheItem));
	item->hash = hash;
	item->values = palloc(sizeof(Datum) * Max(cache->nkeys, 1));
	for (int k = 0; k < cache->nkeys; k++)
	{
		/*
		 * A value stored out of line is kept whole, not by its TOAST pointer:
		 * that leads into the table of the row the value came from, usually
		 * another source than the one looked up, and the entry outlives
		 * batches in which only that other source changed -- once its row is
		 * gone and vacuumed, the pointer leads nowhere.
		 */
		if (cache->typlen[k] == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(values[k])))
			item->values[k] = PointerGetDatum(detoast_external_attr((struct varlena *) DatumGetPointer(values[k])));
		else
			item->values[k] = datumCopy(values[k], cache->typbyval[k], cache->typlen[k]);
	}
	item->rows = list_copy(rows);
	bucket = hash_search(cache->buckets, &hash, HASH_ENTER, &found);
	if (!found)
		bucket->items = NIL;
	bucket->items = lappend(bucket->items, item);
	dlist_push_head(&cache->lru, &item->lru);
	cache->count++;
	MemoryContextSwitchTo(oldcxt);
}

/* A copy of a slot's row, in the cache's memory, for lookup_cache_put */
HeapTuple
lookup_cache_copy_row(LookupCache *cache, TupleTableSlot *slot)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cache->cxt);
	HeapTuple	tuple = ExecCopySlotHeapTuple(slot);

	MemoryContextSwitchTo(oldcxt);
	return tuple;
}
