/*-------------------------------------------------------------------------
 *
 * apply_view.c
 *	  Apply one view's batch, safely: the one entry the apply worker and its
 *	  helpers call (apply_view).
 *
 * "Safely" means: as the target's owner, with the view's pinned settings
 * (runas.c) and its lookup_timeout, in a subtransaction that an error rolls
 * back (the error is returned, with whether another try may not meet it:
 * VIEW_DEFERRED, or VIEW_FAILED); after locking what the view reads and
 * writes, under the batch's snapshot when it can be used (VIEW_LATER when
 * not); a piece at a time, each seeing what the earlier ones wrote, and for
 * no longer than the view's time slice when asked (VIEW_PARTIAL, the rest
 * returned); with an error context naming the view and the batch, and
 * the source and key the appliers are at (apply_error.c).
 *
 * IDENTIFICATION
 *	  src/apply/apply_view.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "access/htup_details.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"

#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/apply_view.h"
#include "apply/plan_cache.h"
#include "base/compat.h"
#include "base/runas.h"
#include "registry/catalog.h"

#define APPLY_LOCK_TIMEOUT		"1s"	/* longest wait for one lock */
#define APPLY_DEADLOCK_TIMEOUT	"50ms"	/* find deadlocks before users do */
#define APPLY_SLICE_MS			1000	/* most time one view's apply takes
										 * in a batch while others wait */
#define APPLY_PIECE_MS			50	/* time a piece of it should take */
#define APPLY_PIECE_FIRST_KEYS	16	/* keys of a view's first piece */
#define APPLY_PIECE_MAX_KEYS	(1 << 20)
#define APPLY_CHUNK_BATCHES		10	/* a view that reads its keys a chunk at
										 * a time (pieces_together) reads as
										 * many as this many batches hold */
#define APPLY_MALLOC_MMAP_BYTES	(32 * 1024 * 1024)	/* see apply_session_setup */
#define APPLY_MALLOC_KEEP_BYTES	(64 * 1024 * 1024)
#define APPLY_IDLE_TRIM_MS		10000	/* idle time before the kept memory
										 * is given back */

/* When the session last applied something, since the memory was given back */
static TimestampTz memory_kept_at = 0;

/*
 * The settings of a session that applies views: the apply worker's, and its
 * helpers'.
 */
void
apply_session_setup(void)
{
	/*
	 * Batches commit asynchronously: the slot is only confirmed past a batch
	 * once its commit is flushed (worker_confirm), so a batch lost in a
	 * crash is decoded again.
	 */
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * Whatever the database or role says: each view's apply takes its own
	 * snapshot once what it reads is locked (apply_view), which only
	 * READ COMMITTED allows; and the worker writes.
	 */
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET,
					PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);

	/* never wait long for a lock, and be the one a deadlock stops */
	SetConfigOption("lock_timeout", APPLY_LOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("deadlock_timeout", APPLY_DEADLOCK_TIMEOUT, PGC_SUSET, PGC_S_OVERRIDE);

	/*
	 * The worker runs as a superuser: its own catalog statements resolve
	 * names in pg_catalog only, never in schemas users can create objects in.
	 */
	SetConfigOption("search_path", RUNAS_SEARCH_PATH, PGC_SUSET, PGC_S_SESSION);

	/*
	 * Each batch allocates memory in proportion to its changes (its keys,
	 * the executor state and hash tables of its statements) and frees it
	 * all at its end.  By default glibc gives memory back to the kernel as
	 * soon as more than a few megabytes are free at the top of its heap,
	 * and maps blocks of more than 128 kB (up to its adaptive limit) on
	 * their own: the next batch then faults every page of them in again.
	 * That was 2,600 page faults, and half of the time until fresh, for a
	 * batch of 10,000 changed rows of an aggregate over a join.  Memory
	 * freed is kept for the next batch instead, up to
	 * APPLY_MALLOC_KEEP_BYTES at the top of the heap (and what lies free
	 * below live memory), until the worker is idle (apply_session_idle);
	 * blocks of APPLY_MALLOC_MMAP_BYTES and more are still mapped on their
	 * own and given back when freed.
	 */
#ifdef M_TRIM_THRESHOLD
	mallopt(M_MMAP_THRESHOLD, APPLY_MALLOC_MMAP_BYTES);
	mallopt(M_TRIM_THRESHOLD, APPLY_MALLOC_KEEP_BYTES);
#endif
}

