/*-------------------------------------------------------------------------
 *
 * decode.h
 *	  The output plugin's side of a batch: what decoding captured for the
 *	  apply worker.
 *
 * The decoding driver (decoding.c) runs logical decoding in the apply
 * worker's process and sets LogicalDecodingContext.output_writer_private to
 * its DecodeCapture.  The plugin callbacks (decode.c) add to it, for every
 * decoded change of a source, the dirty keys of the views the source feeds,
 * deduplicated per view and source; the worker applies what was captured
 * and then resets it.
 * Everything a capture holds lives in its batch memory context.
 *
 * Memory is bounded: once the capture holds spill_at keys (a transaction
 * larger than the batch is decoded in one go, at its commit), its keys are
 * written to temporary files, one per view, and dropped from memory; the
 * worker reads a view's keys back a chunk at a time
 * (decode_capture_next_chunk) when it applies the view, before what stayed
 * in memory.  A key may then be read more than once: applying a key twice
 * does no harm.
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
#ifndef DJ_DECODE_H
#define DJ_DECODE_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"
#include "storage/buffile.h"
#include "utils/hsearch.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"

#include "base/batch.h"

/* Tells a capture from the private data of other decoding clients */
#define DECODE_CAPTURE_MAGIC	0x444A4B59

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
 * A dirty key (or a TRUNCATE) of a transaction the batch's snapshot did not
 * see, carried to the next batch.  Lives in DecodeCapture.carry_cxt.
 */
typedef struct CarriedKey
{
	TransactionId xid;
	XLogRecPtr	commit_lsn;		/* where the transaction's commit record starts */
	int			view_id;
	int			ordinal;
	Oid			relid;			/* the source, as registered */
	int			nkeys;			/* the shape of its key (SourceBatch) */
	int16	   *typlen;
	bool	   *typbyval;
	bool		truncated;		/* a TRUNCATE of the source, not a key */
	uint32		len;			/* the key's image (batch.c) */
	char	   *image;
} CarriedKey;

typedef struct DecodeCapture
{
	uint32		magic;			/* DECODE_CAPTURE_MAGIC */
	MemoryContext batch_cxt;	/* holds everything below */
	uint64		generation;		/* bumped by every reset */
	MemoryContext keys_cxt;		/* keys and their entries: emptied by a spill */
	HTAB	   *keys;			/* distinct dirty keys, per view and source */
	HTAB	   *sources;		/* (view_id, ordinal) -> SourceBatch */
	HTAB	   *views;			/* view_id -> ViewBatch */
	int64		nkeys;			/* entries in keys */
	int64		row_bytes;		/* of the rows the keys in memory keep */
	int64		spill_at;		/* spill the keys when this many (0: never) */
	List	   *spills;			/* the views' spill files (decode.c) */
	int64		nspilled;		/* keys written to them */
	int64		nchanges;		/* changes of sources captured */
	List	   *broken;			/* BrokenView *, one per view */
	TimestampTz first_change_time;	/* when the first change was captured */
	XLogRecPtr	last_commit_lsn;	/* newest commit decoded, source or not */
	TimestampTz last_commit_time;

	/*
	 * source_catalog as it is now (set by the worker before each decoding
	 * pass, outside any historic snapshot): a source_catalog that decoding
	 * finds in the past but that is not this one was dropped with its
	 * extension, and its views with it.
	 */
	Oid			live_catalog;

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
} DecodeCapture;

extern void decode_capture_reset(DecodeCapture *cap, MemoryContext batch_cxt);
extern void decode_capture_set_snapshot(DecodeCapture *cap, Snapshot snapshot);
extern XLogRecPtr decode_capture_carried_lsn(DecodeCapture *cap);
extern void decode_capture_release(DecodeCapture *cap);
extern bool decode_capture_is_empty(DecodeCapture *cap);
extern List *decode_capture_batches(DecodeCapture *cap);
extern ViewBatch *decode_capture_next_chunk(DecodeCapture *cap, int view_id, bool rewind,
											int64 max_keys);

#endif							/* DJ_DECODE_H */
