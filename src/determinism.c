/*-------------------------------------------------------------------------
 *
 * determinism.c
 *	  Rule 4 of DESIGN.md §3: a view's query must give the same result each
 *	  time a row is recomputed.
 *
 * Refused: volatile functions; stable functions that depend on more than
 * their arguments and the settings a view pins (the transaction's time,
 * the session, the role, the catalogs); user-defined stable functions (they
 * may read tables that are not sources); aggregates whose support functions
 * are not deterministic; aggregates whose result depends on the order of
 * their input, called without ORDER BY; system columns and whole-row
 * references; TABLESAMPLE.  The whole query is walked, subqueries included,
 * so the fallback paths apply the same rule.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/namespace.h"
#include "access/nbtree.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "commands/defrem.h"
#include "catalog/pg_index.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "analysis.h"

/*
 * Stable built-ins whose result depends on more than their arguments and
 * the pinned settings (runas.c): on the transaction's time or snapshot, the
 * session, the role, or the catalogs.  Every other stable built-in (casts
 * and operators of timestamptz, to_char, to_json, format, ...) is allowed.
 */
static const char *const unpinned_names[] = {
	"now", "transaction_timestamp", "statement_timestamp", "mxid_age",
	"current_setting", "current_schema", "current_schemas", "current_user",
	"session_user", "getpgusername", "row_security_active", "version",
	"format_type", "oidvectortypes", "_pg_index_position", "enum_first",
	"enum_last", "enum_range", "regclass",
	/* text input of date and time types reads 'now', 'today', ... */
	"date_in", "timestamp_in", "timestamptz_in", "time_in", "timetz_in",
	/* ... and so may the input of arrays, records and ranges of them */
	"array_in", "record_in", "range_in", "multirange_in",
	"json_populate_record", "json_populate_recordset", "jsonb_populate_record",
	"jsonb_populate_recordset", "json_to_record", "json_to_recordset",
	"jsonb_to_record", "jsonb_to_recordset",
};
static const char *const unpinned_prefixes[] = {
	"txid_", "inet_client_", "inet_server_", "has_", "to_reg",
	"database_to_xml", "schema_to_xml", "table_to_xml",
};
static const char *const unpinned_suffixes[] = {
	"_description", "_is_visible",
};

/* the pg_ functions that only look at their arguments */
static const char *const pure_pg_functions[] = {
	"pg_typeof", "pg_column_size", "pg_column_compression",
};

static bool
builtin_is_unpinned(const char *name, int nargs)
{
	size_t		len = strlen(name);

	/* age(x) compares with today; the two-argument forms do not */
	if (strcmp(name, "age") == 0)
		return nargs == 1;
	/* regclass, regproc, ... input and output read the catalogs */
	if (strncmp(name, "reg", 3) == 0 &&
		((len > 2 && strcmp(name + len - 2, "in") == 0) ||
		 (len > 3 && strcmp(name + len - 3, "out") == 0)))
		return true;
	/* the pg_ functions tell about the server, the session, the catalogs */
	if (strncmp(name, "pg_", 3) == 0)
	{
		for (size_t i = 0; i < lengthof(pure_pg_functions); i++)
			if (strcmp(name, pure_pg_functions[i]) == 0)
				return false;
		return true;
	}
	for (size_t i = 0; i < lengthof(unpinned_names); i++)
		if (strcmp(name, unpinned_names[i]) == 0)
			return true;
	for (size_t i = 0; i < lengthof(unpinned_prefixes); i++)
		if (strncmp(name, unpinned_prefixes[i], strlen(unpinned_prefixes[i])) == 0)
			return true;
	for (size_t i = 0; i < lengthof(unpinned_suffixes); i++)
	{
		size_t		slen = strlen(unpinned_suffixes[i]);

		if (len > slen && strcmp(name + len - slen, unpinned_suffixes[i]) == 0)
			return true;
	}
	return false;
}

/* Why a function breaks rule 4 */
typedef enum Unfit
{
	FIT,
	UNFIT_VOLATILE,
	UNFIT_USER_STABLE,
	UNFIT_UNPINNED
} Unfit;

