/*-------------------------------------------------------------------------
 *
 * row_order.c
 *	  Rule 4 of DESIGN.md §3 for what depends on the order of rows: a
 *	  recompute must give the same result whatever plan the planner picks,
 *	  and the order in which rows that tie reach an operation is the plan's.
 *
 * What reads rows in their order:
 *
 *	- an order-sensitive aggregate (string_agg, array_agg, the JSON and XML
 *	  aggregates, delta_join.first_value / last_value, ordered-set
 *	  aggregates such as percentile_disc, every user-defined aggregate),
 *	  over rows its ORDER BY leaves tied, or that its DISTINCT finds equal;
 *	- LIMIT and OFFSET, which keep rows by their place in the ORDER BY
 *	  (FETCH FIRST ... WITH TIES keeps the ties: it does not);
 *	- DISTINCT ON, which keeps the first row of each group in the ORDER BY;
 *	- window functions that read rows by their place in the window
 *	  (row_number, ntile, lag, lead; first_value, last_value, nth_value and
 *	  every aggregate over a ROWS frame that is not the whole partition;
 *	  user-defined window functions), and order-sensitive aggregates and
 *	  first_value, last_value, nth_value over any frame;
 *	- ARRAY(subquery), whose elements come in the subquery's order.
 *
 * Each is deterministic when no two rows tie, or when rows that tie cannot
 * be told apart where it matters:
 *
 *	- the order is total: its keys, with the GROUP BY of an aggregate, the
 *	  PARTITION BY of a window, and the columns the WHERE clause and inner
 *	  joins make equal to them or to a constant, cover a unique key of
 *	  each table the rows come from (a key of NOT NULL columns, or a UNIQUE
 *	  NULLS NOT DISTINCT one, under the type's default equality); or the
 *	  rows are groups, or DISTINCT rows, and the keys cover the GROUP BY or
 *	  the DISTINCT;
 *	- or what depends on the order -- the aggregate's arguments, the rows
 *	  LIMIT or DISTINCT ON keep, the rows of a window -- is a function of
 *	  keys whose equal values are the same value.  string_agg(x, ',' ORDER
 *	  BY x) on text is; not on numeric (1.0 = 1.00), float (-0 = 0),
 *	  interval ('1 day' = '24 hours') or text under a nondeterministic
 *	  collation: the btree "equalimage" support function of the type's
 *	  default operator class says which.
 *
 * rank(), dense_rank(), percent_rank(), cume_dist() and the other
 * aggregates over a frame of whole peer groups (RANGE, GROUPS, or the whole
 * partition) give rows that tie the same value: they need nothing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "analysis/analysis.h"
#include "analysis/query.h"

/* A key of an order: rows tie on it when their values are equal under eqop */
typedef struct OrderKey
{
	Node	   *expr;
	Oid			eqop;
} OrderKey;

/* Which rows of a query level an order sorts */
typedef enum LevelRows
{
	ROWS_FROM,					/* the rows of FROM and WHERE (aggregates) */
	ROWS_GROUPED,				/* the groups, if grouped (windows, DISTINCT ON) */
	ROWS_OUTPUT					/* the rows after DISTINCT (LIMIT, ARRAY()) */
} LevelRows;

/* How a window function depends on the order of its window's rows */
typedef enum WindowKind
{
	WINDOW_PEERS,				/* the same value for rows that tie */
	WINDOW_SEQUENCE,			/* reads its frame's rows in their order */
	WINDOW_POSITION				/* reads the row's place among the others */
} WindowKind;

/* ----------------------------------------------------------------
 *		Keys and their ties
 * ----------------------------------------------------------------
 */

/* The btree operator family of a type's default operator class, or none */
static Oid
default_opfamily(Oid type)
{
	Oid			opclass = GetDefaultOpClass(type, BTREE_AM_OID);

	return OidIsValid(opclass) ? get_opclass_family(opclass) : InvalidOid;
}

/* The keys of a list of SortGroupClauses over tlist */
static List *
order_keys(List *clauses, List *tlist)
{
	List	   *keys = NIL;
	ListCell   *lc;

	foreach(lc, clauses)
	{
		SortGroupClause *sgc = lfirst(lc);
		OrderKey   *key = palloc(sizeof(OrderKey));

		key->expr = (Node *) get_sortgroupclause_expr(sgc, tlist);
		key->eqop = sgc->eqop;
		keys = lappend(keys, key);
	}
	return keys;
}

