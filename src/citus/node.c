/*-------------------------------------------------------------------------
 *
 * node.c
 *	  What each Citus node does for the distributed views: make the view of
 *	  each shard group it holds, refresh them, drop them, and wait for
 *	  them, as the definitions (citus/definition.c) and the placements say.
 *
 * A shard view is the ordinary view of one shard group on one node: the
 * definition's query over the group's shards of the sources, writing into
 * the group's shard of the distributed target.  It is "managed"
 * (view_catalog.managed_by names its distributed view): drop_view refuses
 * it on the node.  Every node does this, the coordinator too when it holds
 * shards.  How the shard views follow:
 *
 *	- the row trigger on the node's copy of the definitions
 *	  (node_on_definition), in the coordinator's transaction: a definition
 *	  inserted (create_view) makes the views of the node's shard groups, one
 *	  updated (refresh) refreshes them and makes missing ones, one deleted
 *	  (drop_view) drops them, keeping their targets;
 *	- the apply worker, once a second (node_sync, through the hooks
 *	  node_init gives the worker): a shard group moved in (a shard move, a
 *	  rebalance onto a new node, a split) gets its view, which backfills the
 *	  group's target shard from the moved sources; one moved away, or whose
 *	  definition is gone, loses its view.  On the coordinator the worker
 *	  also has nodes that joined sync themselves (a new node has no slot,
 *	  hence no worker, until told) and deletes the definitions whose target
 *	  is gone.  A source shard that Citus drops takes its view along
 *	  (face/guard.c).
 *	- the coordinator's create_view and wait() (citus/distributed.c), over
 *	  run_command_on_all_nodes: _prepare_node makes the database's slot
 *	  and keeps it (with its worker) while no shard group is here yet,
 *	  _sync_node runs the sync, _wait_node waits for this node's views.
 *
 * Locking: the trigger takes the view lock (ops_lock_views), in the
 * coordinator's transaction; the sync only if it is free, and reads the
 * definitions only if nobody keeps them locked, so that it never waits for
 * a transaction that waits for it (a wait() on the coordinator, say).  The
 * shard views are made, refreshed and dropped by the view operations
 * (ops/views.c), and run as their targets' owners; _sync_node and
 * _wait_node act as the bootstrap superuser, whoever asked.  Each
 * definition is synced in a guarded subtransaction (run.c): one that fails
 * does not hold the others back.
 *
 * IDENTIFICATION
 *	  src/citus/node.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "analysis/query.h"
#include "base/options.h"
#include "base/shmem.h"
#include "citus/definition.h"
#include "citus/distributed.h"
#include "citus/node.h"
#include "citus/run.h"
#include "citus/shard_query.h"
#include "ops/concurrent.h"
#include "ops/views.h"
#include "process/launcher.h"
#include "process/worker.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"

/* ----------------------------------------------------------------
 *		Shard views
 * ----------------------------------------------------------------
 */

/*
 * The query of one shard group's view: the definition's query, parsed under
 * its search_path (which the caller has set), with each distributed table
 * replaced by its shard in the group (the shard with the same hash range),
 * and its options.
 */
static Query *
shard_view_query(Definition *def, Oid target_shard, const char *minvalue, List **hints,
				 DeltaOptions *options)
{
	Query	   *query;
	List	   *relids = NIL;
	List	   *shards = NIL;
	ListCell   *lc;

	options_resolve(options, def->strategy, def->options);
	query = query_parse(def->query, hints);

	/* the names must still name what they named at creation */
	if (def->sources != NIL)
	{
		List	   *now = shard_query_relation_names(shard_query_relations(query));
		ListCell   *lc1;
		ListCell   *lc2;
		bool		same = list_length(now) == list_length(def->sources);

		forboth(lc1, now, lc2, def->sources)
			same &= (strcmp(lfirst(lc1), lfirst(lc2)) == 0);
		if (!same)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the query of distributed view %s now reads other tables than when it was made",
							dj_message_name(def->target)),
					 errhint("Drop the view and create it again.")));
	}

	foreach(lc, shard_query_relations(query))
	{
		Oid			relid = lfirst_oid(lc);
		Oid			shard;

		if (citus_table_kind(relid) == NULL)
			continue;
		shard = citus_group_shard(relid, minvalue);
		if (!OidIsValid(shard))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("distributed view %s: the shard of %s co-located with %s is not on this node",
							dj_message_name(def->target), get_rel_name(relid),
							get_rel_name(target_shard))));
		relids = lappend_oid(relids, relid);
		shards = lappend_oid(shards, shard);
	}
	shard_query_map(query, relids, shards);
	return query;
}

