/*-------------------------------------------------------------------------
 *
 * analyze.c
 *	  Turn a view's analyzed query into a delta plan, checking that it is
 *	  eligible for incremental maintenance (DESIGN.md §3, rules 1-8).
 *
 * The query comes from Postgres's own parser and analyzer (query.c): at
 * creation, as the caller wrote it; afterwards, as its query view bound it.
 * Names, types, operators and collations are therefore resolved exactly as
 * in a plain SELECT, and once.  The Query is then walked:
 *
 *	- every range-table entry must be a WAL-logged table with a primary key
 *	  and no inheritance children (rule 1), joined only by inner joins;
 *	- every function must give the same result each time a row is
 *	  recomputed, no system column is read (rule 4);
 *	- the WHERE / ON conditions are split into join conditions (plain-column
 *	  equalities between two sources) and filters;
 *	- for each pair of joined sources, each side must be reachable through an
 *	  index prefix (rule 2), and from each source a "walk" is planned: the
 *	  order and indexes in which the others are looked up when it changes;
 *	- the result's unique key is derived from the sources' primary keys and
 *	  must appear in the select list (rule 8); filters on other columns are
 *	  rejected unless residual rows are accepted (rule 6).
 *
 * Every rejection goes through reject(): it raises an error, or, for
 * delta_join.explain(), records the failure and lets the analysis go on so
 * that all failed rules are listed at once.  What later steps index by
 * column (the classes of equal columns) is only built once no column
 * outside a source's user columns is referenced.
 *
 * Nothing here runs code of the query: no expression is evaluated.
 * Everything is allocated in the caller's memory context.
 *
 * The file is longer than most because the eight rules share one Analysis
 * state (sources, column classes, failures); its sections follow the rules.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_aggregate.h"
#include "catalog/pg_am.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "partitioning/partdefs.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/regproc.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "analyze.h"
#include "options.h"

/* What we need of one btree index of a source, read once. */
typedef struct IndexDesc
{
	Oid			oid;
	bool		primary;
	int			nkeyatts;
	AttrNumber *attnums;		/* 0 for an expression column */
	Oid		   *opfamilies;
	Oid		   *opcintypes;
	Oid		   *collations;
} IndexDesc;

/* A column of a source that an index lookup could bind, and how. */
typedef struct BindableColumn
{
	AttrNumber	attno;			/* column of the looked-up source */
	Oid			opno;			/* equality, looked-up column on the left */
	Oid			righttype;
	Oid			collation;
	int			from_source;	/* where the value comes from; -1: a key */
	AttrNumber	from_attno;
} BindableColumn;

typedef struct Failure
{
	int			code;
	char	   *message;
	char	   *detail;
	char	   *hint;
} Failure;

typedef struct Analysis
{
	DeltaPlan  *plan;
	bool		collect;		/* explain: collect failures, don't raise */
	List	   *failures;		/* Failure * */
	int		   *rt_source;		/* rtindex -> source index, or -1 */
	List	   *source_indexes; /* List of IndexDesc * per source */
	List	   *filters;		/* quals that are not join conditions */
	int		   *col_offset;		/* per source: first column id */
	int		   *class_parent;	/* union-find over column ids */
	int			ncolumn_ids;	/* size of class_parent */
	bool		bad_columns;	/* a system column or whole row is read */
} Analysis;

#define SOURCE(a, i)	((DeltaSource *) list_nth((a)->plan->sources, (i)))

/* ----------------------------------------------------------------
 *		Reporting
 * ----------------------------------------------------------------
 */

static void
reject(Analysis *a, int code, char *message, char *detail, char *hint)
{
	Failure    *f;

	if (!a->collect)
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", message),
				 detail ? errdetail("%s", detail) : 0,
				 hint ? errhint("%s", hint) : 0));

	f = palloc(sizeof(Failure));
	f->code = code;
	f->message = message;
	f->detail = detail;
	f->hint = hint;
	a->failures = lappend(a->failures, f);
}

/* '"public.orders" AS o', or '"public.orders"' when the alias is the name */
static char *
source_name(DeltaSource *src)
{
	char	   *relname = get_rel_name(src->relid);

	if (strcmp(relname, src->alias) == 0)
		return psprintf("\"%s\"", src->relname);
	return psprintf("\"%s\" AS %s", src->relname, quote_identifier(src->alias));
}

/* 'table "public.orders" AS o' */
static char *
source_label(DeltaSource *src)
{
	return psprintf("table %s", source_name(src));
}

/* "o.item_id" */
static char *
column_label(DeltaSource *src, AttrNumber attno)
{
	return psprintf("%s.%s", quote_identifier(src->alias),
					quote_identifier(get_attname(src->relid, attno, false)));
}

/* "(merchant_id, item_id)" from attribute numbers */
static char *
column_list(Oid relid, int n, const AttrNumber *attnums)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(relid, attnums[i], false)));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* Apply the table hints (matched to range-table entries) to their sources. */
static void
apply_hints(Analysis *a, List *hints)
{
	ListCell   *lc;

	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, a->plan->sources)
		{
			DeltaSource *src = lfirst(lc2);

			if (src->rtindex != hint->rtindex)
				continue;
			if (hint->cache_size >= 0)
				src->cache_size = hint->cache_size;
			if (hint->cache_enabled_set)
				src->cache_enabled = hint->cache_enabled;
			src->lookup_only = hint->lookup_only;
		}
	}
}

/* ----------------------------------------------------------------
 *		Rule 5: only projection and filter
 * ----------------------------------------------------------------
 */

static void
reject_shape(Analysis *a, const char *what)
{
	reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 5: %s not supported", what),
		   pstrdup("Only projection and filter may stand between the sources, the join and the target."),
		   pstrdup("Remove it from the query; compute it when reading the target instead."));
}

static void
check_query_shape(Analysis *a, Query *query)
{
	if (query->setOperations)
		reject_shape(a, "set operations (UNION, INTERSECT, EXCEPT) are");
	if (query->cteList || query->hasRecursive)
		reject_shape(a, "WITH (common table expressions) is");
	if (query->hasSubLinks)
		reject_shape(a, "subqueries are");
	if (query->distinctClause)
		reject_shape(a, "DISTINCT is");
	if (query->hasWindowFuncs)
		reject_shape(a, "window functions are");
	if (query->sortClause)
		reject_shape(a, "ORDER BY is");
	if (query->limitCount || query->limitOffset)
		reject_shape(a, "LIMIT and OFFSET are");
	if (query->groupingSets)
		reject_shape(a, "GROUPING SETS, ROLLUP and CUBE are");
	if (query->hasTargetSRFs)
		reject_shape(a, "set-returning functions in the select list are");
	if (query->rowMarks)
		reject_shape(a, "FOR UPDATE and FOR SHARE are");
}