/*
 * Are two values of a type equal under its default btree equality the same
 * value, under the collation?  Only if its operator class's equalimage
 * function says so: not for numeric (1.0 = 1.00), float (-0 = 0), or text
 * under a nondeterministic collation.
 */
bool
row_order_equal_is_identical(Oid type, Oid collation)
{
	Oid			opclass = GetDefaultOpClass(type, BTREE_AM_OID);
	Oid			opfamily;
	Oid			opcintype;
	Oid			proc;

	/*
	 * bpchar: 'a' and 'a ' are equal, and the second keeps its blank when
	 * stored without a length.  Not left to the opclass, whose equalimage
	 * answer differs between majors.
	 */
	if (!OidIsValid(opclass) || type == BPCHAROID)
		return false;
	opfamily = get_opclass_family(opclass);
	opcintype = get_opclass_input_type(opclass);
	proc = get_opfamily_proc(opfamily, opcintype, opcintype, BTEQUALIMAGE_PROC);
	if (!OidIsValid(proc))
		return false;
	return DatumGetBool(OidFunctionCall1Coll(proc, collation, ObjectIdGetDatum(opcintype)));
}

/*
 * Is the expression an integer cast to float or numeric?  Its values are
 * never -0 and always of scale 0: equal ones are the same value, although
 * those of its type in general are not (percentile_cont(...) WITHIN GROUP
 * (ORDER BY an integer) sorts on such a cast).
 */
static bool
is_integer_widened(Node *expr)
{
	FuncExpr   *cast;
	Oid			from;

	if (!IsA(expr, FuncExpr))
		return false;
	cast = (FuncExpr *) expr;
	if (cast->funcid >= FirstNormalObjectId || list_length(cast->args) != 1 ||
		(cast->funcformat != COERCE_IMPLICIT_CAST && cast->funcformat != COERCE_EXPLICIT_CAST))
		return false;
	from = exprType(linitial(cast->args));
	return (from == INT2OID || from == INT4OID || from == INT8OID) &&
		(cast->funcresulttype == FLOAT4OID || cast->funcresulttype == FLOAT8OID ||
		 cast->funcresulttype == NUMERICOID);
}

/*
 * Are two values equal under the key's equality the same value?  Only if
 * that equality is the type's default one, and equal values of the type
 * (or of the expression: is_integer_widened) are the same value under the
 * key's collation.
 */
static bool
key_ties_are_identical(OrderKey *key)
{
	Oid			type = exprType(key->expr);

	if (!OidIsValid(key->eqop) || !op_in_opfamily(key->eqop, default_opfamily(type)))
		return false;
	return is_integer_widened(key->expr) ||
		row_order_equal_is_identical(type, exprCollation(key->expr));
}

/*
 * Does the expression give rows that tie on one of the keys the same
 * value, although the key's equal values can differ?  A char key cast to
 * text does: under a deterministic collation, equal char values differ in
 * their trailing blanks only, which the cast drops.
 */
static bool
drops_what_ties_differ_in(Node *node, List *keys)
{
	FuncExpr   *cast;
	ListCell   *lc;

	if (!IsA(node, FuncExpr) || ((FuncExpr *) node)->funcid != F_TEXT_BPCHAR)
		return false;
	cast = (FuncExpr *) node;
	foreach(lc, keys)
	{
		OrderKey   *key = lfirst(lc);
		Oid			collation = exprCollation(key->expr);

		if (exprType(key->expr) == BPCHAROID && equal(linitial(cast->args), key->expr) &&
			OidIsValid(key->eqop) && op_in_opfamily(key->eqop, default_opfamily(BPCHAROID)) &&
			OidIsValid(collation) && get_collation_isdeterministic(collation))
			return true;
	}
	return false;
}

/* The keys whose equal values are the same value */
static List *
identical_ties(List *keys)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, keys)
	{
		if (key_ties_are_identical(lfirst(lc)))
			result = lappend(result, lfirst(lc));
	}
	return result;
}

/* Do rows equal under op1 also count as equal under op2 (both on type)? */
static bool
same_equality(Oid op1, Oid op2, Oid type)
{
	Oid			opfamily = default_opfamily(type);

	if (op1 == op2)
		return true;
	return OidIsValid(opfamily) && op_in_opfamily(op1, opfamily) &&
		op_in_opfamily(op2, opfamily);
}

