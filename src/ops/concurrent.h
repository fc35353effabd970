/*-------------------------------------------------------------------------
 *
 * concurrent.h
 *	  create_view and refresh without stopping the writers of the sources
 *	  (concurrent.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_OPS_CONCURRENT_H
#define DJ_OPS_CONCURRENT_H

#include "base/delta_join.h"

extern Oid	ops_create_view_concurrently(const char *target, const char *text,
										 DeltaOptions *options);
extern uint64 ops_refresh_view_concurrently(const char *target);

extern PGDLLEXPORT void dj_concurrent_main(Datum main_arg);

#endif							/* DJ_OPS_CONCURRENT_H */
