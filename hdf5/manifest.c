/* SPDX-License-Identifier: BSD-3-Clause */
/* manifest.c: reading index.h5 (from disk or from an in-memory image) and
 * the entries tables of partitions, at the offsets their seals give (no
 * HDF5 call: see seal.c).  Everything read is untrusted: every
 * count is bounded by the bytes really present before memory is allocated
 * for it, every offset is checked against what it points into, every name
 * is checked before anyone uses it as a path. */
#include "pack_int.h"
#include "dsmpi.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- small helpers ------------------------------------------------------ */
/* Strict UTF-8 (no overlongs, no surrogates), as ds_name_check wants it. */
static int utf8_valid(const unsigned char *s, size_t len)
{
	for (size_t i = 0; i < len;) {
		unsigned c = s[i];
		size_t n;
		uint32_t cp;
		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return 0;
		}
		if (i + n >= len)
			return 0;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return 0;
			cp = cp << 6 | (s[i + k] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return 0;
		i += n + 1;
	}
	return 1;
}

char *ds__quote(const char *s, size_t len, char *buf, size_t cap)
{
	/* escape high bytes only when the name is not valid UTF-8 */
	int high = !utf8_valid((const unsigned char *)s, len);
	size_t w = 0;
	for (size_t i = 0; i < len && w + 5 < cap; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == 0x7f || (high && c >= 0x80))
			w += snprintf(buf + w, cap - w, "\\x%02x", c);
		else
			buf[w++] = (char)c;
	}
	if (cap)
		buf[w < cap ? w : cap - 1] = '\0';
	return buf;
}

char *ds__join(const char *dir, const char *name)
{
	size_t a = strlen(dir), b = strlen(name);
	char *p = ds_xmalloc(a + b + 2);
	memcpy(p, dir, a);
	p[a] = '/';
	memcpy(p + a + 1, name, b + 1);
	return p;
}

void ds__mode_string(uint32_t mode, char buf[11])
{
	static const char rwx[] = "rwxrwxrwx";
	buf[0] = S_ISDIR(mode) ? 'd' : S_ISLNK(mode) ? 'l' : '-';
	for (int i = 0; i < 9; i++)
		buf[1 + i] = mode & (0400u >> i) ? rwx[i] : '-';
	if (mode & S_ISUID)
		buf[3] = mode & S_IXUSR ? 's' : 'S';
	if (mode & S_ISGID)
		buf[6] = mode & S_IXGRP ? 's' : 'S';
	if (mode & S_ISVTX)
		buf[9] = mode & S_IXOTH ? 't' : 'T';
	buf[10] = '\0';
}

char *ds_part_path(const char *packdir, uint32_t part)
{
	char name[32];
	snprintf(name, sizeof(name), "part-%05u.h5", part);
	return ds__join(packdir, name);
}

/* ---- names -------------------------------------------------------------- */
int ds__target_check(const char *link, size_t link_len, const char *target, size_t len,
                     const char **why)
{
	/* where it points: common's check (also used by the index and the shim) */
	int rc = ds_target_check(link, link_len, target, len, why);
	if (rc)
		return rc;
	/* what it names: every component a safe name */
	for (size_t i = 0; i < len;) {
		size_t j = i;
		while (j < len && target[j] != '/')
			j++;
		size_t c = j - i;
		const char *w;
		if (c && !(c == 1 && target[i] == '.') && !(c == 2 && target[i] == '.' && target[i + 1] == '.') &&
		    ds_name_check(target + i, c, &w)) {
			*why = w;
			return -DS_ENAME;
		}
		i = j + 1;
	}
	return 0;
}

/* ---- tables ------------------------------------------------------------- */
/* len bytes at off of the source into a new buffer (the seal's checks put
 * [off, off + len) inside the file). */
