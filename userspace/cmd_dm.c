// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl status / list / flush / remove and the libdevmapper
 * plumbing of every command (create: cmd_create.c).
 *
 * No hand-written dm ioctls: every request is a dm_task.  Guests without
 * udev are handled the way dmsetup --noudevsync does it: udev sync off,
 * libdevmapper creates and removes the /dev/mapper nodes itself.
 */
/* No _GNU_SOURCE: <sys/stat.h> would pull <linux/types.h>, whose __le64
 * clashes with the typedefs of pmc_shim_user.h. */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "pmemcache_format.h"	/* __le types from <linux/types.h> here */
#include "precheck.h"
#include "probe.h"
#include "report.h"
#include "status.h"

#define TARGET		"pmemcache"
#define DM_CONTROL	"/dev/mapper/control"

/* ------------------------------------------------------------------ */
/* libdevmapper plumbing                                               */

static char dm_lastmsg[512];
static int dm_lasterr;
static bool dm_log_stdout;

/*
 * Keep libdevmapper quiet; its last error becomes part of our one line.
 * While a report is printed, its lines (log level 4, _LOG_WARN, without
 * the stderr bit 0x80) go to stdout, as dmsetup's default logger does.
 */
static void dm_log(int level, const char *file, int line, int dm_errno,
		   const char *f, ...) __attribute__((format(printf, 5, 6)));
static void dm_log(int level, const char *file, int line, int dm_errno,
		   const char *f, ...)
{
	va_list ap;

	(void)file;
	(void)line;
	if (dm_log_stdout && (level & 7) == 4) {
		va_start(ap, f);
		vfprintf(level & 0x80 ? stderr : stdout, f, ap);
		va_end(ap);
		fputc('\n', level & 0x80 ? stderr : stdout);
		return;
	}
	if ((level & 7) > 3)
		return;
	va_start(ap, f);
	vsnprintf(dm_lastmsg, sizeof(dm_lastmsg), f, ap);
	va_end(ap);
	if (dm_errno > 0)
		dm_lasterr = dm_errno;
	if (getenv("PMEMCACHECTL_DEBUG"))
		fprintf(stderr, "libdevmapper: %s\n", dm_lastmsg);
}

void pmctl_dm_log_init(void)
{
	dm_log_with_errno_init(dm_log);
	dm_lasterr = 0;
	dm_lastmsg[0] = 0;
}

void pmctl_dm_log_stdout(bool on)
{
	dm_log_stdout = on;
}

static bool dm_ready;

/* 0, or an exit code after one error line. */
int pmctl_dm_setup(void)
{
	int fd;

	if (dm_ready)
		return 0;
	pmctl_dm_log_init();
	if (access("/run/udev/control", F_OK)) {
		/* No udev: libdevmapper makes the nodes (dmsetup --noudevsync). */
		setenv("DM_DISABLE_UDEV", "1", 0);
	}
	dm_udev_set_sync_support(0);
	fd = open(DM_CONTROL, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		if (errno == EACCES || errno == EPERM)
			err("%s: permission denied (device-mapper needs root)", DM_CONTROL);
		else
			err("%s: %s (is device-mapper in the kernel?)", DM_CONTROL,
			    strerror(errno));
		return EXIT_DEVICE;
	}
	close(fd);
	dm_ready = true;
	return 0;
}

struct dm_task *pmctl_dm_task(int type, const char *name)
{
	struct dm_task *dmt = dm_task_create(type);

	if (!dmt)
		return NULL;
	if (name && !dm_task_set_name(dmt, name)) {
		dm_task_destroy(dmt);
		return NULL;
	}
	return dmt;
}

/* dm_task_run() with the last error reset, so that pmctl_dm_why() is its. */
bool pmctl_dm_run(struct dm_task *dmt)
{
	dm_lasterr = 0;
	dm_lastmsg[0] = 0;
	if (dm_task_run(dmt))
		return true;
	if (!dm_lasterr)
		dm_lasterr = dm_task_get_errno(dmt);
	return false;
}

int pmctl_dm_errno(void)
{
	return dm_lasterr;
}

const char *pmctl_dm_why(void)
{
	if (dm_lasterr)
		return strerror(dm_lasterr);
	return dm_lastmsg[0] ? dm_lastmsg : "unknown error";
}

/* 1: exists (info filled), 0: no such device, <0: error. */
int pmctl_dm_info(const char *name, struct dm_info *info)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_INFO, name);
	int r = -1;

	if (!dmt)
		return -1;
	if (dm_task_run(dmt) && dm_task_get_info(dmt, info))
		r = info->exists ? 1 : 0;
	dm_task_destroy(dmt);
	return r;
}