static Unfit
function_unfit(Oid funcid)
{
	HeapTuple	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	Form_pg_proc proc;
	Unfit		result = FIT;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", funcid);
	proc = (Form_pg_proc) GETSTRUCT(tuple);
	if (proc->provolatile == PROVOLATILE_VOLATILE)
		result = UNFIT_VOLATILE;
	else if (proc->provolatile == PROVOLATILE_IMMUTABLE)
	{
		/* built-ins marked immutable that read the catalogs or the server */
		static const char *const misnamed[] = {
			"pg_partition_root", "pg_walfile_name", "pg_walfile_name_offset",
		};

		for (size_t i = 0; funcid < FirstNormalObjectId && i < lengthof(misnamed); i++)
			if (strcmp(NameStr(proc->proname), misnamed[i]) == 0)
				result = UNFIT_UNPINNED;
	}
	else if (proc->provolatile == PROVOLATILE_STABLE)
	{
		if (funcid >= FirstNormalObjectId)
			result = UNFIT_USER_STABLE;
		else if (builtin_is_unpinned(NameStr(proc->proname), proc->pronargs))
			result = UNFIT_UNPINNED;
	}
	ReleaseSysCache(tuple);
	return result;
}

static void
reject_function(Analysis *a, Oid funcid, Unfit why, const char *context)
{
	char	   *name = get_func_name(funcid);
	char	   *what = context ? psprintf("%s calls function %s()", context, name) :
		psprintf("function %s()", name);

	switch (why)
	{
		case UNFIT_VOLATILE:
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: %s, which is volatile", what),
				   pstrdup("A lookup must reproduce the same result each time a row is recomputed."),
				   pstrdup("Store the value in a source column instead, for example through a column default, and select that column."));
			break;
		case UNFIT_USER_STABLE:
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: %s, a user-defined stable function", what),
				   pstrdup("A stable function may read tables that are not sources, so recomputing a row later might not reproduce its result."),
				   psprintf("If its result depends only on its arguments, declare it IMMUTABLE (ALTER FUNCTION %s IMMUTABLE); otherwise store the value in a source column.",
							format_procedure(funcid)));
			break;
		case UNFIT_UNPINNED:
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: %s, which depends on the transaction, the session or the catalogs", what),
				   pstrdup("A lookup must reproduce the same result each time a row is recomputed; this function may return another value later for the same arguments."),
				   pstrdup("Store the value in a source column instead, for example through a column default, and select that column."));
			break;
		case FIT:
			break;
	}
}

/*
 * Aggregates whose result depends on the order of their input: without an
 * ORDER BY inside the call that orders rows totally, a recompute may not
 * reproduce their value.  Nothing in the catalogs says whether a
 * user-defined aggregate is one of them, so they all count as such.
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
	char	   *name = get_func_name(aggfnoid);
	Oid			nspid = get_func_namespace(aggfnoid);

	if (nspid == get_namespace_oid(DJ_SCHEMA, true))
		return strcmp(name, "first_value") == 0 || strcmp(name, "last_value") == 0;
	if (aggfnoid >= FirstNormalObjectId)
		return true;
	for (size_t i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/* Note the plain columns of the query level among the expressions */
static void
collect_plain_columns(List *exprs, Bitmapset **columns)
{
	ListCell   *lc;

	foreach(lc, exprs)
	{
		Node	   *expr = lfirst(lc);

		while (expr && IsA(expr, RelabelType))
			expr = (Node *) ((RelabelType *) expr)->arg;
		if (expr && IsA(expr, Var) && ((Var *) expr)->varlevelsup == 0 &&
			((Var *) expr)->varattno > 0)
		{
			Var		   *var = (Var *) expr;

			columns[var->varno - 1] = bms_add_member(columns[var->varno - 1],
													 var->varattno);
		}
	}
}

/* Note the column pairs a qual of the join tree says are equal */
static bool
equalities_walker(Node *node, List **pairs)
{
	if (node == NULL)
		return false;
	if (IsA(node, BoolExpr) && ((BoolExpr *) node)->boolop == AND_EXPR)
		return expression_tree_walker(node, equalities_walker, pairs);
	if (IsA(node, List))
		return expression_tree_walker(node, equalities_walker, pairs);
	if (IsA(node, FromExpr))
	{
		FromExpr   *from = (FromExpr *) node;

		(void) equalities_walker((Node *) from->fromlist, pairs);
		return equalities_walker(from->quals, pairs);
	}
	if (IsA(node, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) node;

		(void) equalities_walker(join->larg, pairs);
		(void) equalities_walker(join->rarg, pairs);
		return equalities_walker(join->quals, pairs);
	}
	if (IsA(node, OpExpr) && list_length(((OpExpr *) node)->args) == 2 &&
		op_mergejoinable(((OpExpr *) node)->opno, exprType(linitial(((OpExpr *) node)->args))))
	{
		Node	   *l = strip_implicit_coercions(linitial(((OpExpr *) node)->args));
		Node	   *r = strip_implicit_coercions(lsecond(((OpExpr *) node)->args));

		if (IsA(l, Var) && IsA(r, Var) &&
			((Var *) l)->varlevelsup == 0 && ((Var *) r)->varlevelsup == 0)
			*pairs = lappend(*pairs, list_make2(l, r));
	}
	return false;
}

