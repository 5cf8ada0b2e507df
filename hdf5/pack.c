/* SPDX-License-Identifier: BSD-3-Clause */
/* pack.c: `dstage pack [opts] SRC OUT`.
 *
 * Serial, or under mpiexec with P ranks:
 *   1. rank 0 checks SRC and OUT, makes OUT/.tmp-<pid>, scans SRC and plans
 *      the partitions (scan.c, plan.c); the plan is broadcast;
 *   2. rank r writes partitions r, r+P, r+2P, ... into the temporary
 *      directory with the serial HDF5 API (writer.c); after each round all
 *      ranks agree whether anyone failed (MPI_LOR), so a failure stops
 *      every rank within one partition's time;
 *   3. the offsets, sizes and CRCs of every file reach rank 0, which writes
 *      index.h5 and renames everything into OUT, index.h5 last.
 * With --in-place, step 2 writes no partition: each rank reads its
 * partitions' files where they are, once, for their CRC-32C
 * (inplace.c), and OUT gets index.h5 alone, naming SRC as the source.
 * Any failure: every rank exits 1, the failing one saying why, and the
 * temporary directory (and OUT, when pack made it) is removed.  Nothing
 * half-written is ever visible under its final name.
 *
 * MPI is initialised only when a process manager launched us (PMI in the
 * environment): a plain `dstage pack` on a login node needs no MPI at all. */
#include "pack_int.h"
#include "dsmpi.h"
#include "dss3.h"

#include <mpi.h>

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct pack_opts {
	const char *src, *out;
	uint32_t nparts;
	uint64_t part_size;
	uint32_t codec, level;
	char **exclude, **replicate;
	size_t nexclude, nreplicate;
	const char *files_from;
	int dereference, force, quiet, verbose, fsync;
	int in_place;           /* --in-place: OUT holds the manifest only */
	int expand_tar;         /* --expand-tar: each *.tar a directory of its members */
	double progress;
};

static const char usage_text[] =
	"usage: dstage pack [OPTIONS] SRC OUT\n"
	"\n"
	"Pack the tree SRC into the directory OUT: part-NNNNN.h5 partitions and the\n"
	"manifest index.h5.  Serial, or in parallel under mpiexec -n P (the output is\n"
	"byte-identical for every P).  SRC and OUT may be s3://BUCKET/PREFIX: objects\n"
	"as the tree, a pack written as objects (AWS_* variables, ~/.aws profiles).\n"
	"\n"
	"  -p, --partitions N     N partitions for the training files (replicated files\n"
	"                         get extra partitions of about the same size)\n"
	"  -S, --part-size SIZE   about SIZE bytes per partition (64MiB, 1GiB; default 1GiB)\n"
	"  -z, --compress CODEC   none (default), zlib or zlib:LEVEL (1-9): per file,\n"
	"                         kept only where it saves at least 5%\n"
	"      --replicate PATH   the subtree PATH (relative to SRC) goes to every node,\n"
	"                         e.g. the validation set (repeatable)\n"
	"      --files-from FILE  pack exactly the paths listed in FILE, one per line,\n"
	"                         relative to SRC ('-': standard input)\n"
	"      --exclude GLOB     leave out entries whose path or name matches GLOB\n"
	"                         (a directory: with its subtree; repeatable)\n"
	"      --dereference      pack what symlinks leaving SRC point to, instead of\n"
	"                         skipping them\n"
	"      --in-place         write only the manifest (with every file's CRC-32C)\n"
	"                         into OUT: stage reads the files where they are in SRC\n"
	"      --expand-tar       with --in-place: every *.tar is a directory of its\n"
	"                         members, read from the tar where they lie (--exclude\n"
	"                         matches X.tar/MEMBER and the member's name too)\n"
	"  -f, --force            OUT may hold a previous pack: replace it\n"
	"      --no-fsync         do not fsync the files before renaming them into OUT\n"
	"      --progress SECS    a progress line every SECS seconds (default 10 on a\n"
	"                         terminal, else none; 0: none)\n"
	"  -q, --quiet            errors only: no warnings, progress or summary\n"
	"  -v, --verbose          more messages\n"
	"  -h, --help             this text\n";

/* ---- MPI, when launched by a process manager ---------------------------- */
struct comm {
	int mpi, rank, size;
};

