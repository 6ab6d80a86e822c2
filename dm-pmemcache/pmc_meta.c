// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache metadata: format, open, recovery and the commit protocol.
 *
 * Shared verbatim by the kernel module and userspace (pmc_shim.h).  The
 * protocol is written down in docs/format.md; the comments here say which
 * rule each store, flush and fence implements.
 */
#include "pmc_meta.h"

#define PMC_SB_MSG_FOREIGN \
	"pmem device holds data that is not a pmemcache superblock (use the 'format' feature to overwrite it)"

static u64 pmc_align_up(u64 x, u64 a)
{
	return (x + a - 1) & ~(a - 1);
}

static bool pmc_is_pow2(u32 x)
{
	return x && !(x & (x - 1));
}

u32 pmc_meta_super_csum(const struct pmc_super *sb)
{
	struct pmc_super tmp = *sb;

	tmp.magic = 0;
	tmp.csum = 0;
	return pmc_crc32c(~0U, &tmp, sizeof(tmp));
}

u32 pmc_meta_record_csum(u32 seed, u32 slot, const struct pmc_record *r)
{
	u8 buf[32];
	__le32 v;

	v = cpu_to_le32(slot);
	memcpy(buf, &v, 4);
	memcpy(buf + 4, r, 24);
	memcpy(buf + 28, &r->state, 4);
	return pmc_crc32c(seed, buf, sizeof(buf));
}

int pmc_meta_geometry(u64 pmem_bytes, u32 block_size, u64 *n_blocks,
		      u64 *data_offset)
{
	u64 n, off;

	if (!pmc_is_pow2(block_size) || block_size < PMC_MIN_BLOCK_SIZE ||
	    block_size > PMC_MAX_BLOCK_SIZE)
		return -EINVAL;
	if (pmem_bytes < PMC_SUPER_AREA + 2 * PMC_DATA_ALIGN)
		return -EINVAL;
	n = (pmem_bytes - PMC_SUPER_AREA) / (block_size + PMC_RECORD_SIZE);
	if (n > PMC_MAX_BLOCKS)
		n = PMC_MAX_BLOCKS;
	for (;;) {
		if (!n)
			return -EINVAL;
		off = pmc_align_up(PMC_RECORDS_OFFSET + n * PMC_RECORD_SIZE,
				   PMC_DATA_ALIGN);
		if (off + n * block_size <= pmem_bytes)
			break;
		n--;
	}
	*n_blocks = n;
	*data_offset = off;
	return 0;
}

static void pmc_meta_setup(struct pmc_meta *m, u8 *base, u64 pmem_bytes,
			   u32 block_size)
{
	u32 shift = 0;

	m->base = base;
	m->half[0] = base;
	m->half[1] = NULL;
	m->live = 1;
	m->pmem_bytes = pmem_bytes;
	m->block_size = block_size;
	while ((1U << shift) < block_size)
		shift++;
	m->block_shift = shift;
	m->spb = block_size / PMC_SECTOR_SIZE;
	m->full_mask = (m->spb >= 32) ? ~0U : ((1U << m->spb) - 1);
	pmc_atomic64_set(&m->last_seq, 0);
}

static struct pmc_record *pmc_rec(const struct pmc_meta *m, u32 slot)
{
	return (struct pmc_record *)(m->base + PMC_RECORDS_OFFSET +
				     (u64)slot * PMC_RECORD_SIZE);
}

void pmc_meta_use_halves(struct pmc_meta *m, u8 *a, u8 *b)
{
	m->base = a;
	m->half[0] = a;
	m->half[1] = b;
	m->live = b ? 3 : 1;
}

void pmc_meta_drop_half(struct pmc_meta *m, unsigned int lost)
{
	pmc_write_once(m->base, m->half[lost ^ 1]);
	pmc_write_once(m->live, m->live & ~(1U << lost));
}

int pmc_meta_format(struct pmc_meta *m, u8 *base, u64 pmem_bytes,
		    u32 block_size, const struct pmc_origin_id *oid)
{
	return pmc_meta_format_pair(m, base, NULL, pmem_bytes, block_size, oid,
				    0);
}

