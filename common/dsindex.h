/* SPDX-License-Identifier: BSD-3-Clause */
/* dsindex.h: the node store and its index, the one contract between the MPI
 * side (stage, serve) and the preload shim.  libc only.
 *
 * A node store is a directory DIR/dstage.<uid>.<job>/<node>/ (mode 0700);
 * dsstore.h lists every name in it, these are the ones this file is about:
 *
 *   index     this file format: the global index of the whole dataset plus
 *             the placement of every partition (written by stage, mapped
 *             read-only by the shim and the service)
 *   store     this node's payload: the payload of every partition placed on
 *             this node, each at a 4 KiB-aligned base (ds_loc.base) of the
 *             node's store address space.  With a spill tier (stage --spill,
 *             docs/formats.md "The spill tier") that space is two files: offsets
 *             below header.ram_size are NODEDIR/store (RAM), the rest is
 *             SPILL/dstage.<uid>.<job>/<node>/store at offset - ram_size
 *             (ds_store_spill_nodedir); readers map both back to back, so a
 *             base means the same thing in either tier
 *   sock      the node service's Unix socket (0600), when serve runs
 *   epochs/   the node service's epoch cache (shuffle/)
 *
 * The index is one little-endian file, built once, mapped read-only, never
 * modified in place.  Sections are 8-byte aligned; all offsets are from the
 * start of the file.  Everything a reader needs (stat, readdir, readlink,
 * which node holds which byte) is answered from it without a system call.
 *
 * Entry 0 is the root directory (name "").  Entries are sorted by path
 * (bytewise, '/' first), so a directory's subtree is a contiguous range
 * after it.  Each entry keeps a 32-byte row and its own name (front-coded
 * in blocks of DS_IX_BLOCK); directories have a row of the directory table
 * with their children as runs of consecutive ids.  There is no hash of
 * paths: a lookup walks the components (docs/formats.md "The node store",
 * byte by byte).  Symlinks keep their target text in the string pool; only
 * targets that stay inside the tree are ever packed. */
#ifndef DSINDEX_H
#define DSINDEX_H

#include "dsstore.h" /* every name in a node store */

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define DS_INDEX_MAGIC "DSTAGEIX"
#define DS_INDEX_VERSION 3u /* 3: 32-byte rows, front-coded base names, no hash */
#define DS_STORE_ALIGN 4096u
/* The RAM tier's size is a multiple of this when a spill tier follows: the
 * spill file is mapped right after it, and 64 KiB is a whole number of
 * pages on every Linux page size in use (4, 16, 64 KiB). */
#define DS_SPILL_ALIGN (64u << 10)

enum ds_tier { DS_TIER_RAM = 0, DS_TIER_SPILL = 1 };

enum ds_codec { DS_CODEC_NONE = 0, DS_CODEC_ZLIB = 1 };

enum ds_entry_flag {
	DS_EF_REPLICATED = 1u, /* under a --replicate subtree: on every node */
	DS_EF_SAMPLE = 2u,     /* a training sample: takes part in the shuffle */
};

/* Names are front-coded in blocks of this many entries (entry id order). */
#define DS_IX_BLOCK 16u
/* The largest partition number a row holds (24 bits). */
#define DS_IX_MAX_PART 0xfffffeu

/* One file, directory or symlink.  32 bytes.  A 40-bit field is its lo
 * (32 bits) and hi (8 bits) parts; a file whose size, offset or stored
 * count does not fit in 40 bits is kind 3 and keeps them in the wide
 * table (its poff is the wide row). */
struct ds_row {
	int64_t mtime_ns;   /* st_mtim in nanoseconds since the epoch */
	uint32_t crc;       /* file: CRC-32C of the content (uncompressed) */
	uint32_t size_lo;   /* st_size; symlink: target length; dir: st_size
	                        the source reported */
	uint32_t poff_lo;   /* file: offset in its partition's payload; dir:
	                        its row in the directory table; symlink:
	                        string-pool offset of the target; kind 3: its
	                        row in the wide table */
	uint32_t stored_lo; /* file: stored byte count */
	uint8_t size_hi, poff_hi, stored_hi;
	uint8_t part[3]; /* file: partition number, 24 bits */
	uint16_t mode;   /* bits 0-11 permissions, 12-13 kind (enum
	                        ds_row_kind), 14 zlib, 15 replicated */
};
enum ds_row_kind { DS_RK_FILE = 0, DS_RK_DIR = 1, DS_RK_LINK = 2, DS_RK_WIDE = 3 };
#define DS_RM_ZLIB 0x4000u
#define DS_RM_REPL 0x8000u

