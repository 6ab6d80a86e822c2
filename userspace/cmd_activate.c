// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl activate / udev-probe: bring caches back by identity.
 *
 * activate reads the superblock area of pmem namespaces (probe.c), finds
 * the origin whose identity the superblock recorded (md array UUID and
 * size), and creates the device through the create path (cmd_create.c),
 * with the DM UUID PMEMCACHE-<cache uuid>.  It is idempotent: a cache that
 * already has a device (that DM UUID, or a pmemcache table on its pmem)
 * is left alone.  A cache whose origin is missing gets one line and no
 * device.  A cache that `remove --keep-dirty --force` left is never
 * re-attached here: its origin may have been used since.
 *
 * udev-probe prints, for udev's IMPORT{program}, what a device is to a
 * cache (udev/69-pmemcache.rules).
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "pmemcache_format.h"	/* __le types from <linux/types.h> here */
#include "precheck.h"
#include "probe.h"
#include "status.h"

#define MAX_PMEM	256
#define MAX_DM		1024
#define WAIT_STEP_MS	250

/* A device-mapper device as activate needs it. */
struct dmdev {
	char name[128];
	char uuid[130];
	char type[32];
	char cache[64];		/* pmemcache: the cache's "major:minor" */
};

struct activate {
	const char *name;	/* --name */
	uint32_t wait_s;	/* --wait */
	bool dry_run;
	double deadline;	/* of --wait, for every cache of this run */
	struct dmdev *dm;
	int ndm;
};

struct scan {
	struct dmdev *out;
	int max, count;
};

/* pmctl_dm_each_name(): note device @name, its DM UUID and target type. */
static int scan_one(const char *name, void *ctx)
{
	struct scan *sc = ctx;
	struct dmdev *d = &sc->out[sc->count];
	struct dm_task *t;
	uint64_t start, length;
	char *ttype = NULL, *p = NULL;
	struct pmc_table tb;

	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", name);
	if (pmctl_dm_uuid_of(name, d->uuid, sizeof(d->uuid)) <= 0)
		return 0;
	t = pmctl_dm_task(DM_DEVICE_TABLE, name);
	if (t && pmctl_dm_run(t)) {
		dm_get_next_target(t, NULL, &start, &length, &ttype, &p);
		snprintf(d->type, sizeof(d->type), "%s", ttype ? ttype : "");
		if (ttype && !strcmp(ttype, PMCTL_TARGET) && p &&
		    !pmc_table_parse(p, &tb))
			snprintf(d->cache, sizeof(d->cache), "%s", tb.cache);
	}
	if (t)
		dm_task_destroy(t);
	/* Full: stop rather than write past @out. */
	return ++sc->count == sc->max;
}

/* Every dm device with its DM UUID and the type of its one target. */
static int dm_scan(struct dmdev *out, int max)
{
	struct scan sc = { .out = out, .max = max };

	if (pmctl_dm_each_name(scan_one, &sc) < 0)
		return -1;
	return sc.count;
}

/*
 * Is the cache on @pm already a device?  1: yes, a pmemcache device
 * (named in @name); 0: no; -1: its DM UUID is taken by a device that is
 * not a pmemcache one (a detached device, whose superblock should have
 * been cleared).
 */
static int find_active(const struct activate *a, const struct pmctl_blk *pm,
		       const char *uuid, const struct dmdev **found)
{
	char majmin[32];
	int i;

	snprintf(majmin, sizeof(majmin), "%u:%u", pm->major, pm->minor);
	for (i = 0; i < a->ndm; i++) {
		const struct dmdev *d = &a->dm[i];

		*found = d;
		if (!strcmp(d->uuid, uuid))
			return strcmp(d->type, PMCTL_TARGET) ? -1 : 1;
		if (!strcmp(d->type, PMCTL_TARGET) && !strcmp(d->cache, majmin))
			return 1;
	}
	*found = NULL;
	return 0;
}

static int refresh_dm(struct activate *a)
{
	if (a->dry_run)
		return 0;
	a->ndm = dm_scan(a->dm, MAX_DM);
	if (a->ndm < 0) {
		err("cannot list device-mapper devices: %s", pmctl_dm_why());
		return EXIT_DM;
	}
	return 0;
}

/*
 * The other half of the mirrored cache whose half @pm is, waiting for it
 * until the deadline of --wait: 1 with *@partner set, or 0.
 */
