/*-------------------------------------------------------------------------
 *
 * semi_join.c
 *	  Semi-joins (EXISTS, IN) taken as a DISTINCT join, anti-joins (NOT
 *	  EXISTS, NOT IN) beside them, on the path of groups through joins.
 *
 * A semi-join -- EXISTS or IN in the top-level AND of WHERE -- is pulled up
 * the way the planner's pull_up_sublinks makes it a join, and the query
 * made the SELECT DISTINCT of that join, when its rows are distinct
 * (analysis_pull_up_semi_joins).  An anti-join -- NOT EXISTS, or NOT IN
 * where it means the same -- is pulled up alike for the analysis, which
 * judges its subquery's tables as sources joined to the outer query; the
 * view's query then gets it back as written (analysis_restore_anti_joins).
 * Each subquery is flattened first (flatten.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "analysis/analysis.h"

/*
 * A sublink that is a top-level condition of WHERE: EXISTS or IN, or, with
 * *anti set, NOT EXISTS or NOT IN.
 */
static SubLink *
semi_join_sublink(Node *qual, bool *anti)
{
	*anti = false;
	if (qual != NULL && is_notclause(qual))
	{
		qual = (Node *) get_notclausearg(qual);
		*anti = true;
	}
	if (qual == NULL || !IsA(qual, SubLink))
		return NULL;
	if (((SubLink *) qual)->subLinkType == EXISTS_SUBLINK ||
		(((SubLink *) qual)->subLinkType == ANY_SUBLINK &&
		 ((SubLink *) qual)->testexpr != NULL))
		return (SubLink *) qual;
	return NULL;
}

static bool
holds_semi_join_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink))
	{
		SubLink    *sublink = (SubLink *) node;

		if (sublink->subLinkType == EXISTS_SUBLINK || sublink->subLinkType == ANY_SUBLINK)
			return true;
		return holds_semi_join_walker(sublink->testexpr, context);
	}
	return expression_tree_walker(node, holds_semi_join_walker, context);
}

/*
 * Does an expression hold an EXISTS or IN (negated or not) anywhere, its
 * subqueries' own conditions left out?
 */
bool
analysis_holds_semi_join(Node *node)
{
	return holds_semi_join_walker(node, NULL);
}

static void
reject_semi_join(Analysis *a, char *message, char *detail, char *hint)
{
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("keyed recompute of groups through joins: %s", message),
		   detail, hint ? hint : pstrdup("Let strategy auto maintain the view by full recompute."));
}

/*
 * The rows of the outer query are distinct: it is a SELECT DISTINCT, or
 * its select list holds, as plain columns, a unique key of each table it
 * reads -- one whose equality and collation are those DISTINCT compares
 * with, and whose columns are NOT NULL or NULLS NOT DISTINCT (the check of
 * row_order.c).  Else the first table that lacks one is named in *culprit.
 */
static bool
outer_rows_distinct(Query *query, char **culprit)
{
	List	   *tlist;
	int			rtindex = -1;
	Bitmapset  *referenced;

	if (query->distinctClause != NIL)
		return true;
	tlist = (List *) flatten_join_alias_vars_compat(query, copyObject((Node *) query->targetList));
	referenced = analysis_referenced_rtes(query);
	while ((rtindex = bms_next_member(referenced, rtindex)) >= 0)
	{
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
		Bitmapset  *output = NULL;
		ListCell   *lc;

		if (rte->rtekind == RTE_JOIN)
			continue;
		foreach(lc, tlist)
		{
			TargetEntry *tle = lfirst(lc);
			Var		   *var = (Var *) tle->expr;

			if (!tle->resjunk && IsA(var, Var) && var->varno == rtindex &&
				var->varlevelsup == 0 && var->varattno > 0)
				output = bms_add_member(output, var->varattno);
		}
		if (!row_order_covers_unique_key(rte, output, NULL))
		{
			*culprit = pstrdup(rte->eref->aliasname);
			return false;
		}
	}
	return true;
}

/* A Param of an IN sublink becomes the select-list entry it stands for */
static Node *
replace_sublink_params(Node *node, List *tlist)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_SUBLINK)
	{
		TargetEntry *tle = list_nth(tlist, ((Param *) node)->paramid - 1);

		return copyObject((Node *) tle->expr);
	}
	return expression_tree_mutator(node, replace_sublink_params, (void *) tlist);
}

