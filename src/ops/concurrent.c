/*-------------------------------------------------------------------------
 *
 * concurrent.c
 *	  create_view(..., concurrently => true) and refresh(target,
 *	  concurrently => true): fill a view's target while the writers of its
 *	  sources go on (DESIGN.md section 5, "Concurrent backfill").
 *
 * The steps, each in a transaction of its own, as CREATE INDEX
 * CONCURRENTLY takes them:
 *
 *	1. register: the view is made (create) or found (refresh) under the view
 *	   lock and committed in state 'backfilling'.  From that commit on the
 *	   apply worker captures the view's dirty keys, as for any view, but
 *	   holds them back (worker.c, retry_hold) and does not confirm the slot
 *	   past them, so that they are neither applied early nor lost.
 *	2. wait for the writers that began before step 1 (WaitForLockersMultiple
 *	   on every source and partition, as CREATE INDEX CONCURRENTLY waits):
 *	   a transaction that wrote a source before step 1 committed was decoded
 *	   without the view, so its changes must be in the backfill's snapshot.
 *	   New writers are not waited for, and wait for nothing.
 *	3. fill, under a snapshot taken after step 2: create runs the query into
 *	   the empty target (INSERT ... SELECT), then gives a target it made its
 *	   key and indexes, sorted builds, as the blocking create does (a
 *	   refresh() makes them for a target whose fill never ended; the DDL
 *	   guard does not ask for them meanwhile); refresh writes only the
 *	   difference between the target and the query's result (the full
 *	   recompute's writer, apply_full.c), so readers see the old rows until
 *	   it commits.  Only ACCESS SHARE locks on the sources, from the query
 *	   itself: the caller needs SELECT on them, not the right to lock them.
 *	4. activate: state 'active', the target given the key and indexes DDL
 *	   took away meanwhile (the guard does not ask for them while the view
 *	   is backfilling).  The worker then applies the keys it held
 *	   since step 1.  A change committed between step 1 and step 3's snapshot
 *	   is in the fill and among those keys; applying a key recomputes from
 *	   the sources as they are then, so applying it again gives the same
 *	   rows.  Then catch up: wait until the worker has applied them.
 *
 * Why a background worker: the SQL functions are called by SELECT, inside
 * a transaction that a function cannot commit, and a C procedure (CALL,
 * SPI_commit) would change the interface that create_view and refresh have
 * (DESIGN.md section 4).  So the function, refused inside a transaction
 * block as CREATE INDEX CONCURRENTLY is, starts a dynamic background worker
 * connected as the calling role, with the caller's settings and
 * search_path, that takes the steps in its own transactions, and waits for
 * it.  The caller's transaction holds no lock on the sources meanwhile (it
 * does not parse the query).  Its error, with its SQLSTATE, detail and
 * hint, is raised again in the caller; a cancel of the caller cancels the
 * worker, which cleans up before it ends.  A caller that is terminated
 * (FATAL: no cleanup of its own) leaves the worker to end alone, its error
 * logged.
 *
 * A failure or a cancel before step 4 leaves nothing behind: the process
 * drops the view it registered (and the target, if it made it), or puts
 * the view it refreshed back in the state it had (in error with the
 * refresh's error, if it was in error; active with the key and indexes of
 * its target, as step 4).  A process that ends without
 * cleaning up (the server crashed or restarted, the process was
 * terminated) leaves the view 'backfilling', and the apply worker puts it
 * in error when it sees that no process runs its backfill any more
 * (progress_backfill_running): it no longer holds WAL, and drop_view
 * removes it.
 *
 * Progress: the view's entry in shared memory (progress.c) holds the
 * process, the phase, the rows written and the planner's estimate of the
 * rows to come; delta_join.progress shows them until the process exits,
 * however it ends (end_progress).
 *
 * IDENTIFICATION
 *	  src/ops/concurrent.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "analysis/query.h"
#include "analysis/view_plan.h"
#include "apply/apply.h"
#include "apply/target_shape.h"
#include "base/compat.h"
#include "base/progress.h"
#include "base/runas.h"
#include "base/shmem.h"
#include "ops/concurrent.h"
#include "ops/target.h"
#include "ops/views.h"
#include "process/launcher.h"
#include "registry/catalog.h"

#define TASK_TEXT_LEN		1024	/* of an error's message, detail, hint */
#define CONCURRENT_SLOT_WAIT_MS 30000	/* for a background worker slot */
#define CONCURRENT_SLOT_POLL_MS 100