static int find_partner(const struct activate *a, const struct pmctl_blk *pm,
			const struct pmctl_sb *sb, struct pmctl_blk *partner)
{
	static struct pmctl_blk list[MAX_PMEM];
	int i, n;

	for (;;) {
		n = pmctl_blk_list("pmem", list, MAX_PMEM);
		for (i = 0; i < n; i++) {
			if (strcmp(list[i].name, pm->name) &&
			    pmctl_is_partner_of(sb, &list[i])) {
				*partner = list[i];
				return 1;
			}
		}
		if (pmctl_now_s() >= a->deadline)
			return 0;
		pmctl_sleep_ms(WAIT_STEP_MS);
	}
}

/*
 * The second half of the table for a half of a mirrored cache: its
 * partner, or "-" for a half that knows it ran alone (it is current, and
 * the module starts it alone).  Anything else waits for the partner:
 * as mdadm does not start a degraded array at boot, a half that cannot
 * tell whether its partner ran alone since is never started alone here.
 * NULL after one line.
 */
static const char *mirror_of(const struct activate *a, const struct pmctl_blk *pm,
			     const struct pmctl_sb *sb, struct pmctl_blk *partner)
{
	char cu[37];

	if (find_partner(a, pm, sb, partner))
		return partner->path;
	if (sb->mirror.partner_stale && !sb->mirror.resyncing)
		return "-";
	pmctl_uuid_str(sb->cache_uuid, cu);
	err("%s: cache %s: a half of a mirrored cache whose other half is not present%s: "
	    "not activated (create --mirror missing --degraded starts it alone)", pm->path,
	    cu, a->wait_s ? " after --wait" : "");
	return NULL;
}

static int activate_one(struct activate *a, const struct pmctl_blk *pm,
			const struct pmctl_sb *sb)
{
	char uuid[PMCTL_DM_UUID_LEN + 1], name[128], ident[160], cu[37];
	const struct dmdev *d;
	struct pmctl_blk org[4], partner;
	const char *mirror = NULL;
	struct create_opts o;
	struct dm_info info;
	int n, r;

	pmctl_dm_uuid(sb->cache_uuid, uuid, sizeof(uuid));
	pmctl_uuid_str(sb->cache_uuid, cu);
	pmctl_identity_str(sb, ident, sizeof(ident));
	r = find_active(a, pm, uuid, &d);
	if (r > 0) {
		printf("%s: cache %s already active as /dev/mapper/%s%s%s\n", pm->path, cu,
		       d->name, d->uuid[0] ? " " : " (no DM UUID)", d->uuid);
		return EXIT_OK;
	}
	if (r < 0) {
		err("%s: cache %s: its DM UUID %s is taken by %s, a '%s' device (detached?): "
		    "not activated", pm->path, cu, uuid, d->name, d->type);
		return EXIT_DEVICE;
	}
	if (sb->kept_dirty) {
		time_t t = (time_t)sb->kept_time;
		char when[64];

		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
		err("%s: cache %s was removed with --keep-dirty --force (%s): its origin may "
		    "have been written since; not activated (create --force re-attaches it)",
		    pm->path, cu, when);
		return EXIT_DIRTY;
	}
	if (sb->origin_kind != PMC_ORIGIN_ID_MD) {
		err("%s: cache %s records its origin by %s: activate cannot tell which "
		    "device it is (use create)", pm->path, cu, ident);
		return EXIT_DEVICE;
	}
	for (;;) {
		n = pmctl_find_origin(sb, org, 4);
		if (n || pmctl_now_s() >= a->deadline)
			break;
		pmctl_sleep_ms(WAIT_STEP_MS);
	}
	if (!n) {
		err("%s: cache %s: origin (%s) not present%s; nothing created", pm->path,
		    cu, ident, a->wait_s ? " after --wait" : "");
		return EXIT_NOORIGIN;
	}
	if (n > 1) {
		err("%s: cache %s: %d devices have the origin's identity (%s, %s): nothing "
		    "created", pm->path, cu, n, org[0].path, org[1].path);
		return EXIT_DEVICE;
	}
	if (sb->mirror.valid) {
		mirror = mirror_of(a, pm, sb, &partner);
		if (!mirror)
			return EXIT_NOORIGIN;
	}
	/* The name create gave it, unless --name says otherwise or it is taken. */
	if (a->name)
		snprintf(name, sizeof(name), "%s", a->name);
	else if (sb->settings.valid && pmctl_valid_dm_name(sb->settings.name) &&
		 (a->dry_run || pmctl_dm_info(sb->settings.name, &info) == 0))
		snprintf(name, sizeof(name), "%s", sb->settings.name);
	else
		pmctl_default_name(sb->cache_uuid, name, sizeof(name));
	if (!a->name && sb->settings.valid && strcmp(name, sb->settings.name))
		warnx_("%s: cache %s: its name %s is taken: activated as %s", pm->path, cu,
		       sb->settings.name, name);
	if (a->dry_run) {
		printf("%s: would create /dev/mapper/%s over %s (DM UUID %s, block size %u%s%s)\n",
		       pm->path, name, org[0].path, uuid, sb->block_size,
		       mirror ? ", mirror " : "", mirror ? mirror : "");
		return EXIT_OK;
	}
	memset(&o, 0, sizeof(o));
	o.name = name;
	o.origin = org[0].path;
	o.cache = pm->path;
	o.mirror = mirror;
	o.block_size = sb->block_size;
	o.high_wm = o.low_wm = o.wb_jobs = o.max_age = -1;
	o.activate = true;
	o.settings = sb->settings.valid ? sb->settings.features : NULL;
	r = pmctl_create_run(&o);
	if (r && !refresh_dm(a) && find_active(a, pm, uuid, &d) > 0) {
		/* Another activate (the other device's udev event) was first. */
		printf("%s: cache %s already active as /dev/mapper/%s %s\n", pm->path, cu,
		       d->name, d->uuid);
		return EXIT_OK;
	}
	return r;
}

