/* SPDX-License-Identifier: BSD-3-Clause */
/* inplace.c: sources read where they lie (issue 28): `pack --in-place`,
 * whose partitions are virtual (their files' contents back to back in path
 * order, read from SRC), and a plain tree staged as it is (the same
 * manifest, built at stage time by a walk shared by the ranks).
 *
 * Opening a source: through the root's descriptor, never following a
 * symlink anywhere on the path (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS;
 * on a kernel without it, one O_NOFOLLOW|O_DIRECTORY open per parent and
 * O_NOFOLLOW on the file), a regular file only, and still what the
 * manifest says (size, mtime); after the read, still what it was at open
 * (size, mtime, ctime).  A file that changed or vanished is named. */
#include "pack_int.h"
#include "dsmpi.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define CHUNK (4u << 20)

static int64_t mtime_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int ds__open_beneath(int dirfd, const char *path, int extra, int *out)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | extra;
#ifdef SYS_openat2
	static int no_openat2;
	if (!no_openat2) {
		struct open_how how;
		memset(&how, 0, sizeof(how));
		how.flags = (uint64_t)flags;
		how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
		long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
		if (fd >= 0) {
			*out = (int)fd;
			return 0;
		}
		if (errno != ENOSYS && errno != EPERM)
			return -errno;
		no_openat2 = 1; /* an old kernel, or a seccomp filter */
	}
#endif
	/* parent by parent */
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return -ENAMETOOLONG;
	int d = dirfd;
	char *p = buf, *slash;
	while ((slash = strchr(p, '/'))) {
		*slash = '\0';
		int nd = openat(d, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		int err = errno;
		if (d != dirfd)
			close(d);
		if (nd < 0)
			return -err;
		d = nd;
		p = slash + 1;
	}
	int fd = openat(d, p, flags | O_NOFOLLOW);
	int err = errno;
	if (d != dirfd)
		close(d);
	if (fd < 0)
		return -err;
	*out = fd;
	return 0;
}

/* "'ROOT/SRC': why"; returns rc */
static int fail_at(const char *root, const char *src, int rc, const char *why)
{
	char q[PATH_MAX + 64];
	ds_error("'%s/%s': %s", root ? root : ".", ds__quote(src, strlen(src), q, sizeof(q)), why);
	return rc;
}

static int src_fail(const struct ds_manifest *m, const char *src, int rc, const char *why)
{
	return fail_at(m->root, src, rc, why);
}

/* Is fd still what it was at open (size, mtime, ctime)?  Named under root. */
static int same_after(int fd, const char *root, const char *src, const struct stat *a)
{
	struct stat b;
	if (fstat(fd, &b) < 0)
		return fail_at(root, src, -errno, strerror(errno));
	if (b.st_size != a->st_size || mtime_of(&b) != mtime_of(a) ||
	    b.st_ctim.tv_sec != a->st_ctim.tv_sec || b.st_ctim.tv_nsec != a->st_ctim.tv_nsec)
		return fail_at(root, src, -ESTALE, "changed while it was read");
	return 0;
}

static const char *changed(const struct ds_manifest *m)
{
	return m->nocrc ? "changed during the stage" : "changed since the in-place pack was made";
}

int ds_src_root_open(const struct ds_manifest *m, int *rootfd)
{
	if (!m->root) {
		ds_error("not an in-place manifest");
		return -EINVAL;
	}
	int fd = open(m->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		ds_error("'%s': the source tree of this in-place pack: %s", m->root, strerror(err));
		return -err;
	}
	*rootfd = fd;
	return 0;
}

