/*-------------------------------------------------------------------------
 *
 * api.h
 *	  What the SQL functions of api.c share with the rest of the library.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_API_H
#define DJ_API_H

#include "catalog.h"

extern void api_check_primary(const char *function);
extern uint64 api_refresh_view(ViewRecord *view, bool by_caller);

#endif							/* DJ_API_H */
