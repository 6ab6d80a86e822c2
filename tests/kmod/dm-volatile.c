// SPDX-License-Identifier: GPL-2.0
/*
 * dm-volatile: a test target that models a disk with a volatile write
 * cache, so that a power cut of the guest loses exactly what such a disk
 * may lose.
 *
 * Table: <dev> <cache_kib> <early_every>
 *   dev          the device below, taken as the durable medium
 *   cache_kib    at most this much written data is held in RAM; a write
 *                that does not fit first writes everything held to @dev
 *   early_every  after every that many cached writes, one held 4 KiB chunk
 *                (picked at random) is written to @dev early, as a disk
 *                cache does on its own (0: never)
 *
 * A write without REQ_FUA completes as soon as its data is copied into
 * RAM, and reads see it.  Only REQ_PREFLUSH (everything held is written to
 * @dev, then @dev is flushed) and REQ_FUA (the write goes to @dev before it
 * completes) make data durable.  Removing the device writes everything
 * held to @dev (an orderly stop); a power cut loses it.  Discards are not
 * supported.
 *
 * One ordered worker handles the bios one at a time, so a read never races
 * with the write-out of data it must see.  A read that touches no held
 * chunk goes straight to @dev.
 *
 * Status: <held_chunks> <writes> <fua_writes> <flushes> <early_chunks>
 *	   <full_writeouts>
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/device-mapper.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/xarray.h>

#define DM_MSG_PREFIX "volatile"

#define VOL_CHUNK_SHIFT	PAGE_SHIFT
#define VOL_CHUNK_SIZE	PAGE_SIZE
#define VOL_SPC_SHIFT	(VOL_CHUNK_SHIFT - SECTOR_SHIFT)	/* sectors per chunk */
#define VOL_BATCH	256	/* chunks written out per round */

struct vol_c {
	struct dm_target *ti;
	struct dm_dev *dev;
	/* chunk index -> page; page_private() = mask of the sectors held */
	struct xarray held;
	unsigned long max_held;
	unsigned int early_every;
	unsigned int since_early;	/* worker only */
	unsigned long batch[VOL_BATCH];	/* worker only */

	spinlock_t lock;		/* protects queued */
	struct bio_list queued;
	struct workqueue_struct *wq;
	struct work_struct work;
	struct bio_set bs;

	atomic_long_t nr_held;
	atomic64_t writes, fua_writes, flushes, early_chunks, full_writeouts;
};

/* Completion of one round of write-out bios. */
struct vol_wait {
	atomic_t pending;
	struct completion done;
	blk_status_t status;
};

static sector_t vol_sector(struct vol_c *vc, struct bio *bio)
{
	return dm_target_offset(vc->ti, bio->bi_iter.bi_sector);
}

static unsigned long vol_chunk(sector_t s)
{
	return s >> VOL_SPC_SHIFT;
}

/* Bits of the sectors that bytes [off, off + len) of a chunk touch. */
static unsigned long vol_mask(unsigned int off, unsigned int len)
{
	unsigned int a = off >> SECTOR_SHIFT;
	unsigned int b = (off + len - 1) >> SECTOR_SHIFT;

	return GENMASK(b, a);
}

/* Does the range of @bio hold any chunk?  (No lock: see the header.) */
static bool vol_any_held(struct vol_c *vc, struct bio *bio)
{
	sector_t s = vol_sector(vc, bio);
	unsigned long idx = vol_chunk(s);

	return xa_find(&vc->held, &idx, vol_chunk(s + bio_sectors(bio) - 1),
		       XA_PRESENT);
}

/* ---- write-out of held chunks --------------------------------------- */

static void vol_wait_endio(struct bio *bio)
{
	struct vol_wait *w = bio->bi_private;

	if (bio->bi_status)
		WRITE_ONCE(w->status, bio->bi_status);
	bio_put(bio);
	if (atomic_dec_and_test(&w->pending))
		complete(&w->done);
}

static void vol_submit(struct vol_wait *w, struct bio *bio)
{
	atomic_inc(&w->pending);
	submit_bio(bio);
}

/*
 * Write the chunks @idx[0..n) (ascending) to @dev and wait; runs of
 * sectors that continue each other share a bio.  On success the chunks
 * are no longer held.
 */
