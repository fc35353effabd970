/*-------------------------------------------------------------------------
 *
 * target.c
 *	  Making the target of a view (its table, its key, the indexes the
 *	  appliers find rows by), filling it from the query (backfill and
 *	  refresh), and guarding it against writes by anyone else.
 *
 * What a target must be to hold a view's result is checked in the apply
 * layer (apply/target_shape.c), which this file calls down into; the
 * target's columns take the query's output columns, in order and by name.
 *
 * Filling runs the view's bound query (its query view) as one set-based
 * INSERT ... SELECT, as the target's owner with the view's pinned settings,
 * after SHARE locks on every source and partition, held until the end of
 * the transaction: no source change can commit between the fill and the
 * registration of the view (writers wait, as they do for CREATE INDEX).
 * A new target gets its key after the fill, as CREATE TABLE AS then ADD
 * PRIMARY KEY would: one sorted index build instead of row-by-row inserts
 * (a concurrent create too, after its fill: see concurrent.c).
 *
 * Lock order of the functions that change views (views.c), the one order
 * every path takes:
 *
 *	1. view_catalog, ShareUpdateExclusiveLock (self-exclusive: one view
 *	   change at a time per database; see views.c);
 *	2. the sources and their partitions, ShareLock, all or none
 *	   (target_lock_sources: a writer that holds one of them while waiting
 *	   for another can never wait for us);
 *	3. the target.
 *
 * The apply worker locks sources (AccessShareLock) and targets
 * (RowExclusiveLock) with a lock timeout and backs off when it expires, so
 * it never holds up these functions for long.
 *
 * IDENTIFICATION
 *	  src/ops/target.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "replication/origin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/plancache.h"
#include "utils/rls.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "apply/target_shape.h"
#include "base/delta_join.h"
#include "base/runas.h"
#include "base/progress.h"
#include "ops/target.h"

/* Writes into targets that the guard trigger lets through (target_fill) */
static Oid	target_filling_relid = InvalidOid;

/* the fillfactor of the targets create_view makes */
#define TARGET_FILLFACTOR	85

/* ----------------------------------------------------------------
 *		Making
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

	/*
	 * A result without a key (full recompute) is a multiset.  With the
	 * default replica identity and no primary key, PostgreSQL refuses to
	 * update or delete rows of a table that a publication publishes such
	 * changes of ("does not have a replica identity"): one made FOR ALL
	 * TABLES would have put the view in error.  Its old rows are logged
	 * whole instead.
	 */
	if (plan->key_ncolumns == 0)
		spi_run_once(psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", qualname));

	CommandCounterIncrement();
	return get_relname_relid(rv->relname, nspid);
}

