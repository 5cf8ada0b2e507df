/* SPDX-License-Identifier: BSD-3-Clause */
/* cwd.c: the working directory inside the mount, and canonical names.
 *
 * The mount does not exist for the kernel, so a cwd inside it is emulated:
 * chdir into the tree records the directory's entry (ds__cwd) and relative
 * paths resolve from it; getcwd reports its name under the mount.
 *
 * The kernel's cwd meanwhile moves to a shadow of that directory, an empty
 * real directory DSTAGE_STORE/cwd/<entry id> (made on demand, in a 0700
 * directory private to the user like the store).  That carries the emulated
 * cwd across exec whatever environment the launcher passes (a shell's
 * `cd /dstage/x && ls`): a new process whose real cwd is a shadow starts in
 * its directory (ds__cwd_inherit).  Anything that escapes the shim with a
 * relative name finds an empty directory, not somebody else's files, and
 * cannot create anything there: the shadow is made 0500, so even a raw
 * creat/mkdir/mknod system call fails with EACCES (root is not held back by
 * modes: for root a raw call can still create a file in the shadow; the libc
 * functions that create files relative to the cwd internally, mkstemp and
 * friends, are wrapped in rofs.c and fail with EROFS for everybody).  The
 * shadows are flat (one per entry id, not a mirror of the tree) so that none
 * has to be writable to hold another.  Leaving the tree (chdir or fchdir to
 * a real directory) ends the emulation. */
#include "shim.h"

#include <fcntl.h>
#include <unistd.h>

#define SHADOW DS_CWD_NAME

static pthread_mutex_t cwd_lock = PTHREAD_MUTEX_INITIALIZER;

/* Make the shadow of directory id (under cwd_lock): its name in shadow. */
static int make_shadow(int64_t id, char *shadow, size_t size)
{
	int n = snprintf(shadow, size, "%s/" SHADOW, ds__g.jobdir);
	ds__busy++; /* mkdir of the shadow: libc's, not ours */
	int rc = ds_mkdir_p(shadow, 0700);
	snprintf(shadow + n, size - n, "/%lld", (long long)id);
	if (rc == 0 && DS__REAL(mkdir)(shadow, 0500) < 0 && errno != EEXIST)
		rc = -errno;
	ds__busy--;
	return rc;
}

int ds__cwd_shadow(int64_t id, char *shadow, size_t size)
{
	pthread_mutex_lock(&cwd_lock);
	int rc = make_shadow(id, shadow, size);
	pthread_mutex_unlock(&cwd_lock);
	return rc;
}

/* Enter directory id of the tree (caller checked it is one). */
static int enter(int64_t id)
{
	char shadow[PATH_MAX + 32], name[PATH_MAX];
	/* the shadow's name is a number, but getcwd will report the entry's
	 * name: one a damaged index made unsafe ("..", "/") is EIO */
	int nl = id ? ds_ix_path(&ds__g.ix, (uint32_t)id, name, sizeof(name)) : 0;
	if (id && (nl < 0 || ds_name_check(name, (size_t)nl, NULL)))
		return -EIO;
	pthread_mutex_lock(&cwd_lock);
	int rc = make_shadow(id, shadow, sizeof(shadow));
	ds__busy++; /* chdir of the shadow: libc's, not ours */
	if (rc == 0 && DS__REAL(chdir)(shadow) < 0)
		rc = -errno;
	if (rc && DS__REAL(chdir)("/") == 0)
		rc = 0; /* no shadow (read-only store?): cwd "/", no inheritance */
	ds__busy--;
	if (rc == 0)
		atomic_store(&ds__cwd, id);
	pthread_mutex_unlock(&cwd_lock);
	return rc;
}

/* A real chdir succeeded: the emulation ends. */
static void leave(void)
{
	atomic_store(&ds__cwd, -1);
	ds__rcwd_invalidate();
}

void ds__cwd_inherit(void)
{
	char real[PATH_MAX], prefix[PATH_MAX + 8];
	int n = snprintf(prefix, sizeof(prefix), "%s/" SHADOW, ds__g.jobdir);
	if (!DS__REAL(getcwd)(real, sizeof(real)) || strncmp(real, prefix, n) ||
	    (real[n] != '/' && real[n] != 0))
		return;
	uint64_t id;
	if (real[n] != '/' || ds_parse_u64(real + n + 1, &id) ||
	    !ds_index_entry_ok(&ds__g.ix, id) || !S_ISDIR(ds_ix_mode(&ds__g.ix, (uint32_t)id)))
		return;
	atomic_store(&ds__cwd, (int64_t)id);
}

static int chdir_res(const struct ds__res *r)
{
	struct stat st;
	ds__stat_res(r, &st);
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (r->v.kind != DS__V_NONE)
		return -ENOTSUP; /* the virtual tree is for open, not for living in */
	if (ds__perm(&st, X_OK))
		return -EACCES;
	return enter(r->id);
}

