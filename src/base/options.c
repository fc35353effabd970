/*-------------------------------------------------------------------------
 *
 * options.c
 *	  The settings of a view: GUC defaults, the options jsonb of create_view,
 *	  and per-table hints written as comments in the query text.
 *
 * A view's effective options are resolved once, at creation, and stored in
 * view_catalog.options as a complete jsonb object; the worker reads them back
 * through the same function, so a later change of a session GUC does not
 * change a running view.
 *
 * Hints follow the streaming engines' syntax and sit right after a table in
 * the FROM list:
 *
 *		FROM orders /\*+ OPTIONS('cache_size'='50000') *\/ AS o
 *
 * Postgres's parser drops comments: dialect.c finds the hints in the text
 * and ties them to the tables they follow; this file reads what they say.
 *
 * Users of the streaming engine come with its parameter names and values:
 * every parameter of its Delta Join and Delta Aggregate documentation is
 * accepted under its own name, as a view option and, for the lookup
 * client's parameters, as a table hint.  Each either sets the option that
 * plays its part here (table.exec.delta-join.cache-enabled is
 * cache_enabled, client.lookup.batch-timeout is batch_timeout ...), or is
 * kept only for explain() to say that it does not apply and which knob
 * does (the asynchronous client's queue and in-flight limits).  Their
 * values may be written as the engine writes them: 'AUTO', 'true',
 * '10000', durations such as '3min', '10 s' or '1 minute'.
 *
 * View options and table hints are one file (about 1,060 lines) because
 * one table-driven reader serves both (OptionSpec, set_option): the
 * engine's lookup-client parameters are at once view options and table
 * hints, and a hint that names a view option is told so.  Split, that
 * reader's internals would become the interface between the halves.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>

#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/varlena.h"

#include "base/options.h"

/* ----------------
 * Settings: the defaults of new views' options
 * ----------------
 */
int			dj_strategy = DJ_STRATEGY_EVENTUAL;
bool		dj_ignore_non_unique_key_filter = false;
bool		dj_cache_enabled = false;
int			dj_left_cache_size = 10000;
int			dj_right_cache_size = 10000;
int			dj_max_batch_size = 10000;
int			dj_batch_timeout_ms = 100;
int			dj_lookup_timeout_ms = 3 * 60 * 1000;

/*
 * Strategy names, as the delta_join.strategy setting and the strategy
 * argument of create_view and explain accept them.  "force" is the streaming
 * engines' name for "eventual"; it is accepted but not listed.
 */
static const struct config_enum_entry strategy_options[] = {
	{"none", DJ_STRATEGY_NONE, false},
	{"auto", DJ_STRATEGY_AUTO, false},
	{"eventual", DJ_STRATEGY_EVENTUAL, false},
	{"force", DJ_STRATEGY_EVENTUAL, true},
	{NULL, 0, false}
};

/*
 * Define the delta_join.* settings that are the defaults of new views'
 * options (_PG_init): a view takes them at creation and keeps them.
 */
