/*-------------------------------------------------------------------------
 *
 * capture.c
 *	  The capture of a batch: the distinct dirty keys the output plugin
 *	  finds, per view and source, the rows it keeps with them, the keys it
 *	  carries to the next batch, and the keys it spills to disk.
 *
 * The output plugin (plugin.c) decodes a change, finds the (view, source)
 * pairs its relation feeds (SourceFeed) and the key of each, and hands the
 * key here; this file owns everything the batch holds from then on (its
 * nouns are in capture.h).
 *
 * The key of a row's last change in the batch also keeps the row that change
 * left (batch.h, DirtyKey.row), so that the join applier need not fetch it:
 * the new tuple of an INSERT or UPDATE, nothing after a DELETE.  Not when
 * the row could not be read later as it is: a row of a partition (the
 * applier reads rows in the root's row type), one with a TOASTed value (its
 * pointer leads into the reorder buffer, or to a value that may be gone), a
 * key with NULLs (several rows may share it), or beyond CAPTURE_ROWS_MAX
 * bytes of rows in memory; nor after a TRUNCATE of the source, or an UPDATE
 * that moved the row from the key, or when a transaction the batch's
 * snapshot does not see touched the key.  Those keys' rows are fetched.
 *
 * Memory: the capture's batch context holds its hash tables, batches and
 * broken views; its keys context the keys and their rows, which a spill
 * empties; its carry context, beside the batch's, what is carried to the
 * next batch.  The plugin calls in while a transaction is replayed, in
 * memory freed after each change: everything kept is copied.
 *
 * IDENTIFICATION
 *	  src/capture/capture.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "lib/bloomfilter.h"
#include "storage/buffile.h"
#include "storage/procarray.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "capture/capture.h"

/* Bytes of decoded rows a capture keeps in memory, at most */
#define CAPTURE_ROWS_MAX	(64 * 1024 * 1024)

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

static void capture_feed_batch(Capture *cap, SourceFeed *feed);
static CarriedKey *capture_carry(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn,
								 SourceFeed *feed, const StringInfo image, int64 weight,
								 bool weighed);
static void capture_carried_in(Capture *cap, CarriedKey *ck);
static void capture_spill_keys(Capture *cap);

/* ----------------
 * The batch
 * ----------------
 */

/*
 * Empty the capture and set it up anew in batch_cxt, which the caller has
 * just created or reset.
 */
void
capture_reset(Capture *cap, MemoryContext batch_cxt)
{
	HASHCTL		hctl;
	uint64		generation = cap->generation;
	int64		spill_at = cap->spill_at;
	MemoryContext carry_cxt = cap->carry_cxt;
	List	   *carried = cap->carried;

	Assert(cap->spills == NIL);
	memset(cap, 0, sizeof(Capture));
	cap->magic = CAPTURE_MAGIC;
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
capture_is_empty(Capture *cap)
{
	return cap->nchanges == 0 && cap->broken == NIL;
}

/*
 * Point the feed at its SourceBatch and ViewBatch in the current capture,
 * creating them on first use.
 */
static void
capture_feed_batch(Capture *cap, SourceFeed *feed)
{
	SourceTag	stag;
	SourceEntry *sentry;
	ViewEntry  *ventry;
	bool		found;

	if (feed->generation == cap->generation)
		return;

	ventry = hash_search(cap->views, &feed->view_id, HASH_ENTER, &found);
	if (!found)
	{
		ventry->batch = MemoryContextAllocZero(cap->batch_cxt, sizeof(ViewBatch));
		ventry->batch->view_id = feed->view_id;
		ventry->batch->weighed = true;
	}

	memset(&stag, 0, sizeof(stag));
	stag.view_id = feed->view_id;
	stag.ordinal = feed->ordinal;
	sentry = hash_search(cap->sources, &stag, HASH_ENTER, &found);
	if (!found)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cap->batch_cxt);

		sentry->batch = palloc0(sizeof(SourceBatch));
		sentry->batch->ordinal = feed->ordinal;
		sentry->batch->relid = feed->source_relid;
		key_shape_copy(&sentry->batch->shape, &feed->shape);
		ventry->batch->sources = lappend(ventry->batch->sources, sentry->batch);
		MemoryContextSwitchTo(oldcxt);
	}

	feed->view_batch = ventry->batch;
	feed->source_batch = sentry->batch;
	feed->generation = cap->generation;
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
capture_batches(Capture *cap)
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
 * Note in the capture that a view's changes cannot be captured; the worker
 * puts the view in error.
 */
