// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: the map function.
 *
 * Every bio is at most one cache block (dm_set_target_max_io_len), except
 * discards.  A write is copied into a free pmem block with cache-bypassing
 * stores and committed (pmc_meta_write_block) before it completes, so a
 * REQ_PREFLUSH only has to fence and REQ_FUA needs nothing: the origin is
 * never flushed for them.
 */
#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/highmem.h>
#include <linux/sched.h>

#include "pmemcache.h"
#include "pmc_write.h"

/* ---- free slots ------------------------------------------------------ */

void pmc_free_slots(struct pmemcache *pc, const u32 *slots, unsigned int n)
{
	unsigned int i;

	if (!n)
		return;
	spin_lock(&pc->free_lock);
	for (i = 0; i < n; i++)
		pmc_index_push_free(&pc->idx, slots[i]);
	spin_unlock(&pc->free_lock);
	/*
	 * Most frees find no writer waiting: skip the wait queue's lock.
	 * wq_has_sleeper()'s barrier orders the push before the check; a
	 * waiter queues itself before it looks at the free list.
	 */
	if (wq_has_sleeper(&pc->free_wait))
		wake_up_all(&pc->free_wait);
	pmc_health_clear(pc, PMC_H_FULL);
}

static u32 pmc_pop_free(struct pmemcache *pc)
{
	u32 s;

	spin_lock(&pc->free_lock);
	s = pmc_index_pop_free(&pc->idx);
	spin_unlock(&pc->free_lock);
	return s;
}

/* Is the data or the record of @slot on the pmem disk's badblocks list? */
static bool pmc_slot_on_badblocks(struct pmemcache *pc, u32 slot)
{
	return pmc_pmem_range_bad(pc, pmc_meta_data_offset(&pc->meta, slot),
				  pc->block_size) ||
	       pmc_pmem_range_bad(pc, PMC_RECORDS_OFFSET +
				  (u64)slot * PMC_RECORD_SIZE, PMC_RECORD_SIZE);
}

/*
 * A free slot that is not on the badblocks list: a write there would be
 * acknowledged, then fail every read and never be written back.  Slots
 * that are, are taken out of use until the cache is loaded again.
 */
static u32 pmc_pop_usable(struct pmemcache *pc)
{
	u32 s;

	while ((s = pmc_pop_free(pc)) != PMC_NO_SLOT &&
	       pmc_slot_on_badblocks(pc, s)) {
		pmc_index_set_bad(&pc->idx, s);
		atomic64_inc(&pc->bad_slots);
		DMWARN_LIMIT("%s: cache block %u is on the pmem badblocks list: not used",
			     pc->pmem_dev->name, s);
	}
	return s;
}

static bool pmc_have_free(struct pmemcache *pc)
{
	return READ_ONCE(pc->idx.n_free) != 0;
}

/*
 * pmc_take_slot() found its CPU's cache empty: one slot, and up to
 * PMC_FREE_BATCH - 1 more into the cache, from the shared list.
 */
u32 pmc_refill_slot(struct pmemcache *pc)
{
	u32 batch[PMC_FREE_BATCH], n = 0, i, s;
	struct pmc_free_cache *c;

	spin_lock(&pc->free_lock);
	while (n < PMC_FREE_BATCH &&
	       (s = pmc_index_pop_free(&pc->idx)) != PMC_NO_SLOT)
		batch[n++] = s;
	spin_unlock(&pc->free_lock);
	if (n <= 1)
		return n ? batch[0] : PMC_NO_SLOT;
	c = get_cpu_ptr(pc->free_cache);
	spin_lock(&c->lock);
	for (i = 1; i < n && c->n < PMC_FREE_BATCH; i++)
		c->slot[c->n++] = batch[i];
	spin_unlock(&c->lock);
	put_cpu_ptr(pc->free_cache);
	/* Another task on this CPU filled it meanwhile: the rest go back. */
	if (i < n)
		pmc_free_slots(pc, batch + i, n - i);
	return batch[0];
}

/*
 * Every CPU's cached free slots back to the shared list, for a write that
 * found that list empty (or checks each slot against a badblocks list).
 * Returns how many.
 */
