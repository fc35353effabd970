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

#include "nodes/parsenodes.h"
#include "utils/jsonb.h"

/*
 * What the Citus layer (citus/node.c, citus/distributed.c) gives the
 * process of a concurrent operation, at load: the query of a shard group's
 * view, for a node's part of a distributed create; and the steps of a
 * distributed create on the coordinator, each a transaction of their own
 * (concurrent_begin_step, concurrent_end_step), and their undoing after a
 * failure.
 */
typedef struct ConcurrentCitus
{
	Query	   *(*shard_view_query) (const char *managed_by, const char *target_shard,
									 List **hints, DeltaOptions *options, Jsonb **settings);
	Oid			(*create_distributed) (const char *target, const char *text,
									   const char *strategy, Jsonb *options_json,
									   DeltaOptions *options);
	void		(*undo_distributed) (void);
} ConcurrentCitus;

extern ConcurrentCitus concurrent_citus;

extern Oid	ops_create_view_concurrently(const char *target, const char *text,
										 DeltaOptions *options);
extern int64 ops_create_shard_view_concurrently(const char *target, const char *managed_by);
extern Oid	ops_create_distributed_concurrently(const char *target, const char *text,
												const char *strategy, Jsonb *options_json,
												DeltaOptions *options);
extern uint64 ops_refresh_view_concurrently(const char *target);
extern void concurrent_check_caller(const char *function);
extern void concurrent_begin_step(void);
extern void concurrent_end_step(void);

extern PGDLLEXPORT void dj_concurrent_main(Datum main_arg);

#endif							/* DJ_OPS_CONCURRENT_H */
