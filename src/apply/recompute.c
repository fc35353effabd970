/*-------------------------------------------------------------------------
 *
 * recompute.c
 *	  A view's query restricted to a set of keys of one source, or whole,
 *	  planned and run by Postgres's own planner and executor from the
 *	  current source rows, its rows going to a receiver of the applier's.
 *
 * Two forms restrict the view's query to keys of one source s, and they
 * differ on purpose:
 *
 *	region query	(recompute_prepare, recompute_run; outer joins, retract
 *					mode, keyed recompute of a join) the keys as a relation
 *					joined to the query:
 *						keys(k1, k2, ...), a key relation (a tuplestore
 *						the query scans, key_relation_entry)
 *					in its FROM list and "s.k1 = keys.k1 AND ..." in its
 *					WHERE clause, plus "a.pk IS NULL" for the sources the
 *					region requires to be null-extended (the anchors before
 *					s, see apply_outer.c); keys of any number of columns.
 *	group query		(recompute_prepare_groups, recompute_run_groups;
 *					aggregates) for a set of groups of non-NULL keys, the
 *					keys as a filter, "k = ANY($1)", for a one-column key,
 *					else as a relation joined to the query on "k1 =
 *					keys.k1 AND ...", each group's key there once; or for
 *					one group, "k1 = $1 AND k2 = $2 ...", with "kn IS NULL"
 *					for the key columns that are NULL.  HAVING is moved
 *					into a last output column.
 *
 * A third form finds the groups of an aggregate over joins that a batch
 * dirtied (keyed recompute of groups through joins):
 *
 *	finder query	(recompute_prepare_finder, recompute_run_finder) the
 *					query's joins and conditions, some of its sources
 *					replaced by the images of their changed rows --
 *						img_s(k1, k2, ...), a key relation (a tuplestore
 *					the query scans, key_relation_entry) of the
 *					columns the group key and the conditions between
 *					sources read (DeltaSource.key_attnums) -- projecting the
 *					group key, grouped by it: each dirty group once.
 *					Conditions reading other columns of a replaced source
 *					are left out, which can only find more groups.  The
 *					tables of an anti-join's subquery (NOT EXISTS) are
 *					sources too: with some of them replaced, they are
 *					joined to the outer query as a semi-join's are, which
 *					finds the outer rows their changed rows correlate
 *					with; else they, and the anti-join, are left out.
 *
 * Why they differ: a join with the keys yields a row once for each key it
 * equals, and dirty keys are told apart by their bytes (batch.c), so that
 * numeric 1.0 and 1.00 are two keys one row equals.  A join view's region
 * written twice is the same region; an aggregate would count the row
 * twice, so a group query takes each group once (apply_agg.c makes them
 * distinct by the key's own equality before a join), and a filter takes
 * each row once anyway.  And GROUP BY makes one group of a key's NULLs,
 * which IS NULL finds, where a region's key is never NULL unless its NULLs
 * are not distinct (then "s.k = keys.k OR both are NULL").  What the forms
 * share -- the key's parameters, the restriction added to the query's
 * WHERE clause, the output coerced to the target's column types, the
 * plans, the execution -- is done once, below.
 *
 * How each execution is planned (set-based apply, issue 22 item 4): an
 * execution of a set of at least delta_join.set_apply_min_keys keys -- a
 * region query's, a group query's in set mode, a finder or delta query's
 * -- is planned for its keys, as a custom plan with the keys as constants
 * (or its image relations estimated at the rows they hold), and a
 * run of up to RECOMPUTE_SET_CHUNK keys is one execution: the planner sees
 * how many keys there are, and takes a hash join over a sequential scan
 * when they reach much of a table, where the generic plan, which knows
 * nothing of them, descends an index for each.  Fewer keys run the generic
 * plan, built once per batch, RECOMPUTE_CHUNK (region) or GROUP_SET_SIZE
 * (groups) keys an execution, as does a group query of one group, run for
 * each: the planner's default costs (random_page_cost 4) price an index
 * descent as a read from disk, and chose a sequential scan for a hundred
 * groups that the index reads, cached, three times faster
 * (test/bench/join_groups.sh; the default threshold is where the two met
 * there).  A condition on a source under an outer join makes the planner
 * reduce that join as far as it can, so a region query reaches s through
 * its key index and the other sources through the indexes rule 2
 * guarantees; a group query reaches its groups through the group-key
 * index.
 *
 * The queries run as the current user (the target's owner, see runas.c),
 * whose rights on the sources the executor checks; the view's query was
 * bound at creation, so no name is resolved here.
 *
 * Memory: a prepared query and its generic plan live in the caller's
 * memory context; a plan for one execution's keys in a context of its own,
 * deleted after the execution; each run uses the executor's own per-query
 * context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "pgstat.h"
#include "catalog/pg_aggregate.h"
#include "parser/parse_coerce.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/queryenvironment.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "apply/apply_error.h"
#include "apply/recompute.h"
#include "apply/target_shape.h"
#include "base/batch.h"
#include "base/compat.h"

#define REGION_QUERY_NAME	"delta_join: recompute a region"
#define GROUP_QUERY_NAME	"delta_join: recompute groups"
#define VIEW_QUERY_NAME		"delta_join: recompute a view"
#define FINDER_QUERY_NAME	"delta_join: find dirty groups"
#define DELTA_QUERY_NAME	"delta_join: add changed rows to their groups"

/* delta_join.set_apply_min_keys */
static int	dj_set_apply_min_keys = 1000;

/* delta_join.additive_aggregates */
bool		dj_additive_aggregates = true;

/* delta_join.whole_recompute_fraction */
static double dj_whole_recompute_fraction = 0.5;

/* ----------------------------------------------------------------
 *		What the forms share
 * ----------------------------------------------------------------
 */

/* A Var of column attno of range-table entry rtindex */
static Var *
column_var(Query *query, int rtindex, AttrNumber attno)
{
	RangeTblEntry *rte = rt_fetch(rtindex, query->rtable);
	Oid			type;
	int32		typmod;
	Oid			collation;

	get_atttypetypmodcoll(rte->relid, attno, &type, &typmod, &collation);
	return makeVar(rtindex, attno, type, typmod, collation, 0);
}