/* A plain user column, under implicit coercions, of query level levelsup */
static Var *
plain_column(Node *node, Index levelsup)
{
	node = strip_implicit_coercions(node);
	if (node != NULL && IsA(node, Var) && ((Var *) node)->varlevelsup == levelsup &&
		((Var *) node)->varattno > 0)
		return (Var *) node;
	return NULL;
}

/*
 * Is qual "column = column" by an equality operator, one column read at
 * query level level1, the other at level2 (either way round)?  With an
 * IN's Param on the right, the select-list entry of tlist it stands for.
 */
static bool
column_equality(Node *qual, Index level1, Index level2, List *tlist, Var **col1, Var **col2)
{
	OpExpr	   *op = (OpExpr *) qual;
	Node	   *left;
	Node	   *right;

	if (!IsA(qual, OpExpr) || list_length(op->args) != 2 ||
		!(op_mergejoinable(op->opno, exprType(linitial(op->args))) ||
		  op_hashjoinable(op->opno, exprType(linitial(op->args)))))
		return false;
	left = linitial(op->args);
	right = replace_sublink_params(lsecond(op->args), tlist);
	*col1 = plain_column(left, level1);
	*col2 = plain_column(right, level2);
	if (*col1 == NULL || *col2 == NULL)
	{
		*col1 = plain_column(right, level1);
		*col2 = plain_column(left, level2);
	}
	return *col1 != NULL && *col2 != NULL;
}

/*
 * Is a column of query (join alias vars followed) never NULL: a column
 * declared NOT NULL of a table that no outer join of query null-extends?
 */
static bool
column_never_null(Query *query, Var *var)
{
	Var		   *copy = copyObject(var);
	RangeTblEntry *rte;
	Relation	rel;
	bool		notnull;

	copy->varlevelsup = 0;
	copy = (Var *) flatten_join_alias_vars_compat(query, (Node *) copy);
	if (!IsA(copy, Var))
		return false;
	rte = rt_fetch(copy->varno, query->rtable);
	if (rte->rtekind != RTE_RELATION ||
		analysis_under_nullable_side((Node *) query->jointree, copy->varno) != 0)
		return false;
	rel = table_open(rte->relid, AccessShareLock);
	notnull = compat_column_not_null(RelationGetDescr(rel), copy->varattno);
	table_close(rel, AccessShareLock);
	return notnull;
}

/*
 * Can a column of query (join alias vars followed) be NULL because an
 * outer join of query null-extends its table?  (An expression that a join
 * alias var stands for, FULL JOIN ... USING's COALESCE, is taken as one.)
 */
static bool
column_null_extended(Query *query, Var *var)
{
	Var		   *copy = copyObject(var);

	copy->varlevelsup = 0;
	copy = (Var *) flatten_join_alias_vars_compat(query, (Node *) copy);
	return !IsA(copy, Var) ||
		analysis_under_nullable_side((Node *) query->jointree, copy->varno) != 0;
}

/*
 * The correlation of an anti-join: each condition of its subquery's WHERE
 * that reads the outer query compares a column of the subquery with a
 * column of the outer query by an equality (for NOT IN, its comparison,
 * and both columns never NULL: then NOT IN is NOT EXISTS).  A change of
 * the subquery's tables dirties the outer rows its old and new rows equal
 * so; another comparison would dirty all of them.  False, after reject,
 * when it is not so.
 */