/* ----------------------------------------------------------------
 *		Rule 1: sources
 * ----------------------------------------------------------------
 */

/* Read the valid, non-partial btree indexes of rel. */
static List *
read_indexes(Relation rel, Oid pk_index)
{
	List	   *result = NIL;
	List	   *indexoids = RelationGetIndexList(rel);
	ListCell   *lc;

	foreach(lc, indexoids)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;
		IndexDesc  *desc;

		if (idx->rd_rel->relam == BTREE_AM_OID && form->indisvalid &&
			form->indislive && heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL))
		{
			desc = palloc(sizeof(IndexDesc));
			desc->oid = RelationGetRelid(idx);
			desc->primary = (desc->oid == pk_index);
			desc->nkeyatts = form->indnkeyatts;
			desc->attnums = palloc(sizeof(AttrNumber) * desc->nkeyatts);
			desc->opfamilies = palloc(sizeof(Oid) * desc->nkeyatts);
			desc->opcintypes = palloc(sizeof(Oid) * desc->nkeyatts);
			desc->collations = palloc(sizeof(Oid) * desc->nkeyatts);
			for (int i = 0; i < desc->nkeyatts; i++)
			{
				desc->attnums[i] = form->indkey.values[i];
				desc->opfamilies[i] = idx->rd_opfamily[i];
				desc->opcintypes[i] = idx->rd_opcintype[i];
				desc->collations[i] = idx->rd_indcollation[i];
			}
			result = lappend(result, desc);
		}
		index_close(idx, AccessShareLock);
	}
	return result;
}

/*
 * Check one relation range-table entry against rule 1 and describe it as a
 * source.  Returns NULL (after reject) when it cannot be one.
 */
static DeltaSource *
make_source(Analysis *a, RangeTblEntry *rte, int rtindex, List **indexes)
{
	DeltaSource *src = palloc0(sizeof(DeltaSource));
	Relation	rel;
	const char *kind = NULL;
	const char *kind_hint = NULL;
	char	   *label;

	src->rtindex = rtindex;
	src->relid = rte->relid;
	src->relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(rte->relid)),
											  get_rel_name(rte->relid));
	src->alias = pstrdup(rte->eref->aliasname);
	src->cache_size = -1;
	src->cache_enabled = a->plan->options.cache_enabled;
	label = source_name(src);
	*indexes = NIL;

	switch (rte->relkind)
	{
		case RELKIND_RELATION:
		case RELKIND_PARTITIONED_TABLE:
			break;
		case RELKIND_VIEW:
			kind = "a view";
			kind_hint = "Use the view's underlying tables in the query.";
			break;
		case RELKIND_MATVIEW:
			kind = "a materialized view";
			kind_hint = "Use the tables it is computed from in the query.";
			break;
		case RELKIND_FOREIGN_TABLE:
			kind = "a foreign table";
			kind_hint = "Its changes are not in this server's WAL; copy the data into a local table.";
			break;
		default:
			kind = "not a table";
			kind_hint = "Use ordinary or partitioned tables.";
			break;
	}
	if (kind)
	{
		reject(a, ERRCODE_WRONG_OBJECT_TYPE,
			   psprintf("delta view rule 1: source %s is %s", label, kind),
			   pstrdup("Every source must be an ordinary or partitioned table whose changes are WAL-logged."),
			   pstrdup(kind_hint));
		return NULL;
	}

	switch (get_rel_persistence(rte->relid))
	{
		case RELPERSISTENCE_UNLOGGED:
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: source %s is unlogged", label),
				   pstrdup("Changes of unlogged tables are not WAL-logged, so they cannot be decoded."),
				   psprintf("Make it logged: ALTER TABLE %s SET LOGGED;", src->relname));
			return NULL;
		case RELPERSISTENCE_TEMP:
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: source %s is a temporary table", label),
				   pstrdup("Changes of temporary tables are not WAL-logged, so they cannot be decoded."),
				   pstrdup("Use a permanent table."));
			return NULL;
		default:
			break;
	}

	if (check_enable_rls(rte->relid, InvalidOid, true) == RLS_ENABLED)
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: row-level security applies to source %s", label),
			   pstrdup("Lookups read the sources directly, so row security policies could not be applied to them."),
			   pstrdup("Create the view as a role that bypasses row-level security on the table (its owner, or a role with BYPASSRLS)."));
		return NULL;
	}

	if (get_rel_namespace(rte->relid) == get_namespace_oid(DJ_SCHEMA, true))
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s belongs to delta_join itself", label),
			   pstrdup("The extension's catalog and the query views of other delta views cannot be sources."),
			   pstrdup("Read the tables they are made of, or a view's target."));
		return NULL;
	}

	if (rte->relkind == RELKIND_RELATION && has_subclass(rte->relid) &&
		find_inheritance_children(rte->relid, AccessShareLock) != NIL)
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s has inheritance children", label),
			   pstrdup("Rows of the children are read with the parent, but their changes are changes of other tables."),
			   pstrdup("Use a partitioned table, or read the parent with ONLY after removing the children."));
		return NULL;
	}


	rel = table_open(rte->relid, AccessShareLock);
	src->partitioned = (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE);
	src->natts = RelationGetNumberOfAttributes(rel);
	src->pk_index = RelationGetPrimaryKeyIndex(rel);
	if (!OidIsValid(src->pk_index))
	{
		reject(a, ERRCODE_INVALID_TABLE_DEFINITION,
			   psprintf("delta view rule 1: source %s has no primary key", label),
			   pstrdup("Changed rows are found again by their primary key."),
			   psprintf("Add one: ALTER TABLE %s ADD PRIMARY KEY (...);", src->relname));
		table_close(rel, AccessShareLock);
		return NULL;
	}

	*indexes = read_indexes(rel, src->pk_index);
	{
		ListCell   *lc;

		foreach(lc, *indexes)
		{
			IndexDesc  *desc = lfirst(lc);

			if (desc->primary)
			{
				src->pk_natts = desc->nkeyatts;
				src->pk_attnums = desc->attnums;
			}
		}
	}
	if (src->pk_attnums == NULL)
		elog(ERROR, "primary key %u of \"%s\" is not a btree index", src->pk_index, src->relname);

	table_close(rel, AccessShareLock);
	return src;
}

