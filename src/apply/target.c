/*-------------------------------------------------------------------------
 *
 * target.c
 *	  The target table of a view: creating it, checking it, filling it from
 *	  the query (backfill and refresh), and guarding it against writes by
 *	  anyone else.
 *
 * The target is an ordinary, permanent table.  Its primary key (or a
 * unique index on the same columns) is the result's unique key found by the
 * analyzer: the applier upserts result rows by it.  Its columns take the
 * query's output columns, in order and by name, by assignment: what INSERT
 * ... SELECT would store (a DECIMAL(38,2) column takes a numeric sum).
 *
 * Filling runs the view's bound query (its query view) as one set-based
 * INSERT ... SELECT, as the target's owner with the view's pinned settings,
 * after SHARE locks on every source and partition, held until the end of
 * the transaction: no source change can commit between the fill and the
 * registration of the view (writers wait, as they do for CREATE INDEX).
 * A new target gets its key after the fill, as CREATE TABLE AS then ADD
 * PRIMARY KEY would: one sorted index build instead of row-by-row inserts.
 *
 * Lock order of the functions that change views (api.c), the one order
 * every path takes:
 *
 *	1. view_catalog, ShareUpdateExclusiveLock (self-exclusive: one view
 *	   change at a time per database; see api.c);
 *	2. the sources and their partitions, ShareLock, all or none
 *	   (lock_sources: a writer that holds one of them while waiting for
 *	   another can never wait for us);
 *	3. the target.
 *
 * The apply worker locks sources (AccessShareLock) and targets
 * (RowExclusiveLock) with a lock timeout and backs off when it expires, so
 * it never holds up these functions for long.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "registry/catalog.h"
#include "registry/citus_tables.h"
#include "base/runas.h"
#include "apply/target.h"

/* Writes into targets that the guard trigger lets through (target_fill) */
static Oid	target_filling_relid = InvalidOid;

/* the fillfactor of the targets create_view makes */
#define TARGET_FILLFACTOR	85

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

/*
 * Is range-table entry rtindex under the nullable side of an outer join of
 * the join tree under jtnode (as written: a condition that makes the join
 * an inner join is not looked for)?  -1: it is not under jtnode at all.
 */
static int
under_nullable_side(Node *jtnode, int rtindex)
{
	if (IsA(jtnode, RangeTblRef))
		return ((RangeTblRef *) jtnode)->rtindex == rtindex ? 0 : -1;
	if (IsA(jtnode, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) jtnode)->fromlist)
		{
			int			found = under_nullable_side(lfirst(lc), rtindex);

			if (found >= 0)
				return found;
		}
		return -1;
	}
	if (IsA(jtnode, JoinExpr))
	{
		JoinExpr   *j = (JoinExpr *) jtnode;
		int			left = under_nullable_side(j->larg, rtindex);
		int			right = under_nullable_side(j->rarg, rtindex);

		if (left >= 0)
			return (left || j->jointype == JOIN_RIGHT || j->jointype == JOIN_FULL) ? 1 : 0;
		if (right >= 0)
			return (right || j->jointype == JOIN_LEFT || j->jointype == JOIN_FULL) ? 1 : 0;
	}
	return -1;
}

/*
 * Can output column col be NULL?  Only plain NOT NULL columns of sources
 * that are never null-extended cannot.  A delta view's sources know
 * whether an outer join null-extends them (after the joins a WHERE
 * condition makes inner); a query of the full path, an aggregate over an
 * outer join say, is read as written.
 */
static bool
output_nullable(DeltaPlan *plan, int col)
{
	TargetEntry *tle = output_entry(plan, col);
	Var		   *var;
	RangeTblEntry *rte;
	HeapTuple	tuple;
	bool		notnull;
	ListCell   *lc;

	if (!IsA(tle->expr, Var))
		return true;
	var = (Var *) tle->expr;
	rte = rt_fetch(var->varno, plan->query->rtable);
	if (rte->rtekind != RTE_RELATION)
		return true;
	if (plan->path == DJ_PATH_FULL &&
		under_nullable_side((Node *) plan->query->jointree, var->varno) != 0)
		return true;
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (src->rtindex == (int) var->varno && !bms_is_empty(src->nulling))
			return true;
	}
	tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(rte->relid),
							Int16GetDatum(var->varattno));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for attribute %d of relation %u",
			 var->varattno, rte->relid);
	notnull = ((Form_pg_attribute) GETSTRUCT(tuple))->attnotnull;
	ReleaseSysCache(tuple);
	return !notnull;
}

