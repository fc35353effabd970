/*-------------------------------------------------------------------------
 *
 * guard.c
 *	  The DDL guard and the target guard: nothing done to a source or a
 *	  target may leave a view silently wrong.
 *
 * The query view of each view (query.c) already makes core refuse DROP
 * COLUMN, ALTER COLUMN TYPE, DROP FUNCTION ... of what a query uses, and
 * follow renames.  What remains is caught by event triggers:
 *
 *	ddl_command_end	every view whose source (or a partition or inheritance
 *					child of one), target, or an index of them, the command
 *					touched is checked again as the worker would check it:
 *					its query analyzed (rules 1-8), its captured key columns,
 *					its target.  A failure refuses the command, naming the
 *					view: SET UNLOGGED on a source or a target, a primary
 *					key dropped or redefined, a replica identity that no
 *					longer logs an aggregate's group key (on any partition),
 *					a child table inheriting from a source (but of a full
 *					recompute, see below), an unlogged or foreign one, a
 *					partition created without the replica identity the view needs or
 *					unlogged, a target column added or changed, a rule on a
 *					target, its guard trigger disabled, a target among the
 *					tables of a subscription, a table inheriting
 *					it or a table it becomes a partition of ...  (Triggers
 *					and rules count as their table.)  A partition attached
 *					to or detached from a source brings rows in or out
 *					without decodable changes: the views over it are
 *					refreshed in the same transaction; so is a full
 *					recompute whose query now reads other tables (an
 *					inheritance child created, attached, detached or
 *					dropped), which registers them as its sources; and so
 *					are the views over a table one of whose generated
 *					columns got another expression (SET EXPRESSION: a
 *					stored column is rewritten without decodable changes,
 *					a virtual one computed anew); and so is a view whose
 *					target had a column's type changed (the rewrite
 *					converted the stored values, not the query's).  A
 *					target renamed or
 *					given to another owner takes its query view along.
 *					What a query is made of, changed -- a view, function,
 *					operator, type ... it uses, or a type whose values its
 *					sources store (relations_using_objects) -- has the view
 *					refreshed too.
 *	ddl_command_start
 *					DETACH PARTITION CONCURRENTLY of a source, and DROP INDEX
 *					CONCURRENTLY on a source or a target, are refused (they
 *					commit in steps, so no check or refresh could follow in
 *					the same transaction).  Before any DROP, what it might
 *					take from the views without naming it is noted: the
 *					partitions of sources (DROP SCHEMA ... CASCADE, DROP
 *					OWNED ...), and the indexes, triggers and rules of
 *					sources and targets.
 *	sql_drop		a dropped target unregisters its view; a dropped query
 *					view (DROP TABLE source CASCADE) puts its view in error;
 *					the noted objects that went have ddl_command_end refresh
 *					the views over a source that lost partitions, and check
 *					again those whose tables lost an index, trigger or rule.
 *
 * A command is refused only when its runner may act as the owner of the
 * view's target: another role's DDL on its own table puts the view in error
 * instead (the owner of a source is not held back by a view reading it).
 * The query view itself follows its target only: any other DDL on it is
 * refused.
 *
 * The target guard (dj_guard_target) is the statement trigger target.c puts
 * on every target: it refuses INSERT, UPDATE, DELETE, TRUNCATE and COPY by
 * anyone but delta_join, unless the view's option manual_writes allows them.
 *
 * These functions run as the role that ran the command; catalog statements
 * run as the bootstrap superuser (catalog.c), refreshes as the target's
 * owner (target.c).
 *
 * Length: about 1,060 lines.  The three event triggers share the drop
 * watch and the helpers that find, check and repair the views a command
 * concerns (guard_views, view_concerns, guard_check_view, guard_repair
 * ...); split by trigger, those helpers would become an interface of a
 * dozen functions with one user.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "commands/extension.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "replication/slot.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "ops/views.h"
#include "apply/apply.h"
#include "analysis/view_plan.h"
#include "registry/catalog.h"
#include "citus/definition.h"
#include "process/launcher.h"
#include "analysis/query.h"
#include "base/runas.h"
#include "apply/target_shape.h"
#include "ops/target.h"
#include "process/worker.h"

PG_FUNCTION_INFO_V1(dj_on_ddl_start);
PG_FUNCTION_INFO_V1(dj_on_ddl_end);
PG_FUNCTION_INFO_V1(dj_on_sql_drop);
PG_FUNCTION_INFO_V1(dj_guard_target);

/*
 * What a DROP may take away from the views without naming it: noted at
 * ddl_command_start of every DROP (the objects may go by CASCADE, DROP
 * SCHEMA, DROP OWNED ...), read at sql_drop, which only sees their OIDs,
 * and acted on at ddl_command_end.  Kept in TopTransactionContext, valid in
 * the transaction watch_lxid names.
 */
