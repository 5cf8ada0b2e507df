/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-stdio: FILE streams on every regular file read from stdin, relative
 * to ROOT: fopen, fopen64, fdopen, freopen; fread, fgets, getc, ungetc,
 * fseek, ftell, rewind, feof, fileno + fstat; one line per file.
 *
 *   shim-stdio ROOT < paths */
#include "shim-util.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

static void streams(const char *root, const char *p)
{
	char abs[PATH_MAX * 2], line[256];
	static char buf[1 << 21];
	join(abs, sizeof(abs), root, p);
	struct stat st;
	if (stat(abs, &st) || !S_ISREG(st.st_mode))
		return;
	errno = 0;
	FILE *f = fopen(abs, "r");
	if (!f) {
		printf("fopen '%s': %s\n", p, errname(errno));
		return;
	}
	size_t n = fread(buf, 1, sizeof(buf), f);
	printf("fopen '%s': fread=%zu hash=%llx eof=%d", p, n, fnv(buf, n), feof(f) != 0);
	rewind(f);
	char *l = fgets(line, sizeof(line), f);
	printf(" fgets=%d", l ? (int)strlen(l) : -1);
	fseek(f, 3, SEEK_SET);
	int c = getc(f);
	ungetc(c, f);
	printf(" c=%d tell=%ld", c, ftell(f));
	fseek(f, -2, SEEK_END);
	printf(" end=%ld", ftell(f));
	int fd = fileno(f);
	struct stat fst;
	int fs = fd >= 0 && fstat(fd, &fst) == 0;
	printf(" fileno_fstat=%d size=%lld", fs, fs ? (long long)fst.st_size : -1LL);
	printf(" close=%d\n", fclose(f));
	/* fopen64, mode "re" */
	f = fopen64(abs, "re");
	n = f ? fread(buf, 1, 10, f) : 0;
	printf("fopen64 '%s': %s n=%zu", p, f ? "ok" : errname(errno), n);
	if (f)
		fclose(f);
	/* fdopen on a descriptor: shares its offset */
	fd = open(abs, O_RDONLY);
	lseek(fd, 2, SEEK_SET);
	f = fdopen(fd, "r");
	n = f ? fread(buf, 1, sizeof(buf), f) : 0;
	printf(" fdopen: n=%zu hash=%llx", n, fnv(buf, n));
	if (f)
		fclose(f);
	/* freopen keeps the stream */
	FILE *g = fopen("/dev/null", "r");
	FILE *h = freopen(abs, "r", g);
	n = h ? fread(buf, 1, sizeof(buf), h) : 0;
	printf(" freopen: same=%d n=%zu hash=%llx\n", h == g, n, fnv(buf, n));
	if (h)
		fclose(h);
}

int main(int argc, char **argv)
{
	size_t n;
	if (argc != 2) {
		fprintf(stderr, "usage: shim-stdio ROOT < paths\n");
		return 2;
	}
	char **paths = read_paths(&n);
	for (size_t i = 0; i < n; i++)
		streams(argv[1], paths[i]);
	return 0;
}
