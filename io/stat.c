/* SPDX-License-Identifier: BSD-3-Clause */
/* stat.c: metadata of staged entries, all of it from the mapped index with
 * no system call: the stat family in both generations (stat and __xstat, the
 * 64-bit forms, statx), statfs/statvfs, access, readlink, extended
 * attributes (none: ENODATA). */
#include "shim.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "64-bit ABI: stat == stat64");
_Static_assert(sizeof(struct statfs) == sizeof(struct statfs64), "64-bit ABI");
_Static_assert(sizeof(struct statvfs) == sizeof(struct statvfs64), "64-bit ABI");

/* f_type of the dataset: no real file system's, so tools that special-case
 * known types (gnulib fts) take their general path. */
#define FS_MAGIC 0x64737467 /* "dstg" */

int ds__stat_res(const struct ds__res *r, struct stat *st)
{
	if (r->v.kind != DS__V_NONE)
		ds__virt_stat(&r->v, st, 1);
	else
		ds_index_stat(&ds__g.ix, (uint32_t)r->id, st);
	return 0;
}

int ds__stat_file(const struct ds__file *f, struct stat *st)
{
	if (f->kind == DS__F_VIRT || f->kind == DS__F_VDIR) {
		/* an open list holds its content: its size without computing the
		 * share again (Python's read() asks fstat for it) */
		int own = f->kind == DS__F_VIRT && f->own;
		ds__virt_stat(&f->v, st, !own);
		if (own)
			st->st_size = f->size, st->st_blocks = ds_stat_blocks(S_IFREG, f->size);
	} else {
		ds_index_stat(&ds__g.ix, (uint32_t)f->id, st);
	}
	return 0;
}

int ds__perm(const struct stat *st, int mask)
{
	mode_t m = st->st_mode;
	int want = (mask & R_OK ? 4 : 0) | (mask & W_OK ? 2 : 0) | (mask & X_OK ? 1 : 0);
	/* owner, group and others all have it (0644 and R_OK, the common
	 * open): granted whoever asks, root included; no geteuid, so a
	 * setuid/seteuid change needs no tracking */
	if (((int)((m >> 6) & (m >> 3) & m) & want) == want)
		return 0;
	uid_t uid = geteuid();
	if (uid == 0) {
		/* root reads anything; executes what anybody may execute */
		if ((mask & X_OK) && !S_ISDIR(m) && !(m & (S_IXUSR | S_IXGRP | S_IXOTH)))
			return -EACCES;
		return 0;
	}
	int shift = uid == st->st_uid ? 6 : (getegid() == st->st_gid || group_member(st->st_gid)) ? 3 : 0;
	int have = (m >> shift) & 7;
	return (have & want) == want ? 0 : -EACCES;
}

/* ---- the stat family ------------------------------------------------------ */
static int at_ours(int dirfd, const char *path, int flags)
{
	ds__ensure_init();
	if (!path)
		return 0;
	if (!path[0] && (flags & AT_EMPTY_PATH))
		return ds__fd_is_ours(dirfd);
	if (path[0] != '/' && dirfd != AT_FDCWD)
		return ds__at_maybe_ours(dirfd, path);
	return ds__maybe_ours(path);
}

/* A relative path resolved outside the mount must reach libc rewritten: the
 * real cwd is not the emulated one.  stat_at returns 1 with r.rpath set only
 * when the original (dirfd, path) is right for libc, so re-resolve here. */
#define STAT_PATH(path, st, flags, real_fn)                                             \
	do {                                                                            \
		if (DS__LIKELY(!ds__maybe_ours(path)))                                  \
			return real_fn(path, st);                                       \
		struct ds__res r_;                                                      \
		int rc_ = ds__resolve(AT_FDCWD, path, (flags) ? 0 : DS__RES_FOLLOW, &r_); \
		if (rc_)                                                                \
			return ds__fail(-rc_);                                          \
		if (!r_.ours)                                                           \
			return real_fn(r_.rpath, st);                                   \
		ds__stat_res(&r_, (struct stat *)(st));                                 \
		return 0;                                                               \
	} while (0)

