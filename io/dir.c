/* SPDX-License-Identifier: BSD-3-Clause */
/* dir.c: directory streams over staged directories.
 *
 * A DIR of ours is a struct of our own, handed out as an opaque DIR *.  They
 * live in one reserved region, so "is this DIR ours" is two pointer
 * compares, with no lock and no lookup, on every readdir of the program's
 * own directories.  Listings come from the index (children sorted by name)
 * with "." and ".." first, d_ino = st_ino and d_type, like a real file
 * system; the virtual .dstage tree is not listed in the root. */
#include "shim.h"

#include <fcntl.h>
#include <stddef.h>
#include <sys/mman.h>
#include <unistd.h>

_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64) &&
                       offsetof(struct dirent, d_name) == offsetof(struct dirent64, d_name),
               "64-bit ABI: dirent == dirent64");

#define DIR_MAGIC 0x44534452u /* "DSDR" */
#define DIR_SLOTS 65536u      /* staged directory streams open at once */

struct ds__dir {
	uint32_t magic;
	int fd;              /* the stream's staged descriptor (owned) */
	pthread_mutex_t lock;
	long pos;            /* 0 ".", 1 "..", 2 + i: child i */
	struct ds_ix_names names; /* the children's names, decoded in turn */
	struct dirent64 ent; /* what readdir returns (per stream, like glibc) */
	struct ds__dir *next; /* free list */
};

static struct ds__dir *arena, *arena_end, *arena_bump, *dir_free;
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t arena_once = PTHREAD_ONCE_INIT;

