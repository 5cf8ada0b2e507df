/* SPDX-License-Identifier: BSD-3-Clause */
/* shim-fd: the descriptor family on every path read from stdin, relative to
 * ROOT: open with each read-only flag combination (and the fortified and
 * 64-bit opens), read in several chunk sizes, pread, readv, preadv, lseek
 * with every whence, dup/dup2/dup3/fcntl sharing one offset, F_GETFD,
 * F_GETFL, mmap (private and shared, at an offset, the zeroed tail),
 * flock, posix_fadvise, sendfile, copy_file_range, close.  One line per
 * call (see shim-util.h); no descriptor numbers printed.
 *
 *   shim-fd ROOT SCRATCH < paths   SCRATCH: a real directory for copies */
#include "shim-util.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define R(fmt, ...) printf("%s '%s': " fmt "\n", what, p, __VA_ARGS__)

static char *big;
static size_t bigcap = 1 << 24;

static void out(const char *what, const char *p, long rc, int err)
{
	printf("%s '%s': %ld %s\n", what, p, rc, errname(rc < 0 ? err : 0));
}

/* read everything with chunk n: total and hash */
static void read_all(const char *p, int fd, size_t n)
{
	size_t total = 0;
	ssize_t k;
	unsigned long long h = 0;
	errno = 0;
	while ((k = read(fd, big, n)) > 0) {
		h ^= fnv(big, k) + total;
		total += k;
	}
	printf("read(%zu) '%s': total=%zu hash=%llx last=%zd %s\n", n, p, total, h, k,
	       errname(k < 0 ? errno : 0));
}

static void opens(const char *root, const char *p, const char *abs)
{
	static const struct { const char *n; int f; } fl[] = {
		{"rdonly", O_RDONLY}, {"directory", O_RDONLY | O_DIRECTORY},
		{"nofollow", O_RDONLY | O_NOFOLLOW}, {"path", O_PATH},
		{"path|nofollow", O_PATH | O_NOFOLLOW},
		{"nonblock|noatime", O_RDONLY | O_NONBLOCK}, {"cloexec", O_RDONLY | O_CLOEXEC},
	};
	(void)root;
	for (size_t i = 0; i < sizeof(fl) / sizeof(fl[0]); i++) {
		errno = 0;
		int fd = open(abs, fl[i].f, 0644);
		int e = errno;
		printf("open(%s) '%s': %s", fl[i].n, p, fd < 0 ? errname(e) : "ok");
		if (fd >= 0) {
			int gfl = fcntl(fd, F_GETFL);
			printf(" getfl=%o getfd=%d", gfl & (O_ACCMODE | O_APPEND | O_NONBLOCK | O_PATH | 0100000),
			       fcntl(fd, F_GETFD));
			char c;
			errno = 0;
			ssize_t k = read(fd, &c, 1);
			printf(" read1=%zd %s", k, errname(k < 0 ? errno : 0));
			struct stat st;
			printf(" fstat=%d", fstat(fd, &st));
			close(fd);
		}
		printf("\n");
	}
	/* the other generations of open */
	int (*o64)(const char *, int, ...) = (int (*)(const char *, int, ...))dlsym(RTLD_DEFAULT, "open64");
	int (*o2)(const char *, int) = (int (*)(const char *, int))dlsym(RTLD_DEFAULT, "__open_2");
	int fd = o64(abs, O_RDONLY);
	out("open64", p, fd < 0 ? -1 : 0, errno);
	if (fd >= 0)
		close(fd);
	fd = o2(abs, O_RDONLY);
	out("__open_2", p, fd < 0 ? -1 : 0, errno);
	if (fd >= 0)
		close(fd);
}

