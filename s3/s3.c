/* SPDX-License-Identifier: BSD-3-Clause */
/* s3.c: the S3 client: configuration, the request engine on libcurl's multi
 * interface (many requests in flight on one thread, connections reused),
 * retries, listing, GETs.  Uploads are in s3put.c.
 *
 * One request is a struct ds_s3_get (GET, HEAD, PUT, POST or DELETE).  It
 * is attached to curl when started; when curl says it is done, finish()
 * decides: success, a retry after a backoff (5xx, a cut connection, a short
 * body), or a failure with a message.  A request waiting for its backoff is
 * launched again by the next ds_s3_wait call that finds it due.
 *
 * Nothing waits forever (docs/s3.md, Faults): curl cuts a connection that
 * does not open or carries no byte for `timeout` seconds; ds_s3_wait cuts
 * an attempt that has been driven longer than timeout + bytes / min_rate
 * (a body that trickles), and ends every request with -EINTR once SIGINT or
 * SIGTERM came (ds_stop_signal), cleanup requests excepted. */
#include "s3_int.h"

#include <ctype.h>
#include <expat.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { ST_IDLE = 0, ST_RUNNING, ST_BACKOFF, ST_DONE };

#define ERR_BODY_MAX (64u << 10) /* error documents kept for their <Code> */
/* A page of 1000 keys of at most 1024 bytes each is about 1.5 MB */
#define LIST_BODY_MAX (16u << 20)

/* ---- URLs ----------------------------------------------------------------- */
int ds_s3_is_url(const char *s)
{
	return s && !strncmp(s, "s3://", 5);
}

int ds_s3_parse_url(const char *url, char **bucket, char **prefix)
{
	*bucket = *prefix = NULL;
	if (!ds_s3_is_url(url)) {
		ds_error("'%s': not an s3:// URL", url);
		return -EINVAL;
	}
	const char *b = url + 5, *slash = strchr(b, '/');
	size_t blen = slash ? (size_t)(slash - b) : strlen(b);
	if (blen < 3 || blen > 63) {
		ds_error("'%s': bucket names have 3 to 63 characters", url);
		return -EINVAL;
	}
	for (size_t i = 0; i < blen; i++)
		if (!(islower((unsigned char)b[i]) || isdigit((unsigned char)b[i]) || b[i] == '-' ||
		      b[i] == '.' || b[i] == '_')) {
			ds_error("'%s': not a valid bucket name", url);
			return -EINVAL;
		}
	const char *p = slash ? slash + 1 : "";
	while (*p == '/')
		p++;
	size_t plen = strlen(p);
	while (plen && p[plen - 1] == '/')
		plen--;
	*bucket = strndup(b, blen);
	*prefix = strndup(p, plen);
	if (!*bucket || !*prefix) {
		ds_free(bucket);
		ds_free(prefix);
		return -ENOMEM;
	}
	return 0;
}

const char *ds_s3_name(const char *bucket, const char *key, char *buf, size_t cap)
{
	snprintf(buf, cap, "s3://%s%s%s", bucket, key && *key ? "/" : "", key ? key : "");
	return buf;
}

/* ---- configuration ---------------------------------------------------------- */
static char *env_dup(const char *name)
{
	const char *v = getenv(name);
	return v && *v ? ds_xstrdup(v) : NULL;
}

