/* SPDX-License-Identifier: BSD-3-Clause */
/* common.c: logging, memory, sizes, names and I/O helpers (libc only). */
#include "dscommon.h"
#include "dsstore.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------- */
const char *ds_strerror(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case DS_ECORRUPT: return "corrupt or inconsistent structure";
	case DS_ECHECKSUM: return "checksum mismatch";
	case DS_EFORMAT: return "unknown format or version";
	case DS_ENAME: return "unsafe name";
	case DS_ENOTREG: return "not a regular file";
	default: return strerror(err);
	}
}

/* ---- logging ------------------------------------------------------------ */
static const char *log_cmd __attribute__((section(".data"))); /* io/shim.h DS__HOT */
static char log_prefix[64];
static enum ds_log_level log_level = DS_LOG_WARN;

void ds_log_set_cmd(const char *cmd) { log_cmd = cmd; }

void ds_log_set_prefix(const char *prefix)
{
	snprintf(log_prefix, sizeof(log_prefix), "%s", prefix ? prefix : "");
}

void ds_log_init(int verbose)
{
	/* -v / -q on the command line win over $DSTAGE_LOG, which wins over
	 * the default (warn) */
	const char *e = getenv("DSTAGE_LOG");
	log_level = DS_LOG_WARN;
	if (e && !strcmp(e, "error")) log_level = DS_LOG_ERROR;
	else if (e && !strcmp(e, "warn")) log_level = DS_LOG_WARN;
	else if (e && !strcmp(e, "info")) log_level = DS_LOG_INFO;
	else if (e && !strcmp(e, "debug")) log_level = DS_LOG_DEBUG;
	if (verbose > 0 && log_level < DS_LOG_INFO)
		log_level = DS_LOG_INFO;
	if (verbose < 0)
		log_level = DS_LOG_ERROR;
}

void ds_log(enum ds_log_level lvl, const char *fmt, ...)
{
	char line[4096];
	int n;
	va_list ap;
	if (lvl > log_level)
		return;
	n = snprintf(line, sizeof(line), "dstage: %s%s%s%s", log_cmd ? log_cmd : "",
	             log_cmd ? ": " : "", log_prefix, lvl == DS_LOG_WARN ? "warning: " : "");
	va_start(ap, fmt);
	if (n >= 0 && (size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* one write: lines of concurrent ranks do not interleave */
	(void)ds_write_full(2, line, n);
}

/* ---- memory ------------------------------------------------------------- */
static void oom(size_t n)
{
	ds_error("out of memory (allocating %zu bytes)", n);
	exit(1);
}

void *ds_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) oom(n);
	return p;
}

void *ds_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);
	if (!p) oom(n * size);
	return p;
}

void *ds_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p) oom(n);
	return p;
}

char *ds_xstrdup(const char *s)
{
	char *p = strdup(s);
	if (!p) oom(strlen(s));
	return p;
}

void ds_free(void *pp)
{
	void **p = pp;
	free(*p);
	*p = NULL;
}

void ds_buf_reserve(struct ds_buf *b, size_t extra)
{
	if (b->len + extra <= b->cap)
		return;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra)
		cap *= 2;
	b->data = ds_xrealloc(b->data, cap);
	b->cap = cap;
}

void ds_buf_add(struct ds_buf *b, const void *p, size_t n)
{
	ds_buf_reserve(b, n);
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void ds_buf_release(struct ds_buf *b)
{
	ds_free(&b->data);
	b->len = b->cap = 0;
}

/* ---- numbers ------------------------------------------------------------ */
int ds_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int ds_parse_double(const char *s, double *out)
{
	char *end;
	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int ds_parse_size(const char *s, uint64_t *out)
{
	static const struct { const char *sfx; uint64_t mul; } units[] = {
		{"", 1}, {"B", 1},
		{"K", 1ull << 10}, {"KB", 1000}, {"KiB", 1ull << 10}, {"k", 1ull << 10},
		{"M", 1ull << 20}, {"MB", 1000000}, {"MiB", 1ull << 20},
		{"G", 1ull << 30}, {"GB", 1000000000}, {"GiB", 1ull << 30},
		{"T", 1ull << 40}, {"TB", 1000000000000ull}, {"TiB", 1ull << 40},
	};
	char *end;
	if (!s || !*s || *s == '-')
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || v < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].sfx))
			continue;
		double r = v * (double)units[i].mul;
		if (r > 1.8e19)
			return -ERANGE;
		*out = (uint64_t)r;
		return 0;
	}
	return -EINVAL;
}

char *ds_fmt_size(uint64_t n, char *buf, size_t len)
{
	static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)n;
	int i = 0;
	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i == 0)
		snprintf(buf, len, "%llu B", (unsigned long long)n);
	else
		snprintf(buf, len, "%.1f %s", v, u[i]);
	return buf;
}

