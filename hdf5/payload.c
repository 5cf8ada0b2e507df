/* SPDX-License-Identifier: BSD-3-Clause */
/* payload.c: opening a partition (its seal says where the payload is; the
 * manifest must agree) and decoding one file's bytes out of it with plain
 * pread, checking size and CRC-32C.  No HDF5 call: see seal.c. */
#include "pack_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IOBUF (1u << 20)
/* Entries at least this large are checked for holes in the payload. */
#define SPARSE_MIN (1u << 20)

const char ds__zeros[DS__ZEROS];

/* Does the partition's seal agree with the manifest? */
static int part_seal_ok(const struct ds__seal *s, const char *what, uint32_t part,
                        const struct ds_manifest *m)
{
	const struct ds_mpart *mp = &m->parts[part];
	if (s->part != part) {
		ds_error("'%s': holds partition %u, not %u", what, s->part, part);
		return -DS_ECORRUPT;
	}
	if (s->pack_id != m->pack_id || s->nparts != m->nparts) {
		ds_error("'%s': belongs to another pack (pack_id)", what);
		return -DS_ECORRUPT;
	}
	if (s->payload_len != mp->size) {
		ds_error("'%s': payload of %llu bytes, the manifest says %llu", what,
		         (unsigned long long)s->payload_len, (unsigned long long)mp->size);
		return -DS_ECORRUPT;
	}
	if (s->nentries != mp->nfiles || !(s->flags & 1) != !mp->replicated) {
		ds_error("'%s': its table lists %llu files%s, the manifest %u%s", what,
		         (unsigned long long)s->nentries, s->flags & 1 ? " (replicated)" : "",
		         mp->nfiles, mp->replicated ? " (replicated)" : "");
		return -DS_ECORRUPT;
	}
	return 0;
}

int ds__part_open(const char *packdir, uint32_t part, const struct ds_manifest *m,
                  struct ds__part *p, struct ds__table *table)
{
	int rc;
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->part = part;
	if (part >= m->nparts) {
		ds_error("partition %u: not in the pack (%u partitions)", part, m->nparts);
		return -EINVAL;
	}
	p->path = ds_part_path(packdir, part);
	if (!strncmp(packdir, "s3://", 5)) {
		/* a pack in a bucket: the partition copied whole (cat, verify) */
		if ((rc = ds__s3_fetch_tmp(packdir, strrchr(p->path, '/') + 1, &p->fd)))
			goto fail;
	} else if ((rc = ds_open_regular(p->path, &p->fd))) {
		ds_error("'%s': %s", p->path, ds_strerror(rc));
		goto fail;
	}
	if ((rc = ds__seal_check_fd(p->fd, p->path, DS__SEAL_PART_MAGIC, &p->seal)) ||
	    (rc = part_seal_ok(&p->seal, p->path, part, m)))
		goto fail;
	p->base = p->seal.payload_len ? p->seal.payload_off : 0;
	p->len = p->seal.payload_len;
	if (table) {
		struct ds__src src = {p->fd, NULL, 0};
		if ((rc = ds__table_read(&src, &p->seal, p->path, table)))
			goto fail;
	}
	return 0;
fail:
	ds__part_close(p);
	return rc;
}

void ds__part_close(struct ds__part *p)
{
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	ds_free(&p->path);
}

/* The stage's open: the seal's header alone (its own CRC, the file's size,
 * the partition, the pack_id, the payload's place and size, the file
 * count), never the partition's tables: the stage goes by the manifest and
 * checks every file's CRC from it as the bytes land, so reading the
 * partition's copy of the metadata (its entries and strings, about as big
 * as the manifest's) to check their CRC would read the pack's metadata
 * twice for nothing the stage uses (issue 27; verify and cat check it). */
int ds_part_locate(const char *packdir, uint32_t part, const struct ds_manifest *m,
                   uint64_t *offset, uint64_t *len, uint64_t *meta_read)
{
	if (part >= m->nparts) {
		ds_error("partition %u: not in the pack (%u partitions)", part, m->nparts);
		return -EINVAL;
	}
	char *path = ds_part_path(packdir, part);
	unsigned char h[DS__SEAL_USED];
	struct ds__seal s;
	struct stat st;
	int fd, rc = ds_open_regular(path, &fd);
	if (rc) {
		ds_error("'%s': %s", path, ds_strerror(rc));
		free(path);
		return rc;
	}
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		ds_error("'%s': %s", path, ds_strerror(rc));
	} else if ((uint64_t)st.st_size < DS__SEAL_SIZE) {
		ds_error("'%s': truncated (%llu bytes)", path, (unsigned long long)st.st_size);
		rc = -DS_ECORRUPT;
	} else if ((rc = ds_pread_full(fd, h, sizeof(h), 0))) {
		ds_error("'%s': %s", path, ds_strerror(rc));
	} else {
		*meta_read += sizeof(h);
		if (!(rc = ds__seal_check_head(h, (uint64_t)st.st_size, path, DS__SEAL_PART_MAGIC,
		                               &s)) &&
		    !(rc = part_seal_ok(&s, path, part, m))) {
			*offset = s.payload_len ? s.payload_off : 0;
			*len = s.payload_len;
		}
	}
	close(fd);
	free(path);
	return rc;
}

