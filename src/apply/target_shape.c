/*-------------------------------------------------------------------------
 *
 * target_shape.c
 *	  A view's target against its delta plan: whether it can hold the
 *	  view's result, which of its indexes is the result's key, the output
 *	  columns and indexes by which the appliers find its rows, and the
 *	  view's output in its column types.
 *
 * The target is an ordinary, permanent table.  Its primary key (or a
 * unique index on the same columns) is the result's unique key found by the
 * analyzer: the writer (writer.c) upserts result rows by it.  Its columns
 * take the query's output columns, in order and by name, by assignment:
 * what INSERT ... SELECT would store (a DECIMAL(38,2) column takes a
 * numeric sum).  Key columns must have the query's type and collation, or
 * a key value coerced on its way in would no longer be found.
 *
 * Pure reads of the catalogs: the plan cache checks a target with every
 * plan it builds, the view operations (ops/target.c) before they fill one,
 * the DDL guard after a command changed one.  Making and filling a target
 * is ops/target.c's.
 *
 * IDENTIFICATION
 *	  src/apply/target_shape.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_subscription.h"
#include "catalog/pg_subscription_rel.h"
#include "catalog/pg_trigger.h"
#include "commands/defrem.h"
#include "commands/trigger.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_coerce.h"
#include "parser/parse_func.h"
#include "parser/parsetree.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/catcache.h"
#include "utils/syscache.h"

#include "analysis/analyze.h"
#include "analysis/query.h"
#include "apply/target_shape.h"
#include "base/compat.h"
#include "base/delta_join.h"
#include "registry/citus_tables.h"

/* ----------------------------------------------------------------
 *		Key columns
 * ----------------------------------------------------------------
 */

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
char *
target_key_column_list(DeltaPlan *plan)
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

/* A relation's name, schema-qualified and quoted, for messages and SQL */
char *
target_qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/*
 * Does column i of an index of the target compare values as its column
 * does: under the column's collation, by its type's default btree operator
 * family?  An index of another collation (a nondeterministic one, say)
 * finds rows that the column's equality tells apart: a lookup by it would
 * take other keys' rows (a retract view replaced a slice with rows of
 * other slices), and a unique index by it would merge rows of the result.
 */
bool
target_index_column_fits(Relation rel, Relation index, int i)
{
	AttrNumber	attnum = index->rd_index->indkey.values[i];
	Form_pg_attribute att;
	Oid			opclass;

	if (attnum <= 0)
		return false;
	att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (index->rd_indcollation[i] != att->attcollation)
		return false;
	opclass = GetDefaultOpClass(att->atttypid, BTREE_AM_OID);
	return OidIsValid(opclass) && get_opclass_family(opclass) == index->rd_opfamily[i];
}

/*
 * The target's attribute numbers of ncols output columns (cols), into
 * attnums: output columns are counted without the dropped ones.
 */
static void
output_attnums(Relation rel, int ncols, const int *cols, AttrNumber *attnums)
{
	TupleDesc	desc = RelationGetDescr(rel);
	int			col = 0;

	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		for (int k = 0; k < ncols; k++)
			if (cols[k] == col)
				attnums[k] = i + 1;
		col++;
	}
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
	AttrNumber	attnums[INDEX_MAX_KEYS];
	Oid			result = InvalidOid;
	ListCell   *lc;

	/* no index has more columns */
	if (plan->key_ncolumns > INDEX_MAX_KEYS)
		return InvalidOid;
	output_attnums(rel, plan->key_ncolumns, plan->key_columns, attnums);

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
				found |= (form->indkey.values[i] == attnums[k]);
			match = found;
		}
		for (int i = 0; match && i < form->indnkeyatts; i++)
			match = target_index_column_fits(rel, idx, i);
		if (match && (!OidIsValid(result) || form->indisprimary))
			result = RelationGetRelid(idx);
		index_close(idx, AccessShareLock);
	}
	return result;
}

/* ----------------------------------------------------------------
 *		The rows the appliers find
 * ----------------------------------------------------------------
 */

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