static int src_read(const struct ds__src *src, uint64_t off, uint64_t len, void **out)
{
	char *buf = ds_xmalloc(len + 1);
	int rc = 0;
	if (src->fd >= 0)
		rc = ds_pread_full(src->fd, buf, len, (off_t)off);
	else if (off > src->len || len > src->len - off)
		rc = -DS_ECORRUPT;
	else
		memcpy(buf, src->buf + off, len);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

void ds__table_release(struct ds__table *t)
{
	ds_free(&t->rows);
	ds_free(&t->pool);
	t->n = t->pool_len = 0;
}

int ds__table_read(const struct ds__src *src, const struct ds__seal *s, const char *what,
                   struct ds__table *t)
{
	void *raw = NULL;
	int rc;
	memset(t, 0, sizeof(*t));
	t->n = s->nentries;
	t->pool_len = s->strings_len;
	if ((rc = src_read(src, s->entries_off, t->n * DS__ROW_BYTES, &raw)) ||
	    (rc = src_read(src, s->strings_off, t->pool_len, (void **)&t->pool))) {
		ds_error("'%s': cannot read the entries table: %s", what, ds_strerror(rc));
		free(raw);
		ds__table_release(t);
		return rc;
	}
	t->rows = ds_xmalloc(t->n * sizeof(*t->rows) + 1);
	ds__rows_decode(raw, t->n, t->rows);
	t->pool[t->pool_len] = '\0';
	free(raw);
	return 0;
}

/* ---- manifest validation ------------------------------------------------ */
struct check {
	const char *what;     /* file name for messages */
	const struct ds__table *t;
	struct ds_manifest *m;
	uint32_t *dirstack;   /* entries of the open ancestor directories */
	size_t depth;
	uint32_t *nfiles;     /* per partition, counted */
};

static int bad_entry(const struct check *c, uint64_t i, const char *path, size_t len,
                     const char *why)
{
	char q[512];
	if (path)
		ds_error("'%s': entry %llu ('%s'): %s", c->what, (unsigned long long)i,
		         ds__quote(path, len, q, sizeof(q)), why);
	else
		ds_error("'%s': entry %llu: %s", c->what, (unsigned long long)i, why);
	return -DS_ECORRUPT;
}

static int in_pool(const struct ds__table *t, uint64_t off, uint64_t len)
{
	return off <= t->pool_len && len <= t->pool_len - off;
}

/* Is the parent of path (everything before its last '/') the directory on
 * top of the stack?  Pops the directories whose subtree has ended.  Works
 * because entries are sorted with '/' below every other byte: a
 * directory's subtree follows it contiguously. */
static int parent_ok(struct check *c, const char *path, size_t len)
{
	const char *slash = memrchr(path, '/', len);
	size_t plen = slash ? (size_t)(slash - path) : 0;
	while (c->depth) {
		const char *top = c->m->e[c->dirstack[c->depth - 1]].path;
		size_t tl = strlen(top);
		if (tl < len && !memcmp(top, path, tl) && path[tl] == '/')
			break;
		c->depth--;
	}
	if (!c->depth)
		return plen == 0;
	return strlen(c->m->e[c->dirstack[c->depth - 1]].path) == plen;
}

static int check_file(struct check *c, uint64_t i, const struct ds__row *r, const char *path)
{
	const struct ds_manifest *m = c->m;
	if (r->part >= m->nparts)
		return bad_entry(c, i, path, r->path_len, "partition number out of range");
	if (r->codec != DS_CODEC_NONE && r->codec != DS_CODEC_ZLIB)
		return bad_entry(c, i, path, r->path_len, "unknown codec");
	if (r->codec == DS_CODEC_NONE ? r->stored != r->size : r->stored == 0)
		return bad_entry(c, i, path, r->path_len, "stored size does not fit the codec");
	uint64_t psize = m->parts[r->part].size;
	if (r->stored > psize || r->offset > psize - r->stored)
		return bad_entry(c, i, path, r->path_len, "stored bytes outside the partition payload");
	if (!(r->flags & DS_EF_REPLICATED) != !m->parts[r->part].replicated)
		return bad_entry(c, i, path, r->path_len, "replicated flag differs from its partition's");
	if (r->target_len)
		return bad_entry(c, i, path, r->path_len, "a file with a symlink target");
	c->nfiles[r->part]++;
	return 0;
}

static int check_other(struct check *c, uint64_t i, const struct ds__row *r, const char *path)
{
	if (r->part != UINT32_MAX || r->offset || r->stored || r->codec)
		return bad_entry(c, i, path, r->path_len, "payload fields set on a non-file");
	if (S_ISDIR(r->mode)) {
		if (r->target_len)
			return bad_entry(c, i, path, r->path_len, "a directory with a symlink target");
		return 0;
	}
	const char *why;
	if (!in_pool(c->t, r->target_off, r->target_len))
		return bad_entry(c, i, path, r->path_len, "symlink target outside the string pool");
	if (ds__target_check(path, r->path_len, c->t->pool + r->target_off, r->target_len, &why))
		return bad_entry(c, i, path, r->path_len, why);
	if (r->size != r->target_len)
		return bad_entry(c, i, path, r->path_len, "symlink size differs from its target's length");
	return 0;
}

/* Copy row i into manifest entry i, strings into the arena at *arena. */
static void fill_entry(struct ds_mentry *e, const struct ds__row *r, const struct ds__table *t,
                       char **arena)
{
	e->path = *arena;
	memcpy(e->path, t->pool + r->path_off, r->path_len);
	e->path[r->path_len] = '\0';
	*arena += r->path_len + 1;
	e->target = NULL;
	if (S_ISLNK(r->mode)) {
		e->target = *arena;
		memcpy(e->target, t->pool + r->target_off, r->target_len);
		e->target[r->target_len] = '\0';
		*arena += r->target_len + 1;
	}
	e->mode = r->mode;
	e->mtime_ns = r->mtime_ns;
	e->size = r->size;
	e->part = r->part;
	e->offset = r->offset;
	e->stored = r->stored;
	e->codec = r->codec;
	e->flags = r->flags;
	e->crc = r->crc;
	e->src_off = 0;
	e->ctime_ns = 0; /* not in a pack: a copy or restore changes it */
}

/* Row r, entry i of the manifest (r need not be c->t->rows[i]: a chunk of
 * the streamed manifest holds its own rows and strings, ds_mstream_run). */
static int check_row(struct check *c, uint64_t i, const struct ds__row *r)
{
	const struct ds__table *t = c->t;
	const char *why;
	if (!in_pool(t, r->path_off, r->path_len))
		return bad_entry(c, i, NULL, 0, "path outside the string pool");
	const char *path = t->pool + r->path_off;
	if (ds_name_check(path, r->path_len, &why) || ds_name_reserved(path, r->path_len, &why))
		return bad_entry(c, i, path, r->path_len, why);
	uint32_t type = r->mode & S_IFMT;
	if ((type != S_IFDIR && type != S_IFREG && type != S_IFLNK) || (r->mode & ~(S_IFMT | 07777)))
		return bad_entry(c, i, path, r->path_len, "not a directory, file or symlink");
	if (r->flags & ~(DS_EF_REPLICATED | DS_EF_SAMPLE))
		return bad_entry(c, i, path, r->path_len, "unknown flags");
	return type == S_IFREG ? check_file(c, i, r, path) : check_other(c, i, r, path);
}

/* No two files may claim the same stored bytes: a reader (stage's sink
 * above all) walks a partition's payload in offset order and a file that
 * starts inside the one before it would be written over it. */
struct span {
	uint32_t part;
	uint64_t off, end;
	size_t i;
};

static int span_cmp(const void *x, const void *y)
{
	const struct span *a = x, *b = y;
	if (a->part != b->part)
		return a->part < b->part ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

static int check_overlaps(const char *what, const struct ds_manifest *m)
{
	struct span *v = ds_xmalloc((m->n + 1) * sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < m->n; i++)
		if (S_ISREG(m->e[i].mode) && m->e[i].stored)
			v[n++] = (struct span){m->e[i].part, m->e[i].offset,
			                       m->e[i].offset + m->e[i].stored, i};
	qsort(v, n, sizeof(*v), span_cmp);
	int rc = 0;
	for (size_t k = 1; k < n && !rc; k++)
		if (v[k].part == v[k - 1].part && v[k].off < v[k - 1].end) {
			ds_error("'%s': '%s': stored bytes overlap those of '%s' (partition %u)", what,
			         m->e[v[k].i].path, m->e[v[k - 1].i].path, v[k].part);
			rc = -DS_ECORRUPT;
		}
	free(v);
	return rc;
}

/* Validate every row and build the manifest's entries (one block: the
 * entries, then their paths and targets). */
static int build_entries(struct check *c)
{
	const struct ds__table *t = c->t;
	struct ds_manifest *m = c->m;
	uint64_t strbytes = 0, nstr = 0;
	int rc;
	for (uint64_t i = 0; i < t->n; i++) {
		const struct ds__row *r = &t->rows[i];
		if ((rc = check_row(c, i, r)))
			return rc;
		strbytes += r->path_len + (S_ISLNK(r->mode) ? (uint64_t)r->target_len : 0);
		nstr += 1 + !!S_ISLNK(r->mode);
	}
	/* Strings never share pool bytes in a pack we wrote; requiring it bounds
	 * the arena by the pool, so rows that all point at one long string
	 * cannot make us allocate terabytes. */
	if (strbytes > t->pool_len) {
		ds_error("'%s': string pool reused across entries", c->what);
		return -DS_ECORRUPT;
	}
	strbytes += nstr; /* terminators */
	m->e = ds_xmalloc(t->n * sizeof(*m->e) + strbytes);
	char *arena = (char *)(m->e + t->n);
	c->dirstack = ds_xmalloc((t->n + 1) * sizeof(*c->dirstack));
	for (uint64_t i = 0; i < t->n; i++) {
		struct ds_mentry *e = &m->e[i];
		fill_entry(e, &t->rows[i], t, &arena);
		m->n = i + 1;
		if (i && ds_path_cmp(m->e[i - 1].path, e->path) >= 0)
			return bad_entry(c, i, e->path, strlen(e->path), "entries not sorted, or a duplicate");
		if (!parent_ok(c, e->path, strlen(e->path)))
			return bad_entry(c, i, e->path, strlen(e->path), "parent directory missing");
		if (S_ISDIR(e->mode))
			c->dirstack[c->depth++] = (uint32_t)i;
		if (S_ISREG(e->mode)) {
			if (m->total_size + e->size < m->total_size)
				return bad_entry(c, i, e->path, strlen(e->path), "sizes overflow");
			m->total_size += e->size;
			m->total_stored += e->stored;
		}
	}
	for (uint32_t p = 0; p < m->nparts; p++)
		if (c->nfiles[p] != m->parts[p].nfiles) {
			ds_error("'%s': partition %u: %u files listed, the entries name %u", c->what, p,
			         m->parts[p].nfiles, c->nfiles[p]);
			return -DS_ECORRUPT;
		}
	return check_overlaps(c->what, m);
}

static int read_partitions(const struct ds__src *src, const struct ds__seal *s, const char *what,
                           struct ds_manifest *m)
{
	void *raw;
	int rc = src_read(src, s->parts_off, (uint64_t)s->nparts * DS__PROW_BYTES, &raw);
	if (rc) {
		ds_error("'%s': cannot read the partitions table: %s", what, ds_strerror(rc));
		return rc;
	}
	struct ds__prow *rows = ds_xmalloc(((size_t)s->nparts + 1) * sizeof(*rows));
	ds__prows_decode(raw, s->nparts, rows);
	m->nparts = s->nparts;
	m->parts = ds_xcalloc((size_t)s->nparts + 1, sizeof(*m->parts));
	for (uint32_t i = 0; i < s->nparts; i++) {
		m->parts[i].size = rows[i].size;
		m->parts[i].nfiles = rows[i].nfiles;
		m->parts[i].replicated = rows[i].replicated != 0;
	}
	free(rows);
	free(raw);
	return 0;
}

/* An in-place index: the sources table (pack_int.h, DS__SROW_BYTES rows:
 * the root, then one per entry).  Sets m->root (one block that also holds
 * every src string) and each entry's src and src_off; a file without its
 * own src string reads from its own path. */
static int read_sources(const struct ds__src *src, const struct ds__seal *s,
                        const struct ds__table *t, const char *what, struct ds_manifest *m)
{
	unsigned char *raw;
	int rc = src_read(src, s->payload_off, s->payload_len, (void **)&raw);
	if (rc) {
		ds_error("'%s': cannot read the sources table: %s", what, ds_strerror(rc));
		return rc;
	}
	uint64_t nrows = s->payload_len / DS__SROW_BYTES, strbytes = 0;
	struct srow {
		uint64_t off, str;
		uint32_t len;
	} *v = ds_xmalloc(nrows * sizeof(*v) + 1);
	for (uint64_t i = 0; i < nrows; i++) {
		const unsigned char *r = raw + i * DS__SROW_BYTES;
		v[i].off = v[i].str = 0;
		v[i].len = 0;
		for (int k = 7; k >= 0; k--) {
			v[i].off = v[i].off << 8 | r[k];
			v[i].str = v[i].str << 8 | r[8 + k];
		}
		for (int k = 3; k >= 0; k--)
			v[i].len = v[i].len << 8 | r[16 + k];
		strbytes += (uint64_t)v[i].len + 1;
	}
	free(raw);
	struct check c = {.what = what, .t = t, .m = m};
	rc = 0;
	const char *pool = t->pool, *why;
	if (!nrows || !in_pool(t, v[0].str, v[0].len) || v[0].len < 2 || v[0].len >= PATH_MAX ||
	    pool[v[0].str] != '/' || memchr(pool + v[0].str, '\0', v[0].len)) {
		ds_error("'%s': in-place pack without a valid source root", what);
		rc = -DS_ECORRUPT;
	} else if (strbytes > t->pool_len + nrows) {
		ds_error("'%s': string pool reused across sources", what);
		rc = -DS_ECORRUPT;
	}
	char *arena = rc ? NULL : ds_xmalloc(strbytes + 1);
	if (arena) {
		m->root = arena;
		memcpy(arena, pool + v[0].str, v[0].len);
		arena[v[0].len] = '\0';
		arena += v[0].len + 1;
	}
	for (uint64_t i = 0; !rc && i < m->n; i++) {
		struct ds_mentry *e = &m->e[i];
		const struct srow *r = &v[i + 1];
		e->src = e->path;
		e->src_off = r->off;
		if (!S_ISREG(e->mode)) {
			if (r->off || r->len)
				rc = bad_entry(&c, i, e->path, strlen(e->path), "a source on a non-file");
			continue;
		}
		if (e->codec != DS_CODEC_NONE)
			rc = bad_entry(&c, i, e->path, strlen(e->path), "compressed in an in-place pack");
		else if (r->off > UINT64_MAX - e->size || r->off > INT64_MAX - e->size)
			rc = bad_entry(&c, i, e->path, strlen(e->path), "source range overflows");
		else if (!r->len && r->off)
			rc = bad_entry(&c, i, e->path, strlen(e->path), "offset into its own file");
		if (rc || !r->len)
			continue;
		if (!in_pool(t, r->str, r->len))
			rc = bad_entry(&c, i, e->path, strlen(e->path), "source outside the string pool");
		else if (ds_name_check(pool + r->str, r->len, &why) ||
		         ds_name_reserved(pool + r->str, r->len, &why))
			rc = bad_entry(&c, i, e->path, strlen(e->path), why);
		if (rc)
			continue;
		e->src = arena;
		memcpy(arena, pool + r->str, r->len);
		arena[r->len] = '\0';
		arena += r->len + 1;
	}
	free(v);
	return rc;
}

/* Build and validate a manifest from index.h5's tables. */
static int manifest_from(const struct ds__src *src, const struct ds__seal *s, const char *what,
                         struct ds_manifest *m)
{
	struct ds__table t;
	int rc;
	memset(m, 0, sizeof(*m));
	m->pack_id = s->pack_id;
	if ((rc = read_partitions(src, s, what, m)))
		goto fail;
	if ((rc = ds__table_read(src, s, what, &t)))
		goto fail;
	struct check c = {.what = what, .t = &t, .m = m};
	c.nfiles = ds_xcalloc((size_t)m->nparts + 1, sizeof(*c.nfiles));
	rc = build_entries(&c);
	if (!rc && (s->flags & DS__SEAL_INPLACE))
		rc = read_sources(src, s, &t, what, m);
	else
		for (size_t i = 0; i < m->n; i++)
			m->e[i].src = m->e[i].path; /* a pack holding its bytes */
	free(c.nfiles);
	free(c.dirstack);
	ds__table_release(&t);
	if (!rc)
		return 0;
fail:
	ds_manifest_release(m);
	return rc;
}

int ds_manifest_read_image(const void *buf, size_t len, const char *what, struct ds_manifest *m)
{
	struct ds__seal seal;
	struct ds__src src = {-1, buf, len};
	memset(m, 0, sizeof(*m));
	int rc = ds__seal_check_buf(buf, len, what, DS__SEAL_PACK_MAGIC, &seal);
	return rc ? rc : manifest_from(&src, &seal, what, m);
}

int ds_manifest_read(const char *packdir, struct ds_manifest *m)
{
	char *path = ds__join(packdir, DS__INDEX_NAME);
	struct ds__seal seal;
	int rc;
	memset(m, 0, sizeof(*m));
	int fd;
	if ((rc = ds_open_regular(path, &fd))) {
		ds_error("'%s': %s", path, ds_strerror(rc));
	} else {
		struct ds__src src = {fd, NULL, 0};
		rc = ds__seal_check_fd(fd, path, DS__SEAL_PACK_MAGIC, &seal);
		if (!rc)
			rc = manifest_from(&src, &seal, path, m);
		close(fd);
	}
	free(path);
	return rc;
}

void ds_manifest_release(struct ds_manifest *m)
{
	ds__mblocks_free(m);
	ds_free(&m->e);
	ds_free(&m->parts);
	ds_free(&m->root);
	m->n = 0;
	m->nparts = 0;
}

int64_t ds__path_find(size_t n, const char *(*path_at)(const void *ctx, size_t i), const void *ctx,
                      const char *path)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = ds_path_cmp(path_at(ctx, mid), path);
		if (!c)
			return (int64_t)mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

static const char *mentry_path(const void *m, size_t i)
{
	return ((const struct ds_manifest *)m)->e[i].path;
}

int64_t ds__manifest_find(const struct ds_manifest *m, const char *path)
{
	return ds__path_find(m->n, mentry_path, m, path);
}

/* ---- the manifest streamed to every rank (issue 27) --------------------- */
#define MS_ROWS 16384u          /* rows per chunk */
#define MS_BLOCK (1u << 20)     /* bytes per block of kept paths */

struct mblock {
	struct mblock *next;
	size_t used, cap;
	char data[];
};

void ds__mblocks_free(struct ds_manifest *m)
{
	for (struct mblock *b = m->blocks, *n; b; b = n) {
		n = b->next;
		free(b);
	}
	m->blocks = NULL;
}

static char *mblock_copy(struct ds_manifest *m, const char *s, size_t len)
{
	struct mblock *b = m->blocks;
	if (!b || b->cap - b->used < len + 1) {
		size_t cap = len + 1 > MS_BLOCK ? len + 1 : MS_BLOCK;
		b = ds_xmalloc(sizeof(*b) + cap);
		b->used = 0;
		b->cap = cap;
		b->next = m->blocks;
		m->blocks = b;
	}
	char *p = b->data + b->used;
	memcpy(p, s, len);
	p[len] = '\0';
	b->used += len + 1;
	return p;
}

/* CRC-32C of A then B from crc(A), crc(B) and B's length (zlib's
 * crc32_combine, over GF(2), with the Castagnoli polynomial): rank 0 reads
 * the tables in the order it needs them and checks the seal's CRC, which is
 * over the file's bytes in file order. */
static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
	uint32_t sum = 0;
	for (; vec; vec >>= 1, mat++)
		if (vec & 1)
			sum ^= *mat;
	return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
	for (int n = 0; n < 32; n++)
		sq[n] = gf2_times(mat, mat[n]);
}

static uint32_t crc32c_combine(uint32_t crc1, uint32_t crc2, uint64_t len2)
{
	uint32_t even[32], odd[32], row = 1;
	if (!len2)
		return crc1;
	odd[0] = 0x82f63b78u; /* reflected Castagnoli polynomial */
	for (int n = 1; n < 32; n++, row <<= 1)
		odd[n] = row;
	gf2_square(even, odd); /* two zero bits */
	gf2_square(odd, even); /* four */
	do {
		gf2_square(even, odd);
		if (len2 & 1)
			crc1 = gf2_times(even, crc1);
		len2 >>= 1;
		if (!len2)
			break;
		gf2_square(odd, even);
		if (len2 & 1)
			crc1 = gf2_times(odd, crc1);
		len2 >>= 1;
	} while (len2);
	return crc1 ^ crc2;
}

/* A region of index.h5 after the user block: a table, or the bytes between
 * (HDF5's own), with the CRC of what rank 0 has read of it. */
struct mregion {
	uint64_t off, len, done; /* done: bytes CRC'd, in order, from off */
	uint32_t crc;
};

enum { R_PARTS, R_STRINGS, R_ENTRIES, R_NTABLES };

struct ds_mstream {
	MPI_Comm world;
	int rank, whole;
	struct ds_manifest *m;
	char *what;              /* "PACK/index.h5", for messages */
	uint64_t nentries, pool_len;
	/* rank 0 */
	int fd;
	struct ds__src src;
	struct ds__seal seal;
	uint64_t *nread, img_read;
	struct mregion reg[R_NTABLES];
};

/* Rank 0: CRC [r->off + r->done, r->off + upto) of region r, reading it
 * (a piece the chunks did not bring: HDF5's bytes, a gap in the pool). */
static int mregion_read_to(struct ds_mstream *s, struct mregion *r, uint64_t upto)
{
	enum { PIECE = 1 << 20 };
	char *buf = NULL;
	int rc = 0;
	while (!rc && r->done < upto) {
		uint64_t n = upto - r->done < PIECE ? upto - r->done : PIECE;
		free(buf);
		buf = NULL;
		if (!(rc = src_read(&s->src, r->off + r->done, n, (void **)&buf))) {
			r->crc = ds_crc32c(r->crc, buf, (size_t)n);
			r->done += n;
			*s->nread += n;
		}
	}
	free(buf);
	return rc;
}

/* Rank 0: bytes [from, from + n) of region r were read into buf: CRC the
 * part past what is done (the part before it was CRC'd already). */
static void mregion_saw(struct mregion *r, uint64_t from, const char *buf, uint64_t n)
{
	if (from <= r->done && from + n > r->done) {
		r->crc = ds_crc32c(r->crc, buf + (r->done - from), (size_t)(from + n - r->done));
		r->done = from + n;
	}
}

/* Rank 0, at the end: the seal's CRC, over every byte after the user block
 * in file order, from the tables' CRCs and the bytes between them. */
static int mstream_crc_ok(struct ds_mstream *s)
{
	struct mregion *t[R_NTABLES];
	int nt = 0, rc;
	for (int k = 0; k < R_NTABLES; k++)
		if (s->reg[k].len)
			t[nt++] = &s->reg[k];
	for (int a = 1; a < nt; a++) /* by offset */
		for (int b = a; b > 0 && t[b]->off < t[b - 1]->off; b--) {
			struct mregion *x = t[b];
			t[b] = t[b - 1];
			t[b - 1] = x;
		}
	uint32_t crc = 0;
	uint64_t pos = DS__SEAL_SIZE;
	for (int k = 0; k <= nt; k++) {
		uint64_t end = k < nt ? t[k]->off : s->seal.file_size;
		struct mregion gap = {pos, end - pos, 0, 0};
		if ((rc = mregion_read_to(s, &gap, gap.len)))
			return rc;
		crc = crc32c_combine(crc, gap.crc, gap.len);
		if (k < nt) {
			if ((rc = mregion_read_to(s, t[k], t[k]->len)))
				return rc;
			crc = crc32c_combine(crc, t[k]->crc, t[k]->len);
			pos = t[k]->off + t[k]->len;
		}
	}
	if (crc != s->seal.meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its tables or HDF5 structure)", s->what);
		return -DS_ECORRUPT;
	}
	return 0;
}

