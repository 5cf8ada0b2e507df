/* SPDX-License-Identifier: BSD-3-Clause */
/* window.c: the node store, its MPI window, and the one-sided gets.
 *
 * One window per node over its whole store, created once per job step
 * (docs/design.md section 4): every byte any node may need is in some node's store, and
 * stores never change while the service runs, so epochs need no window
 * of their own.  Passive target: MPI_Win_lock_all once, then gets for as
 * long as the service runs.
 *
 * The gets are MPI_Rget, and a batch is completed by testing its requests
 * (MPI_Testall), spinning for WAIT_SPIN and then with sched_yield between
 * tests, instead of MPI_Win_flush, which spins until the data is in.  On
 * one host MPI_Get is emulated with active messages the *target* process
 * must answer: a requester spinning in the flush takes the core its target
 * needs, and on a node whose cores are busy both then wait for the
 * scheduler.  Measured (bench/xab.sh, 2 nodes, 32 MiB per node and epoch,
 * load 5-7 on 2 cores, three runs of 18 epochs per arm): exchange median
 * 1.11x / 0.91x / 1.27x MPI_Alltoallv vs 0.63x / 0.53x / 0.74x with the
 * flush, slowest epoch 0.26x / 0.32x / 0.63x vs 0.06x / 0.27x / 0.39x, 12%
 * less service CPU per epoch; remote reads (bench/rlat.sh, load 7.2): p99
 * 4.6 / 4.1 ms vs 13.1 / 12.7 ms (4 / 128 KiB), medians 50 / 71 us vs
 * 69 / 70 us.  DSTAGE_SERVE_RGET=0 gives the flush back (measurements).
 * The requests are per thread: main and the socket thread (direct.c) each
 * complete their own.  (An earlier try of Rget ended a step twice with a
 * garbage agreement result; most likely the status gather's bug fixed
 * since in gather.c: t/3002-3013, 2040, 2097, 9008, 9013 and 3200 pass.) */
#include "dsmpi.h"
#include "svc.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

static int open_stats(struct ds__svc *s)
{
	char path[PATH_MAX];
	ds_store_path(path, sizeof(path), s->nodedir, DS_STATS_NAME);
	/* stage creates it; an older store may not have it */
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	struct stat st;
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = -errno;
	else if (st.st_size < (off_t)sizeof(struct ds_stats) && ftruncate(fd, sizeof(struct ds_stats)) < 0)
		rc = -errno;
	if (!rc) {
		s->stats = mmap(NULL, sizeof(struct ds_stats), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (s->stats == MAP_FAILED) {
			s->stats = NULL;
			rc = -errno;
		}
	}
	close(fd);
	if (rc)
		return rc;
	if (s->stats->magic != DS_STATS_MAGIC) {
		s->stats->version = DS_STATS_VERSION;
		__atomic_store_n(&s->stats->magic, DS_STATS_MAGIC, __ATOMIC_RELEASE);
	}
	/* the service's own figures start afresh; the readers' keep counting */
	DS__SET(s, served_reads, 0);
	DS__SET(s, served_bytes, 0);
	DS__SET(s, epoch, 0);
	DS__SET(s, prefetch_epoch, 0);
	DS__SET(s, prefetch_done, 0);
	DS__SET(s, prefetch_total, 0);
	DS__SET(s, fetched_bytes, 0);
	return 0;
}

/* The spill tier's store file of this node, checked as the shim checks it:
 * the job and node directories this user's and 0700, the file this user's,
 * regular, of the size the index says. */
static int spill_open(struct ds__svc *s, int *out)
{
	char dir[PATH_MAX], path[PATH_MAX];
	size_t jl = 0;
	int rc = ds_store_spill_nodedir(&s->ix, dir, sizeof(dir), &jl);
	if (!rc)
		rc = ds_store_path(path, sizeof(path), dir, DS_STORE_NAME);
	if (rc) {
		ds_error("node %u: the spill tier: %s", s->node, ds_strerror(rc));
		return rc;
	}
	struct stat st;
	for (int i = 0; i < 2; i++) {
		if (i == 0)
			dir[jl] = 0; /* the job directory, then the node's */
		if (lstat(dir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
		    (st.st_mode & 077)) {
			ds_error("node %u: '%s': not a spill directory of this user (owner, mode or type)",
			         s->node, dir);
			return -EPERM;
		}
		dir[jl] = '/';
	}
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		ds_error("node %u: '%s': %s", s->node, path, strerror(errno));
		return rc;
	}
	uint64_t want = s->ix.h->store_size - s->ix.h->ram_size;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (uint64_t)st.st_size != want) {
		ds_error("node %u: '%s': %llu bytes, the index says %llu", s->node, path,
		         (unsigned long long)st.st_size, (unsigned long long)want);
		close(fd);
		return -DS_ECORRUPT;
	}
	*out = fd;
	return 0;
}

