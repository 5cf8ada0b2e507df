/* SPDX-License-Identifier: BSD-3-Clause */
/* test-ixlayout.c: the node index seen through its accessors (dsindex.h,
 * ds_ix_*), whatever its layout: every entry's path, name, parent, children
 * and fields read back as they were added, every path found by
 * ds_index_lookup and by a walk of ds_index_child, and near misses not
 * found.  Trees: ImageNet-shaped names, one directory of many files, one of
 * many subdirectories, a deep tree of 250-byte components ending in a
 * 255-byte name (a path of about 4000 bytes), UTF-8 names, names that sort
 * around '/' ("p", "p-q", "p.q", "p0"), symlinks, and file fields past 32
 * and 40 bits (sizes, offsets), exact negative and nanosecond mtimes; names
 * front-coded past a lead byte's nibbles (15+ shared bytes, 16+ more), a
 * directory whose children are cut into runs.  Version 3's limits (24-bit
 * partitions, 40-bit directory sizes) are refused at add, version 2 at open.
 * (issue 27: the compact layout must keep all of this.)  The cursors
 * (ds_ix_paths, ds_ix_names, ds_ix_child_named) give, id by id, what
 * ds_ix_path, ds_ix_base and ds_index_entry_ok give: every id in increasing
 * and decreasing order, random subsets (1 in 2, 16, 50), random jumps,
 * across every block boundary, each directory's children; on the index and
 * on damaged copies (a path length, a parent, bytes of the names). */
#include "dscommon.h"
#include "dsindex.h"
#include "tap.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <sys/stat.h>

struct want {
	char *path;
	uint32_t mode;
	int64_t mtime;
	uint64_t size, poff, stored;
	uint32_t part, crc;
	uint8_t codec, flags;
	const char *target;
};

#define BAIL(...)                                                                                  \
	do {                                                                                       \
		printf("Bail out! ");                                                              \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		exit(1);                                                                           \
	} while (0)

static struct want *W;
static size_t nw, capw;

static struct want *push(const char *path)
{
	if (nw == capw) {
		capw = capw ? 2 * capw : 4096;
		W = ds_xrealloc(W, capw * sizeof(*W));
	}
	struct want *w = &W[nw++];
	memset(w, 0, sizeof(*w));
	w->path = ds_xstrdup(path);
	w->part = UINT32_MAX;
	return w;
}

static void dir(struct ds_index_builder *b, const char *path, uint32_t perm, int64_t mtime)
{
	struct want *w = push(path);
	w->mode = S_IFDIR | perm;
	w->mtime = mtime;
	w->size = 4096;
	if (ds_index_add_dir(b, path, perm, mtime, 4096))
		BAIL("add_dir '%s'", path);
}

static uint64_t part_fill[2];

static void file(struct ds_index_builder *b, const char *path, uint32_t part, uint64_t size,
                 uint8_t codec, uint8_t flags, int64_t mtime)
{
	struct want *w = push(path);
	w->mode = S_IFREG | 0644;
	w->mtime = mtime;
	w->size = size;
	w->part = part;
	w->codec = codec;
	w->stored = codec == DS_CODEC_ZLIB ? size / 3 + 1 : size;
	w->poff = part_fill[part];
	part_fill[part] += (w->stored + 4095) / 4096 * 4096;
	w->crc = ds_crc32c(0, path, strlen(path));
	w->flags = flags;
	if (ds_index_add_file(b, path, 0644, mtime, size, part, w->poff, w->stored, codec, w->crc,
	                      flags))
		BAIL("add_file '%s'", path);
}

static void symlink_(struct ds_index_builder *b, const char *path, const char *target)
{
	struct want *w = push(path);
	w->mode = S_IFLNK | 0777;
	w->mtime = 77;
	w->size = strlen(target);
	w->target = target;
	if (ds_index_add_symlink(b, path, 77, target))
		BAIL("add_symlink '%s'", path);
}

