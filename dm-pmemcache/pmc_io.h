/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache I/O policy (pmc_io.c): when a write may go around the
 * cache to the origin, what a read takes from the cache, how a clean
 * block is evicted and how a discard drops a cached copy.  Shared by the
 * kernel module (io.c) and the host crash model
 * (tests/host/crash_model.c), like pmc_wb.c, whose pmc_env_*() functions
 * it uses too.
 */
#ifndef PMC_IO_H
#define PMC_IO_H

#include "pmc_wb.h"

/* ---- what the environment provides (besides pmc_wb.h's) ------------- */

/* The write lock of the stripe of @oblock, if nobody holds it. */
bool pmc_env_stripe_trylock(struct pmemcache *pc, u64 oblock);
/* st->around of the stripe of @oblock, up or down by one. */
void pmc_env_around_inc(struct pmemcache *pc, u64 oblock);
void pmc_env_around_dec(struct pmemcache *pc, u64 oblock);
/* The system goes down: nothing new may reach the origin. */
bool pmc_env_shutting_down(struct pmemcache *pc);
#ifndef __KERNEL__
/* host (pmc_wb.h): a write through the cache of @oblock is between T1 and T2. */
bool pmc_env_through_busy(struct pmemcache *pc, u64 oblock);
#endif
/* Fewer blocks are free, quarantined or dirty than there are blocks. */
bool pmc_env_may_have_clean(struct pmemcache *pc);
/* One evictor at a time (it owns the clock hand). */
void pmc_env_evict_lock(struct pmemcache *pc);
void pmc_env_evict_unlock(struct pmemcache *pc);
/* A long loop may give the CPU away here. */
void pmc_env_resched(struct pmemcache *pc);

/* ---- the policy ------------------------------------------------------- */

/*
 * Count a write of ours to the origin in the stripe's st->around, which
 * keeps writeback off the stripe (pmc_wb_claim()), unless the system is
 * going down.  The caller drops the count once the write completed.
 */
bool pmc_origin_write_get(struct pmemcache *pc, u64 oblock);

/*
 * Under the stripe lock of @oblock (read is enough): may a write of
 * @oblock go around the cache to the origin now?  If so, it is counted
 * (pmc_origin_write_get()).
 */
bool pmc_io_around_get(struct pmemcache *pc, struct pmc_index *idx,
		       u64 oblock);

/*
 * Evict clean slot @s (slot word @v) if nobody holds its stripe and it is
 * still @v: its record durably FREE (E2) before the lock is dropped.  The
 * caller puts it on the free list.
 */
bool pmc_io_evict(struct pmemcache *pc, struct pmc_meta *m,
		  struct pmc_index *idx, u32 s, u64 v);

/*
 * Evict up to @want (at most 64) clean blocks in clock order from @hand
 * (pmc_index_clock()), each durably FREE (pmc_io_evict()), and give
 * their slots to the free list.  Returns how many.
 */
unsigned int pmc_io_evict_clean(struct pmemcache *pc, struct pmc_meta *m,
				struct pmc_index *idx, u32 *hand,
				unsigned int want);

/*
 * Under the stripe lock of @oblock: drop its cached copy for a discard
 * (D1: durably FREE on return).  Returns a slot for the free list, or
 * PMC_NO_SLOT.
 */
u32 pmc_io_drop(struct pmemcache *pc, struct pmc_meta *m,
		struct pmc_index *idx, u64 oblock);

/* Copy sectors @have of the cached copy in slot @slot out: 0 or -EIO. */
typedef int (*pmc_copy_fn)(void *ctx, u32 slot, u32 have);

/*
 * A read of sectors @need of block @oblock.  Under its stripe lock (read),
 * those of them the cache holds are copied out (@copy, its result in
 * *@err), and the copy counts as a hit for eviction.  Returns the sectors
 * copied, 0 if none is cached.  The caller reads the others from the
 * origin once the lock is dropped: nothing pins the copy meanwhile, the
 * copy's sectors were taken first, and those it lacked were the origin's
 * when the read began; a write of them after that (cached, around or
 * through the cache) is concurrent with the read, which may return the
 * old data or the new.  Inline: the hot read path calls @copy directly.
 */
static inline u32 pmc_io_read(struct pmemcache *pc, struct pmc_index *idx,
			      u64 oblock, u32 need, pmc_copy_fn copy, void *ctx,
			      int *err)
{
	u32 slot, have = 0;

	*err = 0;
	pmc_env_stripe_lock_read(pc, oblock);
	slot = pmc_index_lookup(idx, oblock);
	if (slot != PMC_NO_SLOT)
		have = pmc_slot_mask(idx->slot[slot]) & need;
	if (have) {
		*err = copy(ctx, slot, have);
		pmc_index_ref(idx, slot);
	}
	pmc_env_stripe_unlock_read(pc, oblock);
	return have;
}

/*
 * A discard of blocks [@first, @last): drop their cached copies, each
 * durably FREE before its stripe lock is dropped (pmc_io_drop()), and
 * give the slots to the free list, 64 at a time.  A range larger than
 * the cache walks the cache instead.
 */
void pmc_io_discard(struct pmemcache *pc, struct pmc_meta *m,
		    struct pmc_index *idx, u64 first, u64 last);

#endif /* PMC_IO_H */
