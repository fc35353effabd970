/*-------------------------------------------------------------------------
 *
 * analyze_tree.c
 *	  The join tree of a join view: its conditions (ON and WHERE), its
 *	  outer joins and the type each has in the query's rows, the sides
 *	  that null-extend each source, the conditions that keep the NULLs of a
 *	  nullable side (rule 6), and the anchors of the rows.
 *
 * analysis_join_tree walks the tree once, before the output and the join
 * are analyzed (analyze.c's driver): the conditions it collects are what
 * analyze_join.c splits into join conditions and filters; the outer joins
 * and each source's nullable sides are what the appliers of outer joins
 * (apply/apply_outer.c) and the key of the result need.  The anchors are
 * chosen once the sources in the result's key are known
 * (analysis_tree_anchors).  Shares the analysis state of analyze.c
 * (analysis.h); the walk's own state (TreeWalk) is private here.
 *
 * IDENTIFICATION
 *	  src/analysis/analyze_tree.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "nodes/makefuncs.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/clauses.h"
#include "utils/ruleutils.h"

#include "analysis/analysis.h"
#include "base/compat.h"

/*
 * What the walk of the join tree learns: the conditions (ON and WHERE, as
 * one implicit-AND list: equalities among them are join conditions, the
 * rest filters), and for each outer join the type it has in the query's
 * rows -- an outer join below a condition that is strict for its nullable
 * side (WHERE i.price > 0 under LEFT JOIN items i) has no null-extended
 * rows, as the planner's reduce_outer_joins also finds.
 */
typedef struct TreeWalk
{
	Analysis   *a;
	Query	   *query;
	List	   *quals;
	List	   *on_quals;		/* those of them written in an ON clause */
	List	   *outer_quals;	/* those written in the ON of an outer join ... */
	List	   *outer_sides;	/* ... Bitmapset *: its sides they need matched */
	List	   *joins;			/* JoinExpr * whose type changed ... */
	List	   *types;			/* ... int: their type in the rows */
	List	   *deparse;		/* context to print quals (qual_text) */
} TreeWalk;

/* The range-table indexes of the relations under a join tree node */
static Relids
tree_relids(Node *jtnode)
{
	Relids		result = NULL;

	if (IsA(jtnode, RangeTblRef))
		result = bms_make_singleton(((RangeTblRef *) jtnode)->rtindex);
	else if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
			result = bms_join(result, tree_relids(lfirst(lc)));
	}
	else if (IsA(jtnode, JoinExpr))
		result = bms_join(tree_relids(((JoinExpr *) jtnode)->larg),
						  tree_relids(((JoinExpr *) jtnode)->rarg));
	return result;
}

/* The type a join has in the query's rows (see TreeWalk) */
static JoinType
tree_join_type(TreeWalk *w, JoinExpr *j)
{
	ListCell   *lc1,
			   *lc2;

	forboth(lc1, w->joins, lc2, w->types)
	{
		if (lfirst(lc1) == j)
			return (JoinType) lfirst_int(lc2);
	}
	return j->jointype;
}

/* The conditions of a node, join alias vars replaced, as a list */
static List *
tree_quals(TreeWalk *w, Node *quals)
{
	if (quals == NULL)
		return NIL;
	return make_ands_implicit((Expr *) flatten_join_alias_vars_compat(w->query, quals));
}

/*
 * A qual as the query would print it ("d.id IS NULL"), for messages: the
 * deparser of EXPLAIN, over the query's range table.
 */
static char *
qual_text(TreeWalk *w, Node *qual)
{
	if (w->deparse == NIL)
	{
		PlannedStmt *pstmt = makeNode(PlannedStmt);
		Bitmapset  *rels = bms_add_range(NULL, 1, list_length(w->query->rtable));

		pstmt->rtable = w->query->rtable;
		w->deparse = deparse_context_for_plan_tree(pstmt,
												   select_rtable_names_for_explain(pstmt->rtable, rels));
		w->deparse = set_deparse_context_plan(w->deparse, (Plan *) makeNode(Result), NIL);
	}
	return deparse_expression(qual, w->deparse, true, false);
}