/* Do the keys include each of needed (rows that tie on keys tie on needed)? */
static bool
keys_cover(List *keys, List *needed)
{
	ListCell   *lc;

	foreach(lc, needed)
	{
		OrderKey   *need = lfirst(lc);
		bool		found = false;
		ListCell   *lc2;

		foreach(lc2, keys)
		{
			OrderKey   *key = lfirst(lc2);

			if (equal(key->expr, need->expr) &&
				same_equality(key->eqop, need->eqop, exprType(need->expr)))
				found = true;
		}
		if (!found)
			return false;
	}
	return true;
}

/* ----------------------------------------------------------------
 *		Orders that leave no ties
 * ----------------------------------------------------------------
 */

/*
 * The columns (of the level's range-table entries) that rows tying on the
 * order have equal: per entry, a set of attribute numbers.
 */
typedef struct TiedColumns
{
	Query	   *level;
	Bitmapset **columns;
	Bitmapset **nonnull;		/* columns a strict equality holds for: not
								 * NULL but in null-extended rows */
	bool	   *whole;			/* per entry: a unique key is among them, so
								 * rows that tie are one row of the table */
} TiedColumns;

/* A plain column of the level under its implicit coercions, or NULL */
static Var *
plain_column(Node *node)
{
	node = strip_implicit_coercions(node);
	if (node && IsA(node, Var) && ((Var *) node)->varlevelsup == 0 &&
		((Var *) node)->varattno > 0)
		return (Var *) node;
	return NULL;
}

/* Is the column noted, or its table's row the same in rows that tie? */
static bool
noted(TiedColumns *tied, Var *var)
{
	return tied->whole[var->varno - 1] ||
		bms_is_member(var->varattno, tied->columns[var->varno - 1]);
}

/* Note a column whose ties count as equal under op */
static bool
note_column(TiedColumns *tied, Var *var, Oid op)
{
	Oid			opfamily = default_opfamily(var->vartype);

	if (!OidIsValid(opfamily) || !op_in_opfamily(op, opfamily) || noted(tied, var))
		return false;
	tied->columns[var->varno - 1] = bms_add_member(tied->columns[var->varno - 1], var->varattno);
	return true;
}

/*
 * The equalities every row of the level satisfies: those of WHERE and of
 * the ON conditions of inner joins (an outer join's ON condition does not
 * hold for its null-extended rows).  Each is (Var, Var) or (Var, NULL) for
 * a column equal to a value that is the same for every row of the level.
 */
static void
level_equalities(Node *node, List **pairs)
{
	if (node == NULL)
		return;
	if (IsA(node, FromExpr))
	{
		FromExpr   *from = (FromExpr *) node;
		ListCell   *lc;

		foreach(lc, from->fromlist)
			level_equalities(lfirst(lc), pairs);
		level_equalities(from->quals, pairs);
	}
	else if (IsA(node, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) node;

		level_equalities(join->larg, pairs);
		level_equalities(join->rarg, pairs);
		if (join->jointype == JOIN_INNER)
			level_equalities(join->quals, pairs);
	}
	else if (IsA(node, List))
	{
		ListCell   *lc;

		foreach(lc, (List *) node)
			level_equalities(lfirst(lc), pairs);
	}
	else if (is_andclause(node))
		level_equalities((Node *) ((BoolExpr *) node)->args, pairs);
	else if (IsA(node, OpExpr) && list_length(((OpExpr *) node)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) node;
		Node	   *l = linitial(op->args);
		Node	   *r = lsecond(op->args);
		Var		   *lvar = plain_column(l);
		Var		   *rvar = plain_column(r);

		if (!op_mergejoinable(op->opno, exprType(l)))
			return;
		if (lvar && OidIsValid(op->inputcollid) && lvar->varcollid != op->inputcollid)
			lvar = NULL;
		if (rvar && OidIsValid(op->inputcollid) && rvar->varcollid != op->inputcollid)
			rvar = NULL;
		/* (a value of this level that is not a column varies from row to row) */
		if (lvar && rvar)
			*pairs = lappend(*pairs, list_make3(lvar, rvar, (void *) op));
		else if (lvar && !contain_vars_of_level(r, 0) && !contain_volatile_functions(r))
			*pairs = lappend(*pairs, list_make3(lvar, NULL, (void *) op));
		else if (rvar && !contain_vars_of_level(l, 0) && !contain_volatile_functions(l))
			*pairs = lappend(*pairs, list_make3(rvar, NULL, (void *) op));
	}
}

