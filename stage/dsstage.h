/* SPDX-License-Identifier: BSD-3-Clause */
/* dsstage.h: the stage-in job step and the node-store commands (env,
 * status, clean, epoch).  MPI side; node identity, the failure agreement
 * and the step lock are the MPI layer's (mpi/dsmpi.h). */
#ifndef DSSTAGE_H
#define DSSTAGE_H

#include "dsmem.h"
#include "dsmpi.h"

#include <stdint.h>

/* Options of the stage step. */
struct ds_stage_opts {
	const char *pack;   /* OUT, the pack directory */
	const char *to;     /* DIR, node-local */
	const char *job;    /* job id, NULL: $SLURM_JOB_ID or "0" */
	const char *spill;  /* --spill DIR: the spill tier (absolute), NULL: none */
	uint32_t replicas;  /* -R */
	int node_per_rank, inflate, force, quiet, help;
	double progress;    /* seconds between progress lines, 0: none */
	struct ds_headroom headroom; /* --ram-headroom (when headroom_set) */
	int headroom_set;
	char **replicate;   /* --replicate PATH (a plain tree): to every node */
	size_t nreplicate;
	int expand_tar; /* --expand-tar (a plain tree): *.tar as directories */
};
/* Defaults of the stage options. */
void ds_stage_defaults(struct ds_stage_opts *o);
/* Handle one getopt code of stage's options (mpi/stepopt.c's table: R i f
 * P H Z, and t j n q h).  The one place their values are checked, for stage and
 * run alike.  Returns c, or 0 when c is not one; sets *bad on an invalid
 * value (said: "-R '70000': not a replica count (1..65535)"). */
int ds_stage_opt(struct ds_stage_opts *o, int c, const char *arg, int *bad);
/* After the options: a pack and --to given, an s3:// pack well formed.
 * 0, or 2 (usage) with the reason said. */
int ds_stage_check_opts(const struct ds_stage_opts *o);

/* The stage-in step on every rank of world (collective): returns 0 when the
 * store of every node is complete, 1 after every rank agreed on a failure
 * (the partial stores removed).  `dstage run` calls it before serving. */
int ds_stage_step(MPI_Comm world, const struct ds_stage_opts *o, struct ds_node *nd);

int ds_cmd_stage(int argc, char **argv);
int ds_cmd_env(int argc, char **argv);
int ds_cmd_status(int argc, char **argv);
int ds_cmd_clean(int argc, char **argv);
/* cmd_epoch.c: `dstage epoch` (lists, node sets, resume; no MPI). */
int ds_cmd_epoch(int argc, char **argv);

#endif
