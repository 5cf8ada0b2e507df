/* SPDX-License-Identifier: BSD-3-Clause */
/* verify.c: `dstage verify OUT [--against SRC]`.
 *
 * Checks, naming every problem found and going on to the next:
 *   - index.h5: seal, structure, names, bounds (ds_manifest_read);
 *   - no two files' stored bytes overlap in a payload;
 *   - every partition: present, sealed, its payload the size the manifest
 *     says, its own entries table the same as the manifest's;
 *   - every file: decoded, size and CRC-32C right;
 *   - with --against SRC: every entry's type, mode, size, mtime, symlink
 *     target and bytes the same as in SRC. */
#include "pack_int.h"

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char usage_text[] =
	"usage: dstage verify [OPTIONS] OUT\n"
	"\n"
	"Check the structure of the pack in OUT and the CRC-32C of every file in it;\n"
	"name each problem.  Exit 0 when all is well, 1 otherwise.  OUT may be\n"
	"s3://BUCKET/PREFIX (partitions are copied to $TMPDIR one at a time).\n"
	"\n"
	"      --against SRC   also compare every entry (type, mode, size, mtime,\n"
	"                      symlink target, bytes) with the tree SRC\n"
	"  -q, --quiet         no summary line\n"
	"  -h, --help          this text\n";

struct verify {
	const char *out;
	const struct ds_manifest *m;
	int srcfd;            /* --against, else -1 */
	int rootfd;           /* an in-place pack: its source tree, else -1 */
	uint64_t problems;
	uint64_t files, bytes;
	char *srcbuf;         /* --against: source bytes to compare with */
};

static void problem(struct verify *v, const char *path, const char *fmt, const char *detail)
{
	char msg[512];
	snprintf(msg, sizeof(msg), fmt, detail);
	ds_error("'%s': %s", path, msg);
	v->problems++;
}

/* ---- HDF5's view ----------------------------------------------------------- */
/* The path HDF5 opens: the file, or for a pack in a bucket the temporary
 * copy behind fd (the check runs in a forked child, which has it too). */
static const char *h5_path(const struct verify *v, const char *path, int fd)
{
	static char buf[PATH_MAX];
	char self[64];
	if (strncmp(v->out, "s3://", 5))
		return path;
	snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(self, buf, sizeof(buf) - 1);
	if (n <= 0)
		return path;
	buf[n] = '\0';
	return buf;
}

/* dstage reads the tables where the seals say; h5py users read them through
 * HDF5: both must see the same. */
static void check_index_hdf5(struct verify *v)
{
	char *path = ds__join(v->out, DS__INDEX_NAME);
	struct ds__seal seal;
	int fd = -1, s3 = !strncmp(v->out, "s3://", 5);
	int orc = s3 ? ds__s3_fetch_tmp(v->out, DS__INDEX_NAME, &fd) : ds_open_regular(path, &fd);
	if (orc && !s3)
		ds_error("'%s': %s", path, ds_strerror(orc));
	if (orc)
		fd = -1;
	if (fd < 0 || ds__seal_check_fd(fd, path, DS__SEAL_PACK_MAGIC, &seal) ||
	    ds__h5_crosscheck(h5_path(v, path, fd), &seal))
		v->problems++;
	if (fd >= 0)
		close(fd);
	free(path);
}

/* ---- overlaps ----------------------------------------------------------- */
static int by_place(const void *a, const void *b, void *ctx)
{
	const struct ds_manifest *m = ctx;
	const struct ds_mentry *x = &m->e[*(const size_t *)a], *y = &m->e[*(const size_t *)b];
	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->stored < y->stored ? -1 : x->stored > y->stored;
}

