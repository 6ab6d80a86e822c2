// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: the "scrub" message.  Reads find a bad copy only when
 * they meet it: a block read from one half of a mirror, or never read at
 * all, may hold poison that no badblocks list names (found by the machine
 * check of a read) or, with data_crc, data that no longer matches its
 * crc, and nothing knows until the good copy is lost.  Scrub reads every
 * cached block on every half that serves reads, machine-check safe, and
 * heals what it finds as a read would: a dirty block is committed anew
 * from its good copy (pmc_mirror_heal()), a clean one is dropped (the
 * origin holds it).  A dirty block with no good copy left is reported.
 */
#include <linux/delay.h>
#include "pmemcache.h"

/* Is the copy of @slot (sectors @valid) on the half at @base good? */
static bool pmc_scrub_copy_ok(struct pmemcache *pc, const u8 *base, u32 slot,
			      u32 valid)
{
	u32 crc;

	if (pc->meta.data_crc)
		return !pmc_meta_check_data(&pc->meta, base, slot);
	/* a crc of nothing: the machine-check safe read is the check */
	return !pmc_meta_data_crc(&pc->meta, base, slot, valid, &crc);
}

/*
 * Check the copies of @slot (index word @v) under its stripe lock: how
 * many of the @n halves at @base hold a bad one.  -EAGAIN if the slot
 * changed since @v was read.
 */
static int pmc_scrub_slot(struct pmemcache *pc, u32 slot, u64 v,
			  const u8 *const *base, unsigned int n)
{
	u64 oblock = pmc_slot_oblock(v);
	unsigned int i;
	int bad = 0;

	pmc_env_stripe_lock(pc, oblock);
	if (READ_ONCE(pc->idx.slot[slot]) != v) {
		pmc_env_stripe_unlock(pc, oblock);
		return -EAGAIN;
	}
	for (i = 0; i < n; i++)
		bad += !pmc_scrub_copy_ok(pc, base[i], slot, pmc_slot_mask(v));
	pmc_env_stripe_unlock(pc, oblock);
	return bad;
}

/* The halves reads use now: both halves of a mirror in sync, or one. */
static unsigned int pmc_scrub_halves(struct pmemcache *pc, const u8 **base)
{
	unsigned int reads = READ_ONCE(pc->mirror.reads);

	if (reads == 3) {
		base[0] = pc->meta.half[0];
		base[1] = pc->meta.half[1];
		return 2;
	}
	base[0] = pmc_half_base(pc, reads == 2);
	return 1;
}

/* What a scrub found, for the message's answer and the kernel line. */
struct pmc_scrub_count {
	u64 checked, bad, healed, lost, busy;
};

/*
 * Scrub @slot: check its copies, then heal a bad one.  A slot busy (in
 * writeback, written through, no free slot to heal into) is tried again
 * a little later, and counted busy after 3 tries.  0, or -EINTR/-ENXIO.
 */
static int pmc_scrub_one(struct pmemcache *pc, u32 slot, u8 *buf,
			 struct pmc_scrub_count *n)
{
	const u8 *base[2];
	unsigned int halves, tries;
	int id, bad, r;
	u64 v;

	for (tries = 1; ; tries++) {
		v = READ_ONCE(pc->idx.slot[slot]);
		if ((pmc_slot_flags(v) & (PMC_SF_USED | PMC_SF_BAD)) != PMC_SF_USED)
			return 0;
		id = pmc_pmem_enter(pc);
		if (id < 0)
			return -ENXIO;
		halves = pmc_scrub_halves(pc, base);
		bad = pmc_scrub_slot(pc, slot, v, base, halves);
		r = bad;
		/* a dirty block without a good copy cannot heal */
		if (bad > 0 && !(bad == halves && (pmc_slot_flags(v) & PMC_SF_DIRTY)))
			r = pmc_mirror_heal(pc, slot, v, buf);
		pmc_pmem_exit(id);
		if (r != -EAGAIN)
			break;
		if (tries == 3) {
			n->busy++;
			return 0;
		}
		msleep(20);
		if (signal_pending(current))
			return -EINTR;
	}
	n->checked++;
	if (bad <= 0)
		return 0;
	n->bad += bad;
	if (!r) {
		n->healed++;
	} else {
		n->lost++;
		pmc_count_media_error(pc);
	}
	return 0;
}

/*
 * Scrub the whole cache.  1 with the counts in @result, -EIO if a dirty
 * block has no good copy (the kernel line counts them), -EBUSY if the
 * cache is suspended meanwhile, -EINTR on a signal, -ENXIO if pmem is gone.
 */
int pmc_scrub(struct pmemcache *pc, char *result, unsigned int maxlen)
{
	struct pmc_scrub_count n = { 0 };
	unsigned int sz = 0;
	u8 *buf;
	u64 i;
	int r = 0;

	buf = kmalloc(pc->block_size, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	for (i = 0; !r && i < pc->meta.n_blocks; i++) {
		if (READ_ONCE(pc->suspended))
			r = -EBUSY;
		else if (signal_pending(current))
			r = -EINTR;
		else
			r = pmc_scrub_one(pc, i, buf, &n);
		cond_resched();
	}
	kfree(buf);
	DMINFO("%s: scrub%s: %llu checked, %llu bad copies, %llu healed, %llu lost, %llu busy",
	       pc->pmem_dev->name, r ? " stopped" : "", n.checked, n.bad,
	       n.healed, n.lost, n.busy);
	if (r)
		return r;
	if (n.lost)
		return -EIO;
	/* 1: dm passes the answer to the caller (dmsetup message prints it) */
	DMEMIT("checked %llu bad %llu healed %llu lost %llu busy %llu",
	       n.checked, n.bad, n.healed, n.lost, n.busy);
	return 1;
}
