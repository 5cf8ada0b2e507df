/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-first: call one wrapped libc function by name as the first call of
 * a fresh process (t/2100).
 *
 *   shim-first --list               the names it can call, one a line
 *   shim-first --run ROOT REL...    for every name read from stdin and every
 *                                   REL ("" is ROOT itself): a fresh process
 *                                   (fork + exec of itself) makes the call
 *                                   on ROOT/REL; one line each on stdout
 *   shim-first --run-rel ROOT REL...   the same with names relative to
 *                                   ROOT's parent, from there: "base/REL"
 *   shim-first --run-at ROOT REL...    as --run-rel, the *at calls with a
 *                                   real descriptor of ROOT's parent
 *   shim-first --call NAME ROOT PATH   the call itself (what --run execs)
 *
 * Each function is looked up by its name in the process (dlsym: the shim's
 * wrapper when it is preloaded, else libc's; dlvsym for the old ABI's
 * __xstat family), with the prototype io/wrap.h gives it, so the call is
 * exactly the one a program makes.  A call on a path is the first thing the
 * process does.  A call on a descriptor gets it from the parent, open on the
 * path across exec (descriptor 3): the process starts with it and the call
 * is again its first.  A call on a DIR or FILE stream follows the opendir or
 * fopen that makes the stream.  What is printed never depends on where the
 * tree is: ROOT in a name reads "@", no descriptor numbers, no st_dev,
 * st_ino, atime, ctime; statfs and dlopen results only as success or errno
 * (a staged tree is its own file system; the loader's message names the
 * cache). */
#undef _FILE_OFFSET_BITS
#include "../../io/wrap.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

static struct ds__real R;
/* the directory descriptor of the *at calls: AT_FDCWD, or (--run-at) a real
 * descriptor of the directory the names are relative to */
static int dfd = AT_FDCWD;
#define DFD dfd
static const char *root;
static size_t rootlen;

#define LOOK(ret, name, params) #name,
static const char *const all_names[] = {DS__REAL_FUNCS(LOOK)};
#undef LOOK

static void *find(const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f)
		f = dlvsym(RTLD_DEFAULT, name, "GLIBC_2.2.5");
	return f;
}

/* ---- printing ------------------------------------------------------------- */
static void put_text(const char *s, size_t n)
{
	putchar('"');
	for (size_t i = 0; i < n; i++) {
		if (rootlen && i + rootlen <= n && !memcmp(s + i, root, rootlen) &&
		    (i + rootlen == n || s[i + rootlen] == '/' || s[i + rootlen] == '"')) {
			putchar('@');
			i += rootlen - 1;
			continue;
		}
		unsigned char c = (unsigned char)s[i];
		if (c >= 32 && c < 127 && c != '"' && c != '\\')
			putchar(c);
		else
			printf("\\x%02x", c);
	}
	putchar('"');
}

static void put_err(long rc, int e)
{
	if (rc < 0)
		printf(" err=%s", strerrorname_np(e) ? strerrorname_np(e) : "?");
}

