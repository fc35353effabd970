/*-------------------------------------------------------------------------
 *
 * flatten.c
 *	  Inline what the planner would before the rules judge a query: plain
 *	  Postgres views used as sources, non-recursive CTEs, subqueries in
 *	  FROM made of joins, projections and filters only, and semi-joins.
 *
 * The query view keeps the query as written (so pg_depend records the views
 * it reads); flattening runs on every analysis of it, and gives the same
 * result as long as those views do not change -- the DDL guard refreshes a
 * delta view when one does (guard.c).
 *
 * A view becomes a subquery the way the rewriter's ApplyRetrieveRule makes
 * it one (compat_view_to_subquery): the view's own permission check stays
 * in the range table -- on 15 in the OLD placeholder of its rule, on later
 * majors with the entry itself -- so that checking the range table still
 * checks it; the tables of the view are checked as the view's owner (the
 * rule's checkAsUser), unless it is a security_invoker view.
 *
 * A subquery is pulled up the way the planner's pull_up_simple_subquery
 * does it: its range table is appended to the parent's, its join tree
 * takes the place of its RangeTblRef, and references to its columns are
 * replaced by its select list.  Its own entry stays in the range table,
 * unreferenced: analyze.c skips range-table entries the join tree does not
 * reference.  A subquery on the nullable side of an outer join is pulled
 * up only if its select list goes NULL with its row: plain columns and
 * strict expressions of them (a constant would not).
 *
 * On the path of groups through joins, a semi-join -- EXISTS or IN in the
 * top-level AND of WHERE -- is pulled up the way the planner's
 * pull_up_sublinks makes it a join, and the query made the SELECT DISTINCT
 * of that join, when its rows are distinct (analysis_pull_up_semi_joins).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parse_clause.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "analysis/analysis.h"

static void flatten_level(Analysis *a, Query *query);

/* ----------------------------------------------------------------
 *		Views
 * ----------------------------------------------------------------
 */

static bool is_simple_subquery(Query *sub);

/*
 * Turn a view's range-table entry into the subquery it stands for, if that
 * is joins, projections and filters (else analyze.c refuses the view as a
 * source).
 */
static void
inline_view(Analysis *a, RangeTblEntry *rte)
{
	Relation	rel = table_open(rte->relid, AccessShareLock);
	Query	   *view_query = copyObject(get_view_query(rel));

	AcquireRewriteLocks(view_query, true, false);
	flatten_level(a, view_query);
	if (!is_simple_subquery(view_query))
	{
		table_close(rel, AccessShareLock);
		return;
	}

	/* (rejected, then inlined all the same: the rest is still judged) */
	if (RelationIsSecurityView(rel))
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source \"%s\" is a security_barrier view",
						RelationGetRelationName(rel)),
			   pstrdup("Its conditions must be applied before the query's, which a delta view, reading the view's tables directly, cannot promise."),
			   pstrdup("Use the view's tables in the query, or a view without security_barrier."));

	/* the view's own check, as the caller's, stays in the range table */
	compat_view_to_subquery(rte, view_query);
	table_close(rel, AccessShareLock);
}

/* ----------------------------------------------------------------
 *		Common table expressions
 * ----------------------------------------------------------------
 */

typedef struct CteInline
{
	Query	   *owner;			/* the query whose WITH list is inlined */
	int			depth;			/* levels below owner */
	bool		failed;			/* a reference could not be inlined */
} CteInline;

static bool inline_ctes_walker(Node *node, CteInline *context);

/* Replace RTE_CTE entries that point depth levels up into owner's list */
static void
inline_ctes_in_rtable(List *rtable, CteInline *context)
{
	ListCell   *lc;

	foreach(lc, rtable)
	{
		RangeTblEntry *rte = lfirst(lc);
		CommonTableExpr *cte = NULL;
		ListCell   *lc2;
		Query	   *copy;

		if (rte->rtekind != RTE_CTE || rte->ctelevelsup != (Index) context->depth)
			continue;
		foreach(lc2, context->owner->cteList)
		{
			if (strcmp(((CommonTableExpr *) lfirst(lc2))->ctename, rte->ctename) == 0)
				cte = lfirst(lc2);
		}
		if (cte == NULL || cte->cterecursive || !IsA(cte->ctequery, Query) ||
			((Query *) cte->ctequery)->commandType != CMD_SELECT)
		{
			context->failed = true;
			continue;
		}

		/* the copy sits depth levels lower than the WITH list it came from */
		copy = copyObject((Query *) cte->ctequery);
		if (context->depth > 0)
			IncrementVarSublevelsUp((Node *) copy, context->depth, 1);
		rte->rtekind = RTE_SUBQUERY;
		rte->subquery = copy;
		rte->security_barrier = false;
		rte->ctename = NULL;
		rte->ctelevelsup = 0;
		rte->self_reference = false;
		rte->coltypes = NIL;
		rte->coltypmods = NIL;
		rte->colcollations = NIL;
	}
}

