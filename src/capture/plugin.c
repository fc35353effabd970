/*-------------------------------------------------------------------------
 *
 * plugin.c
 *	  The output plugin: its callbacks, which find the dirty keys of the
 *	  decoded changes of sources, and its relation map.
 *
 * The library is its own logical decoding output plugin (the plugin name is
 * the library name, DJ_PLUGIN_NAME).  Only the apply worker decodes with it:
 * it passes a Capture in output_writer_private, and the callbacks add to it
 * (capture.c).  Nothing is written as text; with any other writer (say,
 * someone calling pg_logical_slot_get_changes on our slot) the callbacks do
 * nothing.
 *
 * For each INSERT, UPDATE or DELETE of a source, the values of the source's
 * key columns (source_catalog.key_columns) are taken from the new tuple and,
 * where one is logged (DELETE; an UPDATE that changed the replica identity,
 * or any change under REPLICA IDENTITY FULL), from the old tuple, and added
 * to the capture as a dirty key of every (view, source) the relation feeds,
 * with the row the change left.  A TRUNCATE of a source marks its
 * SourceBatch truncated.
 *
 * Rules the callbacks live by:
 *
 *	- They run while the reorder buffer replays a committed transaction,
 *	  inside a subtransaction that is rolled back afterwards and under a
 *	  historic snapshot: catalogs (and delta_join.source_catalog, a
 *	  user_catalog_table) read as of the change; nothing is written.
 *	- Memory: CurrentMemoryContext is freed after each change.  The capture
 *	  copies what it keeps; the relation map lives in
 *	  PluginState.cache_cxt, under the decoding context.
 *
 * The relation map caches, per relation as decoded (a leaf partition for a
 * partitioned source), the (view, source) pairs it feeds (SourceFeed) and
 * where their key columns are in that relation, so that the common case --
 * a change of a relation that is no source at all, such as the worker's
 * own writes to a target -- costs one hash lookup.  The map is what
 * source_catalog said under one historic snapshot; it is thrown away when a
 * change of source_catalog itself is decoded, when a relcache invalidation
 * arrives, and when the historic snapshot in force sees a different set of
 * committed catalog transactions (its xmin, xmax and xcnt differ), so that
 * no change is judged by a catalog it did not see.
 *
 * IDENTIFICATION
 *	  src/capture/plugin.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "lib/stringinfo.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/delta_join.h"
#include "capture/capture.h"
#include "registry/catalog.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* Relation map entry: what one decoded relation feeds (often nothing). */
typedef struct RelEntry
{
	Oid			relid;			/* hash key */
	int			nfeeds;
	SourceFeed *feeds;			/* sorted by view_id, ordinal */
} RelEntry;

/* The plugin's private state (output_plugin_private). */
typedef struct PluginState
{
	MemoryContext context;		/* the decoding context's: lives as long */
	MemoryContext cache_cxt;	/* relmap and its entries */
	HTAB	   *relmap;			/* relid -> RelEntry, or NULL */
	bool		relmap_stale;	/* throw relmap away before next use */

	/* the historic snapshot relmap was built under */
	TransactionId snap_xmin;
	TransactionId snap_xmax;
	uint32		snap_xcnt;

	Oid			catalog_relid;	/* delta_join.source_catalog */
	Oid			catalog_index;	/* source_catalog_relid_idx */
	bool		catalog_resolved;
	Oid			live_catalog;	/* the capture's, when catalog_relid was resolved */

	/* scratch space for the key being captured, in context */
	StringInfoData image;
	int			maxkeys;		/* size of values and isnull */
	Datum	   *values;
	bool	   *isnull;
} PluginState;

/* The state of the decoding context in use in this process, if any */
static PluginState *active_state = NULL;
static bool relcache_callback_registered = false;

/* Relations whose deletes could not be captured, reported once each */
static List *warned_relids = NIL;

static void plugin_startup(LogicalDecodingContext *ctx,
						   OutputPluginOptions *opt, bool is_init);
static void plugin_shutdown(LogicalDecodingContext *ctx);
static void plugin_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  Relation relation, ReorderBufferChange *change);
static void plugin_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							int nrelations, Relation relations[],
							ReorderBufferChange *change);
