/*-------------------------------------------------------------------------
 *
 * analyze_additive.c
 *	  Additive apply of an aggregate over joins (issue 22): may a batch's
 *	  changed rows be added to their groups, and subtracted from them,
 *	  instead of their groups being recomputed?
 *
 * A view of keyed recompute of groups through joins (DJ_PATH_JOIN_GROUPS)
 * is additive when its select list is its group key and aggregates whose
 * value over a group is the sum of its rows' contributions, and exact in
 * any order: count(*), count(x), and sum(x) of integers or of numeric of a
 * fixed scale (a float sum added to in another order than the query's
 * rounds otherwise; a numeric of free scale would keep the scale of a row
 * that left).  No HAVING (a group that passes it again would need the
 * value the target does not keep), no DISTINCT, no semi- or anti-join.
 *
 * The batch's changed rows are then weighed (+1 for a new row, -1 for an
 * old one) and joined, through the view's own joins and conditions, to the
 * other sources as they are now: that sum of contributions is exactly the
 * change of each group when they are the only source that changed
 * (apply_agg.c says when else).  The images of a source's changed rows must
 * therefore hold every column the query reads of it -- its key columns
 * are widened to them -- and the old row of a decoded UPDATE or DELETE must
 * carry them: REPLICA IDENTITY FULL, checked here and again for each
 * decoded change (plugin.c).
 *
 * A group key whose equal values may differ in bytes (numeric 1.0 and
 * 1.00) is written as the changed rows spell it.  When rows leave a
 * group, the spelling kept may be that of a row no longer in it, which
 * the query cannot return: such a batch recomputes its groups instead
 * (additive_keys_bytewise, apply_additive.c).
 *
 * A view registered before this file existed keeps its narrower key
 * columns (source_catalog), and with them keyed recompute (view_plan.c).
 *
 * IDENTIFICATION
 *	  src/analysis/analyze_additive.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/nbtree.h"
#include "catalog/pg_am.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "analysis/analysis.h"
#include "base/compat.h"

/* Is column att of relation relid NOT NULL? */
static bool
column_not_null(Oid relid, AttrNumber att)
{
	HeapTuple	tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(att));
	bool		result = false;

	if (HeapTupleIsValid(tuple))
	{
		result = ((Form_pg_attribute) GETSTRUCT(tuple))->attnotnull;
		ReleaseSysCache(tuple);
	}
	return result;
}

/*
 * The role of an aggregate output column, or a reason it has none (the
 * aggregate is not kept by adding).
 */
static const char *
aggregate_role(Analysis *a, TargetEntry *tle, AdditiveColumn *col)
{
	Aggref	   *agg = (Aggref *) tle->expr;

	if (!IsA(agg, Aggref))
		return "is not an aggregate of its own";
	if (agg->aggdistinct != NIL || agg->aggorder != NIL || agg->aggfilter != NULL ||
		agg->aggdirectargs != NIL || agg->aggkind != AGGKIND_NORMAL)
		return "has DISTINCT, ORDER BY or FILTER";
	switch (agg->aggfnoid)
	{
		case F_COUNT_:
			col->role = ADDITIVE_COUNT_ROWS;
			return NULL;
		case F_COUNT_ANY:
			col->role = ADDITIVE_COUNT;
			break;
		case F_SUM_INT2:
		case F_SUM_INT4:
		case F_SUM_INT8:
			col->role = ADDITIVE_SUM;
			break;
		case F_SUM_NUMERIC:
			col->role = ADDITIVE_SUM;
			if (exprTypmod((Node *) ((TargetEntry *) linitial(agg->args))->expr) < 0)
				return "sums numeric values of no fixed scale";
			break;
		default:
			return "is not count(*), count(x), or sum(x) of integers or of numeric";
	}
	col->arg = ((TargetEntry *) linitial(agg->args))->expr;
	if (IsA(col->arg, Var))
	{
		int			s;
		AttrNumber	att;

		if (analysis_var_source(a, (Node *) col->arg, &s, &att))
			col->arg_not_null = column_not_null(SOURCE(a, s)->relid, att);
	}
	return NULL;
}

/* The qualified name of a relation, quoted */
static char *
relation_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Are two values of each column of the group key equal only when their
 * bytes are?  Not numeric (1.0 and 1.00), float8 (0 and -0) or text under a
 * nondeterministic collation.  As btree deduplication asks it
 * (_bt_allequalimage): the equalimage support function of the type's
 * default btree operator class, given the column's collation.
 */
