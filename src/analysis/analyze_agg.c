/*-------------------------------------------------------------------------
 *
 * analyze_agg.c
 *	  Rule 7: aggregate views.  One source, grouped by plain columns that a
 *	  btree index's leading columns cover, so that a changed group is
 *	  recomputed from the rows an index-prefix scan on its key finds; the
 *	  group key in the old row a decoded DELETE carries; a HAVING condition
 *	  that could leave a group's earlier row behind refused but in retract
 *	  mode (rule 6).
 *
 * On the keyed-recompute path the planner finds a group's rows its own
 * way: no index is needed, and a query without GROUP BY is one group,
 * recomputed whole.  Shares the analysis state of analyze.c (analysis.h).
 *
 * IDENTIFICATION
 *	  src/analysis/analyze_agg.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "analysis/analysis.h"

/*
 * Does a HAVING condition read only group key columns (no aggregate)?  Then
 * it holds for a group forever or never, and cannot leave a row behind.
 */
static bool
condition_on_group_key(Node *having, DeltaSource *src)
{
	ListCell   *lc;

	if (contain_agg_clause(having))
		return false;
	foreach(lc, pull_var_clause(having, 0))
	{
		Var		   *var = lfirst(lc);
		bool		in_key = false;

		for (int k = 0; k < src->key_natts; k++)
			in_key |= (src->key_attnums[k] == var->varattno);
		if (!in_key)
			return false;
	}
	return true;
}

/*
 * An aggregate view (GROUP BY, or aggregates over one group): its group
 * key, the index its groups are recomputed through, and its HAVING.
 */
void
analysis_aggregate(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	Query	   *query = plan->query;
	DeltaSource *src;
	List	   *bindable = NIL;
	List	   *key_ids = NIL;
	DeltaLookup *lookup;
	ListCell   *lc;
	int			n = 0;

	if (list_length(plan->sources) != 1)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 7: aggregates over a join are not supported"),
			   pstrdup("An aggregate view groups the rows of one table."),
			   pstrdup("Aggregate one table, or keep the join as a view of its own."));
		return;
	}
	src = SOURCE(a, 0);
	if (query->groupClause == NIL && a->path == DJ_PATH_KEYED)
	{
		/* one group, recomputed whole when any of its rows changes */
		plan->whole = true;
		src->key_natts = 0;
		src->key_attnums = palloc(sizeof(AttrNumber));
		plan->key_ncolumns = 0;
		plan->key_columns = palloc(sizeof(int));
		return;
	}
	if (query->groupClause == NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 7: an aggregate view needs GROUP BY"),
			   pstrdup("Each group is recomputed through an index on its key; an aggregate over the whole table has no key."),
			   psprintf("Group by the leading column(s) of an index of %s.", src->relname));
		return;
	}

	src->key_attnums = palloc(sizeof(AttrNumber) * list_length(query->groupClause));
	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, query->targetList);
		int			s;
		AttrNumber	att;
		BindableColumn *col;
		Oid			lefttype;
		Oid			culprit;

		if (!analysis_var_source(a, (Node *) tle->expr, &s, &att))
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("delta view rule 7: group key expressions must be plain columns"),
				   pstrdup("Groups are recomputed through an index on the group key columns."),
				   pstrdup("Group by plain columns of the source."));
			continue;
		}
		src->key_attnums[n++] = att;
		key_ids = lappend_int(key_ids, analysis_column_id(a, s, att));

		col = palloc(sizeof(BindableColumn));
		col->attno = att;
		col->opno = sgc->eqop;
		op_input_types(sgc->eqop, &lefttype, &col->righttype);
		col->collation = exprCollation((Node *) tle->expr);
		col->from_source = -1;
		col->from_attno = n;	/* the n-th group key value */
		bindable = lappend(bindable, col);

		if (!analysis_logged_in_old_row(src, att, &culprit))
		{
			char	   *culprit_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(culprit)),
																  get_rel_name(culprit));

			if (culprit == src->relid)
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 7: group key column %s is not part of the replica identity of %s",
								analysis_column_label(src, att), analysis_source_label(src)),
					   pstrdup("A decoded DELETE, or an UPDATE that moves a row to another group, carries only the replica identity of the old row (by default its primary key), and the old group must be known."),
					   psprintf("Log whole old rows: ALTER TABLE %s REPLICA IDENTITY FULL;", src->relname));
			else
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 7: group key column %s is not part of the replica identity of partition %s of %s",
								analysis_column_label(src, att), culprit_name, analysis_source_label(src)),
					   pstrdup("Changes of a partitioned table are decoded as changes of its partitions, each with its own replica identity: every partition must log the group key of its old rows."),
					   psprintf("Log whole old rows in each partition: ALTER TABLE %s REPLICA IDENTITY FULL; (setting it on the partitioned table does not set it on its partitions).",
								culprit_name));
		}
	}
	src->key_natts = n;
	if (n < list_length(query->groupClause))
		return;

	/* keyed recompute: the planner finds the group's rows its own way */
	lookup = analysis_choose_lookup(a, 0, bindable);
	if (a->path == DJ_PATH_KEYED)
	{
		if (lookup != NULL)
			plan->group_index = src->lookup_index = lookup->index;
	}
	else if (lookup == NULL)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 7: group key %s of %s does not cover the leading column of any btree index",
						analysis_column_list(src->relid, n, src->key_attnums), analysis_source_label(src)),
			   pstrdup("A changed group is recomputed from the rows an index-prefix scan on the group key finds."),
			   psprintf("Create an index on the group key: CREATE INDEX ON %s %s;",
						src->relname, analysis_column_list(src->relid, n, src->key_attnums)));
	else
	{
		src->lookup_index = lookup->index;
		src->lookup_nkeys = lookup->nkeys;
		plan->group_index = lookup->index;
	}
	if (a->path != DJ_PATH_KEYED)
		analysis_check_partition_key(a, 0, bindable, "group key");

	analysis_map_key(a, key_ids);

	/* (in retract mode, a group that stops passing HAVING is deleted) */
	plan->has_filter = (query->havingQual != NULL &&
						!condition_on_group_key(query->havingQual, src));
	if (plan->has_filter && !plan->options.ignore_non_unique_key_filter &&
		!plan->options.retract)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 6: HAVING condition on an aggregate could leave a group's earlier row behind"),
			   pstrdup("Without retract mode, a group that stops passing HAVING keeps the row written for it earlier (a group left without rows is deleted)."),
			   pstrdup("Create the view with options => '{\"retract\": true}', which deletes such a group, or accept the rows left behind with options => '{\"ignore_non_unique_key_filter\": true}'."));
}
