// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: writeback of dirty blocks to the origin.
 *
 * A pass picks dirty blocks (clock order), sorts them by origin block and
 * merges runs of adjacent whole blocks into one bio.  The bio points
 * straight at pmem (bio_add_pfn, no struct page) when the origin queue
 * takes page-less bios, or at DRAM bounce pages filled with
 * copy_mc_to_kernel otherwise (md raid5) and after a BLK_STS_NOTSUPP.
 * Every origin write is REQ_FUA; only after it completed is the record
 * marked CLEAN.  A failed write leaves the block dirty; it is counted and
 * retried after a delay.  Dirty data is never dropped.
 */
#include <linux/blkdev.h>
#include <linux/sort.h>
#include <linux/highmem.h>

#include "pmemcache.h"

struct pmc_wb_item {
	u64 oblock;
	u32 slot;
	u32 mask;
	struct page *page;	/* bounce page, or NULL */
};

struct pmc_wb_io {
	struct list_head list;
	struct pmemcache *pc;
	atomic_t pending;	/* bios not yet completed, +1 while building */
	blk_status_t status;
	bool pfn;
	unsigned int n;
	struct pmc_wb_item items[];
};

static bool pmc_wb_use_pfn(struct pmemcache *pc)
{
	return pc->route != PMC_ROUTE_BOUNCE && pc->pfn_capable &&
	       !READ_ONCE(pc->pfn_failed);
}

static u32 pmc_full_mask(struct pmemcache *pc)
{
	return pc->meta.full_mask;
}

void pmc_writeback_kick(struct pmemcache *pc)
{
	if (!READ_ONCE(pc->suspended))
		mod_delayed_work(pc->wq, &pc->wb_work, 0);
}

void pmc_writeback_check_watermark(struct pmemcache *pc)
{
	u64 d = atomic64_read(&pc->n_dirty);

	if (!READ_ONCE(pc->wb_latched) &&
	    d * 100 >= (u64)pc->high_wm * pc->meta.n_blocks) {
		WRITE_ONCE(pc->wb_latched, true);
		pmc_writeback_kick(pc);
	}
}

static bool pmc_wb_wanted(struct pmemcache *pc, bool *age_only)
{
	u64 d = atomic64_read(&pc->n_dirty);

	*age_only = false;
	if (!d)
		return false;
	if (READ_ONCE(pc->wb_latched) &&
	    d * 100 <= (u64)pc->low_wm * pc->meta.n_blocks)
		WRITE_ONCE(pc->wb_latched, false);
	if (READ_ONCE(pc->flush_all) || READ_ONCE(pc->cleaner) ||
	    READ_ONCE(pc->starved) || READ_ONCE(pc->wb_latched))
		return true;
	if (READ_ONCE(pc->age_pending)) {
		*age_only = true;
		return true;
	}
	return false;
}

static int pmc_wb_cmp(const void *a, const void *b)
{
	const struct pmc_wb_item *x = a, *y = b;

	if (x->oblock != y->oblock)
		return x->oblock < y->oblock ? -1 : 1;
	return 0;
}

static void pmc_wb_io_put(struct pmc_wb_io *io)
{
	struct pmemcache *pc = io->pc;
	unsigned long flags;

	if (!atomic_dec_and_test(&io->pending))
		return;
	spin_lock_irqsave(&pc->endio_lock, flags);
	list_add_tail(&io->list, &pc->endio_list);
	spin_unlock_irqrestore(&pc->endio_lock, flags);
	queue_work(pc->wq, &pc->endio_work);
}

static void pmc_wb_endio(struct bio *bio)
{
	struct pmc_wb_io *io = bio->bi_private;

	if (bio->bi_status)
		cmpxchg(&io->status, BLK_STS_OK, bio->bi_status);
	bio_put(bio);
	pmc_wb_io_put(io);
}

static struct bio *pmc_wb_bio(struct pmemcache *pc, struct pmc_wb_io *io,
			      unsigned int nr_vecs, sector_t sector)
{
	struct bio *bio;

	bio = bio_alloc_bioset(pc->origin->bdev, nr_vecs,
			       REQ_OP_WRITE | REQ_FUA | REQ_SYNC, GFP_NOIO,
			       &pc->wb_bioset);
	bio->bi_iter.bi_sector = sector;
	bio->bi_end_io = pmc_wb_endio;
	bio->bi_private = io;
	return bio;
}

