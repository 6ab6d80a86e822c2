/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache: write-back cache on pfn-only persistent memory.
 * Shared declarations of the kernel module (not of the metadata code).
 */
#ifndef DM_PMEMCACHE_H
#define DM_PMEMCACHE_H

#include <linux/device-mapper.h>
#include <linux/bio.h>
#include <linux/badblocks.h>
#include <linux/blkdev.h>
#include <linux/dax.h>
#include <linux/pfn_t.h>
#include <linux/mempool.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "pmc_meta.h"
#include "pmc_mirror.h"
#include "pmc_table.h"

#define DM_MSG_PREFIX "pmemcache"

#define PMC_NR_STRIPES		256
#define PMC_DEF_HIGH_WM		50
#define PMC_DEF_LOW_WM		45
#define PMC_DEF_WB_JOBS		1024
#define PMC_MAX_WB_BATCH	256
#define PMC_WB_PASS		1024	/* blocks selected per pass, at most */
#define PMC_WB_REFUSED_MS	20	/* all candidates refused: look again */
#define PMC_WB_NOMEM_DELAY	(HZ / 10)	/* no memory for a writeback bio */
#define PMC_DEF_FULL_WAIT_MS	100
#define PMC_CLEANER_WAIT_MS	5000	/* cleaner: for a block's writeback */
#define PMC_THROUGH_POOL	16	/* writes through the cache, reserved */
#define PMC_STRIPE_AUTO		(~0U)	/* stripe_blocks from the origin */
#define PMC_SHUTDOWN_WAIT	(10 * HZ)	/* for writeback at reboot */

/* Conditions that raise a dm event when they begin or end (health.c). */
enum pmc_health_bit {
	PMC_H_ORIGIN,
	PMC_H_MEDIA,
	PMC_H_FULL,
	PMC_H_PMEM_GONE,
	PMC_H_MIRROR_DEGRADED,
	PMC_H_MIRROR_RESYNC,
	PMC_H_NR
};

/*
 * Free slots that a CPU took from the shared free list (pc->free_lock) in
 * one go: most writes take their slot from memory of their own CPU, and
 * the shared list's lock and cache line are touched once per batch.  The
 * lock is its CPU's but for a drain by another, once the shared list ran
 * dry (pmc_drain_free_caches()).
 */
#define PMC_FREE_BATCH		16

struct pmc_free_cache {
	spinlock_t lock;	/* n, slot */
	u32 n;
	u32 slot[PMC_FREE_BATCH];
};

/* Index stripe: serialises a set of hash chains and their slots. */
struct pmc_stripe {
	struct rw_semaphore lock;
	atomic_t around;	/* origin writes going around the cache */
	atomic_t through;	/* writes through the cache in flight here */
} ____cacheline_aligned_in_smp;

struct pmc_stats {
	atomic64_t read_hits;
	atomic64_t read_partial;
	atomic64_t read_misses;
	atomic64_t write_hits;
	atomic64_t write_new;
	atomic64_t write_around;
	atomic64_t discards;
	atomic64_t flushes;
	atomic64_t wb_pfn_blocks;
	atomic64_t wb_pfn_bytes;
	atomic64_t wb_bounce_blocks;
	atomic64_t wb_bounce_bytes;
	atomic64_t wb_errors;
	atomic64_t wb_notsupp;
	atomic64_t media_errors;
	atomic64_t wb_full_stripes;	/* whole parity stripes written */
	atomic64_t wb_flushes;		/* origin flushes before CLEAN */
	atomic64_t full_waits;		/* writes that waited for a slot */
	atomic64_t full_around;		/* ... and then went around */
	atomic64_t full_through;	/* ... or replaced a cached copy through the origin */
	atomic64_t full_timeouts;	/* ... after waiting all of full_wait */
	atomic64_t mirror_reads;	/* media error on one half, read from the other */
	atomic64_t crc_errors;		/* data that did not match its record's crc */
};

