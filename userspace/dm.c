// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: the libdevmapper plumbing of every command on live devices
 * (status, list, flush, remove, detach, set, monitor, activate, create),
 * the kernel log reason of a refused table, and status samples.
 *
 * No hand-written dm ioctls: every request is a dm_task.  Guests without
 * udev are handled the way dmsetup --noudevsync does it: udev sync off,
 * libdevmapper creates and removes the /dev/mapper nodes itself.
 */
/*
 * No _GNU_SOURCE: <sys/stat.h> would pull <linux/types.h>, whose __le64
 * clashes with the typedefs of pmc_shim_user.h.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "probe.h"
#include "status.h"

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

/*
 * Mark a task that resumes a device (a create with a table, a resume) as
 * the device's activation for udev's dm rules, as dmsetup does: the
 * event's DM_COOKIE carries DM_UDEV_PRIMARY_SOURCE_FLAG.  Udev sync stays
 * off (pmctl_dm_setup), so the cookie is the flags only: no semaphore,
 * nothing waits for udev, and activate run by the udev rule cannot wait
 * for its own event.  Without a cookie, 55-dm.rules (10-dm.rules) takes
 * the flags of the device's add event from the udev database, and they
 * disable the disk rules: no blkid, no /dev/disk/by-uuid link.
 */
bool pmctl_dm_udev_flags(struct dm_task *dmt)
{
	uint32_t cookie = 0;

	return dm_task_set_cookie(dmt, &cookie, 0);
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

int pmctl_dm_each_name(int (*fn)(const char *name, void *ctx), void *ctx)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_LIST, NULL);
	struct dm_names *n;
	unsigned int next = 0;
	int r = 0;

	if (!dmt || !pmctl_dm_run(dmt)) {
		if (dmt)
			dm_task_destroy(dmt);
		return -1;
	}
	n = dm_task_get_names(dmt);
	if (n && n->dev) {
		do {
			n = (struct dm_names *)((char *)n + next);
			next = n->next;
			r = fn(n->name, ctx);
		} while (next && !r);
	}
	dm_task_destroy(dmt);
	return r;
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
	if (!ttype || strcmp(ttype, PMCTL_TARGET) || next) {
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

/*
 * DM_DEVICE_REMOVE of @name, then its /dev/mapper node.  0, or an exit code
 * after one error line: EXIT_DEVICE if libdevmapper logged EBUSY.
 */
int pmctl_dm_remove(const char *name)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_REMOVE, name);

	dm_lasterr = 0;
	if (!dmt || !dm_task_run(dmt)) {
		err("%s: cannot remove: %s", name, pmctl_dm_why());
		if (dmt)
			dm_task_destroy(dmt);
		return dm_lasterr == EBUSY ? EXIT_DEVICE : EXIT_DM;
	}
	dm_task_destroy(dmt);
	dm_task_update_nodes();
	return 0;
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
		p = strstr(msg, PMCTL_TARGET ": ");
		if (p) {
			snprintf(out, len, "%s", p + strlen(PMCTL_TARGET ": "));
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
/* Status samples                                                      */

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

/*
 * Writeback rate from @a to @b in bytes/s, @bs the block size.  Shared by
 * status (two samples) and flush (progress, final average).
 */
double pmctl_wb_rate(const struct pmctl_sample *a, const struct pmctl_sample *b,
		     uint32_t bs)
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

/* DM_DEVICE_SUSPEND, RESUME or CLEAR; false with a reason in @why. */
bool pmctl_dm_simple(const char *name, int type, char *why, size_t len)
{
	static const struct { int type; const char *what; } ops[] = {
		{ DM_DEVICE_SUSPEND, "suspend" }, { DM_DEVICE_RESUME, "resume" },
		{ DM_DEVICE_CLEAR, "clear the inactive table" },
	};
	struct dm_task *dmt = pmctl_dm_task(type, name);
	const char *what = "?";
	bool ok;
	size_t i;

	for (i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i].type == type)
			what = ops[i].what;
	ok = dmt && (type != DM_DEVICE_RESUME || pmctl_dm_udev_flags(dmt)) && pmctl_dm_run(dmt);
	if (!ok)
		snprintf(why, len, "cannot %s: %s", what, pmctl_dm_why());
	if (dmt)
		dm_task_destroy(dmt);
	if (ok && type == DM_DEVICE_RESUME)
		dm_task_update_nodes();
	return ok;
}

/* Load a one-target table (inactive); false with a reason in @why. */
bool pmctl_dm_load(const char *name, uint64_t len, const char *type,
		   const char *params, char *why, size_t wlen)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_RELOAD, name);
	int kfd = pmctl_kmsg_open();
	char reason[512];
	bool ok;

	ok = dmt && dm_task_add_target(dmt, 0, len, type, params) && pmctl_dm_run(dmt);
	if (!ok) {
		if (!pmctl_kmsg_reason(kfd, reason, sizeof(reason)))
			snprintf(reason, sizeof(reason), "%s", pmctl_dm_why());
		snprintf(why, wlen, "the kernel refused the %s table '%s': %s", type,
			 params, reason);
	} else if (kfd >= 0) {
		close(kfd);
	}
	if (dmt)
		dm_task_destroy(dmt);
	return ok;
}

/* ------------------------------------------------------------------ */
/* The settings kept on the cache (settings.h)                         */

void pmctl_cache_devpaths(const char *params, const struct pmc_table *t, char *half[2])
{
	char first[64], second[64];

	half[0] = pmctl_devpath(t->cache);
	half[1] = pmctl_table_halves(params, first, second) ? NULL : pmctl_devpath(second);
}

int pmctl_settings_save(const char *name)
{
	char *params = NULL, *half[2], features[PMCTL_SETTINGS_FEATURES];
	struct pmc_table t;
	uint64_t len;
	int i, e, r;

	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);
	if (r)
		return r;
	if (pmc_table_parse(params, &t) ||
	    pmctl_settings_filter(t.features, features, sizeof(features))) {
		err("%s: cannot keep the settings of the table '%s'", name, params);
		free(params);
		return EXIT_DM;
	}
	pmctl_cache_devpaths(params, &t, half);
	free(params);
	if (!half[0]) {
		err("%s: the cache device %s has no node", name, t.cache);
		free(half[1]);
		return EXIT_DEVICE;
	}
	for (i = 0; i < 2 && half[i]; i++) {
		e = pmctl_settings_write(half[i], name, features);
		if (e) {
			err("%s: cannot keep the name and settings on %s: %s", name, half[i],
			    strerror(-e));
			r = EXIT_IO;
			break;
		}
	}
	free(half[0]);
	free(half[1]);
	return r;
}