int pmctl_dm_uuid_of(const char *name, char *out, size_t len)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_INFO, name);
	struct dm_info info;
	const char *u;
	int r = -1;

	out[0] = 0;
	if (!dmt)
		return -1;
	if (dm_task_run(dmt) && dm_task_get_info(dmt, &info)) {
		r = info.exists ? 1 : 0;
		u = info.exists ? dm_task_get_uuid(dmt) : NULL;
		snprintf(out, len, "%s", u ? u : "");
	}
	dm_task_destroy(dmt);
	return r;
}

/*
 * Status or table of a one-target pmemcache device.  Returns 0, or an exit
 * code after one error line.  @params is malloc'ed.
 */
int pmctl_dm_get(int type, const char *name, uint64_t *len, char **params)
{
	struct dm_task *dmt;
	struct dm_info info;
	uint64_t start, length;
	char *ttype = NULL, *p = NULL;
	void *next;
	int r;

	r = pmctl_dm_info(name, &info);
	if (r < 0) {
		err("%s: cannot query device-mapper: %s", name, pmctl_dm_why());
		return EXIT_DM;
	}
	if (!r) {
		err("%s: no such device-mapper device", name);
		return EXIT_DEVICE;
	}
	dmt = pmctl_dm_task(type, name);
	if (!dmt || !dm_task_run(dmt)) {
		err("%s: cannot read the %s: %s", name,
		    type == DM_DEVICE_STATUS ? "status" : "table", pmctl_dm_why());
		if (dmt)
			dm_task_destroy(dmt);
		return EXIT_DM;
	}
	next = dm_get_next_target(dmt, NULL, &start, &length, &ttype, &p);
	if (!ttype || strcmp(ttype, TARGET) || next) {
		err("%s: not a pmemcache device (target %s%s)", name,
		    ttype ? ttype : "none", next ? " and others" : "");
		dm_task_destroy(dmt);
		return EXIT_DEVICE;
	}
	*len = length;
	*params = strdup(p ? p : "");
	dm_task_destroy(dmt);
	return 0;
}

int pmctl_dm_message(const char *name, const char *msg)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_TARGET_MSG, name);
	int ok;

	if (!dmt)
		return -ENOMEM;
	dm_lasterr = 0;
	ok = dm_task_set_sector(dmt, 0) && dm_task_set_message(dmt, msg) &&
	     dm_task_run(dmt);
	if (!ok && !dm_lasterr)
		dm_lasterr = dm_task_get_errno(dmt);
	dm_task_destroy(dmt);
	return ok ? 0 : -(dm_lasterr ? dm_lasterr : EIO);
}

/* "/dev/md0" for "9:0", or NULL. */
char *pmctl_devpath(const char *majmin)
{
	char p[128], line[256], *r = NULL;
	FILE *f;

	snprintf(p, sizeof(p), "/sys/dev/block/%s/uevent", majmin);
	f = fopen(p, "re");
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, "DEVNAME=", 8)) {
			line[strcspn(line, "\n")] = 0;
			r = malloc(strlen(line + 8) + 6);
			if (r)
				sprintf(r, "/dev/%s", line + 8);
			break;
		}
	}
	fclose(f);
	return r;
}

/* ------------------------------------------------------------------ */
/* Kernel log: the one-line reason of a refused table                  */

int pmctl_kmsg_open(void)
{
	int fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		lseek(fd, 0, SEEK_END);
	return fd;
}

/*
 * The reason dm logged for a refused table since pmctl_kmsg_open(): the last
 * "...: pmemcache: <reason>" line (the target's ti->error), else the last
 * device-mapper table/ioctl line.
 */
