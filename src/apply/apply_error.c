/*-------------------------------------------------------------------------
 *
 * apply_error.c
 *	  The context line of an error raised while a view is applied: the
 *	  view, how far its batch goes, and the source and key being applied.
 *
 *		applying delta view "public.wide", changes up to 0/1A2B3C8, source
 *		"public.orders", key (merchant_id, order_id) = (1, 7)
 *
 * The place (apply_error.h) is set with plain stores as the apply goes;
 * this callback reads it only when a message is raised, and only then
 * looks up the key's column names and prints its values with their types'
 * output functions.  Not always: the callback runs for every message
 * raised during the apply, DEBUG and LOG included, wherever it is raised
 * -- inside the buffer manager holding an LWLock, say (the checkpointer's
 * request queue, when it is compacted, logs while it holds its lock; a
 * catalog lookup here could then need to write out a buffer, and so that
 * same lock: the process waits for itself).  While an LWLock is held (they
 * hold interrupts off), in a critical section, or outside a valid
 * transaction, the line names the view and the source only: their names
 * were read beforehand.  A set of keys applied at once (a region or group
 * query) is named by its first key and how many others; a result row of
 * such a query being written, by the key in its columns.
 *
 * IDENTIFICATION
 *	  src/apply/apply_error.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "apply/apply_error.h"

/* longest value printed; longer ones are cut, as in a failing row's detail */
#define APPLY_ERROR_VALUE_LEN	64

ApplyErrorPlace apply_error_place;

/* Append a value of that type, NULL included, cut to a readable length */
static void
append_value(StringInfo buf, Oid type, Datum value, bool isnull)
{
	Oid			output;
	bool		varlena;
	char	   *text;
	int			len;

	if (isnull)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	getTypeOutputInfo(type, &output, &varlena);
	text = OidOutputFunctionCall(output, value);
	len = strlen(text);
	if (len > APPLY_ERROR_VALUE_LEN)
	{
		len = pg_mbcliplen(text, len, APPLY_ERROR_VALUE_LEN);
		appendBinaryStringInfo(buf, text, len);
		appendStringInfoString(buf, "...");
	}
	else
		appendStringInfoString(buf, text);
}

/*
 * Append "key (a, b) = (1, 2)" for the place's source: its key's column
 * names, and the values of the key, or of the row being written.
 */
static void
append_key(StringInfo buf, const ApplyErrorPlace *place)
{
	const DeltaSource *src = place->source;
	bool		row = (place->row_values != NULL && place->writer != NULL);

	appendStringInfoString(buf, place->nkeys > 1 && !row ? "keys (" : "key (");
	for (int k = 0; k < src->key_natts; k++)
	{
		char	   *name = get_attname(src->relid, src->key_attnums[k], true);

		if (k > 0)
			appendStringInfoString(buf, ", ");
		if (name != NULL)
			appendStringInfoString(buf, quote_identifier(name));
		else
			appendStringInfo(buf, "column %d", src->key_attnums[k]);
	}
	appendStringInfoString(buf, ") = (");
	for (int k = 0; k < src->key_natts; k++)
	{
		if (k > 0)
			appendStringInfoString(buf, ", ");
		if (row)
		{
			/* the row is in the target's column types */
			int			col = place->row_columns[k];
			TupleDesc	desc = RelationGetDescr(place->writer->rel);
			Oid			type = TupleDescAttr(desc, place->writer->attnums[col] - 1)->atttypid;

			append_value(buf, type, place->row_values[col], place->row_isnull[col]);
		}
		else
			append_value(buf, get_atttype(src->relid, src->key_attnums[k]),
						 place->key->values[k], place->key->isnull[k]);
	}
	appendStringInfoChar(buf, ')');
	if (place->nkeys > 1 && !row)
		appendStringInfo(buf, " and %d others", place->nkeys - 1);
}

static void
apply_error_callback(void *arg)
{
	const ApplyErrorPlace *place = &apply_error_place;
	StringInfoData buf;

	if (place->view == NULL)
		return;

	initStringInfo(&buf);
	appendStringInfo(&buf, "applying delta view %s", dj_message_name(place->view_name));
	if (!XLogRecPtrIsInvalid(place->end_lsn))
		appendStringInfo(&buf, ", changes up to %X/%X", LSN_FORMAT_ARGS(place->end_lsn));
	if (place->whole)
		appendStringInfoString(&buf, ", recomputing its whole result");
	else if (place->source != NULL && place->key != NULL)
	{
		appendStringInfo(&buf, ", source %s", dj_message_name(place->source->relname));
		if (InterruptHoldoffCount == 0 && CritSectionCount == 0 && IsTransactionState())
		{
			appendStringInfoString(&buf, ", ");
			append_key(&buf, place);
		}
	}
	errcontext("%s", buf.data);
}

/*
 * A view's apply begins: its errors get the context line, through callback
 * (on the caller's stack), until apply_error_end.
 */
void
apply_error_begin(ErrorContextCallback *callback, ViewRecord *view, XLogRecPtr end_lsn)
{
	memset(&apply_error_place, 0, sizeof(apply_error_place));
	apply_error_place.view = view;
	dj_text_copy(apply_error_place.view_name, catalog_view_name(view), APPLY_ERROR_NAME_LEN);
	apply_error_place.end_lsn = end_lsn;
	callback->callback = apply_error_callback;
	callback->arg = NULL;
	callback->previous = error_context_stack;
	error_context_stack = callback;
}

/* The view's apply is over (its error, if any, caught) */
void
apply_error_end(ErrorContextCallback *callback)
{
	error_context_stack = callback->previous;
	memset(&apply_error_place, 0, sizeof(apply_error_place));
}