DS__EXPORT int DS__WRAP(stat)(const char *path, struct stat *st) { STAT_PATH(path, st, 0, DS__REAL(stat)); }
DS__EXPORT int DS__WRAP(stat64)(const char *path, struct stat64 *st) { STAT_PATH(path, st, 0, DS__REAL(stat64)); }
DS__EXPORT int DS__WRAP(lstat)(const char *path, struct stat *st) { STAT_PATH(path, st, 1, DS__REAL(lstat)); }
DS__EXPORT int DS__WRAP(lstat64)(const char *path, struct stat64 *st) { STAT_PATH(path, st, 1, DS__REAL(lstat64)); }

static int fstat_any(int fd, struct stat *st, int is64)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return is64 ? DS__REAL(fstat64)(fd, (struct stat64 *)st) : DS__REAL(fstat)(fd, st);
	ds__stat_file(f, st);
	ds__file_put(f);
	return 0;
}

DS__EXPORT int DS__WRAP(fstat)(int fd, struct stat *st) { return fstat_any(fd, st, 0); }
DS__EXPORT int DS__WRAP(fstat64)(int fd, struct stat64 *st) { return fstat_any(fd, (struct stat *)st, 1); }

static int fstatat_any(int dirfd, const char *path, struct stat *st, int flags, int is64)
{
	if (DS__LIKELY(!at_ours(dirfd, path, flags)))
		goto real;
	struct ds__res r;
	if (!*path && (flags & AT_EMPTY_PATH))
		return fstat_any(dirfd, st, is64);
	int rc = ds__resolve(dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) ? 0 : DS__RES_FOLLOW, &r);
	if (rc)
		return ds__fail(-rc);
	if (!r.ours) {
		dirfd = r.rdirfd;
		path = r.rpath;
		goto real;
	}
	ds__stat_res(&r, st);
	return 0;
real:
	return is64 ? DS__REAL(fstatat64)(dirfd, path, (struct stat64 *)st, flags)
	            : DS__REAL(fstatat)(dirfd, path, st, flags);
}

DS__EXPORT int DS__WRAP(fstatat)(int dirfd, const char *path, struct stat *st, int flags)
{
	return fstatat_any(dirfd, path, st, flags, 0);
}

DS__EXPORT int DS__WRAP(fstatat64)(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return fstatat_any(dirfd, path, (struct stat *)st, flags, 1);
}

/* The pre-2.33 ABI: binaries built against an older glibc call these.  On
 * 64-bit Linux the version argument is always the one layout, struct stat. */
DS__EXPORT int DS__WRAP(__xstat)(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return DS__WRAP(stat)(path, st);
}
DS__EXPORT int DS__WRAP(__xstat64)(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return DS__WRAP(stat64)(path, st);
}
DS__EXPORT int DS__WRAP(__lxstat)(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return DS__WRAP(lstat)(path, st);
}
DS__EXPORT int DS__WRAP(__lxstat64)(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return DS__WRAP(lstat64)(path, st);
}
DS__EXPORT int DS__WRAP(__fxstat)(int ver, int fd, struct stat *st)
{
	(void)ver;
	return fstat_any(fd, st, 0);
}
DS__EXPORT int DS__WRAP(__fxstat64)(int ver, int fd, struct stat64 *st)
{
	(void)ver;
	return fstat_any(fd, (struct stat *)st, 1);
}
DS__EXPORT int DS__WRAP(__fxstatat)(int ver, int dirfd, const char *path, struct stat *st,
                                    int flags)
{
	(void)ver;
	return fstatat_any(dirfd, path, st, flags, 0);
}
DS__EXPORT int DS__WRAP(__fxstatat64)(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	(void)ver;
	return fstatat_any(dirfd, path, (struct stat *)st, flags, 1);
}