static Expr *
null_test(Expr *arg, NullTestType type)
{
	NullTest   *test = makeNode(NullTest);

	test->arg = arg;
	test->nulltesttype = type;
	test->location = -1;
	return (Expr *) test;
}

/* Parameter $id, a key's value (or array of values) of type */
static Param *
key_param(int id, Oid type, Oid collation)
{
	Param	   *param = makeNode(Param);

	param->paramkind = PARAM_EXTERN;
	param->paramid = id;
	param->paramtype = type;
	param->paramtypmod = -1;
	param->paramcollid = collation;
	param->location = -1;
	return param;
}

/*
 * Append to conds "col IS NULL" for each column of src, a source the
 * query's rows are to have null-extended, that a join condition under node
 * reads (but the first of its key, tested already).  Each is implied, as
 * every column of a null-extended source is NULL.  With them the planner
 * can run the outer join as an anti-join, which it does only for a column
 * that a strict condition of the join reads: the rows of "no order, item
 * 3" in orders FULL JOIN items are found by whether item 3 has an order,
 * not by joining it with every order of its key and keeping none.
 */
static List *
join_column_null_tests(Query *query, Node *node, DeltaSource *src, List *conds)
{
	if (IsA(node, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) node)->fromlist)
			conds = join_column_null_tests(query, lfirst(lc), src, conds);
	}
	else if (IsA(node, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) node;
		ListCell   *lc;

		conds = join_column_null_tests(query, join->larg, src, conds);
		conds = join_column_null_tests(query, join->rarg, src, conds);
		if (join->quals == NULL || checkExprHasSubLink(join->quals))
			return conds;
		foreach(lc, pull_var_clause(join->quals, 0))
		{
			Var		   *var = lfirst(lc);
			Expr	   *test;

			if (var->varno != src->rtindex || var->varlevelsup != 0 || var->varattno <= 0 ||
				var->varattno == src->pk_attnums[0])
				continue;
			test = null_test((Expr *) column_var(query, src->rtindex, var->varattno), IS_NULL);
			if (!list_member(conds, test))
				conds = lappend(conds, test);
		}
	}
	return conds;
}

/*
 * Restrict query (the caller's copy of the view's query): its WHERE clause
 * ANDed with conds, its output in the target's column types, with HAVING
 * moved into a last output column when having_column.
 */
static Query *
restrict_query(Query *query, List *conds, DeltaPlan *plan, Oid target, bool having_column)
{
	if (conds != NIL)
	{
		if (query->jointree->quals)
			conds = lappend(conds, query->jointree->quals);
		query->jointree->quals = (Node *) make_ands_explicit(conds);
	}

	target_coerce_output(query, plan, target);

	if (having_column && query->havingQual)
	{
		query->targetList = lappend(query->targetList,
									makeTargetEntry((Expr *) query->havingQual,
													list_length(query->targetList) + 1,
													pstrdup("having"), false));
		query->havingQual = NULL;
	}
	compat_set_nullingrels(query);
	return query;
}

/*
 * A set of keys of a source, or of images of its changed rows, as a query
 * reads them: an ephemeral named relation of the query (as a trigger's
 * transition table is), a column per key column of the source and,
 * weighed, the rows' weights (int8) last.  Each execution fills a
 * tuplestore with them (key_relation_fill), which the plan scans where it
 * is: no array per column to build, unnest and join again, and an array
 * or a composite value stays whole.
 */
typedef struct KeyRelation
{
	char	   *name;			/* of the relation, in its query */
	int			source;			/* index into plan->sources */
	bool		weighed;
	TupleDesc	desc;
	KeyShape	shape;			/* of the source's key columns */
} KeyRelation;

/*
 * The rows a generic plan expects of a key relation: as many as the
 * planner guesses for unnest() of an array it does not know
 */
#define KEY_RELATION_GENERIC_ROWS	10

/*
 * A range-table entry for the key relation of src (source s), weighed or
 * not, named alias in the query; *rel describes it.
 */
static RangeTblEntry *
key_relation_entry(Query *query, DeltaSource *src, int source, const char *alias,
				   bool weighed, KeyRelation **rel)
{
	KeyRelation *kr = palloc0(sizeof(KeyRelation));
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	List	   *colnames = NIL;

	kr->name = psprintf("delta_join_%s", alias);
	kr->source = source;
	kr->weighed = weighed;
	kr->desc = CreateTemplateTupleDesc(src->key_natts + (weighed ? 1 : 0));
	kr->shape.nkeys = src->key_natts;
	kr->shape.typlen = palloc(sizeof(int16) * Max(src->key_natts, 1));
	kr->shape.typbyval = palloc(sizeof(bool) * Max(src->key_natts, 1));
	for (int k = 0; k < kr->desc->natts; k++)
	{
		Var		   *var = k < src->key_natts ?
			column_var(query, src->rtindex, src->key_attnums[k]) :
			makeVar(0, 0, INT8OID, -1, InvalidOid, 0);
		char	   *colname = k < src->key_natts ? psprintf("k%d", k + 1) : "w";

		TupleDescInitEntry(kr->desc, k + 1, colname, var->vartype, var->vartypmod, 0);
		TupleDescInitEntryCollation(kr->desc, k + 1, var->varcollid);
		if (k < src->key_natts)
		{
			kr->shape.typlen[k] = TupleDescAttr(kr->desc, k)->attlen;
			kr->shape.typbyval[k] = TupleDescAttr(kr->desc, k)->attbyval;
		}
		rte->coltypes = lappend_oid(rte->coltypes, var->vartype);
		rte->coltypmods = lappend_int(rte->coltypmods, var->vartypmod);
		rte->colcollations = lappend_oid(rte->colcollations, var->varcollid);
		colnames = lappend(colnames, makeString(pstrdup(colname)));
	}
	rte->rtekind = RTE_NAMEDTUPLESTORE;
	rte->relid = InvalidOid;
	rte->enrname = kr->name;
	rte->enrtuples = KEY_RELATION_GENERIC_ROWS;
	rte->inFromCl = true;
	rte->eref = makeAlias(alias, colnames);
	rte->alias = rte->eref;
	*rel = kr;
	return rte;
}

