/*-------------------------------------------------------------------------
 *
 * decoding.h
 *	  The decoding driver (decoding.c): the apply worker's logical decoding
 *	  context and the capture of the batch being made.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_DECODING_H
#define DJ_DECODING_H

#include "access/xlogdefs.h"
#include "nodes/pg_list.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"

#include "base/batch.h"
#include "capture/capture.h"

extern void decoding_skip_to(XLogRecPtr moveto);
extern void decoding_start(MemoryContext cxt, void (*reset) (void));
extern bool decoding_running(void);
extern void decoding_stop(void);
extern XLogRecPtr decoding_position(void);
extern bool decoding_read(BatchPolicy policy, Snapshot snapshot, XLogRecPtr upto);
extern bool decoding_behind(void);
extern XLogRecPtr decoding_last_xact_end(XLogRecPtr from, XLogRecPtr upto, uint64 max_bytes);

extern void decoding_new_batch(MemoryContext cxt);
extern void decoding_end_batch(void);
extern bool decoding_batch_empty(void);
extern int64 decoding_batch_spilled(int64 *spill_at);
extern ViewBatch *decoding_batch_next_chunk(int view_id, bool rewind, int max_keys);
extern List *decoding_batch_views(void);
extern List *decoding_batch_broken(void);
extern XLogRecPtr decoding_carried_lsn(void);
extern bool decoding_carrying(void);
extern bool decoding_carried_ready(void);

#endif							/* DJ_DECODING_H */
