/*-------------------------------------------------------------------------
 *
 * runas.c
 *	  Who code runs as, and with which settings (see runas.h).
 *
 * The pinned settings are those whose value changes what a built-in stable
 * function returns for the same input: the time zone and date/interval
 * styles (timestamptz::text, ::date, to_char, ...), float output, the
 * lc_* categories that can be set per session, bytea output, the default
 * text search configuration, the XML options, how array input reads NULL,
 * and the time zone abbreviations timestamp input knows.  Rule 4 (determinism.c) lets
 * stable built-ins through because of this pinning.
 *
 * A runas_begin() is undone by runas_end(), or by the abort of the
 * (sub)transaction it ran in: the settings live in a GUC nest level, the
 * user ID change is reset by the abort, and the error context is popped by
 * the PG_CATCH or the error recovery that catches it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/resowner.h"
#include "utils/syscache.h"

#include "base/runas.h"

static const char *const pinned_settings[] = {
	"TimeZone",
	"DateStyle",
	"IntervalStyle",
	"extra_float_digits",
	"lc_monetary",
	"lc_numeric",
	"lc_time",
	"bytea_output",
	"default_text_search_config",
	"xmlbinary",
	"xmloption",
	"array_nulls",
	"timezone_abbreviations",
};

/*
 * Settings that change what a query returns, held at their defaults while
 * a view is evaluated: a GIN search that returns a random part of its
 * matches, identifiers quoted by quote_ident() and the like.
 */
static const char *const fixed_settings[][2] = {
	{"gin_fuzzy_search_limit", "0"},
	{"quote_all_identifiers", "off"},
};

/*
 * The current values of the pinned settings, as a jsonb object
 * {"TimeZone": "Europe/Paris", ...}.
 */
Jsonb *
runas_capture_settings(void)
{
	JsonbParseState *state = NULL;
	JsonbValue *result;

	pushJsonbValue(&state, WJB_BEGIN_OBJECT, NULL);
	for (size_t i = 0; i < lengthof(pinned_settings); i++)
	{
		const char *value = GetConfigOption(pinned_settings[i], true, false);
		JsonbValue	v;

		if (value == NULL)
			continue;
		v.type = jbvString;
		v.val.string.val = (char *) pinned_settings[i];
		v.val.string.len = strlen(pinned_settings[i]);
		pushJsonbValue(&state, WJB_KEY, &v);
		v.val.string.val = (char *) value;
		v.val.string.len = strlen(value);
		pushJsonbValue(&state, WJB_VALUE, &v);
	}
	result = pushJsonbValue(&state, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(result);
}

/*
 * Is name one of the settings a view pins?  Only those are taken from its
 * record: a record a role could write (a distributed view's, on a Citus
 * node) must not set anything else, with the rights of the process that
 * applies it.
 */
static bool
pinned_setting(const char *name)
{
	for (size_t i = 0; i < lengthof(pinned_settings); i++)
	{
		if (pg_strcasecmp(name, pinned_settings[i]) == 0)
			return true;
	}
	return false;
}

/* Set one setting for the current GUC nest level. */
static void
set_one(const char *name, const char *value)
{
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/*
 * The context of an error raised while a view's query runs, where the
 * error may come from the search_path alone: a function of the query that
 * looks a name up on it finds it in the caller's session, not here.
 */
static void
runas_error_context(void *arg)
{
	switch (geterrcode())
	{
		case ERRCODE_UNDEFINED_FUNCTION:
		case ERRCODE_UNDEFINED_TABLE:
		case ERRCODE_UNDEFINED_OBJECT:
			errcontext("delta_join evaluates a view's query with search_path = %s: "
					   "a function it calls must qualify the names it uses with their schema, "
					   "or set its own search_path (ALTER FUNCTION ... SET search_path)",
					   RUNAS_SEARCH_PATH);
			break;
		default:
			break;
	}
}

/*
 * Run as role, as a security-restricted operation (no function it runs
 * can change the session), with search_path = pg_catalog, pg_temp and the
 * given pinned settings (NULL: none), until runas_end().
 */
void
runas_begin(Oid role, Jsonb *settings, RunAs *runas)
{
	runas->errcb.callback = NULL;
	GetUserIdAndSecContext(&runas->save_userid, &runas->save_sec_context);
	runas->nestlevel = NewGUCNestLevel();
	set_one("search_path", RUNAS_SEARCH_PATH);

	if (settings != NULL)
	{
		JsonbIterator *it = JsonbIteratorInit(&settings->root);
		JsonbValue	v;
		JsonbIteratorToken tok;
		char	   *name = NULL;

		/* settings that change results and are not the view's to choose */
		for (size_t i = 0; i < lengthof(fixed_settings); i++)
			set_one(fixed_settings[i][0], fixed_settings[i][1]);

		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (tok == WJB_KEY)
				name = pnstrdup(v.val.string.val, v.val.string.len);
			else if (tok == WJB_VALUE && name != NULL && v.type == jbvString &&
					 pinned_setting(name))
				set_one(name, pnstrdup(v.val.string.val, v.val.string.len));
		}
	}

	SetUserIdAndSecContext(role,
						   runas->save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
}

/*
 * runas_begin() to evaluate a view's query: an error on a name not found
 * also says why (runas_error_context), until runas_end().
 */
void
runas_begin_view(Oid role, Jsonb *settings, RunAs *runas)
{
	runas_begin(role, settings, runas);
	runas->errcb.callback = runas_error_context;
	runas->errcb.arg = NULL;
	runas->errcb.previous = error_context_stack;
	error_context_stack = &runas->errcb;
}

/*
 * Back to the caller's role and settings.  Every setting changed since
 * runas_begin() is undone, those the evaluated code changed with
 * set_config() included (as REFRESH MATERIALIZED VIEW does): the query's
 * functions never change the session that ran them.
 */
void
runas_end(RunAs *runas)
{
	SetUserIdAndSecContext(runas->save_userid, runas->save_sec_context);
	AtEOXact_GUC(false, runas->nestlevel);
	if (runas->errcb.callback != NULL)
	{
		/* (after an error caught since runas_begin_view, already popped) */
		Assert(error_context_stack == &runas->errcb ||
			   error_context_stack == runas->errcb.previous);
		error_context_stack = runas->errcb.previous;
	}
}

/* The owner of a target table, read now. */
Oid
runas_target_owner(Oid target)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(target));
	Oid			owner;

	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("target table %u of a delta view does not exist", target)));
	owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	return owner;
}

/*
 * Run fn(arg) in a subtransaction rolled back after, whatever it did: the
 * locks it took are free again.  Its error is raised as the caller's.
 */
void
run_rolled_back(void (*fn) (void *arg), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		fn(arg);
	}
	PG_CATCH();
	{
		ErrorData  *error;

		MemoryContextSwitchTo(cxt);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		ReThrowError(error);
	}
	PG_END_TRY();
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}