typedef struct DropWatch
{
	List	   *partitions;		/* partitions of partitioned sources */
	List	   *partition_sources;	/* ... the source each belongs to */
	List	   *objects;		/* indexes, triggers, rules of sources and targets */
	List	   *object_relations;	/* ... the relation each belongs to */
	List	   *refresh;		/* sources that lost partitions (sql_drop) */
	List	   *recheck;		/* relations that lost an object (sql_drop) */
} DropWatch;

static DropWatch *watch = NULL;
static LocalTransactionId watch_lxid = InvalidLocalTransactionId;

/* ----------------------------------------------------------------
 *		Helpers
 * ----------------------------------------------------------------
 */

/* The views of the database, or NIL when delta_join is not (yet) there */
static List *
guard_views(void)
{
	if (creating_extension || !OidIsValid(catalog_relid("view_catalog")))
		return NIL;
	return catalog_list_views();
}

/*
 * Are the views maintained?  Without the database's slot (a database being
 * restored by pg_restore, whose tables get their keys after the catalog's
 * rows; a slot dropped by hand) every view already waits for a refresh,
 * which checks it: there is nothing to check or refresh before.
 */
static bool
guard_views_live(void)
{
	char		slot[NAMEDATALEN];

	launcher_slot_name(slot, MyDatabaseId);
	return SearchNamedReplicationSlot(slot, true) != NULL;
}

/* The OIDs of the first column of the SPI result, as a list in cxt */
static List *
spi_oids(MemoryContext cxt)
{
	List	   *result = NIL;

	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			oid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														 SPI_tuptable->tupdesc, 1, &isnull));
		MemoryContext spi = MemoryContextSwitchTo(cxt);

		result = lappend_oid(result, oid);
		MemoryContextSwitchTo(spi);
	}
	return result;
}

/* relid, and the tables it is a partition or an inheritance child of */
static List *
self_and_ancestors(Oid relid)
{
	List	   *result = list_make1_oid(relid);
	MemoryContext caller = CurrentMemoryContext;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};

	SPI_connect();
	catalog_exec("WITH RECURSIVE up(r) AS (SELECT $1 UNION "
				 "  SELECT i.inhparent FROM pg_catalog.pg_inherits i, up "
				 "  WHERE i.inhrelid OPERATOR(pg_catalog.=) up.r) "
				 "SELECT r FROM up WHERE r OPERATOR(pg_catalog.<>) $1",
				 1, argtypes, values, NULL);
	result = list_concat(result, spi_oids(caller));
	SPI_finish();
	return result;
}

static ArrayType *
oid_array(List *oids)
{
	Datum	   *elems = palloc(sizeof(Datum) * (list_length(oids) + 1));
	int			n = 0;
	ListCell   *lc;

	foreach(lc, oids)
		elems[n++] = ObjectIdGetDatum(lfirst_oid(lc));
	return construct_array(elems, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT);
}

/* Does the view read or write relid, or relid belong to a table it reads? */
static bool
view_concerns(ViewRecord *view, List *relids)
{
	ListCell   *lc;

	foreach(lc, relids)
	{
		Oid			relid = lfirst_oid(lc);

		if (relid == view->target || relid == view->query_view || view_plan_reads(view, relid))
			return true;
	}
	return false;
}

/* Can the role running the command act as the view's owner? */
static bool
runner_owns(ViewRecord *view)
{
	return has_privs_of_role(GetUserId(), runas_target_owner(view->target));
}

/* Put a view in error because of a command, saying so */
static void
guard_set_error(ViewRecord *view, const char *command, const char *why)
{
	catalog_set_error(view, &(ErrorData) {.message = psprintf("%s: %s", command, why)}, true);
	launcher_notify();
}

/*
 * Check a view as the worker would before applying it, its owner's rights
 * on the sources included; refuse the command that made it fail, naming
 * the view.  A command run by a role that has no say over the view (it
 * cannot act as the target's owner), and GRANT and REVOKE (the rights of
 * others are never held back), are not refused: the view goes into error
 * instead, until its owner refreshes it.
 */
static bool
guard_check_view(ViewRecord *view, const char *command, bool may_refuse)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ErrorData  *volatile failure = NULL;
	RunAs		runas;
	volatile bool running_as_owner = false;

	PG_TRY();
	{
		DeltaPlan  *plan = view_plan_load_to_fill(view);

		target_validate(view->target, plan, true);
		/*
		 * a concurrent create makes its target's indexes after the fill, a
		 * concurrent refresh makes those missing before it
		 */
		if (!view->backfilling)
		{
			target_check_key_index(view->target, plan);
			target_check_lookup_indexes(view->target, plan);
		}
		runas_begin(runas_target_owner(view->target), view->settings, &runas);
		running_as_owner = true;
		apply_check_access(plan, view->target);
		runas_end(&runas);
		running_as_owner = false;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(oldcxt);
		failure = CopyErrorData();
		FlushErrorState();
		if (running_as_owner)
			runas_end(&runas);
	}
	PG_END_TRY();

	if (failure == NULL)
		return true;
	if (may_refuse && runner_owns(view))
		ereport(ERROR,
				(errcode(failure->sqlerrcode),
				 errmsg("cannot run %s: delta view %s would no longer be correct",
						command, dj_message_name(catalog_view_name(view))),
				 failure->detail ? errdetail("%s. %s", failure->message, failure->detail) :
				 errdetail("%s", failure->message),
				 errhint("Drop the view with delta_join.drop_view() first, or leave the table as it is.")));
	catalog_set_error(view,
					  &(ErrorData) {.message = psprintf("%s made the view incorrect: %s",
														command, failure->message),
									.detail = failure->detail, .hint = failure->hint},
					  true);
	launcher_notify();
	return false;
}

