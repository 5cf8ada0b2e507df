/* SPDX-License-Identifier: BSD-3-Clause */
/* pack_int.h: internals shared by the .c files of hdf5/ (never included
 * outside this folder; the module's face is dspack.h).
 *
 * Files of the module:
 *   h5util.c    HDF5 property lists, table encoding, the skeleton writer,
 *               verify's cross-check of HDF5's view
 *   seal.c      the seal: a CRC-protected header and table directory in each
 *               file's user block, what dstage's readers go by
 *   manifest.c  reading and validating index.h5 and partition tables
 *   payload.c   locating a partition's payload, decoding one file's bytes
 *   scan.c      walking SRC into a sorted entry list (pack, rank 0)
 *   tar.c       the members of a tar shard (--expand-tar; private face tar.h)
 *   plan.c      partitioning, the plan broadcast to every rank
 *   writer.c    writing one part-NNNNN.h5 (sink, zlib, CRC-32C)
 *   pack.c      `dstage pack`: options, MPI, the temporary directory, commit
 *   inplace.c   sources read where they lie: pack --in-place's CRC pass,
 *               opening a manifest's sources safely, a plain tree's
 *               manifest made by the ranks of a stage (ds_tree_manifest)
 *   verify.c    `dstage verify`
 *   cmd_read.c  `dstage ls`, `dstage cat` */
#ifndef DS_PACK_INT_H
#define DS_PACK_INT_H

#include "dscommon.h"
#include "dsindex.h"
#include "dspack.h"

#include <hdf5.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>

#define DS__PACK_FORMAT "dstage-pack" /* root attribute "format" of index.h5 */
#define DS__PART_FORMAT "dstage-part" /* ... and of part-NNNNN.h5 */
#define DS__PACK_VERSION 1u
#define DS__PACK_VERSION_INPLACE 2u   /* "version" of an in-place index.h5 */
#define DS__CHECKSUM "crc32c"
#define DS__MAX_PARTS 100000u         /* part-NNNNN.h5 has five digits */
#define DS__MAX_ENTRIES 0xfffffff0u   /* entry ids are uint32 in the node index */
#define DS__INDEX_NAME "index.h5"
/* Stored raw unless zlib makes a file at least this much smaller (percent). */
#define DS__ZLIB_MIN_SAVING 5

/* ---- tables ------------------------------------------------------------- */
/* One row of an "entries" table (index.h5: every entry; part-NNNNN.h5: that
 * partition's files).  On disk the fields are packed little-endian in this
 * order (h5util.c, row_fields); in memory this native struct. */
struct ds__row {
	uint64_t path_off;   /* path: bytes [path_off, path_off+path_len) of "strings" */
	uint32_t path_len;
	uint32_t mode;
	int64_t mtime_ns;
	uint64_t size;
	uint32_t part;       /* files: partition; others: UINT32_MAX */
	uint64_t offset;     /* files: offset of the stored bytes in the payload */
	uint64_t stored;     /* files: stored byte count */
	uint8_t codec;       /* enum ds_codec */
	uint8_t flags;       /* enum ds_entry_flag */
	uint32_t crc;        /* files: CRC-32C of the content */
	uint64_t target_off; /* symlinks: target in "strings"; others 0, 0 */
	uint32_t target_len;
};

/* One row of the "partitions" table of index.h5. */
struct ds__prow {
	uint64_t size;
	uint32_t nfiles;
	uint8_t replicated;
};

/* An entries table and its string pool, as read from a file. */
struct ds__table {
	uint64_t n;
	struct ds__row *rows;
	char *pool;
	uint64_t pool_len;
};

struct ds__seal;
struct ds_s3;
struct ds__s3fetch;

/* ---- HDF5 helpers (h5util.c) -------------------------------------------- */
/* Once per process: no automatic printing of HDF5's error stack (we name the
 * problem ourselves). */
void ds__h5_quiet(void);
/* Access list: sec2, fixed format bounds (EARLIEST..V18, so the bytes do not
 * depend on the library's defaults), 4 KiB alignment of large blocks, no file
 * locking (Lustre is often mounted without flock). */
