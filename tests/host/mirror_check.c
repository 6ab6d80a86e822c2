// SPDX-License-Identifier: GPL-2.0
/*
 * Host check of the mirror info protocol (dm-pmemcache/pmc_mirror.c, the
 * code the module runs): which half of a mirrored cache is current, and
 * the steps that change it, under power cuts at every store.
 *
 *   mirror_check --torn [--seed N]
 *	every subset of the 8-byte words of an info update that a cut may
 *	keep: the info read back is the old one or the new one, never
 *	another, and a slot that cannot be read is never skipped.
 *   mirror_check --cases
 *	named situations with the decision they must get.
 *   mirror_check --model --runs N [--seed N]
 *	three devices, random runs: writes acknowledged, a half lost while
 *	running, clean stops, power cuts inside any info store (any subset
 *	of its words kept), devices wiped and offered as replacements,
 *	tables naming any two devices or one and "-", with or without the
 *	degraded override.  The model knows what each device holds (a
 *	hash of the acknowledged writes on it) and which history is the
 *	truth (every acknowledged write, or what the administrator chose
 *	with the override); a device that holds another history misses an
 *	acknowledged write; a start that takes such a device as current
 *	without the override is a violation.
 *
 * A failure prints a line starting "VIOLATION" and exits 1.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pmc_mirror.h"

#define AREA		4096
#define NDEV		3
#define MAX_PENDING	1024

static unsigned long long rng_state = 1;

static u64 rnd(void)
{
	rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return rng_state >> 33;
}

static u32 below(u32 n)
{
	return n ? (u32)(rnd() % n) : 0;
}

void pmc_random_bytes(void *p, size_t len)
{
	u8 *b = p;

	while (len--)
		*b++ = (u8)rnd();
}

/* --- pmem: stores land at once, a cut keeps any subset of the 8-byte
 * words stored since the last fence. --- */
struct pending {
	u8 *dst;
	u8 old[8];
	bool noflush;	/* stored without a flush: a fence does not keep it */
};

static struct pending pending[MAX_PENDING];
static int n_pending;
static long stores, cut_at = -1;
static jmp_buf cut_jmp;
static const u8 *poison_lo, *poison_hi;	/* reads of this range fail */
static int violations;
static bool trace;
static bool scrub = true;	/* --no-scrub: the start that skips S1 */
/* a cut that keeps only the newest store to this word (else random) */
static const u8 *keep_only;

static void cut_now(void)
{
	int i;

	/* Undo, newest first, the words the cut does not keep. */
	for (i = n_pending - 1; i >= 0; i--) {
		bool undo = keep_only ? pending[i].dst != keep_only : below(2);

		if (trace)
			printf("  cut: word at %p %s\n", (void *)pending[i].dst,
			       undo ? "lost" : "kept");
		if (undo)
			memcpy(pending[i].dst, pending[i].old, 8);
	}
	n_pending = 0;
	cut_at = -1;
	keep_only = NULL;
	longjmp(cut_jmp, 1);
}

static void store(void *dst, const void *src, size_t len, bool noflush)
{
	size_t off;

	for (off = 0; off < len; off += 8) {
		if (n_pending == MAX_PENDING) {
			/* the oldest word reached pmem on its own */
			memmove(pending, pending + 1,
				(MAX_PENDING - 1) * sizeof(pending[0]));
			n_pending--;
		}
		pending[n_pending].dst = (u8 *)dst + off;
		memcpy(pending[n_pending].old, (u8 *)dst + off, 8);
		pending[n_pending].noflush = noflush;
		n_pending++;
		memcpy((u8 *)dst + off, (const u8 *)src + off, 8);
	}
	if (stores++ == cut_at)
		cut_now();
}

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	store(dst, src, len, false);
}

/*
 * The mutants' store without its flush (tests/test_mirror_model.py): it
 * stays pending across fences until a flushed store to the same word.
 */
void pmc_model_store_noflush(void *dst, const void *src, size_t len,
			     enum pmc_ptag tag)
{
	store(dst, src, len, true);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
	int i, j, n = 0;

