/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Thin portability shim for the code that is shared between the kernel
 * module and userspace (pmc_meta.c, pmc_index.c): the host crash-model
 * test and the userspace tool compile the same C.
 *
 * Persistence primitives:
 *   pmc_pmem_write(dst, src, len, tag)  cache-bypassing store of len bytes
 *                                       (8-byte aligned words); durable
 *                                       only after the next pmc_pmem_fence
 *   pmc_pmem_fence(tag)                 orders and completes every earlier
 *                                       pmc_pmem_write (pmem_wmb)
 *   pmc_pmem_read(dst, src, len)        machine-check safe read, 0 or -EIO
 * The tag names the step of the commit protocol; the kernel ignores it,
 * the crash model uses it to break one step on purpose.
 */
#ifndef PMC_SHIM_H
#define PMC_SHIM_H

enum pmc_ptag {
	PMC_P_DATA,	/* data block contents */
	PMC_P_RECORD,	/* full record of a new data block */
	PMC_P_FREE,	/* invalidation of a record */
	PMC_P_CLEAN,	/* DIRTY -> CLEAN after writeback */
	PMC_P_FORMAT,	/* format */
	PMC_P_RECOVER,	/* invalidations done by recovery */
	PMC_P_MIRROR,	/* a mirror info slot */
	PMC_P_NR,
};

/* Power-cut points of the test build; nothing in the product (pmc_cut.h). */
#include "pmc_cut.h"

#ifdef __KERNEL__

#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/errno.h>
#include <linux/crc32c.h>
#include <linux/uaccess.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/random.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/math64.h>
#include <linux/printk.h>
#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/sched.h>
#include <asm/byteorder.h>
#include <asm/barrier.h>
#ifdef CONFIG_X86_64
#include <asm/cpufeature.h>
#endif

static inline void pmc_pmem_write(void *dst, const void *src, size_t len,
				  enum pmc_ptag tag)
{
	memcpy_flushcache(dst, src, len);
}

static inline void pmc_pmem_fence(enum pmc_ptag tag)
{
	pmem_wmb();
}

static inline int pmc_pmem_read(void *dst, const void *src, size_t len)
{
	return copy_mc_to_kernel(dst, src, len) ? -EIO : 0;
}

#ifdef CONFIG_X86_64
/*
 * crc32c() goes through the crypto API to whichever driver is loaded: a
 * hundred-odd instructions for the 32 bytes of a record, at every write.
 * SSE4.2's crc32 instruction is the same crc32c (no pre or post
 * inversion), 8 bytes at a time.
 */
static inline u32 pmc_crc32c(u32 seed, const void *p, size_t len)
{
	const u8 *b = p;
	u64 crc = seed, w;

	if (!static_cpu_has(X86_FEATURE_XMM4_2))
		return crc32c(seed, p, len);
	for (; len >= 8; len -= 8, b += 8) {
		memcpy(&w, b, 8);
		asm("crc32q %1, %0" : "+r" (crc) : "rm" (w));
	}
	for (; len; len--, b++)
		asm("crc32b %1, %k0" : "+r" (crc) : "rm" (*b));
	return (u32)crc;
}
#else
static inline u32 pmc_crc32c(u32 seed, const void *p, size_t len)
{
	return crc32c(seed, p, len);
}
#endif

static inline void *pmc_alloc_array(size_t n, size_t size)
{
	return kvcalloc(n, size, GFP_KERNEL);
}

static inline void pmc_free_array(void *p)
{
	kvfree(p);
}

static inline void pmc_random_bytes(void *p, size_t len)
{
	get_random_bytes(p, len);
}

static inline u64 pmc_now_seconds(void)
{
	return ktime_get_real_seconds();
}

/*
 * The seq of W3 (pmc_meta.last_seq): every write's one atomic, on a line
 * of its own, so that it takes no read-mostly field along between CPUs.
 */
struct pmc_atomic64 {
	atomic64_t v;
} ____cacheline_aligned_in_smp;

#define pmc_atomic64_read(a)		atomic64_read(&(a)->v)
#define pmc_atomic64_set(a, x)		atomic64_set(&(a)->v, x)
#define pmc_atomic64_inc_return(a)	atomic64_inc_return(&(a)->v)

/*
 * Bitmaps of the index (pmc_index.c): bits of one word belong to slots
 * under different stripe locks, so they change with atomic bit operations;
 * the barrier orders such a change before a later load.
 */
#define pmc_set_bit(nr, addr)		set_bit(nr, addr)
#define pmc_clear_bit(nr, addr)		clear_bit(nr, addr)
#define pmc_test_bit(nr, addr)		test_bit(nr, addr)
#define pmc_test_and_clear_bit(nr, addr) test_and_clear_bit(nr, addr)
/* full barrier: a bit operation before a later load (pmc_bm_unhint) */
#define pmc_mb_after_bitop()		smp_mb__after_atomic()
/* full barrier: an atomic counter's change before a later load */
#define pmc_mb_after_atomic()		smp_mb__after_atomic()
/* full barrier: an earlier store before a later load (pmc_wb_note) */
#define pmc_mb()			smp_mb()
#define pmc_cmpxchg64(p, o, n)		cmpxchg64(p, o, n)
#define pmc_ffs_long(w)			__ffs(w)
#define pmc_cond_resched()		cond_resched()
#define pmc_read_once(x)		READ_ONCE(x)
#define pmc_write_once(x, v)		WRITE_ONCE(x, v)

#define pmc_err(fmt, ...)	pr_err("device-mapper: pmemcache: " fmt "\n", ##__VA_ARGS__)
#define pmc_warn(fmt, ...)	pr_warn("device-mapper: pmemcache: " fmt "\n", ##__VA_ARGS__)

#else

#include "user/pmc_shim_user.h"

#endif /* __KERNEL__ */

#endif /* PMC_SHIM_H */
