/*-------------------------------------------------------------------------
 *
 * citus_tables.c
 *	  Every read of Citus's catalog: which tables Citus holds and how, their
 *	  shards and where they are placed, the nodes, this node's group, and
 *	  the owner of the extension.
 *
 * A Citus distributed or reference table keeps its rows, and their changes,
 * in shards on the worker nodes: a view over it on the coordinator would be
 * backfilled once and never see a change.  Such sources and targets are
 * refused, but on a coordinator's distributed path (citus/), which makes
 * one view per shard group on the nodes.  Views over shard tables on the
 * node that holds them are ordinary views, and a shard may be their
 * target; drop_view does not drop it (that would break its distributed
 * table).  The analysis, the worker, the view operations and the Citus
 * layer all ask here.
 *
 * Citus is read from its catalog tables (pg_catalog.pg_dist_partition,
 * pg_dist_shard, pg_dist_placement, pg_dist_node, pg_dist_local_group) and
 * the SQL functions that read them (column_to_column_name, shard_name,
 * get_current_transaction_id), looked up by name, so delta_join needs
 * neither its headers nor its library; without Citus every answer is "no".
 * Two ways in: a system-table scan for the questions asked of one table
 * (citus_table_kind, citus_shard_of), which need no SPI, and SQL for the
 * rest, run through catalog_exec (as the bootstrap superuser, with the
 * shards visible), each function connecting to SPI itself.  What Citus is
 * told to do (create_distributed_table, run_command_on_all_nodes ...) is
 * the Citus layer's (citus/).
 *
 * Citus's library is loaded into the same processes, before this one, and
 * exports many C functions named citus_*: a new name here must not be one
 * of them, or calls to it would reach Citus's.
 *
 * IDENTIFICATION
 *	  src/registry/citus_tables.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"

#include "base/compat.h"

#include "registry/catalog.h"
#include "registry/citus_tables.h"

/* Citus's catalog table of that name, or InvalidOid */
static Oid
citus_catalog(const char *catalog)
{
	return get_relname_relid(catalog, PG_CATALOG_NAMESPACE);
}

/* A column of a tuple that citus_catalog_find returned; NULL if missing */
static Datum
citus_column(const char *catalog, HeapTuple tuple, TupleDesc desc,
			 const char *column, bool *isnull)
{
	AttrNumber	attnum = get_attnum(citus_catalog(catalog), column);

	*isnull = true;
	if (attnum == InvalidAttrNumber || attnum > desc->natts)
		return (Datum) 0;
	return heap_getattr(tuple, attnum, desc, isnull);
}

/*
 * The first tuple of Citus's catalog table "catalog" (in pg_catalog) whose
 * column "column" equals value, as a copy, or NULL; NULL too without Citus.
 * The table is small and read once per create_view, so a heap scan does.
 */
