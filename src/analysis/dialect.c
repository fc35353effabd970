/*-------------------------------------------------------------------------
 *
 * dialect.c
 *	  The streaming engine's SQL in a view's query: what its users write that
 *	  PostgreSQL's parser does not take, recognized in the query text and in
 *	  the raw parse tree, before parse analysis.
 *
 * Three things:
 *
 *	- table hints, /\*+ OPTIONS('k'='v') *\/ right after a table (options.c
 *	  reads what they say), tied here to the table they follow;
 *	- lookup joins, "JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r": the
 *	  clause makes the table a lookup-only source, as the hint
 *	  'lookup_only'='true' does (read through its index when another source
 *	  changes, its own changes triggering nothing), and is blanked out of the
 *	  text the parser is given.  The row looked up is the row as of the time
 *	  the change is applied, the engine's processing time, whatever column
 *	  the clause names: the column is not evaluated;
 *	- the aggregates LISTAGG(x [, sep]), FIRST_VALUE(x) and LAST_VALUE(x)
 *	  written without OVER, rewritten in the raw parse tree into PostgreSQL
 *	  aggregates whose input order leaves no ties, so that a recompute finds
 *	  the value again whatever the plan (DESIGN.md rule 4), and so that the
 *	  query view holds PostgreSQL's spelling:
 *
 *		LISTAGG(x [, sep])	pg_catalog.string_agg(x::text, sep ORDER BY x::text),
 *							sep ',' by default
 *		FIRST_VALUE(x)		delta_join.first_value(x ORDER BY <key>)
 *		LAST_VALUE(x)		delta_join.last_value(x ORDER BY <key>)
 *
 *	  where <key> is the primary key of each table of the query level's FROM
 *	  list, in FROM order: the first (last) non-null value of the rows in
 *	  key order.  A call that says its own order (ORDER BY inside the call,
 *	  or WITHIN GROUP) keeps it; with OVER, FIRST_VALUE and LAST_VALUE are
 *	  PostgreSQL's window functions and are left alone.  A name is rewritten
 *	  only where PostgreSQL itself could not take the call: no function
 *	  listagg exists, or only window functions first_value and last_value.
 *
 * The text is read with PostgreSQL's own lexer (core_yylex), so string
 * constants, quoted identifiers, dollar quoting, nested comments and the
 * session's escape rules are those the parser applies; comments are what
 * lies between tokens.  Blanking a clause replaces its bytes by spaces, so
 * every location the parser reports or records is the same in the text the
 * user wrote.  A hint or clause belongs to the table whose name (or alias)
 * it directly follows, found by the tokens from the RangeVar's location.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_proc.h"
#include "common/keywords.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "parser/scansup.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "base/delta_join.h"
#include "analysis/dialect.h"
#include "base/options.h"

typedef enum TokenKind
{
	TOKEN_WORD,					/* a keyword or an unquoted identifier */
	TOKEN_QUOTED,				/* a double-quoted identifier */
	TOKEN_OTHER					/* constants, operators, punctuation */
} TokenKind;

typedef struct Token
{
	int			start;			/* byte offsets in the text */
	int			end;
	TokenKind	kind;
	bool		blanked;		/* part of a FOR SYSTEM_TIME AS OF clause */
} Token;

/* A hint comment or a FOR SYSTEM_TIME AS OF clause, and what it follows */
typedef struct Annotation
{
	int			location;		/* of the comment, or of FOR */
	int			after;			/* the token just before it, or -1 */
	DeltaHint  *hint;			/* a clause's, or NULL until a comment is read */
	char	   *qualifier;		/* a clause's column's table, or NULL */
} Annotation;

struct DialectText
{
	const char *text;			/* as written */
	char	   *parser_text;	/* FOR SYSTEM_TIME AS OF clauses blanked */
	Token	   *tokens;
	int			ntokens;
	List	   *annotations;	/* in text order */
};

/* ----------------------------------------------------------------
 *		Tokens
 * ----------------------------------------------------------------
 */

static bool
ident_start(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || IS_HIGHBIT_SET(c);
}

