/* SPDX-License-Identifier: BSD-3-Clause */
/* bench/reader.c: the C reader of bench/run.sh (not part of dstage).
 * Compiled by run.sh with gcc; plain libc, so the same binary runs
 * natively, on squashfuse and under LD_PRELOAD=libdstage-preload.so.
 *
 *   reader [-P PROCS] [-t SECS] [-s SEED] MODE ROOT LIST
 *
 * LIST holds paths relative to ROOT, one a line (LIST may itself be a path
 * under the shim's mount, e.g. MOUNT/.dstage/epochs/2/all).  The list is
 * loaded, PROCS processes are forked (default 1), released together, and
 * each goes through the whole list once (starting at its own offset, so
 * readers are not in lock step), repeated until SECS have passed when -t is
 * given.  Modes:
 *   read     open + fstat + read to EOF + close
 *   open     open + close
 *   stat     stat
 *   readdir  opendir + readdir to the end + closedir (LIST holds directories)
 *   walk     LIST is ignored ("-"): a recursive opendir/readdir + lstat of
 *            every entry under ROOT
 * Prints one line: "ops bytes seconds ops_per_s bytes_per_s", the seconds
 * being the wall time from the release of the readers to the end of the
 * last one (aggregate rates over all PROCS).  With -L (one reader), every
 * operation is timed on its own and three more figures follow: the median,
 * the 99th and the 10th percentile of the single operations' times, in
 * seconds (the 10th: the cost of the path itself on a busy machine).
 *
 *   reader outside MODE PATH SECS
 *            MODE read/stat/open on one PATH repeatedly: calls outside the
 *            shim's prefix; a sixth figure: ops per CPU second (user +
 *            system time of the process), which other jobs on the machine
 *            disturb much less than the wall time.
 *
 *   reader spawn PROG COUNT
 *            fork + exec PROG (no arguments) COUNT times, one after the
 *            other: prints "count seconds per_s per_cpu_s", the last per
 *            CPU second of this process and its children. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char **paths;
static double *lat; /* -L: each operation's time */
static size_t nlat, caplat;
static size_t npaths;
static char *buf;
#define BUFSZ (1u << 20)

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static double cpu_children(void)
{
	struct rusage ru;
	getrusage(RUSAGE_CHILDREN, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what, const char *p)
{
	fprintf(stderr, "reader: %s '%s': %s\n", what, p, strerror(errno));
	exit(1);
}

static int do_one(const char *mode, const char *p, uint64_t *bytes)
{
	struct stat st;
	if (!strcmp(mode, "read")) {
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			die("open", p);
		if (fstat(fd, &st) < 0)
			die("fstat", p);
		ssize_t k;
		while ((k = read(fd, buf, BUFSZ)) > 0)
			*bytes += (uint64_t)k;
		if (k < 0)
			die("read", p);
		close(fd);
		return 1;
	}
	if (!strcmp(mode, "open")) {
		int fd = open(p, O_RDONLY);
		if (fd < 0)
			die("open", p);
		close(fd);
		return 1;
	}
	if (!strcmp(mode, "stat")) {
		if (stat(p, &st) < 0)
			die("stat", p);
		return 1;
	}
	if (!strcmp(mode, "readdir")) {
		DIR *d = opendir(p);
		if (!d)
			die("opendir", p);
		int n = 0;
		while (readdir(d))
			n++;
		closedir(d);
		return n;
	}
	fprintf(stderr, "reader: mode '%s'?\n", mode);
	exit(2);
}

/* walk: entries seen (each lstat'ed) */
static uint64_t walk(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		die("opendir", dir);
	uint64_t n = 0;
	struct dirent *e;
	char p[PATH_MAX];
	struct stat st;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (lstat(p, &st) < 0)
			die("lstat", p);
		n++;
		if (S_ISDIR(st.st_mode))
			n += walk(p);
	}
	closedir(d);
	return n;
}

