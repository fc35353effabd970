/*-------------------------------------------------------------------------
 *
 * recompute.c
 *	  Keyed recompute: the rows of a view's result in which one source's key
 *	  is one of a set of keys, computed by Postgres's own planner and
 *	  executor from the current source rows.
 *
 * A region query is the view's query with, added to its FROM list,
 *
 *		unnest($1::k1[], $2::k2[], ...) AS keys(k1, k2, ...)
 *
 * and to its WHERE clause "s.k1 = keys.k1 AND s.k2 = keys.k2 ...", plus
 * "a.pk IS NULL" for sources the region requires to be null-extended (the
 * anchors before s, see apply_outer.c).  A condition on a source under an
 * outer join makes the planner reduce that join as far as it can, so the
 * query reaches s through its key index and the other sources through the
 * indexes rule 2 guarantees.  It is planned once, as a generic plan, and
 * run for up to RECOMPUTE_CHUNK keys at a time; its rows, in the target's
 * column types, go to a DestReceiver of the caller's.
 *
 * The region query runs as the current user (the target's owner, see
 * runas.c), whose rights on the sources the executor checks; its query was
 * bound at creation, so no name is resolved here.
 *
 * Memory: a RegionQuery lives in the caller's memory context; each run
 * uses the executor's own per-query context.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_oper.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "apply/apply.h"
#include "apply/recompute.h"

#define RECOMPUTE_QUERY_NAME	"delta_join: recompute a region"

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
null_test(Expr *arg)
{
	NullTest   *test = makeNode(NullTest);

	test->arg = arg;
	test->nulltesttype = IS_NULL;
	test->location = -1;
	return (Expr *) test;
}

/*
 * Add "unnest($1, $2, ...) AS keys" to the query's FROM list, one column
 * per key column of src, and "src.key = keys.key" to its WHERE clause.
 */
static List *
add_key_filter(RegionQuery *rq, Query *query, DeltaSource *src)
{
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	RangeTblRef *rtr = makeNode(RangeTblRef);
	List	   *colnames = NIL;
	List	   *conds = NIL;
	int			rtindex;

	rte->rtekind = RTE_FUNCTION;
	rte->inFromCl = true;
	for (int k = 0; k < src->key_natts; k++)
	{
		RangeTblFunction *rtf = makeNode(RangeTblFunction);
		Param	   *param = makeNode(Param);
		Var		   *var = column_var(query, src->rtindex, src->key_attnums[k]);
		char	   *name = psprintf("k%d", k + 1);

		rq->elemtypes[k] = var->vartype;
		rq->arraytypes[k] = get_array_type(var->vartype);
		if (!OidIsValid(rq->arraytypes[k]))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the key of source \"%s\" has a column of type %s, which has no array type",
							src->relname, format_type_be(var->vartype))));
		get_typlenbyvalalign(var->vartype, &rq->typlen[k], &rq->typbyval[k], &rq->typalign[k]);

		param->paramkind = PARAM_EXTERN;
		param->paramid = k + 1;
		param->paramtype = rq->arraytypes[k];
		param->paramtypmod = -1;
		param->paramcollid = var->varcollid;
		param->location = -1;

		rtf->funcexpr = (Node *) makeFuncExpr(F_UNNEST_ANYARRAY, var->vartype,
											  list_make1(param), var->varcollid,
											  var->varcollid, COERCE_EXPLICIT_CALL);
		((FuncExpr *) rtf->funcexpr)->funcretset = true;
		rtf->funccolcount = 1;
		rte->functions = lappend(rte->functions, rtf);
		colnames = lappend(colnames, makeString(name));
	}
	rte->eref = makeAlias("keys", colnames);
	rte->alias = rte->eref;
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
											make_andclause(list_make2(null_test((Expr *) var),
																	  null_test((Expr *) key)))));
		conds = lappend(conds, cond);
	}
	return conds;
}


