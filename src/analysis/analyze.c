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
 * Every rejection goes through analysis_reject(): it raises an error (the
 * worker's analysis of a registered view), or, when a path is chosen for
 * create_view and delta_join.explain() alike, records the failure and lets
 * the analysis go on, so that all failed rules are listed at once and the
 * next path is tried without catching an error.  What later steps index by
 * column (the classes of equal columns) is only built once no column
 * outside a source's user columns is referenced.
 *
 * Nothing here runs code of the query: no expression is evaluated.
 * Everything is allocated in the caller's memory context.
 *
 * The rules live in files sharing one Analysis state (analysis.h): this
 * one has the driver, the sources (rule 1), the shape (rule 5) and the
 * output columns; determinism.c and row_order.c have rule 4;
 * analyze_tree.c the join tree and its outer joins; analyze_join.c the
 * join (rules 2, 3, 6 and 8); analyze_agg.c aggregates (rule 7);
 * analyze_union.c UNION ALL; analyze_full.c the full-recompute path;
 * flatten.c what is inlined first, semi_join.c the semi-joins and
 * anti-joins pulled up; explain.c the text of delta_join.explain().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/catalog.h"
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
#include "parser/parsetree.h"
#include "partitioning/partdefs.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/regproc.h"
#include "utils/relcache.h"
#include "utils/rls.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "analysis/analysis.h"
#include "registry/citus_tables.h"
#include "base/compat.h"
#include "base/options.h"

/* ----------------------------------------------------------------
 *		Reporting
 * ----------------------------------------------------------------
 */

void
analysis_reject(Analysis *a, int code, char *message, char *detail, char *hint)
{
	Failure    *f;

	if (a->label)
		message = psprintf("%s (%s)", message, a->label);
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
char *
analysis_source_name(DeltaSource *src)
{
	char	   *relname = get_rel_name(src->relid);

	if (strcmp(relname, src->alias) == 0)
		return pstrdup(dj_message_name(src->relname));
	return psprintf("%s AS %s", dj_message_name(src->relname), quote_identifier(src->alias));
}

/* 'table "public.orders" AS o' */
char *
analysis_source_label(DeltaSource *src)
{
	return psprintf("table %s", analysis_source_name(src));
}

/* "o.item_id" */
char *
analysis_column_label(DeltaSource *src, AttrNumber attno)
{
	return psprintf("%s.%s", quote_identifier(src->alias),
					quote_identifier(get_attname(src->relid, attno, false)));
}

/* "(merchant_id, item_id)" from attribute numbers */
char *
analysis_column_list(Oid relid, int n, const AttrNumber *attnums)
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
			src->as_of = hint->as_of;
			src->seed_queue_size = hint->seed_queue_size;
			src->seed_max_inflight = hint->seed_max_inflight;
			src->seed_buffer_capacity = hint->seed_buffer_capacity;
		}
	}
}

/*
 * A view whose every source is lookup-only never changes: the changes of
 * those sources are not even captured.  Returns false after reject.
 */
bool
analysis_some_source_drives(Analysis *a)
{
	ListCell   *lc;

	foreach(lc, a->plan->sources)
	{
		if (!((DeltaSource *) lfirst(lc))->lookup_only)
			return true;
	}
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   pstrdup("delta view rule 2: every source is lookup-only"),
		   pstrdup("A lookup-only source's changes trigger nothing, so the view would never change."),
		   pstrdup("Remove the lookup_only hint from the table whose changes should drive the view."));
	return false;
}

/* ----------------------------------------------------------------
 *		Rule 5: only projection and filter
 * ----------------------------------------------------------------
 */

static void
reject_shape(Analysis *a, const char *what)
{
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 5: %s not supported", what),
		   pstrdup("Only projection and filter may stand between the sources, the join and the target."),
		   pstrdup("Remove it from the query; compute it when reading the target instead."));
}

/*
 * SELECT DISTINCT over joins, on the path of groups through joins: its rows
 * are the groups of all its output columns, with no aggregate -- a GROUP BY
 * of the select list, which PostgreSQL computes alike (NULLs equal, one
 * group).  Not DISTINCT ON (one row of each group, chosen by ORDER BY), nor
 * a DISTINCT applied after what comes before it: groups, aggregates,
 * window functions, set-returning functions in the select list.
 */
