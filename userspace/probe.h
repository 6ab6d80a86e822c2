/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Finding caches and their origins without device-mapper, for activate
 * and udev-probe: read the superblock area of a device, enumerate block
 * devices in sysfs, match an origin by the identity the superblock
 * recorded (docs/format.md: md array UUID and size), and the names the
 * tool gives a cache (DM UUID, default device name).
 *
 * Also the "kept dirty" mark that `remove --keep-dirty --force` leaves in
 * the unused tail of the superblock area (docs/format.md).
 *
 * Plain C types only, like precheck.h: cmd_*.c include libdevmapper.h.
 * The sysfs and /dev roots can be moved (PMEMCACHECTL_SYSFS,
 * PMEMCACHECTL_DEVDIR) so that host tests run on a fake tree of files.
 */
#ifndef PMCTL_PROBE_H
#define PMCTL_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "settings.h"

/* "PMEMCACHE-" + the canonical cache UUID: the DM UUID of a cache device. */
#define PMCTL_DM_UUID_PREFIX	"PMEMCACHE-"
#define PMCTL_DM_UUID_LEN	(sizeof(PMCTL_DM_UUID_PREFIX) - 1 + 36)
/* Offset of the kept-dirty mark in the superblock area (one sector). */
#define PMCTL_MARK_OFFSET	3584U

enum pmctl_sb_state {
	PMCTL_SB_NONE,		/* no pmemcache superblock (blank, foreign) */
	PMCTL_SB_FORMATTING,	/* interrupted format: no cache */
	PMCTL_SB_BAD,		/* pmemcache magic, but does not validate */
	PMCTL_SB_CACHE,		/* a valid superblock */
};

/* The mirror info of a half of a mirrored cache (docs/format.md). */
struct pmctl_half {
	bool valid;			/* a valid slot: the device is a half */
	uint8_t pair_uuid[16];		/* the cache's uuid */
	uint8_t half_uuid[16];
	uint8_t partner_uuid[16];	/* the other half's half_uuid */
	uint64_t generation;
	bool partner_stale;		/* this half ran alone: it is current */
	bool resyncing;			/* being copied from its partner */
};

struct pmctl_sb {
	struct pmctl_half mirror;	/* read whatever the state */
	enum pmctl_sb_state state;
	uint8_t cache_uuid[16];
	uint32_t block_size;
	uint32_t origin_kind;		/* PMC_ORIGIN_ID_* */
	uint8_t origin_uuid[16];
	uint64_t origin_sectors;
	bool kept_dirty;		/* remove --keep-dirty --force left it */
	uint64_t kept_time;		/* seconds since the epoch */
	struct pmctl_settings settings;	/* name and tunables for activate */
};

/* Parse a 4 KiB superblock area (pure). */
void pmctl_sb_parse(const void *area, struct pmctl_sb *sb);
/*
 * Read the superblock area of @path (O_DIRECT if it can, else a pread
 * after dropping cached pages: the module writes pmem behind the page
 * cache).  0 or -errno.
 */
int pmctl_sb_read(const char *path, struct pmctl_sb *sb);
/*
 * Set (@set) or clear the kept-dirty mark of the cache @uuid on @path:
 * one 512-byte write at PMCTL_MARK_OFFSET, never the superblock itself.
 * 0 or -errno.
 */
int pmctl_mark_write(const char *path, const uint8_t uuid[16], bool set,
		     uint64_t now);
/*
 * Write @len bytes of @buf (aligned for O_DIRECT) at @off of @path, with
 * O_DIRECT where it can (not a tmpfs file), then fsync.  0 or -errno.
 */
int pmctl_area_write(const char *path, const void *buf, size_t len, off_t off);
/* The mark's sector (pure): @buf is 512 bytes. */
void pmctl_mark_build(void *buf, const uint8_t uuid[16], bool set, uint64_t now);

/*
 * Dirty blocks of the cache on @path, from its records (the module's own
 * recovery, read-only, O_EXCL): 0 or -errno (-EUCLEAN: not a valid cache).
 */
int pmctl_cache_dirty(const char *path, uint64_t *dirty);
/*
 * Zero the superblock area of a cache nothing holds (O_EXCL): the next
 * table formats it (docs/dm-pmemcache.rst).  0 or -errno.
 */
int pmctl_sb_forget(const char *path);
/* PMC_SUPER_AREA, for files that cannot include the format's header. */
#define PMCTL_SB_AREA	4096
/*
 * Of a cache whose table is live but suspended: keep its superblock area
 * in @saved (PMCTL_SB_AREA bytes) and zero it, and put it back.  0 or
 * -errno.
 */
int pmctl_sb_take(const char *path, void *saved);
int pmctl_sb_put_back(const char *path, const void *saved);

void pmctl_uuid_str(const uint8_t u[16], char out[37]);
/* "PMEMCACHE-<uuid>". */
void pmctl_dm_uuid(const uint8_t u[16], char *out, size_t len);
/* "pmemcache-<first 8 hex digits>". */
void pmctl_default_name(const uint8_t u[16], char *out, size_t len);

/* A block device as sysfs shows it. */
struct pmctl_blk {
	char name[64];			/* kernel name: "md0", "pmem0" */
	char path[512];		/* its node: "/dev/md0" */
	unsigned int major, minor;
	uint64_t sectors;
};

/*
 * Is @b the other half of the mirrored cache whose half @sb is?  Its
 * mirror info names the same pair and the half @sb names as partner.
 */
bool pmctl_is_partner_of(const struct pmctl_sb *sb, const struct pmctl_blk *b);

const char *pmctl_sysfs_root(void);
const char *pmctl_dev_root(void);
/* Fill @b from /sys/class/block/@name: 0 or -1. */
int pmctl_blk_get(const char *name, struct pmctl_blk *b);
/*
 * The block devices, in name order: all, or those whose name starts with
 * @prefix.  Returns how many (at most @max), or -1.
 */
int pmctl_blk_list(const char *prefix, struct pmctl_blk *out, int max);
/* Is @b the md array the superblock recorded (its UUID; grown or not)? */
bool pmctl_is_origin_of(const struct pmctl_blk *b, const struct pmctl_sb *sb);
/*
 * The devices that are @sb's origin, into @out (up to @max).  Returns how
 * many were found; 0 if the recorded identity is not an md array UUID.
 */
int pmctl_find_origin(const struct pmctl_sb *sb, struct pmctl_blk *out, int max);
/* "md 0123...-..., 2097152 sectors" or "size 2097152 sectors only". */
void pmctl_identity_str(const struct pmctl_sb *sb, char *out, size_t len);

#endif /* PMCTL_PROBE_H */
