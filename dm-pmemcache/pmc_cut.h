/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Power-cut points of the test build (tests/test_window_cuts.py).
 *
 * pmc_cut_point(PMC_CUT_x) marks a window of the commit protocol (the
 * labels of docs/format.md).  The product module and userspace compile it
 * to nothing.  A module built with -DPMC_CUT_HOOKS (cut.c) has two
 * parameters: writing a point's name to cut_at arms it, and its
 * cut_after-th hit from then on ends the guest at once through QEMU's
 * isa-debug-exit device, like a power cut.
 */
#ifndef PMC_CUT_H
#define PMC_CUT_H

enum pmc_cut {
	PMC_CUT_NEW_W2,		/* new block: data fenced, no record yet */
	PMC_CUT_NEW_W3,		/* new block: record stored, not fenced */
	PMC_CUT_NEW_W4,		/* new block: record fenced, bio not completed */
	PMC_CUT_OVER_W2,	/* overwrite: the same windows, older copy live */
	PMC_CUT_OVER_W3,
	PMC_CUT_OVER_W4,	/* both copies live */
	PMC_CUT_OVER_W5,	/* older copy's FREE stored, not fenced */
	PMC_CUT_OVER_W6,	/* older copy dead, bio not completed */
	PMC_CUT_EVICT_E1,	/* eviction: FREE stored, not fenced (E2) */
	PMC_CUT_DISCARD_D1,	/* discard: a block's FREE fenced, lock held */
	PMC_CUT_THROUGH_T1,	/* write-through: origin written (FUA), no T2 */
	PMC_CUT_WB_START,	/* writeback: origin writes submitted */
	PMC_CUT_WB_WRITTEN,	/* origin writes completed, origin not flushed */
	PMC_CUT_WB_FLUSHED,	/* origin flushed, no CLEAN stored yet */
	PMC_CUT_WB_C1,		/* a CLEAN stored, not fenced (C2) */
	PMC_CUT_RECOVER_LOAD,	/* recovery: a live record put in the index */
	PMC_CUT_RECOVER_REPAIR,	/* recovery: a loser or torn record's FREE stored */
	PMC_CUT_NR
};

#if defined(__KERNEL__) && defined(PMC_CUT_HOOKS)
void pmc_cut_point(enum pmc_cut point);
#else
static inline void pmc_cut_point(enum pmc_cut point)
{
	(void)point;
}
#endif

#endif /* PMC_CUT_H */
