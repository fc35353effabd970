/*-------------------------------------------------------------------------
 *
 * compat.c
 *	  The helpers of compat.h whose bodies differ between majors: mostly the
 *	  permission model of 16, where a range-table entry's permission check
 *	  lives in an RTEPermissionInfo of Query.rteperminfos instead of in the
 *	  entry itself.
 *
 * Each helper does on every major what that major's own rewriter and
 * planner do, so that a delta view's query is checked as strictly as
 * PostgreSQL would check it: the view's own check as the caller, the
 * tables of a view as the view's owner (or as the caller for a
 * security_invoker view, which the relation cache settles when it loads the
 * rule).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_attribute.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/parse_relation.h"
#include "parser/parsetree.h"
#include "rewrite/prs2lock.h"
#include "replication/slot.h"
#include "rewrite/rewriteManip.h"
#include "utils/lsyscache.h"

#include "base/compat.h"

/* flatten_join_alias_vars with 15's arguments */
Node *
flatten_join_alias_vars_compat(Query *query, Node *node)
{
#if PG_VERSION_NUM >= 160000
	return flatten_join_alias_vars(NULL, query, node);
#else
	return flatten_join_alias_vars(query, node);
#endif
}

/*
 * From 18 a query with GROUP BY reads its grouping expressions, in its
 * select list and HAVING, through Vars of an RTE_GROUP entry that the
 * parser appends to its range table.  Replace them by the expressions, as
 * the planner does first thing, and drop the entry while it is still the
 * last: the query then has the shape it has on 15 and 17, where those
 * expressions read the sources directly.  Before 18, nothing to do.
 */
void
compat_flatten_grouping(Query *query)
{
#if PG_VERSION_NUM >= 180000
	RangeTblEntry *last;

	if (!query->hasGroupRTE)
		return;
	query->targetList = (List *) flatten_group_exprs(NULL, query, (Node *) query->targetList);
	query->havingQual = flatten_group_exprs(NULL, query, query->havingQual);
	last = llast(query->rtable);
	if (last->rtekind == RTE_GROUP)
	{
		query->rtable = list_delete_last(query->rtable);
		query->hasGroupRTE = false;
	}
#endif
}

/*
 * A Var of this level that reads the RTE_GROUP entry (18): the grouping
 * expression it stands for; any other node as it is.  For a query that
 * compat_flatten_grouping did not flatten (a full recompute's, as the
 * parser left it).
 */
Node *
compat_grouped_expr(Query *query, Node *node)
{
#if PG_VERSION_NUM >= 180000
	if (IsA(node, Var) && ((Var *) node)->varlevelsup == 0)
	{
		RangeTblEntry *rte = rt_fetch(((Var *) node)->varno, query->rtable);

		if (rte->rtekind == RTE_GROUP)
			return list_nth(rte->groupexprs, ((Var *) node)->varattno - 1);
	}
#endif
	return node;
}

/*
 * Check the permissions the query's own range table asks for (not those of
 * subqueries left in it), as the executor does at start-up.
 */
bool
compat_check_permissions(Query *query, bool ereport_on_violation)
{
#if PG_VERSION_NUM >= 160000
	return ExecCheckPermissions(query->rtable, query->rteperminfos,
								ereport_on_violation);
#else
	return ExecCheckRTPerms(query->rtable, ereport_on_violation);
#endif
}

/*
 * The first relation of the query's own range table whose rights (on the
 * table, or on the columns it reads) the entry's checking role lacks, or
 * InvalidOid: what compat_check_permissions would raise about.  *role is
 * set to that role: the current user, or a view's owner for the tables of
 * the view.
 */
Oid
compat_relation_denied(Query *query, Oid *role)
{
	ListCell   *lc;

#if PG_VERSION_NUM >= 160000
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);
		RangeTblEntry alone;
		RTEPermissionInfo *perminfo;

		if (rte->perminfoindex == 0)
			continue;
		perminfo = getRTEPermissionInfo(query->rteperminfos, rte);

		/* (a range table of the entry alone, consistent with its one info) */
		alone = *rte;
		alone.perminfoindex = 1;
		if (!ExecCheckPermissions(list_make1(&alone), list_make1(perminfo), false))
		{
			*role = OidIsValid(perminfo->checkAsUser) ? perminfo->checkAsUser : GetUserId();
			return perminfo->relid;
		}
	}