/*
 * Add the columns the join tree's equalities make equal to those noted:
 * a row that joined has the same value in both (a null-extended one has no
 * row of the nullable table at all).
 */
static void
add_equal_columns(Query *level, Bitmapset **columns)
{
	List	   *pairs = NIL;
	bool		changed = true;

	(void) equalities_walker((Node *) level->jointree, &pairs);
	while (changed)
	{
		ListCell   *lc;

		changed = false;
		foreach(lc, pairs)
		{
			Var		   *l = linitial(lfirst(lc));
			Var		   *r = lsecond(lfirst(lc));
			bool		has_l = bms_is_member(l->varattno, columns[l->varno - 1]);
			bool		has_r = bms_is_member(r->varattno, columns[r->varno - 1]);

			if (has_l != has_r)
			{
				if (has_l)
					columns[r->varno - 1] = bms_add_member(columns[r->varno - 1], r->varattno);
				else
					columns[l->varno - 1] = bms_add_member(columns[l->varno - 1], l->varattno);
				changed = true;
			}
		}
	}
}

/* Does some unique index of the relation have all its columns among these? */
static bool
columns_cover_unique_index(Oid relid, Bitmapset *columns)
{
	Relation	rel = table_open(relid, AccessShareLock);
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	bool		covered = false;

	foreach(lc, indexes)
	{
		HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index index;
		bool		all = true;

		if (!HeapTupleIsValid(tuple))
			continue;
		index = (Form_pg_index) GETSTRUCT(tuple);
		if (index->indisunique && index->indimmediate && index->indisvalid &&
			heap_attisnull(tuple, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(tuple, Anum_pg_index_indexprs, NULL))
		{
			for (int i = 0; i < index->indnkeyatts; i++)
				if (!bms_is_member(index->indkey.values[i], columns))
					all = false;
			covered = all;
		}
		ReleaseSysCache(tuple);
		if (covered)
			break;
	}
	list_free(indexes);
	table_close(rel, AccessShareLock);
	return covered;
}

/*
 * Are two values of the expression's type that are equal the same value?
 * Not for numeric (1.0 = 1.00), float (-0 = 0), a nondeterministic
 * collation (case-insensitive ...): the btree "equalimage" support function
 * of the type's default operator class says.
 */
static bool
equal_means_same(Node *expr)
{
	Oid			type = exprType(expr);
	Oid			opclass = GetDefaultOpClass(type, BTREE_AM_OID);
	Oid			opfamily;
	Oid			opcintype;
	Oid			proc;

	if (!OidIsValid(opclass))
		return false;
	opfamily = get_opclass_family(opclass);
	opcintype = get_opclass_input_type(opclass);
	proc = get_opfamily_proc(opfamily, opcintype, opcintype, BTEQUALIMAGE_PROC);
	if (!OidIsValid(proc))
		return false;
	return DatumGetBool(OidFunctionCall1Coll(proc, exprCollation(expr),
											 ObjectIdGetDatum(opcintype)));
}

/*
 * Does the aggregate's ORDER BY order its input rows so that rows tied on
 * it pass the same arguments?  It does if it sorts on every argument, or
 * if, with the GROUP BY columns, it covers a unique key of every table the
 * rows come from (then no two rows tie).  A NULL key column does not break
 * this: unique keys with NULLs belong to null-extended rows, at most one
 * per combination of the other tables' rows.
 */
static bool
aggregate_order_is_total(Aggref *agg, Query *level)
{
	List	   *sort_exprs = NIL;
	List	   *group_exprs = NIL;
	Bitmapset **columns;
	ListCell   *lc;
	int			rti;
	bool		args_sorted = true;

	foreach(lc, agg->aggorder)
		sort_exprs = lappend(sort_exprs,
							 get_sortgroupclause_expr(lfirst(lc), agg->args));
	foreach(lc, agg->args)
	{
		TargetEntry *tle = lfirst(lc);

		/* (constant arguments, such as string_agg's separator, tie anyway) */
		if (!tle->resjunk && contain_var_clause((Node *) tle->expr) &&
			(!list_member(sort_exprs, tle->expr) || !equal_means_same((Node *) tle->expr)))
			args_sorted = false;
	}
	if (args_sorted)
		return true;

	/* Aggrefs under the level are read from their own level only */
	if (level == NULL || agg->agglevelsup != 0)
		return false;
	columns = palloc0(sizeof(Bitmapset *) * list_length(level->rtable));
	collect_plain_columns((List *) flatten_join_alias_vars_compat(level, (Node *) sort_exprs), columns);
	foreach(lc, level->groupClause)
		group_exprs = lappend(group_exprs,
							  get_sortgroupclause_expr(lfirst(lc), level->targetList));
	collect_plain_columns((List *) flatten_join_alias_vars_compat(level, (Node *) group_exprs), columns);
	add_equal_columns(level, columns);

	rti = 0;
	foreach(lc, level->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		rti++;
		if (rte->rtekind == RTE_JOIN)
			continue;
		if (rte->rtekind != RTE_RELATION ||
			!columns_cover_unique_index(rte->relid, columns[rti - 1]))
			return false;
	}
	return true;
}

/*
 * An aggregate is as deterministic as its support functions (pg_proc says
 * nothing useful about an aggregate itself): built-in ones follow the
 * function rule, user-defined ones must be immutable.
 */
static void
check_aggregate(Analysis *a, Aggref *agg, Query *level)
{
	HeapTuple	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(agg->aggfnoid));
	Form_pg_aggregate form;
	Oid			support[8];
	char	   *context;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", agg->aggfnoid);
	form = (Form_pg_aggregate) GETSTRUCT(tuple);
	support[0] = form->aggtransfn;
	support[1] = form->aggfinalfn;
	support[2] = form->aggcombinefn;
	support[3] = form->aggserialfn;
	support[4] = form->aggdeserialfn;
	support[5] = form->aggmtransfn;
	support[6] = form->aggminvtransfn;
	support[7] = form->aggmfinalfn;
	ReleaseSysCache(tuple);

	context = psprintf("aggregate %s()", get_func_name(agg->aggfnoid));
	for (size_t i = 0; i < lengthof(support); i++)
	{
		Unfit		why;

		if (!OidIsValid(support[i]))
			continue;
		why = function_unfit(support[i]);
		if (why == FIT && support[i] >= FirstNormalObjectId &&
			func_volatile(support[i]) != PROVOLATILE_IMMUTABLE)
			why = UNFIT_USER_STABLE;
		if (why != FIT)
		{
			reject_function(a, support[i], why, context);
			return;
		}
	}

	if (agg->aggdistinct == NIL && aggregate_is_order_sensitive(agg->aggfnoid) &&
		!aggregate_order_is_total(agg, level))
	{
		const char *name = get_func_name(agg->aggfnoid);

		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   agg->aggorder == NIL ?
			   psprintf("delta view rule 4: aggregate %s() needs ORDER BY inside the call", name) :
			   psprintf("delta view rule 4: the ORDER BY inside aggregate %s() can leave ties", name),
			   agg->aggfnoid >= FirstNormalObjectId ?
			   pstrdup("The result of a user-defined aggregate may depend on the order of its input rows, which recomputing a group reproduces only if no two rows tie.") :
			   pstrdup("Its result depends on the order of its input rows, which recomputing a group reproduces only if no two rows tie."),
			   psprintf("Order by all its arguments, or add columns to the ORDER BY until it covers a unique key of each table, e.g. %s(x ORDER BY x) or %s(x ORDER BY t.id).",
						name, name));
	}
}

