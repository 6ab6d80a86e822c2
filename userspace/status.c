// SPDX-License-Identifier: GPL-2.0
/* pmemcachectl: status/table line parsing and the status JSON object. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

int pmc_split_dm_line(const char *line, uint64_t *start, uint64_t *len,
		      char *type, size_t type_len, const char **params)
{
	char t[64];
	int n = 0;

	if (sscanf(line, "%" SCNu64 " %" SCNu64 " %63s %n", start, len, t, &n) != 3 || !n)
		return -1;
	snprintf(type, type_len, "%s", t);
	*params = line + n;
	return 0;
}

int pmc_status_parse(const char *params, struct pmc_status *s)
{
	char ram[32], route[16], mode[16], health[64], extra[2];
	unsigned long long int v[19], w[13];
	char *end;
	int n;

	memset(s, 0, sizeof(*s));
	n = sscanf(params,
		   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
		   "%llu %llu %llu %llu %llu %llu %llu %31s %15s %15s "
		   "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %63s %1s",
		   &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8],
		   &v[9], &v[10], &v[11], &v[12], &v[13], &v[14], &v[15], &v[16],
		   &v[17], &v[18], ram, route, mode,
		   &w[0], &w[1], &w[2], &w[3], &w[4], &w[5], &w[6], &w[7], &w[8],
		   &w[9], &w[10], &w[11], &w[12], health, extra);
	/* Exactly 36 fields: a changed layout must fail, not misparse. */
	if (n != 36 || strspn(health, "abcdefghijklmnopqrstuvwxyz_,") != strlen(health))
		return -1;
	snprintf(s->health, sizeof(s->health), "%s", health);
	s->wb_rate = w[0];
	s->wb_target = w[1];
	s->stripe_blocks = w[2];
	s->wb_full_stripes = w[3];
	s->wb_flushes = w[4];
	s->full_waits = w[5];
	s->full_around = w[6];
	s->full_through = w[7];
	s->full_timeouts = w[8];
	s->bad_slots = w[9];
	s->mirror_reads = w[10];
	s->resync_left = w[11];
	s->crc_errors = w[12];
	s->blocks = v[0];
	s->dirty = v[1];
	s->free = v[2];
	s->clean = v[3];
	s->read_hits = v[4];
	s->read_partial = v[5];
	s->read_misses = v[6];
	s->write_hits = v[7];
	s->write_new = v[8];
	s->write_around = v[9];
	s->discards = v[10];
	s->flushes = v[11];
	s->wb_pfn_blocks = v[12];
	s->wb_pfn_bytes = v[13];
	s->wb_bounce_blocks = v[14];
	s->wb_bounce_bytes = v[15];
	s->wb_errors = v[16];
	s->wb_notsupp = v[17];
	s->media_errors = v[18];
	s->ram_bytes_per_block = strtod(ram, &end);
	if (*end || s->ram_bytes_per_block < 0)
		return -1;
	if (strcmp(route, "pfn") && strcmp(route, "bounce"))
		return -1;
	snprintf(s->route, sizeof(s->route), "%s", route);
	if (!strcmp(mode, "cleaner"))
		s->cleaner = true;
	else if (strcmp(mode, "-"))
		return -1;
	return 0;
}

int pmc_table_parse(const char *params, struct pmc_table *t)
{
	unsigned int bs;
	int n = 0;

	memset(t, 0, sizeof(*t));
	if (sscanf(params, "%63s %63s %u%n", t->origin, t->cache, &bs, &n) != 3)
		return -1;
	t->block_size = bs;
	params += n;
	while (*params == ' ')
		params++;
	snprintf(t->features, sizeof(t->features), "%s", params);
	return 0;
}

#define ADD(o, k, v) json_object_object_add(o, k, v)
#define U64(x) json_object_new_int64((int64_t)(x))