void
options_define_settings(void)
{
	DefineCustomEnumVariable("delta_join.strategy",
							 "Default strategy of new delta views.",
							 "\"eventual\" (alias \"force\") creates a delta view "
							 "or fails; \"auto\" falls back to a slower method "
							 "when the query is not eligible; \"none\" always "
							 "uses the fallback.",
							 &dj_strategy,
							 DJ_STRATEGY_EVENTUAL,
							 strategy_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("delta_join.ignore_non_unique_key_filter",
							 "Accepts filters on columns outside the result's unique key.",
							 "Such a filter can stop matching a row that was "
							 "already written, and the earlier row then stays "
							 "in the target.",
							 &dj_ignore_non_unique_key_filter,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomBoolVariable("delta_join.cache_enabled",
							 "Caches lookup results in the apply worker.",
							 "Cached entries are invalidated by the changes the "
							 "worker decodes.",
							 &dj_cache_enabled,
							 false,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	DefineCustomIntVariable("delta_join.left_cache_size",
							"Keys cached for the left side of a join when the cache is enabled.",
							NULL,
							&dj_left_cache_size,
							10000,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delta_join.right_cache_size",
							"Keys cached for the right side of a join when the cache is enabled.",
							NULL,
							&dj_right_cache_size,
							10000,
							0, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delta_join.max_batch_size",
							"Most distinct dirty keys of a view applied in one transaction.",
							NULL,
							&dj_max_batch_size,
							10000,
							1, INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delta_join.batch_timeout",
							"Most time a batch waits to fill before it is applied.",
							NULL,
							&dj_batch_timeout_ms,
							100,
							0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("delta_join.lookup_timeout",
							"Statement timeout of one apply batch.",
							"Zero disables the timeout.",
							&dj_lookup_timeout_ms,
							3 * 60 * 1000,
							0, INT_MAX,
							PGC_USERSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);
}


/*
 * The canonical name of a strategy.
 */
const char *
dj_strategy_name(DeltaStrategy strategy)
{
	switch (strategy)
	{
		case DJ_STRATEGY_NONE:
			return "none";
		case DJ_STRATEGY_AUTO:
			return "auto";
		case DJ_STRATEGY_EVENTUAL:
			return "eventual";
	}
	elog(ERROR, "unrecognized delta_join strategy: %d", (int) strategy);
	return NULL;				/* keep compiler quiet */
}

/*
 * Parse a strategy name, ignoring case; "force" means eventual.  Returns
 * false, leaving *strategy alone, when the name is not a strategy.
 */
bool
dj_parse_strategy(const char *name, DeltaStrategy *strategy)
{
	const struct config_enum_entry *entry;

	for (entry = strategy_options; entry->name != NULL; entry++)
	{
		if (pg_strcasecmp(entry->name, name) == 0)
		{
			*strategy = (DeltaStrategy) entry->val;
			return true;
		}
	}
	return false;
}


/* The name of a path, as view_catalog.path stores it */
const char *
dj_path_name(DeltaPath path)
{
	switch (path)
	{
		case DJ_PATH_DELTA:
			return "delta";
		case DJ_PATH_KEYED:
			return "keyed";
		case DJ_PATH_FULL:
			return "full";
		case DJ_PATH_JOIN_GROUPS:
			return "join groups";
	}
	return "delta";
}

/* Parse a path name; false when the name is none */
bool
dj_parse_path(const char *name, DeltaPath *path)
{
	for (int p = DJ_PATH_DELTA; p <= DJ_PATH_JOIN_GROUPS; p++)
	{
		if (strcmp(name, dj_path_name((DeltaPath) p)) == 0)
		{
			*path = (DeltaPath) p;
			return true;
		}
	}
	return false;
}

/*
 * A relation's name, perhaps qualified, as a message shows it: in double
 * quotes, as messages quote names -- unless it holds quotes already (a name
 * that needed them, as quote_qualified_identifier writes it), which more
 * quotes would only obscure: "public.orders", but "Sales"."Orders" as is.
 */
const char *
dj_message_name(const char *name)
{
	if (strchr(name, '"') != NULL)
		return name;
	return psprintf("\"%s\"", name);
}

/*
 * Copy text into a buffer of size bytes in shared memory, cut at a
 * character's boundary: a multibyte character cut in two would be an
 * invalid string, which a client of another encoding could not read.
 */
void
dj_text_copy(char *dst, const char *src, size_t size)
{
	int			len = pg_mbcliplen(src, strlen(src), size - 1);

	memcpy(dst, src, len);
	dst[len] = '\0';
}

/* The name of a kind, as view_catalog.kind stores it */
const char *
dj_kind_name(DeltaKind kind)
{
	return kind == DJ_KIND_JOIN ? "join" : kind == DJ_KIND_AGGREGATE ? "aggregate" : "query";
}

typedef enum OptionType
{
	OPT_BOOL,
	OPT_INT,
	OPT_MS,						/* a duration, in milliseconds */
	OPT_STRATEGY,
	OPT_KIND_BOOL,				/* an int field: 0, 1, or -1 (not given) */
	OPT_KIND_STRATEGY			/* an int field: a DeltaStrategy, or -1 */
} OptionType;

typedef struct OptionSpec
{
	const char *name;
	OptionType	type;
	size_t		offset;			/* into DeltaOptions or DeltaHint */
	int			min;
	int			max;
	bool		engine;			/* the streaming engine's name */
} OptionSpec;

/*
 * View options.  Several names may set one field: delta_join's own, and
 * the streaming engine's (README, "The streaming engine's names").  The
 * engine's per-kind names set engine_strategy and engine_ignore_filter,
 * settled by options_settle().
 */
static const OptionSpec option_specs[] = {
	{"strategy", OPT_STRATEGY, offsetof(DeltaOptions, strategy), 0, 0, false},
	{"ignore_non_unique_key_filter", OPT_BOOL, offsetof(DeltaOptions, ignore_non_unique_key_filter), 0, 0, false},
	{"cache_enabled", OPT_BOOL, offsetof(DeltaOptions, cache_enabled), 0, 0, false},
	{"left_cache_size", OPT_INT, offsetof(DeltaOptions, left_cache_size), 0, INT_MAX, false},
	{"right_cache_size", OPT_INT, offsetof(DeltaOptions, right_cache_size), 0, INT_MAX, false},
	{"max_batch_size", OPT_INT, offsetof(DeltaOptions, max_batch_size), 1, INT_MAX, false},
	{"batch_timeout", OPT_MS, offsetof(DeltaOptions, batch_timeout_ms), 0, INT_MAX, false},
	{"lookup_timeout", OPT_MS, offsetof(DeltaOptions, lookup_timeout_ms), 0, INT_MAX, false},
	{"retract", OPT_BOOL, offsetof(DeltaOptions, retract), 0, 0, false},
	{"manual_writes", OPT_BOOL, offsetof(DeltaOptions, manual_writes), 0, 0, false},
	{"refresh_interval", OPT_MS, offsetof(DeltaOptions, refresh_interval_ms), 0, INT_MAX, false},
	{"table.optimizer.delta-join.strategy", OPT_KIND_STRATEGY,
	offsetof(DeltaOptions, engine_strategy[DJ_ENGINE_JOIN]), 0, 0, true},
	{"table.optimizer.delta-agg.strategy", OPT_KIND_STRATEGY,
	offsetof(DeltaOptions, engine_strategy[DJ_ENGINE_AGG]), 0, 0, true},
	{"table.optimizer.delta-join.ignore-non-unique-key-filter", OPT_KIND_BOOL,
	offsetof(DeltaOptions, engine_ignore_filter[DJ_ENGINE_JOIN]), 0, 0, true},
	{"table.optimizer.delta-agg.ignore-non-unique-key-filter", OPT_KIND_BOOL,
	offsetof(DeltaOptions, engine_ignore_filter[DJ_ENGINE_AGG]), 0, 0, true},
	{"table.exec.delta-join.cache-enabled", OPT_BOOL, offsetof(DeltaOptions, cache_enabled), 0, 0, true},
	{"table.exec.delta-join.left.cache-size", OPT_INT, offsetof(DeltaOptions, left_cache_size), 0, INT_MAX, true},
	{"table.exec.delta-join.right.cache-size", OPT_INT, offsetof(DeltaOptions, right_cache_size), 0, INT_MAX, true},
	{"table.exec.async-lookup.buffer-capacity", OPT_INT, offsetof(DeltaOptions, seed_buffer_capacity), 0, INT_MAX, true},
	{"table.exec.async-lookup.timeout", OPT_MS, offsetof(DeltaOptions, lookup_timeout_ms), 0, INT_MAX, true},
	{"client.lookup.queue-size", OPT_INT, offsetof(DeltaOptions, seed_queue_size), 0, INT_MAX, true},
	{"client.lookup.max-batch-size", OPT_INT, offsetof(DeltaOptions, seed_max_batch_size), 1, INT_MAX, true},
	{"client.lookup.max-inflight-requests", OPT_INT, offsetof(DeltaOptions, seed_max_inflight), 0, INT_MAX, true},
	{"client.lookup.batch-timeout", OPT_MS, offsetof(DeltaOptions, batch_timeout_ms), 0, INT_MAX, true},
};

/*
 * Table hint options.  The lookup client's parameters are table options of
 * the streaming engine, which its users may set per table by hint.
 */
static const OptionSpec hint_specs[] = {
	{"cache_size", OPT_INT, offsetof(DeltaHint, cache_size), 0, INT_MAX, false},
	{"cache_enabled", OPT_BOOL, offsetof(DeltaHint, cache_enabled), 0, 0, false},
	{"lookup_only", OPT_BOOL, offsetof(DeltaHint, lookup_only), 0, 0, false},
	{"client.lookup.queue-size", OPT_INT, offsetof(DeltaHint, seed_queue_size), 0, INT_MAX, true},
	{"client.lookup.max-batch-size", OPT_INT, offsetof(DeltaHint, seed_max_batch_size), 1, INT_MAX, true},
	{"client.lookup.max-inflight-requests", OPT_INT, offsetof(DeltaHint, seed_max_inflight), 0, INT_MAX, true},
	{"client.lookup.batch-timeout", OPT_MS, offsetof(DeltaHint, batch_timeout_ms), 0, INT_MAX, true},
	{"table.exec.async-lookup.buffer-capacity", OPT_INT, offsetof(DeltaHint, seed_buffer_capacity), 0, INT_MAX, true},
};

/*
 * The streaming engine's query hints (after SELECT): how it executes a
 * stream join.  A delta view looks its sources up through their indexes,
 * and the planner chooses the joins of a recompute, so they are accepted
 * and play no part.
 */
static const char *const engine_query_hints[] = {
	"BROADCAST", "SHUFFLE_HASH", "SHUFFLE_MERGE", "NEST_LOOP", "LOOKUP", "STATE_TTL",
};

/* ----------------------------------------------------------------
 *		Setting one option from text
 * ----------------------------------------------------------------
 */

static const OptionSpec *
find_spec(const OptionSpec *specs, int nspecs, const char *name)
{
	for (int i = 0; i < nspecs; i++)
		if (strcmp(specs[i].name, name) == 0)
			return &specs[i];
	return NULL;
}

static void
bad_value(const char *what, const OptionSpec *spec, const char *value,
		  const char *expected)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for %s \"%s\": \"%s\"", what, spec->name, value),
			 errhint("%s", expected)));
}

