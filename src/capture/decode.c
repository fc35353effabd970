/*-------------------------------------------------------------------------
 *
 * decode.c
 *	  The output plugin: turns decoded changes of sources into dirty keys.
 *
 * The library is its own logical decoding output plugin (the plugin name is
 * the library name, DJ_PLUGIN_NAME).  Only the apply worker decodes with it:
 * it passes a DecodeCapture in output_writer_private, and the callbacks add
 * to it.  Nothing is written as text; with any other writer (say, someone
 * calling pg_logical_slot_get_changes on our slot) the callbacks do nothing.
 *
 * For each INSERT, UPDATE or DELETE of a source, the values of the source's
 * key columns (source_catalog.key_columns) are taken from the new tuple and,
 * where one is logged (DELETE; an UPDATE that changed the replica identity,
 * or any change under REPLICA IDENTITY FULL), from the old tuple, and added
 * to the capture as a dirty key of every (view, source) the relation feeds.
 * A TRUNCATE of a source marks its SourceBatch truncated.
 *
 * The key of a row's last change in the batch also keeps the row that change
 * left (batch.h, DirtyKey.row), so that the join applier need not fetch it:
 * the new tuple of an INSERT or UPDATE, nothing after a DELETE.  Not when
 * the row could not be read later as it is: a row of a partition (the
 * applier reads rows in the root's row type), one with a TOASTed value (its
 * pointer leads into the reorder buffer, or to a value that may be gone), a
 * key with NULLs (several rows may share it), or beyond DECODED_ROWS_MAX
 * bytes of rows in memory; nor after a TRUNCATE of the source, or an UPDATE
 * that moved the row from the key.  Those keys' rows are fetched.
 *
 * Rules the callbacks live by:
 *
 *	- They run while the reorder buffer replays a committed transaction,
 *	  inside a subtransaction that is rolled back afterwards and under a
 *	  historic snapshot: catalogs (and delta_join.source_catalog, a
 *	  user_catalog_table) read as of the change; nothing is written.
 *	- Memory: CurrentMemoryContext is freed after each change.  Dirty keys
 *	  are copied, detoasted, into the capture's keys context, which a spill
 *	  to disk empties (decode.h); the relation map lives in
 *	  DecodeState.cache_cxt, under the decoding context.
 *
 * The relation map caches, per relation as decoded (a leaf partition for a
 * partitioned source), the (view, source) pairs it feeds and where their key
 * columns are in that relation, so that the common case -- a change of a
 * relation that is no source at all, such as the worker's own writes to a
 * target -- costs one hash lookup.  The map is what source_catalog said
 * under one historic snapshot; it is thrown away when a change of
 * source_catalog itself is decoded, when a relcache invalidation arrives,
 * and when the historic snapshot in force sees a different set of committed
 * catalog transactions (its xmin, xmax and xcnt differ), so that no change
 * is judged by a catalog it did not see.
 *
 * IDENTIFICATION
 *	  src/capture/decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "replication/logical.h"
#include "replication/output_plugin.h"
#include "replication/reorderbuffer.h"
#include "utils/array.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/batch.h"
#include "registry/catalog.h"
#include "capture/decode.h"
#include "base/delta_join.h"

extern PGDLLEXPORT void _PG_output_plugin_init(OutputPluginCallbacks *cb);

/* Bytes of decoded rows a capture keeps in memory, at most */
#define DECODED_ROWS_MAX	(64 * 1024 * 1024)

/* One (view, source) a decoded relation feeds. */
typedef struct SourceTarget
{
	int			view_id;
	int			ordinal;
	Oid			source_relid;	/* as registered: the root if partitioned */
	int			nkeys;
	AttrNumber *attnums;		/* key columns in the decoded relation */
	int16	   *typlen;
	bool	   *typbyval;

	/* this target's place in the batch of that capture generation */
	uint64		generation;
	SourceBatch *source_batch;
	ViewBatch  *view_batch;
} SourceTarget;

/* Relation map entry: what one decoded relation feeds (often nothing). */
typedef struct RelEntry
{
	Oid			relid;			/* hash key */
	int			ntargets;
	SourceTarget *targets;		/* sorted by view_id, ordinal */
} RelEntry;

/* The plugin's private state (output_plugin_private). */
typedef struct DecodeState
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
} DecodeState;

typedef struct SourceTag
{
	int			view_id;
	int			ordinal;
} SourceTag;

typedef struct SourceEntry
{
	SourceTag	tag;			/* hash key */
	SourceBatch *batch;
} SourceEntry;

typedef struct ViewEntry
{
	int			view_id;		/* hash key */
	ViewBatch  *batch;
} ViewEntry;

/* The state of the decoding context in use in this process, if any */
static DecodeState *active_state = NULL;
static bool relcache_callback_registered = false;

/* Relations whose deletes could not be captured, reported once each */
static List *warned_relids = NIL;

static void decode_startup(LogicalDecodingContext *ctx,
						   OutputPluginOptions *opt, bool is_init);
static void decode_shutdown(LogicalDecodingContext *ctx);
static void decode_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn);
static void decode_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  Relation relation, ReorderBufferChange *change);
static void decode_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
							int nrelations, Relation relations[],
							ReorderBufferChange *change);
static void decode_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
						  XLogRecPtr commit_lsn);