#else
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst_node(RangeTblEntry, lc);

		if (rte->rtekind == RTE_RELATION && !ExecCheckRTPerms(list_make1(rte), false))
		{
			*role = OidIsValid(rte->checkAsUser) ? rte->checkAsUser : GetUserId();
			return rte->relid;
		}
	}
#endif
	return InvalidOid;
}

/*
 * Give estate a range table of rte alone, for a result relation written
 * through the executor (as logical replication's apply does).  From 16 the
 * entry needs a permission info, which later executor calls look up (the
 * columns an UPDATE changed); nothing checks it.  From 18 the entry must be
 * among the relations left after pruning.
 */
void
compat_init_range_table(EState *estate, RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	List	   *perminfos = NIL;

	addRTEPermissionInfo(&perminfos, rte);
#endif
#if PG_VERSION_NUM >= 180000
	ExecInitRangeTable(estate, list_make1(rte), perminfos, bms_make_singleton(1));
#elif PG_VERSION_NUM >= 160000
	ExecInitRangeTable(estate, list_make1(rte), perminfos);
#else
	ExecInitRangeTable(estate, list_make1(rte));
#endif
}

/*
 * Turn the range-table entry of a view into the subquery of its rule, the
 * way the rewriter's ApplyRetrieveRule does on that major.
 *
 * Up to 15 the view's own check (as the caller) moves to the OLD
 * placeholder at the head of the rule's range table, which stays there,
 * unreferenced, so that checking the range table still checks it and
 * locking its relations still locks the view; the entry itself becomes a
 * plain subquery.  From 16 the rule has no placeholders: the entry keeps the
 * view's OID, lock mode and permission info, which stay in the query's
 * rteperminfos (compat_rte_reads_relation tells such an entry).
 */
void
compat_view_to_subquery(RangeTblEntry *rte, Query *view_query)
{
#if PG_VERSION_NUM < 160000
	RangeTblEntry *old_rte = rt_fetch(PRS2_OLD_VARNO, view_query->rtable);

	old_rte->requiredPerms = rte->requiredPerms;
	old_rte->checkAsUser = rte->checkAsUser;
	old_rte->selectedCols = rte->selectedCols;
	rte->requiredPerms = 0;
	rte->relid = InvalidOid;
	rte->relkind = 0;
	rte->rellockmode = 0;
#endif
	rte->rtekind = RTE_SUBQUERY;
	rte->subquery = view_query;
	rte->security_barrier = false;
	rte->tablesample = NULL;
	rte->inh = false;
}

/*
 * Append the range table of subquery sub, pulled up into query, to query's
 * (the caller has offset sub's Vars).  From 16 its permission infos come
 * along, renumbered.
 */
void
compat_append_range_table(Query *query, Query *sub)
{
#if PG_VERSION_NUM >= 160000
	CombineRangeTables(&query->rtable, &query->rteperminfos,
					   sub->rtable, sub->rteperminfos);
#else
	query->rtable = list_concat(query->rtable, sub->rtable);
#endif
}

/*
 * Does range-table entry rte stand for a relation the query reads: a table,
 * or a view that was inlined (up to 15 its rule's OLD placeholder, a
 * relation entry; from 16 the subquery that keeps the view's OID)?
 */
bool
compat_rte_reads_relation(RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	return rte->rtekind == RTE_RELATION ||
		(rte->rtekind == RTE_SUBQUERY && OidIsValid(rte->relid));
#else
	return rte->rtekind == RTE_RELATION;
#endif
}

/*
 * Where the columns the permission check of relation entry rte of query
 * covers are kept (the parser gives every relation entry a check).
 */
