/*-------------------------------------------------------------------------
 *
 * eligibility.c
 *	  Can a query be a distributed view, and is its target one it can
 *	  write: checked on the coordinator, by create_view and explain().
 *
 * Tables distributed and co-located by the join key keep every join inside
 * one shard group, so a distributed view is one ordinary delta view per
 * shard group.  What shows that a query runs inside each shard group: every
 * source is a hash-distributed table of one co-location group, the join
 * equates all their distribution columns, and an output column holds that
 * value in every row, by which the target is distributed, co-located with
 * the sources.  The query is first analyzed as any view's (rules 1-8),
 * Citus tables let through (DeltaOptions.distributed), then checked here.
 *
 * Refusals raise ERRCODE_FEATURE_NOT_SUPPORTED with "distributed delta
 * view: ..." and a hint; a target that does not fit is refused as any
 * view's target would be (not empty, not its owner's, already a target).
 * Runs as the caller, on the coordinator; locks what the analysis locks.
 *
 * IDENTIFICATION
 *	  src/citus/eligibility.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/objectaddress.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "base/compat.h"
#include "citus/definition.h"
#include "citus/eligibility.h"
#include "ops/views.h"
#include "registry/citus_tables.h"

static void
refuse(const char *message, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("distributed delta view: %s", message),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("%s", hint)));
}

/* Union-find over (source, column) pairs: the join's equivalence classes */
typedef struct ColumnClass
{
	int			nitems;
	int		   *source;
	AttrNumber *attno;
	int		   *parent;
} ColumnClass;

static int
class_item(ColumnClass *cc, int source, AttrNumber attno)
{
	for (int i = 0; i < cc->nitems; i++)
	{
		if (cc->source[i] == source && cc->attno[i] == attno)
			return i;
	}
	cc->source[cc->nitems] = source;
	cc->attno[cc->nitems] = attno;
	cc->parent[cc->nitems] = cc->nitems;
	return cc->nitems++;
}

static int
class_root(ColumnClass *cc, int i)
{
	while (cc->parent[i] != i)
		i = cc->parent[i];
	return i;
}

/*
 * Check that the plan runs inside each shard group (see the banner).
 * Returns the output column's number and, in *anchor, a source to
 * co-locate the target with.
 */
static int
check_shard_local(DeltaPlan *plan, Oid *anchor)
{
	int			nsources = list_length(plan->sources);
	int		   *colocation = palloc(sizeof(int) * nsources);
	AttrNumber *distcol = palloc(sizeof(AttrNumber) * nsources);
	ColumnClass cc;
	int			root = -1;
	ListCell   *lc;

	if (plan->branches != NIL)
		refuse("UNION ALL is not supported", NULL,
			   "Make one distributed view per branch.");
	if (plan->path == DJ_PATH_JOIN_GROUPS)
		refuse("aggregates over joins cannot be distributed",
			   "Their dirty groups are found through the joins across the whole tables, not within one shard group.",
			   "Distribute a join of the co-located tables, or an aggregate of one table grouped by its distribution column.");
	if (plan->path == DJ_PATH_FULL)
		refuse("only joins and aggregates of co-located tables can be distributed",
			   "The query has no delta view's shape, so nothing shows that it runs inside one shard group.",
			   "Join the co-located tables on their distribution column, and group by it.");

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		int			i = foreach_current_index(lc);
		char	   *column;

		if (!citus_distribution(src->relid, &colocation[i], &column))
			refuse(psprintf("source %s is not a distributed table of Citus", src->relname),
				   psprintf("It is %s; a distributed view reads distributed tables co-located with each other, one shard group at a time.",
							citus_table_kind(src->relid) ? citus_table_kind(src->relid) : "a local table"),
				   "Distribute it with create_distributed_table, co-located with the other sources.");
		if (colocation[i] != colocation[0])
			refuse(psprintf("sources %s and %s are not co-located",
							((DeltaSource *) linitial(plan->sources))->relname, src->relname),
				   "Their shards with equal distribution values may be on different nodes.",
				   psprintf("Distribute %s with colocate_with => '%s'.", src->relname,
							((DeltaSource *) linitial(plan->sources))->relname));
		distcol[i] = get_attnum(src->relid, column);
	}

	/* the classes of columns the join equates */
	cc.nitems = 0;
	cc.source = palloc(sizeof(int) * (2 * list_length(plan->conds) + nsources));
	cc.attno = palloc(sizeof(AttrNumber) * (2 * list_length(plan->conds) + nsources));
	cc.parent = palloc(sizeof(int) * (2 * list_length(plan->conds) + nsources));
	foreach(lc, plan->conds)
	{
		DeltaJoinCond *cond = lfirst(lc);
		int			a = class_root(&cc, class_item(&cc, cond->left, cond->left_attno));
		int			b = class_root(&cc, class_item(&cc, cond->right, cond->right_attno));

		cc.parent[a] = b;
	}
	for (int i = 0; i < nsources; i++)
	{
		int			r = class_root(&cc, class_item(&cc, i, distcol[i]));
		DeltaSource *src = list_nth(plan->sources, i);

		if (root == -1)
			root = r;
		else if (r != root)
			refuse(psprintf("the join does not equate the distribution column of %s with the others'",
							src->relname),
				   "A joined row could come from two shard groups.",
				   psprintf("Add %s.%s = ... to the join condition.", src->alias,
							get_attname(src->relid, distcol[i], false)));
	}

	/* an output column, never NULL, equal to the distribution value */
	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *var = (Var *) tle->expr;
		ListCell   *lc2;

		if (tle->resjunk || !IsA(var, Var) || var->varlevelsup != 0)
			continue;
		foreach(lc2, plan->sources)
		{
			DeltaSource *src = lfirst(lc2);
			int			i = foreach_current_index(lc2);

			if (src->rtindex == var->varno && bms_is_empty(src->nulling) &&
				class_root(&cc, class_item(&cc, i, var->varattno)) == root)
			{
				*anchor = src->relid;
				return tle->resno - 1;
			}
		}
	}
	refuse("no output column holds the distribution value",
		   "The target is distributed, co-located with the sources, by a column that holds the sources' distribution value in every row.",
		   plan->kind == DJ_KIND_AGGREGATE ?
		   "Group by the distribution column and select it." :
		   "Select the distribution column of a source that every row has.");
	return -1;					/* keep the compiler quiet */
}