/*
 * A duration as the streaming engine writes it: digits, blanks, and a unit
 * in any case ('10 sec', '1 minute', '2 m', '5 SECONDS'), in milliseconds.
 * PostgreSQL's own forms are read by parse_real before this is tried.
 */
static bool
parse_engine_duration(const char *value, double *ms)
{
	static const struct
	{
		const char *unit;
		double		ms;
	}			units[] = {
		{"d", 86400000.0}, {"day", 86400000.0}, {"days", 86400000.0},
		{"h", 3600000.0}, {"hour", 3600000.0}, {"hours", 3600000.0},
		{"min", 60000.0}, {"m", 60000.0}, {"minute", 60000.0}, {"minutes", 60000.0},
		{"s", 1000.0}, {"sec", 1000.0}, {"secs", 1000.0}, {"second", 1000.0}, {"seconds", 1000.0},
		{"ms", 1.0}, {"milli", 1.0}, {"millis", 1.0}, {"millisecond", 1.0}, {"milliseconds", 1.0},
		{"\302\265s", 0.001}, {"micro", 0.001}, {"micros", 0.001},
		{"microsecond", 0.001}, {"microseconds", 0.001},
		{"ns", 0.000001}, {"nano", 0.000001}, {"nanos", 0.000001},
		{"nanosecond", 0.000001}, {"nanoseconds", 0.000001},
	};
	const char *p = value;
	double		number = 0;
	char		unit[16];
	int			len = 0;

	while (isspace((unsigned char) *p))
		p++;
	if (!isdigit((unsigned char) *p))
		return false;
	while (isdigit((unsigned char) *p))
		number = number * 10 + (*p++ - '0');
	while (isspace((unsigned char) *p))
		p++;
	while (*p && !isspace((unsigned char) *p))
	{
		if (len == sizeof(unit) - 1)
			return false;
		unit[len++] = pg_ascii_tolower((unsigned char) *p++);
	}
	unit[len] = '\0';
	while (isspace((unsigned char) *p))
		p++;
	if (*p != '\0')
		return false;
	for (size_t i = 0; i < lengthof(units); i++)
	{
		if (strcmp(unit, units[i].unit) == 0)
		{
			*ms = rint(number * units[i].ms);
			return true;
		}
	}
	return false;
}