/* The name SQL gives a value function, for messages */
static const char *
value_function_name(SQLValueFunction *svf)
{
	switch (svf->op)
	{
		case SVFOP_CURRENT_DATE:
			return "CURRENT_DATE";
		case SVFOP_CURRENT_TIME:
		case SVFOP_CURRENT_TIME_N:
			return "CURRENT_TIME";
		case SVFOP_CURRENT_TIMESTAMP:
		case SVFOP_CURRENT_TIMESTAMP_N:
			return "CURRENT_TIMESTAMP";
		case SVFOP_LOCALTIME:
		case SVFOP_LOCALTIME_N:
			return "LOCALTIME";
		case SVFOP_LOCALTIMESTAMP:
		case SVFOP_LOCALTIMESTAMP_N:
			return "LOCALTIMESTAMP";
		case SVFOP_CURRENT_ROLE:
			return "CURRENT_ROLE";
		case SVFOP_CURRENT_USER:
			return "CURRENT_USER";
		case SVFOP_USER:
			return "USER";
		case SVFOP_SESSION_USER:
			return "SESSION_USER";
		case SVFOP_CURRENT_CATALOG:
			return "CURRENT_CATALOG";
		case SVFOP_CURRENT_SCHEMA:
			return "CURRENT_SCHEMA";
	}
	return "a value function";
}

