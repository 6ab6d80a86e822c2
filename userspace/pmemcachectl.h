/* SPDX-License-Identifier: GPL-2.0 */
/*
 * pmemcachectl: administration tool of the dm-pmemcache target.
 *
 * Command layer shared declarations: exit codes (documented in
 * docs/pmemcachectl.8, keep both in sync), error reporting and the
 * command entry points, one file per command group.
 */
#ifndef PMEMCACHECTL_H
#define PMEMCACHECTL_H

#include <stdbool.h>
#include <stdint.h>

#define PMCTL_VERSION	"1.0"

/* Exit codes.  Stable: scripts test them. */
enum {
	EXIT_OK = 0,		/* success; check: valid cache, nothing dirty */
	EXIT_USAGE = 1,		/* bad command line: option, number, argument */
	EXIT_DEVICE = 2,	/* a device cannot be used: missing, wrong type,
				 * too small, busy, no permission, name in use */
	EXIT_DM = 3,		/* device-mapper refused or failed the request */
	EXIT_DIRTY = 4,		/* check: valid cache that holds dirty blocks */
	EXIT_NOCACHE = 5,	/* check: no cache on the device (blank/unformatted) */
	EXIT_CORRUPT = 6,	/* check: metadata corrupt, foreign or unsupported */
	EXIT_MISMATCH = 7,	/* the origin is not the one the cache belongs to */
	EXIT_IO = 8,		/* I/O error while draining or flushing */
	EXIT_INTERRUPTED = 130,	/* Ctrl-C (flush, remove) */
};

extern const char *prog;

/* One line on stderr: "pmemcachectl: <cmd>: <message>". */
void err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void warnx_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void set_err_cmd(const char *cmd);

/*
 * Parse an unsigned number, decimal, with an optional binary suffix
 * (k, M, G, T; with allow_suffix only).  Returns 0 or -1 (then prints
 * nothing: the caller names the option).
 */
int parse_u64(const char *s, uint64_t *v, bool allow_suffix);
int parse_u32_range(const char *s, uint32_t min, uint32_t max, uint32_t *v);

/* After getopt_long() returned '?' or ':': one line, EXIT_USAGE. */
int bad_option(int c, char **argv, const char *cmd);

/* Command entry points: argv[0] is the command name. */
int cmd_create(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_flush(int argc, char **argv);
int cmd_remove(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_drain(int argc, char **argv);

/* Help text of each command (main.c). */
void usage_cmd(const char *cmd, bool to_stderr);

#endif /* PMEMCACHECTL_H */
