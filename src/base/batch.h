/*-------------------------------------------------------------------------
 *
 * batch.h
 *	  A batch: the dirty keys of each view that one apply transaction covers.
 *
 * The capture (capture/capture.c) fills a batch from what the output plugin
 * (capture/plugin.c) decodes, deduplicating keys per view and source; the
 * worker hands each view's part to the applier (apply/apply_view.c) inside
 * one transaction.  Everything here
 * lives in the worker's batch memory context, which is reset after the
 * batch commits.  batch.c has what works on keys as bytes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef DJ_BATCH_H
#define DJ_BATCH_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "access/xlogdefs.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/hsearch.h"
#include "utils/timestamp.h"

/*
 * One dirty key: the values of the source's key columns (source_catalog.
 * key_columns, in that order, typed as the root relation's columns).
 *
 * Decoding also keeps, when it can, the source row as the batch's last
 * change of the key left it (capture.c): row_known, and row, or NULL if that
 * change deleted it.  The join applier then uses it instead of fetching the
 * row by its key.  Under eventual semantics that is as good as the row the
 * fetch would find: a later change of the row is decoded, and applied, in a
 * later batch.  Without it (row_known false) the row is fetched.
 */
typedef struct DirtyKey
{
	Datum	   *values;
	bool	   *isnull;
	bool		row_known;
	HeapTuple	row;			/* in the SourceBatch's rowdesc */

	/*
	 * The key's weight: +1 for each new row the batch's changes made with
	 * this image, -1 for each old row they removed (an additive aggregate,
	 * apply_additive.c).  Meaningful only in a ViewBatch that is weighed.
	 */
	int64		weight;
} DirtyKey;

/*
 * How the columns of a source's key are stored, as the images of its dirty
 * keys are written and read (batch.c): typlen and typbyval of each.
 */
typedef struct KeyShape
{
	int			nkeys;			/* columns of a key */
	int16	   *typlen;
	bool	   *typbyval;
} KeyShape;

/* The dirty keys of one source of one view. */
typedef struct SourceBatch
{
	int			ordinal;		/* source_catalog.ordinal */
	Oid			relid;			/* the source (root if partitioned) */
	bool		truncated;		/* the source was truncated in this batch */
	KeyShape	shape;			/* of its keys */
	List	   *keys;			/* DirtyKey *, no two equal */
	TupleDesc	rowdesc;		/* the row type of the keys' rows, as decoded;
								 * NULL: no key has a row */
	bool		rows_off;		/* the row type changed within the batch: keep
								 * no rows */
} SourceBatch;

struct ViewBatch;

/*
 * The rest of a view's keys, read a chunk at a time while the view is
 * applied: the next chunk (in memory until the call after), or NULL once
 * every key was read.
 */
typedef struct ViewBatch *(*ChunkReader) (void *arg);

/* The part of a batch that concerns one view. */
typedef struct ViewBatch
{
	int			view_id;
	List	   *sources;		/* SourceBatch *, only those with work */
	int64		changes;		/* decoded changes this batch covers */
	TimestampTz commit_time;	/* commit time of the newest change */
	bool		chunk;			/* only keys the capture spilled (capture.h):
								 * the view's batch itself comes after */
	bool		caches_stale;	/* the lookup caches may hold rows older than
								 * the batch: empty them all (a helper's
								 * share, parallel.c) */
	bool		whole;			/* recompute the whole view: more keys waited
								 * than the worker keeps (retry.c), and they
								 * were dropped */

	/*
	 * The keys' weights (DirtyKey.weight) sum every change of the view's
	 * sources that the batch's snapshot saw last batch and sees now: set by
	 * the capture for its own batch, cleared by whatever makes it not so
	 * (a key carried in from an earlier batch, a change whose old row was
	 * not logged whole, a TRUNCATE).  Keys spilled to disk keep their
	 * weights, and a chunk of them is weighed as its batch is; the batch
	 * gathered with them is weighed if the capture's was (apply_view.c,
	 * pieces_together).  A merge sums the weights of the keys the two
	 * batches share and is weighed if both were: the waiting work of a
	 * view (retry.c), which sums consecutive batches.  Any other batch made
	 * of batches (a copy, a piece, the rest of a view's work) is not
	 * weighed.
	 */
	bool		weighed;

	/*
	 * Keys read a chunk at a time (apply_view.c, pieces_together): the
	 * batch holds none, each source's list being empty, and the applier
	 * reads them all with next_chunk(next_chunk_arg), so that they are never
	 * all in memory.  NULL for a batch that holds its keys.  A copy, a
	 * piece or a merge holds its keys.
	 */
	ChunkReader next_chunk;
	void	   *next_chunk_arg;
} ViewBatch;

