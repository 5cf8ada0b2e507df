/* SPDX-License-Identifier: BSD-3-Clause */
/* ixbuild.c: the node index's builder (dsindex.h; the format: docs/formats.md
 * "The node store").  index.c reads what this writes.
 *
 * The core takes the entries in path order (ds_path_cmp: '/' below every
 * other byte) and makes each section as they come, holding what the index
 * holds and no path: an entry's row goes where it lies in the output (the
 * index file, or the output buffer after the header's room), its name is
 * front-coded onto the names section; a directory gets its row of the
 * directory table at once, and stays open (a stack of the directories on
 * the last entry's path) until its subtree ends; a run of children is
 * noted where it starts.  At the end the
 * sections after the rows are written behind them (the samples read off
 * the rows: the ids of the files outside --replicate) and the header in
 * front, with the CRC of the whole.  No sort, no second copy of the index.
 *
 * Two ways in.  ds_index_builder_sorted is the core alone: a stage's node
 * leader feeds it the manifest as it streams by (about 10 bytes an entry
 * held: the names, the directories; the 32-byte rows are in the file), so
 * a leader holds what the index holds, not the manifest (issue 27).
 * ds_index_builder_new takes the entries in any order: it keeps each one
 * (a 64-byte record and its path in one arena), and at the build sorts
 * them, lets an implicit directory give way, adds missing parents, then
 * feeds the core.  Both give the same bytes for the same entries. */
#include "dsindex.h"
#include "dscommon.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

/* The rows start right after the header: their place does not depend on
 * anything the entries bring, so they can be written as the entries come. */
#define OFF_ROWS ((uint64_t)sizeof(struct ds_index_header))
_Static_assert(sizeof(struct ds_index_header) % 8 == 0, "rows follow the header");
/* rows the file mode gathers before one write */
#define WBUF_ROWS 2048u

static uint64_t align8(uint64_t n) { return (n + 7) & ~(uint64_t)7; }

/* What an entry brings, from either way in. */
struct ent {
	uint64_t size, poff, stored;
	int64_t mtime_ns;
	uint32_t crc, part, mode;
	uint8_t codec, flags;
	const char *target; /* a symlink's, size bytes and a NUL */
};

/* A directory whose subtree has not ended: its row of the directory table,
 * the length of its path (a prefix of the last entry's), its last child's
 * id + 1 (a child after anything else starts a run). */
struct odir {
	uint32_t row, len, last;
};

struct core {
	int err;  /* sticky: the first failure */
	int done; /* finished: nothing more is added */
	/* rows: into the file (fd >= 0, through wbuf) or into out (memory) */
	int fd;
	char *path, *tmp;
	struct ds_row *wbuf;
	uint32_t wn;
	uint64_t wpos;     /* file offset of wbuf[0] */
	uint32_t rows_crc; /* CRC-32C of the rows after the root's, as written */
	char *out;         /* memory: the output, header room first */
	size_t out_cap;
	struct ds_row root; /* row 0, placed at the end (a root never given takes
	                       the newest mtime of the dataset) */
	int have_root;
	int64_t newest;
	uint64_t n;                         /* entries so far, the root's included */
	uint32_t nwide, nsamples, part_end; /* part_end: largest file partition + 1 */
	struct ds_buf names, blocks, wide, strings, dirs, runs, run_dir;
	/* the last entry's path and where its name starts; the open directories */
	char prev[PATH_MAX];
	size_t prevl, prev_base;
	struct odir stk[PATH_MAX / 2 + 2];
	uint32_t depth;
};

#define DIRS(c) ((struct ds_dir *)(c)->dirs.data)
#define NDIRS(c) ((uint32_t)((c)->dirs.len / sizeof(struct ds_dir)))
#define NRUNS(c) ((uint32_t)((c)->runs.len / sizeof(struct ds_run)))

static void core_free(struct core *c)
{
	if (!c)
		return;
	if (c->fd >= 0) {
		close(c->fd);
		unlink(c->tmp); /* never completed: nothing half-written stays */
	}
	free(c->path);
	free(c->tmp);
	free(c->wbuf);
	free(c->out);
	ds_buf_release(&c->names);
	ds_buf_release(&c->blocks);
	ds_buf_release(&c->wide);
	ds_buf_release(&c->strings);
	ds_buf_release(&c->dirs);
	ds_buf_release(&c->runs);
	ds_buf_release(&c->run_dir);
	free(c);
}

/* A core with the root's place taken: entry 0, directory row 0, its name
 * "" the first of block 0.  path: the rows go to path's temporary file. */
