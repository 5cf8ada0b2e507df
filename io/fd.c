/* SPDX-License-Identifier: BSD-3-Clause */
/* fd.c: opening staged files and everything done with their descriptors.
 *
 * The open path is: prefix check, one hash lookup in the mapped index, one
 * fcntl to reserve the descriptor (and the fstat that checks it, fdtab.c).
 * A file held in this node's store is read with memcpy straight out of the
 * mapped store, or with pread from the store's descriptor for reads of
 * 64 KiB and more (sread.c: no page faults); a zlib file is inflated once
 * per open file (FanStore) at its first read and freed at its last close; a
 * file held by another node comes from the epoch cache or the node service
 * (remote.c) at its first read, or chunk by chunk when it is large.
 *
 * Reads at the file offset are atomic with respect to each other like the
 * kernel's: the offset advances with a compare-and-swap, and a read that
 * lost the race copies again (the bytes never change). */
#include "shim.h"

#include <fcntl.h>
#include <stdarg.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The kernel's O_LARGEFILE, which F_GETFL reports on 64-bit (the userspace
 * constant is 0 there). */
#if defined(__aarch64__)
#define K_LARGEFILE 0400000
#else
#define K_LARGEFILE 0100000
#endif
/* Remote files up to this size are fetched whole at the first read. */
#define REMOTE_WHOLE (16u << 20)


/* ---- open ----------------------------------------------------------------- */
int ds__open_res(struct ds__res *r, int flags, mode_t mode)
{
	(void)mode;
	/* a vfork child shares the table with its parent: it cannot hold a
	 * staged descriptor of its own (loud, and rare: children exec) */
	if (!ds__owner())
		return -ENOTSUP;
	struct ds__file *f;
	int rc = ds__file_make(r, flags, &f);
	if (rc)
		return rc;
	int fd = ds__fd_install(f, 0, (flags & O_CLOEXEC) != 0);
	if (fd < 0)
		ds__file_put(f);
	return fd;
}

int ds__file_make(struct ds__res *r, int flags, struct ds__file **out)
{
	int acc = flags & O_ACCMODE;
	struct stat st;
	/* a list's size is its content, computed below once: not here too */
	if (r->v.kind != DS__V_NONE)
		ds__virt_stat(&r->v, &st, 0);
	else
		ds__stat_res(r, &st);
	int isdir = S_ISDIR(st.st_mode);

	if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
		return -EEXIST;
	if (flags & O_PATH) {
		/* O_PATH ignores everything but O_DIRECTORY, O_NOFOLLOW, O_CLOEXEC */
		if ((flags & O_DIRECTORY) && !isdir)
			return -ENOTDIR;
	} else {
		if (S_ISLNK(st.st_mode))
			return -ELOOP; /* O_NOFOLLOW on a symlink */
		if ((flags & O_TMPFILE) == O_TMPFILE)
			return isdir ? -EROFS : -ENOTDIR;
		if (isdir) {
			if (acc != O_RDONLY || (flags & (O_CREAT | O_TRUNC)))
				return -EISDIR;
		} else {
			if (flags & O_DIRECTORY)
				return -ENOTDIR;
			if (acc != O_RDONLY || (flags & O_TRUNC))
				return -EROFS;
		}
		if (ds__perm(&st, acc == 3 ? R_OK | W_OK : R_OK))
			return -EACCES;
	}

	struct ds__file *f = ds__file_new();
	if (!f)
		return -ENOMEM;
	f->id = r->id;
	f->v = r->v;
	f->size = st.st_size;
	/* what F_GETFL reports: the open flags less those that only act at
	 * open time, as the kernel keeps them */
	int fl = (flags & ~(O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_CLOEXEC)) | K_LARGEFILE;
	if (flags & O_PATH)
		fl = flags & (O_PATH | O_DIRECTORY | O_NOFOLLOW);
	atomic_store(&f->flags, fl);

	if (r->v.kind != DS__V_NONE) {
		f->kind = isdir ? DS__F_VDIR : DS__F_VIRT;
		if (!isdir && !(flags & O_PATH)) {
			char *data;
			size_t len;
			int rc = ds__virt_content(&r->v, &data, &len);
			if (rc) {
				ds__file_put(f);
				return rc;
			}
			f->own = data;
			f->size = len;
			atomic_store(&f->data, data);
			ds__remote_epoch(r->v.epoch);
		}
	} else if (isdir) {
		f->kind = DS__F_DIR;
	} else if (S_ISLNK(st.st_mode)) {
		f->kind = DS__F_LNK;
	} else {
		struct ds_ix_file fe, *e = &fe;
		uint64_t base;
		ds_ix_file(&ds__g.ix, (uint32_t)r->id, e);
		f->kind = DS__F_REG;
		if (!(flags & O_PATH))
			DS__COUNT(opens, 1);
		if (e->size == 0) {
			atomic_store(&f->data, "");
		} else if (ds__g.store && ds_index_part_on(&ds__g.ix, e->part, ds__g.node, &base) &&
		           base <= ds__g.store_len && e->poff <= ds__g.store_len - base &&
		           e->stored <= ds__g.store_len - base - e->poff) {
			/* (no sum that can wrap: base comes from the index) */
			if (!(flags & O_PATH))
				DS__COUNT(local_reads, 1);
			if (e->codec == DS_CODEC_NONE)
				atomic_store(&f->data, ds__g.store + base + e->poff);
		} else {
			f->remote = 1;
		}
		if (!(flags & O_PATH))
			ds__offcell_attach(f);
	}
	*out = f;
	return 0;
}

