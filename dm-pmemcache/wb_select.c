// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: which dirty blocks to write back next.
 *
 * md raid5/6 turns a write of less than a whole stripe into a
 * read-modify-write and says so (raid_partial_stripes_expensive, io_opt =
 * the stripe).  Writeback therefore walks the origin in order, like an
 * elevator, and takes whole, aligned stripes; partial ones only when
 * pressure or max_age allows (PMC_SEL_PARTIAL).  A partial stripe that is
 * passed over waits until a block of it changes, by which time its
 * neighbours may have arrived.  On other origins (stripe_blocks 0 or 1)
 * the walk gives long sorted runs.
 *
 * The walk itself is shared code (pmc_index_wb_select() in pmc_index.c,
 * also run by the host model): bitmaps over chunks of the origin say
 * where candidates may be, so it never scans the index; this file gives
 * it the lookups and claims under the stripe locks.
 */
#include <linux/blkdev.h>

#include "pmemcache.h"

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

/*
 * Constructor: the selection bitmaps, sized by the whole origin device,
 * not the table: a table may be shorter than the origin (even shorter
 * than one block), and a shorter table than an earlier one leaves dirty
 * blocks beyond its end, which must still be written back.
 */
int pmc_select_init(struct pmemcache *pc)
{
	u64 origin_blocks = DIV_ROUND_UP_ULL(bdev_nr_sectors(pc->origin->bdev),
					     1U << pc->spb_shift);

	return pmc_index_wb_alloc(&pc->idx, origin_blocks);
}

/*
 * Resume: chunks of whole stripes of pc->stripe_blocks.  The bits are
 * built from the slot words after the load (recovery), and again only if
 * the stripe size changed; otherwise every store kept them.
 */
void pmc_select_start(struct pmemcache *pc)
{
	pmc_index_wb_build(&pc->idx, pc->stripe_blocks, pc->meta.full_mask);
}

/* pmc_wb_ops.look: the live copy of @oblock (pmc_wb_look(), shared). */
static bool pmc_wb_select_look(void *ctx, u64 oblock, struct pmc_wb_cand *c)
{
	struct pmemcache *pc = ctx;

	return pmc_wb_look(pc, &pc->idx, oblock, c);
}

/*
 * pmc_wb_ops.claim: mark the block being written back, if it is still
 * what selection saw and may go now (pmc_wb_claim(), shared policy).
 */
static bool pmc_wb_select_claim(void *ctx, const struct pmc_wb_cand *c,
				unsigned int sel)
{
	struct pmemcache *pc = ctx;

	if ((sel & PMC_SEL_AGED) && !pmc_epoch_aged(pc, pmc_slot_epoch(c->v)))
		return false;
	return pmc_wb_claim(pc, &pc->idx, c);
}

static const struct pmc_wb_ops pmc_wb_select_ops = {
	.look = pmc_wb_select_look,
	.claim = pmc_wb_select_claim,
};

/*
 * Fill @out (PMC_WB_PASS entries) with about @want blocks to write back,
 * sorted by origin block, each already marked PMC_SF_WB.  A stripe is not
 * split between passes: the first one is taken whole even if it is larger
 * than @want.  Only the writeback work calls it (one selection at a time).
 */
unsigned int pmc_wb_select(struct pmemcache *pc, struct pmc_wb_cand *out,
			   unsigned int want, unsigned int sel)
{
	unsigned int whole = 0, n;

	n = pmc_index_wb_select(&pc->idx, out, want, PMC_WB_PASS, sel,
				&pmc_wb_select_ops, pc, &whole);
	if (whole)
		atomic64_add(whole, &pc->st.wb_full_stripes);
	return n;
}