/* Rank 0: can the tables be streamed?  Not an in-place index (its sources
 * table goes with the whole manifest), and tables that do not overlap (a
 * crafted seal; the whole reader refuses what is wrong in it). */
static int mstream_can(const struct ds__seal *sl)
{
	if (sl->flags & DS__SEAL_INPLACE)
		return 0;
	uint64_t o[3][2] = {{sl->parts_off, sl->nparts_rows * DS__PROW_BYTES},
	                    {sl->strings_off, sl->strings_len},
	                    {sl->entries_off, sl->nentries * DS__ROW_BYTES}};
	for (int a = 0; a < 3; a++)
		for (int b = a + 1; b < 3; b++)
			if (o[a][1] && o[b][1] && o[a][0] < o[b][0] + o[b][1] &&
			    o[b][0] < o[a][0] + o[a][1])
				return 0;
	return 1;
}

/* Rank 0: open the source and check the seal's header.  *whole set when
 * the manifest must be read whole; then img holds it. */
static int mstream_open0(struct ds_mstream *s, const void *img, size_t imglen, int *whole,
                         struct ds_buf *mine)
{
	unsigned char h[DS__SEAL_USED];
	uint64_t size;
	int rc;
	if (img) {
		s->src = (struct ds__src){-1, img, imglen};
		size = imglen;
		if (imglen < DS__SEAL_SIZE) {
			ds_error("'%s': truncated (%zu bytes)", s->what, imglen);
			return -DS_ECORRUPT;
		}
		memcpy(h, img, sizeof(h));
	} else {
		struct stat st;
		if ((rc = ds_open_regular(s->what, &s->fd))) {
			ds_error("'%s': %s", s->what, ds_strerror(rc));
			return rc;
		}
		s->src = (struct ds__src){s->fd, NULL, 0};
		if (fstat(s->fd, &st) < 0) {
			rc = -errno;
			ds_error("'%s': %s", s->what, ds_strerror(rc));
			return rc;
		}
		size = (uint64_t)st.st_size;
		if (size < DS__SEAL_SIZE) {
			ds_error("'%s': truncated (%llu bytes)", s->what, (unsigned long long)size);
			return -DS_ECORRUPT;
		}
		if ((rc = ds_pread_full(s->fd, h, sizeof(h), 0))) {
			ds_error("'%s': %s", s->what, ds_strerror(rc));
			return rc;
		}
	}
	if ((rc = ds__seal_check_head(h, size, s->what, DS__SEAL_PACK_MAGIC, &s->seal)))
		return rc;
	*whole = *whole || !mstream_can(&s->seal);
	if (*whole && !img) {
		/* the whole file, as before streaming */
		ds_buf_reserve(mine, size);
		if ((rc = ds_pread_full(s->fd, mine->data, size, 0))) {
			ds_error("'%s': %s", s->what, ds_strerror(rc));
			return rc;
		}
		mine->len = size;
		*s->nread += size;
		return 0;
	}
	if (*whole)
		return 0; /* img is the whole file, counted by the caller */
	*s->nread += sizeof(h);
	const struct ds__seal *sl = &s->seal;
	s->reg[R_PARTS] = (struct mregion){sl->parts_off, sl->nparts_rows * DS__PROW_BYTES, 0, 0};
	s->reg[R_STRINGS] = (struct mregion){sl->strings_off, sl->strings_len, 0, 0};
	s->reg[R_ENTRIES] = (struct mregion){sl->entries_off, sl->nentries * DS__ROW_BYTES, 0, 0};
	return 0;
}

