/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The apply worker: decodes its database's WAL in-process and keeps the
 *	  database's delta views fresh, a batch at a time.
 *
 * One worker runs per database that has views (launcher.c starts it).  It
 * owns the database's slot, keeps one decoding context open for its whole
 * life (the decoding driver, decoding.c), and makes each batch in ONE
 * transaction (worker_batch):
 *
 *	snapshot	take the snapshot the batch is applied under, and read the
 *			WAL insert position after it;
 *	decode	the WAL up to that position; the output plugin (decode.c)
 *			adds the dirty keys of every decoded change of a source to the
 *			batch's capture, and carries to the next batch those of the
 *			transactions the snapshot does not see (decode.h);
 *	apply	read the views from the catalog, then apply each view's part
 *			(apply.c) inside a subtransaction, as the target's owner with
 *			the view's pinned settings (runas.c) and its lookup_timeout,
 *			under the batch's snapshot; store the applied position of the
 *			views applied; commit.  A large batch is shared with helpers
 *			(parallel.h): the views that can be shared are split, each
 *			share applied in a transaction of its own, and their positions
 *			stored in one more transaction once every share committed;
 *	confirm	the batch's end to the slot, only after the commit, and never
 *			past a batch that is still waiting for another try or a
 *			transaction whose keys are carried.
 *
 * Consistency: every transaction the batch's snapshot sees committed before
 * the position decoding reads up to, so the batch holds every change that
 * snapshot sees and the views before it had not; each view it applies is
 * recomputed, key by key, from the sources as that snapshot sees them.  At
 * the batch's commit, each view it applied (exactly, its whole part) holds
 * its query's result over the sources at that snapshot, and all of them at
 * the same one.  What breaks that, on purpose: a batch cut short because it
 * was full (a backlog larger than max_batch_size), a view that took more
 * than its time slice (below), and parallel apply's shares, each committed
 * on its own with a snapshot of its own.
 *
 * Time slices: a view's part of a batch is applied a piece at a time, and
 * once WORKER_SLICE_MS (or half its lookup_timeout) has passed, what is
 * left waits for the next batch (VIEW_PARTIAL), where it is applied at once
 * with that batch's other work.  The other views never wait behind one
 * view's large batch for much longer than a slice, and a large batch makes
 * progress with every try instead of starting again after a timeout.
 *
 * After a crash decoding restarts from the last confirmed position and
 * replays; applying is idempotent (DESIGN.md section 2).
 *
 * A view whose apply fails is set to state 'error' (last_error,
 * last_error_time, stale_since_lsn) and its later changes are dropped until
 * delta_join.refresh() rebuilds it; the other views go on.  A view that
 * fails for a passing reason -- a lock it waited for longer than the
 * worker's lock_timeout (a lock held on its target, say), a deadlock, its
 * lookup_timeout -- is not put in error at once: its part of the batch is
 * kept, merged with its later changes (each key once), retried with a
 * growing backoff, and the slot is not confirmed past it.
 * The other views go on meanwhile.  It goes to error only once its
 * lookup_timeout has passed since the first failure, or after
 * WORKER_TIMEOUT_TRIES statement timeouts.  The worker's deadlock_timeout
 * is short, so that in a deadlock with a user's transaction the worker is
 * the one that gives way.
 *
 * Which views exist, and their state, is read from the catalog in every
 * apply transaction, so a refresh or drop committed before a change was
 * decoded is always seen.  When the catalog shows no view left, the worker
 * drops the slot and exits.  While the library does not run the version of
 * the extension installed in the database (catalog_version_problem), it
 * reads and applies nothing, keeps its slot where it is, and looks again
 * every WORKER_IDLE_MS.
 *
 * Idle behaviour: a worker that has read all the WAL there is sleeps on its
 * latch for at most WORKER_IDLE_MS, then looks at the WAL again;
 * committing backends (a commit callback), delta_join.wait() and
 * worker_notify() set its latch to wake it at once.
 *
 * Errors outside a view's apply (reading WAL, the catalog) end the worker;
 * the slot is released on exit and the launcher starts a new worker.
 *
 * Memory: the decoding context lives in worker_cxt for the life of the
 * worker.  A batch has batch_cxt: its capture's keys and batches, the
 * catalog rows read for it; it is reset when the next batch starts.  A
 * batch holds at most twice max_batch_size keys in memory, however large
 * its transactions: beyond that the capture spills them to temporary files,
 * one per view, and each view reads its own back in chunks of
 * max_batch_size, each in memory freed before the next, as it is applied
 * (Pieces) -- still in the batch's one transaction.  A deferred view copies
 * the keys it waits for into memory of its own, each key once however many
 * batches brought it.
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "apply.h"
#include "batch.h"
#include "catalog.h"
#include "citus.h"
#include "distributed.h"
#include "decode.h"
#include "decoding.h"
#include "delta_join.h"
#include "launcher.h"
#include "parallel.h"
#include "progress.h"
#include "runas.h"
#include "worker.h"

#define WORKER_IDLE_MS			1000	/* idle wake-up: commits set the latch */
#define WORKER_CARRY_POLL_MS	10	/* look again at carried keys' transactions */
#define WORKER_CATALOG_CHECK_MS 10000	/* re-read the views at least this often */
#define WORKER_SHARD_SYNC_MS	1000	/* look at the shard groups held this
										 * often (distributed views) */
#define WORKER_BUSY_RETRY_MS	50	/* retry of a catalog check that found it
									 * locked */
#define WORKER_LOCK_TIMEOUT		"1s"	/* longest wait for one lock */
#define WORKER_DEADLOCK_TIMEOUT "50ms"	/* find deadlocks before users do */
#define WORKER_RETRY_MIN_MS		100 /* first backoff of a deferred view */
#define WORKER_RETRY_MAX_MS		5000	/* longest backoff */
#define WORKER_TIMEOUT_TRIES	3	/* lookup_timeouts before an error */
#define WORKER_SLICE_MS			1000	/* most time one view's apply takes
										 * in a batch while others wait */
#define WORKER_PIECE_MS			50	/* time a piece of it should take */
#define WORKER_PIECE_FIRST_KEYS 16	/* keys of a view's first piece */
#define WORKER_PIECE_MAX_KEYS	(1 << 20)

/* What a look at the catalog found */
typedef enum CatalogCheck
{
	CATALOG_VIEWS,				/* the database has views */
	CATALOG_NO_VIEWS,			/* it has none: the slot is dropped */
	CATALOG_BUSY,				/* a transaction is changing the views */
	CATALOG_WAIT				/* the library does not run the extension's
								 * version here: wait for its update */
} CatalogCheck;

/*
 * A view whose changes wait for another try: its parts of the batches since
 * the first failure, merged into one, each key once (batch.c)
 */
typedef struct DeferredView
{
	int			view_id;
	MemoryContext cxt;			/* holds batch and seen */
	ViewBatch  *batch;			/* the work waiting, or NULL */
	HTAB	   *seen;			/* the keys in batch */
	XLogRecPtr	since_lsn;		/* the slot is not confirmed past this */
	int			tries;
	int			timeouts;		/* of them, ended by lookup_timeout */
	TimestampTz first_failure;
	TimestampTz next_try;
	char	   *reason;			/* the last error */
} DeferredView;

static Oid	worker_dboid = InvalidOid;
static char worker_slot[NAMEDATALEN];
static MemoryContext worker_cxt = NULL;
static MemoryContext batch_cxt = NULL;	/* the capture's; reset by each batch */
static XLogRecPtr batch_start_lsn = InvalidXLogRecPtr;
static List *deferred_views = NIL;	/* DeferredView *, in worker_cxt */
static bool worker_waiting = false; /* for the extension's update */

/* When each full-recompute view last recomputed (in worker_cxt) */
typedef struct Recompute
{
	int			view_id;
	TimestampTz at;
} Recompute;
static List *recomputes = NIL;

