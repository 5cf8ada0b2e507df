/* SPDX-License-Identifier: BSD-3-Clause */
/* mstream.c: the manifest streamed to every rank of a stage (issue 27,
 * dspack.h: ds_mstream_open, ds_mstream_run).  Rank 0 reads index.h5's
 * tables (from a file, or by ranged GETs from a bucket) in chunks of rows
 * with the strings they name (in place: and their sources rows) and
 * broadcasts each; every rank checks every row with manifest.c's checks and
 * keeps what it asked for.  --inflate: a first pass over the rows alone sums
 * each partition inflated.  Everything read is untrusted, as in manifest.c. */
#include "pack_int.h"
#include "dsmpi.h"
#include "dss3.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MS_ROWS 16384u /* rows per chunk */

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

enum { R_PARTS, R_STRINGS, R_ENTRIES, R_SOURCES, R_NTABLES };

struct ds_mstream {
	MPI_Comm world;
	int rank, whole;
	int inplace;   /* the sources table streams with the rows */
	int inflated;  /* m->parts[].inflated: summed at open, checked at run */
	struct ds_manifest *m;
	char *what; /* "PACK/index.h5", for messages */
	uint64_t nentries, pool_len;
	uint64_t *isum, *ilast; /* run: each partition's inflated sum, last offset */
	uint64_t srcbytes;      /* run: the sources' string bytes, a NUL each */
	/* rank 0 */
	int fd;
	struct ds__src src;
	struct ds_s3 *s3; /* s3://: ranged GETs of key, an object of size bytes */
	const char *bucket;
	char *key;
	uint64_t size;
	struct ds__seal seal;
	uint64_t *nread;
	struct mregion reg[R_NTABLES];
};

/* Rank 0: len bytes at off of index.h5 into a new buffer: a pread, or a
 * ranged GET of the object (the client names the key when it fails). */
static int ms_read(struct ds_mstream *s, uint64_t off, uint64_t len, void **out)
{
	if (!s->s3 || !len)
		return ds__src_read(&s->src, off, len, out);
	char *buf = NULL;
	uint64_t got = 0, total = 0;
	int rc = ds_s3_get_range(s->s3, s->bucket, s->key, off, len, &buf, &got, &total);
	if (rc)
		return rc;
	if (got != len || total != s->size) {
		free(buf);
		ds_error("'%s': changed while it was read (%llu bytes, were %llu)", s->what,
		         (unsigned long long)total, (unsigned long long)s->size);
		return -DS_ECORRUPT;
	}
	*out = buf;
	return 0;
}

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
		if (!(rc = ms_read(s, r->off + r->done, n, (void **)&buf))) {
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
		ds_error("'%s': corrupt (checksum mismatch in its tables or HDF5 structure)",
		         s->what);
		return -DS_ECORRUPT;
	}
	return 0;
}

/* Rank 0: can the tables be streamed?  When they do not overlap (a
 * crafted seal; the whole reader refuses what is wrong in it); an in-place
 * index's sources table is one of them. */
static int mstream_can(const struct ds__seal *sl)
{
	int inplace = (sl->flags & DS__SEAL_INPLACE) != 0;
	uint64_t o[4][2] = {{sl->parts_off, sl->nparts_rows * DS__PROW_BYTES},
	                    {sl->strings_off, sl->strings_len},
	                    {sl->entries_off, sl->nentries * DS__ROW_BYTES},
	                    {inplace ? sl->payload_off : 0, inplace ? sl->payload_len : 0}};
	for (int a = 0; a < 4; a++)
		for (int b = a + 1; b < 4; b++)
			if (o[a][1] && o[b][1] && o[a][0] < o[b][0] + o[b][1] &&
			    o[b][0] < o[a][0] + o[a][1])
				return 0;
	return 1;
}

/* Rank 0, --inflate: a first pass over the entries table's rows alone (no
 * strings, nothing checked: the second pass checks every row and that it
 * sums the same) for what each partition holds inflated, which places the
 * partitions.  A file lands after the partition's earlier files in payload
 * order, so a node leader can place each file as it streams by when the
 * rows of every partition come in payload order (what pack writes: path
 * order); *ordered 0 when they do not (then the manifest is read whole). */
