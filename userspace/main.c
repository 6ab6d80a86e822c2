// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: administration of dm-pmemcache devices.
 *
 * Thin command layer in the style of ndctl: this file dispatches, the
 * commands live in cmd_create.c (create), cmd_status.c (status, list),
 * cmd_flush.c (flush, remove), cmd_monitor.c (monitor), cmd_activate.c
 * (activate, udev-probe), cmd_detach.c (detach, set) and cmd_check.c
 * (check, drain; through the module's own metadata code, libpmc.c).
 * Those on live devices go through libdevmapper by dm.c; util.c has the
 * error lines and number parsing of all.
 */
#include <stdio.h>
#include <string.h>

#include <libdevmapper.h>

#include "dm.h"
#include "pmemcachectl.h"

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
	const char *usage;
};

static const struct command commands[] = {
	{ "create", cmd_create, "create a cache device over an origin",
	  "usage: pmemcachectl create NAME --origin DEV --cache PMEMDEV [options]\n"
	  "\n"
	  "Check both devices and load a pmemcache table named NAME.\n"
	  "  -o, --origin DEV          device to cache (e.g. /dev/md0)\n"
	  "  -c, --cache PMEMDEV       pmem namespace (e.g. /dev/pmem0)\n"
	  "  -b, --block-size N        cache block size, 512..4096, power of two (4096)\n"
	  "      --high-watermark PCT  start writeback above PCT% dirty (50)\n"
	  "      --low-watermark PCT   stop writeback at PCT% dirty (45)\n"
	  "      --writeback-jobs N    blocks in flight to the origin, 1..65536 (1024)\n"
	  "      --max-age MS          write back blocks dirty for longer than MS\n"
	  "      --writeback MODE      pfn, bounce or auto (auto)\n"
	  "      --flush-on-suspend    write back everything on suspend\n"
	  "      --cleaner             start in cleaner mode\n"
	  "      --format              format the cache even if it holds a cache\n"
	  "      --mirror PMEMDEV      second half of a mirrored cache (\"missing\":\n"
	  "                            start PMEMDEV alone if it ran alone before)\n"
	  "      --degraded            with --mirror: start a half alone anyway\n"
	  "      --data-crc            keep a crc of every block's data (a new cache):\n"
	  "                            a mirror heals a bad copy from the other half\n"
	  "  -f, --force               with --format: discard dirty blocks; without:\n"
	  "                            re-attach dirty blocks (only if nothing wrote\n"
	  "                            the origin since they were cached)\n" },
	{ "activate", cmd_activate, "create the devices of caches found on pmem",
	  "usage: pmemcachectl activate (--all | PMEMDEV) [--name NAME] [--wait SEC] [--dry-run]\n"
	  "\n"
	  "Find caches on pmem namespaces (--all: every /dev/pmem*), find each one's\n"
	  "origin by the identity its superblock recorded (md array UUID and size)\n"
	  "and create its device, DM UUID PMEMCACHE-<cache uuid>, with the name\n"
	  "and tunables kept with the cache (create and set keep them).  A cache that\n"
	  "already has a device is left alone; one whose origin is missing gets one\n"
	  "line and no device.  The halves of a mirrored cache are found by their\n"
	  "mirror info and started together; a half alone only if it knows it ran\n"
	  "alone (else one line, exit 9).\n"
	  "  -a, --all         every pmem namespace\n"
	  "  -n, --name NAME   device name (one PMEMDEV; default the kept name, else\n"
	  "                    pmemcache-<8 hex digits>)\n"
	  "  -w, --wait SEC    wait up to SEC seconds for missing origins (default 0)\n"
	  "  -N, --dry-run     say what would be created; device-mapper is not used\n"
	  "Exit: 0 all active, 9 an origin is missing, 4 kept dirty by remove,\n"
	  "      5 no cache on PMEMDEV, else as create.\n" },
	{ "status", cmd_status, "show the counters of a cache device",
	  "usage: pmemcachectl status NAME [--json] [--interval MS]\n"
	  "       pmemcachectl status NAME (-c | -o FIELDS) [--noheadings] [--separator SEP] [--json]\n"
	  "\n"
	  "Without -c/-o: the counters one per line, or one JSON object.\n"
	  "  -j, --json           one JSON object (stable keys, see pmemcachectl(8));\n"
	  "                       with -c/-o: dm_report's JSON of those columns\n"
	  "  -i, --interval MS    sample twice MS apart to measure the writeback\n"
	  "                       rate (default 200; 0: no rate)\n"
	  "  -c, --columns        columns, as list prints them\n"
	  "  -o, --options FIELDS columns FIELDS (comma list; +FIELDS: the default\n"
	  "                       and FIELDS; -o help lists them)\n"
	  "      --noheadings     no heading line; fields separated by ':'\n"
	  "      --separator SEP  fields separated by SEP, not aligned\n" },
	{ "list", cmd_list, "list the cache devices",
	  "usage: pmemcachectl list [-o FIELDS] [--noheadings] [--separator SEP] [--json]\n"
	  "\n"
	  "One line per pmemcache device, in columns (dm_report, as dmsetup info -c).\n"
	  "  -o, --options FIELDS columns FIELDS (comma list; +FIELDS: the default\n"
	  "                       and FIELDS; -o help lists them)\n"
	  "      --noheadings     no heading line; fields separated by ':'\n"
	  "      --separator SEP  fields separated by SEP, not aligned\n"
	  "  -j, --json           an array of status objects (without rate);\n"
	  "                       with -c/-o: dm_report's JSON of those columns\n"
	  "  -c, --columns        the default columns (for --json)\n" },
	{ "monitor", cmd_monitor, "log the health changes of cache devices",
	  "usage: pmemcachectl monitor [NAME...] [--program PROG] [--oneshot] [--foreground]\n"
	  "\n"
	  "Wait for the dm events of the pmemcache devices NAME (default: all, and\n"
	  "those created later) and log each change of their health (ok, origin_failing,\n"
	  "media_errors, full, pmem_gone, mirror_degraded) to syslog.  Runs as a daemon\n"
	  "unless -f or -1.\n"
	  "SIGINT or SIGTERM stop it (exit 0).\n"
	  "  -p, --program PROG   run PROG EVENT NAME HEALTH on each change; EVENT is\n"
	  "                       degraded, changed, recovered or gone\n"
	  "  -1, --oneshot        exit 0 after the first change (implies -f)\n"
	  "  -f, --foreground     stay in the foreground, log to stderr as well\n"
	  "Exit: 0 stopped, all devices gone or (--oneshot) a change told, 2 a NAME\n"
	  "      is not a pmemcache device, 3 device-mapper failed.\n" },
	{ "flush", cmd_flush, "write back all dirty blocks, with progress",
	  "usage: pmemcachectl flush NAME [--quiet]\n"
	  "\n"
	  "Send the flush message and show blocks left and rate until the cache\n"
	  "is clean.  Ctrl-C stops waiting; the device keeps working.\n"
	  "  -q, --quiet    no progress output\n" },
	{ "remove", cmd_remove, "flush and remove a cache device",
	  "usage: pmemcachectl remove NAME [--keep-dirty --force] [--quiet]\n"
	  "\n"
	  "Flush, remove the device, and clear the superblock of the clean cache\n"
	  "(its blocks go stale once the origin is used alone).\n"
	  "  -k, --keep-dirty   do not flush (needs --force): dirty blocks stay in\n"
	  "                     pmem; the origin is stale until they are re-attached\n"
	  "                     with create --force, and activate refuses the cache\n"
	  "  -f, --force        confirm --keep-dirty\n"
	  "  -q, --quiet        no progress output\n" },
	{ "detach", cmd_detach, "take the cache away from a device in use",
	  "usage: pmemcachectl detach NAME [--timeout SEC] [--quiet]\n"
	  "\n"
	  "While NAME stays open and in use: cleaner mode until no block is dirty,\n"
	  "then a suspend that writes back the rest and a linear table on the\n"
	  "origin in place of the cache.  On failure, timeout or Ctrl-C the\n"
	  "original table and settings are restored.\n"
	  "  -t, --timeout SEC   give up (and restore) if the cache is not clean\n"
	  "                      after SEC seconds (default 0: no limit)\n"
	  "  -q, --quiet         no progress lines on stderr\n" },
	{ "replace", cmd_replace, "give a mirrored cache a new half for a lost one",
	  "usage: pmemcachectl replace NAME --cache PMEMDEV [--no-wait]\n"
	  "\n"
	  "NAME is a mirrored cache that lost a half (\"mirror -\", or a namespace\n"
	  "gone while it ran).  Reload its table with the surviving half first and\n"
	  "PMEMDEV (blank, or the old half back) as its mirror: the module copies\n"
	  "the survivor to PMEMDEV while I/O goes on (set resync_rate to limit it),\n"
	  "and the cache is redundant again when the copy ends.  replace waits for\n"
	  "that, with progress on stderr (Ctrl-C stops the wait, not the copy).\n"
	  "  -c, --cache PMEMDEV   the new half\n"
	  "  -W, --no-wait         return once the copy runs (see status: resync)\n"
	  "Exit: 0 replaced, 1 usage, 2 nothing to replace or no such device,\n"
	  "      3 the kernel refused (its reason printed; the cache runs on),\n"
	  "      8 the copy stopped (a media error on the survivor, or a half lost:\n"
	  "        see the kernel log).\n" },
	{ "set", cmd_set, "change a setting of a running cache device",
	  "usage: pmemcachectl set NAME KEY VALUE\n"
	  "\n"
	  "Send the target the message that sets KEY (the target checks VALUE),\n"
	  "then keep the device's name and tunables with the cache, where activate\n"
	  "finds them at the next boot.\n"
	  "Keys ('-' may stand for '_'):\n" },
	{ "check", cmd_check, "validate cache metadata offline",
	  "usage: pmemcachectl check PMEMDEV [--mirror PMEMDEV2] [--origin DEV] [--json]\n"
	  "\n"
	  "Read the cache metadata from PMEMDEV (device or image file) without the\n"
	  "module, validate the superblock and every record, report dirty blocks\n"
	  "and the origin identity.  Never writes.\n"
	  "A half of a mirrored cache: what its mirror info says, and which half\n"
	  "holds every acknowledged write (as the module would start them).\n"
	  "  -o, --origin DEV   also check that the cache belongs to DEV\n"
	  "      --mirror PMEMDEV2  the other half of a mirrored cache\n"
	  "  -j, --json         one JSON object\n"
	  "Exit: 0 clean, 4 dirty, 5 no cache, 6 corrupt/foreign/damaged,\n"
	  "      7 belongs to another origin, 2 cannot open.\n" },
	{ "udev-probe", cmd_udev_probe, "udev helper: what a device is to a cache",
	  "usage: pmemcachectl udev-probe DEVNAME\n"
	  "\n"
	  "For udev's IMPORT{program}: if DEVNAME (kernel name or /dev path) holds a\n"
	  "cache or is the origin of one, print PMEMCACHE_ROLE=cache|origin,\n"
	  "PMEMCACHE_CACHE_UUID, PMEMCACHE_DM_UUID, PMEMCACHE_KEPT_DIRTY,\n"
	  "SYSTEMD_READY=0 and UDISKS_IGNORE=1, and for a cache whose origin is\n"
	  "present PMEMCACHE_ORIGIN (its kernel name); else nothing.  Always exit 0.\n" },
	{ "drain", cmd_drain, "write dirty blocks to the origin offline",
	  "usage: pmemcachectl drain PMEMDEV ORIGINDEV [--mirror PMEMDEV2] [--degraded]\n"
	  "                          [--dry-run] [--no-mark-clean] [--json]\n"
	  "\n"
	  "Without the module: check PMEMDEV, verify that ORIGINDEV is its origin,\n"
	  "write every dirty block (its valid sectors) to ORIGINDEV, flush it, then\n"
	  "mark the blocks clean in PMEMDEV.  A half of a mirrored cache: from the\n"
	  "half that holds every acknowledged write (both halves marked clean when\n"
	  "in sync); a half alone only if it knows it ran alone, or --degraded.\n"
	  "      --mirror PMEMDEV2  the other half of a mirrored cache\n"
	  "      --degraded       drain a half alone that cannot tell (your word)\n"
	  "  -n, --dry-run        report what would be written, write nothing\n"
	  "      --no-mark-clean  leave PMEMDEV untouched (opened read-only)\n"
	  "  -j, --json           one JSON object\n" },
};