void
capture_broken(Capture *cap, int view_id, const char *message)
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
 * Changes and their keys
 * ----------------
 */

/*
 * A transaction's changes are about to be replayed: does the batch's
 * snapshot see it?  Its changes are carried to the next batch if not.
 */
void
capture_begin_txn(Capture *cap, TransactionId xid)
{
	cap->txn_hidden = (cap->snapshot != NULL && XidInMVCCSnapshot(xid, cap->snapshot));
}

/*
 * Count one decoded change of a relation that feeds feeds (sorted by view):
 * once in the capture, once for each view, and note its commit time.
 */
void
capture_count_change(Capture *cap, TimestampTz commit_time, SourceFeed *feeds, int nfeeds)
{
	if (cap->first_change_time == 0)
		cap->first_change_time = GetCurrentTimestamp();
	cap->nchanges++;

	for (int i = 0; i < nfeeds; i++)
	{
		SourceFeed *feed = &feeds[i];
		ViewBatch  *vb;

		capture_feed_batch(cap, feed);
		if (i > 0 && feeds[i - 1].view_id == feed->view_id)
			continue;
		vb = feed->view_batch;
		vb->changes++;
		if (commit_time > vb->commit_time)
			vb->commit_time = commit_time;
	}
}

/*
 * Add a key (its values, detoasted, and its image) to the feed's
 * SourceBatch unless it is there, add weight to its weight (DirtyKey.
 * weight: +1 for a new row, -1 for an old one), and return its DirtyKey;
 * NULL if the key went to disk with every key in memory, its weight with
 * it.
 */
DirtyKey *
capture_key(Capture *cap, SourceFeed *feed, const StringInfo image, const Datum *values,
			const bool *isnull, int64 weight)
{
	DirtyKey  **slot;

	capture_feed_batch(cap, feed);
	slot = key_set_enter(cap->keys, feed->view_id, feed->ordinal, image, cap->keys_cxt);
	if (*slot == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cap->keys_cxt);
		SourceBatch *sb = feed->source_batch;

		*slot = dirty_key_make(&sb->shape, values, isnull);
		sb->keys = lappend(sb->keys, *slot);
		cap->nkeys++;
		MemoryContextSwitchTo(oldcxt);

		(*slot)->weight += weight;
		if (cap->spill_at > 0 && cap->nkeys >= cap->spill_at)
		{
			capture_spill_keys(cap);
			return NULL;
		}
		return *slot;
	}
	(*slot)->weight += weight;
	return *slot;
}

/* The key's row is to be fetched */
void
capture_forget_row(Capture *cap, DirtyKey *key)
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
 * of relation; image is the key's.  Kept when it can be read later as it
 * is (see the top of the file); otherwise the row is to be fetched.
 */
void
capture_keep_row(Capture *cap, SourceFeed *feed, DirtyKey *key, const StringInfo image,
				 Relation relation, HeapTuple tuple)
{
	SourceBatch *sb = feed->source_batch;
	TupleDesc	desc = RelationGetDescr(relation);
	MemoryContext oldcxt;

	capture_forget_row(cap, key);
	if (RelationGetRelid(relation) != sb->relid)
		return;

	/* a transaction the snapshot does not see changed it */
	if (cap->hidden_keys != NULL &&
		key_set_find(cap->hidden_keys, feed->view_id, feed->ordinal, image) != NULL)
		return;
	for (int k = 0; k < sb->shape.nkeys; k++)
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
		cap->row_bytes + tuple->t_len > CAPTURE_ROWS_MAX)
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
 * A TRUNCATE of the feed's source: its SourceBatch is marked truncated
 * and its keys' rows forgotten; by a transaction the batch's snapshot does
 * not see, it is carried to the next batch instead.
 */
void
capture_truncate(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn, SourceFeed *feed)
{
	ListCell   *lc;

	if (cap->txn_hidden)
	{
		capture_carry(cap, xid, commit_lsn, feed, NULL, 0, false)->truncated = true;
		return;
	}
	capture_feed_batch(cap, feed);
	feed->source_batch->truncated = true;
	feed->view_batch->weighed = false;
	foreach(lc, feed->source_batch->keys)
		capture_forget_row(cap, lfirst(lc));
}

/* ----------------
 * Carried keys (capture.h)
 * ----------------
 */