/* Writeback rate controller state (wb_rate.c). */
struct pmc_rate {
	u64 rate;		/* blocks per second; 0 = unlimited */
	s64 integral;		/* sum of excess dirty blocks x jiffies */
	s64 tokens;		/* block-jiffies we may still submit */
	unsigned long stamp;	/* jiffies of the last update */
	unsigned long last_fg;	/* jiffies of the last foreground bio */
};

/* One pmem device of a cache (a mirrored cache has two). */
struct pmc_claim_cache {
	unsigned long pfn_first, pfn_end;
	struct gendisk *disk;
	sector_t first, end;
};

/* What one target owns (claim.c): its pmem, and its origin's sectors. */
struct pmc_claim {
	struct list_head list;	/* on the list of every target's claim */
	struct mapped_device *md;
	struct dm_table *table;
	struct pmc_claim_cache cache[2];
	unsigned int n_cache;	/* 2: mirrored */
	struct gendisk *origin_disk;
	sector_t origin_first, origin_end;
};

/* Blocks a mirror remembers to heal at a time (more are asked again). */
#define PMC_HEAL_MAX	256

/* The second pmem device of a mirrored cache, mapped (pmem.c). */
struct pmc_mirror_dev {
	bool on;		/* the table has "mirror" (dev may be "-") */
	bool degraded_ok;	/* "degraded": the administrator's override */
	struct dm_dev *dev;	/* NULL: not mirrored, or the half is "-" */
	struct dax_device *dax;
	bool dax_owned;
	u8 *kaddr;		/* its byte 0 */
	pfn_t pfn;
	u64 bytes;		/* its size, whole pages */
	struct pmc_mirror_half h[2];	/* 0: pmem_dev, 1: dev (mirror.c) */
	struct pmc_mirror_plan plan;
	spinlock_t lose_lock;	/* pmc_mirror_lose(), and R3..R5 of a copy */
	/* blocks whose copy on the half reads use is bad, to heal */
	spinlock_t heal_lock;
	unsigned int n_heal;
	u32 heal_slot[PMC_HEAL_MAX];
	u64 heal_v[PMC_HEAL_MAX];	/* the slot word when read */
	struct work_struct heal_work;
	/* halves reads, badblocks checks and writeback use: bit i, half i */
	unsigned int reads;
	pfn_t pfn0;		/* pfn of half 0's byte 0 */
	/* online resync (mirror.c): copying half @holder to the other */
	bool syncing;
	u32 holder;
	u64 resync_next;	/* the next slot to copy */
	unsigned long resync_t0;
	unsigned int resync_rate;	/* MiB/s, 0: no limit (a tunable) */
	unsigned long rate_t0;		/* jiffies: rate_bytes count from here */
	u64 rate_bytes;
	u8 *resync_buf;
	struct delayed_work resync_work;
};

struct pmemcache {
	struct dm_target *ti;
	struct list_head live;	/* on the list the reboot notifier walks */
	struct dm_dev *origin;
	struct dm_dev *pmem_dev;

	/* pmem.c */
	struct dax_device *dax;
	bool dax_owned;
	u8 *kaddr;		/* namespace byte 0, ioremap'ed, no struct page */
	pfn_t pfn;		/* pfn of namespace byte 0 */
	u64 pmem_bytes;		/* mirrored: the smaller half's */
	struct pmc_mirror_dev mirror;

	struct pmc_meta meta;
	struct pmc_index idx;
	struct pmc_stripe *stripes;

	spinlock_t free_lock;		/* idx free list, idx.n_free */
	struct pmc_free_cache __percpu *free_cache;	/* more free slots */
	wait_queue_head_t free_wait;
	struct mutex evict_lock;	/* one evictor at a time, evict_hand */
	u32 evict_hand;

	/* table */
	u32 block_size;
	u32 spb_shift;		/* log2(sectors per block) */
	unsigned int high_wm, low_wm;
	unsigned int wb_jobs;
	unsigned int max_age_ms;
	unsigned int stripe_cfg;	/* stripe_blocks feature or AUTO */
	unsigned int full_wait_ms;	/* cache full: wait, then go around */
	unsigned int seq_bypass_kb;	/* 0: off */
	enum pmc_route route;
	bool flush_on_suspend;
	bool cleaner;
	bool format;		/* one-shot: not shown in the table */
	bool data_crc;		/* the table asks for PMC_FEATURE_DATA_CRC */
	bool need_format;	/* blank namespace or 'format': at first resume */
	bool loaded;		/* index rebuilt (first resume done) */
	struct pmc_claim claim;
	unsigned long tunables_set;	/* features given: shown in the table */

