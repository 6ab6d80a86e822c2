// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl check / drain: the cache metadata without the module.
 *
 * Both go through libpmc, that is the module's own pmc_meta_open() and
 * pmc_meta_recover(): the tool and the kernel cannot disagree on what a
 * valid cache, a live record or a dirty block is.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "pmemcachectl.h"
#include "halves.h"
#include "libpmc.h"

static int verdict_exit(int v)
{
	switch (v) {
	case PMC_V_CLEAN:
		return EXIT_OK;
	case PMC_V_DIRTY:
		return EXIT_DIRTY;
	case PMC_V_BLANK:
	case PMC_V_FORMATTING:
		return EXIT_NOCACHE;
	case PMC_V_MISMATCH:
		return EXIT_MISMATCH;
	default:
		return EXIT_CORRUPT;
	}
}

static int open_exit(int r)
{
	return r == -ENOMEM ? EXIT_IO : EXIT_DEVICE;
}

static const char *kind_name(u32 kind)
{
	switch (kind) {
	case PMC_ORIGIN_ID_NONE:
		return "size";
	case PMC_ORIGIN_ID_MD:
		return "md";
	default:
		return "unknown";
	}
}

static json_object *identity_json(const struct pmc_origin_id *o)
{
	json_object *j = json_object_new_object();
	char u[37];

	json_object_object_add(j, "kind", json_object_new_string(kind_name(o->kind)));
	json_object_object_add(j, "sectors", json_object_new_int64((int64_t)o->sectors));
	if (o->kind == PMC_ORIGIN_ID_MD) {
		pmc_format_uuid(o->uuid, u);
		json_object_object_add(j, "uuid", json_object_new_string(u));
	} else {
		json_object_object_add(j, "uuid", NULL);
	}
	return j;
}

static void sb_identity(const struct pmc_super *sb, struct pmc_origin_id *o)
{
	memset(o, 0, sizeof(*o));
	o->sectors = le64_to_cpu(sb->origin_sectors);
	o->kind = le32_to_cpu(sb->origin_id_kind);
	memcpy(o->uuid, sb->origin_uuid, sizeof(o->uuid));
}

static bool verdict_has_cache(int v)
{
	return v == PMC_V_CLEAN || v == PMC_V_DIRTY || v == PMC_V_MISMATCH ||
	       v == PMC_V_DAMAGED;
}

/* The check report, as JSON (also the source of the human output). */
static json_object *check_json(struct pmc_image *im, int v, const char *why,
			       const struct pmc_origin_id *given)
{
	json_object *j = json_object_new_object(), *c;
	struct pmc_origin_id rec;
	char u[37];

	json_object_object_add(j, "device", json_object_new_string(im->dev.path));
	json_object_object_add(j, "verdict", json_object_new_string(pmc_verdict_name(v)));
	json_object_object_add(j, "reason", why ? json_object_new_string(why) : NULL);
	json_object_object_add(j, "device_bytes", json_object_new_int64((int64_t)im->dev.size));
	if (!verdict_has_cache(v))
		return j;
	c = json_object_new_object();
	json_object_object_add(c, "version", json_object_new_int((int)le32_to_cpu(im->sb.version)));
	pmc_format_uuid(im->sb.cache_uuid, u);
	json_object_object_add(c, "cache_uuid", json_object_new_string(u));
	json_object_object_add(c, "block_size", json_object_new_int64(im->meta.block_size));
	json_object_object_add(c, "blocks", json_object_new_int64((int64_t)im->meta.n_blocks));
	json_object_object_add(c, "pmem_bytes", json_object_new_int64((int64_t)im->meta.pmem_bytes));
	json_object_object_add(c, "data_offset", json_object_new_int64((int64_t)im->meta.data_offset));
	json_object_object_add(c, "format_time",
			       json_object_new_int64((int64_t)le64_to_cpu(im->sb.format_time)));
	json_object_object_add(j, "superblock", c);
	sb_identity(&im->sb, &rec);
	json_object_object_add(j, "origin", identity_json(&rec));
	if (given)
		json_object_object_add(j, "origin_given", identity_json(given));
	c = json_object_new_object();
	json_object_object_add(c, "live", json_object_new_int64((int64_t)im->rs.live));
	json_object_object_add(c, "dirty", json_object_new_int64((int64_t)im->rs.dirty));
	json_object_object_add(c, "clean", json_object_new_int64((int64_t)(im->rs.live - im->rs.dirty)));
	json_object_object_add(c, "free", json_object_new_int64((int64_t)im->idx.n_free));
	json_object_object_add(c, "dirty_sectors", json_object_new_int64((int64_t)im->dirty_sectors));
	json_object_object_add(c, "superseded", json_object_new_int64((int64_t)im->rs.superseded));
	json_object_object_add(c, "torn", json_object_new_int64((int64_t)im->rs.torn));
	json_object_object_add(c, "unreadable", json_object_new_int64((int64_t)im->rs.unreadable));
	json_object_object_add(c, "out_of_range", json_object_new_int64((int64_t)im->out_of_range));
	json_object_object_add(c, "past_recorded_size",
			       json_object_new_int64((int64_t)im->past_recorded));
	json_object_object_add(j, "records", c);
	return j;
}

