// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl monitor: like mdadm --monitor, wait for the dm events of
 * pmemcache devices and tell every change of their health (syslog, stderr
 * with -f, and PROG).
 *
 * DM_DEVICE_WAITEVENT blocks on one device, so each device gets a child
 * process that loops: event number (DM_DEVICE_INFO), status, decision
 * (monitor.c), wait for the next event.  The event number is read before
 * the status, so an event between the two ends the next wait at once.
 * A new table raises no event (detach swaps in a linear one), so a wait
 * also ends every RECHECK_S seconds (SIGALRM, EINTR).  The parent waits
 * for the children and stops them on SIGINT or SIGTERM; watching every
 * device (no NAME), it also looks for new ones every SCAN_S seconds and
 * runs until stopped, as mdadm --monitor --scan does.
 */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <unistd.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "monitor.h"
#include "status.h"

#define CHILD_TOLD	10	/* a child's exit status: told a change (--oneshot) */
#define MAX_DEVS	256
#define RECHECK_S	10	/* a look without an event, at the latest */
#define SCAN_S		5	/* every device: a look for new ones */

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

static void on_alarm(int sig)
{
	(void)sig;	/* only to end the wait with EINTR */
}

/* Whether device @name has one pmemcache target: 1, 0 no/other, <0 error. */
static int is_pmemcache(const char *name)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_TABLE, name);
	uint64_t start, len;
	char *type = NULL, *params = NULL;
	int r = -1;

	if (!dmt)
		return -1;
	if (pmctl_dm_run(dmt))
		r = !dm_get_next_target(dmt, NULL, &start, &len, &type, &params) &&
		    type && !strcmp(type, PMCTL_TARGET);
	dm_task_destroy(dmt);
	return r;
}

struct names {
	char **names;
	int max, count;
};

/* pmctl_dm_each_name(): keep @name if it is a pmemcache device. */
static int add_if_ours(const char *name, void *ctx)
{
	struct names *nm = ctx;

	if (nm->count < nm->max && is_pmemcache(name) == 1)
		nm->names[nm->count++] = strdup(name);
	return 0;
}

/* The names of every pmemcache device: how many, or -1 after one line. */
static int all_names(char **names, int max)
{
	struct names nm = { .names = names, .max = max };

	if (pmctl_dm_each_name(add_if_ours, &nm) < 0) {
		err("cannot list device-mapper devices: %s", pmctl_dm_why());
		return -1;
	}
	return nm.count;
}

/* The event number and health of @name: 1, 0 if it is gone, <0 error. */
static int look(const char *name, uint32_t *event_nr, char *health, size_t len)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_STATUS, name);
	struct dm_info info;
	struct pmc_status st;
	uint64_t start, length;
	char *type = NULL, *params = NULL;
	int r = -1;

	if (!dmt)
		return -1;
	/* One ioctl: the status and the event number it was read at. */
	if (!pmctl_dm_run(dmt) || !dm_task_get_info(dmt, &info)) {
		r = pmctl_dm_errno() == ENXIO ? 0 : -1;
	} else if (!info.exists) {
		r = 0;
	} else {
		dm_get_next_target(dmt, NULL, &start, &length, &type, &params);
		if (type && !strcmp(type, PMCTL_TARGET) && params &&
		    !pmc_status_parse(params, &st)) {
			*event_nr = info.event_nr;
			snprintf(health, len, "%s", st.health);
			r = 1;
		} else {
			r = 0;		/* another table now: not ours any more */
		}
	}
	dm_task_destroy(dmt);
	return r;
}

/* Until the event number of @name is not @event_nr any more. */
static void wait_event(const char *name, uint32_t event_nr)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_WAITEVENT, name);
	bool ok;

	alarm(RECHECK_S);
	ok = dmt && dm_task_set_event_nr(dmt, event_nr) && pmctl_dm_run(dmt);
	alarm(0);
	if (!ok && pmctl_dm_errno() != ENXIO && pmctl_dm_errno() != EINTR)
		sleep(1);	/* an odd failure: do not spin */
	if (dmt)
		dm_task_destroy(dmt);
}

