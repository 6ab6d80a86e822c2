// SPDX-License-Identifier: GPL-2.0
/*
 * Host crash-consistency model of the dm-pmemcache commit protocol.
 *
 * The module's shared metadata code (pmc_meta.c, pmc_index.c) is compiled
 * here against a model of pmem in which every store stays volatile until
 * it has been flushed AND a later fence has completed.  A random workload
 * (writes, overwrites, sub-block writes, spanning writes, discards,
 * flushes, asynchronous writeback with errors, eviction) runs on it; at
 * every fence and at random stores between, the harness takes a snapshot
 * and builds several crash images from it: the durable image plus a
 * random subset of the not-yet-durable stores, either whole cache lines
 * (each line cut at a random point of its store history) or torn 8-byte
 * words, plus the two extremes (nothing / everything).  Each image is
 * recovered with the module's recovery code and checked:
 *
 *   - open and recovery never fail;
 *   - every sector reads back the last acknowledged write, or the write in
 *     flight at the crash, or (after a discard) some value once written to
 *     it; anything else is garbage or a lost write: a violation;
 *   - the recovered index is consistent (free + live + bad == blocks);
 *   - optionally a crash during recovery, then recovery again;
 *   - optionally new writes after recovery, a clean crash, recovery: the
 *     new writes must win (sequence numbers continue correctly).
 *
 * --break=STEP removes one fence or flush of the protocol on purpose; the
 * checker must then report violations.
 *
 * Output (last line): crash_states=N violations=V format_states=F ...
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <time.h>

#include "pmc_meta.h"

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
/* pmem model                                                         */

struct pend {
	u64 off;		/* byte offset, 8-aligned */
	u64 val;
	int flushed;
};

struct pmodel {
	u8 *vol;		/* what the CPU sees */
	u8 *dur;		/* what survives power loss for sure */
	size_t size;
	struct pend *pend;
	size_t npend, cap;
	/* nested-crash capture (crash during recovery) */
	int capture_countdown;	/* capture at the Nth fence from now */
	u8 *cap_dur;
	struct pend *cap_pend;
	size_t cap_npend;
};

static struct pmodel *PM;	/* the model the shim talks to */

enum brk {
	BRK_NONE,
	BRK_DATA_FENCE,		/* skip W2 */
	BRK_RECORD_FENCE,	/* skip W4 */
	BRK_FREE_FENCE,		/* skip W6 and the eviction/discard fences */
	BRK_DATA_FLUSH,		/* data stores are never flushed */
	BRK_RECORD_FLUSH,	/* record stores are never flushed */
	BRK_FORMAT_ORDER,	/* skip the fence before the format commit */
	BRK_WAITPREV,		/* write back a block while an older copy is in flight */
};

static enum brk brk;
static int in_workload;	/* snapshots only while the workload runs */

static void on_event(int is_fence);

static void pm_init(struct pmodel *p, size_t size)
{
	memset(p, 0, sizeof(*p));
	p->size = size;
	p->vol = calloc(1, size);
	p->dur = calloc(1, size);
	p->cap = 1024;
	p->pend = malloc(p->cap * sizeof(*p->pend));
	assert(p->vol && p->dur && p->pend);
}

static void pm_free(struct pmodel *p)
{
	free(p->vol);
	free(p->dur);
	free(p->pend);
	free(p->cap_dur);
	free(p->cap_pend);
	memset(p, 0, sizeof(*p));
}

static void pm_add(struct pmodel *p, u64 off, u64 val, int flushed)
{
	if (p->npend == p->cap) {
		p->cap *= 2;
		p->pend = realloc(p->pend, p->cap * sizeof(*p->pend));
		assert(p->pend);
	}
	p->pend[p->npend].off = off;
	p->pend[p->npend].val = val;
	p->pend[p->npend].flushed = flushed;
	p->npend++;
}

