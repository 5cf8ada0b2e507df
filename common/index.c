/* SPDX-License-Identifier: BSD-3-Clause */
/* index.c: the node-local index (see dsindex.h): build, write, map, look up. */
#include "dsindex.h"
#include "dscommon.h"

#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

uint64_t ds_hash_path(const char *p, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 0x100000001b3ull;
	}
	return h ^ (h >> 29);
}

/* ---- reading ------------------------------------------------------------ */
static int in_bounds(uint64_t off, uint64_t count, uint64_t size, uint64_t total)
{
	if (off % 8 || off > total)
		return 0;
	if (size && count > (total - off) / size)
		return 0;
	return 1;
}

static uint64_t row_poff(const struct ds_row *r) { return ds__ix40(r->poff_lo, r->poff_hi); }
static unsigned row_kind(const struct ds_row *r) { return (r->mode >> 12) & 3u; }

/* Decode names of block `b` up to entry `upto` (an index inside the block)
 * into name (NAME_MAX + 1 bytes): its length, or -1 when the block is
 * damaged (offsets outside the section, a length past NAME_MAX, a prefix
 * longer than the name before it).  Each name is a lead byte (high nibble
 * the bytes shared with the name before it in the block, low nibble the
 * bytes that follow; 0xF_: two bytes, shared then following, come next),
 * then the following bytes. */
#define nstream ds_ix_names /* the decoder's state (dsindex.h: pos, end, len, name) */

/* Start decoding block b: 0, or -1 when its offsets are outside the names. */
static int ns_block(const struct ds_index *ix, uint64_t b, struct nstream *s)
{
	s->pos = ix->blocks[b];
	s->end = ix->blocks[b + 1];
	s->len = 0;
	return s->pos <= s->end && s->end <= ix->h->names_size ? 0 : -1;
}

/* The next name of the block (first: the first of the block) into
 * s->name: its length, or -1 when damaged. */
static int ns_next(const struct ds_index *ix, struct nstream *s, int first)
{
	if (s->pos >= s->end)
		return -1;
	unsigned lead = ix->names[s->pos++], pre, suf;
	if (lead >> 4 == 15) {
		if (s->end - s->pos < 2)
			return -1;
		pre = ix->names[s->pos];
		suf = ix->names[s->pos + 1];
		s->pos += 2;
	} else {
		pre = lead >> 4;
		suf = lead & 15;
	}
	if (pre > s->len || (first && pre) || pre + suf > NAME_MAX || suf > s->end - s->pos)
		return -1;
	memcpy(s->name + pre, ix->names + s->pos, suf);
	s->pos += suf;
	s->len = pre + suf;
	s->name[s->len] = 0;
	return (int)s->len;
}

/* Decode names of block `b` up to entry `upto` (an index inside the block)
 * into name (NAME_MAX + 1 bytes): its length, or -1 when the block is
 * damaged (offsets outside the section, a length past NAME_MAX, a prefix
 * longer than the name before it).  Each name is a lead byte (high nibble
 * the bytes shared with the name before it in the block, low nibble the
 * bytes that follow; 0xF_: two bytes, shared then following, come next),
 * then the following bytes. */
static int name_decode(const struct ds_index *ix, uint64_t b, unsigned upto, char *name)
{
	struct nstream s;
	int len = -1;
	if (ns_block(ix, b, &s))
		return -1;
	for (unsigned j = 0; j <= upto; j++)
		if ((len = ns_next(ix, &s, j == 0)) < 0)
			return -1;
	memcpy(name, s.name, (size_t)len + 1);
	return len;
}

static int name_of(const struct ds_index *ix, uint32_t id, char *name)
{
	return name_decode(ix, id / DS_IX_BLOCK, id % DS_IX_BLOCK, name);
}

/* a component a path may hold: no '/', no NUL, not "." or ".." */
static int component_ok(const char *s, size_t n)
{
	return n && n <= NAME_MAX && !memchr(s, '/', n) && !memchr(s, 0, n) &&
	       !(s[0] == '.' && (n == 1 || (n == 2 && s[1] == '.')));
}

/* path length of a child named nl bytes of a directory whose path is plen */
static uint64_t join_len(uint64_t plen, uint64_t nl) { return plen ? plen + 1 + nl : nl; }

/* Is directory row x safe to follow (bounded, O(1))? */
static int dir_ok(const struct ds_index *ix, uint64_t x)
{
	const struct ds_index_header *h = ix->h;
	if (x >= h->ndirs)
		return 0;
	const struct ds_dir *d = &ix->dirs[x];
	return d->id < h->nentries && row_kind(&ix->rows[d->id]) == DS_RK_DIR &&
	       row_poff(&ix->rows[d->id]) == x && (x ? d->pdir < x : d->pdir == 0) &&
	       d->end > d->id && d->end <= h->nentries && d->nchildren < h->nentries &&
	       d->run <= h->nruns && d->nruns <= h->nruns - d->run && d->nruns <= d->nchildren &&
	       d->plen < PATH_MAX;
}

static _Atomic uint32_t parent_hint;

/* Is directory row x the parent of entry id (not a directory: a
 * directory's parent is in its own row), by the directory table alone: id
 * inside x's subtree with no directory row between them? */
static int parent_fits(const struct ds_index *ix, uint32_t x, uint32_t id)
{
	const struct ds_index_header *h = ix->h;
	return x < h->ndirs && ix->dirs[x].id < id && id < ix->dirs[x].end &&
	       (x + 1 >= h->ndirs || ix->dirs[x + 1].id > id) && (x ? ix->dirs[x].pdir < x : 1);
}

/* The directory row of id's parent, or UINT32_MAX (damaged). */
static uint32_t parent_dir(const struct ds_index *ix, uint32_t id)
{
	const struct ds_index_header *h = ix->h;
	if (id == 0 || id >= h->nentries || !h->ndirs)
		return 0;
	const struct ds_row *r = &ix->rows[id];
	if (row_kind(r) == DS_RK_DIR) {
		uint64_t x = row_poff(r);
		return x < h->ndirs && x ? ix->dirs[x].pdir : UINT32_MAX;
	}
	/* the directory found last, when id is inside its subtree with no
	 * directory between (readdir, a walk: the children of one directory
	 * one after the other); a hint shared by every index and thread,
	 * checked before use */
	uint32_t x = atomic_load_explicit(&parent_hint, memory_order_relaxed);
	if (parent_fits(ix, x, id))
		return x;
	/* the last directory before id, then up its parents until one's
	 * subtree holds id; a parent row is always below its child's, so the
	 * climb ends */
	uint32_t lo = 0, hi = h->ndirs;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ix->dirs[mid].id < id)
			lo = mid;
		else
			hi = mid;
	}
	x = lo;
	while (x && id >= ix->dirs[x].end) {
		if (ix->dirs[x].pdir >= x)
			return UINT32_MAX;
		x = ix->dirs[x].pdir;
	}
	atomic_store_explicit(&parent_hint, x, memory_order_relaxed);
	return x;
}

uint32_t ds_ix_parent(const struct ds_index *ix, uint32_t id)
{
	uint32_t x = parent_dir(ix, id);
	return x < ix->h->ndirs ? ix->dirs[x].id : 0;
}

uint32_t ds_ix_child(const struct ds_index *ix, uint32_t id, uint32_t k)
{
	const struct ds_index_header *h = ix->h;
	uint64_t x = row_poff(&ix->rows[id]);
	if (x >= h->ndirs)
		return UINT32_MAX;
	const struct ds_dir *d = &ix->dirs[x];
	if (k >= d->nchildren || !d->nruns || d->run > h->nruns || d->nruns > h->nruns - d->run)
		return UINT32_MAX;
	/* the last run whose first child is at or before k */
	const struct ds_run *R = ix->runs + d->run;
	uint32_t lo = 0, hi = d->nruns;
	while (hi - lo > 1) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (R[mid].cum <= k)
			lo = mid;
		else
			hi = mid;
	}
	if (R[lo].cum > k)
		return UINT32_MAX;
	uint64_t c = (uint64_t)R[lo].first + (k - R[lo].cum);
	return c < h->nentries ? (uint32_t)c : UINT32_MAX;
}

const char *ds_ix_base(const struct ds_index *ix, uint32_t id, char *buf)
{
	if (name_of(ix, id, buf) < 0)
		buf[0] = 0;
	return buf;
}

