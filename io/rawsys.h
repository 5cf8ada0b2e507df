/* SPDX-License-Identifier: BSD-3-Clause */
/* rawsys.h: the few system calls of a process's start, fork and exit that
 * the shim makes while the process has named no staged path (init.c,
 * write.c), made without libc.
 *
 * A fork + exec of a small program pays ~4 us of CPU per page fault here,
 * and the shim's start used to touch pages that the program itself never
 * does: libc's getpid, getcwd and lstat (each a page of libc text), and
 * dlsym(RTLD_NEXT) for the wrapped ones (getcwd, lstat: a dozen pages of
 * ld.so, libc, its hash tables and the stack).  A fork child shares no
 * file-backed page table entries with its parent, so it faults each of
 * them in again.  The raw call is the same system call libc makes.
 *
 * x86-64 and aarch64; on other machines the libc functions (with dlsym for
 * the wrapped ones), as before. */
#ifndef DS_RAWSYS_H
#define DS_RAWSYS_H

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define DS__RAWSYS 1
static inline long ds__rawsys(long n, long a, long b, long c, long d)
{
	long ret;
	register long r10 __asm__("r10") = d;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
	                 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
#define DS__RAWSYS 1
static inline long ds__rawsys(long n, long a, long b, long c, long d)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3) : "memory");
	return x0;
}
#endif

static inline pid_t ds__raw_getpid(void)
{
#ifdef DS__RAWSYS
	return (pid_t)ds__rawsys(SYS_getpid, 0, 0, 0, 0);
#else
	return getpid();
#endif
}

/* The kernel's getcwd: 1 when buf holds the (absolute) working directory,
 * 0 otherwise (an unreachable one, "(unreachable)/...", is not absolute). */
static inline int ds__raw_getcwd(char *buf, size_t size)
{
#ifdef DS__RAWSYS
	long n = ds__rawsys(SYS_getcwd, (long)buf, (long)size, 0, 0);
	return n > 0 && buf[0] == '/';
#else
	return DS__REAL(getcwd)(buf, size) != NULL && buf[0] == '/';
#endif
}

/* Does path exist (lstat succeeds)? */
static inline int ds__raw_lexists(const char *path)
{
#ifdef DS__RAWSYS
	struct stat st;
	return ds__rawsys(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, AT_SYMLINK_NOFOLLOW) == 0;
#else
	struct stat st;
	return DS__REAL(lstat)(path, &st) == 0;
#endif
}

#endif
