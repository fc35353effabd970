/*-------------------------------------------------------------------------
 *
 * share.c
 *	  The apply worker's side of parallel apply: which views of a large
 *	  batch are shared with the helpers, the views whose keys spilled,
 *	  shared a chunk at a time, and the views a share of which failed,
 *	  applied again by the worker alone.
 *
 * Why a file of its own: parallel.c holds the protocol between the worker
 * (the leader) and its helpers, both sides of it, as core's
 * applyparallelworker.c does -- the pool, the tasks, a round's begin,
 * split, start and finish, and the helper's loop --; it knows keys and
 * shares, not what a view is applied under.  This file is the worker's
 * use of it: for the views of one batch (ViewWork, made by worker.c) it
 * asks the plan cache which can be shared (plan_cache_shareable) and the
 * retry state which should not be now (retry_shares_view), runs the
 * rounds, and settles each shared view's result.  Each file then has one
 * job, and each is read alone.
 *
 * How a large batch goes (parallel.h has the protocol):
 *
 *	share_begin		in the batch's transaction: the views that can be shared
 *					are split, and the helpers start on their shares; the
 *					worker applies its own share of each (ViewWork.mine)
 *					with the batch's other work, and commits;
 *	share_wait		after that commit: wait for the helpers' commits, then
 *					apply the views whose keys spilled (ViewWork.chunked),
 *					each chunk a round of its own, each in transactions of
 *					its own;
 *	share_settle	in one more transaction of the worker's, for each shared
 *					view: did every share commit?  If not, the view is
 *					applied again whole by the worker alone (applying a key
 *					twice does no harm), and its result is the worker's.
 *
 * Memory: what share_begin and share_wait allocate lives in the caller's
 * context (the batch's).
 *
 * IDENTIFICATION
 *	  src/process/share.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "apply/plan_cache.h"
#include "base/runas.h"
#include "process/share.h"

/* delta_join.parallel_apply_min_keys */
static int	dj_parallel_apply_min_keys = 1000;

static void share_prepare_view(ViewRecord *view);
static void share_apply_chunks(ViewWork *vw, XLogRecPtr end_lsn);
static ViewResult share_apply_round(ViewWork *vw, ViewBatch *batch, XLogRecPtr end_lsn,
									MemoryContext keep);

/* Define delta_join.parallel_apply_min_keys (_PG_init) */
void
share_define_settings(void)
{
	DefineCustomIntVariable("delta_join.parallel_apply_min_keys",
							"Fewest dirty keys of a batch that its apply shares with helpers.",
							"A smaller batch is applied by the apply worker alone.",
							&dj_parallel_apply_min_keys,
							1000,
							1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/*
 * Share the batch with the helpers when it is large enough and they are
 * there: each view that can be shared (plan_cache_shareable) is split, and
 * the helpers start on their shares.  NULL when the worker applies alone.
 * A large batch starts the helpers that do not run (they take later
 * rounds), and builds the plans of views not applied yet, so that they can
 * be judged.
 *
 * When the batch spilled, a round of the whole would need all its keys in
 * memory: the views that can be shared are instead marked chunked, and
 * applied a chunk at a time after the batch's transaction (share_wait);
 * *shared_chunks says whether any is.
 */
ShareRound *
share_begin(List *todo, bool spilled, XLogRecPtr end_lsn, bool *shared_chunks)
{
	int64		nkeys = 0;
	int			nhelpers;
	ShareRound *round;
	ListCell   *lc;

	*shared_chunks = false;
	if (dj_apply_workers <= 1)
		return NULL;
	foreach(lc, todo)
		nkeys += view_batch_nkeys(((ViewWork *) lfirst(lc))->work);
	if (!spilled && (nkeys == 0 || nkeys < dj_parallel_apply_min_keys))
		return NULL;

	/* a large batch: helpers are started if they do not run */
	nhelpers = parallel_helpers(MyDatabaseId);
	nkeys = 0;
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		vw->share_by = palloc(sizeof(int) * Max(list_length(vw->work->sources), 1));
		if (vw->view->path == DJ_PATH_DELTA)
			share_prepare_view(vw->view);
		/* (a recompute of the whole is one statement: not shared) */
		if (!retry_shares_view(vw->view->view_id) || vw->work->whole)
			vw->share_by = NULL;
		else if (plan_cache_shareable(vw->view, vw->work, vw->share_by))
			nkeys += view_batch_nkeys(vw->work);
		else
			vw->share_by = NULL;
	}

	/* the chunks of each round take the helpers that are ready by then */
	if (spilled)
	{
		foreach(lc, todo)
		{
			ViewWork   *vw = lfirst(lc);

			vw->chunked = (vw->share_by != NULL);
			*shared_chunks |= vw->chunked;
		}
		return NULL;
	}
	if (nhelpers == 0 || nkeys == 0)
		return NULL;

	round = parallel_round_begin(nhelpers, end_lsn);
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		if (vw->share_by != NULL)
			vw->mine = parallel_round_split(round, vw->work, vw->share_by,
											vw->req.timeout_ms);
	}
	parallel_round_start(round);
	return round;
}

/*
 * Build a view's plan before its first apply, as its target's owner, so
 * that the batch can be shared (plan_cache_shareable).  An error is left
 * to the apply, which meets it again and handles it.
 */
static void
share_prepare_view(ViewRecord *view)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		RunAs		runas;

		runas_begin_view(runas_target_owner(view->target), view->settings, &runas);
		(void) plan_cache_get(view);
		runas_end(&runas);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
}

/*
 * After the worker committed its shares (outside a transaction): wait for
 * the helpers' commits, and apply the chunked views, a chunk at a time.
 */