static bool
check_anti_join_correlation(Analysis *a, Query *query, Query *sub, SubLink *sublink,
							Node *where)
{
	bool		exists = (sublink->subLinkType == EXISTS_SUBLINK);
	ListCell   *lc;

	if (exists)
	{
		foreach(lc, make_ands_implicit((Expr *) where))
		{
			Var		   *inner;
			Var		   *outer;

			if (contain_vars_of_level(lfirst(lc), 1) &&
				!column_equality(lfirst(lc), 0, 1, NIL, &inner, &outer))
			{
				reject_semi_join(a, pstrdup("the subquery of NOT EXISTS must be correlated by equalities of its columns with columns of the outer query"),
								 pstrdup("A change of its tables dirties the outer rows its old and new rows are equal to; another condition on the outer query's columns could concern every row."),
								 NULL);
				return false;
			}

			/*
			 * A row null-extended there passes NOT EXISTS whatever the
			 * subquery's tables hold: the correlation does not make the
			 * outer join an inner one, as the pulled-up join would say.
			 */
			if (contain_vars_of_level(lfirst(lc), 1) && column_null_extended(query, outer))
			{
				RangeTblEntry *rte = rt_fetch(outer->varno, query->rtable);

				reject_semi_join(a, psprintf("the subquery of NOT EXISTS is correlated with column %s%s%s, which an outer join null-extends",
											 rte->rtekind == RTE_RELATION ? quote_identifier(rte->eref->aliasname) : "",
											 rte->rtekind == RTE_RELATION ? "." : "",
											 quote_identifier(get_rte_attribute_name(rte, outer->varattno))),
								 pstrdup("The outer query's null-extended rows pass NOT EXISTS whatever the subquery's tables hold, so the outer join stays an outer join, which this path does not maintain."),
								 NULL);
				return false;
			}
		}
		return true;
	}

	foreach(lc, make_ands_implicit((Expr *) sublink->testexpr))
	{
		Var		   *outer;
		Var		   *inner;

		if (!column_equality(lfirst(lc), 0, 0, sub->targetList, &outer, &inner))
		{
			reject_semi_join(a, pstrdup("NOT IN must compare columns of the outer query with columns of its subquery by equality"),
							 pstrdup("A change of the subquery's tables dirties the outer rows its old and new rows are equal to."),
							 NULL);
			return false;
		}
		if (!column_never_null(query, outer) || !column_never_null(sub, inner))
		{
			reject_semi_join(a, pstrdup("a column that NOT IN compares may be NULL"),
							 pstrdup("One NULL among the subquery's values leaves NOT IN no row at all, and a NULL outer value fails it: only between columns that are never NULL (declared NOT NULL, on no nullable side of an outer join) is NOT IN the anti-join NOT EXISTS is."),
							 pstrdup("Declare both columns NOT NULL, write NOT EXISTS instead, or let strategy auto maintain the view by full recompute."));
			return false;
		}
	}
	return true;
}

/*
 * An anti-join as the view's query keeps it: NOT EXISTS of its subquery
 * (flattened, as the query's own FROM items are), a NOT IN turned into the
 * NOT EXISTS it equals (check_anti_join_correlation), which the planner
 * runs as an anti-join through the subquery's indexes.
 */
static Node *
anti_join_as_written(Query *sub, SubLink *sublink)
{
	SubLink    *exists = makeNode(SubLink);
	Query	   *exact = copyObject(sub);

	if (sublink->subLinkType == ANY_SUBLINK)
	{
		Node	   *test = copyObject(sublink->testexpr);

		IncrementVarSublevelsUp(test, 1, 0);
		test = replace_sublink_params(test, exact->targetList);
		exact->jointree->quals = (Node *) make_ands_explicit(list_concat(make_ands_implicit((Expr *) exact->jointree->quals),
																		 make_ands_implicit((Expr *) test)));
	}
	exact->targetList = NIL;
	exists->subLinkType = EXISTS_SUBLINK;
	exists->subselect = (Node *) exact;
	exists->location = -1;
	return (Node *) make_notclause((Expr *) exists);
}

/*
 * Pull the subquery of a semi-join up into query, the way the planner's
 * convert_EXISTS_sublink_to_join and convert_ANY_sublink_to_join make it a
 * join (subselect.c): its range table goes to the end of query's, its FROM
 * items to the end of query's FROM list.  Returns the conditions (ANDed)
 * that take the sublink's place -- the subquery's WHERE, and for IN the
 * comparison of the outer columns with its select list -- or NIL, after
 * reject, when it cannot be pulled up: a subquery of more than joins and
 * filters, an EXISTS that reads the outer query's columns outside its
 * WHERE or not at all, an IN whose subquery reads them, a volatile
 * condition.  An anti-join (anti) is pulled up alike, its correlation
 * checked, and noted in a->anti_joins with the condition that stands for
 * it in the view's query (anti_join_as_written), in *as_written.
 */
