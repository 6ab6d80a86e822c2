// SPDX-License-Identifier: GPL-2.0
/*
 * In-RAM index of dm-pmemcache (shared with userspace, see pmc_index.h).
 */
#include "pmc_index.h"

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
 *
 * pmc_bm_layout(): the levels and word offsets of @nbits bits (w is left
 * alone); the number of words, or 0 if it needs too many levels.
 */
static u64 pmc_bm_layout(struct pmc_bitmap *bm, u64 nbits)
{
	u64 words = 0, nw;
	u32 l;

	memset(bm->off, 0, sizeof(bm->off));
	memset(bm->bits, 0, sizeof(bm->bits));
	bm->bits[0] = nbits;
	for (l = 0; ; l++) {
		nw = (bm->bits[l] + BITS_PER_LONG - 1) >> PMC_BM_SHIFT;
		bm->off[l] = words;
		words += nw;
		if (nw <= 1)
			break;
		if (l + 1 == PMC_BM_LEVELS)
			return 0;
		bm->bits[l + 1] = nw;
	}
	bm->levels = l + 1;
	return words;
}

static int pmc_bm_init(struct pmc_bitmap *bm, u64 nbits)
{
	u64 words;

	memset(bm, 0, sizeof(*bm));
	words = pmc_bm_layout(bm, nbits);
	if (!words)
		return -EINVAL;
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

/* Clear @bit if it is set; whether it was. */
static bool pmc_bm_test_clear(struct pmc_bitmap *bm, u64 bit)
{
	unsigned long *w = pmc_bm_word(bm, 0, bit >> PMC_BM_SHIFT);
	bool was;

	if (!pmc_test_bit(bit & PMC_BM_MASK, w))
		return false;
	was = pmc_test_and_clear_bit(bit & PMC_BM_MASK, w);
	pmc_mb_after_bitop();
	pmc_bm_unhint(bm, 0, bit >> PMC_BM_SHIFT);
	return was;
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

/*
 * A slot word just became a writeback candidate of @oblock: set the bit
 * of its chunk in wb.cand (see pmc_wb_take() for the order).
 */
static void pmc_wb_note(struct pmc_index *idx, u64 oblock)
{
	struct pmc_wb_map *wb = &idx->wb;
	u64 last = wb->cand.bits[0] - 1, c, h;

	c = div64_u64(oblock, wb->chunk);
	if (c > last) {
		/*
		 * Beyond the origin the chunks were sized for (it grew, or a
		 * record survived from a larger one): the last chunk takes
		 * it, and its walk goes up to the highest such block.
		 */
		c = last;
		while ((h = READ_ONCE(wb->beyond)) <= oblock &&
		       pmc_cmpxchg64(&wb->beyond, h, oblock + 1) != h)
			;
	}
	/*
	 * A chunk holds many blocks: its bit is mostly set already, and a
	 * look keeps the line shared where a set_bit would take it from
	 * every other CPU.  S1, full barrier, the look: if it sees the bit
	 * set, the walk's clear (T1) comes after the look, so its T2 sees
	 * S1 (pmc_wb_take()); if it sees it clear, S2 sets it.
	 */
	pmc_mb();
	if (pmc_test_bit(c & PMC_BM_MASK,
			 pmc_bm_word(&wb->cand, 0, c >> PMC_BM_SHIFT)))
		return;
	pmc_bm_set(&wb->cand, c);
}

/*
 * Every store of a slot word: the clean bitmap follows it, and a store
 * that makes a writeback candidate sets its chunk's bit.
 */
static void pmc_index_store(struct pmc_index *idx, u32 slot, u64 v)
{
	bool was = pmc_slot_clean(idx->slot[slot]), now = pmc_slot_clean(v);

	WRITE_ONCE(idx->slot[slot], v);
	if (now && !was)
		pmc_bm_set(&idx->clean, slot);
	else if (was && !now)
		pmc_bm_clear(&idx->clean, slot);
	if (idx->wb.chunk && pmc_wb_candidate(v))
		pmc_wb_note(idx, pmc_slot_oblock(v));
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
	pmc_free_array(idx->wb.cand.w);
	pmc_free_array(idx->wb.parked.w);
	idx->wb.cand.w = NULL;
	idx->wb.parked.w = NULL;
	idx->wb.chunk = 0;
	idx->slot = NULL;
	idx->next = NULL;
	idx->bucket = NULL;
	idx->ref = NULL;
	idx->clean.w = NULL;
}

/* Chunks of the smallest size: as many bits as a wb bitmap may need. */
static u64 pmc_wb_max_bits(const struct pmc_wb_map *wb)
{
	return div64_u64(wb->origin_blocks + wb->chunk_min - 1, wb->chunk_min);
}

size_t pmc_index_ram_bytes(const struct pmc_index *idx)
{
	u64 ref_words = (idx->n_slots + BITS_PER_LONG - 1) >> PMC_BM_SHIFT;
	u64 wb_words = 0;
	struct pmc_bitmap t;

	if (idx->wb.cand.w)
		wb_words = 2 * pmc_bm_layout(&t, pmc_wb_max_bits(&idx->wb));
	return idx->n_slots * (sizeof(*idx->slot) + sizeof(*idx->next)) +
	       (sizeof(*idx->bucket) << idx->bucket_bits) +
	       (ref_words + pmc_bm_words(&idx->clean) + wb_words) *
	       sizeof(unsigned long);
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

/* ---- writeback selection in origin order -------------------------------- */

/*
 * The chunks (struct pmc_wb_map).  A chunk is chunk_min = ceil(origin
 * blocks / slots) origin blocks rounded up to whole stripes, so each of
 * the two bitmaps has at most about one bit per slot (a quarter of a
 * byte per slot for both, all levels), and a stripe never spans two
 * chunks: a block that becomes a candidate sets the bit of the chunk
 * that holds all of its stripe, which is what lets a parked chunk wait
 * until its stripes may have become whole.  Looking at a chunk costs
 * one hash lookup per origin block of it: chunk_min is the ratio of the
 * origin to the cache (1 for a cache as large as the origin) or the
 * stripe, whichever is larger.
 */
int pmc_index_wb_alloc(struct pmc_index *idx, u64 origin_blocks)
{
	struct pmc_wb_map *wb = &idx->wb;
	u64 bits;

	if (!origin_blocks)
		origin_blocks = 1;
	wb->origin_blocks = origin_blocks;
	wb->chunk_min = div64_u64(origin_blocks + idx->n_slots - 1,
				  idx->n_slots);
	bits = pmc_wb_max_bits(wb);
	if (pmc_bm_init(&wb->cand, bits) || pmc_bm_init(&wb->parked, bits))
		return -ENOMEM;
	wb->chunk = 0;
	return 0;
}

void pmc_index_wb_build(struct pmc_index *idx, u32 stripe, u32 full_mask)
{
	struct pmc_wb_map *wb = &idx->wb;
	u64 sb = stripe ? stripe : 1, chunk, n, s;

	if (!wb->cand.w)
		return;
	wb->full_mask = full_mask;
	chunk = div64_u64(wb->chunk_min + sb - 1, sb) * sb;
	if (wb->chunk == chunk && wb->stripe == sb)
		return;
	/* Fewer chunks than allocated for: the same words hold them. */
	n = div64_u64(wb->origin_blocks + chunk - 1, chunk);
	pmc_bm_layout(&wb->cand, n);
	pmc_bm_layout(&wb->parked, n);
	memset(wb->cand.w, 0, pmc_bm_words(&wb->cand) * sizeof(unsigned long));
	memset(wb->parked.w, 0,
	       pmc_bm_words(&wb->parked) * sizeof(unsigned long));
	wb->stripe = (u32)sb;
	wb->beyond = 0;
	wb->pos = 0;
	wb->chunk = chunk;
	for (s = 0; s < idx->n_slots; s++) {
		u64 v = idx->slot[s];

		if (pmc_wb_candidate(v))
			pmc_wb_note(idx, pmc_slot_oblock(v));
		if (!(s & 0xffff))
			pmc_cond_resched();
	}
}

u64 pmc_index_wb_chunk_of(const struct pmc_index *idx, u64 oblock)
{
	u64 c;

	if (!idx->wb.chunk)
		return 0;
	c = div64_u64(oblock, idx->wb.chunk);
	return c < idx->wb.cand.bits[0] ? c : idx->wb.cand.bits[0] - 1;
}

u64 pmc_index_wb_next(struct pmc_index *idx, u64 from, bool parked)
{
	u64 a, b;

	if (!idx->wb.chunk)
		return PMC_BM_NONE;
	a = pmc_bm_find(&idx->wb.cand, from);
	if (!parked)
		return a;
	b = pmc_bm_find(&idx->wb.parked, from);
	return b < a ? b : a;
}

/*
 * Selection takes the bits of chunk @c before it looks up the chunk's
 * blocks.  No candidate may ever be without a bit: its block would never
 * be written back, and a flush would wait for ever.  A store that makes
 * a candidate (pmc_wb_note()) is S1: slot word stored; full barrier; S2:
 * bit set.  Here T1: bit cleared (a value-returning atomic); full barrier;
 * T2: the chunk's slot words read.  If T2 misses S1, then T1 came before
 * S2 in the bit's order (else both barriers would have to be broken), so
 * the bit is set again once S2 is done and a later walk finds it; if T1
 * came after S2, T2 sees the candidate.  (In the kernel the lookups take
 * the stripe lock under which S1 and S2 are done, which orders them too.)
 * A candidate that selection sees and leaves (passed over, refused, the
 * pass full) gets its chunk's bit back from pmc_wb_chunk() after the
 * decision: between T1 and then, selection itself holds it.
 */
static bool pmc_wb_take(struct pmc_wb_map *wb, u64 c, bool parked)
{
	bool was = pmc_bm_test_clear(&wb->cand, c);

	/* (each clear is followed by its full barrier) */
	if (parked && pmc_bm_test_clear(&wb->parked, c))
		was = true;
	return was;
}

struct pmc_wb_walk {
	struct pmc_index *idx;
	struct pmc_wb_cand *out;
	unsigned int n, want, cap, sel, whole;
	const struct pmc_wb_ops *ops;
	void *ctx;
};

/*
 * Look at the blocks of chunk @c, stripe by stripe, in origin order; take
 * what may go.  False if the pass filled up before the chunk's end: its
 * bit is set again and the next pass starts with it.
 */
static bool pmc_wb_chunk(struct pmc_wb_walk *w, u64 c)
{
	struct pmc_wb_map *wb = &w->idx->wb;
	u64 sb = wb->stripe, o = c * wb->chunk, end = o + wb->chunk, e;
	bool partial = w->sel & PMC_SEL_PARTIAL, left = false, park = false;
	unsigned int cnt, kept, got, i;
	struct pmc_wb_cand *x, t;
	bool whole;

	if (!pmc_wb_take(wb, c, partial))
		return true;
	if (c + 1 == wb->cand.bits[0]) {
		e = READ_ONCE(wb->beyond);
		if (e > end)
			end = o + div64_u64(e - o + sb - 1, sb) * sb;
	}
	for (; o < end; o += sb) {
		x = &w->out[w->n];
		cnt = 0;
		kept = 0;
		whole = sb > 1;
		for (i = 0; i < sb; i++) {
			if (!w->ops->look(w->ctx, o + i, &t) ||
			    !pmc_wb_candidate(t.v)) {
				whole = false;
				continue;
			}
			if (pmc_slot_mask(t.v) != wb->full_mask)
				whole = false;
			if (w->n + kept < w->cap)
				x[kept++] = t;
			cnt++;
		}
		if (!cnt)
			continue;
		if (!whole && sb > 1 && !partial) {
			park = true;	/* a partial stripe waits */
			continue;
		}
		if (w->n && w->n + cnt > w->want) {
			/* A stripe is not split: the rest goes next pass. */
			pmc_bm_set(&wb->cand, c);
			return false;
		}
		/* The first stripe may exceed @want; beyond @cap, it is split. */
		got = 0;
		for (i = 0; i < kept; i++)
			if (w->ops->claim(w->ctx, &x[i], w->sel))
				x[got++] = x[i];
		if (got < cnt)
			left = true;
		else if (whole)
			w->whole++;
		w->n += got;
	}
	if (left)
		pmc_bm_set(&wb->cand, c);
	if (park)
		pmc_bm_set(&wb->parked, c);
	return true;
}

unsigned int pmc_index_wb_select(struct pmc_index *idx,
				 struct pmc_wb_cand *out, unsigned int want,
				 unsigned int cap, unsigned int sel,
				 const struct pmc_wb_ops *ops, void *ctx,
				 unsigned int *whole)
{
	struct pmc_wb_map *wb = &idx->wb;
	struct pmc_wb_walk w = {
		.idx = idx, .out = out, .want = want, .cap = cap, .sel = sel,
		.ops = ops, .ctx = ctx,
	};
	bool partial = sel & PMC_SEL_PARTIAL, wrapped = false;
	u64 start, from, c;
	unsigned int looked = 0;

	if (!wb->chunk || !want || cap < want)
		return 0;
	start = wb->pos < wb->cand.bits[0] ? wb->pos : 0;
	from = start;
	while (w.n < want) {
		c = pmc_index_wb_next(idx, from, partial);
		if (wrapped && c >= start)
			c = PMC_BM_NONE;
		if (c == PMC_BM_NONE) {
			/* The end: from the start again, once, if empty-handed. */
			if (w.n || wrapped || !start) {
				from = 0;
				break;
			}
			wrapped = true;
			from = 0;
			continue;
		}
		if (!pmc_wb_chunk(&w, c)) {
			from = c;
			break;
		}
		from = c + 1;
		if (!(++looked & 63))
			pmc_cond_resched();
	}
	wb->pos = from;
	*whole += w.whole;
	return w.n;
}
