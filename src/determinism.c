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
#include "access/transam.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
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
	"session_user", "getpgusername", "pg_backend_pid", "pg_conf_load_time",
	"pg_postmaster_start_time", "pg_trigger_depth", "pg_my_temp_schema",
	"pg_is_other_temp_schema", "pg_listening_channels", "pg_has_role",
	"row_security_active", "pg_describe_object", "pg_filenode_relation",
	"pg_column_is_updatable", "pg_sequence_parameters",
	"pg_settings_get_flags", "pg_show_all_settings",
	"pg_extension_update_paths", "pg_config", "pg_cursor",
	"pg_prepared_statement", "pg_replication_origin_oid", "version",
	"format_type", "oidvectortypes", "pg_collation_for", "_pg_index_position",
	"pg_tablespace_databases", "pg_tablespace_location", "enum_first",
	"enum_last", "enum_range",
};
static const char *const unpinned_prefixes[] = {
	"pg_current_", "txid_", "inet_client_", "inet_server_", "has_", "to_reg",
	"pg_get_", "pg_stat_", "pg_identify_object", "pg_available_",
	"pg_event_trigger_", "pg_relation_", "pg_index", "database_to_xml",
	"schema_to_xml", "table_to_xml", "pg_timezone_",
};
static const char *const unpinned_suffixes[] = {
	"_description", "_is_visible",
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
 * ORDER BY inside the call, a recompute may not reproduce their value.
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
		return false;
	for (size_t i = 0; i < lengthof(names); i++)
		if (strcmp(name, names[i]) == 0)
			return true;
	return false;
}

/*
 * An aggregate is as deterministic as its support functions (pg_proc says
 * nothing useful about an aggregate itself): built-in ones follow the
 * function rule, user-defined ones must be immutable.
 */
static void
check_aggregate(Analysis *a, Aggref *agg)
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

	if (agg->aggorder == NIL && agg->aggdistinct == NIL &&
		aggregate_is_order_sensitive(agg->aggfnoid))
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 4: aggregate %s() needs ORDER BY inside the call",
						get_func_name(agg->aggfnoid)),
			   pstrdup("Its result depends on the order of its input rows, which recomputing a group does not reproduce."),
			   psprintf("Order its input, e.g. %s(x ORDER BY x).", get_func_name(agg->aggfnoid)));
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
	List	   *rtables;		/* range tables of the enclosing query levels */
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
	List	   *rtable = list_nth(walk->rtables, var->varlevelsup);
	RangeTblEntry *rte = rt_fetch(var->varno, rtable);

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
		check_aggregate(walk->a, (Aggref *) node);
	if (IsA(node, Query))
	{
		bool		result;

		walk->rtables = lcons(((Query *) node)->rtable, walk->rtables);
		result = query_tree_walker((Query *) node, determinism_walker, walk, 0);
		walk->rtables = list_delete_first(walk->rtables);
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
	walk.rtables = list_make1(query->rtable);
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

