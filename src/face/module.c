/*-------------------------------------------------------------------------
 *
 * module.c
 *	  Entry point of the delta_join library: _PG_init's wiring, the check
 *	  CREATE EXTENSION makes of the server's configuration, and the hint
 *	  the errors of the streaming engine's statements get.
 *
 * _PG_init runs in every process that loads the library.  It has each
 * layer define its delta_join.* settings, which live beside their readers
 * (base/options.c the defaults of new views' options, process/parallel.c
 * how many processes apply, process/share.c which batches they share,
 * base/shmem.c the sizes of shared memory), and installs the
 * emit_log_hook; only while the postmaster loads
 * shared_preload_libraries does it also offer the apply workers the Citus
 * layer's hooks (node_init) and set up shared memory and the launcher
 * (launcher_init).  A library loaded later, by a backend calling one of our
 * functions, has settings but no worker and no shared memory:
 * dj_check_environment refuses to install the extension on such a server,
 * and on a server whose WAL cannot be decoded, rather than letting views
 * be created that nothing would maintain.
 *
 * With shared memory, it also installs a ProcessUtility hook for the
 * commands on a database that core refuses while a process is connected
 * to it (the apply worker is) -- CREATE DATABASE ... TEMPLATE, ALTER
 * DATABASE ... RENAME or SET TABLESPACE, DROP DATABASE -- or, for DROP
 * DATABASE, while the database has a slot: the launcher stops the worker,
 * and for DROP DATABASE drops the slot, when nothing else would stop the
 * command (launcher_pause_worker, launcher_before_drop_database).
 *
 * The hint is the face's own: PostgreSQL refuses the engine's statements
 * in its parser, before any of our code runs, and the error's report is the
 * one place left to say what to write instead (analysis/dialect_statement.c
 * finds the words).
 *
 * IDENTIFICATION
 *	  src/face/module.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "access/xlog.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "tcop/tcopprot.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/varlena.h"

#include "base/delta_join.h"
#include "base/options.h"
#include "analysis/dialect.h"
#include "apply/recompute.h"
#include "base/shmem.h"
#include "citus/node.h"
#include "process/launcher.h"
#include "process/parallel.h"
#include "process/retry.h"
#include "process/share.h"

PG_MODULE_MAGIC;

/* Whether this process got the library through shared_preload_libraries. */
static bool dj_preloaded = false;

static emit_log_hook_type prev_emit_log_hook = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

void		_PG_init(void);

static char *config_line_adding(const char *name, const char *current);
static void dj_emit_log(ErrorData *edata);
static void dj_process_utility(PlannedStmt *pstmt, const char *queryString,
							   bool readOnlyTree, ProcessUtilityContext context,
							   ParamListInfo params, QueryEnvironment *queryEnv,
							   DestReceiver *dest, QueryCompletion *qc);

PG_FUNCTION_INFO_V1(dj_check_environment);


/* ----------------
 * Start-up
 * ----------------
 */

/*
 * Module load callback: define the settings and, when preloaded by the
 * postmaster, set up the worker machinery.
 */
void
_PG_init(void)
{
	options_define_settings();
	parallel_define_settings();
	recompute_define_settings();
	retry_define_settings();
	share_define_settings();
	shmem_define_settings();

	MarkGUCPrefixReserved("delta_join");

	prev_emit_log_hook = emit_log_hook;
	emit_log_hook = dj_emit_log;

	if (!process_shared_preload_libraries_in_progress)
		return;

	dj_preloaded = true;
	node_init();
	launcher_init();
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = dj_process_utility;
}

/* The option called name of a CREATE, ALTER or DROP DATABASE, or NULL */
static DefElem *
database_option(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *opt = lfirst(lc);

		if (strcmp(opt->defname, name) == 0)
			return opt;
	}
	return NULL;
}

/*
 * Commands on a database that core refuses while any process is connected
 * to it, our apply worker included, or (DROP DATABASE) while it has a
 * replication slot: the launcher stops the worker first, and drops the
 * slot for DROP DATABASE, when the command can then go through (launcher.c).
 * Outside a transaction block only, as core runs them.
 */
