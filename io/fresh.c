/* SPDX-License-Identifier: BSD-3-Clause */
/* fresh.c: calls that hand the program a new descriptor number, besides
 * the opens and dups of fd.c.  After a raw close behind the shim's back
 * (a close_range system call), the kernel may give the program a number the
 * table still holds as staged or private: each of these drops what the
 * table says about the numbers it returns (ds__fd_fresh: one table load,
 * nothing more, when the table knows nothing about them). */
#include "shim.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>

DS__EXPORT int DS__WRAP(pipe)(int fds[2])
{
	int rc = DS__REAL(pipe)(fds);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

DS__EXPORT int DS__WRAP(pipe2)(int fds[2], int flags)
{
	int rc = DS__REAL(pipe2)(fds, flags);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

DS__EXPORT int DS__WRAP(socketpair)(int dom, int type, int proto, int fds[2])
{
	int rc = DS__REAL(socketpair)(dom, type, proto, fds);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

#define FRESH_WRAP(ret_call)                                                                  \
	do {                                                                                  \
		int fd_ = ret_call;                                                           \
		return ds__fdtab ? ds__fd_fresh(fd_) : fd_;                                   \
	} while (0)

DS__EXPORT int DS__WRAP(socket)(int dom, int type, int proto)
{
	FRESH_WRAP(DS__REAL(socket)(dom, type, proto));
}

DS__EXPORT int DS__WRAP(accept)(int fd, struct sockaddr *sa, socklen_t *len)
{
	FRESH_WRAP(DS__REAL(accept)(fd, sa, len));
}

DS__EXPORT int DS__WRAP(accept4)(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	FRESH_WRAP(DS__REAL(accept4)(fd, sa, len, flags));
}

DS__EXPORT int DS__WRAP(eventfd)(unsigned v, int flags)
{
	FRESH_WRAP(DS__REAL(eventfd)(v, flags));
}

DS__EXPORT int DS__WRAP(memfd_create)(const char *name, unsigned flags)
{
	FRESH_WRAP(DS__REAL(memfd_create)(name, flags));
}

DS__EXPORT int DS__WRAP(epoll_create1)(int flags)
{
	FRESH_WRAP(DS__REAL(epoll_create1)(flags));
}
