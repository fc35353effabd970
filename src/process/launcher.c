/*-------------------------------------------------------------------------
 *
 * launcher.c
 *	  The launcher of the apply workers, the slot of each database, and
 *	  what backends call to set workers in motion.
 *
 * Nouns:
 *
 *	slot		the logical replication slot of one database, named
 *				LAUNCHER_SLOT_PREFIX followed by the database OID, with our
 *				library as output plugin.  It exists exactly while the
 *				database has views: launcher_ensure_slot creates it for the
 *				first view, the worker drops it once the last view is gone.
 *	apply worker (worker)
 *				a dynamic background worker, one per database with a slot
 *				(worker.c).
 *	launcher	a static background worker that starts a worker for every
 *				slot named like ours (once made: not while a backend still
 *				creates it), and restarts one that died after
 *				LAUNCHER_RESTART_MS.  It needs no database connection: the
 *				slots are in shared memory.  A slot is the only record of
 *				which databases need a worker, so after a restart the
 *				launcher finds them again.
 *
 * The launcher and the workers meet in shared memory (base/shmem.c;
 * shmem.h has its layout and its locking rules), which launcher_init asks
 * for.  Backends announce catalog changes (launcher_notify) at commit, from a
 * transaction callback, by bumping their database's generation and setting
 * the worker's and the launcher's latches.
 *
 * IDENTIFICATION
 *	  src/process/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogutils.h"
#include "catalog/namespace.h"
#include "catalog/pg_database.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_type.h"
#include "commands/dbcommands.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "replication/logical.h"
#include "replication/slot.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "registry/catalog.h"
#include "base/compat.h"
#include "base/delta_join.h"
#include "base/shmem.h"
#include "capture/decoding.h"
#include "process/launcher.h"

#define LAUNCHER_NAP_MS			1000	/* launcher's look at the slots */
#define LAUNCHER_RESTART_MS		1000	/* delay before restarting a worker */


/* Backends: a catalog change waiting for commit to be announced */
static bool notify_pending = false;

/* A slot recreated in this transaction, with views marked stale for it */
static char slot_to_drop_on_abort[NAMEDATALEN];

/* The slot of a database whose last view this transaction dropped */
static char slot_to_drop_on_commit[NAMEDATALEN];
static bool xact_callback_registered = false;

static void launcher_xact_callback(XactEvent event, void *arg);
static void launcher_commit_wakeup(XactEvent event, void *arg);
static void launcher_wake_worker(Oid dboid);
static void wait_slot_caught_up(Oid dboid, const char *dbname, const char *name);
static void launcher_on_exit(int code, Datum arg);
static void launcher_scan(long *nap_ms);
static void launcher_drop_slot_on_abort(void);
static void launcher_drop_slot_on_commit(void);

/* A slot being created by this backend (launcher_ensure_slot) */
typedef struct SlotWait
{
	const char *slot;
	const char *prepared;		/* gid of the prepared transaction it waits
								 * for, or NULL */
	ErrorContextCallback callback;
} SlotWait;

/* ----------------
 * Start-up and shared memory
 * ----------------
 */

/*
 * Called from _PG_init while shared_preload_libraries are loaded: ask for
 * shared memory and register the launcher.
 */
