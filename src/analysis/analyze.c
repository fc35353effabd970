/*-------------------------------------------------------------------------
 *
 * analyze.c
 *	  Turn a view's analyzed query into a delta plan, checking that it is
 *	  eligible for incremental maintenance (DESIGN.md §3, rules 1-8).
 *
 * The query comes from Postgres's own parser and analyzer (query.c): at
 * creation, as the caller wrote it; afterwards, as its query view bound it.
 * Names, types, operators and collations are therefore resolved exactly as
 * in a plain SELECT, and once.  The Query is then walked:
 *
 *	- every range-table entry must be a WAL-logged table with a primary key
 *	  and no inheritance children (rule 1), joined only by inner joins;
 *	- every function must give the same result each time a row is
 *	  recomputed, no system column is read (rule 4);
 *	- the WHERE / ON conditions are split into join conditions (plain-column
 *	  equalities between two sources) and filters;
 *	- for each pair of joined sources, each side must be reachable through an
 *	  index prefix (rule 2), and from each source a "walk" is planned: the
 *	  order and indexes in which the others are looked up when it changes;
 *	- the result's unique key is derived from the sources' primary keys and
 *	  must appear in the select list (rule 8); filters on other columns are
 *	  rejected unless residual rows are accepted (rule 6).
 *
 * Every rejection goes through analysis_reject(): it raises an error (the
 * worker's analysis of a registered view), or, when a path is chosen for
 * create_view and delta_join.explain() alike, records the failure and lets
 * the analysis go on, so that all failed rules are listed at once and the
 * next path is tried without catching an error.  What later steps index by
 * column (the classes of equal columns) is only built once no column
 * outside a source's user columns is referenced.
 *
 * Nothing here runs code of the query: no expression is evaluated.
 * Everything is allocated in the caller's memory context.
 *
 * The rules live in files sharing one Analysis state (analysis.h): this
 * one has the driver, the shape (rule 5) and the output columns;
 * analyze_source.c the sources (rule 1); determinism.c and row_order.c have rule 4;
 * analyze_tree.c the join tree and its outer joins; analyze_join.c the
 * join (rules 2, 3, 6 and 8); analyze_agg.c aggregates (rule 7);
 * analyze_union.c UNION ALL; analyze_full.c the full-recompute path;
 * flatten.c what is inlined first, semi_join.c the semi-joins and
 * anti-joins pulled up; explain.c the text of delta_join.explain().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "analysis/analysis.h"
#include "base/options.h"

/* ----------------------------------------------------------------
 *		Reporting
 * ----------------------------------------------------------------
 */

void
analysis_reject(Analysis *a, int code, char *message, char *detail, char *hint)
{
	Failure    *f;

	if (a->label)
		message = psprintf("%s (%s)", message, a->label);
	if (!a->collect)
		ereport(ERROR,
				(errcode(code),
				 errmsg("%s", message),
				 detail ? errdetail("%s", detail) : 0,
				 hint ? errhint("%s", hint) : 0));

	f = palloc(sizeof(Failure));
	f->code = code;
	f->message = message;
	f->detail = detail;
	f->hint = hint;
	a->failures = lappend(a->failures, f);
}

/* '"public.orders" AS o', or '"public.orders"' when the alias is the name */
char *
analysis_source_name(DeltaSource *src)
{
	char	   *relname = get_rel_name(src->relid);

	if (strcmp(relname, src->alias) == 0)
		return pstrdup(dj_message_name(src->relname));
	return psprintf("%s AS %s", dj_message_name(src->relname), quote_identifier(src->alias));
}

/* 'table "public.orders" AS o' */
char *
analysis_source_label(DeltaSource *src)
{
	return psprintf("table %s", analysis_source_name(src));
}

/* "o.item_id" */
char *
analysis_column_label(DeltaSource *src, AttrNumber attno)
{
	return psprintf("%s.%s", quote_identifier(src->alias),
					quote_identifier(get_attname(src->relid, attno, false)));
}

