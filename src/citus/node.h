/*-------------------------------------------------------------------------
 *
 * node.h
 *	  What each Citus node does for the distributed views: its shard views
 *	  made and dropped as the definitions and placements say (node.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_NODE_H
#define DJ_NODE_H

#include "commands/trigger.h"

extern void node_init(void);
extern void node_on_definition(TriggerData *trigdata);
extern void node_prepare(void);
extern void node_sync(void);
extern void node_sync_asked(void);
extern bool node_wait(const char *target, int64 timeout_ms);
extern int64 node_backfill(const char *target);
extern int64 node_refresh_concurrently(const char *target);

#endif							/* DJ_NODE_H */
