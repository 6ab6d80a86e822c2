// SPDX-License-Identifier: GPL-2.0
/* pmemcachectl monitor: what a change of health means (pure). */
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include "monitor.h"

/* Whether the comma list @set holds the word @w (@wl bytes). */
static bool has_word(const char *set, const char *w, size_t wl)
{
	while (*set) {
		size_t l = strcspn(set, ",");

		if (l == wl && !strncmp(set, w, wl))
			return true;
		set += l;
		if (*set == ',')
			set++;
	}
	return false;
}

/* The words of @a that @b lacks, into @out (comma separated). */
static void minus(const char *a, const char *b, char *out, size_t len)
{
	size_t n = 0;

	out[0] = 0;
	while (*a) {
		size_t l = strcspn(a, ",");

		if (l && !has_word(b, a, l) && n + l + 2 <= len)
			n += snprintf(out + n, len - n, "%s%.*s", n ? "," : "", (int)l, a);
		a += l;
		if (*a == ',')
			a++;
	}
}

/* "ok" is the empty set of conditions. */
static const char *conds(const char *health)
{
	return strcmp(health, "ok") ? health : "";
}

enum pmctl_hevent pmctl_health_step(struct pmctl_health *h, const char *now,
				    struct pmctl_hchange *c)
{
	const char *was = h->known ? conds(h->health) : "";

	memset(c, 0, sizeof(*c));
	if (h->known)
		snprintf(c->old, sizeof(c->old), "%s", h->health);
	if (!now) {
		c->ev = h->known ? PMCTL_EV_GONE : PMCTL_EV_NONE;
		h->known = false;
		return c->ev;
	}
	snprintf(c->now, sizeof(c->now), "%s", now);
	minus(conds(now), was, c->began, sizeof(c->began));
	minus(was, conds(now), c->ended, sizeof(c->ended));
	if (c->began[0] || c->ended[0])
		c->ev = !*conds(now) ? PMCTL_EV_RECOVERED :
			!*was ? PMCTL_EV_DEGRADED : PMCTL_EV_CHANGED;
	h->known = true;
	snprintf(h->health, sizeof(h->health), "%s", now);
	return c->ev;
}

const char *pmctl_hevent_name(enum pmctl_hevent ev)
{
	switch (ev) {
	case PMCTL_EV_DEGRADED:
		return "degraded";
	case PMCTL_EV_CHANGED:
		return "changed";
	case PMCTL_EV_RECOVERED:
		return "recovered";
	case PMCTL_EV_GONE:
		return "gone";
	default:
		return "none";
	}
}

int pmctl_hevent_priority(enum pmctl_hevent ev)
{
	switch (ev) {
	case PMCTL_EV_DEGRADED:
	case PMCTL_EV_CHANGED:
		return LOG_ERR;
	case PMCTL_EV_GONE:
		return LOG_WARNING;
	default:
		return LOG_INFO;
	}
}

void pmctl_hchange_line(const char *name, const struct pmctl_hchange *c,
			char *out, size_t len)
{
	const char *ev = pmctl_hevent_name(c->ev);
	size_t n;

	if (c->ev == PMCTL_EV_GONE) {
		snprintf(out, len, "%s: gone: removed or detached (health was %s)",
			 name, c->old);
		return;
	}
	n = snprintf(out, len, "%s: %s: health %s (%s%s", name, ev, c->now,
		     c->old[0] ? "was " : "at start", c->old);
	if (n < len && c->began[0])
		n += snprintf(out + n, len - n, "; began %s", c->began);
	if (n < len && c->ended[0])
		n += snprintf(out + n, len - n, "; ended %s", c->ended);
	if (n < len)
		snprintf(out + n, len - n, ")");
}
