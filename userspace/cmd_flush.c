// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl flush / remove: write every dirty block back (the "flush"
 * message, with progress from status samples), then for remove drop the
 * device and settle what its cache superblock says (cleared or kept-dirty).
 */
/*
 * No _GNU_SOURCE: <sys/stat.h> would pull <linux/types.h>, whose __le64
 * clashes with the typedefs of pmc_shim_user.h.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "pmemcache_format.h"	/* __le types from <linux/types.h> here */
#include "dm.h"
#include "probe.h"
#include "status.h"

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static void progress(const char *name, const struct pmctl_sample *s, uint64_t start_dirty,
		     double rate, bool tty, bool final)
{
	char rb[32];

	pmctl_human_bytes(rate, rb, sizeof(rb));
	if (tty) {
		int width = 30, fill;
		double done = start_dirty ?
			1.0 - (double)s->st.dirty / (double)start_dirty : 1.0;
		char bar[64];

		if (done < 0)
			done = 0;
		fill = (int)(done * width + 0.5);
		memset(bar, '#', fill);
		memset(bar + fill, '-', width - fill);
		bar[width] = 0;
		printf("\r%s: [%s] %3d%%  %llu blocks left  %s/s   %s", name, bar,
		       (int)(done * 100 + 0.5), (unsigned long long)s->st.dirty, rb,
		       final ? "\n" : "");
	} else {
		printf("%s: %llu dirty blocks left, %s/s\n", name,
		       (unsigned long long)s->st.dirty, rb);
	}
	fflush(stdout);
}

/*
 * Send "flush" from a child (the message returns only when the cache is
 * clean) and show progress from status samples here.  Ctrl-C: the child's
 * wait is interruptible, the device keeps running with the normal
 * watermark writeback.
 */
static int do_flush(const char *name, bool quiet)
{
	struct sigaction sa, old;
	struct pmctl_sample first, prev, cur;
	struct pmc_table t;
	bool tty = isatty(STDOUT_FILENO);
	double last_print = 0, rate = 0;
	uint64_t len;
	char *params;
	pid_t pid;
	int r, status, rc;

	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);
	if (r)
		return r;
	if (pmc_table_parse(params, &t))
		t.block_size = PMC_MAX_BLOCK_SIZE;
	free(params);
	r = pmctl_sample(name, &first);
	if (r)
		return r;
	prev = first;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		err("fork: %s", strerror(errno));
		return EXIT_DM;
	}
	if (!pid) {
		signal(SIGINT, SIG_DFL);
		r = pmctl_dm_message(name, "flush");
		_exit(r == 0 ? 0 : r == -EBUSY ? 2 : r == -EINTR ? 3 : 1);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;	/* no SA_RESTART: sleeps end early */
	sigaction(SIGINT, &sa, &old);
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);

		if (w == pid)
			break;
		if (interrupted) {
			/* The kernel's wait is interruptible: the message ends. */
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			if (!quiet && tty)
				printf("\n");
			err("%s: interrupted; the device keeps working, dirty blocks "
			    "are written back by the watermark policy", name);
			sigaction(SIGINT, &old, NULL);
			return EXIT_INTERRUPTED;
		}
		pmctl_sleep_ms(250);
		if (pmctl_sample(name, &cur))
			continue;
		if (first.st.dirty && pmctl_now_s() - last_print >= (tty ? 0.25 : 1.0)) {
			rate = pmctl_wb_rate(&prev, &cur, t.block_size);
			prev = cur;
			if (!quiet)
				progress(name, &cur, first.st.dirty, rate, tty, false);
			last_print = pmctl_now_s();
		}
	}
	sigaction(SIGINT, &old, NULL);
	rc = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
	r = pmctl_sample(name, &cur);
	if (r)
		return r;
	/* Final line: the average rate of the whole flush. */
	if (!quiet && (first.st.dirty || cur.st.dirty))
		progress(name, &cur, first.st.dirty, pmctl_wb_rate(&first, &cur, t.block_size),
			 tty, true);
	switch (rc) {
	case 0:
		return EXIT_OK;
	case 2:
		err("%s: the device is suspended; resume it first", name);
		return EXIT_DM;
	case 3:
		err("%s: flush interrupted", name);
		return EXIT_INTERRUPTED;
	default:
		err("%s: flush failed: %llu blocks still dirty (%llu failed origin writes, "
		    "%llu pmem media errors)", name, (unsigned long long)cur.st.dirty,
		    (unsigned long long)cur.st.wb_errors,
		    (unsigned long long)cur.st.media_errors);
		return EXIT_IO;
	}
}

