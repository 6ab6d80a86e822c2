// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl create: device checks and the metadata already on the cache
 * device, before any table is loaded, so that a bad request gets one
 * precise line here instead of a generic -EINVAL from the kernel.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "pmemcachectl.h"
#include "libpmc.h"
#include "precheck.h"
#include "probe.h"

/* The sysfs folder of the whole disk that holds @dev. */
static int sysfs_disk_dir(dev_t dev, char *out, size_t len)
{
	char p[PATH_MAX + 16], real[PATH_MAX];
	struct stat st;

	snprintf(p, sizeof(p), "/sys/dev/block/%u:%u", major(dev), minor(dev));
	if (!realpath(p, real))
		return -1;
	snprintf(p, sizeof(p), "%s/partition", real);
	if (!stat(p, &st))
		*strrchr(real, '/') = 0;
	if (strlen(real) >= len)
		return -1;
	strcpy(out, real);
	return 0;
}

/*
 * The cache device: a pmem namespace, ideally raw (label-less, no struct
 * page: what the target is built for).  A raw namespace has no
 * QUEUE_FLAG_DAX (the pmem driver sets it only with struct pages), so the
 * nd device behind the disk decides, and queue/dax only for the rest.
 * 0, or an exit code after one error line.
 */
static int check_pmem_kind(const struct pmc_dev *d)
{
	char dir[PATH_MAX], p[PATH_MAX + 32], link[PATH_MAX], buf[16] = "";
	const char *base;
	ssize_t n;
	FILE *f;

	if (sysfs_disk_dir(d->rdev, dir, sizeof(dir))) {
		warnx_("%s: no sysfs entry: cannot tell whether it is pmem", d->path);
		return 0;
	}
	snprintf(p, sizeof(p), "%s/device", dir);
	n = readlink(p, link, sizeof(link) - 1);
	link[n > 0 ? n : 0] = 0;
	base = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	if (!strncmp(base, "namespace", 9))
		return 0;
	if (!strncmp(base, "pfn", 3)) {
		warnx_("%s is an fsdax namespace (struct page pmem), not a raw one: "
		       "it works, but writeback always uses bounce pages", d->path);
		return 0;
	}
	if (!strncmp(base, "btt", 3)) {
		err("%s is a BTT (sector mode) namespace: no DAX, the target cannot use it",
		    d->path);
		return EXIT_DEVICE;
	}
	snprintf(p, sizeof(p), "%s/queue/dax", dir);
	f = fopen(p, "re");
	if (f) {
		if (!fgets(buf, sizeof(buf), f))
			buf[0] = 0;
		fclose(f);
	}
	if (buf[0] != '1') {
		err("%s: not a pmem namespace (the target needs DAX-capable pmem)", d->path);
		return EXIT_DEVICE;
	}
	warnx_("%s is DAX-capable but not a raw pmem namespace", d->path);
	return 0;
}

