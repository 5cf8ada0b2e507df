/* SPDX-License-Identifier: BSD-3-Clause */
/* serve.c: `dstage serve`, the node service's life: options, setup, the
 * main loop, leaving together.
 *
 * The main loop does every MPI call of the service:
 *   - a batch of gets: the readers' remote reads first (someone waits for
 *     them), then the next samples of the epoch prefetch, up to a bound;
 *     the batch is completed as a whole (window.c: MPI_Testall over its
 *     MPI_Rget requests), and the targets are told to poll MPI meanwhile
 *     (progress.c); with MPI_THREAD_MULTIPLE the readers' reads are
 *     fetched by the socket thread instead (direct.c);
 *   - every AGREE_PERIOD an MPI_Iallreduce of {stop, failed node, busy}:
 *     stop (dstage stop, SIGTERM) and failures are acted upon by every rank
 *     at once, in the same iteration, so all leave together; a rank that
 *     does not answer within --timeout is taken as gone and the job step is
 *     aborted instead of waiting forever;
 *   - progress for the peers: on shared memory (and TCP) MPICH moves a get
 *     only when the target calls into MPI, so a rank polls MPI while a peer
 *     has told it (progress.c) that gets to it are in flight, and sleeps
 *     otherwise, until its socket thread, a peer's message or the next
 *     agreement wakes it (an idle service: well under 1% of a core).
 *     Without those messages (DSTAGE_SERVE_POLL=1, or a peer that cannot be
 *     reached over UDP) the old rule holds: every rank polls every
 *     BUSY_POLL_NS while any node is fetching (busy), every IDLE_SLEEP_NS
 *     otherwise.  On an RDMA network the polling costs a little CPU and
 *     buys nothing; it is bounded to the time gets are in flight. */
#include "dslock.h"
#include "dsmpi.h"
#include "dsserve.h"
#include "svc.h"

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define AGREE_PERIOD 0.1       /* s between agreements */
#define STOP_CHECK_PERIOD 0.1  /* s between looks at JOBDIR/stop */
#define IDLE_SLEEP_NS 1000000L /* 1 ms between polls when every node is idle */
#define BUSY_POLL_NS 20000L    /* 20 us between polls while some node fetches */
#define BUSY_LINGER 0.5        /* s a rank stays busy after serving a remote read */
#define WAKE_IDLE_SLEEP 0.05   /* s between polls when idle, with wake-ups (progress.c) */
#define AGREE_POLL 0.005       /* s between polls of an agreement in flight, idle */
/* A batch: gets in flight before one flush per target.  Larger batches
 * amortise the flush; a remote read waits behind at most one batch. */
#define BATCH_OPS 256
#define BATCH_BYTES (32u << 20)
#define READS_INFLIGHT_BYTES (256ull << 20)
#define STOP_NAME DS_STOP_NAME

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static const char *serve_usage =
	"usage: dstage serve --to DIR [options]\n"
	"  MPI job step, one rank per node (Slurm: srun --overlap --ntasks-per-node=1):\n"
	"  serve the node store to this node's readers, fetch what they need from other\n"
	"  nodes with MPI one-sided gets, and reshuffle the training set every epoch.\n"
	"  Runs until 'dstage stop --to DIR', SIGTERM or the end of the job.\n"
	"      --to DIR              node-local directory the job was staged into\n"
	"      --job ID              job id (default $SLURM_JOB_ID, else 0)\n"
	"      --node-per-rank       every rank is its own node (simulated nodes)\n"
	"      --seed S              seed of the epoch shuffle (default 0)\n"
	"      --locality L          0..1: share of a node's epoch share it keeps from its own\n"
	"                            store (default 0: a global shuffle; 1: never move data)\n"
	"      --drop-last           equal shares by dropping the remainder (default: pad)\n"
	"      --shuffle-buffer SIZE bound of the epoch cache per node (default: what two\n"
	"                            epochs' remote share needs)\n"
	"      --ram-headroom SIZE|N%  memory left to training under the job's memory cgroup when\n"
	"                            DIR is RAM: the epoch cache waits, shrinks or is skipped\n"
	"                            rather than take it (default: 25% of the limit, at least 8 GiB)\n"
	"      --timeout SECS        a node silent this long is taken as failed (default 20)\n"
	"      --failover            readers wait (within DSTAGE_TIMEOUT) for a service\n"
	"                            restarted after a lost node instead of failing at once\n"
	"      --nodes LIST          serve only these staged nodes (e.g. 0-1,3: the survivors\n"
	"                            of a lost node; rank r serves the r-th); implies --failover\n"
	"      --no-rereplicate      after a loss, do not copy the partitions that lost a\n"
	"                            holder to other survivors (default: copy in the background)\n"
	"      --clean               remove this node's store on the way out\n"
	"      --outputs SUBDIR      MOUNT/SUBDIR takes write-once outputs (docs/outputs.md)\n"
	"      --drain-to DIR        copy every closed output there (the shared file system)\n"
	"      --outputs-to DIR      node-local directory for the outputs (default: the store's)\n"
	"      --drain-rate SIZE     bytes per second the drain may use (default 1GiB, 0: no bound)\n"
	"      --drain-timeout SECS  how long a stop waits for the drain (default 600)\n"
	"      --outputs-replicas N  a close returns once N nodes hold the output (default 1)\n"
	"  -q, --quiet               errors only\n"
	"  -v, --verbose             per-epoch figures (as DSTAGE_LOG=info)\n"
	"  -h, --help                this text\n";

