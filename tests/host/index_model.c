// SPDX-License-Identifier: GPL-2.0
/*
 * Host model of the in-RAM index of dm-pmemcache: the module's own
 * pmc_index.c (and pmc_meta_geometry() of pmc_meta.c) compiled through the
 * userspace shim, driven the way io.c, writeback.c and the eviction clock
 * drive it, without pmem or locks.
 *
 *   index_model --check [--seed S]
 *       Random operations on indexes of awkward sizes; after each one the
 *       clean bitmap (every level), pmc_index_next_clean() and
 *       pmc_index_clock() are compared with a brute-force scan of the slot
 *       words and a linear reference clock.  Last line:
 *       "check ... mismatches=M" (0 or exit status 1).
 *
 *   index_model --check-select [--seed S]
 *       Only the writeback selection part of --check: origins of awkward
 *       sizes and stripes (blocks beyond the origin too), random writes,
 *       rewrites of blocks under writeback (STALE, WAITPREV), completions
 *       that fail, discards, evictions, resumes with another stripe size;
 *       each pmc_index_wb_select() call (with refused claims, with and
 *       without PMC_SEL_PARTIAL and PMC_SEL_AGED) against what brute force
 *       over the slot words says it must take; after each operation no
 *       candidate without a bit, no whole stripe only parked, the finder
 *       against a scan of the bits; at the end a flush must select every
 *       dirty block ("FLUSH NEVER ENDS" otherwise).
 *
 *   index_model --bench-select --gib G [--ops N] [--stripe S] [--phases P]
 *       Writeback selection at G GiB of 4 KiB blocks over an origin 4x the
 *       cache: per selected block, the hash lookups and ns of the
 *       pmc_index_wb_select() calls (under callgrind --collect-atstart=no
 *       only those calls are counted: index_bench.py --select).  Phases:
 *       pD any block may go with D % dirty, w whole stripes only, qD as pD
 *       with stripe_blocks 1.
 *
 *   index_model --bench --gib G [--dirty PHASES] [--ops N] [--old]
 *       A cache of G GiB of pmem in 4 KiB blocks (slot count from the
 *       module's geometry), filled to the last block; then for each
 *       phase (comma separated: PCT for that share of dirty blocks, kK
 *       for all but K blocks dirty) N cycles of: one write (lookup; a slot
 *       from the free list, or from eviction of 32 clean blocks when there
 *       is none, as pmc_alloc_slot(); insert DIRTY; the old copy unlinked
 *       and freed on a rewrite), one read (lookup; a hit sets the reference
 *       bit) and writeback completions (WB set, then WB and DIRTY cleared)
 *       that keep the dirty share where it was.  --old evicts with the
 *       linear clock over the slot words that io.c had before the clean
 *       bitmap.  Prints ns per cycle and what the cycles did; under
 *       valgrind --tool=callgrind --instr-atstart=no only the cycles are
 *       counted (instructions per cycle: index_bench.py).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <getopt.h>
#include <valgrind/callgrind.h>

#include "pmc_meta.h"

/* pmem is plain memory here: pmem_plain.c */

static u64 rng = 88172645463325252ULL;

static u64 rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static u64 rnd_below(u64 n)
{
	return n ? rnd() % n : 0;
}

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* ---- --check: the bitmap against brute force ----------------------- */

static unsigned long mismatches;

static void mismatch(const char *what, u64 n, u64 a, u64 b)
{
	if (mismatches++ < 20)
		printf("MISMATCH n=%llu %s: %llu != %llu\n",
		       (unsigned long long)n, what, (unsigned long long)a,
		       (unsigned long long)b);
}

static bool bm_bit(const struct pmc_bitmap *bm, u32 l, u64 bit)
{
	return (bm->w[bm->off[l] + bit / BITS_PER_LONG] >>
		(bit % BITS_PER_LONG)) & 1;
}

/* Every level exact (single threaded: no stale hint may remain). */
static void check_bitmap(struct pmc_index *idx)
{
	const struct pmc_bitmap *bm = &idx->clean;
	u64 n = idx->n_slots, s, j, k, words;
	u32 l;

	for (s = 0; s < n; s++)
		if (bm_bit(bm, 0, s) != pmc_slot_clean(idx->slot[s]))
			mismatch("level 0 bit", n, bm_bit(bm, 0, s),
				 pmc_slot_clean(idx->slot[s]));
	for (l = 0; l < bm->levels; l++) {
		words = (bm->bits[l] + BITS_PER_LONG - 1) / BITS_PER_LONG;
		/* no bit beyond the end of a level */
		for (j = bm->bits[l]; j < words * BITS_PER_LONG; j++)
			if (bm_bit(bm, l, j))
				mismatch("bit beyond the end", n, l, j);
		if (l + 1 == bm->levels) {
			if (words != 1)
				mismatch("top level words", n, words, 1);
			continue;
		}
		for (k = 0; k < words; k++)
			if (bm_bit(bm, l + 1, k) != !!bm->w[bm->off[l] + k])
				mismatch("hint", n, l + 1, k);
	}
}

static u32 brute_next_clean(struct pmc_index *idx, u32 from)
{
	u64 s;

	for (s = from; s < idx->n_slots; s++)
		if (pmc_slot_clean(idx->slot[s]))
			return (u32)s;
	return PMC_NO_SLOT;
}

/* The take decision of a check round: refuses some slots, like a lock. */
struct take_log {
	struct pmc_index *idx;
	u32 slots[64];
	unsigned int n;
	u32 round;
};

static bool refuses(const struct take_log *t, u32 s)
{
	return ((s * 2654435761U) ^ t->round) % 5 == 0;
}

static bool take_check(void *ctx, u32 s, u64 v)
{
	struct take_log *t = ctx;

	if (!pmc_slot_clean(v))
		mismatch("offered a slot that is not clean", 0, s, v);
	if (refuses(t, s))
		return false;
	/* evicted at once, as pmc_evict_one() does */
	pmc_index_unlink(t->idx, s);
	t->slots[t->n++] = s;
	return true;
}

static bool taken(const struct take_log *t, u32 s)
{
	unsigned int i;

	for (i = 0; i < t->n; i++)
		if (t->slots[i] == s)
			return true;
	return false;
}

