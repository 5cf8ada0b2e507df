/* SPDX-License-Identifier: BSD-3-Clause */
/* dsplace.h: placement of partitions on nodes, a pure function of the pack
 * (partition sizes, replicated flags), the node count and the replication
 * factor.  Every rank and the shim can recompute it; stage records it in the
 * node index (ds_part/ds_loc).  libc only. */
#ifndef DSPLACE_H
#define DSPLACE_H

#include <stdint.h>

struct ds_placement {
	uint32_t nparts, nnodes, r; /* r: replication factor actually used */
	uint32_t *first;      /* [nparts + 1]: part p at locations [first[p], first[p+1]) */
	uint32_t *node;       /* [location]: the node holding it, increasing per part */
	uint64_t *base;       /* [location]: offset of the payload in that node's store */
	uint64_t *store_size; /* [nnodes]: size of each node's store (both tiers) */
	/* after ds_place_tiers, else NULL (everything in RAM): */
	uint8_t *tier;        /* [location]: enum ds_tier (dsindex.h) */
	uint64_t *ram_size;   /* [nnodes]: store bytes in the RAM tier */
};

/* Size-balanced, deterministic: replicated partitions go to every node; the
 * others, largest first (ties: lower number), each to the r least-loaded
 * distinct nodes (ties: lower node).  A node's store holds its partitions in
 * increasing partition order, each at a DS_STORE_ALIGN-aligned base.
 * r is capped at nnodes (the caller warns).  Returns 0 or -EINVAL/-ENOMEM. */
int ds_place(struct ds_placement *pl, uint32_t nparts, const uint64_t *sizes,
             const uint8_t *replicated, uint32_t nnodes, uint32_t r);
void ds_placement_release(struct ds_placement *pl);
/* The spill tier (stage --spill, docs/guide.md "The spill tier"): node k
 * keeps in RAM what fits in room[k] bytes, whole partitions, taken in this
 * order: the replicated ones (the validation set and small shared files
 * every node reads), then the node's training partitions, both in
 * increasing partition number; a partition that does not fit in what is
 * left goes to the spill tier, and a later, smaller one may still fit.  A
 * node that spills keeps its RAM partitions from base 0 (increasing
 * partition order), then its spilled ones from ram_size (the RAM bytes
 * rounded up to DS_SPILL_ALIGN).  A node whose whole store fits keeps
 * ds_place's layout.  Pure: every rank computes the same from the same
 * rooms.  0 or -ENOMEM. */
int ds_place_tiers(struct ds_placement *pl, const uint64_t *sizes, const uint8_t *replicated,
                   const uint64_t *room);
/* Is part held by node; sets *base when it is. */
int ds_placement_has(const struct ds_placement *pl, uint32_t part, uint32_t node, uint64_t *base);

#endif