	for (i = 0; i < n_pending; i++) {
		bool superseded = false;

		for (j = i + 1; pending[i].noflush && j < n_pending; j++)
			superseded |= !pending[j].noflush &&
				      pending[j].dst == pending[i].dst;
		if (pending[i].noflush && !superseded)
			pending[n++] = pending[i];
	}
	n_pending = n;
}

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	const u8 *s = src;

	if (poison_lo && s < poison_hi && s + len > poison_lo)
		return -EIO;
	memcpy(dst, src, len);
	return 0;
}

static void violation(const char *what, const char *ctx)
{
	printf("VIOLATION %s (%s)\n", what, ctx);
	violations++;
}

static bool state_eq(const struct pmc_mirror_state *a,
		     const struct pmc_mirror_state *b)
{
	return !memcmp(a->pair_uuid, b->pair_uuid, 16) &&
	       !memcmp(a->half_uuid, b->half_uuid, 16) &&
	       !memcmp(a->partner_uuid, b->partner_uuid, 16) &&
	       a->generation == b->generation &&
	       a->resync_pos == b->resync_pos && a->flags == b->flags;
}

/* --- torn info updates --- */

static void random_state(struct pmc_mirror_state *st)
{
	pmc_random_bytes(st->pair_uuid, 16);
	pmc_random_bytes(st->half_uuid, 16);
	pmc_random_bytes(st->partner_uuid, 16);
	st->generation = rnd();
	st->resync_pos = rnd();
	st->flags = below(4);
}

/* Store @st as the half's info (resync_progress stores the whole info). */
static void put(struct pmc_mirror_half *h, const struct pmc_mirror_state *st)
{
	u64 seq = h->info.seq;

	h->info = *st;
	h->info.seq = seq;
	pmc_mirror_resync_progress(h, st->resync_pos);
}

/*
 * The start's S1 and U2 again, from @cut_img (the image U1's cut left),
 * now with their stores in flight: cut just before U2's fence, keeping of
 * every word stored since the last fence only the one at @w_off (the word
 * of U2's slot that U1 lost).  Were S1's zeroes not flushed and fenced
 * before U2, the cut could take them back and U2's word complete U1.
 * Returns the images checked (1).
 */
static int torn_after_scrub(u8 *area, const u8 *cut_img, u32 w_off,
			    const struct pmc_mirror_state *u1,
			    const struct pmc_mirror_state *u2)
{
	struct pmc_mirror_half h = { .base = area, .present = true };
	struct pmc_mirror_half r = { .base = area, .present = true };
	long total;

	/* a dry run: the stores S1 and U2 make */
	memcpy(area, cut_img, AREA);
	n_pending = 0;
	stores = 0;
	pmc_mirror_scrub(&h);
	put(&h, u2);
	total = stores;

	memcpy(area, cut_img, AREA);
	memset(&h, 0, sizeof(h));
	h.base = area;
	h.present = true;
	n_pending = 0;
	stores = 0;
	cut_at = total - 1;
	keep_only = area + w_off;
	if (!setjmp(cut_jmp)) {
		pmc_mirror_scrub(&h);
		put(&h, u2);
		violation("U2 was not cut", "torn");	/* the dry run said otherwise */
	}
	if (!pmc_mirror_load(&r) && state_eq(&r.info, u1))
		violation("an update cut before a start came back with a later cut update "
			  "(S1's zeroes taken back by the cut)", "torn");
	return 1;
}

