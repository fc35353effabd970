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
 *					a child table inheriting from a source, a partition
 *					created without the replica identity the view needs, a
 *					target column added or changed ...  A partition attached
 *					to or detached from a source brings rows in or out
 *					without decodable changes: the views over it are
 *					refreshed in the same transaction.  A target renamed or
 *					given to another owner takes its query view along.
 *	ddl_command_start
 *					DETACH PARTITION CONCURRENTLY of a source is refused (it
 *					commits in two steps, so no refresh can follow it in
 *					the same transaction); the parents of partitions about
 *					to be dropped are noted, so that ddl_command_end
 *					refreshes their views.
 *	sql_drop		a dropped target unregisters its view; a dropped query
 *					view (DROP TABLE source CASCADE) puts its view in error;
 *					a dropped index or constraint has every view checked
 *					again.
 *
 * The target guard (dj_guard_target) is the statement trigger target.c puts
 * on every target: it refuses INSERT, UPDATE, DELETE, TRUNCATE and COPY by
 * anyone but delta_join, unless the view's option manual_writes allows them.
 *
 * These functions run as the role that ran the command; catalog statements
 * run as the bootstrap superuser (catalog.c), refreshes as the target's
 * owner (target.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
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
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "api.h"
#include "catalog.h"
#include "launcher.h"
#include "query.h"
#include "target.h"
#include "worker.h"

PG_FUNCTION_INFO_V1(dj_on_ddl_start);
PG_FUNCTION_INFO_V1(dj_on_ddl_end);
PG_FUNCTION_INFO_V1(dj_on_sql_drop);
PG_FUNCTION_INFO_V1(dj_guard_target);

/*
 * Relations whose partitions the command in progress drops, noted at
 * ddl_command_start for ddl_command_end (TopTransactionContext, valid in
 * the transaction guard_lxid names).
 */
static List *dropping_partitions_of = NIL;
static LocalTransactionId guard_lxid = InvalidLocalTransactionId;

/* ----------------------------------------------------------------
 *		Helpers
 * ----------------------------------------------------------------
 */

/* The views of the database, or NIL when delta_join is not (yet) there */
static List *
guard_views(void)
{
	if (creating_extension || !OidIsValid(worker_catalog_relid("view_catalog")))
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

	worker_slot_name(slot, MyDatabaseId);
	return SearchNamedReplicationSlot(slot, true) != NULL;
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
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			parent = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
															SPI_tuptable->tupdesc, 1,
															&isnull));
		MemoryContext spi = MemoryContextSwitchTo(caller);

		result = lappend_oid(result, parent);
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	return result;
}

static bool
view_reads(ViewRecord *view, Oid relid)
{
	ListCell   *lc;

	foreach(lc, view->sources)
	{
		if (((SourceRecord *) lfirst(lc))->relid == relid)
			return true;
	}
	return false;
}

/* Does the view read or write relid, or relid belong to a table it reads? */
static bool
view_concerns(ViewRecord *view, List *relids)
{
	ListCell   *lc;

	foreach(lc, relids)
	{
		Oid			relid = lfirst_oid(lc);

		if (relid == view->target || relid == view->query_view || view_reads(view, relid))
			return true;
	}
	return false;
}

/*
 * Check a view as the worker would before applying it; refuse the command
 * that made it fail, naming the view.
 */
static void
guard_check_view(ViewRecord *view, const char *command)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	PG_TRY();
	{
		DeltaPlan  *plan = catalog_view_plan(view);

		target_validate(view->target, plan);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(edata->sqlerrcode),
				 errmsg("cannot run %s: delta view \"%s\" would no longer be correct",
						command, catalog_view_name(view)),
				 errdetail("%s", edata->message),
				 errhint("Drop the view with delta_join.drop_view() first, or leave the table as it is.")));
	}
	PG_END_TRY();
}

/* Refresh the views reading relid, after rows came or went without changes. */
static void
guard_refresh_readers(List *views, Oid relid, const char *why)
{
	ListCell   *lc;

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (view->in_error || !view_reads(view, relid))
			continue;
		ereport(NOTICE,
				(errmsg("delta view \"%s\" is refreshed because %s",
						catalog_view_name(view), why)));
		(void) api_refresh_view(view);
	}
}

/* ----------------------------------------------------------------
 *		ddl_command_start
 * ----------------------------------------------------------------
 */