/* PROG EVENT DEVICE HEALTH, waited for; its failure is logged only. */
static void run_prog(const char *prog, const char *event, const char *name,
		     const char *health)
{
	pid_t pid = fork();
	int status;

	if (pid < 0) {
		syslog(LOG_ERR, "%s: cannot run %s: %s", name, prog, strerror(errno));
		return;
	}
	if (!pid) {
		execlp(prog, prog, event, name, health, (char *)NULL);
		syslog(LOG_ERR, "%s: cannot run %s: %s", name, prog, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(status))
		status = 128 + WTERMSIG(status);
	else
		status = WEXITSTATUS(status);
	if (status)
		syslog(LOG_WARNING, "%s: %s %s %s %s: exit status %d", name, prog, event,
		       name, health, status);
}

/* A child's life: watch @name until it is gone (or, --oneshot, a change). */
static int watch(const char *name, const char *prog, bool oneshot)
{
	struct pmctl_health h = { 0 };
	struct pmctl_hchange c;
	char health[64], line[512];
	uint32_t ev = 0;
	int r;

	for (;;) {
		r = look(name, &ev, health, sizeof(health));
		if (r < 0) {
			syslog(LOG_ERR, "%s: cannot read the status: %s", name, pmctl_dm_why());
			return EXIT_DM;
		}
		if (pmctl_health_step(&h, r ? health : NULL, &c) != PMCTL_EV_NONE) {
			pmctl_hchange_line(name, &c, line, sizeof(line));
			syslog(pmctl_hevent_priority(c.ev), "%s", line);
			if (prog)
				run_prog(prog, pmctl_hevent_name(c.ev), name,
					 c.now[0] ? c.now : "-");
			if (oneshot)
				return CHILD_TOLD;
		}
		if (!r)
			return EXIT_OK;
		wait_event(name, ev);
	}
}

/* The watchers: names[i] is watched by child pids[i]; a free slot is NULL. */
struct watchers {
	char *names[MAX_DEVS];
	pid_t pids[MAX_DEVS];
	int live;		/* children not yet waited for */
};

/* The child keeps the parent's SIGALRM handler, which ends its waits. */
static void start_watcher(struct watchers *w, int i, const char *prog, bool oneshot)
{
	w->pids[i] = fork();
	if (!w->pids[i]) {
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		_exit(watch(w->names[i], prog, oneshot));
	}
	if (w->pids[i] > 0) {
		w->live++;
		return;
	}
	syslog(LOG_ERR, "%s: cannot fork: %s", w->names[i], strerror(errno));
	free(w->names[i]);	/* every device: tried again at the next look */
	w->names[i] = NULL;
}

static bool watched(const struct watchers *w, const char *name)
{
	int i;

	for (i = 0; i < MAX_DEVS; i++)
		if (w->names[i] && !strcmp(w->names[i], name))
			return true;
	return false;
}

/* Every device: a watcher for each pmemcache device not yet watched. */
static void watch_new(struct watchers *w, const char *prog, bool oneshot)
{
	char *found[MAX_DEVS];
	int i, j = 0, n = all_names(found, MAX_DEVS);

	for (i = 0; i < n; i++) {
		if (!watched(w, found[i])) {
			while (j < MAX_DEVS && w->names[j])
				j++;
			if (j < MAX_DEVS) {
				syslog(LOG_INFO, "%s: new pmemcache device, watched", found[i]);
				w->names[j] = found[i];
				start_watcher(w, j, prog, oneshot);
				continue;
			}
		}
		free(found[i]);
	}
}

static void stop_children(const struct watchers *w)
{
	int i;

	for (i = 0; i < MAX_DEVS; i++)
		if (w->names[i] && w->pids[i] > 0)
			kill(w->pids[i], SIGTERM);
}

/*
 * Until every watcher has ended (each NAME gone, or told a change with
 * --oneshot) or a signal stops the monitor; with @all, until stopped.
 */
static int wait_watchers(struct watchers *w, bool all, const char *prog, bool oneshot)
{
	int i, status, rc = EXIT_OK;
	pid_t p;

	while (!stop && (all || w->live > 0)) {
		p = -1;
		if (w->live) {
			if (all)
				alarm(SCAN_S);
			p = wait(&status);
			alarm(0);
		} else {
			sleep(SCAN_S);	/* every device, none yet */
		}
		if (p < 0) {
			if (w->live && errno == ECHILD)
				w->live = 0;	/* cannot be; do not spin */
			if (all && !stop)
				watch_new(w, prog, oneshot);
			continue;
		}
		w->live--;
		for (i = 0; i < MAX_DEVS; i++) {
			if (w->names[i] && w->pids[i] == p) {
				free(w->names[i]);
				w->names[i] = NULL;
			}
		}
		if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_TOLD)
			stop = 1;	/* --oneshot: the first change ends it */
		else if (!WIFEXITED(status) || WEXITSTATUS(status))
			rc = EXIT_DM;
	}
	if (w->live > 0) {
		stop_children(w);
		while (wait(NULL) > 0 || errno == EINTR)
			;
	}
	return rc;
}