static int core_new(const char *path, struct core **out)
{
	struct core *c = ds_xcalloc(1, sizeof(*c));
	c->fd = -1;
	if (path) {
		char tmp[PATH_MAX];
		c->fd = ds_tmp_create(path, tmp, sizeof(tmp), 0600);
		if (c->fd < 0) {
			int rc = c->fd;
			free(c);
			return rc;
		}
		c->tmp = ds_xstrdup(tmp);
		c->path = ds_xstrdup(path);
		c->wbuf = ds_xmalloc(WBUF_ROWS * sizeof(struct ds_row));
		c->wpos = OFF_ROWS + sizeof(struct ds_row);
	}
	c->n = 1;
	struct ds_dir root = {.nlink = 2};
	ds_buf_add(&c->dirs, &root, sizeof(root));
	uint32_t zero = 0;
	ds_buf_add(&c->blocks, &zero, sizeof(zero));
	ds_buf_add(&c->names, "", 1); /* lead byte 0: nothing shared, nothing added */
	c->stk[0] = (struct odir){0, 0, 0};
	c->depth = 1;
	*out = c;
	return 0;
}

static int flush_rows(struct core *c)
{
	if (!c->wn || c->err)
		return c->err;
	size_t len = (size_t)c->wn * sizeof(struct ds_row);
	c->err = ds_pwrite_full(c->fd, c->wbuf, len, (off_t)c->wpos);
	c->rows_crc = ds_crc32c(c->rows_crc, c->wbuf, len);
	c->wpos += len;
	c->wn = 0;
	return c->err;
}

/* Row id (>= 1, each once, in order) to where it lies. */
static int put_row(struct core *c, uint64_t id, const struct ds_row *r)
{
	if (c->fd >= 0) {
		c->wbuf[c->wn++] = *r;
		return c->wn == WBUF_ROWS ? flush_rows(c) : 0;
	}
	size_t need = OFF_ROWS + (id + 1) * sizeof(*r);
	if (need > c->out_cap) {
		c->out_cap = c->out_cap ? 2 * c->out_cap : 64 << 10;
		while (c->out_cap < need)
			c->out_cap *= 2;
		c->out = ds_xrealloc(c->out, c->out_cap);
	}
	memcpy(c->out + OFF_ROWS + id * sizeof(*r), r, sizeof(*r));
	return 0;
}

/* An entry's row (a file whose fields need more than 40 bits: its wide
 * row, in entry order); dpoff: a directory's row in the directory table,
 * a symlink's target in the string pool. */
static void make_row(struct core *c, const struct ent *e, uint64_t dpoff, struct ds_row *r)
{
	uint64_t size = e->size, poff = e->poff, stored = e->stored;
	unsigned kind = S_ISDIR(e->mode) ? DS_RK_DIR : S_ISLNK(e->mode) ? DS_RK_LINK : DS_RK_FILE;
	if (kind != DS_RK_FILE)
		poff = dpoff, stored = 0;
	if (kind == DS_RK_FILE && (size | poff | stored) >> 40) {
		struct ds_wide w = {size, poff, stored};
		ds_buf_add(&c->wide, &w, sizeof(w));
		kind = DS_RK_WIDE;
		poff = c->nwide++;
		size = stored = 0;
	}
	int file = kind == DS_RK_FILE || kind == DS_RK_WIDE;
	memset(r, 0, sizeof(*r));
	r->mtime_ns = e->mtime_ns;
	r->crc = file ? e->crc : 0;
	r->size_lo = (uint32_t)size;
	r->size_hi = (uint8_t)(size >> 32);
	r->poff_lo = (uint32_t)poff;
	r->poff_hi = (uint8_t)(poff >> 32);
	r->stored_lo = (uint32_t)stored;
	r->stored_hi = (uint8_t)(stored >> 32);
	uint32_t part = file ? e->part : 0;
	r->part[0] = (uint8_t)part;
	r->part[1] = (uint8_t)(part >> 8);
	r->part[2] = (uint8_t)(part >> 16);
	r->mode = (uint16_t)((e->mode & 07777) | kind << 12);
	if (file && e->codec == DS_CODEC_ZLIB)
		r->mode |= DS_RM_ZLIB;
	if (file && (e->flags & DS_EF_REPLICATED))
		r->mode |= DS_RM_REPL;
}

/* Its name, front-coded in its block of DS_IX_BLOCK (index.c's name_decode
 * reads it): a lead byte, shared << 4 | added, or 0xF0 then both as bytes;
 * then the added bytes. */
static void put_name(struct core *c, uint64_t id, const char *nm, size_t nl)
{
	size_t pre = 0;
	if (id % DS_IX_BLOCK == 0) {
		uint32_t at = (uint32_t)c->names.len;
		ds_buf_add(&c->blocks, &at, sizeof(at));
	} else {
		const char *pn = c->prev + c->prev_base;
		size_t pl = c->prevl - c->prev_base;
		while (pre < nl && pre < pl && nm[pre] == pn[pre])
			pre++;
	}
	size_t suf = nl - pre;
	unsigned char lead[3] = {0xf0, (unsigned char)pre, (unsigned char)suf};
	if (pre < 15 && suf < 16) {
		lead[0] = (unsigned char)(pre << 4 | suf);
		ds_buf_add(&c->names, lead, 1);
	} else {
		ds_buf_add(&c->names, lead, 3);
	}
	ds_buf_add(&c->names, nm + pre, suf);
}

