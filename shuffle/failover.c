/* SPDX-License-Identifier: BSD-3-Clause */
/* failover.c: the service on the survivors of a lost node (docs/failover.md).
 *
 * MPICH here (4.0.2, ch4:ucx) cannot keep a communicator across a dead
 * rank (no ULFM; hydra ends the other ranks; MPIR_CVAR_ENABLE_FT asserts
 * in MPI_Win_create), so a lost node ends the service step on every node
 * and the service is started again on the survivors:
 *
 *     mpiexec -n 3 dstage serve --node-per-rank --nodes 0,1,3 ...
 *     srun --overlap -N3 -w <survivors> dstage serve --nodes 0,1,3 ...
 *
 * Rank r of the new step serves staged node LIST[r] (its store, its
 * socket, its epoch cache), so the stores that are still there serve again
 * without a byte of staging.  This file holds the mapping (staged node <->
 * rank, lost nodes -1), the node-set history JOBDIR/nodes and the shares
 * over the set; serve.c, window.c and exchange.c call it at a few points.
 *
 * Which epoch the new set starts at: the readers of the old service were
 * in epoch e (the highest any survivor saw); epoch e keeps the lists it was
 * begun with (the survivors' readers go on reading them, their samples
 * held by a lost node come from the other holder), and e + 1 on is dealt
 * over the survivors.  With no reader seen yet, the new set starts at 0. */
#include "dsnodeset.h"
#include "dsmpi.h"
#include "svc.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rr;
static int rr_start(struct ds__svc *s);
static void rr_free(struct rr *r);

struct ds__failover {
	struct ds_nodeset set; /* the staged nodes of this step, rank order; n == 0: rank == node */
	int32_t *rank_of;      /* [nrank_of]: staged node -> rank, -1 lost */
	uint32_t nrank_of;
	struct ds_nodes_hist hist;
	uint64_t old_epoch;    /* the readers' epoch under the previous service */
	int old_readers;       /* did they read anything at all */
	uint32_t nstaged;
	struct rr *rr;         /* re-replication (below) */
};

int ds__failover_setup(struct ds__svc *s, uint32_t step_node)
{
	struct ds__failover *f = calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	s->fo = f;
	if (s->o.nodes) {
		if (ds_nodeset_parse(s->o.nodes, 0, &f->set)) {
			ds_error("--nodes '%s': not a list of node numbers (e.g. 0-1,3)", s->o.nodes);
			return -EINVAL;
		}
		if (f->set.n != s->nnodes) {
			ds_error("--nodes '%s' names %u node(s), this step runs %u", s->o.nodes, f->set.n,
			         s->nnodes);
			return -EINVAL;
		}
		s->node = f->set.node[step_node];
		f->nrank_of = f->set.node[f->set.n - 1] + 1;
		f->rank_of = malloc(f->nrank_of * sizeof(int32_t));
		if (!f->rank_of)
			return -ENOMEM;
		for (uint32_t i = 0; i < f->nrank_of; i++)
			f->rank_of[i] = -1;
		for (uint32_t r = 0; r < f->set.n; r++)
			f->rank_of[f->set.node[r]] = (int32_t)r;
	}
	return 0;
}

/* The epoch the previous service's readers were in, from NODEDIR/stats
 * (the service resets it when it opens the store: read before). */
static void old_epoch(struct ds__svc *s)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" DS_STATS_NAME, s->nodedir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct ds_stats st;
	if (pread(fd, &st, sizeof(st), 0) == (ssize_t)sizeof(st) && st.magic == DS_STATS_MAGIC) {
		s->fo->old_epoch = st.epoch;
		s->fo->old_readers = st.epoch || st.opens || st.served_reads;
	}
	close(fd);
}

void ds__failover_prior(struct ds__svc *s)
{
	if (s->fo)
		old_epoch(s);
}

