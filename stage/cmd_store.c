/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_store.c: commands on a node store that need no MPI: env, status,
 * clean; and the host -> node note readers use outside Slurm. */
#include "dscommon.h"
#include "dsindex.h"
#include "dslock.h"
#include "dsoutputs.h"
#include "dsproto.h"
#include "stage_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

void ds__stage_note_host(const char *jobdir, const struct ds_node *nd)
{
	char host[256] = "";
	int n;
	gethostname(host, sizeof(host) - 1);
	MPI_Comm_size(nd->leaders, &n);
	char *all = ds_xcalloc(n, sizeof(host));
	MPI_Allgather(host, sizeof(host), MPI_CHAR, all, sizeof(host), MPI_CHAR, nd->leaders);
	int unique = 1;
	for (int i = 0; i < n && unique; i++)
		for (int j = i + 1; j < n && unique; j++)
			unique = strcmp(all + i * sizeof(host), all + j * sizeof(host)) != 0;
	free(all);
	if (!unique || !*host)
		return; /* several nodes on one host: readers say DSTAGE_NODE */
	char dir[PATH_MAX], link[PATH_MAX + 256], target[16];
	if (ds_store_path(dir, sizeof(dir), jobdir, DS_BYHOST_NAME) ||
	    (mkdir(dir, 0700) < 0 && errno != EEXIST))
		return;
	snprintf(link, sizeof(link), "%s/%s", dir, host);
	snprintf(target, sizeof(target), "%u", nd->node);
	unlink(link);
	if (symlink(target, link) < 0)
		ds_warn("'%s': %s", link, strerror(errno));
}

/* ---- common option parsing for --to/--job/--node ------------------------ */
struct store_opts {
	const char *to, *job, *mount;
	long node;
	int force, help;
};

static int parse_store_opts(int argc, char **argv, struct store_opts *o, const char *usage)
{
	static const struct option lo[] = {
		{"to", required_argument, 0, 't'},    {"job", required_argument, 0, 'j'},
		{"node", required_argument, 0, 'k'},  {"mount", required_argument, 0, 'm'},
		{"force", no_argument, 0, 'f'},       {"help", no_argument, 0, 'h'},
		{"node-per-rank", no_argument, 0, 'n'}, {0, 0, 0, 0}};
	memset(o, 0, sizeof(*o));
	o->node = -1;
	optind = 1;
	int c;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		uint64_t v;
		switch (c) {
		case 't': o->to = optarg; break;
		case 'j': o->job = optarg; break;
		case 'm': o->mount = optarg; break;
		case 'f': o->force = 1; break;
		case 'n': break; /* accepted for symmetry with stage/serve */
		case 'k':
			if (ds_parse_u64(optarg, &v) || v > UINT32_MAX) {
				ds_error("--node '%s': not a node number", optarg);
				return 2;
			}
			o->node = (long)v;
			break;
		case 'h':
			fputs(usage, stdout);
			o->help = 1;
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind != argc || !o->to) {
		fputs(usage, stderr);
		return 2;
	}
	return 0;
}

static int jobdir_ok(const char *jobdir)
{
	struct stat st;
	if (lstat(jobdir, &st) < 0) {
		ds_error("'%s': %s (not staged?)", jobdir, strerror(errno));
		return -errno;
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		ds_error("'%s': not a store directory of this user", jobdir);
		return -EPERM;
	}
	return 0;
}

/* ---- env ---------------------------------------------------------------- */
static const char *env_usage =
	"usage: dstage env --to DIR [--job ID] [--node K] [--mount PREFIX]\n"
	"  print the export lines a reader on this node (or simulated node K) needs:\n"
	"  eval \"$(dstage env --to DIR)\"\n";

/* Where the preload library and the Python helper live, relative to this
 * binary: PREFIX/bin/dstage -> PREFIX/lib, PREFIX/share/dstage/python (make
 * install); in the build tree build/bin/dstage -> build/lib and io/python.
 * The installed layout is tried first: from PREFIX/bin, ../../io/python is
 * a folder outside the prefix that nothing of dstage's made. */