static char *trim(char *s)
{
	while (isspace((unsigned char)*s))
		s++;
	size_t n = strlen(s);
	while (n && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
	return s;
}

/* Value of `key` in section `section` of an ini file (the AWS files), or
 * NULL.  A missing file is no error. */
static char *ini_get(const char *path, const char *section, const char *key)
{
	FILE *f = path ? fopen(path, "re") : NULL;
	if (!f)
		return NULL;
	char line[4096], *val = NULL;
	int in = 0;
	while (!val && fgets(line, sizeof(line), f)) {
		char *s = trim(line);
		if (*s == '#' || *s == ';' || !*s)
			continue;
		if (*s == '[') {
			char *e = strchr(s, ']');
			if (e)
				*e = '\0';
			in = !strcmp(trim(s + 1), section);
			continue;
		}
		char *eq = strchr(s, '=');
		if (!in || !eq)
			continue;
		*eq = '\0';
		if (!strcmp(trim(s), key))
			val = ds_xstrdup(trim(eq + 1));
	}
	fclose(f);
	return val;
}

static char *home_file(const char *env, const char *name)
{
	const char *v = getenv(env);
	if (v && *v)
		return ds_xstrdup(v);
	const char *home = getenv("HOME");
	if (!home || !*home)
		return NULL;
	char *p;
	if (asprintf(&p, "%s/.aws/%s", home, name) < 0)
		return NULL;
	return p;
}

static double env_double(const char *name, double def)
{
	const char *v = getenv(name);
	double d;
	return v && *v && !ds_parse_double(v, &d) && d >= 0 ? d : def;
}

/* A rate in bytes/s ("64KiB", "1MiB", "4096"); at least 1. */
static double env_rate(const char *name, double def)
{
	const char *v = getenv(name);
	uint64_t n;
	return v && *v && !ds_parse_size(v, &n) && n >= 1 ? (double)n : def;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
	curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct ds_s3 *ds_s3_new(void)
{
	pthread_once(&curl_once, curl_init_once);
	struct ds_s3 *s3 = ds_xcalloc(1, sizeof(*s3));
	const char *profile = getenv("AWS_PROFILE");
	if (!profile || !*profile)
		profile = "default";
	char *cred = home_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
	char *conf = home_file("AWS_CONFIG_FILE", "config");
	char csec[300];
	if (!strcmp(profile, "default"))
		snprintf(csec, sizeof(csec), "default");
	else
		snprintf(csec, sizeof(csec), "profile %s", profile);

	/* environment first, then the profile (credentials file, then config) */
	s3->ak = env_dup("AWS_ACCESS_KEY_ID");
	s3->sk = env_dup("AWS_SECRET_ACCESS_KEY");
	s3->token = env_dup("AWS_SESSION_TOKEN");
	if (!s3->ak || !s3->sk) {
		ds_free(&s3->ak);
		ds_free(&s3->sk);
		ds_free(&s3->token);
		s3->ak = ini_get(cred, profile, "aws_access_key_id");
		s3->sk = ini_get(cred, profile, "aws_secret_access_key");
		s3->token = ini_get(cred, profile, "aws_session_token");
		if (!s3->ak || !s3->sk) {
			ds_free(&s3->ak);
			ds_free(&s3->sk);
			ds_free(&s3->token);
			s3->ak = ini_get(conf, csec, "aws_access_key_id");
			s3->sk = ini_get(conf, csec, "aws_secret_access_key");
			s3->token = ini_get(conf, csec, "aws_session_token");
		}
	}
	s3->region = env_dup("AWS_REGION");
	if (!s3->region)
		s3->region = env_dup("AWS_DEFAULT_REGION");
	if (!s3->region)
		s3->region = ini_get(conf, csec, "region");
	if (!s3->region)
		s3->region = ds_xstrdup("us-east-1");
	s3->endpoint = env_dup("AWS_ENDPOINT_URL_S3");
	if (!s3->endpoint)
		s3->endpoint = env_dup("AWS_ENDPOINT_URL");
	if (!s3->endpoint)
		s3->endpoint = ini_get(conf, csec, "endpoint_url");
	free(cred);
	free(conf);
	if (!s3->ak || !s3->sk) {
		ds_error("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
		         "AWS_PROFILE and ~/.aws/credentials (profile '%s' has none)", profile);
		ds_s3_free(s3);
		return NULL;
	}
	for (const char *c = s3->region; *c; c++)
		if (!(isalnum((unsigned char)*c) || *c == '-')) {
			ds_error("'%s': not a valid AWS_REGION", s3->region);
			ds_s3_free(s3);
			return NULL;
		}
	if (s3->endpoint) {
		size_t n = strlen(s3->endpoint);
		while (n && s3->endpoint[n - 1] == '/')
			s3->endpoint[--n] = '\0';
		if (strncmp(s3->endpoint, "http://", 7) && strncmp(s3->endpoint, "https://", 8)) {
			ds_error("'%s': AWS_ENDPOINT_URL must start with http:// or https://", s3->endpoint);
			ds_s3_free(s3);
			return NULL;
		}
		s3->path_style = 1;
	}
	const char *style = getenv("DSTAGE_S3_ADDRESSING");
	if (style && !strcmp(style, "path"))
		s3->path_style = 1;
	else if (style && !strcmp(style, "virtual"))
		s3->path_style = 0;
	snprintf(s3->sigv4, sizeof(s3->sigv4), "aws:amz:%s:s3", s3->region);
	s3->retry_secs = env_double("DSTAGE_S3_RETRY_SECS", 60);
	s3->backoff_max = env_double("DSTAGE_S3_BACKOFF_MAX", 5);
	s3->timeout = env_double("DSTAGE_S3_TIMEOUT", 30);
	s3->min_rate = env_rate("DSTAGE_S3_MIN_RATE", 64 << 10);
	s3->multi = curl_multi_init();
	if (!s3->multi) {
		ds_error("cannot start libcurl");
		ds_s3_free(s3);
		return NULL;
	}
	curl_multi_setopt(s3->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 32L);
	s3->rng = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(uintptr_t)s3;
	ds_debug("s3: region %s, endpoint %s, %s-style, credentials from %s", s3->region,
	         s3->endpoint ? s3->endpoint : "AWS", s3->path_style ? "path" : "virtual-hosted",
	         getenv("AWS_ACCESS_KEY_ID") ? "the environment" : "the profile");
	return s3;
}

static void wipe(char **p)
{
	if (*p)
		memset(*p, 0, strlen(*p));
	ds_free(p);
}

void ds_s3_free(struct ds_s3 *s3)
{
	if (!s3)
		return;
	ds_s3_cancel_all(s3);
	if (s3->multi)
		curl_multi_cleanup(s3->multi);
	wipe(&s3->ak);
	wipe(&s3->sk);
	wipe(&s3->token);
	free(s3->region);
	free(s3->endpoint);
	free(s3);
}

void ds_s3_stats(const struct ds_s3 *s3, struct ds_s3_stats *st)
{
	*st = s3->st;
}

/* ---- request URLs ------------------------------------------------------------ */
/* Percent-encode a key for the path: everything but unreserved and '/'. */
void ds__s3_escape(struct ds_buf *b, const char *s, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
			ds_buf_add(b, s, 1);
		} else {
			char e[3] = {'%', hex[c >> 4], hex[c & 15]};
			ds_buf_add(b, e, 3);
		}
	}
}

