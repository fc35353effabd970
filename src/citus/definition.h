/*-------------------------------------------------------------------------
 *
 * definition.h
 *	  The definitions of distributed views: delta_join.distributed_catalog
 *	  (definition.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_DEFINITION_H
#define DJ_DEFINITION_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "nodes/parsenodes.h"
#include "utils/jsonb.h"

/* One row of delta_join.distributed_catalog */
typedef struct Definition
{
	char	   *target;			/* qualified name of the distributed target */
	char	   *query;
	char	   *strategy;		/* or NULL */
	Jsonb	   *options;		/* as given to create_view, or NULL */
	char	   *search_path;
	List	   *sources;		/* qualified names of the relations it read */
	Jsonb	   *settings;
	bool		backfilling;	/* being created concurrently */
	bool		refreshed;		/* refreshed since it was made */
} Definition;

/* reading */
extern Oid	definition_relid(const char *name);
extern Definition *definition_of(Oid relid);
extern Definition *definition_from_tuple(HeapTuple tuple, TupleDesc desc);
extern List *definition_targets(void);
extern bool definition_exists(bool nowait);
extern bool definition_try_lock(void);

/* writing (coordinator) */
extern void definition_distribute(void);
extern void definition_insert(Definition *def);
extern void definition_touch(const char *target);
extern void definition_end_backfill(const char *target);
extern void definition_delete(const char *target);
extern bool definition_drop_orphan(const char *name);
extern void definition_delete_orphans(void);

/* what the trigger lets through (every node) */
extern void definition_check_writer(Definition *def, bool deleting);
extern void definition_check_unchanged(Definition *old, Definition *def);

/* DDL on what definitions name (coordinator) */
extern void definition_check_rename(Node *parsetree);
extern void definition_forget_dropped(DropStmt *stmt);

#endif							/* DJ_DEFINITION_H */