static int find_beside(const char *rel1, const char *rel2, char *out, size_t len)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	const char *rels[2] = {rel1, rel2};
	for (int i = 0; i < 2; i++) {
		if (!rels[i])
			continue;
		char cand[PATH_MAX + 64];
		snprintf(cand, sizeof(cand), "%s/%s", exe, rels[i]);
		char *real = realpath(cand, NULL);
		if (real) {
			snprintf(out, len, "%s", real);
			free(real);
			return 0;
		}
	}
	return -ENOENT;
}

static void print_quoted(const char *name, const char *val)
{
	printf("export %s='", name);
	for (const char *p = val; *p; p++) {
		if (*p == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*p);
	}
	printf("'\n");
}

int ds_cmd_env(int argc, char **argv)
{
	struct store_opts o;
	int rc = parse_store_opts(argc, argv, &o, env_usage);
	if (rc || o.help)
		return rc;
	char lib[PATH_MAX], py[PATH_MAX];
	if (find_beside("../lib/libdstage-preload.so", NULL, lib, sizeof(lib))) {
		ds_error("'libdstage-preload.so': not found beside this dstage (../lib/)");
		return 1;
	}
	char *jobdir = ds_store_jobdir(o.to, o.job);
	char *abs = jobdir ? realpath(jobdir, NULL) : NULL;
	if (!abs || jobdir_ok(abs)) {
		if (!abs)
			ds_error("'%s': not staged (%s)", jobdir ? jobdir : o.to, strerror(errno));
		free(jobdir);
		free(abs);
		return 1;
	}
	if (o.node >= 0) {
		char nd[PATH_MAX + 32];
		struct stat st;
		snprintf(nd, sizeof(nd), "%s/%ld/" DS_INDEX_NAME, abs, o.node);
		if (stat(nd, &st) < 0) {
			ds_error("node %ld: '%s': %s", o.node, nd, strerror(errno));
			free(jobdir);
			free(abs);
			return 1;
		}
	}
	const char *mount = o.mount ? o.mount : getenv("DSTAGE_MOUNT");
	if (!mount || !*mount)
		mount = "/dstage";
	if (mount[0] != '/') {
		ds_error("mount '%s': must be an absolute path", mount);
		return 2;
	}
	const char *pre = getenv("LD_PRELOAD");
	char *ld = NULL;
	if (pre && *pre && !strstr(pre, lib)) {
		if (asprintf(&ld, "%s:%s", lib, pre) < 0)
			return 1;
	} else {
		ld = ds_xstrdup(lib);
	}
	print_quoted("LD_PRELOAD", ld);
	print_quoted("DSTAGE_STORE", abs);
	print_quoted("DSTAGE_MOUNT", mount);
	if (o.node >= 0)
		printf("export DSTAGE_NODE=%ld\n", o.node);
	if (!find_beside("../share/dstage/python", "../../io/python", py, sizeof(py))) {
		const char *pp = getenv("PYTHONPATH");
		char *v = NULL;
		if (pp && *pp && !strstr(pp, py)) {
			if (asprintf(&v, "%s:%s", py, pp) < 0)
				return 1;
		} else {
			v = ds_xstrdup(py);
		}
		print_quoted("PYTHONPATH", v);
		free(v);
	}
	free(ld);
	free(jobdir);
	free(abs);
	return 0;
}

/* ---- status ------------------------------------------------------------- */
uint64_t *ds__spill_bytes(const struct ds_index *ix)
{
	uint64_t *sp = ds_xcalloc(ix->h->nnodes + 1, sizeof(uint64_t));
	for (uint32_t p = 0; p < ix->h->nparts; p++) {
		const struct ds_part *pt = &ix->parts[p];
		for (uint32_t i = 0; i < pt->nloc; i++) {
			const struct ds_loc *l = &ix->locs[pt->loc + i];
			if (l->tier == DS_TIER_SPILL && l->node < ix->h->nnodes)
				sp[l->node] += (pt->size + DS_STORE_ALIGN - 1) / DS_STORE_ALIGN * DS_STORE_ALIGN;
		}
	}
	return sp;
}

static const char *status_usage =
	"usage: dstage status --to DIR [--job ID] [--node K]\n"
	"  per-node figures of every node of the job while its service runs (else of\n"
	"  the node stores on this host, and it says so): files and\n"
	"  bytes held, reads served locally / from the epoch cache / remotely,\n"
	"  reads served to other nodes, epoch and prefetch progress\n";

