/*-------------------------------------------------------------------------
 *
 * shard_query.c
 *	  A distributed view's query: the relations it reads, at every level,
 *	  and their names; and the same query over one shard group, each
 *	  distributed table replaced by its shard in the group.
 *
 * The coordinator records the names of the relations a definition's query
 * read when it was made; a node reads the query again, checks that its
 * names still name those relations, and rewrites it for each shard group
 * it holds before making the group's view of it.  Pure functions of a
 * query and the system catalogs: they lock nothing and read no Citus
 * catalog (the shards are found in registry/citus_tables.c).
 *
 * IDENTIFICATION
 *	  src/citus/shard_query.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "base/compat.h"
#include "citus/shard_query.h"
#include "ops/views.h"

/* Relations to collect (to == NIL) or to replace, from[i] by to[i] */
typedef struct RelationMap
{
	List	   *from;			/* OIDs */
	List	   *to;				/* OIDs, or NIL to collect into from */
	Query	   *query;			/* the query whose range table is walked */
} RelationMap;

/* The shard a relation maps to, or InvalidOid */
static Oid
mapped_relation(RelationMap *map, Oid relid)
{
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, map->from, lc2, map->to)
	{
		if (lfirst_oid(lc1) == relid)
			return lfirst_oid(lc2);
	}
	return InvalidOid;
}

/* Collect (map->to == NIL) or replace the relations a query reads, at every level */
static bool
map_relations(Node *node, RelationMap *map)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		Oid			shard;

		if (rte->rtekind != RTE_RELATION)
			return false;
		if (map->to == NIL)
			map->from = list_append_unique_oid(map->from, rte->relid);
		else if (OidIsValid(shard = mapped_relation(map, rte->relid)))
			compat_rte_set_relid(map->query, rte, shard);
		return false;
	}
	if (IsA(node, Query))
	{
		Query	   *outer = map->query;
		bool		result;

		map->query = (Query *) node;
		result = query_tree_walker((Query *) node, map_relations, map, QTW_EXAMINE_RTES_BEFORE);
		map->query = outer;
		return result;
	}
	return expression_tree_walker(node, map_relations, map);
}

/*
 * Where a column of a distributed table is in its shard: by name, since a
 * shard made later (by a move or a split) lacks the columns the table
 * dropped before.
 */
static AttrNumber
shard_attno(Oid logical, Oid shard, AttrNumber attno)
{
	char	   *name = get_attname(logical, attno, false);
	AttrNumber	shard_attno = get_attnum(shard, name);

	if (shard_attno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of \"%s\" is missing from its shard \"%s\"",
						name, get_rel_name(logical), get_rel_name(shard))));
	return shard_attno;
}

typedef struct ColumnMap
{
	RelationMap *map;
	List	   *queries;		/* the Query of each level, innermost first */
} ColumnMap;

/*
 * Renumber the columns of mapped relations for their shards: in Vars (at
 * every level; varlevelsup picks the query whose range table the Var is
 * of) and in the columns each range-table entry's privileges cover.  Runs
 * before map_relations replaces the relations.
 */
static bool
map_columns(Node *node, ColumnMap *cm)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		Query	   *query = list_nth(cm->queries, var->varlevelsup);
		RangeTblEntry *rte;
		Oid			shard;

		if (var->varattno <= 0 || var->varno > list_length(query->rtable))
			return false;
		rte = rt_fetch(var->varno, query->rtable);
		if (rte->rtekind == RTE_RELATION &&
			OidIsValid(shard = mapped_relation(cm->map, rte->relid)))
			var->varattno = shard_attno(rte->relid, shard, var->varattno);
		return false;
	}
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		ListCell   *lc;
		bool		result;

		foreach(lc, query->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);
			Oid			shard;
			Bitmapset  *cols = NULL;
			Bitmapset **selected;
			int			col = -1;

			if (rte->rtekind != RTE_RELATION ||
				!OidIsValid(shard = mapped_relation(cm->map, rte->relid)))
				continue;
			selected = compat_rte_selected_cols(query, rte);
			while ((col = bms_next_member(*selected, col)) >= 0)
			{
				AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;

				if (attno > 0)
					attno = shard_attno(rte->relid, shard, attno);
				cols = bms_add_member(cols, attno - FirstLowInvalidHeapAttributeNumber);
			}
			*selected = cols;
		}
		cm->queries = lcons(query, cm->queries);
		result = query_tree_walker(query, map_columns, cm, 0);
		cm->queries = list_delete_first(cm->queries);
		return result;
	}
	return expression_tree_walker(node, map_columns, cm);
}

/* The relations (OIDs) a query reads, at every level */
List *
shard_query_relations(Query *query)
{
	RelationMap map = {NIL, NIL, NULL};

	(void) map_relations((Node *) query, &map);
	return map.from;
}

static int
list_cstring_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/* The qualified names of relids, sorted */
List *
shard_query_relation_names(List *relids)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, relids)
		names = lappend(names, ops_relation_name(lfirst_oid(lc)));
	list_sort(names, list_cstring_cmp);
	return names;
}

/*
 * Rewrite query, in place, to read shards[i] wherever it reads relids[i]
 * (a distributed table and its shard in one group), its columns renumbered
 * for the shards.
 */
void
shard_query_map(Query *query, List *relids, List *shards)
{
	RelationMap map = {relids, shards, NULL};
	ColumnMap	cm = {&map, NIL};

	if (shards == NIL)
		return;
	(void) map_columns((Node *) query, &cm);
	(void) map_relations((Node *) query, &map);
}
