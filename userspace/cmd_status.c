// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl status / list: one device or every one, as the human
 * form, the status JSON object, or dm_report columns (report.c).
 * Both read the same struct dev_item, so every form shows the same data.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "report.h"
#include "status.h"

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
	if (st->mirror_reads)
		printf("  %-18s %llu media errors of one half read from the other\n",
		       "mirror", (unsigned long long)st->mirror_reads);
	if (st->resync_left)
		printf("  %-18s %llu of %llu blocks left to copy to a half\n",
		       "resync", (unsigned long long)st->resync_left,
		       (unsigned long long)st->blocks);
	if (st->crc_errors)
		printf("  %-18s %llu copies did not match their data crc\n",
		       "data crc", (unsigned long long)st->crc_errors);
	printf("  %-18s %llu writeback, %llu media, %llu pfn refused\n", "errors",
	       (unsigned long long)st->wb_errors, (unsigned long long)st->media_errors,
	       (unsigned long long)st->wb_notsupp);
	pmctl_human_bytes(st->ram_bytes_per_block * st->blocks, rb, sizeof(rb));
	printf("  %-18s %s (%.1f bytes per block)\n", "index RAM", rb,
	       st->ram_bytes_per_block);
	free(op);
	free(cp);
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
	pmctl_print_json(j);
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
	    strcmp(type, PMCTL_TARGET) || pmc_status_parse(params, &it->s.st)) {
		err("unexpected status line '%s'", sline ? sline : "");
		return EXIT_DM;
	}
	if (tline && (pmc_split_dm_line(tline, &start, &it->s.len, type, sizeof(type), &params) ||
		      strcmp(type, PMCTL_TARGET) || pmc_table_parse(params, &it->t))) {
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
		it->rate = pmctl_wb_rate(&it->s, &b, it->t.block_size);
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

struct listing {
	struct dev_item **items;
	int count;
};

/*
 * pmctl_dm_each_name(): add device @name if it is a pmemcache one; one
 * that vanishes or changes meanwhile is skipped.  0, or an exit code.
 */
static int list_one(const char *name, void *ctx)
{
	struct listing *l = ctx;
	struct dev_item *it, **bigger;
	struct dm_task *t;
	uint64_t start, length;
	char *ttype = NULL, *p = NULL;
	bool ours;

	it = item_new(name);
	if (!it)
		return EXIT_DM;
	t = pmctl_dm_task(DM_DEVICE_TABLE, name);
	ours = t && dm_task_run(t) &&
	       !dm_get_next_target(t, NULL, &start, &length, &ttype, &p) &&
	       ttype && !strcmp(ttype, PMCTL_TARGET) && p &&
	       !pmc_table_parse(p, &it->t);
	if (t)
		dm_task_destroy(t);
	if (!ours || pmctl_sample(name, &it->s)) {
		free(it);
		return 0;
	}
	it->have_table = true;
	if (pmctl_dm_uuid_of(name, it->uuid, sizeof(it->uuid)) < 0)
		it->uuid[0] = 0;
	bigger = realloc(l->items, (l->count + 1) * sizeof(*l->items));
	if (!bigger) {
		err("out of memory");
		free(it);
		return EXIT_DM;
	}
	l->items = bigger;
	l->items[l->count++] = it;
	return 0;
}

/* Every pmemcache device, in the order of DM_DEVICE_LIST.  0, or an exit code. */
static int list_devices(struct dev_item ***itemsp, int *np)
{
	struct listing l = { NULL, 0 };
	int r = pmctl_dm_each_name(list_one, &l);

	if (r < 0) {
		err("cannot list device-mapper devices: %s", pmctl_dm_why());
		return EXIT_DM;
	}
	*itemsp = l.items;
	*np = l.count;
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