int ds__failover_nodes_ok(const struct ds__svc *s, uint32_t staged_nnodes)
{
	const struct ds__failover *f = s->fo;
	if (!f || !f->set.n)
		return staged_nnodes == s->nnodes ? 0 : -EINVAL;
	return f->set.node[f->set.n - 1] < staged_nnodes ? 0 : -EINVAL;
}

int ds__rank_of(const struct ds__svc *s, uint32_t node)
{
	const struct ds__failover *f = s->fo;
	if (!f || !f->set.n)
		return node < s->nnodes ? (int)node : -1;
	return node < f->nrank_of ? f->rank_of[node] : -1;
}

int ds__failover_start(struct ds__svc *s)
{
	struct ds__failover *f = s->fo;
	int rank, rc = 0;
	MPI_Comm_rank(s->comm, &rank);
	f->nstaged = s->ix.h->nnodes;
	/* the highest epoch any survivor's readers were in */
	/* signed: MPI_MAX of unsigned types is wrong in some MPI libraries
	 * (docs/mpi.md); an epoch number is far below 2^63 */
	long long mine[2] = {(long long)f->old_epoch, f->old_readers}, all[2];
	if (MPI_Allreduce(mine, all, 2, MPI_LONG_LONG, MPI_MAX, s->comm) != MPI_SUCCESS)
		return -EIO;
	struct ds_nodes_hist h;
	rc = ds_nodes_load(s->jobdir, &h);
	if (rc) {
		ds_error("node %u: '%s/" DS_NODES_NAME "': %s", s->node, s->jobdir, ds_strerror(rc));
		return rc;
	}
	if (h.n && h.nstaged != f->nstaged) {
		/* from another staging of the job: not ours (stage removes it;
		 * readers ignore it; drop it unless a new one is written below) */
		char p[PATH_MAX];
		snprintf(p, sizeof(p), "%s/" DS_NODES_NAME, s->jobdir);
		unlink(p);
		ds_nodes_release(&h);
	}
	struct ds_nodeset cur;
	rc = f->set.n ? ds_nodeset_copy(&f->set, &cur) : ds_nodeset_all(s->nnodes, &cur);
	if (rc) {
		ds_nodes_release(&h);
		return rc;
	}
	int partial = !ds_nodeset_is_all(&cur, f->nstaged);
	if (h.n || partial || s->o.failover) {
		uint64_t from = all[1] ? (uint64_t)all[0] + 1 : 0;
		/* never deal an epoch again that an earlier set started: the
		 * readers' epoch is known only once they announced one */
		if (h.n && from < h.h[h.n - 1].from)
			from = h.h[h.n - 1].from;
		h.nstaged = f->nstaged;
		h.failover = h.failover || s->o.failover;
		if (!h.n) {
			/* the epochs before the first change were dealt over every node */
			struct ds_nodeset every;
			rc = ds_nodeset_all(f->nstaged, &every);
			if (!rc)
				rc = ds_nodes_add(&h, 0, &every);
			ds_nodeset_release(&every);
		}
		if (!rc)
			rc = ds_nodes_add(&h, from, &cur);
		/* a set never grows back: a node that was lost has no store any
		 * more (or an old one); serving it again needs a new stage */
		if (!rc)
			rc = ds_nodes_save(s->jobdir, &h);
		if (rc)
			ds_error("node %u: '%s/" DS_NODES_NAME "': %s", s->node, s->jobdir, ds_strerror(rc));
		else if (rank == 0 && partial) {
			char a[256];
			ds_nodeset_format(&cur, a, sizeof(a));
			ds_info("serving the surviving nodes %s of %u (epochs from %llu dealt over them)", a,
			        f->nstaged, (unsigned long long)from);
		}
	}
	ds_nodeset_release(&cur);
	f->hist = h;
	/* every rank goes on to the collectives of the copies together */
	if (ds_any_failed(s->comm, rc))
		return rc ? rc : -ECANCELED;
	rc = rr_start(s);
	if (rc)
		ds_error("node %u: re-replication: %s", s->node, ds_strerror(rc));
	return rc;
}

