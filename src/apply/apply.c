/*-------------------------------------------------------------------------
 *
 * apply.c
 *	  Applying one view's batch by its delta plan: the checks every apply
 *	  makes, then the applier the plan calls for, writing through a
 *	  TargetWriter.
 *
 * apply_view.c calls apply_view_batch() for each piece of a view's work,
 * inside the view's subtransaction, as the target's owner with the view's
 * pinned settings (runas.c).  The plan comes from the plan cache
 * (plan_cache.c); the rights the query needs are checked at every apply
 * (apply_check_access), since a privilege revoked or a policy enabled does
 * not make a plan stale.  Then:
 *
 *	apply_join.c	inner joins in upsert mode, and in retract mode where
 *					a slice is the rows of the key walked from;
 *	apply_outer.c	outer joins, keyed recompute, a UNION ALL branch or a
 *					TRUNCATE in retract mode: region queries (recompute.c);
 *	apply_agg.c		aggregates: each changed group recomputed;
 *	apply_full.c	full recompute, and an aggregate without GROUP BY: the
 *					whole query, its difference written.
 *
 * IDENTIFICATION
 *	  src/apply/apply.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_partitioned_table.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_range.h"
#include "catalog/pg_statistic_ext.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "storage/sinval.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "analysis/query.h"
#include "apply/apply.h"
#include "apply/apply_error.h"
#include "apply/plan_cache.h"
#include "apply/target_shape.h"
#include "base/compat.h"

/* ----------------------------------------------------------------
 *		What every apply checks
 * ----------------------------------------------------------------
 */

/*
 * What the check of the code a view runs found of another role's: a
 * function, and what reached it (an operator, a domain, a range type), or
 * an operator or a domain of another role
 */
typedef struct ForeignCode
{
	Oid			funcid;			/* a function, or InvalidOid */
	Oid			oper;			/* an operator (or the one using funcid) */
	Oid			type;			/* a domain, or a domain or range type using
								 * funcid */
	Oid			table;			/* a table whose definition calls funcid */
	Oid			owner;			/* the role of the one found */
	List	   *expanding;		/* the views whose queries are looked at */
	List	   *views;			/* every view looked at (and locked) */
} ForeignCode;

static bool foreign_code_walker(Node *node, ForeignCode *found);

/*
 * Is code of owner trusted by the current user: a superuser's, its own, or
 * of a role whose rights it has?  A superuser has every role's rights, but
 * trusts only the roles it is a member of: what other roles' code a view
 * runs, they may change, and it would run as a superuser.
 */
static bool
acts_for(Oid owner)
{
	Oid			user = GetUserId();

	if (owner == user || superuser_arg(owner))
		return true;
	return superuser_arg(user) ? is_member_of_role_nosuper(user, owner) :
		has_privs_of_role(user, owner);
}

/* check_functions_in_node callback: a user-defined function the role does not act for */
static bool
foreign_function(Oid funcid, void *context)
{
	HeapTuple	tuple;
	Oid			owner;

	if (funcid < FirstNormalObjectId)
		return false;
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
	if (!HeapTupleIsValid(tuple))
		return false;
	owner = ((Form_pg_proc) GETSTRUCT(tuple))->proowner;
	ReleaseSysCache(tuple);
	if (acts_for(owner))
		return false;
	((ForeignCode *) context)->funcid = funcid;
	((ForeignCode *) context)->owner = owner;
	return true;
}

/* An aggregate runs its support functions: is one another role's? */
static bool
foreign_aggregate(Oid aggfnoid, ForeignCode *found)
{
	Oid			support[AGGREGATE_SUPPORT_FUNCTIONS];
	bool		foreign = false;

	aggregate_support_functions(aggfnoid, support);
	for (int i = 0; i < AGGREGATE_SUPPORT_FUNCTIONS && !foreign; i++)
		foreign = OidIsValid(support[i]) && foreign_function(support[i], found);
	return foreign;
}