static int check_torn(void)
{
	static u8 area[AREA] __attribute__((aligned(64)));
	static u8 saved[AREA], updated[AREA], cut_img[AREA];
	long images = 0;
	int round, i;

	for (round = 0; round < 24 && !violations; round++) {
		struct pmc_mirror_half h = { .base = area, .present = true };
		struct pmc_mirror_state before, after;
		bool had = round % 6 != 0;
		u32 mask, words = 0, word_at[AREA / 8];

		memset(area, 0, sizeof(area));
		/* a few updates first, so that both slots hold an info */
		for (i = 0; had && i < 1 + round % 3; i++) {
			random_state(&before);
			put(&h, &before);
		}
		memcpy(saved, area, sizeof(area));
		random_state(&after);
		put(&h, &after);
		memcpy(updated, area, sizeof(area));
		for (i = 0; i < AREA; i += 8)
			if (memcmp(area + i, saved + i, 8))
				word_at[words++] = i;
		if (words > PMC_MIRROR_INFO_SIZE / 8) {
			violation("an info update changed more than one slot", "torn");
			break;
		}
		/* every subset of the update's words that a cut may keep */
		for (mask = 0; mask < (1U << words); mask++) {
			struct pmc_mirror_half r = { .base = area, .present = true };
			int err;

			memcpy(area, saved, sizeof(area));
			for (i = 0; i < (int)words; i++)
				if (mask & (1U << i))
					memcpy(area + word_at[i], updated + word_at[i], 8);
			err = pmc_mirror_load(&r);
			images++;
			if (mask == (1U << words) - 1) {
				if (err || !state_eq(&r.info, &after))
					violation("the whole update does not read back", "torn");
			} else if (!had) {
				if (!err && !state_eq(&r.info, &after))
					violation("a torn first info reads as another info", "torn");
			} else if (err || (!state_eq(&r.info, &before) &&
					   !state_eq(&r.info, &after))) {
				violation("a torn update reads as neither the old nor the new info", "torn");
			}
		}
		memcpy(area, updated, sizeof(area));
		/* an unreadable slot: never fall back to the other one */
		{
			struct pmc_mirror_half r = { .base = area, .present = true };

			poison_lo = area + PMC_MIRROR_INFO_OFFSET +
				    (round & 1) * PMC_MIRROR_INFO_SIZE;
			poison_hi = poison_lo + 8;
			if (pmc_mirror_load(&r) != -EIO)
				violation("an unreadable info slot was skipped", "torn");
			poison_lo = poison_hi = NULL;
		}
	}
	/*
	 * Two cut updates of one slot with a start between them: the first
	 * (U1) loses one word; the start scrubs (S1); every subset of the
	 * second's words (U2, the same info at another generation) must read
	 * as the info before U1 or as U2, never as U1 completed by U2's words.
	 */
	for (round = 0; round < 4 && !violations; round++) {
		struct pmc_mirror_half h = { .base = area, .present = true };
		struct pmc_mirror_state st, u1, u2, prior;
		u32 w, w_off, words, mask, word_at[AREA / 8];

		for (w = 0; w < PMC_MIRROR_INFO_SIZE / 8 && !violations; w++) {
			memset(area, 0, sizeof(area));
			memset(&h, 0, sizeof(h));
			h.base = area;
			h.present = true;
			for (i = 0; i < 2 + round; i++) {
				random_state(&st);
				put(&h, &st);
			}
			memcpy(saved, area, sizeof(area));
			u1 = st;
			u1.generation++;
			u1.flags ^= PMC_MIRROR_PARTNER_STALE;
			put(&h, &u1);
			/* U1 cut: word w of its slot is lost */
			i = PMC_MIRROR_INFO_OFFSET + h.slot * PMC_MIRROR_INFO_SIZE + w * 8;
			memcpy(area + i, saved + i, 8);
			w_off = i;
			memcpy(cut_img, area, sizeof(area));
			/* the next start */
			memset(&h, 0, sizeof(h));
			h.base = area;
			h.present = true;
			if (pmc_mirror_scrub(&h) || h.info.generation == u1.generation)
				continue;	/* U1 survived whole: nothing to resurrect */
			prior = h.info;
			memcpy(saved, area, sizeof(area));
			u2 = u1;
			u2.generation++;
			put(&h, &u2);
			memcpy(updated, area, sizeof(area));
			words = 0;
			for (i = 0; i < AREA; i += 8)
				if (memcmp(area + i, saved + i, 8))
					word_at[words++] = i;
			for (mask = 0; mask < (1U << words); mask++) {
				struct pmc_mirror_half r = { .base = area, .present = true };

				memcpy(area, saved, sizeof(area));
				for (i = 0; i < (int)words; i++)
					if (mask & (1U << i))
						memcpy(area + word_at[i], updated + word_at[i], 8);
				images++;
				if (pmc_mirror_load(&r) ||
				    (!state_eq(&r.info, &prior) && !state_eq(&r.info, &u2))) {
					violation(state_eq(&r.info, &u1) ?
						  "an update cut before a start came back with a later cut update" :
						  "a torn update after a start reads as another info", "torn");
					break;
				}
			}
			images += torn_after_scrub(area, cut_img, w_off, &u1, &u2);
		}
	}
	printf("torn info images %ld, wrong %d\n", images, violations);
	return violations ? 1 : 0;
}

