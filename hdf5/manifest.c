/* SPDX-License-Identifier: BSD-3-Clause */
/* manifest.c: reading index.h5 (from disk or from an in-memory image) and
 * the entries tables of partitions, at the offsets their seals give (no
 * HDF5 call: see seal.c).  Everything read is untrusted: every
 * count is bounded by the bytes really present before memory is allocated
 * for it, every offset is checked against what it points into, every name
 * is checked before anyone uses it as a path. */
#include "pack_int.h"

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

void ds__srows_decode(const unsigned char *raw, uint64_t n, struct ds__srow *v)
{
	for (uint64_t i = 0; i < n; i++) {
		const unsigned char *r = raw + i * DS__SROW_BYTES;
		v[i].off = v[i].str = 0;
		v[i].len = 0;
		for (int k = 7; k >= 0; k--) {
			v[i].off = v[i].off << 8 | r[k];
			v[i].str = v[i].str << 8 | r[8 + k];
		}
		for (int k = 3; k >= 0; k--)
			v[i].len = v[i].len << 8 | r[16 + k];
	}
}

int ds__sroot_check(const char *what, const struct ds__table *t, const struct ds__srow *r0)
{
	const char *pool = t->pool;
	if (!in_pool(t, r0->str, r0->len) || r0->len < 2 || r0->len >= PATH_MAX ||
	    pool[r0->str] != '/' || memchr(pool + r0->str, '\0', r0->len)) {
		ds_error("'%s': in-place pack without a valid source root", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

int ds__srow_check(const char *what, const struct ds__table *t, uint64_t i, struct ds_mentry *e,
                   const struct ds__srow *r, const char **src)
{
	struct check c = {.what = what, .t = t};
	const char *why;
	size_t plen = strlen(e->path);
	e->src = e->path;
	e->src_off = r->off;
	*src = NULL;
	if (!S_ISREG(e->mode))
		return r->off || r->len ? bad_entry(&c, i, e->path, plen, "a source on a non-file")
		                        : 0;
	if (e->codec != DS_CODEC_NONE)
		return bad_entry(&c, i, e->path, plen, "compressed in an in-place pack");
	if (r->off > UINT64_MAX - e->size || r->off > INT64_MAX - e->size)
		return bad_entry(&c, i, e->path, plen, "source range overflows");
	if (!r->len && r->off)
		return bad_entry(&c, i, e->path, plen, "offset into its own file");
	if (!r->len)
		return 0;
	if (!in_pool(t, r->str, r->len))
		return bad_entry(&c, i, e->path, plen, "source outside the string pool");
	if (ds_name_check(t->pool + r->str, r->len, &why) ||
	    ds_name_reserved(t->pool + r->str, r->len, &why))
		return bad_entry(&c, i, e->path, plen, why);
	*src = t->pool + r->str;
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
	struct ds__srow *v = ds_xmalloc(nrows * sizeof(*v) + 1);
	ds__srows_decode(raw, nrows, v);
	for (uint64_t i = 0; i < nrows; i++)
		strbytes += (uint64_t)v[i].len + 1;
	free(raw);
	rc = 0;
	if (!nrows) {
		ds_error("'%s': in-place pack without a valid source root", what);
		rc = -DS_ECORRUPT;
	} else if ((rc = ds__sroot_check(what, t, &v[0]))) {
	} else if (strbytes > t->pool_len + nrows) {
		ds_error("'%s': string pool reused across sources", what);
		rc = -DS_ECORRUPT;
	}
	char *arena = rc ? NULL : ds_xmalloc(strbytes + 1);
	if (arena) {
		m->root = arena;
		memcpy(arena, t->pool + v[0].str, v[0].len);
		arena[v[0].len] = '\0';
		arena += v[0].len + 1;
	}
	for (uint64_t i = 0; !rc && i < m->n; i++) {
		struct ds_mentry *e = &m->e[i];
		const char *own;
		if ((rc = ds__srow_check(what, t, i, e, &v[i + 1], &own)) || !own)
			continue;
		e->src = arena;
		memcpy(arena, own, v[i + 1].len);
		arena[v[i + 1].len] = '\0';
		arena += v[i + 1].len + 1;
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

/* ---- pieces of the streamed manifest (mstream.c; no MPI here: the fuzzer
 * builds this file alone) ------------------------------------------------- */
#define MS_BLOCK (1u << 20) /* bytes per block of kept paths */

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

char *ds__mblock_copy(struct ds_manifest *m, const char *s, size_t len)
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

int ds__row_check(const char *what, const struct ds__table *t, struct ds_manifest *m,
                  uint32_t *nfiles, uint64_t i, const struct ds__row *r)
{
	struct check c = {.what = what, .t = t, .m = m, .nfiles = nfiles};
	return check_row(&c, i, r);
}

void ds__row_entry(struct ds_mentry *e, const struct ds__row *r, const struct ds__table *t,
                   char **arena)
{
	fill_entry(e, r, t, arena);
}

int ds__entry_bad(const char *what, uint64_t i, const char *path, size_t len, const char *why)
{
	struct check c = {.what = what};
	return bad_entry(&c, i, path, len, why);
}

int ds__src_read(const struct ds__src *src, uint64_t off, uint64_t len, void **out)
{
	return src_read(src, off, len, out);
}
