// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl create, and the create path that activate shares: device
 * checks, the metadata already on the cache device, the table, and the
 * DM UUID PMEMCACHE-<cache uuid> (probe.h).
 *
 * The cache UUID is chosen by the module when it formats the namespace,
 * and it formats on the first resume (docs/dm-pmemcache.rst).  So a
 * device over a valid cache gets its DM UUID at creation; a device over
 * a blank namespace (or with --format) gets it right after the resume
 * that formatted it, from the superblock then on pmem, with a rename
 * (the kernel lets a device without a UUID get one, once).
 */
/* No _GNU_SOURCE: <sys/stat.h> would pull <linux/types.h> (see dm.c). */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "pmemcache_format.h"
#include "precheck.h"
#include "probe.h"

#define DM_NAME_MAX	128	/* DM_NAME_MAX of <linux/dm-ioctl.h> */

/* Feature ranges of target.c pmc_parse_features(): refused here first. */
#define WM_MAX		100
#define JOBS_MAX	65536
#define MAX_AGE_MAX	86400000
#define DEF_HIGH_WM	50
#define DEF_LOW_WM	45

int pmctl_target_version(uint32_t version[3])
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_LIST_VERSIONS, NULL);
	struct dm_versions *v, *last;
	int found = 0;

	if (!dmt || !dm_task_run(dmt)) {
		if (dmt)
			dm_task_destroy(dmt);
		return -1;
	}
	v = dm_task_get_versions(dmt);
	do {
		last = v;
		if (!strcmp(v->name, PMCTL_TARGET)) {
			memcpy(version, v->version, sizeof(v->version));
			found = 1;
		}
		v = (struct dm_versions *)((char *)v + v->next);
	} while (last != v);
	dm_task_destroy(dmt);
	return found;
}

bool pmctl_target_registered(void)
{
	uint32_t version[3];

	/* cannot tell: let the create speak */
	return pmctl_target_version(version) != 0;
}

static int parse_feature(const char *opt, const char *arg, uint32_t min,
			 uint32_t max, int64_t *out)
{
	uint32_t v;

	if (parse_u32_range(arg, min, max, &v)) {
		err("--%s: '%s' is not a number from %u to %u", opt, arg, min, max);
		return EXIT_USAGE;
	}
	*out = v;
	return 0;
}

enum {
	OPT_HIGH = 256, OPT_LOW, OPT_JOBS, OPT_AGE, OPT_WB, OPT_FOS,
	OPT_CLEANER, OPT_FORMAT, OPT_MIRROR, OPT_DEGRADED, OPT_DATA_CRC,
};

static int build_table(const struct create_opts *o, uint64_t sectors,
		       char *buf, size_t len)
{
	char feat[512] = "";
	int nf = 0, n = 0;

#define FEAT(...) do { n += snprintf(feat + n, sizeof(feat) - n, __VA_ARGS__); } while (0)
	if (o->high_wm >= 0) {
		FEAT(" high_watermark %lld", (long long)o->high_wm);
		nf += 2;
	}
	if (o->low_wm >= 0) {
		FEAT(" low_watermark %lld", (long long)o->low_wm);
		nf += 2;
	}
	if (o->wb_jobs >= 0) {
		FEAT(" writeback_jobs %lld", (long long)o->wb_jobs);
		nf += 2;
	}
	if (o->max_age >= 0) {
		FEAT(" max_age %lld", (long long)o->max_age);
		nf += 2;
	}
	if (o->writeback) {
		FEAT(" writeback %s", o->writeback);
		nf += 2;
	}
	if (o->flush_on_suspend) {
		FEAT(" flush_on_suspend");
		nf++;
	}
	if (o->cleaner) {
		FEAT(" cleaner");
		nf++;
	}
	if (o->format) {
		FEAT(" format");
		nf++;
	}
	if (o->mirror) {
		FEAT(" mirror %s", o->mirror);
		nf += 2;
	}
	if (o->degraded) {
		FEAT(" degraded");
		nf++;
	}
	if (o->data_crc) {
		FEAT(" data_crc");
		nf++;
	}
	if (o->settings && *o->settings) {
		const char *p;

		FEAT(" %s", o->settings);
		for (nf++, p = o->settings; (p = strchr(p, ' ')); p++)
			nf++;
	}
#undef FEAT
	if (nf)
		n = snprintf(buf, len, "%s %s %u %d%s", o->origin, o->cache,
			     o->block_size, nf, feat);
	else
		n = snprintf(buf, len, "%s %s %u", o->origin, o->cache, o->block_size);
	(void)sectors;
	return n < (int)len ? 0 : -1;
}

bool pmctl_valid_dm_name(const char *name)
{
	return *name && strlen(name) < DM_NAME_MAX && !strchr(name, '/') &&
	       strcmp(name, ".") && strcmp(name, "..") && strcmp(name, "control");
}

