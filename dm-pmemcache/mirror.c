// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: the start of a mirrored cache (table feature "mirror").
 *
 * The constructor reads both halves' mirror info and decides (never
 * writes: an old table may still run on the same pmem); the first resume
 * scrubs (S1), decides again and starts making the other half equal to
 * the half that holds every acknowledged write, under the resync marks
 * R1..R5 of docs/format.md ("Mirrored cache"): the records before
 * recovery, the data online while the cache runs.  From then on every
 * store goes to both halves (pmc_meta_store()).
 */
#include "pmemcache.h"
#include "pmc_write.h"
#include "pmc_resync.h"

/* Bytes copied at load between two looks at the scheduler. */
#define PMC_MIRROR_CHUNK	(64U << 10)

static void pmc_mirror_halves(struct pmemcache *pc)
{
	struct pmc_mirror_half *h = pc->mirror.h;

	memset(h, 0, sizeof(pc->mirror.h));
	h[0].base = pc->kaddr;
	h[1].base = pc->mirror.kaddr;
	h[0].present = true;
	h[1].present = !!pc->mirror.dev;	/* "-": the half is missing */
}

/*
 * Does @h hold anything but a blank device (or an interrupted format)?
 * A cache of another origin or size counts: only a blank device is ever
 * overwritten without 'format', as with one device.
 */
static bool pmc_mirror_holds_cache(struct pmemcache *pc,
				   const struct pmc_mirror_half *h,
				   const struct pmc_origin_id *oid)
{
	struct pmc_meta m;
	const char *why;

	return pmc_meta_open(&m, h->base, pc->pmem_bytes, pc->block_size,
			     oid, &why) != -ENODATA;
}

/*
 * Read both halves' info (after S1 if @scrub) and decide.  0 with
 * pc->mirror.plan set, or -EINVAL/-EIO with @error set.
 */
static int pmc_mirror_read(struct pmemcache *pc, bool scrub, char **error)
{
	struct pmc_mirror_half *h = pc->mirror.h;
	struct pmc_mirror_plan *plan = &pc->mirror.plan;
	struct pmc_origin_id oid;
	unsigned int i;
	int r;

	pmc_origin_identity(pc, &oid);
	pmc_mirror_halves(pc);
	for (i = 0; i < 2; i++) {
		if (!h[i].present)
			continue;
		r = scrub ? pmc_mirror_scrub(&h[i]) : pmc_mirror_load(&h[i]);
		if (r == -EIO) {
			*error = "mirror: media error reading a half's mirror info";
			return -EIO;
		}
		h[i].holds_cache = pmc_mirror_holds_cache(pc, &h[i], &oid);
	}
	if (pc->format && !h[1].present) {
		*error = "mirror: format needs both halves";
		return -EINVAL;
	}
	if (pc->format) {
		/* the administrator's word: both halves are formatted anew */
		plan->action = PMC_MIRROR_RESYNC;
		plan->holder = 0;
		return 0;
	}
	pmc_mirror_decide(h, pc->mirror.degraded_ok, plan);
	switch (plan->action) {
	case PMC_MIRROR_REFUSE:
		*error = (char *)plan->why;
		return -EINVAL;
	default:
		return 0;
	}
}

/*
 * Constructor of a table without "mirror": refuse a half of a mirrored
 * cache.  Alone it may be the stale half (its partner ran on without it,
 * and nothing on this half can tell), and even a current half would take
 * writes as a single-device cache that its partner never sees and that
 * the next start of the pair copies away.  "mirror -" starts a half
 * alone knowingly (M1 first); "format" makes it a single-device cache.
 */
int pmc_mirror_refuse_half(struct pmemcache *pc, char **error)
{
	struct pmc_mirror_half h = { .base = pc->kaddr, .present = true };

	switch (pmc_mirror_load(&h)) {
	case -ENODATA:
		return 0;
	case -EIO:
		*error = "mirror: media error reading the mirror info";
		return -EIO;
	default:
		*error = "mirror: a half of a mirrored cache: give its other half or mirror -";
		return -EINVAL;
	}
}

/* Constructor: which half to open the cache from (pmc_load_check()). */
int pmc_mirror_check(struct pmemcache *pc, u8 **base, char **error)
{
	int r = pmc_mirror_read(pc, false, error);

	if (r)
		return r;
	*base = pc->mirror.h[pc->mirror.plan.holder].base;
	return 0;
}

