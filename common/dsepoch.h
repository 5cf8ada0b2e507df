/* dsepoch.h: the epoch shuffle as a pure function, and the epoch cache.
 * Shared by the node service (shuffle/) and the shim (io/).  libc only.
 * DESIGN.md section 4 is the contract.
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

struct ds_cache_set *ds_cache_set_new(const char *nodedir);
void ds_cache_set_free(struct ds_cache_set *cs);
/* Look up entry id in the caches of the epochs the service currently keeps.
 * Returns 1 and sets *data and *len (the STORED bytes) and *ref (release with
 * ds_cache_put when done with data); 0 when the id is not cached; -EAGAIN
 * when it is in a cache but its fetch has not completed yet. */
int ds_cache_find(struct ds_cache_set *cs, uint32_t id, const void **data, uint64_t *len,
                  struct ds_cache_ref **ref);
void ds_cache_put(struct ds_cache_ref *ref);
/* After fork, in the child: make the set consistent (darshan-style). */
void ds_cache_set_atfork_child(struct ds_cache_set *cs);

#endif