/* Partition key columns of a partitioned source (rejects expressions). */
static int
partition_key(Analysis *a, DeltaSource *src, AttrNumber **attnums)
{
	Relation	rel = table_open(src->relid, AccessShareLock);
	PartitionKey key = RelationGetPartitionKey(rel);
	int			n = key->partnatts;

	*attnums = palloc(sizeof(AttrNumber) * n);
	for (int i = 0; i < n; i++)
	{
		(*attnums)[i] = key->partattrs[i];
		if (key->partattrs[i] == 0)
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: partitioned %s is partitioned by an expression",
							source_label(src)),
				   pstrdup("The join or group key must include the partition key, so it must be made of columns."),
				   NULL);
	}
	table_close(rel, AccessShareLock);
	return n;
}

/* ----------------------------------------------------------------
 *		Expressions: join alias vars, volatility, classes of equal columns
 * ----------------------------------------------------------------
 */

/* ----------------------------------------------------------------
 *		Rule 4: deterministic only
 * ----------------------------------------------------------------
 */

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
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: %s, which is volatile", what),
				   pstrdup("A lookup must reproduce the same result each time a row is recomputed."),
				   pstrdup("Store the value in a source column instead, for example through a column default, and select that column."));
			break;
		case UNFIT_USER_STABLE:
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: %s, a user-defined stable function", what),
				   pstrdup("A stable function may read tables that are not sources, so recomputing a row later might not reproduce its result."),
				   psprintf("If its result depends only on its arguments, declare it IMMUTABLE (ALTER FUNCTION %s IMMUTABLE); otherwise store the value in a source column.",
							format_procedure(funcid)));
			break;
		case UNFIT_UNPINNED:
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
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
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
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
			reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 4: system column %s is not supported", var_label(walk, var)),
				   pstrdup("System columns (ctid, xmin, tableoid, ...) change when a row is rewritten or moved, without a change of its values."),
				   pstrdup("Select ordinary columns."));
		else if (var->varattno == 0)
			reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
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
		reject(walk->a, ERRCODE_FEATURE_NOT_SUPPORTED,
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
static void
check_determinism(Analysis *a, Query *query)
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
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
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

	check_determinism(&a, query);
}

/*
 * The column id of a user column of a source.  Only user columns have ids:
 * the analysis stops before using classes when a query reads another kind
 * of column (Analysis.bad_columns), so anything else is a bug.
 */
static int
column_id(Analysis *a, int source, AttrNumber attno)
{
	if (source < 0 || source >= list_length(a->plan->sources) ||
		attno < 1 || attno > SOURCE(a, source)->natts)
		elog(ERROR, "column %d of source %d has no column id", attno, source);
	return a->col_offset[source] + attno - 1;
}

static int
class_of(Analysis *a, int id)
{
	while (a->class_parent[id] != id)
		id = a->class_parent[id] = a->class_parent[a->class_parent[id]];
	return id;
}

static void
class_merge(Analysis *a, int id1, int id2)
{
	a->class_parent[class_of(a, id1)] = class_of(a, id2);
}

/* The source and column of a plain Var of this query level, or false. */
static bool
var_source(Analysis *a, Node *node, int *source, AttrNumber *attno)
{
	Var		   *var;

	if (!IsA(node, Var))
		return false;
	var = (Var *) node;
	if (var->varlevelsup != 0 || var->varattno <= 0 || a->rt_source[var->varno] < 0)
		return false;
	*source = a->rt_source[var->varno];
	*attno = var->varattno;
	return true;
}

/* The one source a node's Vars belong to, -1 for none, -2 for several. */
static int
single_source(Analysis *a, Node *node)
{
	Bitmapset  *varnos = pull_varnos(NULL, node);
	int			rtindex;

	if (bms_is_empty(varnos))
		return -1;
	if (bms_membership(varnos) != BMS_SINGLETON)
		return -2;
	rtindex = bms_singleton_member(varnos);
	return a->rt_source[rtindex];
}

/* Strip binary-compatible relabelling, which does not change the value. */
static Node *
strip_relabel(Node *node)
{
	while (node && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	return node;
}

/*
 * Split the quals into join conditions and filters.  A qual is a join
 * condition when it is a btree equality between plain columns of two
 * different sources; an equality between two sources where either side is
 * computed breaks rule 3.
 */
static void
classify_quals(Analysis *a, List *quals)
{
	ListCell   *lc;

	foreach(lc, quals)
	{
		Node	   *qual = lfirst(lc);
		OpExpr	   *op;
		Node	   *l,
				   *r;
		int			ls,
					rs;
		AttrNumber	la = InvalidAttrNumber,
					ra = InvalidAttrNumber;
		bool		lplain,
					rplain;

		if (!IsA(qual, OpExpr) || list_length(((OpExpr *) qual)->args) != 2)
		{
			a->filters = lappend(a->filters, qual);
			continue;
		}
		op = (OpExpr *) qual;
		l = linitial(op->args);
		r = lsecond(op->args);
		ls = single_source(a, l);
		rs = single_source(a, r);
		if (ls < 0 || rs < 0 || ls == rs ||
			!op_mergejoinable(op->opno, exprType(l)))
		{
			a->filters = lappend(a->filters, qual);
			continue;
		}

		lplain = var_source(a, strip_relabel(l), &ls, &la);
		rplain = var_source(a, strip_relabel(r), &rs, &ra);
		if (lplain && rplain)
		{
			DeltaJoinCond *cond = palloc(sizeof(DeltaJoinCond));

			cond->left = ls;
			cond->left_attno = la;
			cond->right = rs;
			cond->right_attno = ra;
			cond->opno = op->opno;
			cond->collation = op->inputcollid;
			a->plan->conds = lappend(a->plan->conds, cond);
			class_merge(a, column_id(a, ls, la), column_id(a, rs, ra));
		}
		else
		{
			List	   *vars = pull_var_clause(lplain ? r : l, 0);
			Var		   *var = linitial(vars);
			DeltaSource *src = SOURCE(a, a->rt_source[var->varno]);

			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 3: join key %s is computed in a join condition between %s and %s",
							column_label(src, var->varattno),
							source_label(SOURCE(a, ls)), source_label(SOURCE(a, rs))),
				   pstrdup("Join keys must reach the join unchanged, so that a lookup through an index finds the same rows."),
				   pstrdup("Compare plain columns (store the computed value in a column of the source, with an index on it)."));
		}
	}
}

