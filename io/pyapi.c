/* SPDX-License-Identifier: BSD-3-Clause */
/* pyapi.c: entry points for the Python helper (io/python/dstage), called with
 * ctypes on the library the reader already preloads.
 *
 * A dataset that walked the tree held every file of the DATASET in every
 * reader and DataLoader worker (issue 27: ~47 B and ~1.8 us per file even
 * compact).  The index already holds what ImageFolder computes: entries in
 * path order with '/' ranking first (ds_path_cmp, common/common.c), so a
 * directory's subtree is one run of entries after it, and the sample table,
 * the ids of every training sample in increasing order.  A class directory
 * whose subtree is its own files only, every one a sample, is therefore the
 * entries [dir + 1, end), in the order ImageFolder gives (names sorted);
 * the helper keeps three numbers for it, decodes a path when a sample is
 * fetched and maps a list's ids to indices by the runs alone.  Anything
 * else (subdirectories, symlinks, files that are not samples) the helper
 * walks as before, for that class only.
 *
 * The index was mapped without the full check: every entry followed here
 * passes ds_index_entry_ok, and a directory is a run only when the sample
 * table, searched, agrees with its counts (its order is not trusted: a
 * table out of order is -DS_ECORRUPT).  docs/shim.md, "The Python helper's
 * entry points". */
#include "shim.h"

#include <stdlib.h>

DS__EXPORT int ds_py_abi(void) { return DS_PY_ABI; }

/* Start the shim if it has not started: 1 when a store is mapped. */
DS__EXPORT int ds_py_active(void)
{
	ds__ensure_init();
	return ds__live() && ds__activate();
}

/* The mount prefix the shim serves (normalised, no trailing '/'), or NULL. */
DS__EXPORT const char *ds_py_mount(void) { return ds_py_active() ? ds__g.mount : NULL; }

/* Does entry i's path start with p/ (plen bytes of p)?  -1: a damaged
 * entry.  The paths through a cursor (ds_ix_paths: it checks the entry as
 * ds_index_entry_ok does): a binary search's probes converge on one
 * directory, whose path it keeps. */
static int under(struct ds_ix_paths *cur, uint32_t i, const char *p, size_t plen)
{
	const char *path;
	int n = ds_ix_paths_get(cur, i, &path);
	if (n < 0)
		return -1;
	return (size_t)n > plen && path[plen] == '/' && !memcmp(path, p, plen);
}