/* Has the table a primary key (deferrable or not)? */
static bool
has_primary_key(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	bool		found = false;
	ListCell   *lc;

	foreach(lc, RelationGetIndexList(rel))
	{
		HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
		found |= ((Form_pg_index) GETSTRUCT(tuple))->indisprimary;
		ReleaseSysCache(tuple);
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Give a target made by target_create its key: the result's key as primary
 * key, or, when a key column can be NULL, as a unique constraint that treats
 * NULLs as equal (like GROUP BY does).  A primary key on other columns that
 * the target has already is kept (its owner made it while a concurrent
 * create had not yet made the key): the result's key is then a unique
 * constraint beside it.
 */
void
target_add_key(Oid relid, DeltaPlan *plan)
{
	bool		nullable_key;
	bool		other_pkey;

	/* a result without a key: see target_create */
	if (plan->key_ncolumns == 0)
		return;
	nullable_key = target_key_nullable(plan);
	other_pkey = has_primary_key(relid);
	spi_run_once(psprintf("ALTER TABLE %s ADD %s (%s)", target_qualified_name(relid),
						  nullable_key ? "UNIQUE NULLS NOT DISTINCT" :
						  other_pkey ? "UNIQUE" : "PRIMARY KEY",
						  target_key_column_list(plan)));

	/*
	 * Without a primary key on the result's key, a DELETE of the target logs
	 * no old row, or only other columns of it: a view that reads this target
	 * (a chain) needs its old rows whole.
	 */
	if (nullable_key || other_pkey)
		spi_run_once(psprintf("ALTER TABLE %s REPLICA IDENTITY FULL", target_qualified_name(relid)));
}

/*
 * Whichever of the key and the indexes apply finds the target's rows by the
 * target lacks, made after a fill: those of a target just made, and those
 * a concurrent create or refresh finds missing (the DDL guard does not ask
 * for them while a view is backfilling, see concurrent.c).
 */
void
target_make_indexes(Oid relid, DeltaPlan *plan)
{
	if (target_lacks_key(relid, plan))
		target_add_key(relid, plan);
	target_add_region_indexes(relid, plan);
}

/* The indexes target_add_region_indexes made on a target */
typedef struct AddedIndexes
{
	Oid			relid;
	List	   *done;			/* String of each one's column list */
} AddedIndexes;

/*
 * Create an index on these output columns unless one is there, or one in
 * *arg, the list of those made (target_foreach_lookup_columns)
 */
static void
add_index_on(DeltaPlan *plan, DeltaPlan *branch, int ncols, const int *cols, bool region,
			 void *arg)
{
	AddedIndexes *added = arg;
	char	   *names;

	if (target_has_index_on(added->relid, ncols, cols))
		return;
	names = target_column_names(plan, ncols, cols);
	if (list_member(added->done, makeString(names)))
		return;
	spi_run_once(psprintf("CREATE INDEX ON %s (%s)", target_qualified_name(added->relid), names));
	CommandCounterIncrement();
	added->done = lappend(added->done, makeString(names));
}

/*
 * The indexes by which apply finds a target's rows other than by its key
 * (writer_lookup_begin): in retract mode, by the key of each source that
 * drives changes; with outer joins, by the key of each anchor.  Those the
 * target lacks are created.
 */
void
target_add_region_indexes(Oid relid, DeltaPlan *plan)
{
	AddedIndexes added = {relid, NIL};

	target_foreach_lookup_columns(plan, add_index_on, &added);
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
	char	   *name;

	if (target_is_guarded(rel))
	{
		table_close(rel, NoLock);
		return;
	}

	/*
	 * A guard changed since (ALTER TABLE ... DISABLE TRIGGER) is put back;
	 * a trigger of the table's own that has its name is not replaced.
	 */
	for (int i = 0; rel->trigdesc != NULL && i < rel->trigdesc->numtriggers; i++)
	{
		Trigger    *trigger = &rel->trigdesc->triggers[i];

		if (strcmp(trigger->tgname, TARGET_GUARD_TRIGGER) == 0 &&
			trigger->tgfoid != target_guard_function())
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_OBJECT),
					 errmsg("table %s has a trigger named \"%s\", the name of the guard of a target",
							dj_message_name(target_qualified_name(relid)), TARGET_GUARD_TRIGGER),
					 errhint("Rename the trigger: ALTER TRIGGER %s ON %s RENAME TO ...;",
							 TARGET_GUARD_TRIGGER, target_qualified_name(relid))));
	}

	/*
	 * Created directly rather than by a statement: the DDL guard would check
	 * the view with the trigger not yet there.  As the bootstrap superuser,
	 * since the DDL guard also puts back the guard of a view whose target
	 * the caller may not own.
	 */
	stmt = makeNode(CreateTrigStmt);
	stmt->replace = true;
	stmt->trigname = TARGET_GUARD_TRIGGER;
	/* the name copied before the lookup, which may rebuild rel's entry */
	name = pstrdup(RelationGetRelationName(rel));
	stmt->relation = makeRangeVar(get_namespace_name(RelationGetNamespace(rel)), name, -1);
	stmt->funcname = list_make2(makeString(DJ_SCHEMA), makeString("_guard_target"));
	stmt->row = false;
	stmt->timing = TRIGGER_TYPE_BEFORE;
	stmt->events = TRIGGER_TYPE_INSERT | TRIGGER_TYPE_UPDATE | TRIGGER_TYPE_DELETE |
		TRIGGER_TYPE_TRUNCATE;
	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);
	(void) CreateTriggerFiringOn(stmt, "delta_join guard", relid, InvalidOid, InvalidOid,
								 InvalidOid, target_guard_function(), InvalidOid, NULL,
								 false, false, TRIGGER_FIRES_ALWAYS);
	runas_end(&runas);
	CommandCounterIncrement();
	table_close(rel, NoLock);
}

/* Remove the guard of a table that is no longer a target. */
void
target_unguard(Oid relid)
{
	spi_run_once(psprintf("DROP TRIGGER IF EXISTS " TARGET_GUARD_TRIGGER " ON %s",
						  target_qualified_name(relid)));
}

/* Is this backend filling this target (the guard lets that through)? */
bool
target_filling(Oid relid)
{
	return OidIsValid(relid) && relid == target_filling_relid;
}

/* ----------------------------------------------------------------
 *		Locking the sources of a fill
 * ----------------------------------------------------------------
 */

static int
compare_oid(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return (x > y) - (x < y);
}

/* The modes in which this transaction holds locks on the relation */
static LOCKMASK
modes_held(Oid relid)
{
	LOCKTAG		tag;
	LOCKMASK	held = 0;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	for (LOCKMODE mode = AccessShareLock; mode <= AccessExclusiveLock; mode++)
	{
		if (LockHeldByMe_compat(&tag, mode))
			held |= LOCKBIT_ON(mode);
	}
	return held;
}

