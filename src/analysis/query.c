/*-------------------------------------------------------------------------
 *
 * query.c
 *	  A view's query: parsed once from the text given to create_view, bound
 *	  into a Postgres view of schema delta_join (its query view), and read
 *	  back from there whenever it is needed.
 *
 * Binding works like CREATE VIEW, because it is one: the analyzed Query is
 * stored as the _RETURN rule of a view relation (StoreViewQuery), which
 * records in pg_depend every relation, column, function, operator, type and
 * collation it uses.  So, as for any view:
 *
 *	- DROP COLUMN, ALTER COLUMN TYPE, DROP FUNCTION ... of something the
 *	  query uses are refused with core's own "other objects depend on it"
 *	  errors; DROP TABLE ... CASCADE drops the query view (guard.c then puts
 *	  the delta view in error);
 *	- renames are followed: the rule holds OIDs and attribute numbers, and
 *	  pg_get_viewdef shows the query with today's names;
 *	- a table created later under an old name, or a function created later
 *	  in a schema of the creator's search_path, changes nothing;
 *	- pg_dump saves the query view with the database, and the catalog names
 *	  it as a regclass.
 *
 * The text is parsed and analyzed as the caller, with the caller's
 * search_path, exactly as the caller's own SELECT would be: the caller must
 * be able to see every schema it names.  The query view is then created by
 * the bootstrap superuser (users may not create objects in schema
 * delta_join) on behalf of the target's owner, who owns it.  Nothing is
 * parsed again by name after that.
 *
 * On 15 a stored view rule carries two placeholder range-table entries (OLD
 * and NEW) in front of the query's own; query_load() removes them, so the
 * range-table positions of the sources are those of the analyzed query
 * (later majors store none).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/objectaddress.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/view.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "rewrite/rewriteHandler.h"
#include "rewrite/rewriteManip.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "base/delta_join.h"
#include "analysis/dialect.h"
#include "base/options.h"
#include "analysis/query.h"
#include "base/runas.h"

/* ----------------------------------------------------------------
 *		Parsing
 * ----------------------------------------------------------------
 */

/*
 * Error context while parsing the query text: a syntax error or unknown name
 * points into the query text, not into the statement that called us.
 */
static void
query_error_callback(void *arg)
{
	int			position = geterrposition();

	if (position > 0)
	{
		errposition(0);
		internalerrposition(position);
		internalerrquery((const char *) arg);
	}
}

/* Parse text into exactly one SELECT; anything else is a clean error. */
static RawStmt *
parse_single_select(const char *text)
{
	List	   *raw;
	RawStmt    *rawstmt;
	SelectStmt *select;

	raw = raw_parser(text, RAW_PARSE_DEFAULT);
	if (raw == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query is empty"),
				 errhint("Pass one SELECT statement.")));
	if (list_length(raw) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("query must be a single statement"),
				 errdetail("The text holds %d statements.", list_length(raw)),
				 errhint("Pass one SELECT statement.")));

	rawstmt = linitial_node(RawStmt, raw);

	/* the streaming engine's users write their query as the job's INSERT */
	if (IsA(rawstmt->stmt, InsertStmt) &&
		((InsertStmt *) rawstmt->stmt)->selectStmt != NULL &&
		castNode(SelectStmt, ((InsertStmt *) rawstmt->stmt)->selectStmt)->valuesLists == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must be a SELECT statement"),
				 errdetail("The statement given is INSERT ... SELECT."),
				 errhint("Pass the SELECT alone, with the table INSERT writes as the target: delta_join.create_view(%s, $$SELECT ...$$).",
						 quote_literal_cstr(((InsertStmt *) rawstmt->stmt)->relation->relname))));
	if (!IsA(rawstmt->stmt, SelectStmt))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must be a SELECT statement"),
				 errdetail("The statement given is %s.", CreateCommandName(rawstmt->stmt)),
				 errhint("Pass one SELECT statement.")));

	select = (SelectStmt *) rawstmt->stmt;
	if (select->intoClause != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("query must not be SELECT INTO"),
				 errhint("Name the target as the first argument of delta_join.create_view.")));
	return rawstmt;
}

/*
 * Point each hint at the range-table entry the analyzed query made of the
 * table it follows, by its name.  The names of one query level's FROM
 * items are unique but for those inside an aliased join, which the alias
 * hides ("JOIN (s.r JOIN q USING (id)) AS j" beside another r): a name
 * that two tables have is refused, so that a hint never lands on the other.
 */