/*
 * Create the view of one shard group, into the group's shard of the
 * target, which it fills.
 */
static void
create_shard_view(Definition *def, Oid target_shard, const char *minvalue)
{
	int			nestlevel = NewGUCNestLevel();
	Query	   *query;
	List	   *hints;
	DeltaOptions options;

	(void) set_config_option("search_path", def->search_path, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	query = shard_view_query(def, target_shard, minvalue, &hints, &options);
	(void) ops_create_view(ops_relation_name(target_shard), query, hints, &options,
						   def->settings, true, def->target);
	AtEOXact_GUC(true, nestlevel);
}

/*
 * Bring this node's shard views of one definition in line with the shard
 * groups it holds: create the missing ones, and refresh the others if
 * asked.
 */
static void
sync_definition(Definition *def, bool refresh)
{
	Oid			logical = definition_relid(def->target);
	int			colocation;
	char	   *distcol;
	List	   *shards;
	List	   *minvalues;
	ListCell   *lc1;
	ListCell   *lc2;

	if (!OidIsValid(logical) || !citus_distribution(logical, &colocation, &distcol))
		return;					/* (gone, or no longer hash-distributed) */
	shards = citus_local_shards(logical, &minvalues);
	forboth(lc1, shards, lc2, minvalues)
	{
		Oid			shard = lfirst_oid(lc1);
		ViewRecord	view;

		if (!OidIsValid(shard))
			continue;			/* a placement being made by a move */
		if (catalog_find_view(shard, &view))
		{
			if (refresh)
				(void) ops_refresh_view(&view, false);
			continue;
		}

		/*
		 * Found by its name, unlocked: lock it as making its view will, and
		 * make sure it is still there (Citus drops and makes shards again).
		 */
		LockRelationOid(shard, ExclusiveLock);
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(shard)))
			create_shard_view(def, shard, lfirst(lc2));
	}
}

/* This node's shard views: (ViewRecord *, shard id as text) of each */
static List *
local_shard_views(List **shardids)
{
	List	   *result = NIL;
	ListCell   *lc;

	*shardids = NIL;
	foreach(lc, catalog_list_views())
	{
		ViewRecord *view = lfirst(lc);
		Oid			logical = citus_shard_of(view->target);
		char	   *name;

		/* (a target Citus dropped since the views were read has no name) */
		if (!OidIsValid(logical) || (name = get_rel_name(view->target)) == NULL)
			continue;
		result = lappend(result, view);
		*shardids = lappend(*shardids, pstrdup(strrchr(name, '_') + 1));
	}
	return result;
}

/*
 * Drop a shard view, keeping its target.  The view was read without a lock,
 * and Citus drops the shards of a group that moved or split away whenever
 * its cleanup runs, taking the view along (face/guard.c): the target is
 * locked first, in the mode unguarding it takes (DROP TRIGGER), and the
 * view and its target looked up again, so that what is dropped is what is
 * there.
 */
static void
drop_shard_view(ViewRecord *view)
{
	ViewRecord	current;

	LockRelationOid(view->target, AccessExclusiveLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(view->target)) ||
		!catalog_find_view(view->target, &current) ||
		current.view_id != view->view_id)
		return;
	ops_drop_view(&current, false);
}

/*
 * Drop this node's shard views, keeping their targets: those of the
 * definition def_target (the trigger, when it is deleted), or, with
 * def_target NULL, those whose definition is not in live_targets or whose
 * shard group moved away (the sync).
 */
static void
drop_shard_views(const char *def_target, List *live_targets)
{
	List	   *shardids;
	List	   *views = local_shard_views(&shardids);
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, views, lc2, shardids)
	{
		ViewRecord *view = lfirst(lc1);
		char	   *managed_by = catalog_managed_by(view->target);
		bool		live = false;
		ListCell   *lc3;

		if (managed_by == NULL)
			continue;			/* a view a user made over shards */
		if (def_target != NULL)
		{
			if (strcmp(managed_by, def_target) == 0)
				drop_shard_view(view);
			continue;
		}
		foreach(lc3, live_targets)
			live |= (strcmp(managed_by, lfirst(lc3)) == 0);
		if (!live || !citus_placement_is_local(pg_strtoint64(lfirst(lc2))))
			drop_shard_view(view);
	}
}

/* ----------------------------------------------------------------
 *		The trigger on the definitions
 * ----------------------------------------------------------------
 */