/* An earlier worker of the database ended in error (worker_note_failure) */
static bool failed_before = true;

/* When a batch is applied (batch.h), for the views last read */
static BatchPolicy policy;
static TimestampTz next_round = 0;	/* no decoding before (worker_wait_round) */

/* Position to confirm to the slot once WAL is flushed up to confirm_after */
static XLogRecPtr confirm_lsn = InvalidXLogRecPtr;
static XLogRecPtr confirm_after = InvalidXLogRecPtr;

static void worker_on_exit(int code, Datum arg);
static void worker_note_failure(void);
static void worker_clear_failure(void);
static void worker_loop(void);
static CatalogCheck worker_check_views(void);
static void worker_start_decoding(void);
static TimestampTz worker_next_retry(void);
static void worker_check_citus(List *views);
static void worker_sync_shards(void);
static void worker_wait_round(void);
static XLogRecPtr worker_covered_lsn(void);
static void worker_progress(void);
static void worker_batch(bool retry_due);
static void worker_new_batch(void);
static void worker_apply_batch(Snapshot snapshot);
typedef struct ViewWork ViewWork;
typedef struct AppliedViews AppliedViews;
static ViewWork *worker_view_work(ViewRecord *view, ViewProgress *vp, List *batches,
								  TimestampTz now);
static void worker_view_done(ViewWork *vw, ViewResult result, ViewBatch *rest,
							 char *message, int sqlerrcode, TimestampTz now,
							 AppliedViews *applied);
static ShareRound *worker_share(List *todo, XLogRecPtr end_lsn, bool spilled,
								bool *shared_chunks);
static void worker_prepare_view(ViewRecord *view);
static bool worker_shares_view(int view_id);
static void worker_note_share_failed(int view_id);
static void worker_apply_chunks(ViewWork *vw, XLogRecPtr end_lsn);
static ViewResult worker_apply_shared(ViewWork *vw, ViewBatch *batch, XLogRecPtr end_lsn);
static void worker_share_finish(ShareRound *round, List *todo, XLogRecPtr end_lsn,
								TimestampTz now, AppliedViews *applied);
static void worker_confirm(XLogRecPtr end_lsn);
static void forget_own_cancel(void);
static void worker_confirm_flushed(void);
static void worker_each_chunk(ViewRecord *view,
							  void (*fn) (ViewRecord *view, ViewBatch *chunk, void *arg),
							  void *arg);
static void defer_chunk(ViewRecord *view, ViewBatch *chunk, void *arg);
static DeferredView *worker_defer(ViewRecord *view, ViewBatch *batch, TimestampTz now);
static void worker_defer_add(DeferredView *dv, ViewBatch *batch);
static DeferredView *worker_defer_rest(ViewRecord *view, DeferredView *dv, ViewBatch *rest,
									   TimestampTz now);
static void worker_defer_spilled(DeferredView *dv, ViewRecord *view);
static void worker_defer_failure(DeferredView *dv, const char *message, int sqlerrcode);
static bool worker_gives_up(DeferredView *dv, ViewRecord *view, int sqlerrcode,
							 TimestampTz now, char **message);
static void worker_forget_deferred(DeferredView *dv);
static void worker_forget_dropped(List *views);
static void worker_free_deferred(DeferredView *dv);
static TimestampTz worker_recomputed_at(int view_id);
static void worker_note_recompute(int view_id, TimestampTz at);
static DeferredView *worker_find_deferred(int view_id);
static ViewProgress *worker_progress_rows(List *views);

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
	worker_session_setup();

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join worker",
									   ALLOCSET_DEFAULT_SIZES);
	worker_new_batch();
	policy = batch_policy_for(NIL);

	/*
	 * An error here ends the worker, and the launcher starts another, which
	 * may meet it again: delta_join.status shows it until a batch applies.
	 */
	PG_TRY();
	{
		worker_loop();
	}
	PG_CATCH();
	{
		worker_note_failure();
		PG_RE_THROW();
	}
	PG_END_TRY();
	proc_exit(0);
}

/* The settings of an apply worker's session, and of its helpers' */
void
worker_session_setup(void)
{
	/*
	 * Batches commit asynchronously: the slot is only confirmed past a batch
	 * once its commit is flushed (worker_confirm), so a batch lost in a
	 * crash is decoded again.
	 */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * Whatever the database or role says: each view's apply takes its own
	 * snapshot once what it reads is locked (worker_apply_view), which only
	 * READ COMMITTED allows; and the worker writes.
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET,
					PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/* never wait long for a lock, and be the one a deadlock stops */
	SetConfigOption("lock_timeout", WORKER_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("deadlock_timeout", WORKER_DEADLOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The worker runs as a superuser: its own catalog statements resolve
	 * names in pg_catalog only, never in schemas users can create objects in.
	 */
	SetConfigOption("search_path", RUNAS_SEARCH_PATH, PGC_SUSET, PGC_S_SESSION);
}

/* Publish the error that is ending the worker (in a PG_CATCH) */
static void
worker_note_failure(void)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(ErrorContext);
	ErrorData  *edata = CopyErrorData();
	DbWorker   *db;

	MemoryContextSwitchTo(oldcxt);
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = worker_find_db(worker_dboid, false);
	if (db != NULL)
		strlcpy(db->failure, edata->message ? edata->message : "unknown error",
				sizeof(db->failure));
	LWLockRelease(worker_shared->lock);
}

/* A batch applied: the last worker's failure, if any, is behind us */
static void
worker_clear_failure(void)
{
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = worker_find_db(worker_dboid, false);
	if (db != NULL)
		db->failure[0] = '\0';
	LWLockRelease(worker_shared->lock);
}

/*
 * Leaving, by error or not: give the slot back (an error does not) and
 * tell the launcher, through shared memory, that no worker runs.
 */
static void
worker_on_exit(int code, Datum arg)
{
	parallel_stop();
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
	TimestampTz next_shard_sync = 0;
	CatalogCheck check = CATALOG_VIEWS;

	for (;;)
	{
		uint64		generation;
		TimestampTz now;
		TimestampTz retry;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			parallel_trim();
		}
		worker_confirm_flushed();

		LWLockAcquire(worker_shared->lock, LW_SHARED);
		generation = worker_find_db(worker_dboid, false)->generation;
		LWLockRelease(worker_shared->lock);
		now = GetCurrentTimestamp();
		if (generation != seen_generation || now >= next_check)
		{
			/* a view was created, dropped or refreshed: rebuild plans */
			if (generation != seen_generation)
				apply_forget_views();
			check = worker_check_views();
			seen_generation = generation;
			next_check = TimestampTzPlusMilliseconds(now,
													 check == CATALOG_BUSY ?
													 WORKER_BUSY_RETRY_MS :
													 check == CATALOG_WAIT ?
													 WORKER_IDLE_MS :
													 WORKER_CATALOG_CHECK_MS);
			if (check == CATALOG_NO_VIEWS)
			{
				ereport(LOG,
						(errmsg("delta_join worker for database %u exiting: no views left; replication slot \"%s\" dropped",
								worker_dboid, worker_slot)));
				return;
			}
		}

		/* nothing is read or applied until the extension is updated */
		if (check == CATALOG_WAIT)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 WORKER_IDLE_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

		if (now >= next_shard_sync)
		{
			if (worker_is_distributed(worker_dboid))
				worker_sync_shards();
			next_shard_sync = TimestampTzPlusMilliseconds(now, WORKER_SHARD_SYNC_MS);
		}

		if (!decoding_running())
			worker_start_decoding();

		/*
		 * A batch is made and applied as soon as there is WAL to read, a
		 * view is due for another try, or keys carried from the last batch
		 * belong to transactions a new snapshot would see.  A transaction
		 * can stay between its commit record and the end of its commit for
		 * a while (waiting for a synchronous standby): its carried keys are
		 * looked at again every WORKER_CARRY_POLL_MS.
		 */
		worker_wait_round();
		now = GetCurrentTimestamp();
		retry = worker_next_retry();
		if (decoding_behind() || (retry != 0 && retry <= now) || decoding_carried_ready())
		{
			worker_batch(retry != 0 && retry <= now);
			continue;
		}

		{
			long		timeout = decoding_carrying() ? WORKER_CARRY_POLL_MS : WORKER_IDLE_MS;

			if (retry != 0)
				timeout = Max(1, Min(timeout,
									 TimestampDifferenceMilliseconds(GetCurrentTimestamp(), retry)));
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 timeout, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
		}
	}
}

