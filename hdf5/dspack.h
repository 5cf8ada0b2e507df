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

#include <stddef.h>
#include <stdint.h>

struct ds_buf;

/* One entry of the manifest: a directory, a regular file or a symlink. */
struct ds_mentry {
	char *path;        /* relative to the pack root, "" never appears */
	char *target;      /* symlink target (relative, stays in the tree), else NULL */
	uint32_t mode;     /* st_mode with type bits (S_IFDIR/S_IFREG/S_IFLNK) */
	int64_t mtime_ns;  /* source mtime, ns since the epoch */
	uint64_t size;     /* st_size of the source (dirs too) */
	uint32_t part;     /* files: partition number; others UINT32_MAX */
	uint64_t offset;   /* files: offset of the stored bytes in the partition payload */
	uint64_t stored;   /* files: stored byte count */
	uint8_t codec;     /* files: enum ds_codec (dsindex.h) */
	uint8_t flags;     /* DS_EF_REPLICATED for entries under --replicate */
	uint32_t crc;      /* files: CRC-32C of the content (uncompressed) */
};

struct ds_mpart {
	uint64_t size;     /* payload bytes */
	uint32_t nfiles;
	uint8_t replicated;/* holds only --replicate files: staged to every node */
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
};

/* Read and fully validate OUT/index.h5 (or an in-memory image of it, e.g.
 * after an MPI_Bcast: the caller keeps buf alive during the call only).
 * Returns 0 or a negative code; on failure a message naming the problem has
 * been logged with ds_error. */
int ds_manifest_read(const char *packdir, struct ds_manifest *m);
int ds_manifest_read_image(const void *buf, size_t len, const char *what, struct ds_manifest *m);
/* Frees e (one block that also holds every path and target) and parts. */
void ds_manifest_release(struct ds_manifest *m);

/* Path of partition `part` ("OUT/part-00003.h5"), malloc'd. */
char *ds_part_path(const char *packdir, uint32_t part);
/* Where partition part's payload lies inside its file: byte offset and
 * length of the contiguous payload dataset (what H5Dget_offset gave at pack
 * time, recorded in the file's CRC-protected seal), checked against the file
 * size, the pack_id and the manifest's partition size.  Stage then reads the
 * bytes with plain pread; no HDF5 call parses the file.  Returns 0 or a
 * negative code (and logs why). */
int ds_part_locate(const char *packdir, uint32_t part, const struct ds_manifest *m,
                   uint64_t *offset, uint64_t *len);

/* ---- packs in object storage (s3pack.c) --------------------------------- */
struct ds_s3;
/* "PREFIX/NAME" (or "NAME"), malloc'd: the key of a pack file. */
char *ds_s3_pack_key(const char *prefix, const char *name);
/* GET s3://bucket/prefix/index.h5 into img (for ds_manifest_read_image). */
int ds_s3_manifest_get(struct ds_s3 *s3, const char *bucket, const char *prefix,
                       struct ds_buf *img);
/* ds_part_locate for a pack in a bucket: the seal read with ranged GETs
 * (header, tables: never the payload), checked like a local file's, and
 * against the manifest.  *meta_read: bytes fetched for it. */
int ds_s3_part_locate(struct ds_s3 *s3, const char *bucket, const char *prefix, uint32_t part,
                      const struct ds_manifest *m, uint64_t *offset, uint64_t *len,
                      uint64_t *meta_read);

int ds_cmd_pack(int argc, char **argv);
int ds_cmd_verify(int argc, char **argv);
int ds_cmd_ls(int argc, char **argv);
int ds_cmd_cat(int argc, char **argv);

#endif
