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
 *	decode	the WAL up to that position; the output plugin (plugin.c)
 *			adds the dirty keys of every decoded change of a source to the
 *			batch's capture (capture.c), and carries to the next batch those
 *			of the transactions the snapshot does not see (capture.h);
 *	apply	read the views from the catalog, then apply each view's part
 *			(apply_view.c: inside a subtransaction, as the target's owner
 *			with the view's pinned settings and its lookup_timeout) under
 *			the batch's snapshot; store the applied position of the views
 *			applied; commit.  A large batch is shared with helpers
 *			(share.c, parallel.h): the views that can be shared are split,
 *			each share applied in a transaction of its own, and their
 *			positions stored in one more transaction once every share
 *			committed;
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
 * once its time slice has passed (apply_view.c), what is
 * left waits for the next batch (VIEW_PARTIAL), where it is applied at once
 * with that batch's other work.  The other views never wait behind one
 * view's large batch for much longer than a slice, and a large batch makes
 * progress with every try instead of starting again after a timeout.  A
 * view's own max_batch_size, when smaller than the worker's, ends its part
 * the same way; the batch itself follows the worker's settings only
 * (batch_policy_for).  The exception is a recompute of the whole (a full
 * recompute, an aggregate without GROUP BY): one piece, never cut, since a
 * part of it would be a state its query never had; while it runs, the
 * other views wait (README, "Time slices").
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
 * growing backoff, and the slot is not confirmed past it (retry.c).
 * The other views go on meanwhile.  It goes to error only once its
 * lookup_timeout has passed since the first failure, or after a few
 * statement timeouts in a row.  The worker's deadlock_timeout
 * is short, so that in a deadlock with a user's transaction the worker is
 * the one that gives way.
 *
 * A view in state 'backfilling' (a concurrent create or refresh runs,
 * ops/concurrent.c) has its keys captured as any view's, but held back
 * (retry_hold) until it is active again, and the slot is not confirmed past
 * them; one whose backfill's process is gone goes to error.
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
 * launcher_notify() set its latch to wake it at once.
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
 * the keys it waits for into memory of its own (retry.c), each key once
 * however many batches brought it.
 *
 * Length: about 1,300 lines, a tenth of them this comment.  What is
 * left is the one job of the worker -- its loop, its batch's transaction
 * and what each view does in it, confirming the slot --, which reads best
 * in one place; the state that outlives a batch is retry.c's, and parallel
 * apply is share.c's and parallel.c's.
 *
 * IDENTIFICATION
 *	  src/process/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/fd.h"
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

#include "apply/apply.h"
#include "apply/plan_cache.h"
#include "apply/apply_view.h"
#include "base/batch.h"
#include "base/delta_join.h"
#include "base/progress.h"
#include "base/shmem.h"
#include "capture/decoding.h"
#include "process/launcher.h"
#include "process/parallel.h"
#include "process/retry.h"
#include "process/share.h"
#include "process/worker.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"

#define WORKER_IDLE_MS			1000	/* idle wake-up: commits set the latch */
#define WORKER_CARRY_POLL_MS	10	/* look again at carried keys' transactions */
#define WORKER_READ_AHEAD_POLL_MS 100	/* look at the WAL's position this
										 * often while it grows
										 * (worker_idle_wait) */
#define WORKER_READ_AHEAD_BYTES (8 * 1024 * 1024)	/* decoded before their
													 * commit past this */
#define WORKER_CATALOG_CHECK_MS 10000	/* re-read the views at least this often */
#define WORKER_SHARD_SYNC_MS	1000	/* look at the shard groups held this
										 * often (distributed views) */
#define WORKER_BUSY_RETRY_MS	50	/* retry of a catalog check that found it
									 * locked */

/* What a look at the catalog found */
typedef enum CatalogCheck
{
	CATALOG_VIEWS,				/* the database has views */
	CATALOG_NO_VIEWS,			/* it has none: the slot is dropped */
	CATALOG_BUSY,				/* a transaction is changing the views */
	CATALOG_WAIT,				/* the library does not run the extension's
								 * version here: wait for its update */
	CATALOG_REMADE				/* the extension was dropped and created
								 * again: start afresh */
} CatalogCheck;

/* What the Citus layer does for the worker (worker.h); set at _PG_init */
WorkerCitus worker_citus = {NULL, NULL};

static Oid	worker_dboid = InvalidOid;

/*
 * The catalog this worker read: what it keeps in memory about views (their
 * plans, retries, carried keys, all by view_id) is about that catalog's
 * views, and view_ids start again in a new one.
 */
static Oid	worker_catalog = InvalidOid;
static bool worker_recheck = false; /* a batch found another catalog */
static char worker_slot[NAMEDATALEN];
static MemoryContext worker_cxt = NULL;
static MemoryContext batch_cxt = NULL;	/* the capture's; reset by each batch */
static XLogRecPtr batch_start_lsn = InvalidXLogRecPtr;
static bool batch_caught_up = true; /* the batch read all its snapshot sees */
static bool worker_waiting = false; /* for the extension's update */

/*
 * Exactly once (worker_exactly_once): the views whose catalog row this
 * process wrote last, with the applied position of a batch that read all
 * its snapshot sees, and the transaction that wrote it.
 */
typedef struct OwnWrite
{
	int			view_id;
	TransactionId xid;
} OwnWrite;

static HTAB *own_writes = NULL;

/* An earlier worker of the database ended in error (worker_note_failure) */
static bool failed_before = true;

/* When a batch is applied (batch.h): the settings', read again on SIGHUP */
static BatchPolicy policy;
static TimestampTz next_round = 0;	/* no decoding before (worker_wait_round) */

/* The database's generation the cached plans are of (worker_plans_current) */
static uint64 plans_generation = 0;

/* Position to confirm to the slot once WAL is flushed up to confirm_after */
static XLogRecPtr confirm_lsn = InvalidXLogRecPtr;
static XLogRecPtr confirm_after = InvalidXLogRecPtr;

static void worker_on_exit(int code, Datum arg);
static bool worker_extension_dropped_under(void);
static bool worker_catalog_gone(void);
static void worker_note_failure(ErrorData *edata);
static void worker_clear_failure(void);
static void worker_loop(void);
static CatalogCheck worker_check_views(void);
static bool worker_start_decoding(bool busy);
static void worker_check_slot_moved(void);
static const char *worker_slot_wal_missing(void);
static void worker_note_slot_position(void);
static void worker_check_citus(List *views);
static bool worker_backfill_orphaned(ViewRecord *view);
static void worker_check_backfills(List *views);
static void worker_wait_round(void);
static void worker_idle_wait(long timeout);
static void worker_plans_current(void);
static XLogRecPtr worker_covered_lsn(void);
static void worker_progress(void);
static void worker_batch(bool retry_due);
static void worker_new_batch(void);
static void worker_apply_batch(Snapshot snapshot);
typedef struct AppliedViews AppliedViews;
static void worker_hold(ViewRecord *view, ViewProgress *vp, DeferredView *dv, ViewBatch *batch,
						TimestampTz now, const char *reason);
static void worker_note_own_writes(AppliedViews *applied);
static bool worker_exactly_once(ViewRecord *view);
static ViewWork *worker_view_work(ViewRecord *view, ViewProgress *vp, List *batches,
								  bool spilled, TimestampTz now);
static ViewResult worker_apply_view(ViewWork *vw, ViewBatch *batch, Snapshot snapshot,
									bool sliced, ViewBatch **rest, ErrorData **error);
static void worker_view_done(ViewWork *vw, ViewResult result, ViewBatch *rest,
							 ErrorData *error, TimestampTz now, AppliedViews *applied);
static void worker_share_finish(ShareRound *round, List *todo, XLogRecPtr end_lsn,
								TimestampTz now, AppliedViews *applied);
static void worker_confirm(XLogRecPtr end_lsn);
static void worker_confirm_flushed(void);
static ViewProgress *worker_progress_rows(List *views);
static void view_deferred(ViewProgress *vp, DeferredView *dv);
static List *worker_readers_first(List *todo);

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
	launcher_slot_name(worker_slot, dboid);

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(dboid, true);
	taken = (db == NULL || db->pid != 0);
	if (!taken)
	{
		db->pid = MyProcPid;
		db->latch = MyLatch;
		db->reading_upto = InvalidXLogRecPtr;
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
	apply_session_setup();

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join worker",
									   ALLOCSET_DEFAULT_SIZES);
	worker_new_batch();
	policy = batch_policy_for();

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
		MemoryContext oldcxt = MemoryContextSwitchTo(worker_cxt);
		ErrorData  *edata = CopyErrorData();

		MemoryContextSwitchTo(oldcxt);
		if (worker_extension_dropped_under())
		{
			/* as when worker_check_views sees it: the launcher starts another */
			ereport(LOG,
					(errmsg("delta_join worker for database %u exiting: the extension was dropped while a batch ran",
							worker_dboid),
					 errdetail("The batch failed with: %s", edata->message)));
			proc_exit(0);
		}
		worker_note_failure(edata);
		ReThrowError(edata);
	}
	PG_END_TRY();
	proc_exit(0);
}

