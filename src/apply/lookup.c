/*-------------------------------------------------------------------------
 *
 * lookup.c
 *	  Index-prefix scans on a source: find the rows whose leading index
 *	  columns equal given values.
 *
 * A lookup is begun once per batch and rescanned for every key, so the
 * per-key cost is one btree descent.  Scan keys use the btree equality
 * operator of each index column's operator family (chosen by the analyzer
 * for cross-type joins) and the index's collation, the way
 * build_replindex_scan_key() in execReplication.c does; the target writer
 * (writer.c) builds its keys here too.
 *
 * A partitioned source is scanned in the leaves a key may be in -- one,
 * when the key gives the partition key (lookup_begin) -- through each
 * leaf's index that is attached to the partitioned index; rows are
 * converted to the root's row type so that callers never see a partition's
 * column order.
 *
 * Relations are opened with AccessShareLock, held to the end of the
 * transaction.  Everything is allocated in the caller's memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "partitioning/partbounds.h"
#include "partitioning/partdesc.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

#include "base/compat.h"
#include "apply/lookup.h"

/*
 * Equality scan keys on the first nkeys columns of a btree index, their
 * arguments to be set per lookup (lookup_set_key): the one way lookups of
 * sources and of targets (writer.c) build them.  procs gives the equality
 * function of each column, NULL (or InvalidOid) the one of the index
 * column's operator family for a value of subtypes' type (NULL: the
 * column's own).  The subtype is said when it is not the column's own: a
 * cross-type key (date = timestamp) must say so, or the btree descends
 * comparing it as if it were of the column's type.  Allocated in
 * CurrentMemoryContext.
 */
ScanKey
lookup_equality_keys(Relation index, int nkeys, const Oid *procs, const Oid *subtypes)
{
	ScanKey		keys = palloc(sizeof(ScanKeyData) * Max(nkeys, 1));

	for (int k = 0; k < nkeys; k++)
	{
		Oid			subtype = subtypes ? subtypes[k] : index->rd_opcintype[k];
		Oid			proc = procs ? procs[k] : InvalidOid;

		if (!OidIsValid(proc))
		{
			Oid			op = get_opfamily_member(index->rd_opfamily[k], index->rd_opcintype[k],
												 subtype, BTEqualStrategyNumber);

			if (!OidIsValid(op))
				elog(ERROR, "missing equality operator for column %d of index \"%s\"",
					 k + 1, RelationGetRelationName(index));
			proc = get_opcode(op);
		}
		ScanKeyEntryInitialize(&keys[k], 0, k + 1, BTEqualStrategyNumber,
							   subtype == index->rd_opcintype[k] ? InvalidOid : subtype,
							   index->rd_indcollation[k], proc, (Datum) 0);
	}
	return keys;
}

/*
 * Set a scan key to find value with its equality key (lookup_equality_keys),
 * or, for a NULL, the NULLs of its column: a key whose NULLs are not
 * distinct finds them (the caller skips a NULL where equality never holds).
 */
void
lookup_set_key(ScanKey key, const ScanKeyData *equal, Datum value, bool isnull)
{
	if (isnull)
		ScanKeyEntryInitialize(key, SK_ISNULL | SK_SEARCHNULL, equal->sk_attno,
							   InvalidStrategy, InvalidOid, InvalidOid, InvalidOid,
							   (Datum) 0);
	else
	{
		*key = *equal;
		key->sk_argument = value;
	}
}

/*
 * A partitioned table a lookup reads (the source, or a partition of it that
 * is partitioned in turn), and how a key finds its partition there: route
 * gives, for each column of the table's partition key, the bound value that
 * is that column; NULL when the key may be in any partition.
 */
struct LookupLevel
{
	Relation	rel;
	Oid			indexoid;		/* rel's index attached to the lookup's index */
	PartitionKey key;
	PartitionDesc desc;			/* from the lookup's partition directory */
	int		   *route;
	void	  **children;		/* per partition: its LookupLeaf, or its
								 * LookupLevel, once a key went there */
};