static int tag_flushed(enum pmc_ptag tag)
{
	if (brk == BRK_DATA_FLUSH && tag == PMC_P_DATA)
		return 0;
	if (brk == BRK_RECORD_FLUSH && tag == PMC_P_RECORD)
		return 0;
	return 1;
}

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	u64 off = (u8 *)dst - PM->vol;
	size_t i;

	assert(off % 8 == 0 && len % 8 == 0 && off + len <= PM->size);
	memcpy(PM->vol + off, src, len);
	for (i = 0; i < len; i += 8) {
		u64 v;

		memcpy(&v, (const u8 *)src + i, 8);
		pm_add(PM, off + i, v, tag_flushed(tag));
	}
	on_event(0);
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

static void pm_capture(struct pmodel *p)
{
	p->cap_dur = malloc(p->size);
	memcpy(p->cap_dur, p->dur, p->size);
	p->cap_npend = p->npend;
	p->cap_pend = malloc((p->npend + 1) * sizeof(*p->pend));
	memcpy(p->cap_pend, p->pend, p->npend * sizeof(*p->pend));
}

static void pm_fence(struct pmodel *p)
{
	size_t i, j = 0;

	for (i = 0; i < p->npend; i++) {
		if (p->pend[i].flushed)
			memcpy(p->dur + p->pend[i].off, &p->pend[i].val, 8);
		else
			p->pend[j++] = p->pend[i];
	}
	p->npend = j;
}

static int format_fence_count;

void pmc_pmem_fence(enum pmc_ptag tag)
{
	if (PM->capture_countdown > 0 && --PM->capture_countdown == 0)
		pm_capture(PM);
	on_event(1);		/* crash "at" the fence: before it completes */
	if (tag == PMC_P_FORMAT && brk == BRK_FORMAT_ORDER &&
	    ++format_fence_count == 2)
		return;
	if (tag_fence_skipped(tag))
		return;
	pm_fence(PM);
}

static int media_error_off = -1;

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	u64 off = (const u8 *)src - PM->vol;

	assert(off + len <= PM->size);
	if (media_error_off >= 0 && (u64)media_error_off >= off &&
	    (u64)media_error_off < off + len)
		return -EIO;
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

static int verbose;

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
/* geometry and oracle                                                */

#define BS		4096U
#define SPB		(BS / PMC_SECTOR_SIZE)
#define WORDS		(PMC_SECTOR_SIZE / 8)

static u32 n_oblocks = 40;	/* origin blocks */
static u32 n_slots_want = 16;	/* cache blocks */
static u32 nsec;
static size_t pmem_size;

static u8 *origin;		/* origin contents (FUA writes: durable) */

struct hist {
	u32 *ids;
	u32 n, cap;
};

static u32 *acked;		/* last acknowledged write id per sector */
static u8 *undef;		/* discarded since the last acked write */
static struct hist *hist;	/* every id ever written per sector */

/* The operation in flight (not acknowledged) at a crash. */
static struct {
	int kind;		/* 0 none, 1 write, 2 discard */
	u32 id, s0, ns;
} inprog;

static u32 next_id = 1;

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

static void hist_add(u32 s, u32 id)
{
	struct hist *h = &hist[s];

	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 8;
		h->ids = realloc(h->ids, h->cap * sizeof(u32));
	}
	h->ids[h->n++] = id;
}

static int hist_has(u32 s, u32 id)
{
	u32 i;

	if (id == 0)
		return 1;
	for (i = 0; i < hist[s].n; i++)
		if (hist[s].ids[i] == id)
			return 1;
	return 0;
}

/* ------------------------------------------------------------------ */
/* engine: the same decisions as the kernel's io.c / writeback.c        */

struct engine {
	struct pmodel pm;
	struct pmc_meta m;
	struct pmc_index idx;
	u32 clock;		/* eviction / writeback scan hand */
};

static struct engine E;

struct inflight {
	u32 slot;
	u8 data[BS];
	u32 mask;
	u64 oblock;
};

static struct inflight *infl;
static u32 n_infl, cap_infl;

struct fill_ctx {
	u32 id, s0, mask;
	u64 oblock;
};

