// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache write policy, shared with the host crash model
 * (pmc_write.h).  A write of a cached block, or of a new one while a slot
 * is free, is committed into pmem (pmc_meta_write_block(): W1-W6).  With
 * no slot free, or in cleaner mode, a block that is not cached goes
 * around the cache and a cached one replaces its copy through the origin
 * (format.md, "Write through the cache": T0-T3).
 */
#include "pmc_write.h"

/*
 * The stripe lock of @oblock for writing, once no write through the
 * cache of the block is in flight: one cached meanwhile would later be
 * written back over T1 with older sectors of the copy.
 */
static void pmc_write_lock_block(struct pmemcache *pc, u64 oblock)
{
	pmc_env_stripe_lock(pc, oblock);
	while (pmc_env_through_busy(pc, oblock)) {
		pmc_env_stripe_unlock(pc, oblock);
		pmc_env_through_wait(pc, oblock);
		pmc_env_stripe_lock(pc, oblock);
	}
}

/* A block that is not cached, around the cache, if pmc_io_around_get() lets it. */
static bool pmc_write_around(struct pmemcache *pc, struct pmc_index *idx,
			     struct pmc_write *w)
{
	bool around;

	pmc_env_stripe_lock_read(pc, w->oblock);
	around = pmc_io_around_get(pc, idx, w->oblock);
	pmc_env_stripe_unlock_read(pc, w->oblock);
	return around;
}

/*
 * T2: the cached copy @v of @oblock durably FREE (pmc_meta_drop_block()
 * fences it, D1).  Not once the namespace is gone: then the copy stays
 * live in pmem and wins over the write at the next load, so the write
 * must fail.
 */
static int pmc_through_drop(struct pmemcache *pc, struct pmc_meta *m,
			    struct pmc_index *idx, u64 oblock, u64 v,
			    u32 *freed)
{
	int id = pmc_env_pmem_enter(pc);

	if (id < 0)
		return id;
	if (pmc_slot_flags(v) & PMC_SF_DIRTY)
		pmc_env_dirty_dec(pc, v);
	pmc_meta_drop_block(m, idx, oblock, freed);
	pmc_env_pmem_exit(pc, id);
	return 0;
}

/*
 * A cached block with no slot free, or in cleaner mode.  Waiting for
 * writeback could take for ever (the origin may be failing, or rewritten
 * blocks keep coming), so the write replaces the cached copy through the
 * origin: T1 the new sectors, merged with those only the cached copy
 * holds, go to the origin with FUA; T2 the copy's record is made durably
 * FREE (before T1 if the copy is clean); T3 the write completes.  If T1
 * fails, the write fails with its error and a dirty copy stays as it was.
 *
 * Send @w through the cache to the origin: 0 if it is on its way
 * (pmc_write_through_done() ends it), -EBUSY while a copy of the block
 * is being written back (that origin write could land after this one),
 * -ESHUTDOWN when the system goes down, another error if the write
 * failed (T0).  st->around keeps writeback from starting one until T2 is
 * done, and the block stays busy until then (pmc_write_lock_block()).
 */
static int pmc_write_through(struct pmemcache *pc, struct pmc_meta *m,
			     struct pmc_index *idx, struct pmc_write *w)
{
	u32 freed = PMC_NO_SLOT;
	struct pmc_thru *t;
	int r;

