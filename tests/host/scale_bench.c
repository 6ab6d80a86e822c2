// SPDX-License-Identifier: GPL-2.0
/*
 * The write path of the module's shared code on N threads over DRAM
 * (issue 33, "Many queues"): pmc_write() (pmc_write.c, pmc_meta.c,
 * pmc_index.c, pmc_io.c: the units the crash model links) commits 4 KiB
 * writes of random blocks, new blocks and overwrites, from each thread,
 * and the program prints the ops/s of every thread count asked for.
 *
 * pmem is plain memory here (a store is durable at once, a fence is a
 * compiler barrier): what is measured is the CPU path and what the
 * threads share.  The pmc_env_*() calls are this file's, made like the
 * module's io.c: a rw semaphore per index stripe (here a pthread rwlock),
 * free slots taken in batches of PMC_FREE_BATCH from the shared free list
 * (a spinlock) into the thread's own cache, freed slots back to the
 * shared list, the dirty counts atomics every thread writes (as the
 * module's n_dirty and epoch_dirty[]).  With --shared, as io.c was
 * before issue 33: every allocation takes the shared list's spinlock.
 * The cache never fills (the blocks written are a quarter of its slots at
 * most): no eviction, no writeback.
 *
 * usage: scale_bench [--ops N] [--blocks N] [--threads 1,2,...] [--repeat N]
 *                    [--shared]
 * Prints one JSON object: {"threads": {"1": ops/s, ...}, ...} with the
 * best of the repeats of each thread count.
 */
#include <pthread.h>
#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pmc_meta.h"
#include "pmc_write.h"

#define NSTRIPES	256	/* PMC_NR_STRIPES */
#define PMC_FREE_BATCH	16	/* as io.c */
#define MAXT		16

/* A line each, as the module's ____cacheline_aligned_in_smp stripes. */
struct stripe {
	alignas(64) pthread_rwlock_t lock;
};

struct free_list {
	alignas(64) pthread_spinlock_t lock;
};

struct pmemcache {
	struct pmc_meta m;
	struct pmc_index idx;
	struct stripe stripe[NSTRIPES];
	struct free_list free;
};

static struct pmemcache E;
static bool shared;
static u64 n_dirty, epoch_dirty[4];	/* as the module's atomics */

/* A thread's own: its cached free slots, its share of the work. */
struct tcache {
	alignas(64) u32 n;
	u32 slot[PMC_FREE_BATCH];
	u64 ops, blocks, seed;
	u8 *buf;
};

static __thread struct tcache *self;

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	memcpy(dst, src, len);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
	__asm__ __volatile__("" ::: "memory");
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

u64 pmc_now_seconds(void)
{
	return 0;
}

void pmc_log(int level, const char *fmt, ...)
{
}

static pthread_rwlock_t *stripe_of(u64 oblock)
{
	return &E.stripe[pmc_index_bucket(&E.idx, oblock) & (NSTRIPES - 1)].lock;
}

static void never(const char *what)
{
	fprintf(stderr, "scale_bench: %s: not in this benchmark\n", what);
	abort();
}

/* ---- pmc_env_*() ------------------------------------------------------ */

void pmc_env_stripe_lock(struct pmemcache *pc, u64 oblock)
{
	pthread_rwlock_wrlock(stripe_of(oblock));
}

void pmc_env_stripe_unlock(struct pmemcache *pc, u64 oblock)
{
	pthread_rwlock_unlock(stripe_of(oblock));
}

void pmc_env_stripe_lock_read(struct pmemcache *pc, u64 oblock)
{
	pthread_rwlock_rdlock(stripe_of(oblock));
}

void pmc_env_stripe_unlock_read(struct pmemcache *pc, u64 oblock)
{
	pthread_rwlock_unlock(stripe_of(oblock));
}

bool pmc_env_stripe_trylock(struct pmemcache *pc, u64 oblock)
{
	return !pthread_rwlock_trywrlock(stripe_of(oblock));
}

bool pmc_env_stripe_around(struct pmemcache *pc, u64 oblock)
{
	return false;
}

int pmc_env_origin_flush(struct pmemcache *pc)
{
	never("origin flush");
	return 0;
}

void pmc_env_dirty_dec(struct pmemcache *pc, u64 v)
{
	__atomic_sub_fetch(&epoch_dirty[pmc_slot_epoch(v)], 1, __ATOMIC_SEQ_CST);
	__atomic_sub_fetch(&n_dirty, 1, __ATOMIC_SEQ_CST);
}

void pmc_env_dirty_inc(struct pmemcache *pc, unsigned int epoch)
{
	__atomic_add_fetch(&epoch_dirty[epoch], 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&n_dirty, 1, __ATOMIC_SEQ_CST);
}

