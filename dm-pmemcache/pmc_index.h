/* SPDX-License-Identifier: GPL-2.0 */
/*
 * In-RAM index of dm-pmemcache: origin block -> cache slot.
 *
 * Memory per cache slot: 8 bytes of packed slot state, 4 bytes of hash
 * chain / free list link, 2 to 4 bytes of hash bucket (the bucket count
 * is the largest power of two not above the slot count), one bit of
 * reference, 1.02 bits of clean bitmap (all its levels) and at most 2.03
 * bits of the two writeback bitmaps (below): 14.5 to 16.5 bytes per slot,
 * 14.5 for a namespace of a power of two bytes (whose slot count is just
 * below a power of two).
 *
 * The clean bitmap has one bit per slot that is clean (USED and none of
 * DIRTY, WB, STALE, BAD), kept by every store of a slot word; upper levels
 * have one bit per non-empty word below, so the next clean slot after any
 * point is found in O(levels) = O(log64 n) words: eviction never scans the
 * index.  The reference bitmap gives recently read or rewritten blocks a
 * second chance in the eviction clock.
 *
 * Writeback selection finds dirty blocks in origin order the same way:
 * two hierarchical bitmaps over *chunks* of the origin (struct pmc_wb_map),
 * with about as many bits as the cache has slots, say which chunks may
 * hold a block that writeback could take; the chunk's blocks are then
 * looked up in the hash, in origin order.
 *
 * The index has no locks of its own.  The kernel serialises a hash chain
 * with the lock of its stripe (pmc_index_bucket() & stripe mask) and the
 * free list with a spinlock; userspace is single threaded.  Bitmap bits
 * change with atomic bit operations (the bits of one word belong to
 * different stripes); the upper levels are hints that the finder checks.
 */
#ifndef PMC_INDEX_H
#define PMC_INDEX_H

#include "pmc_shim.h"

#define PMC_NO_SLOT		0xffffffffU
#define PMC_OBLOCK_BITS		48
#define PMC_OBLOCK_MAX		((1ULL << PMC_OBLOCK_BITS) - 1)

/* Slot flags, bits 56..63 of the packed slot word. */
#define PMC_SF_USED	0x01	/* linked in a hash chain */
#define PMC_SF_DIRTY	0x02	/* record is DIRTY */
#define PMC_SF_WB	0x04	/* origin write in flight */
#define PMC_SF_STALE	0x08	/* superseded or discarded; record is FREE */
#define PMC_SF_WAITPREV	0x10	/* an older copy is still being written back */
#define PMC_SF_EPOCH	0x60	/* max_age epoch in which it became dirty */
#define PMC_SF_EPOCH_SHIFT 5
#define PMC_SF_BAD	0x80	/* unreadable record: never used again */

/* Levels of a hierarchical bitmap: 32^7 bits >= 2^32 slots. */
#define PMC_BM_LEVELS	7

struct pmc_bitmap {
	unsigned long *w;	/* every level, level 0 first */
	u64 off[PMC_BM_LEVELS];	/* first word of each level in w */
	u64 bits[PMC_BM_LEVELS]; /* bits of each level */
	u32 levels;
};

/*
 * Writeback selection over origin chunks (pmc_index_wb_select()).  A chunk
 * is @chunk origin blocks, a whole number of stripes; the last chunk also
 * takes every block beyond the others (an origin that grew: see
 * @beyond).  @cand has a bit for each chunk in which a block became a
 * writeback candidate since selection last looked at it (set by every
 * store of a slot word that makes one, pmc_index_store()), @parked one for
 * each chunk whose candidates selection passed over because they are
 * partial stripes: only selection that takes partial stripes looks at
 * those, and a new candidate in such a chunk sets its @cand bit, so
 * selection of whole stripes only never walks stripes that wait.  Every
 * candidate has the bit of its chunk set in one of the two (bits over
 * chunks without candidates may stay set: they cost one look).
 */
struct pmc_wb_map {
	struct pmc_bitmap cand;
	struct pmc_bitmap parked;
	u64 origin_blocks;	/* the origin when allocated */
	u64 chunk_min;		/* ceil(origin_blocks / slots): about 1 bit a slot */
	u64 chunk;		/* origin blocks per chunk; 0: no bits kept */
	u64 beyond;		/* 1 + the last candidate beyond the chunks, or 0 */
	u64 pos;		/* the chunk where the next selection starts */
	u32 stripe;		/* blocks per stripe, >= 1 */
	u32 full_mask;		/* valid mask of a whole block */
};