/* The session applied something: what it freed is kept (apply_session_idle) */
void
apply_session_worked(void)
{
	memory_kept_at = GetCurrentTimestamp();
}

/*
 * Called as the session waits for work.  Once it has applied nothing for
 * APPLY_IDLE_TRIM_MS, give the memory kept for the next batch
 * (apply_session_setup) back to the kernel, all of it that is free, so that
 * a worker that once applied a large batch does not hold on to it while
 * there is nothing to do.  (A view written every few seconds keeps it.)
 */
void
apply_session_idle(void)
{
	if (memory_kept_at == 0 ||
		!TimestampDifferenceExceeds(memory_kept_at, GetCurrentTimestamp(), APPLY_IDLE_TRIM_MS))
		return;
#ifdef M_TRIM_THRESHOLD
	malloc_trim(0);
#endif
	memory_kept_at = 0;
}


/*
 * Errors that another try of the same view may not meet.  An internal
 * error (XX000) is one: PostgreSQL raises some when a catalog lookup races
 * a concurrent DDL -- "cache lookup failed for publication" when a DROP
 * PUBLICATION naming the target commits while the view writes it --; the
 * next try reads the catalog anew.  So is an operator's intervention (57)
 * that reaches the apply as an error: a parallel worker of a whole-query
 * recompute terminated (pg_terminate_backend), whose end its leader
 * raises (the worker's own termination ends the worker instead).  One
 * that comes back every try is a real error, and retry.c gives up once it
 * has come back for seconds.
 */
static bool
error_is_passing(int sqlerrcode)
{
	return ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_TRANSACTION_ROLLBACK ||
		ERRCODE_TO_CATEGORY(sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION ||
		sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE ||
		sqlerrcode == ERRCODE_QUERY_CANCELED ||
		sqlerrcode == ERRCODE_INTERNAL_ERROR;
}

/*
 * The view's lookup_timeout (STATEMENT_TIMEOUT) and the worker's
 * lock_timeout may go off together.  One of them raises the error that ends
 * the view's apply; the other, going off while that error unwinds, leaves a
 * cancel pending that would end the worker's next step instead.  It
 * belonged to the view's apply, which is over: forget it.
 */
static void
forget_own_cancel(void)
{
	bool		timed_out = get_timeout_indicator(LOCK_TIMEOUT, true);

	timed_out |= get_timeout_indicator(STATEMENT_TIMEOUT, true);
	if (timed_out)
		QueryCancelPending = false;
}

/*
 * The keys of a view's work, a piece at a time: first the keys the capture
 * spilled for it (when its work includes them), a chunk at a time, then
 * its batch in memory.  Pieces are applied one after another in the
 * view's subtransaction (worker_apply_view), each seeing what the earlier
 * ones wrote.
 */
typedef struct Pieces
{
	ViewRecord *view;
	SpillReader read_spilled;	/* the spilled keys' reader */
	int			chunk_keys;		/* keys of a chunk it reads */
	bool		spilled;		/* chunks of spilled keys are still to read */
	bool		rewind;			/* the first chunk is still to read */
	MemoryContext chunk_cxt;	/* holds the chunk being taken apart */
	ViewBatch  *from;			/* a copy of the chunk or batch being taken
								 * apart, or NULL */
	bool		first;			/* no piece was taken from it yet */
	ViewBatch  *batch;			/* the batch in memory, once the chunks are
								 * read; NULL once taken */
	bool		chunked;		/* every key was handed out as chunks
								 * (pieces_together) */
	int			timeout_ms;		/* the view's lookup timeout, 0 for none */
	bool		forget_rows;	/* not under the batch's snapshot: the rows
								 * decoding kept are not used */
} Pieces;

/*
 * The next piece of at most n keys, in the pieces' chunk memory; NULL when
 * every key was taken.
 */
static ViewBatch *
pieces_next(Pieces *pc, int64 n)
{
	while (pc->from == NULL || (!pc->first && view_batch_nkeys(pc->from) == 0))
	{
		MemoryContext oldcxt;

		MemoryContextReset(pc->chunk_cxt);
		oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		pc->from = NULL;
		if (pc->spilled)
		{
			pc->from = pc->read_spilled(pc->view->view_id, pc->rewind, pc->chunk_keys);
			pc->rewind = false;
			pc->spilled = (pc->from != NULL);
		}
		if (pc->from == NULL && pc->batch != NULL)
		{
			pc->from = view_batch_copy(pc->batch);
			pc->batch = NULL;
		}
		MemoryContextSwitchTo(oldcxt);
		if (pc->from == NULL)
			return NULL;
		pc->first = true;
	}
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		ViewBatch  *piece = view_batch_take(pc->from, n, pc->first);

		MemoryContextSwitchTo(oldcxt);
		pc->first = false;
		return piece;
	}
}