static int flush_opts(int argc, char **argv, const char *cmd, bool *quiet,
		      bool *keep, bool *force)
{
	static const struct option opts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		{ "keep-dirty", no_argument, NULL, 'k' },
		{ "force", no_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, keep ? ":qkf" : ":q", opts, NULL)) != -1) {
		if (c == 'q') {
			*quiet = true;
		} else if (c == 'k' && keep) {
			*keep = true;
		} else if (c == 'f' && force) {
			*force = true;
		} else {
			return bad_option(c, argv, cmd);
		}
	}
	if (argc - optind != 1) {
		err("need exactly one NAME (see pmemcachectl %s --help)", cmd);
		return EXIT_USAGE;
	}
	if (keep && *keep && !*force) {
		err("--keep-dirty leaves the dirty blocks only in pmem: the origin stays "
		    "stale, whatever writes it meanwhile is overwritten when they are "
		    "re-attached, and activate will not re-attach them; add --force to "
		    "do it anyway");
		return EXIT_USAGE;
	}
	if (force && *force && !*keep) {
		err("--force only goes with --keep-dirty");
		return EXIT_USAGE;
	}
	return 0;
}

int cmd_flush(int argc, char **argv)
{
	bool quiet = false;
	int r = flush_opts(argc, argv, "flush", &quiet, NULL, NULL);

	if (r)
		return r;
	r = pmctl_dm_setup();
	if (r)
		return r;
	return do_flush(argv[optind], quiet);
}

/*
 * After the device is gone: a clean cache is forgotten (its blocks go
 * stale as soon as the origin is written alone; the next create formats),
 * a cache with dirty blocks is marked kept-dirty, so that activate never
 * re-attaches it on its own.  A mirror's two halves alike (@mirror: the
 * second, or NULL).
 */
static int after_remove(const char *name, const char *cache, const char *mirror, bool keep)
{
	const char *half[2] = { cache, mirror };
	uint64_t dirty = 0;
	struct pmctl_sb sb;
	int i, r;

	for (i = 0; i < 2 && half[i]; i++) {
		r = pmctl_sb_read(half[i], &sb);
		if (r || sb.state != PMCTL_SB_CACHE) {
			err("%s: removed, but the superblock of %s cannot be read: %s", name,
			    half[i], r ? strerror(-r) : "not a valid cache");
			return EXIT_IO;
		}
		r = i ? 0 : pmctl_cache_dirty(cache, &dirty);
		if (r) {
			err("%s: removed, but the records of %s cannot be read: %s", name,
			    cache, strerror(-r));
			return EXIT_IO;
		}
		if (!dirty) {
			r = pmctl_sb_forget(half[i]);
			if (r) {
				err("%s: removed, but the superblock of %s cannot be cleared: %s; "
				    "its clean blocks are stale once the origin is written: attach "
				    "it again only with create --format", name, half[i],
				    strerror(-r));
				return EXIT_IO;
			}
			printf("%s: removed; %s is clean and its superblock cleared\n", name,
			       half[i]);
			continue;
		}
		if (!keep && !i)	/* written between the flush and the remove */
			warnx_("%s: %llu blocks became dirty after the flush: kept in %s", name,
			       (unsigned long long)dirty, cache);
		r = pmctl_mark_write(half[i], sb.cache_uuid, true, (uint64_t)time(NULL));
		if (r) {
			err("%s: removed with %llu dirty blocks kept in %s, but they cannot be "
			    "marked (%s): activate may re-attach them", name,
			    (unsigned long long)dirty, half[i], strerror(-r));
			return EXIT_IO;
		}
		printf("%s: removed (%llu dirty blocks kept in %s, marked: only create "
		       "--force re-attaches them)\n", name, (unsigned long long)dirty, half[i]);
	}
	return !dirty || keep ? EXIT_OK : EXIT_IO;
}

int cmd_remove(int argc, char **argv)
{
	bool quiet = false, keep = false, force = false;
	struct pmc_table t;
	struct dm_info info;
	const char *name;
	uint64_t len;
	char *params, *half[2], *cache, *mirror;
	int r = flush_opts(argc, argv, "remove", &quiet, &keep, &force);

	if (r)
		return r;
	name = argv[optind];
	r = pmctl_dm_setup();
	if (r)
		return r;
	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);	/* exists, is ours */
	if (r)
		return r;
	if (pmc_table_parse(params, &t)) {
		err("%s: unexpected table '%s'", name, params);
		free(params);
		return EXIT_DM;
	}
	/* A mirror's half that is gone ("-", or no device now): nothing to do there. */
	pmctl_cache_devpaths(params, &t, half);
	free(params);
	cache = half[0];
	mirror = half[1];
	if (!cache) {
		err("%s: the cache device %s has no node", name, t.cache);
		r = EXIT_DEVICE;
		goto out;
	}
	if (pmctl_dm_info(name, &info) > 0 && info.open_count > 0) {
		err("%s: device is in use (open count %d)", name, info.open_count);
		r = EXIT_DEVICE;
		goto out;
	}
	if (!keep) {
		r = do_flush(name, quiet);
		if (r)
			goto out;	/* not removed: do_flush said why */
	} else {
		struct pmctl_sample s;

		if (!pmctl_sample(name, &s) && s.st.dirty)
			warnx_("%s: %llu dirty blocks stay in %s only: the origin is stale "
			       "until 'pmemcachectl create --force' re-attaches them, and "
			       "whatever writes it meanwhile will be overwritten", name,
			       (unsigned long long)s.st.dirty, cache);
	}
	r = pmctl_dm_remove(name);
	if (!r)
		r = after_remove(name, cache, mirror, keep);
out:
	free(cache);
	free(mirror);
	return r;
}