size_t ds_ix_base_len(const struct ds_index *ix, uint32_t id)
{
	char name[DS_IX_NAME_BUF];
	int n = name_of(ix, id, name);
	return n < 0 ? 0 : (size_t)n;
}

size_t ds_ix_path_len(const struct ds_index *ix, uint32_t id)
{
	if (row_kind(&ix->rows[id]) == DS_RK_DIR)
		return ds__ix_dir(ix, id)->plen;
	uint32_t x = parent_dir(ix, id);
	if (x >= ix->h->ndirs)
		return 0;
	return join_len(ix->dirs[x].plen, ds_ix_base_len(ix, id));
}

/* Entry id's row, named nl bytes, in directory row p: usable? */
static int row_ok(const struct ds_index *ix, uint64_t id, uint32_t p, int nl)
{
	const struct ds_index_header *h = ix->h;
	const struct ds_row *r = &ix->rows[id];
	if (p >= h->ndirs || (id && (!dir_ok(ix, p) || ix->dirs[p].id >= id)) ||
	    join_len(ix->dirs[p].plen, (uint64_t)nl) >= PATH_MAX)
		return 0;
	uint64_t poff = row_poff(r);
	switch (row_kind(r)) {
	case DS_RK_DIR:
		return dir_ok(ix, poff) && ix->dirs[poff].id == id &&
		       ix->dirs[poff].plen == (id ? join_len(ix->dirs[p].plen, (uint64_t)nl) : 0);
	case DS_RK_FILE:
	case DS_RK_WIDE: {
		if (row_kind(r) == DS_RK_WIDE && poff >= h->nwide)
			return 0;
		struct ds_ix_file f;
		ds_ix_file(ix, (uint32_t)id, &f);
		/* stored raw, a reader copies `size` bytes from the stored ones;
		 * deflate expands at most 1032:1, so a zlib file's size is bounded
		 * by its stored bytes (a reader allocates `size` to inflate) */
		return f.part < h->nparts && f.poff <= ix->parts[f.part].size &&
		       f.stored <= ix->parts[f.part].size - f.poff &&
		       (f.codec == DS_CODEC_NONE ? f.size == f.stored : f.size / 1032 <= f.stored);
	}
	default: {
		uint64_t sz = ds__ix40(r->size_lo, r->size_hi);
		return poff < h->strings_size && sz < h->strings_size - poff && sz < PATH_MAX &&
		       !ix->strings[poff + sz];
	}
	}
}

int ds_index_entry_ok(const struct ds_index *ix, uint64_t id)
{
	if (id >= ix->h->nentries)
		return 0;
	/* the name: one component (the root's ""), its path shorter than
	 * PATH_MAX (readers copy names into PATH_MAX buffers and components
	 * into struct dirent) */
	char name[DS_IX_NAME_BUF];
	int nl = name_of(ix, (uint32_t)id, name);
	if (nl < 0 || (id == 0) != (nl == 0) || (nl && !component_ok(name, (size_t)nl)))
		return 0;
	return row_ok(ix, id, parent_dir(ix, (uint32_t)id), nl);
}

/* The locations of ds_index_check_shuffle. */
static int check_locs(const struct ds_index *ix)
{
	const struct ds_index_header *h = ix->h;
	/* the locations as the builder lays them out: each partition's a run
	 * of the array, runs in partition order, together the whole array (the
	 * share's repair step counts per node over both views: they must
	 * agree), and no node twice in one run */
	uint64_t next = 0;
	for (uint32_t i = 0; i < h->nparts; i++) {
		const struct ds_part *p = &ix->parts[i];
		if (!p->nloc)
			continue;
		if (p->loc != next || p->nloc > h->nlocs - next)
			return -DS_ECORRUPT;
		next += p->nloc;
		for (uint32_t l = p->loc; l < p->loc + p->nloc; l++)
			if (ix->locs[l].node >= h->nnodes ||
			    (l > p->loc && ix->locs[l].node <= ix->locs[l - 1].node))
				return -DS_ECORRUPT;
	}
	if (next != h->nlocs)
		return -DS_ECORRUPT;
	return 0;
}

int ds_index_check_shuffle(const struct ds_index *ix)
{
	const struct ds_index_header *h = ix->h;
	for (uint32_t i = 0; i < h->nsamples; i++) {
		uint32_t id = ix->samples[i];
		if (!ds_index_entry_ok(ix, id) || !S_ISREG(ds_ix_mode(ix, id)) ||
		    (i && id <= ix->samples[i - 1]))
			return -DS_ECORRUPT;
	}
	return check_locs(ix);
}

/* The full check's walk state: the directories open at the current entry
 * (a stack of directory rows) with the path of the deepest, and per
 * directory the next child expected (its run and count) and its
 * subdirectories. */
struct walk {
	uint32_t *stack, depth;
	uint32_t *run, *seen, *subdirs;
	char path[PATH_MAX + NAME_MAX + 2];
};

/* Is entry i, named (name, nl), directory x's next child in name order? */
static int next_child(const struct ds_index *ix, struct walk *w, uint32_t x, uint32_t i,
                      const char *name, int nl, const char *prev, int prevl)
{
	const struct ds_dir *d = &ix->dirs[x];
	uint32_t k = w->seen[x], r = w->run[x];
	if (k >= d->nchildren)
		return 0;
	const struct ds_run *R = ix->runs + d->run;
	if (r + 1 < d->nruns && R[r + 1].cum == k)
		r++;
	else if (k == 0 && R[0].cum != 0)
		return 0;
	if (R[r].cum > k || (r + 1 < d->nruns && R[r + 1].cum <= k) ||
	    (uint64_t)R[r].first + (k - R[r].cum) != i)
		return 0;
	if (k == R[r].cum) { /* a run's first child: its key, its first 8 bytes */
		uint8_t key[8] = {0};
		memcpy(key, name, nl < 8 ? (size_t)nl : 8);
		if (memcmp(key, R[r].key, 8))
			return 0;
	}
	if (k) { /* strictly after its elder sibling (bytewise, a prefix first) */
		char buf[DS_IX_NAME_BUF];
		uint64_t e = i - 1; /* child k - 1: in this run, else the last of the one before */
		if (k == R[r].cum) {
			if (!r)
				return 0;
			e = (uint64_t)R[r - 1].first + (k - 1 - R[r - 1].cum);
		}
		if (e >= i)
			return 0;
		if (e != i - 1 || !prev) {
			prevl = name_of(ix, (uint32_t)e, buf);
			prev = buf;
		}
		if (prevl < 0)
			return 0;
		int c = memcmp(prev, name, (size_t)(prevl < nl ? prevl : nl));
		if (c > 0 || (c == 0 && prevl >= nl))
			return 0;
	}
	w->seen[x] = k + 1;
	w->run[x] = r;
	return 1;
}

/* The full check: every entry usable (ds_index_entry_ok), and the structure
 * the builder makes: directory rows in entry order, each subtree a
 * contiguous range inside its parent's; safe names, every directory's
 * children exactly the entries its runs list, in strict name order (so
 * entries are in path order); nlink, path lengths, the samples the files
 * outside --replicate, this node's partitions inside its store.  O(n). */
