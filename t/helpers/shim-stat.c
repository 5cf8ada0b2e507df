/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-stat: the metadata family on every path read from stdin, relative to
 * ROOT: stat, lstat, their 64-bit and __xstat forms (looked up by name, so
 * the very symbols an old or a new binary calls are the ones tested),
 * fstat, fstatat, statx, access, faccessat, euidaccess, readlink(at),
 * realpath; each from an absolute path, from a relative path after chdir
 * and from a directory descriptor.  One line per call; see shim-util.h.
 *
 *   shim-stat ROOT < paths        the family
 *   shim-stat --ino ROOT < paths  "ino dev path" (lstat), for uniqueness */
#include "shim-util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

typedef int (*stat_fn)(const char *, struct stat *);
typedef int (*xstat_fn)(int, const char *, struct stat *);
typedef int (*fstatat_fn)(int, const char *, struct stat *, int);
typedef int (*fxstatat_fn)(int, int, const char *, struct stat *, int);
typedef int (*fstat_fn)(int, struct stat *);
typedef int (*fxstat_fn)(int, int, struct stat *);

static void *sym(const char *name)
{
	void *p = dlsym(RTLD_DEFAULT, name);
	if (!p) {
		fprintf(stderr, "shim-stat: no symbol %s\n", name);
		exit(1);
	}
	return p;
}

static void show(const char *what, const char *p, int rc, int err, const struct stat *st)
{
	printf("%s '%s': %d %s", what, p, rc, errname(rc < 0 ? err : 0));
	if (rc == 0)
		print_stat(p, st);
	printf("\n");
}