void ds__failover_free(struct ds__svc *s)
{
	struct ds__failover *f = s->fo;
	if (!f)
		return;
	ds_nodeset_release(&f->set);
	ds_nodes_release(&f->hist);
	rr_free(f->rr);
	free(f->rank_of);
	free(f);
	s->fo = NULL;
}

int ds__share(struct ds__svc *s, uint64_t e, uint32_t **ids, size_t *n)
{
	const struct ds_nodeset *set = s->fo ? ds_nodes_for_epoch(&s->fo->hist, e) : NULL;
	int rc = ds_epoch_share_set(&s->ix, &s->o.cfg, e, set, s->node, ids, n);
	if (rc == -ENOENT && set) {
		/* not in that epoch's set (cannot happen for a survivor): nothing */
		*ids = malloc(sizeof(uint32_t));
		*n = 0;
		return *ids ? 0 : -ENOMEM;
	}
	return rc;
}

void ds__share_publish(struct ds__svc *s, uint64_t e, const uint32_t *ids, size_t n)
{
	struct ds_share_key k;
	ds_share_key_make(&k, &s->ix, &s->o.cfg, e,
	                  s->fo ? ds_nodes_for_epoch(&s->fo->hist, e) : NULL, s->node);
	int rc = ds_share_publish(s->nodedir, &k, ids, n);
	if (rc)
		ds_info("node %u: epoch %llu: the share for the readers: %s (they compute it)",
		        s->node, (unsigned long long)e, ds_strerror(rc));
}

static int extra_holder(const struct ds__svc *s, uint32_t p, uint32_t skip, MPI_Aint *disp);

int ds__part_reachable(const struct ds__svc *s, uint32_t part)
{
	if (part >= s->ix.h->nparts)
		return 0;
	const struct ds_part *p = &s->ix.parts[part];
	for (uint32_t i = 0; i < p->nloc; i++) {
		uint32_t node = s->ix.locs[p->loc + i].node;
		if (node == s->node || ds__rank_of(s, node) >= 0)
			return 1;
	}
	MPI_Aint d;
	return extra_holder(s, part, UINT32_MAX, &d) >= 0;
}

int ds__no_holder(struct ds__svc *s, uint32_t id)
{
	if (!s->fo || !s->fo->set.n)
		return -EIO;
	uint32_t part = ds_ix_part(&s->ix, id);
	char holders[256] = "", name[PATH_MAX];
	if (part < s->ix.h->nparts) {
		const struct ds_part *p = &s->ix.parts[part];
		size_t w = 0;
		for (uint32_t i = 0; i < p->nloc && w < sizeof(holders) - 16; i++)
			w += (size_t)snprintf(holders + w, sizeof(holders) - w, "%s%u", i ? "," : "",
			                      s->ix.locs[p->loc + i].node);
	}
	ds_ix_path(&s->ix, id, name, sizeof(name));
	ds_warn("node %u: '%s': lost: every node holding it (%s) is gone", s->node, name, holders);
	return -EHOSTDOWN;
}

/* ---- re-replication ------------------------------------------------------
 * After a loss, a partition with fewer living holders than it was staged
 * with (at most the surviving node count) is copied, in the background,
 * from a living holder's window to the survivors with the least bytes of
 * copies planned (a pure function of the index, the set and the copies made
 * earlier: every rank computes the same plan).  A copy lands in
 * NODEDIR/replicas.<gen> (this step's generation), fetched with MPI_Get in
 * 8 MiB pieces while the epoch prefetch is idle; once every copy of the
 * generation is there, NODEDIR/replicas.<gen>.map ("part offset size" a
 * line) is written.  The next service start maps every complete generation
 * right after the store, in the same window, and tells every node where
 * (one allgather), so the copies serve reads and prefetches when the other
 * holder is lost too.  Zero bytes come from the shared file system.
 * Capacity: a node takes only the copies that fit in 90% of the free space
 * of its node directory, in plan order; the others are said and skipped. */