static void
dj_process_utility(PlannedStmt *pstmt, const char *queryString, bool readOnlyTree,
				   ProcessUtilityContext context, ParamListInfo params,
				   QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (context == PROCESS_UTILITY_TOPLEVEL && !IsTransactionBlock())
	{
		if (IsA(parsetree, DropdbStmt))
		{
			DropdbStmt *stmt = (DropdbStmt *) parsetree;

			launcher_before_drop_database(stmt->dbname,
										  database_option(stmt->options, "force") != NULL);
		}
		else if (IsA(parsetree, CreatedbStmt))
		{
			DefElem    *template = database_option(((CreatedbStmt *) parsetree)->options,
												   "template");

			if (template != NULL && template->arg != NULL)
				launcher_pause_worker(defGetString(template), ShareLock, false);
		}
		else if (IsA(parsetree, RenameStmt) &&
				 ((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
			launcher_pause_worker(((RenameStmt *) parsetree)->subname, AccessExclusiveLock, false);
		else if (IsA(parsetree, AlterDatabaseStmt) &&
				 database_option(((AlterDatabaseStmt *) parsetree)->options,
								 "tablespace") != NULL)
			launcher_pause_worker(((AlterDatabaseStmt *) parsetree)->dbname,
								  AccessExclusiveLock, true);
	}
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}


/*
 * The streaming engine's users type its job's statements first:
 * SET 'table.optimizer.delta-join.strategy' = 'EVENTUAL' fails in
 * PostgreSQL's parser, before any of our code runs, with nothing to say
 * what to write instead.  Its error report is the one place left to say
 * it: a syntax error (or an invalid setting name) with no hint, caused by
 * such a statement, gets a hint naming the setting that plays the part
 * (dialect_statement_hint).  Runs in ErrorContext; raises nothing.
 */
static void
dj_emit_log(ErrorData *edata)
{
	if (edata->elevel == ERROR && edata->output_to_client && edata->hint == NULL &&
		debug_query_string != NULL &&
		(edata->sqlerrcode == ERRCODE_SYNTAX_ERROR || edata->sqlerrcode == ERRCODE_INVALID_NAME))
		edata->hint = dialect_statement_hint(debug_query_string);
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}


/* ----------------
 * Environment check
 * ----------------
 */

/*
 * The postgresql.conf line that sets the list-valued parameter "name" to its
 * current value with delta_join appended, e.g.
 *	output_plugin_libraries = 'pgoutput, test_decoding, delta_join'
 * The current value is kept as written, so the administrator recognises it.
 */
static char *
config_line_adding(const char *name, const char *current)
{
	StringInfoData buf;
	int			len = strlen(current);
	const char *p;

	/* drop trailing blanks and separators, so we can append ", delta_join" */
	while (len > 0 && (current[len - 1] == ' ' || current[len - 1] == '\t' ||
					   current[len - 1] == ','))
		len--;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s = '", name);
	for (p = current; p < current + len; p++)
	{
		/* a quote inside a postgresql.conf string is written twice */
		if (*p == '\'')
			appendStringInfoChar(&buf, '\'');
		appendStringInfoChar(&buf, *p);
	}
	if (len > 0)
		appendStringInfoString(&buf, ", ");
	appendStringInfoString(&buf, DJ_PLUGIN_NAME "'");
	return buf.data;
}

/*
 * Does the comma-separated list of library names "value" name delta_join?
 * Names are read the way the server reads the list: as identifiers,
 * lower-cased unless double-quoted.
 */
static bool
library_list_has_delta_join(const char *value)
{
	char	   *rawstring = pstrdup(value);
	List	   *names;
	ListCell   *lc;
	bool		found = false;

	if (!SplitIdentifierString(rawstring, ',', &names))
		elog(ERROR, "could not parse library list \"%s\"", value);

	foreach(lc, names)
	{
		if (strcmp((const char *) lfirst(lc), DJ_PLUGIN_NAME) == 0)
		{
			found = true;
			break;
		}
	}
	list_free(names);
	pfree(rawstring);
	return found;
}

/*
 * delta_join._check_environment()
 *
 * Called by the install script, so that CREATE EXTENSION fails on a server
 * that could not maintain delta views, naming the setting to change.  Views
 * need the library preloaded (for the launcher and shared memory), WAL that
 * logical decoding can read, and, on servers that restrict output plugins
 * (output_plugin_libraries, added in a 15 minor release), permission to use
 * delta_join as one.  Other settings are the administrator's business: we
 * never change any of them.
 */
Datum
dj_check_environment(PG_FUNCTION_ARGS)
{
	const char *plugins;

	if (!dj_preloaded)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta_join must be loaded via shared_preload_libraries"),
				 errdetail("Delta views are maintained by background workers that only a preloaded library can start."),
				 errhint("Add the line \"%s\" to postgresql.conf and restart the server.",
						 config_line_adding("shared_preload_libraries",
											GetConfigOption("shared_preload_libraries",
															false, false)))));

	if (wal_level < WAL_LEVEL_LOGICAL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta_join requires wal_level = logical"),
				 errdetail("Delta views are maintained by logical decoding, and wal_level is \"%s\".",
						   GetConfigOption("wal_level", false, false)),
				 errhint("Add the line \"wal_level = logical\" to postgresql.conf and restart the server.")));

	/* NULL when this server has no such parameter: any plugin may be used */
	plugins = GetConfigOption("output_plugin_libraries", true, false);
	if (plugins != NULL && !library_list_has_delta_join(plugins))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("delta_join is not allowed as an output plugin"),
				 errdetail("Delta views are maintained through delta_join's own output plugin, and output_plugin_libraries is \"%s\".",
						   plugins),
				 errhint("Add the line \"%s\" to postgresql.conf and reload the server configuration.",
						 config_line_adding("output_plugin_libraries", plugins))));

	PG_RETURN_VOID();
}