Bitmapset **
compat_rte_selected_cols(Query *query, RangeTblEntry *rte)
{
#if PG_VERSION_NUM >= 160000
	return &getRTEPermissionInfo(query->rteperminfos, rte)->selectedCols;
#else
	return &rte->selectedCols;
#endif
}

/*
 * Point relation entry rte of query at another relation; from 16 its
 * permission info too, which must name the same relation.
 */
void
compat_rte_set_relid(Query *query, RangeTblEntry *rte, Oid relid)
{
#if PG_VERSION_NUM >= 160000
	if (rte->perminfoindex != 0)
		getRTEPermissionInfo(query->rteperminfos, rte)->relid = relid;
#endif
	rte->relid = relid;
}

/*
 * Up to 15, the query of a view's rule (as StoreViewQuery keeps it) starts
 * with the OLD and NEW placeholders of the view: drop them, so that the
 * query's range table is its own.  From 16 there are none.
 */
void
compat_drop_view_placeholders(Query *query, Oid view)
{
#if PG_VERSION_NUM < 160000
	RangeTblEntry *old_rte;
	RangeTblEntry *new_rte;

	if (list_length(query->rtable) < 2)
		elog(ERROR, "query view %u has no placeholder entries", view);
	old_rte = linitial(query->rtable);
	new_rte = lsecond(query->rtable);
	if (old_rte->rtekind != RTE_RELATION || old_rte->relid != view ||
		new_rte->rtekind != RTE_RELATION || new_rte->relid != view)
		elog(ERROR, "query view %u has no placeholder entries", view);
	query->rtable = list_delete_first(list_delete_first(query->rtable));
	OffsetVarNodes((Node *) query, -2, 0);
#endif
}

#if PG_VERSION_NUM >= 160000

typedef struct NullingRels
{
	Bitmapset **nulling;		/* by range-table index: the outer joins
								 * above that can null it, NULL if not in the
								 * join tree */
	bool	   *in_tree;
	int			nrtes;
	Bitmapset  *minus;			/* joins at or above where the expression is */
	int			sublevels_up;
} NullingRels;

/* Which outer joins can null each entry of the join tree under jtnode */
static void
find_nulling_joins(Node *jtnode, Bitmapset *above, NullingRels *nr)
{
	if (jtnode == NULL)
		return;
	if (IsA(jtnode, RangeTblRef))
	{
		int			rtindex = ((RangeTblRef *) jtnode)->rtindex;

		nr->nulling[rtindex] = above;
		nr->in_tree[rtindex] = true;
	}
	else if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
			find_nulling_joins(lfirst(lc), above, nr);
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;
		Bitmapset  *left = above;
		Bitmapset  *right = above;

		if (join->jointype == JOIN_RIGHT || join->jointype == JOIN_FULL)
			left = bms_add_member(bms_copy(above), join->rtindex);
		if (join->jointype == JOIN_LEFT || join->jointype == JOIN_FULL)
			right = bms_add_member(bms_copy(above), join->rtindex);
		nr->nulling[join->rtindex] = above;
		nr->in_tree[join->rtindex] = true;
		find_nulling_joins(join->larg, left, nr);
		find_nulling_joins(join->rarg, right, nr);
	}
	else
		elog(ERROR, "unrecognized node type: %d", (int) nodeTag(jtnode));
}

/* Set varnullingrels of the Vars of the query, less the joins nr->minus */
static bool
set_nullingrels_walker(Node *node, NullingRels *nr)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if ((int) var->varlevelsup == nr->sublevels_up && var->varno >= 1 &&
			var->varno <= nr->nrtes && nr->in_tree[var->varno])
			var->varnullingrels = bms_difference(nr->nulling[var->varno], nr->minus);
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		nr->sublevels_up++;
		result = query_tree_walker((Query *) node, set_nullingrels_walker, nr, 0);
		nr->sublevels_up--;
		return result;
	}
	return expression_tree_walker(node, set_nullingrels_walker, nr);
}