/* The index's full check (every entry, the CRC of the whole file) over the
 * mapping the service uses: O(entries), 2.2 s at 5M entries here (issue
 * 27), on a thread of its own while main plans epoch 0 and makes the
 * window, which need only what ds_index_check_shuffle checked. */
static void *ixcheck_main(void *arg)
{
	struct ds__svc *s = arg;
	double t0 = ds_now();
	struct ds_index tmp;
	s->ixcheck_rc = ds_index_from_buf(&tmp, s->ix.h, s->ix.map_len, 1);
	s->ixcheck_s = ds_now() - t0;
	return NULL;
}

/* Is there a core for the full check beside main's plan?  Two per service
 * rank of this host (main and the check; simulated nodes share one host),
 * in this process's affinity; where there is not, a check beside the plan
 * only slowed both (5M samples, 2 simulated nodes on 2 busy cores: the
 * check 2.6-2.9 s instead of 1.2 s, the plan 0.9-1.2 s instead of 0.4-0.5
 * s, the start 0.4 s longer).  DSTAGE_SERVE_CHECK_THREAD=0 or 1 decides
 * (tests, measurements). */
static int check_thread_on(const struct ds__svc *s)
{
	static int v = -1;
	const char *e = getenv("DSTAGE_SERVE_CHECK_THREAD");
	if (e && *e)
		return ds_env_switch("DSTAGE_SERVE_CHECK_THREAD", &v);
	cpu_set_t cs;
	int ncpu = sched_getaffinity(0, sizeof(cs), &cs) ? 1 : CPU_COUNT(&cs);
	return ncpu >= 2 * (s->host_ranks > 0 ? s->host_ranks : 1);
}

/* Open the index: its header and bounds, what the plans rely on (the
 * samples and the locations), then the full check, started beside the
 * start's next steps where there is a core for it.  A damage found here is
 * reported as the full check reports it (the same error as a full check
 * before any plan). */
static int index_open(struct ds__svc *s, const char *path)
{
	int rc = ds_index_open(&s->ix, path, 0);
	if (rc)
		return rc;
	if (!check_thread_on(s)) {
		struct ds_index tmp;
		double t0 = ds_now();
		rc = ds_index_from_buf(&tmp, s->ix.h, s->ix.map_len, 1);
		s->ixcheck_s = ds_now() - t0;
	} else if (ds_index_check_shuffle(&s->ix)) {
		struct ds_index tmp;
		rc = ds_index_from_buf(&tmp, s->ix.h, s->ix.map_len, 1);
		if (!rc)
			rc = -DS_ECORRUPT;
	} else {
		sigset_t all, prev;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &prev);
		int trc = pthread_create(&s->ixcheck, NULL, ixcheck_main, s);
		pthread_sigmask(SIG_SETMASK, &prev, NULL);
		if (!trc)
			s->ixcheck_on = 1;
		else /* no thread: check it here */
			rc = ds_index_from_buf(&(struct ds_index){0}, s->ix.h, s->ix.map_len, 1);
	}
	if (rc)
		ds_index_close(&s->ix);
	return rc;
}

int ds__store_checked(struct ds__svc *s)
{
	if (!s->ixcheck_on)
		return 0;
	pthread_join(s->ixcheck, NULL);
	s->ixcheck_on = 0;
	int rc = s->ixcheck_rc;
	if (rc) {
		char path[PATH_MAX];
		ds_store_path(path, sizeof(path), s->nodedir, DS_INDEX_NAME);
		ds_error("node %u: '%s': %s", s->node, path, ds_strerror(rc));
	}
	return rc;
}

