/* SPDX-License-Identifier: BSD-3-Clause */
/* dsepoch.h: the epoch shuffle as a pure function, and the epoch cache.
 * Shared by the node service (shuffle/) and the shim (io/).  libc only.
 * docs/design.md section 4 is the contract.
 *
 * Every node, every reader and the service compute the same assignment from
 * (index, cfg, epoch) with no communication. */
#ifndef DSEPOCH_H
#define DSEPOCH_H

#include "dsindex.h"

#include <stddef.h>
#include <stdint.h>

struct ds_epoch_cfg {
	uint64_t seed;
	double locality;  /* 0 = global shuffle (default) .. 1 = never move data */
	int drop_last;    /* 0: pad shares to equal size by repetition; 1: drop the remainder */
};

/* JOBDIR/epoch.conf, written by `dstage serve` at start (text, key=value);
 * absent => defaults {0, 0.0, 0}.  Returns 0 or -errno/-DS_ECORRUPT. */
int ds_epoch_cfg_load(const char *jobdir, struct ds_epoch_cfg *cfg);
int ds_epoch_cfg_save(const char *jobdir, const struct ds_epoch_cfg *cfg);

/* The training samples (ix->samples) node `node` reads in epoch `epoch`, in
 * read order, as entry ids in a malloc'd array.  Over all nodes the shares
 * form one permutation of the samples (plus padding repeats / minus dropped
 * remainder); shares are equal.  Returns 0 or -errno. */
int ds_epoch_share(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, uint64_t epoch,
                   uint32_t node, uint32_t **ids, size_t *n);
/* Equal share of every node: ceil(N/K) with padding, floor(N/K) with
 * drop_last (0 when nnodes is 0). */
size_t ds_epoch_share_size(uint32_t nsamples, uint32_t nnodes, int drop_last);
/* Locality: with cfg->locality = L > 0 a node keeps round(L * share) of the
 * samples it OWNS, i.e. whose partition's first location (primary copy) is
 * this node; when its quota is full, a sample may stay on another node that
 * holds a replica.  The rest is dealt at random.  L = 1 moves nothing when
 * the placement allows it, else only the unavoidable excess (common/epoch.c
 * explains the algorithm). */

/* Local reader l of nreaders on a node: its part of the node's share, in
 * read order (same rule as torch DistributedSampler: ids[l], ids[l+n], ...,
 * padded/dropped like the share).  *out malloc'd. */
int ds_epoch_reader_slice(const uint32_t *share, size_t n, uint32_t l, uint32_t nreaders,
                          int drop_last, uint32_t **out, size_t *nout);

/* ---- the epoch cache (written by the service, mapped by readers) ---------
 * NODEDIR/epochs/: one file per epoch holding the samples of this node's
 * share that are not in its store, each marked ready once its bytes landed.
 * A set is per process and thread-safe. */
struct ds_cache_set;
struct ds_cache_ref; /* keeps one epoch's mapping alive while held */

/* A set lives as long as its process (the tests free it: cache_test.h). */
struct ds_cache_set *ds_cache_set_new(const char *nodedir);
/* Look up entry id in the caches of the epochs the service currently keeps.
 * Returns 1 and sets *data and *len (the STORED bytes) and *ref (release with
 * ds_cache_put when done with data), and *checked = 1 when the entry is
 * VERIFIED (the service has checked its CRC: the caller need not), 0 when
 * only READY; 0 when the id is not cached; -EAGAIN when it is in a cache
 * but its fetch has not completed yet. */
int ds_cache_find_checked(struct ds_cache_set *cs, uint32_t id, const void **data, uint64_t *len,
                          struct ds_cache_ref **ref, int *checked);
void ds_cache_put(struct ds_cache_ref *ref);
/* fn(fd, 1) right after the set opens an epoch file it keeps open (its read
 * lock lives as long as the descriptor): returns the descriptor to keep
 * (the shim moves it to a high number and marks it private: the program
 * neither sees nor closes it); fn(fd, 0) before the set closes it. */
void ds_cache_set_fd_hook(int (*fn)(int fd, int on));
/* After fork, in the child: make the set consistent (darshan-style). */
void ds_cache_set_atfork_child(struct ds_cache_set *cs);

/* ---- the epoch cache, writer side (the node service only) ----------------
 * Files (all in NODEDIR/epochs/, mode 0600 in a 0700 directory):
 *   ctl   struct ds_cache_ctl: which epoch files are live, under a seqlock
 *   <e>   struct ds_cache_hdr, ds_cache_ent[n] sorted by id, then the data
 * An entry's bytes are written first (memcpy or MPI_Get + flush), then its
 * state is set to READY with a release store; readers load it with acquire,
 * so a READY entry's bytes are always complete.  Retiring an epoch removes
 * it from ctl and unlinks its file (or keeps it as the spare: see
 * ds_cache_epoch_free): readers that still hold a ref keep a valid mapping
 * until ds_cache_put, and a mapped file never changes under a reader. */
#define DS_CACHE_MAGIC "DSCACHE1"
#define DS_CACHE_CTL_MAGIC 0x314c544348434344ull /* "DCCHCTL1" */
#define DS_CACHE_VERSION 2u /* 2: readers hold an OFD read lock while they map */
#define DS_CACHE_MAX_LIVE 4
#define DS_CACHE_ALIGN                                                                             \
	64u /* every entry's data starts on a cache line, but
                              within a run fetched as one (ds_cache_epoch_new_runs) */