/*
 * Filters that keep the NULLs of a nullable side.  A condition above an
 * outer join (in WHERE, in the ON of a join over it) that can hold where
 * the join null-extends a row -- d.id IS NULL, coalesce(d.x, 0) <> 1,
 * d.x IS DISTINCT FROM 'a', either side of a FULL JOIN tested IS NULL --
 * keeps or drops rows by whether their preserved row has partners: the
 * planner's reduce_outer_joins, which find_nonnullable_rels guides, keeps
 * such a join outer.  Neither delta mode, nor keyed recompute, can
 * maintain it: they find the rows a changed source row is in, and was in,
 * by its key -- in the query for the rows it is in now, in the target for
 * those it was in.  The joined rows such a condition filters out are in
 * neither: "users u LEFT JOIN domains d ... WHERE d.id IS NULL" holds no
 * row of a domain, so when a user's last domain is deleted (a decoded
 * DELETE names the domain by its primary key only, not its user) nothing
 * says which user gets its row; and under an outer join's ON, a partner
 * that comes or goes changes rows that are neither sub-rows nor super-rows
 * of its own, which upsert mode does not look for.  So such a condition is
 * refused on those paths, and strategy auto maintains the view by full
 * recompute, which is exact for any query.
 *
 * A condition at a join tree node passes when, for every side of an outer
 * join below the node that can null-extend a source it reads, it rejects
 * NULLs of some source of that side (so it is false wherever that side is
 * null-extended): WHERE i.price > 0 under LEFT JOIN items i (which makes
 * the join an inner join), or the ON of "... LEFT JOIN c ON c.k = b.k"
 * over "a LEFT JOIN b" (a row without b has no c).  first_join: the first
 * outer join (in plan->outer_joins) below the node; clause: "WHERE" or
 * "ON".
 */
static void
check_nullable_quals(TreeWalk *w, List *quals, int first_join, const char *clause)
{
	Analysis   *a = w->a;
	Bitmapset  *below = NULL;
	Relids		rejected = find_nonnullable_rels((Node *) quals);
	ListCell   *lc;

	for (int j = first_join; j < list_length(a->plan->outer_joins); j++)
		below = bms_add_range(below, 2 * j, 2 * j + 1);
	if (below == NULL)
		return;

	foreach(lc, quals)
	{
		Node	   *qual = lfirst(lc);
		Bitmapset  *sources = analysis_node_sources(a, qual);
		int			s = -1;
		int			culprit = -1;

		while (culprit < 0 && (s = bms_next_member(sources, s)) >= 0)
		{
			Bitmapset  *sides = bms_intersect(SOURCE(a, s)->nulling, below);
			int			side = -1;

			while (culprit < 0 && (side = bms_next_member(sides, side)) >= 0)
			{
				bool		rejects = false;

				for (int t = 0; t < list_length(a->plan->sources) && !rejects; t++)
					rejects = bms_is_member(side, SOURCE(a, t)->nulling) &&
						bms_is_member(SOURCE(a, t)->rtindex, rejected);
				if (!rejects)
					culprit = s;
			}
		}
		if (culprit < 0)
			continue;
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 6: %s condition %s does not reject the NULLs of %s, which an outer join null-extends: it keeps or drops rows by whether they have partners, and the rows a partner's change affects could not be found",
						clause, qual_text(w, qual), analysis_source_label(SOURCE(a, culprit))),
			   psprintf("A changed source row's rows are found by its key, in the query and in the target; the joined rows this condition filters out are in neither, so when a row of %s comes or goes, the rows whose partners it changes (a null-extended row to bring back or to remove) could not be found.",
						analysis_source_label(SOURCE(a, culprit))),
			   pstrdup("Use strategy => 'auto' (or 'none'): the view is then maintained by full recompute, which is exact. A condition that is false wherever the side is null-extended (one that rejects its NULLs) makes the outer join an inner join instead."));
	}
}

/*
 * Walk the join tree under jtnode: collect its conditions, give each outer
 * join its type in the rows, and each source the sides of outer joins that
 * can null-extend it (sides).  nonnull: the relations a condition above
 * forces to be non-null.
 */
