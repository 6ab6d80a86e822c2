// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: claim the pmem namespace and identify the origin.
 *
 * A raw NFIT namespace has no struct page and is not in the direct map:
 * its memory is reached only through the kaddr that dax_direct_access()
 * returns (an ioremap_cache mapping) and its pfns.  Never use
 * page_address(), virt_to_page() or kmap() on it.
 */
#include <linux/badblocks.h>
#include <linux/blkdev.h>
#include <linux/uaccess.h>
#ifdef PMC_HAVE_MD_ARRAY_UUID
#include <linux/raid/md_array.h>
#endif

#include "pmemcache.h"

int pmc_copy_from_pmem(void *dst, const void *src, size_t len)
{
	return copy_mc_to_kernel(dst, src, len) ? -EIO : 0;
}

/*
 * Does [@byte_off, @byte_off + @len) of the pmem device reads use (the
 * survivor, once a mirror lost a half) overlap its disk's badblocks list
 * (poison the platform reported, or ranges written to
 * /sys/block/pmemN/badblocks)?  Such pmem is not read: the I/O fails with
 * -EIO instead.  Cheap while the list is empty.
 */
static bool pmc_bdev_range_bad(struct block_device *bdev, u64 byte_off,
			       u32 len)
{
	struct badblocks *bb = bdev->bd_disk->bb;
	sector_t first_bad;
	int num_bad;

	if (!bb || !READ_ONCE(bb->count) || !len)
		return false;
	return badblocks_check(bb, get_start_sect(bdev) + (byte_off >> SECTOR_SHIFT),
			       DIV_ROUND_UP((byte_off & (SECTOR_SIZE - 1)) + len,
					    SECTOR_SIZE),
			       &first_bad, &num_bad) != 0;
}

/* Is [@byte_off, @byte_off + @len) of half @h on its badblocks list? */
bool pmc_half_range_bad(struct pmemcache *pc, unsigned int h, u64 byte_off,
			u32 len)
{
	return pmc_bdev_range_bad(h ? pc->mirror.dev->bdev : pc->pmem_dev->bdev,
				  byte_off, len);
}

/*
 * Is the range bad on a half the cache runs on: never to be handed to a
 * write, never to be sent by a page-less bio.
 */
bool pmc_pmem_range_bad(struct pmemcache *pc, u64 byte_off, u32 len)
{
	unsigned int live = READ_ONCE(pc->meta.live);

	if (live != 3)
		return pmc_half_range_bad(pc, live == 2, byte_off, len);
	return pmc_half_range_bad(pc, 0, byte_off, len) ||
	       pmc_half_range_bad(pc, 1, byte_off, len);
}

/*
 * A mirror's second copy of [@byte_off, @byte_off + @len), for a read
 * that met a media error on half @h: byte 0 of the other half, or NULL
 * (one device, a half lost, or the range on the other half's badblocks
 * list too).  Both halves hold the same bytes of every live block: its
 * data was fenced on both (W2) before its record.
 */
const u8 *pmc_mirror_other_copy(struct pmemcache *pc, unsigned int h,
				u64 byte_off, u32 len)
{
	if (READ_ONCE(pc->mirror.reads) != 3 ||
	    pmc_half_range_bad(pc, h ^ 1, byte_off, len))
		return NULL;
	return h ? pc->meta.half[0] : pc->meta.half[1];
}

struct pmc_block_copy {
	void *dst;
	u64 off;
	u32 len;
};

static int pmc_block_copy(void *ctx, const u8 *half)
{
	struct pmc_block_copy *c = ctx;

	return pmc_copy_from_pmem(c->dst, half + c->off, c->len);
}

/*
 * Copy the data of cache block @slot into @dst: from the half that serves
 * its reads, or after a media error there from a mirror's other half.
 * 0 or -EIO.
 */
int pmc_read_block(struct pmemcache *pc, void *dst, u32 slot)
{
	struct pmc_block_copy c = {
		.dst = dst, .len = pc->block_size,
		.off = pmc_meta_data_offset(&pc->meta, slot),
	};

	return pmc_read_either_half(pc, slot, c.off, c.len, true,
				    pmc_block_copy, &c);
}

/*
 * data_crc: does the data of @slot on the half at @base match its record?
 * A mismatch (or a media error met on the way) is counted if @count.
 */