/* The service's state on a node stored here, from NODEDIR/serve.status
 * (DS_SS_STATE): "" without the file; "starting" and "running" only while
 * the pid it names lives (a killed service cannot rewrite them: "gone"). */
static void serve_state(const char *jobdir, const char *name, char *state, size_t len)
{
	char path[PATH_MAX], line[256];
	long pid = 0;
	*state = 0;
	ds_store_node_path(path, sizeof(path), jobdir, name, DS_SERVE_STATUS_NAME);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = 0;
		if (!strncmp(line, DS_SS_STATE "=", strlen(DS_SS_STATE) + 1))
			snprintf(state, len, "%.*s", (int)len - 1, line + strlen(DS_SS_STATE) + 1);
		else
			sscanf(line, DS_SS_PID "=%ld", &pid);
	}
	fclose(f);
	/* node stores are node-local: the pid is one of this host */
	if ((!strcmp(state, "starting") || !strcmp(state, "running")) &&
	    (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno == ESRCH)))
		snprintf(state, len, "gone");
}

static int node_status(const char *jobdir, const char *name)
{
	char path[PATH_MAX];
	struct ds_index ix;
	ds_store_node_path(path, sizeof(path), jobdir, name, DS_INDEX_NAME);
	int rc = ds_index_open(&ix, path, 0);
	if (rc) {
		ds_error("'%s': %s", path, ds_strerror(rc));
		return rc;
	}
	uint64_t files = 0, bytes = 0;
	for (uint32_t i = 0; i < ix.h->nentries; i++) {
		if (S_ISREG(ds_ix_mode(&ix, i)) &&
		    ds_index_part_on(&ix, ds_ix_part(&ix, i), ix.h->node, NULL)) {
			files++;
			bytes += ds_ix_size(&ix, i);
		}
	}
	struct ds_stats st;
	memset(&st, 0, sizeof(st));
	ds_store_node_path(path, sizeof(path), jobdir, name, DS_STATS_NAME);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		void *m = mmap(NULL, sizeof(st), PROT_READ, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED) {
			/* relaxed snapshots of counters others update atomically */
			const uint64_t *src = m;
			uint64_t *dst = (uint64_t *)&st;
			for (size_t i = 0; i < sizeof(st) / 8; i++)
				dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
			munmap(m, sizeof(st));
		}
		close(fd);
	}
	ds_store_node_path(path, sizeof(path), jobdir, name, DS_SOCK_NAME);
	struct stat sst;
	char state[32];
	serve_state(jobdir, name, state, sizeof(state));
	const char *svc = "-";
	if (!strcmp(state, "starting"))
		svc = "start";
	else if (stat(path, &sst) == 0 && strcmp(state, "gone"))
		svc = "up";
	char a[32], b[32], c[32], d[32], e[32];
	printf("%-5u %9llu %10s %10s %7llu %7llu %7llu %7llu %7llu %6s %6llu %6llu/%-6llu %10s %10s "
	       "%10s\n",
	       ix.h->node, (unsigned long long)files, ds_fmt_size(bytes, a, sizeof(a)),
	       ds_fmt_size(ix.h->store_size, b, sizeof(b)), (unsigned long long)st.local_reads,
	       (unsigned long long)st.cache_reads, (unsigned long long)st.remote_reads,
	       (unsigned long long)st.stalls, (unsigned long long)st.served_reads, svc,
	       (unsigned long long)st.epoch, (unsigned long long)st.prefetch_done,
	       (unsigned long long)st.prefetch_total, ds_fmt_size(st.fetched_bytes, c, sizeof(c)),
	       ds_fmt_size(ix.h->ram_size, d, sizeof(d)),
	       ds_fmt_size(ix.h->store_size - ix.h->ram_size, e, sizeof(e)));
	ds_index_close(&ix);
	return 0;
}

/* The service's report of the last epoch of a node (NODEDIR/serve.status,
 * key=value lines written by shuffle/): what the shuffle cost in locality
 * and randomness. */