int ds_mstream_open(MPI_Comm world, const char *packdir, const void *img, size_t imglen, int whole,
                    struct ds_manifest *m, struct ds_mstream **out, uint64_t *nread)
{
	struct ds_mstream *s = ds_xcalloc(1, sizeof(*s));
	struct ds_buf mine = {0};
	int rc = 0;
	s->world = world;
	MPI_Comm_rank(world, &s->rank);
	s->m = m;
	s->fd = -1;
	/* img: the caller counted the whole object it fetched */
	s->nread = img ? &s->img_read : nread;
	s->what = ds__join(packdir, DS__INDEX_NAME);
	memset(m, 0, sizeof(*m));
	*out = s;
	/* rank 0 says: status, whole, entries, pool bytes, partitions, pack_id,
	 * and (whole) the image's length */
	uint64_t hdr[7] = {0};
	if (s->rank == 0) {
		rc = mstream_open0(s, img, imglen, &whole, &mine);
		hdr[0] = (uint64_t)(int64_t)rc;
		hdr[1] = (uint64_t)whole;
		hdr[2] = s->seal.nentries;
		hdr[3] = s->seal.strings_len;
		hdr[4] = s->seal.nparts;
		hdr[5] = s->seal.pack_id;
		hdr[6] = img ? imglen : mine.len;
	}
	ds_mpi_bcast(world, hdr, sizeof(hdr), 0);
	if ((int64_t)hdr[0] < 0) {
		ds_buf_release(&mine);
		return (int)(int64_t)hdr[0];
	}
	s->whole = (int)hdr[1];
	s->nentries = hdr[2];
	s->pool_len = hdr[3];
	if (s->whole) {
		/* every rank parses the same image; each one says what is wrong */
		const void *buf = img ? img : mine.data;
		if (s->rank != 0) {
			ds_buf_reserve(&mine, hdr[6]);
			buf = mine.data;
		}
		ds_mpi_bcast(world, (void *)buf, hdr[6], 0);
		rc = ds_manifest_read_image(buf, hdr[6], s->what, m);
		ds_buf_release(&mine);
		return ds_any_failed(world, rc) ? (rc ? rc : -DS_ECORRUPT) : 0;
	}
	/* streamed: the partitions table now (rank 0 reads it whole: 13 bytes
	 * a partition), the entries at ds_mstream_run */
	uint32_t np = (uint32_t)hdr[4];
	unsigned char *raw = NULL;
	int64_t st = 0;
	if (s->rank == 0) {
		struct mregion *r = &s->reg[R_PARTS];
		if ((rc = src_read(&s->src, r->off, r->len, (void **)&raw))) {
			ds_error("'%s': cannot read the partitions table: %s", s->what, ds_strerror(rc));
			st = rc;
		} else {
			mregion_saw(r, 0, (char *)raw, r->len);
			*s->nread += r->len;
		}
	}
	ds_mpi_bcast(world, &st, sizeof(st), 0);
	if (st < 0) {
		free(raw);
		return (int)st;
	}
	if (s->rank != 0)
		raw = ds_xmalloc((size_t)np * DS__PROW_BYTES + 1);
	ds_mpi_bcast(world, raw, (uint64_t)np * DS__PROW_BYTES, 0);
	struct ds__prow *rows = ds_xmalloc(((size_t)np + 1) * sizeof(*rows));
	ds__prows_decode(raw, np, rows);
	m->nparts = np;
	m->parts = ds_xcalloc((size_t)np + 1, sizeof(*m->parts));
	for (uint32_t i = 0; i < np; i++) {
		m->parts[i].size = rows[i].size;
		m->parts[i].nfiles = rows[i].nfiles;
		m->parts[i].replicated = rows[i].replicated != 0;
	}
	m->pack_id = hdr[5];
	free(rows);
	free(raw);
	return 0;
}

