/*-------------------------------------------------------------------------
 *
 * distributed.c
 *	  Distributed delta views: a view made on a Citus coordinator over
 *	  co-located distributed tables (DESIGN.md section 8).
 *
 * Tables distributed and co-located by the join key keep every join inside
 * one shard group, so a distributed view is one ordinary delta view per
 * shard group, on the node that holds it, reading the group's shards of the
 * sources and writing into the group's shard of a distributed target
 * co-located with them.
 *
 * Nouns:
 *
 *	definition	a row of delta_join.distributed_catalog: the target's name,
 *				the query's text, its options, the search_path ("$user"
 *				resolved) and settings it was created under, and the
 *				relations its names named then.  The coordinator makes the
 *				table a Citus reference table when the first distributed
 *				view is created: every node holds a copy, written in the
 *				same (two-phase) transaction, and nodes added later get one.
 *	shard view	the ordinary view of one shard group on one node, whose
 *				target is a shard of the distributed target.  It is
 *				"managed": drop_view refuses it on the node (drop the
 *				distributed view on the coordinator).
 *
 * How the shard views follow the definitions and the shards:
 *
 *	- A row trigger on the definitions (Citus puts it on every node's copy)
 *	  creates the shard views of the node's shard groups when a definition
 *	  is inserted, refreshes them when it is updated (refresh on the
 *	  coordinator) and drops them, keeping their targets, when it is
 *	  deleted (drop_view on the coordinator), all in the coordinator's
 *	  transaction.
 *	- Every node's apply worker compares, once a second, the placements its
 *	  node holds with its shard views (distributed_sync_node): a shard group
 *	  moved in (a shard move, a rebalance onto a new node, a split) gets its
 *	  view, which backfills the group's target shard from the moved
 *	  sources; one moved away loses its view.  A source shard that Citus
 *	  drops takes its view along (guard.c).
 *	- The database of a node with definitions keeps its slot and worker
 *	  even while it holds no shard group (launcher.c), so a group that moves
 *	  in is seen.  wait() on the coordinator runs the sync on every node
 *	  first, and waits again while a group has no view or a placement
 *	  changed, so it never misses a group, even one moved to a node added
 *	  after the view.
 *	- The definitions name tables and columns as text, read again on a
 *	  node whenever a group's view is made: the coordinator's DDL guard
 *	  refuses to rename what they name, a DROP of a target deletes its
 *	  definition first (a source only with CASCADE), and a node refuses to
 *	  make a view whose names now resolve to other relations.
 *
 * Citus is driven through its SQL functions and read from its catalog, so
 * delta_join needs neither its headers nor its library.
 *
 * IDENTIFICATION
 *	  src/distributed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "analyze.h"
#include "api.h"
#include "catalog.h"
#include "citus.h"
#include "distributed.h"
#include "launcher.h"
#include "query.h"
#include "runas.h"
#include "target.h"
#include "worker.h"

PG_FUNCTION_INFO_V1(dj_on_distributed_catalog);
PG_FUNCTION_INFO_V1(dj_prepare_node);
PG_FUNCTION_INFO_V1(dj_sync_node);
PG_FUNCTION_INFO_V1(dj_wait_node);

#define CATALOG_TABLE	DJ_SCHEMA ".distributed_catalog"

bool		distributed_analysis = false;

static void *analyze_distributed(Query *query, List *hints, DeltaOptions *options,
								 bool explain);
static void delete_orphan_definitions(const char *target);

/* One row of delta_join.distributed_catalog */
typedef struct Definition
{
	char	   *target;			/* qualified name of the distributed target */
	char	   *query;
	char	   *strategy;		/* or NULL */
	Jsonb	   *options;		/* as given to create_view, or NULL */
	char	   *search_path;
	List	   *sources;		/* qualified names of the relations it read */
	Jsonb	   *settings;
} Definition;

/* ----------------------------------------------------------------
 *		Citus's catalog
 * ----------------------------------------------------------------
 */

/* Is Citus installed in this database? */
static bool
citus_installed(void)
{
	return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)) &&
		OidIsValid(get_relname_relid("pg_dist_local_group", PG_CATALOG_NAMESPACE));
}

/* Run a read of Citus's catalog (SPI connected); returns SPI_processed */
static uint64
citus_read(const char *sql, int nargs, Oid *types, Datum *values)
{
	if (catalog_exec(sql, nargs, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read the Citus catalog");
	return SPI_processed;
}

/* Column col (1-based) of row i of the last SPI result, as text or NULL */
static char *
spi_text(uint64 i, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col);
}

/* This node's group in Citus's metadata (0 on the coordinator), or -1 */
static int
local_group(void)
{
	int			group = -1;

	if (!citus_installed())
		return -1;
	SPI_connect();
	if (citus_read("SELECT groupid FROM pg_catalog.pg_dist_local_group", 0, NULL, NULL) == 1)
		group = atoi(spi_text(0, 1));
	SPI_finish();
	return group;
}

/*
 * A hash-distributed table's co-location group and distribution column
 * (its name); false when the table is not one.
 */
static bool
citus_distribution(Oid relid, int *colocation, char **column)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found = false;

	SPI_connect();
	if (citus_read("SELECT colocationid,"
				   " pg_catalog.column_to_column_name(logicalrelid, partkey)"
				   " FROM pg_catalog.pg_dist_partition"
				   " WHERE logicalrelid OPERATOR(pg_catalog.=) $1 AND partmethod OPERATOR(pg_catalog.=) 'h'",
				   1, types, values) == 1)
	{
		*colocation = atoi(spi_text(0, 1));
		*column = MemoryContextStrdup(TopTransactionContext, spi_text(0, 2));
		found = true;
	}
	SPI_finish();
	return found;
}

/*
 * Has this transaction run a distributed statement yet?  (Its writes are on
 * the worker nodes, where this one cannot see them.)
 */
static bool
citus_transaction_started(void)
{
	bool		started;

	SPI_connect();
	started = citus_read("SELECT 1 FROM pg_catalog.get_current_transaction_id()"
						 " WHERE transaction_number OPERATOR(pg_catalog.<>) 0", 0, NULL, NULL) > 0;
	SPI_finish();
	return started;
}

/* The relation a qualified, quoted name names, or InvalidOid */
static Oid
relation_named(const char *name)
{
	return RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
							NoLock, true);
}

/*
 * The shard table named as shard_name() names it (qualified outside schema
 * public) of a table of Citus, or InvalidOid while it is not on this node.
 */
static Oid
shard_relation(const char *shard_name, Oid logical)
{
	List	   *names = stringToQualifiedNameList(shard_name);

	if (list_length(names) == 1)
		return get_relname_relid(strVal(linitial(names)), get_rel_namespace(logical));
	return relation_named(shard_name);
}

/* ----------------------------------------------------------------
 *		Walking the relations of a query
 * ----------------------------------------------------------------
 */

