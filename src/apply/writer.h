/*-------------------------------------------------------------------------
 *
 * writer.h
 *	  The target writer (writer.c): result rows into a view's target, by
 *	  the target's unique key, and target rows found by other columns.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_WRITER_H
#define DJ_WRITER_H

#include "access/genam.h"
#include "nodes/execnodes.h"

#include "analysis/analyze.h"
#include "base/batch.h"

/* What writer_find found, for the write of the same key that follows */
typedef enum WriterFound
{
	WRITER_FOUND_UNKNOWN,		/* no find since the last write */
	WRITER_FOUND_NONE,			/* no row has the key */
	WRITER_FOUND_ROW			/* oldslot holds the row with the key */
} WriterFound;

/* Writes result rows into a target, by the target's unique key. */
typedef struct TargetWriter
{
	Relation	rel;
	Oid			key_index;
	Relation	key_rel;		/* the target's unique key index */
	ScanKey		keys;			/* its columns; arguments per row */
	ScanKey		equal_keys;		/* the equality keys, kept while keys search NULLs */
	EState	   *estate;
	ResultRelInfo *rri;
	EPQState	epqstate;
	TupleTableSlot *newslot;	/* the row to write, target row type */
	TupleTableSlot *oldslot;	/* the row found by key */
	WriterFound found;			/* what writer_find left in oldslot */
	int			ncolumns;		/* output columns of the view */
	int		   *attnums;		/* output column i -> target attnum */
	ApplyCounts *counts;
	MemoryContext cxt;			/* where the writer lives */
	MemoryContext scan_cxt;		/* one index scan's (writer_scan_begin) */

	/*
	 * The target's other immediate unique and exclusion indexes, each as a
	 * one-OID list (ExecCheckIndexConstraints' arbiters); and the rows held
	 * back because they collided in one of them (MinimalTuple), written at
	 * the end of the view's work (writer_carry_out, writer_end).
	 */
	List	   *other_unique;
	List	   *held_back;

	/* a region being replaced (writer_region_begin) */
	bool		in_region;
	List	   *region_old;		/* ItemPointer *, rows of the region ... */
	HTAB	   *region_olds;	/* ... and the same as a set */
	HTAB	   *region_kept;	/* ItemPointerData: rows an upsert found */
} TargetWriter;

/*
 * Finds target rows by the values of some output columns, through an index
 * of the target whose leading columns they are.
 */
typedef struct TargetLookup
{
	Relation	idx;
	int			ncols;
	int		   *cols;			/* output columns, in index column order */
	ScanKey		keys;
	ScanKey		equal_keys;		/* the equality keys, kept while keys search NULLs */
} TargetLookup;

/* called for each target row found; may not write the target */
typedef void (*TargetRowFn) (TargetWriter *writer, TupleTableSlot *row, void *arg);

extern TargetWriter *writer_begin(Oid target, DeltaPlan *plan, ApplyCounts *counts);
extern void writer_upsert(TargetWriter *writer, const Datum *values, const bool *isnull);
extern void writer_delete(TargetWriter *writer, const Datum *values, const bool *isnull);
extern bool writer_holds(TargetWriter *writer, const Datum *values, const bool *isnull);
extern bool writer_find(TargetWriter *writer, const Datum *values, const bool *isnull,
						Datum *row_values, bool *row_isnull);
extern void writer_upsert_found(TargetWriter *writer, const Datum *values, const bool *isnull);
extern void writer_delete_found(TargetWriter *writer);
extern void writer_delete_row(TargetWriter *writer, ItemPointer tid);
extern void writer_insert_slot(TargetWriter *writer, TupleTableSlot *slot);
extern TargetLookup *writer_lookup_begin(TargetWriter *writer, int ncols, const int *cols,
										 bool missing_ok);
extern void writer_lookup_rows(TargetWriter *writer, TargetLookup *tl, const Datum *values,
							   const bool *isnull, TargetRowFn fn, void *arg);
extern void writer_lookup_end(TargetLookup *tl);
extern void writer_scan_rows(TargetWriter *writer, TargetRowFn fn, void *arg);
extern void writer_output_values(TargetWriter *writer, TupleTableSlot *row, Datum *values,
								 bool *isnull);
extern void writer_region_begin(TargetWriter *writer);
extern void writer_region_add(TargetWriter *writer, ItemPointer tid);
extern void writer_region_end(TargetWriter *writer);
extern void writer_carry_in(TargetWriter *writer, List *held_back);
extern List *writer_carry_out(TargetWriter *writer);
extern void writer_end(TargetWriter *writer);

#endif							/* DJ_WRITER_H */