static int mstream_inflated0(struct ds_mstream *s, uint64_t *sum, int *ordered)
{
	const struct ds__seal *sl = &s->seal;
	uint64_t *last = ds_xcalloc((size_t)sl->nparts + 1, sizeof(*last));
	struct ds__row *rows = ds_xmalloc(MS_ROWS * sizeof(*rows));
	int rc = 0;
	*ordered = 1;
	for (uint64_t i0 = 0; !rc && i0 < sl->nentries; i0 += MS_ROWS) {
		uint64_t n = sl->nentries - i0 < MS_ROWS ? sl->nentries - i0 : MS_ROWS;
		unsigned char *raw = NULL;
		if ((rc = ms_read(s, sl->entries_off + i0 * DS__ROW_BYTES, n * DS__ROW_BYTES,
		                  (void **)&raw))) {
			ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
			break;
		}
		*s->nread += n * DS__ROW_BYTES;
		ds__rows_decode(raw, n, rows);
		free(raw);
		for (uint64_t j = 0; j < n; j++) {
			const struct ds__row *r = &rows[j];
			if (!S_ISREG(r->mode) || r->part >= sl->nparts)
				continue;
			sum[r->part] += r->codec != DS_CODEC_NONE ? r->size : r->stored;
			if (r->offset < last[r->part])
				*ordered = 0;
			last[r->part] = r->offset;
		}
	}
	free(rows);
	free(last);
	return rc;
}

/* Rank 0: open the source and check the seal's header.  *whole set when
 * the manifest must be read whole; then mine holds it.  inflated
 * (--inflate): *isum gets each partition's inflated size (malloc'd). */
static int mstream_open0(struct ds_mstream *s, int *whole, struct ds_buf *mine, int inflated,
                         uint64_t **isum)
{
	unsigned char h[DS__SEAL_USED];
	int rc;
	if (s->s3) {
		char *buf = NULL;
		uint64_t got = 0;
		/* the seal's header, and the object's size */
		if ((rc = ds_s3_get_range(s->s3, s->bucket, s->key, 0, DS__SEAL_USED, &buf, &got,
		                          &s->size)))
			return rc;
		*s->nread += got;
		if (got < DS__SEAL_USED || s->size < DS__SEAL_SIZE) {
			free(buf);
			ds_error("'%s': truncated (%llu bytes)", s->what, (unsigned long long)s->size);
			return -DS_ECORRUPT;
		}
		memcpy(h, buf, sizeof(h));
		free(buf);
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
		s->size = (uint64_t)st.st_size;
		if (s->size < DS__SEAL_SIZE) {
			ds_error("'%s': truncated (%llu bytes)", s->what, (unsigned long long)s->size);
			return -DS_ECORRUPT;
		}
		if ((rc = ds_pread_full(s->fd, h, sizeof(h), 0))) {
			ds_error("'%s': %s", s->what, ds_strerror(rc));
			return rc;
		}
		*s->nread += sizeof(h);
	}
	if ((rc = ds__seal_check_head(h, s->size, s->what, DS__SEAL_PACK_MAGIC, &s->seal)))
		return rc;
	*whole = *whole || !mstream_can(&s->seal);
	if (!*whole && inflated) {
		int ordered;
		*isum = ds_xcalloc((size_t)s->seal.nparts + 1, sizeof(**isum));
		if ((rc = mstream_inflated0(s, *isum, &ordered)))
			return rc;
		*whole = !ordered;
	}
	if (*whole) {
		/* the whole file, as before streaming: ds_manifest_read_image's checks */
		if (s->s3) {
			char *buf = NULL;
			uint64_t got = 0;
			if ((rc = ds_s3_get_range(s->s3, s->bucket, s->key, 0, DS_S3_WHOLE, &buf, &got,
			                          NULL)))
				return rc;
			ds_buf_release(mine);
			mine->data = buf;
			mine->len = mine->cap = (size_t)got;
		} else {
			ds_buf_reserve(mine, s->size);
			if ((rc = ds_pread_full(s->fd, mine->data, s->size, 0))) {
				ds_error("'%s': %s", s->what, ds_strerror(rc));
				return rc;
			}
			mine->len = s->size;
		}
		*s->nread += mine->len;
		return 0;
	}
	const struct ds__seal *sl = &s->seal;
	s->reg[R_PARTS] = (struct mregion){sl->parts_off, sl->nparts_rows * DS__PROW_BYTES, 0, 0};
	s->reg[R_STRINGS] = (struct mregion){sl->strings_off, sl->strings_len, 0, 0};
	s->reg[R_ENTRIES] = (struct mregion){sl->entries_off, sl->nentries * DS__ROW_BYTES, 0, 0};
	if (sl->flags & DS__SEAL_INPLACE)
		s->reg[R_SOURCES] = (struct mregion){sl->payload_off, sl->payload_len, 0, 0};
	return 0;
}