/* One directory (in entry id order).  32 bytes. */
struct ds_dir {
	uint32_t id;    /* its entry */
	uint32_t pdir;  /* its parent's directory row (root: 0), < its own */
	uint32_t end;   /* first entry after its subtree */
	uint32_t nlink; /* 2 + subdirectories */
	uint32_t nchildren;
	uint32_t run; /* its first row in the runs table */
	uint32_t nruns;
	uint32_t plen; /* length of its relative path */
};

/* A run of a directory's children: consecutive entry ids first..., the
 * directory's children cum... in name order.  A directory's runs are
 * contiguous in the runs table and cover its children in order.  16 bytes. */
struct ds_run {
	uint32_t first; /* entry id of the run's first child */
	uint32_t cum;   /* children of the directory before this run */
	uint8_t key[8]; /* the first child's name, its first 8 bytes (NUL-padded):
	                   a lookup's binary search over the runs compares these
	                   and decodes a name only on a tie */
};

/* A file's fields that do not fit in its row's 40 bits. */
struct ds_wide {
	uint64_t size, poff, stored;
};

/* Where one partition's payload lives. */
struct ds_part {
	uint64_t size;  /* payload bytes */
	uint32_t loc;   /* first index into the locs array */
	uint32_t nloc;  /* how many nodes hold it */
};

struct ds_loc {
	uint32_t node;  /* node number */
	uint32_t tier;  /* enum ds_tier: where that node keeps it (status) */
	uint64_t base;  /* offset of the partition's payload in that node's store */
};

struct ds_index_header {
	char magic[8];           /* DS_INDEX_MAGIC */
	uint32_t version;        /* DS_INDEX_VERSION */
	uint32_t header_size;    /* sizeof(struct ds_index_header) */
	uint64_t total_size;     /* size of the whole file */
	uint32_t node;           /* the node this store belongs to */
	uint32_t nnodes;         /* nodes in the job */
	uint32_t nentries;
	uint32_t nparts;
	uint32_t nlocs;
	uint32_t nsamples;
	uint32_t ndirs;
	uint32_t nruns;
	uint32_t nwide;
	uint32_t pad0;
	uint64_t off_rows;   /* struct ds_row[nentries] */
	uint64_t off_dirs;   /* struct ds_dir[ndirs] */
	uint64_t off_runs;   /* struct ds_run[nruns] */
	uint64_t off_wide;   /* struct ds_wide[nwide] */
	uint64_t off_blocks; /* uint32_t[nblocks + 1]: offset of each name
	                            block in the names section, then names_size
	                            (nblocks = ceil(nentries / DS_IX_BLOCK)) */
	uint64_t off_names;  /* the front-coded base names */
	uint64_t names_size;
	uint64_t off_parts;      /* struct ds_part[nparts] */
	uint64_t off_locs;       /* struct ds_loc[nlocs] */
	uint64_t off_samples;    /* uint32_t[nsamples]: sample entry ids, path order */
	uint64_t off_strings;    /* string pool: symlink targets, the spill root */
	uint64_t strings_size;
	uint64_t store_size;     /* size of this node's store file */
	uint64_t dev;            /* st_dev readers see for the whole dataset */
	uint64_t pack_id;        /* identifies the pack (hash of its manifest) */
	uint32_t uid, gid;       /* owner readers see (the user who staged) */
	char job[64];            /* job id, NUL-terminated */
	uint64_t ram_size;       /* store bytes in NODEDIR/store; the rest of
	                            store_size is in the spill tier (== store_size:
	                            no spill file) */
	uint32_t spill_dir;      /* string-pool offset of the spill root (stage
	                            --spill DIR), UINT32_MAX: none */
	uint32_t spill_dir_len;
	uint32_t crc;            /* CRC-32C of the file with this field zero */
	uint32_t pad;
};

