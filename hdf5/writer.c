/* SPDX-License-Identifier: BSD-3-Clause */
/* writer.c: write one part-NNNNN.h5, and index.h5.
 *
 * HDF5 lays each file out and is closed before any bulk write (h5util.c,
 * ds__h5_skeleton): attributes, and the datasets "strings", "entries" and
 * "payload" allocated at their final sizes but not written.  Everything
 * else goes in with plain pwrite at the offsets HDF5 gave them: the payload
 * streamed file by file, then the tables, then the seal.  No HDF5 call per
 * file, no copy of a whole file in memory, and a full disk is an ordinary
 * write error (HDF5 1.10 cannot survive a failed close).
 *
 * Without compression the payload size is known before the first byte is
 * read.  With zlib it is not, so the payload goes to a spool file next to
 * the partition first and is copied into place once its size is known.
 *
 * Source files are read once, in chunks, with the CRC-32C computed on the
 * bytes as they arrive.  Holes of sparse sources (SEEK_DATA/SEEK_HOLE) are
 * not read and not written: the payload region HDF5 allocated reads as
 * zeros, so a sparse source stays sparse in the pack. */
#include "pack_int.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (4u << 20)    /* unit of reads and writes; files up to this size
                               are compressed in one call */
#define ZEROS DS__ZEROS

/* ---- the sink: where stored bytes go ------------------------------------ */
struct sink {
	int fd;
	uint64_t base;  /* file offset of payload byte 0 */
	uint64_t off;   /* payload bytes so far, buffered ones included */
	uint64_t hwm;   /* payload bytes ever written: holes below this need zeros */
	char *buf;      /* payload bytes [off - len, off) not yet written */
	size_t len, cap;
	int err;        /* first write error (reported by the caller, with the
	                   partition's name) */
};

static int sink_flush(struct sink *k)
{
	if (!k->len)
		return 0;
	int rc = ds_pwrite_full(k->fd, k->buf, k->len, (off_t)(k->base + k->off - k->len));
	if (k->off > k->hwm)
		k->hwm = k->off;
	k->len = 0;
	if (rc && !k->err)
		k->err = rc;
	return rc;
}

/* Room for at least min(want, cap) bytes at *p; *avail says how much. */
static int sink_space(struct sink *k, size_t want, char **p, size_t *avail)
{
	int rc = 0;
	if (want > k->cap)
		want = k->cap;
	if (k->cap - k->len < want)
		rc = sink_flush(k);
	*p = k->buf + k->len;
	*avail = k->cap - k->len;
	return rc;
}

static void sink_commit(struct sink *k, size_t n)
{
	k->len += n;
	k->off += n;
}

static int sink_write(struct sink *k, const char *p, size_t n)
{
	while (n) {
		char *dst;
		size_t avail;
		int rc = sink_space(k, n, &dst, &avail);
		if (rc)
			return rc;
		size_t m = n < avail ? n : avail;
		memcpy(dst, p, m);
		sink_commit(k, m);
		p += m;
		n -= m;
	}
	return 0;
}

/* n zero bytes: a hole where nothing was written before, zeros elsewhere
 * (a rewound zlib attempt may have left bytes there). */
static int sink_zeros(struct sink *k, uint64_t n)
{
	int rc = sink_flush(k);
	while (!rc && n && k->off < k->hwm) {
		uint64_t m = k->hwm - k->off;
		if (m > n)
			m = n;
		if (m > ZEROS)
			m = ZEROS;
		if ((rc = ds_pwrite_full(k->fd, ds__zeros, m, (off_t)(k->base + k->off))) &&
		    !k->err)
			k->err = rc;
		k->off += m;
		n -= m;
	}
	k->off += n;
	return rc;
}

static int sink_rewind(struct sink *k, uint64_t to)
{
	int rc = sink_flush(k);
	k->off = to;
	return rc;
}

/* ---- per-partition state ------------------------------------------------ */
struct wpart {
	const struct ds__plan *pl;
	const struct ds__write_opts *o;
	struct ds__progress *pr;
	uint32_t part;
	char name[32];       /* "part-00003.h5" */
	struct sink k;
	char *in;            /* CHUNK bytes: source data for zlib */
	char *zout;          /* deflateBound(CHUNK) bytes */
	size_t zout_cap;
	z_stream z;
	int zinit;
	struct ds__s3fetch *fetch; /* s3:// source: the partition's objects */
	const char *mem;     /* the current file's bytes, when fetched (s3://) */
	size_t memlen;
};

/* "'OUT/part-00003.h5': what" */
static int part_fail(const struct wpart *w, int rc, const char *what)
{
	ds_error("'%s/%s': %s", w->o->out, w->name, what);
	return rc;
}

/* "'SRC/path': what" */
static int file_fail(const struct wpart *w, const struct ds__pentry *e, int rc, const char *what)
{
	char q[PATH_MAX + 64];
	ds_error("'%s/%s': %s", w->o->src,
	         ds__quote(ds__tree_path(&w->pl->tree, e), e->path_len, q, sizeof(q)), what);
	return rc;
}