/*
 * The clock by linear scan: the same turns, second chances and order as
 * pmc_index_clock() must give.  Changes @ref like the clock does.
 */
static unsigned int ref_clock(struct pmc_index *idx, u8 *ref, u32 hand,
			      unsigned int want, struct take_log *t)
{
	u32 n = (u32)idx->n_slots, start = hand % n, k, s;
	unsigned int chances = 8 * want, turn;
	bool passed = false;

	t->n = 0;
	for (turn = 0; turn < 2; turn++) {
		for (k = 0; k < n && t->n < want; k++) {
			s = (start + k) % n;
			if (!pmc_slot_clean(idx->slot[s]) || taken(t, s))
				continue;
			if (chances && ref[s]) {
				ref[s] = 0;
				chances--;
				passed = true;
				continue;
			}
			if (!refuses(t, s))
				t->slots[t->n++] = s;
		}
		if (t->n == want || !passed)
			break;
		chances = 0;
	}
	return t->n;
}

static void check_one(u64 n, unsigned long ops)
{
	struct pmc_index idx;
	u8 *ref = calloc(n, 1);
	u64 ob_space = 4 * n + 8;
	u32 hand = 0;
	unsigned long i;
	u64 k;

	if (pmc_index_init(&idx, n)) {
		mismatch("init", n, 1, 0);
		return;
	}
	/* all free, as recovery leaves an empty cache */
	for (k = n; k-- > 0;)
		pmc_index_push_free(&idx, (u32)k);
	check_bitmap(&idx);
	for (i = 0; i < ops; i++) {
		u32 op = rnd_below(100), s = (u32)rnd_below(n), f;
		u64 v = idx.slot[s], ob;

		if (op < 35) {
			/* a write: a free slot, clean or dirty */
			s = pmc_index_pop_free(&idx);
			if (s == PMC_NO_SLOT)
				continue;
			ob = rnd_below(ob_space);
			if (pmc_index_lookup(&idx, ob) != PMC_NO_SLOT)
				ob = ob_space + i;	/* a block never used */
			pmc_index_insert(&idx, s, ob, 0xff,
					 rnd_below(2) ? PMC_SF_DIRTY : 0);
			ref[s] = 0;
			if (rnd_below(3) == 0) {
				pmc_index_ref(&idx, s);
				ref[s] = 1;
			}
		} else if (op < 55) {
			/* writeback start, completion, or a stale copy */
			if (!(pmc_slot_flags(v) & PMC_SF_USED))
				continue;
			f = rnd_below(4);
			if (f == 0)
				pmc_index_set_flags(&idx, s, PMC_SF_WB, 0);
			else if (f == 1)
				pmc_index_set_flags(&idx, s, 0, PMC_SF_WB |
						    PMC_SF_DIRTY | PMC_SF_EPOCH);
			else if (f == 2)
				pmc_index_set_flags(&idx, s, PMC_SF_STALE, 0);
			else
				pmc_index_set_flags(&idx, s, PMC_SF_DIRTY |
						    PMC_SF_WAITPREV, 0);
		} else if (op < 70) {
			/* discard or eviction: unlinked, back on the free list */
			if (!(pmc_slot_flags(v) & PMC_SF_USED))
				continue;
			pmc_index_unlink(&idx, s);
			pmc_index_push_free(&idx, s);
		} else if (op < 72) {
			/* a free slot found on the badblocks list */
			s = pmc_index_pop_free(&idx);
			if (s != PMC_NO_SLOT)
				pmc_index_set_bad(&idx, s);
		} else if (op < 85) {
			/* a read hit, or a run of them (more than 8 x want) */
			for (k = s; k < n && k < s + (op == 84 ? 400 : 1); k++)
				if (pmc_slot_flags(idx.slot[k]) & PMC_SF_USED) {
					pmc_index_ref(&idx, (u32)k);
					ref[k] = 1;
				}
		} else {
			/* eviction: the clock against the linear one */
			struct take_log a = { .idx = &idx, .round = (u32)i }, b = a;
			unsigned int want = 1 + rnd_below(40), j;
			u32 h0 = hand;
			u8 *ref2 = malloc(n);

			memcpy(ref2, ref, n);
			ref_clock(&idx, ref2, h0, want, &b);
			pmc_index_clock(&idx, &hand, want, take_check, &a);
			if (a.n != b.n)
				mismatch("clock: slots taken", n, a.n, b.n);
			for (j = 0; j < a.n && j < b.n; j++)
				if (a.slots[j] != b.slots[j])
					mismatch("clock: slot taken", n,
						 a.slots[j], b.slots[j]);
			for (k = 0; k < n; k++)
				if (pmc_test_bit(k, idx.ref) != ref2[k])
					mismatch("clock: reference bit", n,
						 k, ref2[k]);
			memcpy(ref, ref2, n);
			free(ref2);
			for (j = 0; j < a.n; j++)
				pmc_index_push_free(&idx, a.slots[j]);
		}
		if (n <= 5000 || !(i % 97)) {
			check_bitmap(&idx);
			for (k = 0; k < 4; k++) {
				u32 from = (u32)rnd_below(n + 1);
				u32 x = pmc_index_next_clean(&idx, from);
				u32 y = brute_next_clean(&idx, from);

				if (x != y)
					mismatch("next clean", n, x, y);
			}
		}
	}
	check_bitmap(&idx);
	pmc_index_destroy(&idx);
	free(ref);
}

static bool take_all(void *ctx, u32 s, u64 v)
{
	struct take_log *t = ctx;

	pmc_index_unlink(t->idx, s);
	t->slots[t->n++] = s;
	return true;
}

/* Second chances by hand: n clean blocks, all referenced, from @hand. */
static void check_directed(u64 n, u32 hand, unsigned int want, u32 expect)
{
	struct pmc_index idx;
	struct take_log t = { .idx = &idx };
	u64 k, refs = 0;

	if (pmc_index_init(&idx, n))
		return mismatch("init", n, 1, 0);
	for (k = 0; k < n; k++) {
		pmc_index_insert(&idx, (u32)k, k, 0xff, 0);
		pmc_index_ref(&idx, (u32)k);
	}
	pmc_index_clock(&idx, &hand, want, take_all, &t);
	if (t.n != want || t.slots[0] != expect)
		mismatch("directed clock: first slot taken", n,
			 t.n ? t.slots[0] : PMC_NO_SLOT, expect);
	for (k = 0; k < n; k++)
		refs += pmc_test_bit(k, idx.ref);
	/* 8 x want second chances, or all of them, then a second turn */
	if (refs != (n > 8 * want ? n - 8 * want : 0))
		mismatch("directed clock: reference bits left", n, refs,
			 n > 8 * want ? n - 8 * want : 0);
	pmc_index_destroy(&idx);
}