static void decode_relcache_callback(Datum arg, Oid relid);
static void decode_resolve_catalog(DecodeState *state);
static void decode_follow_catalog(DecodeState *state, DecodeCapture *cap);
static RelEntry *decode_lookup_relation(DecodeState *state, DecodeCapture *cap,
										Relation relation);
static void decode_build_entry(DecodeState *state, DecodeCapture *cap,
							   Relation relation, RelEntry *entry);
static void decode_report_broken(DecodeCapture *cap, int view_id,
								 char *message);
static DirtyKey *decode_capture_key(DecodeState *state, DecodeCapture *cap,
							   SourceTarget *target, HeapTuple tuple,
							   TupleDesc desc, bool skip_unchanged_toast);
static bool decode_key_image(DecodeState *state, SourceTarget *target, HeapTuple tuple,
							 TupleDesc desc, bool skip_unchanged_toast);
static void decode_keep_row(DecodeState *state, DecodeCapture *cap, SourceTarget *target,
							DirtyKey *key, Relation relation, HeapTuple tuple);
static void decode_carry_key(DecodeState *state, DecodeCapture *cap, ReorderBufferTXN *txn,
							 SourceTarget *target, HeapTuple tuple, TupleDesc desc,
							 bool skip_unchanged_toast);
static void decode_carry(DecodeCapture *cap, ReorderBufferTXN *txn, SourceTarget *target,
						 StringInfo image);
static void decode_carried_in(DecodeCapture *cap, CarriedKey *ck);
static void decode_forget_row(DecodeCapture *cap, DirtyKey *key);
static void decode_target_batch(DecodeCapture *cap, SourceTarget *target);
static void decode_spill_keys(DecodeCapture *cap);
static void decode_count_change(DecodeCapture *cap, ReorderBufferTXN *txn,
								RelEntry *entry);

/*
 * Plugin entry point, found by name when a decoding context is set up.
 */
void
_PG_output_plugin_init(OutputPluginCallbacks *cb)
{
	cb->startup_cb = decode_startup;
	cb->begin_cb = decode_begin;
	cb->change_cb = decode_change;
	cb->truncate_cb = decode_truncate;
	cb->commit_cb = decode_commit;
	cb->shutdown_cb = decode_shutdown;
}

/* The capture to add to, or NULL when decoding for someone else */
static inline DecodeCapture *
capture_of(LogicalDecodingContext *ctx)
{
	DecodeCapture *cap = (DecodeCapture *) ctx->output_writer_private;

	if (cap == NULL || cap->magic != DECODE_CAPTURE_MAGIC)
		return NULL;
	return cap;
}

/* ----------------
 * Callbacks
 * ----------------
 */

/*
 * Set up the plugin state in the decoding context's memory (the current
 * context here), and look up our catalog while a transaction is open.
 */
static void
decode_startup(LogicalDecodingContext *ctx, OutputPluginOptions *opt,
			   bool is_init)
{
	DecodeState *state = palloc0(sizeof(DecodeState));

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
		CacheRegisterRelcacheCallback(decode_relcache_callback, (Datum) 0);
		relcache_callback_registered = true;
	}
	active_state = state;
}

static void
decode_shutdown(LogicalDecodingContext *ctx)
{
	if (active_state == ctx->output_plugin_private)
		active_state = NULL;
}

/*
 * A transaction's changes are about to be replayed: does the batch's
 * snapshot see it?  Its changes are carried to the next batch if not.
 */
static void
decode_begin(LogicalDecodingContext *ctx, ReorderBufferTXN *txn)
{
	DecodeCapture *cap = capture_of(ctx);

	if (cap == NULL)
		return;
	cap->txn_hidden = (cap->snapshot != NULL &&
					   XidInMVCCSnapshot(txn->xid, cap->snapshot));
}

/*
 * An INSERT, UPDATE or DELETE: capture the dirty keys it makes.
 */
static void
decode_change(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  Relation relation, ReorderBufferChange *change)
{
	DecodeState *state = (DecodeState *) ctx->output_plugin_private;
	DecodeCapture *cap = capture_of(ctx);
	RelEntry   *entry;
	TupleDesc	desc;
	HeapTuple	newtuple = NULL;
	HeapTuple	oldtuple = NULL;
	int			i;

	if (cap == NULL)
		return;
	decode_follow_catalog(state, cap);

	/* A change of the catalog: later changes must be judged afresh. */
	if (RelationGetRelid(relation) == state->catalog_relid)
	{
		state->relmap_stale = true;
		return;
	}

	entry = decode_lookup_relation(state, cap, relation);
	if (entry->ntargets == 0)
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
			else if (!list_member_oid(warned_relids, RelationGetRelid(relation)))
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
	if (cap->txn_hidden)
	{
		for (i = 0; i < entry->ntargets; i++)
		{
			if (newtuple != NULL)
				decode_carry_key(state, cap, txn, &entry->targets[i], newtuple, desc,
								 oldtuple != NULL);
			if (oldtuple != NULL)
				decode_carry_key(state, cap, txn, &entry->targets[i], oldtuple, desc,
								 false);
		}
		return;
	}

	decode_count_change(cap, txn, entry);
	for (i = 0; i < entry->ntargets; i++)
	{
		SourceTarget *target = &entry->targets[i];
		DirtyKey   *newkey = NULL;
		DirtyKey   *oldkey;

		/*
		 * An unchanged TOASTed key value comes as a pointer to the stored
		 * value; the old tuple, which is then logged, has it.
		 */
		if (newtuple != NULL)
		{
			newkey = decode_capture_key(state, cap, target, newtuple, desc,
										oldtuple != NULL);
			if (newkey != NULL)
				decode_keep_row(state, cap, target, newkey, relation, newtuple);
		}
		if (oldtuple != NULL)
		{
			oldkey = decode_capture_key(state, cap, target, oldtuple, desc, false);
			if (oldkey == NULL || oldkey == newkey)
				continue;
			if (change->action == REORDER_BUFFER_CHANGE_DELETE)
				decode_keep_row(state, cap, target, oldkey, relation, NULL);
			else
				decode_forget_row(cap, oldkey);	/* moved away (or not captured) */
		}
	}
}

