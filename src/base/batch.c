/*-------------------------------------------------------------------------
 *
 * batch.c
 *	  The batch policy, and dirty keys as bytes: their canonical image, sets
 *	  of distinct keys, merging batches.
 *
 * A key's image is what the capture deduplicates on (capture.c), what a
 * spilled or carried key is written as, what a parallel-apply task carries
 * (parallel.c), and what a deferred view's waiting keys are deduplicated on
 * (retry.c).  Per key column: 'n' for NULL, or 'v' and the
 * value -- a Datum for a type passed by value, the bytes of a fixed-length
 * type, else a length (uint32) and the bytes: a varlena's data without its
 * header, a cstring with its terminator.  Values must be detoasted (a key
 * read from a query's result may first be looked up by its TOAST pointers,
 * 'x': dirty_key_pointer_image).  Two
 * keys equal under their type's equality but not in their bytes (numeric
 * 1.0 and 1.00) are both kept: applying a key twice does no harm.
 *
 * IDENTIFICATION
 *	  src/base/batch.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "base/batch.h"
#include "base/compat.h"
#include "base/delta_join.h"

/* ----------------
 * The batch policy (batch.h)
 * ----------------
 */

/*
 * The policy of the database's batches: the apply worker's own settings
 * (delta_join.max_batch_size and batch_timeout as the server's configuration
 * sets them), never a view's options.  One batch serves every view of the
 * database, and any role may make a view with the options it likes: a view
 * that asked for batches of one key would have every view of the database
 * applied a key a batch.  A view's own max_batch_size bounds only its own
 * part of a batch (apply_view.c).
 */
BatchPolicy
batch_policy_for(void)
{
	BatchPolicy policy;

	policy.max_keys = dj_max_batch_size;
	policy.timeout_ms = dj_batch_timeout_ms;
	policy.round_ms = Min(BATCH_ROUND_MS, policy.timeout_ms);
	return policy;
}

/* How many keys a batch holds in memory before they spill to disk */
int64
batch_policy_spill_at(BatchPolicy policy)
{
	return (int64) policy.max_keys * 2;
}

/* Is a batch with nkeys keys in memory and nspilled on disk full? */
bool
batch_policy_full(BatchPolicy policy, int64 nkeys, int64 nspilled)
{
	return nkeys >= policy.max_keys || nspilled > 0;
}

/* When decoding may go on after a batch that caught up, applied at applied_at */
TimestampTz
batch_policy_next_round(BatchPolicy policy, TimestampTz applied_at)
{
	return TimestampTzPlusMilliseconds(applied_at, policy.round_ms);
}

/* When a batch whose first change came at first_change is due */
TimestampTz
batch_policy_due_at(BatchPolicy policy, TimestampTz first_change)
{
	return TimestampTzPlusMilliseconds(first_change, policy.timeout_ms);
}

/* ----------------
 * Dirty keys as bytes
 * ----------------
 */

/* A key of a key set: its view, its source and its image */
typedef struct KeyTag
{
	uint32		hash;
	int			view_id;
	int			ordinal;
	uint32		len;
	const char *data;
} KeyTag;

typedef struct KeyEntry
{
	KeyTag		tag;			/* hash key */
	DirtyKey   *key;			/* the key's DirtyKey, set by the caller */
} KeyEntry;

/*
 * A copy of a key shape, its arrays allocated in CurrentMemoryContext (the
 * capture's, a batch's, a carried key's)
 */
void
key_shape_copy(KeyShape *dst, const KeyShape *src)
{
	dst->nkeys = src->nkeys;
	dst->typlen = palloc(Max(src->nkeys, 1) * sizeof(int16));
	dst->typbyval = palloc(Max(src->nkeys, 1) * sizeof(bool));
	memcpy(dst->typlen, src->typlen, src->nkeys * sizeof(int16));
	memcpy(dst->typbyval, src->typbyval, src->nkeys * sizeof(bool));
}