/*
 * One concurrent operation, in dynamic shared memory: what the caller asks
 * (its strings after the struct), and what the background worker answers.
 */
typedef struct ConcurrentTask
{
	/* the request */
	BackfillCommand command;
	Oid			dboid;
	Oid			login_roleid;	/* the role the caller's session logged in as */
	Oid			roleid;			/* the role it acts as */
	int			sec_context;	/* and how (SECURITY DEFINER, restricted) */
	int			caller_pgprocno;
	int			caller_pid;
	VirtualTransactionId caller_vxid;
	DeltaOptions options;		/* create: resolved in the caller's session */
	bool		distributed;	/* create a distributed view (concurrent_citus) */
	Size		target_off;		/* (the other offsets: 0 when absent) */
	Size		query_off;		/* create */
	Size		managed_by_off; /* create a shard group's view: its distributed view */
	Size		strategy_off;	/* distributed: as given to create_view */
	Size		options_json_off;
	Size		settings_off;	/* the caller's pinned settings, as jsonb text */
	Size		search_path_off;
	int			lock_timeout;	/* the caller's, in milliseconds */

	/* the answer */
	bool		finished;
	Oid			result_target;
	int64		result_rows;
	int			sqlerrcode;		/* 0: no error */
	char		message[TASK_TEXT_LEN];
	char		detail[TASK_TEXT_LEN];
	char		hint[TASK_TEXT_LEN];

	char		data[FLEXIBLE_ARRAY_MEMBER];
} ConcurrentTask;

/* What the background worker has done so far, for its cleanup */
typedef struct TaskState
{
	const char *name;			/* the target, as the caller named it */
	bool		registered;		/* step 1 committed */
	bool		activated;		/* step 4 committed: nothing to undo */
	int			view_id;
	Oid			target;
	bool		created;		/* create made the target */
	bool		was_error;		/* refresh: the view was in error */
} TaskState;

static TaskState task_state;

ConcurrentCitus concurrent_citus;

/* ----------------------------------------------------------------
 *		The caller
 * ----------------------------------------------------------------
 */

/* Append a string to the task's data; returns its offset */
static Size
task_add(StringInfo data, const char *value)
{
	Size		off = data->len;

	appendBinaryStringInfo(data, value, strlen(value) + 1);
	return off;
}

/*
 * Refuse what a concurrent operation cannot run in: a transaction block (its
 * steps commit on their own), a read-only transaction (its steps write, in
 * transactions of a process that does not inherit the caller's
 * default_transaction_read_only: refused as the blocking operation, and
 * CREATE INDEX CONCURRENTLY, are), and a transaction that has written (its
 * writes, maybe to the sources, would be waited for by step 2, which it
 * waits for; on a Citus coordinator, what it wrote in the shards this
 * node holds is waited for likewise by this node's part of a distributed
 * operation, while it waits for that part).
 */
void
concurrent_check_caller(const char *function)
{
	PreventInTransactionBlock(true, function);
	PreventCommandIfReadOnly(function);
	if (TransactionIdIsValid(GetTopTransactionIdIfAny()))
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("%s cannot run in a transaction that has written", function),
				 errdetail("It waits for the transactions that write the view's sources to end."),
				 errhint("Call it alone: SELECT %s.", function)));
}

/*
 * Run the task in a background worker and wait for it; raise its error
 * here.  A cancel (or any error) while waiting cancels the worker and waits
 * for it to clean up.
 */
