/*-------------------------------------------------------------------------
 *
 * worker.c
 *	  The launcher and the apply workers that keep delta views fresh, their
 *	  shared memory, and the SQL functions that read it (wait, _stat).
 *
 * Nouns:
 *
 *	slot		the logical replication slot of one database, named
 *				WORKER_SLOT_PREFIX followed by the database OID, with our
 *				library as output plugin.  It exists exactly while the
 *				database has views: worker_ensure_slot creates it for the
 *				first view, the worker drops it once the last view is gone.
 *	apply worker (worker)
 *				a dynamic background worker, one per database with a slot.
 *				It owns the slot, decodes WAL in-process (decode.c captures
 *				dirty keys), and applies them a batch at a time.
 *	launcher	a static background worker that starts a worker for every
 *				slot named like ours, and restarts one that died.  It needs
 *				no database connection: slots are in shared memory.
 *
 * The flow of a worker: decode what WAL has been flushed into the capture,
 * until the batch holds delta_join.max_batch_size distinct keys or its first
 * change is delta_join.batch_timeout old; then, in ONE transaction, read the
 * view catalog, and for each view with work run apply_view_batch as the
 * view's owner inside a subtransaction, storing the view's applied_lsn with
 * it; commit; and only then confirm the batch's end to the slot.  After a
 * crash decoding restarts from the last confirmed position and replays;
 * applying is idempotent (DESIGN.md section 2).
 *
 * A view whose apply fails is set to state 'error' (last_error,
 * last_error_time, stale_since_lsn) and its later changes are dropped until
 * delta_join.refresh() rebuilds it; the other views go on.  Errors that
 * passing conditions cause (deadlock, serialization failure, lock not
 * available) instead roll the whole batch back, to be tried again, up to
 * WORKER_APPLY_ATTEMPTS times.  Which views exist and their state is read
 * from the catalog in every apply transaction, so a refresh or drop
 * committed before a change was decoded is always seen.
 *
 * Idle behaviour: a worker that has read all flushed WAL sleeps on its latch
 * for at most WORKER_POLL_MS and then looks at the flush pointer again
 * (nothing else tells it of new WAL without slowing every commit);
 * delta_join.wait() and worker_notify() set its latch to wake it at once.
 * An idle wake-up that finds no new WAL costs one read of the flush pointer.
 *
 * Shared memory (WorkerShared) holds one DbWorker per database with a
 * worker and one ViewStat per view, both protected by WorkerShared.lock:
 * readers take it shared, writers (the worker once per batch, backends in
 * worker_notify, the launcher) exclusive.  progress_cv is broadcast
 * whenever a worker's processed_lsn advances; wait() sleeps on it.
 *
 * Memory: the decoding context lives in worker_cxt for the life of the
 * worker; captured keys and batches in batch_cxt, reset after each batch.
 *
 * IDENTIFICATION
 *	  src/worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogutils.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/decode.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "batch.h"
#include "decode.h"
#include "delta_join.h"
#include "worker.h"

PG_FUNCTION_INFO_V1(dj_wait);
PG_FUNCTION_INFO_V1(dj_stat);

#define WORKER_MAX_DATABASES	64	/* databases with a worker at once */
#define WORKER_MAX_VIEWS		1024	/* views with counters, all databases */
#define WORKER_POLL_MS			10	/* idle check of the flush pointer */
#define WORKER_CATALOG_CHECK_MS 10000	/* re-read the views at least this often */
#define WORKER_APPLY_ATTEMPTS	3	/* tries of a batch that fails transiently */
#define LAUNCHER_NAP_MS			1000	/* launcher's look at the slots */
#define LAUNCHER_RESTART_MS		1000	/* delay before restarting a worker */

/* One database's worker, in shared memory */
typedef struct DbWorker
{
	Oid			dboid;			/* InvalidOid: entry free */
	pid_t		pid;			/* the running worker, 0 if none */
	Latch	   *latch;			/* its latch, while pid != 0 */
	uint64		generation;		/* bumped when the catalog changed */
	XLogRecPtr	processed_lsn;	/* all changes committed before this are
								 * applied, views in error aside */
} DbWorker;