/*
 * Register in env the key relation rel holding keys[0 .. n - 1] (DirtyKey
 * *, values in key order; toasted ones detoasted), with their weights when
 * weighed: a tuplestore in the current memory context (key_relations_free).
 */
static void
key_relation_fill(KeyRelation *rel, QueryEnvironment *env, DirtyKey **keys, int n)
{
	EphemeralNamedRelation enr = palloc0(sizeof(EphemeralNamedRelationData));
	Tuplestorestate *store = tuplestore_begin_heap(false, false, work_mem);
	int			natts = rel->desc->natts;
	Datum	   *values = palloc(sizeof(Datum) * natts);
	bool	   *isnull = palloc(sizeof(bool) * natts);

	for (int i = 0; i < n; i++)
	{
		dirty_key_detoast(&rel->shape, keys[i]->values, keys[i]->isnull, values);
		memcpy(isnull, keys[i]->isnull, sizeof(bool) * rel->shape.nkeys);
		if (rel->weighed)
		{
			values[natts - 1] = Int64GetDatum(keys[i]->weight);
			isnull[natts - 1] = false;
		}
		tuplestore_putvalues(store, rel->desc, values, isnull);
		dirty_key_detoast_free(&rel->shape, keys[i]->values, values);
	}
	enr->md.name = rel->name;
	enr->md.reliddesc = InvalidOid;
	enr->md.tupdesc = rel->desc;
	enr->md.enrtype = ENR_NAMED_TUPLESTORE;
	enr->md.enrtuples = n;
	enr->reldata = store;
	register_ENR(env, enr);
	pfree(values);
	pfree(isnull);
}

/* Let go of the tuplestores of the key relations rels (KeyRelation *) in env */
static void
key_relations_free(QueryEnvironment *env, List *rels)
{
	ListCell   *lc;

	foreach(lc, rels)
	{
		KeyRelation *rel = lfirst(lc);

		tuplestore_end(get_ENR(env, rel->name)->reldata);
		unregister_ENR(env, rel->name);
	}
}

/* The keys of a list (DirtyKey *), as an array */
static DirtyKey **
key_array(List *keys)
{
	DirtyKey  **array = palloc(sizeof(DirtyKey *) * Max(list_length(keys), 1));
	ListCell   *lc;

	foreach(lc, keys)
		array[foreach_current_index(lc)] = lfirst(lc);
	return array;
}

/*
 * A query to be planned for the keys of env (set-based apply): its key
 * relations estimated at the rows they hold
 */
static void
key_estimates(Query *query, QueryEnvironment *env)
{
	ListCell   *lc;

	if (env == NULL)
		return;
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_NAMEDTUPLESTORE)
			rte->enrtuples = get_ENR(env, rte->enrname)->md.enrtuples;
	}
}

/*
 * Run a plan with those parameters (NULL: none) and the ephemeral named
 * relations of env (NULL: none), its rows going to dest
 */
static void
run_plan(PlannedStmt *pstmt, const char *name, ParamListInfo params, QueryEnvironment *env,
		 DestReceiver *dest)
{
	QueryDesc  *qd = CreateQueryDesc(pstmt, name, GetActiveSnapshot(), InvalidSnapshot,
									 dest, params, env, 0);

	ExecutorStart(qd, 0);
	ExecutorRun_compat(qd, ForwardScanDirection, 0, true);
	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
}

/* Parameters of a run, their values and types given */
static ParamListInfo
run_params(int n, const Datum *values, const bool *isnull, const Oid *types)
{
	ParamListInfo params = makeParamList(n);

	for (int k = 0; k < n; k++)
	{
		params->params[k].value = values[k];
		params->params[k].isnull = isnull[k];
		params->params[k].pflags = PARAM_FLAG_CONST;
		params->params[k].ptype = types[k];
	}
	params->numParams = n;
	return params;
}