/*
 * What the views' queries are made of, changed by the command: the query
 * views that use one of the objects (classids[i], objids[i]) -- a view, a
 * function, an operator, a type, a text search configuration, a collation
 * -- directly or through the views they read (flatten.c), and the tables
 * with a column whose values show one of the types changed.
 *
 * A type's change reaches every type made of it: its array, a domain over
 * it, a range (and so a multirange) of it, a composite type -- or a
 * table's row type -- with an attribute of it.  An enum's label renamed, a
 * composite type's attribute added, dropped, renamed or retyped (ALTER
 * TYPE ... ATTRIBUTE), a column added to a table whose row type is stored
 * elsewhere: the text and JSON image of every stored value of each of those
 * types changes without a row change.  A relation the command changed
 * counts by its row type, and a view also by its rule.  A table changed
 * itself does not count otherwise: its columns and their types are bound
 * (a query cannot read its whole row, rule 4), and the DDL guard checks the
 * views over it.
 */
static List *
relations_using_objects(List *classids, List *objids)
{
	List	   *result = NIL;
	MemoryContext caller = CurrentMemoryContext;

	if (objids == NIL)
		return NIL;
	SPI_connect();
	catalog_exec("WITH RECURSIVE given(classid, objid) AS ("
				 "  SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) t(classid, objid)), "
				 "made_of(part, whole) AS ("
				 "  SELECT oid, typarray FROM pg_catalog.pg_type "
				 "  WHERE typarray OPERATOR(pg_catalog.<>) 0 "
				 "  UNION ALL SELECT typbasetype, oid FROM pg_catalog.pg_type "
				 "  WHERE typtype OPERATOR(pg_catalog.=) 'd' "
				 "  UNION ALL SELECT rngsubtype, rngtypid FROM pg_catalog.pg_range "
				 "  UNION ALL SELECT rngtypid, rngmultitypid FROM pg_catalog.pg_range "
				 "  UNION ALL SELECT a.atttypid, c.reltype "
				 "  FROM pg_catalog.pg_attribute a, pg_catalog.pg_class c "
				 "  WHERE c.oid OPERATOR(pg_catalog.=) a.attrelid AND a.attnum OPERATOR(pg_catalog.>) 0 "
				 "    AND NOT a.attisdropped AND c.reltype OPERATOR(pg_catalog.<>) 0), "
				 "types(t) AS ("
				 "  SELECT g.objid FROM given g "
				 "  WHERE g.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_type'::pg_catalog.regclass "
				 "  UNION SELECT c.reltype FROM given g, pg_catalog.pg_class c "
				 "  WHERE g.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
				 "    AND c.oid OPERATOR(pg_catalog.=) g.objid AND c.reltype OPERATOR(pg_catalog.<>) 0 "
				 "  UNION SELECT m.whole FROM types, made_of m WHERE m.part OPERATOR(pg_catalog.=) types.t), "
				 "touched(classid, objid) AS ("
				 "  SELECT * FROM given g "
				 "  WHERE g.classid OPERATOR(pg_catalog.<>) 'pg_catalog.pg_class'::pg_catalog.regclass "
				 "     OR (SELECT relkind FROM pg_catalog.pg_class WHERE oid OPERATOR(pg_catalog.=) g.objid) "
				 "        OPERATOR(pg_catalog.=) 'v' "
				 "  UNION SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t FROM types), "
				 "readers(v) AS ("
				 "  SELECT r.ev_class FROM pg_catalog.pg_depend d, pg_catalog.pg_rewrite r, touched t "
				 "  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
				 "    AND d.objid OPERATOR(pg_catalog.=) r.oid "
				 "    AND d.refclassid OPERATOR(pg_catalog.=) t.classid "
				 "    AND d.refobjid OPERATOR(pg_catalog.=) t.objid "
				 "  UNION SELECT r.ev_class FROM pg_catalog.pg_depend d, pg_catalog.pg_rewrite r, readers "
				 "  WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
				 "    AND d.objid OPERATOR(pg_catalog.=) r.oid "
				 "    AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
				 "    AND d.refobjid OPERATOR(pg_catalog.=) readers.v "
				 "    AND r.ev_class OPERATOR(pg_catalog.<>) readers.v) "
				 "SELECT v FROM readers "
				 "UNION SELECT a.attrelid FROM pg_catalog.pg_attribute a, types "
				 "WHERE a.atttypid OPERATOR(pg_catalog.=) types.t AND a.attnum OPERATOR(pg_catalog.>) 0 "
				 "  AND NOT a.attisdropped",
				 2, (Oid[]) {OIDARRAYOID, OIDARRAYOID},
				 (Datum[]) {PointerGetDatum(oid_array(classids)), PointerGetDatum(oid_array(objids))},
				 NULL);
	result = spi_oids(caller);
	SPI_finish();
	return result;
}

