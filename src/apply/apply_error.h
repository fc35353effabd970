/*-------------------------------------------------------------------------
 *
 * apply_error.h
 *	  Where an apply is, for the context line of an error raised there
 *	  (apply_error.c), as core's apply_error_callback_arg.
 *
 * apply_view.c pushes the error context of a view's apply, naming the view
 * and how far its batch goes; the appliers say, with the inline functions
 * below, which source's key (or keys, or result row) they are applying.
 * Setting the place is a few stores; the view's name is looked up when
 * its apply begins, the key's column names and values (with their types'
 * output functions) only when an error is raised, and only where that is
 * safe (apply_error.c).  The pointers must stay valid while they are set: the appliers
 * point at their own keys and rows, and clear what they set before those
 * go.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_APPLY_ERROR_H
#define DJ_APPLY_ERROR_H

#include "access/xlogdefs.h"

#include "analysis/analyze.h"
#include "apply/writer.h"
#include "base/batch.h"
#include "registry/catalog.h"

/* a schema-qualified name, each part quoted (every character doubled) */
#define APPLY_ERROR_NAME_LEN	(2 * (2 * NAMEDATALEN + 2) + 2)

typedef struct ApplyErrorPlace
{
	ViewRecord *view;			/* the view applied, or NULL: none */
	char		view_name[APPLY_ERROR_NAME_LEN];	/* its target's name */
	XLogRecPtr	end_lsn;		/* its batch's changes end here, or invalid */
	TargetWriter *writer;		/* its target's writer, while one is open */

	/* what an applier applies: nothing, one key, a set of keys, or all */
	const DeltaSource *source;	/* whose keys; NULL: none */
	const DirtyKey *key;		/* the key, or the first of the set */
	int			nkeys;			/* keys of the set (1: one key) */
	bool		whole;			/* recomputing the view's whole result */

	/*
	 * A result row of the keys' query being written: the key it came from
	 * is in its output columns row_columns[k], in the target's column
	 * types (printed instead of the set).
	 */
	const Datum *row_values;
	const bool *row_isnull;
	const int  *row_columns;
} ApplyErrorPlace;

extern PGDLLIMPORT ApplyErrorPlace apply_error_place;

extern void apply_error_begin(ErrorContextCallback *callback, ViewRecord *view,
							  XLogRecPtr end_lsn);
extern void apply_error_end(ErrorContextCallback *callback);

/* Applying one key of a source */
static inline void
apply_error_key(const DeltaSource *source, const DirtyKey *key)
{
	apply_error_place.source = source;
	apply_error_place.key = key;
	apply_error_place.nkeys = 1;
	apply_error_place.whole = false;
}

/* Applying n keys of a source at once, key the first */
static inline void
apply_error_keys(const DeltaSource *source, const DirtyKey *key, int n)
{
	apply_error_place.source = source;
	apply_error_place.key = key;
	apply_error_place.nkeys = n;
	apply_error_place.whole = false;
}

/* Writing a row of the keys' query (until apply_error_row_done) */
static inline void
apply_error_row(const Datum *values, const bool *isnull, const int *columns)
{
	apply_error_place.row_values = values;
	apply_error_place.row_isnull = isnull;
	apply_error_place.row_columns = columns;
}

static inline void
apply_error_row_done(void)
{
	apply_error_place.row_values = NULL;
}

/* Recomputing the whole result */
static inline void
apply_error_whole(void)
{
	apply_error_place.source = NULL;
	apply_error_place.whole = true;
}

/* Applying no key in particular */
static inline void
apply_error_clear(void)
{
	apply_error_place.source = NULL;
	apply_error_place.whole = false;
	apply_error_place.row_values = NULL;
}

#endif							/* DJ_APPLY_ERROR_H */
