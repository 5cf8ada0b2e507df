/* SPDX-License-Identifier: BSD-3-Clause */
/* stdio.c: FILE streams on staged files.
 *
 * glibc's fopen opens with its internal open, never ours, so fopen, fopen64
 * and fdopen are wrapped and return a fopencookie stream whose read, seek
 * and close go to the staged descriptor (the offset is the descriptor's,
 * shared with dup's as the kernel's would be).  fileno of such a stream
 * answers the staged descriptor: the streams are kept in a small table.
 *
 * freopen must keep the caller's FILE *, which cannot become a cookie
 * stream: it gets a sealed memfd holding the bytes instead (freopen of a
 * staged file is rare: `freopen(path, "r", stdin)`). */
#include "shim.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

struct cookie {
	int fd;
	FILE *fp;
	struct cookie *next;
};

/* The staged streams open now: few, so a list under a lock; fileno on other
 * streams pays one relaxed load while there are none. */
static struct cookie *streams;
static _Atomic int nstreams;
static pthread_mutex_t streams_lock = PTHREAD_MUTEX_INITIALIZER;

void ds__stdio_atfork_child(void)
{
	pthread_mutex_init(&streams_lock, NULL);
}

static ssize_t ck_read(void *c, char *buf, size_t n)
{
	struct ds__file *f = ds__fd_get(((struct cookie *)c)->fd);
	if (!f)
		return ds__fail(EBADF);
	ssize_t r = ds__file_read(f, buf, n, -1);
	ds__file_put(f);
	return r < 0 ? ds__fail((int)-r) : r;
}

static ssize_t ck_write(void *c, const char *buf, size_t n)
{
	(void)c;
	(void)buf;
	(void)n;
	return ds__fail(EBADF);
}

static int ck_seek(void *c, off64_t *off, int whence)
{
	struct ds__file *f = ds__fd_get(((struct cookie *)c)->fd);
	if (!f)
		return ds__fail(EBADF);
	int64_t r = ds__file_seek(f, *off, whence);
	ds__file_put(f);
	if (r < 0)
		return ds__fail((int)-r);
	*off = r;
	return 0;
}

static int ck_close(void *cv)
{
	struct cookie *c = cv;
	pthread_mutex_lock(&streams_lock);
	for (struct cookie **p = &streams; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			atomic_fetch_sub(&nstreams, 1);
			break;
		}
	pthread_mutex_unlock(&streams_lock);
	int fd = c->fd;
	free(c);
	return ds__close(fd);
}

/* Parse an fopen mode: open flags, or -1 when it asks for writing. */
static int mode_flags(const char *mode, int *flags)
{
	int f = 0;
	if (!mode || (mode[0] != 'r' && mode[0] != 'w' && mode[0] != 'a'))
		return -EINVAL;
	int write = mode[0] != 'r';
	for (const char *m = mode + 1; *m && *m != ','; m++) {
		if (*m == '+')
			write = 1;
		else if (*m == 'e')
			f |= O_CLOEXEC;
		else if (*m == 'x')
			f |= O_EXCL;
	}
	if (write)
		f |= (mode[0] == 'r' ? O_RDWR : O_WRONLY | O_CREAT) | (mode[0] == 'w' ? O_TRUNC : 0);
	*flags = f;
	return 0;
}

/* A stream on staged descriptor fd (the stream owns it on success). */
static FILE *stream_on(int fd)
{
	struct cookie *c = malloc(sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	cookie_io_functions_t io = {ck_read, ck_write, ck_seek, ck_close};
	c->fd = fd;
	FILE *fp = fopencookie(c, "r", io);
	if (!fp) {
		free(c);
		return NULL;
	}
	c->fp = fp;
	pthread_mutex_lock(&streams_lock);
	c->next = streams;
	streams = c;
	atomic_fetch_add(&nstreams, 1);
	pthread_mutex_unlock(&streams_lock);
	return fp;
}

static FILE *open_stream(const char *path, const char *mode, FILE *(*real)(const char *, const char *))
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return real(path, mode);
	int flags;
	int rc = mode_flags(mode, &flags);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	struct ds__res r;
	rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW | DS__RES_PARENT, &r);
	if (rc == 0 && r.out) { /* an output (write.c): our descriptor, libc's stream */
		int ofd = ds__out_open(&r, flags, 0666);
		if (ofd < 0)
			return NULL;
		FILE *ofp = DS__REAL(fdopen)(ofd, mode);
		if (!ofp) {
			int e = errno;
			DS__WRAP(close)(ofd);
			errno = e;
		}
		return ofp;
	}
	if (rc == 0 && !r.ours)
		return real(r.rpath, mode);
	if (rc == -ENOENT && r.ours && (flags & O_CREAT))
		rc = -EROFS;
	if (rc) {
		errno = -rc;
		return NULL;
	}
	int fd = ds__open_res(&r, flags, 0666);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	FILE *fp = stream_on(fd);
	if (!fp) {
		int e = errno;
		ds__close(fd);
		errno = e;
	}
	return fp;
}

