/* SPDX-License-Identifier: BSD-3-Clause */
/* rofs.c: the dataset is read-only.  Every call that would change it fails
 * the way the kernel fails it on a read-only mount, errno for errno:
 *
 *   create   mkdir, symlink, mknod, link's new name: EEXIST when the name
 *            exists, else EROFS (the parent must exist: ENOENT, ENOTDIR)
 *   remove   unlink, rmdir, rename: EROFS once the parent resolves (the
 *            kernel asks for write access before looking at the name)
 *   change   chmod, chown, truncate, utime*, setxattr, removexattr: the
 *            entry must exist, then EROFS
 *
 * A rename or link between the dataset and a real file system is EXDEV. */
#include "shim.h"
#include "dsout.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

/* RO_REMOVE: a rename's names; RO_UNLINK, RO_RMDIR: the two removals */
enum ro_how {
	RO_CREATE,
	RO_REMOVE,
	RO_UNLINK,
	RO_RMDIR,
	RO_CHANGE,
	RO_CHANGE_NOFOLLOW,
	RO_TRUNCATE
};

static int at_ours(int dirfd, const char *path)
{
	ds__ensure_init();
	if (!path)
		return 0;
	if (path[0] != '/' && dirfd != AT_FDCWD)
		return ds__at_maybe_ours(dirfd, path);
	return ds__maybe_ours(path);
}

/* 1: not ours, libc must do it with (r->rdirfd, r->rpath); else -errno. */
static int ro(int dirfd, const char *path, enum ro_how how, struct ds__res *r)
{
	r->rdirfd = dirfd;
	r->rpath = path;
	r->out = 0;
	if (DS__LIKELY(!at_ours(dirfd, path)))
		return 1;
	int flags = how == RO_CHANGE || how == RO_TRUNCATE ? DS__RES_FOLLOW : DS__RES_PARENT;
	int rc = ds__resolve(dirfd, path, flags, r);
	if (rc == 0 && !r->ours)
		return 1;
	switch (how) {
	case RO_CREATE:
		if (rc == -ENOENT && r->ours)
			return -EROFS;
		return rc ? rc : -EEXIST;
	case RO_REMOVE:
	case RO_UNLINK:
	case RO_RMDIR:
		if (rc == -ENOENT && r->ours)
			return -EROFS;
		/* the mount point itself: its parent is not in the mount, and
		 * the kernel says what it says of a mount point there: a
		 * directory, busy, another mount */
		if (rc == 0 && r->ours && r->id == 0 && r->v.kind == DS__V_NONE)
			return how == RO_UNLINK ? -EISDIR : how == RO_RMDIR ? -EBUSY : -EXDEV;
		return rc ? rc : -EROFS;
	case RO_TRUNCATE: /* the kernel's order: a directory is EISDIR first */
		if (rc == 0 &&
		    (r->v.kind == DS__V_NONE ? S_ISDIR(ds_ix_mode(&ds__g.ix, (uint32_t)r->id))
		                             : r->v.kind != DS__V_LIST))
			return -EISDIR;
		return rc ? rc : -EROFS;
	default:
		return rc ? rc : -EROFS;
	}
}

/* outop: what a name in the outputs gets (write.c): 0 libc on the node's
 * file (chmod, utime, xattrs: local metadata), DS_OUT_* a request to the
 * service, DS__OUT_OP_DENY EPERM. */
#define RO_CALL_OUT(dirfd, path, how, outop, outarg, real_call)                         \
	do {                                                                            \
		struct ds__res r_;                                                      \
		int rc_ = ro(dirfd, path, how, &r_);                                    \
		if (rc_ == 1 && r_.out && (outop) != 0)                                 \
			return ds__out_path_op((outop), &r_, (outarg));                 \
		if (rc_ == 1) {                                                         \
			int d_ = r_.rdirfd;                                             \
			const char *p_ = r_.rpath;                                      \
			(void)d_;                                                       \
			return real_call;                                               \
		}                                                                       \
		return ds__fail(-rc_);                                                  \
	} while (0)