bool pmctl_kmsg_reason(int fd, char *out, size_t len)
{
	char rec[2048], other[512] = "";
	bool found = false;
	ssize_t n;

	if (fd < 0)
		return false;
	for (;;) {
		const char *p;
		char *msg, *nl;

		n = read(fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;
		if (n <= 0)
			break;
		rec[n] = 0;
		msg = strchr(rec, ';');
		if (!msg)
			continue;
		msg++;
		nl = strchr(msg, '\n');
		if (nl)
			*nl = 0;
		if (!strstr(msg, "device-mapper"))
			continue;
		p = strstr(msg, TARGET ": ");
		if (p) {
			snprintf(out, len, "%s", p + strlen(TARGET ": "));
			found = true;
		} else {
			snprintf(other, sizeof(other), "%s", msg);
		}
	}
	close(fd);
	if (!found && other[0]) {
		snprintf(out, len, "%s", other);
		found = true;
	}
	return found;
}

/* ------------------------------------------------------------------ */
/* status / list                                                       */

double pmctl_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

/* One status sample; 0 or an exit code after one error line. */
int pmctl_sample(const char *name, struct pmctl_sample *s)
{
	char *params;
	int r = pmctl_dm_get(DM_DEVICE_STATUS, name, &s->len, &params);

	if (r)
		return r;
	clock_gettime(CLOCK_MONOTONIC, &s->t);
	if (pmc_status_parse(params, &s->st)) {
		err("%s: unexpected status line '%s'", name, params);
		free(params);
		return EXIT_DM;
	}
	free(params);
	return 0;
}

void pmctl_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static double rate_of(const struct pmctl_sample *a, const struct pmctl_sample *b, uint32_t bs)
{
	double dt = (b->t.tv_sec - a->t.tv_sec) + (b->t.tv_nsec - a->t.tv_nsec) / 1e9;
	uint64_t x = pmc_status_wb_bytes(&a->st), y = pmc_status_wb_bytes(&b->st);

	if (dt <= 0)
		return 0;
	if (y >= x)
		return (double)(y - x) / dt;
	/* counters were cleared: estimate from the dirty count */
	return a->st.dirty > b->st.dirty ?
		(double)(a->st.dirty - b->st.dirty) * bs / dt : 0;
}

void pmctl_human_bytes(double b, char *out, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f %s", b, u[i]);
}

static void status_human(const char *name, const char *dm_uuid,
			 const struct pmctl_sample *s, const struct pmc_table *t,
			 double rate)
{
	const struct pmc_status *st = &s->st;
	char *op = pmctl_devpath(t->origin), *cp = pmctl_devpath(t->cache), rb[32];

	printf("%s: pmemcache, %s\n", name, st->cleaner ? "cleaner mode" : "normal mode");
	printf("  %-18s %s\n", "health", st->health);
	printf("  %-18s %s\n", "dm uuid", dm_uuid && *dm_uuid ? dm_uuid : "none");
	printf("  %-18s %s (%s)\n", "origin", op ? op : t->origin, t->origin);
	printf("  %-18s %s (%s)\n", "cache", cp ? cp : t->cache, t->cache);
	printf("  %-18s %u bytes\n", "block size", t->block_size);
	if (t->features[0])
		printf("  %-18s %s\n", "features", t->features);
	printf("  %-18s %llu\n", "blocks", (unsigned long long)st->blocks);
	printf("  %-18s %llu (%.1f%%)\n", "dirty", (unsigned long long)st->dirty,
	       st->blocks ? 100.0 * st->dirty / st->blocks : 0.0);
	printf("  %-18s %llu\n", "clean", (unsigned long long)st->clean);
	printf("  %-18s %llu\n", "free", (unsigned long long)st->free);
	printf("  %-18s %llu hits, %llu partial, %llu misses\n", "reads",
	       (unsigned long long)st->read_hits, (unsigned long long)st->read_partial,
	       (unsigned long long)st->read_misses);
	printf("  %-18s %llu hits, %llu new, %llu around\n", "writes",
	       (unsigned long long)st->write_hits, (unsigned long long)st->write_new,
	       (unsigned long long)st->write_around);
	printf("  %-18s %llu discards, %llu flushes\n", "other",
	       (unsigned long long)st->discards, (unsigned long long)st->flushes);
	pmctl_human_bytes((double)pmc_status_wb_bytes(st), rb, sizeof(rb));
	printf("  %-18s %llu blocks, %s (route %s)\n", "written back",
	       (unsigned long long)(st->wb_pfn_blocks + st->wb_bounce_blocks), rb,
	       st->route);
	if (rate >= 0) {
		pmctl_human_bytes(rate, rb, sizeof(rb));
		printf("  %-18s %s/s\n", "writeback rate", rb);
	}
	if (st->wb_rate)
		printf("  %-18s %llu blocks/s towards %llu dirty\n", "rate limit",
		       (unsigned long long)st->wb_rate,
		       (unsigned long long)st->wb_target);
	else
		printf("  %-18s none (idle, flushing, or above the high watermark)\n",
		       "rate limit");
	printf("  %-18s %llu blocks, %llu whole stripes written, %llu origin flushes\n",
	       "stripe", (unsigned long long)st->stripe_blocks,
	       (unsigned long long)st->wb_full_stripes,
	       (unsigned long long)st->wb_flushes);
	printf("  %-18s %llu waits (%llu for all of full_wait), %llu went around, %llu written through\n",
	       "cache full", (unsigned long long)st->full_waits,
	       (unsigned long long)st->full_timeouts,
	       (unsigned long long)st->full_around,
	       (unsigned long long)st->full_through);
	if (st->bad_slots)
		printf("  %-18s %llu blocks out of use (pmem badblocks)\n",
		       "bad pmem", (unsigned long long)st->bad_slots);
	printf("  %-18s %llu writeback, %llu media, %llu pfn refused\n", "errors",
	       (unsigned long long)st->wb_errors, (unsigned long long)st->media_errors,
	       (unsigned long long)st->wb_notsupp);
	pmctl_human_bytes(st->ram_bytes_per_block * st->blocks, rb, sizeof(rb));
	printf("  %-18s %s (%.1f bytes per block)\n", "index RAM", rb,
	       st->ram_bytes_per_block);
	free(op);
	free(cp);
}

static void print_json(json_object *j)
{
	printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
						      JSON_C_TO_STRING_NOSLASHESCAPE));
}

