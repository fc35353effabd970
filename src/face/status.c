/*-------------------------------------------------------------------------
 *
 * status.c
 *	  delta_join.wait(), and what delta_join.status reads: delta_join._stat(),
 *	  delta_join._database_state() and delta_join._database_wait(), from the
 *	  progress the apply workers publish in shared memory (base/progress.c).
 *
 * wait() and chains of views: a view whose source is another view's target
 * (view B reads the target of view A) is fresh only once A's writes of the
 * changes before the call are applied to B too, and those writes commit
 * after the call.  wait() therefore waits in rounds, as many as the longest
 * chain among the views it waits for: each round for every change
 * committed before it started.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "access/xlogrecovery.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "replication/slot.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/pg_lsn.h"
#include "utils/regproc.h"
#include "utils/timestamp.h"

#include "analysis/view_plan.h"
#include "ops/views.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"
#include "citus/distributed.h"
#include "base/compat.h"
#include "base/delta_join.h"
#include "base/progress.h"
#include "base/shmem.h"
#include "capture/decoding.h"
#include "process/launcher.h"

PG_FUNCTION_INFO_V1(dj_wait);
PG_FUNCTION_INFO_V1(dj_stat);
PG_FUNCTION_INFO_V1(dj_additive);
PG_FUNCTION_INFO_V1(dj_database_state);
PG_FUNCTION_INFO_V1(dj_database_wait);
PG_FUNCTION_INFO_V1(dj_progress);

/* A timeout longer than this is no timeout (and cannot overflow) */
#define WAIT_FOREVER_MS		INT64CONST(1000000000000)

/*
 * The most WAL wait() reads to learn that the worker's batch holds all it
 * waits for (decoding_last_xact_end): more costs it more than the next
 * batch would
 */
#define WAIT_READ_MAX_BYTES		(64 * 1024 * 1024)
#define WAIT_LOCK_POLL_MS		10	/* between two tries of the catalog's lock */

/* An interval as milliseconds, at least 0, at most WAIT_FOREVER_MS */
static int64
interval_ms(Interval *interval)
{
	double		usecs = (double) interval->time +
		(double) interval->day * USECS_PER_DAY +
		(double) interval->month * DAYS_PER_MONTH * USECS_PER_DAY;

	if (usecs <= 0)
		return 0;
	if (usecs / 1000.0 >= (double) WAIT_FOREVER_MS)
		return WAIT_FOREVER_MS;
	return (int64) (usecs / 1000.0);
}

/*
 * The views connected to `start` through targets read as sources, in
 * either direction (start included); and in *rounds the number of views of
 * the longest chain among them, bounded by their number.
 */
static List *
chain_of(List *views, ViewRecord *start, int *rounds)
{
	List	   *component = list_make1(start);
	int			depth;
	ListCell   *lc;

	for (int i = 0; i < list_length(component); i++)
	{
		ViewRecord *a = list_nth(component, i);

		foreach(lc, views)
		{
			ViewRecord *b = lfirst(lc);

			if (!list_member_ptr(component, b) &&
				(view_plan_reads(b, a->target) || view_plan_reads(a, b->target)))
				component = lappend(component, b);
		}
	}

	/* longest chain: relax "depth(b) > depth(a) when b reads a's target" */
	depth = 1;
	{
		int			n = list_length(component);
		int		   *d = palloc(sizeof(int) * n);

		for (int i = 0; i < n; i++)
			d[i] = 1;
		for (int pass = 0; pass < n; pass++)
		{
			for (int i = 0; i < n; i++)
				for (int j = 0; j < n; j++)
				{
					ViewRecord *a = list_nth(component, i);
					ViewRecord *b = list_nth(component, j);

					if (view_plan_reads(b, a->target) && d[j] < d[i] + 1 && d[i] < n)
						d[j] = d[i] + 1;
				}
		}
		for (int i = 0; i < n; i++)
			depth = Max(depth, d[i]);
	}
	*rounds = depth;
	return component;
}

/*
 * Take out of *views, and return, those the predicate picks from what the
 * catalog, read now (a fresh snapshot), holds of each: its record, or
 * NULL for a view dropped since wait() read it.
 */
