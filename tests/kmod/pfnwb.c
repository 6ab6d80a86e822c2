// SPDX-License-Identifier: GPL-2.0
/*
 * pfnwb: test module for the core-patches pfn I/O series.
 *
 * On load it claims a raw (page-less) pmem namespace the way a device-mapper
 * target would (dax_get_by_bdev_nopage() + dax_direct_access()), writes a
 * known pattern into pmem with the CPU, and writes that pmem range to a
 * target block device with one bio built by bio_add_pfn(), i.e. with no
 * struct page and no copy through DRAM.  The guest then compares the target
 * with pmem from userspace.
 *
 * Parameters:
 *   pmem=PATH      the raw pmem block device (default /dev/pmem0)
 *   target=PATH    where to write (md, dm, or a plain disk)
 *   sector=N       first target sector
 *   pmem_off=N     byte offset into pmem (page aligned)
 *   len=N          bytes to write (multiple of 4096)
 *   gap=1          take the second half of the data from one page further
 *                  into pmem, so the bio gets two bvecs instead of one
 *   seed=N         pattern seed
 *   untrust=PATH   first mark the PCI device under this block device
 *                  untrusted, as if it sat behind an external port: behind
 *                  an IOMMU, dma-iommu then bounces sub-granule ranges,
 *                  which dma_map_pfn() refuses (a refusal at I/O time)
 *
 * It prints "pfnwb: KEY=value" lines and loads only if the write
 * succeeded; otherwise insmod fails with the bio's error (e.g. -EOPNOTSUPP).
 */
#include <linux/bio.h>
#include <linux/blkdev.h>
#include <linux/dax.h>
#include <linux/module.h>
#include <linux/pci.h>
#include <linux/pfn_t.h>
#include <linux/string.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>

static char *untrust;
module_param(untrust, charp, 0444);
static char *pmem = "/dev/pmem0";
module_param(pmem, charp, 0444);
static char *target;
module_param(target, charp, 0444);
static ulong sector;
module_param(sector, ulong, 0444);
static ulong pmem_off;
module_param(pmem_off, ulong, 0444);
static uint len = 65536;
module_param(len, uint, 0444);
static bool gap;
module_param(gap, bool, 0444);
static uint seed = 1;
module_param(seed, uint, 0444);

#define HALF	(PAGE_SIZE / 2)

/* pmem byte offset (from pmem_off) of data byte @i of the write */
static unsigned long src_off(unsigned long i)
{
	return gap && i >= len / 2 ? i + PAGE_SIZE : i;
}

static void fill(void *kaddr)
{
	char line[64];
	unsigned long i;
	u32 w;

	/* each sector: a readable header, then a seeded word pattern */
	for (i = 0; i < len; i += 512) {
		memset(line, 0, sizeof(line));
		snprintf(line, sizeof(line), "pfnwb seed=%u sector=%lu\n",
			 seed, sector + i / 512);
		memcpy_flushcache(kaddr + pmem_off + src_off(i), line,
				  sizeof(line));
	}
	for (i = 0; i < len; i += 4) {
		if (i % 512 < 64)
			continue;
		w = seed * 0x9e3779b1u ^ (u32)i;
		memcpy_flushcache(kaddr + pmem_off + src_off(i), &w, 4);
	}
}

static int pfnwb_write(void)
{
	const fmode_t mode = FMODE_READ | FMODE_WRITE | FMODE_EXCL;
	struct block_device *pbdev, *tbdev;
	struct dax_device *dax;
	unsigned long need, i, base_pfn;
	struct bio *bio;
	void *kaddr;
	pfn_t pfn;
	u64 start;
	long avail;
	int id, ret;

	if (!target || !len || len % PAGE_SIZE || pmem_off % PAGE_SIZE)
		return -EINVAL;

	pbdev = blkdev_get_by_path(pmem, mode, THIS_MODULE);
	if (IS_ERR(pbdev))
		return PTR_ERR(pbdev);
	tbdev = blkdev_get_by_path(target, mode, THIS_MODULE);
	if (IS_ERR(tbdev)) {
		ret = PTR_ERR(tbdev);
		goto put_pmem;
	}

	pr_info("pfnwb: queue_dax=%d\n", blk_queue_dax(bdev_get_queue(pbdev)));
	dax = dax_get_by_bdev_nopage(pbdev, &start);
	if (!dax) {
		pr_info("pfnwb: no dax_device\n");
		ret = -ENODEV;
		goto put_target;
	}

	need = (pmem_off + len + (gap ? PAGE_SIZE : 0)) >> PAGE_SHIFT;
	id = dax_read_lock();
	avail = dax_direct_access(dax, PHYS_PFN(start), need, DAX_ACCESS,
				  &kaddr, &pfn);
	if (avail < (long)need) {
		ret = avail < 0 ? avail : -ENOSPC;
		goto unlock;
	}
	base_pfn = pfn_t_to_pfn(pfn);
	pr_info("pfnwb: pfn=0x%lx has_page=%d pfn_valid=%d vmalloc=%d\n",
		base_pfn, pfn_t_has_page(pfn), pfn_valid(base_pfn),
		is_vmalloc_addr(kaddr));
	pr_info("pfnwb: target_pfn=%d\n", bdev_pfn(tbdev));

	fill(kaddr);

	bio = bio_alloc(tbdev, 4, REQ_OP_WRITE | REQ_SYNC, GFP_KERNEL);
	bio->bi_iter.bi_sector = sector;
	/* half pages, so that bio_add_pfn() has to merge */
	for (i = 0; i < len; i += HALF) {
		unsigned long off = pmem_off + src_off(i);

		if (bio_add_pfn(bio, __pfn_to_pfn_t(base_pfn + off / PAGE_SIZE,
						    PFN_DEV),
				HALF, off % PAGE_SIZE) != HALF) {
			bio_put(bio);
			ret = -E2BIG;
			goto unlock;
		}
	}
	pr_info("pfnwb: bvecs=%u size=%u\n", bio->bi_vcnt, bio->bi_iter.bi_size);
	ret = submit_bio_wait(bio);
	bio_put(bio);
unlock:
	dax_read_unlock(id);
	put_dax(dax);
put_target:
	blkdev_put(tbdev, mode);
put_pmem:
	blkdev_put(pbdev, mode);
	return ret;
}

/* Test only: what the PCI core does for a device behind an external port. */
static int pfnwb_untrust(const char *path)
{
	struct block_device *bdev = blkdev_get_by_path(path, FMODE_READ, NULL);
	struct device *d;
	int ret = -ENODEV;

	if (IS_ERR(bdev))
		return PTR_ERR(bdev);
	for (d = disk_to_dev(bdev->bd_disk); d; d = d->parent) {
		if (dev_is_pci(d)) {
			to_pci_dev(d)->untrusted = 1;
			pr_info("pfnwb: %s untrusted\n", dev_name(d));
			ret = 0;
			break;
		}
	}
	blkdev_put(bdev, FMODE_READ);
	return ret;
}

static int __init pfnwb_init(void)
{
	int ret = untrust ? pfnwb_untrust(untrust) : 0;

	if (!ret)
		ret = pfnwb_write();

	pr_info("pfnwb: result=%d\n", ret);
	return ret;
}

static void __exit pfnwb_exit(void)
{
}

module_init(pfnwb_init);
module_exit(pfnwb_exit);
MODULE_DESCRIPTION("write raw pmem to a block device with bio_add_pfn()");
MODULE_LICENSE("GPL");