/*
 * One device as status and list show it.  Items are malloc'ed one by one:
 * a report row points into its item until the report is printed.
 */
struct dev_item {
	char name[128];
	char uuid[160];
	struct pmctl_sample s;
	struct pmc_table t;
	bool have_table;
	double rate;		/* bytes/s, < 0: not measured */
	char *op, *cp;		/* /dev paths of origin and cache, or NULL */
	struct pmctl_row row;
};

static struct dev_item *item_new(const char *name)
{
	struct dev_item *it = calloc(1, sizeof(*it));

	if (!it) {
		err("out of memory");
		return NULL;
	}
	snprintf(it->name, sizeof(it->name), "%s", name);
	it->rate = -1;
	return it;
}

static void items_free(struct dev_item **items, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		if (!items[i])
			continue;
		free(items[i]->op);
		free(items[i]->cp);
		free(items[i]);
	}
}

static json_object *item_json(struct dev_item *it)
{
	return pmc_status_json(it->name, it->uuid, it->s.len, &it->s.st,
			       it->have_table ? &it->t : NULL, it->op, it->cp, it->rate);
}

/*
 * Print @n devices: columns or dm_report JSON (@ro), else the status JSON
 * object (an array for list), else the human form (status).
 */
static int items_print(struct dev_item **items, int n, bool list, bool json,
		       const struct pmctl_report_opts *ro)
{
	struct pmctl_report *rep;
	json_object *j;
	int i, r;

	for (i = 0; i < n; i++) {
		struct dev_item *it = items[i];

		if (it->have_table && !it->op)
			it->op = pmctl_devpath(it->t.origin);
		if (it->have_table && !it->cp)
			it->cp = pmctl_devpath(it->t.cache);
	}
	if (ro) {
		rep = pmctl_report_init(ro, &r);
		if (!rep)
			return r;
		for (i = 0; i < n; i++) {
			struct dev_item *it = items[i];

			pmctl_row_fill(&it->row, it->name, it->uuid, it->s.len, &it->s.st,
				       &it->t, it->op, it->cp, it->rate);
			r = pmctl_report_row(rep, &it->row);
			if (r)
				break;
		}
		i = pmctl_report_end(rep);
		return r ? r : i;
	}
	if (json && list) {
		j = json_object_new_array();
		for (i = 0; i < n; i++)
			json_object_array_add(j, item_json(items[i]));
	} else if (json) {
		j = item_json(items[0]);
	} else {
		status_human(items[0]->name, items[0]->uuid, &items[0]->s, &items[0]->t,
			     items[0]->rate);
		return 0;
	}
	print_json(j);
	json_object_put(j);
	return 0;
}

/* Test hook: a device from captured lines, no device-mapper involved. */
static int item_from_lines(struct dev_item *it, const char *sline,
			   const char *tline, const char *uuid)
{
	const char *params;
	uint64_t start;
	char type[64];

	if (!sline || pmc_split_dm_line(sline, &start, &it->s.len, type, sizeof(type), &params) ||
	    strcmp(type, TARGET) || pmc_status_parse(params, &it->s.st)) {
		err("unexpected status line '%s'", sline ? sline : "");
		return EXIT_DM;
	}
	if (tline && (pmc_split_dm_line(tline, &start, &it->s.len, type, sizeof(type), &params) ||
		      strcmp(type, TARGET) || pmc_table_parse(params, &it->t))) {
		err("unexpected table line '%s'", tline);
		return EXIT_DM;
	}
	it->have_table = tline != NULL;
	snprintf(it->uuid, sizeof(it->uuid), "%s", uuid ? uuid : "");
	return 0;
}

/* The options status and list share; getopt's code of the others. */
enum { OPT_SLINE = 300, OPT_TLINE, OPT_ULINE, OPT_DEVICE, OPT_NOHEAD, OPT_SEP };

