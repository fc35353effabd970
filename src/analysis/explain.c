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

#include "analysis/analysis.h"

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

/* "inner", "left outer", or "inner, left outer, full outer" */
static char *
join_types(DeltaPlan *plan)
{
	bool		seen[3] = {false, false, false};
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (plan->outer_joins == NIL || list_length(plan->sources) > list_length(plan->outer_joins) + 1)
		appendStringInfoString(&buf, "inner");
	foreach(lc, plan->outer_joins)
	{
		OuterJoin  *oj = lfirst(lc);
		int			i = oj->jointype == JOIN_LEFT ? 0 : oj->jointype == JOIN_RIGHT ? 1 : 2;
		static const char *const names[] = {"left outer", "right outer", "full outer"};

		if (seen[i])
			continue;
		seen[i] = true;
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", names[i]);
	}
	return buf.data;
}

/* "public.orders o, public.items i" */
static char *
source_titles(Analysis *a, Bitmapset *sources)
{
	StringInfoData buf;
	int			s = -1;

	initStringInfo(&buf);
	while ((s = bms_next_member(sources, s)) >= 0)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", source_title(SOURCE(a, s)));
	return buf.data;
}

/* The sources of a plan that are lookup-only, or those that are not */
static char *
source_titles_all(DeltaPlan *plan, bool lookup_only)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);

		if (src->lookup_only == lookup_only)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", source_title(src));
	}
	return buf.data;
}

/*
 * The seeds' client parameters of asynchronous lookups, given as options or
 * table hints: accepted, and reported as not applicable, with the knob that
 * plays their part.
 */
static List *
seed_parameter_lines(DeltaPlan *plan, const DeltaOptions *options)
{
	static const char *const names[] = {
		"client.lookup.queue-size", "client.lookup.max-inflight-requests",
		"table.exec.async-lookup.buffer-capacity", "client.lookup.max-batch-size",
	};
	static const char *const instead[] = {
		"max_batch_size (the most distinct keys one apply transaction takes) plays its part",
		"max_batch_size (lookups run one at a time in the apply worker, a batch of keys per transaction) plays its part",
		"max_batch_size and batch_timeout (how many changed keys wait, and how long, before they are applied) play their part",
		"max_batch_size (the most distinct keys one apply transaction takes, not lookups per request) plays its part",
	};
	List	   *lines = NIL;

	for (int i = 0; i < (int) lengthof(names); i++)
	{
		bool		given = (i == 0 ? options->seed_queue_size :
							 i == 1 ? options->seed_max_inflight :
							 i == 2 ? options->seed_buffer_capacity :
							 options->seed_max_batch_size) >= 0;
		ListCell   *lc;

		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			given |= (i == 0 ? src->seed_queue_size : i == 1 ? src->seed_max_inflight :
					  i == 2 ? src->seed_buffer_capacity : -1) >= 0;
		}
		if (given)
			lines = lappend(lines, psprintf("  %s: not applicable, lookups are synchronous index scans; %s",
											names[i], instead[i]));
	}
	return lines;
}

/*
 * The streaming engine's settings of the other kind of operator than the
 * view's, given beside those of its kind (options_settle): not applicable.
 */
static List *
engine_kind_lines(const DeltaOptions *options)
{
	List	   *lines = NIL;

	if (options->engine_strategy[DJ_ENGINE_JOIN] >= 0)
		lines = lappend(lines, pstrdup("  table.optimizer.delta-join.strategy: not applicable, the query aggregates; table.optimizer.delta-agg.strategy (strategy) applies"));
	if (options->engine_ignore_filter[DJ_ENGINE_JOIN] >= 0)
		lines = lappend(lines, pstrdup("  table.optimizer.delta-join.ignore-non-unique-key-filter: not applicable, the query aggregates; table.optimizer.delta-agg.ignore-non-unique-key-filter (ignore_non_unique_key_filter) applies"));
	if (options->engine_strategy[DJ_ENGINE_AGG] >= 0)
		lines = lappend(lines, pstrdup("  table.optimizer.delta-agg.strategy: not applicable, the query does not aggregate; table.optimizer.delta-join.strategy (strategy) applies"));
	if (options->engine_ignore_filter[DJ_ENGINE_AGG] >= 0)
		lines = lappend(lines, pstrdup("  table.optimizer.delta-agg.ignore-non-unique-key-filter: not applicable, the query does not aggregate; table.optimizer.delta-join.ignore-non-unique-key-filter (ignore_non_unique_key_filter) applies"));
	return lines;
}

