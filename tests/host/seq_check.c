// SPDX-License-Identifier: GPL-2.0
/*
 * Recovery and an impossible seq (issue 14), on the module's own
 * pmc_meta.c and pmc_index.c.
 *
 * A record with a correct checksum and seq = 2^64 - 1 (or any seq no run
 * can reach) is corrupt.  If recovery took its seq as last_seq, the next
 * write would get seq 0 and lose against every older copy: a crash
 * between W4 and W6 of an overwrite (both copies live) would bring the
 * old data back.  This program forges such a record, reboots, overwrites
 * a block, takes the crash image right after W4 and recovers it; the
 * overwrite must win.  It also checks that recovery counts the record in
 * bad_seq and does not map it.
 *
 * Prints "seq_check: forged=N bad_seq=N last_seq=N lost=N" and exits 1 if
 * the overwrite was lost or the forged record was mapped.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pmc_meta.h"

#define PMEM_BYTES	(1U << 20)
#define BS		4096U
#define ORIGIN_SECTORS	8192U

static u8 pmem[PMEM_BYTES];
static u8 crash_image[PMEM_BYTES];
static bool snap_at_record_fence;

/* Stores are durable at once; the crash image is taken at W4's fence. */
void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	memcpy(dst, src, len);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
	if (tag == PMC_P_RECORD && snap_at_record_fence) {
		memcpy(crash_image, pmem, sizeof(pmem));
		snap_at_record_fence = false;
	}
}

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	return 0;
}

void pmc_random_bytes(void *p, size_t len)
{
	u8 *b = p;

	while (len--)
		*b++ = (u8)rand();
}

static int fill_byte(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	memset(kaddr, *(u8 *)ctx, BS);
	return 0;
}

static const struct pmc_origin_id oid = { .sectors = ORIGIN_SECTORS };

/* Boot: open and recover @img into @m and @idx. */
static void boot(u8 *img, struct pmc_meta *m, struct pmc_index *idx,
		 struct pmc_recover_stats *rs)
{
	const char *why;

	if (pmc_meta_open(m, img, PMEM_BYTES, BS, &oid, &why) ||
	    pmc_index_init(idx, m->n_blocks) || pmc_meta_recover(m, idx, rs)) {
		fprintf(stderr, "seq_check: open/recover failed: %s\n", why);
		exit(2);
	}
}

static void write_block(struct pmc_meta *m, struct pmc_index *idx, u64 ob,
			u8 val)
{
	u32 slot = pmc_index_pop_free(idx), freed;

	if (pmc_meta_write_block(m, idx, ob, m->full_mask, slot, 0, fill_byte,
				 &val, &freed)) {
		fprintf(stderr, "seq_check: write failed\n");
		exit(2);
	}
	if (freed != PMC_NO_SLOT)
		pmc_index_push_free(idx, freed);
}

/* A record with a correct checksum: @seq, block @ob, CLEAN, in @slot. */
static void forge(struct pmc_meta *m, u32 slot, u64 ob, u64 seq, u32 state)
{
	struct pmc_record r = {
		.oblock = cpu_to_le64(ob),
		.seq = cpu_to_le64(seq),
		.valid = cpu_to_le32(m->full_mask),
		.state = cpu_to_le32(state),
	};

	r.csum = cpu_to_le32(pmc_meta_record_csum(m->record_seed, slot, &r));
	memcpy(m->base + PMC_RECORDS_OFFSET + (u64)slot * PMC_RECORD_SIZE,
	       &r, sizeof(r));
}

static u8 block_byte(struct pmc_meta *m, struct pmc_index *idx, u64 ob)
{
	u32 s = pmc_index_lookup(idx, ob);

	return s == PMC_NO_SLOT ? 0 : pmc_meta_data(m, s)[0];
}

int main(void)
{
	/* forged seqs: the largest, one beyond the limit, and one far above */
	static const u64 seqs[] = { ~0ULL, PMC_SEQ_MAX + 1, 1ULL << 63 };
	static const u32 states[] = { PMC_REC_CLEAN, PMC_REC_FREE };
	unsigned int i, j, lost = 0, mapped = 0, forged = 0, bad = 0;
	u64 last = 0;

	for (i = 0; i < ARRAY_SIZE(seqs); i++) {
		for (j = 0; j < ARRAY_SIZE(states); j++) {
			struct pmc_meta m;
			struct pmc_index idx;
			struct pmc_recover_stats rs;

			memset(pmem, 0, sizeof(pmem));
			if (pmc_meta_format(&m, pmem, PMEM_BYTES, BS, &oid))
				return 2;
			pmc_index_init(&idx, m.n_blocks);
			pmc_meta_recover(&m, &idx, &rs);
			write_block(&m, &idx, 7, 'A');
			forge(&m, (u32)m.n_blocks - 1, 9, seqs[i], states[j]);
			forged++;
			pmc_index_destroy(&idx);

			/* reboot, then overwrite block 7; crash after W4 */
			boot(pmem, &m, &idx, &rs);
			bad += rs.bad_seq;
			last = pmc_atomic64_read(&m.last_seq);
			if (pmc_index_lookup(&idx, 9) != PMC_NO_SLOT)
				mapped++;
			snap_at_record_fence = true;
			write_block(&m, &idx, 7, 'B');
			pmc_index_destroy(&idx);

			boot(crash_image, &m, &idx, &rs);
			if (block_byte(&m, &idx, 7) != 'B') {
				fprintf(stderr, "seq_check: seq %llu: the acknowledged overwrite of block 7 was lost\n",
					(unsigned long long)seqs[i]);
				lost++;
			}
			pmc_index_destroy(&idx);
		}
	}
	printf("seq_check: forged=%u bad_seq=%u last_seq=%llu lost=%u mapped=%u\n",
	       forged, bad, (unsigned long long)last, lost, mapped);
	return lost || mapped ? 1 : 0;
}
