// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache mirror info: the two torn-safe slots of each half, the
 * policy that picks the half holding every acknowledged write, and the
 * steps of the mirror protocol (docs/format.md, "Mirrored cache").
 *
 * Shared verbatim by the kernel module and the host tests (pmc_shim.h).
 */
#include "pmc_mirror.h"

/* Why a start is refused: one line each, the table's error. */
#define PMC_MIRROR_WHY_OTHER_CACHE \
	"the two pmem devices are halves of different caches"
#define PMC_MIRROR_WHY_SAME_HALF \
	"both pmem devices hold the same half (a copy of one device?)"
#define PMC_MIRROR_WHY_BOTH_RESYNCING \
	"neither half holds the whole cache: both were being resynced"
#define PMC_MIRROR_WHY_FOREIGN_COPY \
	"the half under resync copies a half that may hold newer writes (degraded overrides)"
#define PMC_MIRROR_WHY_PARTNER_MISSING \
	"the other half's last partner is missing, may hold newer writes (degraded overrides)"
#define PMC_MIRROR_WHY_SPLIT_BRAIN \
	"both halves ran alone (split brain): start one alone with degraded, replace the other"
#define PMC_MIRROR_WHY_GENERATIONS \
	"the halves' generations disagree: the half that ran alone does not know the other"
#define PMC_MIRROR_WHY_NOT_PAIRED \
	"the halves do not name each other as partners at one generation"
#define PMC_MIRROR_WHY_ONLY_RESYNCING \
	"the only half with mirror info was being resynced: it holds no whole cache"
#define PMC_MIRROR_WHY_CANNOT_TELL \
	"the other half is missing and may have run alone since (degraded overrides)"
#define PMC_MIRROR_WHY_NOT_PARTNER \
	"the other device is not this half's partner, which may have run alone (degraded overrides)"
#define PMC_MIRROR_WHY_TWO_CACHES \
	"both pmem devices hold a cache and neither is a mirror half"
#define PMC_MIRROR_WHY_NO_INFO \
	"one half is missing and the other holds no mirror info"
#define PMC_MIRROR_WHY_NOT_BLANK \
	"the other pmem device is not blank and no half of this cache"

static u8 *pmc_mirror_slot(const struct pmc_mirror_half *h, u32 slot)
{
	return h->base + PMC_MIRROR_INFO_OFFSET + slot * PMC_MIRROR_INFO_SIZE;
}

static u32 pmc_mirror_csum(const struct pmc_mirror_info *mi)
{
	return pmc_crc32c(~0U, mi, offsetof(struct pmc_mirror_info, csum));
}

void pmc_mirror_parse(const struct pmc_mirror_info mi[PMC_MIRROR_INFO_SLOTS],
		      struct pmc_mirror_half *h)
{
	u32 slot;

	h->has_info = false;
	for (slot = 0; slot < PMC_MIRROR_INFO_SLOTS; slot++) {
		const struct pmc_mirror_info *m = &mi[slot];
		u64 seq;

		if (le64_to_cpu(m->magic) != PMC_MIRROR_MAGIC ||
		    le32_to_cpu(m->csum) != pmc_mirror_csum(m) ||
		    (le32_to_cpu(m->flags) & ~PMC_MIRROR_FLAGS))
			continue;
		seq = le64_to_cpu(m->seq);
		if (h->has_info && seq <= h->info.seq)
			continue;
		h->has_info = true;
		h->slot = slot;
		h->info.seq = seq;
		memcpy(h->info.pair_uuid, m->pair_uuid, 16);
		memcpy(h->info.half_uuid, m->half_uuid, 16);
		memcpy(h->info.partner_uuid, m->partner_uuid, 16);
		h->info.generation = le64_to_cpu(m->generation);
		h->info.resync_pos = le64_to_cpu(m->resync_pos);
		h->info.flags = le32_to_cpu(m->flags);
	}
}

