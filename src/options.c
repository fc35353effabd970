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
 * Postgres's parser drops comments, so hints are found by scanning the text
 * (skipping string literals, quoted identifiers and ordinary comments) and
 * tied to the nearest table reference before them by the parser's locations.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "lib/stringinfo.h"
#include "options.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"

typedef enum OptionType
{
	OPT_BOOL,
	OPT_INT,
	OPT_MS,
	OPT_STRATEGY
} OptionType;

typedef struct OptionSpec
{
	const char *name;
	OptionType	type;
	size_t		offset;			/* into DeltaOptions */
	int			min;
	int			max;
} OptionSpec;

static const OptionSpec option_specs[] = {
	{"strategy", OPT_STRATEGY, offsetof(DeltaOptions, strategy), 0, 0},
	{"ignore_non_unique_key_filter", OPT_BOOL, offsetof(DeltaOptions, ignore_non_unique_key_filter), 0, 0},
	{"cache_enabled", OPT_BOOL, offsetof(DeltaOptions, cache_enabled), 0, 0},
	{"left_cache_size", OPT_INT, offsetof(DeltaOptions, left_cache_size), 0, INT_MAX},
	{"right_cache_size", OPT_INT, offsetof(DeltaOptions, right_cache_size), 0, INT_MAX},
	{"max_batch_size", OPT_INT, offsetof(DeltaOptions, max_batch_size), 1, INT_MAX},
	{"batch_timeout", OPT_MS, offsetof(DeltaOptions, batch_timeout_ms), 0, INT_MAX},
	{"lookup_timeout", OPT_MS, offsetof(DeltaOptions, lookup_timeout_ms), 0, INT_MAX},
	{"retract", OPT_BOOL, offsetof(DeltaOptions, retract), 0, 0},
	{"manual_writes", OPT_BOOL, offsetof(DeltaOptions, manual_writes), 0, 0},
	{"refresh_interval", OPT_MS, offsetof(DeltaOptions, refresh_interval_ms), 0, INT_MAX},
	{"client.lookup.queue-size", OPT_INT, offsetof(DeltaOptions, seed_queue_size), 0, INT_MAX},
	{"client.lookup.max-inflight-requests", OPT_INT, offsetof(DeltaOptions, seed_max_inflight), 0, INT_MAX},
	{"table.exec.async-lookup.buffer-capacity", OPT_INT, offsetof(DeltaOptions, seed_buffer_capacity), 0, INT_MAX},
};

#define OPTION_NAMES "strategy, ignore_non_unique_key_filter, cache_enabled, " \
	"left_cache_size, right_cache_size, max_batch_size, batch_timeout, " \
	"lookup_timeout, retract, manual_writes, refresh_interval (and the seeds' " \
	"client.lookup.queue-size, client.lookup.max-inflight-requests, " \
	"table.exec.async-lookup.buffer-capacity)"

static const OptionSpec hint_specs[] = {
	{"cache_size", OPT_INT, offsetof(DeltaHint, cache_size), 0, INT_MAX},
	{"cache_enabled", OPT_BOOL, offsetof(DeltaHint, cache_enabled), 0, 0},
	{"lookup_only", OPT_BOOL, offsetof(DeltaHint, lookup_only), 0, 0},
	{"client.lookup.queue-size", OPT_INT, offsetof(DeltaHint, seed_queue_size), 0, INT_MAX},
	{"client.lookup.max-inflight-requests", OPT_INT, offsetof(DeltaHint, seed_max_inflight), 0, INT_MAX},
	{"table.exec.async-lookup.buffer-capacity", OPT_INT, offsetof(DeltaHint, seed_buffer_capacity), 0, INT_MAX},
};

