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
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

enum ro_how { RO_CREATE, RO_REMOVE, RO_CHANGE, RO_CHANGE_NOFOLLOW };

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
static int ro(int dirfd, const char *path, enum ro_how how, struct ds_res *r)
{
	r->rdirfd = dirfd;
	r->rpath = path;
	r->out = 0;
	if (DS_LIKELY(!at_ours(dirfd, path)))
		return 1;
	int flags = how == RO_CHANGE ? DS_RES_FOLLOW : DS_RES_PARENT;
	int rc = ds__resolve(dirfd, path, flags, r);
	if (rc == 0 && !r->ours)
		return 1;
	switch (how) {
	case RO_CREATE:
		if (rc == -ENOENT && r->ours)
			return -EROFS;
		return rc ? rc : -EEXIST;
	case RO_REMOVE:
		if (rc == -ENOENT && r->ours)
			return -EROFS;
		return rc ? rc : -EROFS;
	default:
		return rc ? rc : -EROFS;
	}
}

/* outop: what a name in the outputs gets (write.c): 0 libc on the node's
 * file (chmod, utime, xattrs: local metadata), DS_OUT_* a request to the
 * service, DS_OUT_OP_DENY EPERM. */
#define RO_CALL_OUT(dirfd, path, how, outop, outarg, real_call)                        \
	do {                                                                            \
		struct ds_res r_;                                                       \
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
		struct ds_res r_;                                                       \
		int rc_ = ro(dirfd, path, how, &r_);                                    \
		if (rc_ == 1) {                                                         \
			int d_ = r_.rdirfd;                                             \
			const char *p_ = r_.rpath;                                      \
			(void)d_;                                                       \
			return real_call;                                               \
		}                                                                       \
		return ds__fail(-rc_);                                                  \
	} while (0)

DS_EXPORT int DS_WRAP(mkdir)(const char *path, mode_t m) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS_OUT_MKDIR, m, DS_REAL(mkdir)(p_, m)); }
DS_EXPORT int DS_WRAP(mkdirat)(int fd, const char *path, mode_t m) { RO_CALL_OUT(fd, path, RO_CREATE, DS_OUT_MKDIR, m, DS_REAL(mkdirat)(d_, p_, m)); }
DS_EXPORT int DS_WRAP(mknod)(const char *path, mode_t m, dev_t dev) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS_OUT_OP_DENY, 0, DS_REAL(mknod)(p_, m, dev)); }
DS_EXPORT int DS_WRAP(mknodat)(int fd, const char *path, mode_t m, dev_t dev) { RO_CALL_OUT(fd, path, RO_CREATE, DS_OUT_OP_DENY, 0, DS_REAL(mknodat)(d_, p_, m, dev)); }
DS_EXPORT int DS_WRAP(symlink)(const char *target, const char *path) { RO_CALL_OUT(AT_FDCWD, path, RO_CREATE, DS_OUT_OP_DENY, 0, DS_REAL(symlink)(target, p_)); }
DS_EXPORT int DS_WRAP(symlinkat)(const char *target, int fd, const char *path) { RO_CALL_OUT(fd, path, RO_CREATE, DS_OUT_OP_DENY, 0, DS_REAL(symlinkat)(target, d_, p_)); }
DS_EXPORT int DS_WRAP(unlink)(const char *path) { RO_CALL_OUT(AT_FDCWD, path, RO_REMOVE, DS_OUT_UNLINK, 0, DS_REAL(unlink)(p_)); }
DS_EXPORT int DS_WRAP(unlinkat)(int fd, const char *path, int fl)
{
	RO_CALL_OUT(fd, path, RO_REMOVE, (fl & AT_REMOVEDIR) ? DS_OUT_RMDIR : DS_OUT_UNLINK, 0, DS_REAL(unlinkat)(d_, p_, fl));
}
DS_EXPORT int DS_WRAP(rmdir)(const char *path) { RO_CALL_OUT(AT_FDCWD, path, RO_REMOVE, DS_OUT_RMDIR, 0, DS_REAL(rmdir)(p_)); }
DS_EXPORT int DS_WRAP(chmod)(const char *path, mode_t m) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(chmod)(p_, m)); }
DS_EXPORT int DS_WRAP(fchmodat)(int fd, const char *path, mode_t m, int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS_REAL(fchmodat)(d_, p_, m, fl));
}
DS_EXPORT int DS_WRAP(chown)(const char *path, uid_t u, gid_t g) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(chown)(p_, u, g)); }
DS_EXPORT int DS_WRAP(lchown)(const char *path, uid_t u, gid_t g) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS_REAL(lchown)(p_, u, g)); }
DS_EXPORT int DS_WRAP(fchownat)(int fd, const char *path, uid_t u, gid_t g, int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS_REAL(fchownat)(d_, p_, u, g, fl));
}
DS_EXPORT int DS_WRAP(truncate)(const char *path, off_t len) { RO_CALL_OUT(AT_FDCWD, path, RO_CHANGE, DS_OUT_OP_DENY, 0, DS_REAL(truncate)(p_, len)); }
DS_EXPORT int DS_WRAP(truncate64)(const char *path, off64_t len) { RO_CALL_OUT(AT_FDCWD, path, RO_CHANGE, DS_OUT_OP_DENY, 0, DS_REAL(truncate64)(p_, len)); }
DS_EXPORT int DS_WRAP(utime)(const char *path, const struct utimbuf *t) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(utime)(p_, t)); }
DS_EXPORT int DS_WRAP(utimes)(const char *path, const struct timeval t[2]) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(utimes)(p_, t)); }
DS_EXPORT int DS_WRAP(lutimes)(const char *path, const struct timeval t[2]) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS_REAL(lutimes)(p_, t)); }
DS_EXPORT int DS_WRAP(futimesat)(int fd, const char *path, const struct timeval t[2]) { RO_CALL(fd, path, RO_CHANGE, DS_REAL(futimesat)(d_, p_, t)); }
DS_EXPORT int DS_WRAP(utimensat)(int fd, const char *path, const struct timespec t[2], int fl)
{
	RO_CALL(fd, path, (fl & AT_SYMLINK_NOFOLLOW) ? RO_CHANGE_NOFOLLOW : RO_CHANGE, DS_REAL(utimensat)(d_, p_, t, fl));
}
DS_EXPORT int DS_WRAP(setxattr)(const char *path, const char *n, const void *v, size_t s, int fl)
{
	RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(setxattr)(p_, n, v, s, fl));
}
DS_EXPORT int DS_WRAP(lsetxattr)(const char *path, const char *n, const void *v, size_t s, int fl)
{
	RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS_REAL(lsetxattr)(p_, n, v, s, fl));
}
DS_EXPORT int DS_WRAP(removexattr)(const char *path, const char *n) { RO_CALL(AT_FDCWD, path, RO_CHANGE, DS_REAL(removexattr)(p_, n)); }
DS_EXPORT int DS_WRAP(lremovexattr)(const char *path, const char *n) { RO_CALL(AT_FDCWD, path, RO_CHANGE_NOFOLLOW, DS_REAL(lremovexattr)(p_, n)); }

