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

extern void options_resolve(DeltaOptions *options, const char *strategy, Jsonb *json);
extern Jsonb *options_to_jsonb(const DeltaOptions *options);

extern void hint_init(DeltaHint *hint);
extern List *hints_parse(const char *text);
extern Jsonb *hint_to_jsonb(const DeltaHint *hint);
extern void hint_from_jsonb(DeltaHint *hint, Jsonb *json);

#endif							/* DJ_OPTIONS_H */