/* "(merchant_id, item_id)" from attribute numbers */
char *
analysis_column_list(Oid relid, int n, const AttrNumber *attnums)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(relid, attnums[i], false)));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/* Apply the table hints (matched to range-table entries) to their sources. */
static void
apply_hints(Analysis *a, List *hints)
{
	ListCell   *lc;

	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, a->plan->sources)
		{
			DeltaSource *src = lfirst(lc2);

			if (src->rtindex != hint->rtindex)
				continue;
			if (hint->cache_size >= 0)
				src->cache_size = hint->cache_size;
			if (hint->cache_enabled_set)
				src->cache_enabled = hint->cache_enabled;
			src->lookup_only = hint->lookup_only;
			src->as_of = hint->as_of;
			src->seed_queue_size = hint->seed_queue_size;
			src->seed_max_inflight = hint->seed_max_inflight;
			src->seed_buffer_capacity = hint->seed_buffer_capacity;
		}
	}
}

/*
 * A view whose every source is lookup-only never changes: the changes of
 * those sources are not even captured.  Returns false after reject.
 */
bool
analysis_some_source_drives(Analysis *a)
{
	ListCell   *lc;

	foreach(lc, a->plan->sources)
	{
		if (!((DeltaSource *) lfirst(lc))->lookup_only)
			return true;
	}
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   pstrdup("delta view rule 2: every source is lookup-only"),
		   pstrdup("A lookup-only source's changes trigger nothing, so the view would never change."),
		   pstrdup("Remove the lookup_only hint from the table whose changes should drive the view."));
	return false;
}

/* ----------------------------------------------------------------
 *		Rule 5: only projection and filter
 * ----------------------------------------------------------------
 */

static void
reject_shape(Analysis *a, const char *what)
{
	analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
		   psprintf("delta view rule 5: %s not supported", what),
		   pstrdup("Only projection and filter may stand between the sources, the join and the target."),
		   pstrdup("Remove it from the query; compute it when reading the target instead."));
}

/*
 * SELECT DISTINCT over joins, on the path of groups through joins: its rows
 * are the groups of all its output columns, with no aggregate -- a GROUP BY
 * of the select list, which PostgreSQL computes alike (NULLs equal, one
 * group).  Not DISTINCT ON (one row of each group, chosen by ORDER BY), nor
 * a DISTINCT applied after what comes before it: groups, aggregates,
 * window functions, set-returning functions in the select list.
 */
static bool
distinct_as_groups(Analysis *a, Query *query)
{
	return a->path == DJ_PATH_JOIN_GROUPS && query->distinctClause != NIL &&
		!query->hasDistinctOn && query->groupClause == NIL &&
		query->groupingSets == NIL && !query->hasAggs && query->havingQual == NULL &&
		!query->hasWindowFuncs && !query->hasTargetSRFs;
}

static void
check_query_shape(Analysis *a, Query *query)
{
	if (query->setOperations)
		reject_shape(a, "set operations (UNION, INTERSECT, EXCEPT) are");
	if (query->cteList || query->hasRecursive)
		reject_shape(a, "WITH (common table expressions) is");
	if (query->hasSubLinks)
		reject_shape(a, "subqueries are");
	if (query->distinctClause && !distinct_as_groups(a, query))
		reject_shape(a, "DISTINCT is");
	if (query->hasWindowFuncs)
		reject_shape(a, "window functions are");
	if (query->sortClause)
		reject_shape(a, "ORDER BY is");
	if (query->limitCount || query->limitOffset)
		reject_shape(a, "LIMIT and OFFSET are");
	if (query->groupingSets && query->groupClause == NIL)
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
						pstrdup("delta view rule 5: GROUP BY () is not supported"),
						pstrdup("PostgreSQL takes it as a grouping set, and grouping sets are not maintained."),
						pstrdup("Leave GROUP BY () out: with aggregates, the query without it has the same one row."));
	else if (query->groupingSets)
		reject_shape(a, "GROUPING SETS, ROLLUP and CUBE are");
	if (query->hasTargetSRFs)
		reject_shape(a, "set-returning functions in the select list are");
	if (query->rowMarks)
		reject_shape(a, "FOR UPDATE and FOR SHARE are");
}

/* ----------------------------------------------------------------
 *		Output columns
 * ----------------------------------------------------------------
 */