static void plugin_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  XLogRecPtr commit_lsn);
static bool plugin_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id);
static void plugin_relcache_callback(Datum arg, Oid relid);
static void plugin_resolve_catalog(PluginState *state);
static void plugin_follow_catalog(PluginState *state, Capture *cap);
static RelEntry *plugin_lookup_relation(PluginState *state, Capture *cap,
										Relation relation);
static bool relation_exists_now(Oid relid);
static void plugin_build_entry(PluginState *state, Capture *cap,
							   Relation relation, RelEntry *entry);
static bool plugin_key_image(PluginState *state, SourceFeed *feed, HeapTuple tuple,
							 TupleDesc desc, HeapTuple oldtuple);
static bool plugin_feeds_need_keys(const RelEntry *entry);

/*
 * Plugin entry point, found by name when a decoding context is set up.
 */
void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = plugin_startup;
	cb->begin_cb = plugin_begin;
	cb->change_cb = plugin_change;
	cb->truncate_cb = plugin_truncate;
	cb->commit_cb = plugin_commit;
	cb->shutdown_cb = plugin_shutdown;
	cb->filter_by_origin_cb = plugin_filter_origin;
}

/* The capture to add to, or NULL when decoding for someone else */
static inline Capture *
capture_of(LogicalDecodingContext *ctx)
{
	Capture    *cap = (Capture *) ctx->output_writer_private;

	if (cap == NULL || cap->magic != CAPTURE_MAGIC)
		return NULL;
	return cap;
}

/* ----------------
 * Callbacks
 * ----------------
 */

/*
 * Set up the plugin state in the decoding context's memory (the current
 * context here).
 */
static void
plugin_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt,
			   bool is_init)
{
	PluginState *state = palloc0(sizeof(PluginState));

	state->context = ctx->context;
	state->cache_cxt = AllocSetContextCreate(ctx->context,
											 "delta_join relation map",
											 ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&state->image);
	ctx->output_plugin_private = state;

	opt->output_type = OUTPUT_PLUGIN_BINARY_OUTPUT;
	opt->receive_rewrites = false;

	if (!relcache_callback_registered)
	{
		CacheRegisterRelcacheCallback(plugin_relcache_callback, (Datum) 0);
		relcache_callback_registered = true;
	}
	active_state = state;
}

static void
plugin_shutdown(LogicalDecodingContext *ctx)
{
	if (active_state == ctx->output_plugin_private)
		active_state = NULL;
}

/*
 * Skip a change before it is queued: the rows a fill writes into a target
 * that nothing else reads (ops/target.c, fill_origin) are marked with the
 * fill origin; queued, a fill of millions of rows would be spilled and
 * replayed at its commit, only to be thrown away.
 */
static bool
plugin_filter_origin(LogicalDecodingContext *ctx, RepOriginId origin_id)
{
	Capture    *cap = capture_of(ctx);

	return cap != NULL && origin_id != InvalidRepOriginId && origin_id == cap->fill_origin;
}

/*
 * A transaction's changes are about to be replayed: does the batch's
 * snapshot see it?  Its changes are carried to the next batch if not.
 */
static void
plugin_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	Capture    *cap = capture_of(ctx);

	if (cap != NULL)
		capture_begin_txn(cap, txn->xid);
}

/*
 * An INSERT, UPDATE or DELETE: capture the dirty keys it makes.
 */