/* After R4, R5: reads from both halves again.  Under lose_lock. */
static void pmc_mirror_resync_done(struct pmemcache *pc)
{
	struct pmc_mirror_dev *mr = &pc->mirror;

	WRITE_ONCE(pc->meta.base, pc->kaddr);
	WRITE_ONCE(pc->pfn, mr->pfn0);
	WRITE_ONCE(mr->reads, 3);
	WRITE_ONCE(mr->syncing, false);
}

/*
 * The online part: both halves take every store, reads and writeback
 * use the holder alone, and this copies the data of each live slot from
 * the resync position on (pmc_resync_slot()), a batch per run, with an
 * R3 mark now and then and R4, R5 at the end (pmc_resync_batch_end()).
 * Slots looked at by one run (1 MiB of 4 KiB blocks):
 */
#define PMC_RESYNC_BATCH	256U

static void pmc_mirror_resync_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(to_delayed_work(work),
					    struct pmemcache,
					    mirror.resync_work);
	struct pmc_mirror_dev *mr = &pc->mirror;
	u64 n = pc->meta.n_blocks, slot = mr->resync_next;
	u64 end = min(n, slot + PMC_RESYNC_BATCH);
	unsigned int rate = READ_ONCE(mr->resync_rate);
	unsigned long flags, delay = 0;
	bool done = false;
	int id, r = 0;

	if (READ_ONCE(pc->suspended) || !READ_ONCE(mr->syncing))
		return;
	id = pmc_pmem_enter(pc);
	if (id < 0)
		return;
	for (; slot < end && READ_ONCE(mr->syncing) && r >= 0; slot++) {
		r = pmc_resync_slot(pc, &pc->meta, &pc->idx,
				    mr->h[mr->holder].base,
				    mr->h[mr->holder ^ 1].base, slot,
				    mr->resync_buf);
		if (r > 0)
			mr->rate_bytes += r;
	}
	r = min(r, 0);
	spin_lock_irqsave(&mr->lose_lock, flags);
	if (!READ_ONCE(mr->syncing)) {
		r = 0;		/* a half was lost meanwhile: pmc_mirror_lose() */
	} else if (r) {
		/* the only whole copy has a hole: no redundancy to make */
		WRITE_ONCE(mr->syncing, false);
		pmc_meta_drop_half(&pc->meta, mr->holder ^ 1);
	} else {
		WRITE_ONCE(mr->resync_next, slot);
		done = pmc_resync_batch_end(&mr->h[mr->holder],
					    &mr->h[mr->holder ^ 1], slot, n,
					    PMC_RESYNC_MARK_SLOTS);
		if (done)
			pmc_mirror_resync_done(pc);
	}
	spin_unlock_irqrestore(&mr->lose_lock, flags);
	pmc_pmem_exit(id);

	if (r) {
		DMERR("%s: mirror: copy stopped: media error on cache slot %llu of the holder",
		      pc->pmem_dev->name, slot - 1);
		pmc_health_clear(pc, PMC_H_MIRROR_RESYNC);
		pmc_health_set(pc, PMC_H_MIRROR_DEGRADED, -EIO);
		return;
	}
	if (done) {
		DMINFO("%s: mirror: copy done in %u s: both halves current, generation %llu",
		       pc->pmem_dev->name,
		       jiffies_to_msecs(jiffies - mr->resync_t0) / 1000,
		       mr->h[0].info.generation);
		pmc_health_clear(pc, PMC_H_MIRROR_RESYNC);
		return;
	}
	if (!READ_ONCE(mr->syncing))
		return;
	/* resync_rate MiB/s: the next batch when the bytes copied so far are due */
	if (rate) {
		unsigned long due = mr->rate_t0 +
				    div_u64(mr->rate_bytes * HZ, (u64)rate << 20);

		if (time_after(due, jiffies))
			delay = due - jiffies;
	}
	queue_delayed_work(pc->wq, &mr->resync_work, delay);
}

/*
 * Start the online part of a copy from half @from at slot @pos: reads,
 * badblocks and the pfns of writeback move to the holder until R5; the
 * work begins at resume (pmc_mirror_resync_kick()).
 */
static int pmc_mirror_resync_prepare(struct pmemcache *pc, u32 from, u64 pos)
{
	struct pmc_mirror_dev *mr = &pc->mirror;

	if (!mr->resync_buf)
		mr->resync_buf = kmalloc(pc->block_size, GFP_KERNEL);
	if (!mr->resync_buf)
		return -ENOMEM;
	mr->holder = from;
	mr->resync_next = pos;
	mr->resync_t0 = jiffies;
	mr->reads = 1U << from;
	pc->meta.base = mr->h[from].base;
	if (from)
		pc->pfn = mr->pfn;
	mr->syncing = true;
	pmc_health_set(pc, PMC_H_MIRROR_RESYNC, 0);
	DMINFO("%s: mirror: copying the half on %s to %s online from block %llu of %llu",
	       pc->pmem_dev->name,
	       from ? mr->dev->name : pc->pmem_dev->name,
	       from ? pc->pmem_dev->name : mr->dev->name,
	       pos, pc->meta.n_blocks);
	return 0;
}