/* Conditions under the FROM list, checking each join is an inner join. */
static void
collect_quals(Analysis *a, Query *query, Node *jtnode, List **quals)
{
	Node	   *q = NULL;

	if (jtnode == NULL)
		return;
	if (IsA(jtnode, FromExpr))
	{
		FromExpr   *f = (FromExpr *) jtnode;
		ListCell   *lc;

		foreach(lc, f->fromlist)
			collect_quals(a, query, lfirst(lc), quals);
		q = f->quals;
	}
	else if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;

		if (j->jointype != JOIN_INNER)
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("delta view rule 5: outer joins are not supported"),
				   pstrdup("Delta views are maintained for inner joins."),
				   pstrdup("Use an inner join."));
		collect_quals(a, query, j->larg, quals);
		collect_quals(a, query, j->rarg, quals);
		q = j->quals;
	}
	if (q != NULL)
	{
		q = flatten_join_alias_vars(query, q);
		*quals = list_concat(*quals, make_ands_implicit((Expr *) q));
	}
}

/* ----------------------------------------------------------------
 *		Rule 2: index prefixes and lookups
 * ----------------------------------------------------------------
 */

static bool
collations_agree(Oid c1, Oid c2)
{
	if (c1 == c2)
		return true;
	return (!OidIsValid(c1) || get_collation_isdeterministic(c1)) &&
		(!OidIsValid(c2) || get_collation_isdeterministic(c2));
}

/*
 * The index of source src whose leading key columns the most bindable
 * columns cover (primary key on ties), as a lookup; NULL if none covers even
 * the first column.
 */
static DeltaLookup *
choose_lookup(Analysis *a, int source, List *bindable)
{
	List	   *indexes = list_nth(a->source_indexes, source);
	DeltaLookup *best = NULL;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		IndexDesc  *desc = lfirst(lc);
		DeltaLookupKey *keys = palloc(sizeof(DeltaLookupKey) * desc->nkeyatts);
		int			nkeys = 0;

		for (int i = 0; i < desc->nkeyatts; i++)
		{
			ListCell   *lc2;
			bool		bound = false;

			foreach(lc2, bindable)
			{
				BindableColumn *col = lfirst(lc2);
				Oid			member;

				if (col->attno != desc->attnums[i] ||
					!op_in_opfamily(col->opno, desc->opfamilies[i]) ||
					!collations_agree(col->collation, desc->collations[i]))
					continue;
				member = get_opfamily_member(desc->opfamilies[i], desc->opcintypes[i],
											 col->righttype, BTEqualStrategyNumber);
				if (!OidIsValid(member))
					continue;
				keys[nkeys].from_source = col->from_source;
				keys[nkeys].from_attno = col->from_attno;
				keys[nkeys].from_type = col->righttype;
				keys[nkeys].index_attno = i + 1;
				keys[nkeys].proc = get_opcode(member);
				keys[nkeys].collation = desc->collations[i];
				nkeys++;
				bound = true;
				break;
			}
			if (!bound)
				break;
		}

		if (nkeys > 0 &&
			(best == NULL || nkeys > best->nkeys ||
			 (nkeys == best->nkeys && desc->primary)))
		{
			best = palloc(sizeof(DeltaLookup));
			best->source = source;
			best->index = desc->oid;
			best->nkeys = nkeys;
			best->keys = keys;
		}
	}
	return best;
}

/* Columns of `source` that conditions tie to sources in `bound`. */
static List *
bindable_from_conds(Analysis *a, int source, Bitmapset *bound)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, a->plan->conds)
	{
		DeltaJoinCond *cond = lfirst(lc);
		BindableColumn *col;
		Oid			lefttype;

		col = palloc(sizeof(BindableColumn));
		if (cond->left == source && bms_is_member(cond->right, bound))
		{
			col->attno = cond->left_attno;
			col->opno = cond->opno;
			col->from_source = cond->right;
			col->from_attno = cond->right_attno;
		}
		else if (cond->right == source && bms_is_member(cond->left, bound))
		{
			col->attno = cond->right_attno;
			col->opno = get_commutator(cond->opno);
			col->from_source = cond->left;
			col->from_attno = cond->left_attno;
			if (!OidIsValid(col->opno))
				continue;
		}
		else
			continue;
		op_input_types(col->opno, &lefttype, &col->righttype);
		col->collation = cond->collation;
		result = lappend(result, col);
	}
	return result;
}

/* "CREATE INDEX ON orders (merchant_id, item_id);" for a hint */
static char *
create_index_hint(DeltaSource *src, List *bindable)
{
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(list_length(bindable), 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, bindable)
	{
		BindableColumn *col = lfirst(lc);
		bool		dup = false;

		for (int i = 0; i < n; i++)
			dup |= (attnums[i] == col->attno);
		if (!dup)
			attnums[n++] = col->attno;
	}
	return psprintf("Create an index whose leading columns the join binds: CREATE INDEX ON %s %s;",
					src->relname, column_list(src->relid, n, attnums));
}

/* Every partition key column of a partitioned source must be bindable. */
static void
check_partition_key(Analysis *a, int source, List *bindable, const char *what)
{
	DeltaSource *src = SOURCE(a, source);
	AttrNumber *partattrs;
	int			npart;

	if (!src->partitioned)
		return;
	npart = partition_key(a, src, &partattrs);
	for (int i = 0; i < npart; i++)
	{
		ListCell   *lc;
		bool		found = false;

		foreach(lc, bindable)
			found |= (((BindableColumn *) lfirst(lc))->attno == partattrs[i]);
		if (!found && partattrs[i] != 0)
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: %s of partitioned %s does not include partition key column %s",
							what, source_label(src), column_label(src, partattrs[i])),
				   pstrdup("A lookup into a partitioned source must name the partition it reads."),
				   psprintf("Add %s to the %s.", column_label(src, partattrs[i]), what));
	}
}

