// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper: craft cache images with the module's own metadata code
 * (pmc_meta_format(), pmc_meta_write_block(), pmc_meta_wb_done()) through
 * libpmc, then damage them on purpose.  Formatting is the module's job, so
 * this lives with the tests, not in pmemcachectl.
 *
 * usage: mkimage IMAGE BYTES BLOCK_SIZE ORIGIN_SECTORS none|md:UUID
 *                [--origin FILE] [--apply-to FILE] [--data-crc] OP...
 *   --data-crc                 format with PMC_FEATURE_DATA_CRC
 *   write:OBLOCK:MASK:SEED     acknowledged write of the sectors in MASK (hex)
 *   clean:OBLOCK               write the block back to --origin, mark it CLEAN
 *   crashdup:OBLOCK:MASK:SEED  overwrite, then bring the old record back:
 *                              two live copies, as a crash between W4 and W6
 *   tearnew:OBLOCK:MASK:SEED   a write whose record store was torn (never
 *                              acknowledged: not applied to --apply-to)
 *   fill:FIRST:COUNT:STEP      COUNT writes, one per block of FIRST..+COUNT
 *                              in the order FIRST + i * STEP % COUNT (STEP
 *                              coprime to COUNT); every 4th of half a block,
 *                              every 3rd then marked CLEAN.  Records only:
 *                              the data is not written (benchmarks of check;
 *                              two fdatasync()s a write: use tmpfs)
 *   sbcorrupt                  flip a superblock byte (checksum now wrong)
 *   sbversion:V                version V with a correct checksum
 *   formatting                 magic = "format in progress"
 *   foreign                    overwrite the first bytes with other data
 * Sector s of a write holds pattern(SEED, OBLOCK, s); --apply-to FILE gets
 * every acknowledged write at its origin offset (the expected origin).
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libpmc.h"

static struct pmc_image im;
static int apply_fd = -1, origin_fd = -1;

static void die(const char *msg)
{
	fprintf(stderr, "mkimage: %s\n", msg);
	exit(1);
}

static void pattern(u32 seed, u64 oblock, u32 sector, u8 *buf)
{
	u64 x = ((u64)seed << 40) ^ (oblock << 8) ^ sector ^ 0x9e3779b97f4a7c15ULL;
	int i;

	for (i = 0; i < (int)PMC_SECTOR_SIZE; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (u8)x;
	}
}

struct fill_ctx {
	u32 seed, mask;
	u64 oblock;
};

static int fill(void *vctx, u8 *kaddr, u32 *sector_crc)
{
	struct fill_ctx *c = vctx;
	u8 buf[PMC_SECTOR_SIZE];
	u32 s;

	for (s = 0; s < im.meta.spb; s++) {
		if (!(c->mask & (1U << s)))
			continue;
		pattern(c->seed, c->oblock, s, buf);
		if (sector_crc)
			sector_crc[s] = pmc_sector_crc(buf);
		pmc_pmem_write(kaddr + s * PMC_SECTOR_SIZE, buf, sizeof(buf), PMC_P_DATA);
	}
	return 0;
}

static void apply(int fd, u64 oblock, u32 mask, u32 seed)
{
	u8 buf[PMC_SECTOR_SIZE];
	u32 s;

	if (fd < 0)
		return;
	for (s = 0; s < im.meta.spb; s++) {
		if (!(mask & (1U << s)))
			continue;
		pattern(seed, oblock, s, buf);
		if (pwrite(fd, buf, sizeof(buf),
			   (off_t)((oblock * im.meta.spb + s) * PMC_SECTOR_SIZE)) != sizeof(buf))
			die("apply: pwrite");
	}
}

static u32 do_write(u64 oblock, u32 mask, u32 seed)
{
	struct fill_ctx c = { seed, mask, oblock };
	u32 slot = pmc_index_pop_free(&im.idx), freed;

	if (slot == PMC_NO_SLOT)
		die("cache full");
	if (pmc_meta_write_block(&im.meta, &im.idx, oblock, mask, slot, 0, fill, &c, &freed))
		die("write_block failed");
	if (freed != PMC_NO_SLOT)
		pmc_index_push_free(&im.idx, freed);
	return slot;
}

static int fill_nothing(void *ctx, u8 *kaddr, u32 *sector_crc)
{
	(void)ctx;
	(void)kaddr;
	(void)sector_crc;
	return 0;
}