/* READY: the bytes are complete, a reader checks their CRC itself;
 * VERIFIED: complete, and the service has checked them against the index's
 * CRC-32C since (uncompressed entries only), so a reader need not. */
enum ds_cache_state {
	DS_CACHE_PENDING = 0,
	DS_CACHE_READY = 1,
	DS_CACHE_FAILED = 2,
	DS_CACHE_VERIFIED = 3
};

struct ds_cache_hdr {
	char magic[8];        /* DS_CACHE_MAGIC */
	uint32_t version;     /* DS_CACHE_VERSION */
	uint32_t hdr_size;    /* sizeof(struct ds_cache_hdr) */
	uint64_t epoch;
	uint64_t gen;         /* equals the ctl slot that publishes it */
	uint64_t nentries;
	uint64_t off_entries; /* struct ds_cache_ent[nentries], sorted by id */
	uint64_t off_data;
	uint64_t data_size;
	uint64_t total_size;  /* size of the file */
};

struct ds_cache_ent {
	uint32_t id;    /* entry id in the index */
	uint32_t state; /* enum ds_cache_state; release/acquire */
	uint64_t off;   /* from hdr.off_data */
	uint64_t len;   /* stored bytes */
};

struct ds_cache_ctl {
	uint64_t magic;   /* DS_CACHE_CTL_MAGIC */
	uint64_t version;
	uint64_t seq;     /* seqlock: odd while the service updates live[] */
	uint64_t closed;  /* 1 once the service has left: readers drop the set */
	uint64_t nlive;
	struct {
		uint64_t epoch, gen;
	} live[DS_CACHE_MAX_LIVE];
};

struct ds_cache_svc;   /* the node's cache directory and ctl */
struct ds_cache_epoch; /* one epoch's cache being filled */

/* Create (or take over) NODEDIR/epochs/: stale epoch files of an earlier
 * service are removed, a fresh ctl is published.  0 or -errno. */
int ds_cache_svc_new(const char *nodedir, struct ds_cache_svc **out);
/* Retire every epoch, mark ctl closed, remove NODEDIR/epochs. */
void ds_cache_svc_free(struct ds_cache_svc *svc);
/* A cache file for `epoch` holding ids[i] with stored length lens[i], in
 * fetch order; repeated ids are stored once.  Not visible until published.
 * 0 or -errno (-ENOSPC when the file system cannot hold it). */
int ds_cache_epoch_new(struct ds_cache_svc *svc, uint64_t epoch, const uint32_t *ids,
                       const uint64_t *lens, size_t n, struct ds_cache_epoch **out);
/* The same, where joined[i] != 0 says that ids[i]'s bytes follow ids[i-1]'s
 * directly where they are fetched from: its data is laid right after
 * ids[i-1]'s (not on the next DS_CACHE_ALIGN boundary), so that one get
 * fills a run of such entries (shuffle/exchange.c).  joined NULL: every
 * entry aligned, as ds_cache_epoch_new. */
int ds_cache_epoch_new_runs(struct ds_cache_svc *svc, uint64_t epoch, const uint32_t *ids,
                            const uint64_t *lens, const uint8_t *joined, size_t n,
                            struct ds_cache_epoch **out);
/* Distinct entries, in fetch order. */
size_t ds_cache_epoch_count(const struct ds_cache_epoch *ep);
/* Where the i-th distinct entry's bytes go (writable), its id and length. */
void *ds_cache_epoch_slot(struct ds_cache_epoch *ep, size_t i, uint32_t *id, uint64_t *len);
/* Mark the i-th distinct entry READY (ok != 0) or FAILED, with release order. */
void ds_cache_epoch_mark(struct ds_cache_epoch *ep, size_t i, int ok);
/* The i-th distinct entry, READY, has been checked: VERIFIED (ok != 0) or
 * FAILED (a reader then fetches it again).  Release order.  An entry that is
 * not READY stays as it is. */
void ds_cache_epoch_checked(struct ds_cache_epoch *ep, size_t i, int ok);
/* The i-th distinct entry's state (acquire). */
uint32_t ds_cache_epoch_state(const struct ds_cache_epoch *ep, size_t i);
/* Make it visible to readers (adds it to ctl).  -ENOSPC when DS_CACHE_MAX_LIVE
 * epochs are live already. */
int ds_cache_epoch_publish(struct ds_cache_svc *svc, struct ds_cache_epoch *ep);
/* Remove from ctl, unlink, unmap, free.  With recycling (the default;
 * DSTAGE_CACHE_RECYCLE=0: off), the last freed epoch's file and populated
 * mapping are kept as a spare instead: the next ds_cache_epoch_new takes it
 * over, renamed and rewritten, when it is big enough and no reader maps it
 * (readers hold an OFD read lock on an epoch file for as long as they map
 * it; the service rewrites a spare only under a write lock).  That skips
 * the allocation and population of a fresh file. */
void ds_cache_epoch_free(struct ds_cache_svc *svc, struct ds_cache_epoch *ep);
/* The bytes of the spare file kept for the next epoch (0: none): memory the
 * next ds_cache_epoch_new reuses or releases before it takes any, which the
 * RAM budget of the prefetch counts as room (shuffle/exchange.c). */
uint64_t ds_cache_spare_bytes(struct ds_cache_svc *svc);
/* Upper bound of the bytes a cache of n entries of these lengths takes
 * (table + aligned data), for the --shuffle-buffer check. */
uint64_t ds_cache_epoch_need(const uint64_t *lens, size_t n);

#endif