static void
plugin_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation relation, ReorderBufferChange *change)
{
	PluginState *state = (PluginState *) ctx->output_plugin_private;
	Capture    *cap = capture_of(ctx);
	RelEntry   *entry;
	TupleDesc	desc;
	HeapTuple	newtuple = NULL;
	HeapTuple	oldtuple = NULL;
	bool		whole_old_row;

	if (cap == NULL)
		return;
	plugin_follow_catalog(state, cap);

	/* A change of the catalog: later changes must be judged afresh. */
	if (RelationGetRelid(relation) == state->catalog_relid)
	{
		state->relmap_stale = true;
		return;
	}

	entry = plugin_lookup_relation(state, cap, relation);
	if (entry->nfeeds == 0)
		return;

	switch (change->action)
	{
		case REORDER_BUFFER_CHANGE_INSERT:
			if (change->data.tp.newtuple != NULL)
				newtuple = DJ_CHANGE_TUPLE(change->data.tp.newtuple);
			break;
		case REORDER_BUFFER_CHANGE_UPDATE:
			if (change->data.tp.newtuple != NULL)
				newtuple = DJ_CHANGE_TUPLE(change->data.tp.newtuple);
			if (change->data.tp.oldtuple != NULL)
				oldtuple = DJ_CHANGE_TUPLE(change->data.tp.oldtuple);
			break;
		case REORDER_BUFFER_CHANGE_DELETE:
			if (change->data.tp.oldtuple != NULL)
				oldtuple = DJ_CHANGE_TUPLE(change->data.tp.oldtuple);
			else if (plugin_feeds_need_keys(entry) &&
					 !list_member_oid(warned_relids, RelationGetRelid(relation)))
			{
				MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);

				/* REPLICA IDENTITY NOTHING: say so, once per relation */
				warned_relids = lappend_oid(warned_relids, RelationGetRelid(relation));
				MemoryContextSwitchTo(oldcxt);
				ereport(WARNING,
						(errmsg("a delete from \"%s\" could not be captured because the table logs no replica identity",
								RelationGetRelationName(relation)),
						 errhint("Delta views over it may keep rows of deleted source rows; set REPLICA IDENTITY DEFAULT or FULL, then call delta_join.refresh().")));
			}
			break;
		default:
			elog(ERROR, "unexpected change action %d", (int) change->action);
	}

	desc = RelationGetDescr(relation);

	/*
	 * The weights of an additive aggregate (capture.h) need the whole old row
	 * of every UPDATE and DELETE.
	 */
	whole_old_row = (change->action == REORDER_BUFFER_CHANGE_INSERT ||
					 (oldtuple != NULL &&
					  relation->rd_rel->relreplident == REPLICA_IDENTITY_FULL));

	if (cap->txn_hidden)
	{
		/*
		 * Carried to the next batch, without rows, but with the weights the
		 * branch below would give: the batch that sees the transaction adds
		 * them (a large transaction is often not yet seen by the batch that
		 * decodes its commit, when the worker was decoding its WAL as it
		 * was written).
		 */
		for (int i = 0; i < entry->nfeeds; i++)
		{
			SourceFeed *feed = &entry->feeds[i];

			/*
			 * No tuple logged (a DELETE from a table without a replica
			 * identity): a view that needs no key of the source (a full
			 * recompute) is dirty all the same, as it is when the batch
			 * sees the change (capture_count_change, below).
			 */
			if (newtuple == NULL && oldtuple == NULL)
			{
				if (feed->shape.nkeys == 0 &&
					plugin_key_image(state, feed, NULL, desc, NULL))
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, &state->image,
									  0, false);
				else
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, NULL, 0, false);
				continue;
			}
			if (newtuple != NULL)
			{
				if (plugin_key_image(state, feed, newtuple, desc, oldtuple))
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, &state->image,
									  1, whole_old_row);
				else
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, NULL, 0, false);
			}
			if (oldtuple != NULL)
			{
				if (plugin_key_image(state, feed, oldtuple, desc, NULL))
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, &state->image,
									  -1, whole_old_row);
				else
					capture_carry_key(cap, txn->xid, txn->final_lsn, feed, NULL, 0, false);
			}
		}
		return;
	}

	capture_count_change(cap, txn->xact_time.commit_time, entry->feeds, entry->nfeeds);

	for (int i = 0; i < entry->nfeeds; i++)
	{
		SourceFeed *feed = &entry->feeds[i];
		DirtyKey   *newkey = NULL;
		DirtyKey   *oldkey;

		if (!whole_old_row)
			feed->view_batch->weighed = false;
		if (newtuple != NULL)
		{
			if (plugin_key_image(state, feed, newtuple, desc, oldtuple))
			{
				newkey = capture_key(cap, feed, &state->image, state->values, state->isnull, 1);
				if (newkey != NULL)
					capture_keep_row(cap, feed, newkey, &state->image, relation, newtuple);
			}
			else
				feed->view_batch->weighed = false;
		}
		if (oldtuple != NULL && !plugin_key_image(state, feed, oldtuple, desc, NULL))
			feed->view_batch->weighed = false;
		else if (oldtuple != NULL)
		{
			oldkey = capture_key(cap, feed, &state->image, state->values, state->isnull, -1);
			if (oldkey == NULL || oldkey == newkey)
				continue;
			if (change->action == REORDER_BUFFER_CHANGE_DELETE)
				capture_keep_row(cap, feed, oldkey, &state->image, relation, NULL);
			else
				capture_forget_row(cap, oldkey);	/* moved away (or not captured) */
		}
	}
}