static void arena_init(void)
{
	void *m = DS__REAL(mmap)(NULL, DIR_SLOTS * sizeof(struct ds__dir), PROT_READ | PROT_WRITE,
	                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return;
	arena = arena_bump = m;
	arena_end = arena + DIR_SLOTS;
}

static inline int dir_ours(const DIR *d)
{
	const struct ds__dir *p = (const struct ds__dir *)d;
	return p >= arena && p < arena_end;
}

static struct ds__dir *dir_alloc(void)
{
	pthread_once(&arena_once, arena_init);
	if (!arena)
		return NULL;
	pthread_mutex_lock(&arena_lock);
	struct ds__dir *d = dir_free;
	if (d)
		dir_free = d->next;
	else if (arena_bump < arena_end)
		d = arena_bump++;
	pthread_mutex_unlock(&arena_lock);
	return d;
}

static void dir_release(struct ds__dir *d)
{
	d->magic = 0;
	pthread_mutex_destroy(&d->lock);
	pthread_mutex_lock(&arena_lock);
	d->next = dir_free;
	dir_free = d;
	pthread_mutex_unlock(&arena_lock);
}

void ds__dir_atfork_child(void)
{
	pthread_mutex_init(&arena_lock, NULL);
	for (struct ds__dir *d = arena; d && d < arena_bump; d++)
		if (d->magic == DIR_MAGIC)
			pthread_mutex_init(&d->lock, NULL);
}

/* ---- listing -------------------------------------------------------------- */
static unsigned char dtype(mode_t m)
{
	return S_ISDIR(m) ? DT_DIR : S_ISLNK(m) ? DT_LNK : S_ISREG(m) ? DT_REG : DT_UNKNOWN;
}

int ds__dir_child(const struct ds__file *f, size_t i, struct ds_ix_names *nm, const char **name,
                  size_t *nlen, uint64_t *ino, unsigned char *type, char *tmp, size_t tmplen)
{
	if (f->kind == DS__F_VDIR) {
		struct ds__vent c;
		if (ds__virt_child(&f->v, i, tmp, tmplen, &c))
			return -ENOENT;
		struct stat st;
		ds__virt_stat(&c, &st, 0); /* d_ino, d_type */
		*name = tmp;
		*nlen = strlen(tmp);
		*ino = st.st_ino;
		*type = dtype(st.st_mode);
		return 0;
	}
	uint32_t nc = ds_ix_nchildren(&ds__g.ix, (uint32_t)f->id);
	if (f->id == 0 && i == nc && ds__out_root_entry(name, nlen, ino)) {
		*type = DT_DIR;
		return 0;
	}
	if (i >= nc)
		return -ENOENT;
	/* ids read from the index are checked before use (the shim maps it
	 * without the full check): a damaged child (not an entry that passes
	 * ds_index_entry_ok, not this directory's, its name not one
	 * component) is an error, not a read out of bounds */
	int64_t c = ds_ix_child_named(&ds__g.ix, nm, (uint32_t)f->id, (uint32_t)i);
	if (c < 0)
		return -EIO;
	*name = nm->name; /* front-coded: decoded into nm */
	*nlen = nm->len;
	*ino = DS_INO(c);
	*type = dtype(ds_ix_mode(&ds__g.ix, c));
	return 0;
}

/* d_ino of "..": the parent's st_ino; above the mount root, the real
 * directory's (asked once). */
static uint64_t dotdot_ino(const struct ds__file *f)
{
	static _Atomic uint64_t above;
	if (f->kind == DS__F_VDIR) {
		struct stat st;
		struct ds__vent p = f->v;
		if (p.kind == DS__V_ROOT)
			return DS_INO(0);
		p.kind--; /* the enum is ordered by depth */
		ds__virt_stat(&p, &st, 0);
		return st.st_ino;
	}
	if (f->id != 0)
		return DS_INO(ds_ix_parent(&ds__g.ix, (uint32_t)f->id));
	uint64_t v = atomic_load(&above);
	if (!v) {
		char parent[PATH_MAX];
		struct stat st;
		memcpy(parent, ds__g.mount, ds__g.mlen + 1);
		char *sl = strrchr(parent, '/');
		if (sl == parent)
			sl[1] = 0;
		else
			*sl = 0;
		v = DS__REAL(stat)(parent, &st) == 0 ? st.st_ino : 2;
		atomic_store(&above, v);
	}
	return v;
}

/* Fill ent with the entry at d->pos and advance; 0 at the end, -EIO for a
 * damaged entry (the position stays: every later call says the same). */
static int dir_next(struct ds__dir *d, struct ds__file *f, struct dirent64 *ent)
{
	char tmp[NAME_MAX + 1];
	const char *name;
	size_t nlen;
	uint64_t ino;
	unsigned char type;
	long pos = d->pos;
	if (pos == 0 || pos == 1) {
		struct stat st;
		if (pos == 0) {
			ds__stat_file(f, &st);
			ino = st.st_ino;
		} else {
			ino = dotdot_ino(f);
		}
		name = pos == 0 ? "." : "..";
		nlen = pos + 1;
		type = DT_DIR;
	} else {
		int rc = ds__dir_child(f, pos - 2, &d->names, &name, &nlen, &ino, &type, tmp,
		                       sizeof(tmp));
		if (rc)
			return rc == -ENOENT ? 0 : rc;
	}
	ent->d_ino = ino;
	ent->d_off = pos + 1;
	ent->d_reclen = (offsetof(struct dirent64, d_name) + nlen + 1 + 7) & ~7;
	ent->d_type = type;
	memcpy(ent->d_name, name, nlen);
	ent->d_name[nlen] = 0;
	d->pos = pos + 1;
	return 1;
}

/* ---- opening ---------------------------------------------------------------- */
/* A stream over staged descriptor fd (taken over on success). */
static DIR *stream_on(int fd)
{
	struct ds__file *f = ds__fd_get(fd);
	if (!f) {
		errno = EBADF;
		return NULL;
	}
	int kind = f->kind, fl = atomic_load(&f->flags);
	ds__file_put(f);
	if (fl & O_PATH) {
		errno = EBADF;
		return NULL;
	}
	if (kind != DS__F_DIR && kind != DS__F_VDIR) {
		errno = ENOTDIR;
		return NULL;
	}
	struct ds__dir *d = dir_alloc();
	if (!d) {
		errno = EMFILE;
		return NULL;
	}
	d->fd = fd;
	d->pos = 0;
	ds_ix_names_init(&d->names);
	pthread_mutex_init(&d->lock, NULL);
	d->magic = DIR_MAGIC;
	return (DIR *)d;
}

DS__EXPORT DIR *DS__WRAP(opendir)(const char *path)
{
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return DS__REAL(opendir)(path);
	struct ds__res r;
	int rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	if (!r.ours)
		return DS__REAL(opendir)(r.rpath);
	int fd = ds__open_res(&r, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0) {
		errno = -fd;
		return NULL;
	}
	DIR *d = stream_on(fd);
	if (!d) {
		int e = errno;
		ds__close(fd);
		errno = e;
	}
	return d;
}

DS__EXPORT DIR *DS__WRAP(fdopendir)(int fd)
{
	ds__ensure_init();
	if (DS__LIKELY(!ds__fd_is_ours(fd)))
		return DS__REAL(fdopendir)(fd);
	return stream_on(fd);
}

/* ---- reading ---------------------------------------------------------------- */
static struct dirent64 *read_one(DIR *dir)
{
	struct ds__dir *d = (struct ds__dir *)dir;
	struct ds__file *f = ds__fd_get(d->fd);
	if (!f) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&d->lock);
	int got = dir_next(d, f, &d->ent);
	pthread_mutex_unlock(&d->lock);
	ds__file_put(f);
	if (got < 0) {
		errno = -got;
		return NULL;
	}
	return got ? &d->ent : NULL; /* end of stream: errno untouched */
}