static HeapTuple
citus_catalog_find(const char *catalog, const char *column, Oid type,
				   RegProcedure eq, Datum value, TupleDesc *desc)
{
	Oid			relid = citus_catalog(catalog);
	Relation	rel;
	AttrNumber	attnum;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	HeapTuple	result = NULL;

	if (!OidIsValid(relid))
		return NULL;
	attnum = get_attnum(relid, column);
	if (attnum == InvalidAttrNumber || get_atttype(relid, attnum) != type)
		return NULL;

	rel = table_open(relid, AccessShareLock);
	ScanKeyInit(&key, attnum, BTEqualStrategyNumber, eq, value);
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		result = heap_copytuple(tuple);
		*desc = CreateTupleDescCopy(RelationGetDescr(rel));
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * How Citus holds the table: "a distributed table", "a reference table" or
 * "a Citus table" (another kind, such as a Citus local table); NULL when it
 * is not a Citus table.
 */
const char *
citus_table_kind(Oid relid)
{
	TupleDesc	desc = NULL;
	HeapTuple	tuple;
	bool		isnull;
	Datum		method;
	Datum		model;
	const char *kind;

	tuple = citus_catalog_find("pg_dist_partition", "logicalrelid", REGCLASSOID,
							   F_OIDEQ, ObjectIdGetDatum(relid), &desc);
	if (tuple == NULL)
		return NULL;

	method = citus_column("pg_dist_partition", tuple, desc, "partmethod", &isnull);
	kind = "a Citus table";
	if (!isnull && DatumGetChar(method) == 'h')
		kind = "a distributed table";
	else if (!isnull && DatumGetChar(method) == 'n')
	{
		model = citus_column("pg_dist_partition", tuple, desc, "repmodel", &isnull);
		if (!isnull && DatumGetChar(model) == 't')
			kind = "a reference table";
	}
	return kind;
}

/*
 * A source of the view (SourceRecord *) that Citus now holds, or InvalidOid:
 * distributing a table after a view over it was created moves its rows and
 * their changes to the shards, and no DDL event tells.
 */
Oid
citus_source_of(List *sources)
{
	ListCell   *lc;

	foreach(lc, sources)
	{
		Oid			relid = ((SourceRecord *) lfirst(lc))->relid;

		if (citus_table_kind(relid) != NULL)
			return relid;
	}
	return InvalidOid;
}

/*
 * The distributed table whose shard this table is (named "<table>_<shard
 * id>" in the same schema), or InvalidOid.
 */
Oid
citus_shard_of(Oid relid)
{
	char	   *name = get_rel_name(relid);
	char	   *underscore;
	char	   *end;
	int64		shardid;
	TupleDesc	desc = NULL;
	HeapTuple	tuple;
	bool		isnull;
	Oid			logical;
	char	   *logical_name;

	if (name == NULL || (underscore = strrchr(name, '_')) == NULL || underscore[1] == '\0')
		return InvalidOid;
	errno = 0;
	shardid = strtoi64(underscore + 1, &end, 10);
	if (errno != 0 || *end != '\0' || shardid <= 0)
		return InvalidOid;

	tuple = citus_catalog_find("pg_dist_shard", "shardid", INT8OID, F_INT8EQ,
							   Int64GetDatum(shardid), &desc);
	if (tuple == NULL)
		return InvalidOid;
	logical = DatumGetObjectId(citus_column("pg_dist_shard", tuple, desc, "logicalrelid", &isnull));
	if (isnull || get_rel_namespace(logical) != get_rel_namespace(relid))
		return InvalidOid;
	logical_name = get_rel_name(logical);
	if (logical_name == NULL)
		return InvalidOid;

	/*
	 * "<table>_<shard id>"; a name too long for that is shortened by Citus
	 * ("<prefix>_<hash>_<shard id>", within NAMEDATALEN).
	 */
	if (strlen(logical_name) == (size_t) (underscore - name) &&
		strncmp(logical_name, name, underscore - name) == 0)
		return logical;
	if (strlen(logical_name) + strlen(underscore) >= NAMEDATALEN - 1 &&
		strncmp(logical_name, name, Min(10, underscore - name)) == 0)
		return logical;
	return InvalidOid;
}

/* ----------------------------------------------------------------
 *		Reads through SQL (catalog_exec)
 * ----------------------------------------------------------------
 */

/* Is Citus installed in this database? */
bool
citus_present(void)
{
	return OidIsValid(citus_catalog("pg_dist_partition")) &&
		OidIsValid(citus_catalog("pg_dist_local_group"));
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
citus_text(uint64 i, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col);
}

/*
 * The first column of the first row of a read of Citus's catalog, as text
 * in the caller's memory context; NULL when it has no row, or NULL there
 */
static char *
citus_value(const char *sql, int nargs, Oid *types, Datum *values)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *value = NULL;

	SPI_connect();
	if (citus_read(sql, nargs, types, values) > 0 && citus_text(0, 1) != NULL)
		value = MemoryContextStrdup(cxt, citus_text(0, 1));
	SPI_finish();
	return value;
}

/* This node's group in Citus's metadata (0 on the coordinator), or -1 */
int
citus_local_group(void)
{
	char	   *group;

	if (!citus_present())
		return -1;
	group = citus_value("SELECT groupid FROM pg_catalog.pg_dist_local_group", 0, NULL, NULL);
	return group ? atoi(group) : -1;
}

/*
 * A hash-distributed table's co-location group and distribution column
 * (its name, in the caller's memory context); false when the table is not
 * one.
 */
bool
citus_distribution(Oid relid, int *colocation, char **column)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	MemoryContext cxt = CurrentMemoryContext;
	bool		found = false;

	SPI_connect();
	if (citus_read("SELECT colocationid,"
				   " pg_catalog.column_to_column_name(logicalrelid, partkey)"
				   " FROM pg_catalog.pg_dist_partition"
				   " WHERE logicalrelid OPERATOR(pg_catalog.=) $1 AND partmethod OPERATOR(pg_catalog.=) 'h'",
				   1, types, values) == 1)
	{
		*colocation = atoi(citus_text(0, 1));
		*column = MemoryContextStrdup(cxt, citus_text(0, 2));
		found = true;
	}
	SPI_finish();
	return found;
}

/*
 * Has this transaction run a distributed statement yet?  (Its writes are on
 * the worker nodes, where this one cannot see them.)
 */
bool
citus_transaction_started(void)
{
	return citus_value("SELECT 1 FROM pg_catalog.get_current_transaction_id()"
					   " WHERE transaction_number OPERATOR(pg_catalog.<>) 0", 0, NULL, NULL) != NULL;
}

/*
 * The role that owns the Citus extension, which Citus reaches the nodes
 * as; InvalidOid without Citus.
 */
Oid
citus_extension_owner(void)
{
	char	   *owner = citus_value("SELECT extowner FROM pg_catalog.pg_extension"
									" WHERE extname OPERATOR(pg_catalog.=) 'citus'", 0, NULL, NULL);

	return owner ? atooid(owner) : InvalidOid;
}

