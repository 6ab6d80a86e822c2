// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: status and list as columns, through dm_report.
 *
 * The field ids are the keys of the status JSON object (status.c), so a
 * script can move between `--json` and `-o` without a dictionary; the
 * values come from the same parsed struct pmc_status.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "report.h"

#define OBJ	1	/* the one object type: a cache device */

static int rep_u64(struct dm_report *rh, struct dm_pool *mem,
		   struct dm_report_field *f, const void *data, void *priv)
{
	(void)mem;
	(void)priv;
	return dm_report_field_uint64(rh, f, data);
}

/* A const char * member. */
static int rep_str(struct dm_report *rh, struct dm_pool *mem,
		   struct dm_report_field *f, const void *data, void *priv)
{
	(void)mem;
	(void)priv;
	return dm_report_field_string(rh, f, data);
}

/* A char array member (struct pmc_status's route and health). */
static int rep_chars(struct dm_report *rh, struct dm_pool *mem,
		     struct dm_report_field *f, const void *data, void *priv)
{
	const char *s = data;

	(void)mem;
	(void)priv;
	return dm_report_field_string(rh, f, &s);
}

static int rep_pct(struct dm_report *rh, struct dm_pool *mem,
		   struct dm_report_field *f, const void *data, void *priv)
{
	(void)mem;
	(void)priv;
	return dm_report_field_percent(rh, f, data);
}

static void *row_of(void *obj)
{
	return obj;
}

static const struct dm_report_object_type types[] = {
	{ OBJ, "Cache device", "", row_of },
	{ 0, NULL, NULL, NULL },
};

#define R(m)	offsetof(struct pmctl_row, m)
#define S(m)	offsetof(struct pmctl_row, st.m)
#define F(fn, type, align, off, id, head, desc) \
	{ OBJ, DM_REPORT_FIELD_TYPE_##type | DM_REPORT_FIELD_ALIGN_##align, \
	  off, sizeof(head) - 1, id, head, fn, desc }
#define NUM(m, id, head, desc)	F(rep_u64, NUMBER, RIGHT, m, id, head, desc)
#define STR(m, id, head, desc)	F(rep_str, STRING, LEFT, R(m), id, head, desc)