static blk_status_t vol_writeout(struct vol_c *vc, const unsigned long *idx,
				 unsigned int n)
{
	struct vol_wait w = { .status = BLK_STS_OK };
	struct bio *bio = NULL;
	sector_t next = 0;
	struct blk_plug plug;
	unsigned int i, a, b;

	atomic_set(&w.pending, 1);
	init_completion(&w.done);
	blk_start_plug(&plug);
	for (i = 0; i < n; i++) {
		struct page *pg = xa_load(&vc->held, idx[i]);
		unsigned long mask = page_private(pg);

		for (a = 0; a < (1U << VOL_SPC_SHIFT); a = b) {
			sector_t s = ((sector_t)idx[i] << VOL_SPC_SHIFT) + a;
			unsigned int len;

			for (b = a + 1; b < (1U << VOL_SPC_SHIFT) &&
			     !(mask & BIT(b)) == !(mask & BIT(a)); b++)
				;
			if (!(mask & BIT(a)))
				continue;
			len = (b - a) << SECTOR_SHIFT;
			if (bio && (s != next ||
				    bio_add_page(bio, pg, len,
						 a << SECTOR_SHIFT) != len)) {
				vol_submit(&w, bio);
				bio = NULL;
			}
			if (!bio) {
				bio = bio_alloc_bioset(vc->dev->bdev,
						       BIO_MAX_VECS,
						       REQ_OP_WRITE | REQ_SYNC,
						       GFP_NOIO, &vc->bs);
				bio->bi_iter.bi_sector = s;
				bio->bi_end_io = vol_wait_endio;
				bio->bi_private = &w;
				__bio_add_page(bio, pg, len, a << SECTOR_SHIFT);
			}
			next = s + (b - a);
		}
	}
	if (bio)
		vol_submit(&w, bio);
	blk_finish_plug(&plug);
	if (!atomic_dec_and_test(&w.pending))
		wait_for_completion_io(&w.done);
	if (w.status)
		return w.status;

	for (i = 0; i < n; i++) {
		__free_page(xa_erase(&vc->held, idx[i]));
		atomic_long_dec(&vc->nr_held);
	}
	return BLK_STS_OK;
}

static blk_status_t vol_writeout_all(struct vol_c *vc)
{
	unsigned long idx;
	unsigned int n = 0;
	blk_status_t st;
	struct page *pg;

	xa_for_each(&vc->held, idx, pg) {
		vc->batch[n++] = idx;
		if (n < VOL_BATCH)
			continue;
		st = vol_writeout(vc, vc->batch, n);
		if (st)
			return st;
		n = 0;
		cond_resched();
	}
	return n ? vol_writeout(vc, vc->batch, n) : BLK_STS_OK;
}

/* Like a disk cache on its own: write one held chunk, picked at random. */
static void vol_writeout_early(struct vol_c *vc)
{
	u32 chunks = min_t(sector_t, vol_chunk(vc->ti->len) + 1, U32_MAX);
	unsigned long idx = get_random_u32_below(chunks);

	if (!xa_find(&vc->held, &idx, ULONG_MAX, XA_PRESENT)) {
		idx = 0;
		if (!xa_find(&vc->held, &idx, ULONG_MAX, XA_PRESENT))
			return;
	}
	if (!vol_writeout(vc, &idx, 1))
		atomic64_inc(&vc->early_chunks);
}

static blk_status_t vol_flush(struct vol_c *vc)
{
	blk_status_t st = vol_writeout_all(vc);

	atomic64_inc(&vc->flushes);
	if (st)
		return st;
	return errno_to_blk_status(blkdev_issue_flush(vc->dev->bdev));
}

/* ---- reads and writes ------------------------------------------------ */

/* Send @bio to @dev as it is (a clone) and wait for it. */
static blk_status_t vol_pass_down(struct vol_c *vc, struct bio *bio)
{
	struct bio *clone;
	blk_status_t st;

	clone = bio_alloc_clone(vc->dev->bdev, bio, GFP_NOIO, &vc->bs);
	clone->bi_iter.bi_sector = vol_sector(vc, bio);
	submit_bio_wait(clone);
	st = clone->bi_status;
	bio_put(clone);
	return st;
}

/*
 * Walk the data of @bio chunk by chunk: @fn gets the chunk's page (NULL
 * if not held), the byte offset in the chunk, the bio's data and a length
 * that stays inside one chunk.
 */
static void vol_walk(struct vol_c *vc, struct bio *bio,
		     void (*fn)(struct page *pg, unsigned int off, u8 *data,
				unsigned int len))
{
	u64 pos = (u64)vol_sector(vc, bio) << SECTOR_SHIFT;
	struct bvec_iter iter;
	struct bio_vec bv;

	bio_for_each_segment(bv, bio, iter) {
		u8 *data = bvec_kmap_local(&bv);
		unsigned int done = 0;

		while (done < bv.bv_len) {
			unsigned int off = pos & (VOL_CHUNK_SIZE - 1);
			unsigned int len = min_t(unsigned int, bv.bv_len - done,
						 VOL_CHUNK_SIZE - off);

			fn(xa_load(&vc->held, pos >> VOL_CHUNK_SHIFT), off,
			   data + done, len);
			done += len;
			pos += len;
		}
		kunmap_local(data);
	}
}

