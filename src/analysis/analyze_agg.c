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
 * recomputed whole.  An aggregate over inner joins, or a SELECT DISTINCT
 * over them, takes keyed recompute of groups through joins under strategy
 * auto (analysis_aggregate_join).
 * Shares the analysis state of analyze.c (analysis.h).
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
 * Is the analysis one of an aggregate over a join, a SELECT DISTINCT over
 * a join taken as its groups included (whether or not it is eligible)?
 */
bool
analysis_aggregate_over_join(Analysis *a)
{
	return a->plan->kind == DJ_KIND_AGGREGATE && list_length(a->plan->sources) > 1;
}

/*
 * Sources an aggregate over joins may have: a batch in which all of them
 * changed runs 2^n - 1 finder queries (apply_agg.c).
 */
#define JOIN_GROUPS_MAX_SOURCES	6

/* Add column att to the sorted set of columns cols[0 .. *n - 1] */
void
analysis_add_column(AttrNumber *cols, int *n, AttrNumber att)
{
	int			i = *n;

	for (int k = 0; k < *n; k++)
		if (cols[k] == att)
			return;
	while (i > 0 && cols[i - 1] > att)
	{
		cols[i] = cols[i - 1];
		i--;
	}
	cols[i] = att;
	(*n)++;
}

/*
 * Keyed recompute of groups through joins (DJ_PATH_JOIN_GROUPS): an
 * aggregate over inner joins, grouped by plain columns of any source; or a
 * SELECT DISTINCT over inner joins, which the analysis has made a GROUP BY
 * of its select list (DeltaPlan.distinct): the same groups, no aggregate.
 *
 * A batch's dirty groups are found by the query's joins and conditions run
 * with the changed rows of sources in place of those sources
 * (recompute_prepare_finder): each changed row's image, from its new row and
 * from its old row, is the columns of its source that the group key and the
 * conditions between sources read -- the source's key columns here
 * (DeltaSource.key_attnums), captured as any dirty key is.  The old row of a
 * decoded DELETE or UPDATE carries only the replica identity, so each of
 * those columns must be in it.  A source joined by no condition (a cross
 * join) would make every group of every change dirty: refused.
 */
static void
analysis_aggregate_join(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	Query	   *query = plan->query;
	int			nsources = list_length(plan->sources);
	List	   *key_ids = NIL;
	bool	   *joined = palloc0(sizeof(bool) * nsources);
	ListCell   *lc;

	if (nsources > JOIN_GROUPS_MAX_SOURCES)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("keyed recompute of groups through joins: the aggregate joins %d tables, more than %d",
						nsources, JOIN_GROUPS_MAX_SOURCES),
			   pstrdup("A batch runs a query to find dirty groups for each set of the sources that changed in it."),
			   pstrdup("Join fewer tables, or let strategy auto maintain the view by full recompute."));
		return;
	}
	if (plan->has_outer)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("keyed recompute of groups through joins: outer joins under the aggregate are not supported"),
			   pstrdup("The groups a changed row leaves and enters are found through inner joins only."),
			   pstrdup("Use inner joins, or let strategy auto maintain the view by full recompute."));
		return;
	}
	if (query->groupClause == NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("keyed recompute of groups through joins: an aggregate over a join needs GROUP BY"),
			   pstrdup("Without GROUP BY the result is one group, which any change makes dirty."),
			   pstrdup("Group by columns of the sources, or let strategy auto maintain the view by full recompute."));
		return;
	}

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		src->key_natts = 0;
		src->key_attnums = palloc(sizeof(AttrNumber) * Max(src->natts, 1));
	}

	/* the group key: plain columns of the sources */
	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, query->targetList);
		int			s;
		AttrNumber	att;

		if (!analysis_var_source(a, (Node *) tle->expr, &s, &att))
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("keyed recompute of groups through joins: group key expressions must be plain columns"),
				   pstrdup("A changed row's groups are found by the values of the group key columns it joins to."),
				   pstrdup("Group by plain columns of the sources."));
			return;
		}
		analysis_add_column(SOURCE(a, s)->key_attnums, &SOURCE(a, s)->key_natts, att);
		key_ids = lappend_int(key_ids, analysis_column_id(a, s, att));
	}

	/* the columns of the conditions between sources */
	foreach(lc, plan->quals)
	{
		Node	   *qual = lfirst(lc);
		ListCell   *lc2;

		if (bms_num_members(analysis_node_sources(a, qual)) < 2)
			continue;
		foreach(lc2, pull_var_clause(qual, 0))
		{
			int			s;
			AttrNumber	att;

			if (!analysis_var_source(a, lfirst(lc2), &s, &att))
				continue;
			analysis_add_column(SOURCE(a, s)->key_attnums, &SOURCE(a, s)->key_natts, att);
			joined[s] = true;
		}
	}

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (!joined[foreach_current_index(lc)])
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("keyed recompute of groups through joins: %s is joined to no other source by a condition",
							analysis_source_label(src)),
				   pstrdup("Every change of a source joined by no condition could change every group."),
				   pstrdup("Join each source to another by a condition on their columns."));
			continue;
		}
		if (src->lookup_only)
			continue;			/* its changes are not captured */
		for (int k = 0; k < src->key_natts; k++)
		{
			Oid			culprit;
			char	   *culprit_name;

			if (analysis_refuse_virtual(a, src, src->key_attnums[k],
										"keyed recompute of groups through joins"))
				continue;

			if (analysis_logged_in_old_row(src, src->key_attnums[k], &culprit))
				continue;
			culprit_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(culprit)),
													  get_rel_name(culprit));
			if (culprit == src->relid)
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("keyed recompute of groups through joins: column %s of %s, which the group key or a join condition reads, is not part of its replica identity",
								analysis_column_label(src, src->key_attnums[k]),
								analysis_source_label(src)),
					   pstrdup("A decoded DELETE, or an UPDATE, carries only the replica identity of the old row (by default its primary key), and the groups the old row leaves must be found through it."),
					   psprintf("Log whole old rows: ALTER TABLE %s REPLICA IDENTITY FULL;", src->relname));
			else
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("keyed recompute of groups through joins: column %s of %s, which the group key or a join condition reads, is not part of the replica identity of partition %s",
								analysis_column_label(src, src->key_attnums[k]),
								analysis_source_label(src), culprit_name),
					   pstrdup("Changes of a partitioned table are decoded as changes of its partitions, each with its own replica identity."),
					   psprintf("Log whole old rows in each partition: ALTER TABLE %s REPLICA IDENTITY FULL; (setting it on the partitioned table does not set it on its partitions).",
								culprit_name));
		}
	}

	analysis_map_key(a, key_ids);
	plan->has_filter = (query->havingQual != NULL);
	if (a->failures == NIL)
		analysis_additive(a);
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

	if (a->path == DJ_PATH_JOIN_GROUPS)
	{
		if (list_length(plan->sources) < 2)
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("keyed recompute of groups through joins: the aggregate reads one table"),
				   NULL, pstrdup("An aggregate of one table takes keyed recompute."));
		else
			analysis_aggregate_join(a);
		return;
	}
	if (list_length(plan->sources) != 1)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 7: aggregates over a join are not supported"),
			   pstrdup("An aggregate view groups the rows of one table."),
			   pstrdup("Aggregate one table, keep the join as a view of its own, or let strategy auto maintain the view by keyed recompute of groups through joins."));
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

		if (analysis_refuse_virtual(a, src, att, "delta view rule 7"))
			continue;
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