static void do_fill(u64 first, u64 count, u64 step)
{
	u32 full = im.meta.full_mask, half = full >> (im.meta.spb / 2);
	u32 slot, freed;
	u64 i;

	for (i = 0; i < count; i++) {
		u64 oblock = first + (i * step) % count;

		slot = pmc_index_pop_free(&im.idx);
		if (slot == PMC_NO_SLOT)
			die("cache full");
		if (pmc_meta_write_block(&im.meta, &im.idx, oblock, i % 4 ? full : half,
					 slot, 0, fill_nothing, NULL, &freed))
			die("write_block failed");
		if (freed != PMC_NO_SLOT)
			pmc_index_push_free(&im.idx, freed);
		if (i % 3)
			continue;
		pmc_meta_wb_start(&im.idx, slot);
		if (pmc_meta_wb_done(&im.meta, &im.idx, slot, true, &freed))
			die("wb_done");
		pmc_meta_fence(PMC_P_CLEAN);
	}
}

static u8 *rec_addr(u32 slot)
{
	return im.base + PMC_RECORDS_OFFSET + (u64)slot * PMC_RECORD_SIZE;
}

static void flip(u8 *addr)
{
	u8 b;

	if (pmc_pmem_read(&b, addr, 1))
		die("read");
	b ^= 0x5a;
	pmc_pmem_write(addr, &b, 1, PMC_P_RECORD);
	pmc_pmem_fence(PMC_P_RECORD);
}

static void rewrite_super(void (*edit)(struct pmc_super *, long), long arg, bool fix_csum)
{
	struct pmc_super sb;

	if (pmc_pmem_read(&sb, im.base, sizeof(sb)))
		die("read sb");
	edit(&sb, arg);
	if (fix_csum)
		sb.csum = cpu_to_le32(pmc_meta_super_csum(&sb));
	pmc_pmem_write(im.base, &sb, sizeof(sb), PMC_P_FORMAT);
	pmc_pmem_fence(PMC_P_FORMAT);
}

static void ed_version(struct pmc_super *sb, long v) { sb->version = cpu_to_le32((u32)v); }
static void ed_corrupt(struct pmc_super *sb, long v) { sb->reserved[7] ^= (u8)(v | 1); }
static void ed_formatting(struct pmc_super *sb, long v) { (void)v; sb->magic = cpu_to_le64(PMC_MAGIC_FORMATTING); }
static void ed_foreign(struct pmc_super *sb, long v) { (void)v; memcpy(sb, "\x7f" "ELF\2\1\1\0", 8); }

