// SPDX-License-Identifier: GPL-2.0
/*
 * pmem as plain memory, for host programs that run the module's metadata
 * code but model no crash (index_model, forge_full): a store is durable
 * at once, a fence orders nothing, a read never fails, and the "random"
 * bytes (cache uuid, record seed) are fixed so that runs repeat.
 */
#include <string.h>

#include "pmc_shim.h"

void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag)
{
	memcpy(dst, src, len);
}

void pmc_pmem_fence(enum pmc_ptag tag)
{
}

int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	return 0;
}

void pmc_random_bytes(void *p, size_t len)
{
	memset(p, 0x5a, len);
}
