/* SPDX-License-Identifier: BSD-3-Clause */
/* dspack.h: the pack format (HDF5 partitions + manifest) and the commands
 * that write and read it: pack, verify, ls, cat.  The on-disk layout is
 * documented in docs/formats.md, "The pack".
 *
 * Readers treat every pack as untrusted: all functions here validate what
 * they read (bounds, names, counts) and return -DS_ECORRUPT / -DS_ENAME /
 * -DS_EFORMAT with a message, never read out of bounds. */
#ifndef DSPACK_H
#define DSPACK_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

struct ds_buf;

/* One entry of the manifest: a directory, a regular file or a symlink.
 * (Fields by size, 88 bytes: a stage rank keeps one per file it handles.) */
struct ds_mentry {
	char *path;        /* relative to the pack root, "" never appears */
	char *target;      /* symlink target (relative, stays in the tree), else NULL */
	/* In-place sources (m->root != NULL): where the content lies.  src is
	 * the source file's path relative to the root (== path for a plain
	 * file, the tar's path for a tar member), src_off where the content
	 * starts in it.  A pack that holds its bytes: src == path, src_off 0. */
	char *src;
	int64_t mtime_ns; /* source mtime, ns since the epoch */
	uint64_t size;    /* st_size of the source (dirs too) */
	uint64_t offset;  /* files: offset of the stored bytes in the partition payload */
	uint64_t stored;  /* files: stored byte count */
	uint64_t src_off;
	int64_t ctime_ns;  /* a plain tree staged as it is: st_ctime at the walk,
	                      checked at open (0: not known, e.g. read from a pack) */
	uint32_t mode;     /* st_mode with type bits (S_IFDIR/S_IFREG/S_IFLNK) */
	uint32_t part;     /* files: partition number; others UINT32_MAX */
	uint32_t crc;      /* files: CRC-32C of the content (uncompressed) */
	uint8_t codec;     /* files: enum ds_codec (dsindex.h) */
	uint8_t flags;     /* DS_EF_REPLICATED for entries under --replicate */
};

struct ds_mpart {
	uint64_t size;     /* payload bytes */
	uint32_t nfiles;
	uint8_t replicated;/* holds only --replicate files: staged to every node */
	uint64_t inflated; /* its files inflated (stored when raw): set when the
	                      manifest's parts_inflated is (ds_mstream_open) */
};

struct ds_manifest {
	size_t n;                /* entries, sorted by path */
	struct ds_mentry *e;
	uint32_t nparts;
	struct ds_mpart *parts;
	uint64_t total_size;     /* sum of file sizes */
	uint64_t total_stored;   /* sum of stored sizes */
	uint64_t pack_id;        /* identifies the pack: a hash of its plan (the
	                            same in index.h5 and every part-NNNNN.h5) */
	/* In place (`pack --in-place`, or a plain tree staged as it is): the
	 * partitions are virtual, their payload is their files' contents back
	 * to back in path order read from root/src at src_off (codec none);
	 * there are no part-NNNNN.h5.  NULL for a pack that holds its bytes. */
	char *root;              /* absolute path of the source tree (malloc'd) */
	uint8_t nocrc;           /* a plain tree at stage time: no CRC is known
	                            yet; the stage takes them as it reads */
	void *blocks;            /* streamed (ds_mstream_run): the blocks that
	                            hold the kept entries' paths */
	uint8_t parts_inflated;  /* parts[].inflated holds every partition's
	                            size inflated (DS_MSTREAM_INFLATED) */
};

/* Read and fully validate OUT/index.h5 (or an in-memory image of it, e.g.
 * after an MPI_Bcast: the caller keeps buf alive during the call only).
 * Returns 0 or a negative code; on failure a message naming the problem has
 * been logged with ds_error. */
int ds_manifest_read(const char *packdir, struct ds_manifest *m);
int ds_manifest_read_image(const void *buf, size_t len, const char *what, struct ds_manifest *m);
/* Frees e (one block that also holds every path and target) and parts. */
void ds_manifest_release(struct ds_manifest *m);

/* ---- the manifest streamed to every rank (manifest.c, issue 27) ---------
 * What the stage reads instead of the whole manifest on every rank: rank 0
 * reads index.h5's tables in chunks of rows (with the strings they name)
 * and broadcasts each; every rank checks every row as ds_manifest_read does
 * (names, order, parents, bounds, counts; rank 0 the seal's CRC over the
 * whole file, combined from the pieces it read) and keeps only the files of
 * the partitions it asks for; the others pass by (each(): a node leader
 * feeds its index builder).  A rank holds about a chunk plus its share, not
 * the manifest.  An in-place index.h5's sources table streams with the
 * rows (m->root set at open, each kept file's src).  The manifest is read
 * whole, as before, when the caller asks (DS_MSTREAM_WHOLE) or the seal's
 * tables overlap (a crafted file: the whole reader says what is wrong).
 *
 * Open (collective): rank 0 opens packdir/index.h5, or with s3 (rank 0's
 * client; NULL elsewhere) reads s3://bucket/prefix/index.h5 by ranged GETs
 * as the stream asks for its pieces; m gets the partitions table, pack_id
 * (in place: root) and nothing else, or the whole manifest (whole mode).
 * DS_MSTREAM_INFLATED (--inflate): rank 0 first sums each partition's
 * files inflated from the rows alone (m->parts[].inflated, checked again
 * by the run), or reads the manifest whole when a partition's rows are not
 * in payload order.  *nread (rank 0) grows by the bytes read.  0 or a
 * negative code, the same on every rank, said. */