/*
 * Rule 2, for every pair of joined sources: each side's equality columns
 * must cover the leading column(s) of a btree index.  All sources must be
 * connected by such pairs.
 */
static void
check_join_edges(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);
	int		   *component = palloc(sizeof(int) * nsources);

	for (int i = 0; i < nsources; i++)
		component[i] = i;

	for (int s = 0; s < nsources; s++)
	{
		for (int t = 0; t < nsources; t++)
		{
			List	   *bindable;
			DeltaLookup *lookup;
			DeltaSource *src = SOURCE(a, t);

			if (s == t)
				continue;
			bindable = bindable_from_conds(a, t, bms_make_singleton(s));
			if (bindable == NIL)
				continue;

			/* s and t are joined: merge their components */
			{
				int			from = component[t],
							to = component[s];

				for (int i = 0; i < nsources; i++)
					if (component[i] == from)
						component[i] = to;
			}

			lookup = choose_lookup(a, t, bindable);
			if (lookup == NULL)
			{
				StringInfoData cols;
				ListCell   *lc;

				initStringInfo(&cols);
				foreach(lc, bindable)
					appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
									 column_label(src, ((BindableColumn *) lfirst(lc))->attno));
				reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 2: join key (%s) of %s does not cover the leading column of any btree index",
								cols.data, source_label(src)),
					   psprintf("When %s changes, the matching rows of %s are looked up through an index whose leading columns the join binds.",
								source_label(SOURCE(a, s)), source_label(src)),
					   create_index_hint(src, bindable));
				continue;
			}
			check_partition_key(a, t, bindable, "join key");
			if (!OidIsValid(src->lookup_index))
			{
				src->lookup_index = lookup->index;
				src->lookup_nkeys = lookup->nkeys;
			}
		}
	}

	for (int t = 1; t < nsources; t++)
	{
		if (component[t] != component[0])
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: %s is not joined to %s by an equality of columns",
							source_label(SOURCE(a, t)), source_label(SOURCE(a, 0))),
				   pstrdup("Every join needs at least one equality condition between plain columns of its two sides."),
				   pstrdup("Add an equality condition on indexed columns."));
	}
}

/* Plan, for each source, the order and indexes of lookups on its change. */
static void
plan_walks(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);

	for (int driver = 0; driver < nsources; driver++)
	{
		DeltaWalk  *walk = palloc0(sizeof(DeltaWalk));
		Bitmapset  *bound = bms_make_singleton(driver);

		walk->driver = driver;
		while (bms_num_members(bound) < nsources)
		{
			DeltaLookup *best = NULL;

			for (int t = 0; t < nsources; t++)
			{
				DeltaLookup *lookup;

				if (bms_is_member(t, bound))
					continue;
				lookup = choose_lookup(a, t, bindable_from_conds(a, t, bound));
				if (lookup && (best == NULL || lookup->nkeys > best->nkeys))
					best = lookup;
			}
			if (best == NULL)
				elog(ERROR, "no lookup order for a join that passed rule 2");
			walk->lookups = lappend(walk->lookups, best);
			bound = bms_add_member(bound, best->source);
		}
		a->plan->walks = lappend(a->plan->walks, walk);
	}
}

/* ----------------------------------------------------------------
 *		Rules 6 and 8: the result's unique key
 * ----------------------------------------------------------------
 */

/* Output column (0-based) that is a plain Var of column class `cls`, or -1. */
static int
output_of_class(Analysis *a, int cls)
{
	int			i = 0;
	ListCell   *lc;

	foreach(lc, a->plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		int			s;
		AttrNumber	att;

		if (tle->resjunk)
			continue;
		if (var_source(a, (Node *) tle->expr, &s, &att) &&
			class_of(a, column_id(a, s, att)) == cls)
			return i;
		i++;
	}
	return -1;
}

static int
compare_int(const void *a, const void *b)
{
	return *(const int *) a - *(const int *) b;
}

/*
 * Set the plan's key columns from key column ids (classes); reject (rule 8)
 * when one is not in the select list.
 */
static void
map_key_to_output(Analysis *a, List *key_ids)
{
	DeltaPlan  *plan = a->plan;
	StringInfoData missing;
	ListCell   *lc;
	int			n = 0;

	initStringInfo(&missing);
	plan->key_columns = palloc(sizeof(int) * Max(list_length(key_ids), 1));
	foreach(lc, key_ids)
	{
		int			id = lfirst_int(lc);
		int			col = output_of_class(a, class_of(a, id));
		bool		dup = false;

		if (col < 0)
		{
			for (int s = list_length(plan->sources) - 1; s >= 0; s--)
			{
				if (id >= a->col_offset[s])
				{
					appendStringInfo(&missing, "%s%s", missing.len > 0 ? ", " : "",
									 column_label(SOURCE(a, s), id - a->col_offset[s] + 1));
					break;
				}
			}
			continue;
		}
		for (int i = 0; i < n; i++)
			dup |= (plan->key_columns[i] == col);
		if (!dup)
			plan->key_columns[n++] = col;
	}
	plan->key_ncolumns = n;
	qsort(plan->key_columns, n, sizeof(int), compare_int);

	if (missing.len > 0)
		reject(a, ERRCODE_INVALID_OBJECT_DEFINITION,
			   psprintf("delta view rule 8: the select list lacks %s, part of the result's unique key",
						missing.data),
			   pstrdup("The target's primary key is the result's unique key, so the query must output it."),
			   psprintf("Add %s to the select list.", missing.data));
}

/*
 * The result's unique key of a join: the primary keys of all sources, less
 * those of sources whose whole primary key the join ties to columns of the
 * sources that remain (their row follows from those).
 */
