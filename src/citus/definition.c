/*-------------------------------------------------------------------------
 *
 * definition.c
 *	  The definitions of distributed views: the rows of
 *	  delta_join.distributed_catalog, read and written, what their trigger
 *	  lets through, and what DDL on the coordinator may do to what they
 *	  name.
 *
 * A definition is one distributed view: its target's qualified name, the
 * query's text, its strategy and options, the search_path ("$user"
 * resolved) and settings it was created under, and the qualified names of
 * the relations its names named then.  The coordinator makes the table a
 * Citus reference table when the first distributed view is created
 * (definition_distribute): every node holds a copy, written in the same
 * (two-phase) transaction, and nodes added later get one.  The row trigger
 * on each node's copy makes the node's shard views follow (citus/node.c).
 *
 * Who writes: create_view, refresh and drop_view on the coordinator, as
 * the caller (PUBLIC may write the table), over the connections through
 * which Citus reaches the nodes; the trigger lets only the owner of a
 * distributed target write its row (definition_check_writer), and a row is
 * never edited but for its refresh time.  A definition whose create_view
 * runs concurrently (citus/distributed.c) has refresh time '-infinity'
 * until its nodes have made their views: meanwhile the nodes' trigger and
 * sync leave its shard groups to that create.  (A column of its own would
 * change the table of version 0.1, and Citus would not give it to the
 * nodes' copies of a reference table in ALTER EXTENSION ... UPDATE.)  The
 * coordinator's apply worker deletes the definitions whose target is gone.  Reads run as the bootstrap
 * superuser (catalog_exec); the apply worker and wait() never queue behind
 * a lock someone keeps on the table (definition_try_lock).
 *
 * The definitions name tables, columns and schemas as text, which each
 * node reads again when a shard group's view is made: on the coordinator,
 * the DDL guard (face/guard.c) refuses to rename what a definition names,
 * and a DROP of a target deletes its definition first (a source only with
 * CASCADE).
 *
 * IDENTIFICATION
 *	  src/citus/definition.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/timestamp.h"

#include "analysis/query.h"
#include "base/compat.h"
#include "citus/definition.h"
#include "citus/run.h"
#include "citus/shard_query.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"

#define CATALOG_TABLE	DJ_SCHEMA ".distributed_catalog"

/* ----------------------------------------------------------------
 *		Reading
 * ----------------------------------------------------------------
 */