static void check_overlaps(struct verify *v)
{
	const struct ds_manifest *m = v->m;
	size_t *ix = ds_xmalloc((m->n + 1) * sizeof(*ix)), n = 0;
	for (size_t i = 0; i < m->n; i++)
		if (S_ISREG(m->e[i].mode))
			ix[n++] = i;
	qsort_r(ix, n, sizeof(*ix), by_place, (void *)m);
	for (size_t k = 1; k < n; k++) {
		const struct ds_mentry *a = &m->e[ix[k - 1]], *b = &m->e[ix[k]];
		if (a->part == b->part && b->stored && a->offset + a->stored > b->offset)
			problem(v, b->path, "stored bytes overlap those of '%s'", a->path);
	}
	free(ix);
}

/* ---- a partition's own table -------------------------------------------- */
static int row_matches(const struct ds__table *t, const struct ds__row *r, const struct ds_mentry *e)
{
	size_t len = strlen(e->path);
	return r->path_off <= t->pool_len && r->path_len <= t->pool_len - r->path_off &&
	       r->path_len == len && !memcmp(t->pool + r->path_off, e->path, len) &&
	       r->mode == e->mode && r->mtime_ns == e->mtime_ns && r->size == e->size &&
	       r->part == e->part && r->offset == e->offset && r->stored == e->stored &&
	       r->codec == e->codec && r->crc == e->crc;
}

/* files[0..n): the manifest's files of this partition, in path order. */
static void check_table(struct verify *v, const struct ds__part *p, const struct ds__table *t,
                        const size_t *files, size_t n)
{
	if (t->n != n) {
		char d[64];
		snprintf(d, sizeof(d), "%llu files, index.h5 says %zu", (unsigned long long)t->n, n);
		problem(v, p->path, "its entries table lists %s", d);
		return;
	}
	for (size_t k = 0; k < n; k++)
		if (!row_matches(t, &t->rows[k], &v->m->e[files[k]])) {
			problem(v, p->path, "its entries table differs from index.h5 at '%s'",
			        v->m->e[files[k]].path);
			return;
		}
}

/* ---- --against ---------------------------------------------------------- */
#define CMPBUF (1u << 20)

struct cmp {
	int fd;
	uint64_t pos;
	int differs, err;
	char *buf; /* CMPBUF bytes */
};

/* Does the source have no data in [pos, pos+n)?  (A hole reads as zeros.) */
static int source_hole(int fd, uint64_t pos, uint64_t n)
{
	off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
	return (d < 0 && errno == ENXIO) || (d >= 0 && (uint64_t)d >= pos + n);
}

/* Compare each piece of decoded bytes with the source at the same place;
 * a run of zeros (p == NULL) matching a hole of the source is not read. */
static int cmp_piece(void *ctx, const void *p, size_t n)
{
	struct cmp *c = ctx;
	if (!p && !c->differs && !c->err && source_hole(c->fd, c->pos, n)) {
		c->pos += n;
		return 0;
	}
	for (size_t done = 0; done < n && !c->differs && !c->err;) {
		size_t k = n - done < CMPBUF ? n - done : CMPBUF;
		int rc = ds_pread_full(c->fd, c->buf, k, (off_t)c->pos);
		if (rc == -EIO)
			c->differs = 1; /* source shorter */
		else if (rc)
			c->err = rc;
		else if (memcmp(c->buf, p ? (const char *)p + done : ds__zeros, k))
			c->differs = 1;
		c->pos += k;
		done += k;
	}
	return 0;
}

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Metadata of e against the source; 0 when the same.  Sets *st. */
static int against_meta(struct verify *v, const struct ds_mentry *e, struct stat *st)
{
	if (fstatat(v->srcfd, e->path, st, AT_SYMLINK_NOFOLLOW) < 0) {
		problem(v, e->path, "in the pack but not in the source: %s", strerror(errno));
		return -1;
	}
	/* a packed file or directory may come from a symlink (--dereference) */
	if (!S_ISLNK(e->mode) && S_ISLNK(st->st_mode) && fstatat(v->srcfd, e->path, st, 0) < 0) {
		problem(v, e->path, "source symlink leads nowhere: %s", strerror(errno));
		return -1;
	}
	if ((st->st_mode & S_IFMT) != (e->mode & S_IFMT)) {
		problem(v, e->path, "%s", "differs from the source: not the same type");
		return -1;
	}
	char d[128];
	if ((st->st_mode & 07777) != (e->mode & 07777)) {
		snprintf(d, sizeof(d), "mode %04o in the pack, %04o in the source", e->mode & 07777,
		         st->st_mode & 07777);
		problem(v, e->path, "differs from the source: %s", d);
		return -1;
	}
	if (!S_ISDIR(e->mode) && (uint64_t)st->st_size != e->size) {
		snprintf(d, sizeof(d), "size %llu in the pack, %llu in the source",
		         (unsigned long long)e->size, (unsigned long long)st->st_size);
		problem(v, e->path, "differs from the source: %s", d);
		return -1;
	}
	if (!S_ISLNK(e->mode) && mtime_ns(st) != e->mtime_ns) {
		problem(v, e->path, "%s", "differs from the source: modification time");
		return -1;
	}
	return 0;
}

