/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache metadata API: the only code that knows byte offsets in
 * pmem.  Shared by the kernel module, the host crash-model test and the
 * userspace tool.  docs/format.md describes the commit protocol that the
 * functions below implement.
 *
 * Concurrency: the kernel calls every per-block function with the lock of
 * the block's index stripe held; record and data stores of different slots
 * never share a cache line, so callers on different stripes do not
 * interfere.  last_seq is taken with an atomic increment in the kernel,
 * on a cache line of its own (struct pmc_atomic64).
 */
#ifndef PMC_META_H
#define PMC_META_H

#include "pmc_shim.h"
#include "pmemcache_format.h"
#include "pmc_index.h"

struct pmc_origin_id {
	u64 sectors;
	u32 kind;		/* PMC_ORIGIN_ID_* */
	u8 uuid[16];
};

struct pmc_meta {
	u8 *base;		/* byte 0 of the namespace reads use (pmem kaddr) */
	u8 *half[2];		/* mirrored: byte 0 of each half; else half[1] NULL */
	unsigned int live;	/* mirrored: bit i, half i takes stores */
	u64 pmem_bytes;
	u32 block_size;
	u32 block_shift;
	u32 spb;		/* 512 B sectors per block */
	u32 full_mask;		/* all sectors of a block */
	u64 n_blocks;
	u64 data_offset;
	u32 record_seed;
	bool data_crc;		/* PMC_FEATURE_DATA_CRC: records hold data crcs */
	struct pmc_atomic64 last_seq;	/* highest seq handed out */
	u8 cache_uuid[16];
};

struct pmc_recover_stats {
	u64 live;		/* records that map a block */
	u64 dirty;
	u64 superseded;		/* older duplicates invalidated */
	u64 torn;		/* checksum failures (not ZERO, not FREE) */
	u64 unreadable;		/* media errors: slot quarantined */
	u64 bad_seq;		/* correct checksum, seq above PMC_SEQ_MAX: dead */
};

/*
 * Data callback for pmc_meta_write_block(): store the new sectors.  With
 * data_crc (@sector_crc not NULL) it also sets sector_crc[i] for each
 * sector i it stores to the pmc_sector_crc() of the bytes stored, taken
 * of its own copy of the source (pmc_meta_store_sector()): a page its
 * owner changes during the write must not leave data that fails its crc.
 */
typedef int (*pmc_fill_fn)(void *ctx, u8 *block_kaddr, u32 *sector_crc);

/* data_crc: the crc of one 512-byte sector, in which records' crcs are made */
static inline u32 pmc_sector_crc(const void *sector)
{
	return pmc_crc32c(~0U, sector, PMC_SECTOR_SIZE);
}

/* Geometry for a namespace of @pmem_bytes: 0 or -EINVAL. */
int pmc_meta_geometry(u64 pmem_bytes, u32 block_size, u64 *n_blocks,
		      u64 *data_offset);

/*
 * Open an existing cache.  Returns 0, -ENODATA if the namespace is blank
 * or holds an interrupted format (the caller formats), -EIO on a media
 * error, or -EINVAL with *why set to a one-line reason.
 */
int pmc_meta_open(struct pmc_meta *m, u8 *base, u64 pmem_bytes,
		  u32 block_size, const struct pmc_origin_id *oid,
		  const char **why);
/* Format a cache with no features (PMC_FEATURE_*). */
int pmc_meta_format(struct pmc_meta *m, u8 *base, u64 pmem_bytes,
		    u32 block_size, const struct pmc_origin_id *oid);
/*
 * The same with @features, on both halves of a mirror (@mirror: the
 * second's byte 0) or, if @mirror is NULL, on one device.
 */
int pmc_meta_format_pair(struct pmc_meta *m, u8 *base, u8 *mirror,
			 u64 pmem_bytes, u32 block_size,
			 const struct pmc_origin_id *oid, u64 features);

/*
 * The one store of the commit protocol (records, superblock, data): to
 * the cache's pmem and, mirrored, to the same offset of every live half,
 * all before the caller's fence.  So each half alone is a crash image
 * that holds every acknowledged write (docs/format.md, "Mirrored cache").
 * @dst lies in either half: m->base moves to the survivor when a half is
 * lost while running (pmc_meta_drop_half()), and a caller may have taken
 * @dst from the old one.  m->live is read once: it loses a half only after
 * the survivor's M1 is durable.
 */
static inline void pmc_meta_store(const struct pmc_meta *m, void *dst,
				  const void *src, size_t len,
				  enum pmc_ptag tag)
{
	unsigned int live;
	u64 off;

	if (!m->half[1]) {
		pmc_pmem_write(dst, src, len, tag);
		return;
	}
	off = (u8 *)dst - m->half[0];
	if (off >= m->pmem_bytes)
		off = (u8 *)dst - m->half[1];
	live = pmc_read_once(m->live);
	if (live & 1)
		pmc_pmem_write(m->half[0] + off, src, len, tag);
	if (live & 2)
		pmc_pmem_write(m->half[1] + off, src, len, tag);
}

