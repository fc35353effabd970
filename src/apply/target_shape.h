/*-------------------------------------------------------------------------
 *
 * target_shape.h
 *	  A view's target against its delta plan (target_shape.c): whether it
 *	  can hold the result, its key, the columns and indexes the appliers
 *	  find rows by, the output in its column types.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_TARGET_SHAPE_H
#define DJ_TARGET_SHAPE_H

#include "analysis/analyze.h"
#include "utils/relcache.h"

/* The statement trigger that keeps others from writing a target */
#define TARGET_GUARD_TRIGGER	"delta_join_guard"

extern void target_check_schema(Oid nspid);
extern void target_validate(Oid relid, DeltaPlan *plan, bool guarded);
extern bool target_index_column_fits(Relation rel, Relation index, int i);
extern Oid	target_key_index(Relation rel, DeltaPlan *plan);
extern char *target_key_column_list(DeltaPlan *plan);
extern int	target_region_columns(DeltaPlan *plan, DeltaSource *src, int *cols);
extern int	target_partner_columns(DeltaPlan *plan, DeltaSource *src, int *cols);
extern bool target_has_index_on(Oid relid, int ncols, const int *cols);
extern bool target_lacks_key(Oid relid, DeltaPlan *plan);
extern void target_check_key_index(Oid relid, DeltaPlan *plan);
extern void target_check_lookup_indexes(Oid relid, DeltaPlan *plan);

/* One set of lookup columns, for target_foreach_lookup_columns */
typedef void (*TargetLookupColumnsFn) (DeltaPlan *plan, DeltaPlan *branch, int ncols,
									   const int *cols, bool region, void *arg);
extern void target_foreach_lookup_columns(DeltaPlan *plan, TargetLookupColumnsFn fn,
										  void *arg);
extern char *target_column_names(DeltaPlan *plan, int ncols, const int *cols);
extern void target_check_branch_types(DeltaPlan *plan);
extern Oid	target_guard_function(void);
extern bool target_is_guarded(Relation rel);
extern char *target_qualified_name(Oid relid);
extern bool target_output_nullable(DeltaPlan *plan, int col);
extern bool target_key_nullable(DeltaPlan *plan);
extern void target_warn_not_null(Oid relid, DeltaPlan *plan);
extern void target_coerce_output(Query *query, DeltaPlan *plan, Oid target);
extern List *target_coerced_outputs(Oid target, DeltaPlan *plan, Query *query);

#endif							/* DJ_TARGET_SHAPE_H */
