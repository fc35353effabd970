/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  Reading and writing delta_join.view_catalog and source_catalog, and
 *	  whether this library runs the version they are of.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CATALOG_H
#define DJ_CATALOG_H

#include "access/xlogdefs.h"
#include "base/delta_join.h"
#include "nodes/pg_list.h"
#include "storage/lockdefs.h"
#include "utils/jsonb.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

/* One row of delta_join.source_catalog. */
typedef struct SourceRecord
{
	int			ordinal;		/* range-table position in the query */
	Oid			relid;			/* root if partitioned */
	int			nkeys;
	AttrNumber *key_attnums;	/* columns of relid whose values make a dirty key */
	DeltaHint	hint;			/* its table hint options, rtindex = ordinal */
} SourceRecord;

/* One row of delta_join.view_catalog, with its sources. */
typedef struct ViewRecord
{
	int			view_id;
	Oid			target;
	Oid			query_view;		/* InvalidOid once dropped with a source */
	DeltaKind	kind;
	DeltaPath	path;
	DeltaOptions options;
	Jsonb	   *settings;		/* pinned at creation (runas.c) */
	bool		in_error;
	bool		backfilling;	/* a concurrent create or refresh runs:
								 * its changes are held back */
	XLogRecPtr	applied_lsn;
	TransactionId row_xmin;		/* who wrote the catalog row last */
	List	   *sources;		/* SourceRecord *, in ordinal order */
} ViewRecord;

/* The key columns of one (view, source) a relation feeds, for decoding. */
typedef struct SourceKeys
{
	int			view_id;
	int			ordinal;
	Oid			relid;			/* the source as registered */
	int			nkeys;
	AttrNumber *key_attnums;	/* columns of relid */
	bool		lookup_only;	/* its changes trigger nothing */
} SourceKeys;

/* Can this library run the SQL objects of the database (catalog_version_check)? */
typedef enum CatalogVersion
{
	CATALOG_VERSION_OK,			/* DJ_OLDEST_VERSION to DJ_VERSION */
	CATALOG_VERSION_OLDER,		/* older: ALTER EXTENSION delta_join UPDATE */
	CATALOG_VERSION_NEWER		/* newer, or unreadable: load their library */
} CatalogVersion;

extern CatalogVersion catalog_version_check(char **installed);
extern bool catalog_installed_at_least(const char *version);
extern char *catalog_version_problem(void);
extern void catalog_require_version(void);
extern int	catalog_exec(const char *sql, int nargs, Oid *argtypes, Datum *values,
						 const char *nulls);
extern int	catalog_insert_view(Oid target, Oid query_view, DeltaKind kind, DeltaPath path,
								const DeltaOptions *options, List *sources,
								Jsonb *settings, XLogRecPtr lsn, const char *managed_by);
extern bool catalog_find_view(Oid target, ViewRecord *view);
extern char *catalog_managed_by(Oid target);
extern List *catalog_list_views(void);
extern XLogRecPtr catalog_oldest_applied_lsn(void);
extern ViewRecord *catalog_view_in(List *views, int view_id);
extern Oid	catalog_relid(const char *relname);
extern bool catalog_lock_extension(void);
extern void catalog_unlock_extension(void);
extern bool catalog_lock_views(LOCKMODE mode);
extern void catalog_mark_views_stale(const char *reason);
extern bool catalog_view_written_after(ViewRecord *view, Snapshot snapshot);
extern void catalog_delete_view(int view_id);
extern void catalog_reset_view(int view_id, XLogRecPtr lsn);
extern int	catalog_renumber_view(int view_id);
extern void catalog_set_backfilling(int view_id);
extern bool catalog_set_error(ViewRecord *view, const ErrorData *error, bool report);
extern void catalog_set_applied(int nviews, const int *view_ids, XLogRecPtr lsn);
extern void catalog_forget_query_view(int view_id);
extern void catalog_rewrite_sources(int view_id, List *sources);
extern char *catalog_view_name(ViewRecord *view);
extern List *catalog_hints(ViewRecord *view);
extern List *catalog_decode_sources(Relation catrel, Oid catindex, Oid relid);

#endif							/* DJ_CATALOG_H */
