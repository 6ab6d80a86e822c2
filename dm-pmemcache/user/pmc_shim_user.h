/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Userspace half of pmc_shim.h: the host crash model and the userspace
 * tool compile the module's metadata code with it.  The program that links
 * the shared code provides the persistence primitives (a pmem model, or
 * plain stores + msync for a tool working on an image).
 */
#ifndef PMC_SHIM_USER_H
#define PMC_SHIM_USER_H

#include <stdalign.h>
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <ctype.h>
#include <strings.h>

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
#ifndef BIT
#define BIT(n)		(1UL << (n))
#endif

/*
 * The kernel's kstrtouint() (lib/kstrtox.c) for the table parser
 * (pmc_table.c): an optional '+', digits of @base (10 or 16; 0x taken
 * only with base 16 or 0), one optional trailing newline and nothing
 * else; -ERANGE above UINT_MAX, -EINVAL otherwise.
 */
static inline int kstrtouint(const char *s, unsigned int base,
			     unsigned int *res)
{
	unsigned long long v = 0;
	unsigned int d, n = 0;
	bool over = false;

	if (*s == '+')
		s++;
	if (!base) {
		base = 10;
		if (s[0] == '0') {
			base = 8;
			if ((s[1] | 0x20) == 'x' && isxdigit((unsigned char)s[2]))
				base = 16;
		}
	}
	if (base == 16 && s[0] == '0' && (s[1] | 0x20) == 'x')
		s += 2;
	for (;; s++, n++) {
		if (*s >= '0' && *s <= '9')
			d = *s - '0';
		else if ((*s | 0x20) >= 'a' && (*s | 0x20) <= 'f')
			d = (*s | 0x20) - 'a' + 10;
		else
			break;
		if (d >= base)
			break;
		if (v > (~0ULL - d) / base)
			over = true;
		v = v * base + d;
	}
	if (!n)
		return -EINVAL;
	if (over)
		return -ERANGE;
	if (*s == '\n')
		s++;
	if (*s)
		return -EINVAL;
	if (v != (unsigned int)v)
		return -ERANGE;
	*res = (unsigned int)v;
	return 0;
}
#define READ_ONCE(x)	(*(volatile __typeof__(x) *)&(x))
#define WRITE_ONCE(x, v) (*(volatile __typeof__(x) *)&(x) = (v))

/* on a line of its own, as the kernel's (scale_bench's threads) */
struct pmc_atomic64 {
	alignas(64) u64 v;
};

#define pmc_atomic64_read(a)		((a)->v)
#define pmc_atomic64_set(a, x)		((a)->v = (x))
#ifdef PMC_USER_ATOMIC_BITOPS
/* threads (index_stress, scale_bench): the seq of W3 as the kernel takes it */
#define pmc_atomic64_inc_return(a) \
	__atomic_add_fetch(&(a)->v, 1, __ATOMIC_SEQ_CST)
#else
#define pmc_atomic64_inc_return(a)	(++(a)->v)
#endif

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
/* full barrier: an atomic counter's change before a later load */
#define pmc_mb_after_atomic()	__atomic_thread_fence(__ATOMIC_SEQ_CST)
/* full barrier: an earlier store before a later load (pmc_wb_note) */
#define pmc_mb()		__atomic_thread_fence(__ATOMIC_SEQ_CST)
/* the value that was there: @n was stored if it was @o */
#define pmc_cmpxchg64(p, o, n)	__sync_val_compare_and_swap(p, o, n)
#define div64_u64(a, b)		((u64)(a) / (u64)(b))
#define pmc_ffs_long(w)		((unsigned long)__builtin_ctzl(w))
#define pmc_cond_resched()	do { } while (0)
#define pmc_read_once(x)	(*(const volatile __typeof__(x) *)&(x))
#define pmc_write_once(x, v)	(*(volatile __typeof__(x) *)&(x) = (v))

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