#define REPORT_OPTIONS \
	{ "json", no_argument, NULL, 'j' }, \
	{ "options", required_argument, NULL, 'o' }, \
	{ "columns", no_argument, NULL, 'c' }, \
	{ "noheadings", no_argument, NULL, OPT_NOHEAD }, \
	{ "separator", required_argument, NULL, OPT_SEP }, \
	/* hidden test hooks */ \
	{ "status-line", required_argument, NULL, OPT_SLINE }, \
	{ "table-line", required_argument, NULL, OPT_TLINE }, \
	{ "dm-uuid", required_argument, NULL, OPT_ULINE }

struct report_args {
	struct pmctl_report_opts ro;
	bool json, columns;
};

/* 1: @c was one of REPORT_OPTIONS' visible options, else 0. */
static int report_opt(int c, struct report_args *a)
{
	switch (c) {
	case 'j':
		a->json = true;
		return 1;
	case 'o':
		a->ro.fields = optarg;
		return 1;
	case 'c':
		a->columns = true;
		return 1;
	case OPT_NOHEAD:
		a->ro.noheadings = true;
		return 1;
	case OPT_SEP:
		a->ro.separator = optarg;
		return 1;
	}
	return 0;
}

/* The report options, or NULL for the JSON object / human form. */
static const struct pmctl_report_opts *report_of(struct report_args *a, bool list)
{
	bool cols = a->ro.fields || a->columns;

	if (!a->json)
		cols = cols || list || a->ro.noheadings || a->ro.separator;
	a->ro.json = a->json;
	return cols ? &a->ro : NULL;
}

int cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {
		REPORT_OPTIONS,
		{ "interval", required_argument, NULL, 'i' },
		{ NULL, 0, NULL, 0 },
	};
	const char *sline = NULL, *tline = NULL, *uline = NULL;
	const struct pmctl_report_opts *ro;
	struct report_args ra = { 0 };
	struct dev_item *it;
	struct pmctl_sample b;
	uint32_t interval = 200;
	uint64_t len;
	char *params;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ji:o:c", opts, NULL)) != -1) {
		if (report_opt(c, &ra))
			continue;
		switch (c) {
		case 'i':
			if (parse_u32_range(optarg, 0, 60000, &interval)) {
				err("--interval: '%s' is not a number of ms from 0 to 60000", optarg);
				return EXIT_USAGE;
			}
			break;
		case OPT_SLINE:
			sline = optarg;
			break;
		case OPT_TLINE:
			tline = optarg;
			break;
		case OPT_ULINE:
			uline = optarg;
			break;
		default:
			return bad_option(c, argv, "status");
		}
	}
	if (pmctl_report_help(ra.ro.fields))
		return EXIT_OK;
	if (argc - optind != 1) {
		err("need exactly one NAME (see pmemcachectl status --help)");
		return EXIT_USAGE;
	}
	ro = report_of(&ra, false);
	it = item_new(argv[optind]);
	if (!it)
		return EXIT_DM;
	if (sline) {
		r = item_from_lines(it, sline, tline, uline);
		if (!r && !tline && (ro || !ra.json)) {
			err("--status-line without --table-line needs --json");
			r = EXIT_USAGE;
		}
		goto out;
	}

	r = pmctl_dm_setup();
	if (r)
		goto out;
	r = pmctl_dm_get(DM_DEVICE_TABLE, it->name, &len, &params);
	if (r)
		goto out;
	if (pmc_table_parse(params, &it->t)) {
		err("%s: unexpected table '%s'", it->name, params);
		free(params);
		r = EXIT_DM;
		goto out;
	}
	free(params);
	it->have_table = true;
	r = pmctl_sample(it->name, &it->s);
	if (r)
		goto out;
	if (interval) {
		pmctl_sleep_ms(interval);
		r = pmctl_sample(it->name, &b);
		if (r)
			goto out;
		it->rate = rate_of(&it->s, &b, it->t.block_size);
		it->s = b;
	}
	if (pmctl_dm_uuid_of(it->name, it->uuid, sizeof(it->uuid)) < 0)
		it->uuid[0] = 0;
out:
	if (!r)
		r = items_print(&it, 1, false, ra.json, ro);
	items_free(&it, 1);
	return r;
}

#define LIST_MAX_FAKE	8

/*
 * Every pmemcache device, in the order of DM_DEVICE_LIST.  Devices that
 * vanish or change meanwhile are skipped.  0, or an exit code.
 */