/*
 * Every key not taken yet, as one batch in CurrentMemoryContext (each key
 * once, without its row); NULL when none is left.
 */
static ViewBatch *
pieces_rest(Pieces *pc)
{
	ViewBatch  *rest = palloc0(sizeof(ViewBatch));
	HTAB	   *seen = key_set_create(CurrentMemoryContext);
	MemoryContext cxt = CurrentMemoryContext;

	rest->view_id = pc->view->view_id;
	if (pc->from != NULL)
		view_batch_merge(rest, pc->from, seen, cxt);
	while (pc->spilled)
	{
		ViewBatch  *chunk;
		MemoryContext oldcxt;

		MemoryContextReset(pc->chunk_cxt);
		oldcxt = MemoryContextSwitchTo(pc->chunk_cxt);
		chunk = pc->read_spilled(pc->view->view_id, pc->rewind, pc->chunk_keys);
		MemoryContextSwitchTo(oldcxt);
		pc->rewind = false;
		pc->spilled = (chunk != NULL);
		if (chunk != NULL)
			view_batch_merge(rest, chunk, seen, cxt);
	}
	if (pc->batch != NULL)
		view_batch_merge(rest, pc->batch, seen, cxt);
	hash_destroy(seen);
	return rest;
}

/*
 * The lookup timeout bounds each piece of a view's spilled keys, not the
 * whole, which no time slice can cut short: re-armed for the next, unless
 * it fired (its cancel is then on its way).
 */
static void
pieces_rearm_timeout(Pieces *pc)
{
	if (pc->timeout_ms > 0 && !get_timeout_indicator(STATEMENT_TIMEOUT, false))
	{
		disable_timeout(STATEMENT_TIMEOUT, false);
		enable_timeout_after(STATEMENT_TIMEOUT, pc->timeout_ms);
	}
}

/*
 * ChunkReader of a view's keys read a chunk at a time: each chunk whole,
 * within the lookup timeout, as any piece of spilled keys
 */
static ViewBatch *
pieces_next_chunk(void *arg)
{
	Pieces	   *pc = (Pieces *) arg;
	ViewBatch  *chunk;

	pieces_rearm_timeout(pc);
	chunk = pieces_next(pc, PG_INT64_MAX);
	if (chunk != NULL && pc->forget_rows)
		view_batch_forget_rows(chunk);
	return chunk;
}

