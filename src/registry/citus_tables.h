/*-------------------------------------------------------------------------
 *
 * citus_tables.h
 *	  Every read of Citus's catalog (citus_tables.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CITUS_TABLES_H
#define DJ_CITUS_TABLES_H

#include "nodes/pg_list.h"

/* one table (system-table scans) */
extern const char *citus_table_kind(Oid relid);
extern Oid	citus_shard_of(Oid relid);
extern Oid	citus_source_of(List *sources);

/* the rest (SQL) */
extern bool citus_present(void);
extern int	citus_local_group(void);
extern bool citus_distribution(Oid relid, int *colocation, char **column);
extern bool citus_transaction_started(void);
extern Oid	citus_extension_owner(void);
extern int	citus_shard_count(Oid relid);
extern char *citus_placements_text(void);
extern bool citus_placement_is_local(int64 shardid);
extern int64 citus_local_placement_count(List *relids);
extern Oid	citus_group_shard(Oid relid, const char *minvalue);
extern List *citus_local_shards(Oid relid, List **minvalues);
extern char *citus_worker_nodes_text(void);

#endif							/* DJ_CITUS_TABLES_H */
