/*-------------------------------------------------------------------------
 *
 * view_plan.h
 *	  The delta plan of a registered view (view_plan.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_VIEW_PLAN_H
#define DJ_VIEW_PLAN_H

#include "analysis/analyze.h"
#include "registry/catalog.h"

extern DeltaPlan *view_plan_load(ViewRecord *view);
extern DeltaPlan *view_plan_load_to_fill(ViewRecord *view);
extern DeltaPlan *view_plan_load_to_rebuild(ViewRecord *view, bool *rekey);
extern bool view_plan_sources_changed(ViewRecord *view, DeltaPlan *plan);
extern List *view_plan_source_records(DeltaPlan *plan);
extern bool view_plan_reads(ViewRecord *view, Oid relid);

#endif							/* DJ_VIEW_PLAN_H */