/*
 * After an error (in a PG_CATCH): was the extension this worker applies
 * dropped, or dropped and created again, since it last read its views?  A
 * DROP EXTENSION that commits while a batch runs fails the batch's next
 * read of the catalog it took away ("relation ... does not exist"); that
 * is no failure of the views', which are gone.  Ends the failed
 * transaction and its error, and reads the catalog in one of its own.
 */
static bool
worker_extension_dropped_under(void)
{
	bool		dropped;

	AbortOutOfAnyTransaction();
	FlushErrorState();
	StartTransactionCommand();
	dropped = worker_catalog_gone();
	CommitTransactionCommand();
	return dropped;
}

/*
 * Is the catalog of views this worker last read no longer the database's
 * (the extension dropped, or dropped and created again)?  In a transaction.
 */
static bool
worker_catalog_gone(void)
{
	return OidIsValid(worker_catalog) && catalog_relid("view_catalog") != worker_catalog;
}

/* Publish the error that is ending the worker */
static void
worker_note_failure(ErrorData *edata)
{
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(worker_dboid, false);
	if (db != NULL)
		dj_text_copy(db->failure, edata->message ? edata->message : "unknown error",
					 sizeof(db->failure));
	LWLockRelease(worker_shared->lock);
}

/* A batch applied: the last worker's failure, if any, is behind us */
static void
worker_clear_failure(void)
{
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(worker_dboid, false);
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
		DbWorker   *db = shmem_find_db(worker_dboid, false);

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

		/*
		 * Nothing applied for a while (idle, or only writes no view reads):
		 * let the batches' memory go
		 */
		apply_session_idle();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			parallel_trim();
			policy = batch_policy_for();
		}
		worker_confirm_flushed();

		LWLockAcquire(worker_shared->lock, LW_SHARED);
		generation = shmem_find_db(worker_dboid, false)->generation;
		LWLockRelease(worker_shared->lock);
		now = GetCurrentTimestamp();
		if (generation != seen_generation || now >= next_check || worker_recheck)
		{
			worker_recheck = false;
			/* a view was created, dropped or refreshed: rebuild plans */
			worker_plans_current();
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
			if (check == CATALOG_REMADE)
			{
				/* the launcher starts another, which skips the old WAL */
				ereport(LOG,
						(errmsg("delta_join worker for database %u exiting: the extension was dropped and created again",
								worker_dboid)));
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
			if (shmem_is_distributed(worker_dboid) && worker_citus.sync != NULL)
				worker_citus.sync();
			next_shard_sync = TimestampTzPlusMilliseconds(now, WORKER_SHARD_SYNC_MS);
		}

		if (!decoding_running() && !worker_start_decoding(check == CATALOG_BUSY))
		{
			/* the first view is being made: nothing to decode before it */
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 WORKER_BUSY_RETRY_MS, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			continue;
		}

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
		retry = retry_next_due();
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
			worker_idle_wait(timeout);
		}
	}
}