static int open_at(int dirfd, const char *path, int flags, mode_t mode)
{
	struct ds__res r;
	int rf = DS__RES_PARENT;
	/* O_CREAT|O_EXCL never follows a final symlink */
	if (!(flags & O_NOFOLLOW) && (flags & (O_CREAT | O_EXCL)) != (O_CREAT | O_EXCL))
		rf |= DS__RES_FOLLOW;
	int rc = ds__resolve(dirfd, path, rf, &r);
	if (rc == 0 && r.out)
		return ds__out_open(&r, flags, mode); /* write.c */
	if (rc == 0 && !r.ours)
		return ds__fd_fresh(DS__REAL(openat)(r.rdirfd, r.rpath, flags, mode));
	if (rc == -ENOENT && r.ours && (flags & O_CREAT))
		return ds__fail(EROFS); /* would create a file in a directory of ours */
	if (rc)
		return ds__fail(-rc);
	rc = ds__open_res(&r, flags, mode);
	return rc < 0 ? ds__fail(-rc) : rc;
}

static mode_t mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

DS__EXPORT int DS__WRAP(open)(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(open)(path, flags, mode));
	return open_at(AT_FDCWD, path, flags, mode);
}

DS__EXPORT int DS__WRAP(open64)(const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(open64)(path, flags, mode));
	return open_at(AT_FDCWD, path, flags, mode);
}

/* *at() calls are ours for a path of ours, or a relative path from a staged
 * directory descriptor. */
static int at_ours(int dirfd, const char *path)
{
	ds__ensure_init();
	if (!path)
		return 0;
	if (path[0] != '/' && dirfd != AT_FDCWD)
		return ds__at_maybe_ours(dirfd, path);
	return ds__maybe_ours(path);
}

DS__EXPORT int DS__WRAP(openat)(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	if (DS__LIKELY(!at_ours(dirfd, path)))
		return ds__fd_fresh(DS__REAL(openat)(dirfd, path, flags, mode));
	return open_at(dirfd, path, flags, mode);
}

DS__EXPORT int DS__WRAP(openat64)(int dirfd, const char *path, int flags, ...)
{
	va_list ap;
	va_start(ap, flags);
	mode_t mode = mode_arg(flags, ap);
	va_end(ap);
	if (DS__LIKELY(!at_ours(dirfd, path)))
		return ds__fd_fresh(DS__REAL(openat64)(dirfd, path, flags, mode));
	return open_at(dirfd, path, flags, mode);
}

/* The fortified opens (-D_FORTIFY_SOURCE) call these when the flags are not
 * a compile-time constant. */
DS__EXPORT int DS__WRAP(__open_2)(const char *path, int flags)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(__open_2)(path, flags));
	return open_at(AT_FDCWD, path, flags, 0);
}

DS__EXPORT int DS__WRAP(__open64_2)(const char *path, int flags)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(__open64_2)(path, flags));
	return open_at(AT_FDCWD, path, flags, 0);
}

DS__EXPORT int DS__WRAP(__openat_2)(int dirfd, const char *path, int flags)
{
	if (DS__LIKELY(!at_ours(dirfd, path)))
		return ds__fd_fresh(DS__REAL(__openat_2)(dirfd, path, flags));
	return open_at(dirfd, path, flags, 0);
}

DS__EXPORT int DS__WRAP(__openat64_2)(int dirfd, const char *path, int flags)
{
	if (DS__LIKELY(!at_ours(dirfd, path)))
		return ds__fd_fresh(DS__REAL(__openat64_2)(dirfd, path, flags));
	return open_at(dirfd, path, flags, 0);
}

DS__EXPORT int DS__WRAP(creat)(const char *path, mode_t mode)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(creat)(path, mode));
	return open_at(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

DS__EXPORT int DS__WRAP(creat64)(const char *path, mode_t mode)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return ds__fd_fresh(DS__REAL(creat64)(path, mode));
	return open_at(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode);
}

/* ---- close ---------------------------------------------------------------- */
/* The program's close of fd, which the table knows (staged or private). */
int ds__close(int fd)
{
	if (ds__fd_is_private(fd)) {
		/* the shim's own descriptor: for the program the number is free,
		 * unless the kernel gave it to the program after a raw close */
		if (ds__fd_private_check(fd))
			return ds__fail(EBADF);
		return DS__REAL(close)(fd);
	}
	if (!ds__owner()) /* a vfork child: the kernel's part only */
		return DS__REAL(close)(fd) < 0 && errno != EBADF ? -1 : 0;
	struct ds__file *f = ds__fd_unbind(fd);
	int rc = DS__REAL(close)(fd);
	if (!f)
		return rc;
	ds__file_put(f);
	return 0; /* the descriptor was ours: closing it cannot fail */
}

DS__EXPORT int DS__WRAP(close)(int fd)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fd_known(fd))) {
		if (DS__UNLIKELY(atomic_load_explicit(&ds__out_nw, memory_order_relaxed)))
			return ds__out_close(fd); /* maybe a writer's (write.c) */
		return DS__REAL(close)(fd);
	}
	return ds__close(fd);
}