hid_t ds__h5_fapl(void);
/* Creation list: the 4 KiB user block that holds the seal, no timestamps. */
hid_t ds__h5_fcpl(void);
/* Dataset creation: contiguous, allocated at creation, never filled (we write
 * every byte), no timestamps. */
hid_t ds__h5_dcpl(void);
/* The on-disk compound types of the tables (packed, little-endian). */
hid_t ds__h5_row_type(void);
hid_t ds__h5_prow_type(void);
/* Rows to and from those bytes (malloc'd buffer of *len bytes / rows[n]). */
void *ds__rows_encode(const struct ds__row *rows, uint64_t n, size_t *len);
void *ds__prows_encode(const struct ds__prow *rows, uint64_t n, size_t *len);
void ds__rows_decode(const void *raw, uint64_t n, struct ds__row *rows);
void ds__prows_decode(const void *raw, uint64_t n, struct ds__prow *rows);
/* Create a 1-D contiguous dataset of n elements, allocated, not written.
 * Returns the open dataset or H5I_INVALID_HID. */
hid_t ds__h5_dataset(hid_t loc, const char *name, hid_t ftype, uint64_t n);
int ds__h5_attr_str(hid_t loc, const char *name, const char *val);
int ds__h5_attr_u64(hid_t loc, const char *name, hid_t ftype, uint64_t v);
/* Checked reads of an untrusted file (verify's cross-check, in a child). */
int ds__h5_read_attr_str(hid_t loc, const char *name, char *buf, size_t cap);
int ds__h5_read_attr_u64(hid_t loc, const char *name, uint64_t *v);
/* Open 1-D dataset `name` and check what the untrusted file says about it:
 * contiguous, no filter, no external file, storage that covers n elements
 * of its type within file_len bytes.  Sets *n and the file type's size. */
int ds__h5_open_1d(hid_t file, const char *name, uint64_t file_len, hid_t *dset, uint64_t *n,
                   size_t *type_size);
/* Writing: HDF5 only lays a file out; the raw bytes of every dataset are
 * written afterwards with pwrite.  HDF5 1.10 cannot recover from a failed
 * H5Fclose (the half-closed file crashes its exit handler), so the file is
 * closed before any bulk write can fill the disk, and a failed close is
 * remembered: the command then leaves with _exit (ds__h5_broken). */
struct ds__h5_ds {
	const char *name;
	hid_t ftype;      /* type on disk */
	uint64_t n;       /* elements */
	uint64_t off;     /* set: file offset of its (unwritten) data */
};
/* Create path with the root attributes written by attrs() and the datasets
 * ds[] allocated but not written; close it.  0 or -EIO. */
int ds__h5_skeleton(const char *path, int (*attrs)(hid_t f, const void *ctx), const void *ctx,
                    struct ds__h5_ds *ds, size_t nds);
int ds__h5_close(hid_t f);
int ds__h5_broken(void);
/* Open an HDF5 file read-only. */
hid_t ds__h5_open_file(const char *path);
/* Does HDF5's view of a pack file agree with its seal (attributes, the
 * datasets' types, sizes and offsets)?  Runs HDF5 in a child process, so a
 * crafted file that crashes the library is reported, not fatal.  0 or
 * -DS_ECORRUPT (logged). */
int ds__h5_crosscheck(const char *path, const struct ds__seal *s);

