// SPDX-License-Identifier: GPL-2.0
/*
 * fs_io: the guest side of tests/test_fs_powercut.py (power cuts under
 * ext4 and XFS on the cache).  Built statically on the host.
 *
 *   fs_io churn DIR PROCS SEED BIG_MIB
 *	PROCS processes under DIR until killed.  Process 0 rewrites DIR/big
 *	(BIG_MIB MiB): a sequential pass in 1 MiB writes with fdatasync
 *	every 8 MiB, then random 4-64 KiB writes with fdatasync every 16,
 *	and again.  The others each own DIR/c<N>/ and create, write,
 *	append, overwrite, rename, hard-link, symlink, truncate, fallocate
 *	(allocate, keep size, punch hole, zero range), unlink, mkdir, rmdir
 *	and fsync files and folders of a small name space there, so that
 *	names keep being reused.  Expected failures (a name that does not
 *	exist or does, a folder not empty, ENOSPC) are counted; any other
 *	(EIO, EROFS, EUCLEAN from a file system that found itself corrupt)
 *	prints "FAIL: ..." and ends the program with status 1.  Every 500
 *	operations a process prints "C <dir> <proc> <ops>".
 *
 *   fs_io durable DIR TAG SEED
 *	Small files DIR/TAG/d<NN>/f<NNNNN> (1 B to 64 KiB of pseudo-random
 *	bytes), one at a time until killed; a third of them written as a
 *	temporary name and renamed into place.  Each new folder is fsync'ed
 *	with its parent, each file is fsync'ed, then its folder, and only then
 *	is "D <path> <size> <sum>" printed: the file system promised that
 *	this file survives a power cut as it is.  <sum> is FNV-1a 64, hex.
 *
 *   fs_io verify LIST
 *	For every "D <path> <size> <sum>" line of LIST: the file must exist
 *	and hold <size> bytes with that sum.  Prints "LOST <path> <why>" for
 *	each one that does not and "VERIFY files=N ok=N lost=N".  Exit status
 *	1 if any is lost.
 *
 *   fs_io fill DIR FILES KIB MARKER
 *	DIR/t<N> (N < FILES), each KIB KiB of 512-byte records that start
 *	with MARKER, written in place (no truncation) and fsync'ed: run twice
 *	with two markers, it overwrites the same blocks.
 *
 *   fs_io extents DIR
 *	"X <byte> <length>" for every extent (FIEMAP) of every regular file
 *	under DIR: where on the volume the file system put them.
 *
 *   fs_io overlap LIST DIR
 *	The bytes of the files under DIR that lie in the extents of LIST
 *	(lines of fs_io extents): "OVERLAP files=N bytes=N".
 *
 *   fs_io scan DIR MARKER...
 *	Reads every regular file under DIR; prints "FOUND <path> <marker>"
 *	for each file that holds one of the markers and "SCAN files=N
 *	mib=N found=N".
 *
 * Every line is one write(2) (say()), so lines of several processes
 * never mix on the script's output.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/falloc.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>

typedef uint64_t u64;

#define MAX_FILE	(64 << 10)
#define CHURN_NAMES	24		/* files per folder of a churn process */
#define CHURN_DIRS	4
#define CHURN_SUBS	3