static void forget_range(unsigned first, unsigned last)
{
	unsigned h = atomic_load(&ds__fd_hwm);
	if (last >= h)
		last = h ? h - 1 : 0;
	for (unsigned fd = first; fd <= last && fd < h; fd++) {
		struct ds__file *f = ds__fd_unbind((int)fd);
		if (f)
			ds__file_put(f);
	}
}

static int real_close_range(unsigned first, unsigned last, int flags)
{
	if (DS__HAVE(close_range))
		return DS__REAL(close_range)(first, last, flags);
	return (int)syscall(SYS_close_range, first, last, flags);
}

/* close_range/closefrom of the program: close around the shim's private
 * numbers (the program cannot see them), forget the staged ones.  In a
 * vfork child only the kernel's part, in the child's own descriptor table:
 * the table belongs to the parent. */
static int close_range_any(unsigned first, unsigned last, int flags)
{
	if (!ds__fdtab || !ds__owner())
		return real_close_range(first, last, flags);
	int keep[64];
	int n = (flags & CLOSE_RANGE_CLOEXEC) ? 0 : ds__fd_private_list(first, last, keep, 64);
	unsigned from = first;
	int rc = 0;
	for (int i = 0; i < n && rc == 0; i++) {
		if (!ds__fd_private_check(keep[i]))
			continue; /* not ours any more: the program's to close */
		if ((unsigned)keep[i] > from)
			rc = real_close_range(from, (unsigned)keep[i] - 1, flags);
		from = (unsigned)keep[i] + 1;
	}
	if (rc == 0 && from <= last)
		rc = real_close_range(from, last, flags);
	if (rc == 0) {
		if (flags & CLOSE_RANGE_CLOEXEC) {
			unsigned h = atomic_load(&ds__fd_hwm);
			for (unsigned fd = first; fd <= last && fd < h; fd++)
				if (ds__fd_is_ours((int)fd))
					ds__fd_set_cloexec((int)fd, 1);
		} else {
			forget_range(first, last);
		}
	}
	return rc;
}

DS__EXPORT int DS__WRAP(close_range)(unsigned first, unsigned last, int flags)
{
	ds__ensure_init();
	if (first > last)
		return ds__fail(EINVAL);
	return close_range_any(first, last, flags);
}

DS__EXPORT void DS__WRAP(closefrom)(int lowfd)
{
	ds__ensure_init();
	if (lowfd < 0)
		lowfd = 0;
	int saved = errno;
	if (close_range_any((unsigned)lowfd, ~0u, 0) < 0) {
		/* no close_range in this kernel: one by one, around ours */
		long max = sysconf(_SC_OPEN_MAX);
		for (long fd = lowfd; fd < max && fd < (1L << 20); fd++)
			if (!ds__fd_is_private((int)fd) || !ds__fd_private_check((int)fd))
				DS__WRAP(close)((int)fd);
	}
	errno = saved;
}

/* ---- read ----------------------------------------------------------------- */
/* Bytes of a large remote file straight from the service (no whole copy). */
static ssize_t remote_range(struct ds__file *f, void *buf, size_t n, uint64_t off)
{
	int rc = ds__remote_read((uint32_t)f->id, off, buf, n);
	return rc ? rc : (ssize_t)n;
}

static const char *file_data(struct ds__file *f, int *rc)
{
	const char *d = atomic_load_explicit(&f->data, memory_order_acquire);
	*rc = 0;
	if (DS__LIKELY(d != NULL))
		return d;
	if (f->remote && f->size > REMOTE_WHOLE &&
	    ds_ix_codec(&ds__g.ix, (uint32_t)f->id) == DS_CODEC_NONE)
		return NULL; /* read range by range */
	*rc = ds__materialize(f);
	return *rc ? NULL : atomic_load_explicit(&f->data, memory_order_acquire);
}

static int readable(const struct ds__file *f)
{
	int fl = atomic_load_explicit(&f->flags, memory_order_relaxed);
	if (fl & O_PATH)
		return -EBADF;
	if (f->kind == DS__F_DIR || f->kind == DS__F_VDIR)
		return -EISDIR;
	if (f->kind != DS__F_REG && f->kind != DS__F_VIRT)
		return -EBADF;
	return 0;
}

/* k bytes at offset off of f's bytes d into buf: bytes copied (fewer only
 * when the caller's buffer ends early: EFAULT after some) or -errno.  Large
 * reads of this node's store, and the small ones of a file read in shuffled
 * order, take pread (sread.c). */
static ssize_t copy_data(struct ds__file *f, const char *d, void *buf, size_t k, uint64_t off)
{
	uintptr_t so = (uintptr_t)d - (uintptr_t)ds__g.store;
	if (so < ds__g.store_len && !f->remote) {
		int small = atomic_load_explicit(&f->sread, memory_order_relaxed);
		if (off == 0 && ds__owner()) { /* a vfork child changes nothing */
			small = ds__store_small(so, f->size);
			atomic_store_explicit(&f->sread, small, memory_order_relaxed);
		}
		ds__store_note(so + off + k);
		if (k >= DS__STORE_READ_MIN || small) {
			ssize_t got = ds__store_read(buf, k, so + off, small);
			if (got)
				return got;
		}
	}
	memcpy(buf, d + off, k);
	return (ssize_t)k;
}

