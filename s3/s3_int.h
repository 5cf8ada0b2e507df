/* SPDX-License-Identifier: BSD-3-Clause */
/* s3_int.h: internals shared by the .c files of s3/ (the module's face is
 * dss3.h).
 *   s3.c     configuration, the request engine, retries, listing, GETs
 *   s3put.c  PUT, multipart upload */
#ifndef DS_S3_INT_H
#define DS_S3_INT_H

#include "dscommon.h"
#include "dss3.h"

#include <curl/curl.h>

struct ds_s3 {
	char *ak, *sk, *token;   /* never printed */
	char *region, *endpoint; /* endpoint: no trailing '/' */
	int path_style;
	char sigv4[96];
	double retry_secs, backoff_max, timeout;
	double min_rate;          /* bytes/s: an attempt gets timeout + bytes / min_rate */
	int cleanup;              /* requests started now run after SIGINT/SIGTERM */
	int said_stop, said_late; /* "interrupted", "cleanup ran out of time": said once */
	double stop_at;           /* when the client first saw SIGINT/SIGTERM */
	CURLM *multi;
	struct ds_s3_get *active; /* started, not yet waited for */
	unsigned nactive;
	struct ds_s3_stats st;
	uint64_t rng;
};

/* Start g and wait for it. */
int ds__s3_run(struct ds_s3 *s3, struct ds_s3_get *g);
/* Percent-encode s (keeping '/' when keep_slash) onto b. */
void ds__s3_escape(struct ds_buf *b, const char *s, int keep_slash);

#endif