/*
 * A view whose sources gained or lost rows without decodable changes, or
 * whose query's parts changed: refresh it now -- after checking it, which
 * refuses the command if the view can no longer be maintained -- when the
 * command's runner can act as the view's owner; otherwise put the view in
 * error, to be refreshed by its owner (the runner may not have the rights
 * the refresh needs, nor see the rows it would write).
 */
static void
guard_repair(ViewRecord *view, const char *command, const char *why)
{
	if (view->in_error)
		return;

	/*
	 * A concurrent create or refresh owns the view until it ends (between
	 * its steps too): a refresh now would rebuild it behind its back, as
	 * delta_join.refresh() would, which is refused alike.
	 */
	if (view->backfilling)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot run %s: delta view %s is being backfilled",
						command, dj_message_name(catalog_view_name(view))),
				 errdetail("The view must be refreshed because %s.", why),
				 errhint("Wait for the concurrent create or refresh that runs (delta_join.progress) to end.")));
	if (!runner_owns(view))
	{
		guard_set_error(view, command, why);
		return;
	}
	if (!guard_check_view(view, command, true))
		return;
	ereport(NOTICE,
			(errmsg("delta view %s is refreshed because %s",
					dj_message_name(catalog_view_name(view)), why)));
	(void) ops_refresh_view(view, false);
}

/* Repair the views reading relid, after rows came or went without changes. */
static void
guard_refresh_readers(List *views, Oid relid, const char *command)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (view_plan_reads(view, relid))
			guard_repair(view, command,
						 psprintf("the %s of \"%s\" changed (%s)",
								  get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE ?
								  "partitions" : "inheritance children",
								  get_rel_name(relid), command));
	}
}

/* ----------------------------------------------------------------
 *		ddl_command_start
 * ----------------------------------------------------------------
 */

/* The watch of this transaction, made empty by reset */
static DropWatch *
drop_watch(bool reset)
{
	if (MyProc_lxid_compat != watch_lxid || watch == NULL)
	{
		watch = MemoryContextAllocZero(TopTransactionContext, sizeof(DropWatch));
		watch_lxid = MyProc_lxid_compat;
	}
	else if (reset)
		memset(watch, 0, sizeof(DropWatch));
	return watch;
}

/*
 * Note what a DROP might take from the views: the partitions of their
 * partitioned sources, and the indexes, triggers and rules of their sources
 * (partitions included) and targets.
 */
static void
watch_drop(List *views)
{
	DropWatch  *w = drop_watch(true);
	List	   *sources = NIL;
	List	   *relations = NIL;
	MemoryContext caller = CurrentMemoryContext;
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		ListCell   *lc2;

		relations = lappend_oid(relations, view->target);
		foreach(lc2, view->sources)
			sources = list_append_unique_oid(sources, ((SourceRecord *) lfirst(lc2))->relid);
	}
	relations = list_concat(relations, sources);

	SPI_connect();
	catalog_exec("WITH RECURSIVE parts(part, source) AS ("
				 "  SELECT s, s FROM pg_catalog.unnest($1) s"
				 "  UNION SELECT i.inhrelid, p.source FROM pg_catalog.pg_inherits i, parts p"
				 "  WHERE i.inhparent OPERATOR(pg_catalog.=) p.part), "
				 "rels(rel) AS (SELECT part FROM parts UNION SELECT pg_catalog.unnest($2)) "
				 "SELECT part, source, true FROM parts WHERE part OPERATOR(pg_catalog.<>) source "
				 "UNION ALL SELECT indexrelid, indrelid, false FROM pg_catalog.pg_index, rels "
				 "  WHERE indrelid OPERATOR(pg_catalog.=) rels.rel "
				 "UNION ALL SELECT oid, tgrelid, false FROM pg_catalog.pg_trigger, rels "
				 "  WHERE tgrelid OPERATOR(pg_catalog.=) rels.rel "
				 "UNION ALL SELECT oid, ev_class, false FROM pg_catalog.pg_rewrite, rels "
				 "  WHERE ev_class OPERATOR(pg_catalog.=) rels.rel",
				 2, (Oid[]) {OIDARRAYOID, OIDARRAYOID},
				 (Datum[]) {PointerGetDatum(oid_array(sources)), PointerGetDatum(oid_array(relations))},
				 NULL);
	MemoryContextSwitchTo(TopTransactionContext);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Oid			objid = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &isnull));
		Oid			relid = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));

		if (DatumGetBool(SPI_getbinval(tuple, desc, 3, &isnull)))
		{
			w->partitions = lappend_oid(w->partitions, objid);
			w->partition_sources = lappend_oid(w->partition_sources, relid);
		}
		else
		{
			w->objects = lappend_oid(w->objects, objid);
			w->object_relations = lappend_oid(w->object_relations, relid);
		}
	}
	MemoryContextSwitchTo(caller);
	SPI_finish();
}

