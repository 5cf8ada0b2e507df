/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_epoch.c: `dstage epoch`: the epoch lists, the node set each epoch is
 * dealt over, and exact resume from a checkpoint (docs/failover.md).  No
 * MPI: it reads this node's index, JOBDIR/epoch.conf and JOBDIR/nodes,
 * the same pure functions the shim's lists come from. */
#include "dscommon.h"
#include "dsindex.h"
#include "dsnodeset.h"
#include "dsstage.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *epoch_usage =
	"usage: dstage epoch --to DIR [--job ID] [--node K] EPOCH [L-of-N]\n"
	"       dstage epoch --to DIR [--job ID] --nodes-of EPOCH\n"
	"       dstage epoch --to DIR [--job ID] --state EPOCH K [--readers N]\n"
	"       dstage epoch --to DIR [--job ID] [--node K] --resume STATE [L-of-N]\n"
	"  EPOCH [L-of-N]   the paths node K (or its reader L of N) reads in EPOCH, one a line:\n"
	"                   the shim's .dstage/epochs/EPOCH/all (L-of-N) over the node set\n"
	"                   the epoch is dealt over\n"
	"  --nodes-of E     the node set epoch E is dealt over: 'SET of STAGED'\n"
	"  --state E K      the resume state (JSON) of a checkpoint taken when every reader\n"
	"                   had read the first K samples of its list of epoch E; save it\n"
	"                   next to the checkpoint\n"
	"  --readers N      readers per node when the checkpoint was taken (default 1)\n"
	"  --resume STATE   the samples of the checkpoint's epoch not read yet, for node K\n"
	"                   (reader L of N): on the same nodes and readers exactly the rest of\n"
	"                   the reader's list; otherwise every remaining sample once over the\n"
	"                   nodes the job runs on now\n"
	"  --to DIR, --job ID  the staged job (as for stage)\n"
	"  --node K         the node (default $DSTAGE_NODE, else $SLURM_NODEID, else 0)\n"
	"  -h, --help       this text\n";

struct eopts {
	const char *to, *job, *resume;
	long node;
	int nodes_of, state, help;
	uint32_t readers;
	/* the operands */
	uint64_t epoch, k; /* EPOCH; --state's sample position K */
	const char *lofn;  /* a reader's L-of-N, parsed into l and nr */
	uint32_t l, nr;
};

static int parse_lofn(const char *s, uint32_t *l, uint32_t *n)
{
	const char *of = strstr(s, "-of-");
	uint64_t a, b;
	char tmp[32];
	if (!of || (size_t)(of - s) >= sizeof(tmp))
		return -1;
	memcpy(tmp, s, (size_t)(of - s));
	tmp[of - s] = 0;
	if (ds_parse_u64(tmp, &a) || ds_parse_u64(of + 4, &b) || !b || a >= b || b > UINT32_MAX)
		return -1;
	*l = (uint32_t)a;
	*n = (uint32_t)b;
	return 0;
}

/* The paths of ids, one a line (ds_ix_list: built in id order).  The exit
 * status. */
static int print_list(const struct ds_index *ix, const char *path, const uint32_t *ids, size_t n)
{
	char *text;
	size_t len;
	int rc = ds_ix_list(ix, ids, n, &text, &len);
	if (rc) {
		ds_error("'%s': the list's paths: %s", path, ds_strerror(rc));
		return 1;
	}
	errno = 0;
	if (fwrite(text, 1, len, stdout) != len || fflush(stdout)) {
		ds_error("standard output: %s", strerror(errno ? errno : EIO));
		rc = 1;
	}
	free(text);
	return rc ? 1 : 0;
}

/* ---- the state file: one flat JSON object ----------------------------- */
/* The value of "key" in a flat JSON object: a number or a string (no
 * escapes: node sets and hex only).  0, or -1 when absent/malformed. */
