/* SPDX-License-Identifier: BSD-3-Clause */
/* exchange.c: the epoch shuffle on the service side (docs/design.md section 4).
 *
 * For every epoch e the node's share is ds_epoch_share(ix, cfg, e, node),
 * the same pure function the readers' lists come from.  The samples of the
 * share that are not in this node's store are fetched with MPI_Get into
 * the epoch cache of e (common/cache.c) while the readers are still in
 * e - 1: by the time they open e's list, every sample is local (store) or
 * cached.  They are fetched in the order they lie in their holders' stores
 * (prep_main): a run of samples adjacent there is one block, and, where
 * gets need their target's progress (MPICH), one get fetches up to
 * GET_BLOCKS small blocks of one holder (an MPI_Get of hindexed types,
 * window.c), a large run alone: at n nodes a run averages
 * n/(n-1) samples, so one get per run was still about one per sample at 64
 * nodes (DSTAGE_SERVE_GET_BLOCKS=1 gives that back, DSTAGE_SERVE_COALESCE=0
 * one get per sample in read order).
 *
 * Following the readers: they announce the epoch they start (DS_OP_EPOCH,
 * from the shim when a list is opened).  With readers in R, the service
 * keeps the caches of R (being read) and R + 1 (being fetched) and
 * releases older ones: at most two epochs of remote share live at a time.
 * With --shuffle-buffer too small for two, R + 1 is fetched only once R's
 * cache is gone (readers then race the prefetch: stalls, not errors); too
 * small for one, serve refuses to start.
 *
 * The RAM budget (common/dsmem.h, docs/guide.md "The RAM budget"): on
 * tmpfs the cache is the job's memory, charged to its memory cgroup like
 * the store.  Before an epoch's cache file is made, its bytes must fit the
 * room under every cgroup limit less the headroom; if they do not, the
 * prefetch waits for the readers to release an older epoch (said once), or,
 * with nothing of ours left to release, shrinks to the samples read first
 * that fit, or is skipped if none does (the rest is read remotely): a
 * prefetch never OOMs the job.
 *
 * Per epoch it reports what locality costs and buys: the local fraction
 * of the share, the bytes moved, and how much of the share the node also
 * read the epoch before (a measure of how random the assignment is), each
 * next to what a global shuffle (L = 0) would give.
 *
 * Planning an epoch (its share: a permutation of every sample of the job,
 * then what of it to fetch) is O(samples of the job): ~0.5 s at 14M samples.
 * Main must not spend that: it answers the peers' gets and takes part in
 * the agreement every AGREE_PERIOD, and a node silent for --timeout is
 * taken as gone.  So after the first epoch (planned at start, before the
 * service serves: its need is what --shuffle-buffer and the free space are
 * checked against, for it and the one after) every plan is made by the
 * planner thread, epoch 1's as soon as the service serves;
 * main asks for an epoch and takes the plan when it is done (woken through
 * wake_main).  The planner keeps the presence bitset of the share it
 * planned last, so an epoch's overlap with the one before costs a bit test
 * per sample, not a second permutation. */
