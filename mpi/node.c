/* SPDX-License-Identifier: BSD-3-Clause */
/* node.c: node identity of a rank (dsmpi.h). */
#include "dscommon.h"
#include "dsmpi.h"

#include <stdio.h>
#include <string.h>

int ds_node_identify(MPI_Comm world, int node_per_rank, struct ds_node *n)
{
	int rank, size, rc = 0;
	memset(n, 0, sizeof(*n));
	MPI_Comm_rank(world, &rank);
	MPI_Comm_size(world, &size);
	const char *slurm = getenv("SLURM_NODEID");
	int node = -1;

	if (node_per_rank) {
		node = rank;
	} else if (slurm && *slurm) {
		uint64_t v;
		if (ds_parse_u64(slurm, &v) || v > INT32_MAX) {
			ds_error("SLURM_NODEID '%s': not a node number", slurm);
			rc = -EINVAL;
		} else {
			node = (int)v;
		}
	}
	if (ds_any_failed(world, rc))
		return -EINVAL;

	if (node >= 0) {
		MPI_Comm_split(world, node, rank, &n->local);
	} else {
		/* ranks that share memory are one node; number nodes by the world
		 * rank of their first rank */
		MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &n->local);
	}
	MPI_Comm_rank(n->local, &n->local_rank);
	MPI_Comm_size(n->local, &n->local_size);
	MPI_Comm_split(world, n->local_rank == 0 ? 0 : MPI_UNDEFINED, node >= 0 ? node : rank,
	               &n->leaders);
	int nnodes = 0, me = 0;
	if (n->leaders != MPI_COMM_NULL) {
		MPI_Comm_size(n->leaders, &nnodes);
		MPI_Comm_rank(n->leaders, &me);
	}
	MPI_Bcast(&nnodes, 1, MPI_INT, 0, n->local);
	MPI_Bcast(&me, 1, MPI_INT, 0, n->local);
	if (node >= 0 && n->leaders != MPI_COMM_NULL && node != me)
		rc = -EINVAL; /* SLURM_NODEID not contiguous from 0 */
	if (ds_any_failed(world, rc)) {
		if (rc)
			ds_error("node ids are not 0..%d (SLURM_NODEID %d): run one step on all nodes of the job",
			         nnodes - 1, node);
		ds_node_release(n);
		return -EINVAL;
	}
	n->node = me;
	n->nnodes = nnodes;
	return 0;
}

void ds_node_release(struct ds_node *n)
{
	if (n->local != MPI_COMM_NULL && n->local)
		MPI_Comm_free(&n->local);
	if (n->leaders != MPI_COMM_NULL && n->leaders)
		MPI_Comm_free(&n->leaders);
	n->local = n->leaders = MPI_COMM_NULL;
}