/* Define delta_join.set_apply_min_keys (_PG_init) */
void
recompute_define_settings(void)
{
	DefineCustomIntVariable("delta_join.set_apply_min_keys",
							"Fewest keys of one recompute execution that is planned for its keys (set-based apply).",
							"An execution of fewer keys runs a generic plan, which reaches each key through an index.",
							&dj_set_apply_min_keys,
							1000,
							1, INT_MAX,
							PGC_SIGHUP,
							0,
							NULL, NULL, NULL);
	DefineCustomRealVariable("delta_join.whole_recompute_fraction",
							 "Share of a target's rows that the groups one batch dirties must reach for the whole query to be recomputed instead (groups through joins).",
							 "Only for at least delta_join.set_apply_min_keys groups, or all of them; a value above 1 only when a batch dirties more groups than the target has rows.",
							 &dj_whole_recompute_fraction,
							 0.5,
							 0.0, 1000.0,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("delta_join.additive_aggregates",
							 "Add a batch's changed rows to the groups of an aggregate over joins, instead of recomputing the groups.",
							 "Only for counts and sums of integers or of numeric of a fixed scale, in a batch that changed one source of the view.",
							 &dj_additive_aggregates,
							 true,
							 PGC_SIGHUP,
							 0,
							 NULL, NULL, NULL);
}

/*
 * The target's rows, about: as its statistics count them (each insert and
 * delete, the worker's own among them, once reported), or, without counts,
 * as the planner estimates them.  Not from its pages when there are
 * counts: a target whose rows are updated batch after batch grows dead
 * versions between vacuums, and its pages, taken at the density of its
 * last VACUUM or ANALYZE, then overstate its rows several times over.
 */
static double
target_rows(Relation target)
{
	BlockNumber pages;
	double		tuples;
	double		allvisfrac;

	if (pgstat_track_counts)
	{
		int64		live = DatumGetInt64(DirectFunctionCall1(pg_stat_get_live_tuples,
															 ObjectIdGetDatum(RelationGetRelid(target))));

		if (live > 0)
			return (double) live;
	}
	table_relation_estimate_size(target, NULL, &pages, &tuples, &allvisfrac);
	return tuples;
}

/*
 * Does recomputing the whole query pay, for ngroups dirty groups of a
 * target whose rows are the query's groups?  Each dirty group reads its
 * rows again, so once the dirty groups make up most of the target they read
 * most of what the whole query reads, one group query at a time.
 *
 * Groups can differ in size: a few dirty small groups beside clean large
 * ones read far less than the whole query.  Fewer groups than set-based
 * apply takes are each reached through an index, in time that follows
 * their own rows, so for them the whole query pays only once every group
 * is dirty; a set as large as set-based apply takes is planned as one
 * join over the sources, which reads the large groups' tables anyway.
 */
bool
recompute_whole_pays(Relation target, int64 ngroups)
{
	double		tuples;
	bool		whole;

	if (ngroups == 0)
		return false;
	tuples = target_rows(target);
	if (ngroups < dj_set_apply_min_keys && (double) ngroups < tuples)
		return false;
	whole = (double) ngroups >= dj_whole_recompute_fraction * tuples;
	elog(DEBUG1, "%lld dirty groups of a target of about %.0f rows: %s",
		 (long long) ngroups, tuples, whole ? "the whole query recomputed" : "each group recomputed");
	return whole;
}

/*
 * How many keys one execution takes, of a run of nkeys: many at once when
 * the run is large enough to be planned for its keys.
 */
int
recompute_chunk_size(int nkeys, int generic_chunk)
{
	return nkeys >= dj_set_apply_min_keys ? RECOMPUTE_SET_CHUNK : generic_chunk;
}

/*
 * How many of the n keys from keys[0] one execution takes: at most chunk,
 * and no more than about RECOMPUTE_SET_BYTES of their values (an array of
 * a group query's keys is limited to 1 GB, and a plan for the keys copies
 * it; a key relation's tuplestore would go to disk), at least one.
 * ncols columns of the types given.
 */
int
recompute_chunk_count(DirtyKey **keys, int n, int chunk, int ncols, const int16 *typlen,
					  const bool *typbyval)
{
	Size		bytes = 0;
	int			count = 0;

	while (count < Min(chunk, n))
	{
		for (int k = 0; k < ncols; k++)
			if (!keys[count]->isnull[k])
				bytes += typbyval[k] ? sizeof(Datum) :
					datumGetSize(keys[count]->values[k], false, typlen[k]);
		if (count > 0 && bytes > RECOMPUTE_SET_BYTES)
			break;
		count++;
	}
	return count;
}

static void
keyed_plan_init(KeyedPlan *kp, Query *query, const char *name)
{
	kp->query = query;
	kp->name = name;
	kp->generic = NULL;
	kp->cxt = CurrentMemoryContext;
}

/*
 * Run a keyed query for nkeys keys (0: one key of many executions), its
 * parameters (params) bound to them, its rows going to dest: planned for
 * its keys when they are a set large enough, else by the generic plan.
 * The two plans compute the same query, so which one ran never shows in
 * the result.
 */
static void
keyed_plan_run(KeyedPlan *kp, int nkeys, ParamListInfo params, QueryEnvironment *env,
			   DestReceiver *dest)
{
	MemoryContext old;

	if (nkeys > 0 && nkeys >= dj_set_apply_min_keys)
	{
		MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "delta_join set-based plan",
												  ALLOCSET_DEFAULT_SIZES);
		PlannedStmt *pstmt;
		Query	   *query;

		old = MemoryContextSwitchTo(cxt);
		query = copyObject(kp->query);
		key_estimates(query, env);
		pstmt = pg_plan_query(query, kp->name, 0, params);
		MemoryContextSwitchTo(old);
		run_plan(pstmt, kp->name, params, env, dest);
		MemoryContextDelete(cxt);
		return;
	}
	if (kp->generic == NULL)
	{
		old = MemoryContextSwitchTo(kp->cxt);
		kp->generic = pg_plan_query(copyObject(kp->query), kp->name, CURSOR_OPT_GENERIC_PLAN,
									NULL);
		MemoryContextSwitchTo(old);
	}
	run_plan(kp->generic, kp->name, params, env, dest);
}

static void
receiver_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
receiver_shutdown(DestReceiver *self)
{
}

/*
 * A DestReceiver of the applier's own, whose rows go to receive; it lives
 * on the caller's stack, so there is nothing to destroy.
 */
void
recompute_receiver_init(DestReceiver *dest,
						bool (*receive) (TupleTableSlot *slot, DestReceiver *self))
{
	dest->receiveSlot = receive;
	dest->rStartup = receiver_startup;
	dest->rShutdown = receiver_shutdown;
	dest->rDestroy = receiver_shutdown;
	dest->mydest = DestNone;
}

/* ----------------------------------------------------------------
 *		Region queries
 * ----------------------------------------------------------------
 */

/* The type's default equality operator, or an error */
static Oid
ordinary_equality_operator(Oid type)
{
	Oid			eq;

	get_sort_group_operators(type, false, true, false, NULL, &eq, NULL, NULL);
	return eq;
}

/* A function of a range-table entry: unnest($param), of an array of type */
static RangeTblFunction *
unnest_function(Oid type, Oid collation, int param)
{
	RangeTblFunction *rtf = makeNode(RangeTblFunction);

	rtf->funcexpr = (Node *) makeFuncExpr(F_UNNEST_ANYARRAY, type,
										  list_make1(key_param(param, get_array_type(type),
															   collation)),
										  collation, collation, COERCE_EXPLICIT_CALL);
	((FuncExpr *) rtf->funcexpr)->funcretset = true;
	rtf->funccolcount = 1;
	return rtf;
}

/*
 * A range-table entry "unnest($p, $p+1, ...) AS alias(c1, c2, ...)", a
 * column of each type given (with its collation), each from an array
 * parameter (the first first_param) of that type's array type.
 */
static RangeTblEntry *
unnest_entry(int n, const Oid *types, const Oid *collations, int first_param,
			 const char *alias, const char *colprefix)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	List	   *colnames = NIL;

	rte->rtekind = RTE_FUNCTION;
	rte->inFromCl = true;
	for (int k = 0; k < n; k++)
	{
		rte->functions = lappend(rte->functions,
								 unnest_function(types[k], collations[k], first_param + k));
		colnames = lappend(colnames, makeString(psprintf("%s%d", colprefix, k + 1)));
	}
	rte->eref = makeAlias(alias, colnames);
	rte->alias = rte->eref;
	return rte;
}

/*
 * Add the key relation "keys" to the query's FROM list, a column per key
 * column of src (source s), and return "src.key = keys.key ...", the
 * conditions for its WHERE clause.
 */