/* In how many sources' keys (as output columns) column col is */
static int
key_share(DeltaPlan *plan, int col)
{
	List	   *plans = plan->branches ? plan->branches : list_make1(plan);
	int			n = 0;
	ListCell   *lc;

	/* (a UNION ALL's tag leads: each branch finds its rows by it) */
	if (col == plan->tag_column)
		return INT_MAX;
	foreach(lc, plans)
	{
		ListCell   *lc2;

		foreach(lc2, ((DeltaPlan *) lfirst(lc))->sources)
		{
			DeltaSource *src = lfirst(lc2);

			for (int k = 0; src->key_output && k < src->key_natts; k++)
				n += (src->key_output[k] == col);
		}
	}
	return n;
}

/*
 * The key's columns, "merchant_id, item_id, order_id": those that more
 * sources' keys share first (then in output order), so that the target's
 * key index, by its leading columns, also finds the rows of the sources
 * whose keys are part of the result's (an item's orders) -- retract mode
 * and outer joins look rows up that way, and need no other index then.
 */
static char *
key_column_list(DeltaPlan *plan)
{
	StringInfoData buf;
	int		   *order = palloc(sizeof(int) * Max(plan->key_ncolumns, 1));
	int		   *share = palloc(sizeof(int) * Max(plan->key_ncolumns, 1));

	for (int i = 0; i < plan->key_ncolumns; i++)
	{
		int			j = i;

		share[i] = key_share(plan, plan->key_columns[i]);
		/* insertion sort, stable: more sharing sources first */
		while (j > 0 && share[order[j - 1]] < share[i])
		{
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	initStringInfo(&buf);
	for (int i = 0; i < plan->key_ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[plan->key_columns[order[i]]]));
	return buf.data;
}

static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
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

/* Run one statement with SPI in the caller's identity. */
static void
spi_run_once(const char *sql)
{
	SPI_connect();
	spi_run(sql);
	SPI_finish();
}

/* " COLLATE pg_catalog.\"C\"", or "" for the type's default collation */
static char *
collate_clause(Oid type, Oid collation)
{
	HeapTuple	tuple;
	Form_pg_collation coll;
	char	   *result;

	if (!OidIsValid(collation) || collation == get_typcollation(type))
		return "";
	tuple = SearchSysCache1(COLLOID, ObjectIdGetDatum(collation));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for collation %u", collation);
	coll = (Form_pg_collation) GETSTRUCT(tuple);
	result = psprintf(" COLLATE %s",
					  quote_qualified_identifier(get_namespace_name(coll->collnamespace),
												 NameStr(coll->collname)));
	ReleaseSysCache(tuple);
	return result;
}

/*
 * Create the target from the plan's output columns, without its key (see
 * target_add_key).  A temporary target is refused: its rows would be seen by
 * one session only, and lost with it.
 */
Oid
target_create(RangeVar *rv, DeltaPlan *plan)
{
	Oid			nspid = RangeVarGetCreationNamespace(rv);
	char	   *qualname;
	StringInfoData sql;

	if (rv->relpersistence == RELPERSISTENCE_TEMP || isAnyTempNamespace(nspid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target \"%s\" cannot be a temporary table", rv->relname),
				 errdetail("A temporary table is visible to one session only, and the apply worker is another."),
				 errhint("Name the target in a permanent schema.")));

	qualname = quote_qualified_identifier(get_namespace_name(nspid), rv->relname);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qualname);
	for (int i = 0; i < plan->ncolumns; i++)
		appendStringInfo(&sql, "%s%s %s%s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[i]),
						 format_type_with_typemod(plan->coltypes[i], plan->coltypmods[i]),
						 collate_clause(plan->coltypes[i], plan->colcollations[i]));
	/* room on each page for an updated row: updates of non-key columns stay HOT */
	appendStringInfoString(&sql, ") WITH (fillfactor = " CppAsString2(TARGET_FILLFACTOR) ")");
	spi_run_once(sql.data);

	CommandCounterIncrement();
	return get_relname_relid(rv->relname, nspid);
}

/*
 * Give a target made by target_create its key: the result's key as primary
 * key, or, when a key column can be NULL, as a unique constraint that treats
 * NULLs as equal (like GROUP BY does).
 */