/* The key's row is to be fetched */
static void
decode_forget_row(DecodeCapture *cap, DirtyKey *key)
{
	if (key->row != NULL)
	{
		cap->row_bytes -= key->row->t_len;
		heap_freetuple(key->row);
		key->row = NULL;
	}
	key->row_known = false;
}

/*
 * The key's last change left this row (NULL: deleted it), in the row type
 * of relation.  Kept when it can be read later as it is (see the top of the
 * file); otherwise the row is to be fetched.
 */
static void
decode_keep_row(DecodeState *state, DecodeCapture *cap, SourceTarget *target,
				DirtyKey *key, Relation relation, HeapTuple tuple)
{
	SourceBatch *sb = target->source_batch;
	TupleDesc	desc = RelationGetDescr(relation);
	MemoryContext oldcxt;

	decode_forget_row(cap, key);
	if (RelationGetRelid(relation) != sb->relid)
		return;

	/* a transaction the snapshot does not see changed it (state->image) */
	if (cap->hidden_keys != NULL &&
		key_set_find(cap->hidden_keys, target->view_id, target->ordinal,
					 &state->image) != NULL)
		return;
	for (int k = 0; k < sb->nkeys; k++)
	{
		if (key->isnull[k])
			return;
	}
	if (tuple == NULL)
	{
		key->row_known = true;
		return;
	}
	if (HeapTupleHasExternal(tuple) || sb->rows_off ||
		cap->row_bytes + tuple->t_len > DECODED_ROWS_MAX)
		return;

	if (sb->rowdesc == NULL)
	{
		oldcxt = MemoryContextSwitchTo(cap->batch_cxt);
		sb->rowdesc = CreateTupleDescCopy(desc);
		MemoryContextSwitchTo(oldcxt);
	}
	else if (!row_type_fits(sb->rowdesc, desc))
	{
		/* a column changed in the batch: no rows at all */
		sb->rows_off = true;
		return;
	}

	oldcxt = MemoryContextSwitchTo(cap->keys_cxt);
	key->row = heap_copytuple(tuple);
	MemoryContextSwitchTo(oldcxt);
	key->row_known = true;
	cap->row_bytes += tuple->t_len;
}

/*
 * A TRUNCATE of one or more relations: mark the sources among them.
 */
static void
decode_truncate(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
				int nrelations, Relation relations[],
				ReorderBufferChange *change)
{
	DecodeState *state = (DecodeState *) ctx->output_plugin_private;
	DecodeCapture *cap = capture_of(ctx);
	int			r;

	if (cap == NULL)
		return;
	decode_follow_catalog(state, cap);

	for (r = 0; r < nrelations; r++)
	{
		RelEntry   *entry;
		int			i;

		if (RelationGetRelid(relations[r]) == state->catalog_relid)
		{
			state->relmap_stale = true;
			continue;
		}
		entry = decode_lookup_relation(state, cap, relations[r]);
		if (entry->ntargets == 0)
			continue;

		if (cap->txn_hidden)
		{
			for (i = 0; i < entry->ntargets; i++)
				decode_carry(cap, txn, &entry->targets[i], NULL);
			continue;
		}
		decode_count_change(cap, txn, entry);
		for (i = 0; i < entry->ntargets; i++)
		{
			SourceBatch *sb;
			ListCell   *lc;

			decode_target_batch(cap, &entry->targets[i]);
			sb = entry->targets[i].source_batch;
			sb->truncated = true;
			foreach(lc, sb->keys)
				decode_forget_row(cap, lfirst(lc));
		}
	}
}

static void
decode_commit(LogicalDecodingContext *ctx, ReorderBufferTXN *txn,
			  XLogRecPtr commit_lsn)
{
	DecodeCapture *cap = capture_of(ctx);

	if (cap == NULL)
		return;
	cap->last_commit_lsn = commit_lsn;
	cap->last_commit_time = txn->xact_time.commit_time;
}

/*
 * Relcache invalidation: the relation map may describe relations as they no
 * longer are (a partition attached or detached).  Only flag it here; we may
 * be in the middle of building an entry.
 */
static void
decode_relcache_callback(Datum arg, Oid relid)
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
decode_resolve_catalog(DecodeState *state)
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
decode_follow_catalog(DecodeState *state, DecodeCapture *cap)
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
		decode_resolve_catalog(state);
}

/*
 * The relation map entry of a decoded relation, built if missing, after
 * dropping the map if it may be out of date.
 */