/* One view's counters, in shared memory */
typedef struct ViewStat
{
	Oid			dboid;			/* InvalidOid: entry free */
	int			view_id;
	bool		in_error;
	XLogRecPtr	applied_lsn;
	TimestampTz applied_commit_time;	/* of the newest change applied */
	int64		changes_seen;
	ApplyCounts counts;
} ViewStat;

typedef struct WorkerShared
{
	LWLock	   *lock;
	ConditionVariable progress_cv;
	Latch	   *launcher_latch;
	DbWorker	dbs[WORKER_MAX_DATABASES];
	ViewStat	views[WORKER_MAX_VIEWS];
} WorkerShared;

/* A row of view_catalog, as the worker needs it */
typedef struct ViewRow
{
	int			view_id;
	Oid			owner;
	bool		in_error;
	XLogRecPtr	applied_lsn;
	char	   *target_name;
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

static WorkerShared *shared = NULL;
static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* Backends: a catalog change waiting for commit to be announced */
static bool notify_pending = false;
static bool xact_callback_registered = false;

/* Apply worker state */
static Oid	worker_dboid = InvalidOid;
static char worker_slot[NAMEDATALEN];
static MemoryContext worker_cxt = NULL;
static MemoryContext batch_cxt = NULL;
static LogicalDecodingContext *decoding = NULL;
static DecodeCapture capture;
static XLogRecPtr batch_start_lsn = InvalidXLogRecPtr;
static SPIPlanPtr plan_list_views = NULL;
static SPIPlanPtr plan_set_applied = NULL;
static SPIPlanPtr plan_set_error = NULL;

static void worker_shmem_request(void);
static void worker_shmem_startup(void);
static void worker_check_shmem(void);
static void worker_slot_name(char *name, Oid dboid);
static DbWorker *worker_find_db(Oid dboid, bool create);
static ViewStat *worker_find_view(Oid dboid, int view_id, bool create);
static void worker_xact_callback(XactEvent event, void *arg);
static void worker_wake(Oid dboid);
static Oid	worker_catalog_relid(const char *relname);
static void worker_mark_views_stale(const char *reason);
static void launcher_on_exit(int code, Datum arg);
static void launcher_scan(long *nap_ms);
static void worker_on_exit(int code, Datum arg);
static void worker_loop(void);
static bool worker_check_views(void);
static void worker_start_decoding(void);
static bool worker_decode(void);
static bool worker_batch_due(void);
static void worker_progress(void);
static void worker_apply_batch(void);
static bool worker_apply_attempt(List *batches, XLogRecPtr end_lsn,
								 bool last_attempt, ViewOutcome *outcomes);
static bool worker_apply_view(ViewBatch *batch, ViewRow *row,
							  XLogRecPtr end_lsn, bool last_attempt,
							  ViewOutcome *outcome);
static ViewRow *worker_read_views(int *nrows);
static void worker_publish(ViewRow *rows, int nrows, XLogRecPtr end_lsn,
						   List *batches, ViewOutcome *outcomes);
static XLogRecPtr wal_position_now(void);

/* ----------------
 * Start-up and shared memory
 * ----------------
 */

/*
 * Called from _PG_init while shared_preload_libraries are loaded: ask for
 * shared memory and register the launcher.
 */
void
worker_init(void)
{
	BackgroundWorker bgw;

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = worker_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = worker_shmem_startup;

	if (IsBinaryUpgrade)
		return;

	memset(&bgw, 0, sizeof(bgw));
	bgw.bgw_flags = BGWORKER_SHMEM_ACCESS;
	bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw.bgw_restart_time = 5;
	snprintf(bgw.bgw_library_name, BGW_MAXLEN, "delta_join");
	snprintf(bgw.bgw_function_name, BGW_MAXLEN, "dj_launcher_main");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "delta_join launcher");
	snprintf(bgw.bgw_type, BGW_MAXLEN, "delta_join launcher");
	RegisterBackgroundWorker(&bgw);
}

static void
worker_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(MAXALIGN(sizeof(WorkerShared)));
	RequestNamedLWLockTranche("delta_join", 1);
}

static void
worker_shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("delta_join", sizeof(WorkerShared), &found);
	if (!found)
	{
		memset(shared, 0, sizeof(WorkerShared));
		shared->lock = &(GetNamedLWLockTranche("delta_join"))->lock;
		ConditionVariableInit(&shared->progress_cv);
	}
	LWLockRelease(AddinShmemInitLock);
}