/*
 * Does some index of the target have these output columns leading, one
 * that writer_lookup_begin can find rows by?  Not an invalid one (a CREATE
 * INDEX CONCURRENTLY that failed leaves it): apply does not scan it, so it
 * does not take the place of the index made for apply.
 */
bool
target_has_index_on(Oid relid, int ncols, const int *cols)
{
	Relation	rel = table_open(relid, AccessShareLock);
	AttrNumber	attnums[INDEX_MAX_KEYS];
	bool		covered = false;
	ListCell   *lc;

	output_attnums(rel, ncols, cols, attnums);

	foreach(lc, RelationGetIndexList(rel))
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);
		bool		match = idx->rd_index->indisvalid &&
			idx->rd_index->indnkeyatts >= ncols &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL);

		for (int i = 0; match && i < ncols; i++)
		{
			bool		found = false;

			for (int k = 0; k < ncols; k++)
				found |= (idx->rd_index->indkey.values[i] == attnums[k]);
			match = found && target_index_column_fits(rel, idx, i);
		}
		covered |= match;
		index_close(idx, AccessShareLock);
	}
	table_close(rel, AccessShareLock);
	return covered;
}

/* ----------------------------------------------------------------
 *		Checking
 * ----------------------------------------------------------------
 */

/* The guard trigger's function, delta_join._guard_target() */
Oid
target_guard_function(void)
{
	return LookupFuncName(list_make2(makeString(DJ_SCHEMA), makeString("_guard_target")),
						  0, NULL, false);
}

/*
 * Does the guard trigger fire on every write, in every replication role?
 *
 * The guard function is looked up before rel->trigdesc is read: a catalog
 * lookup may process invalidations, and the relcache rebuilds an open
 * relation's trigger descriptor in new memory (a CREATE PUBLICATION naming
 * the target is enough), freeing the one read before.
 */
bool
target_is_guarded(Relation rel)
{
	Oid			guard = target_guard_function();
	TriggerDesc *triggers = rel->trigdesc;

	for (int i = 0; triggers && i < triggers->numtriggers; i++)
	{
		Trigger    *trigger = &triggers->triggers[i];

		if (strcmp(trigger->tgname, TARGET_GUARD_TRIGGER) == 0)
			return trigger->tgenabled == TRIGGER_FIRES_ALWAYS &&
				trigger->tgfoid == guard &&
				trigger->tgtype == (TRIGGER_TYPE_BEFORE | TRIGGER_TYPE_INSERT |
									TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE |
									TRIGGER_TYPE_TRUNCATE);
	}
	return false;
}

/*
 * The subscription, if any, whose apply worker writes relid (the tables of
 * pg_subscription_rel, those it applies changes to), or NULL.
 *
 * A Citus shard move's or split's own subscription ("citus_shard_move_..."
 * or "citus_shard_split_...") is not one: it lists the shard being split on
 * every node a half goes to, the node that holds it too, but Citus's
 * decoder sends its rows to the halves only, and a moved shard gets its
 * view once the move has committed.
 */
static char *
target_subscription(Oid relid)
{
	CatCList   *list = SearchSysCacheList1(SUBSCRIPTIONRELMAP, ObjectIdGetDatum(relid));
	char	   *result = NULL;

	for (int i = 0; result == NULL && i < list->n_members; i++)
	{
		char	   *name = get_subscription_name(((Form_pg_subscription_rel)
												  GETSTRUCT(&list->members[i]->tuple))->srsubid,
												 true);

		if (name == NULL ||
			((strncmp(name, "citus_shard_move_subscription_", 30) == 0 ||
			  strncmp(name, "citus_shard_split_subscription_", 31) == 0) &&
			 OidIsValid(citus_shard_of(relid))))
			continue;
		result = name;
	}
	ReleaseSysCacheList(list);
	return result;
}

/* Does a foreign key's referential action write the referencing rows? */
static bool
fk_action_writes(char action)
{
	return action != FKCONSTR_ACTION_NOACTION && action != FKCONSTR_ACTION_RESTRICT;
}

/*
 * The name of a foreign key of rel whose ON DELETE or ON UPDATE action
 * (CASCADE, SET NULL, SET DEFAULT) writes rel's rows when the referenced
 * table changes, or NULL
 */
