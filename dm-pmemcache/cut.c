// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: power cuts at the points of pmc_cut.h (test build only,
 * -DPMC_CUT_HOOKS; the product module does not contain this file).
 *
 *   echo N > /sys/module/dm_pmemcache/parameters/cut_after
 *   echo over_w4 > /sys/module/dm_pmemcache/parameters/cut_at
 *
 * or both as insmod parameters (a cut during the recovery at table load).
 * Setting cut_at restarts the count.  The N-th hit of the point prints its
 * name on the console and writes the point's number + 1 to QEMU's
 * isa-debug-exit port: QEMU exits at once with status (value << 1) | 1,
 * and everything the guest held in RAM is gone, as in a power cut.  pmem
 * (a file QEMU maps shared) keeps every store issued so far.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/console.h>
#include <linux/string.h>
#include <linux/atomic.h>
#include <linux/io.h>
#include <linux/delay.h>
#include <linux/panic.h>

#include "pmc_cut.h"

#define PMC_CUT_PORT	0xf4	/* -device isa-debug-exit,iobase=0xf4 */

static const char * const pmc_cut_names[PMC_CUT_NR] = {
	[PMC_CUT_NEW_W2] = "new_w2",
	[PMC_CUT_NEW_W3] = "new_w3",
	[PMC_CUT_NEW_W4] = "new_w4",
	[PMC_CUT_OVER_W2] = "over_w2",
	[PMC_CUT_OVER_W3] = "over_w3",
	[PMC_CUT_OVER_W4] = "over_w4",
	[PMC_CUT_OVER_W5] = "over_w5",
	[PMC_CUT_OVER_W6] = "over_w6",
	[PMC_CUT_EVICT_E1] = "evict_e1",
	[PMC_CUT_DISCARD_D1] = "discard_d1",
	[PMC_CUT_THROUGH_T1] = "through_t1",
	[PMC_CUT_WB_START] = "wb_start",
	[PMC_CUT_WB_WRITTEN] = "wb_written",
	[PMC_CUT_WB_FLUSHED] = "wb_flushed",
	[PMC_CUT_WB_C1] = "wb_c1",
	[PMC_CUT_RECOVER_LOAD] = "recover_load",
	[PMC_CUT_RECOVER_REPAIR] = "recover_repair",
};

static int pmc_cut_armed = -1;		/* enum pmc_cut, or -1 */
static atomic_long_t pmc_cut_hits = ATOMIC_LONG_INIT(0);
static unsigned long cut_after = 1;
module_param(cut_after, ulong, 0644);
MODULE_PARM_DESC(cut_after, "cut at this hit of cut_at (from 1)");

static int pmc_cut_set(const char *val, const struct kernel_param *kp)
{
	char name[32];
	int i;

	strscpy(name, val, sizeof(name));
	strim(name);
	if (!*name || !strcmp(name, "none")) {
		WRITE_ONCE(pmc_cut_armed, -1);
		return 0;
	}
	i = match_string(pmc_cut_names, PMC_CUT_NR, name);
	if (i < 0)
		return -EINVAL;
	WRITE_ONCE(pmc_cut_armed, -1);
	atomic_long_set(&pmc_cut_hits, 0);
	smp_wmb();	/* pairs with pmc_cut_point(): reset, then armed */
	WRITE_ONCE(pmc_cut_armed, i);
	return 0;
}

static int pmc_cut_get(char *buf, const struct kernel_param *kp)
{
	int i = READ_ONCE(pmc_cut_armed);

	return sprintf(buf, "%s\n", i < 0 ? "none" : pmc_cut_names[i]);
}

static const struct kernel_param_ops pmc_cut_ops = {
	.set = pmc_cut_set,
	.get = pmc_cut_get,
};
module_param_cb(cut_at, &pmc_cut_ops, NULL, 0644);
MODULE_PARM_DESC(cut_at, "power cut point (test build)");

void pmc_cut_point(enum pmc_cut point)
{
	unsigned long n;

	if (READ_ONCE(pmc_cut_armed) != point)
		return;
	smp_rmb();	/* pairs with pmc_cut_set(): the count was reset */
	n = atomic_long_inc_return(&pmc_cut_hits);
	if (n != READ_ONCE(cut_after))
		return;
	pr_emerg("dm-pmemcache: power cut at %s (hit %lu)\n",
		 pmc_cut_names[point], n);
	/* every caller may sleep: push the line out before the cut */
	if (preemptible()) {
		console_lock();
		console_unlock();
	}
	outb(point + 1, PMC_CUT_PORT);
	/* QEMU is gone by now, unless the machine has no such device */
	mdelay(2000);
	panic("dm-pmemcache: cut at %s: no isa-debug-exit device at %#x",
	      pmc_cut_names[point], PMC_CUT_PORT);
}