/* ---- reading (shim, service, stage) ------------------------------------- */
struct ds_index {
	const struct ds_index_header *h;
	const struct ds_row *rows;
	const struct ds_dir *dirs;
	const struct ds_run *runs;
	const struct ds_wide *wide;
	const uint32_t *blocks;
	const unsigned char *names;
	const struct ds_part *parts;
	const struct ds_loc *locs;
	const uint32_t *samples;
	const char *strings;
	size_t map_len;
};

/* Map an index file read-only and check its header, section bounds and (when
 * full != 0) every entry and the CRC.  Returns 0 or -errno/-DS_E*. */
int ds_index_open(struct ds_index *ix, const char *path, int full);
/* Same over a buffer the caller owns (not copied; must outlive ix). */
int ds_index_from_buf(struct ds_index *ix, const void *buf, size_t len, int full);
void ds_index_close(struct ds_index *ix);
/* Is entry id safe to follow: inside the index; its name block inside the
 * names section and its name decoding to one component (no '/', no NUL,
 * not "." or "..", 1..NAME_MAX bytes; "" for the root alone) whose path,
 * with its parent directory's, is shorter than PATH_MAX; a directory's row
 * of the directory table naming it back, its runs inside the runs table;
 * a file's stored bytes inside its partition (stored raw: exactly `size`
 * of them; zlib: at least size/1032, deflate's largest ratio); a symlink's
 * target NUL-terminated in the pool.  Bounded work (one name block of at
 * most DS_IX_BLOCK names, the parent search).  A reader that maps the index
 * without the full check (the shim) uses only entries that pass:
 * ds_index_lookup returns no other, and ids read from the index (parents,
 * children) go through it first.  The open always checks entry 0 (a
 * directory named ""). */
int ds_index_entry_ok(const struct ds_index *ix, uint64_t id);
/* What ds_epoch_share relies on: every sample a usable file, in increasing
 * order; the locations laid out as the builder does (each partition's a run
 * of the locs array, in partition order, covering it, nodes < nnodes and
 * increasing within a run).  O(nsamples + nparts + nlocs).  0 or
 * -DS_ECORRUPT. */
int ds_index_check_shuffle(const struct ds_index *ix);

/* Entry id of a relative path ("" is the root; no leading or trailing '/'),
 * or -1.  No system call, no allocation. */
int64_t ds_index_lookup(const struct ds_index *ix, const char *path, size_t len);

/* ---- entry accessors ----------------------------------------------------
 * Readers see an entry only through these (never ix->rows, ix->dirs,
 * ix->names or ix->samples directly), so the on-disk layout can change
 * inside index.c and this block alone.  None checks id: call them on an
 * entry that passed ds_index_entry_ok (or the full check at open), and on
 * the kind of entry a field is documented for. */
static inline uint64_t ds__ix40(uint32_t lo, uint8_t hi) { return lo | (uint64_t)hi << 32; }
static inline unsigned ds__ix_kind(const struct ds_index *ix, uint32_t id)
{
	return (ix->rows[id].mode >> 12) & 3u;
}
static inline uint32_t ds_ix_mode(const struct ds_index *ix, uint32_t id)
{
	static const uint32_t type[4] = {S_IFREG, S_IFDIR, S_IFLNK, S_IFREG};
	return type[ds__ix_kind(ix, id)] | (ix->rows[id].mode & 07777u);
}
/* files: partition, offset of the stored bytes in its payload, their count,
 * their codec and the CRC-32C of the (uncompressed) content */
