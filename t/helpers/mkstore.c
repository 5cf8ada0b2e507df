/* SPDX-License-Identifier: BSD-3-Clause */
/* mkstore: build node stores straight from a directory tree, without MPI or
 * HDF5, for unit tests of the shim and the service:
 *
 *   mkstore [-N NODES] [-R R] [-p PARTS] [-z] [-j JOB] [--replicate SUB]... SRC DIR
 *
 * writes DIR/dstage.<uid>.<JOB>/<k>/{index,store} for k = 0..NODES-1 with the
 * same placement (common/place.c) and index format (common/index.c) as
 * `dstage stage`.  Real jobs use dstage pack + dstage stage. */
#include "dscommon.h"
#include "dsindex.h"
#include "dsplace.h"

#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

struct ent {
	char *path;
	struct stat st;
	char target[PATH_MAX];
	uint32_t part;
	uint64_t off, stored;
	uint32_t crc;
	uint8_t codec, flags;
	unsigned char *zdata; /* compressed bytes, when codec is zlib */
};

static struct ent *ents;
static size_t nents, capents;
static const char *src;
static char *repl[16];
static int nrepl;

static void walk(const char *rel)
{
	char full[PATH_MAX];
	snprintf(full, sizeof(full), "%s/%s", src, rel);
	DIR *d = opendir(full);
	if (!d) {
		perror(full);
		exit(1);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (nents == capents) {
			capents = capents ? 2 * capents : 256;
			ents = ds_xrealloc(ents, capents * sizeof(*ents));
		}
		struct ent *e = &ents[nents];
		memset(e, 0, sizeof(*e));
		if (asprintf(&e->path, "%s%s%s", rel, *rel ? "/" : "", de->d_name) < 0)
			exit(1);
		snprintf(full, sizeof(full), "%s/%s", src, e->path);
		if (lstat(full, &e->st) < 0) {
			perror(full);
			exit(1);
		}
		if (S_ISLNK(e->st.st_mode)) {
			ssize_t n = readlink(full, e->target, sizeof(e->target) - 1);
			if (n < 0)
				exit(1);
			e->target[n] = 0;
		} else if (!S_ISDIR(e->st.st_mode) && !S_ISREG(e->st.st_mode)) {
			continue;
		}
		for (int i = 0; i < nrepl; i++) {
			size_t l = strlen(repl[i]);
			if (!strncmp(e->path, repl[i], l) && (e->path[l] == '/' || !e->path[l]))
				e->flags = DS_EF_REPLICATED;
		}
		nents++;
		if (S_ISDIR(e->st.st_mode))
			walk(ents[nents - 1].path);
	}
	closedir(d);
}

static int ent_cmp(const void *a, const void *b)
{
	return ds_path_cmp(((const struct ent *)a)->path, ((const struct ent *)b)->path);
}

/* Read a whole file in chunks: crc of the content; compressed copy if asked. */
static void scan_file(struct ent *e, int zlib)
{
	char full[PATH_MAX];
	snprintf(full, sizeof(full), "%s/%s", src, e->path);
	int fd = open(full, O_RDONLY);
	if (fd < 0) {
		perror(full);
		exit(1);
	}
	static char buf[1 << 20];
	uint32_t crc = 0;
	z_stream z;
	memset(&z, 0, sizeof(z));
	uint64_t zcap = 0;
	zlib = zlib && e->st.st_size < (1 << 28) && e->st.st_size > 0;
	if (zlib) {
		deflateInit(&z, 6);
		zcap = deflateBound(&z, e->st.st_size) + 64;
		e->zdata = ds_xmalloc(zcap);
		z.next_out = e->zdata;
		z.avail_out = zcap;
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0) {
			perror(full);
			exit(1);
		}
		if (n == 0)
			break;
		crc = ds_crc32c(crc, buf, n);
		if (zlib) {
			z.next_in = (unsigned char *)buf;
			z.avail_in = n;
			deflate(&z, Z_NO_FLUSH);
		}
	}
	close(fd);
	e->crc = crc;
	e->stored = e->st.st_size;
	if (zlib) {
		deflate(&z, Z_FINISH);
		uint64_t zs = zcap - z.avail_out;
		deflateEnd(&z);
		if (zs < (uint64_t)e->st.st_size * 95 / 100) {
			e->codec = DS_CODEC_ZLIB;
			e->stored = zs;
		} else {
			ds_free(&e->zdata);
		}
	}
}

