// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: parsing of the table's feature words and of the tunables
 * (pmc_table.h).  Shared by the module and the host fuzzer.
 */
#include "pmc_table.h"

const struct pmc_tunable pmc_tunables[PMC_NR_TUNABLES] = {
	[PMC_T_HIGH_WM] = { "high_watermark", 0, 100,
			    "Invalid high_watermark (0-100)", true },
	[PMC_T_LOW_WM] = { "low_watermark", 0, 100,
			   "Invalid low_watermark (0-100)", true },
	[PMC_T_WB_JOBS] = { "writeback_jobs", 1, 65536,
			    "Invalid writeback_jobs (1-65536)", true },
	[PMC_T_MAX_AGE] = { "max_age", 0, 86400000,
			    "Invalid max_age (0-86400000 ms, 0: off)", true },
	[PMC_T_STRIPE] = { "stripe_blocks", 0, PMC_MAX_STRIPE_BLOCKS,
			   "Invalid stripe_blocks (0-4096)", true },
	[PMC_T_FULL_WAIT] = { "full_wait", 0, 60000,
			      "Invalid full_wait (0-60000 ms)", true },
	[PMC_T_SEQ_BYPASS] = { "seq_bypass", 0, 1048576,
			       "Invalid seq_bypass (0-1048576 KiB)", true },
	[PMC_T_RESYNC_RATE] = { "resync_rate", 0, 1048576,
				"Invalid resync_rate (0-1048576 MiB/s, 0: no limit)", true },
};

int pmc_tunable_find(const char *name)
{
	unsigned int i;

	for (i = 0; i < PMC_NR_TUNABLES; i++)
		if (!strcasecmp(name, pmc_tunables[i].name))
			return i;
	return -1;
}

int pmc_tunable_parse(unsigned int i, const char *arg, unsigned int *v,
		      const char **error)
{
	const struct pmc_tunable *t = &pmc_tunables[i];

	/* not sscanf("%u"): it wraps, "4294967346" would be taken as 50 */
	if (!arg || kstrtouint(arg, 10, v) || *v < t->min || *v > t->max) {
		*error = t->error;
		return -EINVAL;
	}
	return 0;
}

bool pmc_feature_word(const char *w)
{
	static const char * const words[] = {
		PMC_OPT_WRITEBACK, PMC_OPT_FLUSH_SUSPEND, PMC_OPT_CLEANER,
		PMC_OPT_FORMAT, PMC_OPT_MIRROR, PMC_OPT_DEGRADED,
		PMC_OPT_DATA_CRC,
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(words); i++)
		if (!strcasecmp(w, words[i]))
			return true;
	return false;
}

int pmc_features_parse(struct pmc_features *f, unsigned int argc,
		       char **argv, const char **error)
{
	static const char * const flags[] = {
		PMC_OPT_WRITEBACK, PMC_OPT_FLUSH_SUSPEND, PMC_OPT_CLEANER,
		PMC_OPT_FORMAT, PMC_OPT_MIRROR, PMC_OPT_DEGRADED,
		PMC_OPT_DATA_CRC,
	};
	unsigned int n, i, seen = 0;
	const char *name;
	int t;

	if (!argc)
		return 0;
	if (kstrtouint(*argv, 10, &n) || n > PMC_MAX_FEATURE_ARGS) {
		*error = "Invalid number of feature arguments";
		return -EINVAL;
	}
	argv++;
	argc--;
	if (n != argc) {
		*error = "Number of feature arguments differs from the features given";
		return -EINVAL;
	}

	while (argc) {
		name = *argv++;
		argc--;

		/* each feature once: flags in @seen, tunables in f->set */
		for (i = 0; i < ARRAY_SIZE(flags); i++)
			if (!strcasecmp(name, flags[i]))
				break;
		t = pmc_tunable_find(name);
		if ((i < ARRAY_SIZE(flags) && (seen & BIT(i))) ||
		    (t >= 0 && (f->set & BIT(t)))) {
			*error = "Feature argument given more than once";
			return -EINVAL;
		}
		if (i < ARRAY_SIZE(flags))
			seen |= BIT(i);

		if (!strcasecmp(name, PMC_OPT_FLUSH_SUSPEND)) {
			f->flush_on_suspend = true;
			continue;
		}
		if (!strcasecmp(name, PMC_OPT_CLEANER)) {
			f->cleaner = true;
			continue;
		}
		if (!strcasecmp(name, PMC_OPT_FORMAT)) {
			f->format = true;
			continue;
		}
		if (!strcasecmp(name, PMC_OPT_DEGRADED)) {
			f->degraded = true;
			continue;
		}
		if (!strcasecmp(name, PMC_OPT_DATA_CRC)) {
			f->data_crc = true;
			continue;
		}
		if (t < 0 && strcasecmp(name, PMC_OPT_WRITEBACK) &&
		    strcasecmp(name, PMC_OPT_MIRROR)) {
			*error = "Unrecognised feature argument";
			return -EINVAL;
		}
		if (!argc) {
			*error = "Feature argument is missing its value";
			return -EINVAL;
		}
		argc--;
		if (t >= 0) {
			if (pmc_tunable_parse(t, *argv++, &f->val[t], error))
				return -EINVAL;
			f->set |= BIT(t);
			continue;
		}
		if (!strcasecmp(name, PMC_OPT_MIRROR)) {
			f->mirror = *argv++;
			/* a device, never a feature's name: the table reads back */
			if (pmc_tunable_find(f->mirror) >= 0 ||
			    pmc_feature_word(f->mirror)) {
				*error = "Invalid mirror device";
				return -EINVAL;
			}
			continue;
		}
		name = *argv++;
		if (!strcasecmp(name, "pfn")) {
			f->route = PMC_ROUTE_PFN;
		} else if (!strcasecmp(name, "bounce")) {
			f->route = PMC_ROUTE_BOUNCE;
		} else if (!strcasecmp(name, "auto")) {
			f->route = PMC_ROUTE_AUTO;
		} else {
			*error = "Invalid writeback mode (pfn, bounce or auto)";
			return -EINVAL;
		}
	}
	if (f->degraded && !f->mirror) {
		*error = "degraded is only for a mirror";
		return -EINVAL;
	}
	if (f->val[PMC_T_LOW_WM] > f->val[PMC_T_HIGH_WM]) {
		*error = "low_watermark is above high_watermark";
		return -EINVAL;
	}
	return 0;
}