static char *
writing_foreign_key(Relation rel)
{
	ListCell   *lc;

	foreach(lc, RelationGetFKeyList(rel))
	{
		ForeignKeyCacheInfo *fk = lfirst(lc);
		HeapTuple	tuple = SearchSysCache1(CONSTROID, ObjectIdGetDatum(fk->conoid));
		Form_pg_constraint con;
		char	   *name = NULL;

		if (!HeapTupleIsValid(tuple))
			continue;
		con = (Form_pg_constraint) GETSTRUCT(tuple);
		if (fk_action_writes(con->confdeltype) || fk_action_writes(con->confupdtype))
			name = pstrdup(NameStr(con->conname));
		ReleaseSysCache(tuple);
		if (name != NULL)
			return name;
	}
	return NULL;
}

/*
 * Nothing but delta_join may change a target's rows, so nothing may write
 * them without its guard trigger seeing it: no rule rewriting statements
 * on it, no parent or partitioned table whose statements reach its rows, no
 * child whose rows its statements show, no foreign key whose actions write
 * it.  Once guarded, the guard must stay enabled in every replication role.
 */
static void
check_target_is_closed(Relation rel, const char *name, bool guarded)
{
	char	   *problem = NULL;
	char	   *subscription;
	char	   *foreign_key;

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
	if (!problem && (foreign_key = writing_foreign_key(rel)) != NULL)
		problem = psprintf("has foreign key \"%s\" whose ON DELETE or ON UPDATE action writes it",
						   foreign_key);
	if (problem)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target %s %s", dj_message_name(name), problem),
				 errdetail("Statements on other tables, rules or row triggers could change its rows without delta_join knowing."),
				 errhint("Use a plain table that nothing else writes (AFTER triggers, and foreign keys whose actions are NO ACTION or RESTRICT, are fine).")));

	if ((subscription = target_subscription(RelationGetRelid(rel))) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target %s is a table of subscription \"%s\"", dj_message_name(name), subscription),
				 errdetail("A subscription's apply worker fires row triggers only, so it would write the target past its guard trigger."),
				 errhint("Take the table out of the subscription (out of the publication, then ALTER SUBSCRIPTION ... REFRESH PUBLICATION), or drop the subscription.")));

	if (guarded && !target_is_guarded(rel))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("target %s lacks its enabled guard trigger %s", dj_message_name(name), TARGET_GUARD_TRIGGER),
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
				 errmsg("target %s is %s of Citus", dj_message_name(name), kind),
				 errdetail("Its rows are in shards on the worker nodes, which only a distributed view, made on the coordinator over co-located distributed tables, writes."),
				 errhint("Name a new or ordinary local table, or on each node the shard of the target that is co-located with the sources' shards.")));
}

/* Is output column col one of the result's key columns? */
static bool
column_is_key(DeltaPlan *plan, int col)
{
	for (int k = 0; k < plan->key_ncolumns; k++)
		if (plan->key_columns[k] == col)
			return true;
	return false;
}

/*
 * Call fn on each set of output columns by which apply finds target rows
 * other than by the result's key (writer_lookup_begin), in every branch:
 * the region columns of each source whose slice retract mode replaces or
 * that anchors outer joins (region true), and the partner columns of each
 * source outer joins can null-extend (region false, only when the output
 * holds some).  fn gets the view's plan and the branch's (the view's own
 * without a UNION ALL).
 */
void
target_foreach_lookup_columns(DeltaPlan *plan, TargetLookupColumnsFn fn, void *arg)
{
	List	   *plans = plan->branches ? plan->branches : list_make1(plan);
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
				fn(plan, p, ncols, cols, true, arg);
			}
			if (!src->lookup_only && (ncols = target_partner_columns(p, src, cols)) > 0)
				fn(plan, p, ncols, cols, false, arg);
		}
	}
}

/* "a, b" of these output columns, quoted */
char *
target_column_names(DeltaPlan *plan, int ncols, const int *cols)
{
	StringInfoData names;

	initStringInfo(&names);
	for (int k = 0; k < ncols; k++)
		appendStringInfo(&names, "%s%s", k > 0 ? ", " : "",
						 quote_identifier(plan->colnames[cols[k]]));
	return names.data;
}

