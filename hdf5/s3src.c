/* SPDX-License-Identifier: BSD-3-Clause */
/* s3src.c: an S3 prefix as the source of a pack (s3://BUCKET/PREFIX).
 *
 * The listing stands in for the walk (scan.c): every key under PREFIX/ is a
 * regular file (mode 0644, the object's size, LastModified as mtime, its
 * ETag kept in the entry's target field, which regular files do not use
 * otherwise); the directories are the key prefixes.  Keys are checked like
 * names in a tree: "..", ".", empty components, absolute keys, a key that is
 * also a "directory" of other keys are refused with the key named.  A
 * zero-byte key ending in '/' (the folder marker consoles create) is a
 * directory.
 *
 * The writer (writer.c) asks for the files of its partition in order; the
 * fetcher keeps up to DSTAGE_S3_INFLIGHT GETs (default 16, at most 64 MiB)
 * in flight ahead of it, each checked for its size and its ETag (an object
 * changed since the listing stops the pack, naming it). */
#include "pack_int.h"
#include "dss3.h"

#include <fnmatch.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#define WINDOW_BYTES (64ull << 20)

static int excluded(const struct ds__scan_opts *o, const char *path)
{
	const char *slash = strrchr(path, '/');
	const char *base = slash ? slash + 1 : path;
	for (size_t i = 0; i < o->nexclude; i++)
		if (!fnmatch(o->exclude[i], path, 0) || !fnmatch(o->exclude[i], base, 0))
			return 1;
	/* a directory excluded takes its subtree along */
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *s = strrchr(buf, '/'); s; s = strrchr(buf, '/')) {
		*s = '\0';
		const char *b = strrchr(buf, '/');
		for (size_t i = 0; i < o->nexclude; i++)
			if (!fnmatch(o->exclude[i], buf, 0) || !fnmatch(o->exclude[i], b ? b + 1 : buf, 0))
				return 1;
	}
	return 0;
}

static uint64_t add_string(struct ds__tree *t, const char *p, size_t n)
{
	uint64_t off = t->names.len;
	ds_buf_add(&t->names, p, n);
	ds_buf_add(&t->names, "", 1);
	return off;
}

static struct ds__pentry *add(struct ds__tree *t, const char *path, size_t len, uint32_t mode,
                              uint64_t size, int64_t mtime)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? 2 * t->cap : 1024;
		t->e = ds_xrealloc(t->e, t->cap * sizeof(*t->e));
	}
	struct ds__pentry *e = &t->e[t->n++];
	memset(e, 0, sizeof(*e));
	e->path = add_string(t, path, len);
	e->path_len = (uint32_t)len;
	e->mode = mode;
	e->size = size;
	e->mtime_ns = mtime;
	e->part = UINT32_MAX;
	return e;
}

static int entry_cmp(const void *a, const void *b, void *names)
{
	const char *n = names;
	return ds_path_cmp(n + ((const struct ds__pentry *)a)->path,
	                   n + ((const struct ds__pentry *)b)->path);
}

static int bad_key(const char *bucket, const char *key, const char *why)
{
	char name[PATH_MAX + 128], q[PATH_MAX + 64];
	ds__quote(key, strlen(key), q, sizeof(q));
	ds_error("'%s': %s", ds_s3_name(bucket, q, name, sizeof(name)), why);
	return -DS_ENAME;
}