/* Two names: both outside -> libc; both inside -> the dataset's answer for
 * the new name (after the old one resolved); one of each -> EXDEV. */
static int two_names(int ofd, const char *op, int nfd, const char *np, enum ro_how how_new,
                     struct ds_res *ro_, struct ds_res *rn)
{
	int a = ro(ofd, op, RO_REMOVE, ro_);
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
static int out_pair(const struct ds_res *a, const struct ds_res *b)
{
	if (DS_LIKELY(!a->out && !b->out))
		return 0;
	return a->out && b->out ? 1 : -EXDEV;
}

DS_EXPORT int DS_WRAP(rename)(const char *o, const char *n)
{
	struct ds_res a, b;
	int rc = two_names(AT_FDCWD, o, AT_FDCWD, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, 0);
	return rc == 1 ? DS_REAL(rename)(a.rpath, b.rpath) : ds__fail(-rc);
}

DS_EXPORT int DS_WRAP(renameat)(int ofd, const char *o, int nfd, const char *n)
{
	struct ds_res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, 0);
	return rc == 1 ? DS_REAL(renameat)(a.rdirfd, a.rpath, b.rdirfd, b.rpath) : ds__fail(-rc);
}

DS_EXPORT int DS_WRAP(renameat2)(int ofd, const char *o, int nfd, const char *n, unsigned fl)
{
	struct ds_res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_REMOVE, &a, &b);
	int op = rc == 1 ? out_pair(&a, &b) : 0;
	if (op)
		return op < 0 ? ds__fail(-op) : ds__out_rename(&a, &b, fl);
	return rc == 1 ? DS_REAL(renameat2)(a.rdirfd, a.rpath, b.rdirfd, b.rpath, fl) : ds__fail(-rc);
}

DS_EXPORT int DS_WRAP(link)(const char *o, const char *n)
{
	struct ds_res a, b;
	int rc = two_names(AT_FDCWD, o, AT_FDCWD, n, RO_CREATE, &a, &b);
	if (rc == 1 && out_pair(&a, &b))
		return ds__fail(out_pair(&a, &b) < 0 ? EXDEV : EPERM);
	return rc == 1 ? DS_REAL(link)(a.rpath, b.rpath) : ds__fail(-rc);
}

