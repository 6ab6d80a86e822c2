/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache write policy (pmc_write.c): what a write of one cache
 * block becomes (committed into the cache, sent around it to the origin,
 * or written through it), in which order, and when it waits for room.
 * Shared by the kernel module (io.c) and the host crash model
 * (tests/host/crash_model.c), like pmc_io.c and pmc_wb.c, whose
 * pmc_env_*() functions it uses too.  It holds no bio: the write is a
 * struct pmc_write, its data behind @fill, the origin behind pmc_env_*().
 */
#ifndef PMC_WRITE_H
#define PMC_WRITE_H

#include "pmc_io.h"

/* One write of at most one cache block. */
struct pmc_write {
	u64 oblock;
	u32 mask;		/* sectors of the block it writes */
	bool around_first;	/* around the cache if it may (cleaner, sequential) */
	bool cleaner;		/* no new dirty data: through the cache if cached */
	pmc_fill_fn fill;	/* copies its data into a new pmem block */
	void *ctx;		/* the caller's, for @fill and pmc_env_through_*() */
	/* set by pmc_write() */
	bool hit;		/* committed over a cached copy */
	bool full;		/* around or through because no slot was free */
	int err;		/* PMC_W_FAILED: why */
};

enum pmc_write_to {
	PMC_W_CACHED,		/* committed: complete it */
	PMC_W_AROUND,		/* counted in st->around: send it to the origin, FUA */
	PMC_W_THROUGH,		/* pmc_write_through_done() completes it */
	PMC_W_FAILED,		/* fail it with @err */
};

/*
 * A write through the cache between its map call and T2; the caller's
 * own structure embeds it (pmc_env_through_alloc()).
 */
struct pmc_thru {
	u64 oblock;
	u64 v;			/* slot word of the dirty copy that T2 drops */
	u32 slot;		/* its slot, or PMC_NO_SLOT */
	u32 keep;		/* sectors only the cached copy holds */
	u32 mask;		/* sectors that T1 writes: the write's and @keep */
};

/* ---- what the environment provides (besides pmc_io.h's) ------------- */

/* Sleep until no write through the cache of @oblock is in flight. */
void pmc_env_through_wait(struct pmemcache *pc, u64 oblock);
#ifndef __KERNEL__
/*
 * host (pmc_wb.h): a free slot, evicting clean blocks
 * (pmc_io_evict_clean()); if @wait, waiting for writeback as long as a
 * full cache lets a write wait.
 */
u32 pmc_env_alloc_slot(struct pmemcache *pc, bool wait);
/* host: the epoch a new dirty block joins; one more dirty block in it. */
unsigned int pmc_env_epoch(struct pmemcache *pc);
void pmc_env_dirty_inc(struct pmemcache *pc, unsigned int epoch);
#endif
/* @slot is out of use until the cache is loaded again (bad pmem). */
void pmc_env_retire_slot(struct pmemcache *pc, u32 slot);
/* A pmem media error (a failed commit or copy). */
void pmc_env_media_error(struct pmemcache *pc);
/* How long cleaner mode waits for a writeback of the block written. */
unsigned long pmc_env_cleaner_until(struct pmemcache *pc);
/* A count that moves at every writeback completion. */
int pmc_env_wb_token(struct pmemcache *pc);
/*
 * Sleep until @token moved (a writeback completed): false, without
 * sleeping, once @until passed.  _room: a slot may be free, at most a
 * while.
 */
bool pmc_env_wait_writeback(struct pmemcache *pc, int token,
			    unsigned long until);
void pmc_env_wait_room(struct pmemcache *pc, int token);

/* A write through the cache: its memory, taken before any lock. */
struct pmc_thru *pmc_env_through_alloc(struct pmemcache *pc,
				       struct pmc_write *w);
void pmc_env_through_free(struct pmemcache *pc, struct pmc_thru *t);
/* T0, under the stripe lock: the block as T1 writes it.  0 or -EIO. */
int pmc_env_through_fill(struct pmemcache *pc, struct pmc_thru *t,
			 struct pmc_write *w);
/* On or off the busy list that pmc_env_through_busy() looks at. */
void pmc_env_through_mark(struct pmemcache *pc, struct pmc_thru *t,
			  bool busy);
/* Run pmc_write_through_done(@t) later, with no lock held. */
void pmc_env_through_start(struct pmemcache *pc, struct pmc_thru *t);
/* T1: sectors @t->mask to the origin with FUA.  0 or -errno. */
int pmc_env_through_write(struct pmemcache *pc, struct pmc_thru *t);

/* ---- the policy ------------------------------------------------------- */

/*
 * Where write @w goes, and its commit into the cache if it goes there
 * (durable before this returns PMC_W_CACHED).  May sleep: for room in a
 * full cache, for a write through the cache of the block, for writeback
 * in cleaner mode.
 */
enum pmc_write_to pmc_write(struct pmemcache *pc, struct pmc_meta *m,
			    struct pmc_index *idx, struct pmc_write *w);

/*
 * Heal cache block @slot, last seen as @v, whose copy on the half reads
 * use met a media error (a mirror read it from the other half meanwhile):
 * a clean copy is dropped, the origin holds it; a dirty one is committed
 * anew into a free slot, @fill copying its good data, so that both
 * halves hold it again.  The bad slot is retired, never reused.  Only if
 * @slot still holds @v and no write through the cache or writeback of
 * the block is in flight (a later read asks again): -EAGAIN then, or
 * with no slot free.  Never sleeps for another work item.
 */
int pmc_write_heal(struct pmemcache *pc, struct pmc_meta *m,
		   struct pmc_index *idx, u32 slot, u64 v, pmc_fill_fn fill,
		   void *ctx);

/*
 * T1, then T2 for a dirty copy, of the write through the cache @t, with
 * no lock held: 0 if the write may complete, else its error.  @t is the
 * caller's to free afterwards.
 */
int pmc_write_through_done(struct pmemcache *pc, struct pmc_meta *m,
			   struct pmc_index *idx, struct pmc_thru *t);

#endif /* PMC_WRITE_H */