/*
 * An operator runs more than its function: the planner may put its
 * negator in its place (NOT a = b), and its selectivity estimators call its
 * commutator's function, or the negator's, on the columns' statistics.
 * Another role's operator may be given other estimators, or a commutator
 * or negator it lacks, at any time (ALTER OPERATOR).  Is one of those
 * another role's?
 */
static bool
foreign_operator(Oid opno, ForeignCode *found, bool with_partners)
{
	HeapTuple	tuple;
	Form_pg_operator form;
	Oid			functions[3];
	Oid			partners[2];
	bool		foreign;

	if (opno < FirstNormalObjectId)
		return false;
	tuple = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	if (!HeapTupleIsValid(tuple))
		return false;
	form = (Form_pg_operator) GETSTRUCT(tuple);
	found->owner = form->oprowner;
	functions[0] = form->oprcode;
	functions[1] = form->oprrest;
	functions[2] = form->oprjoin;
	partners[0] = form->oprcom;
	partners[1] = form->oprnegate;
	ReleaseSysCache(tuple);

	foreign = !acts_for(found->owner);
	for (int i = 0; i < (int) lengthof(functions) && !foreign; i++)
		foreign = OidIsValid(functions[i]) && foreign_function(functions[i], found);
	for (int i = 0; i < (int) lengthof(partners) && !foreign && with_partners; i++)
		foreign = OidIsValid(partners[i]) && partners[i] != opno &&
			foreign_operator(partners[i], found, false);
	if (foreign && !OidIsValid(found->oper))
		found->oper = opno;
	return foreign;
}

/*
 * Does an expression stored in a catalog call another role's code: one of
 * the columns atts (text, nodeToString) of the rows of catalog whose
 * column keyatt is key, found through index?  Read as stored, not as the
 * caches plan them: planning inlines a SQL function, whose owner may
 * replace it all the same.
 */
