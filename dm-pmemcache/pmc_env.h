/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The module's side of the calls that the shared policy units (pmc_wb.c,
 * pmc_io.c, pmc_write.c) make on every I/O: static inlines (the headers
 * of those units declare them for the host only).  Out of line they cost
 * a hundred-odd instructions per write (issue 33); the host crash model
 * defines the same names as plain functions.  The other pmc_env_*() stay
 * functions of io.c and writeback.c.  Included by pmemcache.h only.
 */
#ifndef PMC_ENV_H
#define PMC_ENV_H

static inline void pmc_env_stripe_lock(struct pmemcache *pc, u64 oblock)
{
	down_write(&pmc_stripe_of(pc, oblock)->lock);
}

static inline void pmc_env_stripe_unlock(struct pmemcache *pc, u64 oblock)
{
	up_write(&pmc_stripe_of(pc, oblock)->lock);
}

static inline void pmc_env_stripe_lock_read(struct pmemcache *pc, u64 oblock)
{
	down_read(&pmc_stripe_of(pc, oblock)->lock);
}

static inline void pmc_env_stripe_unlock_read(struct pmemcache *pc,
					      u64 oblock)
{
	up_read(&pmc_stripe_of(pc, oblock)->lock);
}

static inline bool pmc_env_stripe_around(struct pmemcache *pc, u64 oblock)
{
	return atomic_read(&pmc_stripe_of(pc, oblock)->around);
}

static inline void pmc_env_dirty_dec(struct pmemcache *pc, u64 v)
{
	pmc_dirty_dec(pc, v);
}

static inline void pmc_env_free_slots(struct pmemcache *pc, const u32 *slots,
				      unsigned int n)
{
	pmc_free_slots(pc, slots, n);
}

static inline int pmc_env_pmem_enter(struct pmemcache *pc)
{
	return pmc_pmem_enter(pc);
}

static inline void pmc_env_pmem_exit(struct pmemcache *pc, int id)
{
	pmc_pmem_exit(id);
}

/* Only a stripe with a write through the cache in flight has a list to look at. */
static inline bool pmc_env_through_busy(struct pmemcache *pc, u64 oblock)
{
	return atomic_read(&pmc_stripe_of(pc, oblock)->through) &&
	       pmc_through_listed(pc, oblock);
}

/* A free slot: see pmc_take_slot() and pmc_alloc_slot() (io.c). */
static inline u32 pmc_env_alloc_slot(struct pmemcache *pc, bool wait)
{
	u32 slot = pmc_take_slot(pc);

	if (likely(slot != PMC_NO_SLOT))
		return slot;
	return pmc_alloc_slot_slow(pc, wait);
}

static inline unsigned int pmc_env_epoch(struct pmemcache *pc)
{
	return atomic_read(&pc->epoch) & 3;
}

static inline void pmc_env_dirty_inc(struct pmemcache *pc, unsigned int epoch)
{
	atomic64_inc(&pc->epoch_dirty[epoch]);
	atomic64_inc(&pc->n_dirty);
}

#endif /* PMC_ENV_H */