typedef struct RelationMap
{
	List	   *from;			/* OIDs */
	List	   *to;				/* OIDs, or NIL to collect into from */
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
			rte->relid = shard;
		return false;
	}
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, map_relations, map, QTW_EXAMINE_RTES_BEFORE);
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
			int			col = -1;

			if (rte->rtekind != RTE_RELATION ||
				!OidIsValid(shard = mapped_relation(cm->map, rte->relid)))
				continue;
			while ((col = bms_next_member(rte->selectedCols, col)) >= 0)
			{
				AttrNumber	attno = col + FirstLowInvalidHeapAttributeNumber;

				if (attno > 0)
					attno = shard_attno(rte->relid, shard, attno);
				cols = bms_add_member(cols, attno - FirstLowInvalidHeapAttributeNumber);
			}
			rte->selectedCols = cols;
		}
		cm->queries = lcons(query, cm->queries);
		result = query_tree_walker(query, map_columns, cm, 0);
		cm->queries = list_delete_first(cm->queries);
		return result;
	}
	return expression_tree_walker(node, map_columns, cm);
}

static int
list_cstring_cmp(const ListCell *a, const ListCell *b)
{
	return strcmp(lfirst(a), lfirst(b));
}

/* The qualified names of relids, sorted */
static List *
relation_names(List *relids)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, relids)
		names = lappend(names,
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(lfirst_oid(lc))),
												   get_rel_name(lfirst_oid(lc))));
	list_sort(names, list_cstring_cmp);
	return names;
}

static List *
query_relations(Query *query)
{
	RelationMap map = {NIL, NIL};

	(void) map_relations((Node *) query, &map);
	return map.from;
}

/* ----------------------------------------------------------------
 *		The coordinator
 * ----------------------------------------------------------------
 */

/*
 * Should create_view make a distributed view of this query?  Yes on a
 * Citus coordinator when the query reads a Citus table; everywhere else the
 * ordinary path refuses Citus tables, naming the coordinator.
 */
bool
distributed_wanted(const char *text)
{
	Query	   *query;
	List	   *hints;
	ListCell   *lc;

	if (local_group() != 0)
		return false;
	query = query_parse(text, &hints);
	foreach(lc, query_relations(query))
	{
		if (citus_table_kind(lfirst_oid(lc)) != NULL)
			return true;
	}
	return false;
}

static void
refuse(const char *message, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("distributed delta view: %s", message),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("%s", hint)));
}

/* Union-find over (source, column) pairs: the join's equivalence classes */
typedef struct ColumnClass
{
	int			nitems;
	int		   *source;
	AttrNumber *attno;
	int		   *parent;
} ColumnClass;

static int
class_item(ColumnClass *cc, int source, AttrNumber attno)
{
	for (int i = 0; i < cc->nitems; i++)
	{
		if (cc->source[i] == source && cc->attno[i] == attno)
			return i;
	}
	cc->source[cc->nitems] = source;
	cc->attno[cc->nitems] = attno;
	cc->parent[cc->nitems] = cc->nitems;
	return cc->nitems++;
}

static int
class_root(ColumnClass *cc, int i)
{
	while (cc->parent[i] != i)
		i = cc->parent[i];
	return i;
}

/*
 * Check that the plan runs inside each shard group: every source is a
 * hash-distributed table of one co-location group, the join equates all
 * their distribution columns, and an output column holds that value in
 * every row (it distributes the target).  Returns the output column's
 * number and, in *anchor, a source to co-locate the target with.
 */
static int
check_shard_local(DeltaPlan *plan, Oid *anchor)
{
	int			nsources = list_length(plan->sources);
	int		   *colocation = palloc(sizeof(int) * nsources);
	AttrNumber *distcol = palloc(sizeof(AttrNumber) * nsources);
	ColumnClass cc;
	int			root = -1;
	ListCell   *lc;

	if (plan->branches != NIL)
		refuse("UNION ALL is not supported", NULL,
			   "Make one distributed view per branch.");
	if (plan->path == DJ_PATH_FULL)
		refuse("only joins and aggregates of co-located tables can be distributed",
			   "The query has no delta view's shape, so nothing shows that it runs inside one shard group.",
			   "Join the co-located tables on their distribution column, and group by it.");

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		int			i = foreach_current_index(lc);
		char	   *column;

		if (!citus_distribution(src->relid, &colocation[i], &column))
			refuse(psprintf("source %s is not a distributed table of Citus", src->relname),
				   psprintf("It is %s; a distributed view reads distributed tables co-located with each other, one shard group at a time.",
							citus_table_kind(src->relid) ? citus_table_kind(src->relid) : "a local table"),
				   "Distribute it with create_distributed_table, co-located with the other sources.");
		if (colocation[i] != colocation[0])
			refuse(psprintf("sources %s and %s are not co-located",
							((DeltaSource *) linitial(plan->sources))->relname, src->relname),
				   "Their shards with equal distribution values may be on different nodes.",
				   psprintf("Distribute %s with colocate_with => '%s'.", src->relname,
							((DeltaSource *) linitial(plan->sources))->relname));
		distcol[i] = get_attnum(src->relid, column);
	}

	/* the classes of columns the join equates */
	cc.nitems = 0;
	cc.source = palloc(sizeof(int) * (2 * list_length(plan->conds) + nsources));
	cc.attno = palloc(sizeof(AttrNumber) * (2 * list_length(plan->conds) + nsources));
	cc.parent = palloc(sizeof(int) * (2 * list_length(plan->conds) + nsources));
	foreach(lc, plan->conds)
	{
		DeltaJoinCond *cond = lfirst(lc);
		int			a = class_root(&cc, class_item(&cc, cond->left, cond->left_attno));
		int			b = class_root(&cc, class_item(&cc, cond->right, cond->right_attno));

		cc.parent[a] = b;
	}
	for (int i = 0; i < nsources; i++)
	{
		int			r = class_root(&cc, class_item(&cc, i, distcol[i]));
		DeltaSource *src = list_nth(plan->sources, i);

		if (root == -1)
			root = r;
		else if (r != root)
			refuse(psprintf("the join does not equate the distribution column of %s with the others'",
							src->relname),
				   "A joined row could come from two shard groups.",
				   psprintf("Add %s.%s = ... to the join condition.", src->alias,
							get_attname(src->relid, distcol[i], false)));
	}

	/* an output column, never NULL, equal to the distribution value */
	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *var = (Var *) tle->expr;
		ListCell   *lc2;

		if (tle->resjunk || !IsA(var, Var) || var->varlevelsup != 0)
			continue;
		foreach(lc2, plan->sources)
		{
			DeltaSource *src = lfirst(lc2);
			int			i = foreach_current_index(lc2);

			if (src->rtindex == var->varno && bms_is_empty(src->nulling) &&
				class_root(&cc, class_item(&cc, i, var->varattno)) == root)
			{
				*anchor = src->relid;
				return tle->resno - 1;
			}
		}
	}
	refuse("no output column holds the distribution value",
		   "The target is distributed, co-located with the sources, by a column that holds the sources' distribution value in every row.",
		   plan->kind == DJ_KIND_AGGREGATE ?
		   "Group by the distribution column and select it." :
		   "Select the distribution column of a source that every row has.");
	return -1;					/* keep the compiler quiet */
}

