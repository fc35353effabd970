/*-------------------------------------------------------------------------
 *
 * distributed.c
 *	  The coordinator-wide operations on distributed views: create_view,
 *	  explain(), drop_view, refresh and wait() of a view over co-located
 *	  distributed tables of Citus (DESIGN.md section 8).
 *
 * Tables distributed and co-located by the join key keep every join inside
 * one shard group, so a distributed view is one ordinary delta view per
 * shard group, on the node that holds it, reading the group's shards of the
 * sources and writing into the group's shard of a distributed target
 * co-located with them.  The layer's files, each with its job:
 *
 *	distributed.c	these operations, on the coordinator (face/sql_views.c
 *					and face/status.c send them here)
 *	eligibility.c	whether a query can be a distributed view, and its target
 *	definition.c	the definitions (delta_join.distributed_catalog), a
 *					reference table every node holds, and what DDL may do to
 *					what they name
 *	node.c			what each node does: its shard views made, refreshed,
 *					dropped and waited for, as the definitions and the
 *					placements say
 *	shard_query.c	a definition's query: what it reads, and its form over
 *					one shard group
 *	run.c			statements run as the caller, guarded subtransactions
 *
 * and every read of Citus's catalog is registry/citus_tables.c's.  Citus is
 * driven through its SQL functions, so delta_join needs neither its headers
 * nor its library.
 *
 * Each operation here changes the definitions, never a shard view: the
 * row trigger on every node's copy of the definitions makes the node's
 * shard views follow, in the caller's transaction (two-phase, over one
 * connection per node).  An operation returns "not a distributed view"
 * (false, -1) off a coordinator or for a target that has no definition, and
 * the caller goes on with the operations on one node's views (ops/views.c).
 * They run as the caller, who must own the target; the functions run on
 * the nodes run as the owner of Citus.  Lock order, as for the views of one
 * node: every node's slot first, then the view lock, one change to the
 * views at a time.
 *
 * IDENTIFICATION
 *	  src/citus/distributed.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "analysis/query.h"
#include "base/compat.h"
#include "base/runas.h"
#include "citus/definition.h"
#include "citus/distributed.h"
#include "citus/eligibility.h"
#include "citus/run.h"
#include "citus/shard_query.h"
#include "ops/concurrent.h"
#include "ops/target.h"
#include "ops/views.h"
#include "process/launcher.h"
#include "registry/catalog.h"
#include "registry/citus_tables.h"

/* Does the query read a Citus table? */
static bool
reads_citus_table(const char *text)
{
	Query	   *query;
	List	   *hints;
	ListCell   *lc;

	query = query_parse(text, &hints);
	foreach(lc, shard_query_relations(query))
	{
		if (citus_table_kind(lfirst_oid(lc)) != NULL)
			return true;
	}
	return false;
}

/* distributed_wanted's question, asked by run_rolled_back */
typedef struct WantedQuery
{
	const char *text;
	bool		wanted;
} WantedQuery;

static void
read_wanted(void *arg)
{
	WantedQuery *query = arg;

	query->wanted = reads_citus_table(query->text);
}

/*
 * Should create_view make a distributed view of this query?  Yes on a
 * Citus coordinator when the query reads a Citus table; everywhere else the
 * ordinary path refuses Citus tables, naming the coordinator.
 *
 * The query is parsed in a subtransaction that is rolled back, whatever
 * the answer (run_rolled_back): the caller's transaction keeps none of the
 * locks parsing takes (on the sources and Citus's catalogs).  A concurrent
 * create runs in a process of its own, while its caller waits: a lock its
 * caller kept on a source would hold a DDL on that source back until the
 * create ends, and every writer queued behind the DDL.
 */
bool
distributed_wanted(const char *text)
{
	WantedQuery wanted = {text, false};

	if (citus_local_group() != 0)
		return false;
	run_rolled_back(read_wanted, &wanted);
	return wanted.wanted;
}

/*
 * Run one of our internal functions on every node (Citus's
 * run_command_on_all_nodes, each in its own transaction); an error on a
 * node is raised here, naming it.  Returns the nodes' results, as text.
 *
 * They run as the owner of Citus, the role its own maintenance connects to
 * the nodes as, and not as the caller: the functions are not executable by
 * PUBLIC (_prepare_node makes a node's slot and keeps it without views).
 * Restricted as catalog statements are (runas.c): nothing the caller
 * defined runs with those rights.
 */
