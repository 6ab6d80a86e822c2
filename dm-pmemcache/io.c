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
 * At least as many blocks as are clean: all but the free, the quarantined
 * and the dirty ones.  It may lag a writeback completion that is marking
 * blocks clean, never the other way round for long: the completion bumps
 * wb_done afterwards, and waiting writers look again then.
 */
static bool pmc_may_have_clean(struct pmemcache *pc)
{
	return READ_ONCE(pc->idx.n_free) + atomic64_read(&pc->bad_slots) +
	       atomic64_read(&pc->n_dirty) < pc->meta.n_blocks;
}

struct pmc_evict {
	struct pmemcache *pc;
	u32 victims[64];
	unsigned int got;
};

/* pmc_take_fn: evict clean slot @s (slot word @v) if nobody holds it. */
static bool pmc_evict_one(void *ctx, u32 s, u64 v)
{
	struct pmc_evict *e = ctx;
	struct pmemcache *pc = e->pc;

	if (!pmc_io_evict(pc, &pc->meta, &pc->idx, s, v))
		return false;
	e->victims[e->got++] = s;
	return true;
}

/*
 * Evict up to @want clean blocks, in clock order over the clean bitmap of
 * the index with a second chance for referenced blocks (pmc_index_clock):
 * O(log n) per block looked at, never a scan of the whole index.  Each
 * record is made durably FREE before its stripe lock is dropped (E2,
 * pmc_io_evict()).
 */