/* Options shared by serve and run (dsserve.h). */
int ds_serve_opt(struct ds_serve_opts *o, int c, const char *arg, int *bad)
{
	uint64_t v;
	double d;
	if (ds_out_opt(&o->out, c, arg, bad)) /* outputs/ */
		return c;
	switch (c) {
	case 't': o->to = arg; return c;
	case 'j': o->job = arg; return c;
	case 'H':
		if (ds_headroom_opt(arg, &o->headroom, bad))
			o->headroom_set = 1;
		return c;
	case 'n': o->node_per_rank = 1; return c;
	case 'c': o->clean = 1; return c;
	case 'd': o->cfg.drop_last = 1; return c;
	case 's':
		if (ds_parse_u64(arg, &v)) {
			ds_error("--seed '%s': not a number", arg);
			*bad = 1;
		}
		o->cfg.seed = v;
		return c;
	case 'L':
		if (ds_parse_double(arg, &d) || !(d >= 0 && d <= 1)) {
			ds_error("--locality '%s': not a number from 0 to 1", arg);
			*bad = 1;
		}
		o->cfg.locality = d;
		return c;
	case 'B':
		if (ds_parse_size(arg, &v) || !v) {
			ds_error("--shuffle-buffer '%s': not a size", arg);
			*bad = 1;
		}
		o->shuffle_buffer = v;
		return c;
	case 'T':
		if (ds_parse_double(arg, &d) || !(d >= 1)) {
			ds_error("--timeout '%s': not a number of seconds >= 1", arg);
			*bad = 1;
		}
		o->agree_timeout = o->watchdog = d;
		return c;
	case 'N': o->nodes = arg; o->failover = 1; return c;
	case 'F': o->failover = 1; return c;
	case 'x': o->no_rerep = 1; return c;
	case 'q': o->quiet = 1; return c;
	case 'v': o->quiet = -1; return c;
	case 'h': o->help = 1; return c;
	}
	return 0;
}

int ds_serve_check_opts(const struct ds_serve_opts *o)
{
	/* outputs/: the only options that depend on each other */
	return ds_out_check_opts(&o->out);
}

void ds_serve_defaults(struct ds_serve_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->agree_timeout = o->watchdog = 20;
	ds_out_defaults(&o->out);
}

static int parse(int argc, char **argv, struct ds_serve_opts *o)
{
	struct ds_step_getopt g; /* mpi/stepopt.c: one table for stage, serve, run */
	ds_step_getopt(DS_STEP_SERVE, &g);
	ds_serve_defaults(o);
	optind = 1;
	int c, bad = 0;
	while ((c = getopt_long(argc, argv, g.shortopts, g.lo, NULL)) != -1) {
		if (!ds_serve_opt(o, c, optarg, &bad)) {
			fputs(serve_usage, stderr);
			return 2;
		}
		if (o->help)
			return 0;
	}
	if (optind != argc) {
		ds_error("'%s': unexpected argument", argv[optind]);
		return 2;
	}
	if (!o->to) {
		ds_error("need --to DIR");
		return 2;
	}
	if (!bad && ds_serve_check_opts(o))
		return 2;
	return bad ? 2 : 0;
}

/* ---- the watchdog ------------------------------------------------------
 * Process-wide (the thread outlives the step's stack frame and also
 * watches MPI_Finalize). */
static struct {
	int64_t beat_ms;  /* atomic; 0: disarmed */
	int64_t limit_ms; /* atomic */
	int leaving;      /* atomic; 1: the step is ending after a lost peer */
	uint32_t node;
	char sock[PATH_MAX];
	int started;
} wd;

static int64_t now_ms(void) { return (int64_t)(ds_now() * 1000); }

static void beat(void) { __atomic_store_n(&wd.beat_ms, now_ms(), __ATOMIC_RELAXED); }