static List *
run_on_nodes(const char *sql)
{
	Oid			types[1] = {TEXTOID};
	Datum		values[1] = {CStringGetTextDatum(sql)};
	List	   *results = NIL;
	MemoryContext cxt = CurrentMemoryContext;
	Oid			owner = citus_extension_owner();
	RunAs		runas;
	uint64		n;

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("distributed delta views need Citus")));
	runas_begin(owner, NULL, &runas);
	SPI_connect();
	n = run_statement("SELECT nodeid, success, result FROM pg_catalog.run_command_on_all_nodes($1)",
					  1, types, values);
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *result = SPI_getvalue(tuple, desc, 3);
		bool		isnull;
		MemoryContext spi;

		if (!DatumGetBool(SPI_getbinval(tuple, desc, 2, &isnull)) || isnull)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("delta_join failed on Citus node %s: %s", SPI_getvalue(tuple, desc, 1),
							result ? result : "(no message)"),
					 errhint("See that node's server log.")));
		spi = MemoryContextSwitchTo(cxt);
		results = lappend(results, pstrdup(result ? result : ""));
		MemoryContextSwitchTo(spi);
	}
	SPI_finish();
	runas_end(&runas);
	return results;
}

/*
 * The schemas the caller's search_path names now, quoted and listed: what
 * the query's names were read under, with "$user" resolved (the nodes may
 * read it again as another role).
 */
static char *
resolved_search_path(void)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, fetch_search_path(false))
	{
		char	   *name = get_namespace_name(lfirst_oid(lc));

		if (name != NULL)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", quote_identifier(name));
	}
	return buf.len > 0 ? buf.data : pstrdup("pg_catalog");
}

/*
 * Check that the query runs inside each shard group, make the target
 * (distributed and co-located with the sources) or check it, and record
 * the definition: every node creates the views of the shard groups it
 * holds in this transaction, or, backfilling, leaves them to the
 * concurrent create's step 2.  *created: the target was made.
 */
static Oid
register_definition(const char *target, const char *text, const char *strategy,
					Jsonb *options_json, DeltaOptions *options, bool backfilling,
					bool *created)
{
	Query	   *query;
	List	   *hints;
	ShardGroupPlan sgp;
	RangeVar   *rv;
	Oid			relid;
	Definition	def;

	if (GetTopTransactionIdIfAny() != InvalidTransactionId || citus_transaction_started())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("cannot create a distributed delta view in a transaction that has already written or used distributed tables"),
				 errdetail("Every node's replication slot is made first, and making one waits for the transactions that have written there, this one included."),
				 errhint("Create the view at the start of its own transaction.")));

	/* every node's slot, before anything is written anywhere */
	launcher_ensure_slot();
	(void) run_on_nodes("SELECT delta_join._prepare_node()");
	ops_lock_views();

	/*
	 * One connection per node for the rest of the transaction: the node's
	 * trigger that makes the shard views must see the target's shards and
	 * metadata, which Citus would otherwise write over other connections.
	 */
	(void) set_config_option("citus.multi_shard_modify_mode", "sequential", PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);

	query = query_parse(text, &hints);
	memset(&def, 0, sizeof(def));
	def.sources = shard_query_relation_names(shard_query_relations(query));
	eligibility_plan(query, hints, options, &sgp);

	rv = makeRangeVarFromNameList(stringToQualifiedNameList_compat(target));
	relid = RangeVarGetRelid(rv, NoLock, true);
	*created = !OidIsValid(relid);
	if (!*created)
		eligibility_check_target(relid, target, &sgp);
	else
	{
		Oid			types[3] = {OIDOID, TEXTOID, TEXTOID};
		Datum		values[3];

		relid = target_create(rv, sgp.plan);
		target_add_key(relid, sgp.plan);
		values[0] = ObjectIdGetDatum(relid);
		values[1] = CStringGetTextDatum(sgp.plan->colnames[sgp.column]);
		values[2] = CStringGetTextDatum(ops_relation_name(sgp.anchor));
		SPI_connect();
		(void) run_statement("SELECT pg_catalog.create_distributed_table($1, $2, colocate_with => $3)",
							 3, types, values);
		SPI_finish();
	}

	def.target = ops_relation_name(relid);
	def.query = (char *) text;
	def.strategy = (char *) strategy;
	def.options = options_json;
	def.search_path = resolved_search_path();
	def.settings = runas_capture_settings();
	def.backfilling = backfilling;
	definition_insert(&def);
	return relid;
}

