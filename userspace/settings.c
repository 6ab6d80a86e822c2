// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: the settings slots (settings.h, docs/format.md).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libpmc.h"
#include "pmc_mirror.h"
#include "pmemcachectl.h"
#include "probe.h"
#include "settings.h"

/* "PMCsets1" as a little-endian u64. */
#define SETTINGS_MAGIC	0x3173746573434d50ULL

struct settings_slot {
	__le64 magic;
	__le64 seq;			/* the valid slot with the higher seq counts */
	__u8 cache_uuid[16];		/* the superblock's */
	char name[PMCTL_SETTINGS_NAME];
	char features[PMCTL_SETTINGS_FEATURES];
	__le32 csum;			/* crc32c(~0, the bytes above) */
};

_Static_assert(sizeof(struct settings_slot) == PMCTL_SETTINGS_SLOT, "one sector a slot");
_Static_assert(PMCTL_SETTINGS_OFFSET >= PMC_MIRROR_INFO_OFFSET + 2 * 128 &&
	       PMCTL_SETTINGS_OFFSET + 2 * PMCTL_SETTINGS_SLOT <= PMCTL_MARK_OFFSET,
	       "between the mirror info and the kept-dirty mark");

static bool slot_valid(const struct settings_slot *s, const uint8_t uuid[16])
{
	return le64_to_cpu(s->magic) == SETTINGS_MAGIC &&
	       le32_to_cpu(s->csum) ==
			pmc_crc32c(~0U, s, offsetof(struct settings_slot, csum)) &&
	       !memcmp(s->cache_uuid, uuid, 16) &&
	       memchr(s->name, 0, sizeof(s->name)) &&
	       memchr(s->features, 0, sizeof(s->features));
}

void pmctl_settings_parse(const void *area, const uint8_t uuid[16], struct pmctl_settings *out)
{
	const struct settings_slot *slot =
		(const void *)((const uint8_t *)area + PMCTL_SETTINGS_OFFSET);
	unsigned int i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < 2; i++) {
		if (!slot_valid(&slot[i], uuid) ||
		    (out->valid && le64_to_cpu(slot[i].seq) <= out->seq))
			continue;
		out->valid = true;
		out->slot = i;
		out->seq = le64_to_cpu(slot[i].seq);
		memcpy(out->name, slot[i].name, sizeof(out->name));
		memcpy(out->features, slot[i].features, sizeof(out->features));
	}
}

void pmctl_settings_build(void *buf, const uint8_t uuid[16], uint64_t seq, const char *name,
			  const char *features)
{
	struct settings_slot *s = buf;

	memset(s, 0, sizeof(*s));
	s->magic = cpu_to_le64(SETTINGS_MAGIC);
	s->seq = cpu_to_le64(seq);
	memcpy(s->cache_uuid, uuid, 16);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->features, sizeof(s->features), "%s", features);
	s->csum = cpu_to_le32(pmc_crc32c(~0U, s, offsetof(struct settings_slot, csum)));
}

/* Words a table feature takes after its key: the settings keep only these. */
static int key_args(const char *word)
{
	const struct pmctl_key *k = pmctl_key_find(word);

	if (!k || strchr(word, '-'))	/* the kernel prints keys with '_' */
		return -1;
	if (k->kind == PMCTL_KEY_NUMBER || !strcmp(k->name, "writeback"))
		return 1;
	return 0;			/* cleaner, flush_on_suspend: flags */
}

int pmctl_settings_filter(const char *features, char *out, size_t len)
{
	char *copy = strdup(features), *save = NULL, *w;
	size_t n = 0;
	bool first = true;
	int args, r = 0;

	if (!copy)
		return -1;
	*out = 0;
	for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (first && isdigit((unsigned char)*w)) {	/* the count */
			first = false;
			continue;
		}
		first = false;
		args = key_args(w);
		if (args < 0)
			continue;
		n += snprintf(out + n, n < len ? len - n : 0, "%s%s", n ? " " : "", w);
		while (args-- > 0 && (w = strtok_r(NULL, " ", &save)))
			n += snprintf(out + n, n < len ? len - n : 0, " %s", w);
		if (!w)
			break;
	}
	if (n >= len)
		r = -1;
	free(copy);
	return r;
}

int pmctl_settings_write(const char *path, const char *name, const char *features)
{
	struct pmctl_sb sb;
	unsigned int slot;
	void *buf;
	int r;

	r = pmctl_sb_read(path, &sb);
	if (r)
		return r;
	if (sb.state != PMCTL_SB_CACHE)
		return -EUCLEAN;
	/* The slot that does not hold the current settings. */
	slot = sb.settings.valid ? !sb.settings.slot : 0;
	if (posix_memalign(&buf, PMCTL_SETTINGS_SLOT, PMCTL_SETTINGS_SLOT))
		return -ENOMEM;
	pmctl_settings_build(buf, sb.cache_uuid, sb.settings.seq + 1, name, features);
	r = pmctl_area_write(path, buf, PMCTL_SETTINGS_SLOT,
			     PMCTL_SETTINGS_OFFSET + slot * PMCTL_SETTINGS_SLOT);
	free(buf);
	return r;
}