int ds__scan_s3(const struct ds__scan_opts *o, struct ds_s3 *s3, const char *bucket,
                const char *prefix, struct ds__tree *t)
{
	struct ds_s3_obj *v = NULL;
	size_t n = 0, plen = strlen(prefix);
	int rc;
	memset(t, 0, sizeof(*t));
	if (o->files_from) {
		ds_error("'%s': --files-from is not supported with an s3:// source (use --exclude)", o->src);
		return -EINVAL;
	}
	/* list "PREFIX/": never the siblings ("PREFIX2/..."), however many */
	char *lp = plen ? ds_s3_pack_key(prefix, "") : ds_xstrdup("");
	rc = ds_s3_list(s3, bucket, lp, &v, &n);
	free(lp);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		const char *key = v[i].key, *rel = key;
		if (plen) {
			if (strncmp(key, prefix, plen))
				continue;
			if (key[plen] == '\0') {
				rc = bad_key(bucket, key, "an object, not a prefix: name the prefix above it");
				break;
			}
			if (key[plen] != '/')
				continue; /* a sibling such as PREFIX2/... */
			rel = key + plen + 1;
		}
		size_t len = strlen(rel);
		int marker = len && rel[len - 1] == '/';
		const char *why;
		if (marker) {
			if (v[i].size) {
				rc = bad_key(bucket, key, "key ends with '/' but has data");
				break;
			}
			len--;
			if (!len)
				continue; /* the prefix's own marker */
		}
		if (len >= PATH_MAX || ds_name_check(rel, len, &why) || ds_name_reserved(rel, len, &why)) {
			rc = bad_key(bucket, key, len >= PATH_MAX ? "key longer than PATH_MAX" : why);
			break;
		}
		char path[PATH_MAX];
		memcpy(path, rel, len);
		path[len] = '\0';
		if (excluded(o, path))
			continue;
		/* the directories on the way (repeats are dropped after the sort) */
		for (size_t k = 0; k < len; k++)
			if (path[k] == '/')
				add(t, path, k, S_IFDIR | 0755, 0, v[i].mtime_ns);
		if (marker) {
			add(t, path, len, S_IFDIR | 0755, 0, v[i].mtime_ns);
			continue;
		}
		struct ds__pentry *e = add(t, path, len, S_IFREG | 0644, v[i].size, v[i].mtime_ns);
		size_t el = strlen(v[i].etag);
		e->target = add_string(t, v[i].etag, el);
		e->target_len = (uint32_t)el;
		t->nfiles++;
		t->bytes += v[i].size;
	}
	ds_s3_objs_free(v, n);
	if (rc)
		return rc;
	if (!t->nfiles) {
		ds_error("'%s': nothing to pack (no objects under it%s)", o->src,
		         o->nexclude ? " left after --exclude" : "");
		return -ENOENT;
	}
	if (t->n > 1)
		qsort_r(t->e, t->n, sizeof(*t->e), entry_cmp, t->names.data);
	/* drop repeated directories; a key that is also a directory is refused */
	size_t w = 0;
	for (size_t i = 0; i < t->n; i++) {
		struct ds__pentry *e = &t->e[i];
		if (w) {
			struct ds__pentry *p = &t->e[w - 1];
			if (!strcmp(ds__tree_path(t, p), ds__tree_path(t, e))) {
				if (S_ISDIR(p->mode) && S_ISDIR(e->mode)) {
					if (e->mtime_ns > p->mtime_ns)
						p->mtime_ns = e->mtime_ns;
					continue;
				}
				char key[PATH_MAX + 2];
				snprintf(key, sizeof(key), "%s%s%s", prefix, *prefix ? "/" : "",
				         ds__tree_path(t, S_ISREG(p->mode) ? p : e));
				return bad_key(bucket, key, "a key that is also a directory of other keys");
			}
		}
		t->e[w++] = *e;
	}
	t->n = w;
	for (size_t i = 0; i < t->n; i++)
		t->ndirs += S_ISDIR(t->e[i].mode) != 0;
	for (size_t i = 0; i < o->nreplicate; i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s", o->replicate[i]);
		size_t len = strlen(path);
		while (len && path[len - 1] == '/')
			path[--len] = '\0';
		int found = 0;
		for (size_t k = 0; k < t->n; k++) {
			const char *p = ds__tree_path(t, &t->e[k]);
			if (!strcmp(p, path) || (!strncmp(p, path, len) && p[len] == '/')) {
				t->e[k].flags |= DS_EF_REPLICATED;
				found = 1;
			}
		}
		if (!found || !len) {
			ds_error("'%s': --replicate path not in the packed tree", o->replicate[i]);
			return -ENOENT;
		}
	}
	if (t->n > DS__MAX_ENTRIES) {
		ds_error("'%s': %zu entries, more than dstage supports", o->src, t->n);
		return -E2BIG;
	}
	return 0;
}