struct ds_mstream;
struct ds_mstream_stats {
	uint64_t n, files, dirs; /* entries of the pack */
	uint64_t names;          /* bytes of every path and target, with a NUL each */
};
#define DS_MSTREAM_WHOLE 1u
#define DS_MSTREAM_INFLATED 2u
struct ds_s3;
int ds_mstream_open(MPI_Comm world, const char *packdir, struct ds_s3 *s3, const char *bucket,
                    const char *prefix, unsigned flags, struct ds_manifest *m,
                    struct ds_mstream **out, uint64_t *nread);
/* Is m the whole manifest (no ds_mstream_run needed)? */
int ds_mstream_whole(const struct ds_mstream *s);
/* Before run: an upper bound of the stats' names (the string pool and a NUL
 * per entry), and the entry count. */
void ds_mstream_bounds(const struct ds_mstream *s, uint64_t *n, uint64_t *names);
/* Stream every entry (collective): files of partitions p with keep_part[p]
 * are kept in m (sorted, m->n of them); each(ctx, e), when not NULL, sees
 * every entry in order (its strings live until it returns; nonzero stops
 * this rank's calls and is returned).  Totals and stats cover all entries.
 * 0 or a negative code, agreed by every rank. */
int ds_mstream_run(struct ds_mstream *s, const uint8_t *keep_part,
                   int (*each)(void *ctx, const struct ds_mentry *e), void *ctx,
                   struct ds_mstream_stats *st);
void ds_mstream_close(struct ds_mstream *s);

/* Path of partition `part` ("OUT/part-00003.h5"), malloc'd. */
char *ds_part_path(const char *packdir, uint32_t part);
/* Where partition part's payload lies inside its file: byte offset and
 * length of the contiguous payload dataset (what H5Dget_offset gave at pack
 * time, recorded in the file's CRC-protected seal), checked against the file
 * size, the pack_id and the manifest's partition size and file count.  Only
 * the seal's header is read (its own CRC), never the partition's tables:
 * the caller goes by the manifest and checks each file's CRC from it.
 * Stage then reads the bytes with plain pread; no HDF5 call parses the
 * file.  *meta_read grows by the bytes read.  Returns 0 or a negative code
 * (and logs why). */
int ds_part_locate(const char *packdir, uint32_t part, const struct ds_manifest *m,
                   uint64_t *offset, uint64_t *len, uint64_t *meta_read);

/* ---- in-place sources (inplace.c) --------------------------------------
 * Opening the files an in-place manifest refers to.  Every open goes
 * through the root's descriptor and never follows a symlink (openat2
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS where the kernel has it, else
 * O_NOFOLLOW on the last component and a check of every parent), opens
 * only a regular file, and checks it is still what the manifest says
 * (size and mtime of the entry named src: the file itself, or the
 * directory entry a tar became).  A file that changed or vanished is an
 * error naming it ("'ROOT/SRC': changed since it was scanned"). */
struct stat;
/* m->root as an O_DIRECTORY descriptor (logged when it fails). */
int ds_src_root_open(const struct ds_manifest *m, int *rootfd);
/* Open e->src below rootfd, checked as above; *st its fstat at open. */
int ds_src_open(int rootfd, const struct ds_manifest *m, const struct ds_mentry *e, int *fd,
                struct stat *st);
/* After reading: the file has the same size, mtime and ctime as at open. */
int ds_src_check_after(int fd, const struct ds_manifest *m, const char *src,
                       const struct stat *at_open);
/* Read one file's content from its source into fn in pieces (cat,
 * verify): CRC checked unless m->nocrc.  0, -DS_ECHECKSUM, -ESTALE... */
typedef int (*ds_src_sink_fn)(void *ctx, const void *buf, size_t len);
int ds_src_read_entry(int rootfd, const struct ds_manifest *m, const struct ds_mentry *e,
                      ds_src_sink_fn fn, void *ctx);

/* A plain tree SRC (a directory that is not a pack) as an in-place
 * manifest, for `dstage stage SRC`: collective over world.  Rank 0 lists
 * SRC's top level once; each rank walks the subtrees of its share of those
 * names (the checks of pack's scan: names, links out, special files);
 * rank 0 merges, sorts (the result does not depend on the number of
 * ranks), flags the --replicate subtrees and plans partitions (about
 * 1 GiB, at least 4 per node); every rank gets the same manifest, with
 * m->nocrc set.  With expand_tar (--expand-tar), every *.tar file is the
 * directory of its members, read from the tar where they lie (tar.h).
 * 0, or a negative code after every rank agreed (said). */
int ds_tree_manifest(MPI_Comm world, const char *src, char **replicate, size_t nreplicate,
                     int expand_tar, uint32_t nnodes, struct ds_manifest *m);

/* ---- packs in object storage (s3pack.c) --------------------------------- */
struct ds_s3;
/* "PREFIX/NAME" (or "NAME"), malloc'd: the key of a pack file. */
char *ds_s3_pack_key(const char *prefix, const char *name);
/* GET s3://bucket/prefix/index.h5 into img (for ds_manifest_read_image). */
int ds_s3_manifest_get(struct ds_s3 *s3, const char *bucket, const char *prefix,
                       struct ds_buf *img);
/* ds_part_locate for a pack in a bucket: the seal's header read with one
 * ranged GET (never the tables nor the payload), checked like a local
 * file's, and against the manifest.  *meta_read: bytes fetched for it. */
int ds_s3_part_locate(struct ds_s3 *s3, const char *bucket, const char *prefix, uint32_t part,
                      const struct ds_manifest *m, uint64_t *offset, uint64_t *len,
                      uint64_t *meta_read);

int ds_cmd_pack(int argc, char **argv);
int ds_cmd_verify(int argc, char **argv);
int ds_cmd_ls(int argc, char **argv);
int ds_cmd_cat(int argc, char **argv);

#endif
