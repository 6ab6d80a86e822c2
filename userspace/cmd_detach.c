// SPDX-License-Identifier: GPL-2.0
/*
 * pmemcachectl detach / set: changes to a running cache device.
 *
 * detach takes the cache away from under an open, busy device, as
 * lvconvert --splitcache does: cleaner mode until the cache is clean, then
 * a table that flushes on suspend, a suspend that writes back what was
 * dirtied meanwhile (no bio reaches the device while it is suspended), a
 * check that nothing is dirty, and a linear table on the origin in its
 * place.  The device keeps its name, size and openers throughout.
 *
 * A flag of a table acts only once the table is live: suspend runs the
 * postsuspend hook of the live table, never of a loaded one.  So the
 * flush_on_suspend table is made live first (a suspend and resume of its
 * own), and the linear table is loaded after it.
 *
 * The cache's superblocks are zeroed while the device is suspended, before
 * the linear table goes live: from the first write that reaches the
 * origin around the cache its clean blocks are stale, and a power cut
 * must not leave a cache that activate would attach again.
 *
 * Any failure, a timeout or a signal puts the device back as it was: the
 * superblocks, the original table (which also means cleaner mode off,
 * unless it was on) live and resumed.
 */
#define _DEFAULT_SOURCE
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libdevmapper.h>

#include "pmemcachectl.h"
#include "dm.h"
#include "probe.h"

#define FOS		"flush_on_suspend"
#define POLL_MS		100
#define TABLE_MAX	1024

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

struct detach {
	const char *name;
	uint64_t len;
	char orig[TABLE_MAX];	/* the table's params before detach */
	struct pmc_table t;
	bool sent_cleaner;	/* we turned cleaner mode on by message */
	bool fos_added;		/* we made a flush_on_suspend table live */
	const char *fail_at;	/* test hook: PMEMCACHECTL_DETACH_FAIL=<stage> */
	const char *pause_at;	/* test hook: PMEMCACHECTL_DETACH_PAUSE=<stage> */
	bool quiet;
	char *half[2];		/* the cache's devices: one, or a mirror's two */
	int n_taken;		/* superblocks zeroed, for restore() */
	uint8_t saved[2][PMCTL_SB_AREA];
};

/* Test hook: pretend that the step @stage failed. */
static bool injected(const struct detach *d, const char *stage, char *why,
		     size_t len)
{
	if (!d->fail_at || strcmp(d->fail_at, stage))
		return false;
	snprintf(why, len, "injected failure at %s (PMEMCACHECTL_DETACH_FAIL)", stage);
	return true;
}

/*
 * Test hook: stop at @stage until killed (a power cut there).  Says so on
 * stderr first, where the test waits for it.
 */
static void pause_here(const struct detach *d, const char *stage)
{
	if (!d->pause_at || strcmp(d->pause_at, stage))
		return;
	fprintf(stderr, "%s: detach: paused at %s (PMEMCACHECTL_DETACH_PAUSE)\n",
		d->name, stage);
	for (;;)
		pause();
}

/* The live table's only target: its type and params (malloc'ed), or -1. */
static int live_target(const char *name, char *type, size_t tlen, char **params)
{
	struct dm_task *dmt = pmctl_dm_task(DM_DEVICE_TABLE, name);
	uint64_t start, length;
	char *tt = NULL, *p = NULL;
	void *next;
	int r = -1;

	if (dmt && pmctl_dm_run(dmt)) {
		next = dm_get_next_target(dmt, NULL, &start, &length, &tt, &p);
		if (tt && !next) {
			snprintf(type, tlen, "%s", tt);
			*params = strdup(p ? p : "");
			r = *params ? 0 : -1;
		}
	}
	if (dmt)
		dm_task_destroy(dmt);
	return r;
}

/*
 * Put the device back as it was before detach, from what the kernel says
 * its state is: no inactive table, the original table live (reloaded if
 * ours, flush_on_suspend, is live), resumed, cleaner mode as before.
 * Returns true if the live table is the original one again.
 */
