/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_stop.c: `dstage stop`: stop the node service on every node, from one
 * call anywhere in the job.
 *
 * It creates JOBDIR/stop on the node it runs on; that node's service sees
 * it within STOP_CHECK_PERIOD and proposes the stop in its next agreement,
 * so every node leaves in the same iteration.  JOBDIR is node-local: on a
 * real cluster only the services of this node see the file, which is all
 * it takes.  Then it waits until the services it could reach have gone. */
#include "dslock.h"
#include "dsmpi.h"
#include "dsoutputs.h"
#include "dsserve.h"
#include "dssock.h"
#include "svc.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define POLL_US 50000 /* between two looks at a service or the lock */

static const char *stop_usage =
	"usage: dstage stop --to DIR [--job ID] [--timeout SECS]\n"
	"  stop the node service on every node of the job (run once, anywhere in the job);\n"
	"  waits until the services this node can see have left (default 60 s)\n";

/* 1 when a service answers DS_OP_PING on this socket, 0 when none does. */
static int ping(const char *sock, double timeout)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock) >= sizeof(sa.sun_path))
		return 0;
	strcpy(sa.sun_path, sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return 0;
	double deadline = ds_now() + timeout;
	int up = 0;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN) {
		struct ds_req q = {DS_PROTO_MAGIC, DS_OP_PING, 0, 0, 0, 0};
		struct ds_resp a;
		up = !ds_sock_xfer(fd, &q, sizeof(q), 1, deadline) &&
		     !ds_sock_xfer(fd, &a, sizeof(a), 0, deadline) && a.magic == DS_PROTO_MAGIC &&
		     a.status == 0;
	}
	close(fd);
	return up;
}

int ds_cmd_stop(int argc, char **argv)
{
	struct ds_jobcmd j = {.timeout = 60};
	int st = ds_jobcmd_args(argc, argv, stop_usage, 0, &j);
	if (st >= 0)
		return st;
	double timeout = j.timeout;
	char *jobdir = j.jobdir;
	DIR *d = j.d;
	/* the services this node can see: every NODEDIR/sock that answers */
	char **live = NULL;
	size_t nlive = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t k;
		if (ds_parse_u64(de->d_name, &k))
			continue;
		char *sock;
		if (asprintf(&sock, "%s/%s/" DS_SOCK_NAME, jobdir, de->d_name) < 0)
			break;
		if (ping(sock, 2)) {
			live = ds_xrealloc(live, (nlive + 1) * sizeof(*live));
			live[nlive++] = sock;
		} else {
			free(sock);
		}
	}
	closedir(d);
	int rc = 0;
	if (!nlive) {
		ds_error("'%s': no node service is running here", jobdir);
		rc = 1;
		goto out;
	}
	char stop[PATH_MAX];
	ds_store_path(stop, sizeof(stop), jobdir, DS_STOP_NAME);
	int fd = open(stop, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		ds_error("'%s': %s", stop, strerror(errno));
		rc = 1;
		goto out;
	}
	close(fd);
	double deadline = ds_now() + timeout;
	for (size_t i = 0; i < nlive; i++) {
		while (ping(live[i], 1)) {
			if (ds_now() > deadline) {
				ds_error("'%s': still serving after %.0f s", live[i], timeout);
				rc = 1;
				goto out;
			}
			usleep(POLL_US);
		}
	}
	/* and until they let go of the job directory (docs/design.md section 6), so that a
	 * `dstage clean` right after us is not refused */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s/" DS_LOCK_NAME, jobdir);
	int lfd = open(lock, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	while (lfd >= 0 && flock(lfd, LOCK_SH | LOCK_NB) < 0) {
		if (ds_now() > deadline) {
			ds_error("'%s': still held after %.0f s", lock, timeout);
			rc = 1;
			break;
		}
		usleep(POLL_US);
	}
	if (lfd >= 0)
		close(lfd);
	/* outputs closed and not drained (the services said so too): fail */
	if (!rc && ds_out_report(jobdir, 0, 0))
		rc = 1;
out:
	for (size_t i = 0; i < nlive; i++)
		free(live[i]);
	free(live);
	free(jobdir);
	return rc;
}
