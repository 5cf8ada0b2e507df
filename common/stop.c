/* SPDX-License-Identifier: BSD-3-Clause */
/* stop.c: SIGINT and SIGTERM ask a step (pack, stage) to stop.
 *
 * The handler only records the signal; the step's loops (the pack writer,
 * the scan, stage's reader) and the S3 client's request engine look at
 * ds_stop_signal() and end what they do with -EINTR, so the step fails as
 * for any other error: every rank exits 1, what was half-written is
 * removed (docs/guarantees.md).  SA_RESTART: a file read or write in
 * progress completes; poll(), where the S3 client waits, returns at once. */
#include "dscommon.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig)
{
	stop_sig = sig;
}

void ds_stop_on_signals(void)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

int ds_stop_signal(void)
{
	return stop_sig;
}

const char *ds_stop_why(void)
{
	int s = stop_sig;
	return s == SIGINT ? "interrupted by SIGINT" : s == SIGTERM ? "interrupted by SIGTERM"
	                                                           : "interrupted";
}