static bool
foreign_stored_code(Oid catalog, Oid index, AttrNumber keyatt, Oid key,
					const AttrNumber *atts, int natts, ForeignCode *found)
{
	Relation	rel = table_open(catalog, AccessShareLock);
	ScanKeyData skey;
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		foreign = false;

	ScanKeyInit(&skey, keyatt, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(key));
	scan = systable_beginscan(rel, index, true, NULL, 1, &skey);
	while (!foreign && HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		for (int i = 0; i < natts && !foreign; i++)
		{
			bool		isnull;
			Datum		stored = heap_getattr(tuple, atts[i], RelationGetDescr(rel), &isnull);

			if (!isnull)
				foreign = foreign_code_walker(stringToNode(TextDatumGetCString(stored)), found);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return foreign;
}

/* Does a CHECK constraint of the domain (its own) call another role's code? */
static bool
foreign_constraint(Oid domain, ForeignCode *found)
{
	static const AttrNumber conbin[] = {Anum_pg_constraint_conbin};

	return foreign_stored_code(ConstraintRelationId, ConstraintTypidIndexId,
							   Anum_pg_constraint_contypid, domain, conbin, 1, found);
}

/* Does a stored expression (nodeToString text, or NULL) call another role's code? */
static bool
foreign_stored_text(const char *text, ForeignCode *found)
{
	return text != NULL && foreign_code_walker(stringToNode(text), found);
}

/*
 * The planner runs code a table's definition holds, as the role that plans:
 * it folds the calls with constant arguments in its indexes' expressions
 * and predicates, its CHECK constraints (constraint exclusion), its
 * partition key and its statistics' expressions.  Does a table the query
 * reads, or one of its partitions or inheritance children, hold another
 * role's code?  Whoever owns the table, the code's owner counts: a table
 * of a group the owner is in may be given an index by any member of it.
 * Read from the relation cache where it keeps the stored text, so that a
 * table whose definition holds no expression costs no catalog scan.
 */
static bool
foreign_table(Oid relid, ForeignCode *found)
{
	static const AttrNumber partition_code[] = {Anum_pg_partitioned_table_partexprs};
	static const AttrNumber statistics_code[] = {Anum_pg_statistic_ext_stxexprs};
	ListCell   *lc;

	foreach(lc, find_all_inheritors(relid, NoLock, NULL))
	{
		Oid			table = lfirst_oid(lc);
		Relation	rel = try_relation_open(table, AccessShareLock);
		TupleConstr *constr;
		bool		foreign = false;
		ListCell   *ilc;

		if (rel == NULL)
			continue;
		foreach(ilc, RelationGetIndexList(rel))
		{
			HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(ilc)));
			AttrNumber	atts[2] = {Anum_pg_index_indexprs, Anum_pg_index_indpred};

			if (!HeapTupleIsValid(tuple))
				continue;
			for (int i = 0; i < 2 && !foreign; i++)
			{
				bool		isnull;
				Datum		stored = SysCacheGetAttr(INDEXRELID, tuple, atts[i], &isnull);

				foreign = !isnull && foreign_stored_text(TextDatumGetCString(stored), found);
			}
			ReleaseSysCache(tuple);
			if (foreign)
				break;
		}
		constr = RelationGetDescr(rel)->constr;
		for (int i = 0; constr != NULL && i < constr->num_check && !foreign; i++)
			foreign = foreign_stored_text(constr->check[i].ccbin, found);
		if (!foreign && rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
			foreign = foreign_stored_code(PartitionedRelationId, PartitionedRelidIndexId,
										  Anum_pg_partitioned_table_partrelid, table,
										  partition_code, 1, found);
		if (!foreign && RelationGetStatExtList(rel) != NIL)
			foreign = foreign_stored_code(StatisticExtRelationId, StatisticExtRelidIndexId,
										  Anum_pg_statistic_ext_stxrelid, table,
										  statistics_code, 1, found);
		relation_close(rel, NoLock);
		if (foreign)
		{
			found->table = table;
			return true;
		}
	}
	return false;
}

/*
 * A value coerced to a domain runs the CHECK constraints of the domain and
 * of the domains it is made from: is one of those domains another role's
 * (which may add a constraint at any time), or does a constraint call
 * another role's code?  The constraints are read as stored, not as the
 * type cache plans them: planning inlines a SQL function, whose owner may
 * replace it all the same.
 */
static bool
foreign_domain(Oid domain, ForeignCode *found)
{
	for (Oid type = domain; OidIsValid(type);)
	{
		HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
		Form_pg_type form;
		Oid			owner;
		Oid			base = InvalidOid;

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for type %u", type);
		form = (Form_pg_type) GETSTRUCT(tuple);
		owner = form->typowner;
		if (form->typtype == TYPTYPE_DOMAIN)
			base = form->typbasetype;
		ReleaseSysCache(tuple);
		if (!OidIsValid(base))
			break;
		if (!acts_for(owner))
			found->owner = owner;
		if (!acts_for(owner) || foreign_constraint(type, found))
		{
			found->type = type;
			return true;
		}
		type = base;
	}
	return false;
}

/*
 * A value of a range type -- or of a multirange, an array, a domain or a
 * composite type made of one -- has its range type's functions run on it:
 * subtype_diff by the planner's estimates, canonical by the range's input.
 * Is one of them another role's?
 */
static bool
foreign_type(Oid type, ForeignCode *found, int depth)
{
	Oid			element;
	HeapTuple	tuple;
	bool		foreign = false;

	/* (built-in types are made of built-in ones) */
	if (type < FirstNormalObjectId || depth > 16)
		return false;
	if (OidIsValid(element = get_element_type(type)))
		return foreign_type(element, found, depth + 1);
	if (type_is_multirange(type))
		return foreign_type(get_multirange_range(type), found, depth + 1);
	switch (get_typtype(type))
	{
		case TYPTYPE_DOMAIN:
			return foreign_type(getBaseType(type), found, depth + 1);
		case TYPTYPE_COMPOSITE:
			{
				TupleDesc	desc = lookup_rowtype_tupdesc(type, -1);

				for (int i = 0; i < desc->natts && !foreign; i++)
					foreign = !TupleDescAttr(desc, i)->attisdropped &&
						foreign_type(TupleDescAttr(desc, i)->atttypid, found, depth + 1);
				ReleaseTupleDesc(desc);
				return foreign;
			}
		case TYPTYPE_RANGE:
			tuple = SearchSysCache1(RANGETYPE, ObjectIdGetDatum(type));
			if (HeapTupleIsValid(tuple))
			{
				Form_pg_range range = (Form_pg_range) GETSTRUCT(tuple);
				Oid			functions[2] = {range->rngsubdiff, range->rngcanonical};

				ReleaseSysCache(tuple);
				for (int i = 0; i < (int) lengthof(functions) && !foreign; i++)
					foreign = OidIsValid(functions[i]) && foreign_function(functions[i], found);
				if (foreign)
					found->type = type;
			}
			return foreign;
		default:
			return false;
	}
}

/*
 * The relations the query reads: a table's definition (foreign_table), and
 * a view the analysis left as it is (one it does not inline: the planner
 * expands it), whose query's code runs as the target's owner.  A view's
 * query is looked at as it is now, and the view kept locked until the
 * transaction ends, so that it is not replaced (CREATE OR REPLACE VIEW)
 * before the query runs; its owner's rights are not those its code runs
 * with, so the view may be another role's.
 */
static bool
foreign_relations(Query *query, ForeignCode *found)
{
	ListCell   *lc;

	foreach(lc, query->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);
		Relation	rel;
		Query	   *view_query;
		bool		foreign;

		if (rte->rtekind != RTE_RELATION)
			continue;
		if (rte->relkind != RELKIND_VIEW)
		{
			if (foreign_table(rte->relid, found))
				return true;
			continue;
		}
		/* (a view's own query names it, as OLD and NEW, before PostgreSQL 16) */
		if (list_member_oid(found->expanding, rte->relid))
			continue;
		rel = relation_open(rte->relid, AccessShareLock);
		view_query = copyObject(get_view_query(rel));
		relation_close(rel, NoLock);
		found->views = list_append_unique_oid(found->views, rte->relid);
		found->expanding = lappend_oid(found->expanding, rte->relid);
		foreign = foreign_code_walker((Node *) view_query, found);
		found->expanding = list_delete_last(found->expanding);
		if (foreign)
			return true;
	}
	return false;
}