static void *watch_main(void *arg)
{
	(void)arg;
	for (;;) {
		sleep(1);
		int64_t hb = __atomic_load_n(&wd.beat_ms, __ATOMIC_RELAXED);
		int64_t limit = __atomic_load_n(&wd.limit_ms, __ATOMIC_RELAXED);
		if (hb && now_ms() - hb > limit) {
			/* main is stuck in an MPI call: a peer vanished and MPI did not
			 * notice.  Leave no socket readers would wait on, and go. */
			if (__atomic_load_n(&wd.leaving, __ATOMIC_RELAXED))
				ds_error("node %u: still leaving %lld s after a node was lost (MPI_Abort "
				         "or a thread blocked on the lost node); leaving now",
				         wd.node, (long long)(limit / 1000));
			else
				ds_error("node %u: an MPI call has not returned for %lld s: a node is gone "
				         "or hung; leaving",
				         wd.node, (long long)(limit / 1000));
			unlink(wd.sock);
			_exit(1);
		}
	}
	return NULL;
}

static void watch_arm(struct ds__svc *s)
{
	__atomic_store_n(&wd.limit_ms, (int64_t)(s->o.watchdog * 1000), __ATOMIC_RELAXED);
	wd.node = s->node;
	snprintf(wd.sock, sizeof(wd.sock), "%s/" DS_SOCK_NAME, s->nodedir);
	beat();
	if (!wd.started) {
		pthread_t t;
		sigset_t all, prev;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &prev);
		if (!pthread_create(&t, NULL, watch_main, NULL)) {
			pthread_detach(t);
			wd.started = 1;
		}
		pthread_sigmask(SIG_SETMASK, &prev, NULL);
	}
}

static void watch_disarm(void) { __atomic_store_n(&wd.beat_ms, 0, __ATOMIC_RELAXED); }

/* The step ends after a lost peer: what is left to do (stop the threads,
 * MPI_Abort) may block on the lost node too, as the getting threads' MPI
 * calls do over TCP; it gets LEAVE_MS, not another --timeout, so the
 * survivors are gone about --timeout after the loss, not twice that. */
#define LEAVE_MS 5000
static void watch_leaving(void)
{
	__atomic_store_n(&wd.leaving, 1, __ATOMIC_RELAXED);
	if (__atomic_load_n(&wd.limit_ms, __ATOMIC_RELAXED) > LEAVE_MS)
		__atomic_store_n(&wd.limit_ms, (int64_t)LEAVE_MS, __ATOMIC_RELAXED);
	beat();
}

/* ---- the main loop ------------------------------------------------------ */

/* Fetch the readers' remote reads and the next prefetch gets: one batch. */
static int batch(struct ds__svc *s, uint8_t *targets, double *last_read)
{
	pthread_mutex_lock(&s->mu);
	struct ds__rreq *list = s->todo, *rest = NULL, **tail = &list;
	/* bound the bytes of reads in one batch; the rest waits its turn */
	uint64_t bytes = 0;
	for (struct ds__rreq *r = list; r; r = r->next) {
		bytes += r->len;
		if (bytes > READS_INFLIGHT_BYTES && r != list) {
			rest = r;
			*tail = NULL;
			break;
		}
		tail = &r->next;
	}
	s->todo = rest;
	if (!rest)
		s->todo_tail = &s->todo;
	pthread_mutex_unlock(&s->mu);

	size_t nreads = 0;
	for (struct ds__rreq *r = list; r; r = r->next) {
		MPI_Aint disp;
		int node = ds__holder(s, r->id, &disp);
		r->buf = malloc(r->len ? r->len : 1);
		if (node < 0 || !r->buf) {
			r->status = node < 0 ? ds__no_holder(s, r->id) : -ENOMEM;
			continue;
		}
		r->status = ds__get(s, r->buf, r->len, node, disp + (MPI_Aint)r->off);
		if (!r->status)
			targets[node] = 1;
		else
			s->err = r->status;
		nreads++;
	}
	size_t nfetch = ds__exchange_issue(s, targets, nreads < BATCH_OPS ? BATCH_OPS - nreads : 0,
	                                   BATCH_BYTES);
	/* re-replication after a loss, in the background: when nothing else moves */
	if (!nreads && !nfetch)
		nfetch = ds__rerep_issue(s, targets, BATCH_OPS, BATCH_BYTES);
	if (!nreads && !nfetch && !list)
		return 0;
	/* the targets poll MPI until we END, where gets need them (window.c) */
	if (!s->onesided)
		ds__pw_begin(s, targets);
	double t0 = ds_now();
	int rc = ds__flush(s, targets);
	double flush_s = ds_now() - t0;
	if (rc)
		s->err = rc;
	ds__rreq_settle(list, rc);
	if (list)
		*last_read = ds_now();
	ds__sock_done(s, list);
	ds__exchange_complete(s, rc == 0, flush_s);
	ds__rerep_complete(s, rc == 0);
	return 1;
}