static bool
inline_ctes_walker(Node *node, CteInline *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		result;

		context->depth++;
		inline_ctes_in_rtable(((Query *) node)->rtable, context);
		result = query_tree_walker((Query *) node, inline_ctes_walker, context, 0);
		context->depth--;
		return result;
	}
	return expression_tree_walker(node, inline_ctes_walker, context);
}

/*
 * Inline the non-recursive SELECT CTEs of query wherever they are read,
 * subqueries included; drop the WITH list if nothing is left reading it.
 */
static void
inline_ctes(Query *query)
{
	CteInline	context = {query, 0, false};

	if (query->cteList == NIL)
		return;
	inline_ctes_in_rtable(query->rtable, &context);
	(void) query_tree_walker(query, inline_ctes_walker, &context, 0);
	if (!context.failed && !query->hasRecursive)
		query->cteList = NIL;
}

/* ----------------------------------------------------------------
 *		Subqueries in FROM
 * ----------------------------------------------------------------
 */

/* A subquery of joins, projections and filters only */
static bool
is_simple_subquery(Query *sub)
{
	return sub->commandType == CMD_SELECT && sub->setOperations == NULL &&
		!sub->hasAggs && !sub->hasWindowFuncs && !sub->hasTargetSRFs &&
		!sub->hasRecursive && !sub->hasForUpdate && sub->groupClause == NIL &&
		sub->groupingSets == NIL && sub->havingQual == NULL &&
		sub->distinctClause == NIL && sub->limitCount == NULL &&
		sub->limitOffset == NULL && sub->rowMarks == NIL && sub->cteList == NIL &&
		sub->sortClause == NIL && sub->jointree->fromlist != NIL;
}

/*
 * Does every output column of the subquery go NULL when its row is
 * null-extended?  Plain columns do, and strict expressions of them.
 */
static bool
outputs_go_null(Query *sub)
{
	ListCell   *lc;

	foreach(lc, sub->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk || IsA(tle->expr, Var))
			continue;
		if (contain_nonstrict_functions((Node *) tle->expr) ||
			!contain_vars_of_level((Node *) tle->expr, 0))
			return false;
	}
	return true;
}

/* A subquery pulled up: its entry, and its select list over the parent */
typedef struct PulledUp
{
	int			rtindex;
	List	   *targetList;
} PulledUp;

/*
 * Pull subquery entry rtindex of query up into it: its range table goes
 * to the end of query's; returns its join tree, to take the place of its
 * RangeTblRef.  References to its columns are replaced afterwards
 * (replace_pulled_up_columns).
 */
static Node *
pull_up(Query *query, int rtindex, List **pulled)
{
	RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
	Query	   *sub = copyObject(rte->subquery);
	PulledUp   *p = palloc(sizeof(PulledUp));

	OffsetVarNodes((Node *) sub, list_length(query->rtable), 0);
	compat_append_range_table(query, sub);
	query->hasSubLinks |= sub->hasSubLinks;
	p->rtindex = rtindex;
	p->targetList = sub->targetList;
	*pulled = lappend(*pulled, p);
	return (Node *) sub->jointree;
}

/* References to a pulled-up subquery's columns become its expressions */
static void
replace_pulled_up_columns(Query *query, PulledUp *p)
{
	RangeTblEntry *rte = rt_fetch(p->rtindex, query->rtable);
	ListCell   *lc;

#define REPLACE(node) \
	ReplaceVarsFromTargetList_compat((Node *) (node), p->rtindex, 0, rte, p->targetList, \
									 REPLACEVARS_REPORT_ERROR, 0, &query->hasSubLinks)

	query->targetList = (List *) REPLACE(query->targetList);
	query->havingQual = REPLACE(query->havingQual);
	query->jointree = (FromExpr *) REPLACE(query->jointree);
	foreach(lc, query->rtable)
	{
		RangeTblEntry *other = lfirst(lc);

		if (other->rtekind == RTE_JOIN)
			other->joinaliasvars = (List *) REPLACE(other->joinaliasvars);
	}
#undef REPLACE
}

/*
 * Pull up the simple subqueries of a join tree node; nullable: the node is
 * on the nullable side of an outer join.
 */
