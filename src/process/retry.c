/*-------------------------------------------------------------------------
 *
 * retry.c
 *	  What the apply worker remembers of each view from one batch to the
 *	  next (ViewRetry): the work of a view that waits for another try
 *	  (DeferredView), when a full-recompute view last recomputed, and
 *	  whether its shares conflicted lately (parallel apply).
 *
 * A view waits for another try (worker.c decides when) after a passing
 * error -- a lock it waited for longer than the worker's lock_timeout, a
 * deadlock, its lookup_timeout --, after its time slice ran out with work
 * left, when its tables changed after the batch's snapshot, or until its
 * refresh_interval has passed (a full recompute), or while it is
 * backfilling (held back until its concurrent create or refresh ends).
 * Its part of each batch meanwhile joins the work waiting, each key once
 * however many batches brought it, so that a hot key held up for a minute
 * is applied once; the slot is not confirmed past the first batch it
 * waits with.  It is tried
 * again with a growing backoff, and given up (put in error) once its
 * lookup_timeout has passed since its first failure, after
 * RETRY_TIMEOUT_TRIES statement timeouts in a row, or after internal
 * errors in a row for RETRY_INTERNAL_MS, RETRY_INTERNAL_TRIES of them at
 * least (one that a catalog lookup racing a DDL raised passes, though a
 * DDL that runs in a loop may raise it a few times over; one that comes
 * back for seconds is an error).
 *
 * Whatever its options say, no view holds the slot back for longer than
 * delta_join.max_retry_time: the slot retains the WAL of the whole instance,
 * and a view's options (a lookup_timeout of weeks, a max_batch_size of one
 * key under steady writes) are any role's to choose.  A view that waited
 * with work that long goes to error, and the slot moves on; a full
 * recompute waiting for its refresh_interval recomputes early instead.
 *
 * Memory: everything here lives in retry_cxt, for the life of the worker
 * (what concerns a view until it is dropped); a deferred view's waiting
 * work in a context of its own, freed when it is applied, given up or
 * dropped, and when it passes delta_join.max_waiting_keys keys (its work
 * then becomes a recompute of the whole, retry_add).
 *
 * IDENTIFICATION
 *	  src/process/retry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "access/xact.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "capture/decoding.h"
#include "process/retry.h"

#define RETRY_MIN_MS			100 /* first backoff of a deferred view */
#define RETRY_MAX_MS			5000	/* longest backoff */
#define RETRY_TIMEOUT_TRIES		3	/* lookup_timeouts before an error */
#define RETRY_INTERNAL_TRIES	3	/* internal errors before an error */
#define RETRY_INTERNAL_MS		5000	/* ... and for how long, at least */
#define RETRY_HELD_POLL_MS		100 /* a held view's catalog row looked at */
#define SHARE_BACKOFF			8	/* large batches a view whose shares
									 * conflicted is applied alone */

/* What the worker remembers of one view */
typedef struct ViewRetry
{
	int			view_id;
	DeferredView *deferred;		/* its work waiting for another try, or NULL */
	TimestampTz recomputed_at;	/* its last full recompute, or 0 */

	/*
	 * Large batches in which it is still applied alone: its shares failed
	 * lately (their keys met on target rows, say a star join changed on
	 * both sides), and a workload that conflicts should not pay for two
	 * applies every batch.
	 */
	int			share_skip;
} ViewRetry;

static MemoryContext retry_cxt = NULL;
static List *retries = NIL;		/* ViewRetry * */

int			dj_max_retry_time_ms = 60 * 60 * 1000;
static int	dj_max_waiting_keys = 1000000;