void
analysis_output(Analysis *a)
{
	DeltaPlan  *plan = a->plan;
	int			n = 0;
	ListCell   *lc;

	plan->colnames = palloc(sizeof(char *) * list_length(plan->query->targetList));
	plan->coltypes = palloc(sizeof(Oid) * list_length(plan->query->targetList));
	plan->coltypmods = palloc(sizeof(int32) * list_length(plan->query->targetList));
	plan->colcollations = palloc(sizeof(Oid) * list_length(plan->query->targetList));

	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		/* (a UNION ALL's columns take their names from its first branch) */
		if (a->label == NULL && (tle->resname == NULL || strcmp(tle->resname, "?column?") == 0))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_COLUMN_DEFINITION),
					 errmsg("output column %d of the query has no name", n + 1),
					 errhint("Give it a name with AS; it becomes a column of the target.")));
		for (int i = 0; i < n && a->label == NULL; i++)
			if (strcmp(plan->colnames[i], tle->resname) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("output column name \"%s\" is used more than once", tle->resname),
						 errhint("Give each output column its own name with AS; they become the columns of the target.")));
		if (exprType((Node *) tle->expr) == UNKNOWNOID)
			elog(ERROR, "output column \"%s\" has type unknown", tle->resname);
		plan->colnames[n] = pstrdup(tle->resname ? tle->resname : "?column?");
		plan->coltypes[n] = exprType((Node *) tle->expr);
		plan->coltypmods[n] = exprTypmod((Node *) tle->expr);
		plan->colcollations[n] = exprCollation((Node *) tle->expr);
		n++;
	}
	plan->ncolumns = n;
}

/* ----------------------------------------------------------------
 *		Driver
 * ----------------------------------------------------------------
 */

