/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The apply worker: decodes its database's WAL in-process and keeps the
 *	  database's delta views fresh, a batch at a time.
 *
 * One worker runs per database that has views (launcher.c starts it).  It
 * owns the database's slot, keeps one decoding context open for its whole
 * life, and loops:
 *
 *	decode	the WAL flushed so far; the output plugin (decode.c) adds the
 *			dirty keys of every decoded change of a source to the capture,
 *			until the batch holds max_batch_size distinct keys or its first
 *			change is batch_timeout old (the smallest values among the
 *			active views' options);
 *	apply	the batch in ONE transaction: read the view catalog, then for
 *			each view with work run apply_view_batch (apply.c) as the
 *			view's owner, with search_path = pg_catalog, pg_temp and the
 *			view's lookup_timeout, inside a subtransaction that also stores the
 *			view's applied_lsn; commit;
 *	confirm	the batch's end to the slot, only after the commit.
 *
 * After a crash decoding restarts from the last confirmed position and
 * replays; applying is idempotent (DESIGN.md section 2).
 *
 * A view whose apply fails is set to state 'error' (last_error,
 * last_error_time, stale_since_lsn) and its later changes are dropped until
 * delta_join.refresh() rebuilds it; the other views go on.  Errors that
 * passing conditions cause (deadlock, serialization failure, lock not
 * available) instead roll the whole batch back, to be tried again, up to
 * WORKER_APPLY_ATTEMPTS times.  Which views exist, and their state, is read
 * from the catalog in every apply transaction, so a refresh or drop
 * committed before a change was decoded is always seen.  When the catalog
 * shows no view left, the worker drops the slot and exits.
 *
 * Idle behaviour: a worker that has read all flushed WAL sleeps on its latch
 * for at most WORKER_POLL_MS, then looks at the flush pointer again
 * (nothing else tells it of new WAL without slowing every commit);
 * delta_join.wait() and worker_notify() set its latch to wake it at once.
 * A wake-up that finds no new WAL costs one read of the flush pointer.
 *
 * Errors outside a view's apply (reading WAL, the catalog) end the worker;
 * the slot is released on exit and the launcher starts a new worker.
 *
 * Memory: the decoding context lives in worker_cxt for the life of the
 * worker; captured keys, batches and catalog rows in batch_cxt, reset after
 * each batch.
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlogutils.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "catalog.h"
#include "decode.h"
#include "delta_join.h"
#include "launcher.h"
#include "worker.h"

#define WORKER_POLL_MS			10	/* idle check of the flush pointer */
#define WORKER_CATALOG_CHECK_MS 10000	/* re-read the views at least this often */
#define WORKER_APPLY_ATTEMPTS	3	/* tries of a batch that fails transiently */
#define WORKER_BUSY_RETRY_MS	50	/* retry of a catalog check that found it
									 * locked */

/* What a look at the catalog found */
typedef enum CatalogCheck
{
	CATALOG_VIEWS,				/* the database has views */
	CATALOG_NO_VIEWS,			/* it has none: the slot is dropped */
	CATALOG_BUSY				/* a transaction is changing the views */
} CatalogCheck;

/* A row of view_catalog, as the worker needs it */
typedef struct ViewRow
{
	int			view_id;
	Oid			owner;
	bool		in_error;
	XLogRecPtr	applied_lsn;
	char	   *target_name;
	int			max_batch_size; /* the view's options */
	int			batch_timeout_ms;
	int			lookup_timeout_ms;
} ViewRow;

/* What happened to one view of a batch */
typedef struct ViewOutcome
{
	ViewBatch  *batch;
	bool		known;			/* the view is in the catalog */
	bool		applied;
	char	   *error;			/* the apply failed with this message */
	ApplyCounts counts;
} ViewOutcome;

static Oid	worker_dboid = InvalidOid;
static char worker_slot[NAMEDATALEN];
static MemoryContext worker_cxt = NULL;
static MemoryContext batch_cxt = NULL;
static LogicalDecodingContext *decoding = NULL;
static DecodeCapture capture;
static XLogRecPtr batch_start_lsn = InvalidXLogRecPtr;

/*
 * When a batch is full or due: the settings, lowered by the options of the
 * active views as last read from the catalog (worker_read_views).
 */
static int	batch_max_keys = 10000;
static int	batch_timeout_ms = 100;

/* Position to confirm to the slot once WAL is flushed up to confirm_after */
static XLogRecPtr confirm_lsn = InvalidXLogRecPtr;
static XLogRecPtr confirm_after = InvalidXLogRecPtr;
static SPIPlanPtr plan_list_views = NULL;
static SPIPlanPtr plan_set_applied = NULL;
static SPIPlanPtr plan_set_error = NULL;

static void worker_on_exit(int code, Datum arg);
static void worker_loop(void);
static CatalogCheck worker_check_views(void);
static void worker_start_decoding(void);
static bool worker_decode(void);
static bool worker_batch_due(void);
static void worker_progress(void);
static void worker_apply_batch(void);
static void worker_confirm(XLogRecPtr end_lsn);
static void worker_confirm_flushed(void);
static int	option_or(HeapTuple tuple, TupleDesc desc, int column, int setting);
static void worker_wait_visible(void);
static bool worker_apply_attempt(List *batches, XLogRecPtr end_lsn,
								 bool last_attempt, ViewOutcome *outcomes);
static bool worker_apply_view(ViewBatch *batch, ViewRow *row,
							  XLogRecPtr end_lsn, bool last_attempt,
							  ViewOutcome *outcome);
static void worker_record_error(ViewRow *rows, int nrows, int view_id,
								const char *message);
static ViewRow *worker_read_views(int *nrows);
static void worker_publish(ViewRow *rows, int nrows, XLogRecPtr end_lsn,
						   List *batches, ViewOutcome *outcomes);

/* ----------------
 * Apply worker
 * ----------------
 */

void
dj_worker_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	DbWorker   *db;
	bool		taken;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);

	worker_dboid = dboid;
	worker_slot_name(worker_slot, dboid);

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = worker_find_db(dboid, true);
	taken = (db == NULL || db->pid != 0);
	if (!taken)
	{
		db->pid = MyProcPid;
		db->latch = MyLatch;
	}
	LWLockRelease(worker_shared->lock);
	if (taken)
	{
		ereport(LOG,
				(errmsg("delta_join worker for database %u not started: another one runs",
						dboid)));
		proc_exit(0);
	}
	before_shmem_exit(worker_on_exit, (Datum) 0);

	/*
	 * Batches commit asynchronously: the slot is only confirmed past a batch
	 * once its commit is flushed (worker_confirm), so a batch lost in a
	 * crash is decoded again.
	 */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The worker runs as a superuser: its own catalog statements resolve
	 * names in pg_catalog only, never in schemas users can create objects in.
	 */
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION);

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join worker",
									   ALLOCSET_DEFAULT_SIZES);
	batch_cxt = AllocSetContextCreate(worker_cxt, "delta_join batch",
									  ALLOCSET_DEFAULT_SIZES);
	decode_capture_reset(&capture, batch_cxt);
	batch_max_keys = dj_max_batch_size;
	batch_timeout_ms = dj_batch_timeout_ms;

	worker_loop();
	proc_exit(0);
}