static unsigned int pmc_drain_free_caches(struct pmemcache *pc)
{
	u32 batch[PMC_FREE_BATCH];
	unsigned int cpu, n, moved = 0;

	for_each_possible_cpu(cpu) {
		struct pmc_free_cache *c = per_cpu_ptr(pc->free_cache, cpu);

		if (!READ_ONCE(c->n))
			continue;
		spin_lock(&c->lock);
		n = c->n;
		memcpy(batch, c->slot, n * sizeof(*batch));
		c->n = 0;
		spin_unlock(&c->lock);
		pmc_free_slots(pc, batch, n);
		moved += n;
	}
	return moved;
}

/* The free slots: the shared list's and the CPUs' caches'. */
u64 pmc_free_count(struct pmemcache *pc)
{
	u64 n = READ_ONCE(pc->idx.n_free);
	unsigned int cpu;

	for_each_possible_cpu(cpu)
		n += READ_ONCE(per_cpu_ptr(pc->free_cache, cpu)->n);
	return n;
}

/*
 * Evict up to @want clean blocks, in clock order over the clean bitmap of
 * the index (pmc_io_evict_clean()).  Each record is made durably FREE
 * before its stripe lock is dropped (E2, pmc_io_evict()).
 */
unsigned int pmc_evict_clean(struct pmemcache *pc, unsigned int want)
{
	return pmc_io_evict_clean(pc, &pc->meta, &pc->idx, &pc->evict_hand,
				  want);
}

/*
 * A free slot, or PMC_NO_SLOT once @wait_ms passed without one (0: do not
 * wait).  While it waits it kicks writeback, and it tries eviction
 * again as soon as a slot is freed or a writeback completion may have
 * made blocks clean.  Never a slot on the pmem badblocks list.
 */
u32 pmc_alloc_slot(struct pmemcache *pc, unsigned int wait_ms)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(wait_ms);
	bool waited = false;
	int done;
	u32 s;

	for (;;) {
		s = pmc_pop_usable(pc);
		if (s != PMC_NO_SLOT)
			break;
		if (pmc_drain_free_caches(pc))
			continue;
		done = atomic_read(&pc->wb_done);
		if (pmc_evict_clean(pc, 32))
			continue;
		if (!waited)
			atomic64_inc(&pc->st.full_waits);
		waited = true;
		WRITE_ONCE(pc->starved, true);
		pmc_writeback_kick(pc);
		if (time_after_eq(jiffies, deadline))
			break;
		wait_event_timeout(pc->free_wait, pmc_have_free(pc) ||
				   atomic_read(&pc->wb_done) != done,
				   max_t(long, deadline - jiffies, 1));
	}
	if (waited && wait_ms && time_after_eq(jiffies, deadline)) {
		atomic64_inc(&pc->st.full_timeouts);
		pmc_health_set(pc, PMC_H_FULL, 0);
	}
	return s;
}

/* ---- bio <-> pmem copies -------------------------------------------- */

struct pmc_fill {
	const struct pmc_meta *m;
	struct bio *bio;
	u32 first;		/* first sector of the bio inside the block */
};

/*
 * pmc_fill_fn: copy the bio's data into the new block, bypassing caches;
 * with data_crc a sector at a time, each through a copy and its crc.
 */
static int pmc_fill_from_bio(void *ctx, u8 *block, u32 *sector_crc)
{
	struct pmc_fill *f = ctx;
	u8 *dst = block + (f->first << SECTOR_SHIFT);
	u32 i = f->first, n;
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, f->bio, iter) {
		u8 *src = bvec_kmap_local(&bv);

		if (!sector_crc)
			pmc_meta_store(f->m, dst, src, bv.bv_len, PMC_P_DATA);
		for (n = 0; sector_crc && n < bv.bv_len; n += SECTOR_SIZE, i++)
			pmc_meta_store_sector(f->m, dst + n, src + n,
					      &sector_crc[i]);
		kunmap_local(src);
		dst += bv.bv_len;
	}
	return 0;
}

/*
 * Copy the sectors of @mask (bits relative to the block) from the pmem
 * block at @block into @bio, which starts at sector @first of the block.
 * Machine-check safe: a poisoned line gives -EIO, never an oops.
 */