static void put_stat(const struct stat *st)
{
	printf(" mode=%o size=%lld nlink=%lu uid=%u gid=%u blocks=%lld blksize=%ld mtime=%lld.%09ld",
	       (unsigned)st->st_mode, (long long)st->st_size, (unsigned long)st->st_nlink,
	       (unsigned)st->st_uid, (unsigned)st->st_gid, (long long)st->st_blocks,
	       (long)st->st_blksize, (long long)st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

static void put_statx(const struct statx *sx)
{
	printf(" mode=%o size=%llu nlink=%u uid=%u gid=%u blocks=%llu blksize=%u mtime=%lld.%09u",
	       (unsigned)sx->stx_mode, (unsigned long long)sx->stx_size, sx->stx_nlink, sx->stx_uid,
	       sx->stx_gid, (unsigned long long)sx->stx_blocks, sx->stx_blksize,
	       (long long)sx->stx_mtime.tv_sec, sx->stx_mtime.tv_nsec);
}

/* What a descriptor the call made shows: fstat, then the first bytes. */
static void put_fd(int fd)
{
	struct stat st;
	if (fd < 0)
		return;
	if (fstat(fd, &st) == 0)
		put_stat(&st);
	char buf[64];
	ssize_t k = read(fd, buf, sizeof(buf));
	printf(" read=%zd", k);
	put_err(k, errno);
	if (k > 0)
		put_text(buf, (size_t)k);
	close(fd);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of a directory stream, sorted, with their d_type. */
static void put_dir(DIR *d, struct dirent *(*rd)(DIR *))
{
	char *v[256];
	size_t n = 0;
	struct dirent *e;
	while ((e = rd(d)) && n < 256) {
		char *s;
		if (asprintf(&s, "%s:%u", e->d_name, (unsigned)e->d_type) < 0)
			exit(3);
		v[n++] = s;
	}
	qsort(v, n, sizeof(*v), name_cmp);
	printf(" entries=%zu", n);
	for (size_t i = 0; i < n; i++) {
		printf(" %s", v[i]);
		free(v[i]);
	}
}

static void put_names(struct dirent **v, int n)
{
	printf(" entries=%d", n);
	for (int i = 0; i < n; i++) {
		printf(" %s:%u", v[i]->d_name, (unsigned)v[i]->d_type);
		free(v[i]);
	}
	free(v);
}

static void put_ptr_text(const char *p, int e, int own)
{
	printf(" rc=%s", p ? "ok" : "NULL");
	if (!p)
		put_err(-1, e);
	else {
		putchar(' ');
		put_text(p, strlen(p));
		if (own)
			free((void *)p);
	}
}

static void put_buf(ssize_t k, int e, const char *buf)
{
	printf(" rc=%zd", k);
	put_err(k, e);
	if (k > 0)
		put_text(buf, (size_t)k);
}

static int all(const struct dirent *e)
{
	(void)e;
	return 1;
}

/* ---- the calls ------------------------------------------------------------- */
/* How the process gets what the call works on. */
enum kind { K_PATH, K_FD, K_DIR, K_FILE, K_CWD };

struct call {
	const char *name;
	enum kind kind;
	void (*fn)(const char *path, int fd, DIR *d, FILE *f);
};

#define PATHCALL(n) static void c_##n(const char *p, int fd, DIR *d, FILE *fp)
#define UNUSED (void)p, (void)fd, (void)d, (void)fp
#define SAY_RC(expr)                                                                               \
	do {                                                                                       \
		errno = 0;                                                                         \
		long rc_ = (long)(expr);                                                           \
		int e_ = errno;                                                                    \
		printf(" rc=%ld", rc_ < 0 ? -1L : rc_);                                            \
		put_err(rc_, e_);                                                                  \
	} while (0)
#define SAY_OK(expr)                                                                               \
	do {                                                                                       \
		errno = 0;                                                                         \
		long rc_ = (long)(expr);                                                           \
		int e_ = errno;                                                                    \
		printf(" rc=%s", rc_ < 0 ? "-1" : "ok");                                           \
		put_err(rc_, e_);                                                                  \
	} while (0)

/* open family: the descriptor's stat and first bytes */
#define OPEN_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		errno = 0;                                                                         \
		int r_ = (expr);                                                                   \
		int e_ = errno;                                                                    \
		printf(" rc=%s", r_ < 0 ? "-1" : "fd");                                            \
		put_err(r_, e_);                                                                   \
		put_fd(r_);                                                                        \
	}
OPEN_CALL(open, R.open(p, O_RDONLY))
OPEN_CALL(open64, R.open64(p, O_RDONLY))
OPEN_CALL(openat, R.openat(DFD, p, O_RDONLY))
OPEN_CALL(openat64, R.openat64(DFD, p, O_RDONLY))
OPEN_CALL(__open_2, R.__open_2(p, O_RDONLY))
OPEN_CALL(__open64_2, R.__open64_2(p, O_RDONLY))
OPEN_CALL(__openat_2, R.__openat_2(DFD, p, O_RDONLY))
OPEN_CALL(__openat64_2, R.__openat64_2(DFD, p, O_RDONLY))
OPEN_CALL(creat, R.creat(p, 0644))
OPEN_CALL(creat64, R.creat64(p, 0644))

/* stat family: the whole stat */
#define STAT_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		struct stat st;                                                                    \
		memset(&st, 0, sizeof(st));                                                        \
		errno = 0;                                                                         \
		int r_ = (expr);                                                                   \
		int e_ = errno;                                                                    \
		printf(" rc=%d", r_);                                                              \
		put_err(r_, e_);                                                                   \
		if (r_ == 0)                                                                       \
			put_stat(&st);                                                             \
	}
#define ST64 ((struct stat64 *)&st)
STAT_CALL(stat, R.stat(p, &st))
STAT_CALL(stat64, R.stat64(p, ST64))
STAT_CALL(lstat, R.lstat(p, &st))
STAT_CALL(lstat64, R.lstat64(p, ST64))
STAT_CALL(fstatat, R.fstatat(DFD, p, &st, 0))
STAT_CALL(fstatat64, R.fstatat64(DFD, p, ST64, AT_SYMLINK_NOFOLLOW))
STAT_CALL(__xstat, R.__xstat(1, p, &st))
STAT_CALL(__xstat64, R.__xstat64(1, p, ST64))
STAT_CALL(__lxstat, R.__lxstat(1, p, &st))
STAT_CALL(__lxstat64, R.__lxstat64(1, p, ST64))
STAT_CALL(__fxstatat, R.__fxstatat(1, DFD, p, &st, 0))
STAT_CALL(__fxstatat64, R.__fxstatat64(1, DFD, p, ST64, AT_SYMLINK_NOFOLLOW))
STAT_CALL(fstat, R.fstat(fd, &st))
STAT_CALL(fstat64, R.fstat64(fd, ST64))
STAT_CALL(__fxstat, R.__fxstat(1, fd, &st))
STAT_CALL(__fxstat64, R.__fxstat64(1, fd, ST64))

PATHCALL(statx)
{
	UNUSED;
	struct statx sx;
	memset(&sx, 0, sizeof(sx));
	errno = 0;
	int r = R.statx(DFD, p, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx);
	printf(" rc=%d", r);
	put_err(r, errno);
	if (r == 0)
		put_statx(&sx);
}

/* statfs family: a staged tree is its own file system: success or errno */
PATHCALL(statfs)
{
	UNUSED;
	struct statfs b;
	SAY_OK(R.statfs(p, &b));
}
PATHCALL(statfs64)
{
	UNUSED;
	struct statfs64 b;
	SAY_OK(R.statfs64(p, &b));
}
PATHCALL(fstatfs)
{
	UNUSED;
	struct statfs b;
	SAY_OK(R.fstatfs(fd, &b));
}
PATHCALL(fstatfs64)
{
	UNUSED;
	struct statfs64 b;
	SAY_OK(R.fstatfs64(fd, &b));
}
PATHCALL(statvfs)
{
	UNUSED;
	struct statvfs b;
	SAY_OK(R.statvfs(p, &b));
}
PATHCALL(statvfs64)
{
	UNUSED;
	struct statvfs64 b;
	SAY_OK(R.statvfs64(p, &b));
}
PATHCALL(fstatvfs)
{
	UNUSED;
	struct statvfs b;
	SAY_OK(R.fstatvfs(fd, &b));
}
PATHCALL(fstatvfs64)
{
	UNUSED;
	struct statvfs64 b;
	SAY_OK(R.fstatvfs64(fd, &b));
}

PATHCALL(access)
{
	UNUSED;
	SAY_RC(R.access(p, R_OK));
}
PATHCALL(faccessat)
{
	UNUSED;
	SAY_RC(R.faccessat(DFD, p, X_OK, AT_SYMLINK_NOFOLLOW));
}
PATHCALL(euidaccess)
{
	UNUSED;
	SAY_RC(R.euidaccess(p, W_OK));
}
PATHCALL(eaccess)
{
	UNUSED;
	SAY_RC(R.eaccess(p, F_OK));
}

/* readlink family: the text */
#define LINK_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		char buf[PATH_MAX];                                                                \
		errno = 0;                                                                         \
		ssize_t k_ = (expr);                                                               \
		put_buf(k_, errno, buf);                                                           \
	}