/* ---- the seal (seal.c) -------------------------------------------------- */
/* Every file of a pack starts with a 4 KiB HDF5 user block (HDF5 and h5py
 * skip it).  Its first 128 bytes, little-endian, are the seal: what dstage
 * reads instead of parsing HDF5 (see seal.c for why).
 *     0  char[16] magic "dstage-pack\n" (index.h5) or "dstage-part\n"
 *    16  u32 seal version (1)   20 u32 user block size (4096)
 *    24  u32 bytes used (128)   28 u32 partition number (index.h5: 0xffffffff)
 *    32  u64 file size          40 u64 pack_id
 *    48  u64 entries offset     56 u64 entries rows
 *    64  u64 strings offset     72 u64 strings bytes
 *    80  u64 partitions offset  88 u64 partitions rows (index.h5 only)
 *    96  u64 payload offset    104 u64 payload bytes (partitions only)
 *   112  u32 nparts            116 u32 flags (partitions: 1 = replicated)
 *   120  u32 CRC-32C of every byte after the user block except the payload
 *   124  u32 CRC-32C of bytes 0..123
 * Offsets are from the start of the file; a table with 0 rows has offset 0. */
#define DS__SEAL_SIZE 4096u
#define DS__SEAL_USED 128u
#define DS__SEAL_PACK_MAGIC "dstage-pack\n"
#define DS__SEAL_PART_MAGIC "dstage-part\n"
/* Seal version 2 is written only for the index.h5 of an in-place pack
 * (older dstage refuses it instead of staging garbage): flags has
 * DS__SEAL_INPLACE and the payload fields locate the "sources" table
 * instead (covered by the tables' CRC): DS__SROW_BYTES per row, row 0 the
 * absolute source root, row i+1 entry i's source:
 *     0 u64 src_off   8 u64 string offset in "strings"   16 u32 length
 * (a length of 0 for a file: its source is its own path). */
#define DS__SEAL_INPLACE 2u
#define DS__SROW_BYTES 20u
#define DS__ROW_BYTES 70u  /* a packed "entries" row */
#define DS__PROW_BYTES 13u /* a packed "partitions" row */

struct ds__seal {
	uint64_t file_size, pack_id;
	uint64_t entries_off, nentries;
	uint64_t strings_off, strings_len;
	uint64_t parts_off, nparts_rows;
	uint64_t payload_off, payload_len;
	uint32_t part, nparts, flags;
	uint32_t meta_crc;
};

/* Write the seal s (file_size and meta_crc are filled in) into fd, a file
 * HDF5 has closed and whose tables and payload are written. */
int ds__seal_write(int fd, const char *magic, struct ds__seal *s);
/* Check the seal of a file / an image: header, directory bounds, the CRC
 * of the tables and HDF5 structure; log why not with `what` as subject.
 * Returns 0, -DS_ECORRUPT, -DS_EFORMAT or -errno. */
int ds__seal_check_fd(int fd, const char *what, const char *magic, struct ds__seal *s);
int ds__seal_check_buf(const void *buf, size_t len, const char *what, const char *magic,
                       struct ds__seal *s);
/* The header checks of ds__seal_check_fd alone (the caller checks the
 * tables' CRC): for files read by ranges (s3://). */
int ds__seal_check_head(const unsigned char h[DS__SEAL_USED], uint64_t size, const char *what,
                        const char *magic, struct ds__seal *s);
/* Does a partition's seal agree with the manifest (ds__part_open's check)? */
int ds__part_seal_check(const struct ds__seal *s, const char *what, uint32_t part,
                        const struct ds_manifest *m);
/* Raw encode/decode, no checks (tests and the fuzzer build seals with it). */
void ds__seal_encode(unsigned char h[DS__SEAL_USED], const char *magic, const struct ds__seal *s);
void ds__seal_decode(const unsigned char h[DS__SEAL_USED], struct ds__seal *s);
/* Make an image's seal match its bytes (size, CRCs), keeping its directory:
 * the fuzzer uses it to get past the CRC into the table decoding. */
void ds__seal_fixup_buf(void *buf, size_t len, const char *magic);

/* ---- tables and manifest (manifest.c) ----------------------------------- */
/* Bytes of a pack file: an open descriptor, or an image in memory. */
struct ds__src {
	int fd;            /* -1: use buf */
	const char *buf;
	size_t len;
};
/* The entries table and string pool where seal s says they are. */
int ds__table_read(const struct ds__src *src, const struct ds__seal *s, const char *what,
                   struct ds__table *t);
