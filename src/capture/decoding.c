/*-------------------------------------------------------------------------
 *
 * decoding.c
 *	  The decoding driver: the apply worker's logical decoding context, which
 *	  reads the flushed WAL into the capture of the batch being made.
 *
 * The apply worker (worker.c) acquires its database's slot and starts the
 * driver once; the context then stays open for the worker's life.  Each
 * decoding_read() decodes, in the batch's transaction and for the snapshot
 * the batch is applied under, the WAL up to a position read after that
 * snapshot was taken; the output plugin (plugin.c) adds the dirty keys of
 * every decoded change of a source to the capture (capture.c), or carries
 * them to the
 * next batch when the snapshot does not see their transaction, until all
 * is read or the batch policy (batch.h) says the batch is full or due.
 * The capture is this file's own: the worker asks for its batches, its
 * spilled chunks, its broken views and what it carries through the
 * functions below.
 *
 * IDENTIFICATION
 *	  src/capture/decoding.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "access/xlogreader.h"
#include "miscadmin.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/origin.h"
#include "replication/slot.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "base/progress.h"
#include "capture/capture.h"
#include "capture/decoding.h"
#include "registry/catalog.h"

/*
 * A batch that has waited batch_timeout, or that spilled keys to disk, is
 * cut short only with more WAL than this still to read before its
 * position.  A cut batch is applied under a snapshot that sees
 * transactions it has not decoded: keys those alone changed are not
 * recomputed, so a reader sees a state the sources never had until the
 * worker catches up.  That is the price of a backlog; a worker that is
 * merely slow (a loaded machine, a burst of commits) reads on to the
 * position, and its batch stays whole.  So does the batch of a transaction
 * larger than max_batch_size that other commits follow: it spills the keys
 * they add too, and views of groups through joins, which hold their keys
 * in memory behind a cut batch, read its keys a chunk at a time instead
 * (apply_view.c).  A batch full in memory is cut at once.
 */
#define DECODING_CUT_MIN_BYTES	(16 * 1024 * 1024)

static LogicalDecodingContext *decoding = NULL;
static Capture capture;

/*
 * Resets the system caches around decoding (decoding_start's caller, the
 * worker, knows how without losing what it caches itself).
 */
static void (*reset_caches) (void) = NULL;

static bool decoding_batch_due(BatchPolicy policy);

/*
 * Read a page of WAL for decoding, but only what is flushed: where
 * read_local_xlog_page would wait for the rest of a record (sleeping in
 * 1 ms steps), return "not there yet", so that the worker applies what it
 * has and is woken when more is committed.
 */
static int
decoding_read_page(XLogReaderState *state, XLogRecPtr targetPagePtr, int reqLen,
				   XLogRecPtr targetRecPtr, char *cur_page)
{
	if (targetPagePtr + reqLen > GetFlushRecPtr(NULL))
		return -1;
	return read_local_xlog_page(state, targetPagePtr, reqLen, targetRecPtr, cur_page);
}

/*
 * The end of the last transaction record (a commit, a prepare, an abort)
 * that starts between from and upto, or from when none does: whatever
 * committed before upto committed before that position too.  from and upto
 * are record boundaries, and the WAL before upto is flushed.  A range
 * longer than max_bytes is not read: then upto.
 *
 * For delta_join.wait(), which waits for the views to be applied up to the
 * insert position at its call.  The writes of the batch being applied
 * follow that batch's end, and with nothing committed among them the batch
 * that reaches its end already holds every change wait() is for; without
 * this, the next batch would first have to read all of the worker's own
 * writes.
 */