#define RO_CALL(dirfd, path, how, real_call)                                            \
	do {                                                                            \
		struct ds__res r_;                                                      \
		int rc_ = ro(dirfd, path, how, &r_);                                    \
		if (rc_ == 1) {                                                         \
			int d_ = r_.rdirfd;                                             \
			const char *p_ = r_.rpath;                                      \
			(void)d_;                                                       \
			return real_call;                                               \
		}                                                                       \
		return ds__fail(-rc_);                                                  \
	} while (0)

DS__EXPORT int DS__WRAP(mkdir)(const char *path, mode_t m) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS_OUT_MKDIR, m, DS__REAL(mkdir)(p_, m)); }
DS__EXPORT int DS__WRAP(mkdirat)(int fd, const char *path, mode_t m) { RO_CALL_OUT(fd, path, RO_CREATE, DS_OUT_MKDIR, m, DS__REAL(mkdirat)(d_, p_, m)); }
DS__EXPORT int DS__WRAP(mknod)(const char *path, mode_t m, dev_t dev) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS__OUT_OP_DENY, 0, DS__REAL(mknod)(p_, m, dev)); }
DS__EXPORT int DS__WRAP(mknodat)(int fd, const char *path, mode_t m, dev_t dev) { RO_CALL_OUT(fd, path, RO_CREATE, DS__OUT_OP_DENY, 0, DS__REAL(mknodat)(d_, p_, m, dev)); }
DS__EXPORT int DS__WRAP(symlink)(const char *target, const char *path) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS__OUT_OP_DENY, 0, DS__REAL(symlink)(target, p_)); }
DS__EXPORT int DS__WRAP(symlinkat)(const char *target, int fd, const char *path) { RO_CALL_OUT(fd, path, RO_CREATE, DS__OUT_OP_DENY, 0, DS__REAL(symlinkat)(target, d_, p_)); }
DS__EXPORT int DS__WRAP(unlink)(const char *path)
{
	RO_CALL_OUT(AT_FDCWD, path, RO_UNLINK, DS_OUT_UNLINK, 0, DS__REAL(unlink)(p_));
}
DS__EXPORT int DS__WRAP(unlinkat)(int fd, const char *path, int fl)
{
	RO_CALL_OUT(fd, path, (fl & AT_REMOVEDIR) ? RO_RMDIR : RO_UNLINK,
	            (fl & AT_REMOVEDIR) ? DS_OUT_RMDIR : DS_OUT_UNLINK, 0,
	            DS__REAL(unlinkat)(d_, p_, fl));
}
DS__EXPORT int DS__WRAP(rmdir)(const char *path)
{
	RO_CALL_OUT(AT_FDCWD, path, RO_RMDIR, DS_OUT_RMDIR, 0, DS__REAL(rmdir)(p_));
}
DS__EXPORT int DS__WRAP(chmod)(const char *path, mode_t m) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(chmod)(p_, m)); }
DS__EXPORT int DS__WRAP(fchmodat)(int fd, const char *path, mode_t m, int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS__REAL(fchmodat)(d_, p_, m, fl));
}
DS__EXPORT int DS__WRAP(chown)(const char *path, uid_t u, gid_t g) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(chown)(p_, u, g)); }
DS__EXPORT int DS__WRAP(lchown)(const char *path, uid_t u, gid_t g) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS__REAL(lchown)(p_, u, g)); }
DS__EXPORT int DS__WRAP(fchownat)(int fd, const char *path, uid_t u, gid_t g, int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS__REAL(fchownat)(d_, p_, u, g, fl));
}
DS__EXPORT int DS__WRAP(truncate)(const char *path, off_t len)
{
	RO_CALL_OUT(AT_FDCWD, path, RO_TRUNCATE, DS__OUT_OP_DENY, 0, DS__REAL(truncate)(p_, len));
}
DS__EXPORT int DS__WRAP(truncate64)(const char *path, off64_t len)
{
	RO_CALL_OUT(AT_FDCWD, path, RO_TRUNCATE, DS__OUT_OP_DENY, 0, DS__REAL(truncate64)(p_, len));
}
DS__EXPORT int DS__WRAP(utime)(const char *path, const struct utimbuf *t) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(utime)(p_, t)); }
DS__EXPORT int DS__WRAP(utimes)(const char *path, const struct timeval t[2]) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(utimes)(p_, t)); }
DS__EXPORT int DS__WRAP(lutimes)(const char *path, const struct timeval t[2]) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS__REAL(lutimes)(p_, t)); }
DS__EXPORT int DS__WRAP(futimesat)(int fd, const char *path, const struct timeval t[2]) { RO_CALL(fd, path, RO_CHANGE, DS__REAL(futimesat)(d_, p_, t)); }
DS__EXPORT int DS__WRAP(utimensat)(int fd, const char *path, const struct timespec t[2], int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS__REAL(utimensat)(d_, p_, t, fl));
}
DS__EXPORT int DS__WRAP(setxattr)(const char *path, const char *n, const void *v, size_t s, int fl)
{
	RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(setxattr)(p_, n, v, s, fl));
}
DS__EXPORT int DS__WRAP(lsetxattr)(const char *path, const char *n, const void *v, size_t s, int fl)
{
	RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS__REAL(lsetxattr)(p_, n, v, s, fl));
}
DS__EXPORT int DS__WRAP(removexattr)(const char *path, const char *n) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS__REAL(removexattr)(p_, n)); }
DS__EXPORT int DS__WRAP(lremovexattr)(const char *path, const char *n) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS__REAL(lremovexattr)(p_, n)); }