static void
walk_tree(TreeWalk *w, Node *jtnode, Relids nonnull, Bitmapset *sides)
{
	Analysis   *a = w->a;

	if (IsA(jtnode, RangeTblRef))
	{
		int			source = a->rt_source[((RangeTblRef *) jtnode)->rtindex];

		if (source >= 0)
			SOURCE(a, source)->nulling = bms_copy(sides);
	}
	else if (IsA(jtnode, FromExpr))
	{
		FromExpr   *f = (FromExpr *) jtnode;
		List	   *quals = tree_quals(w, f->quals);
		Relids		below = bms_union(nonnull, find_nonnullable_rels((Node *) quals));
		int			first = list_length(a->plan->outer_joins);
		ListCell   *lc;

		w->quals = list_concat(w->quals, quals);
		foreach(lc, f->fromlist)
			walk_tree(w, lfirst(lc), below, sides);
		check_nullable_quals(w, quals, first, "WHERE");
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		List	   *quals = tree_quals(w, j->quals);
		Relids		strict = find_nonnullable_rels((Node *) quals);
		bool		left_forced = bms_overlap(tree_relids(j->larg), nonnull);
		bool		right_forced = bms_overlap(tree_relids(j->rarg), nonnull);
		JoinType	type = j->jointype;
		int			n = list_length(a->plan->outer_joins);
		OuterJoin  *oj;

		if ((type == JOIN_LEFT && right_forced) || (type == JOIN_RIGHT && left_forced) ||
			(type == JOIN_FULL && left_forced && right_forced))
			type = JOIN_INNER;
		else if (type == JOIN_FULL && left_forced)
			type = JOIN_LEFT;
		else if (type == JOIN_FULL && right_forced)
			type = JOIN_RIGHT;
		if (type != j->jointype)
		{
			w->joins = lappend(w->joins, j);
			w->types = lappend_int(w->types, (int) type);
		}
		w->quals = list_concat(w->quals, quals);
		w->on_quals = list_concat(w->on_quals, quals);

		switch (type)
		{
			case JOIN_INNER:
				nonnull = bms_union(nonnull, strict);
				walk_tree(w, j->larg, nonnull, sides);
				walk_tree(w, j->rarg, nonnull, sides);
				check_nullable_quals(w, quals, n, "ON");
				return;
			case JOIN_LEFT:
			case JOIN_RIGHT:
			case JOIN_FULL:
				break;
			default:
				analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
								psprintf("delta view rule 5: join type %d is not supported", (int) type),
								NULL, NULL);
				return;
		}

		/*
		 * Its conditions hold only in the rows where it found partners: where
		 * neither of its nullable sides is null-extended.
		 */
		{
			Bitmapset  *need = NULL;
			ListCell   *lq;

			if (type != JOIN_RIGHT)
				need = bms_add_member(need, 2 * n + 1);
			if (type != JOIN_LEFT)
				need = bms_add_member(need, 2 * n);
			foreach(lq, quals)
			{
				w->outer_quals = lappend(w->outer_quals, lfirst(lq));
				w->outer_sides = lappend(w->outer_sides, need);
			}
		}

		oj = palloc(sizeof(OuterJoin));
		oj->jointype = type;
		oj->left = analysis_relids_sources(a, tree_relids(j->larg));
		oj->right = analysis_relids_sources(a, tree_relids(j->rarg));
		a->plan->outer_joins = lappend(a->plan->outer_joins, oj);
		a->plan->has_outer = true;

		/*
		 * The preserved side keeps what is forced from above; a nullable side
		 * only appears joined, where the join's own strict conditions hold.
		 */
		walk_tree(w, j->larg,
				  type == JOIN_LEFT ? nonnull : type == JOIN_RIGHT ? strict : NULL,
				  type == JOIN_LEFT ? sides : bms_add_member(bms_copy(sides), 2 * n));
		walk_tree(w, j->rarg,
				  type == JOIN_RIGHT ? nonnull : type == JOIN_LEFT ? strict : NULL,
				  type == JOIN_RIGHT ? sides : bms_add_member(bms_copy(sides), 2 * n + 1));
		check_nullable_quals(w, quals, n + 1, "ON");
	}
}

/*
 * The anchors of the rows of a join tree node: sources each row has at
 * least one of (see DeltaPlan.anchors); returns the sources every row has
 * (the node's mandatory sources).  When there are some, one of them -- one
 * in the result's key, if any -- is the only anchor needed.
 */