/* The type's default equality operator, or an error */
Oid
ordinary_equality_operator(Oid type)
{
	Oid			eq;

	get_sort_group_operators(type, false, true, false, NULL, &eq, NULL, NULL);
	return eq;
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

	rq->source = source;
	rq->nkeys = src->key_natts;
	rq->arraytypes = palloc(sizeof(Oid) * Max(rq->nkeys, 1));
	rq->elemtypes = palloc(sizeof(Oid) * Max(rq->nkeys, 1));
	rq->typlen = palloc(sizeof(int16) * Max(rq->nkeys, 1));
	rq->typbyval = palloc(sizeof(bool) * Max(rq->nkeys, 1));
	rq->typalign = palloc(sizeof(char) * Max(rq->nkeys, 1));

	conds = add_key_filter(rq, query, src);
	rq->match_nulls = src->key_has_nulls;
	while ((s = bms_next_member(null_sources, s)) >= 0)
	{
		DeltaSource *other = list_nth(plan->sources, s);

		/*
		 * A primary key column is NULL only when its source is null-extended
		 * (sources whose key may hold NULLs are never null-extended).
		 */
		conds = lappend(conds, null_test((Expr *) column_var(query, other->rtindex,
															 other->pk_attnums[0])));
	}
	if (query->jointree->quals)
		conds = lappend(conds, query->jointree->quals);
	query->jointree->quals = (Node *) make_ands_explicit(conds);

	apply_coerce_query_output(query, plan, target);
	compat_set_nullingrels(query);
	rq->pstmt = pg_plan_query(query, RECOMPUTE_QUERY_NAME, CURSOR_OPT_GENERIC_PLAN, NULL);
	return rq;
}

/*
 * The whole view's query, its output in the target's column types.  A
 * query of the full path is as the parser left it: the views it reads are
 * expanded here, as for any stored query (plancache.c).
 */
static PlannedStmt *
prepare_all(DeltaPlan *plan, Oid target)
{
	Query	   *query = copyObject(plan->query);

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

	apply_coerce_query_output(query, plan, target);
	compat_set_nullingrels(query);
	return pg_plan_query(query, RECOMPUTE_QUERY_NAME, 0, NULL);
}

/* Run the whole view's query (prepare_all), its rows going to dest. */
void
recompute_run_all(DeltaPlan *plan, Oid target, DestReceiver *dest)
{
	QueryDesc  *qd = CreateQueryDesc(prepare_all(plan, target), "delta_join: recompute a view",
									 GetActiveSnapshot(), InvalidSnapshot, dest, NULL, NULL, 0);

	ExecutorStart(qd, 0);
	ExecutorRun_compat(qd, ForwardScanDirection, 0, true);
	ExecutorFinish(qd);
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
}

/*
 * Run a region query for keys (DirtyKey *, values of the source's key
 * columns in key order; keys with a NULL value name no row and are
 * skipped), its rows going to dest.
 */
void
recompute_run(RegionQuery *rq, List *keys, DestReceiver *dest)
{
	int			n = list_length(keys);
	Datum	  **elems = palloc(sizeof(Datum *) * Max(rq->nkeys, 1));
	bool	  **nulls = palloc(sizeof(bool *) * Max(rq->nkeys, 1));
	ListCell   *lc;
	int			i = 0;

	for (int k = 0; k < rq->nkeys; k++)
	{
		elems[k] = palloc(sizeof(Datum) * Max(n, 1));
		nulls[k] = palloc(sizeof(bool) * Max(n, 1));
	}
	foreach(lc, keys)
	{
		DirtyKey   *key = lfirst(lc);
		bool		has_null = false;

		for (int k = 0; k < rq->nkeys; k++)
			has_null |= key->isnull[k];
		if (has_null && !rq->match_nulls)
			continue;			/* a primary key is never NULL: no row has it */
		for (int k = 0; k < rq->nkeys; k++)
		{
			elems[k][i] = key->values[k];
			nulls[k][i] = key->isnull[k];
		}
		i++;
	}

	for (int start = 0; start < i; start += RECOMPUTE_CHUNK)
	{
		int			count = Min(RECOMPUTE_CHUNK, i - start);
		ParamListInfo params = makeParamList(rq->nkeys);
		QueryDesc  *qd;

		for (int k = 0; k < rq->nkeys; k++)
		{
			int			lbound = 1;

			params->params[k].value =
				PointerGetDatum(construct_md_array(elems[k] + start, nulls[k] + start, 1,
												   &count, &lbound, rq->elemtypes[k],
												   rq->typlen[k], rq->typbyval[k],
												   rq->typalign[k]));
			params->params[k].isnull = false;
			params->params[k].pflags = PARAM_FLAG_CONST;
			params->params[k].ptype = rq->arraytypes[k];
		}
		params->numParams = rq->nkeys;

		qd = CreateQueryDesc(rq->pstmt, RECOMPUTE_QUERY_NAME, GetActiveSnapshot(),
							 InvalidSnapshot, dest, params, NULL, 0);
		ExecutorStart(qd, 0);
		ExecutorRun_compat(qd, ForwardScanDirection, 0, true);
		ExecutorFinish(qd);
		ExecutorEnd(qd);
		FreeQueryDesc(qd);
	}
}