static List *
pull_up_semi_join(Analysis *a, Query *query, SubLink *sublink, bool anti, Node **as_written)
{
	Query	   *sub = copyObject(castNode(Query, sublink->subselect));
	bool		exists = (sublink->subLinkType == EXISTS_SUBLINK);
	const char *name = exists ? (anti ? "NOT EXISTS" : "EXISTS") : (anti ? "NOT IN" : "IN");
	const char *kind = anti ? "an anti-join (NOT EXISTS or NOT IN)" : "a semi-join (EXISTS or IN)";
	Node	   *where;
	List	   *conds = NIL;

	analysis_flatten(a, sub);
	/*
	 * (What a semi-join's select list, DISTINCT and ORDER BY say is moot;
	 * so is a LIMIT of EXISTS that keeps a row, as simplify_EXISTS_query
	 * has it.)
	 */
	if (exists)
	{
		/* (the parser casts an integer LIMIT to bigint, implicitly) */
		Const	   *limit = (Const *) strip_implicit_coercions(sub->limitCount);

		sub->targetList = NIL;
		if (limit != NULL && IsA(limit, Const) &&
			(limit->constisnull ||
			 (limit->consttype == INT8OID && DatumGetInt64(limit->constvalue) > 0) ||
			 (limit->consttype == INT4OID && DatumGetInt32(limit->constvalue) > 0)))
			sub->limitCount = NULL;
	}
	if (!sub->hasDistinctOn)
		sub->distinctClause = NIL;
	sub->sortClause = NIL;
	if (!analysis_is_simple_subquery(sub))
	{
		reject_semi_join(a, psprintf("the subquery of %s must be made of joins and filters", kind),
						 anti ? pstrdup("Its tables are found from the outer rows they correlate with through joins and filters only.") :
						 pstrdup("It is taken as a join, which only joins and filters can stand for."),
						 NULL);
		return NIL;
	}
	if (anti && sub->hasSubLinks)
	{
		reject_semi_join(a, psprintf("the subquery of %s holds a subquery (EXISTS, IN or another) of its own", name),
						 pstrdup("The outer rows a change of its tables concerns are found through joins and filters only."),
						 NULL);
		return NIL;
	}
	where = sub->jointree->quals;
	sub->jointree->quals = NULL;
	if (exists && (contain_vars_of_level((Node *) sub, 1) ||
				   !contain_vars_of_level(where, 1)))
	{
		reject_semi_join(a, psprintf("the subquery of %s must read columns of the outer query in its WHERE, and only there", name),
						 pstrdup("Its WHERE becomes the condition that joins it to the outer query's tables."),
						 NULL);
		return NIL;
	}
	if (!exists && (contain_vars_of_level((Node *) sub, 1) || contain_vars_of_level(where, 1)))
	{
		reject_semi_join(a, psprintf("the subquery of %s reads columns of the outer query", name),
						 pstrdup("The comparison of IN becomes the condition that joins it to the outer query's tables."),
						 psprintf("Compare the outer columns in a correlated %s instead, or let strategy auto maintain the view by full recompute.",
								  anti ? "NOT EXISTS" : "EXISTS"));
		return NIL;
	}
	if (contain_volatile_functions(where) ||
		(!exists && contain_volatile_functions(sublink->testexpr)))
	{
		reject_semi_join(a, psprintf("the condition of %s calls a volatile function", kind),
						 pstrdup("It is evaluated once per joined row, not once per row of the outer query."),
						 NULL);
		return NIL;
	}
	sub->jointree->quals = where;
	if (anti)
	{
		AntiJoin   *aj;

		if (!check_anti_join_correlation(a, query, sub, sublink, where))
			return NIL;
		aj = palloc0(sizeof(AntiJoin));
		*as_written = anti_join_as_written(sub, sublink);
		aj->first_rtindex = list_length(query->rtable) + 1;
		aj->last_rtindex = list_length(query->rtable) + list_length(sub->rtable);
		aj->fromlist = list_copy(sub->jointree->fromlist);
		a->anti_joins = lappend(a->anti_joins, aj);
	}

	OffsetVarNodes((Node *) sub, list_length(query->rtable), 0);
	if (exists)
		IncrementVarSublevelsUp((Node *) sub, -1, 1);
	compat_append_range_table(query, sub);
	query->jointree->fromlist = list_concat(query->jointree->fromlist,
											sub->jointree->fromlist);
	if (!exists)
		conds = make_ands_implicit((Expr *) replace_sublink_params(copyObject(sublink->testexpr),
																   sub->targetList));
	return list_concat(conds, make_ands_implicit((Expr *) sub->jointree->quals));
}