#define HINT_NAMES "cache_size, cache_enabled, lookup_only (and the seeds' " \
	"client.lookup.queue-size, client.lookup.max-inflight-requests, " \
	"table.exec.async-lookup.buffer-capacity)"

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
			if (!parse_bool(value, (bool *) field))
				bad_value(what, spec, value, "The value must be true or false.");
			break;
		case OPT_INT:
		case OPT_MS:
			{
				int			v;
				const char *hintmsg = NULL;

				if (!parse_int(value, &v, spec->type == OPT_MS ? GUC_UNIT_MS : 0,
							   &hintmsg))
					bad_value(what, spec, value, hintmsg ? hintmsg :
							  spec->type == OPT_MS ?
							  "The value must be a duration such as 100 (milliseconds), '250ms' or '3min'." :
							  "The value must be an integer.");
				if (v < spec->min || v > spec->max)
					bad_value(what, spec, value,
							  psprintf("The value must be between %d and %d.",
									   spec->min, spec->max));
				*(int *) field = v;
			}
			break;
		case OPT_STRATEGY:
			if (!dj_parse_strategy(value, (DeltaStrategy *) field))
				bad_value(what, spec, value,
						  "Valid strategies are none, auto and eventual (or force).");
			break;
	}
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
	options->seed_queue_size = -1;
	options->seed_max_inflight = -1;
	options->seed_buffer_capacity = -1;

	if (json != NULL)
	{
		JsonbIterator *it;
		JsonbValue	v;
		JsonbIteratorToken tok;

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
						 errhint("Valid options are: " OPTION_NAMES ".")));

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
				default:
					value = "(not a scalar)";
					break;
			}
			set_option(options, "option", spec, value);
		}
	}

	if (strategy != NULL)
	{
		if (!dj_parse_strategy(strategy, &options->strategy))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid strategy \"%s\"", strategy),
					 errhint("Valid strategies are none, auto and eventual (or force).")));
	}
}

/* ', "client.lookup.queue-size": 10, ...' for the seeds' parameters given */
static char *
seed_parameters_json(int queue_size, int max_inflight, int buffer_capacity)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (queue_size >= 0)
		appendStringInfo(&buf, ", \"client.lookup.queue-size\": %d", queue_size);
	if (max_inflight >= 0)
		appendStringInfo(&buf, ", \"client.lookup.max-inflight-requests\": %d", max_inflight);
	if (buffer_capacity >= 0)
		appendStringInfo(&buf, ", \"table.exec.async-lookup.buffer-capacity\": %d", buffer_capacity);
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
										 options->seed_buffer_capacity));
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

/* Parse the body of a hint, "OPTIONS('k'='v', ...)" and its end, into hint. */
static void
parse_hint_body(const char *text, int location, const char *p, DeltaHint *hint)
{
	p = skip_blanks(p);
	if (pg_strncasecmp(p, "OPTIONS", 7) != 0)
		hint_syntax_error(text, location, "Only OPTIONS(...) hints are supported.");
	p = skip_blanks(p + 7);
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
		if (spec == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("unknown table hint option \"%s\"", name),
					 errhint("Valid table hint options are: " HINT_NAMES ".")));
		set_option(hint, "table hint", spec, value);
		if (spec->offset == offsetof(DeltaHint, cache_enabled))
			hint->cache_enabled_set = true;

		if (*p == ',')
			p = skip_blanks(p + 1);
		else if (*p != ')')
			hint_syntax_error(text, location, "Expected \",\" or \")\" after an option.");
	}
	p = skip_blanks(p + 1);
	if (p[0] != '*' || p[1] != '/')
		hint_syntax_error(text, location, "Expected \"*/\" after the option list.");
}

/*
 * Every /\*+ ... *\/ hint of the text, in order, as DeltaHint * with location
 * set to the offset of the comment.
 */
List *
hints_parse(const char *text)
{
	List	   *hints = NIL;
	const char *p = text;

	while (*p)
	{
		if (*p == '\'' || *p == '"')
		{
			char		quote = *p++;

			/* a doubled quote inside is just two steps of this loop */
			while (*p && *p != quote)
				p++;
			if (*p)
				p++;
		}
		else if (p[0] == '-' && p[1] == '-')
		{
			while (*p && *p != '\n')
				p++;
		}
		else if (p[0] == '/' && p[1] == '*')
		{
			const char *end = strstr(p + 2, "*/");

			if (p[2] == '+')
			{
				DeltaHint  *hint = palloc(sizeof(DeltaHint));

				hint_init(hint);
				hint->location = p - text;
				parse_hint_body(text, hint->location, p + 3, hint);
				hints = lappend(hints, hint);
			}
			if (end == NULL)
				break;			/* the parser reports the unterminated comment */
			p = end + 2;
		}
		else
			p++;
	}
	return hints;
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
													   hint->seed_buffer_capacity));
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
			}
		}
	}
}
