/* SPDX-License-Identifier: BSD-3-Clause */
/* svc.h: the node service's inside, shared by the files of shuffle/ and
 * private to them (t/0001-modules.t); its public face, the options and the
 * step, is dsserve.h.
 *
 * One service rank per node.  Threads:
 *   main    every MPI call (MPI_THREAD_FUNNELED is enough): the one-sided
 *           gets of remote reads and of the epoch prefetch, the periodic
 *           agreement on stop/failure, progress for the peers' gets
 *   sock    the Unix socket: accepts readers, answers reads of data held
 *           here straight from the store mapping, hands the others to main
 *   watch   a watchdog: if main is stuck in one MPI call (a peer vanished
 *           without MPICH noticing), it reports and ends the process
 *   plan    the epoch planner (exchange.c): each epoch's share and what of
 *           it to fetch, O(samples of the job), off main so that main never
 *           stalls for it (helpers for an epoch's cache file and the check
 *           of its fetched bytes come and go as well)
 *
 * main and sock talk through two lists under one mutex, each with an
 * eventfd to wake the other side. */
#ifndef DS_SHUFFLE_SVC_H
#define DS_SHUFFLE_SVC_H

#include "dscommon.h"
#include "dsepoch.h"
#include "dsindex.h"
#include "dsmem.h"
#include "dsproto.h"
#include "dsserve.h" /* struct ds_serve_opts, the step */

#include <mpi.h>
#include <pthread.h>
#include <signal.h>

/* A read the socket thread cannot serve from this node: main fetches it. */
struct ds__rreq {
	struct ds__rreq *next;
	struct ds__conn *conn;
	uint32_t id;
	uint64_t off, len;
	void *buf;  /* malloc'd by main, sent and freed by sock */
	int status; /* 0 or -errno */
};

struct ds__exchange;
struct ds__sock;
struct ds__pw;
struct ds__direct;

struct ds__svc {
	struct ds_serve_opts o;
	MPI_Comm comm; /* one rank per node; rank == node */
	uint32_t node, nnodes;
	int host_ranks; /* service ranks on this host (simulated nodes: several) */
	char *jobdir, *nodedir;

	/* the node store, mapped; the window over it */
	struct ds_index ix;
	/* the index's full check (window.c), run beside the start's first
	 * plan; ds__store_checked waits for it */
	pthread_t ixcheck;
	int ixcheck_on, ixcheck_rc;
	double ixcheck_s;
	unsigned char *store;
	size_t store_len;
	size_t ram_len;  /* the first ram_len bytes map NODEDIR/store, the next
	                    store bytes the spill tier's (ds__store_open) */
	MPI_Win win;
	/* a get completes without any call into MPI by its target (window.c:
	 * probed when the window is made): the targets need not poll for our
	 * gets (progress.c) */
	int onesided;

	struct ds_stats *stats; /* NODEDIR/stats, shared with the readers */

	/* sock -> main: reads to fetch; main -> sock: fetched */
	pthread_mutex_t mu;
	struct ds__rreq *todo, **todo_tail, *done;
	int wake_main, wake_sock; /* eventfds */

	uint64_t reader_epoch;  /* atomic: the epoch a reader announced last */
	int have_reader_epoch;  /* atomic: any announced at all */
	int leaving;            /* atomic: sock stops accepting */

	int err; /* main only: the first failure; the service leaves */

	struct ds__exchange *x;
	struct ds__sock *sock;
	struct ds__failover *fo; /* failover.c: the node set; rank != node after a loss */
	struct ds_out *out;      /* outputs/ (outhost.c), NULL without --outputs */
	struct ds__pw *pw; /* progress.c: wake-ups of the targets of our gets */
	struct ds__direct *direct; /* direct.c: the socket thread's own gets, or NULL */
};

#define DS__COUNT(s, field, n) \
	__atomic_fetch_add(&(s)->stats->field, (uint64_t)(n), __ATOMIC_RELAXED)
#define DS__SET(s, field, v) __atomic_store_n(&(s)->stats->field, (uint64_t)(v), __ATOMIC_RELAXED)

/* ---- window.c: the store and the one-sided gets ------------------------- */
/* Map NODEDIR/index and NODEDIR/store; create the window (collective).
 * The open checks what the epoch plans rely on (ds_index_check_shuffle)
 * and, where the host has a core for it, starts the index's full check
 * (every entry, the CRC: seconds at millions of entries) on a thread of
 * its own (else it checks it at once); ds__store_checked waits for it, and
 * must return 0 before anything but the plans and the window uses the
 * index (the readers' socket, the outputs). */
int ds__store_open(struct ds__svc *s);
int ds__store_checked(struct ds__svc *s);
int ds__window_create(struct ds__svc *s);
void ds__window_free(struct ds__svc *s);
void ds__store_close(struct ds__svc *s);
/* A node other than this one holding entry id's partition, spreading the
 * load over replicas; sets *disp to the stored bytes' offset in its store.
 * Returns the node or -ENOENT. */