/* Mark the lookup columns in the array arg (target_foreach_lookup_columns) */
static void
mark_lookup_columns(DeltaPlan *plan, DeltaPlan *branch, int ncols, const int *cols,
					bool region, void *arg)
{
	bool	   *looked_up = arg;

	for (int k = 0; k < ncols; k++)
		looked_up[cols[k]] = true;
}

/*
 * Check that a branch of a UNION ALL outputs the UNION's type (or one
 * binary-coercible to it) in the columns apply finds target rows by
 * (target_foreach_lookup_columns; the tag is cast apart).  The planner
 * casts a branch's column to the UNION's type (an integer key beside a
 * numeric one); apply looks the rows up by a branch's source keys as they
 * are, and the index would read an integer as a numeric, a pointer.
 */
static void
check_branch_lookup_types(DeltaPlan *plan, DeltaPlan *branch, int ncols, const int *cols,
						  bool region, void *arg)
{
	for (int k = 0; k < ncols; k++)
	{
		int			col = cols[k];
		Oid			type = branch->coltypes[col];

		if (col == branch->tag_column || type == plan->coltypes[col] ||
			IsBinaryCoercible(type, plan->coltypes[col]))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" is of type %s in a branch of the UNION ALL and of type %s in its result",
						plan->colnames[col], format_type_be(type),
						format_type_be(plan->coltypes[col])),
				 errdetail("Apply finds the target's rows by this column, which holds a source's key, with the key's values as the branch has them."),
				 errhint("Give the key columns that this column takes the same type in the sources of every branch.")));
	}
}

/* Check the branches of a UNION ALL (check_branch_lookup_types) */
void
target_check_branch_types(DeltaPlan *plan)
{
	if (plan->branches != NIL)
		target_foreach_lookup_columns(plan, check_branch_lookup_types, NULL);
}

/*
 * A target cannot be in schema delta_join, nor in one pg_dump leaves out:
 * named there by create_view, or moved there later (ALTER TABLE ... SET
 * SCHEMA, which the DDL guard checks with target_validate).
 */
void
target_check_schema(Oid nspid)
{
	if (nspid == get_namespace_oid(DJ_SCHEMA, false))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("a target cannot be in schema %s", DJ_SCHEMA),
				 errdetail("That schema holds delta_join's catalog and the views' queries."),
				 errhint("Name a table in another schema.")));
	if (nspid == get_namespace_oid(DJ_UNDUMPED_SCHEMA, true))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_SCHEMA_NAME),
				 errmsg("a target cannot be in schema %s", DJ_UNDUMPED_SCHEMA),
				 errdetail("pg_dump does not dump the tables of that schema: a dump of the database would not restore its delta views."),
				 errhint("Name a table in another schema.")));
}

/*
 * Check that an existing target can hold the view's result: an ordinary,
 * permanent table whose columns are the query's output columns, same names
 * and order, each taking the query's value by assignment; the result's key
 * columns each of the query's type and collation (a key that compared
 * otherwise would merge or split rows of the result), and so the columns
 * apply looks rows up by otherwise: their indexes compare the query's
 * values with their own type's functions (a bigint compared as a numeric
 * is read as a pointer).  Its indexes are checked apart
 * (target_check_key_index, target_check_lookup_indexes).
 */
