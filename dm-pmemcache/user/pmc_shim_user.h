/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Userspace half of pmc_shim.h: the host crash model and the userspace
 * tool compile the module's metadata code with it.  The program that links
 * the shared code provides the persistence primitives (a pmem model, or
 * plain stores + msync for a tool working on an image).
 */
#ifndef PMC_SHIM_USER_H
#define PMC_SHIM_USER_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uint8_t __u8;
typedef uint32_t __le32;
typedef uint64_t __le64;

/* Little-endian hosts only (x86-64, arm64 LE): checked at build time. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "userspace shim assumes a little-endian host"
#endif
#define cpu_to_le32(x)	((u32)(x))
#define cpu_to_le64(x)	((u64)(x))
#define le32_to_cpu(x)	((u32)(x))
#define le64_to_cpu(x)	((u64)(x))

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#endif
#define READ_ONCE(x)	(*(volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

struct pmc_atomic64 {
	u64 v;
};

#define pmc_atomic64_read(a)		((a)->v)
#define pmc_atomic64_set(a, x)		((a)->v = (x))
#define pmc_atomic64_inc_return(a)	(++(a)->v)

/* The index's bitmaps: one thread (or coroutines) in userspace. */
#ifndef BITS_PER_LONG
#define BITS_PER_LONG	(__SIZEOF_LONG__ * 8)
#endif
#ifdef PMC_USER_ATOMIC_BITOPS
/* tests/host/index_stress.c: the kernel's atomic bit operations, threads */
static inline void pmc_set_bit(unsigned long nr, unsigned long *a)
{
	__atomic_fetch_or(&a[nr / BITS_PER_LONG], 1UL << (nr % BITS_PER_LONG),
			  __ATOMIC_SEQ_CST);
}

static inline void pmc_clear_bit(unsigned long nr, unsigned long *a)
{
	__atomic_fetch_and(&a[nr / BITS_PER_LONG],
			   ~(1UL << (nr % BITS_PER_LONG)), __ATOMIC_SEQ_CST);
}

static inline bool pmc_test_bit(unsigned long nr, const unsigned long *a)
{
	return (__atomic_load_n(&a[nr / BITS_PER_LONG], __ATOMIC_RELAXED) >>
		(nr % BITS_PER_LONG)) & 1;
}

static inline bool pmc_test_and_clear_bit(unsigned long nr, unsigned long *a)
{
	unsigned long m = 1UL << (nr % BITS_PER_LONG);

	return __atomic_fetch_and(&a[nr / BITS_PER_LONG], ~m,
				  __ATOMIC_SEQ_CST) & m;
}

#define pmc_mb_after_bitop()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
#else
static inline void pmc_set_bit(unsigned long nr, unsigned long *a)
{
	a[nr / BITS_PER_LONG] |= 1UL << (nr % BITS_PER_LONG);
}

static inline void pmc_clear_bit(unsigned long nr, unsigned long *a)
{
	a[nr / BITS_PER_LONG] &= ~(1UL << (nr % BITS_PER_LONG));
}

static inline bool pmc_test_bit(unsigned long nr, const unsigned long *a)
{
	return (a[nr / BITS_PER_LONG] >> (nr % BITS_PER_LONG)) & 1;
}

static inline bool pmc_test_and_clear_bit(unsigned long nr, unsigned long *a)
{
	unsigned long m = 1UL << (nr % BITS_PER_LONG);
	bool was = a[nr / BITS_PER_LONG] & m;

	a[nr / BITS_PER_LONG] &= ~m;
	return was;
}

#define pmc_mb_after_bitop()	__asm__ __volatile__("" ::: "memory")
#endif
/* the same barrier before a bit operation as after it */
#define pmc_mb_before_bitop()	pmc_mb_after_bitop()
/* the value that was there: @n was stored if it was @o */
#define pmc_cmpxchg64(p, o, n)	__sync_val_compare_and_swap(p, o, n)
#define div64_u64(a, b)		((u64)(a) / (u64)(b))
#define pmc_ffs_long(w)		((unsigned long)__builtin_ctzl(w))
#define pmc_cond_resched()	do { } while (0)

/* Provided by the program that links the shared code. */
void pmc_pmem_write(void *dst, const void *src, size_t len, enum pmc_ptag tag);
void pmc_pmem_fence(enum pmc_ptag tag);
int pmc_pmem_read(void *dst, const void *src, size_t len);
u32 pmc_crc32c(u32 seed, const void *p, size_t len);
void *pmc_alloc_array(size_t n, size_t size);
void pmc_free_array(void *p);
void pmc_random_bytes(void *p, size_t len);
u64 pmc_now_seconds(void);
void pmc_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define pmc_err(fmt, ...)	pmc_log(3, fmt, ##__VA_ARGS__)
#define pmc_warn(fmt, ...)	pmc_log(4, fmt, ##__VA_ARGS__)

#endif /* PMC_SHIM_USER_H */
