/* SPDX-License-Identifier: BSD-3-Clause */
/* outhost.c: the service hosts the write-once outputs (outputs/dsoutputs.h,
 * docs/outputs.md): it hands them its communicator, the node it serves and
 * its node set (which rank serves a node after a failover), its stats and
 * its main loop's wake-ups, and nothing else of itself. */
#include "dsoutputs.h"
#include "svc.h"

#include <stdlib.h>

static int host_rank_of(void *ctx, uint32_t node) { return ds__rank_of(ctx, node); }

static void host_wake(void *ctx)
{
	struct ds__svc *s = ctx;
	ds__wake(s->wake_main);
}

/* the peer's main may sleep up to 50 ms between polls (progress.c): wake
 * it, or each hop of a publish (REQ, APPLY, ACK, DONE) waits for it, 65 ms
 * per close measured (bench/outputs.sh) */
static void host_poke(void *ctx, int rank)
{
	struct ds__svc *s = ctx;
	if (!ds__pw_on(s) || rank < 0 || (uint32_t)rank >= s->nnodes)
		return;
	uint8_t *t = ds_xcalloc(s->nnodes, 1);
	t[rank] = 1;
	ds__pw_begin(s, t);
	free(t);
}

int ds__out_start(struct ds__svc *s)
{
	struct ds_out_host h = {
		.comm = s->comm,
		.node = s->node,
		.nnodes = s->nnodes,
		.staged_nnodes = s->ix.h->nnodes,
		.nodedir = s->nodedir,
		.to = s->o.to,
		.job = s->o.job,
		.stats = s->stats,
		.ctx = s,
		.rank_of = host_rank_of,
		.wake = host_wake,
		.poke = host_poke,
	};
	return ds_out_start(&h, &s->o.out, &s->out);
}

void ds__out_free(struct ds__svc *s)
{
	ds_out_free(s->out);
	s->out = NULL;
}