static void
derive_join_key(Analysis *a)
{
	int			nsources = list_length(a->plan->sources);
	bool	   *in_key = palloc(sizeof(bool) * nsources);
	int			remaining = nsources;
	List	   *key_ids = NIL;

	for (int s = 0; s < nsources; s++)
		in_key[s] = true;

	for (int s = nsources - 1; s >= 0 && remaining > 1; s--)
	{
		DeltaSource *src = SOURCE(a, s);
		bool		covered = true;

		for (int k = 0; k < src->pk_natts && covered; k++)
		{
			int			cls = class_of(a, column_id(a, s, src->pk_attnums[k]));
			bool		found = false;

			for (int t = 0; t < nsources && !found; t++)
			{
				DeltaSource *other = SOURCE(a, t);
				int			natts = other->natts;

				if (t == s || !in_key[t])
					continue;
				for (AttrNumber att = 1; att <= natts && !found; att++)
					found = (class_of(a, column_id(a, t, att)) == cls);
			}
			covered = found;
		}
		if (covered)
		{
			in_key[s] = false;
			remaining--;
		}
	}

	for (int s = 0; s < nsources; s++)
	{
		DeltaSource *src = SOURCE(a, s);

		if (!in_key[s])
			continue;
		for (int k = 0; k < src->pk_natts; k++)
			key_ids = lappend_int(key_ids, column_id(a, s, src->pk_attnums[k]));
	}
	map_key_to_output(a, key_ids);
}

static void
reject_filter(Analysis *a, const char *column, const char *clause)
{
	reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 6: %s condition on %s, which is not part of the result's unique key, could leave an earlier result row behind",
					clause, column),
		   pstrdup("A delta view writes only upserts: when a row stops passing the filter, the row written for it earlier stays in the target."),
		   pstrdup("Select the condition as a logical-delete column instead, e.g. CASE WHEN <condition> THEN 0 ELSE 1 END AS is_delete, "
				   "or accept residual rows with options => '{\"ignore_non_unique_key_filter\": true}'."));
}

/* Rule 6 for the WHERE/ON filters of a join view. */
static void
check_join_filters(Analysis *a)
{
	ListCell   *lc;

	foreach(lc, a->filters)
	{
		List	   *vars = pull_var_clause(lfirst(lc), 0);
		ListCell   *lc2;

		foreach(lc2, vars)
		{
			Var		   *var = lfirst(lc2);
			int			s = a->rt_source[var->varno];
			int			col = output_of_class(a, class_of(a, column_id(a, s, var->varattno)));
			bool		in_key = false;

			for (int k = 0; k < a->plan->key_ncolumns; k++)
				in_key |= (a->plan->key_columns[k] == col);
			if (col < 0 || !in_key)
			{
				a->plan->has_filter = true;
				if (!a->plan->options.ignore_non_unique_key_filter)
					reject_filter(a, column_label(SOURCE(a, s), var->varattno), "WHERE");
				return;
			}
		}
	}
}

/* ----------------------------------------------------------------
 *		Rule 7: aggregates
 * ----------------------------------------------------------------
 */

/* Does a decoded DELETE of rel carry column att (of rel) in its old row? */
static bool
relation_logs_column(Relation rel, AttrNumber att)
{
	if (rel->rd_rel->relreplident == REPLICA_IDENTITY_FULL)
		return true;
	return bms_is_member(att - FirstLowInvalidHeapAttributeNumber,
						 RelationGetIndexAttrBitmap(rel, INDEX_ATTR_BITMAP_IDENTITY_KEY));
}

/*
 * Is column att of the source in the old row a decoded DELETE carries: its
 * replica identity (the primary key by default, another unique index, all
 * columns with REPLICA IDENTITY FULL, none with NOTHING)?  For a
 * partitioned source, changes are decoded as changes of its leaf
 * partitions, each with its own replica identity: every leaf must log it.
 * *culprit is set to the relation that does not.
 */
static bool
logged_in_old_row(DeltaSource *src, AttrNumber att, Oid *culprit)
{
	List	   *relids = list_make1_oid(src->relid);
	char	   *attname = get_attname(src->relid, att, false);
	ListCell   *lc;

	if (src->partitioned)
		relids = find_all_inheritors(src->relid, AccessShareLock, NULL);
	foreach(lc, relids)
	{
		Relation	rel = table_open(lfirst_oid(lc), AccessShareLock);
		bool		logged = true;

		if (rel->rd_rel->relkind == RELKIND_RELATION)
			logged = relation_logs_column(rel, get_attnum(lfirst_oid(lc), attname));
		table_close(rel, AccessShareLock);
		if (!logged)
		{
			*culprit = lfirst_oid(lc);
			return false;
		}
	}
	return true;
}

/*
 * Does a HAVING condition read only group key columns (no aggregate)?  Then
 * it holds for a group forever or never, and cannot leave a row behind.
 */
static bool
condition_on_group_key(Node *having, DeltaSource *src)
{
	ListCell   *lc;

	if (contain_agg_clause(having))
		return false;
	foreach(lc, pull_var_clause(having, 0))
	{
		Var		   *var = lfirst(lc);
		bool		in_key = false;

		for (int k = 0; k < src->key_natts; k++)
			in_key |= (src->key_attnums[k] == var->varattno);
		if (!in_key)
			return false;
	}
	return true;
}

