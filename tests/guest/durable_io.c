// SPDX-License-Identifier: GPL-2.0
/*
 * durable_io: the guest side of tests/test_durability.py (power cuts over
 * an origin with a volatile write cache).  Built statically on the host.
 *
 *   durable_io write DEV START SECTORS THREADS ID_BASE SEED [seq]
 *	THREADS writers, each alone on its part of [START, START + SECTORS),
 *	one write at a time (so QD = THREADS): 512 B to 64 KiB, O_DIRECT,
 *	each either plain, O_DSYNC (REQ_FUA) or followed by fdatasync
 *	(REQ_PREFLUSH).  Every write prints "W <id> <sector> <count>" before
 *	it is issued and "ACK <id>" after it completed: the cache promises
 *	that a completed write is durable.  With "seq", writer 0 writes its
 *	part sequentially in 64 KiB writes (for seq_bypass).  Runs until
 *	killed (the power cut).  With DURABLE_IO_ERRORS=1 a failed write
 *	prints "E <id> <errno>" instead of ending the program (not
 *	acknowledged: its sectors may hold the old or the new data);
 *	DURABLE_IO_INJECT=1 makes each write fail-able by fault injection
 *	(tests/test_fault_injection.py).
 *
 *   durable_io discard DEV START SECTORS ID SEED
 *	One thread that writes runs of 4 KiB blocks of [START, START +
 *	SECTORS) with id ID and discards (BLKDISCARD) other runs, 50 times
 *	a second, until
 *	killed (tests/test_window_cuts.py: discards of cached blocks).  A
 *	discard leaves a sector undefined, so every sector there must hold
 *	zeros or ID's data, whole: check it with "START SECTORS 0,ID".
 *
 *   durable_io pwrite DEV OFFSET LEN BYTE [dsync|fdatasync]
 *	One O_DIRECT write of LEN bytes of BYTE at byte OFFSET (tests that
 *	need a write in flight: busybox dd falls back to buffered I/O when
 *	its buffer is not aligned for O_DIRECT); with O_DSYNC (REQ_FUA) or
 *	followed by fdatasync (a flush).
 *   durable_io read DEV START SECTORS SEED
 *	One thread of random reads in [START, START + SECTORS) until killed
 *	(fault injection: the read paths; DURABLE_IO_INJECT as for write).
 *
 *   durable_io check DEV EXPECT [OBSERVED]
 *	EXPECT has lines "<sector> <count> <id>[,<id>...]": each sector of
 *	the run must hold one of those writes, whole (id 0: never written,
 *	all zeros).  A line "# newer LO HI" (up to MAX_NEWER of them) also
 *	allows the ids LO..HI-1
 *	anywhere: writes issued after the last line the host saw (the
 *	console may lag behind the cut).  Prints "BAD <sector> <what>" for
 *	the first wrong sectors, "AMB <sector> <count> <id>" for the runs
 *	that hold another write than the first one listed, and "CHECK
 *	sectors=N ok=N bad=N".  OBSERVED gets the runs with the one id found, for a
 *	stricter check of the origin later.
 *
 * Every 512 B sector written holds a header {magic, id, sector} and 61
 * words derived from (id, sector, word), so a torn, misplaced, stale or
 * mixed sector is told apart from the right one.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <linux/fs.h>

#define SECTOR		512
#define WORDS		(SECTOR / 8)
#define MAX_SECTORS	128		/* 64 KiB */
#define MAGIC		0x31454c4241525544ULL	/* "DURABLE1" */
#define MAX_IDS		32
#define MAX_NEWER	256

typedef uint64_t u64;

static const char *dev;
static u64 start, sectors, id_base, seed;
static unsigned int threads;
static int seq_mode;
static u64 next_id;
static pthread_mutex_t id_lock = PTHREAD_MUTEX_INITIALIZER;