void pmc_env_wb_quarantined(struct pmemcache *pc, u32 slot, u64 v)
{
	never("writeback");
}

void pmc_env_free_slots(struct pmemcache *pc, const u32 *slots,
			unsigned int n)
{
	unsigned int i;

	pthread_spin_lock(&E.free.lock);
	for (i = 0; i < n; i++)
		pmc_index_push_free(&E.idx, slots[i]);
	pthread_spin_unlock(&E.free.lock);
}

int pmc_env_pmem_enter(struct pmemcache *pc)
{
	return 0;
}

void pmc_env_pmem_exit(struct pmemcache *pc, int id)
{
}

bool pmc_env_wb_poisoned(struct pmemcache *pc, u32 slot)
{
	return false;
}

bool pmc_env_wb_submit(struct pmemcache *pc, const struct pmc_wb_cand *c,
		       unsigned int n)
{
	never("writeback");
	return false;
}

void pmc_env_around_inc(struct pmemcache *pc, u64 oblock)
{
	never("around");
}

void pmc_env_around_dec(struct pmemcache *pc, u64 oblock)
{
	never("around");
}

bool pmc_env_shutting_down(struct pmemcache *pc)
{
	return false;
}

bool pmc_env_through_busy(struct pmemcache *pc, u64 oblock)
{
	return false;
}

bool pmc_env_may_have_clean(struct pmemcache *pc)
{
	return false;
}

void pmc_env_evict_lock(struct pmemcache *pc)
{
}

void pmc_env_evict_unlock(struct pmemcache *pc)
{
}

void pmc_env_resched(struct pmemcache *pc)
{
}

void pmc_env_through_wait(struct pmemcache *pc, u64 oblock)
{
	never("write through");
}

/* io.c's pmc_take_slot(): the thread's cache, refilled by a batch. */
u32 pmc_env_alloc_slot(struct pmemcache *pc, bool wait)
{
	struct tcache *c = self;
	u32 s;

	if (shared) {
		pthread_spin_lock(&E.free.lock);
		s = pmc_index_pop_free(&E.idx);
		pthread_spin_unlock(&E.free.lock);
		if (s == PMC_NO_SLOT)
			never("a full cache");
		return s;
	}
	if (c->n)
		return c->slot[--c->n];
	pthread_spin_lock(&E.free.lock);
	while (c->n < PMC_FREE_BATCH &&
	       (s = pmc_index_pop_free(&E.idx)) != PMC_NO_SLOT)
		c->slot[c->n++] = s;
	pthread_spin_unlock(&E.free.lock);
	if (!c->n)
		never("a full cache");
	return c->slot[--c->n];
}

unsigned int pmc_env_epoch(struct pmemcache *pc)
{
	return 0;
}

void pmc_env_retire_slot(struct pmemcache *pc, u32 slot)
{
	never("media error");
}

void pmc_env_media_error(struct pmemcache *pc)
{
	never("media error");
}

unsigned long pmc_env_cleaner_until(struct pmemcache *pc)
{
	never("cleaner");
	return 0;
}

int pmc_env_wb_token(struct pmemcache *pc)
{
	return 0;
}

bool pmc_env_wait_writeback(struct pmemcache *pc, int token,
			    unsigned long until)
{
	never("cleaner");
	return false;
}

void pmc_env_wait_room(struct pmemcache *pc, int token)
{
	never("a full cache");
}

struct pmc_thru *pmc_env_through_alloc(struct pmemcache *pc,
				       struct pmc_write *w)
{
	never("write through");
	return NULL;
}

void pmc_env_through_free(struct pmemcache *pc, struct pmc_thru *t)
{
}

int pmc_env_through_fill(struct pmemcache *pc, struct pmc_thru *t,
			 struct pmc_write *w)
{
	return 0;
}

void pmc_env_through_mark(struct pmemcache *pc, struct pmc_thru *t, bool busy)
{
}

void pmc_env_through_start(struct pmemcache *pc, struct pmc_thru *t)
{
}

int pmc_env_through_write(struct pmemcache *pc, struct pmc_thru *t)
{
	return 0;
}

/* ---- the benchmark ---------------------------------------------------- */

static int fill(void *ctx, u8 *block, u32 *sector_crc)
{
	pmc_pmem_write(block, ctx, E.m.block_size, PMC_P_DATA);
	return 0;
}

