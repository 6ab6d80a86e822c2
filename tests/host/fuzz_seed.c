// SPDX-License-Identifier: GPL-2.0
/*
 * A cache image (as the tests write them, userspace/tests/mkimage) as an
 * input of fuzz_meta: its header (flags, device size) and the first
 * bytes of the namespace (superblock, then the records).  The checksums
 * are kept as they are: the seeds are real images.
 *
 * usage: fuzz_seed IMAGE OUT [FLAGS [STRIPE [BAD0 [BAD1 [OPS_HEX]]]]]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef uint8_t u8;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint8_t __u8;
typedef uint32_t __le32;
typedef uint64_t __le64;

#include "pmemcache_format.h"

int main(int argc, char **argv)
{
	static u8 img[1 << 20];
	u8 hdr[16] = { 0 };
	struct pmc_super sb;
	size_t len, rec;
	u32 v;
	FILE *f;
	int i;

	if (argc < 3) {
		fprintf(stderr, "usage: fuzz_seed IMAGE OUT [FLAGS [STRIPE [BAD0 [BAD1 [OPS_HEX]]]]]\n");
		return 2;
	}
	f = fopen(argv[1], "rb");
	if (!f)
		return perror(argv[1]), 2;
	len = fread(img, 1, sizeof(img), f);
	fclose(f);
	if (len < PMC_SUPER_AREA)
		return fprintf(stderr, "%s: too small\n", argv[1]), 2;
	memcpy(&sb, img, sizeof(sb));
	hdr[0] = argc > 3 ? (u8)strtoul(argv[3], NULL, 0) : 0x04;
	/* the table's block size is the image's; STRIPE: bits 2-7 */
	for (v = 512, i = 0; i < 3 && v < sb.block_size; v <<= 1)
		i++;
	hdr[1] = (u8)i | (argc > 4 ? (u8)(strtoul(argv[4], NULL, 0) << 2) : 0);
	/* the device size as fuzz_meta.c's parse() reads it */
	v = (u32)(len >> 12);
	if (v > 255)
		return fprintf(stderr, "%s: larger than 1020 KiB\n", argv[1]), 2;
	v = v >= 3 && v - 3 < 64 ? v - 3 : 0xc000 | v;
	memcpy(hdr + 2, &v, 2);
	v = argc > 5 ? (u32)strtoul(argv[5], NULL, 0) : 0xffff;
	memcpy(hdr + 4, &v, 2);
	v = argc > 6 ? (u32)strtoul(argv[6], NULL, 0) : 0xffff;
	memcpy(hdr + 6, &v, 2);
	for (i = 0; argc > 7 && i < 8 && argv[7][2 * i] && argv[7][2 * i + 1]; i++) {
		char b[3] = { argv[7][2 * i], argv[7][2 * i + 1], 0 };

		hdr[8 + i] = (u8)strtoul(b, NULL, 16);
	}
	/* records up to the last one that is not all zero */
	rec = PMC_RECORDS_OFFSET;
	for (size_t o = PMC_RECORDS_OFFSET; o + PMC_RECORD_SIZE <= len &&
	     o < PMC_RECORDS_OFFSET + sb.n_blocks * PMC_RECORD_SIZE;
	     o += PMC_RECORD_SIZE) {
		static const u8 zero[PMC_RECORD_SIZE];

		if (memcmp(img + o, zero, PMC_RECORD_SIZE))
			rec = o + PMC_RECORD_SIZE;
	}
	f = fopen(argv[2], "wb");
	if (!f)
		return perror(argv[2]), 2;
	fwrite(hdr, 1, sizeof(hdr), f);
	fwrite(img, 1, PMC_SUPER_SIZE, f);
	fwrite(img + PMC_RECORDS_OFFSET, 1, rec - PMC_RECORDS_OFFSET, f);
	return fclose(f) ? 2 : 0;
}