static Node *
pull_up_in(Analysis *a, Query *query, Node *jtnode, bool nullable, List **pulled)
{
	if (IsA(jtnode, RangeTblRef))
	{
		int			rtindex = ((RangeTblRef *) jtnode)->rtindex;
		RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);

		if (rte->rtekind != RTE_SUBQUERY || rte->lateral)
			return jtnode;
		flatten_level(a, rte->subquery);
		if (!is_simple_subquery(rte->subquery) ||
			(nullable && !outputs_go_null(rte->subquery)))
			return jtnode;
		return pull_up(query, rtindex, pulled);
	}
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *from = (FromExpr *) jtnode;
		ListCell   *lc;

		foreach(lc, from->fromlist)
			lfirst(lc) = pull_up_in(a, query, lfirst(lc), nullable, pulled);
		return jtnode;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		join->larg = pull_up_in(a, query, join->larg,
								nullable || join->jointype == JOIN_RIGHT ||
								join->jointype == JOIN_FULL, pulled);
		join->rarg = pull_up_in(a, query, join->rarg,
								nullable || join->jointype == JOIN_LEFT ||
								join->jointype == JOIN_FULL, pulled);
		return jtnode;
	}
	return jtnode;
}

/* ----------------------------------------------------------------
 *		Semi-joins (EXISTS, IN) as a DISTINCT join
 * ----------------------------------------------------------------
 */

