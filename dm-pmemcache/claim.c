// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: who owns which pmem and which origin sectors.
 *
 * dm core opens every device of every table with one shared holder, so
 * the block layer lets two tables, or two targets of one table, use the
 * same pmem: two caches in one namespace overwrite each other's blocks
 * and lose acknowledged writes.  Every constructed target therefore
 * registers what it owns, and a new one is refused when it meets an
 * existing one:
 *
 *   cache   the pfns of its pmem (a partition, the whole namespace or a
 *           dm device over it all resolve to the same pfns), and the
 *           disk sectors of its pmem device;
 *   origin  the disk sectors [start, start + len) that it caches.
 *
 * Two targets conflict when their caches meet, when their origins meet,
 * or when the cache of one meets the origin of the other (or its own).
 * A table reload is the one case where one mapped device briefly has two
 * tables: its new table may claim what its old table claims (the same
 * cache for the same origin, over a length that may differ: an origin
 * that grew), but not a part of that cache, and not the same origin with
 * another cache: the old cache's dirty blocks would be hidden behind the
 * new one.  A mirrored cache's reload may drop a half or take another
 * (pmemcachectl replace) as long as it keeps one of its halves whole:
 * that half's mirror info decides at the first resume what is copied
 * where, and refuses what would lose a write (mirror.c).
 */
#include <linux/blkdev.h>

#include "pmemcache.h"

static LIST_HEAD(pmc_claims);
static DEFINE_MUTEX(pmc_claims_lock);

static bool pmc_meet(u64 a_first, u64 a_end, u64 b_first, u64 b_end)
{
	return a_first < b_end && b_first < a_end;
}

static bool pmc_cache_cache(const struct pmc_claim_cache *a,
			    const struct pmc_claim_cache *b)
{
	return pmc_meet(a->pfn_first, a->pfn_end, b->pfn_first, b->pfn_end) ||
	       (a->disk == b->disk && pmc_meet(a->first, a->end, b->first, b->end));
}

/* Does a pmem device of @a meet one of @b? */
static bool pmc_cache_meets(const struct pmc_claim *a, const struct pmc_claim *b)
{
	unsigned int i, j;

	for (i = 0; i < a->n_cache; i++)
		for (j = 0; j < b->n_cache; j++)
			if (pmc_cache_cache(&a->cache[i], &b->cache[j]))
				return true;
	return false;
}

static bool pmc_origin_meets(const struct pmc_claim *a, const struct pmc_claim *b)
{
	return a->origin_disk == b->origin_disk &&
	       pmc_meet(a->origin_first, a->origin_end, b->origin_first, b->origin_end);
}

/* Does a pmem device of @a meet the origin of @b? */
static bool pmc_cache_meets_origin(const struct pmc_claim *a,
				   const struct pmc_claim *b)
{
	const struct pmc_claim_cache *c;
	unsigned int i;

	for (i = 0; i < a->n_cache; i++) {
		c = &a->cache[i];
		if (c->disk == b->origin_disk &&
		    pmc_meet(c->first, c->end, b->origin_first, b->origin_end))
			return true;
	}
	return false;
}

/* The same cache for the same origin; the table may be longer or shorter. */
static bool pmc_same_claim(const struct pmc_claim *a, const struct pmc_claim *b)
{
	unsigned int i;

	if (a->n_cache != b->n_cache)
		return false;
	for (i = 0; i < a->n_cache; i++)
		if (a->cache[i].pfn_first != b->cache[i].pfn_first ||
		    a->cache[i].pfn_end != b->cache[i].pfn_end)
			return false;
	return a->origin_disk == b->origin_disk &&
	       a->origin_first == b->origin_first;
}