unsigned int pmc_evict_clean(struct pmemcache *pc, unsigned int want)
{
	struct pmc_evict e = { .pc = pc };

	if (want > ARRAY_SIZE(e.victims))
		want = ARRAY_SIZE(e.victims);
	/* A cache full of dirty blocks: not even a look at the bitmap. */
	if (!pmc_may_have_clean(pc))
		return 0;
	mutex_lock(&pc->evict_lock);
	pmc_index_clock(&pc->idx, &pc->evict_hand, want, pmc_evict_one, &e);
	pmc_free_slots(pc, e.victims, e.got);
	mutex_unlock(&pc->evict_lock);
	return e.got;
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

/* pmc_fill_fn: copy the bio's data into the new block, bypassing caches. */
static int pmc_fill_from_bio(void *ctx, u8 *block)
{
	struct pmc_fill *f = ctx;
	u8 *dst = block + (f->first << SECTOR_SHIFT);
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, f->bio, iter) {
		void *src = bvec_kmap_local(&bv);

		pmc_meta_store(f->m, dst, src, bv.bv_len, PMC_P_DATA);
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
	struct bvec_iter iter;
	struct bio_vec bv;
	u32 pos = first << SECTOR_SHIFT;
	int ret = 0;

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

/*
 * Read sectors @mask of cache slot @slot into @bio (see pmc_copy_to_bio).
 * A range in the pmem disk's badblocks list is not read at all; on a
 * media error a mirror reads the other half, else -EIO.
 */
static int pmc_read_slot(struct pmemcache *pc, struct bio *bio, u32 slot,
			 u32 first, u32 mask)
{
	u64 off = pmc_meta_data_offset(&pc->meta, slot);
	u64 at = off + (first << SECTOR_SHIFT);
	const u8 *other;

	if (!pmc_pmem_range_bad(pc, at, bio->bi_iter.bi_size) &&
	    !pmc_copy_to_bio(bio, pmc_meta_data(&pc->meta, slot), first, mask))
		return 0;
	other = pmc_mirror_other_copy(pc, at, bio->bi_iter.bi_size);
	if (!other || pmc_copy_to_bio(bio, other + off, first, mask))
		return -EIO;
	pmc_count_mirror_read(pc, slot);
	return 0;
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

static int pmc_map_read(struct pmemcache *pc, struct bio *bio)
{
	u64 oblock = pmc_sector_to_block(pc, bio->bi_iter.bi_sector);
	struct pmc_stripe *st = pmc_stripe_of(pc, oblock);
	u32 first, need = pmc_bio_mask(pc, bio, &first);
	struct pmc_bio_data *d;
	u32 slot, have;
	int r;

	down_read(&st->lock);
	slot = pmc_index_lookup(&pc->idx, oblock);
	have = slot != PMC_NO_SLOT ? pmc_slot_mask(pc->idx.slot[slot]) & need : 0;
	if (!have) {
		up_read(&st->lock);
		atomic64_inc(&pc->st.read_misses);
		bio_set_dev(bio, pc->origin->bdev);
		return DM_MAPIO_REMAPPED;
	}
	r = pmc_read_slot(pc, bio, slot, first, have);
	pmc_index_ref(&pc->idx, slot);
	up_read(&st->lock);
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
	d->first = first;
	d->missing = need & ~have;
	pmc_read_next_run(pc, bio);
	return DM_MAPIO_SUBMITTED;
}

/* ---- writes ----------------------------------------------------------- */

/* A write through the cache (see pmc_write_through()). */
struct pmc_through {
	struct list_head busy;	/* on pc->through_busy */
	struct work_struct work;
	struct pmemcache *pc;
	struct bio *bio;
	struct pmc_stripe *st;
	struct page *page;	/* the block as T1 writes it */
	u64 oblock;
	u64 v;			/* slot word of the dirty copy that T2 drops */
	u32 slot;		/* its slot, or PMC_NO_SLOT */
	u32 mask;		/* sectors that T1 writes */
};

/* Is a write through the cache of @oblock between T1 and T2? */
static bool pmc_through_busy(struct pmemcache *pc, struct pmc_stripe *st,
			     u64 oblock)
{
	struct pmc_through *t;
	bool busy = false;

	if (!atomic_read(&st->through))
		return false;
	spin_lock(&pc->through_lock);
	list_for_each_entry(t, &pc->through_busy, busy) {
		if (t->oblock == oblock) {
			busy = true;
			break;
		}
	}
	spin_unlock(&pc->through_lock);
	return busy;
}

/* ---- pmc_env_*(): what the shared I/O policy (pmc_io.c) asks of us -- */

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

bool pmc_env_through_busy(struct pmemcache *pc, u64 oblock)
{
	return pmc_through_busy(pc, pmc_stripe_of(pc, oblock), oblock);
}

/*
 * Send a write of a block that is not in the cache straight to the origin,
 * if pmc_io_around_get() allows it; pmc_end_io() drops its st->around.
 * FUA: a later REQ_PREFLUSH completes at pmem speed and never flushes the
 * origin.
 */
static bool pmc_write_around(struct pmemcache *pc, struct bio *bio,
			     u64 oblock, struct pmc_stripe *st)
{
	bool around;

	down_read(&st->lock);
	around = pmc_io_around_get(pc, &pc->idx, oblock);
	up_read(&st->lock);
	if (!around)
		return false;
	*pmc_bio_around(bio) = st;
	atomic64_inc(&pc->st.write_around);
	bio->bi_opf |= REQ_FUA;
	bio_set_dev(bio, pc->origin->bdev);
	return true;
}

/* ---- writes through the cache to the origin ------------------------ */

/*
 * A write to a cached block when no slot is free, or in cleaner mode.
 * Waiting for writeback could take for ever (the origin may be failing,
 * or rewritten blocks keep coming), so the write replaces the cached
 * copy through the origin (format.md, "Write through the cache"): T1
 * the new sectors, merged with those only the cached copy holds, go to
 * the origin with REQ_FUA; T2 the cached copy's record is made FREE and
 * fenced (before T1 if the copy is clean); T3 the bio completes.  If T1
 * fails, the bio fails with its error and a dirty cached copy stays as
 * it was.
 *
 * No lock is held across T1.  From before T1 to after T2 the block is
 * busy (on pc->through_busy): another write of it waits in its map call,
 * since one cached meanwhile would later be written back over T1 with
 * older sectors of the copy.  Writeback leaves the stripe alone
 * (st->around).  Reads need nothing: one racing T1 may return the old or
 * the new data, and a partial read no longer needs the copy once it began.
 */
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

/*
 * Take @st's lock for writing once no write through the cache of @oblock
 * is in flight.  Waits in the caller's map call (never in a work item):
 * the one in flight ends when its origin write does.
 */
static void pmc_lock_block(struct pmemcache *pc, struct pmc_stripe *st,
			   u64 oblock)
{
	down_write(&st->lock);
	while (pmc_through_busy(pc, st, oblock)) {
		up_write(&st->lock);
		wait_event(pc->through_wait, !pmc_through_busy(pc, st, oblock));
		down_write(&st->lock);
	}
}

/* Sectors @keep of the pmem block at @src into @buf. */
static int pmc_copy_kept(struct pmemcache *pc, u8 *buf, const u8 *src,
			 u32 keep)
{
	u32 i;

	for (i = 0; i < (1U << pc->spb_shift); i++)
		if ((keep & BIT(i)) &&
		    pmc_copy_from_pmem(buf + (i << SECTOR_SHIFT),
				       src + (i << SECTOR_SHIFT), SECTOR_SIZE))
			return -EIO;
	return 0;
}

/* The block as it is to be: sectors @keep of @slot, then the bio's. */
static int pmc_through_fill(struct pmemcache *pc, u8 *buf, struct bio *bio,
			    u32 first, u32 slot, u32 keep)
{
	u64 boff = pmc_meta_data_offset(&pc->meta, slot);
	u32 off = first << SECTOR_SHIFT;
	struct bvec_iter iter;
	struct bio_vec bv;
	const u8 *other;

	if (keep && (pmc_pmem_range_bad(pc, boff, pc->block_size) ||
		     pmc_copy_kept(pc, buf, pmc_meta_data(&pc->meta, slot),
				   keep))) {
		other = pmc_mirror_other_copy(pc, boff, pc->block_size);
		if (!other || pmc_copy_kept(pc, buf, other + boff, keep))
			return -EIO;
		pmc_count_mirror_read(pc, slot);
	}
	bio_for_each_segment(bv, bio, iter) {
		memcpy_from_bvec(buf + off, &bv);
		off += bv.bv_len;
	}
	return 0;
}

/* T1: sectors @mask of @page to block @oblock of the origin, with FUA. */
static int pmc_through_write(struct pmemcache *pc, struct page *page,
			     u64 oblock, u32 mask)
{
	u32 spb = 1U << pc->spb_shift, a, b;
	struct bio_vec bv;
	struct bio bio;
	int r;

	for (a = 0; a < spb; a = b) {
		for (b = a + 1; b < spb && !(mask & BIT(b)) == !(mask & BIT(a)); b++)
			;
		if (!(mask & BIT(a)))
			continue;
		bio_init(&bio, pc->origin->bdev, &bv, 1,
			 REQ_OP_WRITE | REQ_SYNC | REQ_FUA);
		bio.bi_iter.bi_sector = (oblock << pc->spb_shift) + a;
		__bio_add_page(&bio, page, (b - a) << SECTOR_SHIFT,
			       a << SECTOR_SHIFT);
		r = submit_bio_wait(&bio);
		bio_uninit(&bio);
		if (r)
			return r;
	}
	return 0;
}

/*
 * T2: the cached copy @v in @slot durably FREE.  Not once the namespace
 * is gone: then the copy stays live in pmem.
 */
static int pmc_through_drop(struct pmemcache *pc, u64 oblock, u64 v,
			    u32 *freed)
{
	int id = pmc_pmem_enter(pc);

	if (id < 0)
		return id;
	if (pmc_slot_flags(v) & PMC_SF_DIRTY)
		pmc_dirty_dec(pc, v);
	pmc_meta_drop_block(&pc->meta, &pc->idx, oblock, freed);
	pmc_meta_fence(PMC_P_FREE);
	pmc_pmem_exit(id);
	return 0;
}

/* The block is no longer busy: whoever waits for it may go. */
static void pmc_through_end(struct pmemcache *pc, struct pmc_through *t)
{
	spin_lock(&pc->through_lock);
	list_del(&t->busy);
	spin_unlock(&pc->through_lock);
	atomic_dec(&t->st->through);
	pmc_around_put(pc, t->st);
	wake_up_all(&pc->through_wait);
}

/* T1, then T2 for a dirty copy, then T3. */
static void pmc_through_work(struct work_struct *work)
{
	struct pmc_through *t = container_of(work, struct pmc_through, work);
	struct pmemcache *pc = t->pc;
	struct bio *bio = t->bio;
	u32 freed = PMC_NO_SLOT;
	int r;

	r = pmc_through_write(pc, t->page, t->oblock, t->mask);
	if (r) {
		pmc_health_set(pc, PMC_H_ORIGIN, r);
	} else {
		pmc_health_clear(pc, PMC_H_ORIGIN);
		pmc_cut_point(PMC_CUT_THROUGH_T1);
	}
	/*
	 * T2, durably FREE before the lock lets anyone see it gone.  A
	 * discard may have dropped the copy meanwhile.  The namespace gone
	 * now: the old copy stays live in pmem and wins over this write at
	 * the next load, so the write must not succeed.
	 */
	if (!r && t->slot != PMC_NO_SLOT) {
		down_write(&t->st->lock);
		if (pc->idx.slot[t->slot] == t->v)
			r = pmc_through_drop(pc, t->oblock, t->v, &freed);
		up_write(&t->st->lock);
	}
	pmc_through_end(pc, t);
	if (freed != PMC_NO_SLOT)
		pmc_free_slots(pc, &freed, 1);
	mempool_free(t, pc->through_pool);
	if (r)
		bio->bi_status = errno_to_blk_status(r);
	bio_endio(bio);
}

/*
 * Send @bio through the cache to the origin (pmc_through_work() does T1
 * and T2).  -EBUSY: a copy of the block is being written back (that
 * origin write could land after this one); -ESHUTDOWN: the system goes
 * down.  st->around keeps writeback from starting one until T2 is done.
 */
static int pmc_write_through(struct pmemcache *pc, struct bio *bio,
			     u64 oblock, struct pmc_stripe *st)
{
	u32 first, mask = pmc_bio_mask(pc, bio, &first);
	u32 keep = 0, freed = PMC_NO_SLOT;
	struct pmc_through *t;
	int r;

	/* Before any lock: it may wait for a write through to complete. */
	t = mempool_alloc(pc->through_pool, GFP_NOIO);
	pmc_lock_block(pc, st, oblock);
	if (pmc_index_inflight(&pc->idx, oblock)) {
		r = -EBUSY;
		goto unlock;
	}
	if (!pmc_origin_write_get(pc, oblock)) {
		r = -ESHUTDOWN;
		goto unlock;
	}
	t->slot = pmc_index_lookup(&pc->idx, oblock);
	t->v = t->slot != PMC_NO_SLOT ? pc->idx.slot[t->slot] : 0;
	if (t->slot != PMC_NO_SLOT)
		keep = pmc_slot_mask(t->v) & ~mask;
	r = pmc_through_fill(pc, page_address(t->page), bio, first, t->slot,
			     keep);
	if (r)
		pmc_count_media_error(pc);
	/*
	 * A clean copy goes first: the origin holds its data, and a crash
	 * after T1 must not leave it CLEAN over the newer data (it would be
	 * read until evicted, then the origin's).  A dirty one goes after
	 * T1: a crash before T2 leaves it dirty, so writeback puts it back.
	 */
	if (!r && t->slot != PMC_NO_SLOT && !(pmc_slot_flags(t->v) & PMC_SF_DIRTY)) {
		r = pmc_through_drop(pc, oblock, t->v, &freed);
		t->slot = PMC_NO_SLOT;
	}
	if (r) {
		/* Handled: the bio fails with the error. */
		pmc_around_put(pc, st);
		bio->bi_status = errno_to_blk_status(r);
		bio_endio(bio);
		r = 0;
		goto unlock;
	}
	t->pc = pc;
	t->bio = bio;
	t->st = st;
	t->oblock = oblock;
	t->mask = mask | keep;
	atomic_inc(&st->through);
	spin_lock(&pc->through_lock);
	list_add(&t->busy, &pc->through_busy);
	spin_unlock(&pc->through_lock);
	up_write(&st->lock);
	if (freed != PMC_NO_SLOT)
		pmc_free_slots(pc, &freed, 1);
	INIT_WORK(&t->work, pmc_through_work);
	queue_work(pc->wq, &t->work);
	return 0;

unlock:
	up_write(&st->lock);
	mempool_free(t, pc->through_pool);
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
 * cleaner: a write to a block whose copy is being written back waits for
 * that writeback (at most PMC_CLEANER_WAIT_MS), then goes through the
 * cache; caching it dirty again could keep a flush (detach) under a load
 * that rewrites one block from ever ending.  True if it went through.
 */
static bool pmc_write_through_cleaner(struct pmemcache *pc, struct bio *bio,
				      u64 oblock, struct pmc_stripe *st)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(PMC_CLEANER_WAIT_MS);
	int done, r;

	for (;;) {
		done = atomic_read(&pc->wb_done);
		r = pmc_write_through(pc, bio, oblock, st);
		if (r != -EBUSY)
			break;
		if (time_after_eq(jiffies, deadline))
			break;
		/* Each writeback completion bumps wb_done and wakes wb_wait. */
		wait_event_timeout(pc->wb_wait,
				   atomic_read(&pc->wb_done) != done ||
				   READ_ONCE(pc->suspended),
				   max_t(long, deadline - jiffies, 1));
	}
	if (r)
		return false;
	atomic64_inc(&pc->st.write_around);
	return true;
}

static int pmc_map_write(struct pmemcache *pc, struct bio *bio)
{
	u64 oblock = pmc_sector_to_block(pc, bio->bi_iter.bi_sector);
	struct pmc_stripe *st = pmc_stripe_of(pc, oblock);
	u32 first, mask = pmc_bio_mask(pc, bio, &first);
	struct pmc_fill fill = { .m = &pc->meta, .bio = bio, .first = first };
	u32 slot, old, freed, epoch;
	bool cleaner;
	u64 ov;
	int r;

	/* cleaner: no new blocks; seq_bypass: not for long sequential runs. */
	cleaner = READ_ONCE(pc->cleaner);
	if ((cleaner || pmc_sequential(pc, bio)) &&
	    pmc_write_around(pc, bio, oblock, st))
		return DM_MAPIO_REMAPPED;
	/*
	 * cleaner: no new dirty data either, or a flush (detach) under a
	 * load that rewrites cached blocks might never end.  A cached block
	 * is replaced through the origin, as in a full cache.
	 */
	if (cleaner && pmc_write_through_cleaner(pc, bio, oblock, st))
		return DM_MAPIO_SUBMITTED;

	/*
	 * Cache full: wait for writeback at most full_wait.  Then a block
	 * that is not cached goes around the cache, and a cached one replaces
	 * its cached copy through the origin.  Only while a copy of the block
	 * is being written back does the write wait longer: until that origin
	 * write completed or failed.
	 */
	slot = pmc_alloc_slot(pc, pc->full_wait_ms);
	while (slot == PMC_NO_SLOT) {
		int done = atomic_read(&pc->wb_done);

		if (pmc_write_around(pc, bio, oblock, st)) {
			atomic64_inc(&pc->st.full_around);
			return DM_MAPIO_REMAPPED;
		}
		r = pmc_write_through(pc, bio, oblock, st);
		if (!r) {
			atomic64_inc(&pc->st.full_through);
			return DM_MAPIO_SUBMITTED;
		}
		/* Going down: no room and no way to the origin.  Not acked. */
		if (r == -ESHUTDOWN) {
			bio_io_error(bio);
			return DM_MAPIO_SUBMITTED;
		}
		wait_event_timeout(pc->free_wait,
				   atomic_read(&pc->wb_done) != done, HZ);
		slot = pmc_pop_usable(pc);
		if (slot == PMC_NO_SLOT && pmc_evict_clean(pc, 32))
			slot = pmc_pop_usable(pc);
	}
	epoch = atomic_read(&pc->epoch) & 3;

	pmc_lock_block(pc, st, oblock);
	old = pmc_index_lookup(&pc->idx, oblock);
	ov = old != PMC_NO_SLOT ? pc->idx.slot[old] : 0;
	r = pmc_meta_write_block(&pc->meta, &pc->idx, oblock, mask, slot, epoch,
				 pmc_fill_from_bio, &fill, &freed);
	if (!r) {
		/* A rewrite: the block stays longer once it is clean. */
		if (old != PMC_NO_SLOT)
			pmc_index_ref(&pc->idx, slot);
		if (old != PMC_NO_SLOT && (pmc_slot_flags(ov) & PMC_SF_DIRTY))
			pmc_dirty_dec(pc, ov);
		atomic64_inc(&pc->epoch_dirty[epoch]);
		atomic64_inc(&pc->n_dirty);
	}
	up_write(&st->lock);

	if (r) {
		/* No stray store of ours may land in the slot's next life. */
		pmem_wmb();
		pmc_free_slots(pc, &slot, 1);
		pmc_count_media_error(pc);
		bio_io_error(bio);
		return DM_MAPIO_SUBMITTED;
	}
	if (freed != PMC_NO_SLOT)
		pmc_free_slots(pc, &freed, 1);
	atomic64_inc(old != PMC_NO_SLOT ? &pc->st.write_hits : &pc->st.write_new);
	pmc_writeback_note_dirty(pc);
	bio_endio(bio);
	return DM_MAPIO_SUBMITTED;
}

/* ---- discards --------------------------------------------------------- */

static void pmc_drop_one(struct pmemcache *pc, u64 oblock, u32 *freed,
			 unsigned int *nf)
{
	struct pmc_stripe *st = pmc_stripe_of(pc, oblock);
	u32 f;

	down_write(&st->lock);
	f = pmc_io_drop(pc, &pc->meta, &pc->idx, oblock);
	up_write(&st->lock);
	if (f != PMC_NO_SLOT)
		freed[(*nf)++] = f;
}

static void pmc_drop_flush(struct pmemcache *pc, u32 *freed, unsigned int *nf)
{
	/* Records durably FREE before the slots can be reused. */
	pmc_meta_fence(PMC_P_FREE);
	pmc_free_slots(pc, freed, *nf);
	*nf = 0;
}

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
	u32 freed[64];
	unsigned int nf = 0;
	u64 ob, s;

	atomic64_inc(&pc->st.discards);
	if (last > first && last - first > pc->meta.n_blocks) {
		/* Huge range: walk the cache instead of the range. */
		for (s = 0; s < pc->meta.n_blocks; s++) {
			u64 v = READ_ONCE(pc->idx.slot[s]);

			if (!(pmc_slot_flags(v) & PMC_SF_USED) ||
			    pmc_slot_oblock(v) < first ||
			    pmc_slot_oblock(v) >= last)
				continue;
			pmc_drop_one(pc, pmc_slot_oblock(v), freed, &nf);
			if (nf == ARRAY_SIZE(freed))
				pmc_drop_flush(pc, freed, &nf);
			if (!(s & 4095))
				cond_resched();
		}
	} else {
		for (ob = first; ob < last; ob++) {
			pmc_drop_one(pc, ob, freed, &nf);
			if (nf == ARRAY_SIZE(freed))
				pmc_drop_flush(pc, freed, &nf);
			if (!((ob - first) & 4095))
				cond_resched();
		}
	}
	pmc_drop_flush(pc, freed, &nf);

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
	int r;

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
	bioset_exit(&pc->read_bioset);
}