static void
resolve_hints(List *hints, List *names, Query *query)
{
	ListCell   *lc;
	ListCell   *lc2;

	forboth(lc, hints, lc2, names)
	{
		DeltaHint  *hint = lfirst(lc);
		const char *name = lfirst(lc2);
		ListCell   *lc3;

		foreach(lc3, query->rtable)
		{
			RangeTblEntry *rte = lfirst(lc3);

			if (rte->inFromCl && rte->rtekind != RTE_JOIN &&
				strcmp(rte->eref->aliasname, name) == 0)
			{
				/* a hint on a view or a WITH query would be lost: refuse it */
				if (rte->rtekind != RTE_RELATION ||
					(rte->relkind != RELKIND_RELATION && rte->relkind != RELKIND_PARTITIONED_TABLE))
					ereport(ERROR,
							(errcode(ERRCODE_WRONG_OBJECT_TYPE),
							 errmsg("%s at offset %d follows \"%s\", which is not a table",
									hint->as_of ? "FOR SYSTEM_TIME AS OF" : "table hint",
									hint->location, name),
							 errhint("Table hints and FOR SYSTEM_TIME AS OF apply to tables.")));
				/* (a FROM item in parentheses may reuse a name) */
				if (hint->rtindex != 0)
					ereport(ERROR,
							(errcode(ERRCODE_AMBIGUOUS_ALIAS),
							 errmsg("%s at offset %d follows \"%s\", which names more than one table of the query",
									hint->as_of ? "FOR SYSTEM_TIME AS OF" : "table hint",
									hint->location, name),
							 errhint("Give the tables distinct aliases.")));
				hint->rtindex = foreach_current_index(lc3) + 1;
			}
		}
		if (hint->rtindex == 0)
			elog(ERROR, "table hint for \"%s\" matches no source", name);
	}
}

/*
 * A temporary object other than a table (rule 1 refuses those) -- a view,
 * function, operator, type, domain or collation of pg_temp -- is refused:
 * the session that made it drops it when it ends, and with it, by DROP ...
 * CASCADE (which fires no event trigger), the query view; the view would
 * break without a word.  A create_view(..., concurrently => true) reads
 * the query in another session, where pg_temp is not the caller's: there
 * the caller's temporary tables are refused here too (tables), since its
 * rule 1 would not see them.
 */
static void
refuse_temporary(Oid classid, Oid objid)
{
	ObjectAddress object;
	Oid			nspid;

	if (objid < FirstNormalObjectId)
		return;
	ObjectAddressSet(object, classid, objid);
	nspid = get_object_namespace(&object);
	if (OidIsValid(nspid) && isAnyTempNamespace(nspid))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the query uses %s, a temporary object", getObjectDescription(&object, false)),
				 errdetail("The session that made it drops it when it ends, and with it the view."),
				 errhint("Make it in a permanent schema.")));
}

static bool
refuse_temporary_function(Oid funcid, void *context)
{
	refuse_temporary(ProcedureRelationId, funcid);
	return false;
}

static bool
temporary_object_walker(Node *node, void *tables)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		ListCell   *lc;

		foreach(lc, ((Query *) node)->rtable)
		{
			RangeTblEntry *rte = lfirst(lc);

			if (rte->rtekind == RTE_RELATION &&
				(*(bool *) tables || (rte->relkind != RELKIND_RELATION &&
									  rte->relkind != RELKIND_PARTITIONED_TABLE)))
				refuse_temporary(RelationRelationId, rte->relid);
		}
		return query_tree_walker((Query *) node, temporary_object_walker, tables, 0);
	}
	(void) check_functions_in_node(node, refuse_temporary_function, NULL);
	if (IsA(node, OpExpr) || IsA(node, DistinctExpr) || IsA(node, NullIfExpr))
		refuse_temporary(OperatorRelationId, ((OpExpr *) node)->opno);
	else if (IsA(node, ScalarArrayOpExpr))
		refuse_temporary(OperatorRelationId, ((ScalarArrayOpExpr *) node)->opno);
	else if (IsA(node, CollateExpr))
		refuse_temporary(CollationRelationId, ((CollateExpr *) node)->collOid);
	if (IsA(node, Var) || IsA(node, Const) || IsA(node, Param) || IsA(node, FuncExpr) ||
		IsA(node, OpExpr) || IsA(node, Aggref) || IsA(node, WindowFunc) ||
		IsA(node, CoerceViaIO) || IsA(node, RelabelType) || IsA(node, CoerceToDomain) ||
		IsA(node, ArrayExpr) || IsA(node, FieldSelect) || IsA(node, RowExpr))
	{
		refuse_temporary(TypeRelationId, exprType(node));
		refuse_temporary(CollationRelationId, exprCollation(node));
	}
	return expression_tree_walker(node, temporary_object_walker, tables);
}

