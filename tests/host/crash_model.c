// SPDX-License-Identifier: GPL-2.0
/*
 * Host crash-consistency model of the dm-pmemcache commit protocol.
 *
 * The module's shared metadata code (pmc_meta.c, pmc_index.c), its
 * writeback policy (pmc_wb.c: look-up and claim, the claimed blocks sent
 * as runs of whole blocks or alone, claims given back when a write cannot
 * start, and the completion: one origin flush before CLEAN, a failed
 * write or flush left dirty, CLEAN or stale free; the selection is
 * pmc_index_wb_select()), its I/O policy (pmc_io.c: st->around, eviction
 * and its clock loop, discard, what a read takes from the cache) and its
 * write policy (pmc_write.c: new block, overwrite, write-around,
 * write-through T0-T2, the full-cache wait) are compiled here against a
 * model of pmem and of the origin, and run by several simulated CPUs:
 *
 *   - pmem: every store stays volatile until it has been flushed AND a
 *     later fence of the SAME CPU has completed.  Each CPU has its own
 *     pending stores; a fence drains only the caller's.  A lock hand-off
 *     between CPUs orders memory but persists nothing, and a flushed
 *     (non-temporal) store that its CPU has not fenced may still land
 *     after a newer store of another CPU to the same word.
 *   - origin: a disk with a volatile write cache.  A completed write is
 *     durable only after a later flush; at a crash any subset of the
 *     unflushed and in-flight writes may have landed.  Writeback's writes
 *     complete late and out of order, and some fail (some of their
 *     sectors landing); some flushes fail (part of what they covered
 *     durable).  Our own origin writes (write-arounds and the T1 of a
 *     write through the cache, with FUA, no lock held) complete late too,
 *     in any order, and fail now and then (some sectors landing).
 *   - CPUs: coroutines (ucontext) switched by a deterministic, seeded
 *     scheduler at every store, fence and lock operation.  Priorities are
 *     re-drawn at random points (PCT style), so a CPU can stall for a long
 *     stretch in the middle of a protocol step while the others run.
 *     Writers (>= 2) write, overwrite, discard, flush, read and evict
 *     under cache pressure, and write as in cleaner mode; a full cache
 *     waits a few slot frees (full_wait), sometimes none, then writes
 *     around or through the cache; a writeback CPU selects and claims
 *     dirty blocks and sends them (some sends find no memory); an I/O
 *     CPU completes origin writes in any order and hands them to the
 *     completion, which flushes the origin and marks blocks CLEAN.
 *     Readers copy a block's cached sectors under the stripe lock and
 *     read the rest from the origin later, with no lock held and nothing
 *     pinned, as io.c does.  Every decision and its order are the
 *     module's (pmc_write(), pmc_write_through_done(),
 *     pmc_io_evict_clean(), pmc_io_read(), pmc_wb_claim(), pmc_wb_send(),
 *     pmc_wb_complete(), ...), reached through their pmc_env_*()
 *     functions (below): the model has the locks, the waits, the origin,
 *     the bios' data and the oracle, which notes each write and discard
 *     where the module orders it.  What is left of writeback.c here is
 *     its plumbing: a work item that calls selection and pmc_wb_send(),
 *     and one that hands the completed writes to pmc_wb_complete().
 *
 * At every fence of any CPU and at sampled stores, crash images are built
 * from the durable state plus a choice of the pending stores of all CPUs
 * (none; all; per 8-byte word; per 64-byte line; per CPU a prefix of its
 * program order; per CPU all or nothing) and a choice of the origin's
 * unflushed writes.  Each image is recovered with the module's recovery
 * code and checked:
 *
 *   - open and recovery never fail;
 *   - every sector reads back its last acknowledged write or a write
 *     ordered after it (in flight at the crash), or after a discard some
 *     value once written to it; anything else is a lost write or garbage;
 *   - the recovered index is consistent (free + live == blocks);
 *   - a CLEAN block's data is the origin's (invariant 5);
 *   - sometimes a crash during recovery, then recovery again.
 *
 * Without a crash: a read's sectors copied under the stripe lock are the
 * newest write; one read from the origin after the lock was dropped is
 * what a read could return when it began, the newest write, or one
 * ordered since; a clean block that may be evicted is on the origin,
 * durably; st->around never drops below zero (not with --data-only).
 *
 * Now and then one crash image becomes the new state ("restart"): it is
 * recovered on a loader CPU that never fences again (so recovery's own
 * fence is what persists its stores), and all CPUs start over on it.
 * Interrupted formats (from a blank, an older cache or foreign data) are
 * checked as well, including the layout a finished format leaves.  Every
 * run starts with directed scenarios: scripted interleavings and crash
 * images for hazards too rare to leave to the random search.
 *
 * --mirror runs the same on a mirrored cache: both halves in one model of
 * pmem (every store of the protocol to both, pending per CPU and word),
 * the module's start on every load (S1, the decision, the record pass of
 * pmc_resync.c, R1..R5), the online copy as a CPU of its own beside the
 * others, restarts that leave a half out or replace it by a blank one,
 * and each crash image started with both halves or either one lost: a
 * half taken must read every acknowledged write, and so must the half a
 * copy made, alone, once the copy ended.
 *
 * --break=STEP removes one fence or flush of the protocol on purpose; the
 * checker must then report violations.  tests/host/mutants.py removes
 * each fence and flush of the real shared code instead, and turns each
 * decision of the policy units wrong (with --data-only).
 *
 * Output (last line): crash_states=N format_states=F bad_states=B violations=V
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <time.h>
#include <ucontext.h>
#include <setjmp.h>

#include "pmc_meta.h"
#include "pmc_write.h"
#include "pmc_resync.h"

#ifndef container_of
#define container_of(p, T, m)	((T *)((char *)(p) - offsetof(T, m)))
#endif

/* A store that is not flushed: the mutants of tests/host/mutants.py. */
void pmc_model_store_noflush(void *dst, const void *src, size_t len,
			     enum pmc_ptag tag);
/* ... and pmc_meta_store() so, to every half that takes stores. */
void pmc_model_meta_store_noflush(const struct pmc_meta *m, void *dst,
				  const void *src, size_t len,
				  enum pmc_ptag tag);
#define pmc_meta_store_noflush(m, dst, src, len, tag) \
	pmc_model_meta_store_noflush(m, dst, src, len, tag)

/* ------------------------------------------------------------------ */
/* random numbers                                                     */

static u64 rng_state = 88172645463325252ULL;

static u64 rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

static u32 rndn(u32 n)
{
	return n ? (u32)(rnd() % n) : 0;
}

/* ------------------------------------------------------------------ */
/* options and counters                                               */

enum brk {
	BRK_NONE,
	BRK_DATA_FENCE,		/* skip W2 */
	BRK_RECORD_FENCE,	/* skip W4 */
	BRK_FREE_FENCE,		/* skip W6, D1 and the eviction fence */
	BRK_DATA_FLUSH,		/* data stores are never flushed */
	BRK_RECORD_FLUSH,	/* record stores are never flushed */
	BRK_FORMAT_ORDER,	/* skip the fence before the format commit */
};

static enum brk brk;
static int verbose;

/* -vv: what each CPU does */
#define trace(fmt, ...)							\
	do {								\
		if (verbose > 1)					\
			fprintf(stderr, "[%d] " fmt "\n", cur_cpu,	\
				##__VA_ARGS__);				\
	} while (0)
static int stop_at_first;
/*
 * --mirror: the cache on two halves, one model of pmem holding both
 * (half 1 from byte pmem_size on), every store of the protocol to both
 * (pmc_meta_store()), an online copy (pmc_resync.c) whenever a start
 * finds the halves apart, and each crash image started with both halves
 * or with either one lost.
 */
static int mirror;
/*
 * --mirror: the halves the next load finds (bit i: half i), with the
 * degraded override when one is missing or was replaced; and the half
 * that may miss acknowledged writes (-1: none): one left out of a start,
 * replaced, or being copied to, until a copy to it ends.  No start, of
 * the engine or of a crash image, takes that half alone.
 */
static u32 load_present = 3;
static u32 check_present;	/* a scenario's: the halves its checks start with */
static int world_pair;		/* a scenario's: world_reset() makes a pair */
static bool load_override;
static int stale_half = -1;
static u64 n_ran_alone;
static size_t pmem_size;	/* the cache's pmem; --mirror: one half */
static size_t img_size;		/* a crash image: pmem_size, or both halves */
/*
 * --data-only (mutant runs): only what a crash or a read does to the data
 * is a violation; a bookkeeping check (st->around below zero) is not, so
 * that a mutant counts as caught only by a lost, stale or garbage write.
 */
static int data_only;
/*
 * --data-crc: every cache is formatted with PMC_FEATURE_DATA_CRC, and after
 * every recovery each live record's data must match its data_crc (a good
 * block that reads as corrupt is as lost as a stale one).
 */
static u64 features;
static u64 n_crc_checked;
static u32 images_per_snapshot = 3;
static u32 snapshot_store_pct = 8;
static u32 media_err_permille = 10;	/* transient pmem read errors */
static u32 restart_permille = 8;	/* per snapshot: continue from a crash */
static u32 n_writers = 2;
static u32 format_rounds;	/* 0: ops / 2 + 50, at most 5000 */

static u64 n_states, n_violations, n_format_states, n_nested, n_restarts;
static u64 n_snapshots, n_bad_states, n_media_errors, n_switches;
static u64 n_wb_done, n_evicted, n_acked_writes, n_failed_writes;
static u64 n_around, n_through, n_full, n_origin_failed;
static u64 n_wb_merged, n_wb_nomem, n_wb_unsent, n_wb_failed, n_partial_reads;
static int report_left = 5;

/* ------------------------------------------------------------------ */
/* simulated CPUs                                                     */

#define MAX_CPUS	8
#define CPU_LOADER	MAX_CPUS	/* format and recovery, outside the scheduler */
#define STACK_SIZE	(256 * 1024)

enum yield_why { Y_STORE, Y_FENCE, Y_LOCK, Y_UNLOCK, Y_OP, Y_IDLE, Y_BLOCK, Y_DONE };

typedef int (*pred_fn)(void *arg);

struct cpu {
	ucontext_t ctx;
	char *stack;
	void (*task)(void);
	const char *name;
	u32 prio;
	pred_fn wait;		/* blocked until wait(wait_arg) */
	void *wait_arg;
	int finished;
};

static struct cpu cpus[MAX_CPUS];
static u32 ncpu;
static ucontext_t main_ctx;
static int cur_cpu = CPU_LOADER;
static enum yield_why yield_why;
static int stop_all;

/* --break and --stop-at-first: nothing more to learn after a violation. */
static int done_after_violation(void)
{
	return n_violations && (brk != BRK_NONE || stop_at_first);
}

/* Give the scheduler (main context) a chance to switch CPUs or crash. */
static int scripted;		/* a directed scenario: no scheduler, no errors */

static void yield(enum yield_why why)
{
	if (cur_cpu == CPU_LOADER || scripted)
		return;
	yield_why = why;
	swapcontext(&cpus[cur_cpu].ctx, &main_ctx);
}

static void wait_until(pred_fn fn, void *arg)
{
	/* A scenario runs one CPU at a time: nothing else can make @fn true. */
	if (scripted && !fn(arg)) {
		fprintf(stderr, "scenario blocked for ever (after %llu violations)\n",
			(unsigned long long)n_violations);
		exit(n_violations ? 1 : 2);
	}
	while (!fn(arg)) {
		cpus[cur_cpu].wait = fn;
		cpus[cur_cpu].wait_arg = arg;
		yield(Y_BLOCK);
	}
	cpus[cur_cpu].wait = NULL;
}

/* A lock (rw-semaphore, mutex or spinlock): orders, never persists. */
struct mlock {
	int owner;		/* writer, or -1 */
	int readers;
};

static int lock_free_w(void *a)
{
	struct mlock *l = a;

	return l->owner < 0 && !l->readers;
}

static int lock_free_r(void *a)
{
	struct mlock *l = a;

	return l->owner < 0;
}

static void lock_w(struct mlock *l)
{
	yield(Y_LOCK);
	wait_until(lock_free_w, l);
	l->owner = cur_cpu;
}

static int trylock_w(struct mlock *l)
{
	yield(Y_LOCK);
	if (!lock_free_w(l))
		return 0;
	l->owner = cur_cpu;
	return 1;
}

static void unlock_w(struct mlock *l)
{
	assert(l->owner == cur_cpu);
	l->owner = -1;
	yield(Y_UNLOCK);
}

/*
 * A scenario's probe of a step of another CPU, run in the middle of this
 * one's: a read lock it would wait for ends the probe (resync_probe_jmp).
 */
static int resync_probe;
static jmp_buf resync_probe_jmp;

static void lock_r(struct mlock *l)
{
	if (resync_probe && !lock_free_r(l))
		longjmp(resync_probe_jmp, 1);
	yield(Y_LOCK);
	wait_until(lock_free_r, l);
	l->readers++;
}

static void unlock_r(struct mlock *l)
{
	assert(l->readers > 0);
	l->readers--;
	yield(Y_UNLOCK);
}

/* ------------------------------------------------------------------ */
/* pmem model                                                         */

struct pend {
	u64 off;		/* byte offset, 8-aligned */
	u64 val;
	u64 seq;		/* global store order */
	u8 cpu;
	u8 flushed;
};

struct pmodel {
	u8 *vol;		/* what the CPUs see */
	u8 *dur;		/* what survives power loss for sure */
	u64 *dver;		/* per word: seq of the durable store */
	size_t size;
	struct pend *pend;	/* pending stores of all CPUs, in seq order */
	size_t npend, cap;
	u64 seq;
	/* nested-crash capture (crash during recovery) */
	int capture_countdown;	/* capture at the Nth fence from now */
	int captured;
	u8 *cap_dur;
	struct pend *cap_pend;
	size_t cap_npend, cap_cap;
};

static struct pmodel *PM;	/* the model the shim talks to */

static void pm_init(struct pmodel *p, size_t size)
{
	memset(p, 0, sizeof(*p));
	p->size = size;
	p->vol = calloc(1, size);
	p->dur = calloc(1, size);
	p->dver = calloc(size / 8, sizeof(u64));
	p->cap_dur = malloc(size);
	p->cap = 1024;
	p->pend = malloc(p->cap * sizeof(*p->pend));
	p->cap_cap = 1024;
	p->cap_pend = malloc(p->cap_cap * sizeof(*p->pend));
	assert(p->vol && p->dur && p->dver && p->pend && p->cap_dur &&
	       p->cap_pend);
}

/* Start over from @img: everything durable, nothing pending. */
static void pm_load(struct pmodel *p, const u8 *img)
{
	memcpy(p->vol, img, p->size);
	memcpy(p->dur, img, p->size);
	memset(p->dver, 0, p->size);
	p->npend = 0;
	p->seq = 1;
	p->capture_countdown = 0;
	p->captured = 0;
}

static void pm_add(struct pmodel *p, u64 off, u64 val, int flushed)
{
	struct pend *e;

	if (p->npend == p->cap) {
		p->cap *= 2;
		p->pend = realloc(p->pend, p->cap * sizeof(*p->pend));
		assert(p->pend);
	}
	e = &p->pend[p->npend++];
	e->off = off;
	e->val = val;
	e->seq = ++p->seq;
	e->cpu = (u8)cur_cpu;
	e->flushed = (u8)flushed;
}

/*
 * The caller's flushed stores become durable, in its program order, even
 * over a newer durable store of another CPU: a non-temporal store that no
 * fence of its own CPU has completed may land late.  A cached store
 * (not flushed) is coherent: a newer durable store of any CPU hides it.
 */
static void pm_fence(struct pmodel *p, int cpu)
{
	size_t i, j = 0;

	for (i = 0; i < p->npend; i++) {
		struct pend *e = &p->pend[i];

		if (e->cpu == cpu && e->flushed) {
			memcpy(p->dur + e->off, &e->val, 8);
			p->dver[e->off / 8] = e->seq;
		}
	}
	for (i = 0; i < p->npend; i++) {
		struct pend *e = &p->pend[i];

		if (e->cpu == cpu && e->flushed)
			continue;
		if (!e->flushed && e->seq < p->dver[e->off / 8])
			continue;
		p->pend[j++] = *e;
	}
	p->npend = j;
}

static void pm_capture(struct pmodel *p)
{
	memcpy(p->cap_dur, p->dur, p->size);
	if (p->npend > p->cap_cap) {
		p->cap_cap = p->npend;
		p->cap_pend = realloc(p->cap_pend, p->cap_cap * sizeof(*p->pend));
	}
	memcpy(p->cap_pend, p->pend, p->npend * sizeof(*p->pend));
	p->cap_npend = p->npend;
	p->captured = 1;
}

/* ------------------------------------------------------------------ */
/* the shim                                                           */

enum phase { PH_NONE, PH_WORKLOAD, PH_FORMAT };
static enum phase phase;
static struct pmodel *work_pm;	/* the model the workload runs on */

static void format_event(int is_fence);

static void on_event(int is_fence)
{
	if (phase == PH_FORMAT && PM == work_pm)
		format_event(is_fence);
	else if (phase == PH_WORKLOAD && PM == work_pm)
		yield(is_fence ? Y_FENCE : Y_STORE);
}

static int tag_flushed(enum pmc_ptag tag)
{
	if (brk == BRK_DATA_FLUSH && tag == PMC_P_DATA)
		return 0;
	if (brk == BRK_RECORD_FLUSH && tag == PMC_P_RECORD)
		return 0;
	return 1;
}

static void pm_store(void *dst, const void *src, size_t len, int flushed)
{
	u64 off = (u8 *)dst - PM->vol;
	size_t i;

	assert(off % 8 == 0 && len % 8 == 0 && off + len <= PM->size);
	memcpy(PM->vol + off, src, len);
	for (i = 0; i < len; i += 8) {
		u64 v;

		memcpy(&v, (const u8 *)src + i, 8);
		pm_add(PM, off + i, v, flushed);
	}
	on_event(0);
}

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	pm_store(dst, src, len, tag_flushed(tag));
}

