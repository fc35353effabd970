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

#include "base/compat.h"

#define DJ_SCHEMA			"delta_join"
#define DJ_PLUGIN_NAME		"delta_join"
#define DJ_EXTENSION_NAME	"delta_join"

/*
 * The schema whose tables pg_dump never dumps (initdb makes it): a view
 * naming one, as source or target, would make the restore of the views'
 * catalog fail, every view's row with it
 */
#define DJ_UNDUMPED_SCHEMA	"information_schema"

/*
 * Versions of the extension's SQL objects (its catalog, views and
 * functions: pg_extension.extversion).  This library is made for
 * DJ_VERSION (default_version in delta_join.control) and runs the objects
 * of every version from DJ_OLDEST_VERSION on correctly.  Between the
 * installation of a new library and ALTER EXTENSION delta_join UPDATE, or
 * after an update that ran before the server loaded the library installed
 * with it, a database whose objects are of another version is not touched:
 * its views wait and delta_join.status says what to run
 * (catalog_version_problem, catalog.c).  A release whose update script
 * changes what the library reads or writes raises DJ_OLDEST_VERSION to
 * itself, unless the library keeps a path for the older objects.
 */
#define DJ_VERSION			"0.2"
#define DJ_OLDEST_VERSION	"0.1"

/*
 * The replication origin that marks the rows a fill (create_view,
 * refresh) writes into a target nothing else reads (ops/target.c): the
 * apply worker's decoding skips them before queueing them (plugin.c).
 * Made by the extension's scripts, once for the cluster.
 */
#define DJ_FILL_ORIGIN		"delta_join fill"

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
	 * Not an option: set only while a Citus coordinator analyzes a
	 * distributed view (citus/eligibility.c), whose sources are distributed
	 * tables; never stored.
	 */
	bool		distributed;

	/*
	 * Not an option either: set while the database's SQL objects are version
	 * 0.1 (not yet ALTER EXTENSION ... UPDATE'd), whose catalog has no
	 * room for the groups-through-joins path, which is then not offered;
	 * never stored.
	 */
	bool		catalog_01;

	/*
	 * The seeds' client parameters of asynchronous lookups, accepted under
	 * their names so that the seeds' SQL runs unchanged; -1 when not given.
	 * They have no meaning for a synchronous in-database lookup (explain
	 * says which knob plays their part).
	 */
	int			seed_queue_size;
	int			seed_max_inflight;
	int			seed_buffer_capacity;
	int			seed_max_batch_size;	/* also from table hints (options_settle) */

	/*
	 * The streaming engine's settings of one kind of operator, given under
	 * its names (table.optimizer.delta-join.* for joins, delta-agg.* for
	 * aggregates; indexed by DJ_ENGINE_JOIN, DJ_ENGINE_AGG): -1 when not
	 * given.  options_settle() makes those of the view's kind (or else the
	 * other kind's) its strategy and ignore_non_unique_key_filter once the
	 * query is known; the other kind's, when both are given, stay for
	 * explain to report as not applicable.
	 */
	int			engine_strategy[2];	/* a DeltaStrategy */
	int			engine_ignore_filter[2];	/* 0 or 1 */
} DeltaOptions;

#define DJ_ENGINE_JOIN	0
#define DJ_ENGINE_AGG	1

/*
 * The options of one /\*+ OPTIONS(...) *\/ hint after a table of the query
 * (or of a FOR SYSTEM_TIME AS OF clause, which sets lookup_only: dialect.c),
 * or of one source as source_catalog.options keeps them.
 */
typedef struct DeltaHint
{
	int			location;		/* offset of the comment in the query text */
	int			rtindex;		/* the source it follows, once matched */
	Oid			relid;			/* read back from source_catalog: its source's
								 * table (a full recompute's sources are
								 * tables, not range-table entries) */
	int			cache_size;		/* -1: not given */
	bool		cache_enabled;
	bool		cache_enabled_set;
	bool		lookup_only;
	int			seed_queue_size;	/* the seeds' client parameters, -1: not given */
	int			seed_max_inflight;
	int			seed_buffer_capacity;
	int			seed_max_batch_size;
	int			batch_timeout_ms;	/* client.lookup.batch-timeout, -1: not given */
	char	   *as_of;			/* FOR SYSTEM_TIME AS OF: its column, as written */
} DeltaHint;

/* What a view's query is (view_catalog.kind) */
typedef enum DeltaKind
{
	DJ_KIND_JOIN,
	DJ_KIND_AGGREGATE,
	DJ_KIND_QUERY				/* any other query (full recompute) */
} DeltaKind;

/*
 * How a view is maintained (DESIGN.md §2): the delta rewrite; keyed
 * recompute (a delta view's shape, but an index, partition or filter rule
 * failed: the rows of each dirty key recomputed by plans the planner
 * chooses, exactly); full recompute (any other deterministic query:
 * recomputed at most once per refresh_interval, the difference written);
 * keyed recompute of groups through joins (an aggregate, or a SELECT
 * DISTINCT, over inner joins, strategy auto: the groups a batch's changed
 * rows leave and enter found through the join, then recomputed as keyed
 * recompute does; last, so that the values before it keep their numbers).
 */
typedef enum DeltaPath
{
	DJ_PATH_DELTA,
	DJ_PATH_KEYED,
	DJ_PATH_FULL,
	DJ_PATH_JOIN_GROUPS
} DeltaPath;

/* GUC variables: the defaults of new views' options (options.c) */
extern int	dj_strategy;
extern bool dj_ignore_non_unique_key_filter;
extern bool dj_cache_enabled;
extern int	dj_left_cache_size;
extern int	dj_right_cache_size;
extern int	dj_max_batch_size;
extern int	dj_batch_timeout_ms;
extern int	dj_lookup_timeout_ms;

/* options.c: names as the catalog and the SQL interface spell them */
extern const char *dj_strategy_name(DeltaStrategy strategy);
extern bool dj_parse_strategy(const char *name, DeltaStrategy *strategy);
extern const char *dj_path_name(DeltaPath path);
extern bool dj_parse_path(const char *name, DeltaPath *path);
extern const char *dj_kind_name(DeltaKind kind);
extern const char *dj_message_name(const char *name);
extern void dj_text_copy(char *dst, const char *src, size_t size);

#endif							/* DELTA_JOIN_H */
