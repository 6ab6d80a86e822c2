// SPDX-License-Identifier: GPL-2.0
/*
 * Threads against the clean bitmap of the module's pmc_index.c, compiled
 * with the kernel's kind of atomic bit operations (PMC_USER_ATOMIC_BITOPS
 * in the userspace shim): the upper levels are hints kept without a lock.
 *
 * Slot s belongs to thread s % T, as a slot belongs to its stripe lock in
 * the module, so the bits of one word change under different owners.
 * Each owner turns its slots clean and dirty (pmc_index_set_flags()) in a
 * small moving window, so that words go empty and fill again all the
 * time; a finder thread looks for clean slots from random points
 * (pmc_index_next_clean(), which clears the stale hints it meets), as the
 * eviction clock does.  When all have stopped: level 0 must equal the slot
 * words, and no non-empty word may lack its hint (a lost hint hides clean
 * blocks from eviction).  Stale hints (set over an empty word) are
 * allowed and counted.
 *
 *   index_stress [--threads T] [--ops N] [--slots N] [--seed S]
 *   last line: stress ... lost_hints=L level0_errors=E stale_hints=S
 *
 * --select: the writeback selection bitmaps instead.  Slot s holds origin
 * block 3s (chunks of 3 blocks, so one word of chunk bits has many
 * owners).  An owner makes one of its clean slots dirty (the store hook
 * sets the chunk's bit) and hands it over to writeback (a release store);
 * a selector thread runs pmc_index_wb_select() all the time, claims only
 * slots handed over (others stay candidates: their bits must come back),
 * writes them back at once (clean again) and hands them back.  When the
 * owners have stopped, selection must find every dirty block: a
 * candidate whose bit was lost between the owner's store and the
 * selector's clear would stay dirty for ever.
 *   last line: stress-select ... selected=N lost_candidates=L
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <getopt.h>

#include "pmc_index.h"

static struct pmc_index idx;
static u64 n_slots = 64 * 64 * 8 + 3;
static unsigned int n_threads = 4;
static u64 n_ops = 2000000;
static u64 seed = 1;
static volatile int stop_finder;
static pthread_barrier_t start;
static u64 finds;

static u64 xs(u64 *r)
{
	*r ^= *r << 13;
	*r ^= *r >> 7;
	*r ^= *r << 17;
	return *r;
}

static void *owner(void *arg)
{
	u64 t = (u64)(uintptr_t)arg, r = seed * 7919 + t + 1, i, base = 0, s;

	pthread_barrier_wait(&start);
	for (i = 0; i < n_ops; i++) {
		if (!(i % 65536))
			base = xs(&r) % n_slots & ~63ULL;
		/* one of this thread's slots in the word (64 slots) */
		s = (base + xs(&r) % 64) % n_slots;
		s += (t + n_threads - s % n_threads) % n_threads;
		if (s >= n_slots)
			continue;
		if (pmc_slot_clean(idx.slot[s]))
			pmc_index_set_flags(&idx, (u32)s, PMC_SF_DIRTY, 0);
		else
			pmc_index_set_flags(&idx, (u32)s, 0, PMC_SF_DIRTY);
	}
	return NULL;
}

static void *finder(void *arg)
{
	u64 r = seed * 104729 + 3;
	u32 s;

	pthread_barrier_wait(&start);
	while (!stop_finder) {
		s = pmc_index_next_clean(&idx, (u32)(xs(&r) % n_slots));
		/* walk on a little, as the clock does */
		for (int k = 0; k < 8 && s != PMC_NO_SLOT && s + 1 < n_slots; k++)
			s = pmc_index_next_clean(&idx, s + 1);
		finds++;
	}
	return NULL;
}

/* ---- --select ---------------------------------------------------- */

static int *handed;	/* 1: the slot is writeback's (dirty) */
static u64 selected;

static void *sel_owner(void *arg)
{
	u64 t = (u64)(uintptr_t)arg, r = seed * 7919 + t + 1, i = 0, base = 0;
	u64 s, tries = 0;

	pthread_barrier_wait(&start);
	/* @n_ops slots made dirty; bounded: lost ones are never handed back */
	while (i < n_ops && tries < 1000 * n_ops) {
		if (!(tries++ % 4096))
			base = xs(&r) % n_slots & ~63ULL;
		s = (base + xs(&r) % 64) % n_slots;
		s += (t + n_threads - s % n_threads) % n_threads;
		if (s >= n_slots || __atomic_load_n(&handed[s], __ATOMIC_ACQUIRE))
			continue;
		pmc_index_set_flags(&idx, (u32)s, PMC_SF_DIRTY, 0);
		__atomic_store_n(&handed[s], 1, __ATOMIC_RELEASE);
		i++;
	}
	return NULL;
}

static bool st_look(void *ctx, u64 o, struct pmc_wb_cand *c)
{
	u32 s = pmc_index_lookup(&idx, o);

	if (s == PMC_NO_SLOT)
		return false;
	c->slot = s;
	c->v = READ_ONCE(idx.slot[s]);
	return true;
}

static bool st_claim(void *ctx, const struct pmc_wb_cand *c, unsigned int sel)
{
	if (!__atomic_load_n(&handed[c->slot], __ATOMIC_ACQUIRE) ||
	    READ_ONCE(idx.slot[c->slot]) != c->v)
		return false;
	pmc_index_set_flags(&idx, c->slot, PMC_SF_WB, 0);
	return true;
}

