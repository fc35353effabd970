/*-------------------------------------------------------------------------
 *
 * share.h
 *	  The apply worker's side of parallel apply (share.c): which views of a
 *	  batch it shares with its helpers, and what becomes of them.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_SHARE_H
#define DJ_SHARE_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"

#include "apply/apply_view.h"
#include "base/batch.h"
#include "base/progress.h"
#include "process/parallel.h"
#include "process/retry.h"

/*
 * A view's work in a batch: made by the worker (worker_apply_batch), shared
 * or not by share.c.
 */
typedef struct ViewWork
{
	ViewRecord *view;
	ViewProgress *vp;
	DeferredView *dv;			/* its waiting keys, or NULL */
	ViewBatch  *batch;			/* its part of the captured batch, or NULL */
	ViewBatch  *work;			/* what is applied: batch, or the keys waiting */
	ApplyRequest req;			/* how its work is applied: the reader of its
								 * spilled keys, the batch's end (set by the
								 * worker; each apply sets batch, snapshot,
								 * sliced) */
	int		   *share_by;		/* shareable: what picks a key's share
								 * (plan_cache_shareable) */
	ViewBatch  *mine;			/* shared with helpers: the worker's share */
	bool		chunked;		/* its keys spilled: shared a chunk at a time,
								 * after the batch's transaction */
	ViewResult	result;			/* of the worker's share, or of the chunks */
	ErrorData  *error;			/* why it was not applied */
} ViewWork;

extern void share_define_settings(void);
extern ShareRound *share_begin(List *todo, bool spilled, XLogRecPtr end_lsn,
							   bool *shared_chunks);
extern void share_wait(ShareRound *round, List *todo, XLogRecPtr end_lsn);
extern bool share_involves(ViewWork *vw);
extern ViewResult share_settle(ShareRound *round, ViewWork *vw, ErrorData **error);

#endif							/* DJ_SHARE_H */