void
launcher_init(void)
{
	BackgroundWorker bgw;

	shmem_init();

	/* every process forked from here wakes its database's worker on commit */
	RegisterXactCallback(launcher_commit_wakeup, NULL);

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

/*
 * A dynamic background worker of ours that connects to a database, is not
 * restarted by the postmaster, and tells this process when it starts and
 * ends; the caller sets its name and argument.
 */
void
launcher_bgw_init(BackgroundWorker *bgw, const char *function, const char *type)
{
	memset(bgw, 0, sizeof(BackgroundWorker));
	bgw->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	bgw->bgw_start_time = BgWorkerStart_RecoveryFinished;
	bgw->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(bgw->bgw_library_name, BGW_MAXLEN, "delta_join");
	snprintf(bgw->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(bgw->bgw_type, BGW_MAXLEN, "%s", type);
	bgw->bgw_notify_pid = MyProcPid;
}

void
launcher_slot_name(char *name, Oid dboid)
{
	snprintf(name, NAMEDATALEN, LAUNCHER_SLOT_PREFIX "%u", dboid);
}

/* ----------------
 * DROP DATABASE
 * ----------------
 */

/* The pid of the slot's holder (0 if none), or -1 if there is no such slot */
static pid_t
slot_holder(const char *name)
{
	ReplicationSlot *slot;
	pid_t		pid = -1;

	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(name, false);
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		pid = slot->active_pid;
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	return pid;
}

/* The pid of the database's apply worker, 0 if none runs */
static pid_t
worker_pid_of(Oid dboid)
{
	DbWorker   *db;
	pid_t		pid;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	db = shmem_find_db(dboid, false);
	pid = (db != NULL) ? db->pid : 0;
	LWLockRelease(worker_shared->lock);
	return pid;
}

/*
 * Stop the database's apply worker, and wait until it is gone and the
 * database's slot, if it still exists, is free: for at most 10 s.  The
 * caller holds a lock on the database that keeps the worker the launcher
 * starts again (LAUNCHER_RESTART_MS later) from connecting meanwhile.
 * False if the time ran out: the worker would not go, or another process
 * holds the slot.
 */
static bool
stop_worker(Oid dboid, const char *slot)
{
	for (int waited_ms = 0;; waited_ms += 10)
	{
		pid_t		worker = worker_pid_of(dboid);

		if (worker == 0 && slot_holder(slot) <= 0)
			return true;
		if (waited_ms >= 10000)
			return false;
		if (worker != 0 && waited_ms % 1000 == 0)
			(void) kill(worker, SIGTERM);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Called before a command that core refuses while any process is
 * connected to the database, our apply worker included: CREATE DATABASE
 * ... TEMPLATE it, ALTER DATABASE ... RENAME or SET TABLESPACE (module.c).
 * Stop the worker, holding the lock the command takes (lockmode), so that
 * the worker the launcher starts again waits until the command is done.
 * Only for the database's owner or a superuser, so that no other role can
 * stop a worker at will; and the slot stays, so the views miss nothing.
 * (A copy made from a template with views has their catalog but no slot:
 * its views say so, and refresh() starts them.)
 */
void
launcher_pause_worker(const char *dbname, LOCKMODE lockmode, bool catch_up)
{
	char		name[NAMEDATALEN];
	Oid			dboid = get_database_oid(dbname, true);

	if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
		(worker_pid_of(dboid) == 0 && !catch_up) ||
		!object_ownercheck(DatabaseRelationId, dboid, GetUserId()))
		return;
	LockSharedObject(DatabaseRelationId, dboid, 0, lockmode);
	launcher_slot_name(name, dboid);
	if (catch_up)
		wait_slot_caught_up(dboid, dbname, name);
	if (worker_pid_of(dboid) != 0)
		(void) stop_worker(dboid, name);
}

/*
 * Before ALTER DATABASE ... SET TABLESPACE: wait until the database's slot
 * has confirmed every transaction committed so far, or fail.  Logical
 * decoding maps a change to its table by the tablespace its WAL record
 * names, and a table in the database's default tablespace is found by
 * the database's tablespace as it is when decoding runs: a change written
 * before the move and decoded after it cannot be mapped ("could not map
 * filenode ... to relation OID"), on every start of the worker, and
 * refresh() cannot help.  The caller holds the database's lock, so no
 * session writes it meanwhile.
 */
static void
wait_slot_caught_up(Oid dboid, const char *dbname, const char *name)
{
	XLogRecPtr	target = GetXLogInsertRecPtr();

	XLogFlush(target);
	for (int waited_ms = 0;; waited_ms += 10)
	{
		ReplicationSlot *slot;
		XLogRecPtr	confirmed = InvalidXLogRecPtr;

		LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
		slot = SearchNamedReplicationSlot(name, false);
		if (slot != NULL)
		{
			SpinLockAcquire(&slot->mutex);
			confirmed = slot->data.confirmed_flush;
			SpinLockRelease(&slot->mutex);
		}
		LWLockRelease(ReplicationSlotControlLock);

		/* no slot, or nothing committed after its position: nothing to decode */
		if (slot == NULL || XLogRecPtrIsInvalid(confirmed) ||
			decoding_last_xact_end(confirmed, target, UINT64CONST(64) * 1024 * 1024) <= confirmed)
			return;
		if (waited_ms >= 15000)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_IN_USE),
					 errmsg("cannot move database \"%s\" to another tablespace while its delta views have changes not yet applied",
							dbname),
					 errdetail("Logical decoding cannot read a change written before the move once the database has moved: replication slot \"%s\" has confirmed up to %X/%X, and changes were committed up to %X/%X.",
							   name, LSN_FORMAT_ARGS(confirmed), LSN_FORMAT_ARGS(target)),
					 errhint("Call delta_join.wait() in the database (see delta_join.status for views that wait) and try again.")));
		launcher_wake_worker(dboid);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Called before DROP DATABASE runs (module.c).  Core refuses to drop a
 * database while a replication slot of it exists, or while any process
 * is connected to it: a database with views, whose slot is ours and whose
 * apply worker is connected, could not be dropped until its views were
 * dropped and the worker had noticed.  When nothing else would stop the
 * command -- the caller owns the database, it is no template, no other
 * slot, subscription or session uses it (or FORCE terminates the
 * sessions) -- stop the worker and drop the slot first.  Otherwise leave
 * both be: core's own error says what stops the command, or ours says it
 * for other sessions, since core would blame the slot.
 *
 * Dropping the slot cannot be undone, so everything that could still stop
 * the command is settled before: the database's lock is taken first, as
 * dropdb() takes it, so that no session connects meanwhile (a worker the
 * launcher starts again waits for it, and finds the database gone); with
 * FORCE, the sessions are terminated here, which fails as core would for
 * a prepared transaction of the database or a session the caller may not
 * terminate; and then no other session may be left.
 */
void
launcher_before_drop_database(const char *dbname, bool force)
{
	char		name[NAMEDATALEN];
	Oid			dboid = get_database_oid(dbname, true);
	HeapTuple	tuple;
	bool		is_template;
	int			nslots;
	int			nactive;
	int			nbackends;
	int			nprepared;

	if (!OidIsValid(dboid) || dboid == MyDatabaseId ||
		!object_ownercheck(DatabaseRelationId, dboid, GetUserId()))
		return;
	launcher_slot_name(name, dboid);
	if (slot_holder(name) < 0)
		return;
	LockSharedObject(DatabaseRelationId, dboid, 0, AccessExclusiveLock);
	tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (!HeapTupleIsValid(tuple))
		return;
	is_template = ((Form_pg_database) GETSTRUCT(tuple))->datistemplate;
	ReleaseSysCache(tuple);
	if (is_template ||
		(ReplicationSlotsCountDBSlots(dboid, &nslots, &nactive) && nslots > 1) ||
		CountDBSubscriptions(dboid) > 0)
		return;

	/* A slot another process holds (a session making it) is core's to report */
	if (!stop_worker(dboid, name) || slot_holder(name) < 0)
		return;
	if (force)
		TerminateOtherDBBackends(dboid);
	/* core would check the slot first, and blame it: say what core would */
	if (CountOtherDBBackends(dboid, &nbackends, &nprepared))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_IN_USE),
				 errmsg("database \"%s\" is being accessed by other users", dbname),
				 nprepared == 0 ?
				 errdetail_plural("There is %d other session using the database.",
								  "There are %d other sessions using the database.",
								  nbackends, nbackends) :
				 nbackends == 0 ?
				 errdetail_plural("There is %d prepared transaction using the database.",
								  "There are %d prepared transactions using the database.",
								  nprepared, nprepared) :
				 errdetail("There are %d other session(s) and %d prepared transaction(s) using the database.",
						   nbackends, nprepared),
				 errhint("Its delta views and their slot are kept.")));
	ReplicationSlotDrop(name, true);
	ereport(LOG,
			(errmsg("replication slot \"%s\" of database \"%s\" dropped for DROP DATABASE",
					name, dbname)));
}