static void print_identity(const char *label, const struct pmc_origin_id *o)
{
	char u[37];

	if (o->kind == PMC_ORIGIN_ID_MD) {
		pmc_format_uuid(o->uuid, u);
		printf("  %-14s md array %s, %llu sectors\n", label, u,
		       (unsigned long long)o->sectors);
	} else {
		printf("  %-14s %llu sectors (size only)\n", label,
		       (unsigned long long)o->sectors);
	}
}

static void check_human(struct pmc_image *im, int v, const char *why,
			const struct pmc_origin_id *given)
{
	struct pmc_origin_id rec;
	char u[37];
	time_t t;
	char tb[64];

	printf("%s: %s%s%s\n", im->dev.path, pmc_verdict_name(v),
	       why ? ": " : "", why ? why : "");
	if (!verdict_has_cache(v))
		return;
	pmc_format_uuid(im->sb.cache_uuid, u);
	printf("  %-14s %s\n", "cache uuid", u);
	t = (time_t)le64_to_cpu(im->sb.format_time);
	strftime(tb, sizeof(tb), "%Y-%m-%d %H:%M:%S UTC", gmtime(&t));
	printf("  %-14s %s\n", "formatted", tb);
	printf("  %-14s %u bytes\n", "block size", im->meta.block_size);
	printf("  %-14s %llu\n", "blocks", (unsigned long long)im->meta.n_blocks);
	sb_identity(&im->sb, &rec);
	print_identity("origin", &rec);
	if (given && v == PMC_V_MISMATCH)
		print_identity("given origin", given);
	printf("  %-14s %llu (%llu sectors)\n", "dirty", (unsigned long long)im->rs.dirty,
	       (unsigned long long)im->dirty_sectors);
	printf("  %-14s %llu\n", "clean", (unsigned long long)(im->rs.live - im->rs.dirty));
	printf("  %-14s %llu\n", "free", (unsigned long long)im->idx.n_free);
	if (im->rs.superseded)
		printf("  %-14s %llu (older copies left by a crash; ignored)\n", "superseded",
		       (unsigned long long)im->rs.superseded);
	if (im->rs.torn)
		printf("  %-14s %llu (records of writes never acknowledged; ignored)\n",
		       "torn", (unsigned long long)im->rs.torn);
	if (im->rs.unreadable)
		printf("  %-14s %llu (media errors: their blocks are lost)\n", "unreadable",
		       (unsigned long long)im->rs.unreadable);
	if (im->out_of_range)
		printf("  %-14s %llu (live records beyond the end of the origin)\n",
		       "out of range", (unsigned long long)im->out_of_range);
	if (im->past_recorded)
		printf("  %-14s %llu (live records past the array's size at format: it has grown?"
		       " give --origin to check them)\n", "past size",
		       (unsigned long long)im->past_recorded);
	if (v == PMC_V_DIRTY)
		printf("%llu dirty blocks are not on the origin yet: load the cache, or run "
		       "'pmemcachectl drain %s ORIGINDEV'\n",
		       (unsigned long long)im->rs.dirty, im->dev.path);
}

enum { OPT_NO_MARK_CLEAN = 256, OPT_MIRROR, OPT_DEGRADED };

/*
 * Open a cache image read-only (@readonly) or not; O_EXCL where it can,
 * and only read-only without it (a live snapshot, with a warning).
 */
static int open_image(struct pmc_image *im, const char *path, bool readonly)
{
	int r = pmc_image_open(im, path, readonly, true);

	if (r == -EBUSY && readonly) {
		r = pmc_image_open(im, path, true, false);
		if (!r)
			warnx_("%s is in use: the metadata may change while it is read", path);
	}
	if (r)
		err("%s", pmc_errmsg);
	return r ? open_exit(r) : 0;
}