static unsigned int run_check_select(void);

static int run_check(void)
{
	static const u64 sizes[] = {
		1, 2, 63, 64, 65, 127, 4095, 4096, 4097, 64 * 64 * 64 + 1,
		300000,
	};
	unsigned int i;

	check_directed(1000, 0, 1, 8);		/* 8 chances, then 8 */
	check_directed(1000, 990, 2, 6);	/* 16 chances across the end */
	check_directed(5, 3, 1, 3);		/* all 5 passed: second turn */
	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		u64 n = sizes[i];

		check_one(n, n < 1000 ? 20000 : n < 100000 ? 20000 : 4000);
	}
	printf("check sizes=%u mismatches=%lu\n", (unsigned int)ARRAY_SIZE(sizes),
	       mismatches);
	i = run_check_select();
	printf("check select configs=%u mismatches=%lu\n", i, mismatches);
	return mismatches ? 1 : 0;
}

/* ---- --check: writeback selection against brute force -------------- */

/*
 * The module's flows, index side only: pmc_meta_write_block() (an older
 * copy under writeback goes STALE, the new one waits with WAITPREV),
 * pmc_meta_drop_block(), pmc_meta_wb_done(), eviction; selection through
 * pmc_index_wb_select() with the lookups and claims of wb_select.c, a
 * claim refused now and then (a lock, a write going around, an epoch that
 * is too young for PMC_SEL_AGED).
 */
struct sel_model {
	struct pmc_index idx;
	u64 n, ob, span;	/* slots, origin blocks, blocks written to */
	u32 sb, epoch, round;
	bool refuse;
	u32 *wb;		/* slots in writeback */
	u64 n_wb;
	u64 looks, selected, visits, rate_selected, whole;
};

static struct sel_model S;

static bool sel_look(void *ctx, u64 o, struct pmc_wb_cand *c)
{
	u32 s = pmc_index_lookup(&S.idx, o);

	S.looks++;
	if (s == PMC_NO_SLOT)
		return false;
	c->slot = s;
	c->v = S.idx.slot[s];
	return true;
}

/* wb_select.c pmc_wb_claim(): what it refuses, as a pure function */
static bool sel_refused(u32 slot, u64 v, unsigned int sel)
{
	if ((sel & PMC_SEL_AGED) && pmc_slot_epoch(v) == S.epoch)
		return true;
	return S.refuse && ((slot * 2654435761U) ^ S.round) % 7 == 0;
}

static bool sel_claim(void *ctx, const struct pmc_wb_cand *c,
		      unsigned int sel)
{
	if (sel_refused(c->slot, c->v, sel) || S.idx.slot[c->slot] != c->v)
		return false;
	pmc_index_set_flags(&S.idx, c->slot, PMC_SF_WB, 0);
	S.wb[S.n_wb++] = c->slot;
	return true;
}

static const struct pmc_wb_ops sel_ops = {
	.look = sel_look,
	.claim = sel_claim,
};

struct bcand {
	u64 o;
	u32 slot;
	u64 v;
};

static int bcand_cmp(const void *a, const void *b)
{
	u64 x = ((const struct bcand *)a)->o, y = ((const struct bcand *)b)->o;

	return x < y ? -1 : x > y;
}

/* Every candidate, in origin order (brute force over the slot words). */
static u64 brute_cands(struct bcand *c)
{
	u64 s, k = 0;

	for (s = 0; s < S.n; s++)
		if (pmc_wb_candidate(S.idx.slot[s])) {
			c[k].o = pmc_slot_oblock(S.idx.slot[s]);
			c[k].slot = (u32)s;
			c[k].v = S.idx.slot[s];
			k++;
		}
	qsort(c, k, sizeof(*c), bcand_cmp);
	return k;
}

/*
 * What pmc_index_wb_select() must take, from the candidates alone: from
 * the chunk where the last call stopped, stripes in origin order, whole
 * ones only without PMC_SEL_PARTIAL, none split unless larger than @cap,
 * wrapping once if nothing was taken.
 */
static unsigned int brute_select(struct bcand *c, u64 k, u64 start,
				 unsigned int want, unsigned int cap,
				 unsigned int sel, struct pmc_wb_cand *out)
{
	struct pmc_wb_map *wb = &S.idx.wb;
	unsigned int n = 0, leg, cnt, kept, i;
	u64 a, b, sb = wb->stripe;
	bool whole;

	for (leg = 0; leg < 2 && n < want; leg++) {
		if (leg == 1 && (n || !start))
			break;
		for (a = 0; a < k && n < want; a = b) {
			u64 st = c[a].o / sb, ch = pmc_index_wb_chunk_of(&S.idx, c[a].o);

			for (b = a; b < k && c[b].o / sb == st; b++)
				;
			if (leg == 0 ? ch < start : ch >= start)
				continue;
			cnt = (unsigned int)(b - a);
			whole = sb > 1 && cnt == sb;
			for (i = 0; i < cnt; i++)
				if (pmc_slot_mask(c[a + i].v) != wb->full_mask)
					whole = false;
			if (!whole && sb > 1 && !(sel & PMC_SEL_PARTIAL))
				continue;
			if (n && n + cnt > want)
				break;
			kept = cnt < cap - n ? cnt : cap - n;
			for (i = 0; i < kept; i++)
				if (!sel_refused(c[a + i].slot, c[a + i].v, sel)) {
					out[n].slot = c[a + i].slot;
					out[n].v = c[a + i].v;
					n++;
				}
		}
	}
	return n;
}

static bool wb_bit(const struct pmc_bitmap *bm, u64 bit)
{
	return bm_bit(bm, 0, bit);
}