static void
worker_check_shmem(void)
{
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta_join is not loaded at server start"),
				 errhint("Add delta_join to shared_preload_libraries and restart the server.")));
}

static void
worker_slot_name(char *name, Oid dboid)
{
	snprintf(name, NAMEDATALEN, WORKER_SLOT_PREFIX "%u", dboid);
}

/* The DbWorker of a database, made if asked and there is room.  Lock held. */
static DbWorker *
worker_find_db(Oid dboid, bool create)
{
	DbWorker   *free_entry = NULL;
	int			i;

	for (i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		DbWorker   *db = &shared->dbs[i];

		if (db->dboid == dboid)
			return db;
		if (db->dboid == InvalidOid && free_entry == NULL)
			free_entry = db;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(DbWorker));
	free_entry->dboid = dboid;
	return free_entry;
}

/* The ViewStat of a view, made if asked and there is room.  Lock held. */
static ViewStat *
worker_find_view(Oid dboid, int view_id, bool create)
{
	ViewStat   *free_entry = NULL;
	int			i;

	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &shared->views[i];

		if (stat->dboid == dboid && stat->view_id == view_id)
			return stat;
		if (stat->dboid == InvalidOid && free_entry == NULL)
			free_entry = stat;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(ViewStat));
	free_entry->dboid = dboid;
	free_entry->view_id = view_id;
	return free_entry;
}

/* The OID of a relation of our schema, or InvalidOid */
static Oid
worker_catalog_relid(const char *relname)
{
	Oid			nspid = get_namespace_oid(DJ_SCHEMA, true);

	return OidIsValid(nspid) ? get_relname_relid(relname, nspid) : InvalidOid;
}

/* ----------------
 * What api.c calls
 * ----------------
 */

/*
 * Make sure the database's slot exists, creating it if needed.  Called
 * before the transaction writes anything (creating a slot waits for every
 * transaction that holds an XID, ours included).
 *
 * Also takes a lock on view_catalog, kept until the transaction ends, that
 * keeps the worker from dropping the slot for want of views meanwhile.
 */
void
worker_ensure_slot(void)
{
	char		name[NAMEDATALEN];
	Oid			catalog_relid = worker_catalog_relid("view_catalog");
	bool		views_exist;

	worker_check_shmem();
	worker_slot_name(name, MyDatabaseId);

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delta views cannot be created or refreshed in a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("The view must start from every change committed before it, which the snapshot of this transaction may not show."),
				 errhint("Use READ COMMITTED.")));

	if (!OidIsValid(catalog_relid))
		elog(ERROR, "delta_join.view_catalog does not exist");

	LockRelationOid(catalog_relid, RowExclusiveLock);
	if (SearchNamedReplicationSlot(name, true) != NULL)
		return;

	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot create the first delta view of a database in a transaction that has already written"),
				 errdetail("The replication slot \"%s\" is created first, and creating it waits for every transaction that has written, this one included, to end.",
						   name),
				 errhint("Create the view at the start of its own transaction.")));

	/* Creators of the slot take turns; re-check under the lock. */
	LockRelationOid(catalog_relid, ShareUpdateExclusiveLock);
	if (SearchNamedReplicationSlot(name, true) != NULL)
		return;

	CheckLogicalDecodingRequirements();

	/* Ephemeral until its start point is found: an error drops it. */
	ReplicationSlotCreate(name, true, RS_EPHEMERAL, false);
	PG_TRY();
	{
		LogicalDecodingContext *ctx;

		ctx = CreateInitDecodingContext(DJ_PLUGIN_NAME, NIL, false,
										InvalidXLogRecPtr,
										XL_ROUTINE(.page_read = read_local_xlog_page,
												   .segment_open = wal_segment_open,
												   .segment_close = wal_segment_close),
										NULL, NULL, NULL);
		DecodingContextFindStartpoint(ctx);
		FreeDecodingContext(ctx);
		ReplicationSlotPersist();
	}
	PG_CATCH();
	{
		if (MyReplicationSlot != NULL)
			ReplicationSlotRelease();
		PG_RE_THROW();
	}
	PG_END_TRY();
	ReplicationSlotRelease();

	ereport(LOG,
			(errmsg("created replication slot \"%s\" for delta views", name)));

	/*
	 * Views without a slot (it was dropped by hand, or invalidated) have
	 * missed changes: say so.
	 */
	SPI_connect();
	if (SPI_execute("SELECT 1 FROM delta_join.view_catalog WHERE state = 'active' LIMIT 1",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read delta_join.view_catalog");
	views_exist = SPI_processed > 0;
	SPI_finish();
	if (views_exist)
		worker_mark_views_stale(psprintf("replication slot \"%s\" was missing; changes committed while it was missing were not applied",
										 name));

	worker_wake(MyDatabaseId);
}

/*
 * Announce, once the current transaction commits, that the views of this
 * database changed: the worker re-reads the catalog, or is started.
 */
void
worker_notify(void)
{
	worker_check_shmem();
	if (!xact_callback_registered)
	{
		RegisterXactCallback(worker_xact_callback, NULL);
		xact_callback_registered = true;
	}
	notify_pending = true;
}

static void
worker_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:
			if (notify_pending)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that created, dropped or refreshed a delta view")));
			break;
		case XACT_EVENT_COMMIT:
			if (notify_pending)
			{
				notify_pending = false;
				worker_wake(MyDatabaseId);
			}
			break;
		case XACT_EVENT_ABORT:
			notify_pending = false;
			break;
		default:
			break;
	}
}