static int json_get(const char *js, const char *key, char *val, size_t len)
{
	char pat[64];
	snprintf(pat, sizeof(pat), "\"%s\"", key);
	const char *p = strstr(js, pat);
	if (!p)
		return -1;
	p += strlen(pat);
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	if (*p++ != ':')
		return -1;
	while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
		p++;
	size_t w = 0;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (*p == '\\' || w + 1 >= len)
				return -1;
			val[w++] = *p;
		}
		if (*p != '"')
			return -1;
	} else {
		for (; *p && (*p == '-' || *p == '.' || *p == 'e' || *p == 'E' || *p == '+' ||
		              (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z'));
		     p++) {
			if (w + 1 >= len)
				return -1;
			val[w++] = *p;
		}
	}
	val[w] = 0;
	return w ? 0 : -1;
}

static int json_u64(const char *js, const char *key, uint64_t *v)
{
	char b[64];
	if (json_get(js, key, b, sizeof(b)))
		return -1;
	if (!strcmp(b, "true") || !strcmp(b, "false")) {
		*v = b[0] == 't';
		return 0;
	}
	return ds_parse_u64(b, v);
}

static int load_state(const char *path, const struct ds_index *ix, const struct ds_epoch_cfg *cfg,
                      struct ds_resume *r)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		ds_error("'%s': %s", path, strerror(errno));
		return -1;
	}
	char buf[16384];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	char fmt[32], set[4096], loc[64], pack[32];
	uint64_t version, epoch, k, readers, staged, seed, drop, samples;
	if (json_get(buf, "format", fmt, sizeof(fmt)) || strcmp(fmt, "dstage-resume") ||
	    json_u64(buf, "version", &version) || json_u64(buf, "epoch", &epoch) ||
	    json_u64(buf, "k", &k) || json_u64(buf, "readers", &readers) ||
	    json_get(buf, "nodes", set, sizeof(set)) || json_u64(buf, "staged", &staged) ||
	    json_u64(buf, "seed", &seed) || json_get(buf, "locality", loc, sizeof(loc)) ||
	    json_u64(buf, "drop_last", &drop) || json_u64(buf, "samples", &samples) ||
	    json_get(buf, "pack_id", pack, sizeof(pack))) {
		ds_error("'%s': not a dstage resume state (dstage epoch --state)", path);
		return -1;
	}
	if (version != 1) {
		ds_error("'%s': resume state version %llu, this dstage reads 1", path,
		         (unsigned long long)version);
		return -1;
	}
	char mypack[32];
	snprintf(mypack, sizeof(mypack), "%016llx", (unsigned long long)ix->h->pack_id);
	double l;
	if (ds_parse_double(loc, &l))
		l = -1;
	if (strcmp(pack, mypack) || samples != ix->h->nsamples) {
		ds_error("'%s': taken on another pack (%s, %llu samples; this job: %s, %u)", path, pack,
		         (unsigned long long)samples, mypack, ix->h->nsamples);
		return -1;
	}
	if (seed != cfg->seed || l != cfg->locality || (int)drop != cfg->drop_last) {
		ds_error("'%s': taken with seed %llu, locality %s, drop_last %d; this job's service runs "
		         "seed %llu, locality %g, drop_last %d: start it with the checkpoint's",
		         path, (unsigned long long)seed, loc, (int)drop, (unsigned long long)cfg->seed,
		         cfg->locality, cfg->drop_last);
		return -1;
	}
	if (!readers || readers > UINT32_MAX || ds_nodeset_parse(set, 0, &r->from)) {
		ds_error("'%s': bad readers or nodes", path);
		return -1;
	}
	if (cfg->locality > 0 && (staged != ix->h->nnodes || r->from.node[r->from.n - 1] >= staged)) {
		/* with locality the lists depend on the placement of that staging */
		ds_error("'%s': taken on a staging of %llu node(s) with --locality %g: resume needs that "
		         "staging (this job has %u node(s)); or run with --locality 0",
		         path, (unsigned long long)staged, cfg->locality, ix->h->nnodes);
		ds_nodeset_release(&r->from);
		return -1;
	}
	r->epoch = epoch;
	r->k = k;
	r->nreaders = (uint32_t)readers;
	return 0;
}