/* A row of the definitions, copied into the current memory context */
static Definition *
definition_from_tuple(HeapTuple tuple, TupleDesc desc)
{
	Definition *def = palloc0(sizeof(Definition));
	bool		isnull;
	Datum		value;

#define COLUMN(name) heap_getattr(tuple, SPI_fnumber(desc, name), desc, &isnull)
	def->target = TextDatumGetCString(COLUMN("target"));
	def->query = TextDatumGetCString(COLUMN("query"));
	value = COLUMN("strategy");
	def->strategy = isnull ? NULL : TextDatumGetCString(value);
	value = COLUMN("options");
	def->options = isnull ? NULL : DatumGetJsonbPCopy(value);
	def->search_path = TextDatumGetCString(COLUMN("search_path"));
	{
		Datum	   *elems;
		int			nelems;

		deconstruct_array(DatumGetArrayTypeP(COLUMN("sources")), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, NULL, &nelems);
		for (int i = 0; i < nelems; i++)
			def->sources = lappend(def->sources, TextDatumGetCString(elems[i]));
	}
	def->settings = DatumGetJsonbPCopy(COLUMN("settings"));
#undef COLUMN
	return def;
}

/* The definition of a distributed target (by OID), or NULL */
static Definition *
definition_of(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	Definition *def = NULL;
	MemoryContext cxt = CurrentMemoryContext;

	if (!OidIsValid(worker_catalog_relid("distributed_catalog")) || !citus_installed())
		return NULL;
	SPI_connect();
	if (catalog_exec("SELECT * FROM " CATALOG_TABLE
					 " WHERE pg_catalog.to_regclass(target) OPERATOR(pg_catalog.=) $1",
					 1, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read " CATALOG_TABLE);
	if (SPI_processed > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		def = definition_from_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return def;
}

/* The targets of every definition, as stored (qualified names) */
static List *
definition_targets(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *targets = NIL;
	uint64		n;

	SPI_connect();
	n = citus_read("SELECT target FROM " CATALOG_TABLE " ORDER BY target", 0, NULL, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		targets = lappend(targets, pstrdup(spi_text(i, 1)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return targets;
}

/*
 * Lock the definitions for reading if nobody keeps them locked (any role
 * may: PUBLIC writes them, through create_view, refresh and drop_view).
 */
static bool
catalog_try_lock(void)
{
	return ConditionalLockRelationOid(worker_catalog_relid("distributed_catalog"), AccessShareLock);
}

/*
 * Does this database have distributed views (definitions)?  With nowait,
 * false too while someone keeps the definitions locked: the apply worker
 * and wait() never queue behind such a lock (DDL checks do wait).
 */
bool
distributed_defined(bool nowait)
{
	bool		defined;

	if (!OidIsValid(worker_catalog_relid("distributed_catalog")) || !citus_installed() ||
		(nowait && !catalog_try_lock()))
		return false;
	SPI_connect();
	if (catalog_exec("SELECT 1 FROM " CATALOG_TABLE " LIMIT 1", 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read " CATALOG_TABLE);
	defined = SPI_processed > 0;
	SPI_finish();
	return defined;
}

/* Run one statement through SPI as the caller; returns SPI_processed */
static uint64
run(const char *sql, int nargs, Oid *types, Datum *values)
{
	int			ret = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (ret < 0)
		elog(ERROR, "statement failed: %s", SPI_result_code_string(ret));
	return SPI_processed;
}

/* The role that owns the Citus extension, which Citus reaches the nodes as */
static Oid
citus_owner(void)
{
	Oid			owner = InvalidOid;

	SPI_connect();
	if (citus_read("SELECT extowner FROM pg_catalog.pg_extension"
				   " WHERE extname OPERATOR(pg_catalog.=) 'citus'", 0, NULL, NULL) == 1)
		owner = atooid(spi_text(0, 1));
	SPI_finish();
	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distributed delta views need Citus")));
	return owner;
}

/*
 * Run one of our internal functions on every node (Citus's
 * run_command_on_all_nodes, each in its own transaction); an error on a
 * node is raised here, naming it.  Returns the nodes' results, as text.
 *
 * They run as the owner of Citus, the role its own maintenance connects to
 * the nodes as, and not as the caller: the functions are not executable by
 * PUBLIC (_prepare_node makes a node's slot and keeps it without views).
 * Restricted as catalog statements are (runas.c): nothing the caller
 * defined runs with those rights.
 */
static List *
run_on_nodes(const char *sql)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(sql)};
	List	   *results = NIL;
	MemoryContext cxt = CurrentMemoryContext;
	RunAs		runas;
	uint64		n;

	runas_begin(citus_owner(), NULL, &runas);
	SPI_connect();
	n = run("SELECT nodeid, success, result FROM pg_catalog.run_command_on_all_nodes($1)",
			1, types, values);
	for (uint64 i = 0; i < n; i++)
	{
		char	   *result = spi_text(i, 3);
		MemoryContext spi;

		if (strcmp(spi_text(i, 2), "t") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("delta_join failed on Citus node %s: %s", spi_text(i, 1),
							result ? result : "(no message)"),
					 errhint("See that node's server log.")));
		spi = MemoryContextSwitchTo(cxt);
		results = lappend(results, pstrdup(result ? result : ""));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	runas_end(&runas);
	return results;
}

/*
 * The schemas the caller's search_path names now, quoted and listed: what
 * the query's names were read under, with "$user" resolved (the nodes may
 * read it again as another role).
 */
static char *
resolved_search_path(void)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, fetch_search_path(false))
	{
		char	   *name = get_namespace_name(lfirst_oid(lc));

		if (name != NULL)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", quote_identifier(name));
	}
	return buf.len > 0 ? buf.data : pstrdup("pg_catalog");
}

/* Is a table empty, read through Citus as the caller? */
static bool
relation_is_empty_distributed(Oid relid)
{
	bool		empty;

	SPI_connect();
	empty = run(psprintf("SELECT 1 FROM %s LIMIT 1",
						 quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
													get_rel_name(relid))),
				0, NULL, NULL) == 0;
	SPI_finish();
	return empty;
}

/*
 * Make the definitions a reference table, once: every node holds them.  On
 * the coordinator, in _prepare_node's own transaction (as the bootstrap
 * superuser, who owns the table: catalog_exec), so that the caller's
 * transaction then writes them over its own connections.
 */
static void
catalog_distribute(void)
{
	Oid			relid = worker_catalog_relid("distributed_catalog");

	/* one at a time: a second would find it distributed */
	LockRelationOid(relid, ShareRowExclusiveLock);
	if (citus_table_kind(relid) != NULL)
		return;
	SPI_connect();
	(void) catalog_exec("SELECT pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true),"
						" pg_catalog.create_reference_table('" CATALOG_TABLE "')",
						0, NULL, NULL, NULL);
	SPI_finish();
}

/*
 * create_view on a coordinator over distributed tables: check that the
 * query runs inside each shard group, make the target (distributed and
 * co-located with the sources), and record the definition, which makes
 * every node create the views of the shard groups it holds in this
 * transaction.
 */
Oid
distributed_create_view(const char *target, const char *text, const char *strategy,
						Jsonb *options_json, DeltaOptions *options)
{
	Query	   *query;
	List	   *source_names;
	List	   *hints;
	DeltaPlan  *plan;
	Oid			anchor = InvalidOid;
	int			column;
	RangeVar   *rv;
	Oid			relid;
	int			colocation;
	int			target_colocation;
	char	   *distcol;
	Oid			types[7] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, JSONBOID, TEXTARRAYOID};
	Datum		values[7];
	char		nulls[7] = "       ";

	if (GetTopTransactionIdIfAny() != InvalidTransactionId || citus_transaction_started())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot create a distributed delta view in a transaction that has already written or used distributed tables"),
				 errdetail("Every node's replication slot is made first, and making one waits for the transactions that have written there, this one included."),
				 errhint("Create the view at the start of its own transaction.")));

	/* every node's slot, before anything is written anywhere */
	worker_ensure_slot();
	(void) run_on_nodes("SELECT delta_join._prepare_node()");
	api_lock_views();

	/*
	 * One connection per node for the rest of the transaction: the node's
	 * trigger that makes the shard views must see the target's shards and
	 * metadata, which Citus would otherwise write over other connections.
	 */
	(void) set_config_option("citus.multi_shard_modify_mode", "sequential", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);

	query = query_parse(text, &hints);
	source_names = relation_names(query_relations(query));
	plan = analyze_distributed(query, hints, options, false);
	column = check_shard_local(plan, &anchor);
	(void) citus_distribution(anchor, &colocation, &distcol);

	rv = makeRangeVarFromNameList(stringToQualifiedNameList(target));
	relid = RangeVarGetRelid(rv, NoLock, true);
	if (OidIsValid(relid))
	{
		char	   *target_col;

		if (!pg_class_ownercheck(relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
						   get_rel_name(relid));
		if (definition_of(relid) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table \"%s\" is already the target of a distributed delta view", target),
					 errhint("Drop that view first with delta_join.drop_view, or name another target.")));
		if (!relation_is_empty_distributed(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("target \"%s\" is not empty", target),
					 errhint("The target is filled from the query; empty it with TRUNCATE first.")));
		if (!citus_distribution(relid, &target_colocation, &target_col) ||
			target_colocation != colocation || strcmp(target_col, plan->colnames[column]) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("target \"%s\" is not distributed by column \"%s\", co-located with %s",
							target, plan->colnames[column], get_rel_name(anchor)),
					 errdetail("Each shard group's view writes into the group's shard of the target."),
					 errhint("Distribute it with create_distributed_table('%s', '%s', colocate_with => '%s'), or name a new table.",
							 target, plan->colnames[column], get_rel_name(anchor))));
	}
	else
	{
		Oid			ctypes[3] = {OIDOID, TEXTOID, TEXTOID};
		Datum		cvalues[3];

		relid = target_create(rv, plan);
		target_add_key(relid, plan);
		cvalues[0] = ObjectIdGetDatum(relid);
		cvalues[1] = CStringGetTextDatum(plan->colnames[column]);
		cvalues[2] = CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(get_rel_namespace(anchor)),
																   get_rel_name(anchor)));
		SPI_connect();
		(void) run("SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)",
				   3, ctypes, cvalues);
		SPI_finish();
	}

	if (citus_table_kind(worker_catalog_relid("distributed_catalog")) == NULL)
		elog(ERROR, CATALOG_TABLE " is not a Citus reference table");
	values[0] = CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
															   get_rel_name(relid)));
	values[1] = CStringGetTextDatum(text);
	values[2] = strategy ? CStringGetTextDatum(strategy) : (Datum) 0;
	nulls[2] = strategy ? ' ' : 'n';
	values[3] = options_json ? JsonbPGetDatum(options_json) : (Datum) 0;
	nulls[3] = options_json ? ' ' : 'n';
	values[4] = CStringGetTextDatum(resolved_search_path());
	values[5] = JsonbPGetDatum(runas_capture_settings());
	{
		Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(source_names), 1));
		ListCell   *lc;

		foreach(lc, source_names)
			elems[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
		values[6] = PointerGetDatum(construct_array(elems, list_length(source_names), TEXTOID, -1,
													false, TYPALIGN_INT));
	}
	/*
	 * As the caller, over the connections the target was made through (the
	 * nodes' trigger must see its shards), and checked there: only the
	 * owner of a distributed target writes its definition.
	 */
	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO " CATALOG_TABLE
							  " (target, query, strategy, options, search_path, settings, sources)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7)", 7, types, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into " CATALOG_TABLE);
	SPI_finish();
	return relid;
}