void pmc_model_store_noflush(void *dst, const void *src, size_t len,
			     enum pmc_ptag tag)
{
	pm_store(dst, src, len, 0);
}

void pmc_model_meta_store_noflush(const struct pmc_meta *m, void *dst,
				  const void *src, size_t len,
				  enum pmc_ptag tag)
{
	u64 off;

	if (!m->half[1]) {
		pm_store(dst, src, len, 0);
		return;
	}
	off = (u8 *)dst - m->half[0];
	if (off >= m->pmem_bytes)
		off = (u8 *)dst - m->half[1];
	if (m->live & 1)
		pm_store(m->half[0] + off, src, len, 0);
	if (m->live & 2)
		pm_store(m->half[1] + off, src, len, 0);
}

static int tag_fence_skipped(enum pmc_ptag tag)
{
	switch (brk) {
	case BRK_DATA_FENCE:
		return tag == PMC_P_DATA;
	case BRK_RECORD_FENCE:
		return tag == PMC_P_RECORD;
	case BRK_FREE_FENCE:
		return tag == PMC_P_FREE;
	default:
		return 0;
	}
}

static int format_fence_count;
static void (*capture_hook)(void);	/* directed scenarios: crash here */

void pmc_pmem_fence(enum pmc_ptag tag)
{
	if (PM->capture_countdown > 0 && --PM->capture_countdown == 0) {
		pm_capture(PM);
		if (capture_hook && PM == work_pm)
			capture_hook();
	}
	on_event(1);		/* crash "at" the fence: before it completes */
	if (tag == PMC_P_FORMAT && brk == BRK_FORMAT_ORDER &&
	    ++format_fence_count == 2)
		return;
	if (tag_fence_skipped(tag))
		return;
	if (PM == work_pm && phase == PH_WORKLOAD)
		trace("fence %d", tag);
	pm_fence(PM, cur_cpu);
}

/*
 * Transient media errors on pmem reads of the running cache (not of the
 * recovered images), three times as many on data as on records: the
 * callers' error paths run too.
 */
int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	u64 off = (const u8 *)src - PM->vol;

	assert(off + len <= PM->size);
	if (off >= pmem_size)
		off -= pmem_size;	/* the mirror's half 1 */
	if (phase == PH_WORKLOAD && PM == work_pm && cur_cpu != CPU_LOADER &&
	    off >= PMC_RECORDS_OFFSET &&
	    rndn(1000) < (len == PMC_SECTOR_SIZE ? 3 : 1) * media_err_permille) {
		n_media_errors++;
		return -EIO;
	}
	memcpy(dst, src, len);
	return 0;
}

/* pmc_crc32c(), pmc_alloc_array(), pmc_free_array(): user/pmc_shim_user.c */

void pmc_random_bytes(void *p, size_t len)
{
	u8 *b = p;

	while (len--)
		*b++ = (u8)rnd();
}

u64 pmc_now_seconds(void)
{
	return 0;
}

void pmc_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (!verbose)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "pmc<%d>: ", level);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}


/* ------------------------------------------------------------------ */
/* geometry and sector contents                                       */

#define BS		4096U
#define SPB		(BS / PMC_SECTOR_SIZE)
#define WORDS		(PMC_SECTOR_SIZE / 8)
#define NSTRIPES	4
#define BAD_ID		0xffffffffU	/* garbage read by writeback */

static u32 n_oblocks = 40;	/* origin blocks */
static u32 n_slots_want = 16;	/* cache blocks */
static u32 nsec;
static struct pmc_origin_id oid = { .kind = PMC_ORIGIN_ID_MD };

static void fill_sector(u8 *dst, u32 id, u32 s)
{
	u64 w[WORDS];
	u32 i;

	for (i = 0; i < WORDS; i++)
		w[i] = ((u64)id << 32) | ((u64)s << 8) | i;
	memcpy(dst, w, sizeof(w));
}

/* Returns the id held by @p for sector @s, or -1 if garbage. */
static long decode_sector(const u8 *p, u32 s)
{
	u64 w[WORDS];
	u32 i, id;

	memcpy(w, p, sizeof(w));
	id = (u32)(w[0] >> 32);
	for (i = 0; i < WORDS; i++)
		if (w[i] != (((u64)id << 32) | ((u64)s << 8) | i))
			return -1;
	return id;
}

/* ------------------------------------------------------------------ */
/* origin: a disk with a volatile write cache                         */

struct owrite {
	u32 s, id;
};

static u32 *org_dur;		/* on the platter for sure */
static u32 *org_vis;		/* what a read returns */
static struct owrite *org_pend;	/* completed, not flushed yet */
static u32 n_org_pend, cap_org_pend;

/* Blocks of one origin write of writeback, at most (BIO_MAX_VECS). */
#define WB_RUN		4

/* An origin write: writeback's (pmc_wb.c), or one of ours with FUA. */
struct wbio {
	struct pmc_wb_write w;	/* w.blk = blk, w.n blocks */
	struct pmc_wb_block blk[WB_RUN];
	u32 ids[WB_RUN][SPB];	/* what each sector of each block carries */
	u64 due;		/* scheduler step from which it may complete */
	int *fua_done;		/* a write of ours (FUA): 1 done, -1 failed */
};

static struct wbio **dev_infl;	/* submitted to the origin */
static u32 n_dev_infl, cap_dev_infl;
static struct wbio **dev_done;	/* completed, waiting for the endio work */
static u32 n_dev_done, cap_dev_done;

static u64 sched_step;

/*
 * Origin latency, in scheduler steps: mostly short, sometimes very long,
 * so that later writes overtake earlier ones.
 */
static u64 origin_latency(void)
{
	return rndn(8) ? 1 + rndn(40) : 1 + rndn(1500);
}

static struct wbio *wbio_new(void)
{
	struct wbio *w = calloc(1, sizeof(*w));

	assert(w);
	w->w.blk = w->blk;
	return w;
}

static void wbio_push(struct wbio ***v, u32 *n, u32 *cap, struct wbio *w)
{
	if (*n == *cap) {
		*cap = *cap ? *cap * 2 : 16;
		*v = realloc(*v, *cap * sizeof(**v));
		assert(*v);
	}
	(*v)[(*n)++] = w;
}

/* The origin's cache takes the write (@ok), or some of its sectors. */
static void origin_write_completes(const struct wbio *w, int ok)
{
	u32 b, i;

	for (b = 0; b < w->w.n; b++) {
		for (i = 0; i < SPB; i++) {
			u32 s = (u32)w->blk[b].oblock * SPB + i;

			if (!(w->blk[b].mask & (1U << i)))
				continue;
			/* A failed write may still have written some sectors. */
			if (!ok && rndn(2))
				continue;
			org_vis[s] = w->ids[b][i];
			if (n_org_pend == cap_org_pend) {
				cap_org_pend = cap_org_pend ? cap_org_pend * 2 : 64;
				org_pend = realloc(org_pend,
						   cap_org_pend * sizeof(*org_pend));
			}
			org_pend[n_org_pend].s = s;
			org_pend[n_org_pend].id = w->ids[b][i];
			n_org_pend++;
		}
	}
}

/* REQ_PREFLUSH to the origin: the completed writes are durable. */
static int origin_flush(void)
{
	u32 i;

	if (!scripted && rndn(40) == 0) {
		/* A failed flush: some of it may have reached the platter. */
		for (i = 0; i < n_org_pend; i++)
			if (rndn(2))
				org_dur[org_pend[i].s] = org_pend[i].id;
		return -EIO;
	}
	for (i = 0; i < n_org_pend; i++)
		org_dur[org_pend[i].s] = org_pend[i].id;
	n_org_pend = 0;
	return 0;
}

/* What the platter may hold after a power cut now. */
static void origin_image(u32 *img)
{
	u32 i, k, b;

	memcpy(img, org_dur, nsec * sizeof(u32));
	for (i = 0; i < n_org_pend; i++)
		if (rndn(2))
			img[org_pend[i].s] = org_pend[i].id;
	for (k = 0; k < n_dev_infl; k++) {
		const struct wbio *w = dev_infl[k];

		if (rndn(3))
			continue;
		for (b = 0; b < w->w.n; b++)
			for (i = 0; i < SPB; i++)
				if ((w->blk[b].mask & (1U << i)) && rndn(2))
					img[w->blk[b].oblock * SPB + i] =
						w->ids[b][i];
	}
}

/* ------------------------------------------------------------------ */
/* oracle                                                             */

enum { EV_WRITE, EV_DISCARD };
/*
 * ST_MAYBE: a write to the origin that failed; some of its sectors may
 * have landed, so it stays a value its sectors may hold until a write
 * issued after it was acknowledged.
 */
enum { ST_INFLIGHT, ST_ACKED, ST_FAILED, ST_MAYBE };

/*
 * Per sector, the writes and discards in the order they took the block's
 * stripe lock (the order in which the cache applies them).  The first
 * entry is always acknowledged; older ones are dropped, but for writes
 * past the cache (write-around) still in flight when the acknowledged
 * one was issued: the two were concurrent, either may land last.
 */
struct ev {
	u32 id;
	u8 kind;
	u8 st;
	u8 past;	/* a write past the cache: lands when the origin says */
	u64 t_add, t_done;	/* ev_clock when issued, acknowledged */
};

struct evlist {
	struct ev *ev;
	u32 n, cap;
};

struct idset {
	u32 *ids;
	u64 *t;			/* ev_clock when each id was first ordered */
	u32 n, cap;
};

static struct evlist *evs;	/* per sector */
static struct idset *ever;	/* per sector: every value it ever held */
static u64 *disc_t;		/* per sector: ev_clock of its last discard */
static u32 next_id = 1;
static u64 ev_clock;
static u32 next_disc = 1;

static void ever_add(u32 s, u32 id)
{
	struct idset *h = &ever[s];
	u32 i;

	for (i = h->n; i-- > 0 && i + 8 >= h->n;)
		if (h->ids[i] == id)
			return;
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 8;
		h->ids = realloc(h->ids, h->cap * sizeof(u32));
		h->t = realloc(h->t, h->cap * sizeof(u64));
		assert(h->ids && h->t);
	}
	h->t[h->n] = ev_clock;
	h->ids[h->n++] = id;
}

/* A write that failed never held the sector. */
static void ever_del(u32 s, u32 id)
{
	struct idset *h = &ever[s];
	u32 i;

	for (i = h->n; i-- > 0;) {
		if (h->ids[i] == id) {
			h->n--;
			h->ids[i] = h->ids[h->n];
			h->t[i] = h->t[h->n];
			return;
		}
	}
}

static int ever_has(u32 s, u32 id)
{
	u32 i;

	for (i = 0; i < ever[s].n; i++)
		if (ever[s].ids[i] == id)
			return 1;
	return 0;
}

/* Was @id first ordered into sector @s after ev_clock @t0? */
static int ever_since(u32 s, u32 id, u64 t0)
{
	u32 i;

	for (i = 0; i < ever[s].n; i++)
		if (ever[s].ids[i] == id && ever[s].t[i] > t0)
			return 1;
	return 0;
}

static void ev_add(u32 s, u32 id, int kind)
{
	struct evlist *l = &evs[s];

	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 8;
		l->ev = realloc(l->ev, l->cap * sizeof(*l->ev));
	}
	l->ev[l->n].id = id;
	l->ev[l->n].kind = (u8)kind;
	l->ev[l->n].st = ST_INFLIGHT;
	l->ev[l->n].past = 0;
	l->ev[l->n].t_add = ++ev_clock;
	l->ev[l->n].t_done = 0;
	l->n++;
	if (kind == EV_DISCARD)
		disc_t[s] = ev_clock;
}

static void ev_set(u32 s, u32 id, int kind, int st)
{
	struct evlist *l = &evs[s];
	u32 i, j, k;

	for (i = l->n; i-- > 0;) {
		if (l->ev[i].id != id || l->ev[i].kind != kind)
			continue;
		l->ev[i].st = (u8)st;
		l->ev[i].t_done = ++ev_clock;
		if (st != ST_ACKED)
			return;
		for (j = i + 1; j < l->n; j++)
			if (l->ev[j].st == ST_ACKED)
				return;	/* a newer one was acknowledged first */
		/*
		 * Everything before an acknowledged entry is history, but a
		 * write past the cache that was in flight when this entry was
		 * issued: concurrent with it, it may land after it.
		 */
		for (j = 0, k = 0; j < l->n; j++)
			if (j >= i || (l->ev[j].past && l->ev[j].st != ST_FAILED &&
				       (l->ev[j].st == ST_INFLIGHT ||
					l->ev[j].t_done > l->ev[i].t_add)))
				l->ev[k++] = l->ev[j];
		l->n = k;
		return;
	}
	/* Not found: already history (an older entry acked after a newer). */
}

static void ev_reset(u32 s, u32 id)
{
	evs[s].n = 0;
	ev_add(s, id, EV_WRITE);
	evs[s].ev[0].st = ST_ACKED;
	ever_add(s, id);
}

/* May a crash leave @got in sector @s?  (The first entry is acked.) */
static int acceptable(u32 s, u32 got)
{
	struct evlist *l = &evs[s];
	u32 i, L = 0;
	int disc = 0;

	for (i = 0; i < l->n; i++)
		if (l->ev[i].st == ST_ACKED)
			L = i;
	for (i = 0; i < l->n; i++) {
		/* before L: only writes past the cache concurrent with it */
		if (l->ev[i].st == ST_FAILED || (i < L && !l->ev[i].past))
			continue;
		if (l->ev[i].kind == EV_WRITE && l->ev[i].id == got)
			return 1;
		if (l->ev[i].kind == EV_DISCARD)
			disc = 1;
	}
	return disc && ever_has(s, got);
}

/* What a read under the stripe lock must return, by the entries @l. */
static int acceptable_in(const struct evlist *l, u32 s, u32 got)
{
	const struct ev *e;
	u64 newer = 0;		/* latest issue of the entries after */
	int cached = 0;		/* one of them is a write into the cache */
	u32 i;

	for (i = l->n; i-- > 0;) {
		e = &l->ev[i];
		if (e->st == ST_FAILED)
			continue;
		if (e->kind == EV_DISCARD)
			return !cached && ever_has(s, got);
		/*
		 * A write-around not completed yet (the origin may not have
		 * it), or one that was still in flight when a newer write was
		 * issued: the origin may hold either.  Even a newer write into
		 * the cache: once a write through the cache took its copy
		 * away, the write-around may have landed after that T1.
		 */
		if (e->id == got)
			return !cached || (e->past && (e->st == ST_INFLIGHT ||
						       e->t_done > newer));
		if (!e->past)
			cached = 1;
		if (e->t_add > newer)
			newer = e->t_add;
	}
	return 0;
}

static int acceptable_now(u32 s, u32 got)
{
	return acceptable_in(&evs[s], s, got);
}