/* --- named cases --- */

static u8 PAIR[16] = { 'p' }, UA[16] = { 'a' }, UB[16] = { 'b' },
	  UC[16] = { 'c' };

static struct pmc_mirror_half info(const u8 *half, const u8 *partner,
				   u64 gen, u32 flags)
{
	struct pmc_mirror_half h = { .present = true, .has_info = true,
				     .holds_cache = true };

	memcpy(h.info.pair_uuid, PAIR, 16);
	memcpy(h.info.half_uuid, half, 16);
	memcpy(h.info.partner_uuid, partner, 16);
	h.info.generation = gen;
	h.info.flags = flags;
	return h;
}

static const struct pmc_mirror_half ABSENT = { .present = false };
static const struct pmc_mirror_half BLANK = { .present = true };
static const struct pmc_mirror_half SINGLE = { .present = true,
					       .holds_cache = true };

#define S PMC_MIRROR_PARTNER_STALE
#define R PMC_MIRROR_RESYNCING

struct mcase {
	const char *name;
	struct pmc_mirror_half h0, h1;
	bool degraded;
	enum pmc_mirror_action want;
	u32 current;
};

static int check_cases(void)
{
	struct mcase c[] = {
		{ "in sync", info(UA, UB, 3, 0), info(UB, UA, 3, 0), false,
		  PMC_MIRROR_BOTH, 0 },
		{ "b ran alone, a back", info(UA, UB, 3, 0), info(UB, UA, 4, S),
		  false, PMC_MIRROR_RESYNC, 1 },
		{ "a alone, it ran alone", info(UA, UB, 4, S), ABSENT, false,
		  PMC_MIRROR_DEGRADED, 0 },
		{ "a alone, it may be stale", info(UA, UB, 3, 0), ABSENT, false,
		  PMC_MIRROR_REFUSE, 0 },
		{ "a alone, may be stale, override", info(UA, UB, 3, 0), ABSENT,
		  true, PMC_MIRROR_DEGRADED, 0 },
		{ "split brain", info(UA, UB, 4, S), info(UB, UA, 4, S), false,
		  PMC_MIRROR_REFUSE, 0 },
		{ "split brain, override", info(UA, UB, 4, S), info(UB, UA, 5, S),
		  true, PMC_MIRROR_REFUSE, 0 },
		{ "split brain, one half further on", info(UA, UC, 7, S),
		  info(UB, UA, 5, S), false, PMC_MIRROR_REFUSE, 0 },
		{ "stale half offered alone", ABSENT, info(UB, UA, 3, R), true,
		  PMC_MIRROR_REFUSE, 0 },
		{ "resync interrupted", info(UA, UB, 4, S), info(UB, UA, 4, R),
		  false, PMC_MIRROR_RESYNC, 0 },
		{ "resync cut between R4 and R5", info(UA, UB, 5, 0),
		  info(UB, UA, 4, R), false, PMC_MIRROR_RESYNC, 0 },
		{ "target of another pair member", info(UA, UC, 5, 0),
		  info(UB, UA, 4, R), false, PMC_MIRROR_REFUSE, 0 },
		{ "replacement for a half that ran alone", info(UA, UB, 4, S),
		  BLANK, false, PMC_MIRROR_RESYNC, 0 },
		{ "replacement, partner may hold more", info(UA, UB, 3, 0),
		  BLANK, false, PMC_MIRROR_REFUSE, 0 },
		{ "replacement that holds another cache", info(UA, UB, 4, S),
		  SINGLE, false, PMC_MIRROR_REFUSE, 0 },
		{ "new pair", BLANK, BLANK, false, PMC_MIRROR_RESYNC, 0 },
		{ "single cache given a mirror", BLANK, SINGLE, false,
		  PMC_MIRROR_RESYNC, 1 },
		{ "two single caches", SINGLE, SINGLE, false, PMC_MIRROR_REFUSE, 0 },
		{ "stale half ahead of the current", info(UA, UB, 4, S),
		  info(UB, UA, 4, 0), false, PMC_MIRROR_REFUSE, 0 },
		{ "generations differ, no flag", info(UA, UB, 4, 0),
		  info(UB, UA, 3, 0), false, PMC_MIRROR_REFUSE, 0 },
		{ "one device twice", info(UA, UB, 3, 0), info(UA, UB, 3, 0),
		  false, PMC_MIRROR_REFUSE, 0 },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(c); i++) {
		struct pmc_mirror_half h[2] = { c[i].h0, c[i].h1 };
		struct pmc_mirror_plan plan;

		pmc_mirror_decide(h, c[i].degraded, &plan);
		printf("case %-42s %s%s%s\n", c[i].name,
		       plan.action == PMC_MIRROR_REFUSE ? "refused: " : "",
		       plan.action == PMC_MIRROR_REFUSE ? plan.why : "",
		       plan.action == PMC_MIRROR_BOTH ? "both" :
		       plan.action == PMC_MIRROR_RESYNC ? "resync" :
		       plan.action == PMC_MIRROR_DEGRADED ? "degraded" : "");
		if (plan.action != c[i].want ||
		    (plan.action != PMC_MIRROR_REFUSE &&
		     plan.holder != c[i].current))
			violation("unexpected decision", c[i].name);
		if (plan.action == PMC_MIRROR_REFUSE && !plan.why)
			violation("a refusal without a reason", c[i].name);
	}
	printf("cases %zu, wrong %d\n", ARRAY_SIZE(c), violations);
	return violations ? 1 : 0;
}

