/* SPDX-License-Identifier: BSD-3-Clause */
/* plan.c: which file goes into which partition, decided once on rank 0 and
 * broadcast, so the output does not depend on the number of ranks.
 *
 * Partitions hold contiguous runs of files in path order (a directory's
 * files stay together, which keeps related samples on one node and reads
 * from the shared file system in directory order), balanced by size.
 * Files under --replicate go into partitions of their own.  The members
 * of one tar shard read in place (--expand-tar: entries with the same src)
 * are one unit: a partition boundary never falls inside a tar, so each tar
 * is opened and read once, front to back, by one reader (docs/formats.md,
 * "Tar shards"). */
#include "pack_int.h"

#include <string.h>

/* What a file weighs when balancing: its bytes plus a fixed cost, so that
 * many empty or tiny files still spread over the partitions. */
#define PER_FILE_WEIGHT 512u

static uint64_t weight(const struct ds__pentry *e)
{
	return e->size + PER_FILE_WEIGHT;
}

/* Is file b read from the same tar as file a, just before it? */
static int same_src(const struct ds__tree *t, const struct ds__pentry *a,
                    const struct ds__pentry *b)
{
	const struct ds__pextra *x = ds__pentry_x(t, a), *y = ds__pentry_x(t, b);
	return x->src_len && x->src_len == y->src_len &&
	       !memcmp(t->names.data + x->src, t->names.data + y->src, x->src_len);
}

/* Units of files ids[0..n): a file, or the run of members of one tar. */
static uint64_t units(const struct ds__tree *t, const uint32_t *ids, uint64_t n)
{
	uint64_t u = 0;
	for (uint64_t i = 0; i < n; i++)
		u += !i || !same_src(t, &t->e[ids[i - 1]], &t->e[ids[i]]);
	return u;
}

/* Assign files ids[0..n) (nu units) to k <= nu contiguous, size-balanced,
 * non-empty ranges numbered from first.  A unit goes to the range its first
 * file's weight midpoint falls in, nudged so that no range is skipped (at
 * most one more than the previous unit's) and enough units remain to fill
 * the ranges after it; the rest of a unit follows its first file. */
static void split(struct ds__tree *t, const uint32_t *ids, uint64_t n, uint64_t nu, uint32_t k,
                  uint32_t first)
{
	unsigned __int128 total = 0, prefix = 0;
	for (uint64_t i = 0; i < n; i++)
		total += weight(&t->e[ids[i]]);
	int64_t prev = -1;
	uint64_t u = 0;
	for (uint64_t i = 0; i < n; i++) {
		uint64_t w = weight(&t->e[ids[i]]);
		if (i && same_src(t, &t->e[ids[i - 1]], &t->e[ids[i]])) {
			prefix += w;
			t->e[ids[i]].part = first + (uint32_t)prev;
			continue;
		}
		int64_t r = (int64_t)((prefix + w / 2) * k / total);
		int64_t lowest = (int64_t)k - (int64_t)(nu - u++); /* units left fill the rest */
		prefix += w;
		if (r > prev + 1)
			r = prev + 1;
		if (r < prev)
			r = prev;
		if (r < lowest)
			r = lowest;
		prev = r;
		t->e[ids[i]].part = first + (uint32_t)r;
	}
}

static uint32_t div_up(uint64_t a, uint64_t b)
{
	uint64_t q = b ? (a + b - 1) / b : 1;
	return q > UINT32_MAX ? UINT32_MAX : (uint32_t)q;
}

static uint32_t clamp(uint32_t k, uint64_t nfiles)
{
	if (k < 1)
		k = 1;
	return k > nfiles ? (uint32_t)nfiles : k;
}

/* Group bytes and counts: [0] training files, [1] replicated files; u[]
 * their units (a file, or a tar's members). */
struct groups {
	uint64_t n[2], bytes[2], u[2];
};

