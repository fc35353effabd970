/*-------------------------------------------------------------------------
 *
 * analyze_union.c
 *	  UNION ALL of delta branches (DESIGN.md §2): each branch of the query
 *	  is its own delta join plan, and all of them write into one target.
 *
 * The target's key must tell the branches' rows apart: some output column
 * is a constant in every branch, a different one in each (the tag, e.g.
 * 'web' AS channel), and the key is the tag and every column of a branch's
 * own key.  Each branch plan then carries that key, the tag's column and
 * its own tag value: apply finds a branch's rows in the target by its tag
 * (apply_outer.c), so one branch never touches another's rows.
 *
 * A source of branch b is registered under ordinal
 * DJ_BRANCH_ORDINAL(b, rtindex), so that a table read by two branches
 * gives each of them its own dirty keys.
 *
 * Each branch is analysed by analysis_query (analyze.c), the function that
 * handed the UNION ALL here: the one recursion of src/ (test/check_layers.pl
 * says how its check sees it).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "analysis/analysis.h"
#include "base/options.h"

/* The leaves of a tree of UNION ALLs, in order; false if it is another one */
static bool
union_all_leaves(Node *node, List **leaves)
{
	if (IsA(node, RangeTblRef))
	{
		*leaves = lappend_int(*leaves, ((RangeTblRef *) node)->rtindex);
		return true;
	}
	if (IsA(node, SetOperationStmt))
	{
		SetOperationStmt *op = (SetOperationStmt *) node;

		return op->op == SETOP_UNION && op->all &&
			union_all_leaves(op->larg, leaves) && union_all_leaves(op->rarg, leaves);
	}
	return false;
}

/*
 * Give a branch's output columns that the parser left of type unknown the
 * UNION ALL's column type, as the planner does when it runs the query.
 * The parser resolves only bare literals in a branch; a literal under
 * COLLATE ('web' COLLATE "C" AS channel) stays unknown there, and a
 * branch analysed on its own must output what the target's column takes.
 */
static void
branch_resolve_unknowns(Query *branch, SetOperationStmt *op)
{
	int			col = 0;
	ListCell   *lc;

	foreach(lc, branch->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		if (exprType((Node *) tle->expr) == UNKNOWNOID)
			tle->expr = (Expr *) coerce_type(NULL, (Node *) tle->expr, UNKNOWNOID,
											 list_nth_oid(op->colTypes, col),
											 list_nth_int(op->colTypmods, col),
											 COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1);
		col++;
	}
}

/* Output column col of a branch: its constant (not NULL), or NULL */
static Const *
branch_constant(Query *branch, int col)
{
	int			n = 0;
	ListCell   *lc;

	foreach(lc, branch->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Node	   *expr;

		if (tle->resjunk)
			continue;
		if (n++ != col)
			continue;
		expr = strip_implicit_coercions((Node *) tle->expr);
		/* (COLLATE changes how a constant compares, not the constant) */
		if (IsA(expr, CollateExpr))
			expr = strip_implicit_coercions((Node *) ((CollateExpr *) expr)->arg);
		if (IsA(expr, Const) && !((Const *) expr)->constisnull)
			return (Const *) expr;
		return NULL;
	}
	return NULL;
}

/* A constant as text, for explain() */
static char *
constant_text(Const *c)
{
	Oid			output;
	bool		varlena;

	getTypeOutputInfo(c->consttype, &output, &varlena);
	return OidOutputFunctionCall(output, c->constvalue);
}

/* check_functions_in_node callback: a function not built in */
static bool
user_function(Oid funcid, void *context)
{
	return funcid >= FirstNormalObjectId;
}

/*
 * Does the expression run code that is not built in: a user-defined
 * function (a cast's, say), or a domain's constraints?  The analysis runs
 * before the check of whose code a view runs (apply.c), and must not run
 * such code itself: a cast of another role's type the planner picks for a
 * UNION's branch is found by that check, not run by the analysis.
 */
static bool
user_code_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, CoerceToDomain) || check_functions_in_node(node, user_function, NULL))
		return true;
	return expression_tree_walker(node, user_code_walker, context);
}