/* Entry n = (path, len), its parent the open directory on top: every
 * section's part of it. */
static int put(struct core *c, const char *path, size_t len, size_t base, const struct ent *e)
{
	uint64_t id = c->n;
	struct odir *up = &c->stk[c->depth - 1];
	struct ds_dir *pd = &DIRS(c)[up->row];
	const char *nm = path + base;
	size_t nl = len - base;
	if (id >= UINT32_MAX - 1)
		return -EOVERFLOW;
	if (S_ISDIR(e->mode) && c->depth > PATH_MAX / 2)
		return -ENAMETOOLONG;
	put_name(c, id, nm, nl);
	/* a run of the parent's children starts here unless the child before
	 * came right before */
	if (up->last != id) {
		struct ds_run r = {(uint32_t)id, pd->nchildren, {0}};
		memcpy(r.key, nm, nl < 8 ? nl : 8);
		ds_buf_add(&c->runs, &r, sizeof(r));
		ds_buf_add(&c->run_dir, &up->row, sizeof(up->row));
		pd->nruns++;
	}
	up->last = (uint32_t)id + 1;
	pd->nchildren++;
	uint64_t dpoff = 0;
	if (S_ISDIR(e->mode)) {
		uint32_t row = NDIRS(c);
		struct ds_dir d = {.id = (uint32_t)id,
		                   .pdir = up->row,
		                   .nlink = 2,
		                   .plen = (uint32_t)len};
		pd->nlink++;
		ds_buf_add(&c->dirs, &d, sizeof(d)); /* pd may have moved */
		c->stk[c->depth++] = (struct odir){row, (uint32_t)len, 0};
		dpoff = row;
	} else if (S_ISLNK(e->mode)) {
		dpoff = c->strings.len;
		ds_buf_add(&c->strings, e->target, e->size + 1);
	} else {
		c->nsamples += !(e->flags & DS_EF_REPLICATED);
		if (e->part >= c->part_end)
			c->part_end = e->part + 1;
	}
	if (e->mtime_ns > c->newest)
		c->newest = e->mtime_ns;
	struct ds_row r;
	make_row(c, e, dpoff, &r);
	int rc = put_row(c, id, &r);
	if (rc)
		return rc;
	memcpy(c->prev, path, len);
	c->prevl = len;
	c->prev_base = base;
	c->n++;
	return 0;
}

/* ds_path_cmp over (a, al) and (b, bl): a prefix first, '/' just above it */
static int path_cmp_n(const char *a, size_t al, const char *b, size_t bl)
{
	size_t m = al < bl ? al : bl;
	for (size_t i = 0; i < m; i++) {
		unsigned ca = (unsigned char)a[i], cb = (unsigned char)b[i];
		if (ca != cb) {
			ca = ca == '/' ? 1 : ca + 1;
			cb = cb == '/' ? 1 : cb + 1;
			return ca < cb ? -1 : 1;
		}
	}
	return (al > bl) - (al < bl);
}

/* The next entry, after the last one in path order: the open directories
 * that are not its parents close (their subtree ends here), a missing parent
 * is added as a 0755 directory, then the entry. */
static int core_add(struct core *c, const char *path, size_t len, const struct ent *e)
{
	if (c->err || c->done)
		return c->err ? c->err : -EINVAL;
	if (!len) {
		/* the root: first or never (a pack records none) */
		if (c->n > 1 || c->have_root)
			return c->have_root ? -EEXIST : -EINVAL;
		c->have_root = 1;
		if (e->mtime_ns > c->newest)
			c->newest = e->mtime_ns;
		make_row(c, e, 0, &c->root);
		return 0;
	}
	if (c->n > 1) {
		int o = path_cmp_n(c->prev, c->prevl, path, len);
		if (o >= 0)
			return o ? -EINVAL : -EEXIST;
	}
	while (c->depth > 1) {
		const struct odir *t = &c->stk[c->depth - 1];
		if (t->len < len && path[t->len] == '/' && !memcmp(c->prev, path, t->len))
			break;
		DIRS(c)[t->row].end = (uint32_t)c->n;
		c->depth--;
	}
	const char *slash = memrchr(path, '/', len);
	size_t base = slash ? (size_t)(slash - path) + 1 : 0, dl = base ? base - 1 : 0;
	/* A parent that is missing sorts after the last entry: one before it
	 * would hold that entry in its subtree, and be open.  Unless the last
	 * entry is that parent, and not a directory. */
	size_t have = c->stk[c->depth - 1].len;
	if (have < dl) {
		const char *next = memchr(path + have + !!have, '/', dl - have);
		size_t k = next ? (size_t)(next - path) : dl;
		if (c->n > 1 && c->prevl == k && !memcmp(c->prev, path, k))
			return -ENOTDIR;
	}
	while (have < dl) {
		const char *next = memchr(path + have + !!have, '/', dl - have);
		size_t k = next ? (size_t)(next - path) : dl;
		const char *ps = memrchr(path, '/', k);
		struct ent d = {.mode = S_IFDIR | 0755, .size = 4096, .part = UINT32_MAX};
		int rc = put(c, path, k, ps ? (size_t)(ps - path) + 1 : 0, &d);
		if (rc)
			return c->err = rc;
		have = k;
	}
	/* a failure from here on leaves the builder failed: the directories
	 * closed above may have been the next entry's */
	int rc = put(c, path, len, base, e);
	return rc ? (c->err = rc) : 0;
}

