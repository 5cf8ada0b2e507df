/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-dir: the directory family on every path read from stdin, relative
 * to ROOT: opendir, fdopendir, readdir, readdir64, readdir_r, telldir,
 * seekdir, rewinddir, dirfd, scandir, scandir64, scandirat, closedir;
 * chdir, fchdir, getcwd and relative names from inside.  Entries are
 * printed sorted (directory order is the file system's business), with
 * d_type and whether d_ino matches lstat's st_ino.
 *
 *   shim-dir ROOT < paths */
#include "shim-util.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

static int cmpstr(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted "name/type/inode-ok" of a whole stream. */
static void list(const char *what, const char *p, DIR *d, int dfd)
{
	char *names[4096];
	size_t n = 0;
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d)) && n < 4096) {
		struct stat st;
		int inok = 1;
		if (strcmp(e->d_name, "..")) /* ".." of ROOT is above the tree */
			inok = fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == e->d_ino;
		if (asprintf(&names[n++], "%s/%d/%d", e->d_name, e->d_type, inok) < 0)
			exit(1);
	}
	int err = errno;
	qsort(names, n, sizeof(*names), cmpstr);
	printf("%s '%s': n=%zu end=%s:", what, p, n, errname(err));
	for (size_t i = 0; i < n; i++) {
		printf(" %s", names[i]);
		free(names[i]);
	}
	printf("\n");
}

static int not_dots(const struct dirent *e)
{
	return strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
}

static void family(const char *root, const char *p)
{
	char abs[PATH_MAX * 2];
	join(abs, sizeof(abs), root, p);
	errno = 0;
	DIR *d = opendir(abs);
	if (!d) {
		printf("opendir '%s': %s\n", p, errname(errno));
		return;
	}
	int dfd = dirfd(d);
	list("readdir", p, d, dfd);
	/* telldir / seekdir / rewinddir / readdir64 / readdir_r */
	rewinddir(d);
	struct dirent64 *e64 = readdir64(d);
	readdir64(d);
	long pos = telldir(d);
	struct dirent *e = readdir(d);
	char first[NAME_MAX + 1] = "", again[NAME_MAX + 1] = "";
	if (e)
		strcpy(first, e->d_name);
	seekdir(d, pos);
	e = readdir(d);
	if (e)
		strcpy(again, e->d_name);
	size_t cnt = 0;
	rewinddir(d);
	struct dirent ent, *res;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	while (readdir_r(d, &ent, &res) == 0 && res) /* deprecated, still called */
		cnt++;
#pragma GCC diagnostic pop
	printf("seek '%s': first64=%d same=%d count_r=%zu\n", p, e64 != NULL, !strcmp(first, again), cnt);
	struct stat st;
	printf("dirfd '%s': fstat=%d isdir=%d\n", p, fstat(dfd, &st), S_ISDIR(st.st_mode));
	closedir(d);
	/* fdopendir owns the descriptor */
	int fd = open(abs, O_RDONLY | O_DIRECTORY);
	d = fdopendir(fd);
	if (d) {
		list("fdopendir", p, d, fd);
		closedir(d);
		errno = 0;
		printf("after closedir '%s': fstat=%d %s\n", p, fstat(fd, &st), errname(errno));
	}
	/* scandir family: sorted by alphasort, filtered */
	struct dirent **v;
	int n = scandir(abs, &v, not_dots, alphasort);
	printf("scandir '%s': %d", p, n);
	for (int i = 0; i < n; i++) {
		printf(" %s", v[i]->d_name);
		free(v[i]);
	}
	if (n >= 0)
		free(v);
	struct dirent64 **v64;
	n = scandir64(abs, &v64, NULL, alphasort64);
	printf(" | scandir64 %d", n);
	for (int i = 0; i < n; i++)
		free(v64[i]);
	if (n >= 0)
		free(v64);
	int rfd = open(root, O_RDONLY | O_DIRECTORY);
	n = scandirat(rfd, p, &v, not_dots, alphasort);
	printf(" | scandirat %d\n", n);
	for (int i = 0; i < n; i++)
		free(v[i]);
	if (n >= 0)
		free(v);
	close(rfd);
}

int main(int argc, char **argv)
{
	size_t n;
	char cwd[PATH_MAX], abs[PATH_MAX * 2];
	if (argc != 2) {
		fprintf(stderr, "usage: shim-dir ROOT < paths\n");
		return 2;
	}
	const char *root = argv[1];
	size_t rl = strlen(root);
	char **paths = read_paths(&n);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	for (size_t i = 0; i < n; i++)
		family(root, paths[i]);
	/* from the inside: chdir into each directory, getcwd, list ".", open
	 * a relative name, go back up with fchdir */
	int top = open(root, O_RDONLY | O_DIRECTORY);
	for (size_t i = 0; i < n; i++) {
		const char *p = paths[i];
		if (fchdir(top) < 0) {
			printf("fchdir top: %s\n", errname(errno));
			break;
		}
		errno = 0;
		int rc = chdir(p);
		printf("chdir '%s': %d %s", p, rc, errname(rc ? errno : 0));
		if (rc == 0) {
			char *c = getcwd(cwd, sizeof(cwd));
			printf(" cwd=%s", c ? (strncmp(c, root, rl) ? c : c + rl) : errname(errno));
			DIR *d = opendir(".");
			int k = 0;
			if (d) {
				while (readdir(d))
					k++;
				closedir(d);
			}
			struct stat st;
			printf(" entries=%d parent=%d", k, stat("..", &st) == 0 && S_ISDIR(st.st_mode));
			char small[4];
			errno = 0;
			printf(" small=%s", getcwd(small, sizeof(small)) ? "ok" : errname(errno));
		}
		printf("\n");
	}
	/* fchdir into a staged directory descriptor, then relative opens */
	join(abs, sizeof(abs), root, "a/b");
	int dfd = open(abs, O_RDONLY | O_DIRECTORY);
	printf("fchdir a/b: %d", fchdir(dfd));
	char *c = getcwd(cwd, sizeof(cwd));
	printf(" cwd=%s", c ? c + (strncmp(c, root, rl) ? 0 : rl) : "?");
	int fd = open("grep.txt", O_RDONLY);
	char buf[64] = "";
	printf(" read=%zd", fd >= 0 ? read(fd, buf, sizeof(buf)) : -1);
	printf(" up=%d\n", open("../x.txt", O_RDONLY) >= 0);
	return 0;
}
