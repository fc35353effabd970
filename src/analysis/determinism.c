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
 * are not deterministic; system columns and whole-row references;
 * TABLESAMPLE; and what depends on the order in which rows that tie come
 * (row_order.c).  The whole query is walked, subqueries, CTEs and the
 * views the full-recompute path reads included, so every path applies the
 * same rule.  What it leaves to the plan -- the rounding of float sums,
 * which of equal values that differ a min(), max() or grouping keeps -- is
 * noted for explain().
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
#include "catalog/pg_namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "analysis/analysis.h"

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
 * The functions an aggregate runs: those of its plain, parallel and moving
 * forms (a window's moving frame), AGGREGATE_SUPPORT_FUNCTIONS of them.
 */
void
aggregate_support_functions(Oid aggfnoid, Oid *support)
{
	HeapTuple	tuple = SearchSysCache1(AGGFNOID, ObjectIdGetDatum(aggfnoid));
	Form_pg_aggregate form;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for aggregate %u", aggfnoid);
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
}

/*
 * An aggregate is as deterministic as its support functions (pg_proc says
 * nothing useful about an aggregate itself): built-in ones follow the
 * function rule, user-defined ones must be immutable.  The same holds for
 * an aggregate called as a window function.
 */
static void
check_aggregate_support(Analysis *a, Oid aggfnoid)
{
	Oid			support[AGGREGATE_SUPPORT_FUNCTIONS];
	char	   *context;

	aggregate_support_functions(aggfnoid, support);
	context = psprintf("aggregate %s()", get_func_name(aggfnoid));
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
}

/* A sample of a table's rows is not the same sample after a change */
static void
check_tablesample(Analysis *a, RangeTblEntry *rte)
{
	if (rte->rtekind != RTE_RELATION || rte->tablesample == NULL)
		return;
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 4: TABLESAMPLE on %s AS %s is not deterministic",
					dj_message_name(quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
															   get_rel_name(rte->relid))),
					quote_identifier(rte->eref->aliasname)),
		   pstrdup("A lookup must reproduce the same result each time a row is recomputed."),
		   pstrdup("Remove TABLESAMPLE."));
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

/* ----------------------------------------------------------------
 *		What rule 4 leaves to the plan
 *
 * Refusing these would refuse most aggregates and groupings, so they are
 * accepted, and the README (rule 4) and explain() say what they mean: the
 * target holds the answer of the plans delta_join runs (never parallel),
 * which another plan of the query may not give to the last digit or the
 * last trailing blank.
 * ----------------------------------------------------------------
 */

/* Add a note to explain()'s lines, once */
static void
note(Analysis *a, char *text)
{
	ListCell   *lc;

	foreach(lc, a->notes)
	{
		if (strcmp(lfirst(lc), text) == 0)
			return;
	}
	a->notes = lappend(a->notes, text);
}

/* What the note about equal values that differ says after its subject */
#define EQUAL_BUT_DIFFERENT \
	" keeps one of values that are equal but differ in their text (1.0 and 1.00, -0 and 0, " \
	"trailing blanks, strings a nondeterministic collation finds equal): which one may " \
	"depend on the plan"

/*
 * Are equal values of a type the same value?  A numeric or char with a
 * type modifier has one scale or one length, so yes; otherwise as its type
 * and collation say (row_order.c).
 */
static bool
equal_values_identical(Oid type, int32 typmod, Oid collation)
{
	if ((type == NUMERICOID || type == BPCHAROID) && typmod >= 0)
		return true;
	return row_order_equal_is_identical(type, collation);
}

static bool
equal_results_identical(Node *expr)
{
	return equal_values_identical(exprType(expr), exprTypmod(expr), exprCollation(expr));
}

/*
 * Built-in aggregates that add float values (whose rounding depends on the
 * order of the additions, which a parallel plan changes), and those that
 * return one of their input values (which one, of values that are equal).
 */
