/* SPDX-License-Identifier: BSD-3-Clause */
/* sockio.c: dssock.h. */
#include "dscommon.h"
#include "dssock.h"

#include <limits.h>
#include <poll.h>
#include <sys/socket.h>

int ds_sock_xfer(int fd, void *buf, size_t len, int out, double deadline)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT)
		                : recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		int wait = -1;
		if (deadline > 0) {
			double left = (deadline - ds_now()) * 1000;
			if (left <= 0)
				return -ETIMEDOUT;
			/* rounded up: the poll ends after the deadline, not before */
			wait = left >= INT_MAX ? INT_MAX : (int)left + 1;
		}
		struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
		if (poll(&pf, 1, wait) < 0 && errno != EINTR)
			return -errno;
	}
	return 0;
}