/*
 * Analyze a distributed view's query on the coordinator, Citus tables let
 * through: its plan, or with explain the lines of explain().
 */
static void *
analyze_distributed(Query *query, List *hints, DeltaOptions *options, bool explain)
{
	void	   *result;

	distributed_analysis = true;
	PG_TRY();
	{
		result = explain ? (void *) explain_plan(query, hints, options) :
			(void *) analyze_choose_path(query, hints, options);
	}
	PG_FINALLY();
	{
		distributed_analysis = false;
	}
	PG_END_TRY();
	return result;
}

/*
 * explain() on a coordinator, of a query over Citus tables: how each shard
 * group's view would be maintained, after what distributing it takes (or
 * why it cannot be).
 */
List *
distributed_explain(const char *text, DeltaOptions *options)
{
	List	   *hints;
	Query	   *query = query_parse(text, &hints);
	List	   *lines;
	MemoryContext cxt = CurrentMemoryContext;
	char	   *first;

	lines = analyze_distributed(query, hints, options, true);
	PG_TRY();
	{
		DeltaPlan  *plan = analyze_distributed(copyObject(query), hints, options, false);
		Oid			anchor;
		int			column = check_shard_local(plan, &anchor);
		int			colocation;
		char	   *distcol;
		int			groups = 0;
		Oid			types[1] = {OIDOID};
		Datum		values[1] = {ObjectIdGetDatum(anchor)};

		(void) citus_distribution(anchor, &colocation, &distcol);
		SPI_connect();
		if (citus_read("SELECT count(*) FROM pg_catalog.pg_dist_shard"
					   " WHERE logicalrelid OPERATOR(pg_catalog.=) $1", 1, types, values) == 1)
			groups = atoi(spi_text(0, 1));
		SPI_finish();
		first = psprintf("Distributed: one view per shard group (%d groups of tables co-located with %s), on the node that holds it; the target is distributed by column %s",
						 groups, get_rel_name(anchor), plan->colnames[column]);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		first = psprintf("Distributed: refused: %s%s%s", edata->message,
						 edata->hint ? " HINT: " : "", edata->hint ? edata->hint : "");
	}
	PG_END_TRY();
	return lcons(first, lines);
}

/*
 * The definition of a distributed target that was dropped (DROP TABLE), by
 * the name drop_view was given: delete it (its shard views went with the
 * target's shards).  False when there is none.
 */
static bool
drop_orphan_definition(const char *target)
{
	List	   *given = stringToQualifiedNameList(target);
	char	   *found = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	uint64		n;

	if (!distributed_defined(false))
		return false;
	SPI_connect();
	n = citus_read("SELECT target FROM " CATALOG_TABLE
				   " WHERE pg_catalog.to_regclass(target) IS NULL", 0, NULL, NULL);
	for (uint64 i = 0; i < n && found == NULL; i++)
	{
		List	   *stored = stringToQualifiedNameList(spi_text(i, 1));

		if (strcmp(strVal(llast(stored)), strVal(llast(given))) == 0 &&
			(list_length(given) == 1 ||
			 strcmp(strVal(linitial(stored)), strVal(linitial(given))) == 0))
			found = MemoryContextStrdup(cxt, spi_text(i, 1));
	}
	SPI_finish();
	if (found == NULL)
		return false;
	delete_orphan_definitions(found);
	return true;
}

