/* SPDX-License-Identifier: BSD-3-Clause */
/* ixscale: the node index at millions of names (issue 27), through the
 * public API only (so the same source measures any index version):
 *
 *   ixscale build N CLASSES OUT [SHAPE]
 *       build the index of N ImageNet-21k-shaped file names in CLASSES
 *       class directories (train/<wnid>/<wnid>_<n>.JPEG) and write it to OUT;
 *       print "key value" lines: bytes per entry (total and, for version 3,
 *       per section), the builder's peak memory per entry (VmHWM over the
 *       RSS before the first name was added), build and full-check ms; then
 *       ds_index_hugify(OUT) as stage's ds_index_write does (its ms)
 *       SHAPE: "sparse" (default: file numbers spread over 1..20000, as in
 *       ImageNet-21k) or "dense" (10000 + 7 j, bench/scale.py's names)
 *   ixscale lookup OUT N CLASSES K [SHAPE]
 *       in this (fresh) process: map OUT without the full check (as the
 *       shim does), then look up and stat K random files of the tree; print
 *       minor faults and microseconds per file, and how much of the index
 *       the kernel maps in 2 MiB pages (kB)
 *   ixscale store N CLASSES DIR [SIZE]
 *       a node store of those names (node 0 of 1, job "0") under DIR, for the
 *       shim (t/2110), files of SIZE bytes (8); prints its job directory
 *   ixscale paths N CLASSES K [run]
 *       K (<= 3000) random files of it, or a run of K in store order,
 *       "path k" (file k holds "%07x\n" of k, then zeros)
 *   ixscale probe-huge DIR
 *       exit 0 when the kernel collapses a file of DIR into 2 MiB pages
 *   ixscale bound N
 *       exit 0 when `build`'s index takes at most N bytes per entry (the
 *       last build's figure, read from stdin: "bytes_per_entry X")
 *
 * Names are made on the fly: nothing but the builder holds them. */
