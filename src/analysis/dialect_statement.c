/*-------------------------------------------------------------------------
 *
 * dialect_statement.c
 *	  The statements of the streaming engine's jobs that PostgreSQL refuses
 *	  before any of delta_join's code runs, and what to write instead.
 *
 * A job of the streaming engine starts with USE CATALOG c; USE db; and
 * SET 'table.optimizer.delta-join.strategy' = 'EVENTUAL'.  PostgreSQL's
 * parser refuses all three (a setting's name is identifiers joined by
 * dots, without "-", and not a string), so the only place left to name the
 * replacement is the error's report: module.c's emit_log_hook asks
 * dialect_statement_hint() for a hint to add.  That runs while an error is
 * being reported, so the text is read by hand, and nothing here raises an
 * error.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "utils/builtins.h"

#include "analysis/dialect.h"
#include "base/options.h"

/* A character of an identifier after its first */
static bool
ident_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		c == '_' || c == '$' || IS_HIGHBIT_SET(c);
}

/* Skip blanks and comments at the start of a statement */
static const char *
skip_statement_blanks(const char *p)
{
	for (;;)
	{
		while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
			p++;
		if (p[0] == '-' && p[1] == '-')
		{
			while (*p && *p != '\n')
				p++;
		}
		else if (p[0] == '/' && p[1] == '*')
		{
			const char *end = strstr(p + 2, "*/");

			if (end == NULL)
				return p + strlen(p);
			p = end + 2;
		}
		else
			return p;
	}
}

/* If p starts with word (any case) and then a non-word character, the end */
static const char *
skip_word(const char *p, const char *word)
{
	size_t		len = strlen(word);

	if (pg_strncasecmp(p, word, len) != 0 || ident_char(p[len]) || p[len] == '-')
		return NULL;
	return skip_statement_blanks(p + len);
}

/*
 * Read a name or value as the engine writes it: quoted with ', " or `, or
 * bare (letters, digits and . - _); returns the end, the text (quotes off)
 * in *out, or NULL if there is none.
 */
static const char *
read_engine_word(const char *p, char **out)
{
	const char *start = p;

	if (*p == '\'' || *p == '"' || *p == '`')
	{
		const char *end = strchr(p + 1, *p);

		if (end == NULL)
			return NULL;
		*out = pnstrdup(p + 1, end - p - 1);
		return skip_statement_blanks(end + 1);
	}
	while (ident_char(*p) || *p == '.' || *p == '-')
		p++;
	if (p == start)
		return NULL;
	*out = pnstrdup(start, p - start);
	return skip_statement_blanks(p);
}

/*
 * A hint for a statement of the streaming engine's jobs that PostgreSQL
 * refused (a syntax error, or an invalid setting name), naming what to
 * write instead; NULL if it is none of them:
 *
 *	SET 'table.optimizer.delta-join.strategy' = 'EVENTUAL' (RESET, SHOW;
 *	the name quoted either way, or bare): setting names are identifiers
 *	here, without "-", and the part is played by a delta_join.* setting or
 *	by nothing;
 *	USE CATALOG c, USE db: a schema is chosen with search_path.
 */
char *
dialect_statement_hint(const char *statement)
{
	const char *p = skip_statement_blanks(statement);
	const char *verb = NULL;
	const char *rest;
	char	   *name = NULL;
	char	   *value = NULL;
	const char *setting;
	bool		known;

	if ((rest = skip_word(p, "use")) != NULL)
	{
		const char *after_catalog = skip_word(rest, "catalog");

		if (read_engine_word(after_catalog ? after_catalog : rest, &name) == NULL)
			return NULL;
		if (after_catalog)
			return psprintf("PostgreSQL has no USE CATALOG: a catalog of the streaming engine is a database here, chosen when connecting (psql -d %s, or \\c %s).",
							name, name);
		return psprintf("PostgreSQL has no USE: a schema is chosen with SET search_path = %s.",
						quote_identifier(name));
	}

	if ((rest = skip_word(p, "set")) != NULL)
		verb = "SET";
	else if ((rest = skip_word(p, "reset")) != NULL)
		verb = "RESET";
	else if ((rest = skip_word(p, "show")) != NULL)
		verb = "SHOW";
	else
		return NULL;
	if (strcmp(verb, "SET") == 0)
	{
		const char *scope = skip_word(rest, "session");

		if (scope == NULL)
			scope = skip_word(rest, "local");
		if (scope != NULL)
			rest = scope;
	}
	if ((rest = read_engine_word(rest, &name)) == NULL)
		return NULL;
	setting = options_engine_setting(name, &known);
	if (!known)
		return NULL;
	if (strcmp(verb, "SET") == 0)
	{
		const char *to = skip_word(rest, "to");

		if (*rest == '=')
			to = skip_statement_blanks(rest + 1);
		if (to == NULL || read_engine_word(to, &value) == NULL)
			value = "...";
		else
			value = quote_literal_cstr(value);
	}
	if (setting == NULL)
		return psprintf("The streaming engine's %s plays no part in delta_join, whose lookups are synchronous index scans, and is no setting here; delta_join.create_view takes it in its options (and as a table hint), and delta_join.explain names what plays its part.",
						name);
	if (value == NULL)
		return psprintf("The streaming engine's %s is the setting %s here (setting names are identifiers, without \"-\"): %s %s.",
						name, setting, verb, setting);
	return psprintf("The streaming engine's %s is the setting %s here (setting names are identifiers, without \"-\"): SET %s = %s; or give \"%s\" in the options of delta_join.create_view.",
					name, setting, setting, value, name);
}