int cmd_check(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "origin", required_argument, NULL, 'o' },
		{ "json", no_argument, NULL, 'j' },
		{ "mirror", required_argument, NULL, OPT_MIRROR },
		{ NULL, 0, NULL, 0 },
	};
	struct pmctl_halves hv;
	struct pmc_origin_id oid;
	struct pmc_image im, om;
	struct pmc_dev od;
	const char *origin = NULL, *mirror = NULL, *why;
	bool json = false;
	int c, v, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:j", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			origin = optarg;
			break;
		case 'j':
			json = true;
			break;
		case OPT_MIRROR:
			mirror = optarg;
			break;
		default:
			return bad_option(c, argv, "check");
		}
	}
	if (argc - optind != 1) {
		err("need exactly one PMEMDEV (see pmemcachectl check --help)");
		return EXIT_USAGE;
	}
	if (origin) {
		r = pmc_dev_open(&od, origin, O_RDONLY, false);
		if (r) {
			err("%s", pmc_errmsg);
			return EXIT_DEVICE;
		}
		r = pmc_origin_identify(&od, &oid);
		pmc_dev_close(&od);
		if (r) {
			err("%s", pmc_errmsg);
			return EXIT_DEVICE;
		}
	}
	/* O_EXCL only to learn whether the module holds it: a live snapshot. */
	r = open_image(&im, argv[optind], true);
	if (r)
		return r;
	if (mirror) {
		r = open_image(&om, mirror, true);
		if (r) {
			pmc_image_close(&im);
			return r;
		}
	}
	r = pmctl_halves_read(&hv, &im, mirror ? &om : NULL, false);
	v = r ? 0 : pmc_image_check(&im, origin ? &oid : NULL, &why);
	if (!r && v < 0) {
		err("%s: %s", argv[optind], pmc_errmsg);
		r = EXIT_IO;
	}
	if (r)
		goto out;
	if (json) {
		json_object *j = check_json(&im, v, why, origin ? &oid : NULL);

		json_object_object_add(j, "mirror", pmctl_halves_json(&hv));
		pmctl_print_json(j);
		json_object_put(j);
	} else {
		check_human(&im, v, why, origin ? &oid : NULL);
		pmctl_halves_print(&hv);
	}
	r = verdict_exit(v);
out:
	if (mirror)
		pmc_image_close(&om);
	pmc_image_close(&im);
	return r;
}

/*
 * The half to drain from: PMEMDEV if it is no mirror half; else the one
 * that holds every acknowledged write, as the module would start them
 * (a half alone only if it knows it ran alone, or with --degraded).
 * Writing back a stale half would put old data over newer on the origin.
 */
static int drain_source(struct pmctl_halves *hv, struct pmc_image *im,
			struct pmc_image *om, bool degraded, struct pmc_image **src)
{
	int r = pmctl_halves_read(hv, im, om, degraded);

	if (r)
		return r;
	*src = pmctl_halves_holder(hv);
	if (!*src) {
		err("%s: a half of a mirrored cache: %s%s: nothing written", im->dev.path,
		    hv->plan.why, om ? "" : " (--mirror OTHER gives its other half)");
		return EXIT_DEVICE;
	}
	if (hv->mirrored && *src != im)
		printf("%s: draining from %s, the half that holds every acknowledged write\n",
		       im->dev.path, (*src)->dev.path);
	return 0;
}

/*
 * Halves in sync: each CLEAN goes to both, or the next start of the pair
 * could copy the other half's dirty record back over it.
 */
static int mark_both_halves(struct pmctl_halves *hv, struct pmc_image *src)
{
	struct pmc_image *other = hv->im[src == hv->im[0]];

	if (!hv->mirrored || hv->plan.action != PMC_MIRROR_BOTH)
		return 0;
	if (other->pmem_bytes < src->meta.pmem_bytes) {
		err("%s: smaller than the cache on %s", other->dev.path, src->dev.path);
		return EXIT_DEVICE;
	}
	pmc_meta_use_halves(&src->meta, src->base, other->base);
	return 0;
}