static int stop_requested(struct ds__svc *s)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/" STOP_NAME, s->jobdir);
	return access(p, F_OK) == 0;
}

static void mpi_failed(struct ds__svc *s, const char *what, int code)
{
	char m[MPI_MAX_ERROR_STRING];
	ds_error("node %u: %s: %s", s->node, what, ds_mpi_strerror(code, m, (int)sizeof(m)));
}

/* The service's agreement (mpi/agree.c): each node's flags, every node
 * learns their maximum. */
enum agree_flag {
	AGREE_STOP,     /* asked to stop (a signal, dstage stop) */
	AGREE_FAILED,   /* failed node + 1, 0: none */
	AGREE_BUSY,     /* fetching: the peers poll fast */
	AGREE_OUT_BUSY, /* outputs not drained: a stop waits */
	AGREE_NFLAGS
};

/* The main loop's state between its phases (run_loop). */
struct loop {
	struct ds_agree a;
	double agree_next;      /* when the next agreement starts */
	double next_stop_check; /* when to look for dstage stop's file next */
	double last_read, stop_since;
	int peers_busy, want_stop;
	uint8_t *targets;
};

/* A signal or dstage stop: this node wants to stop (said once). */
static void loop_check_stop(struct ds__svc *s, struct loop *l, double now)
{
	if (got_signal && !l->want_stop) {
		ds_info("node %u: signal %d: stopping", s->node, (int)got_signal);
		l->want_stop = 1;
	}
	if (now >= l->next_stop_check) {
		l->next_stop_check = now + STOP_CHECK_PERIOD;
		if (!l->want_stop && stop_requested(s)) {
			ds_info("node %u: dstage stop: stopping", s->node);
			l->want_stop = 1;
		}
	}
}

/* Start an agreement when one is due. */
static int loop_agree_start(struct ds__svc *s, struct loop *l, double now)
{
	struct ds_agree *a = &l->a;
	int busy = ds__exchange_busy(s) || ds__rerep_busy(s) || now - l->last_read < BUSY_LINGER;
	a->mine[AGREE_STOP] = l->want_stop;
	a->mine[AGREE_FAILED] = s->err ? (int)s->node + 1 : 0;
	a->mine[AGREE_BUSY] = busy;
	a->mine[AGREE_OUT_BUSY] = ds_out_busy(s->out);
	int arc = ds_agree_start(a, s->comm, AGREE_NFLAGS);
	if (!arc && ds_fault("serve.agree", (int)s->node)) {
		a->mpierr = MPI_ERR_OTHER; /* tests: an MPI error, reported as itself */
		arc = -EIO;
	}
	if (arc) {
		/* the communicator returns errors (MPI_ERRORS_RETURN): say
		 * what MPI said, not "no answer" after --timeout */
		mpi_failed(s, "MPI_Iallreduce (the agreement)", a->mpierr);
		return -1;
	}
	return 0;
}

/* The agreement: start one when due, test the one in flight and act on
 * its outcome.  1 when the loop ends (*result: run_loop's return), else 0. */
static int loop_agree(struct ds__svc *s, struct loop *l, double now, int *result)
{
	struct ds_agree *a = &l->a;
	if (!a->inflight && now >= l->agree_next && loop_agree_start(s, l, now)) {
		*result = -1;
		return 1;
	}
	if (!a->inflight)
		return 0;
	int arc = ds_agree_test(a, s->o.agree_timeout);
	if (arc == -EIO) {
		mpi_failed(s, "MPI_Test (the agreement)", a->mpierr);
		*result = -1;
		return 1;
	}
	if (arc == 1) {
		l->agree_next = now + AGREE_PERIOD;
		l->peers_busy = a->all[AGREE_BUSY];
		if (a->all[AGREE_FAILED]) {
			if (!s->err)
				ds_error("node %u: node %d failed: stopping", s->node,
				         a->all[AGREE_FAILED] - 1);
			*result = 1;
			return 1;
		}
		/* a stop waits for the outputs' drain, up to --drain-timeout */
		if (a->all[AGREE_STOP] && a->all[AGREE_OUT_BUSY] && !l->stop_since)
			l->stop_since = now;
		if (a->all[AGREE_STOP] &&
		    (!a->all[AGREE_OUT_BUSY] || now - l->stop_since > s->o.out.drain_timeout)) {
			*result = 0;
			return 1;
		}
		ds__gather_tick(s);
	} else if (arc == -ETIMEDOUT) {
		ds_error("node %u: no answer from the other nodes for %.0f s: one is gone or hung",
		         s->node, s->o.agree_timeout);
		*result = -1;
		return 1;
	}
	return 0;
}

