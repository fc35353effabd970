/*-------------------------------------------------------------------------
 *
 * views.h
 *	  The operations on views (views.c): create, drop, refresh, and the
 *	  view lock they take; shared by the SQL functions, the DDL guard and
 *	  the distributed views of Citus.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_OPS_VIEWS_H
#define DJ_OPS_VIEWS_H

#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "utils/jsonb.h"

#include "registry/catalog.h"

extern void ops_check_primary(const char *function);
extern void ops_lock_views(void);
extern bool ops_try_lock_views(void);
extern char *ops_relation_name(Oid relid);
extern void ops_check_owner(Oid relid);
extern bool ops_relation_is_empty(Oid relid);
extern Oid	ops_lookup_view(const char *target, ViewRecord *view, LOCKMODE lockmode);

extern Oid	ops_create_view(const char *target, Query *query, List *hints,
							DeltaOptions *options, Jsonb *settings, bool replace,
							const char *managed_by);
extern Oid	ops_register_view(const char *target, Query *query, List *hints,
							  DeltaOptions *options, Jsonb *settings,
							  const char *managed_by, int *view_id, bool *created);
extern Oid	ops_create_view_text(const char *target, const char *text, DeltaOptions *options);
extern void ops_drop_view(ViewRecord *view, bool drop_table);
extern void ops_drop_view_named(const char *target, bool drop_table);
extern uint64 ops_refresh_view(ViewRecord *view, bool by_caller);
extern uint64 ops_refresh_view_named(const char *target);

#endif							/* DJ_OPS_VIEWS_H */