static int list_devices(struct dev_item ***itemsp, int *np)
{
	struct dev_item **items = NULL, **bigger;
	struct dm_task *dmt;
	struct dm_names *n;
	unsigned int next = 0;
	int count = 0, r = 0;

	dmt = pmctl_dm_task(DM_DEVICE_LIST, NULL);
	if (!dmt || !dm_task_run(dmt)) {
		err("cannot list device-mapper devices: %s", pmctl_dm_why());
		if (dmt)
			dm_task_destroy(dmt);
		return EXIT_DM;
	}
	n = dm_task_get_names(dmt);
	if (n && n->dev) {
		do {
			struct dev_item *it;
			struct dm_task *t;
			uint64_t start, length;
			char *ttype = NULL, *p = NULL;
			bool ours;

			n = (struct dm_names *)((char *)n + next);
			next = n->next;
			it = item_new(n->name);
			if (!it) {
				r = EXIT_DM;
				break;
			}
			t = pmctl_dm_task(DM_DEVICE_TABLE, n->name);
			ours = t && dm_task_run(t) &&
			       !dm_get_next_target(t, NULL, &start, &length, &ttype, &p) &&
			       ttype && !strcmp(ttype, TARGET) && p &&
			       !pmc_table_parse(p, &it->t);
			if (t)
				dm_task_destroy(t);
			if (!ours || pmctl_sample(n->name, &it->s)) {
				free(it);
				continue;
			}
			it->have_table = true;
			if (pmctl_dm_uuid_of(n->name, it->uuid, sizeof(it->uuid)) < 0)
				it->uuid[0] = 0;
			bigger = realloc(items, (count + 1) * sizeof(*items));
			if (!bigger) {
				err("out of memory");
				free(it);
				r = EXIT_DM;
				break;
			}
			items = bigger;
			items[count++] = it;
		} while (next);
	}
	dm_task_destroy(dmt);
	*itemsp = items;
	*np = count;
	return r;
}

int cmd_list(int argc, char **argv)
{
	static const struct option opts[] = {
		REPORT_OPTIONS,
		{ "device", required_argument, NULL, OPT_DEVICE },	/* hidden */
		{ NULL, 0, NULL, 0 },
	};
	/* test hook: --device NAME, then its lines, for each device */
	struct { const char *name, *sline, *tline, *uline; } fake[LIST_MAX_FAKE];
	struct dev_item **items = NULL;
	const struct pmctl_report_opts *ro;
	struct report_args ra = { 0 };
	int c, i, r, nfake = 0, count = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":jo:c", opts, NULL)) != -1) {
		if (report_opt(c, &ra))
			continue;
		if (c == OPT_DEVICE && nfake < LIST_MAX_FAKE) {
			memset(&fake[nfake], 0, sizeof(fake[0]));
			fake[nfake++].name = optarg;
		} else if (c == OPT_SLINE && nfake) {
			fake[nfake - 1].sline = optarg;
		} else if (c == OPT_TLINE && nfake) {
			fake[nfake - 1].tline = optarg;
		} else if (c == OPT_ULINE && nfake) {
			fake[nfake - 1].uline = optarg;
		} else {
			return bad_option(c, argv, "list");
		}
	}
	if (pmctl_report_help(ra.ro.fields))
		return EXIT_OK;
	if (argc != optind) {
		err("takes no arguments (see pmemcachectl list --help)");
		return EXIT_USAGE;
	}
	ro = report_of(&ra, true);
	if (nfake) {
		items = calloc(nfake, sizeof(*items));
		r = items ? 0 : EXIT_DM;
		for (i = 0; !r && i < nfake; i++) {
			items[i] = item_new(fake[i].name);
			if (!items[i])
				r = EXIT_DM;
			else
				r = item_from_lines(items[i], fake[i].sline, fake[i].tline,
						    fake[i].uline);
			count = i + 1;
			if (!r && !fake[i].tline) {
				err("--device needs --status-line and --table-line");
				r = EXIT_USAGE;
			}
		}
	} else {
		r = pmctl_dm_setup();
		if (!r)
			r = list_devices(&items, &count);
	}
	if (!r)
		r = items_print(items, count, true, ra.json, ro);
	items_free(items, count);
	free(items);
	return r;
}

