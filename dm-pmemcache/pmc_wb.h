/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache writeback policy (pmc_wb.c): which dirty block may go to
 * the origin now, which go together in one origin write, and when one
 * that went may become CLEAN.  Shared by the kernel module (writeback.c,
 * wb_select.c) and the host crash model (tests/host/crash_model.c), which
 * runs these decisions instead of a copy of them.
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

/*
 * The module: struct pmemcache, and the pmc_env_*() calls of every I/O
 * as static inlines (pmc_env.h), so that the shared units cost what the
 * same code in io.c would.  The host model defines them as functions:
 * their declarations below are the host's only ("host: ").
 */
#ifdef __KERNEL__
#include "pmemcache.h"
#endif

/* One block of an origin write of writeback. */
struct pmc_wb_block {
	u64 oblock;
	u32 slot;
	u32 mask;		/* its sectors, as claimed */
	void *buf;		/* the caller's: a bounce copy, or NULL */
};

/* How an origin write of writeback ended (pmc_wb_complete()). */
enum pmc_wb_end {
	PMC_WB_CLEAN,		/* written, then flushed: its blocks CLEAN */
	PMC_WB_FAILED,		/* the write or the flush after it failed */
	PMC_WB_KEPT,		/* never sent, or pmem gone: nothing failed */
};

/*
 * One origin write of writeback: a run of adjacent whole blocks, or one
 * partly valid block.  The caller's own structure embeds it.
 */
struct pmc_wb_write {
	struct pmc_wb_write *next;	/* in a batch of completions */
	struct pmc_wb_block *blk;	/* @n blocks */
	unsigned int n;
	int err;			/* the write's error (-errno), or 0 */
	bool unsent;			/* not sent: suspended, no memory */
	enum pmc_wb_end end;		/* set by pmc_wb_complete() */
};

/* ---- what the environment provides ------------------------------------ */

#ifndef __KERNEL__
/* host: the write lock of the index stripe of @oblock. */
void pmc_env_stripe_lock(struct pmemcache *pc, u64 oblock);
void pmc_env_stripe_unlock(struct pmemcache *pc, u64 oblock);
/* host: ... and for reading. */
void pmc_env_stripe_lock_read(struct pmemcache *pc, u64 oblock);
void pmc_env_stripe_unlock_read(struct pmemcache *pc, u64 oblock);
/*
 * host: a write of ours to the origin (around or through the cache) is
 * in flight in the stripe of @oblock (st->around); under the stripe lock.
 */
bool pmc_env_stripe_around(struct pmemcache *pc, u64 oblock);
/* host: the block of slot word @v is dirty no more (CLEAN, or dropped). */
void pmc_env_dirty_dec(struct pmemcache *pc, u64 v);
/* host: slots for the free list, their records durably FREE. */
void pmc_env_free_slots(struct pmemcache *pc, const u32 *slots,
			unsigned int n);
/* host: the pmem namespace: still there (>= 0, give it back), or gone. */
int pmc_env_pmem_enter(struct pmemcache *pc);
void pmc_env_pmem_exit(struct pmemcache *pc, int id);
#endif
/* One flush of the origin's volatile cache: 0 or -errno. */
int pmc_env_origin_flush(struct pmemcache *pc);
/* Slot @slot (word @v) could not be marked CLEAN: out of use. */
void pmc_env_wb_quarantined(struct pmemcache *pc, u32 slot, u64 v);
/* The data of @slot is known poison (badblocks) or fails its data crc. */
bool pmc_env_wb_poisoned(struct pmemcache *pc, u32 slot);
/*
 * Send the claimed blocks @c[0..@n) to the origin as one origin write
 * (struct pmc_wb_write, no FUA), whose completion reaches
 * pmc_wb_complete() later, with no lock held.  False if it could not
 * start at all (no memory): the claims are then still the caller's.
 */
bool pmc_env_wb_submit(struct pmemcache *pc, const struct pmc_wb_cand *c,
		       unsigned int n);

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
 * Send the claimed blocks @c[0..@n) (sorted by origin block) to the
 * origin: runs of at most @max_run adjacent whole blocks as one write,
 * every other block alone (pmc_env_wb_submit()).  If one cannot start,
 * the claims of it and of the blocks after it are given back.  Returns
 * how many blocks were sent.
 */
unsigned int pmc_wb_send(struct pmemcache *pc, struct pmc_meta *m,
			 struct pmc_index *idx, const struct pmc_wb_cand *c,
			 unsigned int n, unsigned int max_run);

/*
 * A batch of origin writes of writeback has completed (@batch, linked by
 * ->next; ->err set): one origin flush for those that succeeded (C1),
 * then each block CLEAN, or dirty again, or its stale slot freed, and
 * ->end set.  The caller frees the writes afterwards.  Returns the
 * blocks made CLEAN.
 */
unsigned int pmc_wb_complete(struct pmemcache *pc, struct pmc_meta *m,
			     struct pmc_index *idx,
			     struct pmc_wb_write *batch);

#endif /* PMC_WB_H */
