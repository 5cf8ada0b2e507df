/* SPDX-License-Identifier: BSD-3-Clause */
/* dss3.h: object storage (S3 protocol) as a source and a sink of bytes for
 * pack, stage, verify, ls and cat.  The whole face of s3/.
 *
 * Built on libcurl: its SigV4 signing (CURLOPT_AWS_SIGV4), its connection
 * reuse and its multi interface (many requests in flight on one thread).
 * Configuration as the AWS tools have it:
 *   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
 *   AWS_REGION (or AWS_DEFAULT_REGION), AWS_ENDPOINT_URL (or
 *   AWS_ENDPOINT_URL_S3), AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE,
 *   AWS_CONFIG_FILE and the profiles of ~/.aws/credentials, ~/.aws/config.
 * With an endpoint (an on-site store) requests are path-style
 * (ENDPOINT/BUCKET/KEY); on AWS itself virtual-hosted.  A secret is never
 * printed, at any log level, and curl's own verbose output is never on.
 *
 * Faults: 5xx (503 SlowDown included), a refused or cut connection and a
 * short body are retried with capped exponential backoff and full jitter,
 * for at most DSTAGE_S3_RETRY_SECS (default 60) seconds per request; 403,
 * 404, a wrong region and the other 4xx fail at once with a message naming
 * s3://BUCKET/KEY and S3's error code.
 *
 * Bounds: every attempt of a request ends within DSTAGE_S3_TIMEOUT (30 s)
 * plus its bytes (sent and received, as far as known) over
 * DSTAGE_S3_MIN_RATE (64 KiB/s), counting only the time the client drives
 * it; past that it is cut and retried as a stalled one.  A listing whose
 * continuation token or keys repeat is refused (-EPROTO).  After SIGINT or
 * SIGTERM (ds_stop_signal, dscommon.h) every request fails at once with
 * -EINTR, except cleanup requests (ds_s3_cleanup, a multipart abort),
 * which get one attempt each, all within DSTAGE_S3_RETRY_SECS of it.
 *
 * Every function returns 0 or a negative errno and logs its own message
 * (ds_error) when it fails. */
#ifndef DSS3_H
#define DSS3_H

#include <stddef.h>
#include <stdint.h>

/* "s3://..."?  */
int ds_s3_is_url(const char *s);
/* Split s3://BUCKET[/PREFIX] into malloc'd bucket and prefix (no leading or
 * trailing '/', "" for the whole bucket).  -EINVAL (logged) when malformed. */
int ds_s3_parse_url(const char *url, char **bucket, char **prefix);

struct ds_s3;

/* A client from the environment and the ~/.aws files.  NULL (logged) when
 * there are no credentials or the configuration is unusable. */
struct ds_s3 *ds_s3_new(void);
void ds_s3_free(struct ds_s3 *s3);

/* What the client did so far. */
struct ds_s3_stats {
	uint64_t requests; /* HTTP requests sent, retries included */
	uint64_t bytes;    /* body bytes received (GET) or sent (PUT) */
	uint64_t retries;  /* requests sent again after a retryable failure */
};
void ds_s3_stats(const struct ds_s3 *s3, struct ds_s3_stats *st);

/* ---- listing ------------------------------------------------------------- */
struct ds_s3_obj {
	char *key;        /* the full key */
	uint64_t size;
	int64_t mtime_ns; /* LastModified */
	char etag[80];    /* as S3 gives it, quotes included */
};
/* Every object whose key starts with prefix (ListObjectsV2, all pages).
 * *objs is malloc'd, each key too; release with ds_s3_objs_free. */
int ds_s3_list(struct ds_s3 *s3, const char *bucket, const char *prefix, struct ds_s3_obj **objs,
               size_t *n);
void ds_s3_objs_free(struct ds_s3_obj *objs, size_t n);

/* ---- GETs, many in flight ----------------------------------------------- */
/* One GET: bytes [off, off+len) of an object, or all of it (len ==
 * DS_S3_WHOLE).  The caller owns the strings and keeps them alive until the
 * request is done. */
#define DS_S3_WHOLE UINT64_MAX
struct ds_s3_get {
	const char *bucket, *key;
	uint64_t off, len;
	const char *etag;  /* when set: the object's ETag must be this (else -ESTALE) */
	uint64_t expect;   /* whole objects: the size the listing gave */
	/* results */
	char *buf;         /* malloc'd body (caller frees; NULL for 0 bytes) */
	uint64_t got;      /* body bytes */
	uint64_t total;    /* object size (Content-Range or Content-Length) */
	int rc;            /* 0, or negative errno (logged) */
	/* private (s3.c) */
	const char *method; /* NULL: GET of the object; else GET/HEAD/PUT/POST/DELETE */
	const char *query;  /* canonical query string, keys sorted */
	const char *body;   /* PUT/POST body */
	size_t body_len, body_off;
	const char *content_type;
	const char *what;   /* key to name in messages, when key is NULL (listings) */
	int quiet_404;
	int cleanup;        /* undoing a failed step: runs after SIGINT/SIGTERM (no retries then) */
	uint64_t max_body;  /* when set: a longer answer is refused (listings, XML replies) */
	char region_hdr[64];
	int state;
	unsigned attempt;
	double due, deadline;
	double busy;        /* seconds this attempt has been driven (ds_s3_wait) */
	long http;
	void *easy;
	void *hdrs;
	char resp_etag[80];
	char s3code[64];
	size_t cap;
	struct ds_s3_get *next;
};
/* Start a request (it runs while ds_s3_wait is called). */
void ds_s3_start(struct ds_s3 *s3, struct ds_s3_get *g);
/* Drive every request in flight until g is done; returns g->rc. */
int ds_s3_wait(struct ds_s3 *s3, struct ds_s3_get *g);
/* From now on (on != 0) requests are cleanup: they remove what a failed or
 * interrupted step wrote, so they run after SIGINT/SIGTERM too (one
 * attempt each, bounded as any). */
void ds_s3_cleanup(struct ds_s3 *s3, int on);
/* Abandon every request in flight (after a failure). */
void ds_s3_cancel_all(struct ds_s3 *s3);
/* One blocking GET into a malloc'd buffer (*buf, *len). */
int ds_s3_get_range(struct ds_s3 *s3, const char *bucket, const char *key, uint64_t off,
                    uint64_t len, char **buf, uint64_t *got, uint64_t *total);

/* ---- writing ------------------------------------------------------------ */
/* Upload the file at path as bucket/key: one PUT below the multipart
 * threshold (DSTAGE_S3_PART_SIZE, default 64 MiB), else a multipart upload
 * with several parts in flight, aborted on failure. */
int ds_s3_put_file(struct ds_s3 *s3, const char *bucket, const char *key, const char *path);
int ds_s3_put_buf(struct ds_s3 *s3, const char *bucket, const char *key, const void *buf,
                  size_t len);
int ds_s3_delete(struct ds_s3 *s3, const char *bucket, const char *key);

/* "s3://bucket/key" into buf, for messages. */
const char *ds_s3_name(const char *bucket, const char *key, char *buf, size_t cap);

#endif