void ds__table_release(struct ds__table *t);
/* Check a symlink target: valid names (else -DS_ENAME), relative and
 * lexically inside the tree when resolved from the directory of the link
 * (else -EXDEV).  Sets *why on failure. */
int ds__target_check(const char *link, size_t link_len, const char *target, size_t len,
                     const char **why);
/* Entry index of path in a manifest (binary search), or -1. */
int64_t ds__manifest_find(const struct ds_manifest *m, const char *path);
/* The same over any n elements sorted by path (ds_path_cmp), element i's
 * path given by path_at(ctx, i): a tree, a tar's members. */
int64_t ds__path_find(size_t n, const char *(*path_at)(const void *ctx, size_t i), const void *ctx,
                      const char *path);

/* ---- payload (payload.c) ------------------------------------------------ */
/* An open partition: its file and where its payload lies in it. */
struct ds__part {
	int fd;
	uint32_t part;
	uint64_t base, len; /* payload: file bytes [base, base+len) */
	char *path;
	struct ds__seal seal;
};

/* Check and open partition `part` of the pack at packdir: its seal (part
 * number, pack_id, payload size as the manifest says).  When table != NULL,
 * also read the partition's own entries table.  No HDF5 involved. */
int ds__part_open(const char *packdir, uint32_t part, const struct ds_manifest *m,
                  struct ds__part *p, struct ds__table *table);
void ds__part_close(struct ds__part *p);

/* Receives the decoded bytes of a file, in order.  buf == NULL stands for
 * len zero bytes (a hole of a sparse payload, never read from disk).
 * Returns 0 or -errno. */
typedef int (*ds__sink_fn)(void *ctx, const void *buf, size_t len);
/* ZEROS bytes of zeros, for holes. */
#define DS__ZEROS (1u << 20)
extern const char ds__zeros[DS__ZEROS];
/* Read file entry e from its open partition, decode it, check its size and
 * CRC-32C, and hand the bytes to fn (which may be NULL).  Returns 0,
 * -DS_ECHECKSUM, -DS_ECORRUPT (bad zlib stream, wrong size) or -errno. */
int ds__entry_read(const struct ds__part *p, const struct ds_mentry *e, ds__sink_fn fn, void *ctx);

/* ---- small helpers (manifest.c) ----------------------------------------- */
/* Quote a name for a message: control bytes, and when the name is not valid
 * UTF-8 every byte >= 0x80, become \xNN.  Returns buf. */
char *ds__quote(const char *s, size_t len, char *buf, size_t cap);
/* "OUT/NAME" in a malloc'd string. */
char *ds__join(const char *dir, const char *name);
/* Free m->blocks (a streamed manifest's paths, ds_mstream_run). */
void ds__mblocks_free(struct ds_manifest *m);
/* A copy of s[0, len) with a NUL in m->blocks. */
char *ds__mblock_copy(struct ds_manifest *m, const char *s, size_t len);
/* The manifest reader's pieces, for mstream.c: row r, entry i of the
 * manifest (its strings in t's pool), checked against m's partitions,
 * files counted per partition into nfiles; the row as an entry (strings
 * copied to *arena); the message for a bad entry (-DS_ECORRUPT); len
 * bytes at off of src into a new buffer. */
int ds__row_check(const char *what, const struct ds__table *t, struct ds_manifest *m,
                  uint32_t *nfiles, uint64_t i, const struct ds__row *r);
void ds__row_entry(struct ds_mentry *e, const struct ds__row *r, const struct ds__table *t,
                   char **arena);
int ds__entry_bad(const char *what, uint64_t i, const char *path, size_t len, const char *why);
int ds__src_read(const struct ds__src *src, uint64_t off, uint64_t len, void **out);
/* An in-place index's sources rows (DS__SROW_BYTES each), decoded; row 0
 * (the root) checked; entry i's row checked against e (its path set, its
 * strings in t's pool) as the whole reader does, e->src_off set, *src the
 * source's name in t's pool (r->len bytes) or NULL (the entry's own path).
 * The checks say why (-DS_ECORRUPT). */