/* Two names: both outside -> libc; both inside -> the dataset's answer for
 * the new name (after the old one resolved); one of each -> EXDEV.  The old
 * name of a rename may be missing (the kernel says EROFS before it looks);
 * a link's must exist (it looks first: ENOENT). */
static int two_names(int ofd, const char *op, int nfd, const char *np, enum ro_how how_new,
                     struct ds__res *ro_, struct ds__res *rn)
{
	int a = ro(ofd, op, how_new == RO_CREATE ? RO_CHANGE_NOFOLLOW : RO_REMOVE, ro_);
	int b = ro(nfd, np, how_new, rn);
	if (a == 1 && b == 1)
		return 1;
	if (a != 1 && a != -EROFS)
		return a; /* the old name does not resolve */
	if (a == 1 || b == 1)
		return -EXDEV;
	return b;
}

/* Names in the outputs (write.c): a rename within them goes to the service,
 * across their border it is EXDEV (mv copies), links are refused. */
static int out_pair(const struct ds__res *a, const struct ds__res *b)
{
	if (DS__LIKELY(!a->out && !b->out))
		return 0;
	return a->out && b->out ? 1 : -EXDEV;
}

DS__EXPORT int DS__WRAP(rename)(const char *o, const char *n)
{
	struct ds__res a, b;
	int rc = two_names(AT_FDCWD, o, AT_FDCWD, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, 0);
	return rc == 1 ? DS__REAL(rename)(a.rpath, b.rpath) : ds__fail(-rc);
}

DS__EXPORT int DS__WRAP(renameat)(int ofd, const char *o, int nfd, const char *n)
{
	struct ds__res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, 0);
	return rc == 1 ? DS__REAL(renameat)(a.rdirfd, a.rpath, b.rdirfd, b.rpath) : ds__fail(-rc);
}

DS__EXPORT int DS__WRAP(renameat2)(int ofd, const char *o, int nfd, const char *n, unsigned fl)
{
	struct ds__res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, fl);
	return rc == 1 ? DS__REAL(renameat2)(a.rdirfd, a.rpath, b.rdirfd, b.rpath, fl) : ds__fail(-rc);
}

DS__EXPORT int DS__WRAP(link)(const char *o, const char *n)
{
	struct ds__res a, b;
	int rc = two_names(AT_FDCWD, o, AT_FDCWD, n, RO_CREATE, &a, &b);
	if (rc == 1 && out_pair(&a, &b))
		return ds__fail(out_pair(&a, &b) < 0 ? EXDEV : EPERM);
	return rc == 1 ? DS__REAL(link)(a.rpath, b.rpath) : ds__fail(-rc);
}

