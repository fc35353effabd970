/*-------------------------------------------------------------------------
 *
 * access.c
 *	  The rights create_view checks of its caller before it fills a target:
 *	  to read what the query reads, and to lock the sources.
 *
 * create_view checks them as it runs (ops/views.c), not in the analysis,
 * which the worker and the DDL guard run as other roles.  explain() checks
 * them as its caller, who would own a new target, and reports what is
 * missing as a failure of the path create_view would take: a query the
 * caller may not create a view of is not called eligible.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "analysis/analysis.h"
#include "base/compat.h"

/*
 * Reject the first relation the query reads, at any level (subqueries,
 * CTEs, sublinks, the views it reads as their owners), whose rights the
 * role checked for it lacks: what the executor would raise when the
 * target is filled.
 */
static bool
reject_denied_reads(Node *node, Analysis *a)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		Query	   *query = (Query *) node;
		Oid			role;
		Oid			relid = compat_relation_denied(query, &role);

		if (OidIsValid(relid))
		{
			char		relkind = get_rel_relkind(relid);

			analysis_reject(a, ERRCODE_INSUFFICIENT_PRIVILEGE,
				   psprintf("permission denied for %s %s",
							relkind == RELKIND_VIEW ? "view" :
							relkind == RELKIND_MATVIEW ? "materialized view" :
							relkind == RELKIND_FOREIGN_TABLE ? "foreign table" : "table",
							get_rel_name(relid)),
				   pstrdup("The view's query runs as the owner of its target, who needs the right to read every table and column it reads (and the owner of a view it reads, that view's tables)."),
				   psprintf("Grant SELECT on the table, or on the columns the query reads, to role \"%s\".",
							GetUserNameFromId(role, false)));
			return true;
		}
		return query_tree_walker(query, reject_denied_reads, a, 0);
	}
	return expression_tree_walker(node, reject_denied_reads, a);
}

/*
 * Filling a target holds a SHARE lock on its sources, which keeps writers
 * waiting: a right LOCK TABLE ... IN SHARE MODE asks for too (UPDATE,
 * DELETE or TRUNCATE on each source), so that a role that may only read a
 * table cannot block its writers.
 */
static void
reject_unlockable_sources(Analysis *a)
{
	ListCell   *lc;

	foreach(lc, a->plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (pg_class_aclmask(src->relid, GetUserId(),
							 ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE, ACLMASK_ANY) == 0)
			analysis_reject(a, ERRCODE_INSUFFICIENT_PRIVILEGE,
				   psprintf("permission denied to lock source %s", src->relname),
				   pstrdup("Filling a view's target locks its sources in SHARE mode, which keeps their writers waiting."),
				   psprintf("The role needs UPDATE, DELETE or TRUNCATE on the table, as LOCK TABLE %s IN SHARE MODE would; or pass concurrently => true, which needs SELECT only.",
							src->relname));
	}
}

/*
 * explain(): may the caller create a view of the plan's query?  Collects
 * what it may not do as failures, and returns false if there are any.
 */
bool
analysis_rights_granted(Analysis *a)
{
	int			before = list_length(a->failures);

	(void) reject_denied_reads((Node *) a->plan->query, a);
	reject_unlockable_sources(a);
	return list_length(a->failures) == before;
}

/* create_view: raise the first source the caller may not lock */
void
analyze_check_lock_rights(DeltaPlan *plan)
{
	Analysis	a = {0};

	a.plan = plan;
	reject_unlockable_sources(&a);
}