static List *
take_views(List **views, bool (*take) (ViewRecord *current))
{
	List	   *live = catalog_list_views();
	List	   *taken = NIL;
	ListCell   *lc;

	foreach(lc, *views)
	{
		ViewRecord *waited = lfirst(lc);

		if (take(catalog_view_in(live, waited->view_id)))
		{
			taken = lappend(taken, waited);
			*views = foreach_delete_current(*views, lc);
		}
	}
	return taken;
}

/*
 * A view the catalog has in error, or left 'backfilling' by a concurrent
 * create or refresh whose process is gone (the worker puts it in error
 * when it sees it; its target may be empty).
 */
static bool
now_in_error(ViewRecord *current)
{
	return current != NULL &&
		(current->in_error ||
		 (current->backfilling && !progress_backfill_running(MyDatabaseId, current->view_id)));
}

/* The views of *views in error (now_in_error), taken out of it */
static List *
take_in_error(List **views)
{
	return take_views(views, now_in_error);
}

/* The error of check_lock_against_apply: relid is held in mode */
static void
lock_against_apply_error(Oid relid, LOCKMODE mode)
{
	char	   *name = get_rel_name(relid);

	ereport(ERROR,
			(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
			 errmsg("delta_join.wait() would wait for its own transaction"),
			 errdetail("This transaction holds %s on table \"%s\", which the apply worker needs to apply the changes waited for.",
					   GetLockmodeName(DEFAULT_LOCKMETHOD, mode),
					   name ? name : "?"),
			 errhint("Call delta_join.wait() before taking the lock, or in another transaction.")));
}

/*
 * Does this transaction hold a lock that applying one of the views, which
 * the worker retries, waits for -- its target in SHARE mode or stronger
 * (apply writes it in ROW EXCLUSIVE mode), or one of its sources in ACCESS
 * EXCLUSIVE mode (apply reads it)?  The worker would wait for this
 * transaction to end, and this transaction for the worker, a deadlock that
 * PostgreSQL cannot see: the worker gives up on each lock after a second
 * and tries again later.  Raises the error that says so.  (A view with
 * nothing to apply needs no lock: only a view the worker retries is
 * known to need them.)
 */
static void
check_lock_against_apply(List *views)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		LOCKTAG		tag;
		ListCell   *sc;

		SET_LOCKTAG_RELATION(tag, MyDatabaseId, view->target);
		for (LOCKMODE mode = ShareLock; mode <= AccessExclusiveLock; mode++)
		{
			if (LockHeldByMe_compat(&tag, mode))
				lock_against_apply_error(view->target, mode);
		}
		foreach(sc, view->sources)
		{
			SourceRecord *source = lfirst(sc);

			SET_LOCKTAG_RELATION(tag, MyDatabaseId, source->relid);
			if (LockHeldByMe_compat(&tag, AccessExclusiveLock))
				lock_against_apply_error(source->relid, AccessExclusiveLock);
		}
	}
}

/*
 * Does the apply worker (pid) wait for a lock this transaction holds -- a
 * row of a target it locked, say?  Then it waits for us, and we for it.  It
 * gives up each lock after a second and tries again later, so this sees it
 * only while it waits: a check to repeat, which never errs the other way
 * (we hold what we hold until wait() returns).
 */
static bool
worker_waits_for_me(int pid)
{
	ArrayType  *blockers;
	Datum	   *pids;
	int			npids;

	if (pid == 0)
		return false;
	blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids, Int32GetDatum(pid)));
	deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &pids, NULL, &npids);
	for (int i = 0; i < npids; i++)
	{
		if (DatumGetInt32(pids[i]) == MyProcPid)
			return true;
	}
	return false;
}

/*
 * A view dropped since wait() read it: it has nothing left to wait for.
 * The worker forgets a dropped view's progress, and with the last view
 * drops the slot, so without this such a view would be waited for until
 * the timeout, or taken for a view that missed changes.
 */
static bool
now_dropped(ViewRecord *current)
{
	return current == NULL;
}