int ds_mstream_whole(const struct ds_mstream *s)
{
	return s->whole;
}

void ds_mstream_bounds(const struct ds_mstream *s, uint64_t *n, uint64_t *names)
{
	*n = s->nentries;
	*names = s->pool_len + s->nentries;
}

/* The streaming form of the manifest's checks (build_entries): the last
 * path for the order, the open directories as prefix lengths of the last
 * one (each is an ancestor of the next: the subtree follows its directory),
 * counts per partition, totals. */
struct mcheck {
	struct check c;
	char *prev, *top;  /* last path; deepest open directory */
	size_t prev_cap, top_cap;
	size_t *dlen, dcap, depth;
	uint64_t strbytes, pool_len;
	char *scratch;     /* the entry being looked at, its strings */
	size_t scratch_cap;
};

static void grow(char **p, size_t *cap, size_t need)
{
	if (need > *cap) {
		*cap = need > 2 * *cap ? need : 2 * *cap;
		*p = ds_xrealloc(*p, *cap);
	}
}

static int mparent_ok(struct mcheck *k, const char *path, size_t len)
{
	const char *slash = memrchr(path, '/', len);
	size_t plen = slash ? (size_t)(slash - path) : 0;
	while (k->depth) {
		size_t tl = k->dlen[k->depth - 1];
		if (tl < len && !memcmp(k->top, path, tl) && path[tl] == '/')
			break;
		k->depth--;
	}
	return k->depth ? k->dlen[k->depth - 1] == plen : plen == 0;
}