int ds__holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp);
/* Start a get of len bytes (any size: MPI_Get_c past INT_MAX) from node's
 * window into buf; complete it with ds__flush.  0 or -EIO, logged naming
 * the node. */
int ds__get(struct ds__svc *s, void *buf, uint64_t len, int node, MPI_Aint disp);
/* Start one get of n blocks from node's window (docs/mpi.md "Gets of many
 * samples"): block k is lens[k] bytes at tbase + tdisp[k] there, into
 * obase + odisp[k]; complete it with ds__flush.  0, -ENOMEM, or -EIO where
 * the library refused the types or the get (said at debug level: the caller
 * falls back to a get per block, which says what fails). */
int ds__get_blocks(struct ds__svc *s, void *obase, int n, const int *lens, const MPI_Aint *odisp,
                   int node, MPI_Aint tbase, const MPI_Aint *tdisp);
/* A thread that made gets and is about to end: free its request list. */
void ds__get_release(void);
/* Complete every get this thread started (window.c: MPI_Testall over its
 * MPI_Rget requests, yielding the core after a short spin, then
 * MPI_Win_flush to the targets of its gets of many blocks; with
 * DSTAGE_SERVE_RGET=0, MPI_Win_flush to the nodes marked in `targets` and
 * those); `targets` is cleared. */
int ds__flush(struct ds__svc *s, uint8_t *targets);
/* Let MPI make progress for the peers' gets (they need us on shared memory,
 * unless s->onesided). */
void ds__progress(struct ds__svc *s);

/* ---- sock.c: the readers' socket ---------------------------------------- */
int ds__sock_start(struct ds__svc *s);
/* Stop the thread, close every connection, unlink the socket. */
void ds__sock_stop(struct ds__svc *s);
/* main: hand finished reads back (wakes the socket thread). */
void ds__sock_done(struct ds__svc *s, struct ds__rreq *list);
/* After the flush of a list's gets (rc its result): a read without a
 * status of its own takes rc; a failed read's buffer is freed.  Returns how
 * many failed. */
size_t ds__rreq_settle(struct ds__rreq *list, int rc);

/* ---- exchange.c: the epoch shuffle -------------------------------------- */
/* Computes the first epochs' needs and checks them against the shuffle
 * buffer and the free space; creates the cache directory. 0 or -errno
 * (logged with the numbers). */
int ds__exchange_new(struct ds__svc *s);
void ds__exchange_free(struct ds__svc *s);
/* One step: follow the readers' epoch (publish/release caches), queue the
 * next gets of the prefetch.  Adds up to max_ops gets / max_bytes into the
 * batch being built (targets marked).  Returns the gets it started. */
size_t ds__exchange_issue(struct ds__svc *s, uint8_t *targets, size_t max_ops, uint64_t max_bytes);
/* The gets started by the last issue have completed (ok) or failed;
 * flush_s: the seconds their flush took. */
void ds__exchange_complete(struct ds__svc *s, int ok, double flush_s);
/* Is a prefetch in progress (the peers should keep up their progress)? */
int ds__exchange_busy(const struct ds__svc *s);
/* NODEDIR/serve.status, rewritten on each change (for dstage status).  state:
 * starting (the lock is ours, not serving yet), running (with the live
 * figures and the epoch lines), stopped or failed (without them). */
void ds__status_write(struct ds__svc *s, const char *state);

/* ---- direct.c: remote reads fetched by the socket thread ---------------- */
/* With MPI_THREAD_MULTIPLE (and not DSTAGE_SERVE_DIRECT=0): set s->direct. */
int ds__direct_start(struct ds__svc *s);
void ds__direct_stop(struct ds__svc *s);
/* The rank to get entry id from on this path, or -1: main's path. */
int ds__direct_holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp);
/* Fetch a batch of reads (buf, status set); returns how many failed. */
int ds__direct_fetch(struct ds__svc *s, struct ds__rreq *list);
/* END to targets unused for a while; seconds until the next is due, or -1. */
double ds__direct_idle(struct ds__svc *s);

/* ---- progress.c: telling a target we have gets in flight to it ---------- */
/* Collective: the UDP wake sockets, or none on every rank (then ds__pw_on
 * is 0 and the service polls periodically as before).  Always 0. */
int ds__pw_start(struct ds__svc *s);
void ds__pw_stop(struct ds__svc *s);
int ds__pw_on(const struct ds__svc *s);
/* The socket to poll for the peers' messages, or -1. */
int ds__pw_fd(const struct ds__svc *s);
/* Gets are about to be flushed to the nodes marked in targets: BEGIN. */
void ds__pw_begin(struct ds__svc *s, const uint8_t *targets);
/* Socket thread: a read of entry id is queued for main: BEGIN to its holder
 * now, so that the target wakes while main does (main's own BEGIN and END
 * bookkeeping follows when it issues the get). */