/* Define delta_join.max_retry_time (_PG_init) */
void
retry_define_settings(void)
{
	DefineCustomIntVariable("delta_join.max_retry_time",
							"Most time a view may hold back its database's replication slot.",
							"A view retried, or applied a part at a time, for "
							"longer goes to error, and the slot moves on.  "
							"Zero: no bound.",
							&dj_max_retry_time_ms,
							60 * 60 * 1000,
							0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
	DefineCustomIntVariable("delta_join.max_waiting_keys",
							"Most dirty keys the apply worker keeps for one view that waits.",
							"A view that waits (for another try, for its concurrent "
							"backfill, for the worker to catch up) with more distinct "
							"dirty keys drops them all, and is recomputed whole when "
							"it is applied.",
							&dj_max_waiting_keys,
							1000000,
							1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

static void retry_add(DeferredView *dv, const ViewRecord *view, ViewBatch *batch);
static void retry_free(DeferredView *dv);

/* What is remembered of a view, made (in retry_cxt) when create, or NULL */
static ViewRetry *
view_retry(int view_id, bool create)
{
	ViewRetry  *vr;
	ListCell   *lc;
	MemoryContext oldcxt;

	foreach(lc, retries)
	{
		if (((ViewRetry *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	if (!create)
		return NULL;
	if (retry_cxt == NULL)
		retry_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join retry state",
										  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(retry_cxt);
	vr = palloc0(sizeof(ViewRetry));
	vr->view_id = view_id;
	retries = lappend(retries, vr);
	MemoryContextSwitchTo(oldcxt);
	return vr;
}

/* ----------------
 * Deferred views
 * ----------------
 */

/* The deferred view of that id, or NULL */
DeferredView *
retry_find(int view_id)
{
	ViewRetry  *vr = view_retry(view_id, false);

	return vr ? vr->deferred : NULL;
}

/* When the first deferred view is due for another try, or 0 */
TimestampTz
retry_next_due(void)
{
	TimestampTz next = 0;
	ListCell   *lc;

	foreach(lc, retries)
	{
		DeferredView *dv = ((ViewRetry *) lfirst(lc))->deferred;

		if (dv != NULL && (next == 0 || dv->next_try < next))
			next = dv->next_try;
	}
	return next;
}

/* How far the slot may be confirmed: end_lsn, or before a waiting view */
XLogRecPtr
retry_confirm_limit(XLogRecPtr end_lsn)
{
	ListCell   *lc;

	foreach(lc, retries)
	{
		DeferredView *dv = ((ViewRetry *) lfirst(lc))->deferred;

		if (dv != NULL)
			end_lsn = Min(end_lsn, dv->since_lsn);
	}
	return end_lsn;
}

/*
 * The deferred view of a view, made if it is not one yet (waiting since
 * the batch that starts at since_lsn), with batch (NULL: none) added to its
 * waiting work.
 */
DeferredView *
retry_defer(ViewRecord *view, ViewBatch *batch, XLogRecPtr since_lsn, TimestampTz now)
{
	ViewRetry  *vr = view_retry(view->view_id, true);
	DeferredView *dv = vr->deferred;

	if (dv == NULL)
	{
		dv = MemoryContextAllocZero(retry_cxt, sizeof(DeferredView));
		dv->view_id = view->view_id;
		dv->cxt = AllocSetContextCreate(retry_cxt, "delta_join deferred view",
										ALLOCSET_DEFAULT_SIZES);
		dv->seen = key_set_create(dv->cxt);
		dv->since_lsn = since_lsn;
		dv->first_failure = now;
		dv->held_since = now;
		vr->deferred = dv;
	}
	if (batch != NULL)
		retry_add(dv, view, batch);
	return dv;
}

/*
 * What is left of a view's work (rest: NULL when nothing) becomes its work
 * waiting for the next batch, which tries it at once; the keys it waited
 * with, if any, are replaced (rest holds what is left of them).  With
 * progress (part of the work was done: its time slice ran out), the
 * failures counted so far are forgotten.
 */
DeferredView *
retry_rest(ViewRecord *view, DeferredView *dv, ViewBatch *rest, bool progress,
		   XLogRecPtr since_lsn, TimestampTz now)
{
	MemoryContext old_cxt = NULL;
	MemoryContext oldcxt;

	if (dv == NULL)
		dv = retry_defer(view, NULL, since_lsn, now);
	else
	{
		/* rest may share keys with the waiting work: copy, then free */
		old_cxt = dv->cxt;
		dv->cxt = AllocSetContextCreate(retry_cxt, "delta_join deferred view",
										ALLOCSET_DEFAULT_SIZES);
		dv->seen = key_set_create(dv->cxt);
		dv->batch = NULL;
	}
	if (rest != NULL)
		retry_add(dv, view, rest);
	if (old_cxt != NULL)
		MemoryContextDelete(old_cxt);

	if (progress)
	{
		dv->tries = dv->timeouts = dv->internal = 0;
		dv->first_failure = 0;
	}
	dv->next_try = now;
	if (dv->reason)
		pfree(dv->reason);
	oldcxt = MemoryContextSwitchTo(retry_cxt);
	dv->reason = rest == NULL || view_batch_nkeys(dv->batch) == 0 ?
		pstrdup("applying the rest of a large batch") :
		psprintf("applying the rest of a large batch: %lld keys left",
				 (long long) view_batch_nkeys(dv->batch));
	MemoryContextSwitchTo(oldcxt);
	return dv;
}

/*
 * Add a batch of a deferred view's to the work waiting, each key once.
 * Beyond delta_join.max_waiting_keys keys, the work becomes a recompute of
 * the whole view (ViewBatch.whole), and its keys are freed: a view held for
 * an hour of writes, or for a long backfill, or behind a backlog of
 * millions of changes, would otherwise keep every key they touched in the
 * worker's memory, and the worker of a database is one process that the
 * kernel may kill (taking the server through crash recovery).  Any view's
 * query can be recomputed whole (apply_full), as refresh() does, and the
 * result is the query under the batch's snapshot, whatever the keys were.
 */
static void
retry_add(DeferredView *dv, const ViewRecord *view, ViewBatch *batch)
{
	if (dv->batch == NULL)
	{
		/* weighed until a batch that is not joins it (view_batch_merge) */
		dv->batch = MemoryContextAllocZero(dv->cxt, sizeof(ViewBatch));
		dv->batch->view_id = dv->view_id;
		dv->batch->weighed = true;
	}
	view_batch_merge(dv->batch, batch, dv->seen, dv->cxt);
	if (!dv->batch->whole && view_batch_nkeys(dv->batch) > dj_max_waiting_keys)
	{
		ViewBatch	counts = *dv->batch;
		char	   *name = NULL;

		/* (a full recompute is whole anyway: nothing to say) */
		if (view->path != DJ_PATH_FULL && IsTransactionState())
			name = get_rel_name(view->target);
		if (view->path != DJ_PATH_FULL)
			ereport(LOG,
					(errmsg("delta_join view \"%s\" waits with more than %d dirty keys: they are dropped, and the view is recomputed whole when it is applied",
							name ? name : psprintf("%u", view->target), dj_max_waiting_keys),
					 errhint("Raise delta_join.max_waiting_keys to keep more keys in the apply worker's memory.")));
		MemoryContextReset(dv->cxt);
		dv->seen = key_set_create(dv->cxt);
		dv->batch = MemoryContextAllocZero(dv->cxt, sizeof(ViewBatch));
		dv->batch->view_id = dv->view_id;
		dv->batch->changes = counts.changes;
		dv->batch->commit_time = counts.commit_time;
		dv->batch->whole = true;
	}
}

/*
 * The keys the batch spilled for a deferred view join those waiting (a
 * full recompute needs none, nor a view to be recomputed whole), read a
 * chunk of max_keys at a time, each in memory freed before the next.
 */
void
retry_defer_spilled(DeferredView *dv, ViewRecord *view, int max_keys)
{
	MemoryContext chunk_cxt;
	MemoryContext oldcxt;
	ViewBatch  *chunk;
	bool		rewind = true;

	if (view->path == DJ_PATH_FULL || (dv->batch != NULL && dv->batch->whole))
		return;
	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join batch chunk",
									  ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(chunk_cxt);
	while ((chunk = decoding_batch_next_chunk(view->view_id, rewind, max_keys)) != NULL)
	{
		retry_add(dv, view, chunk);
		MemoryContextReset(chunk_cxt);
		rewind = false;
	}
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(chunk_cxt);
}

/* Another try of a deferred view failed: when to try next, and why */
void
retry_failed(DeferredView *dv, const ErrorData *error)
{
	int			backoff = RETRY_MIN_MS << Min(dv->tries, 10);
	MemoryContext oldcxt;

	dv->tries++;
	if (dv->first_failure == 0)
		dv->first_failure = GetCurrentTimestamp();
	if (error->sqlerrcode == ERRCODE_QUERY_CANCELED)
		dv->timeouts++;
	else
		dv->timeouts = 0;
	if (error->sqlerrcode != ERRCODE_INTERNAL_ERROR)
		dv->internal = 0;
	else if (dv->internal++ == 0)
		dv->internal_since = GetCurrentTimestamp();
	/* from the failure, not the start of the try: a try may wait a while */
	dv->next_try = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
											   Min(backoff, RETRY_MAX_MS));
	if (dv->reason)
		pfree(dv->reason);
	oldcxt = MemoryContextSwitchTo(retry_cxt);
	dv->reason = psprintf("retrying (%d tries): %s", dv->tries, error->message);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * Errors of one kind, in_a_row of them: enough once there are tries; the
 * error's message then says so, after what.
 */
static bool
gives_up_in_a_row(int in_a_row, int tries, const char *what, ErrorData *error)
{
	if (in_a_row < tries)
		return false;
	error->message = psprintf("%s %d times in a row: %s", what, in_a_row, error->message);
	return true;
}

/*
 * The most time one apply of a view may take (its statement timeout, in
 * ms; 0 for no bound): its lookup_timeout, bounded by max_retry_time.  The
 * apply runs the view's query, whose functions are its owner's: without
 * the bound, one long apply (a function that sleeps, a lookup_timeout of
 * weeks or 0) would hold every view of the database and the slot for as
 * long as any role asked.
 */
int
retry_apply_timeout(const ViewRecord *view)
{
	int			timeout_ms = view->options.lookup_timeout_ms;

	if (dj_max_retry_time_ms > 0 && (timeout_ms <= 0 || timeout_ms > dj_max_retry_time_ms))
		timeout_ms = dj_max_retry_time_ms;
	return timeout_ms;
}

/*
 * Has a deferred view been tried long enough?  A view that timed out
 * (lookup_timeout) RETRY_TIMEOUT_TRIES times in a row, that met internal
 * errors in a row for RETRY_INTERNAL_MS (and RETRY_INTERNAL_TRIES times),
 * that has waited
 * for locks for longer than its lookup_timeout, or that has held the slot
 * back for longer than max_retry_time, goes to error: the last try's
 * error's message then says why.
 */
bool
retry_gives_up(DeferredView *dv, ViewRecord *view, ErrorData *error, TimestampTz now)
{
	if (retry_held_too_long(dv, now, &error))
		return true;
	if (error->sqlerrcode == ERRCODE_QUERY_CANCELED)
		return gives_up_in_a_row(dv->timeouts, RETRY_TIMEOUT_TRIES,
								 "lookup_timeout expired", error);
	if (error->sqlerrcode == ERRCODE_INTERNAL_ERROR)
		return TimestampDifferenceExceeds(dv->internal_since, now, RETRY_INTERNAL_MS) &&
			gives_up_in_a_row(dv->internal, RETRY_INTERNAL_TRIES, "failed", error);
	if (view->options.lookup_timeout_ms <= 0 ||
		!TimestampDifferenceExceeds(dv->first_failure, now, view->options.lookup_timeout_ms))
		return false;
	error->message = psprintf("could not be applied for longer than its lookup_timeout: %s",
							  error->message);
	return true;
}

/*
 * Has a deferred view held the slot back for longer than
 * delta_join.max_retry_time?  Then it must go to error: *error (made when
 * NULL, else its message extended) says why, and what to do.
 */
bool
retry_held_too_long(DeferredView *dv, TimestampTz now, ErrorData **error)
{
	char	   *message;

	if (dj_max_retry_time_ms <= 0 ||
		!TimestampDifferenceExceeds(dv->held_since, now, dj_max_retry_time_ms))
		return false;
	message = psprintf("held back the replication slot for longer than delta_join.max_retry_time (%d ms)",
					   dj_max_retry_time_ms);
	if (*error == NULL)
	{
		*error = palloc0(sizeof(ErrorData));
		(*error)->sqlerrcode = ERRCODE_QUERY_CANCELED;
		(*error)->message = message;
	}
	else
		(*error)->message = psprintf("%s: %s", message, (*error)->message);
	(*error)->hint = pstrdup("Remove what keeps the view from being applied (a lock held on its target, a max_batch_size too small for its changes), then rebuild it with delta_join.refresh(); a superuser may raise delta_join.max_retry_time.");
	return true;
}

/* Drop a deferred view's waiting work: it was applied, or given up. */
void
retry_forget(DeferredView *dv)
{
	view_retry(dv->view_id, false)->deferred = NULL;
	retry_free(dv);
}

/*
 * Forget the views that views (the catalog's) no longer has: their view or
 * its target was dropped, and nothing waits for them any more -- least of
 * all the slot.
 */
void
retry_forget_dropped(List *views)
{
	ListCell   *lc;

	foreach(lc, retries)
	{
		ViewRetry  *vr = lfirst(lc);

		if (catalog_view_in(views, vr->view_id) != NULL)
			continue;
		retries = foreach_delete_current(retries, lc);
		if (vr->deferred != NULL)
			retry_free(vr->deferred);
		pfree(vr);
	}
}

/* Free a deferred view that is no longer its view's */
static void
retry_free(DeferredView *dv)
{
	MemoryContextDelete(dv->cxt);
	if (dv->reason)
		pfree(dv->reason);
	pfree(dv);
}

/* ----------------
 * Views backfilling: a concurrent create or refresh runs (ops/concurrent.c)
 * ----------------
 */

/*
 * Hold a view's batch (NULL: none) back, with its deferred view's work (dv,
 * or a new one), until retry_release, saying why (reason): a backfilling
 * view's keys must be applied after the backfill, never before it, and
 * never lost -- the slot is not confirmed past the first batch it holds,
 * so a worker that starts again decodes them again.  The view is due again
 * every RETRY_HELD_POLL_MS: the backfill's end is a write to delta_join's
 * catalog, which wakes no batch by itself (no source changed), and until a
 * batch sees the view active its keys stay held, the slot with them, and
 * wait() waits.
 */
DeferredView *
retry_hold(ViewRecord *view, DeferredView *dv, ViewBatch *batch, XLogRecPtr since_lsn,
		   TimestampTz now, const char *reason)
{
	if (dv == NULL)
		dv = retry_defer(view, NULL, since_lsn, now);
	if (batch != NULL)
		retry_add(dv, view, batch);
	dv->held = true;
	dv->next_try = TimestampTzPlusMilliseconds(now, RETRY_HELD_POLL_MS);
	if (dv->reason == NULL || strcmp(dv->reason, reason) != 0)
	{
		if (dv->reason)
			pfree(dv->reason);
		dv->reason = MemoryContextStrdup(retry_cxt, reason);
	}
	return dv;
}

/*
 * The view's keys are no longer held: what it held is applied at once, and
 * its failures and the time it holds the slot are counted from its first
 * try (not from when it was held).
 */
void
retry_release(int view_id, TimestampTz now)
{
	DeferredView *dv = retry_find(view_id);

	if (dv == NULL || !dv->held)
		return;
	elog(DEBUG1, "delta_join view %d: the keys it held (%s) are applied now",
		 view_id, dv->reason ? dv->reason : "");
	dv->held = false;
	dv->next_try = now;
	dv->first_failure = 0;
	dv->held_since = now;
}

/* ----------------
 * Full recomputes: at most once per refresh_interval
 * ----------------
 */

/*
 * When a full-recompute view may recompute next (now or before: at once),
 * dv being its deferred view, if any.
 */
TimestampTz
retry_recompute_due(ViewRecord *view, DeferredView *dv)
{
	ViewRetry  *vr = view_retry(view->view_id, false);

	/* (0: not since the worker started) */
	TimestampTz due = TimestampTzPlusMilliseconds(vr ? vr->recomputed_at : 0,
												  view->options.refresh_interval_ms);

	/*
	 * The changes it waits with hold the slot back: recompute once half of
	 * max_retry_time has passed, whatever its refresh_interval, so that a
	 * try that fails has the other half.
	 */
	if (dv != NULL && dj_max_retry_time_ms > 0)
		due = Min(due, TimestampTzPlusMilliseconds(dv->held_since, dj_max_retry_time_ms / 2));
	return due;
}

/*
 * A full-recompute view waits until it is due (retry_recompute_due), its
 * batch (NULL: none) joining its deferred view's work (dv, or a new one).
 */
DeferredView *
retry_wait_recompute(ViewRecord *view, DeferredView *dv, ViewBatch *batch,
					 XLogRecPtr since_lsn, TimestampTz now)
{
	if (dv == NULL)
		dv = retry_defer(view, batch, since_lsn, now);
	dv->next_try = retry_recompute_due(view, dv);
	if (dv->reason == NULL)
		dv->reason = MemoryContextStrdup(retry_cxt, "waiting for its refresh_interval");
	return dv;
}

/* A full-recompute view recomputed at that time */
void
retry_recomputed(int view_id, TimestampTz at)
{
	view_retry(view_id, true)->recomputed_at = at;
}

/* ----------------
 * Views whose shares conflicted (parallel apply)
 * ----------------
 */

/* May this large batch share the view?  Counts down its backoff. */
bool
retry_shares_view(int view_id)
{
	ViewRetry  *vr = view_retry(view_id, false);

	if (vr == NULL || vr->share_skip == 0)
		return true;
	vr->share_skip--;
	return false;
}

/* A share of the view failed: it is applied alone for a while */
void
retry_share_failed(int view_id)
{
	view_retry(view_id, true)->share_skip = SHARE_BACKOFF;
}