int pmc_mirror_load(struct pmc_mirror_half *h)
{
	struct pmc_mirror_info mi[PMC_MIRROR_INFO_SLOTS];
	u32 slot;

	h->has_info = false;
	for (slot = 0; slot < PMC_MIRROR_INFO_SLOTS; slot++) {
		/* an unreadable slot may be the newer one: trust neither */
		if (pmc_pmem_read(&mi[slot], pmc_mirror_slot(h, slot),
				  sizeof(mi[slot])))
			return -EIO;
	}
	pmc_mirror_parse(mi, h);
	return h->has_info ? 0 : -ENODATA;
}

int pmc_mirror_scrub(struct pmc_mirror_half *h)
{
	static const u8 zero[PMC_MIRROR_INFO_SIZE];
	u8 buf[PMC_MIRROR_INFO_SIZE];
	bool wrote = false;
	u32 slot;
	int err;

	err = pmc_mirror_load(h);
	if (err == -EIO)
		return err;
	for (slot = 0; slot < PMC_MIRROR_INFO_SLOTS; slot++) {
		if (h->has_info && slot == h->slot)
			continue;
		if (pmc_pmem_read(buf, pmc_mirror_slot(h, slot), sizeof(buf)))
			return -EIO;
		if (!memcmp(buf, zero, sizeof(buf)))
			continue;
		pmc_pmem_write(pmc_mirror_slot(h, slot), zero, sizeof(zero),
			       PMC_P_MIRROR);
		wrote = true;
	}
	if (!wrote)
		return err;
	pmc_pmem_fence(PMC_P_MIRROR);
	return pmc_mirror_load(h);
}

/*
 * Make @st the half's info: written whole into the slot that does not
 * hold the current info, then fenced.  A cut before the fence leaves the
 * old info or the new one, never a mixture (a torn slot fails its csum).
 */
static void pmc_mirror_store(struct pmc_mirror_half *h,
			     const struct pmc_mirror_state *st)
{
	struct pmc_mirror_info mi;
	u32 slot = h->has_info ? h->slot ^ 1 : 0;

	memset(&mi, 0, sizeof(mi));
	mi.magic = cpu_to_le64(PMC_MIRROR_MAGIC);
	mi.seq = cpu_to_le64(h->has_info ? h->info.seq + 1 : 1);
	memcpy(mi.pair_uuid, st->pair_uuid, 16);
	memcpy(mi.half_uuid, st->half_uuid, 16);
	memcpy(mi.partner_uuid, st->partner_uuid, 16);
	mi.generation = cpu_to_le64(st->generation);
	mi.resync_pos = cpu_to_le64(st->resync_pos);
	mi.flags = cpu_to_le32(st->flags);
	mi.csum = cpu_to_le32(pmc_mirror_csum(&mi));
	pmc_pmem_write(pmc_mirror_slot(h, slot), &mi, sizeof(mi), PMC_P_MIRROR);
	pmc_pmem_fence(PMC_P_MIRROR);

	h->info = *st;
	h->info.seq = le64_to_cpu(mi.seq);
	h->slot = slot;
	h->has_info = true;
}

static bool pmc_uuid_eq(const u8 *a, const u8 *b)
{
	return !memcmp(a, b, 16);
}

static const char *pmc_mirror_take(struct pmc_mirror_plan *plan,
				   enum pmc_mirror_action action, u32 holder)
{
	plan->action = action;
	plan->holder = holder;
	return NULL;
}

/* Both halves have info.  Returns why they are refused, or NULL. */
static const char *pmc_mirror_decide_pair(const struct pmc_mirror_half h[2],
					  bool degraded_ok,
					  struct pmc_mirror_plan *plan)
{
	const struct pmc_mirror_state *a = &h[0].info, *b = &h[1].info;
	const struct pmc_mirror_state *c, *t;
	u32 cur;

	if (!pmc_uuid_eq(a->pair_uuid, b->pair_uuid))
		return PMC_MIRROR_WHY_OTHER_CACHE;
	if (pmc_uuid_eq(a->half_uuid, b->half_uuid))
		return PMC_MIRROR_WHY_SAME_HALF;