static void to_statx(const struct stat *st, struct statx *sx)
{
	memset(sx, 0, sizeof(*sx));
	sx->stx_mask = STATX_BASIC_STATS;
	sx->stx_blksize = st->st_blksize;
	sx->stx_nlink = st->st_nlink;
	sx->stx_uid = st->st_uid;
	sx->stx_gid = st->st_gid;
	sx->stx_mode = st->st_mode;
	sx->stx_ino = st->st_ino;
	sx->stx_size = st->st_size;
	sx->stx_blocks = st->st_blocks;
	sx->stx_atime.tv_sec = st->st_atim.tv_sec;
	sx->stx_atime.tv_nsec = st->st_atim.tv_nsec;
	sx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
	sx->stx_mtime.tv_nsec = st->st_mtim.tv_nsec;
	sx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
	sx->stx_ctime.tv_nsec = st->st_ctim.tv_nsec;
	sx->stx_dev_major = major(st->st_dev);
	sx->stx_dev_minor = minor(st->st_dev);
}

DS__EXPORT int DS__WRAP(statx)(int dirfd, const char *path, int flags, unsigned mask, struct statx *sx)
{
	if (DS__LIKELY(!at_ours(dirfd, path, flags)))
		return DS__REAL(statx)(dirfd, path, flags, mask, sx);
	if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE))
		return ds__fail(EINVAL);
	if (mask & STATX__RESERVED)
		return ds__fail(EINVAL);
	struct stat st;
	struct ds__res r;
	if (!*path && (flags & AT_EMPTY_PATH)) {
		struct ds__file *f = ds__fd_get(dirfd);
		if (!f)
			return DS__REAL(statx)(dirfd, path, flags, mask, sx);
		ds__stat_file(f, &st);
		ds__file_put(f);
	} else {
		int rc = ds__resolve(dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) ? 0 : DS__RES_FOLLOW, &r);
		if (rc)
			return ds__fail(-rc);
		if (!r.ours)
			return DS__REAL(statx)(r.rdirfd, r.rpath, flags, mask, sx);
		ds__stat_res(&r, &st);
	}
	if (ds__null(sx))
		return ds__fail(EFAULT);
	to_statx(&st, sx);
	return 0;
}

/* ---- statfs, statvfs ------------------------------------------------------- */
static void fill_statfs(struct statfs *s)
{
	const struct ds_index_header *h = ds__g.ix.h;
	memset(s, 0, sizeof(*s));
	s->f_type = FS_MAGIC;
	s->f_bsize = 4096;
	s->f_frsize = 4096;
	s->f_blocks = (h->store_size + 4095) / 4096;
	s->f_files = h->nentries;
	s->f_namelen = NAME_MAX;
	s->f_fsid.__val[0] = (int)(h->dev & 0xffffffff);
	s->f_fsid.__val[1] = (int)(h->dev >> 32);
	s->f_flags = ST_RDONLY | ST_NOSUID | ST_NODEV;
}

static void fill_statvfs(struct statvfs *s)
{
	struct statfs f;
	fill_statfs(&f);
	memset(s, 0, sizeof(*s));
	s->f_bsize = f.f_bsize;
	s->f_frsize = f.f_frsize;
	s->f_blocks = f.f_blocks;
	s->f_files = f.f_files;
	s->f_fsid = (unsigned long)ds__g.ix.h->dev;
	s->f_flag = ST_RDONLY | ST_NOSUID | ST_NODEV;
	s->f_namemax = NAME_MAX;
}

/* Path forms: ours -> filled; else libc with the (maybe rewritten) path. */
#define FS_PATH(path, buf, real_fn, fill)                                               \
	do {                                                                            \
		if (DS__LIKELY(!ds__maybe_ours(path)))                                  \
			return real_fn(path, buf);                                      \
		struct ds__res r_;                                                      \
		int rc_ = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r_);             \
		if (rc_)                                                                \
			return ds__fail(-rc_);                                          \
		if (!r_.ours)                                                           \
			return real_fn(r_.rpath, buf);                                  \
		fill((void *)(buf));                                                    \
		return 0;                                                               \
	} while (0)

