/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/shim-bench.c: the reader loop of bench/shim.sh and bench/hosts.sh
 * (not part of dstage; libc only, each script compiles it).
 *
 *   shim-bench files ROOT LIST SECONDS   open+fstat+read+close of every file
 *                                        of LIST (relative to ROOT, in the
 *                                        given order) until SECONDS pass;
 *                                        prints "files/s bytes/s"
 *   shim-bench stat ROOT LIST SECONDS    stat rate
 *   shim-bench outside PATH SECONDS      open+fstat+read+close of a file
 *                                        outside the prefix: calls/s */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	const char *mode = argv[1];
	static char buf[4 << 20];
	char **paths = NULL;
	size_t n = 0, cap = 0;
	double secs;
	if (!strcmp(mode, "outside")) {
		paths = &argv[2];
		n = 1;
		secs = atof(argv[3]);
	} else {
		FILE *l = fopen(argv[3], "r");
		char line[PATH_MAX];
		if (!l)
			return 1;
		while (fgets(line, sizeof(line), l)) {
			line[strcspn(line, "\n")] = 0;
			if (n == cap)
				paths = realloc(paths, (cap = cap ? 2 * cap : 1024) * sizeof(*paths));
			if (asprintf(&paths[n++], "%s/%s", argv[2], line) < 0)
				return 1;
		}
		fclose(l);
		secs = atof(argv[4]);
	}
	double t0 = now(), t;
	unsigned long long files = 0, bytes = 0;
	struct stat st;
	do {
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(mode, "stat")) {
				if (stat(paths[i], &st) < 0)
					return 1;
				files++;
				continue;
			}
			int fd = open(paths[i], O_RDONLY);
			if (fd < 0 || fstat(fd, &st) < 0)
				return 1;
			ssize_t k;
			while ((k = read(fd, buf, sizeof(buf))) > 0)
				bytes += k;
			close(fd);
			files++;
		}
		t = now();
	} while (t - t0 < secs);
	printf("%.0f %.0f\n", files / (t - t0), bytes / (t - t0));
	return 0;
}