typedef struct DeterminismWalk
{
	Analysis   *a;
	List	   *levels;			/* the enclosing query levels, innermost first */
	Oid			unfit_funcid;	/* set by the function checker */
	Unfit		unfit;
} DeterminismWalk;

static bool
unfit_function_checker(Oid funcid, void *context)
{
	DeterminismWalk *walk = (DeterminismWalk *) context;
	Unfit		why = function_unfit(funcid);

	if (why == FIT)
		return false;
	walk->unfit_funcid = funcid;
	walk->unfit = why;
	return true;
}

/* "o.ctid", the name of a Var's column for messages */
static const char *
var_label(DeterminismWalk *walk, Var *var)
{
	Query	   *level = list_nth(walk->levels, var->varlevelsup);
	RangeTblEntry *rte = rt_fetch(var->varno, level->rtable);

	if (var->varattno == 0)
		return quote_identifier(rte->eref->aliasname);
	return psprintf("%s.%s", quote_identifier(rte->eref->aliasname),
					quote_identifier(get_rte_attribute_name(rte, var->varattno)));
}

static bool
determinism_walker(Node *node, DeterminismWalk *walk)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (var->varattno < 0)
			analysis_reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: system column %s is not supported", var_label(walk, var)),
				   pstrdup("System columns (ctid, xmin, tableoid, ...) change when a row is rewritten or moved, without a change of its values."),
				   pstrdup("Select ordinary columns."));
		else if (var->varattno == 0)
			analysis_reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: whole-row reference %s is not supported", var_label(walk, var)),
				   pstrdup("A whole-row value changes with every column of the table, including columns added later."),
				   pstrdup("Name the columns the query needs."));
		else
			return false;
		if (var->varlevelsup == 0)
			walk->a->bad_columns = true;
		return false;
	}
	if (IsA(node, SQLValueFunction))
	{
		analysis_reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 4: %s depends on the transaction or the session",
						value_function_name((SQLValueFunction *) node)),
			   pstrdup("A lookup must reproduce the same result each time a row is recomputed."),
			   pstrdup("Store the value in a source column instead, for example through a column default, and select that column."));
		return false;
	}
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;

		check_aggregate(walk->a, agg, list_nth(walk->levels, agg->agglevelsup));
	}
	if (IsA(node, Query))
	{
		bool		result;

		walk->levels = lcons(node, walk->levels);
		result = query_tree_walker((Query *) node, determinism_walker, walk, 0);
		walk->levels = list_delete_first(walk->levels);
		return result;
	}
	if (check_functions_in_node(node, unfit_function_checker, walk))
		reject_function(walk->a, walk->unfit_funcid, walk->unfit, NULL);
	return expression_tree_walker(node, determinism_walker, walk);
}

/* Rule 4 over a whole query, subqueries included */
void
analysis_check_determinism(Analysis *a, Query *query)
{
	DeterminismWalk walk = {0};
	ListCell   *lc;

	walk.a = a;
	walk.levels = list_make1(query);
	(void) query_tree_walker(query, determinism_walker, &walk, 0);

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION && rte->tablesample)
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: TABLESAMPLE on \"%s\" AS %s is not deterministic",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
													   get_rel_name(rte->relid)),
							quote_identifier(rte->eref->aliasname)),
				   pstrdup("A lookup must reproduce the same result each time a row is recomputed."),
				   pstrdup("Remove TABLESAMPLE."));
	}
}

/*
 * Rule 4 alone, for any query (the fallback paths): raises the first
 * failure.
 */
void
analyze_check_determinism(Query *query)
{
	Analysis	a = {0};

	analysis_check_determinism(&a, query);
}

