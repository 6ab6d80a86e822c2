/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * dm-pmemcache on-pmem format, version 1.
 *
 * This header is the single source of truth for the layout.  It is
 * included verbatim by the kernel module and by the userspace tool, so it
 * uses only fixed-width little-endian fields and needs the includer to
 * provide __le32/__le64/__u8 (linux/types.h in both worlds).
 *
 * Layout of the pmem namespace (byte offsets from its start):
 *
 *   0                     superblock (struct pmc_super), padded to 4 KiB
 *   PMC_RECORDS_OFFSET    n_blocks records (struct pmc_record, 32 B each)
 *   data_offset           n_blocks data blocks of block_size bytes,
 *                         data_offset is a multiple of PMC_DATA_ALIGN
 *
 * The superblock is written once, at format time, and never again.  All
 * run-time state lives in the records.  See docs/format.md for the commit
 * protocol (the order of stores, flushes and fences).
 */
#ifndef PMEMCACHE_FORMAT_H
#define PMEMCACHE_FORMAT_H

#ifdef __KERNEL__
#include <linux/build_bug.h>
#else
#include <assert.h>
#endif

/* "PMEMCach" read as a little-endian u64: a formatted cache. */
#define PMC_MAGIC		0x686361434d454d50ULL
/* "PMEMfmt!": a format is in progress; safe to format again. */
#define PMC_MAGIC_FORMATTING	0x21746d664d454d50ULL
#define PMC_VERSION		1

#define PMC_SUPER_AREA		4096U
#define PMC_RECORDS_OFFSET	PMC_SUPER_AREA
#define PMC_DATA_ALIGN		4096U
#define PMC_SECTOR_SIZE		512U
#define PMC_MIN_BLOCK_SIZE	512U
#define PMC_MAX_BLOCK_SIZE	4096U
/* The in-RAM index keeps the per-sector mask in 8 bits. */
#define PMC_MAX_SECTORS_PER_BLOCK (PMC_MAX_BLOCK_SIZE / PMC_SECTOR_SIZE)
/* Slot numbers are 32 bit in the in-RAM index; all ones means "none". */
#define PMC_MAX_BLOCKS		0xfffffff0ULL

/* Kinds of origin identity stored in the superblock. */
#define PMC_ORIGIN_ID_NONE	0	/* only the size is checked */
#define PMC_ORIGIN_ID_MD	1	/* md array UUID (mdadm --detail) */

/*
 * Superblock.  csum is crc32c (seed ~0) over the whole structure with
 * magic and csum read as zero: magic is the commit word of a format and
 * is written last, on its own.
 */
struct pmc_super {
	__le64 magic;
	__le32 version;
	__le32 sb_size;		/* sizeof(struct pmc_super) */
	__le32 block_size;	/* bytes, power of two, 512..4096 */
	__le32 record_size;	/* sizeof(struct pmc_record) */
	__le64 features;	/* PMC_FEATURE_*: chosen at format time */
	__u8 cache_uuid[16];	/* random, chosen at format time */
	__u8 origin_uuid[16];	/* see origin_id_kind */
	__le32 origin_id_kind;	/* PMC_ORIGIN_ID_* */
	__le32 record_seed;	/* crc32c seed of every record */
	__le64 origin_sectors;	/* size of the origin, 512 B sectors */
	__le64 pmem_bytes;	/* size of the namespace at format time */
	__le64 n_blocks;	/* number of records and data blocks */
	__le64 records_offset;	/* bytes, PMC_RECORDS_OFFSET */
	__le64 data_offset;	/* bytes, multiple of PMC_DATA_ALIGN */
	__le64 format_time;	/* seconds since the epoch, informative */
	__u8 reserved[132];
	__le32 csum;
};

#define PMC_SUPER_SIZE		256U

/*
 * Superblock features.  Each changes what the records mean, so a loader
 * refuses a superblock with a feature it does not know.
 *
 * DATA_CRC: every record carries a crc32c of its block's data; a copy
 * whose data does not match is not read (a mirror's other copy is, and
 * the block is healed).
 */
#define PMC_FEATURE_DATA_CRC	0x1ULL
#define PMC_FEATURES_KNOWN	PMC_FEATURE_DATA_CRC

/*
 * Record states.  A record describes the data block of the same index.
 * It is "live" iff its checksum is correct and its state is DIRTY or
 * CLEAN.  ZERO (all bytes zero, as left by format) never has a correct
 * checksum because the seed is never zero.
 */
