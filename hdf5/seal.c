/* SPDX-License-Identifier: BSD-3-Clause */
/* seal.c: the seal, a small CRC-protected header in the HDF5 user block of
 * every file of a pack (layout in pack_int.h and docs/formats.md).
 *
 * It is what dstage itself reads.  The tables lie at offsets the seal
 * records (HDF5 put them there; verify checks HDF5 still agrees), so
 * dstage's readers decode them with their own bounds-checked code and never
 * hand untrusted bytes to the HDF5 library: HDF5 1.10 is not hardened
 * against crafted files (fuzzing found a use-after-free, a heap overflow and
 * unbounded allocations in it).  The CRC over the rest of the file turns a
 * truncated copy or a flipped bit into a clear message. */
#include "pack_int.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEAL_VERSION 1u
#define SEAL_VERSION_INPLACE 2u /* index.h5 of an in-place pack (pack_int.h) */
#define MAGIC_LEN 16u
#define ROW_BYTES 70u  /* a packed entries row (docs/formats.md) */
#define PROW_BYTES 13u /* a packed partitions row */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void ds__seal_encode(unsigned char h[DS__SEAL_USED], const char *magic, const struct ds__seal *s)
{
	memset(h, 0, DS__SEAL_USED);
	memcpy(h, magic, strlen(magic));
	put32(h + 16, s->flags & DS__SEAL_INPLACE ? SEAL_VERSION_INPLACE : SEAL_VERSION);
	put32(h + 20, DS__SEAL_SIZE);
	put32(h + 24, DS__SEAL_USED);
	put32(h + 28, s->part);
	put64(h + 32, s->file_size);
	put64(h + 40, s->pack_id);
	put64(h + 48, s->entries_off);
	put64(h + 56, s->nentries);
	put64(h + 64, s->strings_off);
	put64(h + 72, s->strings_len);
	put64(h + 80, s->parts_off);
	put64(h + 88, s->nparts_rows);
	put64(h + 96, s->payload_off);
	put64(h + 104, s->payload_len);
	put32(h + 112, s->nparts);
	put32(h + 116, s->flags);
	put32(h + 120, s->meta_crc);
	put32(h + 124, ds_crc32c(0, h, 124));
}

void ds__seal_decode(const unsigned char h[DS__SEAL_USED], struct ds__seal *s)
{
	s->part = get32(h + 28);
	s->file_size = get64(h + 32);
	s->pack_id = get64(h + 40);
	s->entries_off = get64(h + 48);
	s->nentries = get64(h + 56);
	s->strings_off = get64(h + 64);
	s->strings_len = get64(h + 72);
	s->parts_off = get64(h + 80);
	s->nparts_rows = get64(h + 88);
	s->payload_off = get64(h + 96);
	s->payload_len = get64(h + 104);
	s->nparts = get32(h + 112);
	s->flags = get32(h + 116);
	s->meta_crc = get32(h + 120);
}

/* Does [off, off + n * size) lie inside the file, after the user block? */
static int region_ok(uint64_t off, uint64_t n, uint64_t size, uint64_t file_size)
{
	if (!n)
		return 1;
	if (off < DS__SEAL_SIZE || off > file_size || n > (file_size - off) / size)
		return 0;
	return 1;
}

/* The fixed part: magic, CRC, version, sizes, and a directory that points
 * inside the file.  Fills s; does not look at the rest of the file. */