/* Append the image of one value of a key, stored as typlen and typbyval say */
static void
key_value_image(StringInfo buf, int16 typlen, bool typbyval, Datum value, bool isnull)
{
	if (isnull)
	{
		appendStringInfoChar(buf, 'n');
		return;
	}
	appendStringInfoChar(buf, 'v');
	if (typbyval)
		appendBinaryStringInfo(buf, (char *) &value, sizeof(Datum));
	else if (typlen > 0)
		appendBinaryStringInfo(buf, DatumGetPointer(value), typlen);
	else
	{
		const char *data;
		uint32		len;

		if (typlen == -1)
		{
			Assert(!VARATT_IS_EXTERNAL(DatumGetPointer(value)) &&
				   !VARATT_IS_COMPRESSED(DatumGetPointer(value)));
			data = VARDATA_ANY(DatumGetPointer(value));
			len = VARSIZE_ANY_EXHDR(DatumGetPointer(value));
		}
		else
		{
			data = DatumGetCString(value);
			len = strlen(data) + 1;
		}
		appendBinaryStringInfo(buf, (char *) &len, sizeof(len));
		appendBinaryStringInfo(buf, data, len);
	}
}

/* Append the image of the key (values, isnull) of a source of that shape */
void
dirty_key_image(StringInfo buf, const KeyShape *shape,
				const Datum *values, const bool *isnull)
{
	for (int k = 0; k < shape->nkeys; k++)
		key_value_image(buf, shape->typlen[k], shape->typbyval[k], values[k], isnull[k]);
}

/*
 * A key read from a query's result may hold a varlena that is toasted --
 * kept out of line, or compressed --: one row's TOAST pointer, and another
 * row's for an equal key.  Its image is then that of its detoasted values
 * (dirty_key_detoast).  Since detoasting a value kept out of line costs a
 * read of its TOAST table, a caller that meets the same values often (a
 * group key read once per changed row) first looks the key up by its
 * pointer image (dirty_key_pointer_image): a pointer into a TOAST table
 * names one value, so equal pointer images are equal keys -- not
 * conversely.  A pointer to memory (an expanded object, an indirect datum)
 * names none, and a compressed value is as cheap to expand as to image:
 * those keys have no pointer image.  Pointer images live in memory, for
 * one apply; they are never spilled or carried.
 */
static inline bool
key_value_toasted(const KeyShape *shape, int k, const Datum *values, const bool *isnull)
{
	return !isnull[k] && shape->typlen[k] == -1 &&
		(VARATT_IS_EXTERNAL(DatumGetPointer(values[k])) ||
		 VARATT_IS_COMPRESSED(DatumGetPointer(values[k])));
}

/* Does the key hold a toasted value? */
bool
dirty_key_is_toasted(const KeyShape *shape, const Datum *values, const bool *isnull)
{
	for (int k = 0; k < shape->nkeys; k++)
		if (key_value_toasted(shape, k, values, isnull))
			return true;
	return false;
}

/*
 * Append the image of a key whose toasted values are pointers into TOAST
 * tables, each such value ('x') by its pointer; false (the image
 * unfinished) if one is not.
 */
bool
dirty_key_pointer_image(StringInfo buf, const KeyShape *shape,
						const Datum *values, const bool *isnull)
{
	for (int k = 0; k < shape->nkeys; k++)
	{
		if (key_value_toasted(shape, k, values, isnull))
		{
			struct varlena *pointer = (struct varlena *) DatumGetPointer(values[k]);

			if (!VARATT_IS_EXTERNAL_ONDISK(pointer))
				return false;
			appendStringInfoChar(buf, 'x');
			appendBinaryStringInfo(buf, (char *) pointer, VARSIZE_EXTERNAL(pointer));
		}
		else
			key_value_image(buf, shape->typlen[k], shape->typbyval[k], values[k], isnull[k]);
	}
	return true;
}

/*
 * The place, in *pointers (a key set made in cxt when first needed), of a
 * toasted key found by its pointer image (written into buf); NULL if the
 * key has none.  The place holds the key's DirtyKey once the caller has
 * found it by its value, NULL until then.
 */
DirtyKey **
key_set_enter_pointers(HTAB **pointers, StringInfo buf, const KeyShape *shape,
					   const Datum *values, const bool *isnull, MemoryContext cxt)
{
	resetStringInfo(buf);
	if (!dirty_key_pointer_image(buf, shape, values, isnull))
		return NULL;
	if (*pointers == NULL)
		*pointers = key_set_create(cxt);
	return key_set_enter(*pointers, 0, 0, buf, cxt);
}