/*
 * The key (of that image, with that weight: capture_key's) of a
 * transaction the batch's snapshot does not see: carry it to the next
 * batch, and keep no row for it in this one.  weighed false: the change
 * cannot be weighed; image NULL: nor its key read (the mark alone is
 * carried).
 */
void
capture_carry_key(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn, SourceFeed *feed,
				  const StringInfo image, int64 weight, bool weighed)
{
	DirtyKey  **slot;

	capture_carry(cap, xid, commit_lsn, feed, image, weight, weighed);
	if (image == NULL)
		return;

	if (cap->hidden_keys == NULL)
		cap->hidden_keys = key_set_create(cap->batch_cxt);
	(void) key_set_enter(cap->hidden_keys, feed->view_id, feed->ordinal, image,
						 cap->batch_cxt);
	if (feed->generation == cap->generation &&
		(slot = key_set_find(cap->keys, feed->view_id, feed->ordinal, image)) != NULL &&
		*slot != NULL)
		capture_forget_row(cap, *slot);
}

/* Carry a key's image (or none) and its weight to the next batch */
static CarriedKey *
capture_carry(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn, SourceFeed *feed,
			  const StringInfo image, int64 weight, bool weighed)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cap->carry_cxt);
	CarriedKey *ck = palloc0(sizeof(CarriedKey));

	ck->xid = xid;
	ck->commit_lsn = commit_lsn;
	ck->view_id = feed->view_id;
	ck->ordinal = feed->ordinal;
	ck->relid = feed->source_relid;
	key_shape_copy(&ck->shape, &feed->shape);
	ck->weight = weight;
	ck->weighed = weighed;
	if (image != NULL)
	{
		ck->len = image->len;
		ck->image = palloc(Max(image->len, 1));
		memcpy(ck->image, image->data, image->len);
	}
	cap->carried = lappend(cap->carried, ck);
	MemoryContextSwitchTo(oldcxt);
	return ck;
}

/*
 * The batch will be applied under snapshot: the transactions it does not
 * see are carried to the next batch as they are decoded, and what earlier
 * batches carried is put in this one, if the snapshot sees it now, or
 * carried on.  Before the batch decodes anything.
 */
void
capture_set_snapshot(Capture *cap, Snapshot snapshot)
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
			key_shape_copy(&copy->shape, &ck->shape);
			if (ck->image != NULL)
			{
				copy->image = palloc(Max(ck->len, 1));
				memcpy(copy->image, ck->image, ck->len);
			}
			cap->carried = lappend(cap->carried, copy);
			MemoryContextSwitchTo(oldcxt);
		}
		else
			capture_carried_in(cap, ck);
	}
	MemoryContextDelete(old_cxt);
}

/* Put a carried key (or TRUNCATE) whose transaction is now seen in the batch */
static void
capture_carried_in(Capture *cap, CarriedKey *ck)
{
	SourceFeed	feed;

	memset(&feed, 0, sizeof(feed));
	feed.view_id = ck->view_id;
	feed.ordinal = ck->ordinal;
	feed.source_relid = ck->relid;
	feed.shape = ck->shape;
	capture_feed_batch(cap, &feed);

	if (cap->first_change_time == 0)
		cap->first_change_time = GetCurrentTimestamp();
	cap->nchanges++;
	feed.view_batch->changes++;
	if (!ck->weighed)
		feed.view_batch->weighed = false;

	if (ck->truncated)
		feed.source_batch->truncated = true;
	else if (ck->image != NULL)
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

			*slot = dirty_key_from_image(&feed.source_batch->shape, ck->image, &used);
			feed.source_batch->keys = lappend(feed.source_batch->keys, *slot);
			cap->nkeys++;
			MemoryContextSwitchTo(oldcxt);
			(*slot)->weight += ck->weight;
			if (cap->spill_at > 0 && cap->nkeys >= cap->spill_at)
				capture_spill_keys(cap);
		}
		else
			(*slot)->weight += ck->weight;
	}
}

/* Where the first transaction whose keys are carried commits, or invalid */
XLogRecPtr
capture_carried_lsn(Capture *cap)
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
 * Are keys carried whose transactions have left the proc array, so that a
 * new snapshot would see them?
 */
bool
capture_carried_ready(Capture *cap)
{
	ListCell   *lc;

	foreach(lc, cap->carried)
	{
		if (!TransactionIdIsInProgress(((CarriedKey *) lfirst(lc))->xid))
			return true;
	}
	return false;
}