json_object *pmc_status_json(const char *name, const char *dm_uuid,
			     uint64_t len_sectors, const struct pmc_status *s,
			     const struct pmc_table *t, const char *origin_path,
			     const char *cache_path, double rate_bps)
{
	json_object *j = json_object_new_object();
	uint64_t bs = t ? t->block_size : 0;

	ADD(j, "schema", json_object_new_int(PMCTL_STATUS_SCHEMA));
	ADD(j, "name", json_object_new_string(name));
	ADD(j, "dm_uuid", dm_uuid && *dm_uuid ? json_object_new_string(dm_uuid) : NULL);
	ADD(j, "size_sectors", U64(len_sectors));
	ADD(j, "origin_dev", t ? json_object_new_string(t->origin) : NULL);
	ADD(j, "origin", origin_path ? json_object_new_string(origin_path) : NULL);
	ADD(j, "cache_dev", t ? json_object_new_string(t->cache) : NULL);
	ADD(j, "cache", cache_path ? json_object_new_string(cache_path) : NULL);
	ADD(j, "block_size", t ? U64(bs) : NULL);
	ADD(j, "features", t ? json_object_new_string(t->features) : NULL);
	ADD(j, "blocks", U64(s->blocks));
	ADD(j, "dirty", U64(s->dirty));
	ADD(j, "free", U64(s->free));
	ADD(j, "clean", U64(s->clean));
	ADD(j, "dirty_fraction", json_object_new_double(pmc_status_dirty_fraction(s)));
	ADD(j, "dirty_bytes", t ? U64(s->dirty * bs) : NULL);
	ADD(j, "read_hits", U64(s->read_hits));
	ADD(j, "read_partial", U64(s->read_partial));
	ADD(j, "read_misses", U64(s->read_misses));
	ADD(j, "write_hits", U64(s->write_hits));
	ADD(j, "write_new", U64(s->write_new));
	ADD(j, "write_around", U64(s->write_around));
	ADD(j, "discards", U64(s->discards));
	ADD(j, "flushes", U64(s->flushes));
	ADD(j, "wb_pfn_blocks", U64(s->wb_pfn_blocks));
	ADD(j, "wb_pfn_bytes", U64(s->wb_pfn_bytes));
	ADD(j, "wb_bounce_blocks", U64(s->wb_bounce_blocks));
	ADD(j, "wb_bounce_bytes", U64(s->wb_bounce_bytes));
	ADD(j, "writeback_blocks", U64(pmc_status_wb_blocks(s)));
	ADD(j, "writeback_bytes", U64(pmc_status_wb_bytes(s)));
	ADD(j, "writeback_rate_bytes_per_sec",
	    rate_bps < 0 ? NULL : json_object_new_double(rate_bps));
	ADD(j, "wb_errors", U64(s->wb_errors));
	ADD(j, "wb_notsupp", U64(s->wb_notsupp));
	ADD(j, "media_errors", U64(s->media_errors));
	ADD(j, "errors", U64(pmc_status_errors(s)));
	ADD(j, "ram_bytes_per_block", json_object_new_double(s->ram_bytes_per_block));
	ADD(j, "ram_bytes", U64(pmc_status_ram_bytes(s)));
	ADD(j, "route", json_object_new_string(s->route));
	ADD(j, "wb_rate_blocks_per_sec", U64(s->wb_rate));
	ADD(j, "wb_target_dirty", U64(s->wb_target));
	ADD(j, "stripe_blocks", U64(s->stripe_blocks));
	ADD(j, "wb_full_stripes", U64(s->wb_full_stripes));
	ADD(j, "wb_flushes", U64(s->wb_flushes));
	ADD(j, "full_waits", U64(s->full_waits));
	ADD(j, "full_around", U64(s->full_around));
	ADD(j, "full_through", U64(s->full_through));
	ADD(j, "full_timeouts", U64(s->full_timeouts));
	ADD(j, "bad_slots", U64(s->bad_slots));
	ADD(j, "mirror_reads", U64(s->mirror_reads));
	ADD(j, "resync_left", U64(s->resync_left));
	ADD(j, "crc_errors", U64(s->crc_errors));
	ADD(j, "mode", json_object_new_string(s->cleaner ? "cleaner" : "normal"));
	ADD(j, "health", json_object_new_string(s->health));
	return j;
}