/* Nothing of our own to do: how long to sleep until the socket thread
 * wakes us or the next poll for the peers is due.  With wake-ups
 * (progress.c), we poll every BUSY_POLL_NS only while a peer has gets in
 * flight to us, else sleep until the next agreement or a message; without
 * them, every BUSY_POLL_NS while a peer fetches (peers_busy), every
 * IDLE_SLEEP_NS otherwise.  Each poll answers all the gets queued
 * meanwhile, and the sleep leaves the core to the readers and our socket
 * thread (spinning here was measured to starve them: ms per remote read on
 * 2 cores).  0: do not sleep, a peer waits for us (poll now). */
static long loop_idle_ns(struct ds__svc *s, struct loop *l, double now)
{
	if (!ds__pw_on(s))
		return l->peers_busy && !s->onesided ? BUSY_POLL_NS : IDLE_SLEEP_NS;
	double due = ds__pw_idle(s); /* END to targets we are done with */
	ds__pw_take(s);
	if (ds__pw_wanted(s)) {
		/* a peer waits for us: poll, giving the core to anyone else
		 * who wants it in between (a sleep of 5 or 20 us between polls
		 * measured slower gets and no better 99th percentile on 2 busy
		 * cores: at load 10, median 4 KiB reads 69/50 us with
		 * sched_yield vs 173/120 us with 20 us sleeps) */
		return 0;
	}
	/* the agreement: due, or in flight (the peers answer at their own
	 * polls: no need to ask MPI often) */
	double ag = l->a.inflight ? AGREE_POLL : l->agree_next - now;
	if (ag < due)
		due = ag;
	if (l->next_stop_check - now < due)
		due = l->next_stop_check - now;
	if (due > WAKE_IDLE_SLEEP)
		due = WAKE_IDLE_SLEEP;
	long ns = due > 0 ? (long)(due * 1e9) + 1000 : 1000;
	/* the backstop: while the agreement says a node fetches, poll as
	 * without wake-ups, so a BEGIN that never arrives (a firewall, a
	 * wrong address) costs speed, never a flush that outlasts the
	 * watchdog */
	if (l->peers_busy && !s->onesided && ns > BUSY_POLL_NS)
		ns = BUSY_POLL_NS;
	return ns;
}

/* Sleep up to ns, woken by the socket thread or a peer's wake-up. */
static void loop_sleep(struct ds__svc *s, long ns)
{
	struct pollfd pf[2] = {{s->wake_main, POLLIN, 0}, {ds__pw_fd(s), POLLIN, 0}};
	struct timespec ts = {ns / 1000000000L, ns % 1000000000L};
	if (ppoll(pf, ds__pw_on(s) ? 2 : 1, &ts, NULL) > 0) {
		if (pf[0].revents)
			ds__drain(s->wake_main);
		if (pf[1].revents)
			ds__pw_take(s);
	}
}

/* Returns 0 when every rank agreed to stop, 1 when some rank failed, and
 * -1 when the peers did not answer in time or MPI failed under the
 * agreement (the caller aborts: no collective can be trusted then). */
static int run_loop(struct ds__svc *s)
{
	struct loop l;
	memset(&l, 0, sizeof(l));
	l.targets = ds_xcalloc(s->nnodes, 1);
	l.last_read = -1e9;
	l.peers_busy = 1;
	int result = 0;
	for (;;) {
		beat();
		double now = ds_now();
		loop_check_stop(s, &l, now);
		if (loop_agree(s, &l, now, &result))
			break;
		ds__gather_poll(s);
		ds_out_poll(s->out);
		/* the work */
		if (s->err) {
			ds__progress(s); /* keep answering the peers until they know */
			continue;
		}
		if (batch(s, l.targets, &l.last_read))
			continue;
		if (ds_out_inflight(s->out)) {
			/* a change of the outputs is on its way (a writer's close
			 * waits for it): poll until it is through */
			sched_yield();
			ds__progress(s);
			continue;
		}
		long ns = loop_idle_ns(s, &l, now);
		if (!ns) {
			sched_yield();
			ds__progress(s);
			continue;
		}
		loop_sleep(s, ns);
		ds__progress(s);
	}
	if (l.a.inflight && result >= 0) {
		/* cannot happen (we only leave on a completed agreement), but never
		 * leave a request behind */
		MPI_Wait(&l.a.req, MPI_STATUS_IGNORE);
	}
	ds__gather_end(s, result >= 0);
	free(l.targets);
	return result;
}