/* ------------------------------------------------------------------ */
/* flush / remove                                                      */

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void progress(const char *name, const struct pmctl_sample *s, uint64_t start_dirty,
		     double rate, bool tty, bool final)
{
	char rb[32];

	pmctl_human_bytes(rate, rb, sizeof(rb));
	if (tty) {
		int width = 30, fill;
		double done = start_dirty ?
			1.0 - (double)s->st.dirty / (double)start_dirty : 1.0;
		char bar[64];

		if (done < 0)
			done = 0;
		fill = (int)(done * width + 0.5);
		memset(bar, '#', fill);
		memset(bar + fill, '-', width - fill);
		bar[width] = 0;
		printf("\r%s: [%s] %3d%%  %llu blocks left  %s/s   %s", name, bar,
		       (int)(done * 100 + 0.5), (unsigned long long)s->st.dirty, rb,
		       final ? "\n" : "");
	} else {
		printf("%s: %llu dirty blocks left, %s/s\n", name,
		       (unsigned long long)s->st.dirty, rb);
	}
	fflush(stdout);
}

/*
 * Send "flush" from a child (the message returns only when the cache is
 * clean) and show progress from status samples here.  Ctrl-C: the child's
 * wait is interruptible, the device keeps running with the normal
 * watermark writeback.
 */
static int do_flush(const char *name, bool quiet)
{
	struct sigaction sa, old;
	struct pmctl_sample first, prev, cur;
	struct pmc_table t;
	bool tty = isatty(STDOUT_FILENO);
	double last_print = 0, rate = 0;
	uint64_t len;
	char *params;
	pid_t pid;
	int r, status, rc;

	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);
	if (r)
		return r;
	if (pmc_table_parse(params, &t))
		t.block_size = PMC_MAX_BLOCK_SIZE;
	free(params);
	r = pmctl_sample(name, &first);
	if (r)
		return r;
	prev = first;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err("fork: %s", strerror(errno));
		return EXIT_DM;
	}
	if (!pid) {
		signal(SIGINT, SIG_DFL);
		r = pmctl_dm_message(name, "flush");
		_exit(r == 0 ? 0 : r == -EBUSY ? 2 : r == -EINTR ? 3 : 1);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;	/* no SA_RESTART: sleeps end early */
	sigaction(SIGINT, &sa, &old);
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (interrupted) {
			/* The kernel's wait is interruptible: the message ends. */
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			if (!quiet && tty)
				printf("\n");
			err("%s: interrupted; the device keeps working, dirty blocks "
			    "are written back by the watermark policy", name);
			sigaction(SIGINT, &old, NULL);
			return EXIT_INTERRUPTED;
		}
		pmctl_sleep_ms(250);
		if (pmctl_sample(name, &cur))
			continue;
		if (first.st.dirty && pmctl_now_s() - last_print >= (tty ? 0.25 : 1.0)) {
			rate = rate_of(&prev, &cur, t.block_size);
			prev = cur;
			if (!quiet)
				progress(name, &cur, first.st.dirty, rate, tty, false);
			last_print = pmctl_now_s();
		}
	}
	sigaction(SIGINT, &old, NULL);
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	r = pmctl_sample(name, &cur);
	if (r)
		return r;
	/* Final line: the average rate of the whole flush. */
	if (!quiet && (first.st.dirty || cur.st.dirty))
		progress(name, &cur, first.st.dirty, rate_of(&first, &cur, t.block_size),
			 tty, true);
	switch (rc) {
	case 0:
		return EXIT_OK;
	case 2:
		err("%s: the device is suspended; resume it first", name);
		return EXIT_DM;
	case 3:
		err("%s: flush interrupted", name);
		return EXIT_INTERRUPTED;
	default:
		err("%s: flush failed: an origin write failed, %llu blocks still dirty "
		    "(%llu writeback errors)", name, (unsigned long long)cur.st.dirty,
		    (unsigned long long)cur.st.wb_errors);
		return EXIT_IO;
	}
}

static int flush_opts(int argc, char **argv, const char *cmd, bool *quiet,
		      bool *keep, bool *force)
{
	static const struct option opts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "keep-dirty", no_argument, NULL, 'k' },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, keep ? ":qkf" : ":q", opts, NULL)) != -1) {
		if (c == 'q') {
			*quiet = true;
		} else if (c == 'k' && keep) {
			*keep = true;
		} else if (c == 'f' && force) {
			*force = true;
		} else {
			return bad_option(c, argv, cmd);
		}
	}
	if (argc - optind != 1) {
		err("need exactly one NAME (see pmemcachectl %s --help)", cmd);
		return EXIT_USAGE;
	}
	if (keep && *keep && !*force) {
		err("--keep-dirty leaves the dirty blocks only in pmem: the origin stays "
		    "stale, whatever writes it meanwhile is overwritten when they are "
		    "re-attached, and activate will not re-attach them; add --force to "
		    "do it anyway");
		return EXIT_USAGE;
	}
	if (force && *force && !*keep) {
		err("--force only goes with --keep-dirty");
		return EXIT_USAGE;
	}
	return 0;
}

