/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  Shared memory of the launcher and the apply workers, as launcher.c
 *	  lays it out and worker.c and progress.c fill it.
 *
 * WorkerShared holds one DbWorker per database with (or waiting for) a
 * worker and one ViewStat (progress.h) per view, delta_join.max_views of
 * them.  Everything in it is protected by WorkerShared.lock: readers take
 * it shared; writers -- a worker once per batch, backends in worker_notify,
 * the launcher -- take it exclusive.  progress_cv is broadcast whenever a
 * worker publishes progress; delta_join.wait() sleeps on it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_LAUNCHER_H
#define DJ_LAUNCHER_H

#include "access/xlogdefs.h"
#include "postmaster/bgworker.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "process/progress.h"

#define WORKER_MAX_DATABASES	64	/* databases with a worker at once */

/* One database's worker */
typedef struct DbWorker
{
	Oid			dboid;			/* InvalidOid: entry free */
	pid_t		pid;			/* the running worker, 0 if none */
	Latch	   *latch;			/* its latch, while pid != 0 */
	uint64		generation;		/* bumped when the catalog changed */
	bool		distributed;	/* the database has distributed views
								 * (distributed.c): its slot is kept without
								 * views, and a transaction that changes
								 * views may be prepared (two-phase commit
								 * of Citus) */
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

/* launcher.c; worker_find_db expects worker_shared->lock held */
extern void worker_check_shmem(void);
extern DbWorker *worker_find_db(Oid dboid, bool create);
extern void worker_slot_name(char *name, Oid dboid);
extern void worker_bgw_init(BackgroundWorker *bgw, const char *function, const char *type);
extern Oid	worker_catalog_relid(const char *relname);
extern void worker_mark_views_stale(const char *reason);
extern void worker_set_distributed(Oid dboid);
extern bool worker_is_distributed(Oid dboid);
extern char *worker_slot_wait_reason(void);

#endif							/* DJ_LAUNCHER_H */
