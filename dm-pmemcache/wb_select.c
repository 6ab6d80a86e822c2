// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: which dirty blocks to write back next.
 *
 * md raid5/6 turns a write of less than a whole stripe into a
 * read-modify-write and says so (raid_partial_stripes_expensive, io_opt =
 * the stripe).  Writeback therefore walks the origin in windows, like an
 * elevator: a sweep collects the dirty blocks of one window of origin
 * blocks and sorts them; passes take whole, aligned stripes from it and,
 * when pressure or max_age allows (PMC_SEL_PARTIAL), the partial ones.
 * A partial stripe that is passed over waits for the next sweep, by which
 * time its neighbours may have arrived.  On other origins (stripe_blocks
 * 1) the sweep gives long sorted runs.  A window holds at most sweep.cap
 * blocks, so the RAM it takes is bounded (16 bytes a block, cap = cache
 * blocks / 16: one byte per cache block).
 *
 * stripe_blocks 0 switches all of this off: blocks are taken in clock
 * (slot) order, PMC_MAX_WB_BATCH at a time, sorted only within a batch.
 */
#include <linux/blkdev.h>
#include <linux/math64.h>
#include <linux/sort.h>

#include "pmemcache.h"

#define PMC_SWEEP_BUCKETS	256
#define PMC_SWEEP_MIN		4096
#define PMC_SWEEP_MAX		65536

/* The stripe size in blocks that the origin asks writeback to respect. */
u32 pmc_origin_stripe_blocks(struct pmemcache *pc)
{
	struct request_queue *q = bdev_get_queue(pc->origin->bdev);
	u32 io_opt = queue_io_opt(q);

	if (!q->limits.raid_partial_stripes_expensive ||
	    io_opt <= pc->block_size || io_opt % pc->block_size)
		return 1;
	return min_t(u32, io_opt / pc->block_size, PMC_MAX_STRIPE_BLOCKS);
}

int pmc_sweep_init(struct pmemcache *pc)
{
	struct pmc_sweep *sw = &pc->sweep;

	/* The cache may not be formatted yet: size by the namespace. */
	sw->cap = clamp_t(u64, div_u64(pc->pmem_bytes, pc->block_size) / 16,
			  PMC_SWEEP_MIN, PMC_SWEEP_MAX);
	sw->c = kvmalloc_array(sw->cap, sizeof(*sw->c), GFP_KERNEL);
	if (!sw->c)
		return -ENOMEM;
	pmc_sweep_reset(pc);
	return 0;
}

void pmc_sweep_exit(struct pmemcache *pc)
{
	kvfree(pc->sweep.c);
	pc->sweep.c = NULL;
}

/* Forget the current sweep (the table or the index changed under it). */
void pmc_sweep_reset(struct pmemcache *pc)
{
	pc->sweep.n = 0;
	pc->sweep.pos = 0;
	pc->sweep.next = 0;
}

/* Dirty and not already on its way to the origin. */
static bool pmc_wb_candidate(u64 v)
{
	u32 f = pmc_slot_flags(v);

	return (f & (PMC_SF_USED | PMC_SF_DIRTY)) ==
		(PMC_SF_USED | PMC_SF_DIRTY) &&
	       !(f & (PMC_SF_WB | PMC_SF_STALE | PMC_SF_WAITPREV | PMC_SF_BAD));
}

static int pmc_cand_cmp(const void *a, const void *b)
{
	u64 x = pmc_slot_oblock(((const struct pmc_wb_cand *)a)->v);
	u64 y = pmc_slot_oblock(((const struct pmc_wb_cand *)b)->v);

	return x < y ? -1 : x > y;
}

static void pmc_sweep_add(struct pmc_sweep *sw, u32 slot, u64 v)
{
	sw->c[sw->n].v = v;
	sw->c[sw->n].slot = slot;
	sw->n++;
}

/* stripe_blocks 0: the next PMC_MAX_WB_BATCH candidates in clock order. */
static void pmc_sweep_clock(struct pmemcache *pc)
{
	struct pmc_sweep *sw = &pc->sweep;
	u64 nb = pc->meta.n_blocks, scanned;

	for (scanned = 0; scanned < nb && sw->n < PMC_MAX_WB_BATCH; scanned++) {
		u32 s = pc->wb_hand++ % nb;
		u64 v = READ_ONCE(pc->idx.slot[s]);

		if (pmc_wb_candidate(v))
			pmc_sweep_add(sw, s, v);
	}
}

/*
 * The next window of origin blocks, starting where the last one ended:
 * one scan counts candidates per bucket of origin blocks (buckets are
 * whole stripes wide), a second one collects the buckets that fit.
 *
 * The buckets span the whole origin device, not the table: a table may be
 * shorter than the origin (even shorter than one block), and a shorter
 * table than an earlier one leaves dirty blocks beyond its end.  The last
 * bucket is open-ended, so no dirty block is ever out of every window.
 */