/* Does one of the modes held keep writers out (SHARE or stronger)? */
static bool
keeps_writers_out(LOCKMASK held)
{
	return (held >> ShareLock) != 0;
}

/*
 * Does another process wait for a lock on the relation that conflicts with
 * one held in the modes held (so that it waits for our end)?
 */
static bool
waits_for_me(Oid relid, LOCKMASK held)
{
	LOCKTAG		tag;
	LockMethod	method;
	LockData   *locks;
	bool		found = false;

	if (held == 0)
		return false;
	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	method = GetLockTagsMethodTable(&tag);
	locks = GetLockStatusData();
	for (int i = 0; i < locks->nelements && !found; i++)
	{
		LockInstanceData *lock = &locks->locks[i];

		found = lock->pid != MyProcPid && lock->waitLockMode != NoLock &&
			lock->locktag.locktag_type == LOCKTAG_RELATION &&
			lock->locktag.locktag_field1 == MyDatabaseId &&
			lock->locktag.locktag_field2 == relid &&
			(method->conflictTab[lock->waitLockMode] & held) != 0;
	}
	return found;
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
		LOCKMASK	mine;
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
		 * (it holds back no writer that our lock did not already).  The
		 * same when DDL (DROP TABLE, TRUNCATE, ALTER TABLE) waits for the
		 * ACCESS SHARE lock that parsing the query took: it waits for our
		 * end, and the writers wait behind it.
		 */
		mine = modes_held(busy);
		if (keeps_writers_out(mine) || waits_for_me(busy, mine))
			LockRelationOid(busy, ShareLock);
		else
		{
			LockRelationOid(busy, ShareLock);
			UnlockRelationOid(busy, ShareLock);
		}
		CHECK_FOR_INTERRUPTS();
	}
}

/* ----------------------------------------------------------------
 *		Filling (create_view, refresh; concurrently: concurrent.c)
 * ----------------------------------------------------------------
 */

#define FILL_REPORT_ROWS	4096	/* rows between reports of progress */

/* Counts the rows an INSERT ... RETURNING writes, reporting progress */
typedef struct FillCounter
{
	DestReceiver pub;
	int			view_id;
	int64		rows;
} FillCounter;

static bool
fill_counter_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FillCounter *counter = (FillCounter *) self;

	if (++counter->rows % FILL_REPORT_ROWS == 0)
		progress_backfill_rows(counter->view_id, counter->rows);
	return true;
}

static void
fill_counter_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
fill_counter_shutdown(DestReceiver *self)
{
	FillCounter *counter = (FillCounter *) self;

	progress_backfill_rows(counter->view_id, counter->rows);
}

static void
fill_counter_destroy(DestReceiver *self)
{
}

/*
 * The planner's estimate of the rows of a query view, for progress; -1
 * when there is none.
 */
int64
target_estimate_rows(Oid query_view, Oid owner, Jsonb *settings)
{
	SPIPlanPtr	plan;
	CachedPlan *cplan;
	int64		rows = -1;
	RunAs		runas;

	runas_begin_view(owner, settings, &runas);
	SPI_connect();
	plan = SPI_prepare(psprintf("SELECT * FROM %s", target_qualified_name(query_view)),
					   0, NULL);
	if (plan != NULL && (cplan = SPI_plan_get_cached_plan(plan)) != NULL)
	{
		PlannedStmt *stmt = linitial_node(PlannedStmt, cplan->stmt_list);

		rows = (int64) stmt->planTree->plan_rows;
		ReleaseCachedPlan(cplan, NULL);
	}
	SPI_finish();
	runas_end(&runas);
	return rows;
}

/*
 * The origin to mark a fill's writes with (DJ_FILL_ORIGIN), so that the
 * apply worker does not decode them, or InvalidRepOriginId when something
 * may want them: a view or a SQL view that reads the target (a chain; or a
 * view a concurrent create's target got while the create waited: the
 * fill's lock makes any later one wait for its commit, and its own fill
 * see the rows), a publication that publishes it (a subscription with
 * origin = none would skip them), a session that replicates changes under
 * an origin of its own.  Or when the extension's scripts made no such
 * origin.
 */