/* Bytes of the field an option sets */
static size_t
field_size(const OptionSpec *spec)
{
	return spec->type == OPT_BOOL ? sizeof(bool) : sizeof(int);
}

/*
 * Store the text value of one option into the struct at base.  "what" names
 * the kind of option in messages ("option" or "table hint").
 */
static void
set_option(void *base, const char *what, const OptionSpec *spec, const char *value)
{
	char	   *field = (char *) base + spec->offset;

	switch (spec->type)
	{
		case OPT_BOOL:
		case OPT_KIND_BOOL:
			{
				bool		b;

				if (!parse_bool(value, &b))
					bad_value(what, spec, value, "The value must be true or false.");
				if (spec->type == OPT_BOOL)
					*(bool *) field = b;
				else
					*(int *) field = b ? 1 : 0;
			}
			break;
		case OPT_INT:
			{
				int			v;
				const char *overflow = NULL;
				char	   *range = psprintf("The value must be between %d and %d.",
											 spec->min, spec->max);

				/* a hint from parse_int: out of int's range */
				if (!parse_int(value, &v, 0, &overflow))
					bad_value(what, spec, value,
							  overflow ? range : "The value must be an integer.");
				if (v < spec->min || v > spec->max)
					bad_value(what, spec, value, range);
				*(int *) field = v;
			}
			break;
		case OPT_MS:
			{
				double		ms;

				if (!parse_real(value, &ms, GUC_UNIT_MS, NULL) &&
					!parse_engine_duration(value, &ms))
					bad_value(what, spec, value,
							  "The value must be a duration: a number of milliseconds, or a number and a unit, "
							  "as in '250ms', '10 s', '3min' or '1 minute'.");
				ms = rint(ms);
				if (ms < spec->min || ms > spec->max)
					bad_value(what, spec, value,
							  psprintf("The value must be between %d and %d milliseconds.",
									   spec->min, spec->max));
				*(int *) field = (int) ms;
			}
			break;
		case OPT_STRATEGY:
		case OPT_KIND_STRATEGY:
			{
				DeltaStrategy strategy;

				if (!dj_parse_strategy(value, &strategy))
					bad_value(what, spec, value,
							  "Valid strategies are none, auto and eventual (or force).");
				if (spec->type == OPT_STRATEGY)
					*(DeltaStrategy *) field = strategy;
				else
					*(int *) field = (int) strategy;
			}
			break;
	}
}

/*
 * The delta_join.* setting that plays the part of the streaming engine's
 * parameter "name" ("delta_join.strategy" for
 * table.optimizer.delta-join.strategy), or NULL when none does (the
 * asynchronous client's limits); *known tells whether name is one of the
 * engine's parameters at all.  Called while an error is being reported
 * (module.c): looks names up and raises nothing.
 */