static void build_tree(struct ds_index_builder *b)
{
	char p[PATH_MAX];
	dir(b, "", 0755, 1700000000123456789ll);
	/* ImageNet-21k shaped: train/<wnid>/<wnid>_<n>.JPEG */
	dir(b, "train", 0755, 1);
	for (int c = 0; c < 40; c++) {
		unsigned wnid = 1440764u + 7919u * (unsigned)c;
		snprintf(p, sizeof(p), "train/n%08u", wnid);
		dir(b, p, 0755, 2);
		for (int k = 0; k < 60; k++) {
			snprintf(p, sizeof(p), "train/n%08u/n%08u_%u.JPEG", wnid, wnid,
			         10026u + 37u * k);
			file(b, p, 0, 100000 + (uint64_t)k * 13, DS_CODEC_NONE, 0,
			     1600000000000000000ll + c * 1000 + k);
		}
	}
	/* many files in one directory, many subdirectories in another */
	dir(b, "many", 0700, 3);
	for (int k = 0; k < 5000; k++) {
		snprintf(p, sizeof(p), "many/f%05d.bin", k);
		file(b, p, 0, (uint64_t)k, DS_CODEC_NONE, 0, 5);
	}
	dir(b, "wide", 0755, 4);
	for (int k = 0; k < 1500; k++) {
		snprintf(p, sizeof(p), "wide/d%04d", k);
		dir(b, p, 0755, 6);
		snprintf(p, sizeof(p), "wide/d%04d/x", k);
		file(b, p, 0, 1, DS_CODEC_NONE, DS_EF_REPLICATED, 7);
	}
	/* deep: 15 components of 250 bytes, then a 255-byte (NAME_MAX) name */
	size_t n = (size_t)snprintf(p, sizeof(p), "deep");
	dir(b, p, 0755, 8);
	for (int d = 0; d < 15; d++) {
		p[n++] = '/';
		memset(p + n, 'a' + d, 250);
		n += 250;
		p[n] = 0;
		dir(b, p, 0750, 9 + d);
	}
	p[n++] = '/';
	memset(p + n, 'z', NAME_MAX);
	p[n + NAME_MAX] = 0;
	file(b, p, 0, 12345, DS_CODEC_ZLIB, 0, -1500000000123456789ll);
	memset(p + n, 'y', NAME_MAX);
	file(b, p, 1, 7, DS_CODEC_NONE, 0, -1); /* a sibling of the long name */
	/* UTF-8 names (bytewise order is code point order) */
	dir(b, "uni", 0755, 10);
	dir(b, "uni/\xce\xb4\xce\xb5\xce\xb4\xce\xbf\xce\xbc\xce\xad\xce\xbd\xce\xb1", 0755, 11);
	file(b,
	     "uni/\xce\xb4\xce\xb5\xce\xb4\xce\xbf\xce\xbc\xce\xad\xce\xbd\xce\xb1/"
	     "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e.jpg",
	     0, 3, DS_CODEC_NONE, 0, 12);
	file(b, "uni/emoji_\xf0\x9f\x98\x80.png", 0, 4, DS_CODEC_NONE, 0, 13);
	file(b, "uni/e\xcc\x81t\xc3\xa9", 0, 5, DS_CODEC_NONE, 0,
	     14); /* combining and precomposed */
	file(b, "uni/a b", 1, 6, DS_CODEC_NONE, 0, 15);
	/* names that sort around '/' */
	const char *around[] = {"p", "p-q", "p.q", "p0", "pq"};
	for (size_t i = 0; i < sizeof(around) / sizeof(*around); i++) {
		dir(b, around[i], 0755, 20);
		snprintf(p, sizeof(p), "%s/in", around[i]);
		file(b, p, 1, 9, DS_CODEC_NONE, 0, 21);
		snprintf(p, sizeof(p), "%s/in.x", around[i]);
		file(b, p, 1, 10, DS_CODEC_NONE, 0, 22);
	}
	file(b, "p-", 1, 11, DS_CODEC_NONE, 0, 23);
	/* front coding's escapes: names sharing 15 and more bytes with the one
	 * before, and names longer than 15 bytes after the shared ones */
	dir(b, "pre", 0755, 24);
	for (int k = 0; k < 40; k++) {
		char name[NAME_MAX + 1];
		memset(name, 'p', 200);
		snprintf(name + 200, sizeof(name) - 200, "_%02d%s", k,
		         k % 3 ? "" : "_0123456789abcdef");
		snprintf(p, sizeof(p), "pre/%s", name);
		file(b, p, 1, 2, DS_CODEC_NONE, 0, 25);
		snprintf(p, sizeof(p), "pre/abcdefghijklmn%c", 'a' + k % 26);
		if (k < 26)
			file(b, p, 1, 3, DS_CODEC_NONE, 0, 26);
	}
	/* a directory whose children are cut into runs by its subdirectories'
	 * subtrees */
	const char *mix[] = {"mix/a", "mix/b/x", "mix/b/y", "mix/c", "mix/d/e/z", "mix/f", "mix/g"};
	for (size_t i = 0; i < sizeof(mix) / sizeof(*mix); i++)
		file(b, mix[i], 1, 4, DS_CODEC_NONE, 0, 27);
	dir(b, "mix", 0755, 28);
	dir(b, "mix/b", 0755, 28);
	dir(b, "mix/d", 0755, 28);
	dir(b, "mix/d/e", 0755, 28);
	/* symlinks, inside the tree */
	symlink_(b, "train/latest", "n01440764");
	symlink_(b, "p/up", "../p.q/in");
	/* file fields past 32 and 40 bits */
	part_fill[1] = (1ull << 41) + 4096;
	file(b, "big/huge.bin", 1, (5ull << 30) + 3, DS_CODEC_NONE, 0, 30);
	file(b, "big/huger.bin", 1, (1ull << 40) + 12345, DS_CODEC_NONE, 0, 31);
	file(b, "big/zlib.bin", 1, 3ull << 33, DS_CODEC_ZLIB, 0, 32);
	dir(b, "big", 0755, 29); /* after its children: the builder sorts */
}

