/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The launcher, the per-database apply workers, and what backends call
 *	  to set them in motion.
 *
 * Every database that has views gets one apply worker, which owns the
 * database's logical slot (WORKER_SLOT_PREFIX followed by the database OID)
 * and keeps its views up to date.  A launcher, registered at start-up,
 * starts and restarts those workers.
 *
 * What api.c calls, in this order, from a function that changes the views
 * of a database:
 *
 *	worker_ensure_slot()	first, before the transaction writes anything
 *							(create_view, refresh): makes sure the slot exists,
 *							so that every change committed from now on is
 *							decoded.
 *	worker_notify()			once the catalog change is made (create_view,
 *							drop_view, refresh): when the transaction commits,
 *							the database's worker is started or told to
 *							re-read the catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_WORKER_H
#define DJ_WORKER_H

#include "fmgr.h"

#include "access/xlogdefs.h"
#include "utils/snapshot.h"
#include "base/batch.h"
#include "registry/catalog.h"

/* Name of a database's slot: this prefix, then the database OID */
#define WORKER_SLOT_PREFIX	"delta_join_"

/* module.c, from _PG_init while shared_preload_libraries loads */
extern void worker_init(void);

/* api.c */
extern void worker_ensure_slot(void);
extern void worker_notify(void);

/* How applying one view's part of a batch ended (worker_apply_view) */
typedef enum ViewResult
{
	VIEW_APPLIED,
	VIEW_FAILED,				/* error: the view goes to state error */
	VIEW_DEFERRED,				/* a passing error: try again later */
	VIEW_PARTIAL,				/* its time slice ran out: the rest waits */
	VIEW_LATER					/* its tables changed after the batch's
								 * snapshot: all of it waits */
} ViewResult;

/* worker.c, for the helpers of parallel apply (parallel.c) */
extern void worker_session_setup(void);
extern ViewResult worker_apply_view(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts,
									bool spilled, Snapshot snapshot, bool sliced,
									ViewBatch **rest, char **message, int *sqlerrcode);

/* Background worker entry points (named in BackgroundWorker.bgw_function_name) */
extern PGDLLEXPORT void dj_launcher_main(Datum main_arg);
extern PGDLLEXPORT void dj_worker_main(Datum main_arg);

#endif							/* DJ_WORKER_H */