static bool
group_key_bytewise(Query *query)
{
	ListCell   *lc;

	foreach(lc, query->groupClause)
	{
		Node	   *expr = (Node *) get_sortgroupclause_expr(lfirst(lc), query->targetList);
		Oid			opclass = GetDefaultOpClass(exprType(expr), BTREE_AM_OID);
		Oid			opcintype;
		Oid			equalimage;

		if (!OidIsValid(opclass) ||
			(type_is_collatable(exprType(expr)) && !OidIsValid(exprCollation(expr))))
			return false;
		opcintype = get_opclass_input_type(opclass);
		equalimage = get_opfamily_proc(get_opclass_family(opclass), opcintype, opcintype,
									   BTEQUALIMAGE_PROC);
		if (!OidIsValid(equalimage) ||
			!DatumGetBool(OidFunctionCall1Coll(equalimage, exprCollation(expr),
											   ObjectIdGetDatum(opcintype))))
			return false;
	}
	return true;
}

/*
 * Why an aggregate over joins is not additive (its aggregates, or the
 * columns its changed rows' images must carry), or NULL if it is; the
 * roles of its output columns set in plan->additive_columns.
 */
static char *
additive_refusal(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	Query	   *query = plan->query;
	ListCell   *lc;
	int			c = 0;

	if (query->havingQual != NULL)
		return pstrdup("HAVING hides groups whose values the target does not keep");

	plan->additive_columns = palloc0(sizeof(AdditiveColumn) * plan->ncolumns);
	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		const char *why;

		if (tle->resjunk)
			continue;
		if (tle->ressortgroupref != 0 &&
			get_sortgroupref_clause_noerr(tle->ressortgroupref, query->groupClause) != NULL)
			plan->additive_columns[c].role = ADDITIVE_GROUP;
		else if ((why = aggregate_role(a, tle, &plan->additive_columns[c])) != NULL)
			return psprintf("output column %s %s", quote_identifier(tle->resname), why);
		c++;
	}

	/* a sum whose values may all leave: its count tells when none is left */
	for (int s = 0; s < plan->ncolumns; s++)
	{
		plan->additive_columns[s].counted_by = -1;
		for (int k = 0; k < plan->ncolumns && plan->additive_columns[s].role == ADDITIVE_SUM; k++)
			if (plan->additive_columns[k].role == ADDITIVE_COUNT &&
				equal(plan->additive_columns[k].arg, plan->additive_columns[s].arg))
				plan->additive_columns[s].counted_by = k;
	}

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (src->lookup_only)
			return psprintf("the changes of %s are not captured (lookup-only)",
							analysis_source_label(src));
		for (int k = 0; k < src->wide_natts; k++)
		{
			AttrNumber	att = src->wide_attnums[k];
			Oid			culprit;

			if (compat_column_is_virtual(src->relid, att))
				return psprintf("column %s of %s is a virtual generated column",
								analysis_column_label(src, att), analysis_source_label(src));
			if (!analysis_logged_in_old_row(src, att, &culprit))
				return psprintf("column %s of %s is not in the replica identity of %s (ALTER TABLE %s REPLICA IDENTITY FULL)",
								analysis_column_label(src, att), analysis_source_label(src),
								relation_name(culprit), relation_name(culprit));
		}
	}
	return NULL;
}

/*
 * Decide whether the view (of keyed recompute of groups through joins,
 * analysed) is additive; if so widen each source's key columns to every
 * column the query reads of it.  The narrow and the wide key are kept
 * either way (view_plan.c).
 */
void
analysis_additive(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	Query	   *query = plan->query;
	List	   *vars;
	ListCell   *lc;

	/* every column the query reads, per source: the wide key */
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		src->narrow_natts = src->key_natts;
		src->narrow_attnums = src->key_attnums;
		src->wide_natts = 0;
		src->wide_attnums = palloc(sizeof(AttrNumber) * Max(src->natts, 1));
		for (int k = 0; k < src->key_natts; k++)
			analysis_add_column(src->wide_attnums, &src->wide_natts, src->key_attnums[k]);
	}
	vars = pull_var_clause((Node *) query->targetList, PVC_RECURSE_AGGREGATES);
	vars = list_concat(vars, pull_var_clause((Node *) plan->quals, 0));
	foreach(lc, vars)
	{
		int			s;
		AttrNumber	att;

		if (analysis_var_source(a, lfirst(lc), &s, &att))
			analysis_add_column(SOURCE(a, s)->wide_attnums, &SOURCE(a, s)->wide_natts, att);
	}

	/* (DISTINCT and semi- and anti-joins keep no aggregate: nothing to say) */
	plan->additive = false;
	if (plan->distinct || plan->semi_join || plan->anti_join)
		return;
	plan->additive_refusal = additive_refusal(a);
	if (plan->additive_refusal != NULL)
		return;

	/* the images hold all the query reads */
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		src->key_natts = src->wide_natts;
		src->key_attnums = src->wide_attnums;
	}
	plan->additive = true;
	plan->additive_keys_bytewise = group_key_bytewise(plan->query);
}
