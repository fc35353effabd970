/*-------------------------------------------------------------------------
 *
 * progress.c
 *	  How far each view is applied, and its counters, in shared memory:
 *	  published by the apply worker after each batch (progress_publish,
 *	  progress_advance), reserved for a view by create_view, and read by
 *	  delta_join.wait() and delta_join.status (face/status.c).
 *
 * The entries live in WorkerShared.views (shmem.h), one per view of any
 * database, delta_join.max_views of them; WorkerShared.lock protects them.
 * progress_cv is broadcast whenever the worker publishes; wait() sleeps on
 * it.
 *
 * IDENTIFICATION
 *	  src/base/progress.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "miscadmin.h"
#include "storage/procarray.h"
#include "utils/syscache.h"

#include "base/delta_join.h"
#include "base/progress.h"
#include "base/shmem.h"

static bool backfill_alive(ViewStat *stat);

/* ----------------------------------------------------------------
 *		Publishing (apply worker; the find functions expect the lock held)
 * ----------------------------------------------------------------
 */

/* The ViewStat of a view, made if asked and there is room.  Lock held. */
ViewStat *
progress_find(Oid dboid, int view_id, bool create)
{
	ViewStat   *free_entry = NULL;

	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

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

/*
 * Free the entries of databases that no longer exist.  The worker of a
 * database frees the entries of its dropped views (progress_publish), but
 * a database dropped with its views has no worker left to do it.  The
 * catalog is read without the lock held: a database found gone stays gone.
 */
static void
forget_dropped_databases(void)
{
	List	   *known = NIL;
	List	   *gone = NIL;
	ListCell   *lc;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		Oid			dboid = worker_shared->views[i].dboid;

		if (OidIsValid(dboid) && dboid != MyDatabaseId)
			known = list_append_unique_oid(known, dboid);
	}
	LWLockRelease(worker_shared->lock);

	foreach(lc, known)
	{
		if (!SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(lfirst_oid(lc))))
			gone = lappend_oid(gone, lfirst_oid(lc));
	}
	list_free(known);
	if (gone == NIL)
		return;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

		if (list_member_oid(gone, stat->dboid))
			stat->dboid = InvalidOid;
	}
	LWLockRelease(worker_shared->lock);
	list_free(gone);
}

/* Is there room in shared memory for one more view? */
bool
progress_room(void)
{
	bool		room = false;

	forget_dropped_databases();
	LWLockAcquire(worker_shared->lock, LW_SHARED);
	for (int i = 0; i < worker_shared->max_views && !room; i++)
		room = (worker_shared->views[i].dboid == InvalidOid);
	LWLockRelease(worker_shared->lock);
	return room;
}

/*
 * Take an entry for a view being created (view_id, in this transaction):
 * a free one, or one of this database's views that live_view_ids (the
 * views this transaction sees) no longer has.  False when there is none.
 * The worker does not give the entry away while this transaction runs.
 */
bool
progress_reserve(int view_id, List *live_view_ids)
{
	ViewStat   *found = NULL;

	forget_dropped_databases();
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);

	/* an entry left by a view of the same number (the extension created again) */
	for (int i = 0; i < worker_shared->max_views && found == NULL; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

		if (stat->dboid == MyDatabaseId && stat->view_id == view_id)
			found = stat;
	}
	for (int i = 0; i < worker_shared->max_views && found == NULL; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

		if (stat->dboid == InvalidOid ||
			(stat->dboid == MyDatabaseId &&
			 !list_member_int(live_view_ids, stat->view_id) &&
			 !(TransactionIdIsValid(stat->reserving_xid) &&
			   TransactionIdIsInProgress(stat->reserving_xid))))
			found = stat;
	}
	if (found != NULL)
	{
		memset(found, 0, sizeof(ViewStat));
		found->dboid = MyDatabaseId;
		found->view_id = view_id;
		found->reserving_xid = GetTopTransactionId();
	}
	LWLockRelease(worker_shared->lock);
	return found != NULL;
}

/*
 * Bring the database's entries in line with its views as the worker just
 * read them (views: all of them; entries of others are forgotten) and with
 * what the batch ending at end_lsn (InvalidXLogRecPtr: no batch) did for
 * each.  Wakes wait().
 */
