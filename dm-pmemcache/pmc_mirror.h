/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache mirror info: which half of a mirrored cache holds every
 * acknowledged write, and the steps that change it.  Shared by the kernel
 * module and the host tests (pmc_shim.h); docs/format.md, "Mirrored
 * cache", gives the protocol and its power-cut points (M1, R1..R5).
 *
 * The policy, pmc_mirror_decide(), takes what the two halves say and
 * returns what to do; it sleeps on nothing and touches no device.
 */
#ifndef PMC_MIRROR_H
#define PMC_MIRROR_H

#include "pmc_shim.h"
#include "pmemcache_format.h"

/* One half's info in CPU byte order. */
struct pmc_mirror_state {
	u64 seq;
	u8 pair_uuid[16];
	u8 half_uuid[16];
	u8 partner_uuid[16];
	u64 generation;
	u64 resync_pos;
	u32 flags;
};

struct pmc_mirror_half {
	u8 *base;		/* kaddr of byte 0 of the half's device */
	bool present;		/* the device is there (not "-" in the table) */
	bool holds_cache;	/* a valid superblock (of this cache if has_info) */
	bool has_info;		/* a valid slot was read: info below */
	u32 slot;		/* the slot that holds info */
	struct pmc_mirror_state info;
};

/*
 * Read a half's info.  0: h->info holds it; -ENODATA: no valid slot (a
 * blank device or a single-device cache); -EIO: a slot could not be read
 * (then neither may be trusted: the unreadable one may be the newer).
 */
int pmc_mirror_load(struct pmc_mirror_half *h);

/*
 * The same from the slots' bytes, already read (pmemcachectl's probe):
 * h->has_info and h->info of the valid slot with the higher seq.
 */
void pmc_mirror_parse(const struct pmc_mirror_info mi[PMC_MIRROR_INFO_SLOTS],
		      struct pmc_mirror_half *h);

/*
 * S1: zero every slot that holds no valid info, then read the info again
 * (same returns as pmc_mirror_load()).  A cut leaves the words of an
 * update that was never fenced in its slot; a later update of the same
 * slot, cut too, could complete them into an info that was never meant to
 * count, long after.  So a start scrubs each half before it decides or
 * stores anything; only a half it will use, or overwrite, is scrubbed.
 */
int pmc_mirror_scrub(struct pmc_mirror_half *h);

enum pmc_mirror_action {
	PMC_MIRROR_REFUSE,	/* why says what is wrong */
	PMC_MIRROR_BOTH,	/* both current: run on both */
	PMC_MIRROR_RESYNC,	/* copy current to the other half, then both */
	PMC_MIRROR_DEGRADED,	/* run on current alone */
};

struct pmc_mirror_plan {
	enum pmc_mirror_action action;
	u32 holder;		/* the half that holds every acknowledged write */
	bool mark_alone;	/* DEGRADED: M1 before the first write */
	const char *why;
};

/*
 * What to start from the infos of halves 0 and 1 (present or not, read by
 * pmc_mirror_load()).  @degraded_ok is the administrator's override: a
 * half that does not know whether its partner ran alone is taken as
 * current.  Never returns a half as current that may miss an
 * acknowledged write, unless @degraded_ok.
 */
void pmc_mirror_decide(const struct pmc_mirror_half h[2], bool degraded_ok,
		       struct pmc_mirror_plan *plan);

/* M1: @cur runs without its partner: a new generation, partner stale. */
void pmc_mirror_mark_alone(struct pmc_mirror_half *cur);

/*
 * R1, R2: start copying @cur to @tgt.  @cur records @tgt as its stale
 * partner, then @tgt is marked RESYNCING.  A half without info gets a
 * random identity; @pair_uuid is the cache's.  Returns the position the
 * copy resumes from: @tgt's R3 mark if it was already being copied from
 * @cur (a cut or a reload stopped it), else 0.
 */
u64 pmc_mirror_resync_begin(struct pmc_mirror_half *cur,
			     struct pmc_mirror_half *tgt,
			     const u8 pair_uuid[16]);

/* R3: @tgt holds every slot below @pos. */
void pmc_mirror_resync_progress(struct pmc_mirror_half *tgt, u64 pos);

/* R4, R5: the copy is complete: both halves current, @cur first. */
void pmc_mirror_resync_end(struct pmc_mirror_half *cur,
			   struct pmc_mirror_half *tgt);

#endif /* PMC_MIRROR_H */