/* Rank 0, in place: the sources table's row 0, the root (its checks are
 * the whole reader's), into a new string. */
static int mstream_root0(struct ds_mstream *s, char **root)
{
	struct mregion *r = &s->reg[R_SOURCES];
	unsigned char *raw = NULL;
	struct ds__srow r0;
	int rc = ms_read(s, r->off, DS__SROW_BYTES, (void **)&raw);
	if (rc) {
		ds_error("'%s': cannot read the sources table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	*s->nread += DS__SROW_BYTES;
	mregion_saw(r, 0, (char *)raw, DS__SROW_BYTES);
	ds__srows_decode(raw, 1, &r0);
	free(raw);
	struct ds__table t = {0};
	uint64_t len = r0.len;
	/* only the root's bytes of the pool (ds__sroot_check looks at no other) */
	if (r0.str <= s->pool_len && len <= s->pool_len - r0.str && len && len < PATH_MAX) {
		if ((rc = ms_read(s, s->reg[R_STRINGS].off + r0.str, len, (void **)&t.pool))) {
			ds_error("'%s': cannot read the sources table: %s", s->what,
			         ds_strerror(rc));
			return rc;
		}
		*s->nread += len;
		t.pool_len = len;
		r0.str = 0;
	} else {
		t.pool_len = s->pool_len; /* outside it, or too long: refused */
	}
	if (!(rc = ds__sroot_check(s->what, &t, &r0)))
		*root = strndup(t.pool, len);
	free(t.pool);
	if (!rc && !*root) {
		ds_error("out of memory");
		exit(1);
	}
	return rc;
}

int ds_mstream_open(MPI_Comm world, const char *packdir, struct ds_s3 *s3, const char *bucket,
                    const char *prefix, unsigned flags, struct ds_manifest *m,
                    struct ds_mstream **out, uint64_t *nread)
{
	struct ds_mstream *s = ds_xcalloc(1, sizeof(*s));
	struct ds_buf mine = {0};
	int rc = 0, whole = (flags & DS_MSTREAM_WHOLE) != 0;
	uint64_t *isum = NULL;
	s->world = world;
	MPI_Comm_rank(world, &s->rank);
	s->m = m;
	s->fd = -1;
	s->nread = nread;
	s->s3 = s3;
	s->bucket = bucket;
	s->key = s3 && s->rank == 0 ? ds_s3_pack_key(prefix, DS__INDEX_NAME) : NULL;
	s->what = ds__join(packdir, DS__INDEX_NAME);
	memset(m, 0, sizeof(*m));
	*out = s;
	/* rank 0 says: status, whole, entries, pool bytes, partitions, pack_id,
	 * (whole) the image's length, in place, the root's length, inflated */
	uint64_t hdr[10] = {0};
	char *root = NULL;
	if (s->rank == 0) {
		rc = mstream_open0(s, &whole, &mine, (flags & DS_MSTREAM_INFLATED) != 0, &isum);
		if (whole)
			ds_free(&isum); /* the layout sums the entries */
		s->pool_len = s->seal.strings_len;
		if (!rc && !whole && (s->seal.flags & DS__SEAL_INPLACE))
			rc = mstream_root0(s, &root);
		hdr[0] = (uint64_t)(int64_t)rc;
		hdr[1] = (uint64_t)whole;
		hdr[2] = s->seal.nentries;
		hdr[3] = s->seal.strings_len;
		hdr[4] = s->seal.nparts;
		hdr[5] = s->seal.pack_id;
		hdr[6] = mine.len;
		hdr[7] = (s->seal.flags & DS__SEAL_INPLACE) != 0;
		hdr[8] = root ? strlen(root) : 0;
		hdr[9] = isum != NULL;
	}
	ds_mpi_bcast(world, hdr, sizeof(hdr), 0);
	if ((int64_t)hdr[0] < 0) {
		ds_buf_release(&mine);
		free(isum);
		return (int)(int64_t)hdr[0];
	}
	s->whole = (int)hdr[1];
	s->nentries = hdr[2];
	s->pool_len = hdr[3];
	if (s->whole) {
		/* every rank parses the same image; each one says what is wrong */
		if (s->rank != 0)
			ds_buf_reserve(&mine, hdr[6]);
		ds_mpi_bcast(world, mine.data, hdr[6], 0);
		rc = ds_manifest_read_image(mine.data, hdr[6], s->what, m);
		ds_buf_release(&mine);
		free(isum);
		return ds_any_failed(world, rc) ? (rc ? rc : -DS_ECORRUPT) : 0;
	}
	s->inplace = (int)hdr[7];
	if (s->inplace) {
		if (s->rank != 0)
			root = ds_xmalloc(hdr[8] + 1);
		ds_mpi_bcast(world, root, hdr[8] + 1, 0);
		m->root = root;
	}
	/* streamed: the partitions table now (rank 0 reads it whole: 13 bytes
	 * a partition), the entries at ds_mstream_run */
	uint32_t np = (uint32_t)hdr[4];
	unsigned char *raw = NULL;
	int64_t st = 0;
	if (s->rank == 0) {
		struct mregion *r = &s->reg[R_PARTS];
		if ((rc = ms_read(s, r->off, r->len, (void **)&raw))) {
			ds_error("'%s': cannot read the partitions table: %s", s->what,
			         ds_strerror(rc));
			st = rc;
		} else {
			mregion_saw(r, 0, (char *)raw, r->len);
			*s->nread += r->len;
		}
	}
	ds_mpi_bcast(world, &st, sizeof(st), 0);
	if (st < 0) {
		free(raw);
		free(isum);
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
	if (hdr[9]) {
		/* --inflate: what each partition holds inflated (rank 0's first pass) */
		if (s->rank != 0)
			isum = ds_xcalloc((size_t)np + 1, sizeof(*isum));
		ds_mpi_bcast(world, isum, (uint64_t)np * sizeof(*isum), 0);
		for (uint32_t i = 0; i < np; i++)
			m->parts[i].inflated = isum[i];
		m->parts_inflated = 1;
		s->inflated = 1;
	}
	free(isum);
	free(rows);
	free(raw);
	return 0;
}

int ds_mstream_whole(const struct ds_mstream *s) { return s->whole; }

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
	const char *what;
	struct ds__table *t;
	struct ds_manifest *m;
	uint32_t *nfiles; /* per partition, counted */
	char *prev, *top; /* last path; deepest open directory */
	size_t prev_cap, top_cap;
	size_t *dlen, dcap, depth;
	struct ds_mentry *dent; /* the open directories' entries (path: top's) */
	uint8_t *dkept;         /* ... kept in m (the source of a kept file) */
	int resort;             /* m->e has such a directory after its files */
	uint64_t strbytes, pool_len;
	char *scratch; /* the entry being looked at, its strings */
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
	struct ds_manifest *m = k->m;
	int rc = ds__row_check(k->what, k->t, m, k->nfiles, i, r);
	if (rc)
		return rc;
	uint64_t sb = r->path_len + (S_ISLNK(r->mode) ? (uint64_t)r->target_len : 0);
	/* as build_entries: strings never share pool bytes in a pack we wrote */
	if ((k->strbytes += sb) > k->pool_len) {
		ds_error("'%s': string pool reused across entries", k->what);
		return -DS_ECORRUPT;
	}
	grow(&k->scratch, &k->scratch_cap, sb + 2);
	char *a = k->scratch;
	ds__row_entry(e, r, k->t, &a);
	e->src = e->path;
	size_t len = r->path_len;
	if (i && ds_path_cmp(k->prev, e->path) >= 0)
		return ds__entry_bad(k->what, i, e->path, len,
		                     "entries not sorted, or a duplicate");
	if (!mparent_ok(k, e->path, len))
		return ds__entry_bad(k->what, i, e->path, len, "parent directory missing");
	grow(&k->prev, &k->prev_cap, len + 1);
	memcpy(k->prev, e->path, len + 1);
	if (S_ISDIR(e->mode)) {
		grow(&k->top, &k->top_cap, len + 1);
		memcpy(k->top, e->path, len + 1);
		if (k->depth == k->dcap) {
			k->dcap = k->dcap ? 2 * k->dcap : 64;
			k->dlen = ds_xrealloc(k->dlen, k->dcap * sizeof(*k->dlen));
			k->dent = ds_xrealloc(k->dent, k->dcap * sizeof(*k->dent));
			k->dkept = ds_xrealloc(k->dkept, k->dcap);
		}
		k->dent[k->depth] = *e;
		k->dkept[k->depth] = 0;
		k->dlen[k->depth++] = len;
	}
	if (S_ISREG(e->mode)) {
		if (m->total_size + e->size < m->total_size)
			return ds__entry_bad(k->what, i, e->path, len, "sizes overflow");
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

/* A string [off, off + len) of the pool as a bound of the range [*L, *H) a
 * chunk reads, when it lies in the pool (else the checks refuse it). */
static void span(uint64_t off, uint64_t len, uint64_t pool_len, uint64_t *L, uint64_t *H)
{
	if (len && off <= pool_len && len <= pool_len - off) {
		*L = off < *L ? off : *L;
		*H = off + len > *H ? off + len : *H;
	}
}

/* Rank 0: the next chunk, rows [i0, i0 + n): its rows' bytes (in place:
 * and their sources rows'), and the strings they name, [lo, hi) of the
 * pool. */
static int mstream_chunk0(struct ds_mstream *s, uint64_t i0, uint64_t n, unsigned char **raw,
                          unsigned char **sraw, struct ds__row *rows, struct ds__srow *srows,
                          char **pool, uint64_t *lo, uint64_t *hi)
{
	struct mregion *re = &s->reg[R_ENTRIES], *rs = &s->reg[R_STRINGS];
	int rc = ms_read(s, re->off + i0 * DS__ROW_BYTES, n * DS__ROW_BYTES, (void **)raw);
	if (rc) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	*s->nread += n * DS__ROW_BYTES;
	mregion_saw(re, i0 * DS__ROW_BYTES, (char *)*raw, n * DS__ROW_BYTES);
	ds__rows_decode(*raw, n, rows);
	if (s->inplace) {
		/* sources row i + 1 is entry i's */
		struct mregion *rq = &s->reg[R_SOURCES];
		uint64_t at = (i0 + 1) * DS__SROW_BYTES;
		if ((rc = ms_read(s, rq->off + at, n * DS__SROW_BYTES, (void **)sraw))) {
			ds_error("'%s': cannot read the sources table: %s", s->what,
			         ds_strerror(rc));
			return rc;
		}
		*s->nread += n * DS__SROW_BYTES;
		mregion_saw(rq, at, (char *)*sraw, n * DS__SROW_BYTES);
		ds__srows_decode(*sraw, n, srows);
	}
	uint64_t L = UINT64_MAX, H = 0, P = s->pool_len;
	for (uint64_t j = 0; j < n; j++) {
		const struct ds__row *r = &rows[j];
		span(r->path_off, r->path_len, P, &L, &H);
		if (S_ISLNK(r->mode))
			span(r->target_off, r->target_len, P, &L, &H);
		if (s->inplace)
			span(srows[j].str, srows[j].len, P, &L, &H);
	}
	*lo = *hi = 0;
	if (H <= L)
		return 0;
	/* the pool's bytes before these that no chunk brought: CRC'd here */
	if (L > rs->done && (rc = mregion_read_to(s, rs, L))) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	if ((rc = ms_read(s, rs->off + L, H - L, (void **)pool))) {
		ds_error("'%s': cannot read the entries table: %s", s->what, ds_strerror(rc));
		return rc;
	}
	*s->nread += H - L;
	mregion_saw(rs, L, *pool, H - L);
	*lo = L;
	*hi = H;
	return 0;
}

/* Entry e (i, checked): its source (in place: the sources row's checks,
 * the whole reader's; *src its own source name in t's pool, or NULL) and
 * its share of the partition's inflated size (--inflate). */
static int mstream_entry(struct ds_mstream *s, struct ds__table *t, uint64_t i,
                         struct ds_mentry *e, struct ds__srow *sr, const char **src)
{
	int rc;
	*src = NULL;
	if (s->inplace) {
		if ((s->srcbytes += (uint64_t)sr->len + 1) > s->pool_len + s->nentries + 1) {
			ds_error("'%s': string pool reused across sources", s->what);
			return -DS_ECORRUPT;
		}
		if ((rc = ds__srow_check(s->what, t, i, e, sr, src)))
			return rc;
	}
	if (s->inflated && S_ISREG(e->mode)) {
		/* what rank 0's first pass summed, and in payload order (the leader
		 * places each file as it goes by) */
		if (e->offset < s->ilast[e->part]) {
			ds_error("'%s': changed while it was read (entry %llu out of payload order)",
			         s->what, (unsigned long long)i);
			return -DS_ECORRUPT;
		}
		s->ilast[e->part] = e->offset;
		s->isum[e->part] += e->codec != DS_CODEC_NONE ? e->size : e->stored;
	}
	return 0;
}

/* In place: a kept file whose source is another entry (a member of a tar
 * shown as a directory: the tar, its ancestor) is checked at open against
 * that entry's size and times (ds_src_open finds it in m): the directory
 * is kept too, once (m is sorted at the end of the run). */
static void keep_owner(struct mcheck *k, const char *src, size_t len, uint64_t *cap)
{
	struct ds_manifest *m = k->m;
	for (size_t d = 0; d < k->depth; d++) {
		if (k->dlen[d] != len || memcmp(k->top, src, len))
			continue;
		if (k->dkept[d])
			return;
		if (m->n == *cap) {
			*cap = 2 * *cap + 16;
			m->e = ds_xrealloc(m->e, *cap * sizeof(*m->e));
		}
		struct ds_mentry *x = &m->e[m->n++];
		*x = k->dent[d];
		x->path = x->src = ds__mblock_copy(m, k->top, len);
		x->target = NULL;
		k->dkept[d] = 1;
		k->resort = 1;
		return;
	}
}

static int mentry_cmp(const void *a, const void *b)
{
	return ds_path_cmp(((const struct ds_mentry *)a)->path, ((const struct ds_mentry *)b)->path);
}

/* Every rank: the chunk's entries, checked, kept or passed by. */
static int mstream_take(struct ds_mstream *s, struct mcheck *k, uint64_t i0, struct ds__table *t,
                        struct ds__srow *srows, uint64_t lo, uint64_t hi,
                        const uint8_t *keep_part, uint64_t *cap,
                        int (*each)(void *, const struct ds_mentry *), void *ctx, int *erc,
                        struct ds_mstream_stats *st)
{
	struct ds_manifest *m = s->m;
	for (uint64_t j = 0; j < t->n; j++) {
		struct ds__row *r = &t->rows[j];
		r->path_off = rebase(r->path_off, r->path_len, s->pool_len, lo, hi);
		r->target_off = rebase(r->target_off, r->target_len, s->pool_len, lo, hi);
		if (s->inplace)
			srows[j].str = rebase(srows[j].str, srows[j].len, s->pool_len, lo, hi);
	}
	for (uint64_t j = 0; j < t->n; j++) {
		struct ds_mentry e;
		const char *src;
		int rc = mcheck_row(k, i0 + j, &t->rows[j], &e);
		if (!rc)
			rc = mstream_entry(s, t, i0 + j, &e, &srows[j], &src);
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
		x->path = x->src = ds__mblock_copy(m, e.path, t->rows[j].path_len);
		if (src) {
			x->src = ds__mblock_copy(m, src, srows[j].len);
			keep_owner(k, x->src, srows[j].len, cap);
		}
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
	k.what = s->what;
	k.t = &t;
	k.m = m;
	k.nfiles = ds_xcalloc((size_t)m->nparts + 1, sizeof(*k.nfiles));
	k.pool_len = s->pool_len;
	t.rows = ds_xmalloc(MS_ROWS * sizeof(*t.rows));
	struct ds__srow *srows = ds_xmalloc(MS_ROWS * sizeof(*srows));
	s->srcbytes = s->inplace ? strlen(m->root) + 1 : 0; /* row 0's */
	if (s->inflated) {
		s->isum = ds_xcalloc((size_t)m->nparts + 1, sizeof(*s->isum));
		s->ilast = ds_xcalloc((size_t)m->nparts + 1, sizeof(*s->ilast));
	}
	int rc = 0, erc = 0, refused = 0;
	uint64_t i0 = 0;
	for (;;) {
		/* rank 0 says: status (< 0: its read failed; 1: stop, the rows
		 * were refused on every rank), rows, the strings' range */
		int64_t h[4] = {0, 0, 0, 0};
		unsigned char *raw = NULL, *sraw = NULL;
		char *pool = NULL;
		uint64_t n = s->nentries - i0 < MS_ROWS ? s->nentries - i0 : MS_ROWS;
		if (s->rank == 0) {
			uint64_t lo = 0, hi = 0;
			int r0 = rc ? 0
			         : n ? mstream_chunk0(s, i0, n, &raw, &sraw, t.rows, srows, &pool, &lo,
			                              &hi)
			             : mstream_crc_ok(s);
			h[0] = rc ? 1 : r0;
			h[1] = (int64_t)n;
			h[2] = (int64_t)lo;
			h[3] = (int64_t)hi;
		}
		ds_mpi_bcast(s->world, h, sizeof(h), 0);
		if (h[0] || !n) {
			free(raw);
			free(sraw);
			free(pool);
			if (!rc && h[0] < 0)
				rc = (int)h[0];
			break;
		}
		uint64_t lo = (uint64_t)h[2], hi = (uint64_t)h[3];
		if (s->rank != 0) {
			raw = ds_xmalloc(n * DS__ROW_BYTES + 1);
			sraw = s->inplace ? ds_xmalloc(n * DS__SROW_BYTES + 1) : NULL;
			pool = ds_xmalloc(hi - lo + 1);
		}
		ds_mpi_bcast(s->world, raw, n * DS__ROW_BYTES, 0);
		if (s->inplace)
			ds_mpi_bcast(s->world, sraw, n * DS__SROW_BYTES, 0);
		ds_mpi_bcast(s->world, pool, hi - lo, 0);
		if (!rc) {
			ds__rows_decode(raw, n, t.rows);
			if (s->inplace)
				ds__srows_decode(sraw, n, srows);
			t.n = n;
			t.pool = pool;
			t.pool_len = hi - lo;
			rc = mstream_take(s, &k, i0, &t, srows, lo, hi, keep_part, &cap, each, ctx,
			                  &erc, st);
			refused = rc != 0;
		}
		free(raw);
		free(sraw);
		free(pool);
		t.pool = NULL;
		i0 += n;
	}
	/* refused rows may be damage rather than a crafted pack: rank 0 reads
	 * the rest for the seal's CRC and says so (the whole reader's order) */
	if (rc && s->rank == 0 && refused)
		(void)mstream_crc_ok(s);
	for (uint32_t p = 0; !rc && p < m->nparts; p++)
		if (k.nfiles[p] != m->parts[p].nfiles) {
			ds_error("'%s': partition %u: %u files listed, the entries name %u",
			         s->what, p, m->parts[p].nfiles, k.nfiles[p]);
			rc = -DS_ECORRUPT;
		}
	for (uint32_t p = 0; !rc && s->inflated && p < m->nparts; p++)
		if (s->isum[p] != m->parts[p].inflated) {
			ds_error("'%s': changed while it was read (partition %u inflated)", s->what,
			         p);
			rc = -DS_ECORRUPT;
		}
	free(t.rows);
	free(srows);
	free(k.nfiles);
	free(k.prev);
	free(k.top);
	if (k.resort)
		qsort(m->e, m->n, sizeof(*m->e), mentry_cmp);
	free(k.dlen);
	free(k.dent);
	free(k.dkept);
	free(k.scratch);
	ds_free(&s->isum);
	ds_free(&s->ilast);
	rc = rc ? rc : erc;
	return ds_any_failed(s->world, rc) ? (rc ? rc : -DS_ECORRUPT) : 0;
}

void ds_mstream_close(struct ds_mstream *s)
{
	if (!s)
		return;
	if (s->fd >= 0)
		close(s->fd);
	free(s->key);
	free(s->what);
	free(s->isum);
	free(s->ilast);
	free(s);
}