int ds_src_open(int rootfd, const struct ds_manifest *m, const struct ds_mentry *e, int *fdp,
                struct stat *st)
{
	const char *src = e->src ? e->src : e->path;
	int fd = -1, rc = ds__open_beneath(rootfd, src, 0, &fd);
	if (rc == -ENOENT)
		return src_fail(m, src, -ENOENT, m->nocrc ? "vanished during the stage"
		                                          : "vanished since the in-place pack was made");
	if (rc == -ELOOP || rc == -EXDEV)
		return src_fail(m, src, -ELOOP, "is now reached through a symlink: refused");
	if (rc)
		return src_fail(m, src, rc, ds_strerror(rc));
	if (fstat(fd, st) < 0) {
		rc = -errno;
		close(fd);
		return src_fail(m, src, rc, ds_strerror(rc));
	}
	if (!S_ISREG(st->st_mode)) {
		close(fd);
		return src_fail(m, src, -DS_ENOTREG, "no longer a regular file");
	}
	/* what the manifest recorded of the source: the file itself, or the
	 * entry the source became (a tar shown as a directory) */
	const struct ds_mentry *owner = e;
	if (e->src && e->src != e->path && strcmp(e->src, e->path)) {
		int64_t k = ds__manifest_find(m, e->src);
		owner = k >= 0 ? &m->e[k] : NULL;
	}
	uint64_t size = (uint64_t)st->st_size;
	int64_t ctime = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
	if ((owner && (owner->size != size || owner->mtime_ns != mtime_of(st) ||
	               (owner->ctime_ns && owner->ctime_ns != ctime))) ||
	    e->src_off > size || e->size > size - e->src_off) {
		close(fd);
		return src_fail(m, src, -ESTALE, changed(m));
	}
	*fdp = fd;
	return 0;
}

int ds_src_check_after(int fd, const struct ds_manifest *m, const char *src,
                       const struct stat *a)
{
	return same_after(fd, m->root, src, a);
}

int ds_src_read_entry(int rootfd, const struct ds_manifest *m, const struct ds_mentry *e,
                      ds_src_sink_fn fn, void *ctx)
{
	struct stat st;
	int fd, rc = ds_src_open(rootfd, m, e, &fd, &st);
	if (rc)
		return rc;
	const char *src = e->src ? e->src : e->path;
	char *buf = ds_xmalloc(e->size < CHUNK ? e->size + 1 : CHUNK);
	uint32_t crc = 0;
	for (uint64_t pos = 0; !rc && pos < e->size;) {
		size_t n = e->size - pos < CHUNK ? (size_t)(e->size - pos) : CHUNK;
		if ((rc = ds_pread_full(fd, buf, n, (off_t)(e->src_off + pos)))) {
			rc = src_fail(m, src, rc == -EIO ? -ESTALE : rc,
			              rc == -EIO ? "shrank while it was read" : ds_strerror(rc));
			break;
		}
		crc = ds_crc32c(crc, buf, n);
		if (fn && (rc = fn(ctx, buf, n)))
			break;
		pos += n;
	}
	free(buf);
	if (!rc)
		rc = ds_src_check_after(fd, m, src, &st);
	close(fd);
	if (!rc && !m->nocrc && crc != e->crc) {
		ds_error("'%s/%s': checksum mismatch: the file changed since the in-place pack was "
		         "made", m->root, e->path);
		rc = -DS_ECHECKSUM;
	}
	return rc;
}

/* ---- pack --in-place: every file read once for its CRC ------------------- */
static int file_fail(const struct ds__write_opts *o, const struct ds__tree *t,
                     const struct ds__pentry *e, int rc, const char *what)
{
	char q[PATH_MAX + 64];
	const struct ds__pextra *x = ds__pentry_x(t, e);
	const char *p = x->src_len ? t->names.data + x->src : ds__tree_path(t, e);
	ds_error("'%s/%s': %s", o->src, ds__quote(p, strlen(p), q, sizeof(q)), what);
	return rc;
}

/* The entry of path src in the sorted tree t (a tar shown as a directory),
 * or NULL. */
static const struct ds__pentry *src_entry(const struct ds__tree *t, const char *src)
{
	int64_t k = ds__tree_find(t, src);
	return k >= 0 ? &t->e[k] : NULL;
}

