/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache writeback policy (pmc_wb.c): which dirty block may go to
 * the origin now, and when one that went may become CLEAN.  Shared by the
 * kernel module (writeback.c, wb_select.c) and the host crash model
 * (tests/host/crash_model.c), which runs these decisions instead of a
 * copy of them.
 *
 * The I/O and the locks are the caller's, behind the pmc_env_*()
 * functions below: plain functions of the module (writeback.c), called
 * directly, and of the model on the host.  struct pmemcache is the
 * module's target; the model has its own.
 */
#ifndef PMC_WB_H
#define PMC_WB_H

#include "pmc_meta.h"

struct pmemcache;

/* ---- what the environment provides ------------------------------------ */

/* The write lock of the index stripe of @oblock. */
void pmc_env_stripe_lock(struct pmemcache *pc, u64 oblock);
void pmc_env_stripe_unlock(struct pmemcache *pc, u64 oblock);
/* ... and for reading. */
void pmc_env_stripe_lock_read(struct pmemcache *pc, u64 oblock);
void pmc_env_stripe_unlock_read(struct pmemcache *pc, u64 oblock);
/*
 * A write of ours to the origin (around or through the cache) is in
 * flight in the stripe of @oblock (st->around); under the stripe lock.
 */
bool pmc_env_stripe_around(struct pmemcache *pc, u64 oblock);
/* One flush of the origin's volatile cache: 0 or -errno. */
int pmc_env_origin_flush(struct pmemcache *pc);
/* The block of slot word @v is dirty no more (CLEAN, or dropped). */
void pmc_env_dirty_dec(struct pmemcache *pc, u64 v);
/* Slot @slot (word @v) could not be marked CLEAN: out of use. */
void pmc_env_wb_quarantined(struct pmemcache *pc, u32 slot, u64 v);

/* ---- the policy ------------------------------------------------------- */

/*
 * The live copy of @oblock, under its stripe lock: true and @c filled in
 * if the block is cached (pmc_wb_ops.look).
 */
bool pmc_wb_look(struct pmemcache *pc, struct pmc_index *idx, u64 oblock,
		 struct pmc_wb_cand *c);

/*
 * Claim the block of @c for writeback (PMC_SF_WB) if its slot word is
 * still @c->v and no write of ours to the origin runs in its stripe.
 */
bool pmc_wb_claim(struct pmemcache *pc, struct pmc_index *idx,
		  const struct pmc_wb_cand *c);

/*
 * The origin writes of a batch have completed (@any_ok: at least one
 * without error).  Returns 0 if those that completed may become CLEAN,
 * else the error of the origin flush that had to make them durable: then
 * none may.
 */
int pmc_wb_flush_before_clean(struct pmemcache *pc, bool any_ok);

/*
 * The writeback of @slot (block @oblock) ended: @ok if its origin write
 * and the flush after it succeeded.  CLEAN, stale slot freed or
 * quarantined, under the stripe lock.  Returns a slot for the free list,
 * or PMC_NO_SLOT.  Also gives back a claim that was never sent (!@ok).
 */
u32 pmc_wb_block_done(struct pmemcache *pc, struct pmc_meta *m,
		      struct pmc_index *idx, u64 oblock, u32 slot, bool ok);

#endif /* PMC_WB_H */