/* ---- the step ----------------------------------------------------------- */
static void svc_release(struct ds__svc *s)
{
	if (s->wake_main >= 0)
		close(s->wake_main);
	if (s->wake_sock >= 0)
		close(s->wake_sock);
	pthread_mutex_destroy(&s->mu);
	ds__failover_free(s);
	free(s->jobdir);
	free(s->nodedir);
}

/* Where a start's seconds go (issue 27: millions of samples). */
struct serve_times {
	double start, store, plan, check_wait;
	int threaded_check;
};

/* Join: this rank's node (one rank per node), the service's communicator
 * and (--nodes) the staged node it serves.  Nonzero when the step fails
 * (every rank agrees; said). */
static int serve_join(MPI_Comm world, struct ds__svc *s, const struct ds_serve_opts *o, int rank)
{
	struct ds_node nd;
	int rc = 0;
	if (ds_node_identify(world, o->node_per_rank, &nd))
		return 1;
	if (nd.local_size > 1)
		rc = -EINVAL;
	if (ds_any_failed(world, rc)) {
		if (rank == 0)
			ds_error("the service runs one rank per node, node %u has %d: launch with "
			         "--ntasks-per-node=1 (Slurm) or --node-per-rank (simulated nodes)",
			         nd.node, nd.local_size);
		ds_node_release(&nd);
		return 1;
	}
	MPI_Comm_dup(nd.leaders, &s->comm);
	MPI_Comm_set_errhandler(s->comm, MPI_ERRORS_RETURN);
	/* how many services share this host's cores (window.c) */
	MPI_Comm host;
	s->host_ranks = 1;
	if (MPI_Comm_split_type(s->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) ==
	    MPI_SUCCESS) {
		MPI_Comm_size(host, &s->host_ranks);
		MPI_Comm_free(&host);
	}
	s->node = nd.node;
	s->nnodes = nd.nnodes;
	ds_node_release(&nd);
	/* --nodes: rank r serves the r-th surviving staged node */
	return ds_any_failed(s->comm, ds__failover_setup(s, s->node));
}

/* Start (under the lock): the store, the epoch configuration, the first
 * epochs' plans, the window, the outputs and the readers' socket.
 * Nonzero when the step fails (every node agrees; said). */
static int serve_start(struct ds__svc *s, const struct ds_serve_opts *o, int rank,
                       struct serve_times *t)
{
	int rc = 0;
	/* ours now: say so before the start's long steps (the index check, the
	 * first epoch's share and cache, the window: seconds at millions of
	 * files), so that `dstage status` says "starting", not "down" */
	ds__status_write(s, "starting");
	s->wake_main = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	s->wake_sock = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (s->wake_main < 0 || s->wake_sock < 0)
		rc = -errno;
	t->start = ds_now();
	if (!rc) {
		ds__failover_prior(s);
		rc = ds__store_open(s);
	}
	t->store = ds_now();
	t->threaded_check = s->ixcheck_on;
	if (!rc) {
		/* every node writes the epoch configuration on its own file system:
		 * the shim of every node must compute the lists we compute */
		char stop[PATH_MAX];
		snprintf(stop, sizeof(stop), "%s/" STOP_NAME, s->jobdir);
		unlink(stop); /* from an earlier service of this job */
		rc = ds_epoch_cfg_save(s->jobdir, &o->cfg);
		if (rc)
			ds_error("node %u: '%s/epoch.conf': %s", s->node, s->jobdir, ds_strerror(rc));
	}
	int failed = ds_any_failed(s->comm, rc);
	if (!failed) /* JOBDIR/nodes: the set each epoch is dealt over */
		failed = ds_any_failed(s->comm, ds__failover_start(s));
	double t_plan0 = ds_now();
	if (!failed)
		failed = ds_any_failed(s->comm, ds__exchange_new(s));
	t->plan = ds_now() - t_plan0;
	if (!failed) {
		rc = ds__window_create(s);
		if (!rc)
			rc = ds_fault("serve.window", (int)s->node);
		failed = ds_any_failed(s->comm, rc);
	}
	/* the index's full check ran beside the plan and the window (window.c):
	 * its verdict before anything else reads the index (the outputs, the
	 * readers' socket) */
	t_plan0 = ds_now();
	if (!failed)
		failed = ds_any_failed(s->comm, ds__store_checked(s));
	t->check_wait = ds_now() - t_plan0;
	if (!failed)
		ds__pw_start(s);
	if (!failed && o->out.outputs &&
	    ds_index_lookup(&s->ix, o->out.outputs, strlen(o->out.outputs)) >= 0) {
		if (rank == 0)
			ds_error("--outputs '%s': the dataset has an entry of that name",
			         o->out.outputs);
		failed = 1;
	}
	/* the outputs (osock, out.conf) before the readers' socket: a job
	 * takes NODEDIR/sock as "the service is ready", writes included */
	if (!failed)
		failed = ds_any_failed(s->comm, ds__out_start(s));
	if (!failed)
		failed = ds_any_failed(s->comm, ds__sock_start(s));
	return failed;
}

