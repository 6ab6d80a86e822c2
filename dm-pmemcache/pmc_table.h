/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache: the feature words of a table line and the tunables that
 * messages change.  Pure parsing, shared by the kernel module (target.c)
 * and the host fuzzer (tests/host/fuzz_table.c) through pmc_shim.h.
 */
#ifndef PMC_TABLE_H
#define PMC_TABLE_H

#include "pmc_shim.h"

#define PMC_MAX_STRIPE_BLOCKS	4096

#define PMC_OPT_WRITEBACK	"writeback"
#define PMC_OPT_FLUSH_SUSPEND	"flush_on_suspend"
#define PMC_OPT_CLEANER		"cleaner"
#define PMC_OPT_FORMAT		"format"
#define PMC_OPT_MIRROR		"mirror"	/* mirror <pmem_dev2>: the second half */
#define PMC_OPT_DEGRADED	"degraded"	/* start a mirror on one half */
#define PMC_OPT_DATA_CRC	"data_crc"	/* format with data crcs */

enum pmc_route {
	PMC_ROUTE_AUTO,		/* pfn bios if bdev_pfn(origin), else bounce */
	PMC_ROUTE_PFN,		/* pfn bios only (refused if not supported) */
	PMC_ROUTE_BOUNCE,	/* always through DRAM pages */
};

/* Features with a number, in the order of pmc_tunables[]. */
enum pmc_tunable_id {
	PMC_T_HIGH_WM,
	PMC_T_LOW_WM,
	PMC_T_WB_JOBS,
	PMC_T_MAX_AGE,
	PMC_T_STRIPE,
	PMC_T_FULL_WAIT,
	PMC_T_SEQ_BYPASS,
	PMC_T_RESYNC_RATE,	/* a mirror's online copy, MiB/s */
	PMC_NR_TUNABLES,
};

/* Those marked live can also be changed with a message "<name> <value>". */
struct pmc_tunable {
	const char *name;
	unsigned int min, max;
	const char *error;
	bool live;
};

extern const struct pmc_tunable pmc_tunables[PMC_NR_TUNABLES];

/* Words of all features together: 10 with a value, 5 without. */
#define PMC_MAX_FEATURE_ARGS	(2 * PMC_NR_TUNABLES + 2 + 2 + 5)

/*
 * What the feature words say.  The caller fills in the defaults; parsing
 * changes what the words give.  @set: bit i, tunable i was given.
 */
struct pmc_features {
	unsigned int val[PMC_NR_TUNABLES];
	unsigned long set;
	enum pmc_route route;
	bool flush_on_suspend;
	bool cleaner;
	bool format;
	const char *mirror;	/* the second half's device: a word of argv, or NULL */
	bool degraded;		/* start on one half (only with mirror) */
	bool data_crc;		/* PMC_FEATURE_DATA_CRC */
};

/* The tunable called @name (any case), or -1. */
int pmc_tunable_find(const char *name);

/* The value of tunable @i in @arg, range-checked: 0, or -EINVAL. */
int pmc_tunable_parse(unsigned int i, const char *arg, unsigned int *v,
		      const char **error);

/* Is @w the name of a feature without a number (any case)? */
bool pmc_feature_word(const char *w);

/*
 * "[<#feature args> <feature>...]": the words @argv[0..@argc).  0, or
 * -EINVAL with *@error set to a one-line reason (@f may be half set).
 */
int pmc_features_parse(struct pmc_features *f, unsigned int argc,
		       char **argv, const char **error);

#endif /* PMC_TABLE_H */