/*
 * plain[k] = values[k], detoasted (a copy in CurrentMemoryContext) where
 * it is toasted.  plain may be values itself; else dirty_key_detoast_free
 * frees the copies.
 */
void
dirty_key_detoast(const KeyShape *shape, const Datum *values, const bool *isnull,
				  Datum *plain)
{
	for (int k = 0; k < shape->nkeys; k++)
		plain[k] = key_value_toasted(shape, k, values, isnull) ?
			PointerGetDatum(pg_detoast_datum_packed((struct varlena *) DatumGetPointer(values[k]))) :
			values[k];
}

void
dirty_key_detoast_free(const KeyShape *shape, const Datum *values, Datum *plain)
{
	for (int k = 0; k < shape->nkeys; k++)
		if (plain[k] != values[k])
			pfree(DatumGetPointer(plain[k]));
}

/* A key with copies of those values, allocated in CurrentMemoryContext */
DirtyKey *
dirty_key_make(const KeyShape *shape, const Datum *values, const bool *isnull)
{
	DirtyKey   *key = palloc0(sizeof(DirtyKey));

	key->values = palloc(Max(shape->nkeys, 1) * sizeof(Datum));
	key->isnull = palloc(Max(shape->nkeys, 1) * sizeof(bool));
	for (int k = 0; k < shape->nkeys; k++)
	{
		key->isnull[k] = isnull[k];
		key->values[k] = isnull[k] ? (Datum) 0 :
			datumCopy(values[k], shape->typbyval[k], shape->typlen[k]);
	}
	return key;
}

/*
 * The key an image holds, allocated in CurrentMemoryContext; *len is set to
 * the length of its image.
 */
DirtyKey *
dirty_key_from_image(const KeyShape *shape, const char *image, uint32 *len)
{
	DirtyKey   *key = palloc0(sizeof(DirtyKey));
	const char *p = image;

	key->values = palloc(Max(shape->nkeys, 1) * sizeof(Datum));
	key->isnull = palloc(Max(shape->nkeys, 1) * sizeof(bool));
	for (int k = 0; k < shape->nkeys; k++)
	{
		key->isnull[k] = (*p++ == 'n');
		key->values[k] = (Datum) 0;
		if (key->isnull[k])
			continue;
		if (shape->typbyval[k])
		{
			memcpy(&key->values[k], p, sizeof(Datum));
			p += sizeof(Datum);
		}
		else if (shape->typlen[k] > 0)
		{
			char	   *data = palloc(shape->typlen[k]);

			memcpy(data, p, shape->typlen[k]);
			p += shape->typlen[k];
			key->values[k] = PointerGetDatum(data);
		}
		else
		{
			uint32		n;
			char	   *data;

			memcpy(&n, p, sizeof(n));
			p += sizeof(n);
			if (shape->typlen[k] == -1)
			{
				data = palloc(VARHDRSZ + n);
				SET_VARSIZE(data, VARHDRSZ + n);
				memcpy(VARDATA(data), p, n);
			}
			else
			{
				data = palloc(n);
				memcpy(data, p, n);
			}
			p += n;
			key->values[k] = PointerGetDatum(data);
		}
	}
	*len = p - image;
	return key;
}

static uint32
key_hash(const void *key, Size keysize)
{
	return ((const KeyTag *) key)->hash;
}

static int
key_match(const void *key1, const void *key2, Size keysize)
{
	const KeyTag *a = (const KeyTag *) key1;
	const KeyTag *b = (const KeyTag *) key2;

	if (a->hash != b->hash || a->view_id != b->view_id ||
		a->ordinal != b->ordinal || a->len != b->len)
		return 1;
	return memcmp(a->data, b->data, a->len);
}

