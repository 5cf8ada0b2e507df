/* SPDX-License-Identifier: BSD-3-Clause */
/* stepopt.c: the option table of the job steps stage, serve and run
 * (dsmpi.h).  A name, a getopt code, whether it has a short form, and the
 * commands that take it.  Run takes stage's and serve's options but for
 * serve's failover ones (a run always stages every node).  The values are
 * checked by their owner's one handler (ds_stage_opt, ds_serve_opt,
 * ds_out_opt), whichever command they come with. */
#include "dscommon.h"
#include "dsmpi.h"

#include <string.h>

#define ST DS_STEP_STAGE
#define SV DS_STEP_SERVE
#define RN DS_STEP_RUN

static const struct stepopt {
	const char *name;
	int has_arg;
	int code;
	int short_too; /* -CODE as well as --NAME */
	unsigned cmds;
} table[] = {
	/* every step */
	{"to", required_argument, 't', 0, ST | SV | RN},
	{"job", required_argument, 'j', 0, ST | SV | RN},
	{"node-per-rank", no_argument, 'n', 0, ST | SV | RN},
	{"quiet", no_argument, 'q', 1, ST | SV | RN},
	{"verbose", no_argument, 'v', 1, SV | RN},
	{"help", no_argument, 'h', 1, ST | SV | RN},
	/* stage: ds_stage_opt */
	{"replicas", required_argument, 'R', 1, ST | RN},
	{"inflate", no_argument, 'i', 0, ST | RN},
	{"force", no_argument, 'f', 0, ST | RN},
	{"progress", required_argument, 'P', 0, ST | RN},
	/* the RAM budget: ds_headroom_opt (common/membudget.c), stage and serve */
	{"ram-headroom", required_argument, 'H', 0, ST | SV | RN},
	{"spill", required_argument, 'Z', 0, ST | RN}, /* the spill tier */
	{"replicate", required_argument, 'E', 0, ST | RN}, /* a plain tree's subtree */
	{"expand-tar", no_argument, 'G', 0, ST | RN},      /* a plain tree's tar shards */
	/* serve: ds_serve_opt */
	{"seed", required_argument, 's', 0, SV | RN},
	{"locality", required_argument, 'L', 0, SV | RN},
	{"drop-last", no_argument, 'd', 0, SV | RN},
	{"shuffle-buffer", required_argument, 'B', 0, SV | RN},
	{"timeout", required_argument, 'T', 0, SV | RN},
	{"clean", no_argument, 'c', 0, SV | RN},
	{"nodes", required_argument, 'N', 0, SV},
	{"failover", no_argument, 'F', 0, SV},
	{"no-rereplicate", no_argument, 'x', 0, SV},
	/* serve's outputs: ds_out_opt (outputs/outputs.c) */
	{"outputs", required_argument, 'O', 0, SV | RN},
	{"outputs-to", required_argument, 'W', 0, SV | RN},
	{"drain-to", required_argument, 'D', 0, SV | RN},
	{"drain-rate", required_argument, 'Y', 0, SV | RN},
	{"drain-timeout", required_argument, 'X', 0, SV | RN},
	{"outputs-replicas", required_argument, 'K', 0, SV | RN}, /* outputs/outrepl.c */
};

_Static_assert(sizeof(table) / sizeof(table[0]) < DS_STEP_MAXOPTS,
               "DS_STEP_MAXOPTS: room for every option and the end");

void ds_step_getopt(unsigned cmd, struct ds_step_getopt *g)
{
	memset(g, 0, sizeof(*g));
	size_t n = 0, k = 0;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const struct stepopt *t = &table[i];
		if (!(t->cmds & cmd))
			continue;
		g->lo[n].name = t->name;
		g->lo[n].has_arg = t->has_arg;
		g->lo[n].val = t->code;
		n++;
		if (t->short_too && k + 3 < sizeof(g->shortopts)) {
			g->shortopts[k++] = (char)t->code;
			if (t->has_arg)
				g->shortopts[k++] = ':';
		}
	}
}
