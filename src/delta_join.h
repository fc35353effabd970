/*-------------------------------------------------------------------------
 *
 * delta_join.h
 *	  Nouns shared by every part of delta_join, and its settings.
 *
 * Vocabulary (used the same way in every file, comment and message):
 *
 *	view		a registered delta view: a query whose result is kept in a
 *				target table and maintained incrementally.
 *	source		a table the view's query reads (one range-table entry; the
 *				same table joined twice is two sources).
 *	target		the ordinary table the view writes its result into.
 *	delta plan	what the analyzer makes of a view's query: its sources, join
 *				edges, lookup indexes, filters, projection and result key.
 *	dirty key	the primary key (join views) or group key (aggregate views)
 *				of a source row that changed and waits to be applied.
 *	batch		the dirty keys one apply transaction covers.
 *	lookup		an index-prefix scan on a source.
 *	query view	the Postgres view of schema delta_join that holds a view's
 *				query, bound once at creation (query.c).
 *	owner		the role that owns the target; a view is applied, refreshed
 *				and backfilled as that role, with the settings pinned at its
 *				creation (runas.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DELTA_JOIN_H
#define DELTA_JOIN_H

#include "postgres.h"

#include "compat.h"

#define DJ_SCHEMA			"delta_join"
#define DJ_PLUGIN_NAME		"delta_join"

/* A full recompute runs at most this often by default (option refresh_interval) */
#define DJ_DEFAULT_REFRESH_INTERVAL_MS	1000

/* Strategies, mirroring table.optimizer.delta-join.strategy */
typedef enum DeltaStrategy
{
	DJ_STRATEGY_NONE,			/* no rewrite: fallback only */
	DJ_STRATEGY_AUTO,			/* delta when eligible, else fallback */
	DJ_STRATEGY_EVENTUAL		/* delta or error ("force" is an alias) */
} DeltaStrategy;

/*
 * The settings one view runs with: the session's GUCs at creation, overridden
 * by the options jsonb of create_view.  Stored in the catalog as jsonb.
 */
typedef struct DeltaOptions
{
	DeltaStrategy strategy;
	bool		ignore_non_unique_key_filter;
	bool		cache_enabled;
	int			left_cache_size;
	int			right_cache_size;
	int			max_batch_size;
	int			batch_timeout_ms;
	int			lookup_timeout_ms;
	bool		retract;
	bool		manual_writes;	/* roles other than delta_join may write the
								 * target (e.g. to purge logically deleted
								 * rows) */
	int			refresh_interval_ms;	/* full recompute: shortest period */

	/*
	 * The seeds' client parameters of asynchronous lookups, accepted under
	 * their names so that the seeds' SQL runs unchanged; -1 when not given.
	 * They have no meaning for a synchronous in-database lookup (explain
	 * says which knob plays their part).
	 */
	int			seed_queue_size;
	int			seed_max_inflight;
	int			seed_buffer_capacity;
} DeltaOptions;

/*
 * The options of one /\*+ OPTIONS(...) *\/ hint after a table of the query,
 * or of one source as source_catalog.options keeps them.
 */
typedef struct DeltaHint
{
	int			location;		/* offset of the comment in the query text */
	int			rtindex;		/* the source it follows, once matched */
	int			cache_size;		/* -1: not given */
	bool		cache_enabled;
	bool		cache_enabled_set;
	bool		lookup_only;
	int			seed_queue_size;	/* the seeds' client parameters, -1: not given */
	int			seed_max_inflight;
	int			seed_buffer_capacity;
} DeltaHint;

/* GUC variables (module.c) */
extern int	dj_strategy;
extern bool dj_ignore_non_unique_key_filter;
extern bool dj_cache_enabled;
extern int	dj_left_cache_size;
extern int	dj_right_cache_size;
extern int	dj_max_batch_size;
extern int	dj_batch_timeout_ms;
extern int	dj_lookup_timeout_ms;
extern int	dj_max_views;

/* module.c */
extern const char *dj_strategy_name(DeltaStrategy strategy);
extern bool dj_parse_strategy(const char *name, DeltaStrategy *strategy);

#endif							/* DELTA_JOIN_H */