/*
 * After a batch that caught up with the WAL, wait for the next round
 * (batch.h): commits set the latch meanwhile, and share the next batch.
 */
static void
worker_wait_round(void)
{
	long		ms;

	while ((ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_round)) > 0)
	{
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, PG_WAIT_EXTENSION);
		CHECK_FOR_INTERRUPTS();
	}
	next_round = 0;
}

/* When the first deferred view is due for another try, or 0 */
static TimestampTz
worker_next_retry(void)
{
	TimestampTz next = 0;
	ListCell   *lc;

	foreach(lc, deferred_views)
	{
		DeferredView *dv = lfirst(lc);

		if (next == 0 || dv->next_try < next)
			next = dv->next_try;
	}
	return next;
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
	char	   *problem;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	catalog_relid = worker_catalog_relid("view_catalog");
	if (!OidIsValid(catalog_relid))
		result = CATALOG_NO_VIEWS;	/* the extension was dropped */
	else if ((problem = catalog_version_problem()) != NULL)
	{
		/* said once; delta_join.status says it to every reader */
		if (!worker_waiting)
			ereport(LOG,
					(errmsg("delta_join worker for database %u waits: %s",
							worker_dboid, problem)));
		result = CATALOG_WAIT;
	}
	else if (ConditionalLockRelationOid(catalog_relid, ShareLock))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(batch_cxt);
		List	   *views;

		/* a snapshot that sees what committed before we got the lock */
		PopActiveSnapshot();
		PushActiveSnapshot(GetTransactionSnapshot());
		views = catalog_list_views();
		worker_check_citus(views);
		policy = batch_policy_for(views);
		progress_publish(worker_dboid, worker_progress_rows(views),
						 list_length(views), InvalidXLogRecPtr);
		MemoryContextSwitchTo(oldcxt);
		result = (views != NIL) ? CATALOG_VIEWS : CATALOG_NO_VIEWS;

		/* a node of distributed views keeps its slot for the groups to come */
		if (distributed_defined(true))
			worker_set_distributed(worker_dboid);
		if (result == CATALOG_NO_VIEWS && worker_is_distributed(worker_dboid))
			result = CATALOG_VIEWS;
	}
	else
		result = CATALOG_BUSY;

	if (result == CATALOG_NO_VIEWS)
	{
		decoding_stop();
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		if (SearchNamedReplicationSlot(worker_slot, true) != NULL)
			ReplicationSlotDrop(worker_slot, true);
	}
	if (worker_waiting && result != CATALOG_WAIT)
		ereport(LOG,
				(errmsg("delta_join worker for database %u goes on: the library runs the extension's version installed now",
						worker_dboid)));
	worker_waiting = (result == CATALOG_WAIT);

	PopActiveSnapshot();
	CommitTransactionCommand();
	return result;
}

/*
 * Bring the views of the shard groups this node holds in line with the
 * distributed views and the placements (distributed.c): a group moved here
 * gets its view, one moved away loses it.  A failure is logged and tried
 * again at the next round.
 */
static void
sync_shards(void *arg)
{
	PushActiveSnapshot(GetTransactionSnapshot());
	distributed_sync_node();
	PopActiveSnapshot();
}

static void
worker_sync_shards(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	distributed_try(sync_shards, NULL, "could not update the views of this node's shard groups");
	CommitTransactionCommand();
	MemoryContextSwitchTo(oldcxt);
}

/*
 * A view whose source Citus distributed after the view was made would never
 * see a change again (citus.c): it goes to error.
 */
static void
worker_check_citus(List *views)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		Oid			relid;
		char	   *message;

		if (view->in_error || !OidIsValid(relid = citus_source_of(view->sources)))
			continue;
		message = psprintf("source \"%s\" is now %s of Citus: its rows and their changes are in shards on the worker nodes",
						   get_rel_name(relid), citus_table_kind(relid));
		catalog_set_error(view->view_id, message);
		view->in_error = true;
		ereport(WARNING,
				(errmsg("delta view \"%s\" is in error and no longer maintained: %s",
						catalog_view_name(view), message),
				 errhint("Drop the view; on the Citus coordinator, a view of co-located distributed tables is made a distributed view.")));
	}
}

/* Progress rows for views, with nothing applied yet (batch memory) */
static ViewProgress *
worker_progress_rows(List *views)
{
	ViewProgress *rows = palloc0(sizeof(ViewProgress) * Max(list_length(views), 1));
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		ViewProgress *vp = &rows[foreach_current_index(lc)];
		DeferredView *dv = worker_find_deferred(view->view_id);

		vp->view_id = view->view_id;
		vp->in_error = view->in_error;
		vp->catalog_lsn = view->applied_lsn;
		vp->deferred = (dv != NULL);
		vp->retry_reason = dv ? dv->reason : NULL;
	}
	return rows;
}

/*
 * Acquire the slot and set up decoding from its restart point; the context
 * stays open across batches.
 */