static List *
add_key_filter(RegionQuery *rq, Query *query, DeltaSource *src, int source)
{
	RangeTblEntry *rte = key_relation_entry(query, src, source, "keys", false, &rq->keys);
	RangeTblRef *rtr = makeNode(RangeTblRef);
	List	   *conds = NIL;
	int			rtindex;

	query->rtable = lappend(query->rtable, rte);
	rtindex = list_length(query->rtable);
	rtr->rtindex = rtindex;
	query->jointree->fromlist = lappend(query->jointree->fromlist, rtr);

	for (int k = 0; k < src->key_natts; k++)
	{
		Var		   *var = column_var(query, src->rtindex, src->key_attnums[k]);
		Var		   *key = makeVar(rtindex, k + 1, var->vartype, var->vartypmod,
								  var->varcollid, 0);
		Oid			eq = ordinary_equality_operator(var->vartype);
		Expr	   *cond = make_opclause(eq, BOOLOID, false, (Expr *) var, (Expr *) key,
										 InvalidOid, var->varcollid);

		/* a key whose NULLs are not distinct: a NULL finds NULLs */
		if (src->key_has_nulls)
			cond = make_orclause(list_make2(cond,
											make_andclause(list_make2(null_test((Expr *) var, IS_NULL),
																	  null_test((Expr *) key, IS_NULL)))));
		conds = lappend(conds, cond);
	}
	return conds;
}

/*
 * Plan the region query of a view for source `source` (an index into
 * plan->sources), with the sources in null_sources required to be
 * null-extended.  Its rows are in the column types of target.
 */
RegionQuery *
recompute_prepare(DeltaPlan *plan, Oid target, int source, Bitmapset *null_sources)
{
	RegionQuery *rq = palloc0(sizeof(RegionQuery));
	DeltaSource *src = list_nth(plan->sources, source);
	Query	   *query = copyObject(plan->query);
	List	   *conds;
	int			s = -1;

	rq->src = src;
	rq->nkeys = src->key_natts;

	conds = add_key_filter(rq, query, src, source);
	rq->match_nulls = src->key_has_nulls;
	while ((s = bms_next_member(null_sources, s)) >= 0)
	{
		DeltaSource *other = list_nth(plan->sources, s);

		/*
		 * A primary key column is NULL only when its source is null-extended
		 * (sources whose key may hold NULLs are never null-extended).
		 */
		conds = lappend(conds, null_test((Expr *) column_var(query, other->rtindex,
															 other->pk_attnums[0]),
										 IS_NULL));
		conds = join_column_null_tests(query, (Node *) query->jointree, other, conds);
	}
	keyed_plan_init(&rq->kp, restrict_query(query, conds, plan, target, false),
					REGION_QUERY_NAME);
	return rq;
}

/*
 * Run a region query for keys (DirtyKey *, values of the source's key
 * columns in key order; keys with a NULL value name no row and are
 * skipped), its rows going to dest.  An error names the keys of the
 * execution it is raised in (apply_error.h).
 */
void
recompute_run(RegionQuery *rq, List *keys, DestReceiver *dest)
{
	DirtyKey  **run_keys = palloc(sizeof(DirtyKey *) * Max(list_length(keys), 1));
	ApplyErrorPlace outer_place = apply_error_place;
	ListCell   *lc;
	int			i = 0;
	int			chunk;

	foreach(lc, keys)
	{
		DirtyKey   *key = lfirst(lc);
		bool		has_null = false;

		for (int k = 0; k < rq->nkeys; k++)
			has_null |= key->isnull[k];
		if (has_null && !rq->match_nulls)
			continue;			/* a primary key is never NULL: no row has it */
		run_keys[i++] = key;
	}

	chunk = recompute_chunk_size(i, RECOMPUTE_CHUNK);
	for (int start = 0, count; start < i; start += count)
	{
		QueryEnvironment *env = create_queryEnv();

		count = recompute_chunk_count(run_keys + start, i - start, chunk, rq->nkeys,
									  rq->keys->shape.typlen, rq->keys->shape.typbyval);
		key_relation_fill(rq->keys, env, run_keys + start, count);
		apply_error_keys(rq->src, run_keys[start], count);
		keyed_plan_run(&rq->kp, count, NULL, env, dest);
		key_relations_free(env, list_make1(rq->keys));
	}
	apply_error_place = outer_place;
}

/* ----------------------------------------------------------------
 *		Group queries
 * ----------------------------------------------------------------
 */

/*
 * Prepare the group query of an aggregate view: its query restricted to
 * one group -- WHERE ... AND k1 = $1 AND k2 = $2 ..., with "kn IS NULL"
 * instead for the key columns in nulls (GROUP BY puts NULLs in one group)
 * -- or, in set mode, to a set of groups of non-NULL keys: "k1 = ANY($1)"
 * for a one-column key, else joined to "unnest($1, $2, ...) AS keys(k1,
 * k2, ...)" on "k1 = keys.k1 AND ...", each group's key there once (the
 * caller's part: a row equal to two of them would be counted twice).
 * HAVING is moved to a last output column.  Parameter n is the value of
 * group clause n (the group key columns, in the order of
 * DeltaSource.key_attnums), or in set mode an array of them; its rows are
 * in the column types of target.  Set mode needs each key column's
 * equality to take two values of its type, and the type an array type
 * (the caller checks).
 */