static void pmc_sweep_window(struct pmemcache *pc)
{
	struct pmc_sweep *sw = &pc->sweep;
	u64 origin_blocks = DIV_ROUND_UP_ULL(bdev_nr_sectors(pc->origin->bdev),
					     1U << pc->spb_shift);
	u64 nb = pc->meta.n_blocks, width, lo, hi, total = 0;
	u32 hist[PMC_SWEEP_BUCKETS] = { };
	unsigned int b, first;
	u32 s;

	width = roundup(DIV_ROUND_UP_ULL(max(origin_blocks, 1ULL),
					 PMC_SWEEP_BUCKETS),
			max(pc->stripe_blocks, 1U));
	for (s = 0; s < nb; s++) {
		u64 v = READ_ONCE(pc->idx.slot[s]);

		if (pmc_wb_candidate(v))
			hist[min_t(u64, div64_u64(pmc_slot_oblock(v), width),
				   PMC_SWEEP_BUCKETS - 1)]++;
		if (!(s & 0xffff))
			cond_resched();
	}
	if (sw->next >= origin_blocks)
		sw->next = 0;
	first = div64_u64(sw->next, width);
	for (b = first; b < PMC_SWEEP_BUCKETS; b++) {
		if (total && total + hist[b] > sw->cap)
			break;
		total += hist[b];
	}
	lo = (u64)first * width;
	hi = b < PMC_SWEEP_BUCKETS ? (u64)b * width : U64_MAX;
	sw->next = hi;
	if (!total)
		return;

	for (s = 0; s < nb && sw->n < sw->cap; s++) {
		u64 v = READ_ONCE(pc->idx.slot[s]);
		u64 o = pmc_slot_oblock(v);

		if (pmc_wb_candidate(v) && o >= lo && o < hi)
			pmc_sweep_add(sw, s, v);
		if (!(s & 0xffff))
			cond_resched();
	}
}

static void pmc_sweep_build(struct pmemcache *pc)
{
	struct pmc_sweep *sw = &pc->sweep;

	sw->n = 0;
	sw->pos = 0;
	if (pc->stripe_blocks)
		pmc_sweep_window(pc);
	else
		pmc_sweep_clock(pc);
	sort(sw->c, sw->n, sizeof(*sw->c), pmc_cand_cmp, NULL);
}

/*
 * End of the group of sweep entries in the stripe of entry @i; @whole
 * tells whether the group is one whole stripe of fully valid blocks.
 */
static unsigned int pmc_group_end(struct pmemcache *pc, unsigned int i,
				  bool *whole)
{
	struct pmc_sweep *sw = &pc->sweep;
	u32 sb = max(pc->stripe_blocks, 1U);
	u64 stripe = div_u64(pmc_slot_oblock(sw->c[i].v), sb);
	unsigned int j;

	*whole = sb > 1;
	for (j = i; j < sw->n; j++) {
		u64 o = pmc_slot_oblock(sw->c[j].v);

		if (div_u64(o, sb) != stripe)
			break;
		if (o != stripe * sb + (j - i) ||
		    pmc_slot_mask(sw->c[j].v) != pc->meta.full_mask)
			*whole = false;
	}
	if (j - i != sb)
		*whole = false;
	return j;
}

/*
 * Mark the block of a sweep entry as being written back, if it is still
 * what the sweep saw and may go now.
 */
static bool pmc_wb_claim(struct pmemcache *pc, const struct pmc_wb_cand *c,
			 unsigned int sel)
{
	struct pmc_stripe *st = pmc_stripe_of(pc, pmc_slot_oblock(c->v));
	bool ok;

	if ((sel & PMC_SEL_AGED) &&
	    pmc_slot_epoch(c->v) == (atomic_read(&pc->epoch) & 3))
		return false;
	down_write(&st->lock);
	ok = READ_ONCE(pc->idx.slot[c->slot]) == c->v &&
	     !atomic_read(&st->around);
	if (ok)
		pmc_meta_wb_start(&pc->idx, c->slot);
	up_write(&st->lock);
	return ok;
}

/*
 * Fill @out (PMC_WB_PASS entries) with about @want blocks to write back,
 * sorted by origin block, each already marked PMC_SF_WB.  A stripe is not
 * split between passes: the first one is taken whole even if it is larger
 * than @want.
 */
unsigned int pmc_wb_select(struct pmemcache *pc, struct pmc_wb_cand *out,
			   unsigned int want, unsigned int sel)
{
	struct pmc_sweep *sw = &pc->sweep;
	unsigned int n = 0, builds = 0, i, end, first, lim;
	bool whole;

	while (n < want) {
		if (sw->pos >= sw->n) {
			/* Two windows: the tail of the origin, then its head. */
			if (builds++ == 2)
				break;
			pmc_sweep_build(pc);
			continue;
		}
		end = pmc_group_end(pc, sw->pos, &whole);
		if (pc->stripe_blocks > 1 && !whole && !(sel & PMC_SEL_PARTIAL)) {
			sw->pos = end;
			continue;
		}
		if (n && n + (end - sw->pos) > want)
			break;
		/* The first group may exceed @want: a stripe goes whole. */
		lim = max_t(unsigned int, want,
			    min_t(unsigned int, end - sw->pos, PMC_WB_PASS));
		first = n;
		for (i = sw->pos; i < end && n < lim; i++)
			if (pmc_wb_claim(pc, &sw->c[i], sel))
				out[n++] = sw->c[i];
		if (whole && n - first == end - sw->pos)
			atomic64_inc(&pc->st.wb_full_stripes);
		sw->pos = i;
	}
	return n;
}