struct ds__srow {
	uint64_t off, str;
	uint32_t len;
};
void ds__srows_decode(const unsigned char *raw, uint64_t n, struct ds__srow *v);
int ds__sroot_check(const char *what, const struct ds__table *t, const struct ds__srow *r0);
int ds__srow_check(const char *what, const struct ds__table *t, uint64_t i, struct ds_mentry *e,
                   const struct ds__srow *r, const char **src);
/* mode string of ls -l ("drwxr-xr-x") into buf[11]. */
void ds__mode_string(uint32_t mode, char buf[11]);

/* ---- the pack side (scan.c, plan.c, writer.c, pack.c) ------------------- */
/* What few entries have, kept apart from the entry table (pack's rank 0
 * holds one entry per name: issue 27): an in-place source other than the
 * entry's own path (a tar member: the content lies in the file at offset
 * src of names, src_len bytes, from byte src_off on), and a plain tree's
 * st_ctime at the scan (checked at open by the stage). */
struct ds__pextra {
	uint64_t src, src_off;
	int64_t ctime_ns;
	uint32_t src_len, pad;
};

/* One entry found in SRC.  (64 bytes, no hole; sent raw to the ranks.) */
struct ds__pentry {
	uint64_t size;
	int64_t mtime_ns;
	uint64_t ino;       /* recognises the file when it is opened to be read */
	uint64_t path;      /* offset of the NUL-terminated path in tree.names */
	uint64_t target;    /* symlinks: offset of the target in tree.names */
	uint32_t path_len, target_len;
	uint32_t mode;
	uint32_t part;      /* files: partition (plan.c); others UINT32_MAX */
	uint32_t x;         /* 1 + its ds__pextra in tree.x; 0: none (own path, no ctime) */
	uint8_t flags;      /* DS_EF_REPLICATED */
	uint8_t follow;     /* reached through --dereference: open following links */
	uint16_t pad;
};

struct ds__tree {
	struct ds__pentry *e; /* sorted by path (ds_path_cmp) */
	size_t n, cap;
	struct ds_buf names;
	uint64_t nfiles, ndirs, nlinks, bytes;
	struct ds__pextra *x; /* the entries' extras, in no order */
	size_t nx, xcap;
};

/* e's extras (all zero when it has none). */
static inline const struct ds__pextra *ds__pentry_x(const struct ds__tree *t,
                                                    const struct ds__pentry *e)
{
	static const struct ds__pextra none;
	return e->x ? &t->x[e->x - 1] : &none;
}
/* e's extras, made when it has none (scan.c). */
struct ds__pextra *ds__pentry_xnew(struct ds__tree *t, struct ds__pentry *e);

static inline const char *ds__tree_path(const struct ds__tree *t, const struct ds__pentry *e)
{
	return t->names.data + e->path;
}

struct ds__scan_opts {
	const char *src;       /* SRC as given, for messages */
	int srcfd;             /* O_DIRECTORY descriptor of SRC */
	char **exclude;        /* --exclude globs */
	size_t nexclude;
	char **replicate;      /* --replicate subpaths */
	size_t nreplicate;
	const char *files_from; /* --files-from FILE ("-": stdin), or NULL */
	int dereference;
	double progress;       /* seconds between progress lines; 0: none */
	const char *verb;      /* "nothing to VERB": NULL for "pack" */
	int expand_tar;        /* --expand-tar: each *.tar a directory of its members */
	int ctime;             /* keep each entry's st_ctime (a plain tree at stage time) */
	struct ds_buf *tars;   /* set: --expand-tar's tars are listed here (paths,
	                          NUL-terminated) to be scanned later by whichever
	                          rank (ds__scan_tar), not where the walk meets them */
};

/* Walk SRC (or the --files-from list) into t, sorted, replicated subtrees
 * flagged.  Fatal problems are logged and returned as a negative code;
 * special files and escaping symlinks are skipped with a warning. */