GroupQuery *
recompute_prepare_groups(DeltaPlan *plan, Oid target, Bitmapset *nulls, bool set_mode)
{
	GroupQuery *gq = palloc0(sizeof(GroupQuery));
	Query	   *query = copyObject(plan->query);
	int			ngroup = list_length(query->groupClause);
	Oid		   *collations = palloc(sizeof(Oid) * Max(ngroup, 1));
	int			keys_rtindex = 0;
	List	   *conds = NIL;
	ListCell   *lc;

	gq->paramtypes = palloc(sizeof(Oid) * Max(ngroup, 1));
	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		Var		   *var = (Var *) get_sortgroupclause_tle(sgc, query->targetList)->expr;
		Oid			lefttype;

		op_input_types(sgc->eqop, &lefttype, &gq->paramtypes[gq->nparams]);
		collations[gq->nparams++] = var->varcollid;
	}
	if (set_mode && ngroup > 1)
	{
		RangeTblRef *rtr = makeNode(RangeTblRef);

		query->rtable = lappend(query->rtable,
								unnest_entry(ngroup, gq->paramtypes, collations, 1, "keys", "k"));
		keys_rtindex = rtr->rtindex = list_length(query->rtable);
		query->jointree->fromlist = lappend(query->jointree->fromlist, rtr);
	}

	foreach(lc, query->groupClause)
	{
		SortGroupClause *sgc = lfirst(lc);
		Var		   *var = (Var *) get_sortgroupclause_tle(sgc, query->targetList)->expr;
		int			k = foreach_current_index(lc);
		Oid			type = gq->paramtypes[k];
		Expr	   *value;

		if (bms_is_member(k, nulls))
		{
			conds = lappend(conds, null_test((Expr *) copyObject(var), IS_NULL));
			continue;
		}
		if (set_mode)
			gq->paramtypes[k] = get_array_type(type);
		if (set_mode && ngroup == 1)
		{
			ScalarArrayOpExpr *any = makeNode(ScalarArrayOpExpr);

			any->opno = sgc->eqop;
			any->opfuncid = get_opcode(sgc->eqop);
			any->useOr = true;
			any->inputcollid = var->varcollid;
			any->args = list_make2(copyObject(var),
								   key_param(k + 1, gq->paramtypes[k], var->varcollid));
			any->location = -1;
			conds = lappend(conds, any);
			continue;
		}
		if (set_mode)
			value = (Expr *) makeVar(keys_rtindex, k + 1, type, -1, var->varcollid, 0);
		else
			value = (Expr *) key_param(k + 1, type, var->varcollid);
		conds = lappend(conds,
						make_opclause(sgc->eqop, BOOLOID, false, (Expr *) copyObject(var), value,
									  InvalidOid, var->varcollid));
	}
	keyed_plan_init(&gq->kp, restrict_query(query, conds, plan, target, true),
					GROUP_QUERY_NAME);
	gq->set_mode = set_mode;
	return gq;
}

/*
 * Run a group query for nkeys groups with its parameters' values (one per
 * group clause: the group's key, or in set mode an array of nkeys keys),
 * its rows going to dest.
 */
void
recompute_run_groups(GroupQuery *gq, int nkeys, const Datum *values, const bool *isnull,
					 DestReceiver *dest)
{
	ParamListInfo params = run_params(gq->nparams, values, isnull, gq->paramtypes);

	keyed_plan_run(&gq->kp, gq->set_mode ? nkeys : 0, params, NULL, dest);
	pfree(params);
}

/* ----------------------------------------------------------------
 *		Finder queries
 * ----------------------------------------------------------------
 */

typedef struct ImageMap
{
	DeltaPlan  *plan;
	Bitmapset  *replaced;		/* sources replaced by their images */
	Bitmapset  *left_out;		/* sources the query does not read */
	int		   *image_rtindex;	/* per source: its images' entry, or 0 */
	bool		unmapped;		/* a column outside a replaced source's image,
								 * or of a source left out, was read */
	bool		wide;			/* map every column of an image, not only
								 * those of the narrow key */
} ImageMap;

/* Is att a column of the source's narrow key (or is there none)? */
static bool
in_narrow_key(DeltaSource *src, AttrNumber att)
{
	if (src->narrow_attnums == NULL)
		return true;
	for (int k = 0; k < src->narrow_natts; k++)
		if (src->narrow_attnums[k] == att)
			return true;
	return false;
}

/*
 * A Var of a replaced source becomes the column of its images' entry that
 * holds it; one of a column the images lack, or of a source left out, sets
 * map->unmapped.
 */
static Node *
image_map_mutator(Node *node, ImageMap *map)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var) && ((Var *) node)->varlevelsup == 0)
	{
		Var		   *var = (Var *) node;
		int			s = -1;

		while ((s = bms_next_member(map->left_out, s)) >= 0)
			if (var->varno == ((DeltaSource *) list_nth(map->plan->sources, s))->rtindex)
				map->unmapped = true;
		s = -1;
		while ((s = bms_next_member(map->replaced, s)) >= 0)
		{
			DeltaSource *src = list_nth(map->plan->sources, s);

			if (var->varno != src->rtindex)
				continue;
			for (int k = 0; k < src->key_natts; k++)
				if (src->key_attnums[k] == var->varattno &&
					(map->wide || in_narrow_key(src, var->varattno)))
					return (Node *) makeVar(map->image_rtindex[s], k + 1, var->vartype,
											var->vartypmod, var->varcollid, 0);
			map->unmapped = true;
			return node;
		}
		return (Node *) copyObject(var);
	}
	return expression_tree_mutator(node, image_map_mutator, (void *) map);
}

/*
 * The target list of an image query's group key (the view's group key
 * through map), in group-clause order, and its group clause (*groups).
 */
static List *
group_key_targets(DeltaPlan *plan, ImageMap *map, List **groups)
{
	List	   *tlist = NIL;
	ListCell   *lc;

	*groups = NIL;
	foreach(lc, plan->query->groupClause)
	{
		SortGroupClause *sgc = copyObject(lfirst(lc));
		TargetEntry *tle = get_sortgroupclause_tle(sgc, plan->query->targetList);
		TargetEntry *out;
		int			k = foreach_current_index(lc) + 1;

		map->unmapped = false;
		out = makeTargetEntry((Expr *) image_map_mutator((Node *) tle->expr, map), k,
							  psprintf("g%d", k), false);
		if (map->unmapped)
			elog(ERROR, "group key column %d is not in the image of its source", k);
		out->ressortgroupref = sgc->tleSortGroupRef = k;
		tlist = lappend(tlist, out);
		*groups = lappend(*groups, sgc);
	}
	return tlist;
}

/*
 * Add to query's range table the images of the changed rows of src (source
 * s), a key relation img_s, weighed or not, noted in fq; return its index.
 */
static int
add_image_entry(FinderQuery *fq, Query *query, DeltaSource *src, int source, bool weighed)
{
	KeyRelation *rel;

	query->rtable = lappend(query->rtable,
							key_relation_entry(query, src, source,
											   psprintf("img_%d", source + 1), weighed, &rel));
	fq->images = lappend(fq->images, rel);
	return list_length(query->rtable);
}