static bool
distinct_as_groups(Analysis *a, Query *query)
{
	return a->path == DJ_PATH_JOIN_GROUPS && query->distinctClause != NIL &&
		!query->hasDistinctOn && query->groupClause == NIL &&
		query->groupingSets == NIL && !query->hasAggs && query->havingQual == NULL &&
		!query->hasWindowFuncs && !query->hasTargetSRFs;
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
	if (query->distinctClause && !distinct_as_groups(a, query))
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
 * A table without a primary key may still name its rows by a unique key
 * whose NULLs are not distinct -- the key delta_join gives the target of a
 * view with outer joins, so that views can read such targets.  Decoding
 * needs the old row whole to find an updated or deleted row's key: the
 * table must log it (REPLICA IDENTITY FULL, which such targets have).
 */
static Oid
nulls_not_distinct_key(Relation rel)
{
	Oid			result = InvalidOid;
	ListCell   *lc;

	if (rel->rd_rel->relreplident != REPLICA_IDENTITY_FULL)
		return InvalidOid;
	foreach(lc, RelationGetIndexList(rel))
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;
		bool		plain = true;

		for (int i = 0; i < form->indnkeyatts; i++)
			plain &= (form->indkey.values[i] != 0);
		if (!OidIsValid(result) && idx->rd_rel->relam == BTREE_AM_OID &&
			form->indisunique && form->indnullsnotdistinct && form->indimmediate &&
			form->indisvalid && plain &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL))
			result = RelationGetRelid(idx);
		index_close(idx, AccessShareLock);
	}
	return result;
}

/*
 * The partitions of a partitioned source must be logged tables, like the
 * source itself: their rows are the source's rows.
 */
bool
analysis_partitions_decodable(Analysis *a, Oid relid, const char *label)
{
	ListCell   *lc;

	foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
	{
		Oid			part = lfirst_oid(lc);
		char		relkind = get_rel_relkind(part);
		const char *problem = NULL;

		if (relkind == RELKIND_FOREIGN_TABLE)
			problem = "a foreign table";
		else if (get_rel_persistence(part) != RELPERSISTENCE_PERMANENT)
			problem = "unlogged";
		if (problem)
		{
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: partition %s of source %s is %s",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)),
													   get_rel_name(part)),
							label, problem),
				   pstrdup("Changes of the partition would not be in this server's WAL, so they could not be decoded."),
				   relkind == RELKIND_FOREIGN_TABLE ? pstrdup("Use local partitions.") :
				   psprintf("Make it logged: ALTER TABLE %s SET LOGGED;",
							quote_qualified_identifier(get_namespace_name(get_rel_namespace(part)),
													   get_rel_name(part))));
			return false;
		}
	}
	return true;
}

/*
 * A Citus distributed or reference table keeps its rows and their changes on
 * the worker nodes (registry/citus_tables.c): refused, but where a
 * coordinator analyzes a distributed view (citus/eligibility.c checks its
 * sources).  Returns false after reject.
 */
bool
analysis_check_citus(Analysis *a, Oid relid, const char *label)
{
	const char *kind = citus_table_kind(relid);

	if (kind == NULL || a->plan->options.distributed)
		return true;
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 1: source %s is %s of Citus", label, kind),
		   pstrdup("Its rows, and their changes, are in shards on the worker nodes: this node's WAL never shows them change."),
		   pstrdup("Create the view on the Citus coordinator: it makes one view per shard group of co-located distributed tables."));
	return false;
}

/*
 * Row-level security must not apply to a source, for the role analyzing
 * the query (at creation, the one who will own a new target; then its
 * owner): lookups read the sources directly, and a recompute under
 * policies would depend on who runs it.  Returns false after reject.
 */