static void
run_task(ConcurrentTask *request, StringInfo data, ConcurrentTask *answer)
{
	dsm_segment *seg;
	ConcurrentTask *task;
	BackgroundWorker bgw;
	BackgroundWorkerHandle *handle;
	pid_t		pid;
	TimestampTz give_up;

	/* the worker joins our lock group: see dj_concurrent_main */
	BecomeLockGroupLeader();
	seg = dsm_create(offsetof(ConcurrentTask, data) + data->len, 0);
	task = dsm_segment_address(seg);
	memcpy(task, request, offsetof(ConcurrentTask, data));
	memcpy(task->data, data->data, data->len);

	launcher_bgw_init(&bgw, "dj_concurrent_main", "delta_join backfill");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "delta_join %s concurrently (pid %d)",
			 request->command == BACKFILL_CREATE ? "create_view" : "refresh", MyProcPid);
	bgw.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(seg));

	/*
	 * Every slot may be busy for a while only: a query's parallel workers
	 * hold theirs until it ends (the apply worker's whole-query recomputes
	 * among them).  Wait for one, up to CONCURRENT_SLOT_WAIT_MS.
	 */
	give_up = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), CONCURRENT_SLOT_WAIT_MS);
	while (!RegisterDynamicBackgroundWorker(&bgw, &handle))
	{
		if (GetCurrentTimestamp() >= give_up)
			ereport(ERROR,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start the process of a concurrent %s",
							request->command == BACKFILL_CREATE ? "create_view" : "refresh"),
					 errdetail("Every background worker slot was in use for %d s.",
							   CONCURRENT_SLOT_WAIT_MS / 1000),
					 errhint("Raise max_worker_processes, or call it again without concurrently.")));
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 CONCURRENT_SLOT_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	if (WaitForBackgroundWorkerStartup(handle, &pid) != BGWH_STARTED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
				 errmsg("the process of a concurrent %s did not start",
						request->command == BACKFILL_CREATE ? "create_view" : "refresh")));

	PG_TRY();
	{
		pid_t		running;

		while (GetBackgroundWorkerPid(handle, &running) == BGWH_STARTED)
		{
			(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 1000, PG_WAIT_EXTENSION);
			ResetLatch(MyLatch);
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		/* a cancel, say: the worker cleans up, then ends */
		kill(pid, SIGINT);
		(void) WaitForBackgroundWorkerShutdown(handle);
		PG_RE_THROW();
	}
	PG_END_TRY();

	memcpy(answer, task, offsetof(ConcurrentTask, data));
	dsm_detach(seg);

	if (!answer->finished)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("the process of a concurrent %s ended without finishing",
						request->command == BACKFILL_CREATE ? "create_view" : "refresh"),
				 errdetail("It was terminated, failed with a FATAL error (the server log has it), or the server is restarting."),
				 errhint("delta_join.views shows whether the view exists; the apply worker puts a view left backfilling in error, which delta_join.refresh() rebuilds and delta_join.drop_view() removes.")));
	if (answer->sqlerrcode != 0)
		ereport(ERROR,
				(errcode(answer->sqlerrcode),
				 errmsg_internal("%s", answer->message),
				 answer->detail[0] ? errdetail_internal("%s", answer->detail) : 0,
				 answer->hint[0] ? errhint("%s", answer->hint) : 0));
}

/* The request's common part: who, where, with which settings */
static void
task_init(ConcurrentTask *task, BackfillCommand command, StringInfo data,
		  const char *target)
{
	memset(task, 0, sizeof(ConcurrentTask));
	task->command = command;
	task->dboid = MyDatabaseId;
	task->login_roleid = GetAuthenticatedUserId();
	GetUserIdAndSecContext(&task->roleid, &task->sec_context);
	task->caller_pgprocno = MyProcNumber_compat;
	task->caller_pid = MyProcPid;
	GET_VXID_FROM_PGPROC(task->caller_vxid, *MyProc);
	initStringInfo(data);
	task->target_off = task_add(data, target);
	task->settings_off = task_add(data,
								  JsonbToCString(NULL, &runas_capture_settings()->root, 0));
	task->search_path_off = task_add(data, GetConfigOption("search_path", false, false));
	task->lock_timeout = LockTimeout;
}

/*
 * The query, read as the caller reads it, must use no temporary object of
 * the caller's: the process that makes the view reads it in a session of
 * its own, where pg_temp is another.  Read in a subtransaction rolled back
 * after (run_rolled_back), so that the caller holds no lock on the sources
 * while the create runs (a writer's transaction, or DDL, may need them).
 */