double ds_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- names -------------------------------------------------------------- */
static int utf8_valid(const unsigned char *s, size_t len)
{
	size_t i = 0;
	while (i < len) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) { i++; continue; }
		if ((c & 0xe0) == 0xc0) { n = 1; cp = c & 0x1f; }
		else if ((c & 0xf0) == 0xe0) { n = 2; cp = c & 0x0f; }
		else if ((c & 0xf8) == 0xf0) { n = 3; cp = c & 0x07; }
		else return 0;
		if (i + n >= len)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

int ds_name_reserved(const char *path, size_t len, const char **why)
{
	static const char top[] = ".dstage";
	size_t n = sizeof(top) - 1;
	int r = len >= n && !memcmp(path, top, n) && (len == n || path[n] == '/');
	if (r && why)
		*why = "a top-level '.dstage' is reserved for the shim's virtual directory (rename it, "
		       "or leave it out with --exclude)";
	return r;
}

int ds_name_check(const char *path, size_t len, const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (len == 0) { *why = "empty name"; return -DS_ENAME; }
	if (len >= PATH_MAX) { *why = "name longer than PATH_MAX"; return -DS_ENAME; }
	if (path[0] == '/') { *why = "absolute name"; return -DS_ENAME; }
	if (memchr(path, '\0', len)) { *why = "NUL byte in name"; return -DS_ENAME; }
	if (memchr(path, '\n', len)) { *why = "newline in name"; return -DS_ENAME; }
	if (!utf8_valid((const unsigned char *)path, len)) { *why = "name is not valid UTF-8"; return -DS_ENAME; }
	size_t i = 0;
	while (i <= len) {
		size_t j = i;
		while (j < len && path[j] != '/')
			j++;
		size_t c = j - i;
		if (c == 0) { *why = "empty path component"; return -DS_ENAME; }
		if (c == 1 && path[i] == '.') { *why = "'.' path component"; return -DS_ENAME; }
		if (c == 2 && path[i] == '.' && path[i + 1] == '.') { *why = "'..' path component"; return -DS_ENAME; }
		if (c > NAME_MAX) { *why = "path component longer than NAME_MAX"; return -DS_ENAME; }
		i = j + 1;
	}
	return 0;
}

int ds_path_cmp(const char *a, const char *b)
{
	for (;; a++, b++) {
		unsigned ca = (unsigned char)*a, cb = (unsigned char)*b;
		if (ca == cb) {
			if (!ca)
				return 0;
			continue;
		}
		/* '/' ranks just above NUL, every other byte one higher than
		 * itself: a total order even for names holding byte 0x01 */
		ca = ca == '/' ? 1 : ca ? ca + 1 : 0;
		cb = cb == '/' ? 1 : cb ? cb + 1 : 0;
		return ca < cb ? -1 : 1;
	}
}

int ds_target_check(const char *link, size_t link_len, const char *target, size_t len,
                    const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (len == 0 || len >= PATH_MAX) {
		*why = len ? "symlink target longer than PATH_MAX" : "empty symlink target";
		return -DS_ENAME;
	}
	if (memchr(target, '\0', len)) {
		*why = "NUL byte in symlink target";
		return -DS_ENAME;
	}
	if (target[0] == '/') {
		*why = "absolute symlink target";
		return -EXDEV;
	}
	/* depth of the directory holding the link: the '/' in its path */
	size_t depth = 0;
	for (size_t i = 0; i < link_len; i++)
		depth += link[i] == '/';
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && target[j] != '/')
			j++;
		size_t c = j - i;
		if (c == 2 && target[i] == '.' && target[i + 1] == '.') {
			if (depth == 0) {
				*why = "symlink target outside the tree";
				return -EXDEV;
			}
			depth--;
		} else if (c && !(c == 1 && target[i] == '.')) {
			depth++;
		}
		i = j + 1;
	}
	return 0;
}

size_t ds_path_normalise(char *path)
{
	/* Bounded by the end found first: the writer can reach the reader (a
	 * path with nothing to drop), and its '/' then lands on the terminator;
	 * reading up to a NUL from there ran past the string. */
	const char *end = path + strlen(path);
	char *w = path;
	const char *r = path;
	/* path is absolute: always keep the leading '/' */
	*w++ = '/';
	if (r < end && *r == '/')
		r++;
	while (r < end) {
		while (r < end && *r == '/')
			r++;
		if (r == end)
			break;
		const char *s = r;
		while (r < end && *r != '/')
			r++;
		size_t n = r - s;
		if (n == 1 && s[0] == '.')
			continue;
		if (n == 2 && s[0] == '.' && s[1] == '.') {
			if (w > path + 1) {
				w--; /* drop the '/' that ends the kept part */
				while (w > path + 1 && w[-1] != '/')
					w--;
			}
			continue;
		}
		memmove(w, s, n);
		w += n;
		*w++ = '/';
	}
	if (w > path + 1)
		w--;
	*w = '\0';
	return w - path;
}

