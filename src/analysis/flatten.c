/*-------------------------------------------------------------------------
 *
 * flatten.c
 *	  Inline what the planner would before the rules judge a query: plain
 *	  Postgres views used as sources, non-recursive CTEs, and subqueries in
 *	  FROM made of joins, projections and filters only.
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
 * Semi-joins and anti-joins in WHERE are semi_join.c's: it flattens their
 * subqueries here (analysis_flatten) before pulling them up.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "utils/rel.h"

#include "analysis/analysis.h"

static void flatten_level(Analysis *a, Query *query);

/* ----------------------------------------------------------------
 *		Views
 * ----------------------------------------------------------------
 */

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
	if (!analysis_is_simple_subquery(view_query))
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
bool
analysis_is_simple_subquery(Query *sub)
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
		if (!analysis_is_simple_subquery(rte->subquery) ||
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

/*
 * Is range-table entry rtindex under the nullable side of an outer join of
 * the join tree under jtnode (as written: a condition that makes the join
 * an inner join is not looked for)?  -1: it is not under jtnode at all.
 */
int
analysis_under_nullable_side(Node *jtnode, int rtindex)
{
	if (IsA(jtnode, RangeTblRef))
		return ((RangeTblRef *) jtnode)->rtindex == rtindex ? 0 : -1;
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
		{
			int			found = analysis_under_nullable_side(lfirst(lc), rtindex);

			if (found >= 0)
				return found;
		}
		return -1;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		int			left = analysis_under_nullable_side(j->larg, rtindex);
		int			right = analysis_under_nullable_side(j->rarg, rtindex);

		if (left >= 0)
			return (left || j->jointype == JOIN_RIGHT || j->jointype == JOIN_FULL) ? 1 : 0;
		if (right >= 0)
			return (right || j->jointype == JOIN_LEFT || j->jointype == JOIN_FULL) ? 1 : 0;
	}
	return -1;
}