/* Existing metadata on the cache device vs --format/--force. */
int create_check_cache(const struct create_opts *o, struct create_devs *d)
{
	struct pmctl_sb sb;
	struct pmc_origin_id oidv, *oid = &oidv;
	struct pmc_image im;
	const char *why;
	int v, r;

	memset(oid, 0, sizeof(*oid));
	oid->sectors = d->origin_sectors;
	oid->kind = d->origin_kind;
	memcpy(oid->uuid, d->origin_uuid, sizeof(oid->uuid));
	r = pmc_image_open(&im, o->cache, true, true);
	if (r) {
		err("%s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	if (!pmctl_sb_read(o->cache, &sb) && sb.state == PMCTL_SB_CACHE)
		d->kept_dirty = sb.kept_dirty;
	if (!o->format && !o->mirror && sb.mirror.valid) {
		/* the module refuses it too: alone it may be the stale half */
		err("%s is a half of a mirrored cache: give its other half (--mirror DEV), "
		    "or --mirror missing to start it alone", o->cache);
		pmc_image_close(&im);
		return EXIT_USAGE;
	}
	v = pmc_image_check(&im, oid, &why);
	if (v < 0) {
		err("%s: %s", o->cache, pmc_errmsg);
		pmc_image_close(&im);
		return EXIT_IO;
	}
	/* A valid cache of this origin but another block size: a mismatch too. */
	if ((v == PMC_V_CLEAN || v == PMC_V_DIRTY) &&
	    im.meta.block_size != o->block_size) {
		v = PMC_V_MISMATCH;
		why = "block size differs from the one the cache was formatted with";
	}
	r = 0;
	switch (v) {
	case PMC_V_BLANK:
	case PMC_V_FORMATTING:
		break;
	case PMC_V_CLEAN:
	case PMC_V_DIRTY:
		if (o->format && im.rs.dirty && !o->force) {
			err("%s holds %llu dirty blocks of %s: --format would lose them "
			    "(flush them first, or add --force)", o->cache,
			    (unsigned long long)im.rs.dirty, o->origin);
			r = EXIT_DIRTY;
		} else if (!o->format && im.rs.dirty && !o->force && !o->activate) {
			/*
			 * Nothing records whether the origin was written since
			 * these blocks were cached (a remove --keep-dirty, a
			 * power cut, then the origin used alone): re-attaching
			 * would write them over newer data.  Only the admin
			 * knows; activate (boot) re-attaches, the udev rule
			 * having kept the origin from use meanwhile.
			 */
			err("%s holds %llu dirty blocks for %s%s: the origin may have been "
			    "written since, and they would overwrite it (--force re-attaches "
			    "them if nothing wrote it)", o->cache,
			    (unsigned long long)im.rs.dirty, o->origin,
			    d->kept_dirty ? " kept by remove --keep-dirty" : "");
			r = EXIT_DIRTY;
		} else if (!o->format && im.rs.dirty) {
			printf("%s: loading the existing cache with %llu dirty blocks\n",
			       o->cache, (unsigned long long)im.rs.dirty);
		}
		if (!o->format) {
			d->have_uuid = true;
			memcpy(d->cache_uuid, im.sb.cache_uuid, sizeof(d->cache_uuid));
		}
		break;
	case PMC_V_MISMATCH:
		if (!o->format) {
			err("%s: %s (--format overwrites it)", o->cache, why);
			r = EXIT_MISMATCH;
		} else if (im.rs.dirty && !o->force) {
			err("%s holds %llu dirty blocks of another origin or block size: "
			    "--format would lose them (drain them, or add --force)",
			    o->cache, (unsigned long long)im.rs.dirty);
			r = EXIT_DIRTY;
		}
		break;
	case PMC_V_FOREIGN:
		if (!o->format) {
			err("%s: %s", o->cache, why);
			r = EXIT_CORRUPT;
		}
		break;
	default:	/* a pmemcache that does not validate may hold dirty data */
		if (!o->format || !o->force) {
			err("%s: %s: %s (--format --force overwrites it, losing any dirty data)",
			    o->cache, pmc_verdict_name(v), why);
			r = EXIT_CORRUPT;
		}
		break;
	}
	pmc_image_close(&im);
	return r;
}


/*
 * The second half: a pmem block device, neither the origin nor the first
 * half.  Whether the two are on one NVDIMM region, and what each holds,
 * the module decides (its one line is what the user sees).
 */
static int check_mirror_device(const struct create_opts *o,
			       const struct pmc_dev *od, const struct pmc_dev *cd)
{
	struct pmc_dev md;

	if (pmc_dev_open(&md, o->mirror, O_RDONLY, false)) {
		err("mirror %s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	pmc_dev_close(&md);
	if (!md.is_blk) {
		err("mirror %s: not a block device", o->mirror);
		return EXIT_DEVICE;
	}
	if (md.rdev == cd->rdev) {
		err("--mirror and --cache are the same device: no redundancy");
		return EXIT_USAGE;
	}
	if (md.rdev == od->rdev) {
		err("--mirror and --origin are the same device");
		return EXIT_USAGE;
	}
	return check_pmem_kind(&md);
}

int create_check_devices(const struct create_opts *o, struct create_devs *d)
{
	struct pmc_origin_id oid;
	struct pmc_dev od, cd;
	u64 n, off;
	int r;

	memset(d, 0, sizeof(*d));
	r = pmc_dev_open(&od, o->origin, O_RDONLY, false);
	if (r) {
		err("origin %s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	pmc_dev_close(&od);
	if (!od.is_blk) {
		err("origin %s: not a block device", o->origin);
		return EXIT_DEVICE;
	}
	if (od.size < o->block_size) {
		err("origin %s: too small (%llu bytes)", o->origin,
		    (unsigned long long)od.size);
		return EXIT_DEVICE;
	}
	if (od.lbs > o->block_size) {
		err("origin %s: logical block size %u is larger than the block size %u",
		    o->origin, od.lbs, o->block_size);
		return EXIT_USAGE;
	}
	r = pmc_dev_open(&cd, o->cache, O_RDONLY, false);
	if (r) {
		err("cache %s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	pmc_dev_close(&cd);
	if (!cd.is_blk) {
		err("cache %s: not a block device", o->cache);
		return EXIT_DEVICE;
	}
	if (cd.rdev == od.rdev) {
		err("origin and cache are the same device");
		return EXIT_USAGE;
	}
	if (pmc_meta_geometry(cd.size & ~(u64)(PMC_DATA_ALIGN - 1), o->block_size,
			      &n, &off)) {
		err("cache %s: too small for a cache of %u-byte blocks (%llu bytes)",
		    o->cache, o->block_size, (unsigned long long)cd.size);
		return EXIT_DEVICE;
	}
	r = check_pmem_kind(&cd);
	if (!r && o->mirror && strcmp(o->mirror, "-"))
		r = check_mirror_device(o, &od, &cd);
	if (r)
		return r;
	if (pmc_origin_identify(&od, &oid)) {
		err("origin %s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	d->origin_sectors = oid.sectors;
	d->origin_kind = oid.kind;
	memcpy(d->origin_uuid, oid.uuid, sizeof(d->origin_uuid));
	d->n_blocks = n;
	return 0;
}