static void
refuse_caller_temporary(void *text)
{
	List	   *hints;

	query_refuse_temporary(query_parse(text, &hints), true);
}

/*
 * create_view(target, query, ..., concurrently => true) of a query over
 * this node's tables, options resolved in the caller's session.
 */
Oid
ops_create_view_concurrently(const char *target, const char *text, DeltaOptions *options)
{
	ConcurrentTask request;
	ConcurrentTask answer;
	StringInfoData data;

	concurrent_check_caller("delta_join.create_view(..., concurrently => true)");
	run_rolled_back(refuse_caller_temporary, (void *) text);
	task_init(&request, BACKFILL_CREATE, &data, target);
	request.options = *options;
	request.query_off = task_add(&data, text);
	run_task(&request, &data, &answer);
	return answer.result_target;
}

/*
 * The view of a shard group of distributed view managed_by into target,
 * its shard of the distributed target, created concurrently: a node's part
 * of the distributed create (citus/node.c).  Returns the rows written.
 */
int64
ops_create_shard_view_concurrently(const char *target, const char *managed_by)
{
	ConcurrentTask request;
	ConcurrentTask answer;
	StringInfoData data;

	concurrent_check_caller("delta_join._backfill_node()");
	task_init(&request, BACKFILL_CREATE, &data, target);
	request.managed_by_off = task_add(&data, managed_by);
	run_task(&request, &data, &answer);
	return answer.result_rows;
}

/*
 * create_view(target, query, ..., concurrently => true) on a Citus
 * coordinator, of a query over distributed tables: the steps are the Citus
 * layer's (concurrent_citus), run in the process as a create's are.
 */
Oid
ops_create_distributed_concurrently(const char *target, const char *text,
									const char *strategy, Jsonb *options_json,
									DeltaOptions *options)
{
	ConcurrentTask request;
	ConcurrentTask answer;
	StringInfoData data;

	concurrent_check_caller("delta_join.create_view(..., concurrently => true)");
	task_init(&request, BACKFILL_CREATE, &data, target);
	request.distributed = true;
	request.options = *options;
	request.query_off = task_add(&data, text);
	if (strategy != NULL)
		request.strategy_off = task_add(&data, strategy);
	if (options_json != NULL)
		request.options_json_off = task_add(&data, JsonbToCString(NULL, &options_json->root, 0));
	run_task(&request, &data, &answer);
	return answer.result_target;
}

/* refresh(target, concurrently => true) of a view of this node */
uint64
ops_refresh_view_concurrently(const char *target)
{
	ConcurrentTask request;
	ConcurrentTask answer;
	StringInfoData data;

	concurrent_check_caller("delta_join.refresh(target, concurrently => true)");
	task_init(&request, BACKFILL_REFRESH, &data, target);
	run_task(&request, &data, &answer);
	return (uint64) answer.result_rows;
}

/* ----------------------------------------------------------------
 *		The background worker
 * ----------------------------------------------------------------
 */

/*
 * Take the caller's pinned settings and search_path for this session, and
 * the transactions its steps need
 */
static void
take_caller_settings(ConcurrentTask *task)
{
	Jsonb	   *settings;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *name = NULL;

	StartTransactionCommand();
	settings = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
												  CStringGetDatum(task->data + task->settings_off)));
	it = JsonbIteratorInit(&settings->root);
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			name = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && name != NULL)
			SetConfigOption(name, pnstrdup(v.val.string.val, v.val.string.len),
							PGC_USERSET, PGC_S_SESSION);
	}
	SetConfigOption("search_path", task->data + task->search_path_off,
					PGC_USERSET, PGC_S_SESSION);

	/*
	 * This process logged in anew, so it took the defaults that ALTER
	 * DATABASE or ALTER ROLE ... SET give, which the caller's session may
	 * have set otherwise: its steps must write (a read-only caller is
	 * refused, concurrent_check_caller) and take snapshots of their own,
	 * which only READ COMMITTED allows.  A database whose default is
	 * SERIALIZABLE refused a caller that runs READ COMMITTED, naming the
	 * isolation level it does not use.
	 */
	SetConfigOption("default_transaction_isolation", "read committed",
					PGC_USERSET, PGC_S_SESSION);
	SetConfigOption("default_transaction_read_only", "off", PGC_USERSET, PGC_S_SESSION);

	/*
	 * The caller's lock_timeout bounds every lock wait of the steps, the
	 * wait for writers (step 2) included, as it bounds those of CREATE
	 * INDEX CONCURRENTLY.
	 */
	SetConfigOption("lock_timeout", psprintf("%d", task->lock_timeout),
					PGC_USERSET, PGC_S_SESSION);

	/*
	 * This process is a member of the caller's lock group
	 * (dj_concurrent_main): it cannot lead a group of parallel workers of
	 * its own, which a parallel plan or index build would make.
	 */
	SetConfigOption("max_parallel_workers_per_gather", "0", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("max_parallel_maintenance_workers", "0", PGC_SUSET, PGC_S_OVERRIDE);
	CommitTransactionCommand();
}

