// SPDX-License-Identifier: GPL-2.0
/*
 * In-RAM index of dm-pmemcache (shared with userspace, see pmc_index.h).
 */
#include "pmc_index.h"

#define PMC_GOLDEN_64	0x61c8864680b583ebULL

int pmc_index_init(struct pmc_index *idx, u64 n_slots)
{
	u32 bits = 0;
	u64 i;

	memset(idx, 0, sizeof(*idx));
	if (!n_slots || n_slots >= PMC_NO_SLOT)
		return -EINVAL;
	/* Largest power of two <= n_slots: at most 4 bytes per slot. */
	while (bits < 31 && (2ULL << bits) <= n_slots)
		bits++;
	idx->n_slots = n_slots;
	idx->bucket_bits = bits;
	idx->slot = pmc_alloc_array(n_slots, sizeof(*idx->slot));
	idx->next = pmc_alloc_array(n_slots, sizeof(*idx->next));
	idx->bucket = pmc_alloc_array(1ULL << bits, sizeof(*idx->bucket));
	if (!idx->slot || !idx->next || !idx->bucket) {
		pmc_index_destroy(idx);
		return -ENOMEM;
	}
	for (i = 0; i < (1ULL << bits); i++)
		idx->bucket[i] = PMC_NO_SLOT;
	idx->free_head = PMC_NO_SLOT;
	return 0;
}

void pmc_index_destroy(struct pmc_index *idx)
{
	pmc_free_array(idx->slot);
	pmc_free_array(idx->next);
	pmc_free_array(idx->bucket);
	idx->slot = NULL;
	idx->next = NULL;
	idx->bucket = NULL;
}

size_t pmc_index_ram_bytes(const struct pmc_index *idx)
{
	return idx->n_slots * (sizeof(*idx->slot) + sizeof(*idx->next)) +
	       (sizeof(*idx->bucket) << idx->bucket_bits);
}

u32 pmc_index_bucket(const struct pmc_index *idx, u64 oblock)
{
	if (!idx->bucket_bits)
		return 0;
	return (u32)((oblock * PMC_GOLDEN_64) >> (64 - idx->bucket_bits));
}

u32 pmc_index_lookup(const struct pmc_index *idx, u64 oblock)
{
	u32 s = idx->bucket[pmc_index_bucket(idx, oblock)];

	while (s != PMC_NO_SLOT) {
		u64 v = idx->slot[s];

		if (pmc_slot_oblock(v) == oblock &&
		    !(pmc_slot_flags(v) & PMC_SF_STALE))
			return s;
		s = idx->next[s];
	}
	return PMC_NO_SLOT;
}

bool pmc_index_inflight(const struct pmc_index *idx, u64 oblock)
{
	u32 s = idx->bucket[pmc_index_bucket(idx, oblock)];

	while (s != PMC_NO_SLOT) {
		u64 v = idx->slot[s];

		if (pmc_slot_oblock(v) == oblock &&
		    (pmc_slot_flags(v) & PMC_SF_WB))
			return true;
		s = idx->next[s];
	}
	return false;
}

void pmc_index_insert(struct pmc_index *idx, u32 slot, u64 oblock, u32 mask,
		      u32 flags)
{
	u32 b = pmc_index_bucket(idx, oblock);

	WRITE_ONCE(idx->slot[slot],
		   pmc_slot_pack(oblock, mask, flags | PMC_SF_USED));
	idx->next[slot] = idx->bucket[b];
	idx->bucket[b] = slot;
}

void pmc_index_unlink(struct pmc_index *idx, u32 slot)
{
	u64 v = idx->slot[slot];
	u32 *p = &idx->bucket[pmc_index_bucket(idx, pmc_slot_oblock(v))];

	while (*p != PMC_NO_SLOT) {
		if (*p == slot) {
			*p = idx->next[slot];
			break;
		}
		p = &idx->next[*p];
	}
	idx->next[slot] = PMC_NO_SLOT;
	WRITE_ONCE(idx->slot[slot], pmc_slot_pack(0, 0, 0));
}

void pmc_index_set_flags(struct pmc_index *idx, u32 slot, u32 set, u32 clear)
{
	u64 v = idx->slot[slot];
	u32 f = (pmc_slot_flags(v) & ~clear) | set;

	WRITE_ONCE(idx->slot[slot],
		   pmc_slot_pack(pmc_slot_oblock(v), pmc_slot_mask(v), f));
}

void pmc_index_push_free(struct pmc_index *idx, u32 slot)
{
	WRITE_ONCE(idx->slot[slot], pmc_slot_pack(0, 0, 0));
	idx->next[slot] = idx->free_head;
	idx->free_head = slot;
	idx->n_free++;
}

u32 pmc_index_pop_free(struct pmc_index *idx)
{
	u32 s = idx->free_head;

	if (s == PMC_NO_SLOT)
		return s;
	idx->free_head = idx->next[s];
	idx->next[s] = PMC_NO_SLOT;
	idx->n_free--;
	return s;
}
