/*-------------------------------------------------------------------------
 *
 * recompute.h
 *	  Keyed recompute: a region of a view's result computed by the planner.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_RECOMPUTE_H
#define DJ_RECOMPUTE_H

#include "analysis/analyze.h"
#include "nodes/plannodes.h"
#include "tcop/dest.h"

/* keys of one execution of a region query */
#define RECOMPUTE_CHUNK		1000

/* The region query of one source of a view (recompute.c) */
typedef struct RegionQuery
{
	int			source;			/* index into DeltaPlan.sources */
	int			nkeys;			/* its key columns */
	Oid		   *elemtypes;		/* per key column: its type ... */
	Oid		   *arraytypes;		/* ... and that type's array type */
	int16	   *typlen;
	bool	   *typbyval;
	char	   *typalign;
	bool		match_nulls;	/* the key's NULLs are not distinct: NULL finds NULL */
	PlannedStmt *pstmt;			/* a generic plan */
} RegionQuery;

extern RegionQuery *recompute_prepare(DeltaPlan *plan, Oid target, int source,
									  Bitmapset *null_sources);
extern void recompute_run_all(DeltaPlan *plan, Oid target, DestReceiver *dest);
extern void recompute_run(RegionQuery *rq, List *keys, DestReceiver *dest);
extern Oid	ordinary_equality_operator(Oid type);

#endif							/* DJ_RECOMPUTE_H */