static char *make_url(const struct ds_s3 *s3, const char *bucket, const char *key, const char *query)
{
	struct ds_buf b = {0};
	if (s3->path_style) {
		const char *ep = s3->endpoint ? s3->endpoint : NULL;
		char def[128];
		if (!ep) {
			snprintf(def, sizeof(def), "https://s3.%s.amazonaws.com", s3->region);
			ep = def;
		}
		ds_buf_add(&b, ep, strlen(ep));
		ds_buf_add(&b, "/", 1);
		ds_buf_add(&b, bucket, strlen(bucket));
	} else if (s3->endpoint) {
		/* virtual-hosted on an endpoint: BUCKET.HOST */
		const char *host = strstr(s3->endpoint, "://") + 3;
		ds_buf_add(&b, s3->endpoint, (size_t)(host - s3->endpoint));
		ds_buf_add(&b, bucket, strlen(bucket));
		ds_buf_add(&b, ".", 1);
		ds_buf_add(&b, host, strlen(host));
	} else {
		char h[256];
		snprintf(h, sizeof(h), "https://%s.s3.%s.amazonaws.com", bucket, s3->region);
		ds_buf_add(&b, h, strlen(h));
	}
	ds_buf_add(&b, "/", 1);
	if (key)
		ds__s3_escape(&b, key, 1);
	if (query && *query) {
		ds_buf_add(&b, "?", 1);
		ds_buf_add(&b, query, strlen(query));
	}
	ds_buf_add(&b, "", 1);
	return b.data;
}

/* ---- the engine ----------------------------------------------------------------- */
static uint64_t rnd(struct ds_s3 *s3)
{
	/* xorshift64*: jitter only, no cryptography */
	uint64_t x = s3->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	s3->rng = x;
	return x * 0x2545F4914F6CDD1Dull;
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx)
{
	struct ds_s3_get *g = ctx;
	size_t n = sz * nm;
	int ok = g->http >= 200 && g->http < 300;
	if (!ok) {
		/* an error document: keep its start for <Code> */
		if (g->got >= ERR_BODY_MAX)
			return n;
		if (n > ERR_BODY_MAX - g->got)
			n = ERR_BODY_MAX - (size_t)g->got;
	} else if (g->len != DS_S3_WHOLE && g->got + n > g->len) {
		g->rc = -DS_ECORRUPT; /* more than asked for */
		return 0;
	} else if (g->max_body && g->got + n > g->max_body) {
		g->rc = -EFBIG; /* a listing or an XML reply never this long */
		return 0;
	}
	if (g->got + n + 1 > g->cap) {
		size_t cap = g->cap ? g->cap : 64 << 10;
		while (cap < g->got + n + 1)
			cap *= 2;
		g->buf = ds_xrealloc(g->buf, cap);
		g->cap = cap;
	}
	memcpy(g->buf + g->got, p, n);
	g->got += n;
	return sz * nm;
}

static size_t on_header(char *p, size_t sz, size_t nm, void *ctx)
{
	struct ds_s3_get *g = ctx;
	size_t n = sz * nm;
	char line[512];
	size_t l = n < sizeof(line) - 1 ? n : sizeof(line) - 1;
	memcpy(line, p, l);
	line[l] = '\0';
	while (l && (line[l - 1] == '\n' || line[l - 1] == '\r'))
		line[--l] = '\0';
	if (!strncmp(line, "HTTP/", 5)) {
		const char *sp = strchr(line, ' ');
		g->http = sp ? strtol(sp + 1, NULL, 10) : 0;
		g->resp_etag[0] = '\0';
		g->region_hdr[0] = '\0';
		g->total = 0;
		return n;
	}
	char *colon = strchr(line, ':');
	if (!colon)
		return n;
	*colon = '\0';
	char *v = trim(colon + 1);
	if (!strcasecmp(line, "etag")) {
		snprintf(g->resp_etag, sizeof(g->resp_etag), "%s", v);
	} else if (!strcasecmp(line, "content-range")) {
		const char *slash = strchr(v, '/');
		if (slash && slash[1] != '*')
			g->total = strtoull(slash + 1, NULL, 10);
	} else if (!strcasecmp(line, "content-length")) {
		if (g->len == DS_S3_WHOLE || g->method)
			g->total = strtoull(v, NULL, 10);
	} else if (!strcasecmp(line, "x-amz-bucket-region")) {
		snprintf(g->region_hdr, sizeof(g->region_hdr), "%s", v);
	}
	return n;
}

static size_t on_upload(char *p, size_t sz, size_t nm, void *ctx)
{
	struct ds_s3_get *g = ctx;
	size_t n = sz * nm, left = g->body_len - g->body_off;
	if (n > left)
		n = left;
	memcpy(p, g->body + g->body_off, n);
	g->body_off += n;
	return n;
}

