/* s3pack.c: reading a pack that lives in a bucket (s3://BUCKET/PREFIX holds
 * PREFIX/index.h5 and PREFIX/part-NNNNN.h5).  The same checks as for a
 * local pack (the seal's header and the CRC of the tables), done on bytes
 * fetched by ranged GETs: stage never fetches a payload byte twice, and
 * never fetches one to check a seal. */
#include "pack_int.h"
#include "dss3.h"

#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

char *ds_s3_pack_key(const char *prefix, const char *name)
{
	char *k;
	if (asprintf(&k, "%s%s%s", prefix, *prefix ? "/" : "", name) < 0) {
		ds_error("out of memory");
		exit(1);
	}
	return k;
}

int ds_s3_manifest_get(struct ds_s3 *s3, const char *bucket, const char *prefix,
                       struct ds_buf *img)
{
	char *key = ds_s3_pack_key(prefix, DS__INDEX_NAME);
	char *buf = NULL;
	uint64_t got = 0;
	int rc = ds_s3_get_range(s3, bucket, key, 0, DS_S3_WHOLE, &buf, &got, NULL);
	free(key);
	if (rc)
		return rc;
	img->data = buf;
	img->len = img->cap = (size_t)got;
	return 0;
}

/* CRC of [from, to) of the object, 8 MiB per request. */
static int crc_ranges(struct ds_s3 *s3, const char *bucket, const char *key, uint64_t from,
                      uint64_t to, uint32_t *crc, uint64_t *nread)
{
	while (from < to) {
		uint64_t n = to - from < (8u << 20) ? to - from : (8u << 20);
		char *b = NULL;
		uint64_t got = 0;
		int rc = ds_s3_get_range(s3, bucket, key, from, n, &b, &got, NULL);
		if (rc)
			return rc;
		if (got != n) {
			free(b);
			return -EIO;
		}
		*crc = ds_crc32c(*crc, b, (size_t)n);
		*nread += n;
		free(b);
		from += n;
	}
	return 0;
}

int ds_s3_part_locate(struct ds_s3 *s3, const char *bucket, const char *prefix, uint32_t part,
                      const struct ds_manifest *m, uint64_t *offset, uint64_t *len,
                      uint64_t *meta_read)
{
	char name[32], what[PATH_MAX];
	snprintf(name, sizeof(name), "part-%05u.h5", part);
	char *key = ds_s3_pack_key(prefix, name);
	ds_s3_name(bucket, key, what, sizeof(what));
	char *h = NULL;
	uint64_t got = 0, size = 0;
	struct ds__seal s;
	int rc;
	if (part >= m->nparts) {
		ds_error("partition %u: not in the pack (%u partitions)", part, m->nparts);
		rc = -EINVAL;
		goto out;
	}
	if ((rc = ds_s3_get_range(s3, bucket, key, 0, DS__SEAL_USED, &h, &got, &size)))
		goto out;
	*meta_read += got;
	if (got < DS__SEAL_USED || size < DS__SEAL_SIZE) {
		ds_error("'%s': truncated (%llu bytes)", what, (unsigned long long)size);
		rc = -DS_ECORRUPT;
		goto out;
	}
	if ((rc = ds__seal_check_head((const unsigned char *)h, size, what, DS__SEAL_PART_MAGIC, &s)))
		goto out;
	uint32_t crc = 0;
	if (!s.payload_len)
		rc = crc_ranges(s3, bucket, key, DS__SEAL_SIZE, s.file_size, &crc, meta_read);
	else if (!(rc = crc_ranges(s3, bucket, key, DS__SEAL_SIZE, s.payload_off, &crc, meta_read)))
		rc = crc_ranges(s3, bucket, key, s.payload_off + s.payload_len, s.file_size, &crc,
		                meta_read);
	if (rc) {
		if (rc == -EIO)
			ds_error("'%s': truncated while reading its tables", what);
		goto out;
	}
	if (crc != s.meta_crc) {
		ds_error("'%s': corrupt (checksum mismatch in its tables or HDF5 structure)", what);
		rc = -DS_ECORRUPT;
		goto out;
	}
	if ((rc = ds__part_seal_check(&s, what, part, m)))
		goto out;
	*offset = s.payload_len ? s.payload_off : 0;
	*len = s.payload_len;
out:
	free(h);
	free(key);
	return rc;
}
