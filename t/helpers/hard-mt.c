/* SPDX-License-Identifier: BSD-3-Clause */
/* hard-mt: a many-threaded reader for the shim, for ThreadSanitizer runs
 * (t/9005) and plain stress.  Every thread loops over a mix of calls on the
 * same and on different files of the staged tree and checks each byte it
 * reads against the same tree on a real file system:
 *
 *   hard-mt [-t THREADS] [-n ROUNDS] MOUNT SRC < paths
 *
 *   paths  files relative to MOUNT/SRC, one a line (their bytes are loaded
 *          from SRC first, natively: SRC is outside the prefix)
 *
 * Per round a thread: opens a file (thread i mostly file i mod N, every
 * fourth round file 0, which all threads share), fstat and stat it, reads it
 * whole in odd chunk sizes, preads three random ranges, dups the descriptor
 * and reads through the dup, lseeks, closes both; lists the file's directory
 * with opendir/readdir; and reads from one descriptor shared by all threads
 * with pread.  Every eighth round it also reads a virtual epoch list and
 * calls realpath and access.  Prints "rounds=N bytes=N errors=N" and exits 1 on any wrong
 * byte or failed call.  Built as a normal test helper (libc only); t/9005
 * also builds it with the shim linked in (-Wl,--wrap) under -fsanitize=thread. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *mount;
static char **paths;
static char **want;
static size_t *wantlen;
static size_t npaths;
static int rounds = 50;
static int shared_fd = -1;
static atomic_ullong total_bytes;
static atomic_int errors;

#define FAIL(...)                                                                        \
	do {                                                                             \
		fprintf(stderr, __VA_ARGS__);                                            \
		fputc('\n', stderr);                                                     \
		atomic_fetch_add(&errors, 1);                                            \
	} while (0)

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	char *b = malloc(st.st_size + 1);
	size_t got = 0;
	ssize_t n;
	while (b && (n = read(fd, b + got, st.st_size + 1 - got)) > 0)
		got += n;
	close(fd);
	*len = got;
	return b;
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void check_range(size_t f, const char *buf, size_t off, size_t n, const char *what)
{
	if (off + n > wantlen[f] || memcmp(buf, want[f] + off, n))
		FAIL("%s: wrong bytes from %s at %zu (+%zu)", paths[f], what, off, n);
	atomic_fetch_add(&total_bytes, n);
}

static void one_file(size_t f, uint64_t *rng, char *buf, size_t cap)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s", mount, paths[f]);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		FAIL("open %s: %s", path, strerror(errno));
		return;
	}
	struct stat a, b;
	if (fstat(fd, &a) || stat(path, &b) || a.st_ino != b.st_ino ||
	    (size_t)a.st_size != wantlen[f])
		FAIL("%s: fstat/stat disagree or wrong size", path);
	/* whole file, odd chunks */
	size_t off = 0;
	for (;;) {
		size_t want_n = 1 + next(rng) % 9000;
		if (want_n > cap)
			want_n = cap;
		ssize_t n = read(fd, buf, want_n);
		if (n < 0) {
			FAIL("read %s: %s", path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		check_range(f, buf, off, (size_t)n, "read");
		off += (size_t)n;
	}
	if (off != wantlen[f])
		FAIL("%s: read %zu bytes of %zu", path, off, wantlen[f]);
	/* random preads */
	for (int k = 0; k < 3 && wantlen[f]; k++) {
		size_t o = next(rng) % wantlen[f], n = 1 + next(rng) % 5000;
		if (n > cap)
			n = cap;
		ssize_t got = pread(fd, buf, n, (off_t)o);
		if (got < 0)
			FAIL("pread %s: %s", path, strerror(errno));
		else
			check_range(f, buf, o, (size_t)got, "pread");
	}
	/* a dup shares the offset */
	int d = dup(fd);
	if (d < 0) {
		FAIL("dup %s: %s", path, strerror(errno));
	} else {
		off_t o = wantlen[f] / 2;
		if (lseek(d, o, SEEK_SET) != o || lseek(fd, 0, SEEK_CUR) != o)
			FAIL("%s: dup does not share the offset", path);
		ssize_t got = read(fd, buf, cap < 100 ? cap : 100);
		if (got < 0)
			FAIL("read after lseek %s: %s", path, strerror(errno));
		else
			check_range(f, buf, (size_t)o, (size_t)got, "read after lseek");
		close(d);
	}
	close(fd);
	/* its directory */
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *sl = strrchr(dir, '/');
	if (sl)
		*sl = 0;
	DIR *dp = opendir(dir);
	if (!dp) {
		FAIL("opendir %s: %s", dir, strerror(errno));
	} else {
		int seen = 0;
		const char *base = strrchr(paths[f], '/');
		base = base ? base + 1 : paths[f];
		struct dirent *de;
		while ((de = readdir(dp)))
			seen |= !strcmp(de->d_name, base);
		if (!seen)
			FAIL("%s: not listed in its directory", path);
		closedir(dp);
	}
}

static void *worker(void *arg)
{
	size_t id = (size_t)(uintptr_t)arg;
	uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
	size_t cap = 1 << 20;
	char *buf = malloc(cap);
	for (int r = 0; r < rounds && buf; r++) {
		size_t f = r % 4 == 0 ? 0 : (id + r) % npaths;
		one_file(f, &rng, buf, cap);
		if (r % 8 == 7) {
			/* the virtual epoch list: computed on open, per file */
			char ep[PATH_MAX];
			snprintf(ep, sizeof(ep), "%s/.dstage/epochs/%d/all", mount, r % 3);
			int fd = open(ep, O_RDONLY);
			if (fd < 0) {
				FAIL("open %s: %s", ep, strerror(errno));
			} else {
				while (read(fd, buf, cap) > 0)
					;
				close(fd);
			}
			char rp[PATH_MAX];
			snprintf(ep, sizeof(ep), "%s/%s", mount, paths[r % npaths]);
			if (!realpath(ep, rp) || access(ep, R_OK))
				FAIL("realpath/access %s: %s", ep, strerror(errno));
		}
		if (wantlen[0]) {
			size_t o = next(&rng) % wantlen[0], n = 1 + next(&rng) % 3000;
			ssize_t got = pread(shared_fd, buf, n, (off_t)o);
			if (got < 0)
				FAIL("pread shared: %s", strerror(errno));
			else
				check_range(0, buf, o, (size_t)got, "shared pread");
		}
	}
	free(buf);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = 16, c;
	while ((c = getopt(argc, argv, "t:n:")) != -1) {
		if (c == 't')
			nthreads = atoi(optarg);
		else if (c == 'n')
			rounds = atoi(optarg);
		else
			return 2;
	}
	if (argc - optind != 2 || nthreads < 1 || nthreads > 1024) {
		fprintf(stderr, "usage: hard-mt [-t THREADS] [-n ROUNDS] MOUNT SRC < paths\n");
		return 2;
	}
	mount = argv[optind];
	const char *src = argv[optind + 1];
	char line[PATH_MAX];
	size_t cap = 0;
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (npaths == cap) {
			cap = cap ? 2 * cap : 64;
			paths = realloc(paths, cap * sizeof(*paths));
			want = realloc(want, cap * sizeof(*want));
			wantlen = realloc(wantlen, cap * sizeof(*wantlen));
		}
		char full[PATH_MAX * 2];
		snprintf(full, sizeof(full), "%s/%s", src, line);
		paths[npaths] = strdup(line);
		want[npaths] = slurp(full, &wantlen[npaths]);
		if (!want[npaths]) {
			fprintf(stderr, "hard-mt: %s: %s\n", full, strerror(errno));
			return 1;
		}
		npaths++;
	}
	if (!npaths)
		return 2;
	char p0[PATH_MAX * 2];
	snprintf(p0, sizeof(p0), "%s/%s", mount, paths[0]);
	shared_fd = open(p0, O_RDONLY);
	if (shared_fd < 0) {
		fprintf(stderr, "hard-mt: %s: %s\n", p0, strerror(errno));
		return 1;
	}
	pthread_t *t = calloc(nthreads, sizeof(*t));
	for (int i = 0; i < nthreads; i++)
		pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	close(shared_fd);
	printf("rounds=%d threads=%d bytes=%llu errors=%d\n", rounds, nthreads,
	       (unsigned long long)atomic_load(&total_bytes), atomic_load(&errors));
	return atomic_load(&errors) ? 1 : 0;
}
