/* SPDX-License-Identifier: BSD-3-Clause */
/* failover.c: a reader across a restart of the node service
 * (docs/failover.md).
 *
 * When a node is lost, the service ends on every node and is started again
 * on the survivors (`dstage serve --nodes LIST`).  A service started with
 * --failover (or --nodes) says so in JOBDIR/nodes; then a read that cannot
 * reach the service (no socket, refused, connection dropped, or the
 * service's get failed because a holder died under it) is asked again, on
 * a new connection, until the read's deadline (DSTAGE_TIMEOUT): readers see
 * no error across the restart.  A sample whose every holder is lost is
 * answered EHOSTDOWN by the restarted service: EIO at once, the file named.
 * Without JOBDIR/nodes nothing is retried (the behaviour before failover:
 * EIO as soon as the service is gone). */
#include "shim.h"
#include "dsnodeset.h"

#include <time.h>

int ds__failover_mode(void)
{
	struct ds_nodes_hist h;
	if (ds_nodes_load(ds__g.jobdir, &h))
		return 0;
	int on = h.failover;
	ds_nodes_release(&h);
	return on;
}

int ds__failover_retry(double deadline, int attempt)
{
	double left = deadline - ds_now();
	if (left <= 0.01 || !ds__failover_mode())
		return 0;
	/* 10 ms, doubling, at most 200 ms: a restart takes a second or two */
	double wait = 0.01 * (double)(1u << (attempt < 5 ? attempt : 5));
	if (wait > 0.2)
		wait = 0.2;
	if (wait > left - 0.005)
		wait = left - 0.005;
	struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
	return ds_now() < deadline;
}
