/*-------------------------------------------------------------------------
 *
 * run.c
 *	  How the Citus layer runs things: a statement through SPI as the
 *	  caller, and a function in a guarded subtransaction.
 *
 * A statement of the Citus layer that goes through Citus (a distributed
 * table read or made, a definition written, a function run on the nodes)
 * runs as the caller, unlike the reads of catalogs (registry/), which run
 * as the bootstrap superuser: Citus checks the caller's rights, and reaches
 * the nodes over the caller's connections.
 *
 * A guarded call is one whose failure must not end the caller's work: the
 * sync of a node's shard views (one view that cannot be made does not hold
 * the others back, and the apply worker goes on), and a definition's query
 * parsed again to see what it reads.  It runs in a subtransaction, which an
 * error rolls back (with its locks and memory) before the caller goes on.
 *
 * IDENTIFICATION
 *	  src/citus/run.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "citus/run.h"

/* Run one statement through SPI (connected) as the caller; returns SPI_processed */
uint64
run_statement(const char *sql, int nargs, Oid *types, Datum *values)
{
	int			ret = SPI_execute_with_args(sql, nargs, types, values, NULL, false, 0);

	if (ret < 0)
		elog(ERROR, "statement failed: %s", SPI_result_code_string(ret));
	return SPI_processed;
}

/* Run one statement without arguments or result, connecting to SPI for it */
void
run_command(const char *sql)
{
	SPI_connect();
	(void) run_statement(sql, 0, NULL, NULL);
	SPI_finish();
}

/*
 * Run fn(arg) in a subtransaction; an error is rolled back and logged as a
 * WARNING that begins with what (unless what is NULL), and the caller goes
 * on.  Returns false after an error.
 */
bool
run_guarded(void (*fn) (void *arg), void *arg, const char *what)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		fn(arg);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		if (what != NULL)
			ereport(WARNING, (errmsg("delta_join: %s: %s", what, edata->message)));
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
	CurrentResourceOwner = oldowner;
	return ok;
}