static int launched_by_mpi(void)
{
	static const char *const vars[] = {"PMI_RANK", "PMI_SIZE", "PMI_FD", "PMI_PORT",
	                                   "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		if (getenv(vars[i]))
			return 1;
	return 0;
}

static int comm_init(struct comm *c, int *argc, char ***argv)
{
	int inited = 0;
	c->mpi = 0;
	c->rank = 0;
	c->size = 1;
	MPI_Initialized(&inited);
	if (!inited && !launched_by_mpi())
		return 0;
	/* the thread level: cli/main.c's table; 1: said, MPI left */
	if (!inited && ds_mpi_init(argc, argv))
		return -1;
	c->mpi = !inited ? 2 : 1; /* 2: ours to finalize */
	MPI_Comm_rank(MPI_COMM_WORLD, &c->rank);
	MPI_Comm_size(MPI_COMM_WORLD, &c->size);
	return 0;
}

static void comm_finalize(struct comm *c)
{
	if (c->mpi == 2)
		MPI_Finalize();
}

/* Did any rank fail?  Every rank calls this at the same points (the MPI
 * layer's agreement: without MPI, just `failed`). */
static int comm_any(const struct comm *c, int failed)
{
	(void)c;
	return ds_any_failed(MPI_COMM_WORLD, failed);
}

/* Chunks below INT_MAX elements for the MPI calls that take an int count. */
#define COMM_CHUNK (1u << 30)

static void comm_bcast(const struct comm *c, void *buf, size_t len)
{
	(void)c;
	ds_mpi_bcast(MPI_COMM_WORLD, buf, len, 0);
}

/* Every file's result to rank 0: each slot was filled by exactly one rank
 * and is zero elsewhere, so a bitwise OR assembles them. */
static void comm_gather_results(const struct comm *c, struct ds__result *res, uint64_t n)
{
	if (c->size == 1)
		return;
	uint64_t *v = ds_xcalloc(n * 3 + 1, sizeof(*v));
	for (uint64_t i = 0; i < n; i++) {
		v[3 * i] = res[i].offset;
		v[3 * i + 1] = res[i].stored;
		v[3 * i + 2] = res[i].crc | (uint64_t)res[i].codec << 32;
	}
	uint64_t *out = c->rank == 0 ? ds_xcalloc(n * 3 + 1, sizeof(*out)) : NULL;
	for (uint64_t off = 0; off < n * 3; off += COMM_CHUNK / 8) {
		uint64_t k = n * 3 - off < COMM_CHUNK / 8 ? n * 3 - off : COMM_CHUNK / 8;
		MPI_Request req;
		MPI_Ireduce(v + off, out ? out + off : NULL, (int)k, MPI_UINT64_T, MPI_BOR, 0,
		            MPI_COMM_WORLD, &req);
		ds_mpi_wait(&req); /* without spinning */
	}
	for (uint64_t i = 0; out && i < n; i++) {
		res[i].offset = out[3 * i];
		res[i].stored = out[3 * i + 1];
		res[i].crc = (uint32_t)out[3 * i + 2];
		res[i].codec = (uint8_t)(out[3 * i + 2] >> 32);
	}
	free(v);
	free(out);
}

/* ---- progress ----------------------------------------------------------- */
void ds__progress_tick(struct ds__progress *pr)
{
	if (!pr->interval)
		return;
	double now = ds_now();
	if (now < pr->next)
		return;
	pr->next = now + pr->interval;
	char a[32], b[32], r[32];
	double dt = now - pr->start;
	fprintf(stderr, "dstage: pack: %s%llu/%llu files, %s/%s, %s/s\n", pr->label,
	        (unsigned long long)pr->files, (unsigned long long)pr->total_files,
	        ds_fmt_size(pr->bytes, a, sizeof(a)), ds_fmt_size(pr->total_bytes, b, sizeof(b)),
	        ds_fmt_size(dt > 0 ? (uint64_t)(pr->bytes / dt) : 0, r, sizeof(r)));
}

/* ---- options ------------------------------------------------------------ */
static int usage_error(const struct comm *c, const char *fmt, const char *arg)
{
	if (c->rank == 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), fmt, arg);
		ds_error("%s (see 'dstage pack --help')", msg);
	}
	return -1;
}

static void add_str(char ***v, size_t *n, char *s)
{
	*v = ds_xrealloc(*v, (*n + 1) * sizeof(**v));
	(*v)[(*n)++] = s;
}

