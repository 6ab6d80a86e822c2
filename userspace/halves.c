// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl: the halves of a mirrored cache offline (halves.h).
 */
#define _DEFAULT_SOURCE
#include <stdio.h>
#include <string.h>

#include "pmemcachectl.h"
#include "halves.h"
#include "probe.h"

/* Does @im hold a valid superblock (the module's "holds a cache")? */
static bool holds_cache(struct pmc_image *im)
{
	static u8 area[PMC_SUPER_AREA];
	struct pmctl_sb sb;

	if (pmc_pmem_read(area, im->base, sizeof(area)))
		return true;	/* unreadable: never taken for blank */
	pmctl_sb_parse(area, &sb);
	return sb.state != PMCTL_SB_NONE;
}

int pmctl_halves_read(struct pmctl_halves *hv, struct pmc_image *a,
		      struct pmc_image *b, bool degraded)
{
	int i;

	memset(hv, 0, sizeof(*hv));
	hv->im[0] = a;
	hv->im[1] = b;
	for (i = 0; i < 2; i++) {
		if (!hv->im[i])
			continue;
		hv->h[i].base = hv->im[i]->base;
		hv->h[i].present = true;
		if (pmc_mirror_load(&hv->h[i]) == -EIO) {
			err("%s: media error reading its mirror info", hv->im[i]->dev.path);
			return EXIT_IO;
		}
		hv->h[i].holds_cache = holds_cache(hv->im[i]);
		hv->mirrored |= hv->h[i].has_info;
	}
	if (!hv->mirrored) {
		if (!b)
			return 0;
		err("--mirror: neither %s nor %s is a half of a mirrored cache",
		    a->dev.path, b->dev.path);
		return EXIT_USAGE;
	}
	pmc_mirror_decide(hv->h, degraded, &hv->plan);
	return 0;
}

struct pmc_image *pmctl_halves_holder(const struct pmctl_halves *hv)
{
	if (!hv->mirrored)
		return hv->im[0];
	return hv->plan.action == PMC_MIRROR_REFUSE ? NULL : hv->im[hv->plan.holder];
}

static const char *start_name(const struct pmctl_halves *hv)
{
	switch (hv->plan.action) {
	case PMC_MIRROR_BOTH:
		return "both";
	case PMC_MIRROR_RESYNC:
		return "copy";
	case PMC_MIRROR_DEGRADED:
		return "alone";
	default:
		return "refused";
	}
}

/* What a half's own info says of it. */
static const char *half_state(const struct pmc_mirror_half *h)
{
	if (h->info.flags & PMC_MIRROR_RESYNCING)
		return "being copied from its partner: no whole cache on its own";
	if (h->info.flags & PMC_MIRROR_PARTNER_STALE)
		return "ran alone: holds every acknowledged write, its partner is stale";
	return "in sync with its partner when last stopped: alone it cannot tell "
	       "whether the partner ran on since";
}

void pmctl_halves_print(const struct pmctl_halves *hv)
{
	const struct pmc_mirror_half *h;
	char u[37], p[37];
	int i;

	if (!hv->mirrored)
		return;
	for (i = 0; i < 2; i++) {
		h = &hv->h[i];
		if (!hv->im[i])
			continue;
		if (!h->has_info) {
			printf("  %-14s %s: no mirror info\n", "mirror", hv->im[i]->dev.path);
			continue;
		}
		pmc_format_uuid(h->info.half_uuid, u);
		pmc_format_uuid(h->info.partner_uuid, p);
		printf("  %-14s %s: half %s, partner %s, generation %llu: %s\n", "mirror",
		       hv->im[i]->dev.path, u, p, (unsigned long long)h->info.generation,
		       half_state(h));
	}
	if (hv->plan.action == PMC_MIRROR_REFUSE)
		printf("  %-14s refused: %s\n", "mirror start", hv->plan.why);
	else
		printf("  %-14s %s (%s holds every acknowledged write)\n", "mirror start",
		       start_name(hv), hv->im[hv->plan.holder]->dev.path);
}

static json_object *half_json(const struct pmc_image *im, const struct pmc_mirror_half *h)
{
	json_object *j = json_object_new_object();
	char u[37];

	json_object_object_add(j, "device", json_object_new_string(im->dev.path));
	json_object_object_add(j, "info", json_object_new_boolean(h->has_info));
	if (!h->has_info)
		return j;
	pmc_format_uuid(h->info.half_uuid, u);
	json_object_object_add(j, "half_uuid", json_object_new_string(u));
	pmc_format_uuid(h->info.partner_uuid, u);
	json_object_object_add(j, "partner_uuid", json_object_new_string(u));
	json_object_object_add(j, "generation", json_object_new_int64((int64_t)h->info.generation));
	json_object_object_add(j, "partner_stale",
			       json_object_new_boolean(h->info.flags & PMC_MIRROR_PARTNER_STALE));
	json_object_object_add(j, "resyncing",
			       json_object_new_boolean(h->info.flags & PMC_MIRROR_RESYNCING));
	return j;
}

json_object *pmctl_halves_json(const struct pmctl_halves *hv)
{
	json_object *j, *a;
	int i;

	if (!hv->mirrored)
		return NULL;
	j = json_object_new_object();
	a = json_object_new_array();
	for (i = 0; i < 2; i++)
		if (hv->im[i])
			json_object_array_add(a, half_json(hv->im[i], &hv->h[i]));
	json_object_object_add(j, "halves", a);
	json_object_object_add(j, "start", json_object_new_string(start_name(hv)));
	json_object_object_add(j, "holder", hv->plan.action == PMC_MIRROR_REFUSE ? NULL :
			       json_object_new_string(hv->im[hv->plan.holder]->dev.path));
	json_object_object_add(j, "reason", hv->plan.action == PMC_MIRROR_REFUSE ?
			       json_object_new_string(hv->plan.why) : NULL);
	return j;
}