/* --- every step cut: the pair still starts, from the right half --- */

static struct pmc_mirror_half step_h[2];
static u8 step_area[2][AREA] __attribute__((aligned(64)));

/* Scenarios: 0 a half lost while both run (M1), 1 the lost half back
 * (R2..R5), 2 a blank replacement (R1..R5), 3 a new pair (R1..R5). */
static void step_scenario(int scenario)
{
	u8 pair[16];

	pmc_random_bytes(pair, 16);
	switch (scenario) {
	case 0:
		pmc_mirror_mark_alone(&step_h[0]);
		break;
	case 1:
	case 2:
		if (scenario == 2) {
			memset(step_area[1], 0, AREA);
			step_h[1].has_info = false;
		}
		pmc_mirror_resync_begin(&step_h[0], &step_h[1],
					step_h[0].info.pair_uuid);
		pmc_mirror_resync_progress(&step_h[1], 10);
		pmc_mirror_resync_progress(&step_h[1], 20);
		pmc_mirror_resync_end(&step_h[0], &step_h[1]);
		break;
	case 3:
		pmc_mirror_resync_begin(&step_h[0], &step_h[1], pair);
		pmc_mirror_resync_end(&step_h[0], &step_h[1]);
		break;
	}
}

static int check_steps(void)
{
	static int scenario, k, tear;	/* static: kept across longjmp */
	static long cuts;

	for (scenario = 0; scenario < 4; scenario++) {
		for (k = 0; k < 12; k++) {
			for (tear = 0; tear < 8; tear++) {
				struct pmc_mirror_half h[2];
				struct pmc_mirror_plan plan;
				char ctx[64];
				bool cut = false;
				int i;

				/* a pair in sync, then (1, 2) the first half ran alone */
				memset(step_area, 0, sizeof(step_area));
				for (i = 0; i < 2; i++) {
					memset(&step_h[i], 0, sizeof(step_h[i]));
					step_h[i].base = step_area[i];
					step_h[i].present = true;
				}
				if (scenario != 3) {
					pmc_mirror_resync_begin(&step_h[0], &step_h[1],
								(const u8 *)"0123456789abcdef");
					pmc_mirror_resync_end(&step_h[0], &step_h[1]);
				}
				if (scenario == 1 || scenario == 2)
					pmc_mirror_mark_alone(&step_h[0]);
				stores = 0;
				cut_at = k;
				if (setjmp(cut_jmp))
					cut = true;
				else
					step_scenario(scenario);
				cut_at = -1;
				n_pending = 0;
				if (!cut && tear)
					break;	/* fewer stores than k: done */
				cuts++;
				for (i = 0; i < 2; i++) {
					memset(&h[i], 0, sizeof(h[i]));
					h[i].base = step_area[i];
					h[i].present = true;
					pmc_mirror_load(&h[i]);
					h[i].holds_cache = h[i].has_info ||
							   (i == 0 && scenario == 3);
				}
				pmc_mirror_decide(h, false, &plan);
				snprintf(ctx, sizeof(ctx), "scenario %d, cut at store %d",
					 scenario, k);
				if (plan.action == PMC_MIRROR_REFUSE)
					violation(plan.why, ctx);
				else if (plan.action != PMC_MIRROR_BOTH && plan.holder != 0)
					violation("the half that holds every write is not current", ctx);
				else if (!cut && scenario && plan.action != PMC_MIRROR_BOTH)
					violation("a complete resync leaves the pair unsynced", ctx);
				if (trace || plan.action == PMC_MIRROR_REFUSE)
					printf("%s: %d %u %s\n", ctx, plan.action, plan.holder,
					       plan.why ? plan.why : "");
			}
		}
	}
	printf("step cuts %ld, wrong %d\n", cuts, violations);
	return violations ? 1 : 0;
}

