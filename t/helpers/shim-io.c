/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-io: perform one call and print its return value and errno, the way
 * GekkoFS's gkfs.io does, so shell tests read like the calls they make:
 *
 *   shim-io open PATH FLAGS        FLAGS: rdonly,wronly,rdwr,creat,excl,trunc,
 *                                  directory,nofollow,path,tmpfile
 *   shim-io access PATH F_OK|R_OK|W_OK|X_OK
 *   shim-io mkdir|rmdir|unlink|chmod|chown|truncate|utimes|creat|setxattr|
 *           removexattr|lchown|mknod PATH
 *   shim-io rename|link|symlink A B
 *   shim-io fdop PATH OP           open PATH read-only, then OP on it:
 *                                  write, pwrite, ftruncate, fchmod, fchown,
 *                                  futimens, fsync, mmap-shared-write,
 *                                  mmap-private-write, fdatasync, ioctl,
 *                                  getdents, flock-ex, lockf, setlk-write,
 *                                  setlk-read, fadvise, splice-in
 *   shim-io cwd DIR                chdir DIR; print getcwd
 *
 * Output: "NAME = RET ERRNO". */
#include "shim-util.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

static int parse_flags(const char *s)
{
	static const struct { const char *n; int f; } t[] = {
		{"rdonly", O_RDONLY}, {"wronly", O_WRONLY}, {"rdwr", O_RDWR}, {"creat", O_CREAT},
		{"excl", O_EXCL}, {"trunc", O_TRUNC}, {"directory", O_DIRECTORY},
		{"nofollow", O_NOFOLLOW}, {"path", O_PATH}, {"tmpfile", O_TMPFILE},
		{"append", O_APPEND}, {"cloexec", O_CLOEXEC},
	};
	int f = 0;
	char *dup = strdup(s), *save, *tok;
	for (tok = strtok_r(dup, ",|", &save); tok; tok = strtok_r(NULL, ",|", &save)) {
		size_t i;
		for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
			if (!strcmp(tok, t[i].n)) {
				f |= t[i].f;
				break;
			}
		if (i == sizeof(t) / sizeof(t[0])) {
			fprintf(stderr, "shim-io: unknown flag %s\n", tok);
			exit(2);
		}
	}
	free(dup);
	return f;
}

static int report(const char *name, long rc, int err)
{
	printf("%s = %ld %s\n", name, rc, errname(rc < 0 ? err : 0));
	return 0;
}

#define CALL(name, expr)                                                                      \
	do {                                                                                  \
		errno = 0;                                                                    \
		long rc_ = (long)(expr);                                                      \
		return report(name, rc_, errno);                                              \
	} while (0)

