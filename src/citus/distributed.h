/*-------------------------------------------------------------------------
 *
 * distributed.h
 *	  The coordinator-wide operations on distributed views (distributed.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_DISTRIBUTED_H
#define DJ_DISTRIBUTED_H

#include "base/delta_join.h"
#include "utils/jsonb.h"

extern bool distributed_wanted(const char *text);
extern Oid	distributed_create_view(const char *target, const char *text,
									const char *strategy, Jsonb *options_json,
									DeltaOptions *options);
extern Oid	distributed_create_steps(const char *target, const char *text,
									 const char *strategy, Jsonb *options_json,
									 DeltaOptions *options);
extern void distributed_create_undo(void);
extern List *distributed_explain(const char *text, DeltaOptions *options);
extern bool distributed_drop_view(const char *target, bool drop_table);
extern int64 distributed_refresh(const char *target);
extern int64 distributed_refresh_concurrently(const char *target);
extern int	distributed_wait(const char *target, int64 timeout_ms);

#endif							/* DJ_DISTRIBUTED_H */
