/* SPDX-License-Identifier: BSD-3-Clause */
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
	/* the header alone, as ds_part_locate: the stage goes by the manifest */
	if ((rc = ds__part_seal_check(&s, what, part, m)))
		goto out;
	*offset = s.payload_len ? s.payload_off : 0;
	*len = s.payload_len;
out:
	free(h);
	free(key);
	return rc;
}

/* ---- ls, cat, verify on a pack in a bucket --------------------------------- */
/* One client per process for these commands (made at first use). */
static struct ds_s3 *client(void)
{
	static struct ds_s3 *s3;
	if (!s3)
		s3 = ds_s3_new();
	return s3;
}

int ds__s3_manifest_read(const char *packdir, struct ds_manifest *m)
{
	char *bucket, *prefix, what[PATH_MAX];
	struct ds_buf img = {0};
	memset(m, 0, sizeof(*m));
	int rc = ds_s3_parse_url(packdir, &bucket, &prefix);
	if (rc)
		return rc;
	struct ds_s3 *s3 = client();
	if (!s3)
		rc = -EINVAL;
	else if (!(rc = ds_s3_manifest_get(s3, bucket, prefix, &img))) {
		char *key = ds_s3_pack_key(prefix, DS__INDEX_NAME);
		ds_s3_name(bucket, key, what, sizeof(what));
		free(key);
		rc = ds_manifest_read_image(img.data, img.len, what, m);
	}
	ds_buf_release(&img);
	free(bucket);
	free(prefix);
	return rc;
}

static char tmpdir[PATH_MAX], last_part[PATH_MAX + 64];

static void remove_tmpdir(void)
{
	if (tmpdir[0])
		ds_rm_rf(tmpdir);
}

int ds__s3_fetch_tmp(const char *packdir, const char *name, int *fdp)
{
	char *bucket, *prefix;
	int rc = ds_s3_parse_url(packdir, &bucket, &prefix);
	if (rc)
		return rc;
	struct ds_s3 *s3 = client();
	char *key = ds_s3_pack_key(prefix, name);
	const char *tmp = getenv("TMPDIR");
	int fd = -1;
	if (!s3) {
		rc = -EINVAL;
		goto out;
	}
	/* a named file in a private directory (HDF5 opens by name: verify),
	 * removed when the process ends */
	if (!tmpdir[0]) {
		snprintf(tmpdir, sizeof(tmpdir), "%s/dstage-s3.XXXXXX", tmp && *tmp ? tmp : "/tmp");
		if (!mkdtemp(tmpdir)) {
			rc = -errno;
			ds_error("'%s': cannot make a temporary directory: %s", tmpdir, strerror(errno));
			tmpdir[0] = '\0';
			goto out;
		}
		atexit(remove_tmpdir);
	}
	char path[PATH_MAX + 64];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	unlink(path);
	/* one partition at a time on the disk: the one before goes (its
	 * descriptor, if still open, keeps it readable) */
	if (strncmp(name, "part-", 5) == 0) {
		if (last_part[0])
			unlink(last_part);
		snprintf(last_part, sizeof(last_part), "%s", path);
	}
	fd = open(path, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		rc = -errno;
		ds_error("'%s': cannot make a temporary file: %s", path, strerror(errno));
		goto out;
	}
	/* 64 MiB per request, in order, into the unlinked file */
	uint64_t off = 0, total = 1;
	while (!rc && off < total) {
		char *b = NULL;
		uint64_t got = 0;
		rc = ds_s3_get_range(s3, bucket, key, off, 64ull << 20, &b, &got, &total);
		if (!rc && got == 0 && off == 0)
			total = 0; /* an empty object */
		if (!rc && got && (rc = ds_pwrite_full(fd, b, (size_t)got, (off_t)off)))
			ds_error("temporary copy of '%s': %s", key, ds_strerror(rc));
		if (!rc && !got && off < total)
			rc = -EIO;
		off += got;
		free(b);
	}
out:
	if (rc && fd >= 0)
		close(fd);
	else if (!rc)
		*fdp = fd;
	free(key);
	free(bucket);
	free(prefix);
	return rc;
}

int ds__manifest_any(const char *packdir, struct ds_manifest *m)
{
	return ds_s3_is_url(packdir) ? ds__s3_manifest_read(packdir, m) : ds_manifest_read(packdir, m);
}
