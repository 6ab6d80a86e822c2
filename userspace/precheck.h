/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Checks that `create` runs before it loads a table: the devices, and the
 * metadata already on the cache device (through libpmc).  Plain C types
 * only, so that the libdevmapper users (<linux/types.h>) never include
 * the shim headers of the shared metadata code.
 */
#ifndef PMCTL_PRECHECK_H
#define PMCTL_PRECHECK_H

#include <stdbool.h>
#include <stdint.h>

struct create_opts {
	const char *name, *origin, *cache;
	uint32_t block_size;
	int64_t high_wm, low_wm, wb_jobs, max_age;	/* -1: default */
	const char *writeback;
	const char *mirror;	/* the second half, or "-" (--mirror missing) */
	bool degraded;		/* --degraded: start one half alone anyway */
	bool flush_on_suspend, cleaner, format;
	bool data_crc;		/* --data-crc: a new cache keeps data crcs */
	bool force;		/* --format: lose dirty blocks; else re-attach them */
	bool activate;		/* activate: dirty blocks are re-attached */
	const char *settings;	/* activate: the kept tunables, table words */
};

struct create_devs {
	uint64_t origin_sectors;
	uint64_t n_blocks;		/* of a fresh format */
	uint32_t origin_kind;		/* PMC_ORIGIN_ID_* */
	uint8_t origin_uuid[16];
	/* create_check_cache(): a valid cache that the table keeps */
	bool have_uuid;
	uint8_t cache_uuid[16];
	bool kept_dirty;		/* remove --keep-dirty --force marked it */
};

/* 0, or an exit code after one error line on stderr. */
int create_check_devices(const struct create_opts *o, struct create_devs *d);
int create_check_cache(const struct create_opts *o, struct create_devs *d);

#endif /* PMCTL_PRECHECK_H */
