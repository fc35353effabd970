/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  The differences between the PostgreSQL majors delta_join supports (15,
 *	  17 and 18; 16 is not tested): every other file calls the one spelling
 *	  given here, and no other file tests PG_VERSION_NUM.
 *
 * Where a later major renamed a function or moved a field and the old form
 * is gone, the newest spelling is used everywhere and defined here for the
 * older majors.  Where a function kept its name but changed its arguments,
 * the call is written name_compat(...) with 15's arguments; the new
 * arguments are filled in here with the value that keeps 15's behaviour.
 * Helpers named compat_* do what differs in more than spelling -- the
 * permission model and the outer-join-aware Vars of 16, the grouping RTE of
 * 18 -- with their bodies in compat.c.  (16 also adds
 * -Wshadow=compatible-local to an extension's build, and 18
 * -Wunterminated-string-initialization: the code is written to pass both.)
 *
 * The differences, by the major that introduced them:
 *
 *	16	The varlena macros moved from postgres.h to varatt.h (included
 *		here).
 *		Permission checks moved from RangeTblEntry (requiredPerms,
 *		checkAsUser, selectedCols) to RTEPermissionInfo in
 *		Query.rteperminfos: ExecCheckRTPerms became ExecCheckPermissions,
 *		ExecInitRangeTable takes the permission infos, a subquery pulled up
 *		brings its own (CombineRangeTables), and a view's rule no longer
 *		starts with the OLD and NEW placeholders -- the view's own check
 *		stays with its range-table entry, which the rewriter turns into the
 *		subquery while keeping the view's OID (compat_* below).
 *		pg_class_ownercheck() and pg_database_ownercheck() became
 *		object_ownercheck(RelationRelationId / DatabaseRelationId).
 *		stringToQualifiedNameList() takes an error context (NULL: throw).
 *		flatten_join_alias_vars() takes the PlannerInfo (NULL outside the
 *		planner).
 *		EvalPlanQualInit() takes the result relations (NIL: none).
 *		A Var names the outer joins that can null it (varnullingrels): the
 *		quals delta_join adds to a query get them (compat_set_nullingrels).
 *	17	PGPROC.lxid became PGPROC.vxid.lxid (MyProc_lxid_compat).
 *		ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION replaces a generated
 *		column's expression (AT_SetExpression_compat).
 *		PGPROC.pgprocno is gone: a process's number is MyProcNumber
 *		(MyProcNumber_compat).
 *		IsBackgroundWorker became AmBackgroundWorkerProcess().
 *		ReplicationSlotCreate() takes failover and synced (false: neither).
 *		ReorderBufferChange tuples became plain HeapTuples (DJ_CHANGE_TUPLE).
 *		LockHeldByMe() takes orstronger (false: that mode exactly, as on 15).
 *	18	ExecutorRun() lost execute_once.
 *		index_beginscan() takes instrumentation (NULL: none).
 *		ExecInitRangeTable() takes the relations left after pruning.
 *		ReplicationSlotAcquire() takes error_if_invalid (false: the caller
 *		checks restart_lsn itself, as on 15).
 *		ReplaceVarsFromTargetList() takes the result relation (0: a SELECT).
 *		RelationGetPrimaryKeyIndex() takes deferrable_ok (false: only an
 *		immediate primary key, the only kind 15 returns).
 *		ExecCheckIndexConstraints() takes the TID of a row to ignore (NULL:
 *		none, as on 15).
 *		heap_copy_minimal_tuple() takes the room to leave before the copy
 *		(0: none, as on 15).
 *		A query with GROUP BY reads its grouping expressions through Vars of
 *		an RTE_GROUP entry: compat_flatten_grouping() gives the analysis
 *		15's shape back.
 *		A slot left idle longer than idle_replication_slot_timeout is
 *		invalidated with its restart_lsn kept, so that an invalidated slot
 *		is no longer told by restart_lsn alone (compat_slot_invalidation();
 *		16 started recording the cause in ReplicationSlot.data.invalidated).
 *		A NOT NULL constraint may be NOT VALID, attnotnull set while older
 *		rows hold NULLs: compat_column_not_null() reads the constraint's
 *		validity (CompactAttribute.attnullability).
 *		A generated column is VIRTUAL unless declared STORED: the heap holds
 *		NULL for it, and neither decoding nor a fetched tuple carries its
 *		value (compat_column_is_virtual()).
 *
 * Macros only need the headers the calling file already includes for the
 * function it calls.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_COMPAT_H