	/* state */
	sector_t seq_next;	/* where the current sequential run continues */
	u64 seq_run;		/* its length in sectors */
	atomic64_t n_dirty;
	atomic64_t epoch_dirty[4];
	atomic_t epoch;
	atomic64_t bad_slots;	/* out of use: pmem on the badblocks list */

	/* writeback.c */
	struct workqueue_struct *wq;
	struct delayed_work wb_work;
	struct work_struct endio_work;
	struct delayed_work age_work;
	spinlock_t endio_lock;		/* endio_list */
	struct list_head endio_list;
	atomic_t wb_inflight;	/* blocks */
	atomic_t wb_done;	/* completion passes: wakes starved writers */
	atomic_t wb_failures;	/* as wb_errors, but clear_stats leaves it */
	unsigned long wb_retry_at;	/* jiffies: after an error, no pass before */
	wait_queue_head_t wb_wait;
	u32 stripe_blocks;	/* 0, 1: origin order, >1: whole stripes first */
	struct pmc_wb_cand *wb_cand;	/* PMC_WB_PASS, one pass's picks */
	struct pmc_rate rc;
	atomic_t flushers;	/* flush messages waiting for writeback */
	bool age_pending;
	bool wb_paced;		/* the worker waits out a rate-mode pause */
	bool starved;
	bool suspended;
	bool shutting_down;	/* the system goes down: no writeback */
	bool pfn_capable;	/* bdev_pfn(origin) at the last ctr/resume */
	bool pfn_failed;	/* a pfn bio completed with BLK_STS_NOTSUPP */
	struct bio_set wb_bioset;
	struct bio_set read_bioset;
	mempool_t *page_pool;

	/* io.c: writes through the cache between T1 and T2 */
	spinlock_t through_lock;	/* through_busy */
	struct list_head through_busy;
	wait_queue_head_t through_wait;
	mempool_t *through_pool;

	struct pmc_stats st;
	unsigned long health;	/* BIT(enum pmc_health_bit) */
	unsigned long health_told;	/* as the kernel log last told it */
	int origin_err;		/* of the write that set PMC_H_ORIGIN */
	struct work_struct event_work;
};

static inline u64 pmc_sector_to_block(struct pmemcache *pc, sector_t s)
{
	return s >> pc->spb_shift;
}

/* Per-bio data of the target (ti->per_io_data_size). */
struct pmc_bio_data {
	struct pmc_stripe *around;	/* a write of ours to the origin: its stripe */
	bool discard_held;		/* a discard passed down holds these off: */
	DECLARE_BITMAP(discard_stripes, PMC_NR_STRIPES);
	/* a partly cached read (io.c): the origin runs still to read */
	struct pmemcache *pc;
	struct work_struct work;
	u32 first;			/* first sector of the bio in its block */
	u32 missing;			/* sectors of the block still to read */
};

static inline struct pmc_bio_data *pmc_bio_data(struct bio *bio)
{
	return dm_per_bio_data(bio, sizeof(struct pmc_bio_data));
}

static inline struct pmc_stripe **pmc_bio_around(struct bio *bio)
{
	return &pmc_bio_data(bio)->around;
}

static inline struct pmc_stripe *pmc_stripe_of(struct pmemcache *pc,
					       u64 oblock)
{
	return &pc->stripes[pmc_index_bucket(&pc->idx, oblock) &
			    (PMC_NR_STRIPES - 1)];
}

/*
 * An origin write counted in @st->around is over.  A shutdown waits for
 * the counts to drain (pmc_writeback_shutdown()): wake it.  Count before
 * flag, as the shutdown sets the flag before it reads the counts: it sees
 * this count, or this put sees its flag.
 */