/* Each step is a transaction of its own */
void
concurrent_begin_step(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
}

void
concurrent_end_step(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * The view registered in step 1, read again; an error if it is gone, or
 * DDL on a source put it in error
 */
static void
find_own_view(ViewRecord *view)
{
	if (!catalog_find_view(task_state.target, view) ||
		view->view_id != task_state.view_id || !view->backfilling || view->in_error)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta view %s was dropped or changed during its concurrent backfill",
						dj_message_name(task_state.name)),
				 errdetail("Another session dropped the view or its target, or DDL on a source put the view in error."),
				 errhint("delta_join.views shows whether the view is there; create it again once that session has ended.")));
}

/*
 * Lock the target registered in step 1 in mode, then read its view again
 * (find_own_view).  In this order because a DROP TABLE of the target, or
 * DROP SCHEMA ... CASCADE of its schema, that waited for this operation's
 * lock deletes the view's catalog row in its own transaction, without the
 * view lock (guard.c, sql_drop): a row read before the lock is granted may
 * name a table that is gone once it is.  Read after the lock (under a new
 * snapshot, as each catalog read takes one), the row is gone too, and the
 * operation fails as for any view dropped meanwhile.
 */
static void
lock_own_view(LOCKMODE mode, ViewRecord *view)
{
	LockRelationOid(task_state.target, mode);
	find_own_view(view);
}

/*
 * Step 2: wait for every transaction that holds a lock on a source (or a
 * partition of one) that keeps writers out of a SHARE lock -- the writers
 * that began before step 1.  The caller's transaction must not be one.
 */
static void
wait_for_writers(ConcurrentTask *task)
{
	ViewRecord	view;
	List	   *locktags = NIL;
	ListCell   *lc;

	concurrent_begin_step();
	progress_backfill_phase(task_state.view_id, BACKFILL_WAITING, -1);
	find_own_view(&view);
	foreach(lc, view.sources)
	{
		SourceRecord *src = lfirst(lc);
		List	   *rels = find_all_inheritors(src->relid, NoLock, NULL);
		ListCell   *lc2;

		foreach(lc2, rels)
		{
			LOCKTAG    *tag = palloc(sizeof(LOCKTAG));
			VirtualTransactionId *holders;

			SET_LOCKTAG_RELATION(*tag, MyDatabaseId, lfirst_oid(lc2));
			for (holders = GetLockConflicts(tag, ShareLock, NULL);
				 VirtualTransactionIdIsValid(*holders); holders++)
			{
				if (VirtualTransactionIdEquals(*holders, task->caller_vxid))
					ereport(ERROR,
							(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
							 errmsg("the transaction of the concurrent operation holds a lock on source \"%s\"",
									get_rel_name(lfirst_oid(lc2))),
							 errdetail("The backfill waits for the transactions that write the view's sources to end."),
							 errhint("Call it in a transaction of its own.")));
			}
			locktags = lappend(locktags, tag);
		}
	}
	PopActiveSnapshot();
	WaitForLockersMultiple(locktags, ShareLock, false);
	CommitTransactionCommand();
}

/*
 * Is the view registered in step 1 still there?  One dropped once active
 * (drop_view() in another session) has nothing to catch up with, though
 * its entry in shared memory stays until the worker forgets it.
 */