#include <sys/mman.h>
#include <sys/statvfs.h>

#define RR_CHUNK (8u << 20)
#define RR_MAX_GEN 64

struct rr_copy {
	uint32_t part;
	uint64_t size, off; /* in this generation's file */
	int src;            /* rank */
	MPI_Aint disp;
	uint64_t next;      /* bytes requested so far */
};

struct rr_extra { /* a copy somewhere in the set (gathered at start) */
	uint32_t part, node;
	uint64_t disp, size;
};

struct rr {
	/* copies made by earlier steps, mapped after the store */
	struct rr_extra *local; /* this node's: disp = offset in the window */
	size_t nlocal;
	int gens;               /* replicas.0 .. replicas.<gens-1> complete */
	uint64_t gen_len[RR_MAX_GEN]; /* their sizes (ds__failover_plan_extra) */
	/* every node's, sorted by part */
	struct rr_extra *all;
	size_t nall;
	uint32_t *first;        /* [nparts + 1] into all */
	/* this step's generation */
	struct rr_copy *c;
	size_t n, cur, done_bytes;
	uint64_t total;
	unsigned char *map;
	size_t map_len;
	size_t inflight_from, inflight_to; /* copies touched by the last issue */
	int busy, failed;
	double t0;
};

static struct rr *rr_of(struct ds__svc *s)
{
	if (!s->fo)
		return NULL;
	if (!s->fo->rr)
		s->fo->rr = calloc(1, sizeof(struct rr));
	return s->fo->rr;
}

static void rr_free(struct rr *r)
{
	if (!r)
		return;
	if (r->map)
		munmap(r->map, r->map_len);
	free(r->local);
	free(r->all);
	free(r->first);
	free(r->c);
	free(r);
}

static uint64_t page_up(uint64_t v)
{
	uint64_t p = (uint64_t)sysconf(_SC_PAGESIZE);
	return (v + p - 1) / p * p;
}