static void launch(struct ds_s3 *s3, struct ds_s3_get *g)
{
	CURL *e = curl_easy_init();
	if (!e) {
		g->rc = -ENOMEM;
		g->state = ST_DONE;
		return;
	}
	char *url = make_url(s3, g->bucket, g->key, g->query);
	struct curl_slist *h = NULL;
	h = curl_slist_append(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (s3->token) {
		char *t;
		if (asprintf(&t, "x-amz-security-token: %s", s3->token) >= 0) {
			h = curl_slist_append(h, t);
			memset(t, 0, strlen(t));
			free(t);
		}
	}
	if (!g->method && g->len != DS_S3_WHOLE) {
		char r[96];
		snprintf(r, sizeof(r), "Range: bytes=%llu-%llu", (unsigned long long)g->off,
		         (unsigned long long)(g->off + g->len - 1));
		h = curl_slist_append(h, r);
	}
	if (g->content_type) {
		char r[128];
		snprintf(r, sizeof(r), "Content-Type: %s", g->content_type);
		h = curl_slist_append(h, r);
	}
	h = curl_slist_append(h, "Expect:");
	curl_easy_setopt(e, CURLOPT_URL, url);
	free(url);
	curl_easy_setopt(e, CURLOPT_AWS_SIGV4, s3->sigv4);
	curl_easy_setopt(e, CURLOPT_USERNAME, s3->ak);
	curl_easy_setopt(e, CURLOPT_PASSWORD, s3->sk);
	curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(e, CURLOPT_WRITEDATA, g);
	curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(e, CURLOPT_HEADERDATA, g);
	curl_easy_setopt(e, CURLOPT_PRIVATE, g);
	curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(s3->timeout * 1000));
	/* a stalled transfer (no byte for `timeout` seconds) is cut and retried */
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)(s3->timeout > 1 ? s3->timeout : 1));
	curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
	/* keys go as they are: no "/../" squashing by curl */
	curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(e, CURLOPT_VERBOSE, 0L);
	if (g->method && !strcmp(g->method, "HEAD")) {
		curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
	} else if (g->method && !strcmp(g->method, "PUT")) {
		g->body_off = 0;
		curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(e, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(e, CURLOPT_READDATA, g);
		curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)g->body_len);
	} else if (g->method && !strcmp(g->method, "POST")) {
		curl_easy_setopt(e, CURLOPT_POST, 1L);
		curl_easy_setopt(e, CURLOPT_POSTFIELDS, g->body ? g->body : "");
		curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)g->body_len);
	} else if (g->method) {
		curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, g->method);
	}
	g->got = 0;
	g->busy = 0;
	g->http = 0;
	g->total = 0;
	g->resp_etag[0] = '\0';
	g->s3code[0] = '\0';
	g->rc = 0;
	g->easy = e;
	g->hdrs = h;
	g->state = ST_RUNNING;
	s3->st.requests++;
	CURLMcode mc = curl_multi_add_handle(s3->multi, e);
	if (mc != CURLM_OK) {
		ds_error("libcurl: %s", curl_multi_strerror(mc));
		g->rc = -EIO;
		g->state = ST_DONE;
	}
}

static void detach(struct ds_s3 *s3, struct ds_s3_get *g)
{
	if (g->easy) {
		curl_multi_remove_handle(s3->multi, g->easy);
		curl_easy_cleanup(g->easy);
		g->easy = NULL;
	}
	if (g->hdrs) {
		curl_slist_free_all(g->hdrs);
		g->hdrs = NULL;
	}
}

static void unlink_req(struct ds_s3 *s3, struct ds_s3_get *g)
{
	for (struct ds_s3_get **pp = &s3->active; *pp; pp = &(*pp)->next)
		if (*pp == g) {
			*pp = g->next;
			s3->nactive--;
			break;
		}
	g->next = NULL;
}

static int fail_msg(struct ds_s3 *s3, struct ds_s3_get *g, const char *why, int rc);

/* After SIGINT/SIGTERM: g ends with -EINTR (ds_s3_wait says so once per
 * client, naming the request waited for). */
static void interrupted(struct ds_s3 *s3, struct ds_s3_get *g)
{
	detach(s3, g);
	g->state = ST_DONE;
	g->rc = -EINTR;
}

/* Asked to stop, and g may not run on: not cleanup, or cleanup past the
 * DSTAGE_S3_RETRY_SECS it gets after the signal (a dead store must not turn
 * the deletion of many partitions into hours). */
static int must_stop(struct ds_s3 *s3, const struct ds_s3_get *g)
{
	if (!ds_stop_signal())
		return 0;
	double now = ds_now();
	if (!s3->stop_at)
		s3->stop_at = now;
	return !g->cleanup || now > s3->stop_at + s3->retry_secs;
}

void ds_s3_start(struct ds_s3 *s3, struct ds_s3_get *g)
{
	double now = ds_now();
	g->attempt = 0;
	g->deadline = now + s3->retry_secs;
	g->due = now;
	g->rc = 0;
	g->cleanup |= s3->cleanup;
	g->next = s3->active;
	s3->active = g;
	s3->nactive++;
	if (must_stop(s3, g))
		interrupted(s3, g);
	else
		launch(s3, g);
}

void ds_s3_cleanup(struct ds_s3 *s3, int on)
{
	s3->cleanup = on;
}