struct ds_ix_file {
	uint64_t size, poff, stored;
	uint32_t part, crc;
	uint8_t codec, flags;
};
/* A file's fields at once (one decode of its row, for the read paths). */
static inline void ds_ix_file(const struct ds_index *ix, uint32_t id, struct ds_ix_file *f)
{
	const struct ds_row *r = &ix->rows[id];
	if (((r->mode >> 12) & 3u) == DS_RK_WIDE) {
		const struct ds_wide *w = &ix->wide[ds__ix40(r->poff_lo, r->poff_hi)];
		f->size = w->size;
		f->poff = w->poff;
		f->stored = w->stored;
	} else {
		f->size = ds__ix40(r->size_lo, r->size_hi);
		f->poff = ds__ix40(r->poff_lo, r->poff_hi);
		f->stored = ds__ix40(r->stored_lo, r->stored_hi);
	}
	f->part = r->part[0] | (uint32_t)r->part[1] << 8 | (uint32_t)r->part[2] << 16;
	f->crc = r->crc;
	f->codec = r->mode & DS_RM_ZLIB ? DS_CODEC_ZLIB : DS_CODEC_NONE;
	f->flags = r->mode & DS_RM_REPL ? DS_EF_REPLICATED : DS_EF_SAMPLE;
}
/* st_size; symlink: length of the target; dir: st_size the source reported */
static inline uint64_t ds_ix_size(const struct ds_index *ix, uint32_t id)
{
	const struct ds_row *r = &ix->rows[id];
	if (((r->mode >> 12) & 3u) == DS_RK_WIDE)
		return ix->wide[ds__ix40(r->poff_lo, r->poff_hi)].size;
	return ds__ix40(r->size_lo, r->size_hi);
}
static inline int64_t ds_ix_mtime(const struct ds_index *ix, uint32_t id)
{
	return ix->rows[id].mtime_ns;
}
/* a directory's row in the directory table */
static inline const struct ds_dir *ds__ix_dir(const struct ds_index *ix, uint32_t id)
{
	return &ix->dirs[ds__ix40(ix->rows[id].poff_lo, ix->rows[id].poff_hi)];
}
/* parent directory (root: 0): a directory's from its row, another entry's
 * from the directory table (a search over it, O(log dirs + depth)) */
uint32_t ds_ix_parent(const struct ds_index *ix, uint32_t id);
static inline uint32_t ds_ix_nlink(const struct ds_index *ix, uint32_t id)
{
	return ds__ix_kind(ix, id) == DS_RK_DIR ? ds__ix_dir(ix, id)->nlink : 1;
}
/* DS_EF_REPLICATED, or DS_EF_SAMPLE for a file outside --replicate */
static inline uint8_t ds_ix_flags(const struct ds_index *ix, uint32_t id)
{
	unsigned k = ds__ix_kind(ix, id);
	if (ix->rows[id].mode & DS_RM_REPL)
		return DS_EF_REPLICATED;
	return k == DS_RK_FILE || k == DS_RK_WIDE ? DS_EF_SAMPLE : 0;
}
static inline uint32_t ds_ix_part(const struct ds_index *ix, uint32_t id)
{
	unsigned k = ds__ix_kind(ix, id);
	const uint8_t *p = ix->rows[id].part;
	if (k != DS_RK_FILE && k != DS_RK_WIDE)
		return UINT32_MAX;
	return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}
static inline uint64_t ds_ix_poff(const struct ds_index *ix, uint32_t id)
{
	struct ds_ix_file f;
	ds_ix_file(ix, id, &f);
	return f.poff;
}
static inline uint64_t ds_ix_stored(const struct ds_index *ix, uint32_t id)
{
	struct ds_ix_file f;
	ds_ix_file(ix, id, &f);
	return f.stored;
}
static inline uint8_t ds_ix_codec(const struct ds_index *ix, uint32_t id)
{
	return ix->rows[id].mode & DS_RM_ZLIB ? DS_CODEC_ZLIB : DS_CODEC_NONE;
}
static inline uint32_t ds_ix_crc(const struct ds_index *ix, uint32_t id)
{
	return ix->rows[id].crc;
}
/* directories: number of children, and child k (0 <= k < nchildren) in
 * name order (an id read from the index: check it before use; a damaged
 * directory gives UINT32_MAX) */
