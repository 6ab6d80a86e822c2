// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache writeback policy, shared with the host crash model
 * (pmc_wb.h).  Origin writes carry no FUA: a block is marked CLEAN only
 * after an origin flush issued after its write completed (C1), and the
 * CLEAN store is fenced before the stripe lock is dropped (C2).  A write
 * or flush that failed leaves its blocks dirty, to be sent again.
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

/*
 * The origin writes of a batch have completed (@any_ok: at least one
 * without error).  Returns 0 if those that completed may become CLEAN,
 * else the error of the origin flush that had to make them durable: then
 * none may.
 */
static int pmc_wb_flush_before_clean(struct pmemcache *pc, bool any_ok)
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

/*
 * The writeback of @slot (block @oblock) ended: @ok if its origin write
 * and the flush after it succeeded.  CLEAN, stale slot freed or
 * quarantined, under the stripe lock.  Returns a slot for the free list,
 * or PMC_NO_SLOT.  Also gives back a claim that was never sent (!@ok).
 */
static u32 pmc_wb_block_done(struct pmemcache *pc, struct pmc_meta *m,
			     struct pmc_index *idx, u64 oblock, u32 slot,
			     bool ok)
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

/* Slots freed by block completions, given to the free list 64 at a time. */
struct pmc_wb_freed {
	u32 slot[64];
	unsigned int n;
};

static void pmc_wb_freed_add(struct pmemcache *pc, struct pmc_wb_freed *fr,
			     u32 f)
{
	if (f == PMC_NO_SLOT)
		return;
	fr->slot[fr->n++] = f;
	if (fr->n == ARRAY_SIZE(fr->slot)) {
		pmc_env_free_slots(pc, fr->slot, fr->n);
		fr->n = 0;
	}
}

/* Claims of blocks that were never sent go back: the blocks stay dirty. */
static void pmc_wb_unclaim(struct pmemcache *pc, struct pmc_meta *m,
			   struct pmc_index *idx, const struct pmc_wb_cand *c,
			   unsigned int n)
{
	struct pmc_wb_freed fr = { .n = 0 };
	unsigned int i;
	u32 f;

	for (i = 0; i < n; i++) {
		f = pmc_wb_block_done(pc, m, idx, pmc_slot_oblock(c[i].v),
				      c[i].slot, false);
		pmc_wb_freed_add(pc, &fr, f);
	}
	pmc_env_free_slots(pc, fr.slot, fr.n);
}

/* May the block of @c join a run of whole blocks? */
static bool pmc_wb_whole(struct pmemcache *pc, struct pmc_meta *m,
			 const struct pmc_wb_cand *c)
{
	return pmc_slot_mask(c->v) == m->full_mask &&
	       !pmc_env_wb_poisoned(pc, c->slot);
}

unsigned int pmc_wb_send(struct pmemcache *pc, struct pmc_meta *m,
			 struct pmc_index *idx, const struct pmc_wb_cand *c,
			 unsigned int n, unsigned int max_run)
{
	unsigned int i, j;

	for (i = 0; i < n; i = j) {
		j = i + 1;
		/*
		 * A partly valid block needs a write per run of sectors, and a
		 * poisoned one goes alone: its failure keeps no other dirty.
		 */
		if (pmc_wb_whole(pc, m, &c[i])) {
			while (j < n && j - i < max_run &&
			       pmc_slot_oblock(c[j].v) ==
			       pmc_slot_oblock(c[j - 1].v) + 1 &&
			       pmc_wb_whole(pc, m, &c[j]))
				j++;
		}
		if (!pmc_env_wb_submit(pc, &c[i], j - i)) {
			pmc_wb_unclaim(pc, m, idx, &c[i], n - i);
			return i;
		}
	}
	return n;
}

unsigned int pmc_wb_complete(struct pmemcache *pc, struct pmc_meta *m,
			     struct pmc_index *idx,
			     struct pmc_wb_write *batch)
{
	struct pmc_wb_freed fr = { .n = 0 };
	struct pmc_wb_write *w;
	unsigned int i, cleaned = 0;
	bool any = false, clean;
	int r, id;
	u32 f;

	for (w = batch; w; w = w->next)
		any |= !w->err && !w->unsent;
	r = pmc_wb_flush_before_clean(pc, any);
	/* The namespace gone: no CLEAN store, the blocks stay dirty there. */
	id = pmc_env_pmem_enter(pc);
	for (w = batch; w; w = w->next) {
		/* A completed write is durable only with the flush after it. */
		if (!w->err && !w->unsent && r)
			w->err = r;
		if (w->unsent || id < 0)
			w->end = PMC_WB_KEPT;
		else
			w->end = w->err ? PMC_WB_FAILED : PMC_WB_CLEAN;
		clean = w->end == PMC_WB_CLEAN;
		for (i = 0; i < w->n; i++) {
			f = pmc_wb_block_done(pc, m, idx, w->blk[i].oblock,
					      w->blk[i].slot, clean);
			pmc_wb_freed_add(pc, &fr, f);
		}
		if (clean)
			cleaned += w->n;
	}
	if (id >= 0)
		pmc_env_pmem_exit(pc, id);
	pmc_env_free_slots(pc, fr.slot, fr.n);
	return cleaned;
}