/* ----------------
 * Why a slot being created waits
 * ----------------
 */

/*
 * Creating a slot waits until every transaction that has written, in any
 * database, has ended (DecodingContextFindStartpoint).  A transaction in
 * progress ends by itself; a prepared one only when someone commits or
 * rolls it back, maybe never.  The oldest prepared transaction of the
 * server, if there is one: its gid and database, and how many there are.
 */
static bool
oldest_prepared(char **gid, char **database, uint64 *count)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		found;

	SPI_connect();
	if (catalog_exec("SELECT gid, database, pg_catalog.count(*) OVER ()"
					 " FROM pg_catalog.pg_prepared_xacts ORDER BY prepared LIMIT 1",
					 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read pg_prepared_xacts");
	found = SPI_processed > 0;
	if (found)
	{
		HeapTuple	tuple = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;

		*gid = MemoryContextStrdup(cxt, SPI_getvalue(tuple, desc, 1));
		*database = MemoryContextStrdup(cxt, SPI_getvalue(tuple, desc, 2));
		*count = DatumGetInt64(SPI_getbinval(tuple, desc, 3, &isnull));
	}
	SPI_finish();
	return found;
}

/*
 * About to make a slot, which waits for its start point: say once, as a
 * WARNING, which prepared transaction it will wait for and what ends the
 * wait.  Returns that transaction's gid, or NULL.
 */
static char *
slot_wait_warn(void)
{
	char	   *gid;
	char	   *database;
	uint64		count;

	if (!oldest_prepared(&gid, &database, &count))
		return NULL;
	ereport(WARNING,
			(errcode(ERRCODE_OBJECT_IN_USE),
			 count == 1 ?
			 errmsg("the replication slot of this database waits for prepared transaction \"%s\" to end",
					gid) :
			 errmsg("the replication slot of this database waits for %llu prepared transactions to end, the oldest \"%s\"",
					(unsigned long long) count, gid),
			 errdetail("Creating the slot waits for every transaction that has written, in any database, to end; a prepared transaction ends only when it is committed or rolled back.  \"%s\" is in database \"%s\".",
					   gid, database),
			 errhint("Run COMMIT PREPARED %s or ROLLBACK PREPARED %s in database \"%s\", or cancel this statement and create the view later.",
					 quote_literal_cstr(gid), quote_literal_cstr(gid), database)));
	return gid;
}

/* Error context of a slot being created: what it waits for */
static void
slot_wait_context(void *arg)
{
	SlotWait   *wait = (SlotWait *) arg;

	if (wait->prepared != NULL)
		errcontext("creating replication slot \"%s\", which waits for prepared transaction \"%s\" to end",
				   wait->slot, wait->prepared);
	else
		errcontext("creating replication slot \"%s\" for the delta views of this database",
				   wait->slot);
}

/*
 * Why this database's views wait for their slot, as delta_join.status
 * says: it is being created (launcher_ensure_slot), and waits for a prepared
 * transaction or transactions in progress.  NULL when it is not.
 */
char *
launcher_slot_wait_reason(void)
{
	char		name[NAMEDATALEN];
	ReplicationSlot *slot;
	bool		creating;
	char	   *gid;
	char	   *database;
	uint64		count;

	shmem_check();
	launcher_slot_name(name, MyDatabaseId);
	LWLockAcquire(ReplicationSlotControlLock, LW_SHARED);
	slot = SearchNamedReplicationSlot(name, false);
	creating = false;
	if (slot != NULL)
	{
		SpinLockAcquire(&slot->mutex);
		creating = (slot->data.persistency == RS_EPHEMERAL);
		SpinLockRelease(&slot->mutex);
	}
	LWLockRelease(ReplicationSlotControlLock);
	if (!creating)
		return NULL;
	if (oldest_prepared(&gid, &database, &count))
		return psprintf("the replication slot of this database is being created and waits for prepared transaction \"%s\" (database \"%s\") to end: COMMIT PREPARED or ROLLBACK PREPARED it",
						gid, database);
	return pstrdup("the replication slot of this database is being created and waits for the transactions that have written to end");
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
launcher_ensure_slot(void)
{
	char		name[NAMEDATALEN];
	Oid			catalog_oid = catalog_relid("view_catalog");
	bool		views_exist;
	ReplicationSlot *slot;
	SlotWait	wait;

	shmem_check();
	catalog_require_version();
	launcher_slot_name(name, MyDatabaseId);

	/* a view made after this transaction dropped the last one needs it */
	slot_to_drop_on_commit[0] = '\0';

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delta views cannot be created or refreshed in a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("The view must start from every change committed before it, which the snapshot of this transaction may not show."),
				 errhint("Use READ COMMITTED.")));

	if (!OidIsValid(catalog_oid))
		elog(ERROR, "delta_join.view_catalog does not exist");

	LockRelationOid(catalog_oid, RowExclusiveLock);
	slot = SearchNamedReplicationSlot(name, true);
	if (slot != NULL && slot->data.persistency != RS_EPHEMERAL)
		return;

	/* (a slot still ephemeral is being created, and waits for us too) */
	if (GetTopTransactionIdIfAny() != InvalidTransactionId)
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot create the first delta view of a database in a transaction that has already written"),
				 errdetail("The replication slot \"%s\" is created first, and creating it waits for every transaction that has written, this one included, to end.",
						   name),
				 errhint("Create the view at the start of its own transaction.")));

	/* Creators of the slot take turns; re-check under the lock. */
	LockRelationOid(catalog_oid, ShareUpdateExclusiveLock);
	if (SearchNamedReplicationSlot(name, true) != NULL)
		return;

	CheckLogicalDecodingRequirements();

	/*
	 * Ephemeral until its start point is found: an error drops it.  The
	 * launcher leaves it alone meanwhile (launcher_scan).
	 */
	/*
	 * A new slot: where the workers left an earlier one tells nothing about
	 * it (worker_check_slot_moved).  No worker can hold it before we have.
	 */
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		DbWorker   *db = shmem_find_db(MyDatabaseId, false);

		if (db != NULL)
			db->slot_confirmed = InvalidXLogRecPtr;
	}
	LWLockRelease(worker_shared->lock);

	wait.slot = name;
	wait.prepared = slot_wait_warn();
	ReplicationSlotCreate_compat(name, true, RS_EPHEMERAL, false);
	wait.callback.callback = slot_wait_context;
	wait.callback.arg = &wait;
	wait.callback.previous = error_context_stack;
	error_context_stack = &wait.callback;
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
	error_context_stack = wait.callback.previous;
	ReplicationSlotRelease();

	ereport(LOG,
			(errmsg("created replication slot \"%s\" for delta views", name)));

	/*
	 * Views without a slot (it was dropped by hand, or invalidated) have
	 * missed changes: say so.
	 */
	SPI_connect();
	if (catalog_exec("SELECT 1 FROM delta_join.view_catalog"
					 " WHERE state OPERATOR(pg_catalog.=) 'active' LIMIT 1",
					 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read delta_join.view_catalog");
	views_exist = SPI_processed > 0;
	SPI_finish();
	if (!views_exist)
	{
		launcher_wake_worker(MyDatabaseId);
		return;
	}

	/*
	 * The marking is transactional and the slot is not: should this
	 * transaction abort, drop the slot again (launcher_xact_callback), so the
	 * next view function finds it missing and marks the views once more.
	 * The worker is only woken at commit, so that nothing holds the slot.
	 */
	catalog_mark_views_stale(psprintf("replication slot \"%s\" was missing; changes committed while it was missing were not applied",
									 name));
	strlcpy(slot_to_drop_on_abort, name, NAMEDATALEN);
	launcher_notify();
}

/*
 * Announce, once the current transaction commits, that the views of this
 * database changed: the worker re-reads the catalog, or is started.
 */
void
launcher_notify(void)
{
	shmem_check();
	if (!xact_callback_registered)
	{
		RegisterXactCallback(launcher_xact_callback, NULL);
		xact_callback_registered = true;
	}
	notify_pending = true;
}

/*
 * The transaction dropped the last view of this database: drop its slot at
 * commit if no worker runs to do it.  None may run for want of a
 * background worker slot (max_worker_processes), and the slot would keep
 * its WAL until one did, with no view left to say so.  Only when no other
 * transaction changes the views meanwhile: the ShareLock kept until commit
 * makes a creator that found the slot (launcher_ensure_slot) wait, and then
 * find it gone.  Not where the slot is kept without views (distributed
 * views).
 */
void
launcher_drop_slot_if_unused(void)
{
	char		name[NAMEDATALEN];

	shmem_check();
	launcher_slot_name(name, MyDatabaseId);
	if (catalog_list_views() != NIL || shmem_is_distributed(MyDatabaseId) ||
		worker_pid_of(MyDatabaseId) != 0 || slot_holder(name) != 0 ||
		!ConditionalLockRelationOid(catalog_relid("view_catalog"), ShareLock))
		return;
	strlcpy(slot_to_drop_on_commit, name, NAMEDATALEN);
	launcher_notify();
}

/*
 * A transaction that wrote committed: wake the apply worker of its
 * database, if there is one, so that the change is applied now rather than
 * at its next poll.  Costs a scan of a small array without a lock: a latch
 * read while its worker exits is still a process latch, and setting it is
 * harmless.
 */
static void
launcher_commit_wakeup(XactEvent event, void *arg)
{
	if (event != XACT_EVENT_COMMIT || worker_shared == NULL ||
		!TransactionIdIsValid(GetTopTransactionIdIfAny()))
		return;
	for (int i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		DbWorker   *db = &worker_shared->dbs[i];

		if (db->dboid == MyDatabaseId)
		{
			Latch	   *latch = db->latch;

			if (db->pid != 0 && latch != NULL && latch != MyLatch)
				SetLatch(latch);
			return;
		}
	}
}

static void
launcher_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_PREPARE:

			/*
			 * Where the slot is kept without views (distributed views), the
			 * worker finds the views of a prepared transaction once it
			 * commits: each batch reads the catalog.  Elsewhere a prepared
			 * first view could see its slot dropped before it commits.
			 */
			if (notify_pending && !shmem_is_distributed(MyDatabaseId))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that created, dropped or refreshed a delta view")));
			break;
		case XACT_EVENT_PREPARE:
			slot_to_drop_on_abort[0] = '\0';
			slot_to_drop_on_commit[0] = '\0';
			if (notify_pending)
			{
				notify_pending = false;
				launcher_wake_worker(MyDatabaseId);
			}
			break;
		case XACT_EVENT_COMMIT:
			slot_to_drop_on_abort[0] = '\0';
			if (slot_to_drop_on_commit[0] != '\0')
				launcher_drop_slot_on_commit();
			if (notify_pending)
			{
				notify_pending = false;
				launcher_wake_worker(MyDatabaseId);
			}
			break;
		case XACT_EVENT_ABORT:
			notify_pending = false;
			slot_to_drop_on_commit[0] = '\0';
			if (slot_to_drop_on_abort[0] != '\0')
				launcher_drop_slot_on_abort();
			break;
		default:
			break;
	}
}