static u64 mix(u64 x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static u64 rnd_state;

static u64 rnd(void)
{
	rnd_state = mix(rnd_state);
	return rnd_state;
}

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One write(2) per line; retried while the output port is full. */
static void say(const char *fmt, ...)
{
	char line[512];
	int n, done = 0, tries = 0;
	ssize_t r;
	va_list ap;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof(line))
		n = sizeof(line) - 1;
	while (done < n && tries < 60000) {
		r = write(1, line + done, n - done);
		if (r > 0) {
			done += r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			exit(3);
		tries++;
		usleep(1000);
	}
	if (done < n)
		exit(3);
}

static void die(const char *what, const char *path)
{
	say("FAIL: fs_io: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static u64 fnv(u64 h, const unsigned char *p, size_t n)
{
	while (n--) {
		h ^= *p++;
		h *= 0x100000001b3ULL;
	}
	return h;
}

#define FNV_INIT 0xcbf29ce484222325ULL

static void fill_random(unsigned char *buf, size_t n)
{
	size_t i;
	u64 x = 0;

	for (i = 0; i < n; i++) {
		if (i % 8 == 0)
			x = rnd();
		buf[i] = x >> (8 * (i % 8));
	}
}

static void write_all(int fd, const void *buf, size_t n, off_t off, const char *path)
{
	ssize_t r = pwrite(fd, buf, n, off);

	if (r != (ssize_t)n) {
		if (r >= 0)
			errno = EIO;
		die("pwrite", path);
	}
}

static void fsync_path(const char *path)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY);

	if (fd < 0)
		die("open folder", path);
	if (fsync(fd))
		die("fsync folder", path);
	close(fd);
}

/* ---- durable: small files, each fsync'ed with its folder, then logged */

static void mkdir_durable(const char *path, const char *parent)
{
	if (mkdir(path, 0755) && errno != EEXIST)
		die("mkdir", path);
	fsync_path(path);
	fsync_path(parent);
}

static int do_durable(const char *dir, const char *tag, u64 seed)
{
	static unsigned char buf[MAX_FILE];
	char top[256], sub[300], path[400], tmp[400];
	unsigned long i;
	int fd;

	rnd_state = seed;
	snprintf(top, sizeof(top), "%s/%s", dir, tag);
	mkdir_durable(top, dir);
	say("DURABLE_READY %s\n", top);
	for (i = 0;; i++) {
		size_t n;
		int renamed = rnd() % 3 == 0;

		snprintf(sub, sizeof(sub), "%s/d%02lu", top, i / 100);
		if (i % 100 == 0)
			mkdir_durable(sub, top);
		snprintf(path, sizeof(path), "%s/f%05lu", sub, i);
		snprintf(tmp, sizeof(tmp), "%s/.tmp%05lu", sub, i);
		n = rnd() % 4 ? 1 + rnd() % 8192 : 1 + rnd() % MAX_FILE;
		fill_random(buf, n);
		fd = open(renamed ? tmp : path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			die("create", renamed ? tmp : path);
		write_all(fd, buf, n, 0, path);
		if (fsync(fd))
			die("fsync", path);
		close(fd);
		if (renamed && rename(tmp, path))
			die("rename", tmp);
		fsync_path(sub);
		say("D %s %zu %016llx\n", path, n, (unsigned long long)fnv(FNV_INIT, buf, n));
	}
	return 0;
}

/* ---- verify: every logged file, whole */

static int do_verify(const char *list)
{
	static unsigned char buf[1 << 16];
	FILE *f = fopen(list, "r");
	char line[600], path[512], sumtxt[32];
	unsigned long files = 0, ok = 0, lost = 0;

	if (!f)
		die("open", list);
	while (fgets(line, sizeof(line), f)) {
		unsigned long long size, want, got = FNV_INIT, total = 0;
		struct stat st;
		ssize_t r;
		int fd;

		if (sscanf(line, "D %511s %llu %31s", path, &size, sumtxt) != 3)
			continue;
		files++;
		want = strtoull(sumtxt, NULL, 16);
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			say("LOST %s missing (%s)\n", path, strerror(errno));
			lost++;
			continue;
		}
		if (fstat(fd, &st))
			die("fstat", path);
		while ((r = read(fd, buf, sizeof(buf))) > 0) {
			got = fnv(got, buf, r);
			total += r;
		}
		if (r < 0) {
			say("LOST %s read error (%s)\n", path, strerror(errno));
			lost++;
		} else if (total != size || (unsigned long long)st.st_size != size) {
			say("LOST %s size %llu, logged %llu\n", path, total, size);
			lost++;
		} else if (got != want) {
			say("LOST %s sum %016llx, logged %016llx\n", path, got, want);
			lost++;
		} else {
			ok++;
		}
		close(fd);
	}
	fclose(f);
	say("VERIFY files=%lu ok=%lu lost=%lu\n", files, ok, lost);
	return lost ? 1 : 0;
}

/* ---- fill: marked records written in place */

static int do_fill(const char *dir, unsigned int files, unsigned int kib, const char *marker)
{
	static unsigned char buf[1 << 20];
	char path[400];
	unsigned int i, k;
	size_t n = (size_t)kib << 10;
	int fd;

	if (n > sizeof(buf))
		return 2;
	if (mkdir(dir, 0755) && errno != EEXIST)
		die("mkdir", dir);
	for (i = 0; i < files; i++) {
		snprintf(path, sizeof(path), "%s/t%03u", dir, i);
		for (k = 0; k < n / 512; k++) {
			memset(buf + k * 512, 0, 512);
			snprintf((char *)buf + k * 512, 512, "%s %s %u", marker, path, k);
		}
		fd = open(path, O_WRONLY | O_CREAT, 0644);
		if (fd < 0)
			die("open", path);
		write_all(fd, buf, n, 0, path);
		if (fsync(fd))
			die("fsync", path);
		close(fd);
	}
	fsync_path(dir);
	return 0;
}

/* ---- scan: no file holds a marker */

static char **markers;
static int nmarkers;
static unsigned long scanned, found;
static unsigned long long scanned_bytes;

/* The walks' files: a regular file opened and counted, else -1. */
static int open_scanned(const char *path, const struct stat *st, int flag)
{
	int fd;

	if (flag != FTW_F || !S_ISREG(st->st_mode))
		return -1;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		die("open", path);
	scanned++;
	return fd;
}

static int scan_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	static char buf[(1 << 16) + 64];
	size_t keep = 0, n;
	ssize_t r;
	int fd, m, hit = 0;

	(void)ftw;
	fd = open_scanned(path, st, flag);
	if (fd < 0)
		return 0;
	while ((r = read(fd, buf + keep, sizeof(buf) - 64 - keep)) > 0) {
		n = keep + r;
		scanned_bytes += r;
		for (m = 0; m < nmarkers && !hit; m++) {
			if (memmem(buf, n, markers[m], strlen(markers[m]))) {
				say("FOUND %s %s\n", path, markers[m]);
				found++;
				hit = 1;
			}
		}
		keep = n < 63 ? n : 63;
		memmove(buf, buf + n - keep, keep);
	}
	if (r < 0)
		die("read", path);
	close(fd);
	return 0;
}