static bool
ident_cont(char c)
{
	return ident_start(c) || (c >= '0' && c <= '9') || c == '$';
}

static TokenKind
token_kind(const char *s, int len)
{
	if (s[0] == '"')
		return TOKEN_QUOTED;
	if (!ident_start(s[0]))
		return TOKEN_OTHER;
	for (int i = 1; i < len; i++)
		if (!ident_cont(s[i]))
			return TOKEN_OTHER;		/* E'...', U&'...', B'...' */
	return TOKEN_WORD;
}

/* Is token i the keyword or unquoted identifier word (lower case)? */
static bool
token_is(DialectText *dt, int i, const char *word)
{
	Token	   *t;

	if (i < 0 || i >= dt->ntokens)
		return false;
	t = &dt->tokens[i];
	return t->kind == TOKEN_WORD && t->end - t->start == (int) strlen(word) &&
		pg_strncasecmp(dt->text + t->start, word, t->end - t->start) == 0;
}

/* Is token i the one-character token c? */
static bool
token_char(DialectText *dt, int i, char c)
{
	return i >= 0 && i < dt->ntokens && dt->tokens[i].kind == TOKEN_OTHER &&
		dt->tokens[i].end - dt->tokens[i].start == 1 && dt->text[dt->tokens[i].start] == c;
}

static bool
token_is_name(DialectText *dt, int i)
{
	return i >= 0 && i < dt->ntokens && dt->tokens[i].kind != TOKEN_OTHER;
}

/* The identifier token i stands for, as the parser reads it */
static char *
token_name(DialectText *dt, int i)
{
	Token	   *t = &dt->tokens[i];
	StringInfoData buf;

	if (t->kind == TOKEN_WORD)
		return downcase_truncate_identifier(dt->text + t->start, t->end - t->start, false);
	initStringInfo(&buf);
	for (int p = t->start + 1; p < t->end - 1; p++)
	{
		appendStringInfoChar(&buf, dt->text[p]);
		if (dt->text[p] == '"')
			p++;				/* "" is one quote */
	}
	truncate_identifier(buf.data, buf.len, false);
	return buf.data;
}

/* The token after i that the parser sees, or -1 (also after -1) */
static int
next_token(DialectText *dt, int i)
{
	if (i < 0)
		return -1;
	for (i++; i < dt->ntokens; i++)
		if (!dt->tokens[i].blanked)
			return i;
	return -1;
}

