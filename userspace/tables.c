// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: the table and message lines the tool builds from what the
 * kernel prints, for set and detach.  No libdevmapper: unit-tested.
 *
 * The keys are those of target.c's pmc_tunables[] and pmc_message(); the
 * ranges are the target's to check, so that there is one place that
 * decides them and its refusal (one kernel line) is what the user sees.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "pmemcachectl.h"

const struct pmctl_key pmctl_keys[] = {
	{ "high_watermark", PMCTL_KEY_NUMBER,
	  "percent dirty at which writeback runs at full speed (0-100)" },
	{ "low_watermark", PMCTL_KEY_NUMBER,
	  "percent dirty writeback steers to (0-100, <= high_watermark)" },
	{ "writeback_jobs", PMCTL_KEY_NUMBER,
	  "blocks in flight to the origin (1-65536)" },
	{ "stripe_blocks", PMCTL_KEY_NUMBER,
	  "whole stripes of N blocks first (0-4096; from the next resume)" },
	{ "full_wait", PMCTL_KEY_NUMBER,
	  "ms a write waits for a free block in a full cache (0-60000)" },
	{ "seq_bypass", PMCTL_KEY_NUMBER,
	  "KiB of a sequential run that then goes around (0: off; to 1048576)" },
	{ "cleaner", PMCTL_KEY_SWITCH,
	  "on: no new blocks cached, all dirty ones written back; off" },
	{ "max_age", PMCTL_KEY_NUMBER,
	  "ms after which a dirty block is written back (0: off; to 86400000)" },
	{ "resync_rate", PMCTL_KEY_NUMBER,
	  "MiB/s of a mirror's online copy to a half (0: no limit; to 1048576)" },
	{ "writeback", PMCTL_KEY_TABLE_ONLY,
	  "set by the table only (create --writeback)" },
	{ "flush_on_suspend", PMCTL_KEY_TABLE_ONLY,
	  "set by the table only (create --flush-on-suspend)" },
};

const size_t pmctl_nr_keys = sizeof(pmctl_keys) / sizeof(pmctl_keys[0]);

const struct pmctl_key *pmctl_key_find(const char *name)
{
	char n[32];
	size_t i;

	if (strlen(name) >= sizeof(n))
		return NULL;
	for (i = 0; name[i]; i++)
		n[i] = name[i] == '-' ? '_' : name[i];
	n[i] = 0;
	for (i = 0; i < pmctl_nr_keys; i++)
		if (!strcmp(n, pmctl_keys[i].name))
			return &pmctl_keys[i];
	return NULL;
}

static int switch_value(const char *v)
{
	static const char *const on[] = { "on", "1", "yes", "true" };
	static const char *const off[] = { "off", "0", "no", "false" };
	size_t i;

	for (i = 0; i < 4; i++) {
		if (!strcasecmp(v, on[i]))
			return 1;
		if (!strcasecmp(v, off[i]))
			return 0;
	}
	return -1;
}

int pmctl_set_message(const struct pmctl_key *key, const char *value,
		      char *msg, size_t len, char *why, size_t why_len)
{
	uint64_t v;
	int on, n;

	switch (key->kind) {
	case PMCTL_KEY_NUMBER:
		/* the target takes 32-bit decimals; it checks the range */
		if (parse_u64(value, &v, false) || v > UINT32_MAX) {
			snprintf(why, why_len, "%s: '%s' is not a number", key->name, value);
			return -1;
		}
		n = snprintf(msg, len, "%s %llu", key->name, (unsigned long long)v);
		break;
	case PMCTL_KEY_SWITCH:
		on = switch_value(value);
		if (on < 0) {
			snprintf(why, why_len, "%s: '%s' is not on or off", key->name, value);
			return -1;
		}
		n = snprintf(msg, len, "%s%s", on ? "" : "no", key->name);
		break;
	default:
		snprintf(why, why_len, "%s cannot change while the cache runs: %s",
			 key->name, key->what);
		return -1;
	}
	if (n < 0 || (size_t)n >= len) {
		snprintf(why, why_len, "%s: value too long", key->name);
		return -1;
	}
	return 0;
}

#define MAX_WORDS	64
#define WORD_LEN	128