bool
analysis_check_rls(Analysis *a, Oid relid, const char *label)
{
	if (check_enable_rls(relid, InvalidOid, true) != RLS_ENABLED)
		return true;
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 1: row-level security applies to source %s", label),
		   pstrdup("A view's rows are computed once for all its readers, by lookups and recomputes that read the sources directly: row security policies, which filter rows by who reads them, cannot apply."),
		   pstrdup("Create the view as a role that bypasses row-level security on the table (its owner, or a role with BYPASSRLS)."));
	return false;
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
	src->seed_queue_size = src->seed_max_inflight = src->seed_buffer_capacity = -1;
	label = analysis_source_name(src);
	*indexes = NIL;

	switch (rte->relkind)
	{
		case RELKIND_RELATION:
		case RELKIND_PARTITIONED_TABLE:
			break;
		case RELKIND_VIEW:
			kind = "a view of more than joins, projections and filters";
			kind_hint = "A view is read as its query when that query is made of joins, projections and filters only; otherwise use its tables in the query.";
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
		analysis_reject(a, ERRCODE_WRONG_OBJECT_TYPE,
			   psprintf("delta view rule 1: source %s is %s", label, kind),
			   pstrdup("Every source must be an ordinary or partitioned table whose changes are WAL-logged."),
			   pstrdup(kind_hint));
		return NULL;
	}

	switch (get_rel_persistence(rte->relid))
	{
		case RELPERSISTENCE_UNLOGGED:
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: source %s is unlogged", label),
				   pstrdup("Changes of unlogged tables are not WAL-logged, so they cannot be decoded."),
				   psprintf("Make it logged: ALTER TABLE %s SET LOGGED;", src->relname));
			return NULL;
		case RELPERSISTENCE_TEMP:
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 1: source %s is a temporary table", label),
				   pstrdup("Changes of temporary tables are not WAL-logged, so they cannot be decoded."),
				   pstrdup("Use a permanent table."));
			return NULL;
		default:
			break;
	}

	if (!analysis_check_citus(a, rte->relid, label))
		return NULL;

	if (IsCatalogRelationOid(rte->relid))
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s is a system catalog", label),
			   pstrdup("Changes of system catalogs are not decoded as changes of a table."),
			   pstrdup("Copy the data into an ordinary table."));
		return NULL;
	}

	if (rte->relkind == RELKIND_PARTITIONED_TABLE && !rte->inh)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s is read with ONLY", label),
			   pstrdup("ONLY reads the rows of a partitioned table itself, which has none, while its partitions' changes are decoded as its own."),
			   pstrdup("Remove ONLY."));
		return NULL;
	}
	if (rte->relkind == RELKIND_PARTITIONED_TABLE &&
		!analysis_partitions_decodable(a, rte->relid, label))
		return NULL;

	if (!analysis_check_rls(a, rte->relid, label))
		return NULL;

	if (get_rel_namespace(rte->relid) == get_namespace_oid(DJ_SCHEMA, true))
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s belongs to delta_join itself", label),
			   pstrdup("The extension's catalog and the query views of other delta views cannot be sources."),
			   pstrdup("Read the tables they are made of, or a view's target."));
		return NULL;
	}
	if (get_rel_namespace(rte->relid) == get_namespace_oid(DJ_UNDUMPED_SCHEMA, true))
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s is in schema %s", label, DJ_UNDUMPED_SCHEMA),
			   psprintf("pg_dump does not dump the tables of schema %s: a dump of the database would not restore its delta views.",
						DJ_UNDUMPED_SCHEMA),
			   pstrdup("Keep the table in another schema."));
		return NULL;
	}

	if (rte->relkind == RELKIND_RELATION && has_subclass(rte->relid) &&
		find_inheritance_children(rte->relid, AccessShareLock) != NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: source %s has inheritance children", label),
			   pstrdup("Rows of the children are read with the parent, but their changes are changes of other tables."),
			   pstrdup("Use a partitioned table, or read the parent with ONLY after removing the children."));
		return NULL;
	}


	rel = table_open(rte->relid, AccessShareLock);
	src->partitioned = (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE);
	src->natts = RelationGetNumberOfAttributes(rel);
	src->pk_index = RelationGetPrimaryKeyIndex_compat(rel);
	if (!OidIsValid(src->pk_index))
	{
		/* the target of an outer-join view: its key may hold NULLs */
		src->pk_index = nulls_not_distinct_key(rel);
		src->key_has_nulls = OidIsValid(src->pk_index);
	}
	if (!OidIsValid(src->pk_index))
	{
		analysis_reject(a, ERRCODE_INVALID_TABLE_DEFINITION,
			   psprintf("delta view rule 1: source %s has no primary key", label),
			   pstrdup("Changed rows are found again by their primary key (or by a UNIQUE NULLS NOT DISTINCT key, with REPLICA IDENTITY FULL)."),
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
	/* (18: PRIMARY KEY (..., p WITHOUT OVERLAPS) is a GiST index) */
	if (src->pk_attnums == NULL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: the primary key of source %s is not a btree index", label),
			   pstrdup("Changed rows are found again by their primary key, through a btree index; a temporal key (WITHOUT OVERLAPS) is a GiST index."),
			   pstrdup("Let strategy auto maintain the view by full recompute."));
		table_close(rel, AccessShareLock);
		return NULL;
	}

	table_close(rel, AccessShareLock);
	return src;
}

