/* SPDX-License-Identifier: BSD-3-Clause */
/* wrap.h: how the shim finds the functions it wraps.  Every io/ file that
 * defines a wrapper includes this (through shim.h) and nothing else decides
 * it (UnifyFS unifyfs_wrap.h style):
 *
 *   DS__WRAP(name)   the name a wrapper is defined under: the libc name, so
 *                   LD_PRELOAD puts it in front of libc's; exported (the
 *                   library is built with -fvisibility=hidden)
 *   DS__REAL(name)   the next definition of name: libc's, found with
 *                   dlsym(RTLD_NEXT) at its first use (a process that
 *                   calls 10 of these functions does not pay ~150 look-ups
 *                   at start: fork + exec of a small program was 0.6x)
 *
 * Built with -DDS_LINK_WRAP, the same wrappers become __wrap_NAME and the
 * real calls __real_NAME, so a test binary can link them statically with
 * -Wl,--wrap=NAME instead of preloading.
 *
 * The list below is the whole set of libc entry points the shim touches.
 * X(ret, name, params) */
#ifndef DS_WRAP_H
#define DS_WRAP_H

#include <aio.h>
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <spawn.h>
#include <sys/uio.h>
#include <utime.h>

struct timeval;
struct timespec;
struct statx;
struct sockaddr;

/* Entry points of the older and the fortified ABI: glibc still exports them
 * but its headers no longer declare them all. */
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags);
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen);
ssize_t __readlink_chk(const char *path, char *buf, size_t n, size_t buflen);
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t n, size_t buflen);
char *__realpath_chk(const char *path, char *resolved, size_t resolvedlen);
char *__getcwd_chk(char *buf, size_t size, size_t buflen);