/*
 * The planner casts a set operation's inputs to its column types, looking
 * the casts up as it plans: is one another role's code, or a cast between
 * types of which one is another role's (whose owner may make a new cast at
 * any time)?  child is a leaf (RangeTblRef) or a nested operation.
 */
static bool
foreign_setop_input(Query *query, SetOperationStmt *op, Node *child, ForeignCode *found)
{
	List	   *inputs = NIL;
	int			col = 0;
	ListCell   *lc;
	ListCell   *lc2;

	if (IsA(child, SetOperationStmt))
	{
		SetOperationStmt *nested = (SetOperationStmt *) child;

		if (foreign_setop_input(query, nested, nested->larg, found) ||
			foreign_setop_input(query, nested, nested->rarg, found))
			return true;
		forboth(lc, nested->colTypes, lc2, nested->colTypmods)
			inputs = lappend(inputs, makeNullConst(lfirst_oid(lc), lfirst_int(lc2), InvalidOid));
	}
	else
	{
		Query	   *leaf = rt_fetch(((RangeTblRef *) child)->rtindex, query->rtable)->subquery;

		inputs = query_output_exprs(leaf);
	}
	foreach(lc, inputs)
	{
		Node	   *input = lfirst(lc);
		Oid			types[2];
		Node	   *cast;

		if (col >= list_length(op->colTypes))
			break;
		types[0] = exprType(input);
		types[1] = list_nth_oid(op->colTypes, col);
		if (types[0] == types[1])
		{
			col++;
			continue;
		}
		for (int i = 0; i < 2; i++)
		{
			HeapTuple	tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(types[i]));

			if (!HeapTupleIsValid(tuple))
				continue;
			found->owner = ((Form_pg_type) GETSTRUCT(tuple))->typowner;
			ReleaseSysCache(tuple);
			if (!acts_for(found->owner))
			{
				found->type = types[i];
				return true;
			}
		}
		cast = coerce_to_target_type(NULL, input, types[0], types[1],
									 list_nth_int(op->colTypmods, col),
									 COERCION_IMPLICIT, COERCE_IMPLICIT_CAST, -1);
		if (foreign_code_walker(cast, found))
			return true;
		col++;
	}
	return false;
}

