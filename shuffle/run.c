/* run.c: `dstage run OUT --to DIR [...]`: stage, then serve, in one job
 * step (one MPI_Init, one launch: the usual way in a batch script that has
 * nothing else to do between the two). */
#include "dsserve.h"
#include "dsstage.h"
#include "svc.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static const char *run_usage =
	"usage: dstage run OUT --to DIR [options]\n"
	"  MPI job step, one rank per node: 'dstage stage OUT --to DIR', then\n"
	"  'dstage serve --to DIR' until 'dstage stop', SIGTERM or the end of the job.\n"
	"  stage:  -R, --replicas N, --inflate, --force, --progress SECS\n"
	"  serve:  --seed S, --locality L, --drop-last, --shuffle-buffer SIZE, --timeout SECS,\n"
	"          --clean\n"
	"  both:   --to DIR, --job ID, --node-per-rank, -q, -v, -h\n"
	"  (see 'dstage stage --help' and 'dstage serve --help')\n";

int ds_cmd_run(int argc, char **argv)
{
	static const struct option lo[] = {
		{"to", required_argument, 0, 't'},        {"job", required_argument, 0, 'j'},
		{"node-per-rank", no_argument, 0, 'n'},   {"seed", required_argument, 0, 's'},
		{"locality", required_argument, 0, 'L'},  {"drop-last", no_argument, 0, 'd'},
		{"shuffle-buffer", required_argument, 0, 'B'}, {"timeout", required_argument, 0, 'T'},
		{"clean", no_argument, 0, 'c'},           {"quiet", no_argument, 0, 'q'},
		{"verbose", no_argument, 0, 'v'},         {"help", no_argument, 0, 'h'},
		{"replicas", required_argument, 0, 'R'},  {"inflate", no_argument, 0, 'i'},
		{"force", no_argument, 0, 'f'},           {"progress", required_argument, 0, 'P'},
		{"outputs", required_argument, 0, 'O'},   {"outputs-to", required_argument, 0, 'W'},
		{"drain-to", required_argument, 0, 'D'},  {"drain-rate", required_argument, 0, 'Y'},
		{"drain-timeout", required_argument, 0, 'X'},
		{0, 0, 0, 0}};
	struct ds__serve_opts o;
	struct ds_stage_opts so;
	ds__serve_defaults(&o);
	memset(&so, 0, sizeof(so));
	so.replicas = 1;
	int c, bad = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "R:qvh", lo, NULL)) != -1) {
		uint64_t v;
		double d;
		if (ds__serve_opt(&o, c, optarg, &bad)) {
			if (o.help) {
				fputs(run_usage, stdout);
				return 0;
			}
			continue;
		}
		switch (c) {
		case 'R':
			if (ds_parse_u64(optarg, &v) || v < 1 || v > UINT32_MAX) {
				ds_error("-R '%s': not a replication factor", optarg);
				bad = 1;
			}
			so.replicas = (uint32_t)v;
			break;
		case 'i': so.inflate = 1; break;
		case 'f': so.force = 1; break;
		case 'P':
			if (ds_parse_double(optarg, &d) || d < 0) {
				ds_error("--progress '%s': not a number of seconds", optarg);
				bad = 1;
			}
			so.progress = d;
			break;
		default: fputs(run_usage, stderr); return 2;
		}
	}
	if (argc - optind != 1 || !o.to) {
		fputs(run_usage, stderr);
		return 2;
	}
	if (bad || ds__out_check_opts(&o))
		return 2;
	so.pack = argv[optind];
	so.to = o.to;
	so.job = o.job;
	so.node_per_rank = o.node_per_rank;
	so.quiet = o.quiet > 0;
	ds_log_init(o.quiet > 0 ? -1 : o.quiet < 0 ? 1 : 0);

	ds__serve_env();
	/* stage asks for MPI_THREAD_MULTIPLE on its own; give it the same */
	int provided;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	if (provided < MPI_THREAD_FUNNELED) {
		ds_error("this MPI gives thread level %d, the service needs MPI_THREAD_FUNNELED", provided);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
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
		rc = ds__serve_step(MPI_COMM_WORLD, &o);
	}
	ds_step_unlock(o.to, o.job, locked);
	ds__serve_finalize();
	return rc;
}
