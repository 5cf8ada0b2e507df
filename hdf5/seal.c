/* seal.c: the seal in the user block of every pack file (layout in
 * pack_int.h and README.md).  HDF5 1.10 is not hardened against corrupt
 * files; checking a CRC over every byte it will parse turns a flipped bit or
 * a truncated copy into a clear message instead of a crash in the library. */
#include "pack_int.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SEAL_VERSION 1u
#define MAGIC_LEN 16u

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

static void encode(unsigned char h[DS__SEAL_USED], const char *magic, const struct ds__seal *s)
{
	memset(h, 0, DS__SEAL_USED);
	memcpy(h, magic, strlen(magic));
	put32(h + 16, SEAL_VERSION);
	put32(h + 20, DS__SEAL_SIZE);
	put64(h + 24, s->file_size);
	put64(h + 32, s->payload_off);
	put64(h + 40, s->payload_len);
	put32(h + 48, s->meta_crc);
	put32(h + 52, ds_crc32c(0, h, 52));
}

/* Check the fixed part; fill s.  Does not look at the rest of the file. */
static int decode(const unsigned char h[DS__SEAL_USED], uint64_t actual_size, const char *what,
                  const char *magic, struct ds__seal *s)
{
	char m[MAGIC_LEN] = {0};
	memcpy(m, magic, strlen(magic));
	if (memcmp(h, m, MAGIC_LEN)) {
		ds_error("'%s': not a dstage %s file (no seal)", what,
		         !strcmp(magic, DS__SEAL_PACK_MAGIC) ? "pack index" : "partition");
		return -DS_EFORMAT;
	}
	if (get32(h + 52) != ds_crc32c(0, h, 52)) {
		ds_error("'%s': corrupt header (checksum mismatch in the seal)", what);
		return -DS_ECORRUPT;
	}
	if (get32(h + 16) != SEAL_VERSION || get32(h + 20) != DS__SEAL_SIZE) {
		ds_error("'%s': seal version %u not supported", what, get32(h + 16));
		return -DS_EFORMAT;
	}
	s->file_size = get64(h + 24);
	s->payload_off = get64(h + 32);
	s->payload_len = get64(h + 40);
	s->meta_crc = get32(h + 48);
	if (actual_size != s->file_size) {
		ds_error("'%s': %s: %llu bytes, the seal says %llu", what,
		         actual_size < s->file_size ? "truncated" : "wrong size",
		         (unsigned long long)actual_size, (unsigned long long)s->file_size);
		return -DS_ECORRUPT;
	}
	int has_payload = s->payload_off || s->payload_len;
	if (has_payload && (s->payload_off < DS__SEAL_SIZE || s->payload_off > s->file_size ||
	                    s->payload_len > s->file_size - s->payload_off)) {
		ds_error("'%s': corrupt seal (payload outside the file)", what);
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

static int meta_crc_fd(int fd, const struct ds__seal *s, uint32_t *crc)
{
	uint64_t pend = s->payload_off + s->payload_len;
	*crc = 0;
	if (!s->payload_len)
		return crc_range(fd, DS__SEAL_SIZE, s->file_size, crc);
	int rc = crc_range(fd, DS__SEAL_SIZE, s->payload_off, crc);
	return rc ? rc : crc_range(fd, pend, s->file_size, crc);
}

static uint32_t meta_crc_buf(const unsigned char *b, const struct ds__seal *s)
{
	if (!s->payload_len)
		return ds_crc32c(0, b + DS__SEAL_SIZE, s->file_size - DS__SEAL_SIZE);
	uint64_t pend = s->payload_off + s->payload_len;
	uint32_t crc = ds_crc32c(0, b + DS__SEAL_SIZE, s->payload_off - DS__SEAL_SIZE);
	return ds_crc32c(crc, b + pend, s->file_size - pend);
}

int ds__seal_write(int fd, const char *magic, uint64_t payload_off, uint64_t payload_len)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return -errno;
	struct ds__seal s = {.file_size = (uint64_t)st.st_size,
	                     .payload_off = payload_len ? payload_off : 0,
	                     .payload_len = payload_len};
	if (s.file_size < DS__SEAL_SIZE || s.payload_off + s.payload_len > s.file_size)
		return -DS_ECORRUPT;
	int rc = meta_crc_fd(fd, &s, &s.meta_crc);
	if (rc)
		return rc;
	unsigned char h[DS__SEAL_USED];
	encode(h, magic, &s);
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
	if ((rc = decode(h, (uint64_t)st.st_size, what, magic, s)))
		return rc;
	uint32_t crc;
	if ((rc = meta_crc_fd(fd, s, &crc))) {
		ds_error("'%s': %s", what, ds_strerror(rc));
		return rc;
	}
	if (crc != s->meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its HDF5 structure)", what);
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
	int rc = decode(buf, len, what, magic, s);
	if (rc)
		return rc;
	if (meta_crc_buf(buf, s) != s->meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its HDF5 structure)", what);
		return -DS_ECORRUPT;
	}
	return 0;
}

void ds__seal_fixup_buf(void *buf, size_t len, const char *magic)
{
	if (len < DS__SEAL_SIZE)
		return;
	struct ds__seal s = {.file_size = len};
	s.meta_crc = meta_crc_buf(buf, &s);
	encode(buf, magic, &s);
}