static void family(const char *root, char **paths, size_t n)
{
	static const char *stats[] = {"stat", "stat64", "lstat", "lstat64"};
	static const char *xstats[] = {"__xstat", "__xstat64", "__lxstat", "__lxstat64"};
	static const char *ats[] = {"fstatat", "fstatat64"};
	static const char *fstats[] = {"fstat", "fstat64"};
	static const char *fxstats[] = {"__fxstat", "__fxstat64"};
	char abs[PATH_MAX * 2], buf[PATH_MAX * 2];
	struct stat st;
	int dfd = open(root, O_RDONLY | O_DIRECTORY);
	if (dfd < 0) /* go on: every call then shows how it fails */
		printf("open root: %s\n", errname(errno));
	for (size_t i = 0; i < n; i++) {
		const char *p = paths[i];
		join(abs, sizeof(abs), root, p);
		for (size_t k = 0; k < 4; k++) {
			memset(&st, 0, sizeof(st));
			errno = 0;
			int rc = ((stat_fn)sym(stats[k]))(abs, &st);
			show(stats[k], p, rc, errno, &st);
			errno = 0;
			rc = ((xstat_fn)sym(xstats[k]))(1, abs, &st);
			show(xstats[k], p, rc, errno, &st);
		}
		for (size_t k = 0; k < 2; k++)
			for (int fl = 0; fl <= AT_SYMLINK_NOFOLLOW; fl += AT_SYMLINK_NOFOLLOW) {
				errno = 0;
				int rc = ((fstatat_fn)sym(ats[k]))(dfd, p, &st, fl);
				printf("%s(%d) ", ats[k], fl);
				show("", p, rc, errno, &st);
				errno = 0;
				rc = ((fxstatat_fn)sym(k ? "__fxstatat64" : "__fxstatat"))(1, dfd, p, &st, fl);
				show("__fxstatat", p, rc, errno, &st);
			}
		for (int fl = 0; fl <= AT_SYMLINK_NOFOLLOW; fl += AT_SYMLINK_NOFOLLOW) {
			struct statx sx;
			errno = 0;
			int rc = statx(dfd, p, fl, STATX_BASIC_STATS, &sx);
			printf("statx(%d) '%s': %d %s", fl, p, rc, errname(rc < 0 ? errno : 0));
			if (rc == 0) {
				printf(" basic=%d mode=%o nlink=%u size=%llu", (sx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS,
				       sx.stx_mode, sx.stx_nlink, (unsigned long long)sx.stx_size);
				if (show_mtime(p))
					printf(" mtime=%lld.%09u", (long long)sx.stx_mtime.tv_sec, sx.stx_mtime.tv_nsec);
			}
			printf("\n");
		}
		/* open + fstat (both generations) */
		int fd = open(abs, O_RDONLY);
		printf("open '%s': %s\n", p, fd < 0 ? errname(errno) : "ok");
		if (fd >= 0) {
			for (size_t k = 0; k < 2; k++) {
				errno = 0;
				int rc = ((fstat_fn)sym(fstats[k]))(fd, &st);
				show(fstats[k], p, rc, errno, &st);
				rc = ((fxstat_fn)sym(fxstats[k]))(1, fd, &st);
				show(fxstats[k], p, rc, errno, &st);
			}
			errno = 0;
			int rc = fstatat(fd, "", &st, AT_EMPTY_PATH);
			show("fstatat(EMPTY_PATH)", p, rc, errno, &st);
			close(fd);
		}
		/* access: W_OK differs by construction (read-only), tested apart */
		static const int modes[] = {F_OK, R_OK, X_OK, R_OK | X_OK};
		for (size_t k = 0; k < 4; k++) {
			errno = 0;
			int a = access(abs, modes[k]);
			int ea = errno;
			errno = 0;
			int b = faccessat(dfd, p, modes[k], 0);
			int eb = errno;
			errno = 0;
			int c = euidaccess(abs, modes[k]);
			int ec = errno;
			errno = 0;
			int d = faccessat(dfd, p, modes[k], AT_SYMLINK_NOFOLLOW | AT_EACCESS);
			int ed = errno;
			printf("access(%d) '%s': %d %s %d %s %d %s %d %s\n", modes[k], p, a, errname(a ? ea : 0), b,
			       errname(b ? eb : 0), c, errname(c ? ec : 0), d, errname(d ? ed : 0));
		}
		/* readlink, readlinkat: text and truncation */
		errno = 0;
		ssize_t k = readlink(abs, buf, sizeof(buf));
		printf("readlink '%s': %zd %s", p, k, errname(k < 0 ? errno : 0));
		if (k >= 0)
			printf(" '%.*s'", (int)k, buf);
		errno = 0;
		k = readlinkat(dfd, p, buf, 3);
		printf(" at3: %zd %s", k, errname(k < 0 ? errno : 0));
		if (k >= 0)
			printf(" '%.*s'", (int)k, buf);
		printf("\n");
		/* realpath, printed relative to ROOT */
		errno = 0;
		char *r = realpath(abs, NULL);
		size_t rl = strlen(root);
		printf("realpath '%s': %s", p, r ? "ok" : errname(errno));
		if (r)
			printf(" '%s'", strncmp(r, root, rl) ? r : r + rl);
		free(r);
		char fixed[PATH_MAX];
		r = realpath(abs, fixed);
		printf(" fixed: %s", r ? (strncmp(r, root, rl) ? r : r + rl) : errname(errno));
		printf("\n");
	}
	/* the same stat from the inside: chdir, then relative names */
	if (chdir(root) < 0) {
		printf("chdir root: %s\n", errname(errno));
		close(dfd);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *p = paths[i];
		errno = 0;
		int rc = lstat(p, &st);
		show("rel lstat", p, rc, errno, &st);
		errno = 0;
		rc = stat(p, &st);
		show("rel stat", p, rc, errno, &st);
		errno = 0;
		rc = access(p, R_OK);
		printf("rel access '%s': %d %s\n", p, rc, errname(rc ? errno : 0));
	}
	close(dfd);
}

int main(int argc, char **argv)
{
	size_t n;
	int ino = argc == 3 && !strcmp(argv[1], "--ino");
	if (argc != 2 && !ino) {
		fprintf(stderr, "usage: shim-stat [--ino] ROOT < paths\n");
		return 2;
	}
	const char *root = argv[argc - 1];
	char **paths = read_paths(&n);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	if (ino) {
		char abs[PATH_MAX * 2];
		struct stat st;
		for (size_t i = 0; i < n; i++)
			if (lstat(join(abs, sizeof(abs), root, paths[i]), &st) == 0)
				printf("%llu %llu %s\n", (unsigned long long)st.st_ino,
				       (unsigned long long)st.st_dev, paths[i]);
		return 0;
	}
	family(root, paths, n);
	return 0;
}