/* The first of the views that concerns relid or a table it belongs to */
static ViewRecord *
first_view_concerning(List *views, Oid relid)
{
	List	   *relids;
	ListCell   *lc;

	if (!OidIsValid(relid))
		return NULL;
	relids = self_and_ancestors(relid);
	foreach(lc, views)
	{
		if (view_concerns(lfirst(lc), relids))
			return lfirst(lc);
	}
	return NULL;
}

/*
 * DROP INDEX CONCURRENTLY commits in steps, so the check of sql_drop could
 * not undo it: refuse it on the tables of views.
 */
static void
refuse_concurrent_index_drop(DropStmt *stmt, List *views)
{
	ListCell   *lc;

	foreach(lc, stmt->objects)
	{
		RangeVar   *rv = makeRangeVarFromNameList((List *) lfirst(lc));
		Oid			index = RangeVarGetRelid(rv, NoLock, true);
		Oid			relid = OidIsValid(index) ? IndexGetRelation(index, true) : InvalidOid;
		ViewRecord *view = first_view_concerning(views, relid);

		if (view && !runner_owns(view))
			guard_set_error(view, "DROP INDEX", "an index of its tables was dropped concurrently");
		else if (view)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot drop index \"%s\" concurrently: delta view %s uses its table",
							get_rel_name(index), dj_message_name(catalog_view_name(view))),
					 errdetail("The view must be checked in the transaction that drops the index."),
					 errhint("Use DROP INDEX without CONCURRENTLY.")));
	}
}

static void
refuse_concurrent_detach(AlterTableStmt *stmt, List *views)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);
		Oid			relid;
		ViewRecord *view;

		if (cmd->subtype != AT_DetachPartition ||
			!((PartitionCmd *) cmd->def)->concurrent)
			continue;
		relid = RangeVarGetRelid(stmt->relation, NoLock, true);
		if ((view = first_view_concerning(views, relid)) != NULL && !runner_owns(view))
			guard_set_error(view, "ALTER TABLE", "a partition of its source was detached concurrently");
		else if (view != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot detach a partition of \"%s\" concurrently: delta view %s reads it",
							get_rel_name(relid), dj_message_name(catalog_view_name(view))),
					 errdetail("The rows of the partition leave the view's source without changes that can be decoded, so the view must be refreshed in the same transaction."),
					 errhint("Use DETACH PARTITION without CONCURRENTLY.")));
	}
}

/*
 * DROP EXTENSION delta_join: its views go with it, and there is nothing to
 * watch.  Nor is its catalog read: the lock of that read, taken before
 * DROP EXTENSION locks the extension, made two concurrent drops deadlock
 * (each held view_catalog, one waited for the other's to drop it, the other
 * for the extension).
 */
static bool
drops_this_extension(Node *parsetree)
{
	ListCell   *lc;

	if (!IsA(parsetree, DropStmt) ||
		((DropStmt *) parsetree)->removeType != OBJECT_EXTENSION)
		return false;
	foreach(lc, ((DropStmt *) parsetree)->objects)
	{
		if (strcmp(strVal(lfirst(lc)), DJ_EXTENSION_NAME) == 0)
			return true;
	}
	return false;
}

Datum
dj_on_ddl_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;
	List	   *views;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "dj_on_ddl_start: not fired by an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;
	if (drops_this_extension(parsetree))
		PG_RETURN_VOID();

	/* distributed views keep their tables by name (citus/definition.c) */
	if (IsA(parsetree, RenameStmt) || IsA(parsetree, AlterObjectSchemaStmt))
		definition_check_rename(parsetree);
	if (IsA(parsetree, DropStmt))
		definition_forget_dropped((DropStmt *) parsetree);

	if (!IsA(parsetree, AlterTableStmt) && !IsA(parsetree, DropStmt) &&
		!IsA(parsetree, DropOwnedStmt))
		PG_RETURN_VOID();
	if ((views = guard_views()) == NIL || !guard_views_live())
		PG_RETURN_VOID();

	if (IsA(parsetree, AlterTableStmt))
		refuse_concurrent_detach((AlterTableStmt *) parsetree, views);
	else
	{
		if (IsA(parsetree, DropStmt) && ((DropStmt *) parsetree)->concurrent)
			refuse_concurrent_index_drop((DropStmt *) parsetree, views);
		watch_drop(views);
	}
	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 *		ddl_command_end
 * ----------------------------------------------------------------
 */