static void against_link(struct verify *v, const struct ds_mentry *e)
{
	char t[PATH_MAX];
	ssize_t n = readlinkat(v->srcfd, e->path, t, sizeof(t) - 1);
	if (n < 0 || (size_t)n != strlen(e->target) || memcmp(t, e->target, (size_t)n))
		problem(v, e->path, "%s", "differs from the source: symlink target");
}

/* ---- files -------------------------------------------------------------- */
static void verify_file(struct verify *v, const struct ds__part *p, const struct ds_mentry *e)
{
	struct stat st;
	struct cmp c = {.fd = -1, .buf = v->srcbuf};
	int against = v->srcfd >= 0;
	if (against) {
		if (against_meta(v, e, &st))
			against = 0; /* reported; still check the checksum */
		else if ((c.fd = openat(v->srcfd, e->path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) <
		         0) {
			problem(v, e->path, "cannot open the source: %s", strerror(errno));
			against = 0;
		} else if (fstat(c.fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			/* swapped for a FIFO or device since it was looked at: no hang */
			problem(v, e->path, "cannot open the source: %s", ds_strerror(-DS_ENOTREG));
			close(c.fd);
			c.fd = -1;
			against = 0;
		}
	}
	/* in place: the bytes where they lie (ds_src_read_entry names a
	 * changed or vanished source and a checksum mismatch itself) */
	int rc = p ? ds__entry_read(p, e, against ? cmp_piece : NULL, &c)
	           : ds_src_read_entry(v->rootfd, v->m, e, against ? cmp_piece : NULL, &c);
	if (c.fd >= 0)
		close(c.fd);
	if (rc && !p)
		v->problems++;
	else if (rc == -DS_ECHECKSUM)
		problem(v, e->path, "checksum mismatch (%s)", p->path);
	else if (rc == -DS_ECORRUPT)
		problem(v, e->path, "corrupt stored data (%s)", p->path);
	else if (rc)
		problem(v, e->path, "cannot read: %s", ds_strerror(rc));
	else if (c.err)
		problem(v, e->path, "cannot read the source: %s", ds_strerror(c.err));
	else if (c.differs)
		problem(v, e->path, "%s", "differs from the source: content");
	v->files++;
	v->bytes += e->size;
}

static void verify_part(struct verify *v, uint32_t part, const size_t *files, size_t n)
{
	struct ds__part p;
	struct ds__table t;
	if (v->rootfd >= 0) { /* in place: no partition files */
		for (size_t k = 0; k < n; k++)
			verify_file(v, NULL, &v->m->e[files[k]]);
		return;
	}
	if (ds__part_open(v->out, part, v->m, &p, &t)) {
		v->problems++;
		return; /* reported; its files cannot be checked */
	}
	check_table(v, &p, &t, files, n);
	ds__table_release(&t);
	if (ds__h5_crosscheck(h5_path(v, p.path, p.fd), &p.seal))
		v->problems++;
	for (size_t k = 0; k < n; k++)
		verify_file(v, &p, &v->m->e[files[k]]);
	ds__part_close(&p);
}

/* Files grouped by partition, path order inside each (counting sort). */
static size_t *group_files(const struct ds_manifest *m, size_t *start)
{
	size_t *files = ds_xmalloc((m->n + 1) * sizeof(*files));
	memset(start, 0, (m->nparts + 1) * sizeof(*start));
	for (size_t i = 0; i < m->n; i++)
		if (S_ISREG(m->e[i].mode))
			start[m->e[i].part + 1]++;
	for (uint32_t p = 0; p < m->nparts; p++)
		start[p + 1] += start[p];
	size_t *fill = ds_xmalloc((m->nparts + 1) * sizeof(*fill));
	memcpy(fill, start, (m->nparts + 1) * sizeof(*fill));
	for (size_t i = 0; i < m->n; i++)
		if (S_ISREG(m->e[i].mode))
			files[fill[m->e[i].part]++] = i;
	free(fill);
	return files;
}

static int parse_args(int argc, char **argv, const char **against, int *quiet)
{
	static const struct option longs[] = {{"against", required_argument, NULL, 'a'},
	                                      {"quiet", no_argument, NULL, 'q'},
	                                      {"help", no_argument, NULL, 'h'},
	                                      {NULL, 0, NULL, 0}};
	int ch;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "qh", longs, NULL)) != -1) {
		switch (ch) {
		case 'a': *against = optarg; break;
		case 'q': *quiet = 1; break;
		case 'h': fputs(usage_text, stdout); return 1;
		default:
			ds_error("'%s': unknown option or missing argument (see 'dstage verify --help')",
			         argv[optind - 1]);
			return -1;
		}
	}
	if (argc - optind != 1) {
		ds_error("wants OUT (see 'dstage verify --help')");
		return -1;
	}
	return 0;
}