#define DJ_COMPAT_H

#if PG_VERSION_NUM < 150000 || PG_VERSION_NUM >= 190000
#error "delta_join supports PostgreSQL 15 to 18"
#endif

struct Bitmapset;
struct EState;
struct Node;
struct Query;
struct RangeTblEntry;
struct TupleDescData;

/* ---- 16 ---- */

#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#define stringToQualifiedNameList_compat(string) \
	stringToQualifiedNameList((string), NULL)
#define EvalPlanQualInit_compat(epqstate, parentestate, subplan, auxrowmarks, epqParam) \
	EvalPlanQualInit((epqstate), (parentestate), (subplan), (auxrowmarks), (epqParam), NIL)
#else
#include "catalog/pg_database.h"
#define stringToQualifiedNameList_compat(string) \
	stringToQualifiedNameList(string)
#define EvalPlanQualInit_compat(epqstate, parentestate, subplan, auxrowmarks, epqParam) \
	EvalPlanQualInit((epqstate), (parentestate), (subplan), (auxrowmarks), (epqParam))
#define object_ownercheck(classid, objectid, roleid) \
	((classid) == DatabaseRelationId ? \
	 pg_database_ownercheck((objectid), (roleid)) : \
	 (AssertMacro((classid) == RelationRelationId), \
	  pg_class_ownercheck((objectid), (roleid))))
#endif

extern struct Node *flatten_join_alias_vars_compat(struct Query *query, struct Node *node);

/* ExecCheckPermissions / ExecCheckRTPerms on a query's own range table */
extern bool compat_check_permissions(struct Query *query, bool ereport_on_violation);

/* The first relation of a query's own range table it may not read, or InvalidOid */
extern Oid	compat_relation_denied(struct Query *query, Oid *role);

/* An executor state whose range table is rte alone (permissions not checked) */
extern void compat_init_range_table(struct EState *estate, struct RangeTblEntry *rte);

/* Turn a view's range-table entry into its rule's query, as the rewriter does */
extern void compat_view_to_subquery(struct RangeTblEntry *rte, struct Query *view_query);

/* Append sub's range table (and permission infos) to query's */
extern void compat_append_range_table(struct Query *query, struct Query *sub);

/* Does rte stand for a relation the query reads, table or inlined view? */
extern bool compat_rte_reads_relation(struct RangeTblEntry *rte);

/* The columns the permission check of relation entry rte of query covers */
extern struct Bitmapset **compat_rte_selected_cols(struct Query *query, struct RangeTblEntry *rte);

/* Point relation entry rte of query (and its permission check) at relid */
extern void compat_rte_set_relid(struct Query *query, struct RangeTblEntry *rte, Oid relid);

/* Drop the OLD and NEW placeholders of a view rule's query, where it has them */
extern void compat_drop_view_placeholders(struct Query *query, Oid view);

/* Vars name the outer joins that can null them, as the planner of 16 needs */
extern void compat_set_nullingrels(struct Query *query);

/* ---- 17 ---- */

#if PG_VERSION_NUM >= 170000
#define MyProc_lxid_compat	(MyProc->vxid.lxid)
#define MyProcNumber_compat	(MyProcNumber)
#define ReplicationSlotCreate_compat(name, db_specific, persistency, two_phase) \
	ReplicationSlotCreate((name), (db_specific), (persistency), (two_phase), false, false)
#define LockHeldByMe_compat(locktag, lockmode) \
	LockHeldByMe((locktag), (lockmode), false)
/* ReorderBufferChange tuples became plain HeapTuples */
#define DJ_CHANGE_TUPLE(t)	(t)
#else
#define MyProc_lxid_compat	(MyProc->lxid)
#define MyProcNumber_compat	(MyProc->pgprocno)
#define ReplicationSlotCreate_compat(name, db_specific, persistency, two_phase) \
	ReplicationSlotCreate((name), (db_specific), (persistency), (two_phase))