/* Partition key columns of a partitioned source (rejects expressions). */
int
analysis_partition_key(Analysis *a, DeltaSource *src, AttrNumber **attnums)
{
	Relation	rel = table_open(src->relid, AccessShareLock);
	PartitionKey key = RelationGetPartitionKey(rel);
	int			n = key->partnatts;

	*attnums = palloc(sizeof(AttrNumber) * n);
	for (int i = 0; i < n; i++)
	{
		(*attnums)[i] = key->partattrs[i];
		if (key->partattrs[i] == 0)
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
				   psprintf("delta view rule 2: partitioned %s is partitioned by an expression",
							analysis_source_label(src)),
				   pstrdup("The join or group key must include the partition key, so it must be made of columns."),
				   NULL);
	}
	table_close(rel, AccessShareLock);
	return n;
}

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
 * Can values of column att of the source be passed to a recompute as an
 * array, unnested in its FROM (recompute.c)?  Not those of a type with no
 * array type (an array), nor of a composite type, whose unnest gives its
 * fields instead of the value.
 */
bool
analysis_passes_as_array(DeltaSource *src, AttrNumber att, Oid *type)
{
	*type = get_atttype(src->relid, att);
	return OidIsValid(get_array_type(*type)) && !type_is_rowtype(*type);
}

/*
 * Is column att of the source in the old row a decoded DELETE carries: its
 * replica identity (the primary key by default, another unique index, all
 * columns with REPLICA IDENTITY FULL, none with NOTHING)?  For a
 * partitioned source, changes are decoded as changes of its leaf
 * partitions, each with its own replica identity: every leaf must log it.
 * *culprit is set to the relation that does not.
 */
bool
analysis_logged_in_old_row(DeltaSource *src, AttrNumber att, Oid *culprit)
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
 * Refuse column att of the source if it is a virtual generated column
 * (PostgreSQL 18), on a path that reads the column's values from the rows
 * decoding gives or a lookup fetches: the heap stores no value for such a
 * column, so those rows hold NULL where a query computes its expression.
 * rule begins the message ("delta view rule 1").  Returns whether it was
 * refused.
 */
bool
analysis_refuse_virtual(Analysis *a, DeltaSource *src, AttrNumber att, const char *rule)
{
	if (!compat_column_is_virtual(src->relid, att))
		return false;
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("%s: column %s of %s is a virtual generated column",
					rule, analysis_column_label(src, att), analysis_source_label(src)),
		   pstrdup("A virtual generated column's value is computed by each query that reads it and stored nowhere: the changes decoded from the WAL, and the rows the maintenance of this path reads through an index, hold NULL for it."),
		   psprintf("Write the column's generation expression in the query in place of %s, or make the column STORED; strategy auto falls back to a recompute, which runs the query.",
					analysis_column_label(src, att)));
	return true;
}

/* ----------------------------------------------------------------
 *		Output columns
 * ----------------------------------------------------------------
 */

void
analysis_output(Analysis *a)
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
		/* (a UNION ALL's columns take their names from its first branch) */
		if (a->label == NULL && (tle->resname == NULL || strcmp(tle->resname, "?column?") == 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
					 errmsg("output column %d of the query has no name", n + 1),
					 errhint("Give it a name with AS; it becomes a column of the target.")));
		for (int i = 0; i < n && a->label == NULL; i++)
			if (strcmp(plan->colnames[i], tle->resname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("output column name \"%s\" is used more than once", tle->resname),
						 errhint("Give each output column its own name with AS; they become the columns of the target.")));
		if (exprType((Node *) tle->expr) == UNKNOWNOID)
			elog(ERROR, "output column \"%s\" has type unknown", tle->resname);
		plan->colnames[n] = pstrdup(tle->resname ? tle->resname : "?column?");
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