static int fill_cb(void *ctx, u8 *kaddr)
{
	struct fill_ctx *c = ctx;
	u8 buf[PMC_SECTOR_SIZE];
	u32 i;

	for (i = 0; i < SPB; i++) {
		if (!(c->mask & (1U << i)))
			continue;
		fill_sector(buf, c->id, (u32)(c->oblock * SPB + i));
		pmc_pmem_write(kaddr + i * PMC_SECTOR_SIZE, buf, sizeof(buf),
			       PMC_P_DATA);
	}
	return 0;
}

static void wb_complete_one(u32 k, int ok);

static int evict_some(void)
{
	u32 tries, got = 0, victims[4];
	u32 i;

	for (tries = 0; tries < E.m.n_blocks && got < 4; tries++) {
		u32 s = E.clock++ % (u32)E.m.n_blocks;
		u32 f = pmc_slot_flags(E.idx.slot[s]);

		if ((f & PMC_SF_USED) &&
		    !(f & (PMC_SF_DIRTY | PMC_SF_WB | PMC_SF_STALE)))
			victims[got++] = s;
	}
	for (i = 0; i < got; i++)
		pmc_meta_evict(&E.m, &E.idx, victims[i]);
	if (got) {
		/* E2: records durably dead before the slots are reused. */
		pmc_meta_fence(PMC_P_FREE);
		for (i = 0; i < got; i++)
			pmc_index_push_free(&E.idx, victims[i]);
	}
	return got;
}

static void wb_start_some(u32 max);

static u32 alloc_slot(void)
{
	u32 s;

	for (;;) {
		s = pmc_index_pop_free(&E.idx);
		if (s != PMC_NO_SLOT)
			return s;
		if (evict_some())
			continue;
		if (n_infl) {
			wb_complete_one(rndn(n_infl), 1);
			continue;
		}
		wb_start_some(4);
		assert(n_infl);
	}
}

static void op_write(u32 s0, u32 ns)
{
	u32 id = next_id++, s, i;

	inprog.kind = 1;
	inprog.id = id;
	inprog.s0 = s0;
	inprog.ns = ns;
	for (s = s0; s < s0 + ns;) {
		u64 ob = s / SPB;
		u32 first = s % SPB, cnt = SPB - first, mask, slot, freed;
		struct fill_ctx c;
		int r;

		if (cnt > s0 + ns - s)
			cnt = s0 + ns - s;
		mask = ((1U << cnt) - 1) << first;
		slot = alloc_slot();
		c.id = id;
		c.mask = mask;
		c.oblock = ob;
		c.s0 = s;
		r = pmc_meta_write_block(&E.m, &E.idx, ob, mask, slot, 0,
					 fill_cb, &c, &freed);
		assert(r == 0);
		if (freed != PMC_NO_SLOT)
			pmc_index_push_free(&E.idx, freed);
		s += cnt;
	}
	/* acknowledged */
	inprog.kind = 0;
	for (i = s0; i < s0 + ns; i++) {
		acked[i] = id;
		undef[i] = 0;
		hist_add(i, id);
	}
}

static void op_discard(u32 s0, u32 ns)
{
	u32 ob, first = (s0 + SPB - 1) / SPB, last = (s0 + ns) / SPB;
	u32 freed[64], nf = 0, i;

	inprog.kind = 2;
	inprog.s0 = s0;
	inprog.ns = ns;
	/* Only whole blocks are dropped; partial blocks keep their data. */
	for (ob = first; ob < last; ob++) {
		u32 f;

		pmc_meta_drop_block(&E.m, &E.idx, ob, &f);
		if (f != PMC_NO_SLOT)
			freed[nf++] = f;
	}
	pmc_meta_fence(PMC_P_FREE);
	for (i = 0; i < nf; i++)
		pmc_index_push_free(&E.idx, freed[i]);
	/* The origin ignores the discard (allowed: contents undefined). */
	inprog.kind = 0;
	for (i = s0; i < s0 + ns; i++)
		undef[i] = 1;
}

static int cmp_oblock(const void *a, const void *b)
{
	u64 x = pmc_slot_oblock(E.idx.slot[*(const u32 *)a]);
	u64 y = pmc_slot_oblock(E.idx.slot[*(const u32 *)b]);

	return x < y ? -1 : x > y;
}