static const struct pmc_wb_ops st_ops = { .look = st_look, .claim = st_claim };

/* One pass, written back at once; how many. */
static unsigned int sel_pass(void)
{
	struct pmc_wb_cand out[64];
	unsigned int n, i, whole = 0;

	n = pmc_index_wb_select(&idx, out, 64, 64, PMC_SEL_PARTIAL, &st_ops,
				NULL, &whole);
	for (i = 0; i < n; i++) {
		pmc_index_set_flags(&idx, out[i].slot, 0,
				    PMC_SF_WB | PMC_SF_DIRTY);
		__atomic_store_n(&handed[out[i].slot], 0, __ATOMIC_RELEASE);
	}
	selected += n;
	return n;
}

static void *selector(void *arg)
{
	pthread_barrier_wait(&start);
	while (!stop_finder)
		sel_pass();
	return NULL;
}

static int run_select(void)
{
	pthread_t th[64], fth;
	u64 s, lost = 0, rounds;
	unsigned int t;

	handed = calloc(n_slots, sizeof(*handed));
	if (!handed || pmc_index_init(&idx, n_slots) ||
	    pmc_index_wb_alloc(&idx, 3 * n_slots))
		return 2;
	for (s = 0; s < n_slots; s++)
		pmc_index_insert(&idx, (u32)s, 3 * s, 0xff, 0);
	pmc_index_wb_build(&idx, 1, 0xff);
	pthread_barrier_init(&start, NULL, n_threads + 1);
	pthread_create(&fth, NULL, selector, NULL);
	for (t = 0; t < n_threads; t++)
		pthread_create(&th[t], NULL, sel_owner, (void *)(uintptr_t)t);
	for (t = 0; t < n_threads; t++)
		pthread_join(th[t], NULL);
	stop_finder = 1;
	pthread_join(fth, NULL);
	/* a flush: everything must come out */
	for (rounds = 0; rounds < 4 * n_slots + 10 && sel_pass(); rounds++)
		;
	for (s = 0; s < n_slots; s++)
		lost += pmc_wb_candidate(idx.slot[s]);
	printf("stress-select slots=%llu chunk=%llu threads=%u ops=%llu "
	       "selected=%llu lost_candidates=%llu\n",
	       (unsigned long long)n_slots, (unsigned long long)idx.wb.chunk,
	       n_threads, (unsigned long long)n_ops,
	       (unsigned long long)selected, (unsigned long long)lost);
	return lost ? 1 : 0;
}

static bool bit(u32 l, u64 b)
{
	return (idx.clean.w[idx.clean.off[l] + b / BITS_PER_LONG] >>
		(b % BITS_PER_LONG)) & 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "ops", required_argument, NULL, 'o' },
		{ "slots", required_argument, NULL, 'n' },
		{ "seed", required_argument, NULL, 's' },
		{ "select", no_argument, NULL, 'S' },
		{ }
	};
	u64 lost = 0, l0 = 0, stale = 0, s, k, words;
	pthread_t th[64], fth;
	unsigned int t;
	bool sel = false;
	u32 l;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': n_threads = atoi(optarg); break;
		case 'o': n_ops = strtoull(optarg, NULL, 0); break;
		case 'n': n_slots = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		case 'S': sel = true; break;
		default: return 2;
		}
	}
	if (sel)
		return n_threads < 1 || n_threads > 64 ? 2 : run_select();
	if (n_threads < 1 || n_threads > 64 || pmc_index_init(&idx, n_slots))
		return 2;
	for (s = 0; s < n_slots; s++)
		pmc_index_insert(&idx, (u32)s, s, 0xff,
				 PMC_SF_DIRTY);
	pthread_barrier_init(&start, NULL, n_threads + 1);
	pthread_create(&fth, NULL, finder, NULL);
	for (t = 0; t < n_threads; t++)
		pthread_create(&th[t], NULL, owner, (void *)(uintptr_t)t);
	for (t = 0; t < n_threads; t++)
		pthread_join(th[t], NULL);
	stop_finder = 1;
	pthread_join(fth, NULL);

	for (s = 0; s < n_slots; s++)
		l0 += bit(0, s) != pmc_slot_clean(idx.slot[s]);
	for (l = 0; l + 1 < idx.clean.levels; l++) {
		words = (idx.clean.bits[l] + BITS_PER_LONG - 1) / BITS_PER_LONG;
		for (k = 0; k < words; k++) {
			bool full = idx.clean.w[idx.clean.off[l] + k] != 0;

			lost += full && !bit(l + 1, k);
			stale += !full && bit(l + 1, k);
		}
	}
	printf("stress slots=%llu levels=%u threads=%u ops=%llu finds=%llu "
	       "lost_hints=%llu level0_errors=%llu stale_hints=%llu\n",
	       (unsigned long long)n_slots, idx.clean.levels, n_threads,
	       (unsigned long long)n_ops, (unsigned long long)finds,
	       (unsigned long long)lost, (unsigned long long)l0,
	       (unsigned long long)stale);
	return lost || l0 ? 1 : 0;
}
