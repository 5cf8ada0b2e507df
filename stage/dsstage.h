/* dsstage.h: the stage-in job step, node identity and the node-store
 * commands (env, status, clean).  MPI side. */
#ifndef DSSTAGE_H
#define DSSTAGE_H

#include <mpi.h>
#include <stdint.h>

/* Who is this rank's node.  DESIGN.md section 3: SLURM_NODEID under Slurm,
 * else ranks sharing a host are one node; node_per_rank makes every rank its
 * own node.  Collective over world. */
struct ds_node {
	uint32_t node;      /* this rank's node, 0..nnodes-1 */
	uint32_t nnodes;
	MPI_Comm local;     /* the ranks of this node */
	int local_rank, local_size;
	MPI_Comm leaders;   /* one rank per node (local_rank 0), rank == node;
	                       MPI_COMM_NULL on the other ranks */
};
/* Returns 0, or a negative code with the reason logged (on every rank). */
int ds_node_identify(MPI_Comm world, int node_per_rank, struct ds_node *n);
void ds_node_release(struct ds_node *n);

/* Every rank learns whether any rank failed (MPI_LOR of err != 0), so all
 * ranks leave together.  Returns nonzero when some rank failed. */
int ds_any_failed(MPI_Comm comm, int err);

/* Options of the stage step. */
struct ds_stage_opts {
	const char *pack;   /* OUT, the pack directory */
	const char *to;     /* DIR, node-local */
	const char *job;    /* job id, NULL: $SLURM_JOB_ID or "0" */
	uint32_t replicas;  /* -R */
	int node_per_rank, inflate, force, quiet, help;
	double progress;    /* seconds between progress lines, 0: none */
};

/* The stage-in step on every rank of world (collective): returns 0 when the
 * store of every node is complete, 1 after every rank agreed on a failure
 * (the partial stores removed).  `dstage run` calls it before serving. */
int ds_stage_step(MPI_Comm world, const struct ds_stage_opts *o, struct ds_node *nd);

int ds_cmd_stage(int argc, char **argv);
int ds_cmd_env(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_clean(int argc, char **argv);

#endif
