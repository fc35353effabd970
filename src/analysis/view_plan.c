/*-------------------------------------------------------------------------
 *
 * view_plan.c
 *	  The delta plan of a registered view: its bound query (query.c) loaded
 *	  and analyzed with the options and table hints the catalog keeps for
 *	  it, and checked against the sources whose changes are captured for
 *	  it; and, the other way, the catalog's rows of a new plan's sources.
 *
 * The apply side's plan cache and the view operations (refresh, the DDL
 * guard) take a view's plan from here; the catalog itself (registry/)
 * keeps rows only.  So does the question the DDL guard and wait() ask of
 * the sources a view registered: does it read this table?
 *
 * IDENTIFICATION
 *	  src/analysis/view_plan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "analysis/analyze.h"
#include "analysis/query.h"
#include "analysis/view_plan.h"
#include "base/options.h"
#include "base/runas.h"

/*
 * The source_catalog rows of a plan's sources (SourceRecord *): each
 * source's key columns, and the table hint options it was analysed with.
 */
List *
view_plan_source_records(DeltaPlan *plan)
{
	List	   *records = NIL;
	ListCell   *lc;

	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		SourceRecord *rec = palloc0(sizeof(SourceRecord));

		rec->ordinal = src->ordinal;
		rec->relid = src->relid;
		rec->nkeys = src->key_natts;
		rec->key_attnums = src->key_attnums;
		hint_init(&rec->hint);
		rec->hint.cache_size = src->cache_size;
		rec->hint.cache_enabled = src->cache_enabled;
		rec->hint.cache_enabled_set = (src->cache_enabled != plan->options.cache_enabled);
		rec->hint.lookup_only = src->lookup_only;
		rec->hint.seed_queue_size = src->seed_queue_size;
		rec->hint.seed_max_inflight = src->seed_max_inflight;
		rec->hint.seed_buffer_capacity = src->seed_buffer_capacity;
		records = lappend(records, rec);
	}
	return records;
}

/*
 * A registered view's bound query, analyzed with its options and hints, as
 * the target's owner with the view's settings (runas.h), as everything
 * that evaluates the query.  The analysis runs built-in code only (it
 * folds a UNION ALL branch's tag through built-in casts alone,
 * analyze_union.c); what it runs must still not run with the rights of
 * whoever needs the plan -- the worker, a superuser, or the DDL guard, in
 * the session of the role whose command it checks.
 */
static DeltaPlan *
analyze_registered(ViewRecord *view)
{
	RunAs		runas;
	DeltaPlan  *plan;

	if (!OidIsValid(view->query_view))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the query of delta view %s was dropped",
						dj_message_name(catalog_view_name(view))),
				 errdetail("A source of the view was dropped with CASCADE, which dropped the view's query too."),
				 errhint("Drop the view with delta_join.drop_view and create it again.")));
	runas_begin(runas_target_owner(view->target), view->settings, &runas);
	/* (the DDL guard catches errors and goes on: be the caller again first) */
	PG_TRY();
	{
		plan = analyze_plan_path(query_load(view->query_view), catalog_hints(view),
								 &view->options, view->path);
	}
	PG_CATCH();
	{
		runas_end(&runas);
		PG_RE_THROW();
	}
	PG_END_TRY();
	runas_end(&runas);
	return plan;
}

/* Are the registered key columns of a source these? */
static bool
same_columns(SourceRecord *rec, int n, const AttrNumber *attnums)
{
	return rec->nkeys == n && memcmp(rec->key_attnums, attnums, sizeof(AttrNumber) * n) == 0;
}

/*
 * The dirty keys decoding captures for each source of a delta view or a
 * keyed recompute (source_catalog.key_attnums) must still be the key
 * columns of the plan: a source's key redefined since (which the DDL guard
 * refuses) would hand the wrong values to the lookups.
 *
 * With rekey, a refresh asks instead whether the registered columns of the
 * same sources differ from the plan's own (a table restored by pg_dump
 * without its dropped columns numbers them anew; a view registered before
 * it could be additive has its narrow key): then it returns true, the plan
 * keeps its own keys, and the refresh registers them (ops_refresh_view).
 */