static const struct command *find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

void usage_cmd(const char *cmd, bool to_stderr)
{
	const struct command *c = find(cmd);
	FILE *f = to_stderr ? stderr : stdout;
	size_t i;

	if (!c)
		return;
	fputs(c->usage, f);
	if (c->fn != cmd_set)
		return;
	for (i = 0; i < pmctl_nr_keys; i++)
		fprintf(f, "  %-17s %s\n", pmctl_keys[i].name, pmctl_keys[i].what);
}

/* The tool's, libdevmapper's and the loaded target's versions. */
static int print_versions(void)
{
	char lib[64] = "unknown";
	uint32_t v[3];

	printf("pmemcachectl %s\n", PMCTL_VERSION);
	dm_get_library_version(lib, sizeof(lib));
	printf("libdevmapper %s\n", lib);
	pmctl_dm_log_init();
	switch (pmctl_target_version(v)) {
	case 1:
		printf("target %s %u.%u.%u\n", PMCTL_TARGET, v[0], v[1], v[2]);
		break;
	case 0:
		printf("target %s not loaded\n", PMCTL_TARGET);
		break;
	default:
		printf("target %s unknown (device-mapper not usable)\n", PMCTL_TARGET);
	}
	return EXIT_OK;
}

static void usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: pmemcachectl COMMAND [ARGS]\n\nCommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
	fprintf(f, "\n'pmemcachectl COMMAND --help' shows the options of a command;\n"
		   "see pmemcachectl(8) for exit codes and the JSON keys.\n");
}

int main(int argc, char **argv)
{
	const struct command *c;
	int i;

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return EXIT_OK;
	}
	if (!strcmp(argv[1], "-V") || !strcmp(argv[1], "--version"))
		return print_versions();
	if (!strcmp(argv[1], "help")) {
		if (argc < 3) {
			usage(stdout);
			return EXIT_OK;
		}
		if (!find(argv[2])) {
			err("unknown command '%s' (see pmemcachectl --help)", argv[2]);
			return EXIT_USAGE;
		}
		usage_cmd(argv[2], false);
		return EXIT_OK;
	}
	c = find(argv[1]);
	if (!c) {
		err("unknown command '%s' (see pmemcachectl --help)", argv[1]);
		return EXIT_USAGE;
	}
	for (i = 2; i < argc && strcmp(argv[i], "--"); i++) {
		if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			usage_cmd(c->name, false);
			return EXIT_OK;
		}
	}
	set_err_cmd(c->name);
	return c->fn(argc - 1, argv + 1);
}
