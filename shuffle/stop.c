/* stop.c: `dstage stop`: stop the node service on every node, from one
 * call anywhere in the job.
 *
 * It creates JOBDIR/stop on the node it runs on; that node's service sees
 * it within STOP_CHECK_PERIOD and proposes the stop in its next agreement,
 * so every node leaves in the same iteration.  JOBDIR is node-local: on a
 * real cluster only the services of this node see the file, which is all
 * it takes.  Then it waits until the services it could reach have gone. */
#include "dslock.h"
#include "dsserve.h"
#include "svc.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char *stop_usage =
	"usage: dstage stop --to DIR [--job ID] [--timeout SECS]\n"
	"  stop the node service on every node of the job (run once, anywhere in the job);\n"
	"  waits until the services this node can see have left (default 60 s)\n";

static int xfer(int fd, void *buf, size_t len, int out, double deadline)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
		int left = (int)((deadline - ds_now()) * 1000);
		if (left <= 0 || poll(&pf, 1, left) == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

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
		up = !xfer(fd, &q, sizeof(q), 1, deadline) && !xfer(fd, &a, sizeof(a), 0, deadline) &&
		     a.magic == DS_PROTO_MAGIC && a.status == 0;
	}
	close(fd);
	return up;
}

int ds_cmd_stop(int argc, char **argv)
{
	static const struct option lo[] = {{"to", required_argument, 0, 't'},
	                                   {"job", required_argument, 0, 'j'},
	                                   {"timeout", required_argument, 0, 'T'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	const char *to = NULL, *job = NULL;
	double timeout = 60;
	int c;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't': to = optarg; break;
		case 'j': job = optarg; break;
		case 'T':
			if (ds_parse_double(optarg, &timeout) || timeout <= 0) {
				ds_error("--timeout '%s': not a number of seconds", optarg);
				return 2;
			}
			break;
		case 'h': fputs(stop_usage, stdout); return 0;
		default: fputs(stop_usage, stderr); return 2;
		}
	}
	if (!to || optind != argc) {
		fputs(stop_usage, stderr);
		return 2;
	}
	char *jobdir = ds_store_jobdir(to, job && *job ? job : NULL);
	DIR *d = opendir(jobdir);
	if (!d) {
		ds_error("'%s': %s", jobdir, strerror(errno));
		free(jobdir);
		return 1;
	}
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
	snprintf(stop, sizeof(stop), "%s/stop", jobdir);
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
			usleep(50000);
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
		usleep(50000);
	}
	if (lfd >= 0)
		close(lfd);
	/* outputs closed and not drained (the services said so too): fail */
	if (!rc && ds__out_report(jobdir, 0, 0))
		rc = 1;
out:
	for (size_t i = 0; i < nlive; i++)
		free(live[i]);
	free(live);
	free(jobdir);
	return rc;
}
