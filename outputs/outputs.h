/* SPDX-License-Identifier: BSD-3-Clause */
/* outputs.h: the inside of outputs/, shared by its files and private to
 * them (t/0001-modules.t); the face is dsoutputs.h. */
#ifndef DS_OUTPUTS_OUTPUTS_H
#define DS_OUTPUTS_OUTPUTS_H

#include "dscommon.h"
#include "dsoutputs.h"

#include <limits.h>
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

struct ds__drain;

/* the host's services (dsoutputs.h) */
static inline int ds__out_rank_of(const struct ds_out_host *h, uint32_t node)
{
	return h->rank_of(h->ctx, node);
}
static inline void ds__out_poke(const struct ds_out_host *h, int rank)
{
	if (h->poke)
		h->poke(h->ctx, rank);
}
#define DS__OUT_COUNT(h, field, n)                                                                 \
	__atomic_fetch_add(&(h)->stats->field, (uint64_t)(n), __ATOMIC_RELAXED)

enum ds__dstate { DS_D_NONE = 0, DS_D_QUEUED, DS_D_DRAINING, DS_D_DRAINED, DS_D_FAILED };

/* A closed output this node knows (every node knows every one). */
struct ds__orec {
	struct ds__orec *next;
	char *path; /* current name, relative to the outputs root */
	uint64_t size, seq;
	int64_t mtime_ns;
	uint32_t crc, mode, holder;
	int summed;      /* crc is known (the holder sums a file after its
	                    * close, off the writer's path: sum.c) */
	int sum_err;     /* its sum failed: no fetch, no drain */
	double t_closed; /* the holder: when it was published */
	int local;       /* its bytes are in this node's AREA/ns */
	int fetching, fetch_err;
	int gone; /* unlinked or replaced */
	/* the holder's drain */
	int dstate;  /* enum ds__dstate */
	char *dpath; /* name in the drain directory once drained */
	/* --outputs-replicas (outrepl.c): the other nodes holding its bytes */
	uint32_t nrepl, repl[DS_OUT_MAX_REPL];
	int repl_drained; /* a replica: the holder reported it drained */
};

/* ---- the state of the outputs on this node (outputs.c, order.c, fetch.c,
 * conn.c, sum.c).  Node 0's protocol: a change is a REQ to node 0, an
 * APPLY to every node, their ACK and the DONE to its origin; FETCH and
 * FHDR move a file's bytes (fetch.c).  The ops extend dsout.h's. */
enum {
	DS__OUT_T_REQ = 1,
	DS__OUT_T_APPLY,
	DS__OUT_T_ACK,
	DS__OUT_T_DONE,
	DS__OUT_T_FETCH,
	DS__OUT_T_FHDR
};
enum { DS__OUT_PUBLISH = 100, DS__OUT_ABORT, DS__OUT_FETCH };
#define DS__OUT_SUM_LATER 1 /* DS__OUT_PUBLISH: the holder sums the bytes after the close */

struct ds__omsg {
	uint32_t op;
	int32_t status;
	uint32_t origin, holder;
	uint64_t rid; /* the origin's request number */
	uint64_t seq; /* node 0's change number */
	uint64_t token, size;
	int64_t mtime_ns;
	uint32_t crc, mode;
	int32_t flags, xfer;
	char path[PATH_MAX];
	char path2[PATH_MAX];
	uint32_t nrepl, repl[DS_OUT_MAX_REPL]; /* DS__OUT_PUBLISH: the replica nodes (outrepl.c) */
};

/* a request waiting for main (from a connection thread) */
struct ds__oreq {
	struct ds__oreq *next;
	struct ds__omsg m;
	int done, status;
	pthread_cond_t cv;
};

/* a file being written on this node */
struct ds__opend {
	struct ds__opend *next;
	uint64_t token;
	char *path;
	int fd;         /* the service's own descriptor on w/<token> */
	int committing; /* a thread publishes it */
	int armed;      /* the writer has its lock (WATCH or CLOSE came) */
	int watched;    /* a watcher thread waits for its locks */
	double t0;
	uint32_t mode;
};

/* a publish that failed, until the writer's CLOSE asks: the watcher or
 * the sweep often publishes before the CLOSE arrives, and the close must
 * still say that its file was not kept (a replica that failed: outrepl.c) */