/* The same for the quals of the join tree: each sees the joins below it */
static void
set_join_tree_nullingrels(Node *jtnode, Bitmapset *above, NullingRels *nr)
{
	if (jtnode == NULL || IsA(jtnode, RangeTblRef))
		return;
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *from = (FromExpr *) jtnode;
		ListCell   *lc;

		nr->minus = above;
		(void) set_nullingrels_walker(from->quals, nr);
		foreach(lc, from->fromlist)
			set_join_tree_nullingrels(lfirst(lc), above, nr);
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) jtnode;
		Bitmapset  *left = above;
		Bitmapset  *right = above;

		nr->minus = bms_add_member(bms_copy(above), join->rtindex);
		(void) set_nullingrels_walker(join->quals, nr);
		if (join->jointype == JOIN_RIGHT || join->jointype == JOIN_FULL)
			left = bms_add_member(bms_copy(above), join->rtindex);
		if (join->jointype == JOIN_LEFT || join->jointype == JOIN_FULL)
			right = bms_add_member(bms_copy(above), join->rtindex);
		set_join_tree_nullingrels(join->larg, left, nr);
		set_join_tree_nullingrels(join->rarg, right, nr);
	}
}

#endif

/*
 * From 16 a Var names the outer joins that can make it NULL where it is
 * read (varnullingrels), and the planner relies on it: a condition on a
 * column of the nullable side of a LEFT or FULL JOIN, in WHERE without
 * them, is taken for a condition below the join.  The parser sets them;
 * expressions delta_join adds (the key filters of a recompute) or moves
 * (the select list of a pulled-up subquery) come without.  Set them anew
 * for every Var of the query's own level from its join tree, as the parser
 * does, before the query is planned.  Before 16, nothing to do.
 */
void
compat_set_nullingrels(Query *query)
{
#if PG_VERSION_NUM >= 160000
	NullingRels nr;

	nr.nrtes = list_length(query->rtable);
	nr.nulling = palloc0(sizeof(Bitmapset *) * (nr.nrtes + 1));
	nr.in_tree = palloc0(sizeof(bool) * (nr.nrtes + 1));
	nr.minus = NULL;
	nr.sublevels_up = 0;
	find_nulling_joins((Node *) query->jointree, NULL, &nr);
	set_join_tree_nullingrels((Node *) query->jointree, NULL, &nr);
	nr.minus = NULL;
	(void) set_nullingrels_walker((Node *) query->targetList, &nr);
	(void) set_nullingrels_walker(query->havingQual, &nr);
#endif
}

bool
compat_column_not_null(TupleDesc desc, int attno)
{
#if PG_VERSION_NUM >= 180000
	return TupleDescCompactAttr(desc, attno - 1)->attnullability == ATTNULLABLE_VALID;
#else
	return TupleDescAttr(desc, attno - 1)->attnotnull;
#endif
}

const char *
compat_slot_invalidation(void)
{
#if PG_VERSION_NUM >= 160000
	switch (MyReplicationSlot->data.invalidated)
	{
		case RS_INVAL_NONE:
			return NULL;
		case RS_INVAL_WAL_REMOVED:
			break;
		case RS_INVAL_HORIZON:
			return "because rows it needed were removed (a conflict with recovery)";
		case RS_INVAL_WAL_LEVEL:
			return "because the primary's wal_level is below logical";
#if PG_VERSION_NUM >= 180000
		case RS_INVAL_IDLE_TIMEOUT:
			return "because it was idle longer than idle_replication_slot_timeout";
#endif
	}
#else
	if (!XLogRecPtrIsInvalid(MyReplicationSlot->data.restart_lsn))
		return NULL;
#endif
	return "because it retained too much WAL (max_slot_wal_keep_size)";
}

bool
compat_column_is_virtual(Oid relid, int attno)
{
#if PG_VERSION_NUM >= 180000
	return get_attgenerated(relid, attno) == ATTRIBUTE_GENERATED_VIRTUAL;
#else
	(void) relid;
	(void) attno;
	return false;
#endif
}