/* ---- reading a source file ---------------------------------------------- */
/* Where the bytes read go: raw into the sink, or into zlib. */
struct feed {
	int (*space)(void *ctx, size_t want, char **p, size_t *avail);
	int (*data)(void *ctx, char *p, size_t n);
	int (*zeros)(void *ctx, uint64_t n);
	void *ctx;
};

static int64_t mtime_ns(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

/* Open e and make sure it is the file the scan saw (same inode, size and
 * mtime): what is packed is what the manifest describes, or an error. */
static int open_source(const struct wpart *w, const struct ds__pentry *e, int *fdp, struct stat *st)
{
	const char *path = ds__tree_path(&w->pl->tree, e);
	/* O_NONBLOCK: a FIFO swapped in since the scan must not hang us */
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (e->follow ? 0 : O_NOFOLLOW);
	int fd = openat(w->o->srcfd, path, flags);
	if (fd < 0) {
		int err = errno;
		if (err == ENOENT)
			return file_fail(w, e, -ENOENT, "vanished while packing");
		if (err == ELOOP)
			return file_fail(w, e, -ELOOP, "changed while packing (now a symlink)");
		return file_fail(w, e, -err, strerror(err));
	}
	if (fstat(fd, st) < 0) {
		int err = errno;
		close(fd);
		return file_fail(w, e, -err, strerror(err));
	}
	if (!S_ISREG(st->st_mode) || (uint64_t)st->st_ino != e->ino ||
	    (uint64_t)st->st_size != e->size || mtime_ns(st) != e->mtime_ns) {
		close(fd);
		return file_fail(w, e, -ESTALE, "changed while packing");
	}
	*fdp = fd;
	return 0;
}

/* Bytes [from, to) of fd into the feed. */
static int read_span(const struct wpart *w, const struct ds__pentry *e, int fd, uint64_t from,
                     uint64_t to, const struct feed *f, uint32_t *crc)
{
	while (from < to) {
		char *p;
		size_t avail;
		uint64_t want = to - from < CHUNK ? to - from : CHUNK;
		if (ds_stop_signal())
			return file_fail(w, e, -EINTR, ds_stop_why());
		int rc = f->space(f->ctx, (size_t)want, &p, &avail);
		if (rc)
			return rc;
		if (avail > want)
			avail = (size_t)want;
		ssize_t n = pread(fd, p, avail, (off_t)from);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return file_fail(w, e, -errno, strerror(errno));
		if (n == 0)
			return file_fail(w, e, -ESTALE, "changed while packing (shrank)");
		*crc = ds_crc32c(*crc, p, (size_t)n);
		if ((rc = f->data(f->ctx, p, (size_t)n)))
			return rc;
		from += (uint64_t)n;
	}
	return 0;
}

static int zero_span(uint64_t n, const struct feed *f, uint32_t *crc)
{
	for (uint64_t left = n; left;) {
		size_t m = left < ZEROS ? (size_t)left : ZEROS;
		*crc = ds_crc32c(*crc, ds__zeros, m);
		left -= m;
	}
	return f->zeros(f->ctx, n);
}

/* Where the next data starts at or after pos, and where it ends; a file
 * system without SEEK_DATA gives one span of data to the end. */
static void next_data(int fd, uint64_t pos, uint64_t size, uint64_t *data, uint64_t *hole)
{
	off_t d = lseek(fd, (off_t)pos, SEEK_DATA);
	if (d < 0) {
		*data = errno == ENXIO ? size : pos;
		*hole = size;
		return;
	}
	*data = (uint64_t)d < size ? (uint64_t)d : size;
	off_t h = lseek(fd, (off_t)*data, SEEK_HOLE);
	*hole = h < 0 || (uint64_t)h > size ? size : (uint64_t)h;
}

/* A fetched object (s3://), already in memory, into the feed. */
static int read_mem(const struct wpart *w, const struct ds__pentry *e, const struct feed *f,
                    uint32_t *crc)
{
	size_t pos = 0;
	if (w->memlen != e->size)
		return file_fail(w, e, -ESTALE, "changed while packing (size)");
	while (pos < w->memlen) {
		char *p;
		size_t avail, want = w->memlen - pos < CHUNK ? w->memlen - pos : CHUNK;
		int rc = f->space(f->ctx, want, &p, &avail);
		if (rc)
			return rc;
		if (avail > want)
			avail = want;
		memcpy(p, w->mem + pos, avail);
		*crc = ds_crc32c(*crc, p, avail);
		if ((rc = f->data(f->ctx, p, avail)))
			return rc;
		pos += avail;
	}
	return 0;
}

/* The whole content of e, in order, into the feed; sets *crc. */
static int read_source(const struct wpart *w, const struct ds__pentry *e, int fd,
                       const struct stat *st, const struct feed *f, uint32_t *crc)
{
	uint64_t size = e->size, pos = 0;
	if (w->mem) {
		*crc = 0;
		return read_mem(w, e, f, crc);
	}
	/* fewer blocks than bytes: the file has holes worth skipping */
	int sparse = (uint64_t)st->st_blocks * 512 < size;
	int rc = 0;
	*crc = 0;
	while (!rc && pos < size) {
		uint64_t data = pos, hole = size;
		if (sparse)
			next_data(fd, pos, size, &data, &hole);
		if (data > pos) {
			rc = zero_span(data - pos, f, crc);
			pos = data;
			continue;
		}
		rc = read_span(w, e, fd, pos, hole, f, crc);
		pos = hole;
	}
	return rc;
}

/* ---- feeds -------------------------------------------------------------- */
static int raw_space(void *ctx, size_t want, char **p, size_t *avail)
{
	return sink_space(ctx, want, p, avail);
}

static int raw_data(void *ctx, char *p, size_t n)
{
	(void)p; /* read in place */
	sink_commit(ctx, n);
	return 0;
}

static int raw_zeros(void *ctx, uint64_t n)
{
	return sink_zeros(ctx, n);
}

/* Whole-file zlib: collect the file in w->in. */
struct whole {
	struct wpart *w;
	size_t len;
};

static int whole_space(void *ctx, size_t want, char **p, size_t *avail)
{
	struct whole *h = ctx;
	(void)want;
	*p = h->w->in + h->len;
	*avail = CHUNK - h->len;
	return 0;
}

static int whole_data(void *ctx, char *p, size_t n)
{
	(void)p;
	((struct whole *)ctx)->len += n;
	return 0;
}

static int whole_zeros(void *ctx, uint64_t n)
{
	struct whole *h = ctx;
	memset(h->w->in + h->len, 0, (size_t)n);
	h->len += (size_t)n;
	return 0;
}

/* Streaming zlib: deflate straight into the sink. */
static int deflate_into(struct wpart *w, const char *p, size_t n, int flush)
{
	z_stream *z = &w->z;
	z->next_in = (Bytef *)p;
	z->avail_in = (uInt)n;
	for (;;) {
		char *o;
		size_t avail;
		int rc = sink_space(&w->k, 64 << 10, &o, &avail);
		if (rc)
			return rc;
		z->next_out = (Bytef *)o;
		z->avail_out = (uInt)avail;
		int zr = deflate(z, flush);
		sink_commit(&w->k, avail - z->avail_out);
		if (zr == Z_STREAM_END || (flush == Z_NO_FLUSH && !z->avail_in && z->avail_out))
			return 0;
		if (zr != Z_OK && zr != Z_BUF_ERROR)
			return part_fail(w, -EIO, "zlib failed");
	}
}

static int stream_space(void *ctx, size_t want, char **p, size_t *avail)
{
	(void)want;
	*p = ((struct wpart *)ctx)->in;
	*avail = CHUNK;
	return 0;
}

static int stream_data(void *ctx, char *p, size_t n)
{
	return deflate_into(ctx, p, n, Z_NO_FLUSH);
}

static int stream_zeros(void *ctx, uint64_t n)
{
	while (n) {
		size_t m = n < ZEROS ? (size_t)n : ZEROS;
		int rc = deflate_into(ctx, ds__zeros, m, Z_NO_FLUSH);
		if (rc)
			return rc;
		n -= m;
	}
	return 0;
}

/* ---- one file ----------------------------------------------------------- */
static int pays(uint64_t stored, uint64_t size)
{
	/* zlib is kept only when it saves at least DS__ZLIB_MIN_SAVING percent */
	return stored * 100 <= size * (100 - DS__ZLIB_MIN_SAVING);
}

static int pack_raw(struct wpart *w, const struct ds__pentry *e, int fd, const struct stat *st,
                    struct ds__result *r)
{
	struct feed f = {raw_space, raw_data, raw_zeros, &w->k};
	r->codec = DS_CODEC_NONE;
	return read_source(w, e, fd, st, &f, &r->crc);
}

static int pack_zlib_whole(struct wpart *w, const struct ds__pentry *e, int fd,
                           const struct stat *st, struct ds__result *r)
{
	struct whole h = {w, 0};
	struct feed f = {whole_space, whole_data, whole_zeros, &h};
	int rc = read_source(w, e, fd, st, &f, &r->crc);
	if (rc)
		return rc;
	deflateReset(&w->z);
	w->z.next_in = (Bytef *)w->in;
	w->z.avail_in = (uInt)h.len;
	w->z.next_out = (Bytef *)w->zout;
	w->z.avail_out = (uInt)w->zout_cap;
	if (deflate(&w->z, Z_FINISH) != Z_STREAM_END)
		return part_fail(w, -EIO, "zlib failed");
	size_t zlen = w->zout_cap - w->z.avail_out;
	if (pays(zlen, h.len)) {
		r->codec = DS_CODEC_ZLIB;
		return sink_write(&w->k, w->zout, zlen);
	}
	r->codec = DS_CODEC_NONE;
	return sink_write(&w->k, w->in, h.len);
}

/* A large file: deflate as it is read.  When that did not pay, store it raw:
 * rewind and read it again (the only case a source is read twice), and
 * insist on the same CRC. */
static int pack_zlib_stream(struct wpart *w, const struct ds__pentry *e, int fd,
                            const struct stat *st, struct ds__result *r)
{
	struct feed f = {stream_space, stream_data, stream_zeros, w};
	uint64_t start = w->k.off;
	deflateReset(&w->z);
	int rc = read_source(w, e, fd, st, &f, &r->crc);
	if (!rc)
		rc = deflate_into(w, NULL, 0, Z_FINISH);
	if (rc)
		return rc;
	if (pays(w->k.off - start, e->size)) {
		r->codec = DS_CODEC_ZLIB;
		return 0;
	}
	uint32_t first = r->crc;
	if ((rc = sink_rewind(&w->k, start)) || (rc = pack_raw(w, e, fd, st, r)))
		return rc;
	return r->crc == first ? 0 : file_fail(w, e, -ESTALE, "changed while packing");
}

static int pack_file(struct wpart *w, const struct ds__pentry *e, struct ds__result *r)
{
	int fd = -1, rc;
	struct stat st;
	r->offset = w->k.off;
	if (w->fetch) {
		/* s3://: the object's bytes, fetched ahead, checked for size and ETag */
		if ((rc = ds__s3fetch_next(w->fetch, &w->mem, &w->memlen)))
			return rc;
		memset(&st, 0, sizeof(st));
		st.st_size = (off_t)e->size;
		st.st_blocks = (blkcnt_t)((e->size + 511) / 512);
	} else if ((rc = open_source(w, e, &fd, &st))) {
		return rc;
	}
	if (fd >= 0 && e->size > CHUNK)
		posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	if (w->pl->codec != DS_CODEC_ZLIB || e->size == 0)
		rc = pack_raw(w, e, fd, &st, r);
	else if (e->size <= CHUNK)
		rc = pack_zlib_whole(w, e, fd, &st, r);
	else
		rc = pack_zlib_stream(w, e, fd, &st, r);
	/* the file must not have changed while it was read */
	struct stat after;
	if (!rc && fd >= 0 &&
	    (fstat(fd, &after) < 0 || after.st_size != st.st_size || mtime_ns(&after) != mtime_ns(&st)))
		rc = file_fail(w, e, -ESTALE, "changed while packing");
	if (fd >= 0)
		close(fd);
	w->mem = NULL;
	if (w->k.err) /* the output failed, not the source */
		return part_fail(w, w->k.err, strerror(-w->k.err));
	r->stored = w->k.off - r->offset;
	return rc;
}

/* ---- tables written in pieces (issue 27) ------------------------------ */
/* The entries tables and string pools of index.h5 and of each partition
 * are written ROWS rows at a time and through a buffer, never every row
 * and the whole pool at once (pack's rank 0 held 378 B per entry at 1.28M
 * names).  The bytes are the same. */
#define ROWS 16384u

/* The pool, written through a buffer at its dataset's offset. */
struct poolw {
	int fd;
	uint64_t base, pos; /* dataset offset; bytes so far */
	struct ds_buf b;
	int rc;
};

static void pool_put(struct poolw *w, const char *p, size_t n)
{
	ds_buf_add(&w->b, p, n);
	if (w->b.len >= (1u << 20) && !w->rc) {
		w->rc = ds_pwrite_full(w->fd, w->b.data, w->b.len, (off_t)(w->base + w->pos));
		w->pos += w->b.len;
		w->b.len = 0;
	}
}

static int pool_end(struct poolw *w)
{
	if (!w->rc && w->b.len)
		w->rc = ds_pwrite_full(w->fd, w->b.data, w->b.len, (off_t)(w->base + w->pos));
	w->pos += w->b.len;
	w->b.len = 0;
	ds_buf_release(&w->b);
	return w->rc;
}

/* ---- the partition file ------------------------------------------------- */
static int part_attrs(hid_t f, const void *ctx)
{
	const struct wpart *w = ctx;
	const struct ds__plan *pl = w->pl;
	int rc = ds__h5_attr_str(f, "format", DS__PART_FORMAT);
	if (!rc) rc = ds__h5_attr_u64(f, "version", H5T_STD_U32LE, DS__PACK_VERSION);
	if (!rc) rc = ds__h5_attr_u64(f, "part", H5T_STD_U32LE, w->part);
	if (!rc) rc = ds__h5_attr_u64(f, "nparts", H5T_STD_U32LE, pl->nparts);
	if (!rc) rc = ds__h5_attr_u64(f, "replicated", H5T_STD_U8LE, pl->parts[w->part].replicated);
	if (!rc) rc = ds__h5_attr_str(f, "checksum", DS__CHECKSUM);
	if (!rc) rc = ds__h5_attr_u64(f, "pack_id", H5T_STD_U64LE, pl->pack_id);
	return rc;
}

/* Rows in the file's on-disk layout, at off. */
static int put_rows(int fd, uint64_t off, const struct ds__row *rows, uint64_t n)
{
	size_t len;
	void *raw = ds__rows_encode(rows, n, &len);
	int rc = ds_pwrite_full(fd, raw, len, (off_t)off);
	free(raw);
	return rc;
}

/* The partition file's layout; its datasets are filled in later. */
struct layout {
	struct ds__h5_ds ds[3]; /* strings, entries, payload: creation order fixes the layout */
	hid_t row_type;
};

static int layout_init(const struct wpart *w, uint64_t size, struct layout *l)
{
	l->row_type = ds__h5_row_type();
	l->ds[0] = (struct ds__h5_ds){"strings", H5T_STD_U8LE, 0, 0};
	l->ds[1] = (struct ds__h5_ds){"entries", l->row_type, w->pl->parts[w->part].nfiles, 0};
	l->ds[2] = (struct ds__h5_ds){"payload", H5T_STD_U8LE, size, 0};
	return l->row_type < 0 ? -EIO : 0;
}

/* Fill in the tables (now with offsets, sizes and CRCs): the partition's
 * own entries table, its files in path order, paths in its own pool. */
static int part_tables(struct wpart *w, int fd, const struct layout *l, const struct ds__result *res)
{
	const struct ds__plan *pl = w->pl;
	const struct ds__ppart *p = &pl->parts[w->part];
	struct ds__row *rows = ds_xcalloc(ROWS, sizeof(*rows));
	struct poolw pw = {.fd = fd, .base = l->ds[0].off};
	int rc = 0;
	for (uint32_t i0 = 0; i0 < p->nfiles && !rc; i0 += ROWS) {
		uint32_t n = p->nfiles - i0 < ROWS ? p->nfiles - i0 : ROWS;
		memset(rows, 0, n * sizeof(*rows));
		for (uint32_t k = 0; k < n; k++) {
			const struct ds__pentry *e = &pl->tree.e[pl->files[p->first + i0 + k]];
			const struct ds__result *x = &res[p->first + i0 + k];
			struct ds__row *r = &rows[k];
			r->path_off = pw.pos + pw.b.len;
			r->path_len = e->path_len;
			pool_put(&pw, ds__tree_path(&pl->tree, e), e->path_len);
			r->mode = e->mode;
			r->mtime_ns = e->mtime_ns;
			r->size = e->size;
			r->part = w->part;
			r->flags = e->flags;
			r->offset = x->offset;
			r->stored = x->stored;
			r->codec = x->codec;
			r->crc = x->crc;
		}
		rc = put_rows(fd, l->ds[1].off + (uint64_t)i0 * DS__ROW_BYTES, rows, n);
	}
	free(rows);
	int prc = pool_end(&pw);
	rc = rc ? rc : prc;
	return rc ? part_fail(w, rc, strerror(-rc)) : 0;
}

/* The seal: where the tables and the payload are, for dstage's readers. */
static int part_seal(const struct wpart *w, int fd, const struct layout *l)
{
	const struct ds__plan *pl = w->pl;
	struct ds__seal s = {
		.pack_id = pl->pack_id, .part = w->part, .nparts = pl->nparts,
		.flags = pl->parts[w->part].replicated ? 1u : 0u,
		.strings_off = l->ds[0].off, .strings_len = l->ds[0].n,
		.entries_off = l->ds[1].off, .nentries = l->ds[1].n,
		.payload_off = l->ds[2].off, .payload_len = l->ds[2].n};
	return ds__seal_write(fd, DS__SEAL_PART_MAGIC, &s);
}

/* Lay the file out with HDF5 and close it, before any bulk write. */
static int part_skeleton(struct wpart *w, const char *path, struct layout *l)
{
	const struct ds__plan *pl = w->pl;
	const struct ds__ppart *p = &pl->parts[w->part];
	l->ds[0].n = 0;
	for (uint32_t i = 0; i < p->nfiles; i++)
		l->ds[0].n += pl->tree.e[pl->files[p->first + i]].path_len;
	errno = 0;
	if (ds__h5_skeleton(path, part_attrs, w, l->ds, 3))
		return part_fail(w, -EIO, errno ? strerror(errno) : "cannot create the HDF5 file");
	return 0;
}

/* Copy [0, len) of the spool to fd at base, skipping all-zero blocks (the
 * destination is freshly allocated and reads as zeros). */
static int all_zero(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i += ZEROS)
		if (memcmp(p + i, ds__zeros, n - i < ZEROS ? n - i : ZEROS))
			return 0;
	return 1;
}