/* The token that starts at location, or -1 */
static int
token_at(DialectText *dt, int location)
{
	int			lo = 0;
	int			hi = dt->ntokens - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (dt->tokens[mid].start == location)
			return mid;
		if (dt->tokens[mid].start < location)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/* The text of tokens first to last */
static char *
tokens_text(DialectText *dt, int first, int last)
{
	return pnstrdup(dt->text + dt->tokens[first].start,
					dt->tokens[last].end - dt->tokens[first].start);
}

static int
annotation_cmp(const ListCell *a, const ListCell *b)
{
	return ((Annotation *) lfirst(a))->location - ((Annotation *) lfirst(b))->location;
}

/*
 * Note the hint comments (/\*+ ... *\/) between tokens, from byte "from" to
 * byte "to": only blanks and comments are there.  Comments nest.
 */
static void
note_hint_comments(DialectText *dt, int from, int to)
{
	const char *p = dt->text + from;
	const char *end = dt->text + to;

	while (p < end)
	{
		if (p[0] == '-' && p[1] == '-')
		{
			while (p < end && *p != '\n' && *p != '\r')
				p++;
		}
		else if (p[0] == '/' && p[1] == '*')
		{
			const char *start = p;
			int			depth = 0;

			while (p < end)
			{
				if (p[0] == '/' && p[1] == '*')
				{
					depth++;
					p += 2;
				}
				else if (p[0] == '*' && p[1] == '/')
				{
					p += 2;
					if (--depth == 0)
						break;
				}
				else
					p++;
			}
			if (start[2] == '+')
			{
				Annotation *note = palloc0(sizeof(Annotation));

				note->location = start - dt->text;
				note->after = dt->ntokens - 1;
				dt->annotations = lappend(dt->annotations, note);
			}
		}
		else
			p++;
	}
}

/*
 * Read the text into tokens with the core lexer.  Right after core_yylex()
 * returns, the lexer's buffer holds a NUL at the end of the token's text
 * (as pg_stat_statements relies on too), which gives the token's end.
 */
static void
read_tokens(DialectText *dt)
{
	core_yy_extra_type extra;
	core_yyscan_t scanner;
	core_YYSTYPE lval;
	YYLTYPE		location;
	int			allocated = 64;
	int			previous_end = 0;

	dt->tokens = palloc(sizeof(Token) * allocated);
	scanner = scanner_init(dt->text, &extra, &ScanKeywords, ScanKeywordTokens);
	while (core_yylex(&lval, &location, scanner) != 0)
	{
		Token	   *t;

		note_hint_comments(dt, previous_end, location);
		if (dt->ntokens == allocated)
		{
			allocated *= 2;
			dt->tokens = repalloc(dt->tokens, sizeof(Token) * allocated);
		}
		t = &dt->tokens[dt->ntokens++];
		t->start = location;
		t->end = location + strlen(extra.scanbuf + location);
		t->kind = token_kind(dt->text + t->start, t->end - t->start);
		t->blanked = false;
		previous_end = t->end;
	}
	note_hint_comments(dt, previous_end, strlen(dt->text));
	scanner_finish(scanner);
}

/* ----------------------------------------------------------------
 *		FOR SYSTEM_TIME AS OF
 * ----------------------------------------------------------------
 */

static void
system_time_error(DialectText *dt, int location, const char *message)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("%s", message),
			 errhint("Write FOR SYSTEM_TIME AS OF and the time attribute of the table that drives the lookup right after the name of the table looked up, as in JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r ON r.currency = o.currency."),
			 errposition(pg_mbstrlen_with_len(dt->text, location) + 1)));
}

/*
 * Find the FOR SYSTEM_TIME AS OF <column> clauses: note each as a
 * lookup-only hint and blank it out of the parser's text.  The column is a
 * name of one to three parts, as the engine requires a time attribute.
 */
static void
find_system_time_clauses(DialectText *dt)
{
	for (int i = 0; i + 1 < dt->ntokens; i++)
	{
		int			first;
		int			last;
		int			parts = 0;
		Annotation *note;

		if (!token_is(dt, i, "for") || !token_is(dt, i + 1, "system_time"))
			continue;
		/* (a column named system_time, as in substring(x from 1 for system_time)) */
		if (!token_is(dt, i + 2, "as") && !token_is(dt, i + 2, "from") &&
			!token_is(dt, i + 2, "between") && !token_is(dt, i + 2, "contained"))
			continue;
		if (!token_is(dt, i + 2, "as") || !token_is(dt, i + 3, "of"))
			system_time_error(dt, dt->tokens[i].start,
							  "only FOR SYSTEM_TIME AS OF is supported");

		first = i + 4;
		for (last = first;; last += 2)
		{
			if (!token_is_name(dt, last))
				system_time_error(dt, last < dt->ntokens ? dt->tokens[last].start : (int) strlen(dt->text),
								  "FOR SYSTEM_TIME AS OF takes a column, the time attribute of the table that drives the lookup");
			parts++;
			if (!token_char(dt, last + 1, '.'))
				break;
		}
		if (parts > 3 ||
			(last + 1 < dt->ntokens && dt->tokens[last + 1].kind == TOKEN_OTHER &&
			 !token_char(dt, last + 1, ',') && !token_char(dt, last + 1, ')') &&
			 !token_char(dt, last + 1, ';')))
			system_time_error(dt, dt->tokens[first].start,
							  "FOR SYSTEM_TIME AS OF takes a column, the time attribute of the table that drives the lookup");

		note = palloc0(sizeof(Annotation));
		note->location = dt->tokens[i].start;
		note->after = i - 1;
		note->hint = palloc(sizeof(DeltaHint));
		hint_init(note->hint);
		note->hint->location = note->location;
		note->hint->lookup_only = true;
		note->hint->as_of = tokens_text(dt, first, last);
		if (parts > 1)
			note->qualifier = token_name(dt, last - 2);
		dt->annotations = lappend(dt->annotations, note);

		for (int k = i; k <= last; k++)
		{
			dt->tokens[k].blanked = true;
			memset(dt->parser_text + dt->tokens[k].start, ' ',
				   dt->tokens[k].end - dt->tokens[k].start);
		}
		i = last;
	}
}