/* Walk path's components with ds_index_child from the root. */
static int64_t walk(const struct ds_index *ix, const char *path)
{
	int64_t cur = 0;
	const char *s = path;
	while (*s) {
		const char *e = strchr(s, '/');
		size_t l = e ? (size_t)(e - s) : strlen(s);
		cur = ds_index_child(ix, (uint32_t)cur, s, l);
		if (cur < 0)
			return -1;
		s += l + (e != NULL);
	}
	return cur;
}

static int want_cmp(const void *a, const void *b)
{
	return strcmp(((const struct want *)a)->path, ((const struct want *)b)->path);
}

/* W sorted by path (once, after build_tree) */
static int64_t find_want(const char *path)
{
	struct want key = {.path = (char *)path};
	const struct want *w = bsearch(&key, W, nw, sizeof(*W), want_cmp);
	return w ? w - W : -1;
}

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond) && bad++ < 5)                                                          \
			diag(__VA_ARGS__);                                                         \
	} while (0)

/* ---- many paths and names at once (ds_ix_paths, ds_ix_names,
 * ds_ix_child_named): what ds_ix_path, ds_ix_base and the per-entry
 * checks give, id by id, whatever order the ids come in ---------------- */
static uint64_t rnd_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

/* ids[0..n) through one cursor (and one name decoder): each path the same
 * as ds_ix_path's (both failing alike), each name ds_ix_base's; how many
 * differ (the first few named) */
static int paths_agree(const struct ds_index *ix, const uint32_t *ids, size_t n, const char *what)
{
	struct ds_ix_paths *c = ds_ix_paths_new(ix);
	struct ds_ix_names nm;
	ds_ix_names_init(&nm);
	int bad = 0;
	char want[PATH_MAX], nb[DS_IX_NAME_BUF];
	for (size_t i = 0; i < n; i++) {
		uint32_t id = ids[i];
		const char *got;
		int g = ds_ix_paths_get(c, id, &got);
		int w = id < ix->h->nentries && ds_index_entry_ok(ix, id)
		                ? ds_ix_path(ix, id, want, sizeof(want))
		                : -DS_ECORRUPT;
		if (w < 0)
			w = -DS_ECORRUPT, want[0] = 0;
		CHECK(g == w && !strcmp(got, want) && strlen(got) == (size_t)(g < 0 ? 0 : g),
		      "%s: entry %u (#%zu): cursor %d '%.60s', ds_ix_path %d '%.60s'", what, id, i,
		      g, got, w, want);
		if (id < ix->h->nentries) {
			int l = ds_ix_names_get(ix, &nm, id);
			ds_ix_base(ix, id, nb);
			/* a damaged name may hold a NUL: its bytes, not strlen */
			CHECK(l < 0 ? nb[0] == 0 && ds_ix_base_len(ix, id) == 0
			            : (size_t)l == ds_ix_base_len(ix, id) &&
			                      !memcmp(nm.name, nb, (size_t)l + 1),
			      "%s: entry %u (#%zu): name %d '%.60s', ds_ix_base '%.60s'", what, id,
			      i, l, l < 0 ? "" : nm.name, nb);
		}
	}
	ds_ix_paths_free(c);
	return bad;
}