#define LockHeldByMe_compat(locktag, lockmode) \
	LockHeldByMe((locktag), (lockmode))
#define DJ_CHANGE_TUPLE(t)	(&(t)->tuple)
#define AmBackgroundWorkerProcess() (IsBackgroundWorker)
#endif

/* ---- 18 ---- */

/* Grouping Vars replaced by the grouping expressions, RTE_GROUP dropped */
extern void compat_flatten_grouping(struct Query *query);
/* the grouping expression a Var of the RTE_GROUP entry reads (18) */
extern struct Node *compat_grouped_expr(struct Query *query, struct Node *node);

/*
 * Is column attno of a relation (its relcache descriptor) declared NOT NULL
 * by a valid constraint?  From 18 a NOT NULL constraint may be NOT VALID:
 * attnotnull is set, yet rows from before it may hold NULLs.
 */
extern bool compat_column_not_null(struct TupleDescData *desc, int attno);

/*
 * Why the replication slot this process holds was invalidated, as the end
 * of a sentence ("because it retained too much WAL ..."), or NULL while it
 * can decode.
 */
extern const char *compat_slot_invalidation(void);

/*
 * Is column attno of relation relid a virtual generated column?  From 18
 * its value is computed by the queries that read it, and stored nowhere.
 */
extern bool compat_column_is_virtual(Oid relid, int attno);

/*
 * ALTER TABLE ... ALTER COLUMN ... SET EXPRESSION (17); on 15 no subcommand
 * has this type.
 */
#if PG_VERSION_NUM >= 170000
#define AT_SetExpression_compat AT_SetExpression
#else
#define AT_SetExpression_compat ((AlterTableType) -1)
#endif

#if PG_VERSION_NUM >= 180000
#define ExecutorRun_compat(queryDesc, direction, count, execute_once) \
	ExecutorRun((queryDesc), (direction), (count))
#define index_beginscan_compat(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), (norderbys))
#define ReplicationSlotAcquire_compat(name, nowait) \
	ReplicationSlotAcquire((name), (nowait), false)
#define ReplaceVarsFromTargetList_compat(node, target_varno, sublevels_up, target_rte, \
										 targetlist, nomatch_option, nomatch_varno, \
										 outer_hasSubLinks) \
	ReplaceVarsFromTargetList((node), (target_varno), (sublevels_up), (target_rte), \
							  (targetlist), 0, (nomatch_option), (nomatch_varno), \
							  (outer_hasSubLinks))
#define RelationGetPrimaryKeyIndex_compat(relation) \
	RelationGetPrimaryKeyIndex((relation), false)
#define ExecCheckIndexConstraints_compat(rri, slot, estate, conflictTid, arbiterIndexes) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflictTid), NULL, (arbiterIndexes))
#define heap_copy_minimal_tuple_compat(mtup) \
	heap_copy_minimal_tuple((mtup), 0)
#else
#define ExecutorRun_compat(queryDesc, direction, count, execute_once) \
	ExecutorRun((queryDesc), (direction), (count), (execute_once))
#define index_beginscan_compat(heap, index, snapshot, nkeys, norderbys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), (norderbys))
#define ReplicationSlotAcquire_compat(name, nowait) \
	ReplicationSlotAcquire((name), (nowait))
#define ReplaceVarsFromTargetList_compat(node, target_varno, sublevels_up, target_rte, \
										 targetlist, nomatch_option, nomatch_varno, \
										 outer_hasSubLinks) \
	ReplaceVarsFromTargetList((node), (target_varno), (sublevels_up), (target_rte), \
							  (targetlist), (nomatch_option), (nomatch_varno), \
							  (outer_hasSubLinks))
#define RelationGetPrimaryKeyIndex_compat(relation) \
	RelationGetPrimaryKeyIndex(relation)
#define ExecCheckIndexConstraints_compat(rri, slot, estate, conflictTid, arbiterIndexes) \
	ExecCheckIndexConstraints((rri), (slot), (estate), (conflictTid), (arbiterIndexes))
#define heap_copy_minimal_tuple_compat(mtup) \
	heap_copy_minimal_tuple(mtup)
#endif

#endif							/* DJ_COMPAT_H */