/* Stop what serve_start started, in the reverse order; a failed start
 * (partly started) or a service leaving. */
static void serve_stop(struct ds__svc *s)
{
	ds__sock_stop(s);
	ds__pw_stop(s);
	beat();
	ds__window_free(s);
	ds__exchange_free(s);
	ds__store_close(s);
}

/* Serve: signals, the watchdog, then the main loop until every node agrees
 * to stop (0) or one failed (1).  A peer gone (run_loop < 0) ends the job
 * step here. */
static int serve_run(MPI_Comm world, struct ds__svc *s, const struct ds_serve_opts *o, int rank,
                     const struct serve_times *t, int locked)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	watch_arm(s);
	/* short sleeps must be short: the default 50 us timer slack would
	 * more than triple BUSY_POLL_NS */
	prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

	ds__gather_start(s);
	ds__status_write(s, "running");
	ds_debug("node %u: serving %.3f s after the start: the store and its index %.3f s, the "
	         "first epoch's plan %.3f s; the index's full check %.3f s %s (%.3f s waited "
	         "for)",
	         s->node, ds_now() - t->start, t->store - t->start, t->plan, s->ixcheck_s,
	         t->threaded_check ? "beside the plan and the window" : "in the store's time",
	         t->check_wait);
	if (rank == 0) {
		ds_info("serving %u node(s) under '%s': seed %llu, locality %g, %s; stop with "
		        "'dstage stop --to %s%s%s'",
		        s->nnodes, s->jobdir, (unsigned long long)o->cfg.seed, o->cfg.locality,
		        o->cfg.drop_last ? "drop-last" : "padded shares", o->to, o->job ? " --job " : "",
		        o->job ? o->job : "");
	}
	int res = run_loop(s);
	/* a clean that comes now waits for us instead of refusing */
	if (locked)
		ds_joblock_note(s->jobdir, "(leaving)");
	if (res < 0) {
		/* a peer is gone: no collective can complete; end the job step */
		watch_leaving();
		ds_fault("serve.leaving", (int)s->node); /* tests: a leave that blocks (t/9008) */
		ds__sock_stop(s);
		ds__status_write(s, "failed");
		ds__exchange_free(s);
		MPI_Abort(world, 1);
		_exit(1);
	}
	return res;
}

/* The outputs' stop when leaving: it joins their threads (a copy or a sum
 * ends at its next chunk, docs/outputs.md), no MPI call, which is all the
 * watchdog watches: disarmed meanwhile, a long stop said.  Then every node
 * waits for the others' stops in an agreement that feeds the watchdog, not
 * in the next collective, where a stop longer than --timeout on one node
 * had the others' watchdogs end the job as "a node is gone" (outputs.status
 * not saved).  Bounded: --drain-timeout + --timeout.  The step's result. */
static int outputs_leave(struct ds__svc *s, int res)
{
	watch_disarm();
	double t0 = ds_now();
	if (ds_out_stop(s->out) && !res)
		res = 1; /* outputs closed and not drained: said, and the step fails */
	if (ds_now() - t0 > s->o.watchdog)
		ds_warn("node %u: the outputs took %.0f s to stop", s->node, ds_now() - t0);
	beat();
	struct ds_agree a;
	double limit = s->o.out.drain_timeout + s->o.watchdog;
	struct timespec ts = {0, 1000000L};
	a.mine[0] = 0;
	int rc = ds_agree_start(&a, s->comm, 1);
	while (!rc && !(rc = ds_agree_test(&a, limit))) {
		beat();
		nanosleep(&ts, NULL);
	}
	if (rc == -ETIMEDOUT) {
		ds_error(
			"node %u: the other nodes' outputs have not stopped in %.0f s: a node is gone "
			"or hung; leaving",
			s->node, limit);
		unlink(wd.sock);
		_exit(1);
	}
	if (rc < 0) {
		mpi_failed(s, "MPI_Iallreduce (the outputs' stop)", a.mpierr);
		res = 1;
	}
	return res;
}

