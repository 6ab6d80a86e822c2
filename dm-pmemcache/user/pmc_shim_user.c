// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The parts of the userspace shim that every program linking the shared
 * metadata code needs alike: crc32c and array allocation.  Persistence
 * primitives and random bytes stay with each program (a pmem model in the
 * crash model, pread/pwrite on an image in the tool).
 */
#include <stdlib.h>

#include "pmc_shim.h"

static u32 crc_table[256];

static void crc_init(void)
{
	u32 i, j, c;

	for (i = 0; i < 256; i++) {
		c = i;
		for (j = 0; j < 8; j++)
			c = (c >> 1) ^ ((c & 1) ? 0x82F63B78U : 0);
		crc_table[i] = c;
	}
}

/* crc32c as the kernel's crc32c(seed, p, len): no pre/post inversion. */
u32 pmc_crc32c(u32 seed, const void *p, size_t len)
{
	const u8 *b = p;

	if (!crc_table[1])
		crc_init();
	while (len--)
		seed = crc_table[(seed ^ *b++) & 0xff] ^ (seed >> 8);
	return seed;
}

void *pmc_alloc_array(size_t n, size_t size)
{
	return calloc(n, size);
}

void pmc_free_array(void *p)
{
	free(p);
}