static bool
foreign_code_walker(Node *node, ForeignCode *found)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		SetOperationStmt *op = (SetOperationStmt *) query->setOperations;

		return foreign_relations(query, found) ||
			(op != NULL && (foreign_setop_input(query, op, op->larg, found) ||
							foreign_setop_input(query, op, op->rarg, found))) ||
			query_tree_walker(query, foreign_code_walker, found, 0);
	}
	if (IsA(node, Aggref) && foreign_aggregate(((Aggref *) node)->aggfnoid, found))
		return true;
	if (IsA(node, WindowFunc) && ((WindowFunc *) node)->winagg &&
		foreign_aggregate(((WindowFunc *) node)->winfnoid, found))
		return true;
	if (IsA(node, CoerceToDomain) &&
		foreign_domain(((CoerceToDomain *) node)->resulttype, found))
		return true;
	if ((IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr)) &&
		foreign_operator(((OpExpr *) node)->opno, found, true))
		return true;
	if (IsA(node, ScalarArrayOpExpr) &&
		foreign_operator(((ScalarArrayOpExpr *) node)->opno, found, true))
		return true;
	if (IsA(node, RowCompareExpr))
	{
		ListCell   *lc;

		foreach(lc, ((RowCompareExpr *) node)->opnos)
		{
			if (foreign_operator(lfirst_oid(lc), found, true))
				return true;
		}
	}
	if ((IsA(node, Var) || IsA(node, Const) || IsA(node, Param) || IsA(node, FuncExpr) ||
		 IsA(node, OpExpr) || IsA(node, CoerceViaIO) || IsA(node, RelabelType) ||
		 IsA(node, ArrayExpr) || IsA(node, FieldSelect) || IsA(node, RowExpr)) &&
		foreign_type(exprType(node), found, 0))
		return true;
	if (check_functions_in_node(node, foreign_function, found))
		return true;
	return expression_tree_walker(node, foreign_code_walker, found);
}

/*
 * Does the last check of the plan's code owners hold still?  What it looked
 * at -- the query, the definitions of the tables it reads (of each
 * partition), the owners of functions, operators and types, and who is a
 * member of which role -- changes only with the catalogs, and a committed
 * change of a catalog sends invalidations, which the worker takes in at the
 * latest when it locks the relations of the view's apply (as it has, since
 * plan_cache_lock_view).  So it holds for the same role as long as none
 * came in since.  The views the query reads are locked again, as the check
 * locks them (foreign_relations), so that none is replaced before the
 * query runs: a view replaced before its lock was taken has sent its
 * invalidation by then.
 */
static bool
owners_still_trusted(DeltaPlan *plan)
{
	ListCell   *lc;

	if (plan->owners_checked_as != GetUserId() ||
		plan->owners_checked_at != SharedInvalidMessageCounter)
		return false;
	foreach(lc, plan->owners_views)
		LockRelationOid(lfirst_oid(lc), AccessShareLock);
	return plan->owners_checked_at == SharedInvalidMessageCounter;
}