static Bitmapset *
tree_anchors(TreeWalk *w, Node *jtnode, List **anchors)
{
	Analysis   *a = w->a;
	Bitmapset  *mandatory = NULL;
	List	   *left = NIL;
	List	   *right = NIL;

	if (IsA(jtnode, RangeTblRef))
	{
		int			source = a->rt_source[((RangeTblRef *) jtnode)->rtindex];

		if (source >= 0)
		{
			*anchors = list_make1_int(source);
			return bms_make_singleton(source);
		}
		*anchors = NIL;
		return NULL;
	}
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		*anchors = NIL;
		foreach(lc, ((FromExpr *) jtnode)->fromlist)
		{
			mandatory = bms_join(mandatory, tree_anchors(w, lfirst(lc), &left));
			if (*anchors == NIL)
				*anchors = left;
		}
	}
	else
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		Bitmapset  *lmand = tree_anchors(w, j->larg, &left);
		Bitmapset  *rmand = tree_anchors(w, j->rarg, &right);

		switch (tree_join_type(w, j))
		{
			case JOIN_LEFT:
				mandatory = lmand;
				*anchors = left;
				break;
			case JOIN_RIGHT:
				mandatory = rmand;
				*anchors = right;
				break;
			case JOIN_FULL:
				*anchors = list_concat(left, right);
				break;
			default:
				mandatory = bms_union(lmand, rmand);
				*anchors = left;
				break;
		}
	}

	if (!bms_is_empty(mandatory))
	{
		Bitmapset  *keyed = bms_intersect(mandatory, a->key_sources);

		*anchors = list_make1_int(bms_next_member(bms_is_empty(keyed) ? mandatory : keyed, -1));
	}
	return mandatory;
}

/*
 * Walk the join tree of a join view: the conditions (ON and WHERE), join
 * alias vars replaced by the columns they stand for, as one implicit-AND
 * list; and the outer joins.
 */
List *
analysis_join_tree(Analysis *a, Query *query)
{
	TreeWalk   *w = palloc0(sizeof(TreeWalk));

	w->a = a;
	w->query = query;
	a->tree = w;
	walk_tree(w, (Node *) query->jointree, NULL, NULL);

	/*
	 * A row of a source whose key may hold NULLs could not be told from its
	 * null extension.
	 */
	for (int s = 0; s < list_length(a->plan->sources); s++)
	{
		DeltaSource *src = SOURCE(a, s);

		if (src->key_has_nulls && !bms_is_empty(src->nulling))
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 5: %s, whose key may be NULL, is on the nullable side of an outer join",
							analysis_source_label(src)),
				   pstrdup("Its null-extended rows could not be told from its rows with a NULL key."),
				   pstrdup("Put it on the preserved side, or join it with an inner join."));
	}
	return w->quals;
}

/*
 * The anchors of the rows of a join view with outer joins (plan->anchors),
 * once the sources in the result's key are known (analysis_join)
 */
void
analysis_tree_anchors(Analysis *a)
{
	(void) tree_anchors(a->tree, (Node *) a->plan->query->jointree, &a->plan->anchors);
}

/*
 * The sides of outer joins (bits of DeltaSource.nulling) that must have
 * found partners for the condition to hold: those of the outer join in
 * whose ON it is written, none for one in WHERE or an inner join's ON.
 * An equality there ties its columns in those rows only: in "a LEFT JOIN
 * c ON a.k1 = c.x AND a.k2 = c.x", a.k1 = a.k2 where a has a partner, not
 * in its null-extended row.
 */
Bitmapset *
analysis_tree_qual_sides(Analysis *a, Node *qual)
{
	ListCell   *lc1,
			   *lc2;

	forboth(lc1, a->tree->outer_quals, lc2, a->tree->outer_sides)
	{
		if (lfirst(lc1) == qual)
			return (Bitmapset *) lfirst(lc2);
	}
	return NULL;
}

/* Was the condition written in an ON clause (else in WHERE)? */
bool
analysis_tree_on_qual(Analysis *a, Node *qual)
{
	return list_member_ptr(a->tree->on_quals, qual);
}