static RepOriginId
fill_origin(Oid relid)
{
	bool		unread;
	bool		isnull;

	if (replorigin_session_origin != InvalidRepOriginId)
		return InvalidRepOriginId;
	SPI_connect();
	if (SPI_execute_with_args("SELECT NOT EXISTS (SELECT FROM pg_catalog.pg_depend "
							  "  WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_rewrite'::pg_catalog.regclass "
							  "    AND refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass "
							  "    AND refobjid OPERATOR(pg_catalog.=) $1) "
							  "AND NOT EXISTS (SELECT FROM pg_catalog.pg_publication WHERE puballtables) "
							  "AND NOT EXISTS (SELECT FROM pg_catalog.pg_publication_rel "
							  "  WHERE prrelid OPERATOR(pg_catalog.=) $1) "
							  "AND NOT EXISTS (SELECT FROM pg_catalog.pg_publication_namespace "
							  "  WHERE pnnspid OPERATOR(pg_catalog.=) $2)",
							  2, (Oid[]) {OIDOID, OIDOID},
							  (Datum[]) {ObjectIdGetDatum(relid),
				  ObjectIdGetDatum(get_rel_namespace(relid))},
							  NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not read the readers of target %u", relid);
	unread = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
										&isnull));
	SPI_finish();
	return unread ? replorigin_by_name(DJ_FILL_ORIGIN, true) : InvalidRepOriginId;
}

/*
 * Fill the target with the view's result, from its query view, after
 * deleting what it holds when `clear` is set; returns the number of rows
 * written.  The writes are marked with the fill origin when nothing else
 * reads the target (fill_origin).  With a counter, the rows are counted as
 * they are written and reported to delta_join.progress.  Runs as the
 * target's owner with the view's pinned settings.
 */
static uint64
fill(Oid relid, Oid query_view, Jsonb *settings, bool clear, FillCounter *counter)
{
	char	   *name = target_qualified_name(relid);
	char	   *select = target_qualified_name(query_view);
	uint64		rows;
	RunAs		runas;
	Oid			outer_filling;
	RepOriginId outer_origin = replorigin_session_origin;
	RepOriginId origin;

	/* refilling an existing target excludes the worker's writes to it */
	if (clear)
		LockRelationOid(relid, ExclusiveLock);
	origin = fill_origin(relid);

	runas_begin_view(runas_target_owner(relid), settings, &runas);

	/*
	 * The fill deletes and inserts through SQL as the owner, where policies
	 * forced on the owner would hide rows from the DELETE (they would stay
	 * beside the new ones) or refuse the new rows; the worker writes the
	 * target directly, and policies never reach it.
	 */
	if (check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security applies to target %s for its owner \"%s\"",
						dj_message_name(name), GetUserNameFromId(GetUserId(), false)),
				 errdetail("A target is filled by its owner, and policies would keep the fill from deleting or inserting some of its rows."),
				 errhint("Let the owner bypass row-level security on the target: ALTER TABLE %s NO FORCE ROW LEVEL SECURITY.",
						 name)));
	outer_filling = target_filling_relid;
	target_filling_relid = relid;
	PG_TRY();
	{
		/* the rows' WAL records only: the commit record has no origin */
		if (origin != InvalidRepOriginId)
			replorigin_session_origin = origin;
		SPI_connect();
		if (clear)
			spi_run(psprintf("DELETE FROM %s", name));
		if (counter == NULL)
		{
			spi_run(psprintf("INSERT INTO %s SELECT * FROM %s", name, select));
			rows = SPI_processed;
		}
		else
		{
			SPIExecuteOptions options;

			/* RETURNING only to count the rows as they are written */
			memset(&options, 0, sizeof(options));
			options.dest = &counter->pub;
			if (SPI_execute_extended(psprintf("INSERT INTO %s SELECT * FROM %s RETURNING 1",
											  name, select),
									 &options) < 0)
				elog(ERROR, "SPI_execute_extended failed");
			rows = (uint64) counter->rows;
		}
		replorigin_session_origin = outer_origin;
		SPI_finish();
	}
	PG_FINALLY();
	{
		target_filling_relid = outer_filling;
		replorigin_session_origin = outer_origin;
	}
	PG_END_TRY();
	runas_end(&runas);
	return rows;
}

/*
 * Fill the target with the view's result (fill).  The sources must be
 * locked (target_lock_sources).
 */
uint64
target_fill(Oid relid, Oid query_view, Jsonb *settings, bool clear)
{
	return fill(relid, query_view, settings, clear, NULL);
}

/*
 * Fill an empty target with the view's result, as target_fill does, but
 * with no lock on the sources beyond the query's ACCESS SHARE (the view is
 * 'backfilling': the worker holds back the changes that commit meanwhile),
 * reporting the rows written to delta_join.progress as it goes.
 */
uint64
target_fill_counted(Oid relid, Oid query_view, Jsonb *settings, int view_id)
{
	FillCounter counter;

	memset(&counter, 0, sizeof(counter));
	counter.pub.receiveSlot = fill_counter_receive;
	counter.pub.rStartup = fill_counter_startup;
	counter.pub.rShutdown = fill_counter_shutdown;
	counter.pub.rDestroy = fill_counter_destroy;
	counter.pub.mydest = DestNone;
	counter.view_id = view_id;
	return fill(relid, query_view, settings, false, &counter);
}
