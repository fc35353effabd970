/*-------------------------------------------------------------------------
 *
 * recompute.h
 *	  A view's query, restricted to some keys of one source or not at all,
 *	  planned and run by PostgreSQL (recompute.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_RECOMPUTE_H
#define DJ_RECOMPUTE_H

#include "analysis/analyze.h"
#include "nodes/params.h"
#include "nodes/plannodes.h"
#include "tcop/dest.h"

/* keys of one execution of a region query */
#define RECOMPUTE_CHUNK		1000

/* The region query of one source of a view (recompute_prepare) */
typedef struct RegionQuery
{
	DeltaSource *src;			/* the source whose keys restrict it */
	int			nkeys;			/* its key columns */
	Oid		   *elemtypes;		/* per key column: its type ... */
	Oid		   *arraytypes;		/* ... and that type's array type */
	int16	   *typlen;
	bool	   *typbyval;
	char	   *typalign;
	bool		match_nulls;	/* the key's NULLs are not distinct: NULL finds NULL */
	PlannedStmt *pstmt;			/* a generic plan */
} RegionQuery;

/* The group query of an aggregate view (recompute_prepare_groups) */
typedef struct GroupQuery
{
	PlannedStmt *pstmt;			/* a generic plan */
	int			nparams;
	Oid		   *paramtypes;		/* of $1 ... $n: the key's, or its array type */
} GroupQuery;

/*
 * The finder query of an aggregate view over joins, some of its sources
 * replaced by images of their changed rows (recompute_prepare_finder)
 */
typedef struct FinderQuery
{
	PlannedStmt *pstmt;			/* a generic plan */
	int			ngroup;			/* its output: the group key's columns */
	int			nparams;		/* an array per key column of each image */
	int		   *param_source;	/* per parameter: its source (index) ... */
	int		   *param_column;	/* ... and key column */
	Oid		   *elemtypes;
	Oid		   *arraytypes;
	int16	   *typlen;
	bool	   *typbyval;
	char	   *typalign;
} FinderQuery;

extern RegionQuery *recompute_prepare(DeltaPlan *plan, Oid target, int source,
									  Bitmapset *null_sources);
extern void recompute_run(RegionQuery *rq, List *keys, DestReceiver *dest);
extern GroupQuery *recompute_prepare_groups(DeltaPlan *plan, Oid target, Bitmapset *nulls,
											bool set_mode);
extern void recompute_run_groups(GroupQuery *gq, const Datum *values, const bool *isnull,
								 DestReceiver *dest);
extern FinderQuery *recompute_prepare_finder(DeltaPlan *plan, Bitmapset *replaced);
extern void recompute_run_finder(FinderQuery *fq, List **keys, DestReceiver *dest);
extern void recompute_run_all(DeltaPlan *plan, Oid target, DestReceiver *dest);
extern void recompute_receiver_init(DestReceiver *dest,
									bool (*receive) (TupleTableSlot *slot, DestReceiver *self));

#endif							/* DJ_RECOMPUTE_H */