/* A reload of a mirrored cache that keeps one of its halves, same origin. */
static bool pmc_keeps_a_half(const struct pmc_claim *n, const struct pmc_claim *c)
{
	unsigned int i, j;

	if (n->n_cache + c->n_cache < 3 || n->origin_disk != c->origin_disk ||
	    n->origin_first != c->origin_first)
		return false;
	for (i = 0; i < n->n_cache; i++)
		for (j = 0; j < c->n_cache; j++)
			if (n->cache[i].pfn_first == c->cache[j].pfn_first &&
			    n->cache[i].pfn_end == c->cache[j].pfn_end)
				return true;
	return false;
}

/* Why @n may not be constructed beside @c, or NULL. */
static const char *pmc_conflict(const struct pmc_claim *n,
				const struct pmc_claim *c)
{
	if (pmc_cache_meets_origin(n, c) || pmc_cache_meets_origin(c, n))
		return "pmem device overlaps the origin of another pmemcache target";
	if (c->md == n->md && c->table != n->table) {
		/* A reload of the same mapped device. */
		if ((pmc_cache_meets(n, c) || pmc_origin_meets(n, c)) &&
		    !pmc_same_claim(n, c) && !pmc_keeps_a_half(n, c))
			return "a reload may not change a live cache's pmem device or origin";
		return NULL;
	}
	if (pmc_cache_meets(n, c))
		return c->table == n->table ?
		       "pmem device overlaps the cache of another target of this table" :
		       "pmem device overlaps the cache of another device";
	if (pmc_origin_meets(n, c))
		return c->table == n->table ?
		       "origin overlaps the origin of another target of this table" :
		       "origin is already cached by another device";
	return NULL;
}

static void pmc_claim_cache_set(struct pmc_claim_cache *c,
				struct block_device *bdev, pfn_t pfn, u64 bytes)
{
	c->pfn_first = pfn_t_to_pfn(pfn);
	c->pfn_end = c->pfn_first + (bytes >> PAGE_SHIFT);
	c->disk = bdev->bd_disk;
	c->first = get_start_sect(bdev);
	c->end = c->first + bdev_nr_sectors(bdev);
}

/*
 * Register what @pc owns, after its pmem was mapped (pmc_pmem_claim()).
 * Returns 0, or -EBUSY with @error set.
 */
int pmc_claim(struct pmemcache *pc, char **error)
{
	struct block_device *origin = pc->origin->bdev;
	struct pmc_claim *n = &pc->claim;
	const char *why = NULL;
	struct pmc_claim *c;

	n->md = dm_table_get_md(pc->ti->table);
	n->table = pc->ti->table;
	/* each pmem device whole, not only the part the cache uses */
	pmc_claim_cache_set(&n->cache[0], pc->pmem_dev->bdev, pc->pfn,
			    bdev_nr_bytes(pc->pmem_dev->bdev));
	n->n_cache = 1;
	if (pc->mirror.dev) {
		pmc_claim_cache_set(&n->cache[1], pc->mirror.dev->bdev,
				    pc->mirror.pfn, pc->mirror.bytes);
		n->n_cache = 2;
		if (pmc_cache_cache(&n->cache[0], &n->cache[1])) {
			*error = "mirror: both halves are the same pmem device";
			return -EINVAL;
		}
	}
	n->origin_disk = origin->bd_disk;
	n->origin_first = get_start_sect(origin);
	n->origin_end = n->origin_first + pc->ti->len;
	if (pmc_cache_meets_origin(n, n)) {
		*error = "pmem device and origin overlap";
		return -EBUSY;
	}

	mutex_lock(&pmc_claims_lock);
	list_for_each_entry(c, &pmc_claims, list) {
		why = pmc_conflict(n, c);
		if (why)
			break;
	}
	if (!why)
		list_add(&n->list, &pmc_claims);
	mutex_unlock(&pmc_claims_lock);
	if (why) {
		*error = (char *)why;
		return -EBUSY;
	}
	return 0;
}

void pmc_unclaim(struct pmemcache *pc)
{
	if (list_empty(&pc->claim.list))
		return;
	mutex_lock(&pmc_claims_lock);
	list_del_init(&pc->claim.list);
	mutex_unlock(&pmc_claims_lock);
}