/* Hints of a selection bitmap exact, nothing beyond its end. */
static void check_hints(const struct pmc_bitmap *bm, const char *what)
{
	u64 j, k, words;
	u32 l;

	for (l = 0; l < bm->levels; l++) {
		words = (bm->bits[l] + BITS_PER_LONG - 1) / BITS_PER_LONG;
		for (j = bm->bits[l]; j < words * BITS_PER_LONG; j++)
			if (bm_bit(bm, l, j))
				mismatch(what, S.n, l, j);
		if (l + 1 == bm->levels)
			continue;
		for (k = 0; k < words; k++)
			if (bm_bit(bm, l + 1, k) != !!bm->w[bm->off[l] + k])
				mismatch(what, S.n, l + 1, k);
	}
}

/*
 * No candidate without a bit; no whole stripe of candidates in a chunk
 * that is only parked (selection of whole stripes would never see it);
 * the finder against a scan of the bits, and never past a chunk that
 * holds a candidate.
 */
static void check_select_state(struct bcand *c)
{
	struct pmc_wb_map *wb = &S.idx.wb;
	u64 k = brute_cands(c), a, b, nch = wb->cand.bits[0], i, p;
	bool whole;

	check_hints(&wb->cand, "wb cand hint");
	check_hints(&wb->parked, "wb parked hint");
	for (a = 0; a < k; a = b) {
		u64 st = c[a].o / wb->stripe;
		u64 ch = pmc_index_wb_chunk_of(&S.idx, c[a].o);

		whole = wb->stripe > 1;
		for (b = a; b < k && c[b].o / wb->stripe == st; b++)
			if (pmc_slot_mask(c[b].v) != wb->full_mask)
				whole = false;
		if (b - a != wb->stripe)
			whole = false;
		if (!wb_bit(&wb->cand, ch) && !wb_bit(&wb->parked, ch))
			mismatch("a candidate without a bit (never written back)",
				 S.n, c[a].o, ch);
		if (whole && !wb_bit(&wb->cand, ch))
			mismatch("a whole stripe only parked", S.n, c[a].o, ch);
	}
	for (i = 0; i < 3; i++) {
		u64 from = rnd_below(nch + 1), x, y = PMC_NO_SLOT, z = ~0ULL;
		bool parked = i & 1;

		for (p = from; p < nch; p++)
			if (wb_bit(&wb->cand, p) ||
			    (parked && wb_bit(&wb->parked, p))) {
				y = p;
				break;
			}
		x = pmc_index_wb_next(&S.idx, from, parked);
		if (y == PMC_NO_SLOT)
			y = ~0ULL;
		if (x != y)
			mismatch("wb next chunk", S.n, x, y);
		for (a = 0; a < k; a++) {
			u64 ch = pmc_index_wb_chunk_of(&S.idx, c[a].o);

			if (ch >= from && ch < z)
				z = ch;
		}
		if (parked && x > z)
			mismatch("wb next chunk beyond a candidate", S.n, x, z);
	}
}

static u64 sel_oblock(void)
{
	u64 r = rnd_below(100);

	if (r < 2)	/* beyond the origin the chunks were sized for */
		return S.ob + rnd_below(3 * S.idx.wb.chunk + 5);
	return rnd_below(S.ob);
}

/* pmc_meta_write_block(), index side */
static void sel_write(u64 o, u32 mask)
{
	u32 s = pmc_index_pop_free(&S.idx), old;
	u32 f = PMC_SF_DIRTY | pmc_epoch_flags(S.epoch);

	if (s == PMC_NO_SLOT) {
		s = pmc_index_next_clean(&S.idx, (u32)rnd_below(S.n));
		if (s == PMC_NO_SLOT)
			s = pmc_index_next_clean(&S.idx, 0);
		if (s == PMC_NO_SLOT)
			return;		/* full of dirty blocks: around */
		pmc_index_unlink(&S.idx, s);
	}
	if (pmc_index_inflight(&S.idx, o))
		f |= PMC_SF_WAITPREV;
	old = pmc_index_lookup(&S.idx, o);
	if (old != PMC_NO_SLOT) {
		if (pmc_slot_flags(S.idx.slot[old]) & PMC_SF_WB) {
			pmc_index_set_flags(&S.idx, old, PMC_SF_STALE, 0);
		} else {
			pmc_index_unlink(&S.idx, old);
			pmc_index_push_free(&S.idx, old);
		}
	}
	pmc_index_insert(&S.idx, s, o, mask, f);
}

/* pmc_meta_wb_done() of in-flight entry @i */
static void sel_done(u64 i, bool ok)
{
	u32 s = S.wb[i], cur;
	u64 v = S.idx.slot[s];

	S.wb[i] = S.wb[--S.n_wb];
	if (pmc_slot_flags(v) & PMC_SF_STALE) {
		pmc_index_unlink(&S.idx, s);
		pmc_index_push_free(&S.idx, s);
		cur = pmc_index_lookup(&S.idx, pmc_slot_oblock(v));
		if (cur != PMC_NO_SLOT)
			pmc_index_set_flags(&S.idx, cur, 0, PMC_SF_WAITPREV);
	} else if (!ok) {
		pmc_index_set_flags(&S.idx, s, 0, PMC_SF_WB);
	} else {
		pmc_index_set_flags(&S.idx, s, 0, PMC_SF_WB | PMC_SF_DIRTY |
				    PMC_SF_EPOCH);
	}
}

static void sel_once(struct bcand *c, unsigned int sel, unsigned int want,
		     unsigned int cap)
{
	static struct pmc_wb_cand got[2048], exp[2048];
	u64 k = brute_cands(c), start = S.idx.wb.pos, w0 = S.n_wb;
	unsigned int whole = 0, n, m, i;

	if (start >= S.idx.wb.cand.bits[0])
		start = 0;
	m = brute_select(c, k, start, want, cap, sel, exp);
	n = pmc_index_wb_select(&S.idx, got, want, cap, sel, &sel_ops, NULL,
				&whole);
	S.selected += n;
	S.visits++;
	if (!sel)
		S.rate_selected += n;
	S.whole += whole;
	if (n != m)
		mismatch("selected blocks", S.n, n, m);
	for (i = 0; i < n && i < m; i++)
		if (got[i].slot != exp[i].slot || got[i].v != exp[i].v)
			mismatch("selected block", S.n,
				 pmc_slot_oblock(got[i].v),
				 pmc_slot_oblock(exp[i].v));
	for (i = 1; i < n; i++)
		if (pmc_slot_oblock(got[i].v) <= pmc_slot_oblock(got[i - 1].v))
			mismatch("selection not in origin order", S.n,
				 pmc_slot_oblock(got[i - 1].v),
				 pmc_slot_oblock(got[i].v));
	if (S.n_wb - w0 != n)
		mismatch("claimed != returned", S.n, S.n_wb - w0, n);
}