static int check_entries(const struct ds_index *ix)
{
	const struct ds_index_header *h = ix->h;
	uint64_t ndirs = 0, nsamples = 0, nwide = 0;
	for (uint32_t x = 0; x < h->ndirs; x++) {
		const struct ds_dir *d = &ix->dirs[x];
		if (!dir_ok(ix, x) ||
		    (x && (d->id <= ix->dirs[x - 1].id || d->id <= ix->dirs[d->pdir].id ||
		           d->end > ix->dirs[d->pdir].end)))
			return -DS_ECORRUPT;
		if (d->nruns && d->run != (x ? ix->dirs[x - 1].run + ix->dirs[x - 1].nruns : 0))
			return -DS_ECORRUPT;
		if (!d->nruns != !d->nchildren)
			return -DS_ECORRUPT;
	}
	if (!h->ndirs || ix->dirs[0].id != 0 || ix->dirs[0].end != h->nentries)
		return -DS_ECORRUPT;
	if (ix->blocks[(h->nentries + DS_IX_BLOCK - 1) / DS_IX_BLOCK] != h->names_size)
		return -DS_ECORRUPT;
	struct walk w;
	w.stack = calloc(PATH_MAX / 2 + 2, sizeof(uint32_t));
	w.run = calloc(h->ndirs, sizeof(uint32_t));
	w.seen = calloc(h->ndirs, sizeof(uint32_t));
	w.subdirs = calloc(h->ndirs, sizeof(uint32_t));
	int rc = -DS_ECORRUPT;
	if (!w.stack || !w.run || !w.seen || !w.subdirs) {
		rc = -ENOMEM;
		goto out;
	}
	w.depth = 1;
	w.stack[0] = 0;
	/* names decoded in order, one step each; the parent is the stack's
	 * top: the directory table's subtree ends and parent rows (checked
	 * above and at each push) make parent_dir find the same one */
	struct nstream ns;
	char prev[DS_IX_NAME_BUF];
	int prevl = -1;
	for (uint32_t i = 0; i < h->nentries; i++) {
		const struct ds_row *r = &ix->rows[i];
		if (i % DS_IX_BLOCK == 0) {
			if (i && ns.pos != ns.end)
				goto out; /* bytes after a block's names */
			if (ns_block(ix, i / DS_IX_BLOCK, &ns))
				goto out;
		}
		int nl = ns_next(ix, &ns, i % DS_IX_BLOCK == 0);
		const char *name = ns.name;
		unsigned kind = row_kind(r);
		if (nl < 0)
			goto out;
		if (i) {
			while (w.depth > 1 && i >= ix->dirs[w.stack[w.depth - 1]].end)
				w.depth--;
			uint32_t x = w.stack[w.depth - 1];
			const struct ds_dir *d = &ix->dirs[x];
			/* a name as the builder checked it: one component, UTF-8,
			 * no newline; a top-level ".dstage" reserved */
			if (!component_ok(name, (size_t)nl) ||
			    ds_name_check(name, (size_t)nl, NULL) ||
			    (x == 0 && ds_name_reserved(name, (size_t)nl, NULL)) ||
			    !row_ok(ix, i, x, nl) ||
			    !next_child(ix, &w, x, i, name, nl, prevl >= 0 ? prev : NULL, prevl))
				goto out;
			uint64_t len = join_len(d->plen, (uint64_t)nl);
			if (kind == DS_RK_LINK &&
			    (ds_ix_path(ix, i, w.path, sizeof(w.path)) != (int)len ||
			     ds_target_check(w.path, len, ds_ix_target(ix, i), ds_ix_size(ix, i),
			                     NULL)))
				goto out;
			if (kind == DS_RK_DIR) {
				uint64_t y = row_poff(r);
				if (ix->dirs[y].pdir != x || ix->dirs[y].plen != len ||
				    w.depth > PATH_MAX / 2)
					goto out;
				w.subdirs[x]++;
				w.stack[w.depth++] = (uint32_t)y;
			}
		} else if (kind != DS_RK_DIR || row_poff(r) != 0 || nl != 0 ||
		           !row_ok(ix, 0, 0, 0)) {
			goto out;
		}
		if (kind == DS_RK_DIR)
			ndirs++;
		if (kind == DS_RK_WIDE) {
			/* wide rows in entry order, each used once, and only for
			 * fields that do not fit */
			const struct ds_wide *wd = &ix->wide[row_poff(r)];
			if (row_poff(r) != nwide++ ||
			    (wd->size < (1ull << 40) && wd->poff < (1ull << 40) &&
			     wd->stored < (1ull << 40)))
				goto out;
		}
		if ((kind == DS_RK_FILE || kind == DS_RK_WIDE) && !(r->mode & DS_RM_REPL)) {
			if (nsamples >= h->nsamples || ix->samples[nsamples] != i)
				goto out;
			nsamples++;
		}
		if (kind != DS_RK_FILE && kind != DS_RK_WIDE &&
		    (r->mode & (DS_RM_ZLIB | DS_RM_REPL)))
			goto out;
		memcpy(prev, name, (size_t)nl + 1);
		prevl = nl;
	}
	if (ns.pos != ns.end)
		goto out;
	if (ndirs != h->ndirs || nsamples != h->nsamples || nwide != h->nwide)
		goto out;
	for (uint32_t x = 0; x < h->ndirs; x++)
		if (w.seen[x] != ix->dirs[x].nchildren ||
		    (ix->dirs[x].nruns && w.run[x] != ix->dirs[x].nruns - 1) ||
		    ix->dirs[x].nlink != 2 + w.subdirs[x])
			goto out;
	if (h->ndirs && h->nruns != ix->dirs[h->ndirs - 1].run + ix->dirs[h->ndirs - 1].nruns &&
	    ix->dirs[h->ndirs - 1].nruns)
		goto out;
	/* the samples are exactly the files outside --replicate, in order
	 * (checked in the walk): the locations remain */
	rc = check_locs(ix);
	if (rc)
		goto out;
	for (uint32_t p = 0; p < h->nparts; p++) {
		uint64_t base;
		if (ds_index_part_on(ix, p, h->node, &base) &&
		    (base % DS_STORE_ALIGN || base > h->store_size ||
		     ix->parts[p].size > h->store_size - base ||
		     /* a partition lies whole in one tier */
		     (base < h->ram_size && ix->parts[p].size > h->ram_size - base))) {
			rc = -DS_ECORRUPT;
			goto out;
		}
	}
	rc = 0;
out:
	free(w.stack);
	free(w.run);
	free(w.seen);
	free(w.subdirs);
	return rc;
}

static uint32_t header_crc(const void *buf, size_t len)
{
	struct ds_index_header h;
	memcpy(&h, buf, sizeof(h));
	h.crc = 0;
	uint32_t c = ds_crc32c(0, &h, sizeof(h));
	return ds_crc32c(c, (const char *)buf + sizeof(h), len - sizeof(h));
}

int ds_index_from_buf(struct ds_index *ix, const void *buf, size_t len, int full)
{
	const struct ds_index_header *h = buf;
	memset(ix, 0, sizeof(*ix));
	if (len < sizeof(*h) || memcmp(h->magic, DS_INDEX_MAGIC, 8))
		return -DS_EFORMAT;
	if (h->version != DS_INDEX_VERSION || h->header_size != sizeof(*h))
		return -DS_EFORMAT;
	if (h->total_size != len || h->nnodes == 0 || h->node >= h->nnodes)
		return -DS_ECORRUPT;
	uint64_t nblocks = ((uint64_t)h->nentries + DS_IX_BLOCK - 1) / DS_IX_BLOCK;
	if (!in_bounds(h->off_rows, h->nentries, sizeof(struct ds_row), len) ||
	    !in_bounds(h->off_dirs, h->ndirs, sizeof(struct ds_dir), len) ||
	    !in_bounds(h->off_runs, h->nruns, sizeof(struct ds_run), len) ||
	    !in_bounds(h->off_wide, h->nwide, sizeof(struct ds_wide), len) ||
	    !in_bounds(h->off_blocks, nblocks + 1, 4, len) ||
	    !in_bounds(h->off_names, h->names_size, 1, len) ||
	    !in_bounds(h->off_parts, h->nparts, sizeof(struct ds_part), len) ||
	    !in_bounds(h->off_locs, h->nlocs, sizeof(struct ds_loc), len) ||
	    !in_bounds(h->off_samples, h->nsamples, 4, len) ||
	    !in_bounds(h->off_strings, h->strings_size, 1, len))
		return -DS_ECORRUPT;
	const char *base = buf;
	ix->h = h;
	ix->rows = (const void *)(base + h->off_rows);
	ix->dirs = (const void *)(base + h->off_dirs);
	ix->runs = (const void *)(base + h->off_runs);
	ix->wide = (const void *)(base + h->off_wide);
	ix->blocks = (const void *)(base + h->off_blocks);
	ix->names = (const void *)(base + h->off_names);
	ix->parts = (const void *)(base + h->off_parts);
	ix->locs = (const void *)(base + h->off_locs);
	ix->samples = (const void *)(base + h->off_samples);
	ix->strings = base + h->off_strings;
	/* O(1), also without `full`: the root is a usable directory (directory
	 * row 0) and the pool ends with a NUL; readers check every other entry
	 * before they use it (ds_index_entry_ok) */
	if (h->nentries == 0 || h->ndirs == 0 || h->strings_size == 0 ||
	    ix->strings[h->strings_size - 1] || !ds_index_entry_ok(ix, 0) ||
	    !S_ISDIR(ds_ix_mode(ix, 0)) || row_poff(&ix->rows[0]) != 0)
		return -DS_ECORRUPT;
	/* the spill tier: a root NUL-terminated in the pool, a RAM part that
	 * ends on a DS_SPILL_ALIGN boundary (the spill file is mapped there) */
	if (h->ram_size > h->store_size ||
	    (h->spill_dir != UINT32_MAX &&
	     (h->spill_dir >= h->strings_size || h->spill_dir_len >= PATH_MAX ||
	      h->spill_dir_len >= h->strings_size - h->spill_dir ||
	      ix->strings[h->spill_dir + h->spill_dir_len] ||
	      strlen(ix->strings + h->spill_dir) != h->spill_dir_len ||
	      ix->strings[h->spill_dir] != '/')) ||
	    (h->ram_size < h->store_size &&
	     (h->spill_dir == UINT32_MAX || h->ram_size % DS_SPILL_ALIGN)))
		return -DS_ECORRUPT;
	if (full) {
		if (header_crc(buf, len) != h->crc)
			return -DS_ECHECKSUM;
		int rc = check_entries(ix);
		if (rc)
			return rc;
	}
	return 0;
}