/*
 * Scan a view's query text: its tokens, hint comments and FOR SYSTEM_TIME
 * AS OF clauses.  Raises the lexer's errors (an unterminated string ...),
 * as the parser would.
 */
DialectText *
dialect_scan(const char *text)
{
	DialectText *dt = palloc0(sizeof(DialectText));

	dt->text = text;
	dt->parser_text = pstrdup(text);
	read_tokens(dt);
	find_system_time_clauses(dt);
	list_sort(dt->annotations, annotation_cmp);
	return dt;
}

/* The text to give PostgreSQL's parser: the same, clauses blanked */
const char *
dialect_parser_text(DialectText *dt)
{
	return dt->parser_text;
}

/* ----------------------------------------------------------------
 *		What hints and clauses follow
 * ----------------------------------------------------------------
 */

/* A table reference of the raw statement, and where its tokens end */
typedef struct TableRef
{
	RangeVar   *rv;
	bool		in_from;		/* in the FROM list of the view's query */
	int			name_end;		/* its name's last token */
	int			alias_end;		/* its alias's last token (name_end if none) */
	Annotation *system_time;	/* its FOR SYSTEM_TIME AS OF clause */
} TableRef;

/* The name the query gives a table: its alias, or its own */
static const char *
ref_name(RangeVar *rv)
{
	return rv->alias ? rv->alias->aliasname : rv->relname;
}

/* Find where rv's name and alias end among the tokens */
static void
find_ref_tokens(DialectText *dt, TableRef *ref)
{
	RangeVar   *rv = ref->rv;
	int			i = token_at(dt, rv->location);
	int			parts = 1 + (rv->schemaname != NULL) + (rv->catalogname != NULL);

	ref->name_end = ref->alias_end = -1;
	if (i < 0)
		return;
	for (int p = 1; p < parts; p++)
		i = next_token(dt, next_token(dt, i));
	if (i < 0)
		return;
	/* "t *", "ONLY (t)" */
	if (token_char(dt, next_token(dt, i), '*') ||
		(token_char(dt, next_token(dt, i), ')') && token_char(dt, token_at(dt, rv->location) - 1, '(')))
		i = next_token(dt, i);
	ref->name_end = ref->alias_end = i;
	if (rv->alias == NULL)
		return;
	i = next_token(dt, i);
	if (token_is(dt, i, "as"))
		i = next_token(dt, i);
	if (rv->alias->colnames != NIL && token_char(dt, next_token(dt, i), '('))
	{
		int			depth = 0;

		for (i = next_token(dt, i); i >= 0; i = next_token(dt, i))
		{
			if (token_char(dt, i, '('))
				depth++;
			else if (token_char(dt, i, ')') && --depth == 0)
				break;
		}
	}
	ref->alias_end = i;
}

/* Gather the table references of a FROM item, and the names it brings */
static void
collect_from_item(Node *node, List **refs, List **item_names, int *nitems)
{
	if (node == NULL)
		return;
	if (IsA(node, JoinExpr))
	{
		JoinExpr   *join = (JoinExpr *) node;

		collect_from_item(join->larg, refs, item_names, nitems);
		collect_from_item(join->rarg, refs, item_names, nitems);
		if (join->alias)
			*item_names = lappend(*item_names, join->alias->aliasname);
		return;
	}
	(*nitems)++;
	if (IsA(node, RangeTableSample))
		node = ((RangeTableSample *) node)->relation;
	if (IsA(node, RangeVar))
	{
		TableRef   *ref = palloc0(sizeof(TableRef));

		ref->rv = (RangeVar *) node;
		ref->in_from = true;
		*refs = lappend(*refs, ref);
		*item_names = lappend(*item_names, (char *) ref_name(ref->rv));
	}
	else if (IsA(node, RangeSubselect) && ((RangeSubselect *) node)->alias)
		*item_names = lappend(*item_names, ((RangeSubselect *) node)->alias->aliasname);
	else if (IsA(node, RangeFunction) && ((RangeFunction *) node)->alias)
		*item_names = lappend(*item_names, ((RangeFunction *) node)->alias->aliasname);
}