static inline void pmc_around_put(struct pmemcache *pc, struct pmc_stripe *st)
{
	atomic_dec(&st->around);
	smp_mb__after_atomic();	/* count before flag */
	if (unlikely(READ_ONCE(pc->shutting_down)))
		wake_up_all(&pc->wb_wait);
}

/*
 * max_age: a dirty block carries the epoch (one of four, max_age/2 long)
 * it was written in.  It is old enough once two epochs began after its
 * own: the current epoch and the one before are too young, so no block
 * is written back less than max_age/2 after it was dirtied.
 */
static inline bool pmc_epoch_aged(struct pmemcache *pc, u32 e)
{
	u32 cur = atomic_read(&pc->epoch) & 3;

	return e != cur && e != ((cur - 1) & 3);
}

/*
 * A dirty block became clean or was dropped.  A flush waits for the count
 * to reach 0: wake it, whoever got there (writeback, a discard, a write
 * through the cache).
 */
static inline void pmc_dirty_dec(struct pmemcache *pc, u64 v)
{
	atomic64_dec(&pc->epoch_dirty[pmc_slot_epoch(v)]);
	if (atomic64_dec_and_test(&pc->n_dirty) && atomic_read(&pc->flushers))
		wake_up_all(&pc->wb_wait);
}

/* claim.c */
int pmc_claim(struct pmemcache *pc, char **error);
void pmc_unclaim(struct pmemcache *pc);

/* pmem.c */
int pmc_pmem_claim(struct pmemcache *pc, char **error);
int pmc_mirror_claim(struct pmemcache *pc, char **error);
bool pmc_half_range_bad(struct pmemcache *pc, unsigned int h, u64 byte_off,
			u32 len);
const u8 *pmc_mirror_other_copy(struct pmemcache *pc, unsigned int h,
				u64 byte_off, u32 len);
void pmc_count_mirror_read(struct pmemcache *pc, u32 slot);
void pmc_mirror_heal_later(struct pmemcache *pc, u32 slot);	/* mirror.c */
int pmc_mirror_heal(struct pmemcache *pc, u32 slot, u64 v, u8 *buf);

/* scrub.c: the "scrub" message; its counts go to @result */
int pmc_scrub(struct pmemcache *pc, char *result, unsigned int maxlen);
int pmc_read_block(struct pmemcache *pc, void *dst, u32 slot);
void pmc_pmem_release(struct pmemcache *pc);
int pmc_pmem_enter(struct pmemcache *pc);
void pmc_pmem_exit(int id);
bool pmc_pmem_gone(struct pmemcache *pc);
int pmc_origin_identity(struct pmemcache *pc, struct pmc_origin_id *oid);
int pmc_copy_from_pmem(void *dst, const void *src, size_t len);
bool pmc_pmem_range_bad(struct pmemcache *pc, u64 byte_off, u32 len);

/* May @d have bad pmem at all?  Its badblocks list is not empty. */
static inline bool pmc_dev_may_be_bad(struct dm_dev *d)
{
	struct badblocks *bb = d->bdev->bd_disk->bb;

	return bb && READ_ONCE(bb->count);
}

/*
 * May a half the cache runs on have bad pmem?  Only live halves: a half
 * lost while running may be unbound, its disk's badblocks list freed
 * with it.  Inside a pmc_pmem_enter() section.
 */
static inline bool pmc_live_may_be_bad(struct pmemcache *pc)
{
	unsigned int live = READ_ONCE(pc->meta.live);

	return ((live & 1) && pmc_dev_may_be_bad(pc->pmem_dev)) ||
	       ((live & 2) && pmc_dev_may_be_bad(pc->mirror.dev));
}

/* pmc_half_range_bad() without a call while half @h has no bad pmem. */
static inline bool pmc_half_bad(struct pmemcache *pc, unsigned int h,
				u64 byte_off, u32 len)
{
	return pmc_dev_may_be_bad(h ? pc->mirror.dev : pc->pmem_dev) &&
	       pmc_half_range_bad(pc, h, byte_off, len);
}