/* ds_ix_list of ids[0..n): each line ds_ix_path's of the id at its place
 * in the list, or -EIO when an id is not a sample the index can follow;
 * how many differ */
static int list_agrees(const struct ds_index *ix, const uint32_t *ids, size_t n, const char *what)
{
	int bad = 0, samples = 1;
	char want[PATH_MAX], *text = NULL;
	size_t len = 0;
	for (size_t i = 0; i < n && samples; i++)
		samples = ids[i] < ix->h->nentries && ds_index_entry_ok(ix, ids[i]) &&
		          S_ISREG(ds_ix_mode(ix, ids[i])) &&
		          ds_ix_path(ix, ids[i], want, sizeof(want)) >= 0;
	int rc = ds_ix_list(ix, ids, n, &text, &len);
	CHECK(rc == (samples ? 0 : -EIO), "%s: ds_ix_list %d, want %d", what, rc,
	      samples ? 0 : -EIO);
	if (!rc && samples) {
		const char *p = text, *end = text + len;
		CHECK(text[len] == 0, "%s: the list is not NUL-terminated", what);
		for (size_t i = 0; i < n; i++) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			ds_ix_path(ix, ids[i], want, sizeof(want));
			CHECK(nl && (size_t)(nl - p) == strlen(want) &&
			              !memcmp(p, want, strlen(want)),
			      "%s: line %zu: '%.60s', want '%.60s' (entry %u)", what, i,
			      nl ? p : "", want, ids[i]);
			if (!nl)
				break;
			p = nl + 1;
		}
		CHECK(p == end, "%s: %zu bytes after the last line", what, (size_t)(end - p));
	}
	free(text);
	return bad;
}

static void cursor_tests(const struct ds_index *ix, const char *what)
{
	uint32_t n = ix->h->nentries, *ids = calloc(2 * (size_t)n + 64, sizeof(uint32_t));
	if (!ids)
		BAIL("no memory");
	size_t m = 0;
	char t[128];
	/* every id in order (a walk), then backwards */
	for (uint32_t i = 0; i < n; i++)
		ids[m++] = i;
	snprintf(t, sizeof(t), "%s: every id in increasing order", what);
	ok(!paths_agree(ix, ids, m, t), "%s", t);
	for (uint32_t i = 0; i < n; i++)
		ids[i] = n - 1 - i;
	snprintf(t, sizeof(t), "%s: every id in decreasing order", what);
	ok(!paths_agree(ix, ids, n, t), "%s", t);
	/* random subsets in increasing order (an epoch list's share, 1 in 2,
	 * 16 and 50: one id a block and fewer), with repeats */
	int bad = 0;
	static const unsigned every[] = {2, 16, 50};
	for (size_t e = 0; e < 3; e++) {
		m = 0;
		for (uint32_t i = 0; i < n; i++)
			if (rnd() % every[e] == 0) {
				ids[m++] = i;
				if (rnd() % 64 == 0)
					ids[m++] = i;
			}
		snprintf(t, sizeof(t), "%s: 1 in %u ids, increasing", what, every[e]);
		bad += paths_agree(ix, ids, m, t);
	}
	ok(!bad, "%s: random subsets in increasing order", what);
	/* random jumps: any id after any, and ids past the last entry */
	m = 0;
	for (uint32_t i = 0; i < 2 * n; i++)
		ids[m++] = (uint32_t)(rnd() % (n + 3));
	ids[m++] = UINT32_MAX;
	ids[m++] = 0;
	snprintf(t, sizeof(t), "%s: random jumps", what);
	ok(!paths_agree(ix, ids, m, t), "%s", t);
	/* each block's boundaries: its last id, the next block's first, back */
	m = 0;
	for (uint32_t b = DS_IX_BLOCK; b < n && m + 4 <= 2 * (size_t)n; b += DS_IX_BLOCK) {
		ids[m++] = b - 1;
		ids[m++] = b;
		ids[m++] = b - 1;
		ids[m++] = b + 1 < n ? b + 1 : b;
	}
	snprintf(t, sizeof(t), "%s: across block boundaries", what);
	ok(!paths_agree(ix, ids, m, t), "%s", t);
	/* ds_ix_list: the samples in a random order with repeats (a list is
	 * built in id order and laid out in its own), then with one entry that
	 * is not a sample (a directory: the root) */
	m = 0;
	for (uint32_t i = 0; i < 3 * n; i++) {
		uint32_t id = (uint32_t)(rnd() % n);
		if (S_ISREG(ds_ix_mode(ix, id)) && ds_index_entry_ok(ix, id))
			ids[m++] = id;
		if (m == 2 * (size_t)n)
			break;
	}
	snprintf(t, sizeof(t), "%s: ds_ix_list of samples in a random order, in that order", what);
	ok(m > 0 && !list_agrees(ix, ids, m, t), "%s", t);
	ids[m / 2] = 0;
	snprintf(t, sizeof(t), "%s: ds_ix_list with the root among the samples: EIO", what);
	ok(!list_agrees(ix, ids, m, t), "%s", t);
	/* every directory's children through ds_ix_child_named, one decoder
	 * for the whole walk: ds_ix_child's id, checked as readdir checks it,
	 * with ds_ix_base's name */
	bad = 0;
	struct ds_ix_names nm;
	ds_ix_names_init(&nm);
	char nb[DS_IX_NAME_BUF];
	for (uint32_t d = 0; d < n; d++) {
		if (!ds_index_entry_ok(ix, d) || !S_ISDIR(ds_ix_mode(ix, d)))
			continue;
		uint32_t nc = ds_ix_nchildren(ix, d);
		for (uint32_t k = 0; k <= nc; k++) {
			uint32_t c = k < nc ? ds_ix_child(ix, d, k) : UINT32_MAX;
			int64_t want =
				k < nc && ds_index_entry_ok(ix, c) && ds_ix_parent(ix, c) == d
					? (int64_t)c
					: -1;
			int64_t got = ds_ix_child_named(ix, &nm, d, k);
			CHECK(got == want && (got < 0 || !strcmp(nm.name, ds_ix_base(ix, c, nb))),
			      "%s: dir %u child %u: %lld, want %lld", what, d, k, (long long)got,
			      (long long)want);
		}
	}
	ok(!bad, "%s: every directory's children through ds_ix_child_named", what);
	free(ids);
}