/* Every RangeVar of a raw statement */
static bool
collect_rangevars(Node *node, List **rangevars)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeVar))
		*rangevars = lappend(*rangevars, node);
	return raw_expression_tree_walker(node, collect_rangevars, rangevars);
}

/*
 * The table hints of the query (DeltaHint *, in text order), each tied to
 * the table of the view's FROM list it follows, and in *names the name the
 * query gives that table (same order).  A FOR SYSTEM_TIME AS OF clause is a
 * hint that sets lookup_only; the hint and clause of one table are merged.
 * Hints are read here, after the text parsed, so that a syntax error of the
 * query is reported first.
 */
List *
dialect_table_hints(DialectText *dt, SelectStmt *select, List **names)
{
	List	   *refs = NIL;
	List	   *item_names = NIL;
	List	   *rangevars = NIL;
	List	   *hints = NIL;
	int			nitems = 0;
	int			looked_up = 0;
	ListCell   *lc;

	foreach(lc, select->fromClause)
		collect_from_item(lfirst(lc), &refs, &item_names, &nitems);
	(void) collect_rangevars((Node *) select, &rangevars);
	foreach(lc, rangevars)
	{
		RangeVar   *rv = lfirst(lc);
		bool		listed = false;
		ListCell   *lc2;

		foreach(lc2, refs)
			listed |= (((TableRef *) lfirst(lc2))->rv == rv);
		if (!listed)
		{
			TableRef   *ref = palloc0(sizeof(TableRef));

			ref->rv = rv;
			refs = lappend(refs, ref);
		}
	}
	foreach(lc, refs)
		find_ref_tokens(dt, lfirst(lc));

	*names = NIL;
	foreach(lc, dt->annotations)
	{
		Annotation *note = lfirst(lc);
		const char *what = note->hint ? "FOR SYSTEM_TIME AS OF" : "table hint";
		TableRef   *owner = NULL;
		int			after = note->after;
		ListCell   *lc2;

		if (note->hint == NULL)
		{
			note->hint = palloc(sizeof(DeltaHint));
			if (!hint_parse(dt->text, note->location, note->hint))
				continue;		/* query hints only */
		}
		while (after >= 0 && dt->tokens[after].blanked)
			after--;
		foreach(lc2, refs)
		{
			TableRef   *ref = lfirst(lc2);

			if (after >= 0 && (ref->name_end == after || ref->alias_end == after))
				owner = ref;
		}
		if (owner != NULL && !owner->in_from)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s at offset %d follows a table of a subquery", what, note->location),
					 errhint("Table hints and FOR SYSTEM_TIME AS OF apply to the tables of the view's own FROM list, not to those of a subquery, a WITH query or a branch of UNION ALL.")));
		if (owner == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("%s at offset %d does not follow a table in FROM", what, note->location),
					 note->hint->as_of ?
					 errhint("Write it right after the name of the table looked up, as in JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r; a subquery or a function cannot be looked up.") :
					 errhint("Write the hint right after the table name it applies to.")));

		if (note->hint->as_of != NULL)
		{
			bool		known = false;

			if (note->qualifier != NULL && strcmp(note->qualifier, ref_name(owner->rv)) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
						 errmsg("FOR SYSTEM_TIME AS OF %s names the table it looks up", note->hint->as_of),
						 errhint("Name the time attribute of the table that drives the lookup, as in JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r, where o is the other side of the join.")));
			foreach(lc2, item_names)
				known |= (note->qualifier != NULL && strcmp(note->qualifier, lfirst(lc2)) == 0);
			if (note->qualifier != NULL && !known)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_TABLE),
						 errmsg("FOR SYSTEM_TIME AS OF %s names no table of FROM", note->hint->as_of),
						 errhint("Name the time attribute of the table that drives the lookup, by the name FROM gives that table.")));
			owner->system_time = note;
		}

		/* one hint per table: a second adds to the first */
		foreach(lc2, hints)
		{
			if (strcmp(list_nth(*names, foreach_current_index(lc2)), ref_name(owner->rv)) == 0)
			{
				hint_merge(lfirst(lc2), note->hint);
				break;
			}
		}
		if (lc2 == NULL)
		{
			hints = lappend(hints, note->hint);
			*names = lappend(*names, (char *) ref_name(owner->rv));
		}
	}

	/* something must drive the view */
	foreach(lc, refs)
		looked_up += (((TableRef *) lfirst(lc))->system_time != NULL);
	if (nitems > 0 && looked_up == nitems)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("FOR SYSTEM_TIME AS OF leaves no table to drive the view"),
				 errdetail("A table looked up FOR SYSTEM_TIME AS OF is a lookup-only source: its own changes trigger nothing, so a query of such tables alone never changes."),
				 errhint("Join the table looked up to the table whose changes drive the view, as in FROM orders o JOIN rates FOR SYSTEM_TIME AS OF o.proc_time AS r ON r.currency = o.currency.")));
	return hints;
}

