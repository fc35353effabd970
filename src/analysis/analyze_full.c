/*-------------------------------------------------------------------------
 *
 * analyze_full.c
 *	  The full-recompute path (DESIGN.md §2, "Fallback maintenance"): any
 *	  deterministic query whose tables' changes can be decoded.
 *
 * Its sources are every table the query reads, anywhere -- subqueries,
 * CTEs, the views it reads and the views they read, and the inheritance
 * children of a table read without ONLY (the DDL guard refreshes the view
 * when children come or go): a change of any of them makes the view dirty
 * (no key is captured, source_catalog's key_attnums is empty), unless a
 * lookup_only hint says its changes trigger nothing.  Rule 4 applies to
 * all of it, and rule 1's ban on row-level security, as on the other
 * paths.
 *
 * The result's key, when the query says what it is: all its columns for
 * DISTINCT and UNION / INTERSECT / EXCEPT, the grouped columns for a GROUP
 * BY whose columns are all in the select list.  Otherwise the result has
 * none, and a recompute writes the multiset difference.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/catalog.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "analysis/analysis.h"

typedef struct TableWalk
{
	Analysis   *a;
	List	   *relids;			/* the tables read, each once */
	List	   *driving;		/* ... those read once not as lookup-only */
	List	   *views;			/* the views being expanded, against cycles */
	List	   *hinted;			/* range-table entries hinted lookup_only */
	bool		lookup_only;	/* under one of them */
	bool		locking;		/* a query level has FOR UPDATE / FOR SHARE */
} TableWalk;

static bool tables_walker(Node *node, TableWalk *walk);

/* Why a table's changes cannot make the view dirty, or NULL */
static const char *
table_problem(Oid relid, char relkind)
{
	switch (relkind)
	{
		case RELKIND_RELATION:
		case RELKIND_PARTITIONED_TABLE:
			break;
		case RELKIND_MATVIEW:
			return "a materialized view (its refresh is not decoded as changes)";
		case RELKIND_FOREIGN_TABLE:
			return "a foreign table (its changes are not in this server's WAL)";
		default:
			return "not a table";
	}
	if (IsCatalogRelationOid(relid))
		return "a system catalog";
	if (get_rel_persistence(relid) != RELPERSISTENCE_PERMANENT)
		return "not a permanent, WAL-logged table";
	if (get_rel_namespace(relid) == get_namespace_oid(DJ_SCHEMA, true))
		return "a table of delta_join itself";
	return NULL;
}

/* A table the query reads, directly or as a child of parent: a source */
static void
note_table(TableWalk *walk, Oid relid, char relkind, Oid parent)
{
	Analysis   *a = walk->a;
	char	   *label = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));
	const char *problem = table_problem(relid, relkind);

	if (problem != NULL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   OidIsValid(parent) ?
			   psprintf("delta view rule 1: %s, read by the query as an inheritance child of %s, is %s",
						label, quote_qualified_identifier(get_namespace_name(get_rel_namespace(parent)),
														  get_rel_name(parent)),
						problem) :
			   psprintf("delta view rule 1: %s, read by the query, is %s", label, problem),
			   pstrdup("A view is recomputed when a table it reads changes, which only decoding the WAL tells."),
			   pstrdup("Read ordinary, logged tables."));
		return;
	}
	if (get_rel_namespace(relid) == get_namespace_oid(DJ_UNDUMPED_SCHEMA, true))
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   psprintf("delta view rule 1: %s, read by the query, is in schema %s",
						label, DJ_UNDUMPED_SCHEMA),
			   psprintf("pg_dump does not dump the tables of schema %s: a dump of the database would not restore its delta views.",
						DJ_UNDUMPED_SCHEMA),
			   pstrdup("Keep the table in another schema."));
		return;
	}
	if (!analysis_check_citus(a, relid, label))
		return;
	if (relkind == RELKIND_PARTITIONED_TABLE &&
		!analysis_partitions_decodable(a, relid, label))
		return;
	walk->relids = list_append_unique_oid(walk->relids, relid);
	if (!walk->lookup_only)
		walk->driving = list_append_unique_oid(walk->driving, relid);
}

/*
 * A relation the query reads: a table to watch, with its inheritance
 * children unless read with ONLY (their changes are changes of other
 * tables, which the view must capture too), or a view to read through.
 */
static void
note_relation(TableWalk *walk, RangeTblEntry *rte)
{
	if (rte->relkind == RELKIND_VIEW)
	{
		if (!list_member_oid(walk->views, rte->relid))
		{
			Relation	rel = table_open(rte->relid, AccessShareLock);
			Query	   *view_query = copyObject(get_view_query(rel));

			table_close(rel, AccessShareLock);
			AcquireRewriteLocks(view_query, true, false);
			walk->views = lappend_oid(walk->views, rte->relid);
			analysis_check_determinism(walk->a, view_query);
			(void) tables_walker((Node *) view_query, walk);
			walk->views = list_delete_last(walk->views);
		}
		return;
	}
	note_table(walk, rte->relid, rte->relkind, InvalidOid);
	if (rte->relkind == RELKIND_RELATION && rte->inh && has_subclass(rte->relid))
	{
		ListCell   *lc;

		foreach(lc, find_all_inheritors(rte->relid, AccessShareLock, NULL))
		{
			Oid			child = lfirst_oid(lc);

			if (child != rte->relid)
				note_table(walk, child, get_rel_relkind(child), rte->relid);
		}
	}
}

