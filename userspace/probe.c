// SPDX-License-Identifier: GPL-2.0
/*
 * Caches and origins found without device-mapper (probe.h): superblock
 * areas, sysfs block devices, origin identities, the kept-dirty mark.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/sysmacros.h>

#include "libpmc.h"
#include "pmc_mirror.h"
#include "probe.h"

#ifndef O_DIRECT
#define O_DIRECT	040000		/* x86 <asm-generic/fcntl.h> */
#endif

/* "PMCKEPTD" as a little-endian u64. */
#define PMCTL_MARK_MAGIC	0x445450454b434d50ULL
#define MARK_SIZE		512U

struct pmctl_mark {
	__le64 magic;
	__le64 time;
	__u8 cache_uuid[16];
	__le32 csum;		/* crc32c(~0, the 32 bytes above) */
};

void pmctl_uuid_str(const uint8_t u[16], char out[37])
{
	pmc_format_uuid(u, out);
}

void pmctl_dm_uuid(const uint8_t u[16], char *out, size_t len)
{
	char s[37];

	pmctl_uuid_str(u, s);
	snprintf(out, len, "%s%s", PMCTL_DM_UUID_PREFIX, s);
}

void pmctl_default_name(const uint8_t u[16], char *out, size_t len)
{
	snprintf(out, len, "pmemcache-%02x%02x%02x%02x", u[0], u[1], u[2], u[3]);
}

static bool mark_valid(const struct pmctl_mark *m, const uint8_t uuid[16])
{
	return le64_to_cpu(m->magic) == PMCTL_MARK_MAGIC &&
	       le32_to_cpu(m->csum) == pmc_crc32c(~0U, m, offsetof(struct pmctl_mark, csum)) &&
	       !memcmp(m->cache_uuid, uuid, 16);
}

/* The module's own reader of the mirror info slots (pmc_mirror.c). */
static void mirror_parse(const void *area, struct pmctl_half *out)
{
	struct pmc_mirror_half h = { .present = true };

	pmc_mirror_parse((const struct pmc_mirror_info *)
			 ((const u8 *)area + PMC_MIRROR_INFO_OFFSET), &h);
	if (!h.has_info)
		return;
	out->valid = true;
	memcpy(out->pair_uuid, h.info.pair_uuid, 16);
	memcpy(out->half_uuid, h.info.half_uuid, 16);
	memcpy(out->partner_uuid, h.info.partner_uuid, 16);
	out->generation = h.info.generation;
	out->partner_stale = h.info.flags & PMC_MIRROR_PARTNER_STALE;
	out->resyncing = h.info.flags & PMC_MIRROR_RESYNCING;
}

void pmctl_sb_parse(const void *area, struct pmctl_sb *out)
{
	const struct pmc_super *sb = area;
	const struct pmctl_mark *mk =
		(const struct pmctl_mark *)((const u8 *)area + PMCTL_MARK_OFFSET);
	u64 magic = le64_to_cpu(sb->magic), n, off;
	u32 bs = le32_to_cpu(sb->block_size);

	memset(out, 0, sizeof(*out));
	mirror_parse(area, &out->mirror);
	if (magic == PMC_MAGIC_FORMATTING) {
		out->state = PMCTL_SB_FORMATTING;
		return;
	}
	if (magic != PMC_MAGIC) {
		out->state = PMCTL_SB_NONE;
		return;
	}
	/* The checks of pmc_meta_open() that need no origin. */
	out->state = PMCTL_SB_BAD;
	if (le32_to_cpu(sb->csum) != pmc_meta_super_csum(sb) ||
	    le32_to_cpu(sb->version) != PMC_VERSION ||
	    le32_to_cpu(sb->sb_size) != sizeof(*sb) ||
	    le32_to_cpu(sb->record_size) != PMC_RECORD_SIZE ||
	    le64_to_cpu(sb->records_offset) != PMC_RECORDS_OFFSET ||
	    (le64_to_cpu(sb->features) & ~PMC_FEATURES_KNOWN) ||
	    !(le32_to_cpu(sb->record_seed) & 1) ||
	    pmc_meta_geometry(le64_to_cpu(sb->pmem_bytes), bs, &n, &off) ||
	    n != le64_to_cpu(sb->n_blocks) || off != le64_to_cpu(sb->data_offset))
		return;
	out->state = PMCTL_SB_CACHE;
	memcpy(out->cache_uuid, sb->cache_uuid, 16);
	memcpy(out->origin_uuid, sb->origin_uuid, 16);
	out->block_size = bs;
	out->origin_kind = le32_to_cpu(sb->origin_id_kind);
	out->origin_sectors = le64_to_cpu(sb->origin_sectors);
	pmctl_settings_parse(area, out->cache_uuid, &out->settings);
	if (mark_valid(mk, out->cache_uuid)) {
		out->kept_dirty = true;
		out->kept_time = le64_to_cpu(mk->time);
	}
}