LINK_CALL(readlink, R.readlink(p, buf, sizeof(buf)))
LINK_CALL(readlinkat, R.readlinkat(DFD, p, buf, sizeof(buf)))
LINK_CALL(__readlink_chk, R.__readlink_chk(p, buf, sizeof(buf), sizeof(buf)))
LINK_CALL(__readlinkat_chk, R.__readlinkat_chk(DFD, p, buf, sizeof(buf), sizeof(buf)))

/* pathconf: every limit a program asks about a file */
static const int pc_names[] = {_PC_LINK_MAX,          _PC_MAX_CANON,          _PC_MAX_INPUT,
                               _PC_NAME_MAX,          _PC_PATH_MAX,           _PC_PIPE_BUF,
                               _PC_CHOWN_RESTRICTED,  _PC_NO_TRUNC,           _PC_VDISABLE,
                               _PC_SYNC_IO,           _PC_ASYNC_IO,           _PC_PRIO_IO,
                               _PC_FILESIZEBITS,      _PC_REC_INCR_XFER_SIZE, _PC_REC_MAX_XFER_SIZE,
                               _PC_REC_MIN_XFER_SIZE, _PC_REC_XFER_ALIGN,     _PC_ALLOC_SIZE_MIN,
                               _PC_SYMLINK_MAX,       _PC_2_SYMLINKS};
#define CONF_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		for (size_t i = 0; i < sizeof(pc_names) / sizeof(pc_names[0]); i++) {              \
			int c = pc_names[i];                                                       \
			errno = 0;                                                                 \
			long v_ = (expr);                                                          \
			int e_ = errno;                                                            \
			printf(" %d=%ld", c, v_);                                                  \
			if (v_ < 0 && e_)                                                          \
				printf(":%s", strerrorname_np(e_));                                \
		}                                                                                  \
	}
CONF_CALL(pathconf, R.pathconf(p, c))
CONF_CALL(fpathconf, R.fpathconf(fd, c))

/* extended attributes: none on either tree (trusted.*: ENODATA on tmpfs for
 * any kernel and any user; user.* only since Linux 6.6) */
PATHCALL(getxattr)
{
	UNUSED;
	char b[64];
	SAY_RC(R.getxattr(p, "trusted.dstage", b, sizeof(b)));
}
PATHCALL(lgetxattr)
{
	UNUSED;
	char b[64];
	SAY_RC(R.lgetxattr(p, "trusted.dstage", b, sizeof(b)));
}
PATHCALL(fgetxattr)
{
	UNUSED;
	char b[64];
	SAY_RC(R.fgetxattr(fd, "trusted.dstage", b, sizeof(b)));
}
PATHCALL(listxattr)
{
	UNUSED;
	char b[256];
	SAY_RC(R.listxattr(p, b, sizeof(b)));
}
PATHCALL(llistxattr)
{
	UNUSED;
	char b[256];
	SAY_RC(R.llistxattr(p, b, sizeof(b)));
}
PATHCALL(flistxattr)
{
	UNUSED;
	char b[256];
	SAY_RC(R.flistxattr(fd, b, sizeof(b)));
}

/* canonical names and the working directory */
PATHCALL(realpath)
{
	UNUSED;
	errno = 0;
	char *r = R.realpath(p, NULL);
	put_ptr_text(r, errno, 1);
}
PATHCALL(__realpath_chk)
{
	UNUSED;
	char buf[PATH_MAX];
	errno = 0;
	char *r = R.__realpath_chk(p, buf, sizeof(buf));
	put_ptr_text(r, errno, 0);
}
PATHCALL(canonicalize_file_name)
{
	UNUSED;
	errno = 0;
	char *r = R.canonicalize_file_name(p);
	put_ptr_text(r, errno, 1);
}
static void put_cwd(void)
{
	char buf[PATH_MAX];
	char *c = getcwd(buf, sizeof(buf));
	printf(" cwd=");
	/* where the process started is not the tree, and differs */
	if (c && (strncmp(c, root, rootlen) || (c[rootlen] && c[rootlen] != '/')))
		c = "outside";
	put_text(c ? c : "?", strlen(c ? c : "?"));
}
PATHCALL(chdir)
{
	UNUSED;
	SAY_RC(R.chdir(p));
	put_cwd();
}
PATHCALL(fchdir)
{
	UNUSED;
	SAY_RC(R.fchdir(fd));
	put_cwd();
}
/* K_CWD: the process starts in the directory (the parent's chdir) */
PATHCALL(getcwd)
{
	UNUSED;
	char buf[PATH_MAX];
	errno = 0;
	char *r = R.getcwd(buf, sizeof(buf));
	put_ptr_text(r, errno, 0);
}
PATHCALL(__getcwd_chk)
{
	UNUSED;
	char buf[PATH_MAX];
	errno = 0;
	char *r = R.__getcwd_chk(buf, sizeof(buf), sizeof(buf));
	put_ptr_text(r, errno, 0);
}
PATHCALL(get_current_dir_name)
{
	UNUSED;
	errno = 0;
	char *r = R.get_current_dir_name();
	put_ptr_text(r, errno, 1);
}