/* ---- the builder -------------------------------------------------------- */
/* An entry kept by the any-order builder: its fields and its path in the
 * arena (a symlink's target right after it). */
struct bent {
	uint64_t path; /* arena offset */
	uint64_t size, poff, stored;
	int64_t mtime_ns;
	uint32_t crc, part, mode;
	uint16_t len;      /* path length */
	uint16_t base_off; /* offset of the last component */
	uint8_t codec, flags, implicit, link;
};

/* A location as added: sorted by partition, then node (loc_cmp reads the
 * two first) when the index is written. */
struct bloc {
	uint32_t part, node;
	uint64_t base;
	uint32_t tier;
};

struct ds_index_builder {
	struct core *core; /* sorted: the entries go straight in */
	int sorted;
	/* any order: every entry kept */
	struct bent *v;
	size_t n, cap;
	struct ds_buf arena;
	/* the rest of the index */
	uint64_t *part_size;
	uint32_t nparts;
	struct bloc *locs;
	size_t nlocs, locs_cap;
	uint32_t node, nnodes;
	uint64_t store_size, pack_id;
	char job[64];
	uint64_t ram_size; /* UINT64_MAX: the whole store (no spill tier) */
	char *spill_root;
};

static const char *bpath(const struct ds_index_builder *b, const struct bent *x)
{
	return b->arena.data + x->path;
}

struct ds_index_builder *ds_index_builder_new(void)
{
	struct ds_index_builder *b = ds_xcalloc(1, sizeof(*b));
	b->nnodes = 1;
	b->ram_size = UINT64_MAX;
	return b;
}

int ds_index_builder_sorted(const char *path, struct ds_index_builder **out)
{
	struct ds_index_builder *b = ds_index_builder_new();
	int rc = core_new(path, &b->core);
	if (rc) {
		free(b);
		return rc;
	}
	b->sorted = 1;
	*out = b;
	return 0;
}

void ds_index_builder_free(struct ds_index_builder *b)
{
	if (!b)
		return;
	core_free(b->core);
	free(b->v);
	ds_buf_release(&b->arena);
	free(b->part_size);
	free(b->locs);
	free(b->spill_root);
	free(b);
}

/* A new entry for path: to the core, or kept (its target after it). */
static int add(struct ds_index_builder *b, const char *path, const struct ent *e)
{
	size_t len = strlen(path);
	if (len) {
		const char *why;
		int rc = ds_name_check(path, len, &why);
		if (!rc && ds_name_reserved(path, len, &why))
			rc = -DS_ENAME;
		if (rc)
			return rc;
	}
	if (len >= PATH_MAX)
		return -ENAMETOOLONG;
	if (b->sorted)
		return core_add(b->core, path, len, e);
	if (b->n == b->cap) {
		b->cap = b->cap ? b->cap + b->cap / 2 : 1024;
		b->v = ds_xrealloc(b->v, b->cap * sizeof(*b->v));
	}
	struct bent *x = &b->v[b->n++];
	memset(x, 0, sizeof(*x));
	x->path = b->arena.len;
	x->len = (uint16_t)len;
	const char *slash = memrchr(path, '/', len);
	x->base_off = slash ? (uint16_t)(slash - path + 1) : 0;
	ds_buf_add(&b->arena, path, len + 1);
	if (e->target) {
		ds_buf_add(&b->arena, e->target, e->size + 1);
		x->link = 1;
	}
	x->size = e->size;
	x->poff = e->poff;
	x->stored = e->stored;
	x->mtime_ns = e->mtime_ns;
	x->crc = e->crc;
	x->part = e->part;
	x->mode = e->mode;
	x->codec = e->codec;
	x->flags = e->flags;
	return 0;
}

int ds_index_add_dir(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                     uint64_t size)
{
	if (size >> 40)
		return -EFBIG; /* a directory's row holds 40 bits of st_size */
	struct ent e = {.mode = S_IFDIR | (mode & 07777),
	                .mtime_ns = mtime_ns,
	                .size = size,
	                .part = UINT32_MAX};
	return add(b, path, &e);
}

