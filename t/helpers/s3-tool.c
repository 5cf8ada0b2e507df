/* SPDX-License-Identifier: BSD-3-Clause */
/* s3-tool: the S3 operations the s3:// tests and benchmarks need, through
 * dstage's own client (s3/):
 *   s3-tool mb BUCKET
 *   s3-tool put FILE s3://BUCKET/KEY
 *   s3-tool put-tree DIR s3://BUCKET/PREFIX    every regular file, 16 in flight
 *   s3-tool get s3://BUCKET/KEY                 to stdout
 *   s3-tool ls s3://BUCKET/PREFIX               "KEY SIZE" lines
 *   s3-tool rm s3://BUCKET/PREFIX               every object under it
 *   s3-tool stats ...                           any of the above, then the counters
 * Exit 0 or 1 (the message from the client). */
#include "dscommon.h"
#include "dss3.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define INFLIGHT 16

static struct ds_s3 *s3;
static char *bucket, *prefix;
static size_t rootlen;
static struct ds_s3_get reqs[INFLIGHT];
static char *keys[INFLIGHT];
static char *bodies[INFLIGHT];
static int busy[INFLIGHT];
static int failed;

static void reap(int k)
{
	if (ds_s3_wait(s3, &reqs[k]))
		failed = 1;
	free(reqs[k].buf);
	free(keys[k]);
	free(bodies[k]);
	busy[k] = 0;
}

static int slot(void)
{
	for (int k = 0; k < INFLIGHT; k++)
		if (!busy[k])
			return k;
	reap(0);
	return 0;
}

static int put_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	if (type != FTW_F || !S_ISREG(st->st_mode))
		return 0;
	int fd = open(path, O_RDONLY);
	if (fd < 0) {
		perror(path);
		failed = 1;
		return 1;
	}
	char *b = ds_xmalloc((size_t)st->st_size + 1);
	if (st->st_size && ds_pread_full(fd, b, (size_t)st->st_size, 0)) {
		perror(path);
		failed = 1;
	}
	close(fd);
	int k = slot();
	const char *rel = path + rootlen;
	while (*rel == '/')
		rel++;
	if (asprintf(&keys[k], "%s%s%s", prefix, *prefix ? "/" : "", rel) < 0)
		exit(1);
	bodies[k] = b;
	reqs[k] = (struct ds_s3_get){.bucket = bucket, .key = keys[k], .method = "PUT", .body = b,
	                             .body_len = (size_t)st->st_size, .len = DS_S3_WHOLE,
	                             .expect = DS_S3_WHOLE};
	busy[k] = 1;
	ds_s3_start(s3, &reqs[k]);
	return failed;
}

static int usage(void)
{
	fputs("usage: s3-tool [stats] mb|put|put-tree|get|ls|rm ARGS\n", stderr);
	return 2;
}

int main(int argc, char **argv)
{
	int stats = 0;
	ds_log_set_cmd("s3-tool");
	ds_log_init(0);
	if (argc > 1 && !strcmp(argv[1], "stats")) {
		stats = 1;
		argv++;
		argc--;
	}
	if (argc < 3)
		return usage();
	const char *cmd = argv[1];
	const char *url = argc > 3 ? argv[3] : argv[2];
	if (!strcmp(cmd, "mb")) {
		bucket = ds_xstrdup(argv[2]);
		prefix = ds_xstrdup("");
	} else if (ds_s3_parse_url(url, &bucket, &prefix)) {
		return 2;
	}
	s3 = ds_s3_new();
	if (!s3)
		return 1;
	int rc = 0;
	if (!strcmp(cmd, "mb")) {
		rc = ds_s3_put_buf(s3, bucket, NULL, "", 0);
	} else if (!strcmp(cmd, "put") && argc == 4) {
		rc = ds_s3_put_file(s3, bucket, prefix, argv[2]);
	} else if (!strcmp(cmd, "put-tree") && argc == 4) {
		rootlen = strlen(argv[2]);
		nftw(argv[2], put_one, 32, FTW_PHYS);
		for (int k = 0; k < INFLIGHT; k++)
			if (busy[k])
				reap(k);
		rc = failed ? -EIO : 0;
	} else if (!strcmp(cmd, "get") && argc == 3) {
		char *b = NULL;
		uint64_t got = 0;
		rc = ds_s3_get_range(s3, bucket, prefix, 0, DS_S3_WHOLE, &b, &got, NULL);
		if (!rc && got && fwrite(b, 1, got, stdout) != got)
			rc = -EIO;
		free(b);
	} else if ((!strcmp(cmd, "ls") || !strcmp(cmd, "rm")) && argc == 3) {
		struct ds_s3_obj *o = NULL;
		size_t n = 0;
		/* PREFIX means PREFIX/..., never PREFIX2/... */
		size_t pl = strlen(prefix);
		rc = ds_s3_list(s3, bucket, prefix, &o, &n);
		for (size_t i = 0; !rc && i < n; i++) {
			if (pl && strcmp(o[i].key, prefix) && o[i].key[pl] != '/')
				continue;
			if (!strcmp(cmd, "ls"))
				printf("%s %llu\n", o[i].key, (unsigned long long)o[i].size);
			else
				rc = ds_s3_delete(s3, bucket, o[i].key);
		}
		if (!rc)
			ds_s3_objs_free(o, n);
	} else {
		return usage();
	}
	if (stats) {
		struct ds_s3_stats st;
		ds_s3_stats(s3, &st);
		fprintf(stderr, "s3-tool: requests %llu, bytes %llu, retries %llu\n",
		        (unsigned long long)st.requests, (unsigned long long)st.bytes,
		        (unsigned long long)st.retries);
	}
	ds_s3_free(s3);
	free(bucket);
	free(prefix);
	return rc ? 1 : 0;
}