int pmctl_sb_read(const char *path, struct pmctl_sb *sb)
{
	void *buf;
	ssize_t n;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL) {	/* tmpfs files: no O_DIRECT */
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd >= 0)
			posix_fadvise(fd, 0, PMC_SUPER_AREA, POSIX_FADV_DONTNEED);
	}
	if (fd < 0)
		return -errno;
	if (posix_memalign(&buf, PMC_SUPER_AREA, PMC_SUPER_AREA)) {
		close(fd);
		return -ENOMEM;
	}
	n = pread(fd, buf, PMC_SUPER_AREA, 0);
	if (n < 0)
		r = -errno;
	else if (n < (ssize_t)PMC_SUPER_AREA)
		memset((char *)buf + n, 0, PMC_SUPER_AREA - n);	/* tiny device */
	if (!r)
		pmctl_sb_parse(buf, sb);
	free(buf);
	close(fd);
	return r;
}

void pmctl_mark_build(void *buf, const uint8_t uuid[16], bool set, uint64_t now)
{
	struct pmctl_mark *m = buf;

	memset(buf, 0, MARK_SIZE);
	if (!set)
		return;
	m->magic = cpu_to_le64(PMCTL_MARK_MAGIC);
	m->time = cpu_to_le64(now);
	memcpy(m->cache_uuid, uuid, 16);
	m->csum = cpu_to_le32(pmc_crc32c(~0U, m, offsetof(struct pmctl_mark, csum)));
}

int pmctl_area_write(const char *path, const void *buf, size_t len, off_t off)
{
	int fd, r = 0;

	fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL)		/* tmpfs files: no O_DIRECT */
		fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	errno = 0;
	if (pwrite(fd, buf, len, off) != (ssize_t)len)
		r = errno ? -errno : -EIO;
	else if (fsync(fd))
		r = -errno;
	if (close(fd) && !r)
		r = -errno;
	return r;
}

int pmctl_mark_write(const char *path, const uint8_t uuid[16], bool set,
		     uint64_t now)
{
	void *buf;
	int r;

	if (posix_memalign(&buf, PMC_SUPER_AREA, MARK_SIZE))
		return -ENOMEM;
	pmctl_mark_build(buf, uuid, set, now);
	r = pmctl_area_write(path, buf, MARK_SIZE, PMCTL_MARK_OFFSET);
	free(buf);
	return r;
}

/* ------------------------------------------------------------------ */
/* sysfs                                                               */

static const char *env_or(const char *var, const char *def)
{
	const char *v = getenv(var);

	return v && *v ? v : def;
}

const char *pmctl_sysfs_root(void)
{
	return env_or("PMEMCACHECTL_SYSFS", "/sys");
}

const char *pmctl_dev_root(void)
{
	return env_or("PMEMCACHECTL_DEVDIR", "/dev");
}

int pmctl_blk_get(const char *name, struct pmctl_blk *b)
{
	char p[PATH_MAX], buf[64];
	unsigned long long sectors;
	size_t i;

	memset(b, 0, sizeof(*b));
	if (strlen(name) >= sizeof(b->name) || strchr(name, '/') || name[0] == '.')
		return -1;
	snprintf(p, sizeof(p), "%s/class/block/%s/dev", pmctl_sysfs_root(), name);
	if (pmc_read_sysfs(p, buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &b->major, &b->minor) != 2)
		return -1;
	snprintf(p, sizeof(p), "%s/class/block/%s/size", pmctl_sysfs_root(), name);
	if (pmc_read_sysfs(p, buf, sizeof(buf)) || sscanf(buf, "%llu", &sectors) != 1)
		return -1;
	b->sectors = sectors;
	snprintf(b->name, sizeof(b->name), "%s", name);
	snprintf(b->path, sizeof(b->path), "%s/%s", pmctl_dev_root(), name);
	/* "cciss!c0d0" is /dev/cciss/c0d0 */
	for (i = strlen(pmctl_dev_root()); b->path[i]; i++)
		if (b->path[i] == '!')
			b->path[i] = '/';
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(((const struct pmctl_blk *)a)->name,
		      ((const struct pmctl_blk *)b)->name);
}

int pmctl_blk_list(const char *prefix, struct pmctl_blk *out, int max)
{
	char p[PATH_MAX];
	struct dirent *e;
	DIR *d;
	int n = 0;

	snprintf(p, sizeof(p), "%s/class/block", pmctl_sysfs_root());
	d = opendir(p);
	if (!d)
		return -1;
	while ((e = readdir(d)) && n < max) {
		if (e->d_name[0] == '.' ||
		    (prefix && strncmp(e->d_name, prefix, strlen(prefix))))
			continue;
		if (!pmctl_blk_get(e->d_name, &out[n]))
			n++;
	}
	closedir(d);
	qsort(out, n, sizeof(*out), by_name);
	return n;
}

