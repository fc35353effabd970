/*-------------------------------------------------------------------------
 *
 * plan_cache.c
 *	  The delta plan cache: each view's plan, built once and kept across
 *	  batches until an invalidation says it may be stale; what a view's
 *	  apply locks; whether a view's batch can be shared.
 *
 * A view's plan is built once -- its query loaded from its query view and
 * analyzed, its target checked (target_shape.c) -- and kept across
 * batches, in memory of its own, until an invalidation says something it
 * was built from may have changed: a relcache invalidation of one of its
 * sources, its target or its query view (DDL, an index created or dropped,
 * privileges), a change of any function (CREATE OR REPLACE), or a change of
 * the view's catalog row (plan_cache_forget_all, called by the worker when
 * a view was created, dropped or refreshed).  The resets of the system
 * caches around decoding do not count (plan_cache_reset_system_caches).  A
 * plan is always built as the target's owner, since building it may
 * evaluate immutable functions.
 *
 * The relations a plan was built from are also what its apply locks
 * (plan_cache_lock_view), and the plan is what tells whether its batch can
 * be shared with parallel-apply helpers (plan_cache_shareable).
 *
 * Memory: each plan in a context of its own under TopMemoryContext, freed
 * when the plan is rebuilt; the hash table in TopMemoryContext.
 *
 * IDENTIFICATION
 *	  src/apply/plan_cache.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "storage/lmgr.h"
#include "storage/sinval.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "analysis/view_plan.h"
#include "apply/plan_cache.h"
#include "apply/target_shape.h"
#include "base/compat.h"

typedef struct CachedView
{
	int			view_id;		/* hash key */
	bool		valid;
	MemoryContext cxt;			/* holds the plan */
	DeltaPlan  *plan;
	int			nrelids;
	Oid		   *relids;			/* relations whose invalidation drops it */

	/*
	 * The partitions of those that are partitioned, as found when the
	 * worker had taken in partitions_at invalidations (partitions_known)
	 */
	bool		partitions_known;
	uint64		partitions_at;
	List	   *partitions;		/* Oid */
} CachedView;

static HTAB *view_cache = NULL;
static uint64 invalidations = 0;	/* callbacks run so far */
static bool own_reset = false;	/* in plan_cache_reset_system_caches */

static void
invalidate_all(void)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	invalidations++;
	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		entry->valid = false;
}

static void
cache_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	if (own_reset)
		return;
	invalidations++;
	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		for (int i = 0; i < entry->nrelids && entry->valid; i++)
			if (!OidIsValid(relid) || entry->relids[i] == relid)
				entry->valid = false;
	}
}

static void
cache_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (!own_reset)
		invalidate_all();
}

/*
 * Reset the system caches around decoding, as logicalfuncs.c does (entries
 * built with the historic snapshots of decoding must not outlive it, nor
 * entries built before it serve it), keeping the plans: a reset says
 * nothing about what changed.  What DDL changed reaches the plan cache as
 * its own invalidation messages, at the start of a transaction or of a
 * lock; a reset that comes from an overflowed invalidation queue (changes
 * missed) still drops every plan.
 */
void
plan_cache_reset_system_caches(void)
{
	own_reset = true;
	PG_TRY();
	{
		InvalidateSystemCaches();
	}
	PG_FINALLY();
	{
		own_reset = false;
	}
	PG_END_TRY();
}

/* Drop every cached plan: the views' catalog rows may have changed. */
void
plan_cache_forget_all(void)
{
	invalidate_all();
}

/*
 * Free the plans of the views that views (the catalog's, ViewRecord *) no
 * longer lists.  A dropped view's plan is never built again, so nothing
 * else frees it, nor the rows its lookup caches hold: a node of
 * distributed views makes and drops a view with every shard group that
 * moves in or out.
 */
void
plan_cache_forget_dropped(List *views)
{
	HASH_SEQ_STATUS status;
	CachedView *entry;

	if (view_cache == NULL)
		return;
	hash_seq_init(&status, view_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		if (catalog_view_in(views, entry->view_id) != NULL)
			continue;
		MemoryContextDelete(entry->cxt);
		(void) hash_search(view_cache, &entry->view_id, HASH_REMOVE, NULL);
	}
}

/*
 * The view's cache entry, its delta plan from the cache or built now (as
 * the current user, who must be the target's owner).
 */
