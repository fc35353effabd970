/*-------------------------------------------------------------------------
 *
 * options.h
 *	  View options (GUCs, options jsonb) and per-table hints.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_OPTIONS_H
#define DJ_OPTIONS_H

#include "base/delta_join.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

extern void options_define_settings(void);
extern void options_resolve(DeltaOptions *options, const char *strategy, Jsonb *json);
extern DeltaOptions options_settle(const DeltaOptions *options, Query *query, List *hints);
extern Jsonb *options_to_jsonb(const DeltaOptions *options);
extern const char *options_engine_setting(const char *name, bool *known);

extern void hint_init(DeltaHint *hint);
extern bool hint_parse(const char *text, int location, DeltaHint *hint);
extern void hint_merge(DeltaHint *into, const DeltaHint *from);
extern Jsonb *hint_to_jsonb(const DeltaHint *hint);
extern void hint_from_jsonb(DeltaHint *hint, Jsonb *json);

#endif							/* DJ_OPTIONS_H */
