// SPDX-License-Identifier: GPL-2.0
/*
 * cpubench: the guest side of tests/bench/run_cpu_bench.py and
 * tests/test_cpu_guard.py (issue 33).  Built statically on the host.
 *
 *   cpubench TAG DEV COUNT FIRST OP[,OP...] [STRIDE]
 *	Times each OP on COUNT blocks of 4 KiB, blocks FIRST, FIRST + STRIDE,
 *	... FIRST + (COUNT - 1) * STRIDE of DEV (STRIDE 1 if not given)
 *	visited in one fixed pseudo-random order (the same
 *	for every OP and every run), one operation at a time (QD1, psync,
 *	O_DIRECT).  Each operation is timed alone with
 *	clock_gettime(CLOCK_MONOTONIC); prints one line per OP:
 *	  CPU tag=TAG op=OP n=COUNT mean=M median=D min=L max=H
 *	in nanoseconds (mean with one decimal), or
 *	  CPU tag=TAG op=OP err=ERRNO
 *	at the first operation that failed (the rest of that OP is skipped).
 *	Nothing is printed before the last OP ended (stdout is a buffered
 *	file): no console or port traffic of ours between the timed loops.
 *
 *   OPs:  null       nothing: the cost of the two clock reads
 *	   new        4 KiB write (of a block the cache does not hold yet,
 *		      if nothing wrote it since the cache was created)
 *	   overwrite  4 KiB write (of a block an earlier OP wrote)
 *	   read       4 KiB read
 *	   read512    512 B read at 1 KiB into the block
 *	   flush      4 KiB write, then fdatasync() (REQ_PREFLUSH), timed
 *		      together
 *	   fua        4 KiB write through a descriptor opened O_DSYNC
 *		      (REQ_FUA)
 *	   discard    BLKDISCARD of the 4 KiB block
 *
 * Under QEMU's -icount shift=0 (qemu/run-vm.sh --icount) the guest's
 * clock advances one nanosecond per guest instruction, so these times
 * are instruction counts: the same run after run on any host load.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/fs.h>

#define BLOCK	4096

typedef uint64_t u64;

static u64 now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (u64)ts.tv_sec * 1000000000ULL + (u64)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static void usage(void)
{
	fprintf(stderr, "usage: cpubench TAG DEV COUNT FIRST OP[,OP...] [STRIDE]\n");
	exit(2);
}

/* One operation on block @b; 0 or an errno. */
static int one(const char *op, int fd, int fd_dsync, u64 b, char *buf)
{
	off_t off = (off_t)(b * BLOCK);
	ssize_t n;

	if (!strcmp(op, "null"))
		return 0;
	if (!strcmp(op, "new") || !strcmp(op, "overwrite") || !strcmp(op, "flush")) {
		n = pwrite(fd, buf, BLOCK, off);
		if (n != BLOCK)
			return n < 0 ? errno : EIO;
		if (!strcmp(op, "flush") && fdatasync(fd))
			return errno;
		return 0;
	}
	if (!strcmp(op, "fua")) {
		n = pwrite(fd_dsync, buf, BLOCK, off);
		return n == BLOCK ? 0 : n < 0 ? errno : EIO;
	}
	if (!strcmp(op, "read")) {
		n = pread(fd, buf, BLOCK, off);
		return n == BLOCK ? 0 : n < 0 ? errno : EIO;
	}
	if (!strcmp(op, "read512")) {
		n = pread(fd, buf, 512, off + 1024);
		return n == 512 ? 0 : n < 0 ? errno : EIO;
	}
	if (!strcmp(op, "discard")) {
		uint64_t range[2] = { (uint64_t)off, BLOCK };

		return ioctl(fd, BLKDISCARD, range) ? errno : 0;
	}
	return EINVAL;
}

int main(int argc, char **argv)
{
	const char *tag, *dev;
	char *ops, *op, *save, *buf;
	u64 count, first, stride = 1, i, *order, *t, x;
	int fd, fd_dsync;

	if (argc != 6 && argc != 7)
		usage();
	tag = argv[1];
	dev = argv[2];
	count = strtoull(argv[3], NULL, 0);
	first = strtoull(argv[4], NULL, 0);
	ops = argv[5];
	if (argc == 7)
		stride = strtoull(argv[6], NULL, 0);
	if (!count || !stride)
		usage();
	fd = open(dev, O_RDWR | O_DIRECT);
	fd_dsync = open(dev, O_RDWR | O_DIRECT | O_DSYNC);
	if (fd < 0 || fd_dsync < 0) {
		perror(dev);
		return 1;
	}
	order = calloc(count, sizeof(*order));
	t = calloc(count, sizeof(*t));
	if (!order || !t || posix_memalign((void **)&buf, BLOCK, BLOCK)) {
		perror("alloc");
		return 1;
	}
	memset(buf, 0x5a, BLOCK);
	/* Fisher-Yates over the blocks with a fixed xorshift: no sequential run */
	x = 0x9e3779b97f4a7c15ULL;
	for (i = 0; i < count; i++)
		order[i] = first + i * stride;
	for (i = count - 1; i > 0; i--) {
		u64 j, tmp;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		j = x % (i + 1);
		tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	/* every page the timed loops touch is mapped before they start */
	if (mlockall(MCL_CURRENT | MCL_FUTURE))
		perror("mlockall");

	for (op = strtok_r(ops, ",", &save); op; op = strtok_r(NULL, ",", &save)) {
		u64 sum = 0;
		int err = 0;

		for (i = 0; i < count; i++) {
			u64 t0 = now_ns();

			err = one(op, fd, fd_dsync, order[i], buf);
			t[i] = now_ns() - t0;
			if (err)
				break;
			sum += t[i];
		}
		if (err) {
			printf("CPU tag=%s op=%s err=%d\n", tag, op, err);
			continue;
		}
		qsort(t, count, sizeof(*t), cmp_u64);
		printf("CPU tag=%s op=%s n=%llu mean=%.1f median=%llu min=%llu max=%llu\n",
		       tag, op, (unsigned long long)count, (double)sum / count,
		       (unsigned long long)(count & 1 ? t[count / 2]
					    : (t[count / 2 - 1] + t[count / 2]) / 2),
		       (unsigned long long)t[0], (unsigned long long)t[count - 1]);
	}
	close(fd_dsync);
	close(fd);
	return 0;
}