static inline uint32_t ds_ix_nchildren(const struct ds_index *ix, uint32_t id)
{
	return ds__ix_dir(ix, id)->nchildren;
}
uint32_t ds_ix_child(const struct ds_index *ix, uint32_t id, uint32_t k);
/* symlinks: the target, NUL-terminated, ds_ix_size bytes */
static inline const char *ds_ix_target(const struct ds_index *ix, uint32_t id)
{
	return ix->strings + ds__ix40(ix->rows[id].poff_lo, ix->rows[id].poff_hi);
}
/* The last component of the path, decoded into buf (at least
 * DS_IX_NAME_BUF bytes), NUL-terminated ("" for the root); returns buf.
 * Names are front-coded: there is no pointer into the index to return. */
#define DS_IX_NAME_BUF (NAME_MAX + 1)
const char *ds_ix_base(const struct ds_index *ix, uint32_t id, char *buf);
/* its length (<= NAME_MAX) */
size_t ds_ix_base_len(const struct ds_index *ix, uint32_t id);
/* length of the relative path (< PATH_MAX) */
size_t ds_ix_path_len(const struct ds_index *ix, uint32_t id);
/* Write entry id's relative path ("" for the root), NUL-terminated, into
 * buf of size bytes (PATH_MAX always suffices for an entry that passed
 * ds_index_entry_ok).  Returns its length, or -ENAMETOOLONG (buf then holds
 * ""), -DS_ECORRUPT for a damaged chain of parents. */
int ds_ix_path(const struct ds_index *ix, uint32_t id, char *buf, size_t size);
/* Many names and paths at a low cost per entry (an epoch list, readdir, a
 * walk).  A name is front-coded against the one before it in its block of
 * DS_IX_BLOCK: decoding one alone costs a decode from the block's start;
 * a path adds each ancestor's name.  These keep what they decoded last.
 *
 * ds_ix_names: a name decoder that keeps its place in a block, so that the
 * next id of the same block (the next child of a readdir) costs one step.
 * Zero it (or ds_ix_names_init) before its first use; it may be used with
 * one index only, and it stays valid as long as that index is mapped. */
struct ds_ix_names {
	uint64_t pos, end; /* the block's bytes not decoded yet */
	uint32_t id;       /* the entry whose name `name` holds + 1; 0: none */
	unsigned len;      /* strlen(name) */
	char name[NAME_MAX + 1];
};
static inline void ds_ix_names_init(struct ds_ix_names *n) { n->id = 0; }
/* Entry id's base name into n->name (NUL-terminated): its length, or -1
 * when id is not an entry or its name block is damaged.  Any id order;
 * increasing ids of one block cost one step each. */
int ds_ix_names_get(const struct ds_index *ix, struct ds_ix_names *n, uint32_t id);
/* Child k of directory entry dir, its name decoded through n (n->name,
 * n->len): the child's id, or -1 when dir is not a usable directory, k is
 * past its children or the child is damaged.  What ds_ix_child,
 * ds_index_entry_ok, ds_ix_parent (== dir) and ds_ix_base check and give
 * together, with one step of the front coding when k follows the child
 * decoded last (a readdir). */
int64_t ds_ix_child_named(const struct ds_index *ix, struct ds_ix_names *n, uint32_t dir,
                          uint32_t k);
/* ds_ix_paths: a cursor that builds paths, keeping the path of the
 * directory it was in last (and its ancestors') and its place in a name
 * block: ids in increasing order (a list sorted by id, a walk) cost one
 * step of the front coding and a copy each, not a decode from the start of
 * the block and of every ancestor's name.  Any order works (a jump
 * restarts a block; a directory outside the kept chain is added,
 * O(depth)).  About 30 KB: allocate one per list (NULL: no memory). */
struct ds_ix_paths;
struct ds_ix_paths *ds_ix_paths_new(const struct ds_index *ix);
void ds_ix_paths_free(struct ds_ix_paths *c);
/* Entry id's relative path ("" for the root), NUL-terminated, in *path
 * (valid until the next call on the cursor): its length, or -DS_ECORRUPT
 * when id is not an entry that passes ds_index_entry_ok or its chain of
 * parents is damaged; then *path is "".  Any id may be asked (no check
 * needed before): for one that passes, the bytes ds_ix_path writes. */
