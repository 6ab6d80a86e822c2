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
		{ }
	};
	u64 lost = 0, l0 = 0, stale = 0, s, k, words;
	pthread_t th[64], fth;
	unsigned int t;
	u32 l;
	int c;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': n_threads = atoi(optarg); break;
		case 'o': n_ops = strtoull(optarg, NULL, 0); break;
		case 'n': n_slots = strtoull(optarg, NULL, 0); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: return 2;
		}
	}
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
