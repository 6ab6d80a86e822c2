// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache writeback policy, shared with the host crash model
 * (pmc_wb.h).  Origin writes carry no FUA: a block is marked CLEAN only
 * after an origin flush issued after its write completed (C1), and the
 * CLEAN store is fenced before the stripe lock is dropped (C2).
 */
#include "pmc_wb.h"

bool pmc_wb_look(struct pmemcache *pc, struct pmc_index *idx, u64 oblock,
		 struct pmc_wb_cand *c)
{
	u32 s;

	pmc_env_stripe_lock_read(pc, oblock);
	s = pmc_index_lookup(idx, oblock);
	if (s != PMC_NO_SLOT) {
		c->slot = s;
		c->v = READ_ONCE(idx->slot[s]);
	}
	pmc_env_stripe_unlock_read(pc, oblock);
	return s != PMC_NO_SLOT;
}

bool pmc_wb_claim(struct pmemcache *pc, struct pmc_index *idx,
		  const struct pmc_wb_cand *c)
{
	u64 oblock = pmc_slot_oblock(c->v);
	bool ok;

	pmc_env_stripe_lock(pc, oblock);
	/*
	 * A write-around or write-through of this stripe is on its way to
	 * the origin: an older copy sent now could land after it.
	 */
	ok = READ_ONCE(idx->slot[c->slot]) == c->v &&
	     !pmc_env_stripe_around(pc, oblock);
	if (ok)
		pmc_meta_wb_start(idx, c->slot);
	pmc_env_stripe_unlock(pc, oblock);
	return ok;
}

int pmc_wb_flush_before_clean(struct pmemcache *pc, bool any_ok)
{
	int r;

	if (!any_ok)
		return 0;
	pmc_cut_point(PMC_CUT_WB_WRITTEN);
	/* C1: the completed writes are in the origin's volatile cache. */
	r = pmc_env_origin_flush(pc);
	if (r)
		return r;
	pmc_cut_point(PMC_CUT_WB_FLUSHED);
	return 0;
}

u32 pmc_wb_block_done(struct pmemcache *pc, struct pmc_meta *m,
		      struct pmc_index *idx, u64 oblock, u32 slot, bool ok)
{
	u64 v;
	u32 f;

	pmc_env_stripe_lock(pc, oblock);
	v = idx->slot[slot];
	if (pmc_meta_wb_done(m, idx, slot, ok, &f))
		pmc_env_wb_quarantined(pc, slot, v);
	else if (ok && !(pmc_slot_flags(v) & PMC_SF_STALE))
		pmc_env_dirty_dec(pc, v);
	/*
	 * C2: the CLEAN store is fenced before the lock is dropped: once
	 * another CPU sees the block clean it may evict it, and a late
	 * non-temporal CLEAN store must not land after that CPU's FREE store.
	 */
	pmc_meta_fence(PMC_P_CLEAN);
	pmc_env_stripe_unlock(pc, oblock);
	return f;
}
