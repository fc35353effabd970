/*-------------------------------------------------------------------------
 *
 * parallel.c
 *	  Parallel apply: the apply worker's helpers, and the rounds in which
 *	  they apply shares of a batch (parallel.h says how a round goes).
 *
 * Helpers are dynamic background workers the apply worker (the leader)
 * starts when a batch first asks for them, delta_join.apply_workers - 1 of
 * them, and stops when it exits; one that dies is started again at the next
 * round.  They share with the leader a small dynamic shared memory segment,
 * the pool: one slot per helper, holding its state and the task it is
 * given.  A task is a segment of its own, made by the leader for one round:
 * the helper's share of each view, as the views' ids and their dirty keys'
 * images (batch.c), followed by room for what applying each share did.
 *
 * A helper applies its task in one transaction, each view in its own
 * subtransaction as the view's target's owner with the view's settings,
 * exactly as the leader applies a view (apply_view); a view whose
 * share fails is only reported, not retried: the leader applies that view
 * again whole.  A helper did not see the batches the leader applied alone,
 * so its lookup caches are emptied before every share.
 *
 * IDENTIFICATION
 *	  src/process/parallel.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>

#include "access/xact.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/spin.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "apply/plan_cache.h"
#include "registry/catalog.h"
#include "base/shmem.h"
#include "process/launcher.h"
#include "process/parallel.h"
#include "process/retry.h"
#include "apply/apply_view.h"

#define HELPER_IDLE_MS			1000	/* an idle helper looks for its leader */
#define HELPER_IDLE_EXIT_MS		60000	/* an idle helper gives its slot back */
#define HELPER_START_RETRY_MS	10000	/* after a helper could not be started,
										 * or ended without being asked */
#define ROUND_NO_TIMEOUT_MS		600000	/* a share of a view without
										 * timeout (retry_apply_timeout) */
#define ROUND_POLL_MS			100 /* the leader looks at its helpers */
#define SHARE_MESSAGE_LEN		256

int			dj_apply_workers = 1;