static int pmc_copy_to_bio(struct bio *bio, const u8 *block, u32 first,
			   u32 mask)
{
	u32 pos = first << SECTOR_SHIFT, n = bio_sectors(bio);
	u32 all = (n >= 32 ? ~0U : (1U << n) - 1) << first;
	struct bvec_iter iter;
	struct bio_vec bv;
	int ret = 0;

	/* A read hit: every sector cached, one copy per segment. */
	if ((mask & all) == all) {
		bio_for_each_segment(bv, bio, iter) {
			u8 *dst = bvec_kmap_local(&bv);

			if (pmc_copy_from_pmem(dst, block + pos, bv.bv_len))
				ret = -EIO;
			kunmap_local(dst);
			pos += bv.bv_len;
		}
		return ret;
	}
	bio_for_each_segment(bv, bio, iter) {
		u8 *dst = bvec_kmap_local(&bv);
		u32 done = 0;

		while (done < bv.bv_len) {
			bool cached = mask & (1U << (pos >> SECTOR_SHIFT));
			u32 end = round_up(pos + 1, SECTOR_SIZE);
			u32 chunk;

			/* One copy for a run of cached sectors, not one each. */
			while (end - pos < bv.bv_len - done &&
			       !(mask & (1U << (end >> SECTOR_SHIFT))) == !cached)
				end += SECTOR_SIZE;
			chunk = min_t(u32, bv.bv_len - done, end - pos);
			if (cached &&
			    pmc_copy_from_pmem(dst + done, block + pos, chunk))
				ret = -EIO;
			done += chunk;
			pos += chunk;
		}
		kunmap_local(dst);
	}
	return ret;
}

struct pmc_slot_copy {
	struct bio *bio;
	u64 off;		/* of the slot's data in a half */
	u32 first, mask;
};

static int pmc_slot_copy(void *ctx, const u8 *half)
{
	struct pmc_slot_copy *c = ctx;

	return pmc_copy_to_bio(c->bio, half + c->off, c->first, c->mask);
}

/*
 * Read sectors @mask of cache slot @slot into @bio (see pmc_copy_to_bio),
 * from either half of a mirror (pmc_read_either_half()).
 */
static int pmc_read_slot(struct pmemcache *pc, struct bio *bio, u32 slot,
			 u32 first, u32 mask)
{
	struct pmc_slot_copy c = {
		.bio = bio, .first = first, .mask = mask,
		.off = pmc_meta_data_offset(&pc->meta, slot),
	};

	return pmc_read_either_half(pc, slot, c.off + (first << SECTOR_SHIFT),
				    bio->bi_iter.bi_size, true, pmc_slot_copy, &c);
}

static u32 pmc_bio_mask(struct pmemcache *pc, struct bio *bio, u32 *first)
{
	u32 spb = 1U << pc->spb_shift;
	u32 f = bio->bi_iter.bi_sector & (spb - 1);
	u32 n = bio_sectors(bio);

	*first = f;
	return (n >= 32 ? ~0U : ((1U << n) - 1)) << f;
}

/* ---- reads ------------------------------------------------------------ */

/*
 * A read of a partly cached block: the cached sectors are copied into the
 * bio at once, and the others are read from the origin into the same
 * pages, one run of sectors at a time.  The read returns for each sector
 * what was cached when it began, or what the origin holds, so nothing has
 * to keep the cached copy until the origin read is back: an eviction, a
 * discard or a write through the cache may drop it meanwhile.
 */
static void pmc_read_next_run(struct pmemcache *pc, struct bio *bio);

static void pmc_read_run_work(struct work_struct *work)
{
	struct pmc_bio_data *d = container_of(work, struct pmc_bio_data, work);

	pmc_read_next_run(d->pc, dm_bio_from_per_bio_data(d, sizeof(*d)));
}

static void pmc_read_run_endio(struct bio *clone)
{
	struct bio *bio = clone->bi_private;
	struct pmc_bio_data *d = pmc_bio_data(bio);

	if (clone->bi_status)
		bio->bi_status = clone->bi_status;
	/* Put here, not in a work: the next run's allocation may wait for it. */
	bio_put(clone);
	if (!d->missing || bio->bi_status) {
		bio_endio(bio);
		return;
	}
	INIT_WORK(&d->work, pmc_read_run_work);
	queue_work(d->pc->wq, &d->work);
}

/* Read the lowest run of sectors still missing from the origin. */
static void pmc_read_next_run(struct pmemcache *pc, struct bio *bio)
{
	struct pmc_bio_data *d = pmc_bio_data(bio);
	u32 a = __ffs(d->missing), b = a;
	struct bio *clone;

	while (b < 32 && (d->missing & BIT(b)))
		b++;
	d->missing &= ~GENMASK(b - 1, a);
	clone = bio_alloc_clone(pc->origin->bdev, bio, GFP_NOIO,
				&pc->read_bioset);
	bio_trim(clone, a - d->first, b - a);
	clone->bi_private = bio;
	clone->bi_end_io = pmc_read_run_endio;
	submit_bio_noacct(clone);
}