int pmc_meta_format_pair(struct pmc_meta *m, u8 *base, u8 *mirror,
			 u64 pmem_bytes, u32 block_size,
			 const struct pmc_origin_id *oid, u64 features)
{
	static const u8 zero[512];
	struct pmc_super sb;
	u64 n, data_off, off, end;
	__le64 magic;
	int r;

	if (features & ~PMC_FEATURES_KNOWN)
		return -EINVAL;
	r = pmc_meta_geometry(pmem_bytes, block_size, &n, &data_off);
	if (r)
		return r;
	memset(m, 0, sizeof(*m));
	pmc_meta_setup(m, base, pmem_bytes, block_size);
	pmc_meta_use_halves(m, base, mirror);
	m->n_blocks = n;
	m->data_offset = data_off;
	m->data_crc = features & PMC_FEATURE_DATA_CRC;

	/*
	 * F1: "format in progress" is committed first, so that a crash at any
	 * later point leaves a namespace that is formatted again on the next
	 * load, never one that is refused as corrupt.
	 */
	magic = cpu_to_le64(PMC_MAGIC_FORMATTING);
	pmc_meta_store(m, base, &magic, 8, PMC_P_FORMAT);
	pmc_pmem_fence(PMC_P_FORMAT);

	/* F2: every record ZERO, the rest of the superblock area zero. */
	for (off = 8; off < PMC_SUPER_AREA; off += 8)
		pmc_meta_store(m, base + off, zero, 8, PMC_P_FORMAT);
	end = PMC_RECORDS_OFFSET + n * PMC_RECORD_SIZE;
	for (off = PMC_RECORDS_OFFSET; off < end; off += sizeof(zero)) {
		u64 len = end - off < sizeof(zero) ? end - off : sizeof(zero);

		pmc_meta_store(m, base + off, zero, len, PMC_P_FORMAT);
	}

	memset(&sb, 0, sizeof(sb));
	sb.version = cpu_to_le32(PMC_VERSION);
	sb.sb_size = cpu_to_le32(sizeof(sb));
	sb.block_size = cpu_to_le32(block_size);
	sb.record_size = cpu_to_le32(PMC_RECORD_SIZE);
	sb.features = cpu_to_le64(features);
	pmc_random_bytes(sb.cache_uuid, sizeof(sb.cache_uuid));
	memcpy(sb.origin_uuid, oid->uuid, sizeof(sb.origin_uuid));
	sb.origin_id_kind = cpu_to_le32(oid->kind);
	m->record_seed = pmc_crc32c(~0U, sb.cache_uuid, 16) | 1;
	sb.record_seed = cpu_to_le32(m->record_seed);
	sb.origin_sectors = cpu_to_le64(oid->sectors);
	sb.pmem_bytes = cpu_to_le64(pmem_bytes);
	sb.n_blocks = cpu_to_le64(n);
	sb.records_offset = cpu_to_le64(PMC_RECORDS_OFFSET);
	sb.data_offset = cpu_to_le64(data_off);
	sb.format_time = cpu_to_le64(pmc_now_seconds());
	sb.csum = cpu_to_le32(pmc_meta_super_csum(&sb));
	memcpy(m->cache_uuid, sb.cache_uuid, 16);

	/* F3: the body (everything but magic) and the zeroed records. */
	pmc_meta_store(m, base + 8, (u8 *)&sb + 8, sizeof(sb) - 8, PMC_P_FORMAT);
	pmc_pmem_fence(PMC_P_FORMAT);

	/* F4: commit the format with one aligned 8-byte store. */
	magic = cpu_to_le64(PMC_MAGIC);
	pmc_meta_store(m, base, &magic, 8, PMC_P_FORMAT);
	pmc_pmem_fence(PMC_P_FORMAT);
	return 0;
}

static bool pmc_all_zero(const u8 *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i])
			return false;
	return true;
}