#include "dscommon.h"
#include "dsindex.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int dense;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	size_t kl = strlen(key);
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':')
			v = strtol(line + kl + 1, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

/* CPU milliseconds of this process (user + system): what wall time is on an
 * idle core (the machine may be shared) */
static double cpu_ms(void)
{
	struct rusage u;
	getrusage(RUSAGE_SELF, &u);
	return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
	       (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

/* file j of class c: its number (distinct within the class) */
static unsigned fileno_of(uint32_t c, uint32_t j, uint32_t per)
{
	if (dense)
		return 10000 + 7 * j;
	unsigned step = 20000 / per ? 20000 / per : 1;
	return 1 + j * step + (unsigned)(mix((uint64_t)c << 32 | j) % step);
}

static int path_of(char *p, size_t size, uint32_t c, uint32_t j, uint32_t per)
{
	unsigned wn = 1440764u + 7919u * c;
	return snprintf(p, size, "train/n%08u/n%08u_%u.JPEG", wn, wn, fileno_of(c, j, per));
}

static int build(uint64_t n, uint32_t classes, const char *out)
{
	long rss0 = status_kb("VmRSS");
	double t0 = now_ms();
	struct ds_index_builder *b = ds_index_builder_new();
	uint32_t per = (uint32_t)((n + classes - 1) / classes);
	uint64_t k = 0, psize = 0;
	char p[PATH_MAX];
	for (uint32_t c = 0; c < classes && k < n; c++)
		for (uint32_t j = 0; j < per && k < n; j++, k++) {
			path_of(p, sizeof(p), c, j, per);
			int rc = ds_index_add_file(b, p, 0644, 1600000000123456789ll + (int64_t)k,
			                           100 + k % 4, (uint32_t)(k % 8), psize,
			                           100 + k % 4, DS_CODEC_NONE, (uint32_t)k, 0);
			if (rc) {
				fprintf(stderr, "add %s: %s\n", p, ds_strerror(rc));
				return 1;
			}
			psize += 100 + k % 4;
		}
	uint64_t sizes[8];
	for (int i = 0; i < 8; i++)
		sizes[i] = psize;
	ds_index_set_parts(b, 8, sizes);
	for (uint32_t i = 0; i < 8; i++)
		ds_index_add_loc(b, i, 0, (uint64_t)i * ((psize + 4095) / 4096 * 4096));
	ds_index_set_node(b, 0, 1, 8 * ((psize + 4095) / 4096 * 4096), "ixscale", 1);
	long held = status_kb("VmRSS") - rss0;
	void *buf;
	size_t len;
	int rc = ds_index_build(b, &buf, &len);
	if (rc) {
		fprintf(stderr, "build: %s\n", ds_strerror(rc));
		return 1;
	}
	double t1 = now_ms();
	long peak = status_kb("VmHWM") - rss0;
	ds_index_builder_free(b);
	struct ds_index ix;
	double t2 = now_ms(), c2 = cpu_ms();
	rc = ds_index_from_buf(&ix, buf, len, 1);
	double t3 = now_ms(), c3 = cpu_ms();
	if (rc) {
		fprintf(stderr, "full check: %s\n", ds_strerror(rc));
		return 1;
	}
	double ne = ix.h->nentries;
	printf("entries %u\n", ix.h->nentries);
	printf("bytes_per_entry %.1f\n", len / ne);
#if DS_INDEX_VERSION >= 3
	const struct ds_index_header *h = ix.h;
	printf("rows_B %.2f\n", (double)(h->off_dirs - h->off_rows) / ne);
	printf("dirs_B %.2f\n", (double)(h->off_runs - h->off_dirs) / ne);
	printf("runs_B %.2f\n", (double)(h->off_wide - h->off_runs) / ne);
	printf("blocks_B %.2f\n", (double)(h->off_names - h->off_blocks) / ne);
	printf("names_B %.2f\n", (double)h->names_size / ne);
	printf("samples_B %.2f\n", (double)(h->off_strings - h->off_samples) / ne);
	printf("dirs %u runs %u\n", h->ndirs, h->nruns);
#endif
	printf("builder_held_B_per_entry %.1f\n", held * 1024.0 / ne);
	printf("builder_peak_B_per_entry %.1f\n", peak * 1024.0 / ne);
	printf("build_ms %.0f\n", t1 - t0);
	printf("full_check_ms %.0f\n", t3 - t2);
	printf("full_check_cpu_ms %.0f\n", c3 - c2);
	rc = ds_write_file_atomic(out, buf, len, 0600);
	free(buf);
	if (rc) {
		fprintf(stderr, "%s: %s\n", out, ds_strerror(rc));
		return 1;
	}
#if DS_INDEX_VERSION >= 3
	/* as ds_index_write does for stage (common/ixhuge.c) */
	double t4 = now_ms(), c4 = cpu_ms();
	rc = ds_index_hugify(out);
	printf("hugify_ms %.0f\n", now_ms() - t4);
	printf("hugify_cpu_ms %.0f\n", cpu_ms() - c4);
	printf("hugify %s\n", rc ? ds_strerror(rc) : "ok");
#endif
	return 0;
}

/* kB of the mapping at addr that the kernel maps with 2 MiB entries */
static long pmd_mapped_kb(const void *addr)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	int in = 0;
	long kb = 0;
	while (f && fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
			in = lo == (unsigned long)(uintptr_t)addr;
		else if (in && (!strncmp(line, "ShmemPmdMapped:", 15) ||
		                !strncmp(line, "FilePmdMapped:", 14)))
			kb += strtol(strchr(line, ':') + 1, NULL, 10);
	}
	if (f)
		fclose(f);
	return kb;
}

static int lookup(const char *path, uint64_t n, uint32_t classes, uint32_t k)
{
	uint32_t per = (uint32_t)((n + classes - 1) / classes);
	uint32_t full = (uint32_t)(n / per); /* classes with every file */
	char(*paths)[96] = calloc(k, sizeof(*paths));
	size_t *lens = calloc(k, sizeof(size_t));
	for (uint32_t i = 0; i < k; i++) {
		uint64_t r = mix(i + 12345);
		lens[i] = (size_t)path_of(paths[i], sizeof(paths[i]), (uint32_t)(r % full),
		                          (uint32_t)(r >> 32) % per, per);
	}
	struct rusage u0, u1;
	getrusage(RUSAGE_SELF, &u0);
	double t0 = now_ms(), c0 = cpu_ms();
	struct ds_index ix;
	int rc = ds_index_open(&ix, path, 0);
	if (rc) {
		fprintf(stderr, "%s: %s\n", path, ds_strerror(rc));
		return 1;
	}
	uint64_t found = 0, sum = 0;
	for (uint32_t i = 0; i < k; i++) {
		int64_t id = ds_index_lookup(&ix, paths[i], lens[i]);
		if (id < 0)
			continue;
		struct stat st;
		ds_index_stat(&ix, (uint32_t)id, &st);
		sum += st.st_size;
		found++;
	}
	double t1 = now_ms(), c1 = cpu_ms();
	getrusage(RUSAGE_SELF, &u1);
	if (found != k) {
		fprintf(stderr, "found %llu of %u\n", (unsigned long long)found, k);
		return 1;
	}
	printf("lookup_faults_per_file %.3f\n", (double)(u1.ru_minflt - u0.ru_minflt) / k);
	printf("lookup_us_per_file %.2f\n", (t1 - t0) * 1e3 / k);
	printf("lookup_cpu_us_per_file %.2f\n", (c1 - c0) * 1e3 / k);
	printf("lookup_pmd_mapped_kB %ld\n", pmd_mapped_kb(ix.h));
	ds_index_close(&ix);
	free(paths);
	free(lens);
	return sum == 0;
}

/* File i of the random choice (lookup's, paths'): class c, file j */
static void pick(uint32_t i, uint32_t per, uint32_t full, uint32_t *c, uint32_t *j)
{
	uint64_t r = mix(i + 12345);
	*c = (uint32_t)(r % full);
	*j = (uint32_t)(r >> 32) % per;
}

#define PICKS 3000u /* the files paths chooses, at most (written by store) */

/* A node store (node 0 of 1, job "0") of the same names under DIR, as
 * mkstore would write it from a tree of them, without the tree: one
 * partition, file k SIZE bytes (default 8), "%07x\n" of k then zeros, real
 * CRCs; the index written by ds_index_write, as stage writes it.  With a
 * SIZE over 8 only the files paths can name are written (PICKS random ones
 * and the run of PICKS from n / 3 in store order): the rest are holes of
 * zeros, so that a store of 300k files of 4 KiB takes ~25 MB of memory. */
static int store(uint64_t n, uint32_t classes, const char *dir, uint32_t fsize)
{
	uint32_t per = (uint32_t)((n + classes - 1) / classes), full = (uint32_t)(n / per);
	char *jobdir = ds_store_jobdir(dir, "0"), *nd = ds_store_nodedir(dir, "0", 0);
	char path[PATH_MAX], p[PATH_MAX], head[9];
	if (!jobdir || !nd || ds_mkdir_p(nd, 0700) || chmod(jobdir, 0700) < 0 || fsize < 8)
		return 1;
	uint64_t size = n * fsize, psize = size;
	uint64_t ssize = (size + DS_STORE_ALIGN - 1) / DS_STORE_ALIGN * DS_STORE_ALIGN;
	unsigned char *chosen = calloc(n / 8 + 1, 1), *zeros = calloc(fsize, 1);
	for (uint32_t i = 0; i < PICKS; i++) {
		uint32_t c, j;
		pick(i, per, full, &c, &j);
		uint64_t k = (uint64_t)c * per + j;
		chosen[k / 8] |= (unsigned char)(1u << (k % 8));
	}
	snprintf(path, sizeof(path), "%s/" DS_STORE_NAME, nd);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)ssize) < 0) {
		perror(path);
		return 1;
	}
	uint32_t hole = ds_crc32c(ds_crc32c(0, zeros, 8), zeros, fsize - 8); /* a file not written */
	struct ds_index_builder *b = ds_index_builder_new();
	uint64_t k = 0;
	for (uint32_t c = 0; c < classes && k < n; c++)
		for (uint32_t j = 0; j < per && k < n; j++, k++) {
			path_of(p, sizeof(p), c, j, per);
			snprintf(head, sizeof(head), "%07x\n", (unsigned)k);
			int w = fsize == 8 || (chosen[k / 8] >> (k % 8) & 1) ||
			        (k >= n / 3 && k < n / 3 + PICKS);
			uint32_t crc = w ? ds_crc32c(ds_crc32c(0, head, 8), zeros, fsize - 8) : hole;
			int rc = w ? ds_pwrite_full(fd, head, 8, k * fsize) : 0;
			if (!rc)
				rc = ds_index_add_file(b, p, 0644, 1600000000123456789ll + (int64_t)k,
				                       fsize, 0, k * fsize, fsize, DS_CODEC_NONE, crc,
				                       DS_EF_SAMPLE);
			if (rc) {
				fprintf(stderr, "add %s: %s\n", p, ds_strerror(rc));
				return 1;
			}
		}
	close(fd);
	ds_index_set_parts(b, 1, &psize);
	ds_index_add_loc(b, 0, 0, 0);
	ds_index_set_node(b, 0, 1, ssize, "0", 1);
	snprintf(path, sizeof(path), "%s/" DS_INDEX_NAME, nd);
	int rc = ds_index_write(b, path);
	if (rc) {
		fprintf(stderr, "%s: %s\n", path, ds_strerror(rc));
		return 1;
	}
	ds_index_builder_free(b);
	free(chosen);
	free(zeros);
	printf("%s\n", jobdir);
	return 0;
}