void
target_validate(Oid relid, DeltaPlan *plan, bool guarded)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char	   *name = target_qualified_name(relid);
	bool	   *looked_up = palloc0(sizeof(bool) * Max(plan->ncolumns, 1));
	int			col = 0;

	target_check_schema(RelationGetNamespace(rel));
	target_foreach_lookup_columns(plan, mark_lookup_columns, looked_up);
	target_check_branch_types(plan);
	if (rel->rd_rel->relkind != RELKIND_RELATION)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target %s is not an ordinary table", dj_message_name(name)),
				 errhint("Name a new table, which delta_join.create_view creates, or an existing ordinary table.")));
	check_target_is_closed(rel, name, guarded);
	check_target_not_citus(relid, name);
	if (rel->rd_rel->relpersistence != RELPERSISTENCE_PERMANENT)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("target %s is not a permanent, WAL-logged table", dj_message_name(name)),
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
					 errmsg("target %s has more columns than the query outputs", dj_message_name(name)),
					 errdetail("Column \"%s\" has no counterpart in the select list.", NameStr(att->attname)),
					 errhint("The target's columns must be the query's output columns, in order.")));
		if (strcmp(NameStr(att->attname), plan->colnames[col]) != 0 ||
			!can_coerce_type(1, &plan->coltypes[col], &att->atttypid, COERCION_ASSIGNMENT))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 strcmp(NameStr(att->attname), plan->colnames[col]) != 0 ?
					 errmsg("column %d of target %s is named \"%s\" where the query outputs \"%s\"",
							col + 1, dj_message_name(name), NameStr(att->attname),
							plan->colnames[col]) :
					 errmsg("column %d of target %s does not match the query", col + 1, dj_message_name(name)),
					 errdetail("The target has %s %s; the query outputs %s %s.",
							   quote_identifier(NameStr(att->attname)),
							   format_type_with_typemod(att->atttypid, att->atttypmod),
							   quote_identifier(plan->colnames[col]),
							   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
					 errhint("The target's columns must be the query's output columns, in order, of types that take their values by assignment.")));
		if (att->attgenerated != '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" of target %s is a generated column",
							NameStr(att->attname), dj_message_name(name)),
					 errdetail("The view writes the query's value into each column of its target, and a generated column takes none."),
					 errhint("Declare the column as an ordinary column, or let delta_join.create_view create the target.")));
		if (att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("column \"%s\" of target %s is an identity column GENERATED ALWAYS",
							NameStr(att->attname), dj_message_name(name)),
					 errdetail("The view writes the query's value into each column of its target, and such a column takes none but its own."),
					 errhint("Declare it GENERATED BY DEFAULT (ALTER TABLE %s ALTER COLUMN %s SET GENERATED BY DEFAULT;), or as an ordinary column.",
							 name, quote_identifier(NameStr(att->attname)))));
		if (looked_up[col] && !column_is_key(plan, col) &&
			(att->atttypid != plan->coltypes[col] ||
			 (att->atttypmod != -1 && att->atttypmod != plan->coltypmods[col]) ||
			 att->attcollation != plan->colcollations[col]))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of target %s does not have the query's type and collation",
							NameStr(att->attname), dj_message_name(name)),
					 errdetail("Apply finds the target's rows by this column, which holds a source's key: the target has %s; the query outputs %s.",
							   format_type_with_typemod(att->atttypid, att->atttypmod),
							   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
					 errhint("Declare the column with the query's type and collation, or let delta_join.create_view create the target.")));
		for (int k = 0; k < plan->key_ncolumns; k++)
		{
			if (plan->key_columns[k] != col)
				continue;

			/* a key value coerced on its way in would no longer be found */
			if (att->atttypid != plan->coltypes[col] ||
				(att->atttypmod != -1 && att->atttypmod != plan->coltypmods[col]))
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("key column \"%s\" of target %s does not have the query's type",
								NameStr(att->attname), dj_message_name(name)),
						 errdetail("The target has %s; the query outputs %s.",
								   format_type_with_typemod(att->atttypid, att->atttypmod),
								   format_type_with_typemod(plan->coltypes[col], plan->coltypmods[col])),
						 errhint("Declare the key columns with the query's types, or let delta_join.create_view create the target.")));
			if (att->attcollation != plan->colcollations[col])
				ereport(ERROR,
						(errcode(ERRCODE_COLLATION_MISMATCH),
						 errmsg("key column \"%s\" of target %s has another collation than the query's",
								NameStr(att->attname), dj_message_name(name)),
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
				 errmsg("target %s lacks column \"%s\" of the query's output", dj_message_name(name),
						plan->colnames[col]),
				 errhint("The target's columns must be the query's output columns, in order.")));

	pfree(looked_up);
	table_close(rel, AccessShareLock);
}