static bool restore(struct detach *d, char *why, size_t len)
{
	struct dm_info info;
	char type[64], *live = NULL;
	bool ours, ok;

	if (pmctl_dm_info(d->name, &info) <= 0) {
		snprintf(why, len, "cannot query the device: %s", pmctl_dm_why());
		return false;
	}
	if (info.inactive_table && !pmctl_dm_simple(d->name, DM_DEVICE_CLEAR, why, len))
		return false;
	if (live_target(d->name, type, sizeof(type), &live)) {
		snprintf(why, len, "cannot read the table: %s", pmctl_dm_why());
		return false;
	}
	/*
	 * The superblocks back before a load of the original table reads
	 * them, and only while no linear table went live: after that the
	 * cache's blocks may be stale.
	 */
	while (d->n_taken && !strcmp(type, PMCTL_TARGET)) {
		int i = d->n_taken - 1, r = pmctl_sb_put_back(d->half[i], d->saved[i]);

		if (r) {
			snprintf(why, len, "cannot write back the superblock of %s: %s",
				 d->half[i], strerror(-r));
			free(live);
			return false;
		}
		d->n_taken--;
	}
	ours = !strcmp(type, PMCTL_TARGET) && d->fos_added && pmctl_table_has_flag(live, FOS);
	free(live);
	if (ours) {
		/* Resume swaps: the suspend it implies flushes, nothing else. */
		if (!pmctl_dm_load(d->name, d->len, PMCTL_TARGET, d->orig, why, len) ||
		    !pmctl_dm_simple(d->name, DM_DEVICE_RESUME, why, len))
			return false;
	} else if (info.suspended && !pmctl_dm_simple(d->name, DM_DEVICE_RESUME, why, len)) {
		return false;
	}
	if (d->sent_cleaner && !ours) {
		int r = pmctl_dm_message(d->name, "nocleaner");

		if (r) {
			snprintf(why, len, "cannot leave cleaner mode: %s", strerror(-r));
			return false;
		}
	}
	if (live_target(d->name, type, sizeof(type), &live)) {
		snprintf(why, len, "cannot read the table: %s", pmctl_dm_why());
		return false;
	}
	ok = !strcmp(type, PMCTL_TARGET) && !strcmp(live, d->orig);
	if (!ok)
		snprintf(why, len, "the table is now '%s %.400s', not the original", type,
			 live);
	free(live);
	return ok;
}