static bool
view_still_there(void)
{
	ViewRecord	view;
	bool		found;

	concurrent_begin_step();
	found = catalog_find_view(task_state.target, &view) &&
		view.view_id == task_state.view_id;
	concurrent_end_step();
	return found;
}

/*
 * Give the target of a view about to leave 'backfilling' for 'active' the
 * key and indexes it lacks.  The DDL guard does not ask for them while the
 * view is backfilling (a create makes them after its fill), so a DROP INDEX
 * that ran while the operation waited for writers, or that waited for the
 * fill's lock and ran once the fill committed, took one away.  The caller
 * holds a lock on the target that keeps the next DROP out until the view is
 * active, when the guard refuses it.
 */
static void
complete_target(ViewRecord *view)
{
	target_make_indexes(view->target, view_plan_load_to_fill(view));
}

/*
 * Step 4: make the view active, with its target whole, then wait until the
 * worker has applied what it held back (catching up), or the view is gone.
 */
static void
activate(void)
{
	XLogRecPtr	lsn;
	ViewRecord	view;

	/*
	 * A drop_view() or DDL on a source that waited for the fill's locks
	 * has taken the view away meanwhile: the operation fails, and leaves
	 * nothing (or, refreshed, the view in error), as before the fill.
	 */
	concurrent_begin_step();
	ops_lock_views();
	lock_own_view(AccessShareLock, &view);
	complete_target(&view);
	catalog_reset_view(task_state.view_id, InvalidXLogRecPtr);
	launcher_notify();
	concurrent_end_step();
	task_state.activated = true;
	lsn = XactLastCommitEnd;

	progress_backfill_phase(task_state.view_id, BACKFILL_CATCHING_UP, -1);
	ConditionVariablePrepareToSleep(&worker_shared->progress_cv);
	for (;;)
	{
		bool		done;

		LWLockAcquire(worker_shared->lock, LW_SHARED);
		{
			ViewStat   *stat = progress_find(MyDatabaseId, task_state.view_id, false);

			done = (stat == NULL || stat->in_error || stat->applied_lsn >= lsn);
		}
		LWLockRelease(worker_shared->lock);
		if (done || !view_still_there())
			break;
		(void) ConditionVariableTimedSleep(&worker_shared->progress_cv, 1000,
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
}

/*
 * Commit step 1, take step 2, and begin step 3 under a snapshot newer than
 * step 2's wait: the view read again into *view, its target locked against
 * other writers and a drop, the rows to come estimated.
 */
static void
next_steps(ConcurrentTask *task, ViewRecord *view)
{
	concurrent_end_step();
	task_state.registered = true;

	wait_for_writers(task);

	concurrent_begin_step();
	lock_own_view(ExclusiveLock, view);

	/*
	 * A snapshot taken after the lock: it sees the last batch the worker
	 * applied to the target before the view was held back (refresh), which
	 * the lock waited for.
	 */
	PopActiveSnapshot();
	PushActiveSnapshot(GetTransactionSnapshot());
	progress_backfill_phase(view->view_id, BACKFILL_FILLING,
							target_estimate_rows(view->query_view,
												 runas_target_owner(view->target),
												 view->settings));
}

/* create_view concurrently: the four steps */
static void
run_create(ConcurrentTask *task)
{
	Query	   *query;
	List	   *hints;
	ViewRecord	view;

	/* 1. register */
	concurrent_begin_step();
	launcher_ensure_slot();
	ops_lock_views();
	if (task->managed_by_off != 0)
	{
		/* a shard group's view: the query, options and settings of its definition */
		const char *managed_by = task->data + task->managed_by_off;
		DeltaOptions options;
		Jsonb	   *settings;

		query = concurrent_citus.shard_view_query(managed_by, task->data + task->target_off,
												  &hints, &options, &settings);
		task_state.target = ops_register_view(task->data + task->target_off, query, hints,
											  &options, settings, managed_by,
											  &task_state.view_id, &task_state.created);
	}
	else
	{
		query = query_parse(task->data + task->query_off, &hints);
		task_state.target = ops_register_view(task->data + task->target_off, query, hints,
											  &task->options, NULL, NULL,
											  &task_state.view_id, &task_state.created);
	}
	next_steps(task, &view);

	/* 3. fill; then the key and indexes of a target made in step 1 */
	task->result_rows = target_fill_counted(view.target, view.query_view, view.settings,
											view.view_id);
	if (task_state.created)
	{
		DeltaPlan  *plan = view_plan_load_to_fill(&view);

		progress_backfill_phase(view.view_id, BACKFILL_INDEXING, -1);
		target_make_indexes(view.target, plan);
	}
	concurrent_end_step();

	/* 4. active */
	activate();
	task->result_target = task_state.target;
}

/* refresh concurrently: the same steps, a difference written in step 3 */
static void
run_refresh(ConcurrentTask *task)
{
	ViewRecord	view;
	DeltaPlan  *plan;
	ApplyCounts counts;
	RunAs		runas;

	/* 1. register: the view held back from now on */
	concurrent_begin_step();
	launcher_ensure_slot();
	ops_lock_views();
	task_state.target = ops_lookup_view(task->data + task->target_off, &view,
										AccessShareLock);
	if (view.backfilling)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta view %s is being backfilled",
						dj_message_name(task->data + task->target_off)),
				 errhint("Wait for the concurrent create or refresh that runs (delta_join.progress) to end.")));
	/* before anything is registered: keys it cannot rebuild, say */
	(void) view_plan_load_to_fill(&view);
	task_state.view_id = view.view_id;
	task_state.was_error = view.in_error;
	catalog_set_backfilling(view.view_id);
	progress_backfill_begin(view.view_id, BACKFILL_REFRESH);
	launcher_notify();
	next_steps(task, &view);

	/*
	 * 3. the difference, into a target with its key and indexes: a create
	 * whose fill never ended left them unmade, and the DDL guard lets them
	 * be dropped while the view is backfilling
	 */
	plan = view_plan_load_to_fill(&view);
	target_validate(view.target, plan, true);
	target_make_indexes(view.target, plan);
	memset(&counts, 0, sizeof(counts));
	runas_begin_view(runas_target_owner(view.target), view.settings, &runas);
	apply_view_difference(&view, plan, &counts);
	runas_end(&runas);
	task->result_rows = counts.rows_upserted + counts.rows_deleted;
	progress_backfill_rows(view.view_id, task->result_rows);
	catalog_rewrite_sources(view.view_id, view_plan_source_records(plan));
	concurrent_end_step();

	/* 4. active */
	activate();
	task->result_target = task_state.target;
}