void
target_add_key(Oid relid, DeltaPlan *plan)
{
	bool		nullable_key = false;

	/* a result without a key (full recompute): a multiset */
	if (plan->key_ncolumns == 0)
		return;
	for (int k = 0; k < plan->key_ncolumns; k++)
		nullable_key |= output_nullable(plan, plan->key_columns[k]);
	spi_run_once(psprintf("ALTER TABLE %s ADD %s (%s)", qualified_name(relid),
						  nullable_key ? "UNIQUE NULLS NOT DISTINCT" : "PRIMARY KEY",
						  key_column_list(plan)));

	/*
	 * Without a primary key, a DELETE of the target logs no old row: a view
	 * that reads this target (a chain) needs its old rows whole.
	 */
	if (nullable_key)
		spi_run_once(psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", qualified_name(relid)));
}

/*
 * The indexes by which apply finds a target's rows other than by its key
 * (target_lookup_begin): in retract mode, by the key of each source that
 * drives changes; with outer joins, by the key of each anchor.  Those the
 * target lacks are created.
 */
static bool target_has_index_on(Oid relid, int ncols, const int *cols);

/* Create an index on these output columns unless one (or one in done) is there */
static List *
add_index_on(Oid relid, DeltaPlan *plan, int ncols, const int *cols, List *done)
{
	StringInfoData names;

	if (target_has_index_on(relid, ncols, cols))
		return done;
	initStringInfo(&names);
	for (int k = 0; k < ncols; k++)
		appendStringInfo(&names, "%s%s", k > 0 ? ", " : "",
						 quote_identifier(plan->colnames[cols[k]]));
	if (list_member(done, makeString(names.data)))
		return done;
	spi_run_once(psprintf("CREATE INDEX ON %s (%s)", qualified_name(relid), names.data));
	CommandCounterIncrement();
	return lappend(done, makeString(names.data));
}

void
target_add_region_indexes(Oid relid, DeltaPlan *plan)
{
	List	   *plans = plan->branches ? plan->branches : list_make1(plan);
	List	   *done = NIL;
	ListCell   *lc;

	foreach(lc, plans)
	{
		DeltaPlan  *p = lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, p->sources)
		{
			DeltaSource *src = lfirst(lc2);
			int			s = foreach_current_index(lc2);
			int			cols[INDEX_MAX_KEYS];
			int			ncols;

			if (((p->options.retract && !src->lookup_only) ||
				 list_member_int(p->anchors, s)) && src->key_in_output)
			{
				ncols = target_region_columns(p, src, cols);
				done = add_index_on(relid, plan, ncols, cols, done);
			}
			if (!src->lookup_only && (ncols = target_partner_columns(p, src, cols)) > 0)
				done = add_index_on(relid, plan, ncols, cols, done);
		}
	}
}

/*
 * The output columns by which apply finds the rows of a source's key (its
 * slice): its key columns, after the tag of a UNION ALL branch.  Returns
 * how many.
 */
int
target_region_columns(DeltaPlan *plan, DeltaSource *src, int *cols)
{
	int			n = 0;

	if (plan->tag_column >= 0)
		cols[n++] = plan->tag_column;
	for (int k = 0; k < src->key_natts; k++)
		cols[n++] = src->key_output[k];
	return n;
}

/*
 * The output columns by which apply finds the rows a row of a source that
 * outer joins can null-extend was joined in (DeltaSource.partner_output):
 * those of its key columns that the output holds, after the tag of a UNION
 * ALL branch.  With only some, the rows found are a superset of those.  0
 * if the output holds none (apply then looks at every row).
 */
int
target_partner_columns(DeltaPlan *plan, DeltaSource *src, int *cols)
{
	int			n = 0;

	if (bms_is_empty(src->nulling) || plan->options.retract)
		return 0;
	if (plan->tag_column >= 0)
		cols[n++] = plan->tag_column;
	for (int k = 0; k < src->key_natts; k++)
	{
		if (src->partner_output[k] >= 0)
			cols[n++] = src->partner_output[k];
	}
	return (n > (plan->tag_column >= 0 ? 1 : 0)) ? n : 0;
}

