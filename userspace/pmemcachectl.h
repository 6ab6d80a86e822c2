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
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "status.h"

#define PMCTL_VERSION	"1.0"
/* The dm target type the tool drives. */
#define PMCTL_TARGET	"pmemcache"

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
	EXIT_NOORIGIN = 9,	/* activate: a cache's origin is not present;
				 * nothing was created for it */
	EXIT_INTERRUPTED = 130,	/* Ctrl-C (flush, remove, detach) */
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

/* Time and sizes (util.c). */
double pmctl_now_s(void);
void pmctl_sleep_ms(unsigned int ms);
void pmctl_human_bytes(double b, char *out, size_t len);
/* @j pretty-printed on stdout, one object, "/" not escaped. */
void pmctl_print_json(json_object *j);

/*
 * Table and message lines the tool builds (tables.c; pure, unit-tested).
 */
enum pmctl_key_kind {
	PMCTL_KEY_NUMBER,	/* "<key> <decimal>" message */
	PMCTL_KEY_SWITCH,	/* on/off: the "<key>" / "no<key>" messages */
	PMCTL_KEY_TABLE_ONLY,	/* a feature no message changes */
};

struct pmctl_key {
	const char *name;	/* the target's feature name */
	enum pmctl_key_kind kind;
	const char *what;	/* one line for --help and errors */
};

extern const struct pmctl_key pmctl_keys[];
extern const size_t pmctl_nr_keys;

/* The key named @name ('-' taken for '_'), or NULL. */
const struct pmctl_key *pmctl_key_find(const char *name);
/*
 * The message that sets @key to @value, in @msg.  0, or -1 with a reason
 * in @why (a number that is not a number, on/off that is neither, a key
 * that only the table sets).
 */
int pmctl_set_message(const struct pmctl_key *key, const char *value,
		      char *msg, size_t len, char *why, size_t why_len);
/*
 * The table params @params (as the kernel prints them: "<origin> <pmem>
 * <bs> [<n> <feature>...]") with the feature flag @flag added unless
 * already there.  0, or -1 if @params is not such a line or @out too short.
 */
int pmctl_table_add_flag(const char *params, const char *flag, char *out,
			 size_t len);
/* Whether the table params @params have the feature flag @flag. */
bool pmctl_table_has_flag(const char *params, const char *flag);
/*
 * A mirrored cache's table params: its halves, pmem_dev and the argument
 * of "mirror" ("-" if missing), into @first and @mirror (64 bytes each).
 * 0, or -1 if @params is no table of a mirrored cache.
 */
int pmctl_table_halves(const char *params, char *first, char *mirror);
/*
 * @params with the halves @first and @mirror, "degraded" left out (it is
 * one-shot).  0, or -1 as pmctl_table_add_flag().
 */
int pmctl_table_set_halves(const char *params, const char *first,
			   const char *mirror, char *out, size_t len);

/*
 * The create path (cmd_create.c), shared by create and activate: checks,
 * table, DM UUID.  0, or an exit code after one error line.
 */
struct create_opts;
int pmctl_create_run(const struct create_opts *o);
bool pmctl_target_registered(void);
/* The loaded target's version: 1, 0 not loaded, -1 device-mapper unusable. */
int pmctl_target_version(uint32_t version[3]);
bool pmctl_valid_dm_name(const char *name);

/* Command entry points: argv[0] is the command name. */
int cmd_create(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_flush(int argc, char **argv);
int cmd_remove(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_drain(int argc, char **argv);
int cmd_detach(int argc, char **argv);
int cmd_set(int argc, char **argv);
int cmd_activate(int argc, char **argv);
int cmd_udev_probe(int argc, char **argv);
int cmd_monitor(int argc, char **argv);
int cmd_replace(int argc, char **argv);

/* Help text of each command (main.c). */
void usage_cmd(const char *cmd, bool to_stderr);

#endif /* PMEMCACHECTL_H */