/*
 * Resume (a suspend stopped the copy where it was) or a new resync_rate:
 * copy on now.
 */
void pmc_mirror_resync_kick(struct pmemcache *pc)
{
	struct pmc_mirror_dev *mr = &pc->mirror;

	if (!READ_ONCE(mr->syncing) || READ_ONCE(pc->suspended))
		return;
	/* the rate counts from now (the work may run meanwhile: a hint) */
	WRITE_ONCE(mr->rate_t0, jiffies);
	WRITE_ONCE(mr->rate_bytes, 0);
	mod_delayed_work(pc->wq, &mr->resync_work, 0);
}

/*
 * First resume, before recovery: S1, decide again, format a new pair or
 * make the other half equal to the holder (R1..R5), then both halves
 * take every store.  pc->meta is open on the holder (or to be formatted).
 */
int pmc_mirror_start(struct pmemcache *pc, const struct pmc_origin_id *oid)
{
	struct pmc_mirror_half *h = pc->mirror.h;
	u32 from = pc->mirror.plan.holder;
	u64 n = pc->meta.n_blocks, pos = n;
	char *error = NULL;
	u8 *buf;
	int r;

	pc->mirror.pfn0 = pc->pfn;
	r = pmc_mirror_read(pc, true, &error);
	/*
	 * A table loaded while another one copied the halves: that copy may
	 * have ended since.  In sync, either half is the cache.
	 */
	if (!r && pc->mirror.plan.holder != from &&
	    pc->mirror.plan.action == PMC_MIRROR_BOTH) {
		from = pc->mirror.plan.holder;
		pc->meta.base = h[from].base;
	}
	if (!r && pc->mirror.plan.holder != from)
		error = "mirror: the halves changed since the table was loaded";
	if (error) {
		DMERR("%s: %s", pc->pmem_dev->name, error);
		return r ? r : -EINVAL;
	}

	if (pc->need_format) {
		r = pmc_meta_format_pair(&pc->meta, pc->kaddr, pc->mirror.kaddr,
					 pc->pmem_bytes, pc->block_size, oid,
					 pmc_format_features(pc));
		if (r)
			return r;
		pc->need_format = false;
		/* format zeroed both halves' info: a new pair identity */
		pmc_mirror_halves(pc);
		pmc_mirror_resync_begin(&h[0], &h[1], pc->meta.cache_uuid);
		pmc_mirror_resync_end(&h[0], &h[1]);
		pc->mirror.reads = 3;
		DMINFO("%s: formatted a new mirrored pair with %s: %llu blocks of %u bytes",
		       pc->pmem_dev->name, pc->mirror.dev->name,
		       pc->meta.n_blocks, pc->block_size);
		return 0;
	}

	if (pc->mirror.plan.action == PMC_MIRROR_DEGRADED) {
		if (pc->need_format) {
			DMERR("%s: mirror: the only half holds no cache",
			      pc->pmem_dev->name);
			return -EINVAL;
		}
		/* M1, durable before the first write is acknowledged */
		if (pc->mirror.plan.mark_alone)
			pmc_mirror_mark_alone(&h[from]);
		pmc_meta_use_halves(&pc->meta, h[from].base, NULL);
		pc->mirror.reads = 1;
		pmc_health_set(pc, PMC_H_MIRROR_DEGRADED, 0);
		DMINFO("%s: mirror: running on this half alone, generation %llu",
		       pc->pmem_dev->name, h[from].info.generation);
		return 0;
	}

	buf = kvmalloc(PMC_MIRROR_CHUNK, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	if (pc->mirror.plan.action == PMC_MIRROR_BOTH)
		r = pmc_resync_differ(pc, &pc->meta, h[0].base, h[1].base, buf,
				      PMC_MIRROR_CHUNK);
	else
		r = 1;
	if (r > 0) {
		pos = pmc_mirror_resync_begin(&h[from], &h[from ^ 1],
					      pc->meta.cache_uuid);	/* R1, R2 */
		/* in sync but for a cut's stores: those records and their data */
		if (pc->mirror.plan.action == PMC_MIRROR_BOTH) {
			pos = n;
			DMINFO("%s: mirror: copying the half on %s to %s: records a cut left",
			       pc->pmem_dev->name,
			       from ? pc->mirror.dev->name : pc->pmem_dev->name,
			       from ? pc->pmem_dev->name : pc->mirror.dev->name);
		}
		r = pmc_resync_records(pc, &pc->meta, h[from].base,
				       h[from ^ 1].base, pos, buf,
				       PMC_MIRROR_CHUNK);
		if (!r && pos >= n)
			pmc_mirror_resync_end(&h[from], &h[from ^ 1]);	/* R4, R5 */
	}
	kvfree(buf);
	if (r) {
		DMERR("%s: mirror: media error while comparing or copying the halves",
		      pc->pmem_dev->name);
		return r;
	}
	/* Both halves take every store; reads and pfns from half 0. */
	pmc_meta_use_halves(&pc->meta, pc->kaddr, pc->mirror.kaddr);
	pc->mirror.reads = 3;
	if (pos < n)
		return pmc_mirror_resync_prepare(pc, from, pos);
	return 0;
}

/*
 * M1 while running: a section (pmc_pmem_enter()) found the namespace of a
 * live half gone.  The survivor records that it runs alone (a new
 * generation, its partner stale) and the store is fenced before any store
 * skips the lost half, so a write acknowledged on the survivor alone is
 * never on a pair that the next start could take as in sync.  Reads, the
 * pfns of writeback and badblocks move to the survivor.  Called inside a
 * dax_read_lock() section: the survivor's mapping stays while it runs.
 * Returns true if a half is left.
 */
bool pmc_mirror_lose(struct pmemcache *pc)
{
	struct pmc_mirror_dev *mr = &pc->mirror;
	unsigned int live, lost = 0;
	unsigned long flags;
	u32 cur;

	spin_lock_irqsave(&mr->lose_lock, flags);
	live = pc->meta.live;
	if ((live & 1) && !dax_alive(pc->dax))
		lost |= 1;
	if ((live & 2) && !dax_alive(mr->dax))
		lost |= 2;
	cur = (live & ~lost) == 2;
	/*
	 * A half being copied to (its info RESYNCING until R5) is no cache
	 * on its own: with it as the survivor the cache is gone (every later
	 * section finds the same).  Either way a copy ends here.
	 */
	if (lost && (mr->h[cur].info.flags & PMC_MIRROR_RESYNCING))
		lost = live;
	if (lost && mr->syncing) {
		WRITE_ONCE(mr->syncing, false);
		pmc_health_clear(pc, PMC_H_MIRROR_RESYNC);
	}
	if (lost && lost != live) {
		pmc_mirror_mark_alone(&mr->h[cur]);	/* M1, fenced */
		if (cur)
			WRITE_ONCE(pc->pfn, mr->pfn);
		WRITE_ONCE(mr->reads, 1U << cur);
		pmc_meta_drop_half(&pc->meta, cur ^ 1);
		pmc_health_set(pc, PMC_H_MIRROR_DEGRADED, -ENXIO);
		DMERR("%s: mirror: lost the half on %s: running on %s alone, generation %llu",
		      pc->pmem_dev->name,
		      cur ? pc->pmem_dev->name : mr->dev->name,
		      cur ? mr->dev->name : pc->pmem_dev->name,
		      mr->h[cur].info.generation);
		live &= ~lost;
	}
	spin_unlock_irqrestore(&mr->lose_lock, flags);
	return lost != live;
}

/*
 * Healing (issue 31, step 3): a block read from the other half after a
 * media error on the half reads use is, a little later, committed anew
 * from that good copy into a fresh slot on both halves (a clean one is
 * just dropped), and the bad slot retired (pmc_write_heal()).  Until
 * then the cache runs as before; a block the queue has no room for is
 * asked again at its next read.
 */
struct pmc_heal_fill {
	struct pmemcache *pc;
	u32 slot;
	u8 *buf;
};

static int pmc_heal_copy(void *ctx, const u8 *half)
{
	struct pmc_heal_fill *h = ctx;
	struct pmemcache *pc = h->pc;

	return pmc_copy_from_pmem(h->buf, half + pmc_meta_data_offset(&pc->meta, h->slot),
				  pc->block_size);
}

/* pmc_fill_fn: the good copy of the bad block, from the other half. */
static int pmc_heal_fill(void *ctx, u8 *block, u32 *sector_crc)
{
	struct pmc_heal_fill *h = ctx;
	struct pmemcache *pc = h->pc;
	u32 i;

	/* not counted again: this is the heal of that count */
	if (pmc_read_either_half(pc, h->slot, pmc_meta_data_offset(&pc->meta, h->slot),
				 pc->block_size, false, pmc_heal_copy, h))
		return -EIO;
	if (!sector_crc) {
		pmc_meta_store(&pc->meta, block, h->buf, pc->block_size, PMC_P_DATA);
		return 0;
	}
	for (i = 0; i < pc->meta.spb; i++)
		pmc_meta_store_sector(&pc->meta, block + i * SECTOR_SIZE,
				      h->buf + i * SECTOR_SIZE, &sector_crc[i]);
	return 0;
}

/*
 * Heal @slot (index word @v) now: a dirty block committed anew from its
 * good copy (@buf: a block of DRAM), a clean one dropped.  0 or -errno
 * (-EAGAIN: busy, or no slot free).  Inside a pmc_pmem_enter() section.
 */
int pmc_mirror_heal(struct pmemcache *pc, u32 slot, u64 v, u8 *buf)
{
	struct pmc_heal_fill h = { .pc = pc, .slot = slot, .buf = buf };

	return pmc_write_heal(pc, &pc->meta, &pc->idx, slot, v, pmc_heal_fill,
			      &h);
}

/* The next block to heal, taken off the queue: false if none. */
static bool pmc_mirror_heal_next(struct pmc_mirror_dev *mr, u32 *slot, u64 *v)
{
	bool any;

	spin_lock_irq(&mr->heal_lock);
	any = mr->n_heal != 0;
	if (any) {
		mr->n_heal--;
		*slot = mr->heal_slot[mr->n_heal];
		*v = mr->heal_v[mr->n_heal];
	}
	spin_unlock_irq(&mr->heal_lock);
	return any;
}

static void pmc_mirror_heal_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(work, struct pmemcache,
					    mirror.heal_work);
	unsigned int healed = 0;
	u32 slot;
	u64 v;
	u8 *buf;
	int id;

	/* suspended: another table may already own the pmem */
	if (READ_ONCE(pc->suspended))
		return;
	buf = kmalloc(pc->block_size, GFP_NOIO);
	if (!buf)
		return;
	id = pmc_pmem_enter(pc);
	while (id >= 0 && !READ_ONCE(pc->suspended) &&
	       pmc_mirror_heal_next(&pc->mirror, &slot, &v)) {
		if (!pmc_mirror_heal(pc, slot, v, buf))
			healed++;
		cond_resched();
	}
	if (id >= 0)
		pmc_pmem_exit(id);
	kfree(buf);
	if (healed)
		DMINFO_LIMIT("%s: mirror: healed %u cache blocks from the other half",
			     pc->pmem_dev->name, healed);
}