/*
 * Drop the slot this aborted transaction recreated (see launcher_ensure_slot).
 * Runs during abort: report a failure, do not raise it.
 */
static void
launcher_drop_slot_on_abort(void)
{
	char		name[NAMEDATALEN];

	strlcpy(name, slot_to_drop_on_abort, NAMEDATALEN);
	slot_to_drop_on_abort[0] = '\0';
	PG_TRY();
	{
		ReplicationSlotDrop(name, true);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		ereport(WARNING,
				(errmsg("could not drop replication slot \"%s\" after the transaction that recreated it aborted",
						name),
				 errhint("Drop it with pg_drop_replication_slot(), then refresh the views of this database.")));
	}
	PG_END_TRY();
}

/*
 * Drop the slot of launcher_drop_slot_if_unused.  Runs after commit: a
 * worker that took the slot meanwhile drops it itself, since it finds no
 * views; report nothing then, and raise nothing.
 */
static void
launcher_drop_slot_on_commit(void)
{
	char		name[NAMEDATALEN];
	MemoryContext cxt = CurrentMemoryContext;

	strlcpy(name, slot_to_drop_on_commit, NAMEDATALEN);
	slot_to_drop_on_commit[0] = '\0';
	PG_TRY();
	{
		ReplicationSlotDrop(name, true);
		ereport(LOG,
				(errmsg("replication slot \"%s\" dropped: its database has no delta views left",
						name)));
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
	}
	PG_END_TRY();
}

