// SPDX-License-Identifier: GPL-2.0
/*
 * libFuzzer harness of the table's feature parser (issue 29): the
 * module's own pmc_table.c (pmc_features_parse(), pmc_tunable_parse())
 * on words that a user or a script with a typo may give.
 *
 * Input: the words of "[<#feature args> <feature>...]", separated by
 * spaces, tabs, newlines or NULs (as dm_split_args() would give them,
 * without its backslash escapes); each word is a heap block of its own
 * length and argv has exactly argc entries, so AddressSanitizer sees a
 * read past either.  The same words are also taken as a message
 * "<tunable> <value>" when there are two.
 *
 * Checked (abort() on a violation): a refusal says why, with one of the
 * parser's reasons; an accepted line has as many words as its count says
 * and each feature at most once, leaves every tunable it did not give at
 * its default and every one it gave in range, low_watermark <=
 * high_watermark, and what the table status prints of it (target.c,
 * pmc_status()) parses back to the same features.
 */
#include <stdio.h>
#include <stdlib.h>

#include "pmc_table.h"

#define MAX_WORDS	64

#define fz_assert(c) do {						\
	if (!(c)) {							\
		fprintf(stderr, "fuzz_table: %s:%d: violated: %s\n",	\
			__FILE__, __LINE__, #c);			\
		abort();						\
	}								\
} while (0)

static const char * const reasons[] = {
	"Invalid number of feature arguments",
	"Number of feature arguments differs from the features given",
	"Feature argument given more than once",
	"Unrecognised feature argument",
	"Feature argument is missing its value",
	"Invalid writeback mode (pfn, bounce or auto)",
	"low_watermark is above high_watermark",
	"Invalid mirror device",
	"degraded is only for a mirror",
};

/* The constructor's defaults (target.c, pmc_ctr()). */
static void defaults(struct pmc_features *f)
{
	memset(f, 0, sizeof(*f));
	f->val[PMC_T_HIGH_WM] = 50;
	f->val[PMC_T_LOW_WM] = 45;
	f->val[PMC_T_WB_JOBS] = 1024;
	f->val[PMC_T_STRIPE] = ~0U;
	f->val[PMC_T_FULL_WAIT] = 100;
	f->route = PMC_ROUTE_AUTO;
}

static bool known_reason(const char *why)
{
	unsigned int i;

	if (!why)
		return false;
	for (i = 0; i < ARRAY_SIZE(reasons); i++)
		if (!strcmp(why, reasons[i]))
			return true;
	for (i = 0; i < PMC_NR_TUNABLES; i++)
		if (!strcmp(why, pmc_tunables[i].error))
			return true;
	return false;
}

static bool is_feature(const char *w)
{
	static const char * const flags[] = {
		PMC_OPT_WRITEBACK, PMC_OPT_FLUSH_SUSPEND, PMC_OPT_CLEANER,
		PMC_OPT_FORMAT, PMC_OPT_MIRROR, PMC_OPT_DEGRADED,
	};
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(flags); i++)
		if (!strcasecmp(w, flags[i]))
			return true;
	return pmc_tunable_find(w) >= 0;
}

static void free_words(char **argv, unsigned int argc)
{
	while (argc--)
		free(argv[argc]);
	free(argv);
}

/* The words of @s (@len bytes): argv of exactly *argc entries. */
static char **split(const u8 *s, size_t len, unsigned int *argc)
{
	char *w[MAX_WORDS], **argv;
	size_t i = 0, j;
	unsigned int n = 0;

	while (i < len && n < MAX_WORDS) {
		while (i < len && (!s[i] || s[i] == ' ' || s[i] == '\t' ||
				   s[i] == '\n'))
			i++;
		if (i == len)
			break;
		for (j = i; j < len && s[j] && s[j] != ' ' && s[j] != '\t' &&
		     s[j] != '\n'; j++)
			;
		w[n] = malloc(j - i + 1);
		fz_assert(w[n]);
		memcpy(w[n], s + i, j - i);
		w[n][j - i] = 0;
		n++;
		i = j;
	}
	argv = malloc((n ? n : 1) * sizeof(*argv));
	fz_assert(argv);
	memcpy(argv, w, n * sizeof(*argv));
	*argc = n;
	return argv;
}

static const char *route_name(enum pmc_route r)
{
	return r == PMC_ROUTE_PFN ? "pfn" : r == PMC_ROUTE_BOUNCE ? "bounce" :
	       "auto";
}