/* ----------------------------------------------------------------
 *		Aggregates
 * ----------------------------------------------------------------
 */

typedef struct RewriteContext
{
	DialectText *dt;
	List	   *levels;			/* enclosing SelectStmts, innermost first */
} RewriteContext;

/*
 * Could PostgreSQL take a call of this unqualified name as it is: is there
 * a function of that name on the search path (that is not a window
 * function, for a call without OVER)?
 */
static bool
postgres_has_function(const char *name, bool windows_count)
{
	FuncCandidateList c = FuncnameGetCandidates(list_make1(makeString((char *) name)),
												-1, NIL, false, false, false, true);

	for (; c != NULL; c = c->next)
		if (windows_count || get_func_prokind(c->oid) != PROKIND_WINDOW)
			return true;
	return false;
}

/* The text of the arguments of the call at location ("x, ', '"), or "x" */
static char *
call_arguments(DialectText *dt, int location)
{
	int			open = next_token(dt, token_at(dt, location));
	int			depth = 0;

	if (open < 0 || !token_char(dt, open, '('))
		return pstrdup("x");
	for (int i = open; i >= 0; i = next_token(dt, i))
	{
		if (token_char(dt, i, '('))
			depth++;
		else if (token_char(dt, i, ')') && --depth == 0)
			return i > open + 1 ? tokens_text(dt, open + 1, i - 1) : pstrdup("");
	}
	return pstrdup("x");
}

static int
call_position(DialectText *dt, FuncCall *call)
{
	return call->location >= 0 ? pg_mbstrlen_with_len(dt->text, call->location) + 1 : 0;
}

static Node *
text_cast(Node *arg)
{
	TypeCast   *cast = makeNode(TypeCast);

	cast->arg = arg;
	cast->typeName = SystemTypeName("text");
	cast->location = -1;
	return (Node *) cast;
}

static SortBy *
sort_by(Node *expr)
{
	SortBy	   *sort = makeNode(SortBy);

	sort->node = expr;
	sort->sortby_dir = SORTBY_DEFAULT;
	sort->sortby_nulls = SORTBY_NULLS_DEFAULT;
	sort->useOp = NIL;
	sort->location = -1;
	return sort;
}