/*
 * Bump the database's generation and wake its worker and the launcher.
 * Runs after commit too: must not fail.
 */
static void
launcher_wake_worker(Oid dboid)
{
	DbWorker   *db;
	Latch	   *worker_latch = NULL;
	Latch	   *launcher_latch;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(dboid, true);
	if (db != NULL)
	{
		db->generation++;
		if (db->pid != 0)
			worker_latch = db->latch;
	}
	launcher_latch = worker_shared->launcher_latch;
	LWLockRelease(worker_shared->lock);

	if (db == NULL)
		elog(WARNING, "too many databases with delta views: at most %d have a worker",
			 WORKER_MAX_DATABASES);
	if (worker_latch != NULL)
		SetLatch(worker_latch);
	if (launcher_latch != NULL)
		SetLatch(launcher_latch);
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

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	worker_shared->launcher_latch = MyLatch;
	LWLockRelease(worker_shared->lock);
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

	/*
	 * Not 0, which tells the postmaster that we are done for good: it would
	 * forget us, and no worker would be started again until a restart.
	 * Terminated by someone, we come back after bgw_restart_time, as core's
	 * logical replication launcher does; at shutdown nothing restarts.
	 */
	proc_exit(1);
}

static void
launcher_on_exit(int code, Datum arg)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	worker_shared->launcher_latch = NULL;
	LWLockRelease(worker_shared->lock);
}