int ds__inplace_part(const struct ds__plan *pl, uint32_t part, const struct ds__write_opts *o,
                     struct ds__result *res, struct ds__progress *pr)
{
	const struct ds__tree *t = &pl->tree;
	const struct ds__ppart *pp = &pl->parts[part];
	char *buf = ds_xmalloc(CHUNK);
	uint64_t off = 0;
	int rc = 0, fd = -1;
	const char *open_src = NULL; /* the source fd holds (tar members share it) */
	struct stat st;
	for (uint32_t k = 0; !rc && k < pp->nfiles; k++) {
		const struct ds__pentry *e = &t->e[pl->files[pp->first + k]];
		const struct ds__pextra *x = ds__pentry_x(t, e);
		const char *src = x->src_len ? t->names.data + x->src : ds__tree_path(t, e);
		struct ds__result *r = &res[pp->first + k];
		if (!open_src || strcmp(open_src, src)) {
			if (fd >= 0 && (rc = same_after(fd, o->src, open_src, &st)))
				break;
			if (fd >= 0)
				close(fd);
			fd = -1;
			open_src = NULL;
			if ((rc = ds__open_beneath(o->srcfd, src, 0, &fd))) {
				rc = file_fail(o, t, e, rc, rc == -ENOENT ? "vanished while packing"
				                            : rc == -ELOOP || rc == -EXDEV
				                                ? "changed while packing (now reached through a symlink)"
				                                : ds_strerror(rc));
				fd = -1;
				break;
			}
			/* what the scan saw of the source: the file's own entry, or
			 * the directory a tar became (--expand-tar) */
			const struct ds__pentry *seen = x->src_len ? src_entry(t, src) : e;
			if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || !seen ||
			    (uint64_t)st.st_ino != seen->ino || (uint64_t)st.st_size != seen->size ||
			    mtime_of(&st) != seen->mtime_ns) {
				rc = file_fail(o, t, e, -ESTALE, "changed while packing");
				break;
			}
			open_src = src;
		}
		if (x->src_off > (uint64_t)st.st_size ||
		    e->size > (uint64_t)st.st_size - x->src_off) {
			rc = file_fail(o, t, e, -ESTALE, "changed while packing (shrank)");
			break;
		}
		uint32_t crc = 0;
		for (uint64_t pos = 0; !rc && pos < e->size;) {
			size_t n = e->size - pos < CHUNK ? (size_t)(e->size - pos) : CHUNK;
			if (ds_stop_signal())
				rc = file_fail(o, t, e, -EINTR, ds_stop_why());
			else if ((rc = ds_pread_full(fd, buf, n, (off_t)(x->src_off + pos))))
				rc = file_fail(o, t, e, rc == -EIO ? -ESTALE : rc,
				               rc == -EIO ? "changed while packing (shrank)" : ds_strerror(rc));
			else
				crc = ds_crc32c(crc, buf, n);
			pos += n;
		}
		r->offset = off;
		r->stored = e->size;
		r->codec = DS_CODEC_NONE;
		r->crc = crc;
		off += e->size;
		if (pr) {
			pr->files++;
			pr->bytes += e->size;
			ds__progress_tick(pr);
		}
	}
	if (!rc && fd >= 0)
		rc = same_after(fd, o->src, open_src, &st);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* ---- the manifest of a plan, nothing read -------------------------------- */
