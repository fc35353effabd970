/*-------------------------------------------------------------------------
 *
 * capture.h
 *	  The capture of a batch (capture.c): what the output plugin
 *	  (plugin.c) found in the decoded changes, for the apply worker.
 *
 * The decoding driver (decoding.c) runs logical decoding in the apply
 * worker's process and sets LogicalDecodingContext.output_writer_private to
 * its Capture.  The plugin's callbacks add to it, for every decoded change
 * of a source, the dirty keys of the views the source feeds, deduplicated
 * per view and source; the worker applies what was captured and then
 * resets it.  Everything a capture holds lives in its batch memory
 * context.
 *
 * Memory is bounded: once the capture holds spill_at keys (a transaction
 * larger than the batch is decoded in one go, at its commit), its keys are
 * written to temporary files, one per view, and dropped from memory; the
 * worker reads a view's keys back a chunk at a time (capture_next_chunk)
 * when it applies the view, before what stayed in memory.  A key may then
 * be read more than once: applying a key twice does no harm.
 *
 * The snapshot a batch is applied under is taken before the WAL it covers
 * is decoded (worker.c, "consistent snapshots").  A transaction may write
 * its commit record before that snapshot is taken and leave the proc array
 * only after: decoded, but not seen by the snapshot.  Its keys are not put
 * in the batch but carried to the next one, whose snapshot sees it
 * (CarriedKey); meanwhile the capture keeps no decoded row for a key such a
 * transaction touched, since that row would be newer than the snapshot.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CAPTURE_H
#define DJ_CAPTURE_H

#include "access/htup.h"
#include "access/xlogdefs.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"

#include "base/batch.h"

/* Tells a capture from the private data of other decoding clients */
#define CAPTURE_MAGIC	0x444A4B59

/*
 * A view whose changes cannot be captured (a key column of a source is
 * missing): the worker puts it in error.
 */
typedef struct BrokenView
{
	int			view_id;
	char	   *message;
} BrokenView;

/*
 * One (view, source) that a decoded relation feeds: what the plugin's
 * relation map holds for the relation, and where its keys go in the
 * capture of the current generation (found on first use).
 */
typedef struct SourceFeed
{
	int			view_id;
	int			ordinal;
	Oid			source_relid;	/* as registered: the root if partitioned */
	KeyShape	shape;			/* of its keys */
	AttrNumber *attnums;		/* key columns in the decoded relation */

	/* its place in the batch of that capture generation */
	uint64		generation;
	SourceBatch *source_batch;
	ViewBatch  *view_batch;
} SourceFeed;

/*
 * A dirty key (or a TRUNCATE) of a transaction the batch's snapshot did not
 * see, carried to the next batch, with the weight its image adds (an
 * additive aggregate's, DirtyKey.weight), or with weighed false when its
 * change cannot be weighed (as the batch that sees it is then not: a
 * TRUNCATE, an old row not logged whole, a tuple whose key cannot be read
 * -- then with no image).  Lives in Capture.carry_cxt.
 */
typedef struct CarriedKey
{
	TransactionId xid;
	XLogRecPtr	commit_lsn;		/* where the transaction's commit record starts */
	int			view_id;
	int			ordinal;
	Oid			relid;			/* the source, as registered */
	KeyShape	shape;			/* of its key */
	bool		truncated;		/* a TRUNCATE of the source, not a key */
	int64		weight;
	bool		weighed;
	uint32		len;			/* the key's image (batch.c), or no image */
	char	   *image;
} CarriedKey;

typedef struct Capture
{
	uint32		magic;			/* CAPTURE_MAGIC */
	MemoryContext batch_cxt;	/* holds everything below */
	uint64		generation;		/* bumped by every reset */
	MemoryContext keys_cxt;		/* keys and their entries: emptied by a spill */
	HTAB	   *keys;			/* distinct dirty keys, per view and source */
	HTAB	   *sources;		/* (view_id, ordinal) -> SourceBatch */
	HTAB	   *views;			/* view_id -> ViewBatch */
	int64		nkeys;			/* entries in keys */
	int64		row_bytes;		/* of the rows the keys in memory keep */
	int64		spill_at;		/* spill the keys when this many (0: never) */
	List	   *spills;			/* the views' spill files (capture.c) */
	int64		nspilled;		/* keys written to them */
	struct bloom_filter *spilled_once;	/* keys spilled, and those spilled */
	struct bloom_filter *spilled_again; /* more than once (capture.c) */
	int64		nchanges;		/* changes of sources captured */
	List	   *broken;			/* BrokenView *, one per view */
	TimestampTz first_change_time;	/* when the first change was captured */

	/*
	 * source_catalog as it is now (set by the worker before each decoding
	 * pass, outside any historic snapshot): a source_catalog that decoding
	 * finds in the past but that is not this one was dropped with its
	 * extension, and its views with it.
	 */
	Oid			live_catalog;

	/*
	 * The origin of targets' fills (DJ_FILL_ORIGIN), or InvalidRepOriginId;
	 * set with live_catalog: their changes are not decoded.
	 */
	RepOriginId fill_origin;

	/*
	 * The snapshot the batch is applied under (NULL: every decoded
	 * transaction counts as seen), and what is carried past it: the keys
	 * of transactions it does not see, in carry_cxt, which outlives the
	 * batch.  hidden_keys holds the images of the keys those transactions
	 * touched in this batch (their rows are not kept).
	 */
	Snapshot	snapshot;
	bool		txn_hidden;		/* the transaction being decoded is not seen */
	HTAB	   *hidden_keys;
	MemoryContext carry_cxt;
	List	   *carried;		/* CarriedKey * */
} Capture;

/* the worker's side (through decoding.c) */
extern void capture_reset(Capture *cap, MemoryContext batch_cxt);
extern void capture_set_snapshot(Capture *cap, Snapshot snapshot);
extern XLogRecPtr capture_carried_lsn(Capture *cap);
extern bool capture_carried_ready(Capture *cap);
extern void capture_release(Capture *cap);
extern bool capture_is_empty(Capture *cap);
extern List *capture_batches(Capture *cap);
extern ViewBatch *capture_next_chunk(Capture *cap, int view_id, bool rewind, int64 max_keys);

/* the output plugin's side (plugin.c), while a transaction is replayed */
extern void capture_begin_txn(Capture *cap, TransactionId xid);
extern void capture_count_change(Capture *cap, TimestampTz commit_time, SourceFeed *feeds,
								 int nfeeds);
extern DirtyKey *capture_key(Capture *cap, SourceFeed *feed, const StringInfo image,
							 const Datum *values, const bool *isnull, int64 weight);
extern void capture_keep_row(Capture *cap, SourceFeed *feed, DirtyKey *key,
							 const StringInfo image, Relation relation, HeapTuple tuple);
extern void capture_forget_row(Capture *cap, DirtyKey *key);
extern void capture_carry_key(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn,
							  SourceFeed *feed, const StringInfo image, int64 weight,
							  bool weighed);
extern void capture_truncate(Capture *cap, TransactionId xid, XLogRecPtr commit_lsn,
							 SourceFeed *feed);
extern void capture_broken(Capture *cap, int view_id, const char *message);

#endif							/* DJ_CAPTURE_H */
