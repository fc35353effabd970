/*-------------------------------------------------------------------------
 *
 * parallel.h
 *	  Parallel apply: helper workers that apply shares of a batch beside the
 *	  apply worker.
 *
 * A database's apply worker (the leader, worker.c) decodes and captures the
 * batch alone.  When the batch is large (delta_join.parallel_apply_min_keys
 * dirty keys or more) and delta_join.apply_workers allows helpers, each
 * view's keys that can be shared are split by a hash of view and key into
 * one share per helper plus one for the leader, and every share is applied
 * at once, each in its own transaction:
 *
 *	parallel_helpers()		helpers ready to take a share (started on first
 *							use, restarted when one ended);
 *	parallel_round_begin()	a round for that many helpers;
 *	parallel_round_split()	split a view's batch: the helpers' shares go to
 *							their tasks, the leader's is returned;
 *	parallel_round_start()	hand the tasks to the helpers;
 *	parallel_round_finish()	wait until every helper has committed its task
 *							(or died);
 *	parallel_round_view_done()
 *							did every helper apply its share of that view?
 *
 * The leader commits its own shares before it waits, so that it never holds
 * a lock a helper waits for while it waits for the helper.  A view whose
 * share failed anywhere -- two shares met on a target row (a unique-key race,
 * a row updated or deleted under them, a deadlock), or a real error -- is
 * applied again whole by the leader alone, which then decides, as for any
 * view, whether it waits for another try or goes to error.  Applying a key
 * twice does no harm (DESIGN.md section 2), so nothing a failed share did
 * needs undoing.  The slot is confirmed, and the views' applied positions
 * stored, only once every share has committed.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_PARALLEL_H
#define DJ_PARALLEL_H

#include "access/xlogdefs.h"
#include "fmgr.h"

#include "base/batch.h"

#define PARALLEL_MAX_HELPERS	15	/* helpers of one database at most */

/* settings (module.c) */
extern int	dj_apply_workers;

extern void parallel_define_settings(void);
extern bool am_helper;

typedef struct ShareRound ShareRound;

extern int	parallel_helpers(Oid dboid);
extern void parallel_trim(void);
extern ShareRound *parallel_round_begin(int nhelpers, XLogRecPtr end_lsn);
extern ViewBatch *parallel_round_split(ShareRound *round, ViewBatch *work,
										const int *share_by, int lookup_timeout_ms);
extern void parallel_round_start(ShareRound *round);
extern void parallel_round_finish(ShareRound *round);
extern bool parallel_round_view_done(ShareRound *round, int view_id, ApplyCounts *counts);
extern void parallel_round_end(ShareRound *round);
extern void parallel_stop(void);

/* Background worker entry point (bgw_function_name) */
extern PGDLLEXPORT void dj_helper_main(Datum main_arg);

#endif							/* DJ_PARALLEL_H */
