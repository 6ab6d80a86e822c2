// SPDX-License-Identifier: GPL-2.0
/*
 * In-RAM index of dm-pmemcache (shared with userspace, see pmc_index.h).
 */
#include "pmc_index.h"

#define PMC_GOLDEN_64	0x61c8864680b583ebULL

/* ---- hierarchical bitmap ----------------------------------------------- */

#define PMC_BM_SHIFT	(BITS_PER_LONG == 64 ? 6 : 5)
#define PMC_BM_MASK	(BITS_PER_LONG - 1)
#define PMC_BM_NONE	(~0ULL)

/*
 * Level 0 has a bit per slot; a bit of level l + 1 says that word (bit
 * number) of level l may be non-empty.  Bits are set bottom up; a word
 * that goes empty has its hint cleared, then looked at again: if it filled
 * in between, the hint is set again.  With a full barrier after each bit
 * operation, a non-empty word never keeps a clear hint once its writers are
 * done; a set hint over an empty word can stay, and the finder clears it.
 */
static int pmc_bm_init(struct pmc_bitmap *bm, u64 nbits)
{
	u64 words = 0, nw;
	u32 l;

	memset(bm, 0, sizeof(*bm));
	bm->bits[0] = nbits;
	for (l = 0; ; l++) {
		nw = (bm->bits[l] + BITS_PER_LONG - 1) >> PMC_BM_SHIFT;
		bm->off[l] = words;
		words += nw;
		if (nw <= 1)
			break;
		if (l + 1 == PMC_BM_LEVELS)
			return -EINVAL;
		bm->bits[l + 1] = nw;
	}
	bm->levels = l + 1;
	bm->w = pmc_alloc_array(words, sizeof(*bm->w));
	return bm->w ? 0 : -ENOMEM;
}

static u64 pmc_bm_words(const struct pmc_bitmap *bm)
{
	u32 top = bm->levels - 1;

	return bm->levels ? bm->off[top] + 1 : 0;
}

static unsigned long *pmc_bm_word(const struct pmc_bitmap *bm, u32 l, u64 wi)
{
	return &bm->w[bm->off[l] + wi];
}

/* Set bit @bit of level @l and the hints above it. */
static void pmc_bm_set_from(struct pmc_bitmap *bm, u32 l, u64 bit)
{
	for (; l < bm->levels; l++, bit >>= PMC_BM_SHIFT) {
		unsigned long *w = pmc_bm_word(bm, l, bit >> PMC_BM_SHIFT);

		if (l && (READ_ONCE(*w) & (1UL << (bit & PMC_BM_MASK))))
			return;
		pmc_set_bit(bit & PMC_BM_MASK, w);
		pmc_mb_after_bitop();
	}
}

/* Word @wi of level @l may have gone empty: clear its hint, and upwards. */
static void pmc_bm_unhint(struct pmc_bitmap *bm, u32 l, u64 wi)
{
	for (; l + 1 < bm->levels; l++, wi >>= PMC_BM_SHIFT) {
		unsigned long *w = pmc_bm_word(bm, l, wi);

		if (READ_ONCE(*w))
			return;
		pmc_clear_bit(wi & PMC_BM_MASK,
			      pmc_bm_word(bm, l + 1, wi >> PMC_BM_SHIFT));
		pmc_mb_after_bitop();
		if (READ_ONCE(*w)) {
			/* It filled again in between: the hint goes back. */
			pmc_bm_set_from(bm, l + 1, wi);
			return;
		}
	}
}

static void pmc_bm_set(struct pmc_bitmap *bm, u64 bit)
{
	pmc_bm_set_from(bm, 0, bit);
}

static void pmc_bm_clear(struct pmc_bitmap *bm, u64 bit)
{
	pmc_clear_bit(bit & PMC_BM_MASK, pmc_bm_word(bm, 0, bit >> PMC_BM_SHIFT));
	pmc_mb_after_bitop();
	pmc_bm_unhint(bm, 0, bit >> PMC_BM_SHIFT);
}

/*
 * The first set bit of level 0 at or after @from, or PMC_BM_NONE: up
 * while the rest of a word is empty, then down along the first hints.
 * O(levels) words, plus one step per stale hint met (which it clears).
 */