/* Delete the definitions whose target is gone (that one, or all if NULL) */
static void
delete_orphan_definitions(const char *target)
{
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1];
	Datum	   *names;
	uint64		n;

	/* (read first, here: a delete writes on every node, in two phases) */
	SPI_connect();
	n = citus_read("SELECT target FROM " CATALOG_TABLE
				   " WHERE pg_catalog.to_regclass(target) IS NULL", 0, NULL, NULL);
	names = palloc(sizeof(Datum) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		names[i] = CStringGetTextDatum(spi_text(i, 1));
	if (target != NULL)
	{
		names[0] = CStringGetTextDatum(target);
		n = 1;
	}
	if (n > 0)
	{
		values[0] = PointerGetDatum(construct_array(names, (int) n, TEXTOID, -1, false, TYPALIGN_INT));
		if (SPI_execute_with_args("DELETE FROM " CATALOG_TABLE
								  " WHERE target OPERATOR(pg_catalog.=) ANY ($1)",
								  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from " CATALOG_TABLE);
	}
	SPI_finish();
}

/*
 * drop_view on a coordinator, of a distributed view: delete its definition
 * (every node drops its shard views, keeping their targets), then drop the
 * distributed target, or keep it.  False when target is no distributed view.
 */
bool
distributed_drop_view(const char *target, bool drop_table)
{
	Oid			relid;
	Definition *def;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];

	if (local_group() != 0)
		return false;

	/* changes to distributed views are made one at a time, as on one node */
	api_lock_views();
	relid = relation_named(target);
	if (!OidIsValid(relid))
		return drop_orphan_definition(target);
	if ((def = definition_of(relid)) == NULL)
		return false;
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));

	values[0] = CStringGetTextDatum(def->target);
	SPI_connect();
	(void) run("DELETE FROM " CATALOG_TABLE " WHERE target OPERATOR(pg_catalog.=) $1",
			   1, types, values);
	SPI_finish();
	if (drop_table)
	{
		SPI_connect();
		(void) run(psprintf("DROP TABLE %s", def->target), 0, NULL, NULL);
		SPI_finish();
	}
	return true;
}

/*
 * refresh on a coordinator, of a distributed view: touch its definition,
 * which makes every node refresh its shard views (and create missing ones)
 * in this transaction.  Returns the rows of the target, or -1 when target
 * is no distributed view.
 */
int64
distributed_refresh(const char *target)
{
	Oid			relid;
	Definition *def;
	Oid			types[1] = {TEXTOID};
	Datum		values[1];
	int64		rows;

	if (local_group() != 0)
		return -1;
	relid = relation_named(target);
	if (!OidIsValid(relid) || (def = definition_of(relid)) == NULL)
		return -1;
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	api_lock_views();
	values[0] = CStringGetTextDatum(def->target);
	SPI_connect();
	(void) run("UPDATE " CATALOG_TABLE " SET refreshed = pg_catalog.now()"
			   " WHERE target OPERATOR(pg_catalog.=) $1",
			   1, types, values);
	(void) run(psprintf("SELECT pg_catalog.count(*) FROM %s", def->target), 0, NULL, NULL);
	rows = pg_strtoint64(spi_text(0, 1));
	SPI_finish();
	return rows;
}

/* Where every shard is placed now, as text */
static char *
placements_now(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *result;

	SPI_connect();
	(void) citus_read("SELECT pg_catalog.string_agg(shardid || ':' || groupid, ',' ORDER BY shardid, groupid)"
					  " FROM pg_catalog.pg_dist_placement", 0, NULL, NULL);
	result = MemoryContextStrdup(cxt, spi_text(0, 1) ? spi_text(0, 1) : "");
	SPI_finish();
	return result;
}

/*
 * wait() on a coordinator, for a distributed view (or, target NULL, all of
 * them): every node first makes the views of the shard groups it holds and
 * has none for, then waits for them.  Returns 1 when every shard group has
 * applied the changes committed before the call, 0 if not, -1 when target
 * is no distributed view.
 */
int
distributed_wait(const char *target, int64 timeout_ms)
{
	char	   *name = NULL;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Min(timeout_ms, INT64CONST(1000000000000)));
	ListCell   *lc;

	if (local_group() != 0)
		return -1;

	/* not behind someone who keeps the definitions locked: until the deadline */
	while (!catalog_try_lock())
	{
		if (GetCurrentTimestamp() >= deadline)
			return 0;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
	if (target != NULL)
	{
		Oid			relid = relation_named(target);
		Definition *def;

		if (!OidIsValid(relid) || (def = definition_of(relid)) == NULL)
			return -1;
		name = def->target;
	}
	else if (!distributed_defined(true))
		return -1;

	/*
	 * A group moving has no view for a moment on either node: sync and
	 * wait again, until the deadline.
	 */
	for (;;)
	{
		bool		done = true;
		char	   *placements = placements_now();

		(void) run_on_nodes("SELECT delta_join._sync_node()");
		foreach(lc, run_on_nodes(psprintf("SELECT delta_join._wait_node(%s, %lld)",
										  name ? quote_literal_cstr(name) : "NULL",
										  (long long) Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline), 0))))
			done &= (strcmp(lfirst(lc), "t") == 0);

		/* a group that moved meanwhile may have been waited for nowhere */
		if (done && strcmp(placements, placements_now()) == 0)
			return 1;
		if (GetCurrentTimestamp() >= deadline)
			return 0;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}

/* ----------------------------------------------------------------
 *		The nodes
 * ----------------------------------------------------------------
 */

/*
 * The distributed view whose shard group this view's target is (the
 * definition's target name), or NULL.
 */
char *
distributed_managed_by(Oid relid)
{
	return catalog_managed_by(relid);
}

/* Does this node hold a placement of shard shardid? */
static bool
placement_is_local(const char *shardid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {DirectFunctionCall1(int8in, CStringGetDatum(shardid))};
	bool		local;

	SPI_connect();
	local = citus_read("SELECT 1 FROM pg_catalog.pg_dist_placement"
					   " WHERE shardid OPERATOR(pg_catalog.=) $1 AND groupid OPERATOR(pg_catalog.=)"
					   " (SELECT groupid FROM pg_catalog.pg_dist_local_group)",
					   1, types, values) > 0;
	SPI_finish();
	return local;
}

/*
 * Create the view of one shard group: the definition's query, parsed under
 * its search_path, with each distributed table replaced by its shard in the
 * group (the shard with the same hash range), into the group's shard of the
 * target, which it fills.
 */