static int parse_codec(const char *s, struct pack_opts *o)
{
	uint64_t level;
	if (!strcmp(s, "none")) {
		o->codec = DS_CODEC_NONE;
		o->level = 0;
		return 0;
	}
	if (!strcmp(s, "zlib")) {
		o->codec = DS_CODEC_ZLIB;
		o->level = 6;
		return 0;
	}
	if (!strncmp(s, "zlib:", 5) && !ds_parse_u64(s + 5, &level) && level >= 1 && level <= 9) {
		o->codec = DS_CODEC_ZLIB;
		o->level = (uint32_t)level;
		return 0;
	}
	return -1;
}

enum { OPT_REPLICATE = 256, OPT_FILES_FROM, OPT_EXCLUDE, OPT_DEREF, OPT_PROGRESS, OPT_NO_FSYNC,
       OPT_IN_PLACE, OPT_EXPAND_TAR };

/* 0: go on; 1: --help was printed; -1: usage error (printed by rank 0). */
static int parse_args(const struct comm *c, int argc, char **argv, struct pack_opts *o)
{
	static const struct option longs[] = {
		{"partitions", required_argument, NULL, 'p'}, {"part-size", required_argument, NULL, 'S'},
		{"compress", required_argument, NULL, 'z'},   {"replicate", required_argument, NULL, OPT_REPLICATE},
		{"files-from", required_argument, NULL, OPT_FILES_FROM},
		{"exclude", required_argument, NULL, OPT_EXCLUDE},
		{"dereference", no_argument, NULL, OPT_DEREF}, {"force", no_argument, NULL, 'f'},
		{"no-fsync", no_argument, NULL, OPT_NO_FSYNC},
		{"in-place", no_argument, NULL, OPT_IN_PLACE},
		{"expand-tar", no_argument, NULL, OPT_EXPAND_TAR},
		{"progress", required_argument, NULL, OPT_PROGRESS}, {"quiet", no_argument, NULL, 'q'},
		{"verbose", no_argument, NULL, 'v'},          {"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}};
	uint64_t v;
	int ch, have_p = 0, have_s = 0;
	o->fsync = 1;
	o->part_size = 1ull << 30;
	o->progress = -1;
	opterr = 0;
	optind = 1;
	while ((ch = getopt_long(argc, argv, "p:S:z:fqvh", longs, NULL)) != -1) {
		switch (ch) {
		case 'p':
			if (ds_parse_u64(optarg, &v) || v < 1 || v > DS__MAX_PARTS)
				return usage_error(c, "'%s': -p wants a partition count from 1 to 100000", optarg);
			o->nparts = (uint32_t)v;
			have_p = 1;
			break;
		case 'S':
			if (ds_parse_size(optarg, &o->part_size) || !o->part_size)
				return usage_error(c, "'%s': -S wants a size (64MiB, 1GiB, ...)", optarg);
			have_s = 1;
			break;
		case 'z':
			if (parse_codec(optarg, o))
				return usage_error(c, "'%s': -z wants none, zlib or zlib:LEVEL (1-9)", optarg);
			break;
		case OPT_REPLICATE: add_str(&o->replicate, &o->nreplicate, optarg); break;
		case OPT_EXCLUDE: add_str(&o->exclude, &o->nexclude, optarg); break;
		case OPT_FILES_FROM: o->files_from = optarg; break;
		case OPT_DEREF: o->dereference = 1; break;
		case OPT_NO_FSYNC: o->fsync = 0; break;
		case OPT_IN_PLACE: o->in_place = 1; break;
		case OPT_EXPAND_TAR: o->expand_tar = 1; break;
		case 'f': o->force = 1; break;
		case 'q': o->quiet = 1; break;
		case 'v': o->verbose++; break;
		case OPT_PROGRESS:
			if (ds_parse_double(optarg, &o->progress) || o->progress < 0)
				return usage_error(c, "'%s': --progress wants seconds", optarg);
			break;
		case 'h':
			if (c->rank == 0)
				fputs(usage_text, stdout);
			return 1;
		default:
			return usage_error(c, "'%s': unknown option or missing argument", argv[optind - 1]);
		}
	}
	if (have_p && have_s)
		return usage_error(c, "%s-p and -S exclude each other", "");
	if (argc - optind != 2)
		return usage_error(c, "%swants SRC and OUT", "");
	o->src = argv[optind];
	o->out = argv[optind + 1];
	if (o->in_place && (ds_s3_is_url(o->src) || ds_s3_is_url(o->out)))
		return usage_error(c, "%s--in-place wants a local SRC and OUT (a file system path)", "");
	if (o->in_place && o->dereference)
		return usage_error(c, "%s--in-place and --dereference exclude each other (stage never "
		                   "follows a symlink out of SRC)", "");
	if (o->expand_tar && !o->in_place)
		return usage_error(c, "%s--expand-tar wants --in-place (the members are read from "
		                   "the tars where they lie)", "");
	if (o->in_place && o->codec != DS_CODEC_NONE)
		return usage_error(c, "%s--in-place reads the files as they are: no -z", "");
	for (int k = 0; k < 2; k++) {
		const char *u = k ? o->out : o->src;
		char *b = NULL, *p = NULL;
		if (ds_s3_is_url(u) && ds_s3_parse_url(u, &b, &p))
			return -1; /* named by the parser */
		free(b);
		free(p);
	}
	if (o->progress < 0)
		o->progress = isatty(2) ? 10 : 0;
	if (o->quiet)
		o->progress = 0;
	return 0;
}

/* ---- SRC and OUT -------------------------------------------------------- */
struct job {
	struct pack_opts o;
	struct comm c;
	int srcfd;
	char tmp[PATH_MAX];     /* OUT/.tmp-<pid of rank 0> */
	int made_out;           /* OUT did not exist: remove it on failure */
	struct ds__plan plan;
	struct ds__result *res;
	double start;
	struct ds_s3 *s3;       /* SRC is s3://bucket/prefix */
	char *bucket, *prefix;
	struct ds_s3 *os3;      /* OUT is s3://obucket/oprefix (s3out.c) */
	char *obucket, *oprefix;
	int uploaded;           /* rank 0: parts may be in the bucket */
	char root[PATH_MAX];    /* --in-place: SRC's absolute path */
	struct ds_buf tars;     /* --expand-tar under MPI: the tars rank 0's walk met */
};

/* OUT in a bucket: the client, and a private local directory per rank
 * where partitions are written before they go up. */
static int open_out_s3(struct job *j)
{
	int rc = 0;
	if (!j->obucket && (rc = ds_s3_parse_url(j->o.out, &j->obucket, &j->oprefix)))
		return rc;
	if (!j->os3 && !(j->os3 = ds_s3_new()))
		return -EINVAL;
	const char *t = getenv("TMPDIR");
	snprintf(j->tmp, sizeof(j->tmp), "%s/dstage-pack.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(j->tmp)) {
		rc = -errno;
		ds_error("'%s': %s", j->tmp, strerror(errno));
		j->tmp[0] = '\0';
	}
	return rc;
}

static int open_src(struct job *j)
{
	if (ds_s3_is_url(j->o.src)) {
		int rc = j->bucket ? 0 : ds_s3_parse_url(j->o.src, &j->bucket, &j->prefix);
		if (rc)
			return rc;
		if (!j->s3 && !(j->s3 = ds_s3_new()))
			return -EINVAL;
		return 0;
	}
	j->srcfd = open(j->o.src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (j->srcfd < 0) {
		ds_error("'%s': %s", j->o.src, strerror(errno));
		return -errno;
	}
	return 0;
}

/* Names in OUT that a previous pack left: removed by --force. */
static int is_pack_file(const char *name)
{
	return !strcmp(name, DS__INDEX_NAME) || !fnmatch("part-[0-9][0-9][0-9][0-9][0-9].h5", name, 0) ||
	       !strncmp(name, ".tmp-", 5);
}

/* OUT: make it, or check it is empty (or holds only a pack, with --force). */
static int check_out(struct job *j)
{
	const char *out = j->o.out;
	if (mkdir(out, 0777) == 0) {
		j->made_out = 1;
		return 0;
	}
	if (errno != EEXIST) {
		ds_error("'%s': %s", out, strerror(errno));
		return -errno;
	}
	DIR *d = opendir(out);
	if (!d) {
		ds_error("'%s': %s", out, strerror(errno));
		return -errno;
	}
	struct dirent *de;
	int rc = 0;
	while (!rc && (de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!j->o.force) {
			ds_error("'%s': not empty (--force replaces a pack in it)", out);
			rc = -ENOTEMPTY;
		} else if (!is_pack_file(de->d_name)) {
			ds_warn("'%s/%s': not part of a pack, left alone", out, de->d_name);
		}
	}
	closedir(d);
	return rc;
}

/* Packing OUT into itself would never end well. */
static int check_not_inside(const struct job *j)
{
	char s[PATH_MAX], o[PATH_MAX];
	if (j->s3 || ds_s3_is_url(j->o.out))
		return 0;
	if (!realpath(j->o.src, s) || !realpath(j->o.out, o)) {
		ds_error("'%s': %s", j->o.out, strerror(errno));
		return -errno;
	}
	size_t n = strlen(s);
	if (!strncmp(s, o, n) && (o[n] == '/' || o[n] == '\0' || n == 1)) {
		ds_error("'%s': inside the source tree '%s'", j->o.out, j->o.src);
		return -EINVAL;
	}
	return 0;
}

static int make_tmp(struct job *j)
{
	snprintf(j->tmp, sizeof(j->tmp), "%s/.tmp-%ld", j->o.out, (long)getpid());
	if (mkdir(j->tmp, 0700) < 0) {
		ds_error("'%s': %s", j->tmp, strerror(errno));
		return -errno;
	}
	return 0;
}

static void scan_opts(const struct job *j, struct ds__scan_opts *so)
{
	*so = (struct ds__scan_opts){
		.src = j->o.src, .srcfd = j->srcfd, .exclude = j->o.exclude, .nexclude = j->o.nexclude,
		.replicate = j->o.replicate, .nreplicate = j->o.nreplicate, .files_from = j->o.files_from,
		.dereference = j->o.dereference, .progress = j->o.progress,
		.expand_tar = j->o.expand_tar};
}

/* --expand-tar under MPI: rank 0's walk leaves the tars to list_tars, which
 * every rank shares (the headers of thousands of shards are many reads). */
static int tars_spread(const struct job *j)
{
	return j->o.expand_tar && j->c.size > 1;
}

/* Rank 0: the plan of the scanned tree. */
static int make_plan(struct job *j)
{
	int rc;
	j->plan.codec = j->o.codec;
	j->plan.level = j->o.level;
	if ((rc = ds__plan_make(&j->plan, j->o.nparts, j->o.part_size)))
		return rc;
	/* For tests only: run a command between the scan and the packing, to
	 * change the source under our feet deterministically. */
	const char *hook = getenv("DSTAGE_TEST_AFTER_SCAN");
	if (hook && *hook && system(hook) != 0)
		ds_warn("DSTAGE_TEST_AFTER_SCAN failed");
	return 0;
}

/* Rank 0: everything up to the plan (up to the tars' listing when
 * tars_spread). */
static int prepare(struct job *j)
{
	int rc;
	if (ds_s3_is_url(j->o.out)) {
		if ((rc = open_src(j)) || (rc = open_out_s3(j)) ||
		    (rc = ds__s3out_check(j->os3, j->obucket, j->oprefix, j->o.out, j->o.force)))
			return rc;
	} else if ((rc = open_src(j)) || (rc = check_out(j)) || (rc = check_not_inside(j)) ||
	           (rc = make_tmp(j))) {
		return rc;
	}
	if (j->o.in_place && !realpath(j->o.src, j->root)) {
		ds_error("'%s': %s", j->o.src, strerror(errno));
		return -errno;
	}
	struct ds__scan_opts so;
	scan_opts(j, &so);
	if (tars_spread(j)) {
		so.tars = &j->tars;
		return ds__scan_walk(&so, &j->plan.tree);
	}
	if ((rc = j->s3 ? ds__scan_s3(&so, j->s3, j->bucket, j->prefix, &j->plan.tree)
	                : ds__scan(&so, &j->plan.tree)))
		return rc;
	return make_plan(j);
}

/* tars_spread, every rank: the tars rank 0's walk met are listed by all the
 * ranks, k % size (as stage's walk shares them, inplace.c), their members
 * merged on rank 0, which then sorts and plans.  The result does not depend
 * on the number of ranks.  rc: this rank's state so far. */
static int list_tars(struct job *j, int rc)
{
	struct comm *c = &j->c;
	struct ds__scan_opts so;
	if (comm_any(c, rc != 0))
		return rc ? rc : -EIO;
	if (c->rank != 0)
		rc = open_src(j);
	if (comm_any(c, rc != 0))
		return rc ? rc : -EIO;
	scan_opts(j, &so);
	rc = ds__scan_tars(MPI_COMM_WORLD, &so, &j->tars, &j->plan.tree);
	ds_buf_release(&j->tars);
	if (comm_any(c, rc != 0))
		return rc ? rc : -EIO;
	rc = ds__tree_gather(MPI_COMM_WORLD, &j->plan.tree);
	if (c->rank == 0 && !rc && !(rc = ds__scan_finish(&so, &j->plan.tree)))
		rc = make_plan(j);
	return rc;
}

/* The plan and the temporary directory's name, from rank 0 to every rank. */
static int share_plan(struct job *j, int failed)
{
	struct comm *c = &j->c;
	struct ds_buf buf = {0};
	uint64_t hdr[2] = {(uint64_t)failed, 0};
	if (c->size == 1)
		return failed ? -1 : 0;
	if (c->rank == 0 && !failed) {
		ds__plan_encode(&j->plan, &buf);
		hdr[1] = buf.len;
	}
	comm_bcast(c, hdr, sizeof(hdr));
	if (hdr[0])
		return -1;
	comm_bcast(c, j->tmp, sizeof(j->tmp));
	if (c->rank != 0)
		ds_buf_reserve(&buf, hdr[1]);
	comm_bcast(c, buf.data, hdr[1]);
	int rc = 0;
	if (c->rank != 0) {
		if ((rc = ds__plan_decode(&j->plan, buf.data, hdr[1])))
			ds_error("cannot decode the plan from rank 0");
		if (!rc && j->srcfd < 0)
			rc = open_src(j); /* list_tars opened it already */
		if (!rc && ds_s3_is_url(j->o.out))
			rc = open_out_s3(j); /* a local directory of its own */
	}
	ds_buf_release(&buf);
	return comm_any(c, rc != 0) ? -1 : 0;
}

/* This rank's partitions, round by round, stopping when any rank failed. */
static int pack_parts(struct job *j)
{
	const struct ds__plan *pl = &j->plan;
	struct comm *c = &j->c;
	struct ds__write_opts wo = {.srcfd = j->srcfd, .dir = j->tmp, .src = j->o.src, .out = j->o.out,
	                           .fsync = j->o.fsync, .s3 = j->s3, .s3_bucket = j->bucket,
	                           .s3_prefix = j->prefix};
	struct ds__progress pr = {.interval = c->rank == 0 ? j->o.progress : 0, .start = j->start,
	                          .label = c->size > 1 ? "rank 0's share: " : ""};
	pr.next = pr.start + pr.interval;
	for (uint32_t p = (uint32_t)c->rank; p < pl->nparts; p += (uint32_t)c->size) {
		pr.total_files += pl->parts[p].nfiles;
		pr.total_bytes += pl->parts[p].raw;
	}
	j->res = ds_xcalloc(pl->nfiles + 1, sizeof(*j->res));
	uint32_t rounds = (pl->nparts + (uint32_t)c->size - 1) / (uint32_t)c->size;
	for (uint32_t r = 0; r < rounds; r++) {
		uint32_t p = r * (uint32_t)c->size + (uint32_t)c->rank;
		int rc = 0;
		if (p < pl->nparts && j->o.in_place)
			rc = ds__inplace_part(pl, p, &wo, j->res, &pr);
		else if (p < pl->nparts)
			rc = ds__write_part(pl, p, &wo, j->res, &pr);
		if (!rc && p < pl->nparts && j->os3) {
			/* up to the bucket at once; the local copy goes */
			char name[32];
			snprintf(name, sizeof(name), "part-%05u.h5", p);
			rc = ds__s3out_put(j->os3, j->obucket, j->oprefix, j->tmp, c->rank, name);
		}
		if (c->rank == 0 && j->os3)
			j->uploaded = 1;

		if (comm_any(c, rc != 0))
			return -1;
	}
	return 0;
}

/* Move the finished files into OUT: parts first, index.h5 last, so OUT
 * never shows an index without its partitions. */
static int commit(struct job *j)
{
	const char *out = j->o.out;
	char from[PATH_MAX + 32], to[PATH_MAX + 32];
	int rc = 0;
	if (j->o.force) {
		/* an old index goes first: a half-replaced pack must not look whole */
		snprintf(to, sizeof(to), "%s/%s", out, DS__INDEX_NAME);
		unlink(to);
		DIR *d = opendir(out);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (is_pack_file(de->d_name) && strcmp(de->d_name, j->tmp + strlen(out) + 1)) {
				snprintf(to, sizeof(to), "%s/%s", out, de->d_name);
				if (ds_rm_rf(to))
					ds_warn("'%s': cannot remove", to);
			}
		if (d)
			closedir(d);
	}
	/* in place: no part files, only the index */
	for (uint32_t p = j->o.in_place ? j->plan.nparts : 0; !rc && p <= j->plan.nparts; p++) {
		char name[32];
		if (p < j->plan.nparts)
			snprintf(name, sizeof(name), "part-%05u.h5", p);
		else
			snprintf(name, sizeof(name), "%s", DS__INDEX_NAME);
		snprintf(from, sizeof(from), "%s/%s", j->tmp, name);
		snprintf(to, sizeof(to), "%s/%s", out, name);
		if (rename(from, to) < 0) {
			rc = -errno;
			ds_error("'%s': %s", to, strerror(errno));
		}
	}
	int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		if (j->o.fsync)
			fsync(dfd);
		close(dfd);
	}
	rmdir(j->tmp);
	return rc;
}

/* On failure, rank 0 removes what this run made. */
static void remove_output(struct job *j)
{
	if (j->os3 && j->uploaded) {
		ds_s3_cleanup(j->os3, 1); /* after SIGINT/SIGTERM too */
		ds__s3out_remove_parts(j->os3, j->obucket, j->oprefix, 0, j->plan.nparts);
	}
	if (j->tmp[0])
		ds_rm_rf(j->tmp);
	if (j->made_out)
		rmdir(j->o.out);
	ds_error("'%s': pack failed, nothing written", j->o.out);
}

/* The S3 client's counters of every rank, summed on rank 0. */
static void s3_summary(const struct job *j)
{
	struct ds_s3_stats st = {0, 0, 0}, ot = {0, 0, 0};
	if (j->s3)
		ds_s3_stats(j->s3, &st);
	if (j->os3)
		ds_s3_stats(j->os3, &ot);
	uint64_t mine[6] = {st.requests, st.bytes, st.retries, ot.requests, ot.bytes, ot.retries};
	uint64_t sum[6] = {0, 0, 0, 0, 0, 0};
	if (j->c.size > 1)
		MPI_Reduce(mine, sum, 6, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
	else
		memcpy(sum, mine, sizeof(sum));
	double dt = ds_now() - j->start;
	char b[32], r[32];
	if (j->c.rank == 0 && j->s3 && !j->o.quiet)
		printf("s3: %llu requests, %s fetched (%llu bytes), %llu retries, %s/s\n",
		       (unsigned long long)sum[0], ds_fmt_size(sum[1], b, sizeof(b)),
		       (unsigned long long)sum[1], (unsigned long long)sum[2],
		       ds_fmt_size(dt > 0 ? (uint64_t)(sum[1] / dt) : 0, r, sizeof(r)));
	if (j->c.rank == 0 && j->os3 && !j->o.quiet)
		printf("s3: %llu requests, %s uploaded (%llu bytes), %llu retries, %s/s\n",
		       (unsigned long long)sum[3], ds_fmt_size(sum[4], b, sizeof(b)),
		       (unsigned long long)sum[4], (unsigned long long)sum[5],
		       ds_fmt_size(dt > 0 ? (uint64_t)(sum[4] / dt) : 0, r, sizeof(r)));
	fflush(stdout);
}

static void summary(const struct job *j)
{
	const struct ds__tree *t = &j->plan.tree;
	uint64_t stored = 0;
	for (uint64_t i = 0; i < j->plan.nfiles; i++)
		stored += j->res[i].stored;
	double dt = ds_now() - j->start;
	char in[32], st[32], rate[32];
	if (j->o.in_place) {
		struct stat ist;
		char ix[PATH_MAX + 32];
		snprintf(ix, sizeof(ix), "%s/%s", j->o.out, DS__INDEX_NAME);
		uint64_t isz = stat(ix, &ist) == 0 ? (uint64_t)ist.st_size : 0;
		printf("indexed %llu files, %llu dirs, %llu symlinks in place into %u partitions: %s "
		       "in '%s', read once for their checksums; '%s' holds %s; %.2f s, %s/s\n",
		       (unsigned long long)t->nfiles, (unsigned long long)t->ndirs,
		       (unsigned long long)t->nlinks, j->plan.nparts, ds_fmt_size(t->bytes, in, sizeof(in)),
		       j->root, ix, ds_fmt_size(isz, st, sizeof(st)), dt,
		       ds_fmt_size(dt > 0 ? (uint64_t)(t->bytes / dt) : 0, rate, sizeof(rate)));
		fflush(stdout);
		return;
	}
	printf("packed %llu files, %llu dirs, %llu symlinks into %u partitions: %s in, %s stored "
	       "(ratio %.3f), %.2f s, %s/s\n",
	       (unsigned long long)t->nfiles, (unsigned long long)t->ndirs,
	       (unsigned long long)t->nlinks, j->plan.nparts, ds_fmt_size(t->bytes, in, sizeof(in)),
	       ds_fmt_size(stored, st, sizeof(st)), t->bytes ? (double)stored / (double)t->bytes : 1.0,
	       dt, ds_fmt_size(dt > 0 ? (uint64_t)(t->bytes / dt) : 0, rate, sizeof(rate)));
	fflush(stdout);
}

static int run(struct job *j)
{
	struct comm *c = &j->c;
	int rc = c->rank == 0 ? prepare(j) : 0;
	if (tars_spread(j))
		rc = list_tars(j, rc);
	if (share_plan(j, rc != 0))
		return -1;
	if (pack_parts(j))
		return -1;
	comm_gather_results(c, j->res, j->plan.nfiles);
	rc = 0;
	if (c->rank == 0) {
		struct ds__write_opts wo = {.srcfd = j->srcfd, .dir = j->tmp, .src = j->o.src,
		                            .out = j->o.out, .fsync = j->o.fsync,
		                            .root = j->o.in_place ? j->root : NULL};
		if (!(rc = ds__write_index(&j->plan, j->res, &wo))) {
			if (!j->os3) {
				rc = commit(j);
			} else if (!(rc = ds__s3out_put(j->os3, j->obucket, j->oprefix, j->tmp, 0,
			                                DS__INDEX_NAME)) && j->o.force) {
				/* the index is up: what an older, larger pack left goes */
				ds__s3out_remove_parts(j->os3, j->obucket, j->oprefix, j->plan.nparts,
				                       j->plan.nparts);
			}
		}
	}
	return comm_any(c, rc != 0) ? -1 : 0;
}

int ds_cmd_pack(int argc, char **argv)
{
	struct job j;
	memset(&j, 0, sizeof(j));
	j.srcfd = -1;
	if (comm_init(&j.c, &argc, &argv))
		return 1;
	int rc = parse_args(&j.c, argc, argv, &j.o);
	if (rc) {
		free(j.o.exclude);
		free(j.o.replicate);
		comm_finalize(&j.c);
		return rc > 0 ? 0 : 2;
	}
	ds_log_init(j.o.quiet ? -1 : j.o.verbose);
	if (j.c.size > 1 && j.c.rank) {
		char prefix[32];
		snprintf(prefix, sizeof(prefix), "rank %d: ", j.c.rank);
		ds_log_set_prefix(prefix);
	}
	ds__h5_quiet();
	ds_stop_on_signals();
	j.start = ds_now();
	rc = run(&j);
	if (rc && j.c.rank == 0)
		remove_output(&j);
	else if (j.os3 && j.tmp[0])
		ds_rm_rf(j.tmp); /* this rank's local directory for the bucket */
	if (!rc && j.c.rank == 0 && !j.o.quiet)
		summary(&j);
	if (!rc && (j.s3 || j.os3))
		s3_summary(&j);
	/* HDF5 cannot shut down after a failed close (h5util.c): leave without
	 * its exit handler, and without MPI_Finalize, whose hook would run it */
	if (comm_any(&j.c, ds__h5_broken())) {
		fflush(NULL);
		_exit(1);
	}
	ds__plan_release(&j.plan);
	free(j.res);
	free(j.o.exclude);
	free(j.o.replicate);
	ds_buf_release(&j.tars);
	if (j.srcfd >= 0)
		close(j.srcfd);
	ds_s3_free(j.s3);
	free(j.bucket);
	free(j.prefix);
	ds_s3_free(j.os3);
	free(j.obucket);
	free(j.oprefix);
	comm_finalize(&j.c);
	return rc ? 1 : 0;
}