/* The pmem device named on the command line, as sysfs knows it. */
static int blk_of_path(const char *path, struct pmctl_blk *b)
{
	char real[PATH_MAX];
	const char *base;

	if (!realpath(path, real))
		snprintf(real, sizeof(real), "%s", path);
	base = strrchr(real, '/') ? strrchr(real, '/') + 1 : real;
	if (pmctl_blk_get(base, b)) {
		err("%s: not a block device in %s/class/block", path, pmctl_sysfs_root());
		return EXIT_DEVICE;
	}
	return 0;
}

static int merge(int rc, int r)
{
	/* a missing origin is the least of the failures */
	return r && (rc == EXIT_OK || rc == EXIT_NOORIGIN) ? r : rc;
}

int cmd_activate(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "name", required_argument, NULL, 'n' },
		{ "wait", required_argument, NULL, 'w' },
		{ "dry-run", no_argument, NULL, 'N' },
		{ NULL, 0, NULL, 0 },
	};
	static struct pmctl_blk pm[MAX_PMEM];
	static struct dmdev dm[MAX_DM];
	static uint8_t pairs[MAX_PMEM][16];	/* mirrored caches done here */
	struct activate a = { .dm = dm };
	struct pmctl_sb sb;
	bool all = false;
	int c, i, j, n, r, rc = EXIT_OK, found = 0, npairs = 0;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":an:w:N", opts, NULL)) != -1) {
		switch (c) {
		case 'a':
			all = true;
			break;
		case 'n':
			a.name = optarg;
			break;
		case 'w':
			if (parse_u32_range(optarg, 0, 86400, &a.wait_s)) {
				err("--wait: '%s' is not a number of seconds from 0 to 86400",
				    optarg);
				return EXIT_USAGE;
			}
			break;
		case 'N':
			a.dry_run = true;
			break;
		default:
			return bad_option(c, argv, "activate");
		}
	}
	if (all == (argc - optind == 1) || argc - optind > 1) {
		err("need --all or exactly one PMEMDEV (see pmemcachectl activate --help)");
		return EXIT_USAGE;
	}
	if (a.name && (all || !pmctl_valid_dm_name(a.name))) {
		err(all ? "--name needs one PMEMDEV, not --all" :
		    "'%s' is not a valid device-mapper name", a.name);
		return EXIT_USAGE;
	}
	if (all) {
		n = pmctl_blk_list("pmem", pm, MAX_PMEM);
		if (n < 0) {
			err("cannot list %s/class/block", pmctl_sysfs_root());
			return EXIT_DEVICE;
		}
	} else {
		r = blk_of_path(argv[optind], &pm[0]);
		if (r)
			return r;
		n = 1;
	}
	if (!a.dry_run) {
		r = pmctl_dm_setup();
		if (!r)
			r = refresh_dm(&a);
		if (r)
			return r;
	}
	a.deadline = pmctl_now_s() + a.wait_s;
	for (i = 0; i < n; i++) {
		r = pmctl_sb_read(pm[i].path, &sb);
		if (r) {
			if (!all) {
				err("%s: %s", pm[i].path, strerror(-r));
				return EXIT_DEVICE;
			}
			continue;	/* e.g. a namespace being reconfigured */
		}
		if (sb.mirror.valid && sb.mirror.resyncing && all)
			continue;	/* its partner, the holder, activates it */
		if (sb.state == PMCTL_SB_BAD) {
			err("%s: a pmemcache superblock that does not validate: not activated "
			    "(see pmemcachectl check)", pm[i].path);
			rc = merge(rc, EXIT_CORRUPT);
			continue;
		}
		if (sb.state != PMCTL_SB_CACHE) {
			if (!all) {
				err("%s: no cache on this device", pm[i].path);
				return EXIT_NOCACHE;
			}
			continue;
		}
		if (sb.mirror.valid) {
			/* one run per mirrored cache: its first half found */
			for (j = 0; j < npairs && memcmp(pairs[j], sb.cache_uuid, 16); j++)
				;
			if (j < npairs)
				continue;
			memcpy(pairs[npairs++], sb.cache_uuid, 16);
		}
		found++;
		rc = merge(rc, activate_one(&a, &pm[i], &sb));
	}
	if (all && !found)
		printf("no cache on %d pmem devices\n", n);
	return rc;
}