/*
 * Bump the database's generation and wake its worker and the launcher.
 * Runs after commit too: must not fail.
 */
static void
worker_wake(Oid dboid)
{
	DbWorker   *db;
	Latch	   *worker_latch = NULL;
	Latch	   *launcher_latch;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = worker_find_db(dboid, true);
	if (db != NULL)
	{
		db->generation++;
		if (db->pid != 0)
			worker_latch = db->latch;
	}
	launcher_latch = shared->launcher_latch;
	LWLockRelease(shared->lock);

	if (db == NULL)
		elog(WARNING, "too many databases with delta views: at most %d have a worker",
			 WORKER_MAX_DATABASES);
	if (worker_latch != NULL)
		SetLatch(worker_latch);
	if (launcher_latch != NULL)
		SetLatch(launcher_latch);
}

/*
 * Put every active view of this database in error: changes from its
 * applied_lsn on were not applied.  In the caller's transaction.
 */
static void
worker_mark_views_stale(const char *reason)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		values[1];

	values[0] = CStringGetTextDatum(reason);
	SPI_connect();
	if (SPI_execute_with_args("UPDATE delta_join.view_catalog"
							  "   SET state = 'error', last_error = $1,"
							  "       last_error_time = pg_catalog.now(),"
							  "       stale_since_lsn = applied_lsn"
							  " WHERE state = 'active'",
							  1, argtypes, values, NULL, false, 0) != SPI_OK_UPDATE)
		elog(ERROR, "could not update delta_join.view_catalog");
	if (SPI_processed > 0)
		ereport(WARNING,
				(errmsg("%llu delta views missed changes and are now in error",
						(unsigned long long) SPI_processed),
				 errdetail("%s.", reason),
				 errhint("Rebuild them with delta_join.refresh().")));
	SPI_finish();
}

/* ----------------
 * Launcher
 * ----------------
 */

void
dj_launcher_main(Datum main_arg)
{
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
	BackgroundWorkerUnblockSignals();

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = MyLatch;
	LWLockRelease(shared->lock);
	on_shmem_exit(launcher_on_exit, (Datum) 0);

	ereport(LOG, (errmsg("delta_join launcher started")));

	while (!ShutdownRequestPending)
	{
		long		nap_ms = LAUNCHER_NAP_MS;

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		launcher_scan(&nap_ms);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 nap_ms, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	proc_exit(0);
}

static void
launcher_on_exit(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = NULL;
	LWLockRelease(shared->lock);
}

/* What the launcher knows of the worker it started for a database */
typedef struct LauncherEntry
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
	TimestampTz stopped_at;		/* when it was last seen stopped */
} LauncherEntry;

static LauncherEntry launcher_entries[WORKER_MAX_DATABASES];

/*
 * Start a worker for every database that has one of our slots and no
 * running worker, at most once per LAUNCHER_RESTART_MS; forget databases
 * whose slot is gone.
 */