static void file_ops(const char *p, const char *abs, const char *scratch)
{
	const char *what;
	int fd = open(abs, O_RDONLY);
	if (fd < 0)
		return;
	struct stat st;
	fstat(fd, &st);
	off_t size = st.st_size;
	static const size_t chunks[] = {1, 100, 4095, 4096, 65536, 1 << 20};
	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		if (chunks[i] == 1 && size > 200000)
			continue;
		lseek(fd, 0, SEEK_SET);
		read_all(p, fd, chunks[i]);
	}
	/* pread at interesting offsets */
	off_t offs[] = {0, 1, size / 2, size - 1, size, size + 10, 4095, 4096, -1};
	what = "pread";
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		errno = 0;
		ssize_t k = pread(fd, big, 5000, offs[i]);
		R("off=%lld %zd %s hash=%llx", (long long)offs[i], k, errname(k < 0 ? errno : 0),
		  k > 0 ? fnv(big, k) : 0ull);
	}
	/* readv / preadv across three buffers */
	char a[7], b[4096], c[10000];
	struct iovec iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};
	memset(c, 0, sizeof(c));
	lseek(fd, 3, SEEK_SET);
	ssize_t k = readv(fd, iov, 3);
	what = "readv";
	R("%zd pos=%lld hash=%llx,%llx,%llx", k, (long long)lseek(fd, 0, SEEK_CUR), fnv(a, 7), fnv(b, 4096),
	  fnv(c, 100));
	memset(c, 0, sizeof(c));
	k = preadv(fd, iov, 3, size > 5000 ? size - 5000 : 0);
	what = "preadv";
	R("%zd pos=%lld hash=%llx", k, (long long)lseek(fd, 0, SEEK_CUR), fnv(c, sizeof(c)));
	/* lseek */
	what = "lseek";
	static const int wh[] = {SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE};
	off_t so[] = {0, 5, -1, -size - 1, size, size + 100};
	for (size_t w = 0; w < 5; w++)
		for (size_t i = 0; i < sizeof(so) / sizeof(so[0]); i++) {
			lseek(fd, 10, SEEK_SET);
			errno = 0;
			off_t r = lseek(fd, so[i], wh[w]);
			R("whence=%d off=%lld -> %lld %s", wh[w], (long long)so[i], (long long)r,
			  errname(r < 0 ? errno : 0));
		}
	/* dup'ed descriptors share the offset */
	what = "dup";
	lseek(fd, 0, SEEK_SET);
	int d1 = dup(fd), d2 = dup2(fd, 200), d3 = dup3(fd, 201, O_CLOEXEC);
	int d4 = fcntl(fd, F_DUPFD, 150), d5 = fcntl(fd, F_DUPFD_CLOEXEC, 150);
	char x[10];
	ssize_t r1 = read(fd, x, 3), r2 = read(d1, x, 3), r3 = read(d2, x, 3), r4 = read(d3, x, 3),
	        r5 = read(d4, x, 3), r6 = read(d5, x, 3);
	R("ok=%d,%d,%d,%d,%d getfd=%d,%d,%d,%d,%d reads=%zd%zd%zd%zd%zd%zd pos=%lld", d1 >= 0, d2 == 200,
	  d3 == 201, d4 >= 150, d5 >= 150, fcntl(d1, F_GETFD), fcntl(d2, F_GETFD), fcntl(d3, F_GETFD),
	  fcntl(d4, F_GETFD), fcntl(d5, F_GETFD), r1, r2, r3, r4, r5, r6, (long long)lseek(d5, 0, SEEK_CUR));
	fcntl(d1, F_SETFD, FD_CLOEXEC);
	fcntl(d3, F_SETFD, 0);
	int e1 = dup2(fd, fd), e2 = dup3(fd, fd, 0);
	int ee2 = errno;
	R("setfd=%d,%d dup2self=%d dup3self=%d %s", fcntl(d1, F_GETFD), fcntl(d3, F_GETFD), e1 == fd, e2,
	  errname(ee2));
	close(d1);
	close(d2);
	close(d3);
	close(d4);
	errno = 0;
	k = read(d1, x, 1);
	R("read after close: %zd %s; others still read: %zd", k, errname(errno), read(d5, x, 1));
	close(d5);
	/* mmap */
	what = "mmap";
	long pg = sysconf(_SC_PAGESIZE);
	if (size > 0) {
		for (int shared = 0; shared < 2; shared++) {
			char *m = mmap(NULL, size, PROT_READ, shared ? MAP_SHARED : MAP_PRIVATE, fd, 0);
			if (m == MAP_FAILED) {
				R("shared=%d %s", shared, errname(errno));
				continue;
			}
			size_t tail = (size % pg) ? pg - size % pg : 0;
			int zero = 1;
			for (size_t i = 0; i < tail; i++)
				zero &= m[size + i] == 0;
			R("shared=%d hash=%llx tailzero=%d", shared, fnv(m, size), zero);
			munmap(m, size);
		}
		if (size > pg) {
			char *m = mmap(NULL, size - pg, PROT_READ, MAP_PRIVATE, fd, pg);
			R("at page: hash=%llx", m == MAP_FAILED ? 0 : fnv(m, size - pg));
			if (m != MAP_FAILED)
				munmap(m, size - pg);
		}
		char *m = mmap(NULL, 100, PROT_READ, MAP_PRIVATE, fd, 1);
		R("unaligned: %s", m == MAP_FAILED ? errname(errno) : "ok");
		m = mmap(NULL, 0, PROT_READ, MAP_PRIVATE, fd, 0);
		R("len0: %s", m == MAP_FAILED ? errname(errno) : "ok");
	}
	/* advice and locks: HDF5 locks on open */
	what = "misc";
	R("flock=%d,%d fadvise=%d,%d", flock(fd, LOCK_SH), flock(fd, LOCK_UN),
	  posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED), posix_fadvise(fd, 0, 0, 99));
	/* copying out: sendfile and copy_file_range into a real file */
	char dst[PATH_MAX];
	snprintf(dst, sizeof(dst), "%s/copy", scratch);
	int o = open(dst, O_RDWR | O_CREAT | O_TRUNC, 0644);
	off_t so2 = 1;
	lseek(fd, 0, SEEK_SET);
	ssize_t s1 = sendfile(o, fd, NULL, 3000);
	ssize_t s2 = sendfile(o, fd, &so2, size);
	off64_t ci = 2;
	ssize_t s3 = copy_file_range(fd, &ci, o, NULL, 5000, 0);
	ssize_t s4 = copy_file_range(fd, NULL, o, NULL, 100, 0);
	struct stat ost;
	fstat(o, &ost);
	ssize_t got = pread(o, big, bigcap, 0);
	what = "copy";
	R("sendfile=%zd,%zd off=%lld cfr=%zd,%zd ci=%lld pos=%lld total=%lld hash=%llx", s1, s2,
	  (long long)so2, s3, s4, (long long)ci, (long long)lseek(fd, 0, SEEK_CUR), (long long)ost.st_size,
	  got > 0 ? fnv(big, got) : 0);
	close(o);
	unlink(dst);
	errno = 0;
	int cr = close(fd);
	R("close=%d", cr);
}

