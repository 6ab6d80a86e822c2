// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness of the on-pmem loader (issue 29): the module's own
 * pmc_meta.c and pmc_index.c load a small pmem image that may be wrong or
 * hostile (a namespace from another machine, a corrupted NVDIMM), the way
 * pmc_load_check() + pmc_load() + pmc_select_init/start() do in the
 * kernel, and the harness checks what a loader promises.
 *
 * Input (every field little-endian, a short input is padded with zeros):
 *
 *   0   u8  flags     FIX_SB: recompute the superblock checksum
 *                     FIX_REC: every record that is not all zero gets its
 *                              correct checksum, unless its csum is
 *                              0xffffffff (a torn record among them)
 *                     OID_SB: the origin is the one the superblock names
 *                     BS_SB: the table's block size is the superblock's
 *                     SB_EIO: media error reading the superblock
 *   1   u8  geometry  bits 0-1: table block size 512 << n (without BS_SB),
 *                     bits 2-7: stripe of writeback selection, in blocks
 *   2   u16 dev       pmem device size in 4 KiB units: 3 + bits 0-5
 *                     (12 .. 264 KiB), or with bits 14-15 set, bits 0-7
 *                     (12 KiB .. 1020 KiB)
 *   4   u16 bad[2]    record slots whose reads fail (media errors; the
 *                     32 bytes where record n would be, also past the
 *                     records: then a media error in a data block)
 *   8   u8  ops[8]    after the load, 4 operations (kind, argument):
 *                     write, writeback, discard (see run_ops())
 *   16  the first bytes of the namespace: the superblock area, then the
 *       records from PMC_RECORDS_OFFSET (the 4 KiB superblock area is
 *       given only up to its 256 bytes of superblock; the rest is zero)
 *
 * The image ends where its heap block ends and the bytes before it are
 * poisoned: AddressSanitizer reports any access outside the namespace,
 * and the pmem primitives below check their ranges too.  Stores are
 * durable at once (no crash is modelled here: tests/host/crash_model.c
 * does that).
 *
 * Checked after the load (abort() on a violation, which libFuzzer reports
 * as a crash and keeps as an input):
 *  - slot states: every slot is exactly one of used (in its hash chain),
 *    free (on the free list, once) or bad (an unreadable record);
 *    used + free + bad = n_blocks, and the recovery counters agree;
 *  - every used slot's record is live on pmem and says what the index says
 *    (block, sector mask, dirty), lookup of its block finds it (so no
 *    block is mapped twice), every live record on pmem is mapped, every
 *    mapped block is inside the origin, last_seq is at least every
 *    mapped seq and at most PMC_SEQ_MAX;
 *  - the clean bitmap lists exactly the clean slots;
 *  - recovery is idempotent: loading the repaired image again maps the
 *    same blocks to the same slots and finds nothing torn or superseded;
 *  - after writes, writebacks and discards on the loaded cache, a reload
 *    finds the last write of every block (its sectors and data) and no
 *    discarded or evicted block, and last_seq counts every write that
 *    succeeded (a write fails, with no record, when a forged seq leaves no
 *    room below PMC_SEQ_MAX).
 */
#include <stdio.h>
#include <stdlib.h>
#include <sanitizer/asan_interface.h>

#include "pmc_meta.h"

#define F_FIX_SB	0x01
#define F_FIX_REC	0x02
#define F_OID_SB	0x04
#define F_BS_SB		0x08
#define F_SB_EIO	0x10

#define HDR		16
#define MIN_DEV		(12U << 10)
#define MAX_DEV		(1U << 20)
#define N_OPS		4
/* a fixed origin for inputs that do not take the superblock's: 1 MiB */
#define FIXED_SECTORS	2048ULL

struct fuzz_in {
	u8 flags;
	u8 geom;
	u32 dev;
	u32 bad[2];
	u8 ops[2 * N_OPS];
};

static u8 *pmem_buf;	/* MAX_DEV bytes, allocated once */
static u8 *pmem;	/* the namespace: the last pmem_len bytes of it */
static u64 pmem_len;
static u32 bad_slot[2];
static bool sb_eio;