static RelEntry *
decode_lookup_relation(DecodeState *state, DecodeCapture *cap,
					   Relation relation)
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
		entry->ntargets = 0;
		entry->targets = NULL;
		decode_build_entry(state, cap, relation, entry);
	}
	return entry;
}

/* Attribute number of a live column by name, or InvalidAttrNumber */
static AttrNumber
column_attnum(TupleDesc desc, const char *name)
{
	int			i;

	for (i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att->attnum;
	}
	return InvalidAttrNumber;
}

static int
target_cmp(const void *a, const void *b)
{
	const SourceTarget *ta = (const SourceTarget *) a;
	const SourceTarget *tb = (const SourceTarget *) b;

	if (ta->view_id != tb->view_id)
		return ta->view_id < tb->view_id ? -1 : 1;
	if (ta->ordinal != tb->ordinal)
		return ta->ordinal < tb->ordinal ? -1 : 1;
	return 0;
}

/*
 * Read source_catalog, as of the change being decoded, for the rows naming
 * this relation or (for a partition) one of its ancestors, and fill the
 * entry with what they say, key columns mapped to this relation's attnums
 * (through their names: a partition may order its columns otherwise).
 */
static void
decode_build_entry(DecodeState *state, DecodeCapture *cap, Relation relation,
				   RelEntry *entry)
{
	Oid			relid = RelationGetRelid(relation);
	TupleDesc	desc = RelationGetDescr(relation);
	List	   *candidates;
	ListCell   *lc;
	Relation	catrel;
	SourceTarget *targets;
	int			ntargets = 0;
	int			maxtargets = 4;

	if (!OidIsValid(state->catalog_relid))
		return;
	catrel = try_relation_open(state->catalog_relid, AccessShareLock);
	if (catrel == NULL)
		return;

	candidates = list_make1_oid(relid);
	if (relation->rd_rel->relispartition)
		candidates = list_concat(candidates, get_partition_ancestors(relid));

	targets = MemoryContextAlloc(state->cache_cxt,
								 maxtargets * sizeof(SourceTarget));
	foreach(lc, candidates)
	{
		Oid			source_relid = lfirst_oid(lc);
		ListCell   *lc2;

		foreach(lc2, catalog_decode_sources(catrel, state->catalog_index, source_relid))
		{
			SourceKeys *keys = lfirst(lc2);
			SourceTarget *target;
			bool		complete = true;
			int			k;

			/* a lookup-only source is read, never driven by its changes */
			if (keys->lookup_only)
				continue;

			if (ntargets == maxtargets)
			{
				maxtargets *= 2;
				targets = repalloc(targets, maxtargets * sizeof(SourceTarget));
			}
			target = &targets[ntargets];
			memset(target, 0, sizeof(SourceTarget));
			target->view_id = keys->view_id;
			target->ordinal = keys->ordinal;
			target->source_relid = source_relid;
			target->nkeys = keys->nkeys;
			target->attnums = MemoryContextAlloc(state->cache_cxt,
												 Max(keys->nkeys, 1) * sizeof(AttrNumber));
			target->typlen = MemoryContextAlloc(state->cache_cxt,
												Max(keys->nkeys, 1) * sizeof(int16));
			target->typbyval = MemoryContextAlloc(state->cache_cxt,
												  Max(keys->nkeys, 1) * sizeof(bool));
			for (k = 0; k < keys->nkeys; k++)
			{
				char	   *name = get_attname(source_relid, keys->key_attnums[k], true);
				AttrNumber	attnum = name ? column_attnum(desc, name) : InvalidAttrNumber;
				Form_pg_attribute att;

				if (attnum == InvalidAttrNumber)
				{
					decode_report_broken(cap, target->view_id,
										 psprintf("key column %d of source \"%s\" no longer exists in \"%s\"",
												  keys->key_attnums[k], get_rel_name(source_relid),
												  RelationGetRelationName(relation)));
					complete = false;
					break;
				}
				att = TupleDescAttr(desc, attnum - 1);
				target->attnums[k] = attnum;
				target->typlen[k] = att->attlen;
				target->typbyval[k] = att->attbyval;
			}
			if (complete)
				ntargets++;
		}
	}
	table_close(catrel, AccessShareLock);

	if (ntargets > 1)
		qsort(targets, ntargets, sizeof(SourceTarget), target_cmp);
	entry->targets = targets;
	entry->ntargets = ntargets;
}

/*
 * Note in the capture that a view's changes cannot be captured; the worker
 * puts the view in error.
 */
static void
decode_report_broken(DecodeCapture *cap, int view_id, char *message)
{
	MemoryContext oldcxt;
	BrokenView *broken;
	ListCell   *lc;

	foreach(lc, cap->broken)
	{
		if (((BrokenView *) lfirst(lc))->view_id == view_id)
			return;
	}

	oldcxt = MemoryContextSwitchTo(cap->batch_cxt);
	broken = palloc(sizeof(BrokenView));
	broken->view_id = view_id;
	broken->message = pstrdup(message);
	cap->broken = lappend(cap->broken, broken);
	if (cap->first_change_time == 0)
		cap->first_change_time = GetCurrentTimestamp();
	MemoryContextSwitchTo(oldcxt);
}

/* ----------------
 * Capturing keys
 * ----------------
 */