static const struct dm_report_field_type fields[] = {
	STR(name, "name", "NAME", "Device name."),
	STR(dm_uuid, "dm_uuid", "DM_UUID", "DM UUID, PMEMCACHE-<cache uuid>; empty if none."),
	NUM(R(size_sectors), "size_sectors", "SECTORS", "Device length in sectors."),
	STR(origin, "origin", "ORIGIN", "Origin device (/dev path, else major:minor)."),
	STR(origin_dev, "origin_dev", "ORIGIN_DEV", "Origin major:minor, as in the table."),
	STR(cache, "cache", "CACHE", "Pmem device (/dev path, else major:minor)."),
	STR(cache_dev, "cache_dev", "CACHE_DEV", "Pmem device major:minor, as in the table."),
	NUM(R(block_size), "block_size", "BS", "Cache block size in bytes."),
	STR(features, "features", "FEATURES", "Non-default features of the table."),
	STR(mode, "mode", "MODE", "normal or cleaner."),
	F(rep_chars, STRING, LEFT, S(health), "health", "HEALTH",
	  "ok, or the conditions that hold, comma separated."),
	F(rep_chars, STRING, LEFT, S(route), "route", "ROUTE", "Writeback route: pfn or bounce."),
	NUM(S(blocks), "blocks", "BLOCKS", "Cache blocks."),
	NUM(S(dirty), "dirty", "DIRTY", "Blocks newer than the origin."),
	NUM(S(free), "free", "FREE", "Unused blocks."),
	NUM(S(clean), "clean", "CLEAN", "Blocks equal to the origin."),
	F(rep_pct, PERCENT, RIGHT, R(dirty_percent), "dirty_percent", "DIRTY%",
	  "Dirty blocks in percent of the blocks."),
	STR(dirty_fraction, "dirty_fraction", "DIRTY_FRAC", "dirty / blocks."),
	NUM(R(dirty_bytes), "dirty_bytes", "DIRTY_BYTES", "dirty * block_size."),
	NUM(S(read_hits), "read_hits", "RD_HITS", "Reads served from pmem."),
	NUM(S(read_partial), "read_partial", "RD_PARTIAL", "Reads served partly from pmem."),
	NUM(S(read_misses), "read_misses", "RD_MISSES", "Reads served from the origin."),
	NUM(S(write_hits), "write_hits", "WR_HITS", "Writes to cached blocks."),
	NUM(S(write_new), "write_new", "WR_NEW", "Writes that cached a new block."),
	NUM(S(write_around), "write_around", "WR_AROUND", "Writes sent around the cache."),
	NUM(S(discards), "discards", "DISCARDS", "Discard bios."),
	NUM(S(flushes), "flushes", "FLUSHES", "Flush bios."),
	NUM(S(wb_pfn_blocks), "wb_pfn_blocks", "WB_PFN_BLOCKS", "Blocks written back page-less."),
	NUM(S(wb_pfn_bytes), "wb_pfn_bytes", "WB_PFN_BYTES", "Bytes written back page-less."),
	NUM(S(wb_bounce_blocks), "wb_bounce_blocks", "WB_BOUNCE_BLOCKS",
	    "Blocks written back through bounce pages."),
	NUM(S(wb_bounce_bytes), "wb_bounce_bytes", "WB_BOUNCE_BYTES",
	    "Bytes written back through bounce pages."),
	NUM(R(writeback_blocks), "writeback_blocks", "WB_BLOCKS", "Blocks written back."),
	NUM(R(writeback_bytes), "writeback_bytes", "WB_BYTES", "Bytes written back."),
	STR(rate, "writeback_rate_bytes_per_sec", "WB_RATE",
	    "Bytes written back per second (status --interval); empty if not measured."),
	NUM(S(wb_errors), "wb_errors", "WB_ERRORS", "Failed origin writes."),
	NUM(S(wb_notsupp), "wb_notsupp", "WB_NOTSUPP", "Page-less bios the origin refused."),
	NUM(S(media_errors), "media_errors", "MEDIA_ERRORS", "Pmem reads that hit poison."),
	NUM(R(errors), "errors", "ERRORS", "wb_errors + media_errors."),
	STR(ram_per_block, "ram_bytes_per_block", "RAM/BLOCK", "Index DRAM bytes per block."),
	NUM(R(ram_bytes), "ram_bytes", "RAM_BYTES", "Index DRAM in bytes (upper bound)."),
	NUM(S(wb_rate), "wb_rate_blocks_per_sec", "WB_LIMIT",
	    "Writeback rate allowed between the watermarks, blocks/s (0: no limit)."),
	NUM(S(wb_target), "wb_target_dirty", "WB_TARGET",
	    "Dirty blocks the rate controller aims at."),
	NUM(S(stripe_blocks), "stripe_blocks", "STRIPE", "Blocks of a stripe writeback gathers."),
	NUM(S(wb_full_stripes), "wb_full_stripes", "FULL_STRIPES", "Whole stripes written back."),
	NUM(S(wb_flushes), "wb_flushes", "WB_FLUSHES", "Origin flushes of writeback."),
	NUM(S(full_waits), "full_waits", "FULL_WAITS", "Writes that waited in a full cache."),
	NUM(S(full_around), "full_around", "FULL_AROUND", "Of those, sent around the cache."),
	NUM(S(full_through), "full_through", "FULL_THROUGH", "Of those, written through it."),
	NUM(S(full_timeouts), "full_timeouts", "FULL_TIMEOUTS",
	    "Of those, waited all of full_wait."),
	NUM(S(bad_slots), "bad_slots", "BAD_SLOTS", "Blocks out of use (pmem badblocks)."),
	NUM(S(mirror_reads), "mirror_reads", "MIRROR_READS",
	    "Media errors on one half served from the other."),
	NUM(S(resync_left), "resync_left", "RESYNC_LEFT",
	    "Blocks the online copy to a mirror half has yet to look at."),
	NUM(S(crc_errors), "crc_errors", "CRC_ERRORS",
	    "Copies whose data did not match its data_crc."),
	{ 0, 0, 0, 0, "", "", NULL, NULL },
};

void pmctl_row_fill(struct pmctl_row *r, const char *name, const char *dm_uuid,
		    uint64_t len, const struct pmc_status *st,
		    const struct pmc_table *t, const char *origin_path,
		    const char *cache_path, double rate_bps)
{
	const struct pmc_status *s = &r->st;

	memset(r, 0, sizeof(*r));
	r->st = *st;
	r->name = name;
	r->dm_uuid = dm_uuid ? dm_uuid : "";
	r->origin_dev = t->origin;
	r->cache_dev = t->cache;
	r->origin = origin_path ? origin_path : t->origin;
	r->cache = cache_path ? cache_path : t->cache;
	r->features = t->features;
	r->mode = s->cleaner ? "cleaner" : "normal";
	r->size_sectors = len;
	r->block_size = t->block_size;
	r->dirty_bytes = s->dirty * t->block_size;
	r->writeback_blocks = pmc_status_wb_blocks(s);
	r->writeback_bytes = pmc_status_wb_bytes(s);
	r->errors = pmc_status_errors(s);
	r->ram_bytes = pmc_status_ram_bytes(s);
	r->dirty_percent = dm_make_percent(s->dirty, s->blocks);
	snprintf(r->buf[0], sizeof(r->buf[0]), "%.1f", s->ram_bytes_per_block);
	r->ram_per_block = r->buf[0];
	snprintf(r->buf[1], sizeof(r->buf[1]), "%.6f", pmc_status_dirty_fraction(s));
	r->dirty_fraction = r->buf[1];
	if (rate_bps >= 0)
		snprintf(r->buf[2], sizeof(r->buf[2]), "%.0f", rate_bps);
	r->rate = r->buf[2];
}

