/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the SQL functions of api.c share with the rest of the library.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_API_H
#define DJ_API_H

#include "registry/catalog.h"

extern void api_check_primary(const char *function);
extern void api_lock_views(void);
extern bool api_try_lock_views(void);
extern uint64 api_refresh_view(ViewRecord *view, bool by_caller);
extern Oid	api_create_view_from(const char *target, Query *query, List *hints,
								 DeltaOptions *options, Jsonb *settings, bool replace,
								 const char *managed_by);
extern void api_drop_view(ViewRecord *view, bool drop_table);

#endif							/* DJ_API_H */