int ds_ix_paths_get(struct ds_ix_paths *c, uint32_t id, const char **path);
/* The paths of samples ids[0..n) (any order, repeats allowed), one a line
 * in the list's order, in a malloc'd buffer (*data, *len bytes; a NUL after
 * them): built in id order through a ds_ix_paths cursor (~0.2 us an entry
 * at millions of names).  0, -ENOMEM, or -EIO when an id is not a sample
 * (a regular file that passes ds_index_entry_ok); needs no check before. */
int ds_ix_list(const struct ds_index *ix, const uint32_t *ids, size_t n, char **data, size_t *len);
/* The spill root the header names (stage --spill DIR), or NULL: none. */
static inline const char *ds_index_spill_root(const struct ds_index *ix)
{
	return ix->h->spill_dir == UINT32_MAX ? NULL : ix->strings + ix->h->spill_dir;
}
/* A bound on the bytes of an index's per-entry sections for n entries whose
 * paths and symlink targets take `names` bytes with their NULs (what stage
 * reserves room for before it builds one). */
uint64_t ds_index_entry_bytes(uint64_t n, uint64_t names);
/* Hint that entry id's fields are read soon (a loop over ids). */
static inline void ds_ix_prefetch(const struct ds_index *ix, uint32_t id)
{
	__builtin_prefetch(&ix->rows[id]);
}
/* Hint that entry id's name (ds_ix_paths_get, ds_ix_names_get) is read
 * soon: a loop over ids in increasing order calls it a few ids ahead with
 * far = 1 (where its block starts), then nearer with far = 0 (the block's
 * first bytes: reads the offset, bounded). */
static inline void ds_ix_prefetch_name(const struct ds_index *ix, uint32_t id, int far)
{
	if (far)
		__builtin_prefetch(&ix->blocks[id / DS_IX_BLOCK]);
	else if (id < ix->h->nentries)
		__builtin_prefetch(ix->names + ix->blocks[id / DS_IX_BLOCK]);
}
/* sample j (0 <= j < nsamples) of the sample table: an entry id */
static inline uint32_t ds_ix_sample(const struct ds_index *ix, uint64_t j)
{
	return ix->samples[j];
}
/* Child of directory dir named (name, nlen) (one component, no '/'), or -1.
 * Like ds_index_lookup, it returns only entries that pass
 * ds_index_entry_ok.  No system call, no allocation. */
int64_t ds_index_child(const struct ds_index *ix, uint32_t dir, const char *name, size_t nlen);
/* Is partition `part` held by `node`?  Sets *base to its offset in that
 * node's store. */
int ds_index_part_on(const struct ds_index *ix, uint32_t part, uint32_t node, uint64_t *base);
/* Inode number readers see for entry id (stable for a pack). */
#define DS_INO(id) ((uint64_t)(id) + 16)
/* st_blocks of an entry as a copy on a native file system with 4 KiB blocks
 * (ext4, xfs, tmpfs: du agrees with them): a file takes whole blocks; a
 * directory the blocks its source size says when that is a multiple of 4 KiB
 * (ext4), else none (tmpfs, btrfs, xfs keep small ones in the inode); a
 * symlink of under 60 bytes lives in its inode (ext4's fast symlink). */
static inline int64_t ds_stat_blocks(uint32_t mode, uint64_t size)
{
	uint64_t b = (size + 4095) / 4096 * 8;
	if (S_ISDIR(mode))
		return size % 4096 ? 0 : (int64_t)b;
	if (S_ISLNK(mode))
		return size < 60 ? 0 : (int64_t)b;
	return (int64_t)b;
}
/* Fill a struct stat for entry id as readers see it. */
void ds_index_stat(const struct ds_index *ix, uint32_t id, struct stat *st);
uint64_t ds_hash_path(const char *p, size_t len);

/* ---- building (stage, tests) -------------------------------------------- */
struct ds_index_builder;

struct ds_index_builder *ds_index_builder_new(void);
void ds_index_builder_free(struct ds_index_builder *b);
/* Add an entry by relative path; parents must have been added (or are added
 * implicitly as 0755 directories).  For files: size, part, poff, stored,
 * codec, crc, flags.  For symlinks: target.  Returns 0 or -errno/-DS_ENAME. */