void
progress_publish(Oid dboid, ViewProgress *views, int nviews, XLogRecPtr end_lsn)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);

	/* forget dropped views */
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];
		bool		found = false;

		if (stat->dboid != dboid)
			continue;
		for (int v = 0; v < nviews && !found; v++)
			found = (views[v].view_id == stat->view_id);
		if (found)
			stat->reserving_xid = InvalidTransactionId;
		else if ((!TransactionIdIsValid(stat->reserving_xid) ||
				  !TransactionIdIsInProgress(stat->reserving_xid)) &&
				 !backfill_alive(stat))
			stat->dboid = InvalidOid;
	}

	for (int v = 0; v < nviews; v++)
	{
		ViewProgress *vp = &views[v];
		ViewStat   *stat = progress_find(dboid, vp->view_id, true);

		if (stat == NULL)
			continue;			/* no room: delta_join.status says so */
		stat->in_error = vp->in_error;
		if (!stat->in_error)
		{
			if (stat->applied_lsn < vp->catalog_lsn)
				stat->applied_lsn = vp->catalog_lsn;
			if (!XLogRecPtrIsInvalid(end_lsn) && !vp->deferred &&
				stat->applied_lsn < end_lsn)
				stat->applied_lsn = end_lsn;
		}
		/*
		 * A reason is a deferred view's: none once it no longer waits.  That
		 * it dropped its keys comes first, where the length never cuts it.
		 */
		if (vp->deferred)
		{
			char		reason[PROGRESS_REASON_LEN + 64];

			snprintf(reason, sizeof(reason), "%s%s",
					 vp->whole ? "to be recomputed whole (over max_waiting_keys): " : "",
					 vp->retry_reason);
			dj_text_copy(stat->retry_reason, reason, PROGRESS_REASON_LEN);
		}
		else
			stat->retry_reason[0] = '\0';
		stat->changes_seen += vp->changes;
		if (vp->applied)
		{
			stat->counts.keys_applied += vp->counts.keys_applied;
			stat->counts.rows_upserted += vp->counts.rows_upserted;
			stat->counts.rows_deleted += vp->counts.rows_deleted;
			stat->counts.rows_unchanged += vp->counts.rows_unchanged;
			stat->counts.lookups += vp->counts.lookups;
			stat->counts.cache_hits += vp->counts.cache_hits;
			if (stat->counts.recomputed_at < vp->counts.recomputed_at)
				stat->counts.recomputed_at = vp->counts.recomputed_at;
			stat->counts.additive = vp->counts.additive;
			if (stat->applied_commit_time < vp->commit_time)
				stat->applied_commit_time = vp->commit_time;
		}
	}
	LWLockRelease(worker_shared->lock);

	ConditionVariableBroadcast(&worker_shared->progress_cv);
}

/*
 * WAL up to end_lsn was read and had no change for any view: every view
 * not in error and not waiting for another try is as fresh as that.
 */
void
progress_advance(Oid dboid, XLogRecPtr end_lsn)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < worker_shared->max_views; i++)
	{
		ViewStat   *stat = &worker_shared->views[i];

		if (stat->dboid == dboid && !stat->in_error &&
			stat->retry_reason[0] == '\0' && stat->applied_lsn < end_lsn)
			stat->applied_lsn = end_lsn;
	}
	LWLockRelease(worker_shared->lock);
	ConditionVariableBroadcast(&worker_shared->progress_cv);
}

/* ----------------------------------------------------------------
 *		Concurrent create and refresh (delta_join.progress)
 * ----------------------------------------------------------------
 */

/*
 * Does a process run the concurrent operation of the entry's view?  Its
 * entry is kept while it does, even before the worker has seen the view
 * (the worker forgets the entries of views it does not know).  Lock held.
 */
static bool
backfill_alive(ViewStat *stat)
{
	return stat->backfill_pid != 0 && BackendPidGetProc(stat->backfill_pid) != NULL;
}

/* This process's entry of the view, made if it is gone; lock held */
static ViewStat *
backfill_entry(int view_id)
{
	ViewStat   *stat = progress_find(MyDatabaseId, view_id, true);

	if (stat == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many delta views: shared memory has room for %d", dj_max_views),
				 errhint("Raise delta_join.max_views and restart the server.")));
	return stat;
}

