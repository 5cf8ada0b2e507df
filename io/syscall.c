/* SPDX-License-Identifier: BSD-3-Clause */
/* syscall.c: the generic syscall() entry point.
 *
 * Some programs bypass libc's wrappers for calls libc lacked when they were
 * written and issue them through syscall(2): libuv (node.js, cmake) stats
 * with syscall(SYS_statx, ...), and others open, read or list the same way.
 * Those calls would reach the kernel, which knows nothing of the mount, so
 * the file-system numbers the shim emulates go to the same code as the libc
 * functions (the wrappers report errors the same way syscall() does: -1 and
 * errno).  Every other number, and every call while the shim itself runs,
 * goes to libc's syscall() untouched with all six argument registers: a
 * varargs caller passes at most six, and reading six longs is what glibc's
 * own syscall() does. */
#include "shim.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif
#ifndef SYS_faccessat2
#define SYS_faccessat2 439
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

/* struct open_how of openat2(2), in case the headers predate it */
struct ds__open_how {
	uint64_t flags, mode, resolve;
};

#define P(x) ((const char *)(x))
#define I(x) ((int)(x))

/* Is (dirfd, path) an *at() name the shim may own?  Same test as the
 * wrappers' own. */
static int at_path_ours(long dirfd, const char *path)
{
	if (ds__null(path))
		return 0;
	if (path[0] != '/' && I(dirfd) != AT_FDCWD)
		return ds__at_maybe_ours(I(dirfd), path);
	return ds__maybe_ours(path);
}

static long openat2_call(long dirfd, const char *path, struct ds__open_how *how, size_t size,
                         long a5, long a6)
{
	ds__ensure_init();
	if (ds__null(how) || size < sizeof(*how) || !at_path_ours(dirfd, path))
		return DS__REAL(syscall)(SYS_openat2, dirfd, path, how, size, a5, a6);
	/* resolve restrictions (RESOLVE_BENEATH, NO_SYMLINKS...) are the
	 * kernel's: inside the mount every name is a read-only one anyway */
	return DS__WRAP(openat)(I(dirfd), path, (int)how->flags, (mode_t)how->mode);
}

static long getcwd_call(char *buf, size_t size, long a3, long a4, long a5, long a6)
{
	ds__ensure_init();
	if (atomic_load_explicit(&ds__cwd, memory_order_relaxed) < 0)
		return DS__REAL(syscall)(SYS_getcwd, buf, size, a3, a4, a5, a6);
	/* the raw call returns the length with the NUL */
	if (!DS__WRAP(getcwd)(buf, size))
		return -1;
	return (long)strlen(buf) + 1;
}

/* Does system call nr make a process without fork's handlers? */
static int forks_raw(long nr)
{
#ifdef SYS_fork
	if (nr == SYS_fork)
		return 1;
#endif
#ifdef SYS_vfork
	if (nr == SYS_vfork)
		return 1;
#endif
	return nr == SYS_clone || nr == SYS_clone3;
}