DS__EXPORT int DS__WRAP(chdir)(const char *path)
{
	if (DS__LIKELY(!ds__maybe_ours(path))) {
		int rc = DS__REAL(chdir)(path);
		if (rc == 0)
			leave();
		return rc;
	}
	struct ds__res r;
	int rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r);
	if (rc)
		return ds__fail(-rc);
	if (!r.ours) {
		rc = DS__REAL(chdir)(r.rpath);
		if (rc == 0)
			leave();
		if (rc == 0 && r.out)
			ds__out_chdir();
		return rc;
	}
	rc = chdir_res(&r);
	return rc ? ds__fail(-rc) : 0;
}

DS__EXPORT int DS__WRAP(fchdir)(int fd)
{
	ds__ensure_init();
	struct ds__file *f = ds__fd_get(fd);
	if (DS__LIKELY(!f)) {
		int rc = DS__REAL(fchdir)(fd);
		if (rc == 0)
			leave();
		if (rc == 0 && ds__out_dirfd(fd))
			ds__out_chdir();
		return rc;
	}
	struct ds__res r;
	r.ours = 1;
	r.id = f->id;
	r.v = f->v;
	ds__file_put(f);
	int rc = chdir_res(&r);
	return rc ? ds__fail(-rc) : 0;
}

/* getcwd with glibc's conventions: buf NULL allocates (size bytes, or as
 * many as needed when size is 0). */
static char *cwd_name(char *buf, size_t size)
{
	char abs[PATH_MAX];
	int64_t id = atomic_load(&ds__cwd);
	int n = ds__abs_name(id, NULL, abs, sizeof(abs));
	if (n < 0) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (!buf) {
		size_t want = size ? size : (size_t)n + 1;
		if (want < (size_t)n + 1) {
			errno = ERANGE;
			return NULL;
		}
		buf = malloc(want);
		if (!buf) {
			errno = ENOMEM;
			return NULL;
		}
	} else if (size == 0) {
		errno = EINVAL;
		return NULL;
	} else if (size < (size_t)n + 1) {
		errno = ERANGE;
		return NULL;
	}
	memcpy(buf, abs, n + 1);
	return buf;
}

DS__EXPORT char *DS__WRAP(getcwd)(char *buf, size_t size)
{
	ds__ensure_init();
	if (DS__LIKELY(atomic_load_explicit(&ds__cwd, memory_order_relaxed) < 0))
		return DS__REAL(getcwd)(buf, size);
	return cwd_name(buf, size);
}

DS__EXPORT char *DS__WRAP(__getcwd_chk)(char *buf, size_t size, size_t buflen)
{
	if (size > buflen)
		return DS__REAL(__getcwd_chk)(buf, size, buflen);
	return DS__WRAP(getcwd)(buf, size);
}

DS__EXPORT char *DS__WRAP(get_current_dir_name)(void)
{
	ds__ensure_init();
	if (DS__LIKELY(atomic_load_explicit(&ds__cwd, memory_order_relaxed) < 0))
		return DS__REAL(get_current_dir_name)();
	return cwd_name(NULL, 0);
}

/* ---- realpath ------------------------------------------------------------ */
/* glibc's realpath calls its internal lstat and readlink, never ours: the
 * whole function is done here for paths of ours. */
static char *real_path(const char *path, char *resolved, int *handled)
{
	struct ds__res r;
	*handled = 0;
	if (!path) {
		errno = EINVAL;
		*handled = 1;
		return NULL;
	}
	if (DS__LIKELY(!ds__maybe_ours(path)))
		return NULL;
	*handled = 1;
	int rc = ds__resolve(AT_FDCWD, path, DS__RES_FOLLOW, &r);
	if (rc) {
		errno = -rc;
		return NULL;
	}
	if (!r.ours) {
		char *p = DS__REAL(realpath)(r.rpath, resolved);
		return p;
	}
	char abs[PATH_MAX];
	if (ds__abs_name(r.id, &r.v, abs, sizeof(abs)) < 0) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	if (!resolved) {
		resolved = strdup(abs);
		if (!resolved)
			errno = ENOMEM;
		return resolved;
	}
	strcpy(resolved, abs);
	return resolved;
}

DS__EXPORT char *DS__WRAP(realpath)(const char *path, char *resolved)
{
	int handled;
	char *p = real_path(path, resolved, &handled);
	return handled ? p : DS__REAL(realpath)(path, resolved);
}

DS__EXPORT char *DS__WRAP(__realpath_chk)(const char *path, char *resolved, size_t len)
{
	if (len < PATH_MAX)
		return DS__REAL(__realpath_chk)(path, resolved, len);
	int handled;
	char *p = real_path(path, resolved, &handled);
	return handled ? p : DS__REAL(__realpath_chk)(path, resolved, len);
}

DS__EXPORT char *DS__WRAP(canonicalize_file_name)(const char *path)
{
	int handled;
	char *p = real_path(path, NULL, &handled);
	return handled ? p : DS__REAL(canonicalize_file_name)(path);
}