DS__EXPORT int DS__WRAP(linkat)(int ofd, const char *o, int nfd, const char *n, int fl)
{
	struct ds__res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_CREATE, &a, &b);
	if (rc == 1 && out_pair(&a, &b))
		return ds__fail(out_pair(&a, &b) < 0 ? EXDEV : EPERM);
	return rc == 1 ? DS__REAL(linkat)(a.rdirfd, a.rpath, b.rdirfd, b.rpath, fl) : ds__fail(-rc);
}

/* ---- files made relative to the cwd by libc itself -----------------------
 * glibc's mkstemp family, mkdtemp and mkfifo reach the kernel through its
 * internal aliases of open, mkdir and mknod, never through ours: after a
 * chdir into the mount their relative names would land in the cwd shadow
 * (cwd.c), and a name in the outputs would be made by libc in this node's
 * AREA/ns behind the service (on one node only, never drained).  They are
 * wrapped here: a name whose directory is in the dataset is EROFS (`sed
 * -i`, `perl -i`, mktemp in a staged directory); in the outputs the name is
 * made here and created through our open/mkdir, O_EXCL, like any output
 * (docs/outputs.md); a name that leads out of the mount goes to libc,
 * rewritten to the real directory. */

/* 1 with *use the template libc must fill (tmpl itself, or buf holding the
 * rewritten name), 2 when its directory is in the outputs, or -errno. */
static int tmpl_check(char *tmpl, int suffixlen, char *buf, char **use)
{
	*use = tmpl;
	if (DS__LIKELY(!ds__maybe_ours(tmpl)))
		return 1;
	size_t len = strlen(tmpl);
	/* libc's own check comes first, as without the shim */
	if (suffixlen < 0 || len < 6 + (size_t)suffixlen ||
	    memcmp(tmpl + len - suffixlen - 6, "XXXXXX", 6))
		return -EINVAL;
	struct ds__res r;
	int rc = ds__resolve(AT_FDCWD, tmpl, DS__RES_PARENT, &r);
	if (rc == 0 && r.out)
		return 2;
	if (rc == 0 && !r.ours) {
		if (r.rpath != tmpl) {
			size_t rl = strlen(r.rpath);
			if (rl >= PATH_MAX)
				return -ENAMETOOLONG;
			memmove(buf, r.rpath, rl + 1);
			*use = buf;
		}
		return 1;
	}
	if (rc == 0 || (rc == -ENOENT && r.ours))
		return -EROFS; /* its directory is staged: nothing can be made there */
	return rc;
}

/* libc filled *use: give the caller its name (the tail libc changed). */
static void tmpl_back(char *tmpl, const char *use, int suffixlen)
{
	if (use == tmpl)
		return;
	size_t tl = strlen(tmpl), ul = strlen(use), k = 6 + (size_t)suffixlen;
	memcpy(tmpl + tl - k, use + ul - k, k);
}

/* A temporary name in the outputs, made the way glibc's __gen_tempname
 * makes it (62 letters and digits in the six Xs, tried until one is free,
 * O_EXCL), created through our open or mkdir: the service takes it like any
 * other create, so the file is seen by every node, drained, and renamed into
 * place through the service (the checkpoint idiom, `sed -i`).  The fd (or 0
 * for a directory), or -1 with errno. */
static int tmpl_out(char *tmpl, int suffixlen, int flags, int dir)
{
	static const char letters[] =
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static _Atomic uint64_t ctr;
	char *x = tmpl + strlen(tmpl) - suffixlen - 6;
	int e0 = errno;
	for (unsigned tries = 0; tries < 62u * 62u * 62u; tries++) {
		uint64_t v;
		if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
			struct timespec ts;
			clock_gettime(CLOCK_MONOTONIC, &ts);
			v = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^
			    ((uint64_t)getpid() << 40) ^
			    atomic_fetch_add(&ctr, 0x9e3779b97f4a7c15ull);
			v *= 0xff51afd7ed558ccdull;
			v ^= v >> 33;
		}
		for (int i = 0; i < 6; i++, v /= 62)
			x[i] = letters[v % 62];
		int rc, fl = (flags & ~O_ACCMODE) | O_RDWR | O_CREAT | O_EXCL;
		if (dir)
			rc = DS__WRAP(mkdir)(tmpl, 0700);
		else
			rc = DS__WRAP(open)(tmpl, fl, 0600);
		if (rc >= 0) {
			errno = e0;
			return rc;
		}
		if (errno != EEXIST)
			return -1;
	}
	errno = EEXIST;
	return -1;
}

