/*-------------------------------------------------------------------------
 *
 * citus_tables.h
 *	  What delta_join knows of Citus tables (citus_tables.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CITUS_TABLES_H
#define DJ_CITUS_TABLES_H

extern const char *citus_table_kind(Oid relid);
extern Oid	citus_shard_of(Oid relid);
extern Oid	citus_source_of(List *sources);

#endif							/* DJ_CITUS_TABLES_H */