/* How many shards a distributed table has (its shard groups) */
int
citus_shard_count(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	char	   *count = citus_value("SELECT count(*) FROM pg_catalog.pg_dist_shard"
									" WHERE logicalrelid OPERATOR(pg_catalog.=) $1", 1, types, values);

	return count ? atoi(count) : 0;
}

/*
 * Where every shard is placed now, as text ("shard:group,..."), to tell
 * whether a placement changed between two reads
 */
char *
citus_placements_text(void)
{
	char	   *placements = citus_value("SELECT pg_catalog.string_agg(shardid || ':' || groupid, ',' ORDER BY shardid, groupid)"
										 " FROM pg_catalog.pg_dist_placement", 0, NULL, NULL);

	return placements ? placements : pstrdup("");
}

/* Does this node hold a placement of shard shardid? */
bool
citus_placement_is_local(int64 shardid)
{
	Oid			types[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(shardid)};

	return citus_value("SELECT 1 FROM pg_catalog.pg_dist_placement"
					   " WHERE shardid OPERATOR(pg_catalog.=) $1 AND groupid OPERATOR(pg_catalog.=)"
					   " (SELECT groupid FROM pg_catalog.pg_dist_local_group)",
					   1, types, values) != NULL;
}

/*
 * How many placements of the shards of relids (distributed tables) this
 * node holds
 */
int64
citus_local_placement_count(List *relids)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(relids), 1));
	Oid			types[1] = {OIDARRAYOID};
	Datum		values[1];
	int64		count;
	ListCell   *lc;

	foreach(lc, relids)
		elems[foreach_current_index(lc)] = ObjectIdGetDatum(lfirst_oid(lc));
	values[0] = PointerGetDatum(construct_array(elems, list_length(relids), OIDOID,
												sizeof(Oid), true, TYPALIGN_INT));
	SPI_connect();
	count = (int64) citus_read("SELECT 1 FROM pg_catalog.pg_dist_shard s"
							   " JOIN pg_catalog.pg_dist_placement p USING (shardid)"
							   " WHERE p.groupid OPERATOR(pg_catalog.=) (SELECT groupid FROM pg_catalog.pg_dist_local_group)"
							   " AND s.logicalrelid OPERATOR(pg_catalog.=) ANY ($1)",
							   1, types, values);
	SPI_finish();
	return count;
}

/*
 * The shard table that Citus's shard_name() names (qualified outside schema
 * public) of a table of Citus, or InvalidOid while it is not on this node.
 */
static Oid
shard_relation(const char *shard_name, Oid logical)
{
	List	   *names = stringToQualifiedNameList_compat(shard_name);

	if (list_length(names) == 1)
		return get_relname_relid(strVal(linitial(names)), get_rel_namespace(logical));
	return RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, true);
}

/*
 * The shard of distributed table relid whose hash range starts at minvalue
 * (the one of a shard group), or InvalidOid while it is not on this node.
 */
Oid
citus_group_shard(Oid relid, const char *minvalue)
{
	Oid			types[2] = {OIDOID, TEXTOID};
	Datum		values[2] = {ObjectIdGetDatum(relid), CStringGetTextDatum(minvalue)};
	char	   *shard = citus_value("SELECT pg_catalog.shard_name(logicalrelid, shardid)"
									" FROM pg_catalog.pg_dist_shard"
									" WHERE logicalrelid OPERATOR(pg_catalog.=) $1"
									" AND shardminvalue OPERATOR(pg_catalog.=) $2",
									2, types, values);

	return shard ? shard_relation(shard, relid) : InvalidOid;
}

/*
 * The shards of distributed table relid that Citus places on this node, in
 * shard id order: their tables (InvalidOid for one a move is still making
 * here), and in *minvalues where each one's hash range starts (text).
 */
List *
citus_local_shards(Oid relid, List **minvalues)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	List	   *names = NIL;
	List	   *shards = NIL;
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;
	uint64		n;

	*minvalues = NIL;
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

		names = lappend(names, pstrdup(citus_text(i, 1)));
		*minvalues = lappend(*minvalues, pstrdup(citus_text(i, 2)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();

	foreach(lc, names)
		shards = lappend_oid(shards, shard_relation(lfirst(lc), relid));
	return shards;
}

/*
 * The active primary worker nodes (not the coordinator), as text ("nodeid,..."),
 * to tell whether one joined between two reads; NULL when there is none.
 */
char *
citus_worker_nodes_text(void)
{
	return citus_value("SELECT pg_catalog.string_agg(nodeid::text, ',' ORDER BY nodeid)"
					   " FROM pg_catalog.pg_dist_node WHERE isactive AND groupid OPERATOR(pg_catalog.<>) 0"
					   " AND noderole::text OPERATOR(pg_catalog.=) 'primary'",
					   0, NULL, NULL);
}