bool pmc_data_crc_good(struct pmemcache *pc, const u8 *base, u32 slot,
		       bool count)
{
	int r = pmc_meta_check_data(&pc->meta, base, slot);

	if (!r)
		return true;
	if (count) {
		atomic64_inc(&pc->st.crc_errors);
		DMWARN_LIMIT("%s: cache block %u: %s on %s",
			     pc->pmem_dev->name, slot,
			     r == -EIO ? "media error checking its data crc" :
			     "data does not match its crc",
			     pc->mirror.dev && base == pc->meta.half[1] ?
			     pc->mirror.dev->name :
			     pc->pmem_dev->name);
	}
	return false;
}

/* A read was served from the other half: count it, heal the block. */
void pmc_count_mirror_read(struct pmemcache *pc, u32 slot)
{
	atomic64_inc(&pc->st.mirror_reads);
	DMWARN_LIMIT("%s: media error on cache block %u: read from the mirror's other half",
		     pc->pmem_dev->name, slot);
	pmc_mirror_heal_later(pc, slot);
}

/*
 * Map all of @bdev: its dax device (*@dax, put by the caller if *@owned),
 * the kaddr and pfn of its byte 0 and its size in whole pages.  0, or
 * -EINVAL with @error set (*@dax is then put and NULL).
 */
static int pmc_pmem_map(struct block_device *bdev, const char *name,
			struct dax_device **dax, bool *owned, u8 **kaddrp,
			pfn_t *pfnp, u64 *bytes, char **error)
{
	u64 start_off = 0;
	long pages, da;
	void *kaddr;
	pfn_t pfn;
	int id;

	pages = bdev_nr_bytes(bdev) >> PAGE_SHIFT;
	*bytes = (u64)pages << PAGE_SHIFT;
	if (!pages) {
		*error = "pmem device is empty";
		return -EINVAL;
	}
	*dax = pmc_dax_get(bdev, &start_off, owned);
	if (!*dax) {
		*error = "pmem device is not a DAX-capable pmem namespace";
		return -EINVAL;
	}
	if (!dax_synchronous(*dax)) {
		*error = "pmem device is not synchronous (CPU flushes do not make it persistent)";
		goto err;
	}
	if (start_off & ~PAGE_MASK) {
		*error = "pmem partition is not page aligned";
		goto err;
	}

	id = dax_read_lock();
	da = dax_direct_access(*dax, start_off >> PAGE_SHIFT, pages,
			       DAX_ACCESS, &kaddr, &pfn);
	if (da == -EIO) {
		/*
		 * Known badblocks somewhere in the namespace.  The mapping is
		 * still linear; reads of poisoned lines fail in
		 * copy_mc_to_kernel() and give -EIO for that I/O.
		 */
		da = dax_direct_access(*dax, start_off >> PAGE_SHIFT, 1,
				       DAX_RECOVERY_WRITE, &kaddr, &pfn);
		if (da > 0) {
			DMWARN("%s: pmem has known badblocks", name);
			da = pages;
		}
	}
	dax_read_unlock(id);
	if (da < 0) {
		*error = "dax_direct_access failed on the pmem device";
		goto err;
	}
	if (da < pages) {
		*error = "pmem device is not one linear mapping";
		goto err;
	}
	*kaddrp = kaddr;
	*pfnp = pfn;
	return 0;
err:
	if (*owned)
		put_dax(*dax);
	*dax = NULL;
	return -EINVAL;
}

int pmc_pmem_claim(struct pmemcache *pc, char **error)
{
	return pmc_pmem_map(pc->pmem_dev->bdev, pc->pmem_dev->name, &pc->dax,
			    &pc->dax_owned, &pc->kaddr, &pc->pfn,
			    &pc->pmem_bytes, error);
}

/*
 * The NVDIMM region a pmem disk lives on: the nearest ancestor of its
 * device that libnvdimm made a pmem region (a namespace, or its pfn
 * device, sits below it), or NULL (not an NVDIMM namespace's disk).
 */
static struct device *pmc_pmem_region(struct block_device *bdev)
{
	struct device *dev;

	for (dev = disk_to_dev(bdev->bd_disk)->parent; dev; dev = dev->parent)
		if (dev->type && dev->type->name &&
		    (!strcmp(dev->type->name, "nd_pmem") ||
		     !strcmp(dev->type->name, "nd_volatile")))
			return dev;
	return NULL;
}

/*
 * Map the mirror's second half (pc->mirror.dev), after the first
 * (pmc_pmem_claim()).  Two halves on one NVDIMM region are no redundancy:
 * one DIMM lost takes both.  The cache uses the smaller half.  0, or
 * -EINVAL with @error set.
 */
