/* SPDX-License-Identifier: BSD-3-Clause */
/* dsmpi.h: the MPI layer of the dstage command: what every MPI job step
 * (pack under mpiexec, stage, serve, run) shares, written once.
 *
 *   init.c       MPI_Init_thread with one thread-level policy, checked
 *   agree.c      waiting without spinning; the failure agreement (one-shot
 *                and the service's periodic one); the chunked broadcast
 *   node.c       node identity: which ranks are one node
 *   steplock.c   one owner per job directory, taken collectively
 *   stepopt.c    the option table of the job steps (stage, serve, run)
 *   jobcmd.c     the command line of stop and drain (a running job's commands)
 *   ucx_close.c  the MPI_Finalize hang over UCX's TCP transport
 *
 * Built into build/bin/dstage and the MPI test helpers, never into the
 * preload library (which stays libc only).  Above common/, below stage/,
 * shuffle/ and cli/; hdf5/ uses it for pack under mpiexec. */
#ifndef DSMPI_H
#define DSMPI_H

#include <dirent.h>
#include <getopt.h>
#include <mpi.h>
#include <stdint.h>

/* ---- init.c: the thread-level policy -----------------------------------
 * Every command that uses MPI initialises it with ds_mpi_init, asking for
 * the thread level the command table (cli/main.c) declares for it, and
 * checks what MPI provides against the level the command cannot do
 * without: less than that ends the command on every rank with the reason,
 * exit 1.  The policy today: pack and stage ask for and need
 * MPI_THREAD_FUNNELED (they may have threads, libcurl's resolver among
 * them; every MPI call is made by the main thread).  serve and run ask for
 * MPI_THREAD_MULTIPLE, so that the socket thread can fetch a remote read
 * itself (shuffle/direct.c), and need MPI_THREAD_FUNNELED: with less than
 * MULTIPLE the main thread fetches every read, as it did before. */
#define DS_MPI_NONE (-1) /* the command table: this command needs no MPI */

/* The dispatcher: the thread level the command about to run asks for, and
 * the level it needs (need <= ask). */
void ds_mpi_want(int ask, int need);
/* MPI_Init_thread at the declared level (MPI_THREAD_FUNNELED when none was
 * declared) and the check of `provided` against the needed level, agreed
 * by every rank.  0, or 1 after the ranks given too little said so ("this
 * MPI gives MPI_THREAD_SINGLE, the command needs MPI_THREAD_FUNNELED") and
 * every rank left MPI (the caller returns 1).  Fault point mpi.thread: that
 * rank sees MPI_THREAD_SINGLE (tests). */
int ds_mpi_init(int *argc, char ***argv);
/* The thread level ds_mpi_init got (after its fault points): what a
 * command's optional use of threads in MPI (shuffle/direct.c) goes by.
 * Fault point mpi.funneled: that rank sees MPI_THREAD_FUNNELED at most. */
int ds_mpi_provided(void);
/* The name of a thread level ("MPI_THREAD_FUNNELED"). */
const char *ds_mpi_level_name(int level);
/* MPI's text for an error code, or "MPI error N". */
const char *ds_mpi_strerror(int code, char *buf, int len);

/* ---- agree.c: waiting, agreeing, broadcasting --------------------------
 * Waits never spin: MPI_Test, then a 200 us sleep, so ranks that wait for a
 * slow one (a big partition, rank 0's scan) leave the cores to the ranks
 * doing the work (MPICH busy-polls in blocking calls, and ranks may share
 * cores with each other and the readers).  On a communicator that returns
 * errors (MPI_ERRORS_RETURN, the service's) an MPI error is returned as
 * itself; on one whose errors are fatal MPI ends the job step. */

/* Wait for a request: 0, or the MPI error code. */
int ds_mpi_wait(MPI_Request *req);

/* The agreement: every rank of comm gives n ints (n <= DS_AGREE_MAX), every
 * rank learns their maximum (flags, "failed node + 1").  Split in two for
 * a caller with other work meanwhile (the service's main loop): */