static void
create_shard_view(Definition *def, Oid target_shard, const char *minvalue)
{
	int			nestlevel = NewGUCNestLevel();
	Query	   *query;
	List	   *hints;
	DeltaOptions options;
	RelationMap map = {NIL, NIL};
	ListCell   *lc;

	(void) set_config_option("search_path", def->search_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	options_resolve(&options, def->strategy, def->options);
	query = query_parse(def->query, &hints);

	/* the names must still name what they named at creation */
	if (def->sources != NIL)
	{
		List	   *now = relation_names(query_relations(query));
		ListCell   *lc1;
		ListCell   *lc2;
		bool		same = list_length(now) == list_length(def->sources);

		forboth(lc1, now, lc2, def->sources)
			same &= (strcmp(lfirst(lc1), lfirst(lc2)) == 0);
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the query of distributed view \"%s\" now reads other tables than when it was made",
							def->target),
					 errhint("Drop the view and create it again.")));
	}

	foreach(lc, query_relations(query))
	{
		Oid			relid = lfirst_oid(lc);
		Oid			types[2] = {OIDOID, TEXTOID};
		Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(minvalue)};
		Oid			shard = InvalidOid;

		if (citus_table_kind(relid) == NULL)
			continue;
		SPI_connect();
		if (citus_read("SELECT pg_catalog.shard_name(logicalrelid, shardid)"
					   " FROM pg_catalog.pg_dist_shard"
					   " WHERE logicalrelid OPERATOR(pg_catalog.=) $1"
					   " AND shardminvalue OPERATOR(pg_catalog.=) $2",
					   2, types, values) == 1)
			shard = shard_relation(spi_text(0, 1), relid);
		SPI_finish();
		if (!OidIsValid(shard))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("distributed view \"%s\": the shard of %s co-located with %s is not on this node",
							def->target, get_rel_name(relid), get_rel_name(target_shard))));
		map.from = lappend_oid(map.from, relid);
		map.to = lappend_oid(map.to, shard);
	}
	if (map.to != NIL)
	{
		ColumnMap	cm = {&map, NIL};

		(void) map_columns((Node *) query, &cm);
		(void) map_relations((Node *) query, &map);
	}

	(void) api_create_view_from(quote_qualified_identifier(get_namespace_name(get_rel_namespace(target_shard)),
														   get_rel_name(target_shard)),
								query, hints, &options, def->settings, true, def->target);
	AtEOXact_GUC(true, nestlevel);
}

/*
 * Bring this node's shard views of one definition in line with the shard
 * groups it holds: create the missing ones, and refresh the others if
 * asked.
 */
static void
sync_definition(Definition *def, bool refresh)
{
	Oid			logical = relation_named(def->target);
	int			colocation;
	char	   *distcol;
	Oid			types[1] = {OIDOID};
	Datum		values[1];
	List	   *shards = NIL;
	List	   *minvalues = NIL;
	ListCell   *lc1;
	ListCell   *lc2;
	MemoryContext cxt = CurrentMemoryContext;
	uint64		n;

	if (!OidIsValid(logical) || !citus_distribution(logical, &colocation, &distcol))
		return;					/* (gone, or no longer hash-distributed) */
	values[0] = ObjectIdGetDatum(logical);
	SPI_connect();
	n = citus_read("SELECT pg_catalog.shard_name(s.logicalrelid, s.shardid), s.shardminvalue"
				   " FROM pg_catalog.pg_dist_shard s"
				   " JOIN pg_catalog.pg_dist_placement p USING (shardid)"
				   " WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1"
				   " AND s.shardminvalue IS NOT NULL"
				   " AND p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
				   " ORDER BY s.shardid",
				   1, types, values);
	for (uint64 i = 0; i < n; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		shards = lappend(shards, pstrdup(spi_text(i, 1)));
		minvalues = lappend(minvalues, pstrdup(spi_text(i, 2)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();

	forboth(lc1, shards, lc2, minvalues)
	{
		Oid			shard = shard_relation(lfirst(lc1), logical);
		ViewRecord	view;

		if (!OidIsValid(shard))
			continue;			/* a placement being made by a move */
		if (catalog_find_view(shard, &view))
		{
			if (refresh)
				(void) api_refresh_view(&view, false);
			continue;
		}

		/*
		 * Found by its name, unlocked: lock it as making its view will, and
		 * make sure it is still there (Citus drops and makes shards again).
		 */
		LockRelationOid(shard, ExclusiveLock);
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(shard)))
			create_shard_view(def, shard, lfirst(lc2));
	}
}

/* This node's shard views: (ViewRecord *, shard id as text) of each */
static List *
local_shard_views(List **shardids)
{
	List	   *result = NIL;
	ListCell   *lc;

	*shardids = NIL;
	foreach(lc, catalog_list_views())
	{
		ViewRecord *view = lfirst(lc);
		Oid			logical = citus_shard_of(view->target);
		char	   *name;

		/* (a target Citus dropped since the views were read has no name) */
		if (!OidIsValid(logical) || (name = get_rel_name(view->target)) == NULL)
			continue;
		result = lappend(result, view);
		*shardids = lappend(*shardids, pstrdup(strrchr(name, '_') + 1));
	}
	return result;
}

/*
 * Drop a shard view, keeping its target.  The view was read without a lock,
 * and Citus drops the shards of a group that moved or split away whenever
 * its cleanup runs, taking the view along (guard.c): the target is locked
 * first, in the mode unguarding it takes (DROP TRIGGER), and the view and
 * its target looked up again, so that what is dropped is what is there.
 */
static void
drop_shard_view(ViewRecord *view)
{
	ViewRecord	current;

	LockRelationOid(view->target, AccessExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(view->target)) ||
		!catalog_get_view(view->view_id, &current))
		return;
	api_drop_view(&current, false);
}

/*
 * Drop this node's shard views, keeping their targets: those of the
 * definition def_target (the trigger, when it is deleted), or, with
 * def_target NULL, those whose definition is not in live_targets or whose
 * shard group moved away (the sync).
 */
static void
drop_shard_views(const char *def_target, List *live_targets)
{
	List	   *shardids;
	List	   *views = local_shard_views(&shardids);
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, views, lc2, shardids)
	{
		ViewRecord *view = lfirst(lc1);
		char	   *managed_by = distributed_managed_by(view->target);
		bool		live = false;
		ListCell   *lc3;

		if (managed_by == NULL)
			continue;			/* a view a user made over shards */
		if (def_target != NULL)
		{
			if (strcmp(managed_by, def_target) == 0)
				drop_shard_view(view);
			continue;
		}
		foreach(lc3, live_targets)
			live |= (strcmp(managed_by, lfirst(lc3)) == 0);
		if (!live || !placement_is_local(lfirst(lc2)))
			drop_shard_view(view);
	}
}

/*
 * On a coordinator, the apply worker makes every node that joined since it
 * last looked sync itself: a new node has no slot, hence no worker, until
 * told (run_command_on_workers: the coordinator's own views are this
 * worker's).
 */
static void
sync_new_nodes(void)
{
	static char *known_nodes = NULL;
	char	   *nodes = NULL;

	SPI_connect();
	if (citus_read("SELECT pg_catalog.string_agg(nodeid::text, ',' ORDER BY nodeid)"
				   " FROM pg_catalog.pg_dist_node WHERE isactive AND groupid OPERATOR(pg_catalog.<>) 0",
				   0, NULL, NULL) == 1)
		nodes = spi_text(0, 1);
	if (nodes != NULL && (known_nodes == NULL || strcmp(nodes, known_nodes) != 0))
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum("SELECT delta_join._sync_node()")};

		(void) run("SELECT pg_catalog.run_command_on_workers($1)", 1, types, values);
		if (known_nodes != NULL)
			pfree(known_nodes);
		known_nodes = MemoryContextStrdup(TopMemoryContext, nodes);
	}
	SPI_finish();
}

/*
 * Run fn(arg) in a subtransaction; an error is rolled back and logged as a
 * WARNING that begins with what (unless what is NULL), and the caller goes
 * on.  Returns false after an error.
 */
bool
distributed_try(void (*fn) (void *arg), void *arg, const char *what)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		if (what != NULL)
			ereport(WARNING, (errmsg("delta_join: %s: %s", what, edata->message)));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return ok;
}

/* Make this node's missing views of one distributed view (its target's name) */
static void
sync_target(void *arg)
{
	Oid			relid = relation_named((char *) arg);
	Definition *def = OidIsValid(relid) ? definition_of(relid) : NULL;

	if (def != NULL)
		sync_definition(def, false);
}