/* Refuse the temporary objects a query uses, its tables too if tables */
void
query_refuse_temporary(Query *query, bool tables)
{
	(void) temporary_object_walker((Node *) query, &tables);
}

/*
 * Parse and analyze the text of a view's query as the caller would run it,
 * with the caller's rights and search_path.  Returns the analyzed Query and,
 * in *hints, its table hints (DeltaHint *, rtindex set).
 */
Query *
query_parse(const char *text, List **hints)
{
	DialectText *dialect;
	RawStmt    *rawstmt;
	Query	   *query;
	List	   *names;
	ErrorContextCallback errcallback;

	/* report parse errors at their position in the query text */
	errcallback.callback = query_error_callback;
	errcallback.arg = (void *) text;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	/* the streaming engine's SQL (dialect.c): same offsets, PostgreSQL's spelling */
	dialect = dialect_scan(text);
	rawstmt = parse_single_select(dialect_parser_text(dialect));
	*hints = dialect_table_hints(dialect, castNode(SelectStmt, rawstmt->stmt), &names);
	PushActiveSnapshot(GetTransactionSnapshot());
	dialect_rewrite_aggregates(dialect, rawstmt->stmt);
	query = parse_analyze_fixedparams(rawstmt, dialect_parser_text(dialect), NULL, 0, NULL);
	PopActiveSnapshot();
	resolve_hints(*hints, names, query);
	query_refuse_temporary(query, false);

	error_context_stack = errcallback.previous;
	return query;
}

/* ----------------------------------------------------------------
 *		Binding
 * ----------------------------------------------------------------
 */

/* "<schema>.<table>" of a target, the name its query view takes if free */
static char *
query_view_base_name(Oid target)
{
	return psprintf("%s.%s", get_namespace_name(get_rel_namespace(target)),
					get_rel_name(target));
}

/*
 * How much of the base name goes before a suffix of suffix_len bytes: all
 * of it if the whole fits in a name, else as many whole characters as do
 * (a cut through a multibyte character would leave an invalid string in
 * pg_class, which pg_dump would write into a dump that fails to restore).
 */
static int
query_view_name_keep(const char *base, int suffix_len)
{
	return pg_mbcliplen(base, strlen(base), NAMEDATALEN - 1 - suffix_len);
}

/* The name a target's query view takes: its base name, if free. */
static char *
query_view_name(Oid target, Oid nspid)
{
	char	   *base = query_view_base_name(target);
	char	   *name = base;

	for (int n = 2; OidIsValid(get_relname_relid(name, nspid)) || strlen(name) >= NAMEDATALEN; n++)
	{
		char		suffix[16];

		snprintf(suffix, sizeof(suffix), "#%d", n);
		name = psprintf("%.*s%s", query_view_name_keep(base, strlen(suffix)), base, suffix);
	}
	return name;
}

/*
 * Whether a query view's name is one query_view_name could give the target
 * as it is named now: its base name, or that name (cut short if need be)
 * and a "#<n>" suffix.  Comparing with a prefix only would keep the name
 * of a target renamed back from a longer name that starts with its own
 * ("t2" renamed to "t" left the query view "public.t2").
 */
static bool
query_view_name_fits(const char *name, Oid target)
{
	char	   *base = query_view_base_name(target);
	const char *suffix = strrchr(name, '#');
	int			keep;

	if (strcmp(name, base) == 0)
		return true;
	if (suffix == NULL || suffix[1] == '\0' ||
		strspn(suffix + 1, "0123456789") != strlen(suffix + 1))
		return false;
	keep = query_view_name_keep(base, strlen(suffix));
	return suffix - name == keep && strncmp(name, base, keep) == 0;
}

/*
 * Bind an analyzed query into a new query view owned by the target's owner;
 * returns the view's OID.  What DefineView does, minus the parsing (the
 * query was analyzed as the caller), and as the bootstrap superuser.  The
 * query view depends on the extension (query_depend_on_extension).
 */
Oid
query_bind(Query *query, Oid target)
{
	Oid			nspid = get_namespace_oid(DJ_SCHEMA, false);
	CreateStmt *stmt = makeNode(CreateStmt);
	ObjectAddress address;
	RunAs		runas;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			stmt->tableElts = lappend(stmt->tableElts,
									  makeColumnDef(tle->resname,
													exprType((Node *) tle->expr),
													exprTypmod((Node *) tle->expr),
													exprCollation((Node *) tle->expr)));
	}
	stmt->relation = makeRangeVar(DJ_SCHEMA, query_view_name(target, nspid), -1);
	stmt->oncommit = ONCOMMIT_NOOP;

	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);
	address = DefineRelation(stmt, RELKIND_VIEW, runas_target_owner(target), NULL, NULL);
	CommandCounterIncrement();
	StoreViewQuery(address.objectId, query, false);
	query_depend_on_extension(address.objectId);
	CommandCounterIncrement();
	runas_end(&runas);

	return address.objectId;
}