static int cmp_extra(const void *a, const void *b)
{
	const struct rr_extra *x = a, *y = b;
	if (x->part != y->part)
		return x->part < y->part ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

/* Where the copies of generation g live: NODEDIR/replicas.<g>, or, when
 * this node's store spills (stage --spill: its RAM room is taken), in its
 * spill tier's node directory, so that copies never land in a RAM the
 * budget has no room in (docs/failover.md).  The maps stay in NODEDIR. */
static int replica_data_path(const struct ds__svc *s, char *path, size_t len, int g)
{
	char dir[PATH_MAX];
	if (!ds_index_spills(&s->ix))
		return ds_store_replica_path(path, len, s->nodedir, g, 0);
	int rc = ds_store_spill_nodedir(&s->ix, dir, sizeof(dir), NULL);
	return rc ? rc : ds_store_replica_path(path, len, dir, g, 0);
}

/* Read NODEDIR/replicas.<g>.map; entries checked against the index and the
 * file size.  Returns the number of entries added or -1 (not usable). */
static int load_gen(struct ds__svc *s, struct rr *r, int g, uint64_t base, uint64_t *len)
{
	char path[PATH_MAX];
	ds_store_replica_path(path, sizeof(path), s->nodedir, g, 1);
	FILE *f = fopen(path, "re");
	if (!f)
		return -1;
	struct stat st;
	if (replica_data_path(s, path, sizeof(path), g) || stat(path, &st) < 0) {
		fclose(f);
		return -1;
	}
	unsigned long long part, off, size;
	int added = 0, bad = 0;
	while (fscanf(f, "%llu %llu %llu", &part, &off, &size) == 3) {
		if (part >= s->ix.h->nparts || size != s->ix.parts[part].size || off > (uint64_t)st.st_size ||
		    size > (uint64_t)st.st_size - off) {
			bad = 1;
			break;
		}
		struct rr_extra *nl = realloc(r->local, (r->nlocal + 1) * sizeof(*nl));
		if (!nl) {
			bad = 1;
			break;
		}
		r->local = nl;
		r->local[r->nlocal++] = (struct rr_extra){(uint32_t)part, s->node, base + off, size};
		added++;
	}
	fclose(f);
	if (bad) {
		r->nlocal -= (size_t)added;
		ds_warn("node %u: '%s.map': not a map of this store: copies not used", s->node, path);
		return -1;
	}
	*len = (uint64_t)st.st_size;
	return added;
}

int ds__failover_plan_extra(struct ds__svc *s, uint64_t *len)
{
	struct rr *r = rr_of(s);
	if (!r)
		return -ENOMEM;
	/* complete generations, in order; an incomplete one (no map: the step
	 * ended before its copies were all there) is removed */
	uint64_t total = page_up(s->store_len);
	int g;
	for (g = 0; g < RR_MAX_GEN; g++) {
		uint64_t glen = 0;
		if (load_gen(s, r, g, total, &glen) < 0)
			break;
		r->gen_len[g] = glen;
		total += page_up(glen);
	}
	r->gens = g;
	for (int k = g; k < RR_MAX_GEN; k++) {
		char path[PATH_MAX];
		replica_data_path(s, path, sizeof(path), k);
		if (unlink(path) < 0 && errno == ENOENT && k > g)
			break;
		ds_store_replica_path(path, sizeof(path), s->nodedir, k, 1);
		unlink(path);
	}
	*len = g ? total : s->store_len;
	return 0;
}

int ds__failover_map_extra(struct ds__svc *s, unsigned char *region, int populate)
{
	struct rr *r = rr_of(s);
	if (!r)
		return -ENOMEM;
	uint64_t at = page_up(s->store_len);
	for (int k = 0; k < r->gens; k++) {
		char path[PATH_MAX];
		replica_data_path(s, path, sizeof(path), k);
		int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0 || (r->gen_len[k] &&
		               mmap(region + at, r->gen_len[k], PROT_READ | PROT_WRITE,
		                    MAP_SHARED | MAP_FIXED | (populate ? MAP_POPULATE : 0), fd,
		                    0) == MAP_FAILED)) {
			int e = errno;
			if (fd >= 0)
				close(fd);
			ds_error("node %u: '%s': %s", s->node, path, strerror(e));
			return -e;
		}
		close(fd);
		at += page_up(r->gen_len[k]);
	}
	return 0;
}

/* Living holders of part p other than the index's, and where. */
static int extra_holder(const struct ds__svc *s, uint32_t p, uint32_t skip, MPI_Aint *disp)
{
	const struct rr *r = s->fo ? s->fo->rr : NULL;
	if (!r || !r->first || p >= s->ix.h->nparts)
		return -1;
	for (uint32_t i = r->first[p]; i < r->first[p + 1]; i++) {
		const struct rr_extra *x = &r->all[i];
		int rank = ds__rank_of(s, x->node);
		if (x->node == skip || rank < 0)
			continue;
		*disp = (MPI_Aint)x->disp;
		return rank;
	}
	return -1;
}

int ds__extra_holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp)
{
	MPI_Aint d;
	/* this node's own copy too: the shim does not know it, the get to
	 * ourselves reads it out of our window */
	int rank = extra_holder(s, ds_ix_part(&s->ix, id), UINT32_MAX, &d);
	if (rank < 0)
		return -ENOENT;
	*disp = d + (MPI_Aint)ds_ix_poff(&s->ix, id);
	return rank;
}