/* Do this cache's records carry data crcs (or will, once formatted)? */
static inline bool pmc_data_crc_on(const struct pmemcache *pc)
{
	return pc->data_crc || pc->meta.data_crc;
}

/* PMC_FEATURE_* a format of this table gives the cache. */
static inline u64 pmc_format_features(const struct pmemcache *pc)
{
	return pc->data_crc ? PMC_FEATURE_DATA_CRC : 0;
}

bool pmc_data_crc_good(struct pmemcache *pc, const u8 *base, u32 slot,
		       bool count);

/* With data_crc: does @slot's data on the half at @base match its crc? */
static inline bool pmc_data_ok(struct pmemcache *pc, const u8 *base,
			       u32 slot, bool count)
{
	return !pc->meta.data_crc || pmc_data_crc_good(pc, base, slot, count);
}

/* Byte 0 of half @h: meta.base is the survivor's once a half was lost. */
static inline const u8 *pmc_half_base(struct pmemcache *pc, unsigned int h)
{
	return h ? pc->meta.half[1] : pc->meta.base;
}

/*
 * Read bytes [@at, @at + @len) of cache block @slot's data with @copy
 * (given byte 0 of a half: 0 or -EIO).  With both halves of a mirror
 * live, odd slots are read from the second, so that two NVDIMMs share
 * the reads; else from the half the cache runs on.  A range on that
 * half's badblocks list is not read at all; after a media error there,
 * the other half's copy is read: then, if @count, counted and the block
 * queued to heal, as is a block read well whose other copy is on the
 * badblocks list (a copy nothing reads would be found bad only once the
 * good one is lost).  With data_crc, a copy whose data does not match its
 * record's crc is bad as well.  0 or -EIO.  Always inlined: @copy is a
 * direct call.
 */
static __always_inline int pmc_read_either_half(struct pmemcache *pc, u32 slot,
						u64 at, u32 len, bool count,
						int (*copy)(void *ctx, const u8 *half),
						void *ctx)
{
	unsigned int live = READ_ONCE(pc->mirror.reads);
	unsigned int h = live == 3 ? slot & 1 : live == 2;
	const u8 *base = pmc_half_base(pc, h), *other;

	if (!pmc_half_bad(pc, h, at, len) && !copy(ctx, base) &&
	    pmc_data_ok(pc, base, slot, count)) {
		if (live == 3 && count && pmc_half_bad(pc, h ^ 1, at, len))
			pmc_mirror_heal_later(pc, slot);
		return 0;
	}
	other = pmc_mirror_other_copy(pc, h, at, len);
	if (!other || copy(ctx, other) || !pmc_data_ok(pc, other, slot, count))
		return -EIO;
	if (count)
		pmc_count_mirror_read(pc, slot);
	return 0;
}

/* pfnio.c: everything that needs the pfn I/O core patches */
bool pmc_pfn_io_available(void);
struct dax_device *pmc_dax_get(struct block_device *bdev, u64 *start_off,
			       bool *owned);
bool pmc_origin_takes_pfn(struct pmemcache *pc);
int pmc_bio_add_pmem(struct pmemcache *pc, struct bio *bio, u32 slot,
		     u32 offset, u32 len);

/* index helpers (io.c) */
u32 pmc_alloc_slot(struct pmemcache *pc, unsigned int wait_ms);
u32 pmc_alloc_slot_slow(struct pmemcache *pc, bool wait);
u32 pmc_refill_slot(struct pmemcache *pc);
u64 pmc_free_count(struct pmemcache *pc);
bool pmc_through_listed(struct pmemcache *pc, u64 oblock);

/*
 * A free slot from this CPU's cache, or a batch from the shared list
 * (pmc_refill_slot()); PMC_NO_SLOT: then pmc_alloc_slot_slow(), which
 * also takes the slots while a pmem device has a badblocks list, to
 * check each (pmc_pop_usable()).
 */