/*
 * Drop the cached plans (and with them their lookup caches) once for each
 * new generation of the database's views: a view was created, dropped or
 * refreshed (launcher.c).  Called at the top of the loop and again before
 * a batch takes its snapshot: a batch reads the views itself, and may be
 * the first to apply a view whose creation bumped the generation after the
 * loop last looked -- the plans it builds are of that generation already,
 * and must not be dropped for it at the next look, their lookup caches
 * with them.  Read before the snapshot: a commit bumps the generation
 * once it is visible, so every change a generation read here stands for
 * is seen by the snapshot taken after it (read after, it could stand for
 * a refresh the batch does not see, and the plans built for the old
 * definition would outlive it).
 */
static void
worker_plans_current(void)
{
	uint64		generation;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	generation = shmem_find_db(worker_dboid, false)->generation;
	LWLockRelease(worker_shared->lock);
	if (generation != plans_generation)
		plan_cache_forget_all();
	plans_generation = generation;
}

/*
 * Wait for a commit (which sets the latch) for at most timeout ms, reading
 * ahead meanwhile the WAL of transactions still running: once
 * WORKER_READ_AHEAD_BYTES of it wait to be decoded, return, and the next
 * batch decodes it while it is written, instead of all of it after the
 * commit that makes it count.  A statement that writes hundreds of MB (full
 * page images after a checkpoint) is then applied a decoding's time sooner.
 * The WAL's position is looked at every WORKER_READ_AHEAD_POLL_MS once it
 * grew, and at intervals that double while it does not, so that an idle
 * worker still wakes about once a second.
 */
static void
worker_idle_wait(long timeout)
{
	static XLogRecPtr seen = InvalidXLogRecPtr; /* the position last looked at */
	static long nap = WORKER_READ_AHEAD_POLL_MS;
	TimestampTz until = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout);
	long		ms;

	while ((ms = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), until)) > 0)
	{
		XLogRecPtr	now = progress_wal_position_now();
		XLogRecPtr	read = decoding_position();

		if (now > read && now - read >= WORKER_READ_AHEAD_BYTES)
			break;
		nap = (now != seen) ? WORKER_READ_AHEAD_POLL_MS : Min(nap * 2, WORKER_IDLE_MS);
		seen = now;
		if (WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
					  Min(ms, nap), PG_WAIT_EXTENSION) & WL_LATCH_SET)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	ResetLatch(MyLatch);
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

/*
 * Read the views of the database and publish their state.  When there are
 * none, and no transaction is adding one (it would hold a lock on
 * view_catalog, see launcher_ensure_slot), drop the slot.
 */
static CatalogCheck
worker_check_views(void)
{
	Oid			catalog_oid;
	CatalogCheck result;
	char	   *problem;
	bool		locked;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	locked = catalog_lock_extension();
	PushActiveSnapshot(GetTransactionSnapshot());

	catalog_oid = locked ? catalog_relid("view_catalog") : InvalidOid;
	if (!locked)
		result = CATALOG_BUSY;		/* a DROP EXTENSION holds it */
	else if (!OidIsValid(catalog_oid))
		result = CATALOG_NO_VIEWS;	/* the extension was dropped */
	else if (OidIsValid(worker_catalog) && catalog_oid != worker_catalog)
		result = CATALOG_REMADE;
	else if ((problem = catalog_version_problem()) != NULL)
	{
		/* said once; delta_join.status says it to every reader */
		if (!worker_waiting)
			ereport(LOG,
					(errmsg("delta_join worker for database %u waits: %s",
							worker_dboid, problem)));
		result = CATALOG_WAIT;
	}
	else if (ConditionalLockRelationOid(catalog_oid, ShareLock))
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(batch_cxt);
		List	   *views;

		/* a snapshot that sees what committed before we got the lock */
		PopActiveSnapshot();
		PushActiveSnapshot(GetTransactionSnapshot());
		views = catalog_list_views();
		worker_check_citus(views);
		worker_check_backfills(views);
		progress_publish(worker_dboid, worker_progress_rows(views),
						 list_length(views), InvalidXLogRecPtr);
		MemoryContextSwitchTo(oldcxt);
		result = (views != NIL) ? CATALOG_VIEWS : CATALOG_NO_VIEWS;
		worker_catalog = catalog_oid;

		/* a node of distributed views keeps its slot for the groups to come */
		if (worker_citus.defined != NULL && worker_citus.defined())
			shmem_set_distributed(worker_dboid);
		if (result == CATALOG_NO_VIEWS && shmem_is_distributed(worker_dboid))
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
 * A view whose source Citus distributed after the view was made would never
 * see a change again (citus_tables.c): it goes to error.
 */
static void
worker_check_citus(List *views)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		Oid			relid;

		if (view->in_error || !OidIsValid(relid = citus_source_of(view->sources)))
			continue;
		catalog_set_error(view,
						  &(ErrorData) {.message = psprintf("source \"%s\" is now %s of Citus: its rows and their changes are in shards on the worker nodes",
															get_rel_name(relid),
															citus_table_kind(relid)),
										.hint = "Drop the view; on the Citus coordinator, a view of co-located distributed tables is made a distributed view."},
						  true);
	}
}

