/*-------------------------------------------------------------------------
 *
 * launcher.h
 *	  The launcher of the apply workers, each database's slot, and what
 *	  backends call to set the workers in motion (launcher.c).
 *
 * Every database that has views gets one apply worker (worker.c), which
 * owns the database's logical slot (LAUNCHER_SLOT_PREFIX followed by the
 * database OID) and keeps its views up to date.  A launcher, registered at
 * start-up, starts and restarts those workers.
 *
 * What the view operations (ops/views.c) call, in this order, from a
 * function that changes the views of a database:
 *
 *	launcher_ensure_slot()	first, before the transaction writes anything
 *							(create_view, refresh): makes sure the slot
 *							exists, so that every change committed from now
 *							on is decoded.
 *	launcher_notify()		once the catalog change is made (create_view,
 *							drop_view, refresh): when the transaction
 *							commits, the database's worker is started or
 *							told to read the catalog again.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_LAUNCHER_H
#define DJ_LAUNCHER_H

#include "fmgr.h"
#include "postmaster/bgworker.h"
#include "storage/lockdefs.h"

/* Name of a database's slot: this prefix, then the database OID */
#define LAUNCHER_SLOT_PREFIX	"delta_join_"

/* _PG_init, while shared_preload_libraries loads */
extern void launcher_init(void);

extern void launcher_ensure_slot(void);
extern void launcher_notify(void);
extern void launcher_drop_slot_if_unused(void);
extern char *launcher_slot_wait_reason(void);
extern void launcher_before_drop_database(const char *dbname, bool force);
extern void launcher_pause_worker(const char *dbname, LOCKMODE lockmode, bool catch_up);

/* for the apply worker and its helpers */
extern void launcher_slot_name(char *name, Oid dboid);
extern void launcher_bgw_init(BackgroundWorker *bgw, const char *function, const char *type);

/* Background worker entry point (named in BackgroundWorker.bgw_function_name) */
extern PGDLLEXPORT void dj_launcher_main(Datum main_arg);

#endif							/* DJ_LAUNCHER_H */