ssize_t ds__file_read(struct ds__file *f, void *buf, size_t n, int64_t off)
{
	int rc = readable(f);
	if (rc)
		return rc;
	if (n == 0)
		return 0;
	if (!buf)
		return -EFAULT;
	if (n > SSIZE_MAX)
		n = SSIZE_MAX;
	const char *d = file_data(f, &rc);
	if (rc)
		return rc;
	uint64_t size = f->size;
	if (off >= 0) { /* pread: the offset is the caller's */
		if ((uint64_t)off >= size)
			return 0;
		size_t k = size - off < n ? size - off : n;
		if (d) {
			ssize_t got = copy_data(f, d, buf, k, (uint64_t)off);
			if (got < 0)
				return got;
			k = (size_t)got;
		} else {
			ssize_t got = remote_range(f, buf, k, off);
			if (got < 0)
				return got;
		}
		if (!f->remote)
			DS__COUNT(local_bytes, k);
		return k;
	}
	int64_t cur = atomic_load_explicit(f->offp, memory_order_relaxed);
	for (;;) {
		if ((uint64_t)cur >= size)
			return 0;
		size_t k = size - cur < n ? size - cur : n;
		if (d) {
			ssize_t got = copy_data(f, d, buf, k, (uint64_t)cur);
			if (got < 0)
				return got;
			k = (size_t)got;
		} else {
			ssize_t got = remote_range(f, buf, k, cur);
			if (got < 0)
				return got;
		}
		if (atomic_compare_exchange_strong_explicit(f->offp, &cur, cur + (int64_t)k,
		                                            memory_order_relaxed,
		                                            memory_order_relaxed)) {
			if (!f->remote)
				DS__COUNT(local_bytes, k);
			return k;
		}
		/* another reader of this file moved the offset: copy again */
	}
}

static ssize_t file_readv(struct ds__file *f, const struct iovec *iov, int cnt, int64_t off)
{
	if (cnt < 0 || cnt > IOV_MAX)
		return -EINVAL;
	size_t total = 0;
	for (int i = 0; i < cnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - total)
			return -EINVAL;
		total += iov[i].iov_len;
	}
	int rc = readable(f);
	if (rc)
		return rc;
	const char *d = file_data(f, &rc);
	if (rc)
		return rc;
	int64_t cur = off >= 0 ? off : atomic_load(f->offp);
	for (;;) {
		if ((uint64_t)cur >= f->size)
			return 0;
		size_t want = f->size - cur < total ? f->size - cur : total, done = 0;
		for (int i = 0; i < cnt && done < want; i++) {
			size_t k = iov[i].iov_len < want - done ? iov[i].iov_len : want - done;
			if (d) {
				ssize_t got = copy_data(f, d, iov[i].iov_base, k, (uint64_t)(cur + done));
				if (got < 0) {
					if (!done)
						return got;
					want = done; /* a short read, like the kernel's */
					break;
				}
				if ((size_t)got < k) {
					done += (size_t)got;
					want = done;
					break;
				}
			} else {
				ssize_t got = remote_range(f, iov[i].iov_base, k, cur + done);
				if (got < 0)
					return got;
			}
			done += k;
		}
		if (off >= 0 || atomic_compare_exchange_strong(f->offp, &cur, cur + (int64_t)done)) {
			if (!f->remote)
				DS__COUNT(local_bytes, done);
			return done;
		}
	}
}

/* The fd wrappers share one shape: not ours -> libc; ours -> emulate. */
#define FD_CALL(fd, real_call, ours_expr)                                                     \
	do {                                                                                  \
		ds__ensure_init();                                                            \
		struct ds__file *f_ = ds__fd_get(fd);                                         \
		if (DS__LIKELY(!f_))                                                          \
			return real_call;                                                     \
		struct ds__file *f = f_;                                                      \
		ssize_t r_ = (ours_expr);                                                     \
		ds__file_put(f_);                                                             \
		if (r_ < 0) {                                                                 \
			errno = (int)-r_;                                                     \
			return -1;                                                            \
		}                                                                             \
		return r_;                                                                    \
	} while (0)

DS__EXPORT ssize_t DS__WRAP(read)(int fd, void *buf, size_t n)
{
	FD_CALL(fd, DS__REAL(read)(fd, buf, n), ds__file_read(f, buf, n, -1));
}

DS__EXPORT ssize_t DS__WRAP(__read_chk)(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen) /* let libc report the overflow */
		return DS__REAL(__read_chk)(fd, buf, n, buflen);
	FD_CALL(fd, DS__REAL(__read_chk)(fd, buf, n, buflen), ds__file_read(f, buf, n, -1));
}

DS__EXPORT ssize_t DS__WRAP(pread)(int fd, void *buf, size_t n, off_t off)
{
	FD_CALL(fd, DS__REAL(pread)(fd, buf, n, off),
	        off < 0 ? -EINVAL : ds__file_read(f, buf, n, off));
}

DS__EXPORT ssize_t DS__WRAP(pread64)(int fd, void *buf, size_t n, off64_t off)
{
	FD_CALL(fd, DS__REAL(pread64)(fd, buf, n, off),
	        off < 0 ? -EINVAL : ds__file_read(f, buf, n, off));
}