DS__EXPORT struct dirent *DS__WRAP(readdir)(DIR *d)
{
	if (DS__LIKELY(!dir_ours(d)))
		return DS__REAL(readdir)(d);
	return (struct dirent *)read_one(d);
}

DS__EXPORT struct dirent64 *DS__WRAP(readdir64)(DIR *d)
{
	if (DS__LIKELY(!dir_ours(d)))
		return DS__REAL(readdir64)(d);
	return read_one(d);
}

static int read_r(DIR *dir, struct dirent64 *ent, struct dirent64 **res)
{
	struct ds__dir *d = (struct ds__dir *)dir;
	struct ds__file *f = ds__fd_get(d->fd);
	if (!f)
		return EBADF;
	pthread_mutex_lock(&d->lock);
	int got = dir_next(d, f, ent);
	pthread_mutex_unlock(&d->lock);
	ds__file_put(f);
	*res = got > 0 ? ent : NULL;
	return got < 0 ? -got : 0;
}

DS__EXPORT int DS__WRAP(readdir_r)(DIR *d, struct dirent *ent, struct dirent **res)
{
	if (DS__LIKELY(!dir_ours(d)))
		return DS__REAL(readdir_r)(d, ent, res);
	return read_r(d, (struct dirent64 *)ent, (struct dirent64 **)res);
}

DS__EXPORT int DS__WRAP(readdir64_r)(DIR *d, struct dirent64 *ent, struct dirent64 **res)
{
	if (DS__LIKELY(!dir_ours(d)))
		return DS__REAL(readdir64_r)(d, ent, res);
	return read_r(d, ent, res);
}

DS__EXPORT int DS__WRAP(closedir)(DIR *dir)
{
	if (DS__LIKELY(!dir_ours(dir)))
		return DS__REAL(closedir)(dir);
	struct ds__dir *d = (struct ds__dir *)dir;
	if (d->magic != DIR_MAGIC)
		return ds__fail(EBADF);
	int fd = d->fd;
	dir_release(d);
	ds__close(fd);
	return 0;
}

DS__EXPORT void DS__WRAP(rewinddir)(DIR *dir)
{
	if (DS__LIKELY(!dir_ours(dir))) {
		DS__REAL(rewinddir)(dir);
		return;
	}
	struct ds__dir *d = (struct ds__dir *)dir;
	pthread_mutex_lock(&d->lock);
	d->pos = 0;
	pthread_mutex_unlock(&d->lock);
}

