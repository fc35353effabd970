/*-------------------------------------------------------------------------
 *
 * progress.h
 *	  How far each view is applied, and its counters: kept in shared memory
 *	  by the apply workers, read by delta_join.wait() and delta_join.status.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_PROGRESS_H
#define DJ_PROGRESS_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"
#include "utils/timestamp.h"

#include "base/batch.h"
#include "base/shmem.h"


/* What happened to one view in a batch, for progress_publish */
typedef struct ViewProgress
{
	int			view_id;
	bool		in_error;		/* the catalog's state after the batch */
	bool		applied;		/* its batch was applied now */
	bool		deferred;		/* it waits for another try */
	const char *retry_reason;	/* why, when deferred */
	bool		whole;			/* deferred, and to be recomputed whole */
	XLogRecPtr	catalog_lsn;	/* applied_lsn in the catalog */
	int64		changes;		/* changes the batch had for it */
	TimestampTz commit_time;	/* of its newest change */
	ApplyCounts counts;
} ViewProgress;

/* progress_find expects worker_shared->lock held (shmem.h) */
extern ViewStat *progress_find(Oid dboid, int view_id, bool create);
extern void progress_publish(Oid dboid, ViewProgress *views, int nviews,
							 XLogRecPtr end_lsn);
extern void progress_advance(Oid dboid, XLogRecPtr end_lsn);
extern bool progress_room(void);
extern bool progress_reserve(int view_id, List *live_view_ids);
extern XLogRecPtr progress_wal_position_now(void);
extern void progress_set_reading(Oid dboid, XLogRecPtr upto);
extern XLogRecPtr progress_reading(Oid dboid);

extern void progress_backfill_begin(int view_id, BackfillCommand command);
extern void progress_backfill_phase(int view_id, BackfillPhase phase, int64 rows_expected);
extern void progress_backfill_rows(int view_id, int64 rows);
extern void progress_backfill_end(int view_id);
extern bool progress_backfill_running(Oid dboid, int view_id);

#endif							/* DJ_PROGRESS_H */
