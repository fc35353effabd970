/*-------------------------------------------------------------------------
 *
 * analysis.h
 *	  What the files of the analyzer share: the state of one analysis and
 *	  the helpers every rule uses.  Private to the files of the analyzer
 *	  (analyze*.c, determinism.c, row_order.c, flatten.c, semi_join.c,
 *	  explain.c); the rest of the library sees analyze.h.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_ANALYSIS_H
#define DJ_ANALYSIS_H

#include "analysis/analyze.h"
#include "nodes/pg_list.h"

/* What we need of one btree index of a source, read once. */
typedef struct IndexDesc
{
	Oid			oid;
	bool		primary;
	int			nkeyatts;
	AttrNumber *attnums;		/* 0 for an expression column */
	Oid		   *opfamilies;
	Oid		   *opcintypes;
	Oid		   *collations;
} IndexDesc;

/* A column of a source that an index lookup could bind, and how. */
typedef struct BindableColumn
{
	AttrNumber	attno;			/* column of the looked-up source */
	Oid			opno;			/* equality, looked-up column on the left */
	Oid			righttype;
	Oid			collation;
	int			from_source;	/* where the value comes from; -1: a key */
	AttrNumber	from_attno;
} BindableColumn;

typedef struct Failure
{
	int			code;
	char	   *message;
	char	   *detail;
	char	   *hint;
} Failure;

/*
 * An anti-join (NOT EXISTS, NOT IN) pulled up for the analysis of groups
 * through joins: its subquery's range table, appended to the query's, and
 * its FROM items in the query's FROM list (flatten.c)
 */
typedef struct AntiJoin
{
	int			first_rtindex;
	int			last_rtindex;
	List	   *fromlist;
} AntiJoin;

typedef struct Analysis
{
	DeltaPlan  *plan;
	bool		collect;		/* explain: collect failures, don't raise */
	List	   *failures;		/* Failure * */
	List	   *notes;			/* explain: what the result owes to the plan
								 * that rule 4 leaves alone (determinism.c) */
	int		   *rt_source;		/* rtindex -> source index, or -1 */
	List	   *source_indexes; /* List of IndexDesc * per source */
	List	   *filters;		/* quals that are not join conditions */
	List	   *computed_joins; /* Bitmapset *: the sources of each equality
								 * that rule 3 refused (for rule 2's errors) */
	List	   *unmergeable_joins;	/* OpExpr *: "=" between plain columns of
									 * two sources that is not mergejoinable
									 * (for rule 2's errors) */
	int		   *col_offset;		/* per source: first column id */
	int		   *class_parent;	/* union-find over column ids */
	List	   *equalities;		/* ColumnEquality *: what class_parent merged */
	int			ncolumn_ids;	/* size of class_parent */
	bool		bad_columns;	/* a system column or whole row is read */
	Bitmapset  *key_sources;	/* sources whose key is in the result's key */
	struct TreeWalk *tree;		/* the join tree, as analyze_tree.c walked it */
	DeltaPath	path;			/* the path analyzed for (keyed relaxes rules) */
	char	   *label;			/* "branch 2 of the UNION ALL", added to messages;
								 * NULL but for a branch */
	List	   *branch_analyses;	/* Analysis * of each branch of a UNION ALL */
	bool		semi_join;		/* groups through joins: WHERE has an EXISTS,
								 * IN, NOT EXISTS or NOT IN, tried as a
								 * DISTINCT join */
	List	   *anti_joins;		/* AntiJoin *, pulled up for the analysis */
	Node	   *view_quals;		/* WHERE with the anti-joins as written */
} Analysis;

#define SOURCE(a, i)	((DeltaSource *) list_nth((a)->plan->sources, (i)))

/* analyze.c */
extern void analysis_reject(Analysis *a, int code, char *message, char *detail, char *hint);
extern bool analysis_some_source_drives(Analysis *a);
extern char *analysis_source_name(DeltaSource *src);
extern char *analysis_source_label(DeltaSource *src);
extern void analysis_add_column(AttrNumber *cols, int *n, AttrNumber att);
extern void analysis_additive(Analysis *a);
extern char *analysis_column_label(DeltaSource *src, AttrNumber attno);
extern char *analysis_column_list(Oid relid, int n, const AttrNumber *attnums);
extern DeltaPlan *analysis_query(Analysis *a, Query *query, List *hints,
								 const DeltaOptions *options);
extern void analysis_output(Analysis *a);

/* analyze_source.c */
extern DeltaSource *analysis_make_source(Analysis *a, RangeTblEntry *rte, int rtindex,
										 List **indexes);
extern bool analysis_check_citus(Analysis *a, Oid relid, const char *label);
extern bool analysis_check_rls(Analysis *a, Oid relid, const char *label);
extern bool analysis_partitions_decodable(Analysis *a, Oid relid, const char *label);
extern int	analysis_partition_key(Analysis *a, DeltaSource *src, AttrNumber **attnums);
extern bool analysis_logged_in_old_row(DeltaSource *src, AttrNumber att, Oid *culprit);
extern bool analysis_refuse_virtual(Analysis *a, DeltaSource *src, AttrNumber att,
									const char *rule);

/* analyze_agg.c */
extern void analysis_aggregate(Analysis *a);
extern bool analysis_aggregate_over_join(Analysis *a);

/* access.c */
extern bool analysis_rights_granted(Analysis *a);

/* analyze_union.c */
extern void analysis_union(Analysis *a, Query *query, List *hints, const DeltaOptions *options);

/* determinism.c */
extern void analysis_check_determinism(Analysis *a, Query *query);

/* row_order.c */
extern void row_order_check_aggregate(Analysis *a, Aggref *agg, Query *level);
extern void row_order_check_level(Analysis *a, Query *level);
extern void row_order_check_array(Analysis *a, SubLink *sublink);
extern bool row_order_equal_is_identical(Oid type, Oid collation);
extern bool row_order_covers_unique_key(RangeTblEntry *rte, Bitmapset *columns,
										Bitmapset *nonnull);

/* analyze_tree.c */
extern List *analysis_join_tree(Analysis *a, Query *query);
extern void analysis_tree_anchors(Analysis *a);
extern bool analysis_tree_on_qual(Analysis *a, Node *qual);
extern Bitmapset *analysis_tree_qual_sides(Analysis *a, Node *qual);

/* analyze_join.c */
extern int	analysis_column_id(Analysis *a, int source, AttrNumber attno);
extern Bitmapset *analysis_relids_sources(Analysis *a, Bitmapset *relids);
extern Bitmapset *analysis_node_sources(Analysis *a, Node *node);
extern bool analysis_var_source(Analysis *a, Node *node, int *source, AttrNumber *attno);
extern DeltaLookup *analysis_choose_lookup(Analysis *a, int source, List *bindable);
extern void analysis_check_partition_key(Analysis *a, int source, List *bindable,
										 const char *what);
extern void analysis_map_key(Analysis *a, List *key_ids);
extern void analysis_join(Analysis *a);

/* explain.c */
extern List *explain_lines(Analysis *a, const DeltaOptions *options);

/* analyze_full.c */
extern void analysis_full(Analysis *a, Query *query, List *hints);

/* flatten.c */
extern void analysis_flatten(Analysis *a, Query *query);
extern bool analysis_is_simple_subquery(Query *sub);
extern Bitmapset *analysis_referenced_rtes(Query *query);

/* semi_join.c */
extern bool analysis_holds_semi_join(Node *node);
extern bool analysis_pull_up_semi_joins(Analysis *a, Query *query);
extern void analysis_restore_anti_joins(Analysis *a, Query *query);

#endif							/* DJ_ANALYSIS_H */