/* Define delta_join.apply_workers (_PG_init) */
void
parallel_define_settings(void)
{
	DefineCustomIntVariable("delta_join.apply_workers",
							"Processes that apply a database's large batches at once.",
							"The apply worker and apply_workers - 1 helpers, each "
							"with a share of the batch, committed apart: readers "
							"may see part of a batch.  1 (the default) keeps each "
							"batch in one transaction.",
							&dj_apply_workers,
							1,
							1, PARALLEL_MAX_HELPERS + 1,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
}

/* This process is a helper (it applies shares, quietly) */
bool		am_helper = false;

/* A helper's slot in the pool */
typedef enum SlotState
{
	SLOT_EMPTY,					/* no helper runs, or it is starting */
	SLOT_IDLE,					/* the helper waits for a task */
	SLOT_TASK,					/* it has one (task) */
	SLOT_DONE,					/* it committed it */
	SLOT_EXITED					/* it left, idle for a long time */
} SlotState;

/*
 * A helper owns its slot while the slot's generation is the one it was
 * started with: the leader moves the generation on when it gives the slot
 * to a new helper or gives up on the old one, which then writes nothing
 * there any more and exits.
 */
typedef struct HelperSlot
{
	uint32		generation;
	SlotState	state;
	bool		stop;			/* the helper is to exit */
	pid_t		pid;
	Latch	   *latch;
	dsm_handle	task;
} HelperSlot;

typedef struct HelperPool
{
	slock_t		mutex;			/* protects the slots */
	Oid			dboid;
	pid_t		leader_pid;
	Latch	   *leader_latch;
	HelperSlot	slots[PARALLEL_MAX_HELPERS];
} HelperPool;

/* A task's segment: this header, its views' shares, then their results */
typedef struct TaskHeader
{
	XLogRecPtr	end_lsn;
	int			nviews;
	Size		data_len;
} TaskHeader;

typedef struct ShareResult
{
	int			view_id;
	bool		applied;
	ApplyCounts counts;
	char		message[SHARE_MESSAGE_LEN];
} ShareResult;

#define TASK_DATA(hdr)		((char *) (hdr) + MAXALIGN(sizeof(TaskHeader)))
#define TASK_RESULTS(hdr)	((ShareResult *) (TASK_DATA(hdr) + MAXALIGN((hdr)->data_len)))

struct ShareRound
{
	XLogRecPtr	end_lsn;
	int64		timeout_ms;		/* a helper slower than this is stuck */
	int			nhelpers;
	int			slot[PARALLEL_MAX_HELPERS]; /* the pool slot of each helper */
	StringInfoData data[PARALLEL_MAX_HELPERS];	/* each helper's shares */
	int			nviews;
	dsm_segment *task[PARALLEL_MAX_HELPERS];
	bool		died[PARALLEL_MAX_HELPERS];
};

/* The leader's side */
static dsm_segment *pool_seg = NULL;
static HelperPool *pool = NULL;
static BackgroundWorkerHandle *helper_handle[PARALLEL_MAX_HELPERS];
static TimestampTz next_start = 0;

static void pool_create(Oid dboid);
static bool helper_start(int index);
static void helper_forget(int index);
static void helper_slot_reset(int index);
static void helper_tell_stop(int index);
static void helper_run(HelperPool *hp, dsm_handle handle);
static ViewBatch *share_read(const char **p);
static void share_write_source_head(StringInfo buf, const SourceBatch *sb);

/* ----------------
 * The leader
 * ----------------
 */

/* Make the pool, in memory that lives as long as this process. */
static void
pool_create(Oid dboid)
{
	pool_seg = dsm_create(sizeof(HelperPool), 0);
	dsm_pin_mapping(pool_seg);
	pool = dsm_segment_address(pool_seg);
	memset(pool, 0, sizeof(HelperPool));
	SpinLockInit(&pool->mutex);
	pool->dboid = dboid;
	pool->leader_pid = MyProcPid;
	pool->leader_latch = MyLatch;
}

/* Register helper index; false when no background worker slot is free */
static bool
helper_start(int index)
{
	BackgroundWorker bgw;
	MemoryContext oldcxt;
	bool		started;

	launcher_bgw_init(&bgw, "dj_helper_main", "delta_join helper");
	snprintf(bgw.bgw_name, BGW_MAXLEN, "delta_join helper %d for database %u",
			 index + 1, pool->dboid);
	bgw.bgw_main_arg = UInt32GetDatum(dsm_segment_handle(pool_seg));
	memcpy(bgw.bgw_extra, &index, sizeof(index));
	memcpy(bgw.bgw_extra + sizeof(index), &pool->slots[index].generation, sizeof(uint32));

	/* the handle lives as long as the leader */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&bgw, &helper_handle[index]);
	MemoryContextSwitchTo(oldcxt);
	return started;
}

/*
 * Forget a helper that ended or is told to: its slot is empty until a new
 * helper takes it and says it is ready.
 */
static void
helper_forget(int index)
{
	HelperSlot *slot = &pool->slots[index];

	pfree(helper_handle[index]);
	helper_handle[index] = NULL;
	SpinLockAcquire(&pool->mutex);
	slot->generation++;
	slot->state = SLOT_EMPTY;
	slot->pid = 0;
	slot->latch = NULL;
	SpinLockRelease(&pool->mutex);
}

/* Give the slot to a new helper */
static void
helper_slot_reset(int index)
{
	HelperSlot *slot = &pool->slots[index];

	SpinLockAcquire(&pool->mutex);
	slot->generation++;
	slot->state = SLOT_EMPTY;
	slot->stop = false;
	slot->pid = 0;
	slot->latch = NULL;
	SpinLockRelease(&pool->mutex);
}

/*
 * How many helpers are ready to take a share now.  Helpers that are not
 * running are started (they are ready at a later round); when the server
 * has no background worker slot left, the leader goes on alone and tries
 * again after a while.
 */
