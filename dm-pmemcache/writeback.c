// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: writeback of dirty blocks to the origin.
 *
 * A pass takes dirty blocks from wb_select.c (sorted by origin block,
 * whole parity stripes first) at the pace wb_rate.c allows, and merges
 * runs of adjacent whole blocks into one bio.  The bio points straight at
 * pmem (bio_add_pfn, no struct page) when the origin queue takes page-less
 * bios, or at DRAM bounce pages filled with copy_mc_to_kernel otherwise
 * (md raid5) and after a BLK_STS_NOTSUPP.
 *
 * Which blocks go together, and what a completion means (one origin
 * flush for all the writes that completed since the last run, and only
 * after it CLEAN), are decided by the shared policy (pmc_wb.c, also run
 * by the host crash model); this file turns its answers into bios, work
 * items and counters.  A failed write or flush leaves the blocks dirty;
 * it is counted and retried after a delay.  Dirty data is never dropped.
 */
#include <linux/blkdev.h>
#include <linux/delay.h>
#include <linux/highmem.h>

#include "pmemcache.h"

/* One origin write of writeback; its blocks' ->buf are bounce pages. */
struct pmc_wb_io {
	struct pmc_wb_write w;	/* what pmc_wb.c knows of it */
	struct list_head list;
	struct pmemcache *pc;
	atomic_t pending;	/* bios not yet completed, +1 while building */
	blk_status_t status;
	bool pfn;
	struct pmc_wb_block blk[];
};

static bool pmc_wb_use_pfn(struct pmemcache *pc)
{
	return pc->route != PMC_ROUTE_BOUNCE && pc->pfn_capable &&
	       !READ_ONCE(pc->pfn_failed);
}

/*
 * May a page-less bio not point at the data of @slot?  It is in the pmem
 * disk's badblocks list, or (data_crc) it does not match its crc on the
 * half page-less bios use: then, if @heal, it is counted and healed from
 * the other half.
 */
static bool pmc_wb_poisoned(struct pmemcache *pc, u32 slot, bool heal)
{
	if (pmc_pmem_range_bad(pc, pmc_meta_data_offset(&pc->meta, slot),
			       pc->block_size))
		return true;
	if (pmc_data_ok(pc, READ_ONCE(pc->meta.base), slot, heal))
		return false;
	if (heal && READ_ONCE(pc->mirror.reads) == 3)
		pmc_mirror_heal_later(pc, slot);
	return true;
}

void pmc_writeback_kick(struct pmemcache *pc)
{
	if (!READ_ONCE(pc->suspended))
		mod_delayed_work(pc->wq, &pc->wb_work, 0);
}

enum pmc_wb_mode { PMC_WB_IDLE, PMC_WB_AGE, PMC_WB_RATE, PMC_WB_FULL };

/* What writeback should do now, and which blocks it may select. */
static enum pmc_wb_mode pmc_wb_mode(struct pmemcache *pc, unsigned int *sel)
{
	u64 d = atomic64_read(&pc->n_dirty), n = pc->meta.n_blocks;

	*sel = PMC_SEL_PARTIAL;
	if (!d)
		return PMC_WB_IDLE;
	if (atomic_read(&pc->flushers) || READ_ONCE(pc->cleaner) ||
	    READ_ONCE(pc->starved) || d * 100 >= (u64)pc->high_wm * n)
		return PMC_WB_FULL;
	if (READ_ONCE(pc->age_pending)) {
		*sel = PMC_SEL_PARTIAL | PMC_SEL_AGED;
		return PMC_WB_AGE;
	}
	if (d * 100 > (u64)pc->low_wm * n) {
		*sel = 0;
		return PMC_WB_RATE;
	}
	return PMC_WB_IDLE;
}

/*
 * Called after each new dirty block: start writeback above low_watermark,
 * and during a flush or in cleaner mode: a worker that found nothing
 * dirty has stopped, and they wait for this block too.  (A full cache's
 * writers kick it themselves when they wait for a free block.)  A worker
 * that is pacing itself in rate mode, perhaps for many seconds after a
 * pass overdrew its budget, is woken once the dirty blocks reach
 * high_watermark, or a flush or cleaner mode began.
 */