static void wb_start_some(u32 max)
{
	u32 pick[16], n = 0, tries, i;

	for (tries = 0; tries < E.m.n_blocks && n < max; tries++) {
		u32 s = E.clock++ % (u32)E.m.n_blocks;
		u32 f = pmc_slot_flags(E.idx.slot[s]);

		if (brk == BRK_WAITPREV)
			f &= ~PMC_SF_WAITPREV;
		if ((f & PMC_SF_USED) && (f & PMC_SF_DIRTY) &&
		    !(f & (PMC_SF_WB | PMC_SF_STALE | PMC_SF_WAITPREV)))
			pick[n++] = s;
	}
	qsort(pick, n, sizeof(u32), cmp_oblock);
	for (i = 0; i < n; i++) {
		struct inflight *w;
		u64 v = E.idx.slot[pick[i]];

		if (n_infl == cap_infl) {
			cap_infl = cap_infl ? cap_infl * 2 : 16;
			infl = realloc(infl, cap_infl * sizeof(*infl));
		}
		w = &infl[n_infl++];
		pmc_meta_wb_start(&E.idx, pick[i]);
		w->slot = pick[i];
		w->mask = pmc_slot_mask(v);
		w->oblock = pmc_slot_oblock(v);
		/* The origin DMA reads pmem while the slot is pinned. */
		memcpy(w->data, pmc_meta_data(&E.m, pick[i]), BS);
	}
}

/* Origin write completes (FUA), then the completion marks it clean. */
static void wb_complete_one(u32 k, int ok)
{
	struct inflight w = infl[k];
	u32 i, freed;
	int r;

	infl[k] = infl[--n_infl];
	for (i = 0; i < SPB; i++) {
		if (!(w.mask & (1U << i)))
			continue;
		/* A failed origin write may still have written some sectors. */
		if (ok || rndn(2))
			memcpy(origin + (w.oblock * SPB + i) * PMC_SECTOR_SIZE,
			       w.data + i * PMC_SECTOR_SIZE, PMC_SECTOR_SIZE);
	}
	r = pmc_meta_wb_done(&E.m, &E.idx, w.slot, ok, &freed);
	assert(r == 0);
	pmc_meta_fence(PMC_P_CLEAN);
	if (freed != PMC_NO_SLOT)
		pmc_index_push_free(&E.idx, freed);
}

/* Read one sector through the engine's read path on a recovered state. */
static const u8 *read_sector(struct pmc_meta *m, struct pmc_index *idx,
			     const u8 *org, u32 s)
{
	u32 slot = pmc_index_lookup(idx, s / SPB);

	if (slot != PMC_NO_SLOT &&
	    (pmc_slot_mask(idx->slot[slot]) & (1U << (s % SPB))))
		return pmc_meta_data(m, slot) + (s % SPB) * PMC_SECTOR_SIZE;
	return org + (u64)s * PMC_SECTOR_SIZE;
}

/* ------------------------------------------------------------------ */
/* crash states                                                       */

static u64 n_states, n_violations, n_format_states, n_nested, n_post;
static u64 n_snapshots;
static u32 images_per_snapshot = 3;
static u32 snapshot_store_pct = 8;
static int report_left = 5;

static void violation(const char *what, u32 s, long got, const char *ctx)
{
	n_violations++;
	if (report_left > 0) {
		report_left--;
		fprintf(stderr,
			"VIOLATION (%s): %s sector %u got %ld acked %u undef %u inprog %d/%u [%u+%u]\n",
			ctx, what, s, got, acked[s], undef[s], inprog.kind,
			inprog.id, inprog.s0, inprog.ns);
	}
}

static int cmp_pend_off(const void *a, const void *b)
{
	const struct pend *x = *(const struct pend * const *)a;
	const struct pend *y = *(const struct pend * const *)b;

	if (x->off != y->off)
		return x->off < y->off ? -1 : 1;
	return x < y ? -1 : x > y;	/* program order */
}