struct pmc_index {
	u64 n_slots;
	u64 *slot;		/* oblock:48 | valid mask:8 | flags:8 */
	u32 *next;		/* hash chain, or free list when free */
	u32 *bucket;
	u32 bucket_bits;
	u32 free_head;
	u64 n_free;
	struct pmc_bitmap clean; /* USED and not DIRTY|WB|STALE|BAD */
	unsigned long *ref;	/* referenced since the clock last passed */
	struct pmc_wb_map wb;	/* writeback selection: pmc_index_wb_*() */
};

static inline u64 pmc_slot_pack(u64 oblock, u32 mask, u32 flags)
{
	return (oblock & PMC_OBLOCK_MAX) | ((u64)(mask & 0xff) << 48) |
	       ((u64)(flags & 0xff) << 56);
}

static inline u64 pmc_slot_oblock(u64 v)
{
	return v & PMC_OBLOCK_MAX;
}

static inline u32 pmc_slot_mask(u64 v)
{
	return (v >> 48) & 0xff;
}

static inline u32 pmc_slot_flags(u64 v)
{
	return (v >> 56) & 0xff;
}

static inline u32 pmc_epoch_flags(u32 epoch)
{
	return (epoch << PMC_SF_EPOCH_SHIFT) & PMC_SF_EPOCH;
}

static inline u32 pmc_slot_epoch(u64 v)
{
	return (pmc_slot_flags(v) & PMC_SF_EPOCH) >> PMC_SF_EPOCH_SHIFT;
}

/* A cached block that the origin holds too: it may be evicted. */
static inline bool pmc_slot_clean(u64 v)
{
	return (pmc_slot_flags(v) &
		(PMC_SF_USED | PMC_SF_DIRTY | PMC_SF_WB | PMC_SF_STALE |
		 PMC_SF_BAD)) == PMC_SF_USED;
}

/* Dirty and not already on its way to the origin: writeback may take it. */
static inline bool pmc_wb_candidate(u64 v)
{
	u32 f = pmc_slot_flags(v);

	return (f & (PMC_SF_USED | PMC_SF_DIRTY)) ==
		(PMC_SF_USED | PMC_SF_DIRTY) &&
	       !(f & (PMC_SF_WB | PMC_SF_STALE | PMC_SF_WAITPREV | PMC_SF_BAD));
}

int pmc_index_init(struct pmc_index *idx, u64 n_slots);
void pmc_index_destroy(struct pmc_index *idx);
size_t pmc_index_ram_bytes(const struct pmc_index *idx);

#define PMC_GOLDEN_64	0x61c8864680b583ebULL

/* Inline: every I/O hashes its block once or twice (stripe, lookup). */
static inline u32 pmc_index_bucket(const struct pmc_index *idx, u64 oblock)
{
	if (!idx->bucket_bits)
		return 0;
	return (u32)((oblock * PMC_GOLDEN_64) >> (64 - idx->bucket_bits));
}

/* The live (not STALE) slot of @oblock, or PMC_NO_SLOT. */
static inline u32 pmc_index_lookup(const struct pmc_index *idx, u64 oblock)
{
	u32 s = idx->bucket[pmc_index_bucket(idx, oblock)];

	while (s != PMC_NO_SLOT) {
		u64 v = idx->slot[s];

		if (pmc_slot_oblock(v) == oblock &&
		    !(pmc_slot_flags(v) & PMC_SF_STALE))
			return s;
		s = idx->next[s];
	}
	return PMC_NO_SLOT;
}

/* True if some copy of @oblock (live or stale) has PMC_SF_WB set. */
bool pmc_index_inflight(const struct pmc_index *idx, u64 oblock);
void pmc_index_insert(struct pmc_index *idx, u32 slot, u64 oblock, u32 mask,
		      u32 flags);
void pmc_index_unlink(struct pmc_index *idx, u32 slot);
void pmc_index_set_flags(struct pmc_index *idx, u32 slot, u32 set, u32 clear);

/* Free list (LIFO through ->next).  The caller serialises. */
void pmc_index_push_free(struct pmc_index *idx, u32 slot);