/* ----------------
 * Spilling keys
 *
 * Each view has a spill file of its own, so that its keys are read back
 * alone, when it is applied.  A spilled key is a record: the source's
 * ordinal (int32), the length of the key's image (uint32), its image
 * (batch.c), then what is known of its row (uint8, SPILL_ROW_*) and, for a
 * kept row, its length (uint32) and its bytes.  The shape of each source's
 * key, and the row type of its rows, are in its SourceBatch, which stays in
 * memory.  Keeping the rows spares the join applier a fetch of each spilled
 * key's row, most of what a large transaction's keys would otherwise cost
 * beyond its own.
 *
 * A spilled row is the key's last row in the batch only if the key did not
 * change again after it spilled, and only then is it read back with its
 * row: a key spilled again later, or in memory at the end of the batch, is
 * read back without it, and fetched, each time it is applied (as before
 * rows were spilled).  Otherwise a row that a transaction left only in
 * passing -- an item shown and hidden again, an order updated and then
 * deleted -- would be applied: a target row no committed state ever had,
 * left as a residual row in upsert mode, and in retract mode, walked with
 * the key's later row in one replacement of its slice, left for good.
 * Which keys spilled more than once is told by two Bloom filters of the
 * keys spilled (spilled_once, spilled_again), of fixed size: a false
 * positive only fetches a row that was known.
 * ----------------
 */

#define SPILL_ROW_UNKNOWN	0	/* to be fetched */
#define SPILL_ROW_DELETED	1	/* the key's last change deleted it */
#define SPILL_ROW_KEPT		2	/* the row follows */

/* Each Bloom filter of the keys spilled: its size, and the keys it is for */
#define SPILL_BLOOM_KB		4096
#define SPILL_BLOOM_KEYS	(4 * 1024 * 1024)

/* The keys of one view spilled to disk */
typedef struct ViewSpill
{
	int			view_id;
	BufFile    *file;
	int64		nkeys;			/* written */
	int64		nread;			/* read back since the last rewind */
} ViewSpill;

static ViewSpill *
view_spill(Capture *cap, int view_id, bool create)
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

/* A spilled key as the Bloom filters know it, in elem */
static void
spill_element(StringInfo elem, int view_id, int32 ordinal, const char *image, uint32 len)
{
	resetStringInfo(elem);
	appendBinaryStringInfo(elem, (char *) &view_id, sizeof(view_id));
	appendBinaryStringInfo(elem, (char *) &ordinal, sizeof(ordinal));
	appendBinaryStringInfo(elem, image, len);
}

/* Note a key being spilled: once, or again */
static void
spill_note_key(Capture *cap, StringInfo elem)
{
	if (cap->spilled_once == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(cap->batch_cxt);

		cap->spilled_once = bloom_create(SPILL_BLOOM_KEYS, SPILL_BLOOM_KB, 0);
		cap->spilled_again = bloom_create(SPILL_BLOOM_KEYS, SPILL_BLOOM_KB, 0);
		MemoryContextSwitchTo(oldcxt);
	}
	if (bloom_lacks_element(cap->spilled_once, (unsigned char *) elem->data, elem->len))
		bloom_add_element(cap->spilled_once, (unsigned char *) elem->data, elem->len);
	else
		bloom_add_element(cap->spilled_again, (unsigned char *) elem->data, elem->len);
}

/*
 * Is the row a spilled key was written with its last in the batch?  Not
 * when the key spilled again, or is in memory now, or a transaction the
 * snapshot does not see touched it, as capture_keep_row has it for the
 * keys in memory (elem: for the key).
 */
static bool
spill_row_is_last(Capture *cap, int view_id, int32 ordinal, const StringInfo image,
				  StringInfo elem)
{
	DirtyKey  **slot;

	spill_element(elem, view_id, ordinal, image->data, image->len);
	if (cap->spilled_again == NULL ||
		!bloom_lacks_element(cap->spilled_again, (unsigned char *) elem->data, elem->len))
		return false;
	if (cap->hidden_keys != NULL &&
		key_set_find(cap->hidden_keys, view_id, ordinal, image) != NULL)
		return false;
	slot = key_set_find(cap->keys, view_id, ordinal, image);
	return slot == NULL || *slot == NULL;
}