/* Partition counts for both groups from -p N or -S SIZE. */
static void counts(const struct groups *g, uint32_t nparts, uint64_t part_size, uint32_t k[2])
{
	k[0] = k[1] = 0;
	if (!nparts) {
		for (int i = 0; i < 2; i++)
			k[i] = g->n[i] ? clamp(div_up(g->bytes[i], part_size), g->u[i]) : 0;
		return;
	}
	if (!g->n[0]) {
		k[1] = clamp(nparts, g->u[1]);
		return;
	}
	/* -p N is for the training files; replicated ones get partitions of
	 * about the same size */
	k[0] = clamp(nparts, g->u[0]);
	uint64_t target = g->bytes[0] / k[0];
	if (g->n[1])
		k[1] = clamp(target ? div_up(g->bytes[1], target) : 1, g->u[1]);
}

/* FNV-1a, 64 bits: the pack's identity from its plan. */
static void fnv(uint64_t *h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		*h = (*h ^ c[i]) * 0x100000001b3ull;
}

static void fnv64(uint64_t *h, uint64_t v)
{
	unsigned char b[8];
	for (int i = 0; i < 8; i++)
		b[i] = (unsigned char)(v >> (8 * i));
	fnv(h, b, 8);
}

static uint64_t plan_id(const struct ds__plan *pl)
{
	const struct ds__tree *t = &pl->tree;
	uint64_t h = 0xcbf29ce484222325ull;
	fnv(&h, DS__PACK_FORMAT, sizeof(DS__PACK_FORMAT));
	fnv64(&h, DS__PACK_VERSION);
	fnv64(&h, pl->codec);
	fnv64(&h, pl->level);
	fnv64(&h, pl->nparts);
	for (size_t i = 0; i < t->n; i++) {
		const struct ds__pentry *e = &t->e[i];
		fnv(&h, ds__tree_path(t, e), e->path_len + 1);
		fnv64(&h, e->mode);
		fnv64(&h, (uint64_t)e->mtime_ns);
		fnv64(&h, e->size);
		fnv64(&h, e->flags);
		fnv64(&h, e->part);
		if (e->target_len)
			fnv(&h, t->names.data + e->target, e->target_len + 1);
	}
	return h;
}

int ds__plan_make(struct ds__plan *pl, uint32_t nparts, uint64_t part_size)
{
	struct ds__tree *t = &pl->tree;
	struct groups g = {{0, 0}, {0, 0}, {0, 0}};
	for (size_t i = 0; i < t->n; i++) {
		if (!S_ISREG(t->e[i].mode))
			continue;
		int r = !!(t->e[i].flags & DS_EF_REPLICATED);
		g.n[r]++;
		g.bytes[r] += t->e[i].size;
	}
	/* files: training files in path order, then replicated ones */
	pl->nfiles = g.n[0] + g.n[1];
	pl->files = ds_xmalloc((pl->nfiles ? pl->nfiles : 1) * sizeof(*pl->files));
	uint64_t w[2] = {0, g.n[0]};
	for (size_t i = 0; i < t->n; i++)
		if (S_ISREG(t->e[i].mode))
			pl->files[w[!!(t->e[i].flags & DS_EF_REPLICATED)]++] = (uint32_t)i;
	g.u[0] = units(t, pl->files, g.n[0]);
	g.u[1] = units(t, pl->files + g.n[0], g.n[1]);
	uint32_t k[2];
	counts(&g, nparts, part_size, k);
	if ((uint64_t)k[0] + k[1] > DS__MAX_PARTS) {
		ds_error("%llu partitions, more than %u: use a larger -S",
		         (unsigned long long)k[0] + k[1], DS__MAX_PARTS);
		ds_free(&pl->files);
		return -E2BIG;
	}
	if (g.n[0])
		split(t, pl->files, g.n[0], g.u[0], k[0], 0);
	if (g.n[1])
		split(t, pl->files + g.n[0], g.n[1], g.u[1], k[1], k[0]);
	pl->nparts = k[0] + k[1];
	pl->parts = ds_xcalloc(pl->nparts, sizeof(*pl->parts));
	for (uint64_t i = 0; i < pl->nfiles; i++) {
		const struct ds__pentry *e = &t->e[pl->files[i]];
		struct ds__ppart *p = &pl->parts[e->part];
		if (!p->nfiles)
			p->first = i;
		p->nfiles++;
		p->raw += e->size;
		p->replicated = !!(e->flags & DS_EF_REPLICATED);
	}
	pl->pack_id = plan_id(pl);
	return 0;
}