/* A sublink that is a top-level condition of WHERE: EXISTS or IN */
static SubLink *
semi_join_sublink(Node *qual)
{
	if (qual == NULL || !IsA(qual, SubLink))
		return NULL;
	if (((SubLink *) qual)->subLinkType == EXISTS_SUBLINK ||
		(((SubLink *) qual)->subLinkType == ANY_SUBLINK &&
		 ((SubLink *) qual)->testexpr != NULL))
		return (SubLink *) qual;
	return NULL;
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

/*
 * Pull the subquery of a semi-join up into query, the way the planner's
 * convert_EXISTS_sublink_to_join and convert_ANY_sublink_to_join make it a
 * join (subselect.c): its range table goes to the end of query's, its FROM
 * items to the end of query's FROM list.  Returns the conditions (ANDed)
 * that take the sublink's place -- the subquery's WHERE, and for IN the
 * comparison of the outer columns with its select list -- or NIL, after
 * reject, when
 * it cannot be pulled up: a subquery of more than joins and filters, an
 * EXISTS that reads the outer query's columns outside its WHERE or not at
 * all, an IN whose subquery reads them, a volatile condition.
 */
static List *
pull_up_semi_join(Analysis *a, Query *query, SubLink *sublink)
{
	Query	   *sub = copyObject(castNode(Query, sublink->subselect));
	bool		exists = (sublink->subLinkType == EXISTS_SUBLINK);
	Node	   *where;
	List	   *conds = NIL;

	flatten_level(a, sub);
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
	if (!is_simple_subquery(sub))
	{
		reject_semi_join(a, pstrdup("the subquery of a semi-join (EXISTS or IN) must be made of joins and filters"),
						 pstrdup("It is taken as a join, which only joins and filters can stand for."),
						 NULL);
		return NIL;
	}
	where = sub->jointree->quals;
	sub->jointree->quals = NULL;
	if (exists && (contain_vars_of_level((Node *) sub, 1) ||
				   !contain_vars_of_level(where, 1)))
	{
		reject_semi_join(a, pstrdup("the subquery of EXISTS must read columns of the outer query in its WHERE, and only there"),
						 pstrdup("Its WHERE becomes the condition that joins it to the outer query's tables."),
						 NULL);
		return NIL;
	}
	if (!exists && (contain_vars_of_level((Node *) sub, 1) || contain_vars_of_level(where, 1)))
	{
		reject_semi_join(a, pstrdup("the subquery of IN reads columns of the outer query"),
						 pstrdup("The comparison of IN becomes the condition that joins it to the outer query's tables."),
						 pstrdup("Compare the outer columns in a correlated EXISTS instead, or let strategy auto maintain the view by full recompute."));
		return NIL;
	}
	if (contain_volatile_functions(where) ||
		(!exists && contain_volatile_functions(sublink->testexpr)))
	{
		reject_semi_join(a, pstrdup("the condition of a semi-join (EXISTS or IN) calls a volatile function"),
						 pstrdup("It is evaluated once per joined row, not once per row of the outer query."),
						 NULL);
		return NIL;
	}
	sub->jointree->quals = where;

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
			reject_semi_join(a, psprintf("output column \"%s\" of a semi-join has type %s, which has no equality operator",
										 tle->resname, format_type_be(exprType((Node *) tle->expr))),
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
 * Semi-joins on the path of groups through joins (DeltaPlan.semi_join).
 * A condition "EXISTS (SELECT ... FROM b WHERE b.k = a.k AND ...)" or
 * "a.k IN (SELECT b.k FROM b WHERE ...)" in the top-level AND of WHERE
 * keeps a row of the outer query iff some row of b joins it.  When the
 * outer query's rows are distinct -- its select list holds a unique key of
 * each table it reads, or it is a SELECT DISTINCT -- its rows are then the
 * rows of the SELECT DISTINCT of the join of b with the sublink's
 * conditions: each kept row once, none other.  NULLs agree: a NULL key
 * fails IN, and fails the join's equality alike, in WHERE.  The query is
 * rewritten so (its DISTINCT then made a GROUP BY by analyze.c), and the
 * path's own rules judge it.  NOT EXISTS and NOT IN (anti-joins) are left
 * as they are, refused as subqueries; so is a query that groups,
 * aggregates or reads a sublink elsewhere.  Returns false, after reject,
 * when a semi-join cannot be pulled up.
 */
bool
analysis_pull_up_semi_joins(Analysis *a, Query *query)
{
	List	   *quals;
	List	   *kept = NIL;
	bool		failed = false;
	char	   *culprit = NULL;
	ListCell   *lc;

	if (!query->hasSubLinks || query->jointree->quals == NULL)
		return true;
	quals = make_ands_implicit((Expr *) query->jointree->quals);
	foreach(lc, quals)
		a->semi_join |= (semi_join_sublink(lfirst(lc)) != NULL);
	if (!a->semi_join)
		return true;

	if (query->hasAggs || query->groupClause != NIL || query->groupingSets != NIL ||
		query->havingQual != NULL || query->hasWindowFuncs || query->hasTargetSRFs ||
		query->hasDistinctOn)
	{
		reject_semi_join(a, pstrdup("a semi-join (EXISTS or IN) under GROUP BY, aggregates, window functions, set-returning functions or DISTINCT ON is not supported"),
						 pstrdup("The semi-join is taken as a SELECT DISTINCT of its join, which these would see the joined rows of."),
						 NULL);
		return false;
	}
	if (!outer_rows_distinct(query, &culprit))
	{
		reject_semi_join(a, psprintf("the select list holds no unique key of %s, so the semi-join (EXISTS or IN) cannot be taken as a DISTINCT join",
									 quote_identifier(culprit)),
						 pstrdup("The DISTINCT that stands for the semi-join would merge rows of the outer query that are equal."),
						 pstrdup("Select the table's primary key (or the columns of a unique index that are NOT NULL), or let strategy auto maintain the view by full recompute."));
		return false;
	}

	foreach(lc, quals)
	{
		SubLink    *sublink = semi_join_sublink(lfirst(lc));
		List	   *conds;

		if (sublink == NULL)
		{
			kept = lappend(kept, lfirst(lc));
			continue;
		}
		conds = pull_up_semi_join(a, query, sublink);
		failed |= (conds == NIL);
		kept = list_concat(kept, conds);
	}
	if (failed)
		return false;
	query->jointree->quals = (Node *) make_ands_explicit(kept);
	query->hasSubLinks = checkExprHasSubLink((Node *) query);
	if (query->distinctClause == NIL && !add_distinct(a, query))
		return false;
	a->plan->semi_join = true;
	return true;
}

/* ----------------------------------------------------------------
 *		Entry points
 * ----------------------------------------------------------------
 */

static void
flatten_level(Analysis *a, Query *query)
{
	List	   *pulled = NIL;
	Bitmapset  *referenced;
	ListCell   *lc;

	compat_flatten_grouping(query);
	inline_ctes(query);
	referenced = analysis_referenced_rtes(query);
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		/* (not the OLD and NEW placeholders of a view's own query) */
		if (rte->rtekind == RTE_RELATION && rte->relkind == RELKIND_VIEW &&
			bms_is_member(foreach_current_index(lc) + 1, referenced))
			inline_view(a, rte);
	}
	query->jointree = (FromExpr *) pull_up_in(a, query, (Node *) query->jointree, false,
											  &pulled);
	foreach(lc, pulled)
		replace_pulled_up_columns(query, lfirst(lc));
}

/*
 * Flatten a query in place (the caller's copy): views, non-recursive CTEs
 * and simple subqueries in FROM inlined.
 */
void
analysis_flatten(Analysis *a, Query *query)
{
	flatten_level(a, query);
}

/* Collect the range-table indexes a join tree references */
static void
referenced_walker(Node *jtnode, Bitmapset **result)
{
	if (jtnode == NULL)
		return;
	if (IsA(jtnode, RangeTblRef))
		*result = bms_add_member(*result, ((RangeTblRef *) jtnode)->rtindex);
	else if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
			referenced_walker(lfirst(lc), result);
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;

		*result = bms_add_member(*result, join->rtindex);
		referenced_walker(join->larg, result);
		referenced_walker(join->rarg, result);
	}
}

/* The range-table entries the query's join tree references */
Bitmapset *
analysis_referenced_rtes(Query *query)
{
	Bitmapset  *result = NULL;

	referenced_walker((Node *) query->jointree, &result);
	return result;
}
