// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl replace: a new second half for a mirrored cache that lost
 * one (a dead NVDIMM), copied from the half that holds every write.
 *
 * The live table names the halves; the lost one is "-", or a device that
 * is gone (no /sys/dev/block entry: its namespace was unbound).  The new
 * table names the survivor first and the new device as its mirror.  A
 * dead half still named in the live table is first let go of by a table
 * with "mirror -": device-mapper keeps a held disk's holder link, and a
 * new disk of the same name (the NVDIMM's namespace back) cannot get its
 * own while it stays.  The resume that swaps the new table in copies the
 * survivor's records to the new half (resync R1..R5, docs/format.md),
 * then the device takes I/O again while the module copies the data
 * online (status: resync_left, health mirror_resync); replace waits for
 * that copy with progress on stderr, or returns at once with --no-wait.
 * The module decides what may be copied over (a blank device, or a stale
 * half of this cache) and its one line is what the user sees if it
 * refuses.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "probe.h"
#include "status.h"

/* Is the block device "major:minor" still there? */
static bool half_present(const char *majmin)
{
	char p[PATH_MAX];
	struct stat st;

	if (!strcmp(majmin, "-"))
		return false;
	snprintf(p, sizeof(p), "%s/dev/block/%s", pmctl_sysfs_root(), majmin);
	return !stat(p, &st);
}

/* "major:minor" of the block device @path, or -1 after one line. */
static int majmin_of(const char *path, char *out, size_t len)
{
	struct stat st;

	if (stat(path, &st)) {
		err("%s: %s", path, strerror(errno));
		return -1;
	}
	if (!S_ISBLK(st.st_mode)) {
		err("%s: not a block device", path);
		return -1;
	}
	snprintf(out, len, "%u:%u", major(st.st_rdev), minor(st.st_rdev));
	return 0;
}

/* Load @table, suspend and resume: false after one line. */
static bool swap_table(const char *name, uint64_t len, const char *table)
{
	char why[1024];

	if (!pmctl_dm_load(name, len, PMCTL_TARGET, table, why, sizeof(why))) {
		err("%s: %s: the cache runs on as before", name, why);
		return false;
	}
	if (!pmctl_dm_simple(name, DM_DEVICE_SUSPEND, why, sizeof(why)) ||
	    !pmctl_dm_simple(name, DM_DEVICE_RESUME, why, sizeof(why))) {
		err("%s: %s", name, why);
		return false;
	}
	return true;
}

/*
 * Until the online copy ended (health without mirror_resync), progress on
 * stderr.  Ctrl-C stops the wait, not the copy.
 */
static int wait_copy(const char *name, struct pmctl_sample *sample)
{
	const struct pmc_status *s = &sample->st;
	bool tty = isatty(STDERR_FILENO);
	uint64_t last = UINT64_MAX;
	double shown = 0;
	int r;

	while (!(r = pmctl_sample(name, sample)) && strstr(s->health, "mirror_resync")) {
		if (s->resync_left != last && pmctl_now_s() - shown >= (tty ? 0.25 : 1.0)) {
			fprintf(stderr, "%s: copying: %llu of %llu blocks left%s", name,
				(unsigned long long)s->resync_left,
				(unsigned long long)s->blocks, tty ? "   \r" : "\n");
			last = s->resync_left;
			shown = pmctl_now_s();
		}
		usleep(100000);
	}
	if (tty && last != UINT64_MAX)
		fputc('\n', stderr);
	return r;
}

static int replace(const char *name, const char *dev, bool wait)
{
	char first[64], mirror[64], neu[32], alone[1024], table[1024];
	const char *survivor, *lost;
	struct pmctl_sample sample;
	const struct pmc_status *st = &sample.st;
	uint64_t len;
	char *params;
	double t0;
	int r;

	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);
	if (r)
		return r;
	if (pmctl_table_halves(params, first, mirror)) {
		err("%s: not a mirrored cache (its table has no mirror feature)", name);
		free(params);
		return EXIT_USAGE;
	}
	if (half_present(first) == half_present(mirror)) {
		err("%s: %s: nothing to replace (a half lost while the cache runs has no "
		    "/sys/dev/block entry any more)", name, half_present(first) ?
		    "both halves are present" : "neither half is present");
		free(params);
		return EXIT_DEVICE;
	}
	survivor = half_present(first) ? first : mirror;
	lost = survivor == first ? mirror : first;
	if (majmin_of(dev, neu, sizeof(neu)) ||
	    pmctl_table_set_halves(params, survivor, "-", alone, sizeof(alone)) ||
	    pmctl_table_set_halves(params, survivor, dev, table, sizeof(table))) {
		free(params);
		return EXIT_DEVICE;
	}
	free(params);
	if (!strcmp(neu, survivor)) {
		err("%s: %s is the half that holds the cache", name, dev);
		return EXIT_USAGE;
	}
	printf("%s: replacing the lost half %s by %s: copied from %s while I/O goes on\n",
	       name, lost, dev, survivor);
	fflush(stdout);
	if (strcmp(lost, "-") && !swap_table(name, len, alone))
		return EXIT_DM;
	t0 = pmctl_now_s();
	if (!swap_table(name, len, table))
		return EXIT_DM;
	r = wait ? wait_copy(name, &sample) : pmctl_sample(name, &sample);
	if (r)
		return r;
	if (strstr(st->health, "mirror_resync")) {
		printf("%s: %s is its second half, being copied (%llu of %llu blocks left: "
		       "see status), health %s\n", name, dev,
		       (unsigned long long)st->resync_left, (unsigned long long)st->blocks,
		       st->health);
		return EXIT_OK;
	}
	if (strstr(st->health, "mirror_degraded") || strstr(st->health, "pmem_gone")) {
		err("%s: the copy to %s stopped (see the kernel log): health %s", name, dev,
		    st->health);
		return EXIT_IO;
	}
	printf("%s: %s is its second half again (copied in %.1f s), health %s\n", name, dev,
	       pmctl_now_s() - t0, st->health);
	return EXIT_OK;
}

int cmd_replace(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "cache", required_argument, NULL, 'c' },
		{ "no-wait", no_argument, NULL, 'W' },
		{ NULL, 0, NULL, 0 },
	};
	const char *dev = NULL;
	bool wait = true;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":c:W", opts, NULL)) != -1) {
		switch (c) {
		case 'c':
			dev = optarg;
			break;
		case 'W':
			wait = false;
			break;
		default:
			return bad_option(c, argv, "replace");
		}
	}
	if (argc - optind != 1 || !dev) {
		err("need exactly one NAME and --cache PMEMDEV (see pmemcachectl replace --help)");
		return EXIT_USAGE;
	}
	r = pmctl_dm_setup();
	return r ? r : replace(argv[optind], dev, wait);
}