/*
 * Empty the capture and set it up anew in batch_cxt, which the caller has
 * just created or reset.
 */
void
decode_capture_reset(DecodeCapture *cap, MemoryContext batch_cxt)
{
	HASHCTL		hctl;
	uint64		generation = cap->generation;
	int64		spill_at = cap->spill_at;
	MemoryContext carry_cxt = cap->carry_cxt;
	List	   *carried = cap->carried;

	Assert(cap->spills == NIL);
	memset(cap, 0, sizeof(DecodeCapture));
	cap->magic = DECODE_CAPTURE_MAGIC;
	cap->batch_cxt = batch_cxt;
	cap->generation = generation + 1;
	cap->spill_at = spill_at;

	/* what is carried outlives the batch: beside it, under the same parent */
	if (carry_cxt == NULL)
		carry_cxt = AllocSetContextCreate(MemoryContextGetParent(batch_cxt),
										  "delta_join carried keys",
										  ALLOCSET_SMALL_SIZES);
	cap->carry_cxt = carry_cxt;
	cap->carried = carried;

	cap->keys_cxt = AllocSetContextCreate(batch_cxt, "delta_join dirty keys",
										  ALLOCSET_DEFAULT_SIZES);
	cap->keys = key_set_create(cap->keys_cxt);

	hctl.keysize = sizeof(SourceTag);
	hctl.entrysize = sizeof(SourceEntry);
	hctl.hcxt = batch_cxt;
	cap->sources = hash_create("delta_join batch sources", 16, &hctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	hctl.keysize = sizeof(int);
	hctl.entrysize = sizeof(ViewEntry);
	cap->views = hash_create("delta_join batch views", 16, &hctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* True when nothing has been captured since the last reset */
bool
decode_capture_is_empty(DecodeCapture *cap)
{
	return cap->nchanges == 0 && cap->broken == NIL;
}

/*
 * The batch will be applied under snapshot: the transactions it does not
 * see are carried to the next batch as they are decoded, and what earlier
 * batches carried is put in this one, if the snapshot sees it now, or
 * carried on.  Before the batch decodes anything.
 */
void
decode_capture_set_snapshot(DecodeCapture *cap, Snapshot snapshot)
{
	List	   *carried = cap->carried;
	MemoryContext old_cxt = cap->carry_cxt;
	ListCell   *lc;

	cap->snapshot = snapshot;
	if (carried == NIL)
		return;

	cap->carried = NIL;
	cap->carry_cxt = AllocSetContextCreate(MemoryContextGetParent(old_cxt),
										   "delta_join carried keys",
										   ALLOCSET_SMALL_SIZES);
	foreach(lc, carried)
	{
		CarriedKey *ck = lfirst(lc);

		if (XidInMVCCSnapshot(ck->xid, snapshot))
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(cap->carry_cxt);
			CarriedKey *copy = palloc(sizeof(CarriedKey));

			*copy = *ck;
			copy->typlen = palloc(Max(ck->nkeys, 1) * sizeof(int16));
			copy->typbyval = palloc(Max(ck->nkeys, 1) * sizeof(bool));
			memcpy(copy->typlen, ck->typlen, ck->nkeys * sizeof(int16));
			memcpy(copy->typbyval, ck->typbyval, ck->nkeys * sizeof(bool));
			if (ck->image != NULL)
			{
				copy->image = palloc(Max(ck->len, 1));
				memcpy(copy->image, ck->image, ck->len);
			}
			cap->carried = lappend(cap->carried, copy);
			MemoryContextSwitchTo(oldcxt);
		}
		else
			decode_carried_in(cap, ck);
	}
	MemoryContextDelete(old_cxt);
}

/* Put a carried key (or TRUNCATE) whose transaction is now seen in the batch */
static void
decode_carried_in(DecodeCapture *cap, CarriedKey *ck)
{
	SourceTarget target;

	memset(&target, 0, sizeof(target));
	target.view_id = ck->view_id;
	target.ordinal = ck->ordinal;
	target.source_relid = ck->relid;
	target.nkeys = ck->nkeys;
	target.typlen = ck->typlen;
	target.typbyval = ck->typbyval;
	decode_target_batch(cap, &target);

	if (cap->first_change_time == 0)
		cap->first_change_time = GetCurrentTimestamp();
	cap->nchanges++;
	target.view_batch->changes++;

	if (ck->truncated)
		target.source_batch->truncated = true;
	else
	{
		StringInfoData image;
		DirtyKey  **slot;

		image.data = ck->image;
		image.len = ck->len;
		slot = key_set_enter(cap->keys, ck->view_id, ck->ordinal, &image, cap->keys_cxt);
		if (*slot == NULL)
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(cap->keys_cxt);
			uint32		used;

			*slot = dirty_key_from_image(target.source_batch, ck->image, &used);
			target.source_batch->keys = lappend(target.source_batch->keys, *slot);
			cap->nkeys++;
			MemoryContextSwitchTo(oldcxt);
			if (cap->spill_at > 0 && cap->nkeys >= cap->spill_at)
				decode_spill_keys(cap);
		}
	}
}

/* Where the first transaction whose keys are carried commits, or invalid */
XLogRecPtr
decode_capture_carried_lsn(DecodeCapture *cap)
{
	XLogRecPtr	lsn = InvalidXLogRecPtr;
	ListCell   *lc;

	foreach(lc, cap->carried)
	{
		CarriedKey *ck = lfirst(lc);

		if (XLogRecPtrIsInvalid(lsn) || ck->commit_lsn < lsn)
			lsn = ck->commit_lsn;
	}
	return lsn;
}

/*
 * The key of a tuple of a transaction the batch's snapshot does not see:
 * carry it to the next batch, and keep no row for it in this one.
 */
static void
decode_carry_key(DecodeState *state, DecodeCapture *cap, ReorderBufferTXN *txn,
				 SourceTarget *target, HeapTuple tuple, TupleDesc desc,
				 bool skip_unchanged_toast)
{
	DirtyKey  **slot;

	if (!decode_key_image(state, target, tuple, desc, skip_unchanged_toast))
		return;
	decode_carry(cap, txn, target, &state->image);

	if (cap->hidden_keys == NULL)
		cap->hidden_keys = key_set_create(cap->batch_cxt);
	(void) key_set_enter(cap->hidden_keys, target->view_id, target->ordinal,
						 &state->image, cap->batch_cxt);
	if (target->generation == cap->generation &&
		(slot = key_set_find(cap->keys, target->view_id, target->ordinal,
							 &state->image)) != NULL &&
		*slot != NULL)
		decode_forget_row(cap, *slot);
}

/* Carry a key's image (NULL: a TRUNCATE of the source) to the next batch */
static void
decode_carry(DecodeCapture *cap, ReorderBufferTXN *txn, SourceTarget *target,
			 StringInfo image)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cap->carry_cxt);
	CarriedKey *ck = palloc0(sizeof(CarriedKey));

	ck->xid = txn->xid;
	ck->commit_lsn = txn->final_lsn;
	ck->view_id = target->view_id;
	ck->ordinal = target->ordinal;
	ck->relid = target->source_relid;
	ck->nkeys = target->nkeys;
	ck->typlen = palloc(Max(target->nkeys, 1) * sizeof(int16));
	ck->typbyval = palloc(Max(target->nkeys, 1) * sizeof(bool));
	memcpy(ck->typlen, target->typlen, target->nkeys * sizeof(int16));
	memcpy(ck->typbyval, target->typbyval, target->nkeys * sizeof(bool));
	if (image == NULL)
		ck->truncated = true;
	else
	{
		ck->len = image->len;
		ck->image = palloc(Max(image->len, 1));
		memcpy(ck->image, image->data, image->len);
	}
	cap->carried = lappend(cap->carried, ck);
	MemoryContextSwitchTo(oldcxt);
}