static u64 rnd(u64 *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *worker(void *arg)
{
	struct tcache *c = arg;
	u64 i;

	self = c;
	for (i = 0; i < c->ops; i++) {
		struct pmc_write w = {
			.oblock = rnd(&c->seed) % c->blocks,
			.mask = E.m.full_mask,
			.fill = fill,
			.ctx = c->buf,
		};

		if (pmc_write(&E, &E.m, &E.idx, &w) != PMC_W_CACHED)
			never("a write that is not cached");
	}
	return NULL;
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* ops/s of @nt threads, each writing @ops blocks of @blocks at random. */
static double run(unsigned int nt, u64 ops, u64 blocks, u8 *pmem,
		  u64 pmem_bytes)
{
	static const struct pmc_origin_id oid = { .sectors = 1ULL << 40 };
	pthread_t th[MAXT];
	struct tcache *c;
	unsigned int i;
	double t0, t;

	pmc_index_destroy(&E.idx);
	if (pmc_meta_format(&E.m, pmem, pmem_bytes, 4096, &oid) ||
	    pmc_index_init(&E.idx, E.m.n_blocks) ||
	    pmc_index_wb_alloc(&E.idx, oid.sectors / 8))
		never("format");
	for (i = E.m.n_blocks; i-- > 0;)
		pmc_index_push_free(&E.idx, i);
	pmc_index_wb_build(&E.idx, 1, E.m.full_mask);
	if (blocks * 4 > E.m.n_blocks)
		never("a working set of more than a quarter of the cache");
	c = aligned_alloc(64, sizeof(*c) * nt);
	memset(c, 0, sizeof(*c) * nt);
	for (i = 0; i < nt; i++) {
		c[i].ops = ops;
		c[i].blocks = blocks;
		c[i].seed = 0x9e3779b97f4a7c15ULL * (i + 1);
		c[i].buf = aligned_alloc(4096, 4096);
		memset(c[i].buf, i + 1, 4096);
	}
	t0 = now();
	for (i = 0; i < nt; i++)
		pthread_create(&th[i], NULL, worker, &c[i]);
	for (i = 0; i < nt; i++)
		pthread_join(th[i], NULL);
	t = now() - t0;
	for (i = 0; i < nt; i++)
		free(c[i].buf);
	free(c);
	return ops * nt / t;
}

int main(int argc, char **argv)
{
	u64 ops = 200000, blocks = 1024, pmem_bytes = 64ULL << 20;
	unsigned int threads[MAXT] = { 1, 2 }, nthreads = 2, repeat = 5, i, r;
	char *tl = NULL, *tok;
	u8 *pmem;

	for (i = 1; i < (unsigned int)argc; i += 2) {
		if (!strcmp(argv[i], "--shared")) {
			shared = true;
			i--;
		} else if (i + 1 == (unsigned int)argc) {
			break;
		} else if (!strcmp(argv[i], "--ops")) {
			ops = strtoull(argv[i + 1], NULL, 0);
		} else if (!strcmp(argv[i], "--blocks")) {
			blocks = strtoull(argv[i + 1], NULL, 0);
		} else if (!strcmp(argv[i], "--repeat")) {
			repeat = atoi(argv[i + 1]);
		} else if (!strcmp(argv[i], "--threads")) {
			tl = argv[i + 1];
		} else {
			break;
		}
	}
	if (i < (unsigned int)argc) {
		fputs("usage: scale_bench [--ops N] [--blocks N] [--threads 1,2]\n"
		      "                   [--repeat N] [--shared]\n", stderr);
		return 2;
	}
	if (tl)
		for (nthreads = 0, tok = strtok(tl, ","); tok && nthreads < MAXT;
		     tok = strtok(NULL, ","))
			threads[nthreads++] = atoi(tok);
	pmem = aligned_alloc(4096, pmem_bytes);
	memset(pmem, 0, pmem_bytes);
	for (i = 0; i < NSTRIPES; i++)
		pthread_rwlock_init(&E.stripe[i].lock, NULL);
	pthread_spin_init(&E.free.lock, PTHREAD_PROCESS_PRIVATE);
	printf("{\"alloc\": \"%s\", ", shared ? "shared" : "per-thread");
	printf("\"ops_per_thread\": %llu, \"blocks\": %llu, ",
	       (unsigned long long)ops, (unsigned long long)blocks);
	printf("\"block_size\": 4096, \"repeat\": %u, \"threads\": {", repeat);
	for (i = 0; i < nthreads; i++) {
		double best = 0, x;

		for (r = 0; r < repeat; r++) {
			x = run(threads[i], ops, blocks, pmem, pmem_bytes);
			if (x > best)
				best = x;
		}
		printf("%s\"%u\": %.0f", i ? ", " : "", threads[i], best);
		fflush(stdout);
	}
	printf("}}\n");
	return 0;
}