#define fz_assert(c) do {						\
	if (!(c)) {							\
		fprintf(stderr, "fuzz_meta: %s:%d: violated: %s\n",	\
			__FILE__, __LINE__, #c);			\
		abort();						\
	}								\
} while (0)

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	fz_assert((u8 *)dst >= pmem && (u8 *)dst + len <= pmem + pmem_len);
	memcpy(dst, src, len);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
}

/* A read that touches the superblock or a bad record fails like copy_mc. */
int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	u64 a = (const u8 *)src - pmem, b = a + len;
	int i;

	fz_assert((const u8 *)src >= pmem && b <= pmem_len);
	if (sb_eio && a < PMC_SUPER_SIZE)
		return -EIO;
	for (i = 0; i < 2; i++) {
		u64 r = PMC_RECORDS_OFFSET + (u64)bad_slot[i] * PMC_RECORD_SIZE;

		if (bad_slot[i] != 0xffff && a < r + PMC_RECORD_SIZE && r < b)
			return -EIO;
	}
	memcpy(dst, src, len);
	return 0;
}

/* Deterministic: a crash input replays the same way. */
void pmc_random_bytes(void *p, size_t len)
{
	memset(p, 0x5a, len);
}

u64 pmc_now_seconds(void)
{
	return 0;
}

void pmc_log(int level, const char *fmt, ...)
{
}

static u64 get_le(const u8 *p, int n)
{
	u64 v = 0;

	while (n--)
		v = (v << 8) | p[n];
	return v;
}

static u64 origin_blocks(u64 sectors, u32 spb)
{
	return (sectors + spb - 1) / spb;
}

/* The data of sector @s of a block written with @tag. */
static u8 pattern(u8 tag, u32 s)
{
	return (u8)(tag * 31 + s + 1);
}

struct fill_ctx {
	u32 mask;
	u8 tag;
};

static int fill(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	struct fill_ctx *f = ctx;
	u32 s;

	for (s = 0; s < PMC_MAX_SECTORS_PER_BLOCK; s++)
		if (f->mask & (1U << s)) {
			memset(kaddr + s * PMC_SECTOR_SIZE, pattern(f->tag, s),
			       PMC_SECTOR_SIZE);
			/* a fuzzed superblock may have data_crc */
			if (sector_crc)
				sector_crc[s] = pmc_sector_crc(kaddr + s * PMC_SECTOR_SIZE);
		}
	return 0;
}

/* recovery.c, pmc_drop_beyond_origin(): live records past the origin. */
static void drop_beyond_origin(struct pmc_meta *m, struct pmc_index *idx,
			       struct pmc_recover_stats *rs, u64 end)
{
	u64 i, v;
	u32 freed;

	for (i = 0; i < m->n_blocks; i++) {
		v = idx->slot[i];
		if (!(pmc_slot_flags(v) & PMC_SF_USED) || pmc_slot_oblock(v) < end)
			continue;
		pmc_meta_drop_block(m, idx, pmc_slot_oblock(v), &freed);
		pmc_meta_fence(PMC_P_FREE);
		if (freed != PMC_NO_SLOT)
			pmc_index_push_free(idx, freed);
		rs->live--;
		if (pmc_slot_flags(v) & PMC_SF_DIRTY)
			rs->dirty--;
	}
}

/*
 * pmc_load_check() + pmc_load() + pmc_select_init/start(): open (format
 * a blank namespace), recover, drop what lies beyond the origin, build
 * writeback selection.  0: loaded; otherwise the table is refused.
 */