int main(int argc, char **argv)
{
	uint32_t nnodes = 1, r = 1, nparts = 4;
	int zlib = 0;
	const char *job = "0";
	static const struct option lo[] = {{"replicate", required_argument, 0, 'r'}, {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "N:R:p:zj:", lo, NULL)) != -1) {
		switch (c) {
		case 'N': nnodes = atoi(optarg); break;
		case 'R': r = atoi(optarg); break;
		case 'p': nparts = atoi(optarg); break;
		case 'z': zlib = 1; break;
		case 'j': job = optarg; break;
		case 'r': if (nrepl < 16) repl[nrepl++] = optarg; break;
		default:
			fprintf(stderr, "usage: mkstore [-N NODES] [-R R] [-p PARTS] [-z] [-j JOB] [--replicate SUB] SRC DIR\n");
			return 2;
		}
	}
	if (argc - optind != 2 || nparts < 1 || nnodes < 1)
		return 2;
	src = argv[optind];
	const char *dir = argv[optind + 1];
	walk("");
	qsort(ents, nents, sizeof(*ents), ent_cmp);

	/* partitions: training files in contiguous size-balanced ranges, then one
	 * partition for the replicated files (if any) */
	uint64_t total = 0;
	int have_repl = 0;
	for (size_t i = 0; i < nents; i++)
		if (S_ISREG(ents[i].st.st_mode)) {
			scan_file(&ents[i], zlib);
			if (ents[i].flags & DS_EF_REPLICATED)
				have_repl = 1;
			else
				total += ents[i].stored;
		}
	uint32_t np = nparts + have_repl;
	uint64_t *psize = ds_xcalloc(np, sizeof(uint64_t));
	uint8_t *prepl = ds_xcalloc(np, 1);
	uint64_t acc = 0;
	for (size_t i = 0; i < nents; i++) {
		struct ent *e = &ents[i];
		if (!S_ISREG(e->st.st_mode))
			continue;
		uint32_t p;
		if (e->flags & DS_EF_REPLICATED) {
			p = nparts;
		} else {
			p = total ? (uint32_t)(acc * nparts / total) : 0;
			if (p >= nparts)
				p = nparts - 1;
			acc += e->stored;
		}
		e->part = p;
		e->off = psize[p];
		psize[p] += e->stored;
	}
	if (have_repl)
		prepl[nparts] = 1;
	struct ds_placement pl;
	if (ds_place(&pl, np, psize, prepl, nnodes, r))
		return 1;

	char *jobdir = ds_store_jobdir(dir, job);
	if (ds_mkdir_p(jobdir, 0700)) {
		perror(jobdir);
		return 1;
	}
	chmod(jobdir, 0700);
	for (uint32_t k = 0; k < nnodes; k++) {
		char *nd = ds_store_nodedir(dir, job, k), path[PATH_MAX];
		if (mkdir(nd, 0700) < 0 && errno != EEXIST) {
			perror(nd);
			return 1;
		}
		snprintf(path, sizeof(path), "%s/store", nd);
		int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || ftruncate(fd, pl.store_size[k]) < 0) {
			perror(path);
			return 1;
		}
		struct ds_index_builder *b = ds_index_builder_new();
		for (size_t i = 0; i < nents; i++) {
			struct ent *e = &ents[i];
			int64_t mt = (int64_t)e->st.st_mtim.tv_sec * 1000000000 + e->st.st_mtim.tv_nsec;
			int rc = 0;
			if (S_ISDIR(e->st.st_mode)) {
				rc = ds_index_add_dir(b, e->path, e->st.st_mode, mt, e->st.st_size);
			} else if (S_ISLNK(e->st.st_mode)) {
				rc = ds_index_add_symlink(b, e->path, mt, e->target);
			} else {
				rc = ds_index_add_file(b, e->path, e->st.st_mode, mt, e->st.st_size, e->part, e->off,
				                       e->stored, e->codec, e->crc, e->flags);
				uint64_t base;
				if (!rc && ds_placement_has(&pl, e->part, k, &base)) {
					if (e->codec == DS_CODEC_ZLIB) {
						rc = ds_pwrite_full(fd, e->zdata, e->stored, base + e->off);
					} else {
						char full[PATH_MAX];
						static char buf[1 << 20];
						snprintf(full, sizeof(full), "%s/%s", src, e->path);
						int in = open(full, O_RDONLY);
						uint64_t o = 0;
						ssize_t n;
						while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0) {
							/* skip holes: sparse sources stay sparse */
							int zero = 1;
							for (ssize_t j = 0; j < n && zero; j++)
								zero = !buf[j];
							if (!zero)
								rc = ds_pwrite_full(fd, buf, n, base + e->off + o);
							o += n;
						}
						if (in >= 0)
							close(in);
					}
				}
			}
			if (rc) {
				fprintf(stderr, "mkstore: '%s': %s\n", e->path, ds_strerror(rc));
				return 1;
			}
		}
		ds_index_set_parts(b, np, psize);
		for (uint32_t p = 0; p < np; p++)
			for (uint32_t l = pl.first[p]; l < pl.first[p + 1]; l++)
				ds_index_add_loc(b, p, pl.node[l], pl.base[l]);
		ds_index_set_node(b, k, nnodes, pl.store_size[k], job, 0x5eed);
		snprintf(path, sizeof(path), "%s/index", nd);
		int rc = ds_index_write(b, path);
		if (rc) {
			fprintf(stderr, "mkstore: '%s': %s\n", path, ds_strerror(rc));
			return 1;
		}
		ds_index_builder_free(b);
		close(fd);
		free(nd);
	}
	printf("%s\n", jobdir);
	return 0;
}