int ds_index_add_file(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                      uint64_t size, uint32_t part, uint64_t poff, uint64_t stored, uint8_t codec,
                      uint32_t crc, uint8_t flags)
{
	if (!*path)
		return -DS_ENAME;
	if (part > DS_IX_MAX_PART)
		return -EOVERFLOW; /* a row holds 24 bits of partition number */
	struct ent e = {.mode = S_IFREG | (mode & 07777),
	                .mtime_ns = mtime_ns,
	                .size = size,
	                .part = part,
	                .poff = poff,
	                .stored = stored,
	                .codec = codec,
	                .crc = crc,
	                .flags = flags & DS_EF_REPLICATED};
	return add(b, path, &e);
}

int ds_index_add_symlink(struct ds_index_builder *b, const char *path, int64_t mtime_ns,
                         const char *target)
{
	if (!*path)
		return -DS_ENAME;
	/* only targets that stay inside the tree (dsindex.h): a pack that says
	 * otherwise is refused here too, not only by the pack reader */
	if (ds_target_check(path, strlen(path), target, strlen(target), NULL))
		return -DS_ENAME;
	struct ent e = {.mode = S_IFLNK | 0777,
	                .mtime_ns = mtime_ns,
	                .size = strlen(target),
	                .part = UINT32_MAX,
	                .target = target};
	return add(b, path, &e);
}

void ds_index_set_parts(struct ds_index_builder *b, uint32_t nparts, const uint64_t *sizes)
{
	free(b->part_size);
	b->nparts = nparts;
	b->part_size = ds_xcalloc(nparts ? nparts : 1, sizeof(uint64_t));
	if (nparts)
		memcpy(b->part_size, sizes, nparts * sizeof(uint64_t));
}

void ds_index_add_loc(struct ds_index_builder *b, uint32_t part, uint32_t node, uint64_t base)
{
	ds_index_add_loc_tier(b, part, node, base, DS_TIER_RAM);
}

void ds_index_set_spill(struct ds_index_builder *b, uint64_t ram_size, const char *spill_root)
{
	free(b->spill_root);
	b->spill_root = spill_root ? ds_xstrdup(spill_root) : NULL;
	b->ram_size = spill_root ? ram_size : UINT64_MAX;
}

void ds_index_add_loc_tier(struct ds_index_builder *b, uint32_t part, uint32_t node, uint64_t base,
                           uint32_t tier)
{
	if (b->nlocs == b->locs_cap) {
		b->locs_cap = b->locs_cap ? 2 * b->locs_cap : 64;
		b->locs = ds_xrealloc(b->locs, b->locs_cap * sizeof(*b->locs));
	}
	b->locs[b->nlocs].part = part;
	b->locs[b->nlocs].node = node;
	b->locs[b->nlocs].base = base;
	b->locs[b->nlocs].tier = tier;
	b->nlocs++;
}

void ds_index_set_node(struct ds_index_builder *b, uint32_t node, uint32_t nnodes,
                       uint64_t store_size, const char *job, uint64_t pack_id)
{
	b->node = node;
	b->nnodes = nnodes;
	b->store_size = store_size;
	b->pack_id = pack_id;
	snprintf(b->job, sizeof(b->job), "%s", job ? job : "");
}

static int bent_cmp(const void *x, const void *y, void *arg)
{
	const struct ds_index_builder *b = arg;
	const struct bent *p = x, *q = y;
	return path_cmp_n(bpath(b, p), p->len, bpath(b, q), q->len);
}