static void node_epoch_report(const char *jobdir, const char *name)
{
	char path[PATH_MAX], line[1024], last[1024] = "", state[32];
	double l0 = -1, o0 = -1;
	/* only a live service's: a stopped or killed one's would read as now */
	serve_state(jobdir, name, state, sizeof(state));
	if (strcmp(state, "running"))
		return;
	ds_store_node_path(path, sizeof(path), jobdir, name, DS_SERVE_STATUS_NAME);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, DS_SS_EPOCH, strlen(DS_SS_EPOCH)))
			snprintf(last, sizeof(last), "%s", line);
		sscanf(line, DS_SS_LOCAL_L0 "=%lf", &l0);
		sscanf(line, DS_SS_OVERLAP_L0 "=%lf", &o0);
	}
	fclose(f);
	unsigned long long e, share, moved;
	double local, overlap, fetch_s;
	if (sscanf(last,
	           DS_SS_EPOCH "%llu=share=%llu share_bytes=%*u local=%lf fetched=%*u "
	                       "moved_bytes=%llu overlap_prev=%lf fetch_s=%lf",
	           &e, &share, &local, &moved, &overlap, &fetch_s) != 6)
		return;
	char a[32];
	printf("node %s epoch %llu: share %llu samples, %.0f%% local (L=0 expects %.0f%%), moved %s in "
	       "%.3f s",
	       name, e, share, 100 * local, 100 * l0, ds_fmt_size(moved, a, sizeof(a)), fetch_s);
	if (overlap >= 0)
		printf(", %.0f%% also held the epoch before (L=0 expects %.0f%%)", 100 * overlap, 100 * o0);
	printf("\n");
}

static int name_num_cmp(const void *x, const void *y)
{
	long a = atol(*(char *const *)x), b = atol(*(char *const *)y);
	return a < b ? -1 : a > b;
}

int ds_cmd_status(int argc, char **argv)
{
	struct store_opts o;
	int rc = parse_store_opts(argc, argv, &o, status_usage);
	if (rc || o.help)
		return rc;
	char *jobdir = ds_store_jobdir(o.to, o.job);
	if (jobdir_ok(jobdir)) {
		free(jobdir);
		return 1;
	}
	DIR *d = opendir(jobdir);
	if (!d) {
		ds_error("'%s': %s", jobdir, strerror(errno));
		free(jobdir);
		return 1;
	}
	char **names = NULL; /* no limit on the nodes stored here */
	size_t n = 0, cap = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *p = de->d_name;
		if (!*p || strspn(p, "0123456789") != strlen(p))
			continue; /* node directories are numbers */
		if (o.node >= 0 && atol(p) != o.node)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			names = ds_xrealloc(names, cap * sizeof(*names));
		}
		names[n++] = ds_xstrdup(p);
	}
	closedir(d);
	if (n)
		qsort(names, n, sizeof(names[0]), name_num_cmp);
	/* ram, spill: the node's store in each tier (stage --spill), last so
	 * that scripts reading the columns before them keep working */
	printf("%-5s %9s %10s %10s %7s %7s %7s %7s %7s %6s %6s %13s %10s %10s %10s\n", "node", "files",
	       "bytes", "store", "local", "cache", "remote", "stalls", "served", "svc", "epoch",
	       "prefetch", "fetched", "ram", "spill");
	/* every node of the job when the service runs (it gathers them over
	 * MPI, stage/status.c); else only what this host stores */
	unsigned long all = 0;
	int up = ds__status_service_up(jobdir);
	uint64_t *spill = NULL;
	size_t nspill = 0;
	if (up && n) {
		char ip[PATH_MAX];
		struct ds_index ix;
		if (!ds_store_node_path(ip, sizeof(ip), jobdir, names[0], DS_INDEX_NAME) &&
		    !ds_index_open(&ix, ip, 1)) {
			spill = ds__spill_bytes(&ix);
			nspill = ix.h->nnodes;
			ds_index_close(&ix);
		}
	}
	int prc = up ? ds__status_print_all(jobdir, o.node, names, n, node_status, &all, spill,
	                                    nspill)
	             : -ENOENT;
	free(spill);
	if (prc > 0)
		rc = 1;
	if (prc < 0) {
		/* a service that holds the job but does not answer yet (its start
		 * takes seconds at millions of files) is starting, not down */
		int starting = 0;
		for (size_t i = 0; i < n; i++) {
			char state[32];
			serve_state(jobdir, names[i], state, sizeof(state));
			starting |= !strcmp(state, "starting");
			if (node_status(jobdir, names[i]))
				rc = 1;
		}
		/* on stderr: the table stays one row per node for scripts */
		fflush(stdout);
		const char *why = up ? "service up, nothing gathered yet" : "service down";
		if (!up && starting)
			why = "service starting";
		fprintf(stderr,
		        "dstage: status: '%s': %s: figures of the node(s) stored on this host only\n",
		        jobdir, why);
	}
	for (size_t i = 0; i < n; i++) {
		node_epoch_report(jobdir, names[i]);
		ds_outputs_status_line(jobdir, names[i]); /* outputs/cmd_drain.c */
		free(names[i]);
	}
	free(names);
	if (n == 0 && all == 0) {
		ds_error("'%s': no node store here", jobdir);
		rc = 1;
	}
	free(jobdir);
	return rc;
}