/* pmc_copy_fn of a read: the cached sectors into the bio. */
struct pmc_read_ctx {
	struct pmemcache *pc;
	struct bio *bio;
	u32 first;
};

static int pmc_read_copy(void *ctx, u32 slot, u32 have)
{
	struct pmc_read_ctx *rc = ctx;

	return pmc_read_slot(rc->pc, rc->bio, slot, rc->first, have);
}

static int pmc_map_read(struct pmemcache *pc, struct bio *bio)
{
	u64 oblock = pmc_sector_to_block(pc, bio->bi_iter.bi_sector);
	struct pmc_read_ctx rc = { .pc = pc, .bio = bio };
	u32 need = pmc_bio_mask(pc, bio, &rc.first);
	struct pmc_bio_data *d;
	u32 have;
	int r;

	/* The cached sectors, copied under the stripe lock */
	have = pmc_io_read(pc, &pc->idx, oblock, need, pmc_read_copy, &rc, &r);
	if (!have) {
		atomic64_inc(&pc->st.read_misses);
		bio_set_dev(bio, pc->origin->bdev);
		return DM_MAPIO_REMAPPED;
	}
	if (r) {
		pmc_count_media_error(pc);
		bio->bi_status = BLK_STS_IOERR;
	}
	atomic64_inc(have == need ? &pc->st.read_hits : &pc->st.read_partial);
	if (have == need || r) {
		bio_endio(bio);
		return DM_MAPIO_SUBMITTED;
	}
	d = pmc_bio_data(bio);
	d->pc = pc;
	d->first = rc.first;
	d->missing = need & ~have;
	pmc_read_next_run(pc, bio);
	return DM_MAPIO_SUBMITTED;
}

/* ---- writes ----------------------------------------------------------- */

/*
 * A write through the cache (pmc_write.c: T0-T3, format.md "Write
 * through the cache"): a write to a cached block when no slot is free, or
 * in cleaner mode.  No lock is held across T1.  From before T1 to after
 * T2 the block is busy (on pc->through_busy): another write of it waits
 * in its map call.  Reads need nothing: one racing T1 may return the old
 * or the new data, and a partial read no longer needs the copy once it
 * began.
 */
struct pmc_through {
	struct pmc_thru thru;	/* what pmc_write.c knows of it */
	struct list_head busy;	/* on pc->through_busy */
	struct work_struct work;
	struct pmemcache *pc;
	struct bio *bio;
	struct page *page;	/* the block as T1 writes it */
};

/*
 * Is a write through the cache of @oblock between T1 and T2?  The caller
 * saw one in flight in its stripe (pmc_env_through_busy()).
 */
bool pmc_through_listed(struct pmemcache *pc, u64 oblock)
{
	struct pmc_through *t;
	bool busy = false;

	spin_lock(&pc->through_lock);
	list_for_each_entry(t, &pc->through_busy, busy) {
		if (t->thru.oblock == oblock) {
			busy = true;
			break;
		}
	}
	spin_unlock(&pc->through_lock);
	return busy;
}

/* Elements of pc->through_pool: a struct pmc_through and its page. */
static void *pmc_through_alloc(gfp_t gfp, void *data)
{
	struct pmc_through *t = kmalloc(sizeof(*t), gfp);

	if (!t)
		return NULL;
	t->page = alloc_page(gfp);
	if (!t->page) {
		kfree(t);
		return NULL;
	}
	return t;
}

static void pmc_through_free(void *element, void *data)
{
	struct pmc_through *t = element;

	__free_page(t->page);
	kfree(t);
}

/* T1, then T2 for a dirty copy (pmc_write_through_done()), then T3. */
static void pmc_through_work(struct work_struct *work)
{
	struct pmc_through *t = container_of(work, struct pmc_through, work);
	struct pmemcache *pc = t->pc;
	struct bio *bio = t->bio;
	int r;

	r = pmc_write_through_done(pc, &pc->meta, &pc->idx, &t->thru);
	mempool_free(t, pc->through_pool);
	if (r)
		bio->bi_status = errno_to_blk_status(r);
	bio_endio(bio);
}