/* The <Code> of an S3 error document. */
static void error_code(struct ds_s3_get *g)
{
	if (!g->buf || !g->got)
		return;
	g->buf[g->got] = '\0';
	const char *c = strstr(g->buf, "<Code>"), *e = c ? strstr(c, "</Code>") : NULL;
	if (!c || !e)
		return;
	c += 6;
	size_t n = (size_t)(e - c) < sizeof(g->s3code) - 1 ? (size_t)(e - c) : sizeof(g->s3code) - 1;
	for (size_t i = 0; i < n; i++)
		g->s3code[i] = isalnum((unsigned char)c[i]) ? c[i] : '?';
	g->s3code[n] = '\0';
}

/* Log why g failed for good; returns the errno to report. */
static int fail_msg(struct ds_s3 *s3, struct ds_s3_get *g, const char *why, int rc)
{
	char name[1200];
	ds_s3_name(g->bucket, g->key ? g->key : g->what, name, sizeof(name));
	if (!g->quiet_404 || rc != -ENOENT)
		ds_error("'%s': %s", name, why);
	(void)s3;
	return rc;
}

static int http_fail(struct ds_s3 *s3, struct ds_s3_get *g)
{
	char why[512];
	const char *code = g->s3code[0] ? g->s3code : "no S3 error code";
	long st = g->http;
	if (!strcmp(code, "NoSuchBucket")) {
		char name[300];
		ds_error("'%s': no such bucket", ds_s3_name(g->bucket, NULL, name, sizeof(name)));
		return -ENOENT;
	}
	if (st == 404) {
		snprintf(why, sizeof(why), "no such key (404 %s)", code);
		return fail_msg(s3, g, why, -ENOENT);
	}
	if (st == 301 || !strcmp(code, "AuthorizationHeaderMalformed") ||
	    !strcmp(code, "PermanentRedirect") || !strcmp(code, "IllegalLocationConstraintException")) {
		snprintf(why, sizeof(why), "wrong region: AWS_REGION is '%s'%s%s%s (%ld %s)", s3->region,
		         g->region_hdr[0] ? ", the bucket is in '" : "", g->region_hdr,
		         g->region_hdr[0] ? "'" : "", st, code);
		return fail_msg(s3, g, why, -EINVAL);
	}
	if (st == 403) {
		snprintf(why, sizeof(why), "access denied (403 %s): check the credentials%s", code,
		         !strcmp(code, "SignatureDoesNotMatch") ? " (secret key)"
		         : !strcmp(code, "InvalidAccessKeyId") ? " (access key id)" : "");
		return fail_msg(s3, g, why, -EACCES);
	}
	if (st == 416) {
		snprintf(why, sizeof(why), "range outside the object (416 %s): changed or truncated", code);
		return fail_msg(s3, g, why, -ESTALE);
	}
	snprintf(why, sizeof(why), "HTTP %ld %s", st, code);
	return fail_msg(s3, g, why, -EIO);
}

/* Schedule g again after a backoff, or give up (returns 1 when retried). */
static int retry(struct ds_s3 *s3, struct ds_s3_get *g, const char *why)
{
	double now = ds_now();
	/* capped exponential backoff, "equal jitter": half fixed, half random */
	double d = 0.05 * (double)(1u << (g->attempt < 16 ? g->attempt : 16));
	if (d > s3->backoff_max)
		d = s3->backoff_max;
	d = d / 2 + (d / 2) * (double)(rnd(s3) >> 11) / (double)(1ull << 53);
	g->attempt++;
	if (must_stop(s3, g)) {
		interrupted(s3, g);
		return 0;
	}
	if (now + d > g->deadline || g->attempt > 30 || ds_stop_signal()) {
		char msg[400];
		snprintf(msg, sizeof(msg), "%s; gave up after %u attempts in %.0f s", why, g->attempt,
		         s3->retry_secs);
		g->rc = fail_msg(s3, g, msg, -EIO);
		return 0;
	}
	char name[1200];
	ds_debug("'%s': %s; retry %u in %.2f s", ds_s3_name(g->bucket, g->key, name, sizeof(name)), why,
	         g->attempt, d);
	s3->st.retries++;
	g->due = now + d;
	g->state = ST_BACKOFF;
	return 1;
}

static int retryable_curl(CURLcode c)
{
	switch (c) {
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_PARTIAL_FILE:
	case CURLE_RECV_ERROR:
	case CURLE_SEND_ERROR:
	case CURLE_GOT_NOTHING:
	case CURLE_OPERATION_TIMEDOUT:
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_HTTP2:
	case CURLE_HTTP2_STREAM:
		return 1;
	default:
		return 0;
	}
}