#define FS_FD(fd, buf, real_fn, fill)                                                   \
	do {                                                                            \
		ds__ensure_init();                                                      \
		if (DS__LIKELY(!ds__fd_is_ours(fd)))                                    \
			return real_fn(fd, buf);                                        \
		fill((void *)(buf));                                                    \
		return 0;                                                               \
	} while (0)

DS__EXPORT int DS__WRAP(statfs)(const char *path, struct statfs *b) { FS_PATH(path, b, DS__REAL(statfs), fill_statfs); }
DS__EXPORT int DS__WRAP(statfs64)(const char *path, struct statfs64 *b) { FS_PATH(path, b, DS__REAL(statfs64), fill_statfs); }
DS__EXPORT int DS__WRAP(fstatfs)(int fd, struct statfs *b) { FS_FD(fd, b, DS__REAL(fstatfs), fill_statfs); }
DS__EXPORT int DS__WRAP(fstatfs64)(int fd, struct statfs64 *b) { FS_FD(fd, b, DS__REAL(fstatfs64), fill_statfs); }
DS__EXPORT int DS__WRAP(statvfs)(const char *path, struct statvfs *b) { FS_PATH(path, b, DS__REAL(statvfs), fill_statvfs); }
DS__EXPORT int DS__WRAP(statvfs64)(const char *path, struct statvfs64 *b) { FS_PATH(path, b, DS__REAL(statvfs64), fill_statvfs); }
DS__EXPORT int DS__WRAP(fstatvfs)(int fd, struct statvfs *b) { FS_FD(fd, b, DS__REAL(fstatvfs), fill_statvfs); }
DS__EXPORT int DS__WRAP(fstatvfs64)(int fd, struct statvfs64 *b) { FS_FD(fd, b, DS__REAL(fstatvfs64), fill_statvfs); }

/* ---- access --------------------------------------------------------------- */
static int access_at(int dirfd, const char *path, int mode, int flags,
                     int (*real)(int, const char *, int, int))
{
	if (DS__LIKELY(!at_ours(dirfd, path, flags)))
		return real(dirfd, path, mode, flags);
	if (mode & ~(F_OK | R_OK | W_OK | X_OK))
		return ds__fail(EINVAL);
	struct ds__res r;
	struct stat st;
	int rc = ds__resolve(dirfd, path, (flags & AT_SYMLINK_NOFOLLOW) ? 0 : DS__RES_FOLLOW, &r);
	if (rc)
		return ds__fail(-rc);
	if (!r.ours)
		return real(r.rdirfd, r.rpath, mode, flags);
	ds__stat_res(&r, &st);
	if (mode & W_OK)
		return ds__fail(EROFS);
	rc = ds__perm(&st, mode);
	return rc ? ds__fail(-rc) : 0;
}

static int real_faccessat(int dirfd, const char *path, int mode, int flags)
{
	return DS__REAL(faccessat)(dirfd, path, mode, flags);
}

DS__EXPORT int DS__WRAP(access)(const char *path, int mode)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return DS__REAL(access)(path, mode);
	return access_at(AT_FDCWD, path, mode, 0, real_faccessat);
}

DS__EXPORT int DS__WRAP(faccessat)(int dirfd, const char *path, int mode, int flags)
{
	return access_at(dirfd, path, mode, flags, real_faccessat);
}

/* The shim's ids are the process's effective ones: no distinction to make. */
DS__EXPORT int DS__WRAP(euidaccess)(const char *path, int mode)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return DS__REAL(euidaccess)(path, mode);
	return access_at(AT_FDCWD, path, mode, AT_EACCESS, real_faccessat);
}

DS__EXPORT int DS__WRAP(eaccess)(const char *path, int mode)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return DS__REAL(eaccess)(path, mode);
	return access_at(AT_FDCWD, path, mode, AT_EACCESS, real_faccessat);
}