/* A living holder of part p (not this node), from the index or the copies. */
static int part_source(const struct ds__svc *s, uint32_t p, MPI_Aint *disp)
{
	const struct ds_part *pp = &s->ix.parts[p];
	for (uint32_t i = 0; i < pp->nloc; i++) {
		const struct ds_loc *l = &s->ix.locs[pp->loc + i];
		int rank = ds__rank_of(s, l->node);
		if (l->node != s->node && rank >= 0) {
			*disp = (MPI_Aint)l->base;
			return rank;
		}
	}
	return extra_holder(s, p, s->node, disp);
}

/* Collective: gather every node's extra copies into r->all, sorted by
 * partition, r->first[p] the first of partition p's. */
static int rr_gather(struct ds__svc *s, struct rr *r)
{
	uint32_t np = s->ix.h->nparts;
	int n = (int)s->nnodes;
	int cnt = (int)r->nlocal * 4, *cnts = calloc((size_t)n, sizeof(int)),
	    *displs = calloc((size_t)n, sizeof(int));
	if (!cnts || !displs) {
		free(cnts);
		free(displs);
		return -ENOMEM;
	}
	int rc = MPI_Allgather(&cnt, 1, MPI_INT, cnts, 1, MPI_INT, s->comm) == MPI_SUCCESS ? 0 : -EIO;
	size_t tot = 0;
	for (int i = 0; !rc && i < n; i++) {
		displs[i] = (int)tot;
		tot += (size_t)cnts[i];
	}
	uint64_t *mine = malloc(((size_t)cnt + 1) * sizeof(uint64_t)),
	         *every = malloc((tot + 1) * sizeof(uint64_t));
	if (!rc && (!mine || !every))
		rc = -ENOMEM;
	for (size_t i = 0; !rc && i < r->nlocal; i++) {
		mine[4 * i] = r->local[i].part;
		mine[4 * i + 1] = r->local[i].node;
		mine[4 * i + 2] = r->local[i].disp;
		mine[4 * i + 3] = r->local[i].size;
	}
	if (!rc && MPI_Allgatherv(mine, cnt, MPI_UINT64_T, every, cnts, displs, MPI_UINT64_T,
	                          s->comm) != MPI_SUCCESS)
		rc = -EIO;
	if (!rc) {
		r->nall = tot / 4;
		r->all = malloc((r->nall + 1) * sizeof(*r->all));
		r->first = calloc((size_t)np + 2, sizeof(uint32_t));
		if (!r->all || !r->first)
			rc = -ENOMEM;
	}
	for (size_t i = 0; !rc && i < r->nall; i++) {
		r->all[i] = (struct rr_extra){(uint32_t)every[4 * i], (uint32_t)every[4 * i + 1],
		                              every[4 * i + 2], every[4 * i + 3]};
		if (r->all[i].part >= np)
			rc = -EPROTO;
	}
	free(cnts);
	free(displs);
	free(mine);
	free(every);
	if (rc)
		return rc;
	qsort(r->all, r->nall, sizeof(*r->all), cmp_extra);
	for (size_t i = 0; i < r->nall; i++)
		r->first[r->all[i].part + 1]++;
	for (uint32_t p = 0; p < np; p++)
		r->first[p + 1] += r->first[p];
	return 0;
}

/* The re-replication plan of every rank, built the same on each. */
struct rr_plan {
	int n, me;         /* ranks; this one */
	uint64_t *planned; /* bytes planned per rank */
	uint8_t *has;      /* per rank: holds the partition planned now */
	uint64_t room;     /* this node's usable free space */
	size_t skipped;    /* partitions that do not fit in room */
	uint64_t skipped_bytes;
};

