/*-------------------------------------------------------------------------
 *
 * shard_query.h
 *	  A distributed view's query: the tables it reads, and its form over
 *	  one shard group's shards (shard_query.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_SHARD_QUERY_H
#define DJ_SHARD_QUERY_H

#include "nodes/parsenodes.h"

extern List *shard_query_relations(Query *query);
extern List *shard_query_relation_names(List *relids);
extern void shard_query_map(Query *query, List *relids, List *shards);

#endif							/* DJ_SHARD_QUERY_H */
