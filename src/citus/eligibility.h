/*-------------------------------------------------------------------------
 *
 * eligibility.h
 *	  Whether a query can be a distributed view, and its distributed target
 *	  (eligibility.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_ELIGIBILITY_H
#define DJ_ELIGIBILITY_H

#include "analysis/analyze.h"

/* How a distributed view's plan runs inside each shard group */
typedef struct ShardGroupPlan
{
	DeltaPlan  *plan;
	int			column;			/* the output column (0-based) holding the
								 * distribution value: it distributes the
								 * target */
	Oid			anchor;			/* a source, to co-locate the target with */
	int			colocation;		/* the sources' co-location group */
} ShardGroupPlan;

extern List *eligibility_explain(Query *query, List *hints, DeltaOptions *options);
extern void eligibility_plan(Query *query, List *hints, DeltaOptions *options,
							 ShardGroupPlan *result);
extern void eligibility_check_target(Oid relid, const char *target, ShardGroupPlan *sgp);

#endif							/* DJ_ELIGIBILITY_H */