/* Does some index of the target have these output columns leading? */
static bool
target_has_index_on(Oid relid, int ncols, const int *cols)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	AttrNumber	attnums[INDEX_MAX_KEYS];
	bool		covered = false;
	int			col = 0;
	ListCell   *lc;

	/* output column i -> target attribute */
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		for (int k = 0; k < ncols; k++)
			if (cols[k] == col)
				attnums[k] = i + 1;
		col++;
	}

	foreach(lc, RelationGetIndexList(rel))
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		bool		match = idx->rd_index->indnkeyatts >= ncols &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL);

		for (int i = 0; match && i < ncols; i++)
		{
			bool		found = false;

			for (int k = 0; k < ncols; k++)
				found |= (idx->rd_index->indkey.values[i] == attnums[k]);
			match = found;
		}
		covered |= match;
		index_close(idx, AccessShareLock);
	}
	table_close(rel, AccessShareLock);
	return covered;
}

#define GUARD_TRIGGER "delta_join_guard"

static Oid
guard_function(void)
{
	return LookupFuncName(list_make2(makeString(DJ_SCHEMA), makeString("_guard_target")),
						  0, NULL, false);
}

/* Does the guard trigger fire on every write, in every replication role? */
static bool
target_is_guarded(Relation rel)
{
	TriggerDesc *triggers = rel->trigdesc;
	Oid			guard = guard_function();

	for (int i = 0; triggers && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if (strcmp(trigger->tgname, GUARD_TRIGGER) == 0)
			return trigger->tgenabled == TRIGGER_FIRES_ALWAYS &&
				trigger->tgfoid == guard &&
				trigger->tgtype == (TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_INSERT |
									TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE |
									TRIGGER_TYPE_TRUNCATE);
	}
	return false;
}

/*
 * Nothing but delta_join may change a target's rows, so nothing may write
 * them without its guard trigger seeing it: no rule rewriting statements
 * on it, no parent or partitioned table whose statements reach its rows, no
 * child whose rows its statements show.  Once guarded, the guard must stay
 * enabled in every replication role.
 */
static void
check_target_is_closed(Relation rel, const char *name, bool guarded)
{
	char	   *problem = NULL;

	if (rel->rd_rules != NULL)
		problem = "has rules";
	else if (rel->rd_rel->relispartition)
		problem = "is a partition";
	else if (has_superclass(RelationGetRelid(rel)))
		problem = "inherits from another table";
	else if (rel->rd_rel->relhassubclass &&
			 find_inheritance_children(RelationGetRelid(rel), NoLock) != NIL)
		problem = "has inheritance children";
	for (int i = 0; !problem && rel->trigdesc && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		/* a BEFORE ROW trigger could change or skip the rows delta_join writes */
		if (TRIGGER_FOR_ROW(trigger->tgtype) && TRIGGER_FOR_BEFORE(trigger->tgtype) &&
			trigger->tgenabled != TRIGGER_DISABLED)
			problem = psprintf("has BEFORE ROW trigger \"%s\"", trigger->tgname);
	}
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target \"%s\" %s", name, problem),
				 errdetail("Statements on other tables, rules or row triggers could change its rows without delta_join knowing."),
				 errhint("Use a plain table that nothing else writes (AFTER triggers are fine).")));

	if (guarded && !target_is_guarded(rel))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target \"%s\" lacks its enabled guard trigger %s", name, GUARD_TRIGGER),
				 errdetail("The trigger keeps anyone but delta_join from writing the target."),
				 errhint("Leave the trigger enabled (ENABLE ALWAYS); delta_join.refresh() puts it back.")));
}

/*
 * A target that Citus distributes would get rows on this node only (its
 * shards, on the node that holds them, can be targets).
 */
static void
check_target_not_citus(Oid relid, const char *name)
{
	const char *kind = citus_table_kind(relid);

	if (kind != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("target \"%s\" is %s of Citus", name, kind),
				 errdetail("Its rows are in shards on the worker nodes, which only a distributed view, made on the coordinator over co-located distributed tables, writes."),
				 errhint("Name a new or ordinary local table, or on each node the shard of the target that is co-located with the sources' shards.")));
}

/*
 * Check that an existing target can hold the view's result: an ordinary,
 * permanent table whose columns are the query's output columns, same names
 * and order, each taking the query's value by assignment; a unique key on
 * exactly the result's key columns, each of the query's type and collation
 * (a key that compared otherwise would merge or split rows of the result).
 */