/*
 * What the command's collected commands touched: the tables (for an index,
 * a trigger or a rule, its table), and every object as (classid, objid).
 */
static List *
touched_relations(List **classids, List **objids)
{
	List	   *relids = NIL;
	MemoryContext caller = CurrentMemoryContext;

	/*
	 * In the session of whoever runs the DDL: every operator named with its
	 * schema (a simple CASE would look "=" up by name), and run by
	 * catalog_exec, with a search_path of pg_catalog only
	 */
	SPI_connect();
	if (catalog_exec("SELECT CASE "
					 "  WHEN c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_trigger'::pg_catalog.regclass THEN "
					 "    (SELECT tgrelid FROM pg_catalog.pg_trigger WHERE oid OPERATOR(pg_catalog.=) c.objid) "
					 "  WHEN c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass THEN "
					 "    (SELECT ev_class FROM pg_catalog.pg_rewrite WHERE oid OPERATOR(pg_catalog.=) c.objid) "
					 "  WHEN c.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass THEN c.objid END, "
					 "  c.classid, c.objid "
					 "FROM pg_catalog.pg_event_trigger_ddl_commands() c",
					 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read the commands of the event");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		no_relation;
		bool		isnull;
		Oid			relid = DatumGetObjectId(SPI_getbinval(tuple, desc, 1, &no_relation));
		Oid			classid = DatumGetObjectId(SPI_getbinval(tuple, desc, 2, &isnull));
		Oid			objid = DatumGetObjectId(SPI_getbinval(tuple, desc, 3, &isnull));
		MemoryContext spi = MemoryContextSwitchTo(caller);

		*classids = lappend_oid(*classids, classid);
		*objids = lappend_oid(*objids, objid);
		if (no_relation)
			relid = InvalidOid;
		else if (get_rel_relkind(relid) == RELKIND_INDEX ||
				 get_rel_relkind(relid) == RELKIND_PARTITIONED_INDEX)
			relid = IndexGetRelation(relid, true);
		if (OidIsValid(relid))
			relids = list_append_unique_oid(relids, relid);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return relids;
}

Datum
dj_on_ddl_end(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	const char *command;
	List	   *views;
	List	   *relids = NIL;
	List	   *refresh = NIL;
	List	   *regenerated = NIL;
	List	   *retyped = NIL;
	List	   *classids = NIL;
	List	   *objids = NIL;
	bool		live;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "dj_on_ddl_end: not fired by an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;
	command = GetCommandTagName(trigdata->tag);

	if ((views = guard_views()) == NIL)
		PG_RETURN_VOID();
	live = guard_views_live();

	/* partitions attached, detached or dropped: their parents' views */
	if (IsA(trigdata->parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) trigdata->parsetree;

		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst(lc);
			Oid			relid;

			/*
			 * A generated column given another expression (17): a stored
			 * column's values are rewritten without decodable changes, a
			 * virtual one's are computed anew by every query.  The views
			 * over the table, its partitions and the tables it belongs to
			 * are refreshed.
			 */
			if (cmd->subtype == AT_SetExpression_compat)
			{
				relid = RangeVarGetRelid(stmt->relation, NoLock, true);
				if (OidIsValid(relid))
					regenerated = list_concat_unique_oid(regenerated,
														 list_concat(self_and_ancestors(relid),
																	 find_all_inheritors(relid, NoLock, NULL)));
				continue;
			}
			/*
			 * A column given another type: the table rewrite converted
			 * the stored values from the old type (or by USING), not
			 * from the query's values, so a target's rows may differ
			 * from what the view would write (USING upper(name), a
			 * numeric widened after it was rounded).  Its view is
			 * refreshed.
			 */
			if (cmd->subtype == AT_AlterColumnType)
			{
				relid = RangeVarGetRelid(stmt->relation, NoLock, true);
				if (OidIsValid(relid))
					retyped = list_append_unique_oid(retyped, relid);
				continue;
			}
			if (cmd->subtype != AT_AttachPartition &&
				cmd->subtype != AT_DetachPartition &&
				cmd->subtype != AT_DetachPartitionFinalize)
				continue;
			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
			if (OidIsValid(relid))
				refresh = list_concat_unique_oid(refresh, self_and_ancestors(relid));
			/* (the partition itself may be a target) */
			relid = RangeVarGetRelid(((PartitionCmd *) cmd->def)->name, NoLock, true);
			if (OidIsValid(relid))
				relids = list_append_unique_oid(relids, relid);
		}
	}
	if (IsA(trigdata->parsetree, DropStmt) || IsA(trigdata->parsetree, DropOwnedStmt))
	{
		DropWatch  *w = drop_watch(false);

		refresh = list_concat_unique_oid(refresh, w->refresh);
		relids = list_concat_unique_oid(relids, w->recheck);
		drop_watch(true);
	}

	foreach(lc, touched_relations(&classids, &objids))
		relids = list_concat_unique_oid(relids, self_and_ancestors(lfirst_oid(lc)));

	/* a schema renamed: the targets in it take their query views along */
	if (IsA(trigdata->parsetree, RenameStmt) &&
		((RenameStmt *) trigdata->parsetree)->renameType == OBJECT_SCHEMA)
	{
		Oid			nspid = get_namespace_oid(((RenameStmt *) trigdata->parsetree)->newname,
											  true);

		foreach(lc, views)
		{
			ViewRecord *view = lfirst(lc);

			if (OidIsValid(nspid) && get_rel_namespace(view->target) == nspid)
				relids = list_append_unique_oid(relids, view->target);
		}
	}

	/*
	 * A subscription created or refreshed may take a target among the
	 * tables its apply worker writes (pg_subscription_rel), past the guard
	 * trigger: it fires row triggers only.  Every target is checked.
	 */
	if (IsA(trigdata->parsetree, CreateSubscriptionStmt) ||
		IsA(trigdata->parsetree, AlterSubscriptionStmt))
	{
		foreach(lc, views)
			relids = list_append_unique_oid(relids, ((ViewRecord *) lfirst(lc))->target);
	}

	/* (GRANT and REVOKE on tables name them only in the statement) */
	if (IsA(trigdata->parsetree, GrantStmt))
	{
		GrantStmt  *stmt = (GrantStmt *) trigdata->parsetree;

		if (stmt->objtype == OBJECT_TABLE && stmt->targtype == ACL_TARGET_OBJECT)
		{
			foreach(lc, stmt->objects)
			{
				Oid			relid = RangeVarGetRelid(lfirst(lc), NoLock, true);

				if (OidIsValid(relid))
					relids = list_append_unique_oid(relids, relid);
			}
		}
	}
	relids = list_concat_unique_oid(relids, refresh);

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (view->in_error || !OidIsValid(view->query_view) || !view_concerns(view, relids))
			continue;
		if (list_member_oid(relids, view->query_view) &&
			trigdata->tag != CMDTAG_GRANT && trigdata->tag != CMDTAG_REVOKE &&
			trigdata->tag != CMDTAG_COMMENT && trigdata->tag != CMDTAG_SECURITY_LABEL)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot run %s on the query view of delta view %s",
							command, dj_message_name(catalog_view_name(view))),
					 errdetail("The view's query is bound when the view is created and changes only with it; its name, schema and owner follow the target."),
					 errhint("To change the query, drop the view with delta_join.drop_view() and create it again.")));
		if (list_member_oid(relids, view->target))
			query_follow_target(view->query_view, view->target);
		if (live)
			(void) guard_check_view(view, command,
									trigdata->tag != CMDTAG_GRANT &&
									trigdata->tag != CMDTAG_REVOKE);
	}

	if (!live)
		PG_RETURN_VOID();

	/*
	 * A view, function, operator, type ... a query uses, replaced or
	 * altered: its results may not be the same.
	 */
	if (trigdata->tag != CMDTAG_GRANT && trigdata->tag != CMDTAG_REVOKE &&
		trigdata->tag != CMDTAG_COMMENT && trigdata->tag != CMDTAG_SECURITY_LABEL)
	{
		List	   *users = relations_using_objects(classids, objids);

		foreach(lc, views)
		{
			ViewRecord *view = lfirst(lc);

			if (view_concerns(view, users))
				guard_repair(view, command,
							 psprintf("something its query uses changed (%s)", command));
		}
	}

	foreach(lc, refresh)
		guard_refresh_readers(views, lfirst_oid(lc), command);
	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		ListCell   *rc;

		foreach(rc, regenerated)
		{
			if (!view_plan_reads(view, lfirst_oid(rc)))
				continue;
			guard_repair(view, command,
						 psprintf("a generation expression of \"%s\" changed (%s)",
								  get_rel_name(lfirst_oid(rc)), command));
			break;
		}
	}

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (!list_member_oid(retyped, view->target))
			continue;
		guard_repair(view, command,
					 psprintf("a column of its target \"%s\" changed type, its values converted by the table rewrite (%s)",
							  get_rel_name(view->target), command));
	}

	/*
	 * The tables a full recompute reads, changed: an inheritance child of
	 * one came or went.  (Read again: a refresh above may have registered
	 * them already.)
	 */
	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		ViewRecord	current;

		if (view->path != DJ_PATH_FULL || !view_concerns(view, relids) ||
			!catalog_find_view(view->target, &current) || current.in_error ||
			!OidIsValid(current.query_view))
			continue;
		if (view_plan_sources_changed(&current, view_plan_load_to_fill(&current)))
			guard_repair(&current, command,
						 psprintf("the tables it reads changed (%s)", command));
	}
	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 *		sql_drop
 * ----------------------------------------------------------------
 */