DS__EXPORT ssize_t DS__WRAP(__pread_chk)(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		return DS__REAL(__pread_chk)(fd, buf, n, off, buflen);
	FD_CALL(fd, DS__REAL(__pread_chk)(fd, buf, n, off, buflen),
	        off < 0 ? -EINVAL : ds__file_read(f, buf, n, off));
}

DS__EXPORT ssize_t DS__WRAP(__pread64_chk)(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen)
		return DS__REAL(__pread64_chk)(fd, buf, n, off, buflen);
	FD_CALL(fd, DS__REAL(__pread64_chk)(fd, buf, n, off, buflen),
	        off < 0 ? -EINVAL : ds__file_read(f, buf, n, off));
}

DS__EXPORT ssize_t DS__WRAP(readv)(int fd, const struct iovec *iov, int cnt)
{
	FD_CALL(fd, DS__REAL(readv)(fd, iov, cnt), file_readv(f, iov, cnt, -1));
}

DS__EXPORT ssize_t DS__WRAP(preadv)(int fd, const struct iovec *iov, int cnt, off_t off)
{
	FD_CALL(fd, DS__REAL(preadv)(fd, iov, cnt, off),
	        off < 0 ? -EINVAL : file_readv(f, iov, cnt, off));
}

DS__EXPORT ssize_t DS__WRAP(preadv64)(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	FD_CALL(fd, DS__REAL(preadv64)(fd, iov, cnt, off),
	        off < 0 ? -EINVAL : file_readv(f, iov, cnt, off));
}

/* preadv2: offset -1 means the file offset; the RWF_* hints change nothing
 * for bytes already in memory. */
DS__EXPORT ssize_t DS__WRAP(preadv2)(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	FD_CALL(fd, DS__REAL(preadv2)(fd, iov, cnt, off, fl),
	        off < -1 ? -EINVAL : file_readv(f, iov, cnt, off));
}

DS__EXPORT ssize_t DS__WRAP(preadv64v2)(int fd, const struct iovec *iov, int cnt, off64_t off,
                                        int fl)
{
	FD_CALL(fd, DS__REAL(preadv64v2)(fd, iov, cnt, off, fl),
	        off < -1 ? -EINVAL : file_readv(f, iov, cnt, off));
}

/* ---- seek ----------------------------------------------------------------- */
int64_t ds__file_seek(struct ds__file *f, int64_t off, int whence)
{
	if (atomic_load(&f->flags) & O_PATH)
		return -EBADF;
	if (f->kind == DS__F_DIR || f->kind == DS__F_VDIR) {
		/* a directory descriptor's position: only rewinding is useful */
		if (whence == SEEK_SET && off >= 0) {
			atomic_store(&f->off, off);
			return off;
		}
		if (whence == SEEK_CUR && off == 0)
			return atomic_load(&f->off);
		return -EINVAL;
	}
	int64_t size = (int64_t)f->size, cur, nw;
	do {
		cur = atomic_load(f->offp);
		switch (whence) {
		case SEEK_SET: nw = off; break;
		case SEEK_CUR: nw = cur + off; break;
		case SEEK_END: nw = size + off; break;
		case SEEK_DATA:
			if (off < 0 || off >= size)
				return -ENXIO;
			nw = off;
			break;
		case SEEK_HOLE:
			if (off < 0 || off >= size)
				return -ENXIO;
			nw = size;
			break;
		default: return -EINVAL;
		}
		if (nw < 0)
			return -EINVAL;
	} while (!atomic_compare_exchange_weak(f->offp, &cur, nw));
	return nw;
}

DS__EXPORT off_t DS__WRAP(lseek)(int fd, off_t off, int whence)
{
	FD_CALL(fd, DS__REAL(lseek)(fd, off, whence), ds__file_seek(f, off, whence));
}

DS__EXPORT off64_t DS__WRAP(lseek64)(int fd, off64_t off, int whence)
{
	FD_CALL(fd, DS__REAL(lseek64)(fd, off, whence), ds__file_seek(f, off, whence));
}

/* ---- duplication ---------------------------------------------------------- */
/* A new descriptor >= minfd for f: the kernel duplicates ours (so numbers
 * follow its rules, and the program's FD_CLOEXEC is the kernel's), the table
 * binds it to the same open file.  In a vfork child only the kernel's part,
 * and a note for its exec. */
static int dup_file(int fd, struct ds__file *f, int minfd, int cloexec)
{
	int nfd = DS__REAL(fcntl)(fd, cloexec ? F_DUPFD_CLOEXEC : F_DUPFD, minfd);
	if (nfd < 0)
		return -errno;
	if (!ds__owner()) {
		ds__vfork_note(nfd, (uintptr_t)f);
		return nfd;
	}
	struct ds__file *old = ds__fd_bind(nfd, f, cloexec);
	if (old)
		ds__file_put(old);
	return nfd;
}

DS__EXPORT int DS__WRAP(dup)(int fd)
{
	FD_CALL(fd, ds__out_dupped(fd, ds__fd_fresh(DS__REAL(dup)(fd))), dup_file(fd, f, 0, 0));
}