/* ---- fetching a partition's objects, many in flight ------------------------ */
struct ds__s3fetch {
	struct ds_s3 *s3;
	const char *bucket, *prefix;
	const struct ds__plan *pl;
	const struct ds__ppart *p;
	uint32_t next, cur;           /* next file to start; file being consumed */
	struct ds_s3_get *g;          /* [nfiles] */
	char **keys;
	uint64_t inflight_bytes;
	unsigned max_inflight;
};

struct ds__s3fetch *ds__s3fetch_new(struct ds_s3 *s3, const char *bucket, const char *prefix,
                                    const struct ds__plan *pl, uint32_t part)
{
	struct ds__s3fetch *f = ds_xcalloc(1, sizeof(*f));
	f->s3 = s3;
	f->bucket = bucket;
	f->prefix = prefix;
	f->pl = pl;
	f->p = &pl->parts[part];
	f->g = ds_xcalloc(f->p->nfiles + 1, sizeof(*f->g));
	f->keys = ds_xcalloc(f->p->nfiles + 1, sizeof(*f->keys));
	const char *v = getenv("DSTAGE_S3_INFLIGHT");
	uint64_t m;
	f->max_inflight = v && !ds_parse_u64(v, &m) && m >= 1 && m <= 256 ? (unsigned)m : 16;
	return f;
}

static void start_more(struct ds__s3fetch *f)
{
	const struct ds__tree *t = &f->pl->tree;
	while (f->next < f->p->nfiles) {
		unsigned live = f->next - f->cur;
		const struct ds__pentry *e = &t->e[f->pl->files[f->p->first + f->next]];
		if (live && (live >= f->max_inflight || f->inflight_bytes + e->size > WINDOW_BYTES))
			break;
		struct ds_s3_get *g = &f->g[f->next];
		if (asprintf(&f->keys[f->next], "%s%s%s", f->prefix, *f->prefix ? "/" : "",
		             ds__tree_path(t, e)) < 0) {
			ds_error("out of memory");
			exit(1);
		}
		*g = (struct ds_s3_get){.bucket = f->bucket, .key = f->keys[f->next], .len = DS_S3_WHOLE,
		                        .expect = e->size,
		                        .etag = e->target_len ? t->names.data + e->target : NULL};
		ds_s3_start(f->s3, g);
		f->inflight_bytes += e->size;
		f->next++;
	}
}

int ds__s3fetch_next(struct ds__s3fetch *f, const char **buf, size_t *len)
{
	if (f->cur > 0) {
		/* the previous object is consumed */
		struct ds_s3_get *pg = &f->g[f->cur - 1];
		ds_free(&pg->buf);
		ds_free(&f->keys[f->cur - 1]);
	}
	if (f->cur >= f->p->nfiles)
		return -EINVAL;
	start_more(f);
	struct ds_s3_get *g = &f->g[f->cur];
	int rc = ds_s3_wait(f->s3, g);
	f->inflight_bytes -= f->pl->tree.e[f->pl->files[f->p->first + f->cur]].size;
	f->cur++;
	if (rc)
		return rc;
	*buf = g->buf ? g->buf : "";
	*len = (size_t)g->got;
	return 0;
}

void ds__s3fetch_free(struct ds__s3fetch *f)
{
	if (!f)
		return;
	ds_s3_cancel_all(f->s3);
	for (uint32_t i = 0; i < f->p->nfiles; i++) {
		free(f->g[i].buf);
		free(f->keys[i]);
	}
	free(f->g);
	free(f->keys);
	free(f);
}