const char *
options_engine_setting(const char *name, bool *known)
{
	static const char *const settings[] = {
		"strategy", "ignore_non_unique_key_filter", "cache_enabled", "left_cache_size",
		"right_cache_size", "max_batch_size", "batch_timeout", "lookup_timeout",
	};
	const OptionSpec *spec = find_spec(option_specs, lengthof(option_specs), name);
	const char *option = NULL;

	*known = (spec != NULL && spec->engine);
	if (!*known)
		return NULL;
	if (spec->type == OPT_KIND_STRATEGY)
		option = "strategy";
	else if (spec->type == OPT_KIND_BOOL)
		option = "ignore_non_unique_key_filter";
	else
	{
		for (size_t i = 0; i < lengthof(option_specs); i++)
			if (!option_specs[i].engine && option_specs[i].offset == spec->offset)
				option = option_specs[i].name;
	}
	for (size_t i = 0; option != NULL && i < lengthof(settings); i++)
		if (strcmp(settings[i], option) == 0)
			return psprintf("delta_join.%s", option);
	return NULL;
}

/* "a, b, c (and the streaming engine's d, e)": the names of specs */
static char *
spec_names(const OptionSpec *specs, int nspecs)
{
	StringInfoData own;
	StringInfoData engine;

	initStringInfo(&own);
	initStringInfo(&engine);
	for (int i = 0; i < nspecs; i++)
	{
		StringInfo	buf = specs[i].engine ? &engine : &own;

		appendStringInfo(buf, "%s%s", buf->len > 0 ? ", " : "", specs[i].name);
	}
	if (engine.len > 0)
		appendStringInfo(&own, " (and the streaming engine's %s)", engine.data);
	return own.data;
}

/* ----------------------------------------------------------------
 *		View options
 * ----------------------------------------------------------------
 */

/*
 * Fill *options from the GUCs, then from json (a jsonb object, or NULL), then
 * from strategy (NULL: keep).  Unknown names and bad values are errors.
 */
void
options_resolve(DeltaOptions *options, const char *strategy, Jsonb *json)
{
	options->strategy = (DeltaStrategy) dj_strategy;
	options->ignore_non_unique_key_filter = dj_ignore_non_unique_key_filter;
	options->cache_enabled = dj_cache_enabled;
	options->left_cache_size = dj_left_cache_size;
	options->right_cache_size = dj_right_cache_size;
	options->max_batch_size = dj_max_batch_size;
	options->batch_timeout_ms = dj_batch_timeout_ms;
	options->lookup_timeout_ms = dj_lookup_timeout_ms;
	options->retract = false;
	options->manual_writes = false;
	options->refresh_interval_ms = DJ_DEFAULT_REFRESH_INTERVAL_MS;
	options->distributed = false;
	options->catalog_01 = false;
	options->seed_queue_size = -1;
	options->seed_max_inflight = -1;
	options->seed_buffer_capacity = -1;
	options->seed_max_batch_size = -1;
	for (int kind = DJ_ENGINE_JOIN; kind <= DJ_ENGINE_AGG; kind++)
	{
		options->engine_strategy[kind] = -1;
		options->engine_ignore_filter[kind] = -1;
	}

	if (json != NULL)
	{
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;
		List	   *given = NIL;

		if (!JB_ROOT_IS_OBJECT(json))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options must be a JSON object"),
					 errhint("For example: '{\"ignore_non_unique_key_filter\": true}'.")));

		it = JsonbIteratorInit(&json->root);
		while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			char	   *name;
			char	   *value;
			const OptionSpec *spec;

			if (tok != WJB_KEY)
				continue;
			name = pnstrdup(v.val.string.val, v.val.string.len);
			spec = find_spec(option_specs, lengthof(option_specs), name);
			if (spec == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_OBJECT),
						 errmsg("unknown option \"%s\"", name),
						 errhint("Valid options are: %s.",
								 spec_names(option_specs, lengthof(option_specs)))));

			tok = JsonbIteratorNext(&it, &v, true);
			Assert(tok == WJB_VALUE);
			switch (v.type)
			{
				case jbvString:
					value = pnstrdup(v.val.string.val, v.val.string.len);
					break;
				case jbvBool:
					value = v.val.boolean ? "true" : "false";
					break;
				case jbvNumeric:
					value = DatumGetCString(DirectFunctionCall1(numeric_out,
																NumericGetDatum(v.val.numeric)));
					break;
				case jbvNull:
					value = "null";
					break;
				default:
					value = "(not a scalar)";
					break;
			}
			{
				DeltaOptions before = *options;
				ListCell   *lc;

				set_option(options, "option", spec, value);

				/* two names of one option must not disagree */
				foreach(lc, given)
				{
					const OptionSpec *other = lfirst(lc);

					if (other->offset == spec->offset &&
						memcmp((char *) &before + spec->offset,
							   (char *) options + spec->offset, field_size(spec)) != 0)
						ereport(ERROR,
								(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
								 errmsg("options \"%s\" and \"%s\" give one setting different values",
										other->name, spec->name),
								 errdetail("Both are names of the option %s.",
										   other->engine ? spec->name : other->name),
								 errhint("Give one of them.")));
				}
				given = lappend(given, (void *) spec);
			}
		}
	}

	/* the strategy argument is the most specific setting of all */
	if (strategy != NULL)
	{
		if (!dj_parse_strategy(strategy, &options->strategy))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid strategy \"%s\"", strategy),
					 errhint("Valid strategies are none, auto and eventual (or force).")));
		options->engine_strategy[DJ_ENGINE_JOIN] = -1;
		options->engine_strategy[DJ_ENGINE_AGG] = -1;
	}
}