int ds__store_open(struct ds__svc *s)
{
	char path[PATH_MAX];
	ds_store_path(path, sizeof(path), s->nodedir, DS_INDEX_NAME);
	int rc = index_open(s, path);
	if (rc) {
		ds_error("node %u: '%s': %s%s", s->node, path, ds_strerror(rc),
		         rc == -ENOENT ? " (run dstage stage first)" : "");
		return rc;
	}
	const struct ds_index_header *h = s->ix.h;
	if (h->node != s->node || ds__failover_nodes_ok(s, h->nnodes)) {
		ds_error("node %u: '%s': staged as node %u of %u, this step runs %u node(s)", s->node, path,
		         h->node, h->nnodes, s->nnodes);
		return -EINVAL;
	}
	ds_store_path(path, sizeof(path), s->nodedir, DS_STORE_NAME);
	/* Read-write and shared, although nothing here writes to it: RDMA
	 * transports register window memory for remote access, which fails on
	 * (or copies on write) a read-only or private mapping. */
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		rc = -errno;
		ds_error("node %u: '%s': %s", s->node, path, strerror(errno));
		return rc;
	}
	struct stat st;
	if (fstat(fd, &st) < 0 || (uint64_t)st.st_size != h->ram_size) {
		ds_error("node %u: '%s': %llu bytes, the index says %llu", s->node, path,
		         (unsigned long long)st.st_size, (unsigned long long)h->ram_size);
		close(fd);
		return -DS_ECORRUPT;
	}
	/* the spill tier (docs/formats.md "The spill tier"): its file
	 * is mapped right after the RAM one, so the window and every base of
	 * the index cover both tiers as one store */
	int sfd = -1;
	if (ds_index_spills(&s->ix) && (rc = spill_open(s, &sfd)) < 0) {
		close(fd);
		return rc;
	}
	s->store_len = (size_t)h->store_size;
	s->ram_len = (size_t)h->ram_size;
	/* In RAM (tmpfs), map every page now: peers' gets then never fault
	 * in our address space.  On a disk this would read the whole store
	 * at start: there the pages come in as they are asked for. */
	struct statfs sf;
	int populate = !fstatfs(fd, &sf) && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
	/* the region: the store, then the copies re-replicated after a lost
	 * node (failover.c), reserved at once and filled in place.  Never
	 * mremap the store into a larger one: UCX's memory hooks (libucm
	 * 1.13.1, loaded by MPICH's ch4:ucx) drop mremap's fifth argument,
	 * so MREMAP_FIXED moves the store to a wrong address, the region's
	 * start stays PROT_NONE and the first get into it crashes this target
	 * in UCX (docs/failover.md "MPI libraries that hook mremap") */
	uint64_t total = 0;
	if ((rc = ds__failover_plan_extra(s, &total))) {
		close(fd);
		if (sfd >= 0)
			close(sfd);
		return rc;
	}
	if (total) {
		unsigned char *m = mmap(NULL, total, PROT_NONE,
		                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		rc = m == MAP_FAILED ? -errno : 0;
		if (!rc && s->ram_len &&
		    mmap(m, s->ram_len, PROT_READ | PROT_WRITE,
		         MAP_SHARED | MAP_FIXED | (populate ? MAP_POPULATE : 0), fd, 0) == MAP_FAILED)
			rc = -errno;
		if (!rc && sfd >= 0 &&
		    mmap(m + s->ram_len, s->store_len - s->ram_len, PROT_READ | PROT_WRITE,
		         MAP_SHARED | MAP_FIXED, sfd, 0) == MAP_FAILED)
			rc = -errno;
		if (!rc && (rc = ds__failover_map_extra(s, m, populate)))
			path[0] = 0; /* named by map_extra */
		if (rc) {
			if (m != MAP_FAILED)
				munmap(m, total);
			if (path[0])
				ds_error("node %u: '%s': mmap: %s", s->node, path, strerror(-rc));
			close(fd);
			if (sfd >= 0)
				close(sfd);
			return rc;
		}
		s->store = m;
		s->store_len = (size_t)total;
	}
	close(fd);
	if (sfd >= 0)
		close(sfd);
	if ((rc = open_stats(s))) {
		ds_error("node %u: '%s/stats': %s", s->node, s->nodedir, ds_strerror(rc));
		return rc;
	}
	return 0;
}

void ds__store_close(struct ds__svc *s)
{
	if (s->ixcheck_on) { /* a start that failed before it was waited for */
		pthread_join(s->ixcheck, NULL);
		s->ixcheck_on = 0;
	}
	if (s->store)
		munmap(s->store, s->store_len);
	s->store = NULL;
	if (s->stats)
		munmap(s->stats, sizeof(struct ds_stats));
	s->stats = NULL;
	if (s->ix.h)
		ds_index_close(&s->ix);
	memset(&s->ix, 0, sizeof(s->ix));
}