/*
 * Does some unique index of the range-table entry's table have all its
 * columns among the noted ones, with equalities of the index's own kind,
 * and no two rows of the table the same key (NOT NULL columns, or held to
 * a strict equality, or NULLS NOT DISTINCT)?  The rows of an inheritance
 * parent are also its children's, which its indexes do not cover.
 */
bool
row_order_covers_unique_key(RangeTblEntry *rte, Bitmapset *columns, Bitmapset *nonnull)
{
	Relation	rel;
	List	   *indexes;
	ListCell   *lc;
	bool		covered = false;

	if (rte->rtekind != RTE_RELATION ||
		(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_PARTITIONED_TABLE) ||
		(rte->relkind == RELKIND_RELATION && rte->inh && has_subclass(rte->relid)))
		return false;

	rel = table_open(rte->relid, AccessShareLock);
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;
		bool		all = form->indisunique && form->indimmediate && form->indisvalid &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL);

		for (int i = 0; all && i < form->indnkeyatts; i++)
		{
			AttrNumber	attno = form->indkey.values[i];
			Form_pg_attribute att;

			if (attno <= 0 || !bms_is_member(attno, columns))
			{
				all = false;
				break;
			}
			att = TupleDescAttr(RelationGetDescr(rel), attno - 1);
			all = (idx->rd_opfamily[i] == default_opfamily(att->atttypid) &&
				   idx->rd_indcollation[i] == att->attcollation &&
				   (compat_column_not_null(RelationGetDescr(rel), attno) ||
					form->indnullsnotdistinct ||
					bms_is_member(attno, nonnull)));
		}
		index_close(idx, AccessShareLock);
		if ((covered = all))
			break;
	}
	list_free(indexes);
	table_close(rel, AccessShareLock);
	return covered;
}

/*
 * Can no two rows of FROM and WHERE tie on the keys?  Only if the keys'
 * columns, and those the level's equalities make equal to them or to a
 * constant, cover a unique key of every table of the join tree; once they
 * cover one of a table, rows that tie hold the same row of it, and so
 * every column of it.  A NULL from an outer join is no tie: a
 * null-extended row is the only one of its combination of the other
 * tables' rows.
 */
static bool
from_rows_never_tie(Query *level, List *keys)
{
	TiedColumns tied;
	List	   *pairs = NIL;
	Bitmapset  *referenced;
	bool		changed = true;
	ListCell   *lc;
	int			rti;

	if (level->jointree == NULL || level->jointree->fromlist == NIL)
		return true;			/* SELECT without FROM: one row */

	tied.level = level;
	tied.columns = palloc0(sizeof(Bitmapset *) * list_length(level->rtable));
	tied.nonnull = palloc0(sizeof(Bitmapset *) * list_length(level->rtable));
	tied.whole = palloc0(sizeof(bool) * list_length(level->rtable));
	foreach(lc, keys)
	{
		OrderKey   *key = lfirst(lc);
		Var		   *var = plain_column(flatten_join_alias_vars_compat(level, key->expr));

		if (var != NULL)
			(void) note_column(&tied, var, key->eqop);
	}

	level_equalities(flatten_join_alias_vars_compat(level, (Node *) level->jointree), &pairs);
	referenced = analysis_referenced_rtes(level);
	foreach(lc, pairs)
	{
		List	   *pair = lfirst(lc);
		OpExpr	   *op = lthird(pair);

		for (int side = 0; side < 2 && op_strict(op->opno); side++)
		{
			Var		   *var = list_nth(pair, side);

			if (var != NULL)
				tied.nonnull[var->varno - 1] = bms_add_member(tied.nonnull[var->varno - 1],
															  var->varattno);
		}
	}
	while (changed)
	{
		changed = false;
		foreach(lc, pairs)
		{
			List	   *pair = lfirst(lc);
			Var		   *l = linitial(pair);
			Var		   *r = lsecond(pair);
			Oid			op = ((OpExpr *) lthird(pair))->opno;

			if (r == NULL)
				changed |= note_column(&tied, l, op);
			else if (noted(&tied, l))
				changed |= note_column(&tied, r, op);
			else if (noted(&tied, r))
				changed |= note_column(&tied, l, op);
		}
		rti = 0;
		foreach(lc, level->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);

			rti++;
			if (bms_is_member(rti, referenced) && rte->rtekind != RTE_JOIN &&
				!tied.whole[rti - 1] &&
				row_order_covers_unique_key(rte, tied.columns[rti - 1], tied.nonnull[rti - 1]))
				changed = tied.whole[rti - 1] = true;
		}
	}

	rti = 0;
	foreach(lc, level->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		rti++;
		if (bms_is_member(rti, referenced) && rte->rtekind != RTE_JOIN && !tied.whole[rti - 1])
			return false;
	}
	return true;
}