/*
 * The select list of query made its DISTINCT, as the parser makes it
 * (transformDistinctClause).  False if a column's type has no equality.
 */
static bool
add_distinct(Analysis *a, Query *query)
{
	List	   *clauses = NIL;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		SortGroupClause *sgc;
		Oid			sortop;
		Oid			eqop;
		bool		hashable;

		if (tle->resjunk)
			continue;
		get_sort_group_operators(exprType((Node *) tle->expr), false, false, false,
								 &sortop, &eqop, NULL, &hashable);
		if (!OidIsValid(eqop))
		{
			reject_semi_join(a, psprintf("output column \"%s\" of a %s has type %s, which has no equality operator",
										 tle->resname, a->anti_joins != NIL ? "semi-join or anti-join" : "semi-join",
										 format_type_be(exprType((Node *) tle->expr))),
							 a->anti_joins != NIL ? pstrdup("The query is taken as the SELECT DISTINCT of its rows, which compares every output column.") :
							 pstrdup("The semi-join is taken as a SELECT DISTINCT of its join, which compares every output column."),
							 NULL);
			return false;
		}
		sgc = makeNode(SortGroupClause);
		sgc->tleSortGroupRef = assignSortGroupRef(tle, query->targetList);
		sgc->eqop = eqop;
		sgc->sortop = sortop;
		sgc->nulls_first = false;
		sgc->hashable = hashable;
		clauses = lappend(clauses, sgc);
	}
	query->distinctClause = clauses;
	return true;
}

/*
 * Semi-joins and anti-joins on the path of groups through joins
 * (DeltaPlan.semi_join, DeltaPlan.anti_join).
 *
 * A condition "EXISTS (SELECT ... FROM b WHERE b.k = a.k AND ...)" or
 * "a.k IN (SELECT b.k FROM b WHERE ...)" in the top-level AND of WHERE
 * keeps a row of the outer query iff some row of b joins it.  When the
 * outer query's rows are distinct -- its select list holds a unique key of
 * each table it reads, or it is a SELECT DISTINCT -- its rows are then the
 * rows of the SELECT DISTINCT of the join of b with the sublink's
 * conditions: each kept row once, none other.  NULLs agree: a NULL key
 * fails IN, and fails the join's equality alike, in WHERE.  The query is
 * rewritten so (its DISTINCT then made a GROUP BY by analyze.c), and the
 * path's own rules judge it.
 *
 * A condition "NOT EXISTS (SELECT ... FROM b WHERE b.k = a.k AND ...)"
 * keeps a row of the outer query iff no row of b joins it; so does
 * "a.k NOT IN (SELECT b.k FROM b ...)" when a.k and b.k are never NULL.
 * Its rows, when they are distinct, are each a group of the view too: an
 * outer row is dirty when it changed, or when a changed row of b joins
 * it, before or after the change -- the outer rows the join of b with the
 * correlation finds, as a semi-join's.  For the analysis, then, the
 * anti-join is pulled up as a semi-join is: b's tables become sources
 * joined to the outer query, whose changed rows' images must hold the
 * columns of the correlation.  The view's query gets the NOT EXISTS back
 * (analysis_restore_anti_joins): each dirty group is recomputed by it,
 * exactly.
 *
 * A query that groups, aggregates or reads EXISTS or IN elsewhere in WHERE
 * (under OR, say) is refused.  Returns false, after reject, when a
 * semi-join or anti-join cannot be pulled up.
 */