/* directory streams */
PATHCALL(opendir)
{
	UNUSED;
	errno = 0;
	DIR *x = R.opendir(p);
	printf(" rc=%s", x ? "ok" : "NULL");
	if (!x) {
		put_err(-1, errno);
		return;
	}
	put_dir(x, readdir);
	closedir(x);
}
PATHCALL(fdopendir)
{
	UNUSED;
	errno = 0;
	DIR *x = R.fdopendir(fd);
	printf(" rc=%s", x ? "ok" : "NULL");
	if (!x) {
		put_err(-1, errno);
		return;
	}
	put_dir(x, readdir);
	closedir(x);
}
PATHCALL(readdir)
{
	UNUSED;
	put_dir(d, R.readdir);
}
static struct dirent *rd64(DIR *x) { return (struct dirent *)R.readdir64(x); }
PATHCALL(readdir64)
{
	UNUSED;
	put_dir(d, rd64);
}
static struct dirent rent;
static struct dirent *rdr(DIR *x)
{
	struct dirent *res = NULL;
	int e = R.readdir_r(x, &rent, &res);
	return e ? NULL : res;
}
static struct dirent *rdr64(DIR *x)
{
	struct dirent64 *res = NULL;
	int e = R.readdir64_r(x, (struct dirent64 *)&rent, &res);
	return e ? NULL : (struct dirent *)res;
}
PATHCALL(readdir_r)
{
	UNUSED;
	put_dir(d, rdr);
}
PATHCALL(readdir64_r)
{
	UNUSED;
	put_dir(d, rdr64);
}
PATHCALL(closedir)
{
	UNUSED;
	SAY_RC(R.closedir(d));
}
PATHCALL(rewinddir)
{
	UNUSED;
	while (readdir(d))
		;
	R.rewinddir(d);
	put_dir(d, readdir);
}
PATHCALL(telldir)
{
	UNUSED;
	errno = 0;
	long t = R.telldir(d);
	printf(" rc=%s", t < 0 ? "-1" : "ok");
	put_err(t, errno);
}
PATHCALL(seekdir)
{
	UNUSED;
	long t = telldir(d);
	while (readdir(d))
		;
	R.seekdir(d, t);
	put_dir(d, readdir);
}
PATHCALL(dirfd)
{
	UNUSED;
	errno = 0;
	int x = R.dirfd(d);
	struct stat st;
	printf(" rc=%s", x < 0 ? "-1" : "fd");
	put_err(x, errno);
	if (x >= 0 && fstat(x, &st) == 0)
		put_stat(&st);
}
PATHCALL(scandir)
{
	UNUSED;
	struct dirent **v;
	errno = 0;
	int n = R.scandir(p, &v, all, alphasort);
	printf(" rc=%s", n < 0 ? "-1" : "ok");
	put_err(n, errno);
	if (n >= 0)
		put_names(v, n);
}
PATHCALL(scandir64)
{
	UNUSED;
	struct dirent64 **v;
	errno = 0;
	int n = R.scandir64(p, &v, (int (*)(const struct dirent64 *))all, alphasort64);
	printf(" rc=%s", n < 0 ? "-1" : "ok");
	put_err(n, errno);
	if (n >= 0)
		put_names((struct dirent **)v, n);
}
PATHCALL(scandirat)
{
	UNUSED;
	struct dirent **v;
	errno = 0;
	int n = R.scandirat(DFD, p, &v, all, alphasort);
	printf(" rc=%s", n < 0 ? "-1" : "ok");
	put_err(n, errno);
	if (n >= 0)
		put_names(v, n);
}
PATHCALL(scandirat64)
{
	UNUSED;
	struct dirent64 **v;
	errno = 0;
	int n = R.scandirat64(DFD, p, &v, (int (*)(const struct dirent64 *))all, alphasort64);
	printf(" rc=%s", n < 0 ? "-1" : "ok");
	put_err(n, errno);
	if (n >= 0)
		put_names((struct dirent **)v, n);
}
PATHCALL(getdents64)
{
	UNUSED;
	char buf[16384];
	errno = 0;
	ssize_t k = R.getdents64(fd, buf, sizeof(buf));
	printf(" rc=%s", k < 0 ? "-1" : "ok");
	put_err(k, errno);
	char *v[256];
	size_t n = 0;
	for (ssize_t o = 0; k > 0 && o < k && n < 256;) {
		struct dirent64 *e = (struct dirent64 *)(buf + o);
		if (asprintf(&v[n], "%s:%u", e->d_name, (unsigned)e->d_type) < 0)
			exit(3);
		n++;
		o += e->d_reclen;
	}
	qsort(v, n, sizeof(*v), name_cmp);
	printf(" entries=%zu", n);
	for (size_t i = 0; i < n; i++)
		printf(" %s", v[i]), free(v[i]);
}

/* FILE streams */
static void put_stream(FILE *x, int e)
{
	printf(" rc=%s", x ? "ok" : "NULL");
	if (!x) {
		put_err(-1, e);
		return;
	}
	char buf[64];
	size_t k = fread(buf, 1, sizeof(buf), x);
	printf(" read=%zu%s", k, ferror(x) ? " error" : "");
	put_text(buf, k);
}
PATHCALL(fopen)
{
	UNUSED;
	errno = 0;
	FILE *x = R.fopen(p, "r");
	put_stream(x, errno);
}
PATHCALL(fopen64)
{
	UNUSED;
	errno = 0;
	FILE *x = R.fopen64(p, "re");
	put_stream(x, errno);
}
PATHCALL(freopen)
{
	UNUSED;
	errno = 0;
	FILE *x = R.freopen(p, "r", stdin);
	put_stream(x, errno);
}
PATHCALL(freopen64)
{
	UNUSED;
	errno = 0;
	FILE *x = R.freopen64(p, "r", stdin);
	put_stream(x, errno);
}
PATHCALL(fdopen)
{
	UNUSED;
	errno = 0;
	FILE *x = R.fdopen(fd, "r");
	put_stream(x, errno);
}
PATHCALL(fileno)
{
	UNUSED;
	int x = R.fileno(fp);
	printf(" rc=%s", x < 0 ? "-1" : "fd");
	put_stream(fp, 0);
}
PATHCALL(fileno_unlocked)
{
	UNUSED;
	int x = R.fileno_unlocked(fp);
	printf(" rc=%s", x < 0 ? "-1" : "fd");
	put_stream(fp, 0);
}
PATHCALL(fclose)
{
	UNUSED;
	SAY_RC(R.fclose(fp));
}