/*
 * The options a view's query runs with, from those resolved before the
 * query was known:
 *
 *	- the streaming engine's settings of the query's kind of operator
 *	  (a query that aggregates at its top level is an aggregate, any other
 *	  query a join) become its strategy and ignore_non_unique_key_filter,
 *	  overriding delta_join's names; where only the other kind's is given,
 *	  it applies (one view is one kind); where both are, the other kind's
 *	  stays, for explain() to report as not applicable;
 *	- the lookup client's parameters of its table hints apply to the whole
 *	  view, where batches are made: client.lookup.batch-timeout sets its
 *	  batch_timeout (the smallest among the hints).
 */
DeltaOptions
options_settle(const DeltaOptions *options, Query *query, List *hints)
{
	DeltaOptions settled = *options;
	int			kind = (query->hasAggs || query->groupClause != NIL ||
						query->groupingSets != NIL || query->havingQual != NULL) ?
		DJ_ENGINE_AGG : DJ_ENGINE_JOIN;
	int			hint_timeout = -1;
	ListCell   *lc;

	/* the view's kind's own setting, or else the other kind's */
	if (settled.engine_strategy[kind] < 0)
	{
		settled.engine_strategy[kind] = settled.engine_strategy[1 - kind];
		settled.engine_strategy[1 - kind] = -1;
	}
	if (settled.engine_ignore_filter[kind] < 0)
	{
		settled.engine_ignore_filter[kind] = settled.engine_ignore_filter[1 - kind];
		settled.engine_ignore_filter[1 - kind] = -1;
	}
	if (settled.engine_strategy[kind] >= 0)
		settled.strategy = (DeltaStrategy) settled.engine_strategy[kind];
	if (settled.engine_ignore_filter[kind] >= 0)
		settled.ignore_non_unique_key_filter = settled.engine_ignore_filter[kind] == 1;
	settled.engine_strategy[kind] = -1;
	settled.engine_ignore_filter[kind] = -1;

	foreach(lc, hints)
	{
		DeltaHint  *hint = lfirst(lc);

		if (hint->batch_timeout_ms >= 0 &&
			(hint_timeout < 0 || hint->batch_timeout_ms < hint_timeout))
			hint_timeout = hint->batch_timeout_ms;
		if (hint->seed_max_batch_size >= 0)
			settled.seed_max_batch_size = hint->seed_max_batch_size;
	}
	if (hint_timeout >= 0)
		settled.batch_timeout_ms = hint_timeout;
	return settled;
}

/* ', "client.lookup.queue-size": 10, ...' for the seeds' parameters given */
static char *
seed_parameters_json(int queue_size, int max_inflight, int buffer_capacity,
					 int max_batch_size)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (queue_size >= 0)
		appendStringInfo(&buf, ", \"client.lookup.queue-size\": %d", queue_size);
	if (max_inflight >= 0)
		appendStringInfo(&buf, ", \"client.lookup.max-inflight-requests\": %d", max_inflight);
	if (buffer_capacity >= 0)
		appendStringInfo(&buf, ", \"table.exec.async-lookup.buffer-capacity\": %d", buffer_capacity);
	if (max_batch_size >= 0)
		appendStringInfo(&buf, ", \"client.lookup.max-batch-size\": %d", max_batch_size);
	return buf.data;
}

/* The complete options of a view, as stored in view_catalog.options. */
Jsonb *
options_to_jsonb(const DeltaOptions *options)
{
	char	   *text;

	text = psprintf("{\"strategy\": \"%s\", "
					"\"ignore_non_unique_key_filter\": %s, "
					"\"cache_enabled\": %s, "
					"\"left_cache_size\": %d, \"right_cache_size\": %d, "
					"\"max_batch_size\": %d, "
					"\"batch_timeout\": %d, \"lookup_timeout\": %d, "
					"\"retract\": %s, \"manual_writes\": %s, "
					"\"refresh_interval\": %d%s}",
					dj_strategy_name(options->strategy),
					options->ignore_non_unique_key_filter ? "true" : "false",
					options->cache_enabled ? "true" : "false",
					options->left_cache_size, options->right_cache_size,
					options->max_batch_size,
					options->batch_timeout_ms, options->lookup_timeout_ms,
					options->retract ? "true" : "false",
					options->manual_writes ? "true" : "false",
					options->refresh_interval_ms,
					seed_parameters_json(options->seed_queue_size,
										 options->seed_max_inflight,
										 options->seed_buffer_capacity,
										 options->seed_max_batch_size));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
}