static int dup_onto(int oldfd, int newfd, int flags, int is_dup3)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(oldfd);
	if (!f) {
		if (oldfd != newfd && ds__fd_is_private(newfd) && ds__fd_private_check(newfd))
			ds__fd_private_evict(newfd); /* move ours out of the program's way */
		uint64_t otok = 0; /* write.c: a writer's descriptor replaced, or copied */
		int had = DS__UNLIKELY(atomic_load_explicit(&ds__out_nw, memory_order_relaxed)) &&
		          oldfd != newfd && ds__out_dup_pre(newfd, &otok);
		int rc = is_dup3 ? DS__REAL(dup3)(oldfd, newfd, flags)
		                 : DS__REAL(dup2)(oldfd, newfd);
		if (had || DS__UNLIKELY(atomic_load_explicit(&ds__out_nw, memory_order_relaxed)))
			ds__out_dup_post(oldfd, newfd, rc, had, otok);
		if (rc >= 0 && oldfd != newfd && ds__fd_known(newfd)) {
			if (!ds__owner()) {
				ds__vfork_note(newfd, 0);
			} else {
				/* a file of the program replaced one of ours (or
				 * took a number closed behind our back) */
				ds__fd_fresh_slow(newfd);
			}
		}
		return rc;
	}
	int rc;
	if (is_dup3 && (oldfd == newfd || (flags & ~O_CLOEXEC))) {
		rc = -EINVAL;
	} else if (oldfd == newfd) {
		rc = newfd;
	} else {
		if (ds__fd_is_private(newfd) && ds__fd_private_check(newfd))
			ds__fd_private_evict(newfd);
		if (DS__REAL(dup3)(oldfd, newfd, flags & O_CLOEXEC) < 0) {
			rc = -errno;
		} else if (!ds__owner()) {
			ds__vfork_note(newfd, (uintptr_t)f);
			rc = newfd;
		} else {
			struct ds__file *old = ds__fd_bind(newfd, f, (flags & O_CLOEXEC) != 0);
			if (old)
				ds__file_put(old);
			rc = newfd;
		}
	}
	ds__file_put(f);
	return rc < 0 ? ds__fail(-rc) : rc;
}

DS__EXPORT int DS__WRAP(dup2)(int oldfd, int newfd) { return dup_onto(oldfd, newfd, 0, 0); }
DS__EXPORT int DS__WRAP(dup3)(int oldfd, int newfd, int flags) { return dup_onto(oldfd, newfd, flags, 1); }

/* ---- fcntl ---------------------------------------------------------------- */
static int file_fcntl(int fd, struct ds__file *f, int cmd, void *arg)
{
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		if ((intptr_t)arg < 0)
			return -EINVAL;
		return dup_file(fd, f, (int)(intptr_t)arg, cmd == F_DUPFD_CLOEXEC);
	case F_GETFD:
		if (!ds__owner()) /* a vfork child may have changed its own */
			return DS__REAL(fcntl)(fd, F_GETFD) < 0 ? -errno : DS__REAL(fcntl)(fd, F_GETFD);
		return ds__fd_cloexec(fd) ? FD_CLOEXEC : 0;
	case F_SETFD:
		/* the kernel's flag is the program's: it decides what exec keeps */
		if (DS__REAL(fcntl)(fd, F_SETFD, (int)(intptr_t)arg) < 0)
			return -errno;
		if (ds__owner())
			ds__fd_set_cloexec(fd, ((intptr_t)arg & FD_CLOEXEC) != 0);
		return 0;
	case F_GETFL:
		return atomic_load(&f->flags);
	case F_SETFL: {
		int chg = O_APPEND | O_ASYNC | O_DIRECT | O_NOATIME | O_NONBLOCK;
		int cur = atomic_load(&f->flags);
		if (cur & O_PATH)
			return -EBADF;
		atomic_store(&f->flags, (cur & ~chg) | ((int)(intptr_t)arg & chg));
		return 0;
	}
	case F_GETLK:
	case F_SETLK:
	case F_SETLKW:
	case F_OFD_GETLK:
	case F_OFD_SETLK:
	case F_OFD_SETLKW: {
		/* record locks on a read-only file nobody writes: read locks
		 * always succeed, write locks fail as on an O_RDONLY descriptor */
		struct flock *fl = arg;
		if (atomic_load(&f->flags) & O_PATH)
			return -EBADF;
		if (!fl)
			return -EFAULT;
		if (cmd == F_GETLK || cmd == F_OFD_GETLK) {
			if (fl->l_type != F_RDLCK && fl->l_type != F_WRLCK)
				return -EINVAL;
			fl->l_type = F_UNLCK;
			return 0;
		}
		if (fl->l_type == F_WRLCK)
			return -EBADF;
		if (fl->l_type != F_RDLCK && fl->l_type != F_UNLCK)
			return -EINVAL;
		return 0;
	}
	default:
		/* the reserved O_PATH descriptor answers (EBADF for I/O) */
		return DS__REAL(fcntl)(fd, cmd, arg) < 0 ? -errno : 0;
	}
}

/* fcntl on a descriptor of the program; a new one it makes may take a number
 * the table still knows (closed behind our back). */
static int real_fcntl(int (*fn)(int, int, ...), int fd, int cmd, void *arg)
{
	int rc = fn(fd, cmd, arg);
	if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
		ds__fd_fresh(rc);
		/* a writer's output (a shell saves `exec >f`'s descriptor so) */
		ds__out_dupped(fd, rc);
	}
	return rc;
}