/*
 * create_view on a coordinator over distributed tables, in the caller's
 * transaction: the definition makes every node create and fill the views
 * of the shard groups it holds.
 */
Oid
distributed_create_view(const char *target, const char *text, const char *strategy,
						Jsonb *options_json, DeltaOptions *options)
{
	bool		created;

	return register_definition(target, text, strategy, options_json, options, false,
							   &created);
}

/*
 * create_view(..., concurrently => true) on a coordinator, over
 * distributed tables: the steps, which ops/concurrent.c runs in its
 * process (after the caller's checks), each in a transaction of its own:
 *
 *	1. register: the target made or checked, and the definition written as
 *	   backfilling, which no node makes views of meanwhile (node.c);
 *	2. every node creates the view of each shard group it holds
 *	   concurrently, as create_view(..., concurrently => true) does on one
 *	   server (_backfill_node, node.c): the writers of the shards wait for
 *	   none of it;
 *	3. the definition is no longer backfilling: a node makes, blocking, the
 *	   views of groups that moved to it since step 2 (a shard move during
 *	   the create).
 *
 * A failure undoes step 1 (distributed_create_undo), unless a drop_view()
 * or DROP took the view away meanwhile.  From step 1 on, the process holds
 * the create's lock for its session, which tells refresh() whether the
 * create still runs.
 */
static struct
{
	char	   *target;			/* registered: the definition's name */
	Oid			relid;			/* and its target */
	bool		created;		/* step 1 made the target */
} backfill;

/*
 * The create's lock: an object lock on (the definitions' table, target),
 * not a lock on the target itself, which a drop_view() or a DROP of the
 * target would then wait for, while the nodes' processes of the create
 * wait for that drop's transaction to end (a deadlock across nodes that
 * no detector sees).  In a transaction (it looks the table up).
 */
static void
create_lock_tag(Oid relid, LOCKTAG *tag)
{
	SET_LOCKTAG_OBJECT(*tag, MyDatabaseId, catalog_relid("distributed_catalog"), relid, 0);
}

/*
 * The steps that write run in a transaction block, as between BEGIN and
 * COMMIT: Citus then writes this node's placements from this process
 * (local execution), as it does in create_view's caller, so that the
 * trigger on the local copy of the definitions sees the target made in
 * the same transaction.  Outside a block it would reach this node over a
 * connection of its own (and refuse the DROP of a target, whose event
 * trigger reads the definitions, as a nested distributed query).
 */
static void
begin_block(void)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	BeginTransactionBlock();
	CommitTransactionCommand();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
}

static void
end_block(void)
{
	PopActiveSnapshot();
	CommitTransactionCommand();
	StartTransactionCommand();
	if (!EndTransactionBlock(false))
		elog(ERROR, "could not commit the registration of a distributed view");
	CommitTransactionCommand();
}

Oid
distributed_create_steps(const char *target, const char *text, const char *strategy,
						 Jsonb *options_json, DeltaOptions *options)
{
	Oid			relid;
	bool		created;
	char	   *node_sql;
	LOCKTAG		lock;

	/* 1. register */
	begin_block();
	relid = register_definition(target, text, strategy, options_json, options, true,
								&created);
	create_lock_tag(relid, &lock);
	(void) LockAcquire(&lock, ExclusiveLock, true, false);
	backfill.target = MemoryContextStrdup(TopMemoryContext, ops_relation_name(relid));
	backfill.relid = relid;
	backfill.created = created;
	node_sql = psprintf("SELECT delta_join._backfill_node(%s)",
						quote_literal_cstr(backfill.target));
	end_block();

	/* 2. every node fills its shard groups */
	concurrent_begin_step();
	(void) run_on_nodes(node_sql);
	concurrent_end_step();

	/* 3. done, unless a drop_view or DROP took the view away meanwhile */
	begin_block();
	ops_lock_views();
	if (definition_of(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distributed view %s was dropped during its concurrent create",
						dj_message_name(backfill.target))));
	definition_end_backfill(backfill.target);
	end_block();
	LockRelease(&lock, ExclusiveLock, true);
	backfill.target = NULL;
	return relid;
}