/*
 * Build a crash image: @dur plus a choice of the pending stores.  Mode 0:
 * nothing; 1: everything; 2: per 8-byte word, a random prefix of its
 * store history; 3: per 64-byte line, a random prefix (whole-line
 * write-backs, as a cache eviction or clwb would do).
 */
static void make_image(u8 *img, const u8 *dur, struct pend *pend, size_t np,
		       size_t size, int mode)
{
	struct pend **v;
	size_t i, j;

	memcpy(img, dur, size);
	if (!np || mode == 0)
		return;
	if (mode == 1) {
		for (i = 0; i < np; i++)
			memcpy(img + pend[i].off, &pend[i].val, 8);
		return;
	}
	v = malloc(np * sizeof(*v));
	for (i = 0; i < np; i++)
		v[i] = &pend[i];
	if (mode == 2) {
		qsort(v, np, sizeof(*v), cmp_pend_off);
		for (i = 0; i < np; i = j) {
			size_t n, k;

			for (j = i; j < np && v[j]->off == v[i]->off; j++)
				;
			n = j - i;
			k = rndn((u32)n + 1);
			if (k)
				memcpy(img + v[i]->off, &v[i + k - 1]->val, 8);
		}
	} else {
		/* group by line, keep program order inside a line */
		for (i = 0; i < np; i++) {
			u64 line = pend[i].off / 64;
			size_t cnt = 0, cut, seen = 0;

			if (!v[i])
				continue;
			for (j = i; j < np; j++)
				if (v[j] && pend[j].off / 64 == line)
					cnt++;
			cut = rndn((u32)cnt + 1);
			for (j = i; j < np; j++) {
				if (!v[j] || pend[j].off / 64 != line)
					continue;
				if (seen++ < cut)
					memcpy(img + pend[j].off, &pend[j].val, 8);
				v[j] = NULL;
			}
		}
	}
	free(v);
}

static struct pmc_origin_id oid = { .kind = PMC_ORIGIN_ID_MD };

static int check_state(struct pmc_meta *m, struct pmc_index *idx,
		       const u8 *org, const char *ctx);

/* Recover @img (in a fresh model) and check it.  0 = ok. */
static u64 n_bad_states;