static void vol_copy_in(struct page *pg, unsigned int off, u8 *data,
			unsigned int len)
{
	memcpy(page_address(pg) + off, data, len);
	set_page_private(pg, page_private(pg) | vol_mask(off, len));
}

/* Overlay the held sectors on data read from @dev. */
static void vol_copy_out(struct page *pg, unsigned int off, u8 *data,
			 unsigned int len)
{
	unsigned int end = off + len, n;

	for (; pg && off < end; off += n, data += n) {
		n = min(end, round_up(off + 1, SECTOR_SIZE)) - off;
		if (page_private(pg) & BIT(off >> SECTOR_SHIFT))
			memcpy(data, page_address(pg) + off, n);
	}
}

/* The sectors written through to @dev are no longer held. */
static void vol_forget(struct page *pg, unsigned int off, u8 *data,
		       unsigned int len)
{
	if (pg)
		set_page_private(pg, page_private(pg) & ~vol_mask(off, len));
}

static blk_status_t vol_read(struct vol_c *vc, struct bio *bio)
{
	blk_status_t st = vol_pass_down(vc, bio);

	if (!st)
		vol_walk(vc, bio, vol_copy_out);
	return st;
}

static blk_status_t vol_write_through(struct vol_c *vc, struct bio *bio)
{
	blk_status_t st = vol_pass_down(vc, bio);

	if (!st)
		vol_walk(vc, bio, vol_forget);
	return st;
}

/* Make sure every chunk of @bio's range is held (an empty page if new). */
static int vol_hold_range(struct vol_c *vc, struct bio *bio)
{
	sector_t s = vol_sector(vc, bio);
	unsigned long idx, last = vol_chunk(s + bio_sectors(bio) - 1);
	struct page *pg;

	for (idx = vol_chunk(s); idx <= last; idx++) {
		if (xa_load(&vc->held, idx))
			continue;
		pg = alloc_page(GFP_NOIO | __GFP_NOWARN);
		if (!pg)
			return -ENOMEM;
		set_page_private(pg, 0);
		if (xa_is_err(xa_store(&vc->held, idx, pg, GFP_NOIO))) {
			__free_page(pg);
			return -ENOMEM;
		}
		atomic_long_inc(&vc->nr_held);
	}
	return 0;
}

static blk_status_t vol_write_cached(struct vol_c *vc, struct bio *bio)
{
	unsigned long need = vol_chunk(bio_sectors(bio) - 1) + 2;
	blk_status_t st;

	atomic64_inc(&vc->writes);
	if (atomic_long_read(&vc->nr_held) + need > vc->max_held) {
		atomic64_inc(&vc->full_writeouts);
		st = vol_writeout_all(vc);
		if (st)
			return st;
	}
	if (vol_hold_range(vc, bio))
		return vol_write_through(vc, bio);	/* no memory: a disk may do that */
	vol_walk(vc, bio, vol_copy_in);

	if (vc->early_every && ++vc->since_early >= vc->early_every) {
		vc->since_early = 0;
		vol_writeout_early(vc);
	}
	return BLK_STS_OK;
}

static void vol_handle(struct vol_c *vc, struct bio *bio)
{
	blk_status_t st = BLK_STS_OK;

	if (bio->bi_opf & REQ_PREFLUSH)
		st = vol_flush(vc);
	if (!st && bio_sectors(bio)) {
		if (bio_op(bio) == REQ_OP_READ) {
			st = vol_read(vc, bio);
		} else if (bio_op(bio) != REQ_OP_WRITE) {
			st = BLK_STS_NOTSUPP;
		} else if (bio->bi_opf & REQ_FUA) {
			atomic64_inc(&vc->fua_writes);
			st = vol_write_through(vc, bio);
		} else {
			st = vol_write_cached(vc, bio);
		}
	}
	bio->bi_status = st;
	bio_endio(bio);
}

static void vol_work(struct work_struct *work)
{
	struct vol_c *vc = container_of(work, struct vol_c, work);
	struct bio_list list;
	struct bio *bio;

	spin_lock_irq(&vc->lock);
	list = vc->queued;
	bio_list_init(&vc->queued);
	spin_unlock_irq(&vc->lock);

	while ((bio = bio_list_pop(&list))) {
		vol_handle(vc, bio);
		cond_resched();
	}
}

static int vol_map(struct dm_target *ti, struct bio *bio)
{
	struct vol_c *vc = ti->private;
	unsigned long flags;

	if (bio_op(bio) == REQ_OP_READ && !vol_any_held(vc, bio)) {
		bio_set_dev(bio, vc->dev->bdev);
		bio->bi_iter.bi_sector = vol_sector(vc, bio);
		return DM_MAPIO_REMAPPED;
	}
	spin_lock_irqsave(&vc->lock, flags);
	bio_list_add(&vc->queued, bio);
	spin_unlock_irqrestore(&vc->lock, flags);
	queue_work(vc->wq, &vc->work);
	return DM_MAPIO_SUBMITTED;
}