/*
 * Empty the existing target of a failed create, guarded: a failure (a
 * foreign key that references it, say) leaves its rows, and the definition
 * deleted all the same.
 */
static void
empty_target(void *arg)
{
	run_command(psprintf("TRUNCATE %s", ops_relation_name(*(Oid *) arg)));
}

/*
 * After a failure of distributed_create_steps, in a new transaction: the
 * definition deleted (each node drops the views it made, keeping their
 * targets) and the target dropped if step 1 made it, or else emptied: step
 * 1 found it empty, and the groups filled before the failure (each node
 * commits each group's fill) would leave it holding part of the query's
 * result, which a new create_view into it refuses.  Only while the
 * definition registered in step 1 is still there, being created: a
 * drop_view() during the create has removed it already, and kept the
 * target if told to (drop_table => false), or dropped it, and then a table
 * of that name may be another one.
 */
void
distributed_create_undo(void)
{
	Definition *def;

	if (backfill.target == NULL)
		return;
	begin_block();
	ops_lock_views();
	if (definition_relid(backfill.target) == backfill.relid &&
		(def = definition_of(backfill.relid)) != NULL && def->backfilling)
	{
		definition_delete(backfill.target);
		if (backfill.created)
			run_command(psprintf("DROP TABLE %s", ops_relation_name(backfill.relid)));
		else
			(void) run_guarded(empty_target, &backfill.relid,
							   psprintf("could not empty target %s after its failed create",
										dj_message_name(backfill.target)));
	}
	end_block();
}

/*
 * explain() on a coordinator, of a query over Citus tables: how each shard
 * group's view would be maintained, after what distributing it takes (or
 * why it cannot be).
 */
List *
distributed_explain(const char *text, DeltaOptions *options)
{
	List	   *hints;
	Query	   *query = query_parse(text, &hints);
	List	   *lines;
	MemoryContext cxt = CurrentMemoryContext;
	char	   *first;

	lines = eligibility_explain(query, hints, options);
	PG_TRY();
	{
		ShardGroupPlan sgp;

		eligibility_plan(copyObject(query), hints, options, &sgp);
		first = psprintf("Distributed: one view per shard group (%d groups of tables co-located with %s), on the node that holds it; the target is distributed by column %s",
						 citus_shard_count(sgp.anchor), get_rel_name(sgp.anchor),
						 sgp.plan->colnames[sgp.column]);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		first = psprintf("Distributed: refused: %s%s%s", edata->message,
						 edata->hint ? " HINT: " : "", edata->hint ? edata->hint : "");
	}
	PG_END_TRY();
	return lcons(first, lines);
}

/*
 * drop_view on a coordinator, of a distributed view: delete its definition
 * (every node drops its shard views, keeping their targets), then drop the
 * distributed target, or keep it.  False when target is no distributed view.
 */
bool
distributed_drop_view(const char *target, bool drop_table)
{
	Oid			relid;
	Definition *def;

	if (citus_local_group() != 0)
		return false;

	/* changes to distributed views are made one at a time, as on one node */
	ops_lock_views();
	relid = definition_relid(target);
	if (!OidIsValid(relid))
		return definition_drop_orphan(target);
	if ((def = definition_of(relid)) == NULL)
		return false;
	ops_check_owner(relid);

	definition_delete(def->target);
	if (drop_table)
		run_command(psprintf("DROP TABLE %s", def->target));
	return true;
}

/*
 * A refresh waits for no concurrent create of its view: refused while one
 * runs (it holds the create's lock, distributed_create_steps), and, when
 * one ended without finishing, left to a blocking refresh, which rebuilds
 * each node's views.  The test takes the lock in SHARE mode, which only
 * the create's conflicts with: another refresh that took it is no create.
 */
