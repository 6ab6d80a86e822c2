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

int pmc_recover(struct pmemcache *pc, char **error)
{
	struct pmc_origin_id oid;
	struct pmc_recover_stats rs;
	const char *why = NULL;
	u64 n, i;
	int r;

	pmc_origin_identity(pc, &oid);
	if (pc->format) {
		r = -ENODATA;
	} else {
		r = pmc_meta_open(&pc->meta, pc->kaddr, pc->pmem_bytes,
				  pc->block_size, &oid, &why);
		if (r && r != -ENODATA) {
			*error = (char *)why;
			return -EINVAL;
		}
	}
	if (r == -ENODATA) {
		r = pmc_meta_format(&pc->meta, pc->kaddr, pc->pmem_bytes,
				    pc->block_size, &oid);
		if (r) {
			*error = "pmem device is too small for this block size";
			return -EINVAL;
		}
		DMINFO("%s: formatted: %llu blocks of %u bytes",
		       pc->pmem_dev->name, pc->meta.n_blocks, pc->block_size);
	}

	r = pmc_index_init(&pc->idx, pc->meta.n_blocks);
	if (r) {
		*error = "cannot allocate the in-RAM index";
		return r;
	}
	r = pmc_meta_recover(&pc->meta, &pc->idx, &rs);
	if (r) {
		*error = "cannot read the cache metadata";
		return -EIO;
	}

	/* Counters of dirty blocks (all in the current epoch). */
	atomic64_set(&pc->n_dirty, rs.dirty);
	for (i = 0; i < 4; i++)
		atomic64_set(&pc->epoch_dirty[i], 0);
	atomic64_set(&pc->epoch_dirty[0], rs.dirty);
	atomic_set(&pc->epoch, 0);
	n = pc->meta.n_blocks;
	DMINFO("%s: loaded %llu blocks: %llu cached, %llu dirty",
	       pc->pmem_dev->name, n, rs.live, rs.dirty);
	DMINFO("%s: recovery: %llu superseded, %llu torn, %llu unreadable records",
	       pc->pmem_dev->name, rs.superseded, rs.torn, rs.unreadable);
	if (rs.unreadable)
		DMERR("%s: %llu metadata records unreadable (media errors); their blocks are lost",
		      pc->pmem_dev->name, rs.unreadable);
	return 0;
}