DS__EXPORT int DS__WRAP(fcntl)(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	FD_CALL(fd, real_fcntl(DS__REAL(fcntl), fd, cmd, arg), file_fcntl(fd, f, cmd, arg));
}

DS__EXPORT int DS__WRAP(fcntl64)(int fd, int cmd, ...)
{
	va_list ap;
	va_start(ap, cmd);
	void *arg = va_arg(ap, void *);
	va_end(ap);
	FD_CALL(fd, real_fcntl(DS__HAVE(fcntl64) ? DS__REAL(fcntl64) : DS__REAL(fcntl), fd, cmd, arg),
	           file_fcntl(fd, f, cmd, arg));
}

/* ---- mmap ----------------------------------------------------------------- */
/* A private copy of the bytes: anonymous memory filled from the file, then
 * given the caller's protection.  When the bytes sit page-aligned in the
 * store, the whole pages are mapped from the store file instead (no copy)
 * and only the partial last page is filled. */
static void *file_mmap(struct ds__file *f, void *addr, size_t len, int prot, int flags, int64_t off,
                       int *err)
{
	long pg = sysconf(_SC_PAGESIZE);
	int type = flags & MAP_TYPE;
	*err = 0;
	if (atomic_load(&f->flags) & O_PATH) {
		*err = EBADF;
		return MAP_FAILED;
	}
	if (f->kind == DS__F_DIR || f->kind == DS__F_VDIR) {
		*err = ENODEV;
		return MAP_FAILED;
	}
	if (len == 0 || off < 0 || off % pg) {
		*err = EINVAL;
		return MAP_FAILED;
	}
	if ((type == MAP_SHARED || type == MAP_SHARED_VALIDATE) && (prot & PROT_WRITE)) {
		*err = EACCES;
		return MAP_FAILED;
	}
	int rc;
	const char *d = file_data(f, &rc);
	if (rc || !d) {
		if (!rc) {
			rc = ds__materialize(f);
			d = atomic_load(&f->data);
		}
		if (rc || !d) {
			*err = rc ? -rc : EIO;
			return MAP_FAILED;
		}
	}
	int keep = flags & (MAP_FIXED | MAP_FIXED_NOREPLACE | MAP_NORESERVE | MAP_32BIT);
	void *m = DS__REAL(mmap)(addr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | keep,
	                        -1, 0);
	if (m == MAP_FAILED) {
		*err = errno;
		return MAP_FAILED;
	}
	size_t have = (uint64_t)off < f->size ? f->size - off : 0;
	if (have > len)
		have = len;
	size_t whole = have & ~(size_t)(pg - 1), done = 0;
	const char *src = d + off;
	if (whole >= (64u << 10) && ds__g.store && src >= ds__g.store &&
	    src + whole <= ds__g.store + ds__g.store_len && ((uintptr_t)src % pg) == 0) {
		char path[PATH_MAX + 16];
		/* the file of the tier that holds it (a file lies in one) */
		size_t so = (size_t)(src - ds__g.store), fo = so;
		if (so >= ds__g.ram_len) {
			snprintf(path, sizeof(path), "%s", ds__spill_store);
			fo = so - ds__g.ram_len;
		} else {
			ds_store_path(path, sizeof(path), ds__g.nodedir, DS_STORE_NAME);
		}
		int sfd = so < ds__g.ram_len && so + whole > ds__g.ram_len
		                  ? -1
		                  : DS__REAL(open)(path, O_RDONLY | O_CLOEXEC);
		if (sfd >= 0) {
			void *w = DS__REAL(mmap)(m, whole, prot, MAP_PRIVATE | MAP_FIXED, sfd, (off_t)fo);
			if (w != MAP_FAILED)
				done = whole;
			DS__REAL(close)(sfd);
		}
	}
	memcpy((char *)m + done, src + done, have - done);
	if (done < len && prot != (PROT_READ | PROT_WRITE) &&
	    mprotect((char *)m + done, len - done, prot) < 0) {
		*err = errno;
		munmap(m, len);
		return MAP_FAILED;
	}
	return m;
}

static void *mmap_any(void *addr, size_t len, int prot, int flags, int fd, int64_t off, int is64)
{
	ds__ensure_init();
	struct ds__file *f = (flags & MAP_ANONYMOUS) ? NULL : ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return is64 ? DS__REAL(mmap64)(addr, len, prot, flags, fd, off)
		            : DS__REAL(mmap)(addr, len, prot, flags, fd, off);
	int err;
	void *m = file_mmap(f, addr, len, prot, flags, off, &err);
	ds__file_put(f);
	if (m == MAP_FAILED)
		errno = err;
	return m;
}

DS__EXPORT void *DS__WRAP(mmap)(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return mmap_any(addr, len, prot, flags, fd, off, 0);
}

DS__EXPORT void *DS__WRAP(mmap64)(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	return mmap_any(addr, len, prot, flags, fd, off, 1);
}

/* ---- advice, locks, sync: nothing to do on memory nobody writes ------------ */
static int not_path(struct ds__file *f)
{
	return (atomic_load(&f->flags) & O_PATH) ? -EBADF : 0;
}