static void violation(const char *what, u32 s, long got, const char *ctx)
{
	n_violations++;
	if (report_left > 0) {
		struct evlist *l = &evs[s];
		u32 i;

		report_left--;
		fprintf(stderr, "VIOLATION (%s): %s sector %u (block %u) got %ld; entries:",
			ctx, what, s, s / SPB, got);
		for (i = 0; i < l->n; i++)
			fprintf(stderr, " %c%u%s", l->ev[i].kind == EV_WRITE ? 'w' : 'd',
				l->ev[i].id,
				l->ev[i].st == ST_ACKED ? "(acked)" :
				l->ev[i].st == ST_FAILED ? "(failed)" : "(in flight)");
		fputc('\n', stderr);
	}
}

/* ------------------------------------------------------------------ */
/* engine: the steps and locking of io.c; writeback's plumbing         */

/* The model's target: what pmc_wb.c's pmc_env_*() calls get. */
struct pmemcache {
	struct pmodel pm;
	struct pmc_meta m;
	struct pmc_index idx;
	struct mlock stripe[NSTRIPES];
	struct mlock free_lock;	/* spinlock */
	struct mlock evict_lock;	/* mutex */
	u32 evict_hand;
	u32 around[NSTRIPES];	/* st->around: origin writes of writers */
	u64 free_gen;		/* bumped whenever slots may have come free */
	u64 wb_done;		/* writeback completions (io.c's wb_done) */
	u32 ops_left;
};

static struct pmemcache E;

#define COPY_BUF	(2 * BS)	/* the kernel's is 64 KiB: any even size */

/* The online copy of the running cache: mirror.c's state of it. */
static struct {
	struct pmc_mirror_half h[2];
	u32 from;		/* the holder */
	u64 next;		/* every slot below is copied */
	u32 mark_every;		/* R3 every so many slots (the kernel: 1,024) */
	int syncing;
	u8 buf[COPY_BUF];
} R;

static bool mirror_copy_batch(struct pmemcache *pc, struct pmc_meta *m,
			      struct pmc_index *idx, struct pmc_mirror_half h[2],
			      u32 from, u64 *next, u32 batch, u32 mark_every,
			      u8 *buf);

/* Blocks recovery found in two copies at the last restart: aimed at. */
static u32 dup_blocks[64], n_dup_blocks;
static int discard_dup_first;

static struct mlock *stripe_of(u64 oblock)
{
	return &E.stripe[pmc_index_bucket(&E.idx, oblock) & (NSTRIPES - 1)];
}

static void free_slots(const u32 *slots, u32 n)
{
	u32 i;

	if (!n)
		return;
	lock_w(&E.free_lock);
	for (i = 0; i < n; i++)
		trace("free slot %u", slots[i]);
	for (i = 0; i < n; i++)
		pmc_index_push_free(&E.idx, slots[i]);
	unlock_w(&E.free_lock);
	E.free_gen++;
}

static u32 pop_free(void)
{
	u32 s;

	lock_w(&E.free_lock);
	s = pmc_index_pop_free(&E.idx);
	unlock_w(&E.free_lock);
	return s;
}

/*
 * Invariant 5 of format.md, checked as a clean block leaves the cache:
 * CLEAN means the origin holds its data, durably.
 */
static void check_clean_on_origin(u32 slot, u64 v)
{
	u32 k, s;
	long id;

	for (k = 0; k < SPB; k++) {
		if (!(pmc_slot_mask(v) & (1U << k)))
			continue;
		s = (u32)pmc_slot_oblock(v) * SPB + k;
		id = decode_sector(pmc_meta_data(&E.m, slot) +
				   k * PMC_SECTOR_SIZE, s);
		if (id != (long)org_vis[s] || id != (long)org_dur[s])
			violation("evicted a CLEAN block the origin does not hold",
				  s, org_dur[s], "no crash");
	}
}

/* Invariant 5 for every CLEAN block in the index, whenever one may go. */
static void check_clean_blocks(void)
{
	u32 s;

	for (s = 0; s < E.m.n_blocks; s++)
		if (pmc_slot_clean(E.idx.slot[s]))
			check_clean_on_origin(s, E.idx.slot[s]);
}

/* io.c pmc_evict_clean(): the module's pmc_io_evict_clean() */
static u32 evict_clean(u32 want)
{
	u32 got = pmc_io_evict_clean(&E, &E.m, &E.idx, &E.evict_hand, want);

	n_evicted += got;
	return got;
}

static int free_gen_moved(void *arg)
{
	return E.free_gen != *(u64 *)arg || E.idx.n_free;
}

/*
 * A write of the workload, as the oracle follows it: the module's
 * pmc_write() decides where it goes, and the model notes it in the
 * oracle's order at the point where the module orders it under the
 * stripe lock (fill_cb() for a commit, pmc_env_shutting_down() for a
 * write to the origin).
 */
struct fill_ctx {
	u32 id, mask;
	u64 oblock;
	int oracle;		/* a write the oracle follows */
	int started;		/* ... and has noted */
};

/* The write each CPU is in (pmc_write() runs on the writer's CPU). */
static struct fill_ctx *cur_write[MAX_CPUS + 1];

/* The oracle: write @id of sectors @mask of block @ob begins, then ends. */
static void ev_write_start(u64 ob, u32 mask, u32 id, int past)
{
	u32 k;

	for (k = 0; k < SPB; k++) {
		struct evlist *l = &evs[(u32)ob * SPB + k];

		if (!(mask & (1U << k)))
			continue;
		ev_add((u32)ob * SPB + k, id, EV_WRITE);
		l->ev[l->n - 1].past = (u8)past;
		ever_add((u32)ob * SPB + k, id);
	}
}

static void write_started(struct fill_ctx *c, int past)
{
	if (!c || !c->oracle || c->started)
		return;
	c->started = 1;
	trace("write %u block %llu mask %x%s", c->id,
	      (unsigned long long)c->oblock, c->mask, past ? " to the origin" : "");
	ev_write_start(c->oblock, c->mask, c->id, past);
}

/* io.c pmc_fill_from_bio(): memcpy_flushcache of the bio's sectors */
static int fill_cb(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	struct fill_ctx *c = ctx;
	u8 buf[PMC_SECTOR_SIZE];
	u32 i;

	write_started(c, 0);
	for (i = 0; i < SPB; i++) {
		if (!(c->mask & (1U << i)))
			continue;
		fill_sector(buf, c->id, (u32)(c->oblock * SPB + i));
		if (sector_crc)
			sector_crc[i] = pmc_sector_crc(buf);
		/* SITE: data flush of a write, io.c */
		pmc_meta_store(&E.m, kaddr + i * PMC_SECTOR_SIZE, buf,
			       sizeof(buf), PMC_P_DATA);
	}
	return 0;
}

static void ev_write_end(u64 ob, u32 mask, u32 id, int st)
{
	u32 k;

	for (k = 0; k < SPB; k++) {
		if (!(mask & (1U << k)))
			continue;
		ev_set((u32)ob * SPB + k, id, EV_WRITE, st);
		if (st == ST_FAILED)
			ever_del((u32)ob * SPB + k, id);
	}
	if (st == ST_ACKED)
		n_acked_writes++;
	else
		n_failed_writes++;
}

/*
 * A write of ours to the origin, with REQ_FUA: durable on completion.
 * It supersedes the completed, unflushed writes of its sectors (a failed
 * writeback's, say) in the disk's cache: they can no longer land.
 */
static void origin_write_fua(u64 ob, u32 mask, const u32 *ids)
{
	u32 k, i, j;

	for (k = 0; k < SPB; k++) {
		u32 s = (u32)ob * SPB + k;

		if (!(mask & (1U << k)))
			continue;
		org_vis[s] = ids[k];
		org_dur[s] = ids[k];
		for (i = 0, j = 0; i < n_org_pend; i++)	/* keeps the order */
			if (org_pend[i].s != s)
				org_pend[j++] = org_pend[i];
		n_org_pend = j;
	}
}

static int flag_set(void *arg)
{
	return *(int *)arg;
}

/*
 * Submit a write of ours (FUA) of sectors @mask of block @ob to the
 * origin and wait for it, no lock held: late, after or before others,
 * failed now and then (some sectors landing).  0 or -EIO.
 */
static int origin_write_wait(u64 ob, u32 mask, const u32 *ids)
{
	struct wbio *w = wbio_new();
	int done = 0;

	w->w.n = 1;
	w->blk[0].oblock = ob;
	w->blk[0].mask = mask;
	memcpy(w->ids[0], ids, sizeof(w->ids[0]));
	w->due = sched_step + origin_latency();
	w->fua_done = &done;
	wbio_push(&dev_infl, &n_dev_infl, &cap_dev_infl, w);
	wait_until(flag_set, &done);
	return done > 0 ? 0 : -EIO;
}

/* The model's write through the cache: one per CPU at a time. */
struct model_thru {
	struct pmc_thru thru;
	u32 ids[SPB];		/* what T1 writes */
};

static struct model_thru thru_of[MAX_CPUS + 1];
static u32 through_busy[64];	/* per origin block: writes between T0 and T2 */

/*
 * io.c pmc_map_write() for one block: the module's pmc_write() decides;
 * the model completes, sends on, or runs the write through the cache
 * (pmc_through_work(), here on the writer's CPU) as io.c does.
 */
static void write_one(u64 ob, u32 mask, u32 id, int cleaner)
{
	struct fill_ctx c = { .id = id, .mask = mask, .oblock = ob, .oracle = 1 };
	struct pmc_write w = {
		.oblock = ob, .mask = mask, .cleaner = cleaner,
		/* cleaner, or now and then a sequential run (seq_bypass) */
		.around_first = cleaner || (!scripted && rndn(16) == 0),
		.fill = fill_cb, .ctx = &c,
	};
	u32 ids[SPB], k;
	int r = 0, sent = 1;

	cur_write[cur_cpu] = &c;
	switch (pmc_write(&E, &E.m, &E.idx, &w)) {
	case PMC_W_CACHED:
		break;
	case PMC_W_AROUND:
		n_around++;
		/* pmc_end_io(): st->around dropped whether it failed or not */
		for (k = 0; k < SPB; k++)
			ids[k] = id;
		r = origin_write_wait(ob, mask, ids);
		pmc_env_around_dec(&E, ob);
		break;
	case PMC_W_THROUGH:
		n_through++;
		r = pmc_write_through_done(&E, &E.m, &E.idx,
					   &thru_of[cur_cpu].thru);
		break;
	case PMC_W_FAILED:
		r = w.err;
		sent = 0;
		break;
	}
	cur_write[cur_cpu] = NULL;
	trace("write %u block %llu: %d", id, (unsigned long long)ob, r);
	n_full += w.full;
	n_origin_failed += sent && r;
	if (!c.started) {
		/* failed before it was ordered: it never happened */
		assert(r);
		n_failed_writes++;
		return;
	}
	/*
	 * A failed write to the origin may have left some of its sectors
	 * there: no longer in flight, but still a value the sector may hold.
	 */
	ev_write_end(ob, mask, id, !r ? ST_ACKED : sent ? ST_MAYBE : ST_FAILED);
}

static void write_cached(u64 ob, u32 mask, u32 id)
{
	write_one(ob, mask, id, 0);
}

static void write_cleaner(u64 ob, u32 mask, u32 id)
{
	write_one(ob, mask, id, 1);
}

/* dm splits a write into one bio per block. */
static void split_write(u32 s0, u32 ns, void (*write)(u64 ob, u32 mask, u32 id))
{
	u32 id = next_id++, s;

	for (s = s0; s < s0 + ns;) {
		u32 first = s % SPB, cnt = SPB - first;

		if (cnt > s0 + ns - s)
			cnt = s0 + ns - s;
		write(s / SPB, ((1U << cnt) - 1) << first, id);
		s += cnt;
	}
}

static void op_write(u32 s0, u32 ns)
{
	split_write(s0, ns, write_cached);
}

static void op_write_cleaner(u32 s0, u32 ns)
{
	split_write(s0, ns, write_cleaner);
}


/* The discard each CPU is in (its id, or 0) and the blocks it locked. */
static u32 cur_discard[MAX_CPUS + 1];
static u8 discard_seen[MAX_CPUS + 1][64];

/* The oracle: discard @did reaches block @ob under its stripe lock. */
static void discard_block(u32 ob, u32 did)
{
	u32 s;

	for (s = ob * SPB; s < (ob + 1) * SPB; s++)
		ev_add(s, did, EV_DISCARD);
	discard_seen[cur_cpu][ob] = 1;
	trace("discard %u block %u", did, ob);
}

/*
 * io.c pmc_map_discard(): the module's pmc_io_discard() drops whole
 * blocks; partial ones keep their data.
 */
static void op_discard(u32 s0, u32 ns)
{
	u32 first = (s0 + SPB - 1) / SPB, last = (s0 + ns) / SPB;
	u32 ob, s, did = next_disc++;

	assert(n_oblocks <= sizeof(discard_seen[0]));
	for (s = s0; s < s0 + ns; s++)
		if (s / SPB < first || s / SPB >= last)
			ev_add(s, did, EV_DISCARD);
	memset(discard_seen[cur_cpu], 0, sizeof(discard_seen[0]));
	cur_discard[cur_cpu] = did;
	pmc_io_discard(&E, &E.m, &E.idx, first, last);
	cur_discard[cur_cpu] = 0;
	/* The oracle: blocks not cached (a walk of the cache) are dropped too. */
	for (ob = first; ob < last; ob++)
		if (!discard_seen[cur_cpu][ob])
			for (s = ob * SPB; s < (ob + 1) * SPB; s++)
				ev_add(s, did, EV_DISCARD);
	/* The origin ignores the discard (allowed: contents undefined). */
	for (s = s0; s < s0 + ns; s++)
		ev_set(s, did, EV_DISCARD, ST_ACKED);
}

/* A read of sectors of one block, as io.c pmc_map_read() runs it. */
struct read_ctx {
	u64 oblock;
	u32 first;		/* its first sector, in the block */
};

/* io.c pmc_read_copy(), under the stripe lock: it must see the newest. */
static int read_copy(void *ctx, u32 slot, u32 have)
{
	struct read_ctx *rc = ctx;
	u8 buf[PMC_SECTOR_SIZE];
	u32 k, s;
	long got;

	for (k = 0; k < SPB; k++) {
		if (!(have & (1U << k)))
			continue;
		s = (u32)rc->oblock * SPB + k;
		/* a copy takes a while: the other CPUs run meanwhile */
		yield(Y_OP);
		if (pmc_pmem_read(buf, pmc_meta_data(&E.m, slot) +
				  k * PMC_SECTOR_SIZE, sizeof(buf)))
			return -EIO;	/* the read fails: nothing to check */
		got = decode_sector(buf, s);
		if (got < 0 || !acceptable_now(s, (u32)got))
			violation(got < 0 ? "running read: garbage" :
				  "running read: not the newest write", s, got,
				  "no crash");
	}
	/* data_crc: what the module checks of every copy it reads */
	if (E.m.data_crc && pmc_meta_check_data(&E.m, E.m.base, slot) == -EBADMSG)
		violation("running read: data crc mismatch",
			  (u32)rc->oblock * SPB, -1, "no crash");
	return 0;
}

static int step_reached(void *arg)
{
	return sched_step >= *(u64 *)arg;
}

/*
 * A read of @n sectors from @s0, within one block: the module's
 * pmc_io_read() copies the cached ones under the stripe lock; the others
 * come from the origin later, with no lock held and nothing pinned, as in
 * io.c.  Such a sector must hold what a read could return when the read
 * began (the entries then), the newest write, or a write ordered since;
 * after a discard ordered since, any value it once held.
 */
static void op_read(u32 s0, u32 n)
{
	struct read_ctx rc = { .oblock = s0 / SPB, .first = s0 % SPB };
	u32 need = ((1U << n) - 1) << rc.first, have, k, s;
	struct evlist began[SPB];
	u64 t0 = ev_clock, due;
	long got;
	int r;

	for (k = 0; k < SPB; k++) {
		struct evlist *l = &evs[(u32)rc.oblock * SPB + k];

		began[k].n = (need & (1U << k)) ? l->n : 0;
		began[k].cap = began[k].n;
		began[k].ev = began[k].n ? malloc(l->n * sizeof(*l->ev)) : NULL;
		if (began[k].n)
			memcpy(began[k].ev, l->ev, l->n * sizeof(*l->ev));
	}
	have = pmc_io_read(&E, &E.idx, rc.oblock, need, read_copy, &rc, &r);
	trace("read block %llu need %x cached %x: %d",
	      (unsigned long long)rc.oblock, need, have, r);
	if (!r && (need & ~have)) {
		n_partial_reads += have != 0;
		/* the origin's runs: a little later, while the others go on */
		due = sched_step + 1 + rndn(20);
		if (!scripted)
			wait_until(step_reached, &due);
		for (k = 0; k < SPB; k++) {
			if (!((need & ~have) & (1U << k)))
				continue;
			s = (u32)rc.oblock * SPB + k;
			got = org_vis[s];
			if (!acceptable_in(&began[k], s, (u32)got) &&
			    !acceptable_now(s, (u32)got) &&
			    !ever_since(s, (u32)got, t0) &&
			    !(disc_t[s] > t0 && ever_has(s, (u32)got)))
				violation("running read: not the newest write when it began",
					  s, got, "no crash");
		}
	}
	for (k = 0; k < SPB; k++)
		free(began[k].ev);
}