int cmd_drain(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dry-run", no_argument, NULL, 'n' },
		{ "no-mark-clean", no_argument, NULL, OPT_NO_MARK_CLEAN },
		{ "json", no_argument, NULL, 'j' },
		{ "mirror", required_argument, NULL, OPT_MIRROR },
		{ "degraded", no_argument, NULL, OPT_DEGRADED },
		{ NULL, 0, NULL, 0 },
	};
	struct pmc_drain_stats st;
	struct pmc_origin_id oid;
	struct pmctl_halves hv;
	struct pmc_image im, om, *src;
	struct pmc_dev od;
	bool json = false, dry = false, mark = true, degraded = false;
	const char *why, *mirror = NULL;
	int c, v, r, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":nj", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			dry = true;
			break;
		case OPT_NO_MARK_CLEAN:
			mark = false;
			break;
		case 'j':
			json = true;
			break;
		case OPT_MIRROR:
			mirror = optarg;
			break;
		case OPT_DEGRADED:
			degraded = true;
			break;
		default:
			return bad_option(c, argv, "drain");
		}
	}
	if (argc - optind != 2) {
		err("need PMEMDEV and ORIGINDEV (see pmemcachectl drain --help)");
		return EXIT_USAGE;
	}
	/* Exclusive: neither device may be in use by the module or a mount. */
	r = pmc_dev_open(&od, argv[optind + 1], dry ? O_RDONLY : O_RDWR, true);
	if (r) {
		err("%s", pmc_errmsg);
		return EXIT_DEVICE;
	}
	r = pmc_origin_identify(&od, &oid);
	if (r) {
		err("%s", pmc_errmsg);
		pmc_dev_close(&od);
		return EXIT_DEVICE;
	}
	r = pmc_image_open(&im, argv[optind], dry || !mark, true);
	if (r) {
		err("%s", pmc_errmsg);
		pmc_dev_close(&od);
		return open_exit(r);
	}
	if (mirror) {
		r = pmc_image_open(&om, mirror, dry || !mark, true);
		if (r) {
			err("%s", pmc_errmsg);
			pmc_image_close(&im);
			pmc_dev_close(&od);
			return open_exit(r);
		}
	}
	if (!strcmp(im.dev.path, od.path) || (im.dev.is_blk && od.is_blk &&
					       im.dev.rdev == od.rdev)) {
		err("PMEMDEV and ORIGINDEV are the same device");
		rc = EXIT_USAGE;
		goto out;
	}
	rc = drain_source(&hv, &im, mirror ? &om : NULL, degraded, &src);
	if (rc)
		goto out;
	v = pmc_image_check(src, &oid, &why);
	if (v < 0) {
		err("%s: %s", src->dev.path, pmc_errmsg);
		rc = EXIT_IO;
		goto out;
	}
	if (v != PMC_V_CLEAN && v != PMC_V_DIRTY) {
		err("%s: check failed (%s: %s): nothing written",
		    src->dev.path, pmc_verdict_name(v), why);
		rc = verdict_exit(v);
		goto out;
	}
	rc = mark_both_halves(&hv, src);
	if (rc)
		goto out;
	r = pmc_image_drain(src, &od, mark, dry, &st);
	rc = r ? EXIT_IO : EXIT_OK;
	if (json) {
		json_object *j = json_object_new_object();

		json_object_object_add(j, "device", json_object_new_string(src->dev.path));
		json_object_object_add(j, "origin", json_object_new_string(od.path));
		json_object_object_add(j, "dry_run", json_object_new_boolean(dry));
		json_object_object_add(j, "blocks", json_object_new_int64((int64_t)st.blocks));
		json_object_object_add(j, "sectors", json_object_new_int64((int64_t)st.sectors));
		json_object_object_add(j, "bytes", json_object_new_int64((int64_t)st.bytes));
		json_object_object_add(j, "read_errors", json_object_new_int64((int64_t)st.read_errors));
		json_object_object_add(j, "crc_errors", json_object_new_int64((int64_t)st.crc_errors));
		json_object_object_add(j, "marked_clean", json_object_new_int64((int64_t)st.marked_clean));
		json_object_object_add(j, "superseded", json_object_new_int64((int64_t)src->rs.superseded));
		json_object_object_add(j, "torn", json_object_new_int64((int64_t)src->rs.torn));
		json_object_object_add(j, "error", r ? json_object_new_string(pmc_errmsg) : NULL);
		pmctl_print_json(j);
		json_object_put(j);
	} else {
		printf("%s: %s%llu dirty blocks (%llu sectors) %s %s",
		       src->dev.path, dry ? "dry run: " : "",
		       (unsigned long long)st.blocks, (unsigned long long)st.sectors,
		       dry ? "would be written to" : "written to", od.path);
		if (!dry && mark)
			printf(", %llu marked clean", (unsigned long long)st.marked_clean);
		printf("\n");
	}
	if (r)
		err("%s", pmc_errmsg);
out:
	if (mirror)
		pmc_image_close(&om);
	pmc_image_close(&im);
	pmc_dev_close(&od);
	return rc;
}
