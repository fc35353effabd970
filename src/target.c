/*-------------------------------------------------------------------------
 *
 * target.c
 *	  The target table of a view: creating it, checking an existing one,
 *	  and filling it from the query (backfill and refresh).
 *
 * The target is an ordinary table owned by the view's creator.  Its primary
 * key (or a unique index with the same columns) is the result's unique key
 * found by the analyzer: the applier upserts result rows by it.
 *
 * Filling runs the view's own query as one set-based INSERT ... SELECT, with
 * SHARE locks on every source held until the end of the transaction, so no
 * source change can commit between the fill and the registration of the view
 * (writers wait, as they do for CREATE INDEX).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_inherits.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "target.h"

/* ----------------------------------------------------------------
 *		Key columns
 * ----------------------------------------------------------------
 */

/* The select-list entry of output column col (0-based). */
static TargetEntry *
output_entry(DeltaPlan *plan, int col)
{
	ListCell   *lc;
	int			i = 0;

	foreach(lc, plan->query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (tle->resjunk)
			continue;
		if (i++ == col)
			return tle;
	}
	elog(ERROR, "output column %d not found", col);
	return NULL;				/* keep compiler quiet */
}

/* Can output column col be NULL?  Only plain NOT NULL columns cannot. */
static bool
output_nullable(DeltaPlan *plan, int col)
{
	TargetEntry *tle = output_entry(plan, col);
	Var		   *var;
	RangeTblEntry *rte;
	HeapTuple	tuple;
	bool		notnull;

	if (!IsA(tle->expr, Var))
		return true;
	var = (Var *) tle->expr;
	rte = rt_fetch(var->varno, plan->query->rtable);
	tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rte->relid),
							Int16GetDatum(var->varattno));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for attribute %d of relation %u",
			 var->varattno, rte->relid);
	notnull = ((Form_pg_attribute) GETSTRUCT(tuple))->attnotnull;
	ReleaseSysCache(tuple);
	return !notnull;
}

static char *
key_column_list(DeltaPlan *plan)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < plan->key_ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[plan->key_columns[i]]));
	return buf.data;
}

/*
 * The unique index of the target whose columns are exactly the key columns
 * (in any order), or InvalidOid.  Partial, expression and deferrable
 * indexes do not count.
 */
Oid
target_key_index(Relation rel, DeltaPlan *plan)
{
	List	   *indexes = RelationGetIndexList(rel);
	Oid			result = InvalidOid;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		Form_pg_index form = idx->rd_index;
		bool		match = form->indisunique && form->indimmediate &&
			form->indisvalid && form->indnkeyatts == plan->key_ncolumns &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL) &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indexprs, NULL);

		/* same number of columns, and every key column among them */
		for (int k = 0; match && k < plan->key_ncolumns; k++)
		{
			bool		found = false;

			for (int i = 0; i < form->indnkeyatts; i++)
				found |= (form->indkey.values[i] == plan->key_columns[k] + 1);
			match = found;
		}
		if (match && (!OidIsValid(result) || form->indisprimary))
			result = RelationGetRelid(idx);
		index_close(idx, AccessShareLock);
	}
	return result;
}

/* ----------------------------------------------------------------
 *		Creating and checking
 * ----------------------------------------------------------------
 */

static int
spi_run(const char *sql)
{
	int			ret = SPI_execute(sql, false, 0);

	if (ret < 0)
		elog(ERROR, "SPI_execute failed: %s", SPI_result_code_string(ret));
	return ret;
}

/*
 * Create the target from the plan's output columns, with the result's key
 * as primary key (or, when a key column can be NULL, as a unique
 * constraint that treats NULLs as equal, like GROUP BY does).
 */
Oid
target_create(RangeVar *rv, DeltaPlan *plan)
{
	Oid			nspid = RangeVarGetCreationNamespace(rv);
	char	   *qualname = quote_qualified_identifier(get_namespace_name(nspid), rv->relname);
	StringInfoData sql;
	bool		nullable_key = false;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qualname);
	for (int i = 0; i < plan->ncolumns; i++)
	{
		appendStringInfo(&sql, "%s%s %s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[i]),
						 format_type_with_typemod(plan->coltypes[i], plan->coltypmods[i]));
		if (OidIsValid(plan->colcollations[i]) &&
			plan->colcollations[i] != get_typcollation(plan->coltypes[i]))
		{
			HeapTuple	tuple = SearchSysCache1(COLLOID, ObjectIdGetDatum(plan->colcollations[i]));
			Form_pg_collation coll;

			if (!HeapTupleIsValid(tuple))
				elog(ERROR, "cache lookup failed for collation %u", plan->colcollations[i]);
			coll = (Form_pg_collation) GETSTRUCT(tuple);
			appendStringInfo(&sql, " COLLATE %s",
							 quote_qualified_identifier(get_namespace_name(coll->collnamespace),
														NameStr(coll->collname)));
			ReleaseSysCache(tuple);
		}
	}
	for (int k = 0; k < plan->key_ncolumns; k++)
		nullable_key |= output_nullable(plan, plan->key_columns[k]);
	appendStringInfo(&sql, ", %s (%s))",
					 nullable_key ? "UNIQUE NULLS NOT DISTINCT" : "PRIMARY KEY",
					 key_column_list(plan));

	SPI_connect();
	spi_run(sql.data);
	SPI_finish();

	CommandCounterIncrement();
	return get_relname_relid(rv->relname, nspid);
}