static CachedView *
plan_cache_entry(ViewRecord *view)
{
	CachedView *entry;
	bool		found;
	MemoryContext oldcxt;
	uint64		seen = invalidations;
	ListCell   *lc;
	int			n = 0;

	if (view_cache == NULL)
	{
		HASHCTL		hctl;

		hctl.keysize = sizeof(int);
		hctl.entrysize = sizeof(CachedView);
		view_cache = hash_create("delta_join plans", 64, &hctl, HASH_ELEM | HASH_BLOBS);
		CacheRegisterRelcacheCallback(cache_relcache_callback, (Datum) 0);
		CacheRegisterSyscacheCallback(PROCOID, cache_syscache_callback, (Datum) 0);
	}

	entry = hash_search(view_cache, &view->view_id, HASH_ENTER, &found);
	if (found && entry->valid)
		return entry;
	if (found)
		MemoryContextDelete(entry->cxt);
	entry->valid = false;
	entry->partitions_known = false;
	entry->partitions = NIL;
	entry->cxt = AllocSetContextCreate(TopMemoryContext, "delta_join plan",
									   ALLOCSET_DEFAULT_SIZES);

	oldcxt = MemoryContextSwitchTo(entry->cxt);
	entry->plan = view_plan_load(view);
	target_validate(view->target, entry->plan, true);
	target_check_key_index(view->target, entry->plan);

	/*
	 * The sources, and the views the query reads (their placeholders); a
	 * full recompute's sources are also the tables under those views and
	 * the inheritance children of the tables it reads.
	 */
	entry->relids = palloc(sizeof(Oid) * (list_length(entry->plan->query->rtable) +
										  list_length(entry->plan->sources) + 2));
	foreach(lc, entry->plan->query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (compat_rte_reads_relation(rte))
			entry->relids[n++] = rte->relid;
	}
	foreach(lc, entry->plan->sources)
		entry->relids[n++] = ((DeltaSource *) lfirst(lc))->relid;
	entry->relids[n++] = view->target;
	entry->relids[n++] = view->query_view;
	entry->nrelids = n;
	MemoryContextSwitchTo(oldcxt);

	/* an invalidation that arrived while it was built leaves it invalid */
	entry->valid = (invalidations == seen);
	elog(DEBUG1, "delta_join: built the plan of view %d (target \"%s\")",
		 view->view_id, get_rel_name(view->target));
	return entry;
}

/*
 * The view's delta plan, from the cache or built now (as the current user,
 * who must be the target's owner).  Errors are the caller's.
 */
DeltaPlan *
plan_cache_get(ViewRecord *view)
{
	return plan_cache_entry(view)->plan;
}

/* The view's delta plan if the cache holds a valid one, else NULL */
DeltaPlan *
plan_cache_peek(ViewRecord *view)
{
	CachedView *entry;

	if (view_cache == NULL)
		return NULL;
	entry = hash_search(view_cache, &view->view_id, HASH_FIND, NULL);
	return entry != NULL && entry->valid ? entry->plan : NULL;
}

/*
 * Was the relation created or its storage replaced (a rewrite, a TRUNCATE)
 * -- its pg_class row written -- by a transaction that snapshot does not
 * see?  Through the syscache, whose tuples tell a frozen xmin.
 */
static bool
relation_written_after(Oid relid, Snapshot snapshot)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		after = false;

	if (HeapTupleIsValid(tuple))
	{
		TransactionId xmin = HeapTupleHeaderGetXmin(tuple->t_data);

		after = TransactionIdIsNormal(xmin) && XidInMVCCSnapshot(xmin, snapshot);
		ReleaseSysCache(tuple);
	}
	return after;
}

/*
 * Lock relid, as the apply of view reads it (or writes it: its target);
 * false if a change that gave it new storage committed after snapshot.
 */
static bool
lock_relation_seen(Oid relid, ViewRecord *view, Snapshot snapshot)
{
	LockRelationOid(relid, relid == view->target ? RowExclusiveLock : AccessShareLock);
	return snapshot == NULL || !relation_written_after(relid, snapshot);
}

/*
 * Lock what the view's apply reads and writes -- its sources (and their
 * partitions), the views its query reads, its target -- as the apply will,
 * before the apply reads under its snapshot.  A table rewrite (ALTER TABLE
 * ... TYPE) writes every row anew in its own transaction, and a TRUNCATE
 * gives the table new, empty storage: to a snapshot that does not see
 * them, the table would look empty.  When the snapshot was taken before
 * the locks (snapshot, the batch's), returns false if such a change of one
 * of the relations committed after it; the view must then be applied
 * under a later snapshot.  Without one, the caller takes its snapshot
 * once the locks are held, and always gets true.
 */