static int loc_cmp(const void *x, const void *y)
{
	const uint32_t *a = x, *b = y; /* part, node */
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* Binary search of (path, len) in the first n sorted entries. */
static int64_t bfind(const struct ds_index_builder *b, size_t n, const char *path, size_t len)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = path_cmp_n(bpath(b, &b->v[mid]), b->v[mid].len, path, len);
		if (!c)
			return mid;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* Any order, at the build: the root (when none was given), every entry
 * sorted by path, each path once (an implicit directory gives way), and
 * every missing parent directory added (0755). */
static int build_complete(struct ds_index_builder *b)
{
	int rc, have_root = 0;
	for (size_t i = 0; i < b->n && !have_root; i++)
		have_root = !b->v[i].len;
	/* A pack records no entry for its root: the mount root's mtime is the
	 * newest of the dataset's (when its content last changed, as S3
	 * listings give a prefix), the same on every node, not 1970. */
	int64_t newest = 0;
	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].mtime_ns > newest)
			newest = b->v[i].mtime_ns;
	if (!have_root && (rc = ds_index_add_dir(b, "", 0755, newest, 4096)))
		return rc;
	for (;;) {
		qsort_r(b->v, b->n, sizeof(*b->v), bent_cmp, b);
		size_t w = 1;
		for (size_t i = 1; i < b->n; i++) {
			struct bent *x = &b->v[i], *y = &b->v[w - 1];
			if (path_cmp_n(bpath(b, x), x->len, bpath(b, y), y->len)) {
				b->v[w++] = *x;
				continue;
			}
			/* the same path twice: fine only for implicit directories */
			if (x->implicit && S_ISDIR(y->mode))
				continue;
			if (y->implicit && S_ISDIR(x->mode)) {
				*y = *x;
				continue;
			}
			return -EEXIST;
		}
		b->n = w;
		size_t n0 = b->n, missing = 0, last = 0; /* last: the implicit one added last */
		char dir[PATH_MAX];
		for (size_t i = 1; i < n0; i++) {
			size_t dl = b->v[i].base_off;
			if (!dl)
				continue;
			/* entries are sorted: the files of a missing directory come
			 * together, and it is added once, not once per file */
			if (missing && b->v[last].len == dl - 1 &&
			    !memcmp(bpath(b, &b->v[last]), bpath(b, &b->v[i]), dl - 1))
				continue;
			if (bfind(b, n0, bpath(b, &b->v[i]), dl - 1) >= 0)
				continue;
			/* a copy: the arena may move when the directory is added */
			memcpy(dir, bpath(b, &b->v[i]), dl - 1);
			dir[dl - 1] = 0;
			if ((rc = ds_index_add_dir(b, dir, 0755, 0, 4096)))
				return rc;
			b->v[b->n - 1].implicit = 1; /* may repeat */
			last = b->n - 1;
			missing++;
		}
		if (!missing)
			break;
	}
	for (size_t i = 0; i < b->n; i++)
		b->v[i].implicit = 0;
	return b->n > UINT32_MAX - 1 ? -EOVERFLOW : 0;
}

/* Any order, at the build: the kept entries, completed, go through a core
 * (path: into its file) and are let go; the builder is a sorted one from
 * then on. */
static int to_core(struct ds_index_builder *b, const char *path)
{
	int rc = build_complete(b);
	if (rc || (rc = core_new(path, &b->core)))
		return rc;
	for (size_t i = 0; i < b->n && !rc; i++) {
		const struct bent *x = &b->v[i];
		struct ent e = {.size = x->size,
		                .poff = x->poff,
		                .stored = x->stored,
		                .mtime_ns = x->mtime_ns,
		                .crc = x->crc,
		                .part = x->part,
		                .mode = x->mode,
		                .codec = x->codec,
		                .flags = x->flags,
		                .target = x->link ? bpath(b, x) + x->len + 1 : NULL};
		rc = core_add(b->core, bpath(b, x), x->len, &e);
	}
	ds_free(&b->v);
	b->n = b->cap = 0;
	ds_buf_release(&b->arena);
	b->sorted = 1;
	return rc ? (b->core->err = rc) : 0;
}

/* ---- the end: header, sections, CRC ------------------------------------- */
/* Where the sections after the rows go, with the CRC of all before them. */
struct sink {
	char *buf; /* memory */
	int fd;    /* or the file */
	uint64_t pos;
	uint32_t crc;
	int err;
};

static void sink_put(struct sink *s, const void *p, size_t len)
{
	if (!len || s->err)
		return;
	if (s->buf)
		memcpy(s->buf + s->pos, p, len);
	else
		s->err = ds_pwrite_full(s->fd, p, len, (off_t)s->pos);
	s->crc = ds_crc32c(s->crc, p, len);
	s->pos += len;
}

/* zeros up to off (the padding to a section's 8-byte boundary) */
static void sink_to(struct sink *s, uint64_t off)
{
	static const char zero[8];
	while (s->pos < off)
		sink_put(s, zero, off - s->pos < 8 ? off - s->pos : 8);
}

/* The last of the core: every open directory ends, the root's row, the
 * name blocks' end. */
static void core_close(struct core *c)
{
	if (c->done)
		return;
	c->done = 1;
	while (c->depth)
		DIRS(c)[c->stk[--c->depth].row].end = (uint32_t)c->n;
	if (!c->have_root) {
		struct ent e = {.mode = S_IFDIR | 0755, .mtime_ns = c->newest, .size = 4096};
		make_row(c, &e, 0, &c->root);
	}
	uint32_t end = (uint32_t)c->names.len;
	ds_buf_add(&c->blocks, &end, sizeof(end));
}