	if (a->flags & b->flags & PMC_MIRROR_RESYNCING)
		return PMC_MIRROR_WHY_BOTH_RESYNCING;
	if ((a->flags | b->flags) & PMC_MIRROR_RESYNCING) {
		cur = (a->flags & PMC_MIRROR_RESYNCING) ? 1 : 0;
		c = &h[cur].info;
		t = &h[cur ^ 1].info;
		/*
		 * The copy starts again from the half it came from, if that
		 * one ran alone or last ran with this very target (R4 done,
		 * R5 not).
		 */
		if (degraded_ok)
			return pmc_mirror_take(plan, PMC_MIRROR_RESYNC, cur);
		if (!pmc_uuid_eq(t->partner_uuid, c->half_uuid))
			return PMC_MIRROR_WHY_FOREIGN_COPY;
		if (!(c->flags & PMC_MIRROR_PARTNER_STALE) &&
		    !pmc_uuid_eq(c->partner_uuid, t->half_uuid))
			return PMC_MIRROR_WHY_PARTNER_MISSING;
		return pmc_mirror_take(plan, PMC_MIRROR_RESYNC, cur);
	}

	if (a->flags & b->flags & PMC_MIRROR_PARTNER_STALE)
		return PMC_MIRROR_WHY_SPLIT_BRAIN;
	if ((a->flags | b->flags) & PMC_MIRROR_PARTNER_STALE) {
		cur = (a->flags & PMC_MIRROR_PARTNER_STALE) ? 0 : 1;
		c = &h[cur].info;
		t = &h[cur ^ 1].info;
		/* The stale half must be the one the current half left behind. */
		if (!pmc_uuid_eq(t->partner_uuid, c->half_uuid) ||
		    t->generation >= c->generation)
			return PMC_MIRROR_WHY_GENERATIONS;
		return pmc_mirror_take(plan, PMC_MIRROR_RESYNC, cur);
	}

	if (!pmc_uuid_eq(a->partner_uuid, b->half_uuid) ||
	    !pmc_uuid_eq(b->partner_uuid, a->half_uuid) ||
	    a->generation != b->generation)
		return PMC_MIRROR_WHY_NOT_PAIRED;
	return pmc_mirror_take(plan, PMC_MIRROR_BOTH, 0);
}

/* One half has info, the other none or is missing. */
static const char *pmc_mirror_decide_one(const struct pmc_mirror_half h[2],
					 bool degraded_ok,
					 struct pmc_mirror_plan *plan)
{
	u32 cur = h[0].has_info ? 0 : 1;
	const struct pmc_mirror_state *c = &h[cur].info;
	bool alone = c->flags & PMC_MIRROR_PARTNER_STALE;

	if (c->flags & PMC_MIRROR_RESYNCING)
		return PMC_MIRROR_WHY_ONLY_RESYNCING;
	if (!h[cur ^ 1].present) {
		if (!alone && !degraded_ok)
			return PMC_MIRROR_WHY_CANNOT_TELL;
		plan->mark_alone = !alone;
		return pmc_mirror_take(plan, PMC_MIRROR_DEGRADED, cur);
	}
	/* The other device has no info: a replacement for the partner. */
	if (!alone && !degraded_ok)
		return PMC_MIRROR_WHY_NOT_PARTNER;
	return pmc_mirror_take(plan, PMC_MIRROR_RESYNC, cur);
}

void pmc_mirror_decide(const struct pmc_mirror_half h[2], bool degraded_ok,
		       struct pmc_mirror_plan *plan)
{
	plan->action = PMC_MIRROR_REFUSE;
	plan->holder = 0;
	plan->mark_alone = false;
	if (h[0].has_info && h[1].has_info)
		plan->why = pmc_mirror_decide_pair(h, degraded_ok, plan);
	else if (h[0].has_info || h[1].has_info)
		plan->why = pmc_mirror_decide_one(h, degraded_ok, plan);
	else if (!h[0].present || !h[1].present)
		plan->why = PMC_MIRROR_WHY_NO_INFO;
	else if (h[0].holds_cache && h[1].holds_cache)
		plan->why = PMC_MIRROR_WHY_TWO_CACHES;
	else
		/* A single-device cache given a mirror, or a new pair. */
		plan->why = pmc_mirror_take(plan, PMC_MIRROR_RESYNC,
					    h[1].holds_cache ? 1 : 0);
	/* As with one device, only a blank device is copied over. */
	if (!plan->why && plan->action == PMC_MIRROR_RESYNC &&
	    !h[plan->holder ^ 1].has_info && h[plan->holder ^ 1].holds_cache)
		plan->why = PMC_MIRROR_WHY_NOT_BLANK;
	if (plan->why)
		plan->action = PMC_MIRROR_REFUSE;
}