/* Whether this database's replication slot exists */
static bool
slot_present(void)
{
	char		slot[NAMEDATALEN];

	launcher_slot_name(slot, MyDatabaseId);
	return SearchNamedReplicationSlot(slot, true) != NULL;
}

/*
 * Wait until every view of *views has applied what was committed before
 * target_lsn (returns true), or the deadline passes (false; 0: no
 * deadline).  A view that goes to error meanwhile is not waited for: it is
 * taken out of *views, and *errors is set.  A view that a concurrent create
 * or refresh fills is waited for until that has ended.
 */
static bool
wait_round(List **views, XLogRecPtr target_lsn, TimestampTz deadline, bool *errors)
{
	Latch	   *worker_latch = NULL;
	TimestampTz started = GetCurrentTimestamp();
	bool		done = false;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	{
		DbWorker   *db = shmem_find_db(MyDatabaseId, false);

		if (db != NULL && db->pid != 0)
			worker_latch = db->latch;
	}
	LWLockRelease(worker_shared->lock);
	if (worker_latch != NULL)
		SetLatch(worker_latch);

	ConditionVariablePrepareToSleep(&worker_shared->progress_cv);
	for (;;)
	{
		bool		in_error = false;
		bool		forgotten = false;	/* a pending view the worker does
										 * not know (dropped?) */
		bool		slot;
		long		sleep_ms = 1000;
		List	   *pending = NIL;	/* views not fresh yet */
		List	   *retried = NIL;	/* of them, those the worker retries */
		int			worker_pid = 0;
		ListCell   *lc;

		done = true;
		LWLockAcquire(worker_shared->lock, LW_SHARED);
		{
			DbWorker   *db = shmem_find_db(MyDatabaseId, false);

			if (db != NULL)
				worker_pid = db->pid;
		}
		foreach(lc, *views)
		{
			ViewRecord *view = lfirst(lc);
			ViewStat   *stat = progress_find(MyDatabaseId, view->view_id, false);

			if (stat != NULL && stat->in_error)
				in_error = true;

			/*
			 * A concurrent create or refresh runs: the worker holds the
			 * view's changes back until its fill is done, and the target
			 * may be empty meanwhile, whatever the applied position says
			 */
			if (stat != NULL && stat->backfill_pid != 0)
			{
				done = false;
				continue;
			}
			if (view->applied_lsn >= target_lsn)
				continue;
			if (stat != NULL && stat->applied_lsn >= target_lsn)
				continue;
			done = false;
			pending = lappend(pending, view);
			if (stat == NULL)
				forgotten = true;
			if (stat != NULL && stat->retry_reason[0] != '\0')
				retried = lappend(retried, view);
		}
		LWLockRelease(worker_shared->lock);

		if (done)
			break;

		/* views dropped meanwhile are done with (now_dropped) */
		slot = slot_present();
		if ((forgotten || !slot) && take_views(views, now_dropped) != NIL)
		{
			list_free(retried);
			list_free(pending);
			continue;
		}

		/*
		 * The database's slot is gone (dropped by hand; a copy, a restore,
		 * a promoted standby, which have none): nothing applies the views
		 * until refresh() makes it again, and they have missed changes.  As
		 * for a view in error, do not wait for ever.  (A slot being made is
		 * there already, ephemeral.)
		 */
		if (!slot)
		{
			*errors = true;
			list_free(retried);
			list_free(pending);
			break;
		}
		check_lock_against_apply(retried);

		/*
		 * Whether the worker waits for us takes every lock partition's lock
		 * (as the deadlock detector does): look only once this wait has
		 * lasted deadlock_timeout, as it does, not at every short wait().
		 */
		if (TimestampDifferenceExceeds(started, GetCurrentTimestamp(), DeadlockTimeout) &&
			worker_waits_for_me(worker_pid))
		{
			/* the lock it waits for, if we can name it; else just that */
			check_lock_against_apply(pending);
			ereport(ERROR,
					(errcode(ERRCODE_T_R_DEADLOCK_DETECTED),
					 errmsg("delta_join.wait() would wait for its own transaction"),
					 errdetail("The apply worker waits for a lock this transaction holds, to apply the changes waited for."),
					 errhint("Call delta_join.wait() before taking the lock, or in another transaction.")));
		}
		list_free(retried);
		list_free(pending);

		/*
		 * The worker publishes an error after committing it, but a flag left
		 * from before a refresh is only cleared once it has re-read the
		 * catalog: believe the catalog, read with a fresh snapshot.
		 */
		if (in_error && take_in_error(views) != NIL)
		{
			*errors = true;
			continue;
		}
		if (deadline != 0)
		{
			TimestampTz now = GetCurrentTimestamp();

			if (now >= deadline)
				break;
			sleep_ms = Min(sleep_ms, TimestampDifferenceMilliseconds(now, deadline));
		}
		(void) ConditionVariableTimedSleep(&worker_shared->progress_cv, Max(sleep_ms, 1),
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	return done;
}

/*
 * Lock the catalog of views for wait()'s reads, before the first: held by
 * an ALTER EXTENSION UPDATE or a LOCK TABLE, it would keep the call
 * waiting past its timeout (3.6 to 5.5 s for a wait of 2 s), as the
 * reads' own lock waits for as long as the holder keeps it.  Returns false
 * when the deadline (0: none) passes first.  The lock stays until the
 * call's transaction ends, as the reads' own would.
 */
static bool
wait_lock_catalog(TimestampTz deadline)
{
	Oid			relid = catalog_relid("view_catalog");

	if (!OidIsValid(relid))
		return true;			/* the reads say what is wrong */
	if (deadline == 0)
	{
		LockRelationOid(relid, AccessShareLock);
		return true;
	}
	while (!ConditionalLockRelationOid(relid, AccessShareLock))
	{
		TimestampTz now = GetCurrentTimestamp();

		if (now >= deadline)
			return false;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 Min(WAIT_LOCK_POLL_MS, TimestampDifferenceMilliseconds(now, deadline) + 1),
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	return true;
}

/*
 * delta_join.wait(target text, timeout interval) returns boolean
 *
 * Blocks until every change committed before the call has been applied to
 * the view (target given) or to every view of the database (target NULL),
 * and to the views chained to them, and returns true.  Returns false when
 * the timeout passes first (a NULL timeout waits without limit), or when
 * one of those views is in error: its changes are not being applied
 * (delta_join.status says why).  The others are waited for all the same,
 * so that a view in error somewhere does not make wait() on every view
 * return before the healthy ones are fresh.
 */
Datum
dj_wait(PG_FUNCTION_ARGS)
{
	int64		timeout_ms = PG_ARGISNULL(1) ? WAIT_FOREVER_MS :
		interval_ms(PG_GETARG_INTERVAL_P(1));
	TimestampTz deadline = 0;
	List	   *views;
	List	   *waited;
	int			rounds = 1;
	bool		done = true;
	bool		errors = false;
	ListCell   *lc;

	ops_check_primary("wait");

	/*
	 * A transaction block whose snapshot is fixed took it before this call:
	 * what the worker applies while we wait stays invisible to the rest of
	 * it, and a true would promise reads it cannot make.  (Alone, the call
	 * is its own transaction, and the next one sees what it waited for.)
	 */
	if (IsolationUsesXactSnapshot() && IsTransactionBlock())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delta_join.wait() cannot be called in a REPEATABLE READ or SERIALIZABLE transaction block"),
				 errdetail("The transaction's snapshot was taken before the call, so the rest of the transaction would not see what was applied while it waited."),
				 errhint("Call delta_join.wait() before BEGIN, or use READ COMMITTED.")));
	if (timeout_ms < WAIT_FOREVER_MS)
		deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
	if (!wait_lock_catalog(deadline))
		PG_RETURN_BOOL(false);
	shmem_check();
	catalog_require_version();
	views = catalog_list_views();
	waited = views;

	if (!PG_ARGISNULL(0))
	{
		char	   *name = text_to_cstring(PG_GETARG_TEXT_PP(0));
		RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList_compat(name));
		Oid			relid = RangeVarGetRelid(rv, NoLock, true);
		ViewRecord *start = NULL;

		foreach(lc, views)
		{
			if (((ViewRecord *) lfirst(lc))->target == relid)
				start = lfirst(lc);
		}
		if (start == NULL)
		{
			int			distributed = distributed_wait(name, timeout_ms);

			if (distributed >= 0)
				PG_RETURN_BOOL(distributed == 1);
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("%s is not a delta view", dj_message_name(name)),
					 errhint("The view delta_join.views lists the delta views.")));
		}
		waited = chain_of(views, start, &rounds);
	}
	else
	{
		foreach(lc, views)
		{
			int			depth;

			(void) chain_of(views, lfirst(lc), &depth);
			rounds = Max(rounds, depth);
		}
	}

	waited = list_copy(waited);
	foreach(lc, waited)
	{
		ViewRecord *view = lfirst(lc);

		/* (a source that Citus now distributes: the worker puts it in error) */
		if (view->in_error || OidIsValid(citus_source_of(view->sources)))
		{
			errors = true;
			waited = foreach_delete_current(waited, lc);
		}
	}
	if (waited == NIL)
		PG_RETURN_BOOL(!errors &&
					   (PG_ARGISNULL(0) ? distributed_wait(NULL, timeout_ms) != 0 : true));

	for (int round = 0; round < rounds && done; round++)
	{
		/* what we wait for must be flushed for the worker to read it */
		XLogRecPtr	target_lsn = progress_wal_position_now();
		XLogRecPtr	reading = progress_reading(MyDatabaseId);

		XLogFlush(target_lsn);

		/*
		 * Past where the worker reads to, the WAL may hold nothing but its
		 * own writes: then the batch it makes is enough (decoding.c)
		 */
		if (!XLogRecPtrIsInvalid(reading))
			target_lsn = decoding_last_xact_end(reading, target_lsn, WAIT_READ_MAX_BYTES);
		done = wait_round(&waited, target_lsn, deadline, &errors);
	}

	/* an error of the wait: read the catalog again, with a fresh snapshot */
	if (done && (errors || take_in_error(&waited) != NIL))
		done = false;

	/* on a coordinator, wait() waits for the distributed views too */
	if (done && PG_ARGISNULL(0) && distributed_wait(NULL, timeout_ms) == 0)
		done = false;
	PG_RETURN_BOOL(done);
}

