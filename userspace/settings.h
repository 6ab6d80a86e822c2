/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The name and tunables a cache is activated with, kept on the cache
 * itself (docs/format.md, "Settings"): two 512-byte slots in the unused
 * part of the superblock area, each with a seq and a checksum, so that a
 * cut during an update leaves the previous settings.  The tool's only: the
 * module never reads or writes them.
 */
#ifndef PMCTL_SETTINGS_H
#define PMCTL_SETTINGS_H

#include <stdbool.h>
#include <stdint.h>

#define PMCTL_SETTINGS_OFFSET	2048U	/* two slots of PMCTL_SETTINGS_SLOT */
#define PMCTL_SETTINGS_SLOT	512U
#define PMCTL_SETTINGS_NAME	128
#define PMCTL_SETTINGS_FEATURES	348

struct pmctl_settings {
	bool valid;
	unsigned int slot;			/* of the valid one */
	uint64_t seq;
	char name[PMCTL_SETTINGS_NAME];		/* a device-mapper name */
	char features[PMCTL_SETTINGS_FEATURES];	/* "key value key ...": table words */
};

/* The newer valid slot of the cache @uuid in a 4 KiB superblock area (pure). */
void pmctl_settings_parse(const void *area, const uint8_t uuid[16], struct pmctl_settings *s);
/* A slot's 512 bytes (pure). */
void pmctl_settings_build(void *slot, const uint8_t uuid[16], uint64_t seq, const char *name,
			  const char *features);
/*
 * Write @name and @features into the slot of @path's cache that does not
 * hold its current settings (O_DIRECT; not O_EXCL: the module never
 * touches these bytes, so a live table may hold the device).  0 or -errno
 * (-EUCLEAN: no valid cache there).
 */
int pmctl_settings_write(const char *path, const char *name, const char *features);
/*
 * The tunable words of a table's features (@features: what follows the
 * block size, its count first or not): only the keys `set` and `create`
 * know, with their values; mirror, degraded, format and data_crc are the
 * table's structure, not settings.  0, or -1 if @out is too small.
 */
int pmctl_settings_filter(const char *features, char *out, size_t len);
/*
 * Store the name and the tunables of the live table of device @name on
 * its cache's device(s): what activate brings back.  0, or an exit code
 * after one line.
 */
int pmctl_settings_save(const char *name);

#endif /* PMCTL_SETTINGS_H */