/*
 * Make query (a copy of the view's) read fromlist under quals, grouped by
 * groups, its output tlist: a finder or a delta query.
 */
static void
set_image_query(Query *query, List *fromlist, List *quals, List *tlist, List *groups,
				bool has_aggs)
{
	ListCell   *lc;

	/*
	 * The range table's joins are inner joins now, as the FROM list has
	 * them: an outer join that a condition strict for its nullable side
	 * makes an inner one (WHERE x2.a > 0 over LEFT JOIN s x2), which is
	 * what this path takes, would send the planner looking for outer joins
	 * that its tree no longer has ("so where are the outer joins?").
	 */
	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_JOIN)
			rte->jointype = JOIN_INNER;
	}
	query->jointree = makeFromExpr(fromlist, quals != NIL ? (Node *) make_ands_explicit(quals) : NULL);
	query->targetList = tlist;
	query->groupClause = groups;
	query->groupingSets = NIL;
	query->havingQual = NULL;
	query->hasAggs = has_aggs;
	query->distinctClause = NIL;
	query->hasDistinctOn = false;
	query->sortClause = NIL;
	query->limitCount = NULL;
	query->limitOffset = NULL;
	compat_set_nullingrels(query);
}

/*
 * Plan the finder query of an aggregate view over joins for the sources in
 * replaced (indexes into plan->sources, each with key columns; all of the
 * outer query, or all of one anti-join's subquery): its parameters are,
 * per replaced source in order, an array per key column.  Its rows are the
 * group keys, in group-clause order and in the types of the group key
 * columns.  With none replaced, it finds every group of the outer query,
 * its anti-joins left out.
 */
FinderQuery *
recompute_prepare_finder(DeltaPlan *plan, Bitmapset *replaced)
{
	FinderQuery *fq = palloc0(sizeof(FinderQuery));
	Query	   *query = copyObject(plan->query);
	ImageMap	map;
	List	   *fromlist = NIL;
	List	   *quals = NIL;
	List	   *tlist = NIL;
	List	   *groups = NIL;
	int			anti_join = bms_is_empty(replaced) ? 0 :
		((DeltaSource *) list_nth(plan->sources, bms_next_member(replaced, -1)))->anti_join;
	ListCell   *lc;

	map.plan = plan;
	map.replaced = replaced;
	map.wide = false;
	map.left_out = NULL;
	map.image_rtindex = palloc0(sizeof(int) * list_length(plan->sources));
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		int			source = foreach_current_index(lc);
		int			rtindex = src->rtindex;

		/* (the anti-joins but the one whose tables changed, as a semi-join) */
		if (src->anti_join != 0 && src->anti_join != anti_join)
		{
			map.left_out = bms_add_member(map.left_out, source);
			continue;
		}
		if (bms_is_member(source, replaced))
			rtindex = map.image_rtindex[source] = add_image_entry(fq, query, src, source, false);
		fromlist = lappend(fromlist, makeNode(RangeTblRef));
		((RangeTblRef *) llast(fromlist))->rtindex = rtindex;
	}

	/* the conditions (inner joins: ON and WHERE alike) the images can take */
	foreach(lc, plan->quals)
	{
		Node	   *qual;

		map.unmapped = false;
		qual = image_map_mutator(lfirst(lc), &map);
		if (!map.unmapped)
			quals = lappend(quals, qual);
	}

	/* the group key, grouped by: each group once */
	tlist = group_key_targets(plan, &map, &groups);
	fq->ngroup = list_length(tlist);

	set_image_query(query, fromlist, quals, tlist, groups, false);
	keyed_plan_init(&fq->kp, query, FINDER_QUERY_NAME);
	return fq;
}

/*
 * Run a finder query with the images of its replaced sources: keys[s], the
 * dirty keys (DirtyKey *) of source s, for each of them, all in one
 * execution.  Its rows go to dest.
 */
void
recompute_run_finder(FinderQuery *fq, List **keys, DestReceiver *dest)
{
	QueryEnvironment *env = create_queryEnv();
	int			nimages = 0;
	ListCell   *lc;

	foreach(lc, fq->images)
	{
		KeyRelation *rel = lfirst(lc);
		List	   *images = keys[rel->source];

		key_relation_fill(rel, env, key_array(images), list_length(images));
		nimages = Max(nimages, list_length(images));
	}
	keyed_plan_run(&fq->kp, nimages, NULL, env, dest);
	key_relations_free(env, fq->images);
}

/* ----------------------------------------------------------------
 *		Delta queries (additive aggregates over joins)
 * ----------------------------------------------------------------
 */

/*
 * sum(arg), FILTER (WHERE filter) when given: of an int8, which sums in a
 * 128-bit integer, or of a numeric.  Either gives a numeric.
 */
static Aggref *
delta_sum(Expr *arg, Expr *filter)
{
	Aggref	   *agg = makeNode(Aggref);
	Oid			type = exprType((Node *) arg);

	Assert(type == INT8OID || type == NUMERICOID);
	agg->aggfnoid = type == INT8OID ? F_SUM_INT8 : F_SUM_NUMERIC;
	agg->aggtype = NUMERICOID;
	agg->aggcollid = InvalidOid;
	agg->inputcollid = InvalidOid;
	agg->aggargtypes = list_make1_oid(type);
	agg->args = list_make1(makeTargetEntry(arg, 1, NULL, false));
	agg->aggfilter = filter;
	agg->aggkind = AGGKIND_NORMAL;
	agg->aggsplit = AGGSPLIT_SIMPLE;
	agg->location = -1;
	return agg;
}

/* expr as type (int8 or numeric) */
static Expr *
coerced(Expr *expr, Oid type)
{
	Node	   *result = coerce_to_target_type(NULL, (Node *) expr, exprType((Node *) expr),
											   type, -1, COERCION_EXPLICIT,
											   COERCE_EXPLICIT_CAST, -1);

	if (result == NULL)
		elog(ERROR, "no cast of type %s to %s", format_type_be(exprType((Node *) expr)),
			 format_type_be(type));
	return (Expr *) result;
}

/*
 * A weighed value, arg * weight: in int8 for a smallint or an integer (the
 * product fits), else in numeric.
 */