/*
 * Bring every shard view of this node in line with the definitions and the
 * placements it holds (the apply worker, once a second; _sync_node()).
 */
void
distributed_sync_node(void)
{
	static TimestampTz last_warning = 0;
	List	   *targets;
	ListCell   *lc;
	bool		loud;

	if (!distributed_defined(true))
		return;
	worker_ensure_slot();

	/*
	 * A transaction that changes views holds the lock, perhaps the very one
	 * whose wait() asked for this sync over another connection: never wait
	 * for it (the next round will do; wait() then finds a group without its
	 * view and returns false).
	 */
	if (!api_try_lock_views())
		return;
	targets = definition_targets();

	if (IsBackgroundWorker && local_group() == 0)
	{
		sync_new_nodes();
		delete_orphan_definitions(NULL);
	}
	drop_shard_views(NULL, targets);

	/*
	 * Each view on its own: one that fails does not hold the others back.
	 * The worker logs the failures of a round at most once a minute (a view
	 * whose names no longer resolve fails every round).
	 */
	loud = IsBackgroundWorker &&
		TimestampDifferenceExceeds(last_warning, GetCurrentTimestamp(), 60 * 1000);
	foreach(lc, targets)
	{
		if (!distributed_try(sync_target, lfirst(lc),
							 loud ? psprintf("could not make the views of distributed view \"%s\" on this node",
											 (char *) lfirst(lc)) : NULL) && loud)
			last_warning = GetCurrentTimestamp();
	}
}

/*
 * Only the owner of a distributed target writes its definition (create_view,
 * refresh and drop_view on the coordinator do, as the caller).
 */
static void
check_definition_writer(Definition *def, bool deleting)
{
	Oid			relid;
	int			colocation;
	char	   *distcol;

	if (!citus_installed())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distributed delta views need Citus")));
	relid = relation_named(def->target);
	if (!OidIsValid(relid))
	{
		/* a definition whose target is gone: anyone may remove it */
		if (deleting)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("distributed target \"%s\" does not exist", def->target)));
	}
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	if (!deleting && !citus_distribution(relid, &colocation, &distcol))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a hash-distributed table of Citus", def->target),
				 errhint("Create distributed views with delta_join.create_view on the coordinator.")));
}

/* The row trigger on the definitions: see the banner */
Datum
dj_on_distributed_catalog(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	TupleDesc	desc;
	Definition *def;

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_AFTER(trigdata->tg_event))
		elog(ERROR, "dj_on_distributed_catalog: not called as an AFTER ROW trigger");

	/* only a node's copy holds rows: Citus never writes into the shell */
	if (citus_table_kind(RelationGetRelid(trigdata->tg_relation)) != NULL)
		return PointerGetDatum(NULL);

	desc = RelationGetDescr(trigdata->tg_relation);
	check_definition_writer(definition_from_tuple(trigdata->tg_trigtuple, desc),
							TRIGGER_FIRED_BY_DELETE(trigdata->tg_event));
	api_lock_views();
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
	{
		def = definition_from_tuple(trigdata->tg_trigtuple, desc);
		drop_shard_views(def->target, NIL);
	}
	else if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		sync_definition(definition_from_tuple(trigdata->tg_trigtuple, desc), false);
	else
	{
		Definition *old = definition_from_tuple(trigdata->tg_trigtuple, desc);

		def = definition_from_tuple(trigdata->tg_newtuple, desc);
		check_definition_writer(def, false);

		/* refresh touches its time; a definition is never edited */
		if (strcmp(old->target, def->target) != 0 || strcmp(old->query, def->query) != 0 ||
			strcmp(old->search_path, def->search_path) != 0 ||
			(old->strategy == NULL) != (def->strategy == NULL) ||
			(old->strategy && strcmp(old->strategy, def->strategy) != 0) ||
			(old->options == NULL) != (def->options == NULL) ||
			(old->options && compareJsonbContainers(&old->options->root, &def->options->root) != 0) ||
			compareJsonbContainers(&old->settings->root, &def->settings->root) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a distributed view's definition cannot be changed"),
					 errhint("Drop the view and create it again.")));
		sync_definition(def, true);
	}
	return PointerGetDatum(NULL);
}

/*
 * _prepare_node(): make this database's slot, and keep it (with its worker)
 * while no shard group is here yet: the coordinator calls it on every node
 * before its first write of a distributed view (run_on_nodes).  Not
 * executable by PUBLIC: any role could make the slot otherwise.
 */