/* Leave: every rank is here, in the same iteration of the loop.  Stop,
 * remove the node store with --clean, and leave together.  The step's
 * result (res, or 1 when leaving failed). */
static int serve_leave(struct ds__svc *s, const struct ds_serve_opts *o, int locked, int res)
{
	if (s->out)
		res = outputs_leave(s, res);
	ds__out_free(s);
	ds__status_write(s, res ? "failed" : "stopped");
	serve_stop(s);
	if (o->clean) {
		/* the spill tier first: the index names it */
		int rc = ds_store_spill_remove(s->nodedir);
		if (rc)
			ds_error("node %u: '%s': the spill tier: %s", s->node, s->nodedir,
			         ds_strerror(rc));
		rc = ds_rm_rf(s->nodedir);
		if (rc)
			ds_error("node %u: '%s': %s", s->node, s->nodedir, ds_strerror(rc));
	}
	beat();
	int brc = MPI_Barrier(s->comm);
	if (brc != MPI_SUCCESS) {
		mpi_failed(s, "MPI_Barrier (leaving)", brc);
		res = 1;
	}
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/" STOP_NAME, s->jobdir);
	unlink(p);
	if (o->clean) {
		ds_store_path(p, sizeof(p), s->jobdir, DS_EPOCH_CONF_NAME);
		unlink(p);
		/* when empty (but for the lock): other nodes' stores stay */
		if (locked)
			(void)ds_joblock_remove_dir(s->jobdir, 0);
	}
	return res;
}

/* The service step: join, lock, start, serve, leave; one cleanup path. */
int ds_serve_step(MPI_Comm world, const struct ds_serve_opts *o)
{
	struct ds__svc S, *s = &S;
	memset(s, 0, sizeof(*s));
	s->o = *o;
	s->comm = MPI_COMM_NULL;
	s->win = MPI_WIN_NULL;
	s->wake_main = s->wake_sock = -1;
	s->todo_tail = &s->todo;
	pthread_mutex_init(&s->mu, NULL);
	int rank, locked = 0, res = 1;
	MPI_Comm_rank(world, &rank);
	const char *job = o->job && *o->job ? o->job : ds_store_default_job();
	struct serve_times t = {0, 0, 0, 0, 0};

	if (serve_join(world, s, o, rank))
		goto out;
	s->jobdir = ds_store_jobdir(o->to, job);
	s->nodedir = ds_store_nodedir(o->to, job, s->node);
	/* One owner per job directory: a second service would rewrite
	 * epoch.conf under running readers, drop the live epoch caches and take
	 * the socket; a stage or clean would pull the store away.  Refused,
	 * naming the holder, before anything here is touched. */
	if (ds_step_lock(world, o->to, job, "serve", 0, &locked))
		goto out;
	if (serve_start(s, o, rank, &t)) {
		ds__status_write(s, "failed");
		ds_out_stop(s->out);
		ds__out_free(s);
		serve_stop(s);
		goto out;
	}
	res = serve_leave(s, o, locked, serve_run(world, s, o, rank, &t, locked));
out:
	ds_step_unlock(o->to, job, locked);
	if (rank == 0 && !res)
		ds_info("stopped: every node left%s", o->clean ? ", node stores removed" : "");
	if (s->comm != MPI_COMM_NULL)
		MPI_Comm_free(&s->comm);
	/* the watchdog keeps watching MPI_Finalize in the caller */
	beat();
	svc_release(s);
	return res ? 1 : 0;
}

void ds_serve_env(void)
{
	/* UCX on one host emulates RMA with active messages through a FIFO of
	 * 64 cells per process by default; the replies to a batch of gets fill
	 * it and stall on flow control.  1024 cells (8 MiB of shared memory)
	 * measured 1.3-4x the get bandwidth here.  Shared-memory transport
	 * only; a value the user set wins. */
	setenv("UCX_MM_FIFO_SIZE", "1024", 0);
}

void ds_serve_finalize(void)
{
	beat();
	MPI_Finalize();
	watch_disarm();
}

int ds_cmd_serve(int argc, char **argv)
{
	struct ds_serve_opts o;
	int rc = parse(argc, argv, &o);
	if (o.help) {
		fputs(serve_usage, stdout);
		return 0;
	}
	if (rc)
		return rc;
	ds_log_init(o.quiet > 0 ? -1 : o.quiet < 0 ? 1 : 0);
	ds_serve_env();
	if (ds_mpi_init(&argc, &argv)) /* the thread level: cli/main.c's table */
		return 1;
	rc = ds_serve_step(MPI_COMM_WORLD, &o);
	ds_serve_finalize();
	return rc;
}
