/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-mt: concurrency through the shim (TAP).  Run preloaded, with MOUNT
 * the staged tree and SRC the same tree on a real file system (read
 * natively, outside the prefix, as the reference):
 *
 *   shim-mt MOUNT SRC FILE...
 *
 *  - 16 threads open, read in odd chunk sizes and close every FILE at once;
 *  - 16 threads share one descriptor: every read is atomic, together they
 *    read each byte exactly once;
 *  - fork: the child keeps reading the parent's descriptor at its offset
 *    and opens new files (DataLoader workers);
 *  - a signal handler calls pread on a staged descriptor while the main
 *    thread reads. */
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *mount, *src;
static char **files;
static int nfiles;
static char **want;
static size_t *wantlen;
static atomic_int bad;

static char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	char *b = malloc(st.st_size + 1);
	size_t got = 0;
	ssize_t n;
	while ((n = read(fd, b + got, st.st_size + 1 - got)) > 0)
		got += n;
	close(fd);
	*len = got;
	return b;
}

static void *reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	char path[PATH_MAX];
	for (int round = 0; round < 3; round++)
		for (int k = 0; k < nfiles; k++) {
			int i = (k + seed) % nfiles;
			snprintf(path, sizeof(path), "%s/%s", mount, files[i]);
			size_t len;
			char *b = slurp(path, &len);
			if (!b || len != wantlen[i] || memcmp(b, want[i], len))
				atomic_fetch_add(&bad, 1);
			free(b);
		}
	return NULL;
}

static int shared_fd;
static atomic_size_t shared_total;

static void *shared_reader(void *arg)
{
	(void)arg;
	char buf[777];
	for (;;) {
		ssize_t n = read(shared_fd, buf, sizeof(buf));
		if (n <= 0)
			break;
		atomic_fetch_add(&shared_total, n);
	}
	return NULL;
}

static volatile sig_atomic_t handled, handler_bad;
static int sig_fd;
static void on_alarm(int sig)
{
	(void)sig;
	char b[64];
	int saved = errno;
	if (pread(sig_fd, b, sizeof(b), 0) != (ssize_t)(wantlen[0] < 64 ? wantlen[0] : 64) ||
	    memcmp(b, want[0], wantlen[0] < 64 ? wantlen[0] : 64))
		handler_bad = 1;
	handled++;
	errno = saved;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: shim-mt MOUNT SRC FILE...\n");
		return 2;
	}
	mount = argv[1];
	src = argv[2];
	files = argv + 3;
	nfiles = argc - 3;
	want = calloc(nfiles, sizeof(*want));
	wantlen = calloc(nfiles, sizeof(*wantlen));
	char path[PATH_MAX];
	for (int i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/%s", src, files[i]);
		want[i] = slurp(path, &wantlen[i]);
		if (!want[i])
			skip_all("cannot read the reference tree");
	}

	pthread_t t[16];
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, reader, (void *)(uintptr_t)(i * 7));
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	is(bad, 0, "16 threads x %d files x 3 rounds: every byte right", nfiles);

	/* the largest file, shared by 16 threads through one descriptor */
	int big = 0;
	for (int i = 1; i < nfiles; i++)
		if (wantlen[i] > wantlen[big])
			big = i;
	snprintf(path, sizeof(path), "%s/%s", mount, files[big]);
	shared_fd = open(path, O_RDONLY);
	for (int i = 0; i < 16; i++)
		pthread_create(&t[i], NULL, shared_reader, NULL);
	for (int i = 0; i < 16; i++)
		pthread_join(t[i], NULL);
	is(shared_total, wantlen[big], "16 threads on one descriptor read each byte once (%zu)",
	   wantlen[big]);
	close(shared_fd);

	/* fork: the child goes on from the parent's offset, opens more */
	snprintf(path, sizeof(path), "%s/%s", mount, files[big]);
	int fd = open(path, O_RDONLY);
	char head[100];
	ok(read(fd, head, 100) == 100 || wantlen[big] < 100, "parent reads the first 100 bytes");
	pid_t pid = fork();
	if (pid == 0) {
		char b[100];
		ssize_t n = read(fd, b, 100);
		int good = wantlen[big] < 200 || (n == 100 && !memcmp(b, want[big] + 100, 100));
		for (int i = 0; i < nfiles && good; i++) {
			snprintf(path, sizeof(path), "%s/%s", mount, files[i]);
			size_t len;
			char *x = slurp(path, &len);
			good = x && len == wantlen[i] && !memcmp(x, want[i], len);
			free(x);
		}
		/* a grandchild too, with threads in between */
		pid_t g = fork();
		if (g == 0)
			_exit(read(fd, b, 10) >= 0 ? 0 : 1);
		int gs;
		waitpid(g, &gs, 0);
		_exit(good && WIFEXITED(gs) && WEXITSTATUS(gs) == 0 ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	   "a forked child reads the parent's descriptor at its offset and opens new files");
	char b[100];
	off_t at = lseek(fd, 0, SEEK_CUR);
	ok(wantlen[big] < 210 || (at == 210 && read(fd, b, 100) == 100 && !memcmp(b, want[big] + 210, 100)),
	   "the offset is shared with the children, as the kernel's (%lld)", (long long)at);
	close(fd);

	/* a signal handler reading while the main thread reads */
	snprintf(path, sizeof(path), "%s/%s", mount, files[0]);
	sig_fd = open(path, O_RDONLY);
	struct sigaction sa = {.sa_handler = on_alarm};
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval it = {{0, 200}, {0, 200}};
	setitimer(ITIMER_REAL, &it, NULL);
	int loops = 0;
	while (handled < 200 && loops < 2000000) {
		size_t len;
		snprintf(path, sizeof(path), "%s/%s", mount, files[loops % nfiles]);
		char *x = slurp(path, &len);
		if (!x || len != wantlen[loops % nfiles])
			atomic_fetch_add(&bad, 1);
		free(x);
		loops++;
	}
	struct itimerval off = {{0, 0}, {0, 0}};
	setitimer(ITIMER_REAL, &off, NULL);
	ok(handled >= 200 && !handler_bad && bad == 0, "signal handlers read (%d) while the program reads",
	   (int)handled);
	return done_testing();
}