/* DM_DEVICE_REMOVE of a device this run created; false if it stays. */
static bool undo_create(const char *name)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_REMOVE, name);
	bool ok = dmt && pmctl_dm_run(dmt);

	if (dmt)
		dm_task_destroy(dmt);
	dm_task_update_nodes();
	return ok;
}

/*
 * A device created over a blank namespace (or with --format): its DM UUID
 * from the superblock the module has just written.  0, or an exit code
 * after one line (and the device removed again if it can be).
 */
static int set_uuid_after_format(const struct create_opts *o)
{
	struct pmctl_sb sb;
	struct dm_task *dmt;
	char uuid[PMCTL_DM_UUID_LEN + 1];
	int r;

	r = pmctl_sb_read(o->cache, &sb);
	if (r || sb.state != PMCTL_SB_CACHE) {
		err("%s: cannot read the superblock the module wrote on %s (%s)%s", o->name,
		    o->cache, r ? strerror(-r) : "not a valid cache",
		    undo_create(o->name) ? ": device removed" : "");
		return EXIT_IO;
	}
	pmctl_dm_uuid(sb.cache_uuid, uuid, sizeof(uuid));
	dmt = pmctl_dm_task(DM_DEVICE_RENAME, o->name);
	if (!dmt || !dm_task_set_newuuid(dmt, uuid) || !pmctl_dm_run(dmt)) {
		err("%s: cannot set the DM UUID %s: %s%s", o->name, uuid, pmctl_dm_why(),
		    undo_create(o->name) ? ": device removed" : "");
		if (dmt)
			dm_task_destroy(dmt);
		return EXIT_DM;
	}
	dm_task_destroy(dmt);
	dm_task_update_nodes();
	return 0;
}

int pmctl_create_run(const struct create_opts *o)
{
	struct create_devs dev;
	struct dm_task *dmt;
	struct dm_info info;
	char table[1024], reason[512], uuid[PMCTL_DM_UUID_LEN + 1] = "";
	int r, kfd;

	/* Devices: exist, block devices, sizes, not the same, pmem. */
	r = create_check_devices(o, &dev);
	if (r)
		return r;

	r = pmctl_dm_setup();
	if (r)
		return r;
	r = pmctl_dm_info(o->name, &info);
	if (r > 0) {
		err("%s: name already in use by a device-mapper device", o->name);
		return EXIT_DEVICE;
	}
	if (r < 0) {
		err("cannot query device-mapper: %s", pmctl_dm_why());
		return EXIT_DM;
	}
	/* The metadata first: what it says matters even without the module. */
	r = create_check_cache(o, &dev);
	if (r)
		return r;
	/* activate lets the kernel load the module (dm asks for dm-pmemcache) */
	if (!o->activate && !pmctl_target_registered()) {
		err("the pmemcache target is not loaded (modprobe dm-pmemcache)");
		return EXIT_DM;
	}
	if (build_table(o, dev.origin_sectors, table, sizeof(table))) {
		err("device paths too long");
		return EXIT_USAGE;
	}
	if (dev.have_uuid)
		pmctl_dm_uuid(dev.cache_uuid, uuid, sizeof(uuid));

	kfd = pmctl_kmsg_open();
	dmt = pmctl_dm_task(DM_DEVICE_CREATE, o->name);
	if (!dmt || (uuid[0] && !dm_task_set_uuid(dmt, uuid)) ||
	    !dm_task_add_target(dmt, 0, dev.origin_sectors, PMCTL_TARGET, table) ||
	    !dm_task_set_add_node(dmt, DM_ADD_NODE_ON_CREATE) || !pmctl_dm_udev_flags(dmt)) {
		err("cannot build the create request");
		if (dmt)
			dm_task_destroy(dmt);
		if (kfd >= 0)
			close(kfd);
		return EXIT_DM;
	}
	if (!pmctl_dm_run(dmt)) {
		if (pmctl_kmsg_reason(kfd, reason, sizeof(reason)))
			err("%s: the kernel refused the table: %s", o->name, reason);
		else
			err("%s: the kernel refused the table: %s", o->name, pmctl_dm_why());
		dm_task_destroy(dmt);
		dm_task_update_nodes();
		return pmctl_dm_errno() == EBUSY ? EXIT_DEVICE : EXIT_DM;
	}
	if (kfd >= 0)
		close(kfd);
	dm_task_destroy(dmt);
	dm_task_update_nodes();
	if (!uuid[0]) {
		r = set_uuid_after_format(o);
		if (r)
			return r;
	}
	if (!dm_mknodes(o->name))
		warnx_("could not create /dev/mapper/%s", o->name);
	if (dev.kept_dirty) {
		/* Re-attached on purpose (--force): the mark has done its job. */
		r = pmctl_mark_write(o->cache, dev.cache_uuid, false, 0);
		if (r)
			warnx_("%s: cannot clear the kept-dirty mark: %s", o->cache,
			       strerror(-r));
	}
	printf("%s: created /dev/mapper/%s (%s cached by %s%s%s, %llu blocks of %u bytes)\n",
	       o->name, o->name, o->origin, o->cache,
	       !o->mirror ? "" : strcmp(o->mirror, "-") ? " mirrored on " : " alone",
	       o->mirror && strcmp(o->mirror, "-") ? o->mirror : "",
	       (unsigned long long)dev.n_blocks, o->block_size);
	/* activate brings back what it found; create keeps what it made */
	return o->activate ? EXIT_OK : pmctl_settings_save(o->name);
}