void ds__manifest_from_plan(const struct ds__plan *pl, const char *root, struct ds_manifest *m)
{
	const struct ds__tree *t = &pl->tree;
	memset(m, 0, sizeof(*m));
	size_t strbytes = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct ds__pentry *p = &t->e[i];
		uint32_t sl = ds__pentry_x(t, p)->src_len;
		strbytes += p->path_len + 1 + (p->target_len ? p->target_len + 1 : 0) +
		            (sl ? sl + 1 : 0);
	}
	m->n = t->n;
	m->e = ds_xcalloc(1, t->n * sizeof(*m->e) + strbytes + 1);
	char *arena = (char *)(m->e + t->n);
	for (size_t i = 0; i < t->n; i++) {
		const struct ds__pentry *p = &t->e[i];
		struct ds_mentry *e = &m->e[i];
		e->path = arena;
		memcpy(arena, ds__tree_path(t, p), p->path_len + 1);
		arena += p->path_len + 1;
		if (p->target_len) {
			e->target = arena;
			memcpy(arena, t->names.data + p->target, p->target_len);
			arena[p->target_len] = '\0';
			arena += p->target_len + 1;
		}
		const struct ds__pextra *x = ds__pentry_x(t, p);
		e->src = e->path;
		if (x->src_len) {
			e->src = arena;
			memcpy(arena, t->names.data + x->src, x->src_len);
			arena[x->src_len] = '\0';
			arena += x->src_len + 1;
		}
		e->src_off = x->src_off;
		e->ctime_ns = x->ctime_ns;
		e->mode = p->mode;
		e->mtime_ns = p->mtime_ns;
		e->size = p->size;
		e->part = S_ISREG(p->mode) ? p->part : UINT32_MAX;
		e->flags = p->flags;
		if (S_ISREG(p->mode)) {
			m->total_size += p->size;
			m->total_stored += p->size;
		}
	}
	m->nparts = pl->nparts;
	m->parts = ds_xcalloc((size_t)pl->nparts + 1, sizeof(*m->parts));
	for (uint32_t k = 0; k < pl->nparts; k++) {
		const struct ds__ppart *pp = &pl->parts[k];
		uint64_t off = 0;
		for (uint32_t f = 0; f < pp->nfiles; f++) {
			struct ds_mentry *e = &m->e[pl->files[pp->first + f]];
			e->offset = off;
			e->stored = e->size;
			e->codec = DS_CODEC_NONE;
			off += e->size;
		}
		m->parts[k].size = off;
		m->parts[k].nfiles = pp->nfiles;
		m->parts[k].replicated = pp->replicated;
	}
	m->pack_id = pl->pack_id;
	m->root = ds_xstrdup(root);
	m->nocrc = 1;
}

/* ---- a plain tree staged as it is: the walk shared by the ranks ---------- */
/* Send / receive len bytes in pieces below MPI's int count. */
static int send_big(MPI_Comm c, const void *buf, uint64_t len, int to)
{
	const char *p = buf;
	for (uint64_t off = 0; off < len;) {
		int n = len - off > (1u << 30) ? (1 << 30) : (int)(len - off);
		if (MPI_Send(p + off, n, MPI_BYTE, to, 0x7e5, c) != MPI_SUCCESS)
			return -EIO;
		off += (uint64_t)n;
	}
	return 0;
}

static int recv_big(MPI_Comm c, void *buf, uint64_t len, int from)
{
	char *p = buf;
	for (uint64_t off = 0; off < len;) {
		int n = len - off > (1u << 30) ? (1 << 30) : (int)(len - off);
		if (MPI_Recv(p + off, n, MPI_BYTE, from, 0x7e5, c, MPI_STATUS_IGNORE) != MPI_SUCCESS)
			return -EIO;
		off += (uint64_t)n;
	}
	return 0;
}

/* Partitions of a plain tree: about 1 GiB each, and at least 4 per node so
 * the placement can spread and balance them (ds__plan_make clamps to the
 * file count; --replicate subtrees get theirs on top). */
static uint32_t tree_parts(const struct ds__tree *t, uint32_t nnodes)
{
	uint64_t k = (t->bytes + (1ull << 30) - 1) >> 30;
	if (k < 4ull * nnodes)
		k = 4ull * nnodes;
	if (k > DS__MAX_PARTS)
		k = DS__MAX_PARTS;
	return (uint32_t)k;
}

int ds__scan_tars(MPI_Comm world, const struct ds__scan_opts *so, const struct ds_buf *mine,
                     struct ds__tree *t)
{
	int rank, size, rc = 0;
	MPI_Comm_rank(world, &rank);
	MPI_Comm_size(world, &size);
	struct ds_buf all = {0};
	for (int r = 0; r < size; r++) {
		uint64_t len = r == rank ? mine->len : 0;
		ds_mpi_bcast(world, &len, sizeof(len), r);
		ds_buf_reserve(&all, len + 1);
		if (r == rank && len) /* a rank that met no tar: mine->data is NULL */
			memcpy(all.data + all.len, mine->data, len);
		ds_mpi_bcast(world, all.data + all.len, len, r);
		all.len += len;
	}
	uint64_t k = 0;
	for (size_t off = 0; !rc && off < all.len; off += strlen(all.data + off) + 1, k++)
		if (k % (uint64_t)size == (uint64_t)rank)
			rc = ds__scan_tar(so, all.data + off, t);
	ds_buf_release(&all);
	return rc;
}