DS__EXPORT FILE *DS__WRAP(fopen)(const char *path, const char *mode)
{
	return open_stream(path, mode, DS__REAL(fopen));
}

DS__EXPORT FILE *DS__WRAP(fopen64)(const char *path, const char *mode)
{
	return open_stream(path, mode, DS__REAL(fopen64));
}

DS__EXPORT FILE *DS__WRAP(fdopen)(int fd, const char *mode)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fd_is_ours(fd)))
		return DS__REAL(fdopen)(fd, mode);
	int flags;
	int rc = mode_flags(mode, &flags);
	if (rc == 0 && (flags & O_ACCMODE) != O_RDONLY)
		rc = -EINVAL; /* the descriptor is read-only */
	struct ds__file *f = ds__fd_get(fd);
	if (!f) {
		errno = EBADF;
		return NULL;
	}
	if (rc == 0 && (atomic_load(&f->flags) & O_PATH))
		rc = -EBADF;
	ds__file_put(f);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	return stream_on(fd);
}

/* freopen: a sealed memfd with the file's bytes, reopened through /proc. */
static FILE *reopen(const char *path, const char *mode, FILE *fp,
                    FILE *(*real)(const char *, const char *, FILE *))
{
	if (!path || DS__LIKELY(!ds__maybe_ours(path)))
		return real(path, mode, fp);
	struct ds__res r;
	int flags, rc = mode_flags(mode, &flags);
	if (rc == 0)
		rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW | DS__RES_PARENT, &r);
	if (rc == 0 && !r.ours)
		return real(r.rpath, mode, fp);
	if (rc == -ENOENT && r.ours && (flags & O_CREAT))
		rc = -EROFS;
	if (rc == 0 && r.v.kind == DS__V_NONE && S_ISDIR(ds_ix_mode(&ds__g.ix, (uint32_t)r.id)) &&
	    (flags & O_ACCMODE) == O_RDONLY) {
		/* a directory: the stream is made as the kernel makes it, and its
		 * reads fail with EISDIR; on the directory's empty shadow (cwd.c).
		 * Without one (a read-only job directory) it fails with EISDIR
		 * below, as before. */
		char shadow[PATH_MAX + 32];
		if (ds__cwd_shadow(r.id, shadow, sizeof(shadow)) == 0)
			return real(shadow, mode, fp);
	}
	int fd = rc ? rc : ds__open_res(&r, flags, 0666);
	if (fd < 0) {
		fclose(fp);
		errno = -fd;
		return NULL;
	}
	struct ds__file *f = ds__fd_get(fd);
	int mfd = memfd_create("dstage", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	char buf[65536];
	int64_t off = 0;
	ssize_t n = 0;
	while (mfd >= 0 && f && (n = ds__file_read(f, buf, sizeof(buf), off)) > 0) {
		if (ds_pwrite_full(mfd, buf, n, off)) {
			n = -EIO;
			break;
		}
		off += n;
	}
	if (f)
		ds__file_put(f);
	ds__close(fd);
	if (mfd < 0 || n < 0) {
		int e = mfd < 0 ? errno : (int)-n;
		if (mfd >= 0)
			DS__REAL(close)(mfd);
		fclose(fp);
		errno = e;
		return NULL;
	}
	fcntl(mfd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", mfd);
	FILE *res = real(proc, mode, fp);
	int e = errno;
	DS__REAL(close)(mfd);
	errno = e;
	return res;
}

DS__EXPORT FILE *DS__WRAP(freopen)(const char *path, const char *mode, FILE *fp)
{
	ds__ensure_init();
	return reopen(path, mode, fp, DS__REAL(freopen));
}

DS__EXPORT FILE *DS__WRAP(freopen64)(const char *path, const char *mode, FILE *fp)
{
	ds__ensure_init();
	return reopen(path, mode, fp, DS__REAL(freopen64));
}

static int stream_fd(FILE *fp)
{
	int fd = -1;
	pthread_mutex_lock(&streams_lock);
	for (struct cookie *c = streams; c; c = c->next)
		if (c->fp == fp) {
			fd = c->fd;
			break;
		}
	pthread_mutex_unlock(&streams_lock);
	return fd;
}

DS__EXPORT int DS__WRAP(fileno)(FILE *fp)
{
	ds__ensure_init();
	int fd;
	if (DS__UNLIKELY(atomic_load_explicit(&nstreams, memory_order_relaxed)) && (fd = stream_fd(fp)) >= 0)
		return fd;
	return DS__REAL(fileno)(fp);
}

DS__EXPORT int DS__WRAP(fileno_unlocked)(FILE *fp)
{
	ds__ensure_init();
	int fd;
	if (DS__UNLIKELY(atomic_load_explicit(&nstreams, memory_order_relaxed)) && (fd = stream_fd(fp)) >= 0)
		return fd;
	return DS__REAL(fileno_unlocked)(fp);
}