/* calls on a descriptor */
PATHCALL(close)
{
	UNUSED;
	SAY_RC(R.close(fd));
	SAY_RC(fcntl(fd, F_GETFD));
}
PATHCALL(close_range)
{
	UNUSED;
	SAY_RC(R.close_range((unsigned)fd, (unsigned)fd, 0));
	SAY_RC(fcntl(fd, F_GETFD));
}
PATHCALL(closefrom)
{
	UNUSED;
	R.closefrom(fd);
	SAY_RC(fcntl(fd, F_GETFD));
}
#define READ_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		char buf[64];                                                                      \
		errno = 0;                                                                         \
		ssize_t k_ = (expr);                                                               \
		put_buf(k_, errno, buf);                                                           \
	}
static struct iovec iov[2];
static struct iovec *vec(char *buf)
{
	iov[0] = (struct iovec){buf, 16};
	iov[1] = (struct iovec){buf + 16, 48};
	return iov;
}
READ_CALL(read, R.read(fd, buf, sizeof(buf)))
READ_CALL(__read_chk, R.__read_chk(fd, buf, sizeof(buf), sizeof(buf)))
READ_CALL(pread, R.pread(fd, buf, sizeof(buf), 1))
READ_CALL(pread64, R.pread64(fd, buf, sizeof(buf), 2))
READ_CALL(__pread_chk, R.__pread_chk(fd, buf, sizeof(buf), 3, sizeof(buf)))
READ_CALL(__pread64_chk, R.__pread64_chk(fd, buf, sizeof(buf), 4, sizeof(buf)))
READ_CALL(readv, R.readv(fd, vec(buf), 2))
READ_CALL(preadv, R.preadv(fd, vec(buf), 2, 1))
READ_CALL(preadv64, R.preadv64(fd, vec(buf), 2, 2))
READ_CALL(preadv2, R.preadv2(fd, vec(buf), 2, -1, 0))
READ_CALL(preadv64v2, R.preadv64v2(fd, vec(buf), 2, 3, 0))
PATHCALL(lseek)
{
	UNUSED;
	SAY_RC(R.lseek(fd, 0, SEEK_END));
}
PATHCALL(lseek64)
{
	UNUSED;
	SAY_RC(R.lseek64(fd, 1, SEEK_SET));
	put_fd(fd);
}
PATHCALL(dup)
{
	UNUSED;
	errno = 0;
	int x = R.dup(fd);
	printf(" rc=%s", x < 0 ? "-1" : "fd");
	put_err(x, errno);
	put_fd(x);
}
PATHCALL(dup2)
{
	UNUSED;
	SAY_RC(R.dup2(fd, 20));
	put_fd(20);
}
PATHCALL(dup3)
{
	UNUSED;
	SAY_RC(R.dup3(fd, 21, O_CLOEXEC));
	SAY_RC(fcntl(21, F_GETFD));
	put_fd(21);
}
PATHCALL(fcntl)
{
	UNUSED;
	SAY_RC(R.fcntl(fd, F_GETFL) & ~O_LARGEFILE);
}
PATHCALL(fcntl64)
{
	UNUSED;
	SAY_RC(R.fcntl64(fd, F_GETFD));
}
#define MMAP_CALL(n, expr)                                                                         \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		errno = 0;                                                                         \
		char *m_ = (expr);                                                                 \
		printf(" rc=%s", m_ == MAP_FAILED ? "MAP_FAILED" : "ok");                          \
		if (m_ == MAP_FAILED)                                                              \
			put_err(-1, errno);                                                        \
		else                                                                               \
			put_text(m_, 4);                                                           \
	}