static void
check_create_ended(Definition *def, Oid relid, bool concurrently)
{
	LOCKTAG		lock;

	if (!def->backfilling)
		return;
	create_lock_tag(relid, &lock);
	if (LockAcquire(&lock, ShareLock, false, true) == LOCKACQUIRE_NOT_AVAIL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("distributed view %s is being created concurrently",
						dj_message_name(def->target)),
				 errhint("Wait for its create_view to end.")));
	if (concurrently)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the concurrent create of distributed view %s ended without finishing",
						dj_message_name(def->target)),
				 errhint("Rebuild it with delta_join.refresh() without concurrently, or drop it.")));
}

/*
 * refresh on a coordinator, of a distributed view: touch its definition,
 * which makes every node refresh its shard views (and create missing ones)
 * in this transaction.  Returns the rows of the target, or -1 when target
 * is no distributed view.
 */
int64
distributed_refresh(const char *target)
{
	Oid			relid;
	Definition *def;
	int64		rows;
	bool		isnull;

	if (citus_local_group() != 0)
		return -1;
	relid = definition_relid(target);
	if (!OidIsValid(relid) || (def = definition_of(relid)) == NULL)
		return -1;
	ops_check_owner(relid);
	check_create_ended(def, relid, false);
	ops_lock_views();
	definition_touch(def->target);
	SPI_connect();
	(void) run_statement(psprintf("SELECT pg_catalog.count(*) FROM %s", def->target), 0, NULL, NULL);
	rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_finish();
	return rows;
}

/*
 * refresh(target, concurrently => true) on a coordinator, of a distributed
 * view: every node refreshes its shard views concurrently, the writers of
 * the shards waiting for none of it.  Returns the rows written or deleted,
 * or -1 when target is no distributed view.
 */
int64
distributed_refresh_concurrently(const char *target)
{
	Oid			relid;
	Definition *def;
	int64		rows = 0;
	ListCell   *lc;

	if (citus_local_group() != 0)
		return -1;
	relid = definition_relid(target);
	if (!OidIsValid(relid) || (def = definition_of(relid)) == NULL)
		return -1;
	concurrent_check_caller("delta_join.refresh(target, concurrently => true)");
	ops_check_owner(relid);
	check_create_ended(def, relid, true);
	foreach(lc, run_on_nodes(psprintf("SELECT delta_join._refresh_node_concurrently(%s)",
									  quote_literal_cstr(def->target))))
		rows += pg_strtoint64(lfirst(lc));
	return rows;
}

/*
 * wait() on a coordinator, for a distributed view (or, target NULL, all of
 * them): every node first makes the views of the shard groups it holds and
 * has none for, then waits for them.  Returns 1 when every shard group has
 * applied the changes committed before the call, 0 if not, -1 when target
 * is no distributed view.
 */
int
distributed_wait(const char *target, int64 timeout_ms)
{
	char	   *name = NULL;
	TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													   Min(timeout_ms, INT64CONST(1000000000000)));
	ListCell   *lc;

	if (citus_local_group() != 0)
		return -1;

	/* not behind someone who keeps the definitions locked: until the deadline */
	while (!definition_try_lock())
	{
		if (GetCurrentTimestamp() >= deadline)
			return 0;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
	if (target != NULL)
	{
		Oid			relid = definition_relid(target);
		Definition *def;

		if (!OidIsValid(relid) || (def = definition_of(relid)) == NULL)
			return -1;
		name = def->target;
	}
	else if (!definition_exists(true))
		return -1;

	/*
	 * A group moving has no view for a moment on either node: sync and
	 * wait again, until the deadline.
	 */
	for (;;)
	{
		bool		done = true;
		char	   *placements = citus_placements_text();

		(void) run_on_nodes("SELECT delta_join._sync_node()");
		foreach(lc, run_on_nodes(psprintf("SELECT delta_join._wait_node(%s, %lld)",
										  name ? quote_literal_cstr(name) : "NULL",
										  (long long) Max(TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline), 0))))
			done &= (strcmp(lfirst(lc), "t") == 0);

		/* a group that moved meanwhile may have been waited for nowhere */
		if (done && strcmp(placements, citus_placements_text()) == 0)
			return 1;
		if (GetCurrentTimestamp() >= deadline)
			return 0;
		CHECK_FOR_INTERRUPTS();
		pg_usleep(100 * 1000L);
	}
}