int cmd_create(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "origin", required_argument, NULL, 'o' },
		{ "cache", required_argument, NULL, 'c' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "high-watermark", required_argument, NULL, OPT_HIGH },
		{ "low-watermark", required_argument, NULL, OPT_LOW },
		{ "writeback-jobs", required_argument, NULL, OPT_JOBS },
		{ "max-age", required_argument, NULL, OPT_AGE },
		{ "writeback", required_argument, NULL, OPT_WB },
		{ "flush-on-suspend", no_argument, NULL, OPT_FOS },
		{ "cleaner", no_argument, NULL, OPT_CLEANER },
		{ "format", no_argument, NULL, OPT_FORMAT },
		{ "mirror", required_argument, NULL, OPT_MIRROR },
		{ "degraded", no_argument, NULL, OPT_DEGRADED },
		{ "data-crc", no_argument, NULL, OPT_DATA_CRC },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	struct create_opts o = {
		.block_size = 4096, .high_wm = -1, .low_wm = -1, .wb_jobs = -1,
		.max_age = -1,
	};
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:c:b:f", opts, NULL)) != -1) {
		r = 0;
		switch (c) {
		case 'o':
			o.origin = optarg;
			break;
		case 'c':
			o.cache = optarg;
			break;
		case 'b':
			if (parse_u32_range(optarg, PMC_MIN_BLOCK_SIZE, PMC_MAX_BLOCK_SIZE,
					    &o.block_size) ||
			    (o.block_size & (o.block_size - 1))) {
				err("--block-size: '%s' is not a power of two from %u to %u",
				    optarg, PMC_MIN_BLOCK_SIZE, PMC_MAX_BLOCK_SIZE);
				return EXIT_USAGE;
			}
			break;
		case OPT_HIGH:
			r = parse_feature("high-watermark", optarg, 0, WM_MAX, &o.high_wm);
			break;
		case OPT_LOW:
			r = parse_feature("low-watermark", optarg, 0, WM_MAX, &o.low_wm);
			break;
		case OPT_JOBS:
			r = parse_feature("writeback-jobs", optarg, 1, JOBS_MAX, &o.wb_jobs);
			break;
		case OPT_AGE:
			r = parse_feature("max-age", optarg, 0, MAX_AGE_MAX, &o.max_age);
			break;
		case OPT_WB:
			if (strcmp(optarg, "pfn") && strcmp(optarg, "bounce") &&
			    strcmp(optarg, "auto")) {
				err("--writeback: '%s' is not pfn, bounce or auto", optarg);
				return EXIT_USAGE;
			}
			o.writeback = optarg;
			break;
		case OPT_FOS:
			o.flush_on_suspend = true;
			break;
		case OPT_CLEANER:
			o.cleaner = true;
			break;
		case OPT_FORMAT:
			o.format = true;
			break;
		case OPT_MIRROR:
			/* mdadm's word for a member that is not there */
			o.mirror = strcmp(optarg, "missing") ? optarg : "-";
			break;
		case OPT_DEGRADED:
			o.degraded = true;
			break;
		case OPT_DATA_CRC:
			o.data_crc = true;
			break;
		case 'f':
			o.force = true;
			break;
		default:
			return bad_option(c, argv, "create");
		}
		if (r)
			return r;
	}
	if (argc - optind != 1) {
		err("need exactly one NAME (see pmemcachectl create --help)");
		return EXIT_USAGE;
	}
	o.name = argv[optind];
	if (!o.origin || !o.cache) {
		err("--origin and --cache are required");
		return EXIT_USAGE;
	}
	if (!pmctl_valid_dm_name(o.name)) {
		err("'%s' is not a valid device-mapper name", o.name);
		return EXIT_USAGE;
	}
	if (o.degraded && !o.mirror) {
		err("--degraded is only for a mirrored cache (--mirror)");
		return EXIT_USAGE;
	}
	if (o.format && o.mirror && !strcmp(o.mirror, "-")) {
		err("--format needs both halves, not --mirror missing");
		return EXIT_USAGE;
	}
	if ((o.high_wm >= 0 ? o.high_wm : DEF_HIGH_WM) <
	    (o.low_wm >= 0 ? o.low_wm : DEF_LOW_WM)) {
		err("low watermark (%lld) is above high watermark (%lld)",
		    (long long)(o.low_wm >= 0 ? o.low_wm : DEF_LOW_WM),
		    (long long)(o.high_wm >= 0 ? o.high_wm : DEF_HIGH_WM));
		return EXIT_USAGE;
	}
	return pmctl_create_run(&o);
}