int
parallel_helpers(Oid dboid)
{
	int			want = Min(dj_apply_workers - 1, PARALLEL_MAX_HELPERS);
	TimestampTz now = GetCurrentTimestamp();
	int			ready = 0;

	parallel_trim();
	if (want <= 0)
		return 0;
	if (pool == NULL)
		pool_create(dboid);

	for (int i = 0; i < want; i++)
	{
		HelperSlot *slot = &pool->slots[i];
		pid_t		pid;

		if (helper_handle[i] != NULL &&
			GetBackgroundWorkerPid(helper_handle[i], &pid) == BGWH_STOPPED)
		{
			SlotState	state;

			SpinLockAcquire(&pool->mutex);
			state = slot->state;
			SpinLockRelease(&pool->mutex);
			helper_forget(i);

			/* one that ended unasked (it could not connect, say) waits */
			if (state != SLOT_EXITED)
				next_start = TimestampTzPlusMilliseconds(now, HELPER_START_RETRY_MS);
		}
		if (helper_handle[i] == NULL)
		{
			if (now < next_start)
				continue;
			helper_slot_reset(i);
			if (!helper_start(i))
			{
				ereport(LOG,
						(errmsg("delta_join worker for database %u applies alone: no background worker slot is free for its helpers",
								dboid),
						 errhint("Raise max_worker_processes, or lower delta_join.apply_workers.")));
				next_start = TimestampTzPlusMilliseconds(now, HELPER_START_RETRY_MS);
			}
			continue;
		}
		SpinLockAcquire(&pool->mutex);
		if (slot->state == SLOT_IDLE)
			ready++;
		SpinLockRelease(&pool->mutex);
	}
	return ready;
}

/* Stop the helpers beyond delta_join.apply_workers (it was lowered) */
void
parallel_trim(void)
{
	for (int i = Max(dj_apply_workers - 1, 0); i < PARALLEL_MAX_HELPERS; i++)
	{
		if (helper_handle[i] == NULL)
			continue;
		TerminateBackgroundWorker(helper_handle[i]);
		helper_forget(i);
	}
}

/* A round for the helpers that are ready now (parallel_helpers) */
ShareRound *
parallel_round_begin(int nhelpers, XLogRecPtr end_lsn)
{
	ShareRound *round = palloc0(sizeof(ShareRound));

	Assert(pool != NULL && nhelpers > 0);
	round->end_lsn = end_lsn;
	round->timeout_ms = 10000;
	SpinLockAcquire(&pool->mutex);
	for (int i = 0; i < PARALLEL_MAX_HELPERS && round->nhelpers < nhelpers; i++)
	{
		if (pool->slots[i].state == SLOT_IDLE && helper_handle[i] != NULL)
			round->slot[round->nhelpers++] = i;
	}
	SpinLockRelease(&pool->mutex);
	for (int h = 0; h < round->nhelpers; h++)
		initStringInfo(&round->data[h]);
	return round;
}

static void
share_write_source_head(StringInfo buf, const SourceBatch *sb)
{
	appendBinaryStringInfo(buf, (const char *) &sb->ordinal, sizeof(sb->ordinal));
	appendBinaryStringInfo(buf, (const char *) &sb->relid, sizeof(sb->relid));
	appendBinaryStringInfo(buf, (const char *) &sb->truncated, sizeof(sb->truncated));
	appendBinaryStringInfo(buf, (const char *) &sb->shape.nkeys, sizeof(sb->shape.nkeys));
	appendBinaryStringInfo(buf, (const char *) sb->shape.typlen,
						   sizeof(int16) * sb->shape.nkeys);
	appendBinaryStringInfo(buf, (const char *) sb->shape.typbyval,
						   sizeof(bool) * sb->shape.nkeys);
}

/*
 * Split a view's batch into the round's shares by a hash of the view and
 * each key -- or of one column of the key, share_by's for the key's source
 * (plan_cache_shareable) --: the helpers' shares are written into their
 * tasks, the leader's is returned.  Every share has every source of the batch, with or without
 * keys: a source that changed empties the lookup caches of its rows.
 */
