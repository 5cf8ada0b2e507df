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
#include "svc.h"

#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct ds__failover {
	struct ds_nodeset set; /* the staged nodes of this step, rank order; n == 0: rank == node */
	int32_t *rank_of;      /* [nrank_of]: staged node -> rank, -1 lost */
	uint32_t nrank_of;
	struct ds_nodes_hist hist;
	uint64_t old_epoch;    /* the readers' epoch under the previous service */
	int old_readers;       /* did they read anything at all */
	uint32_t nstaged;
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
	unsigned long long mine[2] = {f->old_epoch, (unsigned long long)f->old_readers}, all[2];
	if (MPI_Allreduce(mine, all, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, s->comm) != MPI_SUCCESS)
		return -EIO;
	struct ds_nodes_hist h;
	rc = ds_nodes_load(s->jobdir, &h);
	if (rc) {
		ds_error("node %u: '%s/" DS_NODES_NAME "': %s", s->node, s->jobdir, ds_strerror(rc));
		return rc;
	}
	if (h.n && h.nstaged != f->nstaged) {
		/* from another staging of the job: not ours */
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
		uint64_t from = all[1] ? all[0] + 1 : 0;
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
	return rc;
}

void ds__failover_free(struct ds__svc *s)
{
	struct ds__failover *f = s->fo;
	if (!f)
		return;
	ds_nodeset_release(&f->set);
	ds_nodes_release(&f->hist);
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

int ds__reachable(const struct ds__svc *s, uint32_t id)
{
	const struct ds_entry *e = &s->ix.e[id];
	if (e->part >= s->ix.h->nparts)
		return 0;
	const struct ds_part *p = &s->ix.parts[e->part];
	for (uint32_t i = 0; i < p->nloc; i++) {
		uint32_t node = s->ix.locs[p->loc + i].node;
		if (node == s->node || ds__rank_of(s, node) >= 0)
			return 1;
	}
	return 0;
}

int ds__no_holder(struct ds__svc *s, uint32_t id)
{
	if (!s->fo || !s->fo->set.n)
		return -EIO;
	const struct ds_entry *e = &s->ix.e[id];
	char holders[256] = "";
	if (e->part < s->ix.h->nparts) {
		const struct ds_part *p = &s->ix.parts[e->part];
		size_t w = 0;
		for (uint32_t i = 0; i < p->nloc && w < sizeof(holders) - 16; i++)
			w += (size_t)snprintf(holders + w, sizeof(holders) - w, "%s%u", i ? "," : "",
			                      s->ix.locs[p->loc + i].node);
	}
	ds_warn("node %u: '%s': lost: every node holding it (%s) is gone", s->node,
	        ds_index_name(&s->ix, id), holders);
	return -EHOSTDOWN;
}
