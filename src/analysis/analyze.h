/*-------------------------------------------------------------------------
 *
 * analyze.h
 *	  Analyzed query -> delta plan, with the eligibility checks of
 *	  DESIGN.md §3.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_ANALYZE_H
#define DJ_ANALYZE_H

#include "base/delta_join.h"
#include "nodes/parsenodes.h"


/* One source of a view: a range-table entry of the query. */
typedef struct DeltaSource
{
	int			rtindex;		/* position in query->rtable */
	int			ordinal;		/* its number in source_catalog and in batches */
	Oid			relid;
	char	   *relname;		/* qualified name, for messages */
	char	   *alias;			/* the name the query uses for it */
	bool		partitioned;
	int			natts;			/* columns of the relation, dropped included */
	Oid			pk_index;		/* the primary key, or see key_has_nulls */
	int			pk_natts;
	AttrNumber *pk_attnums;		/* primary key columns */
	bool		key_has_nulls;	/* pk_index is a UNIQUE NULLS NOT DISTINCT key */

	/* the columns whose changed values make a dirty key */
	int			key_natts;
	AttrNumber *key_attnums;

	/*
	 * Groups through joins (analyze_additive.c): the narrow key (what the
	 * group key and the conditions between sources read) and the wide one
	 * (every column the query reads).  key_attnums is the wide key of an
	 * additive view, else the narrow one; the source_catalog of a view
	 * registers either (view_plan.c), and the finder query reads only the
	 * narrow key's columns of the images either way (recompute.c).  Unset
	 * (0, NULL) on the other paths.
	 */
	int			narrow_natts;
	AttrNumber *narrow_attnums;
	int			wide_natts;
	AttrNumber *wide_attnums;

	/* how the other sources look this one up (first edge that reaches it) */
	Oid			lookup_index;
	int			lookup_nkeys;	/* leading index columns bound */

	int			cache_size;		/* from a hint, or -1 */
	bool		cache_enabled;	/* from a hint, or the view's option */
	bool		lookup_only;	/* from a hint: its changes trigger nothing */
	char	   *as_of;			/* lookup-only by FOR SYSTEM_TIME AS OF this */
	int			seed_queue_size;	/* from a hint: the seeds' client parameters */
	int			seed_max_inflight;
	int			seed_buffer_capacity;

	/*
	 * Outer joins: the sides of outer joins that can null-extend this source
	 * (bit 2 * join + 0 for a left side, + 1 for a right side).  Empty for a
	 * source that is in every result row.
	 */
	Bitmapset  *nulling;

	/*
	 * Where the source's key columns (key_attnums) are in the output: per
	 * key column, the output column that holds its value whenever the
	 * source is in a row (NULL when it is null-extended), or -1.
	 */
	int		   *key_output;
	bool		key_in_output;	/* every key column has one */

	/*
	 * Per key column, an output column equal to it in every row the source
	 * is joined in (its own, or one of a partner's the join equates it
	 * with), or -1: the rows a source row was joined in are found by them.
	 */
	int		   *partner_output;

	/*
	 * Groups through joins: 0 for a table of the outer query, or n for one
	 * read by the subquery of the query's n-th anti-join (NOT EXISTS, NOT
	 * IN), whose changes dirty the outer rows they correlate with.
	 */
	int			anti_join;
} DeltaSource;

/*
 * An output column of an additive aggregate over joins (analyze_additive.c)
 * and how a batch's weighed changed rows change it.
 */
typedef enum AdditiveRole
{
	ADDITIVE_GROUP,				/* a column of the group key */
	ADDITIVE_COUNT_ROWS,		/* count(*) */
	ADDITIVE_COUNT,				/* count(arg) */
	ADDITIVE_SUM				/* sum(arg): integers, or numeric of a fixed
								 * scale */
} AdditiveRole;

typedef struct AdditiveColumn
{
	AdditiveRole role;
	Expr	   *arg;			/* of count(arg) and sum(arg) */
	bool		arg_not_null;	/* a column that is NOT NULL */
	int			counted_by;		/* a sum's: the output column of count(arg),
								 * or -1 */
} AdditiveColumn;

/* One plain-column equality between two sources: left.col = right.col */
typedef struct DeltaJoinCond
{
	int			left;			/* index into DeltaPlan.sources */
	AttrNumber	left_attno;
	int			right;
	AttrNumber	right_attno;
	Oid			opno;			/* the equality operator as written */
	Oid			collation;		/* its input collation */
} DeltaJoinCond;

/*
 * One lookup of a walk: find the rows of `source` whose index columns equal
 * values of already-bound sources.  key i binds index column i + 1.
 */
typedef struct DeltaLookupKey
{
	int			from_source;	/* index into DeltaPlan.sources */
	AttrNumber	from_attno;
	Oid			from_type;
	AttrNumber	index_attno;	/* 1-based index column */
	Oid			proc;			/* btree equality proc, index col op from */
	Oid			collation;		/* the index column's collation */
} DeltaLookupKey;

typedef struct DeltaLookup
{
	int			source;			/* index into DeltaPlan.sources */
	Oid			index;
	int			nkeys;
	DeltaLookupKey *keys;
} DeltaLookup;