/* Inline: a CPU takes a batch of free slots at a time (io.c). */
static inline u32 pmc_index_pop_free(struct pmc_index *idx)
{
	u32 s = idx->free_head;

	if (s == PMC_NO_SLOT)
		return s;
	idx->free_head = idx->next[s];
	idx->next[s] = PMC_NO_SLOT;
	idx->n_free--;
	return s;
}

/* Take @slot out of use for good (unreadable, or on a badblocks list). */
void pmc_index_set_bad(struct pmc_index *idx, u32 slot);

/* The block in @slot was used: the eviction clock passes it over once. */
void pmc_index_ref(struct pmc_index *idx, u32 slot);

/* The first clean slot at or after @from, or PMC_NO_SLOT. */
u32 pmc_index_next_clean(struct pmc_index *idx, u32 from);

/*
 * Eviction clock over the clean slots from *@hand (advanced): a slot with
 * its reference bit set loses it and is passed over (at most 8 x @want
 * times a call, then reference bits are ignored), the others are offered
 * to @take, which evicts the slot (true) or refuses it (false: locked,
 * pinned, changed).  Stops when @want were taken or after one turn.
 * Returns the number taken.  Cost: O(log n) words per slot offered or
 * passed over, never a scan of the index.
 */
typedef bool (*pmc_take_fn)(void *ctx, u32 slot, u64 v);
unsigned int pmc_index_clock(struct pmc_index *idx, u32 *hand,
			     unsigned int want, pmc_take_fn take, void *ctx);

/* ---- writeback selection in origin order ------------------------------ */

#define PMC_SEL_PARTIAL	0x1	/* partial stripes may go too */
#define PMC_SEL_AGED	0x2	/* only blocks of an older max_age epoch */

/* One dirty block picked for writeback: its slot word when picked. */
struct pmc_wb_cand {
	u64 v;
	u32 slot;
};

/*
 * What selection needs from its user.  @look: the live slot of @oblock
 * and its word (the kernel reads them under the block's stripe lock), or
 * false.  @claim: mark the block of @c PMC_SF_WB if its slot word is still
 * @c->v and it may go now under @sel (false: locked out, changed, too
 * young for PMC_SEL_AGED); it stays a candidate then.
 */
struct pmc_wb_ops {
	bool (*look)(void *ctx, u64 oblock, struct pmc_wb_cand *c);
	bool (*claim)(void *ctx, const struct pmc_wb_cand *c, unsigned int sel);
};

/*
 * Allocate the selection bitmaps for an origin of @origin_blocks blocks
 * (about one bit per slot each).  No bit is kept until
 * pmc_index_wb_build().
 */
int pmc_index_wb_alloc(struct pmc_index *idx, u64 origin_blocks);

/*
 * Chunks of whole stripes of @stripe blocks (0 counts as 1), and the bits
 * from the slot words: one pass over the index, done only when the stripe
 * changed or nothing was built yet (after recovery).  Nothing may store a
 * slot word meanwhile (the kernel calls it at resume).
 */
void pmc_index_wb_build(struct pmc_index *idx, u32 stripe, u32 full_mask);

/* The chunk that @oblock belongs to (the last one for any beyond). */
u64 pmc_index_wb_chunk_of(const struct pmc_index *idx, u64 oblock);

/*
 * The first chunk at or after @from whose bit is set in cand (or in
 * parked too, if @parked), or ~0ULL.  O(levels) words.
 */
u64 pmc_index_wb_next(struct pmc_index *idx, u64 from, bool parked);

/*
 * Fill @out (room for @cap >= @want) with about @want candidates, claimed
 * (@ops->claim), in ascending origin order, starting at the chunk where
 * the last call stopped and wrapping to the start of the origin at most
 * once (and only while nothing was taken yet, so @out stays sorted).
 * Stripes of more than one block go whole first: without
 * PMC_SEL_PARTIAL a stripe that is not whole (every block a candidate
 * with a full mask) is passed over and its chunk parked.  A stripe is
 * not split between calls, except one larger than @cap.  Adds to
 * *@whole the stripes that went whole.  Cost: O(levels) words per chunk
 * visited and one @ops->look per origin block of the chunk; chunks are
 * visited only if a candidate appeared, was passed over or was refused
 * there: never a scan of the index.
 */
unsigned int pmc_index_wb_select(struct pmc_index *idx,
				 struct pmc_wb_cand *out, unsigned int want,
				 unsigned int cap, unsigned int sel,
				 const struct pmc_wb_ops *ops, void *ctx,
				 unsigned int *whole);

#endif /* PMC_INDEX_H */