ViewBatch *
parallel_round_split(ShareRound *round, ViewBatch *work, const int *share_by,
					 int timeout_ms)
{
	int			nshares = round->nhelpers + 1;
	uint32		view_hash = hash_uint32((uint32) work->view_id);
	ViewBatch  *mine = palloc(sizeof(ViewBatch));
	int			nsources = list_length(work->sources);
	StringInfoData image;
	ListCell   *lc;

	*mine = *work;
	mine->sources = NIL;
	initStringInfo(&image);
	round->timeout_ms += timeout_ms > 0 ? timeout_ms : ROUND_NO_TIMEOUT_MS;
	for (int h = 0; h < round->nhelpers; h++)
	{
		appendBinaryStringInfo(&round->data[h], (char *) &work->view_id, sizeof(int));
		appendBinaryStringInfo(&round->data[h], (char *) &nsources, sizeof(int));
	}

	foreach(lc, work->sources)
	{
		SourceBatch *sb = lfirst(lc);
		SourceBatch *msb = palloc(sizeof(SourceBatch));
		int			count_at[PARALLEL_MAX_HELPERS];
		int			count[PARALLEL_MAX_HELPERS] = {0};
		int			by = share_by[foreach_current_index(lc)];
		KeyShape	column;		/* the shape of key column by alone */
		ListCell   *lc2;

		*msb = *sb;
		msb->keys = NIL;
		if (by >= 0)
		{
			column.nkeys = 1;
			column.typlen = &sb->shape.typlen[by];
			column.typbyval = &sb->shape.typbyval[by];
		}
		mine->sources = lappend(mine->sources, msb);
		for (int h = 0; h < round->nhelpers; h++)
		{
			share_write_source_head(&round->data[h], sb);
			count_at[h] = round->data[h].len;
			appendBinaryStringInfo(&round->data[h], (char *) &count[h], sizeof(int));
		}

		foreach(lc2, sb->keys)
		{
			DirtyKey   *key = lfirst(lc2);
			uint32		hash;
			int			share;
			StringInfo	buf;

			resetStringInfo(&image);
			if (by >= 0)
			{
				dirty_key_image(&image, &column, &key->values[by], &key->isnull[by]);
				hash = hash_bytes((unsigned char *) image.data, image.len);
				resetStringInfo(&image);
			}
			dirty_key_image(&image, &sb->shape, key->values, key->isnull);
			if (by < 0)
				hash = hash_bytes((unsigned char *) image.data, image.len);
			hash = hash_combine(view_hash, hash);
			share = hash % nshares;
			if (share == 0)
			{
				msb->keys = lappend(msb->keys, key);
				continue;
			}
			buf = &round->data[share - 1];
			appendBinaryStringInfo(buf, (char *) &image.len, sizeof(image.len));
			appendBinaryStringInfo(buf, image.data, image.len);
			count[share - 1]++;
		}
		for (int h = 0; h < round->nhelpers; h++)
			memcpy(round->data[h].data + count_at[h], &count[h], sizeof(int));
	}
	round->nviews++;
	pfree(image.data);
	return mine;
}

/* Hand each helper its task */
void
parallel_round_start(ShareRound *round)
{
	for (int h = 0; h < round->nhelpers; h++)
	{
		StringInfo	data = &round->data[h];
		Size		size = MAXALIGN(sizeof(TaskHeader)) + MAXALIGN(data->len) +
			sizeof(ShareResult) * Max(round->nviews, 1);
		dsm_segment *seg = dsm_create(size, DSM_CREATE_NULL_IF_MAXSEGMENTS);
		TaskHeader *hdr;
		HelperSlot *slot = &pool->slots[round->slot[h]];
		Latch	   *latch;

		/* no segment left: the helper has no task, and the worker its share */
		if (seg == NULL)
		{
			round->died[h] = true;
			continue;
		}

		/* the task outlives the transaction it is made in */
		dsm_pin_mapping(seg);
		hdr = dsm_segment_address(seg);
		round->task[h] = seg;
		hdr->end_lsn = round->end_lsn;
		hdr->nviews = round->nviews;
		hdr->data_len = data->len;
		memcpy(TASK_DATA(hdr), data->data, data->len);
		memset(TASK_RESULTS(hdr), 0, sizeof(ShareResult) * round->nviews);

		SpinLockAcquire(&pool->mutex);
		if (slot->state == SLOT_IDLE)
		{
			slot->task = dsm_segment_handle(seg);
			slot->state = SLOT_TASK;
			latch = slot->latch;
		}
		else
		{
			/* it left meanwhile: the worker takes the share */
			round->died[h] = true;
			latch = NULL;
		}
		SpinLockRelease(&pool->mutex);
		if (latch != NULL)
			SetLatch(latch);
	}
}

