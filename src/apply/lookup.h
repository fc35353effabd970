/*-------------------------------------------------------------------------
 *
 * lookup.h
 *	  Index-prefix scans on a source (a lookup), partition-aware.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_LOOKUP_H
#define DJ_LOOKUP_H

#include "access/genam.h"
#include "access/tupconvert.h"
#include "executor/tuptable.h"
#include "partitioning/partdefs.h"
#include "utils/snapshot.h"

/* A relation a lookup reads: a plain source, or a leaf partition of one */
typedef struct LookupLeaf
{
	Relation	heap;
	Relation	index;			/* its index (attached to the lookup's index) */
	IndexScanDesc scan;
	TupleTableSlot *slot;		/* in the leaf's row type */
	TupleConversionMap *map;	/* to the root's row type, or NULL */
} LookupLeaf;

typedef struct LookupLevel LookupLevel;	/* a partitioned table (lookup.c) */

/* One lookup, reusable for many keys: begin once, rescan per key. */
typedef struct LookupScan
{
	LookupLeaf *plain;			/* the source, when it is not partitioned */
	LookupLevel *root;			/* else the source, partitioned */
	List	   *levels;			/* the partitioned tables opened so far */
	List	   *leaves;			/* the leaves opened so far (LookupLeaf *;
								 * or plain) */
	LookupLeaf **active;		/* the leaves the current key may be in */
	int			nactive;
	int			maxactive;
	int			current;		/* index in active of the leaf being scanned */
	TupleTableSlot *rootslot;	/* rows in the source's (root) row type */
	Relation	index;			/* the index looked up (of the source) */
	int			nkeys;
	Oid		   *procs;			/* as given to lookup_begin, or NULL */
	Oid		   *subtypes;		/* likewise */
	ScanKeyData *keys;			/* arguments filled by lookup_rescan */
	ScanKeyData *equal_keys;	/* the equality keys, kept while keys search NULLs */
	bool		match_nulls;	/* a NULL value finds NULLs (a NULLS NOT DISTINCT key) */
	Snapshot	snapshot;
	PartitionDirectory partitions;	/* the partitions of a partitioned
									 * source, as at begin */
	MemoryContext mcxt;			/* where leaves opened later are kept */
	int64		count;			/* rescans done */
} LookupScan;

extern ScanKey lookup_equality_keys(Relation index, int nkeys, const Oid *procs,
									const Oid *subtypes);
extern void lookup_set_key(ScanKey key, const ScanKeyData *equal, Datum value, bool isnull);
extern LookupScan *lookup_begin(Oid relid, Oid indexoid, int nkeys, const Oid *procs,
								const Oid *subtypes, Snapshot snapshot);
extern bool lookup_rescan(LookupScan *scan, const Datum *values, const bool *isnull);
extern TupleTableSlot *lookup_next(LookupScan *scan);
extern void lookup_end(LookupScan *scan);

#endif							/* DJ_LOOKUP_H */
