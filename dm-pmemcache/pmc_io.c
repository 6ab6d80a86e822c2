// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache I/O policy, shared with the host crash model (pmc_io.h).
 */
#include "pmc_io.h"

bool pmc_origin_write_get(struct pmemcache *pc, u64 oblock)
{
	pmc_env_around_inc(pc, oblock);
	/*
	 * Count before flag: pmc_writeback_shutdown() sets the flag and then
	 * waits for the counts to drain: it waits for us, or we see it.
	 */
	pmc_mb_after_atomic();
	if (!pmc_env_shutting_down(pc))
		return true;
	pmc_env_around_dec(pc, oblock);
	return false;
}

/*
 * Not while an older copy is being written back (it could land after
 * this write), nor while a write through the cache of the block is in
 * flight (its T1 rewrites the sectors that the dropped copy held, which
 * this write may cover); and writeback leaves the block alone until this
 * one completed (st->around), so a newer cached copy cannot be overtaken
 * by it either.
 */
bool pmc_io_around_get(struct pmemcache *pc, struct pmc_index *idx,
		       u64 oblock)
{
	if (pmc_index_lookup(idx, oblock) != PMC_NO_SLOT ||
	    pmc_index_inflight(idx, oblock) ||
	    pmc_env_through_busy(pc, oblock))
		return false;
	return pmc_origin_write_get(pc, oblock);
}

/*
 * E2: once the block is out of the index, another CPU may send a write of
 * it around the cache and acknowledge it, and a FREE store still pending
 * on this CPU would then leave the old CLEAN record live over the newer
 * origin data after a power cut.  That also covers the free list: a
 * slot's data may only be overwritten when no live record points at it.
 */
bool pmc_io_evict(struct pmemcache *pc, struct pmc_meta *m,
		  struct pmc_index *idx, u32 s, u64 v)
{
	u64 oblock = pmc_slot_oblock(v);
	bool ok = false;

	if (!pmc_env_stripe_trylock(pc, oblock))
		return false;
	/* Re-check under the lock: it may have changed. */
	if (READ_ONCE(idx->slot[s]) == v) {
		pmc_meta_evict(m, idx, s);
		pmc_meta_fence(PMC_P_FREE);
		ok = true;
	}
	pmc_env_stripe_unlock(pc, oblock);
	return ok;
}

struct pmc_evict {
	struct pmemcache *pc;
	struct pmc_meta *m;
	struct pmc_index *idx;
	u32 victims[64];
	unsigned int got;
};

/* pmc_take_fn: evict clean slot @s (slot word @v) if nobody holds it. */
static bool pmc_evict_one(void *ctx, u32 s, u64 v)
{
	struct pmc_evict *e = ctx;

	if (!pmc_io_evict(e->pc, e->m, e->idx, s, v))
		return false;
	e->victims[e->got++] = s;
	return true;
}

/*
 * O(log n) per block looked at, with a second chance for referenced
 * blocks, never a scan of the whole index.
 */
unsigned int pmc_io_evict_clean(struct pmemcache *pc, struct pmc_meta *m,
				struct pmc_index *idx, u32 *hand,
				unsigned int want)
{
	struct pmc_evict e = { .pc = pc, .m = m, .idx = idx };

	if (want > ARRAY_SIZE(e.victims))
		want = ARRAY_SIZE(e.victims);
	/* A cache full of dirty blocks: not even a look at the bitmap. */
	if (!pmc_env_may_have_clean(pc))
		return 0;
	pmc_env_evict_lock(pc);
	pmc_index_clock(idx, hand, want, pmc_evict_one, &e);
	pmc_env_free_slots(pc, e.victims, e.got);
	pmc_env_evict_unlock(pc);
	return e.got;
}

u32 pmc_io_drop(struct pmemcache *pc, struct pmc_meta *m,
		struct pmc_index *idx, u64 oblock)
{
	u32 slot = pmc_index_lookup(idx, oblock), f = PMC_NO_SLOT;
	u64 v;

	if (slot == PMC_NO_SLOT)
		return PMC_NO_SLOT;
	v = idx->slot[slot];
	if (pmc_slot_flags(v) & PMC_SF_DIRTY)
		pmc_env_dirty_dec(pc, v);
	/* D1: durably FREE before the caller drops the stripe lock */
	pmc_meta_drop_block(m, idx, oblock, &f);
	pmc_cut_point(PMC_CUT_DISCARD_D1);
	return f;
}

struct pmc_discard {
	u32 freed[64];
	unsigned int n;
};

static void pmc_discard_one(struct pmemcache *pc, struct pmc_meta *m,
			    struct pmc_index *idx, u64 oblock,
			    struct pmc_discard *d)
{
	u32 f;

	pmc_env_stripe_lock(pc, oblock);
	f = pmc_io_drop(pc, m, idx, oblock);
	pmc_env_stripe_unlock(pc, oblock);
	if (f == PMC_NO_SLOT)
		return;
	d->freed[d->n++] = f;
	/* D2: no fence of its own, D1 fenced each record FREE */
	if (d->n == ARRAY_SIZE(d->freed)) {
		pmc_env_free_slots(pc, d->freed, d->n);
		d->n = 0;
	}
}

void pmc_io_discard(struct pmemcache *pc, struct pmc_meta *m,
		    struct pmc_index *idx, u64 first, u64 last)
{
	struct pmc_discard d = { .n = 0 };
	u64 ob, s;

	if (last > first && last - first > m->n_blocks) {
		for (s = 0; s < m->n_blocks; s++) {
			u64 v = READ_ONCE(idx->slot[s]);

			if ((pmc_slot_flags(v) & PMC_SF_USED) &&
			    pmc_slot_oblock(v) >= first &&
			    pmc_slot_oblock(v) < last)
				pmc_discard_one(pc, m, idx, pmc_slot_oblock(v),
						&d);
			if (!(s & 4095))
				pmc_env_resched(pc);
		}
	} else {
		for (ob = first; ob < last; ob++) {
			pmc_discard_one(pc, m, idx, ob, &d);
			if (!((ob - first) & 4095))
				pmc_env_resched(pc);
		}
	}
	pmc_env_free_slots(pc, d.freed, d.n);
}