int pmc_mirror_claim(struct pmemcache *pc, char **error)
{
	struct pmc_mirror_dev *mr = &pc->mirror;
	struct device *ra, *rb;
	int r;

	r = pmc_pmem_map(mr->dev->bdev, mr->dev->name, &mr->dax,
			 &mr->dax_owned, &mr->kaddr, &mr->pfn, &mr->bytes,
			 error);
	if (r)
		return r;
	ra = pmc_pmem_region(pc->pmem_dev->bdev);
	rb = pmc_pmem_region(mr->dev->bdev);
	if (!ra || !rb) {
		*error = "mirror: cannot tell the NVDIMM region of a pmem device";
		return -EINVAL;
	}
	if (ra == rb) {
		*error = "mirror: both pmem devices are on the same NVDIMM region (no redundancy)";
		return -EINVAL;
	}
	pc->pmem_bytes = min(pc->pmem_bytes, mr->bytes);
	return 0;
}

/*
 * The namespace can be unbound under a live table (a sysfs unbind, which
 * ndctl's --force does): kill_dax() clears the dax device's alive bit and
 * waits for every dax_read_lock() section, and the namespace's mapping is
 * torn down right after.  So every use of pc->kaddr, and every page-less
 * bio that points at pmem, starts inside pmc_pmem_enter(): once the
 * namespace is gone the cache fails I/O with -EIO and stores nothing more;
 * what pmem holds (dirty blocks included) is found again by the next table
 * load on the namespace.  The section may sleep (it is SRCU).
 *
 * Mirrored, a section that finds a live half gone drops it first
 * (pmc_mirror_lose(), M1) and goes on with the survivor; a section that
 * began before the unbind may still use both: kill_dax() waits for it.
 *
 * Returns the id for pmc_pmem_exit(), or -ENXIO if the namespace is gone.
 */
int pmc_pmem_enter(struct pmemcache *pc)
{
	int id = dax_read_lock();
	unsigned int live = READ_ONCE(pc->meta.live);

	if (unlikely(!pc->loaded))
		live = pc->mirror.dax ? 3 : 1;	/* loading: every half mapped */
	if (likely(!(live & 1) || dax_alive(pc->dax)) &&
	    likely(!(live & 2) || dax_alive(pc->mirror.dax)))
		return id;
	if (pc->loaded && pc->mirror.dax && pmc_mirror_lose(pc))
		return id;
	dax_read_unlock(id);
	/* Not while the table is being built: the load just fails. */
	if (pc->loaded && !pmc_pmem_gone(pc)) {
		pmc_health_set(pc, PMC_H_PMEM_GONE, -ENXIO);
		/* Waiters for writeback or a free block see it, give up. */
		wake_up_all(&pc->wb_wait);
		wake_up_all(&pc->free_wait);
	}
	return -ENXIO;
}

void pmc_pmem_exit(int id)
{
	dax_read_unlock(id);
}

bool pmc_pmem_gone(struct pmemcache *pc)
{
	return test_bit(PMC_H_PMEM_GONE, &pc->health);
}

void pmc_pmem_release(struct pmemcache *pc)
{
	if (pc->dax && pc->dax_owned)
		put_dax(pc->dax);
	pc->dax = NULL;
	pc->kaddr = NULL;
	if (pc->mirror.dax && pc->mirror.dax_owned)
		put_dax(pc->mirror.dax);
	pc->mirror.dax = NULL;
	pc->mirror.kaddr = NULL;
}

/*
 * Identity of the origin recorded in the superblock: its size, and for an
 * md array its UUID (the one mdadm --detail prints; md_array_uuid(), from
 * core-patches), so that a table that names another array is refused even
 * if it has the same size.  A partition of an array gets its number mixed
 * into the last byte.
 */
int pmc_origin_identity(struct pmemcache *pc, struct pmc_origin_id *oid)
{
	struct block_device *bdev = pc->origin->bdev;

	memset(oid, 0, sizeof(*oid));
	oid->sectors = bdev_nr_sectors(bdev);
	oid->kind = PMC_ORIGIN_ID_NONE;
#ifdef PMC_HAVE_MD_ARRAY_UUID
	if (!md_array_uuid(bdev->bd_disk, oid->uuid)) {
		oid->uuid[15] ^= bdev->bd_partno;
		oid->kind = PMC_ORIGIN_ID_MD;
	}
#endif
	return 0;
}
