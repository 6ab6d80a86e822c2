// SPDX-License-Identifier: GPL-2.0
/*
 * printk_flood: a storm of console messages for the harness self-test
 * (tests/test_harness.py).  Loading it prints @lines warnings, one
 * reschedule apart, so that they reach the serial console while a guest
 * script prints its own lines: the host must still read every script line
 * whole, because script output has a channel of its own.
 */
#include <linux/module.h>
#include <linux/sched.h>

static unsigned int lines = 2000;
module_param(lines, uint, 0444);
MODULE_PARM_DESC(lines, "how many console lines to print at load");

static int __init printk_flood_init(void)
{
	unsigned int i;

	for (i = 0; i < lines; i++) {
		pr_warn("pmc-flood %u: a console line that must never land inside a script line\n",
			i);
		cond_resched();
	}
	return 0;
}

static void __exit printk_flood_exit(void)
{
}

module_init(printk_flood_init);
module_exit(printk_flood_exit);
MODULE_DESCRIPTION("console message storm for the test harness");
MODULE_LICENSE("GPL");