DS__EXPORT long DS__WRAP(syscall)(long nr, ...)
{
	va_list ap;
	va_start(ap, nr);
	long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
	long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
	va_end(ap);
	/* a child without fork's handlers: from now on ownership is asked (owner.c) */
	if (DS__UNLIKELY(forks_raw(nr)))
		ds__forked_raw_note();
	if (DS__UNLIKELY(!DS__REAL(syscall))) {
		/* called before init (another library's constructor): init
		 * finds libc's; from inside init, ask the loader directly */
		ds__ensure_init();
		if (!DS__REAL(syscall)) {
			long (*real)(long, ...) = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
			return real(nr, a1, a2, a3, a4, a5, a6);
		}
	}
	if (DS__UNLIKELY(ds__busy))
		goto real;
	switch (nr) {
	/* metadata */
	case SYS_statx:
		return DS__WRAP(statx)(I(a1), P(a2), I(a3), (unsigned)a4, (struct statx *)a5);
	case SYS_newfstatat:
		return DS__WRAP(fstatat)(I(a1), P(a2), (struct stat *)a3, I(a4));
	case SYS_stat: return DS__WRAP(stat)(P(a1), (struct stat *)a2);
	case SYS_lstat: return DS__WRAP(lstat)(P(a1), (struct stat *)a2);
	case SYS_fstat: return DS__WRAP(fstat)(I(a1), (struct stat *)a2);
	case SYS_statfs: return DS__WRAP(statfs)(P(a1), (struct statfs *)a2);
	case SYS_fstatfs: return DS__WRAP(fstatfs)(I(a1), (struct statfs *)a2);
	case SYS_access: return DS__WRAP(access)(P(a1), I(a2));
	case SYS_faccessat: return DS__WRAP(faccessat)(I(a1), P(a2), I(a3), 0);
	case SYS_faccessat2: return DS__WRAP(faccessat)(I(a1), P(a2), I(a3), I(a4));
	case SYS_readlink: return DS__WRAP(readlink)(P(a1), (char *)a2, (size_t)a3);
	case SYS_readlinkat: return DS__WRAP(readlinkat)(I(a1), P(a2), (char *)a3, (size_t)a4);
	/* opening and reading */
	case SYS_open: return DS__WRAP(open)(P(a1), I(a2), (mode_t)a3);
	case SYS_openat: return DS__WRAP(openat)(I(a1), P(a2), I(a3), (mode_t)a4);
	case SYS_openat2:
		return openat2_call(a1, P(a2), (struct ds__open_how *)a3, (size_t)a4, a5, a6);
	case SYS_creat: return DS__WRAP(creat)(P(a1), (mode_t)a2);
	case SYS_close: return DS__WRAP(close)(I(a1));
	case SYS_close_range: return DS__WRAP(close_range)((unsigned)a1, (unsigned)a2, I(a3));
	case SYS_read: return DS__WRAP(read)(I(a1), (void *)a2, (size_t)a3);
	case SYS_pread64: return DS__WRAP(pread64)(I(a1), (void *)a2, (size_t)a3, (off64_t)a4);
	case SYS_readv: return DS__WRAP(readv)(I(a1), (const struct iovec *)a2, I(a3));
	/* 64-bit: the low half of the offset register holds all of it */
	case SYS_preadv:
		return DS__WRAP(preadv64)(I(a1), (const struct iovec *)a2, I(a3), (off64_t)a4);
	case SYS_preadv2:
		return DS__WRAP(preadv64v2)(I(a1), (const struct iovec *)a2, I(a3), (off64_t)a4, I(a6));
	case SYS_lseek: return DS__WRAP(lseek64)(I(a1), (off64_t)a2, I(a3));
	case SYS_dup: return DS__WRAP(dup)(I(a1));
	case SYS_dup2: return DS__WRAP(dup2)(I(a1), I(a2));
	case SYS_dup3: return DS__WRAP(dup3)(I(a1), I(a2), I(a3));
	case SYS_fcntl: return DS__WRAP(fcntl)(I(a1), I(a2), a3);
	case SYS_mmap:
		return (long)DS__WRAP(mmap64)((void *)a1, (size_t)a2, I(a3), I(a4), I(a5), (off64_t)a6);
	case SYS_sendfile: return DS__WRAP(sendfile64)(I(a1), I(a2), (off64_t *)a3, (size_t)a4);
	case SYS_copy_file_range:
		return DS__WRAP(copy_file_range)(I(a1), (off64_t *)a2, I(a3), (off64_t *)a4, (size_t)a5,
		                                (unsigned)a6);
	case SYS_getdents64: return DS__WRAP(getdents64)(I(a1), (void *)a2, (size_t)a3);
	/* the working directory */
	case SYS_chdir: return DS__WRAP(chdir)(P(a1));
	case SYS_fchdir: return DS__WRAP(fchdir)(I(a1));
	case SYS_getcwd: return getcwd_call((char *)a1, (size_t)a2, a3, a4, a5, a6);
	/* changes: EROFS inside the mount */
	case SYS_mkdir: return DS__WRAP(mkdir)(P(a1), (mode_t)a2);
	case SYS_mkdirat: return DS__WRAP(mkdirat)(I(a1), P(a2), (mode_t)a3);
	case SYS_rmdir: return DS__WRAP(rmdir)(P(a1));
	case SYS_unlink: return DS__WRAP(unlink)(P(a1));
	case SYS_unlinkat: return DS__WRAP(unlinkat)(I(a1), P(a2), I(a3));
	case SYS_rename: return DS__WRAP(rename)(P(a1), P(a2));
	case SYS_renameat: return DS__WRAP(renameat)(I(a1), P(a2), I(a3), P(a4));
	case SYS_renameat2: return DS__WRAP(renameat2)(I(a1), P(a2), I(a3), P(a4), (unsigned)a5);
	case SYS_link: return DS__WRAP(link)(P(a1), P(a2));
	case SYS_linkat: return DS__WRAP(linkat)(I(a1), P(a2), I(a3), P(a4), I(a5));
	case SYS_symlink: return DS__WRAP(symlink)(P(a1), P(a2));
	case SYS_symlinkat: return DS__WRAP(symlinkat)(P(a1), I(a2), P(a3));
	case SYS_chmod: return DS__WRAP(chmod)(P(a1), (mode_t)a2);
	case SYS_fchmodat: return DS__WRAP(fchmodat)(I(a1), P(a2), (mode_t)a3, 0);
	case SYS_chown: return DS__WRAP(chown)(P(a1), (uid_t)a2, (gid_t)a3);
	case SYS_lchown: return DS__WRAP(lchown)(P(a1), (uid_t)a2, (gid_t)a3);
	case SYS_fchownat: return DS__WRAP(fchownat)(I(a1), P(a2), (uid_t)a3, (gid_t)a4, I(a5));
	case SYS_truncate: return DS__WRAP(truncate64)(P(a1), (off64_t)a2);
	case SYS_utimensat:
		return DS__WRAP(utimensat)(I(a1), P(a2), (const struct timespec *)a3, I(a4));
	case SYS_mknod: return DS__WRAP(mknod)(P(a1), (mode_t)a2, (dev_t)a3);
	case SYS_mknodat: return DS__WRAP(mknodat)(I(a1), P(a2), (mode_t)a3, (dev_t)a4);
	default: break;
	}
real:
	return DS__REAL(syscall)(nr, a1, a2, a3, a4, a5, a6);
}