void
share_wait(ShareRound *round, List *todo, XLogRecPtr end_lsn)
{
	ListCell   *lc;

	if (round != NULL)
		parallel_round_finish(round);
	foreach(lc, todo)
	{
		ViewWork   *vw = lfirst(lc);

		if (vw->chunked)
			share_apply_chunks(vw, end_lsn);
	}
}

/* Was the view's work shared (a share of it, or its chunks)? */
bool
share_involves(ViewWork *vw)
{
	return vw->mine != NULL || vw->chunked;
}

/*
 * In a transaction of the worker's, after share_wait: the result of a
 * shared view.  When a share of it failed anywhere, the worker applies its
 * work again whole, alone, and that is the result; *error says why it
 * failed, if it did.
 */
ViewResult
share_settle(ShareRound *round, ViewWork *vw, ErrorData **error)
{
	ViewResult	result = vw->result;

	*error = vw->error;
	if (vw->mine != NULL &&
		(result != VIEW_APPLIED ||
		 !parallel_round_view_done(round, vw->view->view_id, &vw->vp->counts)))
	{
		ApplyRequest req = vw->req;

		retry_share_failed(vw->view->view_id);
		elog(DEBUG1, "delta view \"%s\": a share failed, the worker applies the view alone",
			 catalog_view_name(vw->view));
		memset(&vw->vp->counts, 0, sizeof(ApplyCounts));
		req.batch = vw->work;
		pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
		result = apply_view(&req, &vw->vp->counts, NULL, error);
		pgstat_report_activity(STATE_IDLE, NULL);
	}
	return result;
}

/*
 * Apply a chunked view: each chunk of keys the capture spilled for it, then
 * what stayed in memory, each shared with the helpers in a round of its
 * own.  It stops at the first chunk that cannot be applied, with
 * vw->result and vw->error saying why; the view then waits or
 * goes to error with all its keys, as when applied alone.
 */
static void
share_apply_chunks(ViewWork *vw, XLogRecPtr end_lsn)
{
	MemoryContext keep = CurrentMemoryContext;
	MemoryContext chunk_cxt = AllocSetContextCreate(keep, "delta_join shared chunk",
													ALLOCSET_DEFAULT_SIZES);
	bool		rewind = true;
	bool		last = false;

	vw->result = VIEW_APPLIED;
	memset(&vw->vp->counts, 0, sizeof(ApplyCounts));
	while (!last && vw->result == VIEW_APPLIED)
	{
		ViewBatch  *chunk;

		MemoryContextSwitchTo(chunk_cxt);
		chunk = vw->req.read_spilled(vw->view->view_id, rewind, vw->req.chunk_keys);
		rewind = false;
		if (chunk == NULL)
		{
			chunk = vw->work;
			last = true;
		}
		vw->result = share_apply_round(vw, chunk, end_lsn, keep);
		MemoryContextReset(chunk_cxt);
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	MemoryContextSwitchTo(keep);
	MemoryContextDelete(chunk_cxt);
}

/*
 * One round of a chunked view: the worker applies its share of the chunk
 * in a transaction of its own and commits, then waits for the helpers; if a
 * share failed, it applies the whole chunk alone.  The counts go to the
 * view's; an error to vw->error, allocated in keep.
 */
static ViewResult
share_apply_round(ViewWork *vw, ViewBatch *batch, XLogRecPtr end_lsn, MemoryContext keep)
{
	MemoryContext cxt = CurrentMemoryContext;	/* the chunk's */
	int		   *share_by = palloc(sizeof(int) * Max(list_length(batch->sources), 1));
	int			nhelpers = 0;
	ShareRound *round = NULL;
	ApplyRequest req = vw->req;
	ApplyCounts counts;
	ViewResult	result;
	ErrorData  *error = NULL;
	bool		done = true;

	/*
	 * This batch, its keys in memory, under a snapshot of its own, newer
	 * than the batch's (the rows decoding kept are not used, apply_view)
	 */
	req.batch = batch;
	req.read_spilled = NULL;

	memset(&counts, 0, sizeof(counts));
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	MemoryContextSwitchTo(cxt);
	pgstat_report_activity(STATE_RUNNING, catalog_view_name(vw->view));
	if (retry_shares_view(vw->view->view_id) &&
		plan_cache_shareable(vw->view, batch, share_by) &&
		(nhelpers = parallel_helpers(MyDatabaseId)) > 0)
	{
		round = parallel_round_begin(nhelpers, end_lsn);
		req.batch = parallel_round_split(round, batch, share_by,
										 vw->req.timeout_ms);
		parallel_round_start(round);
	}
	MemoryContextSwitchTo(keep);	/* (where the error goes) */
	req.quiet = (round != NULL);	/* a share: retried at once, alone */
	result = apply_view(&req, &counts, NULL, &error);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);

	if (round != NULL)
	{
		parallel_round_finish(round);
		done = parallel_round_view_done(round, vw->view->view_id, &counts);
		parallel_round_end(round);
	}
	if (round != NULL && (result != VIEW_APPLIED || !done))
	{
		retry_share_failed(vw->view->view_id);
		memset(&counts, 0, sizeof(counts));
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		MemoryContextSwitchTo(keep);
		elog(DEBUG1, "delta view \"%s\": a share failed, the worker applies the chunk alone",
			 catalog_view_name(vw->view));
		req.batch = batch;
		req.quiet = false;
		result = apply_view(&req, &counts, NULL, &error);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	MemoryContextSwitchTo(cxt);

	if (result == VIEW_APPLIED)
		apply_counts_add(&vw->vp->counts, &counts);
	else
		vw->error = error;
	return result;
}