void
target_validate(Oid relid, DeltaPlan *plan, bool guarded)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *name = qualified_name(relid);
	int			col = 0;

	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target \"%s\" is not an ordinary table", name),
				 errhint("Name a new table, which delta_join.create_view creates, or an existing ordinary table.")));
	check_target_is_closed(rel, name, guarded);
	check_target_not_citus(relid, name);
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
			!can_coerce_type(1, &plan->coltypes[col], &att->atttypid, COERCION_ASSIGNMENT))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column %d of target \"%s\" does not match the query", col + 1, name),
					 errdetail("The target has %s %s; the query outputs %s %s.",
							   quote_identifier(NameStr(att->attname)),
							   format_type_with_typemod(att->atttypid, att->atttypmod),
							   quote_identifier(plan->colnames[col]),
							   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
					 errhint("The target's columns must be the query's output columns, in order, of types that take their values by assignment.")));
		for (int k = 0; k < plan->key_ncolumns; k++)
		{
			if (plan->key_columns[k] != col)
				continue;

			/* a key value coerced on its way in would no longer be found */
			if (att->atttypid != plan->coltypes[col] ||
				(att->atttypmod != -1 && att->atttypmod != plan->coltypmods[col]))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("key column \"%s\" of target \"%s\" does not have the query's type",
								NameStr(att->attname), name),
						 errdetail("The target has %s; the query outputs %s.",
								   format_type_with_typemod(att->atttypid, att->atttypmod),
								   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
						 errhint("Declare the key columns with the query's types, or let delta_join.create_view create the target.")));
			if (att->attcollation != plan->colcollations[col])
				ereport(ERROR,
						(errcode(ERRCODE_COLLATION_MISMATCH),
						 errmsg("key column \"%s\" of target \"%s\" has another collation than the query's",
								NameStr(att->attname), name),
						 errdetail("The target's key compares rows as the query's result does only with the same collation (the query's is %s).",
								   OidIsValid(plan->colcollations[col]) ?
								   get_collation_name(plan->colcollations[col]) : "none"),
						 errhint("Declare the column with the query's collation, or let delta_join.create_view create the target.")));
		}
		col++;
	}
	if (col < plan->ncolumns)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("target \"%s\" lacks column \"%s\" of the query's output", name,
						plan->colnames[col]),
				 errhint("The target's columns must be the query's output columns, in order.")));

	if (plan->key_ncolumns > 0 && !OidIsValid(target_key_index(rel, plan)))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
				 errmsg("target \"%s\" has no primary key or unique index on the result's unique key (%s)",
						name, key_column_list(plan)),
				 errdetail("Result rows are upserted by that key."),
				 errhint("Add it: ALTER TABLE %s ADD PRIMARY KEY (%s);", name, key_column_list(plan))));

	table_close(rel, AccessShareLock);
}

/* ----------------------------------------------------------------
 *		The guard
 * ----------------------------------------------------------------
 */

/*
 * Put the guard trigger on a target: a statement trigger, fired before any
 * INSERT, UPDATE, DELETE, TRUNCATE or COPY and in every replication role,
 * that refuses writes by others (dj_guard_target).  The apply worker writes
 * rows through the executor's replication functions, which fire no
 * statement trigger, so it costs the worker nothing.
 */
void
target_guard(Oid relid)
{
	Relation	rel = table_open(relid, ShareRowExclusiveLock);
	CreateTrigStmt *stmt;
	RunAs		runas;

	if (target_is_guarded(rel))
	{
		table_close(rel, NoLock);
		return;
	}

	/*
	 * Created directly rather than by a statement: the DDL guard would check
	 * the view with the trigger not yet there.  As the bootstrap superuser,
	 * since the DDL guard also puts back the guard of a view whose target
	 * the caller may not own.
	 */
	stmt = makeNode(CreateTrigStmt);
	stmt->replace = true;
	stmt->trigname = GUARD_TRIGGER;
	stmt->relation = makeRangeVar(get_namespace_name(RelationGetNamespace(rel)),
								  pstrdup(RelationGetRelationName(rel)), -1);
	stmt->funcname = list_make2(makeString(DJ_SCHEMA), makeString("_guard_target"));
	stmt->row = false;
	stmt->timing = TRIGGER_TYPE_BEFORE;
	stmt->events = TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE |
		TRIGGER_TYPE_TRUNCATE;
	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);
	(void) CreateTriggerFiringOn(stmt, "delta_join guard", relid, InvalidOid, InvalidOid,
								 InvalidOid, guard_function(), InvalidOid, NULL,
								 false, false, TRIGGER_FIRES_ALWAYS);
	runas_end(&runas);
	CommandCounterIncrement();
	table_close(rel, NoLock);
}