struct ds__ofail {
	struct ds__ofail *next;
	uint64_t token;
	int rc;
};

/* node 0: a path taken by a writer */
struct ds__owriting {
	struct ds__owriting *next;
	char *path;
	uint32_t node;
	uint64_t token;
};

/* node 0: a change waiting for acknowledgements */
struct ds__oack {
	struct ds__oack *next;
	uint64_t seq, rid;
	uint32_t origin;
	int left, status;
	int drain; /* a DRAIN: waits for the drains, not for MPI */
};

/* a node's acknowledgement of DRAIN, held until its drain has caught up */
struct ds__odw {
	struct ds__odw *next;
	uint64_t seq, upto;
};

/* a transfer of a file's bytes in progress */
struct ds__oxfer {
	struct ds__oxfer *next;
	int xfer, peer, in; /* in: we receive */
	char *path;
	uint64_t size, seq;
	uint32_t crc, mode;
	int64_t mtime_ns;
	void *map;
	int fd;
	MPI_Request *reqs;
	int nreq;
	char tmp[PATH_MAX];
};

struct ds__osend {
	struct ds__osend *next;
	struct ds__omsg m;
	MPI_Request req;
};

/* the holder: a file to sum after its close */
struct ds__osum {
	struct ds__osum *next;
	struct ds__orec *r;
};

/* the holder: a FETCH waiting for its file's sum */
struct ds__odefer {
	struct ds__odefer *next;
	struct ds__omsg m;
	int peer;
};

struct ds_out {
	struct ds_out_host h; /* the service's (dsoutputs.h) */
	struct ds_out_opts oo;
	MPI_Comm oc, dc;
	int rank; /* in oc: rank 0 orders the namespace.  Messages name nodes
	           * (origin, holder); after a failover rank != node, so a
	           * node is sent to at ds__rank_of() */
	pthread_mutex_t mu;
	pthread_mutex_t status_mu;       /* NODEDIR/outputs.status: one writer (after mu) */
	uint64_t status_gen, status_put; /* snapshots taken, and the newest written */
	int areafd, nsfd, wfd;           /* AREA, AREA/ns, AREA/w: every name in the area is
	                            * used from these (nspath), never by path */
	char area[PATH_MAX], sock[PATH_MAX];
	int lfd;
	pthread_t athread;
	int athread_on, quit;
	struct ds__oreq *queue, **qtail; /* to main */
	struct ds__oreq *wait;           /* sent, waiting for DONE (by m.rid) */
	uint64_t rid, token_ctr, seq;
	uint32_t inst; /* this service of the job on this node: 1, 2, ... (in its
	                * tokens: a writer's token from an earlier one is refused) */
	int xfer_ctr;
	struct ds__opend *pend;
	struct ds__owriting *writing; /* node 0 */
	struct ds__oack *acks;        /* node 0 */
	struct ds__odw *dwaits;
	struct ds__oxfer *xfers;
	struct ds__osend *sends;
	struct ds__orec *recs;
	pthread_cond_t fetched; /* a fetch ended */
	struct ds__drain *dr;
	size_t rel_max;                     /* the longest relative name of an output (name_fits) */
	struct ds__osum *sums, **sums_tail; /* to the sum thread, oldest first */
	struct ds__odefer *fdefer;
	pthread_t sthread;
	int sthread_on, squit;
	pthread_cond_t sum_cv, summed;
	int nthreads, nwatch;
	pthread_cond_t threads_cv;
	struct ds__orepl *repl; /* --outputs-replicas: outrepl.c */
	struct ds__ofail *fails;
};

/* AREA/ns-relative name of rel for the *at() calls on o->nsfd (outputs.c) */
int ds__out_nspath(struct ds_out *o, const char *rel, char *buf);

/* order.c: main's side: send m to rank `to` on the ordering communicator
 * (the peer is woken) */
void ds__out_send(struct ds_out *o, int to, int tag, const struct ds__omsg *m);

/* fetch.c, from main (mu held): a FETCH from peer to serve, the header of
 * one we asked for, the transfers in flight; a fetch ends (rc) for r */