Datum
dj_on_ddl_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	List	   *views;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "dj_on_ddl_start: not fired by an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;

	if (IsA(trigdata->parsetree, AlterTableStmt))
	{
		AlterTableStmt *stmt = (AlterTableStmt *) trigdata->parsetree;

		foreach(lc, stmt->cmds)
		{
			AlterTableCmd *cmd = lfirst(lc);
			Oid			relid;
			ListCell   *lc2;

			if (cmd->subtype != AT_DetachPartition ||
				!((PartitionCmd *) cmd->def)->concurrent)
				continue;
			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
			if (!OidIsValid(relid) || !guard_views_live() || (views = guard_views()) == NIL)
				continue;
			foreach(lc2, views)
			{
				ViewRecord *view = lfirst(lc2);

				if (view_concerns(view, self_and_ancestors(relid)))
					ereport(ERROR,
							(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
							 errmsg("cannot detach a partition of \"%s\" concurrently: delta view \"%s\" reads it",
									get_rel_name(relid), catalog_view_name(view)),
							 errdetail("The rows of the partition leave the view's source without changes that can be decoded, so the view must be refreshed in the same transaction."),
							 errhint("Use DETACH PARTITION without CONCURRENTLY.")));
			}
		}
	}
	else if (IsA(trigdata->parsetree, DropStmt) &&
			 ((DropStmt *) trigdata->parsetree)->removeType == OBJECT_TABLE)
	{
		DropStmt   *stmt = (DropStmt *) trigdata->parsetree;

		if (MyProc->lxid != guard_lxid)
		{
			dropping_partitions_of = NIL;
			guard_lxid = MyProc->lxid;
		}
		foreach(lc, stmt->objects)
		{
			RangeVar   *rv = makeRangeVarFromNameList((List *) lfirst(lc));
			Oid			relid = RangeVarGetRelid(rv, NoLock, true);
			MemoryContext oldcxt;

			if (!OidIsValid(relid) || !get_rel_relispartition(relid))
				continue;
			oldcxt = MemoryContextSwitchTo(TopTransactionContext);
			dropping_partitions_of = list_concat(dropping_partitions_of,
												 get_partition_ancestors(relid));
			MemoryContextSwitchTo(oldcxt);
		}
	}
	PG_RETURN_VOID();
}

/* ----------------------------------------------------------------
 *		ddl_command_end
 * ----------------------------------------------------------------
 */

/* The tables the command's collected commands touched (indexes: their table) */
static List *
touched_relations(void)
{
	List	   *relids = NIL;
	MemoryContext caller = CurrentMemoryContext;

	SPI_connect();
	if (SPI_execute("SELECT objid FROM pg_catalog.pg_event_trigger_ddl_commands() "
					"WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the commands of the event");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1,
														   &isnull));
		MemoryContext spi = MemoryContextSwitchTo(caller);

		if (get_rel_relkind(relid) == RELKIND_INDEX ||
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

			if (cmd->subtype != AT_AttachPartition &&
				cmd->subtype != AT_DetachPartition &&
				cmd->subtype != AT_DetachPartitionFinalize)
				continue;
			relid = RangeVarGetRelid(stmt->relation, NoLock, true);
			if (OidIsValid(relid))
				refresh = list_concat_unique_oid(refresh, self_and_ancestors(relid));
		}
	}
	if (MyProc->lxid == guard_lxid && dropping_partitions_of != NIL)
	{
		refresh = list_concat_unique_oid(refresh, dropping_partitions_of);
		dropping_partitions_of = NIL;
	}

	foreach(lc, touched_relations())
		relids = list_concat_unique_oid(relids, self_and_ancestors(lfirst_oid(lc)));
	relids = list_concat_unique_oid(relids, refresh);

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (view->in_error || !OidIsValid(view->query_view) || !view_concerns(view, relids))
			continue;
		if (list_member_oid(relids, view->target))
			query_follow_target(view->query_view, view->target);
		if (live)
			guard_check_view(view, command);
	}

	if (!live)
		PG_RETURN_VOID();
	foreach(lc, refresh)
		guard_refresh_readers(views, lfirst_oid(lc),
							  psprintf("the partitions of \"%s\" changed (%s)",
									   get_rel_name(lfirst_oid(lc)), command));
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
	bool		recheck = false;
	MemoryContext caller = CurrentMemoryContext;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "dj_on_sql_drop: not fired by an event trigger");
	trigdata = (EventTriggerData *) fcinfo->context;

	if ((views = guard_views()) == NIL)
		PG_RETURN_VOID();

	SPI_connect();
	if (SPI_execute("SELECT objid, object_type FROM pg_catalog.pg_event_trigger_dropped_objects() "
					"WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
					"  AND objsubid OPERATOR(pg_catalog.=) 0 "
					"   OR classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_constraint'::pg_catalog.regclass",
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the objects dropped");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Oid			objid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
														   SPI_tuptable->tupdesc, 1,
														   &isnull));
		char	   *type = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
		MemoryContext spi = MemoryContextSwitchTo(caller);

		dropped = lappend_oid(dropped, objid);
		if (strcmp(type, "index") == 0 || strstr(type, "constraint") != NULL)
			recheck = true;
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();

	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);

		if (list_member_oid(dropped, view->target))
		{
			/* the table is gone, and with it the view */
			catalog_delete_view(view->view_id);
			if (OidIsValid(view->query_view) && !list_member_oid(dropped, view->query_view) &&
				get_rel_relkind(view->query_view) == RELKIND_VIEW)
			{
				ObjectAddress object;

				ObjectAddressSet(object, RelationRelationId, view->query_view);
				performDeletion(&object, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
			}
			worker_notify();
		}
		else if (OidIsValid(view->query_view) && list_member_oid(dropped, view->query_view))
		{
			catalog_forget_query_view(view->view_id);
			catalog_set_error(view->view_id,
							  psprintf("the view's query was dropped by %s (a source was dropped with CASCADE)",
									   GetCommandTagName(trigdata->tag)));
			worker_notify();
		}
		else if (recheck && !view->in_error && OidIsValid(view->query_view) &&
				 guard_views_live())
			guard_check_view(view, GetCommandTagName(trigdata->tag));
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
	if (target_filling())
		return PointerGetDatum(NULL);

	relid = RelationGetRelid(trigdata->tg_relation);
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