static int
view_batch_cmp(const ListCell *a, const ListCell *b)
{
	const ViewBatch *va = (const ViewBatch *) lfirst(a);
	const ViewBatch *vb = (const ViewBatch *) lfirst(b);

	return (va->view_id > vb->view_id) - (va->view_id < vb->view_id);
}

/*
 * The captured work, one ViewBatch per view in view_id order, each with its
 * SourceBatches in ordinal order.  Allocated in the batch context.
 */
List *
decode_capture_batches(DecodeCapture *cap)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cap->batch_cxt);
	List	   *result = NIL;
	HASH_SEQ_STATUS status;
	ViewEntry  *ventry;

	hash_seq_init(&status, cap->views);
	while ((ventry = hash_seq_search(&status)) != NULL)
	{
		view_batch_sort_sources(ventry->batch);
		result = lappend(result, ventry->batch);
	}
	list_sort(result, view_batch_cmp);
	MemoryContextSwitchTo(oldcxt);
	return result;
}

/*
 * Point the target at its SourceBatch and ViewBatch in the current capture,
 * creating them on first use.
 */
static void
decode_target_batch(DecodeCapture *cap, SourceTarget *target)
{
	SourceTag	stag;
	SourceEntry *sentry;
	ViewEntry  *ventry;
	bool		found;

	if (target->generation == cap->generation)
		return;

	ventry = hash_search(cap->views, &target->view_id, HASH_ENTER, &found);
	if (!found)
	{
		ventry->batch = MemoryContextAllocZero(cap->batch_cxt, sizeof(ViewBatch));
		ventry->batch->view_id = target->view_id;
	}

	memset(&stag, 0, sizeof(stag));
	stag.view_id = target->view_id;
	stag.ordinal = target->ordinal;
	sentry = hash_search(cap->sources, &stag, HASH_ENTER, &found);
	if (!found)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cap->batch_cxt);

		sentry->batch = palloc0(sizeof(SourceBatch));
		sentry->batch->ordinal = target->ordinal;
		sentry->batch->relid = target->source_relid;
		sentry->batch->nkeys = target->nkeys;
		sentry->batch->typlen = palloc(Max(target->nkeys, 1) * sizeof(int16));
		sentry->batch->typbyval = palloc(Max(target->nkeys, 1) * sizeof(bool));
		memcpy(sentry->batch->typlen, target->typlen, target->nkeys * sizeof(int16));
		memcpy(sentry->batch->typbyval, target->typbyval, target->nkeys * sizeof(bool));
		ventry->batch->sources = lappend(ventry->batch->sources, sentry->batch);
		MemoryContextSwitchTo(oldcxt);
	}

	target->view_batch = ventry->batch;
	target->source_batch = sentry->batch;
	target->generation = cap->generation;
}