DeltaPlan *
analysis_query(Analysis *a, Query *query, List *hints, const DeltaOptions *options)
{
	DeltaPlan  *plan = palloc0(sizeof(DeltaPlan));
	int			nrtes;
	int			rtindex;
	int			ncolumns = 0;
	bool		rte_rejected = false;
	Bitmapset  *referenced;
	ListCell   *lc;

	/*
	 * The analysis flattens the query in place: work on a copy.  Lock what
	 * it reads first, as the rewriter does a view's stored query: a query
	 * view loaded by the worker names relations nothing has locked, which
	 * a concurrent DROP may take away while they are looked at.
	 */
	query = copyObject(query);
	AcquireRewriteLocks(query, true, false);
	a->plan = plan;
	plan->options = *options;
	plan->path = a->path;
	plan->tag_column = -1;
	plan->query = query;

	/*
	 * (Before anything else: flattening would drop a WITH entry nothing
	 * reads, and the statement with it.)
	 */
	if (query->hasModifyingCTE)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 5: data-modifying statements in WITH are not supported"),
			   pstrdup("A view's query runs again at every recompute and refresh: it may only read."),
			   pstrdup("Run the INSERT, UPDATE or DELETE on its own, and keep only the SELECT in the view's query."));
		return plan;
	}
	if (a->path == DJ_PATH_FULL)
	{
		analysis_full(a, query, hints);
		return plan;
	}

	/*
	 * Keyed recompute is exact: the rows of a key are replaced, as in
	 * retract mode, so no filter leaves a row behind.
	 */
	if (a->path == DJ_PATH_KEYED || a->path == DJ_PATH_JOIN_GROUPS)
	{
		plan->options.retract = true;
		plan->options.ignore_non_unique_key_filter = true;
	}
	analysis_flatten(a, query);

	/*
	 * (A semi-join this path cannot take as a join leaves a sublink the
	 * rest would only refuse again.)
	 */
	if (a->path == DJ_PATH_JOIN_GROUPS)
	{
		if (!analysis_pull_up_semi_joins(a, query))
			return plan;
	}
	referenced = analysis_referenced_rtes(query);

	if (query->setOperations)
	{
		plan->kind = DJ_KIND_JOIN;
		analysis_union(a, query, hints, options);
		return plan;
	}

	check_query_shape(a, query);

	/* Sources (rule 1) */
	nrtes = list_length(query->rtable);
	a->rt_source = palloc(sizeof(int) * (nrtes + 1));
	rtindex = 0;
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		a->rt_source[++rtindex] = -1;
		/* (a view's placeholders, a subquery pulled up: see flatten.c) */
		if (!bms_is_member(rtindex, referenced))
			continue;
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
					src->ordinal = rtindex;
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
				analysis_reject(a, ERRCODE_WRONG_OBJECT_TYPE,
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

	analysis_check_determinism(a, query);

	/*
	 * If some FROM item was rejected, or a column outside the sources' user
	 * columns is read, the rest cannot be checked safely.
	 */
	if (rte_rejected || a->bad_columns)
		return plan;
	if (plan->sources == NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 1: the query reads no table"),
			   NULL, pstrdup("Select from one or more tables."));
		return plan;
	}

	apply_hints(a, hints);
	if (!analysis_some_source_drives(a))
		return plan;

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
	query->targetList = (List *) flatten_join_alias_vars_compat(query, (Node *) query->targetList);
	if (query->havingQual)
		query->havingQual = flatten_join_alias_vars_compat(query, query->havingQual);
	plan->quals = analysis_join_tree(a, query);

	analysis_output(a);

	if (distinct_as_groups(a, query))
	{
		query->groupClause = query->distinctClause;
		query->distinctClause = NIL;
		plan->distinct = true;
	}
	if (query->hasAggs || query->groupClause != NIL)
	{
		plan->kind = DJ_KIND_AGGREGATE;
		analysis_aggregate(a);
		if (a->anti_joins != NIL)
			analysis_restore_anti_joins(a, query);
		return plan;
	}

	plan->kind = DJ_KIND_JOIN;
	analysis_join(a);
	return plan;
}

/*
 * Analyze a query for one path; raise the first failed rule as an error.
 * hints are the table hints (DeltaHint *) matched to range-table entries.
 */
DeltaPlan *
analyze_plan_path(Query *query, List *hints, const DeltaOptions *options, DeltaPath path)
{
	Analysis	a = {0};

	a.path = path;
	return analysis_query(&a, query, hints, options);
}