static void dir_ops(const char *p, const char *abs)
{
	const char *what = "dirfd";
	int fd = open(abs, O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return;
	char c;
	errno = 0;
	ssize_t k = read(fd, &c, 1);
	int e = errno;
	errno = 0;
	void *m = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
	R("read=%zd %s mmap=%s lseek0=%lld", k, errname(e), m == MAP_FAILED ? errname(errno) : "ok",
	  (long long)lseek(fd, 0, SEEK_SET));
	/* openat relative to a directory descriptor */
	int f2 = openat(fd, "x.txt", O_RDONLY);
	int f3 = openat(fd, "..", O_RDONLY | O_DIRECTORY);
	int f4 = openat(fd, "missing", O_RDONLY);
	int e4 = errno;
	R("openat=%d,%d,%d %s", f2 >= 0, f3 >= 0, f4 >= 0, errname(e4));
	if (f2 >= 0)
		close(f2);
	if (f3 >= 0)
		close(f3);
	close(fd);
	/* O_PATH descriptors: fstat yes, read no */
	fd = open(abs, O_PATH);
	errno = 0;
	k = read(fd, &c, 1);
	R("opath read=%zd %s", k, errname(errno));
	close(fd);
}

int main(int argc, char **argv)
{
	size_t n;
	if (argc != 3) {
		fprintf(stderr, "usage: shim-fd ROOT SCRATCH < paths\n");
		return 2;
	}
	const char *root = argv[1], *scratch = argv[2];
	char **paths = read_paths(&n);
	char abs[PATH_MAX * 2];
	big = malloc(bigcap);
	setvbuf(stdout, NULL, _IOFBF, 1 << 16);
	for (size_t i = 0; i < n; i++) {
		const char *p = paths[i];
		join(abs, sizeof(abs), root, p);
		opens(root, p, abs);
		struct stat st;
		if (stat(abs, &st) == 0 && S_ISREG(st.st_mode))
			file_ops(p, abs, scratch);
		if (stat(abs, &st) == 0 && S_ISDIR(st.st_mode))
			dir_ops(p, abs);
	}
	return 0;
}