/* Entry i (row r of chunk table t) checked and made a ds_mentry in *e (its
 * strings in k->scratch). */
static int mcheck_row(struct mcheck *k, uint64_t i, const struct ds__row *r, struct ds_mentry *e)
{
	struct check *c = &k->c;
	struct ds_manifest *m = c->m;
	int rc = check_row(c, i, r);
	if (rc)
		return rc;
	uint64_t sb = r->path_len + (S_ISLNK(r->mode) ? (uint64_t)r->target_len : 0);
	/* as build_entries: strings never share pool bytes in a pack we wrote */
	if ((k->strbytes += sb) > k->pool_len) {
		ds_error("'%s': string pool reused across entries", c->what);
		return -DS_ECORRUPT;
	}
	grow(&k->scratch, &k->scratch_cap, sb + 2);
	char *a = k->scratch;
	fill_entry(e, r, c->t, &a);
	e->src = e->path;
	size_t len = r->path_len;
	if (i && ds_path_cmp(k->prev, e->path) >= 0)
		return bad_entry(c, i, e->path, len, "entries not sorted, or a duplicate");
	if (!mparent_ok(k, e->path, len))
		return bad_entry(c, i, e->path, len, "parent directory missing");
	grow(&k->prev, &k->prev_cap, len + 1);
	memcpy(k->prev, e->path, len + 1);
	if (S_ISDIR(e->mode)) {
		grow(&k->top, &k->top_cap, len + 1);
		memcpy(k->top, e->path, len + 1);
		if (k->depth == k->dcap) {
			k->dcap = k->dcap ? 2 * k->dcap : 64;
			k->dlen = ds_xrealloc(k->dlen, k->dcap * sizeof(*k->dlen));
		}
		k->dlen[k->depth++] = len;
	}
	if (S_ISREG(e->mode)) {
		if (m->total_size + e->size < m->total_size)
			return bad_entry(c, i, e->path, len, "sizes overflow");
		m->total_size += e->size;
		m->total_stored += e->stored;
	}
	return 0;
}

