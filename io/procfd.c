/* SPDX-License-Identifier: BSD-3-Clause */
/* procfd.c: names of a descriptor through /proc and /dev/fd.
 *
 * The kernel shows a real file's path in readlink("/proc/self/fd/N"); for a
 * staged descriptor it would show the reservation (NODEDIR/reserved).  The
 * readlink wrappers (stat.c) ask here first: /proc/self/fd/N,
 * /proc/thread-self/fd/N, /proc/<own pid>/fd/N and /dev/fd/N of a staged
 * descriptor name the staged path.  (stat of such a path is not emulated
 * yet: the kernel follows the magic link to the reservation itself and shows
 * a symlink of 8 bytes, never a directory or another file.) */
#include "shim.h"

#include <stdio.h>

/* The descriptor number path names, or -1 (no system call unless the path
 * starts with /proc/<digits>). */
int ds__procfd(const char *path)
{
	const char *p;
	if (!strncmp(path, "/dev/fd/", 8)) {
		p = path + 8;
	} else if (!strncmp(path, "/proc/self/fd/", 14)) {
		p = path + 14;
	} else if (!strncmp(path, "/proc/thread-self/fd/", 21)) {
		p = path + 21;
	} else if (!strncmp(path, "/proc/", 6) && path[6] >= '1' && path[6] <= '9') {
		char own[40];
		int n = snprintf(own, sizeof(own), "/proc/%ld/fd/", (long)getpid());
		if (strncmp(path, own, (size_t)n))
			return -1;
		p = path + n;
	} else {
		return -1;
	}
	long fd = 0;
	if (*p < '0' || *p > '9')
		return -1;
	for (; *p >= '0' && *p <= '9'; p++) {
		fd = fd * 10 + (*p - '0');
		if (fd > INT_MAX)
			return -1;
	}
	if (*p || !ds__fd_is_ours((int)fd))
		return -1;
	return (int)fd;
}