/*
 * Branch b's output column col as a constant of the UNION's column type
 * (coltype), or NULL.  The branch's expression is of its own type where the
 * planner would cast it (1 in one branch, 1.0 in another).
 */
static Const *
branch_tag_value(Query *branch, int col, Oid coltype, int32 coltypmod)
{
	int			n = 0;
	ListCell   *lc;

	foreach(lc, branch->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Node	   *expr = (Node *) tle->expr;

		if (tle->resjunk || n++ != col)
			continue;
		if (exprType(expr) != coltype)
			expr = coerce_to_target_type(NULL, expr, exprType(expr), coltype, coltypmod,
										 COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1);
		/* folded only when that runs built-ins (user_code_walker) */
		if (expr != NULL && !user_code_walker(expr, NULL))
			expr = eval_const_expressions(NULL, expr);
		return (expr != NULL && IsA(expr, Const)) ? (Const *) expr : NULL;
	}
	return NULL;
}

/*
 * Are two branches' constants of output column col equal, as the target's
 * key will compare them?  Their text does not tell: 1.0 and 1.00, or 'w'
 * and 'w  ' as bpchar, print otherwise and are one key, and the second
 * branch would take the first one's rows.
 */
static bool
branch_tags_equal(Query *b1, Query *b2, int col, SetOperationStmt *op)
{
	Oid			coltype = list_nth_oid(op->colTypes, col);
	int32		coltypmod = list_nth_int(op->colTypmods, col);
	Oid			collation = list_nth_oid(op->colCollations, col);
	TypeCacheEntry *typentry = lookup_type_cache(coltype, TYPECACHE_EQ_OPR_FINFO);
	Const	   *c1 = branch_tag_value(b1, col, coltype, coltypmod);
	Const	   *c2 = branch_tag_value(b2, col, coltype, coltypmod);

	if (c1 == NULL || c2 == NULL || c1->constisnull || c2->constisnull ||
		!OidIsValid(typentry->eq_opr_finfo.fn_oid))
		return true;			/* cannot tell them apart */
	return DatumGetBool(FunctionCall2Coll(&typentry->eq_opr_finfo, collation,
										  c1->constvalue, c2->constvalue));
}

/* The first output column that is a constant of its own in every branch */
static int
find_tag(List *branches, int ncolumns, SetOperationStmt *op, Const ***values)
{
	int			nbranches = list_length(branches);

	for (int col = 0; col < ncolumns; col++)
	{
		Const	  **tags = palloc(sizeof(Const *) * nbranches);
		bool		ok = true;

		for (int b = 0; b < nbranches && ok; b++)
		{
			tags[b] = branch_constant(list_nth(branches, b), col);
			ok = (tags[b] != NULL);
			for (int c = 0; c < b && ok; c++)
				ok = !branch_tags_equal(list_nth(branches, b), list_nth(branches, c), col, op);
		}
		if (ok)
		{
			*values = tags;
			return col;
		}
	}
	return -1;
}

/* The hints of branch b, numbered as in its own range table */
static List *
branch_hints(List *hints, int b)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);

		if (hint->rtindex >= DJ_BRANCH_ORDINAL(0, 0) &&
			DJ_ORDINAL_BRANCH(hint->rtindex) == b)
		{
			DeltaHint  *copy = palloc(sizeof(DeltaHint));

			*copy = *hint;
			copy->rtindex = DJ_ORDINAL_RTINDEX(hint->rtindex);
			result = lappend(result, copy);
		}
	}
	return result;
}

/*
 * Analyze a UNION ALL: a's plan gets the branches, their sources, and the
 * key; each branch is analyzed as a query of its own.
 */