static inline u32 pmc_take_slot(struct pmemcache *pc)
{
	struct pmc_free_cache *c;
	u32 s = PMC_NO_SLOT;

	if (unlikely(pmc_live_may_be_bad(pc)))
		return PMC_NO_SLOT;
	c = get_cpu_ptr(pc->free_cache);
	spin_lock(&c->lock);
	if (likely(c->n))
		s = c->slot[--c->n];
	spin_unlock(&c->lock);
	put_cpu_ptr(pc->free_cache);
	return s != PMC_NO_SLOT ? s : pmc_refill_slot(pc);
}

void pmc_free_slots(struct pmemcache *pc, const u32 *slots, unsigned int n);
unsigned int pmc_evict_clean(struct pmemcache *pc, unsigned int want);

/* io.c */
int pmc_map(struct dm_target *ti, struct bio *bio);
int pmc_end_io(struct dm_target *ti, struct bio *bio, blk_status_t *error);
int pmc_io_init(struct pmemcache *pc);
void pmc_io_exit(struct pmemcache *pc);

/* health.c */
void pmc_health_init(struct pmemcache *pc);
void pmc_health_exit(struct pmemcache *pc);
void pmc_health_set(struct pmemcache *pc, enum pmc_health_bit bit, int err);
void pmc_health_clear(struct pmemcache *pc, enum pmc_health_bit bit);
void pmc_health_emit(struct pmemcache *pc, char *result, unsigned int maxlen,
		     unsigned int *szp);

/* A pmem read hit poison (or a known bad range): count it, raise it. */
static inline void pmc_count_media_error(struct pmemcache *pc)
{
	atomic64_inc(&pc->st.media_errors);
	pmc_health_set(pc, PMC_H_MEDIA, -EIO);
}

/* writeback.c */
int pmc_writeback_init(struct pmemcache *pc);
void pmc_writeback_exit(struct pmemcache *pc);
void pmc_writeback_kick(struct pmemcache *pc);
void pmc_writeback_age_changed(struct pmemcache *pc);
void pmc_writeback_stop(struct pmemcache *pc);
void pmc_writeback_shutdown(struct pmemcache *pc);
void pmc_writeback_start(struct pmemcache *pc);
int pmc_writeback_all(struct pmemcache *pc);
void pmc_writeback_note_dirty(struct pmemcache *pc);

/* wb_select.c (PMC_SEL_PARTIAL, PMC_SEL_AGED: pmc_index.h) */
int pmc_select_init(struct pmemcache *pc);
void pmc_select_start(struct pmemcache *pc);
u32 pmc_origin_stripe_blocks(struct pmemcache *pc);
unsigned int pmc_wb_select(struct pmemcache *pc, struct pmc_wb_cand *out,
			   unsigned int want, unsigned int sel);

/* wb_rate.c */
void pmc_rate_init(struct pmemcache *pc);
u64 pmc_rate_target(struct pmemcache *pc);
u64 pmc_rate_update(struct pmemcache *pc);
unsigned int pmc_rate_allow(struct pmemcache *pc, unsigned int want,
			    unsigned long *delay);
void pmc_rate_charge(struct pmemcache *pc, unsigned int n);

static inline void pmc_note_foreground(struct pmemcache *pc)
{
	unsigned long now = jiffies;

	/* Written only when it changes: the line stays shared. */
	if (READ_ONCE(pc->rc.last_fg) != now)
		WRITE_ONCE(pc->rc.last_fg, now);
}

/* mirror.c */
int pmc_mirror_check(struct pmemcache *pc, u8 **base, char **error);
int pmc_mirror_refuse_half(struct pmemcache *pc, char **error);
int pmc_mirror_start(struct pmemcache *pc, const struct pmc_origin_id *oid);
bool pmc_mirror_lose(struct pmemcache *pc);
void pmc_mirror_init(struct pmemcache *pc);
void pmc_mirror_stop(struct pmemcache *pc);
void pmc_mirror_exit(struct pmemcache *pc);
void pmc_mirror_resync_kick(struct pmemcache *pc);

/* recovery.c */
int pmc_load_check(struct pmemcache *pc, char **error);
int pmc_load(struct pmemcache *pc);

/* The shared units' pmc_env_*() of every I/O, then those units' API. */
#include "pmc_env.h"
#include "pmc_io.h"

#endif /* DM_PMEMCACHE_H */
