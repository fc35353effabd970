/*-------------------------------------------------------------------------
 *
 * apply_view.h
 *	  Apply one view's batch, safely (apply_view.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_APPLY_VIEW_H
#define DJ_APPLY_VIEW_H

#include "access/xlogdefs.h"
#include "utils/snapshot.h"

#include "base/batch.h"
#include "registry/catalog.h"

/* How applying one view's work ended (apply_view) */
typedef enum ViewResult
{
	VIEW_APPLIED,
	VIEW_FAILED,				/* error: the view goes to state error */
	VIEW_DEFERRED,				/* a passing error: try again later */
	VIEW_PARTIAL,				/* its time slice ran out: the rest waits */
	VIEW_LATER					/* its tables changed after the batch's
								 * snapshot: all of it waits */
} ViewResult;

/*
 * Reads the next chunk of at most max_keys keys that a capture spilled for
 * a view (from the first when rewind), as a ViewBatch in the current
 * memory context; NULL once all were read (capture/decoding.h).
 */
typedef ViewBatch *(*SpillReader) (int view_id, bool rewind, int max_keys);

/* What to apply, and how */
typedef struct ApplyRequest
{
	ViewRecord *view;
	ViewBatch  *batch;			/* its keys in memory */
	SpillReader read_spilled;	/* its spilled keys, applied first; NULL if
								 * none */
	int			chunk_keys;		/* keys of a spilled chunk: the worker's
								 * max_batch_size */
	Snapshot	snapshot;		/* the batch's, or NULL: one taken once what
								 * the view reads is locked */
	XLogRecPtr	end_lsn;		/* the changes it covers end here (for error
								 * contexts), or invalid */
	int			timeout_ms;		/* the most time its apply may take (the
								 * view's lookup_timeout, bounded by the
								 * worker's delta_join.max_retry_time), 0 for
								 * no bound */
	bool		sliced;			/* stop after the view's time slice */
	bool		quiet;			/* do not log an error another try may not
								 * meet (a share, the worker's own too: the
								 * worker applies the view again alone) */
	bool		exactly_once;	/* nothing of the target has seen a change
								 * of the batch yet: its weights may be
								 * added (worker.c, worker_exactly_once) */
} ApplyRequest;

extern void apply_session_setup(void);
extern void apply_session_worked(void);
extern void apply_session_idle(void);
extern ViewResult apply_view(const ApplyRequest *req, ApplyCounts *counts, ViewBatch **rest,
							 ErrorData **error);

#endif							/* DJ_APPLY_VIEW_H */