/* ----------------------------------------------------------------
 *		Table hints
 * ----------------------------------------------------------------
 */

static void
hint_syntax_error(const char *text, int location, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("malformed table hint at offset %d", location),
			 errdetail("%s", detail),
			 errhint("Write hints as /*+ OPTIONS('cache_size'='50000') */ right after a table name.")));
}

/* Skip blanks; return the new position. */
static const char *
skip_blanks(const char *p)
{
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	return p;
}

/* Read a single-quoted string literal at p ('' escapes a quote). */
static const char *
read_quoted(const char *text, int location, const char *p, char **out)
{
	StringInfoData buf;

	if (*p != '\'')
		hint_syntax_error(text, location, "Option names and values must be single-quoted.");
	initStringInfo(&buf);
	for (p++;; p++)
	{
		if (*p == '\0' || (p[0] == '*' && p[1] == '/'))
			hint_syntax_error(text, location, "Unterminated quoted string.");
		if (*p == '\'')
		{
			if (p[1] != '\'')
				break;
			p++;
		}
		appendStringInfoChar(&buf, *p);
	}
	*out = buf.data;
	return p + 1;
}

/*
 * Read "('k'='v', ...)" after OPTIONS at p into hint; returns the position
 * after the closing parenthesis.
 */
static const char *
parse_options(const char *text, int location, const char *p, DeltaHint *hint)
{
	p = skip_blanks(p);
	if (*p != '(')
		hint_syntax_error(text, location, "Expected \"(\" after OPTIONS.");
	p = skip_blanks(p + 1);
	while (*p != ')')
	{
		char	   *name;
		char	   *value;
		const OptionSpec *spec;

		p = skip_blanks(read_quoted(text, location, p, &name));
		if (*p != '=')
			hint_syntax_error(text, location, "Expected \"=\" between option name and value.");
		p = skip_blanks(read_quoted(text, location, skip_blanks(p + 1), &value));

		spec = find_spec(hint_specs, lengthof(hint_specs), name);
		if (spec == NULL && find_spec(option_specs, lengthof(option_specs), name) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("\"%s\" is not a table hint option", name),
					 errdetail("It is an option of the whole view."),
					 errhint("Give it in the options of create_view or explain: options => '{\"%s\": \"%s\"}'.",
							 name, value)));
		if (spec == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("unknown table hint option \"%s\"", name),
					 errhint("Valid table hint options are: %s.",
							 spec_names(hint_specs, lengthof(hint_specs)))));
		set_option(hint, "table hint", spec, value);
		if (spec->offset == offsetof(DeltaHint, cache_enabled))
			hint->cache_enabled_set = true;

		if (*p == ',')
			p = skip_blanks(p + 1);
		else if (*p != ')')
			hint_syntax_error(text, location, "Expected \",\" or \")\" after an option.");
	}
	return p + 1;
}

/*
 * Skip the arguments of a query hint, "(dim_table)" or "('k'='v')", if any;
 * returns the position after them.
 */
static const char *
skip_hint_arguments(const char *text, int location, const char *p)
{
	int			depth = 0;

	p = skip_blanks(p);
	if (*p != '(')
		return p;
	do
	{
		if (*p == '\0' || (p[0] == '*' && p[1] == '/'))
			hint_syntax_error(text, location, "Expected \")\" after the hint's arguments.");
		if (*p == '\'')
		{
			char	   *ignored;

			p = read_quoted(text, location, p, &ignored);
			continue;
		}
		if (*p == '(')
			depth++;
		else if (*p == ')')
			depth--;
		p++;
	} while (depth > 0);
	return p;
}

/*
 * Read the hint comment at location in text (its "/\*+") into a new hint:
 * a list of hints, separated by commas.  OPTIONS(...) gives table options;
 * the streaming engine's query hints (BROADCAST(t), ...) are accepted and
 * ignored, with a NOTICE.  Returns whether the comment gave table options.
 */
bool
hint_parse(const char *text, int location, DeltaHint *hint)
{
	const char *p = skip_blanks(text + location + 3);
	bool		options = false;

	hint_init(hint);
	hint->location = location;
	for (;;)
	{
		int			len = 0;
		bool		known = false;

		while (isalnum((unsigned char) p[len]) || p[len] == '_')
			len++;
		for (size_t i = 0; i < lengthof(engine_query_hints) && !known; i++)
			known = ((int) strlen(engine_query_hints[i]) == len &&
					 pg_strncasecmp(p, engine_query_hints[i], len) == 0);
		if (len == 7 && pg_strncasecmp(p, "OPTIONS", 7) == 0)
		{
			p = parse_options(text, location, p + 7, hint);
			options = true;
		}
		else if (known)
		{
			ereport(NOTICE,
					(errmsg("query hint %.*s is ignored", len, p),
					 errdetail("A delta view looks its sources up through their indexes, and the planner chooses the joins of a recompute.")));
			p = skip_hint_arguments(text, location, p + len);
		}
		else
			hint_syntax_error(text, location,
							  "A hint is OPTIONS(...) right after a table, or one of the streaming engine's query hints (BROADCAST, SHUFFLE_HASH, SHUFFLE_MERGE, NEST_LOOP, LOOKUP, STATE_TTL), which are ignored.");
		p = skip_blanks(p);
		if (*p != ',')
			break;
		p = skip_blanks(p + 1);
	}
	if (p[0] != '*' || p[1] != '/')
		hint_syntax_error(text, location, "Expected \"*/\" after the option list.");
	return options;
}

