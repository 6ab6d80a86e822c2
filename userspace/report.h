/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Column output of status and list through libdevmapper's dm_report, as
 * `dmsetup info -c -o` and lvs(8) print theirs: one field table (report.c)
 * whose ids are the keys of the status JSON object, `-o FIELDS`,
 * `--noheadings`, `--separator` and dm_report's own JSON format.
 */
#ifndef PMCTL_REPORT_H
#define PMCTL_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "status.h"

/* The default columns of list (and of status -c). */
#define PMCTL_REPORT_DEFAULT \
	"name,blocks,dirty,dirty_percent,mode,health,origin,cache,dm_uuid"

/* One device: what the kernel said, and what is derived from it. */
struct pmctl_row {
	const char *name, *dm_uuid;	/* dm_uuid "" if none */
	const char *origin, *cache;	/* /dev paths, else major:minor */
	const char *origin_dev, *cache_dev, *features, *mode;
	const char *ram_per_block;	/* "12.1" */
	const char *dirty_fraction;	/* "0.0015" */
	const char *rate;		/* bytes/s, "" if not measured */
	uint64_t size_sectors, block_size;
	uint64_t dirty_bytes, writeback_blocks, writeback_bytes, errors, ram_bytes;
	int32_t dirty_percent;		/* dm_percent_t */
	struct pmc_status st;
	char buf[3][32];		/* the three strings above */
};

/*
 * Fill @r from a parsed status and table.  @origin_path, @cache_path:
 * NULL for the major:minor of the table.  @rate_bps < 0: not measured.
 * The strings are not copied: they must outlive the report.
 */
void pmctl_row_fill(struct pmctl_row *r, const char *name, const char *dm_uuid,
		    uint64_t len, const struct pmc_status *st,
		    const struct pmc_table *t, const char *origin_path,
		    const char *cache_path, double rate_bps);

struct pmctl_report_opts {
	const char *fields;	/* -o; "+f,g": the default and f,g */
	const char *separator;	/* --separator, or NULL */
	bool noheadings, json;
};

struct pmctl_report;

/*
 * A report of the columns @o asks for.  NULL after one error line (an
 * unknown field: EXIT_USAGE in *rc, else EXIT_DM).
 */
struct pmctl_report *pmctl_report_init(const struct pmctl_report_opts *o, int *rc);
/* Add a row (kept until pmctl_report_end: @r must live until then). */
int pmctl_report_row(struct pmctl_report *rep, struct pmctl_row *r);
/* Print every row and free the report: 0 or an exit code. */
int pmctl_report_end(struct pmctl_report *rep);

/* Whether -o asks for the field list; then print it (stdout). */
bool pmctl_report_help(const char *fields);

#endif /* PMCTL_REPORT_H */