/*
 * Count one decoded change of a source: once in the capture, once for each
 * view it feeds (targets are sorted by view), and note the commit time.
 */
static void
decode_count_change(DecodeCapture *cap, ReorderBufferTXN *txn, RelEntry *entry)
{
	int			i;

	if (cap->first_change_time == 0)
		cap->first_change_time = GetCurrentTimestamp();
	cap->nchanges++;

	for (i = 0; i < entry->ntargets; i++)
	{
		SourceTarget *target = &entry->targets[i];
		ViewBatch  *vb;

		decode_target_batch(cap, target);
		if (i > 0 && entry->targets[i - 1].view_id == target->view_id)
			continue;
		vb = target->view_batch;
		vb->changes++;
		if (txn->xact_time.commit_time > vb->commit_time)
			vb->commit_time = txn->xact_time.commit_time;
	}
}

/* The shape of a target's keys, as dirty_key_image and its kin take it */
static SourceBatch *
source_shape(SourceTarget *target)
{
	static SourceBatch shape;

	shape.nkeys = target->nkeys;
	shape.typlen = target->typlen;
	shape.typbyval = target->typbyval;
	return &shape;
}

/*
 * Add the key of one tuple to the target's SourceBatch unless it is there,
 * and return its DirtyKey; NULL if the key was not captured, or went to
 * disk with every key in memory.
 *
 * With skip_unchanged_toast, a key value stored out of line and left
 * unchanged (which decoding hands over as a pointer to the stored value)
 * means the key did not change and is captured from the old tuple: skip it.
 */
static DirtyKey *
decode_capture_key(DecodeState *state, DecodeCapture *cap,
				   SourceTarget *target, HeapTuple tuple, TupleDesc desc,
				   bool skip_unchanged_toast)
{
	DirtyKey  **slot;

	if (!decode_key_image(state, target, tuple, desc, skip_unchanged_toast))
		return NULL;

	decode_target_batch(cap, target);
	slot = key_set_enter(cap->keys, target->view_id, target->ordinal, &state->image,
						 cap->keys_cxt);
	if (*slot == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cap->keys_cxt);
		SourceBatch *sb = target->source_batch;

		*slot = dirty_key_make(sb, state->values, state->isnull);
		sb->keys = lappend(sb->keys, *slot);
		cap->nkeys++;
		MemoryContextSwitchTo(oldcxt);

		if (cap->spill_at > 0 && cap->nkeys >= cap->spill_at)
		{
			decode_spill_keys(cap);
			return NULL;
		}
	}
	return *slot;
}

/*
 * The key of one tuple for a target: its values in state->values and
 * state->isnull (detoasted), its image in state->image.  False when it is
 * not captured (see decode_capture_key).
 */
static bool
decode_key_image(DecodeState *state, SourceTarget *target, HeapTuple tuple,
				 TupleDesc desc, bool skip_unchanged_toast)
{
	int			k;

	if (target->nkeys > state->maxkeys)
	{
		int			n = Max(target->nkeys, 2 * state->maxkeys);

		if (state->values != NULL)
		{
			pfree(state->values);
			pfree(state->isnull);
		}
		state->values = MemoryContextAlloc(state->context, n * sizeof(Datum));
		state->isnull = MemoryContextAlloc(state->context, n * sizeof(bool));
		state->maxkeys = n;
	}

	for (k = 0; k < target->nkeys; k++)
	{
		Datum		value;
		bool		isnull;

		value = heap_getattr(tuple, target->attnums[k], desc, &isnull);
		state->isnull[k] = isnull;
		state->values[k] = value;
		if (!isnull && target->typlen[k] == -1)
		{
			struct varlena *v = (struct varlena *) DatumGetPointer(value);

			if (VARATT_IS_EXTERNAL_ONDISK(v))
			{
				if (skip_unchanged_toast)
					return false;
				elog(WARNING, "key of view %d in relation %u is stored out of line and was not logged; the change is not captured",
					 target->view_id, target->source_relid);
				return false;
			}
			if (VARATT_IS_EXTERNAL(v) || VARATT_IS_COMPRESSED(v))
				state->values[k] = PointerGetDatum(detoast_attr(v));
		}
	}

	resetStringInfo(&state->image);
	dirty_key_image(&state->image, source_shape(target), state->values, state->isnull);
	return true;
}

/* ----------------
 * Spilling keys
 *
 * Each view has a spill file of its own, so that its keys are read back
 * alone, when it is applied.  A spilled key is a record: the source's
 * ordinal (int32), the length of the key's image (uint32) and its image
 * (batch.c).  The shape of each source's key is in its SourceBatch, which
 * stays in memory.
 * ----------------
 */

/* The keys of one view spilled to disk */
typedef struct ViewSpill
{
	int			view_id;
	BufFile    *file;
	int64		nkeys;			/* written */
	int64		nread;			/* read back since the last rewind */
} ViewSpill;