/* ---- pmc_env_*(): what the shared I/O policy (pmc_io.h) asks of us -- */

bool pmc_env_stripe_trylock(struct pmemcache *pc, u64 oblock)
{
	return down_write_trylock(&pmc_stripe_of(pc, oblock)->lock);
}

void pmc_env_around_inc(struct pmemcache *pc, u64 oblock)
{
	atomic_inc(&pmc_stripe_of(pc, oblock)->around);
}

void pmc_env_around_dec(struct pmemcache *pc, u64 oblock)
{
	pmc_around_put(pc, pmc_stripe_of(pc, oblock));
}

bool pmc_env_shutting_down(struct pmemcache *pc)
{
	return READ_ONCE(pc->shutting_down);
}

/*
 * At least as many blocks as are clean: all but the free, the quarantined
 * and the dirty ones.  It may lag a writeback completion that is marking
 * blocks clean, never the other way round for long: the completion bumps
 * wb_done afterwards, and waiting writers look again then.
 */
bool pmc_env_may_have_clean(struct pmemcache *pc)
{
	return pmc_free_count(pc) + atomic64_read(&pc->bad_slots) +
	       atomic64_read(&pc->n_dirty) < pc->meta.n_blocks;
}

void pmc_env_evict_lock(struct pmemcache *pc)
{
	mutex_lock(&pc->evict_lock);
}

void pmc_env_evict_unlock(struct pmemcache *pc)
{
	mutex_unlock(&pc->evict_lock);
}

void pmc_env_resched(struct pmemcache *pc)
{
	cond_resched();
}

/* ---- pmc_env_*(): what the shared write policy (pmc_write.h) asks ---- */

/* In the caller's map call (never in a work item): T1 ends it. */
void pmc_env_through_wait(struct pmemcache *pc, u64 oblock)
{
	wait_event(pc->through_wait, !pmc_env_through_busy(pc, oblock));
}

/*
 * pmc_env_alloc_slot() when pmc_take_slot() found none: a pmem device
 * has a badblocks list (each slot is checked), or no slot is free (evict,
 * and if @wait, wait as pmc_alloc_slot() does).
 */
u32 pmc_alloc_slot_slow(struct pmemcache *pc, bool wait)
{
	u32 slot;

	if (wait)
		return pmc_alloc_slot(pc, pc->full_wait_ms);
	slot = pmc_pop_usable(pc);
	if (slot == PMC_NO_SLOT && pmc_drain_free_caches(pc))
		slot = pmc_pop_usable(pc);
	if (slot == PMC_NO_SLOT && pmc_evict_clean(pc, 32))
		slot = pmc_pop_usable(pc);
	return slot;
}

void pmc_env_retire_slot(struct pmemcache *pc, u32 slot)
{
	pmc_index_set_bad(&pc->idx, slot);
	atomic64_inc(&pc->bad_slots);
}

void pmc_env_media_error(struct pmemcache *pc)
{
	pmc_count_media_error(pc);
}

unsigned long pmc_env_cleaner_until(struct pmemcache *pc)
{
	return jiffies + msecs_to_jiffies(PMC_CLEANER_WAIT_MS);
}

int pmc_env_wb_token(struct pmemcache *pc)
{
	return atomic_read(&pc->wb_done);
}

/* Each writeback completion bumps wb_done and wakes wb_wait. */
bool pmc_env_wait_writeback(struct pmemcache *pc, int token,
			    unsigned long until)
{
	if (time_after_eq(jiffies, until))
		return false;
	wait_event_timeout(pc->wb_wait,
			   atomic_read(&pc->wb_done) != token ||
			   READ_ONCE(pc->suspended),
			   max_t(long, until - jiffies, 1));
	return true;
}

void pmc_env_wait_room(struct pmemcache *pc, int token)
{
	wait_event_timeout(pc->free_wait, atomic_read(&pc->wb_done) != token,
			   HZ);
}

struct pmc_kept_copy {
	u8 *buf;
	u64 off;		/* of the slot's data in a half */
	u32 keep, sectors;
};

/* Sectors @keep of the cached block into @buf. */
static int pmc_copy_kept(void *ctx, const u8 *half)
{
	struct pmc_kept_copy *c = ctx;
	const u8 *src = half + c->off;
	u32 i;

	for (i = 0; i < c->sectors; i++)
		if ((c->keep & BIT(i)) &&
		    pmc_copy_from_pmem(c->buf + (i << SECTOR_SHIFT),
				       src + (i << SECTOR_SHIFT), SECTOR_SIZE))
			return -EIO;
	return 0;
}