static void
analyze_aggregate(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	Query	   *query = plan->query;
	DeltaSource *src;
	List	   *bindable = NIL;
	List	   *key_ids = NIL;
	DeltaLookup *lookup;
	ListCell   *lc;
	int			n = 0;

	if (list_length(plan->sources) != 1)
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 7: aggregates over a join are not supported"),
			   pstrdup("An aggregate view groups the rows of one table."),
			   pstrdup("Aggregate one table, or keep the join as a view of its own."));
		return;
	}
	src = SOURCE(a, 0);
	if (query->groupClause == NIL)
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 7: an aggregate view needs GROUP BY"),
			   pstrdup("Each group is recomputed through an index on its key; an aggregate over the whole table has no key."),
			   psprintf("Group by the leading column(s) of an index of %s.", src->relname));
		return;
	}

	src->key_attnums = palloc(sizeof(AttrNumber) * list_length(query->groupClause));
	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		TargetEntry *tle = get_sortgroupclause_tle(sgc, query->targetList);
		int			s;
		AttrNumber	att;
		BindableColumn *col;
		Oid			lefttype;
		Oid			culprit;

		if (!var_source(a, (Node *) tle->expr, &s, &att))
		{
			reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   pstrdup("delta view rule 7: group key expressions must be plain columns"),
				   pstrdup("Groups are recomputed through an index on the group key columns."),
				   pstrdup("Group by plain columns of the source."));
			continue;
		}
		src->key_attnums[n++] = att;
		key_ids = lappend_int(key_ids, column_id(a, s, att));

		col = palloc(sizeof(BindableColumn));
		col->attno = att;
		col->opno = sgc->eqop;
		op_input_types(sgc->eqop, &lefttype, &col->righttype);
		col->collation = exprCollation((Node *) tle->expr);
		col->from_source = -1;
		col->from_attno = n;	/* the n-th group key value */
		bindable = lappend(bindable, col);

		if (!logged_in_old_row(src, att, &culprit))
		{
			char	   *culprit_name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(culprit)),
																  get_rel_name(culprit));

			if (culprit == src->relid)
				reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 7: group key column %s is not part of the replica identity of %s",
								column_label(src, att), source_label(src)),
					   pstrdup("A decoded DELETE, or an UPDATE that moves a row to another group, carries only the replica identity of the old row (by default its primary key), and the old group must be known."),
					   psprintf("Log whole old rows: ALTER TABLE %s REPLICA IDENTITY FULL;", src->relname));
			else
				reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
					   psprintf("delta view rule 7: group key column %s is not part of the replica identity of partition %s of %s",
								column_label(src, att), culprit_name, source_label(src)),
					   pstrdup("Changes of a partitioned table are decoded as changes of its partitions, each with its own replica identity: every partition must log the group key of its old rows."),
					   psprintf("Log whole old rows in each partition: ALTER TABLE %s REPLICA IDENTITY FULL; (setting it on the partitioned table does not set it on its partitions).",
								culprit_name));
		}
	}
	src->key_natts = n;
	if (n < list_length(query->groupClause))
		return;

	lookup = choose_lookup(a, 0, bindable);
	if (lookup == NULL)
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 7: group key %s of %s does not cover the leading column of any btree index",
						column_list(src->relid, n, src->key_attnums), source_label(src)),
			   pstrdup("A changed group is recomputed from the rows an index-prefix scan on the group key finds."),
			   psprintf("Create an index on the group key: CREATE INDEX ON %s %s;",
						src->relname, column_list(src->relid, n, src->key_attnums)));
	else
	{
		src->lookup_index = lookup->index;
		src->lookup_nkeys = lookup->nkeys;
		plan->group_index = lookup->index;
	}
	check_partition_key(a, 0, bindable, "group key");

	map_key_to_output(a, key_ids);

	plan->has_filter = (query->havingQual != NULL &&
						!condition_on_group_key(query->havingQual, src));
	if (plan->has_filter && !plan->options.ignore_non_unique_key_filter)
		reject_filter(a, "an aggregate", "HAVING");
}

/* ----------------------------------------------------------------
 *		Output columns
 * ----------------------------------------------------------------
 */

static void
analyze_output(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	int			n = 0;
	ListCell   *lc;

	plan->colnames = palloc(sizeof(char *) * list_length(plan->query->targetList));
	plan->coltypes = palloc(sizeof(Oid) * list_length(plan->query->targetList));
	plan->coltypmods = palloc(sizeof(int32) * list_length(plan->query->targetList));
	plan->colcollations = palloc(sizeof(Oid) * list_length(plan->query->targetList));

	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		if (tle->resname == NULL || strcmp(tle->resname, "?column?") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
					 errmsg("output column %d of the query has no name", n + 1),
					 errhint("Give it a name with AS; it becomes a column of the target.")));
		for (int i = 0; i < n; i++)
			if (strcmp(plan->colnames[i], tle->resname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("output column name \"%s\" is used more than once", tle->resname),
						 errhint("Give each output column its own name with AS; they become the columns of the target.")));
		if (exprType((Node *) tle->expr) == UNKNOWNOID)
			elog(ERROR, "output column \"%s\" has type unknown", tle->resname);
		plan->colnames[n] = pstrdup(tle->resname);
		plan->coltypes[n] = exprType((Node *) tle->expr);
		plan->coltypmods[n] = exprTypmod((Node *) tle->expr);
		plan->colcollations[n] = exprCollation((Node *) tle->expr);
		n++;
	}
	plan->ncolumns = n;
}

/* ----------------------------------------------------------------
 *		Driver
 * ----------------------------------------------------------------
 */

static DeltaPlan *
analyze_query(Analysis *a, Query *query, List *hints, const DeltaOptions *options)
{
	DeltaPlan  *plan = palloc0(sizeof(DeltaPlan));
	List	   *quals = NIL;
	int			nrtes;
	int			rtindex;
	int			ncolumns = 0;
	bool		rte_rejected = false;
	ListCell   *lc;

	/* the analysis flattens join aliases in place: work on a copy */
	query = copyObject(query);
	a->plan = plan;
	plan->options = *options;
	plan->query = query;

	check_query_shape(a, query);
	check_determinism(a, query);

	/* Sources (rule 1) */
	nrtes = list_length(query->rtable);
	a->rt_source = palloc(sizeof(int) * (nrtes + 1));
	rtindex = 0;
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		a->rt_source[++rtindex] = -1;
		if (rte->lateral)
			reject_shape(a, "LATERAL is");
		rte_rejected |= (rte->rtekind != RTE_RELATION && rte->rtekind != RTE_JOIN);
		switch (rte->rtekind)
		{
			case RTE_RELATION:
				{
					List	   *indexes;
					DeltaSource *src = make_source(a, rte, rtindex, &indexes);

					if (src == NULL)
					{
						rte_rejected = true;
						break;
					}
					a->rt_source[rtindex] = list_length(plan->sources);
					plan->sources = lappend(plan->sources, src);
					a->source_indexes = lappend(a->source_indexes, indexes);
				}
				break;
			case RTE_JOIN:
				break;			/* checked with the join tree */
			case RTE_SUBQUERY:
				reject_shape(a, "subqueries in FROM are");
				break;
			case RTE_FUNCTION:
			case RTE_TABLEFUNC:
				reject(a, ERRCODE_WRONG_OBJECT_TYPE,
					   pstrdup("delta view rule 1: functions in FROM are not supported as sources"),
					   pstrdup("Every source must be an ordinary or partitioned table whose changes are WAL-logged."),
					   pstrdup("Store the function's result in a table."));
				break;
			case RTE_VALUES:
				reject_shape(a, "VALUES lists are");
				break;
			default:
				reject_shape(a, "this kind of FROM item is");
				break;
		}
	}

	/*
	 * If some FROM item was rejected, or a column outside the sources' user
	 * columns is read, the rest cannot be checked safely.
	 */
	if (rte_rejected || a->bad_columns)
		return plan;
	if (plan->sources == NIL)
	{
		reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 1: the query reads no table"),
			   NULL, pstrdup("Select from one or more tables."));
		return plan;
	}

	apply_hints(a, hints);

	/* column classes: every column of every source is a column id */
	a->col_offset = palloc(sizeof(int) * list_length(plan->sources));
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		a->col_offset[foreach_current_index(lc)] = ncolumns;
		ncolumns += src->natts;
	}
	a->ncolumn_ids = ncolumns;
	a->class_parent = palloc(sizeof(int) * Max(ncolumns, 1));
	for (int i = 0; i < ncolumns; i++)
		a->class_parent[i] = i;

	/* expressions, with join alias vars replaced by the columns they stand for */
	query->targetList = (List *) flatten_join_alias_vars(query, (Node *) query->targetList);
	if (query->havingQual)
		query->havingQual = flatten_join_alias_vars(query, query->havingQual);
	collect_quals(a, query, (Node *) query->jointree, &quals);
	plan->quals = quals;

	analyze_output(a);

	if (query->hasAggs || query->groupClause != NIL)
	{
		plan->kind = DJ_KIND_AGGREGATE;
		analyze_aggregate(a);
		return plan;
	}

	plan->kind = DJ_KIND_JOIN;
	classify_quals(a, quals);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		src->key_natts = src->pk_natts;
		src->key_attnums = src->pk_attnums;
	}
	if (list_length(plan->sources) > 1)
	{
		check_join_edges(a);
		if (a->failures == NIL)
			plan_walks(a);
		else
			return plan;
	}
	else
		plan->walks = list_make1(palloc0(sizeof(DeltaWalk)));

	derive_join_key(a);
	check_join_filters(a);
	return plan;
}