int ds_index_open(struct ds_index *ix, const char *path, int full)
{
	memset(ix, 0, sizeof(*ix));
	/* O_NONBLOCK: a FIFO in the index's place must not hang every process
	 * that loads the shim; anything but a regular file is refused */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return -DS_EFORMAT;
	}
	if ((uint64_t)st.st_size < sizeof(struct ds_index_header)) {
		close(fd);
		return -DS_EFORMAT;
	}
	/* 2 MiB-aligned: where its page cache is in 2 MiB pages (ds_index_hugify),
	 * a fresh reader faults once per 2 MiB, not per 64 KiB (docs/shim.md) */
	void *m = ds__map_ro_aligned(fd, st.st_size);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	int rc = ds_index_from_buf(ix, m, st.st_size, full);
	if (rc == -DS_EFORMAT && !memcmp(m, DS_INDEX_MAGIC, 8)) {
		/* an older (or newer) dstage's store: a node store lives one job */
		uint32_t v;
		memcpy(&v, (const char *)m + 8, sizeof(v));
		if (v != DS_INDEX_VERSION) /* the shim (full = 0) says it only when verbose */
			ds_log(full ? DS_LOG_ERROR : DS_LOG_INFO,
			       "%s: index version %u, this dstage reads version %u "
			       "(stage again: a node store lives one job)",
			       path, v, DS_INDEX_VERSION);
	}
	if (rc) {
		munmap(m, st.st_size);
		memset(ix, 0, sizeof(*ix));
		return rc;
	}
	ix->map_len = st.st_size;
	return 0;
}

void ds_index_close(struct ds_index *ix)
{
	if (ix->h && ix->map_len)
		munmap((void *)ix->h, ix->map_len);
	memset(ix, 0, sizeof(*ix));
}

/* compare a name with (s, n) bytewise, a prefix first (sibling order) */
static int name_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);
	return c ? c : (al > bl) - (al < bl);
}

/* The parent directory row of child c of directory row x (x < ndirs):
 * parent_dir's answer, the search skipped when x is the last directory
 * before c and c inside its subtree (then parent_dir finds x). */
static uint32_t child_parent(const struct ds_index *ix, uint32_t x, uint32_t c)
{
	const struct ds_index_header *h = ix->h;
	const struct ds_dir *d = &ix->dirs[x];
	if (row_kind(&ix->rows[c]) != DS_RK_DIR && d->id < c && c < d->end &&
	    (x + 1 >= h->ndirs || ix->dirs[x + 1].id > c)) {
		/* as parent_dir's hint would find it: make it the hint */
		if (atomic_load_explicit(&parent_hint, memory_order_relaxed) != x)
			atomic_store_explicit(&parent_hint, x, memory_order_relaxed);
		return x;
	}
	return parent_dir(ix, c);
}

/* ds_index_entry_ok of child c of directory row x, its name (name, nl)
 * decoded already: the same checks */
static int child_ok(const struct ds_index *ix, uint32_t x, uint32_t c, const char *name, int nl)
{
	if (nl <= 0 || !component_ok(name, (size_t)nl))
		return 0;
	return row_ok(ix, c, child_parent(ix, x, c), nl);
}