/* The options.  -1: go on; else the exit status (0: --help, 2: usage). */
static int epoch_options(int argc, char **argv, struct eopts *o)
{
	static const struct option lo[] = {{"to", required_argument, 0, 't'},
	                                   {"job", required_argument, 0, 'j'},
	                                   {"node", required_argument, 0, 'n'},
	                                   {"nodes-of", no_argument, 0, 'S'},
	                                   {"state", no_argument, 0, 's'},
	                                   {"readers", required_argument, 0, 'r'},
	                                   {"resume", required_argument, 0, 'R'},
	                                   {"help", no_argument, 0, 'h'},
	                                   {0, 0, 0, 0}};
	int c, bad = 0;
	uint64_t v;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't': o->to = optarg; break;
		case 'j': o->job = optarg; break;
		case 'n':
			if (ds_parse_u64(optarg, &v) || v > INT32_MAX) {
				ds_error("--node '%s': not a node number", optarg);
				bad = 1;
			}
			o->node = (long)v;
			break;
		case 'S': o->nodes_of = 1; break;
		case 's': o->state = 1; break;
		case 'r':
			if (ds_parse_u64(optarg, &v) || !v || v > UINT32_MAX) {
				ds_error("--readers '%s': not a number of readers", optarg);
				bad = 1;
			}
			o->readers = (uint32_t)v;
			break;
		case 'R': o->resume = optarg; break;
		case 'h': fputs(epoch_usage, stdout); return 0;
		default: fputs(epoch_usage, stderr); return 2;
		}
	}
	if (bad)
		return 2;
	if (!o->to) {
		ds_error("need --to DIR");
		return 2;
	}
	return -1;
}

/* The operands (EPOCH [K] [L-of-N]) and the node (--node, DSTAGE_NODE,
 * SLURM_NODEID, else 0).  -1: go on; else the exit status (2: usage). */
static int epoch_operands(int argc, char **argv, struct eopts *o)
{
	uint64_t v;
	int nargs = argc - optind, want_min = o->resume ? 0 : 1,
	    want_max = o->state      ? 2
	               : o->nodes_of ? 1
	               : o->resume   ? 1
	                             : 2;
	if (o->state)
		want_min = 2;
	if (nargs < want_min || nargs > want_max ||
	    (o->state + o->nodes_of + (o->resume != NULL)) > 1) {
		fputs(epoch_usage, stderr);
		return 2;
	}
	if (!o->resume && ds_parse_u64(argv[optind], &o->epoch)) {
		ds_error("'%s': not an epoch number", argv[optind]);
		return 2;
	}
	if (o->state && ds_parse_u64(argv[optind + 1], &o->k)) {
		ds_error("'%s': not a sample position", argv[optind + 1]);
		return 2;
	}
	if (!o->state && !o->nodes_of && nargs == want_max)
		o->lofn = argv[argc - 1];
	if (o->lofn && parse_lofn(o->lofn, &o->l, &o->nr)) {
		ds_error("'%s': not a reader L-of-N", o->lofn);
		return 2;
	}
	if (o->node < 0) {
		const char *e = getenv("DSTAGE_NODE");
		if (!e || !*e)
			e = getenv("SLURM_NODEID");
		o->node = 0;
		if (e && *e && (ds_parse_u64(e, &v) || v > INT32_MAX)) {
			ds_error("node '%s': not a node number", e);
			return 2;
		}
		if (e && *e)
			o->node = (long)v;
	}
	return -1;
}

/* What one epoch command reads and holds (ds_cmd_epoch). */
struct epoch_run {
	char *jobdir, *nodedir;
	char path[PATH_MAX]; /* the node's index */
	struct ds_index ix;
	int ix_open;
	struct ds_epoch_cfg cfg;
	struct ds_nodes_hist h;
	struct ds_resume r;
	uint32_t *ids;
	size_t n;
};

/* Open the node's index, the epoch configuration and the node sets.
 * 0, or nonzero (said). */
static int epoch_open(struct epoch_run *E)
{
	int rc = ds_index_open(&E->ix, E->path, 1);
	if (rc) {
		ds_error("'%s': %s%s", E->path, ds_strerror(rc),
		         rc == -ENOENT ? " (run dstage stage first)" : "");
		return 1;
	}
	E->ix_open = 1;
	if ((rc = ds_epoch_cfg_load(E->jobdir, &E->cfg))) {
		ds_error("'%s/epoch.conf': %s", E->jobdir, ds_strerror(rc));
		return 1;
	}
	if ((rc = ds_nodes_load(E->jobdir, &E->h))) {
		ds_error("'%s/" DS_NODES_NAME "': %s", E->jobdir, ds_strerror(rc));
		return 1;
	}
	if (E->h.n && E->h.nstaged != E->ix.h->nnodes) {
		ds_error("'%s/" DS_NODES_NAME "': for %u staged nodes, the index has %u", E->jobdir,
		         E->h.nstaged, E->ix.h->nnodes);
		return 1;
	}
	return 0;
}

/* --nodes-of and --state: the epoch's node set, alone or in a resume
 * state.  The exit status. */