int main(void)
{
	struct ds_index_builder *b = ds_index_builder_new();
	build_tree(b);
	qsort(W, nw, sizeof(*W), want_cmp);
	uint64_t sizes[2] = {part_fill[0], part_fill[1]};
	ds_index_set_parts(b, 2, sizes);
	ds_index_add_loc(b, 0, 0, 0);
	ds_index_add_loc(b, 1, 0, (sizes[0] + 4095) / 4096 * 4096);
	ds_index_add_loc(b, 1, 1, 0);
	ds_index_set_node(b, 0, 2, sizes[0] + sizes[1] + 4096, "ix", 1);
	void *buf;
	size_t len;
	is(ds_index_build(b, &buf, &len), 0, "build");
	struct ds_index ix;
	is(ds_index_from_buf(&ix, buf, len, 1), 0, "the index passes the full check");
	is(ix.h->nentries, nw, "one entry per path added (%zu)", nw);
	diag("%zu entries, %zu bytes: %.1f B/entry", nw, len, (double)len / nw);

	/* every entry: path, base name, parent, fields; found both ways */
	int bad = 0;
	uint32_t *children = calloc(ix.h->nentries, sizeof(uint32_t));
	char path[PATH_MAX], ppath[PATH_MAX];
	size_t longest = 0;
	for (uint32_t id = 0; id < ix.h->nentries; id++) {
		CHECK(ds_index_entry_ok(&ix, id), "entry %u not ok", id);
		int n = ds_ix_path(&ix, id, path, sizeof(path));
		CHECK(n >= 0 && (size_t)n == strlen(path) && (size_t)n == ds_ix_path_len(&ix, id),
		      "entry %u: path length %d", id, n);
		longest = n > 0 && (size_t)n > longest ? (size_t)n : longest;
		int64_t w = find_want(path);
		CHECK(w >= 0, "entry %u: '%s' was never added", id, path);
		if (w < 0)
			continue;
		const struct want *x = &W[w];
		CHECK(ds_index_lookup(&ix, path, (size_t)n) == id, "lookup '%s'", path);
		CHECK(walk(&ix, path) == id, "walk '%s'", path);
		const char *slash = strrchr(path, '/');
		const char *base = slash ? slash + 1 : path;
		char nb[DS_IX_NAME_BUF];
		CHECK(!strcmp(ds_ix_base(&ix, id, nb), base) &&
		              ds_ix_base_len(&ix, id) == strlen(base),
		      "base name of '%s': '%s'", path, nb);
		uint32_t par = ds_ix_parent(&ix, id);
		if (id) {
			ds_ix_path(&ix, par, ppath, sizeof(ppath));
			size_t pl = slash ? (size_t)(slash - path) : 0;
			CHECK(strlen(ppath) == pl && !memcmp(ppath, path, pl),
			      "parent of '%s': '%s'", path, ppath);
			CHECK(ds_index_child(&ix, par, base, strlen(base)) == id, "child '%s'",
			      path);
			children[par]++;
		} else {
			CHECK(par == 0 && n == 0, "the root is entry 0, named \"\"");
		}
		uint32_t mode = ds_ix_mode(&ix, id);
		CHECK(mode == x->mode, "'%s': mode %o, want %o", path, mode, x->mode);
		CHECK(ds_ix_mtime(&ix, id) == x->mtime, "'%s': mtime %lld, want %lld", path,
		      (long long)ds_ix_mtime(&ix, id), (long long)x->mtime);
		CHECK(ds_ix_size(&ix, id) == x->size, "'%s': size %llu, want %llu", path,
		      (unsigned long long)ds_ix_size(&ix, id), (unsigned long long)x->size);
		struct stat st;
		ds_index_stat(&ix, id, &st);
		CHECK(st.st_ino == DS_INO(id) && st.st_mode == x->mode &&
		              (uint64_t)st.st_size == x->size &&
		              (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec ==
		                      x->mtime,
		      "'%s': stat", path);
		if (S_ISREG(mode)) {
			struct ds_ix_file f;
			ds_ix_file(&ix, id, &f);
			CHECK(f.size == x->size && f.poff == x->poff && f.stored == x->stored &&
			              f.part == x->part && f.crc == x->crc && f.codec == x->codec &&
			              (f.flags & DS_EF_REPLICATED) == x->flags,
			      "'%s': file fields", path);
			CHECK(ds_ix_poff(&ix, id) == x->poff &&
			              ds_ix_stored(&ix, id) == x->stored &&
			              ds_ix_part(&ix, id) == x->part &&
			              ds_ix_crc(&ix, id) == x->crc &&
			              ds_ix_codec(&ix, id) == x->codec,
			      "'%s': file accessors", path);
			CHECK(ds_ix_nlink(&ix, id) == 1, "'%s': nlink", path);
		} else if (S_ISLNK(mode)) {
			CHECK(!strcmp(ds_ix_target(&ix, id), x->target), "'%s': target '%s'", path,
			      ds_ix_target(&ix, id));
		}
	}
	ok(!bad, "every entry reads back, is found by lookup and by a walk of its components");
	is(longest, 4 + 15 * 251 + 1 + NAME_MAX, "the longest path is the deep one");

	/* directories: children in name order, each naming the directory as
	 * its parent; nlink = 2 + subdirectories */
	bad = 0;
	for (uint32_t id = 0; id < ix.h->nentries; id++) {
		if (!S_ISDIR(ds_ix_mode(&ix, id)))
			continue;
		uint32_t nc = ds_ix_nchildren(&ix, id), subdirs = 0;
		CHECK(nc == children[id], "dir %u: %u children, want %u", id, nc, children[id]);
		char prev[DS_IX_NAME_BUF], nb[DS_IX_NAME_BUF];
		prev[0] = 0;
		for (uint32_t k = 0; k < nc; k++) {
			uint32_t c = ds_ix_child(&ix, id, k);
			CHECK(ds_index_entry_ok(&ix, c) && ds_ix_parent(&ix, c) == id,
			      "dir %u: child %u", id, k);
			CHECK(!k || strcmp(prev, ds_ix_base(&ix, c, nb)) < 0,
			      "dir %u: children out of order", id);
			strcpy(prev, ds_ix_base(&ix, c, nb));
			subdirs += S_ISDIR(ds_ix_mode(&ix, c));
		}
		CHECK(ds_ix_nlink(&ix, id) == 2 + subdirs, "dir %u: nlink", id);
	}
	ok(!bad, "every directory lists its children in name order");

	/* the cursors give what the per-entry calls give, on this index and
	 * on damaged copies of it (mapped without the full check, as the shim
	 * maps one): a path under a wrong length, a parent that is not the
	 * directory's, names made of other bytes */
	cursor_tests(&ix, "the tree");
	for (int k = 0; k < 11; k++) {
		char *cp = malloc(len);
		memcpy(cp, buf, len);
		struct ds_index dix;
		is(ds_index_from_buf(&dix, cp, len, 0), 0, "a damaged copy (%d) maps", k);
		struct ds_dir *D =
			(struct ds_dir *)(cp + ((const char *)ix.dirs - (const char *)buf));
		char dp[PATH_MAX];
		size_t dl = (size_t)snprintf(dp, sizeof(dp), "deep");
		for (int lv = 0; lv < 2 + k % 3; lv++) {
			dp[dl++] = '/';
			memset(dp + dl, 'a' + lv, 250);
			dl += 250;
		}
		dp[dl] = 0;
		int64_t did = ds_index_lookup(&ix, dp, dl);
		int64_t tid = ds_index_lookup(&ix, "train/n01440764", 15);
		int64_t sid = ds_index_lookup(&ix, "deep", 4);
		if (did <= 0 || tid <= 0 || sid <= 0)
			BAIL("the deep and train directories");
		struct ds_dir *dd = &D[ds__ix40(ix.rows[did].poff_lo, ix.rows[did].poff_hi)];
		struct ds_dir *td = &D[ds__ix40(ix.rows[tid].poff_lo, ix.rows[tid].poff_hi)];
		if (k == 0)
			dd->plen++; /* a deep directory's path length */
		else if (k == 1)
			dd->pdir = 0; /* its parent the root */
		else if (k == 2)      /* a class directory's parent another directory */
			td->pdir = (uint32_t)ds__ix40(ix.rows[sid].poff_lo, ix.rows[sid].poff_hi);
		else /* a byte of the names: a lead, a length, a '/', a NUL */
			for (int j = 0; j < 1 + k % 3; j++)
				((unsigned char *)cp + ix.h->off_names)[rnd() % ix.h->names_size] =
					"\x00/\xf0\x11"
					"a"[rnd() % 5];
		char what[48];
		snprintf(what, sizeof(what), "damaged copy %d", k);
		cursor_tests(&dix, what);
		free(cp);
	}

	/* the samples: the files that are not replicated, in increasing order */
	is(ds_index_check_shuffle(&ix), 0,
	   "the sample table and locations pass the shuffle's check");
	size_t nsamples = 0;
	for (size_t i = 0; i < nw; i++)
		nsamples += S_ISREG(W[i].mode) && !(W[i].flags & DS_EF_REPLICATED);
	is(ix.h->nsamples, nsamples, "one sample per non-replicated file");
	bad = 0;
	for (uint32_t j = 0; j < ix.h->nsamples; j++) {
		uint32_t s = ds_ix_sample(&ix, j);
		CHECK(S_ISREG(ds_ix_mode(&ix, s)) && (ds_ix_flags(&ix, s) & DS_EF_SAMPLE) &&
		              (!j || ds_ix_sample(&ix, j - 1) < s),
		      "sample %u", j);
	}
	ok(!bad, "samples are sample files, in increasing order");

	/* misses: near every name, nothing */
	bad = 0;
	static const char *const tails[] = {"x", "/x", "/", ".JPEG", "~"};
	for (size_t i = 0; i < nw; i++) {
		const char *pth = W[i].path;
		size_t l = strlen(pth);
		for (size_t t = 0; t < sizeof(tails) / sizeof(*tails); t++) {
			if (l + strlen(tails[t]) >= sizeof(path))
				continue;
			snprintf(path, sizeof(path), "%s%s", pth, tails[t]);
			if (find_want(path) >= 0)
				continue;
			CHECK(ds_index_lookup(&ix, path, strlen(path)) == -1, "lookup '%s' found",
			      path);
			CHECK(walk(&ix, path) == -1 || !strcmp(tails[t], "/"), "walk '%s' found",
			      path);
		}
		if (l > 1) { /* a proper prefix of a name */
			memcpy(path, pth, l - 1);
			path[l - 1] = 0;
			if (find_want(path) < 0)
				CHECK(ds_index_lookup(&ix, path, l - 1) == -1, "lookup '%s' found",
				      path);
		}
	}
	CHECK(ds_index_lookup(&ix, "/train", 6) == -1, "a leading '/'");
	CHECK(ds_index_lookup(&ix, "train/", 6) == -1, "a trailing '/'");
	CHECK(ds_index_lookup(&ix, "many/f05000.bin", 15) == -1, "past the last sibling");
	CHECK(ds_index_lookup(&ix, "many/f00000.bi", 14) == -1, "before the first sibling");
	CHECK(ds_index_lookup(&ix, "train/n01440764/n01440764_10026.JPEGX", 37) == -1, "longer");
	CHECK(ds_index_lookup(&ix, "many/f00001.bin\0", 16) == -1, "a NUL inside the length");
	CHECK(ds_index_child(&ix, 0, "many/f00001.bin", 15) == -1, "a child name holding '/'");
	CHECK(ds_index_child(&ix, 0, "", 0) == -1, "an empty child name");
	int64_t file_id = ds_index_lookup(&ix, "many/f00001.bin", 15);
	CHECK(file_id > 0 && ds_index_child(&ix, (uint32_t)file_id, "x", 1) == -1,
	      "no child of a file");
	ok(!bad, "no near miss is found");

	/* the path builder refuses a buffer too small, and leaves "" */
	int64_t big = ds_index_lookup(&ix, "big/huger.bin", 13);
	ok(big > 0, "lookup big/huger.bin");
	char small[8] = "zzzzzzz";
	is(ds_ix_path(&ix, (uint32_t)big, small, sizeof(small)), -ENAMETOOLONG,
	   "ds_ix_path into a small buffer: -ENAMETOOLONG");
	is_str(small, "", "and the buffer holds \"\"");
	is(ds_ix_path(&ix, (uint32_t)big, small, 0), -ENAMETOOLONG, "size 0: -ENAMETOOLONG");
	is(ds_ix_path(&ix, 0, small, 1), 0, "the root's path fits in one byte");

	/* ds_index_entry_bytes bounds the index (stage reserves RAM with it):
	 * this tree, and one of directories alone (the worst entry) */
	uint64_t names = 0;
	for (size_t i = 0; i < nw; i++)
		names += strlen(W[i].path) + 1 + (W[i].target ? strlen(W[i].target) + 1 : 0);
	ok(len <= sizeof(struct ds_index_header) + ds_index_entry_bytes(nw, names) + 2 * 16 +
	                   3 * 16,
	   "ds_index_entry_bytes bounds this index (%zu <= %llu)", len,
	   (unsigned long long)(sizeof(struct ds_index_header) + ds_index_entry_bytes(nw, names) +
	                        80));
	struct ds_index_builder *bd = ds_index_builder_new();
	uint64_t dnames = 1;
	char dp[64];
	for (int k = 0; k < 3000; k++) {
		snprintf(dp, sizeof(dp), k % 2 ? "d%04d/e" : "d%04d", k - k % 2);
		ds_index_add_dir(bd, dp, 0755, 0, 4096);
		dnames += strlen(dp) + 1;
	}
	ds_index_set_parts(bd, 0, NULL);
	void *dbuf;
	size_t dlen;
	is(ds_index_build(bd, &dbuf, &dlen), 0, "an index of 3000 directories");
	ok(dlen <= sizeof(struct ds_index_header) + ds_index_entry_bytes(3001, dnames),
	   "ds_index_entry_bytes bounds it too (%zu <= %llu)", dlen,
	   (unsigned long long)(sizeof(struct ds_index_header) +
	                        ds_index_entry_bytes(3001, dnames)));
	free(dbuf);
	ds_index_builder_free(bd);

	/* version 3's limits and its predecessors: refused with a clear error */
	struct ds_index_builder *b2 = ds_index_builder_new();
	is(ds_index_add_file(b2, "f", 0644, 0, 1, DS_IX_MAX_PART + 1, 0, 1, DS_CODEC_NONE, 0, 0),
	   -EOVERFLOW, "a partition number past 24 bits: -EOVERFLOW at add");
	is(ds_index_add_dir(b2, "d", 0755, 0, 1ull << 40), -EFBIG,
	   "a directory size past 40 bits: -EFBIG at add");
	ds_index_builder_free(b2);
	struct ds_index_header *hh = buf;
	hh->version = 2;
	is(ds_index_from_buf(&ix, buf, len, 0), -DS_EFORMAT, "a version 2 index is refused");
	hh->version = DS_INDEX_VERSION;
	is(ds_index_from_buf(&ix, buf, len, 0), 0, "and the same as version 3 is taken");
	ok(ix.h->nwide >= 2 && ix.h->nruns > ix.h->ndirs,
	   "the tree has wide rows (%u) and directories of many runs (%u runs, %u directories)",
	   ix.h->nwide, ix.h->nruns, ix.h->ndirs);

	free(children);
	free(buf);
	for (size_t i = 0; i < nw; i++)
		free(W[i].path);
	free(W);
	ds_index_builder_free(b);
	return done_testing();
}