/*
 * Check that an existing target can hold the view's result: an ordinary,
 * logged table with the query's output columns (same names, order and
 * types) and a unique key on exactly the result's key columns.
 */
void
target_validate(Oid relid, DeltaPlan *plan)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *name = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												  RelationGetRelationName(rel));
	int			col = 0;

	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target \"%s\" is not an ordinary table", name),
				 errhint("Name a new table, which delta_join.create_view creates, or an existing ordinary table.")));
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target \"%s\" is not a permanent, WAL-logged table", name),
				 errdetail("An unlogged target is emptied by a crash, and a temporary one is visible to one session only."),
				 errhint("Use a permanent table.")));

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (col >= plan->ncolumns)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("target \"%s\" has more columns than the query outputs", name),
					 errdetail("Column \"%s\" has no counterpart in the select list.", NameStr(att->attname)),
					 errhint("The target's columns must be the query's output columns, in order.")));
		if (strcmp(NameStr(att->attname), plan->colnames[col]) != 0 ||
			att->atttypid != plan->coltypes[col] ||
			(att->atttypmod != -1 && att->atttypmod != plan->coltypmods[col]))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of target \"%s\" does not match the query", col + 1, name),
					 errdetail("The target has %s %s; the query outputs %s %s.",
							   quote_identifier(NameStr(att->attname)),
							   format_type_with_typemod(att->atttypid, att->atttypmod),
							   quote_identifier(plan->colnames[col]),
							   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
					 errhint("The target's columns must be the query's output columns, in order.")));
		col++;
	}
	if (col < plan->ncolumns)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target \"%s\" lacks column \"%s\" of the query's output", name,
						plan->colnames[col]),
				 errhint("The target's columns must be the query's output columns, in order.")));

	if (!OidIsValid(target_key_index(rel, plan)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("target \"%s\" has no primary key or unique index on the result's unique key (%s)",
						name, key_column_list(plan)),
				 errdetail("Result rows are upserted by that key."),
				 errhint("Add it: ALTER TABLE %s ADD PRIMARY KEY (%s);", name, key_column_list(plan))));

	table_close(rel, AccessShareLock);
}

/* ----------------------------------------------------------------
 *		Filling
 * ----------------------------------------------------------------
 */

static int
compare_oid(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return (x > y) - (x < y);
}

/*
 * Take SHARE locks on every source (and every partition of a partitioned
 * one) in OID order, so two fills never deadlock on each other.
 */
static void
lock_sources(DeltaPlan *plan)
{
	int			n = list_length(plan->sources);
	Oid		   *relids = palloc(sizeof(Oid) * n);
	ListCell   *lc;

	foreach(lc, plan->sources)
		relids[foreach_current_index(lc)] = ((DeltaSource *) lfirst(lc))->relid;
	qsort(relids, n, sizeof(Oid), compare_oid);
	for (int i = 0; i < n; i++)
	{
		if (i > 0 && relids[i] == relids[i - 1])
			continue;
		LockRelationOid(relids[i], ShareLock);
		if (get_rel_relkind(relids[i]) == RELKIND_PARTITIONED_TABLE)
			(void) find_all_inheritors(relids[i], ShareLock, NULL);
	}
}

/*
 * Fill the target with the query's result, after deleting what it holds
 * when `clear` is set; returns the number of rows written.
 */
uint64
target_fill(Oid relid, DeltaPlan *plan, bool clear)
{
	char	   *name = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												  get_rel_name(relid));
	StringInfoData sql;
	uint64		rows;

	/*
	 * Sources first, then the target: the worker locks sources and targets
	 * in that order too (a target may be another view's source).  Refilling
	 * an existing target excludes the worker's writes to it.
	 */
	lock_sources(plan);
	if (clear)
		LockRelationOid(relid, ExclusiveLock);

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (", name);
	for (int i = 0; i < plan->ncolumns; i++)
		appendStringInfo(&sql, "%s%s", i > 0 ? ", " : "", quote_identifier(plan->colnames[i]));
	appendStringInfo(&sql, ") %s", plan->query_text);

	SPI_connect();
	if (clear)
		spi_run(psprintf("DELETE FROM %s", name));
	spi_run(sql.data);
	rows = SPI_processed;
	SPI_finish();
	return rows;
}
