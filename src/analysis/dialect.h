/*-------------------------------------------------------------------------
 *
 * dialect.h
 *	  The streaming engine's SQL: in a view's query text, table hints,
 *	  FOR SYSTEM_TIME AS OF and its aggregate spellings (dialect.c); the
 *	  statements of its jobs that PostgreSQL refuses (dialect_statement.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_DIALECT_H
#define DJ_DIALECT_H

#include "nodes/parsenodes.h"

typedef struct DialectText DialectText;

extern DialectText *dialect_scan(const char *text);
extern const char *dialect_parser_text(DialectText *dt);
extern List *dialect_table_hints(DialectText *dt, SelectStmt *select, List **names);
extern void dialect_rewrite_aggregates(DialectText *dt, Node *stmt);

/* dialect_statement.c */
extern char *dialect_statement_hint(const char *statement);

#endif							/* DJ_DIALECT_H */