static void finish(struct ds_s3 *s3, struct ds_s3_get *g, CURLcode cc)
{
	long st = 0;
	curl_easy_getinfo(g->easy, CURLINFO_RESPONSE_CODE, &st);
	if (st)
		g->http = st;
	detach(s3, g);
	g->state = ST_DONE;
	if (!g->method && g->http >= 200 && g->http < 300)
		s3->st.bytes += g->got; /* what came, retried answers included */
	if (cc == CURLE_WRITE_ERROR && g->rc == -EFBIG) {
		char why[96];
		snprintf(why, sizeof(why), "answer longer than %llu bytes: not S3",
		         (unsigned long long)g->max_body);
		g->rc = fail_msg(s3, g, why, -EPROTO);
		return;
	}
	if (cc == CURLE_WRITE_ERROR && g->rc == -DS_ECORRUPT) {
		g->rc = 0;
		if (retry(s3, g, "server sent more bytes than asked for"))
			return;
		return;
	}
	if (cc != CURLE_OK) {
		char why[300];
		snprintf(why, sizeof(why), "%s", curl_easy_strerror(cc));
		if (retryable_curl(cc)) {
			retry(s3, g, why);
			return;
		}
		g->rc = fail_msg(s3, g, why, -EIO);
		return;
	}
	if (g->http >= 500 || g->http == 429) {
		error_code(g);
		char why[200];
		snprintf(why, sizeof(why), "HTTP %ld %s", g->http, g->s3code[0] ? g->s3code : "");
		retry(s3, g, why);
		return;
	}
	if (g->http < 200 || g->http >= 300) {
		error_code(g);
		g->rc = http_fail(s3, g);
		return;
	}
	if (g->method) {
		if (!strcmp(g->method, "PUT"))
			s3->st.bytes += g->body_len;
		return;
	}
	if (g->etag && g->resp_etag[0] && strcmp(g->etag, g->resp_etag)) {
		g->rc = fail_msg(s3, g, "changed since it was listed (ETag differs)", -ESTALE);
		return;
	}
	if (g->len == DS_S3_WHOLE) {
		if (g->total && g->got != g->total) {
			retry(s3, g, "short body");
			return;
		}
		if (g->expect != DS_S3_WHOLE && g->got != g->expect) {
			/* same ETag (checked above), other size: a truncated answer */
			if (g->etag && g->resp_etag[0]) {
				retry(s3, g, "short body");
				return;
			}
			g->rc = fail_msg(s3, g, "changed since it was listed (size differs)", -ESTALE);
			return;
		}
		g->total = g->got;
		return;
	}
	/* a range: all of it, or the object's end */
	uint64_t want = g->len;
	if (g->total && g->off < g->total && g->total - g->off < want)
		want = g->total - g->off;
	if (g->http != 206 && !(g->http == 200 && g->off == 0 && g->got == g->total)) {
		g->rc = fail_msg(s3, g, "the server ignored the Range header", -EIO);
		return;
	}
	if (g->got != want) {
		retry(s3, g, "short body");
		return;
	}
}

static void drain_messages(struct ds_s3 *s3)
{
	CURLMsg *msg;
	int left;
	while ((msg = curl_multi_info_read(s3->multi, &left)))
		if (msg->msg == CURLMSG_DONE) {
			struct ds_s3_get *g = NULL;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&g);
			if (g)
				finish(s3, g, msg->data.result);
		}
}

/* The bytes an attempt moves, as far as known: what it asked for (a
 * range), what the answer says (Content-Length, capped by max_body) or what
 * came so far; and its upload. */
static uint64_t attempt_bytes(const struct ds_s3_get *g)
{
	uint64_t n = g->got;
	if (g->method && !strcmp(g->method, "HEAD"))
		return 0; /* its Content-Length is the object's, never sent */
	if (!g->method && g->len != DS_S3_WHOLE) {
		if (g->len > n)
			n = g->len;
	} else if (g->total > n) {
		n = g->max_body && g->total > g->max_body ? g->max_body : g->total;
	}
	return n + g->body_len;
}

/* Every running attempt was driven dt seconds more: cut those that had
 * timeout + bytes / min_rate (a trickle, a server that never ends); they
 * are retried as a stalled transfer is.  After SIGINT/SIGTERM, end all but
 * the cleanup requests. */
static void police(struct ds_s3 *s3, double dt)
{
	for (struct ds_s3_get *r = s3->active; r; r = r->next) {
		if (r->state == ST_DONE)
			continue;
		if (must_stop(s3, r)) {
			interrupted(s3, r);
			continue;
		}
		if (r->state != ST_RUNNING)
			continue;
		r->busy += dt;
		uint64_t bytes = attempt_bytes(r);
		double limit = s3->timeout + (double)bytes / s3->min_rate;
		if (r->busy <= limit)
			continue;
		char why[200], a[32], b[32], c[32];
		snprintf(why, sizeof(why), "too slow: %s of %s in %.0f s (DSTAGE_S3_MIN_RATE %s/s)",
		         ds_fmt_size(r->got + r->body_off, a, sizeof(a)), ds_fmt_size(bytes, b, sizeof(b)),
		         r->busy, ds_fmt_size((uint64_t)s3->min_rate, c, sizeof(c)));
		detach(s3, r);
		r->state = ST_DONE;
		retry(s3, r, why);
	}
}

int ds_s3_wait(struct ds_s3 *s3, struct ds_s3_get *g)
{
	double prev = ds_now();
	while (g->state != ST_DONE) {
		double now = ds_now(), next = now + 1;
		/* only the time spent here counts: a caller busy elsewhere (the
		 * pack writer compressing) does not make a transfer slow */
		police(s3, now - prev);
		prev = now;
		if (g->state == ST_DONE)
			break;
		for (struct ds_s3_get *r = s3->active; r; r = r->next)
			if (r->state == ST_BACKOFF) {
				if (r->due <= now)
					launch(s3, r);
				else if (r->due < next)
					next = r->due;
			}
		int running = 0;
		curl_multi_perform(s3->multi, &running);
		drain_messages(s3);
		if (g->state == ST_DONE)
			break;
		int ms = (int)((next - ds_now()) * 1000);
		if (ms < 0)
			ms = 0;
		if (ms > 1000)
			ms = 1000;
		curl_multi_poll(s3->multi, NULL, 0, ms, NULL);
	}
	unlink_req(s3, g);
	int *said = g->cleanup ? &s3->said_late : &s3->said_stop;
	if (g->rc == -EINTR && !*said) {
		*said = 1;
		fail_msg(s3, g, g->cleanup ? "cleanup after the signal ran out of time "
		                             "(DSTAGE_S3_RETRY_SECS): left in the bucket"
		                           : ds_stop_why(), -EINTR);
	}
	return g->rc;
}

