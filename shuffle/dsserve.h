/* SPDX-License-Identifier: BSD-3-Clause */
/* dsserve.h: the node service (remote reads, the epoch shuffle over MPI
 * RMA, failover; it hosts the write-once outputs of outputs/dsoutputs.h)
 * and its commands (serve, stop).  MPI side; node identity, the failure
 * agreement and the step lock are the MPI layer's (mpi/dsmpi.h).  The
 * service's inside is shuffle/svc.h, private to shuffle/. */
#ifndef DSSERVE_H
#define DSSERVE_H

#include "dsepoch.h"
#include "dsmem.h"
#include "dsoutputs.h"

#include <mpi.h>
#include <stdint.h>

/* Options of the serve step (`dstage serve`, and the serve half of
 * `dstage run`). */
struct ds_serve_opts {
	const char *to, *job;     /* --to DIR (node-local), --job ID (NULL: $SLURM_JOB_ID or "0") */
	struct ds_epoch_cfg cfg;  /* --seed, --locality, --drop-last */
	uint64_t shuffle_buffer;  /* 0: two epochs' remote share, whatever it is */
	int node_per_rank, clean, help;
	int quiet;                /* 1 -q, -1 -v, 0 neither */
	double agree_timeout;     /* s without an answer from the peers => failure */
	double watchdog;          /* s one MPI call may take */
	const char *nodes;        /* --nodes LIST: the staged nodes this step serves (failover.c) */
	int failover;             /* --failover: readers wait for a restarted service */
	int no_rerep;             /* --no-rereplicate: no copies after a loss */
	struct ds_out_opts out;   /* write-once outputs (outputs/dsoutputs.h, docs/outputs.md) */
	struct ds_headroom headroom; /* --ram-headroom (when headroom_set): the epoch cache's
	                              * RAM budget, common/dsmem.h */
	int headroom_set;
};
/* Defaults of the serve options: every field 0 or NULL but --timeout 20 s
 * (agree_timeout and watchdog), --drain-rate 1 GiB/s, --drain-timeout 600 s. */
void ds_serve_defaults(struct ds_serve_opts *o);
/* Handle one getopt code of serve's options (mpi/stepopt.c's table: s L d
 * B T c N F x, the outputs' O W D Y X K, and the shared t j n H q v h).  The
 * one place their values are checked, for serve and run alike.  Returns c,
 * or 0 when c is not one; sets *bad on an invalid value (said: "--locality
 * '2': not a number from 0 to 1"). */
int ds_serve_opt(struct ds_serve_opts *o, int c, const char *arg, int *bad);
/* After the options: the outputs' options fit together (--drain-to,
 * --outputs-to and --outputs-replicas need --outputs, which is one plain
 * name and needs --drain-to).  0, or 2 (usage) with the reason said.  --to
 * is the caller's to require (serve and run say it differently). */
int ds_serve_check_opts(const struct ds_serve_opts *o);

/* Before MPI_Init: environment the service's MPI wants (UCX tuning; a value
 * the user set wins). */
void ds_serve_env(void);
/* The service on every rank of world (collective; one rank per node, MPI
 * initialised with at least MPI_THREAD_FUNNELED): opens the node store of
 * o->to and serves until `dstage stop`, SIGTERM or a failure.  Returns 0
 * after a stop, 1 after a failure (every rank agreed, the reason said).  A
 * watchdog ends the process when one MPI call takes longer than
 * o->watchdog; it keeps watching until ds_serve_finalize.  `dstage run`
 * calls it after ds_stage_step, under the same step lock. */
int ds_serve_step(MPI_Comm world, const struct ds_serve_opts *o);
/* MPI_Finalize under the service's watchdog (a peer that vanished cannot
 * hang it), then the watchdog disarmed.  After ds_serve_step, or in its
 * place when the step never started. */
void ds_serve_finalize(void);

int ds_cmd_serve(int argc, char **argv);
int ds_cmd_stop(int argc, char **argv);

#endif