/*
 * A view left 'backfilling' by a concurrent create or refresh whose process
 * is gone (the server restarted, or it was terminated before it could clean
 * up) would hold its changes back, and the slot's WAL, forever: it goes to
 * error, which refresh rebuilds and drop_view removes.  True if it did.
 */
static bool
worker_backfill_orphaned(ViewRecord *view)
{
	if (progress_backfill_running(worker_dboid, view->view_id))
		return false;
	(void) catalog_set_error(view,
							 &(ErrorData) {.message = "its concurrent create or refresh ended before the view was filled",
										   .detail = "The process that filled it is gone: the server restarted, or the process was terminated.",
										   .hint = "Rebuild it with delta_join.refresh(), or drop it with delta_join.drop_view()."},
							 true);
	return true;
}

/*
 * Views no longer backfilling: what the worker held back for them is
 * applied now.  Views left backfilling by a process that is gone go to
 * error (worker_backfill_orphaned).
 */
static void
worker_check_backfills(List *views)
{
	TimestampTz now = GetCurrentTimestamp();
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (!view->backfilling)
			retry_release(view->view_id, now);
		else if (worker_backfill_orphaned(view))
		{
			DeferredView *dv = retry_find(view->view_id);

			if (dv != NULL)
				retry_forget(dv);
		}
	}
}

/* A view's progress row: it waits (dv), and why */
static void
view_deferred(ViewProgress *vp, DeferredView *dv)
{
	vp->deferred = true;
	vp->retry_reason = dv->reason;
	vp->whole = dv->batch != NULL && dv->batch->whole;
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
		DeferredView *dv = retry_find(view->view_id);

		vp->view_id = view->view_id;
		vp->in_error = view->in_error;
		vp->catalog_lsn = view->applied_lsn;
		if (dv != NULL)
			view_deferred(vp, dv);
	}
	return rows;
}

/*
 * Acquire the slot and set up decoding from its restart point, skipped to
 * the oldest applied position of the views; the context stays open across
 * batches.
 *
 * busy: the last look at the catalog found a transaction adding a view.
 * If no view is committed yet, the first one is being made, and there is
 * no position to skip to: decoding does not start (false returned), and
 * the caller looks again.  Decoding from the slot's restart point would
 * replay what came before -- on a slot kept through DROP and CREATE
 * EXTENSION, the changes of the dropped extension's source_catalog, which
 * core cannot open once it is gone ("could not find pg_class entry"),
 * failing every worker started before the view commits.  No view needs
 * any of that WAL: the new view's position is where it was made.
 *
 * The extension and the catalog are locked until the start is done
 * (catalog_lock_views); while a DROP EXTENSION or a DDL of an update
 * holds either, decoding does not start either.
 */
static bool
worker_start_decoding(bool busy)
{
	const char *invalidation;
	XLogRecPtr	skip_to;

	StartTransactionCommand();
	if (!catalog_lock_views(AccessShareLock))
	{
		CommitTransactionCommand();
		return false;
	}
	PushActiveSnapshot(GetTransactionSnapshot());
	skip_to = OidIsValid(catalog_relid("view_catalog")) ?
		catalog_oldest_applied_lsn() : InvalidXLogRecPtr;
	PopActiveSnapshot();
	if (busy && XLogRecPtrIsInvalid(skip_to))
	{
		CommitTransactionCommand();
		return false;
	}

	CheckLogicalDecodingRequirements();
	ReplicationSlotAcquire_compat(worker_slot, true);

	/*
	 * An invalidated slot cannot decode: for retaining too much WAL, or (18)
	 * for having been idle too long while no worker held it.
	 */
	if ((invalidation = compat_slot_invalidation()) != NULL ||
		(invalidation = worker_slot_wal_missing()) != NULL)
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		catalog_mark_views_stale(psprintf("replication slot \"%s\" was invalidated %s",
										 worker_slot, invalidation));
		PopActiveSnapshot();
		ReplicationSlotRelease();
		ReplicationSlotDrop(worker_slot, true);
		CommitTransactionCommand();
		ereport(LOG,
				(errmsg("delta_join worker for database %u exiting: replication slot \"%s\" was invalidated and is dropped",
						worker_dboid, worker_slot)));
		proc_exit(0);
	}

	worker_check_slot_moved();

	/* what committed before every view's applied position, no view needs */
	if (!XLogRecPtrIsInvalid(skip_to))
		decoding_skip_to(skip_to);
	worker_note_slot_position();

	decoding_start(worker_cxt, plan_cache_reset_system_caches);
	batch_start_lsn = MyReplicationSlot->data.confirmed_flush;
	CommitTransactionCommand();
	return true;
}

/*
 * The acquired slot cannot decode because the WAL from its restart point
 * is not in pg_wal, and never will be (decoding reads pg_wal only): a copy
 * of the data directory that kept the replication slots of the original --
 * a low-level backup restored to a point in time, say -- has none of the
 * WAL from before the backup.  Without this the worker failed on every
 * start ("requested WAL segment ... has already been removed"), refresh()
 * could not help, and the slot kept every WAL segment from then on.
 * NULL when the segment is there (under any timeline).
 */