/*
 * How a change of one source is applied: fetch the changed row by primary
 * key, then look up the other sources in this order.
 */
typedef struct DeltaWalk
{
	int			driver;			/* index into DeltaPlan.sources */
	List	   *lookups;		/* DeltaLookup *, in walk order */
} DeltaWalk;

typedef struct DeltaPlan
{
	DeltaKind	kind;
	DeltaPath	path;
	bool		whole;			/* an aggregate without GROUP BY: one group */
	bool		distinct;		/* SELECT DISTINCT taken as GROUP BY (groups
								 * through joins): query has the GROUP BY */
	bool		semi_join;		/* an EXISTS or IN taken as a DISTINCT join
								 * (groups through joins, semi_join.c) */
	bool		anti_join;		/* a NOT EXISTS or NOT IN, its subquery's
								 * tables among the sources (anti_join) */
	Query	   *query;			/* analyzed query; join alias vars flattened */
	DeltaOptions options;
	List	   *sources;		/* DeltaSource * */
	List	   *conds;			/* DeltaJoinCond * */
	List	   *quals;			/* implicit-AND filters + join conditions */
	bool		has_filter;		/* some qual (or HAVING) is not a join cond */
	List	   *walks;			/* DeltaWalk *, one per source (joins) */

	/* output (= target) columns */
	int			ncolumns;
	char	  **colnames;
	Oid		   *coltypes;
	int32	   *coltypmods;
	Oid		   *colcollations;

	/*
	 * The result's unique key, as 0-based output column numbers; and for a
	 * join, the sources whose keys make it up (indexes into sources): each
	 * other source's row follows from theirs (analyze_join.c).
	 */
	int			key_ncolumns;
	int		   *key_columns;
	Bitmapset  *key_sources;

	/* aggregates: the group key's index on the single source */
	Oid			group_index;

	/*
	 * Groups through joins: may a batch that changed one source only add
	 * its weighed rows to their groups (analyze_additive.c)?  If so, the
	 * role of each output column; if not, why (for explain).
	 */
	bool		additive;
	AdditiveColumn *additive_columns;
	char	   *additive_refusal;

	/*
	 * Do the group key's equal values have equal bytes (btree equalimage)?
	 * Not for numeric 1.0 and 1.00, float8 0 and -0, or a nondeterministic
	 * collation: there a group's key as written may be the spelling of a
	 * row that left it, so a batch that removes rows recomputes their
	 * groups (apply_additive.c).
	 */
	bool		additive_keys_bytewise;

	/*
	 * Outer joins: some source can be null-extended.  anchors are the
	 * sources (indexes into sources) every result row has at least one of:
	 * a row's first anchor that is not null, with its key, names the slice
	 * of the result it belongs to (apply_outer.c).
	 */
	bool		has_outer;
	List	   *anchors;		/* int */
	List	   *outer_joins;	/* OuterJoin *, for explain */

	/*
	 * UNION ALL (analyze_union.c): the plan of each branch, whose sources
	 * are also this plan's; the output column that tells the branches'
	 * rows apart, in the union and in each branch, or -1; and in a branch
	 * its value there: the constant of its select list, and that as text
	 * (for explain: the text is printed under the view's settings, and
	 * extra_float_digits = 0 rounds a float8).
	 */
	List	   *branches;		/* DeltaPlan * */
	int			tag_column;
	Const	   *tag_const;
	char	   *tag_value;

	/* apply_join.c: the lookup caches, kept with the plan (PlanCache *) */
	List	   *caches;

	/*
	 * apply.c: the code the query runs was found to be trusted by role
	 * owners_checked_as (InvalidOid: not yet) when the worker had taken in
	 * owners_checked_at invalidations; the views that check locked (Oid).
	 */
	uint64		owners_checked_at;
	Oid			owners_checked_as;
	List	   *owners_views;
} DeltaPlan;

/* The ordinal of source rtindex of UNION ALL branch b (0-based) */
#define DJ_BRANCH_ORDINAL(b, rtindex)	(1000 * ((b) + 1) + (rtindex))
#define DJ_ORDINAL_BRANCH(ordinal)		((ordinal) / 1000 - 1)
#define DJ_ORDINAL_RTINDEX(ordinal)		((ordinal) % 1000)

/* One outer join of a plan, as explain shows it. */
typedef struct OuterJoin
{
	JoinType	jointype;		/* JOIN_LEFT, JOIN_RIGHT or JOIN_FULL */
	Bitmapset  *left;			/* sources (indexes) of each side */
	Bitmapset  *right;
} OuterJoin;

extern DeltaPlan *analyze_plan_path(Query *query, List *hints, const DeltaOptions *options,
									DeltaPath path);
extern DeltaPlan *analyze_choose_path(Query *query, List *hints, const DeltaOptions *options);
extern List *explain_plan(Query *query, List *hints, const DeltaOptions *options);
extern void analyze_check_lock_rights(DeltaPlan *plan);
extern int	analysis_under_nullable_side(Node *jtnode, int rtindex);

/* determinism.c: an aggregate's support functions (InvalidOid where none) */
#define AGGREGATE_SUPPORT_FUNCTIONS 8
extern void aggregate_support_functions(Oid aggfnoid, Oid *support);

#endif							/* DJ_ANALYZE_H */