/*
 * Wait until every helper of the round has committed its task, or ended.
 * The caller holds no lock a helper could wait for: it has committed its
 * own shares.
 */
void
parallel_round_finish(ShareRound *round)
{
	bool		done[PARALLEL_MAX_HELPERS] = {0};
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   round->timeout_ms);

	Assert(!IsTransactionState());
	pgstat_report_activity(STATE_RUNNING, "waiting for its helpers");
	for (;;)
	{
		bool		pending = false;
		bool		late = (GetCurrentTimestamp() >= deadline);

		for (int h = 0; h < round->nhelpers; h++)
		{
			HelperSlot *slot = &pool->slots[round->slot[h]];
			pid_t		pid;

			if (done[h] || round->task[h] == NULL || round->died[h])
				continue;
			SpinLockAcquire(&pool->mutex);
			if (slot->state == SLOT_DONE)
			{
				slot->state = SLOT_IDLE;
				done[h] = true;
			}
			SpinLockRelease(&pool->mutex);
			if (!done[h] &&
				GetBackgroundWorkerPid(helper_handle[round->slot[h]], &pid) != BGWH_STARTED)
			{
				round->died[h] = done[h] = true;
				ereport(LOG,
						(errmsg("delta_join helper %d for database %u ended during a round: the worker applies its share",
								round->slot[h] + 1, pool->dboid)));
			}
			else if (!done[h] && late)
			{
				/* stopped, or hung: it is let go, and its share redone */
				ereport(LOG,
						(errmsg("delta_join helper %d for database %u did not finish its share in %lld ms: it is stopped, and the worker applies its share",
								round->slot[h] + 1, pool->dboid,
								(long long) round->timeout_ms)));
				TerminateBackgroundWorker(helper_handle[round->slot[h]]);
				helper_forget(round->slot[h]);
				round->died[h] = done[h] = true;
			}
			pending |= !done[h];
		}
		if (!pending)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 ROUND_POLL_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * Did every helper apply its share of the view?  Their counts are added to
 * *counts.
 */
bool
parallel_round_view_done(ShareRound *round, int view_id, ApplyCounts *counts)
{
	bool		all = true;

	for (int h = 0; h < round->nhelpers; h++)
	{
		TaskHeader *hdr;
		ShareResult *results;
		bool		found = false;

		if (round->died[h])
			return false;
		hdr = dsm_segment_address(round->task[h]);
		results = TASK_RESULTS(hdr);
		for (int v = 0; v < hdr->nviews; v++)
		{
			if (results[v].view_id != view_id)
				continue;
			found = true;
			if (!results[v].applied)
			{
				all = false;
				elog(DEBUG1, "delta_join helper %d could not apply its share of view %d: %s",
					 round->slot[h] + 1, view_id, results[v].message);
				continue;
			}
			apply_counts_add(counts, &results[v].counts);
		}
		all &= found;
	}
	return all;
}

void
parallel_round_end(ShareRound *round)
{
	for (int h = 0; h < round->nhelpers; h++)
	{
		if (round->task[h] != NULL)
			dsm_detach(round->task[h]);
		pfree(round->data[h].data);
	}
	pfree(round);
}

/* The leader is leaving: so are its helpers (from before_shmem_exit) */
void
parallel_stop(void)
{
	for (int i = 0; i < PARALLEL_MAX_HELPERS; i++)
	{
		if (helper_handle[i] != NULL)
			helper_tell_stop(i);
	}
}

/*
 * Tell a helper to exit once it is idle, quietly (a task it has is finished
 * first: the slot is not confirmed past it anyway).  Only for a leader that
 * exits: its slots are not given to new helpers.
 */
static void
helper_tell_stop(int index)
{
	HelperSlot *slot = &pool->slots[index];
	Latch	   *latch;

	SpinLockAcquire(&pool->mutex);
	slot->stop = true;
	latch = slot->latch;
	SpinLockRelease(&pool->mutex);
	if (latch != NULL)
		SetLatch(latch);
}

/* ----------------
 * A helper
 * ----------------
 */

void
dj_helper_main(Datum main_arg)
{
	dsm_segment *seg;
	HelperPool *hp;
	HelperSlot *slot;
	int			index;
	uint32		generation;
	TimestampTz idle_since;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	memcpy(&index, MyBgworkerEntry->bgw_extra, sizeof(index));
	memcpy(&generation, MyBgworkerEntry->bgw_extra + sizeof(index), sizeof(generation));
	CurrentResourceOwner = ResourceOwnerCreate(NULL, "delta_join helper");
	seg = dsm_attach(DatumGetUInt32(main_arg));
	if (seg == NULL || index < 0 || index >= PARALLEL_MAX_HELPERS)
		proc_exit(0);			/* the leader is gone already */
	dsm_pin_mapping(seg);
	hp = dsm_segment_address(seg);
	slot = &hp->slots[index];

	BackgroundWorkerInitializeConnectionByOid(hp->dboid, InvalidOid, 0);
	apply_session_setup();
	am_helper = true;

	SpinLockAcquire(&hp->mutex);
	if (slot->generation != generation)
	{
		SpinLockRelease(&hp->mutex);
		proc_exit(0);			/* given up on before it was ready */
	}
	slot->pid = MyProcPid;
	slot->latch = MyLatch;
	slot->state = SLOT_IDLE;
	SpinLockRelease(&hp->mutex);
	SetLatch(hp->leader_latch);
	ereport(LOG,
			(errmsg("delta_join helper %d for database %u started", index + 1, hp->dboid)));

	idle_since = GetCurrentTimestamp();
	for (;;)
	{
		SlotState	state;
		dsm_handle	task;
		bool		stop;
		bool		mine;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}

		/*
		 * Long idle, the slot goes back to the server's background workers
		 * (the leader starts a helper again for a later round).
		 */
		SpinLockAcquire(&hp->mutex);
		mine = (slot->generation == generation);
		if (mine && slot->state == SLOT_IDLE &&
			TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), HELPER_IDLE_EXIT_MS))
			slot->state = SLOT_EXITED;
		state = slot->state;
		task = slot->task;
		stop = slot->stop;
		SpinLockRelease(&hp->mutex);
		if (!mine || state == SLOT_EXITED || (stop && state != SLOT_TASK))
			proc_exit(0);

		if (state == SLOT_TASK)
		{
			helper_run(hp, task);
			SpinLockAcquire(&hp->mutex);
			if (slot->generation == generation)
				slot->state = SLOT_DONE;
			SpinLockRelease(&hp->mutex);
			SetLatch(hp->leader_latch);
			idle_since = GetCurrentTimestamp();
			apply_session_worked();
			continue;
		}

		/* a leader that ended without stopping its helpers (it crashed) */
		if (kill(hp->leader_pid, 0) != 0 && errno == ESRCH)
			proc_exit(0);

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 HELPER_IDLE_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);

		/* idle for a while after a task: let its memory go, as the worker does */
		apply_session_idle();
	}
}