int pmc_meta_open(struct pmc_meta *m, u8 *base, u64 pmem_bytes,
		  u32 block_size, const struct pmc_origin_id *oid,
		  const char **why)
{
	struct pmc_super sb;
	u8 *area;
	bool blank, same_uuid;
	u64 magic, n, data_off;
	u32 bs;

	*why = NULL;
	if (pmc_pmem_read(&sb, base, sizeof(sb))) {
		*why = "media error reading the superblock";
		return -EIO;
	}
	magic = le64_to_cpu(sb.magic);
	if (magic == PMC_MAGIC_FORMATTING)
		return -ENODATA;
	if (magic == 0) {
		area = pmc_alloc_array(1, PMC_SUPER_AREA);
		if (!area)
			return -ENOMEM;
		if (pmc_pmem_read(area, base, PMC_SUPER_AREA)) {
			pmc_free_array(area);
			*why = "media error reading the superblock";
			return -EIO;
		}
		blank = pmc_all_zero(area, PMC_SUPER_AREA);
		pmc_free_array(area);
		if (blank)
			return -ENODATA;
		*why = PMC_SB_MSG_FOREIGN;
		return -EINVAL;
	}
	if (magic != PMC_MAGIC) {
		*why = PMC_SB_MSG_FOREIGN;
		return -EINVAL;
	}
	if (le32_to_cpu(sb.csum) != pmc_meta_super_csum(&sb)) {
		*why = "superblock checksum mismatch: the cache metadata is corrupt";
		return -EINVAL;
	}
	if (le32_to_cpu(sb.version) != PMC_VERSION) {
		*why = "unsupported superblock version";
		return -EINVAL;
	}
	if (le32_to_cpu(sb.sb_size) != sizeof(sb) ||
	    le32_to_cpu(sb.record_size) != PMC_RECORD_SIZE ||
	    le64_to_cpu(sb.records_offset) != PMC_RECORDS_OFFSET) {
		*why = "superblock has an unknown layout";
		return -EINVAL;
	}
	if (le64_to_cpu(sb.features) & ~PMC_FEATURES_KNOWN) {
		*why = "superblock uses unsupported features";
		return -EINVAL;
	}
	bs = le32_to_cpu(sb.block_size);
	if (bs != block_size) {
		*why = "block size differs from the one the cache was formatted with";
		return -EINVAL;
	}
	if (le64_to_cpu(sb.pmem_bytes) > pmem_bytes) {
		*why = "pmem device is smaller than the cache formatted on it";
		return -EINVAL;
	}
	if (pmc_meta_geometry(le64_to_cpu(sb.pmem_bytes), bs, &n, &data_off) ||
	    n != le64_to_cpu(sb.n_blocks) ||
	    data_off != le64_to_cpu(sb.data_offset)) {
		*why = "superblock geometry is inconsistent";
		return -EINVAL;
	}
	same_uuid = le32_to_cpu(sb.origin_id_kind) == oid->kind &&
		    !memcmp(sb.origin_uuid, oid->uuid, sizeof(sb.origin_uuid));
	/*
	 * An origin with a UUID (an md array) may have grown since (mdadm
	 * --grow): every block cached is below the size recorded then.
	 * Without a UUID the size is all there is to know it by.
	 */
	if (le64_to_cpu(sb.origin_sectors) != oid->sectors &&
	    !(same_uuid && oid->kind != PMC_ORIGIN_ID_NONE &&
	      oid->sectors > le64_to_cpu(sb.origin_sectors))) {
		*why = "origin size differs from the origin the cache was formatted for";
		return -EINVAL;
	}
	if (!same_uuid) {
		*why = "origin UUID differs from the origin the cache was formatted for";
		return -EINVAL;
	}
	if (!(le32_to_cpu(sb.record_seed) & 1)) {
		*why = "superblock record seed is invalid";
		return -EINVAL;
	}

	memset(m, 0, sizeof(*m));
	pmc_meta_setup(m, base, le64_to_cpu(sb.pmem_bytes), bs);
	m->n_blocks = n;
	m->data_offset = data_off;
	m->record_seed = le32_to_cpu(sb.record_seed);
	m->data_crc = le64_to_cpu(sb.features) & PMC_FEATURE_DATA_CRC;
	memcpy(m->cache_uuid, sb.cache_uuid, 16);
	return 0;
}

/*
 * Read a record with a machine-check safe copy.  *live: checksum correct,
 * state DIRTY or CLEAN with a sane mask, and a seq that a run can reach.
 */
int pmc_meta_read_record(const struct pmc_meta *m, u32 slot,
			 struct pmc_record *r, bool *live)
{
	u32 state, valid;