/* Read the definitions (SPI connected); returns SPI_processed */
static uint64
read_definitions(const char *sql, int nargs, Oid *types, Datum *values)
{
	if (catalog_exec(sql, nargs, types, values, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read " CATALOG_TABLE);
	return SPI_processed;
}

/*
 * The relation a qualified, quoted name names (a definition's target, or
 * the name drop_view, refresh or wait() was given), or InvalidOid
 */
Oid
definition_relid(const char *name)
{
	return RangeVarGetRelid(makeRangeVarFromNameList(stringToQualifiedNameList_compat(name)),
							NoLock, true);
}

/* A row of the definitions, copied into the current memory context */
Definition *
definition_from_tuple(HeapTuple tuple, TupleDesc desc)
{
	Definition *def = palloc0(sizeof(Definition));
	bool		isnull;
	Datum		value;

#define COLUMN(name) heap_getattr(tuple, SPI_fnumber(desc, name), desc, &isnull)
	def->target = TextDatumGetCString(COLUMN("target"));
	def->query = TextDatumGetCString(COLUMN("query"));
	value = COLUMN("strategy");
	def->strategy = isnull ? NULL : TextDatumGetCString(value);
	value = COLUMN("options");
	def->options = isnull ? NULL : DatumGetJsonbPCopy(value);
	def->search_path = TextDatumGetCString(COLUMN("search_path"));
	{
		Datum	   *elems;
		int			nelems;

		deconstruct_array(DatumGetArrayTypeP(COLUMN("sources")), TEXTOID, -1, false,
						  TYPALIGN_INT, &elems, NULL, &nelems);
		for (int i = 0; i < nelems; i++)
			def->sources = lappend(def->sources, TextDatumGetCString(elems[i]));
	}
	def->settings = DatumGetJsonbPCopy(COLUMN("settings"));
	value = COLUMN("refreshed");
	def->backfilling = !isnull && TIMESTAMP_IS_NOBEGIN(DatumGetTimestampTz(value));
	def->refreshed = !isnull && !def->backfilling;
#undef COLUMN
	return def;
}

/* The definition of a distributed target (by OID), or NULL */
Definition *
definition_of(Oid relid)
{
	Oid			types[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	Definition *def = NULL;
	MemoryContext cxt = CurrentMemoryContext;

	if (!OidIsValid(catalog_relid("distributed_catalog")) || !citus_present())
		return NULL;
	SPI_connect();
	if (read_definitions("SELECT * FROM " CATALOG_TABLE
						 " WHERE pg_catalog.to_regclass(target) OPERATOR(pg_catalog.=) $1",
						 1, types, values) > 0)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		def = definition_from_tuple(SPI_tuptable->vals[0], SPI_tuptable->tupdesc);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return def;
}

/* The targets of every definition, as stored (qualified names) */
List *
definition_targets(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *targets = NIL;
	uint64		n;

	SPI_connect();
	n = read_definitions("SELECT target FROM " CATALOG_TABLE " ORDER BY target", 0, NULL, NULL);
	for (uint64 i = 0; i < n; i++)
	{
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		targets = lappend(targets,
						  pstrdup(SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1)));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return targets;
}

/*
 * Lock the definitions for reading if nobody keeps them locked (any role
 * may: PUBLIC writes them, through create_view, refresh and drop_view).
 */
bool
definition_try_lock(void)
{
	return ConditionalLockRelationOid(catalog_relid("distributed_catalog"), AccessShareLock);
}

/*
 * Does this database have distributed views (definitions)?  With nowait,
 * false too while someone keeps the definitions locked: the apply worker
 * and wait() never queue behind such a lock (DDL checks do wait).
 */
bool
definition_exists(bool nowait)
{
	bool		exists;

	if (!OidIsValid(catalog_relid("distributed_catalog")) || !citus_present() ||
		(nowait && !definition_try_lock()))
		return false;
	SPI_connect();
	exists = read_definitions("SELECT 1 FROM " CATALOG_TABLE " LIMIT 1", 0, NULL, NULL) > 0;
	SPI_finish();
	return exists;
}

/* ----------------------------------------------------------------
 *		Writing (the coordinator)
 * ----------------------------------------------------------------
 */

/*
 * Make the definitions a reference table, once: every node holds them.  On
 * the coordinator, in _prepare_node's own transaction (as the bootstrap
 * superuser, who owns the table: catalog_exec), so that the caller's
 * transaction then writes them over its own connections.
 */
void
definition_distribute(void)
{
	Oid			relid = catalog_relid("distributed_catalog");

	/* one at a time: a second would find it distributed */
	LockRelationOid(relid, ShareRowExclusiveLock);
	if (citus_table_kind(relid) != NULL)
		return;
	SPI_connect();
	(void) catalog_exec("SELECT pg_catalog.set_config('citus.enable_unsafe_triggers', 'on', true),"
						" pg_catalog.create_reference_table('" CATALOG_TABLE "')",
						0, NULL, NULL, NULL);
	SPI_finish();
}

/*
 * Record a new distributed view, which makes every node create the views
 * of the shard groups it holds, in this transaction.  As the caller, over
 * the connections the target was made through (the nodes' trigger must see
 * its shards), and checked there: only the owner of a distributed target
 * writes its definition.
 */
void
definition_insert(Definition *def)
{
	Oid			types[8] = {TEXTOID, TEXTOID, TEXTOID, JSONBOID, TEXTOID, JSONBOID, TEXTARRAYOID,
	TIMESTAMPTZOID};
	Datum		values[8];
	char		nulls[] = "        ";	/* (no argument is null) */
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(def->sources), 1));
	ListCell   *lc;

	if (citus_table_kind(catalog_relid("distributed_catalog")) == NULL)
		elog(ERROR, CATALOG_TABLE " is not a Citus reference table");
	values[0] = CStringGetTextDatum(def->target);
	values[1] = CStringGetTextDatum(def->query);
	values[2] = def->strategy ? CStringGetTextDatum(def->strategy) : (Datum) 0;
	nulls[2] = def->strategy ? ' ' : 'n';
	values[3] = def->options ? JsonbPGetDatum(def->options) : (Datum) 0;
	nulls[3] = def->options ? ' ' : 'n';
	values[4] = CStringGetTextDatum(def->search_path);
	values[5] = JsonbPGetDatum(def->settings);
	foreach(lc, def->sources)
		elems[foreach_current_index(lc)] = CStringGetTextDatum(lfirst(lc));
	values[6] = PointerGetDatum(construct_array(elems, list_length(def->sources), TEXTOID, -1,
												false, TYPALIGN_INT));
	values[7] = TimestampTzGetDatum(DT_NOBEGIN);
	nulls[7] = def->backfilling ? ' ' : 'n';
	SPI_connect();
	if (SPI_execute_with_args("INSERT INTO " CATALOG_TABLE
							  " (target, query, strategy, options, search_path, settings, sources, refreshed)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)", 8, types, values, nulls,
							  false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not insert into " CATALOG_TABLE);
	SPI_finish();
}

/* Run a statement on one definition ($1, its target), as the caller */
static void
write_definition(const char *sql, const char *target)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(target)};

	SPI_connect();
	(void) run_statement(sql, 1, types, values);
	SPI_finish();
}

/*
 * Touch a definition's refresh time (refresh), which makes every node
 * refresh its shard views (and create missing ones) in this transaction;
 * as the caller.
 */
void
definition_touch(const char *target)
{
	write_definition("UPDATE " CATALOG_TABLE " SET refreshed = pg_catalog.now()"
					 " WHERE target OPERATOR(pg_catalog.=) $1", target);
}

/*
 * The end of a concurrent create: the definition is no longer backfilling,
 * and the nodes make the views of the groups that moved meanwhile, if any;
 * as the caller.
 */
void
definition_end_backfill(const char *target)
{
	write_definition("UPDATE " CATALOG_TABLE " SET refreshed = NULL"
					 " WHERE target OPERATOR(pg_catalog.=) $1"
					 " AND refreshed OPERATOR(pg_catalog.=) '-infinity'", target);
}

/*
 * Delete a definition (drop_view, or the DROP of what it uses), which makes
 * every node drop its shard views, keeping their targets; as the caller.
 */
void
definition_delete(const char *target)
{
	write_definition("DELETE FROM " CATALOG_TABLE " WHERE target OPERATOR(pg_catalog.=) $1",
					 target);
}

/*
 * The definition of a distributed target that was dropped (DROP TABLE), by
 * the name drop_view was given: delete it (its shard views went with the
 * target's shards).  False when there is none.
 */
bool
definition_drop_orphan(const char *name)
{
	List	   *given = stringToQualifiedNameList_compat(name);
	char	   *found = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	uint64		n;

	if (!definition_exists(false))
		return false;
	SPI_connect();
	n = read_definitions("SELECT target FROM " CATALOG_TABLE
						 " WHERE pg_catalog.to_regclass(target) IS NULL", 0, NULL, NULL);
	for (uint64 i = 0; i < n && found == NULL; i++)
	{
		char	   *target = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
		List	   *stored = stringToQualifiedNameList_compat(target);

		if (strcmp(strVal(llast(stored)), strVal(llast(given))) == 0 &&
			(list_length(given) == 1 ||
			 strcmp(strVal(linitial(stored)), strVal(linitial(given))) == 0))
			found = MemoryContextStrdup(cxt, target);
	}
	SPI_finish();
	if (found == NULL)
		return false;
	definition_delete(found);
	return true;
}

/* Delete the definitions whose target is gone (the coordinator's worker) */
void
definition_delete_orphans(void)
{
	Oid			types[1] = {TEXTARRAYOID};
	Datum		values[1];
	Datum	   *names;
	uint64		n;

	/* (read first, here: a delete writes on every node, in two phases) */
	SPI_connect();
	n = read_definitions("SELECT target FROM " CATALOG_TABLE
						 " WHERE pg_catalog.to_regclass(target) IS NULL", 0, NULL, NULL);
	names = palloc(sizeof(Datum) * Max(n, 1));
	for (uint64 i = 0; i < n; i++)
		names[i] = CStringGetTextDatum(SPI_getvalue(SPI_tuptable->vals[i],
													SPI_tuptable->tupdesc, 1));
	if (n > 0)
	{
		values[0] = PointerGetDatum(construct_array(names, (int) n, TEXTOID, -1, false, TYPALIGN_INT));
		if (SPI_execute_with_args("DELETE FROM " CATALOG_TABLE
								  " WHERE target OPERATOR(pg_catalog.=) ANY ($1)",
								  1, types, values, NULL, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from " CATALOG_TABLE);
	}
	SPI_finish();
}

/* ----------------------------------------------------------------
 *		What the trigger lets through (every node)
 * ----------------------------------------------------------------
 */

/*
 * Only the owner of a distributed target writes its definition (create_view,
 * refresh and drop_view on the coordinator do, as the caller).
 */
void
definition_check_writer(Definition *def, bool deleting)
{
	Oid			relid;
	int			colocation;
	char	   *distcol;

	if (!citus_present())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distributed delta views need Citus")));
	relid = definition_relid(def->target);
	if (!OidIsValid(relid))
	{
		/* a definition whose target is gone: anyone may remove it */
		if (deleting)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("distributed target %s does not exist", dj_message_name(def->target))));
	}
	if (!object_ownercheck(RelationRelationId, relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));
	if (!deleting && !citus_distribution(relid, &colocation, &distcol))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a hash-distributed table of Citus", dj_message_name(def->target)),
				 errhint("Create distributed views with delta_join.create_view on the coordinator.")));
}

