/* SPDX-License-Identifier: BSD-3-Clause */
/* fault.c: fault injection at named points, for the hardening tests; and the
 * switches measurements turn paths off with (ds_env_switch).
 *
 * DSTAGE_FAULT=POINT[:rank=N][:action=error|kill|exit|sleep][:secs=S][,POINT...]
 *   POINT   a name the code passes to ds_fault(), e.g. stage.after_bcast
 *   rank    only on that rank (default: every rank)
 *   action  error: ds_fault returns -EIO, the code fails as for a real error
 *           (default); kill: SIGKILL this process; exit: _exit(3) at once;
 *           sleep: wait S seconds (default 2, fractions allowed), then go on
 *           as if nothing happened (a slow disk or network: lets a test act
 *           in the middle of a step, e.g. fill the disk after the capacity
 *           check)
 * Off (and one getenv) unless the variable is set. */
#include "dscommon.h"

#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int ds_env_switch(const char *name, int *cache)
{
	int m = __atomic_load_n(cache, __ATOMIC_RELAXED);
	if (m < 0) {
		const char *e = getenv(name);
		m = !e || strcmp(e, "0");
		__atomic_store_n(cache, m, __ATOMIC_RELAXED);
	}
	return m;
}

int ds_fault(const char *point, int rank)
{
	const char *spec = getenv("DSTAGE_FAULT");
	if (!spec || !*spec)
		return 0;
	size_t plen = strlen(point);
	for (const char *s = spec; *s;) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		if (len >= plen && !strncmp(s, point, plen) && (len == plen || s[plen] == ':')) {
			int want_rank = -1;
			double secs = 2;
			const char *action = "error";
			size_t alen = 5;
			for (const char *o = s + plen; o < s + len && *o == ':';) {
				const char *oe = memchr(o + 1, ':', s + len - o - 1);
				if (!oe)
					oe = s + len;
				if (!strncmp(o + 1, "rank=", 5))
					want_rank = atoi(o + 6);
				else if (!strncmp(o + 1, "secs=", 5))
					secs = atof(o + 6);
				else if (!strncmp(o + 1, "action=", 7)) {
					action = o + 8;
					alen = oe - action;
				}
				o = oe;
			}
			if (want_rank < 0 || want_rank == rank) {
				if (alen == 5 && !strncmp(action, "sleep", 5)) {
					ds_warn("fault injected at '%s' (rank %d): sleeping %.3g s", point,
					        rank, secs);
					struct timespec ts = {(time_t)secs,
					                      (long)((secs - (double)(time_t)secs) * 1e9)};
					while (secs > 0 && nanosleep(&ts, &ts) < 0 && errno == EINTR)
						;
					return 0;
				}
				ds_error("fault injected at '%s' (rank %d)", point, rank);
				if (alen == 4 && !strncmp(action, "kill", 4))
					kill(getpid(), SIGKILL);
				if (alen == 4 && !strncmp(action, "exit", 4))
					_exit(3);
				return -EIO;
			}
		}
		s += len;
		if (*s == ',')
			s++;
	}
	return 0;
}