int64_t ds_index_child(const struct ds_index *ix, uint32_t dir, const char *name, size_t nlen)
{
	const struct ds_index_header *h = ix->h;
	if (!component_ok(name, nlen) || dir >= h->nentries ||
	    row_kind(&ix->rows[dir]) != DS_RK_DIR)
		return -1; /* one component, or nothing */
	uint64_t x = row_poff(&ix->rows[dir]);
	if (!dir_ok(ix, x) || ix->dirs[x].id != dir)
		return -1;
	const struct ds_dir *d = &ix->dirs[x];
	const struct ds_run *R = ix->runs + d->run;
	char buf[DS_IX_NAME_BUF];
	/* the last run whose first child's name is at most name (the heads),
	 * then that run's consecutive ids: binary searches in name order */
	uint8_t key[8] = {0};
	memcpy(key, name, nlen < 8 ? nlen : 8);
	uint32_t lo = 0, hi = d->nruns;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2, c = R[mid].first;
		int cmp = memcmp(R[mid].key, key, 8), bl = 0;
		if (!cmp) { /* the same first 8 bytes: the name decides */
			bl = c < h->nentries ? name_of(ix, c, buf) : -1;
			if (bl < 0)
				return -1;
			cmp = name_cmp(buf, (size_t)bl, name, nlen);
		}
		if (!cmp) /* only usable entries are ever returned (the shim
			   * maps the index without the full check) */
			return child_ok(ix, (uint32_t)x, c, buf, bl) ? (int64_t)c : -1;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return -1;
	uint32_t r = lo - 1, next = r + 1 < d->nruns ? R[r + 1].cum : d->nchildren;
	if (next <= R[r].cum)
		return -1;
	uint64_t first = R[r].first;
	lo = 1;
	hi = next - R[r].cum;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uint64_t c = first + mid;
		int bl = c < h->nentries ? name_of(ix, (uint32_t)c, buf) : -1;
		if (bl < 0)
			return -1;
		int cmp = name_cmp(buf, (size_t)bl, name, nlen);
		if (!cmp)
			return child_ok(ix, (uint32_t)x, (uint32_t)c, buf, bl) ? (int64_t)c : -1;
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

int64_t ds_index_lookup(const struct ds_index *ix, const char *path, size_t len)
{
	int64_t cur = 0;
	size_t i = 0;
	if (!len)
		return ds_index_entry_ok(ix, 0) ? 0 : -1;
	for (;;) {
		const char *s = path + i, *e = memchr(s, '/', len - i);
		size_t l = e ? (size_t)(e - s) : len - i;
		cur = ds_index_child(ix, (uint32_t)cur, s, l);
		if (cur < 0 || !e)
			return cur;
		i += l + 1;
		if (i >= len)
			return -1; /* a trailing '/' */
	}
}

int ds_ix_path(const struct ds_index *ix, uint32_t id, char *buf, size_t size)
{
	size_t n = ds_ix_path_len(ix, id);
	if (n >= size || n >= PATH_MAX) {
		if (size)
			buf[0] = 0;
		return -ENAMETOOLONG;
	}
	/* from the end: the entry's name, then each parent's, each checked to
	 * fit where the lengths say it goes */
	size_t at = n;
	uint32_t cur = id;
	char name[DS_IX_NAME_BUF];
	for (unsigned depth = 0; cur && depth <= PATH_MAX / 2; depth++) {
		int nl = name_of(ix, cur, name);
		uint32_t x = parent_dir(ix, cur);
		/* each a component a path may hold: a damaged name never makes
		 * one that climbs ("..") or holds a '/' */
		if (nl < 0 || (size_t)nl > at || x >= ix->h->ndirs ||
		    !component_ok(name, (size_t)nl))
			break;
		at -= (size_t)nl;
		memcpy(buf + at, name, (size_t)nl);
		cur = ix->dirs[x].id; /* read from the index: an entry, else stop */
		if (!cur || cur >= ix->h->nentries)
			break;
		if (!at)
			break;
		buf[--at] = '/';
		if (ix->dirs[x].plen != at)
			break;
	}
	if (at || cur) {
		buf[0] = 0;
		return -DS_ECORRUPT;
	}
	buf[n] = 0;
	return (int)n;
}

/* ---- many names and paths (dsindex.h: ds_ix_names, ds_ix_paths) -------------
 * What ds_ix_base, ds_index_entry_ok and ds_ix_path compute, at the cost of
 * what changed since the entry asked before: the next name of a block is
 * one step of the front coding, and the path of the directory last asked
 * (with its ancestors') is kept.  The checks are the same ones, each on
 * bytes of the mapping it bounds first (the shim maps the index without
 * the full check). */
int ds_ix_names_get(const struct ds_index *ix, struct ds_ix_names *n, uint32_t id)
{
	if (id >= ix->h->nentries)
		return -1;
	unsigned j = 0;
	if (n->id && n->id - 1 == id)
		return (int)n->len;
	/* on from the name decoded last (its block's bounds checked again:
	 * a decoder kept by a caller must never read past this mapping) */
	if (n->id && n->id - 1 < id && (n->id - 1) / DS_IX_BLOCK == id / DS_IX_BLOCK &&
	    n->pos <= n->end && n->end <= ix->h->names_size) {
		j = (n->id - 1) % DS_IX_BLOCK + 1;
	} else if (ns_block(ix, id / DS_IX_BLOCK, n)) {
		n->id = 0;
		return -1;
	}
	for (; j <= id % DS_IX_BLOCK; j++)
		if (ns_next(ix, n, j == 0) < 0) {
			n->id = 0;
			return -1;
		}
	n->id = id + 1;
	return (int)n->len;
}

int64_t ds_ix_child_named(const struct ds_index *ix, struct ds_ix_names *n, uint32_t dir,
                          uint32_t k)
{
	const struct ds_index_header *h = ix->h;
	if (dir >= h->nentries || row_kind(&ix->rows[dir]) != DS_RK_DIR)
		return -1;
	uint64_t x = row_poff(&ix->rows[dir]);
	if (!dir_ok(ix, x) || ix->dirs[x].id != dir)
		return -1;
	uint32_t c = ds_ix_child(ix, dir, k); /* < nentries, or UINT32_MAX */
	int nl = c == UINT32_MAX ? -1 : ds_ix_names_get(ix, n, c);
	if (nl <= 0 || !component_ok(n->name, (size_t)nl))
		return -1;
	/* ds_index_entry_ok (child_ok) and ds_ix_parent == dir */
	uint32_t p = child_parent(ix, (uint32_t)x, c);
	if (p >= h->ndirs || ix->dirs[p].id != dir || !row_ok(ix, c, p, nl))
		return -1;
	return c;
}

/* A directory's path is at least one byte longer than its parent's plus
 * '/': at most this many directories on a chain under PATH_MAX. */
#define CHAIN_MAX (PATH_MAX / 2 + 2)

struct ds_ix_paths {
	const struct ds_index *ix;
	struct ds_ix_names ns;
	/* The chain: directory rows row[0..depth), each the parent (parent_dir
	 * of its entry) of the next; row[0]'s entry is 0 (the root: the paths
	 * under it have no prefix), every other one's a usable component whose
	 * path, len[i] bytes, is its row's plen, checked as ds_ix_path checks
	 * it, and is buf[0..len[i]). */
	uint32_t depth;
	uint32_t row[CHAIN_MAX], len[CHAIN_MAX], todo[CHAIN_MAX];
	char buf[PATH_MAX + NAME_MAX + 2];
};

struct ds_ix_paths *ds_ix_paths_new(const struct ds_index *ix)
{
	struct ds_ix_paths *c = malloc(sizeof(*c));
	if (c) {
		c->ix = ix;
		c->depth = 0;
		ds_ix_names_init(&c->ns);
	}
	return c;
}

void ds_ix_paths_free(struct ds_ix_paths *c) { free(c); }

/* The chain's level holding directory row y (not the root's), or -1: the
 * lengths grow along the chain, and y's would be its plen. */
static int chain_find(const struct ds_ix_paths *c, uint32_t y)
{
	uint32_t want = c->ix->dirs[y].plen, lo = 1, hi = c->depth;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (c->len[mid] < want)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->depth && c->row[lo] == y ? (int)lo : -1;
}

/* Make directory row x (whose entry is not 0) the top of the chain: keep
 * the levels up to its nearest ancestor on the chain, then add the rest,
 * each checked as ds_ix_path checks a parent: its entry's name a
 * component, its plen its parent's plus '/' plus the name (the root's
 * children: the name alone), under PATH_MAX.  0, or -1 (the chain is then
 * empty). */
static int chain_to(struct ds_ix_paths *c, uint32_t x)
{
	const struct ds_index *ix = c->ix;
	const struct ds_index_header *h = ix->h;
	uint32_t n = 0, y = x;
	int at;
	for (;;) { /* up from x to a row on the chain, or a root's */
		if (y >= h->ndirs || ix->dirs[y].id >= h->nentries || n == CHAIN_MAX)
			goto fail;
		if (ix->dirs[y].id == 0) {
			c->row[0] = y;
			c->len[0] = 0;
			at = 0;
			break;
		}
		if ((at = chain_find(c, y)) > 0)
			break;
		c->todo[n++] = y;
		y = parent_dir(ix, ix->dirs[y].id);
	}
	c->depth = (uint32_t)at + 1;
	while (n) {
		uint32_t z = c->todo[--n], top = c->depth - 1;
		char name[DS_IX_NAME_BUF];
		int nl = name_of(ix, ix->dirs[z].id, name);
		if (nl <= 0 || !component_ok(name, (size_t)nl) || c->depth == CHAIN_MAX)
			goto fail;
		uint64_t pl = top ? (uint64_t)c->len[top] + 1 + (uint64_t)nl : (uint64_t)nl;
		if (ix->dirs[z].plen != pl || pl >= PATH_MAX)
			goto fail;
		char *o = c->buf + pl - (uint64_t)nl;
		if (top)
			o[-1] = '/';
		memcpy(o, name, (size_t)nl);
		c->row[c->depth] = z;
		c->len[c->depth++] = (uint32_t)pl;
	}
	return 0;
fail:
	c->depth = 0;
	return -1;
}

int ds_ix_paths_get(struct ds_ix_paths *c, uint32_t id, const char **path)
{
	const struct ds_index *ix = c->ix;
	const struct ds_index_header *h = ix->h;
	*path = "";
	int nl = id < h->nentries ? ds_ix_names_get(ix, &c->ns, id) : -1;
	if (nl < 0 || (id == 0) != (nl == 0))
		return -DS_ECORRUPT;
	if (id == 0) /* the root: ds_ix_path's "" */
		return ds_index_entry_ok(ix, 0) && ds_ix_path_len(ix, 0) == 0 ? 0 : -DS_ECORRUPT;
	/* ds_index_entry_ok, the parent found from the chain's top when it
	 * is that (the entries of one directory one after the other) */
	uint32_t x = c->depth ? c->row[c->depth - 1] : UINT32_MAX;
	if (row_kind(&ix->rows[id]) == DS_RK_DIR || !parent_fits(ix, x, id))
		x = parent_dir(ix, id);
	if (!component_ok(c->ns.name, (size_t)nl) || !row_ok(ix, id, x, nl))
		return -DS_ECORRUPT;
	/* then the path ds_ix_path writes: row_ok checked that it is shorter
	 * than PATH_MAX; under the root's row just the name, else the
	 * directory's path (the chain's top), '/' and the name */
	const struct ds_dir *d = &ix->dirs[x];
	char *o = c->buf;
	if (d->id == 0) {
		if (d->plen)
			return -DS_ECORRUPT;
		c->row[0] = x; /* the name overwrites the chain above the root */
		c->len[0] = 0;
		c->depth = 1;
	} else {
		if (!(c->depth && c->row[c->depth - 1] == x) && chain_to(c, x))
			return -DS_ECORRUPT;
		o += d->plen;
		*o++ = '/';
	}
	memcpy(o, c->ns.name, (size_t)nl);
	o[nl] = 0;
	*path = c->buf;
	return (int)(o - c->buf) + nl;
}

#define PATH_AHEAD 8 /* entries asked for ahead of the one built */

/* The paths are built in id order, where neighbours share their directory
 * and their block of names, by a cursor that keeps both (one step of the
 * front coding and a copy per entry), into a buffer in that order; then
 * each is copied to its place in list order.  Built in list order, every
 * path was a random walk of the index; with ds_ix_path_len and ds_ix_path,
 * each name was decoded twice from the start of its block, and each
 * ancestor's too (~1.1 us per entry at 14M names; issue 27,
 * docs/performance.md). */
int ds_ix_list(const struct ds_index *ix, const uint32_t *ids, size_t n, char **data, size_t *len)
{
	struct ds_id_at *ia = malloc((n + 1) * sizeof(*ia));
	uint64_t *off = malloc((n + 1) * sizeof(*off));
	struct ds_ix_paths *cur = ds_ix_paths_new(ix);
	char *tmp = NULL, *buf = NULL;
	size_t used = 0, cap = 0;
	int rc = -ENOMEM;
	if (!ia || !off || !cur)
		goto out;
	for (size_t i = 0; i < n; i++)
		ia[i] = (struct ds_id_at){ids[i], (uint32_t)i};
	if (ds_sort_id_at(ia, n))
		goto out;
	for (size_t k = 0; k < n; k++) {
		/* the entries a few ahead asked for: an id of a reader's share
		 * is ~16 after the one before (a row and a name block of its
		 * own), the hardware's prefetcher does not see that stride */
		if (k + 2 * PATH_AHEAD < n)
			ds_ix_prefetch_name(ix, ia[k + 2 * PATH_AHEAD].id, 1);
		if (k + PATH_AHEAD < n) {
			ds_ix_prefetch(ix, ia[k + PATH_AHEAD].id);
			ds_ix_prefetch_name(ix, ia[k + PATH_AHEAD].id, 0);
		}
		/* each id must be a sample the index can follow (the cursor
		 * checks what ds_index_entry_ok checks) */
		const char *p;
		int w = ds_ix_paths_get(cur, ia[k].id, &p);
		if (w < 0 || !S_ISREG(ds_ix_mode(ix, ia[k].id))) {
			rc = -EIO;
			goto out;
		}
		if (cap - used < (size_t)w) {
			size_t ncap = cap ? 2 * cap : (size_t)64 * n + PATH_MAX;
			char *t = realloc(tmp, ncap);
			if (!t)
				goto out;
			tmp = t;
			cap = ncap;
		}
		memcpy(tmp + used, p, (size_t)w);
		used += (size_t)w;
		off[ia[k].at] = (uint64_t)w + 1; /* its length + its newline */
	}
	size_t total = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t l = off[i];
		off[i] = total;
		total += l;
	}
	off[n] = total;
	buf = malloc(total + 1);
	if (!buf)
		goto out;
	used = 0;
	for (size_t k = 0; k < n; k++) {
		size_t at = ia[k].at, l = off[at + 1] - off[at] - 1;
		memcpy(buf + off[at], tmp + used, l);
		buf[off[at] + l] = '\n';
		used += l;
	}
	buf[total] = 0;
	*data = buf;
	*len = total;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	free(tmp);
	ds_ix_paths_free(cur);
	free(off);
	free(ia);
	return rc;
}

