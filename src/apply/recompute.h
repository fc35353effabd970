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
#include "base/batch.h"
#include "nodes/params.h"
#include "nodes/plannodes.h"
#include "tcop/dest.h"

/* keys of one execution of a region query with its generic plan */
#define RECOMPUTE_CHUNK		1000

/* keys of one execution planned for its keys (set-based apply) */
#define RECOMPUTE_SET_CHUNK	100000

/* bytes of key values of one execution, about (recompute_chunk_count) */
#define RECOMPUTE_SET_BYTES	(64 * 1024 * 1024)

/*
 * A query that takes keys as parameters, and how each execution is planned
 * (recompute.c, keyed_plan_run): an execution of a set of at least
 * delta_join.set_apply_min_keys keys is planned for those keys, so that
 * the planner may join them to the sources with a hash join (set-based
 * apply); a generic plan, built once, reaches each key through an index.
 */
typedef struct KeyedPlan
{
	Query	   *query;			/* restricted to the parameters' keys */
	const char *name;
	PlannedStmt *generic;		/* built by the first execution needing it */
	MemoryContext cxt;			/* where generic is kept */
} KeyedPlan;

/* The region query of one source of a view (recompute_prepare) */
typedef struct RegionQuery
{
	DeltaSource *src;			/* the source whose keys restrict it */
	int			nkeys;			/* its key columns */
	struct KeyRelation *keys;	/* as the query reads them (recompute.c) */
	bool		match_nulls;	/* the key's NULLs are not distinct: NULL finds NULL */
	KeyedPlan	kp;
} RegionQuery;

/* The group query of an aggregate view (recompute_prepare_groups) */
typedef struct GroupQuery
{
	KeyedPlan	kp;
	bool		set_mode;		/* a set of groups an execution, or one */
	int			nparams;
	Oid		   *paramtypes;		/* of $1 ... $n: the key's, or its array type */
} GroupQuery;

/*
 * The finder query of an aggregate view over joins, some of its sources
 * replaced by images of their changed rows (recompute_prepare_finder)
 */
typedef struct FinderQuery
{
	KeyedPlan	kp;
	int			ngroup;			/* its output: the group key's columns */
	List	   *images;			/* KeyRelation *, per replaced source */
} FinderQuery;

extern RegionQuery *recompute_prepare(DeltaPlan *plan, Oid target, int source,
									  Bitmapset *null_sources);
extern void recompute_run(RegionQuery *rq, List *keys, DestReceiver *dest);
extern GroupQuery *recompute_prepare_groups(DeltaPlan *plan, Oid target, Bitmapset *nulls,
											bool set_mode);
extern void recompute_run_groups(GroupQuery *gq, int nkeys, const Datum *values,
								 const bool *isnull, DestReceiver *dest);
extern FinderQuery *recompute_prepare_finder(DeltaPlan *plan, Bitmapset *replaced);
extern void recompute_run_finder(FinderQuery *fq, List **keys, DestReceiver *dest);
extern FinderQuery *recompute_prepare_delta(DeltaPlan *plan, int source);
extern void recompute_run_delta(FinderQuery *fq, List *keys, DestReceiver *dest);
extern void recompute_run_all(DeltaPlan *plan, Oid target, DestReceiver *dest,
							  bool gathered);
extern bool dj_additive_aggregates;
extern void recompute_define_settings(void);
extern bool recompute_whole_pays(Relation target, int64 ngroups);
extern int	recompute_chunk_size(int nkeys, int generic_chunk);
extern int	recompute_chunk_count(DirtyKey **keys, int n, int chunk, int ncols,
								  const int16 *typlen, const bool *typbyval);
extern void recompute_receiver_init(DestReceiver *dest,
									bool (*receive) (TupleTableSlot *slot, DestReceiver *self));

#endif							/* DJ_RECOMPUTE_H */