/* --- the protocol under power cuts --- */

struct dev {
	u8 area[AREA] __attribute__((aligned(64)));
	bool holds_cache;
	u64 history;		/* hash of the acknowledged writes it holds */
	bool partial;		/* a copy under way: no cache on its own */
};

static struct dev devs[NDEV];
static int run_dev[2];			/* devices of the running halves, -1 */
static struct pmc_mirror_half run_half[2];
static bool running;
static u8 pair_uuid[16];
static long n_act[4], n_cuts, n_acked, n_override, n_lost, n_boots;
static long n_cuts_idle;

static u64 truth;		/* the history every current half must hold */
static u64 garbage = 1;

static bool misses(int dev)
{
	return devs[dev].history != truth;
}

static u64 chain(u64 h, u64 w)
{
	return (h ^ w) * 0x9e3779b97f4a7c15ULL + 1;
}

/* Content that is no history: a wiped device, a copy under way. */
static u64 no_history(void)
{
	return garbage++ << 40;
}

static void trace_half(const char *what, int dev, const struct pmc_mirror_half *h)
{
	if (!trace)
		return;
	if (dev < 0) {
		printf("  %s: -\n", what);
		return;
	}
	printf("  %s: dev %d misses %d cache %d", what, dev, misses(dev),
	       devs[dev].holds_cache);
	if (h->has_info)
		printf(" info half %c partner %c gen %llu flags %u",
		       'A' + h->info.half_uuid[0] % 26, 'A' + h->info.partner_uuid[0] % 26,
		       (unsigned long long)h->info.generation, h->info.flags);
	printf("\n");
}

static void wipe(int d)
{
	memset(devs[d].area, 0, AREA);
	devs[d].holds_cache = false;
	devs[d].partial = false;
	devs[d].history = no_history();
	if (trace)
		printf("device %d wiped\n", d);
}

/* A write acknowledged: it is on every running device. */
static void ack_write(void)
{
	int d;

	n_acked++;
	truth = chain(truth, n_acked);
	for (d = 0; d < 2; d++)
		if (run_dev[d] >= 0)
			devs[run_dev[d]].history =
				chain(devs[run_dev[d]].history, n_acked);
}