/* Remove the guard of a table that is no longer a target. */
void
target_unguard(Oid relid)
{
	spi_run_once(psprintf("DROP TRIGGER IF EXISTS " GUARD_TRIGGER " ON %s",
						  qualified_name(relid)));
}

/* Is this backend filling this target (the guard lets that through)? */
bool
target_filling(Oid relid)
{
	return OidIsValid(relid) && relid == target_filling_relid;
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

/* Does this transaction hold a lock on the relation that keeps writers out? */
static bool
locked_by_me(Oid relid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	for (LOCKMODE mode = ShareLock; mode <= AccessExclusiveLock; mode++)
	{
		if (LockHeldByMe_compat(&tag, mode))
			return true;
	}
	return false;
}

/*
 * Take a SHARE lock on every source and every partition of a partitioned
 * one, all or none: try each without waiting; when one is taken, give back
 * those we hold, wait until the one that was busy is free, and start over.
 * A writer that holds a lock on one source and wants another is thus never
 * waiting for us while we wait for it.
 */
void
target_lock_sources(DeltaPlan *plan)
{
	int			n = list_length(plan->sources);
	Oid		   *roots = palloc(sizeof(Oid) * n);
	ListCell   *lc;

	foreach(lc, plan->sources)
		roots[foreach_current_index(lc)] = ((DeltaSource *) lfirst(lc))->relid;
	qsort(roots, n, sizeof(Oid), compare_oid);

	for (;;)
	{
		List	   *held = NIL;
		Oid			busy = InvalidOid;

		for (int i = 0; i < n && !OidIsValid(busy); i++)
		{
			List	   *rels;

			if (i > 0 && roots[i] == roots[i - 1])
				continue;
			if (!ConditionalLockRelationOid(roots[i], ShareLock))
			{
				busy = roots[i];
				break;
			}
			held = lappend_oid(held, roots[i]);

			/* partitions cannot be attached or detached while we hold it */
			if (get_rel_relkind(roots[i]) != RELKIND_PARTITIONED_TABLE)
				continue;
			rels = find_all_inheritors(roots[i], NoLock, NULL);
			foreach(lc, rels)
			{
				Oid			part = lfirst_oid(lc);

				if (part == roots[i])
					continue;
				if (!ConditionalLockRelationOid(part, ShareLock))
				{
					busy = part;
					break;
				}
				held = lappend_oid(held, part);
			}
		}
		if (!OidIsValid(busy))
			return;

		foreach(lc, held)
			UnlockRelationOid(lfirst_oid(lc), ShareLock);

		/*
		 * When this transaction already keeps writers out of the busy one
		 * (the DDL whose guard refreshes the view: ATTACH PARTITION,
		 * INHERIT ...), the writers waiting behind it are what makes it
		 * busy: our blocking request is granted ahead of them, and the next
		 * try without waiting would fail again, forever.  Keep that one
		 * (it holds back no writer that our lock did not already).
		 */
		if (locked_by_me(busy))
			LockRelationOid(busy, ShareLock);
		else
		{
			LockRelationOid(busy, ShareLock);
			UnlockRelationOid(busy, ShareLock);
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * Fill the target with the view's result, from its query view, after
 * deleting what it holds when `clear` is set; returns the number of rows
 * written.  The sources must be locked (target_lock_sources).  Runs as the
 * target's owner with the view's pinned settings.
 */
uint64
target_fill(Oid relid, Oid query_view, Jsonb *settings, bool clear)
{
	char	   *name = qualified_name(relid);
	uint64		rows;
	RunAs		runas;
	Oid			outer_filling;

	/* refilling an existing target excludes the worker's writes to it */
	if (clear)
		LockRelationOid(relid, ExclusiveLock);

	runas_begin(runas_target_owner(relid), settings, &runas);
	outer_filling = target_filling_relid;
	target_filling_relid = relid;
	PG_TRY();
	{
		SPI_connect();
		if (clear)
			spi_run(psprintf("DELETE FROM %s", name));
		spi_run(psprintf("INSERT INTO %s SELECT * FROM %s", name, qualified_name(query_view)));
		rows = SPI_processed;
		SPI_finish();
	}
	PG_FINALLY();
	{
		target_filling_relid = outer_filling;
	}
	PG_END_TRY();
	runas_end(&runas);
	return rows;
}