/*
 * Can a view whose groups are found through joins read its batch's keys a
 * chunk at a time?  When one source changed, and was not truncated: the
 * groups that the images of its changed rows lead to are the union of
 * those that each chunk's lead to, and an additive batch's deltas the sums
 * of its chunks' (apply_agg.c).  Two sources changed need all their images
 * at once.
 */
static bool
pieces_chunk_by_chunk(Pieces *pc)
{
	DeltaPlan  *plan;

	if (pc->from != NULL || pc->batch == NULL || !pc->spilled || pc->batch->whole ||
		list_length(pc->batch->sources) != 1 ||
		((SourceBatch *) linitial(pc->batch->sources))->truncated)
		return false;
	plan = plan_cache_get(pc->view);
	return plan->kind == DJ_KIND_AGGREGATE && plan->path == DJ_PATH_JOIN_GROUPS;
}

/* A copy, in CurrentMemoryContext, of rows held back (MinimalTuple) */
static List *
held_back_copy(List *held_back)
{
	List	   *copy = NIL;
	ListCell   *lc;

	foreach(lc, held_back)
		copy = lappend(copy, heap_copy_minimal_tuple_compat(lfirst(lc)));
	return copy;
}

/*
 * Every key of the view's work as one piece, the first time; NULL after.
 * For a view whose dirty groups are found from the images of all its
 * sources' changes together (keyed recompute of groups through joins,
 * apply_agg.c), and a retract-mode outer join whose batch changed two
 * sources or more, which notes the partners of all its changed rows
 * before it writes (apply_view_together).  A batch of groups through
 * joins that spilled keys of one source only is handed out as a piece
 * without keys that reads them a chunk at a time (ViewBatch.next_chunk):
 * a transaction of a million rows is then never in memory at once.
 */
static ViewBatch *
pieces_together(Pieces *pc)
{
	MemoryContext gather_cxt;
	MemoryContext oldcxt;
	ViewBatch  *all;
	bool		weighed;

	if (pc->chunked || (pc->from == NULL && pc->batch == NULL && !pc->spilled))
		return NULL;

	if (pieces_chunk_by_chunk(pc))
	{
		SourceBatch *sb = palloc(sizeof(SourceBatch));

		all = palloc(sizeof(ViewBatch));
		*all = *pc->batch;
		*sb = *(SourceBatch *) linitial(pc->batch->sources);
		sb->keys = NIL;
		all->sources = list_make1(sb);
		all->next_chunk = pieces_next_chunk;
		all->next_chunk_arg = pc;
		pc->chunked = true;

		/*
		 * Each chunk costs a finder or delta query, whose plan reads the
		 * other sources: chunks of the worker's batch size would make many
		 * small ones.  (10 batches of the default size: 100,000 keys, some
		 * 30 MB in memory.)
		 */
		pc->chunk_keys = (int) Min((int64) pc->chunk_keys * APPLY_CHUNK_BATCHES,
								   APPLY_PIECE_MAX_KEYS);
		return all;
	}

	/* the batch alone: as it is, weights and all */
	if (pc->from == NULL && pc->batch != NULL && !pc->spilled)
	{
		all = pc->batch;
		pc->batch = NULL;
		return all;
	}

	/* with its spilled keys, whose weights the merge sums */
	weighed = (pc->from == NULL && pc->batch != NULL && pc->batch->weighed);

	/*
	 * pieces_rest reads the spilled chunks through the chunk memory, which
	 * it resets: gather them elsewhere, in memory that then goes with the
	 * chunk memory.
	 */
	gather_cxt = AllocSetContextCreate(CurrentMemoryContext, "delta_join pieces together",
									   ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(gather_cxt);
	pc->from = NULL;
	all = pieces_rest(pc);
	all->weighed = weighed;
	pc->batch = NULL;
	MemoryContextSwitchTo(oldcxt);
	MemoryContextReset(pc->chunk_cxt);
	MemoryContextSetParent(gather_cxt, pc->chunk_cxt);
	return all;
}

/*
 * How many keys a view's next piece takes, learned from its last pieces: a
 * piece should take about APPLY_PIECE_MS, so that the view's time slice is
 * checked often enough, and not much less, so that a piece's fixed cost
 * (the target's writer, the lookups' scans) stays small.
 */
typedef struct PieceSize
{
	int			view_id;
	int64		keys;
} PieceSize;

static List *piece_sizes = NIL;	/* PieceSize *, in TopMemoryContext */

static PieceSize *
piece_size(int view_id)
{
	PieceSize  *ps;
	ListCell   *lc;
	MemoryContext oldcxt;

	foreach(lc, piece_sizes)
	{
		if (((PieceSize *) lfirst(lc))->view_id == view_id)
			return lfirst(lc);
	}
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);	/* helpers have no worker_cxt */
	ps = palloc(sizeof(PieceSize));
	ps->view_id = view_id;
	ps->keys = APPLY_PIECE_FIRST_KEYS;
	piece_sizes = lappend(piece_sizes, ps);
	MemoryContextSwitchTo(oldcxt);
	return ps;
}