	*live = false;
	if (pmc_pmem_read(r, pmc_rec(m, slot), sizeof(*r)))
		return -EIO;
	if (le32_to_cpu(r->csum) != pmc_meta_record_csum(m->record_seed, slot, r))
		return 0;
	state = le32_to_cpu(r->state);
	valid = le32_to_cpu(r->valid);
	*live = (state == PMC_REC_DIRTY || state == PMC_REC_CLEAN) &&
		valid && !(valid & ~m->full_mask) &&
		le64_to_cpu(r->oblock) <= PMC_OBLOCK_MAX &&
		le64_to_cpu(r->seq) <= PMC_SEQ_MAX;
	return 0;
}

void pmc_meta_store_sector(const struct pmc_meta *m, u8 *dst, const u8 *src,
			   u32 *crc)
{
	u8 buf[PMC_SECTOR_SIZE];

	if (crc) {
		memcpy(buf, src, sizeof(buf));
		*crc = pmc_sector_crc(buf);
		src = buf;
	}
	pmc_meta_store(m, dst, src, PMC_SECTOR_SIZE, PMC_P_DATA);
}

/* A record's data_crc: of its valid sectors' crcs, in ascending order. */
static u32 pmc_meta_block_crc(const struct pmc_meta *m, const u32 *sector_crc,
			      u32 valid)
{
	u32 c = m->record_seed, i;
	__le32 v;

	for (i = 0; i < m->spb; i++) {
		if (!(valid & (1U << i)))
			continue;
		v = cpu_to_le32(sector_crc[i]);
		c = pmc_crc32c(c, &v, sizeof(v));
	}
	return c;
}

int pmc_meta_data_crc(const struct pmc_meta *m, const u8 *base, u32 slot,
		      u32 valid, u32 *crc)
{
	const u8 *d = base + pmc_meta_data_offset(m, slot);
	u32 sc[PMC_MAX_SECTORS_PER_BLOCK], i;
	u8 buf[PMC_SECTOR_SIZE];

	/* through a buffer: a machine-check safe copy, never a load of poison */
	for (i = 0; i < m->spb; i++) {
		if (!(valid & (1U << i)))
			continue;
		if (pmc_pmem_read(buf, d + i * PMC_SECTOR_SIZE, sizeof(buf)))
			return -EIO;
		sc[i] = pmc_sector_crc(buf);
	}
	*crc = pmc_meta_block_crc(m, sc, valid);
	return 0;
}

int pmc_meta_check_data(const struct pmc_meta *m, const u8 *base, u32 slot)
{
	const u8 *rec = base + PMC_RECORDS_OFFSET + (u64)slot * PMC_RECORD_SIZE;
	struct pmc_record r;
	u32 crc;

	if (pmc_pmem_read(&r, rec, sizeof(r)))
		return -EIO;
	if (le32_to_cpu(r.csum) != pmc_meta_record_csum(m->record_seed, slot, &r))
		return -EBADMSG;
	if (pmc_meta_data_crc(m, base, slot, le32_to_cpu(r.valid) & m->full_mask,
			      &crc))
		return -EIO;
	return crc == le32_to_cpu(r.data_crc) ? 0 : -EBADMSG;
}

/*
 * Rewrite the last 8-byte word (state + csum) of a record: one aligned
 * store, persisted atomically.  @r holds the current record contents.
 */
static void pmc_meta_set_state(struct pmc_meta *m, u32 slot,
			       struct pmc_record *r, u32 state,
			       enum pmc_ptag tag)
{
	u8 *dst = (u8 *)pmc_rec(m, slot) + 24;
	u8 word[8];

	r->state = cpu_to_le32(state);
	r->csum = cpu_to_le32(pmc_meta_record_csum(m->record_seed, slot, r));
	memcpy(word, &r->state, 4);
	memcpy(word + 4, &r->csum, 4);
	pmc_meta_store(m, dst, word, 8, tag);
}

/*
 * Invalidate a record.  State FREE is dead whatever the checksum says, so
 * if the record cannot be read the word is still written (csum 0).
 */
static void pmc_meta_invalidate(struct pmc_meta *m, u32 slot,
				enum pmc_ptag tag)
{
	struct pmc_record r;