/* First position of the sample table whose id is >= id (the table sorted). */
static uint64_t sample_lb(uint64_t id)
{
	const struct ds_index *ix = &ds__g.ix;
	uint64_t lo = 0, hi = ds__g.ix.h->nsamples;
	while (lo < hi) {
		uint64_t mid = (lo + hi) >> 1;
		if (ds_ix_sample(ix, mid) < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The first entry after directory id's subtree (its path p, plen bytes):
 * the entries after it that start with p/ are one run.  -1: damaged. */
static int64_t subtree_end(struct ds_ix_paths *cur, uint32_t id, const char *p, size_t plen)
{
	uint64_t lo = (uint64_t)id + 1, hi = ds__g.ix.h->nentries;
	if (!id)
		return hi; /* the root's subtree is every entry */
	while (lo < hi) {
		uint64_t mid = (lo + hi) >> 1;
		int u = under(cur, (uint32_t)mid, p, plen);
		if (u < 0)
			return -1;
		if (u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (int64_t)lo;
}

/* Directory id, its subtree ending before entry end: out[2] = 1 when the
 * subtree is one run of samples in ImageFolder's order: every entry of it
 * is a child of the directory and a sample (so a file: no subdirectory, no
 * symlink, no replicated file).  Its files are then the entries [id + 1,
 * end) (out[0], out[1]), in name order, which is sorted()'s order of their
 * names: names are UTF-8 (ds_name_check at pack, docs/formats.md), whose
 * byte order is their code point order.  The samples of the subtree are
 * positions [s0, s1) of the sample table: a run when it has as many as the
 * directory has children and entries. */
static int dir_run(uint32_t id, uint64_t end, int64_t *out)
{
	uint32_t nc = ds_ix_nchildren(&ds__g.ix, id);
	uint64_t s0 = sample_lb((uint64_t)id + 1), s1 = sample_lb(end);
	if (s1 < s0)
		return -DS_ECORRUPT; /* the table is not in increasing order */
	out[0] = (int64_t)id + 1;
	out[1] = (int64_t)end;
	out[2] = end - id - 1 == nc && s1 - s0 == nc;
	return 0;
}

/* Directory rel (mount-relative, normalised: no leading or trailing '/',
 * "" the mount root; symlinks are not followed).  out[8]: its entry id,
 * mode, 1 when its files are one run of samples in ImageFolder's order
 * (dir_run), number of children, the first entry after its subtree, the
 * run's entries [out[5], out[6]), and the number of samples of the
 * dataset.  0, -ENOENT, -ENOTDIR (out[1] set),
 * -DS_ECORRUPT, -ENODEV (no store mapped). */
DS__EXPORT int ds_py_dir(const char *rel, size_t len, uint64_t *out)
{
	if (!ds_py_active())
		return -ENODEV;
	const struct ds_index *ix = &ds__g.ix;
	int64_t id = ds_index_lookup(ix, rel, len);
	if (id < 0)
		return -ENOENT;
	uint32_t mode = ds_ix_mode(ix, (uint32_t)id);
	memset(out, 0, 8 * sizeof(*out));
	out[0] = (uint64_t)id;
	out[1] = mode;
	out[7] = ix->h->nsamples;
	if (!S_ISDIR(mode))
		return -ENOTDIR;
	out[3] = ds_ix_nchildren(ix, (uint32_t)id);
	struct ds_ix_paths *cur = ds_ix_paths_new(ix);
	if (!cur)
		return -ENOMEM;
	int64_t end = subtree_end(cur, (uint32_t)id, rel, len), run[3];
	ds_ix_paths_free(cur);
	if (end < 0 || dir_run((uint32_t)id, (uint64_t)end, run))
		return -DS_ECORRUPT;
	out[2] = (uint64_t)run[2];
	out[4] = (uint64_t)end;
	out[5] = (uint64_t)run[0];
	out[6] = (uint64_t)run[1];
	return 0;
}

/* The children of directory rel (as ds_py_dir names it), in name order:
 * rows[6 * k ...] of child k: its mode, the offset and length of its name
 * in names (NUL-terminated there), and for a directory dir_run's answer
 * (its entries [id + 1, end), 1 when they are its files, every one a
 * sample, in ImageFolder's order), else 0, 0, 0.  One call for every class of a dataset: a child's
 * subtree ends where the next child's starts.  Returns the bytes the names
 * take (nothing written past cap: call again with that much), or -errno;
 * nrows must be at least ds_py_dir's count of children.  exts (elen bytes,
 * or NULL): lowercase suffixes, each NUL-terminated; a directory is then a
 * run only when every file of it ends with one (run_exts: its names are
 * read, O(files)). */
/* Does every file of run [a, b) end with one of the suffixes exts (elen
 * bytes: lowercase ASCII, each NUL-terminated), as Python's
 * name.lower().endswith(exts) says?  A name with a byte above ASCII is
 * not decided here (str.lower() of some of those is ASCII): 0, walk it. */
static int run_exts(struct ds_ix_paths *cur, uint32_t a, uint32_t b, const char *exts, size_t elen)
{
	for (uint32_t i = a; i < b; i++) {
		/* checked as ds_index_entry_ok checks it, the name the path's
		 * last component: consecutive ids, one step of the front
		 * coding each (ds_ix_paths) */
		const char *path;
		int pl = ds_ix_paths_get(cur, i, &path);
		if (pl <= 0)
			return 0;
		const char *slash = memrchr(path, '/', (size_t)pl);
		const unsigned char *nm = (const unsigned char *)(slash ? slash + 1 : path);
		size_t nl = (size_t)pl - (size_t)((const char *)nm - path), k;
		for (k = 0; k < nl && nm[k] < 0x80; k++)
			;
		if (k < nl)
			return 0;
		int ok = 0;
		for (size_t p = 0; !ok && p < elen;) {
			size_t sl = strnlen(exts + p, elen - p);
			if (sl <= nl) { /* "" ends every name */
				ok = 1;
				for (size_t j = 0; ok && j < sl; j++) {
					unsigned c = nm[nl - sl + j];
					if (c >= 'A' && c <= 'Z')
						c += 'a' - 'A';
					ok = c == (unsigned char)exts[p + j];
				}
			}
			p += sl + 1;
		}
		if (!ok)
			return 0;
	}
	return 1;
}

DS__EXPORT int64_t ds_py_children(const char *rel, size_t len, int64_t *rows, size_t nrows,
                                  char *names, size_t cap, const char *exts, size_t elen)
{
	/* with suffixes (ImageFolder's extensions), a run holds when every
	 * file of it has one; a suffix that is not ASCII decides no run here */
	int runs = 1;
	for (size_t p = 0; exts && p < elen; p++)
		if ((unsigned char)exts[p] >= 0x80)
			runs = 0;
	if (!ds_py_active())
		return -ENODEV;
	const struct ds_index *ix = &ds__g.ix;
	int64_t id = ds_index_lookup(ix, rel, len);
	if (id < 0)
		return -ENOENT;
	if (!S_ISDIR(ds_ix_mode(ix, (uint32_t)id)))
		return -ENOTDIR;
	uint32_t nc = ds_ix_nchildren(ix, (uint32_t)id);
	if (nc > nrows)
		return -ENOSPC;
	struct ds_ix_paths *cur = ds_ix_paths_new(ix);
	if (!cur)
		return -ENOMEM;
	int64_t end = subtree_end(cur, (uint32_t)id, rel, len), rc = -DS_ECORRUPT;
	if (end < 0)
		goto out;
	uint64_t used = 0;
	struct ds_ix_names nm;
	ds_ix_names_init(&nm);
	for (uint32_t k = 0; k < nc; k++) {
		/* checked as ds_index_entry_ok checks it, this directory's
		 * child, its name decoded once */
		int64_t ci = ds_ix_child_named(ix, &nm, (uint32_t)id, k);
		uint32_t c = (uint32_t)ci;
		uint32_t next = k + 1 < nc ? ds_ix_child(ix, (uint32_t)id, k + 1) : (uint32_t)end;
		if (ci < 0 || c <= (uint32_t)id || next <= c || next > (uint64_t)end)
			goto out;
		int64_t *r = rows + 6 * k;
		const char *nbuf = nm.name;
		size_t nl = nm.len;
		uint32_t cmode = ds_ix_mode(ix, c);
		r[0] = cmode;
		r[1] = (int64_t)used;
		r[2] = (int64_t)nl;
		r[3] = r[4] = r[5] = 0;
		if (S_ISDIR(cmode) && dir_run(c, next, r + 3))
			goto out;
		if (used + nl + 1 <= cap) {
			memcpy(names + used, nbuf, nl);
			names[used + nl] = 0;
		}
		used += nl + 1;
		if (r[5] && (!runs || (exts && !run_exts(cur, c + 1, next, exts, elen))))
			r[5] = 0;
	}
	rc = (int64_t)used;
out:
	ds_ix_paths_free(cur);
	return rc;
}

/* Entry id's mount-relative path, NUL-terminated, into buf (size bytes;
 * PATH_MAX always suffices): its length, -ENOENT when id is not an entry the
 * index can follow, -ENAMETOOLONG. */
DS__EXPORT int64_t ds_py_entry_name(uint64_t id, char *buf, size_t size)
{
	if (!ds_py_active() || !ds_index_entry_ok(&ds__g.ix, id))
		return -ENOENT;
	return ds_ix_path(&ds__g.ix, (uint32_t)id, buf, size);
}

/* Entry id of the path rel (mount-relative, normalised), or -1. */
DS__EXPORT int64_t ds_py_lookup(const char *rel, size_t len)
{
	return ds_py_active() ? ds_index_lookup(&ds__g.ix, rel, len) : -1;
}

/* Epoch `epoch`'s list of local reader l of nr (the file
 * .dstage/epochs/<epoch>/<l>-of-<nr>, nr = 0: .../all) as entry ids,
 * malloc'd (ds_py_free); like opening the file, it tells the service the
 * epoch started.  0 or -errno.  The ids of a published share are not
 * checked against the index here (that reads an entry all over the index
 * for each: the whole entry table, 64 B an entry of the dataset, in every
 * reader): ds_py_map follows none (an id inside a run is a sample by the
 * run's construction) and ds_py_entry_name checks the one it names. */
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

/* Dataset indices of n entry ids: seg holds nseg rows (id0, id1, base),
 * runs [id0, id1) of entry ids, increasing and disjoint; an id in a row's
 * run is base + id - id0, any other -1.  Returns how many were -1.  No
 * lookup in the index: O(log nseg) an id. */
DS__EXPORT int64_t ds_py_map(const uint32_t *ids, size_t n, const int64_t *seg, size_t nseg,
                             int64_t *out)
{
	int64_t miss = 0;
	for (size_t i = 0; i < n; i++) {
		int64_t id = ids[i], r = -1;
		size_t lo = 0, hi = nseg; /* the last row with id0 <= id */
		while (lo < hi) {
			size_t mid = (lo + hi) >> 1;
			if (seg[3 * mid] <= id)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && id < seg[3 * (lo - 1) + 1])
			r = seg[3 * (lo - 1) + 2] + id - seg[3 * (lo - 1)];
		out[i] = r;
		miss += r < 0;
	}
	return miss;
}

DS__EXPORT void ds_py_free(void *p) { free(p); }
