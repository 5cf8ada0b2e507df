/* SPDX-License-Identifier: BSD-3-Clause */
/* s3out.c: a pack written to a bucket (dstage pack SRC s3://BUCKET/PREFIX).
 *
 * Every rank writes its partitions as usual, into a private temporary
 * directory of its own ($TMPDIR), and uploads each one as soon as it is
 * complete (multipart above DSTAGE_S3_PART_SIZE), then deletes the local
 * copy: a rank needs room for one partition.  When every rank is done,
 * rank 0 uploads index.h5, last: a pack without its index is never taken
 * for a complete one.  --force deletes an old index.h5 before the first
 * part goes up, and the old pack's surplus partitions after the new index.
 * On failure, every part-NNNNN.h5 this run may have written is deleted. */
#include "pack_int.h"
#include "dss3.h"

#include <fnmatch.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static int is_pack_key(const char *name)
{
	return !strcmp(name, DS__INDEX_NAME) || !fnmatch("part-[0-9][0-9][0-9][0-9][0-9].h5", name, 0);
}

int ds__s3out_check(struct ds_s3 *s3, const char *bucket, const char *prefix, const char *out,
                    int force)
{
	struct ds_s3_obj *v = NULL;
	size_t n = 0, plen = strlen(prefix);
	char *lp = plen ? ds_s3_pack_key(prefix, "") : ds_xstrdup("");
	int rc = ds_s3_list(s3, bucket, lp, &v, &n);
	free(lp);
	if (rc)
		return rc;
	for (size_t i = 0; !rc && i < n; i++) {
		const char *k = v[i].key;
		if (plen && (strncmp(k, prefix, plen) || k[plen] != '/'))
			continue; /* PREFIX2/...: not ours */
		const char *name = k + (plen ? plen + 1 : 0);
		if (!force) {
			ds_error("'%s': not empty (--force replaces a pack in it)", out);
			rc = -ENOTEMPTY;
		} else if (!is_pack_key(name)) {
			char q[PATH_MAX];
			ds_warn("'%s': not part of a pack, left alone", ds_s3_name(bucket, k, q, sizeof(q)));
		}
	}
	ds_s3_objs_free(v, n);
	if (rc || !force)
		return rc;
	/* the old index goes first: a half-replaced pack must not look whole */
	char *key = ds_s3_pack_key(prefix, DS__INDEX_NAME);
	rc = ds_s3_delete(s3, bucket, key);
	free(key);
	return rc;
}

int ds__s3out_put(struct ds_s3 *s3, const char *bucket, const char *prefix, const char *dir,
                  int rank,
                  const char *name)
{
	char *path = ds__join(dir, name), *key = ds_s3_pack_key(prefix, name);
	int rc = ds_fault("pack.s3put", rank);
	if (!rc)
		rc = ds_s3_put_file(s3, bucket, key, path);
	else
		ds_error("'%s': injected fault", name);
	unlink(path);
	free(path);
	free(key);
	return rc;
}

/* Delete part-NNNNN.h5 for NNNNN in [from, to), and those past `to` that
 * a listing shows (an older, larger pack's). */
void ds__s3out_remove_parts(struct ds_s3 *s3, const char *bucket, const char *prefix,
                            uint32_t from, uint32_t to)
{
	char name[32];
	for (uint32_t p = from; p < to; p++) {
		snprintf(name, sizeof(name), "part-%05u.h5", p);
		char *key = ds_s3_pack_key(prefix, name);
		(void)ds_s3_delete(s3, bucket, key);
		free(key);
	}
	struct ds_s3_obj *v = NULL;
	size_t n = 0, plen = strlen(prefix);
	char *lp = plen ? ds_s3_pack_key(prefix, "") : ds_xstrdup("");
	int rc = ds_s3_list(s3, bucket, lp, &v, &n);
	free(lp);
	if (rc)
		return;
	for (size_t i = 0; i < n; i++) {
		const char *k = v[i].key;
		if (plen && (strncmp(k, prefix, plen) || k[plen] != '/'))
			continue;
		const char *nm = k + (plen ? plen + 1 : 0);
		unsigned num;
		if (!fnmatch("part-[0-9][0-9][0-9][0-9][0-9].h5", nm, 0) && sscanf(nm + 5, "%u", &num) == 1 &&
		    num >= to)
			(void)ds_s3_delete(s3, bucket, k);
	}
	ds_s3_objs_free(v, n);
}