bool pmctl_report_help(const char *f)
{
	size_t i;

	if (!f || (strcmp(f, "help") && strcmp(f, "?")))
		return false;
	printf("Fields of status -o and list -o (default %s):\n", PMCTL_REPORT_DEFAULT);
	for (i = 0; fields[i].report_fn; i++)
		printf("  %-29s %s\n", fields[i].id, fields[i].desc);
	return true;
}

struct pmctl_report {
	struct dm_report *rh;
	struct dm_report_group *group;	/* --json */
	char *fields;
};

struct pmctl_report *pmctl_report_init(const struct pmctl_report_opts *o, int *rc)
{
	const char *f = o->fields ? o->fields : PMCTL_REPORT_DEFAULT;
	uint32_t type = OBJ, flags = DM_REPORT_OUTPUT_BUFFERED;
	bool aligned = true, headings = true;
	const char *sep = " ";
	struct pmctl_report *rep = calloc(1, sizeof(*rep));
	size_t len;

	*rc = EXIT_DM;
	if (!rep) {
		err("out of memory");
		return NULL;
	}
	/* As dmsetup: --noheadings alone means "a:b:c" lines for scripts. */
	if (o->noheadings) {
		sep = ":";
		aligned = false;
		headings = false;
	}
	if (o->separator) {
		sep = o->separator;
		aligned = false;
	}
	if (aligned)
		flags |= DM_REPORT_OUTPUT_ALIGNED;
	if (headings)
		flags |= DM_REPORT_OUTPUT_HEADINGS;
	/* "-o +f,g": the default columns, then f and g (dmsetup, lvs). */
	len = strlen(PMCTL_REPORT_DEFAULT) + strlen(f) + 2;
	rep->fields = malloc(len);
	if (!rep->fields) {
		err("out of memory");
		free(rep);
		return NULL;
	}
	if (f[0] == '+')
		snprintf(rep->fields, len, "%s,%s", PMCTL_REPORT_DEFAULT, f + 1);
	else
		snprintf(rep->fields, len, "%s", f);
	pmctl_dm_log_init();
	rep->rh = dm_report_init(&type, types, fields, rep->fields, sep, flags, "", NULL);
	if (!rep->rh) {
		/* libdevmapper said "Unrecognised field: x" (or "no fields"). */
		err("-o %s: %s (see -o help)", f, pmctl_dm_why());
		*rc = EXIT_USAGE;
		goto fail;
	}
	if (o->json) {
		rep->group = dm_report_group_create(DM_REPORT_GROUP_JSON, NULL);
		if (!rep->group ||
		    !dm_report_group_push(rep->group, rep->rh, (void *)"pmemcache")) {
			err("cannot start the JSON report: %s", pmctl_dm_why());
			goto fail;
		}
	}
	*rc = 0;
	return rep;
fail:
	if (rep->group)
		dm_report_group_destroy(rep->group);
	if (rep->rh)
		dm_report_free(rep->rh);
	free(rep->fields);
	free(rep);
	return NULL;
}

int pmctl_report_row(struct pmctl_report *rep, struct pmctl_row *r)
{
	if (dm_report_object(rep->rh, r))
		return 0;
	err("%s: cannot report: %s", r->name, pmctl_dm_why());
	return EXIT_DM;
}

int pmctl_report_end(struct pmctl_report *rep)
{
	int ok;

	/* dm_report prints its lines through the log function. */
	pmctl_dm_log_stdout(true);
	if (rep->group)
		ok = dm_report_group_destroy(rep->group);	/* outputs */
	else
		ok = dm_report_output(rep->rh);
	pmctl_dm_log_stdout(false);
	fflush(stdout);
	dm_report_free(rep->rh);
	free(rep->fields);
	free(rep);
	if (!ok) {
		err("cannot print the report: %s", pmctl_dm_why());
		return EXIT_DM;
	}
	return 0;
}