#define PMC_REC_ZERO		0U
#define PMC_REC_DIRTY		1U	/* newer than the origin */
#define PMC_REC_CLEAN		2U	/* equal to the origin */
#define PMC_REC_FREE		3U	/* invalidated, block reusable */

/*
 * One record, 32 bytes and 32-byte aligned so that it never straddles a
 * cache line.  state and csum share the last aligned 8-byte word: the
 * DIRTY->CLEAN and any->FREE transitions rewrite only that word, with one
 * 8-byte store, which the hardware persists atomically.
 *
 * csum = crc32c(record_seed, le32 index || bytes 0..23 || le32 state).
 * data_crc = crc32c(record_seed, le32 crc32c(~0, sector i) of each valid
 * sector i of the data block, in ascending order); written with the rest
 * of the record, never changed.
 */
struct pmc_record {
	__le64 oblock;		/* origin block number (origin sector / spb) */
	__le64 seq;		/* unique, increasing; highest live seq wins */
	__le32 valid;		/* bit i: sector i of the block holds data */
	__le32 data_crc;	/* DATA_CRC: see below; else zero */
	__le32 state;		/* PMC_REC_* */
	__le32 csum;
};

#define PMC_RECORD_SIZE		32U

/*
 * The highest seq a record may hold.  seq counts cached writes from 1, and
 * 2^62 of them take 146 years at 10^9 writes per second, so a record above
 * it is corrupt even if its checksum is correct: it is dead.  Taken as
 * live, it would make last_seq wrap, and every later write would lose
 * against older copies of its block after a crash.
 */
#define PMC_SEQ_MAX		0x4000000000000000ULL	/* 2^62 */

/*
 * Mirror info (docs/format.md, "Mirrored cache").  A mirrored cache keeps
 * the same superblock, records and data on two pmem devices, its halves.
 * Each half says in two slots of its superblock area which pair it
 * belongs to and whether it holds every acknowledged write.  A slot is
 * written whole and fenced, into the slot that does not hold the current
 * info; the valid slot with the higher seq counts, so a torn update
 * leaves the previous info.  Format zeroes both slots: a cache with no
 * valid slot is a single-device cache.
 *
 * csum = crc32c(~0, bytes 0..123 of the slot).
 */
#define PMC_MIRROR_MAGIC	0x317272696d434d50ULL	/* "PMCmirr1" */
#define PMC_MIRROR_INFO_OFFSET	1024U
#define PMC_MIRROR_INFO_SIZE	128U
#define PMC_MIRROR_INFO_SLOTS	2U
/* The last sector of the area is pmemcachectl's kept-dirty mark. */
#define PMC_KEPT_MARK_OFFSET	3584U

/* The partner misses writes this half acknowledged: it ran alone. */
#define PMC_MIRROR_PARTNER_STALE	0x1U
/* This half is being copied from its partner: it is no cache on its own. */
#define PMC_MIRROR_RESYNCING		0x2U
/*
 * With RESYNCING: copied online, records first (every record may be
 * there before its data).  A module that knows only the copy at load
 * would take records that agree for copied data: it must see no info.
 */
#define PMC_MIRROR_COPY_ONLINE		0x4U
#define PMC_MIRROR_FLAGS		0x7U

struct pmc_mirror_info {
	__le64 magic;
	__le64 seq;		/* increases with every update of this half */
	__u8 pair_uuid[16];	/* the superblock's cache_uuid */
	__u8 half_uuid[16];	/* this half, random */
	__u8 partner_uuid[16];	/* the other half's half_uuid */
	__le64 generation;	/* raised when the pair's membership changes */
	__le64 resync_pos;	/* RESYNCING: slots copied so far */
	__le32 flags;		/* PMC_MIRROR_* */
	__u8 reserved[40];
	__le32 csum;
};

/* Every field is naturally aligned: no padding, no packed attribute. */
static_assert(sizeof(struct pmc_super) == PMC_SUPER_SIZE, "pmc_super size");
static_assert(sizeof(struct pmc_record) == PMC_RECORD_SIZE, "pmc_record size");
static_assert(sizeof(struct pmc_mirror_info) == PMC_MIRROR_INFO_SIZE,
	      "pmc_mirror_info size");
/* Both slots lie between the superblock and the tool's kept-dirty mark. */
static_assert(PMC_MIRROR_INFO_OFFSET >= PMC_SUPER_SIZE &&
	      PMC_MIRROR_INFO_OFFSET + PMC_MIRROR_INFO_SLOTS *
	      PMC_MIRROR_INFO_SIZE <= PMC_KEPT_MARK_OFFSET, "mirror info slots");

#endif /* PMEMCACHE_FORMAT_H */