/*
 * Make a query view depend on the extension, as the guard trigger of its
 * target does: DROP EXTENSION refuses while views exist, and DROP
 * EXTENSION ... CASCADE drops the query views with the rest, instead of
 * leaving them in schema delta_join (which the extension does not own) to
 * keep their sources from being dropped.  Idempotent: refresh() calls it
 * too, for the query views a restore made as plain views.
 */
void
query_depend_on_extension(Oid query_view)
{
	ObjectAddress view;
	ObjectAddress extension;

	ObjectAddressSet(view, RelationRelationId, query_view);
	ObjectAddressSet(extension, ExtensionRelationId,
					 get_extension_oid(DJ_EXTENSION_NAME, false));
	deleteDependencyRecordsForSpecific(RelationRelationId, query_view, DEPENDENCY_NORMAL,
									   ExtensionRelationId, extension.objectId);
	recordDependencyOn(&view, &extension, DEPENDENCY_NORMAL);
}

/*
 * The query bound in a query view, as analyzed at creation (a copy, in the
 * caller's memory context).
 */
Query *
query_load(Oid query_view)
{
	Relation	rel = relation_open(query_view, AccessShareLock);
	Query	   *query;

	if (rel->rd_rel->relkind != RELKIND_VIEW)
		elog(ERROR, "\"%s\" is not the query view of a delta view", RelationGetRelationName(rel));
	query = copyObject(get_view_query(rel));
	relation_close(rel, AccessShareLock);

	/* drop the OLD and NEW placeholders StoreViewQuery put in front (15) */
	compat_drop_view_placeholders(query, query_view);
	return query;
}

/*
 * Keep a query view's name and owner in line with its target's: called
 * after DDL on the target (guard.c).  The owner matters beyond tidiness:
 * DROP OWNED and DROP ROLE of the target's old owner must not trip over a
 * query view it still owns.
 */
void
query_follow_target(Oid query_view, Oid target)
{
	Relation	rel = relation_open(query_view, AccessExclusiveLock);
	Oid			owner = runas_target_owner(target);
	Oid			nspid = RelationGetNamespace(rel);
	bool		rename;
	RunAs		runas;

	/* a name taken with a suffix stays unless the target moved */
	rename = !query_view_name_fits(RelationGetRelationName(rel), target);

	/*
	 * This runs from an event trigger, after the command that collected
	 * what ALTER TABLE subcommands did has ended: collect nothing.
	 */
	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);
	EventTriggerInhibitCommandCollection();
	if (rel->rd_rel->relowner != owner)
	{
		AlterTableCmd *cmd = makeNode(AlterTableCmd);

		cmd->subtype = AT_ChangeOwner;
		cmd->newowner = makeNode(RoleSpec);
		cmd->newowner->roletype = ROLESPEC_CSTRING;
		cmd->newowner->rolename = GetUserNameFromId(owner, false);
		AlterTableInternal(query_view, list_make1(cmd), false);
	}
	if (rename)
		RenameRelationInternal(query_view, query_view_name(target, nspid), false, false);
	CommandCounterIncrement();
	EventTriggerUndoInhibitCommandCollection();
	runas_end(&runas);

	relation_close(rel, NoLock);
}

/*
 * Drop a query view, as its creator, with whatever was built on it: the
 * query goes with its delta view.
 */
void
query_drop(Oid query_view)
{
	ObjectAddress object;
	RunAs		runas;

	if (!OidIsValid(query_view) || get_rel_relkind(query_view) != RELKIND_VIEW)
		return;
	ObjectAddressSet(object, RelationRelationId, query_view);
	runas_begin(BOOTSTRAP_SUPERUSERID, NULL, &runas);
	performDeletion(&object, DROP_CASCADE, PERFORM_DELETION_INTERNAL);
	runas_end(&runas);
}

/* The output columns of a query: the expressions of its select list's non-junk entries */
List *
query_output_exprs(Query *query)
{
	List	   *exprs = NIL;
	ListCell   *lc;

	foreach(lc, query->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk)
			exprs = lappend(exprs, tle->expr);
	}
	return exprs;
}