/* The options of a distributed view's analysis: Citus tables let through */
static DeltaOptions
distributed_options(const DeltaOptions *options)
{
	DeltaOptions distributed = *options;

	distributed.distributed = true;
	return distributed;
}

/*
 * The lines of explain() for the query of a distributed view, as the
 * analysis of each shard group's view sees it.
 */
List *
eligibility_explain(Query *query, List *hints, DeltaOptions *options)
{
	DeltaOptions distributed = distributed_options(options);

	return explain_plan(query, hints, &distributed);
}

/*
 * The plan of a distributed view's query, checked to run inside each
 * shard group; raises the reason it cannot be a distributed view.  query
 * is changed by the analysis.
 */
void
eligibility_plan(Query *query, List *hints, DeltaOptions *options, ShardGroupPlan *result)
{
	DeltaOptions distributed = distributed_options(options);
	char	   *distcol;

	result->plan = analyze_choose_path(query, hints, &distributed);
	result->column = check_shard_local(result->plan, &result->anchor);
	(void) citus_distribution(result->anchor, &result->colocation, &distcol);
}

/*
 * Check an existing table named target (relid) as the target of the
 * distributed view sgp: the caller owns it, no distributed view writes it
 * yet, it is empty, and it is distributed by the column that holds the
 * distribution value, co-located with the sources.
 */
void
eligibility_check_target(Oid relid, const char *target, ShardGroupPlan *sgp)
{
	const char *column = sgp->plan->colnames[sgp->column];
	int			colocation;
	char	   *target_col;

	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	if (definition_of(relid) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_OBJECT),
				 errmsg("table %s is already the target of a distributed delta view",
						dj_message_name(target)),
				 errhint("Drop that view first with delta_join.drop_view, or name another target.")));
	if (!ops_relation_is_empty(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target %s is not empty", dj_message_name(target)),
				 errhint("The target is filled from the query; empty it with TRUNCATE first.")));
	if (!citus_distribution(relid, &colocation, &target_col) ||
		colocation != sgp->colocation || strcmp(target_col, column) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target %s is not distributed by column \"%s\", co-located with %s",
						dj_message_name(target), column, get_rel_name(sgp->anchor)),
				 errdetail("Each shard group's view writes into the group's shard of the target."),
				 errhint("Distribute it with create_distributed_table('%s', '%s', colocate_with => '%s'), or name a new table.",
						 target, column, get_rel_name(sgp->anchor))));
}