/* create_view concurrently of a distributed view: the Citus layer's steps */
static void
run_distributed(ConcurrentTask *task)
{
	Jsonb	   *options_json = NULL;

	if (task->options_json_off != 0)
		options_json = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
														  CStringGetDatum(task->data + task->options_json_off)));
	task->result_target =
		concurrent_citus.create_distributed(task->data + task->target_off,
											task->data + task->query_off,
											task->strategy_off != 0 ? task->data + task->strategy_off : NULL,
											options_json, &task->options);
}

/*
 * After a failure before step 4, in a new transaction: drop the view
 * registered (and the target made), or put the view refreshed back as it
 * was.  A view the create registered is dropped also when it is in error:
 * DDL on a source put it there meanwhile (a source dropped with CASCADE,
 * which drops its query too), and it was never active.  A view refreshed
 * that DDL put in error stays so, with the reason the DDL gave.
 */
static void
clean_up(ConcurrentTask *task, ErrorData *error)
{
	ViewRecord	view;

	if (task->distributed)
	{
		concurrent_citus.undo_distributed();
		return;
	}
	if (!task_state.registered || task_state.activated)
		return;
	concurrent_begin_step();
	ops_lock_views();
	LockRelationOid(task_state.target, AccessShareLock);	/* see lock_own_view */
	if (catalog_find_view(task_state.target, &view) &&
		view.view_id == task_state.view_id)
	{
		if (task->command == BACKFILL_CREATE && (view.backfilling || view.in_error))
			ops_drop_view(&view, task_state.created);
		else if (view.backfilling && task_state.was_error)
			(void) catalog_set_error(&view, error, false);
		else if (view.backfilling)
		{
			complete_target(&view);
			query_depend_on_extension(view.query_view);
			catalog_reset_view(view.view_id, InvalidXLogRecPtr);
		}
		launcher_notify();
	}
	concurrent_end_step();
}