#include "svc.h"
#include "dsmpi.h"
#include "dsnodeset.h"

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds of the calling thread (the profile of a fetch) */
static double thread_cpu(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* PLANNING: the planner thread computes it (nothing else of it is ready);
 * PLANNED: share computed; PREPARING: a helper thread creates the cache
 * file (posix_fallocate + populate: tens of ms per 100 MiB that main spends
 * answering the peers' gets instead); FETCHING: gets in flight; DONE. */
enum xstate { X_PLANNING, X_PLANNED, X_PREPARING, X_FETCHING, X_DONE };

struct xep {
	uint64_t epoch;
	enum xstate st;
	/* the plan: remote samples in fetch (= read) order, repeats removed */
	uint32_t *ids;
	uint64_t *lens;
	size_t n;
	uint64_t need; /* bytes its cache takes */
	struct ds_cache_epoch *ce;
	int *tgt;      /* per cache slot: the node fetched from */
	MPI_Aint *disp;
	/* the blocks: run r fills the slots rs[r] .. rs[r + 1] - 1 (adjacent
	 * in the holder's store and in the cache), rbytes[r] bytes; the gets:
	 * get g fetches the runs gr[g] .. gr[g + 1] - 1 (one holder's), gbytes[g]
	 * bytes, as one MPI_Get (one run: contiguous; more: hindexed types) */
	size_t *rs;
	uint64_t *rbytes;
	size_t nruns;
	size_t *gr;
	uint64_t *gbytes;
	size_t ngets;
	/* next, inflight_from: gets; done, failed: slots */
	size_t next, done, failed, inflight_from;
	size_t gets; /* MPI gets made (atomic: main and the copier add) */
	uint64_t bytes, bytes_done;
	double t0, t1;
	size_t batches;
	double flush_s; /* time completing the gets (ds__flush) */
	/* the profile of the fetch (DSTAGE_LOG=debug): wall time in the get
	 * calls (with a single-copy transport the copy itself), main's CPU
	 * time from t0 to t1, and the helper thread's time before t0 */
	double issue_s, cpu0, cpu_s, prep_s;
	struct ds__svc *svc;
	pthread_t prep;
	int prep_rc, prep_done; /* prep_done: atomic */
	pthread_t verify;
	int verifying, vstop, vdone; /* vstop, vdone: atomic */
	/* the share, until it is published for the readers (ds__share_publish) */
	uint32_t *share;
	/* the figures */
	size_t share_n, local_n;
	uint64_t share_bytes, local_bytes;
	double overlap; /* fraction of the share also in this node's e-1 share */
	int reported;
	/* the planner: queue link, result, done flag (release/acquire), and
	 * cancel (main no longer wants it: the planner may skip it) */
	struct xep *qnext;
	int plan_rc, planned, cancel;
	double plan_s; /* seconds the plan took */
};

/* epochs kept at once; each may be published in the cache's ctl */
#define MAX_EP DS_CACHE_MAX_LIVE
#define HISTORY 16

/* The planner thread and what it keeps between plans. */
struct planner {
	pthread_t t;
	int running;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct xep *head, **tail; /* plans asked for, in order */
	int stop;
	/* the planner's own (main's before the thread starts) */
	uint64_t *last_bits; /* presence of the share of epoch last_e */
	uint64_t last_e;
	int have_last;
	size_t nwords;  /* of a bitset over the entries */
	uint8_t *pflag; /* per partition: P_HERE, P_REACH (constant in a step) */
};
#define P_HERE 1u  /* held in this node's store */
#define P_REACH 2u /* some living node (this one included) holds it */

struct ds__exchange {
	struct ds_cache_svc *cache;
	struct xep *ep[MAX_EP];
	int nep;
	struct xep *zombies; /* given up while planned: freed once the planner is done */
	struct planner pl;
	uint64_t followed;     /* the reader epoch acted upon */
	int started;
	struct xep *inflight;  /* the epoch of the gets of the last issue */
	double exp_local;      /* L = 0: fraction of the samples held here */
	double exp_overlap;    /* L = 0: share / samples */
	struct xep hist[HISTORY]; /* figures of finished epochs, for status */
	int nhist;
	int hold; /* atomic: this node fetches or a peer fetches from it */
	/* the RAM budget of the cache directory */
	struct ds_headroom headroom;
	int budget_ram;       /* the node directory is on RAM: check before each epoch */
	double budget_t;      /* when room was last read while waiting */
	int budget_said;      /* the wait has been explained */
	/* the second copier (copier_main): 0 until the first batch decides */
	int nthreads;
	struct copier {
		pthread_t th;
		pthread_mutex_t mu;
		pthread_cond_t cv;
		int started, quit;
		struct xep *x;      /* the job: x's slots from cursor to end, shared with main */
		size_t cursor, end; /* cursor: atomic */
		int posted, busy, rc;
		double cpu; /* its CPU seconds for the job */
	} cp;
	int batch_failed; /* a get of main's half failed to start */
};

static void xep_free(struct ds__svc *s, struct xep *x)
{
	if (!x)
		return;
	if (x->st == X_PREPARING)
		pthread_join(x->prep, NULL);
	if (x->verifying) {
		__atomic_store_n(&x->vstop, 1, __ATOMIC_RELAXED);
		pthread_join(x->verify, NULL);
	}
	if (x->ce)
		ds_cache_epoch_free(s->x->cache, x->ce);
	free(x->share);
	free(x->ids);
	free(x->lens);
	free(x->tgt);
	free(x->disp);
	free(x->rs);
	free(x->rbytes);
	free(x->gr);
	free(x->gbytes);
	free(x);
}

/* The readers' lists of x's epoch cost their own part: the share for them
 * (NODEDIR/epochs/share.<e>), then freed. */
static void share_publish(struct ds__svc *s, struct xep *x)
{
	if (!x->share)
		return;
	ds__share_publish(s, x->epoch, x->share, x->share_n);
	free(x->share);
	x->share = NULL;
}

static inline int bit_test_set(uint64_t *b, uint32_t i)
{
	uint64_t m = 1ull << (i & 63), *w = &b[i >> 6];
	int was = (*w & m) != 0;
	*w |= m;
	return was;
}

static inline int bit_test(const uint64_t *b, uint32_t i) { return (b[i >> 6] >> (i & 63)) & 1; }

/* This node's share of epoch e as a presence bitset over the entries. */
static int share_bits(struct ds__svc *s, uint64_t e, uint64_t *bits, size_t nwords)
{
	uint32_t *ids;
	size_t n;
	int rc = ds__share(s, e, &ids, &n); /* over the epoch's node set */
	if (rc)
		return rc;
	memset(bits, 0, nwords * sizeof(uint64_t));
	for (size_t i = 0; i < n; i++)
		bit_test_set(bits, ids[i]);
	free(ids);
	return 0;
}

/* Cut an array of n elements down to its size (kept as it is if that fails). */
static void shrink(void **a, size_t n, size_t size)
{
	void *p = realloc(*a, (n + 1) * size);
	if (p)
		*a = p;
}

/* How far ahead the plan's walk over the share prefetches the entries:
 * the share is in random order over an index of up to GBs, each entry a
 * cache (and TLB) miss; a few dozen in flight hide most of them. */
#define PLAN_AHEAD 24

/* Compute x->epoch's share, what of it must be fetched, and the figures
 * (x->epoch set; everything else of x zero).  Any thread: it reads the
 * index, the node sets and the per-partition flags, all constant during the
 * step, and the planner state pl, which only one thread uses at a time
 * (main before the planner thread starts, the planner thread after). */
static int plan_compute(struct ds__svc *s, struct planner *pl, struct xep *x)
{
	double t0 = ds_now();
	uint64_t e = x->epoch;
	uint32_t *ids;
	size_t n;
	int rc = ds__share(s, e, &ids, &n); /* over the epoch's node set */
	if (rc)
		return rc;
	uint64_t *bits = calloc(pl->nwords, sizeof(uint64_t)), *prev = NULL;
	x->ids = malloc((n + 1) * sizeof(uint32_t));
	x->lens = malloc((n + 1) * sizeof(uint64_t));
	x->tgt = malloc((n + 1) * sizeof(int));
	x->disp = malloc((n + 1) * sizeof(MPI_Aint));
	if (!bits || !x->ids || !x->lens || !x->tgt || !x->disp) {
		rc = -ENOMEM;
		goto out;
	}
	if (e > 0) {
		if (pl->have_last && pl->last_e == e - 1) {
			prev = pl->last_bits; /* the usual case: readers move one on */
		} else {
			/* a jump (or the first plan after a restart at epoch e):
			 * the share before, for the overlap figure alone */
			prev = malloc(pl->nwords * sizeof(uint64_t));
			if (!prev) {
				rc = -ENOMEM;
				goto out;
			}
			if ((rc = share_bits(s, e - 1, prev, pl->nwords))) {
				free(prev);
				prev = NULL;
				goto out;
			}
			free(pl->last_bits);
			pl->last_bits = prev;
			pl->last_e = e - 1;
			pl->have_last = 1;
		}
	}
	const struct ds_index *ix = &s->ix;
	const uint8_t *pflag = pl->pflag;
	uint32_t np = s->ix.h->nparts;
	size_t again = 0;
	for (size_t i = 0; i < n; i++) {
		if (i + PLAN_AHEAD < n)
			ds_ix_prefetch(ix, ids[i + PLAN_AHEAD]);
		uint32_t id = ids[i];
		uint32_t part = ds_ix_part(ix, id);
		uint64_t stored = ds_ix_stored(ix, id);
		uint8_t f = part < np ? pflag[part] : 0;
		int repeat = bit_test_set(bits, id); /* padding may repeat a sample */
		x->share_n++;
		x->share_bytes += stored;
		if (prev)
			again += bit_test(prev, id);
		if (f & P_HERE) {
			x->local_n++;
			x->local_bytes += stored;
		} else if (!repeat && (f & P_REACH)) { /* lost: the read says so */
			/* where it comes from, now that its entry is in the cache
			 * (prep_main sorts by it; -1: asked again there) */
			x->tgt[x->n] = ds__holder(s, id, &x->disp[x->n]);
			x->ids[x->n] = id;
			x->lens[x->n++] = stored;
		}
	}
	/* the plan keeps the remote samples only: give the rest back */
	shrink((void **)&x->ids, x->n, sizeof(*x->ids));
	shrink((void **)&x->lens, x->n, sizeof(*x->lens));
	shrink((void **)&x->tgt, x->n, sizeof(*x->tgt));
	shrink((void **)&x->disp, x->n, sizeof(*x->disp));
	x->overlap = prev && n ? (double)again / n : -1;
	x->need = ds_cache_epoch_need(x->lens, x->n);
	for (size_t i = 0; i < x->n; i++)
		x->bytes += x->lens[i];
	x->share = ids; /* published once the cache directory is there */
	ids = NULL;
	if (pl->last_bits != bits)
		free(pl->last_bits);
	pl->last_bits = bits; /* the next epoch's overlap is counted against it */
	pl->last_e = e;
	pl->have_last = 1;
	bits = NULL;
	x->plan_s = ds_now() - t0;
out:
	free(ids);
	free(bits);
	return rc;
}

/* The planner thread: plans the epochs main asks for, in order, publishes
 * each share for the readers, and wakes main. */
static void *planner_main(void *arg)
{
	struct ds__svc *s = arg;
	struct planner *pl = &s->x->pl;
	pthread_mutex_lock(&pl->mu);
	for (;;) {
		while (!pl->head && !pl->stop)
			pthread_cond_wait(&pl->cv, &pl->mu);
		if (pl->stop)
			break;
		struct xep *x = pl->head;
		pl->head = x->qnext;
		if (!pl->head)
			pl->tail = &pl->head;
		pthread_mutex_unlock(&pl->mu);
		int rc = 0;
		if (!__atomic_load_n(&x->cancel, __ATOMIC_RELAXED)) {
			rc = plan_compute(s, pl, x);
			if (!rc)
				share_publish(s, x);
		}
		x->plan_rc = rc;
		__atomic_store_n(&x->planned, 1, __ATOMIC_RELEASE);
		ds__wake(s->wake_main);
		pthread_mutex_lock(&pl->mu);
	}
	pthread_mutex_unlock(&pl->mu);
	return NULL;
}

static int planner_start(struct ds__svc *s)
{
	struct planner *pl = &s->x->pl;
	sigset_t all, prev;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	int rc = -pthread_create(&pl->t, NULL, planner_main, s);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (rc) {
		ds_error("node %u: the epoch planner thread: %s", s->node, strerror(-rc));
		return rc;
	}
	pl->running = 1;
	return 0;
}

static void planner_stop(struct ds__svc *s)
{
	struct planner *pl = &s->x->pl;
	if (!pl->running)
		return;
	pthread_mutex_lock(&pl->mu);
	pl->stop = 1;
	pthread_cond_signal(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
	pthread_join(pl->t, NULL); /* after the plan it is in, if any */
	pl->running = 0;
}

/* Ask the planner for epoch e: a PLANNING xep, which main may not touch
 * but for its epoch until it is planned (take_plans). */
static int plan_ask(struct ds__svc *s, uint64_t e, struct xep **out)
{
	struct planner *pl = &s->x->pl;
	struct xep *x = calloc(1, sizeof(*x));
	*out = x;
	if (!x)
		return -ENOMEM;
	x->epoch = e;
	x->st = X_PLANNING;
	pthread_mutex_lock(&pl->mu);
	*pl->tail = x;
	pl->tail = &x->qnext;
	pthread_cond_signal(&pl->cv);
	pthread_mutex_unlock(&pl->mu);
	return 0;
}

/* Compute epoch e's plan here and now (at start, before the planner runs). */
static int plan(struct ds__svc *s, uint64_t e, struct xep **out)
{
	*out = NULL;
	struct xep *x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->epoch = e;
	int rc = plan_compute(s, &s->x->pl, x);
	if (rc) {
		xep_free(s, x);
		return rc;
	}
	x->st = X_PLANNED;
	x->planned = 1;
	*out = x;
	return 0;
}

int ds__exchange_new(struct ds__svc *s)
{
	struct ds__exchange *X = calloc(1, sizeof(*X));
	if (!X)
		return -ENOMEM;
	s->x = X;
	struct planner *pl = &X->pl;
	pthread_mutex_init(&pl->mu, NULL);
	pthread_cond_init(&pl->cv, NULL);
	pl->tail = &pl->head;
	/* what the plans ask of a sample's partition, once per partition */
	uint32_t np = s->ix.h->nparts;
	pl->nwords = ((size_t)s->ix.h->nentries + 63) / 64 + 1;
	pl->pflag = malloc((size_t)np + 1);
	if (!pl->pflag)
		return -ENOMEM;
	for (uint32_t p = 0; p < np; p++)
		pl->pflag[p] = (ds_index_part_on(&s->ix, p, s->node, NULL) ? P_HERE : 0) |
		               (ds__part_reachable(s, p) ? P_REACH : 0);
	/* L = 0 expectations: a sample of the share is held here with the
	 * probability a random sample is; it was in the node's previous share
	 * with probability share / samples */
	uint32_t ns = s->ix.h->nsamples;
	size_t held = 0;
	for (uint32_t j = 0; j < ns; j++) {
		uint32_t p = ds_ix_part(&s->ix, ds_ix_sample(&s->ix, j));
		held += p < np && (pl->pflag[p] & P_HERE);
	}
	X->exp_local = ns ? (double)held / ns : 1;
	size_t sh = ds_epoch_share_size(ns, s->nnodes, s->o.cfg.drop_last);
	X->exp_overlap = ns ? (double)sh / ns : 0;
	if (X->exp_overlap > 1)
		X->exp_overlap = 1;

	/* epoch 0, planned now: its need is what we check (every epoch's share
	 * is the same size and its remote part within a few percent: epoch 0
	 * stands for the ones after, which the planner thread plans once the
	 * service serves; one that outgrows the buffer is said then, current()) */
	struct xep *a = NULL;
	int rc = plan(s, 0, &a);
	if (rc) {
		ds_error("node %u: planning the first epoch: %s", s->node, ds_strerror(rc));
		return rc;
	}
	X->ep[X->nep++] = a;
	char n1[32], n2[32], n3[32];
	uint64_t one = a->need, two = 2 * a->need;
	uint64_t buf = s->o.shuffle_buffer;
	if (buf && one > buf) {
		ds_error(
			"node %u: --shuffle-buffer %s cannot hold one epoch's remote share (%s for "
			"epoch 0): give at least %s, or raise --locality",
			s->node, ds_fmt_size(buf, n1, sizeof(n1)), ds_fmt_size(one, n2, sizeof(n2)),
			ds_fmt_size(one, n3, sizeof(n3)));
		return -ENOSPC;
	}
	if (buf && two > buf)
		ds_warn("node %u: --shuffle-buffer %s holds one epoch's remote share but not two (%s): "
		        "epoch e+1 is fetched only when readers start it, so they will wait for it",
		        s->node, ds_fmt_size(buf, n1, sizeof(n1)), ds_fmt_size(two, n2, sizeof(n2)));
	/* the cache lives beside the store: is there room for it?  Free space
	 * is a hard limit; on RAM, the memory budget only holds the prefetch
	 * back (current()), the readers still work through remote reads */
	uint64_t want = buf && buf < two ? buf : two;
	if (s->o.headroom_set)
		X->headroom = s->o.headroom;
	else
		ds_headroom_default(&X->headroom, 1);
	struct ds_room room;
	if (!ds_ram_room(s->nodedir, &X->headroom, &room)) {
		if (want > room.free) {
			ds_error("node %u: the epoch cache needs %s (two epochs' remote share), '%s' has %s free",
			         s->node, ds_fmt_size(want, n1, sizeof(n1)), s->nodedir,
			         ds_fmt_size(room.free, n2, sizeof(n2)));
			return -ENOSPC;
		}
		X->budget_ram = room.is_ram;
		if (room.is_ram && want > room.room) {
			char d[320];
			ds_warn("node %u: the epoch cache (two epochs' remote share: %s) does not fit the RAM "
			        "budget (room %s: %s): epochs are prefetched as the room allows, the rest "
			        "read remotely",
			        s->node, ds_fmt_size(want, n1, sizeof(n1)), ds_fmt_size(room.room, n2, sizeof(n2)),
			        ds_room_describe(&room, d, sizeof(d)));
		}
	}
	ds_info("node %u: epoch cache: %s for epoch 0 (share %zu samples, %s)", s->node,
	        ds_fmt_size(a->need, n1, sizeof(n1)), a->share_n,
	        ds_fmt_size(a->share_bytes, n3, sizeof(n3)));
	rc = ds_cache_svc_new(s->nodedir, &X->cache);
	if (rc) {
		ds_error("node %u: '%s/epochs': %s", s->node, s->nodedir, ds_strerror(rc));
		return rc;
	}
	share_publish(s, a);
	ds_debug("node %u: epoch 0 planned in %.3f s", s->node, a->plan_s);
	/* epoch 1: asked of the planner by the main loop's first follow(),
	 * once the service serves (asked now, it only took the cores from the
	 * start's last steps on a busy node) */
	return planner_start(s);
}

void ds__exchange_free(struct ds__svc *s)
{
	struct ds__exchange *X = s->x;
	if (!X)
		return;
	planner_stop(s);
	/* what it was asked and did not plan is in ep[] or the zombies */
	if (X->cp.started) {
		pthread_mutex_lock(&X->cp.mu);
		X->cp.quit = 1;
		pthread_cond_broadcast(&X->cp.cv);
		pthread_mutex_unlock(&X->cp.mu);
		pthread_join(X->cp.th, NULL);
		pthread_mutex_destroy(&X->cp.mu);
		pthread_cond_destroy(&X->cp.cv);
	}
	for (int i = 0; i < X->nep; i++)
		xep_free(s, X->ep[i]);
	while (X->zombies) {
		struct xep *z = X->zombies;
		X->zombies = z->qnext;
		xep_free(s, z);
	}
	if (X->cache)
		ds_cache_svc_free(X->cache);
	free(X->pl.last_bits);
	free(X->pl.pflag);
	pthread_mutex_destroy(&X->pl.mu);
	pthread_cond_destroy(&X->pl.cv);
	free(X);
	s->x = NULL;
}

static uint64_t live_bytes(const struct ds__exchange *X)
{
	uint64_t b = 0;
	for (int i = 0; i < X->nep; i++)
		if (X->ep[i]->st != X_PLANNED && X->ep[i]->st != X_PLANNING)
			b += X->ep[i]->need;
	return b;
}

static struct xep *find_ep(struct ds__exchange *X, uint64_t e)
{
	for (int i = 0; i < X->nep; i++)
		if (X->ep[i]->epoch == e)
			return X->ep[i];
	return NULL;
}

/* Is a helper thread still in x (xep_free would wait for it)? */
static int zombie_busy(struct xep *x)
{
	return (x->st == X_PREPARING && !__atomic_load_n(&x->prep_done, __ATOMIC_ACQUIRE)) ||
	       (x->verifying && !__atomic_load_n(&x->vdone, __ATOMIC_ACQUIRE));
}

static void drop_ep(struct ds__svc *s, int i)
{
	struct ds__exchange *X = s->x;
	struct xep *x = X->ep[i];
	X->ep[i] = X->ep[--X->nep];
	if (X->inflight == x)
		X->inflight = NULL;
	if (x->st == X_PLANNING) {
		/* the planner may be in it: it is freed (and its share file
		 * removed) once the planner is done with it (take_plans) */
		__atomic_store_n(&x->cancel, 1, __ATOMIC_RELAXED);
		x->qnext = X->zombies;
		X->zombies = x;
		return;
	}
	ds_share_unlink(s->nodedir, x->epoch);
	if (zombie_busy(x)) {
		/* a helper is still in it (the cache being made: up to a second
		 * at 14M samples; the check of the fetched bytes, at SCHED_IDLE on
		 * a busy node): main does not wait for it (--timeout), it is
		 * freed once the helper is done (take_plans); the check is told to
		 * stop and given a normal priority to see it soon.  Its cache file,
		 * if any, lives until then beside the RAM budget's count (live_bytes
		 * counts ep[] only): one cache for about one helper's step */
		__atomic_store_n(&x->vstop, 1, __ATOMIC_RELAXED);
		if (x->verifying) {
			struct sched_param sp = {0};
			pthread_setschedparam(x->verify, SCHED_OTHER, &sp);
		}
		x->qnext = X->zombies;
		X->zombies = x;
		return;
	}
	xep_free(s, x);
}

/* Take the plans the planner finished: PLANNING -> PLANNED; free the ones
 * given up (and their share files, unless the epoch is wanted again).
 * 0, or the first plan's failure. */
static int take_plans(struct ds__svc *s)
{
	struct ds__exchange *X = s->x;
	int rc = 0;
	for (int i = 0; i < X->nep; i++) {
		struct xep *x = X->ep[i];
		if (x->st != X_PLANNING || !__atomic_load_n(&x->planned, __ATOMIC_ACQUIRE))
			continue;
		if (x->plan_rc) {
			ds_error("node %u: planning epoch %llu: %s", s->node,
			         (unsigned long long)x->epoch, ds_strerror(x->plan_rc));
			if (!rc)
				rc = x->plan_rc;
			continue;
		}
		x->st = X_PLANNED;
		ds_debug("node %u: epoch %llu planned in %.3f s: %zu of %zu samples to fetch (%s)",
		         s->node, (unsigned long long)x->epoch, x->plan_s, x->n, x->share_n,
		         x->overlap >= 0 ? "overlap counted" : "no epoch before");
	}
	for (struct xep **zp = &X->zombies; *zp;) {
		struct xep *z = *zp;
		if (!__atomic_load_n(&z->planned, __ATOMIC_ACQUIRE) || zombie_busy(z)) {
			zp = &z->qnext;
			continue;
		}
		*zp = z->qnext;
		if (!find_ep(X, z->epoch))
			ds_share_unlink(s->nodedir, z->epoch);
		xep_free(s, z);
	}
	return rc;
}

static void report(struct ds__svc *s, struct xep *x)
{
	struct ds__exchange *X = s->x;
	char a[32], b[32], c[32];
	double dt = x->t1 - x->t0;
	double lf = x->share_n ? (double)x->local_n / x->share_n : 1;
	char ov[96] = "";
	if (x->overlap >= 0)
		snprintf(ov, sizeof(ov), ", %.0f%% also read here in epoch %llu (%.0f%% at L=0)",
		         100 * x->overlap, (unsigned long long)x->epoch - 1, 100 * X->exp_overlap);
	ds_info("node %u: epoch %llu: %zu samples (%s), %.0f%% local (%.0f%% at L=0), fetched %zu "
	        "(%s in %.2f s, %s/s)%s%s",
	        s->node, (unsigned long long)x->epoch, x->share_n, ds_fmt_size(x->share_bytes, a, sizeof(a)),
	        100 * lf, 100 * X->exp_local, x->done, ds_fmt_size(x->bytes_done, b, sizeof(b)), dt,
	        ds_fmt_size(dt > 0 ? (uint64_t)(x->bytes_done / dt) : 0, c, sizeof(c)), ov,
	        x->failed ? " -- SOME FETCHES FAILED" : "");
	struct xep *h = &X->hist[X->nhist % HISTORY];
	*h = *x;
	h->ids = NULL;
	h->lens = NULL;
	h->tgt = NULL;
	h->disp = NULL;
	h->rs = NULL;
	h->rbytes = NULL;
	h->gr = NULL;
	h->gbytes = NULL;
	h->ce = NULL;
	X->nhist++;
	x->reported = 1;
	ds_debug("node %u: epoch %llu: planned in %.4f s, cache made in %.4f s; fetch %.4f s: %zu "
	         "gets for %zu samples in %zu batches, main %.4f s in the get calls, %.4f s "
	         "completing them, %.4f s else; CPU of the getting threads %.4f s",
	         s->node, (unsigned long long)x->epoch, x->plan_s, x->prep_s, dt, x->gets, x->done,
	         x->batches, x->issue_s, x->flush_s, dt - x->issue_s - x->flush_s, x->cpu_s);
}

/* DSTAGE_SERVE_COALESCE=0: fetch in read order, one get per sample
 * (measurements) */
static int coalesce_on(void)
{
	static int v = -1;
	return ds_env_switch("DSTAGE_SERVE_COALESCE", &v);
}

/* The largest run fetched as one get: a run's samples become READY
 * together, when its get completes */
#define RUN_MAX_BYTES (4u << 20)

/* Gets of many blocks (docs/mpi.md "Gets of many samples").  One get per
 * run cost MPICH's ch4:ucx 5.4-7 us per 72-byte sample on one host and 18
 * us over TCP, its completion the cost; one MPI_Get of 256-1024 such blocks
 * 0.12-0.4 us per sample (both), flushed as one.  The target packs a
 * non-contiguous get (active messages): from 2-4 KiB a block that copy
 * costs more than the get it saves (4 KiB blocks: 15 -> 18-24 us per sample
 * on one host), so only runs under GET_BLOCK_SMALL join others; Open MPI's
 * osc/rdma costs the same per block either way (~2.7 us, a CMA read each).
 * GET_BLOCKS blocks and GET_BLOCKS_BYTES bytes at most: a get's samples
 * become READY together.  In the service (2M samples of 48-96 B, 4
 * simulated nodes, an epoch's fetch, medians of 36): 64 blocks 0.59 s, 256
 * 0.44-0.52 s, 1024 0.22-0.44 s, 4096 0.41 s.  Where gets complete
 * without their target (s->onesided, window.c's probe: Open MPI's
 * osc/rdma), the requester copies every block itself inside MPI_Get, a
 * get of 1024 blocks held main there ~11 ms, a batch ~0.7 s, and an
 * epoch's fetch took 3.4 s instead of 2.2 s with a get per run (a 2 s
 * --timeout tripped once in 3 runs): there a get per run stays.
 * DSTAGE_SERVE_GET_BLOCKS=N (1..GET_BLOCKS_MAX; 1: one get per run) for
 * measurements and tests: it applies wherever it is set. */
#define GET_BLOCKS 1024
#define GET_BLOCKS_MAX 4096
#define GET_BLOCK_SMALL 2048u
#define GET_BLOCKS_BYTES (256u << 10)

static int get_blocks_max(const struct ds__svc *s)
{
	static int v = -1; /* 0: not set */
	int n = __atomic_load_n(&v, __ATOMIC_RELAXED);
	if (n < 0) {
		const char *e = getenv("DSTAGE_SERVE_GET_BLOCKS");
		char *end = NULL;
		long l = e && *e ? strtol(e, &end, 10) : 0;
		if (e && *e && (*end || l < 1 || l > GET_BLOCKS_MAX)) {
			ds_warn("DSTAGE_SERVE_GET_BLOCKS='%s': not 1..%d (ignored)", e, GET_BLOCKS_MAX);
			l = 0;
		}
		n = (int)l;
		__atomic_store_n(&v, n, __ATOMIC_RELAXED);
	}
	return n ? n : s->onesided ? 1 : GET_BLOCKS;
}

/* The blocks of one batch at most: a batch completes as one (its samples
 * READY together, a remote read waits behind it), and a block costs its
 * target a copy (MPICH) or a CMA read (Open MPI) whatever the get */
#define BATCH_BLOCKS 65536

/* The MPI library refused a get of many blocks (window.c, said once): one
 * get per run from then on, in this step */
static int blocks_refused;

/* Sort the plan's n samples (no repeats) by (holder, displacement there):
 * an LSD radix sort of a permutation, 16 bits a pass over the displacement
 * (as many passes as the largest needs), then one over the holder; the
 * plan's arrays are rewritten in that order.  0 or -ENOMEM. */
static int sort_by_holder(struct xep *x, uint32_t nnodes)
{
	size_t n = x->n;
	uint32_t *p = malloc((n + 1) * sizeof(*p)), *q = malloc((n + 1) * sizeof(*q));
	size_t *cnt = malloc(65536 * sizeof(size_t));
	int rc = -ENOMEM;
	if (!p || !q || !cnt)
		goto out;
	uint64_t top = 0;
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint32_t)i;
		if ((uint64_t)x->disp[i] > top)
			top = (uint64_t)x->disp[i];
	}
	for (int shift = 0; shift < 64 && (shift == 0 || top >> shift); shift += 16) {
		memset(cnt, 0, 65536 * sizeof(size_t));
		for (size_t i = 0; i < n; i++)
			cnt[((uint64_t)x->disp[p[i]] >> shift) & 0xffff]++;
		for (size_t d = 0, sum = 0; d < 65536; d++) {
			size_t c = cnt[d];
			cnt[d] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			q[cnt[((uint64_t)x->disp[p[i]] >> shift) & 0xffff]++] = p[i];
		uint32_t *t = p;
		p = q;
		q = t;
	}
	/* the holder: one counting pass (the caller keeps nodes <= 65536) */
	memset(cnt, 0, 65536 * sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		cnt[(uint32_t)x->tgt[p[i]] & 0xffff]++;
	for (size_t d = 0, sum = 0; d < nnodes; d++) {
		size_t c = cnt[d];
		cnt[d] = sum;
		sum += c;
	}
	for (size_t i = 0; i < n; i++)
		q[cnt[(uint32_t)x->tgt[p[i]] & 0xffff]++] = p[i];
	/* apply the permutation q to ids, lens, tgt, disp */
	uint32_t *ids = malloc((n + 1) * sizeof(*ids));
	uint64_t *lens = malloc((n + 1) * sizeof(*lens));
	int *tgt = malloc((n + 1) * sizeof(*tgt));
	MPI_Aint *disp = malloc((n + 1) * sizeof(*disp));
	if (!ids || !lens || !tgt || !disp) {
		free(ids);
		free(lens);
		free(tgt);
		free(disp);
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		ids[i] = x->ids[q[i]];
		lens[i] = x->lens[q[i]];
		tgt[i] = x->tgt[q[i]];
		disp[i] = x->disp[q[i]];
	}
	free(x->ids);
	free(x->lens);
	free(x->tgt);
	free(x->disp);
	x->ids = ids;
	x->lens = lens;
	x->tgt = tgt;
	x->disp = disp;
	rc = 0;
out:
	free(p);
	free(q);
	free(cnt);
	return rc;
}

/* Where each of the plan's samples comes from (x->tgt, x->disp, in plan
 * order): found by the plan, where it walked the entries anyway; asked
 * again here for one it found none for (a copy made since, after a lost
 * node).  0 or -DS_ECORRUPT (said). */
static int find_holders(struct ds__svc *s, struct xep *x)
{
	for (size_t i = 0; i < x->n; i++) {
		if (x->tgt[i] >= 0)
			continue;
		x->tgt[i] = ds__holder(s, x->ids[i], &x->disp[i]);
		if (x->tgt[i] < 0) {
			char name[PATH_MAX];
			ds_ix_path(&s->ix, x->ids[i], name, sizeof(name));
			ds_error("node %u: '%s': no other node holds it", s->node, name);
			return -DS_ECORRUPT;
		}
	}
	return 0;
}

/* The runs of the cache's slots: a slot joins the run before it when it
 * comes from the same node, right after the slot before there, and lies
 * right after it in the cache; a run ends at RUN_MAX_BYTES.  Then the gets:
 * a run joins the get before it when both are of the same node and all
 * their runs are small (< GET_BLOCK_SMALL), up to maxb runs and
 * GET_BLOCKS_BYTES; else it starts a get of its own. */
static int make_runs(struct xep *x, size_t m, int maxb)
{
	x->rs = malloc((m + 1) * sizeof(size_t));
	x->rbytes = malloc((m + 1) * sizeof(uint64_t));
	x->gr = malloc((m + 1) * sizeof(size_t));
	x->gbytes = malloc((m + 1) * sizeof(uint64_t));
	if (!x->rs || !x->rbytes || !x->gr || !x->gbytes)
		return -ENOMEM;
	size_t r = 0;
	unsigned char *prev_end = NULL;
	uint64_t prev_len = 0;
	for (size_t i = 0; i < m; i++) {
		uint64_t len;
		unsigned char *p = ds_cache_epoch_slot(x->ce, i, NULL, &len);
		if (r && p == prev_end && x->tgt[i] == x->tgt[i - 1] &&
		    x->disp[i] == x->disp[i - 1] + (MPI_Aint)prev_len &&
		    x->rbytes[r - 1] + len <= RUN_MAX_BYTES) {
			x->rbytes[r - 1] += len;
		} else {
			x->rs[r] = i;
			x->rbytes[r++] = len;
		}
		prev_end = p + len;
		prev_len = len;
	}
	x->rs[r] = m;
	x->nruns = r;
	size_t g = 0;
	int small = 0; /* every run of get g - 1 is small */
	for (size_t k = 0; k < r; k++) {
		int sm = x->rbytes[k] < GET_BLOCK_SMALL;
		if (g && sm && small && x->tgt[x->rs[k]] == x->tgt[x->rs[k - 1]] &&
		    k - x->gr[g - 1] < (size_t)maxb && x->gbytes[g - 1] + x->rbytes[k] <= GET_BLOCKS_BYTES) {
			x->gbytes[g - 1] += x->rbytes[k];
			continue;
		}
		x->gr[g] = k;
		x->gbytes[g++] = x->rbytes[k];
		small = sm;
	}
	x->gr[g] = r;
	x->ngets = g;
	return 0;
}

/* The helper thread: where each sample comes from, the fetch order (by
 * holder and place there, so that samples adjacent in a holder's store go
 * as one get), the cache file laid out in that order, and the gets. */
static void *prep_main(void *arg)
{
	struct xep *x = arg;
	struct ds__svc *s = x->svc;
	double t0 = ds_now();
	uint8_t *joined = NULL;
	int rc = find_holders(s, x);
	if (!rc && coalesce_on() && x->n > 1 && s->nnodes <= 65536) {
		rc = sort_by_holder(x, s->nnodes);
		joined = rc ? NULL : calloc(x->n + 1, 1);
		if (!rc && !joined)
			rc = -ENOMEM;
		for (size_t i = 1; !rc && i < x->n; i++)
			joined[i] = x->tgt[i] == x->tgt[i - 1] &&
			            x->disp[i] == x->disp[i - 1] + (MPI_Aint)x->lens[i - 1];
	}
	if (!rc) {
		rc = ds_cache_epoch_new_runs(s->x->cache, x->epoch, x->ids, x->lens, joined, x->n,
		                             &x->ce);
		if (rc) {
			char a[32];
			ds_error("node %u: epoch %llu cache of %s: %s", s->node,
			         (unsigned long long)x->epoch, ds_fmt_size(x->need, a, sizeof(a)),
			         ds_strerror(rc));
		}
	}
	free(joined);
	size_t m = rc ? 0 : ds_cache_epoch_count(x->ce);
	/* the plan has no repeats, so slot i holds ids[i] (the cache keeps
	 * first occurrences in order); else find each slot's holder again */
	for (size_t i = 0; !rc && m != x->n && i < m; i++) {
		uint32_t id;
		ds_cache_epoch_slot(x->ce, i, &id, NULL);
		x->tgt[i] = ds__holder(s, id, &x->disp[i]);
		if (x->tgt[i] < 0)
			rc = -DS_ECORRUPT;
	}
	if (!rc)
		rc = make_runs(x, m, coalesce_on() && !__atomic_load_n(&blocks_refused, __ATOMIC_RELAXED)
		                             ? get_blocks_max(s)
		                             : 1);
	ds_debug("node %u: epoch %llu: its cache of %zu entries prepared in %.3f s: %zu runs in %zu "
	         "gets",
	         s->node, (unsigned long long)x->epoch, m, ds_now() - t0, x->nruns, x->ngets);
	x->prep_rc = rc;
	x->prep_s = ds_now() - t0;
	__atomic_store_n(&x->prep_done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Once an epoch is fetched, a helper thread checks every uncompressed
 * entry's bytes against the index's CRC-32C and marks it VERIFIED (or
 * FAILED: readers then fetch it again), so that the readers need not
 * check what they take from the cache (io/remote.c): the check runs once
 * per node, in the background while the readers are still in the epoch
 * before, instead of on every read on the readers' critical path.  A
 * reader that comes before the check checks the bytes itself, as before.
 * Measured (bench/eab.sh, row 5.3): see docs/performance.md.
 * DSTAGE_SERVE_VERIFY=0: readers check every cached read (measurements). */
static int verify_on(void)
{
	static int v = -1;
	return ds_env_switch("DSTAGE_SERVE_VERIFY", &v);
}

/* DSTAGE_SERVE_VERIFY_IDLE=0: the check runs at normal priority (measurements) */
static int vidle_off(void)
{
	static int v = -1;
	return !ds_env_switch("DSTAGE_SERVE_VERIFY_IDLE", &v);
}

static void *verify_main(void *arg)
{
	struct xep *x = arg;
	struct ds__svc *s = x->svc;
	size_t m = ds_cache_epoch_count(x->ce), ok = 0, bad = 0;
	double t0 = ds_now();
	/* only on a core nobody else wants: the readers and the mains come
	 * first, and a check not done in time costs only the readers' own
	 * check of what they take before it */
	struct sched_param sp = {0};
	if (!vidle_off() && !__atomic_load_n(&x->vstop, __ATOMIC_RELAXED))
		pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp);
	/* tests: a byte of the first entry checked arrives flipped */
	int flip = ds_fault("serve.verify", (int)s->node) != 0;
	for (size_t i = 0; i < m && !__atomic_load_n(&x->vstop, __ATOMIC_RELAXED); i++) {
		/* out of the way of any node's fetch: those need both cores
		 * here (the gets are answered by the target's main) */
		while (__atomic_load_n(&s->x->hold, __ATOMIC_RELAXED) &&
		       !__atomic_load_n(&x->vstop, __ATOMIC_RELAXED))
			usleep(1000);
		if (ds_cache_epoch_state(x->ce, i) != DS_CACHE_READY)
			continue;
		uint32_t id;
		uint64_t len;
		unsigned char *p = ds_cache_epoch_slot(x->ce, i, &id, &len);
		struct ds_ix_file e;
		ds_ix_file(&s->ix, id, &e);
		if (e.codec != DS_CODEC_NONE || len != e.size || !len)
			continue; /* the reader inflates and checks */
		if (flip) {
			p[len / 2] ^= 0x5a;
			flip = 0;
		}
		int good = ds_crc32c(0, p, len) == e.crc;
		ds_cache_epoch_checked(x->ce, i, good);
		if (good) {
			ok++;
		} else {
			bad++;
			char name[PATH_MAX];
			ds_ix_path(&s->ix, id, name, sizeof(name));
			ds_warn("node %u: epoch %llu: '%s': checksum mismatch in the fetched bytes "
			        "(readers fetch it again)",
			        s->node, (unsigned long long)x->epoch, name);
		}
	}
	ds_debug("node %u: epoch %llu: %zu cached entries checked in %.3f s, %zu bad", s->node,
	         (unsigned long long)x->epoch, ok + bad, ds_now() - t0, bad);
	__atomic_store_n(&x->vdone, 1, __ATOMIC_RELEASE);
	return NULL;
}

static void start_verify(struct ds__svc *s, struct xep *x)
{
	if (!verify_on() || x->verifying || !x->ce)
		return;
	sigset_t all, prev;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	/* no thread: the readers check the bytes themselves, as before */
	x->verifying = !pthread_create(&x->verify, NULL, verify_main, x);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	(void)s;
}

/* Start preparing x's cache on the helper thread. */
static int start(struct ds__svc *s, struct xep *x)
{
	int rc = ds_fault("serve.fetch", (int)s->node);
	if (rc) {
		ds_error("node %u: epoch %llu: injected failure (DSTAGE_FAULT)", s->node,
		         (unsigned long long)x->epoch);
		return rc;
	}
	x->svc = s;
	x->prep_done = 0;
	sigset_t all, prev;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	rc = -pthread_create(&x->prep, NULL, prep_main, x);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (rc) {
		ds_error("node %u: a thread for epoch %llu: %s", s->node, (unsigned long long)x->epoch,
		         strerror(-rc));
		return rc;
	}
	x->st = X_PREPARING;
	return 0;
}

/* x's cache is ready: publish it, start fetching. */
static int finish(struct ds__svc *s, struct xep *x)
{
	pthread_join(x->prep, NULL);
	x->st = X_PLANNED;
	if (x->prep_rc)
		return x->prep_rc;
	int rc = ds_cache_epoch_publish(s->x->cache, x->ce);
	if (rc)
		return rc;
	size_t m = ds_cache_epoch_count(x->ce);
	x->st = m ? X_FETCHING : X_DONE;
	x->t0 = x->t1 = ds_now();
	x->cpu0 = thread_cpu();
	DS__SET(s, prefetch_epoch, x->epoch);
	DS__SET(s, prefetch_done, 0);
	DS__SET(s, prefetch_total, m);
	if (x->st == X_DONE)
		report(s, x);
	ds__status_write(s, "running");
	return 0;
}

/* Follow the readers: release caches older than their epoch R, make sure
 * R and R + 1 are planned and (as the buffer allows) being fetched. */
static int follow(struct ds__svc *s)
{
	struct ds__exchange *X = s->x;
	int rc = take_plans(s);
	if (rc)
		return rc;
	uint64_t r = __atomic_load_n(&s->reader_epoch, __ATOMIC_RELAXED);
	/* The last announcement wins, forwards or backwards: after a reader
	 * touched a far-away epoch (a typo, set_epoch(step)) the next real one
	 * brings the prefetch back (the far one cost at most one epoch's fetch,
	 * dropped at once).  Only one epoch back is ignored: that is a reader
	 * still starting the epoch the others have left. */
	int changed = 0;
	if (!X->started || (r != X->followed && r + 1 != X->followed)) {
		X->started = 1;
		if (r != X->followed)
			ds_info("node %u: readers are in epoch %llu", s->node, (unsigned long long)r);
		X->followed = r;
		DS__SET(s, epoch, r);
		for (int i = 0; i < X->nep;)
			if (X->ep[i]->epoch < r || X->ep[i]->epoch - r > 1)
				drop_ep(s, i);
			else
				i++;
		changed = 1;
	}
	r = X->followed;
	/* R and R + 1, planned by the planner thread: main goes on answering
	 * the peers meanwhile, and takes the plans when they are done.  R + 1
	 * once R's prefetch has started: its plan would only take the cores
	 * from R's cache being made (at start, epoch 1's plan made epoch 0's
	 * prefetch start 0.3-1 s later on 2 busy cores at 5M), and R + 1 is
	 * fetched after R anyway */
	struct xep *cur = find_ep(X, r);
	int r_started =
		cur && cur->st != X_PLANNING && cur->st != X_PLANNED && cur->st != X_PREPARING;
	for (uint64_t e = r; e <= r + 1; e++) {
		if (find_ep(X, e) || X->nep >= MAX_EP || (e > r && !r_started))
			continue;
		struct xep *x;
		rc = plan_ask(s, e, &x);
		if (rc) {
			ds_error("node %u: planning epoch %llu: %s", s->node, (unsigned long long)e, ds_strerror(rc));
			return rc;
		}
		X->ep[X->nep++] = x;
		changed = 1;
	}
	if (changed)
		ds__status_write(s, "running");
	return 0;
}

/* May best's epoch cache be made now without passing the RAM budget?
 * 1: yes (shrunk to the samples read first that fit, when nothing of ours
 * is left to release); 0: wait (an older epoch of ours will be released);
 * -1: not even one sample fits (skip the epoch).
 * Reads the cgroup files at most every 0.2 s while waiting. */
static int budget_allows(struct ds__svc *s, struct xep *best)
{
	struct ds__exchange *X = s->x;
	if (!X->budget_ram)
		return 1;
	double now = ds_now();
	if (X->budget_said && now - X->budget_t < 0.2)
		return 0;
	X->budget_t = now;
	struct ds_room room;
	if (ds_ram_room(s->nodedir, &X->headroom, &room))
		return 1; /* cannot tell: the free-space check at start stands */
	/* a cache being made is charged only once its file is allocated */
	uint64_t pending = 0, live = 0;
	for (int i = 0; i < X->nep; i++) {
		if (X->ep[i] == best)
			continue;
		if (X->ep[i]->st == X_PREPARING && !__atomic_load_n(&X->ep[i]->prep_done,
		                                                     __ATOMIC_ACQUIRE))
			pending += X->ep[i]->need;
		if (X->ep[i]->ce || X->ep[i]->st == X_PREPARING)
			live++; /* a cache file of ours that the readers will release */
	}
	/* the spare file (the last released epoch's, kept for reuse) is taken
	 * over or released by the next cache before it allocates: room */
	uint64_t spare = ds_cache_spare_bytes(X->cache);
	uint64_t avail = room.room + spare > pending ? room.room + spare - pending : 0;
	if (best->need <= avail) {
		if (X->budget_said)
			ds_info("node %u: epoch %llu: the RAM budget has room now", s->node,
			        (unsigned long long)best->epoch);
		X->budget_said = 0;
		return 1;
	}
	char a[32], b[32], d[320];
	if (!live) {
		/* nothing of ours to wait for: shrink the epoch to the samples read
		 * first that fit (the plan is in read order; the rest are read
		 * remotely), or skip it */
		size_t lo = 0, hi = best->n;
		while (lo < hi) {
			size_t mid = lo + (hi - lo + 1) / 2;
			if (ds_cache_epoch_need(best->lens, mid) <= avail)
				lo = mid;
			else
				hi = mid - 1;
		}
		X->budget_said = 0;
		if (!lo) {
			ds_warn("node %u: epoch %llu not prefetched: its cache needs %s, the RAM budget has "
			        "%s (%s): its readers use remote reads",
			        s->node, (unsigned long long)best->epoch,
			        ds_fmt_size(best->need, a, sizeof(a)), ds_fmt_size(avail, b, sizeof(b)),
			        ds_room_describe(&room, d, sizeof(d)));
			return -1;
		}
		char c[32];
		uint64_t need = ds_cache_epoch_need(best->lens, lo);
		ds_warn("node %u: epoch %llu: prefetching the first %zu of its %zu remote samples (%s of "
		        "%s): the RAM budget has %s (%s); the rest are read remotely",
		        s->node, (unsigned long long)best->epoch, lo, best->n,
		        ds_fmt_size(need, c, sizeof(c)), ds_fmt_size(best->need, a, sizeof(a)),
		        ds_fmt_size(avail, b, sizeof(b)), ds_room_describe(&room, d, sizeof(d)));
		best->n = lo;
		best->need = need;
		best->bytes = 0;
		for (size_t i = 0; i < lo; i++)
			best->bytes += best->lens[i];
		return 1;
	}
	if (!X->budget_said)
		ds_warn("node %u: epoch %llu prefetch waits: its cache needs %s, the RAM budget has %s "
		        "(%s) until the readers leave an older epoch",
		        s->node, (unsigned long long)best->epoch, ds_fmt_size(best->need, a, sizeof(a)),
		        ds_fmt_size(avail, b, sizeof(b)), ds_room_describe(&room, d, sizeof(d)));
	X->budget_said = 1;
	return 0;
}

/* The epoch to fetch now: the lowest planned or fetching one >= R that the
 * buffer and the RAM budget allow. */
static struct xep *current(struct ds__svc *s, int *err)
{
	struct ds__exchange *X = s->x;
	*err = 0;
	struct xep *best = NULL;
	for (int i = 0; i < X->nep; i++) {
		struct xep *x = X->ep[i];
		if (x->st == X_DONE || x->epoch > X->followed + 1)
			continue;
		if (!best || x->epoch < best->epoch)
			best = x;
	}
	if (!best || best->st == X_FETCHING)
		return best;
	if (best->st == X_PLANNING)
		return NULL; /* the planner is on it: wake_main says when it is done */
	if (best->st == X_PREPARING) {
		if (!__atomic_load_n(&best->prep_done, __ATOMIC_ACQUIRE))
			return NULL;
		*err = finish(s, best);
		return *err ? NULL : best;
	}
	uint64_t buf = s->o.shuffle_buffer;
	if (buf && live_bytes(X) + best->need > buf) {
		if (best->need > buf && !best->reported) {
			char a[32], b[32];
			ds_warn("node %u: epoch %llu needs %s of cache, --shuffle-buffer is %s: not "
			        "prefetched, its readers use remote reads",
			        s->node, (unsigned long long)best->epoch, ds_fmt_size(best->need, a, sizeof(a)),
			        ds_fmt_size(buf, b, sizeof(b)));
			best->st = X_DONE;
			best->reported = 1;
		}
		return NULL; /* wait until the readers move on and free some */
	}
	int ok = budget_allows(s, best);
	if (ok < 0) {
		best->st = X_DONE;
		best->reported = 1;
		return NULL;
	}
	if (!ok)
		return NULL;
	*err = start(s, best);
	return *err ? NULL : best;
}

/* Two copiers.  Where a get completes without its target (s->onesided:
 * Open MPI's osc/rdma), on one host it is a copy made by the requester's
 * CPU inside MPI_Rget (CMA): one thread issuing the gets is one core
 * copying, and the epoch's fetch took main's CPU time for every byte
 * (6.7-9.9 ms per 32 MiB measured) whatever else was idle.  So with
 * MPI_THREAD_MULTIPLE a second thread shares each batch with main: both
 * take the next slot from one cursor, each issues and completes its own
 * gets.  The same CPU seconds per epoch, on two cores where two are free;
 * a copier the scheduler holds back costs at most the get it is in (a
 * fixed half each was measured slower under load: a batch then waited
 * for its slower half), and a job it has not picked up yet main takes
 * back.  Where gets need their target (MPICH's emulation) a second thread
 * adds nothing: one.  DSTAGE_SERVE_FETCH_THREADS=1 or 2 (measurements). */
static int fetch_threads(struct ds__svc *s)
{
	const char *v = getenv("DSTAGE_SERVE_FETCH_THREADS");
	int n = s->onesided && ds_mpi_provided() >= MPI_THREAD_MULTIPLE ? 2 : 1;
	if (v && *v)
		n = atoi(v) >= 2 && ds_mpi_provided() >= MPI_THREAD_MULTIPLE ? 2 : 1;
	return n;
}

/* Get g of x as one MPI_Get of its runs as blocks; 0, or -errno where it
 * was not made (the caller makes a get per run). */
static int get_blocks(struct ds__svc *s, struct xep *x, size_t g)
{
	int lens[GET_BLOCKS_MAX];
	MPI_Aint od[GET_BLOCKS_MAX], td[GET_BLOCKS_MAX];
	size_t r0 = x->gr[g], n = x->gr[g + 1] - r0, i0 = x->rs[r0];
	unsigned char *base = ds_cache_epoch_slot(x->ce, i0, NULL, NULL);
	if (n > GET_BLOCKS_MAX)
		return -EINVAL;
	for (size_t k = 0; k < n; k++) {
		size_t i = x->rs[r0 + k];
		lens[k] = (int)x->rbytes[r0 + k]; /* < GET_BLOCK_SMALL */
		od[k] = (MPI_Aint)((unsigned char *)ds_cache_epoch_slot(x->ce, i, NULL, NULL) - base);
		td[k] = x->disp[i] - x->disp[i0];
	}
	return ds__get_blocks(s, base, (int)n, lens, od, x->tgt[i0], x->disp[i0], td);
}

/* Issue x's gets from the shared cursor until end; their targets are
 * marked.  0 or the first failure (the rest is left). */
static int take_gets(struct ds__svc *s, struct xep *x, size_t *cursor, size_t end, uint8_t *targets)
{
	for (;;) {
		size_t g = __atomic_fetch_add(cursor, 1, __ATOMIC_RELAXED);
		if (g >= end)
			return 0;
		size_t r0 = x->gr[g], r1 = x->gr[g + 1];
		int node = x->tgt[x->rs[r0]], brc = 1;
		if (r1 - r0 > 1 && !__atomic_load_n(&blocks_refused, __ATOMIC_RELAXED) &&
		    !(brc = get_blocks(s, x, g))) {
			__atomic_fetch_add(&x->gets, 1, __ATOMIC_RELAXED);
		} else {
			for (size_t r = r0; r < r1; r++) {
				size_t i = x->rs[r]; /* the run's first slot */
				void *slot = ds_cache_epoch_slot(x->ce, i, NULL, NULL);
				int rc = ds__get(s, slot, x->rbytes[r], x->tgt[i], x->disp[i]);
				if (rc)
					return rc; /* the node, not the types: said by ds__get */
				__atomic_fetch_add(&x->gets, 1, __ATOMIC_RELAXED);
			}
			/* the same bytes went as plain gets: the library refused
			 * the types or their get */
			if (brc == -EIO && !__atomic_exchange_n(&blocks_refused, 1, __ATOMIC_RELAXED))
				ds_warn("node %u: the MPI library refused a get of %zu blocks (DSTAGE_LOG=debug "
				        "says why): one get per run from now on",
				        s->node, r1 - r0);
		}
		targets[node] = 1;
	}
}

static void *copier_main(void *arg)
{
	struct ds__svc *s = arg;
	struct copier *c = &s->x->cp;
	uint8_t *targets = ds_xcalloc(s->nnodes, 1);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->posted && !c->quit)
			pthread_cond_wait(&c->cv, &c->mu);
		if (c->quit)
			break;
		c->posted = 0; /* picked up: main waits for it now */
		c->busy = 1;
		struct xep *x = c->x;
		pthread_mutex_unlock(&c->mu);
		double c0 = thread_cpu();
		int rc = take_gets(s, x, &c->cursor, c->end, targets);
		int frc = ds__flush(s, targets); /* the gets it started, failed or not */
		pthread_mutex_lock(&c->mu);
		c->rc = rc ? rc : frc;
		c->cpu = thread_cpu() - c0;
		c->busy = 0;
		pthread_cond_broadcast(&c->cv);
	}
	pthread_mutex_unlock(&c->mu);
	ds__get_release();
	free(targets);
	return NULL;
}

/* Offer x's slots from next to end to the copier (main takes from the same
 * cursor); 0, or -errno: main does them alone. */
static int copier_post(struct ds__svc *s, struct xep *x, size_t next, size_t end)
{
	struct copier *c = &s->x->cp;
	if (!c->started) {
		pthread_mutex_init(&c->mu, NULL);
		pthread_cond_init(&c->cv, NULL);
		sigset_t all, prev;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &prev);
		int rc = pthread_create(&c->th, NULL, copier_main, s);
		pthread_sigmask(SIG_SETMASK, &prev, NULL);
		if (rc) {
			pthread_mutex_destroy(&c->mu);
			pthread_cond_destroy(&c->cv);
			s->x->nthreads = 1;
			ds_warn("node %u: a second thread for the prefetch: %s (one copies)",
			        s->node, strerror(rc));
			return -rc;
		}
		c->started = 1;
	}
	pthread_mutex_lock(&c->mu);
	c->x = x;
	c->cursor = next;
	c->end = end;
	c->rc = 0;
	c->cpu = 0;
	c->posted = 1;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

/* The batch's gets of main are issued: take back the job if the copier
 * has not picked it up, else wait for it.  Its result, 0 or -errno. */
static int copier_wait(struct ds__svc *s, struct xep *x)
{
	struct copier *c = &s->x->cp;
	if (!c->started || c->x != x)
		return 0;
	pthread_mutex_lock(&c->mu);
	c->posted = 0;
	while (c->busy)
		pthread_cond_wait(&c->cv, &c->mu);
	int rc = c->rc;
	x->cpu_s += c->cpu;
	c->x = NULL;
	pthread_mutex_unlock(&c->mu);
	return rc;
}

size_t ds__exchange_issue(struct ds__svc *s, uint8_t *targets, size_t max_ops, uint64_t max_bytes)
{
	struct ds__exchange *X = s->x;
	X->inflight = NULL;
	int err = follow(s);
	struct xep *x = err ? NULL : current(s, &err);
	__atomic_store_n(&X->hold, ds__exchange_busy(s) || ds__pw_wanted(s), __ATOMIC_RELAXED);
	if (err) {
		s->err = err;
		return 0;
	}
	if (!x || x->st != X_FETCHING || !max_ops)
		return 0;
	/* One MPI_Get per get of the plan (make_runs): a run of samples
	 * adjacent in their holder's store, laid adjacent in the cache
	 * (prep_main), or many small runs of one holder as one get of
	 * hindexed blocks (GET_BLOCKS). */
	size_t m = x->ngets, ops = 0, end = x->next, blocks = 0;
	uint64_t bytes = 0;
	x->inflight_from = x->next;
	double t0 = ds_now();
	/* the batch: runs [next, end) */
	while (end < m && ops < max_ops &&
	       ((bytes < max_bytes && blocks < BATCH_BLOCKS) || ops == 0)) {
		bytes += x->gbytes[end];
		blocks += x->gr[end + 1] - x->gr[end];
		ops++;
		end++;
	}
	if (!X->nthreads) {
		X->nthreads = fetch_threads(s);
		if (X->nthreads > 1)
			ds_info("node %u: the prefetch's gets are made by %d threads", s->node,
			        X->nthreads);
	}
	/* main and the copier take the slots [next, end) from one cursor */
	size_t own = x->next, *cursor = &own;
	if (X->nthreads > 1 && ops >= 2 && !copier_post(s, x, x->next, end)) {
		cursor = &X->cp.cursor;
		for (size_t g = x->next; g < end; g++)
			targets[x->tgt[x->rs[x->gr[g]]]] = 1; /* they poll for the copier's gets too */
	}
	X->batch_failed = 0;
	if ((err = take_gets(s, x, cursor, end, targets))) {
		s->err = err;
		X->batch_failed = 1; /* the service leaves: nothing of the batch is READY */
		__atomic_store_n(cursor, end, __ATOMIC_RELAXED);
	}
	x->next = end;
	x->issue_s += ds_now() - t0;
	X->inflight = x;
	return ops;
}

void ds__exchange_complete(struct ds__svc *s, int ok, double flush_s)
{
	struct ds__exchange *X = s->x;
	struct xep *x = X->inflight;
	X->inflight = NULL;
	if (!x || !x->ce)
		return;
	int crc = copier_wait(s, x);
	if (crc) {
		ok = 0;
		if (!s->err)
			s->err = crc;
	}
	if (X->batch_failed)
		ok = 0;
	x->batches++;
	x->flush_s += flush_s;
	uint64_t bytes = 0;
	for (size_t i = x->rs[x->gr[x->inflight_from]]; i < x->rs[x->gr[x->next]]; i++) {
		uint64_t len;
		ds_cache_epoch_slot(x->ce, i, NULL, &len);
		ds_cache_epoch_mark(x->ce, i, ok);
		if (ok)
			bytes += len;
		else
			x->failed++;
		x->done++;
	}
	x->inflight_from = x->next;
	x->bytes_done += bytes;
	DS__COUNT(s, fetched_bytes, bytes);
	DS__SET(s, prefetch_done, x->done);
	if (x->done == ds_cache_epoch_count(x->ce) && x->st == X_FETCHING) {
		x->st = X_DONE;
		x->t1 = ds_now();
		x->cpu_s += thread_cpu() - x->cpu0; /* and the copier's (copier_wait) */
		report(s, x);
		ds__status_write(s, "running");
		start_verify(s, x);
	}
}

int ds__exchange_busy(const struct ds__svc *s)
{
	const struct ds__exchange *X = s->x;
	for (int i = 0; X && i < X->nep; i++)
		if (X->ep[i]->st == X_FETCHING || X->ep[i]->st == X_PREPARING)
			return 1;
	return 0;
}

void ds__status_write(struct ds__svc *s, const char *state)
{
	struct ds__exchange *X = s->x;
	char path[PATH_MAX], tmp[PATH_MAX + 16];
	ds_store_path(path, sizeof(path), s->nodedir, DS_SERVE_STATUS_NAME);
	snprintf(tmp, sizeof(tmp), "%s" DS_TMP_SUFFIX, path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f) {
		if (fd >= 0)
			close(fd);
		return;
	}
	fprintf(f, "# dstage serve, node %u: key=value, one epoch a line (epoch.E=...;\n"
	           "# t0, t1: when its fetch started and ended, CLOCK_MONOTONIC seconds)\n", s->node);
	fprintf(f, DS_SS_STATE "=%s\n" DS_SS_PID "=%ld\n", state, (long)getpid());
	fprintf(f, "node=%u\nnnodes=%u\nseed=%llu\nlocality=%g\ndrop_last=%d\n", s->node, s->nnodes,
	        (unsigned long long)s->o.cfg.seed, s->o.cfg.locality, s->o.cfg.drop_last);
	/* the live figures only while the service runs: after a stop they
	 * would describe an epoch nobody serves any more */
	if (X && !strcmp(state, "running")) {
		fprintf(f, "reader_epoch=%llu\nprefetch_epoch=%llu\nprefetch_done=%llu\nprefetch_total=%llu\n",
		        (unsigned long long)X->followed,
		        (unsigned long long)__atomic_load_n(&s->stats->prefetch_epoch, __ATOMIC_RELAXED),
		        (unsigned long long)__atomic_load_n(&s->stats->prefetch_done, __ATOMIC_RELAXED),
		        (unsigned long long)__atomic_load_n(&s->stats->prefetch_total, __ATOMIC_RELAXED));
		fprintf(f, "cache_bytes=%llu\nshuffle_buffer=%llu\n",
		        (unsigned long long)live_bytes(X), (unsigned long long)s->o.shuffle_buffer);
		fprintf(f, DS_SS_LOCAL_L0 "=%.4f\n" DS_SS_OVERLAP_L0 "=%.4f\n", X->exp_local,
		        X->exp_overlap);
		int first = X->nhist > HISTORY ? X->nhist - HISTORY : 0;
		for (int i = first; i < X->nhist; i++) {
			struct xep *h = &X->hist[i % HISTORY];
			fprintf(f,
			        DS_SS_EPOCH
			        "%llu=share=%zu share_bytes=%llu local=%.4f fetched=%zu "
			        "moved_bytes=%llu overlap_prev=%.4f fetch_s=%.6f failed=%zu "
			        "t0=%.6f t1=%.6f fetch_cpu_s=%.6f gets=%zu\n",
			        (unsigned long long)h->epoch, h->share_n,
			        (unsigned long long)h->share_bytes,
			        h->share_n ? (double)h->local_n / h->share_n : 1.0, h->done,
			        (unsigned long long)h->bytes_done, h->overlap, h->t1 - h->t0,
			        h->failed, h->t0, h->t1, h->cpu_s, h->gets);
		}
	}
	fclose(f);
	rename(tmp, path);
}