void pmc_mirror_mark_alone(struct pmc_mirror_half *cur)
{
	struct pmc_mirror_state st = cur->info;

	if (st.flags & PMC_MIRROR_PARTNER_STALE)
		return;
	st.generation++;
	st.flags |= PMC_MIRROR_PARTNER_STALE;
	pmc_mirror_store(cur, &st);	/* M1 */
}

u64 pmc_mirror_resync_begin(struct pmc_mirror_half *cur,
			    struct pmc_mirror_half *tgt,
			    const u8 pair_uuid[16])
{
	struct pmc_mirror_state st;
	u8 tgt_uuid[16];
	u64 pos = 0;

	if (tgt->has_info && pmc_uuid_eq(tgt->info.pair_uuid, pair_uuid))
		memcpy(tgt_uuid, tgt->info.half_uuid, 16);
	else
		pmc_random_bytes(tgt_uuid, 16);

	/* R1: the current half holds the only whole copy from now on. */
	if (cur->has_info) {
		st = cur->info;
	} else {
		memset(&st, 0, sizeof(st));
		memcpy(st.pair_uuid, pair_uuid, 16);
		pmc_random_bytes(st.half_uuid, 16);
	}
	if (!(st.flags & PMC_MIRROR_PARTNER_STALE) || !cur->has_info ||
	    !pmc_uuid_eq(st.partner_uuid, tgt_uuid)) {
		if (!(st.flags & PMC_MIRROR_PARTNER_STALE))
			st.generation++;
		st.flags = PMC_MIRROR_PARTNER_STALE;
		memcpy(st.partner_uuid, tgt_uuid, 16);
		pmc_mirror_store(cur, &st);
	}

	/*
	 * The same copy again: the slots below its R3 mark stay copied
	 * (every store since went to both halves; what a cut or a run alone
	 * changed there changed a record too, and the start copies those).
	 */
	if (tgt->has_info && (tgt->info.flags & PMC_MIRROR_RESYNCING) &&
	    pmc_uuid_eq(tgt->info.pair_uuid, pair_uuid) &&
	    pmc_uuid_eq(tgt->info.partner_uuid, cur->info.half_uuid))
		pos = tgt->info.resync_pos;

	/* R2: the target is no cache on its own until R5. */
	memset(&st, 0, sizeof(st));
	memcpy(st.pair_uuid, pair_uuid, 16);
	memcpy(st.half_uuid, tgt_uuid, 16);
	memcpy(st.partner_uuid, cur->info.half_uuid, 16);
	st.generation = cur->info.generation;
	st.flags = PMC_MIRROR_RESYNCING | PMC_MIRROR_COPY_ONLINE;
	st.resync_pos = pos;
	pmc_mirror_store(tgt, &st);
	/* into both slots: an older module must find no info it knows */
	pmc_mirror_store(tgt, &st);
	return pos;
}

void pmc_mirror_resync_progress(struct pmc_mirror_half *tgt, u64 pos)
{
	struct pmc_mirror_state st = tgt->info;

	st.resync_pos = pos;
	pmc_mirror_store(tgt, &st);	/* R3 */
}

void pmc_mirror_resync_end(struct pmc_mirror_half *cur,
			   struct pmc_mirror_half *tgt)
{
	struct pmc_mirror_state st = cur->info;

	/*
	 * R4: the current half no longer runs alone; the target still says
	 * RESYNCING, so a cut here copies again (and finds nothing).
	 */
	st.generation++;
	st.flags = 0;
	memcpy(st.partner_uuid, tgt->info.half_uuid, 16);
	pmc_mirror_store(cur, &st);

	/* R5: the target is current. */
	st = tgt->info;
	st.generation = cur->info.generation;
	st.flags = 0;
	st.resync_pos = 0;
	pmc_mirror_store(tgt, &st);
}