/* Does a get complete while its target makes no MPI call at all?  MPICH
 * 4.0's ch4:ucx emulates a get on shared memory (and TCP) with active
 * messages the target's progress engine must answer, so every target polls
 * MPI while a peer has gets in flight to it (progress.c); Open MPI's
 * osc/rdma reads the target's memory itself (single-copy CMA on one host,
 * RDMA on a network), and those polls only take the core the requester's
 * copy needs (docs/mpi.md "One-sided components").  Asked of the library
 * by trying it, once per window: ranks 2k and 2k+1 pair up; after a first
 * barrier (which absorbs the skew of the ranks' arrival) the even one
 * notes the time and enters a second, the odd one sleeps PROBE_NAP
 * outside MPI once it leaves it, and the even one gets two samples the
 * odd one holds, where the service's own gets would read them (ds__holder):
 * the smallest (as a remote read of a small file) and the largest up to
 * PROBE_BIG (as the prefetch's), for a library may move them differently.
 * The sleeper cannot leave the barrier before the getter entered it, so
 * gets seen complete within PROBE_NAP of that entry completed without
 * their target: yes -- unless the sleeper was still inside the barrier
 * (descheduled there on a loaded host) when they arrived, its progress
 * answering them: so the getter waits PROBE_LAG before its gets, and a yes
 * takes PROBE_YES_ROUNDS rounds that all say yes (MPICH's ch4:ucx was once
 * seen "without its target" under load, t/3026).  A get still pending
 * after the getter tested it without a pause longer than PROBE_GAP until
 * 0.9 PROBE_NAP: no.  A getter the scheduler held back (the first test
 * late, or a long pause): the round says nothing, and is repeated, up to
 * PROBE_ROUNDS; then no, the safe side.  Every pair votes (Allreduce MIN:
 * one no is no), and at least one pair must have tried.
 * DSTAGE_SERVE_ONESIDED=0 or 1 skips the probe (measurements). */
#define PROBE_NAP 0.1
#define PROBE_LAG 0.01
#define PROBE_GAP (0.3 * PROBE_NAP)
#define PROBE_ROUNDS 4
#define PROBE_YES_ROUNDS 2
#define PROBE_BIG ((uint64_t)1 << 20)
enum { PROBE_NO, PROBE_UNSURE, PROBE_YES };

static int onesided_mode = -1;

struct probe_get {
	uint64_t len;
	MPI_Aint disp;
};

/* The smallest and the largest (up to PROBE_BIG) sample that rank
 * `partner` holds in its own store (the index's locations, as ds__holder
 * reads them first; not the copies re-replicated after a loss): 0 if it
 * holds none.  Among at most PROBE_PICKS samples spread over the whole
 * list: the probe wants a small and a large get, not the extremes, and a
 * walk of every sample cost main O(samples) at every start (issue 27). */
#define PROBE_PICKS 65536u
static int probe_pick(const struct ds__svc *s, int partner, struct probe_get g[2])
{
	memset(g, 0, 2 * sizeof(*g));
	uint32_t ns = s->ix.h->nsamples, step = ns / PROBE_PICKS + 1;
	for (uint64_t j = 0; j < ns; j += step) {
		uint32_t id = ds_ix_sample(&s->ix, j);
		struct ds_ix_file fe, *e = &fe;
		ds_ix_file(&s->ix, id, e);
		if (!e->stored || e->stored > PROBE_BIG || e->part >= s->ix.h->nparts)
			continue;
		const struct ds_part *p = &s->ix.parts[e->part];
		MPI_Aint disp = -1;
		for (uint32_t i = 0; i < p->nloc && disp < 0; i++) {
			const struct ds_loc *l = &s->ix.locs[p->loc + i];
			if (l->node != s->node && ds__rank_of(s, l->node) == partner)
				disp = (MPI_Aint)(l->base + e->poff);
		}
		if (disp < 0)
			continue;
		if (!g[0].len || e->stored < g[0].len)
			g[0] = (struct probe_get){e->stored, disp};
		if (e->stored > g[1].len)
			g[1] = (struct probe_get){e->stored, disp};
	}
	return g[0].len ? 1 : 0;
}