static u64 pmc_bm_find(struct pmc_bitmap *bm, u64 from)
{
	u64 pos = from;		/* a bit of level l */
	unsigned long w;
	u32 l = 0;

	for (;;) {
		if (pos >= bm->bits[l])
			return PMC_BM_NONE;
		w = READ_ONCE(*pmc_bm_word(bm, l, pos >> PMC_BM_SHIFT)) &
		    (~0UL << (pos & PMC_BM_MASK));
		if (!w) {
			if (l + 1 == bm->levels)
				return PMC_BM_NONE;
			pos = (pos >> PMC_BM_SHIFT) + 1;
			l++;
			continue;
		}
		pos = (pos & ~(u64)PMC_BM_MASK) + pmc_ffs_long(w);
		while (l) {
			w = READ_ONCE(*pmc_bm_word(bm, l - 1, pos));
			if (!w)
				break;
			pos = (pos << PMC_BM_SHIFT) + pmc_ffs_long(w);
			l--;
		}
		if (!l)
			return pos;
		/* A stale hint: bit @pos of level l over an empty word. */
		pmc_bm_unhint(bm, l - 1, pos);
		pos++;
	}
}

/* Every store of a slot word: the clean bitmap follows it. */
static void pmc_index_store(struct pmc_index *idx, u32 slot, u64 v)
{
	bool was = pmc_slot_clean(idx->slot[slot]), now = pmc_slot_clean(v);

	WRITE_ONCE(idx->slot[slot], v);
	if (now && !was)
		pmc_bm_set(&idx->clean, slot);
	else if (was && !now)
		pmc_bm_clear(&idx->clean, slot);
}

/* ---- the index ---------------------------------------------------------- */

int pmc_index_init(struct pmc_index *idx, u64 n_slots)
{
	u32 bits = 0;
	u64 i;

	memset(idx, 0, sizeof(*idx));
	if (!n_slots || n_slots >= PMC_NO_SLOT)
		return -EINVAL;
	/* Largest power of two <= n_slots: at most 4 bytes per slot. */
	while (bits < 31 && (2ULL << bits) <= n_slots)
		bits++;
	idx->n_slots = n_slots;
	idx->bucket_bits = bits;
	idx->slot = pmc_alloc_array(n_slots, sizeof(*idx->slot));
	idx->next = pmc_alloc_array(n_slots, sizeof(*idx->next));
	idx->bucket = pmc_alloc_array(1ULL << bits, sizeof(*idx->bucket));
	idx->ref = pmc_alloc_array((n_slots + BITS_PER_LONG - 1) >> PMC_BM_SHIFT,
				   sizeof(*idx->ref));
	if (!idx->slot || !idx->next || !idx->bucket || !idx->ref ||
	    pmc_bm_init(&idx->clean, n_slots)) {
		pmc_index_destroy(idx);
		return -ENOMEM;
	}
	for (i = 0; i < (1ULL << bits); i++)
		idx->bucket[i] = PMC_NO_SLOT;
	idx->free_head = PMC_NO_SLOT;
	return 0;
}

void pmc_index_destroy(struct pmc_index *idx)
{
	pmc_free_array(idx->slot);
	pmc_free_array(idx->next);
	pmc_free_array(idx->bucket);
	pmc_free_array(idx->ref);
	pmc_free_array(idx->clean.w);
	idx->slot = NULL;
	idx->next = NULL;
	idx->bucket = NULL;
	idx->ref = NULL;
	idx->clean.w = NULL;
}

size_t pmc_index_ram_bytes(const struct pmc_index *idx)
{
	u64 ref_words = (idx->n_slots + BITS_PER_LONG - 1) >> PMC_BM_SHIFT;

	return idx->n_slots * (sizeof(*idx->slot) + sizeof(*idx->next)) +
	       (sizeof(*idx->bucket) << idx->bucket_bits) +
	       (ref_words + pmc_bm_words(&idx->clean)) * sizeof(unsigned long);
}

u32 pmc_index_bucket(const struct pmc_index *idx, u64 oblock)
{
	if (!idx->bucket_bits)
		return 0;
	return (u32)((oblock * PMC_GOLDEN_64) >> (64 - idx->bucket_bits));
}

u32 pmc_index_lookup(const struct pmc_index *idx, u64 oblock)
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

bool pmc_index_inflight(const struct pmc_index *idx, u64 oblock)
{
	u32 s = idx->bucket[pmc_index_bucket(idx, oblock)];

	while (s != PMC_NO_SLOT) {
		u64 v = idx->slot[s];

		if (pmc_slot_oblock(v) == oblock &&
		    (pmc_slot_flags(v) & PMC_SF_WB))
			return true;
		s = idx->next[s];
	}
	return false;
}