/* ---- I/O ---------------------------------------------------------------- */
int ds_pread_full(int fd, void *buf, size_t len, off_t off)
{
	char *p = buf;
	while (len) {
		ssize_t n = pread(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

int ds_pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;
	while (len) {
		ssize_t n = pwrite(fd, p, len, off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

int ds_write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= n;
	}
	return 0;
}

/* The temporary is PATH.tmp.<pid>.<tid>.<n>, made with O_EXCL: unique to
 * this call, so that threads (and processes) writing the same PATH at once
 * each rename only their own whole file, never another's half-written one
 * (one name per process did that: a torn outputs.status).  A name left by
 * an earlier process with the same pid and tid is stepped over, never
 * reused.  Mode: as open(2) gives it (the callers ask 0600). */
static _Atomic unsigned long tmp_ctr;

int ds_tmp_create(const char *path, char *tmp, size_t size, mode_t mode)
{
	int fd = -1;
	for (int tries = 0; fd < 0; tries++) {
		unsigned long n = atomic_fetch_add(&tmp_ctr, 1);
		int l = snprintf(tmp, size, "%s" DS_TMP_SUFFIX ".%ld.%ld.%lu", path, (long)getpid(),
		                 (long)syscall(SYS_gettid), n);
		if (l < 0 || (size_t)l >= size)
			return -ENAMETOOLONG;
		fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
		if (fd < 0 && (errno != EEXIST || tries == 100))
			return -errno;
	}
	return fd;
}

int ds_write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	char tmp[PATH_MAX];
	int fd = ds_tmp_create(path, tmp, sizeof(tmp), mode);
	if (fd < 0)
		return fd;
	int rc = ds_write_full(fd, buf, len);
	if (!rc && fsync(fd) < 0)
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	if (!rc && rename(tmp, path) < 0)
		rc = -errno;
	if (rc)
		unlink(tmp);
	return rc;
}

int ds_mkdir_p(const char *path, mode_t mode)
{
	char tmp[PATH_MAX];
	size_t len = strlen(path);
	if (len >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, len + 1);
	for (char *p = tmp + 1; ; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(tmp, mode) < 0 && errno != EEXIST)
				return -errno;
			*p = c;
			if (!c)
				break;
		}
	}
	struct stat st;
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

static int rm_at(int dfd, const char *name, dev_t dev)
{
	struct stat st;
	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) < 0 && errno != ENOENT ? -errno : 0;
	if (st.st_dev != dev)
		return -EXDEV;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		int r = rm_at(fd, de->d_name, dev);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}

int ds_open_regular(const char *path, int *fd)
{
	*fd = -1;
	int f = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (f < 0) {
		int e = errno;
		struct stat st;
		if (e == ENXIO && stat(path, &st) == 0 && !S_ISREG(st.st_mode))
			return -DS_ENOTREG; /* a socket */
		return -e;
	}
	struct stat st;
	if (fstat(f, &st) < 0) {
		int e = errno;
		close(f);
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(f);
		return -DS_ENOTREG;
	}
	/* reads of a regular file never block; clear the flag all the same */
	int fl = fcntl(f, F_GETFL);
	if (fl >= 0)
		(void)fcntl(f, F_SETFL, fl & ~O_NONBLOCK);
	*fd = f;
	return 0;
}

int ds_rm_rf(const char *path)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	return rm_at(AT_FDCWD, path, st.st_dev);
}

/* Sort pairs made in position order by id, then position: a stable LSD
 * radix sort on the id (two 16-bit digits) keeps equal ids in position
 * order.  qsort with a comparison function took ~1 s for the 3.5M remote
 * samples of a node's share of 14M here, on the way to every epoch's
 * prefetch (issue 27); this takes tens of ms.  The epoch cache (cache.c)
 * and the shim's epoch lists (io/epoch.c) sort with it.  0 or -ENOMEM. */
int ds_sort_id_at(struct ds_id_at *a, size_t n)
{
	struct ds_id_at *tmp = malloc((n + 1) * sizeof(*tmp));
	uint32_t *cnt = malloc(65536 * sizeof(uint32_t));
	if (!tmp || !cnt) {
		free(tmp);
		free(cnt);
		return -ENOMEM;
	}
	struct ds_id_at *from = a, *to = tmp;
	for (int shift = 0; shift < 32; shift += 16) {
		memset(cnt, 0, 65536 * sizeof(uint32_t));
		for (size_t i = 0; i < n; i++)
			cnt[(from[i].id >> shift) & 0xffff]++;
		uint32_t sum = 0;
		for (size_t d = 0; d < 65536; d++) {
			uint32_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			to[cnt[(from[i].id >> shift) & 0xffff]++] = from[i];
		struct ds_id_at *t = from;
		from = to;
		to = t;
	}
	/* two passes: the sorted pairs are back in a */
	free(tmp);
	free(cnt);
	return 0;
}
