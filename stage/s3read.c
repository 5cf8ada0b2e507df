/* SPDX-License-Identifier: BSD-3-Clause */
/* s3read.c: a partition's payload read from a bucket with ranged GETs,
 * several in flight (DSTAGE_S3_INFLIGHT, default 8, of `chunk` bytes each),
 * handed out in order to the stage loop (stage.c, move_partition), which
 * checks every file's CRC as the bytes land.  Each payload byte is fetched
 * once; a retried range is fetched again only when its first answer was cut
 * short or failed. */
#include "dscommon.h"
#include "dspack.h"
#include "dss3.h"
#include "stage_int.h"

#include <stdio.h>
#include <string.h>

struct ds__s3src {
	struct ds_s3 *s3;
	const char *bucket;
	char *key;
	uint64_t base, len, chunk;
	unsigned window;
	uint64_t nreq, next;      /* ranges in all; next to start */
	struct ds_s3_get *g;      /* [window] ring */
};

int ds__s3src_open(struct ds_s3 *s3, const char *bucket, const char *prefix, uint32_t part,
                   const struct ds_manifest *m, uint64_t chunk, struct ds__s3src **out,
                   uint64_t *meta_read)
{
	uint64_t off = 0, len = 0;
	int rc = ds_s3_part_locate(s3, bucket, prefix, part, m, &off, &len, meta_read);
	if (rc)
		return rc;
	struct ds__s3src *r = ds_xcalloc(1, sizeof(*r));
	char name[32];
	snprintf(name, sizeof(name), "part-%05u.h5", part);
	r->s3 = s3;
	r->bucket = bucket;
	r->key = ds_s3_pack_key(prefix, name);
	r->base = off;
	r->len = len;
	r->chunk = chunk;
	const char *v = getenv("DSTAGE_S3_INFLIGHT");
	uint64_t w;
	r->window = v && !ds_parse_u64(v, &w) && w >= 1 && w <= 64 ? (unsigned)w : 8;
	r->nreq = (len + chunk - 1) / chunk;
	r->g = ds_xcalloc(r->window, sizeof(*r->g));
	*out = r;
	return 0;
}

uint64_t ds__s3src_len(const struct ds__s3src *r)
{
	return r->len;
}

static void start_more(struct ds__s3src *r, uint64_t cur)
{
	while (r->next < r->nreq && r->next < cur + r->window) {
		uint64_t i = r->next++, off = i * r->chunk;
		uint64_t n = r->len - off < r->chunk ? r->len - off : r->chunk;
		struct ds_s3_get *g = &r->g[i % r->window];
		*g = (struct ds_s3_get){.bucket = r->bucket, .key = r->key, .off = r->base + off, .len = n,
		                        .expect = DS_S3_WHOLE};
		ds_s3_start(r->s3, g);
	}
}

/* Payload bytes [pos, pos+n): pos a multiple of chunk, n the chunk (or what
 * is left of the payload). */
int ds__s3src_read(struct ds__s3src *r, uint64_t pos, void *buf, size_t n)
{
	if (pos % r->chunk || pos >= r->len)
		return -EINVAL;
	uint64_t i = pos / r->chunk;
	if (i >= r->next) /* the caller skipped ahead: nothing here for it */
		r->next = i;
	start_more(r, i);
	struct ds_s3_get *g = &r->g[i % r->window];
	int rc = ds_s3_wait(r->s3, g);
	if (!rc && g->got != n)
		rc = -EIO;
	if (!rc)
		memcpy(buf, g->buf, n);
	ds_free(&g->buf);
	return rc;
}

void ds__s3src_close(struct ds__s3src *r)
{
	if (!r)
		return;
	ds_s3_cancel_all(r->s3);
	for (unsigned k = 0; k < r->window; k++)
		free(r->g[k].buf);
	free(r->g);
	free(r->key);
	free(r);
}