/* ---- clean -------------------------------------------------------------- */
static const char *clean_usage =
	"usage: dstage clean --to DIR [--job ID]\n"
	"  remove this job's node store on this host (run as a job step with one\n"
	"  task per node to clean every node); refused while a stage or a service\n"
	"  of the job runs here (stop it first: dstage stop --to DIR)\n";

/* Clean under the job's lock: never under a running stage or service
 * (refused, naming it).  A clean of another task on this host, or a
 * service that is leaving (dstage stop), is waited for (CLEAN_WAIT s). */
/* Every node store's spill tier here, before the job directory goes. */
static int spill_clean(const char *jobdir)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return 0;
	int rc = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *p = de->d_name;
		char nd[PATH_MAX];
		if (!*p || strspn(p, "0123456789") != strlen(p) ||
		    ds_store_path(nd, sizeof(nd), jobdir, p))
			continue; /* node directories are numbers */
		int r = ds_store_spill_remove(nd);
		if (r) {
			ds_error("'%s': the spill tier: %s", nd, ds_strerror(r));
			rc = r;
		}
	}
	closedir(d);
	return rc;
}

#define CLEAN_WAIT 30
#define CLEAN_POLL_US 50000 /* between two tries */
static int clean_locked(const char *jobdir, const char *to)
{
	char who[384];
	int rc;
	for (double until = ds_now() + CLEAN_WAIT;;) {
		rc = ds_joblock_take(jobdir, "clean", who, sizeof(who));
		if (rc == -ENOENT)
			return 0; /* gone meanwhile: another task on this host was first */
		if (rc != -EBUSY || !(strstr(who, "dstage clean") || strstr(who, "leaving")) ||
		    ds_now() > until)
			break;
		usleep(CLEAN_POLL_US);
	}
	if (rc) {
		ds_lock_refusal(jobdir, to, who, rc);
		return 1;
	}
	ds_outputs_clean(jobdir); /* --outputs-to areas outside the job directory */
	rc = spill_clean(jobdir);  /* the spill tiers (stage --spill) */
	if (rc) {
		ds_joblock_drop(jobdir);
		return 1;
	}
	rc = ds_joblock_remove_dir(jobdir, 1);
	ds_joblock_drop(jobdir);
	if (rc && rc != -ENOENT) {
		ds_error("'%s': %s", jobdir, ds_strerror(rc));
		return 1;
	}
	return 0;
}

int ds_cmd_clean(int argc, char **argv)
{
	struct store_opts o;
	int rc = parse_store_opts(argc, argv, &o, clean_usage);
	if (rc || o.help)
		return rc;
	char *jobdir = ds_store_jobdir(o.to, o.job);
	/* one look: the tasks of a step on one host clean the same directory,
	 * and it may go between two (a second lstat said "not staged?") */
	struct stat st;
	if (lstat(jobdir, &st) < 0) {
		int e = errno;
		if (e != ENOENT)
			ds_error("'%s': %s (not staged?)", jobdir, strerror(e));
		free(jobdir);
		return e != ENOENT; /* ENOENT: another task on this host was first */
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		ds_error("'%s': not a store directory of this user", jobdir);
		free(jobdir);
		return 1;
	}
	rc = clean_locked(jobdir, o.to);
	free(jobdir);
	return rc;
}