int ds__tree_gather(MPI_Comm world, struct ds__tree *t)
{
	int rank, size, rc = 0;
	MPI_Comm_rank(world, &rank);
	MPI_Comm_size(world, &size);
	if (rank != 0) {
		uint64_t h[7] = {t->n,      t->names.len, t->nfiles, t->ndirs,
		                 t->nlinks, t->bytes,     t->nx};
		rc = send_big(world, h, sizeof(h), 0);
		if (!rc)
			rc = send_big(world, t->e, t->n * sizeof(*t->e), 0);
		if (!rc)
			rc = send_big(world, t->x, t->nx * sizeof(*t->x), 0);
		if (!rc)
			rc = send_big(world, t->names.data, t->names.len, 0);
		ds__tree_release(t);
		return rc;
	}
	for (int r = 1; r < size && !rc; r++) {
		uint64_t h[7];
		struct ds__tree o;
		memset(&o, 0, sizeof(o));
		rc = recv_big(world, h, sizeof(h), r);
		if (rc)
			break;
		o.n = o.cap = h[0];
		o.e = ds_xmalloc(h[0] * sizeof(*o.e) + 1);
		ds_buf_reserve(&o.names, h[1] + 1);
		o.names.len = h[1];
		o.nfiles = h[2], o.ndirs = h[3], o.nlinks = h[4], o.bytes = h[5];
		o.nx = o.xcap = h[6];
		o.x = ds_xmalloc(h[6] * sizeof(*o.x) + 1);
		rc = recv_big(world, o.e, h[0] * sizeof(*o.e), r);
		if (!rc)
			rc = recv_big(world, o.x, h[6] * sizeof(*o.x), r);
		if (!rc)
			rc = recv_big(world, o.names.data, h[1], r);
		if (!rc)
			ds__tree_merge(t, &o);
		ds__tree_release(&o);
	}
	return rc;
}

