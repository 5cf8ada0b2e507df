/* SPDX-License-Identifier: BSD-3-Clause */
/* gather.c: the figures of every node, gathered by the service over MPI and
 * published in each node's store, so that `dstage status` on any node shows
 * the whole job (on a cluster a node sees only its own /dev/shm).
 *
 * Every GATHER_EVERY-th completed agreement, each service rank starts an
 * MPI_Iallgather of one fixed record (its node's figures) on the service
 * communicator.  The agreements complete in the same order on every rank,
 * so the collectives are started in the same order everywhere; the gather
 * completes in the background of the loop and the result is written to
 * JOBDIR/status.all (ds_write_file_atomic: a reader sees the old or the new
 * file, whole).  One record per node, no fixed limit on the nodes. */
#include "dsstatus.h"
#include "svc.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define GATHER_EVERY 5 /* agreements (AGREE_PERIOD 0.1 s: twice a second) */

static struct {
	MPI_Request req;
	int inflight;
	unsigned long ticks;
	uint64_t files, bytes; /* of this node, from its index, once */
	uint64_t mine[DS_STATUS_FIELDS];
	uint64_t *all;
} g;

/* The record of this node: the columns of `dstage status`, in order. */
static void fill(struct ds__svc *s, uint64_t *r)
{
	const struct ds_stats *st = s->stats;
#define L(f) __atomic_load_n(&st->f, __ATOMIC_RELAXED)
	uint64_t v[DS_STATUS_FIELDS] = {s->node,          g.files,           g.bytes,
	                                s->ix.h->store_size, L(local_reads),  L(cache_reads),
	                                L(remote_reads),  L(stalls),         L(served_reads),
	                                L(epoch),         L(prefetch_done),  L(prefetch_total),
	                                L(fetched_bytes)};
#undef L
	memcpy(r, v, sizeof(v));
}

/* status.all's size: the header line, then per node DS_STATUS_FIELDS numbers
 * of up to 20 digits (a uint64) with a separator each */
#define HEADER_MAX 128
#define NUMBER_MAX 21

static void publish(struct ds__svc *s)
{
	size_t cap = HEADER_MAX + (size_t)s->nnodes * DS_STATUS_FIELDS * NUMBER_MAX;
	char *buf = ds_xcalloc(cap, 1), path[PATH_MAX];
	size_t len = (size_t)snprintf(buf, cap, "%s %u\n", DS_STATUS_MAGIC, s->nnodes);
	for (uint32_t k = 0; k < s->nnodes; k++) {
		for (int f = 0; f < DS_STATUS_FIELDS; f++)
			len += (size_t)snprintf(buf + len, cap - len, "%s%llu", f ? " " : "",
			                        (unsigned long long)g.all[(size_t)k * DS_STATUS_FIELDS + f]);
		len += (size_t)snprintf(buf + len, cap - len, "\n");
	}
	ds_store_path(path, sizeof(path), s->jobdir, DS_STATUS_ALL);
	int rc = ds_write_file_atomic(path, buf, len, 0600);
	if (rc)
		ds_warn("'%s': %s", path, ds_strerror(rc));
	free(buf);
}

void ds__gather_start(struct ds__svc *s)
{
	memset(&g, 0, sizeof(g));
	g.req = MPI_REQUEST_NULL;
	for (uint32_t i = 0; i < s->ix.h->nentries; i++) {
		if (S_ISREG(ds_ix_mode(&s->ix, i)) &&
		    ds_index_part_on(&s->ix, ds_ix_part(&s->ix, i), s->node, NULL)) {
			g.files++;
			g.bytes += ds_ix_size(&s->ix, i);
		}
	}
	g.all = ds_xcalloc((size_t)s->nnodes * DS_STATUS_FIELDS, sizeof(uint64_t));
}

void ds__gather_tick(struct ds__svc *s)
{
	/* Whether to start a gather must be decided the same way on every
	 * rank: by the count of agreements alone.  Whether this rank's previous
	 * gather has completed is its own affair: a rank that skipped a tick
	 * because of it while the others started one would pair its next
	 * collective with theirs (MPI matches collectives by order), and the
	 * agreement would read the figures as its flags (seen on 4 hosts over
	 * TCP: "node 22100 failed").  A gather every rank started 5
	 * agreements ago completes: wait for it. */
	if (g.ticks++ % GATHER_EVERY)
		return;
	if (g.inflight) {
		MPI_Wait(&g.req, MPI_STATUS_IGNORE);
		g.inflight = 0;
		publish(s);
	}
	fill(s, g.mine);
	MPI_Iallgather(g.mine, DS_STATUS_FIELDS, MPI_UINT64_T, g.all, DS_STATUS_FIELDS, MPI_UINT64_T,
	               s->comm, &g.req);
	g.inflight = 1;
}

void ds__gather_poll(struct ds__svc *s)
{
	int done = 0;
	if (!g.inflight)
		return;
	/* tests: this rank never sees its gather done in the loop, as a rank
	 * too busy to test it before the next gather is due */
	if (ds_fault("serve.gather.late", (int)s->node))
		return;
	MPI_Test(&g.req, &done, MPI_STATUS_IGNORE);
	if (done) {
		g.inflight = 0;
		publish(s);
	}
}

void ds__gather_end(struct ds__svc *s, int peers_alive)
{
	char path[PATH_MAX];
	/* a gather every rank started completes on every rank that lives */
	if (g.inflight && peers_alive)
		MPI_Wait(&g.req, MPI_STATUS_IGNORE);
	g.inflight = 0;
	/* the service is gone: no figures of other nodes that look current */
	ds_store_path(path, sizeof(path), s->jobdir, DS_STATUS_ALL);
	unlink(path);
	free(g.all);
	g.all = NULL;
}