/* A string [off, off + len) of the pool as an offset into a chunk's strings
 * [lo, hi); UINT64_MAX (outside any pool) when it is not inside it. */
static uint64_t rebase(uint64_t off, uint64_t len, uint64_t pool_len, uint64_t lo, uint64_t hi)
{
	if (off > pool_len || len > pool_len - off)
		return UINT64_MAX;
	if (!len)
		return 0;
	return off >= lo && off + len <= hi ? off - lo : UINT64_MAX;
}

/* Rank 0: the next chunk, rows [i0, i0 + n): its rows' bytes, and the
 * strings they name, [lo, hi) of the pool. */
static int mstream_chunk0(struct ds_mstream *s, uint64_t i0, uint64_t n, unsigned char **raw,
                          struct ds__row *rows, char **pool, uint64_t *lo, uint64_t *hi)
{
	struct mregion *re = &s->reg[R_ENTRIES], *rs = &s->reg[R_STRINGS];
	int rc = src_read(&s->src, re->off + i0 * DS__ROW_BYTES, n * DS__ROW_BYTES, (void **)raw);
	if (rc) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	*s->nread += n * DS__ROW_BYTES;
	mregion_saw(re, i0 * DS__ROW_BYTES, (char *)*raw, n * DS__ROW_BYTES);
	ds__rows_decode(*raw, n, rows);
	uint64_t L = UINT64_MAX, H = 0, P = s->pool_len;
	for (uint64_t j = 0; j < n; j++) {
		const struct ds__row *r = &rows[j];
		if (r->path_len && r->path_off <= P && r->path_len <= P - r->path_off) {
			L = r->path_off < L ? r->path_off : L;
			H = r->path_off + r->path_len > H ? r->path_off + r->path_len : H;
		}
		if (S_ISLNK(r->mode) && r->target_len && r->target_off <= P &&
		    r->target_len <= P - r->target_off) {
			L = r->target_off < L ? r->target_off : L;
			H = r->target_off + r->target_len > H ? r->target_off + r->target_len : H;
		}
	}
	*lo = *hi = 0;
	if (H <= L)
		return 0;
	/* the pool's bytes before these that no chunk brought: CRC'd here */
	if (L > rs->done && (rc = mregion_read_to(s, rs, L))) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	if ((rc = src_read(&s->src, rs->off + L, H - L, (void **)pool))) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	*s->nread += H - L;
	mregion_saw(rs, L, *pool, H - L);
	*lo = L;
	*hi = H;
	return 0;
}