#define DS_AGREE_MAX 8
struct ds_agree {
	MPI_Request req;
	int inflight, n;
	int mine[DS_AGREE_MAX], all[DS_AGREE_MAX];
	double started; /* ds_now() at the start */
	int mpierr;     /* the MPI error code after -EIO */
};
/* Start one with a->mine[0..n-1].  0, or -EIO (a->mpierr: MPI's code). */
int ds_agree_start(struct ds_agree *a, MPI_Comm comm, int n);
/* 1: done, a->all holds the maxima; 0: in flight; -ETIMEDOUT: in flight
 * for more than timeout seconds (timeout <= 0: never), some rank is gone or
 * hung; -EIO: MPI failed (a->mpierr).  Only -ETIMEDOUT leaves a request in
 * flight: the caller then ends the job step (MPI_Abort). */
int ds_agree_test(struct ds_agree *a, double timeout);

/* The one-shot agreement on failure: every rank learns whether any rank
 * failed (err != 0), so all ranks leave together.  Returns nonzero when
 * some rank failed.  An MPI error under the agreement is logged as MPI said
 * it and counts as a failure.  Without MPI (not initialised: a serial pack)
 * or on one rank: err != 0, no MPI call.  No time limit: a step waits for
 * its slowest rank; a rank that dies ends the step through MPI (or the
 * launcher). */
int ds_any_failed(MPI_Comm comm, int err);

/* Broadcast len bytes from root, in pieces below MPI's int count (1 GiB),
 * each waited for without spinning.  Nothing without MPI or on one rank.
 * 0, or the MPI error code. */
int ds_mpi_bcast(MPI_Comm comm, void *buf, uint64_t len, int root);

/* ---- node.c: who is this rank's node -----------------------------------
 * docs/design.md section 3: SLURM_NODEID under Slurm, else ranks sharing a host
 * are one node; node_per_rank makes every rank its own node.  Collective
 * over world. */
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

/* ---- steplock.c: one owner per job directory (docs/design.md section 6) ----------------
 * Take JOBDIR's lock for this step (what: "stage", "serve", "run"), one
 * rank per host and DIR taking it for the others; create: make DIR and
 * JOBDIR first.  Collective over world.  Returns 0, or 1 after every rank
 * agreed on a refusal (named by the rank that met it: the holder's pid,
 * command and host).  *held is 1 on the ranks that hold it, for
 * ds_step_unlock.  Takes nest within a process. */
int ds_step_lock(MPI_Comm world, const char *to, const char *job, const char *what, int create,
                 int *held);
void ds_step_unlock(const char *to, const char *job, int held);
/* The message for a lock that could not be taken (rc from ds_joblock_take). */
void ds_lock_refusal(const char *jobdir, const char *to, const char *who, int rc);

/* ---- stepopt.c: the command lines of the job steps ---------------------
 * One table of every option of stage, serve and run: its name, its getopt
 * code and which commands take it.  Each value is checked by one function
 * (stage's options: ds_stage_opt in stage/stage.c; serve's: ds_serve_opt
 * in shuffle/serve.c) whichever command it is given to, so run takes
 * exactly what stage and serve take, with the same limits and messages. */
enum { DS_STEP_STAGE = 1, DS_STEP_SERVE = 2, DS_STEP_RUN = 4 };
#define DS_STEP_MAXOPTS 40
struct ds_step_getopt {
	struct option lo[DS_STEP_MAXOPTS];
	char shortopts[32];
};
/* The getopt_long tables of one command (cmd: one DS_STEP_*). */
void ds_step_getopt(unsigned cmd, struct ds_step_getopt *g);

/* ---- jobcmd.c: the commands that talk to a running job -----------------
 * dstage stop (shuffle/) and dstage drain (outputs/) reach the services of
 * a job from anywhere in it, without MPI: one command line for both. */
struct ds_jobcmd {
	const char *to, *job;
	double timeout; /* --timeout SECS (> 0); the caller sets the default */
	int wait;       /* --wait (only where wait_ok) */
	char *jobdir;   /* the caller frees it */
	DIR *d;         /* jobdir, open; the caller closes it */
};
/* Parse --to DIR [--job ID] [--timeout SECS] [--wait] [--help] and open
 * the job directory.  -1: go on; else the exit status, said (0 after
 * --help, 2 for a usage error, 1 when the job directory cannot be read). */
int ds_jobcmd_args(int argc, char **argv, const char *usage, int wait_ok, struct ds_jobcmd *j);

#endif