void ds__fetch_serve(struct ds_out *o, const struct ds__omsg *m, int peer);
void ds__fetch_header(struct ds_out *o, const struct ds__omsg *h, int peer);
void ds__fetch_poll(struct ds_out *o);
void ds__fetch_end(struct ds_out *o, struct ds__orec *r, int rc);

/* conn.c: the thread that accepts the writers' connections (arg: o) */
void *ds__out_accept_main(void *arg);
/* sum.c: the thread that sums each published file (arg: o) */
void *ds__out_sum_main(void *arg);

/* snprintf whose truncation the callers check where it matters (names are
 * bounded by PATH_MAX on the way in) */
int ds__out_pfmt(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* outputs.c and sum.c, for the other files (the state's mutex is held
 * where it says so) */
pthread_mutex_t *ds__out_mutex(struct ds_out *o);
int ds__out_nsfd(struct ds_out *o); /* AREA/ns, by descriptor */
uint32_t ds__out_node(struct ds_out *o);
const struct ds_out_host *ds__out_host(struct ds_out *o);
const struct ds_out_opts *ds__out_opts(struct ds_out *o);
struct ds__orec *ds__out_find(struct ds_out *o, const char *path);
/* the output published by change seq, whatever its name now (outrepl.c) */
struct ds__orec *ds__out_find_seq(struct ds_out *o, uint64_t seq);
/* conn.c: fetch path's bytes from its holder, waiting (mutex held) */
int ds__out_fetch_locked(struct ds_out *o, const char *path);
/* wake the service's main loop (it checks the drain waits) */
void ds__out_wake(struct ds_out *o);
/* wait (mutex held, at most a tenth of a second) for a sum to end */
void ds__out_wait_summed(struct ds_out *o);
/* the CRC-32C of r as outputs.status shows it: 8 hex digits, or "--------"
 * while the holder has not summed it yet */
const char *ds__out_crc_str(const struct ds__orec *r, char buf[9]);
/* rewrite NODEDIR/outputs.status (mutex NOT held) */
void ds__out_status_write(struct ds_out *o);
/* the same, mutex held (outrepl.c: a replica's status before its ack) */
void ds__out_status_write_held(struct ds_out *o);
/* outrepl.c's state, and the area's directory of files in flight */
struct ds__orepl *ds__out_repl(struct ds_out *o);
int ds__out_wfd(struct ds_out *o); /* AREA/w, by descriptor */

/* drain.c: copies of the held outputs to --drain-to, oldest first, each
 * durable (temporary name, fsync, rename, fsync of the directory) before it
 * counts as drained.  All but new/end/free with the outputs mutex held. */
int ds__drain_new(struct ds_out *o, const struct ds_out_opts *so, struct ds__drain **out);
/* the drain directory (its real path) */
const char *ds__drain_dir(const struct ds__drain *d);
void ds__drain_add(struct ds__drain *d, struct ds__orec *r);
/* r was replaced (unlink_copy 0: its drained copy stays until the new one
 * replaces it) or unlinked (1: its drained copy goes too). */
void ds__drain_forget(struct ds__drain *d, struct ds__orec *r, int unlink_copy);
void ds__drain_rename(struct ds__drain *d, struct ds__orec *r, const char *newpath);
/* A mark of everything queued so far; has the drain passed it (*status
 * -EIO when some file failed)? */
uint64_t ds__drain_mark(struct ds__drain *d);
int ds__drain_reached(struct ds__drain *d, uint64_t mark, int *status);
int ds__drain_pending(struct ds__drain *d);
void ds__drain_status(struct ds__drain *d, struct ds_buf *b);
/* Stop the thread (mutex not held); report and count what is not drained. */
int ds__drain_end(struct ds__drain *d);
void ds__drain_free(struct ds__drain *d);
/* The directory of rel (relative to the drain directory dfd) by descriptor,
 * component by component with O_NOFOLLOW, made (and made durable) when
 * missing with create; the descriptor or -errno, *base rel's last name. */
int ds__drain_dirat(int dfd, const char *rel, int create, const char **base);
/* Read a whole store file (outputs.status: one line per output, any
 * number of them): its length with *text (malloc'd, NUL-terminated), or
 * -errno (-ENOENT: none). */
ssize_t ds__out_read_text(const char *path, char **text);

#endif