DS__EXPORT void DS__WRAP(seekdir)(DIR *dir, long pos)
{
	if (DS__LIKELY(!dir_ours(dir))) {
		DS__REAL(seekdir)(dir, pos);
		return;
	}
	struct ds__dir *d = (struct ds__dir *)dir;
	pthread_mutex_lock(&d->lock);
	d->pos = pos < 0 ? 0 : pos;
	pthread_mutex_unlock(&d->lock);
}

DS__EXPORT long DS__WRAP(telldir)(DIR *dir)
{
	if (DS__LIKELY(!dir_ours(dir)))
		return DS__REAL(telldir)(dir);
	struct ds__dir *d = (struct ds__dir *)dir;
	pthread_mutex_lock(&d->lock);
	long p = d->pos;
	pthread_mutex_unlock(&d->lock);
	return p;
}

DS__EXPORT int DS__WRAP(dirfd)(DIR *dir)
{
	if (DS__LIKELY(!dir_ours(dir)))
		return DS__REAL(dirfd)(dir);
	return ((struct ds__dir *)dir)->fd;
}

/* ---- scandir: glibc's calls its internal opendir, so it is done here ---------- */
typedef int (*filter_fn)(const struct dirent64 *);
typedef int (*cmp_fn)(const struct dirent64 **, const struct dirent64 **);

static int scan(DIR *dir, struct dirent64 ***list, filter_fn filter, cmp_fn cmp)
{
	struct dirent64 **v = NULL, *e;
	size_t n = 0, cap = 0;
	int saved = errno;
	errno = 0;
	while ((e = read_one(dir))) {
		if (filter && !filter(e))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 32;
			struct dirent64 **nv = realloc(v, cap * sizeof(*v));
			if (!nv)
				goto fail;
			v = nv;
		}
		struct dirent64 *c = malloc(e->d_reclen);
		if (!c)
			goto fail;
		memcpy(c, e, e->d_reclen);
		v[n++] = c;
	}
	if (errno)
		goto fail;
	if (cmp && n > 1)
		qsort(v, n, sizeof(*v), (int (*)(const void *, const void *))cmp);
	if (n > INT_MAX) {
		errno = EOVERFLOW;
		goto fail;
	}
	*list = v;
	errno = saved;
	return (int)n;
fail:
	saved = errno ? errno : ENOMEM;
	while (n)
		free(v[--n]);
	free(v);
	errno = saved;
	return -1;
}

static int scandir_at(int dirfd, const char *path, struct dirent64 ***list, filter_fn filter,
                      cmp_fn cmp, int *handled)
{
	struct ds__res r;
	*handled = 1;
	int rc = ds__resolve(dirfd, path, DS__RES_FOLLOW, &r);
	if (rc)
		return ds__fail(-rc);
	if (!r.ours) {
		*handled = 0;
		return 0;
	}
	int fd = ds__open_res(&r, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	if (fd < 0)
		return ds__fail(-fd);
	DIR *d = stream_on(fd);
	if (!d) {
		int e = errno;
		ds__close(fd);
		return ds__fail(e);
	}
	int n = scan(d, list, filter, cmp);
	int e = errno;
	DS__WRAP(closedir)(d);
	errno = e;
	return n;
}

static int at_ours(int dirfd, const char *path)
{
	ds__ensure_init();
	if (path && path[0] != '/' && dirfd != AT_FDCWD)
		return ds__at_maybe_ours(dirfd, path);
	return ds__maybe_ours(path);
}

DS__EXPORT int DS__WRAP(scandir)(const char *path, struct dirent ***list,
                                 int (*filter)(const struct dirent *),
                                 int (*cmp)(const struct dirent **, const struct dirent **))
{
	int handled = 0, n = 0;
	if (at_ours(AT_FDCWD, path)) {
		struct ds__res r;
		n = scandir_at(AT_FDCWD, path, (struct dirent64 ***)list, (filter_fn)filter,
		               (cmp_fn)cmp, &handled);
		if (!handled && ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r) == 0 && !r.ours)
			return DS__REAL(scandir)(r.rpath, list, filter, cmp);
	}
	return handled ? n : DS__REAL(scandir)(path, list, filter, cmp);
}

