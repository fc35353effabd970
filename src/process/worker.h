/*-------------------------------------------------------------------------
 *
 * worker.h
 *	  The per-database apply worker (worker.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_WORKER_H
#define DJ_WORKER_H

#include "fmgr.h"

/*
 * What a worker on a Citus node asks of the distributed views (citus/,
 * above this layer, which sets these at _PG_init; NULL without it):
 * whether this node keeps definitions of distributed views (its slot is
 * then kept for the shard groups to come), and, once a second on such a
 * node, to bring the views of the shard groups it holds in line with the
 * definitions and the placements, in a transaction of its own, logging
 * what fails.
 */
typedef struct WorkerCitus
{
	bool		(*defined) (void);
	void		(*sync) (void);
} WorkerCitus;

extern PGDLLIMPORT WorkerCitus worker_citus;

/* Background worker entry point (named in BackgroundWorker.bgw_function_name) */
extern PGDLLEXPORT void dj_worker_main(Datum main_arg);

#endif							/* DJ_WORKER_H */