/* ----------------------------------------------------------------
 *		Status
 * ----------------------------------------------------------------
 */

/*
 * The views of this database whose target's owner the caller can act as:
 * those whose retry reasons it may read (they quote errors, which may
 * quote rows).
 */
static List *
views_of_caller(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(GetUserId())};
	List	   *view_ids = NIL;

	SPI_connect();
	if (catalog_exec("SELECT v.view_id FROM delta_join.view_catalog v"
					 " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) v.target"
					 " WHERE pg_catalog.pg_has_role($1, c.relowner, 'USAGE')",
					 1, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read delta_join.view_catalog");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		int			view_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i],
														  SPI_tuptable->tupdesc, 1, &isnull));
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		view_ids = lappend_int(view_ids, view_id);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return view_ids;
}

/*
 * delta_join._stat() returns the counters of this database's views from
 * shared memory, one row per view the worker has seen.  Any role may call
 * it (delta_join.status does, as the role reading it): retry_reason is
 * NULL but for the views whose target's owner the caller can act as.
 *
 * applied_commit_time is the commit time of the newest change applied, and
 * NULL once the view has caught up with all WAL written (so that the lag
 * delta_join.status derives from it is zero then).
 */
Datum
dj_stat(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	XLogRecPtr	now_lsn = RecoveryInProgress() ? GetXLogReplayRecPtr(NULL) : progress_wal_position_now();
	List	   *readable;

	shmem_check();
	readable = views_of_caller();
	InitMaterializedSRF(fcinfo, 0);

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];
		Datum		values[12];
		bool		nulls[12];

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
		values[10] = CStringGetTextDatum(stat->retry_reason);
		nulls[10] = (stat->retry_reason[0] == '\0' ||
					 !list_member_int(readable, stat->view_id));
		values[11] = TimestampTzGetDatum(stat->counts.recomputed_at);
		nulls[11] = (stat->counts.recomputed_at == 0);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(worker_shared->lock);

	return (Datum) 0;
}