/* Does the target lack an index on the result's key (target_key_index)? */
bool
target_lacks_key(Oid relid, DeltaPlan *plan)
{
	Relation	rel;
	bool		lacks;

	if (plan->key_ncolumns == 0)
		return false;
	rel = table_open(relid, AccessShareLock);
	lacks = !OidIsValid(target_key_index(rel, plan));
	table_close(rel, AccessShareLock);
	return lacks;
}

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
 * Can output column col be NULL?  Only plain NOT NULL columns of sources
 * that are never null-extended cannot.  A delta view's sources know
 * whether an outer join null-extends them (after the joins a WHERE
 * condition makes inner); a query of the full path, an aggregate over an
 * outer join say, is read as written.
 */
bool
target_output_nullable(DeltaPlan *plan, int col)
{
	Node	   *expr = compat_grouped_expr(plan->query, (Node *) output_entry(plan, col)->expr);
	Var		   *var;
	RangeTblEntry *rte;
	Relation	rel;
	bool		notnull;
	ListCell   *lc;

	if (!IsA(expr, Var))
		return true;
	var = (Var *) expr;
	rte = rt_fetch(var->varno, plan->query->rtable);
	if (rte->rtekind != RTE_RELATION)
		return true;
	if (plan->path == DJ_PATH_FULL &&
		analysis_under_nullable_side((Node *) plan->query->jointree, var->varno) != 0)
		return true;
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (src->rtindex == (int) var->varno && !bms_is_empty(src->nulling))
			return true;
	}
	rel = relation_open(rte->relid, AccessShareLock);
	notnull = compat_column_not_null(RelationGetDescr(rel), var->varattno);
	relation_close(rel, AccessShareLock);
	return !notnull;
}

/* Can a column of the result's key be NULL (target_output_nullable)? */
bool
target_key_nullable(DeltaPlan *plan)
{
	for (int k = 0; k < plan->key_ncolumns; k++)
		if (target_output_nullable(plan, plan->key_columns[k]))
			return true;
	return false;
}

/*
 * Warn where an existing target's NOT NULL column takes an output column
 * that can be NULL: a plain column of a source, nullable or null-extended
 * by an outer join (an expression's nullability is not known here, and is
 * left alone).  The view would go to error at its first NULL there -- a
 * group of NULL keys, say -- so the creator is told now, with what to do.
 */
void
target_warn_not_null(Oid relid, DeltaPlan *plan)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	int			col = 0;

	for (int i = 0; i < desc->natts && col < plan->ncolumns; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Node	   *expr;
		Var		   *var;
		RangeTblEntry *rte;
		Relation	source;
		bool		column_nullable;

		if (att->attisdropped)
			continue;
		expr = compat_grouped_expr(plan->query, (Node *) output_entry(plan, col++)->expr);
		if (!att->attnotnull || !IsA(expr, Var))
			continue;
		var = (Var *) expr;
		rte = rt_fetch(var->varno, plan->query->rtable);
		if (rte->rtekind != RTE_RELATION || !target_output_nullable(plan, col - 1))
			continue;
		source = relation_open(rte->relid, AccessShareLock);
		column_nullable = !compat_column_not_null(RelationGetDescr(source), var->varattno);
		relation_close(source, AccessShareLock);
		ereport(WARNING,
				(errcode(ERRCODE_WARNING),
				 errmsg("column \"%s\" of target %s is NOT NULL, but the query can output NULL there",
						NameStr(att->attname), dj_message_name(target_qualified_name(relid))),
				 errdetail("Its value comes from column \"%s\" of table %s, which %s. The view goes to state error at the first NULL.",
						   get_attname(rte->relid, var->varattno, false),
						   dj_message_name(target_qualified_name(rte->relid)),
						   column_nullable ? "may be NULL" : "an outer join can null-extend"),
				 column_is_key(plan, col - 1) ?
				 errhint("Make the target's key UNIQUE NULLS NOT DISTINCT instead of a primary key, or keep NULLs out of the query (WHERE ... IS NOT NULL).") :
				 errhint("Drop the NOT NULL of the target's column (ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL), or keep NULLs out of the query (WHERE ... IS NOT NULL).",
						 target_qualified_name(relid), quote_identifier(NameStr(att->attname)))));
	}
	table_close(rel, AccessShareLock);
}