static int probe_round(struct ds__svc *s, int getter, int sleeper, int partner,
                       const struct probe_get g[2], unsigned char *buf)
{
	int vote = PROBE_YES; /* a rank without a partner does not vote against */
	MPI_Barrier(s->comm);
	double entered = ds_now();
	MPI_Barrier(s->comm);
	if (sleeper) {
		struct timespec ts = {0, (long)(PROBE_NAP * 1e9)};
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	} else if (getter) {
		MPI_Request rq[2];
		MPI_Status st[2];
		int n = 0;
		vote = PROBE_NO;
		struct timespec lag = {0, (long)(PROBE_LAG * 1e9)};
		while (nanosleep(&lag, &lag) < 0 && errno == EINTR)
			;
		for (int k = 0; k < 2; k++)
			if (MPI_Rget(buf + k * PROBE_BIG, (int)g[k].len, MPI_BYTE, partner,
			             g[k].disp, (int)g[k].len, MPI_BYTE, s->win,
			             &rq[n]) == MPI_SUCCESS)
				n++;
		if (n < 2) {
			if (n)
				MPI_Wait(&rq[0], MPI_STATUS_IGNORE);
			return vote;
		}
		int done = 0;
		double last = ds_now(), gap = last - entered;
		while (MPI_Testall(2, rq, &done, st) == MPI_SUCCESS) {
			double now = ds_now();
			if (done) {
				vote = now - entered < PROBE_NAP ? PROBE_YES : PROBE_UNSURE;
				break;
			}
			if (now - last > gap)
				gap = now - last;
			last = now;
			if (now - entered >= 0.9 * PROBE_NAP) {
				vote = gap > PROBE_GAP ? PROBE_UNSURE : PROBE_NO;
				break;
			}
			sched_yield();
		}
		if (!done) /* the target answers once it calls MPI again */
			MPI_Waitall(2, rq, st);
	}
	return vote;
}

static int probe_onesided(struct ds__svc *s)
{
	int rank, size;
	MPI_Comm_rank(s->comm, &rank);
	MPI_Comm_size(s->comm, &size);
	const char *v = getenv("DSTAGE_SERVE_ONESIDED");
	if (v && *v)
		return ds_env_switch("DSTAGE_SERVE_ONESIDED", &onesided_mode);
	if (size < 2)
		return 0;
	int partner = rank % 2 ? rank - 1 : rank + 1;
	struct probe_get g[2];
	int getter = rank % 2 == 0 && partner < size && probe_pick(s, partner, g);
	/* the partner learns whether it is to sleep */
	int sleeper = 0;
	if (partner < size && MPI_Sendrecv(&getter, 1, MPI_INT, partner, 0, &sleeper, 1, MPI_INT,
	                                   partner, 0, s->comm, MPI_STATUS_IGNORE) != MPI_SUCCESS)
		getter = sleeper = 0;
	if (rank % 2 == 0)
		sleeper = 0;
	unsigned char *buf = getter ? malloc(2 * PROBE_BIG) : NULL;
	if (getter && !buf)
		getter = 0;
	int all[2] = {PROBE_NO, 0}, yeses = 0;
	for (int r = 0; r < PROBE_ROUNDS && yeses < PROBE_YES_ROUNDS; r++) {
		/* {the vote, minus "this rank tried"}: MIN gives the worst vote
		 * and -1 if any pair tried */
		int mine[2] = {probe_round(s, getter, sleeper, partner, g, buf), -getter};
		if (MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MIN, s->comm) != MPI_SUCCESS)
			all[0] = PROBE_NO;
		if (all[0] == PROBE_NO || all[1] == 0)
			break;
		if (all[0] == PROBE_YES)
			yeses++;
	}
	free(buf);
	int yes = yeses == PROBE_YES_ROUNDS && all[1] < 0;
	if (rank == 0)
		ds_info("gets %s their target's progress%s", yes ? "complete without" : "need",
		        yes ? ": targets do not poll for them" : "");
	return yes;
}

