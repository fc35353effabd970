/*-------------------------------------------------------------------------
 *
 * runas.h
 *	  Who code runs as, and with which settings.
 *
 * Everything that evaluates a view's query -- backfill, refresh, apply --
 * runs as the target's owner, as a security-restricted operation, with
 * search_path = pg_catalog, pg_temp and the settings pinned when the view
 * was created (TimeZone, DateStyle, ...), so that the same expressions give
 * the same results wherever and whenever they run.  Statements on the
 * extension's own catalog run as the bootstrap superuser, restricted the
 * same way, so that nothing a caller defined can run with those rights.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_RUNAS_H
#define DJ_RUNAS_H

#include "utils/jsonb.h"

/*
 * What runas_begin() changed, for runas_end() to put back; and the error
 * context runas_begin_view() pushed (callback not NULL), which says why a
 * name the caller's session finds is not found (runas.c).
 */
typedef struct RunAs
{
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;
	ErrorContextCallback errcb;
} RunAs;

#define RUNAS_SEARCH_PATH	"pg_catalog, pg_temp"

extern void runas_begin(Oid role, Jsonb *settings, RunAs *runas);
extern void runas_begin_view(Oid role, Jsonb *settings, RunAs *runas);
extern void runas_end(RunAs *runas);
extern Jsonb *runas_capture_settings(void);
extern Oid	runas_target_owner(Oid target);
extern void run_rolled_back(void (*fn) (void *arg), void *arg);

#endif							/* DJ_RUNAS_H */