/*
 * Can no two rows of the level (which) tie on the keys?  Groups are unique
 * on the GROUP BY, DISTINCT rows on the DISTINCT, and a level with
 * aggregates but no GROUP BY has one row.
 */
static bool
rows_never_tie(Query *level, List *keys, LevelRows which)
{
	if (level->setOperations)
	{
		SetOperationStmt *op = (SetOperationStmt *) level->setOperations;
		ListCell   *lc;

		if (which != ROWS_OUTPUT || op->all)
			return false;
		/* the rows of UNION, INTERSECT, EXCEPT are distinct */
		foreach(lc, level->targetList)
		{
			TargetEntry *tle = lfirst(lc);
			OrderKey	need = {(Node *) tle->expr, InvalidOid};
			bool		found = false;
			ListCell   *lc2;

			if (tle->resjunk)
				continue;
			foreach(lc2, keys)
			{
				OrderKey   *key = lfirst(lc2);

				found |= (equal(key->expr, need.expr) &&
						  OidIsValid(default_opfamily(exprType(need.expr))) &&
						  op_in_opfamily(key->eqop, default_opfamily(exprType(need.expr))));
			}
			if (!found)
				return false;
		}
		return true;
	}
	if (which != ROWS_FROM &&
		(level->hasAggs || level->groupClause || level->groupingSets || level->havingQual))
	{
		if (level->groupingSets)
			return false;
		if (level->groupClause == NIL)
			return true;
		return keys_cover(keys, order_keys(level->groupClause, level->targetList));
	}
	if (which == ROWS_OUTPUT && level->distinctClause &&
		keys_cover(keys, order_keys(level->distinctClause, level->targetList)))
		return true;
	return from_rows_never_tie(level, keys);
}

/* ----------------------------------------------------------------
 *		What rows that tie can differ in
 * ----------------------------------------------------------------
 */

typedef struct VariesWalk
{
	List	   *keys;			/* keys whose ties are the same value */
	List	   *tied;			/* all the keys */
	Index		levelsup;		/* Vars of this level differ between rows */
	Query	   *level;			/* the level of the window functions */
	Index		winref;			/* the window whose rows may be told apart */
} VariesWalk;

static WindowKind window_kind(Query *level, WindowFunc *wfunc);

/* May the expression differ between rows that tie on the keys? */
static bool
varies_walker(Node *node, VariesWalk *walk)
{
	ListCell   *lc;

	if (node == NULL)
		return false;
	foreach(lc, walk->keys)
	{
		Node	   *key = ((OrderKey *) lfirst(lc))->expr;

		/* a COLLATE clause changes how values compare, not the values */
		if (IsA(key, CollateExpr) && equal(node, ((CollateExpr *) key)->arg))
			return false;
		if (equal(node, key))
			return false;
	}
	if (drops_what_ties_differ_in(node, walk->tied))
		return false;
	if (IsA(node, Var))
		return ((Var *) node)->varlevelsup == walk->levelsup;
	if (IsA(node, Aggref))
		return ((Aggref *) node)->agglevelsup == walk->levelsup;
	if (IsA(node, GroupingFunc))
		return ((GroupingFunc *) node)->agglevelsup == walk->levelsup;
	if (IsA(node, WindowFunc))
	{
		WindowFunc *wfunc = (WindowFunc *) node;

		/*
		 * A window function of another window that reads places tells rows
		 * apart; any other one gives rows that are alike the same value.
		 */
		if (wfunc->winref != walk->winref &&
			window_kind(walk->level, wfunc) == WINDOW_POSITION)
			return true;
	}
	if (IsA(node, SubLink))
	{
		SubLink    *sublink = (SubLink *) node;

		/* (a correlated subquery: as a column of the row, to be safe) */
		if (walk->levelsup > 0 || contain_vars_of_level(sublink->subselect, 1))
			return true;
		return varies_walker(sublink->testexpr, walk);
	}
	return expression_tree_walker(node, varies_walker, walk);
}