/* An empty set of keys, in cxt */
HTAB *
key_set_create(MemoryContext cxt)
{
	HASHCTL		hctl;

	hctl.keysize = sizeof(KeyTag);
	hctl.entrysize = sizeof(KeyEntry);
	hctl.hash = key_hash;
	hctl.match = key_match;
	hctl.hcxt = cxt;
	return hash_create("delta_join dirty keys", 1024, &hctl,
					   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

/*
 * The place of the key of that image in the set for its DirtyKey: NULL if
 * the key is new, and a copy of the image is then made in cxt.
 */
static void
key_tag_init(KeyTag *tag, int view_id, int ordinal, const StringInfo image)
{
	memset(tag, 0, sizeof(KeyTag));
	tag->view_id = view_id;
	tag->ordinal = ordinal;
	tag->len = image->len;
	tag->data = image->data;
	tag->hash = hash_combine(hash_bytes((const unsigned char *) image->data, image->len),
							 hash_combine((uint32) view_id, (uint32) ordinal));
}

DirtyKey **
key_set_enter(HTAB *set, int view_id, int ordinal, const StringInfo image,
			  MemoryContext cxt)
{
	KeyTag		tag;
	KeyEntry   *entry;
	bool		found;

	key_tag_init(&tag, view_id, ordinal, image);
	entry = hash_search(set, &tag, HASH_ENTER, &found);
	if (!found)
	{
		char	   *data = MemoryContextAlloc(cxt, Max(image->len, 1));

		memcpy(data, image->data, image->len);
		entry->tag.data = data;
		entry->key = NULL;
	}
	return &entry->key;
}

/*
 * The place of the key of that image in the set for its DirtyKey, or NULL
 * when the set does not hold it.
 */
DirtyKey **
key_set_find(HTAB *set, int view_id, int ordinal, const StringInfo image)
{
	KeyTag		tag;
	KeyEntry   *entry;

	key_tag_init(&tag, view_id, ordinal, image);
	entry = hash_search(set, &tag, HASH_FIND, NULL);
	return entry ? &entry->key : NULL;
}

/*
 * Can rows formed in the row type "stored" be read as rows of "current"?
 * Only when every column is stored the same way: a change of a column's
 * type, or a column added or dropped, says no.
 */
bool
row_type_fits(TupleDesc stored, TupleDesc current)
{
	if (stored->natts != current->natts)
		return false;
	for (int i = 0; i < stored->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(stored, i);
		Form_pg_attribute b = TupleDescAttr(current, i);

		if (a->atttypid != b->atttypid || a->attisdropped != b->attisdropped ||
			a->attlen != b->attlen || a->attbyval != b->attbyval ||
			a->attalign != b->attalign)
			return false;
	}
	return true;
}

static int
source_batch_cmp(const ListCell *a, const ListCell *b)
{
	const SourceBatch *sa = (const SourceBatch *) lfirst(a);
	const SourceBatch *sb = (const SourceBatch *) lfirst(b);

	return (sa->ordinal > sb->ordinal) - (sa->ordinal < sb->ordinal);
}

/* Add what one apply did to what others did */
void
apply_counts_add(ApplyCounts *into, const ApplyCounts *from)
{
	into->keys_applied += from->keys_applied;
	into->rows_upserted += from->rows_upserted;
	into->rows_deleted += from->rows_deleted;
	into->rows_unchanged += from->rows_unchanged;
	into->lookups += from->lookups;
	into->cache_hits += from->cache_hits;
	into->recomputed_at = Max(into->recomputed_at, from->recomputed_at);
	into->additive |= from->additive;
}

/* The dirty keys a view's batch holds, over its sources */
int64
view_batch_nkeys(const ViewBatch *batch)
{
	int64		n = 0;
	ListCell   *lc;

	foreach(lc, batch->sources)
		n += list_length(((SourceBatch *) lfirst(lc))->keys);
	return n;
}

/*
 * Forget the rows decoding kept of a view's keys: the batch is to be
 * applied under a snapshot newer than its own, where a kept row could be
 * joined with rows of other sources that a later transaction wrote, a
 * row no snapshot ever saw.  The appliers fetch each row instead.
 */
void
view_batch_forget_rows(ViewBatch *batch)
{
	ListCell   *lc;

	foreach(lc, batch->sources)
	{
		ListCell   *lc2;

		foreach(lc2, ((SourceBatch *) lfirst(lc))->keys)
		{
			DirtyKey   *key = lfirst(lc2);

			key->row_known = false;
			key->row = NULL;
		}
	}
}

/* Sort a view's SourceBatches in ordinal order, as the appliers expect */
void
view_batch_sort_sources(ViewBatch *batch)
{
	list_sort(batch->sources, source_batch_cmp);
}

/*
 * A copy of batch whose lists of sources and keys are its own (the keys
 * are shared), in the current memory context, for view_batch_take to take
 * pieces of.
 */
ViewBatch *
view_batch_copy(const ViewBatch *batch)
{
	ViewBatch  *copy = palloc(sizeof(ViewBatch));
	ListCell   *lc;

	*copy = *batch;
	copy->sources = NIL;
	copy->weighed = false;
	copy->next_chunk = NULL;
	foreach(lc, batch->sources)
	{
		SourceBatch *sb = palloc(sizeof(SourceBatch));

		*sb = *(SourceBatch *) lfirst(lc);
		sb->keys = list_copy(sb->keys);
		copy->sources = lappend(copy->sources, sb);
	}
	return copy;
}

/*
 * Take the first n keys out of batch, as a batch of their own allocated in
 * the current memory context: the next piece of a view's apply
 * (apply_view.c).  The first piece taken from a batch has every source of it,
 * with its TRUNCATEs, so that applying it empties the lookup caches of
 * every source that changed; later ones have only the sources of their
 * keys.
 */
ViewBatch *
view_batch_take(ViewBatch *batch, int64 n, bool first)
{
	ViewBatch  *piece = palloc(sizeof(ViewBatch));
	ListCell   *lc;

	*piece = *batch;
	piece->sources = NIL;
	piece->weighed = false;
	piece->next_chunk = NULL;
	foreach(lc, batch->sources)
	{
		SourceBatch *sb = lfirst(lc);
		int			take = (int) Min(n, (int64) list_length(sb->keys));
		SourceBatch *part;

		if (take == 0 && !first)
			continue;
		part = palloc(sizeof(SourceBatch));
		*part = *sb;
		part->keys = list_copy_head(sb->keys, take);
		part->truncated = first && sb->truncated;
		piece->sources = lappend(piece->sources, part);
		sb->keys = list_delete_first_n(sb->keys, take);
		sb->truncated = false;
		n -= take;
	}
	return piece;
}

/*
 * Add the work of batch "from" to batch "into" (same view): its counts, its
 * TRUNCATEs and those of its keys that "seen", the set of keys already in
 * "into", lacks -- no key once either is a recompute of the whole, which
 * covers them all.  A key both hold is held once, with the sum of their
 * weights, so "into" stays weighed if "from" is: the changes of
 * consecutive batches added up (a view's keys held while batches are cut,
 * retry.c).  What is added is copied into cxt, which holds "into" and
 * "seen".
 */
void
view_batch_merge(ViewBatch *into, const ViewBatch *from, HTAB *seen, MemoryContext cxt)
{
	MemoryContext oldcxt;
	StringInfoData image;
	ListCell   *lc;

	Assert(into->view_id == from->view_id);
	into->changes += from->changes;
	into->commit_time = Max(into->commit_time, from->commit_time);
	into->weighed &= from->weighed;
	into->whole |= from->whole;
	if (into->whole)
		return;

	oldcxt = MemoryContextSwitchTo(cxt);
	initStringInfo(&image);
	foreach(lc, from->sources)
	{
		SourceBatch *src = lfirst(lc);
		SourceBatch *dst = NULL;
		ListCell   *lc2;

		foreach(lc2, into->sources)
		{
			if (((SourceBatch *) lfirst(lc2))->ordinal == src->ordinal)
				dst = lfirst(lc2);
		}
		if (dst == NULL)
		{
			dst = palloc0(sizeof(SourceBatch));
			dst->ordinal = src->ordinal;
			dst->relid = src->relid;
			key_shape_copy(&dst->shape, &src->shape);
			into->sources = lappend(into->sources, dst);
		}
		dst->truncated |= src->truncated;

		foreach(lc2, src->keys)
		{
			DirtyKey   *key = lfirst(lc2);
			DirtyKey  **slot;

			resetStringInfo(&image);
			dirty_key_image(&image, &src->shape, key->values, key->isnull);
			slot = key_set_enter(seen, into->view_id, src->ordinal, &image, cxt);
			if (*slot == NULL)
			{
				/* without its row: a later batch may have changed it */
				*slot = dirty_key_make(&src->shape, key->values, key->isnull);
				dst->keys = lappend(dst->keys, *slot);
			}
			(*slot)->weight += key->weight;
		}
	}
	view_batch_sort_sources(into);
	pfree(image.data);
	MemoryContextSwitchTo(oldcxt);
}