int cmd_flush(int argc, char **argv)
{
	bool quiet = false;
	int r = flush_opts(argc, argv, "flush", &quiet, NULL, NULL);

	if (r)
		return r;
	r = pmctl_dm_setup();
	if (r)
		return r;
	return do_flush(argv[optind], quiet);
}

/*
 * After the device is gone: a clean cache is forgotten (its blocks go
 * stale as soon as the origin is written alone; the next create formats),
 * a cache with dirty blocks is marked kept-dirty, so that activate never
 * re-attaches it on its own.
 */
static int after_remove(const char *name, const char *cache, bool keep)
{
	uint64_t dirty = 0;
	struct pmctl_sb sb;
	int r;

	r = pmctl_sb_read(cache, &sb);
	if (r || sb.state != PMCTL_SB_CACHE) {
		err("%s: removed, but the superblock of %s cannot be read: %s", name, cache,
		    r ? strerror(-r) : "not a valid cache");
		return EXIT_IO;
	}
	r = pmctl_cache_dirty(cache, &dirty);
	if (r) {
		err("%s: removed, but the records of %s cannot be read: %s", name, cache,
		    strerror(-r));
		return EXIT_IO;
	}
	if (!dirty) {
		r = pmctl_sb_forget(cache);
		if (r) {
			err("%s: removed, but the superblock of %s cannot be cleared: %s; its "
			    "clean blocks are stale once the origin is written: attach it "
			    "again only with create --format", name, cache, strerror(-r));
			return EXIT_IO;
		}
		printf("%s: removed; %s is clean and its superblock cleared\n", name, cache);
		return EXIT_OK;
	}
	if (!keep)	/* written between the flush and the remove */
		warnx_("%s: %llu blocks became dirty after the flush: kept in %s", name,
		       (unsigned long long)dirty, cache);
	r = pmctl_mark_write(cache, sb.cache_uuid, true, (uint64_t)time(NULL));
	if (r) {
		err("%s: removed with %llu dirty blocks kept in %s, but they cannot be "
		    "marked (%s): activate may re-attach them", name,
		    (unsigned long long)dirty, cache, strerror(-r));
		return EXIT_IO;
	}
	printf("%s: removed (%llu dirty blocks kept in %s, marked: only create --force "
	       "re-attaches them)\n", name, (unsigned long long)dirty, cache);
	return keep ? EXIT_OK : EXIT_IO;
}

int cmd_remove(int argc, char **argv)
{
	bool quiet = false, keep = false, force = false;
	struct pmc_table t;
	struct dm_task *dmt;
	struct dm_info info;
	const char *name;
	uint64_t len;
	char *params, *cache;
	int r = flush_opts(argc, argv, "remove", &quiet, &keep, &force);

	if (r)
		return r;
	name = argv[optind];
	r = pmctl_dm_setup();
	if (r)
		return r;
	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);	/* exists, is ours */
	if (r)
		return r;
	if (pmc_table_parse(params, &t)) {
		err("%s: unexpected table '%s'", name, params);
		free(params);
		return EXIT_DM;
	}
	free(params);
	cache = pmctl_devpath(t.cache);
	if (!cache) {
		err("%s: the cache device %s has no node", name, t.cache);
		return EXIT_DEVICE;
	}
	if (pmctl_dm_info(name, &info) > 0 && info.open_count > 0) {
		err("%s: device is in use (open count %d)", name, info.open_count);
		free(cache);
		return EXIT_DEVICE;
	}
	if (!keep) {
		r = do_flush(name, quiet);
		if (r) {
			free(cache);
			return r;	/* not removed: do_flush said why */
		}
	} else {
		struct pmctl_sample s;

		if (!pmctl_sample(name, &s) && s.st.dirty)
			warnx_("%s: %llu dirty blocks stay in %s only: the origin is stale "
			       "until 'pmemcachectl create --force' re-attaches them, and "
			       "whatever writes it meanwhile will be overwritten", name,
			       (unsigned long long)s.st.dirty, cache);
	}
	dmt = pmctl_dm_task(DM_DEVICE_REMOVE, name);
	dm_lasterr = 0;
	if (!dmt || !dm_task_run(dmt)) {
		err("%s: cannot remove: %s", name, pmctl_dm_why());
		if (dmt)
			dm_task_destroy(dmt);
		free(cache);
		return dm_lasterr == EBUSY ? EXIT_DEVICE : EXIT_DM;
	}
	dm_task_destroy(dmt);
	dm_task_update_nodes();
	r = after_remove(name, cache, keep);
	free(cache);
	return r;
}