/* Add sectors [a, b) of item @it to @bio; false if it did not fit. */
static bool pmc_wb_add(struct pmemcache *pc, struct pmc_wb_io *io,
		       struct bio *bio, struct pmc_wb_item *it, u32 a, u32 b)
{
	u32 off = a << SECTOR_SHIFT, len = (b - a) << SECTOR_SHIFT;

	if (io->pfn)
		return pmc_bio_add_pmem(pc, bio, it->slot, off, len) == len;
	return bio_add_page(bio, it->page, len, off) == len;
}

/*
 * Build and submit the bios of one group: a run of adjacent whole blocks
 * (one bio), or one partly valid block (one bio per run of valid sectors).
 */
static void pmc_wb_submit(struct pmemcache *pc, struct pmc_wb_item *items,
			  unsigned int n)
{
	struct pmc_wb_io *io;
	struct bio *bio = NULL;
	unsigned int i;
	u32 a, b;

	io = kmalloc(struct_size(io, items, n), GFP_NOIO | __GFP_NOFAIL);
	io->pc = pc;
	io->n = n;
	io->status = BLK_STS_OK;
	io->pfn = pmc_wb_use_pfn(pc);
	atomic_set(&io->pending, 1);
	memcpy(io->items, items, n * sizeof(*items));
	atomic_add(n, &pc->wb_inflight);

	for (i = 0; i < n; i++) {
		struct pmc_wb_item *it = &io->items[i];
		void *dst;

		it->page = NULL;
		if (io->pfn)
			continue;
		it->page = mempool_alloc(pc->page_pool, GFP_NOIO);
		dst = kmap_local_page(it->page);
		if (pmc_copy_from_pmem(dst, pmc_meta_data(&pc->meta, it->slot),
				       pc->block_size)) {
			atomic64_inc(&pc->st.media_errors);
			io->status = BLK_STS_MEDIUM;
		}
		kunmap_local(dst);
	}
	if (io->status)
		goto out;

	if (io->items[0].mask == pmc_full_mask(pc)) {
		bio = pmc_wb_bio(pc, io, n,
				 io->items[0].oblock << pc->spb_shift);
		for (i = 0; i < n; i++) {
			if (!pmc_wb_add(pc, io, bio, &io->items[i], 0,
					1U << pc->spb_shift)) {
				bio->bi_status = BLK_STS_RESOURCE;
				break;
			}
		}
		atomic_inc(&io->pending);
		if (bio->bi_status)
			bio_endio(bio);
		else
			submit_bio(bio);
		goto out;
	}

	/* Partly valid block: one bio per run of valid sectors. */
	for (a = 0; a < (1U << pc->spb_shift); a = b) {
		struct pmc_wb_item *it = &io->items[0];

		if (!(it->mask & (1U << a))) {
			b = a + 1;
			continue;
		}
		for (b = a; b < (1U << pc->spb_shift) && (it->mask & (1U << b)); b++)
			;
		bio = pmc_wb_bio(pc, io, 1, (it->oblock << pc->spb_shift) + a);
		atomic_inc(&io->pending);
		if (!pmc_wb_add(pc, io, bio, it, a, b)) {
			bio->bi_status = BLK_STS_RESOURCE;
			bio_endio(bio);
		} else {
			submit_bio(bio);
		}
	}
out:
	pmc_wb_io_put(io);
}