/*
 * The row trigger on this node's copy of the definitions (AFTER INSERT,
 * UPDATE or DELETE, called by face/sql_citus.c): see the banner.
 */
void
node_on_definition(TriggerData *trigdata)
{
	TupleDesc	desc = RelationGetDescr(trigdata->tg_relation);
	Definition *def;

	/* only a node's copy holds rows: Citus never writes into the shell */
	if (citus_table_kind(RelationGetRelid(trigdata->tg_relation)) != NULL)
		return;

	def = definition_from_tuple(trigdata->tg_trigtuple, desc);
	definition_check_writer(def, TRIGGER_FIRED_BY_DELETE(trigdata->tg_event));
	ops_lock_views();
	if (TRIGGER_FIRED_BY_DELETE(trigdata->tg_event))
		drop_shard_views(def->target, NIL);
	else if (TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
	{
		/* (created concurrently: each node makes its views in step 2) */
		if (!def->backfilling)
			sync_definition(def, false);
	}
	else
	{
		Definition *new_def = definition_from_tuple(trigdata->tg_newtuple, desc);

		definition_check_writer(new_def, false);
		definition_check_unchanged(def, new_def);

		/*
		 * The end of a concurrent create (step 3) makes only the views of
		 * groups that moved here meanwhile; a refresh refreshes them all,
		 * and rebuilds what a concurrent create left unfinished.
		 */
		if (!new_def->backfilling)
			sync_definition(new_def, !(def->backfilling && !new_def->refreshed));
	}
}

/* ----------------------------------------------------------------
 *		The sync
 * ----------------------------------------------------------------
 */

/*
 * On a coordinator, the apply worker makes every node that joined since it
 * last looked sync itself: a new node has no slot, hence no worker, until
 * told (run_command_on_workers: the coordinator's own views are this
 * worker's).  Until every node listed did, it asks again next round: a node
 * just added may not have delta_join yet (citus_add_node makes it there in
 * a transaction not yet committed), or Citus's cached list of nodes may not
 * have it yet; either way it was never told.
 */
static void
sync_new_nodes(void)
{
	static char *known_nodes = NULL;
	char	   *nodes = citus_worker_nodes_text();

	if (nodes != NULL && (known_nodes == NULL || strcmp(nodes, known_nodes) != 0))
	{
		Oid			types[1] = {TEXTOID};
		Datum		values[1] = {CStringGetTextDatum("SELECT delta_join._sync_node()")};
		int64		listed = 1;
		int64		told = 0;
		bool		isnull;

		for (const char *c = nodes; *c != '\0'; c++)
			listed += (*c == ',');
		SPI_connect();
		if (run_statement("SELECT pg_catalog.count(*) FILTER (WHERE success) "
						  "FROM pg_catalog.run_command_on_workers($1)",
						  1, types, values) == 1)
			told = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											   1, &isnull));
		SPI_finish();
		if (told < listed)
			return;
		if (known_nodes != NULL)
			pfree(known_nodes);
		known_nodes = MemoryContextStrdup(TopMemoryContext, nodes);
	}
}

/* Make this node's missing views of one distributed view (its target's name) */
static void
sync_target(void *arg)
{
	Oid			relid = definition_relid((char *) arg);
	Definition *def = OidIsValid(relid) ? definition_of(relid) : NULL;

	/* (one being created concurrently: its create makes the views) */
	if (def != NULL && !def->backfilling)
		sync_definition(def, false);
}

/*
 * Bring every shard view of this node in line with the definitions and the
 * placements it holds (the apply worker, once a second; _sync_node()), in
 * the caller's transaction.
 */
void
node_sync(void)
{
	static TimestampTz last_warning = 0;
	List	   *targets;
	ListCell   *lc;
	bool		loud;

	if (!definition_exists(true))
		return;
	launcher_ensure_slot();

	/*
	 * A transaction that changes views holds the lock, perhaps the very one
	 * whose wait() asked for this sync over another connection: never wait
	 * for it (the next round will do; wait() then finds a group without its
	 * view and returns false).
	 */
	if (!ops_try_lock_views())
		return;
	targets = definition_targets();

	if (AmBackgroundWorkerProcess() && citus_local_group() == 0)
	{
		sync_new_nodes();
		definition_delete_orphans();
	}
	drop_shard_views(NULL, targets);

	/*
	 * Each view on its own: one that fails does not hold the others back.
	 * The worker logs the failures of a round at most once a minute (a view
	 * whose names no longer resolve fails every round).
	 */
	loud = AmBackgroundWorkerProcess() &&
		TimestampDifferenceExceeds(last_warning, GetCurrentTimestamp(), 60 * 1000);
	foreach(lc, targets)
	{
		if (!run_guarded(sync_target, lfirst(lc),
						 loud ? psprintf("could not make the views of distributed view %s on this node",
										 dj_message_name(lfirst(lc))) : NULL) && loud)
			last_warning = GetCurrentTimestamp();
	}
}