/*
 * This process starts a concurrent operation on the view, which has its
 * entry (progress_reserve).  Set in the transaction that makes the view
 * 'backfilling', before it commits: the worker never sees the view in that
 * state without the process that runs it.
 */
void
progress_backfill_begin(int view_id, BackfillCommand command)
{
	ViewStat   *stat;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	stat = backfill_entry(view_id);
	stat->backfill_pid = MyProcPid;
	stat->backfill_command = command;
	stat->backfill_phase = BACKFILL_REGISTERING;
	stat->backfill_rows_done = 0;
	stat->backfill_rows_expected = -1;
	stat->backfill_started = GetCurrentTimestamp();
	LWLockRelease(worker_shared->lock);
}

/* The operation moved on to phase; rows_expected -1: not known (yet) */
void
progress_backfill_phase(int view_id, BackfillPhase phase, int64 rows_expected)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		ViewStat   *stat = backfill_entry(view_id);

		stat->backfill_phase = phase;
		if (rows_expected >= 0)
			stat->backfill_rows_expected = rows_expected;
	}
	LWLockRelease(worker_shared->lock);
}

/* rows of the view's result are written so far */
void
progress_backfill_rows(int view_id, int64 rows)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		ViewStat   *stat = progress_find(MyDatabaseId, view_id, false);

		if (stat != NULL)
			stat->backfill_rows_done = rows;
	}
	LWLockRelease(worker_shared->lock);
}

/* The operation ended, one way or another (its entry may be gone) */
void
progress_backfill_end(int view_id)
{
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	{
		ViewStat   *stat = progress_find(MyDatabaseId, view_id, false);

		if (stat != NULL && stat->backfill_pid == MyProcPid)
			stat->backfill_pid = 0;
	}
	LWLockRelease(worker_shared->lock);
	/* wait() waits for the end of the operation */
	ConditionVariableBroadcast(&worker_shared->progress_cv);
}

/*
 * Does a process still run the concurrent operation of a view in state
 * 'backfilling'?  Not when its entry says none (a server restart cleared
 * shared memory) or names a process that is gone (terminated, or it
 * failed and could not clean up).
 */
bool
progress_backfill_running(Oid dboid, int view_id)
{
	bool		alive = false;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	{
		ViewStat   *stat = progress_find(dboid, view_id, false);

		if (stat != NULL)
			alive = backfill_alive(stat);
	}
	LWLockRelease(worker_shared->lock);
	return alive;
}

/* ----------------------------------------------------------------
 *		wait()
 * ----------------------------------------------------------------
 */

/* Publish where the worker's new batch reads the WAL up to */
void
progress_set_reading(Oid dboid, XLogRecPtr upto)
{
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	if ((db = shmem_find_db(dboid, false)) != NULL)
		db->reading_upto = upto;
	LWLockRelease(worker_shared->lock);
}

/*
 * Where the running worker of the database reads the WAL up to in its
 * batch being made, or read to in its last one (invalid: none runs)
 */
XLogRecPtr
progress_reading(Oid dboid)
{
	XLogRecPtr	result = InvalidXLogRecPtr;
	DbWorker   *db;

	LWLockAcquire(worker_shared->lock, LW_SHARED);
	if ((db = shmem_find_db(dboid, false)) != NULL && db->pid != 0)
		result = db->reading_upto;
	LWLockRelease(worker_shared->lock);
	return result;
}

/*
 * The WAL position every change committed so far lies before: the insert
 * position, moved back over a page header if it sits just past one (no
 * record ends there: the reader stops at the page boundary).
 */
XLogRecPtr
progress_wal_position_now(void)
{
	XLogRecPtr	lsn = GetXLogInsertRecPtr();

	if (XLogSegmentOffset(lsn, wal_segment_size) == SizeOfXLogLongPHD)
		lsn -= SizeOfXLogLongPHD;
	else if (lsn % XLOG_BLCKSZ == SizeOfXLogShortPHD)
		lsn -= SizeOfXLogShortPHD;
	return lsn;
}