/*
 * The code a view runs must be its owner's, or trusted.  A user-defined
 * function of another role -- called by the query, or by an operator of
 * it (its negator's and commutator's too), an aggregate, a cast, a domain's
 * constraint, a range type, or a view it reads -- would run with the
 * target owner's rights at every apply, whatever its owner made of it
 * since (CREATE OR REPLACE FUNCTION); so would what another role's
 * operator or domain is made to run (ALTER OPERATOR, ALTER DOMAIN ... ADD
 * CONSTRAINT).  Looked for in the query
 * and in the coercions of its output to the target's column types (a
 * column of a domain type).  Code of roles the owner acts for, and of
 * superusers (extensions), is fine.  What the owner's own functions call
 * is the owner's choice, as in any query.
 */
static void
check_code_owners(DeltaPlan *plan, Oid target)
{
	ForeignCode found = {InvalidOid, InvalidOid, InvalidOid, InvalidOid, InvalidOid, NIL, NIL};
	char	   *what;
	const char *where;

	uint64		before;

	if (owners_still_trusted(plan))
		return;

	/*
	 * The walk takes in invalidations as it locks views and opens the target:
	 * a change committed meanwhile may be of what it had read already, so
	 * the walk holds for the state it saw only if none came in; else it is
	 * made again, a few times, then kept for this apply only.
	 */
	for (int tries = 0;; tries++)
	{
		before = SharedInvalidMessageCounter;
		list_free(found.views);
		found.views = NIL;
		if (foreign_code_walker((Node *) plan->query, &found))
		{
			where = "of the view's query";
			break;
		}
		if (foreign_code_walker((Node *) target_coerced_outputs(target, plan, plan->query),
								&found))
		{
			where = "of a column of the target";
			break;
		}
		if (before == SharedInvalidMessageCounter || tries == 2)
		{
			MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(plan));

			list_free(plan->owners_views);
			plan->owners_views = list_copy(found.views);
			plan->owners_checked_as = GetUserId();
			plan->owners_checked_at = before;
			MemoryContextSwitchTo(old);
			return;
		}
	}

	if (OidIsValid(found.funcid) && OidIsValid(found.oper))
		what = psprintf("function %s, which operator %s calls,",
						format_procedure(found.funcid), format_operator(found.oper));
	else if (OidIsValid(found.funcid) && OidIsValid(found.type))
		what = psprintf("function %s, which %s %s calls,", format_procedure(found.funcid),
						get_typtype(found.type) == TYPTYPE_DOMAIN ?
						"a constraint of domain" : "range type",
						format_type_be_qualified(found.type));
	else if (OidIsValid(found.funcid) && OidIsValid(found.table))
		what = psprintf("function %s, which the definition of table %s calls,",
						format_procedure(found.funcid),
						quote_qualified_identifier(get_namespace_name(get_rel_namespace(found.table)),
												   get_rel_name(found.table)));
	else if (OidIsValid(found.funcid))
		what = psprintf("function %s", format_procedure(found.funcid));
	else if (OidIsValid(found.oper))
		what = psprintf("operator %s", format_operator(found.oper));
	else
		what = psprintf("%s %s", get_typtype(found.type) == TYPTYPE_DOMAIN ? "domain" : "type",
						format_type_be_qualified(found.type));
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s %s belongs to role \"%s\", which role \"%s\" does not act for",
					what, where, GetUserNameFromId(found.owner, false),
					GetUserNameFromId(GetUserId(), false)),
			 errdetail("The view's query runs as the owner of its target, at every change: another role's code would run with those rights, and may be replaced at any time."),
			 errhint("Use functions, operators and domains owned by the target's owner (ALTER ... OWNER TO), or by a role it is a member of.")));
}

/*
 * Lookups read the sources directly: check, as the current user, the
 * rights the query needs, and that no row security applies to a source (a
 * revoked privilege, or a policy enabled later, puts the view in error).
 * Also that the code the view runs is the owner's own, or trusted
 * (check_code_owners).
 */