static void check_select(u64 n, u64 ob, u32 sb, unsigned long ops)
{
	struct bcand *c = calloc(n + 1, sizeof(*c));
	u64 k, left;
	unsigned long i;

	memset(&S, 0, sizeof(S));
	S.n = n;
	S.ob = ob;
	S.wb = calloc(n + 1, sizeof(*S.wb));
	if (pmc_index_init(&S.idx, n) || pmc_index_wb_alloc(&S.idx, ob)) {
		mismatch("init", n, 1, 0);
		return;
	}
	for (k = n; k-- > 0;)
		pmc_index_push_free(&S.idx, (u32)k);
	pmc_index_wb_build(&S.idx, sb, 0xff);
	for (i = 0; i < ops; i++) {
		u32 op = (u32)rnd_below(100), j;
		u64 o;

		S.round = (u32)i;
		if (op < 25) {
			sel_write(sel_oblock(), rnd_below(5) ? 0xff : 0x0f);
		} else if (op < 32) {
			/* a whole stripe written, some blocks partly */
			o = rnd_below(S.ob) / S.idx.wb.stripe * S.idx.wb.stripe;
			for (j = 0; j < S.idx.wb.stripe; j++)
				sel_write(o + j, rnd_below(20) ? 0xff : 0x0f);
		} else if (op < 47) {
			if (S.n_wb)
				sel_done(rnd_below(S.n_wb), rnd_below(5) != 0);
		} else if (op < 53) {
			/* discard */
			u32 s = pmc_index_lookup(&S.idx, sel_oblock());

			if (s == PMC_NO_SLOT)
				continue;
			if (pmc_slot_flags(S.idx.slot[s]) & PMC_SF_WB) {
				pmc_index_set_flags(&S.idx, s, PMC_SF_STALE, 0);
			} else {
				pmc_index_unlink(&S.idx, s);
				pmc_index_push_free(&S.idx, s);
			}
		} else if (op < 56) {
			S.epoch = (S.epoch + 1) & 3;
		} else if (op < 57) {
			/* a resume with another stripe size: rebuilt */
			static const u32 sbs[] = { 0, 1, 2, 3, 4, 8, 16, 48 };

			pmc_index_wb_build(&S.idx, sbs[rnd_below(8)], 0xff);
		} else {
			static const unsigned int sels[] = {
				0, PMC_SEL_PARTIAL, PMC_SEL_PARTIAL | PMC_SEL_AGED,
			};
			unsigned int want = 1 + (unsigned int)rnd_below(
				rnd_below(8) ? 40 : 1000);

			S.refuse = rnd_below(2);
			sel_once(c, sels[rnd_below(3)], want,
				 want + (unsigned int)rnd_below(20));
		}
		if (n <= 5000 || !(i % 50))
			check_select_state(c);
	}
	check_select_state(c);
	/* a flush: everything written back, in a bounded number of passes */
	S.refuse = false;
	for (i = 0; i < 4 * n + 100; i++) {
		while (S.n_wb)
			sel_done(S.n_wb - 1, true);
		if (!pmc_index_wb_select(&S.idx, (struct pmc_wb_cand[64]){ },
					 64, 64, PMC_SEL_PARTIAL, &sel_ops,
					 NULL, &(unsigned int){ 0 }) && !S.n_wb)
			break;
	}
	left = brute_cands(c);
	printf("select slots=%llu origin=%llu stripe=%u chunk=%llu calls=%llu "
	       "selected=%llu whole_only=%llu whole_stripes=%llu beyond=%llu "
	       "left=%llu\n", (unsigned long long)n, (unsigned long long)ob,
	       S.idx.wb.stripe, (unsigned long long)S.idx.wb.chunk,
	       (unsigned long long)S.visits, (unsigned long long)S.selected,
	       (unsigned long long)S.rate_selected,
	       (unsigned long long)S.whole,
	       (unsigned long long)S.idx.wb.beyond, (unsigned long long)left);
	if (left) {
		printf("FLUSH NEVER ENDS slots=%llu: %llu dirty blocks are never selected\n",
		       (unsigned long long)n, (unsigned long long)left);
		mismatch("flush never ends", n, left, 0);
	}
	free(c);
	free(S.wb);
	pmc_index_destroy(&S.idx);
}

static unsigned int run_check_select(void)
{
	static const struct { u64 n, ob; u32 sb; } cfg[] = {
		{ 1, 1, 1 }, { 8, 1, 0 }, { 8, 7, 0 }, { 64, 100, 4 },
		{ 100, 1000, 48 }, { 300, 250, 3 }, { 1000, 4000, 1 },
		{ 4097, 20000, 48 }, { 5000, 300000, 16 }, { 20000, 20000, 8 },
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cfg) && !mismatches; i++)
		check_select(cfg[i].n, cfg[i].ob, cfg[i].sb,
			     cfg[i].n < 1000 ? 20000 : 8000);
	return i;
}

/* ---- --bench -------------------------------------------------------- */

struct bench {
	struct pmc_index idx;
	u64 n, origin_mask;
	u32 *ring;		/* slots in the order they became dirty */
	u64 ring_cap, ring_head, ring_tail;
	u64 n_dirty, target_dirty;
	u32 hand;
	bool old;
	u64 evict_calls, evicted, old_scanned;
	u64 writes, write_hits, reads, read_hits, cleaned;
	u32 victims[64];
	unsigned int got;
};

static struct bench B;

/* io.c pmc_evict_one() without pmem and locks: pmc_meta_evict's unlink */
static __attribute__((noinline)) bool bench_take(void *ctx, u32 s, u64 v)
{
	pmc_index_unlink(&B.idx, s);
	B.victims[B.got++] = s;
	return true;
}