/* The header: every section's place. */
static int layout(const struct ds_index_builder *b, const struct core *c, struct ds_index_header *h)
{
	uint64_t n = c->n, names_size = c->names.len;
	uint64_t strings = c->strings.len + (b->spill_root ? strlen(b->spill_root) + 1 : 0) + 1;
	if (names_size > UINT32_MAX || strings > UINT32_MAX)
		return -EOVERFLOW;
	if (b->spill_root && strlen(b->spill_root) >= PATH_MAX)
		return -ENAMETOOLONG;
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, DS_INDEX_MAGIC, 8);
	h->version = DS_INDEX_VERSION;
	h->header_size = sizeof(*h);
	h->node = b->node;
	h->nnodes = b->nnodes;
	h->nentries = (uint32_t)n;
	h->nparts = b->nparts;
	h->nlocs = (uint32_t)b->nlocs;
	h->nsamples = c->nsamples;
	h->ndirs = NDIRS(c);
	h->nruns = NRUNS(c);
	h->nwide = c->nwide;
	uint64_t off = OFF_ROWS;
	h->off_rows = off;
	off = align8(off + n * sizeof(struct ds_row));
	h->off_dirs = off;
	off = align8(off + c->dirs.len);
	h->off_runs = off;
	off = align8(off + c->runs.len);
	h->off_wide = off;
	off = align8(off + c->wide.len);
	h->off_blocks = off;
	off = align8(off + c->blocks.len);
	h->off_names = off;
	off = align8(off + names_size);
	h->names_size = names_size;
	h->off_parts = off;
	off = align8(off + (uint64_t)b->nparts * sizeof(struct ds_part));
	h->off_locs = off;
	off = align8(off + (uint64_t)b->nlocs * sizeof(struct ds_loc));
	h->off_samples = off;
	off = align8(off + (uint64_t)c->nsamples * 4);
	h->off_strings = off;
	off = align8(off + strings);
	h->strings_size = strings;
	h->total_size = off;
	h->store_size = b->store_size;
	h->pack_id = b->pack_id;
	h->dev = makedev(0xd5, (unsigned)(b->pack_id & 0xfffff));
	h->uid = geteuid();
	h->gid = getegid();
	memcpy(h->job, b->job, sizeof(h->job));
	h->ram_size = b->ram_size < b->store_size ? b->ram_size : b->store_size;
	h->spill_dir = UINT32_MAX;
	if (b->spill_root) {
		h->spill_dir = (uint32_t)(strings - 1 - strlen(b->spill_root) - 1);
		h->spill_dir_len = (uint32_t)strlen(b->spill_root);
	}
	if (h->ram_size < h->store_size && (!b->spill_root || h->ram_size % DS_SPILL_ALIGN))
		return -EINVAL;
	if (b->nlocs > UINT32_MAX)
		return -EOVERFLOW;
	if (c->part_end > b->nparts)
		return -DS_ECORRUPT; /* a file in a partition the index does not have */
	for (size_t i = 0; i < b->nlocs; i++)
		if (b->locs[i].part >= b->nparts || b->locs[i].node >= b->nnodes)
			return -DS_ECORRUPT;
	return 0;
}

/* The samples: the ids of the files outside --replicate, read off the rows
 * (in the output buffer, or back from the file: pages just written), not
 * held beside them. */
static void emit_samples(const struct core *c, struct sink *s)
{
	enum { PIECE = 4096 };
	uint32_t ids[PIECE];
	struct ds_row *back = c->fd >= 0 ? ds_xmalloc(PIECE * sizeof(*back)) : NULL;
	for (uint64_t i0 = 1; i0 < c->n && !s->err; i0 += PIECE) {
		uint32_t m = c->n - i0 < PIECE ? (uint32_t)(c->n - i0) : PIECE, k = 0;
		const struct ds_row *r = back;
		if (back)
			s->err = ds_pread_full(c->fd, back, m * sizeof(*back),
			                       (off_t)(OFF_ROWS + i0 * sizeof(*back)));
		else
			r = (const struct ds_row *)(s->buf + OFF_ROWS) + i0;
		for (uint32_t j = 0; j < m; j++) {
			unsigned kind = (r[j].mode >> 12) & 3u;
			if ((kind == DS_RK_FILE || kind == DS_RK_WIDE) && !(r[j].mode & DS_RM_REPL))
				ids[k++] = (uint32_t)(i0 + j);
		}
		sink_put(s, ids, (size_t)k * sizeof(*ids));
	}
	free(back);
}