static void
piece_took(PieceSize *ps, int64 keys, long ms)
{
	if (keys < ps->keys)
		return;					/* the last piece: says little */
	if (ms < APPLY_PIECE_MS / 4)
		ps->keys = Min(ps->keys * 2, APPLY_PIECE_MAX_KEYS);
	else if (ms > APPLY_PIECE_MS * 2)
		ps->keys = Max(ps->keys / 2, 1);
}

/*
 * How many keys the next piece takes: as many as the last pieces say, and
 * no more than the view's own max_batch_size leaves (keys_left).  Once
 * that is spent, the work that must still be done before the slice ends
 * -- the keys spilled to disk, the rows held back -- goes on in pieces of
 * the same size, not of one key each, each paying a piece's fixed cost
 * (the writer, the lookups' scans): a 100,000-key batch that spilled took
 * six times as long.
 */
static int64
piece_keys(const PieceSize *ps, int64 keys_left)
{
	return keys_left > 0 ? Min(ps->keys, keys_left) : ps->keys;
}

/*
 * Apply a view's work, as the target's owner with the view's settings and
 * its lookup timeout, in a subtransaction: on error it is rolled back and
 * the error returned in *error (in CurrentMemoryContext), its context
 * naming where it was raised (apply_error.c).
 *
 * req->snapshot is the batch's, under which the view is applied (seeing what
 * the batch's earlier views wrote), or NULL: a snapshot taken once what the
 * view reads is locked (a helper's share, a view applied again alone).  A
 * view whose tables or catalog row were written by a transaction the
 * batch's snapshot does not see -- created, refreshed, rewritten or
 * truncated after it was taken -- cannot be applied under it (a rewrite is
 * not MVCC-safe: to that snapshot the table looks empty): VIEW_LATER, with
 * all the work in *rest for the next batch (rest may be NULL when not
 * sliced: the caller then keeps the work it passed).
 *
 * With req->sliced, the view's work is applied a piece at a time and stops
 * after its time slice (APPLY_SLICE_MS, or half its lookup_timeout if
 * that is less), or once it applied its max_batch_size keys when that is
 * less than the worker's (req->chunk_keys), committing
 * what it did with the batch: VIEW_PARTIAL, and what is left in *rest (in
 * CurrentMemoryContext), so that other views do not wait behind one view's
 * large batch and each try makes progress.  (A view's max_batch_size bounds
 * its own part of each batch only: the batch itself is the worker's, see
 * batch_policy_for.)  A recompute of the whole (full recompute, an
 * aggregate without GROUP BY) is one piece; the keys the capture spilled
 * for the view are all applied before its slice may end, each piece of
 * them within the lookup timeout.
 *
 * The keys a capture spilled for the view (req->read_spilled) are part of
 * its work, applied first.
 */