Datum
dj_prepare_node(PG_FUNCTION_ARGS)
{
	api_check_primary("_prepare_node");

	/*
	 * Making the slot waits for the transactions that have written here;
	 * one of them may be the coordinator's own, which waits for us.
	 */
	(void) set_config_option("lock_timeout", "10s", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	worker_ensure_slot();
	worker_set_distributed(MyDatabaseId);
	if (local_group() == 0)
		catalog_distribute();
	PG_RETURN_VOID();
}

static void
sync_node(void *arg)
{
	distributed_sync_node();
}

/*
 * _sync_node(): distributed_sync_node, for the coordinator's wait() and
 * its worker (not executable by PUBLIC, as _prepare_node).
 */
Datum
dj_sync_node(PG_FUNCTION_ARGS)
{
	Oid			save_userid;
	int			save_sec_context;

	api_check_primary("_sync_node");
	worker_set_distributed(MyDatabaseId);

	/* (in a transaction block it would keep the view lock: leave it to the worker) */
	if (IsTransactionBlock())
		PG_RETURN_VOID();

	/*
	 * The views are brought in line with the definitions their owners wrote
	 * and run as their targets' owners, whoever asked.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	/* (a failure, say a deadlock with Citus dropping a moved shard, is the next round's) */
	distributed_try(sync_node, NULL, "could not update the views of this node's shard groups");
	SetUserIdAndSecContext(save_userid, save_sec_context);
	PG_RETURN_VOID();
}

/*
 * _wait_node(target text, timeout_ms bigint) RETURNS boolean: wait for this
 * node's shard views of one distributed view (all if NULL); false when one
 * of its shard groups here has no view, or a wait timed out.  For the
 * coordinator's wait() (not executable by PUBLIC, as _prepare_node).
 */
Datum
dj_wait_node(PG_FUNCTION_ARGS)
{
	char	   *target = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	int64		timeout_ms = PG_ARGISNULL(1) ? -1 : PG_GETARG_INT64(1);
	List	   *shardids;
	List	   *views = local_shard_views(&shardids);
	List	   *names = NIL;
	bool		done = true;
	ListCell   *lc;
	Oid			save_userid;
	int			save_sec_context;

	if (!distributed_defined(true))
		PG_RETURN_BOOL(false);	/* (locked by someone, or gone) */

	/*
	 * Waiting shows nothing of a view: the coordinator's wait() waits for
	 * all, including those in schemas its caller cannot use.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		char	   *managed_by = distributed_managed_by(view->target);

		if (managed_by != NULL && (target == NULL || strcmp(managed_by, target) == 0))
			names = lappend(names, catalog_view_name(view));
	}

	/* every shard group here has its view */
	SPI_connect();
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {target ? CStringGetTextDatum(target) : (Datum) 0};
		uint64		n;

		n = citus_read(target ?
					   "SELECT 1 FROM pg_catalog.pg_dist_shard s"
					   " JOIN pg_catalog.pg_dist_placement p USING (shardid)"
					   " WHERE p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
					   " AND s.logicalrelid OPERATOR(pg_catalog.=) pg_catalog.to_regclass($1)" :
					   "SELECT 1 FROM pg_catalog.pg_dist_shard s"
					   " JOIN pg_catalog.pg_dist_placement p USING (shardid)"
					   " WHERE p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
					   " AND s.logicalrelid IN (SELECT pg_catalog.to_regclass(target) FROM " CATALOG_TABLE ")",
					   target ? 1 : 0, types, values);
		if (n > (uint64) list_length(names))
			done = false;
	}
	SPI_finish();

	foreach(lc, names)
	{
		Oid			types[2] = {TEXTOID, INTERVALOID};
		Datum		values[2];

		if (!done)
			break;
		values[0] = CStringGetTextDatum(lfirst(lc));
		values[1] = DirectFunctionCall3(interval_in,
										CStringGetDatum(psprintf("%lld ms", (long long) Max(timeout_ms, 0))),
										ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		SPI_connect();
		if (run("SELECT delta_join.wait($1, $2)", 2, types, values) != 1 ||
			strcmp(spi_text(0, 1), "t") != 0)
			done = false;
		SPI_finish();
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);
	PG_RETURN_BOOL(done);
}

/* The relations a definition's query reads (as parsed on this node) */
static void
definition_relations(void *arg)
{
	List	  **result = (List **) arg;
	Definition *def = (Definition *) linitial(*result);
	int			nestlevel = NewGUCNestLevel();
	List	   *hints;

	(void) set_config_option("search_path", def->search_path, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	*result = lappend(*result, query_relations(query_parse(def->query, &hints)));
	AtEOXact_GUC(true, nestlevel);
}

typedef enum DefinitionUse
{
	USES_NONE,
	USES_AS_TARGET,
	USES_AS_SOURCE
} DefinitionUse;

/*
 * Does the distributed view of target (its definition's name) use one of
 * relids, or a relation of one of nspids, as its target or as a source?
 * Its query is read as the bootstrap superuser: the caller may not see the
 * others' schemas; one that no longer parses uses no source.
 */
static DefinitionUse
definition_uses(const char *target, List *relids, List *nspids)
{
	Oid			relid;
	Definition *def;
	List	   *parsed;
	Oid			save_userid;
	int			save_sec_context;
	ListCell   *lc;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	relid = relation_named(target);
	def = OidIsValid(relid) ? definition_of(relid) : NULL;
	parsed = list_make1(def);
	if (def != NULL)
		distributed_try(definition_relations, &parsed, NULL);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	if (def == NULL)
		return USES_NONE;
	if (list_member_oid(relids, relid) || list_member_oid(nspids, get_rel_namespace(relid)))
		return USES_AS_TARGET;
	if (list_length(parsed) < 2)
		return USES_NONE;
	foreach(lc, (List *) lsecond(parsed))
	{
		if (list_member_oid(relids, lfirst_oid(lc)) ||
			list_member_oid(nspids, get_rel_namespace(lfirst_oid(lc))))
			return USES_AS_SOURCE;
	}
	return USES_NONE;
}

/*
 * ddl_command_start, on a coordinator: refuse to rename, or move to another
 * schema, a relation a distributed view reads or writes, one of their
 * columns, or a schema holding one.  Its definition names them as text,
 * which the nodes read again when a shard group moves.  (Any RenameStmt
 * with a relation counts: ALTER INDEX or ALTER VIEW can rename a table.)
 */
void
distributed_check_rename(Node *parsetree)
{
	RangeVar   *relation = NULL;
	Oid			relid = InvalidOid;
	Oid			nspid = InvalidOid;
	ListCell   *lc;

	if (IsA(parsetree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) parsetree;

		/* (constraints, triggers, rules and policies keep their names out of it) */
		if (stmt->renameType == OBJECT_TABCONSTRAINT || stmt->renameType == OBJECT_TRIGGER ||
			stmt->renameType == OBJECT_RULE || stmt->renameType == OBJECT_POLICY)
			return;
		relation = stmt->relation;
		if (stmt->renameType == OBJECT_SCHEMA)
			nspid = get_namespace_oid(stmt->subname, true);
	}
	else
		relation = ((AlterObjectSchemaStmt *) parsetree)->relation;
	if (relation == NULL && !OidIsValid(nspid))
		return;
	if (local_group() != 0 || !distributed_defined(false))
		return;
	if (relation != NULL)
	{
		relid = RangeVarGetRelid(relation, NoLock, true);
		if (!OidIsValid(relid) || citus_table_kind(relid) == NULL)
			return;
	}

	foreach(lc, definition_targets())
	{
		if (definition_uses(lfirst(lc), list_make1_oid(relid), list_make1_oid(nspid)) != USES_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot rename \"%s\" or move it to another schema: distributed view \"%s\" uses it",
							OidIsValid(relid) ? get_rel_name(relid) : get_namespace_name(nspid),
							(char *) lfirst(lc)),
					 errdetail("A distributed view's definition names its tables, their columns and schemas, which the nodes read again when a shard group moves."),
					 errhint("Drop the distributed view, rename, and create it again.")));
	}
}

/*
 * ddl_command_start, on a coordinator: DROP TABLE or DROP SCHEMA of what a
 * distributed view uses deletes its definition first, as drop_view does, so
 * that the nodes drop the shard views before Citus drops the shards, and a
 * table made again under the name is not taken for the old one.  A source
 * goes only with CASCADE, which drops the view (its target stays), as core
 * would for a view of one node.
 */
void
distributed_forget_dropped(DropStmt *stmt)
{
	List	   *relids = NIL;
	List	   *nspids = NIL;
	ListCell   *lc;

	if ((stmt->removeType != OBJECT_TABLE && stmt->removeType != OBJECT_SCHEMA) ||
		local_group() != 0 || !distributed_defined(false))
		return;
	foreach(lc, stmt->objects)
	{
		if (stmt->removeType == OBJECT_TABLE)
			relids = lappend_oid(relids,
								 RangeVarGetRelid(makeRangeVarFromNameList(lfirst(lc)), NoLock, true));
		else
			nspids = lappend_oid(nspids, get_namespace_oid(strVal(lfirst(lc)), true));
	}

	foreach(lc, definition_targets())
	{
		DefinitionUse use = definition_uses(lfirst(lc), relids, nspids);
		Oid			types[1] = {TEXTOID};
		Datum		values[1];

		if (use == USES_NONE)
			continue;
		if (use == USES_AS_SOURCE)
		{
			if (stmt->behavior != DROP_CASCADE)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("cannot drop a source of distributed view \"%s\"", (char *) lfirst(lc)),
						 errhint("Drop the view first with delta_join.drop_view, or use DROP ... CASCADE, which drops the view and keeps its target.")));
			ereport(NOTICE,
					(errmsg("drop cascades to distributed view \"%s\" (its target stays)",
							(char *) lfirst(lc))));
		}
		values[0] = CStringGetTextDatum(lfirst(lc));
		SPI_connect();
		(void) run("DELETE FROM " CATALOG_TABLE " WHERE target OPERATOR(pg_catalog.=) $1",
				   1, types, values);
		SPI_finish();
	}
}