/* The sections after the rows, in order, from h->off_dirs to the end. */
static void emit_tail(struct ds_index_builder *b, struct core *c, const struct ds_index_header *h,
                      struct sink *s)
{
	/* each directory's runs, in its order: the runs came in entry order */
	uint32_t nd = NDIRS(c), nr = NRUNS(c), at = 0;
	struct ds_dir *D = DIRS(c);
	const struct ds_run *R = (const void *)c->runs.data;
	const uint32_t *rd = (const void *)c->run_dir.data;
	struct ds_run *sorted = ds_xmalloc(((size_t)nr + 1) * sizeof(*sorted));
	for (uint32_t x = 0; x < nd; x++) {
		D[x].run = at;
		at += D[x].nruns;
		D[x].nruns = 0;
	}
	for (uint32_t i = 0; i < nr; i++)
		sorted[D[rd[i]].run + D[rd[i]].nruns++] = R[i];
	sink_put(s, D, c->dirs.len);
	sink_to(s, h->off_runs);
	sink_put(s, sorted, (size_t)nr * sizeof(*sorted));
	free(sorted);
	sink_to(s, h->off_wide);
	sink_put(s, c->wide.data, c->wide.len);
	sink_to(s, h->off_blocks);
	sink_put(s, c->blocks.data, c->blocks.len);
	sink_to(s, h->off_names);
	sink_put(s, c->names.data, c->names.len);
	sink_to(s, h->off_parts);
	/* locations by partition, then node */
	if (b->nlocs) /* qsort(NULL, 0) is undefined (a pack without files) */
		qsort(b->locs, b->nlocs, sizeof(*b->locs), loc_cmp);
	struct ds_part *P = ds_xcalloc((size_t)b->nparts + 1, sizeof(*P));
	struct ds_loc *L = ds_xcalloc(b->nlocs + 1, sizeof(*L));
	for (uint32_t i = 0; i < b->nparts; i++)
		P[i].size = b->part_size[i];
	for (size_t i = 0; i < b->nlocs; i++) {
		uint32_t p = b->locs[i].part;
		if (P[p].nloc == 0)
			P[p].loc = (uint32_t)i;
		P[p].nloc++;
		L[i].node = b->locs[i].node;
		L[i].base = b->locs[i].base;
		L[i].tier = b->locs[i].tier;
	}
	sink_put(s, P, (size_t)b->nparts * sizeof(*P));
	sink_to(s, h->off_locs);
	sink_put(s, L, b->nlocs * sizeof(*L));
	free(P);
	free(L);
	sink_to(s, h->off_samples);
	emit_samples(c, s);
	sink_to(s, h->off_strings);
	sink_put(s, c->strings.data, c->strings.len);
	if (b->spill_root)
		sink_put(s, b->spill_root, h->spill_dir_len + 1);
	sink_to(s, h->total_size);
}

/* The whole index from a core: into a malloc'd buffer (*out), or, for a
 * core with a file, completed there and renamed to its path. */
static int finish(struct ds_index_builder *b, struct core *c, void **out, size_t *len)
{
	struct ds_index_header h;
	int rc = c->err;
	if (rc)
		return rc;
	if (c->done)
		return -EINVAL; /* once: the rows are the output */
	core_close(c);
	if ((rc = layout(b, c, &h)) || (c->fd >= 0 && (rc = flush_rows(c))))
		return rc;
	struct sink s = {.fd = c->fd, .pos = h.off_dirs};
	if (c->fd < 0) {
		/* the rows are in place after the header's room: the rest after them */
		char *buf = ds_xrealloc(c->out, h.total_size);
		c->out = NULL;
		c->out_cap = 0;
		memcpy(buf, &h, sizeof(h));
		memcpy(buf + OFF_ROWS, &c->root, sizeof(c->root));
		s.buf = buf;
		s.crc = ds_crc32c(0, buf, h.off_dirs);
		emit_tail(b, c, &h, &s);
		((struct ds_index_header *)buf)->crc = s.crc;
		*out = buf;
		*len = h.total_size;
		return 0;
	}
	/* the file: the CRC of the header and the root's row, then of the rows
	 * written, then on through the rest */
	s.crc = ds_crc32c(ds_crc32c(0, &h, sizeof(h)), &c->root, sizeof(c->root));
	s.crc = ds_crc32c_combine(s.crc, c->rows_crc, (c->n - 1) * sizeof(struct ds_row));
	emit_tail(b, c, &h, &s);
	h.crc = s.crc;
	rc = s.err;
	if (!rc)
		rc = ds_pwrite_full(c->fd, &h, sizeof(h), 0);
	if (!rc)
		rc = ds_pwrite_full(c->fd, &c->root, sizeof(c->root), (off_t)OFF_ROWS);
	if (!rc && fsync(c->fd) < 0)
		rc = -errno;
	if (close(c->fd) < 0 && !rc)
		rc = -errno;
	c->fd = -1;
	if (!rc && rename(c->tmp, c->path) < 0)
		rc = -errno;
	if (rc)
		unlink(c->tmp);
	return c->err = rc;
}

int ds_index_build(struct ds_index_builder *b, void **out, size_t *len)
{
	int rc = b->sorted ? 0 : to_core(b, NULL);
	if (rc)
		return rc;
	/* a builder with a file completes it (ds_index_write) */
	return b->core->fd >= 0 ? -EINVAL : finish(b, b->core, out, len);
}

int ds_index_write(struct ds_index_builder *b, const char *path)
{
	int rc = b->sorted ? 0 : to_core(b, path);
	if (rc)
		return rc;
	if (b->core->fd >= 0) {
		rc = strcmp(path, b->core->path) ? -EINVAL : finish(b, b->core, NULL, NULL);
	} else {
		void *buf;
		size_t len;
		if ((rc = finish(b, b->core, &buf, &len)))
			return rc;
		rc = ds_write_file_atomic(path, buf, len, 0600);
		free(buf);
	}
	if (!rc)
		ds_index_hugify(path); /* best effort: 4 KiB pages work */
	return rc;
}