DeltaPlan *
analysis_query(Analysis *a, Query *query, List *hints, const DeltaOptions *options)
{
	DeltaPlan  *plan = palloc0(sizeof(DeltaPlan));
	int			nrtes;
	int			rtindex;
	int			ncolumns = 0;
	bool		rte_rejected = false;
	Bitmapset  *referenced;
	ListCell   *lc;

	/*
	 * The analysis flattens the query in place: work on a copy.  Lock what
	 * it reads first, as the rewriter does a view's stored query: a query
	 * view loaded by the worker names relations nothing has locked, which
	 * a concurrent DROP may take away while they are looked at.
	 */
	query = copyObject(query);
	AcquireRewriteLocks(query, true, false);
	a->plan = plan;
	plan->options = *options;
	plan->path = a->path;
	plan->tag_column = -1;
	plan->query = query;

	/*
	 * (Before anything else: flattening would drop a WITH entry nothing
	 * reads, and the statement with it.)
	 */
	if (query->hasModifyingCTE)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 5: data-modifying statements in WITH are not supported"),
			   pstrdup("A view's query runs again at every recompute and refresh: it may only read."),
			   pstrdup("Run the INSERT, UPDATE or DELETE on its own, and keep only the SELECT in the view's query."));
		return plan;
	}
	if (a->path == DJ_PATH_FULL)
	{
		analysis_full(a, query, hints);
		return plan;
	}

	/*
	 * Keyed recompute is exact: the rows of a key are replaced, as in
	 * retract mode, so no filter leaves a row behind.
	 */
	if (a->path == DJ_PATH_KEYED || a->path == DJ_PATH_JOIN_GROUPS)
	{
		plan->options.retract = true;
		plan->options.ignore_non_unique_key_filter = true;
	}
	analysis_flatten(a, query);

	/*
	 * (A semi-join this path cannot take as a join leaves a sublink the
	 * rest would only refuse again.)
	 */
	if (a->path == DJ_PATH_JOIN_GROUPS)
	{
		if (!analysis_pull_up_semi_joins(a, query))
			return plan;
	}
	referenced = analysis_referenced_rtes(query);

	if (query->setOperations)
	{
		plan->kind = DJ_KIND_JOIN;
		analysis_union(a, query, hints, options);
		return plan;
	}

	check_query_shape(a, query);

	/* Sources (rule 1) */
	nrtes = list_length(query->rtable);
	a->rt_source = palloc(sizeof(int) * (nrtes + 1));
	rtindex = 0;
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		a->rt_source[++rtindex] = -1;
		/* (a view's placeholders, a subquery pulled up: see flatten.c) */
		if (!bms_is_member(rtindex, referenced))
			continue;
		if (rte->lateral)
			analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
							pstrdup("delta view rule 5: LATERAL is not supported"),
							pstrdup("Only projection and filter may stand between the sources, the join and the target."),
							pstrdup("Write a LATERAL subquery of tables as a join of them, its correlated conditions in ON; or use strategy => 'auto', which maintains the query by full recompute."));
		rte_rejected |= (rte->rtekind != RTE_RELATION && rte->rtekind != RTE_JOIN);
		switch (rte->rtekind)
		{
			case RTE_RELATION:
				{
					List	   *indexes;
					DeltaSource *src = analysis_make_source(a, rte, rtindex, &indexes);

					if (src == NULL)
					{
						rte_rejected = true;
						break;
					}
					a->rt_source[rtindex] = list_length(plan->sources);
					src->ordinal = rtindex;
					plan->sources = lappend(plan->sources, src);
					a->source_indexes = lappend(a->source_indexes, indexes);
				}
				break;
			case RTE_JOIN:
				break;			/* checked with the join tree */
			case RTE_SUBQUERY:
				reject_shape(a, "subqueries in FROM are");
				break;
			case RTE_FUNCTION:
			case RTE_TABLEFUNC:
				analysis_reject(a, ERRCODE_WRONG_OBJECT_TYPE,
					   pstrdup("delta view rule 1: functions in FROM are not supported as sources"),
					   pstrdup("Every source must be an ordinary or partitioned table whose changes are WAL-logged."),
					   pstrdup("Store the function's result in a table."));
				break;
			case RTE_VALUES:
				reject_shape(a, "VALUES lists are");
				break;
			default:
				reject_shape(a, "this kind of FROM item is");
				break;
		}
	}

	analysis_check_determinism(a, query);

	/*
	 * If some FROM item was rejected, or a column outside the sources' user
	 * columns is read, the rest cannot be checked safely.
	 */
	if (rte_rejected || a->bad_columns)
		return plan;
	if (plan->sources == NIL)
	{
		analysis_reject(a, ERRCODE_FEATURE_NOT_SUPPORTED,
			   pstrdup("delta view rule 1: the query reads no table"),
			   NULL, pstrdup("Select from one or more tables."));
		return plan;
	}

	apply_hints(a, hints);
	if (!analysis_some_source_drives(a))
		return plan;

	/* column classes: every column of every source is a column id */
	a->col_offset = palloc(sizeof(int) * list_length(plan->sources));
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		a->col_offset[foreach_current_index(lc)] = ncolumns;
		ncolumns += src->natts;
	}
	a->ncolumn_ids = ncolumns;
	a->class_parent = palloc(sizeof(int) * Max(ncolumns, 1));
	for (int i = 0; i < ncolumns; i++)
		a->class_parent[i] = i;
	a->equalities = NIL;

	/* expressions, with join alias vars replaced by the columns they stand for */
	query->targetList = (List *) flatten_join_alias_vars_compat(query, (Node *) query->targetList);
	if (query->havingQual)
		query->havingQual = flatten_join_alias_vars_compat(query, query->havingQual);
	plan->quals = analysis_join_tree(a, query);

	analysis_output(a);

	if (distinct_as_groups(a, query))
	{
		query->groupClause = query->distinctClause;
		query->distinctClause = NIL;
		plan->distinct = true;
	}
	if (query->hasAggs || query->groupClause != NIL)
	{
		plan->kind = DJ_KIND_AGGREGATE;
		analysis_aggregate(a);
		if (a->anti_joins != NIL)
			analysis_restore_anti_joins(a, query);
		return plan;
	}

	plan->kind = DJ_KIND_JOIN;
	analysis_join(a);
	return plan;
}

/*
 * Analyze a query for one path; raise the first failed rule as an error.
 * hints are the table hints (DeltaHint *) matched to range-table entries.
 */
DeltaPlan *
analyze_plan_path(Query *query, List *hints, const DeltaOptions *options, DeltaPath path)
{
	Analysis	a = {0};

	a.path = path;
	return analysis_query(&a, query, hints, options);
}

/*
 * Do the groups through joins say something of the query: is it an
 * aggregate, a GROUP BY or a SELECT DISTINCT over several tables, or does
 * it hold a semi- or an anti-join?  Read from the query itself, since an
 * analysis that failed a rule may have stopped before it could tell.
 */
static bool
query_concerns_join_groups(Query *query)
{
	int			relations = 0;
	ListCell   *lc;

	if (analysis_holds_semi_join(query->jointree->quals))
		return true;
	if (!query->hasAggs && query->groupClause == NIL && query->distinctClause == NIL)
		return false;
	foreach(lc, query->rtable)
		relations += (((RangeTblEntry *) lfirst(lc))->rtekind == RTE_RELATION);
	return relations > 1;
}