/*
 * Analyze a view's query; raise the first failed rule as an error.  hints
 * are the table hints (DeltaHint *) matched to range-table entries.
 */
DeltaPlan *
analyze_plan(Query *query, List *hints, const DeltaOptions *options)
{
	Analysis	a = {0};

	return analyze_query(&a, query, hints, options);
}

/* ----------------------------------------------------------------
 *		explain
 * ----------------------------------------------------------------
 */

static const char *
index_label(Oid index)
{
	return quote_identifier(get_rel_name(index));
}

/* "(merchant_id, item_id)": the bound leading columns of a lookup */
static char *
lookup_columns(DeltaSource *src, Oid index, int nkeys)
{
	Relation	idx = index_open(index, AccessShareLock);
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * nkeys);
	char	   *result;

	for (int i = 0; i < nkeys; i++)
		attnums[i] = idx->rd_index->indkey.values[i];
	index_close(idx, AccessShareLock);
	result = column_list(src->relid, nkeys, attnums);
	return result;
}

static char *
source_title(DeltaSource *src)
{
	if (strcmp(get_rel_name(src->relid), src->alias) == 0)
		return src->relname;
	return psprintf("%s %s", src->relname, quote_identifier(src->alias));
}

static char *
key_list(DeltaPlan *plan)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < plan->key_ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[plan->key_columns[i]]));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * The delta plan of a query as lines of text, or the list of rules it
 * fails.  Errors that are not rule failures (syntax, unknown tables) are
 * raised as usual.
 */
List *
explain_plan(Query *query, List *hints, const DeltaOptions *options)
{
	Analysis	a = {0};
	DeltaPlan  *plan;
	List	   *lines = NIL;
	ListCell   *lc;

	a.collect = true;
	plan = analyze_query(&a, query, hints, options);

	if (a.failures != NIL)
	{
		lines = lappend(lines, psprintf("Not eligible for a delta view (strategy %s):",
										dj_strategy_name(options->strategy)));
		foreach(lc, a.failures)
		{
			Failure    *f = lfirst(lc);

			lines = lappend(lines, psprintf("  %s", f->message));
			if (f->hint)
				lines = lappend(lines, psprintf("    hint: %s", f->hint));
		}
		return lines;
	}

	if (plan->kind == DJ_KIND_AGGREGATE)
	{
		DeltaSource *src = linitial(plan->sources);

		lines = lappend(lines, psprintf("Delta Aggregate -> key %s", key_list(plan)));
		lines = lappend(lines, psprintf("  %s: recompute changed groups by %s prefix %s",
										source_title(src), index_label(src->lookup_index),
										lookup_columns(src, src->lookup_index, src->lookup_nkeys)));
	}
	else
	{
		lines = lappend(lines, psprintf("Delta Join (inner) -> key %s", key_list(plan)));
		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (OidIsValid(src->lookup_index))
				lines = lappend(lines, psprintf("  %s: lookup by %s prefix %s",
												source_title(src), index_label(src->lookup_index),
												lookup_columns(src, src->lookup_index, src->lookup_nkeys)));
			else
				lines = lappend(lines, psprintf("  %s: fetch by %s",
												source_title(src), index_label(src->pk_index)));
		}
		if (list_length(plan->sources) > 2)
		{
			foreach(lc, plan->walks)
			{
				DeltaWalk  *walk = lfirst(lc);
				StringInfoData buf;
				ListCell   *lc2;

				initStringInfo(&buf);
				appendStringInfo(&buf, "  on change of %s: fetch by %s",
								 source_title(SOURCE(&a, walk->driver)),
								 index_label(SOURCE(&a, walk->driver)->pk_index));
				foreach(lc2, walk->lookups)
				{
					DeltaLookup *lookup = lfirst(lc2);

					appendStringInfo(&buf, ", then %s by %s",
									 source_title(SOURCE(&a, lookup->source)),
									 index_label(lookup->index));
				}
				lines = lappend(lines, buf.data);
			}
		}
	}
	if (plan->has_filter)
		lines = lappend(lines, pstrdup("  filter: rows that stop passing it leave residual rows (ignore_non_unique_key_filter)"));
	lines = lappend(lines, psprintf("  strategy: %s, mode: %s",
									dj_strategy_name(options->strategy),
									options->retract ? "retract" : "upsert"));
	return lines;
}