/* The linear clock io.c had before the clean bitmap. */
static __attribute__((noinline)) unsigned int old_clock(unsigned int want)
{
	u64 n = B.n, scanned = 0;

	while (B.got < want && scanned < n) {
		u32 s = B.hand++ % n;
		u64 v = B.idx.slot[s];
		u32 f = pmc_slot_flags(v);

		scanned++;
		if (!(f & PMC_SF_USED) ||
		    (f & (PMC_SF_DIRTY | PMC_SF_WB | PMC_SF_STALE)))
			continue;
		bench_take(NULL, s, v);
	}
	B.old_scanned += scanned;
	return B.got;
}

/* pmc_evict_clean() + pmc_free_slots() */
static void bench_evict(unsigned int want)
{
	unsigned int i;

	B.got = 0;
	B.evict_calls++;
	if (B.old)
		old_clock(want);
	else
		pmc_index_clock(&B.idx, &B.hand, want, bench_take, NULL);
	for (i = 0; i < B.got; i++)
		pmc_index_push_free(&B.idx, B.victims[i]);
	B.evicted += B.got;
}

static u32 bench_alloc(void)
{
	u32 s = pmc_index_pop_free(&B.idx);

	if (s == PMC_NO_SLOT) {
		bench_evict(32);
		s = pmc_index_pop_free(&B.idx);
	}
	return s;
}

/* Half the accesses to a hot set of half the cache's size. */
static u64 bench_oblock(void)
{
	u64 r = rnd();

	if (r & 1)
		return (r >> 1) % (B.n / 2 + 1);
	return (r >> 1) & B.origin_mask;
}

/*
 * Dirty slots wait in a queue that gives them back in random order:
 * writeback goes by origin block, which has nothing to do with the slot
 * order the clock walks in.
 */
static void ring_push(u32 s)
{
	u64 h = B.ring_head++ % B.ring_cap;
	u64 j = (B.ring_tail + rnd_below(B.ring_head - B.ring_tail)) % B.ring_cap;

	B.ring[h] = B.ring[j];
	B.ring[j] = s;
}

/* writeback.c: WB set when selected, WB and DIRTY cleared when done. */
static void bench_writeback(void)
{
	while (B.n_dirty > B.target_dirty && B.ring_tail != B.ring_head) {
		u32 s = B.ring[B.ring_tail++ % B.ring_cap];
		u32 f = pmc_slot_flags(B.idx.slot[s]);

		if ((f & (PMC_SF_USED | PMC_SF_DIRTY | PMC_SF_WB)) !=
		    (PMC_SF_USED | PMC_SF_DIRTY))
			continue;
		pmc_index_set_flags(&B.idx, s, PMC_SF_WB, 0);
		pmc_index_set_flags(&B.idx, s, 0,
				    PMC_SF_WB | PMC_SF_DIRTY | PMC_SF_EPOCH);
		B.n_dirty--;
		B.cleaned++;
	}
}

/* pmc_map_write() + pmc_meta_write_block(), index side. */
static void bench_write(void)
{
	u64 ob = bench_oblock();
	u32 old = pmc_index_lookup(&B.idx, ob), slot;

	slot = bench_alloc();
	if (slot == PMC_NO_SLOT)
		return;		/* the module would go around the cache */
	B.writes++;
	if (old != PMC_NO_SLOT) {
		B.write_hits++;
		if (pmc_slot_flags(B.idx.slot[old]) & PMC_SF_DIRTY)
			B.n_dirty--;
		pmc_index_unlink(&B.idx, old);
		pmc_index_push_free(&B.idx, old);
	}
	pmc_index_insert(&B.idx, slot, ob, 0xff, PMC_SF_DIRTY);
	if (old != PMC_NO_SLOT)
		pmc_index_ref(&B.idx, slot);
	B.n_dirty++;
	ring_push(slot);
}

static void bench_read(void)
{
	u32 s = pmc_index_lookup(&B.idx, bench_oblock());

	B.reads++;
	if (s != PMC_NO_SLOT) {
		B.read_hits++;
		pmc_index_ref(&B.idx, s);
	}
}

static __attribute__((noinline)) void bench_cycles(u64 ops)
{
	u64 i;

	for (i = 0; i < ops; i++) {
		bench_write();
		bench_read();
		bench_writeback();
	}
}

static u64 phase_target(const char *tok)
{
	if (tok[0] == 'k') {
		u64 k = strtoull(tok + 1, NULL, 0);

		return B.n > k ? B.n - k : 0;
	}
	return (u64)(B.n * atof(tok) / 100.0);
}

/* More dirty blocks for the next phase: random clean ones become dirty. */
static void dirty_more(void)
{
	while (B.n_dirty < B.target_dirty) {
		u32 s = (u32)rnd_below(B.n);

		if (!pmc_slot_clean(B.idx.slot[s]))
			continue;
		pmc_index_set_flags(&B.idx, s, PMC_SF_DIRTY, 0);
		B.n_dirty++;
		ring_push(s);
	}
}

/* The same without the model's writeback queue (--bench-select). */
static void dirty_more_plain(void)
{
	while (B.n_dirty < B.target_dirty) {
		u32 s = (u32)rnd_below(B.n);

		if (!pmc_slot_clean(B.idx.slot[s]))
			continue;
		pmc_index_set_flags(&B.idx, s, PMC_SF_DIRTY, 0);
		B.n_dirty++;
	}
}

static void run_phase(const char *tok, u64 ops)
{
	double t;

	B.target_dirty = phase_target(tok);
	dirty_more();
	bench_writeback();
	bench_cycles(ops / 4);		/* warm up: the clock hand moves */
	B.evict_calls = B.evicted = B.old_scanned = 0;
	B.writes = B.write_hits = B.reads = B.read_hits = B.cleaned = 0;
	CALLGRIND_ZERO_STATS;
	CALLGRIND_START_INSTRUMENTATION;
	t = now_ns();
	bench_cycles(ops);
	t = now_ns() - t;
	CALLGRIND_STOP_INSTRUMENTATION;
	CALLGRIND_DUMP_STATS_AT(tok);
	printf("phase %s slots=%llu clock=%s dirty=%llu ns_per_cycle=%.1f "
	       "writes=%llu write_hits=%llu read_hit_pct=%.1f "
	       "evict_calls=%llu evicted=%llu cleaned=%llu "
	       "old_scanned_per_evicted=%.1f\n", tok,
	       (unsigned long long)B.n, B.old ? "old" : "bitmap",
	       (unsigned long long)B.n_dirty, t / ops,
	       (unsigned long long)B.writes,
	       (unsigned long long)B.write_hits,
	       100.0 * B.read_hits / (B.reads ? B.reads : 1),
	       (unsigned long long)B.evict_calls,
	       (unsigned long long)B.evicted,
	       (unsigned long long)B.cleaned,
	       B.evicted ? (double)B.old_scanned / B.evicted : 0.0);
	fflush(stdout);
}