#define WB_JOBS 8

/* wb_select.c's pmc_wb_ops: the module's pmc_wb_look() and pmc_wb_claim() */
static bool wb_look(void *ctx, u64 oblock, struct pmc_wb_cand *c)
{
	return pmc_wb_look(&E, &E.idx, oblock, c);
}

static bool wb_claim(void *ctx, const struct pmc_wb_cand *c, unsigned int sel)
{
	return pmc_wb_claim(&E, &E.idx, c);
}

static const struct pmc_wb_ops wb_ops = { .look = wb_look, .claim = wb_claim };

/*
 * writeback.c pmc_wb_pass(): the module's selection (pmc_index.c), claim
 * and send (pmc_wb.c) pick the blocks and group them into origin writes
 * (pmc_env_wb_submit(), below).  Returns the blocks sent.
 */
static int wb_pass(u32 want)
{
	struct pmc_wb_cand c[16];
	unsigned int whole = 0;
	u32 n;

	if (n_dev_infl + n_dev_done >= WB_JOBS)
		return 0;
	n = pmc_index_wb_select(&E.idx, c, want, ARRAY_SIZE(c),
				PMC_SEL_PARTIAL, &wb_ops, NULL, &whole);
	return (int)pmc_wb_send(&E, &E.m, &E.idx, c, n, WB_RUN);
}

/*
 * The origin completes one write whose time has come (any of them, in
 * any order: writeback's, write-arounds and T1s of writes through the
 * cache), sometimes failing, some sectors of a failed one landing.
 * @force: the earliest one, now.
 */
static void device_complete_one(int force)
{
	u32 k, n = 0, pick = 0, best = ~0U;
	struct wbio *w;

	for (k = 0; k < n_dev_infl; k++) {
		if (best == ~0U || dev_infl[k]->due < dev_infl[best]->due)
			best = k;
		if (dev_infl[k]->due <= sched_step && rndn(++n) == 0)
			pick = k;
	}
	if ((!n && !force) || best == ~0U)
		return;
	k = n ? pick : best;
	w = dev_infl[k];
	dev_infl[k] = dev_infl[--n_dev_infl];
	if (w->fua_done) {
		if (scripted || rndn(16)) {
			origin_write_fua(w->blk[0].oblock, w->blk[0].mask,
					 w->ids[0]);
			*w->fua_done = 1;
		} else {
			origin_write_completes(w, 0);
			*w->fua_done = -1;
		}
		free(w);
		return;
	}
	/* pmc_wb_endio(): the bio's status */
	w->w.err = scripted || rndn(12) ? 0 : -EIO;
	origin_write_completes(w, !w->w.err);
	wbio_push(&dev_done, &n_dev_done, &cap_dev_done, w);
}

/*
 * writeback.c pmc_wb_endio_work(): the completed origin writes go to the
 * module's policy (pmc_wb_complete(): one origin flush, then CLEAN).
 */
static void wb_endio_work(void)
{
	struct wbio **list = dev_done;
	u32 n = n_dev_done, i, b;

	dev_done = NULL;
	n_dev_done = 0;
	cap_dev_done = 0;
	for (i = 0; i < n; i++)
		list[i]->w.next = i + 1 < n ? &list[i + 1]->w : NULL;
	pmc_wb_complete(&E, &E.m, &E.idx, n ? &list[0]->w : NULL);
	for (i = 0; i < n; i++) {
		for (b = 0; b < list[i]->w.n; b++)
			trace("wb_done slot %u block %llu end %d",
			      list[i]->blk[b].slot,
			      (unsigned long long)list[i]->blk[b].oblock,
			      list[i]->w.end);
		if (list[i]->w.end == PMC_WB_CLEAN)
			n_wb_done += list[i]->w.n;
		n_wb_failed += list[i]->w.end == PMC_WB_FAILED;
		free(list[i]);
	}
	E.free_gen++;
	E.wb_done++;
	free(list);
}

/* ---- pmc_env_*(): the model's side of the shared policy units ------- */

void pmc_env_stripe_lock(struct pmemcache *pc, u64 oblock)
{
	lock_w(stripe_of(oblock));
	/* In a discard, the module locks a block only to drop its copy. */
	if (cur_discard[cur_cpu])
		discard_block((u32)oblock, cur_discard[cur_cpu]);
}

void pmc_env_stripe_unlock(struct pmemcache *pc, u64 oblock)
{
	unlock_w(stripe_of(oblock));
}

/* A NULL @pc: the copy of a start being checked, which runs alone. */
void pmc_env_stripe_lock_read(struct pmemcache *pc, u64 oblock)
{
	if (pc)
		lock_r(stripe_of(oblock));
}

void pmc_env_stripe_unlock_read(struct pmemcache *pc, u64 oblock)
{
	if (pc)
		unlock_r(stripe_of(oblock));
}

bool pmc_env_stripe_around(struct pmemcache *pc, u64 oblock)
{
	return pc->around[stripe_of(oblock) - pc->stripe] != 0;
}

int pmc_env_origin_flush(struct pmemcache *pc)
{
	return origin_flush();
}

void pmc_env_dirty_dec(struct pmemcache *pc, u64 v)
{
}

void pmc_env_wb_quarantined(struct pmemcache *pc, u32 slot, u64 v)
{
}

/* No badblocks list here: now and then a block goes alone as if. */
bool pmc_env_wb_poisoned(struct pmemcache *pc, u32 slot)
{
	return !scripted && rndn(64) == 0;
}

/*
 * mirror.c's heal queue (pmc_mirror_heal_later()): a slot and its slot
 * word as it was when a read met a media error on one half.  Writeback's
 * bounce copy (writeback.c: pmc_read_block() after the claim, no stripe
 * lock held) reads a claimed slot that a write may have made STALE since:
 * the word queued is then STALE and in writeback, and the heal must not
 * commit that old copy over the newer one (pmc_write_heal()'s exclusion
 * of a block whose writeback is in flight).
 */
#define HEAL_QUEUE	4
static u32 heal_q_slot[HEAL_QUEUE];
static u64 heal_q_v[HEAL_QUEUE];
static u32 n_heal_q;
static u64 n_wb_heals_queued;

static void heal_later(u32 slot)
{
	u64 v = E.idx.slot[slot];
	u32 i;

	if (!(pmc_slot_flags(v) & PMC_SF_USED))
		return;
	for (i = 0; i < n_heal_q && heal_q_slot[i] != slot; i++)
		;
	if (i == n_heal_q && i < HEAL_QUEUE) {
		heal_q_slot[i] = slot;
		heal_q_v[i] = v;
		n_heal_q++;
	}
}

/* A directed scenario's interleaving before writeback's bounce copy. */
static void (*wb_copy_hook)(void);

/*
 * writeback.c pmc_env_wb_submit(): one origin write carries pmem's data
 * of the claimed blocks.  Now and then no memory for it (false), or it is
 * not sent after all (suspended, no bounce page): then it completes at
 * once, unsent.
 */
bool pmc_env_wb_submit(struct pmemcache *pc, const struct pmc_wb_cand *c,
		       unsigned int n)
{
	struct wbio *w;
	u32 b, k;

	if (!scripted && rndn(50) == 0) {
		n_wb_nomem++;
		return false;
	}
	assert(n <= WB_RUN);
	n_wb_merged += n > 1;
	w = wbio_new();
	w->w.n = n;
	for (b = 0; b < n; b++) {
		w->blk[b].slot = c[b].slot;
		w->blk[b].oblock = pmc_slot_oblock(c[b].v);
		w->blk[b].mask = pmc_slot_mask(c[b].v);
		trace("writeback slot %u block %llu (%u of %u)", c[b].slot,
		      (unsigned long long)w->blk[b].oblock, b + 1, n);
	}
	if (!scripted && rndn(60) == 0) {
		w->w.unsent = true;
		w->w.err = -ENOMEM;
		n_wb_unsent++;
		wbio_push(&dev_done, &n_dev_done, &cap_dev_done, w);
		return true;
	}
	/*
	 * Now and then a block goes by a bounce copy whose read meets a media
	 * error on one half (a while after its claim: others run), and is
	 * read from the other and queued to heal with its slot word as now.
	 */
	if (wb_copy_hook) {
		void (*hook)(void) = wb_copy_hook;

		wb_copy_hook = NULL;
		hook();
		heal_later(c[0].slot);
	} else if (!scripted && rndn(16) == 0) {
		for (k = 1 + rndn(4); k; k--)
			yield(Y_OP);
		b = rndn(n);
		trace("bounce copy of slot %u block %llu: media error, heal queued (flags %x)",
		      c[b].slot, (unsigned long long)pmc_slot_oblock(c[b].v),
		      pmc_slot_flags(E.idx.slot[c[b].slot]));
		heal_later(c[b].slot);
		n_wb_heals_queued++;
	}
	for (b = 0; b < n; b++) {
		struct pmc_wb_block *blk = &w->blk[b];

		for (k = 0; k < SPB; k++) {
			long id;

			if (!(blk->mask & (1U << k)))
				continue;
			id = decode_sector(pmc_meta_data(&E.m, blk->slot) +
					   k * PMC_SECTOR_SIZE,
					   (u32)blk->oblock * SPB + k);
			if (id < 0)
				violation("writeback of garbage",
					  (u32)blk->oblock * SPB + k, id,
					  "no crash");
			w->ids[b][k] = id < 0 ? BAD_ID : (u32)id;
		}
	}
	w->due = sched_step + origin_latency();
	wbio_push(&dev_infl, &n_dev_infl, &cap_dev_infl, w);
	return true;
}

/* A directed scenario's interleaving before eviction's trylock, once. */
static void (*trylock_hook)(void);

bool pmc_env_stripe_trylock(struct pmemcache *pc, u64 oblock)
{
	void (*hook)(void) = trylock_hook;

	trylock_hook = NULL;
	if (hook)
		hook();
	return trylock_w(stripe_of(oblock));
}

void pmc_env_around_inc(struct pmemcache *pc, u64 oblock)
{
	pc->around[stripe_of(oblock) - pc->stripe]++;
}

void pmc_env_around_dec(struct pmemcache *pc, u64 oblock)
{
	u32 *a = &pc->around[stripe_of(oblock) - pc->stripe];

	if (!*a) {
		/* A put without a get: writeback of the stripe would stop. */
		if (data_only)
			return;
		n_violations++;
		if (report_left-- > 0)
			fprintf(stderr, "VIOLATION (no crash): st->around of block %llu's stripe below zero\n",
				(unsigned long long)oblock);
		return;
	}
	(*a)--;
}

/*
 * Never going down in the model.  pmc_origin_write_get() asks this under
 * the stripe lock once the write is bound for the origin: the oracle
 * orders the write here, past the cache.
 */
bool pmc_env_shutting_down(struct pmemcache *pc)
{
	write_started(cur_write[cur_cpu], 1);
	return false;
}

bool pmc_env_through_busy(struct pmemcache *pc, u64 oblock)
{
	return through_busy[oblock] != 0;
}

static int through_idle(void *arg)
{
	return !through_busy[*(u64 *)arg];
}

void pmc_env_through_wait(struct pmemcache *pc, u64 oblock)
{
	wait_until(through_idle, &oblock);
}

bool pmc_env_may_have_clean(struct pmemcache *pc)
{
	return true;
}

/* io.c's evict_lock; every CLEAN block must be on the origin by now. */
void pmc_env_evict_lock(struct pmemcache *pc)
{
	lock_w(&E.evict_lock);
	check_clean_blocks();
}

void pmc_env_evict_unlock(struct pmemcache *pc)
{
	unlock_w(&E.evict_lock);
}

void pmc_env_free_slots(struct pmemcache *pc, const u32 *slots,
			unsigned int n)
{
	free_slots(slots, n);
}

/* pmc_write_heal(): the bad slot is out of use until the next load. */
void pmc_env_retire_slot(struct pmemcache *pc, u32 slot)
{
	pmc_index_set_bad(&E.idx, slot);
}

void pmc_env_resched(struct pmemcache *pc)
{
}

/*
 * io.c pmc_alloc_slot(): a full cache waits for a few slot frees or
 * writeback completions (full_wait), sometimes none, then gives up.
 */
u32 pmc_env_alloc_slot(struct pmemcache *pc, bool wait)
{
	u32 waits = wait && rndn(4) ? 1 + rndn(8) : 0, s;

	for (;;) {
		u64 gen = E.free_gen;

		s = pop_free();
		if (s != PMC_NO_SLOT)
			return s;
		if (evict_clean(1 + rndn(4)))
			continue;
		if (!waits)
			return PMC_NO_SLOT;
		waits--;
		wait_until(free_gen_moved, &gen);
	}
}

unsigned int pmc_env_epoch(struct pmemcache *pc)
{
	return 0;
}

void pmc_env_dirty_inc(struct pmemcache *pc, unsigned int epoch)
{
}

void pmc_env_media_error(struct pmemcache *pc)
{
}

/* Time in the model: scheduler steps. */
unsigned long pmc_env_cleaner_until(struct pmemcache *pc)
{
	return sched_step + rndn(400);
}

int pmc_env_wb_token(struct pmemcache *pc)
{
	return (int)E.wb_done;
}

static int wb_token_moved(void *arg)
{
	return (int)E.wb_done != *(int *)arg;
}

bool pmc_env_wait_writeback(struct pmemcache *pc, int token,
			    unsigned long until)
{
	if (sched_step >= until)
		return false;
	wait_until(wb_token_moved, &token);
	return true;
}

/* -EBUSY: a writeback of the block is in flight, its completion moves it. */
void pmc_env_wait_room(struct pmemcache *pc, int token)
{
	wait_until(wb_token_moved, &token);
}

int pmc_env_pmem_enter(struct pmemcache *pc)
{
	return 0;
}

void pmc_env_pmem_exit(struct pmemcache *pc, int id)
{
}

struct pmc_thru *pmc_env_through_alloc(struct pmemcache *pc,
				       struct pmc_write *w)
{
	return &thru_of[cur_cpu].thru;
}

void pmc_env_through_free(struct pmemcache *pc, struct pmc_thru *t)
{
}

/* T0: the sectors only the cached copy holds (pmem reads), then the write's. */
int pmc_env_through_fill(struct pmemcache *pc, struct pmc_thru *t,
			 struct pmc_write *w)
{
	struct model_thru *mt = container_of(t, struct model_thru, thru);
	struct fill_ctx *c = w->ctx;
	u8 buf[PMC_SECTOR_SIZE];
	u32 k, s;
	long got;

	for (k = 0; k < SPB; k++) {
		mt->ids[k] = c->id;
		if (!(t->keep & (1U << k)))
			continue;
		s = (u32)t->oblock * SPB + k;
		if (pmc_pmem_read(buf, pmc_meta_data(&E.m, t->slot) +
				  k * PMC_SECTOR_SIZE, sizeof(buf)))
			return -EIO;
		got = decode_sector(buf, s);
		if (got < 0)
			violation("write-through of garbage", s, got, "no crash");
		mt->ids[k] = got < 0 ? BAD_ID : (u32)got;
	}
	trace("through %u block %llu mask %x keep %x slot %d", c->id,
	      (unsigned long long)t->oblock, t->mask, t->keep, (int)t->slot);
	return 0;
}

void pmc_env_through_mark(struct pmemcache *pc, struct pmc_thru *t, bool busy)
{
	if (busy)
		through_busy[t->oblock]++;
	else
		through_busy[t->oblock]--;
}

/* pmc_through_work() runs on the writer's CPU once pmc_write() returned. */
void pmc_env_through_start(struct pmemcache *pc, struct pmc_thru *t)
{
}

/* T1: with FUA, no lock held; it may fail, some sectors landing. */
int pmc_env_through_write(struct pmemcache *pc, struct pmc_thru *t)
{
	return origin_write_wait(t->oblock, t->mask,
				 container_of(t, struct model_thru, thru)->ids);
}