static int do_scan(const char *dir)
{
	if (nftw(dir, scan_one, 16, FTW_PHYS))
		die("nftw", dir);
	say("SCAN files=%lu mib=%llu found=%lu\n", scanned, scanned_bytes >> 20, found);
	return found ? 1 : 0;
}

/* ---- extents and overlap: where the files are on the volume */

#define MAX_RANGES	65536
#define FIEMAP_BATCH	256

static u64 (*ranges)[2];
static unsigned int nranges;
static unsigned long long overlap_bytes;
static int listing;

/* each extent of @fd: printed (listing) or counted against ranges */
static void extents_of(int fd, const char *path)
{
	size_t sz = sizeof(struct fiemap) + FIEMAP_BATCH * sizeof(struct fiemap_extent);
	struct fiemap *fm = calloc(1, sz);
	u64 start = 0;
	unsigned int i, r;

	if (!fm)
		die("calloc", path);
	for (;;) {
		memset(fm, 0, sz);
		fm->fm_start = start;
		fm->fm_length = ~0ULL - start;
		fm->fm_flags = FIEMAP_FLAG_SYNC;
		fm->fm_extent_count = FIEMAP_BATCH;
		if (ioctl(fd, FS_IOC_FIEMAP, fm))
			die("FIEMAP", path);
		for (i = 0; i < fm->fm_mapped_extents; i++) {
			struct fiemap_extent *e = &fm->fm_extents[i];

			start = e->fe_logical + e->fe_length;
			if (e->fe_flags & (FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DATA_INLINE))
				continue;
			if (listing) {
				say("X %llu %llu\n", (unsigned long long)e->fe_physical,
				    (unsigned long long)e->fe_length);
				continue;
			}
			for (r = 0; r < nranges; r++) {
				u64 lo = ranges[r][0], hi = e->fe_physical + e->fe_length;

				if (e->fe_physical > lo)
					lo = e->fe_physical;

				if (ranges[r][0] + ranges[r][1] < hi)
					hi = ranges[r][0] + ranges[r][1];
				if (hi > lo)
					overlap_bytes += hi - lo;
			}
		}
		if (!fm->fm_mapped_extents ||
		    fm->fm_extents[fm->fm_mapped_extents - 1].fe_flags & FIEMAP_EXTENT_LAST)
			break;
	}
	free(fm);
}

static int extents_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int fd;

	(void)ftw;
	fd = open_scanned(path, st, flag);
	if (fd < 0)
		return 0;
	extents_of(fd, path);
	close(fd);
	return 0;
}

static int do_extents(const char *dir, const char *list)
{
	char line[128];
	FILE *f;

	listing = !list;
	if (list) {
		ranges = calloc(MAX_RANGES, sizeof(*ranges));
		f = fopen(list, "r");
		if (!ranges || !f)
			die("open", list);
		while (nranges < MAX_RANGES && fgets(line, sizeof(line), f)) {
			unsigned long long a, b;

			if (sscanf(line, "X %llu %llu", &a, &b) == 2) {
				ranges[nranges][0] = a;
				ranges[nranges++][1] = b;
			}
		}
		fclose(f);
	}
	if (nftw(dir, extents_one, 16, FTW_PHYS))
		die("nftw", dir);
	if (list)
		say("OVERLAP files=%lu bytes=%llu\n", scanned, overlap_bytes);
	return 0;
}