static int load(struct pmc_meta *m, struct pmc_index *idx,
		struct pmc_recover_stats *rs, u32 bs,
		const struct pmc_origin_id *oid, u32 stripe)
{
	const char *why = NULL;
	u64 n, off;
	int r;

	r = pmc_meta_open(m, pmem, pmem_len, bs, oid, &why);
	if (r == -ENODATA) {
		if (pmc_meta_geometry(pmem_len, bs, &n, &off))
			return -EINVAL;
		r = pmc_meta_format(m, pmem, pmem_len, bs, oid);
		fz_assert(!r && m->n_blocks == n);
	} else if (r) {
		fz_assert(r == -EIO || r == -ENOMEM || why);
		return r;
	}
	fz_assert(PMC_RECORDS_OFFSET + m->n_blocks * PMC_RECORD_SIZE <=
		  m->data_offset);
	fz_assert(m->data_offset + (m->n_blocks << m->block_shift) <= pmem_len);
	if (pmc_index_init(idx, m->n_blocks))
		return -ENOMEM;
	r = pmc_meta_recover(m, idx, rs);
	fz_assert(!r);
	drop_beyond_origin(m, idx, rs, origin_blocks(oid->sectors, m->spb));
	if (pmc_index_wb_alloc(idx, origin_blocks(oid->sectors, m->spb))) {
		pmc_index_destroy(idx);
		return -ENOMEM;
	}
	pmc_index_wb_build(idx, stripe, m->full_mask);
	return 0;
}

/* What a loaded cache promises (see the top of the file). */
static void check_loaded(struct pmc_meta *m, struct pmc_index *idx,
			 const struct pmc_recover_stats *rs, u64 end)
{
	u64 n = m->n_blocks, used = 0, dirty = 0, bad = 0, nfree = 0, chained = 0;
	u64 i, last = pmc_atomic64_read(&m->last_seq);
	u8 *seen = calloc(n, 1);
	struct pmc_record r;
	bool live;
	u32 s, f;

	fz_assert(seen);
	fz_assert(idx->n_slots == n);
	/* after a load; writes that found no seq left may have raised it */
	fz_assert(!rs || last <= PMC_SEQ_MAX);
	for (s = idx->free_head; s != PMC_NO_SLOT; s = idx->next[s]) {
		fz_assert(s < n && !seen[s]);
		seen[s] = 1;
		fz_assert(idx->slot[s] == 0);
		nfree++;
	}
	fz_assert(nfree == idx->n_free);
	for (i = 0; i < (1ULL << idx->bucket_bits); i++) {
		for (s = idx->bucket[i]; s != PMC_NO_SLOT; s = idx->next[s]) {
			fz_assert(s < n && !seen[s]);
			seen[s] = 2;
			fz_assert(pmc_index_bucket(idx, pmc_slot_oblock(idx->slot[s])) == i);
			chained++;
		}
	}
	for (i = 0; i < n; i++) {
		u64 v = idx->slot[i];

		f = pmc_slot_flags(v);
		fz_assert(!(f & (PMC_SF_WB | PMC_SF_STALE | PMC_SF_WAITPREV)));
		if (f & PMC_SF_BAD) {
			fz_assert(f == PMC_SF_BAD && !seen[i]);
			fz_assert(pmc_meta_read_record(m, (u32)i, &r, &live) == -EIO);
			bad++;
			continue;
		}
		fz_assert(pmc_meta_read_record(m, (u32)i, &r, &live) == 0);
		if (!(f & PMC_SF_USED)) {
			fz_assert(seen[i] == 1);
			/* a live record that nothing maps would come back */
			fz_assert(!live);
			continue;
		}
		fz_assert(seen[i] == 2);
		used++;
		fz_assert(live);
		fz_assert(le64_to_cpu(r.oblock) == pmc_slot_oblock(v));
		fz_assert(pmc_slot_oblock(v) < end);
		fz_assert(le32_to_cpu(r.valid) == pmc_slot_mask(v));
		fz_assert(pmc_slot_mask(v) && !(pmc_slot_mask(v) & ~m->full_mask));
		fz_assert(!!(f & PMC_SF_DIRTY) ==
			  (le32_to_cpu(r.state) == PMC_REC_DIRTY));
		fz_assert(le64_to_cpu(r.seq) <= last);
		/* data_crc: a block's check ends, whatever its bytes */
		if (m->data_crc) {
			int c = pmc_meta_check_data(m, m->base, (u32)i);

			fz_assert(!c || c == -EBADMSG || c == -EIO);
		}
		if (f & PMC_SF_DIRTY)
			dirty++;
		fz_assert(pmc_index_lookup(idx, pmc_slot_oblock(v)) == i);
		fz_assert(pmc_test_bit(i, idx->clean.w) == pmc_slot_clean(v));
	}
	fz_assert(chained == used);
	fz_assert(used + nfree + bad == n);
	if (rs)
		fz_assert(rs->live == used && rs->dirty == dirty &&
			  rs->unreadable == bad);
	/* the clean bitmap's finder visits exactly the clean slots, in order */
	for (i = 0, s = pmc_index_next_clean(idx, 0); s != PMC_NO_SLOT;
	     s = s + 1 < n ? pmc_index_next_clean(idx, s + 1) : PMC_NO_SLOT) {
		fz_assert(s >= i && pmc_slot_clean(idx->slot[s]));
		for (; i < s; i++)
			fz_assert(!pmc_slot_clean(idx->slot[i]));
		i = s + 1;
	}
	for (; i < n; i++)
		fz_assert(!pmc_slot_clean(idx->slot[i]));
	free(seen);
}