static int copy_spool(struct wpart *w, int spool, int fd, uint64_t base, uint64_t len)
{
	for (uint64_t pos = 0; pos < len;) {
		size_t n = len - pos < CHUNK ? (size_t)(len - pos) : CHUNK;
		int rc = ds_pread_full(spool, w->k.buf, n, (off_t)pos);
		if (rc)
			return part_fail(w, rc, strerror(-rc));
		if (!all_zero(w->k.buf, n) && (rc = ds_pwrite_full(fd, w->k.buf, n, (off_t)(base + pos))))
			return part_fail(w, rc, strerror(-rc));
		pos += n;
	}
	return 0;
}

static int close_checked(struct wpart *w, int fd)
{
	if (w->o->fsync && fsync(fd) < 0) {
		int err = errno;
		close(fd);
		return part_fail(w, -err, strerror(err));
	}
	return close(fd) < 0 ? part_fail(w, -errno, strerror(errno)) : 0;
}

static int pack_files(struct wpart *w, struct ds__result *res)
{
	const struct ds__plan *pl = w->pl;
	const struct ds__ppart *p = &pl->parts[w->part];
	for (uint32_t i = 0; i < p->nfiles; i++) {
		const struct ds__pentry *e = &pl->tree.e[pl->files[p->first + i]];
		if (ds_stop_signal())
			return part_fail(w, -EINTR, ds_stop_why());
		int rc = pack_file(w, e, &res[p->first + i]);
		if (rc)
			return rc;
		w->pr->files++;
		w->pr->bytes += e->size;
		ds__progress_tick(w->pr);
	}
	int rc = sink_flush(&w->k);
	return rc ? part_fail(w, rc, strerror(-rc)) : 0;
}