/* May wait for a write through to complete: before any lock. */
struct pmc_thru *pmc_env_through_alloc(struct pmemcache *pc,
				       struct pmc_write *w)
{
	struct pmc_through *t = mempool_alloc(pc->through_pool, GFP_NOIO);
	struct pmc_fill *f = w->ctx;

	t->pc = pc;
	t->bio = f->bio;
	return &t->thru;
}

void pmc_env_through_free(struct pmemcache *pc, struct pmc_thru *thru)
{
	mempool_free(container_of(thru, struct pmc_through, thru),
		     pc->through_pool);
}

/*
 * T0: sectors @keep of the cached copy (after a media error, from a
 * mirror's other half), then the bio's, into the page.
 */
int pmc_env_through_fill(struct pmemcache *pc, struct pmc_thru *thru,
			 struct pmc_write *w)
{
	struct pmc_through *t = container_of(thru, struct pmc_through, thru);
	struct pmc_kept_copy c = {
		.buf = page_address(t->page), .keep = thru->keep,
		.sectors = 1U << pc->spb_shift,
		.off = pmc_meta_data_offset(&pc->meta, thru->slot),
	};
	u32 first = t->bio->bi_iter.bi_sector & ((1U << pc->spb_shift) - 1);
	u32 off = first << SECTOR_SHIFT;
	struct bvec_iter iter;
	struct bio_vec bv;

	if (thru->keep &&
	    pmc_read_either_half(pc, thru->slot, c.off, pc->block_size, true,
				 pmc_copy_kept, &c))
		return -EIO;
	bio_for_each_segment(bv, t->bio, iter) {
		memcpy_from_bvec(c.buf + off, &bv);
		off += bv.bv_len;
	}
	return 0;
}

void pmc_env_through_mark(struct pmemcache *pc, struct pmc_thru *thru,
			  bool busy)
{
	struct pmc_through *t = container_of(thru, struct pmc_through, thru);
	struct pmc_stripe *st = pmc_stripe_of(pc, thru->oblock);

	if (busy) {
		atomic_inc(&st->through);
		spin_lock(&pc->through_lock);
		list_add(&t->busy, &pc->through_busy);
		spin_unlock(&pc->through_lock);
		return;
	}
	spin_lock(&pc->through_lock);
	list_del(&t->busy);
	spin_unlock(&pc->through_lock);
	atomic_dec(&st->through);
	wake_up_all(&pc->through_wait);
}

void pmc_env_through_start(struct pmemcache *pc, struct pmc_thru *thru)
{
	struct pmc_through *t = container_of(thru, struct pmc_through, thru);

	INIT_WORK(&t->work, pmc_through_work);
	queue_work(pc->wq, &t->work);
}

/* T1: sectors @thru->mask of the page to the origin, each run with FUA. */
int pmc_env_through_write(struct pmemcache *pc, struct pmc_thru *thru)
{
	struct pmc_through *t = container_of(thru, struct pmc_through, thru);
	u32 spb = 1U << pc->spb_shift, mask = thru->mask, a, b;
	struct bio_vec bv;
	struct bio bio;
	int r = 0;

	for (a = 0; a < spb && !r; a = b) {
		for (b = a + 1; b < spb && !(mask & BIT(b)) == !(mask & BIT(a)); b++)
			;
		if (!(mask & BIT(a)))
			continue;
		bio_init(&bio, pc->origin->bdev, &bv, 1,
			 REQ_OP_WRITE | REQ_SYNC | REQ_FUA);
		bio.bi_iter.bi_sector = (thru->oblock << pc->spb_shift) + a;
		__bio_add_page(&bio, t->page, (b - a) << SECTOR_SHIFT,
			       a << SECTOR_SHIFT);
		r = submit_bio_wait(&bio);
		bio_uninit(&bio);
	}
	if (r)
		pmc_health_set(pc, PMC_H_ORIGIN, r);
	else
		pmc_health_clear(pc, PMC_H_ORIGIN);
	return r;
}

/*
 * seq_bypass: is @bio part of a sequential run of writes that is now at
 * least seq_bypass KiB long?  Like bcache's sequential_cutoff, for one
 * stream: interleaved streams reset each other and simply stay cached.
 * Racy updates only make the guess worse, never the data wrong.
 */