static u64 mix(u64 x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void fill(u64 *w, u64 id, u64 s)
{
	unsigned int i;

	w[0] = MAGIC;
	w[1] = id;
	w[2] = s;
	for (i = 3; i < WORDS; i++)
		w[i] = mix(id * 0x100000001b3ULL ^ s * 0x9e3779b1ULL ^ i);
}

/* The id that sector @s holds: 0 for zeros, -1 for anything wrong. */
static long long decode(const u64 *w, u64 s)
{
	u64 want[WORDS];
	unsigned int i;

	for (i = 0; i < WORDS && !w[i]; i++)
		;
	if (i == WORDS)
		return 0;
	if (w[0] != MAGIC || w[2] != s)
		return -1;
	fill(want, w[1], s);
	return memcmp(w, want, SECTOR) ? -1 : (long long)w[1];
}

static void say(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/*
 * One write(2) per line: lines of different threads never mix.  The
 * script's output is a virtio-serial port whose open file is shared with
 * the shell and its other children; a write there can come back short or
 * with EAGAIN when the port's queue is full (seen: a writer that stopped
 * after a few hundred lines with no word).  Retry for up to a minute, then
 * say why on the kernel log (the port is what failed) and exit 3.
 */
static void kmsg(const char *what, int err)
{
	int fd = open("/dev/kmsg", O_WRONLY);

	if (fd >= 0) {
		dprintf(fd, "durable_io: output port: %s (%s)\n", what,
			err ? strerror(err) : "short write");
		close(fd);
	}
}

static void say(const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	static int warned;
	char line[128];
	int n, done = 0, tries = 0;
	va_list ap;
	ssize_t r;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&lock);
	while (done < n) {
		r = write(1, line + done, n - done);
		if (r > 0) {
			done += r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (!warned++)
			kmsg("retrying", r < 0 ? errno : 0);
		if (++tries == 60000)
			break;
		usleep(1000);
	}
	pthread_mutex_unlock(&lock);
	if (done < n) {
		kmsg("gave up, exiting", r < 0 ? errno : 0);
		exit(3);
	}
}

static void die(const char *what)
{
	say("FAIL: durable_io: %s: %s\n", what, strerror(errno));
	exit(1);
}

struct writer {
	unsigned int t;
	u64 first, count;	/* its part, in sectors */
	u64 rnd, pos;
	int fail_fd;		/* /proc/thread-self/make-it-fail, or -1 */
};

/*
 * DURABLE_IO_ERRORS=1: a write or fdatasync that fails prints
 * "E <id> <errno>" (0: a short write) and the thread goes on; without it,
 * it ends the program (FAIL: line).  DURABLE_IO_INJECT=1 also sets the
 * thread's make-it-fail (fault injection's task filter: failslab,
 * fail_page_alloc) for the time of each write and fdatasync only, not for
 * the program's own output.
 */
static int go_on, inject_on;
static __thread int inject_fd = -1;

static void inject(int on)
{
	if (inject_fd >= 0 && pwrite(inject_fd, on ? "1" : "0", 1, 0) != 1)
		die("make-it-fail");
}

static u64 rnd(struct writer *w)
{
	w->rnd = mix(w->rnd);
	return w->rnd;
}

/* Mixed sizes: a third 4 KiB, some sub-block, the rest up to 64 KiB. */
static void pick(struct writer *w, u64 *s, u64 *n)
{
	u64 r = rnd(w) % 10;

	if (seq_mode && w->t == 0) {
		*n = MAX_SECTORS;
		if (w->pos + *n > w->count)
			w->pos = 0;
		*s = w->first + w->pos;
		w->pos += *n;
		return;
	}
	if (r < 4)
		*n = 8;
	else if (r < 6)
		*n = 1 + rnd(w) % 7;
	else
		*n = 8 * (2 + rnd(w) % 15);
	*s = rnd(w) % (w->count - *n + 1);
	if (*n % 8 == 0)
		*s &= ~7ULL;
	*s += w->first;
}

static void *writer(void *arg)
{
	struct writer *w = arg;
	int fd = open(dev, O_RDWR | O_DIRECT);
	int fd_sync = open(dev, O_RDWR | O_DIRECT | O_DSYNC);
	u64 *buf, s, n, i, id, how;
	ssize_t r;
	int err;

	if (fd < 0 || fd_sync < 0)
		die("open");
	if (posix_memalign((void **)&buf, 4096, MAX_SECTORS * SECTOR))
		die("memalign");
	/* touch the buffer now: no page fault while failures are injected */
	memset(buf, 0, MAX_SECTORS * SECTOR);
	if (inject_on && (w->fail_fd = open("/proc/thread-self/make-it-fail", O_WRONLY)) < 0)
		die("open make-it-fail");
	inject_fd = w->fail_fd;
	for (;;) {
		pick(w, &s, &n);
		how = rnd(w) % 3;
		pthread_mutex_lock(&id_lock);
		id = next_id++;
		pthread_mutex_unlock(&id_lock);
		for (i = 0; i < n; i++)
			fill(buf + i * WORDS, id, s + i);
		say("W %llu %llu %llu\n", (unsigned long long)id,
		    (unsigned long long)s, (unsigned long long)n);
		inject(1);
		r = pwrite(how == 1 ? fd_sync : fd, buf, n * SECTOR, s * SECTOR);
		if (r == (ssize_t)(n * SECTOR) && how == 2 && fdatasync(fd))
			r = -1;
		err = r < 0 ? errno : 0;
		inject(0);
		if (r == (ssize_t)(n * SECTOR)) {
			say("ACK %llu\n", (unsigned long long)id);
			continue;
		}
		if (!go_on)
			die(how == 2 && r >= 0 ? "fdatasync" : "pwrite");
		/* a short write is a failed one: some of its sectors may be old */
		say("E %llu %d\n", (unsigned long long)id, r < 0 ? err : 0);
	}
	return NULL;
}

static int do_write(void)
{
	struct writer *w = calloc(threads, sizeof(*w));
	pthread_t *tid = calloc(threads, sizeof(*tid));
	u64 part = sectors / threads & ~7ULL;
	unsigned int t;

	if (!w || !tid || part < MAX_SECTORS)
		return 2;
	next_id = id_base;
	say("READY=1\n");
	for (t = 0; t < threads; t++) {
		w[t].t = t;
		w[t].first = start + t * part;
		w[t].count = part;
		w[t].rnd = seed * 1000 + t;
		w[t].fail_fd = -1;
		if (pthread_create(&tid[t], NULL, writer, &w[t]))
			die("pthread_create");
	}
	for (t = 0; t < threads; t++)
		pthread_join(tid[t], NULL);
	return 0;
}

static int do_discard(u64 id)
{
	struct writer w = { .rnd = seed };
	int fd = open(dev, O_RDWR | O_DIRECT);
	u64 *buf, s, n, i, range[2];

	if (fd < 0)
		die("open");
	if (posix_memalign((void **)&buf, 4096, MAX_SECTORS * SECTOR))
		die("memalign");
	say("DISCARDING=1\n");
	for (;;) {
		n = 8 * (1 + rnd(&w) % (MAX_SECTORS / 8));
		s = start + (rnd(&w) % ((sectors - n) / 8 + 1)) * 8;
		for (i = 0; i < n; i++)
			fill(buf + i * WORDS, id, s + i);
		if (pwrite(fd, buf, n * SECTOR, s * SECTOR) != (ssize_t)(n * SECTOR))
			die("pwrite");
		n = 8 * (1 + rnd(&w) % (MAX_SECTORS / 8));
		s = start + (rnd(&w) % ((sectors - n) / 8 + 1)) * 8;
		range[0] = s * SECTOR;
		range[1] = n * SECTOR;
		if (ioctl(fd, BLKDISCARD, range))
			die("BLKDISCARD");
		/*
		 * At most 50 rounds a second: unthrottled, this thread frees
		 * slots as fast as the writers take them, and the cache never
		 * has to evict.
		 */
		usleep(20000);
	}
	return 0;
}

/*
 * Random O_DIRECT reads of 512 B to 64 KiB, for the read paths under fault
 * injection: each failed read prints "RE <errno>" (0: short), every 100th
 * read "RD <reads> <failed>".  The data is not checked (a read that races
 * a write of the same sector may see either, even a mix).
 */
static int do_read(void)
{
	struct writer w = { .rnd = seed };
	int fd = open(dev, O_RDONLY | O_DIRECT);
	u64 *buf, s, n, reads = 0, failed = 0;
	ssize_t r;
	int err;

	if (fd < 0)
		die("open");
	if (posix_memalign((void **)&buf, 4096, MAX_SECTORS * SECTOR))
		die("memalign");
	memset(buf, 0, MAX_SECTORS * SECTOR);
	if (inject_on && (inject_fd = open("/proc/thread-self/make-it-fail", O_WRONLY)) < 0)
		die("open make-it-fail");
	say("READING=1\n");
	for (;;) {
		n = 1 + rnd(&w) % MAX_SECTORS;
		s = start + rnd(&w) % (sectors - n + 1);
		inject(1);
		r = pread(fd, buf, n * SECTOR, s * SECTOR);
		err = r < 0 ? errno : 0;
		inject(0);
		reads++;
		if (r != (ssize_t)(n * SECTOR)) {
			failed++;
			say("RE %d\n", err);
		}
		if (reads % 100 == 0)
			say("RD %llu %llu\n", (unsigned long long)reads,
			    (unsigned long long)failed);
	}
	return 0;
}

/* Consecutive sectors with the same id, printed as one line. */
struct span {
	u64 s, n;
	long long id;
};

static void span_add(struct span *sp, u64 s, long long id,
		     void (*out)(const struct span *, void *), void *arg)
{
	if (sp->n && sp->s + sp->n == s && sp->id == id) {
		sp->n++;
		return;
	}
	if (sp->n)
		out(sp, arg);
	sp->s = s;
	sp->n = 1;
	sp->id = id;
}

static void out_amb(const struct span *sp, void *arg)
{
	(void)arg;
	say("AMB %llu %llu %lld\n", (unsigned long long)sp->s,
	    (unsigned long long)sp->n, sp->id);
}

static void out_file(const struct span *sp, void *arg)
{
	fprintf(arg, "%llu %llu %lld\n", (unsigned long long)sp->s,
		(unsigned long long)sp->n, sp->id);
}

/* "<sector> <count> <id>[,<id>...]" */
static int parse(char *line, u64 *s, u64 *n, long long *id, unsigned int *nid)
{
	char *ids, *tok, *save;

	*nid = 0;
	*s = strtoull(line, &ids, 10);
	*n = strtoull(ids, &ids, 10);
	for (tok = strtok_r(ids, " ,\n", &save); tok && *nid < MAX_IDS;
	     tok = strtok_r(NULL, " ,\n", &save))
		id[(*nid)++] = strtoll(tok, NULL, 10);
	return *n && *nid ? 0 : -1;
}

static int is_newer(long long got, const long long *lo, const long long *hi,
		    unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (got >= lo[i] && got < hi[i])
			return 1;
	return 0;
}

static int do_check(const char *expect, const char *observed)
{
	FILE *f = fopen(expect, "r"), *o = NULL;
	int fd = open(dev, O_RDONLY | O_DIRECT);
	u64 total = 0, ok = 0, bad = 0, s, n, i;
	struct span amb = { 0 }, obs = { 0 };
	long long id[MAX_IDS], newer_lo[MAX_NEWER], newer_hi[MAX_NEWER];
	unsigned int nnewer = 0;
	unsigned int nid;
	char line[1024];
	u64 *buf;

	if (!f || fd < 0)
		die("open");
	if (observed && !(o = fopen(observed, "w")))
		die("open observed");
	if (posix_memalign((void **)&buf, 4096, MAX_SECTORS * SECTOR))
		die("memalign");
	while (fgets(line, sizeof(line), f)) {
		if (nnewer < MAX_NEWER &&
		    sscanf(line, "# newer %lld %lld", &newer_lo[nnewer],
			   &newer_hi[nnewer]) == 2) {
			nnewer++;
			continue;
		}
		if (parse(line, &s, &n, id, &nid)) {
			say("FAIL: durable_io: bad expect line: %s", line);
			return 1;
		}
		for (i = 0; i < n; ) {
			u64 len = n - i < MAX_SECTORS ? n - i : MAX_SECTORS, k;

			if (pread(fd, buf, len * SECTOR, (s + i) * SECTOR) !=
			    (ssize_t)(len * SECTOR))
				die("pread");
			for (k = 0; k < len; k++, i++) {
				long long got = decode(buf + k * WORDS, s + i);
				unsigned int j;

				total++;
				for (j = 0; j < nid && id[j] != got; j++)
					;
				if (j == nid && !is_newer(got, newer_lo, newer_hi, nnewer)) {
					if (bad++ < 40)
						say("BAD %llu got %lld want %lld%s\n",
						    (unsigned long long)(s + i), got,
						    id[nid - 1], nid > 1 ? " (or another)" : "");
					continue;
				}
				ok++;
				if (got != id[0])
					span_add(&amb, s + i, got, out_amb, NULL);
				if (o)
					span_add(&obs, s + i, got, out_file, o);
			}
		}
	}
	if (amb.n)
		out_amb(&amb, NULL);
	if (o && obs.n)
		out_file(&obs, o);
	if (o && fclose(o))
		die("write observed");
	say("CHECK sectors=%llu ok=%llu bad=%llu\n", (unsigned long long)total,
	    (unsigned long long)ok, (unsigned long long)bad);
	return bad ? 1 : 0;
}

/* One O_DIRECT write of LEN bytes of BYTE at byte OFFSET (busybox dd
 * falls back to buffered I/O when its buffer is not aligned); HOW is ""
 * (plain), "dsync" (O_DSYNC: REQ_FUA) or "fdatasync" (then a flush). */
static int do_pwrite(const char *path, u64 off, size_t len, int byte,
		     const char *how)
{
	void *buf;
	int fd, r;

	if (posix_memalign(&buf, 4096, len))
		return 1;
	memset(buf, byte, len);
	fd = open(path, O_WRONLY | O_DIRECT | (!strcmp(how, "dsync") ? O_DSYNC : 0));
	if (fd < 0) {
		perror(path);
		return 1;
	}
	r = pwrite(fd, buf, len, off) == (ssize_t)len ? 0 : 1;
	if (r)
		perror("pwrite");
	if (!r && !strcmp(how, "fdatasync") && fdatasync(fd)) {
		perror("fdatasync");
		r = 1;
	}
	close(fd);
	free(buf);
	return r;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	if (argc >= 8 && !strcmp(argv[1], "write")) {
		dev = argv[2];
		start = strtoull(argv[3], NULL, 0);
		sectors = strtoull(argv[4], NULL, 0);
		threads = strtoul(argv[5], NULL, 0);
		id_base = strtoull(argv[6], NULL, 0);
		seed = strtoull(argv[7], NULL, 0);
		seq_mode = argc > 8 && !strcmp(argv[8], "seq");
		go_on = getenv("DURABLE_IO_ERRORS") && !strcmp(getenv("DURABLE_IO_ERRORS"), "1");
		inject_on = getenv("DURABLE_IO_INJECT") && !strcmp(getenv("DURABLE_IO_INJECT"), "1");
		if (!threads)
			return 2;
		return do_write();
	}
	if (argc >= 7 && !strcmp(argv[1], "discard")) {
		dev = argv[2];
		start = strtoull(argv[3], NULL, 0);
		sectors = strtoull(argv[4], NULL, 0);
		seed = strtoull(argv[6], NULL, 0);
		if (sectors < MAX_SECTORS || start % 8 || sectors % 8)
			return 2;
		return do_discard(strtoull(argv[5], NULL, 0));
	}
	if (argc >= 6 && !strcmp(argv[1], "read")) {
		dev = argv[2];
		start = strtoull(argv[3], NULL, 0);
		sectors = strtoull(argv[4], NULL, 0);
		seed = strtoull(argv[5], NULL, 0);
		inject_on = getenv("DURABLE_IO_INJECT") && !strcmp(getenv("DURABLE_IO_INJECT"), "1");
		if (sectors < MAX_SECTORS)
			return 2;
		return do_read();
	}
	if (argc >= 6 && !strcmp(argv[1], "pwrite"))
		return do_pwrite(argv[2], strtoull(argv[3], NULL, 0),
				 strtoul(argv[4], NULL, 0), (int)strtoul(argv[5], NULL, 0),
				 argc > 6 ? argv[6] : "");
	if (argc >= 4 && !strcmp(argv[1], "check")) {
		dev = argv[2];
		return do_check(argv[3], argc > 4 ? argv[4] : NULL);
	}
	fprintf(stderr, "usage: durable_io write DEV START SECTORS THREADS ID_BASE SEED [seq]\n"
		"       durable_io discard DEV START SECTORS ID SEED\n"
		"       durable_io read DEV START SECTORS SEED\n"
		"       durable_io check DEV EXPECT [OBSERVED]\n"
		"       durable_io pwrite DEV OFFSET LEN BYTE\n");
	return 2;
}
