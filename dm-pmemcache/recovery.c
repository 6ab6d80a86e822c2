// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: load the cache from pmem.
 *
 * Opening refuses foreign, corrupt or mismatched metadata with one clear
 * reason (ti->error, printed by dm as a single DMERR line) unless the table
 * has the 'format' feature.  Recovery itself never fails on a state that a
 * crash can leave: the shared code (pmc_meta_recover) rebuilds the index,
 * keeps the newest copy of every block and invalidates the older ones.
 */
#include "pmemcache.h"

/*
 * Constructor half: check the superblock (never writes).  A reload builds
 * the new target while the old one still runs on the same pmem, so
 * formatting and recovery wait for the first resume (pmc_load()), when the
 * old target is suspended and quiet.
 */
int pmc_load_check(struct pmemcache *pc, char **error)
{
	struct pmc_origin_id oid;
	const char *why = NULL;
	u8 *base = pc->kaddr;
	u64 n, off;
	int r;

	pmc_origin_identity(pc, &oid);
	if (pc->mirror.on) {
		/* which half holds every acknowledged write: open that one */
		r = pmc_mirror_check(pc, &base, error);
		if (r)
			return r;
	} else if (!pc->format) {
		r = pmc_mirror_refuse_half(pc, error);
		if (r)
			return r;
	}
	pc->need_format = pc->format;
	if (!pc->format) {
		r = pmc_meta_open(&pc->meta, base, pc->pmem_bytes,
				  pc->block_size, &oid, &why);
		if (r == -ENODATA) {
			pc->need_format = true;
		} else if (r) {
			*error = (char *)why;
			return -EINVAL;
		} else if (pc->data_crc && !pc->meta.data_crc) {
			/* a record without a crc would read as corrupt */
			*error = "data_crc: the cache was formatted without it";
			return -EINVAL;
		}
	}
	if (pc->need_format) {
		if (pmc_meta_geometry(pc->pmem_bytes, pc->block_size, &n, &off)) {
			*error = "pmem device is too small for this block size";
			return -EINVAL;
		}
		pc->meta.n_blocks = n;
	}
	r = pmc_index_init(&pc->idx, pc->meta.n_blocks);
	if (r) {
		*error = "Cannot allocate the in-RAM index";
		return r;
	}
	return 0;
}

/*
 * A live record of a block beyond the end of the origin cannot come from a
 * crash (the superblock pins the origin size): the record is corrupt.  It
 * could never be written back, so it is dropped like a torn record, with
 * one error line.
 */
static void pmc_drop_beyond_origin(struct pmemcache *pc,
				   struct pmc_recover_stats *rs)
{
	u64 end = DIV_ROUND_UP_ULL(bdev_nr_sectors(pc->origin->bdev),
				   1U << pc->spb_shift);
	u64 i, v, dropped = 0;
	u32 freed;

	for (i = 0; i < pc->meta.n_blocks; i++) {
		if (!(i & 4095))
			cond_resched();
		v = pc->idx.slot[i];
		if (!(pmc_slot_flags(v) & PMC_SF_USED) || pmc_slot_oblock(v) < end)
			continue;
		pmc_meta_drop_block(&pc->meta, &pc->idx, pmc_slot_oblock(v), &freed);
		/* durably FREE before the slot can be reused (rare: one fence each) */
		pmc_meta_fence(PMC_P_FREE);
		if (freed != PMC_NO_SLOT)
			pmc_index_push_free(&pc->idx, freed);
		rs->live--;
		if (pmc_slot_flags(v) & PMC_SF_DIRTY)
			rs->dirty--;
		dropped++;
	}
	if (dropped)
		DMERR("%s: %llu corrupt records point beyond the end of the origin: dropped",
		      pc->pmem_dev->name, dropped);
}

/* First resume: format if needed, then rebuild the index from pmem. */
int pmc_load(struct pmemcache *pc)
{
	struct pmc_origin_id oid;
	struct pmc_recover_stats rs;
	u64 i;
	int r;

	if (pc->mirror.on) {
		pmc_origin_identity(pc, &oid);
		r = pmc_mirror_start(pc, &oid);
		if (r)
			return r;
	} else if (pc->need_format) {
		pmc_origin_identity(pc, &oid);
		r = pmc_meta_format_pair(&pc->meta, pc->kaddr, NULL,
					 pc->pmem_bytes, pc->block_size, &oid,
					 pmc_format_features(pc));
		if (r)
			return r;
		pc->need_format = false;
		DMINFO("%s: formatted: %llu blocks of %u bytes%s",
		       pc->pmem_dev->name, pc->meta.n_blocks, pc->block_size,
		       pc->meta.data_crc ? ", with data crcs" : "");
	}
	r = pmc_meta_recover(&pc->meta, &pc->idx, &rs);
	if (r)
		return r;
	pmc_drop_beyond_origin(pc, &rs);
	if (rs.bad_seq)
		DMERR("%s: %llu corrupt records have a seq above %llu: dropped",
		      pc->pmem_dev->name, rs.bad_seq, PMC_SEQ_MAX);

	/* Dirty blocks found on load all count as the current epoch. */
	atomic64_set(&pc->n_dirty, rs.dirty);
	for (i = 0; i < 4; i++)
		atomic64_set(&pc->epoch_dirty[i], 0);
	atomic64_set(&pc->epoch_dirty[0], rs.dirty);
	atomic_set(&pc->epoch, 0);
	/* Unreadable records: their slots are quarantined, out of use. */
	atomic64_set(&pc->bad_slots, rs.unreadable);
	DMINFO("%s: loaded %llu blocks: %llu cached, %llu dirty",
	       pc->pmem_dev->name, pc->meta.n_blocks, rs.live, rs.dirty);
	DMINFO("%s: recovery: %llu superseded, %llu torn, %llu unreadable records",
	       pc->pmem_dev->name, rs.superseded, rs.torn, rs.unreadable);
	if (rs.unreadable)
		DMERR("%s: %llu metadata records unreadable (media errors); their blocks are lost",
		      pc->pmem_dev->name, rs.unreadable);
	pc->loaded = true;
	return 0;
}