void
analysis_union(Analysis *a, Query *query, List *hints, const DeltaOptions *options)
{
	DeltaPlan  *plan = a->plan;
	List	   *leaves = NIL;
	List	   *queries = NIL;
	Const	  **tags = NULL;
	Bitmapset  *key = NULL;
	ListCell   *lc;
	int			col;

	if (!union_all_leaves(query->setOperations, &leaves))
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 5: set operations other than UNION ALL are not supported"),
			   pstrdup("The branches of a UNION ALL are each a delta view writing into one target; UNION, INTERSECT and EXCEPT compare rows across them."),
			   pstrdup("Use UNION ALL, with a column that tells the branches apart."));
		return;
	}
	if (query->sortClause || query->limitCount || query->limitOffset)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 5: ORDER BY, LIMIT and OFFSET are not supported"),
			   pstrdup("Only projection and filter may stand between the sources, the join and the target."),
			   pstrdup("Remove it from the query; compute it when reading the target instead."));

	/* hints read back from source_catalog name their branch by ordinal */
	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);

		if (hint->rtindex < DJ_BRANCH_ORDINAL(0, 0))
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("table hints are not supported in the branches of a UNION ALL"),
				   NULL, pstrdup("Remove the /*+ OPTIONS(...) */ hints."));
	}

	analysis_output(a);

	foreach(lc, leaves)
	{
		int			b = foreach_current_index(lc);
		RangeTblEntry *rte = rt_fetch(lfirst_int(lc), query->rtable);
		Analysis   *ba = palloc0(sizeof(Analysis));
		DeltaPlan  *branch;
		ListCell   *lc2;

		ba->collect = a->collect;
		ba->label = psprintf("branch %d of the UNION ALL", b + 1);
		branch_resolve_unknowns(rte->subquery, (SetOperationStmt *) query->setOperations);
		branch = analysis_query(ba, rte->subquery, branch_hints(hints, b), options);
		a->branch_analyses = lappend(a->branch_analyses, ba);
		plan->branches = lappend(plan->branches, branch);
		queries = lappend(queries, branch->query);

		foreach(lc2, ba->failures)
			a->failures = lappend(a->failures, lfirst(lc2));
		if (ba->failures != NIL)
			continue;
		if (branch->kind != DJ_KIND_JOIN)
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 5: branch %d of the UNION ALL is an aggregate", b + 1),
				   pstrdup("The branches of a UNION ALL are joins (or reads of one table)."),
				   pstrdup("Aggregate in a view of its own."));
			continue;
		}
		foreach(lc2, branch->sources)
		{
			DeltaSource *src = lfirst(lc2);

			src->ordinal = DJ_BRANCH_ORDINAL(b, src->rtindex);
			plan->sources = lappend(plan->sources, src);
		}
		for (int k = 0; k < branch->key_ncolumns; k++)
			key = bms_add_member(key, branch->key_columns[k]);
		plan->has_filter |= branch->has_filter;
	}
	if (a->failures != NIL)
		return;

	col = find_tag(queries, plan->ncolumns, (SetOperationStmt *) query->setOperations, &tags);
	if (col < 0)
	{
		analysis_reject(a, ERRCODE_INVALID_OBJECT_DEFINITION,
			   pstrdup("delta view rule 8: the target's key cannot tell the branches of the UNION ALL apart"),
			   pstrdup("Rows of different branches may have the same key; each branch must find its own rows in the target."),
			   pstrdup("Add a column that is a different constant in each branch, e.g. 'web' AS channel in the first branch and 'store' AS channel in the second."));
		return;
	}

	/* the key: the tag, then every column of a branch's key */
	key = bms_del_member(key, col);
	plan->key_ncolumns = 1 + bms_num_members(key);
	plan->key_columns = palloc(sizeof(int) * plan->key_ncolumns);
	plan->key_columns[0] = col;
	{
		int			n = 1;
		int			c = -1;

		while ((c = bms_next_member(key, c)) >= 0)
			plan->key_columns[n++] = c;
	}
	plan->tag_column = col;

	foreach(lc, plan->branches)
	{
		DeltaPlan  *branch = lfirst(lc);

		branch->key_ncolumns = plan->key_ncolumns;
		branch->key_columns = plan->key_columns;
		branch->colnames = plan->colnames;
		branch->tag_column = col;
		branch->tag_const = tags[foreach_current_index(lc)];
		branch->tag_value = constant_text(branch->tag_const);
	}
}