/*
 * The bound values that give each column of level's partition key, or NULL
 * when one is not bound, or not as the partition key compares: values the
 * lookup finds equal must be in one partition.  A list or range partition
 * key must be of the index's operator family and collation (the same
 * equality may come with another order: text_pattern_ops orders bytes,
 * which a case-insensitive collation's equality does not follow); a hash
 * key's family must hold the lookup's equality, under the same collation.
 * A column of an expression is never bound.
 */
static int *
level_route(LookupScan *scan, LookupLevel *level)
{
	PartitionKey key = level->key;
	Relation	index = scan->index;
	Oid			root = index->rd_index->indrelid;
	int		   *route = palloc(sizeof(int) * key->partnatts);

	for (int i = 0; i < key->partnatts; i++)
	{
		AttrNumber	attno;
		Oid			type;
		Oid			equality;
		int			k;

		if (key->partattrs[i] == 0)
			return NULL;
		/* (a partition may number its columns otherwise than the root) */
		attno = get_attnum(root, get_attname(RelationGetRelid(level->rel),
											 key->partattrs[i], false));
		for (k = 0; k < scan->nkeys; k++)
			if (index->rd_index->indkey.values[k] == attno)
				break;
		if (k == scan->nkeys)
			return NULL;
		type = scan->subtypes ? scan->subtypes[k] : index->rd_opcintype[k];
		equality = get_opfamily_member(index->rd_opfamily[k], index->rd_opcintype[k], type,
									   BTEqualStrategyNumber);
		if (type != index->rd_opcintype[k] || type != key->partopcintype[i] ||
			!OidIsValid(equality) || !op_in_opfamily(equality, key->partopfamily[i]) ||
			(key->strategy != PARTITION_STRATEGY_HASH &&
			 key->partopfamily[i] != index->rd_opfamily[k]) ||
			(scan->procs && OidIsValid(scan->procs[k]) && scan->procs[k] != get_opcode(equality)) ||
			(OidIsValid(key->partcollation[i]) && key->partcollation[i] != index->rd_indcollation[k]))
			return NULL;
		route[i] = k;
	}
	return route;
}

/*
 * The partition of level that holds the rows whose bound values are
 * values, or -1: the executor's routing of a new row (execPartition.c).
 */
static int
level_partition(LookupLevel *level, const Datum *values, const bool *isnull)
{
	PartitionKey key = level->key;
	PartitionBoundInfo bounds = level->desc->boundinfo;
	Datum		keyvalues[PARTITION_MAX_KEYS];
	bool		keynulls[PARTITION_MAX_KEYS];
	bool		anynull = false;
	bool		equal = false;
	int			part = -1;

	if (level->desc->nparts == 0)
		return -1;
	for (int i = 0; i < key->partnatts; i++)
	{
		keyvalues[i] = values[level->route[i]];
		keynulls[i] = isnull[level->route[i]];
		anynull |= keynulls[i];
	}
	switch (key->strategy)
	{
		case PARTITION_STRATEGY_HASH:
			part = bounds->indexes[compute_partition_hash_value(key->partnatts, key->partsupfunc,
																key->partcollation, keyvalues,
																keynulls) %
								   get_hash_partition_greatest_modulus(bounds)];
			break;
		case PARTITION_STRATEGY_LIST:
			if (keynulls[0])
				part = bounds->null_index;
			else
			{
				int			offset = partition_list_bsearch(key->partsupfunc, key->partcollation,
															bounds, keyvalues[0], &equal);

				if (offset >= 0 && equal)
					part = bounds->indexes[offset];
			}
			break;
		case PARTITION_STRATEGY_RANGE:
			/* no range holds a NULL */
			if (!anynull)
				part = bounds->indexes[partition_range_datum_bsearch(key->partsupfunc,
																	 key->partcollation, bounds,
																	 key->partnatts, keyvalues,
																	 &equal) + 1];
			break;
		default:
			elog(ERROR, "unexpected partition strategy: %d", (int) key->strategy);
	}
	return part >= 0 ? part : bounds->default_index;
}

