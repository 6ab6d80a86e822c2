// SPDX-License-Identifier: GPL-2.0
/* pmemcachectl: error lines, number parsing and formatting, time. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <getopt.h>
#include <time.h>

#include "pmemcachectl.h"

const char *prog = "pmemcachectl";
static const char *err_cmd;

void set_err_cmd(const char *cmd)
{
	err_cmd = cmd;
}

static void vline(const char *kind, const char *fmt, va_list ap)
{
	fprintf(stderr, "%s: ", prog);
	if (err_cmd)
		fprintf(stderr, "%s: ", err_cmd);
	if (kind)
		fputs(kind, stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

void err(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline(NULL, fmt, ap);
	va_end(ap);
}

void warnx_(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vline("warning: ", fmt, ap);
	va_end(ap);
}

int parse_u64(const char *s, uint64_t *v, bool allow_suffix)
{
	unsigned long long x;
	char *end;
	int shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno)
		return -1;
	if (*end && allow_suffix) {
		switch (*end) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		case 't': case 'T': shift = 40; break;
		default: return -1;
		}
		end++;
		if (*end == 'i' && end[1] == 'B')
			end += 2;
		else if (*end == 'B')
			end++;
		if (shift && x > (~0ULL >> shift))
			return -1;
		x <<= shift;
	}
	if (*end)
		return -1;
	*v = x;
	return 0;
}

int parse_u32_range(const char *s, uint32_t min, uint32_t max, uint32_t *v)
{
	uint64_t x;

	if (parse_u64(s, &x, false) || x < min || x > max)
		return -1;
	*v = (uint32_t)x;
	return 0;
}

int bad_option(int c, char **argv, const char *cmd)
{
	if (c == ':')
		err("option '%s' needs a value (see pmemcachectl %s --help)",
		    argv[optind - 1], cmd);
	else
		err("bad option '%s' (see pmemcachectl %s --help)",
		    argv[optind - 1], cmd);
	return EXIT_USAGE;
}

double pmctl_now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

void pmctl_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

void pmctl_human_bytes(double b, char *out, size_t len)
{
	static const char *const u[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	int i = 0;

	while (b >= 1024 && i < 4) {
		b /= 1024;
		i++;
	}
	snprintf(out, len, "%.1f %s", b, u[i]);
}

/* The JSON output of every command: pretty, "/" not escaped. */
void pmctl_print_json(json_object *j)
{
	printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PRETTY |
						      JSON_C_TO_STRING_NOSLASHESCAPE));
}