/* Read one view's share of a task; *p moves past it */
static ViewBatch *
share_read(const char **p)
{
	ViewBatch  *batch = palloc0(sizeof(ViewBatch));
	int			nsources;

#define READ(dst, size) (memcpy((dst), *p, (size)), *p += (size))
	READ(&batch->view_id, sizeof(int));
	READ(&nsources, sizeof(int));
	for (int s = 0; s < nsources; s++)
	{
		SourceBatch *sb = palloc0(sizeof(SourceBatch));
		int			nkeys;

		READ(&sb->ordinal, sizeof(sb->ordinal));
		READ(&sb->relid, sizeof(sb->relid));
		READ(&sb->truncated, sizeof(sb->truncated));
		READ(&sb->shape.nkeys, sizeof(sb->shape.nkeys));
		sb->shape.typlen = palloc(sizeof(int16) * Max(sb->shape.nkeys, 1));
		sb->shape.typbyval = palloc(sizeof(bool) * Max(sb->shape.nkeys, 1));
		READ(sb->shape.typlen, sizeof(int16) * sb->shape.nkeys);
		READ(sb->shape.typbyval, sizeof(bool) * sb->shape.nkeys);
		READ(&nkeys, sizeof(int));
		for (int k = 0; k < nkeys; k++)
		{
			int			len;
			uint32		used;

			READ(&len, sizeof(len));
			sb->keys = lappend(sb->keys, dirty_key_from_image(&sb->shape, *p, &used));
			Assert(used == (uint32) len);
			*p += len;
		}
		batch->sources = lappend(batch->sources, sb);
	}
#undef READ
	return batch;
}