/*
 * delta_join._additive(view_id) (from 0.2): is the view of this database
 * an aggregate over joins that the worker keeps by adding each batch to
 * its groups (apply_additive.c), as of its last apply?  What
 * delta_join.status says in its mode; false until the worker applied it.
 */
Datum
dj_additive(PG_FUNCTION_ARGS)
{
	ViewStat   *stat;
	bool		additive;

	shmem_check();
	LWLockAcquire(worker_shared->lock, LW_SHARED);
	stat = progress_find(MyDatabaseId, PG_GETARG_INT32(0), false);
	additive = stat != NULL && stat->counts.additive;
	LWLockRelease(worker_shared->lock);
	PG_RETURN_BOOL(additive);
}

/*
 * delta_join._database_state() returns the pid of this database's apply
 * worker (NULL when none runs), whether its slot exists, and whether shared
 * memory has room for one more view.
 */
Datum
dj_database_state(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	Datum		values[4];
	bool		nulls[4] = {false, false, false, false};
	char		slot[NAMEDATALEN];
	char		failure[PROGRESS_REASON_LEN] = "";
	pid_t		pid = 0;

	shmem_check();
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	{
		DbWorker   *db = shmem_find_db(MyDatabaseId, false);

		if (db != NULL)
		{
			pid = db->pid;
			strlcpy(failure, db->failure, sizeof(failure));
		}
	}
	LWLockRelease(worker_shared->lock);

	launcher_slot_name(slot, MyDatabaseId);
	values[0] = Int32GetDatum((int32) pid);
	nulls[0] = (pid == 0);
	values[1] = BoolGetDatum(SearchNamedReplicationSlot(slot, true) != NULL);
	values[2] = BoolGetDatum(progress_room());
	values[3] = CStringGetTextDatum(failure);
	nulls[3] = (failure[0] == '\0');
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(desc, values, nulls)));
}

