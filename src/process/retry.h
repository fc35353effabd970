/*-------------------------------------------------------------------------
 *
 * retry.h
 *	  What the apply worker remembers of each view from one batch to the
 *	  next (retry.c): the work a view waits to try again, when each
 *	  full-recompute view last ran, and the views whose shares conflicted
 *	  lately.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_RETRY_H
#define DJ_RETRY_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

#include "base/batch.h"
#include "registry/catalog.h"

/*
 * A view whose changes wait for another try: its parts of the batches since
 * the first failure, merged into one, each key once (batch.c).  The worker
 * reads it; retry.c changes it.
 */
typedef struct DeferredView
{
	int			view_id;
	MemoryContext cxt;			/* holds batch and seen */
	ViewBatch  *batch;			/* the work waiting, or NULL */
	HTAB	   *seen;			/* the keys in batch */
	XLogRecPtr	since_lsn;		/* the slot is not confirmed past this */
	int			tries;
	int			timeouts;		/* of them, ended by lookup_timeout */
	int			internal;		/* internal errors (XX000) in a row */
	TimestampTz internal_since; /* the first of them */
	TimestampTz first_failure;
	TimestampTz held_since;		/* since when it holds the slot back */
	TimestampTz next_try;
	char	   *reason;			/* why it waits, for delta_join.status */
	bool		held;			/* held back while the view is backfilling */
} DeferredView;

extern int	dj_max_retry_time_ms;

extern void retry_define_settings(void);
extern int	retry_apply_timeout(const ViewRecord *view);
extern DeferredView *retry_find(int view_id);
extern TimestampTz retry_next_due(void);
extern XLogRecPtr retry_confirm_limit(XLogRecPtr end_lsn);
extern DeferredView *retry_defer(ViewRecord *view, ViewBatch *batch, XLogRecPtr since_lsn,
								 TimestampTz now);
extern DeferredView *retry_rest(ViewRecord *view, DeferredView *dv, ViewBatch *rest,
								bool progress, XLogRecPtr since_lsn, TimestampTz now);
extern void retry_defer_spilled(DeferredView *dv, ViewRecord *view, int max_keys);
extern void retry_failed(DeferredView *dv, const ErrorData *error);
extern bool retry_gives_up(DeferredView *dv, ViewRecord *view, ErrorData *error,
						   TimestampTz now);
extern bool retry_held_too_long(DeferredView *dv, TimestampTz now, ErrorData **error);
extern void retry_forget(DeferredView *dv);
extern void retry_forget_dropped(List *views);
extern DeferredView *retry_hold(ViewRecord *view, DeferredView *dv, ViewBatch *batch,
								XLogRecPtr since_lsn, TimestampTz now, const char *reason);
extern void retry_release(int view_id, TimestampTz now);

extern TimestampTz retry_recompute_due(ViewRecord *view, DeferredView *dv);
extern DeferredView *retry_wait_recompute(ViewRecord *view, DeferredView *dv, ViewBatch *batch,
										  XLogRecPtr since_lsn, TimestampTz now);
extern void retry_recomputed(int view_id, TimestampTz at);

extern bool retry_shares_view(int view_id);
extern void retry_share_failed(int view_id);

#endif							/* DJ_RETRY_H */