static ViewSpill *
view_spill(DecodeCapture *cap, int view_id, bool create)
{
	ListCell   *lc;
	ViewSpill  *spill;
	MemoryContext oldcxt;

	foreach(lc, cap->spills)
	{
		if (((ViewSpill *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	if (!create)
		return NULL;

	/* it outlives the decoding transaction; closed when the batch ends */
	oldcxt = MemoryContextSwitchTo(cap->batch_cxt);
	spill = palloc0(sizeof(ViewSpill));
	spill->view_id = view_id;
	spill->file = BufFileCreateTemp(true);
	cap->spills = lappend(cap->spills, spill);
	MemoryContextSwitchTo(oldcxt);
	return spill;
}

static void
spill_read(BufFile *file, void *data, size_t len)
{
	if (BufFileRead(file, data, len) != len)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not read the dirty keys spilled to a temporary file")));
}

/* Write the keys the capture holds to the spill files and drop them. */
static void
decode_spill_keys(DecodeCapture *cap)
{
	HASH_SEQ_STATUS status;
	SourceEntry *sentry;
	StringInfoData record;

	initStringInfo(&record);
	hash_seq_init(&status, cap->sources);
	while ((sentry = hash_seq_search(&status)) != NULL)
	{
		SourceBatch *sb = sentry->batch;
		ViewSpill  *spill;
		ListCell   *lc;

		if (sb->keys == NIL)
			continue;
		spill = view_spill(cap, sentry->tag.view_id, true);
		foreach(lc, sb->keys)
		{
			DirtyKey   *key = lfirst(lc);
			int32		ordinal = sentry->tag.ordinal;
			uint32		len = 0;	/* (filled in below) */

			resetStringInfo(&record);
			appendBinaryStringInfo(&record, (char *) &ordinal, sizeof(ordinal));
			appendBinaryStringInfo(&record, (char *) &len, sizeof(len));
			dirty_key_image(&record, sb, key->values, key->isnull);
			len = record.len - sizeof(ordinal) - sizeof(len);
			memcpy(record.data + sizeof(ordinal), &len, sizeof(len));
			BufFileWrite(spill->file, record.data, record.len);
			spill->nkeys++;
		}
		sb->keys = NIL;
	}
	pfree(record.data);

	cap->nspilled += cap->nkeys;
	cap->nkeys = 0;
	cap->row_bytes = 0;
	MemoryContextReset(cap->keys_cxt);
	cap->keys = key_set_create(cap->keys_cxt);
}

/*
 * Close the capture's spill files: the batch is over, and its memory is
 * about to go.
 */
void
decode_capture_release(DecodeCapture *cap)
{
	ListCell   *lc;

	foreach(lc, cap->spills)
		BufFileClose(((ViewSpill *) lfirst(lc))->file);
	cap->spills = NIL;
}

/*
 * The next chunk of up to max_keys keys that the capture spilled for a view
 * (from the first when rewind), as a ViewBatch allocated in
 * CurrentMemoryContext: the view's sources, in ordinal order, with only
 * those keys -- the batch's counts and TRUNCATEs are in what
 * decode_capture_batches returns.  NULL once every spilled key was read.
 */
ViewBatch *
decode_capture_next_chunk(DecodeCapture *cap, int view_id, bool rewind, int64 max_keys)
{
	ViewSpill  *spill = view_spill(cap, view_id, false);
	ViewEntry  *ventry;
	ViewBatch  *chunk;
	StringInfoData image;
	ListCell   *lc;
	int64		n = 0;

	if (spill == NULL)
		return NULL;
	if (rewind)
	{
		if (BufFileSeek(spill->file, 0, 0, SEEK_SET) != 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not rewind the temporary file of spilled dirty keys")));
		spill->nread = 0;
	}
	if (spill->nread == spill->nkeys)
		return NULL;

	/*
	 * Every source the batch changed is in it, with or without keys here,
	 * so that applying the chunk empties their lookup caches.
	 */
	ventry = hash_search(cap->views, &view_id, HASH_FIND, NULL);
	if (ventry == NULL)
		elog(ERROR, "spilled dirty keys of view %d, which has no batch", view_id);
	chunk = palloc0(sizeof(ViewBatch));
	chunk->view_id = view_id;
	chunk->chunk = true;
	foreach(lc, ventry->batch->sources)
	{
		SourceBatch *sb = palloc(sizeof(SourceBatch));

		*sb = *(SourceBatch *) lfirst(lc);
		sb->truncated = false;
		sb->keys = NIL;
		chunk->sources = lappend(chunk->sources, sb);
	}
	view_batch_sort_sources(chunk);

	initStringInfo(&image);
	while (n < max_keys && spill->nread < spill->nkeys)
	{
		int32		ordinal;
		uint32		len;
		uint32		used;
		SourceBatch *sb = NULL;
		DirtyKey   *key;

		spill_read(spill->file, &ordinal, sizeof(ordinal));
		foreach(lc, chunk->sources)
		{
			if (((SourceBatch *) lfirst(lc))->ordinal == ordinal)
				sb = lfirst(lc);
		}
		if (sb == NULL)
			elog(ERROR, "spilled dirty key of view %d, source %d, which has no batch",
				 view_id, ordinal);

		spill_read(spill->file, &len, sizeof(len));
		enlargeStringInfo(&image, len);
		spill_read(spill->file, image.data, len);
		key = dirty_key_from_image(sb, image.data, &used);
		if (used != len)
			elog(ERROR, "spilled dirty key of view %d, source %d, does not match its source's key",
				 view_id, ordinal);
		sb->keys = lappend(sb->keys, key);
		n++;
		spill->nread++;
	}
	pfree(image.data);
	return chunk;
}