/* Run mirrored on halves @a and @b (or on @a alone if @b is NULL). */
void pmc_meta_use_halves(struct pmc_meta *m, u8 *a, u8 *b);

/*
 * Half @lost is gone: from now on reads use the other and stores skip
 * @lost.  The caller made the survivor's M1 durable first.
 */
void pmc_meta_drop_half(struct pmc_meta *m, unsigned int lost);

/* Rebuild @idx (already initialised for m->n_blocks slots) from pmem. */
int pmc_meta_recover(struct pmc_meta *m, struct pmc_index *idx,
		     struct pmc_recover_stats *st);

static inline u8 *pmc_meta_data(const struct pmc_meta *m, u32 slot)
{
	return m->base + m->data_offset + ((u64)slot << m->block_shift);
}

static inline u64 pmc_meta_data_offset(const struct pmc_meta *m, u32 slot)
{
	return m->data_offset + ((u64)slot << m->block_shift);
}

int pmc_meta_read_record(const struct pmc_meta *m, u32 slot,
			 struct pmc_record *r, bool *live);

/*
 * Store the sector at @src into pmem at @dst (pmc_meta_store()), through a
 * copy whose crc goes to *@crc if @crc is not NULL.
 */
void pmc_meta_store_sector(const struct pmc_meta *m, u8 *dst, const u8 *src,
			   u32 *crc);

/*
 * DATA_CRC: the crc of sectors @valid of slot @slot's data on the half
 * whose byte 0 is @base (the record's data_crc if the data is good).
 * 0, or -EIO on a media error.
 */
int pmc_meta_data_crc(const struct pmc_meta *m, const u8 *base, u32 slot,
		      u32 valid, u32 *crc);

/*
 * DATA_CRC: does slot @slot's data on the half at @base match the data_crc
 * of its record there?  0, -EIO on a media error, or -EBADMSG if it does
 * not (or that record's checksum is wrong).  The slot must not change
 * meanwhile (its stripe lock, or writeback owns it).
 */
int pmc_meta_check_data(const struct pmc_meta *m, const u8 *base, u32 slot);

/*
 * Write sectors @mask of @oblock: @new_slot is a free slot, @fill stores
 * the new data into it.  Sectors that an older copy holds and the write
 * does not cover are copied first.  On return the write is durable and
 * the index points at @new_slot.  *freed is the superseded slot that may
 * go on the free list, or PMC_NO_SLOT.  Errors (-EIO: a media error, or no
 * seq left below PMC_SEQ_MAX, which only forged metadata can cause) leave
 * the records and the index unchanged and @new_slot unused (its data may
 * have been written).
 */
int pmc_meta_write_block(struct pmc_meta *m, struct pmc_index *idx,
			 u64 oblock, u32 mask, u32 new_slot, u32 epoch,
			 pmc_fill_fn fill, void *ctx, u32 *freed);
/*
 * The same for a caller that looked @oblock up under its stripe lock
 * already: @old is pmc_index_lookup()'s answer (one hash walk less).
 */
int pmc_meta_write_over(struct pmc_meta *m, struct pmc_index *idx,
			u64 oblock, u32 mask, u32 new_slot, u32 old, u32 epoch,
			pmc_fill_fn fill, void *ctx, u32 *freed);

/*
 * Drop the cached copy of @oblock (discard).  The record is durably FREE
 * on return: once the caller drops the stripe lock, another CPU may write
 * the block, write the new copy back and evict it.  A slot returned in
 * *freed may go on the free list; a slot under writeback becomes STALE and
 * is freed by pmc_meta_wb_done().
 */
void pmc_meta_drop_block(struct pmc_meta *m, struct pmc_index *idx,
			 u64 oblock, u32 *freed);

/* Mark @slot in writeback (index only). */
void pmc_meta_wb_start(struct pmc_index *idx, u32 slot);

/*
 * The origin write of @slot finished (@ok: it completed successfully and
 * so did an origin flush issued after it).  Marks the record CLEAN (not
 * fenced: pmc_meta_fence(PMC_P_CLEAN) per batch) or returns the stale
 * slot in *freed.  Returns -EIO if @ok but the record could not be read
 * or is no longer the block's: then the record is FREE (fenced by the
 * caller's PMC_P_CLEAN fence) and the slot out of use (unlinked and
 * BAD); the origin holds the block.
 */
int pmc_meta_wb_done(struct pmc_meta *m, struct pmc_index *idx, u32 slot,
		     bool ok, u32 *freed);

/*
 * Evict a clean slot: invalidate its record and unlink it.  Not fenced:
 * the caller fences (PMC_P_FREE) before the slot is reused.
 */
void pmc_meta_evict(struct pmc_meta *m, struct pmc_index *idx, u32 slot);

static inline void pmc_meta_fence(enum pmc_ptag tag)
{
	pmc_pmem_fence(tag);
}

u32 pmc_meta_super_csum(const struct pmc_super *sb);
u32 pmc_meta_record_csum(u32 seed, u32 slot, const struct pmc_record *r);

#endif /* PMC_META_H */
