/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The pmemcache status and table lines (docs/dm-pmemcache.rst, order of
 * target.c pmc_status()) and the stable JSON object built from them.
 * No libdevmapper here: unit-tested on captured lines.
 */
#ifndef PMCTL_STATUS_H
#define PMCTL_STATUS_H

#include <stdbool.h>
#include <stdint.h>
#include <json-c/json.h>

/* Version of the JSON object: bumped only on incompatible changes. */
#define PMCTL_STATUS_SCHEMA	1

struct pmc_status {
	uint64_t blocks, dirty, free, clean;
	uint64_t read_hits, read_partial, read_misses;
	uint64_t write_hits, write_new, write_around, discards, flushes;
	uint64_t wb_pfn_blocks, wb_pfn_bytes, wb_bounce_blocks, wb_bounce_bytes;
	uint64_t wb_errors, wb_notsupp, media_errors;
	double ram_bytes_per_block;
	char route[16];		/* "pfn" | "bounce" */
	bool cleaner;
	uint64_t wb_rate;	/* blocks/s between the watermarks; 0: no limit */
	uint64_t wb_target;	/* dirty blocks the rate controller aims at */
	uint64_t stripe_blocks, wb_full_stripes, wb_flushes;
	uint64_t full_waits, full_around, full_through, full_timeouts;
	uint64_t bad_slots;
	uint64_t mirror_reads;	/* media error on one half, read from the other */
	uint64_t resync_left;	/* blocks a mirror's online copy has yet to look at */
	uint64_t crc_errors;	/* data_crc: copies whose data did not match */
	char health[64];	/* "ok" or conditions, comma separated */
};

struct pmc_table {
	char origin[64];	/* "major:minor" as the kernel prints it */
	char cache[64];
	uint32_t block_size;
	char features[256];	/* non-default features, as in the table */
};

/* INFO params (after "<start> <len> pmemcache"): 0 or -1. */
int pmc_status_parse(const char *params, struct pmc_status *s);
/* TABLE params: 0 or -1. */
int pmc_table_parse(const char *params, struct pmc_table *t);

/* Split "<start> <len> <type> <params>" (a dmsetup line): 0 or -1. */
int pmc_split_dm_line(const char *line, uint64_t *start, uint64_t *len,
		      char *type, size_t type_len, const char **params);

/*
 * The status object.  @rate_bps < 0: not measured (JSON null).  @t,
 * @origin_path and @cache_path may be NULL; @dm_uuid NULL or "" (a device
 * without a DM UUID) is null.
 */
json_object *pmc_status_json(const char *name, const char *dm_uuid,
			     uint64_t len_sectors, const struct pmc_status *s,
			     const struct pmc_table *t, const char *origin_path,
			     const char *cache_path, double rate_bps);

/* Values derived from the status line, for the JSON object and columns. */
static inline uint64_t pmc_status_wb_bytes(const struct pmc_status *s)
{
	return s->wb_pfn_bytes + s->wb_bounce_bytes;
}

static inline uint64_t pmc_status_wb_blocks(const struct pmc_status *s)
{
	return s->wb_pfn_blocks + s->wb_bounce_blocks;
}

static inline uint64_t pmc_status_errors(const struct pmc_status *s)
{
	return s->wb_errors + s->media_errors;
}

/* The target rounds bytes per block up to 0.1: an upper bound. */
static inline uint64_t pmc_status_ram_bytes(const struct pmc_status *s)
{
	return (uint64_t)(s->ram_bytes_per_block * (double)s->blocks + 0.5);
}

static inline double pmc_status_dirty_fraction(const struct pmc_status *s)
{
	return s->blocks ? (double)s->dirty / (double)s->blocks : 0.0;
}

#endif /* PMCTL_STATUS_H */
