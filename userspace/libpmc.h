/* SPDX-License-Identifier: GPL-2.0 */
/*
 * libpmc: the module's own metadata code (dm-pmemcache/pmc_meta.c and
 * pmc_index.c, compiled through dm-pmemcache/user/pmc_shim_user.h) over a
 * cache image that is a block device or a plain file.
 *
 * The shared code addresses pmem through a base pointer.  Here that base is
 * an inaccessible (PROT_NONE) address range as large as the image: every
 * access goes through the shim primitives below, which turn an address
 * into a file offset and use pread()/pwrite().  So a media error is an
 * -EIO from read(), never a SIGBUS, and a stray direct access faults at
 * once instead of reading garbage.
 *
 * Records are 32 bytes and recovery reads them in slot order, so reads of
 * a record or less are served from a 1 MiB read-ahead window (one pread)
 * instead of one pread each: check of a 1 TiB cache of 4 KiB blocks makes
 * 8 K preads, not 268 M.  Data blocks are read one by one, as before.
 */
#ifndef LIBPMC_H
#define LIBPMC_H

#include <sys/types.h>
#include "pmc_meta.h"

struct pmc_dev {
	char path[4096];
	int fd;
	bool is_blk;
	dev_t rdev;		/* block devices */
	u64 size;		/* bytes */
	u32 lbs;		/* logical block size (512 for files) */
};

/*
 * Open @path (O_RDONLY or O_RDWR in @flags); with @excl, a block device is
 * opened O_EXCL (fails with -EBUSY while a dm table or a mount holds it).
 * Returns 0 or -errno with pmc_errmsg set to a one-line reason.
 */
int pmc_dev_open(struct pmc_dev *d, const char *path, int flags, bool excl);
void pmc_dev_close(struct pmc_dev *d);

/*
 * Origin identity as the module computes it (pmc_origin_identity()), from
 * sysfs under pmc_sysfs_root ("/sys"; tests point it at a fake tree).
 * Only d->path, d->is_blk, d->rdev and d->size are used.
 */
extern const char *pmc_sysfs_root;
int pmc_origin_identify(const struct pmc_dev *d, struct pmc_origin_id *oid);
/* A sysfs attribute, trailing newline and blanks cut: 0 or -errno. */
int pmc_read_sysfs(const char *path, char *buf, size_t len);

/* Human form of an identity: "md 0123...-..., 2097152 sectors". */
void pmc_format_uuid(const u8 uuid[16], char out[37]);

extern char pmc_errmsg[512];

enum pmc_verdict {
	PMC_V_CLEAN,		/* valid, no dirty block */
	PMC_V_DIRTY,		/* valid, dirty blocks must reach the origin */
	PMC_V_BLANK,		/* blank namespace: the module formats it */
	PMC_V_FORMATTING,	/* interrupted format: the module formats it */
	PMC_V_FOREIGN,		/* not a pmemcache superblock */
	PMC_V_CORRUPT,		/* pmemcache superblock that does not validate */
	PMC_V_DAMAGED,		/* valid superblock, unusable records */
	PMC_V_MISMATCH,		/* valid, but for another origin */
};

const char *pmc_verdict_name(enum pmc_verdict v);

struct pmc_image {
	struct pmc_dev dev;
	bool readonly;		/* stores of the shared code are dropped */
	u8 *base;		/* PROT_NONE reservation of map_len bytes */
	u64 map_len;
	u64 pmem_bytes;		/* size rounded down to 4 KiB, as the module */
	u64 dropped;		/* stores dropped (readonly) */
	u64 stores;		/* stores written */
	bool dirty_stores;	/* stores since the last fence */
	int io_error;		/* first store/fence error (-errno) */

	/* Read-ahead window of small reads: file bytes [win_off, +win_len). */
	u8 *win;
	u64 win_off, win_len;
	bool win_failed;	/* its pread failed: read this range directly */

	struct pmc_super sb;	/* raw copy of the superblock */
	bool sb_read;
	struct pmc_meta meta;
	struct pmc_index idx;
	bool recovered;
	struct pmc_recover_stats rs;
	u64 out_of_range;	/* live records beyond the origin's end */
	u64 past_recorded;	/* of an md origin checked alone: live records
				 * past the size recorded at format (grown?) */
	u64 dirty_sectors;
};

/* Open an image; @readonly: O_RDONLY and no store ever reaches it. */
int pmc_image_open(struct pmc_image *im, const char *path, bool readonly,
		   bool excl);
void pmc_image_close(struct pmc_image *im);

/*
 * Validate the superblock with pmc_meta_open() and, if it is valid, every
 * record with pmc_meta_recover().  With @oid, the cache must also belong to
 * that origin (PMC_V_MISMATCH otherwise).  *why: one-line reason for a
 * verdict other than CLEAN/DIRTY (static or pmc_errmsg).  Returns the
 * verdict, or -errno if the check itself could not run.
 */
int pmc_image_check(struct pmc_image *im, const struct pmc_origin_id *oid,
		    const char **why);

struct pmc_drain_stats {
	u64 blocks;		/* dirty blocks written to the origin */
	u64 sectors;
	u64 bytes;
	u64 read_errors;	/* data blocks that could not be read: lost */
	u64 crc_errors;		/* data_crc: blocks whose data fails it: not written */
	u64 marked_clean;
};

/*
 * Write every dirty block of a checked image (verdict CLEAN or DIRTY) to
 * @origin, only its valid sectors; fdatasync() the origin; then, with
 * @mark_clean, mark the records CLEAN with the module's own C1 step
 * (pmc_meta_wb_done()) and fence.  @dry_run: count, write nothing.
 * A block that cannot be read, or whose data fails its data_crc, is not
 * written and stays dirty: -EIO at the end.
 * Returns 0 or -errno (pmc_errmsg set).
 */
int pmc_image_drain(struct pmc_image *im, struct pmc_dev *origin,
		    bool mark_clean, bool dry_run, struct pmc_drain_stats *st);

#endif /* LIBPMC_H */