static const char *
worker_slot_wal_missing(void)
{
	XLogRecPtr	restart_lsn;
	XLogSegNo	needed;
	DIR		   *dir;
	struct dirent *de;
	bool		found = false;

	SpinLockAcquire(&MyReplicationSlot->mutex);
	restart_lsn = MyReplicationSlot->data.restart_lsn;
	SpinLockRelease(&MyReplicationSlot->mutex);
	if (XLogRecPtrIsInvalid(restart_lsn))
		return NULL;
	XLByteToSeg(restart_lsn, needed, wal_segment_size);

	dir = AllocateDir(XLOGDIR);
	while (!found && (de = ReadDir(dir, XLOGDIR)) != NULL)
	{
		TimeLineID	tli;
		XLogSegNo	segno;

		if (!IsXLogFileName(de->d_name))
			continue;
		XLogFromFileName(de->d_name, &tli, &segno, wal_segment_size);
		found = (segno == needed);
	}
	FreeDir(dir);
	if (found)
		return NULL;
	return psprintf("because the WAL it needs from %X/%X is not in pg_wal (a copy or a restore of the data directory that kept its replication slots)",
					LSN_FORMAT_ARGS(restart_lsn));
}

/*
 * The slot just acquired is further on than the workers of this server
 * left it: someone moved it while no worker held it
 * (pg_replication_slot_advance, pg_logical_slot_get_changes after
 * terminating the worker), and the changes it skipped are lost to the
 * views.  Say so, as for a slot that was dropped: every view goes to error
 * until refresh() rebuilds it.  In the acquiring transaction.
 */
static void
worker_check_slot_moved(void)
{
	XLogRecPtr	left_at = InvalidXLogRecPtr;
	XLogRecPtr	found_at;
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	db = shmem_find_db(worker_dboid, false);
	if (db != NULL)
		left_at = db->slot_confirmed;
	LWLockRelease(worker_shared->lock);

	SpinLockAcquire(&MyReplicationSlot->mutex);
	found_at = MyReplicationSlot->data.confirmed_flush;
	SpinLockRelease(&MyReplicationSlot->mutex);

	if (XLogRecPtrIsInvalid(left_at) || found_at <= left_at ||
		!OidIsValid(catalog_relid("view_catalog")))
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	catalog_mark_views_stale(psprintf("replication slot \"%s\" was moved from %X/%X to %X/%X by another process while no apply worker held it; changes committed in between were not applied",
									 worker_slot, LSN_FORMAT_ARGS(left_at),
									 LSN_FORMAT_ARGS(found_at)));
	PopActiveSnapshot();
	ereport(LOG,
			(errmsg("replication slot \"%s\" was moved from %X/%X to %X/%X while no delta_join worker held it; the delta views of database %u missed changes",
					worker_slot, LSN_FORMAT_ARGS(left_at), LSN_FORMAT_ARGS(found_at),
					worker_dboid)));
}

/* Remember where this worker leaves the slot (worker_check_slot_moved) */
static void
worker_note_slot_position(void)
{
	XLogRecPtr	lsn;
	DbWorker   *db;

	SpinLockAcquire(&MyReplicationSlot->mutex);
	lsn = MyReplicationSlot->data.confirmed_flush;
	SpinLockRelease(&MyReplicationSlot->mutex);
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(worker_dboid, false);
	if (db != NULL)
		db->slot_confirmed = lsn;
	LWLockRelease(worker_shared->lock);
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
 * slot move on, as far as the deferred views let it: their waiting keys
 * are in memory only, and decoded again after a crash only if the slot
 * has not passed them.
 */
static void
worker_progress(void)
{
	XLogRecPtr	end_lsn = worker_covered_lsn();

	if (end_lsn <= batch_start_lsn)
		return;
	/* never past the keys a view waits with, held back or to be tried again */
	worker_confirm(retry_confirm_limit(end_lsn));
	progress_advance(worker_dboid, end_lsn);
	batch_start_lsn = end_lsn;
}

/*
 * Make a batch and apply it, in one transaction (consistent snapshots,
 * DESIGN.md section 5): take the snapshot the batch is applied under,
 * read the WAL insert position after it -- every transaction the snapshot
 * sees has its commit record before that position -- and decode up to
 * there.  The keys of the transactions the snapshot does not see are
 * carried to the next batch (capture.h).  Every key the batch applies is
 * then recomputed under that one snapshot, and every change the snapshot
 * sees is in this batch or an earlier one: when the batch commits, each
 * view it applied holds its query's result over the sources as that
 * snapshot saw them.
 *
 * Only a batch that reached the position is whole in that sense: one that
 * stopped early because it was full (a backlog larger than max_batch_size)
 * leaves the changes after it to the next batch.  A view whose work takes
 * longer than its time slice commits part of it (apply_view).
 */
static void
worker_batch(bool retry_due)
{
	Snapshot	snapshot;
	XLogRecPtr	upto;
	bool		caught_up;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();

	/*
	 * The extension stays until the batch has decoded, its catalog of
	 * views until the batch ends (catalog_lock_views).
	 */
	if (!catalog_lock_views(AccessShareLock))
	{
		CommitTransactionCommand();
		next_round = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), WORKER_BUSY_RETRY_MS);
		return;
	}
	worker_plans_current();
	snapshot = RegisterSnapshot(GetTransactionSnapshot());

	/*
	 * The extension dropped since the last look at the catalog: its WAL is
	 * not to be decoded any further (its source_catalog can no longer be
	 * opened), and the look decides what comes next.
	 */
	if (worker_catalog_gone())
	{
		UnregisterSnapshot(snapshot);
		CommitTransactionCommand();
		worker_recheck = true;
		return;
	}
	upto = progress_wal_position_now();
	progress_set_reading(worker_dboid, upto);
	caught_up = decoding_read(policy, snapshot, upto);
	catalog_unlock_extension();
	if (decoding_carrying())
		elog(DEBUG1, "keys of transactions the batch's snapshot does not see, the first committed at %X/%X, are carried to the next batch",
			 LSN_FORMAT_ARGS(decoding_carried_lsn()));

	if (decoding_batch_empty() && !retry_due)
	{
		UnregisterSnapshot(snapshot);
		CommitTransactionCommand();
		worker_progress();
		worker_new_batch();
	}
	else
	{
		batch_caught_up = caught_up;
		worker_apply_batch(snapshot);
		apply_session_worked();
	}

	/*
	 * A batch with nothing for the views waits for the next round too: the
	 * writes of tables no view reads would otherwise be decoded a commit or
	 * two at a time, each time paying for decoding's two resets of the
	 * system caches (decoding_read) and the catalog reads that fill them
	 * again -- half a core beside two busy writers.
	 */
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