static bool pmc_sequential(struct pmemcache *pc, struct bio *bio)
{
	unsigned int kb = READ_ONCE(pc->seq_bypass_kb);
	u64 run = bio_sectors(bio);

	if (!kb)
		return false;
	if (READ_ONCE(pc->seq_next) == bio->bi_iter.bi_sector)
		run += READ_ONCE(pc->seq_run);
	WRITE_ONCE(pc->seq_run, run);
	WRITE_ONCE(pc->seq_next, bio_end_sector(bio));
	return run >= (u64)kb << 1;
}

/*
 * pmc_write() decides; here the bio is completed, sent on or left to the
 * write through the cache.  Around the cache: pmc_end_io() drops its
 * st->around; FUA, so that a later REQ_PREFLUSH completes at pmem speed
 * and never flushes the origin.
 */
static int pmc_map_write(struct pmemcache *pc, struct bio *bio)
{
	struct pmc_fill fill = { .m = &pc->meta, .bio = bio };
	struct pmc_write w = {
		.oblock = pmc_sector_to_block(pc, bio->bi_iter.bi_sector),
		.mask = pmc_bio_mask(pc, bio, &fill.first),
		.cleaner = READ_ONCE(pc->cleaner),
		.fill = pmc_fill_from_bio,
		.ctx = &fill,
	};

	/* cleaner: no new blocks; seq_bypass: not for long sequential runs. */
	w.around_first = w.cleaner || pmc_sequential(pc, bio);
	switch (pmc_write(pc, &pc->meta, &pc->idx, &w)) {
	case PMC_W_CACHED:
		atomic64_inc(w.hit ? &pc->st.write_hits : &pc->st.write_new);
		pmc_writeback_note_dirty(pc);
		bio_endio(bio);
		break;
	case PMC_W_AROUND:
		*pmc_bio_around(bio) = pmc_stripe_of(pc, w.oblock);
		atomic64_inc(&pc->st.write_around);
		if (w.full)
			atomic64_inc(&pc->st.full_around);
		bio->bi_opf |= REQ_FUA;
		bio_set_dev(bio, pc->origin->bdev);
		return DM_MAPIO_REMAPPED;
	case PMC_W_THROUGH:
		atomic64_inc(w.full ? &pc->st.full_through :
			     &pc->st.write_around);
		break;
	case PMC_W_FAILED:
		bio->bi_status = errno_to_blk_status(w.err);
		bio_endio(bio);
		break;
	}
	return DM_MAPIO_SUBMITTED;
}

/* ---- discards --------------------------------------------------------- */

static void pmc_discard_release(struct pmemcache *pc, struct pmc_bio_data *d)
{
	unsigned int i;

	for_each_set_bit(i, d->discard_stripes, PMC_NR_STRIPES)
		pmc_around_put(pc, &pc->stripes[i]);
	d->discard_held = false;
}

/*
 * A discard passed down to the origin keeps writeback off every stripe
 * of the blocks it touches until it completed (st->around), from before
 * their copies are dropped: a block written again meanwhile, written
 * back and marked CLEAN, would otherwise be undone by the discard landing
 * after it.  A range of many blocks touches every stripe.  False if the
 * system goes down (nothing new may reach the origin).
 */
static bool pmc_discard_hold(struct pmemcache *pc, struct pmc_bio_data *d,
			     u64 first, u64 last)
{
	unsigned int i;
	u64 ob;

	bitmap_zero(d->discard_stripes, PMC_NR_STRIPES);
	if (last - first >= 4 * PMC_NR_STRIPES)
		bitmap_fill(d->discard_stripes, PMC_NR_STRIPES);
	else
		for (ob = first; ob <= last; ob++)
			__set_bit(pmc_stripe_of(pc, ob) - pc->stripes,
				  d->discard_stripes);
	for_each_set_bit(i, d->discard_stripes, PMC_NR_STRIPES)
		atomic_inc(&pc->stripes[i].around);
	/* Pairs with pmc_writeback_shutdown(), as pmc_origin_write_get(). */
	smp_mb__after_atomic();
	d->discard_held = true;
	if (likely(!READ_ONCE(pc->shutting_down)))
		return true;
	pmc_discard_release(pc, d);
	return false;
}

/*
 * Drop the cached copies of the blocks that the discard covers entirely
 * (a discard leaves the contents undefined, so a partly covered block
 * keeps its data), then pass the discard down.
 */