XLogRecPtr
decoding_last_xact_end(XLogRecPtr from, XLogRecPtr upto, uint64 max_bytes)
{
	XLogReaderState *reader;
	volatile XLogRecPtr result = from;

	if (from >= upto || upto - from > max_bytes)
		return upto;
	reader = XLogReaderAllocate(wal_segment_size, NULL,
								XL_ROUTINE(.page_read = decoding_read_page,
										   .segment_open = wal_segment_open,
										   .segment_close = wal_segment_close),
								NULL);
	if (reader == NULL)
		return upto;
	PG_TRY();
	{
		if (XLogRecPtrIsInvalid(XLogFindNextRecord(reader, from)))
			result = upto;
		while (result < upto && reader->EndRecPtr < upto)
		{
			char	   *errm = NULL;

			/* what cannot be read is taken for a commit at upto */
			if (XLogReadRecord(reader, &errm) == NULL)
				result = upto;
			else if (XLogRecGetRmid(reader) == RM_XACT_ID &&
					 (XLogRecGetInfo(reader) & XLOG_XACT_OPMASK) != XLOG_XACT_ASSIGNMENT &&
					 (XLogRecGetInfo(reader) & XLOG_XACT_OPMASK) != XLOG_XACT_INVALIDATIONS)
				result = Min(reader->EndRecPtr, upto);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_FINALLY();
	{
		XLogReaderFree(reader);
	}
	PG_END_TRY();
	return result;
}

/*
 * Move the acquired slot's confirmed position up to moveto (at most the
 * flushed WAL) without replaying a transaction, as
 * pg_replication_slot_advance does: a fast-forward pass only follows the
 * catalog's history and the running transactions, so that the slot's
 * restart point moves too.  For WAL no view needs.  Replaying it is not
 * only wasted work: the changes of an extension dropped since include rows
 * of its source_catalog, a user catalog table, and core cannot open a
 * dropped user catalog table to replay them ("could not find pg_class
 * entry"), so a worker that met them on a slot kept for a new extension
 * would fail on every start.
 */
void
decoding_skip_to(XLogRecPtr moveto)
{
	LogicalDecodingContext *ctx;

	moveto = Min(moveto, GetFlushRecPtr(NULL));
	if (moveto <= MyReplicationSlot->data.confirmed_flush)
		return;

	ctx = CreateDecodingContext(InvalidXLogRecPtr, NIL, true,
								XL_ROUTINE(.page_read = decoding_read_page,
										   .segment_open = wal_segment_open,
										   .segment_close = wal_segment_close),
								NULL, NULL, NULL);
	InvalidateSystemCaches();
	XLogBeginRead(ctx->reader, MyReplicationSlot->data.restart_lsn);
	while (ctx->reader->EndRecPtr < moveto)
	{
		char	   *errm = NULL;
		XLogRecord *record = XLogReadRecord(ctx->reader, &errm);

		if (errm)
			elog(ERROR, "could not read WAL for logical decoding: %s", errm);
		if (record == NULL)
			break;
		LogicalDecodingProcessRecord(ctx, ctx->reader);
		CHECK_FOR_INTERRUPTS();
	}
	if (ctx->reader->EndRecPtr >= moveto)
	{
		LogicalConfirmReceivedLocation(moveto);
		ReplicationSlotMarkDirty();
	}
	InvalidateSystemCaches();
	FreeDecodingContext(ctx);
}

/*
 * Set up decoding from the restart point of the slot this process has
 * acquired, in a transaction; the context lives in cxt.  reset resets the
 * system caches before and after each decoding pass, as logicalfuncs.c
 * does: entries built with the historic snapshots of decoding must not
 * outlive it, nor entries built before it serve it.
 */
void
decoding_start(MemoryContext cxt, void (*reset) (void))
{
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);

	reset_caches = reset;

	decoding = CreateDecodingContext(InvalidXLogRecPtr, NIL, false,
									 XL_ROUTINE(.page_read = decoding_read_page,
												.segment_open = wal_segment_open,
												.segment_close = wal_segment_close),
									 NULL, NULL, NULL);
	decoding->output_writer_private = &capture;
	XLogBeginRead(decoding->reader, MyReplicationSlot->data.restart_lsn);
	MemoryContextSwitchTo(oldcxt);
}

bool
decoding_running(void)
{
	return decoding != NULL;
}

void
decoding_stop(void)
{
	if (decoding != NULL)
		FreeDecodingContext(decoding);
	decoding = NULL;
}

/* WAL has been read up to here */
XLogRecPtr
decoding_position(void)
{
	return decoding->reader->EndRecPtr;
}

/*
 * Decode the WAL up to upto into the capture, in the caller's transaction,
 * for a batch to be applied under snapshot (capture.h: the changes of
 * transactions it does not see are carried to the next batch).  Stops early
 * when the batch is full in memory, or spilled or due with more than
 * DECODING_CUT_MIN_BYTES left to read.  Returns true when everything before
 * upto has been read.
 *
 * upto is a WAL insert position read after the snapshot was taken: every
 * transaction the snapshot sees has its commit record before it.  Changes
 * of asynchronous commits would wait for the WAL writer: what is needed is
 * flushed here, so that it can be decoded now.
 */
bool
decoding_read(BatchPolicy policy, Snapshot snapshot, XLogRecPtr upto)
{
	XLogReaderState *reader = decoding->reader;
	int			nrecords = 0;
	bool		caught_up = false;
	MemoryContext oldcxt;

	if (upto > GetFlushRecPtr(NULL))
		XLogFlush(upto);
	capture_set_snapshot(&capture, snapshot);
	if (reader->EndRecPtr >= upto)
		return true;

	reset_caches();
	capture.live_catalog = catalog_relid("source_catalog");
	capture.fill_origin = replorigin_by_name(DJ_FILL_ORIGIN, true);
	capture.spill_at = batch_policy_spill_at(policy);

	oldcxt = CurrentMemoryContext;
	while (reader->EndRecPtr < upto)
	{
		XLogRecord *record;
		char	   *errm = NULL;

		/*
		 * The reader allocates its decode buffer, its buffer for records
		 * that span pages, and oversized records in the current context
		 * when it needs them, and keeps them across calls: in the decoding
		 * context, every time.  Replaying a transaction (in
		 * LogicalDecodingProcessRecord) leaves CurrentMemoryContext in the
		 * context of our transaction, which is gone at its commit.
		 */
		MemoryContextSwitchTo(decoding->context);
		record = XLogReadRecord(reader, &errm);
		if (errm)
			elog(ERROR, "could not read WAL for logical decoding: %s", errm);
		if (record == NULL)
		{
			/* a record that runs past the flushed WAL: read it next time */
			caught_up = true;
			break;
		}
		LogicalDecodingProcessRecord(decoding, reader);

		if (batch_policy_full(policy, capture.nkeys, capture.nspilled) &&
			(capture.nspilled == 0 || upto - reader->EndRecPtr > DECODING_CUT_MIN_BYTES))
			break;
		if (++nrecords % 256 == 0 && decoding_batch_due(policy) &&
			upto - reader->EndRecPtr > DECODING_CUT_MIN_BYTES)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	caught_up |= (reader->EndRecPtr >= upto);
	MemoryContextSwitchTo(oldcxt);

	reset_caches();
	return caught_up;
}

/* Is there WAL beyond what was decoded? */
bool
decoding_behind(void)
{
	return decoding->reader->EndRecPtr < progress_wal_position_now();
}

/* ----------------
 * The batch being captured
 * ----------------
 */

/* Start a new, empty batch in cxt, which the caller has just made or reset */
void
decoding_new_batch(MemoryContext cxt)
{
	capture_reset(&capture, cxt);
}

/* The batch is over: let go of what lives outside its memory */
void
decoding_end_batch(void)
{
	capture_release(&capture);
}

/* Nothing captured since the batch started */
bool
decoding_batch_empty(void)
{
	return capture_is_empty(&capture);
}

/* The batch is full, or its oldest change has waited long enough */
static bool
decoding_batch_due(BatchPolicy policy)
{
	if (capture_is_empty(&capture))
		return false;
	if (batch_policy_full(policy, capture.nkeys, capture.nspilled))
		return true;
	return GetCurrentTimestamp() >= batch_policy_due_at(policy, capture.first_change_time);
}

/* How many keys the batch spilled to disk (capture.h), and at how many */
int64
decoding_batch_spilled(int64 *spill_at)
{
	*spill_at = capture.spill_at;
	return capture.nspilled;
}

/*
 * The next chunk of up to max_keys keys the batch spilled for a view (from
 * the first when rewind), as a ViewBatch in CurrentMemoryContext; NULL when
 * none is left.
 */
ViewBatch *
decoding_batch_next_chunk(int view_id, bool rewind, int max_keys)
{
	return capture_next_chunk(&capture, view_id, rewind, max_keys);
}

/* What stayed in memory: one ViewBatch per view (capture_batches) */
List *
decoding_batch_views(void)
{
	return capture_batches(&capture);
}

/* Views whose changes could not be captured: BrokenView * */
List *
decoding_batch_broken(void)
{
	return capture.broken;
}

/*
 * Where the first transaction whose keys the capture carries to the next
 * batch commits (capture.h), or invalid: nothing from there on is applied
 * yet, so neither the slot nor the views' positions may move past it.
 */
XLogRecPtr
decoding_carried_lsn(void)
{
	return capture_carried_lsn(&capture);
}

/*
 * Are keys carried to the next batch whose transactions have left the
 * proc array, so that a new snapshot would see them?
 */
bool
decoding_carried_ready(void)
{
	return capture_carried_ready(&capture);
}

/* Are keys carried to the next batch? */
bool
decoding_carrying(void)
{
	return capture.carried != NIL;
}
