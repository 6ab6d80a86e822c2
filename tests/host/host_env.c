// SPDX-License-Identifier: GPL-2.0
/*
 * What the shared metadata code asks of its environment (pmc_shim.h),
 * for the host programs that need no more: no clock, messages to stderr.
 * Each program still provides pmc_random_bytes(), whose determinism it
 * chooses.
 */
#include <stdarg.h>
#include <stdio.h>

#include "pmc_shim.h"

u64 pmc_now_seconds(void)
{
	return 0;
}

void pmc_log(int level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}