Datum
dj_on_sql_drop(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	List	   *views;
	List	   *dropped = NIL;
	DropWatch  *w;
	MemoryContext caller = CurrentMemoryContext;
	ListCell   *lc;
	ListCell   *lc2;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "dj_on_sql_drop: not fired by an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;

	if ((views = guard_views()) == NIL)
		PG_RETURN_VOID();

	SPI_connect();
	if (catalog_exec("SELECT objid FROM pg_catalog.pg_event_trigger_dropped_objects() "
					 "WHERE objsubid OPERATOR(pg_catalog.=) 0 AND classid OPERATOR(pg_catalog.=) "
					 "  ANY (ARRAY['pg_catalog.pg_class', 'pg_catalog.pg_trigger', "
					 "  'pg_catalog.pg_rewrite']::pg_catalog.regclass[])",
					 0, NULL, NULL, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read the objects dropped");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			objid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1,
														   &isnull));
		MemoryContext spi = MemoryContextSwitchTo(caller);

		dropped = lappend_oid(dropped, objid);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();

	/* what ddl_command_start saw go: ddl_command_end refreshes or checks */
	w = drop_watch(false);
	MemoryContextSwitchTo(TopTransactionContext);
	forboth(lc, w->partitions, lc2, w->partition_sources)
	{
		if (list_member_oid(dropped, lfirst_oid(lc)))
			w->refresh = list_append_unique_oid(w->refresh, lfirst_oid(lc2));
	}
	forboth(lc, w->objects, lc2, w->object_relations)
	{
		if (list_member_oid(dropped, lfirst_oid(lc)))
			w->recheck = list_append_unique_oid(w->recheck, lfirst_oid(lc2));
	}
	MemoryContextSwitchTo(caller);

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (list_member_oid(dropped, view->target))
		{
			/* the table is gone, and with it the view */
			char	   *name = OidIsValid(view->query_view) ? get_rel_name(view->query_view) : NULL;

			if (name != NULL)
				ereport(NOTICE,
						(errmsg("delta view %s is dropped with its target", dj_message_name(name))));
			catalog_delete_view(view->view_id);
			if (OidIsValid(view->query_view) && !list_member_oid(dropped, view->query_view))
				query_drop(view->query_view);
			launcher_notify();
		}
		else if (OidIsValid(view->query_view) && list_member_oid(dropped, view->query_view) &&
				 catalog_managed_by(view->target) != NULL)
		{
			/*
			 * Citus dropped a source shard of a distributed view's shard
			 * group (moved away or split): the group's view goes with it,
			 * its target shard stays (Citus drops it too).
			 */
			catalog_delete_view(view->view_id);
			target_unguard(view->target);
			launcher_notify();
		}
		else if (OidIsValid(view->query_view) && list_member_oid(dropped, view->query_view))
		{
			catalog_forget_query_view(view->view_id);
			catalog_set_error(view,
							  &(ErrorData) {.message = psprintf("the view's query was dropped by %s (a source was dropped with CASCADE)",
																GetCommandTagName(trigdata->tag)),
											.hint = "Drop the view with delta_join.drop_view(): without its query it cannot be refreshed."},
							  true);
			launcher_notify();
		}
	}
	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 *		The target guard
 * ----------------------------------------------------------------
 */

