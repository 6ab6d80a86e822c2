/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pmemcachectl: device-mapper plumbing (dm.c), shared by the commands on
 * live devices.  Unless said otherwise: 0, or an exit code after one
 * error line.
 */
#ifndef PMCTL_DM_H
#define PMCTL_DM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "status.h"

struct dm_info;
struct dm_task;

int pmctl_dm_setup(void);
/*
 * libdevmapper's log function: errors kept for pmctl_dm_why() (reset
 * here); with pmctl_dm_log_stdout(true), dm_report's lines printed.
 */
void pmctl_dm_log_init(void);
void pmctl_dm_log_stdout(bool on);
/* dm_task_create() with the device name set; NULL on failure. */
struct dm_task *pmctl_dm_task(int type, const char *name);
/* dm_task_run() that keeps its error for pmctl_dm_why()/pmctl_dm_errno(). */
bool pmctl_dm_run(struct dm_task *dmt);
/* DM_UDEV_PRIMARY_SOURCE_FLAG in the event of a resuming task (no udev sync). */
bool pmctl_dm_udev_flags(struct dm_task *dmt);
int pmctl_dm_errno(void);
const char *pmctl_dm_why(void);
/*
 * Call @fn with the name of every device-mapper device, in the order of
 * DM_DEVICE_LIST, until it returns non-zero.  -1 if the list cannot be
 * read (no line; pmctl_dm_why() says why), else 0 or what @fn returned.
 */
int pmctl_dm_each_name(int (*fn)(const char *name, void *ctx), void *ctx);
/* 1: exists (@info filled), 0: no such device, <0: error (no line). */
int pmctl_dm_info(const char *name, struct dm_info *info);
/* The DM UUID of device @name into @out ("" if none): 1, 0 no such device, <0 error. */
int pmctl_dm_uuid_of(const char *name, char *out, size_t len);
/*
 * Status or table (DM_DEVICE_STATUS/TABLE) of a one-target pmemcache
 * device; @params is malloc'ed.
 */
int pmctl_dm_get(int type, const char *name, uint64_t *len, char **params);
/* A target message; 0 or -errno (no line). */
int pmctl_dm_message(const char *name, const char *msg);
/* Remove device @name and its node. */
int pmctl_dm_remove(const char *name);
/* DM_DEVICE_SUSPEND, RESUME or CLEAR; false with a reason in @why. */
bool pmctl_dm_simple(const char *name, int type, char *why, size_t len);
/*
 * Load a one-target table (inactive); false with a reason in @why (the
 * kernel's line if it logged one).
 */
bool pmctl_dm_load(const char *name, uint64_t len, const char *type,
		   const char *params, char *why, size_t wlen);
/* "/dev/md0" for "9:0" (malloc'ed), or NULL. */
char *pmctl_devpath(const char *majmin);
/*
 * The device nodes of the cache of the table @params (@t, parsed from it):
 * half[0] its first device's, half[1] a mirror's second unless that is
 * gone ("-", or no node now); NULL where there is no node.  Free both.
 */
void pmctl_cache_devpaths(const char *params, const struct pmc_table *t, char *half[2]);
/*
 * The target's one-line reason for a refusal logged since
 * pmctl_kmsg_open() (-1 if /dev/kmsg cannot be read); closes @fd.
 */
int pmctl_kmsg_open(void);
bool pmctl_kmsg_reason(int fd, char *out, size_t len);

/* One status sample of a pmemcache device. */
struct pmctl_sample {
	uint64_t len;
	struct pmc_status st;
	struct timespec t;
};

int pmctl_sample(const char *name, struct pmctl_sample *s);
/* Writeback bytes/s from @a to @b; @bs: block size. */
double pmctl_wb_rate(const struct pmctl_sample *a, const struct pmctl_sample *b,
		     uint32_t bs);

#endif /* PMCTL_DM_H */