void ds_s3_cancel_all(struct ds_s3 *s3)
{
	while (s3->active) {
		struct ds_s3_get *g = s3->active;
		detach(s3, g);
		g->state = ST_DONE;
		if (!g->rc)
			g->rc = -ECANCELED;
		unlink_req(s3, g);
	}
}

int ds__s3_run(struct ds_s3 *s3, struct ds_s3_get *g)
{
	ds_s3_start(s3, g);
	return ds_s3_wait(s3, g);
}

int ds_s3_get_range(struct ds_s3 *s3, const char *bucket, const char *key, uint64_t off,
                    uint64_t len, char **buf, uint64_t *got, uint64_t *total)
{
	struct ds_s3_get g = {.bucket = bucket, .key = key, .off = off, .len = len,
	                      .expect = DS_S3_WHOLE};
	int rc = ds__s3_run(s3, &g);
	if (rc) {
		free(g.buf);
		return rc;
	}
	*buf = g.buf;
	*got = g.got;
	if (total)
		*total = g.total;
	return 0;
}

int ds_s3_delete(struct ds_s3 *s3, const char *bucket, const char *key)
{
	struct ds_s3_get g = {.bucket = bucket, .key = key, .method = "DELETE", .len = DS_S3_WHOLE,
	                      .expect = DS_S3_WHOLE, .quiet_404 = 1};
	int rc = ds__s3_run(s3, &g);
	free(g.buf);
	return rc == -ENOENT ? 0 : rc;
}

/* ---- listing ----------------------------------------------------------------- */
struct listx {
	struct ds_s3_obj *v;
	size_t n, cap;
	char path[64]; /* element stack, as "a/b/c" tails */
	int depth;
	int in_contents;
	struct ds_s3_obj cur;
	struct ds_buf text;
	char *token;
	int truncated;
	int bad;
};

static int64_t parse_time(const char *s)
{
	struct tm tm;
	memset(&tm, 0, sizeof(tm));
	int ms = 0;
	if (sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
	           &tm.tm_min, &tm.tm_sec) != 6)
		return 0;
	const char *dot = strchr(s, '.');
	if (dot)
		ms = atoi(dot + 1);
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	return (int64_t)timegm(&tm) * 1000000000 + (int64_t)ms * 1000000;
}

static void XMLCALL x_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct listx *x = ud;
	(void)attrs;
	x->depth++;
	x->text.len = 0;
	if (x->depth == 2 && !strcmp(name, "Contents")) {
		x->in_contents = 1;
		memset(&x->cur, 0, sizeof(x->cur));
	}
}

static void XMLCALL x_text(void *ud, const XML_Char *s, int len)
{
	struct listx *x = ud;
	if (x->text.len + (size_t)len > 65536) {
		x->bad = 1;
		return;
	}
	ds_buf_add(&x->text, s, (size_t)len);
}

static void XMLCALL x_end(void *ud, const XML_Char *name)
{
	struct listx *x = ud;
	ds_buf_add(&x->text, "", 1);
	const char *t = x->text.data;
	if (x->in_contents && x->depth == 3) {
		if (!strcmp(name, "Key")) {
			free(x->cur.key);
			x->cur.key = ds_xstrdup(t);
		} else if (!strcmp(name, "Size")) {
			x->cur.size = strtoull(t, NULL, 10);
		} else if (!strcmp(name, "LastModified")) {
			x->cur.mtime_ns = parse_time(t);
		} else if (!strcmp(name, "ETag")) {
			snprintf(x->cur.etag, sizeof(x->cur.etag), "%s", t);
		}
	} else if (x->depth == 2 && !strcmp(name, "Contents")) {
		x->in_contents = 0;
		if (!x->cur.key) {
			x->bad = 1;
		} else {
			if (x->n == x->cap) {
				x->cap = x->cap ? 2 * x->cap : 1024;
				x->v = ds_xrealloc(x->v, x->cap * sizeof(*x->v));
			}
			x->v[x->n++] = x->cur;
			memset(&x->cur, 0, sizeof(x->cur));
		}
	} else if (x->depth == 2 && !strcmp(name, "IsTruncated")) {
		x->truncated = !strcmp(t, "true");
	} else if (x->depth == 2 && !strcmp(name, "NextContinuationToken")) {
		free(x->token);
		x->token = ds_xstrdup(t);
	}
	x->text.len = 0;
	x->depth--;
}

/* The strings one listing has seen (its keys, its continuation tokens):
 * open addressing, FNV-1a.  Not owned. */
struct strset {
	const char **v;
	size_t n, cap;
};

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