/*
 * Add what hint "from" sets to "into": two hints after one table, or a hint
 * and a FOR SYSTEM_TIME AS OF clause (the later one wins where both set a
 * value).
 */
void
hint_merge(DeltaHint *into, const DeltaHint *from)
{
	if (from->cache_size >= 0)
		into->cache_size = from->cache_size;
	if (from->cache_enabled_set)
	{
		into->cache_enabled = from->cache_enabled;
		into->cache_enabled_set = true;
	}
	into->lookup_only |= from->lookup_only;
	if (from->seed_queue_size >= 0)
		into->seed_queue_size = from->seed_queue_size;
	if (from->seed_max_inflight >= 0)
		into->seed_max_inflight = from->seed_max_inflight;
	if (from->seed_buffer_capacity >= 0)
		into->seed_buffer_capacity = from->seed_buffer_capacity;
	if (from->seed_max_batch_size >= 0)
		into->seed_max_batch_size = from->seed_max_batch_size;
	if (from->batch_timeout_ms >= 0)
		into->batch_timeout_ms = from->batch_timeout_ms;
	if (from->as_of != NULL)
		into->as_of = from->as_of;
}

/* A hint that sets nothing */
void
hint_init(DeltaHint *hint)
{
	memset(hint, 0, sizeof(DeltaHint));
	hint->cache_size = -1;
	hint->seed_queue_size = -1;
	hint->seed_max_inflight = -1;
	hint->seed_buffer_capacity = -1;
	hint->seed_max_batch_size = -1;
	hint->batch_timeout_ms = -1;
}

/* The options a hint sets, as source_catalog.options keeps them */
Jsonb *
hint_to_jsonb(const DeltaHint *hint)
{
	StringInfoData buf;

	/* each member with a leading ", ", the first one's cut below */
	initStringInfo(&buf);
	if (hint->cache_size >= 0)
		appendStringInfo(&buf, ", \"cache_size\": %d", hint->cache_size);
	if (hint->cache_enabled_set)
		appendStringInfo(&buf, ", \"cache_enabled\": %s", hint->cache_enabled ? "true" : "false");
	if (hint->lookup_only)
		appendStringInfoString(&buf, ", \"lookup_only\": true");
	appendStringInfoString(&buf, seed_parameters_json(hint->seed_queue_size,
													   hint->seed_max_inflight,
													   hint->seed_buffer_capacity,
													   hint->seed_max_batch_size));
	return DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
											  CStringGetDatum(psprintf("{%s}",
																	   buf.len > 0 ? buf.data + 2 : ""))));
}

/* The hint source_catalog.options keeps (see hint_to_jsonb) */
void
hint_from_jsonb(DeltaHint *hint, Jsonb *json)
{
	JsonbIterator *it = JsonbIteratorInit(&json->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *name = NULL;

	hint_init(hint);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			name = pnstrdup(v.val.string.val, v.val.string.len);
		else if (tok == WJB_VALUE && name != NULL)
		{
			if (strcmp(name, "cache_size") == 0 && v.type == jbvNumeric)
				hint->cache_size = DatumGetInt32(DirectFunctionCall1(numeric_int4,
																	 NumericGetDatum(v.val.numeric)));
			else if (strcmp(name, "cache_enabled") == 0 && v.type == jbvBool)
			{
				hint->cache_enabled = v.val.boolean;
				hint->cache_enabled_set = true;
			}
			else if (strcmp(name, "lookup_only") == 0 && v.type == jbvBool)
				hint->lookup_only = v.val.boolean;
			else if (v.type == jbvNumeric)
			{
				int			n = DatumGetInt32(DirectFunctionCall1(numeric_int4,
																  NumericGetDatum(v.val.numeric)));

				if (strcmp(name, "client.lookup.queue-size") == 0)
					hint->seed_queue_size = n;
				else if (strcmp(name, "client.lookup.max-inflight-requests") == 0)
					hint->seed_max_inflight = n;
				else if (strcmp(name, "table.exec.async-lookup.buffer-capacity") == 0)
					hint->seed_buffer_capacity = n;
				else if (strcmp(name, "client.lookup.max-batch-size") == 0)
					hint->seed_max_batch_size = n;
			}
		}
	}
}
