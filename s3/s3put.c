/* SPDX-License-Identifier: BSD-3-Clause */
/* s3put.c: writing objects: one PUT, or a multipart upload (several parts
 * in flight, aborted on any failure so no upload is left behind). */
#include "s3_int.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PARTS_IN_FLIGHT 4
#define XML_REPLY_MAX (1u << 20) /* an UploadId or a completion: a few hundred bytes */

static uint64_t part_size(void)
{
	const char *v = getenv("DSTAGE_S3_PART_SIZE");
	uint64_t n;
	if (v && *v && !ds_parse_size(v, &n) && n >= (5u << 20))
		return n;
	return 64ull << 20;
}

int ds_s3_put_buf(struct ds_s3 *s3, const char *bucket, const char *key, const void *buf,
                  size_t len)
{
	struct ds_s3_get g = {.bucket = bucket, .key = key, .method = "PUT", .body = buf,
	                      .body_len = len, .len = DS_S3_WHOLE, .expect = DS_S3_WHOLE,
	                      .content_type = "application/octet-stream"};
	int rc = ds__s3_run(s3, &g);
	free(g.buf);
	return rc;
}

/* The text of <TAG> in a reply, escaped characters left as they are. */
static char *xml_field(const char *doc, size_t len, const char *tag)
{
	char open[64], close[64];
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	const char *s = memmem(doc, len, open, strlen(open));
	if (!s)
		return NULL;
	s += strlen(open);
	const char *e = memmem(s, len - (size_t)(s - doc), close, strlen(close));
	if (!e || e - s > 1024)
		return NULL;
	return strndup(s, (size_t)(e - s));
}