/*
 * Does a view of this relation find its changed rows by a key?  A view
 * recomputed whole (a key of no columns) needs no row of a change, so a
 * DELETE that logs none loses it nothing.
 */
static bool
plugin_feeds_need_keys(const RelEntry *entry)
{
	for (int i = 0; i < entry->nfeeds; i++)
	{
		if (entry->feeds[i].shape.nkeys > 0)
			return true;
	}
	return false;
}

/*
 * A TRUNCATE of one or more relations: mark the sources among them.
 */
static void
plugin_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				int nrelations, Relation relations[],
				ReorderBufferChange *change)
{
	PluginState *state = (PluginState *) ctx->output_plugin_private;
	Capture    *cap = capture_of(ctx);

	if (cap == NULL)
		return;
	plugin_follow_catalog(state, cap);

	for (int r = 0; r < nrelations; r++)
	{
		RelEntry   *entry;

		if (RelationGetRelid(relations[r]) == state->catalog_relid)
		{
			state->relmap_stale = true;
			continue;
		}
		entry = plugin_lookup_relation(state, cap, relations[r]);
		if (entry->nfeeds == 0)
			continue;

		if (!cap->txn_hidden)
			capture_count_change(cap, txn->xact_time.commit_time, entry->feeds,
								 entry->nfeeds);
		for (int i = 0; i < entry->nfeeds; i++)
			capture_truncate(cap, txn->xid, txn->final_lsn, &entry->feeds[i]);
	}
}

/* Logical decoding requires a commit callback; a commit adds nothing. */
static void
plugin_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr commit_lsn)
{
}

/*
 * Relcache invalidation: the relation map may describe relations as they no
 * longer are (a partition attached or detached).  Only flag it here; we may
 * be in the middle of building an entry.
 */
static void
plugin_relcache_callback(Datum arg, Oid relid)
{
	if (active_state != NULL)
		active_state->relmap_stale = true;
}

/* ----------------
 * The relation map
 * ----------------
 */

/*
 * Find source_catalog and its relid index by name.  Without them (the
 * extension is not installed) nothing is a source.
 */
static void
plugin_resolve_catalog(PluginState *state)
{
	Oid			nspid = get_namespace_oid(DJ_SCHEMA, true);

	state->catalog_relid = InvalidOid;
	state->catalog_index = InvalidOid;
	if (OidIsValid(nspid))
	{
		state->catalog_relid = get_relname_relid("source_catalog", nspid);
		state->catalog_index = get_relname_relid("source_catalog_relid_idx",
												 nspid);
	}

	/*
	 * A catalog dropped since (with its extension) cannot be opened, and
	 * its views are gone: nothing of that time is captured.
	 */
	if (state->catalog_relid != state->live_catalog)
	{
		state->catalog_relid = InvalidOid;
		state->catalog_index = InvalidOid;
	}
	state->catalog_resolved = true;
}

/*
 * Before each change: when the catalogs changed (a new historic snapshot),
 * the relation map may be out of date, and the extension may even have
 * been dropped and created again, with a new source_catalog.
 */
static void
plugin_follow_catalog(PluginState *state, Capture *cap)
{
	Snapshot	snapshot = GetCatalogSnapshot(InvalidOid);

	if (cap->live_catalog != state->live_catalog)
	{
		state->live_catalog = cap->live_catalog;
		state->relmap_stale = true;
		state->catalog_resolved = false;
	}

	if (snapshot->xmin != state->snap_xmin ||
		snapshot->xmax != state->snap_xmax ||
		snapshot->xcnt != state->snap_xcnt)
	{
		state->snap_xmin = snapshot->xmin;
		state->snap_xmax = snapshot->xmax;
		state->snap_xcnt = snapshot->xcnt;
		state->relmap_stale = true;
		state->catalog_resolved = false;
	}
	if (!state->catalog_resolved)
		plugin_resolve_catalog(state);
}

/*
 * The relation map entry of a decoded relation, built if missing, after
 * dropping the map if it may be out of date.
 */
