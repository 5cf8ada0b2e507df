/* SPDX-License-Identifier: BSD-3-Clause */
/* direct.c: remote reads fetched by the socket thread itself.
 *
 * A remote read used to cross five threads in three processes: the reader,
 * this node's socket thread, its main thread (MPI_Get and MPI_Win_flush),
 * the target's main thread (the progress that answers the get), then this
 * node's socket thread again and the reader.  Each hand-over is a wake-up,
 * and on a node whose cores the training keeps busy each wake-up is a wait
 * for a core.  With MPI_THREAD_MULTIPLE the socket thread issues the gets
 * and the flush itself: two wake-ups fewer per read.  The reads that arrive
 * in one turn of its poll loop form one batch (one flush per target), as
 * main's did.
 *
 * Main keeps the epoch prefetch, and the reads this path does not take:
 *   - a read whose holders in the index are all gone (after a loss): the
 *     re-replicated copies are found through a table main updates;
 *   - a read whose get or flush failed: main fetches it again, and when that
 *     fails too it stops the service on every node (the agreement) as it
 *     always did;
 *   - every read when MPI gives less than MPI_THREAD_MULTIPLE, or with
 *     DSTAGE_SERVE_DIRECT=0 (measurements).
 *
 * The targets are told to poll MPI (progress.c) on a channel of their own,
 * so that main's END never stops the polls a read of ours still needs. */
#include "dsmpi.h"
#include "svc.h"

#include <stdlib.h>
#include <string.h>

#define REFRESH 0.25     /* s between BEGINs while reads keep coming */
#define END_AFTER 0.002  /* s without reads to a target before END */

struct ds__direct {
	uint8_t *targets; /* per rank: gets of this batch to it */
	double *sent;     /* per rank: last BEGIN sent, 0: none outstanding */
	double *used;     /* per rank: last batch with reads from it */
	unsigned nbegun;
};

int ds__direct_start(struct ds__svc *s)
{
	int level = ds_mpi_provided();
	const char *e = getenv("DSTAGE_SERVE_DIRECT");
	if (level < MPI_THREAD_MULTIPLE || (e && !strcmp(e, "0"))) {
		ds_info("node %u: remote reads: fetched by the main thread (%s)", s->node,
		        level < MPI_THREAD_MULTIPLE ? "MPI gives less than MPI_THREAD_MULTIPLE"
		                                    : "DSTAGE_SERVE_DIRECT=0");
		return 0;
	}
	struct ds__direct *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->targets = calloc(s->nnodes, 1);
	d->sent = calloc(s->nnodes, sizeof(double));
	d->used = calloc(s->nnodes, sizeof(double));
	if (!d->targets || !d->sent || !d->used) {
		s->direct = d;
		ds__direct_stop(s);
		return -ENOMEM;
	}
	s->direct = d;
	ds_info("node %u: remote reads: fetched by the socket thread (MPI_THREAD_MULTIPLE)", s->node);
	return 0;
}

void ds__direct_stop(struct ds__svc *s)
{
	struct ds__direct *d = s->direct;
	if (!d)
		return;
	free(d->targets);
	free(d->sent);
	free(d->used);
	free(d);
	s->direct = NULL;
}

int ds__direct_holder(const struct ds__svc *s, uint32_t id, MPI_Aint *disp)
{
	if (!s->direct)
		return -1;
	uint32_t part = ds_ix_part(&s->ix, id);
	if (part >= s->ix.h->nparts)
		return -1;
	const struct ds_part *p = &s->ix.parts[part];
	/* the holder main would pick (window.c: ds__holder), index copies only */
	for (uint32_t i = 0; i < p->nloc; i++) {
		const struct ds_loc *l = &s->ix.locs[p->loc + (id + s->node + i) % p->nloc];
		int rank = ds__rank_of(s, l->node);
		if (l->node == s->node || rank < 0)
			continue;
		*disp = (MPI_Aint)(l->base + ds_ix_poff(&s->ix, id));
		return rank;
	}
	return -1;
}

int ds__direct_fetch(struct ds__svc *s, struct ds__rreq *list)
{
	struct ds__direct *d = s->direct;
	for (struct ds__rreq *r = list; r; r = r->next) {
		MPI_Aint disp;
		int t = ds__direct_holder(s, r->id, &disp);
		r->buf = malloc(r->len ? r->len : 1);
		r->status = t < 0 ? -EIO : !r->buf ? -ENOMEM : 0;
		if (!r->status)
			r->status = ds__get(s, r->buf, r->len, t, disp + (MPI_Aint)r->off);
		if (!r->status)
			d->targets[t] = 1;
	}
	double now = ds_now();
	for (uint32_t t = 0; t < s->nnodes; t++) {
		if (!d->targets[t])
			continue;
		d->used[t] = now;
		if (d->sent[t] && now - d->sent[t] < REFRESH)
			continue;
		if (!d->sent[t])
			d->nbegun++;
		d->sent[t] = now;
		ds__pw_sock(s, t, 1);
	}
	int rc = ds__flush(s, d->targets); /* clears d->targets */
	return (int)ds__rreq_settle(list, rc);
}

double ds__direct_idle(struct ds__svc *s)
{
	struct ds__direct *d = s->direct;
	if (!d || !d->nbegun)
		return -1;
	double now = ds_now(), next = -1;
	for (uint32_t t = 0; t < s->nnodes; t++) {
		if (!d->sent[t])
			continue;
		double due = d->used[t] + END_AFTER;
		if (now >= due) {
			ds__pw_sock(s, t, 0);
			d->sent[t] = 0;
			d->nbegun--;
		} else if (next < 0 || due - now < next) {
			next = due - now;
		}
	}
	return next;
}