static void
launcher_scan(long *nap_ms)
{
	Oid			wanted[WORKER_MAX_DATABASES];
	int			nwanted = 0;
	TimestampTz now = GetCurrentTimestamp();
	int			i,
				j;

	/* Databases with a slot of ours */
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	for (i = 0; i < max_replication_slots; i++)
	{
		ReplicationSlot *s = &ReplicationSlotCtl->replication_slots[i];
		NameData	name;
		Oid			database;
		bool		in_use;

		SpinLockAcquire(&s->mutex);
		in_use = s->in_use;
		name = s->data.name;
		database = s->data.database;
		SpinLockRelease(&s->mutex);

		if (in_use && OidIsValid(database) &&
			strncmp(NameStr(name), WORKER_SLOT_PREFIX,
					strlen(WORKER_SLOT_PREFIX)) == 0 &&
			strtoul(NameStr(name) + strlen(WORKER_SLOT_PREFIX), NULL, 10) == database &&
			nwanted < WORKER_MAX_DATABASES)
			wanted[nwanted++] = database;
	}
	LWLockRelease(ReplicationSlotControlLock);

	/* Notice workers that stopped */
	for (i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		LauncherEntry *e = &launcher_entries[i];
		pid_t		pid;

		if (e->handle != NULL &&
			GetBackgroundWorkerPid(e->handle, &pid) == BGWH_STOPPED)
		{
			pfree(e->handle);
			e->handle = NULL;
			e->stopped_at = now;
		}
	}

	for (j = 0; j < nwanted; j++)
	{
		Oid			dboid = wanted[j];
		LauncherEntry *e = NULL;
		LauncherEntry *free_entry = NULL;
		DbWorker   *db;
		bool		running;
		BackgroundWorker bgw;
		long		wait_ms;

		for (i = 0; i < WORKER_MAX_DATABASES; i++)
		{
			if (launcher_entries[i].dboid == dboid)
				e = &launcher_entries[i];
			else if (launcher_entries[i].dboid == InvalidOid &&
					 free_entry == NULL)
				free_entry = &launcher_entries[i];
		}
		if (e == NULL)
		{
			if (free_entry == NULL)
				continue;
			e = free_entry;
			memset(e, 0, sizeof(LauncherEntry));
			e->dboid = dboid;
		}
		if (e->handle != NULL)
			continue;

		/* A worker of an earlier launcher may still run. */
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		db = worker_find_db(dboid, true);
		running = (db != NULL && db->pid != 0);
		LWLockRelease(shared->lock);
		if (running || db == NULL)
			continue;

		wait_ms = LAUNCHER_RESTART_MS -
			TimestampDifferenceMilliseconds(e->stopped_at, now);
		if (e->stopped_at != 0 && wait_ms > 0)
		{
			*nap_ms = Min(*nap_ms, wait_ms);
			continue;
		}

		memset(&bgw, 0, sizeof(bgw));
		bgw.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
		bgw.bgw_start_time = BgWorkerStart_RecoveryFinished;
		bgw.bgw_restart_time = BGW_NEVER_RESTART;
		snprintf(bgw.bgw_library_name, BGW_MAXLEN, "delta_join");
		snprintf(bgw.bgw_function_name, BGW_MAXLEN, "dj_worker_main");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "delta_join worker for database %u",
				 dboid);
		snprintf(bgw.bgw_type, BGW_MAXLEN, "delta_join worker");
		bgw.bgw_main_arg = ObjectIdGetDatum(dboid);
		bgw.bgw_notify_pid = MyProcPid;

		if (!RegisterDynamicBackgroundWorker(&bgw, &e->handle))
		{
			e->handle = NULL;
			e->stopped_at = now;
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start the delta_join worker for database %u", dboid),
					 errhint("Raise max_worker_processes.")));
		}
	}

	/* Forget databases without a slot and without a worker */
	for (i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		LauncherEntry *e = &launcher_entries[i];
		bool		slot_exists = false;

		if (e->dboid == InvalidOid || e->handle != NULL)
			continue;
		for (j = 0; j < nwanted; j++)
			if (wanted[j] == e->dboid)
				slot_exists = true;
		if (!slot_exists)
			e->dboid = InvalidOid;
	}
}

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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = worker_find_db(dboid, true);
	taken = (db == NULL || db->pid != 0);
	if (!taken)
	{
		db->pid = MyProcPid;
		db->latch = MyLatch;
	}
	LWLockRelease(shared->lock);
	if (taken)
	{
		ereport(LOG,
				(errmsg("delta_join worker for database %u not started: another one runs",
						dboid)));
		proc_exit(0);
	}
	before_shmem_exit(worker_on_exit, (Datum) 0);

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join worker",
									   ALLOCSET_DEFAULT_SIZES);
	batch_cxt = AllocSetContextCreate(worker_cxt, "delta_join batch",
									  ALLOCSET_DEFAULT_SIZES);
	decode_capture_reset(&capture, batch_cxt);

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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	{
		DbWorker   *db = worker_find_db(worker_dboid, false);

		if (db != NULL && db->pid == MyProcPid)
		{
			db->pid = 0;
			db->latch = NULL;
		}
	}
	LWLockRelease(shared->lock);
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

		LWLockAcquire(shared->lock, LW_SHARED);
		generation = worker_find_db(worker_dboid, false)->generation;
		LWLockRelease(shared->lock);
		now = GetCurrentTimestamp();
		if (generation != seen_generation || now >= next_check)
		{
			seen_generation = generation;
			next_check = TimestampTzPlusMilliseconds(now, WORKER_CATALOG_CHECK_MS);
			if (!worker_check_views())
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
															  dj_batch_timeout_ms);

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
	if (capture.nkeys >= dj_max_batch_size)
		return true;
	return GetCurrentTimestamp() >=
		TimestampTzPlusMilliseconds(capture.first_change_time, dj_batch_timeout_ms);
}