uint64_t ds_index_entry_bytes(uint64_t n, uint64_t names)
{
	/* the worst entry is a directory: its row, its directory row, two runs
	 * (a directory has at most one more run than it has subdirectories: a
	 * run starts at its first child and after a subdirectory's subtree);
	 * a file takes its row, a sample and at most a wide row (64 B); each
	 * name at most its path's bytes plus a 3-byte lead, a block offset per
	 * DS_IX_BLOCK entries and one more */
	return n * (sizeof(struct ds_row) + sizeof(struct ds_dir) + 2 * sizeof(struct ds_run) + 3 +
	            1) +
	       8 + names;
}

int ds_index_part_on(const struct ds_index *ix, uint32_t part, uint32_t node, uint64_t *base)
{
	if (part >= ix->h->nparts)
		return 0;
	const struct ds_part *p = &ix->parts[part];
	if (p->loc > ix->h->nlocs || p->nloc > ix->h->nlocs - p->loc)
		return 0;
	for (uint32_t i = 0; i < p->nloc; i++)
		if (ix->locs[p->loc + i].node == node) {
			if (base)
				*base = ix->locs[p->loc + i].base;
			return 1;
		}
	return 0;
}

void ds_index_stat(const struct ds_index *ix, uint32_t id, struct stat *st)
{
	const struct ds_row *r = &ix->rows[id];
	uint32_t mode = ds_ix_mode(ix, id);
	uint64_t size = ds_ix_size(ix, id);
	memset(st, 0, sizeof(*st));
	st->st_dev = ix->h->dev;
	st->st_ino = DS_INO(id);
	st->st_mode = mode;
	st->st_nlink = ds_ix_nlink(ix, id);
	st->st_uid = ix->h->uid;
	st->st_gid = ix->h->gid;
	st->st_size = size;
	st->st_blksize = 4096;
	st->st_blocks = ds_stat_blocks(mode, size);
	st->st_mtim.tv_sec = r->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = r->mtime_ns % 1000000000;
	if (st->st_mtim.tv_nsec < 0) {
		st->st_mtim.tv_sec--;
		st->st_mtim.tv_nsec += 1000000000;
	}
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

/* ---- building ------------------------------------------------------------
 * The builder holds one 64-byte record per entry and one arena of paths
 * (each NUL-terminated, a symlink's target right after its path): no
 * per-entry allocation.  ds_index_build runs in phases: complete (the root,
 * sort, implicit parents), link (parents, directory rows, runs), then
 * names, layout and fill straight into the output buffer. */
struct bent {
	uint64_t path; /* arena offset */
	uint64_t size, poff, stored;
	int64_t mtime_ns;
	uint32_t crc, part, mode;
	uint32_t up;       /* link: its parent's directory row */
	uint16_t len;      /* path length */
	uint16_t base_off; /* offset of the last component */
	uint8_t codec, flags, implicit, link;
};

struct ds_index_builder {
	struct bent *v;
	size_t n, cap;
	struct ds_buf arena;
	uint64_t *part_size;
	uint32_t nparts;
	struct { uint32_t part, node; uint64_t base; uint32_t tier; } *locs;
	size_t nlocs, locs_cap;
	uint32_t node, nnodes;
	uint64_t store_size, pack_id;
	char job[64];
	uint64_t ram_size; /* UINT64_MAX: the whole store (no spill tier) */
	char *spill_root;
	/* link's results */
	struct ds_dir *dirs;
	struct ds_run *runs;
	uint32_t ndirs, nruns, nsamples, nwide;
	uint64_t targets; /* bytes of symlink targets with their NULs */
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

static void link_free(struct ds_index_builder *b)
{
	free(b->dirs);
	free(b->runs);
	b->dirs = NULL;
	b->runs = NULL;
}

void ds_index_builder_free(struct ds_index_builder *b)
{
	if (!b)
		return;
	free(b->v);
	ds_buf_release(&b->arena);
	free(b->part_size);
	free(b->locs);
	free(b->spill_root);
	link_free(b);
	free(b);
}

/* A new entry for path (and a symlink's target after it in the arena). */
static struct bent *add(struct ds_index_builder *b, const char *path, const char *target, int *rc)
{
	size_t len = strlen(path);
	if (len) {
		const char *why;
		*rc = ds_name_check(path, len, &why);
		if (!*rc && ds_name_reserved(path, len, &why))
			*rc = -DS_ENAME;
		if (*rc)
			return NULL;
	}
	if (len >= PATH_MAX) {
		*rc = -ENAMETOOLONG;
		return NULL;
	}
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
	if (target) {
		ds_buf_add(&b->arena, target, strlen(target) + 1);
		x->link = 1;
	}
	x->part = UINT32_MAX;
	*rc = 0;
	return x;
}

int ds_index_add_dir(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                     uint64_t size)
{
	int rc;
	if (size >> 40)
		return -EFBIG; /* a directory's row holds 40 bits of st_size */
	struct bent *x = add(b, path, NULL, &rc);
	if (!x)
		return rc;
	x->mode = S_IFDIR | (mode & 07777);
	x->mtime_ns = mtime_ns;
	x->size = size;
	return 0;
}

int ds_index_add_file(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                      uint64_t size, uint32_t part, uint64_t poff, uint64_t stored,
                      uint8_t codec, uint32_t crc, uint8_t flags)
{
	int rc;
	if (!*path)
		return -DS_ENAME;
	if (part > DS_IX_MAX_PART)
		return -EOVERFLOW; /* a row holds 24 bits of partition number */
	struct bent *x = add(b, path, NULL, &rc);
	if (!x)
		return rc;
	x->mode = S_IFREG | (mode & 07777);
	x->mtime_ns = mtime_ns;
	x->size = size;
	x->part = part;
	x->poff = poff;
	x->stored = stored;
	x->codec = codec;
	x->crc = crc;
	x->flags = flags & DS_EF_REPLICATED;
	return 0;
}

int ds_index_add_symlink(struct ds_index_builder *b, const char *path, int64_t mtime_ns,
                         const char *target)
{
	int rc;
	if (!*path)
		return -DS_ENAME;
	/* only targets that stay inside the tree (dsindex.h): a pack that says
	 * otherwise is refused here too, not only by the pack reader */
	if (ds_target_check(path, strlen(path), target, strlen(target), NULL))
		return -DS_ENAME;
	struct bent *x = add(b, path, target, &rc);
	if (!x)
		return rc;
	x->mode = S_IFLNK | 0777;
	x->mtime_ns = mtime_ns;
	x->size = strlen(target);
	return 0;
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

static size_t align8(size_t n) { return (n + 7) & ~(size_t)7; }

/* Phase 1: the root (when the pack records none), every entry sorted by
 * path, each path once (an implicit directory gives way), and every missing
 * parent directory added (0755). */
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

/* Phase 2: every entry's parent (a stack of the open directories: entries
 * are in path order), the directory table (rows in entry order, subtree
 * ends, children, nlink, path lengths) and the runs of each directory's
 * children; samples and wide rows counted. */
static int build_link(struct ds_index_builder *b)
{
	uint32_t n = (uint32_t)b->n, nd = 0;
	for (uint32_t i = 0; i < n; i++)
		nd += S_ISDIR(b->v[i].mode) != 0;
	link_free(b);
	b->ndirs = nd;
	b->dirs = ds_xcalloc(nd, sizeof(*b->dirs));
	uint32_t *stack = ds_xcalloc(PATH_MAX / 2 + 2, sizeof(uint32_t)); /* directory rows */
	uint32_t *last = ds_xcalloc(nd, sizeof(uint32_t));                /* last child + 1 */
	uint32_t depth = 0, row = 0, nruns = 0;
	int rc = 0;
	b->nsamples = b->nwide = 0;
	b->targets = 0;
	for (uint32_t i = 0; i < n; i++) {
		struct bent *x = &b->v[i];
		if (i) {
			size_t dl = x->base_off ? x->base_off - 1u : 0;
			while (depth > 1 && b->v[b->dirs[stack[depth - 1]].id].len > dl) {
				b->dirs[stack[depth - 1]].end = i;
				depth--;
			}
			struct ds_dir *d = &b->dirs[stack[depth - 1]];
			const struct bent *p = &b->v[d->id];
			if (p->len != dl || memcmp(bpath(b, p), bpath(b, x), dl)) {
				rc = -ENOTDIR; /* its parent is not a directory */
				goto out;
			}
			x->up = stack[depth - 1];
			if (last[x->up] != i) /* not right after the child before */
				nruns++, d->nruns++;
			last[x->up] = i + 1;
			d->nchildren++;
		}
		if (S_ISDIR(x->mode)) {
			struct ds_dir *d = &b->dirs[row];
			d->id = i;
			d->pdir = i ? x->up : 0;
			d->nlink = 2;
			d->plen = x->len;
			if (i)
				b->dirs[x->up].nlink++;
			if (depth > PATH_MAX / 2) {
				rc = -ENAMETOOLONG;
				goto out;
			}
			stack[depth++] = row;
			x->poff = row++;
		} else if (S_ISREG(x->mode)) {
			if (x->part >= b->nparts) {
				rc = -DS_ECORRUPT;
				goto out;
			}
			b->nsamples += !(x->flags & DS_EF_REPLICATED);
			b->nwide += (x->size | x->poff | x->stored) >> 40 != 0;
		} else if (x->link) {
			b->targets += x->size + 1;
		}
	}
	while (depth)
		b->dirs[stack[--depth]].end = n;
	/* the runs: each directory's in a row of the table, in child order */
	b->nruns = nruns;
	b->runs = ds_xcalloc(nruns ? nruns : 1, sizeof(*b->runs));
	uint32_t at = 0;
	for (uint32_t x = 0; x < nd; x++) {
		b->dirs[x].run = at;
		at += b->dirs[x].nruns;
		b->dirs[x].nruns = 0;
		b->dirs[x].nchildren = 0;
		last[x] = 0;
	}
	for (uint32_t i = 1; i < n; i++) {
		struct ds_dir *d = &b->dirs[b->v[i].up];
		if (last[b->v[i].up] != i) {
			struct ds_run *r = &b->runs[d->run + d->nruns++];
			const struct bent *x = &b->v[i];
			size_t nl = x->len - x->base_off;
			r->first = i;
			r->cum = d->nchildren;
			memcpy(r->key, bpath(b, x) + x->base_off, nl < 8 ? nl : 8);
		}
		last[b->v[i].up] = i + 1;
		d->nchildren++;
	}
out:
	free(stack);
	free(last);
	return rc;
}

/* Phase 3 (and in fill): the base names front-coded in blocks of
 * DS_IX_BLOCK entries (see name_decode); with out NULL, only their size.
 * blocks gets each block's offset, then the total. */
static uint64_t build_names(const struct ds_index_builder *b, unsigned char *out, uint32_t *blocks)
{
	uint64_t pos = 0;
	const char *prev = "";
	size_t prevl = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct bent *x = &b->v[i];
		const char *nm = bpath(b, x) + x->base_off;
		size_t nl = x->len - x->base_off, pre = 0;
		if (i % DS_IX_BLOCK == 0) {
			if (blocks)
				blocks[i / DS_IX_BLOCK] = (uint32_t)pos;
		} else {
			while (pre < nl && pre < prevl && nm[pre] == prev[pre])
				pre++;
		}
		size_t suf = nl - pre;
		if (pre < 15 && suf < 16) {
			if (out)
				out[pos] = (unsigned char)(pre << 4 | suf);
			pos++;
		} else {
			if (out) {
				out[pos] = 0xf0;
				out[pos + 1] = (unsigned char)pre;
				out[pos + 2] = (unsigned char)suf;
			}
			pos += 3;
		}
		if (out)
			memcpy(out + pos, nm + pre, suf);
		pos += suf;
		prev = nm;
		prevl = nl;
	}
	if (blocks)
		blocks[(b->n + DS_IX_BLOCK - 1) / DS_IX_BLOCK] = (uint32_t)pos;
	return pos;
}

/* Phase 5: one entry's row (wide: its fields in the wide table). */
static void fill_row(const struct bent *x, struct ds_row *r, struct ds_wide *W, uint32_t *nwide,
                     uint64_t target)
{
	uint64_t size = x->size, poff = x->poff, stored = x->stored;
	unsigned kind = S_ISDIR(x->mode) ? DS_RK_DIR : S_ISLNK(x->mode) ? DS_RK_LINK : DS_RK_FILE;
	if (kind == DS_RK_LINK)
		poff = target, stored = 0;
	if (kind == DS_RK_DIR)
		stored = 0;
	if (kind == DS_RK_FILE && (size | poff | stored) >> 40) {
		W[*nwide] = (struct ds_wide){size, poff, stored};
		kind = DS_RK_WIDE;
		poff = (*nwide)++;
		size = stored = 0;
	}
	r->mtime_ns = x->mtime_ns;
	r->crc = kind == DS_RK_FILE || kind == DS_RK_WIDE ? x->crc : 0;
	r->size_lo = (uint32_t)size;
	r->size_hi = (uint8_t)(size >> 32);
	r->poff_lo = (uint32_t)poff;
	r->poff_hi = (uint8_t)(poff >> 32);
	r->stored_lo = (uint32_t)stored;
	r->stored_hi = (uint8_t)(stored >> 32);
	uint32_t part = kind == DS_RK_FILE || kind == DS_RK_WIDE ? x->part : 0;
	r->part[0] = (uint8_t)part;
	r->part[1] = (uint8_t)(part >> 8);
	r->part[2] = (uint8_t)(part >> 16);
	r->mode = (uint16_t)((x->mode & 07777) | kind << 12);
	if (kind == DS_RK_FILE || kind == DS_RK_WIDE) {
		if (x->codec == DS_CODEC_ZLIB)
			r->mode |= DS_RM_ZLIB;
		if (x->flags & DS_EF_REPLICATED)
			r->mode |= DS_RM_REPL;
	}
}

/* Phase 4: the header with every section's place. */
static int build_layout(const struct ds_index_builder *b, uint64_t names_size,
                        struct ds_index_header *h)
{
	uint64_t n = b->n, nblocks = (n + DS_IX_BLOCK - 1) / DS_IX_BLOCK;
	uint64_t strings = b->targets + (b->spill_root ? strlen(b->spill_root) + 1 : 0) + 1;
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
	h->nsamples = b->nsamples;
	h->ndirs = b->ndirs;
	h->nruns = b->nruns;
	h->nwide = b->nwide;
	uint64_t off = align8(sizeof(*h));
	h->off_rows = off;
	off = align8(off + n * sizeof(struct ds_row));
	h->off_dirs = off;
	off = align8(off + (uint64_t)b->ndirs * sizeof(struct ds_dir));
	h->off_runs = off;
	off = align8(off + (uint64_t)b->nruns * sizeof(struct ds_run));
	h->off_wide = off;
	off = align8(off + (uint64_t)b->nwide * sizeof(struct ds_wide));
	h->off_blocks = off;
	off = align8(off + (nblocks + 1) * 4);
	h->off_names = off;
	off = align8(off + names_size);
	h->names_size = names_size;
	h->off_parts = off;
	off = align8(off + (uint64_t)b->nparts * sizeof(struct ds_part));
	h->off_locs = off;
	off = align8(off + (uint64_t)b->nlocs * sizeof(struct ds_loc));
	h->off_samples = off;
	off = align8(off + (uint64_t)b->nsamples * 4);
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
	return 0;
}

/* Phase 5: every section into buf (zeroed, h->total_size bytes), sealed. */
static int build_fill(const struct ds_index_builder *b, const struct ds_index_header *h, char *buf)
{
	struct ds_row *R = (void *)(buf + h->off_rows);
	struct ds_wide *W = (void *)(buf + h->off_wide);
	uint32_t *S = (void *)(buf + h->off_samples);
	char *str = buf + h->off_strings;
	uint64_t spos = 0;
	uint32_t nwide = 0, ns = 0;
	for (size_t i = 0; i < b->n; i++) {
		const struct bent *x = &b->v[i];
		uint64_t target = spos;
		if (x->link) {
			memcpy(str + spos, bpath(b, x) + x->len + 1, x->size + 1);
			spos += x->size + 1;
		}
		fill_row(x, &R[i], W, &nwide, target);
		if (S_ISREG(x->mode) && !(x->flags & DS_EF_REPLICATED))
			S[ns++] = (uint32_t)i;
	}
	if (b->spill_root)
		memcpy(str + h->spill_dir, b->spill_root, h->spill_dir_len + 1);
	memcpy(buf + h->off_dirs, b->dirs, (size_t)b->ndirs * sizeof(struct ds_dir));
	memcpy(buf + h->off_runs, b->runs, (size_t)b->nruns * sizeof(struct ds_run));
	build_names(b, (unsigned char *)buf + h->off_names, (uint32_t *)(buf + h->off_blocks));
	struct ds_part *P = (void *)(buf + h->off_parts);
	for (uint32_t i = 0; i < b->nparts; i++)
		P[i].size = b->part_size[i];
	struct ds_loc *L = (void *)(buf + h->off_locs);
	for (size_t i = 0; i < b->nlocs; i++) {
		uint32_t p = b->locs[i].part;
		if (p >= b->nparts || b->locs[i].node >= b->nnodes)
			return -DS_ECORRUPT;
		if (P[p].nloc == 0)
			P[p].loc = (uint32_t)i;
		P[p].nloc++;
		L[i].node = b->locs[i].node;
		L[i].base = b->locs[i].base;
		L[i].tier = b->locs[i].tier;
	}
	memcpy(buf, h, sizeof(*h));
	((struct ds_index_header *)buf)->crc = header_crc(buf, h->total_size);
	return 0;
}

int ds_index_build(struct ds_index_builder *b, void **out, size_t *len)
{
	int rc = build_complete(b);
	if (!rc)
		rc = build_link(b);
	if (rc)
		return rc;
	/* locations, sorted by partition then node */
	if (b->nlocs) /* qsort(NULL, 0) is undefined (a pack without files) */
		qsort(b->locs, b->nlocs, sizeof(*b->locs), loc_cmp);
	struct ds_index_header h;
	rc = build_layout(b, build_names(b, NULL, NULL), &h);
	if (rc)
		return rc;
	char *buf = calloc(1, h.total_size);
	if (!buf)
		return -ENOMEM;
	rc = build_fill(b, &h, buf);
	link_free(b);
	if (rc) {
		free(buf);
		return rc;
	}
	*out = buf;
	*len = h.total_size;
	return 0;
}

int ds_index_write(struct ds_index_builder *b, const char *path)
{
	void *buf;
	size_t len;
	int rc = ds_index_build(b, &buf, &len);
	if (rc)
		return rc;
	rc = ds_write_file_atomic(path, buf, len, 0600);
	free(buf);
	if (!rc)
		ds_index_hugify(path); /* best effort: 4 KiB pages work */
	return rc;
}

/* ---- store paths -------------------------------------------------------- */
const char *ds_store_default_job(void)
{
	const char *j = getenv("SLURM_JOB_ID");
	return j && *j ? j : NULL;
}

char *ds_store_jobdir(const char *dir, const char *job)
{
	/* an explicit job wins; else Slurm's; else "0" */
	const char *j = job && *job ? job : ds_store_default_job();
	char *s;
	if (asprintf(&s, "%s/" DS_JOBDIR_PREFIX "%u.%s", dir, (unsigned)geteuid(), j ? j : "0") < 0)
		return NULL;
	/* the job id is one component: a '/' in it ("--job x/../../y") would
	 * lead stage, serve and clean out of DIR; it becomes '_' */
	for (char *p = s + strlen(s) - strlen(j ? j : "0"); *p; p++)
		if (*p == '/')
			*p = '_';
	return s;
}

char *ds_store_nodedir(const char *dir, const char *job, uint32_t node)
{
	char *j = ds_store_jobdir(dir, job);
	char *s = NULL;
	if (j && asprintf(&s, "%s/%u", j, node) < 0)
		s = NULL;
	free(j);
	return s;
}

int ds_store_spill_nodedir(const struct ds_index *ix, char *buf, size_t len, size_t *jobdir_len)
{
	const struct ds_index_header *h = ix->h;
	if (!buf || !len)
		return -EINVAL;
	if (h->spill_dir == UINT32_MAX)
		return -ENOENT;
	/* the job as ds_store_jobdir made it: one component, '/' -> '_' */
	char job[sizeof(h->job) + 1];
	size_t j = 0;
	for (; j < sizeof(h->job) && h->job[j]; j++)
		job[j] = h->job[j] == '/' ? '_' : h->job[j];
	job[j] = 0;
	int n = snprintf(buf, len, "%s/" DS_JOBDIR_PREFIX "%u.%s", ix->strings + h->spill_dir,
	                 (unsigned)h->uid, j ? job : "0");
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	if (jobdir_len)
		*jobdir_len = (size_t)n;
	int m = snprintf(buf + n, len - n, "/%u", (unsigned)h->node);
	if (m < 0 || (size_t)m >= len - n)
		return -ENAMETOOLONG;
	return 0;
}

int ds_store_spill_remove(const char *nodedir)
{
	char path[PATH_MAX], dir[PATH_MAX];
	struct ds_index ix;
	size_t jl = 0;
	int rc = ds_store_path(path, sizeof(path), nodedir, DS_INDEX_NAME);
	if (rc)
		return rc;
	if (ds_index_open(&ix, path, 0))
		return 0; /* no index, no spill tier it could name */
	rc = ds_store_spill_nodedir(&ix, dir, sizeof(dir), &jl);
	ds_index_close(&ix);
	if (rc == -ENOENT)
		return 0;
	if (rc)
		return rc;
	struct stat st;
	dir[jl] = 0;
	if (lstat(dir, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		return -EPERM;
	dir[jl] = '/';
	rc = ds_rm_rf(dir);
	if (rc == -ENOENT)
		rc = 0;
	if (strlen(dir) + sizeof(DS_PARTIAL_SUFFIX) <= sizeof(dir)) {
		strcat(dir, DS_PARTIAL_SUFFIX);
		(void)ds_rm_rf(dir);
	}
	dir[jl] = 0;
	if (rmdir(dir) < 0 && errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}