/* ------------------------------------------------------------------ */
/* tasks of the simulated CPUs                                        */

/* A block to aim at: one recovery found twice, one in writeback, or hot. */
static u32 target_block(void)
{
	if (n_dup_blocks && rndn(2))
		return dup_blocks[rndn(n_dup_blocks)];
	if (n_dev_infl && rndn(2))
		return (u32)dev_infl[rndn(n_dev_infl)]->blk[0].oblock;
	return rndn(6);
}

/* mirror.c pmc_heal_fill(): the block's good copy, sector by sector. */
static int heal_fill_cb(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	const u8 *old = pmc_meta_data(&E.m, *(u32 *)ctx);
	u8 buf[PMC_SECTOR_SIZE];
	u32 i;

	for (i = 0; i < SPB; i++) {
		if (pmc_pmem_read(buf, old + i * PMC_SECTOR_SIZE, sizeof(buf)))
			return -EIO;
		pmc_meta_store_sector(&E.m, kaddr + i * PMC_SECTOR_SIZE, buf,
				      sector_crc ? &sector_crc[i] : NULL);
	}
	return 0;
}

static u64 n_heals;

/*
 * mirror.c's heal work: pmc_write_heal() of a block aimed at (often
 * rewritten), seen a while before
 * (a read met a media error on one half; the model has one half, so the
 * good copy it reads is the block's own).  Other CPUs run between the
 * look and the heal, as between that read and the work: the heal must
 * commit nothing over a write, a discard or a writeback that came in
 * between.  At most two slots retired at a time (the next load frees
 * them): the cache must not run out of slots.
 */
static void op_heal(void)
{
	u32 s, i, bad = 0;
	u64 v;
	int r;

	if (n_heal_q) {
		/* queued by writeback's bounce copy: maybe STALE by now */
		i = rndn(n_heal_q);
		s = heal_q_slot[i];
		v = heal_q_v[i];
		heal_q_slot[i] = heal_q_slot[--n_heal_q];
		heal_q_v[i] = heal_q_v[n_heal_q];
	} else {
		s = pmc_index_lookup(&E.idx, target_block());
		if (s == PMC_NO_SLOT)
			return;
		v = E.idx.slot[s];
	}
	for (i = 0; i < E.m.n_blocks; i++)
		bad += !!(pmc_slot_flags(E.idx.slot[i]) & PMC_SF_BAD);
	if (bad >= 2)
		return;
	/* the queue and the work: the reader's next write, others' ops */
	if (rndn(2)) {
		u32 first = rndn(SPB);

		op_write((u32)pmc_slot_oblock(v) * SPB + first, 1 + rndn(SPB - first));
	}
	for (i = rndn(4); i; i--)
		yield(Y_OP);
	r = pmc_write_heal(&E, &E.m, &E.idx, s, v, heal_fill_cb, &s);
	trace("heal slot %u block %llu flags %x: %d", s,
	      (unsigned long long)pmc_slot_oblock(v), pmc_slot_flags(v), r);
	n_heals += !r;
}

static void writer_op(void)
{
	u32 op = rndn(100);

	if (discard_dup_first) {
		/*
		 * Recovery freed the loser's slot with a store only the
		 * loader's fence makes durable: drop the winner before that
		 * slot is reused.
		 */
		discard_dup_first = 0;
		op_discard(dup_blocks[rndn(n_dup_blocks)] * SPB, SPB);
		return;
	}

	if (op < 38) {
		u32 s0 = rndn(nsec), ns = 1 + rndn(2 * SPB + 3);

		if (s0 + ns > nsec)
			ns = nsec - s0;
		op_write(s0, ns);
	} else if (op < 58) {
		/* overwrite a block aimed at, whole or partial */
		u32 ob = target_block();
		u32 first = rndn(2) ? 0 : rndn(SPB);
		u32 ns = rndn(2) ? SPB - first : 1 + rndn(SPB - first);

		op_write(ob * SPB + first, ns);
	} else if (op < 72) {
		u32 s0 = rndn(nsec), ns = 1 + rndn(6 * SPB);

		if (rndn(2))
			s0 = target_block() * SPB;
		if (rndn(3) == 0) {
			/* a large one (fstrim): many blocks before the fence */
			s0 = rndn(4) * SPB;
			ns = (16 + rndn(n_oblocks)) * SPB;
		}
		if (s0 + ns > nsec)
			ns = nsec - s0;
		op_discard(s0, ns);
	} else if (op < 74) {
		/* REQ_PREFLUSH: everything acknowledged is already durable */
		/*
		 * SITE: REQ_PREFLUSH fence, io.c; redundant: every acknowledged
		 * write was fenced at W4 by its own CPU
		 */
		pmc_pmem_fence(PMC_P_RECORD);
	} else if (op < 80) {
		evict_clean(1 + rndn(4));
	} else if (op < 88) {
		/* cleaner mode, mostly on blocks aimed at (cached ones) */
		u32 ob = rndn(4) ? target_block() : rndn(n_oblocks);
		u32 first = rndn(2) ? 0 : rndn(SPB);
		u32 ns = rndn(2) ? SPB - first : 1 + rndn(SPB - first);

		op_write_cleaner(ob * SPB + first, ns);
	} else if (op < 92) {
		op_heal();
	} else {
		/* within one block, often all of it (a partly cached one) */
		u32 s = rndn(nsec), n = rndn(2) ? SPB - s % SPB :
					    1 + rndn(SPB - s % SPB);

		if (rndn(2))
			s = target_block() * SPB, n = SPB;
		op_read(s, n);
	}
}

static void task_writer(void)
{
	while (!stop_all && E.ops_left) {
		E.ops_left--;
		writer_op();
		yield(Y_OP);
	}
	cpus[cur_cpu].finished = 1;
	yield_why = Y_DONE;
}

static void task_writeback(void)
{
	while (!stop_all) {
		if (!wb_pass(1 + rndn(4)))
			yield(Y_IDLE);
		else
			yield(Y_OP);
	}
	yield_why = Y_DONE;
}

/* mirror.c's resync work: a batch of the online copy now and then. */
static void task_resync(void)
{
	while (!stop_all) {
		if (!R.syncing) {
			yield(Y_IDLE);
			continue;
		}
		if (mirror_copy_batch(&E, &E.m, &E.idx, R.h, R.from, &R.next,
				      1 + rndn(3), R.mark_every, R.buf)) {
			R.syncing = 0;
			stale_half = -1;
		}
		yield(Y_OP);
	}
	yield_why = Y_DONE;
}

static int have_completions(void *arg)
{
	return n_dev_done != 0;
}

/* The endio work: runs when origin writes have completed. */
static void task_endio(void)
{
	while (!stop_all) {
		wait_until(have_completions, NULL);
		wb_endio_work();
		yield(Y_OP);
	}
	yield_why = Y_DONE;
}

static void cpu_setup(u32 i)
{
	struct cpu *c = &cpus[i];

	getcontext(&c->ctx);
	c->ctx.uc_stack.ss_sp = c->stack;
	c->ctx.uc_stack.ss_size = STACK_SIZE;
	c->ctx.uc_link = &main_ctx;
	makecontext(&c->ctx, c->task, 0);
	c->prio = (u32)rndn(1000);
	c->wait = NULL;
	c->finished = 0;
}

/*
 * One in sched_change scheduler steps gives the running CPU a new
 * priority (PCT): short stalls or long ones.  Drawn again at every start.
 */
static u32 sched_change;

static void cpus_init(void)
{
	u32 i;

	sched_change = 3U << rndn(4);

	ncpu = n_writers + 2 + mirror;
	assert(ncpu <= MAX_CPUS);
	for (i = 0; i < ncpu; i++) {
		struct cpu *c = &cpus[i];

		if (!c->stack)
			c->stack = malloc(STACK_SIZE);
		if (i < n_writers) {
			c->task = task_writer;
			c->name = "writer";
		} else if (i == n_writers) {
			c->task = task_writeback;
			c->name = "writeback";
		} else if (i == n_writers + 2) {
			c->task = task_resync;
			c->name = "resync";
		} else {
			c->task = task_endio;
			c->name = "endio";
		}
		cpu_setup(i);
	}
}

/* ------------------------------------------------------------------ */
/* crash images                                                       */

