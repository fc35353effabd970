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
#include "utils/snapshot.h"

/* One lookup, reusable for many keys: begin once, rescan per key. */
typedef struct LookupScan
{
	int			nparts;			/* 1, or the leaf partitions of the source */
	Relation   *heaps;
	Relation   *indexes;
	IndexScanDesc *scans;
	TupleTableSlot **slots;		/* per part, in the part's row type */
	TupleConversionMap **maps;	/* per part, to the root's row type, or NULL */
	TupleTableSlot *rootslot;	/* rows in the source's (root) row type */
	int			nkeys;
	ScanKeyData *keys;			/* arguments filled by lookup_rescan */
	ScanKeyData *equal_keys;	/* the equality keys, kept while keys search NULLs */
	bool		match_nulls;	/* a NULL value finds NULLs (a NULLS NOT DISTINCT key) */
	int			current;		/* part being scanned */
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