/* Is every expression the same in rows that tie on the keys? */
static bool
alike_when_tied(List *exprs, List *keys, Index levelsup, Query *level, Index winref)
{
	VariesWalk	walk;
	ListCell   *lc;

	walk.keys = identical_ties(keys);
	walk.tied = keys;
	walk.levelsup = levelsup;
	walk.level = level;
	walk.winref = winref;
	foreach(lc, exprs)
	{
		if (varies_walker(lfirst(lc), &walk))
			return false;
	}
	return true;
}

/* ----------------------------------------------------------------
 *		Aggregates
 * ----------------------------------------------------------------
 */

/*
 * Aggregates whose result depends on the order of their input: the
 * ordered-set ones, and those that list or pick their input.  Nothing in
 * the catalogs says whether a user-defined aggregate is one of them, so
 * they all count as such.
 */
static bool
aggregate_is_order_sensitive(Oid aggfnoid)
{
	static const char *const names[] = {
		"string_agg", "array_agg", "json_agg", "jsonb_agg", "json_object_agg",
		"jsonb_object_agg", "json_object_agg_unique", "jsonb_object_agg_unique",
		"json_object_agg_strict", "jsonb_object_agg_strict",
		"json_object_agg_unique_strict", "jsonb_object_agg_unique_strict",
		"xmlagg",
	};
	HeapTuple	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	char		aggkind;
	char	   *name = get_func_name(aggfnoid);
	Oid			nspid = get_func_namespace(aggfnoid);

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
	aggkind = ((Form_pg_aggregate) GETSTRUCT(tuple))->aggkind;
	ReleaseSysCache(tuple);

	if (aggkind == AGGKIND_ORDERED_SET)
		return true;
	if (nspid == get_namespace_oid(DJ_SCHEMA, true))
		return strcmp(name, "first_value") == 0 || strcmp(name, "last_value") == 0;
	if (aggfnoid >= FirstNormalObjectId)
		return true;
	for (size_t i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/*
 * An order-sensitive aggregate must see its input rows in an order the
 * plan cannot change: its ORDER BY (or DISTINCT) sorts on its arguments,
 * whose equal values are the same value, or leaves no ties, with the
 * GROUP BY.  level is the query level the aggregate aggregates.
 */
void
row_order_check_aggregate(Analysis *a, Aggref *agg, Query *level)
{
	List	   *keys;
	List	   *args = NIL;
	ListCell   *lc;
	const char *name;

	if (!aggregate_is_order_sensitive(agg->aggfnoid))
		return;
	keys = order_keys(agg->aggdistinct != NIL ? agg->aggdistinct : agg->aggorder, agg->args);
	foreach(lc, agg->args)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			args = lappend(args, tle->expr);
	}
	if (alike_when_tied(args, keys, agg->agglevelsup, level, 0))
		return;
	if (agg->agglevelsup == 0 &&
		rows_never_tie(level, list_concat(keys, order_keys(level->groupClause, level->targetList)),
					   ROWS_FROM))
		return;

	name = get_func_name(agg->aggfnoid);
	if (agg->aggdistinct != NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 4: DISTINCT inside aggregate %s() keeps one of values that are equal but can differ", name),
			   pstrdup("Of the values its DISTINCT finds equal, it keeps the one it reads first, which recomputing a group reproduces only if equal values are the same value."),
			   pstrdup("Aggregate values whose equal values are the same (e.g. cast to text), or remove DISTINCT."));
		return;
	}
	if (agg->aggkind == AGGKIND_ORDERED_SET)
	{
		/* its WITHIN GROUP takes no more columns to break ties with */
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 4: the ORDER BY inside aggregate %s() can leave ties", name),
			   pstrdup("Its result depends on which of the rows that tie it reads first, which recomputing a group reproduces only if equal values are the same value."),
			   psprintf("Sort on a value of a type whose equal values are the same (an integer, a date, text under a deterministic collation; not numeric or float), e.g. %s(...) WITHIN GROUP (ORDER BY x).",
						name));
		return;
	}
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   agg->aggorder == NIL ?
		   psprintf("delta view rule 4: aggregate %s() needs ORDER BY inside the call", name) :
		   psprintf("delta view rule 4: the ORDER BY inside aggregate %s() can leave ties", name),
		   agg->aggfnoid >= FirstNormalObjectId ?
		   pstrdup("The result of a user-defined aggregate may depend on the order of its input rows, which recomputing a group reproduces only if no two rows tie.") :
		   pstrdup("Its result depends on the order of its input rows, which recomputing a group reproduces only if no two rows tie."),
		   psprintf("Order by all its arguments (of types whose equal values are the same, not numeric or float), or add columns to the ORDER BY until it covers a unique key of each table, e.g. %s(x ORDER BY x) or %s(x ORDER BY t.id).",
					name, name));
}