/* ---- one file's bytes --------------------------------------------------- */
struct decode {
	const struct ds_mentry *e;
	ds__sink_fn fn;
	void *ctx;
	uint64_t out;  /* decoded bytes so far */
	uint32_t crc;
};

/* n bytes at buf (NULL: zeros) reach the CRC and the caller. */
static int emit(struct decode *d, const void *buf, size_t n)
{
	if (n > d->e->size - d->out)
		return -DS_ECORRUPT; /* more bytes than the entry's size */
	d->out += n;
	d->crc = ds_crc32c(d->crc, buf ? buf : ds__zeros, n);
	return d->fn ? d->fn(d->ctx, buf, n) : 0;
}

static int emit_zeros(struct decode *d, uint64_t n)
{
	int rc = 0;
	while (!rc && n) {
		size_t m = n < DS__ZEROS ? (size_t)n : DS__ZEROS;
		rc = emit(d, NULL, m);
		n -= m;
	}
	return rc;
}

/* The next hole in [pos, end) of fd: *data is where data resumes after
 * pos (pos itself when there is data), *hole where it stops.  Without
 * SEEK_DATA, all of it is data. */
static void next_data(int fd, uint64_t pos, uint64_t end, uint64_t *data, uint64_t *hole)
{
	off_t dt = lseek(fd, (off_t)pos, SEEK_DATA);
	if (dt < 0) {
		*data = errno == ENXIO ? end : pos;
		*hole = end;
		return;
	}
	*data = (uint64_t)dt < end ? (uint64_t)dt : end;
	off_t h = lseek(fd, (off_t)*data, SEEK_HOLE);
	*hole = h < 0 || (uint64_t)h > end ? end : (uint64_t)h;
}

/* Stored bytes as they are; holes of a sparse payload are not read. */
static int read_raw(const struct ds__part *p, struct decode *d, char *in)
{
	uint64_t pos = p->base + d->e->offset, end = pos + d->e->stored;
	int sparse = d->e->stored >= SPARSE_MIN;
	while (pos < end) {
		uint64_t data = pos, hole = end;
		if (sparse)
			next_data(p->fd, pos, end, &data, &hole);
		int rc = emit_zeros(d, data - pos);
		for (pos = data; !rc && pos < hole;) {
			size_t n = hole - pos < IOBUF ? (size_t)(hole - pos) : IOBUF;
			if (!(rc = ds_pread_full(p->fd, in, n, (off_t)pos)))
				rc = emit(d, in, n);
			pos += n;
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int read_zlib(const struct ds__part *p, struct decode *d, char *in, char *out)
{
	z_stream z;
	memset(&z, 0, sizeof(z));
	if (inflateInit(&z) != Z_OK)
		return -ENOMEM;
	uint64_t pos = p->base + d->e->offset, left = d->e->stored;
	int rc = 0, zr = Z_OK;
	while (!rc && zr != Z_STREAM_END) {
		if (!z.avail_in) {
			if (!left) {
				rc = -DS_ECORRUPT; /* stream ends early */
				break;
			}
			size_t n = left < IOBUF ? (size_t)left : IOBUF;
			if ((rc = ds_pread_full(p->fd, in, n, (off_t)pos)))
				break;
			pos += n;
			left -= n;
			z.next_in = (Bytef *)in;
			z.avail_in = (uInt)n;
		}
		z.next_out = (Bytef *)out;
		z.avail_out = IOBUF;
		zr = inflate(&z, Z_NO_FLUSH);
		if ((zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) ||
		    (zr == Z_BUF_ERROR && z.avail_in))
			rc = zr == Z_MEM_ERROR ? -ENOMEM : -DS_ECORRUPT;
		else if (IOBUF - z.avail_out)
			rc = emit(d, out, IOBUF - z.avail_out);
	}
	/* the stream must use exactly the stored bytes */
	if (!rc && (z.avail_in || left))
		rc = -DS_ECORRUPT;
	inflateEnd(&z);
	return rc;
}

int ds__entry_read(const struct ds__part *p, const struct ds_mentry *e, ds__sink_fn fn, void *ctx)
{
	if (e->part != p->part || e->stored > p->len || e->offset > p->len - e->stored)
		return -DS_ECORRUPT;
	struct decode d = {.e = e, .fn = fn, .ctx = ctx};
	char *in = ds_xmalloc(IOBUF), *out = e->codec == DS_CODEC_ZLIB ? ds_xmalloc(IOBUF) : NULL;
	int rc = e->codec == DS_CODEC_ZLIB ? read_zlib(p, &d, in, out) : read_raw(p, &d, in);
	free(in);
	free(out);
	if (rc)
		return rc;
	if (d.out != e->size)
		return -DS_ECORRUPT;
	return d.crc == e->crc ? 0 : -DS_ECHECKSUM;
}

/* part_seal_ok for a partition read by ranges (s3://, s3pack.c). */
int ds__part_seal_check(const struct ds__seal *s, const char *what, uint32_t part,
                        const struct ds_manifest *m)
{
	return part_seal_ok(s, what, part, m);
}