static int multipart(struct ds_s3 *s3, const char *bucket, const char *key, const char *data,
                     uint64_t size, uint64_t psize)
{
	char name[1200];
	ds_s3_name(bucket, key, name, sizeof(name));
	struct ds_s3_get init = {.bucket = bucket, .key = key, .method = "POST", .query = "uploads=",
	                         .len = DS_S3_WHOLE, .expect = DS_S3_WHOLE, .max_body = XML_REPLY_MAX,
	                         .content_type = "application/octet-stream"};
	int rc = ds__s3_run(s3, &init);
	char *id = rc ? NULL : xml_field(init.buf ? init.buf : "", init.got, "UploadId");
	free(init.buf);
	if (rc)
		return rc;
	if (!id) {
		ds_error("'%s': multipart upload: no UploadId in the reply", name);
		return -EPROTO;
	}
	struct ds_buf idq = {0};
	ds__s3_escape(&idq, id, 0);
	ds_buf_add(&idq, "", 1);
	uint64_t nparts = (size + psize - 1) / psize;
	if (nparts > 10000) {
		ds_error("'%s': %llu parts, more than S3's 10000 (raise DSTAGE_S3_PART_SIZE)", name,
		         (unsigned long long)nparts);
		rc = -EFBIG;
	}
	char (*etags)[80] = ds_xcalloc(nparts + 1, sizeof(*etags));
	char (*queries)[1200] = ds_xcalloc(PARTS_IN_FLIGHT, sizeof(*queries));
	struct ds_s3_get g[PARTS_IN_FLIGHT];
	uint64_t slot_part[PARTS_IN_FLIGHT];
	memset(g, 0, sizeof(g));
	uint64_t next = 0, done = 0;
	int busy[PARTS_IN_FLIGHT] = {0};
	while (!rc && done < nparts) {
		for (int k = 0; k < PARTS_IN_FLIGHT && next < nparts; k++) {
			if (busy[k])
				continue;
			uint64_t off = next * psize, n = size - off < psize ? size - off : psize;
			snprintf(queries[k], sizeof(queries[k]), "partNumber=%llu&uploadId=%s",
			         (unsigned long long)next + 1, idq.data);
			g[k] = (struct ds_s3_get){.bucket = bucket, .key = key, .method = "PUT",
			                          .query = queries[k], .body = data + off, .body_len = n,
			                          .len = DS_S3_WHOLE, .expect = DS_S3_WHOLE};
			slot_part[k] = next++;
			busy[k] = 1;
			ds_s3_start(s3, &g[k]);
		}
		/* wait for the oldest part in flight */
		int k0 = -1;
		for (int k = 0; k < PARTS_IN_FLIGHT; k++)
			if (busy[k] && (k0 < 0 || slot_part[k] < slot_part[k0]))
				k0 = k;
		rc = ds_s3_wait(s3, &g[k0]);
		busy[k0] = 0;
		free(g[k0].buf);
		if (!rc && !g[k0].resp_etag[0]) {
			ds_error("'%s': part %llu: no ETag in the reply", name,
			         (unsigned long long)slot_part[k0] + 1);
			rc = -EPROTO;
		}
		if (!rc)
			memcpy(etags[slot_part[k0]], g[k0].resp_etag, sizeof(etags[0]));
		done++;
	}
	for (int k = 0; k < PARTS_IN_FLIGHT; k++)
		if (busy[k]) {
			ds_s3_wait(s3, &g[k]);
			free(g[k].buf);
		}
	if (!rc) {
		struct ds_buf x = {0};
		const char *h = "<CompleteMultipartUpload>";
		ds_buf_add(&x, h, strlen(h));
		for (uint64_t i = 0; i < nparts; i++) {
			char part[200];
			int n = snprintf(part, sizeof(part), "<Part><PartNumber>%llu</PartNumber><ETag>%s</ETag></Part>",
			                 (unsigned long long)i + 1, etags[i]);
			ds_buf_add(&x, part, (size_t)n);
		}
		h = "</CompleteMultipartUpload>";
		ds_buf_add(&x, h, strlen(h));
		char q[1200];
		snprintf(q, sizeof(q), "uploadId=%s", idq.data);
		struct ds_s3_get c = {.bucket = bucket, .key = key, .method = "POST", .query = q,
		                      .body = x.data, .body_len = x.len, .len = DS_S3_WHOLE,
		                      .expect = DS_S3_WHOLE, .max_body = XML_REPLY_MAX,
		                      .content_type = "application/xml"};
		rc = ds__s3_run(s3, &c);
		/* S3 may answer 200 with an error document */
		if (!rc && c.buf && memmem(c.buf, c.got, "<Error>", 7)) {
			ds_error("'%s': completing the multipart upload failed", name);
			rc = -EIO;
		}
		free(c.buf);
		ds_buf_release(&x);
	}
	if (rc) {
		char q[1200];
		snprintf(q, sizeof(q), "uploadId=%s", idq.data);
		/* a cleanup request: it runs after SIGINT/SIGTERM too, so no
		 * upload's parts are left behind in the bucket */
		struct ds_s3_get a = {.bucket = bucket, .key = key, .method = "DELETE", .query = q,
		                      .len = DS_S3_WHOLE, .expect = DS_S3_WHOLE, .quiet_404 = 1,
		                      .cleanup = 1};
		(void)ds__s3_run(s3, &a);
		free(a.buf);
	}
	free(etags);
	free(queries);
	ds_buf_release(&idq);
	free(id);
	return rc;
}

int ds_s3_put_file(struct ds_s3 *s3, const char *bucket, const char *key, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		ds_error("'%s': %s", path, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	uint64_t size = (uint64_t)st.st_size, psize = part_size();
	const char *data = "";
	void *map = NULL;
	if (size) {
		map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
		if (map == MAP_FAILED) {
			int e = errno;
			ds_error("'%s': %s", path, strerror(e));
			close(fd);
			return -e;
		}
		data = map;
	}
	close(fd);
	int rc = size <= psize ? ds_s3_put_buf(s3, bucket, key, data, size)
	                       : multipart(s3, bucket, key, data, size, psize);
	if (map)
		munmap(map, size);
	return rc;
}