/* ---- broadcast form ----------------------------------------------------- */
/* All ranks run the same binary on the same kind of machine, so the arrays
 * travel as they are in memory, behind a header of counts. */
struct wire {
	uint64_t magic, n, names_len, nfiles, nparts, codec, level, pack_id;
	uint64_t tfiles, tdirs, tlinks, tbytes, nx;
};
#define WIRE_MAGIC 0x6e616c706b737464ull /* "dstkplan" */

void ds__plan_encode(const struct ds__plan *pl, struct ds_buf *out)
{
	const struct ds__tree *t = &pl->tree;
	struct wire w = {WIRE_MAGIC, t->n,      t->names.len, pl->nfiles, pl->nparts,
	                 pl->codec,  pl->level, pl->pack_id,  t->nfiles,  t->ndirs,
	                 t->nlinks,  t->bytes,  t->nx};
	ds_buf_add(out, &w, sizeof(w));
	ds_buf_add(out, t->e, t->n * sizeof(*t->e));
	if (t->nx) /* none: t->x is NULL, which memcpy must not get */
		ds_buf_add(out, t->x, t->nx * sizeof(*t->x));
	ds_buf_add(out, t->names.data, t->names.len);
	ds_buf_add(out, pl->files, pl->nfiles * sizeof(*pl->files));
	ds_buf_add(out, pl->parts, pl->nparts * sizeof(*pl->parts));
}

/* Take n bytes from the buffer into a new allocation. */
static void *take(const char **p, size_t *left, size_t n)
{
	if (n > *left)
		return NULL;
	void *v = ds_xmalloc(n ? n : 1);
	memcpy(v, *p, n);
	*p += n;
	*left -= n;
	return v;
}

int ds__plan_decode(struct ds__plan *pl, const void *buf, size_t len)
{
	struct wire w;
	const char *p = buf;
	memset(pl, 0, sizeof(*pl));
	if (len < sizeof(w))
		return -EPROTO;
	memcpy(&w, p, sizeof(w));
	p += sizeof(w);
	len -= sizeof(w);
	if (w.magic != WIRE_MAGIC || w.n > len / sizeof(struct ds__pentry))
		return -EPROTO;
	struct ds__tree *t = &pl->tree;
	t->n = t->cap = w.n;
	t->e = take(&p, &len, w.n * sizeof(*t->e));
	t->nx = t->xcap = w.nx;
	t->x = w.nx <= len / sizeof(*t->x) ? take(&p, &len, w.nx * sizeof(*t->x)) : NULL;
	t->names.data = take(&p, &len, w.names_len);
	t->names.len = t->names.cap = w.names_len;
	pl->files = w.nfiles <= len / sizeof(*pl->files) ? take(&p, &len, w.nfiles * sizeof(*pl->files)) : NULL;
	pl->parts = w.nparts <= len / sizeof(*pl->parts) ? take(&p, &len, w.nparts * sizeof(*pl->parts)) : NULL;
	pl->nfiles = w.nfiles;
	pl->nparts = (uint32_t)w.nparts;
	pl->codec = (uint32_t)w.codec;
	pl->level = (uint32_t)w.level;
	pl->pack_id = w.pack_id;
	t->nfiles = w.tfiles;
	t->ndirs = w.tdirs;
	t->nlinks = w.tlinks;
	t->bytes = w.tbytes;
	if (!t->e || !t->x || !t->names.data || !pl->files || !pl->parts || len) {
		ds__plan_release(pl);
		return -EPROTO;
	}
	return 0;
}

void ds__plan_release(struct ds__plan *pl)
{
	ds__tree_release(&pl->tree);
	ds_free(&pl->files);
	ds_free(&pl->parts);
	pl->nfiles = pl->nparts = 0;
}
