// SPDX-License-Identifier: GPL-2.0
/*
 * libpmc: userspace persistence primitives for the shared metadata code,
 * and check/drain built on pmc_meta_open()/pmc_meta_recover().
 */
/* Not _GNU_SOURCE and no <linux/fs.h>: both pull <linux/types.h>, whose
 * __le64 clashes with the typedefs of pmc_shim_user.h. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "libpmc.h"

#ifndef BLKGETSIZE64
#define BLKGETSIZE64	_IOR(0x12, 114, size_t)	/* <linux/fs.h> */
#endif
#ifndef BLKSSZGET
#define BLKSSZGET	_IO(0x12, 104)
#endif

/* md's fixed block major (include/uapi/linux/major.h MD_MAJOR). */
#define PMC_MD_MAJOR	9

char pmc_errmsg[512];
const char *pmc_sysfs_root = "/sys";

static void set_errmsg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_errmsg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(pmc_errmsg, sizeof(pmc_errmsg), fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Shim primitives (pmc_shim_user.h): addresses -> file offsets.       */

#define PMC_MAX_IMAGES 4
static struct pmc_image *images[PMC_MAX_IMAGES];

static struct pmc_image *image_of(const void *p, size_t len, u64 *off)
{
	const u8 *b = p;
	int i;

	for (i = 0; i < PMC_MAX_IMAGES; i++) {
		struct pmc_image *im = images[i];

		if (im && b >= im->base && b + len <= im->base + im->map_len) {
			*off = b - im->base;
			return im;
		}
	}
	return NULL;
}

static int full_pread(int fd, void *buf, size_t len, u64 off)
{
	u8 *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

static int full_pwrite(int fd, const void *buf, size_t len, u64 off)
{
	const u8 *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

/*
 * Read-ahead window (libpmc.h): reads of a record or less are served from
 * the aligned PMC_READ_WINDOW bytes around them, read with one pread.
 * Stores that reach the file update the window too.  If the window cannot
 * be read (a media error in it), every read in its range goes to the file
 * on its own, as without a window: only the records that fail are lost.
 */
#ifndef PMC_READ_WINDOW		/* tests build a one-record window */
#define PMC_READ_WINDOW		(1U << 20)
#endif

static bool win_holds(const struct pmc_image *im, u64 off, size_t len)
{
	return im->win_len && off >= im->win_off &&
	       off + len <= im->win_off + im->win_len;
}

static bool win_read(struct pmc_image *im, void *dst, size_t len, u64 off)
{
	if (!win_holds(im, off, len)) {
		if (!im->win)
			im->win = malloc(PMC_READ_WINDOW);
		if (!im->win)
			return false;
		im->win_off = off & ~(u64)(PMC_READ_WINDOW - 1);
		im->win_len = im->map_len - im->win_off;
		if (im->win_len > PMC_READ_WINDOW)
			im->win_len = PMC_READ_WINDOW;
		im->win_failed = full_pread(im->dev.fd, im->win, im->win_len,
					    im->win_off) != 0;
	}
	if (im->win_failed || !win_holds(im, off, len))
		return false;
	memcpy(dst, im->win + (off - im->win_off), len);
	return true;
}

/*
 * Recovery looks every record's block up in the index just after reading
 * the record: with a big index, a cache and a TLB miss each.  A hint that
 * cannot change a result: while records come from the window, start
 * loading the hash bucket of the record 16 slots on (64 GiB check with
 * 15.6 M live records: 1.3 s -> 0.8 s).
 */
#define PMC_PREFETCH_AHEAD	(16 * PMC_RECORD_SIZE)

static void prefetch_bucket_ahead(const struct pmc_image *im, u64 off)
{
	u64 ahead = off + PMC_PREFETCH_AHEAD, oblock;

	if (!im->idx.bucket || !win_holds(im, ahead, sizeof(oblock)))
		return;
	memcpy(&oblock, im->win + (ahead - im->win_off), sizeof(oblock));
	oblock = le64_to_cpu(oblock) & PMC_OBLOCK_MAX;
	__builtin_prefetch(&im->idx.bucket[pmc_index_bucket(&im->idx, oblock)]);
}

/* The file bytes [off, +len) were stored from @src (@err: or not). */
static void win_store(struct pmc_image *im, const void *src, size_t len,
		      u64 off, int err)
{
	u64 win_end = im->win_off + im->win_len, lo, hi;

	if (!im->win_len || off >= win_end || off + len <= im->win_off)
		return;
	if (err) {
		im->win_len = 0;	/* the file holds who knows what */
		return;
	}
	lo = off > im->win_off ? off : im->win_off;
	hi = off + len < win_end ? off + len : win_end;
	memcpy(im->win + (lo - im->win_off), (const u8 *)src + (lo - off), hi - lo);
}

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	struct pmc_image *im;
	u64 off;
	int r;

	(void)tag;
	im = image_of(dst, len, &off);
	if (!im)
		abort();	/* the shared code wrote outside the image */
	if (im->readonly) {
		im->dropped++;
		return;
	}
	r = full_pwrite(im->dev.fd, src, len, off);
	win_store(im, src, len, off, r);
	if (r && !im->io_error)
		im->io_error = r;
	im->stores++;
	im->dirty_stores = true;
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
	int i;

	(void)tag;
	for (i = 0; i < PMC_MAX_IMAGES; i++) {
		struct pmc_image *im = images[i];

		if (!im || !im->dirty_stores)
			continue;
		if (fdatasync(im->dev.fd) && !im->io_error)
			im->io_error = -errno;
		im->dirty_stores = false;
	}
}

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	struct pmc_image *im;
	u64 off;

	im = image_of(src, len, &off);
	if (!im)
		abort();
	if (len <= PMC_RECORD_SIZE && win_read(im, dst, len, off)) {
		prefetch_bucket_ahead(im, off);
		return 0;
	}
	return full_pread(im->dev.fd, dst, len, off) ? -EIO : 0;
}

/* pmc_crc32c(), pmc_alloc_array(), pmc_free_array(): user/pmc_shim_user.c */

void pmc_random_bytes(void *p, size_t len)
{
	u8 *b = p;

	while (len) {
		ssize_t n = getrandom(b, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			abort();
		}
		b += n;
		len -= n;
	}
}

u64 pmc_now_seconds(void)
{
	return (u64)time(NULL);
}

void pmc_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > 3 && !getenv("PMEMCACHECTL_DEBUG"))
		return;
	va_start(ap, fmt);
	fputs("pmemcachectl: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ------------------------------------------------------------------ */
/* Devices                                                             */

int pmc_dev_open(struct pmc_dev *d, const char *path, int flags, bool excl)
{
	struct stat st;
	int fd, r;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	snprintf(d->path, sizeof(d->path), "%s", path);
	if (stat(path, &st)) {
		r = -errno;
		set_errmsg("%s: %s", path, strerror(errno));
		return r;
	}
	if (S_ISBLK(st.st_mode)) {
		d->is_blk = true;
		d->rdev = st.st_rdev;
		if (excl)
			flags |= O_EXCL;
	} else if (!S_ISREG(st.st_mode)) {
		set_errmsg("%s: not a block device or a regular file", path);
		return -ENOTBLK;
	}
	fd = open(path, flags | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		if (errno == EBUSY)
			set_errmsg("%s: device is busy (in use by a dm table, md or a mount)", path);
		else
			set_errmsg("%s: %s", path, strerror(errno));
		return r;
	}
	d->fd = fd;
	if (d->is_blk) {
		u64 size;
		int lbs;

		if (ioctl(fd, BLKGETSIZE64, &size) || ioctl(fd, BLKSSZGET, &lbs)) {
			r = -errno;
			set_errmsg("%s: cannot read the device size: %s", path, strerror(errno));
			pmc_dev_close(d);
			return r;
		}
		d->size = size;
		d->lbs = (u32)lbs;
		/* The module writes pmem behind the page cache: drop stale pages. */
		posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	} else {
		d->size = (u64)st.st_size;
		d->lbs = PMC_SECTOR_SIZE;
	}
	return 0;
}

void pmc_dev_close(struct pmc_dev *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
}

int pmc_read_sysfs(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -errno;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* "%pU" (byte order as stored) with or without dashes. */
static int parse_uuid(const char *s, u8 out[16])
{
	int n = 0, hi, lo;

	while (*s && n < 16) {
		if (*s == '-' || *s == ':') {
			s++;
			continue;
		}
		hi = hexval(s[0]);
		lo = hi < 0 ? -1 : hexval(s[1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[n++] = (u8)(hi << 4 | lo);
		s += 2;
	}
	return n == 16 && !*s ? 0 : -1;
}

void pmc_format_uuid(const u8 u[16], char out[37])
{
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9],
		 u[10], u[11], u[12], u[13], u[14], u[15]);
}

int pmc_origin_identify(const struct pmc_dev *d, struct pmc_origin_id *oid)
{
	char sys[PATH_MAX + 32], real[PATH_MAX], buf[128];
	unsigned int maj, min, partno = 0;

	memset(oid, 0, sizeof(*oid));
	oid->sectors = d->size / PMC_SECTOR_SIZE;
	oid->kind = PMC_ORIGIN_ID_NONE;
	if (!d->is_blk)
		return 0;

	snprintf(sys, sizeof(sys), "%s/dev/block/%u:%u", pmc_sysfs_root,
		 major(d->rdev), minor(d->rdev));
	if (!realpath(sys, real)) {
		set_errmsg("%s: no sysfs entry %s", d->path, sys);
		return -ENOENT;
	}
	snprintf(sys, sizeof(sys), "%s/partition", real);
	if (!pmc_read_sysfs(sys, buf, sizeof(buf))) {
		partno = (unsigned int)strtoul(buf, NULL, 10);
		*strrchr(real, '/') = 0;	/* the whole disk */
	}
	snprintf(sys, sizeof(sys), "%s/dev", real);
	if (pmc_read_sysfs(sys, buf, sizeof(buf)) ||
	    sscanf(buf, "%u:%u", &maj, &min) != 2 || maj != PMC_MD_MAJOR)
		return 0;
	snprintf(sys, sizeof(sys), "%s/md/uuid", real);
	if (pmc_read_sysfs(sys, buf, sizeof(buf)) || parse_uuid(buf, oid->uuid)) {
		set_errmsg("%s: md array without a readable md/uuid in sysfs", d->path);
		return -ENODATA;
	}
	oid->uuid[15] ^= (u8)partno;
	oid->kind = PMC_ORIGIN_ID_MD;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Images                                                              */

int pmc_image_open(struct pmc_image *im, const char *path, bool readonly,
		   bool excl)
{
	int i, r;

	memset(im, 0, sizeof(*im));
	r = pmc_dev_open(&im->dev, path, readonly ? O_RDONLY : O_RDWR, excl);
	if (r)
		return r;
	im->readonly = readonly;
	im->pmem_bytes = im->dev.size & ~(u64)(PMC_DATA_ALIGN - 1);
	if (im->pmem_bytes < PMC_SUPER_AREA + 2 * PMC_DATA_ALIGN) {
		set_errmsg("%s: too small for a cache (%llu bytes, need at least %u)",
			   path, (unsigned long long)im->dev.size,
			   PMC_SUPER_AREA + 2 * PMC_DATA_ALIGN);
		pmc_dev_close(&im->dev);
		return -ENOSPC;
	}
	im->map_len = im->pmem_bytes;
	im->base = mmap(NULL, im->map_len, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (im->base == MAP_FAILED) {
		r = -errno;
		im->base = NULL;
		set_errmsg("%s: cannot reserve %llu bytes of address space", path,
			   (unsigned long long)im->map_len);
		pmc_dev_close(&im->dev);
		return r;
	}
	for (i = 0; i < PMC_MAX_IMAGES; i++) {
		if (!images[i]) {
			images[i] = im;
			return 0;
		}
	}
	munmap(im->base, im->map_len);
	pmc_dev_close(&im->dev);
	set_errmsg("too many open images");
	return -EMFILE;
}

void pmc_image_close(struct pmc_image *im)
{
	int i;

	if (im->recovered)
		pmc_index_destroy(&im->idx);
	im->recovered = false;
	for (i = 0; i < PMC_MAX_IMAGES; i++)
		if (images[i] == im)
			images[i] = NULL;
	if (im->base)
		munmap(im->base, im->map_len);
	im->base = NULL;
	free(im->win);
	im->win = NULL;
	im->win_len = 0;
	pmc_dev_close(&im->dev);
}

const char *pmc_verdict_name(enum pmc_verdict v)
{
	static const char *const names[] = {
		[PMC_V_CLEAN] = "clean", [PMC_V_DIRTY] = "dirty",
		[PMC_V_BLANK] = "blank", [PMC_V_FORMATTING] = "formatting",
		[PMC_V_FOREIGN] = "foreign", [PMC_V_CORRUPT] = "corrupt",
		[PMC_V_DAMAGED] = "damaged", [PMC_V_MISMATCH] = "mismatch",
	};

	return (unsigned int)v < ARRAY_SIZE(names) ? names[v] : "unknown";
}

/* Does live @slot (oblock, valid mask) lie inside an origin of @sectors? */
static bool slot_in_origin(const struct pmc_meta *m, u64 v, u64 sectors)
{
	u64 first = pmc_slot_oblock(v) * m->spb;
	u32 mask = pmc_slot_mask(v);
	u32 top = mask ? 31 - __builtin_clz(mask) : 0;	/* last valid sector */

	return first / m->spb == pmc_slot_oblock(v) && first + top < sectors;
}

int pmc_image_check(struct pmc_image *im, const struct pmc_origin_id *oid,
		    const char **why)
{
	struct pmc_origin_id rec;
	struct pmc_super *sb = &im->sb;
	bool may_grow;
	u64 end;
	u64 i, magic;
	int r;

	*why = NULL;
	if (im->recovered) {
		pmc_index_destroy(&im->idx);
		im->recovered = false;
	}
	if (pmc_pmem_read(sb, im->base, sizeof(*sb))) {
		*why = "media error reading the superblock";
		return PMC_V_CORRUPT;
	}
	im->sb_read = true;
	magic = le64_to_cpu(sb->magic);

	/* The identity the cache records: validate everything else first. */
	memset(&rec, 0, sizeof(rec));
	rec.sectors = le64_to_cpu(sb->origin_sectors);
	rec.kind = le32_to_cpu(sb->origin_id_kind);
	memcpy(rec.uuid, sb->origin_uuid, sizeof(rec.uuid));
	r = pmc_meta_open(&im->meta, im->base, im->pmem_bytes,
			  le32_to_cpu(sb->block_size), &rec, why);
	if (r == -ENODATA) {
		if (magic == PMC_MAGIC_FORMATTING) {
			*why = "a format was interrupted: the module formats it again on load";
			return PMC_V_FORMATTING;
		}
		*why = "the superblock area is all zero: the module formats it on load";
		return PMC_V_BLANK;
	}
	if (r == -ENOMEM)
		return r;
	if (r)
		return magic == PMC_MAGIC ? PMC_V_CORRUPT : PMC_V_FOREIGN;

	r = pmc_index_init(&im->idx, im->meta.n_blocks);
	if (r) {
		set_errmsg("cannot allocate the index for %llu blocks",
			   (unsigned long long)im->meta.n_blocks);
		return r;
	}
	im->recovered = true;
	r = pmc_meta_recover(&im->meta, &im->idx, &im->rs);
	if (r) {
		*why = "recovery failed";
		return PMC_V_DAMAGED;
	}
	/*
	 * An md array may have grown (mdadm --grow) since the format: the
	 * module then caches blocks up to its current end, and the superblock
	 * keeps the size recorded then.  The array given bounds the records;
	 * checked alone, records past the recorded size are counted apart.
	 */
	end = rec.sectors;
	may_grow = rec.kind != PMC_ORIGIN_ID_NONE;
	if (oid && may_grow && oid->kind == rec.kind && oid->sectors > end &&
	    !memcmp(oid->uuid, rec.uuid, sizeof(rec.uuid)))
		end = oid->sectors;
	im->out_of_range = 0;
	im->past_recorded = 0;
	im->dirty_sectors = 0;
	for (i = 0; i < im->meta.n_blocks; i++) {
		u64 v = im->idx.slot[i];

		if (!(pmc_slot_flags(v) & PMC_SF_USED))
			continue;
		if (!slot_in_origin(&im->meta, v, end)) {
			if (!oid && may_grow && slot_in_origin(&im->meta, v, ~0ULL))
				im->past_recorded++;
			else
				im->out_of_range++;
		}
		if (pmc_slot_flags(v) & PMC_SF_DIRTY)
			im->dirty_sectors += __builtin_popcount(pmc_slot_mask(v));
	}
	if (im->out_of_range) {
		set_errmsg("%llu live records point beyond the end of the origin",
			   (unsigned long long)im->out_of_range);
		*why = pmc_errmsg;
		return PMC_V_DAMAGED;
	}
	if (im->rs.unreadable) {
		set_errmsg("%llu records are unreadable (media errors): their blocks are lost",
			   (unsigned long long)im->rs.unreadable);
		*why = pmc_errmsg;
		return PMC_V_DAMAGED;
	}
	if (oid) {
		struct pmc_meta tmp;
		const char *w = NULL;

		r = pmc_meta_open(&tmp, im->base, im->pmem_bytes,
				  le32_to_cpu(sb->block_size), oid, &w);
		if (r) {
			*why = w ? w : "origin identity differs";
			return PMC_V_MISMATCH;
		}
	}
	return im->rs.dirty ? PMC_V_DIRTY : PMC_V_CLEAN;
}

int pmc_image_drain(struct pmc_image *im, struct pmc_dev *origin,
		    bool mark_clean, bool dry_run, struct pmc_drain_stats *st)
{
	struct pmc_meta *m = &im->meta;
	u8 *buf;
	u64 i;
	int r = 0;

	memset(st, 0, sizeof(*st));
	if (!im->recovered) {
		set_errmsg("drain needs a checked image");
		return -EINVAL;
	}
	buf = malloc(m->block_size);
	if (!buf)
		return -ENOMEM;
	for (i = 0; i < m->n_blocks; i++) {
		u64 v = im->idx.slot[i];
		u32 f = pmc_slot_flags(v), mask = pmc_slot_mask(v), s, e;
		u64 sector = pmc_slot_oblock(v) * m->spb;

		if (!(f & PMC_SF_USED) || !(f & PMC_SF_DIRTY) || (f & PMC_SF_STALE))
			continue;
		if (pmc_pmem_read(buf, pmc_meta_data(m, (u32)i), m->block_size)) {
			st->read_errors++;
			continue;
		}
		/* data_crc: never write back bytes that fail their crc */
		if (m->data_crc && pmc_meta_check_data(m, m->base, (u32)i)) {
			st->crc_errors++;
			continue;
		}
		/* Runs of valid sectors; the origin keeps the others. */
		for (s = 0; s < m->spb; s = e) {
			if (!(mask & (1U << s))) {
				e = s + 1;
				continue;
			}
			for (e = s; e < m->spb && (mask & (1U << e)); e++)
				;
			st->sectors += e - s;
			st->bytes += (u64)(e - s) * PMC_SECTOR_SIZE;
			if (dry_run)
				continue;
			r = full_pwrite(origin->fd, buf + s * PMC_SECTOR_SIZE,
					(e - s) * PMC_SECTOR_SIZE,
					(sector + s) * PMC_SECTOR_SIZE);
			if (r) {
				set_errmsg("%s: write at sector %llu failed: %s",
					   origin->path,
					   (unsigned long long)(sector + s),
					   strerror(-r));
				goto out;
			}
		}
		st->blocks++;
		pmc_meta_wb_start(&im->idx, (u32)i);	/* drained: mark it below */
	}
	if (dry_run)
		goto out;
	if (fdatasync(origin->fd)) {
		r = -errno;
		set_errmsg("%s: flush failed: %s", origin->path, strerror(errno));
		goto out;
	}
	if (!mark_clean || im->readonly)
		goto out;
	/* C0 done (the origin holds the data, durably): now C1 + fence. */
	for (i = 0; i < m->n_blocks; i++) {
		u64 v = im->idx.slot[i];
		u32 f = pmc_slot_flags(v), freed;

		if (!(f & PMC_SF_USED) || !(f & PMC_SF_WB))
			continue;
		if (pmc_meta_wb_done(m, &im->idx, (u32)i, true, &freed))
			continue;
		st->marked_clean++;
	}
	pmc_meta_fence(PMC_P_CLEAN);
	if (im->io_error) {
		r = im->io_error;
		set_errmsg("%s: marking blocks clean failed: %s", im->dev.path,
			   strerror(-r));
	}
out:
	free(buf);
	if (!r && st->read_errors) {
		set_errmsg("%llu dirty blocks could not be read from %s (media errors)",
			   (unsigned long long)st->read_errors, im->dev.path);
		r = -EIO;
	} else if (!r && st->crc_errors) {
		set_errmsg("%llu dirty blocks fail their data crc on %s: not written (a mirror's other half may hold them)",
			   (unsigned long long)st->crc_errors, im->dev.path);
		r = -EIO;
	}
	return r;
}