static void
worker_start_decoding(void)
{
	StartTransactionCommand();
	CheckLogicalDecodingRequirements();
	ReplicationSlotAcquire(worker_slot, true);

	/* A slot invalidated for retaining too much WAL cannot decode. */
	if (XLogRecPtrIsInvalid(MyReplicationSlot->data.restart_lsn))
	{
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

	decoding_start(worker_cxt);
	batch_start_lsn = MyReplicationSlot->data.confirmed_flush;
	CommitTransactionCommand();
}

/*
 * How far a batch that decoded the WAL up to here covers every view: up to
 * the first transaction whose keys it carries to the next batch, if any.
 */
static XLogRecPtr
worker_covered_lsn(void)
{
	XLogRecPtr	end_lsn = decoding_position();
	XLogRecPtr	carried = decoding_carried_lsn();

	if (!XLogRecPtrIsInvalid(carried) && carried < end_lsn)
		return carried;
	return end_lsn;
}

/*
 * Nothing captured, but WAL was read: every view is as fresh as the WAL
 * read, deferred views and carried keys aside.  Publish it and let the
 * slot move on.
 */
static void
worker_progress(void)
{
	XLogRecPtr	end_lsn = worker_covered_lsn();

	if (end_lsn <= batch_start_lsn)
		return;
	worker_confirm(end_lsn);
	progress_advance(worker_dboid, end_lsn);
	batch_start_lsn = end_lsn;
}

/*
 * Make a batch and apply it, in one transaction (consistent snapshots,
 * DESIGN.md section 5): take the snapshot the batch is applied under,
 * read the WAL insert position after it -- every transaction the snapshot
 * sees has its commit record before that position -- and decode up to
 * there.  The keys of the transactions the snapshot does not see are
 * carried to the next batch (decode.h).  Every key the batch applies is
 * then recomputed under that one snapshot, and every change the snapshot
 * sees is in this batch or an earlier one: when the batch commits, each
 * view it applied holds its query's result over the sources as that
 * snapshot saw them.
 *
 * Only a batch that reached the position is whole in that sense: one that
 * stopped early because it was full (a backlog larger than max_batch_size)
 * leaves the changes after it to the next batch.  A view whose work takes
 * longer than its time slice commits part of it (worker_apply_view).
 */
static void
worker_batch(bool retry_due)
{
	Snapshot	snapshot;
	XLogRecPtr	upto;
	bool		caught_up;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	upto = progress_wal_position_now();
	caught_up = decoding_read(policy, snapshot, upto);

	if (decoding_batch_empty() && !retry_due)
	{
		UnregisterSnapshot(snapshot);
		CommitTransactionCommand();
		worker_progress();
		worker_new_batch();
		return;
	}

	worker_apply_batch(snapshot);
	if (caught_up)
		next_round = batch_policy_next_round(policy, GetCurrentTimestamp());
}

/* Start a new batch, in memory of its own. */
static void
worker_new_batch(void)
{
	if (batch_cxt == NULL)
		batch_cxt = AllocSetContextCreate(worker_cxt, "delta_join batch",
										  ALLOCSET_DEFAULT_SIZES);
	else
	{
		decoding_end_batch();
		MemoryContextReset(batch_cxt);
	}
	decoding_new_batch(batch_cxt);
}

/* A view's work in a batch (worker_apply_batch) */
struct ViewWork
{
	ViewRecord *view;
	ViewProgress *vp;
	DeferredView *dv;			/* its waiting keys, or NULL */
	ViewBatch  *batch;			/* its part of the captured batch, or NULL */
	ViewBatch  *work;			/* what is applied: batch, or the keys waiting */
	int		   *share_by;		/* shareable: what picks a key's share
								 * (apply_view_shareable) */
	ViewBatch  *mine;			/* shared with helpers: the worker's share */
	bool		chunked;		/* its keys spilled: shared a chunk at a time,
								 * after the batch's transaction */
	ViewResult	result;			/* of the worker's share, or of the chunks */
	char	   *message;		/* the chunks' error */
	int			sqlerrcode;
};

/* The views applied in a transaction, whose position it stores */
struct AppliedViews
{
	int		   *ids;
	int			n;
};

/*
 * Apply the captured batch, and the deferred views that are due; then
 * confirm what is done to the slot and start a new batch.
 *
 * Alone, the worker applies the batch in one transaction.  Keys the capture
 * spilled to disk (decode.h) are read back a chunk of max_keys at a time as
 * each view is applied, in the same transaction, so that memory stays
 * bounded and no half of a batch is ever visible.
 *
 * With helpers (parallel apply, parallel.h), the views of a large batch
 * that can be shared are split into shares: the worker applies its own in
 * that transaction and commits it, then waits for the helpers' commits, and
 * in a second transaction applies alone again each such view a share of
 * which failed, and stores the shared views' positions.
 */
static void
worker_apply_batch(Snapshot snapshot)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(batch_cxt);
	List	   *batches = decoding_batch_views();
	XLogRecPtr	end_lsn = worker_covered_lsn();
	TimestampTz now = GetCurrentTimestamp();
	List	   *views;
	List	   *todo = NIL;
	ViewProgress *progress;
	AppliedViews applied;
	ShareRound *round;
	bool		shared_chunks;
	XLogRecPtr	confirm;
	ListCell   *lc;
	int64		spill_at;
	int64		spilled = decoding_batch_spilled(&spill_at);

	if (spilled > 0)
		elog(DEBUG1, "batch of more than %lld dirty keys: %lld were spilled to disk, applied in chunks of %d",
			 (long long) spill_at, (long long) spilled, policy.max_keys);

	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(batch_cxt);

	/*
	 * The extension updated since the last look at the catalog, to a version
	 * this library does not run: end here, applying nothing (the next
	 * worker waits, worker_check_views).
	 */
	catalog_require_version();
	views = catalog_list_views();
	policy = batch_policy_for(views);
	progress = worker_progress_rows(views);
	applied.ids = palloc(sizeof(int) * Max(list_length(views), 1));
	applied.n = 0;
	worker_forget_dropped(views);

	foreach(lc, views)
	{
		ViewWork   *vw = worker_view_work(lfirst(lc), &progress[foreach_current_index(lc)],
										  batches, now);

		if (vw != NULL)
			todo = lappend(todo, vw);
	}
	round = worker_share(todo, end_lsn, spilled > 0, &shared_chunks);

	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);
		char	   *message = NULL;
		int			sqlerrcode = 0;
		ViewResult	result;

		if (vw->chunked)
			continue;
		pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
		if (vw->mine != NULL)
			vw->result = worker_apply_view(vw->view, vw->mine, &vw->vp->counts, false,
										   snapshot, false, NULL, &message, &sqlerrcode);
		else
		{
			ViewBatch  *rest = NULL;

			result = worker_apply_view(vw->view, vw->work, &vw->vp->counts, true,
									   snapshot, true, &rest, &message, &sqlerrcode);
			worker_view_done(vw, result, rest, message, sqlerrcode, now, &applied);
		}
		pgstat_report_activity(STATE_IDLE, NULL);
	}

	/* views whose changes could not be captured (decode.c) */
	foreach(lc, decoding_batch_broken())
	{
		BrokenView *broken = (BrokenView *) lfirst(lc);

		catalog_set_error(broken->view_id, broken->message);
		for (int i = 0; i < list_length(views); i++)
		{
			if (progress[i].view_id == broken->view_id)
				progress[i].in_error = true;
		}
	}

	catalog_set_applied(applied.n, applied.ids, end_lsn);
	PopActiveSnapshot();
	UnregisterSnapshot(snapshot);
	CommitTransactionCommand();
	MemoryContextSwitchTo(batch_cxt);

	if (round != NULL || shared_chunks)
		worker_share_finish(round, todo, end_lsn, now, &applied);
	pgstat_report_stat(false);	/* the targets' row counts, in pg_stat_user_tables */

	progress_publish(worker_dboid, progress, list_length(views), end_lsn);
	MemoryContextSwitchTo(oldcxt);

	/* the slot never moves past a batch that waits for another try */
	confirm = end_lsn;
	foreach(lc, deferred_views)
		confirm = Min(confirm, ((DeferredView *) lfirst(lc))->since_lsn);
	worker_confirm(confirm);

	batch_start_lsn = end_lsn;
	worker_new_batch();
	if (failed_before)
	{
		worker_clear_failure();
		failed_before = false;
	}
}

/*
 * What a view applies in this batch: its part of the batch (batches), or,
 * when it waits for another try, the keys waiting with it; NULL when it
 * applies nothing now (in error, waiting, no work).
 */
static ViewWork *
worker_view_work(ViewRecord *view, ViewProgress *vp, List *batches, TimestampTz now)
{
	DeferredView *dv = worker_find_deferred(view->view_id);
	ViewBatch  *batch = NULL;
	ViewBatch  *work;
	ViewWork   *vw;
	ListCell   *lc;

	foreach(lc, batches)
	{
		if (((ViewBatch *) lfirst(lc))->view_id == view->view_id)
			batch = lfirst(lc);
	}
	if (batch != NULL)
	{
		vp->changes = batch->changes;
		vp->commit_time = batch->commit_time;
	}

	/* stale until refreshed: its keys are dropped */
	if (view->in_error)
	{
		if (dv != NULL)
			worker_forget_deferred(dv);
		vp->deferred = false;
		return NULL;
	}

	if (dv != NULL)
	{
		/* the new keys join those waiting */
		if (batch != NULL)
			worker_defer(view, batch, now);
		if (dv->next_try > now)
		{
			worker_defer_spilled(dv, view);
			vp->deferred = true;
			vp->retry_reason = dv->reason;
			return NULL;
		}
		work = dv->batch;
		if (work == NULL)
		{
			/* nothing waits with it any more */
			worker_forget_deferred(dv);
			vp->deferred = false;
			return NULL;
		}
	}
	else
		work = batch;
	if (work == NULL)
		return NULL;

	/* a full recompute runs at most once per refresh_interval */
	if (view->path == DJ_PATH_FULL)
	{
		TimestampTz due = TimestampTzPlusMilliseconds(worker_recomputed_at(view->view_id),
													  view->options.refresh_interval_ms);

		if (due > now)
		{
			if (dv == NULL)
				dv = worker_defer(view, batch, now);
			dv->next_try = due;
			if (dv->reason == NULL)
				dv->reason = MemoryContextStrdup(worker_cxt, "waiting for its refresh_interval");
			vp->deferred = true;
			vp->retry_reason = dv->reason;
			return NULL;
		}
	}

	vw = palloc0(sizeof(ViewWork));
	vw->view = view;
	vw->vp = vp;
	vw->dv = dv;
	vw->batch = batch;
	vw->work = work;
	return vw;
}

