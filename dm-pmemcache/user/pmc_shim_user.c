// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * The parts of the userspace shim that every program linking the shared
 * metadata code needs alike: crc32c and array allocation.  Persistence
 * primitives and random bytes stay with each program (a pmem model in the
 * crash model, pread/pwrite on an image in the tool).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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

static u32 crc32c_table(u32 seed, const u8 *b, size_t len)
{
	if (!crc_table[1])
		crc_init();
	while (len--)
		seed = crc_table[(seed ^ *b++) & 0xff] ^ (seed >> 8);
	return seed;
}

#ifdef __x86_64__
/*
 * The SSE4.2 crc32 instruction is the same crc32c, 8 bytes at a time:
 * check recomputes two checksums per record, a billion bytes at 1 TiB.
 */
__attribute__((target("sse4.2")))
static u32 crc32c_sse42(u32 seed, const u8 *b, size_t len)
{
	u64 crc = seed, w;

	for (; len >= 8; len -= 8, b += 8) {
		memcpy(&w, b, 8);
		crc = __builtin_ia32_crc32di(crc, w);
	}
	while (len--)
		crc = __builtin_ia32_crc32qi((u32)crc, *b++);
	return (u32)crc;
}
#endif

/* crc32c as the kernel's crc32c(seed, p, len): no pre/post inversion. */
u32 pmc_crc32c(u32 seed, const void *p, size_t len)
{
#ifdef __x86_64__
	static int sse42 = -1;

	if (sse42 < 0)
		sse42 = __builtin_cpu_supports("sse4.2");
	if (sse42)
		return crc32c_sse42(seed, p, len);
#endif
	return crc32c_table(seed, p, len);
}

/*
 * The index of a big cache is hundreds of MiB looked up at random (one
 * lookup per record in recovery): huge pages, where the kernel offers them
 * on request (transparent_hugepage "madvise"), save a TLB miss per step;
 * 64 GiB check: 2.5 s -> 1.6 s.  The advice only changes how the array's
 * own pages are backed.
 */
#define PMC_HUGE_ARRAY	(2UL << 20)

void *pmc_alloc_array(size_t n, size_t size)
{
	void *p = calloc(n, size);
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start, end;

	if (p && n * size >= PMC_HUGE_ARRAY) {
		start = ((uintptr_t)p + page - 1) & ~(page - 1);
		end = ((uintptr_t)p + n * size) & ~(page - 1);
		madvise((void *)start, end - start, MADV_HUGEPAGE);
	}
	return p;
}

void pmc_free_array(void *p)
{
	free(p);
}