/* Split @s at blanks into @w; the number of words, or -1. */
static int split(const char *s, char w[][WORD_LEN])
{
	int n = 0;

	for (;;) {
		size_t l;

		s += strspn(s, " \t\n");
		if (!*s)
			return n;
		l = strcspn(s, " \t\n");
		if (n == MAX_WORDS || l >= WORD_LEN)
			return -1;
		memcpy(w[n], s, l);
		w[n][l] = 0;
		n++;
		s += l;
	}
}

/* The words of a pmemcache table and where its features start; -1 if it
 * is not one ("<origin> <pmem> <bs> [<n> <n words>]"). */
static int table_words(const char *params, char w[][WORD_LEN], int *nw)
{
	uint64_t nf;

	*nw = split(params, w);
	if (*nw < 3)
		return -1;
	if (*nw == 3)
		return 0;
	if (parse_u64(w[3], &nf, false) || nf != (uint64_t)(*nw - 4))
		return -1;
	return 0;
}

bool pmctl_table_has_flag(const char *params, const char *flag)
{
	char w[MAX_WORDS][WORD_LEN];
	int nw, i;

	if (table_words(params, w, &nw))
		return false;
	for (i = 4; i < nw; i++)
		if (!strcasecmp(w[i], flag))
			return true;
	return false;
}

int pmctl_table_add_flag(const char *params, const char *flag, char *out,
			 size_t len)
{
	char w[MAX_WORDS][WORD_LEN];
	bool has = false;
	int nw, nf, i, n;
	size_t at;

	if (table_words(params, w, &nw))
		return -1;
	for (i = 4; i < nw; i++)
		if (!strcasecmp(w[i], flag))
			has = true;
	n = snprintf(out, len, "%s %s %s", w[0], w[1], w[2]);
	if (n < 0 || (size_t)n >= len)
		return -1;
	at = n;
	nf = (nw > 3 ? nw - 4 : 0) + !has;
	if (nf) {
		n = snprintf(out + at, len - at, " %d", nf);
		if (n < 0 || (size_t)n >= len - at)
			return -1;
		at += n;
	}
	for (i = 4; i < nw; i++) {
		n = snprintf(out + at, len - at, " %s", w[i]);
		if (n < 0 || (size_t)n >= len - at)
			return -1;
		at += n;
	}
	if (!has) {
		n = snprintf(out + at, len - at, " %s", flag);
		if (n < 0 || (size_t)n >= len - at)
			return -1;
	}
	return 0;
}

/* The index of the word after "mirror" in @w, or -1. */
static int mirror_arg(char w[][WORD_LEN], int nw)
{
	int i;

	for (i = 4; i < nw - 1; i++)
		if (!strcmp(w[i], "mirror"))
			return i + 1;
	return -1;
}

int pmctl_table_halves(const char *params, char *first, char *mirror)
{
	char w[MAX_WORDS][WORD_LEN];
	int nw, m;

	if (table_words(params, w, &nw))
		return -1;
	m = mirror_arg(w, nw);
	if (m < 0 || strlen(w[1]) >= 64 || strlen(w[m]) >= 64)
		return -1;
	strcpy(first, w[1]);
	strcpy(mirror, w[m]);
	return 0;
}

int pmctl_table_set_halves(const char *params, const char *first,
			   const char *mirror, char *out, size_t len)
{
	char w[MAX_WORDS][WORD_LEN];
	int nw, m, i, n, nf = 0;
	size_t at;

	if (table_words(params, w, &nw))
		return -1;
	m = mirror_arg(w, nw);
	if (m < 0)
		return -1;
	for (i = 4; i < nw; i++)
		nf += strcmp(w[i], "degraded") != 0;
	n = snprintf(out, len, "%s %s %s %d", w[0], first, w[2], nf);
	if (n < 0 || (size_t)n >= len)
		return -1;
	at = n;
	for (i = 4; i < nw; i++) {
		if (!strcmp(w[i], "degraded"))
			continue;
		n = snprintf(out + at, len - at, " %s", i == m ? mirror : w[i]);
		if (n < 0 || (size_t)n >= len - at)
			return -1;
		at += n;
	}
	return 0;
}