DS_EXPORT int DS_WRAP(linkat)(int ofd, const char *o, int nfd, const char *n, int fl)
{
	struct ds_res a, b;
	int rc = two_names(ofd, o, nfd, n, RO_CREATE, &a, &b);
	if (rc == 1 && out_pair(&a, &b))
		return ds__fail(out_pair(&a, &b) < 0 ? EXDEV : EPERM);
	return rc == 1 ? DS_REAL(linkat)(a.rdirfd, a.rpath, b.rdirfd, b.rpath, fl) : ds__fail(-rc);
}

/* ---- files made relative to the cwd by libc itself -----------------------
 * glibc's mkstemp family, mkdtemp and mkfifo reach the kernel through its
 * internal aliases of open, mkdir and mknod, never through ours: after a
 * chdir into the mount their relative names would land in the cwd shadow
 * (cwd.c).  They are wrapped here: a name whose directory is in the mount is
 * EROFS (`sed -i`, `perl -i`, mktemp in a staged directory); a name that
 * leads out of the mount goes to libc, rewritten to the real directory. */

/* 1 with *use the template libc must fill (tmpl itself, or buf holding the
 * rewritten name), or -errno. */
static int tmpl_check(char *tmpl, int suffixlen, char *buf, char **use)
{
	*use = tmpl;
	if (DS_LIKELY(!ds__maybe_ours(tmpl)))
		return 1;
	size_t len = strlen(tmpl);
	/* libc's own check comes first, as without the shim */
	if (suffixlen < 0 || len < 6 + (size_t)suffixlen ||
	    memcmp(tmpl + len - suffixlen - 6, "XXXXXX", 6))
		return -EINVAL;
	struct ds_res r;
	int rc = ds__resolve(AT_FDCWD, tmpl, DS_RES_PARENT, &r);
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

#define TMPL_CALL(tmpl, suffixlen, real_call)                                           \
	do {                                                                            \
		char buf_[PATH_MAX], *u_;                                               \
		int rc_ = tmpl_check(tmpl, suffixlen, buf_, &u_);                       \
		if (rc_ != 1)                                                           \
			return ds__fail(-rc_);                                          \
		int fd_ = real_call;                                                    \
		if (fd_ >= 0)                                                           \
			tmpl_back(tmpl, u_, suffixlen);                                 \
		return fd_;                                                             \
	} while (0)

DS_EXPORT int DS_WRAP(mkstemp)(char *t) { TMPL_CALL(t, 0, DS_REAL(mkstemp)(u_)); }
DS_EXPORT int DS_WRAP(mkstemp64)(char *t) { TMPL_CALL(t, 0, DS_REAL(mkstemp64)(u_)); }
DS_EXPORT int DS_WRAP(mkostemp)(char *t, int fl) { TMPL_CALL(t, 0, DS_REAL(mkostemp)(u_, fl)); }
DS_EXPORT int DS_WRAP(mkostemp64)(char *t, int fl) { TMPL_CALL(t, 0, DS_REAL(mkostemp64)(u_, fl)); }
DS_EXPORT int DS_WRAP(mkstemps)(char *t, int sl) { TMPL_CALL(t, sl, DS_REAL(mkstemps)(u_, sl)); }
DS_EXPORT int DS_WRAP(mkstemps64)(char *t, int sl) { TMPL_CALL(t, sl, DS_REAL(mkstemps64)(u_, sl)); }
DS_EXPORT int DS_WRAP(mkostemps)(char *t, int sl, int fl) { TMPL_CALL(t, sl, DS_REAL(mkostemps)(u_, sl, fl)); }
DS_EXPORT int DS_WRAP(mkostemps64)(char *t, int sl, int fl) { TMPL_CALL(t, sl, DS_REAL(mkostemps64)(u_, sl, fl)); }

DS_EXPORT char *DS_WRAP(mkdtemp)(char *t)
{
	char buf[PATH_MAX], *u;
	int rc = tmpl_check(t, 0, buf, &u);
	if (rc != 1) {
		errno = -rc;
		return NULL;
	}
	if (!DS_REAL(mkdtemp)(u))
		return NULL;
	tmpl_back(t, u, 0);
	return t;
}

DS_EXPORT int DS_WRAP(mkfifo)(const char *path, mode_t m)
{
	if (DS_LIKELY(!at_ours(AT_FDCWD, path)))
		return DS_REAL(mkfifo)(path, m);
	return DS_WRAP(mknodat)(AT_FDCWD, path, S_IFIFO | (m & 07777), 0);
}

DS_EXPORT int DS_WRAP(mkfifoat)(int fd, const char *path, mode_t m)
{
	if (DS_LIKELY(!at_ours(fd, path)))
		return DS_REAL(mkfifoat)(fd, path, m);
	return DS_WRAP(mknodat)(fd, path, S_IFIFO | (m & 07777), 0);
}