DS__EXPORT int DS__WRAP(scandir64)(const char *path, struct dirent64 ***list,
                                   int (*filter)(const struct dirent64 *),
                                   int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	int handled = 0, n = 0;
	if (at_ours(AT_FDCWD, path)) {
		struct ds__res r;
		n = scandir_at(AT_FDCWD, path, list, filter, cmp, &handled);
		if (!handled && ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r) == 0 && !r.ours)
			return DS__REAL(scandir64)(r.rpath, list, filter, cmp);
	}
	return handled ? n : DS__REAL(scandir64)(path, list, filter, cmp);
}

DS__EXPORT int DS__WRAP(scandirat)(int dirfd, const char *path, struct dirent ***list,
                                   int (*filter)(const struct dirent *),
                                   int (*cmp)(const struct dirent **, const struct dirent **))
{
	int handled = 0, n = 0;
	if (at_ours(dirfd, path)) {
		struct ds__res r;
		n = scandir_at(dirfd, path, (struct dirent64 ***)list, (filter_fn)filter,
		               (cmp_fn)cmp, &handled);
		if (!handled && ds__resolve(dirfd, path, DS__RES_FOLLOW, &r) == 0 && !r.ours)
			return DS__REAL(scandirat)(r.rdirfd, r.rpath, list, filter, cmp);
	}
	return handled ? n : DS__REAL(scandirat)(dirfd, path, list, filter, cmp);
}

DS__EXPORT int DS__WRAP(scandirat64)(int dirfd, const char *path, struct dirent64 ***list,
                                     int (*filter)(const struct dirent64 *),
                                     int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	int handled = 0, n = 0;
	if (at_ours(dirfd, path)) {
		struct ds__res r;
		n = scandir_at(dirfd, path, list, filter, cmp, &handled);
		if (!handled && ds__resolve(dirfd, path, DS__RES_FOLLOW, &r) == 0 && !r.ours)
			return DS__REAL(scandirat64)(r.rdirfd, r.rpath, list, filter, cmp);
	}
	return handled ? n : DS__REAL(scandirat64)(dirfd, path, list, filter, cmp);
}

/* ---- getdents64 ------------------------------------------------------------ */
/* getdents64 on a staged directory descriptor (the libc function, or
 * syscall(SYS_getdents64): Go-style and hand-rolled directory readers): the
 * same records readdir gives, the position in the descriptor's offset,
 * shared by its dups as the kernel's is, so lseek(fd, 0, SEEK_SET) rewinds. */
DS__EXPORT ssize_t DS__WRAP(getdents64)(int fd, void *buf, size_t n)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f))
		return DS__REAL(getdents64) ? DS__REAL(getdents64)(fd, buf, n) : ds__fail(ENOSYS);
	ssize_t used = 0;
	int rc = 0;
	if (atomic_load(&f->flags) & O_PATH)
		rc = -EBADF;
	else if (f->kind != DS__F_DIR && f->kind != DS__F_VDIR)
		rc = -ENOTDIR;
	if (rc) {
		ds__file_put(f);
		return ds__fail(-rc);
	}
	struct ds__dir d = {0};
	struct dirent64 ent;
	pthread_mutex_lock(&f->lock); /* one reader of the position at a time */
	d.pos = (long)atomic_load(&f->off);
	for (;;) {
		long at = d.pos;
		rc = dir_next(&d, f, &ent);
		if (rc <= 0)
			break;
		if ((size_t)used + ent.d_reclen > n) {
			d.pos = at;
			rc = used ? 0 : -EINVAL; /* the kernel's answer for a buffer too small */
			break;
		}
		memcpy((char *)buf + used, &ent, ent.d_reclen);
		used += ent.d_reclen;
	}
	atomic_store(&f->off, (int64_t)d.pos);
	pthread_mutex_unlock(&f->lock);
	ds__file_put(f);
	if (rc < 0 && used == 0)
		return ds__fail(-rc);
	return used;
}