static int check_header(const unsigned char h[DS__SEAL_USED], uint64_t actual_size,
                        const char *what, const char *magic, struct ds__seal *s)
{
	char m[MAGIC_LEN] = {0};
	int index = !strcmp(magic, DS__SEAL_PACK_MAGIC);
	memcpy(m, magic, strlen(magic));
	if (memcmp(h, m, MAGIC_LEN)) {
		ds_error("'%s': not a dstage %s file (no seal)", what, index ? "pack index" : "partition");
		return -DS_EFORMAT;
	}
	if (get32(h + 124) != ds_crc32c(0, h, 124)) {
		ds_error("'%s': corrupt header (checksum mismatch in the seal)", what);
		return -DS_ECORRUPT;
	}
	uint32_t version = get32(h + 16);
	if ((version != SEAL_VERSION && !(index && version == SEAL_VERSION_INPLACE)) ||
	    get32(h + 20) != DS__SEAL_SIZE || get32(h + 24) != DS__SEAL_USED) {
		ds_error("'%s': seal version %u not supported", what, get32(h + 16));
		return -DS_EFORMAT;
	}
	ds__seal_decode(h, s);
	if (actual_size != s->file_size) {
		ds_error("'%s': %s: %llu bytes, the seal says %llu", what,
		         actual_size < s->file_size ? "truncated" : "wrong size",
		         (unsigned long long)actual_size, (unsigned long long)s->file_size);
		return -DS_ECORRUPT;
	}
	uint64_t fs = s->file_size;
	int ok = region_ok(s->entries_off, s->nentries, ROW_BYTES, fs) &&
	         region_ok(s->strings_off, s->strings_len, 1, fs) &&
	         region_ok(s->parts_off, s->nparts_rows, PROW_BYTES, fs) &&
	         region_ok(s->payload_off, s->payload_len, 1, fs) && s->nparts <= DS__MAX_PARTS &&
	         s->nentries <= DS__MAX_ENTRIES;
	/* in place (version 2): the payload fields locate the sources table,
	 * one row per entry and one for the root */
	int inplace = version == SEAL_VERSION_INPLACE;
	if (ok && index && inplace)
		ok = s->part == UINT32_MAX && s->nparts_rows == s->nparts &&
		     s->flags == DS__SEAL_INPLACE && s->payload_len % DS__SROW_BYTES == 0 &&
		     s->payload_len / DS__SROW_BYTES == s->nentries + 1;
	else if (ok && index)
		ok = s->part == UINT32_MAX && s->nparts_rows == s->nparts && !s->payload_len &&
		     !(s->flags & DS__SEAL_INPLACE);
	else if (ok)
		ok = s->part < s->nparts && !s->nparts_rows;
	if (!ok) {
		ds_error("'%s': corrupt seal (tables outside the file or counts out of range)", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

/* CRC of [from, to) of fd, in pieces. */
static int crc_range(int fd, uint64_t from, uint64_t to, uint32_t *crc)
{
	enum { PIECE = 1 << 20 };
	char *buf = ds_xmalloc(PIECE);
	int rc = 0;
	while (from < to) {
		size_t n = to - from < PIECE ? (size_t)(to - from) : PIECE;
		if ((rc = ds_pread_full(fd, buf, n, (off_t)from)))
			break;
		*crc = ds_crc32c(*crc, buf, n);
		from += n;
	}
	free(buf);
	return rc;
}

/* Everything after the user block but the payload (which per-file CRCs
 * cover, and which would make opening a partition cost a full read). */
static int meta_crc_fd(int fd, const struct ds__seal *s, uint32_t *crc)
{
	*crc = 0;
	if (!s->payload_len || (s->flags & DS__SEAL_INPLACE))
		return crc_range(fd, DS__SEAL_SIZE, s->file_size, crc);
	int rc = crc_range(fd, DS__SEAL_SIZE, s->payload_off, crc);
	return rc ? rc : crc_range(fd, s->payload_off + s->payload_len, s->file_size, crc);
}

static uint32_t meta_crc_buf(const unsigned char *b, const struct ds__seal *s)
{
	if (!s->payload_len || (s->flags & DS__SEAL_INPLACE))
		return ds_crc32c(0, b + DS__SEAL_SIZE, s->file_size - DS__SEAL_SIZE);
	uint64_t pend = s->payload_off + s->payload_len;
	uint32_t crc = ds_crc32c(0, b + DS__SEAL_SIZE, s->payload_off - DS__SEAL_SIZE);
	return ds_crc32c(crc, b + pend, s->file_size - pend);
}

int ds__seal_write(int fd, const char *magic, struct ds__seal *s)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	s->file_size = (uint64_t)st.st_size;
	if (s->file_size < DS__SEAL_SIZE || s->payload_off + s->payload_len > s->file_size)
		return -DS_ECORRUPT;
	if (!s->payload_len)
		s->payload_off = 0;
	int rc = meta_crc_fd(fd, s, &s->meta_crc);
	if (rc)
		return rc;
	unsigned char h[DS__SEAL_USED];
	ds__seal_encode(h, magic, s);
	return ds_pwrite_full(fd, h, sizeof(h), 0);
}

int ds__seal_check_fd(int fd, const char *what, const char *magic, struct ds__seal *s)
{
	struct stat st;
	unsigned char h[DS__SEAL_USED];
	if (fstat(fd, &st) < 0) {
		int err = errno;
		ds_error("'%s': %s", what, strerror(err));
		return -err;
	}
	if ((uint64_t)st.st_size < DS__SEAL_SIZE) {
		ds_error("'%s': truncated (%llu bytes)", what, (unsigned long long)st.st_size);
		return -DS_ECORRUPT;
	}
	int rc = ds_pread_full(fd, h, sizeof(h), 0);
	if (rc) {
		ds_error("'%s': %s", what, ds_strerror(rc));
		return rc;
	}
	if ((rc = check_header(h, (uint64_t)st.st_size, what, magic, s)))
		return rc;
	uint32_t crc;
	if ((rc = meta_crc_fd(fd, s, &crc))) {
		ds_error("'%s': %s", what, ds_strerror(rc));
		return rc;
	}
	if (crc != s->meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its tables or HDF5 structure)", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

int ds__seal_check_buf(const void *buf, size_t len, const char *what, const char *magic,
                       struct ds__seal *s)
{
	if (len < DS__SEAL_SIZE) {
		ds_error("'%s': truncated (%zu bytes)", what, len);
		return -DS_ECORRUPT;
	}
	int rc = check_header(buf, len, what, magic, s);
	if (rc)
		return rc;
	if (meta_crc_buf(buf, s) != s->meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its tables or HDF5 structure)", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

void ds__seal_fixup_buf(void *buf, size_t len, const char *magic)
{
	if (len < DS__SEAL_SIZE)
		return;
	struct ds__seal s;
	ds__seal_decode(buf, &s);
	s.file_size = len;
	/* keep the fuzzed directory, but a payload range the CRC can skip */
	if (s.payload_off < DS__SEAL_SIZE || s.payload_off > len || s.payload_len > len - s.payload_off)
		s.payload_off = s.payload_len = 0;
	s.meta_crc = meta_crc_buf(buf, &s);
	ds__seal_encode(buf, magic, &s);
}

/* The header check alone, for a file read by ranges (s3://, s3pack.c). */
int ds__seal_check_head(const unsigned char h[DS__SEAL_USED], uint64_t size, const char *what,
                        const char *magic, struct ds__seal *s)
{
	return check_header(h, size, what, magic, s);
}
