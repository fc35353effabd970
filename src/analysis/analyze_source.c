/*-------------------------------------------------------------------------
 *
 * analyze_source.c
 *	  Rule 1: each table of a view's query as a source -- permanent and
 *	  WAL-logged, keyed, decodable on every partition, readable without
 *	  row-level security -- with its indexes and the columns its decoded
 *	  old rows carry.
 *
 * Everything is allocated in the caller's memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "nodes/nodeFuncs.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rls.h"
#include "utils/rel.h"

#include "analysis/analysis.h"
#include "base/compat.h"
#include "registry/citus_tables.h"

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
DeltaSource *
analysis_make_source(Analysis *a, RangeTblEntry *rte, int rtindex, List **indexes)
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