void pmc_writeback_note_dirty(struct pmemcache *pc)
{
	u64 d = atomic64_read(&pc->n_dirty), n = pc->meta.n_blocks;
	bool waited_for = atomic_read(&pc->flushers) || READ_ONCE(pc->cleaner);

	if (READ_ONCE(pc->wb_paced) &&
	    (waited_for || d * 100 >= (u64)pc->high_wm * n)) {
		WRITE_ONCE(pc->wb_paced, false);
		pmc_writeback_kick(pc);
		return;
	}
	if ((waited_for || d * 100 > (u64)pc->low_wm * n) &&
	    !delayed_work_pending(&pc->wb_work))
		pmc_writeback_kick(pc);
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
			       REQ_OP_WRITE | REQ_SYNC, GFP_NOIO,
			       &pc->wb_bioset);
	bio->bi_iter.bi_sector = sector;
	bio->bi_end_io = pmc_wb_endio;
	bio->bi_private = io;
	return bio;
}

/* Add sectors [a, b) of block @it to @bio; false if it did not fit. */
static bool pmc_wb_add(struct pmemcache *pc, struct pmc_wb_io *io,
		       struct bio *bio, struct pmc_wb_block *it, u32 a, u32 b)
{
	u32 off = a << SECTOR_SHIFT, len = (b - a) << SECTOR_SHIFT;

	if (io->pfn)
		return pmc_bio_add_pmem(pc, bio, it->slot, off, len) == len;
	return bio_add_page(bio, it->buf, len, off) == len;
}

/*
 * pmc_wb_send() (pmc_wb.c) sends a group: build and submit the bios of a
 * run of adjacent whole blocks (one bio), or of one partly valid block
 * (one bio per run of valid sectors).
 */