	/* Before any lock: it may wait for a write through to complete. */
	t = pmc_env_through_alloc(pc, w);
	pmc_write_lock_block(pc, w->oblock);
	if (pmc_index_inflight(idx, w->oblock)) {
		r = -EBUSY;
		goto unlock;
	}
	if (!pmc_origin_write_get(pc, w->oblock)) {
		r = -ESHUTDOWN;
		goto unlock;
	}
	t->oblock = w->oblock;
	t->slot = pmc_index_lookup(idx, w->oblock);
	t->v = t->slot != PMC_NO_SLOT ? idx->slot[t->slot] : 0;
	t->keep = t->slot != PMC_NO_SLOT ? pmc_slot_mask(t->v) & ~w->mask : 0;
	t->mask = w->mask | t->keep;
	r = pmc_env_through_fill(pc, t, w);
	if (r)
		pmc_env_media_error(pc);
	/*
	 * A clean copy goes first: the origin holds its data, and a crash
	 * after T1 must not leave it CLEAN over the newer data (it would be
	 * read until evicted, then the origin's).  A dirty one goes after
	 * T1: a crash before T2 leaves it dirty, so writeback puts it back.
	 */
	if (!r && t->slot != PMC_NO_SLOT &&
	    !(pmc_slot_flags(t->v) & PMC_SF_DIRTY)) {
		r = pmc_through_drop(pc, m, idx, w->oblock, t->v, &freed);
		t->slot = PMC_NO_SLOT;
	}
	if (r) {
		pmc_env_around_dec(pc, w->oblock);
		goto unlock;
	}
	pmc_env_through_mark(pc, t, true);
	pmc_env_stripe_unlock(pc, w->oblock);
	if (freed != PMC_NO_SLOT)
		pmc_env_free_slots(pc, &freed, 1);
	pmc_env_through_start(pc, t);
	return 0;

unlock:
	pmc_env_stripe_unlock(pc, w->oblock);
	pmc_env_through_free(pc, t);
	return r;
}

int pmc_write_through_done(struct pmemcache *pc, struct pmc_meta *m,
			   struct pmc_index *idx, struct pmc_thru *t)
{
	u32 freed = PMC_NO_SLOT;
	int r;

	/* T1.  If it fails, a dirty cached copy stays as it was. */
	r = pmc_env_through_write(pc, t);
	if (!r)
		pmc_cut_point(PMC_CUT_THROUGH_T1);
	/*
	 * T2, durably FREE before the lock lets anyone see it gone.  A
	 * discard may have dropped the copy meanwhile.
	 */
	if (!r && t->slot != PMC_NO_SLOT) {
		pmc_env_stripe_lock(pc, t->oblock);
		if (idx->slot[t->slot] == t->v)
			r = pmc_through_drop(pc, m, idx, t->oblock, t->v, &freed);
		pmc_env_stripe_unlock(pc, t->oblock);
	}
	/* The block is no longer busy: whoever waits for it may go. */
	pmc_env_through_mark(pc, t, false);
	pmc_env_around_dec(pc, t->oblock);
	if (freed != PMC_NO_SLOT)
		pmc_env_free_slots(pc, &freed, 1);
	return r;
}

/*
 * cleaner: a write to a block whose copy is being written back waits for
 * that writeback (a while: pmc_env_cleaner_until()), then goes through the
 * cache; caching it dirty again could keep a flush (detach) under a load
 * that rewrites one block from ever ending.  -EBUSY if it still cannot.
 */
static int pmc_write_through_cleaner(struct pmemcache *pc, struct pmc_meta *m,
				     struct pmc_index *idx, struct pmc_write *w)
{
	unsigned long until = pmc_env_cleaner_until(pc);
	int token, r;

	for (;;) {
		token = pmc_env_wb_token(pc);
		r = pmc_write_through(pc, m, idx, w);
		if (r != -EBUSY ||
		    !pmc_env_wait_writeback(pc, token, until))
			return r;
	}
}

/* Commit @w into free slot @slot: W1-W6, durable on return. */
static enum pmc_write_to pmc_write_commit(struct pmemcache *pc,
					  struct pmc_meta *m,
					  struct pmc_index *idx,
					  struct pmc_write *w, u32 slot)
{
	unsigned int epoch = pmc_env_epoch(pc);
	u32 old, freed;
	u64 ov;
	int r;

	pmc_write_lock_block(pc, w->oblock);
	old = pmc_index_lookup(idx, w->oblock);
	ov = old != PMC_NO_SLOT ? idx->slot[old] : 0;
	r = pmc_meta_write_over(m, idx, w->oblock, w->mask, slot, old, epoch,
				w->fill, w->ctx, &freed);
	if (!r) {
		/* A rewrite: the block stays longer once it is clean. */
		if (old != PMC_NO_SLOT)
			pmc_index_ref(idx, slot);
		if (old != PMC_NO_SLOT && (pmc_slot_flags(ov) & PMC_SF_DIRTY))
			pmc_env_dirty_dec(pc, ov);
		pmc_env_dirty_inc(pc, epoch);
	}
	pmc_env_stripe_unlock(pc, w->oblock);
	if (r) {
		/* No stray store of ours may land in the slot's next life. */
		pmc_meta_fence(PMC_P_DATA);
		pmc_env_free_slots(pc, &slot, 1);
		pmc_env_media_error(pc);
		w->err = r;
		return PMC_W_FAILED;
	}
	if (freed != PMC_NO_SLOT)
		pmc_env_free_slots(pc, &freed, 1);
	w->hit = old != PMC_NO_SLOT;
	return PMC_W_CACHED;
}

