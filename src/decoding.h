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
#include "utils/timestamp.h"

#include "batch.h"

extern void decoding_start(MemoryContext cxt);
extern bool decoding_running(void);
extern void decoding_stop(void);
extern XLogRecPtr decoding_position(void);
extern bool decoding_read(BatchPolicy policy);

extern void decoding_new_batch(MemoryContext cxt);
extern void decoding_end_batch(void);
extern bool decoding_batch_empty(void);
extern bool decoding_batch_due(BatchPolicy policy);
extern TimestampTz decoding_batch_due_at(BatchPolicy policy);
extern int64 decoding_batch_spilled(int64 *spill_at);
extern ViewBatch *decoding_batch_next_chunk(int view_id, bool rewind, int max_keys);
extern List *decoding_batch_views(void);
extern List *decoding_batch_broken(void);
extern void decoding_wait_visible(void);

#endif							/* DJ_DECODING_H */