static int hexv(int c)
{
	return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

int main(int argc, char **argv)
{
	struct pmc_origin_id oid = { 0 };
	u64 bytes, oblock, count, step;
	u32 bs, mask, seed;
	int i, fd;

	if (argc < 6)
		die("usage: mkimage IMAGE BYTES BLOCK_SIZE ORIGIN_SECTORS none|md:UUID [--origin F] [--apply-to F] OP...");
	bytes = strtoull(argv[2], NULL, 0);
	bs = (u32)strtoul(argv[3], NULL, 0);
	oid.sectors = strtoull(argv[4], NULL, 0);
	if (!strncmp(argv[5], "md:", 3)) {
		const char *s = argv[5] + 3;
		int n = 0;

		oid.kind = PMC_ORIGIN_ID_MD;
		for (; *s && n < 16; s++) {
			if (*s == '-')
				continue;
			oid.uuid[n++] = (u8)(hexv(s[0]) << 4 | hexv(s[1]));
			s++;
		}
	}
	fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, (off_t)bytes))
		die("cannot create the image");
	close(fd);
	if (pmc_image_open(&im, argv[1], false, false))
		die(pmc_errmsg);
	for (i = 6; i < argc && strcmp(argv[i], "--data-crc"); i++)
		;
	if (pmc_meta_format_pair(&im.meta, im.base, NULL, im.pmem_bytes, bs, &oid,
				 i < argc ? PMC_FEATURE_DATA_CRC : 0))
		die("format failed");
	if (pmc_index_init(&im.idx, im.meta.n_blocks))
		die("index");
	im.recovered = true;
	if (pmc_meta_recover(&im.meta, &im.idx, &im.rs))
		die("recover");

	for (i = 6; i < argc; i++) {
		char *a = argv[i];

		if (!strcmp(a, "--data-crc")) {
			continue;	/* taken at the format above */
		} else if (!strcmp(a, "--origin") && i + 1 < argc) {
			origin_fd = open(argv[++i], O_RDWR);
			if (origin_fd < 0)
				die("--origin");
		} else if (!strcmp(a, "--apply-to") && i + 1 < argc) {
			apply_fd = open(argv[++i], O_RDWR);
			if (apply_fd < 0)
				die("--apply-to");
		} else if (sscanf(a, "write:%llu:%x:%u", (unsigned long long *)&oblock, &mask, &seed) == 3) {
			do_write(oblock, mask, seed);
			apply(apply_fd, oblock, mask, seed);
		} else if (sscanf(a, "crashdup:%llu:%x:%u", (unsigned long long *)&oblock, &mask, &seed) == 3) {
			u32 old = pmc_index_lookup(&im.idx, oblock), s;
			struct pmc_record r;

			if (old == PMC_NO_SLOT)
				die("crashdup: block not cached");
			if (pmc_pmem_read(&r, rec_addr(old), sizeof(r)))
				die("read");
			do_write(oblock, mask, seed);
			apply(apply_fd, oblock, mask, seed);
			/* Keep the old slot off the free list: its record is live again. */
			for (s = im.idx.free_head; s != PMC_NO_SLOT; s = im.idx.next[s])
				if (s == old)
					break;
			if (s == old && im.idx.free_head == old)
				pmc_index_pop_free(&im.idx);
			pmc_pmem_write(rec_addr(old), &r, sizeof(r), PMC_P_RECORD);
			pmc_pmem_fence(PMC_P_RECORD);
		} else if (sscanf(a, "tearnew:%llu:%x:%u", (unsigned long long *)&oblock, &mask, &seed) == 3) {
			if (pmc_index_lookup(&im.idx, oblock) != PMC_NO_SLOT)
				die("tearnew: block already cached");
			flip(rec_addr(do_write(oblock, mask, seed)) + 9);
		} else if (sscanf(a, "fill:%llu:%llu:%llu", (unsigned long long *)&oblock,
				  (unsigned long long *)&count, (unsigned long long *)&step) == 3) {
			do_fill(oblock, count, step);
		} else if (sscanf(a, "clean:%llu", (unsigned long long *)&oblock) == 1) {
			u32 slot = pmc_index_lookup(&im.idx, oblock), freed;
			u64 v;
			u8 *buf = malloc(bs);

			if (slot == PMC_NO_SLOT || !buf)
				die("clean: block not cached");
			v = im.idx.slot[slot];
			if (pmc_pmem_read(buf, pmc_meta_data(&im.meta, slot), bs))
				die("read");
			for (u32 s = 0; s < im.meta.spb; s++)
				if ((pmc_slot_mask(v) & (1U << s)) && origin_fd >= 0 &&
				    pwrite(origin_fd, buf + s * PMC_SECTOR_SIZE, PMC_SECTOR_SIZE,
					   (off_t)((oblock * im.meta.spb + s) * PMC_SECTOR_SIZE)) < 0)
					die("clean: origin write");
			free(buf);
			pmc_meta_wb_start(&im.idx, slot);
			if (pmc_meta_wb_done(&im.meta, &im.idx, slot, true, &freed))
				die("wb_done");
			pmc_meta_fence(PMC_P_CLEAN);
		} else if (!strcmp(a, "sbcorrupt")) {
			rewrite_super(ed_corrupt, 1, false);
		} else if (sscanf(a, "sbversion:%u", &seed) == 1) {
			rewrite_super(ed_version, seed, true);
		} else if (!strcmp(a, "formatting")) {
			rewrite_super(ed_formatting, 0, false);
		} else if (!strcmp(a, "foreign")) {
			rewrite_super(ed_foreign, 0, false);
		} else {
			fprintf(stderr, "mkimage: bad op '%s'\n", a);
			return 1;
		}
	}
	if (im.io_error)
		die("I/O error on the image");
	printf("blocks=%llu data_offset=%llu\n", (unsigned long long)im.meta.n_blocks,
	       (unsigned long long)im.meta.data_offset);
	pmc_image_close(&im);
	if (apply_fd >= 0)
		close(apply_fd);
	if (origin_fd >= 0)
		close(origin_fd);
	return 0;
}