/* What applying one view's batch did, added to the view's counters. */
typedef struct ApplyCounts
{
	int64		keys_applied;
	int64		rows_upserted;
	int64		rows_deleted;
	int64		rows_unchanged;
	int64		lookups;
	int64		cache_hits;
	TimestampTz recomputed_at;	/* the last full recompute (not a count) */
	bool		additive;		/* the view's plan adds batches to its groups
								 * (apply_additive.c): how it is kept, not a
								 * count */
} ApplyCounts;

/*
 * When a batch is applied: the batch policy, from the apply worker's
 * settings (one batch serves every view of a database, and no view's
 * options may shrink it for the others).  A batch is applied as soon as
 * decoding has caught up with the WAL there is; while WAL keeps coming,
 * once it holds max_keys distinct keys or its first change is timeout_ms
 * old.  A batch that one transaction tips over max_keys stays in memory;
 * its keys spill to disk once it holds twice as many, and the spilled keys
 * are applied in chunks of max_keys.  A batch that spilled, like one that
 * is due, is cut short only with much WAL still to read (decoding.c): the
 * transactions that follow a large one join its batch.
 *
 * After a batch that caught up with the WAL, the next round of decoding
 * waits until round_ms after it: on a busy system the commits of those
 * milliseconds share one batch, instead of one batch each (a batch has a
 * fixed cost of a few hundred microseconds), while a quiet system still
 * sees its change applied at once.
 */
typedef struct BatchPolicy
{
	int			max_keys;
	int			timeout_ms;
	int			round_ms;
} BatchPolicy;

#define BATCH_ROUND_MS	5		/* shortest time between caught-up batches */

/* batch.c */
extern BatchPolicy batch_policy_for(void);
extern int64 batch_policy_spill_at(BatchPolicy policy);
extern bool batch_policy_full(BatchPolicy policy, int64 nkeys, int64 nspilled);
extern TimestampTz batch_policy_due_at(BatchPolicy policy, TimestampTz first_change);
extern TimestampTz batch_policy_next_round(BatchPolicy policy, TimestampTz applied_at);

extern void key_shape_copy(KeyShape *dst, const KeyShape *src);
extern void dirty_key_image(StringInfo buf, const KeyShape *shape,
							const Datum *values, const bool *isnull);
extern bool dirty_key_is_toasted(const KeyShape *shape, const Datum *values,
								 const bool *isnull);
extern bool dirty_key_pointer_image(StringInfo buf, const KeyShape *shape,
									const Datum *values, const bool *isnull);
extern DirtyKey **key_set_enter_pointers(HTAB **pointers, StringInfo buf,
										 const KeyShape *shape, const Datum *values,
										 const bool *isnull, MemoryContext cxt);
extern void dirty_key_detoast(const KeyShape *shape, const Datum *values,
							  const bool *isnull, Datum *plain);
extern void dirty_key_detoast_free(const KeyShape *shape, const Datum *values,
								   Datum *plain);
extern DirtyKey *dirty_key_make(const KeyShape *shape, const Datum *values,
								const bool *isnull);
extern DirtyKey *dirty_key_from_image(const KeyShape *shape, const char *image,
									  uint32 *len);
extern HTAB *key_set_create(MemoryContext cxt);
extern DirtyKey **key_set_enter(HTAB *set, int view_id, int ordinal,
							   const StringInfo image, MemoryContext cxt);
extern DirtyKey **key_set_find(HTAB *set, int view_id, int ordinal,
							   const StringInfo image);
extern bool row_type_fits(TupleDesc stored, TupleDesc current);
extern void view_batch_sort_sources(ViewBatch *batch);
extern int64 view_batch_nkeys(const ViewBatch *batch);
extern void view_batch_forget_rows(ViewBatch *batch);
extern ViewBatch *view_batch_copy(const ViewBatch *batch);
extern ViewBatch *view_batch_take(ViewBatch *batch, int64 n, bool first);
extern void apply_counts_add(ApplyCounts *into, const ApplyCounts *from);
extern void view_batch_merge(ViewBatch *into, const ViewBatch *from, HTAB *seen,
							 MemoryContext cxt);

#endif							/* DJ_BATCH_H */