int ds_cmd_verify(int argc, char **argv)
{
	const char *against = NULL;
	int quiet = 0;
	int rc = parse_args(argc, argv, &against, &quiet);
	if (rc)
		return rc > 0 ? 0 : 2;
	struct ds_manifest m;
	struct verify v = {.out = argv[optind], .m = &m, .srcfd = -1, .rootfd = -1};
	if (ds__manifest_any(v.out, &m))
		return 1;
	if (m.root && ds_src_root_open(&m, &v.rootfd)) {
		ds_manifest_release(&m);
		return 1;
	}
	if (against && !strncmp(against, "s3://", 5)) {
		ds_error("'%s': --against wants a local tree", against);
		ds_manifest_release(&m);
		return 2;
	}
	if (against && (v.srcfd = open(against, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ds_error("'%s': %s", against, strerror(errno));
		ds_manifest_release(&m);
		return 1;
	}
	v.srcbuf = ds_xmalloc(CMPBUF);
	check_index_hdf5(&v);
	check_overlaps(&v);
	size_t *start = ds_xmalloc((m.nparts + 1) * sizeof(*start));
	size_t *files = group_files(&m, start);
	for (uint32_t p = 0; p < m.nparts; p++)
		verify_part(&v, p, files + start[p], start[p + 1] - start[p]);
	for (size_t i = 0; v.srcfd >= 0 && i < m.n; i++) {
		struct stat st;
		if (!S_ISREG(m.e[i].mode) && !against_meta(&v, &m.e[i], &st) && S_ISLNK(m.e[i].mode))
			against_link(&v, &m.e[i]);
	}
	if (!quiet) {
		char b[32];
		printf("%s: %llu files (%s) in %u partitions, %zu entries: %s%llu problem%s\n", v.out,
		       (unsigned long long)v.files, ds_fmt_size(v.bytes, b, sizeof(b)), m.nparts, m.n,
		       v.problems ? "" : "ok, ", (unsigned long long)v.problems, v.problems == 1 ? "" : "s");
	}
	free(files);
	free(start);
	free(v.srcbuf);
	if (v.srcfd >= 0)
		close(v.srcfd);
	if (v.rootfd >= 0)
		close(v.rootfd);
	ds_manifest_release(&m);
	return v.problems ? 1 : 0;
}