/*
 * delta_join._database_wait() returns why no view of this database can be
 * applied now, whatever its own state, or NULL: the library does not run
 * the version of the extension's SQL objects installed here
 * (catalog_version_problem), or the database's slot is being created and
 * waits for transactions to end (launcher_slot_wait_reason).
 * delta_join.status gives it as the reason of every view.
 */
Datum
dj_database_wait(PG_FUNCTION_ARGS)
{
	char	   *reason = catalog_version_problem();

	if (reason == NULL && !RecoveryInProgress())
		reason = launcher_slot_wait_reason();
	if (reason == NULL)
		PG_RETURN_NULL();
	PG_RETURN_TEXT_P(cstring_to_text(reason));
}

/*
 * _progress() RETURNS SETOF (view_id, pid, command, phase, rows_done,
 * rows_expected, started): the concurrent creates and refreshes of this
 * database's views that run now (ops/concurrent.c), read from shared
 * memory; delta_join.progress names their targets.
 */
Datum
dj_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	static const char *const commands[] = {"create_view concurrently", "refresh concurrently"};
	static const char *const phases[] = {"registering", "waiting for writers",
	"backfilling", "building indexes", "catching up"};

	shmem_check();
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(worker_shared->lock, LW_SHARED);
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];
		Datum		values[7];
		bool		nulls[7] = {false};

		if (stat->dboid != MyDatabaseId || stat->backfill_pid == 0)
			continue;
		values[0] = Int32GetDatum(stat->view_id);
		values[1] = Int32GetDatum(stat->backfill_pid);
		values[2] = CStringGetTextDatum(commands[stat->backfill_command]);
		values[3] = CStringGetTextDatum(phases[stat->backfill_phase]);
		values[4] = Int64GetDatum(stat->backfill_rows_done);
		values[5] = Int64GetDatum(stat->backfill_rows_expected);
		nulls[5] = (stat->backfill_rows_expected < 0);
		values[6] = TimestampTzGetDatum(stat->backfill_started);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(worker_shared->lock);
	return (Datum) 0;
}
