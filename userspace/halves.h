/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The halves of a mirrored cache offline, for check and drain: what each
 * half's mirror info says, and which half holds every acknowledged write,
 * decided by the module's own pmc_mirror_decide() (docs/format.md,
 * "Mirrored cache"), so that the tool and the kernel cannot disagree.
 */
#ifndef PMCTL_HALVES_H
#define PMCTL_HALVES_H

#include <json-c/json.h>

#include "libpmc.h"
#include "pmc_mirror.h"

struct pmctl_halves {
	struct pmc_image *im[2];	/* PMEMDEV, and --mirror's or NULL */
	struct pmc_mirror_half h[2];
	bool mirrored;			/* either device has mirror info */
	struct pmc_mirror_plan plan;	/* if mirrored */
};

/*
 * Read the info of @a and of @b (NULL: PMEMDEV alone) and decide as a
 * start of the module would, @degraded its override.  0, or an exit code
 * after one line (a media error, or --mirror beside no mirrored cache).
 */
int pmctl_halves_read(struct pmctl_halves *hv, struct pmc_image *a,
		      struct pmc_image *b, bool degraded);

/* The image to read the cache from, or NULL if the start is refused. */
struct pmc_image *pmctl_halves_holder(const struct pmctl_halves *hv);

/* check's lines and JSON object "mirror" (NULL if not mirrored). */
void pmctl_halves_print(const struct pmctl_halves *hv);
json_object *pmctl_halves_json(const struct pmctl_halves *hv);

#endif /* PMCTL_HALVES_H */