/*
 * The path of a view under its strategy (DESIGN.md §2): eventual, the
 * delta rewrite or an error; auto, the delta rewrite if the query is
 * eligible, else keyed recompute if it has a delta view's shape, else
 * keyed recompute of groups through joins if it is an aggregate (or a
 * SELECT DISTINCT) over joins, else full recompute; none, keyed recompute
 * or full recompute.
 * Rule 4 applies on every path.
 *
 * create_view and explain() take this one way: each path the strategy
 * allows is analyzed in turn, the rules it fails collected, until one
 * takes the query.  With lines, explain()'s text of every path tried is
 * appended to *lines, and NULL returned if none takes it or the caller
 * lacks the rights create_view would check (access.c); without, a query
 * no path takes raises the first rule the last path failed.  The groups
 * through joins are tried for aggregates (and DISTINCT) over joins only:
 * another query says nothing of them.
 */
static DeltaPlan *
choose_path(Query *query, List *hints, const DeltaOptions *options, List **lines)
{
	static const DeltaPath order[] = {DJ_PATH_DELTA, DJ_PATH_KEYED, DJ_PATH_JOIN_GROUPS,
	DJ_PATH_FULL};
	Failure    *failure = NULL;

	for (int i = 0; i < (int) lengthof(order); i++)
	{
		DeltaPath	path = order[i];
		Analysis	a = {0};
		DeltaPlan  *plan;

		if ((options->strategy == DJ_STRATEGY_NONE && path == DJ_PATH_DELTA) ||
			(options->strategy == DJ_STRATEGY_EVENTUAL && path != DJ_PATH_DELTA) ||
			((options->strategy != DJ_STRATEGY_AUTO || options->catalog_01) &&
			 path == DJ_PATH_JOIN_GROUPS))
			continue;
		a.collect = true;
		a.path = path;
		plan = analysis_query(&a, query, hints, options);
		if (path == DJ_PATH_JOIN_GROUPS && a.failures != NIL &&
			!analysis_aggregate_over_join(&a) && !a.semi_join &&
			!query_concerns_join_groups(query))
			continue;

		/*
		 * explain(): a path that takes the query needs rights the caller
		 * may lack, and so would every later one.
		 */
		if (lines != NULL && a.failures == NIL && !analysis_rights_granted(&a))
		{
			*lines = list_concat(*lines, explain_lines(&a, options));
			return NULL;
		}
		if (lines != NULL)
			*lines = list_concat(*lines, explain_lines(&a, options));
		if (a.failures == NIL)
			return plan;
		failure = linitial(a.failures);
	}
	if (lines == NULL)
		ereport(ERROR,
				(errcode(failure->code),
				 errmsg("%s", failure->message),
				 failure->detail ? errdetail("%s", failure->detail) : 0,
				 failure->hint ? errhint("%s", failure->hint) : 0));
	return NULL;
}

/* The plan of a new view (create_view): see choose_path */
DeltaPlan *
analyze_choose_path(Query *query, List *hints, const DeltaOptions *options)
{
	DeltaOptions settled = options_settle(options, query, hints);

	return choose_path(query, hints, &settled, NULL);
}

/*
 * explain(): the plan of the path create_view would take, as lines of
 * text, after what ruled out the paths tried before it; or the rules each
 * path fails.  Errors that are not rule failures (syntax, unknown tables)
 * are raised as usual.
 */
List *
explain_plan(Query *query, List *hints, const DeltaOptions *options)
{
	List	   *lines = NIL;
	DeltaOptions settled = options_settle(options, query, hints);
	DeltaPlan  *plan;
	ListCell   *lc;

	plan = choose_path(copyObject(query), hints, &settled, &lines);

	/*
	 * A query the planner cannot plan (FULL JOIN ... ON a.x < b.y) fails
	 * create_view with the planner's error when it fills the target: raise
	 * it here too, rather than describe a path no view could take.  Only
	 * the recomputes take joins by other conditions than equalities.
	 */
	if (plan != NULL && plan->path != DJ_PATH_DELTA)
	{
		foreach(lc, QueryRewrite(copyObject(query)))
			(void) planner(lfirst(lc), NULL, 0, NULL);
	}
	return lines;
}