static int recover_and_check(const u8 *img, const u8 *org, const char *ctx,
			     int allow_nested, int allow_post)
{
	struct pmodel rm, *saved = PM;
	struct pmc_meta m;
	struct pmc_index idx;
	struct pmc_recover_stats st;
	const char *why;
	int r, bad = 0;

	pm_init(&rm, pmem_size);
	memcpy(rm.vol, img, pmem_size);
	memcpy(rm.dur, img, pmem_size);
	PM = &rm;
	if (allow_nested && rndn(3) == 0)
		rm.capture_countdown = 1;
	r = pmc_meta_open(&m, rm.vol, pmem_size, BS, &oid, &why);
	if (r) {
		n_violations++;
		fprintf(stderr, "VIOLATION (%s): open failed %d %s\n", ctx, r,
			why ? why : "");
		PM = saved;
		pm_free(&rm);
		return 1;
	}
	r = pmc_index_init(&idx, m.n_blocks);
	assert(!r);
	r = pmc_meta_recover(&m, &idx, &st);
	if (r) {
		n_violations++;
		fprintf(stderr, "VIOLATION (%s): recovery failed %d\n", ctx, r);
		bad = 1;
	} else {
		u64 used = 0, i;

		for (i = 0; i < m.n_blocks; i++)
			if (pmc_slot_flags(idx.slot[i]) & PMC_SF_USED)
				used++;
		if (used + idx.n_free != m.n_blocks) {
			n_violations++;
			fprintf(stderr, "VIOLATION (%s): index inconsistent\n",
				ctx);
			bad = 1;
		}
		if (!bad)
			bad = check_state(&m, &idx, org, ctx);
	}
	if (!bad && rm.cap_dur) {
		/* A crash during recovery: recover that state again. */
		u8 *img2 = malloc(pmem_size);

		make_image(img2, rm.cap_dur, rm.cap_pend, rm.cap_npend,
			   pmem_size, 2 + rndn(2));
		n_nested++;
		PM = saved;
		bad = recover_and_check(img2, org, "nested", 0, 0);
		free(img2);
		PM = &rm;
	}
	if (!bad && allow_post && rndn(4) == 0) {
		/* Keep going after recovery: new writes must win later. */
		struct engine save_e = E;
		u32 s, k, ids[4], secs[4];
		u8 *img3;

		E.pm = rm;
		E.m = m;
		E.idx = idx;
		PM = &E.pm;
		for (k = 0; k < 4; k++) {
			u32 slot, freed;
			struct fill_ctx c;

			s = rndn(nsec);
			secs[k] = s;
			ids[k] = 0x80000000U | next_id++;
			c.id = ids[k];
			c.oblock = s / SPB;
			c.mask = 1U << (s % SPB);
			slot = pmc_index_pop_free(&E.idx);
			if (slot == PMC_NO_SLOT) {
				if (!evict_some())
					break;
				slot = pmc_index_pop_free(&E.idx);
			}
			r = pmc_meta_write_block(&E.m, &E.idx, c.oblock,
						 c.mask, slot, 0, fill_cb, &c,
						 &freed);
			assert(!r);
			if (freed != PMC_NO_SLOT)
				pmc_index_push_free(&E.idx, freed);
		}
		img3 = malloc(pmem_size);
		make_image(img3, E.pm.dur, E.pm.pend, E.pm.npend, pmem_size, 0);
		rm = E.pm;
		idx = E.idx;
		E = save_e;
		PM = &rm;
		{
			struct pmodel pm2;
			struct pmc_meta m2;
			struct pmc_index idx2;
			u32 j;

			pm_init(&pm2, pmem_size);
			memcpy(pm2.vol, img3, pmem_size);
			memcpy(pm2.dur, img3, pmem_size);
			PM = &pm2;
			r = pmc_meta_open(&m2, pm2.vol, pmem_size, BS, &oid,
					  &why);
			assert(!r);
			pmc_index_init(&idx2, m2.n_blocks);
			pmc_meta_recover(&m2, &idx2, &st);
			for (j = 0; j < k; j++) {
				const u8 *p = read_sector(&m2, &idx2, org,
							  secs[j]);
				long got = decode_sector(p, secs[j]);
				int later = 0;
				u32 l;

				for (l = j + 1; l < k; l++)
					if (secs[l] == secs[j])
						later = 1;
				if (!later && got != (long)ids[j]) {
					violation("post-recovery write lost",
						  secs[j], got, ctx);
					bad = 1;
				}
			}
			pmc_index_destroy(&idx2);
			PM = &rm;
			pm_free(&pm2);
		}
		free(img3);
		n_post++;
	}
	PM = saved;
	pmc_index_destroy(&idx);
	pm_free(&rm);
	return bad;
}

static int check_state(struct pmc_meta *m, struct pmc_index *idx,
		       const u8 *org, const char *ctx)
{
	int bad = 0;
	u32 s;

	for (s = 0; s < nsec; s++) {
		const u8 *p = read_sector(m, idx, org, s);
		long got = decode_sector(p, s);
		int in = s >= inprog.s0 && s < inprog.s0 + inprog.ns;

		if (got < 0) {
			violation("garbage", s, got, ctx);
			bad = 1;
			continue;
		}
		if (in && inprog.kind == 1 && (u32)got == inprog.id)
			continue;
		if (undef[s] || (in && inprog.kind == 2)) {
			if (!hist_has(s, (u32)got)) {
				violation("never written", s, got, ctx);
				bad = 1;
			}
			continue;
		}
		if ((u32)got == acked[s])
			continue;
		violation(hist_has(s, (u32)got) ? "older value won / write lost" :
			  "never written", s, got, ctx);
		bad = 1;
	}
	return bad;
}

static void snapshot(const char *ctx)
{
	u8 *img = malloc(pmem_size);
	u32 k;

	n_snapshots++;
	for (k = 0; k < images_per_snapshot; k++) {
		int mode = k == 0 ? (int)rndn(2) : 2 + (int)rndn(2);

		make_image(img, PM->dur, PM->pend, PM->npend, pmem_size, mode);
		n_states++;
		if (recover_and_check(img, origin, ctx, 1, 1))
			n_bad_states++;
	}
	free(img);
}