#define DS__REAL_FUNCS(X)                                                                     \
	/* fd.c: opening, reading, descriptors */                                             \
	X(int, open, (const char *, int, ...))                                                \
	X(int, open64, (const char *, int, ...))                                              \
	X(int, openat, (int, const char *, int, ...))                                         \
	X(int, openat64, (int, const char *, int, ...))                                       \
	X(int, __open_2, (const char *, int))                                                 \
	X(int, __open64_2, (const char *, int))                                               \
	X(int, __openat_2, (int, const char *, int))                                          \
	X(int, __openat64_2, (int, const char *, int))                                        \
	X(int, creat, (const char *, mode_t))                                                 \
	X(int, creat64, (const char *, mode_t))                                               \
	X(int, close, (int))                                                                  \
	X(int, close_range, (unsigned, unsigned, int))                                        \
	X(void, closefrom, (int))                                                             \
	X(ssize_t, read, (int, void *, size_t))                                               \
	X(ssize_t, __read_chk, (int, void *, size_t, size_t))                                 \
	X(ssize_t, pread, (int, void *, size_t, off_t))                                       \
	X(ssize_t, pread64, (int, void *, size_t, off64_t))                                   \
	X(ssize_t, __pread_chk, (int, void *, size_t, off_t, size_t))                         \
	X(ssize_t, __pread64_chk, (int, void *, size_t, off64_t, size_t))                     \
	X(ssize_t, readv, (int, const struct iovec *, int))                                   \
	X(ssize_t, preadv, (int, const struct iovec *, int, off_t))                           \
	X(ssize_t, preadv64, (int, const struct iovec *, int, off64_t))                       \
	X(ssize_t, preadv2, (int, const struct iovec *, int, off_t, int))                     \
	X(ssize_t, preadv64v2, (int, const struct iovec *, int, off64_t, int))                \
	X(off_t, lseek, (int, off_t, int))                                                    \
	X(off64_t, lseek64, (int, off64_t, int))                                              \
	X(int, dup, (int))                                                                    \
	X(int, dup2, (int, int))                                                              \
	X(int, dup3, (int, int, int))                                                         \
	X(int, fcntl, (int, int, ...))                                                        \
	X(int, fcntl64, (int, int, ...))                                                      \
	X(void *, mmap, (void *, size_t, int, int, int, off_t))                               \
	X(void *, mmap64, (void *, size_t, int, int, int, off64_t))                           \
	X(int, flock, (int, int))                                                             \
	X(int, posix_fadvise, (int, off_t, off_t, int))                                       \
	X(int, posix_fadvise64, (int, off64_t, off64_t, int))                                 \
	X(ssize_t, readahead, (int, off64_t, size_t))                                         \
	X(int, fsync, (int))                                                                  \
	X(int, fdatasync, (int))                                                              \
	X(ssize_t, sendfile, (int, int, off_t *, size_t))                                     \
	X(ssize_t, sendfile64, (int, int, off64_t *, size_t))                                 \
	X(ssize_t, copy_file_range, (int, off64_t *, int, off64_t *, size_t, unsigned))       \
	/* exec.c: staged descriptors across exec */                                          \
	X(int, execve, (const char *, char *const[], char *const[]))                          \
	X(int, execvpe, (const char *, char *const[], char *const[]))                         \
	X(int, fexecve, (int, char *const[], char *const[]))                                  \
	X(int, execveat, (int, const char *, char *const[], char *const[], int))              \
	/* aio.c: POSIX AIO on staged descriptors */                                          \
	X(int, aio_read, (struct aiocb *))                                                    \
	X(int, aio_read64, (struct aiocb64 *))                                                \
	X(int, aio_write, (struct aiocb *))                                                   \
	X(int, aio_write64, (struct aiocb64 *))                                               \
	X(int, aio_fsync, (int, struct aiocb *))                                              \
	X(int, aio_fsync64, (int, struct aiocb64 *))                                          \
	X(int, aio_cancel, (int, struct aiocb *))                                             \
	X(int, aio_cancel64, (int, struct aiocb64 *))                                         \
	X(int, lio_listio, (int, struct aiocb *const[], int, struct sigevent *))              \
	X(int, lio_listio64, (int, struct aiocb64 *const[], int, struct sigevent *))          \
	/* spawn.c: staged descriptors across posix_spawn */                                  \
	X(int, posix_spawn, (pid_t *, const char *, const posix_spawn_file_actions_t *,       \
	                     const posix_spawnattr_t *, char *const[], char *const[]))        \
	X(int, posix_spawnp, (pid_t *, const char *, const posix_spawn_file_actions_t *,      \
	                      const posix_spawnattr_t *, char *const[], char *const[]))       \
	X(int, posix_spawn_file_actions_init, (posix_spawn_file_actions_t *))                 \
	X(int, posix_spawn_file_actions_destroy, (posix_spawn_file_actions_t *))              \
	X(int, posix_spawn_file_actions_adddup2, (posix_spawn_file_actions_t *, int, int))    \
	X(int, posix_spawn_file_actions_addopen,                                              \
	  (posix_spawn_file_actions_t *, int, const char *, int, mode_t))                     \
	X(int, posix_spawn_file_actions_addchdir_np, (posix_spawn_file_actions_t *,           \
	                                              const char *))                          \
	X(int, posix_spawn_file_actions_addfchdir_np, (posix_spawn_file_actions_t *, int))    \
	X(int, system, (const char *))                                                        \
	X(FILE *, popen, (const char *, const char *))                                        \
	X(int, pclose, (FILE *))                                                              \
	/* fresh.c: other calls that hand the program a new descriptor */                     \
	X(int, pipe, (int[2]))                                                                \
	X(int, pipe2, (int[2], int))                                                          \
	X(int, socket, (int, int, int))                                                       \
	X(int, socketpair, (int, int, int, int[2]))                                           \
	X(int, accept, (int, struct sockaddr *, socklen_t *))                                 \
	X(int, accept4, (int, struct sockaddr *, socklen_t *, int))                           \
	X(int, eventfd, (unsigned, int))                                                      \
	X(int, memfd_create, (const char *, unsigned))                                        \
	X(int, epoll_create1, (int))                                                          \
	/* stat.c: metadata */                                                                \
	X(int, stat, (const char *, struct stat *))                                           \
	X(int, stat64, (const char *, struct stat64 *))                                       \
	X(int, lstat, (const char *, struct stat *))                                          \
	X(int, lstat64, (const char *, struct stat64 *))                                      \
	X(int, fstat, (int, struct stat *))                                                   \
	X(int, fstat64, (int, struct stat64 *))                                               \
	X(int, fstatat, (int, const char *, struct stat *, int))                              \
	X(int, fstatat64, (int, const char *, struct stat64 *, int))                          \
	X(int, __xstat, (int, const char *, struct stat *))                                   \
	X(int, __xstat64, (int, const char *, struct stat64 *))                               \
	X(int, __lxstat, (int, const char *, struct stat *))                                  \
	X(int, __lxstat64, (int, const char *, struct stat64 *))                              \
	X(int, __fxstat, (int, int, struct stat *))                                           \
	X(int, __fxstat64, (int, int, struct stat64 *))                                       \
	X(int, __fxstatat, (int, int, const char *, struct stat *, int))                      \
	X(int, __fxstatat64, (int, int, const char *, struct stat64 *, int))                  \
	X(int, statx, (int, const char *, int, unsigned, struct statx *))                     \
	X(int, statfs, (const char *, struct statfs *))                                       \
	X(int, statfs64, (const char *, struct statfs64 *))                                   \
	X(int, fstatfs, (int, struct statfs *))                                               \
	X(int, fstatfs64, (int, struct statfs64 *))                                           \
	X(int, statvfs, (const char *, struct statvfs *))                                     \
	X(int, statvfs64, (const char *, struct statvfs64 *))                                 \
	X(int, fstatvfs, (int, struct statvfs *))                                             \
	X(int, fstatvfs64, (int, struct statvfs64 *))                                         \
	X(int, access, (const char *, int))                                                   \
	X(int, faccessat, (int, const char *, int, int))                                      \
	X(int, euidaccess, (const char *, int))                                               \
	X(int, eaccess, (const char *, int))                                                  \
	X(ssize_t, readlink, (const char *, char *, size_t))                                  \
	X(ssize_t, readlinkat, (int, const char *, char *, size_t))                           \
	X(ssize_t, __readlink_chk, (const char *, char *, size_t, size_t))                    \
	X(ssize_t, __readlinkat_chk, (int, const char *, char *, size_t, size_t))             \
	X(long, pathconf, (const char *, int))                                                \
	X(long, fpathconf, (int, int))                                                        \
	X(ssize_t, getxattr, (const char *, const char *, void *, size_t))                    \
	X(ssize_t, lgetxattr, (const char *, const char *, void *, size_t))                   \
	X(ssize_t, fgetxattr, (int, const char *, void *, size_t))                            \
	X(ssize_t, listxattr, (const char *, char *, size_t))                                 \
	X(ssize_t, llistxattr, (const char *, char *, size_t))                                \
	X(ssize_t, flistxattr, (int, char *, size_t))                                         \
	/* cwd.c: the working directory and canonical names */                                \
	X(char *, realpath, (const char *, char *))                                           \
	X(char *, __realpath_chk, (const char *, char *, size_t))                             \
	X(char *, canonicalize_file_name, (const char *))                                     \
	X(char *, getcwd, (char *, size_t))                                                   \
	X(char *, __getcwd_chk, (char *, size_t, size_t))                                     \
	X(char *, get_current_dir_name, (void))                                               \
	X(int, chdir, (const char *))                                                         \
	X(int, fchdir, (int))                                                                 \
	/* dir.c: directory streams */                                                        \
	X(DIR *, opendir, (const char *))                                                     \
	X(DIR *, fdopendir, (int))                                                            \
	X(struct dirent *, readdir, (DIR *))                                                  \
	X(struct dirent64 *, readdir64, (DIR *))                                              \
	X(int, readdir_r, (DIR *, struct dirent *, struct dirent **))                         \
	X(int, readdir64_r, (DIR *, struct dirent64 *, struct dirent64 **))                   \
	X(int, closedir, (DIR *))                                                             \
	X(void, rewinddir, (DIR *))                                                           \
	X(void, seekdir, (DIR *, long))                                                       \
	X(long, telldir, (DIR *))                                                             \
	X(int, dirfd, (DIR *))                                                                \
	X(int, scandir, (const char *, struct dirent ***, int (*)(const struct dirent *),     \
	                 int (*)(const struct dirent **, const struct dirent **)))            \
	X(int, scandir64, (const char *, struct dirent64 ***,                                 \
	                   int (*)(const struct dirent64 *),                                  \
	                   int (*)(const struct dirent64 **, const struct dirent64 **)))      \
	X(int, scandirat, (int, const char *, struct dirent ***,                              \
	                   int (*)(const struct dirent *),                                    \
	                   int (*)(const struct dirent **, const struct dirent **)))          \
	X(int, scandirat64, (int, const char *, struct dirent64 ***,                          \
	                     int (*)(const struct dirent64 *),                                \
	                     int (*)(const struct dirent64 **, const struct dirent64 **)))    \
	X(ssize_t, getdents64, (int, void *, size_t))                                         \
	/* stdio.c: FILE streams */                                                           \
	X(FILE *, fopen, (const char *, const char *))                                        \
	X(FILE *, fopen64, (const char *, const char *))                                      \
	X(FILE *, freopen, (const char *, const char *, FILE *))                              \
	X(FILE *, freopen64, (const char *, const char *, FILE *))                            \
	X(FILE *, fdopen, (int, const char *))                                                \
	X(int, fileno, (FILE *))                                                              \
	X(int, fileno_unlocked, (FILE *))                                                     \
	X(int, fclose, (FILE *))                                                              \
	/* rofs.c: everything that would change the tree fails with EROFS */                  \
	X(int, mkdir, (const char *, mode_t))                                                 \
	X(int, mkdirat, (int, const char *, mode_t))                                          \
	X(int, rmdir, (const char *))                                                         \
	X(int, unlink, (const char *))                                                        \
	X(int, unlinkat, (int, const char *, int))                                            \
	X(int, rename, (const char *, const char *))                                          \
	X(int, renameat, (int, const char *, int, const char *))                              \
	X(int, renameat2, (int, const char *, int, const char *, unsigned))                   \
	X(int, link, (const char *, const char *))                                            \
	X(int, linkat, (int, const char *, int, const char *, int))                           \
	X(int, symlink, (const char *, const char *))                                         \
	X(int, symlinkat, (const char *, int, const char *))                                  \
	X(int, chmod, (const char *, mode_t))                                                 \
	X(int, fchmodat, (int, const char *, mode_t, int))                                    \
	X(int, chown, (const char *, uid_t, gid_t))                                           \
	X(int, lchown, (const char *, uid_t, gid_t))                                          \
	X(int, fchownat, (int, const char *, uid_t, gid_t, int))                              \
	X(int, truncate, (const char *, off_t))                                               \
	X(int, truncate64, (const char *, off64_t))                                           \
	X(int, utime, (const char *, const struct utimbuf *))                                 \
	X(int, utimes, (const char *, const struct timeval *))                                \
	X(int, lutimes, (const char *, const struct timeval *))                               \
	X(int, utimensat, (int, const char *, const struct timespec *, int))                  \
	X(int, futimesat, (int, const char *, const struct timeval *))                        \
	X(int, mknod, (const char *, mode_t, dev_t))                                          \
	X(int, mknodat, (int, const char *, mode_t, dev_t))                                   \
	X(int, setxattr, (const char *, const char *, const void *, size_t, int))             \
	X(int, lsetxattr, (const char *, const char *, const void *, size_t, int))            \
	X(int, removexattr, (const char *, const char *))                                     \
	X(int, lremovexattr, (const char *, const char *))                                    \
	X(int, mkstemp, (char *))                                                             \
	X(int, mkstemp64, (char *))                                                           \
	X(int, mkostemp, (char *, int))                                                       \
	X(int, mkostemp64, (char *, int))                                                     \
	X(int, mkstemps, (char *, int))                                                       \
	X(int, mkstemps64, (char *, int))                                                     \
	X(int, mkostemps, (char *, int, int))                                                 \
	X(int, mkostemps64, (char *, int, int))                                               \
	X(char *, mkdtemp, (char *))                                                          \
	X(int, mkfifo, (const char *, mode_t))                                                \
	X(int, mkfifoat, (int, const char *, mode_t))                                         \
	/* syscall.c: syscall(2) for the numbers above */                                    \
	X(long, syscall, (long, ...))                                                         \
	/* dl.c: shared objects in the mount */                                               \
	X(void *, dlopen, (const char *, int))                                                \
	X(void *, dlmopen, (Lmid_t, const char *, int))