static void load(const char *root, const char *list)
{
	FILE *l = fopen(list, "r");
	if (!l)
		die("fopen", list);
	char line[PATH_MAX];
	size_t cap = 0;
	while (fgets(line, sizeof(line), l)) {
		line[strcspn(line, "\n")] = 0;
		if (!*line)
			continue;
		if (npaths == cap) {
			cap = cap ? 2 * cap : 4096;
			paths = realloc(paths, cap * sizeof(*paths));
			if (!paths)
				exit(1);
		}
		if (asprintf(&paths[npaths++], "%s/%s", root, line) < 0)
			exit(1);
	}
	fclose(l);
	if (!npaths) {
		fprintf(stderr, "reader: '%s' is empty\n", list);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	int procs = 1, c, timed = 0;
	double secs = 0;
	buf = malloc(BUFSZ);
	if (argc == 4 && !strcmp(argv[1], "spawn")) {
		int n = atoi(argv[3]), st;
		double t0 = now(), c0 = cpu() + cpu_children();
		for (int i = 0; i < n; i++) {
			pid_t pid = fork();
			if (pid == 0) {
				execl(argv[2], argv[2], (char *)NULL);
				_exit(127);
			}
			if (pid < 0 || waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
				die("spawn", argv[2]);
		}
		double t = now() - t0, c = cpu() + cpu_children() - c0;
		printf("%d %.6f %.1f %.1f\n", n, t, n / t, c > 0 ? n / c : 0.0);
		return 0;
	}
	if (argc == 5 && !strcmp(argv[1], "outside")) {
		const char *mode = argv[2], *p = argv[3];
		secs = atof(argv[4]);
		uint64_t ops = 0, bytes = 0;
		double t0 = now(), c0 = cpu(), t;
		do {
			for (int i = 0; i < 256; i++)
				ops += (uint64_t)do_one(mode, p, &bytes);
			t = now();
		} while (t - t0 < secs);
		double c = cpu() - c0;
		printf("%llu %llu %.6f %.1f %.1f %.1f\n", (unsigned long long)ops, (unsigned long long)bytes,
		       t - t0, ops / (t - t0), bytes / (t - t0), c > 0 ? ops / c : 0.0);
		return 0;
	}
	while ((c = getopt(argc, argv, "LP:t:")) != -1) {
		if (c == 'L')
			timed = 1;
		else if (c == 'P')
			procs = atoi(optarg);
		else if (c == 't')
			secs = atof(optarg);
		else
			return 2;
	}
	if (argc - optind != 3 || procs < 1 || (timed && procs != 1))
		return 2;
	const char *mode = argv[optind], *root = argv[optind + 1], *list = argv[optind + 2];
	int walking = !strcmp(mode, "walk");
	if (!walking)
		load(root, list);

	int go[2], res[2];
	if (pipe(go) < 0 || pipe(res) < 0)
		return 1;
	for (int k = 0; k < procs; k++) {
		pid_t pid = fork();
		if (pid < 0)
			return 1;
		if (pid)
			continue;
		close(go[1]);
		char g;
		if (read(go[0], &g, 1) != 1)
			_exit(1);
		uint64_t ops = 0, bytes = 0;
		double t0 = now();
		do {
			if (walking) {
				ops += walk(root);
			} else {
				size_t start = npaths * (size_t)k / (size_t)procs;
				for (size_t i = 0; i < npaths; i++) {
					double o0 = timed ? now() : 0;
					ops += (uint64_t)do_one(mode, paths[(start + i) % npaths], &bytes);
					if (timed) {
						if (nlat == caplat) {
							caplat = caplat ? 2 * caplat : 65536;
							lat = realloc(lat, caplat * sizeof(*lat));
							if (!lat)
								_exit(1);
						}
						lat[nlat++] = now() - o0;
					}
				}
			}
		} while (secs > 0 && now() - t0 < secs);
		uint64_t r[2] = {ops, bytes};
		if (write(res[1], r, sizeof(r)) != sizeof(r))
			_exit(1);
		if (timed) {
			double q[3] = {0, 0, 0};
			if (nlat) {
				qsort(lat, nlat, sizeof(*lat), cmp_double);
				q[0] = lat[nlat / 2];
				q[1] = lat[(size_t)((double)(nlat - 1) * 0.99)];
				q[2] = lat[nlat / 10];
			}
			if (write(res[1], q, sizeof(q)) != sizeof(q))
				_exit(1);
		}
		_exit(0);
	}
	close(go[0]);
	close(res[1]);
	double t0 = now();
	for (int k = 0; k < procs; k++)
		if (write(go[1], "g", 1) != 1)
			return 1;
	int bad = 0, st;
	while (wait(&st) > 0)
		if (!WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	double t = now() - t0;
	uint64_t ops = 0, bytes = 0, r[2];
	double q[3] = {0, 0, 0};
	while (read(res[0], r, sizeof(r)) == sizeof(r)) {
		ops += r[0];
		bytes += r[1];
		if (timed && read(res[0], q, sizeof(q)) != sizeof(q))
			bad = 1;
	}
	if (bad)
		return 1;
	printf("%llu %llu %.6f %.1f %.1f", (unsigned long long)ops, (unsigned long long)bytes, t,
	       ops / t, bytes / t);
	if (timed)
		printf(" %.9f %.9f %.9f", q[0], q[1], q[2]);
	printf("\n");
	return 0;
}