static bool
check_source_keys(ViewRecord *view, DeltaPlan *plan, bool rekey)
{
	bool		narrowed = false;
	bool		differ = false;
	ListCell   *lc;

	if (plan->path == DJ_PATH_FULL)
		return false;
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		SourceRecord *rec = NULL;
		ListCell   *lc2;

		foreach(lc2, view->sources)
		{
			if (((SourceRecord *) lfirst(lc2))->ordinal == src->ordinal)
				rec = lfirst(lc2);
		}
		if (rec != NULL && rec->relid == src->relid && rekey)
		{
			differ |= !same_columns(rec, src->key_natts, src->key_attnums);
			continue;
		}
		if (rec != NULL && src->narrow_attnums != NULL &&
			!same_columns(rec, src->key_natts, src->key_attnums))
		{
			/*
			 * Groups through joins: registered narrow (before the additive
			 * apply, or not additive then), or wide (additive then, not
			 * now: the replica identity changed).
			 */
			if (same_columns(rec, src->narrow_natts, src->narrow_attnums))
			{
				src->key_natts = src->narrow_natts;
				src->key_attnums = src->narrow_attnums;
				narrowed = true;
				continue;
			}
			if (same_columns(rec, src->wide_natts, src->wide_attnums))
			{
				src->key_natts = src->wide_natts;
				src->key_attnums = src->wide_attnums;
				continue;
			}
		}
		if (rec == NULL || rec->relid != src->relid ||
			!same_columns(rec, src->key_natts, src->key_attnums))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("the key of source %s changed since the view was created",
							dj_message_name(src->relname)),
					 errdetail("Changes of the source are captured by other columns than the view now needs."),
					 errhint("Rebuild the view with delta_join.refresh(), not concurrently: it registers the columns anew.")));
	}
	if (narrowed && plan->additive)
	{
		plan->additive = false;
		plan->additive_refusal = pstrdup("its changes are captured by the columns its group key and joins read only (it was created before it could be additive): delta_join.refresh(), not concurrently, makes it additive");
	}
	return differ;
}

/*
 * Are the tables a full recompute's query reads now (its plan's sources)
 * other than those whose changes are captured for it?  An inheritance
 * child that came or went, a view it reads replaced: rows came or went
 * without changes of a source, and a new table's changes are not
 * captured.  (The sources of the other paths are range-table entries of
 * the bound query, which do not change.)
 */
bool
view_plan_sources_changed(ViewRecord *view, DeltaPlan *plan)
{
	ListCell   *lc;

	if (plan->path != DJ_PATH_FULL)
		return false;
	if (list_length(plan->sources) != list_length(view->sources))
		return true;
	foreach(lc, plan->sources)
	{
		DeltaSource *src = lfirst(lc);
		bool		found = false;
		ListCell   *lc2;

		foreach(lc2, view->sources)
		{
			SourceRecord *rec = lfirst(lc2);

			found |= (rec->relid == src->relid && rec->hint.lookup_only == src->lookup_only);
		}
		if (!found)
			return true;
	}
	return false;
}

/*
 * The delta plan of a registered view, as the worker applies it: its bound
 * query analyzed with its options and hints, its sources still those whose
 * changes are captured.
 */
DeltaPlan *
view_plan_load(ViewRecord *view)
{
	DeltaPlan  *plan = analyze_registered(view);
	ViewRecord	current;

	(void) check_source_keys(view, plan, false);

	/*
	 * (The record may have been read before the DDL that changed the tables
	 * committed, with the refresh that registered them: compare with the
	 * catalog as the analysis read it.)
	 */
	if (view_plan_sources_changed(view, plan) &&
		(!catalog_find_view(view->target, &current) ||
		 view_plan_sources_changed(&current, plan)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the tables delta view %s reads changed since it was filled",
						dj_message_name(catalog_view_name(view))),
				 errdetail("An inheritance child of a table it reads came or went, or a view it reads was replaced, without a refresh: rows came or went without changes of its sources."),
				 errhint("Rebuild the view with delta_join.refresh().")));
	return plan;
}

/*
 * The plan of a view about to be filled again, which registers its sources
 * anew (catalog_rewrite_sources): as view_plan_load, but the tables a
 * full recompute reads may have changed.
 */
DeltaPlan *
view_plan_load_to_fill(ViewRecord *view)
{
	DeltaPlan  *plan = analyze_registered(view);

	(void) check_source_keys(view, plan, false);
	return plan;
}

/*
 * The plan of a view that a refresh fills again under locks that keep its
 * sources' writers out (ops_refresh_view): as view_plan_load_to_fill, but
 * with its sources' own key columns, and *rekey set if they are not those
 * registered, which the refresh then registers anew.
 */
DeltaPlan *
view_plan_load_to_rebuild(ViewRecord *view, bool *rekey)
{
	DeltaPlan  *plan = analyze_registered(view);

	*rekey = check_source_keys(view, plan, true);
	return plan;
}


/*
 * Does the registered view read relid: is it one of the sources whose
 * changes are captured for it (its source_catalog rows)?
 */
bool
view_plan_reads(ViewRecord *view, Oid relid)
{
	ListCell   *lc;

	foreach(lc, view->sources)
	{
		if (((SourceRecord *) lfirst(lc))->relid == relid)
			return true;
	}
	return false;
}