static int write_part(struct wpart *w, struct ds__result *res)
{
	char *path = ds__join(w->o->dir, w->name);
	char *spath = NULL;
	struct layout l;
	int fd = -1, spool = -1, rc;
	int zlib = w->pl->codec == DS_CODEC_ZLIB;
	uint64_t size = w->pl->parts[w->part].raw;
	if ((rc = layout_init(w, size, &l)))
		goto out;
	if (zlib) {
		/* stored size unknown until compressed: spool first */
		char sname[32];
		snprintf(sname, sizeof(sname), "spool-%05u", w->part);
		spath = ds__join(w->o->dir, sname);
		spool = open(spath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (spool < 0) {
			rc = part_fail(w, -errno, strerror(errno));
			goto out;
		}
		w->k = (struct sink){.fd = spool, .buf = w->k.buf, .cap = w->k.cap};
		if ((rc = pack_files(w, res)))
			goto out;
		size = l.ds[2].n = w->k.off;
		/* a hole at the end of the last file is not in the spool yet */
		if (ftruncate(spool, (off_t)size) < 0) {
			rc = part_fail(w, -errno, strerror(errno));
			goto out;
		}
	}
	if ((rc = part_skeleton(w, path, &l)))
		goto out;
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		rc = part_fail(w, -errno, strerror(errno));
		goto out;
	}
	uint64_t poff = l.ds[2].off;
	if (zlib) {
		rc = copy_spool(w, spool, fd, poff, size);
	} else {
		w->k = (struct sink){.fd = fd, .base = poff, .buf = w->k.buf, .cap = w->k.cap};
		rc = pack_files(w, res);
		if (!rc && w->k.off != size)
			rc = part_fail(w, -ESTALE, "payload size differs from the plan");
	}
	if (!rc)
		rc = part_tables(w, fd, &l, res);
	if (!rc && (rc = part_seal(w, fd, &l)))
		part_fail(w, rc, ds_strerror(rc));
	if (!rc)
		rc = close_checked(w, fd);
	else
		close(fd);
	fd = -1;
out:
	if (l.row_type >= 0)
		H5Tclose(l.row_type);
	if (spool >= 0) {
		close(spool);
		unlink(spath);
	}
	free(spath);
	free(path);
	return rc;
}