#define DS__REAL_MEMBER(ret, name, params) ret(*name) params;
struct ds__real {
	DS__REAL_FUNCS(DS__REAL_MEMBER)
};
#undef DS__REAL_MEMBER

#ifdef DS_LINK_WRAP
#define DS__REAL_DECL(ret, name, params) ret __real_##name params;
DS__REAL_FUNCS(DS__REAL_DECL)
#undef DS__REAL_DECL
/* the wrappers too: syscall.c calls them across files */
#define DS__WRAP_DECL(ret, name, params) ret __wrap_##name params;
DS__REAL_FUNCS(DS__WRAP_DECL)
#undef DS__WRAP_DECL
#define DS__WRAP(name) __wrap_##name
#define DS__REAL(name) __real_##name
#else
extern struct ds__real ds__real;
/* Resolve name into *slot (init.c); returns what it stored. */
void (*ds__real_find(void (**slot)(void), const char *name))(void);
#define DS__WRAP(name) name
#define DS__REAL(name)                                                                        \
	(__builtin_expect(__atomic_load_n(&ds__real.name, __ATOMIC_RELAXED) != NULL, 1)         \
	     ? __atomic_load_n(&ds__real.name, __ATOMIC_RELAXED)                                \
	     : (__typeof__(ds__real.name))ds__real_find((void (**)(void))&ds__real.name, #name))
#endif

/* Does this libc have name?  Missing ones are resolved to a stub that fails
 * with ENOSYS (init.c), never NULL. */
#ifdef DS_LINK_WRAP
#define DS__HAVE(name) 1
#else
int ds__real_missing(void (*fn)(void));
#define DS__HAVE(name) (!ds__real_missing((void (*)(void))DS__REAL(name)))
#endif

/* Put in front of every wrapper definition: exported, never inlined away. */
#define DS__EXPORT __attribute__((visibility("default"), noinline))

/* Prepare ds__real (init.c): the look-ups themselves happen at first use. */
void ds__real_resolve(void);

#endif