static int fdop(const char *path, const char *op)
{
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return report("open", -1, errno);
	char c = 'x';
	struct flock fl = {.l_whence = SEEK_SET};
	if (!strcmp(op, "write")) CALL(op, write(fd, &c, 1));
	if (!strcmp(op, "pwrite")) CALL(op, pwrite(fd, &c, 1, 0));
	if (!strcmp(op, "ftruncate")) CALL(op, ftruncate(fd, 0));
	if (!strcmp(op, "fchmod")) CALL(op, fchmod(fd, 0600));
	if (!strcmp(op, "fchown")) CALL(op, fchown(fd, 0, 0));
	if (!strcmp(op, "futimens")) CALL(op, futimens(fd, NULL));
	if (!strcmp(op, "fsync")) CALL(op, fsync(fd));
	if (!strcmp(op, "fdatasync")) CALL(op, fdatasync(fd));
	if (!strcmp(op, "ioctl")) CALL(op, ioctl(fd, FIONREAD, &fl));
	if (!strcmp(op, "getdents")) {
		char buf[4096];
		CALL(op, syscall(SYS_getdents64, fd, buf, sizeof(buf)));
	}
	if (!strcmp(op, "flock-ex")) CALL(op, flock(fd, LOCK_EX | LOCK_NB));
	if (!strcmp(op, "lockf")) CALL(op, lockf(fd, F_TLOCK, 0));
	if (!strcmp(op, "setlk-write")) {
		fl.l_type = F_WRLCK;
		CALL(op, fcntl(fd, F_SETLK, &fl));
	}
	if (!strcmp(op, "setlk-read")) {
		fl.l_type = F_RDLCK;
		CALL(op, fcntl(fd, F_SETLK, &fl));
	}
	if (!strcmp(op, "fadvise")) CALL(op, -posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL));
	if (!strcmp(op, "mmap-shared-write")) {
		void *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		return report(op, m == MAP_FAILED ? -1 : 0, errno);
	}
	if (!strcmp(op, "mmap-private-write")) {
		char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
		int e = errno;
		if (m != MAP_FAILED)
			m[0] = 'y'; /* a private copy: allowed */
		return report(op, m == MAP_FAILED ? -1 : 0, e);
	}
	if (!strcmp(op, "splice-in")) {
		int p[2];
		if (pipe(p) < 0)
			return 1;
		CALL(op, splice(fd, NULL, p[1], NULL, 1, 0));
	}
	fprintf(stderr, "shim-io: unknown op %s\n", op);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: shim-io CMD ARGS...\n");
		return 2;
	}
	const char *cmd = argv[1], *p = argv[2], *q = argc > 3 ? argv[3] : "";
	struct timeval tv[2] = {{0, 0}, {0, 0}};
	if (!strcmp(cmd, "open")) CALL(cmd, open(p, parse_flags(q), 0644) < 0 ? -1 : 0);
	if (!strcmp(cmd, "access")) {
		int m = !strcmp(q, "W_OK") ? W_OK : !strcmp(q, "R_OK") ? R_OK : !strcmp(q, "X_OK") ? X_OK : F_OK;
		CALL(cmd, access(p, m));
	}
	if (!strcmp(cmd, "mkdir")) CALL(cmd, mkdir(p, 0755));
	if (!strcmp(cmd, "rmdir")) CALL(cmd, rmdir(p));
	if (!strcmp(cmd, "unlink")) CALL(cmd, unlink(p));
	if (!strcmp(cmd, "chmod")) CALL(cmd, chmod(p, 0600));
	if (!strcmp(cmd, "chown")) CALL(cmd, chown(p, 0, 0));
	if (!strcmp(cmd, "lchown")) CALL(cmd, lchown(p, 0, 0));
	if (!strcmp(cmd, "truncate")) CALL(cmd, truncate(p, 0));
	if (!strcmp(cmd, "utimes")) CALL(cmd, utimes(p, tv));
	if (!strcmp(cmd, "creat")) CALL(cmd, creat(p, 0644) < 0 ? -1 : 0);
	if (!strcmp(cmd, "mknod")) CALL(cmd, mknod(p, S_IFIFO | 0644, 0));
	if (!strcmp(cmd, "setxattr")) CALL(cmd, setxattr(p, "user.x", "1", 1, 0));
	if (!strcmp(cmd, "removexattr")) CALL(cmd, removexattr(p, "user.x"));
	if (!strcmp(cmd, "rename")) CALL(cmd, rename(p, q));
	if (!strcmp(cmd, "link")) CALL(cmd, link(p, q));
	if (!strcmp(cmd, "symlink")) CALL(cmd, symlink(p, q));
	if (!strcmp(cmd, "fdop")) return fdop(p, q);
	if (!strcmp(cmd, "cwd")) {
		char buf[PATH_MAX];
		if (chdir(p) < 0)
			return report("chdir", -1, errno);
		printf("%s\n", getcwd(buf, sizeof(buf)) ? buf : errname(errno));
		return 0;
	}
	fprintf(stderr, "shim-io: unknown command %s\n", cmd);
	return 2;
}
