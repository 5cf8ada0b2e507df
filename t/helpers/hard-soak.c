/* SPDX-License-Identifier: BSD-3-Clause */
/* hard-soak: a reader for the soak test (t/9900): run with the shim
 * preloaded, it follows this node's epoch lists at full speed and checks
 * every byte it reads:
 *
 *   hard-soak [-x] [-l L -n N] MOUNT SRC EPOCHS
 *
 *   -x      stop at the first error (exit 1 at once: for fault tests)
 *   MOUNT   the mount prefix; lists are MOUNT/.dstage/epochs/<e>/all (or
 *           <l>-of-<n> with -l/-n)
 *   SRC     the source tree, read natively (outside the prefix) once at start
 *           for the CRC-32C of every file
 *
 * For each epoch: read the list, then open, fstat, read whole (into one
 * reused buffer), close every file in it and compare its CRC-32C and size
 * with the source's.  One line per epoch:
 *   epoch=E files=N bytes=B secs=S rss_kb=R anon_kb=A fds=F errors=X
 * (rss_kb: VmRSS of this process, which counts the pages of the mapped node
 * store and epoch cache it touched; anon_kb: RssAnon, its own heap and
 * stacks, where a leak shows; fds: entries of /proc/self/fd).  Exits 1 on
 * any error or mismatch. */
#include "dscommon.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ref {
	char *path;
	uint32_t crc;
	uint64_t size;
};
static struct ref *refs;
static size_t nrefs, caprefs;
static char *buf;
static size_t bufcap;

static int ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ref *)a)->path, ((const struct ref *)b)->path);
}

static int slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if ((size_t)st.st_size + 1 > bufcap) {
		bufcap = (size_t)st.st_size + 1;
		buf = ds_xrealloc(buf, bufcap);
	}
	size_t got = 0;
	for (;;) {
		if (got == bufcap) {
			bufcap *= 2;
			buf = ds_xrealloc(buf, bufcap);
		}
		ssize_t n = read(fd, buf + got, bufcap - got);
		if (n < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return 0;
}

static void scan(const char *root, const char *rel)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s%s%s", root, *rel ? "/" : "", rel);
	DIR *d = opendir(dir);
	if (!d) {
		perror(dir);
		exit(1);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		char r[PATH_MAX], full[PATH_MAX * 2];
		snprintf(r, sizeof(r), "%s%s%s", rel, *rel ? "/" : "", de->d_name);
		snprintf(full, sizeof(full), "%s/%s", root, r);
		struct stat st;
		if (lstat(full, &st) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			scan(root, r);
		} else if (S_ISREG(st.st_mode)) {
			size_t len;
			if (slurp(full, &len)) {
				perror(full);
				exit(1);
			}
			if (nrefs == caprefs) {
				caprefs = caprefs ? 2 * caprefs : 1024;
				refs = ds_xrealloc(refs, caprefs * sizeof(*refs));
			}
			refs[nrefs].path = ds_xstrdup(r);
			refs[nrefs].crc = ds_crc32c(0, buf, len);
			refs[nrefs].size = len;
			nrefs++;
		}
	}
	closedir(d);
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl)) {
			v = atol(line + kl);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n - 1; /* the directory stream's own */
}

int main(int argc, char **argv)
{
	int c, l = -1, n = 0, stop = 0;
	while ((c = getopt(argc, argv, "xl:n:")) != -1) {
		if (c == 'x')
			stop = 1;
		else if (c == 'l')
			l = atoi(optarg);
		else if (c == 'n')
			n = atoi(optarg);
		else
			return 2;
	}
	if (argc - optind != 3 || (l >= 0) != (n > 0)) {
		fprintf(stderr, "usage: hard-soak [-x] [-l L -n N] MOUNT SRC EPOCHS\n");
		return 2;
	}
	const char *mount = argv[optind], *src = argv[optind + 1];
	int epochs = atoi(argv[optind + 2]);
	scan(src, "");
	qsort(refs, nrefs, sizeof(*refs), ref_cmp);
	int bad = 0;
	char *list = NULL;
	for (int e = 0; e < epochs; e++) {
		double t0 = ds_now();
		char lp[PATH_MAX];
		if (l >= 0)
			snprintf(lp, sizeof(lp), "%s/.dstage/epochs/%d/%d-of-%d", mount, e, l, n);
		else
			snprintf(lp, sizeof(lp), "%s/.dstage/epochs/%d/all", mount, e);
		size_t llen;
		int rc = slurp(lp, &llen);
		if (rc) {
			fprintf(stderr, "hard-soak: '%s': %s\n", lp, strerror(-rc));
			return 1;
		}
		free(list);
		list = ds_xmalloc(llen + 1);
		memcpy(list, buf, llen);
		list[llen] = 0;
		uint64_t files = 0, bytes = 0;
		int errors = 0;
		for (char *p = list, *nl; *p; p = nl) {
			nl = strchr(p, '\n');
			if (nl)
				*nl++ = 0;
			else
				nl = p + strlen(p);
			if (!*p)
				continue;
			struct ref key = {.path = p}, *r = bsearch(&key, refs, nrefs, sizeof(*refs), ref_cmp);
			char path[PATH_MAX * 2];
			snprintf(path, sizeof(path), "%s/%s", mount, p);
			size_t len;
			rc = slurp(path, &len);
			if (rc || !r || len != r->size || ds_crc32c(0, buf, len) != r->crc) {
				fprintf(stderr, "hard-soak: epoch %d: '%s': %s\n", e, p,
				        rc ? strerror(-rc) : !r ? "not in the source" : "bytes differ");
				if (stop)
					return 1;
				errors++;
				continue;
			}
			files++;
			bytes += len;
		}
		printf("epoch=%d files=%llu bytes=%llu secs=%.3f rss_kb=%ld anon_kb=%ld fds=%d errors=%d\n",
		       e, (unsigned long long)files, (unsigned long long)bytes, ds_now() - t0,
		       status_kb("VmRSS:"), status_kb("RssAnon:"), count_fds(), errors);
		fflush(stdout);
		bad += errors;
		if (!files)
			bad++;
	}
	free(list);
	return bad ? 1 : 0;
}
