/*-------------------------------------------------------------------------
 *
 * options.h
 *	  View options (GUCs, options jsonb) and per-table hints.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_OPTIONS_H
#define DJ_OPTIONS_H

#include "delta_join.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

/* The options of one /\*+ OPTIONS(...) *\/ hint after a table. */
typedef struct DeltaHint
{
	int			location;		/* offset of the comment in the query text */
	int			cache_size;		/* -1: not given */
	bool		cache_enabled;
	bool		cache_enabled_set;
} DeltaHint;

extern void options_resolve(DeltaOptions *options, const char *strategy, Jsonb *json);
extern Jsonb *options_to_jsonb(const DeltaOptions *options);
extern List *hints_parse(const char *text);

#endif							/* DJ_OPTIONS_H */