/* The views applied in a transaction, whose position it stores */
struct AppliedViews
{
	int		   *ids;
	int			n;
};

/*
 * Apply a view's work, or a part of it (apply_view.c), in the current
 * transaction: batch, after the keys the capture spilled for the view when
 * batch is its whole work; under the batch's snapshot when given; stopping
 * after the view's time slice when sliced (what is left in *rest).
 */
static ViewResult
worker_apply_view(ViewWork *vw, ViewBatch *batch, Snapshot snapshot, bool sliced,
				  ViewBatch **rest, ErrorData **error)
{
	ApplyRequest req = vw->req;
	ViewResult	result;

	req.batch = batch;
	if (batch != vw->work)
		req.read_spilled = NULL;
	req.snapshot = snapshot;
	req.sliced = sliced;
	/* its own share of a shared view: a failure is retried at once, alone */
	req.quiet = (vw->mine != NULL && batch == vw->mine);
	pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
	result = apply_view(&req, &vw->vp->counts, rest, error);
	pgstat_report_activity(STATE_IDLE, NULL);
	return result;
}

/*
 * Apply the captured batch, and the deferred views that are due; then
 * confirm what is done to the slot and start a new batch.
 *
 * Alone, the worker applies the batch in one transaction.  Keys the capture
 * spilled to disk (capture.h) are read back a chunk of max_keys at a time as
 * each view is applied, in the same transaction, so that memory stays
 * bounded and no half of a batch is ever visible.
 *
 * With helpers (parallel apply, share.c), the views of a large batch
 * that can be shared are split into shares: the worker applies its own in
 * that transaction and commits it, then waits for the helpers' commits, and
 * in a second transaction applies alone again each such view a share of
 * which failed, and stores the shared views' positions.
 */
static void
worker_apply_batch(Snapshot snapshot)
{
	List	   *batches;
	XLogRecPtr	end_lsn = worker_covered_lsn();
	TimestampTz now = GetCurrentTimestamp();
	List	   *views;
	List	   *todo = NIL;
	ViewProgress *progress;
	AppliedViews applied;
	ShareRound *round;
	bool		shared_chunks;
	ListCell   *lc;
	int64		spill_at;
	int64		spilled = decoding_batch_spilled(&spill_at);

	MemoryContextSwitchTo(batch_cxt);
	batches = decoding_batch_views();
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
	progress = worker_progress_rows(views);
	applied.ids = palloc(sizeof(int) * Max(list_length(views), 1));
	applied.n = 0;
	retry_forget_dropped(views);
	plan_cache_forget_dropped(views);

	foreach(lc, views)
	{
		ViewWork   *vw = worker_view_work(lfirst(lc), &progress[foreach_current_index(lc)],
										  batches, spilled > 0, now);

		if (vw != NULL)
			todo = lappend(todo, vw);
	}
	todo = worker_readers_first(todo);
	round = share_begin(todo, spilled > 0, end_lsn, &shared_chunks);

	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);
		ViewResult	result;

		if (vw->chunked)
			continue;
		if (vw->mine != NULL)
			vw->result = worker_apply_view(vw, vw->mine, snapshot, false, NULL, &vw->error);
		else
		{
			ViewBatch  *rest = NULL;
			ErrorData  *error = NULL;

			result = worker_apply_view(vw, vw->work, snapshot, true, &rest, &error);
			worker_view_done(vw, result, rest, error, now, &applied);
		}
	}

	/* views whose changes could not be captured (plugin.c) */
	foreach(lc, decoding_batch_broken())
	{
		BrokenView *broken = (BrokenView *) lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, views)
		{
			ViewRecord *view = lfirst(lc2);

			if (view->view_id != broken->view_id)
				continue;
			catalog_set_error(view, &(ErrorData) {.message = broken->message}, true);
			progress[foreach_current_index(lc2)].in_error = true;
		}
	}

	catalog_set_applied(applied.n, applied.ids, end_lsn);
	worker_note_own_writes(&applied);
	PopActiveSnapshot();
	UnregisterSnapshot(snapshot);
	CommitTransactionCommand();
	MemoryContextSwitchTo(batch_cxt);

	if (round != NULL || shared_chunks)
		worker_share_finish(round, todo, end_lsn, now, &applied);
	pgstat_report_stat(false);	/* the targets' row counts, in pg_stat_user_tables */

	progress_publish(worker_dboid, progress, list_length(views), end_lsn);

	/*
	 * Not back to the memory current when the batch began: that was the
	 * transaction's, gone with its commit (the next context made, say by a
	 * configuration reload, would be made under freed memory).
	 */
	MemoryContextSwitchTo(worker_cxt);

	/* the slot never moves past a batch that waits for another try */
	worker_confirm(retry_confirm_limit(end_lsn));

	batch_start_lsn = end_lsn;
	worker_new_batch();
	if (failed_before)
	{
		worker_clear_failure();
		failed_before = false;
	}
}

