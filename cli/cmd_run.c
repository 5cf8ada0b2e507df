/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_run.c: `dstage run OUT --to DIR [...]`: stage, then serve, in one job
 * step (one MPI_Init, one launch: the usual way in a batch script that has
 * nothing else to do between the two).
 *
 * Here in cli/, above both steps: stage/ and shuffle/ know nothing of each
 * other.  It drives each step through its module's face alone: stage's
 * (dsstage.h: its options and ds_stage_step) and the service's (dsserve.h:
 * its options and ds_serve_step, as serve.c's own command does). */
#include "cli.h"
#include "dscommon.h"
#include "dsmpi.h"
#include "dsserve.h"
#include "dsstage.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char *run_usage =
	"usage: dstage run OUT --to DIR [options]\n"
	"  (OUT: a pack, or a plain directory tree staged as it is)\n"
	"  MPI job step, one rank per node: 'dstage stage OUT --to DIR', then\n"
	"  'dstage serve --to DIR' until 'dstage stop', SIGTERM or the end of the job.\n"
	"  stage:  -R, --replicas N, --inflate, --force, --progress SECS,\n"
	"          --spill DIR (the spill tier), --replicate PATH and --expand-tar (OUT a\n"
	"          plain tree)\n"
	"  serve:  --seed S, --locality L, --drop-last, --shuffle-buffer SIZE, --timeout SECS,\n"
	"          --clean\n"
	"  outputs: --outputs SUBDIR, --drain-to DIR, --outputs-to DIR, --drain-rate SIZE,\n"
	"          --drain-timeout SECS, --outputs-replicas N (docs/outputs.md)\n"
	"  both:   --to DIR, --job ID, --node-per-rank, --ram-headroom SIZE|N%, -q/--quiet,\n"
	"          -v/--verbose, -h/--help\n"
	"  (see 'dstage stage --help' and 'dstage serve --help')\n";

int ds_cmd_run(int argc, char **argv)
{
	/* one table (mpi/stepopt.c); each value checked by its owner: serve's
	 * and the shared ones by ds_serve_opt, stage's by ds_stage_opt, with
	 * the limits and messages of `dstage stage` and `dstage serve` */
	struct ds_step_getopt g;
	ds_step_getopt(DS_STEP_RUN, &g);
	struct ds_serve_opts o;
	struct ds_stage_opts so;
	ds_serve_defaults(&o);
	ds_stage_defaults(&so);
	int c, bad = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, g.shortopts, g.lo, NULL)) != -1) {
		if (ds_serve_opt(&o, c, optarg, &bad)) {
			if (o.help) {
				fputs(run_usage, stdout);
				return 0;
			}
			continue;
		}
		if (!ds_stage_opt(&so, c, optarg, &bad)) {
			fputs(run_usage, stderr);
			return 2;
		}
	}
	if (argc - optind != 1 || !o.to) {
		fputs(run_usage, stderr);
		return 2;
	}
	if (bad || ds_serve_check_opts(&o))
		return 2;
	so.pack = argv[optind];
	so.to = o.to;
	so.job = o.job;
	so.node_per_rank = o.node_per_rank;
	so.headroom = o.headroom; /* --ram-headroom: one budget for the store and the cache */
	so.headroom_set = o.headroom_set;
	so.quiet = o.quiet > 0;
	if (ds_stage_check_opts(&so))
		return 2;
	ds_log_init(o.quiet > 0 ? -1 : o.quiet < 0 ? 1 : 0);

	ds_serve_env();
	if (ds_mpi_init(&argc, &argv)) /* the thread level: main.c's table */
		return 1;
	struct ds_node nd;
	if (ds_node_identify(MPI_COMM_WORLD, o.node_per_rank, &nd)) {
		MPI_Finalize();
		return 1;
	}
	ds_log_set_cmd("stage");
	/* the job directory stays ours from stage to the end of serve: nothing
	 * can come between them */
	int locked = 0;
	int rc = ds_step_lock(MPI_COMM_WORLD, o.to, o.job, "run", 1, &locked);
	if (!rc)
		rc = ds_stage_step(MPI_COMM_WORLD, &so, &nd);
	ds_node_release(&nd);
	if (!rc) {
		ds_log_set_cmd("serve");
		rc = ds_serve_step(MPI_COMM_WORLD, &o);
	}
	ds_step_unlock(o.to, o.job, locked);
	ds_serve_finalize();
	return rc;
}
