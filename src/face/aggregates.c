/*-------------------------------------------------------------------------
 *
 * aggregates.c
 *	  delta_join.first_value(anyelement) and delta_join.last_value(anyelement):
 *	  the first and the last non-null input of an aggregate call, in the
 *	  call's ORDER BY order (the FIRST_VALUE / LAST_VALUE aggregates of the
 *	  streaming engines).
 *
 * Both transition functions are strict, so Postgres skips NULL inputs and
 * takes the first non-null input as the initial state; what is left to do
 * is keep the state (first_value) or take the input (last_value).  nodeAgg
 * copies a pass-by-reference result into the aggregate's memory context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

PG_FUNCTION_INFO_V1(dj_keep_first);
PG_FUNCTION_INFO_V1(dj_keep_last);

Datum
dj_keep_first(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(PG_GETARG_DATUM(0));
}

Datum
dj_keep_last(PG_FUNCTION_ARGS)
{
	PG_RETURN_DATUM(PG_GETARG_DATUM(1));
}
