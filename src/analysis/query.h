/*-------------------------------------------------------------------------
 *
 * query.h
 *	  A view's query: parsed once, bound into a query view, loaded back.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_QUERY_H
#define DJ_QUERY_H

#include "nodes/parsenodes.h"

extern Query *query_parse(const char *text, List **hints);
extern void query_refuse_temporary(Query *query, bool tables);
extern Oid	query_bind(Query *query, Oid target);
extern void query_depend_on_extension(Oid query_view);
extern Query *query_load(Oid query_view);
extern void query_follow_target(Oid query_view, Oid target);
extern void query_drop(Oid query_view);
extern List *query_output_exprs(Query *query);

#endif							/* DJ_QUERY_H */