static bool
tables_walker(Node *node, TableWalk *walk)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;

		if (rte->rtekind == RTE_RELATION)
		{
			bool		outer = walk->lookup_only;

			walk->lookup_only |= list_member_ptr(walk->hinted, rte);
			note_relation(walk, rte);
			walk->lookup_only = outer;
		}
		return false;
	}
	if (IsA(node, Query))
	{
		/* (at any level: a recompute would lock the rows it reads) */
		walk->locking |= ((Query *) node)->rowMarks != NIL;
		return query_tree_walker((Query *) node, tables_walker, walk, QTW_EXAMINE_RTES_BEFORE);
	}
	return expression_tree_walker(node, tables_walker, walk);
}

/*
 * Which tables are lookup-only: those every reference of the query reads
 * through a range-table entry hinted lookup_only (the views it reads, and
 * the children of a table, with it).  The hints of the query text name
 * range-table entries; those read back from source_catalog name tables.
 */
static List *
hinted_entries(Query *query, List *hints, List **tables)
{
	List	   *entries = NIL;
	ListCell   *lc;

	*tables = NIL;
	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);

		if (!hint->lookup_only)
			continue;
		if (OidIsValid(hint->relid))
		{
			ListCell   *lc2;

			/* (a table named by the query, and its children with it) */
			*tables = lappend_oid(*tables, hint->relid);
			foreach(lc2, query->rtable)
			{
				RangeTblEntry *rte = lfirst(lc2);

				if (rte->rtekind == RTE_RELATION && rte->relid == hint->relid)
					entries = lappend(entries, rte);
			}
		}
		else if (hint->rtindex >= 1 && hint->rtindex <= list_length(query->rtable))
			entries = lappend(entries, rt_fetch(hint->rtindex, query->rtable));
	}
	return entries;
}

/* Can output column col be a column of a unique index (a btree opclass)? */
static bool
indexable(DeltaPlan *plan, int col)
{
	return OidIsValid(GetDefaultOpClass(plan->coltypes[col], BTREE_AM_OID));
}

/* The output position (0-based) of a non-junk target entry */
static int
output_position(Query *query, TargetEntry *target)
{
	int			n = 0;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle == target)
			return tle->resjunk ? -1 : n;
		if (!tle->resjunk)
			n++;
	}
	return -1;
}

/* The result's key as the query states it, or none (see the banner) */
static void
derive_key(DeltaPlan *plan, Query *query)
{
	List	   *cols = NIL;
	bool		all = false;
	ListCell   *lc;

	if (query->setOperations &&
		!((SetOperationStmt *) query->setOperations)->all)
		all = true;
	else if (query->distinctClause && !query->hasDistinctOn)
		all = true;
	else if (query->groupClause && !query->groupingSets)
	{
		foreach(lc, query->groupClause)
		{
			TargetEntry *tle = get_sortgroupclause_tle(lfirst(lc), query->targetList);
			int			col = output_position(query, tle);

			if (col < 0)
				return;			/* grouped by a column the result does not show */
			cols = list_append_unique_int(cols, col);
		}
	}
	if (all)
	{
		for (int c = 0; c < plan->ncolumns; c++)
			cols = lappend_int(cols, c);
	}
	foreach(lc, cols)
	{
		if (!indexable(plan, lfirst_int(lc)))
			return;
	}
	plan->key_ncolumns = list_length(cols);
	plan->key_columns = palloc(sizeof(int) * Max(plan->key_ncolumns, 1));
	foreach(lc, cols)
		plan->key_columns[foreach_current_index(lc)] = lfirst_int(lc);
}

void
analysis_full(Analysis *a, Query *query, List *hints)
{
	DeltaPlan  *plan = a->plan;
	TableWalk	walk = {0};
	List	   *lookup_tables;
	ListCell   *lc;

	plan->kind = DJ_KIND_QUERY;
	walk.a = a;
	walk.hinted = hinted_entries(query, hints, &lookup_tables);
	analysis_check_determinism(a, query);
	(void) tables_walker((Node *) query, &walk);
	if (walk.relids == NIL && a->failures == NIL)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 1: the query reads no table"),
			   NULL, pstrdup("Select from one or more tables."));
	if (walk.locking)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 5: FOR UPDATE and FOR SHARE are not supported"),
			   pstrdup("A recompute would lock the rows it reads, making the view's maintenance and the sources' writers wait for each other."),
			   pstrdup("Remove the locking clause."));

	analysis_output(a);
	plan->key_ncolumns = 0;
	plan->key_columns = palloc(sizeof(int));
	derive_key(plan, query);

	foreach(lc, walk.relids)
	{
		DeltaSource *src = palloc0(sizeof(DeltaSource));

		src->relid = lfirst_oid(lc);
		src->ordinal = foreach_current_index(lc) + 1;
		src->relname = quote_qualified_identifier(get_namespace_name(get_rel_namespace(src->relid)),
												  get_rel_name(src->relid));
		src->alias = get_rel_name(src->relid);
		src->partitioned = (get_rel_relkind(src->relid) == RELKIND_PARTITIONED_TABLE);
		src->key_natts = 0;
		src->key_attnums = palloc(sizeof(AttrNumber));
		src->cache_size = -1;
		src->lookup_only = !list_member_oid(walk.driving, src->relid) ||
			list_member_oid(lookup_tables, src->relid);
		src->seed_queue_size = src->seed_max_inflight = src->seed_buffer_capacity = -1;
		plan->sources = lappend(plan->sources, src);
		analysis_check_rls(a, src->relid, dj_message_name(src->relname));
	}
	if (plan->sources != NIL)
		(void) analysis_some_source_drives(a);
}