	if (pmc_pmem_read(&r, pmc_rec(m, slot), sizeof(r))) {
		u8 word[8] = { PMC_REC_FREE, 0, 0, 0, 0, 0, 0, 0 };

		pmc_meta_store(m, (u8 *)pmc_rec(m, slot) + 24, word, 8, tag);
		return;
	}
	pmc_meta_set_state(m, slot, &r, PMC_REC_FREE, tag);
}

int pmc_meta_recover(struct pmc_meta *m, struct pmc_index *idx,
		     struct pmc_recover_stats *st)
{
	struct pmc_record r, o;
	bool live, olive, fenced = true;
	u64 last = 0, i;
	u32 slot, old;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < m->n_blocks; i++) {
		slot = (u32)i;
		/* Millions of records: let others run (soft lockup, RCU). */
		if (!(i & 4095))
			pmc_cond_resched();
		if (pmc_meta_read_record(m, slot, &r, &live)) {
			/* Quarantine: never reused, never mapped. */
			pmc_index_set_bad(idx, slot);
			st->unreadable++;
			continue;
		}
		if (le32_to_cpu(r.csum) ==
		    pmc_meta_record_csum(m->record_seed, slot, &r)) {
			/* an impossible seq is corrupt: it must not wrap last */
			if (le64_to_cpu(r.seq) > PMC_SEQ_MAX)
				st->bad_seq++;
			else if (le64_to_cpu(r.seq) > last)
				last = le64_to_cpu(r.seq);
		} else if (!pmc_all_zero((const u8 *)&r, sizeof(r))) {
			/*
			 * Torn by a crash: the last word may hold the checksum
			 * of a record whose seq never reached pmem.  A new
			 * record in this slot could get that seq again, and a
			 * crash in its W3 could then mix the two into a valid
			 * record: make this one FREE first.
			 */
			st->torn++;
			pmc_meta_invalidate(m, slot, PMC_P_RECOVER);
			fenced = false;
			pmc_cut_point(PMC_CUT_RECOVER_REPAIR);
		}
		if (!live)
			continue;

		old = pmc_index_lookup(idx, le64_to_cpu(r.oblock));
		if (old != PMC_NO_SLOT) {
			/*
			 * Two live copies of a block: a crash came between
			 * W3 and W5 of an overwrite.  The higher seq is the
			 * newer, acknowledged-or-in-flight copy.
			 */
			if (pmc_meta_read_record(m, old, &o, &olive) || !olive ||
			    le64_to_cpu(o.seq) < le64_to_cpu(r.seq)) {
				pmc_index_unlink(idx, old);
				pmc_meta_invalidate(m, old, PMC_P_RECOVER);
			} else {
				pmc_meta_invalidate(m, slot, PMC_P_RECOVER);
				st->superseded++;
				fenced = false;
				pmc_cut_point(PMC_CUT_RECOVER_REPAIR);
				continue;
			}
			st->superseded++;
			fenced = false;
			pmc_cut_point(PMC_CUT_RECOVER_REPAIR);
		}
		pmc_index_insert(idx, slot, le64_to_cpu(r.oblock),
				 le32_to_cpu(r.valid),
				 le32_to_cpu(r.state) == PMC_REC_DIRTY ?
				 PMC_SF_DIRTY : 0);
		pmc_cut_point(PMC_CUT_RECOVER_LOAD);
	}
	/* Losers and torn records durably dead before their slots are reused. */
	if (!fenced)
		pmc_pmem_fence(PMC_P_RECOVER);

	for (i = m->n_blocks; i-- > 0;) {
		u32 f = pmc_slot_flags(idx->slot[i]);

		if (!(i & 4095))
			pmc_cond_resched();
		if (f & PMC_SF_BAD)
			continue;
		if (f & PMC_SF_USED) {
			st->live++;
			if (f & PMC_SF_DIRTY)
				st->dirty++;
			continue;
		}
		pmc_index_push_free(idx, (u32)i);
	}
	pmc_atomic64_set(&m->last_seq, last);
	return 0;
}

/*
 * Copy the sectors in @keep from slot @src to slot @dst (pmem to pmem),
 * their crcs into @sector_crc unless it is NULL.
 */