static void
sync_guarded(void *arg)
{
	node_sync();
}

/*
 * _sync_node(): node_sync, for the coordinator's wait() and its worker,
 * as the bootstrap superuser: the views are brought in line with the
 * definitions their owners wrote and run as their targets' owners, whoever
 * asked.
 */
void
node_sync_asked(void)
{
	Oid			save_userid;
	int			save_sec_context;

	shmem_set_distributed(MyDatabaseId);

	/* (in a transaction block it would keep the view lock: leave it to the worker) */
	if (IsTransactionBlock())
		return;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	/* (a failure, say a deadlock with Citus dropping a moved shard, is the next round's) */
	run_guarded(sync_guarded, NULL, "could not update the views of this node's shard groups");
	SetUserIdAndSecContext(save_userid, save_sec_context);
}

/*
 * _prepare_node(): make this database's slot, and keep it (with its worker)
 * while no shard group is here yet: the coordinator calls it on every node
 * before its first write of a distributed view.  On the coordinator, make
 * the definitions a reference table.
 */
void
node_prepare(void)
{
	/*
	 * Making the slot waits for the transactions that have written here;
	 * one of them may be the coordinator's own, which waits for us.
	 */
	(void) set_config_option("lock_timeout", "10s", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_LOCAL, true, 0, false);
	launcher_ensure_slot();
	shmem_set_distributed(MyDatabaseId);
	if (citus_local_group() == 0)
		definition_distribute();
}

/*
 * _wait_node(): wait for this node's shard views of one distributed view
 * (target, its definition's name; all if NULL); false when one of its
 * shard groups here has no view, or a wait timed out.  For the
 * coordinator's wait().
 */
bool
node_wait(const char *target, int64 timeout_ms)
{
	List	   *shardids;
	List	   *views = local_shard_views(&shardids);
	List	   *names = NIL;
	List	   *relids = NIL;
	bool		done = true;
	ListCell   *lc;
	Oid			save_userid;
	int			save_sec_context;

	if (!definition_exists(true))
		return false;			/* (locked by someone, or gone) */

	/*
	 * Waiting shows nothing of a view: the coordinator's wait() waits for
	 * all, including those in schemas its caller cannot use.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	foreach(lc, views)
	{
		ViewRecord *view = lfirst(lc);
		char	   *managed_by = catalog_managed_by(view->target);

		if (managed_by != NULL && (target == NULL || strcmp(managed_by, target) == 0))
			names = lappend(names, catalog_view_name(view));
	}

	/* every shard group here has its view */
	if (target != NULL)
		relids = list_make1_oid(definition_relid(target));
	else
	{
		foreach(lc, definition_targets())
			relids = lappend_oid(relids, definition_relid(lfirst(lc)));
	}
	if (citus_local_placement_count(relids) > list_length(names))
		done = false;

	foreach(lc, names)
	{
		Oid			types[2] = {TEXTOID, INTERVALOID};
		Datum		values[2];
		bool		isnull;

		if (!done)
			break;
		values[0] = CStringGetTextDatum(lfirst(lc));
		values[1] = DirectFunctionCall3(interval_in,
										CStringGetDatum(psprintf("%lld ms", (long long) Max(timeout_ms, 0))),
										ObjectIdGetDatum(InvalidOid), Int32GetDatum(-1));
		SPI_connect();
		if (run_statement("SELECT delta_join.wait($1, $2)", 2, types, values) != 1)
			done = false;
		else
		{
			Datum		waited = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
											   1, &isnull);

			done = !isnull && DatumGetBool(waited);
		}
		SPI_finish();
	}
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return done;
}

/* ----------------------------------------------------------------
 *		Concurrent create and refresh (the coordinator's create_view and
 *		refresh with concurrently => true, citus/distributed.c)
 * ----------------------------------------------------------------
 */

/*
 * The definition of distributed view target, for a concurrent operation on
 * its shard views here; an error if it is gone, or (backfilling) if it is
 * no longer, or (!backfilling) still, being created concurrently.
 */