/*
 * A view's work was applied with that result: note it applied, make it wait
 * for another try, or put it in error.
 */
static void
worker_view_done(ViewWork *vw, ViewResult result, ViewBatch *rest, char *message,
				 int sqlerrcode, TimestampTz now, AppliedViews *applied)
{
	ViewRecord *view = vw->view;
	ViewProgress *vp = vw->vp;
	DeferredView *dv = vw->dv;

	/*
	 * Part of the work was done and committed with the batch (its time
	 * slice ran out), or none could be done under the batch's snapshot:
	 * what is left is applied by the next batch, at once.
	 */
	if (result == VIEW_PARTIAL || result == VIEW_LATER)
	{
		dv = worker_defer_rest(view, dv, rest, now);
		if (result == VIEW_PARTIAL)
		{
			dv->tries = dv->timeouts = 0;
			dv->first_failure = 0;
		}
		vp->deferred = true;
		vp->retry_reason = dv->reason;
		vp->applied = (result == VIEW_PARTIAL);	/* its counts */
		return;
	}

	if (result == VIEW_DEFERRED)
	{
		if (dv == NULL)
			dv = worker_defer(view, vw->batch, now);
		worker_defer_spilled(dv, view);
		worker_defer_failure(dv, message, sqlerrcode);
		if (!worker_gives_up(dv, view, sqlerrcode, now, &message))
		{
			vp->deferred = true;
			vp->retry_reason = dv->reason;
			return;
		}
		result = VIEW_FAILED;
	}

	if (dv != NULL)
		worker_forget_deferred(dv);
	vp->deferred = false;
	if (result == VIEW_FAILED)
	{
		ViewRecord	current;

		/* dropped since the views were read (its target is gone): no error */
		if (!catalog_get_view(view->view_id, &current))
			return;
		catalog_set_error(view->view_id, message);
		vp->in_error = true;
		ereport(WARNING,
				(errmsg("delta view \"%s\" is in error and no longer maintained: %s",
						catalog_view_name(view), message),
				 errhint("Fix the cause, then rebuild the view with delta_join.refresh().")));
		return;
	}
	vp->applied = true;
	applied->ids[applied->n++] = view->view_id;
	if (view->path == DJ_PATH_FULL)
		worker_note_recompute(view->view_id, now);
}

/*
 * Share the batch with the helpers when it is large enough and they are
 * there: each view that can be shared (apply_view_shareable) is split, and
 * the helpers start on their shares.  NULL when the worker applies alone.
 * A large batch starts the helpers that do not run (they take later
 * rounds), and builds the plans of views not applied yet, so that they can
 * be judged.
 *
 * When the batch spilled, a round of the whole would need all its keys in
 * memory: the views that can be shared are instead marked chunked, and
 * applied a chunk at a time after the batch's transaction, each chunk a
 * round of its own (worker_apply_chunks); *shared_chunks says whether any
 * is.
 */
static ShareRound *
worker_share(List *todo, XLogRecPtr end_lsn, bool spilled, bool *shared_chunks)
{
	int64		nkeys = 0;
	int			nhelpers;
	ShareRound *round;
	ListCell   *lc;

	*shared_chunks = false;
	if (dj_apply_workers <= 1)
		return NULL;
	foreach(lc, todo)
		nkeys += view_batch_nkeys(((ViewWork *) lfirst(lc))->work);
	if (!spilled && (nkeys == 0 || nkeys < dj_parallel_apply_min_keys))
		return NULL;

	/* a large batch: helpers are started if they do not run */
	nhelpers = parallel_helpers(worker_dboid);
	nkeys = 0;
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		vw->share_by = palloc(sizeof(int) * Max(list_length(vw->work->sources), 1));
		if (vw->view->path == DJ_PATH_DELTA)
			worker_prepare_view(vw->view);
		if (!worker_shares_view(vw->view->view_id))
			vw->share_by = NULL;
		else if (apply_view_shareable(vw->view, vw->work, vw->share_by))
			nkeys += view_batch_nkeys(vw->work);
		else
			vw->share_by = NULL;
	}

	/* the chunks of each round take the helpers that are ready by then */
	if (spilled)
	{
		foreach(lc, todo)
		{
			ViewWork   *vw = lfirst(lc);

			vw->chunked = (vw->share_by != NULL);
			*shared_chunks |= vw->chunked;
		}
		return NULL;
	}
	if (nhelpers == 0 || nkeys == 0)
		return NULL;

	round = parallel_round_begin(nhelpers, end_lsn);
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		if (vw->share_by != NULL)
			vw->mine = parallel_round_split(round, vw->work, vw->share_by,
											vw->view->options.lookup_timeout_ms);
	}
	parallel_round_start(round);
	return round;
}

/*
 * Views whose shares failed lately (their keys met on target rows, say a
 * star join changed on both sides): each is applied alone for its next
 * SHARE_BACKOFF large batches, so that a workload that conflicts does not
 * pay for two applies every batch.
 */
typedef struct ShareBackoff
{
	int			view_id;
	int			skip;			/* large batches still applied alone */
} ShareBackoff;

static List *share_backoffs = NIL;	/* ShareBackoff *, in worker_cxt */

#define SHARE_BACKOFF	8