int ds_index_add_dir(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                     uint64_t size);
int ds_index_add_file(struct ds_index_builder *b, const char *path, uint32_t mode, int64_t mtime_ns,
                      uint64_t size, uint32_t part, uint64_t poff, uint64_t stored,
                      uint8_t codec, uint32_t crc, uint8_t flags);
int ds_index_add_symlink(struct ds_index_builder *b, const char *path, int64_t mtime_ns,
                         const char *target);
/* Partitions: sizes, then for each the nodes holding it (locations). */
void ds_index_set_parts(struct ds_index_builder *b, uint32_t nparts, const uint64_t *sizes);
void ds_index_add_loc(struct ds_index_builder *b, uint32_t part, uint32_t node, uint64_t base);
/* The same with the tier that node keeps it in (ds_index_add_loc: RAM). */
void ds_index_add_loc_tier(struct ds_index_builder *b, uint32_t part, uint32_t node, uint64_t base,
                           uint32_t tier);
/* This node's spill tier: store offsets from ram_size (a multiple of
 * DS_SPILL_ALIGN, below store_size) are in spill_root's job directory.
 * Without a call the whole store is in RAM. */
void ds_index_set_spill(struct ds_index_builder *b, uint64_t ram_size, const char *spill_root);
/* Node identity and job info recorded in the header. */
void ds_index_set_node(struct ds_index_builder *b, uint32_t node, uint32_t nnodes,
                       uint64_t store_size, const char *job, uint64_t pack_id);
/* Serialise (sorts, links directories, builds the hash and the sample list)
 * into a malloc'd buffer.  Returns 0 or -errno. */
int ds_index_build(struct ds_index_builder *b, void **out, size_t *len);
/* Build and write to path atomically (path.tmp, fsync, rename), mode 0600;
 * then ds_index_hugify(path). */
int ds_index_write(struct ds_index_builder *b, const char *path);
/* Ask the kernel to keep the index file's page cache in 2 MiB pages
 * (MADV_COLLAPSE; common/ixhuge.c), once per node, so that readers, which
 * map it 2 MiB-aligned, fault once per 2 MiB of it instead of once per
 * 64 KiB.  Off with DSTAGE_INDEX_HUGE=0.  0, or -errno when the kernel
 * would not (the index then works in 4 KiB pages, as it would anyway). */
int ds_index_hugify(const char *path);
/* mmap(PROT_READ, MAP_SHARED) of fd's first len bytes at a 2 MiB-aligned
 * address when len >= 2 MiB (ds_index_open; ixhuge.c). */
void *ds__map_ro_aligned(int fd, size_t len);

/* ---- store paths -------------------------------------------------------- */
/* DIR/dstage.<uid>.<job> and DIR/dstage.<uid>.<job>/<node>; returns a
 * malloc'd string. The job is the given one, else $SLURM_JOB_ID, else "0";
 * a '/' in it becomes '_' (the job id is one path component: it can never
 * lead out of DIR). */
char *ds_store_jobdir(const char *dir, const char *job);
char *ds_store_nodedir(const char *dir, const char *job, uint32_t node);
/* Does this node's store have a spill tier (bytes outside NODEDIR/store)? */
static inline int ds_index_spills(const struct ds_index *ix)
{
	return ix->h->ram_size < ix->h->store_size;
}
/* SPILL/dstage.<uid>.<job>/<node>, the spill tier's node directory, from
 * the index alone (the uid and job of its header), into buf; with jobdir_len
 * set to the length of its job-directory prefix.  0, -ENOENT (no spill
 * tier) or -ENAMETOOLONG.  libc only, no system call: the shim uses it. */
int ds_store_spill_nodedir(const struct ds_index *ix, char *buf, size_t len, size_t *jobdir_len);
/* Remove node directory nodedir's spill tier (the one its index names: the
 * node directory, its .partial, and the spill job directory once empty);
 * a spill job directory that is not this user's directory is left alone
 * (-EPERM).  0 when there is none.  For clean and serve --clean, before
 * nodedir itself goes. */
int ds_store_spill_remove(const char *nodedir);
const char *ds_store_default_job(void);

#endif