static Definition *
concurrent_definition(const char *target, bool backfilling, Oid *logical)
{
	Definition *def;

	*logical = definition_relid(target);
	def = OidIsValid(*logical) ? definition_of(*logical) : NULL;
	if (def == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("%s is not a distributed delta view", dj_message_name(target))));
	if (def->backfilling != backfilling)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg(backfilling ? "distributed view %s is no longer being created" :
						"distributed view %s is being created concurrently", dj_message_name(target)),
				 backfilling ? 0 :
				 errhint("Wait for its create_view to end, or, if it ended without finishing, refresh the view without concurrently.")));
	return def;
}

/*
 * The query of a shard group's view, for its concurrent create here
 * (ops/concurrent.c, step 1): that of distributed view managed_by over the
 * group of shard target, with its options and settings.  Its names are
 * read under the definition's search_path, this process's from now on:
 * the process runs the one create.
 */
static Query *
concurrent_shard_query(const char *managed_by, const char *target, List **hints,
					   DeltaOptions *options, Jsonb **settings)
{
	Oid			logical;
	Definition *def = concurrent_definition(managed_by, true, &logical);
	Oid			target_shard = definition_relid(target);
	List	   *minvalues;
	List	   *shards = citus_local_shards(logical, &minvalues);
	const char *minvalue = NULL;
	ListCell   *lc1;
	ListCell   *lc2;

	forboth(lc1, shards, lc2, minvalues)
	{
		if (lfirst_oid(lc1) == target_shard)
			minvalue = lfirst(lc2);
	}
	if (minvalue == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distributed view %s: shard %s is no longer on this node",
						dj_message_name(managed_by), target)));
	SetConfigOption("search_path", def->search_path, PGC_USERSET, PGC_S_SESSION);
	*settings = def->settings;
	return shard_view_query(def, target_shard, minvalue, hints, options);
}

/*
 * _backfill_node(target): this node's part of a concurrent create of
 * distributed view target (the coordinator's step 2): the view of each
 * shard group it holds, created concurrently, one group after the other.
 * Returns the rows written.
 */
int64
node_backfill(const char *target)
{
	Oid			logical;
	Definition *def = concurrent_definition(target, true, &logical);
	List	   *minvalues;
	int64		rows = 0;
	ListCell   *lc;

	foreach(lc, citus_local_shards(logical, &minvalues))
	{
		Oid			shard = lfirst_oid(lc);
		ViewRecord	view;

		/* (a placement being made by a move; a group done by an earlier call) */
		if (OidIsValid(shard) && !catalog_find_view(shard, &view))
			rows += ops_create_shard_view_concurrently(ops_relation_name(shard), def->target);
	}
	return rows;
}

/*
 * _refresh_node_concurrently(target): refresh this node's shard views of
 * distributed view target concurrently, one after the other.  Returns the
 * rows written or deleted.
 */
int64
node_refresh_concurrently(const char *target)
{
	Oid			logical;
	List	   *shardids;
	int64		rows = 0;
	ListCell   *lc;

	(void) concurrent_definition(target, false, &logical);
	foreach(lc, local_shard_views(&shardids))
	{
		ViewRecord *view = lfirst(lc);
		char	   *managed_by = catalog_managed_by(view->target);

		if (managed_by != NULL && strcmp(managed_by, target) == 0)
			rows += (int64) ops_refresh_view_concurrently(catalog_view_name(view));
	}
	return rows;
}

/* ----------------------------------------------------------------
 *		What the apply worker asks of this layer (worker.h, WorkerCitus)
 * ----------------------------------------------------------------
 */

/* Does this node keep definitions of distributed views?  Never waits. */
static bool
worker_node_defined(void)
{
	return definition_exists(true);
}

static void
sync_in_snapshot(void *arg)
{
	PushActiveSnapshot(GetTransactionSnapshot());
	node_sync();
	PopActiveSnapshot();
}

/*
 * Bring the views of the shard groups this node holds in line with the
 * distributed views and the placements: a group moved here gets its view,
 * one moved away loses it.  In a transaction of its own; a failure is
 * logged and tried again at the next round.
 */
static void
worker_node_sync(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	run_guarded(sync_in_snapshot, NULL,
				"could not update the views of this node's shard groups");
	CommitTransactionCommand();
	MemoryContextSwitchTo(oldcxt);
}

/* Offer the apply workers what they ask of distributed views (_PG_init) */
void
node_init(void)
{
	worker_citus.defined = worker_node_defined;
	worker_citus.sync = worker_node_sync;
	concurrent_citus.shard_view_query = concurrent_shard_query;
	concurrent_citus.create_distributed = distributed_create_steps;
	concurrent_citus.undo_distributed = distributed_create_undo;
}
