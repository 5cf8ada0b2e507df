/* dsstage.h: the stage-in job step, node identity and the node-store
 * commands (env, status, clean).  MPI side. */
#ifndef DSSTAGE_H
#define DSSTAGE_H

#include <mpi.h>
#include <stdint.h>

/* Who is this rank's node.  docs/design.md section 3: SLURM_NODEID under Slurm,
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

/* One owner per job directory (docs/design.md section 6): take JOBDIR's lock for this step
 * (what: "stage", "serve", "run"), one rank per host and DIR taking it for
 * the others; create: make DIR and JOBDIR first.  Collective over world.
 * Returns 0, or 1 after every rank agreed on a refusal (named by the rank
 * that met it: the holder's pid, command and host).  *held is 1 on the
 * ranks that hold it, for ds_step_unlock.  Takes nest within a process. */
int ds_step_lock(MPI_Comm world, const char *to, const char *job, const char *what, int create,
                 int *held);
void ds_step_unlock(const char *to, const char *job, int held);
/* The message for a lock that could not be taken (rc from ds_joblock_take). */
void ds__lock_refusal(const char *jobdir, const char *to, const char *who, int rc);

int ds_cmd_stage(int argc, char **argv);
int ds_cmd_env(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_clean(int argc, char **argv);
/* epochcmd.c: `dstage epoch` (lists, node sets, resume; no MPI). */
int ds_cmd_epoch(int argc, char **argv);

#endif
