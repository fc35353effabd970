/*-------------------------------------------------------------------------
 *
 * shmem.c
 *	  delta_join's shared memory: its size, its creation, and the entry of
 *	  each database (shmem.h says what it holds and how it is locked).
 *
 * The library asks for it while shared_preload_libraries is loaded
 * (shmem_init, from the launcher's set-up) and creates it at start-up; a
 * process whose library was loaded later has none (shmem_check says so).
 *
 * IDENTIFICATION
 *	  src/base/shmem.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/guc.h"

#include "base/shmem.h"

/* delta_join.max_views: entries of shared memory for views' progress */
int			dj_max_views = 4096;

WorkerShared *worker_shared = NULL;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/*
 * Define delta_join.max_views (_PG_init); a postmaster setting can only be
 * defined while the library is preloaded.
 */
void
shmem_define_settings(void)
{
	if (process_shared_preload_libraries_in_progress)
		DefineCustomIntVariable("delta_join.max_views",
								"Most delta views, over all databases, the server keeps progress for.",
								"A view beyond it is refused by create_view.",
								&dj_max_views,
								4096,
								1, 1000000,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);
}

static Size
shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(WorkerShared, views),
							 mul_size(sizeof(ViewStat), dj_max_views)));
}

static void
shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	RequestAddinShmemSpace(shmem_size());
	RequestNamedLWLockTranche("delta_join", 1);
}

static void
shmem_startup(void)
{
	bool		found;

	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	worker_shared = ShmemInitStruct("delta_join", shmem_size(), &found);
	if (!found)
	{
		memset(worker_shared, 0, shmem_size());
		worker_shared->max_views = dj_max_views;
		worker_shared->lock = &(GetNamedLWLockTranche("delta_join"))->lock;
		ConditionVariableInit(&worker_shared->progress_cv);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Ask for the shared memory, and create it at start-up (from _PG_init,
 * while shared_preload_libraries is loaded).
 */
void
shmem_init(void)
{
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = shmem_startup;
}

void
shmem_check(void)
{
	if (worker_shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta_join is not loaded at server start"),
				 errhint("Add delta_join to shared_preload_libraries and restart the server.")));
}

/* The DbWorker of a database, made if asked and there is room.  Lock held. */
DbWorker *
shmem_find_db(Oid dboid, bool create)
{
	DbWorker   *free_entry = NULL;
	int			i;

	for (i = 0; i < WORKER_MAX_DATABASES; i++)
	{
		DbWorker   *db = &worker_shared->dbs[i];

		if (db->dboid == dboid)
			return db;
		if (db->dboid == InvalidOid && free_entry == NULL)
			free_entry = db;
	}
	if (!create || free_entry == NULL)
		return NULL;
	memset(free_entry, 0, sizeof(DbWorker));
	free_entry->dboid = dboid;
	return free_entry;
}

/*
 * Mark a database as having distributed views (see DbWorker.distributed);
 * its worker also marks it when it finds some.
 */
void
shmem_set_distributed(Oid dboid)
{
	DbWorker   *db;

	shmem_check();
	LWLockAcquire(worker_shared->lock, LW_EXCLUSIVE);
	db = shmem_find_db(dboid, true);
	if (db != NULL)
		db->distributed = true;
	LWLockRelease(worker_shared->lock);
}

bool
shmem_is_distributed(Oid dboid)
{
	DbWorker   *db;
	bool		distributed;

	shmem_check();
	LWLockAcquire(worker_shared->lock, LW_SHARED);
	db = shmem_find_db(dboid, false);
	distributed = (db != NULL && db->distributed);
	LWLockRelease(worker_shared->lock);
	return distributed;
}