bool
analysis_pull_up_semi_joins(Analysis *a, Query *query)
{
	List	   *quals;
	List	   *kept = NIL;
	List	   *as_written = NIL;
	bool		has_semi = false;
	bool		has_anti = false;
	bool		elsewhere = false;
	bool		failed = false;
	char	   *culprit = NULL;
	const char *what;
	const char *article;
	ListCell   *lc;

	if (!query->hasSubLinks || query->jointree->quals == NULL)
		return true;
	quals = make_ands_implicit((Expr *) query->jointree->quals);
	foreach(lc, quals)
	{
		bool		anti;

		if (semi_join_sublink(lfirst(lc), &anti) != NULL)
		{
			has_anti |= anti;
			has_semi |= !anti;
		}
		else
			elsewhere |= analysis_holds_semi_join(lfirst(lc));
	}
	a->semi_join = has_semi || has_anti || elsewhere;
	if (!a->semi_join)
		return true;
	what = has_semi && has_anti ? "semi-join or anti-join (EXISTS, IN, NOT EXISTS or NOT IN)" :
		has_anti ? "anti-join (NOT EXISTS or NOT IN)" : "semi-join (EXISTS or IN)";
	article = has_anti && !has_semi ? "an" : "a";

	if (elsewhere)
	{
		reject_semi_join(a, pstrdup("EXISTS, IN, NOT EXISTS and NOT IN are supported only as conditions of the top-level AND of WHERE"),
						 pstrdup("Under OR, or inside another expression, they are not a join whose changed rows name the outer rows they concern."),
						 NULL);
		return false;
	}
	if (query->hasAggs || query->groupClause != NIL || query->groupingSets != NIL ||
		query->havingQual != NULL || query->hasWindowFuncs || query->hasTargetSRFs ||
		query->hasDistinctOn)
	{
		reject_semi_join(a, psprintf("%s %s under GROUP BY, aggregates, window functions, set-returning functions or DISTINCT ON is not supported",
									 article, what),
						 has_anti ? pstrdup("Each row of the outer query that it keeps is taken as a group of the view, which these would merge.") :
						 pstrdup("The semi-join is taken as a SELECT DISTINCT of its join, which these would see the joined rows of."),
						 NULL);
		return false;
	}
	if (!outer_rows_distinct(query, &culprit))
	{
		reject_semi_join(a, psprintf("the select list holds no unique key of %s, so the %s cannot be taken as a DISTINCT join",
									 quote_identifier(culprit), what),
						 has_anti ? pstrdup("The DISTINCT that makes each row of the view a group would merge rows of the outer query that are equal.") :
						 pstrdup("The DISTINCT that stands for the semi-join would merge rows of the outer query that are equal."),
						 pstrdup("Select the table's primary key (or the columns of a unique index that are NOT NULL), or let strategy auto maintain the view by full recompute."));
		return false;
	}

	foreach(lc, quals)
	{
		bool		anti;
		SubLink    *sublink = semi_join_sublink(lfirst(lc), &anti);
		Node	   *written = NULL;
		List	   *conds;

		if (sublink == NULL)
		{
			kept = lappend(kept, lfirst(lc));
			as_written = lappend(as_written, lfirst(lc));
			continue;
		}
		conds = pull_up_semi_join(a, query, sublink, anti, &written);
		failed |= (conds == NIL);
		kept = list_concat(kept, conds);
		as_written = anti ? lappend(as_written, written) : list_concat(as_written, list_copy(conds));
	}
	if (failed)
		return false;
	query->jointree->quals = (Node *) make_ands_explicit(kept);
	query->hasSubLinks = checkExprHasSubLink((Node *) query);
	if (query->distinctClause == NIL && !add_distinct(a, query))
		return false;
	a->plan->semi_join = has_semi;
	a->plan->anti_join = has_anti;
	a->view_quals = (Node *) make_ands_explicit(as_written);
	return true;
}

/*
 * The view's query with its anti-joins as written (analysis_pull_up_semi_joins):
 * the FROM items of their subqueries taken out of query's FROM list, its
 * WHERE the one with NOT EXISTS.  Their tables stay in query's range table,
 * where the plan's sources name them (DeltaSource.anti_join tells them from
 * the outer query's); the finder queries join them as a semi-join does
 * (recompute_prepare_finder).
 */
void
analysis_restore_anti_joins(Analysis *a, Query *query)
{
	ListCell   *lc;

	foreach(lc, a->anti_joins)
	{
		AntiJoin   *aj = lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, aj->fromlist)
			query->jointree->fromlist = list_delete_ptr(query->jointree->fromlist, lfirst(lc2));
		foreach(lc2, a->plan->sources)
		{
			DeltaSource *src = lfirst(lc2);

			if (src->rtindex >= aj->first_rtindex && src->rtindex <= aj->last_rtindex)
				src->anti_join = foreach_current_index(lc) + 1;
		}
	}
	query->jointree->quals = a->view_quals;
	query->hasSubLinks = true;
}