/* Open a leaf (or the plain source) rel, to be read through index indexoid */
static LookupLeaf *
leaf_open(LookupScan *scan, Relation rel, Oid indexoid)
{
	LookupLeaf *leaf = palloc(sizeof(LookupLeaf));
	TupleDesc	rootdesc = scan->rootslot->tts_tupleDescriptor;

	leaf->heap = rel;
	leaf->index = index_open(indexoid, AccessShareLock);
	leaf->slot = table_slot_create(rel, NULL);
	leaf->map = (RelationGetDescr(rel) == rootdesc) ? NULL :
		convert_tuples_by_name(RelationGetDescr(rel), rootdesc);
	leaf->scan = index_beginscan_compat(rel, leaf->index, scan->snapshot, scan->nkeys, 0);
	scan->leaves = lappend(scan->leaves, leaf);
	return leaf;
}

/* Open a partitioned rel, read through its index indexoid */
static LookupLevel *
level_open(LookupScan *scan, Relation rel, Oid indexoid)
{
	LookupLevel *level = palloc0(sizeof(LookupLevel));

	level->rel = rel;
	level->indexoid = indexoid;
	level->key = RelationGetPartitionKey(rel);
	level->desc = PartitionDirectoryLookup(scan->partitions, rel);
	level->route = level_route(scan, level);
	level->children = palloc0(sizeof(void *) * Max(level->desc->nparts, 1));
	scan->levels = lappend(scan->levels, level);
	return level;
}

static void route_key(LookupScan *scan, LookupLevel *level, const Datum *values,
					  const bool *isnull);

/* Read partition part of level for the current key: opened at its first key */
static void
visit_partition(LookupScan *scan, LookupLevel *level, int part, const Datum *values,
				const bool *isnull)
{
	if (level->children[part] == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(scan->mcxt);
		Relation	rel = table_open(level->desc->oids[part], AccessShareLock);
		Oid			index = index_get_partition(rel, level->indexoid);

		if (!OidIsValid(index))
			elog(ERROR, "partition \"%s\" has no index attached to index %u",
				 RelationGetRelationName(rel), level->indexoid);
		if (level->desc->is_leaf[part])
			level->children[part] = leaf_open(scan, rel, index);
		else
			level->children[part] = level_open(scan, rel, index);
		MemoryContextSwitchTo(old);
	}
	if (!level->desc->is_leaf[part])
	{
		route_key(scan, level->children[part], values, isnull);
		return;
	}
	if (scan->nactive == scan->maxactive)
	{
		scan->maxactive = Max(8, scan->maxactive * 2);
		scan->active = scan->active ?
			repalloc(scan->active, sizeof(LookupLeaf *) * scan->maxactive) :
			MemoryContextAlloc(scan->mcxt, sizeof(LookupLeaf *) * scan->maxactive);
	}
	scan->active[scan->nactive++] = level->children[part];
}

/* The leaves of level that may hold the key values, into scan->active */
static void
route_key(LookupScan *scan, LookupLevel *level, const Datum *values, const bool *isnull)
{
	if (level->route != NULL)
	{
		int			part = level_partition(level, values, isnull);

		if (part >= 0)
			visit_partition(scan, level, part, values, isnull);
		return;
	}
	for (int part = 0; part < level->desc->nparts; part++)
		visit_partition(scan, level, part, values, isnull);
}

/*
 * Begin a lookup of relid through indexoid (a btree index of relid, or a
 * partitioned index of it) binding its first nkeys columns.  procs gives the
 * equality function of each bound column; NULL means the column type's own.
 *
 * A partitioned source's partitions are those it has now (a partition
 * directory keeps them for the scan; one being detached concurrently is
 * left out once the detach is visible, as the planner leaves it out of
 * the query), each opened when a key first reaches
 * it: a key whose values give the partition key goes to the one partition
 * that may hold its rows, as a new row would, so that a lookup costs one
 * index descent however many partitions the source has.
 */