int ds_tree_manifest(MPI_Comm world, const char *src, char **replicate, size_t nreplicate,
                     int expand_tar, uint32_t nnodes, struct ds_manifest *m)
{
	int rank, size, rc = 0;
	MPI_Comm_rank(world, &rank);
	MPI_Comm_size(world, &size);
	memset(m, 0, sizeof(*m));
	char root[PATH_MAX];
	struct ds_buf tars = {0}; /* --expand-tar: the tars this rank's walk met */
	struct ds__scan_opts so = {.src = src,
	                           .srcfd = -1,
	                           .replicate = replicate,
	                           .nreplicate = nreplicate,
	                           .verb = "stage",
	                           .expand_tar = expand_tar,
	                           .tars = &tars,
	                           .ctime = 1};
	if (rank == 0 && !realpath(src, root)) {
		rc = -errno;
		ds_error("'%s': %s", src, strerror(errno));
	}
	if (ds_any_failed(world, rc))
		return rc ? rc : -EIO;
	ds_mpi_bcast(world, root, sizeof(root), 0);
	if ((so.srcfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		rc = -errno;
		ds_error("'%s': %s", src, strerror(errno));
	}
	if (ds_any_failed(world, rc)) {
		if (so.srcfd >= 0)
			close(so.srcfd);
		return rc ? rc : -EIO;
	}
	/* A level-synchronous walk: the directories of a level are shared out
	 * (k % size), each rank lists its own without descending, and the
	 * subdirectories found are the next level, known to every rank
	 * (MPI_Allgatherv).  Once a level holds enough directories to keep
	 * every rank busy (4 per rank), each rank walks its share of them to
	 * the bottom.  Rank 0 alone lists the root; a tree of one top-level
	 * directory (train/CLASS/...) still spreads at the next level. */
	struct ds__tree t;
	memset(&t, 0, sizeof(t));
	struct ds_buf level = {0};
	ds_buf_add(&level, "", 1);
	uint64_t nlevel = 1;
	while (nlevel && nlevel < 4ull * (uint64_t)size) {
		struct ds_buf mine = {0};
		uint64_t k = 0;
		for (size_t off = 0; !rc && off < level.len; off += strlen(level.data + off) + 1, k++)
			if (k % (uint64_t)size == (uint64_t)rank)
				rc = ds__scan_list_dir(&so, level.data + off, &t, &mine);
		if (ds_any_failed(world, rc)) {
			ds_buf_release(&mine);
			goto scan_failed;
		}
		/* the next level: every rank's subdirectories, in rank order */
		int len = mine.len > INT_MAX ? -1 : (int)mine.len, *lens = ds_xcalloc(size, sizeof(int));
		int *displs = ds_xcalloc(size, sizeof(int));
		MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, world);
		int64_t total = 0;
		for (int r = 0; r < size; r++) {
			if (lens[r] < 0 || total + lens[r] > INT_MAX)
				total = -1;
			if (total < 0)
				break;
			displs[r] = (int)total;
			total += lens[r];
		}
		if (total < 0) {
			if (rank == 0)
				ds_error("'%s': too many directories on one level to share the walk", src);
			rc = -E2BIG;
		} else {
			ds_buf_release(&level);
			ds_buf_reserve(&level, (size_t)total + 1);
			MPI_Allgatherv(mine.data, len, MPI_BYTE, level.data, lens, displs, MPI_BYTE, world);
			level.len = (size_t)total;
			nlevel = 0;
			for (size_t off = 0; off < level.len; off += strlen(level.data + off) + 1)
				nlevel++;
		}
		free(lens);
		free(displs);
		ds_buf_release(&mine);
		if (rc)
			goto scan_failed;
	}
	/* the rest: each rank walks the subtrees of its share of the last level */
	uint64_t k = 0;
	for (size_t off = 0; !rc && off < level.len; off += strlen(level.data + off) + 1, k++)
		if (k % (uint64_t)size == (uint64_t)rank)
			rc = ds__scan_walk_dir(&so, level.data + off, &t);
scan_failed:
	ds_buf_release(&level);
	/* --expand-tar: the tars met by every rank's walk are listed (their
	 * headers read) by all ranks, round robin: a directory of thousands of
	 * shards is not listed by the one rank that walked it */
	if (!ds_any_failed(world, rc) && expand_tar)
		rc = ds__scan_tars(world, &so, &tars, &t);
	ds_buf_release(&tars);
	close(so.srcfd);
	so.srcfd = -1;
	if (ds_any_failed(world, rc)) {
		ds__tree_release(&t);
		return rc ? rc : -EIO;
	}
	/* rank 0 merges the shares, sorts, plans; the plan goes to every rank */
	struct ds__plan pl;
	memset(&pl, 0, sizeof(pl));
	rc = ds__tree_gather(world, &t);
	if (rank == 0) {
		pl.tree = t;
		if (!rc)
			rc = ds__scan_finish(&so, &pl.tree);
		pl.codec = DS_CODEC_NONE;
		if (!rc)
			rc = ds__plan_make(&pl, tree_parts(&pl.tree, nnodes), 0);
		/* For tests only (as pack's): a command between the scan and the
		 * reads, to change the tree under the stage deterministically. */
		const char *hook = getenv("DSTAGE_TEST_AFTER_SCAN");
		if (!rc && hook && *hook && system(hook) != 0)
			ds_warn("DSTAGE_TEST_AFTER_SCAN failed");
	}
	struct ds_buf img = {0};
	uint64_t ph[2] = {(uint64_t)(rc != 0), 0};
	if (rank == 0 && !rc) {
		ds__plan_encode(&pl, &img);
		ph[1] = img.len;
	}
	ds_mpi_bcast(world, ph, sizeof(ph), 0);
	if (ph[0]) {
		ds__plan_release(&pl);
		return -EIO;
	}
	if (rank != 0)
		ds_buf_reserve(&img, ph[1] + 1);
	ds_mpi_bcast(world, img.data, ph[1], 0);
	if (rank != 0 && (rc = ds__plan_decode(&pl, img.data, ph[1])))
		ds_error("cannot decode the plan of '%s' from rank 0", src);
	ds_buf_release(&img);
	if (!rc)
		ds__manifest_from_plan(&pl, root, m);
	ds__plan_release(&pl);
	return ds_any_failed(world, rc) ? (rc ? rc : -EIO) : 0;
}
