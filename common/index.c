/* SPDX-License-Identifier: BSD-3-Clause */
/* index.c: the node-local index (see dsindex.h): build, write, map, look up. */
#include "dsindex.h"
#include "dscommon.h"

#include <fcntl.h>
#include <limits.h>
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

int ds_index_entry_ok(const struct ds_index *ix, uint64_t id)
{
	const struct ds_index_header *h = ix->h;
	if (id >= h->nentries)
		return 0;
	const struct ds_entry *e = &ix->e[id];
	/* the name: NUL-terminated inside the pool, shorter than PATH_MAX, its
	 * last component after a '/' and at most NAME_MAX bytes (readers copy
	 * names into PATH_MAX buffers and components into struct dirent) */
	if ((uint64_t)e->name + e->name_len >= h->strings_size || ix->strings[e->name + e->name_len] ||
	    e->name_len >= PATH_MAX || e->base_off > e->name_len ||
	    e->name_len - e->base_off > NAME_MAX ||
	    (e->base_off && ix->strings[e->name + e->base_off - 1] != '/'))
		return 0;
	if (e->parent >= h->nentries)
		return 0;
	switch (e->mode & S_IFMT) {
	case S_IFDIR:
		return e->poff <= h->ndirents && e->stored <= h->ndirents - e->poff;
	case S_IFREG:
		/* stored raw, a reader copies `size` bytes from the stored ones;
		 * deflate expands at most 1032:1, so a zlib file's size is bounded
		 * by its stored bytes (a reader allocates `size` to inflate) */
		return e->part < h->nparts && e->poff <= ix->parts[e->part].size &&
		       e->stored <= ix->parts[e->part].size - e->poff && e->codec <= DS_CODEC_ZLIB &&
		       (e->codec == DS_CODEC_NONE ? e->size == e->stored
		                                  : e->size / 1032 <= e->stored);
	case S_IFLNK:
		return e->poff < h->strings_size && e->size < h->strings_size - e->poff &&
		       e->size < PATH_MAX && !ix->strings[e->poff + e->size];
	default:
		return 0;
	}
}