bool pmc_env_wb_submit(struct pmemcache *pc, const struct pmc_wb_cand *c,
		       unsigned int n)
{
	struct pmc_wb_io *io;
	struct bio *bio = NULL;
	unsigned int i;
	u32 a, b;

	/*
	 * No waiting for memory here: what frees it is a completion, and
	 * that runs in a work item of this queue.  Without, the pass stops
	 * and writeback tries again a little later.
	 */
	io = kmalloc(struct_size(io, blk, n),
		     GFP_NOIO | __GFP_NORETRY | __GFP_NOWARN);
	if (!io)
		return false;
	io->pc = pc;
	io->w.blk = io->blk;
	io->w.n = n;
	io->w.unsent = false;
	io->status = BLK_STS_OK;
	io->pfn = pmc_wb_use_pfn(pc);
	atomic_set(&io->pending, 1);
	for (i = 0; i < n; i++) {
		io->blk[i].oblock = pmc_slot_oblock(c[i].v);
		io->blk[i].slot = c[i].slot;
		io->blk[i].mask = pmc_slot_mask(c[i].v);
		io->blk[i].buf = NULL;
	}
	atomic_add(n, &pc->wb_inflight);
	/* Pairs with pmc_writeback_shutdown(): it waits for us or we see it. */
	smp_mb__after_atomic();
	if (READ_ONCE(pc->suspended)) {
		/* Suspend or shutdown waits for none but what is sent. */
		io->w.unsent = true;
		io->status = BLK_STS_OFFLINE;
		goto out;
	}

	/*
	 * Never send known poison or bad data: such a block goes by a bounce
	 * copy (a mirror's other half), or not at all (stays dirty).
	 */
	for (i = 0; io->pfn && i < n; i++)
		if (pmc_wb_poisoned(pc, io->blk[i].slot, true))
			io->pfn = false;
	for (i = 0; i < n; i++) {
		struct pmc_wb_block *it = &io->blk[i];
		void *dst;

		if (io->pfn)
			continue;
		it->buf = mempool_alloc(pc->page_pool,
					GFP_NOWAIT | __GFP_NOWARN);
		if (!it->buf) {
			/* Not sent, not an error: tried again later. */
			io->w.unsent = true;
			io->status = BLK_STS_RESOURCE;
			WRITE_ONCE(pc->wb_retry_at, jiffies + PMC_WB_NOMEM_DELAY);
			break;
		}
		dst = kmap_local_page(it->buf);
		if (pmc_read_block(pc, dst, it->slot)) {
			pmc_count_media_error(pc);
			io->status = BLK_STS_MEDIUM;
		}
		kunmap_local(dst);
	}
	if (io->status)
		goto out;

	if (io->blk[0].mask == pc->meta.full_mask) {
		bio = pmc_wb_bio(pc, io, n,
				 io->blk[0].oblock << pc->spb_shift);
		for (i = 0; i < n; i++) {
			if (!pmc_wb_add(pc, io, bio, &io->blk[i], 0,
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
		struct pmc_wb_block *it = &io->blk[0];

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
	if (!io->w.unsent && !io->status)
		pmc_cut_point(PMC_CUT_WB_START);
	pmc_wb_io_put(io);
	return true;
}

/* One pass: select, then pmc_wb_send().  Returns the blocks submitted. */
static unsigned int pmc_wb_pass(struct pmemcache *pc, unsigned int sel,
				unsigned int budget)
{
	struct pmc_wb_cand *c = pc->wb_cand;
	unsigned int want, n, sent;
	int inflight = atomic_read(&pc->wb_inflight);

	if (inflight >= pc->wb_jobs)
		return 0;
	want = min3(pc->wb_jobs - inflight, budget, (unsigned int)PMC_WB_PASS);
	n = pmc_wb_select(pc, c, want, sel);
	if (!n) {
		if (sel & PMC_SEL_AGED)
			WRITE_ONCE(pc->age_pending, false);
		return 0;
	}

	/* A merged run of whole blocks is one bio: BIO_MAX_VECS at most. */
	sent = pmc_wb_send(pc, &pc->meta, &pc->idx, c, n, BIO_MAX_VECS);
	if (sent < n)
		WRITE_ONCE(pc->wb_retry_at, jiffies + PMC_WB_NOMEM_DELAY);
	return sent;
}

static void pmc_wb_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(to_delayed_work(work),
					    struct pmemcache, wb_work);
	unsigned long delay = 0;
	struct blk_plug plug;
	enum pmc_wb_mode mode;
	unsigned int sel, budget, n;
	long pause;
	int id;

	if (READ_ONCE(pc->suspended))
		return;
	WRITE_ONCE(pc->wb_paced, false);
	blk_start_plug(&plug);
	while ((mode = pmc_wb_mode(pc, &sel)) != PMC_WB_IDLE) {
		/*
		 * An origin write failed: the blocks are retried a second
		 * later, not at once (a dead origin would get the whole cache
		 * again and again, as often as writers kick writeback).
		 */
		pause = (long)(READ_ONCE(pc->wb_retry_at) - jiffies);
		if (pause > 0) {
			delay = pause;
			break;
		}
		budget = PMC_WB_PASS;
		if (mode == PMC_WB_RATE && pmc_rate_update(pc)) {
			budget = pmc_rate_allow(pc, budget, &delay);
			if (!budget)
				break;
		}
		/* Bounce copies and page-less bios read pmem. */
		id = pmc_pmem_enter(pc);
		if (id < 0)
			break;
		n = pmc_wb_pass(pc, sel, budget);
		pmc_pmem_exit(id);
		if (mode == PMC_WB_RATE)
			pmc_rate_charge(pc, n);
		if (!n) {
			/* Aged blocks done: the watermarks may want more. */
			if (mode == PMC_WB_AGE && !READ_ONCE(pc->age_pending))
				continue;
			/* Only partial stripes left: look again later. */
			if (mode == PMC_WB_RATE && !atomic_read(&pc->wb_inflight))
				delay = HZ;
			/*
			 * Dirty blocks, none taken and none in flight: they
			 * were refused while a write of ours to the origin ran
			 * in their stripe (st->around).  Nothing kicks us when
			 * that ends, and a flush or detach waits for them.
			 */
			if (mode == PMC_WB_FULL && !atomic_read(&pc->wb_inflight))
				delay = msecs_to_jiffies(PMC_WB_REFUSED_MS);
			break;
		}
		cond_resched();
	}
	if (mode != PMC_WB_RATE)
		WRITE_ONCE(pc->rc.rate, 0);
	blk_finish_plug(&plug);
	if (delay && !READ_ONCE(pc->suspended)) {
		/* Paced: a writer that crosses high_watermark ends the pause. */
		WRITE_ONCE(pc->wb_paced, mode == PMC_WB_RATE);
		queue_delayed_work(pc->wq, &pc->wb_work, delay);
	}
}

/* ---- pmc_env_*(): what the shared policy (pmc_wb.c) asks of us ---- */

bool pmc_env_wb_poisoned(struct pmemcache *pc, u32 slot)
{
	return pmc_wb_poisoned(pc, slot, false);
}

int pmc_env_origin_flush(struct pmemcache *pc)
{
	atomic64_inc(&pc->st.wb_flushes);
	return blkdev_issue_flush(pc->origin->bdev);
}

/*
 * The record of @slot (dirty copy @v) could not be marked CLEAN after its
 * writeback: the slot is out of use (pmc_meta_wb_done()), the origin
 * holds its data.
 */
void pmc_env_wb_quarantined(struct pmemcache *pc, u32 slot, u64 v)
{
	pmc_count_media_error(pc);
	atomic64_inc(&pc->bad_slots);
	pmc_dirty_dec(pc, v);
	DMWARN_LIMIT("%s: cache block %u: record unreadable or changed after writeback: out of use",
		     pc->pmem_dev->name, slot);
}

/* The counters and the retry delay of one ended origin write. */
static bool pmc_wb_account(struct pmemcache *pc, struct pmc_wb_io *io)
{
	unsigned int i;
	u64 bytes = 0;

	if (io->status == BLK_STS_NOTSUPP && io->pfn) {
		/* The origin refuses page-less bios: bounce from now. */
		if (!READ_ONCE(pc->pfn_failed))
			DMWARN("origin refused pfn writeback, switching to bounce pages");
		WRITE_ONCE(pc->pfn_failed, true);
		atomic64_inc(&pc->st.wb_notsupp);
		return false;
	}
	if (io->w.end == PMC_WB_FAILED) {
		/* A flush fails on either; only the origin's is its. */
		atomic_inc(&pc->wb_failures);
		if (io->status != BLK_STS_MEDIUM) {
			atomic64_inc(&pc->st.wb_errors);
			pmc_health_set(pc, PMC_H_ORIGIN, io->w.err);
		}
		WRITE_ONCE(pc->wb_retry_at, jiffies + HZ);
		return true;
	}
	if (io->w.end != PMC_WB_CLEAN)
		return false;
	pmc_health_clear(pc, PMC_H_ORIGIN);
	for (i = 0; i < io->w.n; i++)
		bytes += (u64)hweight32(io->blk[i].mask) << SECTOR_SHIFT;
	if (io->pfn) {
		atomic64_add(io->w.n, &pc->st.wb_pfn_blocks);
		atomic64_add(bytes, &pc->st.wb_pfn_bytes);
	} else {
		atomic64_add(io->w.n, &pc->st.wb_bounce_blocks);
		atomic64_add(bytes, &pc->st.wb_bounce_bytes);
	}
	return false;
}

/*
 * The completed origin writes go to the shared policy (pmc_wb_complete():
 * one origin flush, then CLEAN); then the counters, and whoever waits for
 * clean blocks is woken.
 */
static void pmc_wb_endio_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(work, struct pmemcache, endio_work);
	struct pmc_wb_write *batch = NULL, **tail = &batch;
	struct pmc_wb_io *io, *tmp;
	bool retry_later = false;
	unsigned int cleaned, i;
	LIST_HEAD(list);

	spin_lock_irq(&pc->endio_lock);
	list_splice_init(&pc->endio_list, &list);
	spin_unlock_irq(&pc->endio_lock);
	list_for_each_entry(io, &list, list) {
		io->w.err = blk_status_to_errno(io->status);
		io->w.next = NULL;
		*tail = &io->w;
		tail = &io->w.next;
	}
	cleaned = pmc_wb_complete(pc, &pc->meta, &pc->idx, batch);

	list_for_each_entry_safe(io, tmp, &list, list) {
		retry_later |= pmc_wb_account(pc, io);
		for (i = 0; i < io->w.n; i++)
			if (io->blk[i].buf)
				mempool_free(io->blk[i].buf, pc->page_pool);
		atomic_sub(io->w.n, &pc->wb_inflight);
		kfree(io);
	}
	/* Blocks made clean can be evicted: the cache is no longer full. */
	if (cleaned)
		pmc_health_clear(pc, PMC_H_FULL);
	WRITE_ONCE(pc->starved, false);
	/* Blocks may be clean now: writers waiting for a slot evict them. */
	atomic_inc(&pc->wb_done);
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
	unsigned int max_age = READ_ONCE(pc->max_age_ms);

	if (!max_age) {
		/* Switched off by a message. */
		WRITE_ONCE(pc->age_pending, false);
		return;
	}
	/* Advance only into an epoch that has no dirty blocks left. */
	if (!atomic64_read(&pc->epoch_dirty[(cur + 1) & 3]))
		atomic_inc(&pc->epoch);
	for (e = 0; e < 4; e++) {
		if (pmc_epoch_aged(pc, e) && atomic64_read(&pc->epoch_dirty[e])) {
			WRITE_ONCE(pc->age_pending, true);
			pmc_writeback_kick(pc);
			break;
		}
	}
	if (!READ_ONCE(pc->suspended))
		queue_delayed_work(pc->wq, &pc->age_work,
				   msecs_to_jiffies(max(max_age / 2, 1U)));
}

/*
 * max_age changed by a message: restart the epoch clock at the new pace
 * (or start it: the table may have had none).  Suspended, resume starts
 * it; a work queued in a race with suspend only kicks writeback, which
 * does nothing while suspended, and the destructor cancels it.
 */
void pmc_writeback_age_changed(struct pmemcache *pc)
{
	unsigned int max_age = READ_ONCE(pc->max_age_ms);

	if (max_age && !READ_ONCE(pc->suspended))
		mod_delayed_work(pc->wq, &pc->age_work,
				 msecs_to_jiffies(max(max_age / 2, 1U)));
}

/*
 * Write back every dirty block (the flush message, flush_on_suspend).
 * Flushes may run concurrently: each one counts itself in pc->flushers,
 * so one that is interrupted never stops writeback for the others.
 */
int pmc_writeback_all(struct pmemcache *pc)
{
	int failures = atomic_read(&pc->wb_failures);
	long r;

	atomic_inc(&pc->flushers);
	pmc_writeback_kick(pc);
	r = wait_event_interruptible(pc->wb_wait,
				     (!atomic64_read(&pc->n_dirty) &&
				      !atomic_read(&pc->wb_inflight)) ||
				     atomic_read(&pc->wb_failures) != failures ||
				     READ_ONCE(pc->suspended) ||
				     pmc_pmem_gone(pc));
	atomic_dec(&pc->flushers);
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

/*
 * The system goes down: nothing of ours may reach the origin once md has
 * stopped its arrays' writes (md's reboot notifier runs after ours).
 * Dirty blocks simply stay dirty in pmem for the next boot.  The wait is
 * bounded: a dead origin must not stop the machine from going down.
 */
static bool pmc_around_idle(struct pmemcache *pc)
{
	unsigned int i;

	for (i = 0; i < PMC_NR_STRIPES; i++)
		if (atomic_read(&pc->stripes[i].around))
			return false;
	return true;
}

void pmc_writeback_shutdown(struct pmemcache *pc)
{
	/*
	 * No new origin write from here on: writeback and write-around see
	 * the flag (pmc_wb_submit(), pmc_origin_write_get()) or are counted
	 * before they look, and then waited for.  No cancel_*_sync(): the
	 * writeback work may sit in the origin's queue, and the wait is
	 * bounded.
	 */
	WRITE_ONCE(pc->shutting_down, true);
	WRITE_ONCE(pc->suspended, true);
	smp_mb();	/* flag before reading the counts: see there */
	cancel_delayed_work(&pc->age_work);
	cancel_delayed_work(&pc->wb_work);
	wake_up_all(&pc->wb_wait);
	wake_up_all(&pc->free_wait);
	/* Woken by writeback's endio work and by pmc_around_put(). */
	if (!wait_event_timeout(pc->wb_wait, !atomic_read(&pc->wb_inflight) &&
				pmc_around_idle(pc), PMC_SHUTDOWN_WAIT))
		DMWARN("shutdown: origin writes still in flight after %u s",
		       PMC_SHUTDOWN_WAIT / HZ);
}

void pmc_writeback_start(struct pmemcache *pc)
{
	/* No writeback after shutdown, even if a table is resumed. */
	if (READ_ONCE(pc->shutting_down))
		return;
	pc->pfn_capable = pmc_origin_takes_pfn(pc);
	pc->stripe_blocks = pc->stripe_cfg == PMC_STRIPE_AUTO ?
			    pmc_origin_stripe_blocks(pc) : pc->stripe_cfg;
	pmc_select_start(pc);
	pmc_rate_init(pc);
	WRITE_ONCE(pc->wb_retry_at, jiffies);
	WRITE_ONCE(pc->pfn_failed, false);
	WRITE_ONCE(pc->suspended, false);
	if (pc->max_age_ms)
		queue_delayed_work(pc->wq, &pc->age_work,
				   msecs_to_jiffies(max(pc->max_age_ms / 2, 1U)));
	pmc_writeback_note_dirty(pc);
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
	atomic_set(&pc->flushers, 0);
	atomic_set(&pc->wb_done, 0);
	atomic_set(&pc->wb_failures, 0);
	pc->suspended = true;

	pc->wq = alloc_workqueue("dm-pmemcache", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	if (!pc->wq)
		return -ENOMEM;
	r = bioset_init(&pc->wb_bioset, BIO_POOL_SIZE, 0, BIOSET_NEED_BVECS);
	if (r)
		return r;
	pc->wb_cand = kmalloc_array(PMC_WB_PASS, sizeof(*pc->wb_cand),
				    GFP_KERNEL);
	if (!pc->wb_cand)
		return -ENOMEM;
	r = pmc_select_init(pc);
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
	kfree(pc->wb_cand);
	pc->wb_cand = NULL;
	bioset_exit(&pc->wb_bioset);
}