static int cmp_pend_ptr(const void *a, const void *b)
{
	const struct pend *x = *(const struct pend * const *)a;
	const struct pend *y = *(const struct pend * const *)b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

enum {
	IMG_NONE, IMG_ALL, IMG_WORD, IMG_LINE, IMG_CPU_PREFIX, IMG_CPU_ALL,
	IMG_NR
};

/*
 * A crash image: @dur plus a choice of the pending stores, applied in
 * store order.
 *   IMG_WORD:       per 8-byte word, any one of its pending stores (the
 *                   last to land) or none;
 *   IMG_LINE:       per 64-byte line, a random prefix (a line write-back);
 *   IMG_CPU_PREFIX: per CPU, a random prefix of its program order;
 *   IMG_CPU_ALL:    per CPU, all of its stores or none.
 */
static void make_image(u8 *img, const u8 *dur, const struct pend *pend,
		       size_t np, size_t size, int mode)
{
	static const struct pend **v;
	static u8 *take;
	static size_t vcap;
	size_t i, j;

	memcpy(img, dur, size);
	if (!np || mode == IMG_NONE)
		return;
	if (np > vcap) {
		vcap = np * 2;
		v = realloc(v, vcap * sizeof(*v));
		take = realloc(take, vcap);
	}
	switch (mode) {
	case IMG_ALL:
		memset(take, 1, np);
		break;
	case IMG_WORD:
	case IMG_LINE: {
		u64 gran = mode == IMG_WORD ? 8 : 64;

		for (i = 0; i < np; i++)
			v[i] = &pend[i];
		qsort(v, np, sizeof(*v), cmp_pend_ptr);
		memset(take, 0, np);
		for (i = 0; i < np; i = j) {
			size_t cut;

			for (j = i; j < np && v[j]->off / gran == v[i]->off / gran; j++)
				;
			if (mode == IMG_LINE) {
				/* program (seq) order inside the line */
				size_t a, b;

				for (a = i + 1; a < j; a++)
					for (b = a; b > i && v[b - 1]->seq > v[b]->seq; b--) {
						const struct pend *t = v[b];

						v[b] = v[b - 1];
						v[b - 1] = t;
					}
			}
			cut = rndn((u32)(j - i) + 1);
			if (mode == IMG_WORD) {
				if (cut)
					take[v[i + cut - 1] - pend] = 1;
				continue;
			}
			while (cut--)
				take[v[i + cut] - pend] = 1;
		}
		break;
	}
	case IMG_CPU_PREFIX:
	case IMG_CPU_ALL: {
		size_t cnt[MAX_CPUS + 1] = { 0 }, cut[MAX_CPUS + 1];
		u32 c;

		for (i = 0; i < np; i++)
			cnt[pend[i].cpu]++;
		for (c = 0; c <= MAX_CPUS; c++)
			cut[c] = mode == IMG_CPU_ALL ? (rndn(2) ? cnt[c] : 0) :
				 rndn((u32)cnt[c] + 1);
		for (i = 0; i < np; i++) {
			c = pend[i].cpu;
			take[i] = cut[c] > 0;
			if (cut[c])
				cut[c]--;
		}
		break;
	}
	}
	for (i = 0; i < np; i++)	/* seq order: the newest chosen wins */
		if (take[i])
			memcpy(img + pend[i].off, &pend[i].val, 8);
}

/* Read one sector of a recovered state, as the target would. */
static long read_recovered(struct pmc_meta *m, struct pmc_index *idx,
			   const u32 *org, u32 s)
{
	u32 slot = pmc_index_lookup(idx, s / SPB);

	if (slot != PMC_NO_SLOT &&
	    (pmc_slot_mask(idx->slot[slot]) & (1U << (s % SPB))))
		return decode_sector(pmc_meta_data(m, slot) +
				     (s % SPB) * PMC_SECTOR_SIZE, s);
	return org[s];
}

static int check_state(struct pmc_meta *m, struct pmc_index *idx,
		       const u32 *org, const char *ctx)
{
	int bad = 0;
	u32 s;

	for (s = 0; s < nsec; s++) {
		long got = read_recovered(m, idx, org, s);

		if (got < 0) {
			violation("garbage", s, got, ctx);
			bad = 1;
		} else if (!acceptable(s, (u32)got)) {
			violation(ever_has(s, (u32)got) ?
				  "older value won / write lost" :
				  "never written", s, got, ctx);
			bad = 1;
		}
	}
	return bad;
}

/*
 * Invariant 5 after recovery: a CLEAN block's data is the origin's.  Else
 * the block changes without a write once it is evicted, and writeback
 * never puts the cached data back (a write-through that wrote the origin
 * while its clean copy was still live).
 */
static int check_clean(struct pmc_meta *m, struct pmc_index *idx,
		       const u32 *org, const char *ctx)
{
	int bad = 0;
	u64 i;
	u32 k;

	for (i = 0; i < m->n_blocks; i++) {
		u64 v = idx->slot[i];

		if (!pmc_slot_clean(v))
			continue;
		for (k = 0; k < SPB; k++) {
			u32 s = (u32)pmc_slot_oblock(v) * SPB + k;
			long got;

			if (!(pmc_slot_mask(v) & (1U << k)))
				continue;
			got = decode_sector(pmc_meta_data(m, (u32)i) +
					    k * PMC_SECTOR_SIZE, s);
			if (got != (long)org[s]) {
				violation("CLEAN block over other origin data",
					  s, got, ctx);
				bad = 1;
			}
		}
	}
	return bad;
}

/* --data-crc: every live block's data matches its record's data_crc. */
static int check_data_crc(struct pmc_meta *m, struct pmc_index *idx,
			  const char *ctx)
{
	u64 i;

	if (!m->data_crc)
		return 0;
	for (i = 0; i < m->n_blocks; i++) {
		if (!(pmc_slot_flags(idx->slot[i]) & PMC_SF_USED))
			continue;
		n_crc_checked++;
		/* a media error of the model is no verdict on the crc */
		if (pmc_meta_check_data(m, m->base, (u32)i) == -EBADMSG) {
			violation("data crc mismatch", (u32)pmc_slot_oblock(idx->slot[i]) * SPB,
				  -1, ctx);
			return 1;
		}
	}
	return 0;
}

#define MAX_DEPTH 3	/* a crash, then crashes in the recoveries after it */
static struct pmodel rm_pool[MAX_DEPTH];
static u8 *img_pool[MAX_DEPTH + 1];
static int max_depth = 2;	/* --mirror: 3 (a cut in a copy, then in its restart) */

static int fail(const char *ctx, const char *fmt, long a, const char *b)
{
	n_violations++;
	if (report_left-- > 0) {
		fprintf(stderr, "VIOLATION (%s): ", ctx);
		fprintf(stderr, fmt, a, b ? b : "");
		fputc('\n', stderr);
	}
	return 1;
}

/*
 * Rebuild @idx from the cache @m opened and check what it reads: every
 * acknowledged write, a consistent index, CLEAN blocks on the origin.
 * 0 = ok; @idx is initialised either way (the caller destroys it).
 */
static int recover_checked(struct pmc_meta *m, struct pmc_index *idx,
			   const u32 *org, const char *ctx)
{
	struct pmc_recover_stats st;
	u64 used = 0, i;
	int r;

	r = pmc_index_init(idx, m->n_blocks);
	assert(!r);
	r = pmc_meta_recover(m, idx, &st);
	if (r)
		return fail(ctx, "recovery failed %ld%s", r, NULL);
	for (i = 0; i < m->n_blocks; i++)
		if (pmc_slot_flags(idx->slot[i]) & PMC_SF_USED)
			used++;
	if (used + idx->n_free != m->n_blocks)
		return fail(ctx, "index inconsistent%.0ld%s", 0, NULL);
	if (check_state(m, idx, org, ctx))
		return 1;
	if (check_data_crc(m, idx, ctx))
		return 1;
	return check_clean(m, idx, org, ctx);
}

static int recover_mirror_and_check(const u8 *img, const u32 *org,
				    const char *ctx, int depth, int gone);

/*
 * Recover @img in a fresh model and check it.  0 = ok.  On success and
 * if @keep is given, the recovered model is left in rm_pool[0] and its
 * index in *keep.
 */
static int recover_and_check(const u8 *img, const u32 *org, const char *ctx,
			     int depth, struct pmc_index *keep,
			     struct pmc_meta *keep_m)
{
	struct pmodel *rm = &rm_pool[depth], *saved = PM;
	int saved_cpu = cur_cpu;
	struct pmc_meta m;
	struct pmc_index idx;
	const char *why;
	int r, bad = 0;

	if (mirror)
		return recover_mirror_and_check(img, org, ctx, depth,
						depth ? -1 : stale_half);
	pm_load(rm, img);
	PM = rm;
	cur_cpu = CPU_LOADER;
	if (depth + 1 < max_depth && rndn(3) == 0)
		rm->capture_countdown = 1;
	r = pmc_meta_open(&m, rm->vol, pmem_size, BS, &oid, &why);
	if (r) {
		fail(ctx, "open failed %ld %s", r, why);
		PM = saved;
		cur_cpu = saved_cpu;
		return 1;
	}
	bad = recover_checked(&m, &idx, org, ctx);
	if (!bad && rm->captured) {
		/* A crash during recovery: recover that state again. */
		u8 *img2 = img_pool[depth + 1];

		make_image(img2, rm->cap_dur, rm->cap_pend, rm->cap_npend,
			   img_size, IMG_WORD + rndn(2));
		n_nested++;
		bad = recover_and_check(img2, org, "nested", depth + 1, NULL,
					NULL);
	}
	PM = saved;
	cur_cpu = saved_cpu;
	if (!bad && keep) {
		*keep = idx;
		*keep_m = m;
		return 0;
	}
	pmc_index_destroy(&idx);
	return bad;
}

/* ------------------------------------------------------------------ */
/* mirror: two halves, their start and their copy (--mirror)           */


static u64 n_mirror_starts, n_copies, n_copies_done, n_marks_resumed;
static u64 n_half_lost, n_refused, n_replaced, n_alone_checked;


/*
 * mirror.c pmc_mirror_read() and pmc_mirror_start() on the halves at @vol
 * (@present: bit i, half i is there): S1, the decision, and then the
 * record pass of a copy (pmc_resync_records()) or M1 of a start alone.
 * 0: @m is open on the holder *from, both halves (or the survivor) take
 * stores, and the copy's data part is to run from *pos (n_blocks: none).
 * 1: refused (*why).  -1: the holder cannot be opened (*why).
 */
static int mirror_start(u8 *vol, u32 present, bool degraded_ok,
			struct pmc_meta *m, struct pmc_mirror_half h[2],
			u32 *from, u64 *pos, const char **why)
{
	static u8 buf[COPY_BUF];
	struct pmc_mirror_plan plan;
	struct pmc_meta tmp;
	const char *w;
	u32 i, f;
	int r;

	n_mirror_starts++;
	memset(h, 0, 2 * sizeof(*h));
	for (i = 0; i < 2; i++) {
		h[i].base = vol + i * pmem_size;
		h[i].present = present & (1U << i);
		if (!h[i].present)
			continue;
		r = pmc_mirror_scrub(&h[i]);
		assert(r != -EIO);	/* no media errors at a start */
		h[i].holds_cache = pmc_meta_open(&tmp, h[i].base, pmem_size,
						 BS, &oid, &w) != -ENODATA;
	}
	pmc_mirror_decide(h, degraded_ok, &plan);
	if (plan.action == PMC_MIRROR_REFUSE) {
		*why = plan.why;
		return 1;
	}
	f = plan.holder;
	*from = f;
	r = pmc_meta_open(m, h[f].base, pmem_size, BS, &oid, why);
	if (r)
		return -1;
	*pos = m->n_blocks;
	if (plan.action == PMC_MIRROR_DEGRADED) {
		if (plan.mark_alone)
			pmc_mirror_mark_alone(&h[f]);	/* M1 */
		pmc_meta_use_halves(m, h[f].base, NULL);
		return 0;
	}
	r = 1;
	if (plan.action == PMC_MIRROR_BOTH)
		r = pmc_resync_differ(NULL, m, h[0].base, h[1].base, buf,
				      sizeof(buf));
	if (r > 0) {
		n_copies++;
		*pos = pmc_mirror_resync_begin(&h[f], &h[f ^ 1],
					       m->cache_uuid);	/* R1, R2 */
		if (plan.action == PMC_MIRROR_BOTH)
			*pos = m->n_blocks;
		n_marks_resumed += *pos && *pos < m->n_blocks;
		r = pmc_resync_records(NULL, m, h[f].base, h[f ^ 1].base, *pos,
				       buf, sizeof(buf));
		assert(!r);
		if (*pos >= m->n_blocks)
			pmc_mirror_resync_end(&h[f], &h[f ^ 1]);	/* R4, R5 */
	}
	pmc_meta_use_halves(m, h[0].base, h[1].base);
	/* reads from the holder until the copy ends (pmc_mirror_resync_prepare()) */
	m->base = h[*pos < m->n_blocks ? f : 0].base;
	return 0;
}

/*
 * The copy's data part, @batch slots at a time from *@next on: the
 * resync work of mirror.c.  A media error on the holder ends a batch
 * early; the model then tries that slot again (the module would stop the
 * copy and drop the target).  True when the copy ended (R4, R5 done).
 */
static bool mirror_copy_batch(struct pmemcache *pc, struct pmc_meta *m,
			      struct pmc_index *idx, struct pmc_mirror_half h[2],
			      u32 from, u64 *next, u32 batch, u32 mark_every,
			      u8 *buf)
{
	u64 slot = *next, end = slot + batch;
	int r = 0;

	if (end > m->n_blocks)
		end = m->n_blocks;
	for (; slot < end; slot++) {
		r = pmc_resync_slot(pc, m, idx, h[from].base, h[from ^ 1].base,
				    (u32)slot, buf);
		if (pc)
			trace("resync slot %llu flags %x block %llu: %d",
			      (unsigned long long)slot,
			      pmc_slot_flags(idx->slot[slot]),
			      (unsigned long long)pmc_slot_oblock(idx->slot[slot]), r);
		if (r < 0)
			break;
	}
	*next = slot;
	if (pc)
		trace("resync from %u: slots below %llu copied", from,
		      (unsigned long long)slot);
	if (!pmc_resync_batch_end(&h[from], &h[from ^ 1], slot, m->n_blocks,
				  mark_every))
		return false;
	m->base = h[0].base;	/* pmc_mirror_resync_done() */
	n_copies_done++;
	return true;
}

/* The halves with bit i of @present lost: each lost half zeroed. */
static u32 lose_halves(u8 *vol, u32 present)
{
	u32 i;

	for (i = 0; i < 2; i++)
		if (!(present & (1U << i)))
			memset(vol + i * pmem_size, 0, pmem_size);
	return present;
}

/*
 * A crash image of a mirrored cache, started as the module would: both
 * halves, or one lost (the other with the administrator's override,
 * degraded).  A start may refuse only a survivor that holds no whole
 * cache (blank, or a copy's target before R5); a start that takes a half
 * must read back every acknowledged write, before its copy and, once the
 * copy ended, from the copy's target alone.  Cuts in the start, in the
 * recovery and in the copy are checked again (nested).  A half lost at
 * an earlier start of the chain (@gone, or -1) may come back, never be
 * started alone: its partner ran alone meanwhile (both alone is the split
 * brain the start refuses, rightly).
 */
static int recover_mirror_and_check(const u8 *img, const u32 *org,
				    const char *ctx, int depth, int gone)
{
	struct pmodel *rm = &rm_pool[depth], *saved = PM;
	int saved_cpu = cur_cpu;
	struct pmc_mirror_half h[2];
	u32 lose = rndn(4), present = lose < 2 ? 3 : lose - 1, from;

	if (check_present && !depth)
		present = check_present;
	struct pmc_meta m;
	struct pmc_index idx;
	const char *why = NULL;
	u64 pos;
	int r, bad = 0;

	pm_load(rm, img);
	PM = rm;
	cur_cpu = CPU_LOADER;
	if (depth + 1 < max_depth && rndn(2) == 0)
		rm->capture_countdown = 1 + rndn(12);
	if (gone >= 0 && present != 3)
		present = 3U & ~(1U << gone);
	n_half_lost += present != 3;
	r = mirror_start(rm->vol, present, present != 3, &m, h, &from, &pos,
			 &why);
	if (r == 1) {
		u32 s = present == 3 ? 0 : present - 1;

		/*
		 * Refusing is right only where no whole cache is left, or
		 * where the override of an earlier start of the chain ran one
		 * half alone while the other was missing and that other one,
		 * missing again later, was the source of a copy (R1) or also
		 * ran alone: both halves ran alone, the split brain.
		 */
		if (gone >= 0 && present == 3 && h[0].has_info &&
		    h[1].has_info && (h[0].info.flags & h[1].info.flags &
				      PMC_MIRROR_PARTNER_STALE)) {
			n_refused++;
			goto out;
		}
		if (present == 3 || (h[s].has_info &&
				     !(h[s].info.flags & PMC_MIRROR_RESYNCING)))
			bad = fail(ctx, "mirror start refused (halves %ld): %s",
				   present, why);
		n_refused++;
		goto out;
	}
	if (r) {
		bad = fail(ctx, "mirror start: open failed (halves %ld): %s",
			   present, why);
		goto out;
	}
	bad = recover_checked(&m, &idx, org, ctx);
	if (!bad && pos < m.n_blocks) {
		u32 every = 1 + rndn(3);

		while (!mirror_copy_batch(NULL, &m, &idx, h, from, &pos,
					  1 + rndn(3), every, R.buf))
			;
	}
	pmc_index_destroy(&idx);
	if (!bad && present == 3) {
		/*
		 * The holder lost now: the other half alone, degraded.  No
		 * cut here (the holder is gone from the volatile view only).
		 */
		rm->capture_countdown = 0;
		n_alone_checked++;
		lose_halves(rm->vol, 1U << (from ^ 1));
		r = mirror_start(rm->vol, 1U << (from ^ 1), true, &m, h, &from,
				 &pos, &why);
		if (r)
			bad = fail(ctx, "the other half alone after the copy: start %ld: %s",
				   r, why);
		else
			bad = recover_checked(&m, &idx, org, "the other half alone");
		if (!r)
			pmc_index_destroy(&idx);
	}
	if (!bad && rm->captured) {
		/* A crash during the start, recovery or copy: again from there. */
		u8 *img2 = img_pool[depth + 1];

		make_image(img2, rm->cap_dur, rm->cap_pend, rm->cap_npend,
			   img_size, IMG_WORD + rndn(2));
		n_nested++;
		bad = recover_mirror_and_check(img2, org, "nested", depth + 1,
					       present == 3 ? gone :
					       present == 1 ? 1 : 0);
	}
out:
	PM = saved;
	cur_cpu = saved_cpu;
	return bad;
}

static void restart_from(const u8 *img, const u32 *org);

static void snapshot(const char *ctx)
{
	static u32 *org;
	u8 *img = img_pool[0];
	u32 k;

	if (!org)
		org = malloc(nsec * sizeof(u32));
	n_snapshots++;
	for (k = 0; k < images_per_snapshot; k++) {
		int mode = k == 0 ? (int)rndn(2) : 2 + (int)rndn(IMG_NR - 2);

		make_image(img, E.pm.dur, E.pm.pend, E.pm.npend, img_size, mode);
		origin_image(org);
		n_states++;
		if (recover_and_check(img, org, ctx, 0, NULL, NULL)) {
			n_bad_states++;
			return;
		}
	}
	if (restart_permille && rndn(1000) < restart_permille) {
		/* Power comes back: carry on from the last image. */
		restart_from(img, org);
	}
}

/* ------------------------------------------------------------------ */
/* loading, restarting                                                */

/* Every slot is live, free or quarantined after a load: else stop. */
static void index_check_after_load(void)
{
	u64 used = 0, i;

	for (i = 0; i < E.m.n_blocks; i++)
		if (pmc_slot_flags(E.idx.slot[i]) & (PMC_SF_USED | PMC_SF_BAD))
			used++;
	if (used + E.idx.n_free == E.m.n_blocks)
		return;
	n_violations++;
	if (report_left-- > 0)
		fprintf(stderr, "VIOLATION (load): %llu slots neither live nor free\n",
			(unsigned long long)(E.m.n_blocks - used - E.idx.n_free));
	stop_all = 1;
}


/* pmc_load(): open and recover on the loader CPU (never fences again). */
static void load_engine(void)
{
	struct pmc_recover_stats st;
	const char *why;
	int r, i;

	cur_cpu = CPU_LOADER;
	PM = &E.pm;
	if (mirror) {
		u64 pos;

		/* pmc_mirror_start(): S1, decide, the record pass, then recovery */
		r = mirror_start(E.pm.vol, load_present, load_override, &E.m,
				 R.h, &R.from, &pos, &why);
		if (r) {
			fail("load", "mirror start %ld: %s", r, why);
			stop_all = 1;
			return;
		}
		R.next = pos;
		R.syncing = pos < E.m.n_blocks;
		if (load_present == 3 && !R.syncing)
			stale_half = -1;	/* both current */
		n_ran_alone += load_present != 3;
		trace("mirror load: halves %u, holder %u, copy from %llu%s",
		      load_present, R.from, (unsigned long long)pos,
		      load_override ? " (override)" : "");
		R.mark_every = 1 + rndn(3);
	} else {
		r = pmc_meta_open(&E.m, E.pm.vol, pmem_size, BS, &oid, &why);
	}
	assert(!r);
	r = pmc_index_init(&E.idx, E.m.n_blocks);
	assert(!r);
	r = pmc_index_wb_alloc(&E.idx, n_oblocks);
	assert(!r);
	r = pmc_meta_recover(&E.m, &E.idx, &st);
	assert(!r);
	/* pmc_select_start(): the origin has no parity stripes */
	pmc_index_wb_build(&E.idx, 1, E.m.full_mask);
	index_check_after_load();
	/* The CPUs start over: no lock held, no write past the cache. */
	for (i = 0; i < NSTRIPES; i++)
		E.stripe[i].owner = -1, E.stripe[i].readers = 0, E.around[i] = 0;
	E.free_lock.owner = -1;
	E.free_lock.readers = 0;
	E.evict_lock.owner = -1;
	E.evict_lock.readers = 0;
	while (n_dev_infl)
		free(dev_infl[--n_dev_infl]);
	memset(through_busy, 0, sizeof(through_busy));
	while (n_dev_done)
		free(dev_done[--n_dev_done]);
	n_org_pend = 0;
	n_heal_q = 0;		/* the heal queue is in DRAM */
}

/* The blocks that have more than one live record in E.pm. */
static void find_dup_blocks(void)
{
	u32 seen[64] = { 0 }, i;
	struct pmc_record r;
	bool live;

	assert(n_oblocks <= ARRAY_SIZE(seen));
	n_dup_blocks = 0;
	for (i = 0; i < E.m.n_blocks; i++) {
		if (pmc_meta_read_record(&E.m, i, &r, &live) || !live ||
		    r.oblock >= n_oblocks)
			continue;
		if (seen[r.oblock]++ == 1)
			dup_blocks[n_dup_blocks++] = (u32)r.oblock;
	}
	discard_dup_first = n_dup_blocks != 0;
}

static void restart_from(const u8 *img, const u32 *org)
{
	u32 s;

	n_restarts++;
	trace("restart");
	pmc_index_destroy(&E.idx);
	pm_load(&E.pm, img);
	load_present = 3;
	load_override = false;
	if (mirror && rndn(3) == 0) {
		/*
		 * A half left out (missing at this start: the other runs
		 * alone) or replaced by a blank device (pmemcachectl
		 * replace): the half that may miss writes, else either.
		 */
		struct pmc_mirror_half h = { .present = true };
		u32 i, out = stale_half >= 0 ? (u32)stale_half : rndn(2);

		for (i = 0; i < 2 && stale_half < 0; i++) {
			h.base = E.pm.vol + i * pmem_size;
			if (pmc_mirror_load(&h) ||
			    (h.info.flags & PMC_MIRROR_RESYNCING))
				out = i;
		}
		if (rndn(2)) {
			load_present = 3U & ~(1U << out);
		} else {
			lose_halves(E.pm.vol, 1U << (out ^ 1));
			pm_load(&E.pm, E.pm.vol);
			n_replaced++;
		}
		load_override = true;
		stale_half = (int)out;
	}
	find_dup_blocks();
	memcpy(org_dur, org, nsec * sizeof(u32));
	memcpy(org_vis, org, nsec * sizeof(u32));
	load_engine();
	/* What the recovered cache reads is now the acknowledged state. */
	for (s = 0; s < nsec; s++) {
		long got = read_recovered(&E.m, &E.idx, org_vis, s);

		assert(got >= 0);	/* checked by the snapshot */
		ev_reset(s, (u32)got);
	}
	cpus_init();
}

/* A fresh cache, formatted and loaded, over an origin of zeros (id 0). */
static void world_reset(void)
{
	static u8 *zero;
	u32 s;
	int r;

	if (!zero) {
		zero = calloc(1, img_size);
		pm_init(&E.pm, img_size);
	} else {
		pmc_index_destroy(&E.idx);
	}
	pm_load(&E.pm, zero);
	stop_all = 0;
	work_pm = &E.pm;
	PM = &E.pm;
	cur_cpu = CPU_LOADER;
	load_present = 3;
	load_override = false;
	stale_half = -1;
	if (mirror && (world_pair || rndn(2))) {
		/* a new pair, as pmc_mirror_start() formats it */
		struct pmc_mirror_half h[2] = {
			{ .base = E.pm.vol, .present = true },
			{ .base = E.pm.vol + pmem_size, .present = true },
		};

		r = pmc_meta_format_pair(&E.m, h[0].base, h[1].base, pmem_size,
					 BS, &oid, features);
		pmc_mirror_resync_begin(&h[0], &h[1], E.m.cache_uuid);
		pmc_mirror_resync_end(&h[0], &h[1]);
	} else {
		/* one device's cache; mirrored: a blank second half to copy to */
		r = pmc_meta_format_pair(&E.m, E.pm.vol, NULL, pmem_size, BS,
					 &oid, features);
	}
	assert(!r);
	pm_load(&E.pm, E.pm.vol);
	load_engine();
	memset(org_dur, 0, nsec * sizeof(u32));
	memset(org_vis, 0, nsec * sizeof(u32));
	for (s = 0; s < nsec; s++) {
		ever[s].n = 0;
		ev_reset(s, 0);
	}
	E.evict_hand = 0;
	n_dup_blocks = 0;
	discard_dup_first = 0;
}

/* ------------------------------------------------------------------ */
/* directed scenarios: interleavings too rare to leave to chance       */

/* Crash image: the durable state plus the pending stores at @offs only. */
static void image_with(u8 *img, const u8 *dur, const struct pend *pend,
		       size_t np, const u64 *offs, u32 noffs)
{
	size_t i;
	u32 k;

	memcpy(img, dur, pmem_size);
	for (i = 0; i < np; i++)
		for (k = 0; k < noffs; k++)
			if (pend[i].off == offs[k])
				memcpy(img + pend[i].off, &pend[i].val, 8);
}

static u64 record_word(u32 slot, u32 word)
{
	return PMC_RECORDS_OFFSET + (u64)slot * PMC_RECORD_SIZE + 8 * word;
}

/* Recover and check a crash image of a scenario: 0 if all is well. */
static int scenario_check(const u8 *img, const char *ctx)
{
	n_states++;
	if (!recover_and_check(img, org_dur, ctx, 0, NULL, NULL))
		return 0;
	n_bad_states++;
	return 1;
}

/*
 * The crash image of the model's pmem now (@mode: which pending stores
 * land, IMG_*), recovered and checked.
 */
static int scenario_cut(int mode, const char *ctx)
{
	make_image(img_pool[0], E.pm.dur, E.pm.pend, E.pm.npend, img_size,
		   mode);
	return scenario_check(img_pool[0], ctx);
}

/* The interleaving did not come about (a broken protocol changes it). */
static void scenario_skipped(const char *name)
{
	if (verbose)
		fprintf(stderr, "scenario %s: skipped\n", name);
}

/*
 * A crash tears a record (only its last word, state and checksum, lands);
 * after recovery the slot is reused with the same seq, and a second crash
 * keeps only the new seq word: with the torn word still there, the mix is
 * the torn record exactly and passes the checksum.
 */
static u32 scen_slot, scen_word;
static int scen_bad;
static u8 *scen_img;

/* At the W4 fence of a write into scen_slot: only one record word landed. */
static void torn_seq_crash(void)
{
	u64 off = record_word(scen_slot, scen_word);

	image_with(scen_img, E.pm.dur, E.pm.pend, E.pm.npend, &off, 1);
	scen_bad = scenario_check(scen_img, scen_word == 3 ?
				  "scenario torn record" :
				  "scenario torn record, seq reused");
}

static void scenario_torn_seq(void)
{
	u32 x;

	if (!scen_img)
		scen_img = malloc(pmem_size);
	world_reset();
	cur_cpu = 0;
	op_write(7 * SPB, SPB);			/* w1 in slot X */
	x = pmc_index_lookup(&E.idx, 7);
	op_write(7 * SPB, SPB);			/* w2 elsewhere; X freed */
	/* w3 in X again: only the last word (state, checksum) lands */
	scen_slot = x;
	scen_word = 3;
	scen_bad = 1;
	capture_hook = torn_seq_crash;
	E.pm.capture_countdown = 2;		/* w3's W4 fence */
	op_write(7 * SPB, SPB);
	capture_hook = NULL;
	if (!E.pm.captured || pmc_index_lookup(&E.idx, 7) != x) {
		scenario_skipped("torn-seq");
		return;
	}
	if (scen_bad)
		return;
	restart_from(scen_img, org_dur);
	/* w4, another block, in X with w3's seq: only the seq word lands */
	cur_cpu = 0;
	scen_word = 1;
	capture_hook = torn_seq_crash;
	E.pm.capture_countdown = 2;		/* w4's W4 fence */
	op_write(9 * SPB, SPB);
	capture_hook = NULL;
	if (!E.pm.captured || pmc_index_lookup(&E.idx, 9) != x)
		scenario_skipped("torn-seq, second crash");
}

/*
 * CPU 1 drops block 5 in a discard and goes on with other blocks; CPU 0
 * writes block 5 again (no cached copy: nothing to invalidate), it is
 * written back, marked CLEAN and evicted, all fenced by their own CPUs.
 * A power cut before CPU 1 fences must not bring the dropped copy back.
 */
static void scenario_discard_window(void)
{
	u32 freed, did;

	world_reset();
	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w1 */
	cur_cpu = 1;
	did = next_disc++;
	/* pmc_io_discard()'s first block; then blocks 6, 7, ... */
	pmc_env_stripe_lock(&E, 5);
	discard_block(5, did);
	freed = pmc_io_drop(&E, &E.m, &E.idx, 5);
	pmc_env_stripe_unlock(&E, 5);
	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w2, acknowledged */
	cur_cpu = 2;
	if (wb_pass(16) != 1) {
		scenario_skipped("discard-window");
		return;
	}
	device_complete_one(1);
	cur_cpu = 3;
	wb_endio_work();			/* origin flushed, CLEAN */
	cur_cpu = 0;
	if (evict_clean(16) != 1) {
		scenario_skipped("discard-window");
		return;
	}
	scenario_cut(IMG_NONE, "scenario discard window");
	cur_cpu = 1;
	if (freed != PMC_NO_SLOT)
		free_slots(&freed, 1);
}

/*
 * Eviction takes a clean block from the clock, then its stripe lock.
 * Between the two, another CPU overwrites the block (its slot FREE and
 * back on the free list) and a write of another block takes that slot.
 * Under the lock, eviction must see that the slot changed (pmc_io_evict()
 * checks the slot word again), or it makes the new dirty block FREE.  The
 * random search rarely stalls a CPU right there.
 */
static u32 evict_scen_slot;

static void evict_window(void)
{
	int keep = cur_cpu;
	u32 ob;

	cur_cpu = 1;
	op_write(5 * SPB, SPB);			/* w2: block 5 elsewhere */
	for (ob = 7; ob < 7 + n_slots_want; ob++) {
		op_write(ob * SPB, SPB);	/* w3: a new block, dirty */
		if (pmc_slot_oblock(E.idx.slot[evict_scen_slot]) == ob &&
		    (pmc_slot_flags(E.idx.slot[evict_scen_slot]) & PMC_SF_USED))
			break;
	}
	cur_cpu = keep;
}

/*
 * Block 5 written (w1), written back and CLEAN: its slot, or PMC_NO_SLOT
 * when the scenario @name could not set that up.
 */
static u32 scenario_clean_block(const char *name)
{
	u32 x;

	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w1 */
	x = pmc_index_lookup(&E.idx, 5);
	cur_cpu = 2;
	if (x == PMC_NO_SLOT || wb_pass(16) != 1) {
		scenario_skipped(name);
		return PMC_NO_SLOT;
	}
	device_complete_one(1);
	cur_cpu = 3;
	wb_endio_work();			/* block 5 CLEAN */
	return x;
}

static void scenario_evict_recheck(void)
{
	world_reset();
	evict_scen_slot = scenario_clean_block("evict-recheck");
	if (evict_scen_slot == PMC_NO_SLOT)
		return;
	cur_cpu = 0;
	trylock_hook = evict_window;
	evict_clean(16);
	trylock_hook = NULL;
	scenario_cut(IMG_NONE, "scenario evict re-check");
}

/*
 * Writeback claims block 5 (slot X) and, before its bounce copy of X is
 * read, a write of block 5 is acknowledged (slot Y, WAITPREV; X STALE, its
 * record FREE).  The bounce copy meets a media error on one half, reads
 * the other and queues X to heal with its word as now: STALE, in
 * writeback.  The heal work then runs while X's origin write is in
 * flight.  pmc_write_heal() must refuse (its writeback exclusion): X's
 * copy committed anew, with a higher seq, would bring the old data back
 * over the acknowledged write.  The random runs rarely have a write
 * between a claim and its bounce copy.
 */
static u32 heal_scen_slot;

static void heal_window(void)
{
	int keep = cur_cpu;

	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w2, acknowledged: X STALE */
	cur_cpu = keep;
}

static void scenario_heal_in_writeback(void)
{
	u32 s;
	u64 v;

	world_reset();
	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w1 in slot X */
	heal_scen_slot = pmc_index_lookup(&E.idx, 5);
	cur_cpu = 2;
	wb_copy_hook = heal_window;
	if (heal_scen_slot == PMC_NO_SLOT || wb_pass(16) != 1 || wb_copy_hook ||
	    n_heal_q != 1 || heal_q_slot[0] != heal_scen_slot ||
	    !(pmc_slot_flags(heal_q_v[0]) & PMC_SF_STALE)) {
		wb_copy_hook = NULL;
		scenario_skipped("heal-in-writeback");
		return;
	}
	/* mirror.c's heal work, X's origin write still in flight */
	cur_cpu = 1;
	s = heal_q_slot[0];
	v = heal_q_v[0];
	n_heal_q = 0;
	if (!pmc_write_heal(&E, &E.m, &E.idx, s, v, heal_fill_cb, &s))
		n_heals++;
	scenario_cut(IMG_NONE, "scenario heal in writeback");
	/* X's write completes: X freed, Y written back later */
	device_complete_one(1);
	cur_cpu = 3;
	wb_endio_work();
	scenario_cut(IMG_NONE, "scenario heal in writeback, completed");
}

/*
 * A heal whose fill stores half of the block into the fresh slot, then
 * fails (the model's heal_fill_cb() when a read of the good copy meets a
 * media error halfway).  pmc_write_heal() gives the fresh slot back, and a
 * write of another block takes it at once, fenced and acknowledged.  The
 * heal's CPU must have fenced its stores before giving the slot back: a
 * non-temporal store of its that lands late would put garbage into the
 * acknowledged write.  The random runs rarely fail a fill halfway and
 * reuse the slot before the healing CPU fences again.
 */
static int heal_fill_half_then_fail(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	const u8 *good = pmc_meta_data(&E.m, *(u32 *)ctx);
	u32 i;

	for (i = 0; i < SPB / 2; i++)
		pmc_pmem_write(kaddr + i * PMC_SECTOR_SIZE,
			       good + i * PMC_SECTOR_SIZE, PMC_SECTOR_SIZE,
			       PMC_P_DATA);
	return -EIO;
}

static void scenario_heal_fill_fails(void)
{
	u32 x, fresh;

	world_reset();
	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w1 in slot X */
	x = pmc_index_lookup(&E.idx, 5);
	fresh = E.idx.free_head;		/* the heal's fresh slot */
	cur_cpu = 1;
	if (x == PMC_NO_SLOT ||
	    pmc_write_heal(&E, &E.m, &E.idx, x, E.idx.slot[x],
			   heal_fill_half_then_fail, &x) != -EIO) {
		scenario_skipped("heal-fill-fails");
		return;
	}
	cur_cpu = 0;
	op_write(7 * SPB, SPB);			/* w2 in the fresh slot, acked */
	if (pmc_index_lookup(&E.idx, 7) != fresh) {
		scenario_skipped("heal-fill-fails");
		return;
	}
	/* every pending store lands, the heal's (CPU 1) last */
	scenario_cut(IMG_ALL, "scenario heal fill fails");
	cur_cpu = 1;
	pmc_pmem_fence(PMC_P_DATA);
}

/*
 * --mirror.  A copy runs (target: half 1, every slot below X copied) and
 * X holds a CLEAN block, which an eviction takes out: its FREE store and
 * the unlink from the index, then the fence, all under the stripe lock.
 * Just before that fence the copy looks at X.  Unless it waits for the
 * stripe lock it passes X (out of the index) and marks it copied (R3)
 * while the FREE is not durable; a cut then leaves X's record live on
 * both halves, below the mark, and the target never got its data.  The
 * random runs rarely stall an eviction between its unlink and its fence
 * right where the copy is.
 */
static u32 resync_scen_slot;
static int resync_scen_ran;

static void resync_window(void)
{
	int keep = cur_cpu;
	u32 x = resync_scen_slot;

	cur_cpu = (int)n_writers + 2;		/* the resync work's CPU */
	resync_probe = 1;
	if (!setjmp(resync_probe_jmp)) {
		int r = pmc_resync_slot(&E, &E.m, &E.idx, R.h[0].base,
					R.h[1].base, x, R.buf);

		resync_probe = 0;
		resync_scen_ran = 1;
		R.next = x + 1;
		if (r >= 0)
			pmc_resync_batch_end(&R.h[0], &R.h[1], R.next,
					     E.m.n_blocks, 1);
		/* the cut: the eviction's FREE still pending */
		R.syncing = 0;
		check_present = 3;
		scenario_cut(IMG_NONE, "scenario resync passes an eviction");
		check_present = 0;
	}
	resync_probe = 0;
	cur_cpu = keep;
}

static void scenario_resync_passes_eviction(void)
{
	u32 x, n;
	u64 off;

	world_pair = 1;
	world_reset();
	world_pair = 0;
	x = scenario_clean_block("resync-passes-eviction");	/* slot X */
	if (x == PMC_NO_SLOT)
		return;
	/* R1, R2 from half 0; the target has every slot but X's data */
	cur_cpu = CPU_LOADER;
	pmc_mirror_resync_begin(&R.h[0], &R.h[1], E.m.cache_uuid);
	off = pmem_size + pmc_meta_data_offset(&E.m, x);
	memset(E.pm.vol + off, 0, BS);
	memset(E.pm.dur + off, 0, BS);
	for (n = 0; n < E.pm.npend; n++)
		assert(E.pm.pend[n].off < off || E.pm.pend[n].off >= off + BS);
	R.from = 0;
	R.next = x;
	R.syncing = 1;
	resync_scen_slot = x;
	resync_scen_ran = 0;
	cur_cpu = 0;
	E.pm.capture_countdown = 1;		/* the eviction's fence */
	capture_hook = resync_window;
	evict_clean(16);
	capture_hook = NULL;
	E.pm.capture_countdown = 0;
	if (resync_scen_ran)
		return;
	/* the copy waited for the stripe lock: now it looks at X, cut */
	cur_cpu = (int)n_writers + 2;
	mirror_copy_batch(&E, &E.m, &E.idx, R.h, 0, &R.next, 1, 1, R.buf);
	R.syncing = 0;
	check_present = 3;
	scenario_cut(IMG_NONE, "scenario resync passes an eviction");
	check_present = 0;
}

/*
 * --mirror.  A copy from half 1 to half 0 runs; writeback claims block 5
 * (slot X, not yet copied) and, before it reads X, a write of block 5 is
 * acknowledged (X STALE, its record FREE, still under writeback), the
 * copy runs to its end and reads move to half 0.  Writeback then reads X
 * there: the copy must have copied X although it maps no block any more.
 * The random runs rarely end a copy between a claim and its read.
 */
static void stale_window(void)
{
	int keep = cur_cpu;

	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w2, acknowledged: X STALE */
	cur_cpu = (int)n_writers + 2;		/* the resync work, to its end */
	while (!mirror_copy_batch(&E, &E.m, &E.idx, R.h, 1, &R.next, 4, 4,
				  R.buf))
		;
	R.syncing = 0;
	cur_cpu = keep;
}

static void scenario_resync_of_a_stale_slot(void)
{
	u32 x;
	u64 off;

	world_pair = 1;
	world_reset();
	world_pair = 0;
	cur_cpu = 0;
	op_write(5 * SPB, SPB);			/* w1 in slot X */
	x = pmc_index_lookup(&E.idx, 5);
	if (x == PMC_NO_SLOT) {
		scenario_skipped("resync-of-a-stale-slot");
		return;
	}
	/* R1, R2 from half 1; reads from it; half 0 lacks X's data */
	cur_cpu = CPU_LOADER;
	pmc_mirror_resync_begin(&R.h[1], &R.h[0], E.m.cache_uuid);
	E.m.base = R.h[1].base;
	off = pmc_meta_data_offset(&E.m, x);
	memset(E.pm.vol + off, 0, BS);
	memset(E.pm.dur + off, 0, BS);
	R.from = 1;
	R.next = 0;
	R.syncing = 1;
	cur_cpu = 2;
	wb_copy_hook = stale_window;
	if (wb_pass(16) != 1 || wb_copy_hook) {
		wb_copy_hook = NULL;
		scenario_skipped("resync-of-a-stale-slot");
	}
	R.syncing = 0;
	cur_cpu = CPU_LOADER;
}

static void run_mirror_scenarios(void)
{
	scripted = 1;
	scenario_resync_passes_eviction();
	scenario_resync_of_a_stale_slot();
	scripted = 0;
	cur_cpu = CPU_LOADER;
}

static void run_scenarios(void)
{
	scripted = 1;
	scenario_torn_seq();
	scenario_discard_window();
	scenario_evict_recheck();
	scenario_heal_in_writeback();
	scenario_heal_fill_fails();
	scripted = 0;
	cur_cpu = CPU_LOADER;
}

/* ------------------------------------------------------------------ */
/* scheduler                                                          */

static int runnable(u32 i)
{
	struct cpu *c = &cpus[i];

	return !c->finished && (!c->wait || c->wait(c->wait_arg));
}

static void dump_state(void)
{
	u32 i;

	fprintf(stderr, "ops_left %u n_free %llu infl %u done %u org_pend %u\n",
		E.ops_left, (unsigned long long)E.idx.n_free, n_dev_infl,
		n_dev_done, n_org_pend);
	for (i = 0; i < ncpu; i++)
		fprintf(stderr, "cpu %u %s prio %u wait %p fin %d\n", i,
			cpus[i].name, cpus[i].prio, (void *)cpus[i].wait,
			cpus[i].finished);
	for (i = 0; i < E.m.n_blocks; i++) {
		u64 v = E.idx.slot[i];

		fprintf(stderr, "slot %u ob %llu mask %x flags %x\n", i,
			(unsigned long long)pmc_slot_oblock(v), pmc_slot_mask(v),
			pmc_slot_flags(v));
	}
}

static void run_workload(void)
{
	u64 idle_streak = 0;

	phase = PH_WORKLOAD;
	for (;;) {
		u32 i, best = MAX_CPUS, writers_left = 0;

		if (done_after_violation() || stop_all)
			break;
		for (i = 0; i < ncpu; i++) {
			if (i < n_writers && !cpus[i].finished)
				writers_left++;
			if (runnable(i) && (best == MAX_CPUS ||
					    cpus[i].prio > cpus[best].prio))
				best = i;
		}
		if (!writers_left)
			break;
		if (best == MAX_CPUS && n_dev_infl) {
			device_complete_one(1);
			continue;
		}
		if (best == MAX_CPUS) {
			fprintf(stderr, "model deadlock: no CPU can run\n");
			abort();
		}
		cur_cpu = (int)best;
		n_switches++;
		swapcontext(&main_ctx, &cpus[best].ctx);
		cur_cpu = CPU_LOADER;
		PM = &E.pm;

		switch (yield_why) {
		case Y_FENCE:
			snapshot("at fence");
			break;
		case Y_STORE:
			if (rndn(100) < snapshot_store_pct)
				snapshot("between fences");
			break;
		case Y_IDLE:
			/*
			 * Nothing to do: let the others run, the other idle
			 * ones (priority below 50) first.
			 */
			cpus[best].prio = 0;
			for (i = 0; i < ncpu; i++)
				if (i != best && cpus[i].prio < 50)
					cpus[i].prio = 1 + rndn(49);
			sched_step++;
			if (n_dev_infl)
				device_complete_one(0);
			if (++idle_streak > 1000000) {
				fprintf(stderr, "model livelock\n");
				dump_state();
				abort();
			}
			continue;
		case Y_DONE:
			cpus[best].finished = 1;
			break;
		default:
			break;
		}
		idle_streak = 0;
		/* The origin completes what is due, now and then. */
		sched_step++;
		if (n_dev_infl && rndn(4) == 0)
			device_complete_one(0);
		/* PCT: now and then a CPU gets a new priority. */
		if (rndn(sched_change) == 0)
			cpus[best].prio = 50 + rndn(1000);
	}
	phase = PH_NONE;
	cur_cpu = CPU_LOADER;
}

/* ------------------------------------------------------------------ */
/* format crash test                                                  */

static struct pmodel fm;
static u8 fm_uuid_before[16];
static u64 fm_magic_before;

/* Is @img a finished format: the documented layout, nothing live? */
static int format_layout_bad(const u8 *img)
{
	struct pmodel *saved = PM;
	struct pmodel *rm = &rm_pool[0];
	struct pmc_meta m;
	struct pmc_index idx;
	struct pmc_recover_stats st;
	const char *why;
	u64 i;
	int r, bad = 0;

	pm_load(rm, img);
	PM = rm;
	r = pmc_meta_open(&m, rm->vol, pmem_size, BS, &oid, &why);
	if (r) {
		PM = saved;
		return 1;
	}
	for (i = sizeof(struct pmc_super); i < PMC_SUPER_AREA; i++)
		if (img[i])
			bad = 1;
	pmc_index_init(&idx, m.n_blocks);
	pmc_meta_recover(&m, &idx, &st);
	if (st.live || st.torn || st.superseded)
		bad = 1;
	pmc_index_destroy(&idx);
	PM = saved;
	return bad;
}

/* A crash in the middle of a format: load must work or format again. */
static void format_check(const u8 *img, const char *ctx, int finished)
{
	struct pmodel *saved = PM;
	struct pmodel *rm = &rm_pool[0];
	struct pmc_meta m;
	const char *why;
	u64 magic;
	int r, bad = 0;

	n_format_states++;
	pm_load(rm, img);
	PM = rm;
	r = pmc_meta_open(&m, rm->vol, pmem_size, BS, &oid, &why);
	PM = saved;
	memcpy(&magic, img, 8);
	if (finished) {
		/* format returned: the cache exists, empty, as documented */
		bad = r != 0 || format_layout_bad(img);
	} else if (r == 0) {
		/* the old cache (untouched) or the new one (complete) */
		if (memcmp(m.cache_uuid, fm_uuid_before, 16))
			bad = format_layout_bad(img);
	} else if (r != -ENODATA) {
		/* refused: only if the format never began (F1 not durable) */
		bad = magic != fm_magic_before || magic == PMC_MAGIC;
	}
	if (bad) {
		n_violations++;
		if (report_left-- > 0)
			fprintf(stderr, "VIOLATION (format %s): open %d %s\n",
				ctx, r, why ? why : "(layout)");
	}
}

static void format_event(int is_fence)
{
	u8 *img = img_pool[1];

	if (!is_fence && rndn(100) >= 3)
		return;
	make_image(img, fm.dur, fm.pend, fm.npend, pmem_size,
		   (int)rndn(IMG_NR));
	format_check(img, is_fence ? "at fence" : "between fences", 0);
}

static void format_crashes(u32 rounds)
{
	u8 *img = img_pool[0];
	u32 k;

	pm_init(&fm, pmem_size);
	for (k = 0; k < rounds; k++) {
		struct pmc_meta m;
		u32 start = k % 3;

		cur_cpu = CPU_LOADER;
		memset(img, 0, pmem_size);
		pm_load(&fm, img);
		PM = &fm;
		work_pm = &fm;
		/* Start from a blank namespace, an older cache or foreign data. */
		if (start == 1) {
			struct pmc_index idx;
			struct pmc_recover_stats st;
			struct fill_ctx c = { .id = 1, .mask = 0xff, .oblock = 3 };
			const char *why;
			u32 freed, slot;

			pmc_meta_format(&m, fm.vol, pmem_size, BS, &oid);
			pmc_meta_open(&m, fm.vol, pmem_size, BS, &oid, &why);
			pmc_index_init(&idx, m.n_blocks);
			pmc_meta_recover(&m, &idx, &st);
			slot = pmc_index_pop_free(&idx);
			if (slot != PMC_NO_SLOT)
				pmc_meta_write_block(&m, &idx, 3, 0xff, slot, 0,
						     fill_cb, &c, &freed);
			pmc_index_destroy(&idx);
		} else if (start == 2) {
			pmc_random_bytes(fm.vol, pmem_size);
		}
		pm_load(&fm, fm.vol);
		memcpy(&fm_magic_before, fm.vol, 8);
		memcpy(fm_uuid_before, fm.vol + offsetof(struct pmc_super, cache_uuid),
		       16);
		format_fence_count = 0;
		phase = PH_FORMAT;
		pmc_meta_format(&m, fm.vol, pmem_size, BS, &oid);
		phase = PH_NONE;
		/* Format has returned: whatever is still pending may be lost. */
		make_image(img, fm.dur, fm.pend, fm.npend, pmem_size,
			   (int)rndn(IMG_NR));
		format_check(img, "after format", 1);
		if (done_after_violation())
			break;
	}
	work_pm = NULL;
}

/* ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr,
		"usage: crash_model [--ops N] [--seed S] [--writers W] [--images K] [--store-pct P]\n"
		"                   [--media-errors PERMILLE] [--restarts PERMILLE] [--stop-at-first]\n"
		"                   [--data-only] [--mirror] [--data-crc]\n"
		"                   [--format-rounds N]\n"
		"                   [--break data-fence|record-fence|free-fence|data-flush|record-flush|\n"
		"                            format-order]\n"
		"                   [-v]\n");
	exit(2);
}

static const char *const brk_names[] = {
	[BRK_DATA_FENCE] = "data-fence",
	[BRK_RECORD_FENCE] = "record-fence",
	[BRK_FREE_FENCE] = "free-fence",
	[BRK_DATA_FLUSH] = "data-flush",
	[BRK_RECORD_FLUSH] = "record-flush",
	[BRK_FORMAT_ORDER] = "format-order",
};

int main(int argc, char **argv)
{
	u32 ops = 400, i, s, k;
	u64 seed = 1;
	clock_t t0 = clock();

	for (i = 1; i < (u32)argc; i++) {
		const char *a = argv[i];
		int more = i + 1 < (u32)argc;

		if (!strcmp(a, "--ops") && more)
			ops = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--seed") && more)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(a, "--writers") && more)
			n_writers = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--images") && more)
			images_per_snapshot = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--store-pct") && more)
			snapshot_store_pct = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--media-errors") && more)
			media_err_permille = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--restarts") && more)
			restart_permille = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--format-rounds") && more)
			format_rounds = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(a, "--stop-at-first"))
			stop_at_first = 1;
		else if (!strcmp(a, "--data-only"))
			data_only = 1;
		else if (!strcmp(a, "--mirror"))
			mirror = 1;
		else if (!strcmp(a, "--data-crc"))
			features = PMC_FEATURE_DATA_CRC;
		else if (!strcmp(a, "--break") && more) {
			const char *b = argv[++i];

			for (k = 1; k < ARRAY_SIZE(brk_names); k++)
				if (!strcmp(b, brk_names[k]))
					brk = (enum brk)k;
			if (brk == BRK_NONE)
				usage();
		} else if (!strcmp(a, "-v")) {
			verbose++;
		} else if (!strcmp(a, "-vv")) {
			verbose = 2;
		} else {
			usage();
		}
	}
	if (n_writers < 1 || n_writers + 2 + mirror > MAX_CPUS)
		usage();
	rng_state ^= seed * 0x9e3779b97f4a7c15ULL;
	if (!rng_state)
		rng_state = 1;

	nsec = n_oblocks * SPB;
	pmem_size = 2 * PMC_DATA_ALIGN + (size_t)n_slots_want * BS;
	org_dur = calloc(nsec, sizeof(u32));
	org_vis = calloc(nsec, sizeof(u32));
	evs = calloc(nsec, sizeof(*evs));
	ever = calloc(nsec, sizeof(*ever));
	disc_t = calloc(nsec, sizeof(*disc_t));
	for (s = 0; s < nsec; s++)
		ev_reset(s, 0);
	oid.sectors = (u64)nsec;
	memset(oid.uuid, 0x5a, sizeof(oid.uuid));
	img_size = mirror ? 2 * pmem_size : pmem_size;
	max_depth = mirror ? 3 : 2;
	for (i = 0; i < MAX_DEPTH; i++)
		pm_init(&rm_pool[i], img_size);
	for (i = 0; i <= MAX_DEPTH; i++)
		img_pool[i] = malloc(img_size);

	format_crashes(format_rounds ? format_rounds :
		       ops / 2 + 50 < 5000 ? ops / 2 + 50 : 5000);
	if (!done_after_violation())
		mirror ? run_mirror_scenarios() : run_scenarios();

	/* The cache is formatted and loaded on the loader CPU. */
	world_reset();
	E.ops_left = ops;
	cpus_init();
	if (!done_after_violation())
		run_workload();

	/* Clean shutdown: everything durable; recover and check once more. */
	if (!done_after_violation()) {
		u8 *img = img_pool[0];

		make_image(img, E.pm.dur, E.pm.pend, E.pm.npend, img_size,
			   IMG_ALL);
		n_states++;
		if (recover_and_check(img, org_vis, "final", 0, NULL, NULL))
			n_bad_states++;
	}

	printf("mode=%s ops=%u seed=%llu cpus=%u writers=%u snapshots=%llu nested=%llu restarts=%llu switches=%llu time=%.2fs\n",
	       brk == BRK_NONE ? "correct" : "broken", ops,
	       (unsigned long long)seed, ncpu, n_writers,
	       (unsigned long long)n_snapshots, (unsigned long long)n_nested,
	       (unsigned long long)n_restarts, (unsigned long long)n_switches,
	       (double)(clock() - t0) / CLOCKS_PER_SEC);
	printf("acked_writes=%llu failed_writes=%llu writebacks=%llu evictions=%llu media_errors=%llu\n",
	       (unsigned long long)n_acked_writes,
	       (unsigned long long)n_failed_writes,
	       (unsigned long long)n_wb_done, (unsigned long long)n_evicted,
	       (unsigned long long)n_media_errors);
	printf("arounds=%llu throughs=%llu full_cache=%llu origin_write_failures=%llu\n",
	       (unsigned long long)n_around, (unsigned long long)n_through,
	       (unsigned long long)n_full, (unsigned long long)n_origin_failed);
	printf("wb_merged_writes=%llu wb_no_memory=%llu wb_unsent=%llu wb_failed_writes=%llu partial_reads=%llu heals=%llu wb_heals_queued=%llu\n",
	       (unsigned long long)n_wb_merged, (unsigned long long)n_wb_nomem,
	       (unsigned long long)n_wb_unsent, (unsigned long long)n_wb_failed,
	       (unsigned long long)n_partial_reads, (unsigned long long)n_heals,
	       (unsigned long long)n_wb_heals_queued);
	if (mirror)
		printf("mirror_starts=%llu copies=%llu copies_done=%llu resumed_at_mark=%llu halves_lost=%llu refused=%llu replaced=%llu ran_alone=%llu alone_checked=%llu\n",
		       (unsigned long long)n_mirror_starts,
		       (unsigned long long)n_copies,
		       (unsigned long long)n_copies_done,
		       (unsigned long long)n_marks_resumed,
		       (unsigned long long)n_half_lost,
		       (unsigned long long)n_refused,
		       (unsigned long long)n_replaced,
		       (unsigned long long)n_ran_alone,
		       (unsigned long long)n_alone_checked);
	if (features)
		printf("data_crcs_checked=%llu\n", (unsigned long long)n_crc_checked);
	printf("crash_states=%llu format_states=%llu bad_states=%llu violations=%llu\n",
	       (unsigned long long)n_states,
	       (unsigned long long)n_format_states,
	       (unsigned long long)n_bad_states,
	       (unsigned long long)n_violations);
	return n_violations ? 1 : 0;
}