int ds__scan(const struct ds__scan_opts *o, struct ds__tree *t);
/* ds__scan without its ending (ds__scan_finish): the unsorted walk, for a
 * tree that more is merged into first (o->tars listed by every rank). */
int ds__scan_walk(const struct ds__scan_opts *o, struct ds__tree *t);
void ds__tree_release(struct ds__tree *t);
/* --expand-tar: the tar at path (relative to o->srcfd, listed in o->tars by
 * a walk) as the directory of its members, appended to t. */
int ds__scan_tar(const struct ds__scan_opts *o, const char *path, struct ds__tree *t);
/* Entry index of path in a sorted tree, or -1. */
int64_t ds__tree_find(const struct ds__tree *t, const char *path);
/* ds__scan in pieces, for a walk shared by the ranks of a stage
 * (inplace.c, ds_tree_manifest): the entries of directory dir ("" for SRC)
 * without descending, the paths of its subdirectories appended to subdirs
 * (NUL-terminated each); or all of what is below dir, recursively.  dir is
 * opened below SRC without following a symlink.  Unsorted; trees appended
 * (names rebased); then, on the merged tree, what every walk ends with
 * (empty refused, sort, --replicate, bounds). */
int ds__scan_list_dir(const struct ds__scan_opts *o, const char *dir, struct ds__tree *t,
                      struct ds_buf *subdirs);
int ds__scan_walk_dir(const struct ds__scan_opts *o, const char *dir, struct ds__tree *t);
void ds__tree_merge(struct ds__tree *dst, const struct ds__tree *src);
/* Open path (relative, no "..": a manifest's or the scan's) below dirfd
 * with flags | O_RDONLY, following no symlink anywhere on it. */
int ds__open_beneath(int dirfd, const char *path, int flags, int *fd);
int ds__scan_finish(const struct ds__scan_opts *o, struct ds__tree *t);
/* --expand-tar under MPI (inplace.c): every rank's list of tars (mine:
 * NUL-terminated paths) to every rank, then the tars k with k % size ==
 * rank listed into t.  Collective; o->srcfd open on every rank. */
int ds__scan_tars(MPI_Comm world, const struct ds__scan_opts *o, const struct ds_buf *mine,
                  struct ds__tree *t);
/* Every rank's tree merged into rank 0's (unsorted), released on the
 * others.  Collective. */
int ds__tree_gather(MPI_Comm world, struct ds__tree *t);

/* ---- an s3:// source (s3src.c) ------------------------------------------ */
/* The listing of s3://bucket/prefix as the scanned tree (regular files keep
 * their ETag in the target field). */
int ds__scan_s3(const struct ds__scan_opts *o, struct ds_s3 *s3, const char *bucket,
                const char *prefix, struct ds__tree *t);

/* A pack in a bucket (s3pack.c): its manifest, and one of its files copied
 * whole into an unlinked temporary file (cat, verify). */
int ds__s3_manifest_read(const char *packdir, struct ds_manifest *m);
/* ds_manifest_read for a directory or an s3:// pack (ls, cat, verify). */
int ds__manifest_any(const char *packdir, struct ds_manifest *m);
int ds__s3_fetch_tmp(const char *packdir, const char *name, int *fd);

/* A pack written to a bucket (s3out.c).  _check (rank 0, before anything
 * is written): PREFIX empty, or holding a pack and force (its index.h5 then
 * deleted).  _put: upload DIR/NAME as PREFIX/NAME, remove DIR/NAME.
 * _remove_parts: delete part-NNNNN.h5 for NNNNN in [from, to) and any
 * listed beyond `to`. */
int ds__s3out_check(struct ds_s3 *s3, const char *bucket, const char *prefix, const char *out,
                    int force);
int ds__s3out_put(struct ds_s3 *s3, const char *bucket, const char *prefix, const char *dir,
                  int rank,
                  const char *name);
void ds__s3out_remove_parts(struct ds_s3 *s3, const char *bucket, const char *prefix,
                            uint32_t from, uint32_t to);