/* LISTAGG(x [, sep]): string_agg(x::text, sep ORDER BY x::text) */
static void
rewrite_listagg(RewriteContext *cxt, FuncCall *call)
{
	A_Const    *comma;
	Node	   *value;

	if (call->agg_star || list_length(call->args) < 1 || list_length(call->args) > 2)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("LISTAGG takes a value and an optional separator"),
				 errhint("Write LISTAGG(x) or LISTAGG(x, separator), which mean string_agg(x::text, separator ORDER BY x::text), with ',' as the separator by default."),
				 errposition(call_position(cxt->dt, call))));

	value = text_cast(linitial(call->args));
	if (list_length(call->args) == 1)
	{
		comma = makeNode(A_Const);
		comma->val.sval.type = T_String;
		comma->val.sval.sval = pstrdup(",");
		comma->location = -1;
		call->args = lappend(call->args, comma);
	}
	linitial(call->args) = value;
	call->funcname = list_make2(makeString("pg_catalog"), makeString("string_agg"));
	if (call->over == NULL)
	{
		/* WITHIN GROUP (ORDER BY ...) is the call's own order */
		if (call->agg_order == NIL)
			call->agg_order = list_make1(sort_by(copyObject(value)));
		call->agg_within_group = false;
	}
}

/* The columns of a table's primary key (attribute numbers), or NIL */
static List *
primary_key(Oid relid)
{
	Relation	rel = relation_open(relid, NoLock);	/* locked by the caller */
	List	   *key = NIL;
	ListCell   *lc;

	if (rel->rd_rel->relkind == RELKIND_RELATION ||
		rel->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
	{
		foreach(lc, RelationGetIndexList(rel))
		{
			HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
			Form_pg_index index;

			if (!HeapTupleIsValid(tuple))
				elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
			index = (Form_pg_index) GETSTRUCT(tuple);
			if (index->indisprimary)
				for (int k = 0; k < index->indnkeyatts; k++)
					key = lappend_int(key, index->indkey.values[k]);
			ReleaseSysCache(tuple);
		}
	}
	relation_close(rel, NoLock);
	return key;
}

/*
 * The name column attnum of relid goes by in the query: its alias's, when
 * the FROM item renames its columns (FROM t AS x(a, b)), in the order of
 * the table's columns (dropped ones aside); else its own.
 */
static char *
column_name_as_written(Oid relid, AttrNumber attnum, Alias *alias)
{
	int			position = 0;

	if (alias == NULL || alias->colnames == NIL)
		return get_attname(relid, attnum, false);
	for (AttrNumber a = 1; a < attnum; a++)
	{
		HeapTuple	tuple = SearchSysCache2(ATTNUM, ObjectIdGetDatum(relid), Int16GetDatum(a));

		if (HeapTupleIsValid(tuple))
		{
			if (!((Form_pg_attribute) GETSTRUCT(tuple))->attisdropped)
				position++;
			ReleaseSysCache(tuple);
		}
	}
	if (position < list_length(alias->colnames))
		return pstrdup(strVal(list_nth(alias->colnames, position)));
	return get_attname(relid, attnum, false);
}

/*
 * The primary key of every table of the FROM list of one query level, in
 * FROM order, as sort items; NULL, with why in *why, when the list holds
 * something else.  NIL (and no why) when a table does not exist: parse
 * analysis reports it, before it reads the select list.
 */
static List *
from_list_key(RewriteContext *cxt, List *from, char **why)
{
	List	   *order = NIL;
	ListCell   *lc;

	foreach(lc, from)
	{
		Node	   *item = lfirst(lc);
		RangeVar   *rv;
		Oid			relid;
		List	   *key;
		ListCell   *lc2;

		if (IsA(item, JoinExpr))
		{
			List	   *sides = list_make2(((JoinExpr *) item)->larg, ((JoinExpr *) item)->rarg);
			List	   *sides_key = from_list_key(cxt, sides, why);

			if (sides_key == NIL)
				return NIL;
			order = list_concat(order, sides_key);
			continue;
		}
		if (IsA(item, RangeTableSample))
			item = ((RangeTableSample *) item)->relation;
		if (!IsA(item, RangeVar))
		{
			*why = pstrdup("the FROM list has a subquery or a function, whose rows have no key");
			return NIL;
		}
		rv = (RangeVar *) item;

		/* a WITH query of this level or an enclosing one */
		foreach(lc2, cxt->levels)
		{
			SelectStmt *level = lfirst(lc2);
			ListCell   *lc3;

			if (rv->schemaname != NULL || level->withClause == NULL)
				continue;
			foreach(lc3, level->withClause->ctes)
			{
				if (strcmp(((CommonTableExpr *) lfirst(lc3))->ctename, rv->relname) == 0)
				{
					*why = psprintf("\"%s\" is a WITH query, whose rows have no key", rv->relname);
					return NIL;
				}
			}
		}

		relid = RangeVarGetRelid(rv, AccessShareLock, true);
		if (!OidIsValid(relid))
			return NIL;
		key = primary_key(relid);
		if (key == NIL)
		{
			*why = psprintf("\"%s\" is not a table with a primary key", rv->relname);
			return NIL;
		}
		foreach(lc2, key)
		{
			ColumnRef  *column = makeNode(ColumnRef);

			column->fields = list_make2(makeString(pstrdup(ref_name(rv))),
										makeString(column_name_as_written(relid, lfirst_int(lc2),
																		  rv->alias)));
			column->location = -1;
			order = lappend(order, sort_by((Node *) column));
		}
	}
	if (order == NIL && *why == NULL)
		*why = pstrdup("the query reads no table");
	return order;
}

/* FIRST_VALUE(x) / LAST_VALUE(x): delta_join.first_value(x ORDER BY <key>) */
static void
rewrite_first_last(RewriteContext *cxt, FuncCall *call, const char *name)
{
	const char *upper = strcmp(name, "first_value") == 0 ? "FIRST_VALUE" : "LAST_VALUE";

	if (call->agg_star || call->agg_distinct || list_length(call->args) != 1)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("%s without OVER takes one value", upper),
				 errhint("Write %s(x), which means delta_join.%s(x ORDER BY <the primary key of each table in FROM>), or add OVER (...) for the window function.",
						 upper, name),
				 errposition(call_position(cxt->dt, call))));

	call->funcname = list_make2(makeString(DJ_SCHEMA), makeString((char *) name));
	call->agg_within_group = false;
	if (call->agg_order == NIL)
	{
		char	   *why = NULL;

		call->agg_order = from_list_key(cxt, ((SelectStmt *) linitial(cxt->levels))->fromClause,
										&why);
		if (call->agg_order == NIL && why != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("%s without OVER needs the primary key of every table in FROM", upper),
					 errdetail("Without OVER, %s(x) is delta_join.%s(x ORDER BY <the primary key of each table in FROM>), the %s non-null value in key order, so that a recompute finds it again; %s.",
							   upper, name, strcmp(name, "first_value") == 0 ? "first" : "last", why),
					 errhint("Say the order: delta_join.%s(%s ORDER BY <columns that tell the rows apart>), or add OVER (...) for the window function.",
							 name, call_arguments(cxt->dt, call->location)),
					 errposition(call_position(cxt->dt, call))));
	}
}