/* What the launcher knows of the worker it started for a database */
typedef struct LauncherEntry
{
	Oid			dboid;
	BackgroundWorkerHandle *handle;
	TimestampTz stopped_at;		/* when it was last seen stopped */
	bool		start_failed;	/* no background worker slot was free */
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
		bool		creating;

		SpinLockAcquire(&s->mutex);
		in_use = s->in_use;
		name = s->data.name;
		database = s->data.database;
		creating = (s->data.persistency == RS_EPHEMERAL);
		SpinLockRelease(&s->mutex);

		/*
		 * A slot still ephemeral is being created by a backend, which holds
		 * it until its start point is found, perhaps for long (see
		 * launcher_slot_wait_reason): its worker would only fail to acquire
		 * it, again and again.  It is started once the slot is made
		 * persistent and the backend wakes us (launcher_wake_worker).
		 */
		if (in_use && !creating && OidIsValid(database) &&
			strncmp(NameStr(name), LAUNCHER_SLOT_PREFIX,
					strlen(LAUNCHER_SLOT_PREFIX)) == 0 &&
			strtoul(NameStr(name) + strlen(LAUNCHER_SLOT_PREFIX), NULL, 10) == database &&
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
		LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
		db = shmem_find_db(dboid, true);
		running = (db != NULL && db->pid != 0);
		LWLockRelease(worker_shared->lock);
		if (running || db == NULL)
			continue;

		wait_ms = LAUNCHER_RESTART_MS -
			TimestampDifferenceMilliseconds(e->stopped_at, now);
		if (e->stopped_at != 0 && wait_ms > 0)
		{
			*nap_ms = Min(*nap_ms, wait_ms);
			continue;
		}

		launcher_bgw_init(&bgw, "dj_worker_main", "delta_join worker");
		snprintf(bgw.bgw_name, BGW_MAXLEN, "delta_join worker for database %u",
				 dboid);
		bgw.bgw_main_arg = ObjectIdGetDatum(dboid);

		if (!RegisterDynamicBackgroundWorker(&bgw, &e->handle))
		{
			/* say it once, then keep trying quietly */
			if (!e->start_failed)
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("could not start the delta_join worker for database %u: no background worker slot is free",
								dboid),
						 errhint("Raise max_worker_processes.")));
			e->handle = NULL;
			e->stopped_at = now;
			e->start_failed = true;
		}
		else
			e->start_failed = false;
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
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	for (i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		DbWorker   *db = &worker_shared->dbs[i];
		bool		slot_exists = false;

		if (db->dboid == InvalidOid || db->pid != 0)
			continue;
		for (j = 0; j < nwanted; j++)
			if (wanted[j] == db->dboid)
				slot_exists = true;
		if (!slot_exists)
			db->dboid = InvalidOid;
	}
	LWLockRelease(worker_shared->lock);
}