/* A partition of the plan: files[first .. first+nfiles) of plan.files. */
struct ds__ppart {
	uint64_t first;
	uint64_t raw;        /* sum of the files' sizes */
	uint32_t nfiles;
	uint8_t replicated;
};

/* What every rank needs to write its partitions, and rank 0 the index. */
struct ds__plan {
	struct ds__tree tree;
	uint32_t *files;     /* entry ids of the regular files, partition by partition,
	                        each partition in path order */
	uint64_t nfiles;
	struct ds__ppart *parts;
	uint32_t nparts;
	uint32_t codec;      /* enum ds_codec */
	uint32_t level;      /* zlib level */
	uint64_t pack_id;
};

/* Partition the scanned tree in pl->tree: `nparts` partitions (when not 0)
 * or about `part_size` bytes each.  Sets files, parts, pack_id. */
int ds__plan_make(struct ds__plan *pl, uint32_t nparts, uint64_t part_size);
/* Serialise a plan into a byte buffer / rebuild it from one (for MPI_Bcast). */
void ds__plan_encode(const struct ds__plan *pl, struct ds_buf *out);
int ds__plan_decode(struct ds__plan *pl, const void *buf, size_t len);
void ds__plan_release(struct ds__plan *pl);

/* What packing file slot i of the plan produced. */
struct ds__result {
	uint64_t offset, stored;
	uint32_t crc;
	uint8_t codec;
};

/* Progress of this process, shared by the writer and the command. */
struct ds__progress {
	double interval, next, start;
	uint64_t files, bytes;          /* done */
	uint64_t total_files, total_bytes; /* this rank's share */
	const char *label;              /* "" or "rank 0's share: " */
};
void ds__progress_tick(struct ds__progress *pr);
/* SIGINT/SIGTERM (ds_stop_signal, common/stop.c): the scan stops at the
 * next directory, the writer after the chunk it is on, the S3 client at
 * once. */

struct ds__write_opts {
	int srcfd;             /* -1 when the source is s3:// */
	struct ds_s3 *s3;      /* s3:// source: the client, bucket and prefix */
	const char *s3_bucket, *s3_prefix;
	const char *dir;       /* where part files go (the temporary directory) */
	const char *src, *out; /* SRC and OUT as given, for messages */
	int fsync;
	const char *root;      /* pack --in-place: SRC's absolute path (index.h5
	                          gets the sources table; no part files) */
};

/* Write part-NNNNN.h5 of partition `part` into o->dir, filling res[] for
 * its file slots.  Logs and returns a negative code on failure (the caller
 * removes the directory). */
int ds__write_part(const struct ds__plan *pl, uint32_t part, const struct ds__write_opts *o,
                   struct ds__result *res, struct ds__progress *pr);
/* The objects of partition `part`, in plan order, many GETs in flight:
 * each _next call gives the next file's bytes (valid until the next call). */
struct ds__s3fetch *ds__s3fetch_new(struct ds_s3 *s3, const char *bucket, const char *prefix,
                                    const struct ds__plan *pl, uint32_t part);
int ds__s3fetch_next(struct ds__s3fetch *f, const char **buf, size_t *len);
void ds__s3fetch_free(struct ds__s3fetch *f);

/* pack --in-place: read partition `part`'s files where they lie (one open
 * each, checked as scanned), take their CRC-32C, fill res[] with their
 * offsets in the virtual payload (path order, back to back). */
int ds__inplace_part(const struct ds__plan *pl, uint32_t part, const struct ds__write_opts *o,
                     struct ds__result *res, struct ds__progress *pr);
/* The manifest of an in-place plan without reading a byte (a plain tree
 * staged as it is: m->nocrc set, every crc 0), root copied. */
void ds__manifest_from_plan(const struct ds__plan *pl, const char *root, struct ds_manifest *m);

/* Write index.h5 into o->dir from the plan and every file's result. */
int ds__write_index(const struct ds__plan *pl, const struct ds__result *res,
                    const struct ds__write_opts *o);

#endif
