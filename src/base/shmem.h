/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  delta_join's shared memory (shmem.c): one DbWorker per database with
 *	  (or waiting for) an apply worker, one ViewStat (progress.h) per view.
 *
 * WorkerShared holds them, delta_join.max_views ViewStats.  Everything in
 * it is protected by WorkerShared.lock: readers take it shared; writers --
 * a worker once per batch, backends announcing a change of the views
 * (launcher_notify), the launcher -- take it exclusive.  progress_cv is
 * broadcast whenever a worker publishes progress; delta_join.wait() sleeps
 * on it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_SHMEM_H
#define DJ_SHMEM_H

#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"

#include "access/xlogdefs.h"
#include "utils/timestamp.h"

#include "base/batch.h"

#define PROGRESS_REASON_LEN		160

/* What a concurrent operation on a view is (delta_join.progress.command) */
typedef enum BackfillCommand
{
	BACKFILL_CREATE,			/* create_view(..., concurrently => true) */
	BACKFILL_REFRESH			/* refresh(target, concurrently => true) */
} BackfillCommand;

/* Where it is (delta_join.progress.phase) */
typedef enum BackfillPhase
{
	BACKFILL_REGISTERING,		/* the view is made 'backfilling' */
	BACKFILL_WAITING,			/* for the writers that began before it */
	BACKFILL_FILLING,			/* the query run under a new snapshot */
	BACKFILL_INDEXING,			/* a target made by the create gets its key
								 * and indexes */
	BACKFILL_CATCHING_UP		/* 'active': the worker applies the changes
								 * held back meanwhile */
} BackfillPhase;

/*
 * One view's progress (an entry of WorkerShared.views).
 * applied_lsn: every change committed before it is applied to the view
 * (or the view is in error).  A view whose batch could not be applied for
 * a passing reason (a lock it waited too long for) keeps its applied_lsn
 * and says why in retry_reason until the worker applies it.
 */
typedef struct ViewStat
{
	Oid			dboid;			/* InvalidOid: entry free */
	int			view_id;
	TransactionId reserving_xid;	/* create_view that took the entry, until
									 * the worker has seen the view */
	bool		in_error;
	XLogRecPtr	applied_lsn;
	TimestampTz applied_commit_time;	/* of the newest change applied */
	int64		changes_seen;
	ApplyCounts counts;
	char		retry_reason[PROGRESS_REASON_LEN];	/* "" unless deferred */

	/*
	 * A concurrent create or refresh of the view (ops/concurrent.c), written
	 * by the process running it, read by delta_join.progress and by the
	 * worker, which puts a view left 'backfilling' by a process that no
	 * longer runs in error.
	 */
	int			backfill_pid;	/* 0: none runs */
	BackfillCommand backfill_command;
	BackfillPhase backfill_phase;
	int64		backfill_rows_done;
	int64		backfill_rows_expected; /* the planner's estimate; -1 unknown */
	TimestampTz backfill_started;
} ViewStat;

#define WORKER_MAX_DATABASES	64	/* databases with a worker at once */

/* One database's worker */
typedef struct DbWorker
{
	Oid			dboid;			/* InvalidOid: entry free */
	pid_t		pid;			/* the running worker, 0 if none */
	Latch	   *latch;			/* its latch, while pid != 0 */
	uint64		generation;		/* bumped when the catalog changed */
	XLogRecPtr	reading_upto;	/* where the batch being made (or the last
								 * one) reads the WAL up to */
	bool		distributed;	/* the database has distributed views
								 * (citus/): its slot is kept without
								 * views, and a transaction that changes
								 * views may be prepared (two-phase commit
								 * of Citus) */
	XLogRecPtr	slot_confirmed; /* the confirmed position the workers of
								 * this server last left the database's
								 * slot at (InvalidXLogRecPtr: not known
								 * yet, or the slot was made anew): a
								 * slot found further on was moved by
								 * someone else, its changes in between
								 * lost (worker_start_decoding) */
	char		failure[PROGRESS_REASON_LEN];	/* why the last worker ended
												 * in error, until a worker
												 * applies a batch ("" if
												 * none) */
} DbWorker;

typedef struct WorkerShared
{
	LWLock	   *lock;
	ConditionVariable progress_cv;
	Latch	   *launcher_latch;
	DbWorker	dbs[WORKER_MAX_DATABASES];
	int			max_views;		/* entries of views */
	ViewStat	views[FLEXIBLE_ARRAY_MEMBER];
} WorkerShared;

extern WorkerShared *worker_shared;
extern int	dj_max_views;

extern void shmem_define_settings(void);
extern void shmem_init(void);
extern void shmem_check(void);

/* expects worker_shared->lock held */
extern DbWorker *shmem_find_db(Oid dboid, bool create);

extern void shmem_set_distributed(Oid dboid);
extern bool shmem_is_distributed(Oid dboid);

#endif							/* DJ_SHMEM_H */