/* ---- readlink -------------------------------------------------------------- */
static ssize_t link_text(const struct ds__res *r, char *buf, size_t n)
{
	if (r->v.kind != DS__V_NONE || !S_ISLNK(ds_ix_mode(&ds__g.ix, (uint32_t)r->id)))
		return -EINVAL;
	if (n == 0)
		return -EINVAL;
	uint64_t tl = ds_ix_size(&ds__g.ix, (uint32_t)r->id);
	size_t k = tl < n ? tl : n;
	memcpy(buf, ds_ix_target(&ds__g.ix, (uint32_t)r->id), k);
	return (ssize_t)k;
}

/* /proc/self/fd/N of a staged descriptor would show the reserved "/": give
 * the staged name, as the kernel would for a real file. */
static ssize_t proc_fd_link(const char *path, char *buf, size_t n)
{
	struct ds__file *f = ds__fd_get(ds__procfd(path)); /* procfd.c */
	if (!f)
		return 1;
	char abs[PATH_MAX];
	int len = ds__abs_name(f->id, &f->v, abs, sizeof(abs));
	ds__file_put(f);
	if (len < 0)
		return len;
	size_t k = (size_t)len < n ? (size_t)len : n;
	memcpy(buf, abs, k);
	return (ssize_t)k;
}

/* May path be /proc/.../fd/N or /dev/fd/N of a staged descriptor?  None
 * exists before the store is mapped (the table is made then). */
static int procfd_maybe(const char *path)
{
	return ds__fdtab && path && path[0] == '/' && (path[1] == 'p' || path[1] == 'd');
}

static ssize_t readlink_at(int dirfd, const char *path, char *buf, size_t n)
{
	ssize_t k;
	if (procfd_maybe(path) && (k = proc_fd_link(path, buf, n)) != 1)
		return k < 0 ? ds__fail((int)-k) : k;
	if (DS__LIKELY(!at_ours(dirfd, path, 0)))
		return DS__REAL(readlinkat)(dirfd, path, buf, n);
	struct ds__res r;
	int rc = ds__resolve(dirfd, path, 0, &r);
	if (rc)
		return ds__fail(-rc);
	if (!r.ours)
		return DS__REAL(readlinkat)(r.rdirfd, r.rpath, buf, n);
	k = link_text(&r, buf, n);
	return k < 0 ? ds__fail((int)-k) : k;
}

DS__EXPORT ssize_t DS__WRAP(readlink)(const char *path, char *buf, size_t n)
{
	/* ds__maybe_ours first, whatever else this asks: it is what maps the
	 * store at the first name under the mount (a readlink can be a
	 * process's first call there: readlink -f, realpath) */
	if (DS__LIKELY(!ds__maybe_ours(path) && !procfd_maybe(path)))
		return DS__REAL(readlink)(path, buf, n);
	return readlink_at(AT_FDCWD, path, buf, n);
}

DS__EXPORT ssize_t DS__WRAP(readlinkat)(int dirfd, const char *path, char *buf, size_t n)
{
	return readlink_at(dirfd, path, buf, n);
}

DS__EXPORT ssize_t DS__WRAP(__readlink_chk)(const char *path, char *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		return DS__REAL(__readlink_chk)(path, buf, n, buflen);
	return DS__WRAP(readlink)(path, buf, n);
}

DS__EXPORT ssize_t DS__WRAP(__readlinkat_chk)(int dirfd, const char *path, char *buf, size_t n,
                                              size_t buflen)
{
	if (n > buflen)
		return DS__REAL(__readlinkat_chk)(dirfd, path, buf, n, buflen);
	return readlink_at(dirfd, path, buf, n);
}

/* ---- pathconf: the limits of the store's own file system ------------------- */
/* glibc's pathconf and fpathconf ask statfs by internal calls no preload
 * sees (a staged name was ENOENT).  A staged entry answers as a copy of it
 * on the node store's file system would: the same question of the node
 * directory.  errno as libc leaves it (-1 with errno untouched: no limit). */