static void
note_aggregate(Analysis *a, Aggref *agg)
{
	static const char *const adding[] = {
		"sum", "avg", "stddev", "stddev_pop", "stddev_samp", "variance",
		"var_pop", "var_samp", "corr", "covar_pop", "covar_samp",
	};
	char	   *name;
	TargetEntry *arg;
	Oid			type;

	if (agg->aggfnoid >= FirstNormalObjectId || agg->args == NIL ||
		get_func_namespace(agg->aggfnoid) != PG_CATALOG_NAMESPACE)
		return;
	name = get_func_name(agg->aggfnoid);
	arg = linitial(agg->args);
	type = exprType((Node *) arg->expr);
	if (type == FLOAT4OID || type == FLOAT8OID)
	{
		bool		adds = strncmp(name, "regr_", 5) == 0;

		for (size_t i = 0; i < lengthof(adding) && !adds; i++)
			adds = strcmp(name, adding[i]) == 0;
		if (adds)
			note(a, psprintf("%s() over %s rounds in the order the plan adds the rows: another plan of the query (a parallel one) may give a value that differs in its last digits; numeric adds exactly",
							 name, format_type_be(type)));
	}
	if ((strcmp(name, "min") == 0 || strcmp(name, "max") == 0) &&
		!equal_results_identical((Node *) arg->expr))
		note(a, psprintf("%s() over %s" EQUAL_BUT_DIFFERENT, name, format_type_be(type)));
}

/* The output columns of a GROUP BY or DISTINCT whose equal values can differ */
static void
note_grouping(Analysis *a, Query *level, List *clauses, const char *what)
{
	ListCell   *lc;

	foreach(lc, clauses)
	{
		TargetEntry *tle = get_sortgroupclause_tle(lfirst(lc), level->targetList);
		Oid			type = exprType((Node *) tle->expr);

		if (!tle->resjunk && !equal_results_identical((Node *) tle->expr))
			note(a, psprintf("%s on %s (%s)" EQUAL_BUT_DIFFERENT, what,
							 tle->resname ? quote_identifier(tle->resname) : "a column",
							 format_type_be(type)));
	}
}

/* Is there a UNION, INTERSECT or EXCEPT without ALL in the tree? */
static bool
set_operation_merges(Node *node)
{
	SetOperationStmt *op;

	if (node == NULL || !IsA(node, SetOperationStmt))
		return false;
	op = (SetOperationStmt *) node;
	return !op->all || set_operation_merges(op->larg) || set_operation_merges(op->rarg);
}

/* A query level's GROUP BY, DISTINCT and set operations */
static void
note_level(Analysis *a, Query *level)
{
	note_grouping(a, level, level->groupClause, "GROUP BY");
	note_grouping(a, level, level->distinctClause, "DISTINCT");
	if (set_operation_merges(level->setOperations))
	{
		SetOperationStmt *op = (SetOperationStmt *) level->setOperations;
		ListCell   *type;
		ListCell   *typmod;
		ListCell   *collation;

		forthree(type, op->colTypes, typmod, op->colTypmods, collation, op->colCollations)
		{
			if (!equal_values_identical(lfirst_oid(type), lfirst_int(typmod), lfirst_oid(collation)))
				note(a, psprintf("a UNION, INTERSECT or EXCEPT over %s" EQUAL_BUT_DIFFERENT,
								 format_type_be(lfirst_oid(type))));
		}
	}
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

		check_aggregate_support(walk->a, agg->aggfnoid);
		row_order_check_aggregate(walk->a, agg, list_nth(walk->levels, agg->agglevelsup));
		note_aggregate(walk->a, agg);
	}
	if (IsA(node, WindowFunc) && ((WindowFunc *) node)->winagg)
		check_aggregate_support(walk->a, ((WindowFunc *) node)->winfnoid);
	if (IsA(node, SubLink) && ((SubLink *) node)->subLinkType == ARRAY_SUBLINK)
		row_order_check_array(walk->a, (SubLink *) node);
	if (IsA(node, RangeTblEntry))
	{
		check_tablesample(walk->a, (RangeTblEntry *) node);
		return false;
	}
	if (IsA(node, Query))
	{
		bool		result;

		walk->levels = lcons(node, walk->levels);
		row_order_check_level(walk->a, (Query *) node);
		note_level(walk->a, (Query *) node);
		result = query_tree_walker((Query *) node, determinism_walker, walk,
								   QTW_EXAMINE_RTES_BEFORE);
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

	walk.a = a;
	walk.levels = list_make1(query);
	row_order_check_level(a, query);
	note_level(a, query);
	(void) query_tree_walker(query, determinism_walker, &walk, QTW_EXAMINE_RTES_BEFORE);
}