int ds__write_part(const struct ds__plan *pl, uint32_t part, const struct ds__write_opts *o,
                   struct ds__result *res, struct ds__progress *pr)
{
	struct wpart w = {.pl = pl, .o = o, .pr = pr, .part = part};
	snprintf(w.name, sizeof(w.name), "part-%05u.h5", part);
	w.k.cap = CHUNK;
	w.k.buf = ds_xmalloc(CHUNK);
	if (pl->codec == DS_CODEC_ZLIB) {
		if (deflateInit2(&w.z, (int)pl->level, Z_DEFLATED, 15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
			free(w.k.buf);
			return part_fail(&w, -ENOMEM, "zlib failed to start");
		}
		w.zinit = 1;
		w.in = ds_xmalloc(CHUNK);
		w.zout_cap = deflateBound(&w.z, CHUNK);
		w.zout = ds_xmalloc(w.zout_cap);
	}
	if (o->s3)
		w.fetch = ds__s3fetch_new(o->s3, o->s3_bucket, o->s3_prefix, pl, part);
	int rc = write_part(&w, res);
	ds__s3fetch_free(w.fetch);
	if (w.zinit)
		deflateEnd(&w.z);
	free(w.in);
	free(w.zout);
	free(w.k.buf);
	return rc;
}

/* ---- index.h5 ----------------------------------------------------------- */
/* index.h5 is written in pieces (issue 27): rows of ROWS entries and the
 * string pool through a buffer, never every row and the whole pool at
 * once (rank 0 held 378 B per entry at 1.28M names).  The bytes are the
 * same: every path (and symlink target) in entry order, then the in-place
 * sources' strings. */
/* Bytes of the string pool: every path and symlink target, then (in
 * place) the root and every source named apart from its path. */
static uint64_t pool_bytes(const struct ds__plan *pl, const char *root)
{
	const struct ds__tree *t = &pl->tree;
	uint64_t n = 0;
	for (size_t i = 0; i < t->n; i++) {
		n += t->e[i].path_len + (S_ISLNK(t->e[i].mode) ? (uint64_t)t->e[i].target_len : 0);
		if (root)
			n += ds__pentry_x(t, &t->e[i])->src_len;
	}
	return n + (root ? strlen(root) : 0);
}

/* The entries table and the pool's entry strings, ROWS rows at a time.
 * A file's result is the next slot of its partition: the plan lists each
 * partition's files in path order, the order of the entries. */
static int index_rows(int fd, uint64_t rows_off, const struct ds__plan *pl,
                      const struct ds__result *res, struct poolw *pw)
{
	const struct ds__tree *t = &pl->tree;
	struct ds__row *rows = ds_xcalloc(ROWS, sizeof(*rows));
	uint64_t *next = ds_xcalloc((size_t)pl->nparts + 1, sizeof(*next));
	for (uint32_t p = 0; p < pl->nparts; p++)
		next[p] = pl->parts[p].first;
	int rc = 0;
	for (size_t i0 = 0; i0 < t->n && !rc; i0 += ROWS) {
		size_t n = t->n - i0 < ROWS ? t->n - i0 : ROWS;
		memset(rows, 0, n * sizeof(*rows));
		for (size_t k = 0; k < n; k++) {
			const struct ds__pentry *e = &t->e[i0 + k];
			struct ds__row *r = &rows[k];
			r->path_off = pw->pos + pw->b.len;
			r->path_len = e->path_len;
			pool_put(pw, ds__tree_path(t, e), e->path_len);
			if (S_ISLNK(e->mode)) {
				r->target_off = pw->pos + pw->b.len;
				r->target_len = e->target_len;
				pool_put(pw, t->names.data + e->target, e->target_len);
			}
			r->mode = e->mode;
			r->mtime_ns = e->mtime_ns;
			r->size = e->size;
			r->part = e->part;
			r->flags = e->flags;
			if (S_ISREG(e->mode) && e->part < pl->nparts &&
			    next[e->part] < pl->parts[e->part].first + pl->parts[e->part].nfiles &&
			    pl->files[next[e->part]] == i0 + k) {
				const struct ds__result *x = &res[next[e->part]++];
				r->offset = x->offset;
				r->stored = x->stored;
				r->codec = x->codec;
				r->crc = x->crc;
			}
		}
		rc = put_rows(fd, rows_off + (uint64_t)i0 * DS__ROW_BYTES, rows, n);
	}
	for (uint32_t p = 0; !rc && p < pl->nparts; p++)
		if (next[p] != pl->parts[p].first + pl->parts[p].nfiles)
			rc = -EIO; /* cannot happen: the plan lists its files in path order */
	free(next);
	free(rows);
	return rc ? rc : pw->rc;
}

static struct ds__prow *index_parts(const struct ds__plan *pl, const struct ds__result *res)
{
	struct ds__prow *p = ds_xcalloc(pl->nparts, sizeof(*p));
	for (uint32_t i = 0; i < pl->nparts; i++) {
		const struct ds__ppart *pp = &pl->parts[i];
		for (uint32_t k = 0; k < pp->nfiles; k++)
			p[i].size += res[pp->first + k].stored;
		p[i].nfiles = pp->nfiles;
		p[i].replicated = pp->replicated;
	}
	return p;
}

struct index_ctx {
	const struct ds__plan *pl;
	const char *root; /* in place: the source root */
};

static int index_attrs(hid_t f, const void *ctx)
{
	const struct index_ctx *ic = ctx;
	const struct ds__plan *pl = ic->pl;
	int rc = ds__h5_attr_str(f, "format", DS__PACK_FORMAT);
	if (!rc) rc = ds__h5_attr_u64(f, "version", H5T_STD_U32LE,
	                              ic->root ? DS__PACK_VERSION_INPLACE : DS__PACK_VERSION);
	if (!rc && ic->root) rc = ds__h5_attr_str(f, "layout", "in-place");
	if (!rc && ic->root) rc = ds__h5_attr_str(f, "source", ic->root);
	if (!rc) rc = ds__h5_attr_u64(f, "nparts", H5T_STD_U32LE, pl->nparts);
	if (!rc) rc = ds__h5_attr_str(f, "checksum", DS__CHECKSUM);
	if (!rc) rc = ds__h5_attr_str(f, "codec", pl->codec == DS_CODEC_ZLIB ? "zlib" : "none");
	if (!rc) rc = ds__h5_attr_u64(f, "level", H5T_STD_U8LE, pl->level);
	if (!rc) rc = ds__h5_attr_u64(f, "pack_id", H5T_STD_U64LE, pl->pack_id);
	return rc;
}

/* In place: the sources table (pack_int.h): the root, then every entry's
 * src (its own string only when it differs from the path) and src_off;
 * strings go to the end of the pool. */
static unsigned char *index_sources(const struct ds__plan *pl, const char *root, struct poolw *pool,
                                    size_t *len)
{
	const struct ds__tree *t = &pl->tree;
	*len = (t->n + 1) * (size_t)DS__SROW_BYTES;
	unsigned char *v = ds_xcalloc(1, *len), *r = v;
	for (size_t i = 0; i <= t->n; i++, r += DS__SROW_BYTES) {
		const struct ds__pentry *e = i ? &t->e[i - 1] : NULL;
		const struct ds__pextra *x = e ? ds__pentry_x(t, e) : NULL;
		uint64_t off = x ? x->src_off : 0, str = pool->pos + pool->b.len;
		uint32_t n = x ? x->src_len : (uint32_t)strlen(root);
		if (x && n)
			pool_put(pool, t->names.data + x->src, n);
		else if (!e)
			pool_put(pool, root, n);
		if (!n)
			str = 0;
		for (int k = 0; k < 8; k++) {
			r[k] = (unsigned char)(off >> (8 * k));
			r[8 + k] = (unsigned char)(str >> (8 * k));
		}
		for (int k = 0; k < 4; k++)
			r[16 + k] = (unsigned char)(n >> (8 * k));
	}
	return v;
}

/* The tables' bytes, at the places the skeleton gave them: partitions,
 * entries with the pool's entry strings, then (in place) the sources with
 * the rest of the pool, which must come out at the size planned. */
static int index_data(int fd, const struct ds__h5_ds *ds, const struct ds__plan *pl,
                      const struct ds__result *res, const char *root)
{
	size_t len;
	struct ds__prow *prows = index_parts(pl, res);
	void *raw = ds__prows_encode(prows, ds[0].n, &len);
	int rc = ds_pwrite_full(fd, raw, len, (off_t)ds[0].off);
	free(raw);
	free(prows);
	struct poolw pw = {.fd = fd, .base = ds[1].off};
	if (!rc)
		rc = index_rows(fd, ds[2].off, pl, res, &pw);
	unsigned char *srows = NULL;
	size_t slen = 0;
	if (!rc && root)
		srows = index_sources(pl, root, &pw, &slen);
	int prc = pool_end(&pw);
	rc = rc ? rc : prc;
	if (!rc && pw.pos != ds[1].n)
		rc = -EIO; /* cannot happen: pool_bytes counts what is written */
	if (!rc && srows)
		rc = ds_pwrite_full(fd, srows, slen, (off_t)ds[3].off);
	free(srows);
	return rc;
}

int ds__write_index(const struct ds__plan *pl, const struct ds__result *res,
                    const struct ds__write_opts *o)
{
	size_t slen = o->root ? (pl->tree.n + 1) * (size_t)DS__SROW_BYTES : 0;
	char *path = ds__join(o->dir, DS__INDEX_NAME);
	hid_t rt = ds__h5_row_type(), pt = ds__h5_prow_type();
	struct ds__h5_ds ds[4] = {{"partitions", pt, pl->nparts, 0},
	                          {"strings", H5T_STD_U8LE, pool_bytes(pl, o->root), 0},
	                          {"entries", rt, pl->tree.n, 0},
	                          {"sources", H5T_STD_U8LE, slen, 0}};
	struct index_ctx ic = {pl, o->root};
	int rc = -EIO, fd = -1;
	errno = 0;
	if (rt < 0 || pt < 0 || ds__h5_skeleton(path, index_attrs, &ic, ds, o->root ? 4 : 3)) {
		ds_error("'%s/%s': %s", o->out, DS__INDEX_NAME,
		         errno ? strerror(errno) : "cannot create the HDF5 file");
		goto out;
	}
	struct ds__seal seal = {
		.pack_id = pl->pack_id, .part = UINT32_MAX, .nparts = pl->nparts,
		.parts_off = ds[0].off, .nparts_rows = ds[0].n,
		.strings_off = ds[1].off, .strings_len = ds[1].n,
		.entries_off = ds[2].off, .nentries = ds[2].n};
	if (o->root) {
		seal.flags = DS__SEAL_INPLACE;
		seal.payload_off = ds[3].off;
		seal.payload_len = ds[3].n;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	rc = fd < 0 ? -errno : index_data(fd, ds, pl, res, o->root);
	if (!rc)
		rc = ds__seal_write(fd, DS__SEAL_PACK_MAGIC, &seal);
	if (!rc && o->fsync && fsync(fd) < 0)
		rc = -errno;
	if (fd >= 0 && close(fd) < 0 && !rc)
		rc = -errno;
	if (rc)
		ds_error("'%s/%s': %s", o->out, DS__INDEX_NAME, ds_strerror(rc));
out:
	if (rt >= 0)
		H5Tclose(rt);
	if (pt >= 0)
		H5Tclose(pt);
	free(path);
	return rc;
}