void pmc_index_insert(struct pmc_index *idx, u32 slot, u64 oblock, u32 mask,
		      u32 flags)
{
	u32 b = pmc_index_bucket(idx, oblock);

	/* A new block starts unreferenced (the caller may mark it). */
	if (pmc_test_bit(slot, idx->ref))
		pmc_clear_bit(slot, idx->ref);
	pmc_index_store(idx, slot,
			pmc_slot_pack(oblock, mask, flags | PMC_SF_USED));
	idx->next[slot] = idx->bucket[b];
	idx->bucket[b] = slot;
}

void pmc_index_unlink(struct pmc_index *idx, u32 slot)
{
	u64 v = idx->slot[slot];
	u32 *p = &idx->bucket[pmc_index_bucket(idx, pmc_slot_oblock(v))];

	while (*p != PMC_NO_SLOT) {
		if (*p == slot) {
			*p = idx->next[slot];
			break;
		}
		p = &idx->next[*p];
	}
	idx->next[slot] = PMC_NO_SLOT;
	pmc_index_store(idx, slot, pmc_slot_pack(0, 0, 0));
}

void pmc_index_set_flags(struct pmc_index *idx, u32 slot, u32 set, u32 clear)
{
	u64 v = idx->slot[slot];
	u32 f = (pmc_slot_flags(v) & ~clear) | set;

	pmc_index_store(idx, slot,
			pmc_slot_pack(pmc_slot_oblock(v), pmc_slot_mask(v), f));
}

void pmc_index_push_free(struct pmc_index *idx, u32 slot)
{
	pmc_index_store(idx, slot, pmc_slot_pack(0, 0, 0));
	idx->next[slot] = idx->free_head;
	idx->free_head = slot;
	idx->n_free++;
}

u32 pmc_index_pop_free(struct pmc_index *idx)
{
	u32 s = idx->free_head;

	if (s == PMC_NO_SLOT)
		return s;
	idx->free_head = idx->next[s];
	idx->next[s] = PMC_NO_SLOT;
	idx->n_free--;
	return s;
}

void pmc_index_set_bad(struct pmc_index *idx, u32 slot)
{
	pmc_index_store(idx, slot, pmc_slot_pack(0, 0, PMC_SF_BAD));
}

void pmc_index_ref(struct pmc_index *idx, u32 slot)
{
	/* Written only when it changes: the line stays shared. */
	if (!pmc_test_bit(slot, idx->ref))
		pmc_set_bit(slot, idx->ref);
}

u32 pmc_index_next_clean(struct pmc_index *idx, u32 from)
{
	u64 s = pmc_bm_find(&idx->clean, from);

	return s < idx->n_slots ? (u32)s : PMC_NO_SLOT;
}

unsigned int pmc_index_clock(struct pmc_index *idx, u32 *hand,
			     unsigned int want, pmc_take_fn take, void *ctx)
{
	u32 n = (u32)idx->n_slots, start = *hand % n, pos = start, s;
	unsigned int got = 0, chances = 8 * want, looked = 0;
	bool wrapped = false, second = false, passed = false;
	u64 v;

	while (got < want) {
		s = pos < n ? pmc_index_next_clean(idx, pos) : PMC_NO_SLOT;
		if (s == PMC_NO_SLOT && !wrapped) {
			wrapped = true;
			pos = 0;
			continue;
		}
		if (wrapped && (s == PMC_NO_SLOT || s >= start)) {
			/*
			 * One turn done.  If it took reference bits away, a
			 * second one that gives no second chances.
			 */
			if (second || !passed)
				break;
			second = true;
			wrapped = false;
			chances = 0;
			pos = start;
			continue;
		}
		pos = s + 1;
		v = READ_ONCE(idx->slot[s]);
		if (!pmc_slot_clean(v))
			continue;	/* changed since the bitmap said so */
		if (chances && pmc_test_bit(s, idx->ref) &&
		    pmc_test_and_clear_bit(s, idx->ref)) {
			chances--;
			passed = true;
			continue;
		}
		if (take(ctx, s, v))
			got++;
		if (!(++looked & 1023))
			pmc_cond_resched();
	}
	*hand = pos < n ? pos : 0;
	return got;
}