/*
 * Leaving, by error or not: give the slot back (an error does not) and
 * tell the launcher, through shared memory, that no worker runs.
 */
static void
worker_on_exit(int code, Datum arg)
{
	if (MyReplicationSlot != NULL)
		ReplicationSlotRelease();

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		DbWorker   *db = worker_find_db(worker_dboid, false);

		if (db != NULL && db->pid == MyProcPid)
		{
			db->pid = 0;
			db->latch = NULL;
		}
	}
	LWLockRelease(worker_shared->lock);
}

static void
worker_loop(void)
{
	uint64		seen_generation = 0;
	TimestampTz next_check = 0;

	for (;;)
	{
		uint64		generation;
		TimestampTz now;
		bool		caught_up;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		worker_confirm_flushed();

		LWLockAcquire(worker_shared->lock, LW_SHARED);
		generation = worker_find_db(worker_dboid, false)->generation;
		LWLockRelease(worker_shared->lock);
		now = GetCurrentTimestamp();
		if (generation != seen_generation || now >= next_check)
		{
			CatalogCheck check = worker_check_views();

			seen_generation = generation;
			next_check = TimestampTzPlusMilliseconds(now,
													 check == CATALOG_BUSY ?
													 WORKER_BUSY_RETRY_MS :
													 WORKER_CATALOG_CHECK_MS);
			if (check == CATALOG_NO_VIEWS)
			{
				ereport(LOG,
						(errmsg("delta_join worker for database %u exiting: no views left; replication slot \"%s\" dropped",
								worker_dboid, worker_slot)));
				return;
			}
		}

		if (decoding == NULL)
			worker_start_decoding();

		caught_up = worker_decode();

		if (!decode_capture_is_empty(&capture))
		{
			if (worker_batch_due())
			{
				worker_apply_batch();
				continue;
			}
		}
		else if (decoding->reader->EndRecPtr > batch_start_lsn)
			worker_progress();

		if (!caught_up)
			continue;

		{
			long		timeout = WORKER_POLL_MS;

			if (!decode_capture_is_empty(&capture))
			{
				TimestampTz due = TimestampTzPlusMilliseconds(capture.first_change_time,
															  batch_timeout_ms);

				timeout = Max(1, Min(timeout,
									 TimestampDifferenceMilliseconds(GetCurrentTimestamp(), due)));
			}
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/* The batch is full or its oldest change has waited long enough */
static bool
worker_batch_due(void)
{
	if (capture.nkeys >= batch_max_keys)
		return true;
	return GetCurrentTimestamp() >=
		TimestampTzPlusMilliseconds(capture.first_change_time, batch_timeout_ms);
}

/*
 * Read the views of the database and publish their state.  When there are
 * none, and no transaction is adding one (it would hold a lock on
 * view_catalog, see worker_ensure_slot), drop the slot.
 */
static CatalogCheck
worker_check_views(void)
{
	Oid			catalog_relid;
	CatalogCheck result;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	catalog_relid = worker_catalog_relid("view_catalog");
	if (!OidIsValid(catalog_relid))
		result = CATALOG_NO_VIEWS;	/* the extension was dropped */
	else if (ConditionalLockRelationOid(catalog_relid, ShareLock))
	{
		ViewRow    *rows;
		int			nrows;

		/* a snapshot that sees what committed before we got the lock */
		PopActiveSnapshot();
		PushActiveSnapshot(GetTransactionSnapshot());
		SPI_connect();
		rows = worker_read_views(&nrows);
		SPI_finish();
		worker_publish(rows, nrows, InvalidXLogRecPtr, NIL, NULL);
		result = (nrows > 0) ? CATALOG_VIEWS : CATALOG_NO_VIEWS;
	}
	else
		result = CATALOG_BUSY;

	if (result == CATALOG_NO_VIEWS)
	{
		if (decoding != NULL)
		{
			FreeDecodingContext(decoding);
			decoding = NULL;
		}
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		if (SearchNamedReplicationSlot(worker_slot, true) != NULL)
			ReplicationSlotDrop(worker_slot, true);
	}

	PopActiveSnapshot();
	CommitTransactionCommand();
	return result;
}

/*
 * Acquire the slot and set up decoding from its restart point; the context
 * stays open across batches.
 */
static void
worker_start_decoding(void)
{
	MemoryContext oldcxt;

	StartTransactionCommand();
	oldcxt = MemoryContextSwitchTo(worker_cxt);

	CheckLogicalDecodingRequirements();
	ReplicationSlotAcquire(worker_slot, true);

	/* A slot invalidated for retaining too much WAL cannot decode. */
	if (XLogRecPtrIsInvalid(MyReplicationSlot->data.restart_lsn))
	{
		MemoryContextSwitchTo(oldcxt);
		PushActiveSnapshot(GetTransactionSnapshot());
		worker_mark_views_stale(psprintf("replication slot \"%s\" was invalidated because it retained too much WAL (max_slot_wal_keep_size)",
										 worker_slot));
		PopActiveSnapshot();
		ReplicationSlotRelease();
		ReplicationSlotDrop(worker_slot, true);
		CommitTransactionCommand();
		ereport(LOG,
				(errmsg("delta_join worker for database %u exiting: replication slot \"%s\" was invalidated and is dropped",
						worker_dboid, worker_slot)));
		proc_exit(0);
	}

	decoding = CreateDecodingContext(InvalidXLogRecPtr, NIL, false,
									 XL_ROUTINE(.page_read = read_local_xlog_page,
												.segment_open = wal_segment_open,
												.segment_close = wal_segment_close),
									 NULL, NULL, NULL);
	decoding->output_writer_private = &capture;
	XLogBeginRead(decoding->reader, MyReplicationSlot->data.restart_lsn);
	batch_start_lsn = MyReplicationSlot->data.confirmed_flush;

	MemoryContextSwitchTo(oldcxt);
	CommitTransactionCommand();

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		DbWorker   *db = worker_find_db(worker_dboid, false);

		if (db->processed_lsn < batch_start_lsn)
			db->processed_lsn = batch_start_lsn;
	}
	LWLockRelease(worker_shared->lock);
}

/*
 * Decode the WAL flushed so far into the capture, stopping early when the
 * batch is due.  Returns true when all flushed WAL has been read.
 */
static bool
worker_decode(void)
{
	XLogReaderState *reader = decoding->reader;
	XLogRecPtr	flush = GetFlushRecPtr(NULL);
	int			nrecords = 0;
	bool		caught_up;
	MemoryContext oldcxt;

	if (reader->EndRecPtr >= flush)
		return true;

	StartTransactionCommand();
	InvalidateSystemCaches();

	/*
	 * The reader allocates its decode buffer and long records in the
	 * current context when it needs them, and keeps them across calls.
	 */
	oldcxt = MemoryContextSwitchTo(decoding->context);
	while (reader->EndRecPtr < flush)
	{
		XLogRecord *record;
		char	   *errm = NULL;

		record = XLogReadRecord(reader, &errm);
		if (errm)
			elog(ERROR, "could not read WAL for logical decoding: %s", errm);
		if (record != NULL)
			LogicalDecodingProcessRecord(decoding, reader);

		if (capture.nkeys >= batch_max_keys)
			break;
		if (++nrecords % 256 == 0 && !decode_capture_is_empty(&capture) &&
			worker_batch_due())
			break;
		CHECK_FOR_INTERRUPTS();
	}
	caught_up = (reader->EndRecPtr >= flush);
	MemoryContextSwitchTo(oldcxt);

	InvalidateSystemCaches();
	CommitTransactionCommand();
	return caught_up;
}

/*
 * Nothing captured, but WAL was read: every view is as fresh as the WAL
 * read.  Publish it and let the slot move on.
 */
static void
worker_progress(void)
{
	XLogRecPtr	end_lsn = decoding->reader->EndRecPtr;
	int			i;

	worker_confirm(end_lsn);

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	worker_find_db(worker_dboid, false)->processed_lsn = end_lsn;
	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

		if (stat->dboid == worker_dboid && !stat->in_error &&
			stat->applied_lsn < end_lsn)
			stat->applied_lsn = end_lsn;
	}
	LWLockRelease(worker_shared->lock);
	ConditionVariableBroadcast(&worker_shared->progress_cv);

	batch_start_lsn = end_lsn;
}

/*
 * Apply the captured batch in one transaction, retrying it when it failed
 * for a passing reason; then confirm its end to the slot and start a new
 * batch.
 */
static void
worker_apply_batch(void)
{
	List	   *batches = decode_capture_batches(&capture);
	XLogRecPtr	end_lsn = decoding->reader->EndRecPtr;
	ViewOutcome *outcomes;
	int			attempt;

	outcomes = MemoryContextAllocZero(batch_cxt,
									  Max(list_length(batches), 1) * sizeof(ViewOutcome));

	for (attempt = 1;; attempt++)
	{
		if (worker_apply_attempt(batches, end_lsn,
								 attempt >= WORKER_APPLY_ATTEMPTS, outcomes))
			break;
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 100L * attempt, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}

	worker_confirm(end_lsn);

	batch_start_lsn = end_lsn;
	MemoryContextReset(batch_cxt);
	decode_capture_reset(&capture, batch_cxt);
}

/*
 * Everything before end_lsn is applied and committed, though the last
 * commit may not be flushed yet (batches commit asynchronously): confirm
 * end_lsn to the slot once WAL is flushed past that commit.
 */
static void
worker_confirm(XLogRecPtr end_lsn)
{
	confirm_lsn = end_lsn;
	if (XactLastCommitEnd > confirm_after)
		confirm_after = XactLastCommitEnd;
	worker_confirm_flushed();
}

/* Confirm to the slot what worker_confirm left waiting, if now flushed */
static void
worker_confirm_flushed(void)
{
	if (XLogRecPtrIsInvalid(confirm_lsn) || MyReplicationSlot == NULL ||
		GetFlushRecPtr(NULL) < confirm_after)
		return;
	LogicalConfirmReceivedLocation(confirm_lsn);
	ReplicationSlotMarkDirty();
	confirm_lsn = InvalidXLogRecPtr;
}

/*
 * A transaction writes its commit record before it leaves the proc array,
 * and until it has left, snapshots do not see its changes.  Decoding can
 * be that quick: wait until every transaction whose changes are in the
 * batch is visible, or the batch would recompute rows from their old
 * versions and the change would be lost.  Most are long gone (older than
 * RecentXmin, which the snapshot taken here refreshes), which costs a
 * comparison each.
 */
static void
worker_wait_visible(void)
{
	(void) GetTransactionSnapshot();
	for (int i = 0; i < capture.nxids; i++)
	{
		if (TransactionIdIsInProgress(capture.xids[i]))
			XactLockTableWait(capture.xids[i], NULL, NULL, XLTW_None);
	}
}

/*
 * One try at applying the batch.  Returns false, with everything rolled
 * back, when a view failed for a passing reason and another try is allowed.
 */
static bool
worker_apply_attempt(List *batches, XLogRecPtr end_lsn, bool last_attempt,
					 ViewOutcome *outcomes)
{
	ViewRow    *rows;
	int			nrows;
	ListCell   *lc;
	int			n;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	worker_wait_visible();
	PushActiveSnapshot(GetTransactionSnapshot());
	SPI_connect();
	rows = worker_read_views(&nrows);

	n = 0;
	foreach(lc, batches)
	{
		ViewBatch  *batch = (ViewBatch *) lfirst(lc);
		ViewOutcome *outcome = &outcomes[n++];
		ViewRow    *row = NULL;
		int			i;

		memset(outcome, 0, sizeof(ViewOutcome));
		outcome->batch = batch;
		for (i = 0; i < nrows; i++)
			if (rows[i].view_id == batch->view_id)
				row = &rows[i];
		if (row == NULL)
			continue;			/* dropped */
		outcome->known = true;
		if (row->in_error)
			continue;			/* stale until refreshed: drop its keys */

		pgstat_report_activity(STATE_RUNNING, row->target_name);
		if (!worker_apply_view(batch, row, end_lsn, last_attempt, outcome))
		{
			SPI_finish();
			AbortCurrentTransaction();
			pgstat_report_activity(STATE_IDLE, NULL);
			return false;
		}
	}

	/* Record the views that failed; they wait for a refresh. */
	for (n = 0; n < list_length(batches); n++)
	{
		if (outcomes[n].error != NULL)
			worker_record_error(rows, nrows, outcomes[n].batch->view_id,
								outcomes[n].error);
	}
	foreach(lc, capture.broken)
	{
		BrokenView *broken = (BrokenView *) lfirst(lc);

		worker_record_error(rows, nrows, broken->view_id, broken->message);
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);

	worker_publish(rows, nrows, end_lsn, batches, outcomes);
	return true;
}

/*
 * Put a view in error, in the catalog (in the batch's transaction) and in
 * the rows that worker_publish will publish; no-op for views dropped or
 * already in error.
 */
static void
worker_record_error(ViewRow *rows, int nrows, int view_id, const char *message)
{
	Datum		values[3];
	int			i;

	for (i = 0; i < nrows; i++)
	{
		if (rows[i].view_id != view_id || rows[i].in_error)
			continue;

		values[0] = Int32GetDatum(view_id);
		values[1] = CStringGetTextDatum(message);
		values[2] = LSNGetDatum(batch_start_lsn);
		if (SPI_execute_plan(plan_set_error, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the error of view %d", view_id);
		rows[i].in_error = true;
		ereport(WARNING,
				(errmsg("delta view \"%s\" is in error and no longer maintained: %s",
						rows[i].target_name, message),
				 errhint("Fix the cause, then rebuild the view with delta_join.refresh('%s').",
						 rows[i].target_name)));
	}
}

/* Errors that another try of the same batch may not meet */
static bool
error_is_passing(int sqlerrcode)
{
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE;
}

/*
 * Apply one view's batch inside a subtransaction, as the view's owner with a
 * fixed search_path and the lookup timeout, and store its applied_lsn.  On
 * error the subtransaction is rolled back and the error kept in the outcome;
 * returns false instead when the error is passing and the batch should be
 * tried again.
 */
static bool
worker_apply_view(ViewBatch *batch, ViewRow *row, XLogRecPtr end_lsn,
				  bool last_attempt, ViewOutcome *outcome)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool again = false;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		ApplyCounts counts;
		ActingAs	acting;
		Datum		values[2];

		catalog_act_as(row->owner, "pg_catalog, pg_temp", &acting);
		if (row->lookup_timeout_ms > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, row->lookup_timeout_ms);

		memset(&counts, 0, sizeof(counts));
		batch->end_lsn = end_lsn;
		PushActiveSnapshot(GetTransactionSnapshot());
		apply_view_batch(batch->view_id, batch, &counts);
		PopActiveSnapshot();

		disable_timeout(STATEMENT_TIMEOUT, false);
		catalog_act_done(&acting);

		values[0] = Int32GetDatum(batch->view_id);
		values[1] = LSNGetDatum(end_lsn);
		if (SPI_execute_plan(plan_set_applied, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not store the applied position of view %d", batch->view_id);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		outcome->applied = true;
		outcome->counts = counts;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		disable_timeout(STATEMENT_TIMEOUT, false);
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		if (!last_attempt && error_is_passing(edata->sqlerrcode))
		{
			ereport(LOG,
					(errmsg("delta view \"%s\" could not be applied, trying the batch again: %s",
							row->target_name, edata->message)));
			again = true;
		}
		else
			outcome->error = MemoryContextStrdup(batch_cxt, edata->message);
		FreeErrorData(edata);
	}
	PG_END_TRY();

	return !again;
}

/* An integer option of a view row, or the setting when absent */
static int
option_or(HeapTuple tuple, TupleDesc desc, int column, int setting)
{
	bool		isnull;
	Datum		value = SPI_getbinval(tuple, desc, column, &isnull);

	return isnull ? setting : DatumGetInt32(value);
}

/*
 * The rows of view_catalog, allocated in batch_cxt (they are used after the
 * transaction ends).  SPI must be connected and a snapshot active.
 */
static ViewRow *
worker_read_views(int *nrows)
{
	ViewRow    *rows;
	uint64		i;

	if (plan_list_views == NULL)
	{
		Oid			argtypes[3] = {INT4OID, PG_LSNOID, TEXTOID};

		plan_list_views = SPI_prepare("SELECT view_id, owner, state = 'error', applied_lsn, target_name,"
									  "       (options->>'max_batch_size')::int,"
									  "       (options->>'batch_timeout')::int,"
									  "       (options->>'lookup_timeout')::int"
									  "  FROM delta_join.view_catalog ORDER BY view_id",
									  0, NULL);
		plan_set_applied = SPI_prepare("UPDATE delta_join.view_catalog"
									   "   SET applied_lsn = GREATEST(applied_lsn, $2)"
									   " WHERE view_id = $1",
									   2, argtypes);
		argtypes[1] = TEXTOID;
		argtypes[2] = PG_LSNOID;
		plan_set_error = SPI_prepare("UPDATE delta_join.view_catalog"
									 "   SET state = 'error', last_error = $2,"
									 "       last_error_time = pg_catalog.now(),"
									 "       stale_since_lsn = $3"
									 " WHERE view_id = $1 AND state = 'active'",
									 3, argtypes);
		if (plan_list_views == NULL || plan_set_applied == NULL ||
			plan_set_error == NULL)
			elog(ERROR, "could not prepare the queries of the delta_join worker");
		SPI_keepplan(plan_list_views);
		SPI_keepplan(plan_set_applied);
		SPI_keepplan(plan_set_error);
	}

	if (SPI_execute_plan(plan_list_views, NULL, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read delta_join.view_catalog");

	*nrows = (int) SPI_processed;
	rows = MemoryContextAllocZero(batch_cxt,
								  Max(SPI_processed, 1) * sizeof(ViewRow));
	batch_max_keys = dj_max_batch_size;
	batch_timeout_ms = dj_batch_timeout_ms;
	for (i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *name;

		rows[i].view_id = DatumGetInt32(SPI_getbinval(tuple, desc, 1, &isnull));
		rows[i].owner = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));
		rows[i].in_error = DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull));
		rows[i].applied_lsn = DatumGetLSN(SPI_getbinval(tuple, desc, 4, &isnull));
		name = SPI_getvalue(tuple, desc, 5);
		rows[i].target_name = MemoryContextStrdup(batch_cxt, name ? name : "?");
		rows[i].max_batch_size = option_or(tuple, desc, 6, dj_max_batch_size);
		rows[i].batch_timeout_ms = option_or(tuple, desc, 7, dj_batch_timeout_ms);
		rows[i].lookup_timeout_ms = option_or(tuple, desc, 8, dj_lookup_timeout_ms);

		/* one batch serves every view: it is as small as the strictest asks */
		if (!rows[i].in_error)
		{
			batch_max_keys = Min(batch_max_keys, rows[i].max_batch_size);
			batch_timeout_ms = Min(batch_timeout_ms, rows[i].batch_timeout_ms);
		}
	}
	return rows;
}

/*
 * Bring shared memory in line with the catalog rows just read and, after a
 * batch (end_lsn valid), with what the batch did: counters, applied
 * positions, errors.  Wakes wait().
 */
static void
worker_publish(ViewRow *rows, int nrows, XLogRecPtr end_lsn,
			   List *batches, ViewOutcome *outcomes)
{
	int			nbatches = list_length(batches);
	int			i;
	int			n;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);

	/* forget dropped views */
	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];
		bool		found = false;
		int			r;

		if (stat->dboid != worker_dboid)
			continue;
		for (r = 0; r < nrows && !found; r++)
			found = (rows[r].view_id == stat->view_id);
		if (!found)
			stat->dboid = InvalidOid;
	}

	/* the catalog's word on state and applied position */
	for (i = 0; i < nrows; i++)
	{
		ViewStat   *stat = worker_find_view(worker_dboid, rows[i].view_id, true);

		if (stat == NULL)
			continue;
		stat->in_error = rows[i].in_error;
		if (!stat->in_error)
		{
			if (stat->applied_lsn < rows[i].applied_lsn)
				stat->applied_lsn = rows[i].applied_lsn;
			if (!XLogRecPtrIsInvalid(end_lsn) && stat->applied_lsn < end_lsn)
				stat->applied_lsn = end_lsn;
		}
	}

	/* what the batch did */
	for (n = 0; n < nbatches; n++)
	{
		ViewOutcome *outcome = &outcomes[n];
		ViewStat   *stat;

		if (!outcome->known)
			continue;
		stat = worker_find_view(worker_dboid, outcome->batch->view_id, false);
		if (stat == NULL)
			continue;
		stat->changes_seen += outcome->batch->changes;
		if (outcome->applied)
		{
			stat->counts.keys_applied += outcome->counts.keys_applied;
			stat->counts.rows_upserted += outcome->counts.rows_upserted;
			stat->counts.rows_deleted += outcome->counts.rows_deleted;
			stat->counts.rows_unchanged += outcome->counts.rows_unchanged;
			stat->counts.lookups += outcome->counts.lookups;
			stat->counts.cache_hits += outcome->counts.cache_hits;
			if (stat->applied_commit_time < outcome->batch->commit_time)
				stat->applied_commit_time = outcome->batch->commit_time;
		}
	}

	if (!XLogRecPtrIsInvalid(end_lsn))
	{
		DbWorker   *db = worker_find_db(worker_dboid, false);

		if (db->processed_lsn < end_lsn)
			db->processed_lsn = end_lsn;
	}
	LWLockRelease(worker_shared->lock);

	ConditionVariableBroadcast(&worker_shared->progress_cv);
}