int ds__window_create(struct ds__svc *s)
{
	MPI_Info info;
	MPI_Info_create(&info);
	/* we only ever get: let the implementation skip accumulate ordering */
	MPI_Info_set(info, "accumulate_ordering", "none");
	MPI_Info_set(info, "same_disp_unit", "true");
	int rc = MPI_Win_create(s->store_len ? s->store : NULL, (MPI_Aint)s->store_len, 1, info, s->comm,
	                        &s->win);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS) {
		char m[MPI_MAX_ERROR_STRING];
		/* Open MPI 4.1 on nodes joined by Ethernet alone: osc/rdma needs an
		 * RDMA transport to every peer, pt2pt refuses MPI_THREAD_MULTIPLE,
		 * and Debian's openmpi-mca-params.conf excludes osc/ucx, the one
		 * that works there (docs/mpi.md "One-sided components") */
#if defined(OPEN_MPI)
		const char *hint = " (Open MPI: no one-sided component for these ranks: "
		                   "OMPI_MCA_osc=ucx,rdma,sm, docs/mpi.md)";
#else
		const char *hint = "";
#endif
		ds_error("node %u: MPI_Win_create over %zu bytes: %s%s", s->node, s->store_len,
		         ds_mpi_strerror(rc, m, (int)sizeof(m)), hint);
		s->win = MPI_WIN_NULL;
		return -EIO;
	}
	MPI_Win_set_errhandler(s->win, MPI_ERRORS_RETURN);
	rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, s->win);
	if (rc != MPI_SUCCESS) {
		char m[MPI_MAX_ERROR_STRING];
		ds_error("node %u: MPI_Win_lock_all: %s", s->node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
		MPI_Win_free(&s->win);
		s->win = MPI_WIN_NULL;
		return -EIO;
	}
	s->onesided = probe_onesided(s);
	return 0;
}