static ShareBackoff *
worker_find_backoff(int view_id)
{
	ListCell   *lc;

	foreach(lc, share_backoffs)
	{
		if (((ShareBackoff *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	return NULL;
}

/* May this large batch share the view?  Counts down its backoff. */
static bool
worker_shares_view(int view_id)
{
	ShareBackoff *sb = worker_find_backoff(view_id);

	if (sb == NULL || sb->skip == 0)
		return true;
	sb->skip--;
	return false;
}

static void
worker_note_share_failed(int view_id)
{
	ShareBackoff *sb = worker_find_backoff(view_id);

	if (sb == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(worker_cxt);

		sb = palloc0(sizeof(ShareBackoff));
		sb->view_id = view_id;
		share_backoffs = lappend(share_backoffs, sb);
		MemoryContextSwitchTo(oldcxt);
	}
	sb->skip = SHARE_BACKOFF;
}

/*
 * Build a view's plan before its first apply, as its target's owner, so
 * that the batch can be shared (apply_view_shareable).  An error is left
 * to the apply, which meets it again and handles it.
 */
static void
worker_prepare_view(ViewRecord *view)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		RunAs		runas;

		runas_begin(runas_target_owner(view->target), view->settings, &runas);
		apply_prepare_view(view);
		runas_end(&runas);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
}

/*
 * After the worker committed its shares: wait for the helpers' commits, and
 * apply the chunked views, a chunk at a time.  Then, in a transaction of its
 * own, apply alone again each shared view that a share failed, and store
 * the positions of the shared views applied.
 */
static void
worker_share_finish(ShareRound *round, List *todo, XLogRecPtr end_lsn, TimestampTz now,
					AppliedViews *applied)
{
	ListCell   *lc;

	if (round != NULL)
		parallel_round_finish(round);
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		if (vw->chunked)
			worker_apply_chunks(vw, end_lsn);
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(batch_cxt);
	applied->n = 0;
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);
		ViewResult	result = vw->result;
		char	   *message = vw->message;
		int			sqlerrcode = vw->sqlerrcode;

		if (vw->mine == NULL && !vw->chunked)
			continue;
		if (vw->mine != NULL &&
			(result != VIEW_APPLIED ||
			 !parallel_round_view_done(round, vw->view->view_id, &vw->vp->counts)))
		{
			worker_note_share_failed(vw->view->view_id);
			elog(DEBUG1, "delta view \"%s\": a share failed, the worker applies the view alone",
				 catalog_view_name(vw->view));
			memset(&vw->vp->counts, 0, sizeof(ApplyCounts));
			pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
			result = worker_apply_view(vw->view, vw->work, &vw->vp->counts, true,
									   NULL, false, NULL, &message, &sqlerrcode);
			pgstat_report_activity(STATE_IDLE, NULL);
		}
		worker_view_done(vw, result, NULL, message, sqlerrcode, now, applied);
	}
	catalog_set_applied(applied->n, applied->ids, end_lsn);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(batch_cxt);
	if (round != NULL)
		parallel_round_end(round);
}

/*
 * Apply a chunked view: each chunk of keys the capture spilled for it, then
 * what stayed in memory, each shared with the helpers in a round of its
 * own.  It stops at the first chunk that cannot be applied, with
 * vw->result, message and sqlerrcode saying why; the view then waits or
 * goes to error with all its keys, as when applied alone.
 */
static void
worker_apply_chunks(ViewWork *vw, XLogRecPtr end_lsn)
{
	MemoryContext chunk_cxt = AllocSetContextCreate(batch_cxt, "delta_join shared chunk",
													ALLOCSET_DEFAULT_SIZES);
	bool		rewind = true;
	bool		last = false;

	vw->result = VIEW_APPLIED;
	memset(&vw->vp->counts, 0, sizeof(ApplyCounts));
	while (!last && vw->result == VIEW_APPLIED)
	{
		ViewBatch  *chunk;

		MemoryContextSwitchTo(chunk_cxt);
		chunk = decoding_batch_next_chunk(vw->view->view_id, rewind, policy.max_keys);
		rewind = false;
		if (chunk == NULL)
		{
			chunk = vw->work;
			last = true;
		}
		vw->result = worker_apply_shared(vw, chunk, end_lsn);
		MemoryContextReset(chunk_cxt);
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(batch_cxt);
	MemoryContextDelete(chunk_cxt);
}

/*
 * One round of a chunked view: the worker applies its share of the chunk
 * in a transaction of its own and commits, then waits for the helpers; if a
 * share failed, it applies the whole chunk alone.  The counts go to the
 * view's; an error to vw->message.
 */
static ViewResult
worker_apply_shared(ViewWork *vw, ViewBatch *batch, XLogRecPtr end_lsn)
{
	MemoryContext cxt = CurrentMemoryContext;	/* the chunk's */
	int		   *share_by = palloc(sizeof(int) * Max(list_length(batch->sources), 1));
	int			nhelpers = 0;
	ShareRound *round = NULL;
	ApplyCounts counts;
	ViewResult	result;
	char	   *message = NULL;
	int			sqlerrcode = 0;
	bool		done = true;

	memset(&counts, 0, sizeof(counts));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
	if (worker_shares_view(vw->view->view_id) &&
		apply_view_shareable(vw->view, batch, share_by) &&
		(nhelpers = parallel_helpers(worker_dboid)) > 0)
	{
		ViewBatch  *mine;

		round = parallel_round_begin(nhelpers, end_lsn);
		mine = parallel_round_split(round, batch, share_by,
									vw->view->options.lookup_timeout_ms);
		parallel_round_start(round);
		result = worker_apply_view(vw->view, mine, &counts, false, NULL, false, NULL,
								   &message, &sqlerrcode);
	}
	else
		result = worker_apply_view(vw->view, batch, &counts, false, NULL, false, NULL,
								   &message, &sqlerrcode);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);

	if (round != NULL)
	{
		parallel_round_finish(round);
		done = parallel_round_view_done(round, vw->view->view_id, &counts);
		parallel_round_end(round);
	}
	if (round != NULL && (result != VIEW_APPLIED || !done))
	{
		worker_note_share_failed(vw->view->view_id);
		memset(&counts, 0, sizeof(counts));
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(cxt);
		elog(DEBUG1, "delta view \"%s\": a share failed, the worker applies the chunk alone",
			 catalog_view_name(vw->view));
		result = worker_apply_view(vw->view, batch, &counts, false, NULL, false, NULL,
								   &message, &sqlerrcode);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	MemoryContextSwitchTo(cxt);

	if (result == VIEW_APPLIED)
		apply_counts_add(&vw->vp->counts, &counts);
	else
	{
		vw->message = MemoryContextStrdup(batch_cxt, message);
		vw->sqlerrcode = sqlerrcode;
	}
	return result;
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

/* Errors that another try of the same view may not meet */
static bool
error_is_passing(int sqlerrcode)
{
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		sqlerrcode == ERRCODE_QUERY_CANCELED;
}

/*
 * The view's lookup_timeout (STATEMENT_TIMEOUT) and the worker's
 * lock_timeout may go off together.  One of them raises the error that ends
 * the view's apply; the other, going off while that error unwinds, leaves a
 * cancel pending that would end the worker's next step instead.  It
 * belonged to the view's apply, which is over: forget it.
 */
static void
forget_own_cancel(void)
{
	bool		timed_out = get_timeout_indicator(LOCK_TIMEOUT, true);

	timed_out |= get_timeout_indicator(STATEMENT_TIMEOUT, true);
	if (timed_out)
		QueryCancelPending = false;
}

/*
 * The keys of a view's work, a piece at a time: first the keys the capture
 * spilled for it (when its work includes them), a chunk at a time, then
 * its batch in memory.  Pieces are applied one after another in the
 * view's subtransaction (worker_apply_view), each seeing what the earlier
 * ones wrote.
 */
typedef struct Pieces
{
	ViewRecord *view;
	bool		spilled;		/* chunks of spilled keys are still to read */
	bool		rewind;			/* the first chunk is still to read */
	MemoryContext chunk_cxt;	/* holds the chunk being taken apart */
	ViewBatch  *from;			/* a copy of the chunk or batch being taken
								 * apart, or NULL */
	bool		first;			/* no piece was taken from it yet */
	ViewBatch  *batch;			/* the batch in memory, once the chunks are
								 * read; NULL once taken */
} Pieces;

/*
 * The next piece of at most n keys, in the pieces' chunk memory; NULL when
 * every key was taken.
 */
static ViewBatch *
pieces_next(Pieces *pc, int64 n)
{
	while (pc->from == NULL || (!pc->first && view_batch_nkeys(pc->from) == 0))
	{
		MemoryContext oldcxt;

		MemoryContextReset(pc->chunk_cxt);
		oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		pc->from = NULL;
		if (pc->spilled)
		{
			pc->from = decoding_batch_next_chunk(pc->view->view_id, pc->rewind,
												 policy.max_keys);
			pc->rewind = false;
			pc->spilled = (pc->from != NULL);
		}
		if (pc->from == NULL && pc->batch != NULL)
		{
			pc->from = view_batch_copy(pc->batch);
			pc->batch = NULL;
		}
		MemoryContextSwitchTo(oldcxt);
		if (pc->from == NULL)
			return NULL;
		pc->first = true;
	}
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		ViewBatch  *piece = view_batch_take(pc->from, n, pc->first);

		MemoryContextSwitchTo(oldcxt);
		pc->first = false;
		return piece;
	}
}

/*
 * Every key not taken yet, as one batch in CurrentMemoryContext (each key
 * once, without its row); NULL when none is left.
 */
static ViewBatch *
pieces_rest(Pieces *pc)
{
	ViewBatch  *rest = palloc0(sizeof(ViewBatch));
	HTAB	   *seen = key_set_create(CurrentMemoryContext);
	MemoryContext cxt = CurrentMemoryContext;

	rest->view_id = pc->view->view_id;
	if (pc->from != NULL)
		view_batch_merge(rest, pc->from, seen, cxt);
	while (pc->spilled)
	{
		ViewBatch  *chunk;
		MemoryContext oldcxt;

		MemoryContextReset(pc->chunk_cxt);
		oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		chunk = decoding_batch_next_chunk(pc->view->view_id, pc->rewind, policy.max_keys);
		MemoryContextSwitchTo(oldcxt);
		pc->rewind = false;
		pc->spilled = (chunk != NULL);
		if (chunk != NULL)
			view_batch_merge(rest, chunk, seen, cxt);
	}
	if (pc->batch != NULL)
		view_batch_merge(rest, pc->batch, seen, cxt);
	hash_destroy(seen);
	return rest;
}

/*
 * How many keys a view's next piece takes, learned from its last pieces: a
 * piece should take about WORKER_PIECE_MS, so that the view's time slice is
 * checked often enough, and not much less, so that a piece's fixed cost
 * (the target's writer, the lookups' scans) stays small.
 */
typedef struct PieceSize
{
	int			view_id;
	int64		keys;
} PieceSize;

static List *piece_sizes = NIL;	/* PieceSize *, in TopMemoryContext */

static PieceSize *
worker_piece_size(int view_id)
{
	PieceSize  *ps;
	ListCell   *lc;
	MemoryContext oldcxt;

	foreach(lc, piece_sizes)
	{
		if (((PieceSize *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);	/* helpers have no worker_cxt */
	ps = palloc(sizeof(PieceSize));
	ps->view_id = view_id;
	ps->keys = WORKER_PIECE_FIRST_KEYS;
	piece_sizes = lappend(piece_sizes, ps);
	MemoryContextSwitchTo(oldcxt);
	return ps;
}

static void
worker_piece_took(PieceSize *ps, int64 keys, long ms)
{
	if (keys < ps->keys)
		return;					/* the last piece: says little */
	if (ms < WORKER_PIECE_MS / 4)
		ps->keys = Min(ps->keys * 2, WORKER_PIECE_MAX_KEYS);
	else if (ms > WORKER_PIECE_MS * 2)
		ps->keys = Max(ps->keys / 2, 1);
}

/*
 * Apply a view's work, as the target's owner with the view's settings and
 * its lookup timeout, in a subtransaction: on error it is rolled back and
 * the error returned in *message.
 *
 * snapshot is the batch's, under which the view is applied (seeing what
 * the batch's earlier views wrote), or NULL: a snapshot taken once what the
 * view reads is locked (a helper's share, a view applied again alone).  A
 * view whose tables or catalog row were written by a transaction the
 * batch's snapshot does not see -- created, refreshed, rewritten or
 * truncated after it was taken -- cannot be applied under it (a rewrite is
 * not MVCC-safe: to that snapshot the table looks empty): VIEW_LATER, with
 * all the work in *rest for the next batch.
 *
 * With sliced, the view's work is applied a piece at a time and stops
 * after its time slice (WORKER_SLICE_MS, or half its lookup_timeout if
 * that is less), committing what it did with the batch: VIEW_PARTIAL, and
 * what is left in *rest (in CurrentMemoryContext), so that other views do
 * not wait behind one view's large batch and each try makes progress.  A
 * recompute of the whole (full recompute, an aggregate without GROUP BY)
 * is one piece.
 *
 * With spilled, the keys the capture spilled for the view are part of its
 * work, applied first.
 */
ViewResult
worker_apply_view(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts, bool spilled,
				  Snapshot snapshot, bool sliced, ViewBatch **rest,
				  char **message, int *sqlerrcode)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile ViewResult result = VIEW_APPLIED;
	PieceSize  *volatile ps = worker_piece_size(view->view_id);
	Pieces		pc;

	memset(&pc, 0, sizeof(pc));
	pc.view = view;
	pc.spilled = spilled && view->path != DJ_PATH_FULL;
	pc.rewind = true;
	pc.batch = batch;
	pc.chunk_cxt = AllocSetContextCreate(oldcxt, "delta_join pieces",
										 ALLOCSET_DEFAULT_SIZES);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		RunAs		runas;
		TimestampTz started = GetCurrentTimestamp();
		int			slice_ms = WORKER_SLICE_MS;
		bool		whole = (view->path == DJ_PATH_FULL);
		ViewBatch  *piece;

		runas_begin(runas_target_owner(view->target), view->settings, &runas);
		if (view->options.lookup_timeout_ms > 0)
		{
			enable_timeout_after(STATEMENT_TIMEOUT, view->options.lookup_timeout_ms);
			slice_ms = Min(slice_ms, view->options.lookup_timeout_ms / 2);
		}

		/*
		 * The snapshot is used once what the view reads is locked: a
		 * create_view or refresh() that held the target is over, and its
		 * catalog row tells whether the snapshot sees it.
		 */
		PushActiveSnapshot(GetTransactionSnapshot());
		if (!apply_lock_view(view, snapshot) ||
			(snapshot != NULL && catalog_view_written_after(view, snapshot)))
			result = VIEW_LATER;
		whole |= apply_view_whole(view);
		PopActiveSnapshot();

		if (result == VIEW_APPLIED)
		{
			if (snapshot != NULL)
			{
				PushCopiedSnapshot(snapshot);
				UpdateActiveSnapshotCommandId();
			}
			else
				PushActiveSnapshot(GetTransactionSnapshot());

			while ((piece = pieces_next(&pc, whole ? PG_INT64_MAX : ps->keys)) != NULL)
			{
				TimestampTz piece_started = GetCurrentTimestamp();

				apply_view_batch(view, piece, counts);

				/* the next piece sees what this one wrote */
				CommandCounterIncrement();
				UpdateActiveSnapshotCommandId();
				worker_piece_took(ps, view_batch_nkeys(piece),
								  TimestampDifferenceMilliseconds(piece_started,
																  GetCurrentTimestamp()));
				if (sliced && !whole &&
					TimestampDifferenceExceeds(started, GetCurrentTimestamp(), slice_ms))
				{
					MemoryContextSwitchTo(oldcxt);
					*rest = pieces_rest(&pc);
					if (view_batch_nkeys(*rest) > 0)
						result = VIEW_PARTIAL;
					break;
				}
			}
			PopActiveSnapshot();
		}

		disable_timeout(STATEMENT_TIMEOUT, true);
		forget_own_cancel();
		runas_end(&runas);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		if (result == VIEW_LATER)
			*rest = pieces_rest(&pc);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		disable_timeout(STATEMENT_TIMEOUT, true);
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		forget_own_cancel();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		memset(counts, 0, sizeof(ApplyCounts));
		*message = pstrdup(edata->message);
		*sqlerrcode = edata->sqlerrcode;
		result = error_is_passing(edata->sqlerrcode) ? VIEW_DEFERRED : VIEW_FAILED;
		/* a piece that ran out of time: the next try takes smaller ones */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ps->keys = Max(ps->keys / 4, 1);
		/* a helper's share that fails is applied again by the worker */
		if (result == VIEW_DEFERRED && !am_helper)
			ereport(LOG,
					(errmsg("delta view \"%s\" could not be applied now, trying again later: %s",
							catalog_view_name(view), edata->message)));
		FreeErrorData(edata);
	}
	PG_END_TRY();

	MemoryContextDelete(pc.chunk_cxt);
	return result;
}

/*
 * Call fn on each chunk of max_keys keys the batch spilled for a view, each
 * in memory that is freed before the next.
 */
static void
worker_each_chunk(ViewRecord *view, void (*fn) (ViewRecord *view, ViewBatch *chunk, void *arg),
				  void *arg)
{
	MemoryContext chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"delta_join batch chunk",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(chunk_cxt);
	ViewBatch  *chunk;
	bool		rewind = true;

	while ((chunk = decoding_batch_next_chunk(view->view_id, rewind, policy.max_keys)) != NULL)
	{
		fn(view, chunk, arg);
		MemoryContextReset(chunk_cxt);
		rewind = false;
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(chunk_cxt);
}

/* When a full-recompute view last recomputed (0: not since the worker started) */
static TimestampTz
worker_recomputed_at(int view_id)
{
	ListCell   *lc;

	foreach(lc, recomputes)
	{
		if (((Recompute *) lfirst(lc))->view_id == view_id)
			return ((Recompute *) lfirst(lc))->at;
	}
	return 0;
}

static void
worker_note_recompute(int view_id, TimestampTz at)
{
	Recompute  *r = NULL;
	ListCell   *lc;

	foreach(lc, recomputes)
	{
		if (((Recompute *) lfirst(lc))->view_id == view_id)
			r = lfirst(lc);
	}
	if (r == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(worker_cxt);

		r = palloc0(sizeof(Recompute));
		r->view_id = view_id;
		recomputes = lappend(recomputes, r);
		MemoryContextSwitchTo(oldcxt);
	}
	r->at = at;
}

/* The deferred view of that id, or NULL */
static DeferredView *
worker_find_deferred(int view_id)
{
	ListCell   *lc;

	foreach(lc, deferred_views)
	{
		if (((DeferredView *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	return NULL;
}

/*
 * The deferred view of a view, made if it is not one yet, with batch (NULL:
 * none) added to its waiting work.
 */
static DeferredView *
worker_defer(ViewRecord *view, ViewBatch *batch, TimestampTz now)
{
	DeferredView *dv = worker_find_deferred(view->view_id);

	if (dv == NULL)
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(worker_cxt);

		dv = palloc0(sizeof(DeferredView));
		dv->view_id = view->view_id;
		dv->cxt = AllocSetContextCreate(worker_cxt, "delta_join deferred view",
										ALLOCSET_DEFAULT_SIZES);
		dv->seen = key_set_create(dv->cxt);
		dv->since_lsn = batch_start_lsn;
		dv->first_failure = now;
		deferred_views = lappend(deferred_views, dv);
		MemoryContextSwitchTo(oldcxt);
	}
	if (batch != NULL)
		worker_defer_add(dv, batch);
	return dv;
}

/*
 * What is left of a view's work (rest: NULL when nothing) becomes its work
 * waiting for the next batch, which tries it at once; the keys it waited
 * with, if any, are replaced (rest holds what is left of them).
 */
static DeferredView *
worker_defer_rest(ViewRecord *view, DeferredView *dv, ViewBatch *rest, TimestampTz now)
{
	MemoryContext old_cxt = NULL;
	MemoryContext oldcxt;

	if (dv == NULL)
		dv = worker_defer(view, NULL, now);
	else
	{
		/* rest may share keys with the waiting work: copy, then free */
		old_cxt = dv->cxt;
		dv->cxt = AllocSetContextCreate(worker_cxt, "delta_join deferred view",
										ALLOCSET_DEFAULT_SIZES);
		dv->seen = key_set_create(dv->cxt);
		dv->batch = NULL;
	}
	if (rest != NULL)
		worker_defer_add(dv, rest);
	if (old_cxt != NULL)
		MemoryContextDelete(old_cxt);

	dv->next_try = now;
	if (dv->reason)
		pfree(dv->reason);
	oldcxt = MemoryContextSwitchTo(worker_cxt);
	dv->reason = rest == NULL || view_batch_nkeys(dv->batch) == 0 ?
		pstrdup("applying the rest of a large batch") :
		psprintf("applying the rest of a large batch: %lld keys left",
				 (long long) view_batch_nkeys(dv->batch));
	MemoryContextSwitchTo(oldcxt);
	return dv;
}

/* Add a batch of a deferred view's to the work waiting, each key once */
static void
worker_defer_add(DeferredView *dv, ViewBatch *batch)
{
	if (dv->batch == NULL)
	{
		dv->batch = MemoryContextAllocZero(dv->cxt, sizeof(ViewBatch));
		dv->batch->view_id = dv->view_id;
	}
	view_batch_merge(dv->batch, batch, dv->seen, dv->cxt);
}

static void
defer_chunk(ViewRecord *view, ViewBatch *chunk, void *arg)
{
	worker_defer_add((DeferredView *) arg, chunk);
}

/*
 * The keys the batch spilled for a deferred view join those waiting (a
 * full recompute needs none).
 */
static void
worker_defer_spilled(DeferredView *dv, ViewRecord *view)
{
	if (view->path != DJ_PATH_FULL)
		worker_each_chunk(view, defer_chunk, dv);
}

/* Another try of a deferred view failed: when to try next, and why */
static void
worker_defer_failure(DeferredView *dv, const char *message, int sqlerrcode)
{
	int			backoff = WORKER_RETRY_MIN_MS << Min(dv->tries, 10);
	MemoryContext oldcxt;

	dv->tries++;
	if (dv->first_failure == 0)
		dv->first_failure = GetCurrentTimestamp();
	if (sqlerrcode == ERRCODE_QUERY_CANCELED)
		dv->timeouts++;
	else
		dv->timeouts = 0;
	/* from the failure, not the start of the try: a try may wait a while */
	dv->next_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   Min(backoff, WORKER_RETRY_MAX_MS));
	if (dv->reason)
		pfree(dv->reason);
	oldcxt = MemoryContextSwitchTo(worker_cxt);
	dv->reason = psprintf("retrying (%d tries): %s", dv->tries, message);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Has a deferred view been tried long enough?  A view that timed out
 * (lookup_timeout) WORKER_TIMEOUT_TRIES times in a row, or that has waited
 * for locks for longer than its lookup_timeout, goes to error: *message
 * then says why.
 */
static bool
worker_gives_up(DeferredView *dv, ViewRecord *view, int sqlerrcode, TimestampTz now,
				char **message)
{
	if (sqlerrcode == ERRCODE_QUERY_CANCELED)
	{
		if (dv->timeouts < WORKER_TIMEOUT_TRIES)
			return false;
		*message = psprintf("lookup_timeout expired %d times in a row: %s",
							dv->timeouts, *message);
		return true;
	}
	if (view->options.lookup_timeout_ms <= 0 ||
		!TimestampDifferenceExceeds(dv->first_failure, now, view->options.lookup_timeout_ms))
		return false;
	*message = psprintf("could not be applied for longer than its lookup_timeout: %s",
						*message);
	return true;
}

/*
 * Forget the deferred views that views (the catalog's) no longer has: their
 * view or its target was dropped, and nothing waits for them any more --
 * least of all the slot.  Their plans go too.
 */
static void
worker_forget_dropped(List *views)
{
	ListCell   *lc;

	apply_forget_dropped(views);
	foreach(lc, deferred_views)
	{
		DeferredView *dv = lfirst(lc);
		bool		found = false;
		ListCell   *lc2;

		foreach(lc2, views)
			found |= (((ViewRecord *) lfirst(lc2))->view_id == dv->view_id);
		if (!found)
		{
			deferred_views = foreach_delete_current(deferred_views, lc);
			worker_free_deferred(dv);
		}
	}
}

/* Drop a deferred view's waiting batches. */
static void
worker_forget_deferred(DeferredView *dv)
{
	deferred_views = list_delete_ptr(deferred_views, dv);
	worker_free_deferred(dv);
}

/* Free a deferred view that is no longer in deferred_views */
static void
worker_free_deferred(DeferredView *dv)
{
	MemoryContextDelete(dv->cxt);
	if (dv->reason)
		pfree(dv->reason);
	pfree(dv);
}