/* One pass: pick, sort, merge, submit.  Returns the blocks submitted. */
static unsigned int pmc_wb_pass(struct pmemcache *pc, bool age_only)
{
	struct pmc_wb_item *items;
	unsigned int want, n = 0, i, j;
	u64 nb = pc->meta.n_blocks, scanned;
	u32 cur = atomic_read(&pc->epoch) & 3;
	int inflight = atomic_read(&pc->wb_inflight);

	if (inflight >= pc->wb_jobs)
		return 0;
	want = min_t(unsigned int, pc->wb_jobs - inflight, PMC_MAX_WB_BATCH);
	items = kmalloc_array(want, sizeof(*items), GFP_NOIO);
	if (!items)
		return 0;

	for (scanned = 0; scanned < nb && n < want; scanned++) {
		u32 s = pc->wb_hand++ % nb;
		u64 v = READ_ONCE(pc->idx.slot[s]);
		u32 f = pmc_slot_flags(v);
		struct pmc_stripe *st;

		if ((f & (PMC_SF_USED | PMC_SF_DIRTY)) !=
		    (PMC_SF_USED | PMC_SF_DIRTY) ||
		    (f & (PMC_SF_WB | PMC_SF_STALE | PMC_SF_WAITPREV)))
			continue;
		if (age_only && pmc_slot_epoch(v) == cur)
			continue;
		st = pmc_stripe_of(pc, pmc_slot_oblock(v));
		down_write(&st->lock);
		if (READ_ONCE(pc->idx.slot[s]) == v) {
			pmc_meta_wb_start(&pc->idx, s);
			items[n].oblock = pmc_slot_oblock(v);
			items[n].slot = s;
			items[n].mask = pmc_slot_mask(v);
			items[n].page = NULL;
			n++;
		}
		up_write(&st->lock);
	}
	if (!n) {
		kfree(items);
		if (age_only)
			WRITE_ONCE(pc->age_pending, false);
		return 0;
	}

	sort(items, n, sizeof(*items), pmc_wb_cmp, NULL);
	for (i = 0; i < n; i = j) {
		j = i + 1;
		if (items[i].mask == pmc_full_mask(pc)) {
			while (j < n && j - i < BIO_MAX_VECS &&
			       items[j].mask == pmc_full_mask(pc) &&
			       items[j].oblock == items[j - 1].oblock + 1)
				j++;
		}
		pmc_wb_submit(pc, &items[i], j - i);
	}
	kfree(items);
	return n;
}

static void pmc_wb_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(to_delayed_work(work),
					    struct pmemcache, wb_work);
	struct blk_plug plug;
	bool age_only;

	if (READ_ONCE(pc->suspended))
		return;
	blk_start_plug(&plug);
	while (pmc_wb_wanted(pc, &age_only)) {
		if (!pmc_wb_pass(pc, age_only))
			break;
		cond_resched();
	}
	blk_finish_plug(&plug);
}

static void pmc_wb_endio_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(work, struct pmemcache, endio_work);
	struct pmc_wb_io *io, *tmp;
	u32 freed[64];
	unsigned int nf = 0, i;
	bool retry_later = false;
	LIST_HEAD(list);

	spin_lock_irq(&pc->endio_lock);
	list_splice_init(&pc->endio_list, &list);
	spin_unlock_irq(&pc->endio_lock);

	list_for_each_entry_safe(io, tmp, &list, list) {
		bool ok = io->status == BLK_STS_OK;

		if (io->status == BLK_STS_NOTSUPP && io->pfn) {
			/* The origin refuses page-less bios: bounce from now. */
			if (!READ_ONCE(pc->pfn_failed))
				DMWARN("origin refused pfn writeback, switching to bounce pages");
			WRITE_ONCE(pc->pfn_failed, true);
			atomic64_inc(&pc->st.wb_notsupp);
		} else if (!ok) {
			atomic64_inc(&pc->st.wb_errors);
			retry_later = true;
		}
		for (i = 0; i < io->n; i++) {
			struct pmc_wb_item *it = &io->items[i];
			struct pmc_stripe *st = pmc_stripe_of(pc, it->oblock);
			u64 v;
			u32 f;

			down_write(&st->lock);
			v = pc->idx.slot[it->slot];
			if (pmc_meta_wb_done(&pc->meta, &pc->idx, it->slot, ok, &f)) {
				atomic64_inc(&pc->st.media_errors);
			} else if (ok && !(pmc_slot_flags(v) & PMC_SF_STALE)) {
				atomic64_dec(&pc->epoch_dirty[pmc_slot_epoch(v)]);
				atomic64_dec(&pc->n_dirty);
			}
			/*
			 * C2: the CLEAN store is fenced before the lock is
			 * dropped: once another CPU sees the block clean it may
			 * evict it, and a late non-temporal CLEAN store must
			 * not land after that CPU's FREE store.
			 */
			pmc_meta_fence(PMC_P_CLEAN);
			up_write(&st->lock);
			if (f != PMC_NO_SLOT) {
				freed[nf++] = f;
				if (nf == ARRAY_SIZE(freed)) {
					pmc_free_slots(pc, freed, nf);
					nf = 0;
				}
			}
			if (ok) {
				u64 bytes = (u64)hweight32(it->mask) << SECTOR_SHIFT;

				if (io->pfn) {
					atomic64_inc(&pc->st.wb_pfn_blocks);
					atomic64_add(bytes, &pc->st.wb_pfn_bytes);
				} else {
					atomic64_inc(&pc->st.wb_bounce_blocks);
					atomic64_add(bytes, &pc->st.wb_bounce_bytes);
				}
			}
			if (it->page)
				mempool_free(it->page, pc->page_pool);
		}
		atomic_sub(io->n, &pc->wb_inflight);
		kfree(io);
	}
	pmc_free_slots(pc, freed, nf);
	WRITE_ONCE(pc->starved, false);
	wake_up_all(&pc->wb_wait);
	wake_up_all(&pc->free_wait);
	if (!READ_ONCE(pc->suspended))
		mod_delayed_work(pc->wq, &pc->wb_work, retry_later ? HZ : 0);
}