/* Mark the live ranks holding a copy of p (staged or extra); their number. */
static uint32_t rr_alive(struct ds__svc *s, struct rr *r, struct rr_plan *P, uint32_t p)
{
	const struct ds_part *pp = &s->ix.parts[p];
	memset(P->has, 0, (size_t)P->n);
	uint32_t alive = 0;
	for (uint32_t i = 0; i < pp->nloc; i++) {
		int rank = ds__rank_of(s, s->ix.locs[pp->loc + i].node);
		if (rank >= 0 && !P->has[rank]) {
			P->has[rank] = 1;
			alive++;
		}
	}
	for (uint32_t i = r->first[p]; i < r->first[p + 1]; i++) {
		int rank = ds__rank_of(s, r->all[i].node);
		if (rank >= 0 && !P->has[rank]) {
			P->has[rank] = 1;
			alive++;
		}
	}
	return alive;
}

/* Plan partition p's missing copies: each to the least loaded rank
 * without one; this rank's go into r->c. */
static int rr_plan_part(struct ds__svc *s, struct rr *r, struct rr_plan *P, uint32_t p)
{
	const struct ds_part *pp = &s->ix.parts[p];
	int n = P->n;
	uint32_t alive = rr_alive(s, r, P, p);
	uint32_t want = pp->nloc < (uint32_t)n ? pp->nloc : (uint32_t)n;
	while (alive && alive < want) {
		int best = -1;
		for (int k = 0; k < n; k++)
			if (!P->has[k] && (best < 0 || P->planned[k] < P->planned[best]))
				best = k;
		if (best < 0)
			break;
		P->has[best] = 1;
		alive++;
		P->planned[best] += pp->size;
		if (best != P->me)
			continue;
		if (r->total + page_up(pp->size) > P->room) {
			P->skipped++;
			P->skipped_bytes += pp->size;
			continue;
		}
		struct rr_copy *nc = realloc(r->c, (r->n + 1) * sizeof(*nc));
		if (!nc)
			return -ENOMEM;
		r->c = nc;
		MPI_Aint disp = 0;
		int src = part_source(s, p, &disp);
		if (src < 0)
			continue; /* alive counted this node only: cannot happen */
		r->c[r->n++] = (struct rr_copy){p, pp->size, r->total, src, disp, 0};
		r->total += page_up(pp->size);
	}
	return 0;
}

/* The plan: the same on every rank; this rank's copies in r->c. */
static int rr_make_plan(struct ds__svc *s, struct rr *r, int me)
{
	uint32_t np = s->ix.h->nparts;
	int rc = 0;
	struct rr_plan P = {(int)s->nnodes, me, NULL, NULL, 0, 0, 0};
	P.planned = calloc((size_t)P.n, sizeof(uint64_t));
	P.has = calloc((size_t)P.n, 1);
	if (!P.planned || !P.has) {
		free(P.planned);
		free(P.has);
		return -ENOMEM;
	}
	struct statvfs vf;
	char where[PATH_MAX], *slash;
	/* the free space where the copies go (the spill tier when it spills) */
	if (!replica_data_path(s, where, sizeof(where), 0) && (slash = strrchr(where, '/')))
		*slash = 0;
	else
		snprintf(where, sizeof(where), "%s", s->nodedir);
	P.room = !statvfs(where, &vf) ? (uint64_t)vf.f_bavail * vf.f_frsize / 10 * 9 : 0;
	for (uint32_t p = 0; p < np && !rc; p++)
		rc = rr_plan_part(s, r, &P, p);
	free(P.planned);
	free(P.has);
	if (P.skipped) {
		char a[32], b[32];
		ds_warn("node %u: re-replication: %zu partition(s) (%s) do not fit in the free space of "
		        "'%s' (%s usable): left with fewer copies",
		        s->node, P.skipped, ds_fmt_size(P.skipped_bytes, a, sizeof(a)), where,
		        ds_fmt_size(P.room, b, sizeof(b)));
	}
	return rc;
}

/* The file this node's new copies land in, mapped. */
static int rr_map(struct ds__svc *s, struct rr *r)
{
	char path[PATH_MAX];
	int rc;
	if ((rc = replica_data_path(s, path, sizeof(path), r->gens)))
		return rc;
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	r->map_len = (size_t)r->total;
	if (ftruncate(fd, (off_t)r->map_len) < 0 ||
	    (r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0)) ==
	        MAP_FAILED) {
		rc = -errno;
		r->map = NULL;
		close(fd);
		unlink(path);
		ds_error("node %u: '%s': %s", s->node, path, strerror(-rc));
		return rc;
	}
	close(fd);
	return 0;
}

