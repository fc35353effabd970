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

#define PROGRESS_REASON_LEN		160

/*
 * One view's progress (an entry of WorkerShared.views, launcher.h).
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
} ViewStat;

/* What happened to one view in a batch, for progress_publish */
typedef struct ViewProgress
{
	int			view_id;
	bool		in_error;		/* the catalog's state after the batch */
	bool		applied;		/* its batch was applied now */
	bool		deferred;		/* it waits for another try */
	const char *retry_reason;	/* why, when deferred */
	XLogRecPtr	catalog_lsn;	/* applied_lsn in the catalog */
	int64		changes;		/* changes the batch had for it */
	TimestampTz commit_time;	/* of its newest change */
	ApplyCounts counts;
} ViewProgress;

extern void progress_publish(Oid dboid, ViewProgress *views, int nviews,
							 XLogRecPtr end_lsn);
extern void progress_advance(Oid dboid, XLogRecPtr end_lsn);
extern bool progress_room(void);
extern bool progress_reserve(int view_id, List *live_view_ids);
extern XLogRecPtr progress_wal_position_now(void);

#endif							/* DJ_PROGRESS_H */
