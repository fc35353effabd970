/*-------------------------------------------------------------------------
 *
 * citus.h
 *	  What delta_join knows of Citus tables (citus.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CITUS_H
#define DJ_CITUS_H

extern const char *citus_table_kind(Oid relid);
extern Oid	citus_shard_of(Oid relid);
extern Oid	citus_source_of(List *sources);

#endif							/* DJ_CITUS_H */
