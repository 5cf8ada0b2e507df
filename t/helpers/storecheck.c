/* SPDX-License-Identifier: BSD-3-Clause */
/* storecheck: check node stores against the source tree, independently of
 * the code that wrote them.
 *
 *   storecheck JOBDIR SRC
 *
 * For every node directory JOBDIR/<k>: the index passes the full check; every
 * file whose partition the index places on k has exactly the source's bytes
 * in the store (inflating zlib files) and its CRC; directories, symlinks and
 * stat fields match the source.  A store with a spill tier (stage --spill)
 * is read from both files: NODEDIR/store (ram_size bytes) and the spill
 * node directory's store (the rest), both directories 0700, every one of
 * the node's partitions whole in the tier its location says.  Prints one
 * line per file, "PATH HOLDERS", sorted, then exits 0, or 1 naming each
 * problem. */
#include "dscommon.h"
#include "dsindex.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static int bad;

#define FAIL(...) (fprintf(stderr, "storecheck: " __VA_ARGS__), fputc('\n', stderr), bad = 1)

static unsigned char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return NULL;
	unsigned char *b = malloc(st.st_size + 1);
	if (b && ds_pread_full(fd, b, st.st_size, 0)) {
		free(b);
		b = NULL;
	}
	close(fd);
	*len = st.st_size;
	return b;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: storecheck JOBDIR SRC\n");
		return 2;
	}
	const char *jobdir = argv[1], *src = argv[2];
	uint32_t *holders = NULL, nentries = 0, nnodes = 0;
	struct ds_index first;
	int have_first = 0;
	for (uint32_t k = 0;; k++) {
		char path[PATH_MAX];
		struct stat st;
		snprintf(path, sizeof(path), "%s/%u", jobdir, k);
		if (stat(path, &st) < 0)
			break;
		if ((st.st_mode & 0777) != 0700)
			FAIL("'%s': mode %o, want 700", path, st.st_mode & 0777);
		nnodes++;
		struct ds_index ix;
		snprintf(path, sizeof(path), "%s/%u/index", jobdir, k);
		int rc = ds_index_open(&ix, path, 1);
		if (rc) {
			FAIL("'%s': %s", path, ds_strerror(rc));
			continue;
		}
		if (ix.h->node != k)
			FAIL("'%s': says node %u", path, ix.h->node);
		if (!holders) {
			nentries = ix.h->nentries;
			holders = calloc(nentries, sizeof(uint32_t));
			first = ix;
			have_first = 1;
		} else if (ix.h->nentries != nentries) {
			FAIL("'%s': %u entries, node 0 has %u", path, ix.h->nentries, nentries);
			continue;
		}
		snprintf(path, sizeof(path), "%s/%u/store", jobdir, k);
		int fd = open(path, O_RDONLY);
		struct stat sst;
		uint64_t ram = ix.h->ram_size, all = ix.h->store_size;
		if (fd < 0 || fstat(fd, &sst) < 0 || (uint64_t)sst.st_size != ram) {
			FAIL("'%s': missing or not %llu bytes", path, (unsigned long long)ram);
			continue;
		}
		/* both tiers, read into one buffer at their store offsets */
		unsigned char *store = malloc(all + 1);
		if (ds_pread_full(fd, store, ram, 0))
			FAIL("'%s': cannot read", path);
		if (ram < all) {
			char sd[PATH_MAX], sp[PATH_MAX + 8];
			size_t jl;
			if (ds_store_spill_nodedir(&ix, sd, sizeof(sd), &jl)) {
				FAIL("node %u: spills, but names no spill directory", k);
				continue;
			}
			snprintf(sp, sizeof(sp), "%s/store", sd);
			struct stat ds;
			if (stat(sd, &ds) < 0 || (ds.st_mode & 0777) != 0700)
				FAIL("'%s': missing or not 0700", sd);
			sd[jl] = 0;
			if (stat(sd, &ds) < 0 || (ds.st_mode & 0777) != 0700)
				FAIL("'%s': missing or not 0700", sd);
			int sfd = open(sp, O_RDONLY);
			if (sfd < 0 || fstat(sfd, &ds) < 0 || (uint64_t)ds.st_size != all - ram ||
			    (ds.st_mode & 0777) != 0600 || ds_pread_full(sfd, store + ram, all - ram, 0))
				FAIL("'%s': missing, not 0600 or not %llu bytes", sp,
				     (unsigned long long)(all - ram));
			if (sfd >= 0)
				close(sfd);
		}
		for (uint32_t p = 0; p < ix.h->nparts; p++)
			for (uint32_t j = 0; j < ix.parts[p].nloc; j++) {
				const struct ds_loc *l = &ix.locs[ix.parts[p].loc + j];
				if (l->node == k && (l->tier == DS_TIER_SPILL) != (ram < all && l->base >= ram))
					FAIL("node %u: partition %u: tier %u, base %llu, RAM part %llu", k, p,
					     l->tier, (unsigned long long)l->base, (unsigned long long)ram);
			}
		for (uint32_t i = 0; i < ix.h->nentries; i++) {
			struct ds_ix_file fe, *e = &fe;
			ds_ix_file(&ix, i, e);
			const uint32_t mode = ds_ix_mode(&ix, i);
			char name[PATH_MAX], sp[2 * PATH_MAX + 2]; /* src + "/" + name */
			ds_ix_path(&ix, i, name, sizeof(name));
			struct stat ss;
			snprintf(sp, sizeof(sp), "%s/%s", src, name);
			if (lstat(sp, &ss) < 0) {
				FAIL("'%s': in the index, not in the source", name);
				continue;
			}
			if ((ss.st_mode & S_IFMT) != (mode & S_IFMT) ||
			    (!S_ISLNK(ss.st_mode) && ss.st_mode != mode))
				FAIL("'%s': mode %o, source %o", name, mode, ss.st_mode);
			if (!S_ISDIR(ss.st_mode) &&
			    ds_ix_mtime(&ix, i) !=
			            (int64_t)ss.st_mtim.tv_sec * 1000000000 + ss.st_mtim.tv_nsec)
				FAIL("'%s': mtime differs", name);
			if (!S_ISREG(mode))
				continue;
			if ((uint64_t)ss.st_size != e->size)
				FAIL("'%s': size %llu, source %lld", name, (unsigned long long)e->size,
				     (long long)ss.st_size);
			uint64_t base;
			if (!ds_index_part_on(&ix, e->part, k, &base))
				continue;
			holders[i]++;
			size_t len;
			unsigned char *want = slurp(sp, &len);
			if (!want) {
				FAIL("'%s': cannot read the source", sp);
				continue;
			}
			const unsigned char *got = store + base + e->poff;
			unsigned char *infl = NULL;
			if (e->codec == DS_CODEC_ZLIB) {
				uLongf out = e->size;
				infl = malloc(e->size + 1);
				if (uncompress(infl, &out, got, e->stored) != Z_OK || out != e->size)
					FAIL("node %u: '%s': does not inflate", k, name);
				got = infl;
			} else if (e->stored != e->size) {
				FAIL("node %u: '%s': raw but stored %llu != size", k, name,
				     (unsigned long long)e->stored);
			}
			if (len != e->size || memcmp(got, want, len))
				FAIL("node %u: '%s': bytes differ from the source", k, name);
			if (ds_crc32c(0, want, len) != e->crc)
				FAIL("node %u: '%s': crc differs", k, name);
			free(want);
			free(infl);
		}
		free(store);
		close(fd);
		if (!have_first || ix.h != first.h)
			ds_index_close(&ix);
	}
	if (!nnodes) {
		FAIL("'%s': no node stores", jobdir);
		return 1;
	}
	if (have_first) {
		for (uint32_t i = 0; i < nentries; i++)
			if (S_ISREG(ds_ix_mode(&first, i))) {
				char name[PATH_MAX];
				ds_ix_path(&first, i, name, sizeof(name));
				printf("%s %u\n", name, holders[i]);
			}
	}
	return bad;
}