/* 1 when s is new (now in the set), 0 when it was there. */
static int strset_add(struct strset *t, const char *s)
{
	if (2 * (t->n + 1) > t->cap) {
		struct strset u = {ds_xcalloc(t->cap ? 2 * t->cap : 1024, sizeof(char *)), 0,
		                   t->cap ? 2 * t->cap : 1024};
		for (size_t i = 0; i < t->cap; i++)
			if (t->v[i])
				strset_add(&u, t->v[i]);
		free(t->v);
		*t = u;
	}
	size_t m = t->cap - 1, i = (size_t)fnv1a(s) & m;
	for (; t->v[i]; i = (i + 1) & m)
		if (!strcmp(t->v[i], s))
			return 0;
	t->v[i] = s;
	t->n++;
	return 1;
}

/* A string from the server, fit for a message: no control bytes, cut at
 * 120 bytes. */
static const char *printable(const char *s, char *buf, size_t cap)
{
	size_t n = 0;
	for (; *s && n + 4 < cap && n < 120; s++)
		buf[n++] = (unsigned char)*s < 0x20 || *s == 0x7f ? '?' : *s;
	if (*s && n + 4 <= cap)
		memcpy(buf + n, "...", 3), n += 3;
	buf[n] = '\0';
	return buf;
}

void ds_s3_objs_free(struct ds_s3_obj *objs, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(objs[i].key);
	free(objs);
}

int ds_s3_list(struct ds_s3 *s3, const char *bucket, const char *prefix, struct ds_s3_obj **objs,
               size_t *n)
{
	struct listx x;
	memset(&x, 0, sizeof(x));
	int rc = 0;
	char name[1200], q1[128], q2[128];
	/* A listing must advance: a continuation token that comes back, or a
	 * key listed twice, would loop for ever (a broken or hostile store). */
	struct strset keys = {0}, tokens = {0};
	char **tokv = NULL;
	size_t ntok = 0, page = 0;
	do {
		/* query keys in sorted order: the SigV4 canonical form */
		struct ds_buf q = {0};
		if (x.token) {
			ds_buf_add(&q, "continuation-token=", 19);
			ds__s3_escape(&q, x.token, 0);
			ds_buf_add(&q, "&", 1);
		}
		ds_buf_add(&q, "list-type=2&max-keys=1000&prefix=", 33);
		ds__s3_escape(&q, prefix, 0);
		ds_buf_add(&q, "", 1);
		struct ds_s3_get g = {.bucket = bucket, .key = NULL, .method = "GET", .query = q.data,
		                      .len = DS_S3_WHOLE, .expect = DS_S3_WHOLE, .what = prefix,
		                      .max_body = LIST_BODY_MAX};
		size_t before = x.n;
		page++;
		rc = ds__s3_run(s3, &g);
		ds_buf_release(&q);
		if (rc) {
			free(g.buf);
			break;
		}
		XML_Parser p = XML_ParserCreate(NULL);
		XML_SetUserData(p, &x);
		XML_SetElementHandler(p, x_start, x_end);
		XML_SetCharacterDataHandler(p, x_text);
		x.truncated = 0;
		ds_free(&x.token);
		if (XML_Parse(p, g.buf ? g.buf : "", (int)g.got, 1) != XML_STATUS_OK || x.bad) {
			ds_error("'%s': listing: malformed reply (%s)", ds_s3_name(bucket, prefix, name, sizeof(name)),
			         x.bad ? "oversized field" : XML_ErrorString(XML_GetErrorCode(p)));
			rc = -EPROTO;
		}
		XML_ParserFree(p);
		free(g.buf);
		if (!rc && x.truncated && !x.token) {
			ds_error("'%s': listing: truncated without a continuation token",
			         ds_s3_name(bucket, prefix, name, sizeof(name)));
			rc = -EPROTO;
		}
		for (size_t i = before; !rc && i < x.n; i++)
			if (!strset_add(&keys, x.v[i].key)) {
				ds_error("'%s': listing: key '%s' listed twice (page %zu, after continuation "
				         "token '%s'): the listing does not advance",
				         ds_s3_name(bucket, prefix, name, sizeof(name)),
				         printable(x.v[i].key, q1, sizeof(q1)),
				         page, ntok ? printable(tokv[ntok - 1], q2, sizeof(q2)) : "");
				rc = -EPROTO;
			}
		if (!rc && x.truncated) {
			tokv = ds_xrealloc(tokv, (ntok + 1) * sizeof(*tokv));
			tokv[ntok++] = ds_xstrdup(x.token);
			if (!strset_add(&tokens, tokv[ntok - 1])) {
				ds_error("'%s': listing: continuation token '%s' came back (page %zu): the "
				         "listing does not advance",
				         ds_s3_name(bucket, prefix, name, sizeof(name)),
				         printable(x.token, q1, sizeof(q1)), page);
				rc = -EPROTO;
			}
		}
	} while (!rc && x.truncated);
	for (size_t i = 0; i < ntok; i++)
		free(tokv[i]);
	free(tokv);
	free(keys.v);
	free(tokens.v);
	free(x.cur.key);
	free(x.token);
	ds_buf_release(&x.text);
	if (rc) {
		ds_s3_objs_free(x.v, x.n);
		return rc;
	}
	*objs = x.v;
	*n = x.n;
	return 0;
}
