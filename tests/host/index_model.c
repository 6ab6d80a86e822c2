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

/* ---- shim: nothing here touches pmem -------------------------------- */

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	memcpy(dst, src, len);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
}

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	return 0;
}

void pmc_random_bytes(void *p, size_t len)
{
	memset(p, 0x5a, len);
}

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
	return mismatches ? 1 : 0;
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
		{ }
	};
	bool check = false, bench = false, old = false;
	char *phases = NULL;
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
	if (bench)
		return run_bench(gib, phases ? phases : "50", ops, old);
	fprintf(stderr, "usage: index_model --check | --bench --gib G ...\n");
	return 2;
}