static void pmc_age_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(to_delayed_work(work),
					    struct pmemcache, age_work);
	u32 cur = atomic_read(&pc->epoch) & 3, e;

	/* Advance only into an epoch that has no dirty blocks left. */
	if (!atomic64_read(&pc->epoch_dirty[(cur + 1) & 3])) {
		atomic_inc(&pc->epoch);
		cur = (cur + 1) & 3;
	}
	for (e = 0; e < 4; e++) {
		if (e != cur && atomic64_read(&pc->epoch_dirty[e])) {
			WRITE_ONCE(pc->age_pending, true);
			pmc_writeback_kick(pc);
			break;
		}
	}
	if (!READ_ONCE(pc->suspended))
		queue_delayed_work(pc->wq, &pc->age_work,
				   msecs_to_jiffies(max(pc->max_age_ms / 2, 1U)));
}

int pmc_writeback_all(struct pmemcache *pc)
{
	u64 errors = atomic64_read(&pc->st.wb_errors);
	long r;

	WRITE_ONCE(pc->flush_all, true);
	pmc_writeback_kick(pc);
	r = wait_event_interruptible(pc->wb_wait,
				     (!atomic64_read(&pc->n_dirty) &&
				      !atomic_read(&pc->wb_inflight)) ||
				     atomic64_read(&pc->st.wb_errors) != errors ||
				     READ_ONCE(pc->suspended));
	WRITE_ONCE(pc->flush_all, false);
	if (r)
		return r;
	if (atomic64_read(&pc->n_dirty) || atomic_read(&pc->wb_inflight))
		return -EIO;
	return 0;
}

/* Quiesce: no origin I/O of ours in flight once this returns. */
void pmc_writeback_stop(struct pmemcache *pc)
{
	WRITE_ONCE(pc->suspended, true);
	wake_up_all(&pc->wb_wait);
	cancel_delayed_work_sync(&pc->age_work);
	cancel_delayed_work_sync(&pc->wb_work);
	wait_event(pc->wb_wait, !atomic_read(&pc->wb_inflight));
	flush_workqueue(pc->wq);
}

void pmc_writeback_start(struct pmemcache *pc)
{
	pc->pfn_capable = pmc_origin_takes_pfn(pc);
	WRITE_ONCE(pc->pfn_failed, false);
	WRITE_ONCE(pc->suspended, false);
	if (pc->max_age_ms)
		queue_delayed_work(pc->wq, &pc->age_work,
				   msecs_to_jiffies(max(pc->max_age_ms / 2, 1U)));
	pmc_writeback_check_watermark(pc);
	pmc_writeback_kick(pc);
}

int pmc_writeback_init(struct pmemcache *pc)
{
	int r;

	spin_lock_init(&pc->endio_lock);
	INIT_LIST_HEAD(&pc->endio_list);
	init_waitqueue_head(&pc->wb_wait);
	INIT_DELAYED_WORK(&pc->wb_work, pmc_wb_work);
	INIT_DELAYED_WORK(&pc->age_work, pmc_age_work);
	INIT_WORK(&pc->endio_work, pmc_wb_endio_work);
	atomic_set(&pc->wb_inflight, 0);
	pc->suspended = true;

	pc->wq = alloc_workqueue("dm-pmemcache", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	if (!pc->wq)
		return -ENOMEM;
	r = bioset_init(&pc->wb_bioset, BIO_POOL_SIZE, 0, BIOSET_NEED_BVECS);
	if (r)
		return r;
	pc->page_pool = mempool_create_page_pool(BIO_MAX_VECS, 0);
	if (!pc->page_pool)
		return -ENOMEM;
	return 0;
}

void pmc_writeback_exit(struct pmemcache *pc)
{
	if (pc->wq)
		destroy_workqueue(pc->wq);
	pc->wq = NULL;
	mempool_destroy(pc->page_pool);
	pc->page_pool = NULL;
	bioset_exit(&pc->wb_bioset);
}