#define TMPL_CALL(tmpl, suffixlen, real_call, flags)                                               \
	do {                                                                                       \
		char buf_[PATH_MAX], *u_;                                                          \
		int rc_ = tmpl_check(tmpl, suffixlen, buf_, &u_);                                  \
		if (rc_ == 2)                                                                      \
			return tmpl_out(tmpl, suffixlen, flags, 0);                                \
		if (rc_ != 1)                                                                      \
			return ds__fail(-rc_);                                                     \
		int fd_ = real_call;                                                               \
		if (fd_ >= 0)                                                                      \
			tmpl_back(tmpl, u_, suffixlen);                                            \
		return fd_;                                                                        \
	} while (0)

DS__EXPORT int DS__WRAP(mkstemp)(char *t) { TMPL_CALL(t, 0, DS__REAL(mkstemp)(u_), 0); }
DS__EXPORT int DS__WRAP(mkstemp64)(char *t) { TMPL_CALL(t, 0, DS__REAL(mkstemp64)(u_), 0); }
DS__EXPORT int DS__WRAP(mkostemp)(char *t, int fl)
{
	TMPL_CALL(t, 0, DS__REAL(mkostemp)(u_, fl), fl);
}
DS__EXPORT int DS__WRAP(mkostemp64)(char *t, int fl)
{
	TMPL_CALL(t, 0, DS__REAL(mkostemp64)(u_, fl), fl);
}
DS__EXPORT int DS__WRAP(mkstemps)(char *t, int sl)
{
	TMPL_CALL(t, sl, DS__REAL(mkstemps)(u_, sl), 0);
}
DS__EXPORT int DS__WRAP(mkstemps64)(char *t, int sl)
{
	TMPL_CALL(t, sl, DS__REAL(mkstemps64)(u_, sl), 0);
}
DS__EXPORT int DS__WRAP(mkostemps)(char *t, int sl, int fl)
{
	TMPL_CALL(t, sl, DS__REAL(mkostemps)(u_, sl, fl), fl);
}
DS__EXPORT int DS__WRAP(mkostemps64)(char *t, int sl, int fl)
{
	TMPL_CALL(t, sl, DS__REAL(mkostemps64)(u_, sl, fl), fl);
}

DS__EXPORT char *DS__WRAP(mkdtemp)(char *t)
{
	char buf[PATH_MAX], *u;
	int rc = tmpl_check(t, 0, buf, &u);
	if (rc == 2)
		return tmpl_out(t, 0, 0, 1) < 0 ? NULL : t;
	if (rc != 1) {
		errno = -rc;
		return NULL;
	}
	if (!DS__REAL(mkdtemp)(u))
		return NULL;
	tmpl_back(t, u, 0);
	return t;
}

DS__EXPORT int DS__WRAP(mkfifo)(const char *path, mode_t m)
{
	if (DS__LIKELY(!at_ours(AT_FDCWD, path)))
		return DS__REAL(mkfifo)(path, m);
	return DS__WRAP(mknodat)(AT_FDCWD, path, S_IFIFO | (m & 07777), 0);
}

DS__EXPORT int DS__WRAP(mkfifoat)(int fd, const char *path, mode_t m)
{
	if (DS__LIKELY(!at_ours(fd, path)))
		return DS__REAL(mkfifoat)(fd, path, m);
	return DS__WRAP(mknodat)(fd, path, S_IFIFO | (m & 07777), 0);
}