static long store_conf(int name, int reg)
{
	/* glibc: asynchronous I/O on regular files (and block devices) only */
	if (name == _PC_ASYNC_IO)
		return reg ? 1 : -1;
	return DS__REAL(pathconf)(ds__g.nodedir, name);
}

DS__EXPORT long DS__WRAP(pathconf)(const char *path, int name)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return DS__REAL(pathconf)(path, name);
	struct ds__res r;
	int rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r);
	if (rc) {
		/* as libc: a limit it knows without looking at the file comes
		 * back all the same; one it must look for fails with rc's errno */
		int saved = errno;
		errno = 0;
		long v = DS__REAL(pathconf)("/proc/self/fd/-1", name); /* ENOENT */
		if (v == -1 && errno == ENOENT)
			return ds__fail(-rc);
		if (errno == 0)
			errno = saved;
		return v;
	}
	if (!r.ours)
		return DS__REAL(pathconf)(r.rpath, name);
	struct stat st;
	ds__stat_res(&r, &st);
	return store_conf(name, S_ISREG(st.st_mode));
}

DS__EXPORT long DS__WRAP(fpathconf)(int fd, int name)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return DS__REAL(fpathconf)(fd, name);
	struct stat st;
	ds__stat_file(f, &st);
	ds__file_put(f);
	return store_conf(name, S_ISREG(st.st_mode));
}

/* ---- extended attributes: a staged entry has none --------------------------- */
#define XATTR_PATH(path, follow, list, real_call_orig, real_call_rewritten)             \
	do {                                                                            \
		if (DS__LIKELY(!ds__maybe_ours(path)))                                  \
			return real_call_orig;                                          \
		struct ds__res r_;                                                      \
		int rc_ = ds__resolve(AT_FDCWD, path, (follow) ? DS__RES_FOLLOW : 0, &r_); \
		if (rc_)                                                                \
			return ds__fail(-rc_);                                          \
		if (!r_.ours) {                                                         \
			const char *p_ = r_.rpath;                                      \
			(void)p_;                                                       \
			return real_call_rewritten;                                     \
		}                                                                       \
		return (list) ? 0 : ds__fail(ENODATA);                                  \
	} while (0)

DS__EXPORT ssize_t DS__WRAP(getxattr)(const char *path, const char *name, void *v, size_t n)
{
	XATTR_PATH(path, 1, 0, DS__REAL(getxattr)(path, name, v, n), DS__REAL(getxattr)(p_, name, v, n));
}

DS__EXPORT ssize_t DS__WRAP(lgetxattr)(const char *path, const char *name, void *v, size_t n)
{
	XATTR_PATH(path, 0, 0, DS__REAL(lgetxattr)(path, name, v, n), DS__REAL(lgetxattr)(p_, name, v, n));
}

DS__EXPORT ssize_t DS__WRAP(listxattr)(const char *path, char *l, size_t n)
{
	XATTR_PATH(path, 1, 1, DS__REAL(listxattr)(path, l, n), DS__REAL(listxattr)(p_, l, n));
}

DS__EXPORT ssize_t DS__WRAP(llistxattr)(const char *path, char *l, size_t n)
{
	XATTR_PATH(path, 0, 1, DS__REAL(llistxattr)(path, l, n), DS__REAL(llistxattr)(p_, l, n));
}

DS__EXPORT ssize_t DS__WRAP(fgetxattr)(int fd, const char *name, void *v, size_t n)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fd_is_ours(fd)))
		return DS__REAL(fgetxattr)(fd, name, v, n);
	return ds__fail(ENODATA);
}

DS__EXPORT ssize_t DS__WRAP(flistxattr)(int fd, char *l, size_t n)
{
	(void)l;
	(void)n;
	ds__ensure_init();
	if (DS__LIKELY(!ds__fd_is_ours(fd)))
		return DS__REAL(flistxattr)(fd, l, n);
	return 0;
}