/* Through the cache: on its way, or failed with its error. */
static enum pmc_write_to pmc_write_through_to(struct pmc_write *w, int r)
{
	if (!r)
		return PMC_W_THROUGH;
	w->err = r;
	return PMC_W_FAILED;
}

enum pmc_write_to pmc_write(struct pmemcache *pc, struct pmc_meta *m,
			    struct pmc_index *idx, struct pmc_write *w)
{
	u32 slot;
	int r;

	w->hit = false;
	w->full = false;
	w->err = 0;
	if (w->around_first && pmc_write_around(pc, idx, w))
		return PMC_W_AROUND;
	/*
	 * cleaner: no new dirty data either, or a flush (detach) under a
	 * load that rewrites cached blocks might never end.  A cached block
	 * is replaced through the origin, as in a full cache.
	 */
	if (w->cleaner) {
		r = pmc_write_through_cleaner(pc, m, idx, w);
		if (r != -EBUSY && r != -ESHUTDOWN)
			return pmc_write_through_to(w, r);
	}
	/*
	 * Cache full: wait for writeback a while (full_wait).  Then a
	 * block that is not cached goes around the cache, and a cached one
	 * replaces its cached copy through the origin.  Only while a copy of
	 * the block is being written back does the write wait longer: until
	 * that origin write completed or failed.
	 */
	slot = pmc_env_alloc_slot(pc, true);
	while (slot == PMC_NO_SLOT) {
		int token = pmc_env_wb_token(pc);

		w->full = true;
		if (pmc_write_around(pc, idx, w))
			return PMC_W_AROUND;
		r = pmc_write_through(pc, m, idx, w);
		/* Going down: no room and no way to the origin.  Not acked. */
		if (r != -EBUSY)
			return pmc_write_through_to(w, r == -ESHUTDOWN ? -EIO : r);
		pmc_env_wait_room(pc, token);
		slot = pmc_env_alloc_slot(pc, false);
	}
	w->full = false;
	return pmc_write_commit(pc, m, idx, w, slot);
}

int pmc_write_heal(struct pmemcache *pc, struct pmc_meta *m,
		   struct pmc_index *idx, u32 slot, u64 v, pmc_fill_fn fill,
		   void *ctx)
{
	u64 oblock = pmc_slot_oblock(v);
	bool dirty = pmc_slot_flags(v) & PMC_SF_DIRTY;
	unsigned int epoch = pmc_env_epoch(pc);
	u32 fresh = PMC_NO_SLOT, freed = PMC_NO_SLOT;
	int r = 0;

	if (dirty) {
		fresh = pmc_env_alloc_slot(pc, false);
		if (fresh == PMC_NO_SLOT)
			return -EAGAIN;
	}
	pmc_env_stripe_lock(pc, oblock);
	if (idx->slot[slot] != v || pmc_env_through_busy(pc, oblock) ||
	    pmc_index_inflight(idx, oblock)) {
		r = -EAGAIN;
	} else if (!dirty) {
		pmc_meta_drop_block(m, idx, oblock, &freed);	/* D1 fenced */
	} else {
		/* W1-W6 over the bad copy, all its sectors from @fill */
		r = pmc_meta_write_block(m, idx, oblock, pmc_slot_mask(v), fresh,
					 epoch, fill, ctx, &freed);
		if (!r) {
			pmc_env_dirty_dec(pc, v);
			pmc_env_dirty_inc(pc, epoch);
			fresh = PMC_NO_SLOT;
		}
	}
	pmc_env_stripe_unlock(pc, oblock);
	if (fresh != PMC_NO_SLOT) {
		/* No stray store of ours may land in the slot's next life. */
		pmc_meta_fence(PMC_P_DATA);
		pmc_env_free_slots(pc, &fresh, 1);
	}
	if (freed != PMC_NO_SLOT)
		pmc_env_retire_slot(pc, freed);
	return r;
}
