// SPDX-License-Identifier: GPL-2.0
/*
 * Health of a cache: a few conditions an administrator must hear about.
 * Each change of one of them logs one rate-limited kernel line and
 * raises a dm event (dm_table_event(), so `dmsetup wait` and dmeventd
 * wake up); status shows them as its last word ("ok" when none holds).
 *
 *   origin_failing  the last write of ours to the origin failed (dirty
 *                   blocks are kept and retried); ends at the next one
 *                   that succeeds
 *   media_errors    a pmem read hit poison; stays until the table is
 *                   loaded again
 *   full            a write waited all of full_wait for a free block;
 *                   ends when a block is freed
 *   pmem_gone       the pmem namespace was unbound under the table: all
 *                   I/O fails with -EIO, pmem keeps what it held; stays
 *                   until the table is loaded again
 */
#include <linux/dm-ioctl.h>
#include <linux/ratelimit.h>

#include "pmemcache.h"

static const char *const pmc_health_names[PMC_H_NR] = {
	[PMC_H_ORIGIN] = "origin_failing",
	[PMC_H_MEDIA] = "media_errors",
	[PMC_H_FULL] = "full",
	[PMC_H_PMEM_GONE] = "pmem_gone",
	[PMC_H_MIRROR_DEGRADED] = "mirror_degraded",
	[PMC_H_MIRROR_RESYNC] = "mirror_resync",
};

static void pmc_health_log(struct pmemcache *pc, const char *name,
			   unsigned int bit, bool begins)
{
	if (!begins) {
		/* As rate-limited as the lines that say it began. */
		DMINFO_LIMIT("%s: %s ended", name, pmc_health_names[bit]);
		return;
	}
	switch (bit) {
	case PMC_H_ORIGIN:
		DMERR_LIMIT("%s: origin write failed (%d): dirty blocks kept, retried every second",
			    name, READ_ONCE(pc->origin_err));
		break;
	case PMC_H_MEDIA:
		DMERR_LIMIT("%s: pmem media error: reads of the block fail with -EIO",
			    name);
		break;
	case PMC_H_FULL:
		DMWARN_LIMIT("%s: cache full: writes wait full_wait, then go around or through it",
			     name);
		break;
	case PMC_H_PMEM_GONE:
		DMERR("%s: pmem namespace gone: I/O fails with -EIO, pmem keeps its dirty blocks",
		      name);
		break;
	case PMC_H_MIRROR_DEGRADED:
		DMWARN("%s: mirror degraded: runs on one half; load the table with both to resync",
		       name);
		break;
	case PMC_H_MIRROR_RESYNC:
		DMINFO("%s: mirror resync: copying to a half online; redundant when it ends",
		       name);
		break;
	}
}

/*
 * Tell what changed since the last run: the kernel log and a dm event.
 * Here, not where the condition is seen: that may be bio completion
 * context, and the device name and dm_table_event() take locks that
 * sleep.  A condition that began and ended before this ran is not told.
 */
static void pmc_event_work(struct work_struct *work)
{
	struct pmemcache *pc = container_of(work, struct pmemcache, event_work);
	struct mapped_device *md = dm_table_get_md(pc->ti->table);
	unsigned long now = READ_ONCE(pc->health);
	unsigned long changed = now ^ pc->health_told;
	char name[DM_NAME_LEN];
	unsigned int bit;

	if (!changed)
		return;
	pc->health_told = now;
	if (dm_copy_name_and_uuid(md, name, NULL))
		strscpy(name, dm_device_name(md), sizeof(name));
	for_each_set_bit(bit, &changed, PMC_H_NR)
		pmc_health_log(pc, name, bit, now & BIT(bit));
	dm_table_event(pc->ti->table);
}

void pmc_health_init(struct pmemcache *pc)
{
	INIT_WORK(&pc->event_work, pmc_event_work);
}

void pmc_health_exit(struct pmemcache *pc)
{
	cancel_work_sync(&pc->event_work);
}

/* @err: the origin's errno, for PMC_H_ORIGIN.  Any context. */
void pmc_health_set(struct pmemcache *pc, enum pmc_health_bit bit, int err)
{
	if (test_bit(bit, &pc->health))
		return;
	if (bit == PMC_H_ORIGIN)
		WRITE_ONCE(pc->origin_err, err);
	if (!test_and_set_bit(bit, &pc->health))
		queue_work(system_wq, &pc->event_work);
}

void pmc_health_clear(struct pmemcache *pc, enum pmc_health_bit bit)
{
	/* The test_bit keeps the hot paths from dirtying the cache line. */
	if (test_bit(bit, &pc->health) && test_and_clear_bit(bit, &pc->health))
		queue_work(system_wq, &pc->event_work);
}

/* "ok", or the conditions that hold, comma separated. */
void pmc_health_emit(struct pmemcache *pc, char *result, unsigned int maxlen,
		     unsigned int *szp)
{
	unsigned long h = READ_ONCE(pc->health);
	unsigned int sz = *szp, i;
	const char *sep = "";

	if (!h)
		DMEMIT("ok");
	for (i = 0; i < PMC_H_NR; i++) {
		if (!(h & BIT(i)))
			continue;
		DMEMIT("%s%s", sep, pmc_health_names[i]);
		sep = ",";
	}
	*szp = sz;
}
