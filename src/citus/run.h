/*-------------------------------------------------------------------------
 *
 * run.h
 *	  How the Citus layer runs statements and guarded calls (run.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CITUS_RUN_H
#define DJ_CITUS_RUN_H

extern uint64 run_statement(const char *sql, int nargs, Oid *types, Datum *values);
extern void run_command(const char *sql);
extern bool run_guarded(void (*fn) (void *arg), void *arg, const char *what);

#endif							/* DJ_CITUS_RUN_H */
