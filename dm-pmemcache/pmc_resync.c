// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache resync: the copy of a mirror's holder to its other half
 * (pmc_resync.h).  Shared verbatim by the kernel module and the host
 * crash model.
 */
#include "pmc_resync.h"

/* Copy [@off, @off + @len) of @src to @dst through @buf (@buf_len). */
static int pmc_resync_range(struct pmemcache *pc, const u8 *src, u8 *dst,
			    u64 off, u64 len, u8 *buf, u32 buf_len)
{
	u32 n;

	while (len) {
		n = len < buf_len ? len : buf_len;
		if (pmc_pmem_read(buf, src + off, n))
			return -EIO;
		pmc_pmem_write(dst + off, buf, n, PMC_P_MIRROR);
		off += n;
		len -= n;
		pmc_env_resched(pc);
	}
	return 0;
}

int pmc_resync_differ(struct pmemcache *pc, const struct pmc_meta *m,
		      const u8 *src, const u8 *dst, u8 *buf, u32 len)
{
	u64 off, end = PMC_RECORDS_OFFSET + m->n_blocks * PMC_RECORD_SIZE;
	u32 n, half = len / 2;
	u32 info_len = PMC_MIRROR_INFO_SLOTS * PMC_MIRROR_INFO_SIZE;

	for (off = 0; off < end; off += n) {
		n = end - off < half ? end - off : half;
		if (pmc_pmem_read(buf, src + off, n) ||
		    pmc_pmem_read(buf + half, dst + off, n))
			return -EIO;
		if (off == 0) {
			/* each half's own info is no part of the cache */
			memset(buf + PMC_MIRROR_INFO_OFFSET, 0, info_len);
			memset(buf + half + PMC_MIRROR_INFO_OFFSET, 0, info_len);
		}
		if (memcmp(buf, buf + half, n))
			return 1;
		pmc_env_resched(pc);
	}
	return 0;
}

int pmc_resync_records(struct pmemcache *pc, const struct pmc_meta *m,
		       const u8 *src, u8 *dst, u64 pos, u8 *buf, u32 len)
{
	u64 info_end = PMC_MIRROR_INFO_OFFSET +
		       PMC_MIRROR_INFO_SLOTS * PMC_MIRROR_INFO_SIZE;
	struct pmc_record r, t;
	bool live;
	u64 slot, roff;
	int err;

	err = pmc_resync_range(pc, src, dst, 0, PMC_MIRROR_INFO_OFFSET, buf,
			       len);
	if (!err)
		err = pmc_resync_range(pc, src, dst, info_end,
				       PMC_RECORDS_OFFSET - info_end, buf, len);
	if (err)
		return err;
	for (slot = 0; slot < m->n_blocks; slot++) {
		roff = PMC_RECORDS_OFFSET + slot * PMC_RECORD_SIZE;
		if (pmc_meta_read_record(m, slot, &r, &live) ||
		    pmc_pmem_read(&t, dst + roff, sizeof(t)))
			return -EIO;
		if (!memcmp(&r, &t, sizeof(r)))
			continue;
		if (live && slot < pos) {
			err = pmc_resync_range(pc, src, dst,
					       pmc_meta_data_offset(m, slot),
					       m->block_size, buf, len);
			if (err)
				return err;
			/* as W2: the data durable before a record points at it */
			pmc_pmem_fence(PMC_P_DATA);
		}
		pmc_pmem_write(dst + roff, &r, sizeof(r), PMC_P_MIRROR);
		if (slot % 4096 == 0)
			pmc_env_resched(pc);
	}
	pmc_pmem_fence(PMC_P_MIRROR);
	return 0;
}

/*
 * A slot whose data may still be read: one that maps a block, or one a
 * write or discard superseded while its writeback was in flight (STALE,
 * freed when that write completes), which writeback may read from the
 * target only once the copy has ended.
 */
static bool pmc_resync_live(u64 v)
{
	return (pmc_slot_flags(v) & (PMC_SF_USED | PMC_SF_BAD)) == PMC_SF_USED;
}

int pmc_resync_slot(struct pmemcache *pc, const struct pmc_meta *m,
		    struct pmc_index *idx, const u8 *src, u8 *dst, u32 slot,
		    u8 *buf)
{
	u64 v = READ_ONCE(idx->slot[slot]), ob = pmc_slot_oblock(v);
	u64 off = pmc_meta_data_offset(m, slot);
	struct pmc_record rec;
	bool live;
	int r = 0;

	/*
	 * Eviction, discard and overwrite take a slot out of the index and
	 * store its FREE record, fenced, under the lock of the block's
	 * stripe.  A copy that skipped such a slot without that lock could
	 * be followed by a cut that drops the FREE on both halves: a live
	 * record below an R3 mark whose data the target never got.  So the
	 * lock is taken for the block the holder's record names (a FREE
	 * record keeps it), or the slot word's, and the word read again.
	 */
	if (pmc_slot_flags(v) & PMC_SF_BAD)
		return 0;
	if (!(pmc_slot_flags(v) & PMC_SF_USED)) {
		if (pmc_meta_read_record(m, slot, &rec, &live))
			return -EIO;
		ob = le64_to_cpu(rec.oblock);
	}
	pmc_env_stripe_lock_read(pc, ob);
	v = READ_ONCE(idx->slot[slot]);
	if (pmc_resync_live(v) && pmc_slot_oblock(v) == ob) {
		r = pmc_pmem_read(buf, src + off, m->block_size);
		if (!r) {
			pmc_pmem_write(dst + off, buf, m->block_size,
				       PMC_P_DATA);
			/*
			 * Durable before the lock lets a write free the slot
			 * and store new data there on another CPU: a copy
			 * still in flight could land over that, later.
			 */
			pmc_pmem_fence(PMC_P_DATA);
			r = m->block_size;
		}
	}
	pmc_env_stripe_unlock_read(pc, ob);
	return r;
}

bool pmc_resync_batch_end(struct pmc_mirror_half *cur,
			  struct pmc_mirror_half *tgt, u64 next, u64 n_blocks,
			  u32 mark_every)
{
	/* every copy below @next is durable (pmc_resync_slot() fenced it) */
	if (next == n_blocks) {
		pmc_mirror_resync_end(cur, tgt);	/* R4, R5 */
		return true;
	}
	if (next - tgt->info.resync_pos >= mark_every)
		pmc_mirror_resync_progress(tgt, next);	/* R3 */
	return false;
}
