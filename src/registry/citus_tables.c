/*-------------------------------------------------------------------------
 *
 * citus_tables.c
 *	  What delta_join knows of Citus: which tables it distributes, and which
 *	  tables are its shards.
 *
 * A Citus distributed or reference table keeps its rows, and their changes,
 * in shards on the worker nodes: a view over it on the coordinator would be
 * backfilled once and never see a change.  Such sources and targets are
 * refused, but on a coordinator's distributed path (distributed.c), which
 * makes one view per shard group on the nodes.  Views over
 * shard tables on the node that holds them are ordinary views, and a shard
 * may be their target; drop_view does not drop it (that would break its
 * distributed table).
 *
 * Citus is read from its catalog (pg_catalog.pg_dist_partition and
 * pg_dist_shard), looked up by name, so delta_join needs neither its
 * headers nor its library; without Citus every answer is "no".
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
#include "catalog/pg_namespace.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

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