/* Collective: gather every node's copies; plan this step's. */
static int rr_start(struct ds__svc *s)
{
	struct rr *r = rr_of(s);
	if (!r)
		return -ENOMEM;
	int me, rc;
	MPI_Comm_rank(s->comm, &me);
	if ((rc = rr_gather(s, r)))
		return rc;
	if (!s->fo->set.n || s->o.no_rerep)
		return 0; /* every staged node lives (nothing to copy), or told not to */
	if ((rc = rr_make_plan(s, r, me)) || !r->n)
		return rc;
	if ((rc = rr_map(s, r)))
		return rc;
	r->busy = 1;
	r->t0 = ds_now();
	char a[32];
	ds_info("node %u: re-replicating %zu partition(s), %s, from the survivors' stores", s->node, r->n,
	        ds_fmt_size(r->total, a, sizeof(a)));
	return 0;
}

size_t ds__rerep_issue(struct ds__svc *s, uint8_t *targets, size_t max_ops, uint64_t max_bytes)
{
	struct rr *r = s->fo ? s->fo->rr : NULL;
	if (!r || !r->busy || r->failed)
		return 0;
	size_t ops = 0;
	uint64_t bytes = 0;
	r->inflight_from = r->cur;
	while (r->cur < r->n && ops < max_ops && bytes < max_bytes) {
		struct rr_copy *c = &r->c[r->cur];
		uint64_t len = c->size - c->next < RR_CHUNK ? c->size - c->next : RR_CHUNK;
		if (len && ds__get(s, r->map + c->off + c->next, len, c->src, c->disp + (MPI_Aint)c->next)) {
			r->failed = 1;
			break;
		}
		if (len)
			targets[c->src] = 1;
		c->next += len;
		bytes += len;
		ops++;
		if (c->next == c->size)
			r->cur++;
	}
	r->inflight_to = r->cur;
	return ops;
}

void ds__rerep_complete(struct ds__svc *s, int ok)
{
	struct rr *r = s->fo ? s->fo->rr : NULL;
	if (!r || !r->busy)
		return;
	if (!ok)
		r->failed = 1;
	if (r->failed) {
		r->busy = 0;
		ds_warn("node %u: re-replication stopped by an error: the copies are not used", s->node);
		return;
	}
	if (r->cur < r->n)
		return;
	/* every copy landed: the map makes them the next service's */
	r->busy = 0;
	size_t cap = 64 + r->n * 64, len = 0;
	char *buf = malloc(cap), path[PATH_MAX];
	if (!buf)
		return;
	for (size_t i = 0; i < r->n; i++)
		len += (size_t)snprintf(buf + len, cap - len, "%u %llu %llu\n", r->c[i].part,
		                        (unsigned long long)r->c[i].off, (unsigned long long)r->c[i].size);
	msync(r->map, r->map_len, MS_SYNC);
	ds_store_replica_path(path, sizeof(path), s->nodedir, r->gens, 1);
	int rc = ds_write_file_atomic(path, buf, len, 0600);
	free(buf);
	char a[32];
	if (rc)
		ds_error("node %u: '%s': %s", s->node, path, ds_strerror(rc));
	else
		ds_info("node %u: re-replicated %zu partition(s), %s in %.2f s: R copies again (used from "
		        "the next restart)",
		        s->node, r->n, ds_fmt_size(r->total, a, sizeof(a)), ds_now() - r->t0);
}

int ds__rerep_busy(const struct ds__svc *s)
{
	const struct rr *r = s->fo ? s->fo->rr : NULL;
	return r && r->busy;
}
