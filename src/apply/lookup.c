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
 * A partitioned source is scanned leaf by leaf, through the leaf's index
 * that is attached to the partitioned index; rows are converted to the
 * root's row type so that callers never see a partition's column order.
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
#include "catalog/pg_inherits.h"
#include "executor/executor.h"
#include "utils/lsyscache.h"
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
 * Begin a lookup of relid through indexoid (a btree index of relid, or a
 * partitioned index of it) binding its first nkeys columns.  procs gives the
 * equality function of each bound column; NULL means the column type's own.
 */
LookupScan *
lookup_begin(Oid relid, Oid indexoid, int nkeys, const Oid *procs, const Oid *subtypes,
			 Snapshot snapshot)
{
	LookupScan *scan = palloc0(sizeof(LookupScan));
	Relation	root = table_open(relid, AccessShareLock);
	List	   *parts = NIL;
	ListCell   *lc;
	int			i;

	if (root->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		foreach(lc, find_all_inheritors(relid, AccessShareLock, NULL))
			if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION)
				parts = lappend_oid(parts, lfirst_oid(lc));
	}
	else
		parts = list_make1_oid(relid);

	scan->nparts = list_length(parts);
	scan->heaps = palloc(sizeof(Relation) * scan->nparts);
	scan->indexes = palloc(sizeof(Relation) * scan->nparts);
	scan->scans = palloc(sizeof(IndexScanDesc) * scan->nparts);
	scan->slots = palloc(sizeof(TupleTableSlot *) * scan->nparts);
	scan->maps = palloc(sizeof(TupleConversionMap *) * scan->nparts);
	scan->rootslot = MakeSingleTupleTableSlot(RelationGetDescr(root), &TTSOpsVirtual);
	scan->nkeys = nkeys;

	i = 0;
	foreach(lc, parts)
	{
		Oid			partid = lfirst_oid(lc);
		Relation	heap = (partid == relid) ? root : table_open(partid, AccessShareLock);
		Oid			partindex = indexoid;

		/* the leaf's index attached (maybe through levels) to indexoid */
		if (partid != relid)
		{
			ListCell   *lc2;

			partindex = InvalidOid;
			foreach(lc2, RelationGetIndexList(heap))
			{
				if (list_member_oid(get_partition_ancestors(lfirst_oid(lc2)), indexoid))
					partindex = lfirst_oid(lc2);
			}
			if (!OidIsValid(partindex))
				elog(ERROR, "partition \"%s\" has no index attached to index %u",
					 RelationGetRelationName(heap), indexoid);
		}
		scan->heaps[i] = heap;
		scan->indexes[i] = index_open(partindex, AccessShareLock);
		scan->slots[i] = table_slot_create(heap, NULL);
		scan->maps[i] = (heap == root) ? NULL :
			convert_tuples_by_name(RelationGetDescr(heap), RelationGetDescr(root));
		scan->scans[i] = index_beginscan_compat(heap, scan->indexes[i], snapshot, nkeys, 0);
		i++;
	}

	/* scan key templates, from the index named (its partitions agree) */
	{
		Relation	idx = index_open(indexoid, AccessShareLock);

		scan->equal_keys = lookup_equality_keys(idx, nkeys, procs, subtypes);
		index_close(idx, AccessShareLock);
	}
	scan->keys = palloc(sizeof(ScanKeyData) * nkeys);
	memcpy(scan->keys, scan->equal_keys, sizeof(ScanKeyData) * nkeys);

	if (scan->nparts == 0 || scan->heaps[0] != root)
		table_close(root, NoLock);
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
	for (int k = 0; k < scan->nkeys; k++)
	{
		if (isnull[k] && !scan->match_nulls)
		{
			scan->current = scan->nparts;
			return false;
		}
		lookup_set_key(&scan->keys[k], &scan->equal_keys[k], values[k], isnull[k]);
	}
	for (int i = 0; i < scan->nparts; i++)
		index_rescan(scan->scans[i], scan->keys, scan->nkeys, NULL, 0);
	scan->current = 0;
	scan->count++;
	return true;
}

/* The next matching row, in the source's row type, or NULL. */
TupleTableSlot *
lookup_next(LookupScan *scan)
{
	while (scan->current < scan->nparts)
	{
		int			i = scan->current;

		if (index_getnext_slot(scan->scans[i], ForwardScanDirection, scan->slots[i]))
		{
			if (scan->maps[i] == NULL)
				return scan->slots[i];
			return execute_attr_map_slot(scan->maps[i]->attrMap, scan->slots[i],
										 scan->rootslot);
		}
		scan->current++;
	}
	return NULL;
}

void
lookup_end(LookupScan *scan)
{
	for (int i = 0; i < scan->nparts; i++)
	{
		index_endscan(scan->scans[i]);
		ExecDropSingleTupleTableSlot(scan->slots[i]);
		index_close(scan->indexes[i], NoLock);
		table_close(scan->heaps[i], NoLock);
	}
	ExecDropSingleTupleTableSlot(scan->rootslot);
}