/* Every rank: the chunk's entries, checked, kept or passed by. */
static int mstream_take(struct ds_mstream *s, struct mcheck *k, uint64_t i0, struct ds__table *t,
                        uint64_t lo, uint64_t hi, const uint8_t *keep_part, uint64_t *cap,
                        int (*each)(void *, const struct ds_mentry *), void *ctx, int *erc,
                        struct ds_mstream_stats *st)
{
	struct ds_manifest *m = s->m;
	for (uint64_t j = 0; j < t->n; j++) {
		struct ds__row *r = &t->rows[j];
		r->path_off = rebase(r->path_off, r->path_len, s->pool_len, lo, hi);
		r->target_off = rebase(r->target_off, r->target_len, s->pool_len, lo, hi);
	}
	for (uint64_t j = 0; j < t->n; j++) {
		struct ds_mentry e;
		int rc = mcheck_row(k, i0 + j, &t->rows[j], &e);
		if (rc)
			return rc;
		st->n++;
		st->files += S_ISREG(e.mode) != 0;
		st->dirs += S_ISDIR(e.mode) != 0;
		st->names += t->rows[j].path_len + 1 + (e.target ? t->rows[j].target_len + 1 : 0);
		if (each && !*erc)
			*erc = each(ctx, &e);
		if (!S_ISREG(e.mode) || !keep_part || !keep_part[e.part])
			continue;
		if (m->n == *cap) { /* more than the partitions table says: refused below */
			*cap = 2 * *cap + 16;
			m->e = ds_xrealloc(m->e, *cap * sizeof(*m->e));
		}
		struct ds_mentry *x = &m->e[m->n++];
		*x = e;
		x->path = x->src = mblock_copy(m, e.path, t->rows[j].path_len);
	}
	return 0;
}

int ds_mstream_run(struct ds_mstream *s, const uint8_t *keep_part,
                   int (*each)(void *ctx, const struct ds_mentry *e), void *ctx,
                   struct ds_mstream_stats *st)
{
	struct ds_manifest *m = s->m;
	memset(st, 0, sizeof(*st));
	if (s->whole) {
		for (size_t i = 0; i < m->n; i++) {
			st->files += S_ISREG(m->e[i].mode) != 0;
			st->dirs += S_ISDIR(m->e[i].mode) != 0;
			st->names += strlen(m->e[i].path) + 1 +
			             (m->e[i].target ? strlen(m->e[i].target) + 1 : 0);
		}
		st->n = m->n;
		return 0;
	}
	uint64_t cap = 0;
	for (uint32_t p = 0; keep_part && p < m->nparts; p++)
		cap += keep_part[p] ? m->parts[p].nfiles : 0;
	cap = cap < s->nentries ? cap : s->nentries; /* a crafted table's counts */
	m->e = ds_xmalloc((cap + 1) * sizeof(*m->e));
	m->n = 0;
	struct mcheck k;
	memset(&k, 0, sizeof(k));
	struct ds__table t = {0};
	k.c.what = s->what;
	k.c.t = &t;
	k.c.m = m;
	k.c.nfiles = ds_xcalloc((size_t)m->nparts + 1, sizeof(*k.c.nfiles));
	k.pool_len = s->pool_len;
	t.rows = ds_xmalloc(MS_ROWS * sizeof(*t.rows));
	int rc = 0, erc = 0, refused = 0;
	uint64_t i0 = 0;
	for (;;) {
		/* rank 0 says: status (< 0: its read failed; 1: stop, the rows
		 * were refused on every rank), rows, the strings' range */
		int64_t h[4] = {0, 0, 0, 0};
		unsigned char *raw = NULL;
		char *pool = NULL;
		uint64_t n = s->nentries - i0 < MS_ROWS ? s->nentries - i0 : MS_ROWS;
		if (s->rank == 0) {
			uint64_t lo = 0, hi = 0;
			int r0 = rc ? 0 : n ? mstream_chunk0(s, i0, n, &raw, t.rows, &pool, &lo, &hi)
			                    : mstream_crc_ok(s);
			h[0] = rc ? 1 : r0;
			h[1] = (int64_t)n;
			h[2] = (int64_t)lo;
			h[3] = (int64_t)hi;
		}
		ds_mpi_bcast(s->world, h, sizeof(h), 0);
		if (h[0] || !n) {
			free(raw);
			free(pool);
			if (!rc && h[0] < 0)
				rc = (int)h[0];
			break;
		}
		uint64_t lo = (uint64_t)h[2], hi = (uint64_t)h[3];
		if (s->rank != 0) {
			raw = ds_xmalloc(n * DS__ROW_BYTES + 1);
			pool = ds_xmalloc(hi - lo + 1);
		}
		ds_mpi_bcast(s->world, raw, n * DS__ROW_BYTES, 0);
		ds_mpi_bcast(s->world, pool, hi - lo, 0);
		if (!rc) {
			ds__rows_decode(raw, n, t.rows);
			t.n = n;
			t.pool = pool;
			t.pool_len = hi - lo;
			rc = mstream_take(s, &k, i0, &t, lo, hi, keep_part, &cap, each, ctx, &erc, st);
			refused = rc != 0;
		}
		free(raw);
		free(pool);
		t.pool = NULL;
		i0 += n;
	}
	/* refused rows may be damage rather than a crafted pack: rank 0 reads
	 * the rest for the seal's CRC and says so (the whole reader's order) */
	if (rc && s->rank == 0 && refused)
		(void)mstream_crc_ok(s);
	for (uint32_t p = 0; !rc && p < m->nparts; p++)
		if (k.c.nfiles[p] != m->parts[p].nfiles) {
			ds_error("'%s': partition %u: %u files listed, the entries name %u", s->what, p,
			         m->parts[p].nfiles, k.c.nfiles[p]);
			rc = -DS_ECORRUPT;
		}
	free(t.rows);
	free(k.c.nfiles);
	free(k.prev);
	free(k.top);
	free(k.dlen);
	free(k.scratch);
	rc = rc ? rc : erc;
	return ds_any_failed(s->world, rc) ? (rc ? rc : -DS_ECORRUPT) : 0;
}

void ds_mstream_close(struct ds_mstream *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->what);
	free(s);
}
