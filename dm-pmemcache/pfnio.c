// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: the only file that uses the pfn I/O core patches
 * (core-patches/: dax_get_by_bdev_nopage(), bio_add_pfn(), bdev_pfn()).
 *
 * Built against a kernel without them, the module still works on
 * struct-page pmem (an fsdax namespace, found through fs_dax_get_by_bdev)
 * and writes back through DRAM bounce pages only.
 */
#include <linux/blkdev.h>

#include "pmemcache.h"

bool pmc_pfn_io_available(void)
{
#ifdef PMC_HAVE_PFN_IO
	return true;
#else
	return false;
#endif
}

struct dax_device *pmc_dax_get(struct block_device *bdev, u64 *start_off,
			       bool *owned)
{
#ifdef PMC_HAVE_DAX_NOPAGE
	*owned = true;
	return dax_get_by_bdev_nopage(bdev, start_off);
#else
	*owned = true;
	return fs_dax_get_by_bdev(bdev, start_off, NULL, NULL);
#endif
}

bool pmc_origin_takes_pfn(struct pmemcache *pc)
{
#ifdef PMC_HAVE_PFN_IO
	return bdev_pfn(pc->origin->bdev);
#else
	return false;
#endif
}

/*
 * Add @len bytes at @offset of the data block of @slot to @bio as a
 * page-less segment.  Returns the number of bytes added (0: bio full).
 */
int pmc_bio_add_pmem(struct pmemcache *pc, struct bio *bio, u32 slot,
		     u32 offset, u32 len)
{
#ifdef PMC_HAVE_PFN_IO
	u64 byte = pmc_meta_data_offset(&pc->meta, slot) + offset;
	pfn_t base = READ_ONCE(pc->pfn);	/* moves if a half is lost */
	pfn_t pfn = __pfn_to_pfn_t(pfn_t_to_pfn(base) + (byte >> PAGE_SHIFT),
				   base.val & PFN_FLAGS_MASK);

	return bio_add_pfn(bio, pfn, len, byte & ~PAGE_MASK);
#else
	return 0;
#endif
}