static int epoch_print_nodes(struct epoch_run *E, const struct eopts *o)
{
	const struct ds_nodeset *set = ds_nodes_for_epoch(&E->h, o->epoch);
	struct ds_nodeset all = {0, NULL};
	char text[4096];
	if (!set) {
		ds_nodeset_all(E->ix.h->nnodes, &all);
		set = &all;
	}
	int rc = ds_nodeset_format(set, text, sizeof(text));
	ds_nodeset_release(&all);
	if (rc) {
		ds_error("epoch %llu: the node set does not fit", (unsigned long long)o->epoch);
		return 1;
	}
	if (o->nodes_of) {
		printf("%s of %u\n", text, E->ix.h->nnodes);
	} else {
		printf("{\"format\": \"dstage-resume\", \"version\": 1, \"epoch\": %llu, \"k\": %llu, "
		       "\"readers\": %u, \"nodes\": \"%s\", \"staged\": %u, \"seed\": %llu, "
		       "\"locality\": %.17g, \"drop_last\": %d, \"samples\": %u, \"pack_id\": "
		       "\"%016llx\"}\n",
		       (unsigned long long)o->epoch, (unsigned long long)o->k, o->readers, text,
		       E->ix.h->nnodes, (unsigned long long)E->cfg.seed, E->cfg.locality,
		       E->cfg.drop_last, E->ix.h->nsamples, (unsigned long long)E->ix.h->pack_id);
	}
	return 0;
}

/* The node's (or one reader's) list of the epoch, or of the rest of a
 * resumed one.  The exit status. */
static int epoch_print_list(struct epoch_run *E, const struct eopts *o)
{
	int rc;
	if ((rc = ds_index_check_shuffle(&E->ix))) {
		ds_error("'%s': %s", E->path, ds_strerror(rc));
		return 1;
	}
	if (o->resume) {
		if (load_state(o->resume, &E->ix, &E->cfg, &E->r))
			return 1;
		/* the nodes the job runs on now: the latest set */
		const struct ds_nodeset *to = E->h.n ? &E->h.h[E->h.n - 1].set : NULL;
		if (to && ds_nodeset_is_all(to, E->ix.h->nnodes))
			to = NULL;
		rc = ds_resume_list(&E->ix, &E->cfg, &E->r, to, (uint32_t)o->node,
		                    o->lofn ? o->l : 0, o->lofn ? o->nr : 1, &E->ids, &E->n);
	} else {
		rc = ds_epoch_share_set(&E->ix, &E->cfg, o->epoch,
		                        ds_nodes_for_epoch(&E->h, o->epoch), (uint32_t)o->node,
		                        &E->ids, &E->n);
		if (!rc && o->lofn) {
			uint32_t *part = NULL;
			size_t np = 0;
			rc = ds_epoch_reader_slice(E->ids, E->n, o->l, o->nr, E->cfg.drop_last,
			                           &part, &np);
			free(E->ids);
			E->ids = part;
			E->n = np;
		}
	}
	if (rc) {
		ds_error("node %ld: %s", o->node,
		         rc == -ENOENT ? "not one of the nodes the epoch is dealt over"
		                       : ds_strerror(rc));
		return 1;
	}
	return print_list(&E->ix, E->path, E->ids, E->n);
}

int ds_cmd_epoch(int argc, char **argv)
{
	struct eopts o = {NULL, NULL, NULL, -1, 0, 0, 0, 1, 0, 0, NULL, 0, 0};
	int ret = epoch_options(argc, argv, &o);
	if (ret < 0)
		ret = epoch_operands(argc, argv, &o);
	if (ret >= 0)
		return ret;

	const char *job = o.job && *o.job ? o.job : ds_store_default_job();
	struct epoch_run E;
	memset(&E, 0, sizeof(E));
	E.jobdir = ds_store_jobdir(o.to, job);
	E.nodedir = ds_store_nodedir(o.to, job, (uint32_t)o.node);
	ds_store_path(E.path, sizeof(E.path), E.nodedir, DS_INDEX_NAME);
	if (epoch_open(&E))
		ret = 1;
	else if (o.nodes_of || o.state)
		ret = epoch_print_nodes(&E, &o);
	else
		ret = epoch_print_list(&E, &o);
	free(E.ids);
	ds_nodeset_release(&E.r.from);
	ds_nodes_release(&E.h);
	if (E.ix_open)
		ds_index_close(&E.ix);
	free(E.jobdir);
	free(E.nodedir);
	return ret;
}
