/*-------------------------------------------------------------------------
 *
 * catalog.h
 *	  Reading and writing delta_join.view_catalog and source_catalog.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_CATALOG_H
#define DJ_CATALOG_H

#include "access/xlogdefs.h"
#include "analyze.h"
#include "utils/jsonb.h"

/* One row of delta_join.view_catalog. */
typedef struct ViewRecord
{
	int			view_id;
	Oid			target;
	char	   *target_name;
	DeltaKind	kind;
	char	   *query;
	char	   *search_path;	/* the creator's, to resolve names in query */
	Jsonb	   *options;
	Oid			owner;
	bool		in_error;
	XLogRecPtr	applied_lsn;
} ViewRecord;

/* What catalog_act_as() changed, for catalog_act_done() to put back. */
typedef struct ActingAs
{
	Oid			save_userid;
	int			save_sec_context;
	int			nestlevel;
} ActingAs;

extern void catalog_act_as(Oid role, const char *search_path, ActingAs *acting);
extern void catalog_act_done(ActingAs *acting);
extern int	catalog_exec(const char *sql, int nargs, Oid *argtypes, Datum *values,
						 const char *nulls);
extern int	catalog_insert_view(Oid target, const char *target_name, DeltaPlan *plan,
								const char *search_path, XLogRecPtr lsn);
extern bool catalog_find_view(Oid target, ViewRecord *view);
extern bool catalog_get_view(int view_id, ViewRecord *view);
extern void catalog_delete_view(int view_id);
extern void catalog_reset_view(int view_id, XLogRecPtr lsn);
extern void catalog_rewrite_sources(int view_id, DeltaPlan *plan);
extern void catalog_check_sources(int view_id, DeltaPlan *plan);
extern int	catalog_use_search_path(ViewRecord *view);
extern DeltaPlan *catalog_view_plan(ViewRecord *view);

#endif							/* DJ_CATALOG_H */
