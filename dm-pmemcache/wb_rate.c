// SPDX-License-Identifier: GPL-2.0
/*
 * dm-pmemcache: the writeback rate between the watermarks.
 *
 * Above high_watermark (and for flush, cleaner and a starved writer)
 * writeback runs flat out; below low_watermark it only writes blocks
 * older than max_age.  In between, a PI controller in the spirit of
 * bcache's writeback_rate sets the pace: it steers the dirty count to
 * the low watermark, writing 1/PMC_RATE_P_INV of the excess per second,
 * plus an integral term that grows while the excess lasts so that a
 * steady write load is matched.  Foreground I/O thus keeps most of the
 * origin.  A cache that has seen no foreground bio for PMC_RATE_IDLE
 * lets writeback run at full speed: nobody is waiting for the origin.
 *
 * The rate is spent as tokens (block-jiffies, so that slow rates still
 * earn some each tick); a pass may overdraw them by one stripe, which the
 * next passes pay back.  Only the writeback worker
 * calls these, so the state needs no lock.
 */
#include <linux/jiffies.h>
#include <linux/math64.h>

#include "pmemcache.h"

#define PMC_RATE_P_INV	40	/* bcache: writeback_rate_p_term_inverse */
#define PMC_RATE_I_INV	10000	/* bcache: writeback_rate_i_term_inverse */
#define PMC_RATE_MIN	8	/* blocks per second */
#define PMC_RATE_IDLE	HZ

void pmc_rate_init(struct pmemcache *pc)
{
	struct pmc_rate *rc = &pc->rc;

	rc->rate = 0;
	rc->integral = 0;
	rc->tokens = 0;
	rc->stamp = jiffies;
	rc->last_fg = jiffies;
}

/* The dirty block count the controller steers to: low_watermark. */
u64 pmc_rate_target(struct pmemcache *pc)
{
	return div_u64(pc->meta.n_blocks * READ_ONCE(pc->low_wm), 100);
}

/* Recompute the rate and add the tokens earned since the last call. */
u64 pmc_rate_update(struct pmemcache *pc)
{
	struct pmc_rate *rc = &pc->rc;
	unsigned long now = jiffies, dt = now - rc->stamp;
	s64 dirty = atomic64_read(&pc->n_dirty), err, rate;

	err = dirty - (s64)pmc_rate_target(pc);
	rc->integral += err * (s64)dt;
	rc->integral = clamp_t(s64, rc->integral, 0,
			       (s64)pc->meta.n_blocks * PMC_RATE_I_INV * HZ);
	rate = max_t(s64, div_s64(err, PMC_RATE_P_INV) +
		     div_s64(rc->integral, PMC_RATE_I_INV * HZ), PMC_RATE_MIN);
	if (time_after(now, READ_ONCE(rc->last_fg) + PMC_RATE_IDLE))
		rate = 0;

	if (rate && rc->rate) {
		rc->tokens += rate * (s64)dt;
		/* At most one second of burst. */
		rc->tokens = min_t(s64, rc->tokens,
				   max_t(s64, rate, pc->stripe_blocks) * HZ);
	} else {
		rc->tokens = rate ? max_t(s64, pc->stripe_blocks, 1) * HZ : 0;
	}
	rc->stamp = now;
	WRITE_ONCE(rc->rate, rate);
	return rate;
}

/*
 * How many blocks the next pass may take; 0 and the delay until tokens
 * are there when none are.
 */
unsigned int pmc_rate_allow(struct pmemcache *pc, unsigned int want,
			    unsigned long *delay)
{
	struct pmc_rate *rc = &pc->rc;

	if (!rc->rate)
		return want;
	if (rc->tokens >= HZ)
		return min_t(s64, want, div_s64(rc->tokens, HZ));
	*delay = max_t(unsigned long, 1,
		       div64_u64((u64)(HZ - rc->tokens), rc->rate));
	return 0;
}

void pmc_rate_charge(struct pmemcache *pc, unsigned int n)
{
	if (pc->rc.rate)
		pc->rc.tokens -= (s64)n * HZ;
}