int cmd_udev_probe(int argc, char **argv)
{
	static struct pmctl_blk pm[MAX_PMEM];
	char uuid[PMCTL_DM_UUID_LEN + 1], cu[37];
	const char *arg, *root = pmctl_dev_root(), *role = NULL;
	struct pmctl_blk b, org[2];
	struct pmctl_sb sb;
	int c, i, n;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", NULL, NULL)) != -1)
		return bad_option(c, argv, "udev-probe");
	if (argc - optind != 1) {
		err("need exactly one DEVNAME (see pmemcachectl udev-probe --help)");
		return EXIT_USAGE;
	}
	arg = argv[optind];
	if (!strncmp(arg, root, strlen(root)) && arg[strlen(root)] == '/')
		arg += strlen(root) + 1;
	/* Whatever goes wrong, udev gets no keys and the device stays as it is. */
	if (pmctl_blk_get(arg, &b))
		return EXIT_OK;
	if (!pmctl_sb_read(b.path, &sb) && sb.state == PMCTL_SB_CACHE) {
		role = "cache";
	} else {
		n = pmctl_blk_list("pmem", pm, MAX_PMEM);
		for (i = 0; i < n && !role; i++) {
			if (!strcmp(pm[i].name, b.name) || pmctl_sb_read(pm[i].path, &sb) ||
			    sb.state != PMCTL_SB_CACHE)
				continue;
			if (pmctl_is_origin_of(&b, &sb))
				role = "origin";
		}
	}
	if (!role)
		return EXIT_OK;
	pmctl_uuid_str(sb.cache_uuid, cu);
	pmctl_dm_uuid(sb.cache_uuid, uuid, sizeof(uuid));
	printf("PMEMCACHE_ROLE=%s\nPMEMCACHE_CACHE_UUID=%s\nPMEMCACHE_DM_UUID=%s\n"
	       "PMEMCACHE_KEPT_DIRTY=%d\nSYSTEMD_READY=0\nUDISKS_IGNORE=1\n",
	       role, cu, uuid, sb.kept_dirty ? 1 : 0);
	/*
	 * The origin's kernel name, if it is here (one device only): when
	 * the origin came first, udev saw it before this cache and did not
	 * mark it; the rule sends it a change event to mark it now.
	 */
	if (!strcmp(role, "cache") && sb.origin_kind == PMC_ORIGIN_ID_MD &&
	    pmctl_find_origin(&sb, org, 2) == 1)
		printf("PMEMCACHE_ORIGIN=%s\n", org[0].name);
	return EXIT_OK;
}