MMAP_CALL(mmap, R.mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0))
MMAP_CALL(mmap64, R.mmap64(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0))
PATHCALL(flock)
{
	UNUSED;
	SAY_RC(R.flock(fd, LOCK_SH | LOCK_NB));
}
/* posix_fadvise returns the error number */
PATHCALL(posix_fadvise)
{
	UNUSED;
	printf(" rc=%d", R.posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
}
PATHCALL(posix_fadvise64)
{
	UNUSED;
	printf(" rc=%d", R.posix_fadvise64(fd, 0, 0, POSIX_FADV_WILLNEED));
}
PATHCALL(readahead)
{
	UNUSED;
	SAY_RC(R.readahead(fd, 0, 4096));
}
PATHCALL(fsync)
{
	UNUSED;
	SAY_RC(R.fsync(fd));
}
PATHCALL(fdatasync)
{
	UNUSED;
	SAY_RC(R.fdatasync(fd));
}
static void drain_pipe(int rfd)
{
	char buf[64];
	ssize_t k = read(rfd, buf, sizeof(buf));
	printf(" got");
	put_buf(k, errno, buf);
}
PATHCALL(sendfile)
{
	UNUSED;
	int pp[2];
	if (pipe2(pp, O_NONBLOCK))
		exit(3);
	SAY_RC(R.sendfile(pp[1], fd, NULL, 64));
	drain_pipe(pp[0]);
}
PATHCALL(sendfile64)
{
	UNUSED;
	int pp[2];
	off64_t off = 2;
	if (pipe2(pp, O_NONBLOCK))
		exit(3);
	SAY_RC(R.sendfile64(pp[1], fd, &off, 64));
	printf(" off=%lld", (long long)off);
	drain_pipe(pp[0]);
}
PATHCALL(copy_file_range)
{
	UNUSED;
	/* on the file system of the tree (tmpfs): copy_file_range does not
	 * cross file systems (EXDEV) */
	int m = open("/dev/shm", O_TMPFILE | O_RDWR, 0600);
	off64_t off = 1;
	SAY_RC(R.copy_file_range(fd, &off, m, NULL, 64, 0));
	char buf[64];
	ssize_t k = pread(m, buf, sizeof(buf), 0);
	printf(" got");
	put_buf(k, errno, buf);
}

/* the write family: on a read-only tree */
static char second[PATH_MAX]; /* ROOT/new: a name that does not exist */
PATHCALL(mkdir)
{
	UNUSED;
	SAY_RC(R.mkdir(p, 0755));
}
PATHCALL(mkdirat)
{
	UNUSED;
	SAY_RC(R.mkdirat(DFD, p, 0755));
}
PATHCALL(rmdir)
{
	UNUSED;
	SAY_RC(R.rmdir(p));
}
PATHCALL(unlink)
{
	UNUSED;
	SAY_RC(R.unlink(p));
}
PATHCALL(unlinkat)
{
	UNUSED;
	SAY_RC(R.unlinkat(DFD, p, AT_REMOVEDIR));
}
PATHCALL(rename)
{
	UNUSED;
	SAY_RC(R.rename(p, second));
}
PATHCALL(renameat)
{
	UNUSED;
	SAY_RC(R.renameat(DFD, second, DFD, p));
}
PATHCALL(renameat2)
{
	UNUSED;
	SAY_RC(R.renameat2(DFD, p, DFD, second, RENAME_NOREPLACE));
}
PATHCALL(link)
{
	UNUSED;
	SAY_RC(R.link(p, second));
}
PATHCALL(linkat)
{
	UNUSED;
	SAY_RC(R.linkat(DFD, p, DFD, second, 0));
}
PATHCALL(symlink)
{
	UNUSED;
	SAY_RC(R.symlink("target", p));
}
PATHCALL(symlinkat)
{
	UNUSED;
	SAY_RC(R.symlinkat("target", DFD, p));
}
PATHCALL(chmod)
{
	UNUSED;
	SAY_RC(R.chmod(p, 0600));
}
PATHCALL(fchmodat)
{
	UNUSED;
	SAY_RC(R.fchmodat(DFD, p, 0600, 0));
}
PATHCALL(chown)
{
	UNUSED;
	SAY_RC(R.chown(p, getuid(), getgid()));
}
PATHCALL(lchown)
{
	UNUSED;
	SAY_RC(R.lchown(p, getuid(), getgid()));
}
PATHCALL(fchownat)
{
	UNUSED;
	SAY_RC(R.fchownat(DFD, p, getuid(), getgid(), AT_SYMLINK_NOFOLLOW));
}
PATHCALL(truncate)
{
	UNUSED;
	SAY_RC(R.truncate(p, 0));
}
PATHCALL(truncate64)
{
	UNUSED;
	SAY_RC(R.truncate64(p, 1));
}
PATHCALL(utime)
{
	UNUSED;
	SAY_RC(R.utime(p, NULL));
}
PATHCALL(utimes)
{
	UNUSED;
	SAY_RC(R.utimes(p, NULL));
}
PATHCALL(lutimes)
{
	UNUSED;
	SAY_RC(R.lutimes(p, NULL));
}
PATHCALL(utimensat)
{
	UNUSED;
	SAY_RC(R.utimensat(DFD, p, NULL, 0));
}
PATHCALL(futimesat)
{
	UNUSED;
	SAY_RC(R.futimesat(DFD, p, NULL));
}
PATHCALL(mknod)
{
	UNUSED;
	SAY_RC(R.mknod(p, S_IFIFO | 0644, 0));
}
PATHCALL(mknodat)
{
	UNUSED;
	SAY_RC(R.mknodat(DFD, p, S_IFIFO | 0644, 0));
}
PATHCALL(setxattr)
{
	UNUSED;
	SAY_RC(R.setxattr(p, "user.x", "v", 1, 0));
}
PATHCALL(lsetxattr)
{
	UNUSED;
	SAY_RC(R.lsetxattr(p, "user.x", "v", 1, XATTR_CREATE));
}
PATHCALL(removexattr)
{
	UNUSED;
	SAY_RC(R.removexattr(p, "user.x"));
}
PATHCALL(lremovexattr)
{
	UNUSED;
	SAY_RC(R.lremovexattr(p, "user.x"));
}
PATHCALL(mkfifo)
{
	UNUSED;
	SAY_RC(R.mkfifo(p, 0644));
}
PATHCALL(mkfifoat)
{
	UNUSED;
	SAY_RC(R.mkfifoat(DFD, p, 0644));
}
/* mkstemp family: a template in the directory the path names */
#define TMPL_CALL(n, expr, sfx)                                                                    \
	PATHCALL(n)                                                                                \
	{                                                                                          \
		UNUSED;                                                                            \
		char t[PATH_MAX];                                                                  \
		snprintf(t, sizeof(t), "%s/tmpXXXXXX%s", p, sfx);                                  \
		SAY_RC(expr);                                                                      \
	}
TMPL_CALL(mkstemp, R.mkstemp(t), "")
TMPL_CALL(mkstemp64, R.mkstemp64(t), "")
TMPL_CALL(mkostemp, R.mkostemp(t, O_CLOEXEC), "")
TMPL_CALL(mkostemp64, R.mkostemp64(t, 0), "")
TMPL_CALL(mkstemps, R.mkstemps(t, 2), ".x")
TMPL_CALL(mkstemps64, R.mkstemps64(t, 2), ".x")
TMPL_CALL(mkostemps, R.mkostemps(t, 2, 0), ".x")
TMPL_CALL(mkostemps64, R.mkostemps64(t, 2, O_CLOEXEC), ".x")
PATHCALL(mkdtemp)
{
	UNUSED;
	char t[PATH_MAX];
	snprintf(t, sizeof(t), "%s/tmpXXXXXX", p);
	errno = 0;
	char *r = R.mkdtemp(t);
	printf(" rc=%s", r ? "ok" : "NULL");
	if (!r)
		put_err(-1, errno);
}

/* syscall(2) with the numbers of the path calls above */
PATHCALL(syscall)
{
	UNUSED;
	char buf[PATH_MAX];
	struct stat st;
	errno = 0;
	long k = R.syscall(SYS_readlinkat, DFD, p, buf, sizeof(buf));
	put_buf(k, errno, buf);
	errno = 0;
	long r = R.syscall(SYS_newfstatat, DFD, p, &st, AT_SYMLINK_NOFOLLOW);
	printf(" rc=%ld", r);
	put_err(r, errno);
	if (r == 0)
		put_stat(&st);
}

/* dlopen of a path that is no shared object: fails alike (the message names
 * the cache: not printed) */
PATHCALL(dlopen)
{
	UNUSED;
	void *h = R.dlopen(p, RTLD_NOW);
	printf(" rc=%s", h ? "ok" : "NULL");
}
PATHCALL(dlmopen)
{
	UNUSED;
	void *h = R.dlmopen(LM_ID_NEWLM, p, RTLD_NOW);
	printf(" rc=%s", h ? "ok" : "NULL");
}

#define C(n, k) {#n, k, c_##n},
static const struct call calls[] =
	{C(open, K_PATH) C(open64, K_PATH) C(openat, K_PATH) C(openat64, K_PATH) C(__open_2, K_PATH)
                 C(__open64_2,
                   K_PATH) C(__openat_2,
                             K_PATH) C(__openat64_2,
                                       K_PATH) C(creat, K_PATH) C(creat64,
                                                                  K_PATH) C(stat, K_PATH) C(stat64,
                                                                                            K_PATH)
                         C(lstat,
                           K_PATH) C(lstat64,
                                     K_PATH) C(fstatat,
                                               K_PATH) C(fstatat64,
                                                         K_PATH) C(__xstat, K_PATH)
                                 C(__xstat64, K_PATH) C(__lxstat, K_PATH) C(__lxstat64, K_PATH)
                                         C(__fxstatat,
                                           K_PATH) C(__fxstatat64,
                                                     K_PATH) C(fstat,
                                                               K_FD) C(fstat64,
                                                                       K_FD) C(__fxstat,
                                                                               K_FD) C(__fxstat64,
                                                                                       K_FD)
                                                 C(statx,
                                                   K_PATH) C(statfs,
                                                             K_PATH) C(statfs64,
                                                                       K_PATH) C(fstatfs,
                                                                                 K_FD) C(fstatfs64,
                                                                                         K_FD)
                                                         C(statvfs,
                                                           K_PATH) C(statvfs64,
                                                                     K_PATH) C(fstatvfs,
                                                                               K_FD) C(fstatvfs64,
                                                                                       K_FD)
                                                                 C(access, K_PATH) C(faccessat, K_PATH) C(
									 euidaccess,
									 K_PATH) C(eaccess, K_PATH)
                                                                         C(readlink,
                                                                           K_PATH) C(readlinkat,
                                                                                     K_PATH) C(__readlink_chk,
                                                                                               K_PATH)
                                                                                 C(__readlinkat_chk,
                                                                                   K_PATH) C(pathconf,
                                                                                             K_PATH)
                                                                                         C(fpathconf,
                                                                                           K_FD) C(getxattr,
                                                                                                   K_PATH)
                                                                                                 C(lgetxattr,
                                                                                                   K_PATH)
                                                                                                         C(fgetxattr, K_FD) C(listxattr, K_PATH) C(llistxattr, K_PATH) C(flistxattr, K_FD) C(realpath, K_PATH) C(__realpath_chk, K_PATH) C(canonicalize_file_name, K_PATH) C(chdir, K_PATH) C(fchdir,
                                                                                                                                                                                                                                                                                              K_FD) C(getcwd, K_CWD) C(__getcwd_chk, K_CWD) C(get_current_dir_name,
                                                                                                                                                                                                                                                                                                                                              K_CWD) C(opendir,
                                                                                                                                                                                                                                                                                                                                                       K_PATH) C(fdopendir,
                                                                                                                                                                                                                                                                                                                                                                 K_FD) C(readdir, K_DIR) C(readdir64, K_DIR) C(readdir_r, K_DIR) C(readdir64_r, K_DIR) C(closedir,
                                                                                                                                                                                                                                                                                                                                                                                                                                                         K_DIR) C(rewinddir, K_DIR) C(seekdir,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_DIR) C(telldir, K_DIR) C(dirfd, K_DIR) C(scandir, K_PATH) C(scandir64,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                    K_PATH) C(scandirat,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                              K_PATH) C(scandirat64,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                        K_PATH) C(getdents64, K_FD) C(fopen,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_PATH) C(fopen64,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                K_PATH) C(freopen,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                          K_PATH) C(freopen64, K_PATH) C(fdopen, K_FD) C(fileno, K_FILE) C(fileno_unlocked, K_FILE) C(fclose, K_FILE) C(close,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                        K_FD) C(close_range,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                K_FD) C(closefrom, K_FD) C(read,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                           K_FD) C(__read_chk, K_FD) C(pread, K_FD) C(pread64, K_FD) C(__pread_chk, K_FD) C(__pread64_chk,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                            K_FD) C(readv, K_FD) C(preadv, K_FD) C(preadv64, K_FD) C(preadv2,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                     K_FD) C(preadv64v2, K_FD) C(lseek, K_FD) C(lseek64, K_FD) C(dup, K_FD) C(dup2,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                              K_FD) C(dup3,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_FD) C(fcntl, K_FD) C(fcntl64, K_FD) C(mmap,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                              K_FD) C(mmap64,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_FD) C(flock, K_FD) C(posix_fadvise,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                             K_FD) C(posix_fadvise64,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                     K_FD) C(readahead,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                             K_FD) C(fsync, K_FD) C(fdatasync, K_FD) C(sendfile,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                       K_FD) C(sendfile64, K_FD) C(copy_file_range, K_FD) C(mkdir,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                            K_PATH) C(mkdirat,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_PATH) C(rmdir, K_PATH) C(unlink,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                 K_PATH) C(unlinkat, K_PATH) C(rename, K_PATH) C(renameat, K_PATH) C(renameat2, K_PATH) C(link,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                          K_PATH) C(linkat, K_PATH) C(symlink,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                      K_PATH) C(symlinkat, K_PATH) C(chmod, K_PATH) C(fchmodat, K_PATH) C(chown, K_PATH) C(lchown,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                           K_PATH) C(fchownat, K_PATH) C(truncate,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                         K_PATH) C(truncate64, K_PATH) C(utime, K_PATH) C(utimes, K_PATH) C(lutimes, K_PATH) C(utimensat, K_PATH) C(futimesat,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                    K_PATH) C(mknod,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                              K_PATH) C(mknodat,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                        K_PATH) C(setxattr,
                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                                  K_PATH) C(lsetxattr, K_PATH) C(removexattr, K_PATH) C(lremovexattr, K_PATH)
                                                                                                                 C(mkfifo, K_PATH) C(mkfifoat, K_PATH) C(
															 mkstemp,
															 K_PATH) C(mkstemp64, K_PATH) C(mkostemp,
                                                                                                                                                        K_PATH)
                                                                                                                         C(mkostemp64,
                                                                                                                           K_PATH) C(mkstemps,
                                                                                                                                     K_PATH) C(mkstemps64,
                                                                                                                                               K_PATH)
                                                                                                                                 C(mkostemps,
                                                                                                                                   K_PATH) C(mkostemps64,
                                                                                                                                             K_PATH) C(mkdtemp,
                                                                                                                                                       K_PATH)
                                                                                                                                         C(syscall,
                                                                                                                                           K_PATH) C(dlopen,
                                                                                                                                                     K_PATH)
                                                                                                                                                 C(dlmopen,
                                                                                                                                                   K_PATH)};
#undef C
#define NCALLS (sizeof(calls) / sizeof(calls[0]))

static const struct call *lookup(const char *name)
{
	for (size_t i = 0; i < NCALLS; i++)
		if (!strcmp(calls[i].name, name))
			return &calls[i];
	return NULL;
}

/* Fill R: every function of io/wrap.h, by name. */
static void resolve(void)
{
	void **slot = (void **)&R;
	for (size_t i = 0; i < sizeof(all_names) / sizeof(all_names[0]); i++)
		slot[i] = find(all_names[i]);
}

static int do_call(const char *name, const char *path)
{
	const struct call *c = lookup(name);
	if (!c)
		return 2;
	resolve();
	int fd = -1;
	DIR *d = NULL;
	FILE *fp = NULL;
	snprintf(second, sizeof(second), "%s/new", root);
	/* a real directory, not the tree: opening it starts nothing */
	if (getenv("SHIM_FIRST_AT") && (dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return 3;
	/* nothing before the call names the tree, except what makes its object */
	if (c->kind == K_FD)
		fd = 3;
	else if (c->kind == K_DIR && !(d = opendir(path))) {
		printf(" opendir err=%s\n", strerrorname_np(errno));
		return 0;
	} else if (c->kind == K_FILE && !(fp = fopen(path, "r"))) {
		printf(" fopen err=%s\n", strerrorname_np(errno));
		return 0;
	}
	c->fn(path, fd, d, fp);
	putchar('\n');
	return 0;
}

/* One fresh process per call: fork, then exec ourselves. */
static void run_one(const char *self, const char *name, const char *rel, const char *path)
{
	const struct call *c = lookup(name);
	printf("%s '%s':", name, rel);
	fflush(stdout);
	if (!c) {
		printf(" not known\n");
		return;
	}
	int fd = -1;
	if (c->kind == K_FD) {
		fd = open(path, O_RDONLY);
		if (fd < 0) {
			printf(" open err=%s\n", strerrorname_np(errno));
			return;
		}
	}
	pid_t pid = fork();
	if (pid < 0)
		exit(3);
	if (pid == 0) {
		if (fd >= 0 && fd != 3) {
			dup2(fd, 3);
			close(fd);
		}
		if (c->kind == K_CWD && chdir(path) < 0) {
			dprintf(1, " chdir err=%s\n", strerrorname_np(errno));
			_exit(0);
		}
		execl(self, self, "--call", name, root, path, (char *)NULL);
		_exit(127);
	}
	if (fd >= 0)
		close(fd);
	int st;
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st)) {
		printf(" child status 0x%x\n", st);
		fflush(stdout);
	}
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "--list")) {
		for (size_t i = 0; i < NCALLS; i++)
			puts(calls[i].name);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "--call")) {
		root = argv[3];
		rootlen = strlen(root);
		setvbuf(stdout, NULL, _IOFBF, 1 << 16);
		return do_call(argv[2], argv[4]);
	}
	int at = argc >= 3 && !strcmp(argv[1], "--run-at");
	int rel = at || (argc >= 3 && !strcmp(argv[1], "--run-rel"));
	if (at && setenv("SHIM_FIRST_AT", "1", 1))
		return 3;
	if (argc >= 3 && (rel || !strcmp(argv[1], "--run"))) {
		root = argv[2];
		char self[PATH_MAX];
		ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (k <= 0)
			return 3;
		self[k] = 0;
		/* --run-rel: the names relative to ROOT's parent, the cwd */
		const char *base = root;
		if (rel) {
			char dir[PATH_MAX];
			const char *slash = strrchr(root, '/');
			if (!slash || (size_t)(slash - root) >= sizeof(dir))
				return 3;
			memcpy(dir, root, (size_t)(slash - root));
			dir[slash - root] = 0;
			if (chdir(dir[0] ? dir : "/") < 0)
				return 3;
			base = slash + 1;
		}
		char name[256];
		while (fgets(name, sizeof(name), stdin)) {
			name[strcspn(name, "\n")] = 0;
			if (!name[0])
				continue;
			for (int i = 3; i < argc; i++) {
				char path[PATH_MAX];
				snprintf(path, sizeof(path), "%s%s%s", base, argv[i][0] ? "/" : "",
				         argv[i]);
				run_one(self, name, argv[i], path);
			}
		}
		return 0;
	}
	fprintf(stderr,
	        "usage: shim-first --list | --run[-rel|-at] ROOT REL... | --call NAME ROOT PATH\n");
	return 2;
}