/*
 * clean_up, whose own failure is logged and left to the apply worker: it
 * puts the view in error once this process has ended.
 */
static void
try_clean_up(ConcurrentTask *task, ErrorData *error)
{
	PG_TRY();
	{
		clean_up(task, error);
	}
	PG_CATCH();
	{
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
}

/*
 * At this process's exit, however it ends (finished, failed, terminated):
 * its operation no longer runs, and delta_join.progress no longer shows
 * it.  Before the exit callbacks of PostgreSQL's own (this one is
 * registered after them), so that the row is gone before the process
 * leaves pg_stat_activity, and its caller's wait, ends.  A FATAL error may
 * have come with the lock that guards the row held: it is released first,
 * as the abort of the transaction would.
 */
static void
end_progress(int code, Datum arg)
{
	LWLockReleaseAll();
	if (task_state.view_id != 0)
		progress_backfill_end(task_state.view_id);
}

/* The background worker's entry point: run one task, answer, end */
void
dj_concurrent_main(Datum main_arg)
{
	dsm_segment *seg;
	ConcurrentTask *task;

	pqsignal(SIGTERM, die);
	pqsignal(SIGINT, StatementCancelHandler);
	BackgroundWorkerUnblockSignals();

	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the caller of a concurrent create or refresh is gone")));
	task = dsm_segment_address(seg);

	/*
	 * Join the caller's lock group, as a parallel worker does, so that
	 * pg_blocking_pids() of the caller shows who holds up the backfill (a
	 * writer that began before it, a lock on the target).  The caller's
	 * transaction holds no lock that matters to the steps: it runs alone
	 * (concurrent_check_caller).
	 */
	if (!BecomeLockGroupMember(&ProcGlobal->allProcs[task->caller_pgprocno],
							   task->caller_pid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the caller of a concurrent create or refresh is gone")));

	/*
	 * Connect as the role the caller's session logged in as (the role it
	 * acts as may not log in: a SET ROLE to a group, a SECURITY DEFINER
	 * function's owner), then act as that role as the caller does: in a
	 * SECURITY DEFINER function, or a security-restricted operation (the
	 * index expression an ANALYZE computes), it stays there, and cannot
	 * SET ROLE back to the role that logged in.  (As SET ROLE would, it
	 * could: code of the caller's role, its casts, run by the create's
	 * analysis, could become a superuser whose session called it.)
	 */
	BackgroundWorkerInitializeConnectionByOid(task->dboid, task->login_roleid, 0);
	SetUserIdAndSecContext(task->roleid, task->sec_context | SECURITY_LOCAL_USERID_CHANGE);
	take_caller_settings(task);

	memset(&task_state, 0, sizeof(task_state));
	task_state.name = task->data + task->target_off;
	before_shmem_exit(end_progress, (Datum) 0);
	PG_TRY();
	{
		if (task->distributed)
			run_distributed(task);
		else if (task->command == BACKFILL_CREATE)
			run_create(task);
		else
			run_refresh(task);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(TopMemoryContext);
		error = CopyErrorData();

		/* a caller that was terminated takes no error: the server log does */
		if (BackendPidGetProc(task->caller_pid) == NULL)
			EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();

		/* the cleanup is not to be cancelled in turn, nor to time out */
		QueryCancelPending = false;
		SetConfigOption("lock_timeout", "0", PGC_USERSET, PGC_S_SESSION);
		HOLD_CANCEL_INTERRUPTS();
		try_clean_up(task, error);
		RESUME_CANCEL_INTERRUPTS();

		task->sqlerrcode = error->sqlerrcode;
		dj_text_copy(task->message, error->message ? error->message : "unknown error",
					 TASK_TEXT_LEN);
		dj_text_copy(task->detail, error->detail ? error->detail : "", TASK_TEXT_LEN);
		dj_text_copy(task->hint, error->hint ? error->hint : "", TASK_TEXT_LEN);
	}
	PG_END_TRY();
	task->finished = true;
	dsm_detach(seg);
	proc_exit(0);
}