/* One error line: @rc's reason, then what restore() achieved. */
static int fail(struct detach *d, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct detach *d, int rc, const char *fmt, ...)
{
	char reason[1024], rwhy[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	if (stop_sig && rc != EXIT_INTERRUPTED) {
		snprintf(reason + strlen(reason), sizeof(reason) - strlen(reason),
			 " (interrupted)");
		rc = EXIT_INTERRUPTED;
	}
	if (restore(d, rwhy, sizeof(rwhy)))
		err("%s: detach failed: %s; the cache stays attached, table and settings "
		    "restored", d->name, reason);
	else
		err("%s: detach failed: %s; restoring the cache failed too: %s (original "
		    "table: '0 %llu %s %s')", d->name, reason, rwhy,
		    (unsigned long long)d->len, PMCTL_TARGET, d->orig);
	return rc;
}

static void progress(const struct detach *d, const struct pmctl_sample *prev,
		     const struct pmctl_sample *cur)
{
	double dt = (cur->t.tv_sec - prev->t.tv_sec) +
		    (cur->t.tv_nsec - prev->t.tv_nsec) / 1e9;
	uint64_t a = pmc_status_wb_bytes(&prev->st), b = pmc_status_wb_bytes(&cur->st);
	char rb[32];

	pmctl_human_bytes(dt > 0 && b >= a ? (b - a) / dt : 0, rb, sizeof(rb));
	fprintf(stderr, "%s: detach: %llu dirty blocks left, %s/s\n", d->name,
		(unsigned long long)cur->st.dirty, rb);
}

/* Cleaner mode until a sample shows no dirty block. */
static int wait_clean(struct detach *d, const struct pmctl_sample *s0,
		      uint32_t timeout)
{
	struct pmctl_sample prev = *s0, cur;
	double t0 = pmctl_now_s(), last = t0;
	int r;

	for (;;) {
		if (stop_sig)
			return fail(d, EXIT_INTERRUPTED, "interrupted while writing back");
		r = pmctl_sample(d->name, &cur);
		if (r)
			return fail(d, r, "cannot read the status");
		if (!cur.st.dirty)
			return 0;
		if (cur.st.wb_errors != s0->st.wb_errors)
			return fail(d, EXIT_IO, "an origin write failed (%llu writeback errors, "
				    "health %s), %llu blocks still dirty",
				    (unsigned long long)cur.st.wb_errors, cur.st.health,
				    (unsigned long long)cur.st.dirty);
		/* A poisoned block is never written back: it cannot drain. */
		if (cur.st.media_errors != s0->st.media_errors)
			return fail(d, EXIT_IO, "a pmem media error (%llu media errors, "
				    "health %s), %llu blocks still dirty",
				    (unsigned long long)cur.st.media_errors, cur.st.health,
				    (unsigned long long)cur.st.dirty);
		if (timeout && pmctl_now_s() - t0 >= timeout)
			return fail(d, EXIT_DIRTY, "%llu blocks still dirty after --timeout %u s",
				    (unsigned long long)cur.st.dirty, timeout);
		if (!d->quiet && pmctl_now_s() - last >= 1.0) {
			progress(d, &prev, &cur);
			prev = cur;
			last = pmctl_now_s();
		}
		pmctl_sleep_ms(POLL_MS);
	}
}

/*
 * The detached cache is clean, but its blocks go stale as soon as the
 * origin is written without it: a later table without "format" would
 * load them and serve old data.  So its superblocks are cleared (step 4,
 * before the switch).  The device keeps its DM UUID (the kernel never
 * changes one): a linear device named PMEMCACHE-<uuid> of a cache that
 * no longer exists, which activate tells apart by its table.
 */
static int do_detach(struct detach *d, uint32_t timeout)
{
	char why[1024], params[TABLE_MAX], tmp[TABLE_MAX], linear[128];
	char type[64], *live = NULL, *op;
	struct pmctl_sample s0, s1;
	struct dm_info info;
	int r, i;

	r = pmctl_dm_get(DM_DEVICE_TABLE, d->name, &d->len, &live);
	if (r)
		return r;
	if (strlen(live) >= sizeof(d->orig) || pmc_table_parse(live, &d->t)) {
		err("%s: unexpected table '%s'", d->name, live);
		free(live);
		return EXIT_DM;
	}
	snprintf(d->orig, sizeof(d->orig), "%s", live);
	free(live);
	/* A mirror's half that is gone ("-", or no device now) has nothing to clear. */
	pmctl_cache_devpaths(d->orig, &d->t, d->half);
	if (!d->half[0] && d->half[1]) {
		d->half[0] = d->half[1];
		d->half[1] = NULL;
	}
	if (!d->half[0]) {
		err("%s: cannot find the device of the cache %s", d->name, d->t.cache);
		return EXIT_DEVICE;
	}
	if (pmctl_dm_info(d->name, &info) <= 0) {
		err("%s: cannot query device-mapper: %s", d->name, pmctl_dm_why());
		return EXIT_DM;
	}
	if (info.suspended) {
		err("%s: the device is suspended; resume it first", d->name);
		return EXIT_DM;
	}
	if (info.inactive_table) {
		err("%s: an inactive table is loaded (dmsetup clear %s drops it)",
		    d->name, d->name);
		return EXIT_DEVICE;
	}
	r = pmctl_sample(d->name, &s0);
	if (r)
		return r;
	snprintf(linear, sizeof(linear), "%s 0", d->t.origin);
	op = pmctl_devpath(d->t.origin);

	/* 1. No new blocks, write back the dirty ones. */
	if (!s0.st.cleaner) {
		r = pmctl_dm_message(d->name, "cleaner");
		if (r) {
			err("%s: cannot enter cleaner mode: %s", d->name, strerror(-r));
			free(op);
			return EXIT_DM;
		}
		d->sent_cleaner = true;
	}
	if (!d->quiet)
		fprintf(stderr, "%s: detach: cleaner mode, %llu dirty blocks to write back\n",
			d->name, (unsigned long long)s0.st.dirty);
	if (injected(d, "cleaner", why, sizeof(why)))
		goto fail_dm;
	r = wait_clean(d, &s0, timeout);
	if (r)
		goto out;

	/* 2. A live table that writes back on suspend what came meanwhile. */
	if (!pmctl_table_has_flag(d->orig, FOS)) {
		if (pmctl_table_add_flag(d->orig, "cleaner", tmp, sizeof(tmp)) ||
		    pmctl_table_add_flag(tmp, FOS, params, sizeof(params))) {
			snprintf(why, sizeof(why), "table too long");
			goto fail_dm;
		}
		if (!pmctl_dm_load(d->name, d->len, PMCTL_TARGET, params, why, sizeof(why)) ||
		    injected(d, "load", why, sizeof(why)))
			goto fail_dm;
		d->fos_added = true;
		if (!pmctl_dm_simple(d->name, DM_DEVICE_SUSPEND, why, sizeof(why)) ||
		    !pmctl_dm_simple(d->name, DM_DEVICE_RESUME, why, sizeof(why)) ||
		    injected(d, "swap", why, sizeof(why)))
			goto fail_dm;
	}
	if (stop_sig) {
		r = fail(d, EXIT_INTERRUPTED, "interrupted");
		goto out;
	}

	/* 3. The linear table; the suspend flushes, nothing is dirty after. */
	if (!pmctl_dm_load(d->name, d->len, "linear", linear, why, sizeof(why)) ||
	    injected(d, "linear", why, sizeof(why)))
		goto fail_dm;
	if (!pmctl_dm_simple(d->name, DM_DEVICE_SUSPEND, why, sizeof(why)) ||
	    injected(d, "suspend", why, sizeof(why)))
		goto fail_dm;
	r = pmctl_sample(d->name, &s1);
	if (r) {
		r = fail(d, r, "cannot read the status while suspended");
		goto out;
	}
	if (stop_sig) {
		r = fail(d, EXIT_INTERRUPTED, "interrupted while suspending");
		goto out;
	}
	if (s1.st.dirty || injected(d, "check", why, sizeof(why))) {
		r = fail(d, EXIT_IO, "%llu blocks still dirty after the flush on suspend "
			 "(%llu writeback errors, health %s)%s%s",
			 (unsigned long long)s1.st.dirty,
			 (unsigned long long)s1.st.wb_errors, s1.st.health,
			 s1.st.dirty ? "" : ": ", s1.st.dirty ? "" : why);
		goto out;
	}

	/* 4. Forget the cache before the origin can be written around it. */
	for (i = 0; i < 2 && d->half[i]; i++) {
		r = pmctl_sb_take(d->half[i], d->saved[i]);
		if (r) {
			r = fail(d, EXIT_IO, "cannot clear the superblock of %s: %s",
				 d->half[i], strerror(-r));
			goto out;
		}
		d->n_taken++;
	}
	if (injected(d, "resume", why, sizeof(why)) ||
	    !pmctl_dm_simple(d->name, DM_DEVICE_RESUME, why, sizeof(why)))
		goto fail_dm;
	pause_here(d, "switched");

	/* 5. What is live now. */
	if (live_target(d->name, type, sizeof(type), &live) ||
	    strcmp(type, "linear") || strcmp(live, linear)) {
		err("%s: after the switch the table is '%s %s', not 'linear %s'",
		    d->name, type, live ? live : "?", linear);
		free(live);
		r = EXIT_DM;
		goto out;
	}
	free(live);
	printf("%s: detached: linear on %s (%s); the cache %s is no longer used\n",
	       d->name, op ? op : d->t.origin, d->t.origin, d->t.cache);
	if (d->half[1])
		printf("%s: the superblocks of %s and %s are cleared: the next create formats "
		       "them\n", d->name, d->half[0], d->half[1]);
	else
		printf("%s: the superblock of %s is cleared: the next create formats it\n",
		       d->name, d->half[0]);
	r = EXIT_OK;
	goto out;
fail_dm:
	r = fail(d, EXIT_DM, "%s", why);
out:
	free(op);
	return r;
}

int cmd_detach(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "quiet", no_argument, NULL, 'q' },
		{ NULL, 0, NULL, 0 },
	};
	struct detach d = { 0 };
	struct sigaction sa, old_int, old_term, old_hup;
	uint32_t timeout = 0;
	int c, r;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":t:q", opts, NULL)) != -1) {
		switch (c) {
		case 't':
			if (parse_u32_range(optarg, 0, UINT32_MAX, &timeout)) {
				err("--timeout: '%s' is not a number of seconds", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'q':
			d.quiet = true;
			break;
		default:
			return bad_option(c, argv, "detach");
		}
	}
	if (argc - optind != 1) {
		err("need exactly one NAME (see pmemcachectl detach --help)");
		return EXIT_USAGE;
	}
	d.name = argv[optind];
	d.fail_at = getenv("PMEMCACHECTL_DETACH_FAIL");
	d.pause_at = getenv("PMEMCACHECTL_DETACH_PAUSE");
	r = pmctl_dm_setup();
	if (r)
		return r;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;	/* no SA_RESTART: sleeps end early */
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	sigaction(SIGHUP, &sa, &old_hup);
	r = do_detach(&d, timeout);
	free(d.half[0]);
	free(d.half[1]);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigaction(SIGHUP, &old_hup, NULL);
	return r;
}

int cmd_set(int argc, char **argv)
{
	static const struct option opts[] = {
		{ NULL, 0, NULL, 0 },
	};
	const struct pmctl_key *key;
	char msg[128], why[256], reason[512], *params;
	const char *name;
	uint64_t len;
	int c, r, kfd;

	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1)
		return bad_option(c, argv, "set");
	if (argc - optind != 3) {
		err("need NAME KEY VALUE (see pmemcachectl set --help)");
		return EXIT_USAGE;
	}
	name = argv[optind];
	key = pmctl_key_find(argv[optind + 1]);
	if (!key) {
		err("unknown key '%s' (see pmemcachectl set --help)", argv[optind + 1]);
		return EXIT_USAGE;
	}
	if (pmctl_set_message(key, argv[optind + 2], msg, sizeof(msg), why, sizeof(why))) {
		err("%s", why);
		return EXIT_USAGE;
	}
	r = pmctl_dm_setup();
	if (r)
		return r;
	r = pmctl_dm_get(DM_DEVICE_TABLE, name, &len, &params);	/* exists, is ours */
	if (r)
		return r;
	free(params);
	kfd = pmctl_kmsg_open();
	r = pmctl_dm_message(name, msg);
	if (r) {
		if (!pmctl_kmsg_reason(kfd, reason, sizeof(reason)))
			snprintf(reason, sizeof(reason), "%s", strerror(-r));
		err("%s: the target refused '%s': %s", name, msg, reason);
		return EXIT_DM;
	}
	if (kfd >= 0)
		close(kfd);
	if (key->kind == PMCTL_KEY_SWITCH)
		printf("%s: %s %s\n", name, key->name, strncmp(msg, "no", 2) ? "on" : "off");
	else
		printf("%s: %s%s\n", name, msg,
		       strcmp(key->name, "stripe_blocks") ? "" : " (from the next resume)");
	/* Kept with the cache: activate (at boot) loads it again. */
	r = pmctl_settings_save(name);
	if (r)
		err("%s: the setting is live but not kept: the next activation loses it",
		    name);
	return r;
}
