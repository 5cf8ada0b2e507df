/* SPDX-License-Identifier: BSD-3-Clause */
/* pyapi.c: entry points for the Python helper (io/python/dstage), called with
 * ctypes on the library the reader already preloads.
 *
 * A dataset that walked the tree held every file of the DATASET in every
 * reader and DataLoader worker (issue 27: ~47 B and ~1.8 us per file even
 * compact).  The index already holds what ImageFolder computes: entries in
 * path order with '/' ranking first (common/index.c, ds_path_cmp), so a
 * directory's subtree is one run of entries after it, and the sample table,
 * the ids of every training sample in increasing order.  A class directory
 * whose subtree is its own files only, every one a sample, is therefore a
 * run [s0, s1) of the sample table, in the order ImageFolder gives (names
 * sorted); the helper keeps three numbers for it and decodes a path when a
 * sample is fetched.  Anything else (subdirectories, symlinks, files that
 * are not samples) the helper walks as before, for that class only.
 *
 * The index was mapped without the full check: every entry followed here
 * passes ds_index_entry_ok, and an id read from the sample table is checked
 * before it is used (the table's order is not trusted either: a position
 * found by binary search is returned only when the table holds the id
 * there).  docs/shim.md, "The Python helper's entry points". */
#include "shim.h"

#include <stdlib.h>

DS__EXPORT int ds_py_abi(void)
{
	return DS_PY_ABI;
}

/* Start the shim if it has not started: 1 when a store is mapped. */
DS__EXPORT int ds_py_active(void)
{
	ds__ensure_init();
	return ds__live() && ds__activate();
}

/* The mount prefix the shim serves (normalised, no trailing '/'), or NULL. */
DS__EXPORT const char *ds_py_mount(void)
{
	return ds_py_active() ? ds__g.mount : NULL;
}

/* Does entry i's path start with p/ (plen bytes of p)?  -1: a damaged entry. */
static int under(uint32_t i, const char *p, size_t plen)
{
	const struct ds_index *ix = &ds__g.ix;
	if (!ds_index_entry_ok(ix, i))
		return -1;
	const struct ds_entry *e = &ix->e[i];
	return e->name_len > plen && ix->strings[e->name + plen] == '/' &&
	       !memcmp(ix->strings + e->name, p, plen);
}

