/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-aio: POSIX AIO on FILE, everything it does printed, so that a run on a
 * staged file and one on its native copy can be compared (t/2106).
 *
 *     shim-aio FILE OTHER
 *
 * OTHER is a native file (never staged) that lio_listio mixes with FILE.
 * Every wait is bounded: alarm(20) ends a hang with SIGALRM (exit 142 from
 * a shell), a failure, never a stuck suite. */
#include <aio.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static volatile sig_atomic_t got_sig, got_val;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int thread_val;

static void on_sig(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	got_sig = sig;
	got_val = si->si_code == SI_ASYNCIO ? si->si_value.sival_int : -1;
}

static void on_thread(union sigval v)
{
	pthread_mutex_lock(&mu);
	thread_val = v.sival_int;
	pthread_cond_signal(&cv);
	pthread_mutex_unlock(&mu);
}

/* wait for cb with aio_suspend, then print its status and a CRC of the bytes */
static void finish(const char *what, struct aiocb *cb, size_t n)
{
	const struct aiocb *l[1] = {cb};
	while (aio_error(cb) == EINPROGRESS)
		aio_suspend(l, 1, NULL);
	int e = aio_error(cb);
	ssize_t r = aio_return(cb);
	unsigned long crc = 0;
	if (r > 0)
		crc = crc32(0, (const unsigned char *)cb->aio_buf, (unsigned)r);
	printf("%s: error %s return %zd crc %08lx (asked %zu)\n", what, e ? strerror(e) : "0", r,
	       crc, n);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: shim-aio FILE OTHER\n");
		return 2;
	}
	alarm(20);
	int fd = open(argv[1], O_RDONLY), other = open(argv[2], O_RDONLY);
	if (fd < 0 || other < 0) {
		perror("open");
		return 1;
	}
	struct stat st;
	if (fstat(fd, &st) < 0)
		return 1;
	size_t size = (size_t)st.st_size, big = size + 100;
	char *buf = malloc(big), *buf2 = malloc(big);
	if (!buf || !buf2)
		return 1;
	/* plain reads: start, middle, across and past the end, all of it */
	off_t offs[] = {0, 1, (off_t)size / 2, (off_t)size - 3, (off_t)size, (off_t)size + 10};
	size_t lens[] = {4096, 100000, 65536, 10, 10, 10};
	for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		struct aiocb cb;
		memset(&cb, 0, sizeof(cb));
		cb.aio_fildes = fd;
		cb.aio_buf = buf;
		cb.aio_nbytes = lens[i] < big ? lens[i] : big;
		cb.aio_offset = offs[i] < 0 ? 0 : offs[i];
		cb.aio_sigevent.sigev_notify = SIGEV_NONE;
		char what[64];
		snprintf(what, sizeof(what), "aio_read at %lld", (long long)cb.aio_offset);
		if (aio_read(&cb) < 0)
			printf("%s: %s\n", what, strerror(errno));
		else
			finish(what, &cb, cb.aio_nbytes);
	}
	struct aiocb whole;
	memset(&whole, 0, sizeof(whole));
	whole.aio_fildes = fd;
	whole.aio_buf = buf;
	whole.aio_nbytes = big;
	if (aio_read(&whole) == 0)
		finish("aio_read whole", &whole, big);

	/* the 64 names (one layout on 64-bit, separate symbols) */
	struct aiocb64 w64, *l64[1] = {&w64};
	memset(&w64, 0, sizeof(w64));
	w64.aio_fildes = fd;
	w64.aio_buf = buf;
	w64.aio_nbytes = 1234;
	w64.aio_offset = 5;
	if (aio_read64(&w64) < 0)
		printf("aio_read64: %s\n", strerror(errno));
	else {
		const struct aiocb64 *cl64[1] = {&w64};
		while (aio_error64(&w64) == EINPROGRESS)
			aio_suspend64(cl64, 1, NULL);
		ssize_t r64 = aio_return64(&w64);
		printf("aio_read64: error %d return %zd crc %08lx\n", aio_error64(&w64), r64,
		       r64 > 0 ? crc32(0, (const unsigned char *)buf, (unsigned)r64) : 0ul);
	}
	w64.aio_lio_opcode = LIO_READ;
	w64.aio_offset = 77;
	printf("lio_listio64: %d", lio_listio64(LIO_WAIT, l64, 1, NULL));
	printf(" return %zd crc %08lx\n", aio_return64(&w64),
	       crc32(0, (const unsigned char *)buf, 1234));
	printf("aio_cancel64: %d\n", aio_cancel64(fd, &w64) == AIO_ALLDONE);

	/* a signal with its value */
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_sig;
	sa.sa_flags = SA_SIGINFO;
	sigaction(SIGRTMIN + 1, &sa, NULL);
	struct aiocb s;
	memset(&s, 0, sizeof(s));
	s.aio_fildes = fd;
	s.aio_buf = buf;
	s.aio_nbytes = 777;
	s.aio_offset = 3;
	s.aio_sigevent.sigev_notify = SIGEV_SIGNAL;
	s.aio_sigevent.sigev_signo = SIGRTMIN + 1;
	s.aio_sigevent.sigev_value.sival_int = 4242;
	if (aio_read(&s) == 0) {
		finish("SIGEV_SIGNAL read", &s, 777);
		while (!got_sig)
			usleep(1000);
		printf("signal %s, value %d\n", got_sig == SIGRTMIN + 1 ? "SIGRTMIN+1" : "other",
		       (int)got_val);
	}
	/* a thread */
	struct aiocb t;
	memset(&t, 0, sizeof(t));
	t.aio_fildes = fd;
	t.aio_buf = buf;
	t.aio_nbytes = 5000;
	t.aio_offset = 11;
	t.aio_sigevent.sigev_notify = SIGEV_THREAD;
	t.aio_sigevent.sigev_notify_function = on_thread;
	t.aio_sigevent.sigev_value.sival_int = 99;
	if (aio_read(&t) == 0) {
		pthread_mutex_lock(&mu);
		while (!thread_val)
			pthread_cond_wait(&cv, &mu);
		pthread_mutex_unlock(&mu);
		finish("SIGEV_THREAD read", &t, 5000);
		printf("thread value %d\n", thread_val);
	}
	/* lio_listio, waiting, FILE mixed with OTHER */
	struct aiocb a, b, c, *list[4] = {&a, NULL, &b, &c};
	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	memset(&c, 0, sizeof(c));
	a.aio_fildes = fd, a.aio_buf = buf, a.aio_nbytes = 3000, a.aio_offset = 7;
	a.aio_lio_opcode = LIO_READ;
	b.aio_fildes = other, b.aio_buf = buf2, b.aio_nbytes = 100, b.aio_offset = 0;
	b.aio_lio_opcode = LIO_READ;
	c.aio_lio_opcode = LIO_NOP;
	int rc = lio_listio(LIO_WAIT, list, 4, NULL);
	printf("lio_listio LIO_WAIT: %d\n", rc);
	finish("lio a (FILE)", &a, 3000);
	finish("lio b (OTHER)", &b, 100);
	/* lio_listio, not waiting, a signal at the end */
	got_sig = 0;
	struct sigevent sev;
	memset(&sev, 0, sizeof(sev));
	sev.sigev_notify = SIGEV_SIGNAL;
	sev.sigev_signo = SIGRTMIN + 1;
	sev.sigev_value.sival_int = 17;
	a.aio_offset = 1000;
	rc = lio_listio(LIO_NOWAIT, list, 4, &sev);
	printf("lio_listio LIO_NOWAIT: %d\n", rc);
	finish("lio a again", &a, 3000);
	finish("lio b again", &b, 100);
	while (!got_sig)
		usleep(1000);
	printf("list signal value %d\n", (int)got_val);
	/* a write, an fsync, a cancel, a bad offset */
	struct aiocb w;
	memset(&w, 0, sizeof(w));
	w.aio_fildes = fd, w.aio_buf = buf, w.aio_nbytes = 10;
	if (aio_write(&w) < 0)
		printf("aio_write: %s\n", strerror(errno));
	else
		finish("aio_write", &w, 10);
	struct aiocb fs;
	memset(&fs, 0, sizeof(fs));
	fs.aio_fildes = fd;
	if (aio_fsync(O_SYNC, &fs) < 0)
		printf("aio_fsync: %s\n", strerror(errno));
	else
		finish("aio_fsync", &fs, 0);
	rc = aio_cancel(fd, NULL);
	printf("aio_cancel: %s\n", rc == AIO_ALLDONE       ? "AIO_ALLDONE"
	                           : rc == AIO_CANCELED    ? "AIO_CANCELED"
	                           : rc == AIO_NOTCANCELED ? "AIO_NOTCANCELED"
	                                                   : strerror(errno));
	struct aiocb bad;
	memset(&bad, 0, sizeof(bad));
	bad.aio_fildes = fd, bad.aio_buf = buf, bad.aio_nbytes = 10, bad.aio_offset = -5;
	if (aio_read(&bad) < 0)
		printf("negative offset: submit %s\n", strerror(errno));
	else
		finish("negative offset", &bad, 10);
	close(fd);
	close(other);
	return 0;
}
