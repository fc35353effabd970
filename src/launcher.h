/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  Shared memory of the launcher and the apply workers, as launcher.c
 *	  lays it out and worker.c fills it.
 *
 * WorkerShared holds one DbWorker per database with (or waiting for) a
 * worker and one ViewStat per view with counters.  Everything in it is
 * protected by WorkerShared.lock: readers take it shared; writers -- a
 * worker once per batch, backends in worker_notify, the launcher -- take it
 * exclusive.  progress_cv is broadcast whenever a worker's processed_lsn
 * advances; delta_join.wait() sleeps on it.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_LAUNCHER_H
#define DJ_LAUNCHER_H

#include "access/xlogdefs.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"

#include "batch.h"

#define WORKER_MAX_DATABASES	64	/* databases with a worker at once */
#define WORKER_MAX_VIEWS		1024	/* views with counters, all databases */

/* One database's worker */
typedef struct DbWorker
{
	Oid			dboid;			/* InvalidOid: entry free */
	pid_t		pid;			/* the running worker, 0 if none */
	Latch	   *latch;			/* its latch, while pid != 0 */
	uint64		generation;		/* bumped when the catalog changed */
	XLogRecPtr	processed_lsn;	/* all changes committed before this are
								 * applied, views in error aside */
} DbWorker;

/* One view's counters */
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

extern WorkerShared *worker_shared;

/* launcher.c; the find functions expect worker_shared->lock held */
extern DbWorker *worker_find_db(Oid dboid, bool create);
extern ViewStat *worker_find_view(Oid dboid, int view_id, bool create);
extern void worker_slot_name(char *name, Oid dboid);
extern Oid	worker_catalog_relid(const char *relname);
extern void worker_mark_views_stale(const char *reason);

#endif							/* DJ_LAUNCHER_H */