bool pmctl_is_origin_of(const struct pmctl_blk *b, const struct pmctl_sb *sb)
{
	struct pmc_origin_id oid;
	struct pmc_dev d;
	const char *saved = pmc_sysfs_root;
	int r;

	/* An md array may have grown since the format (mdadm --grow). */
	if (sb->state != PMCTL_SB_CACHE || sb->origin_kind != PMC_ORIGIN_ID_MD ||
	    b->sectors < sb->origin_sectors)
		return false;
	memset(&d, 0, sizeof(d));
	snprintf(d.path, sizeof(d.path), "%s", b->path);
	d.fd = -1;
	d.is_blk = true;
	d.rdev = makedev(b->major, b->minor);
	d.size = b->sectors * PMC_SECTOR_SIZE;
	pmc_sysfs_root = pmctl_sysfs_root();
	r = pmc_origin_identify(&d, &oid);
	pmc_sysfs_root = saved;
	return !r && oid.kind == sb->origin_kind && oid.sectors >= sb->origin_sectors &&
	       !memcmp(oid.uuid, sb->origin_uuid, 16);
}

int pmctl_find_origin(const struct pmctl_sb *sb, struct pmctl_blk *out, int max)
{
	static struct pmctl_blk all[1024];
	int i, n, found = 0;

	if (sb->state != PMCTL_SB_CACHE || sb->origin_kind != PMC_ORIGIN_ID_MD)
		return 0;
	n = pmctl_blk_list(NULL, all, (int)(sizeof(all) / sizeof(all[0])));
	for (i = 0; i < n; i++) {
		if (!pmctl_is_origin_of(&all[i], sb))
			continue;
		if (found < max)
			out[found] = all[i];
		found++;
	}
	return found;
}

void pmctl_identity_str(const struct pmctl_sb *sb, char *out, size_t len)
{
	char u[37];

	if (sb->origin_kind == PMC_ORIGIN_ID_MD) {
		pmctl_uuid_str(sb->origin_uuid, u);
		snprintf(out, len, "md array %s, %llu sectors", u,
			 (unsigned long long)sb->origin_sectors);
	} else {
		snprintf(out, len, "size %llu sectors only (not an md array)",
			 (unsigned long long)sb->origin_sectors);
	}
}

int pmctl_cache_dirty(const char *path, uint64_t *dirty)
{
	struct pmc_image im;
	const char *why;
	int r, v;

	*dirty = 0;
	r = pmc_image_open(&im, path, true, true);
	if (r)
		return r;
	v = pmc_image_check(&im, NULL, &why);
	if (v < 0)
		r = v;
	else if (v == PMC_V_CLEAN || v == PMC_V_DIRTY)
		*dirty = im.rs.dirty;
	else
		r = -EUCLEAN;	/* nothing to forget or keep: leave it be */
	pmc_image_close(&im);
	return r;
}

int pmctl_sb_forget(const char *path)
{
	static const char zero[PMC_SUPER_AREA];
	int fd = open(path, O_WRONLY | O_EXCL | O_CLOEXEC);
	int r = 0;

	if (fd < 0)
		return -errno;
	if (pwrite(fd, zero, sizeof(zero), 0) != sizeof(zero) || fsync(fd))
		r = errno ? -errno : -EIO;
	if (close(fd) && !r)
		r = -errno;
	return r;
}

/*
 * Read the superblock area of @path into @get (if not NULL), then write
 * @put there (zeros if NULL).  Not O_EXCL: the cache's own table may hold
 * the device (suspended, so nothing writes the area).  O_DIRECT: the
 * module reads pmem directly, never this device's page cache.
 */
_Static_assert(PMCTL_SB_AREA == PMC_SUPER_AREA, "probe.h's copy of the size");

static int sb_area_swap(const char *path, void *get, const void *put)
{
	void *buf;
	int fd, r = 0;

	if (posix_memalign(&buf, PMC_SUPER_AREA, PMC_SUPER_AREA))
		return -ENOMEM;
	fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		goto out;
	}
	errno = 0;
	if (get) {
		if (pread(fd, buf, PMC_SUPER_AREA, 0) != PMC_SUPER_AREA)
			r = errno ? -errno : -EIO;
		else
			memcpy(get, buf, PMC_SUPER_AREA);
	}
	if (!r) {
		if (put)
			memcpy(buf, put, PMC_SUPER_AREA);
		else
			memset(buf, 0, PMC_SUPER_AREA);
		if (pwrite(fd, buf, PMC_SUPER_AREA, 0) != PMC_SUPER_AREA || fsync(fd))
			r = errno ? -errno : -EIO;
	}
	if (close(fd) && !r)
		r = -errno;
out:
	free(buf);
	return r;
}

int pmctl_sb_take(const char *path, void *saved)
{
	return sb_area_swap(path, saved, NULL);
}

int pmctl_sb_put_back(const char *path, const void *saved)
{
	return sb_area_swap(path, NULL, saved);
}

bool pmctl_is_partner_of(const struct pmctl_sb *sb, const struct pmctl_blk *b)
{
	struct pmctl_sb other;

	return sb->mirror.valid && !pmctl_sb_read(b->path, &other) &&
	       other.mirror.valid &&
	       !memcmp(other.mirror.pair_uuid, sb->mirror.pair_uuid, 16) &&
	       !memcmp(other.mirror.half_uuid, sb->mirror.partner_uuid, 16);
}