/* ---- --bench-select: writeback selection at 1 GiB .. 1 TiB ----------- */

static u64 bs_looks;

static bool bs_look(void *ctx, u64 o, struct pmc_wb_cand *c)
{
	u32 s = pmc_index_lookup(&B.idx, o);

	bs_looks++;
	if (s == PMC_NO_SLOT)
		return false;
	c->slot = s;
	c->v = B.idx.slot[s];
	return true;
}

static bool bs_claim(void *ctx, const struct pmc_wb_cand *c, unsigned int sel)
{
	if (B.idx.slot[c->slot] != c->v)
		return false;
	pmc_index_set_flags(&B.idx, c->slot, PMC_SF_WB, 0);
	return true;
}

static const struct pmc_wb_ops bs_ops = {
	.look = bs_look,
	.claim = bs_claim,
};

/* A new dirty copy of @ob (pmc_map_write(), index side). */
static void bs_write(u64 ob)
{
	u32 old = pmc_index_lookup(&B.idx, ob), slot;

	if (old != PMC_NO_SLOT && (pmc_slot_flags(B.idx.slot[old]) & PMC_SF_WB))
		return;
	slot = bench_alloc();
	if (slot == PMC_NO_SLOT)
		return;
	old = pmc_index_lookup(&B.idx, ob);	/* eviction may have taken it */
	if (old != PMC_NO_SLOT) {
		if (pmc_slot_flags(B.idx.slot[old]) & PMC_SF_DIRTY)
			B.n_dirty--;
		pmc_index_unlink(&B.idx, old);
		pmc_index_push_free(&B.idx, old);
	}
	pmc_index_insert(&B.idx, slot, ob, 0xff, PMC_SF_DIRTY);
	B.n_dirty++;
}

static struct pmc_wb_cand bs_out[1024];

/* The measured part: one selection. */
static __attribute__((noinline)) unsigned int bs_select(unsigned int sel,
							 unsigned int *whole)
{
	unsigned int n;

	CALLGRIND_TOGGLE_COLLECT;
	n = pmc_index_wb_select(&B.idx, bs_out, 1024, 1024, sel, &bs_ops,
				NULL, whole);
	CALLGRIND_TOGGLE_COLLECT;
	return n;
}

/* Writeback completions of what was selected: clean now. */
static void bs_done(unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		pmc_index_set_flags(&B.idx, bs_out[i].slot, 0,
				    PMC_SF_WB | PMC_SF_DIRTY | PMC_SF_EPOCH);
	B.n_dirty -= n;
}

/*
 * Phases: pD: everything may go (flush, above high_watermark), D % of the
 * blocks dirty, kept so by random 4 KiB writes; qD: the same with
 * stripe_blocks 1 (the bits rebuilt, as a resume with another stripe
 * does); w: only whole stripes (between the watermarks): each pass
 * follows 21 whole stripes written at random places, over the random
 * dirty blocks left by the phase before, which wait as partial stripes
 * (parked once, before the measured passes).
 */
