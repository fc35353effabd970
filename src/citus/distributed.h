/*-------------------------------------------------------------------------
 *
 * distributed.h
 *	  Distributed delta views over Citus tables (distributed.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_DISTRIBUTED_H
#define DJ_DISTRIBUTED_H

#include "nodes/parsenodes.h"
#include "base/options.h"
#include "utils/jsonb.h"

/* set while a coordinator analyzes a distributed view's query */

extern bool distributed_wanted(const char *text);
extern Oid	distributed_create_view(const char *target, const char *text,
									const char *strategy, Jsonb *options_json,
									DeltaOptions *options);
extern List *distributed_explain(const char *text, DeltaOptions *options);
extern bool distributed_drop_view(const char *target, bool drop_table);
extern int64 distributed_refresh(const char *target);
extern int	distributed_wait(const char *target, int64 timeout_ms);
extern char *distributed_managed_by(Oid relid);
extern bool distributed_defined(bool nowait);
extern void distributed_sync_node(void);
extern void distributed_init(void);
extern bool distributed_try(void (*fn) (void *arg), void *arg, const char *what);
extern void distributed_check_rename(Node *parsetree);
extern void distributed_forget_dropped(DropStmt *stmt);

#endif							/* DJ_DISTRIBUTED_H */