static Expr *
weighed(Expr *arg, Var *weight)
{
	Oid			type = exprType((Node *) arg);

	if (type == INT2OID || type == INT4OID)
		return (Expr *) makeFuncExpr(F_INT8MUL, INT8OID,
									 list_make2(coerced(arg, INT8OID), copyObject(weight)),
									 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	return (Expr *) makeFuncExpr(F_NUMERIC_MUL, NUMERICOID,
								 list_make2(coerced(arg, NUMERICOID),
											coerced((Expr *) copyObject(weight), NUMERICOID)),
								 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
}

/*
 * Plan the delta query of an additive aggregate over joins for a batch that
 * changed source s only (analyze_additive.c): the view's joins and
 * conditions with s replaced by the weighed images of its changed rows --
 *		img_s(k1, ..., kn, w), a key relation (add_image_entry)
 * -- the other sources read as they are, grouped by the group key.  Its
 * rows are the group key's columns, then the sum of the weights (the
 * change of the group's rows), then for each aggregate output column the
 * change of its value (numeric): of a count the weights of the rows whose
 * argument is not NULL; of a sum the weighed sum of its argument, and the
 * change of its count of values that are not NULL.
 */
FinderQuery *
recompute_prepare_delta(DeltaPlan *plan, int source)
{
	FinderQuery *fq = palloc0(sizeof(FinderQuery));
	DeltaSource *src = list_nth(plan->sources, source);
	Query	   *query = copyObject(plan->query);
	ImageMap	map;
	List	   *fromlist = NIL;
	List	   *quals = NIL;
	List	   *tlist = NIL;
	List	   *groups = NIL;
	Var		   *weight;
	int			c = 0;
	ListCell   *lc;

	map.plan = plan;
	map.replaced = bms_make_singleton(source);
	map.wide = true;
	map.left_out = NULL;
	map.image_rtindex = palloc0(sizeof(int) * list_length(plan->sources));

	foreach(lc, plan->sources)
	{
		DeltaSource *other = lfirst(lc);
		int			rtindex = other->rtindex;

		if (foreach_current_index(lc) == source)
			rtindex = map.image_rtindex[source] = add_image_entry(fq, query, src, source, true);
		fromlist = lappend(fromlist, makeNode(RangeTblRef));
		((RangeTblRef *) llast(fromlist))->rtindex = rtindex;
	}

	/* the weights: the images' last column */
	weight = makeVar(map.image_rtindex[source], src->key_natts + 1, INT8OID, -1, InvalidOid, 0);

	/* every condition: the images hold every column the query reads */
	foreach(lc, plan->quals)
	{
		map.unmapped = false;
		quals = lappend(quals, image_map_mutator(lfirst(lc), &map));
		if (map.unmapped)
			elog(ERROR, "a condition reads a column outside the images of %s", src->relname);
	}

	tlist = group_key_targets(plan, &map, &groups);
	fq->ngroup = list_length(tlist);

	tlist = lappend(tlist, makeTargetEntry((Expr *) delta_sum((Expr *) weight, NULL),
										   list_length(tlist) + 1, pstrdup("rows"), false));
	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		AdditiveColumn *col;
		Expr	   *arg;
		Expr	   *not_null;

		if (tle->resjunk)
			continue;
		col = &plan->additive_columns[c++];
		if (col->role == ADDITIVE_GROUP || col->role == ADDITIVE_COUNT_ROWS)
			continue;
		map.unmapped = false;
		arg = (Expr *) image_map_mutator((Node *) col->arg, &map);
		if (map.unmapped)
			elog(ERROR, "an aggregate reads a column outside the images of %s", src->relname);
		not_null = null_test(arg, IS_NOT_NULL);
		if (col->role == ADDITIVE_SUM)
			tlist = lappend(tlist, makeTargetEntry((Expr *) delta_sum(weighed(arg, weight), NULL),
												   list_length(tlist) + 1, psprintf("sum%d", c),
												   false));
		tlist = lappend(tlist, makeTargetEntry((Expr *) delta_sum((Expr *) copyObject(weight),
																  not_null),
											   list_length(tlist) + 1, psprintf("count%d", c),
											   false));
	}

	set_image_query(query, fromlist, quals, tlist, groups, true);
	keyed_plan_init(&fq->kp, query, DELTA_QUERY_NAME);
	return fq;
}

/*
 * Run a delta query with the changed rows of its source, keys (DirtyKey *,
 * each with its weight), in one execution.  Its rows go to dest.
 */
void
recompute_run_delta(FinderQuery *fq, List *keys, DestReceiver *dest)
{
	int			source = ((KeyRelation *) linitial(fq->images))->source;
	List	  **by_source = palloc0(sizeof(List *) * (source + 1));

	by_source[source] = keys;
	recompute_run_finder(fq, by_source, dest);
}

/* ----------------------------------------------------------------
 *		The whole query
 * ----------------------------------------------------------------
 */

/*
 * Run the whole view's query, its output in the target's column types, its
 * rows going to dest.  A query of the full path is as the parser left it:
 * the views it reads are expanded here, as for any stored query
 * (plancache.c).
 *
 * With gathered (dest keeps the rows, and nothing is written until the
 * query is over), its plan may be parallel, as REFRESH MATERIALIZED VIEW's
 * is: no table may be written while parallel workers run.
 */
void
recompute_run_all(DeltaPlan *plan, Oid target, DestReceiver *dest, bool gathered)
{
	Query	   *query = copyObject(plan->query);
	ApplyErrorPlace outer_place = apply_error_place;

	apply_error_whole();
	if (plan->path == DJ_PATH_FULL)
	{
		List	   *rewritten;

		AcquireRewriteLocks(query, true, false);
		rewritten = QueryRewrite(query);
		if (list_length(rewritten) != 1)
			elog(ERROR, "the query of a delta view rewrote to %d queries",
				 list_length(rewritten));
		query = linitial_node(Query, rewritten);
	}
	run_plan(pg_plan_query(restrict_query(query, NIL, plan, target, false), VIEW_QUERY_NAME,
						   gathered ? CURSOR_OPT_PARALLEL_OK : 0, NULL),
			 VIEW_QUERY_NAME, NULL, NULL, dest);
	apply_error_place = outer_place;
}
