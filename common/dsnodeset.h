/* SPDX-License-Identifier: BSD-3-Clause */
/* dsnodeset.h: the set of nodes a job runs on after a node was lost, the
 * epoch shuffle over that set, and exact resume.  Shared by the node
 * service (shuffle/failover.c), the shim (io/epoch.c) and `dstage epoch`.
 * libc only.  docs/failover.md is the design.
 *
 * A job is staged on K nodes.  When nodes are lost, the service is
 * restarted on the survivors (`dstage serve --nodes LIST`), which serve the
 * stores that are still there.  From the next epoch on, the training samples
 * are dealt over the surviving set: a pure function of (seed, epoch, set),
 * so every node and every reader computes the same lists with no
 * communication.  The set in force for each epoch is recorded in
 * JOBDIR/nodes (the history, one line per change):
 *
 *     # node sets of this job (written by dstage serve)
 *     version=1
 *     staged=4
 *     failover=1
 *     from=0 nodes=0-3
 *     from=3 nodes=0-1,3
 *
 * Epoch e uses the set of the last line whose from <= e; no file (or no
 * line) means every staged node, and then every list is exactly the one
 * ds_epoch_share gives. */
#ifndef DSNODESET_H
#define DSNODESET_H

#include "dsepoch.h"
#include "dsindex.h"
#include "dsstore.h" /* DS_NODES_NAME */

#include <stddef.h>
#include <stdint.h>

#define DS_NODES_MAX_HIST 256

/* A set of node numbers, strictly increasing. */
struct ds_nodeset {
	uint32_t n;
	uint32_t *node;
};

/* "0-3,5,7-8" (ranges, any order, no duplicates, each < limit when limit
 * is not 0) into set (malloc'd).  0 or -EINVAL. */
int ds_nodeset_parse(const char *text, uint32_t limit, struct ds_nodeset *set);
/* The canonical text ("0-1,3") into buf.  0 or -ENAMETOOLONG. */
int ds_nodeset_format(const struct ds_nodeset *set, char *buf, size_t len);
/* 0..n-1. */
int ds_nodeset_all(uint32_t n, struct ds_nodeset *set);
int ds_nodeset_copy(const struct ds_nodeset *from, struct ds_nodeset *to);
void ds_nodeset_release(struct ds_nodeset *set);
/* Position of node in the set, or -1. */
int ds_nodeset_pos(const struct ds_nodeset *set, uint32_t node);
int ds_nodeset_equal(const struct ds_nodeset *a, const struct ds_nodeset *b);
/* Is it 0..nstaged-1? */
int ds_nodeset_is_all(const struct ds_nodeset *set, uint32_t nstaged);

/* JOBDIR/nodes. */
struct ds_nodes_hist {
	uint32_t nstaged;
	int failover; /* readers wait for a restarted service (within DSTAGE_TIMEOUT) */
	size_t n;
	struct ds_nodes_change {
		uint64_t from;
		struct ds_nodeset set;
	} *h;
};

/* Absent file: 0 with n == 0 (every staged node, no failover).  Else 0 or
 * -errno/-DS_ECORRUPT (increasing from, sets inside staged). */
int ds_nodes_load(const char *jobdir, struct ds_nodes_hist *h);
int ds_nodes_save(const char *jobdir, const struct ds_nodes_hist *h);
void ds_nodes_release(struct ds_nodes_hist *h);
/* Append "from epoch `from` on: set" (copied); a change equal to the last
 * one is not added; changes from `from` on are replaced. 0 or -ENOMEM. */
int ds_nodes_add(struct ds_nodes_hist *h, uint64_t from, const struct ds_nodeset *set);
/* The set epoch e is dealt over, or NULL for every staged node. */
const struct ds_nodeset *ds_nodes_for_epoch(const struct ds_nodes_hist *h, uint64_t e);

/* Node `node`'s share of epoch `epoch` dealt over `set` (NULL: every staged
 * node; then exactly ds_epoch_share).  The same permutation of the samples
 * as on the full set, stretched to S' x K' slots for the K' nodes of the
 * set; with locality, only holders in the set count (a sample whose every
 * holder is lost is dealt at random like the rest).  -ENOENT when node is
 * not in the set. */
int ds_epoch_share_set(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, uint64_t epoch,
                       const struct ds_nodeset *set, uint32_t node, uint32_t **ids, size_t *n);

/* ---- a node's share, published (NODEDIR/epochs/share.<e>) -----------------
 * The service computes every epoch's share ahead of its readers (to plan the
 * fetch); it writes it down so that a reader's list costs its own part, not
 * the permutation of every sample of the job (docs/design.md section 4).
 * The file names the inputs of the pure function: a reader takes it only
 * when they are its own (same pack, cfg, epoch, node and node set) and its
 * CRC holds, else it computes the share itself, as before. */
struct ds_share_key {
	uint64_t epoch, seed, locality_bits, pack_id;
	uint64_t set_sig; /* 0: every staged node; else a hash of the set */
	uint32_t node, drop_last;
};
void ds_share_key_make(struct ds_share_key *k, const struct ds_index *ix,
                       const struct ds_epoch_cfg *cfg, uint64_t epoch, const struct ds_nodeset *set,
                       uint32_t node);
/* Write it (atomically, 0600) into NODEDIR/epochs/.  0 or -errno. */
int ds_share_publish(const char *nodedir, const struct ds_share_key *k, const uint32_t *ids,
                     size_t n);
/* Map the share published for k: *ids, *n inside a mapping to give back to
 * ds_share_unmap(map, maplen).  0; -ENOENT when there is none; -ESTALE when
 * it is another key's; -DS_ECORRUPT when it is not whole.  The ids are the
 * publisher's: check each against the index before use. */
int ds_share_map(const char *nodedir, const struct ds_share_key *k, const uint32_t **ids, size_t *n,
                 void **map, size_t *maplen);
void ds_share_unmap(void *map, size_t maplen);
/* Remove NODEDIR/epochs/share.<e> (the service, retiring epoch e). */
void ds_share_unlink(const char *nodedir, uint64_t epoch);

/* ---- exact resume -------------------------------------------------------
 * A checkpoint taken at sample k of epoch e: every reader of every node of
 * the set `from` (nreaders readers per node, each through its list
 * <l>-of-<nreaders>) has consumed the first k samples of its list.  The
 * remaining samples of epoch e are the rest of those lists.
 *
 * Same set, same nreaders: resume reader l of node n at position k of its
 * own list (EpochSampler start=k): exactly what an uninterrupted run reads.
 *
 * Another set (or reader count): the remaining samples (every distinct one
 * once, padding repeats dropped, minus what was read) are dealt over the
 * new set's nodes in the order of the old lists (old node by old node,
 * position by position, which is random already), in equal shares up to
 * one: node at position p of K' takes the slots i with i % K' == p.  Then a
 * node's part is split among its local readers the same way (l of n: slots
 * j % n == l).  Every remaining sample is read exactly once, none twice. */
struct ds_resume {
	uint64_t epoch, k;
	uint32_t nreaders;         /* readers per node when the checkpoint was taken */
	struct ds_nodeset from;    /* the set epoch's lists were made for */
};
/* The remaining samples of the checkpoint for reader l of nreaders on node
 * `node` of set `to` (NULL: every staged node).  ids malloc'd. */
int ds_resume_list(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, const struct ds_resume *r,
                   const struct ds_nodeset *to, uint32_t node, uint32_t l, uint32_t nreaders,
                   uint32_t **ids, size_t *n);

#endif
