/*-------------------------------------------------------------------------
 *
 * explain.c
 *	  delta_join.explain(): a delta plan as lines of text, or the rules a
 *	  query fails.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "analysis.h"

static const char *
index_label(Oid index)
{
	return quote_identifier(get_rel_name(index));
}

/* "(merchant_id, item_id)": the bound leading columns of a lookup */
static char *
lookup_columns(DeltaSource *src, Oid index, int nkeys)
{
	Relation	idx = index_open(index, AccessShareLock);
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * nkeys);
	char	   *result;

	for (int i = 0; i < nkeys; i++)
		attnums[i] = idx->rd_index->indkey.values[i];
	index_close(idx, AccessShareLock);
	result = analysis_column_list(src->relid, nkeys, attnums);
	return result;
}

static char *
source_title(DeltaSource *src)
{
	if (strcmp(get_rel_name(src->relid), src->alias) == 0)
		return src->relname;
	return psprintf("%s %s", src->relname, quote_identifier(src->alias));
}

static char *
key_list(DeltaPlan *plan)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < plan->key_ncolumns; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(plan->colnames[plan->key_columns[i]]));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * The delta plan of an analysis as lines of text, or the list of rules it
 * failed.
 */
List *
explain_lines(Analysis *a, const DeltaOptions *options)
{
	DeltaPlan  *plan = a->plan;
	List	   *lines = NIL;
	ListCell   *lc;

	if (a->failures != NIL)
	{
		lines = lappend(lines, psprintf("Not eligible for a delta view (strategy %s):",
										dj_strategy_name(options->strategy)));
		foreach(lc, a->failures)
		{
			Failure    *f = lfirst(lc);

			lines = lappend(lines, psprintf("  %s", f->message));
			if (f->hint)
				lines = lappend(lines, psprintf("    hint: %s", f->hint));
		}
		return lines;
	}

	if (plan->kind == DJ_KIND_AGGREGATE)
	{
		DeltaSource *src = linitial(plan->sources);

		lines = lappend(lines, psprintf("Delta Aggregate -> key %s", key_list(plan)));
		lines = lappend(lines, psprintf("  %s: recompute changed groups by %s prefix %s",
										source_title(src), index_label(src->lookup_index),
										lookup_columns(src, src->lookup_index, src->lookup_nkeys)));
	}
	else
	{
		lines = lappend(lines, psprintf("Delta Join (inner) -> key %s", key_list(plan)));
		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (OidIsValid(src->lookup_index))
				lines = lappend(lines, psprintf("  %s: lookup by %s prefix %s",
												source_title(src), index_label(src->lookup_index),
												lookup_columns(src, src->lookup_index, src->lookup_nkeys)));
			else
				lines = lappend(lines, psprintf("  %s: fetch by %s",
												source_title(src), index_label(src->pk_index)));
		}
		if (list_length(plan->sources) > 2)
		{
			foreach(lc, plan->walks)
			{
				DeltaWalk  *walk = lfirst(lc);
				StringInfoData buf;
				ListCell   *lc2;

				initStringInfo(&buf);
				appendStringInfo(&buf, "  on change of %s: fetch by %s",
								 source_title(SOURCE(a, walk->driver)),
								 index_label(SOURCE(a, walk->driver)->pk_index));
				foreach(lc2, walk->lookups)
				{
					DeltaLookup *lookup = lfirst(lc2);

					appendStringInfo(&buf, ", then %s by %s",
									 source_title(SOURCE(a, lookup->source)),
									 index_label(lookup->index));
				}
				lines = lappend(lines, buf.data);
			}
		}
	}
	if (plan->has_filter)
		lines = lappend(lines, pstrdup("  filter: rows that stop passing it leave residual rows (ignore_non_unique_key_filter)"));
	lines = lappend(lines, psprintf("  strategy: %s, mode: %s",
									dj_strategy_name(options->strategy),
									options->retract ? "retract" : "upsert"));
	return lines;
}