/*
 * Statement trigger on every target (target_guard): only delta_join writes
 * a view's target, unless the view allows manual writes.
 */
Datum
dj_guard_target(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata;
	Oid			relid;
	ViewRecord	view;
	const char *op;

	if (!CALLED_AS_TRIGGER(fcinfo))
		elog(ERROR, "dj_guard_target: not fired by a trigger");
	trigdata = (TriggerData *) fcinfo->context;
	relid = RelationGetRelid(trigdata->tg_relation);
	if (target_filling(relid))
		return PointerGetDatum(NULL);

	if (!catalog_find_view(relid, &view) || view.options.manual_writes)
		return PointerGetDatum(NULL);

	if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		op = "insert into";
	else if (TRIGGER_FIRED_BY_UPDATE(trigdata->tg_event))
		op = "update";
	else if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		op = "delete from";
	else
		op = "truncate";
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot %s \"%s\": it is the target of a delta view",
					op, RelationGetRelationName(trigdata->tg_relation)),
			 errdetail("Only delta_join writes a view's target; its rows are the result of the view's query."),
			 errhint("Change the view's sources instead.  To write the target by hand (for example to purge logically deleted rows), create the view with options => '{\"manual_writes\": true}'.")));
	return PointerGetDatum(NULL);
}
