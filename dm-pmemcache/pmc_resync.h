/* SPDX-License-Identifier: GPL-2.0 */
/*
 * dm-pmemcache resync (pmc_resync.c): making the other half of a mirror
 * equal to the half that holds every acknowledged write, between the
 * marks R2 and R4 of docs/format.md ("Mirrored cache", "the copy,
 * online").  Shared by the kernel module (mirror.c) and the host crash
 * model (tests/host/crash_model.c), which runs this copy with writers
 * running and power cuts at any store.
 *
 * The holder's bytes are read at @src, the target's written at @dst:
 * byte 0 of each half.  Every store of the copy is to the target alone;
 * the writers' stores go to both halves meanwhile (pmc_meta_store()).
 */
#ifndef PMC_RESYNC_H
#define PMC_RESYNC_H

#include "pmc_mirror.h"
#include "pmc_io.h"

/* Slots of the online copy between two R3 marks (4 MiB of 4 KiB blocks). */
#define PMC_RESYNC_MARK_SLOTS	1024U

/*
 * Do the halves differ in what a recovery reads: the superblock area (but
 * the info slots, each half's own) or a record?  The data of a live slot
 * cannot differ when its record does not: it was fenced on both halves
 * (W2) before the record was stored.  1, 0, or -EIO (a half could not be
 * read).  @buf holds @len bytes (even, at least 2 * 4096).
 */
int pmc_resync_differ(struct pmemcache *pc, const struct pmc_meta *m,
		      const u8 *src, const u8 *dst, u8 *buf, u32 len);

/*
 * The copy's first part, before any I/O: the superblock area, then every
 * record that differs on the target, with its data if it is live and
 * below the position @pos the copy resumes from (there a record that
 * differs is the only trace of what changed since those slots were
 * copied), the data fenced before its record.  m->base is the holder's.
 * 0 or -EIO.
 */
int pmc_resync_records(struct pmemcache *pc, const struct pmc_meta *m,
		       const u8 *src, u8 *dst, u64 pos, u8 *buf, u32 len);

/*
 * The online part, one slot: the data of @slot if it is live.  Under the
 * read lock of its block's stripe a slot that still maps that block keeps
 * its data (freeing a slot takes the write lock); a slot taken anew since
 * the start was written to both halves.  Bytes copied (0: nothing to
 * copy), or -EIO (the holder's copy is unreadable).  Not fenced: see
 * pmc_resync_batch_end().
 */
int pmc_resync_slot(struct pmemcache *pc, const struct pmc_meta *m,
		    struct pmc_index *idx, const u8 *src, u8 *dst, u32 slot,
		    u8 *buf);

/*
 * A batch of pmc_resync_slot() copied every slot below @next: fence them,
 * then R3 (@tgt holds every slot below @next) once @mark_every slots came
 * since the last mark, or R4 and R5 when @next is @n_blocks.  The caller
 * excludes a half being dropped meanwhile.  True when the copy ended.
 */
bool pmc_resync_batch_end(struct pmc_mirror_half *cur,
			  struct pmc_mirror_half *tgt, u64 next, u64 n_blocks,
			  u32 mark_every);

#endif /* PMC_RESYNC_H */