/* ----------------------------------------------------------------
 *		Window functions
 * ----------------------------------------------------------------
 */

static WindowClause *
window_clause(Query *level, Index winref)
{
	ListCell   *lc;

	foreach(lc, level->windowClause)
	{
		WindowClause *wc = lfirst(lc);

		if (wc->winref == winref)
			return wc;
	}
	elog(ERROR, "window clause %u not found", winref);
	return NULL;
}

static WindowKind
window_kind(Query *level, WindowFunc *wfunc)
{
	WindowClause *wc = window_clause(level, wfunc->winref);
	bool		peer_frame = (wc->frameOptions & FRAMEOPTION_ROWS) == 0 ||
		((wc->frameOptions & FRAMEOPTION_START_UNBOUNDED_PRECEDING) &&
		 (wc->frameOptions & FRAMEOPTION_END_UNBOUNDED_FOLLOWING));
	const char *name;

	if (wfunc->winagg)
	{
		if (!peer_frame)
			return WINDOW_POSITION;
		return aggregate_is_order_sensitive(wfunc->winfnoid) ? WINDOW_SEQUENCE : WINDOW_PEERS;
	}
	if (wfunc->winfnoid >= FirstNormalObjectId)
		return WINDOW_POSITION;
	name = get_func_name(wfunc->winfnoid);
	if (strcmp(name, "rank") == 0 || strcmp(name, "dense_rank") == 0 ||
		strcmp(name, "percent_rank") == 0 || strcmp(name, "cume_dist") == 0)
		return WINDOW_PEERS;
	if (strcmp(name, "first_value") == 0 || strcmp(name, "last_value") == 0 ||
		strcmp(name, "nth_value") == 0)
		return peer_frame ? WINDOW_SEQUENCE : WINDOW_POSITION;
	return WINDOW_POSITION;
}

static bool
collect_window_functions(Node *node, List **wfuncs)
{
	if (node == NULL)
		return false;
	if (IsA(node, WindowFunc))
		*wfuncs = lappend(*wfuncs, node);
	if (IsA(node, Query))
		return false;			/* another level's */
	return expression_tree_walker(node, collect_window_functions, wfuncs);
}

/*
 * A window function that reads its rows in their order needs a window
 * order that leaves no ties (with the PARTITION BY), or rows that tie to
 * be alike: in the arguments of one that reads its frame in order, in the
 * whole output row for one that reads places.
 */
static void
check_windows(Analysis *a, Query *level)
{
	List	   *wfuncs = NIL;
	ListCell   *lc;

	(void) collect_window_functions((Node *) level->targetList, &wfuncs);
	foreach(lc, wfuncs)
	{
		WindowFunc *wfunc = lfirst(lc);
		WindowClause *wc = window_clause(level, wfunc->winref);
		WindowKind	kind = window_kind(level, wfunc);
		List	   *keys;
		bool		alike;

		if (kind == WINDOW_PEERS)
			continue;
		keys = list_concat(order_keys(wc->partitionClause, level->targetList),
						   order_keys(wc->orderClause, level->targetList));
		if (kind == WINDOW_SEQUENCE)
			alike = alike_when_tied(wfunc->args, keys, 0, level, wfunc->winref);
		else
			alike = alike_when_tied(query_output_exprs(level), keys, 0, level, wfunc->winref);
		if (alike || rows_never_tie(level, keys, ROWS_GROUPED))
			continue;
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   wc->orderClause == NIL ?
			   psprintf("delta view rule 4: window function %s() needs ORDER BY in its window",
						get_func_name(wfunc->winfnoid)) :
			   psprintf("delta view rule 4: the ORDER BY of the window of %s() can leave ties",
						get_func_name(wfunc->winfnoid)),
			   kind == WINDOW_POSITION ?
			   pstrdup("Its value depends on the place of each row in its window, which a recompute reproduces only if no two rows tie.") :
			   pstrdup("Its value depends on the order of the rows in its frame, which a recompute reproduces only if no two rows tie."),
			   pstrdup("Add columns to the window's ORDER BY until, with its PARTITION BY, it covers a unique key of each table, e.g. OVER (PARTITION BY g ORDER BY x, t.id)."));
	}
}