static int pmc_meta_copy_sectors(struct pmc_meta *m, u32 dst, u32 src,
				 u32 keep, u32 *sector_crc)
{
	u8 buf[PMC_SECTOR_SIZE];
	u8 *d = pmc_meta_data(m, dst);
	const u8 *s = pmc_meta_data(m, src);
	u32 i;

	for (i = 0; i < m->spb; i++) {
		if (!(keep & (1U << i)))
			continue;
		if (pmc_pmem_read(buf, s + i * PMC_SECTOR_SIZE, sizeof(buf)))
			return -EIO;
		if (sector_crc)
			sector_crc[i] = pmc_sector_crc(buf);
		pmc_meta_store(m, d + i * PMC_SECTOR_SIZE, buf, sizeof(buf),
			       PMC_P_DATA);
	}
	return 0;
}

int pmc_meta_write_block(struct pmc_meta *m, struct pmc_index *idx,
			 u64 oblock, u32 mask, u32 new_slot, u32 epoch,
			 pmc_fill_fn fill, void *ctx, u32 *freed)
{
	return pmc_meta_write_over(m, idx, oblock, mask, new_slot,
				   pmc_index_lookup(idx, oblock), epoch, fill,
				   ctx, freed);
}

int pmc_meta_write_over(struct pmc_meta *m, struct pmc_index *idx,
			u64 oblock, u32 mask, u32 new_slot, u32 old, u32 epoch,
			pmc_fill_fn fill, void *ctx, u32 *freed)
{
	struct pmc_record r;
	u32 keep = 0, flags = PMC_SF_DIRTY | pmc_epoch_flags(epoch);
	u32 sc[PMC_MAX_SECTORS_PER_BLOCK], *crcs = m->data_crc ? sc : NULL;
	u64 seq;
	int ret;

	*freed = PMC_NO_SLOT;
	if (old != PMC_NO_SLOT)
		keep = pmc_slot_mask(idx->slot[old]) & ~mask;

	/* W1: data into a free slot (its record is durably dead). */
	if (keep) {
		ret = pmc_meta_copy_sectors(m, new_slot, old, keep, crcs);
		if (ret)
			return ret;
	}
	ret = fill(ctx, pmc_meta_data(m, new_slot), crcs);
	if (ret)
		return ret;
	/* W2: the data is durable before any record can point at it. */
	pmc_pmem_fence(PMC_P_DATA);
	pmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W2 : PMC_CUT_OVER_W2);

	/* W3: the new record, with a seq higher than every older copy. */
	seq = pmc_atomic64_inc_return(&m->last_seq);
	/*
	 * Above PMC_SEQ_MAX the record would be dead on the next load and the
	 * acknowledged write lost.  No run gets there; a forged seq near it
	 * (corrupt or foreign metadata) does: fail the write, with no record.
	 */
	if (seq > PMC_SEQ_MAX)
		return -EIO;
	memset(&r, 0, sizeof(r));
	r.oblock = cpu_to_le64(oblock);
	r.seq = cpu_to_le64(seq);
	r.valid = cpu_to_le32(mask | keep);
	if (crcs)	/* of the bytes stored: the kept sectors' and the fill's */
		r.data_crc = cpu_to_le32(pmc_meta_block_crc(m, crcs, mask | keep));
	r.state = cpu_to_le32(PMC_REC_DIRTY);
	r.csum = cpu_to_le32(pmc_meta_record_csum(m->record_seed, new_slot, &r));
	pmc_meta_store(m, pmc_rec(m, new_slot), &r, sizeof(r), PMC_P_RECORD);
	pmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W3 : PMC_CUT_OVER_W3);
	/* W4: the write is durable: it may be acknowledged after this. */
	pmc_pmem_fence(PMC_P_RECORD);
	pmc_cut_point(old == PMC_NO_SLOT ? PMC_CUT_NEW_W4 : PMC_CUT_OVER_W4);

	if (pmc_index_inflight(idx, oblock))
		flags |= PMC_SF_WAITPREV;
	if (old != PMC_NO_SLOT) {
		/*
		 * W5/W6: the older copy is durably dead before the newer one
		 * can ever be freed (else discard or eviction of the newer
		 * copy would resurrect it after a crash).
		 */
		pmc_meta_invalidate(m, old, PMC_P_FREE);
		pmc_cut_point(PMC_CUT_OVER_W5);
		pmc_pmem_fence(PMC_P_FREE);
		pmc_cut_point(PMC_CUT_OVER_W6);
		if (pmc_slot_flags(idx->slot[old]) & PMC_SF_WB) {
			pmc_index_set_flags(idx, old, PMC_SF_STALE, 0);
		} else {
			pmc_index_unlink(idx, old);
			*freed = old;
		}
	}
	pmc_index_insert(idx, new_slot, oblock, mask | keep, flags);
	return 0;
}