/* First position of the sample table whose id is >= id (the table sorted). */
static uint64_t sample_lb(uint64_t id)
{
	const uint32_t *s = ds__g.ix.samples;
	uint64_t lo = 0, hi = ds__g.ix.h->nsamples;
	while (lo < hi) {
		uint64_t mid = (lo + hi) >> 1;
		if (s[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Is p[0, n) strict UTF-8 (what Python decodes without a surrogate escape:
 * no overlong form, no surrogate, nothing above U+10FFFF)?  Then the byte
 * order of such names is the order of their decoded str, which sorted()
 * gives; a name that is not decodes to U+DC80..U+DCFF and sorts otherwise.
 * ASCII eight bytes at a time (ImageNet's names are). */
static int utf8_ok(const unsigned char *p, size_t n)
{
	size_t i = 0;
	while (i < n) {
		if (n - i >= 8) {
			uint64_t w;
			memcpy(&w, p + i, 8);
			if (!(w & 0x8080808080808080ull)) {
				i += 8;
				continue;
			}
		}
		unsigned c = p[i];
		if (c < 0x80) {
			i++;
			continue;
		}
		size_t k;
		unsigned lo = 0x80, hi = 0xbf;
		if (c >= 0xc2 && c <= 0xdf)
			k = 1;
		else if (c >= 0xe0 && c <= 0xef) {
			k = 2;
			if (c == 0xe0)
				lo = 0xa0;
			else if (c == 0xed)
				hi = 0x9f; /* no surrogates */
		} else if (c >= 0xf0 && c <= 0xf4) {
			k = 3;
			if (c == 0xf0)
				lo = 0x90;
			else if (c == 0xf4)
				hi = 0x8f;
		} else
			return 0;
		if (n - i <= k || p[i + 1] < lo || p[i + 1] > hi)
			return 0;
		for (size_t j = 2; j <= k; j++)
			if (p[i + j] < 0x80 || p[i + j] > 0xbf)
				return 0;
		i += k + 1;
	}
	return 1;
}

/* Directory rel (mount-relative, normalised: no leading or trailing '/',
 * "" the mount root; symlinks are not followed).  out[8]: its entry id,
 * mode, whether it is one run of the sample table in ImageFolder's order
 * (below), number of children, the first entry after its subtree, the
 * run [out[5], out[6]) of the sample table inside its subtree, and the
 * number of samples of the dataset.  A run: every entry of the subtree is
 * a child of it and a sample (so a file: no subdirectory, no symlink, no
 * replicated file), and the names are strict UTF-8 (the pool holds them
 * back to back in entry order, as the builder writes it: one scan).  0, -ENOENT, -ENOTDIR (out[1] set),
 * -DS_ECORRUPT, -ENODEV (no store mapped). */
DS__EXPORT int ds_py_dir(const char *rel, size_t len, uint64_t *out)
{
	if (!ds_py_active())
		return -ENODEV;
	const struct ds_index *ix = &ds__g.ix;
	int64_t id = ds_index_lookup(ix, rel, len);
	if (id < 0)
		return -ENOENT;
	const struct ds_entry *e = &ix->e[id];
	memset(out, 0, 8 * sizeof(*out));
	out[0] = (uint64_t)id;
	out[1] = e->mode;
	out[7] = ix->h->nsamples;
	if (!S_ISDIR(e->mode))
		return -ENOTDIR;
	out[3] = e->stored;
	/* the subtree: the entries after id that start with rel/ (a run) */
	uint64_t lo = (uint64_t)id + 1, hi = ix->h->nentries;
	if (len) {
		while (lo < hi) {
			uint64_t mid = (lo + hi) >> 1;
			int u = under((uint32_t)mid, rel, len);
			if (u < 0)
				return -DS_ECORRUPT;
			if (u)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	out[4] = lo;
	out[5] = sample_lb((uint64_t)id + 1);
	out[6] = sample_lb(lo);
	if (out[6] < out[5])
		return -DS_ECORRUPT; /* the table is not in increasing order */
	if (lo - (uint64_t)id - 1 == e->stored && out[6] - out[5] == e->stored) {
		if (!e->stored) {
			out[2] = 1;
		} else if (ds_index_entry_ok(ix, id + 1) && ds_index_entry_ok(ix, lo - 1)) {
			/* the entries between are the run's samples (their ids are in
			 * the table): only their names are read, inside the pool */
			uint64_t a = ix->e[id + 1].name, b = ix->e[lo - 1].name + ix->e[lo - 1].name_len;
			out[2] = a <= b && utf8_ok((const unsigned char *)ix->strings + a, b - a);
		}
	}
	return 0;
}

/* Entry id's mount-relative path (in the mapped index, NUL-terminated) and
 * its length, or NULL when id is not an entry the index can follow. */
DS__EXPORT const char *ds_py_entry_name(uint64_t id, size_t *len)
{
	if (!ds_py_active() || !ds_index_entry_ok(&ds__g.ix, id))
		return NULL;
	*len = ds__g.ix.e[id].name_len;
	return ds_index_name(&ds__g.ix, (uint32_t)id);
}

/* The path of the sample at position pos of the sample table. */
DS__EXPORT const char *ds_py_sample_name(uint64_t pos, size_t *len)
{
	if (!ds_py_active() || pos >= ds__g.ix.h->nsamples)
		return NULL;
	return ds_py_entry_name(ds__g.ix.samples[pos], len);
}

/* Position of sample id in the table, or -1. */
static int64_t sample_pos(uint64_t id)
{
	uint64_t p = sample_lb(id);
	return p < ds__g.ix.h->nsamples && ds__g.ix.samples[p] == id ? (int64_t)p : -1;
}

/* Position in the sample table of the sample named rel (mount-relative,
 * normalised), or -1 when it is not a sample. */
DS__EXPORT int64_t ds_py_sample_pos(const char *rel, size_t len)
{
	if (!ds_py_active())
		return -1;
	int64_t id = ds_index_lookup(&ds__g.ix, rel, len);
	return id < 0 ? -1 : sample_pos((uint64_t)id);
}

/* Epoch `epoch`'s list of local reader l of nr (the file
 * .dstage/epochs/<epoch>/<l>-of-<nr>, nr = 0: .../all) as entry ids,
 * malloc'd (ds_py_free); like opening the file, it tells the service the
 * epoch started.  0 or -errno. */
DS__EXPORT int ds_py_list(uint64_t epoch, uint32_t l, uint32_t nr, uint32_t **ids, size_t *count)
{
	*ids = NULL;
	*count = 0;
	if (!ds_py_active())
		return -ENODEV;
	if (nr && l >= nr)
		return -EINVAL;
	int rc = ds__epoch_ids(epoch, l, nr, ids, count);
	if (rc == 0)
		ds__remote_epoch(epoch);
	return rc;
}

/* Dataset indices of n entry ids: seg holds nseg rows (s0, s1, base), runs
 * [s0, s1) of the sample table, increasing and disjoint; an id at position
 * p of the table in a row's run is base + p - s0, any other -1.  Returns
 * how many were -1. */
DS__EXPORT int64_t ds_py_map(const uint32_t *ids, size_t n, const int64_t *seg, size_t nseg,
                             int64_t *out)
{
	int64_t miss = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t p = ds_py_active() ? sample_pos(ids[i]) : -1, r = -1;
		if (p >= 0) {
			size_t lo = 0, hi = nseg; /* the last row with s0 <= p */
			while (lo < hi) {
				size_t mid = (lo + hi) >> 1;
				if (seg[3 * mid] <= p)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo && p < seg[3 * (lo - 1) + 1])
				r = seg[3 * (lo - 1) + 2] + p - seg[3 * (lo - 1)];
		}
		out[i] = r;
		miss += r < 0;
	}
	return miss;
}

DS__EXPORT void ds_py_free(void *p)
{
	free(p);
}