void pmc_mirror_init(struct pmemcache *pc)
{
	spin_lock_init(&pc->mirror.lose_lock);
	spin_lock_init(&pc->mirror.heal_lock);
	INIT_WORK(&pc->mirror.heal_work, pmc_mirror_heal_work);
	INIT_DELAYED_WORK(&pc->mirror.resync_work, pmc_mirror_resync_work);
}

/* Suspend and destructor: no copy runs once this returns. */
void pmc_mirror_stop(struct pmemcache *pc)
{
	cancel_delayed_work_sync(&pc->mirror.resync_work);
}

void pmc_mirror_exit(struct pmemcache *pc)
{
	pmc_mirror_stop(pc);
	kfree(pc->mirror.resync_buf);
	pc->mirror.resync_buf = NULL;
}

/* Any context: @slot met a media error on the half reads use. */
void pmc_mirror_heal_later(struct pmemcache *pc, u32 slot)
{
	struct pmc_mirror_dev *mr = &pc->mirror;
	u64 v = READ_ONCE(pc->idx.slot[slot]);
	unsigned long flags;
	unsigned int i;

	if (!(pmc_slot_flags(v) & PMC_SF_USED) || !pc->wq ||
	    READ_ONCE(pc->suspended))
		return;
	spin_lock_irqsave(&mr->heal_lock, flags);
	for (i = 0; i < mr->n_heal && mr->heal_slot[i] != slot; i++)
		;
	if (i == mr->n_heal && i < PMC_HEAL_MAX) {
		mr->heal_slot[i] = slot;
		mr->heal_v[i] = v;
		mr->n_heal++;
	}
	spin_unlock_irqrestore(&mr->heal_lock, flags);
	queue_work(pc->wq, &mr->heal_work);
}