int ds_index_check_shuffle(const struct ds_index *ix)
{
	const struct ds_index_header *h = ix->h;
	for (uint32_t i = 0; i < h->nsamples; i++) {
		uint32_t id = ix->samples[i];
		if (!ds_index_entry_ok(ix, id) || !S_ISREG(ix->e[id].mode) ||
		    (i && id <= ix->samples[i - 1]))
			return -DS_ECORRUPT;
	}
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

/* The full check: every entry usable (ds_index_entry_ok), and the structure
 * the builder makes: safe names in strict path order, each below its parent
 * directory, every directory's children exactly the entries naming it as
 * their parent, the samples the files outside --replicate, this node's
 * partitions inside its store.  The hash is not probed for every entry (it
 * would triple the cost): a damaged hash makes lookups fail, and lookups
 * return only usable entries. */
static int check_entries(const struct ds_index *ix)
{
	const struct ds_index_header *h = ix->h;
	uint64_t nchildren = 0, nsamples = 0;
	for (uint32_t i = 0; i < h->nentries; i++) {
		const struct ds_entry *e = &ix->e[i];
		const char *name = ix->strings + e->name;
		if (!ds_index_entry_ok(ix, i))
			return -DS_ECORRUPT;
		if (i == 0) {
			if (!S_ISDIR(e->mode) || e->name_len || e->parent)
				return -DS_ECORRUPT;
		} else {
			const struct ds_entry *p = &ix->e[e->parent];
			if (ds_name_check(name, e->name_len, NULL) ||
			    ds_name_reserved(name, e->name_len, NULL) || e->parent >= i || !S_ISDIR(p->mode) ||
			    (S_ISLNK(e->mode) && ds_target_check(name, e->name_len, ix->strings + e->poff,
			                                          e->size, NULL)) ||
			    p->name_len != (e->base_off ? e->base_off - 1u : 0u) ||
			    memcmp(ix->strings + p->name, name, p->name_len) ||
			    ds_path_cmp(ix->strings + ix->e[i - 1].name, name) >= 0)
				return -DS_ECORRUPT;
		}
		if (S_ISDIR(e->mode)) {
			nchildren += e->stored;
			for (uint64_t k = 0; k < e->stored; k++) {
				uint32_t c = ix->dirents[e->poff + k];
				if (c >= h->nentries || ix->e[c].parent != i ||
				    (k && c <= ix->dirents[e->poff + k - 1]))
					return -DS_ECORRUPT;
			}
		}
		if (S_ISREG(e->mode) && !(e->flags & DS_EF_REPLICATED))
			nsamples++;
	}
	if (nchildren != (uint64_t)h->nentries - 1 || h->ndirents != nchildren ||
	    nsamples != h->nsamples)
		return -DS_ECORRUPT;
	for (uint32_t i = 0; i < h->hash_cap; i++)
		if (ix->hash[i] > h->nentries)
			return -DS_ECORRUPT;
	int rc = ds_index_check_shuffle(ix);
	if (rc)
		return rc;
	for (uint32_t p = 0; p < h->nparts; p++) {
		uint64_t base;
		if (ds_index_part_on(ix, p, h->node, &base) &&
		    (base % DS_STORE_ALIGN || base > h->store_size ||
		     ix->parts[p].size > h->store_size - base ||
		     /* a partition lies whole in one tier */
		     (base < h->ram_size && ix->parts[p].size > h->ram_size - base)))
			return -DS_ECORRUPT;
	}
	return 0;
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
	if (h->hash_cap == 0 || (h->hash_cap & (h->hash_cap - 1)) || h->hash_cap / 2 < h->nentries)
		return -DS_ECORRUPT;
	if (!in_bounds(h->off_entries, h->nentries, sizeof(struct ds_entry), len) ||
	    !in_bounds(h->off_hash, h->hash_cap, 4, len) ||
	    !in_bounds(h->off_dirents, h->ndirents, 4, len) ||
	    !in_bounds(h->off_parts, h->nparts, sizeof(struct ds_part), len) ||
	    !in_bounds(h->off_locs, h->nlocs, sizeof(struct ds_loc), len) ||
	    !in_bounds(h->off_samples, h->nsamples, 4, len) ||
	    !in_bounds(h->off_strings, h->strings_size, 1, len))
		return -DS_ECORRUPT;
	const char *base = buf;
	ix->h = h;
	ix->e = (const void *)(base + h->off_entries);
	ix->hash = (const void *)(base + h->off_hash);
	ix->dirents = (const void *)(base + h->off_dirents);
	ix->parts = (const void *)(base + h->off_parts);
	ix->locs = (const void *)(base + h->off_locs);
	ix->samples = (const void *)(base + h->off_samples);
	ix->strings = base + h->off_strings;
	/* O(1), also without `full`: the root is a usable directory and the
	 * pool ends with a NUL; readers check every other entry before they use
	 * it (ds_index_entry_ok) */
	if (h->nentries == 0 || h->strings_size == 0 || ix->strings[h->strings_size - 1] ||
	    !ds_index_entry_ok(ix, 0) || !S_ISDIR(ix->e[0].mode) || ix->e[0].name_len)
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
	void *m = mmap(NULL, st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	int rc = ds_index_from_buf(ix, m, st.st_size, full);
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

int64_t ds_index_lookup(const struct ds_index *ix, const char *path, size_t len)
{
	uint32_t mask = ix->h->hash_cap - 1;
	uint32_t slot = (uint32_t)ds_hash_path(path, len) & mask;
	for (uint32_t probe = 0; probe <= mask; probe++) {
		uint32_t v = ix->hash[slot];
		if (v == 0)
			return -1;
		/* only usable entries are ever returned (the shim maps the index
		 * without the full check); a damaged one is skipped */
		if (v <= ix->h->nentries && ix->e[v - 1].name_len == len &&
		    ds_index_entry_ok(ix, v - 1) && !memcmp(ix->strings + ix->e[v - 1].name, path, len))
			return v - 1;
		slot = (slot + 1) & mask;
	}
	return -1;
}

int ds_ix_path(const struct ds_index *ix, uint32_t id, char *buf, size_t size)
{
	size_t n = ds_ix_path_len(ix, id);
	if (n >= size) {
		if (size)
			buf[0] = 0;
		return -ENAMETOOLONG;
	}
	memcpy(buf, ix->strings + ix->e[id].name, n);
	buf[n] = 0;
	return (int)n;
}

int64_t ds_index_child(const struct ds_index *ix, uint32_t dir, const char *name, size_t nlen)
{
	char tmp[PATH_MAX];
	size_t plen = ds_ix_path_len(ix, dir), n = 0;
	if (!nlen || memchr(name, '/', nlen) || plen + 1 + nlen >= PATH_MAX)
		return -1; /* one component, or nothing */
	if (plen) {
		memcpy(tmp, ix->strings + ix->e[dir].name, plen);
		tmp[plen] = '/';
		n = plen + 1;
	}
	memcpy(tmp + n, name, nlen);
	return ds_index_lookup(ix, tmp, n + nlen);
}

uint64_t ds_index_entry_bytes(uint64_t n, uint64_t names)
{
	/* an entry, two hash slots, a dirent and a sample; the string pool */
	return n * (sizeof(struct ds_entry) + 2 * 4 + 4 + 4) + names;
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
	const struct ds_entry *e = &ix->e[id];
	memset(st, 0, sizeof(*st));
	st->st_dev = ix->h->dev;
	st->st_ino = DS_INO(id);
	st->st_mode = e->mode;
	st->st_nlink = e->nlink;
	st->st_uid = ix->h->uid;
	st->st_gid = ix->h->gid;
	st->st_size = e->size;
	st->st_blksize = 4096;
	st->st_blocks = ds_stat_blocks(e->mode, e->size);
	st->st_mtim.tv_sec = e->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = e->mtime_ns % 1000000000;
	if (st->st_mtim.tv_nsec < 0) {
		st->st_mtim.tv_sec--;
		st->st_mtim.tv_nsec += 1000000000;
	}
	st->st_atim = st->st_mtim;
	st->st_ctim = st->st_mtim;
}

/* ---- building ----------------------------------------------------------- */
struct bent {
	char *path;
	char *target;
	struct ds_entry e;
};

struct ds_index_builder {
	struct bent *v;
	size_t n, cap;
	uint64_t *part_size;
	uint32_t nparts;
	struct { uint32_t part, node; uint64_t base; uint32_t tier; } *locs;
	size_t nlocs, locs_cap;
	uint32_t node, nnodes;
	uint64_t store_size, pack_id;
	char job[64];
	uint64_t ram_size; /* UINT64_MAX: the whole store (no spill tier) */
	char *spill_root;
};

struct ds_index_builder *ds_index_builder_new(void)
{
	struct ds_index_builder *b = ds_xcalloc(1, sizeof(*b));
	b->nnodes = 1;
	b->ram_size = UINT64_MAX;
	return b;
}

void ds_index_builder_free(struct ds_index_builder *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++) {
		free(b->v[i].path);
		free(b->v[i].target);
	}
	free(b->v);
	free(b->part_size);
	free(b->locs);
	free(b->spill_root);
	free(b);
}

static struct bent *add(struct ds_index_builder *b, const char *path, int *rc)
{
	size_t len = strlen(path);
	if (len) {
		const char *why;
		*rc = ds_name_check(path, len, &why);
		if (!*rc && ds_name_reserved(path, len, &why))
			*rc = -DS_ENAME;
		if (*rc)
			return NULL;
		if (len > UINT16_MAX) {
			*rc = -ENAMETOOLONG;
			return NULL;
		}
	}
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 1024;
		b->v = ds_xrealloc(b->v, b->cap * sizeof(*b->v));
	}
	struct bent *x = &b->v[b->n++];
	memset(x, 0, sizeof(*x));
	x->path = ds_xstrdup(path);
	x->e.part = UINT32_MAX;
	x->e.nlink = 1;
	*rc = 0;
	return x;
}

int ds_index_add_dir(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                     uint64_t size)
{
	int rc;
	struct bent *x = add(b, path, &rc);
	if (!x)
		return rc;
	x->e.mode = S_IFDIR | (mode & 07777);
	x->e.mtime_ns = mtime_ns;
	x->e.size = size;
	return 0;
}

int ds_index_add_file(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                      uint64_t size, uint32_t part, uint64_t poff, uint64_t stored,
                      uint8_t codec, uint32_t crc, uint8_t flags)
{
	int rc;
	if (!*path)
		return -DS_ENAME;
	struct bent *x = add(b, path, &rc);
	if (!x)
		return rc;
	x->e.mode = S_IFREG | (mode & 07777);
	x->e.mtime_ns = mtime_ns;
	x->e.size = size;
	x->e.part = part;
	x->e.poff = poff;
	x->e.stored = stored;
	x->e.codec = codec;
	x->e.crc = crc;
	x->e.flags = flags & DS_EF_REPLICATED;
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
	struct bent *x = add(b, path, &rc);
	if (!x)
		return rc;
	x->e.mode = S_IFLNK | 0777;
	x->e.mtime_ns = mtime_ns;
	x->e.size = strlen(target);
	x->target = ds_xstrdup(target);
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

static int bent_cmp(const void *x, const void *y)
{
	return ds_path_cmp(((const struct bent *)x)->path, ((const struct bent *)y)->path);
}

static int loc_cmp(const void *x, const void *y)
{
	const uint32_t *a = x, *b = y; /* part, node */
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1];
}

/* Binary search in the sorted builder array. */
static int64_t bfind(const struct ds_index_builder *b, size_t n, const char *path)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		int c = ds_path_cmp(b->v[mid].path, path);
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

int ds_index_build(struct ds_index_builder *b, void **out, size_t *len)
{
	int rc, have_root = 0;
	for (size_t i = 0; i < b->n && !have_root; i++)
		have_root = !b->v[i].path[0];
	/* A pack records no entry for its root: the mount root's mtime is the
	 * newest of the dataset's (when its content last changed, as S3
	 * listings give a prefix), the same on every node, not 1970. */
	int64_t newest = 0;
	for (size_t i = 0; i < b->n; i++)
		if (b->v[i].e.mtime_ns > newest)
			newest = b->v[i].e.mtime_ns;
	if (!have_root && (rc = ds_index_add_dir(b, "", 0755, newest, 4096)))
		return rc;
	/* sort; add missing parent directories (0755) until none is missing */
	for (;;) {
		qsort(b->v, b->n, sizeof(*b->v), bent_cmp);
		size_t w = 1;
		for (size_t i = 1; i < b->n; i++) {
			if (ds_path_cmp(b->v[i].path, b->v[w - 1].path)) {
				b->v[w++] = b->v[i];
				continue;
			}
			/* the same path twice: fine only for implicit directories */
			if (b->v[i].e.pad == 1 && S_ISDIR(b->v[w - 1].e.mode)) {
				free(b->v[i].path);
				continue;
			}
			if (b->v[w - 1].e.pad == 1 && S_ISDIR(b->v[i].e.mode)) {
				free(b->v[w - 1].path);
				b->v[w - 1] = b->v[i];
				continue;
			}
			return -EEXIST;
		}
		b->n = w;
		size_t n0 = b->n, missing = 0;
		for (size_t i = 1; i < n0; i++) {
			char *slash = strrchr(b->v[i].path, '/');
			if (!slash)
				continue;
			/* a copy: truncating the entry's own path would find itself */
			char *dir = strndup(b->v[i].path, slash - b->v[i].path);
			if (!dir)
				return -ENOMEM;
			if (bfind(b, n0, dir) >= 0) {
				free(dir);
				continue;
			}
			rc = ds_index_add_dir(b, dir, 0755, 0, 4096);
			free(dir);
			if (rc)
				return rc;
			b->v[b->n - 1].e.pad = 1; /* implicit: may repeat */
			missing++;
		}
		if (!missing)
			break;
	}
	for (size_t i = 0; i < b->n; i++)
		b->v[i].e.pad = 0;
	if (b->n > UINT32_MAX - 1)
		return -EOVERFLOW;
	uint32_t n = b->n;

	/* parents, children counts, nlink */
	uint32_t *nchild = ds_xcalloc(n, sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++) {
		struct bent *x = &b->v[i];
		char *slash = strrchr(x->path, '/');
		if (i == 0) {
			x->e.parent = 0;
			x->e.base_off = 0;
			continue;
		}
		int64_t p;
		if (slash) {
			char *dir = strndup(x->path, slash - x->path);
			p = dir ? bfind(b, b->n, dir) : -1;
			free(dir);
			x->e.base_off = slash - x->path + 1;
		} else {
			p = 0;
			x->e.base_off = 0;
		}
		if (p < 0 || !S_ISDIR(b->v[p].e.mode)) {
			free(nchild);
			return -ENOTDIR;
		}
		x->e.parent = p;
		nchild[p]++;
		if (S_ISDIR(x->e.mode))
			b->v[p].e.nlink++;
	}
	for (uint32_t i = 0; i < n; i++)
		if (S_ISDIR(b->v[i].e.mode))
			b->v[i].e.nlink += 1; /* "." plus the entry in the parent */

	/* string pool: paths, then symlink targets */
	struct ds_buf strings = {0};
	for (uint32_t i = 0; i < n; i++) {
		struct bent *x = &b->v[i];
		size_t l = strlen(x->path);
		if (strings.len + l + 1 > UINT32_MAX) {
			free(nchild);
			ds_buf_release(&strings);
			return -EOVERFLOW;
		}
		x->e.name = strings.len;
		x->e.name_len = l;
		ds_buf_add(&strings, x->path, l + 1);
		if (x->target) {
			x->e.poff = strings.len;
			ds_buf_add(&strings, x->target, strlen(x->target) + 1);
		}
	}

	/* the spill root after the names (the entries never point at it) */
	uint32_t spill_dir = UINT32_MAX, spill_dir_len = 0;
	if (b->spill_root) {
		size_t l = strlen(b->spill_root);
		if (strings.len + l + 1 > UINT32_MAX || l >= PATH_MAX) {
			free(nchild);
			ds_buf_release(&strings);
			return l >= PATH_MAX ? -ENAMETOOLONG : -EOVERFLOW;
		}
		spill_dir = strings.len;
		spill_dir_len = l;
		ds_buf_add(&strings, b->spill_root, l + 1);
	}

	/* dirents: children in entry order == name order */
	uint32_t ndirents = n - 1;
	uint32_t *dirents = ds_xcalloc(ndirents + 1, sizeof(uint32_t));
	uint32_t *fill = ds_xcalloc(n, sizeof(uint32_t));
	uint64_t pos = 0;
	for (uint32_t i = 0; i < n; i++)
		if (S_ISDIR(b->v[i].e.mode)) {
			b->v[i].e.poff = pos;
			b->v[i].e.stored = nchild[i];
			pos += nchild[i];
		}
	for (uint32_t i = 1; i < n; i++) {
		uint32_t p = b->v[i].e.parent;
		dirents[b->v[p].e.poff + fill[p]++] = i;
	}
	free(fill);
	free(nchild);

	/* samples: every regular file outside the replicated subtree */
	uint32_t nsamples = 0;
	uint32_t *samples = ds_xcalloc(n, sizeof(uint32_t));
	for (uint32_t i = 0; i < n; i++) {
		struct ds_entry *e = &b->v[i].e;
		if (S_ISREG(e->mode) && !(e->flags & DS_EF_REPLICATED)) {
			e->flags |= DS_EF_SAMPLE;
			samples[nsamples++] = i;
		}
		if (S_ISREG(e->mode) && e->part >= b->nparts) {
			free(samples);
			free(dirents);
			ds_buf_release(&strings);
			return -DS_ECORRUPT;
		}
	}

	uint32_t cap = 16;
	while (cap / 2 < n)
		cap *= 2;

	/* locations, sorted by partition then node */
	if (b->nlocs) /* qsort(NULL, 0) is undefined (a pack without files) */
		qsort(b->locs, b->nlocs, sizeof(*b->locs), loc_cmp);

	struct ds_index_header h;
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, DS_INDEX_MAGIC, 8);
	h.version = DS_INDEX_VERSION;
	h.header_size = sizeof(h);
	h.node = b->node;
	h.nnodes = b->nnodes;
	h.nentries = n;
	h.nparts = b->nparts;
	h.nlocs = b->nlocs;
	h.nsamples = nsamples;
	h.ndirents = ndirents;
	h.hash_cap = cap;
	size_t off = align8(sizeof(h));
	h.off_entries = off;  off = align8(off + (size_t)n * sizeof(struct ds_entry));
	h.off_hash = off;     off = align8(off + (size_t)cap * 4);
	h.off_dirents = off;  off = align8(off + (size_t)ndirents * 4);
	h.off_parts = off;    off = align8(off + (size_t)b->nparts * sizeof(struct ds_part));
	h.off_locs = off;     off = align8(off + (size_t)b->nlocs * sizeof(struct ds_loc));
	h.off_samples = off;  off = align8(off + (size_t)nsamples * 4);
	h.off_strings = off;  off = align8(off + strings.len);
	h.strings_size = strings.len;
	h.total_size = off;
	h.store_size = b->store_size;
	h.pack_id = b->pack_id;
	h.dev = makedev(0xd5, (unsigned)(b->pack_id & 0xfffff));
	h.uid = geteuid();
	h.gid = getegid();
	memcpy(h.job, b->job, sizeof(h.job));
	h.ram_size = b->ram_size < b->store_size ? b->ram_size : b->store_size;
	h.spill_dir = spill_dir;
	h.spill_dir_len = spill_dir_len;
	if (h.ram_size < h.store_size && (spill_dir == UINT32_MAX || h.ram_size % DS_SPILL_ALIGN)) {
		free(samples);
		free(dirents);
		ds_buf_release(&strings);
		return -EINVAL;
	}

	char *buf = calloc(1, off);
	if (!buf) {
		free(samples);
		free(dirents);
		ds_buf_release(&strings);
		return -ENOMEM;
	}
	struct ds_entry *E = (void *)(buf + h.off_entries);
	for (uint32_t i = 0; i < n; i++)
		E[i] = b->v[i].e;
	uint32_t *H = (void *)(buf + h.off_hash);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = (uint32_t)ds_hash_path(b->v[i].path, E[i].name_len) & (cap - 1);
		while (H[slot])
			slot = (slot + 1) & (cap - 1);
		H[slot] = i + 1;
	}
	memcpy(buf + h.off_dirents, dirents, (size_t)ndirents * 4);
	struct ds_part *P = (void *)(buf + h.off_parts);
	for (uint32_t i = 0; i < b->nparts; i++)
		P[i].size = b->part_size[i];
	struct ds_loc *L = (void *)(buf + h.off_locs);
	for (size_t i = 0; i < b->nlocs; i++) {
		uint32_t p = b->locs[i].part;
		if (p >= b->nparts || b->locs[i].node >= b->nnodes) {
			free(buf);
			free(samples);
			free(dirents);
			ds_buf_release(&strings);
			return -DS_ECORRUPT;
		}
		if (P[p].nloc == 0)
			P[p].loc = i;
		P[p].nloc++;
		L[i].node = b->locs[i].node;
		L[i].base = b->locs[i].base;
		L[i].tier = b->locs[i].tier;
	}
	memcpy(buf + h.off_samples, samples, (size_t)nsamples * 4);
	memcpy(buf + h.off_strings, strings.data, strings.len);
	memcpy(buf, &h, sizeof(h));
	((struct ds_index_header *)buf)->crc = header_crc(buf, off);
	free(samples);
	free(dirents);
	ds_buf_release(&strings);
	*out = buf;
	*len = off;
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