/* Read what a spilled key's record says of its row into the key */
static void
spill_read_row(BufFile *file, DirtyKey *key)
{
	uint8		state;
	uint32		len;
	HeapTuple	row;

	spill_read(file, &state, sizeof(state));
	key->row_known = (state != SPILL_ROW_UNKNOWN);
	key->row = NULL;
	if (state != SPILL_ROW_KEPT)
		return;
	spill_read(file, &len, sizeof(len));
	row = (HeapTuple) palloc(HEAPTUPLESIZE + len);
	row->t_len = len;
	ItemPointerSetInvalid(&row->t_self);
	row->t_tableOid = InvalidOid;
	row->t_data = (HeapTupleHeader) ((char *) row + HEAPTUPLESIZE);
	spill_read(file, row->t_data, len);
	key->row = row;
}

/* Write the keys the capture holds to the spill files and drop them. */
static void
capture_spill_keys(Capture *cap)
{
	HASH_SEQ_STATUS status;
	SourceEntry *sentry;
	StringInfoData record;
	StringInfoData elem;

	initStringInfo(&record);
	initStringInfo(&elem);
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
			dirty_key_image(&record, &sb->shape, key->values, key->isnull);
			len = record.len - sizeof(ordinal) - sizeof(len);
			memcpy(record.data + sizeof(ordinal), &len, sizeof(len));
			spill_element(&elem, sentry->tag.view_id, ordinal,
						  record.data + sizeof(ordinal) + sizeof(len), len);
			spill_note_key(cap, &elem);
			appendBinaryStringInfo(&record, (char *) &key->weight, sizeof(key->weight));
			if (!key->row_known)
				appendStringInfoChar(&record, SPILL_ROW_UNKNOWN);
			else if (key->row == NULL)
				appendStringInfoChar(&record, SPILL_ROW_DELETED);
			else
			{
				uint32		row_len = key->row->t_len;

				appendStringInfoChar(&record, SPILL_ROW_KEPT);
				appendBinaryStringInfo(&record, (char *) &row_len, sizeof(row_len));
				appendBinaryStringInfo(&record, (char *) key->row->t_data, row_len);
			}
			BufFileWrite(spill->file, record.data, record.len);
			spill->nkeys++;
		}
		sb->keys = NIL;
	}
	pfree(record.data);
	pfree(elem.data);

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
capture_release(Capture *cap)
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
 * those keys, weighed if the batch is -- the batch's counts and TRUNCATEs
 * are in what capture_batches returns.  NULL once every spilled key was
 * read.
 */
ViewBatch *
capture_next_chunk(Capture *cap, int view_id, bool rewind, int64 max_keys)
{
	ViewSpill  *spill = view_spill(cap, view_id, false);
	ViewEntry  *ventry;
	ViewBatch  *chunk;
	StringInfoData image;
	StringInfoData elem;
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
	chunk->weighed = ventry->batch->weighed;
	foreach(lc, ventry->batch->sources)
	{
		SourceBatch *sb = palloc(sizeof(SourceBatch));

		*sb = *(SourceBatch *) lfirst(lc);
		sb->rows_off |= sb->truncated;	/* see below */
		sb->truncated = false;
		sb->keys = NIL;
		chunk->sources = lappend(chunk->sources, sb);
	}
	view_batch_sort_sources(chunk);

	initStringInfo(&image);
	initStringInfo(&elem);
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
		resetStringInfo(&image);
		enlargeStringInfo(&image, len);
		spill_read(spill->file, image.data, len);
		image.len = len;
		key = dirty_key_from_image(&sb->shape, image.data, &used);
		if (used != len)
			elog(ERROR, "spilled dirty key of view %d, source %d, does not match its source's key",
				 view_id, ordinal);
		spill_read(spill->file, &key->weight, sizeof(key->weight));
		spill_read_row(spill->file, key);

		/*
		 * A TRUNCATE of the source, or a change of its columns, in the
		 * batch: its keys' rows are fetched (as capture_truncate and
		 * capture_keep_row make those in memory); and the key's row if it
		 * changed again after this record (see the top of the section).
		 */
		if (key->row_known &&
			(sb->rows_off || !spill_row_is_last(cap, view_id, ordinal, &image, &elem)))
		{
			if (key->row != NULL)
				pfree(key->row);
			key->row_known = false;
			key->row = NULL;
		}
		sb->keys = lappend(sb->keys, key);
		n++;
		spill->nread++;
	}
	pfree(image.data);
	pfree(elem.data);
	return chunk;
}