/* An update of a definition: refresh touches its time; nothing else changes */
void
definition_check_unchanged(Definition *old, Definition *def)
{
	if (strcmp(old->target, def->target) != 0 || strcmp(old->query, def->query) != 0 ||
		strcmp(old->search_path, def->search_path) != 0 ||
		(old->strategy == NULL) != (def->strategy == NULL) ||
		(old->strategy && strcmp(old->strategy, def->strategy) != 0) ||
		(old->options == NULL) != (def->options == NULL) ||
		(old->options && compareJsonbContainers(&old->options->root, &def->options->root) != 0) ||
		compareJsonbContainers(&old->settings->root, &def->settings->root) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a distributed view's definition cannot be changed"),
				 errhint("Drop the view and create it again.")));
}

/* ----------------------------------------------------------------
 *		DDL on what definitions name (the coordinator)
 * ----------------------------------------------------------------
 */

/* The relations a definition's query reads (as parsed on this node) */
static void
definition_relations(void *arg)
{
	List	  **result = (List **) arg;
	Definition *def = (Definition *) linitial(*result);
	int			nestlevel = NewGUCNestLevel();
	List	   *hints;

	(void) set_config_option("search_path", def->search_path, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	*result = lappend(*result, shard_query_relations(query_parse(def->query, &hints)));
	AtEOXact_GUC(true, nestlevel);
}

typedef enum DefinitionUse
{
	USES_NONE,
	USES_AS_TARGET,
	USES_AS_SOURCE
} DefinitionUse;

/*
 * Does the distributed view of target (its definition's name) use one of
 * relids, or a relation of one of nspids, as its target or as a source?
 * Its query is read as the bootstrap superuser: the caller may not see the
 * others' schemas; one that no longer parses uses no source.
 */
static DefinitionUse
definition_uses(const char *target, List *relids, List *nspids)
{
	Oid			relid;
	Definition *def;
	List	   *parsed;
	Oid			save_userid;
	int			save_sec_context;
	ListCell   *lc;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	relid = definition_relid(target);
	def = OidIsValid(relid) ? definition_of(relid) : NULL;
	parsed = list_make1(def);
	if (def != NULL)
		run_guarded(definition_relations, &parsed, NULL);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	if (def == NULL)
		return USES_NONE;
	if (list_member_oid(relids, relid) || list_member_oid(nspids, get_rel_namespace(relid)))
		return USES_AS_TARGET;
	if (list_length(parsed) < 2)
		return USES_NONE;
	foreach(lc, (List *) lsecond(parsed))
	{
		if (list_member_oid(relids, lfirst_oid(lc)) ||
			list_member_oid(nspids, get_rel_namespace(lfirst_oid(lc))))
			return USES_AS_SOURCE;
	}
	return USES_NONE;
}

/*
 * ddl_command_start, on a coordinator: refuse to rename, or move to another
 * schema, a relation a distributed view reads or writes, one of their
 * columns, or a schema holding one.  Its definition names them as text,
 * which the nodes read again when a shard group moves.  (Any RenameStmt
 * with a relation counts: ALTER INDEX or ALTER VIEW can rename a table.)
 */
void
definition_check_rename(Node *parsetree)
{
	RangeVar   *relation = NULL;
	Oid			relid = InvalidOid;
	Oid			nspid = InvalidOid;
	ListCell   *lc;

	if (IsA(parsetree, RenameStmt))
	{
		RenameStmt *stmt = (RenameStmt *) parsetree;

		/* (constraints, triggers, rules and policies keep their names out of it) */
		if (stmt->renameType == OBJECT_TABCONSTRAINT || stmt->renameType == OBJECT_TRIGGER ||
			stmt->renameType == OBJECT_RULE || stmt->renameType == OBJECT_POLICY)
			return;
		relation = stmt->relation;
		if (stmt->renameType == OBJECT_SCHEMA)
			nspid = get_namespace_oid(stmt->subname, true);
	}
	else
		relation = ((AlterObjectSchemaStmt *) parsetree)->relation;
	if (relation == NULL && !OidIsValid(nspid))
		return;
	if (citus_local_group() != 0 || !definition_exists(false))
		return;
	if (relation != NULL)
	{
		relid = RangeVarGetRelid(relation, NoLock, true);
		if (!OidIsValid(relid) || citus_table_kind(relid) == NULL)
			return;
	}

	foreach(lc, definition_targets())
	{
		if (definition_uses(lfirst(lc), list_make1_oid(relid), list_make1_oid(nspid)) != USES_NONE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot rename \"%s\" or move it to another schema: distributed view %s uses it",
							OidIsValid(relid) ? get_rel_name(relid) : get_namespace_name(nspid),
							dj_message_name(lfirst(lc))),
					 errdetail("A distributed view's definition names its tables, their columns and schemas, which the nodes read again when a shard group moves."),
					 errhint("Drop the distributed view, rename, and create it again.")));
	}
}