/* ---- table ------------------------------------------------------------ */

static void vol_free(struct vol_c *vc)
{
	unsigned long idx;
	struct page *pg;

	xa_for_each(&vc->held, idx, pg)
		__free_page(pg);
	xa_destroy(&vc->held);
	if (vc->wq)
		destroy_workqueue(vc->wq);
	bioset_exit(&vc->bs);
	if (vc->dev)
		dm_put_device(vc->ti, vc->dev);
	kfree(vc);
}

static int vol_ctr(struct dm_target *ti, unsigned int argc, char **argv)
{
	unsigned int cache_kib, early;
	struct vol_c *vc;
	char dummy;
	int r;

	if (argc != 3 || sscanf(argv[1], "%u%c", &cache_kib, &dummy) != 1 ||
	    sscanf(argv[2], "%u%c", &early, &dummy) != 1) {
		ti->error = "Expected: <dev> <cache_kib> <early_every>";
		return -EINVAL;
	}
	if (cache_kib < 1024) {
		ti->error = "cache_kib must be at least 1024";
		return -EINVAL;
	}
	vc = kzalloc(sizeof(*vc), GFP_KERNEL);
	if (!vc) {
		ti->error = "Cannot allocate context";
		return -ENOMEM;
	}
	vc->ti = ti;
	vc->max_held = cache_kib >> (PAGE_SHIFT - 10);
	vc->early_every = early;
	xa_init(&vc->held);
	spin_lock_init(&vc->lock);
	bio_list_init(&vc->queued);
	INIT_WORK(&vc->work, vol_work);

	r = dm_get_device(ti, argv[0], dm_table_get_mode(ti->table), &vc->dev);
	if (r) {
		ti->error = "Device lookup failed";
		goto bad;
	}
	r = bioset_init(&vc->bs, BIO_POOL_SIZE, 0, BIOSET_NEED_BVECS);
	if (r) {
		ti->error = "Cannot allocate bioset";
		goto bad;
	}
	vc->wq = alloc_ordered_workqueue("dm-volatile", WQ_MEM_RECLAIM);
	if (!vc->wq) {
		ti->error = "Cannot allocate workqueue";
		r = -ENOMEM;
		goto bad;
	}
	ti->private = vc;
	ti->num_flush_bios = 1;
	ti->flush_supported = true;
	return 0;
bad:
	vol_free(vc);
	return r;
}

/* Removal is an orderly stop: what is held goes to the device. */
static void vol_dtr(struct dm_target *ti)
{
	struct vol_c *vc = ti->private;

	flush_workqueue(vc->wq);
	if (vol_writeout_all(vc))
		DMERR("%s: write-out on removal failed: held data dropped",
		      vc->dev->name);
	vol_free(vc);
}

static void vol_status(struct dm_target *ti, status_type_t type,
		       unsigned int status_flags, char *result,
		       unsigned int maxlen)
{
	struct vol_c *vc = ti->private;
	unsigned int sz = 0;

	switch (type) {
	case STATUSTYPE_INFO:
		DMEMIT("%ld %lld %lld %lld %lld %lld",
		       atomic_long_read(&vc->nr_held),
		       atomic64_read(&vc->writes),
		       atomic64_read(&vc->fua_writes),
		       atomic64_read(&vc->flushes),
		       atomic64_read(&vc->early_chunks),
		       atomic64_read(&vc->full_writeouts));
		break;
	case STATUSTYPE_TABLE:
		DMEMIT("%s %lu %u", vc->dev->name,
		       vc->max_held << (PAGE_SHIFT - 10), vc->early_every);
		break;
	case STATUSTYPE_IMA:
		*result = '\0';
		break;
	}
}

static int vol_iterate_devices(struct dm_target *ti,
			       iterate_devices_callout_fn fn, void *data)
{
	struct vol_c *vc = ti->private;

	return fn(ti, vc->dev, 0, ti->len, data);
}

static struct target_type vol_target = {
	.name = "volatile",
	.version = {1, 0, 0},
	.module = THIS_MODULE,
	.ctr = vol_ctr,
	.dtr = vol_dtr,
	.map = vol_map,
	.status = vol_status,
	.iterate_devices = vol_iterate_devices,
};

static int __init dm_volatile_init(void)
{
	return dm_register_target(&vol_target);
}

static void __exit dm_volatile_exit(void)
{
	dm_unregister_target(&vol_target);
}

module_init(dm_volatile_init);
module_exit(dm_volatile_exit);

MODULE_DESCRIPTION("device-mapper test target: a disk with a volatile write cache");
MODULE_LICENSE("GPL");