static int in_snapshot;

static void on_event(int is_fence)
{
	if (!in_workload || in_snapshot || PM != &E.pm)
		return;
	if (!is_fence && rndn(100) >= snapshot_store_pct)
		return;
	in_snapshot = 1;
	snapshot(is_fence ? "at fence" : "between fences");
	in_snapshot = 0;
}

/* ------------------------------------------------------------------ */
/* format crash test                                                  */

static void format_crashes(u32 rounds)
{
	u32 k;

	for (k = 0; k < rounds; k++) {
		struct pmodel fm, rm;
		struct pmc_meta m;
		u8 *img = malloc(pmem_size);
		const char *why;
		int r;

		pm_init(&fm, pmem_size);
		PM = &fm;
		/* Start from an older cache or from a blank namespace. */
		if (k & 1)
			pmc_meta_format(&m, fm.vol, pmem_size, BS, &oid);
		memcpy(fm.dur, fm.vol, pmem_size);
		fm.npend = 0;
		/* Cut the new format at one of its three fences. */
		fm.capture_countdown = 1 + (int)rndn(3);
		format_fence_count = 0;
		pmc_meta_format(&m, fm.vol, pmem_size, BS, &oid);
		/* A format with fewer fences (a mutant): crash at its end. */
		if (!fm.cap_dur)
			pm_capture(&fm);
		make_image(img, fm.cap_dur, fm.cap_pend, fm.cap_npend,
			   pmem_size, (int)rndn(4));
		pm_init(&rm, pmem_size);
		memcpy(rm.vol, img, pmem_size);
		memcpy(rm.dur, img, pmem_size);
		PM = &rm;
		r = pmc_meta_open(&m, rm.vol, pmem_size, BS, &oid, &why);
		n_format_states++;
		if (r != 0 && r != -ENODATA) {
			n_violations++;
			if (report_left-- > 0)
				fprintf(stderr, "VIOLATION (format): open %d %s\n",
					r, why ? why : "");
		}
		pm_free(&rm);
		pm_free(&fm);
		free(img);
	}
}

/* ------------------------------------------------------------------ */

static void running_check(void)
{
	u32 k;

	for (k = 0; k < 8; k++) {
		u32 s = rndn(nsec);
		long got = decode_sector(read_sector(&E.m, &E.idx, origin, s),
					 s);

		if (got < 0 || (!undef[s] && (u32)got != acked[s]) ||
		    (undef[s] && !hist_has(s, (u32)got)))
			violation("running read", s, got, "no crash");
	}
}