/* What pmc_status() prints of the features (STATUSTYPE_TABLE). */
static size_t emit(const struct pmc_features *f, char *buf, size_t cap)
{
	unsigned int i, nf = 0;
	size_t n;

	for (i = 0; i < PMC_NR_TUNABLES; i++)
		nf += (f->set & BIT(i)) ? 2 : 0;
	nf += (f->route != PMC_ROUTE_AUTO ? 2 : 0) + f->flush_on_suspend +
	      f->cleaner + (f->mirror ? 2 : 0) + f->data_crc;
	n = snprintf(buf, cap, "%u", nf);
	for (i = 0; i < PMC_NR_TUNABLES; i++)
		if (f->set & BIT(i))
			n += snprintf(buf + n, cap - n, " %s %u",
				      pmc_tunables[i].name, f->val[i]);
	if (f->route != PMC_ROUTE_AUTO)
		n += snprintf(buf + n, cap - n, " " PMC_OPT_WRITEBACK " %s",
			      route_name(f->route));
	if (f->flush_on_suspend)
		n += snprintf(buf + n, cap - n, " " PMC_OPT_FLUSH_SUSPEND);
	if (f->cleaner)
		n += snprintf(buf + n, cap - n, " " PMC_OPT_CLEANER);
	if (f->data_crc)
		n += snprintf(buf + n, cap - n, " " PMC_OPT_DATA_CRC);
	if (f->mirror)
		n += snprintf(buf + n, cap - n, " " PMC_OPT_MIRROR " %s",
			      f->mirror);
	fz_assert(n < cap);
	return n;
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct pmc_features f, d, g;
	const char *why = NULL;
	unsigned int argc, i, j, v;
	char **argv, *buf, *mirror;
	size_t n;
	int r, t;

	argv = split(data, size, &argc);
	defaults(&f);
	defaults(&d);
	r = pmc_features_parse(&f, argc, argv, &why);
	if (r) {
		fz_assert(r == -EINVAL && known_reason(why));
	} else {
		/* the count says how many words follow */
		fz_assert(!argc || (!kstrtouint(argv[0], 10, &v) &&
				    v == argc - 1));
		/*
		 * each feature at most once (a value is a number or a route,
		 * never the name of a feature)
		 */
		for (i = 1; i < argc; i++)
			if (is_feature(argv[i]))
				for (j = i + 1; j < argc; j++)
					fz_assert(strcasecmp(argv[i], argv[j]));
		for (i = 0; i < PMC_NR_TUNABLES; i++) {
			if (!(f.set & BIT(i))) {
				fz_assert(f.val[i] == d.val[i]);
				continue;
			}
			fz_assert(f.val[i] >= pmc_tunables[i].min &&
				  f.val[i] <= pmc_tunables[i].max);
		}
		fz_assert(!(f.set & ~(BIT(PMC_NR_TUNABLES) - 1)));
		fz_assert(f.val[PMC_T_LOW_WM] <= f.val[PMC_T_HIGH_WM]);

		/* the table status parses back to the same features */
		/* the mirror device is one word of the input, at most */
		buf = malloc(512 + size + 1);
		mirror = strdup(f.mirror ? f.mirror : "");
		fz_assert(buf && mirror);
		n = emit(&f, buf, 512 + size + 1);
		free_words(argv, argc);
		argv = split((const u8 *)buf, n, &argc);
		defaults(&g);
		why = NULL;
		fz_assert(!pmc_features_parse(&g, argc, argv, &why));
		fz_assert(!memcmp(g.val, f.val, sizeof(g.val)) &&
			  g.set == f.set && g.route == f.route &&
			  g.flush_on_suspend == f.flush_on_suspend &&
			  g.cleaner == f.cleaner && !g.format && !g.degraded &&
			  g.data_crc == f.data_crc &&
			  !g.mirror == !f.mirror &&
			  (!g.mirror || !strcmp(g.mirror, mirror)));
		free(mirror);
		free(buf);
	}
	free_words(argv, argc);

	/* a message "<tunable> <value>" (pmc_message_tunable()) */
	argv = split(data, size, &argc);
	if (argc == 2) {
		t = pmc_tunable_find(argv[0]);
		if (t >= 0) {
			why = NULL;
			v = 12345;
			if (pmc_tunable_parse(t, argv[1], &v, &why))
				fz_assert(why == pmc_tunables[t].error);
			else
				fz_assert(v >= pmc_tunables[t].min &&
					  v <= pmc_tunables[t].max);
		}
	}
	free_words(argv, argc);
	return 0;
}