/* ---- churn: many processes of metadata and data operations */

static unsigned long expected;

/* errors a racing name space produces; anything else ends the program */
static void check(int r, const char *what, const char *path)
{
	if (r >= 0)
		return;
	switch (errno) {
	case ENOENT: case EEXIST: case ENOTEMPTY: case ENOSPC: case EISDIR:
	case ENOTDIR: case EMLINK: case EOPNOTSUPP: case EINVAL: case ELOOP:
		expected++;
		return;
	}
	die(what, path);
}

static void name(char *out, size_t len, const char *base)
{
	unsigned int d = rnd() % CHURN_DIRS, f = rnd() % CHURN_NAMES;

	if (rnd() % 3 == 0)
		snprintf(out, len, "%s/d%u/s%u/f%u", base, d,
			 (unsigned int)(rnd() % CHURN_SUBS), f);
	else
		snprintf(out, len, "%s/d%u/f%u", base, d, f);
}

static void churn_big(const char *dir, unsigned int mib)
{
	static unsigned char buf[1 << 20];
	char path[400];
	u64 size = (u64)mib << 20, off;
	unsigned int i;
	int fd;

	snprintf(path, sizeof(path), "%s/big", dir);
	fd = open(path, O_RDWR | O_CREAT, 0644);
	if (fd < 0)
		die("open", path);
	for (;;) {
		for (off = 0; off < size; off += sizeof(buf)) {
			fill_random(buf, sizeof(buf));
			write_all(fd, buf, sizeof(buf), off, path);
			if ((off >> 20) % 8 == 7 && fdatasync(fd))
				die("fdatasync", path);
		}
		say("C %s big pass\n", dir);
		for (i = 0; i < 256; i++) {
			size_t n = 4096 * (1 + rnd() % 16);

			off = (rnd() % (size / 4096 - 16)) * 4096;
			fill_random(buf, n);
			write_all(fd, buf, n, off, path);
			if (i % 16 == 15 && fdatasync(fd))
				die("fdatasync", path);
		}
	}
}

static void churn_one(const char *base)
{
	static unsigned char buf[128 << 10];
	char a[400], b[420];
	unsigned long ops;
	unsigned int d, s;
	int fd, r;

	if (mkdir(base, 0755) && errno != EEXIST)
		die("mkdir", base);
	for (d = 0; d < CHURN_DIRS; d++) {
		snprintf(a, sizeof(a), "%s/d%u", base, d);
		if (mkdir(a, 0755) && errno != EEXIST)
			die("mkdir", a);
	}
	for (ops = 1;; ops++) {
		unsigned int op = rnd() % 16;
		size_t n = rnd() % sizeof(buf);
		off_t off = (rnd() % 64) * 4096 + (rnd() % 2 ? 0 : rnd() % 4096);

		name(a, sizeof(a), base);
		name(b, sizeof(b), base);
		switch (op) {
		case 0: case 1:		/* create or replace, write */
			fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			check(fd, "create", a);
			if (fd >= 0) {
				fill_random(buf, n);
				check(pwrite(fd, buf, n, 0), "write", a);
				close(fd);
			}
			break;
		case 2:			/* append */
			fd = open(a, O_WRONLY | O_APPEND);
			check(fd, "open", a);
			if (fd >= 0) {
				n %= 16384;
				fill_random(buf, n);
				check(write(fd, buf, n), "append", a);
				close(fd);
			}
			break;
		case 3:			/* overwrite in place, maybe past the end */
			fd = open(a, O_WRONLY);
			check(fd, "open", a);
			if (fd >= 0) {
				n %= 32768;
				fill_random(buf, n);
				check(pwrite(fd, buf, n, off), "pwrite", a);
				close(fd);
			}
			break;
		case 4:
			check(rename(a, b), "rename", a);
			break;
		case 5:
			check(link(a, b), "link", a);
			break;
		case 6: case 7:
			check(unlink(a), "unlink", a);
			break;
		case 8:
			check(truncate(a, off + n % 8192), "truncate", a);
			break;
		case 9:			/* fallocate: allocate, keep size, punch, zero */
			fd = open(a, O_WRONLY);
			check(fd, "open", a);
			if (fd >= 0) {
				static const int modes[] = {
					0, FALLOC_FL_KEEP_SIZE,
					FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
					FALLOC_FL_ZERO_RANGE,
				};
				check(fallocate(fd, modes[rnd() % 4], off, 4096 + n % 65536),
				      "fallocate", a);
				close(fd);
			}
			break;
		case 10:		/* a subfolder made or removed */
			d = rnd() % CHURN_DIRS;
			s = rnd() % CHURN_SUBS;
			snprintf(a, sizeof(a), "%s/d%u/s%u", base, d, s);
			if (rnd() % 2) {
				check(mkdir(a, 0755), "mkdir", a);
			} else {
				/* empty it first, most of the time */
				for (r = 0; rnd() % 4 && r < CHURN_NAMES; r++) {
					snprintf(b, sizeof(b), "%s/f%d", a, r);
					check(unlink(b), "unlink", b);
				}
				check(rmdir(a), "rmdir", a);
			}
			break;
		case 11:
			check(symlink(a, b), "symlink", b);
			break;
		case 12:		/* fsync a file or a folder */
			fd = open(a, O_RDONLY);
			check(fd, "open", a);
			if (fd >= 0) {
				check(rnd() % 2 ? fsync(fd) : fdatasync(fd), "fsync", a);
				close(fd);
			}
			if (rnd() % 2) {
				snprintf(b, sizeof(b), "%s/d%u", base,
					 (unsigned int)(rnd() % CHURN_DIRS));
				fd = open(b, O_RDONLY | O_DIRECTORY);
				check(fd, "open folder", b);
				if (fd >= 0) {
					check(fsync(fd), "fsync folder", b);
					close(fd);
				}
			}
			break;
		case 13:		/* a file written and fsync'ed whole */
			fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			check(fd, "create", a);
			if (fd >= 0) {
				fill_random(buf, n);
				check(pwrite(fd, buf, n, 0), "write", a);
				check(fsync(fd), "fsync", a);
				close(fd);
			}
			break;
		case 14:		/* read it back (page cache and device) */
			fd = open(a, O_RDONLY);
			check(fd, "open", a);
			if (fd >= 0) {
				while ((r = read(fd, buf, sizeof(buf))) > 0)
					;
				check(r, "read", a);
				close(fd);
			}
			break;
		default:
			if (rnd() % 8 == 0) {
				fd = open(base, O_RDONLY | O_DIRECTORY);
				if (fd < 0 || syncfs(fd))
					die("syncfs", base);
				close(fd);
			}
			break;
		}
		if (ops % 500 == 0)
			say("C %s %lu expected_errors=%lu\n", base, ops, expected);
	}
}