static void usage(void)
{
	fprintf(stderr,
		"usage: crash_model [--ops N] [--seed S] [--images K] [--store-pct P]\n"
		"                   [--break data-fence|record-fence|free-fence|data-flush|record-flush|\n"
		"                            format-order|waitprev]\n"
		"                   [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	u32 ops = 400, i, s;
	u64 seed = 1;
	const char *why;
	clock_t t0 = clock();
	int r;

	for (i = 1; i < (u32)argc; i++) {
		if (!strcmp(argv[i], "--ops") && i + 1 < (u32)argc)
			ops = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--seed") && i + 1 < (u32)argc)
			seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--images") && i + 1 < (u32)argc)
			images_per_snapshot = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--store-pct") && i + 1 < (u32)argc)
			snapshot_store_pct = (u32)strtoul(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--break") && i + 1 < (u32)argc) {
			const char *b = argv[++i];

			if (!strcmp(b, "data-fence"))
				brk = BRK_DATA_FENCE;
			else if (!strcmp(b, "record-fence"))
				brk = BRK_RECORD_FENCE;
			else if (!strcmp(b, "free-fence"))
				brk = BRK_FREE_FENCE;
			else if (!strcmp(b, "data-flush"))
				brk = BRK_DATA_FLUSH;
			else if (!strcmp(b, "record-flush"))
				brk = BRK_RECORD_FLUSH;
			else if (!strcmp(b, "format-order"))
				brk = BRK_FORMAT_ORDER;
			else if (!strcmp(b, "waitprev"))
				brk = BRK_WAITPREV;
			else
				usage();
		} else if (!strcmp(argv[i], "-v")) {
			verbose = 1;
		} else {
			usage();
		}
	}
	rng_state ^= seed * 0x9e3779b97f4a7c15ULL;
	if (!rng_state)
		rng_state = 1;

	nsec = n_oblocks * SPB;
	pmem_size = 2 * PMC_DATA_ALIGN + (size_t)n_slots_want * BS;
	origin = calloc(nsec, PMC_SECTOR_SIZE);
	acked = calloc(nsec, sizeof(*acked));
	undef = calloc(nsec, 1);
	hist = calloc(nsec, sizeof(*hist));
	for (s = 0; s < nsec; s++)
		fill_sector(origin + (u64)s * PMC_SECTOR_SIZE, 0, s);
	oid.sectors = nsec;
	memset(oid.uuid, 0x5a, sizeof(oid.uuid));

	format_crashes(ops / 2 + 50);

	pm_init(&E.pm, pmem_size);
	PM = &E.pm;
	r = pmc_meta_format(&E.m, E.pm.vol, pmem_size, BS, &oid);
	assert(!r);
	r = pmc_meta_open(&E.m, E.pm.vol, pmem_size, BS, &oid, &why);
	assert(!r);
	pmc_index_init(&E.idx, E.m.n_blocks);
	{
		struct pmc_recover_stats st;

		pmc_meta_recover(&E.m, &E.idx, &st);
	}

	in_workload = 1;
	for (i = 0; i < ops; i++) {
		u32 op = rndn(100);

		/* A broken protocol only has to be caught once. */
		if (brk != BRK_NONE && n_violations)
			break;

		if (op < 40) {
			u32 s0 = rndn(nsec), ns = 1 + rndn(2 * SPB + 3);

			if (s0 + ns > nsec)
				ns = nsec - s0;
			op_write(s0, ns);
		} else if (op < 55) {
			/* overwrite a hot block, whole or partial */
			u32 ob = rndn(6);
			u32 first = rndn(2) ? 0 : rndn(SPB);
			u32 ns = rndn(2) ? SPB - first : 1 + rndn(SPB - first);

			op_write(ob * SPB + first, ns);
		} else if (op < 60) {
			u32 s0 = rndn(nsec), ns = 1 + rndn(3 * SPB);

			if (s0 + ns > nsec)
				ns = nsec - s0;
			op_discard(s0, ns);
		} else if (op < 64) {
			/* REQ_PREFLUSH: everything acked is already durable */
			pmc_meta_fence(PMC_P_RECORD);
		} else if (op < 78) {
			wb_start_some(1 + rndn(4));
		} else if (op < 92) {
			if (n_infl)
				wb_complete_one(rndn(n_infl), rndn(10) != 0);
		} else {
			running_check();
		}
	}
	in_workload = 0;
	/* Clean shutdown: everything durable; recover and check once more. */
	{
		u8 *img = malloc(pmem_size);

		make_image(img, E.pm.dur, E.pm.pend, E.pm.npend, pmem_size, 1);
		n_states++;
		recover_and_check(img, origin, "final", 0, 0);
		free(img);
	}

	printf("mode=%s ops=%u seed=%llu snapshots=%llu nested=%llu post_recovery=%llu time=%.2fs\n",
	       brk == BRK_NONE ? "correct" : "broken", ops,
	       (unsigned long long)seed, (unsigned long long)n_snapshots,
	       (unsigned long long)n_nested, (unsigned long long)n_post,
	       (double)(clock() - t0) / CLOCKS_PER_SEC);
	printf("crash_states=%llu format_states=%llu bad_states=%llu violations=%llu\n",
	       (unsigned long long)n_states,
	       (unsigned long long)n_format_states,
	       (unsigned long long)n_bad_states,
	       (unsigned long long)n_violations);
	return n_violations ? 1 : 0;
}