static int file_flock(struct ds__file *f, int op)
{
	int rc = not_path(f);
	if (rc)
		return rc;
	switch (op & ~LOCK_NB) {
	case LOCK_SH:
	case LOCK_EX:
	case LOCK_UN: return 0;
	default: return -EINVAL;
	}
}

DS__EXPORT int DS__WRAP(flock)(int fd, int op)
{
	FD_CALL(fd, DS__REAL(flock)(fd, op), file_flock(f, op));
}

static int fadvise(struct ds__file *f, int64_t len, int advice)
{
	if (not_path(f))
		return EBADF;
	if (len < 0 || advice < POSIX_FADV_NORMAL || advice > POSIX_FADV_NOREUSE)
		return EINVAL;
	return 0;
}

/* posix_fadvise returns the error number; errno stays untouched */
DS__EXPORT int DS__WRAP(posix_fadvise)(int fd, off_t off, off_t len, int advice)
{
	(void)off;
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return DS__REAL(posix_fadvise)(fd, off, len, advice);
	int rc = fadvise(f, len, advice);
	ds__file_put(f);
	return rc;
}

DS__EXPORT int DS__WRAP(posix_fadvise64)(int fd, off64_t off, off64_t len, int advice)
{
	(void)off;
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return DS__REAL(posix_fadvise64)(fd, off, len, advice);
	int rc = fadvise(f, len, advice);
	ds__file_put(f);
	return rc;
}

DS__EXPORT ssize_t DS__WRAP(readahead)(int fd, off64_t off, size_t n)
{
	FD_CALL(fd, DS__REAL(readahead)(fd, off, n),
	           not_path(f) ? -EBADF : f->kind != DS__F_REG && f->kind != DS__F_VIRT ? -EINVAL : 0);
}

DS__EXPORT int DS__WRAP(fsync)(int fd) { FD_CALL(fd, DS__REAL(fsync)(fd), not_path(f)); }
DS__EXPORT int DS__WRAP(fdatasync)(int fd) { FD_CALL(fd, DS__REAL(fdatasync)(fd), not_path(f)); }

/* ---- copying out: sendfile, copy_file_range -------------------------------- */
/* Read from staged in (at *inoff when given, else its offset) and write to
 * the real descriptor out (at *outoff when given).  Bytes copied or -errno;
 * partial counts like the kernel's. */
static ssize_t copy_out(struct ds__file *f, int64_t *inoff, int out, int64_t *outoff, size_t n)
{
	char buf[32768];
	size_t done = 0;
	while (done < n) {
		size_t want = n - done < sizeof(buf) ? n - done : sizeof(buf);
		ssize_t got = ds__file_read(f, buf, want, inoff ? *inoff : -1);
		if (got < 0)
			return done ? (ssize_t)done : got;
		if (got == 0)
			break;
		ssize_t put = 0;
		while (put < got) {
			ssize_t w = outoff ? pwrite(out, buf + put, got - put, *outoff + put)
			                   : write(out, buf + put, got - put);
			if (w < 0) {
				if (errno == EINTR)
					continue;
				int e = errno;
				if (!inoff) /* give back what was read but not written */
					ds__file_seek(f, put - got, SEEK_CUR);
				done += put;
				if (outoff)
					*outoff += put;
				return done ? (ssize_t)done : -e;
			}
			put += w;
		}
		if (inoff)
			*inoff += got;
		if (outoff)
			*outoff += got;
		done += got;
		if ((size_t)got < want)
			break;
	}
	return done;
}

DS__EXPORT ssize_t DS__WRAP(sendfile)(int out, int in, off_t *off, size_t n)
{
	int64_t o = off ? *off : 0;
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(in);
	if (DS__LIKELY(!f))
		return DS__REAL(sendfile)(out, in, off, n);
	/* a directory is not a file sendfile can read: EINVAL, as the kernel */
	ssize_t r = (off && o < 0) || f->kind == DS__F_DIR || f->kind == DS__F_VDIR
	                    ? -EINVAL
	                    : copy_out(f, off ? &o : NULL, out, NULL, n);
	ds__file_put(f);
	if (r < 0)
		return ds__fail((int)-r);
	if (off)
		*off = o;
	return r;
}

DS__EXPORT ssize_t DS__WRAP(sendfile64)(int out, int in, off64_t *off, size_t n)
{
	return DS__WRAP(sendfile)(out, in, (off_t *)off, n);
}

DS__EXPORT ssize_t DS__WRAP(copy_file_range)(int in, off64_t *inoff, int out, off64_t *outoff,
                                             size_t n, unsigned flags)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(in);
	if (DS__LIKELY(!f))
		return DS__REAL(copy_file_range)(in, inoff, out, outoff, n, flags);
	int64_t io = inoff ? *inoff : 0, oo = outoff ? *outoff : 0;
	ssize_t r;
	if (flags || (inoff && io < 0) || (outoff && oo < 0))
		r = -EINVAL;
	else if (ds__fd_is_ours(out))
		r = -EBADF;
	else
		r = copy_out(f, inoff ? &io : NULL, out, outoff ? &oo : NULL, n);
	ds__file_put(f);
	if (r < 0)
		return ds__fail((int)-r);
	if (inoff)
		*inoff = io;
	if (outoff)
		*outoff = oo;
	return r;
}