/*
 * Apply a task in one transaction and write what each share did into it.
 * A view that is gone, or in error, since the leader read the views has
 * nothing to do.
 */
static void
helper_run(HelperPool *hp, dsm_handle handle)
{
	dsm_segment *seg = dsm_attach(handle);
	TaskHeader *hdr;
	ShareResult *results;
	const char *p;
	MemoryContext task_cxt;
	MemoryContext oldcxt;
	List	   *views;
	static uint64 seen_generation = 0;
	uint64		generation;
	bool		gone;

	if (seg == NULL)
		return;					/* the leader gave up the round */
	hdr = dsm_segment_address(seg);
	results = TASK_RESULTS(hdr);
	p = TASK_DATA(hdr);

	task_cxt = AllocSetContextCreate(TopMemoryContext, "delta_join helper task",
									 ALLOCSET_DEFAULT_SIZES);
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	oldcxt = MemoryContextSwitchTo(task_cxt);

	/* views created, dropped or refreshed since the last task: new plans */
	LWLockAcquire(worker_shared->lock, LW_SHARED);
	{
		DbWorker   *db = shmem_find_db(hp->dboid, false);

		generation = db ? db->generation : 0;
	}
	LWLockRelease(worker_shared->lock);
	if (generation != seen_generation)
		plan_cache_forget_all();
	seen_generation = generation;

	/*
	 * The extension dropped, or a DROP EXTENSION or a DDL of an update
	 * holding it or its catalog: no share is applied, and the leader,
	 * applying them alone, finds out what to do.  (Reading a dropped
	 * catalog would end this process with an error; waiting for a locked
	 * one, too, at its lock_timeout, while the leader waited for it.)
	 */
	gone = !catalog_lock_views(AccessShareLock) ||
		!OidIsValid(catalog_relid("view_catalog"));
	views = gone ? NIL : catalog_list_views();
	for (int v = 0; v < hdr->nviews; v++)
	{
		ViewBatch  *batch = share_read(&p);
		ViewRecord *view = catalog_view_in(views, batch->view_id);
		ErrorData  *error = NULL;

		results[v].view_id = batch->view_id;
		if (gone)
		{
			results[v].applied = false;
			dj_text_copy(results[v].message, "the extension or its catalog is locked or gone",
						 SHARE_MESSAGE_LEN);
			continue;
		}
		if (view == NULL || view->in_error)
		{
			results[v].applied = true;
			continue;
		}
		batch->caches_stale = true;
		pgstat_report_activity(STATE_RUNNING, catalog_view_name(view));
		results[v].applied =
			(apply_view(&(ApplyRequest) {.view = view, .batch = batch, .end_lsn = hdr->end_lsn,
										  .timeout_ms = retry_apply_timeout(view),
										  .quiet = true},
						&results[v].counts, NULL, &error) == VIEW_APPLIED);
		pgstat_report_activity(STATE_IDLE, NULL);
		if (!results[v].applied)
			dj_text_copy(results[v].message, error->message ? error->message : "",
						 SHARE_MESSAGE_LEN);
	}

	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_stat(false);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(task_cxt);
	dsm_detach(seg);
}
