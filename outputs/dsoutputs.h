/* SPDX-License-Identifier: BSD-3-Clause */
/* dsoutputs.h: write-once outputs (checkpoints written under the mount,
 * kept on the nodes and drained to the shared file system: docs/outputs.md),
 * the face of outputs/.  Their options, the part the node service runs in
 * its step (start, poll, stop), and what the commands use: dstage drain,
 * and the outputs' part of dstage stop, status and clean.  MPI side.
 *
 * The service (shuffle/) hosts the outputs: it gives them its communicator,
 * its node and node set and its main loop's wake-up (struct ds_out_host),
 * and calls ds_out_poll from that loop; the outputs know nothing else of
 * it.  Their inside is outputs/outputs.h and outrepl.h, private to
 * outputs/. */
#ifndef DSOUTPUTS_H
#define DSOUTPUTS_H

#include "dsproto.h" /* struct ds_stats */

#include <mpi.h>
#include <stdint.h>

#define DS_OUT_MAX_REPL 8 /* --outputs-replicas: holders of an output, at most */

/* The options of outputs (serve's and run's --outputs ...), part of
 * struct ds_serve_opts. */
struct ds_out_opts {
	const char *outputs;       /* SUBDIR of the mount that takes writes, or NULL */
	const char *outputs_to;    /* where the output area lives (default NODEDIR) */
	const char *drain_to;      /* the shared file system's directory */
	uint64_t drain_rate;       /* bytes/s, 0: no bound */
	double drain_timeout;      /* s a stop waits for the drain */
	unsigned outputs_replicas; /* holders of each output (outrepl.c), 0 = 1 */
};
/* Defaults: every field 0 or NULL but --drain-rate 1 GiB/s and
 * --drain-timeout 600 s. */
void ds_out_defaults(struct ds_out_opts *o);
/* Handle one getopt code of the outputs' options (mpi/stepopt.c's table:
 * O W D Y X K); c, or 0 when c is not one; sets *bad on an invalid value,
 * said. */
int ds_out_opt(struct ds_out_opts *o, int c, const char *arg, int *bad);
/* After the options: --drain-to, --outputs-to and --outputs-replicas need
 * --outputs, which is one plain name and needs --drain-to.  0, or 2
 * (usage) with the reason said. */
int ds_out_check_opts(const struct ds_out_opts *o);

/* What the outputs need of the service that hosts them; copied at start. */
struct ds_out_host {
	MPI_Comm comm;          /* one rank per node (the outputs dup it) */
	uint32_t node, nnodes;  /* the staged node this rank serves; the step's nodes */
	uint32_t staged_nnodes; /* the nodes of the staging (a failover may serve fewer) */
	const char *nodedir;    /* NODEDIR: osock, outputs.conf, outputs.status */
	const char *to, *job;   /* --to and --job, as the user gave them (messages,
	                        * the job's directory under --outputs-to) */
	struct ds_stats *stats; /* NODEDIR/stats: bytes served to and fetched from peers */
	void *ctx;              /* the callbacks' first argument */
	/* the MPI rank serving staged node `node`, or -1 when it is lost */
	int (*rank_of)(void *ctx, uint32_t node);
	/* wake the main loop (any thread): ds_out_poll has work */
	void (*wake)(void *ctx);
	/* main: a message to rank is about to be sent; wake that rank's main
	 * loop (it may sleep between polls) */
	void (*poke)(void *ctx, int rank);
};

struct ds_out;
/* Start (collective: every rank, same options; main thread): the output
 * area, NODEDIR/osock, outputs.conf for the shim, the threads.  *out is set
 * whenever oo->outputs is (NULL otherwise), also on failure: ds_out_stop
 * and the collective ds_out_free follow either way.  0 or -errno (logged). */
int ds_out_start(const struct ds_out_host *h, const struct ds_out_opts *oo, struct ds_out **out);
/* main, every loop iteration: requests of the readers, messages of the
 * other nodes, transfers.  o may be NULL (no --outputs) here and below. */
void ds_out_poll(struct ds_out *o);
/* Anything not yet drained or in flight (a stop waits for it)? */
int ds_out_busy(struct ds_out *o);
/* A change of the outputs or a fetch is in flight here: poll, do not sleep. */
int ds_out_inflight(struct ds_out *o);
/* Stop the threads; report what was closed and not drained and what was
 * still being written: their number (the step then fails). */
int ds_out_stop(struct ds_out *o);
void ds_out_free(struct ds_out *o); /* collective */

/* `dstage drain` (cmd_drain.c). */
int ds_cmd_drain(int argc, char **argv);
/* From every NODEDIR/outputs.status of jobdir here, report (error
 * messages) what was closed and not drained; cleanup: remove the half-made
 * copy a killed service left; print: the figures.  1 if any (dstage stop
 * checks it after the service has stopped). */
int ds_out_report(const char *jobdir, int cleanup, int print);
/* `dstage status`: one line of node NAME's write-once outputs (pending and
 * drained files and bytes, the last drained), when it has any. */
void ds_outputs_status_line(const char *jobdir, const char *name);
/* `dstage clean`: remove the output areas of jobdir's nodes that live
 * elsewhere (--outputs-to DIR/dstage.<uid>.<job>/<node>.out). */
void ds_outputs_clean(const char *jobdir);

#endif
