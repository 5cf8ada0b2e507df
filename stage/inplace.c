/* SPDX-License-Identifier: BSD-3-Clause */
/* inplace.c: a virtual partition's payload read where its files lie (an
 * in-place pack, or a plain tree staged as it is: issue 28).
 *
 * The payload is the partition's files back to back in offset order; the
 * reader walks them in that order as stage.c's move_partition asks for the
 * stream chunk by chunk.  Each source file is opened once (consecutive
 * entries of one source, the members of a tar, share the open), checked
 * at open against the manifest and after its last byte against what it was
 * at open (hdf5/inplace.c: ds_src_open, ds_src_check_after); the CRC-32C
 * is the sink's, as for a pack's part file.  Every entry is opened, the
 * empty ones too, so a vanished file is named whatever its size.
 * Also here: whether what stage was given is a plain tree at all. */
#include "dscommon.h"
#include "dspack.h"
#include "stage_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct ds__ipsrc {
	int rootfd;
	const struct ds_manifest *m;
	const uint32_t *ents;   /* manifest entries, offset order */
	uint32_t n, k;          /* entries; the one being read */
	int entered;            /* entry k's source is open */
	int fd;                 /* the open source, -1: none */
	const char *src;        /* its name */
	struct stat st;         /* its fstat at open */
	uint64_t next;          /* the stream position expected next */
	uint64_t opens;         /* source files opened */
};

int ds__ipsrc_open(int rootfd, const struct ds_manifest *m, const uint32_t *ents, uint32_t n,
                   struct ds__ipsrc **out)
{
	struct ds__ipsrc *r = ds_xcalloc(1, sizeof(*r));
	r->rootfd = rootfd;
	r->m = m;
	r->ents = ents;
	r->n = n;
	r->fd = -1;
	*out = r;
	return 0;
}

/* Done with the open source: it must not have changed while read. */
static int leave_src(struct ds__ipsrc *r)
{
	int rc = 0;
	if (r->fd >= 0) {
		rc = ds_src_check_after(r->fd, r->m, r->src, &r->st);
		close(r->fd);
	}
	r->fd = -1;
	r->src = NULL;
	return rc;
}

/* Entry k's source open (the one already open when it is the same). */
static int enter(struct ds__ipsrc *r)
{
	const struct ds_mentry *e = &r->m->e[r->ents[r->k]];
	const char *src = e->src ? e->src : e->path;
	int rc;
	if (r->fd >= 0 && !strcmp(r->src, src)) {
		/* the same source (tar members): its range checked at open of the
		 * first is checked again for this one */
		if (e->src_off > (uint64_t)r->st.st_size ||
		    e->size > (uint64_t)r->st.st_size - e->src_off) {
			ds_error("'%s/%s': changed: shorter than its member '%s' needs", r->m->root, src,
			         e->path);
			return -ESTALE;
		}
		r->entered = 1;
		return 0;
	}
	if ((rc = leave_src(r)))
		return rc;
	int fd;
	if ((rc = ds_src_open(r->rootfd, r->m, e, &fd, &r->st)))
		return rc;
	r->opens++;
	r->fd = fd;
	r->src = src;
	r->entered = 1;
	if (e->size > (4u << 20))
		posix_fadvise(fd, (off_t)e->src_off, (off_t)e->size, POSIX_FADV_SEQUENTIAL);
	return 0;
}

int ds__ipsrc_read(struct ds__ipsrc *r, uint64_t pos, void *buf, size_t n)
{
	char *p = buf;
	int rc;
	if (pos != r->next)
		return -EINVAL; /* the stream is read in order */
	while (n) {
		if (r->k >= r->n)
			return -DS_ECORRUPT; /* beyond the last file: the manifest is wrong */
		const struct ds_mentry *e = &r->m->e[r->ents[r->k]];
		if (!r->entered && (rc = enter(r)))
			return rc;
		uint64_t end = e->offset + e->size;
		if (pos >= end) {
			r->k++;
			r->entered = 0;
			continue;
		}
		if (pos < e->offset)
			return -DS_ECORRUPT; /* a gap the manifest reader lets through */
		size_t take = end - pos < n ? (size_t)(end - pos) : n;
		rc = ds_pread_full(r->fd, p, take, (off_t)(e->src_off + (pos - e->offset)));
		if (rc == -EIO) {
			ds_error("'%s/%s': changed: shrank while it was read", r->m->root, r->src);
			return -ESTALE;
		}
		if (rc) {
			ds_error("'%s/%s': %s", r->m->root, r->src, ds_strerror(rc));
			return rc;
		}
		p += take;
		pos += take;
		n -= take;
		r->next = pos;
	}
	return 0;
}

int ds__ipsrc_finish(struct ds__ipsrc *r)
{
	int rc = 0;
	/* the files after the last byte (empty ones) are opened and checked too */
	for (; !rc && r->k < r->n; r->k++, r->entered = 0)
		if (!r->entered)
			rc = enter(r);
	int rc2 = leave_src(r);
	return rc ? rc : rc2;
}

uint64_t ds__ipsrc_opens(const struct ds__ipsrc *r)
{
	return r ? r->opens : 0;
}

void ds__ipsrc_close(struct ds__ipsrc *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	free(r);
}

/* Is SRC a plain tree (1), a pack (0: its manifest is read, and a missing
 * one named), or a pack that lost its manifest (-1, said)?  A directory
 * holding part-NNNNN.h5 or a pack's .tmp-PID but no index.h5 is a pack
 * being written, or a damaged copy: never staged as a tree of HDF5 files. */
int ds__stage_plain_tree(const char *src)
{
	struct stat st;
	char ipath[PATH_MAX];
	snprintf(ipath, sizeof(ipath), "%s/index.h5", src);
	if (lstat(ipath, &st) == 0 || errno != ENOENT || stat(src, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	DIR *d = opendir(src);
	struct dirent *de;
	const char *seen = NULL;
	while (d && !seen && (de = readdir(d)))
		if (!fnmatch("part-[0-9][0-9][0-9][0-9][0-9].h5", de->d_name, 0) ||
		    !strncmp(de->d_name, ".tmp-", 5))
			seen = de->d_name;
	if (seen)
		ds_error("'%s': a pack without its manifest (it holds '%s'): being written by dstage "
		         "pack, or a damaged copy; not staged as a plain tree", ipath, seen);
	if (d)
		closedir(d);
	return seen ? -1 : 1;
}