/* Expected contents after the operations: per origin block of interest. */
struct expect {
	u64 oblock;
	u32 mask;	/* sectors written; 0: discarded */
	u8 tag[PMC_MAX_SECTORS_PER_BLOCK];
};

static struct expect *find_exp(struct expect *e, int *ne, u64 ob)
{
	int i;

	for (i = 0; i < *ne; i++)
		if (e[i].oblock == ob)
			return &e[i];
	memset(&e[*ne], 0, sizeof(e[0]));
	e[*ne].oblock = ob;
	return &e[(*ne)++];
}

/*
 * A free slot: from the free list, or by evicting a clean block (the
 * origin holds it: it is no longer expected in the cache).
 */
static u32 get_slot(struct pmc_meta *m, struct pmc_index *idx,
		    struct expect *e, int *ne)
{
	u32 s = pmc_index_pop_free(idx);

	if (s != PMC_NO_SLOT)
		return s;
	s = pmc_index_next_clean(idx, 0);
	if (s == PMC_NO_SLOT)
		return s;
	find_exp(e, ne, pmc_slot_oblock(idx->slot[s]))->mask = 0;
	pmc_meta_evict(m, idx, s);
	pmc_meta_fence(PMC_P_FREE);
	return s;
}

/*
 * Operations on the loaded cache: (kind & 3, arg) = 1: write block arg of
 * the origin (sectors arg-derived), 2: write back the first dirty block
 * (origin write done: CLEAN), 3: discard block arg.  Returns the number of
 * seqs used.
 */
static u64 run_ops(struct pmc_meta *m, struct pmc_index *idx,
		   const struct fuzz_in *in, u64 end, struct expect *e, int *ne)
{
	u64 seqs = 0;
	int i;

	for (i = 0; i < N_OPS; i++) {
		u32 kind = in->ops[2 * i] & 3, arg = in->ops[2 * i + 1];
		u64 ob = arg % end;
		struct expect *x;
		u32 slot, freed, s, old;
		int r;

		if (kind == 1) {
			struct fill_ctx fc;

			fc.mask = (arg & 1) ? m->full_mask :
				  ((in->ops[2 * i] >> 2) | 1) & m->full_mask;
			fc.tag = (u8)(i + 1);
			slot = get_slot(m, idx, e, ne);
			if (slot == PMC_NO_SLOT)
				continue;
			old = pmc_index_lookup(idx, ob);
			r = pmc_meta_write_block(m, idx, ob, fc.mask, slot, 0,
						 fill, &fc, &freed);
			if (r) {
				/* a media error in the older copy: nothing changed */
				fz_assert(r == -EIO && freed == PMC_NO_SLOT);
				fz_assert(pmc_index_lookup(idx, ob) == old);
				pmc_index_push_free(idx, slot);
				continue;
			}
			seqs++;
			x = find_exp(e, ne, ob);
			if (freed != PMC_NO_SLOT)
				pmc_index_push_free(idx, freed);
			for (s = 0; s < m->spb; s++)
				if (fc.mask & (1U << s))
					x->tag[s] = fc.tag;
			/* sectors an older copy held and this write kept */
			x->mask |= fc.mask;
		} else if (kind == 2) {
			for (s = 0; s < m->n_blocks; s++)
				if (pmc_wb_candidate(idx->slot[s]))
					break;
			if (s == m->n_blocks)
				continue;
			pmc_meta_wb_start(idx, s);
			fz_assert(!pmc_meta_wb_done(m, idx, s, true, &freed));
			pmc_meta_fence(PMC_P_CLEAN);
			fz_assert(freed == PMC_NO_SLOT);
		} else if (kind == 3) {
			x = find_exp(e, ne, ob);
			pmc_meta_drop_block(m, idx, ob, &freed);
			if (freed != PMC_NO_SLOT)
				pmc_index_push_free(idx, freed);
			x->mask = 0;
			fz_assert(pmc_index_lookup(idx, ob) == PMC_NO_SLOT);
		}
	}
	return seqs;
}