void ds__window_free(struct ds__svc *s)
{
	if (s->win == MPI_WIN_NULL)
		return;
	char m[MPI_MAX_ERROR_STRING];
	int rc = MPI_Win_unlock_all(s->win);
	if (rc != MPI_SUCCESS)
		ds_error("node %u: MPI_Win_unlock_all: %s", s->node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
	rc = MPI_Win_free(&s->win);
	if (rc != MPI_SUCCESS)
		ds_error("node %u: MPI_Win_free: %s", s->node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
	s->win = MPI_WIN_NULL;
}

/* Replicas share the load by spans of 2^HOLDER_SPAN_BITS consecutive
 * entries, not entry by entry: a run of entries adjacent in the store then
 * has one holder, and the prefetch fetches it with one get (exchange.c). */
#define HOLDER_SPAN_BITS 6

int ds__holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp)
{
	uint32_t part = ds_ix_part(&s->ix, id);
	if (part >= s->ix.h->nparts)
		return -ENOENT;
	const struct ds_part *p = &s->ix.parts[part];
	/* spread the readers of a replicated partition over its holders: start
	 * at a place that depends on the entry's span and on who asks */
	for (uint32_t i = 0; i < p->nloc; i++) {
		const struct ds_loc *l =
			&s->ix.locs[p->loc + ((id >> HOLDER_SPAN_BITS) + s->node + i) % p->nloc];
		int rank = ds__rank_of(s, l->node); /* -1: lost (failover.c) */
		if (l->node == s->node || rank < 0)
			continue;
		*disp = (MPI_Aint)(l->base + ds_ix_poff(&s->ix, id));
		return rank;
	}
	return ds__extra_holder(s, id, disp); /* a re-replicated copy, or -ENOENT */
}

#define WAIT_SPIN 50e-6 /* s of plain tests before yielding between them */

/* -1: not read yet; 1: MPI_Rget + MPI_Testall; 0: MPI_Get + MPI_Win_flush */
static int rget_mode = -1;
static __thread MPI_Request *rq;
static __thread MPI_Status *rst;
static __thread size_t nrq, caprq;

static int rget_on(void) { return ds_env_switch("DSTAGE_SERVE_RGET", &rget_mode); }

/* The gets of many blocks (ds__get_blocks) this thread started and has not
 * completed: their datatypes, freed once they are complete, and their
 * targets, flushed by ds__flush (bl_seen: per node, is it in bl_tgt). */
static __thread MPI_Datatype *bl_dt;
static __thread size_t nbl_dt, capbl_dt;
static __thread int *bl_tgt;
static __thread uint8_t *bl_seen;
static __thread size_t nbl_tgt;

void ds__get_release(void)
{
	free(rq);
	free(rst);
	rq = NULL;
	rst = NULL;
	nrq = caprq = 0;
	free(bl_dt);
	free(bl_tgt);
	free(bl_seen);
	bl_dt = NULL;
	bl_tgt = NULL;
	bl_seen = NULL;
	nbl_dt = capbl_dt = nbl_tgt = 0;
}

/* The largest get issued as one call.  MPI-4 (MPICH 4) has the large-count
 * MPI_Get_c/MPI_Rget_c; an MPI-3.1 library (Open MPI 4.1) counts in int, so a
 * longer span goes as gets of 1 GiB (a multiple of every page size) in the
 * same passive epoch: ds__flush completes them all together, as it does one. */
#if MPI_VERSION >= 4
#define GET_PIECE UINT64_MAX
#else
#define GET_PIECE ((uint64_t)1 << 30)
#endif

static int get_piece(struct ds__svc *s, void *buf, uint64_t len, int node, MPI_Aint disp)
{
	int rc;
	if (rget_on()) {
		if (nrq == caprq) {
			caprq = caprq ? 2 * caprq : 256;
			rq = ds_xrealloc(rq, caprq * sizeof(*rq));
			rst = ds_xrealloc(rst, caprq * sizeof(*rst));
		}
		if (len <= INT_MAX)
			rc = MPI_Rget(buf, (int)len, MPI_BYTE, node, disp, (int)len, MPI_BYTE, s->win, &rq[nrq]);
#if MPI_VERSION >= 4
		else
			rc = MPI_Rget_c(buf, (MPI_Count)len, MPI_BYTE, node, disp, (MPI_Count)len, MPI_BYTE,
			                s->win, &rq[nrq]);
#else
		else
			rc = MPI_ERR_COUNT; /* GET_PIECE keeps len <= INT_MAX */
#endif
		if (rc == MPI_SUCCESS)
			nrq++;
	} else if (len <= INT_MAX)
		rc = MPI_Get(buf, (int)len, MPI_BYTE, node, disp, (int)len, MPI_BYTE, s->win);
#if MPI_VERSION >= 4
	else
		rc = MPI_Get_c(buf, (MPI_Count)len, MPI_BYTE, node, disp, (MPI_Count)len, MPI_BYTE, s->win);
#else
	else
		rc = MPI_ERR_COUNT;
#endif
	if (rc != MPI_SUCCESS) {
		char m[MPI_MAX_ERROR_STRING];
		ds_error("node %u: MPI_Get of %llu bytes from node %d: %s", s->node,
		         (unsigned long long)len, node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
		return -EIO;
	}
	return 0;
}

int ds__get(struct ds__svc *s, void *buf, uint64_t len, int node, MPI_Aint disp)
{
	while (len) {
		uint64_t n = len < GET_PIECE ? len : GET_PIECE;
		int rc = get_piece(s, buf, n, node, disp);
		if (rc < 0)
			return rc;
		buf = (char *)buf + n;
		disp += (MPI_Aint)n;
		len -= n;
	}
	return 0;
}

/* A get of n blocks from node's window into one buffer: block k is lens[k]
 * bytes at tbase + tdisp[k] there, going to obase + odisp[k] here.  One
 * MPI_Get whose origin and target types are hindexed MPI_BYTE blocks
 * (docs/mpi.md "Gets of many samples").  A plain MPI_Get completed by
 * MPI_Win_flush, never MPI_Rget: MPICH 4.0's ch4:ucx completes the request
 * of an MPI_Rget with a non-contiguous type before its data is in (the
 * active-message fallback without a request, pmodels/mpich#7896): measured
 * here, most bytes wrong after MPI_Testall said done, on shared memory and
 * over TCP; MPI_Get + MPI_Win_flush gave every byte.  The types are freed
 * once ds__flush has completed the get. */
int ds__get_blocks(struct ds__svc *s, void *obase, int n, const int *lens, const MPI_Aint *odisp,
                   int node, MPI_Aint tbase, const MPI_Aint *tdisp)
{
	if (!bl_seen) {
		bl_seen = calloc(s->nnodes, 1);
		bl_tgt = malloc(s->nnodes * sizeof(*bl_tgt));
		if (!bl_seen || !bl_tgt) {
			free(bl_seen);
			free(bl_tgt);
			bl_seen = NULL;
			bl_tgt = NULL;
			return -ENOMEM;
		}
	}
	if (nbl_dt + 2 > capbl_dt) {
		size_t cap = capbl_dt ? 2 * capbl_dt : 256;
		MPI_Datatype *d = realloc(bl_dt, cap * sizeof(*d));
		if (!d)
			return -ENOMEM;
		bl_dt = d;
		capbl_dt = cap;
	}
	/* tests: a library that refuses these types or their get */
	if (ds_fault("serve.getblocks", (int)s->node)) {
		ds_debug("node %u: a get of %d blocks from node %d: injected failure (DSTAGE_FAULT)",
		         s->node, n, node);
		return -EIO;
	}
	MPI_Datatype ot = MPI_DATATYPE_NULL, tt = MPI_DATATYPE_NULL;
	const char *what = "MPI_Type_create_hindexed";
	int rc = MPI_Type_create_hindexed(n, lens, odisp, MPI_BYTE, &ot);
	if (rc == MPI_SUCCESS)
		rc = MPI_Type_create_hindexed(n, lens, tdisp, MPI_BYTE, &tt);
	if (rc == MPI_SUCCESS && (what = "MPI_Type_commit", 1))
		rc = MPI_Type_commit(&ot);
	if (rc == MPI_SUCCESS)
		rc = MPI_Type_commit(&tt);
	if (rc == MPI_SUCCESS && (what = "MPI_Get", 1))
		rc = MPI_Get(obase, 1, ot, node, tbase, 1, tt, s->win);
	if (rc != MPI_SUCCESS) {
		char m[MPI_MAX_ERROR_STRING];
		ds_debug("node %u: %s of %d blocks from node %d: %s", s->node, what, n, node,
		         ds_mpi_strerror(rc, m, (int)sizeof(m)));
		if (ot != MPI_DATATYPE_NULL)
			MPI_Type_free(&ot);
		if (tt != MPI_DATATYPE_NULL)
			MPI_Type_free(&tt);
		return -EIO;
	}
	bl_dt[nbl_dt++] = ot;
	bl_dt[nbl_dt++] = tt;
	if (!bl_seen[node]) {
		bl_seen[node] = 1;
		bl_tgt[nbl_tgt++] = node;
	}
	return 0;
}

/* The types of this thread's gets of many blocks, once they are complete */
static void free_block_types(void)
{
	for (size_t i = 0; i < nbl_dt; i++)
		MPI_Type_free(&bl_dt[i]);
	nbl_dt = 0;
}

/* Complete this thread's gets of many blocks: flush their targets, free
 * their types.  0 or -EIO. */
static int flush_blocks(struct ds__svc *s)
{
	int err = 0;
	for (size_t i = 0; i < nbl_tgt; i++) {
		int t = bl_tgt[i];
		bl_seen[t] = 0;
		int rc = MPI_Win_flush(t, s->win);
		if (rc != MPI_SUCCESS) {
			char m[MPI_MAX_ERROR_STRING];
			ds_error("node %u: MPI_Win_flush to node %d: %s", s->node, t,
			         ds_mpi_strerror(rc, m, (int)sizeof(m)));
			err = -EIO;
		}
	}
	nbl_tgt = 0;
	free_block_types();
	return err;
}

int ds__flush(struct ds__svc *s, uint8_t *targets)
{
	int err = 0;
	if (rget_on()) {
		memset(targets, 0, s->nnodes);
		double t0 = ds_now();
		for (;;) {
			int done = 0;
			int rc = MPI_Testall((int)nrq, rq, &done, rst);
			if (rc != MPI_SUCCESS) {
				char m[MPI_MAX_ERROR_STRING];
				ds_error("node %u: MPI_Testall: %s", s->node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
				err = -EIO;
				break;
			}
			if (done)
				break;
			if (ds_now() - t0 > WAIT_SPIN)
				sched_yield(); /* the target may need this core */
		}
		nrq = 0;
		/* the gets of many blocks after the others: by now theirs
		 * have had the same time to come in */
		int brc = flush_blocks(s);
		return err ? err : brc;
	}
	for (size_t i = 0; i < nbl_tgt; i++) {
		targets[bl_tgt[i]] = 1; /* flushed below with the others */
		bl_seen[bl_tgt[i]] = 0;
	}
	nbl_tgt = 0;
	for (uint32_t t = 0; t < s->nnodes; t++) {
		if (!targets[t])
			continue;
		targets[t] = 0;
		int rc = MPI_Win_flush((int)t, s->win);
		if (rc != MPI_SUCCESS) {
			char m[MPI_MAX_ERROR_STRING];
			ds_error("node %u: MPI_Win_flush to node %u: %s", s->node, t,
			         ds_mpi_strerror(rc, m, (int)sizeof(m)));
			err = -EIO;
		}
	}
	free_block_types();
	return err;
}

void ds__progress(struct ds__svc *s)
{
	int flag;
	int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, s->comm, &flag, MPI_STATUS_IGNORE);
	if (rc != MPI_SUCCESS && !s->err) {
		/* reported once; the agreement then tells every node */
		char m[MPI_MAX_ERROR_STRING];
		ds_error("node %u: MPI_Iprobe: %s", s->node, ds_mpi_strerror(rc, m, (int)sizeof(m)));
		s->err = -EIO;
	}
}