void pmc_meta_drop_block(struct pmc_meta *m, struct pmc_index *idx,
			 u64 oblock, u32 *freed)
{
	u32 old = pmc_index_lookup(idx, oblock);

	*freed = PMC_NO_SLOT;
	if (old == PMC_NO_SLOT)
		return;
	/*
	 * D1: durably FREE before the caller drops the stripe lock.  Then
	 * another CPU may write the block (no older copy left to invalidate),
	 * write the new copy back and evict it, or, if this slot is under
	 * writeback, free it when the origin write completes.
	 */
	pmc_meta_invalidate(m, old, PMC_P_FREE);
	pmc_pmem_fence(PMC_P_FREE);
	if (pmc_slot_flags(idx->slot[old]) & PMC_SF_WB) {
		/* STALE: the writeback completion frees it. */
		pmc_index_set_flags(idx, old, PMC_SF_STALE, 0);
	} else {
		pmc_index_unlink(idx, old);
		*freed = old;
	}
}

void pmc_meta_wb_start(struct pmc_index *idx, u32 slot)
{
	pmc_index_set_flags(idx, slot, PMC_SF_WB, 0);
}

int pmc_meta_wb_done(struct pmc_meta *m, struct pmc_index *idx, u32 slot,
		     bool ok, u32 *freed)
{
	u64 v = idx->slot[slot];
	u64 oblock = pmc_slot_oblock(v);
	struct pmc_record r;
	bool live;
	u32 cur;

	*freed = PMC_NO_SLOT;
	if (pmc_slot_flags(v) & PMC_SF_STALE) {
		/* Its record was made FREE (and fenced) when it went stale. */
		pmc_index_unlink(idx, slot);
		*freed = slot;
		cur = pmc_index_lookup(idx, oblock);
		if (cur != PMC_NO_SLOT)
			pmc_index_set_flags(idx, cur, 0, PMC_SF_WAITPREV);
		return 0;
	}
	if (!ok) {
		pmc_index_set_flags(idx, slot, 0, PMC_SF_WB);
		return 0;
	}
	if (pmc_meta_read_record(m, slot, &r, &live) || !live ||
	    le64_to_cpu(r.oblock) != oblock) {
		/*
		 * The record is unreadable or not ours any more, so it cannot
		 * be made CLEAN; the origin holds the block now.  Retrying
		 * would write it back for ever: the slot goes out of use,
		 * its record FREE (a store needs no read; fenced with the
		 * CLEAN stores of the batch, before the stripe lock is
		 * dropped).
		 */
		pmc_meta_invalidate(m, slot, PMC_P_FREE);
		pmc_index_unlink(idx, slot);
		pmc_index_set_bad(idx, slot);
		return -EIO;
	}
	/* C1: the origin write and a flush after it completed: CLEAN. */
	pmc_meta_set_state(m, slot, &r, PMC_REC_CLEAN, PMC_P_CLEAN);
	pmc_cut_point(PMC_CUT_WB_C1);
	pmc_index_set_flags(idx, slot, 0,
			    PMC_SF_WB | PMC_SF_DIRTY | PMC_SF_EPOCH);
	return 0;
}

void pmc_meta_evict(struct pmc_meta *m, struct pmc_index *idx, u32 slot)
{
	/* E1: dead record before the slot's data may be overwritten. */
	pmc_meta_invalidate(m, slot, PMC_P_FREE);
	pmc_index_unlink(idx, slot);
	pmc_cut_point(PMC_CUT_EVICT_E1);
}