LookupScan *
lookup_begin(Oid relid, Oid indexoid, int nkeys, const Oid *procs, const Oid *subtypes,
			 Snapshot snapshot)
{
	LookupScan *scan = palloc0(sizeof(LookupScan));
	Relation	rel = table_open(relid, AccessShareLock);

	scan->mcxt = CurrentMemoryContext;
	scan->snapshot = snapshot;
	scan->nkeys = nkeys;
	scan->index = index_open(indexoid, AccessShareLock);
	if (procs != NULL)
		scan->procs = memcpy(palloc(sizeof(Oid) * Max(nkeys, 1)), procs, sizeof(Oid) * nkeys);
	if (subtypes != NULL)
		scan->subtypes = memcpy(palloc(sizeof(Oid) * Max(nkeys, 1)), subtypes, sizeof(Oid) * nkeys);
	scan->equal_keys = lookup_equality_keys(scan->index, nkeys, procs, subtypes);
	scan->keys = palloc(sizeof(ScanKeyData) * Max(nkeys, 1));
	memcpy(scan->keys, scan->equal_keys, sizeof(ScanKeyData) * nkeys);
	scan->rootslot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsVirtual);

	if (rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		scan->partitions = CreatePartitionDirectory(CurrentMemoryContext, true);
		scan->root = level_open(scan, rel, indexoid);
	}
	else
		scan->plain = leaf_open(scan, rel, indexoid);
	return scan;
}

/*
 * Start looking up the rows whose bound columns equal values.  Returns
 * false, and finds nothing, when a value is NULL (equality never holds) --
 * unless the scan matches NULLs, for a key whose NULLs are not distinct:
 * then a NULL finds the rows whose column is NULL.
 */
bool
lookup_rescan(LookupScan *scan, const Datum *values, const bool *isnull)
{
	scan->nactive = 0;
	scan->current = 0;
	for (int k = 0; k < scan->nkeys; k++)
	{
		if (isnull[k] && !scan->match_nulls)
			return false;
		lookup_set_key(&scan->keys[k], &scan->equal_keys[k], values[k], isnull[k]);
	}
	if (scan->plain != NULL)
	{
		scan->active = &scan->plain;
		scan->nactive = 1;
	}
	else
		route_key(scan, scan->root, values, isnull);
	for (int i = 0; i < scan->nactive; i++)
		index_rescan(scan->active[i]->scan, scan->keys, scan->nkeys, NULL, 0);
	scan->count++;
	return true;
}

/* The next matching row, in the source's row type, or NULL. */
TupleTableSlot *
lookup_next(LookupScan *scan)
{
	while (scan->current < scan->nactive)
	{
		LookupLeaf *leaf = scan->active[scan->current];

		if (index_getnext_slot(leaf->scan, ForwardScanDirection, leaf->slot))
		{
			if (leaf->map == NULL)
				return leaf->slot;
			return execute_attr_map_slot(leaf->map->attrMap, leaf->slot, scan->rootslot);
		}
		scan->current++;
	}
	return NULL;
}

void
lookup_end(LookupScan *scan)
{
	ListCell   *lc;

	foreach(lc, scan->leaves)
	{
		LookupLeaf *leaf = lfirst(lc);

		index_endscan(leaf->scan);
		ExecDropSingleTupleTableSlot(leaf->slot);
		index_close(leaf->index, NoLock);
		table_close(leaf->heap, NoLock);
	}
	if (scan->partitions != NULL)
		DestroyPartitionDirectory(scan->partitions);
	foreach(lc, scan->levels)
		table_close(((LookupLevel *) lfirst(lc))->rel, NoLock);
	index_close(scan->index, NoLock);
	ExecDropSingleTupleTableSlot(scan->rootslot);
}