/* K (<= PICKS) random files of the store (lookup's choice), or with run
 * the K files from n / 3 on in store order: "path k" lines */
static int paths(uint64_t n, uint32_t classes, uint32_t k, int run)
{
	uint32_t per = (uint32_t)((n + classes - 1) / classes);
	uint32_t full = (uint32_t)(n / per);
	char p[PATH_MAX];
	for (uint32_t i = 0; i < k && i < PICKS; i++) {
		uint32_t c, j;
		if (run) {
			uint64_t q = n / 3 + i;
			c = (uint32_t)(q / per);
			j = (uint32_t)(q % per);
		} else {
			pick(i, per, full, &c, &j);
		}
		path_of(p, sizeof(p), c, j, per);
		printf("%s %llx\n", p, (unsigned long long)c * per + j);
	}
	return 0;
}

/* Can the kernel keep a file of DIR in 2 MiB pages (MADV_COLLAPSE of a
 * 2 MiB-aligned shared mapping)?  Asked here with no help from the library,
 * so that a test's prerequisite does not depend on the code it tests. */
static int probe(const char *dir)
{
	char path[PATH_MAX];
	size_t len = (size_t)4 << 20, huge = (size_t)2 << 20;
	snprintf(path, sizeof(path), "%s/probe-huge.%ld", dir, (long)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	char *buf = calloc(1, len);
	memset(buf, 1, len);
	int ok = fd >= 0 && write(fd, buf, len) == (ssize_t)len;
	char *r = ok ? mmap(NULL, len + huge, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
	             : MAP_FAILED;
	char *a = (char *)(((uintptr_t)r + huge - 1) & ~(uintptr_t)(huge - 1));
	ok = r != MAP_FAILED && mmap(a, len, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) != MAP_FAILED;
	int e = ok && madvise(a, len, 25 /* MADV_COLLAPSE */) < 0 ? errno : 0;
	free(buf);
	if (fd >= 0)
		unlink(path);
	printf("%s\n", !ok ? "cannot map a file there" : e ? strerror(e) : "ok");
	return !ok || e;
}

/* What readdir of every directory costs the shim (io/dir.c): each child
 * checked, its parent compared, its name and mode read. */
static int walk(const char *path)
{
	struct ds_index ix;
	int rc = ds_index_open(&ix, path, 0);
	if (rc)
		return 1;
	double c0 = cpu_ms();
	uint64_t seen = 0, bytes = 0;
	for (uint32_t id = 0; id < ix.h->nentries; id++) {
		if (!S_ISDIR(ds_ix_mode(&ix, id)))
			continue;
		uint32_t nc = ds_ix_nchildren(&ix, id);
		for (uint32_t k = 0; k < nc; k++) {
			uint32_t c = ds_ix_child(&ix, id, k);
			if (!ds_index_entry_ok(&ix, c) || ds_ix_parent(&ix, c) != id)
				return 1;
#if DS_INDEX_VERSION >= 3
			char nb[DS_IX_NAME_BUF];
			bytes += strlen(ds_ix_base(&ix, c, nb)) + ds_ix_mode(&ix, c);
#else
			bytes +=
				ds_ix_base_len(&ix, c) + ds_ix_base(&ix, c)[0] + ds_ix_mode(&ix, c);
#endif
			seen++;
		}
	}
	double c1 = cpu_ms();
	printf("readdir_all_cpu_us_per_entry %.3f (%llu entries)\n", (c1 - c0) * 1e3 / seen,
	       (unsigned long long)seen);
	ds_index_close(&ix);
	return bytes == 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "walk"))
		return walk(argv[2]);
	if (argc >= 5 && !strcmp(argv[1], "build")) {
		dense = argc > 5 && !strcmp(argv[5], "dense");
		return build(strtoull(argv[2], NULL, 0), (uint32_t)strtoul(argv[3], NULL, 0),
		             argv[4]);
	}
	if (argc >= 6 && !strcmp(argv[1], "lookup")) {
		dense = argc > 6 && !strcmp(argv[6], "dense");
		return lookup(argv[2], strtoull(argv[3], NULL, 0),
		              (uint32_t)strtoul(argv[4], NULL, 0),
		              (uint32_t)strtoul(argv[5], NULL, 0));
	}
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "store"))
		return store(strtoull(argv[2], NULL, 0), (uint32_t)strtoul(argv[3], NULL, 0), argv[4],
		             argc == 6 ? (uint32_t)strtoul(argv[5], NULL, 0) : 8);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "paths"))
		return paths(strtoull(argv[2], NULL, 0), (uint32_t)strtoul(argv[3], NULL, 0),
		             (uint32_t)strtoul(argv[4], NULL, 0), argc == 6 && !strcmp(argv[5], "run"));
	if (argc == 3 && !strcmp(argv[1], "probe-huge"))
		return probe(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "bound")) {
		char line[256];
		double v = -1, bound = strtod(argv[2], NULL);
		while (fgets(line, sizeof(line), stdin))
			sscanf(line, "bytes_per_entry %lf", &v);
		return v >= 0 && v <= bound ? 0 : 1;
	}
	fprintf(stderr,
	        "usage: ixscale build N CLASSES OUT [sparse|dense] | lookup OUT N CLASSES K "
	        "[sparse|dense] | bound B | store N CLASSES DIR [SIZE] | paths N CLASSES K [run] | "
	        "probe-huge DIR\n");
	return 2;
}