void
apply_check_access(DeltaPlan *plan, Oid target)
{
	ListCell   *lc;

	check_code_owners(plan, target);

	(void) compat_check_permissions(plan->query, true);
	foreach(lc, plan->branches)
		apply_check_access(lfirst(lc), target);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (check_enable_rls(src->relid, InvalidOid, true) == RLS_ENABLED)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("row-level security applies to source %s for role \"%s\"",
							dj_message_name(src->relname), GetUserNameFromId(GetUserId(), false)),
					 errdetail("Lookups read the sources directly, so row security policies could not be applied to them."),
					 errhint("Let the target's owner bypass row-level security on the table (own it, or have BYPASSRLS).")));
	}
}

/* ----------------------------------------------------------------
 *		Dispatch
 * ----------------------------------------------------------------
 */

/* Apply a batch by the way the plan says */
static void
apply_plan(DeltaPlan *plan, ViewBatch *batch, TargetWriter *writer, ApplyCounts *counts)
{
	bool		truncated = false;
	ListCell   *lc;

	foreach(lc, batch->sources)
		truncated |= ((SourceBatch *) lfirst(lc))->truncated;

	/*
	 * Inner joins walk the join graph, in retract mode too (replacing the
	 * slices of the keys they walk from); outer joins, keyed recompute, the
	 * branches of a UNION ALL in retract mode and a TRUNCATE in retract mode
	 * recompute with region queries.
	 */
	if (plan->kind == DJ_KIND_AGGREGATE)
		apply_aggregate(plan, batch, writer, counts);
	else if (plan->has_outer || plan->path == DJ_PATH_KEYED ||
			 (plan->options.retract && (truncated || plan->tag_column >= 0)))
		apply_outer(plan, batch, writer, counts);
	else
		apply_join(plan, batch, writer, counts);
}

/*
 * Is the view's apply one recompute of the whole (a full recompute, an
 * aggregate without GROUP BY), whatever its keys?
 */
bool
apply_view_whole(ViewRecord *view)
{
	DeltaPlan  *plan = plan_cache_get(view);

	return plan->path == DJ_PATH_FULL || plan->whole;
}

/* Does an outer join (of any UNION ALL branch) null-extend a source? */
static bool
plan_has_outer(DeltaPlan *plan)
{
	ListCell   *lc;

	foreach(lc, plan->branches)
	{
		if (((DeltaPlan *) lfirst(lc))->has_outer)
			return true;
	}
	return plan->has_outer;
}

/*
 * Must the view's work (batch) be applied in one piece, not a piece at a
 * time?  Groups through joins are found from all the changed rows together
 * (apply_agg.c).  A retract-mode outer join notes from the target, before
 * it replaces anything, the rows each changed row was joined with
 * (apply_outer.c); with two sources changed, a piece of one source's keys
 * applied before the piece of the other's could delete the rows that name
 * them ("a 4, no b, c 12, d 1", gone with the rows of b's partner c 12
 * where b is absent), and the row a 4 has once c 12 went, "a 4, no b, no
 * c", would never come.  (Pieces of one source's keys delete no row that
 * holds another of its changed rows.)
 */
bool
apply_view_together(ViewRecord *view, const ViewBatch *batch)
{
	DeltaPlan  *plan;

	if (view->path == DJ_PATH_JOIN_GROUPS)
		return true;
	if (batch == NULL || list_length(batch->sources) < 2)
		return false;
	plan = plan_cache_get(view);
	return plan->options.retract && plan_has_outer(plan);
}

/*
 * Must the view's keys be held while the worker's batches are cut short (a
 * backlog: worker.c), until a batch reaches the end of the WAL there is?
 * A cut batch's snapshot already sees the changes of the batches after it.
 * Groups through joins are found by joining the batch's changed rows with
 * the other sources as that snapshot sees them: a group whose rows changed
 * on two sources, one in each batch, would be found by neither.  A
 * retract-mode outer join is apply_view_together's case over two batches:
 * the first replaces rows of a partner of the second's changed row (under
 * a snapshot where that row is gone already), and the second no longer
 * finds the partner.  Held, their keys are applied by one batch, which
 * sees no change it lacks.  A retract view whose plan is not built yet is
 * held too: holding costs only time.
 */