int cmd_monitor(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "program", required_argument, NULL, 'p' },
		{ "oneshot", no_argument, NULL, '1' },
		{ "foreground", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	static struct watchers w;
	const char *prog = NULL;
	bool oneshot = false, fg = false, all;
	struct sigaction sa;
	int c, i, n, rc = EXIT_OK;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":p:1f", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			prog = optarg;
			break;
		case '1':
			oneshot = true;
			break;
		case 'f':
			fg = true;
			break;
		default:
			return bad_option(c, argv, "monitor");
		}
	}
	fg = fg || oneshot;	/* a script waits for it and reads its line */
	all = optind == argc;
	if (argc - optind > MAX_DEVS) {
		err("at most %d NAMEs", MAX_DEVS);
		return EXIT_USAGE;
	}
	rc = pmctl_dm_setup();
	if (rc)
		return rc;
	n = 0;
	for (i = optind; i < argc; i++) {
		int r = is_pmemcache(argv[i]);

		if (r < 0 && pmctl_dm_errno() != ENXIO) {
			err("%s: cannot query device-mapper: %s", argv[i], pmctl_dm_why());
			rc = EXIT_DM;
		} else if (r < 0) {
			err("%s: no such device-mapper device", argv[i]);
			rc = EXIT_DEVICE;
		} else if (!r) {
			err("%s: not a pmemcache device", argv[i]);
			rc = EXIT_DEVICE;
		}
		w.names[n++] = strdup(argv[i]);
	}
	if (all) {
		n = all_names(w.names, MAX_DEVS);
		if (n < 0)
			return EXIT_DM;
		/* --oneshot would wait for a device that may never come */
		if (!n && oneshot) {
			err("no pmemcache device to monitor");
			return EXIT_DEVICE;
		}
	}
	if (rc)
		goto out;

	/* Checked on the terminal; then, as a daemon, only syslog hears. */
	if (!fg && daemon(0, 0)) {
		err("cannot become a daemon: %s", strerror(errno));
		rc = EXIT_DEVICE;
		goto out;
	}
	openlog("pmemcachectl", LOG_PID | (fg ? LOG_PERROR : 0), LOG_DAEMON);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;	/* no SA_RESTART: wait() returns */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_alarm;	/* ends a wait, here and in the children */
	sigaction(SIGALRM, &sa, NULL);
	syslog(LOG_INFO, "monitoring %d pmemcache device%s%s", n, n == 1 ? "" : "s",
	       all ? " and those created later" : "");
	fflush(NULL);
	for (i = 0; i < n; i++)
		start_watcher(&w, i, prog, oneshot);
	rc = wait_watchers(&w, all, prog, oneshot);
	if (!oneshot)
		syslog(LOG_INFO, "monitor stopped");
	closelog();
out:
	for (i = 0; i < MAX_DEVS; i++)
		free(w.names[i]);
	return rc;
}