static int do_churn(const char *dir, unsigned int procs, u64 seed, unsigned int big)
{
	char base[300];
	unsigned int p;
	int status;

	if (mkdir(dir, 0755) && errno != EEXIST)
		die("mkdir", dir);
	for (p = 0; p < procs; p++) {
		pid_t pid = fork();

		if (pid < 0)
			die("fork", dir);
		if (pid)
			continue;
		/* none outlives the program (killed: a test moves on) */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			exit(1);
		rnd_state = seed * 1000 + p;
		if (p == 0)
			churn_big(dir, big);
		snprintf(base, sizeof(base), "%s/c%u", dir, p);
		churn_one(base);
		exit(0);
	}
	/* the first child that ends (it failed) ends the program */
	if (wait(&status) < 0)
		die("wait", dir);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc == 6 && !strcmp(argv[1], "churn"))
		return do_churn(argv[2], strtoul(argv[3], NULL, 0), strtoull(argv[4], NULL, 0),
				strtoul(argv[5], NULL, 0));
	if (argc == 5 && !strcmp(argv[1], "durable"))
		return do_durable(argv[2], argv[3], strtoull(argv[4], NULL, 0));
	if (argc == 3 && !strcmp(argv[1], "verify"))
		return do_verify(argv[2]);
	if (argc == 6 && !strcmp(argv[1], "fill"))
		return do_fill(argv[2], strtoul(argv[3], NULL, 0), strtoul(argv[4], NULL, 0),
			       argv[5]);
	if (argc == 3 && !strcmp(argv[1], "extents"))
		return do_extents(argv[2], NULL);
	if (argc == 4 && !strcmp(argv[1], "overlap"))
		return do_extents(argv[3], argv[2]);
	if (argc >= 4 && !strcmp(argv[1], "scan")) {
		markers = argv + 3;
		nmarkers = argc - 3;
		return do_scan(argv[2]);
	}
	fprintf(stderr, "usage: fs_io churn DIR PROCS SEED BIG_MIB | durable DIR TAG SEED |\n"
		"       verify LIST | fill DIR FILES KIB MARKER | extents DIR |\n"
		"       overlap LIST DIR | scan DIR MARKER...\n");
	return 2;
}