static void start(char *ctx)
{
	struct pmc_mirror_half h[2];
	struct pmc_mirror_plan plan, strict;
	int dv[2], i, cur, tgt;
	bool degraded = below(4) == 0;

	running = false;
	run_dev[0] = run_dev[1] = -1;
	dv[0] = below(NDEV);
	dv[1] = below(4) ? (dv[0] + 1 + below(NDEV - 1)) % NDEV : -1;
	if (below(2)) {
		int x = dv[0];

		dv[0] = dv[1];
		dv[1] = x;
	}
	for (i = 0; i < 2; i++) {
		memset(&h[i], 0, sizeof(h[i]));
		h[i].present = dv[i] >= 0;
		if (!h[i].present)
			continue;
		h[i].base = devs[dv[i]].area;
		h[i].holds_cache = devs[dv[i]].holds_cache;
		if (!scrub ? pmc_mirror_load(&h[i]) == -EIO :
		    (h[i].holds_cache || pmc_mirror_load(&h[i]) == 0) &&
		    pmc_mirror_scrub(&h[i]) == -EIO)
			violation("media error in the model", ctx);
	}
	n_boots++;
	pmc_mirror_decide(h, false, &strict);
	pmc_mirror_decide(h, degraded, &plan);
	if (trace) {
		printf("%s: start%s -> %d current %u%s %s\n", ctx,
		       degraded ? " degraded" : "", plan.action, plan.holder,
		       plan.mark_alone ? " mark" : "", plan.why ? plan.why : "");
		trace_half("half 0", dv[0], &h[0]);
		trace_half("half 1", dv[1], &h[1]);
	}
	n_act[plan.action]++;
	if (plan.action == PMC_MIRROR_REFUSE)
		return;
	cur = plan.holder;
	tgt = cur ^ 1;
	if (!h[0].has_info && !h[1].has_info && !h[cur].holds_cache) {
		/*
		 * Two blank devices: a new cache.  The model holds one cache
		 * at a time: the third device, if it held the old one, is
		 * wiped.
		 */
		devs[dv[cur]].history = truth = no_history();
		for (i = 0; i < NDEV; i++)
			if (i != dv[0] && i != dv[1])
				wipe(i);
	}
	/* Not even the override starts from a copy that was cut short. */
	if (devs[dv[cur]].partial)
		violation("started from a half whose copy did not complete", ctx);
	if (strict.action == PMC_MIRROR_REFUSE) {
		/*
		 * The administrator's override: what the current half holds
		 * is the truth from now on; every other device may differ.
		 */
		n_override++;
		truth = devs[dv[cur]].history;
		/*
		 * The runbook: after a forced start, every other half of the
		 * cache is wiped before it is offered again (nothing on them
		 * can tell that this half was forced since).
		 */
		for (i = 0; i < NDEV; i++)
			if (i != dv[cur] && (dv[tgt] < 0 || i != dv[tgt]))
				wipe(i);
	} else {
		if (misses(dv[cur])) {
			violation("started from a half that misses an acknowledged write", ctx);
			n_lost++;
		}
		if (plan.action == PMC_MIRROR_BOTH && misses(dv[tgt])) {
			violation("both halves taken as current, one misses an acknowledged write", ctx);
			n_lost++;
		}
	}
	if (plan.action != PMC_MIRROR_DEGRADED && (dv[0] < 0 || dv[1] < 0))
		violation("two halves used, one is missing", ctx);

	run_half[0] = h[0];
	run_half[1] = h[1];
	if (plan.action == PMC_MIRROR_DEGRADED) {
		if (plan.mark_alone)
			pmc_mirror_mark_alone(&run_half[cur]);
		run_dev[0] = dv[cur];
		run_half[0] = run_half[cur];
		running = true;
		return;
	}
	if (plan.action == PMC_MIRROR_BOTH) {
		run_dev[0] = dv[0];
		run_dev[1] = dv[1];
		running = true;
		return;
	}

	/* RESYNC: a new cache is formatted on the current half first. */
	if (!devs[dv[cur]].holds_cache) {
		devs[dv[cur]].holds_cache = true;
		pmc_random_bytes(pair_uuid, 16);
	}
	if (run_half[cur].has_info)
		memcpy(pair_uuid, run_half[cur].info.pair_uuid, 16);
	pmc_mirror_resync_begin(&run_half[cur], &run_half[tgt], pair_uuid);
	/* the copy overwrites the target: partial until it completes */
	devs[dv[tgt]].history = no_history();
	devs[dv[tgt]].partial = true;
	devs[dv[tgt]].holds_cache = true;
	run_dev[0] = dv[cur];
	run_dev[1] = dv[tgt];
	for (i = below(4); i > 0; i--) {
		/* writes go to both while the copy runs */
		if (below(2))
			ack_write();
		pmc_mirror_resync_progress(&run_half[tgt],
					   run_half[tgt].info.resync_pos + 1 + below(100));
	}
	devs[dv[tgt]].history = devs[dv[cur]].history;
	devs[dv[tgt]].partial = false;
	pmc_mirror_resync_end(&run_half[cur], &run_half[tgt]);
	{
		struct pmc_mirror_half c = run_half[cur], t = run_half[tgt];

		run_half[0] = c;
		run_half[1] = t;
	}
	running = true;
}

