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

DS_EXPORT int DS_WRAP(pipe)(int fds[2])
{
	int rc = DS_REAL(pipe)(fds);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

DS_EXPORT int DS_WRAP(pipe2)(int fds[2], int flags)
{
	int rc = DS_REAL(pipe2)(fds, flags);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

DS_EXPORT int DS_WRAP(socketpair)(int dom, int type, int proto, int fds[2])
{
	int rc = DS_REAL(socketpair)(dom, type, proto, fds);
	if (rc == 0 && ds__fdtab) {
		ds__fd_fresh(fds[0]);
		ds__fd_fresh(fds[1]);
	}
	return rc;
}

#define DS_FRESH_WRAP(ret_call)                                                               \
	do {                                                                                  \
		int fd_ = ret_call;                                                           \
		return ds__fdtab ? ds__fd_fresh(fd_) : fd_;                                   \
	} while (0)

DS_EXPORT int DS_WRAP(socket)(int dom, int type, int proto)
{
	DS_FRESH_WRAP(DS_REAL(socket)(dom, type, proto));
}

DS_EXPORT int DS_WRAP(accept)(int fd, struct sockaddr *sa, socklen_t *len)
{
	DS_FRESH_WRAP(DS_REAL(accept)(fd, sa, len));
}

DS_EXPORT int DS_WRAP(accept4)(int fd, struct sockaddr *sa, socklen_t *len, int flags)
{
	DS_FRESH_WRAP(DS_REAL(accept4)(fd, sa, len, flags));
}

DS_EXPORT int DS_WRAP(eventfd)(unsigned v, int flags)
{
	DS_FRESH_WRAP(DS_REAL(eventfd)(v, flags));
}

DS_EXPORT int DS_WRAP(memfd_create)(const char *name, unsigned flags)
{
	DS_FRESH_WRAP(DS_REAL(memfd_create)(name, flags));
}

DS_EXPORT int DS_WRAP(epoll_create1)(int flags)
{
	DS_FRESH_WRAP(DS_REAL(epoll_create1)(flags));
}