/*
 * ddl_command_start, on a coordinator: DROP TABLE or DROP SCHEMA of what a
 * distributed view uses deletes its definition first, as drop_view does, so
 * that the nodes drop the shard views before Citus drops the shards, and a
 * table made again under the name is not taken for the old one.  A source
 * goes only with CASCADE, which drops the view (its target stays), as core
 * would for a view of one node.
 */
void
definition_forget_dropped(DropStmt *stmt)
{
	List	   *relids = NIL;
	List	   *nspids = NIL;
	ListCell   *lc;

	if ((stmt->removeType != OBJECT_TABLE && stmt->removeType != OBJECT_SCHEMA) ||
		citus_local_group() != 0 || !definition_exists(false))
		return;
	foreach(lc, stmt->objects)
	{
		if (stmt->removeType == OBJECT_TABLE)
			relids = lappend_oid(relids,
								 RangeVarGetRelid(makeRangeVarFromNameList(lfirst(lc)), NoLock, true));
		else
			nspids = lappend_oid(nspids, get_namespace_oid(strVal(lfirst(lc)), true));
	}

	foreach(lc, definition_targets())
	{
		DefinitionUse use = definition_uses(lfirst(lc), relids, nspids);

		if (use == USES_NONE)
			continue;
		if (use == USES_AS_SOURCE)
		{
			if (stmt->behavior != DROP_CASCADE)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("cannot drop a source of distributed view %s",
								dj_message_name(lfirst(lc))),
						 errhint("Drop the view first with delta_join.drop_view, or use DROP ... CASCADE, which drops the view and keeps its target.")));
			ereport(NOTICE,
					(errmsg("drop cascades to distributed view %s (its target stays)",
							dj_message_name(lfirst(lc)))));
		}
		definition_delete(lfirst(lc));
	}
}