static void run_ops(char *ctx)
{
	int n = 1 + below(6);

	while (n--) {
		u32 what = below(10);

		if (what < 6) {
			ack_write();
			if (trace)
				printf("  write acked (running %d %d)\n", run_dev[0], run_dev[1]);
		} else if (what < 8 && run_dev[1] >= 0) {
			/* a half lost while running: M1 before the next ack */
			int lost = below(2);

			if (lost == 0) {
				run_dev[0] = run_dev[1];
				run_half[0] = run_half[1];
			}
			run_dev[1] = -1;
			if (trace)
				printf("  lost a half, running %d\n", run_dev[0]);
			pmc_mirror_mark_alone(&run_half[0]);
		} else if (what == 8) {
			return;		/* clean stop */
		} else if (below(2)) {
			n_cuts_idle++;
			cut_now();	/* a cut between stores */
		}
	}
}

static int check_model(long runs)
{
	char ctx[96];
	static long r;
	int d;

	memset(devs, 0, sizeof(devs));
	running = false;
	for (r = 0; r < runs && violations < 5; r++) {
		snprintf(ctx, sizeof(ctx), "run %ld", r);
		/* sometimes a device is wiped (a new NVDIMM in its place), never
		 * the last that holds every acknowledged write */
		d = below(NDEV);
		if (!below(12) && (!misses((d + 1) % NDEV) || !misses((d + 2) % NDEV)))
			wipe(d);
		stores = 0;
		cut_at = below(3) ? (long)below(8) : -1;
		if (setjmp(cut_jmp)) {
			if (trace)
				printf("  power cut\n");
			n_cuts++;
			running = false;
			continue;
		}
		start(ctx);
		if (running)
			run_ops(ctx);
		cut_at = -1;
		n_pending = 0;
	}
	printf("mirror model runs %ld, starts %ld (both %ld, resync %ld, degraded %ld, refused %ld), overrides %ld, cuts %ld, acknowledged writes %ld, lost %ld\n",
	       runs, n_boots, n_act[PMC_MIRROR_BOTH], n_act[PMC_MIRROR_RESYNC],
	       n_act[PMC_MIRROR_DEGRADED], n_act[PMC_MIRROR_REFUSE],
	       n_override, n_cuts, n_acked, n_lost);
	return violations ? 1 : 0;
}

int main(int argc, char **argv)
{
	long runs = 100000;
	int i, mode = 0;

	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--torn"))
			mode = 1;
		else if (!strcmp(argv[i], "--cases"))
			mode = 2;
		else if (!strcmp(argv[i], "--model"))
			mode = 3;
		else if (!strcmp(argv[i], "--steps"))
			mode = 4;
		else if (!strcmp(argv[i], "--no-scrub"))
			scrub = false;
		else if (!strcmp(argv[i], "--trace"))
			trace = true;
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = atol(argv[++i]);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			rng_state = strtoull(argv[++i], NULL, 0);
		else
			mode = -1;
	}
	switch (mode) {
	case 1:
		return check_torn();
	case 2:
		return check_cases();
	case 3:
		return check_model(runs);
	case 4:
		return check_steps();
	}
	fprintf(stderr, "usage: mirror_check --torn | --cases | --steps | --model [--runs N] [--seed N]\n");
	return 2;
}