/*
 * Refuse a target without an index on the result's key.  Separate from
 * target_validate: a concurrent create makes the key of the target it
 * made after filling it (ops/concurrent.c), so the DDL guard does not ask
 * for it while the view is backfilling.
 */
void
target_check_key_index(Oid relid, DeltaPlan *plan)
{
	char	   *name;

	if (!target_lacks_key(relid, plan))
		return;
	name = target_qualified_name(relid);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
			 errmsg("target %s has no primary key or unique index on the result's unique key (%s)",
					dj_message_name(name), target_key_column_list(plan)),
			 errdetail("Result rows are upserted by that key."),
			 errhint("Add it: ALTER TABLE %s ADD %s (%s);", name,
					 target_key_nullable(plan) ? "UNIQUE NULLS NOT DISTINCT" : "PRIMARY KEY",
					 target_key_column_list(plan))));
}

/* Refuse a target lacking an index on region columns (arg: its OID) */
static void
check_lookup_index(DeltaPlan *plan, DeltaPlan *branch, int ncols, const int *cols,
				   bool region, void *arg)
{
	Oid			relid = *(Oid *) arg;
	char	   *names;

	if (!region || target_has_index_on(relid, ncols, cols))
		return;
	names = target_column_names(plan, ncols, cols);
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
			 errmsg("target %s has no index on (%s) to find the rows of a source by its key",
					dj_message_name(target_qualified_name(relid)), names),
			 errdetail("A btree index with these columns leading, under their own collations and their types' default operator classes, is needed."),
			 errhint("Create it: CREATE INDEX ON %s (%s);",
					 target_qualified_name(relid), names)));
}

/*
 * Check that the target has the indexes apply must find rows by besides
 * its key (writer_lookup_begin), comparing as their columns do: those
 * target_add_region_indexes made, or others that can take their place.
 * Separate from target_validate, which also judges an existing target
 * before create_view makes them.
 */
void
target_check_lookup_indexes(Oid relid, DeltaPlan *plan)
{
	target_foreach_lookup_columns(plan, check_lookup_index, &relid);
}

/* ----------------------------------------------------------------
 *		The output in the target's column types
 * ----------------------------------------------------------------
 */

/*
 * A query's select list (its non-junk entries) in the target's column
 * types (target_coerce_exprs), for the queries the appliers plan.
 */
void
target_coerce_output(Query *query, DeltaPlan *plan, Oid target)
{
	List	   *outputs = target_coerced_outputs(target, plan, query);
	int			col = 0;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			tle->expr = list_nth(outputs, col++);
	}
}

/*
 * The output columns of a view (exprs) in the target's column types: each
 * expression coerced by assignment, as INSERT ... SELECT would store it
 * (a numeric sum into a DECIMAL(38,2) column is rounded to 2 places).
 * Key columns have the query's types already (target_validate).
 */
static List *
target_coerce_exprs(Oid target, DeltaPlan *plan, List *exprs)
{
	Relation	rel = table_open(target, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	List	   *result = NIL;
	ListCell   *lc = list_head(exprs);

	for (int i = 0; i < desc->natts && lc != NULL; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Node	   *expr;
		Node	   *coerced;

		if (att->attisdropped)
			continue;
		expr = lfirst(lc);
		coerced = coerce_to_target_type(NULL, expr, exprType(expr),
										att->atttypid, att->atttypmod,
										COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
		if (coerced == NULL)
			elog(ERROR, "column \"%s\" of target \"%s\" cannot take the view's output",
				 NameStr(att->attname), RelationGetRelationName(rel));
		result = lappend(result, coerced);
		lc = lnext(exprs, lc);
	}
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * The non-junk entries of query's select list in the target's column
 * types (target_coerce_exprs)
 */
List *
target_coerced_outputs(Oid target, DeltaPlan *plan, Query *query)
{
	return target_coerce_exprs(target, plan, query_output_exprs(query));
}