/* ", lookup only ...": what a lookup-only source's line adds */
static const char *
lookup_only_note(DeltaSource *src)
{
	if (!src->lookup_only)
		return "";
	if (src->as_of != NULL)
		return psprintf(", lookup only (FOR SYSTEM_TIME AS OF %s): its changes are not applied, its rows are read as of when a change of another source is applied",
						src->as_of);
	return ", lookup only: its changes are not applied";
}

/* What an outer join null-extends, as a line of explain */
static char *
outer_join_line(Analysis *a, OuterJoin *oj)
{
	char	   *left = source_titles(a, oj->left);
	char	   *right = source_titles(a, oj->right);

	switch (oj->jointype)
	{
		case JOIN_LEFT:
			return psprintf("  null-extended: %s, in the one row of a row of %s that has no partner",
							right, left);
		case JOIN_RIGHT:
			return psprintf("  null-extended: %s, in the one row of a row of %s that has no partner",
							left, right);
		default:
			return psprintf("  null-extended: %s, in the one row of a row of %s that has no partner, and the other way round",
							right, left);
	}
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
		lines = lappend(lines, psprintf("Not eligible for %s (strategy %s):",
										a->path == DJ_PATH_DELTA ? "a delta view" :
										a->path == DJ_PATH_KEYED ? "keyed recompute" :
										a->path == DJ_PATH_JOIN_GROUPS ? "keyed recompute of groups through joins" :
										"full recompute",
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

	if (plan->path == DJ_PATH_FULL)
	{
		lines = lappend(lines, plan->key_ncolumns > 0 ?
						psprintf("Full Recompute -> key %s", key_list(plan)) :
						pstrdup("Full Recompute -> no key: the difference is a multiset difference"));
		lines = lappend(lines, psprintf("  when a source changed, at most once per refresh_interval (%d ms): the query recomputed, only the difference written",
										options->refresh_interval_ms));
		lines = lappend(lines, psprintf("  sources (any change): %s", source_titles_all(plan, false)));
		if (*source_titles_all(plan, true) != '\0')
			lines = lappend(lines, psprintf("  lookup only (their changes are not applied): %s",
											source_titles_all(plan, true)));
	}
	else if (plan->path == DJ_PATH_KEYED)
	{
		lines = lappend(lines, psprintf("Keyed Recompute (%s) -> key %s",
										plan->kind == DJ_KIND_AGGREGATE ? "aggregate" : join_types(plan),
										plan->whole ? "(none: one group)" : key_list(plan)));
		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (src->lookup_only)
				lines = lappend(lines, psprintf("  %s: read as the others change%s",
												source_title(src), lookup_only_note(src)));
			else
				lines = lappend(lines, psprintf("  on change of %s: %s", source_title(src),
												plan->whole ? "the one group recomputed" :
												plan->kind == DJ_KIND_AGGREGATE ?
												"its groups recomputed, with plans the planner chooses" :
												"the rows of its key recomputed and replaced, with plans the planner chooses"));
		}
	}
	else if (plan->path == DJ_PATH_JOIN_GROUPS)
	{
		lines = lappend(lines, psprintf("Keyed Recompute of Groups through Joins (%s%s) -> key %s",
										join_types(plan),
										plan->semi_join && plan->anti_join ? "; semi-join by EXISTS or IN, as DISTINCT, and anti-join by NOT EXISTS or NOT IN: a group of each row" :
										plan->anti_join ? "; anti-join by NOT EXISTS or NOT IN: a group of each row" :
										plan->semi_join ? "; semi-join by EXISTS or IN, as DISTINCT: a group of each row" :
										plan->distinct ? "; DISTINCT: a group of each row" : "",
										key_list(plan)));
		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (src->lookup_only)
				lines = lappend(lines, psprintf("  %s: read as the others change%s",
												source_title(src), lookup_only_note(src)));
			else if (src->anti_join != 0)
				lines = lappend(lines, psprintf("  on change of %s: the rows of the outer query its old and new rows by %s correlate with, found through the anti-join's subquery as a semi-join, recomputed",
												source_title(src),
												analysis_column_list(src->relid, src->key_natts,
																	 src->key_attnums)));
			else
				lines = lappend(lines, psprintf("  on change of %s: the groups of its old and new rows by %s, found through the joins, recomputed",
												source_title(src),
												analysis_column_list(src->relid, src->narrow_natts,
																	 src->narrow_attnums)));
		}
		if (plan->additive && options->manual_writes)
			lines = lappend(lines, pstrdup("  not additive: with manual_writes, roles other than delta_join may write the target, whose counts and sums are then no base to add to"));
		else if (plan->additive)
		{
			lines = lappend(lines, pstrdup("  a batch that changed one source only: its changed rows, weighed +1 new and -1 old, joined to the others and added to their groups' counts and sums (additive)"));
			if (!plan->additive_keys_bytewise)
				lines = lappend(lines, pstrdup("  except a batch that removes rows, or is read in chunks: equal values of the group key may be spelt apart (numeric 1.0 and 1.00, float8 0 and -0, a nondeterministic collation), and a group's key must be one its rows have, so its groups are recomputed"));
		}
		else if (plan->additive_refusal != NULL)
			lines = lappend(lines, psprintf("  not additive: %s", plan->additive_refusal));
		if (plan->query->havingQual == NULL && !plan->semi_join && !plan->anti_join)
			lines = lappend(lines, pstrdup("  a batch that dirties delta_join.whole_recompute_fraction of the target's rows or more: the whole query recomputed, only the difference written"));
	}
	else if (plan->branches != NIL)
	{
		lines = lappend(lines, psprintf("Union All of %d delta branches -> key %s, told apart by %s",
										list_length(plan->branches), key_list(plan),
										quote_identifier(plan->colnames[plan->tag_column])));
		foreach(lc, a->branch_analyses)
		{
			Analysis   *ba = lfirst(lc);
			List	   *branch_lines = explain_lines(ba, options);
			ListCell   *lc2;

			/* each branch's plan, indented, without the strategy line */
			foreach(lc2, branch_lines)
			{
				if (lnext(branch_lines, lc2) == NULL)
					break;
				if (foreach_current_index(lc2) == 0)
					lines = lappend(lines, psprintf("  branch %d (%s = %s): %s",
													foreach_current_index(lc) + 1,
													quote_identifier(plan->colnames[plan->tag_column]),
													ba->plan->tag_value, (char *) lfirst(lc2)));
				else
					lines = lappend(lines, psprintf("  %s", (char *) lfirst(lc2)));
			}
		}
	}
	else if (plan->kind == DJ_KIND_AGGREGATE)
	{
		DeltaSource *src = linitial(plan->sources);

		lines = lappend(lines, psprintf("Delta Aggregate -> key %s", key_list(plan)));
		lines = lappend(lines, psprintf("  %s: recompute changed groups by %s prefix %s",
										source_title(src), index_label(src->lookup_index),
										lookup_columns(src, src->lookup_index, src->lookup_nkeys)));
	}
	else
	{
		lines = lappend(lines, psprintf("Delta Join (%s) -> key %s", join_types(plan),
										key_list(plan)));
		foreach(lc, plan->sources)
		{
			DeltaSource *src = lfirst(lc);

			if (OidIsValid(src->lookup_index))
				lines = lappend(lines, psprintf("  %s: lookup by %s prefix %s%s",
												source_title(src), index_label(src->lookup_index),
												lookup_columns(src, src->lookup_index, src->lookup_nkeys),
												lookup_only_note(src)));
			else
				lines = lappend(lines, psprintf("  %s: fetch by %s%s",
												source_title(src), index_label(src->pk_index),
												lookup_only_note(src)));
		}
		if (list_length(plan->sources) > 2 || plan->has_outer)
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
		foreach(lc, plan->outer_joins)
			lines = lappend(lines, outer_join_line(a, lfirst(lc)));
	}
	if (plan->has_filter && plan->path == DJ_PATH_DELTA && !options->retract)
		lines = lappend(lines, pstrdup("  filter: rows that stop passing it leave residual rows (ignore_non_unique_key_filter)"));
	foreach(lc, a->notes)
		lines = lappend(lines, psprintf("  note: %s", (char *) lfirst(lc)));
	lines = list_concat(lines, seed_parameter_lines(plan, options));
	lines = list_concat(lines, engine_kind_lines(options));
	lines = lappend(lines, psprintf("  strategy: %s, mode: %s",
									dj_strategy_name(options->strategy),
									plan->path == DJ_PATH_DELTA ?
									(options->retract ? "retract" : "upsert") :
									plan->path == DJ_PATH_KEYED ? "keyed recompute" :
									plan->path == DJ_PATH_JOIN_GROUPS ? "keyed recompute (groups through joins)" :
									"full recompute"));
	return lines;
}