bool
apply_view_held_in_backlog(ViewRecord *view)
{
	DeltaPlan  *plan;

	if (view->path == DJ_PATH_JOIN_GROUPS)
		return true;
	if (!view->options.retract)
		return false;
	plan = plan_cache_peek(view);
	return plan == NULL || plan_has_outer(plan);
}

/*
 * Write into a view's target only the difference between what it holds
 * and its query's result now (refresh concurrently: readers see the old
 * rows until the caller commits).  Runs as the caller, who runs as the
 * target's owner with the view's pinned settings; counts the rows written.
 */
void
apply_view_difference(ViewRecord *view, DeltaPlan *plan, ApplyCounts *counts)
{
	TargetWriter *writer;

	apply_check_access(plan, view->target);
	writer = writer_begin(view->target, plan, counts);
	apply_error_place.writer = writer;
	apply_full(plan, writer);
	apply_error_place.writer = NULL;
	writer_end(writer);
}

/*
 * Apply one view's batch.  Runs as the target's owner, with the view's
 * pinned settings; raises an error (the worker rolls back the view's
 * subtransaction) if the view cannot be applied.  *held_back: the rows the
 * earlier pieces of the view's work held back (writer.c), and the rows
 * still held back after this one, for apply_view_held_back.
 */
void
apply_view_batch(ViewRecord *view, ViewBatch *batch, ApplyCounts *counts, List **held_back)
{
	DeltaPlan  *plan = plan_cache_get(view);
	TargetWriter *writer;

	/* a recompute of the whole runs once, with the batch's final part */
	if (batch->chunk && (plan->path == DJ_PATH_FULL || plan->whole))
		return;

	if (plan->path != DJ_PATH_DELTA || batch->whole)
		counts->recomputed_at = GetCurrentTimestamp();
	apply_check_access(plan, view->target);
	writer = writer_begin(view->target, plan, counts);
	counts->additive = !view->options.manual_writes && apply_additive_kept(plan, writer);
	writer_carry_in(writer, *held_back);
	apply_error_place.writer = writer;

	/*
	 * Full recompute, an aggregate's one group, or a view that waited with
	 * more keys than the worker keeps (retry.c): the query, the difference
	 */
	if (plan->path == DJ_PATH_FULL || plan->whole || batch->whole)
	{
		counts->keys_applied++;
		if (batch->whole)
			apply_join_forget_caches(plan);
		apply_full(plan, writer);
	}
	else if (plan->branches != NIL)
	{
		/* UNION ALL: each branch its own changes, in the one target */
		ListCell   *lc;

		foreach(lc, plan->branches)
		{
			ViewBatch	branch_batch = *batch;
			ListCell   *lc2;

			branch_batch.sources = NIL;
			foreach(lc2, batch->sources)
			{
				SourceBatch *sb = lfirst(lc2);

				if (DJ_ORDINAL_BRANCH(sb->ordinal) == foreach_current_index(lc))
					branch_batch.sources = lappend(branch_batch.sources, sb);
			}
			if (branch_batch.sources != NIL)
				apply_plan(lfirst(lc), &branch_batch, writer, counts);
		}
	}
	else
		apply_plan(plan, batch, writer, counts);

	/* (the piece's keys go next: the error context no longer points at them) */
	apply_error_clear();
	*held_back = writer_carry_out(writer);
	apply_error_place.writer = NULL;
	writer_end(writer);
}

/*
 * Write the rows the last piece of a view's work left held back; a row
 * that still collides in the target's index fails.
 */
void
apply_view_held_back(ViewRecord *view, List *held_back, ApplyCounts *counts)
{
	TargetWriter *writer = writer_begin(view->target, plan_cache_get(view), counts);

	writer_carry_in(writer, held_back);
	apply_error_place.writer = writer;
	writer_end(writer);
	apply_error_place.writer = NULL;
}