/*
 * Read the views of the database, publish their state, and return whether
 * there are any.  When there are none, and no transaction is adding one (it
 * would hold a lock on view_catalog, see worker_ensure_slot), drop the slot
 * and return false.
 */
static bool
worker_check_views(void)
{
	Oid			catalog_relid;
	bool		keep = true;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());

	catalog_relid = worker_catalog_relid("view_catalog");
	if (!OidIsValid(catalog_relid))
		keep = false;			/* the extension was dropped */
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
		keep = (nrows > 0);
	}

	if (!keep)
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
	return keep;
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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	{
		DbWorker   *db = worker_find_db(worker_dboid, false);

		if (db->processed_lsn < batch_start_lsn)
			db->processed_lsn = batch_start_lsn;
	}
	LWLockRelease(shared->lock);
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

	if (reader->EndRecPtr >= flush)
		return true;

	StartTransactionCommand();
	InvalidateSystemCaches();

	while (reader->EndRecPtr < flush)
	{
		XLogRecord *record;
		char	   *errm = NULL;

		record = XLogReadRecord(reader, &errm);
		if (errm)
			elog(ERROR, "could not read WAL for logical decoding: %s", errm);
		if (record != NULL)
			LogicalDecodingProcessRecord(decoding, reader);

		if (capture.nkeys >= dj_max_batch_size)
			break;
		if (++nrecords % 256 == 0 && !decode_capture_is_empty(&capture) &&
			worker_batch_due())
			break;
		CHECK_FOR_INTERRUPTS();
	}
	caught_up = (reader->EndRecPtr >= flush);

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

	LogicalConfirmReceivedLocation(end_lsn);

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	worker_find_db(worker_dboid, false)->processed_lsn = end_lsn;
	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &shared->views[i];

		if (stat->dboid == worker_dboid && !stat->in_error &&
			stat->applied_lsn < end_lsn)
			stat->applied_lsn = end_lsn;
	}
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->progress_cv);

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

	LogicalConfirmReceivedLocation(end_lsn);
	ReplicationSlotMarkDirty();

	batch_start_lsn = end_lsn;
	MemoryContextReset(batch_cxt);
	decode_capture_reset(&capture, batch_cxt);
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
		ViewOutcome *outcome = &outcomes[n];
		Datum		values[3];
		int			i;

		if (outcome->error == NULL)
			continue;
		values[0] = Int32GetDatum(outcome->batch->view_id);
		values[1] = CStringGetTextDatum(outcome->error);
		values[2] = LSNGetDatum(batch_start_lsn);
		if (SPI_execute_plan(plan_set_error, values, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not record the error of view %d", outcome->batch->view_id);
		for (i = 0; i < nrows; i++)
			if (rows[i].view_id == outcome->batch->view_id)
			{
				rows[i].in_error = true;
				ereport(WARNING,
						(errmsg("delta view \"%s\" is in error and no longer maintained: %s",
								rows[i].target_name, outcome->error),
						 errhint("Fix the cause, then rebuild the view with delta_join.refresh('%s').",
								 rows[i].target_name)));
			}
	}

	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);

	worker_publish(rows, nrows, end_lsn, batches, outcomes);
	return true;
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
	Oid			save_userid;
	int			save_sec_context;
	volatile bool again = false;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		ApplyCounts counts;
		int			nestlevel;
		Datum		values[2];

		SetUserIdAndSecContext(row->owner,
							   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		nestlevel = NewGUCNestLevel();
		(void) set_config_option("search_path", "pg_catalog, pg_temp",
								 PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		if (dj_lookup_timeout_ms > 0)
			enable_timeout_after(STATEMENT_TIMEOUT, dj_lookup_timeout_ms);

		memset(&counts, 0, sizeof(counts));
		batch->end_lsn = end_lsn;
		PushActiveSnapshot(GetTransactionSnapshot());
		apply_view_batch(batch->view_id, batch, &counts);
		PopActiveSnapshot();

		disable_timeout(STATEMENT_TIMEOUT, false);
		AtEOXact_GUC(true, nestlevel);
		SetUserIdAndSecContext(save_userid, save_sec_context);

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

		plan_list_views = SPI_prepare("SELECT view_id, owner, state = 'error', applied_lsn, target_name"
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

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);

	/* forget dropped views */
	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &shared->views[i];
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
	LWLockRelease(shared->lock);

	ConditionVariableBroadcast(&shared->progress_cv);
}

/* ----------------
 * SQL functions
 * ----------------
 */

/*
 * The WAL position every change committed so far lies before: the insert
 * position, moved back over a page header if it sits just past one (no
 * record ends there: the reader stops at the page boundary).
 */
static XLogRecPtr
wal_position_now(void)
{
	XLogRecPtr	lsn = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(lsn, wal_segment_size) == SizeOfXLogLongPHD)
		lsn -= SizeOfXLogLongPHD;
	else if (lsn % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		lsn -= SizeOfXLogShortPHD;
	return lsn;
}

/*
 * delta_join.wait(target text, timeout interval) returns boolean
 *
 * Blocks until every change committed before the call has been applied to
 * the view (target given) or to every view of the database (target NULL),
 * and returns true; returns false when the timeout passes first (a NULL
 * timeout waits without limit), and at once when the view is in error: its
 * changes are not being applied (delta_join.status says why).  With target
 * NULL, it waits for the others and returns false if any view is in error.
 *
 * "Applied" means the worker has decoded past the WAL position at the call
 * and committed the batch that covers it.
 */
Datum
dj_wait(PG_FUNCTION_ARGS)
{
	bool		one_view = !PG_ARGISNULL(0);
	int			view_id = 0;
	int64		timeout_ms = -1;
	TimestampTz deadline = 0;
	XLogRecPtr	target_lsn;
	bool		any_view;
	bool		in_error;
	bool		done = false;
	Latch	   *worker_latch = NULL;

	worker_check_shmem();

	if (!PG_ARGISNULL(1))
	{
		Interval   *timeout = PG_GETARG_INTERVAL_P(1);
		int64		usecs;

		usecs = timeout->time +
			(int64) timeout->day * USECS_PER_DAY +
			(int64) timeout->month * DAYS_PER_MONTH * USECS_PER_DAY;
		timeout_ms = Max(usecs / 1000, 0);
	}

	/* Which view, and is it (or any view) in error already? */
	SPI_connect();
	if (one_view)
	{
		Oid			argtypes[1] = {TEXTOID};
		Datum		values[1] = {PG_GETARG_DATUM(0)};
		bool		isnull;

		if (SPI_execute_with_args("SELECT view_id, state = 'error' FROM delta_join.view_catalog"
								  " WHERE target = pg_catalog.to_regclass($1)",
								  1, argtypes, values, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read delta_join.view_catalog");
		if (SPI_processed == 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("\"%s\" is not a delta view",
							text_to_cstring(PG_GETARG_TEXT_PP(0))),
					 errhint("The view delta_join.views lists the delta views.")));
		view_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 1, &isnull));
		in_error = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0],
											  SPI_tuptable->tupdesc, 2, &isnull));
		any_view = true;
	}
	else
	{
		if (SPI_execute("SELECT 1 FROM delta_join.view_catalog LIMIT 1",
						true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read delta_join.view_catalog");
		any_view = SPI_processed > 0;
		in_error = false;
	}
	SPI_finish();

	if (in_error)
		PG_RETURN_BOOL(false);
	if (!any_view)
		PG_RETURN_BOOL(true);

	/* What we wait for must be flushed for the worker to read it. */
	target_lsn = wal_position_now();
	XLogFlush(target_lsn);

	LWLockAcquire(shared->lock, LW_SHARED);
	{
		DbWorker   *db = worker_find_db(MyDatabaseId, false);

		if (db != NULL && db->pid != 0)
			worker_latch = db->latch;
	}
	LWLockRelease(shared->lock);
	if (worker_latch != NULL)
		SetLatch(worker_latch);

	if (timeout_ms >= 0)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);

	ConditionVariablePrepareToSleep(&shared->progress_cv);
	for (;;)
	{
		DbWorker   *db;
		ViewStat   *stat;
		long		sleep_ms = 1000;

		LWLockAcquire(shared->lock, LW_SHARED);
		db = worker_find_db(MyDatabaseId, false);
		done = (db != NULL && db->processed_lsn >= target_lsn);
		stat = one_view ? worker_find_view(MyDatabaseId, view_id, false) : NULL;
		in_error = (stat != NULL && stat->in_error);
		LWLockRelease(shared->lock);

		if (in_error || done)
			break;
		if (timeout_ms >= 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				break;
			sleep_ms = Min(sleep_ms, TimestampDifferenceMilliseconds(now, deadline));
		}
		(void) ConditionVariableTimedSleep(&shared->progress_cv, Max(sleep_ms, 1),
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();

	if (in_error)
		PG_RETURN_BOOL(false);

	if (done && !one_view)
	{
		SPI_connect();
		if (SPI_execute("SELECT 1 FROM delta_join.view_catalog WHERE state = 'error' LIMIT 1",
						true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not read delta_join.view_catalog");
		done = (SPI_processed == 0);
		SPI_finish();
	}
	PG_RETURN_BOOL(done);
}

/*
 * delta_join._stat() returns the counters of this database's views from
 * shared memory, one row per view the worker has seen.
 *
 * applied_commit_time is the commit time of the newest change applied, and
 * NULL once the view has caught up with all WAL written (so that the lag
 * delta_join.status derives from it is zero then).
 */
Datum
dj_stat(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	XLogRecPtr	now_lsn = wal_position_now();
	int			i;

	worker_check_shmem();
	InitMaterializedSRF(fcinfo, 0);

	LWLockAcquire(shared->lock, LW_SHARED);
	for (i = 0; i < WORKER_MAX_VIEWS; i++)
	{
		ViewStat   *stat = &shared->views[i];
		Datum		values[10];
		bool		nulls[10];

		if (stat->dboid != MyDatabaseId)
			continue;
		memset(nulls, 0, sizeof(nulls));
		values[0] = Int32GetDatum(stat->view_id);
		values[1] = LSNGetDatum(stat->applied_lsn);
		nulls[1] = XLogRecPtrIsInvalid(stat->applied_lsn);
		values[2] = TimestampTzGetDatum(stat->applied_commit_time);
		nulls[2] = (stat->applied_commit_time == 0 ||
					stat->applied_lsn >= now_lsn);
		values[3] = Int64GetDatum(stat->changes_seen);
		values[4] = Int64GetDatum(stat->counts.keys_applied);
		values[5] = Int64GetDatum(stat->counts.rows_upserted);
		values[6] = Int64GetDatum(stat->counts.rows_deleted);
		values[7] = Int64GetDatum(stat->counts.rows_unchanged);
		values[8] = Int64GetDatum(stat->counts.lookups);
		values[9] = Int64GetDatum(stat->counts.cache_hits);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(shared->lock);

	return (Datum) 0;
}