/*
 * Do the groups through joins say something of the query: is it an
 * aggregate, a GROUP BY or a SELECT DISTINCT over several tables, or does
 * it hold a semi- or an anti-join?  Read from the query itself, since an
 * analysis that failed a rule may have stopped before it could tell.
 */
static bool
query_concerns_join_groups(Query *query)
{
	int			relations = 0;
	ListCell   *lc;

	if (analysis_holds_semi_join(query->jointree->quals))
		return true;
	if (!query->hasAggs && query->groupClause == NIL && query->distinctClause == NIL)
		return false;
	foreach(lc, query->rtable)
		relations += (((RangeTblEntry *) lfirst(lc))->rtekind == RTE_RELATION);
	return relations > 1;
}

/*
 * The path of a view under its strategy (DESIGN.md §2): eventual, the
 * delta rewrite or an error; auto, the delta rewrite if the query is
 * eligible, else keyed recompute if it has a delta view's shape, else
 * keyed recompute of groups through joins if it is an aggregate (or a
 * SELECT DISTINCT) over joins, else full recompute; none, keyed recompute
 * or full recompute.
 * Rule 4 applies on every path.
 *
 * create_view and explain() take this one way: each path the strategy
 * allows is analyzed in turn, the rules it fails collected, until one
 * takes the query.  With lines, explain()'s text of every path tried is
 * appended to *lines, and NULL returned if none takes it or the caller
 * lacks the rights create_view would check (access.c); without, a query
 * no path takes raises the first rule the last path failed.  The groups
 * through joins are tried for aggregates (and DISTINCT) over joins only:
 * another query says nothing of them.
 */
static DeltaPlan *
choose_path(Query *query, List *hints, const DeltaOptions *options, List **lines)
{
	static const DeltaPath order[] = {DJ_PATH_DELTA, DJ_PATH_KEYED, DJ_PATH_JOIN_GROUPS,
	DJ_PATH_FULL};
	Failure    *failure = NULL;

	for (int i = 0; i < (int) lengthof(order); i++)
	{
		DeltaPath	path = order[i];
		Analysis	a = {0};
		DeltaPlan  *plan;

		if ((options->strategy == DJ_STRATEGY_NONE && path == DJ_PATH_DELTA) ||
			(options->strategy == DJ_STRATEGY_EVENTUAL && path != DJ_PATH_DELTA) ||
			((options->strategy != DJ_STRATEGY_AUTO || options->catalog_01) &&
			 path == DJ_PATH_JOIN_GROUPS))
			continue;
		a.collect = true;
		a.path = path;
		plan = analysis_query(&a, query, hints, options);
		if (path == DJ_PATH_JOIN_GROUPS && a.failures != NIL &&
			!analysis_aggregate_over_join(&a) && !a.semi_join &&
			!query_concerns_join_groups(query))
			continue;

		/*
		 * explain(): a path that takes the query needs rights the caller
		 * may lack, and so would every later one.
		 */
		if (lines != NULL && a.failures == NIL && !analysis_rights_granted(&a))
		{
			*lines = list_concat(*lines, explain_lines(&a, options));
			return NULL;
		}
		if (lines != NULL)
			*lines = list_concat(*lines, explain_lines(&a, options));
		if (a.failures == NIL)
			return plan;
		failure = linitial(a.failures);
	}
	if (lines == NULL)
		ereport(ERROR,
				(errcode(failure->code),
				 errmsg("%s", failure->message),
				 failure->detail ? errdetail("%s", failure->detail) : 0,
				 failure->hint ? errhint("%s", failure->hint) : 0));
	return NULL;
}

/* The plan of a new view (create_view): see choose_path */
DeltaPlan *
analyze_choose_path(Query *query, List *hints, const DeltaOptions *options)
{
	DeltaOptions settled = options_settle(options, query, hints);

	return choose_path(query, hints, &settled, NULL);
}

/*
 * explain(): the plan of the path create_view would take, as lines of
 * text, after what ruled out the paths tried before it; or the rules each
 * path fails.  Errors that are not rule failures (syntax, unknown tables)
 * are raised as usual.
 */
List *
explain_plan(Query *query, List *hints, const DeltaOptions *options)
{
	List	   *lines = NIL;
	DeltaOptions settled = options_settle(options, query, hints);

	(void) choose_path(query, hints, &settled, &lines);
	return lines;
}