static int pmc_map_discard(struct pmemcache *pc, struct bio *bio)
{
	u32 spb = 1U << pc->spb_shift;
	sector_t start = bio->bi_iter.bi_sector;
	sector_t end = bio_end_sector(bio);
	u64 first = pmc_sector_to_block(pc, start + spb - 1);
	u64 last = pmc_sector_to_block(pc, end);
	struct pmc_bio_data *d = pmc_bio_data(bio);
	bool down = bdev_max_discard_sectors(pc->origin->bdev) &&
		    pmc_discard_hold(pc, d, pmc_sector_to_block(pc, start),
				     pmc_sector_to_block(pc, end - 1));

	atomic64_inc(&pc->st.discards);
	pmc_io_discard(pc, &pc->meta, &pc->idx, first, last);
	if (down) {
		bio_set_dev(bio, pc->origin->bdev);
		return DM_MAPIO_REMAPPED;
	}
	bio_endio(bio);
	return DM_MAPIO_SUBMITTED;
}

int pmc_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error)
{
	struct pmemcache *pc = ti->private;
	struct pmc_bio_data *d = pmc_bio_data(bio);

	if (d->discard_held)
		pmc_discard_release(pc, d);
	else if (d->around)
		pmc_around_put(pc, d->around);
	else
		return DM_ENDIO_DONE;
	if (*error)
		pmc_health_set(pc, PMC_H_ORIGIN, blk_status_to_errno(*error));
	else
		pmc_health_clear(pc, PMC_H_ORIGIN);
	return DM_ENDIO_DONE;
}

int pmc_map(struct dm_target *ti, struct bio *bio)
{
	struct pmemcache *pc = ti->private;
	int id, r;

	bio->bi_iter.bi_sector = dm_target_offset(ti, bio->bi_iter.bi_sector);
	*pmc_bio_around(bio) = NULL;
	pmc_bio_data(bio)->discard_held = false;
	pmc_note_foreground(pc);

	if (bio->bi_opf & REQ_PREFLUSH) {
		/*
		 * Everything acknowledged is already durable in pmem; the
		 * fence orders this flush after it.  Writeback flushes the
		 * origin before it marks a block clean and write around uses
		 * FUA, so the origin needs no flush either.
		 */
		pmem_wmb();
		atomic64_inc(&pc->st.flushes);
		if (!bio_sectors(bio)) {
			bio_endio(bio);
			return DM_MAPIO_SUBMITTED;
		}
	}

	id = pmc_pmem_enter(pc);
	if (id < 0)
		return DM_MAPIO_KILL;
	switch (bio_op(bio)) {
	case REQ_OP_READ:
		r = pmc_map_read(pc, bio);
		break;
	case REQ_OP_WRITE:
		r = pmc_map_write(pc, bio);
		break;
	case REQ_OP_DISCARD:
		r = pmc_map_discard(pc, bio);
		break;
	default:
		r = DM_MAPIO_KILL;
	}
	pmc_pmem_exit(id);
	return r;
}

int pmc_io_init(struct pmemcache *pc)
{
	unsigned int cpu;
	int r;

	pc->free_cache = alloc_percpu(struct pmc_free_cache);
	if (!pc->free_cache)
		return -ENOMEM;
	for_each_possible_cpu(cpu)
		spin_lock_init(&per_cpu_ptr(pc->free_cache, cpu)->lock);

	spin_lock_init(&pc->through_lock);
	INIT_LIST_HEAD(&pc->through_busy);
	init_waitqueue_head(&pc->through_wait);
	/*
	 * A bio split over several partly cached blocks allocates a clone
	 * for each while the earlier ones wait on current->bio_list: the
	 * rescuer sends those on if the pool runs dry.
	 */
	r = bioset_init(&pc->read_bioset, BIO_POOL_SIZE, 0, BIOSET_NEED_RESCUER);
	if (r)
		return r;
	pc->through_pool = mempool_create(PMC_THROUGH_POOL, pmc_through_alloc,
					  pmc_through_free, NULL);
	return pc->through_pool ? 0 : -ENOMEM;
}

void pmc_io_exit(struct pmemcache *pc)
{
	mempool_destroy(pc->through_pool);
	pc->through_pool = NULL;
	free_percpu(pc->free_cache);
	pc->free_cache = NULL;
	bioset_exit(&pc->read_bioset);
}