bool
plan_cache_lock_view(ViewRecord *view, Snapshot snapshot)
{
	CachedView *entry = plan_cache_entry(view);
	bool		seen = true;
	ListCell   *lc;

	for (int i = 0; i < entry->nrelids; i++)
	{
		if (!lock_relation_seen(entry->relids[i], view, snapshot))
			seen = false;
	}

	/*
	 * Their partitions: partitions are attached, detached, made or dropped
	 * only by DDL, which sends invalidations (taken in by the locks above
	 * at the latest), so they are found again only after some came in.
	 */
	if (!entry->partitions_known || entry->partitions_at != SharedInvalidMessageCounter)
	{
		MemoryContext old = MemoryContextSwitchTo(entry->cxt);

		list_free(entry->partitions);
		entry->partitions = NIL;
		entry->partitions_at = SharedInvalidMessageCounter;
		for (int i = 0; i < entry->nrelids; i++)
		{
			List	   *tree;

			if (get_rel_relkind(entry->relids[i]) != RELKIND_PARTITIONED_TABLE)
				continue;
			/* (the table itself comes first) */
			tree = find_all_inheritors(entry->relids[i], NoLock, NULL);
			entry->partitions = list_concat_unique_oid(entry->partitions,
													   list_delete_first(tree));
		}
		entry->partitions_known = true;
		MemoryContextSwitchTo(old);
	}
	foreach(lc, entry->partitions)
	{
		if (!lock_relation_seen(lfirst_oid(lc), view, snapshot))
			seen = false;
	}
	return seen;
}

/* The plan's source of that ordinal, or NULL */
static DeltaSource *
plan_source(DeltaPlan *plan, int ordinal)
{
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		if (((DeltaSource *) lfirst(lc))->ordinal == ordinal)
			return lfirst(lc);
	}
	return NULL;
}

/*
 * May the view's batch be split into shares applied at once by several
 * transactions (parallel apply, share.c)?  Only when no key's apply
 * decides from target rows another share writes: the inner join's walk in
 * upsert mode, and the aggregate's groups (a group is a key).  Outer joins,
 * keyed recompute, UNION ALL, retract slices, truncations and recomputes of
 * the whole are applied by one transaction.  The plan must be in the cache
 * already: a plan is built as the target's owner, by an apply.
 *
 * share_by (one per source of the batch, in its order) is set to the key
 * column whose value picks a key's share, or -1 for the whole key.  When
 * the keys of several sources are shared and one output column holds a key
 * column of each of them in every row (merchant_id of orders and of items,
 * joined on it), sharing by that value keeps two shares from ever writing
 * the same row: a row is written only by keys with its value there.
 */
bool
plan_cache_shareable(ViewRecord *view, ViewBatch *batch, int *share_by)
{
	CachedView *entry;
	DeltaPlan  *plan;
	SourceBatch *first;
	DeltaSource *first_src;
	int			nchanged = 0;
	ListCell   *lc;

	if (view_cache == NULL || view->path != DJ_PATH_DELTA || batch->sources == NIL)
		return false;
	entry = hash_search(view_cache, &view->view_id, HASH_FIND, NULL);
	if (entry == NULL || !entry->valid)
		return false;
	plan = entry->plan;
	if (plan->path != DJ_PATH_DELTA || plan->whole || plan->branches != NIL)
		return false;
	if (!(plan->kind == DJ_KIND_AGGREGATE ||
		  (plan->kind == DJ_KIND_JOIN && !plan->has_outer && !plan->options.retract)))
		return false;
	foreach(lc, batch->sources)
	{
		if (((SourceBatch *) lfirst(lc))->truncated ||
			plan_source(plan, ((SourceBatch *) lfirst(lc))->ordinal) == NULL)
			return false;
	}

	for (int i = 0; i < list_length(batch->sources); i++)
		share_by[i] = -1;
	if (plan->kind != DJ_KIND_JOIN)
		return true;

	/*
	 * A row of the target holds one row of each source: the keys of one
	 * source write rows apart from each other, and the whole key spreads
	 * them best (all of a hot merchant's orders are not one share).
	 */
	foreach(lc, batch->sources)
		nchanged += (((SourceBatch *) lfirst(lc))->keys != NIL);
	if (nchanged <= 1)
		return true;

	/* an output column that every source's key reaches */
	first = linitial(batch->sources);
	first_src = plan_source(plan, first->ordinal);
	for (int k = 0; k < first_src->key_natts; k++)
	{
		int			column = first_src->partner_output[k];
		bool		all = (column >= 0);

		foreach(lc, batch->sources)
		{
			DeltaSource *src = plan_source(plan, ((SourceBatch *) lfirst(lc))->ordinal);
			int			found = -1;

			for (int k2 = 0; all && found < 0 && k2 < src->key_natts; k2++)
			{
				if (src->partner_output[k2] == column)
					found = k2;
			}
			all &= (found >= 0);
			if (all)
				share_by[foreach_current_index(lc)] = found;
		}
		if (all)
			return true;
		for (int i = 0; i < list_length(batch->sources); i++)
			share_by[i] = -1;
	}
	return true;
}