/* ----------------------------------------------------------------
 *		LIMIT, OFFSET, DISTINCT ON, ARRAY()
 * ----------------------------------------------------------------
 */

/* Is the expression (a LIMIT or OFFSET) the constant NULL, or zero? */
static bool
is_null_or_zero(Node *node, bool zero)
{
	Const	   *c;

	node = strip_implicit_coercions(node);
	if (!IsA(node, Const))
		return false;
	c = (Const *) node;
	if (c->constisnull)
		return true;
	if (!zero)
		return false;
	return (c->consttype == INT8OID && DatumGetInt64(c->constvalue) == 0) ||
		(c->consttype == INT4OID && DatumGetInt32(c->constvalue) == 0);
}

/* Does LIMIT or OFFSET keep some rows of the level and not others? */
static bool
limit_picks_rows(Query *level)
{
	bool		counts = (level->limitCount != NULL &&
						  !is_null_or_zero(level->limitCount, false));
	bool		skips = (level->limitOffset != NULL &&
						 !is_null_or_zero(level->limitOffset, true));

	/* FETCH FIRST n ROWS WITH TIES keeps the rows that tie with the last */
	if (counts && !skips && level->limitOption == LIMIT_OPTION_WITH_TIES)
		return false;
	return counts || skips;
}

/*
 * The rules of one query level: LIMIT / OFFSET, DISTINCT ON and window
 * functions.  (Aggregates are checked as the walk finds them.)
 */
void
row_order_check_level(Analysis *a, Query *level)
{
	if (limit_picks_rows(level))
	{
		List	   *keys = order_keys(level->sortClause, level->targetList);

		if (!rows_never_tie(level, keys, ROWS_OUTPUT) &&
			!alike_when_tied(query_output_exprs(level), keys, 0, level, 0))
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   level->sortClause == NIL ?
				   pstrdup("delta view rule 4: LIMIT or OFFSET without ORDER BY keeps rows in no defined order") :
				   pstrdup("delta view rule 4: the ORDER BY of LIMIT or OFFSET can leave ties"),
				   pstrdup("Which rows a recompute keeps would depend on the plan the planner chooses."),
				   pstrdup("Add columns to the ORDER BY until it covers a unique key of each table (e.g. ORDER BY amount DESC, id), or keep the rows that tie with FETCH FIRST ... ROWS WITH TIES."));
	}
	if (level->hasDistinctOn)
	{
		List	   *keys = list_concat(order_keys(level->distinctClause, level->targetList),
									   order_keys(level->sortClause, level->targetList));

		if (!rows_never_tie(level, keys, ROWS_GROUPED) &&
			!alike_when_tied(query_output_exprs(level), keys, 0, level, 0))
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   level->sortClause == NIL ?
				   pstrdup("delta view rule 4: DISTINCT ON without ORDER BY keeps any row of each group") :
				   pstrdup("delta view rule 4: the ORDER BY of DISTINCT ON can leave ties"),
				   pstrdup("Which row of each group a recompute keeps would depend on the plan the planner chooses."),
				   pstrdup("Order by the DISTINCT ON expressions, then by columns that cover a unique key of each table (e.g. DISTINCT ON (g) ... ORDER BY g, x, id)."));
	}
	if (level->hasWindowFuncs)
		check_windows(a, level);
}

/* ARRAY(subquery) lists the subquery's rows in its order */
void
row_order_check_array(Analysis *a, SubLink *sublink)
{
	Query	   *sub = castNode(Query, sublink->subselect);
	List	   *keys = order_keys(sub->sortClause, sub->targetList);

	if (rows_never_tie(sub, keys, ROWS_OUTPUT) ||
		alike_when_tied(query_output_exprs(sub), keys, 0, sub, 0))
		return;
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   sub->sortClause == NIL ?
		   pstrdup("delta view rule 4: ARRAY(subquery) without ORDER BY lists rows in no defined order") :
		   pstrdup("delta view rule 4: the ORDER BY of ARRAY(subquery) can leave ties"),
		   pstrdup("The order of the array's elements would depend on the plan the planner chooses."),
		   pstrdup("Order the subquery by its output, or add columns to its ORDER BY until it covers a unique key of each table."));
}
