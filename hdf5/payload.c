/* payload.c: finding a partition's payload in its file and decoding one
 * file's bytes out of it.  The payload is read with plain pread: HDF5 is
 * only asked where it is (H5Dget_offset), and that answer is cross-checked
 * with the seal and the manifest before anything is read. */
#include "pack_int.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#define IOBUF (1u << 20)
/* Entries at least this large are checked for holes in the payload. */
#define SPARSE_MIN (1u << 20)

const char ds__zeros[DS__ZEROS];

/* Root attributes of a partition: format, version, part, pack_id. */
static int part_attrs_ok(hid_t f, const char *what, uint32_t part, const struct ds_manifest *m)
{
	char s[64];
	uint64_t v;
	if (ds__h5_read_attr_str(f, "format", s, sizeof(s)) || strcmp(s, DS__PART_FORMAT)) {
		ds_error("'%s': not a dstage partition (attribute 'format')", what);
		return -DS_EFORMAT;
	}
	if (ds__h5_read_attr_u64(f, "version", &v) || v != DS__PACK_VERSION) {
		ds_error("'%s': partition format version not supported", what);
		return -DS_EFORMAT;
	}
	if (ds__h5_read_attr_u64(f, "part", &v) || v != part) {
		ds_error("'%s': holds another partition (attribute 'part')", what);
		return -DS_ECORRUPT;
	}
	if (ds__h5_read_attr_u64(f, "pack_id", &v) || v != m->pack_id) {
		ds_error("'%s': belongs to another pack (attribute 'pack_id')", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

/* The payload dataset: 1-D bytes, contiguous, the size the manifest says, at
 * the place the seal says. */
static int payload_ok(hid_t f, const char *what, const struct ds__seal *seal, uint64_t want,
                      struct ds__part *p)
{
	hid_t d;
	uint64_t n;
	size_t tsize;
	int rc = ds__h5_open_1d(f, "payload", seal->file_size, &d, &n, &tsize);
	if (!rc && tsize != 1) {
		H5Dclose(d);
		rc = -DS_ECORRUPT;
	}
	if (rc) {
		ds_error("'%s': dataset 'payload' missing or malformed", what);
		return -DS_ECORRUPT;
	}
	/* H5Dget_offset of an empty dataset is undefined (HDF5 1.10 even adds
	 * the user block size to HADDR_UNDEF): only ask when there are bytes. */
	haddr_t off = n ? H5Dget_offset(d) : 0;
	H5Dclose(d);
	if (n != want) {
		ds_error("'%s': payload of %llu bytes, the manifest says %llu", what,
		         (unsigned long long)n, (unsigned long long)want);
		return -DS_ECORRUPT;
	}
	if (n && (off == HADDR_UNDEF || off != seal->payload_off || n != seal->payload_len)) {
		ds_error("'%s': payload not where its seal says", what);
		return -DS_ECORRUPT;
	}
	p->base = n ? off : 0;
	p->len = n;
	return 0;
}

int ds__part_open(const char *packdir, uint32_t part, const struct ds_manifest *m,
                  struct ds__part *p, struct ds__table *table)
{
	struct ds__seal seal;
	int rc;
	memset(p, 0, sizeof(*p));
	p->fd = -1;
	p->part = part;
	if (part >= m->nparts) {
		ds_error("partition %u: not in the pack (%u partitions)", part, m->nparts);
		return -EINVAL;
	}
	p->path = ds_part_path(packdir, part);
	p->fd = open(p->path, O_RDONLY | O_CLOEXEC);
	if (p->fd < 0) {
		rc = -errno;
		ds_error("'%s': %s", p->path, strerror(errno));
		goto fail;
	}
	if ((rc = ds__seal_check_fd(p->fd, p->path, DS__SEAL_PART_MAGIC, &seal)))
		goto fail;
	hid_t f = ds__h5_open_file(p->path);
	if (f < 0) {
		ds_error("'%s': not readable as HDF5", p->path);
		rc = -DS_ECORRUPT;
		goto fail;
	}
	rc = part_attrs_ok(f, p->path, part, m);
	if (!rc)
		rc = payload_ok(f, p->path, &seal, m->parts[part].size, p);
	if (!rc && table)
		rc = ds__table_read(f, seal.file_size, p->path, table);
	H5Fclose(f);
	if (!rc)
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

int ds_part_locate(const char *packdir, uint32_t part, const struct ds_manifest *m,
                   uint64_t *offset, uint64_t *len)
{
	struct ds__part p;
	int rc = ds__part_open(packdir, part, m, &p, NULL);
	if (rc)
		return rc;
	*offset = p.base;
	*len = p.len;
	ds__part_close(&p);
	return 0;
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