ViewResult
apply_view(const ApplyRequest *req, ApplyCounts *counts, ViewBatch **rest, ErrorData **error)
{
	ViewRecord *view = req->view;
	Snapshot	snapshot = req->snapshot;
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile ViewResult result = VIEW_APPLIED;
	PieceSize  *volatile ps = piece_size(view->view_id);
	Pieces		pc;
	ErrorContextCallback errcallback;

	/*
	 * Weights are added only once, only under the batch's snapshot, and
	 * only to what the worker alone wrote: a target that others may write
	 * (manual_writes) holds sums no weight can be added to.
	 */
	if (req->batch != NULL &&
		(!req->exactly_once || snapshot == NULL || view->options.manual_writes))
		req->batch->weighed = false;

	memset(&pc, 0, sizeof(pc));
	pc.view = view;
	pc.read_spilled = req->read_spilled;
	pc.chunk_keys = req->chunk_keys;
	pc.timeout_ms = req->timeout_ms;
	pc.spilled = req->read_spilled != NULL && view->path != DJ_PATH_FULL &&
		!(req->batch != NULL && req->batch->whole);
	pc.rewind = true;
	pc.batch = req->batch;

	/*
	 * The rows decoding kept are the rows as the batch's snapshot sees
	 * them.  Under a snapshot of its own, newer (a helper's share, a view
	 * applied again alone, a chunk of a shared round), a kept row could be
	 * joined with rows a later transaction wrote to the other sources -- a
	 * row no snapshot ever saw: the appliers fetch each row instead.
	 */
	pc.forget_rows = (snapshot == NULL);
	pc.chunk_cxt = AllocSetContextCreate(oldcxt, "delta_join pieces",
										 ALLOCSET_DEFAULT_SIZES);

	apply_error_begin(&errcallback, view, req->end_lsn);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);

	PG_TRY();
	{
		RunAs		runas;
		TimestampTz started = GetCurrentTimestamp();
		int			slice_ms = APPLY_SLICE_MS;
		bool		whole = (view->path == DJ_PATH_FULL ||
							 (req->batch != NULL && req->batch->whole));
		int64		keys_left = PG_INT64_MAX;
		int64		keys_applied = 0;
		int			npieces = 0;
		bool		together;
		ViewBatch  *piece;
		MemoryContext piece_cxt;
		List	   *held_back = NIL;

		/*
		 * A view that asked for batches smaller than the worker's takes at
		 * most that many of its keys a batch.  Only smaller: a view made
		 * with the default takes its whole part, however large (a
		 * transaction's keys then show together, time slices aside).
		 */
		if (view->options.max_batch_size < req->chunk_keys)
			keys_left = view->options.max_batch_size;

		runas_begin_view(runas_target_owner(view->target), view->settings, &runas);
		if (req->timeout_ms > 0)
		{
			enable_timeout_after(STATEMENT_TIMEOUT, req->timeout_ms);
			slice_ms = Min(slice_ms, req->timeout_ms / 2);
		}

		/*
		 * The snapshot is used once what the view reads is locked: a
		 * create_view or refresh() that held the target is over, and its
		 * catalog row tells whether the snapshot sees it.
		 */
		PushActiveSnapshot(GetTransactionSnapshot());
		if (!plan_cache_lock_view(view, snapshot) ||
			(snapshot != NULL && catalog_view_written_after(view, snapshot)))
			result = VIEW_LATER;
		together = apply_view_together(view, req->batch);
		whole |= apply_view_whole(view) || together;
		PopActiveSnapshot();

		if (result == VIEW_APPLIED)
		{
			if (snapshot != NULL)
			{
				PushCopiedSnapshot(snapshot);
				UpdateActiveSnapshotCommandId();
			}
			else
				PushActiveSnapshot(GetTransactionSnapshot());

			piece_cxt = AllocSetContextCreate(oldcxt, "delta_join piece",
											  ALLOCSET_DEFAULT_SIZES);
			while ((piece = together ? pieces_together(&pc) :
					pieces_next(&pc, whole ? PG_INT64_MAX :
								piece_keys(ps, req->sliced ? keys_left : PG_INT64_MAX))) != NULL)
			{
				TimestampTz piece_started = GetCurrentTimestamp();

				/*
				 * What a piece makes -- its writer, its region queries and
				 * their plans -- goes with it: a view's work of many pieces
				 * (one key each, under a view's max_batch_size of 1) kept
				 * them all, gigabytes for a few thousand keys.  The rows
				 * held back go on to the next piece.
				 */
				if (pc.forget_rows)
					view_batch_forget_rows(piece);
				MemoryContextSwitchTo(piece_cxt);
				apply_view_batch(view, piece, counts, &held_back);
				MemoryContextSwitchTo(oldcxt);
				held_back = held_back_copy(held_back);
				MemoryContextReset(piece_cxt);

				/* the next piece sees what this one wrote */
				CommandCounterIncrement();
				UpdateActiveSnapshotCommandId();
				piece_took(ps, view_batch_nkeys(piece),
								  TimestampDifferenceMilliseconds(piece_started,
																  GetCurrentTimestamp()));
				keys_left -= view_batch_nkeys(piece);
				keys_applied += view_batch_nkeys(piece);
				npieces++;

				/*
				 * Spilled keys are not left for later: the rest would be
				 * every key not applied yet, read back into memory at once,
				 * the very thing spilling avoids.  Once they are applied,
				 * the rest is at most the part of the batch in memory.
				 * Until then the lookup timeout bounds each piece.
				 */
				if (pc.spilled)
					pieces_rearm_timeout(&pc);

				/*
				 * A time slice ends after a piece, not while rows are held
				 * back: the keys that free their values may be among the
				 * rest.
				 */
				if (req->sliced && !whole && !pc.spilled && held_back == NIL &&
					(keys_left <= 0 ||
					 TimestampDifferenceExceeds(started, GetCurrentTimestamp(), slice_ms)))
				{
					MemoryContextSwitchTo(oldcxt);
					*rest = pieces_rest(&pc);
					if (view_batch_nkeys(*rest) > 0)
						result = VIEW_PARTIAL;
					break;
				}
			}
			if (held_back != NIL)
				apply_view_held_back(view, held_back, counts);
			MemoryContextDelete(piece_cxt);
			if (npieces > 1)
				elog(DEBUG1, "delta view \"%s\": %lld keys applied in %d pieces",
					 catalog_view_name(view), (long long) keys_applied, npieces);
			PopActiveSnapshot();
		}

		disable_timeout(STATEMENT_TIMEOUT, true);
		forget_own_cancel();
		runas_end(&runas);

		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		/*
		 * All of the work waits.  A caller that gave no rest (the worker's
		 * own share of a shared view) still has it, and applies the view
		 * again alone once the round is over (share_settle).
		 */
		if (result == VIEW_LATER && rest != NULL)
			*rest = pieces_rest(&pc);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		disable_timeout(STATEMENT_TIMEOUT, true);
		apply_error_end(&errcallback);
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		forget_own_cancel();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;

		memset(counts, 0, sizeof(ApplyCounts));
		*error = edata;
		result = error_is_passing(edata->sqlerrcode) ? VIEW_DEFERRED : VIEW_FAILED;
		/* a piece that ran out of time: the next try takes smaller ones */
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ps->keys = Max(ps->keys / 4, 1);
		/*
		 * a share that fails (a helper's, the worker's own) is applied
		 * again by the worker alone, at once
		 */
		if (result == VIEW_DEFERRED && !req->quiet)
			ereport(LOG,
					(errmsg("delta view %s could not be applied now, trying again later: %s",
							dj_message_name(catalog_view_name(view)), edata->message),
					 edata->context ? errcontext("%s", edata->context) : 0));
	}
	PG_END_TRY();
	apply_error_end(&errcallback);

	MemoryContextDelete(pc.chunk_cxt);
	return result;
}