static void bs_phase(const char *name, u64 ops, u32 sb)
{
	unsigned int sel = name[0] == 'w' ? 0 : PMC_SEL_PARTIAL;
	unsigned int whole = 0, n, i, warm = 0;
	u64 selected = 0, calls = 0, j;
	double t = 0, t0;

	if (name[0] == 'q')
		sb = 1;
	if (B.idx.wb.stripe != sb)
		pmc_index_wb_build(&B.idx, sb, 0xff);
	if (sel) {
		B.target_dirty = (u64)(B.n * atof(name + 1) / 100.0);
		dirty_more_plain();
	}
	if (!sel)	/* park the random ones, unmeasured */
		while ((n = pmc_index_wb_select(&B.idx, bs_out, 1024, 1024, 0,
						&bs_ops, NULL, &whole)))
			bs_done(n), warm += n;
	bs_looks = 0;
	whole = 0;
	CALLGRIND_ZERO_STATS;
	CALLGRIND_START_INSTRUMENTATION;
	while (selected < ops) {
		if (sel) {
			while (B.n_dirty < B.target_dirty)
				bs_write(rnd() & B.origin_mask);
		} else {
			for (i = 0; i < 21; i++) {
				u64 o = (rnd() & B.origin_mask) / sb * sb;

				for (j = 0; j < sb; j++)
					bs_write(o + j);
			}
		}
		t0 = now_ns();
		n = bs_select(sel, &whole);
		t += now_ns() - t0;
		calls++;
		if (!n)
			break;
		selected += n;
		bs_done(n);
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	CALLGRIND_DUMP_STATS_AT(name);
	printf("select %s slots=%llu chunk=%llu chunks=%llu levels=%u "
	       "dirty=%llu calls=%llu selected=%llu whole_stripes=%u "
	       "looks_per_block=%.2f ns_per_block=%.1f warm=%u\n", name,
	       (unsigned long long)B.n, (unsigned long long)B.idx.wb.chunk,
	       (unsigned long long)B.idx.wb.cand.bits[0], B.idx.wb.cand.levels,
	       (unsigned long long)B.n_dirty, (unsigned long long)calls,
	       (unsigned long long)selected, whole,
	       selected ? (double)bs_looks / selected : 0.0,
	       selected ? t / selected : 0.0, warm);
	fflush(stdout);
}

static int run_bench_select(double gib, u64 ops, u32 sb, char *phases)
{
	u64 pmem = (u64)(gib * (1ULL << 30)), off, i, bits = 0;
	char *tok, *save = NULL;
	double t0;

	if (pmc_meta_geometry(pmem, 4096, &B.n, &off)) {
		fprintf(stderr, "bad size\n");
		return 2;
	}
	while ((1ULL << bits) < 4 * B.n)
		bits++;
	B.origin_mask = (1ULL << bits) - 1;
	if (pmc_index_init(&B.idx, B.n) ||
	    pmc_index_wb_alloc(&B.idx, B.origin_mask + 1)) {
		fprintf(stderr, "no memory for the index\n");
		return 2;
	}
	t0 = now_ns();
	/* every slot a distinct clean block, then random ones dirty */
	for (i = 0; i < B.n; i++)
		pmc_index_insert(&B.idx, (u32)i,
				 (i * 0x9e3779b97f4a7c15ULL) & B.origin_mask,
				 0xff, 0);
	printf("bench-select gib=%g slots=%llu origin=%llu stripe=%u "
	       "ram_bytes_per_slot=%.3f fill_s=%.1f ", gib,
	       (unsigned long long)B.n, (unsigned long long)B.origin_mask + 1,
	       sb, (double)pmc_index_ram_bytes(&B.idx) / B.n,
	       (now_ns() - t0) / 1e9);
	t0 = now_ns();
	pmc_index_wb_build(&B.idx, sb, 0xff);
	printf("build_s=%.2f\n", (now_ns() - t0) / 1e9);
	fflush(stdout);
	for (tok = strtok_r(phases, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save))
		bs_phase(tok, ops, sb);
	return 0;
}

/*
 * @phases: dirty shares in %, or kK for all but K blocks dirty, comma
 * separated; the cache is filled once for the first.
 */
static int run_bench(double gib, char *phases, u64 ops, bool old)
{
	u64 pmem = (u64)(gib * (1ULL << 30)), off, i, bits = 0, nbits = 0, s;
	char *tok, *save = NULL;
	double t0;

	if (pmc_meta_geometry(pmem, 4096, &B.n, &off)) {
		fprintf(stderr, "bad size\n");
		return 2;
	}
	while ((1ULL << bits) < 4 * B.n)
		bits++;
	while ((1ULL << nbits) < B.n)
		nbits++;
	B.origin_mask = (1ULL << bits) - 1;
	B.old = old;
	if (pmc_index_init(&B.idx, B.n)) {
		fprintf(stderr, "no memory for the index\n");
		return 2;
	}
	B.ring_cap = B.n + 2 * ops + 1;
	B.ring = pmc_alloc_array(B.ring_cap, sizeof(*B.ring));
	if (!B.ring) {
		fprintf(stderr, "no memory for the model's dirty ring\n");
		return 2;
	}
	tok = strtok_r(phases, ",", &save);
	if (!tok)
		return 2;
	B.target_dirty = phase_target(tok);

	/*
	 * Fill: every slot holds a distinct block (an odd multiplier is a
	 * permutation of the origin), dirty ones spread evenly; they join
	 * the writeback queue in a scrambled order (an odd multiplier again,
	 * over the next power of two), written one after the other.
	 */
	t0 = now_ns();
	for (i = 0; i < B.n; i++) {
		u64 ob = (i * 0x9e3779b97f4a7c15ULL) & B.origin_mask;
		bool d = (i * B.target_dirty) / B.n !=
			 ((i + 1) * B.target_dirty) / B.n;

		pmc_index_insert(&B.idx, (u32)i, ob, 0xff,
				 d ? PMC_SF_DIRTY : 0);
	}
	for (i = 0; i < (1ULL << nbits); i++) {
		s = (i * 0x9e3779b97f4a7c15ULL) & ((1ULL << nbits) - 1);
		if (s < B.n && (s * B.target_dirty) / B.n !=
		    ((s + 1) * B.target_dirty) / B.n) {
			B.ring[B.ring_head++] = (u32)s;
			B.n_dirty++;
		}
	}
	printf("bench gib=%g slots=%llu clock=%s ops=%llu "
	       "ram_bytes_per_slot=%.2f fill_s=%.1f\n", gib,
	       (unsigned long long)B.n, old ? "old" : "bitmap",
	       (unsigned long long)ops,
	       (double)pmc_index_ram_bytes(&B.idx) / B.n,
	       (now_ns() - t0) / 1e9);
	for (; tok; tok = strtok_r(NULL, ",", &save))
		run_phase(tok, ops);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "check", no_argument, NULL, 'c' },
		{ "bench", no_argument, NULL, 'b' },
		{ "gib", required_argument, NULL, 'g' },
		{ "dirty", required_argument, NULL, 'd' },
		{ "ops", required_argument, NULL, 'o' },
		{ "old", no_argument, NULL, 'O' },
		{ "seed", required_argument, NULL, 's' },
		{ "bench-select", no_argument, NULL, 'S' },
		{ "check-select", no_argument, NULL, 'C' },
		{ "stripe", required_argument, NULL, 't' },
		{ "phases", required_argument, NULL, 'p' },
		{ }
	};
	bool check = false, bench = false, old = false, bsel = false;
	bool csel = false;
	u32 stripe = 48;
	char *phases = NULL, *sel_phases = NULL;
	double gib = 1;
	u64 ops = 1000000;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': check = true; break;
		case 'b': bench = true; break;
		case 'g': gib = atof(optarg); break;
		case 'd': phases = optarg; break;
		case 'o': ops = strtoull(optarg, NULL, 0); break;
		case 'O': old = true; break;
		case 'S': bsel = true; break;
		case 'C': csel = true; break;
		case 't': stripe = strtoul(optarg, NULL, 0); break;
		case 'p': sel_phases = optarg; break;
		case 's': rng = 88172645463325252ULL ^
				(strtoull(optarg, NULL, 0) * 0x9e3779b97f4a7c15ULL);
			  if (!rng)
				  rng = 1;
			  break;
		default:
			return 2;
		}
	}
	if (check)
		return run_check();
	if (csel) {
		unsigned int n = run_check_select();

		printf("check select configs=%u mismatches=%lu\n", n,
		       mismatches);
		return mismatches ? 1 : 0;
	}
	if (bench)
		return run_bench(gib, phases ? phases : "50", ops, old);
	if (bsel)
		return run_bench_select(gib, ops, stripe,
					strdup(sel_phases ? sel_phases :
					       "p1,w,p50,q50"));
	fprintf(stderr, "usage: index_model --check | --bench --gib G ...\n");
	return 2;
}