static void parse(const u8 *data, size_t size, struct fuzz_in *in, u8 *hdr)
{
	u32 v;

	memset(hdr, 0, HDR);
	memcpy(hdr, data, size < HDR ? size : HDR);
	in->flags = hdr[0];
	in->geom = hdr[1];
	v = (u32)get_le(hdr + 2, 2);
	/* mostly up to 264 KiB (fast); a quarter of the inputs up to 1 MiB */
	if ((v & 0xc000) == 0xc000)
		in->dev = (v & 0xff) << 12;
	else
		in->dev = (3 + (v & 0x3f)) << 12;
	if (in->dev < MIN_DEV)
		in->dev = MIN_DEV;
	in->bad[0] = (u32)get_le(hdr + 4, 2);
	in->bad[1] = (u32)get_le(hdr + 6, 2);
	memcpy(in->ops, hdr + 8, sizeof(in->ops));
}

/* The namespace from the input, with the checksums FIX_* asks for. */
static void build_image(const struct fuzz_in *in, const u8 *data, size_t size)
{
	struct pmc_super *sb = (struct pmc_super *)pmem;
	size_t len, i, nrec;
	u32 seed;

	memset(pmem, 0, pmem_len);
	if (size <= HDR)
		return;
	data += HDR;
	size -= HDR;
	len = size < PMC_SUPER_SIZE ? size : PMC_SUPER_SIZE;
	memcpy(pmem, data, len);
	if (size > PMC_SUPER_SIZE) {
		len = size - PMC_SUPER_SIZE;
		if (len > pmem_len - PMC_RECORDS_OFFSET)
			len = pmem_len - PMC_RECORDS_OFFSET;
		memcpy(pmem + PMC_RECORDS_OFFSET, data + PMC_SUPER_SIZE, len);
	}
	if (in->flags & F_FIX_SB)
		sb->csum = cpu_to_le32(pmc_meta_super_csum(sb));
	if (!(in->flags & F_FIX_REC))
		return;
	nrec = (pmem_len - PMC_RECORDS_OFFSET) / PMC_RECORD_SIZE;
	seed = le32_to_cpu(sb->record_seed);
	for (i = 0; i < nrec; i++) {
		struct pmc_record *r = (struct pmc_record *)(pmem +
			PMC_RECORDS_OFFSET + i * PMC_RECORD_SIZE);
		static const struct pmc_record zero;

		if (r->csum == cpu_to_le32(~0U) ||
		    !memcmp(r, &zero, sizeof(zero)))
			continue;
		r->csum = cpu_to_le32(pmc_meta_record_csum(seed, (u32)i, r));
	}
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct pmc_meta m, m2;
	struct pmc_index idx, idx2;
	struct pmc_recover_stats rs, rs2;
	struct pmc_origin_id oid;
	const struct pmc_super *sb;
	struct fuzz_in in;
	struct expect exp[2 * N_OPS];
	u8 hdr[HDR];
	u64 end, i, seqs, last;
	u32 bs, stripe;
	int ne = 0, j;

	parse(data, size, &in, hdr);
	/*
	 * The namespace ends where the heap block ends and the bytes before
	 * it are poisoned: AddressSanitizer sees an access on either side.
	 * (A fresh 1 MiB allocation per input would cost a few mmaps.)
	 */
	if (!pmem_buf) {
		pmem_buf = malloc(MAX_DEV);
		fz_assert(pmem_buf);
	}
	pmem_len = in.dev;
	pmem = pmem_buf + MAX_DEV - pmem_len;
	ASAN_UNPOISON_MEMORY_REGION(pmem_buf, MAX_DEV);
	ASAN_POISON_MEMORY_REGION(pmem_buf, MAX_DEV - pmem_len);
	bad_slot[0] = in.bad[0];
	bad_slot[1] = in.bad[1];
	sb_eio = in.flags & F_SB_EIO;
	build_image(&in, data, size);
	sb = (const struct pmc_super *)pmem;

	memset(&oid, 0, sizeof(oid));
	oid.sectors = FIXED_SECTORS;
	if ((in.flags & F_OID_SB) && le64_to_cpu(sb->origin_sectors) &&
	    le64_to_cpu(sb->origin_sectors) <= (1ULL << 40)) {
		oid.sectors = le64_to_cpu(sb->origin_sectors);
		oid.kind = le32_to_cpu(sb->origin_id_kind);
		memcpy(oid.uuid, sb->origin_uuid, sizeof(oid.uuid));
	}
	bs = (in.flags & F_BS_SB) ? le32_to_cpu(sb->block_size) :
	     PMC_MIN_BLOCK_SIZE << (in.geom & 3);
	stripe = in.geom >> 2;

	if (load(&m, &idx, &rs, bs, &oid, stripe))
		goto out;
	end = origin_blocks(oid.sectors, m.spb);
	check_loaded(&m, &idx, &rs, end);
	last = pmc_atomic64_read(&m.last_seq);

	/* recovery repaired the image durably: a second load is a no-op */
	fz_assert(!load(&m2, &idx2, &rs2, bs, &oid, stripe));
	check_loaded(&m2, &idx2, &rs2, end);
	fz_assert(rs2.torn == 0 && rs2.superseded == 0 && rs2.live == rs.live);
	/* a torn record made FREE may now add its seq: never less */
	fz_assert(pmc_atomic64_read(&m2.last_seq) >= last);
	for (i = 0; i < m.n_blocks; i++)
		fz_assert(idx2.slot[i] == idx.slot[i]);
	pmc_index_destroy(&idx2);

	seqs = run_ops(&m, &idx, &in, end, exp, &ne);
	check_loaded(&m, &idx, NULL, end);
	pmc_index_destroy(&idx);

	/* reboot: every acknowledged write is found, no discarded block */
	fz_assert(!load(&m2, &idx2, &rs2, bs, &oid, stripe));
	check_loaded(&m2, &idx2, &rs2, end);
	/* (a write over a FREE record with a higher seq may lower it) */
	fz_assert(pmc_atomic64_read(&m2.last_seq) >= last + seqs);
	for (j = 0; j < ne; j++) {
		u32 s = pmc_index_lookup(&idx2, exp[j].oblock), k;

		if (!exp[j].mask) {
			fz_assert(s == PMC_NO_SLOT);
			continue;
		}
		fz_assert(s != PMC_NO_SLOT);
		fz_assert((pmc_slot_mask(idx2.slot[s]) & exp[j].mask) ==
			  exp[j].mask);
		for (k = 0; k < m2.spb; k++)
			if (exp[j].mask & (1U << k))
				fz_assert(pmc_meta_data(&m2, s)[k * PMC_SECTOR_SIZE] ==
					  pattern(exp[j].tag[k], k));
	}
	pmc_index_destroy(&idx2);
out:
	pmem = NULL;
	return 0;
}