void ds__pw_poke(struct ds__svc *s, uint32_t id);
/* Socket thread (direct.c): BEGIN (begin = 1) or END to target rank t, on
 * the socket thread's own channel. */
void ds__pw_sock(struct ds__svc *s, uint32_t t, int begin);
/* Nothing in flight now: END to targets unused for a while.  Returns the
 * seconds until the next END is due (1e9: none). */
double ds__pw_idle(struct ds__svc *s);
/* Read the peers' messages; the count taken. */
int ds__pw_take(struct ds__svc *s);
/* Does some peer have gets in flight to us (poll MPI for it)? */
int ds__pw_wanted(const struct ds__svc *s);

/* gather.c: every node's figures gathered over MPI into JOBDIR/status.all
 * (dsstatus.h).  start once the store is open; tick after each completed
 * agreement (collective: same order on every rank); poll in the loop; end
 * when the loop is left (peers_alive 0: a peer is gone, do not wait). */
void ds__gather_start(struct ds__svc *s);
void ds__gather_tick(struct ds__svc *s);
void ds__gather_poll(struct ds__svc *s);
void ds__gather_end(struct ds__svc *s, int peers_alive);

/* ---- failover.c: serving the survivors of a lost node -------------------
 * Without --nodes and without JOBDIR/nodes every call below is the
 * identity (rank == node, every staged node, ds_epoch_share). */
/* After the step's communicator exists (step_node: this rank's node in the
 * step, 0..nnodes-1): s->node becomes the staged node it serves.  Reads the
 * epoch the readers of the previous service were in.  0 or -EINVAL (logged). */
int ds__failover_setup(struct ds__svc *s, uint32_t step_node);
/* Before the store is opened: what the previous service's readers did. */
void ds__failover_prior(struct ds__svc *s);
/* After the store is open (collective over s->comm): check the set against
 * the staging, record JOBDIR/nodes (which set each epoch is dealt over).
 * 0 or -errno (logged). */
int ds__failover_start(struct ds__svc *s);
void ds__failover_free(struct ds__svc *s);
/* Does the index's node count fit this step?  0 or -EINVAL (logged by the caller). */
int ds__failover_nodes_ok(const struct ds__svc *s, uint32_t staged_nnodes);
/* The MPI rank serving staged node `node`, or -1 when it is lost. */
int ds__rank_of(const struct ds__svc *s, uint32_t node);
/* This node's share of epoch e over the set that epoch is dealt over. */
int ds__share(struct ds__svc *s, uint64_t e, uint32_t **ids, size_t *n);
/* Write it down for the readers (NODEDIR/epochs/share.<e>, dsnodeset.h):
 * best effort, a reader computes it when it is not there. */
void ds__share_publish(struct ds__svc *s, uint64_t e, const uint32_t *ids, size_t n);
/* Is some living node (this one included) holding partition part?  (What
 * the epoch planner asks, once per partition; constant during a step.) */
int ds__part_reachable(const struct ds__svc *s, uint32_t part);
/* A read of entry id no living node holds: named in the log; the status
 * the reader gets (-EHOSTDOWN after a loss, else -EIO). */
int ds__no_holder(struct ds__svc *s, uint32_t id);
/* Re-replication after a loss (copies of under-replicated partitions from
 * the survivors' stores into NODEDIR/replicas.<gen>).  In ds__store_open,
 * before the store is mapped: plan_extra finds earlier complete copies and
 * sets *len to the length of the region to reserve for the store and them
 * (s->store_len if none); once the store is in place at region's start,
 * map_extra maps the copies right after it (one window covers both; the
 * store is never moved: docs/failover.md "MPI libraries that hook
 * mremap").  ds__extra_holder: a living node with a copy of
 * entry id's partition (this one included), -ENOENT if none.  In the main
 * loop, while the prefetch is idle: issue/complete like the exchange; busy
 * while copies are in flight. */
int ds__failover_plan_extra(struct ds__svc *s, uint64_t *len);
int ds__failover_map_extra(struct ds__svc *s, unsigned char *region, int populate);
int ds__extra_holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp);
size_t ds__rerep_issue(struct ds__svc *s, uint8_t *targets, size_t max_ops, uint64_t max_bytes);
void ds__rerep_complete(struct ds__svc *s, int ok);
int ds__rerep_busy(const struct ds__svc *s);
/* ---- outhost.c: the service hosts the write-once outputs ----------------
 * (outputs/dsoutputs.h, docs/outputs.md): their start with this service's
 * communicator, node set and wake-ups; the others are dsoutputs.h's on
 * s->out. */
/* Start (collective: every rank, same options): 0 or -errno (logged);
 * ds_out_stop(s->out) and ds__out_free follow either way. */
int ds__out_start(struct ds__svc *s);
/* ds_out_free (collective), s->out cleared */
void ds__out_free(struct ds__svc *s);

/* ---- shared helpers ----------------------------------------------------- */
void ds__wake(int efd);
void ds__drain(int efd);

#endif