/*
 * May the batch's changes be added to the view's target, each exactly once
 * (an additive aggregate over joins, apply_additive.c)?  Only if nothing wrote
 * the target under a snapshot that saw one of them: the batch read all its
 * snapshot sees (a batch cut short has a snapshot that sees changes of the
 * next ones), and the view's catalog row was last written by this process,
 * with the applied position of such a batch -- not by a create_view or
 * refresh() whose fill may have seen them, nor by an apply under a
 * snapshot of its own (a share, a view applied again alone), nor before a
 * crash (the batch may be decoded again then: a new process has written
 * nothing yet).  The first batch after any of those recomputes its groups.
 */
static bool
worker_exactly_once(ViewRecord *view)
{
	OwnWrite   *own;

	if (!batch_caught_up || own_writes == NULL || view->applied_lsn > batch_start_lsn)
		return false;
	own = hash_search(own_writes, &view->view_id, HASH_FIND, NULL);
	return own != NULL && TransactionIdEquals(own->xid, view->row_xmin);
}

/* Note the views whose catalog rows this batch's transaction wrote */
static void
worker_note_own_writes(AppliedViews *applied)
{
	TransactionId xid = GetTopTransactionIdIfAny();

	if (own_writes == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(int);
		ctl.entrysize = sizeof(OwnWrite);
		ctl.hcxt = worker_cxt;
		own_writes = hash_create("delta_join own catalog writes", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	for (int i = 0; i < applied->n; i++)
	{
		OwnWrite   *own = hash_search(own_writes, &applied->ids[i], HASH_ENTER, NULL);

		own->xid = batch_caught_up ? xid : InvalidTransactionId;
	}
}

/* Hold the view's keys, with those its deferred view has (dv), saying why */
static void
worker_hold(ViewRecord *view, ViewProgress *vp, DeferredView *dv, ViewBatch *batch,
			TimestampTz now, const char *reason)
{
	dv = retry_hold(view, dv, batch, batch_start_lsn, now, reason);
	retry_defer_spilled(dv, view, policy.max_keys);
	view_deferred(vp, dv);
}

/*
 * What a view applies in this batch: its part of the batch (batches), or,
 * when it waits for another try, the keys waiting with it; NULL when it
 * applies nothing now (in error, waiting, no work).  spilled: the capture
 * spilled keys of the batch to disk.
 */
static ViewWork *
worker_view_work(ViewRecord *view, ViewProgress *vp, List *batches, bool spilled,
				 TimestampTz now)
{
	DeferredView *dv = retry_find(view->view_id);
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
			retry_forget(dv);
		vp->deferred = false;
		return NULL;
	}

	/* a concurrent create or refresh runs: its keys wait for its end */
	if (view->backfilling)
	{
		if (worker_backfill_orphaned(view))
		{
			if (dv != NULL)
				retry_forget(dv);
			vp->deferred = false;
			vp->in_error = true;
			return NULL;
		}
		worker_hold(view, vp, dv, batch, now,
					"backfilling: its changes are applied once the backfill ends");
		return NULL;
	}

	/*
	 * Keyed recompute of groups through joins finds its dirty groups by
	 * joining the images of the batch's changed rows with the other sources
	 * as the batch's snapshot sees them (apply_agg.c), which holds only when
	 * that snapshot sees no change the batch lacks.  A batch cut short
	 * because it was full has a snapshot that already sees the changes left
	 * to the next batches: a group whose rows changed on two sources, one in
	 * this batch and one in a later one, would be found by neither (an order
	 * deleted here, its customer deleted there: each batch joins its own
	 * image with the other's row as it is now, gone) and stay in the target
	 * for good.  So its keys are held until the first batch that reaches its
	 * position, which finds the groups of all of them together, each once.
	 * Held keys keep their weights, summed (view_batch_merge): an additive
	 * view adds the batches it held to its groups then, as it adds one.  A
	 * retract-mode outer join is held for a like reason
	 * (apply_view_held_in_backlog).
	 */
	if (!batch_caught_up && apply_view_held_in_backlog(view))
	{
		worker_hold(view, vp, dv, batch, now,
					"a backlog: its changes are applied once the worker has caught up");
		return NULL;
	}
	if (dv != NULL && dv->held)
		retry_release(view->view_id, now);

	if (dv != NULL)
	{
		/* the new keys join those waiting */
		if (batch != NULL)
			retry_defer(view, batch, batch_start_lsn, now);
		if (dv->next_try > now)
		{
			retry_defer_spilled(dv, view, policy.max_keys);
			view_deferred(vp, dv);
			return NULL;
		}
		work = dv->batch;
		if (work == NULL)
		{
			/* nothing waits with it any more */
			retry_forget(dv);
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
		TimestampTz due = retry_recompute_due(view, dv);

		if (due > now)
		{
			dv = retry_wait_recompute(view, dv, batch, batch_start_lsn, now);
			view_deferred(vp, dv);
			return NULL;
		}
	}

	vw = palloc0(sizeof(ViewWork));
	vw->view = view;
	vw->vp = vp;
	vw->dv = dv;
	vw->batch = batch;
	vw->work = work;
	vw->req.view = view;
	vw->req.read_spilled = spilled ? decoding_batch_next_chunk : NULL;
	vw->req.chunk_keys = policy.max_keys;
	vw->req.timeout_ms = retry_apply_timeout(view);
	vw->req.end_lsn = decoding_position();
	/* (waiting work is weighed only if it adds up every batch it waited for) */
	vw->req.exactly_once = work->weighed && worker_exactly_once(view);
	return vw;
}

/*
 * The order a batch applies its views in: each view before the views whose
 * targets it reads (a view over another view's target: a chain), catalog
 * order otherwise.
 *
 * Why readers first: the views of a batch are applied one after another in
 * its one transaction, each seeing what the earlier ones wrote.  A view B
 * over the target of a view A recomputes, in batch N+1, the keys A wrote in
 * batch N (A's writes are decoded with batch N+1's WAL).  Applied after A,
 * B would read A's target as batch N+1 has rewritten it: a change of batch
 * N+1 would show in B on one side of a key only, until batch N+2.  Applied
 * before A, B reads A's target as batch N left it, so at every commit of the
 * worker B holds its query over A's target at the previous commit: one batch
 * behind A, but at a state A had.
 *
 * A cycle (views reading each other's targets) keeps catalog order for the
 * views on it: none of its orders is better than another.
 */
static List *
worker_readers_first(List *todo)
{
	int			n = list_length(todo);
	int		   *readers = palloc0(sizeof(int) * Max(n, 1));
	bool	   *placed = palloc0(sizeof(bool) * Max(n, 1));
	List	   *ordered = NIL;

	if (n < 2)
		return todo;

	/* readers[i]: how many reads of view i's target the others make */
	for (int j = 0; j < n; j++)
	{
		ListCell   *lc;

		foreach(lc, ((ViewWork *) list_nth(todo, j))->view->sources)
		{
			Oid			relid = ((SourceRecord *) lfirst(lc))->relid;

			for (int i = 0; i < n; i++)
			{
				if (i != j && ((ViewWork *) list_nth(todo, i))->view->target == relid)
					readers[i]++;
			}
		}
	}

	/*
	 * Place, each time, the first view in catalog order that no view left
	 * reads, or, on a cycle, the first view left; then its reads no longer
	 * hold back the views it reads.
	 */
	while (list_length(ordered) < n)
	{
		int			pick = -1;
		ListCell   *lc;

		for (int i = 0; i < n && (pick < 0 || readers[pick] > 0); i++)
		{
			if (!placed[i] && (pick < 0 || readers[i] == 0))
				pick = i;
		}
		placed[pick] = true;
		ordered = lappend(ordered, list_nth(todo, pick));
		foreach(lc, ((ViewWork *) list_nth(todo, pick))->view->sources)
		{
			Oid			relid = ((SourceRecord *) lfirst(lc))->relid;

			for (int i = 0; i < n; i++)
			{
				if (i != pick && !placed[i] &&
					((ViewWork *) list_nth(todo, i))->view->target == relid)
					readers[i]--;
			}
		}
	}
	return ordered;
}

/*
 * A view's work was applied with that result: note it applied, make it wait
 * for another try, or put it in error.
 */
static void
worker_view_done(ViewWork *vw, ViewResult result, ViewBatch *rest, ErrorData *error,
				 TimestampTz now, AppliedViews *applied)
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
		dv = retry_rest(view, dv, rest, result == VIEW_PARTIAL, batch_start_lsn, now);
		vp->applied = (result == VIEW_PARTIAL);	/* its counts */
		if (!retry_held_too_long(dv, now, &error))
		{
			view_deferred(vp, dv);
			return;
		}
		result = VIEW_FAILED;
	}

	if (result == VIEW_DEFERRED)
	{
		if (dv == NULL)
			dv = retry_defer(view, vw->batch, batch_start_lsn, now);
		retry_defer_spilled(dv, view, policy.max_keys);
		retry_failed(dv, error);
		if (!retry_gives_up(dv, view, error, now))
		{
			view_deferred(vp, dv);
			return;
		}
		result = VIEW_FAILED;
	}

	if (dv != NULL)
		retry_forget(dv);
	vp->deferred = false;
	if (result == VIEW_FAILED)
	{
		/* (a view dropped since the views were read is not put in error) */
		if (catalog_set_error(view, error, true))
			vp->in_error = true;
		return;
	}
	vp->applied = true;
	applied->ids[applied->n++] = view->view_id;
	if (view->path == DJ_PATH_FULL)
		retry_recomputed(view->view_id, now);
}

/*
 * After the worker committed its shares: wait for the helpers' commits, and
 * apply the chunked views, a chunk at a time (share_wait).  Then, in a
 * transaction of its own, settle each shared view -- applied again alone
 * when a share failed -- and store the positions of the shared views
 * applied.
 */
static void
worker_share_finish(ShareRound *round, List *todo, XLogRecPtr end_lsn, TimestampTz now,
					AppliedViews *applied)
{
	ListCell   *lc;

	share_wait(round, todo, end_lsn);

	/* (it writes the views' positions into the catalog) */
	for (;;)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (catalog_lock_views(RowExclusiveLock))
			break;
		CommitTransactionCommand();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 WORKER_BUSY_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(batch_cxt);
	applied->n = 0;
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);
		ErrorData  *error;
		ViewResult	result;

		if (!share_involves(vw))
			continue;
		result = share_settle(round, vw, &error);
		worker_view_done(vw, result, NULL, error, now, applied);
	}
	catalog_set_applied(applied->n, applied->ids, end_lsn);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(batch_cxt);
	if (round != NULL)
		parallel_round_end(round);
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
	worker_note_slot_position();
	confirm_lsn = InvalidXLogRecPtr;
}