static bool
rewrite_walker(Node *node, RewriteContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, SelectStmt))
	{
		bool		result;

		cxt->levels = lcons(node, cxt->levels);
		result = raw_expression_tree_walker(node, rewrite_walker, cxt);
		cxt->levels = list_delete_first(cxt->levels);
		return result;
	}
	if (IsA(node, FuncCall) && list_length(((FuncCall *) node)->funcname) == 1)
	{
		FuncCall   *call = (FuncCall *) node;
		const char *name = strVal(linitial(call->funcname));

		if (strcmp(name, "listagg") == 0 && !postgres_has_function(name, true))
			rewrite_listagg(cxt, call);
		else if ((strcmp(name, "first_value") == 0 || strcmp(name, "last_value") == 0) &&
				 call->over == NULL && cxt->levels != NIL &&
				 !postgres_has_function(name, false))
			rewrite_first_last(cxt, call, name);
	}
	return raw_expression_tree_walker(node, rewrite_walker, cxt);
}

/*
 * Rewrite the streaming engine's aggregate spellings in a raw statement,
 * in place (see the banner).
 */
void
dialect_rewrite_aggregates(DialectText *dt, Node *stmt)
{
	RewriteContext cxt = {dt, NIL};

	(void) rewrite_walker(stmt, &cxt);
}
