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
	uint64_t *store_size; /* [nnodes]: size of each node's store file */
};

/* Size-balanced, deterministic: replicated partitions go to every node; the
 * others, largest first (ties: lower number), each to the r least-loaded
 * distinct nodes (ties: lower node).  A node's store holds its partitions in
 * increasing partition order, each at a DS_STORE_ALIGN-aligned base.
 * r is capped at nnodes (the caller warns).  Returns 0 or -EINVAL/-ENOMEM. */
int ds_place(struct ds_placement *pl, uint32_t nparts, const uint64_t *sizes,
             const uint8_t *replicated, uint32_t nnodes, uint32_t r);
void ds_placement_release(struct ds_placement *pl);
/* Is part held by node; sets *base when it is. */
int ds_placement_has(const struct ds_placement *pl, uint32_t part, uint32_t node, uint64_t *base);

#endif
