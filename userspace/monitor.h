/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What `pmemcachectl monitor` tells about a change of a cache's health
 * (the last word of its status: "ok" or conditions, comma separated; see
 * "Events" in docs/dm-pmemcache.rst).  Pure: no libdevmapper, so the
 * decision is unit-tested; cmd_monitor.c waits for the dm events.
 */
#ifndef PMCTL_MONITOR_H
#define PMCTL_MONITOR_H

#include <stdbool.h>
#include <stddef.h>

enum pmctl_hevent {
	PMCTL_EV_NONE,		/* nothing to tell */
	PMCTL_EV_DEGRADED,	/* ok (or not seen yet) -> conditions */
	PMCTL_EV_CHANGED,	/* conditions -> other conditions */
	PMCTL_EV_RECOVERED,	/* conditions -> ok */
	PMCTL_EV_GONE,		/* the device went away */
};

/* What a device showed last. */
struct pmctl_health {
	bool known;
	char health[64];
};

struct pmctl_hchange {
	enum pmctl_hevent ev;
	char old[64], now[64];		/* "" if not known / gone */
	char began[64], ended[64];	/* conditions, comma separated */
};

/*
 * The device now shows @now (NULL: it is gone).  Conditions are a set:
 * their order does not matter, "ok" is the empty set.  Fills @c, updates
 * @h and returns c->ev.  The first health seen is told only if not "ok".
 */
enum pmctl_hevent pmctl_health_step(struct pmctl_health *h, const char *now,
				    struct pmctl_hchange *c);
/* "degraded", "changed", "recovered", "gone" (PROG's first argument). */
const char *pmctl_hevent_name(enum pmctl_hevent ev);
/* The syslog priority of an event (LOG_ERR ... LOG_INFO). */
int pmctl_hevent_priority(enum pmctl_hevent ev);
/*
 * The log line: "pc: degraded: health origin_failing (was ok; began
 * origin_failing)".
 */
void pmctl_hchange_line(const char *name, const struct pmctl_hchange *c,
			char *out, size_t len);

#endif /* PMCTL_MONITOR_H */