static RelEntry *
plugin_lookup_relation(PluginState *state, Capture *cap, Relation relation)
{
	Oid			relid = RelationGetRelid(relation);
	RelEntry   *entry;
	bool		found;

	if (state->relmap_stale)
	{
		MemoryContextReset(state->cache_cxt);
		state->relmap = NULL;
		state->relmap_stale = false;
	}

	if (state->relmap == NULL)
	{
		HASHCTL		hctl;

		hctl.keysize = sizeof(Oid);
		hctl.entrysize = sizeof(RelEntry);
		hctl.hcxt = state->cache_cxt;
		state->relmap = hash_create("delta_join relation map", 64, &hctl,
									HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	entry = hash_search(state->relmap, &relid, HASH_ENTER, &found);
	if (!found)
	{
		entry->nfeeds = 0;
		entry->feeds = NULL;
		plugin_build_entry(state, cap, relation, entry);
	}
	return entry;
}

/* Attribute number of a live column by name, or InvalidAttrNumber */
static AttrNumber
column_attnum(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
}

static int
feed_cmp(const void *a, const void *b)
{
	const SourceFeed *fa = (const SourceFeed *) a;
	const SourceFeed *fb = (const SourceFeed *) b;

	if (fa->view_id != fb->view_id)
		return fa->view_id < fb->view_id ? -1 : 1;
	if (fa->ordinal != fb->ordinal)
		return fa->ordinal < fb->ordinal ? -1 : 1;
	return 0;
}

/*
 * Is relid in pg_class as the present sees it, whatever the historic
 * snapshot of the change being decoded sees?
 */
static bool
relation_exists_now(Oid relid)
{
	Relation	pg_class = table_open(RelationRelationId, AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetNonHistoricCatalogSnapshot(RelationRelationId));
	ScanKeyData key;
	SysScanDesc scan;
	bool		found;

	ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_class, ClassOidIndexId, true, snapshot, 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(pg_class, AccessShareLock);
	return found;
}

/*
 * Read source_catalog, as of the change being decoded, for the rows naming
 * this relation or (for a partition) one of its ancestors, and fill the
 * entry with what they say, key columns mapped to this relation's attnums
 * (through their names: a partition may order its columns otherwise).
 */
static void
plugin_build_entry(PluginState *state, Capture *cap, Relation relation, RelEntry *entry)
{
	Oid			relid = RelationGetRelid(relation);
	TupleDesc	desc = RelationGetDescr(relation);
	List	   *candidates;
	ListCell   *lc;
	Relation	catrel;
	SourceFeed *feeds;
	int			nfeeds = 0;
	int			maxfeeds = 4;

	if (!OidIsValid(state->catalog_relid))
		return;

	/*
	 * The catalog of the change's time must also be there now.  Building its
	 * relcache entry under decoding's historic snapshot reads its file's
	 * number from the present pg_class (RelationInitPhysicalAddr, for a
	 * table decoding may read), which fails once the extension was dropped
	 * after the batch began; its views went with it, and nothing of that
	 * time is captured.  Locked first, it stays until the entry is built.
	 */
	LockRelationOid(state->catalog_relid, AccessShareLock);
	if (!relation_exists_now(state->catalog_relid) ||
		(catrel = try_relation_open(state->catalog_relid, NoLock)) == NULL)
	{
		UnlockRelationOid(state->catalog_relid, AccessShareLock);
		return;
	}

	candidates = list_make1_oid(relid);
	if (relation->rd_rel->relispartition)
		candidates = list_concat(candidates, get_partition_ancestors(relid));

	feeds = MemoryContextAlloc(state->cache_cxt, maxfeeds * sizeof(SourceFeed));
	foreach(lc, candidates)
	{
		Oid			source_relid = lfirst_oid(lc);
		ListCell   *lc2;

		foreach(lc2, catalog_decode_sources(catrel, state->catalog_index, source_relid))
		{
			SourceKeys *keys = lfirst(lc2);
			SourceFeed *feed;
			bool		complete = true;
			int			n = Max(keys->nkeys, 1);

			/* a lookup-only source is read, never driven by its changes */
			if (keys->lookup_only)
				continue;

			if (nfeeds == maxfeeds)
			{
				maxfeeds *= 2;
				feeds = repalloc(feeds, maxfeeds * sizeof(SourceFeed));
			}
			feed = &feeds[nfeeds];
			memset(feed, 0, sizeof(SourceFeed));
			feed->view_id = keys->view_id;
			feed->ordinal = keys->ordinal;
			feed->source_relid = source_relid;
			feed->shape.nkeys = keys->nkeys;
			feed->shape.typlen = MemoryContextAlloc(state->cache_cxt, n * sizeof(int16));
			feed->shape.typbyval = MemoryContextAlloc(state->cache_cxt, n * sizeof(bool));
			feed->attnums = MemoryContextAlloc(state->cache_cxt, n * sizeof(AttrNumber));
			for (int k = 0; k < keys->nkeys; k++)
			{
				char	   *name = get_attname(source_relid, keys->key_attnums[k], true);
				AttrNumber	attnum = name ? column_attnum(desc, name) : InvalidAttrNumber;
				Form_pg_attribute att;

				if (attnum == InvalidAttrNumber)
				{
					/* copied first: the lookup may rebuild relation's entry */
					char	   *table = pstrdup(RelationGetRelationName(relation));

					capture_broken(cap, feed->view_id,
								   psprintf("key column %d of source \"%s\" no longer exists in \"%s\"",
											keys->key_attnums[k], get_rel_name(source_relid),
											table));
					complete = false;
					break;
				}
				att = TupleDescAttr(desc, attnum - 1);
				feed->attnums[k] = attnum;
				feed->shape.typlen[k] = att->attlen;
				feed->shape.typbyval[k] = att->attbyval;
			}
			if (complete)
				nfeeds++;
		}
	}
	table_close(catrel, AccessShareLock);

	if (nfeeds > 1)
		qsort(feeds, nfeeds, sizeof(SourceFeed), feed_cmp);
	entry->feeds = feeds;
	entry->nfeeds = nfeeds;
}

/* ----------------
 * Keys of tuples
 * ----------------
 */

/*
 * The key of one tuple for a feed: its values in state->values and
 * state->isnull (detoasted), its image in state->image.  False when it is
 * not captured.
 *
 * A value stored out of line that an UPDATE left unchanged comes in the
 * new tuple as a pointer to the stored value, which decoding cannot read.
 * The old tuple (oldtuple, of an UPDATE) has it when the column is in the
 * replica identity: logged with it, whole.  A value the old tuple does not
 * have (not in the replica identity, or no old tuple logged: the identity
 * did not change) leaves the new key uncaptured; the old tuple's key, when
 * logged, is captured on its own.
 */
static bool
plugin_key_image(PluginState *state, SourceFeed *feed, HeapTuple tuple, TupleDesc desc,
				 HeapTuple oldtuple)
{
	if (feed->shape.nkeys > state->maxkeys)
	{
		int			n = Max(feed->shape.nkeys, 2 * state->maxkeys);

		if (state->values != NULL)
		{
			pfree(state->values);
			pfree(state->isnull);
		}
		state->values = MemoryContextAlloc(state->context, n * sizeof(Datum));
		state->isnull = MemoryContextAlloc(state->context, n * sizeof(bool));
		state->maxkeys = n;
	}

	for (int k = 0; k < feed->shape.nkeys; k++)
	{
		Datum		value;
		bool		isnull;

		value = heap_getattr(tuple, feed->attnums[k], desc, &isnull);
		state->isnull[k] = isnull;
		state->values[k] = value;
		if (!isnull && feed->shape.typlen[k] == -1)
		{
			struct varlena *v = (struct varlena *) DatumGetPointer(value);

			if (VARATT_IS_EXTERNAL_ONDISK(v) && oldtuple != NULL)
			{
				/* unchanged: NULL in the old tuple means not logged */
				value = heap_getattr(oldtuple, feed->attnums[k], desc, &isnull);
				if (isnull || VARATT_IS_EXTERNAL_ONDISK(DatumGetPointer(value)))
					return false;
				v = (struct varlena *) DatumGetPointer(value);
				state->values[k] = value;
			}
			else if (VARATT_IS_EXTERNAL_ONDISK(v))
			{
				elog(WARNING, "key of view %d in relation %u is stored out of line and was not logged; the change is not captured",
					 feed->view_id, feed->source_relid);
				return false;
			}
			if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
				state->values[k] = PointerGetDatum(detoast_attr(v));
		}
	}

	resetStringInfo(&state->image);
	dirty_key_image(&state->image, &feed->shape, state->values, state->isnull);
	return true;
}
