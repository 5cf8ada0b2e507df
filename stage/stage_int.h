/* SPDX-License-Identifier: BSD-3-Clause */
/* stage_int.h: stage/'s private face, shared by its .c files. */
#ifndef STAGE_INT_H
#define STAGE_INT_H

#include "dsstage.h"

struct ds_index;

/* Record which node this host is, for readers outside Slurm:
 * JOBDIR/by-host/<hostname> -> "<node>" (skipped when hosts repeat). */
void ds__stage_note_host(const char *jobdir, const struct ds_node *nd);

/* status.c: the figures of every node, from what the service gathered. */
int ds__status_service_up(const char *jobdir);
/* spill[k] (k < nspill): bytes node k keeps in its spill tier, from an
 * index of this host (ds__spill_bytes); the rest of its store is in RAM. */
int ds__status_print_all(const char *jobdir, long node, char **local, size_t nlocal,
                         int (*local_row)(const char *jobdir, const char *name),
                         unsigned long *nnodes, const uint64_t *spill, size_t nspill);
/* cmd_store.c: every node's spill-tier bytes as an index records them (the
 * tier of each location, dsindex.h): a malloc'd array of ix->h->nnodes. */
uint64_t *ds__spill_bytes(const struct ds_index *ix);

/* s3read.c: a partition's payload from a pack in a bucket, ranged GETs
 * several in flight, read in order in pieces of `chunk` bytes. */
struct ds_s3;
struct ds_manifest;
struct ds__s3src;
int ds__s3src_open(struct ds_s3 *s3, const char *bucket, const char *prefix, uint32_t part,
                   const struct ds_manifest *m, uint64_t chunk, struct ds__s3src **out,
                   uint64_t *meta_read);
uint64_t ds__s3src_len(const struct ds__s3src *r);
int ds__s3src_read(struct ds__s3src *r, uint64_t pos, void *buf, size_t n);
void ds__s3src_close(struct ds__s3src *r);

/* inplace.c: a virtual partition's payload (an in-place pack, a plain
 * tree) read from its files where they lie, in order: ents are the
 * partition's manifest entries in offset order; rootfd the source root
 * (ds_src_root_open).  _read takes the stream in order; _finish opens and
 * checks the files after the last byte (empty ones) and the last source
 * after its read; both return 0 or a negative code, the file named. */
struct ds__ipsrc;
int ds__ipsrc_open(int rootfd, const struct ds_manifest *m, const uint32_t *ents, uint32_t n,
                   struct ds__ipsrc **out);
int ds__ipsrc_read(struct ds__ipsrc *r, uint64_t pos, void *buf, size_t n);
int ds__ipsrc_finish(struct ds__ipsrc *r);
uint64_t ds__ipsrc_opens(const struct ds__ipsrc *r);
void ds__ipsrc_close(struct ds__ipsrc *r);
/* Is src a plain tree to stage as it is (1: a directory without
 * index.h5), a pack (0), or a pack that lost its manifest (-1, said:
 * part-NNNNN.h5 or a .tmp-PID of pack but no index.h5)? */
int ds__stage_plain_tree(const char *src);

#endif
