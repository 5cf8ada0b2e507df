/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-faults: what a fresh reader of many files pays in page faults
 * (issue 27; t/2110):
 *
 *   shim-faults PREFIX [SIZE [CHUNK]] <LIST
 *
 * LIST: "path k" lines (ixscale paths): opens PREFIX/path, reads it to its
 * end (one read, or reads of CHUNK bytes), closes it, and checks it holds
 * SIZE (8) bytes, "%07x\n" of k then zeros.  The first file starts the
 * shim (maps the store: a constant); the minor faults of this process from
 * then to the last file (getrusage) are what the files cost.  Prints
 * "files N", "bad N" (files that did not read back), "faults_per_file X". */
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static long minflt(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return u.ru_minflt;
}

static char got[1 << 16];

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 4) {
		fprintf(stderr, "usage: shim-faults PREFIX [SIZE [CHUNK]] <LIST\n");
		return 2;
	}
	/* files of SIZE bytes (8): each read whole in one read, as Python's
	 * f.read() does, or in reads of CHUNK bytes, as a buffered reader */
	size_t size = argc >= 3 ? strtoul(argv[2], NULL, 0) : 8;
	size_t chunk = argc == 4 ? strtoul(argv[3], NULL, 0) : sizeof(got) - 1;
	char line[PATH_MAX + 32], path[2 * PATH_MAX], want[32];
	if (size < 8 || size > sizeof(got) - 1 || chunk < 1 || chunk > sizeof(got) - 1)
		return 2;
	long files = 0, bad = 0, f0 = 0;
	while (fgets(line, sizeof(line), stdin)) {
		char rel[PATH_MAX];
		unsigned long long k;
		if (sscanf(line, "%4095s %llx", rel, &k) != 2)
			continue;
		snprintf(path, sizeof(path), "%s/%s", argv[1], rel);
		snprintf(want, sizeof(want), "%07llx\n", k);
		int fd = open(path, O_RDONLY);
		ssize_t n = fd < 0 ? -1 : 0, r = 1;
		while (fd >= 0 && r > 0 && (size_t)n < sizeof(got) - chunk) {
			r = read(fd, got + n, chunk);
			n = r < 0 ? -1 : n + r;
		}
		if (fd >= 0)
			close(fd);
		int ok = n == (ssize_t)size && !memcmp(got, want, 8);
		for (size_t i = 8; ok && i < size; i++)
			ok = !got[i];
		bad += !ok;
		if (files++ == 0)
			f0 = minflt();
	}
	long f1 = minflt();
	printf("files %ld\nbad %ld\n", files, bad);
	printf("faults_per_file %.4f\n", files > 1 ? (double)(f1 - f0) / (double)(files - 1) : 0.0);
	return 0;
}
