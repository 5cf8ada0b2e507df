/* SPDX-License-Identifier: BSD-3-Clause */
/* stage.c: `dstage stage`, the stage-in job step.
 *
 *  1. rank 0 reads OUT/index.h5 once and broadcasts its bytes; every rank
 *     parses the image (ds_manifest_read_image): no other rank opens it
 *     (OUT a plain tree: the ranks walk it together, ds_tree_manifest, and
 *     its partitions are read from the files where they lie, inplace.c);
 *  2. every rank computes the same placement (common/place.c);
 *  3. each node checks it has room for its store, all ranks agree;
 *  4. each partition is read from the shared file system by exactly one rank
 *     (a rank of the partition's first holder) and travels to its other
 *     holders along a pipelined chain of point-to-point messages;
 *  5. every holder verifies every file's checksum as the bytes land, writes
 *     its store under NODEDIR.partial, then its index; all ranks agree and
 *     the partial directories are renamed into place (or removed).
 *
 * Transfers follow one global order (increasing partition number) on every
 * rank, so the chain can never deadlock; a rank that failed keeps taking part
 * in the protocol (sending error headers instead of data) so nobody hangs,
 * and everyone learns of the failure in the final agreement. */
#include "dscommon.h"
#include "dsindex.h"
#include "dsmem.h"
#include "dslock.h"
#include "dspack.h"
#include "dsplace.h"
#include "dsproto.h"
#include "dss3.h"
#include "dsstage.h"
#include "stage_int.h"

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#define CHUNK (4u << 20)   /* bytes per message along a chain */
#define TAG_CHUNK 0x5d5

struct chunk_hdr {
	int64_t status; /* 0, or the sender's negative error code */
	uint64_t len;
};

/* One file of a partition as the sink sees it. */
struct pfile {
	uint32_t m;       /* manifest entry */
	uint64_t dst_off; /* offset in the partition as stored on the node */
};

/* A partition's worth of state on a rank that holds it (reader or receiver). */
struct sink {
	const struct ds_manifest *m;
	const char *part_name;
	struct pfile *f;
	uint32_t nf;
	uint32_t cur;        /* file being verified */
	uint64_t cur_done;   /* its stored bytes seen so far */
	uint32_t crc;
	uint64_t out;        /* its content bytes produced so far */
	z_stream z;
	int z_live;
	int inflate_store;   /* --inflate: write content, not stored bytes */
	int fd;
	uint64_t base;       /* partition base in the store file */
	unsigned char *zbuf;
	uint32_t *learn;     /* m->nocrc (a plain tree): each file's CRC goes
	                        here, by manifest entry, instead of being checked */
	uint8_t *held;       /* ... and its entry is marked, when not NULL */
};

static const char *cmd_usage =
	"usage: dstage stage OUT --to DIR [options]\n"
	"  MPI job step: stage pack OUT into node-local DIR (RAM: /dev/shm; SSD: $TMPDIR)\n"	"  (OUT may be s3://BUCKET/PREFIX: fetched with ranged GETs, each byte once)\n"
	"  (OUT may be a plain directory tree, not a pack: staged as it is, each file read\n"
	"  once where it lies, its CRC-32C taken as it is read; docs/guide.md)\n"
	"  -R, --replicas N      each partition on N nodes (1..65535, default 1; capped at the\n"
	"                        node count)\n"
	"      --to DIR          node-local directory; the store is DIR/dstage.<uid>.<job>/<node>\n"
	"      --job ID          job id (default $SLURM_JOB_ID, else 0)\n"
	"      --node-per-rank   every rank is its own node (simulate N nodes with mpiexec -n N)\n"
	"      --inflate         decompress zlib files while staging (else inflated on read)\n"
	"      --force           replace an existing store of this job (not while its\n"
	"                        service runs: one stage, serve or clean of a job at a time)\n"
	"      --progress SECS   progress line every SECS seconds (rank 0; default 0: none)\n"
	"      --ram-headroom SIZE|N%  memory left to training under the job's memory cgroup when\n"
	"                        DIR is RAM (default: 25% of the limit, at least 8 GiB per rank\n"
	"                        of the step on the host; see docs/guide.md, The RAM budget)\n"
	"      --replicate PATH  a plain tree: the subtree PATH goes to every node (repeatable)\n"
	"      --expand-tar      a plain tree: every *.tar is a directory of its members, read\n"
	"                        from the tar where they lie (each member a sample)\n"
	"      --spill DIR       what does not fit the RAM room of --to goes to DIR (node-local\n"
	"                        SSD or disk, absolute), whole partitions, replicated ones last\n"
	"  -q, --quiet           no summary\n"
	"  -h, --help            this text\n";

void ds_stage_defaults(struct ds_stage_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->replicas = 1;
}

int ds_stage_opt(struct ds_stage_opts *o, int c, const char *arg, int *bad)
{
	uint64_t v;
	double d;
	switch (c) {
	case 'R':
		if (ds_parse_u64(arg, &v) || v < 1 || v > 65535) {
			ds_error("-R '%s': not a replica count (1..65535)", arg);
			*bad = 1;
		} else {
			o->replicas = (uint32_t)v;
		}
		return c;
	case 'P':
		if (ds_parse_double(arg, &d) || !(d >= 0)) {
			ds_error("--progress '%s': not a number of seconds (0: none)", arg);
			*bad = 1;
		} else {
			o->progress = d;
		}
		return c;
	case 'H':
		if (ds_headroom_opt(arg, &o->headroom, bad))
			o->headroom_set = 1;
		return c;
	case 't': o->to = arg; return c;
	case 'Z': o->spill = arg; return c;
	case 'E':
		o->replicate = ds_xrealloc(o->replicate, (o->nreplicate + 1) * sizeof(char *));
		o->replicate[o->nreplicate++] = (char *)arg;
		return c;
	case 'j': o->job = arg; return c;
	case 'G': o->expand_tar = 1; return c;
	case 'n': o->node_per_rank = 1; return c;
	case 'i': o->inflate = 1; return c;
	case 'f': o->force = 1; return c;
	case 'q': o->quiet = 1; return c;
	case 'h': o->help = 1; return c;
	}
	return 0;
}

static int stage_parse(int argc, char **argv, struct ds_stage_opts *o)
{
	struct ds_step_getopt g;
	ds_step_getopt(DS_STEP_STAGE, &g);
	ds_stage_defaults(o);
	optind = 1;
	int c, bad = 0;
	while ((c = getopt_long(argc, argv, g.shortopts, g.lo, NULL)) != -1) {
		if (!ds_stage_opt(o, c, optarg, &bad)) {
			fputs(cmd_usage, stderr);
			return 2;
		}
		if (o->help)
			return 0;
	}
	if (bad)
		return 2;
	if (argc - optind != 1) {
		fputs(cmd_usage, stderr);
		return 2;
	}
	o->pack = argv[optind];
	return ds_stage_check_opts(o);
}

int ds_stage_check_opts(const struct ds_stage_opts *o)
{
	if (!o->to || !o->pack) {
		ds_error("need a pack and --to DIR");
		return 2;
	}
	if (o->spill && o->spill[0] != '/') {
		/* the index records it for readers that may run anywhere */
		ds_error("--spill '%s': not an absolute path", o->spill);
		return 2;
	}
	char *b = NULL, *p = NULL;
	if (ds_s3_is_url(o->pack) && ds_s3_parse_url(o->pack, &b, &p))
		return 2;
	free(b);
	free(p);
	return 0;
}

/* ---- metadata ------------------------------------------------------------ */
/* The manifest of a pack: rank 0 reads it (a bucket: by ranged GETs) and
 * streams it to every rank in chunks (ds_mstream_open, hdf5/mstream.c);
 * here every rank gets the partitions table (in place: the source root),
 * the entries come in stage_plan, once the placement says which files this
 * rank handles.  With --inflate, rank 0 first sums each partition's files
 * inflated: that is what places the partitions. */
static int open_manifest(MPI_Comm world, const char *pack, struct ds_manifest *m, uint64_t *nread,
                         int inflate, struct ds_mstream **ms, struct ds_s3 *s3, const char *bucket,
                         const char *prefix)
{
	int rank;
	MPI_Comm_rank(world, &rank);
	return ds_mstream_open(world, pack, rank == 0 ? s3 : NULL, bucket, prefix,
	                       inflate ? DS_MSTREAM_INFLATED : 0, m, ms, nread);
}

/* ---- layout ------------------------------------------------------------- */
/* Per partition: its files in payload order, where each lands on a node, and
 * the partition's size as stored on nodes (bigger with --inflate). */
struct layout {
	uint32_t nparts;
	uint32_t *first; /* [nparts+1] into f */
	struct pfile *f;
	uint64_t *node_size; /* partition size on a node */
	uint8_t *replicated;
};

/* By the offset of the stored bytes in the payload stream (the entry's;
 * a pfile is 16 bytes: a rank keeps one per file it handles), then in
 * entry order (empty files: where a streamed --inflate places them). */
static int pfile_cmp(const void *x, const void *y, void *ctx)
{
	const struct ds_manifest *m = ctx;
	size_t i = ((const struct pfile *)x)->m, j = ((const struct pfile *)y)->m;
	uint64_t a = m->e[i].offset, b = m->e[j].offset;
	return a < b ? -1 : a > b ? 1 : (i > j) - (i < j);
}

static void layout_build(struct layout *L, const struct ds_manifest *m, int inflate)
{
	L->nparts = m->nparts;
	L->first = ds_xcalloc(m->nparts + 1, sizeof(uint32_t));
	L->node_size = ds_xcalloc(m->nparts + 1, sizeof(uint64_t));
	L->replicated = ds_xcalloc(m->nparts + 1, 1);
	size_t nfiles = 0;
	for (size_t i = 0; i < m->n; i++)
		if (S_ISREG(m->e[i].mode)) {
			L->first[m->e[i].part + 1]++;
			nfiles++;
		}
	for (uint32_t p = 0; p < m->nparts; p++)
		L->first[p + 1] += L->first[p];
	L->f = ds_xcalloc(nfiles + 1, sizeof(struct pfile));
	uint32_t *fill = ds_xcalloc(m->nparts + 1, sizeof(uint32_t));
	for (size_t i = 0; i < m->n; i++) {
		const struct ds_mentry *e = &m->e[i];
		if (!S_ISREG(e->mode))
			continue;
		struct pfile *f = &L->f[L->first[e->part] + fill[e->part]++];
		f->m = i;
	}
	free(fill);
	for (uint32_t p = 0; p < m->nparts; p++) {
		struct pfile *f = &L->f[L->first[p]];
		uint32_t n = L->first[p + 1] - L->first[p];
		if (n > 1)
			qsort_r(f, n, sizeof(*f), pfile_cmp, (void *)m);
		uint64_t pos = 0;
		for (uint32_t i = 0; i < n; i++) {
			const struct ds_mentry *e = &m->e[f[i].m];
			if (inflate && e->codec != DS_CODEC_NONE) {
				f[i].dst_off = pos;
				pos += e->size;
			} else if (inflate) {
				f[i].dst_off = pos;
				pos += e->stored;
			} else {
				f[i].dst_off = e->offset;
			}
		}
		/* streamed, --inflate: this rank holds some partitions' files,
		 * the stream summed every partition's (and checked kept = summed) */
		L->node_size[p] = !inflate ? m->parts[p].size
		                  : m->parts_inflated ? m->parts[p].inflated
		                                      : pos;
		L->replicated[p] = m->parts[p].replicated;
	}
}

static void layout_release(struct layout *L)
{
	ds_free(&L->first);
	ds_free(&L->f);
	ds_free(&L->node_size);
	ds_free(&L->replicated);
}

/* ---- the sink: verify and write one partition's stream ------------------ */
static int sink_open(struct sink *s, const struct ds_manifest *m, const struct layout *L, uint32_t p,
                     int fd, uint64_t base, int inflate, const char *part_name)
{
	memset(s, 0, sizeof(*s));
	s->m = m;
	s->f = &L->f[L->first[p]];
	s->nf = L->first[p + 1] - L->first[p];
	s->fd = fd;
	s->base = base;
	s->inflate_store = inflate;
	s->part_name = part_name;
	s->zbuf = ds_xmalloc(CHUNK);
	return 0;
}

static void sink_close(struct sink *s)
{
	if (s->z_live)
		inflateEnd(&s->z);
	ds_free(&s->zbuf);
}

static int file_done(struct sink *s, const struct ds_mentry *e)
{
	if (s->m->nocrc && s->out == e->size) {
		/* a plain tree: the CRC is taken here, as the bytes are read */
		uint32_t i = s->f[s->cur].m;
		s->learn[i] = s->crc;
		if (s->held)
			s->held[i] = 1;
	} else if (s->out != e->size || s->crc != e->crc) {
		if (s->m->root)
			ds_error("'%s/%s': checksum mismatch in '%s': %s", s->m->root, e->src, e->path,
			         s->m->nocrc ? "changed during the stage"
			                     : "changed since the in-place pack was made");
		else
			ds_error("'%s': checksum mismatch in '%s'", s->part_name, e->path);
		return -DS_ECHECKSUM;
	}
	if (s->z_live) {
		inflateEnd(&s->z);
		s->z_live = 0;
	}
	s->cur++;
	s->cur_done = 0;
	s->crc = 0;
	s->out = 0;
	return 0;
}

/* Feed `len` stored bytes of file e (starting at its stored offset `at`). */
static int feed_file(struct sink *s, const struct pfile *f, const struct ds_mentry *e,
                     const unsigned char *p, size_t len)
{
	int rc;
	if (e->codec == DS_CODEC_NONE) {
		s->crc = ds_crc32c(s->crc, p, len);
		if (s->inflate_store &&
		    (rc = ds_pwrite_full(s->fd, p, len, s->base + f->dst_off + s->out)))
			return rc;
		s->out += len;
		return 0;
	}
	if (!s->z_live) {
		memset(&s->z, 0, sizeof(s->z));
		if (inflateInit(&s->z) != Z_OK)
			return -ENOMEM;
		s->z_live = 1;
	}
	s->z.next_in = (unsigned char *)p;
	s->z.avail_in = len;
	while (s->z.avail_in) {
		s->z.next_out = s->zbuf;
		s->z.avail_out = CHUNK;
		int zr = inflate(&s->z, Z_NO_FLUSH);
		size_t got = CHUNK - s->z.avail_out;
		if (got) {
			if (s->out + got > e->size)
				break; /* more content than claimed: caught as a mismatch */
			s->crc = ds_crc32c(s->crc, s->zbuf, got);
			if (s->inflate_store &&
			    (rc = ds_pwrite_full(s->fd, s->zbuf, got, s->base + f->dst_off + s->out)))
				return rc;
			s->out += got;
		}
		if (zr == Z_STREAM_END)
			break;
		if (zr != Z_OK && zr != Z_BUF_ERROR) {
			ds_error("'%s': corrupt zlib stream in '%s'", s->part_name, e->path);
			return -DS_ECHECKSUM;
		}
		if (zr == Z_BUF_ERROR && !got)
			break;
	}
	return 0;
}

/* A chunk of the payload stream at stream offset pos. */
static int sink_feed(struct sink *s, uint64_t pos, const unsigned char *buf, size_t len)
{
	int rc;
	if (!s->inflate_store && (rc = ds_pwrite_full(s->fd, buf, len, s->base + pos)))
		return rc;
	uint64_t end = pos + len;
	while (s->cur < s->nf) {
		const struct pfile *f = &s->f[s->cur];
		const struct ds_mentry *e = &s->m->e[f->m];
		uint64_t fstart = e->offset + s->cur_done, fend = e->offset + e->stored;
		if (fstart >= end)
			break;
		if (fstart < pos) {
			/* two files claim the same stored bytes: the manifest reader
			 * checks overlaps, this guards the store all the same */
			ds_error("'%s': '%s' overlaps the file before it in the payload", s->part_name,
			         e->path);
			return -DS_ECORRUPT;
		}
		uint64_t take = (fend < end ? fend : end) - fstart;
		if ((rc = feed_file(s, f, e, buf + (fstart - pos), take)))
			return rc;
		s->cur_done += take;
		if (s->cur_done == e->stored && (rc = file_done(s, e)))
			return rc;
	}
	return 0;
}

/* Files of size zero (or stored zero) that the stream never touches. */
static int sink_finish(struct sink *s)
{
	int rc;
	while (s->cur < s->nf) {
		const struct ds_mentry *e = &s->m->e[s->f[s->cur].m];
		if (s->cur_done != e->stored)
			return -DS_ECORRUPT;
		if ((rc = file_done(s, e)))
			return rc;
	}
	return 0;
}

/* ---- capacity ----------------------------------------------------------- */
static int ram_backed(const char *dir)
{
	struct statfs sf;
	return statfs(dir, &sf) == 0 &&
	       (sf.f_type == 0x01021994 /* TMPFS_MAGIC */ || sf.f_type == 0x858458f6 /* RAMFS */);
}

static uint64_t fnv1a(uint64_t v, const char *s)
{
	for (; *s; s++)
		v = (v ^ (unsigned char)*s) * 1099511628211ull;
	return v;
}

/* Can DIR take this node's store (store bytes, and DS_STORE_HEADROOM)?  On a
 * RAM file system the bytes are the job's memory for as long as the store
 * lives: the room is ds_ram_room's (common/dsmem.h: free space, and every
 * memory cgroup's limit less its usage and the headroom kept for training).
 * Nodes whose room is bound by the same thing (the same cgroup, or the same
 * host's free space: simulated nodes, or ranks in per-task cgroups under
 * one step's limit) share it: their needs and ranks are summed and the
 * first of them speaks.  Collective over the node leaders: every leader
 * calls it, also one that failed already (prior, returned unchanged).
 * *room: the node's budget, for the summary. */
struct share {
	char host[256]; /* this host's name */
	uint64_t stores; /* the summed stores of the nodes sharing the room */
	uint32_t nn;     /* how many nodes share it */
	uint32_t first;  /* the lowest of them, which speaks */
};

/* The room that binds this node's store on o->to and the nodes that share it
 * (see check_room).  Collective over the node leaders, also for one that
 * failed already (prior, returned unchanged). */
static int shared_room(const struct ds_stage_opts *o, const struct ds_node *nd, uint64_t store,
                       int prior, struct ds_room *room, struct share *sh)
{
	char *host = sh->host;
	memset(sh, 0, sizeof(*sh));
	gethostname(host, sizeof(sh->host) - 1);
	struct ds_headroom h;
	if (o->headroom_set)
		h = o->headroom;
	else
		ds_headroom_default(&h, (unsigned)nd->local_size);
	int rc = prior ? prior : ds_ram_room(o->to, &h, room);
	if (rc && !prior)
		ds_error("'%s': %s", o->to, ds_strerror(rc));
	/* what bounds the room: this host's file system, or a cgroup */
	uint64_t key = fnv1a(fnv1a(1469598103934665603ull, host), "\n");
	if (!rc && room->cgroup_v)
		key = fnv1a(key, room->cgroup);
	uint64_t mine[3] = {rc ? 0 : key, store, (uint64_t)nd->local_size};
	uint64_t *all = ds_xcalloc(3 * (size_t)nd->nnodes, sizeof(uint64_t));
	MPI_Allgather(mine, 3, MPI_UINT64_T, all, 3, MPI_UINT64_T, nd->leaders);
	uint64_t stores = 0, ranks = 0;
	uint32_t first = nd->node, nn = 0;
	for (uint32_t k = 0; k < nd->nnodes; k++) {
		if (all[3 * k] != mine[0])
			continue;
		stores += all[3 * k + 1];
		ranks += all[3 * k + 2];
		nn++;
		if (k < first)
			first = k;
	}
	free(all);
	if (rc)
		return rc;
	if (!o->headroom_set && ranks > (uint64_t)nd->local_size) {
		/* the default headroom is per rank: every rank under this budget */
		ds_headroom_default(&h, ranks > 0xffff ? 0xffff : (unsigned)ranks);
		if ((rc = ds_ram_room(o->to, &h, room))) {
			ds_error("'%s': %s", o->to, ds_strerror(rc));
			return rc;
		}
	}
	sh->stores = stores;
	sh->nn = nn;
	sh->first = first;
	return 0;
}

/* Can DIR take this node's store (store bytes, and margin once for the nodes
 * sharing the room: DS_STORE_HEADROOM, the index and metadata)?  On a RAM
 * file system the bytes are the job's memory for as long as the store
 * lives: shared_room's.  Collective over the node leaders, as shared_room.
 * *room: the node's budget, for the summary. */
static int check_room(const struct ds_stage_opts *o, const struct ds_node *nd, uint64_t store,
                      uint64_t margin, int prior, struct ds_room *room)
{
	struct share sh;
	int rc = shared_room(o, nd, store, prior, room, &sh);
	if (rc)
		return rc;
	const char *host = sh.host;
	uint64_t stores = sh.stores;
	uint32_t nn = sh.nn, first = sh.first;
	/* one margin for the index and metadata of the nodes sharing the room
	 * (as many as the check per node gave), or none where each node's
	 * store counts its own (--spill) */
	uint64_t total = stores + margin;
	if (total <= room->room)
		return 0;
	if (nd->node == first) {
		char a[32], b[32], c[32], e[32], d[320], on[320] = "";
		if (nn > 1)
			snprintf(on, sizeof(on), " for %u nodes on host '%s'", nn, host);
		else if (room->is_ram && *host)
			snprintf(on, sizeof(on), " on host '%s'", host);
		ds_error("node %u: '%s': not enough room: needs %s%s (store%s %s + %s of index and "
		         "metadata), room %s: %s%s",
		         nd->node, o->to, ds_fmt_size(total, a, sizeof(a)), on, nn > 1 ? "s" : "",
		         ds_fmt_size(stores, c, sizeof(c)),
		         ds_fmt_size(margin, e, sizeof(e)),
		         ds_fmt_size(room->room, b, sizeof(b)),
		         ds_room_describe(room, d, sizeof(d)),
		         room->cgroup_v ? " (a larger --mem, a smaller --ram-headroom, or a disk for "
		                          "--to)" : "");
	}
	return -ENOSPC;
}

/* ---- the spill tier (docs/guide.md "The spill tier") -------------------- */
/* Free space of a directory on a disk (the spill tier): can it take need? */
static int check_free(const char *dir, uint64_t need, uint32_t node)
{
	struct statvfs sv;
	if (statvfs(dir, &sv) < 0) {
		int e = errno;
		ds_error("'%s': %s", dir, strerror(e));
		return -e;
	}
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (need > avail) {
		char a[32], b[32];
		ds_error("node %u: '%s': not enough room: needs %s, free space is %s", node, dir,
		         ds_fmt_size(need, a, sizeof(a)), ds_fmt_size(avail, b, sizeof(b)));
		return -ENOSPC;
	}
	return 0;
}

/* Bytes of this node's store and metadata that may land on the RAM file
 * system of o->to: the RAM budget (shared_room: ds_ram_room,
 * common/dsmem.h), less a slack for the usage that grows until check_room
 * looks again, shared equally by the nodes it binds (spill_tiers takes
 * each node's metadata, meta_bytes, off its part; check_room then counts
 * the RAM part and that metadata).
 * DSTAGE_RAM_ROOM=SIZE (a test and debug knob, docs/guide.md "Environment
 * variables") is one node's room as it is, so tests need no cgroup.
 * Collective over the node leaders. */
static int ram_room(const struct ds_stage_opts *o, const struct ds_node *nd, uint64_t *out)
{
	const char *knob = getenv("DSTAGE_RAM_ROOM");
	int rc = 0;
	if (knob && *knob && ds_parse_size(knob, out)) {
		ds_error("DSTAGE_RAM_ROOM '%s': not a size", knob);
		rc = -EINVAL;
	}
	struct ds_room room;
	struct share sh;
	memset(&room, 0, sizeof(room));
	rc = shared_room(o, nd, 0, rc, &room, &sh);
	if (rc || (knob && *knob))
		return rc;
	uint64_t slack = 4u << 20;
	uint64_t r = room.room > slack ? room.room - slack : 0;
	*out = r / (sh.nn ? sh.nn : 1);
	return 0;
}

/* ---- the transfers ------------------------------------------------------ */
struct rankmap {
	int *first_rank; /* [nnodes]: world rank of a node's first rank */
	int *ranks;      /* world ranks of every node, node by node */
	int *nranks;     /* ranks per node */
};

/* The rank of a node that handles a location (a partition on that node):
 * round robin over the node's ranks by the partition's position among the
 * node's partitions.  lpos[l] is that position, computed once. */
static uint32_t *location_positions(const struct ds_placement *pl)
{
	uint32_t *lpos = ds_xcalloc(pl->first[pl->nparts] + 1, sizeof(uint32_t));
	uint32_t *count = ds_xcalloc(pl->nnodes, sizeof(uint32_t));
	for (uint32_t l = 0; l < pl->first[pl->nparts]; l++)
		lpos[l] = count[pl->node[l]]++;
	free(count);
	return lpos;
}

static int handler(const struct rankmap *rm, const struct ds_placement *pl, const uint32_t *lpos,
                   uint32_t l)
{
	uint32_t node = pl->node[l];
	return rm->ranks[rm->first_rank[node] + lpos[l] % rm->nranks[node]];
}

struct xfer {
	MPI_Comm world;
	int rank;
	const char *pack;
	const struct ds_manifest *m;
	const struct layout *L;
	const struct ds_placement *pl;
	const struct rankmap *rm;
	const uint32_t *lpos;
	struct ds_node *nd;
	int store_fd;
	int spill_fd;          /* the spill tier's store, -1: none */
	int inflate;
	uint64_t shared_read;  /* payload bytes this rank read from the shared FS */
	uint64_t meta_read;    /* the manifest */
	uint64_t part_meta_read; /* partitions' seal headers (ds_part_locate) */
	uint64_t received;     /* payload bytes that came over MPI */
	int err;               /* first error of this rank */
	struct ds_s3 *s3;      /* the pack is s3://bucket/prefix */
	char *bucket, *prefix;
	MPI_Win prog_win;      /* rank 0: bytes landed so far, all ranks */
	uint64_t *prog;
	double progress, last;
	uint64_t total_bytes;
	int rootfd;            /* in place: the source tree, else -1 */
	uint64_t src_opens;    /* in place: source files this rank opened */
	uint32_t *crc_read;    /* a plain tree: CRCs taken by the readers */
	uint32_t *crc_held;    /* ... and by every holder, for its files */
	uint8_t *held;
};

static void progress_add(struct xfer *x, uint64_t n)
{
	if (x->prog_win == MPI_WIN_NULL)
		return;
	MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, x->prog_win);
	MPI_Accumulate(&n, 1, MPI_UINT64_T, 0, 0, 1, MPI_UINT64_T, MPI_SUM, x->prog_win);
	MPI_Win_unlock(0, x->prog_win);
	if (x->rank == 0 && ds_now() - x->last >= x->progress) {
		uint64_t v;
		x->last = ds_now();
		MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, x->prog_win);
		MPI_Get(&v, 1, MPI_UINT64_T, 0, 0, 1, MPI_UINT64_T, x->prog_win);
		MPI_Win_unlock(0, x->prog_win);
		char a[32], b[32];
		fprintf(stderr, "dstage: stage: %s of %s landed (%.0f%%)\n", ds_fmt_size(v, a, sizeof(a)),
		        ds_fmt_size(x->total_bytes, b, sizeof(b)),
		        x->total_bytes ? 100.0 * v / x->total_bytes : 100.0);
	}
}

static void set_err(struct xfer *x, int rc)
{
	if (!x->err)
		x->err = rc;
}

/* ---- where a partition's payload comes from ---------------------------- */
/* The reader of a partition reads its payload stream, in order, from one of:
 * a pack's part file (pread from the payload's offset its seal gives), a
 * pack in a bucket (ranged GETs, several in flight: s3read.c), or, in place,
 * its files where they lie (inplace.c). */
struct preader {
	int fd;                  /* part file, -1: none */
	uint64_t base;           /* its payload's offset */
	struct ds__s3src *s3;
	struct ds__ipsrc *ip;
	uint32_t *ents;          /* in place: the partition's entries */
};

static int preader_open(struct xfer *x, uint32_t p, const char *part_path, struct preader *r)
{
	uint64_t size = x->m->parts[p].size;
	int status;
	memset(r, 0, sizeof(*r));
	r->fd = -1;
	if (x->m->root) {
		uint32_t n = x->L->first[p + 1] - x->L->first[p];
		r->ents = ds_xcalloc(n + 1, sizeof(uint32_t));
		for (uint32_t i = 0; i < n; i++)
			r->ents[i] = x->L->f[x->L->first[p] + i].m;
		return ds__ipsrc_open(x->rootfd, x->m, r->ents, n, &r->ip);
	}
	if (x->s3) {
		/* s3://: the seal by ranged GETs, the payload by ranged GETs in flight */
		status = ds__s3src_open(x->s3, x->bucket, x->prefix, p, x->m, CHUNK, &r->s3,
		                        &x->part_meta_read);
		if (!status && ds__s3src_len(r->s3) != size) {
			ds_error("'%s': payload is %llu bytes, the manifest says %llu", part_path,
			         (unsigned long long)ds__s3src_len(r->s3), (unsigned long long)size);
			status = -DS_ECORRUPT;
		}
		return status;
	}
	uint64_t plen = 0;
	status = ds_part_locate(x->pack, p, x->m, &r->base, &plen, &x->part_meta_read);
	if (!status && plen != size) {
		ds_error("'%s': payload is %llu bytes, the manifest says %llu", part_path,
		         (unsigned long long)plen, (unsigned long long)size);
		status = -DS_ECORRUPT;
	}
	if (!status && (status = ds_open_regular(part_path, &r->fd)))
		ds_error("'%s': %s", part_path, ds_strerror(status));
	if (r->fd >= 0)
		posix_fadvise(r->fd, r->base, size, POSIX_FADV_SEQUENTIAL);
	return status;
}

/* n bytes of the stream at pos; a failure is said here (naming the part
 * file, the key or the source file). */
static int preader_read(struct preader *r, const char *part_path, uint64_t pos, void *buf,
                        size_t n)
{
	int rc = 0;
	if (!r->s3 && ds_stop_signal())
		rc = -EINTR; /* the S3 client looks by itself */
	else if (r->s3)
		return ds__s3src_read(r->s3, pos, buf, n); /* the client said why, naming the key */
	else if (r->ip && !(rc = ds__ipsrc_read(r->ip, pos, buf, n)))
		return 0;
	else if (r->ip && rc != -DS_ECORRUPT && rc != -EINVAL)
		return rc; /* named the source file */
	else if (!r->ip)
		rc = ds_pread_full(r->fd, buf, n, r->base + pos);
	if (rc)
		ds_error("'%s': %s", part_path,
		         rc == -EIO && !r->ip  ? "truncated partition"
		         : rc == -EINTR        ? ds_stop_why()
		         : rc == -DS_ECORRUPT  ? "the manifest's offsets leave a gap in the payload"
		                               : ds_strerror(rc));
	return rc;
}

/* After the whole stream: in place, the files past the last byte. */
static int preader_finish(struct preader *r)
{
	return r->ip ? ds__ipsrc_finish(r->ip) : 0;
}

static void preader_close(struct xfer *x, struct preader *r)
{
	ds__s3src_close(r->s3);
	x->src_opens += ds__ipsrc_opens(r->ip);
	ds__ipsrc_close(r->ip);
	free(r->ents);
	if (r->fd >= 0)
		close(r->fd);
}

/* One rank's part in moving one partition (move_partition): its place in
 * the chain of the partition's holders, the stream's state. */
struct hop {
	uint32_t p, nloc;
	int *chain;      /* world ranks, holder order */
	int me, next;    /* my position in chain (0: the reader); the next rank, -1: none */
	char *part_path; /* named in messages */
	uint64_t size;   /* the partition's payload */
	int status;      /* first error on this hop */
	struct sink s;
	struct preader in;          /* me == 0 */
	MPI_Request req;            /* the send down the chain */
	unsigned char *cur, *other; /* the chunk being handled; the one in flight */
	int told_next;              /* sent an error header down the chain */
};

/* The chain of partition p's handlers; my position in it, -1: not ours. */
static int hop_chain(struct xfer *x, struct hop *H)
{
	const struct ds_placement *pl = x->pl;
	uint32_t p = H->p;
	int me = -1;
	H->nloc = pl->first[p + 1] - pl->first[p];
	H->chain = ds_xcalloc(H->nloc + 1, sizeof(int));
	for (uint32_t i = 0; i < H->nloc; i++) {
		H->chain[i] = handler(x->rm, pl, x->lpos, pl->first[p] + i);
		if (H->chain[i] == x->rank && pl->node[pl->first[p] + i] == x->nd->node)
			me = i;
	}
	return me;
}

/* Where this node's copy of partition p goes: the store file and offset. */
static void hop_place(struct xfer *x, uint32_t p, int *fd, uint64_t *base)
{
	const struct ds_placement *pl = x->pl;
	*base = 0;
	*fd = x->store_fd;
	for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++)
		if (pl->node[l] == x->nd->node) {
			*base = pl->base[l];
			if (pl->tier && pl->tier[l] == DS_TIER_SPILL) {
				/* the spill file holds the store from ram_size on */
				*base -= pl->ram_size[x->nd->node];
				*fd = x->spill_fd;
			}
		}
}

/* The n bytes at pos into data: read by the reader, received by the
 * others from their predecessor (h: its header).  1 when the predecessor
 * failed and sends nothing more, else 0. */
static int hop_obtain(struct xfer *x, struct hop *H, uint64_t pos, size_t n, struct chunk_hdr *h,
                      unsigned char *data)
{
	if (H->me == 0) {
		if (!H->status && n) {
			int rc = ds_fault("stage.read", x->rank);
			if (rc)
				ds_error("'%s': %s", H->part_path, ds_strerror(rc));
			else
				rc = preader_read(&H->in, H->part_path, pos, data, n);
			if (rc)
				H->status = rc;
			else
				x->shared_read += n;
		}
		return 0;
	}
	if (!H->status) /* as if this hop broke: it drains, tells the next */
		H->status = ds_fault("stage.forward", x->rank);
	MPI_Recv(H->cur, sizeof(*h) + CHUNK, MPI_BYTE, H->chain[H->me - 1], TAG_CHUNK, x->world,
	         MPI_STATUS_IGNORE);
	memcpy(h, H->cur, sizeof(*h));
	if (h->status) {
		if (!H->status)
			H->status = (int)h->status;
		return 1;
	}
	if (h->len != n) {
		if (!H->status)
			H->status = -DS_ECORRUPT;
	} else {
		x->received += n;
	}
	return 0;
}

/* Verify and write the n bytes at pos into this node's store. */
static void hop_land(struct xfer *x, struct hop *H, uint64_t pos, const unsigned char *data,
                     size_t n)
{
	if (H->status || !n)
		return;
	int rc = ds_fault("stage.write", x->rank);
	if (!rc)
		rc = sink_feed(&H->s, pos, data, n);
	if (rc) {
		if (rc != -DS_ECHECKSUM && rc != -DS_ECORRUPT)
			ds_error("node %u: '%s': %s", x->nd->node, DS_STORE_NAME, ds_strerror(rc));
		H->status = rc;
	} else {
		progress_add(x, n);
	}
}

/* Send the chunk (or, after a failure, one error header) to the next. */
static void hop_forward(struct xfer *x, struct hop *H, struct chunk_hdr *h, size_t n)
{
	if (H->next < 0 || H->told_next)
		return;
	MPI_Wait(&H->req, MPI_STATUS_IGNORE);
	h->status = H->status;
	h->len = H->status ? 0 : n;
	memcpy(H->cur, h, sizeof(*h));
	MPI_Isend(H->cur, sizeof(*h) + h->len, MPI_BYTE, H->next, TAG_CHUNK, x->world, &H->req);
	H->told_next = H->status != 0;
	unsigned char *t = H->cur;
	H->cur = H->other;
	H->other = t;
}

/* The stream: ceil(size/CHUNK) messages (at least one), each a header
 * and its data.  A rank that fails forwards one error header and sends
 * nothing more; it keeps draining its predecessor until that one stops
 * (an error header, or the whole stream), so no send is left unmatched. */
static void hop_stream(struct xfer *x, struct hop *H)
{
	uint64_t pos = 0;
	do {
		size_t n = H->size - pos > CHUNK ? CHUNK : H->size - pos;
		struct chunk_hdr h = {0, n};
		unsigned char *data = H->cur + sizeof(h);
		int upstream_failed = hop_obtain(x, H, pos, n, &h, data);
		hop_land(x, H, pos, data, n);
		hop_forward(x, H, &h, n);
		pos += n;
		if (upstream_failed || (H->status && H->me == 0))
			break; /* the predecessor sends nothing more */
	} while (pos < H->size);
	MPI_Wait(&H->req, MPI_STATUS_IGNORE);
}

/* After the stream: the reader's and the sink's checks of its end. */
static void hop_finish(struct hop *H)
{
	if (!H->status && H->me == 0)
		H->status = preader_finish(&H->in);
	if (!H->status) {
		int rc = sink_finish(&H->s);
		if (rc) {
			if (rc == -DS_ECORRUPT)
				ds_error("'%s': payload ends inside a file", H->part_path);
			H->status = rc;
		}
	}
}

/* Move partition p: its reader reads and sends it down the chain of its
 * holders' handlers; each handler verifies and writes it. */
static void move_partition(struct xfer *x, uint32_t p, unsigned char *buf)
{
	struct hop H;
	memset(&H, 0, sizeof(H));
	H.p = p;
	H.me = hop_chain(x, &H);
	if (H.me < 0) {
		free(H.chain);
		return; /* not ours */
	}
	uint64_t base;
	int fd;
	hop_place(x, p, &fd, &base);
	/* in place there is no part file: messages name the source root */
	H.part_path = x->m->root ? ds_xstrdup(x->m->root) : ds_part_path(x->pack, p);
	const char *part_name =
		strrchr(H.part_path, '/') ? strrchr(H.part_path, '/') + 1 : H.part_path;
	H.size = x->m->parts[p].size;
	H.status = x->err;
	H.in.fd = -1;
	sink_open(&H.s, x->m, x->L, p, fd, base, x->inflate, part_name);
	H.s.learn = H.me == 0 ? x->crc_read : x->crc_held;
	H.s.held = H.me == 0 ? NULL : x->held;
	if (H.me == 0 && !H.status)
		H.status = preader_open(x, p, H.part_path, &H.in);
	H.req = MPI_REQUEST_NULL;
	H.cur = buf;
	H.other = buf + sizeof(struct chunk_hdr) + CHUNK;
	H.next = (uint32_t)H.me + 1 < H.nloc ? H.chain[H.me + 1] : -1;
	hop_stream(x, &H);
	hop_finish(&H);
	sink_close(&H.s);
	preader_close(x, &H.in);
	free(H.part_path);
	free(H.chain);
	set_err(x, H.status);
}

/* A plain tree: each file's CRC was taken by its partition's reader as it
 * read (and by every holder as the bytes landed): the readers' go to every
 * rank (each file has one reader: a bitwise OR of the arrays), every
 * holder checks its own against them, and every node's index records
 * them.  Collective; a rank that failed takes part all the same. */
static void learn_crcs(struct xfer *x, struct ds_manifest *m)
{
	for (size_t off = 0; off < m->n;) {
		int n = m->n - off > (1u << 28) ? (1 << 28) : (int)(m->n - off);
		MPI_Allreduce(MPI_IN_PLACE, x->crc_read + off, n, MPI_UINT32_T, MPI_BOR, x->world);
		off += (size_t)n;
	}
	for (size_t i = 0; i < m->n; i++) {
		if (x->held[i] && x->crc_held[i] != x->crc_read[i] && !x->err) {
			ds_error("node %u: '%s': the bytes that landed differ from those read", x->nd->node,
			         m->e[i].path);
			set_err(x, -DS_ECHECKSUM);
		}
		m->e[i].crc = x->crc_read[i];
	}
}

/* ---- the step ----------------------------------------------------------- */
static int make_rankmap(MPI_Comm world, const struct ds_node *nd, struct rankmap *rm)
{
	int size;
	MPI_Comm_size(world, &size);
	int mine[2] = {(int)nd->node, nd->local_rank};
	int *all = ds_xmalloc(2 * sizeof(int) * size);
	MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, world);
	rm->nranks = ds_xcalloc(nd->nnodes, sizeof(int));
	rm->first_rank = ds_xcalloc(nd->nnodes + 1, sizeof(int));
	rm->ranks = ds_xcalloc(size, sizeof(int));
	for (int r = 0; r < size; r++)
		rm->nranks[all[2 * r]]++;
	for (uint32_t k = 0; k < nd->nnodes; k++)
		rm->first_rank[k + 1] = rm->first_rank[k] + rm->nranks[k];
	for (int r = 0; r < size; r++)
		rm->ranks[rm->first_rank[all[2 * r]] + all[2 * r + 1]] = r;
	free(all);
	return 0;
}

static void rankmap_release(struct rankmap *rm)
{
	ds_free(&rm->first_rank);
	ds_free(&rm->ranks);
	ds_free(&rm->nranks);
}

/* Index of this node: the whole manifest plus the placement. */
static int write_index(const char *path, const struct ds_manifest *m, const struct layout *L,
                       const struct ds_placement *pl, uint32_t node, const char *job,
                       uint64_t pack_id, int inflate, const char *spill,
                       struct ds_index_builder *fed)
{
	/* fed: a streamed manifest's entries are in it already (stage_entries) */
	struct ds_index_builder *b = fed ? fed : ds_index_builder_new();
	int rc = 0;
	for (size_t i = 0; i < m->n && !rc && !fed; i++) {
		const struct ds_mentry *e = &m->e[i];
		if (S_ISDIR(e->mode))
			rc = ds_index_add_dir(b, e->path, e->mode, e->mtime_ns, e->size);
		else if (S_ISLNK(e->mode))
			rc = ds_index_add_symlink(b, e->path, e->mtime_ns, e->target);
		if (rc)
			ds_error("'%s': %s", e->path, ds_strerror(rc));
	}
	for (uint32_t p = 0; p < L->nparts && !rc && !fed; p++)
		for (uint32_t i = L->first[p]; i < L->first[p + 1] && !rc; i++) {
			const struct pfile *f = &L->f[i];
			const struct ds_mentry *e = &m->e[f->m];
			int raw = inflate || e->codec == DS_CODEC_NONE;
			rc = ds_index_add_file(b, e->path, e->mode, e->mtime_ns, e->size, p, f->dst_off,
			                       raw && inflate ? e->size : e->stored,
			                       raw ? DS_CODEC_NONE : e->codec, e->crc, e->flags);
			if (rc)
				ds_error("'%s': %s", e->path, ds_strerror(rc));
		}
	if (!rc) {
		ds_index_set_parts(b, L->nparts, L->node_size);
		for (uint32_t p = 0; p < pl->nparts; p++)
			for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++)
				ds_index_add_loc_tier(b, p, pl->node[l], pl->base[l],
				                      pl->tier ? pl->tier[l] : DS_TIER_RAM);
		ds_index_set_node(b, node, pl->nnodes, pl->store_size[node], job, pack_id);
		if (spill)
			ds_index_set_spill(b, pl->ram_size ? pl->ram_size[node] : pl->store_size[node],
			                   spill);
		rc = ds_index_write(b, path);
		if (rc)
			ds_error("'%s': %s", path, ds_strerror(rc));
	}
	if (!fed)
		ds_index_builder_free(b);
	return rc;
}

static int write_stats(const char *nodedir)
{
	char path[PATH_MAX];
	if (ds_store_path(path, sizeof(path), nodedir, DS_STATS_NAME))
		return -ENAMETOOLONG;
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	struct ds_stats st;
	memset(&st, 0, sizeof(st));
	st.magic = DS_STATS_MAGIC;
	st.version = DS_STATS_VERSION;
	int rc = ds_write_full(fd, &st, sizeof(st));
	close(fd);
	return rc;
}

/* Create a store file of sz bytes.  On a disk, reserve the blocks now so a
 * full disk shows before any byte moves.  On tmpfs, reserving means zeroing
 * every page, a whole extra pass over the data: the memory check stands in,
 * and ENOSPC while writing still fails the step cleanly. */
static int make_store_file(const char *path, const char *dir, uint64_t sz, uint32_t node)
{
	int rc, fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
	} else {
		int fr = 0;
		if (sz && !ram_backed(dir))
			fr = posix_fallocate(fd, 0, sz);
		if (!fr || fr == EOPNOTSUPP || fr == EINVAL)
			fr = ftruncate(fd, sz) < 0 ? errno : 0;
		rc = -fr;
		close(fd);
	}
	if (rc) {
		char a[32];
		ds_error("node %u: '%s': cannot reserve %s: %s", node, path, ds_fmt_size(sz, a, sizeof(a)),
		         ds_strerror(rc));
	}
	return rc;
}

static char *path_join(const char *a, const char *b)
{
	char *s;
	if (asprintf(&s, "%s/%s", a, b) < 0) {
		ds_error("out of memory");
		exit(1);
	}
	return s;
}

/* --force replaced store `old`: its spill tier goes with it unless the new
 * store's spill tier took its place (the same root). */
static void old_spill_drop(const char *old, const char *spill)
{
	char path[PATH_MAX];
	struct ds_index ix;
	if (ds_store_path(path, sizeof(path), old, DS_INDEX_NAME) || ds_index_open(&ix, path, 0))
		return;
	const char *root = ds_index_spill_root(&ix);
	int same = spill && root && !strcmp(root, spill);
	ds_index_close(&ix);
	if (!same)
		(void)ds_store_spill_remove(old);
}

/* After a failed stage: every rank is done with the directory; the lock's
 * holder removes the job directory when nothing but the lock is left in it
 * (a stage refused at the lock never gets here with locked set). */
static void unlock_and_tidy(MPI_Comm world, const char *to, const char *job, int locked)
{
	MPI_Barrier(world);
	if (locked) {
		char *jobdir = ds_store_jobdir(to, job);
		(void)ds_joblock_remove_dir(jobdir, 0);
		free(jobdir);
	}
	ds_step_unlock(to, job, locked);
}

static void stage_s3_release(struct xfer *x)
{
	ds_s3_free(x->s3);
	x->s3 = NULL;
	ds_free(&x->bucket);
	ds_free(&x->prefix);
}

/* One stage step's state, shared by its phases (ds_stage_step). */
struct stage {
	MPI_Comm world;
	const struct ds_stage_opts *o;
	struct ds_node *nd;
	int rank;
	double t0;
	const char *job;
	int locked; /* this rank holds the job's step lock */
	struct xfer x;
	struct ds_manifest m;
	struct ds_mstream *ms;       /* a pack's manifest, streamed (or read whole) */
	int streamed;                /* m holds only this rank's files (ds_mstream_run) */
	struct ds_mstream_stats mst; /* the whole pack's counts */
	struct ds_index_builder *ib; /* node leader, streamed: fed as the entries pass */
	uint64_t pack_id;
	struct layout L;
	uint32_t r; /* copies of each partition */
	struct ds_placement pl;
	struct rankmap rm;
	char *jobdir, *nodedir, *partial, *store_path;
	char *spill_jobdir, *spill_nodedir, *spill_partial, *spill_store; /* with --spill */
	uint64_t ram_bytes, spill_bytes; /* this node's store in each tier */
	struct ds_room room;
};

/* What a node directory holds in RAM beside the store: the index (entries,
 * rows, directories, runs, names, samples, locations: ds_index_build's sections), the
 * counters, serve.status and the sockets; a bound, rounded up. */
static uint64_t meta_bytes(const struct stage *S, const struct ds_placement *pl)
{
	const struct ds_manifest *m = &S->m;
	uint64_t names = 0, n = m->n;
	if (S->ms && S->streamed) {
		ds_mstream_bounds(S->ms, &n, &names); /* before the entries pass by */
	} else {
		for (size_t i = 0; i < m->n; i++)
			names += strlen(m->e[i].path) + 1 +
			         (m->e[i].target ? strlen(m->e[i].target) + 1 : 0);
	}
	n++;
	return (uint64_t)sizeof(struct ds_index_header) + ds_index_entry_bytes(n, names) +
	       PATH_MAX + ((uint64_t)pl->nparts + pl->first[pl->nparts]) * 16 + (1u << 20);
}

/* --spill: every node's RAM room (its leader's figure), then the tiers. */
static int spill_tiers(MPI_Comm world, const struct ds_stage_opts *o, const struct ds_node *nd,
                       const struct stage *S, const struct layout *L, struct ds_placement *pl)
{
	int size, rank;
	MPI_Comm_size(world, &size);
	MPI_Comm_rank(world, &rank);
	uint64_t mine[2] = {UINT64_MAX, nd->node}, meta = meta_bytes(S, pl);
	int rc = 0;
	if (nd->local_rank == 0 && !(rc = ram_room(o, nd, &mine[0])))
		mine[0] = mine[0] > meta ? mine[0] - meta : 0;
	if (ds_any_failed(world, rc))
		return rc ? rc : -EIO;
	uint64_t *all = ds_xmalloc(2 * sizeof(uint64_t) * size);
	MPI_Allgather(mine, 2, MPI_UINT64_T, all, 2, MPI_UINT64_T, world);
	uint64_t *room = ds_xmalloc(sizeof(uint64_t) * nd->nnodes);
	for (uint32_t k = 0; k < nd->nnodes; k++)
		room[k] = UINT64_MAX;
	for (int r = 0; r < size; r++)
		if (all[2 * r + 1] < nd->nnodes && all[2 * r] < room[all[2 * r + 1]])
			room[all[2 * r + 1]] = all[2 * r];
	free(all);
	rc = ds_place_tiers(pl, L->node_size, L->replicated, room);
	free(room);
	if (rc)
		ds_error("placement: %s", ds_strerror(rc));
	return rc;
}

static void stage_init(struct stage *S, MPI_Comm world, const struct ds_stage_opts *o,
                       struct ds_node *nd)
{
	memset(S, 0, sizeof(*S));
	S->world = world;
	S->o = o;
	S->nd = nd;
	MPI_Comm_rank(world, &S->rank);
	S->t0 = ds_now();
	struct xfer *x = &S->x;
	x->world = world;
	x->rank = S->rank;
	x->pack = o->pack;
	x->nd = nd;
	x->inflate = o->inflate;
	x->store_fd = -1;
	x->spill_fd = -1;
	x->rootfd = -1;
	x->prog_win = MPI_WIN_NULL;
	S->job = o->job && *o->job ? o->job : ds_store_default_job();
	if (!S->job)
		S->job = "0";
}

/* Open the source: the S3 client of a pack in a bucket, the manifest (read
 * or, for a plain tree, made), the source tree of an in-place pack.
 * Nonzero when the step fails (every rank agrees; said). */
static int stage_source(struct stage *S)
{
	MPI_Comm world = S->world;
	const struct ds_stage_opts *o = S->o;
	struct xfer *x = &S->x;
	int rank = S->rank, rc = 0;
	if (ds_s3_is_url(o->pack)) {
		/* a pack in a bucket: every rank has a client (the readers use it) */
		rc = ds_s3_parse_url(o->pack, &x->bucket, &x->prefix);
		/* rank 0 first: a configuration problem is said once, not by every rank */
		if (!rc && rank == 0 && !(x->s3 = ds_s3_new()))
			rc = -EINVAL;
		if (!ds_any_failed(world, rc) && rank != 0 && !(x->s3 = ds_s3_new()))
			rc = -EINVAL;
		if (ds_any_failed(world, rc))
			return 1;
	}
	/* a plain tree (a directory without index.h5): its manifest is made
	 * here, by a walk the ranks share; a pack's is read once and broadcast */
	int tree = rank == 0 && !x->s3 ? ds__stage_plain_tree(o->pack) : 0;
	ds_mpi_bcast(world, &tree, sizeof(tree), 0);
	if (tree < 0) {
		rc = -DS_ECORRUPT; /* said */
	} else if (o->nreplicate && !tree) {
		if (rank == 0)
			ds_error("--replicate: for a plain tree ('%s' is a pack: its replicated subtrees "
			         "were chosen by pack --replicate)", o->pack);
		rc = -EINVAL;
	} else if (o->expand_tar && !tree) {
		if (rank == 0)
			ds_error("--expand-tar: for a plain tree ('%s' is a pack: pack --in-place "
			         "--expand-tar expands its tars)", o->pack);
		rc = -EINVAL;
	} else if (tree) {
		rc = ds_tree_manifest(world, o->pack, o->replicate, o->nreplicate, o->expand_tar,
		                      S->nd->nnodes, &S->m);
		S->pack_id = rc ? 0 : S->m.pack_id;
	} else {
		rc = open_manifest(world, o->pack, &S->m, &x->meta_read, o->inflate, &S->ms, x->s3,
		                   x->bucket, x->prefix);
		S->pack_id = rc ? 0 : S->m.pack_id;
		S->streamed = !rc && !ds_mstream_whole(S->ms);
	}
	if (rc)
		return 1;
	/* in place: the source tree, where every reader opens its files (a
	 * streamed manifest's once its entries are checked: stage_plan) */
	return ds_any_failed(world, S->m.root && !S->streamed ? ds_src_root_open(&S->m, &x->rootfd)
	                                                      : 0) ||
	       ds_any_failed(world, ds_fault("stage.after_bcast", rank));
}

/* A streamed manifest's entry going by a node leader: into the index
 * builder (what write_index adds from a whole manifest; without --inflate
 * a file lands where it lies in its partition's payload). */
static int feed_index(void *ctx, const struct ds_mentry *e)
{
	struct ds_index_builder *b = ctx;
	int rc;
	if (S_ISDIR(e->mode))
		rc = ds_index_add_dir(b, e->path, e->mode, e->mtime_ns, e->size);
	else if (S_ISLNK(e->mode))
		rc = ds_index_add_symlink(b, e->path, e->mtime_ns, e->target);
	else
		rc = ds_index_add_file(b, e->path, e->mode, e->mtime_ns, e->size, e->part,
		                       e->offset, e->stored, e->codec, e->crc, e->flags);
	if (rc)
		ds_error("'%s': %s", e->path, ds_strerror(rc));
	return rc;
}

/* --inflate, streamed: a node leader places each file as it goes by, after
 * the partition's earlier files inflated (the stream checked that they come
 * in payload order: layout_build's order), as write_index does. */
struct feed_inflated {
	struct ds_index_builder *b;
	uint64_t *pos; /* per partition */
};

static int feed_index_inflated(void *ctx, const struct ds_mentry *e)
{
	struct feed_inflated *f = ctx;
	if (!S_ISREG(e->mode))
		return feed_index(f->b, e);
	uint64_t at = f->pos[e->part];
	f->pos[e->part] += e->codec != DS_CODEC_NONE ? e->size : e->stored;
	int rc = ds_index_add_file(f->b, e->path, e->mode, e->mtime_ns, e->size, e->part, at,
	                           e->size, DS_CODEC_NONE, e->crc, e->flags);
	if (rc)
		ds_error("'%s': %s", e->path, ds_strerror(rc));
	return rc;
}

/* No two files of a partition this rank handles claim the same stored
 * bytes (what the whole manifest's reader checks over every partition:
 * here every partition is checked by the ranks that handle it). */
static int layout_overlaps(const struct layout *L, const struct ds_manifest *m, const char *what)
{
	for (uint32_t p = 0; p < L->nparts; p++)
		for (uint32_t i = L->first[p] + 1; i < L->first[p + 1]; i++) {
			const struct ds_mentry *a = &m->e[L->f[i - 1].m], *b = &m->e[L->f[i].m];
			if (a->stored && b->stored && b->offset < a->offset + a->stored) {
				ds_error(
					"'%s': '%s': stored bytes overlap those of '%s' (partition %u)",
					what, b->path, a->path, p);
				return -DS_ECORRUPT;
			}
		}
	return 0;
}

/* The entries of a streamed manifest pass by (ds_mstream_run): this rank
 * keeps the files of the partitions it handles (reads or receives), a node
 * leader feeds every entry to its index builder; then the layout of the
 * kept files.  Nonzero when the step fails (every rank; said). */
static int stage_entries(struct stage *S)
{
	const struct ds_placement *pl = &S->pl;
	uint8_t *keep = ds_xcalloc(S->m.nparts + 1, 1);
	uint32_t *lpos = location_positions(pl);
	for (uint32_t p = 0; p < pl->nparts; p++)
		for (uint32_t l = pl->first[p]; l < pl->first[p + 1]; l++)
			if (pl->node[l] == S->nd->node && handler(&S->rm, pl, lpos, l) == S->rank)
				keep[p] = 1;
	free(lpos);
	if (S->nd->local_rank == 0)
		S->ib = ds_index_builder_new();
	struct feed_inflated fi = {S->ib, NULL};
	if (S->ib && S->o->inflate)
		fi.pos = ds_xcalloc(S->m.nparts + 1, sizeof(*fi.pos));
	int rc = ds_mstream_run(S->ms, keep, !S->ib ? NULL : fi.pos ? feed_index_inflated : feed_index,
	                        fi.pos ? (void *)&fi : S->ib, &S->mst);
	free(fi.pos);
	free(keep);
	if (!rc) {
		layout_release(&S->L);
		layout_build(&S->L, &S->m, S->o->inflate);
		char what[PATH_MAX];
		snprintf(what, sizeof(what), "%s/index.h5", S->o->pack);
		rc = layout_overlaps(&S->L, &S->m, what);
	}
	return ds_any_failed(S->world, rc);
}

/* Plan: the layout of the partitions, the placement of their copies (and
 * the spill tiers), the rank map and this node's paths.  Nonzero when the
 * step fails (the same on every rank; said). */
static int stage_plan(struct stage *S)
{
	const struct ds_stage_opts *o = S->o;
	struct ds_node *nd = S->nd;
	struct ds_manifest *m = &S->m;
	struct ds_placement *pl = &S->pl;
	int rc;
	layout_build(&S->L, m, o->inflate);
	S->r = o->replicas;
	if (S->r > nd->nnodes) {
		if (S->rank == 0)
			ds_warn("-R %u: only %u node(s); keeping %u cop%s of each partition", S->r,
			        nd->nnodes, nd->nnodes, nd->nnodes == 1 ? "y" : "ies");
		S->r = nd->nnodes;
	}
	if ((rc = ds_place(pl, m->nparts, S->L.node_size, S->L.replicated, nd->nnodes, S->r)) &&
	    S->rank == 0)
		ds_error("placement: %s", ds_strerror(rc));
	if (!rc && o->spill)
		rc = spill_tiers(S->world, o, nd, S, &S->L, pl);
	if (rc)
		return 1;
	if (m->nocrc) {
		/* a plain tree: every file's CRC is taken as it is read */
		S->x.crc_read = ds_xcalloc(m->n + 1, sizeof(uint32_t));
		S->x.crc_held = ds_xcalloc(m->n + 1, sizeof(uint32_t));
		S->x.held = ds_xcalloc(m->n + 1, 1);
	}
	make_rankmap(S->world, nd, &S->rm);
	if (S->streamed && stage_entries(S))
		return 1;
	if (S->streamed && S->m.root && ds_any_failed(S->world, ds_src_root_open(m, &S->x.rootfd)))
		return 1;
	S->jobdir = ds_store_jobdir(o->to, S->job);
	S->nodedir = ds_store_nodedir(o->to, S->job, nd->node);
	if (asprintf(&S->partial, "%s" DS_PARTIAL_SUFFIX, S->nodedir) < 0)
		exit(1);
	S->store_path = path_join(S->partial, DS_STORE_NAME);
	/* the spill tier: SPILL/dstage.<uid>.<job>/<node>, built the same way */
	S->ram_bytes = pl->ram_size ? pl->ram_size[nd->node] : pl->store_size[nd->node];
	S->spill_bytes = pl->store_size[nd->node] - S->ram_bytes;
	if (o->spill) {
		S->spill_jobdir = ds_store_jobdir(o->spill, S->job);
		S->spill_nodedir = ds_store_nodedir(o->spill, S->job, nd->node);
		if (asprintf(&S->spill_partial, "%s" DS_PARTIAL_SUFFIX, S->spill_nodedir) < 0)
			exit(1);
		S->spill_store = path_join(S->spill_partial, DS_STORE_NAME);
	}
	return 0;
}

/* The spill half of make_store: its job directory (not --to's), its
 * partial directory and store file. */
static int make_spill_store(struct stage *S, int rc)
{
	const struct ds_stage_opts *o = S->o;
	struct stat st;
	if (!rc) {
		struct stat a, b;
		rc = ds_jobdir_make(o->spill, S->spill_jobdir);
		if (!rc && lstat(S->spill_jobdir, &a) == 0 && lstat(S->jobdir, &b) == 0 &&
		    a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
			ds_error("--spill '%s': the same directory as --to", o->spill);
			rc = -EINVAL;
		}
	}
	if (!rc) {
		ds_rm_rf(S->spill_partial); /* left by a killed earlier attempt */
		/* a spill store whose RAM half is gone (a stage killed between
		 * its two renames, a clean cut short): ours, under the lock */
		if (lstat(S->nodedir, &st) < 0)
			ds_rm_rf(S->spill_nodedir);
		if (S->spill_bytes)
			rc = check_free(o->spill, S->spill_bytes, S->nd->node);
		if (!rc && S->spill_bytes && mkdir(S->spill_partial, 0700) < 0) {
			rc = -errno;
			ds_error("'%s': %s", S->spill_partial, strerror(errno));
		}
		if (!rc && S->spill_bytes)
			rc = make_store_file(S->spill_store, o->spill, S->spill_bytes, S->nd->node);
	}
	return rc;
}

/* Node leaders: refuse a second stage, check room, make the partial
 * directory and the store file(s).  Other ranks return 0. */
static int stage_make_store(struct stage *S)
{
	const struct ds_stage_opts *o = S->o;
	struct ds_node *nd = S->nd;
	int rc = 0;
	if (nd->local_rank != 0)
		return 0;
	struct stat st;
	int jrc = ds_jobdir_make(o->to, S->jobdir);
	if (jrc) {
		rc = jrc;
	} else if (!o->force && lstat(S->nodedir, &st) == 0) {
		rc = -EEXIST;
		ds_error("'%s': already staged (use --force to replace it)", S->nodedir);
	}
	if (!rc)
		ds_rm_rf(S->partial); /* left by a killed earlier attempt */
	/* before a byte is written: every leader takes part (with --spill
	 * the RAM part and its metadata: the tiers were laid out within
	 * the room) */
	if (o->spill)
		rc = check_room(o, nd, S->ram_bytes + meta_bytes(S, &S->pl), 0, rc, &S->room);
	else
		rc = check_room(o, nd, S->ram_bytes, DS_STORE_HEADROOM, rc, &S->room);
	if (!rc && mkdir(S->partial, 0700) < 0) {
		rc = -errno;
		ds_error("'%s': %s", S->partial, strerror(errno));
	}
	if (!rc)
		rc = make_store_file(S->store_path, o->to, S->ram_bytes, nd->node);
	if (o->spill)
		rc = make_spill_store(S, rc);
	return rc;
}

/* Every rank opens its node's store file(s). */
static int stage_open_store(struct stage *S)
{
	struct xfer *x = &S->x;
	int rc = 0;
	x->store_fd = open(S->store_path, O_RDWR | O_CLOEXEC);
	if (x->store_fd < 0) {
		rc = -errno;
		ds_error("'%s': %s", S->store_path, strerror(errno));
	}
	if (!rc && S->spill_bytes && (x->spill_fd = open(S->spill_store, O_RDWR | O_CLOEXEC)) < 0) {
		rc = -errno;
		ds_error("'%s': %s", S->spill_store, strerror(errno));
	}
	return rc;
}

/* The progress counter on rank 0 (--progress). */
static void progress_start(struct stage *S)
{
	struct xfer *x = &S->x;
	x->progress = S->o->progress;
	x->last = ds_now();
	for (uint32_t p = 0; p < S->m.nparts; p++)
		x->total_bytes += (S->pl.first[p + 1] - S->pl.first[p]) * S->m.parts[p].size;
	MPI_Win_allocate(S->rank == 0 ? sizeof(uint64_t) : 0, sizeof(uint64_t), MPI_INFO_NULL,
	                 S->world, &x->prog, &x->prog_win);
	if (S->rank == 0) {
		MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, x->prog_win);
		*x->prog = 0;
		MPI_Win_unlock(0, x->prog_win);
	}
	MPI_Barrier(S->world);
}

/* Land: move every partition to its nodes, learn a plain tree's CRCs,
 * make the store durable.  This rank's first error. */
static int stage_land(struct stage *S)
{
	struct xfer *x = &S->x;
	if (S->o->progress > 0)
		progress_start(S);
	unsigned char *buf = ds_xmalloc(2 * (sizeof(struct chunk_hdr) + CHUNK));
	uint32_t *lpos = location_positions(&S->pl);
	x->m = &S->m;
	x->L = &S->L;
	x->pl = &S->pl;
	x->rm = &S->rm;
	x->lpos = lpos;
	for (uint32_t p = 0; p < S->m.nparts; p++)
		move_partition(x, p, buf);
	free(lpos);
	free(buf);
	if (S->m.nocrc)
		learn_crcs(x, &S->m);
	if (x->store_fd >= 0 && fsync(x->store_fd) < 0 && !x->err) {
		x->err = -errno;
		ds_error("'%s': %s", S->store_path, strerror(errno));
	}
	if (x->spill_fd >= 0 && fsync(x->spill_fd) < 0 && !x->err) {
		x->err = -errno;
		ds_error("'%s': %s", S->spill_store, strerror(errno));
	}
	if (!x->err && ds_stop_signal()) {
		/* asked to stop while this rank had nothing left to read */
		ds_error("node %u: %s", S->nd->node, ds_stop_why());
		return -EINTR;
	}
	return x->err;
}

/* Index: the index and counters of each node (its leader). */
static int stage_index(struct stage *S)
{
	const struct ds_stage_opts *o = S->o;
	int rc;
	if (S->nd->local_rank != 0)
		return 0;
	char *ipath = path_join(S->partial, DS_INDEX_NAME);
	rc = write_index(ipath, &S->m, &S->L, &S->pl, S->nd->node, S->job, S->pack_id, o->inflate,
	                 o->spill, S->ib);
	free(ipath);
	if (!rc && (rc = write_stats(S->partial)))
		ds_error("'%s': %s", S->partial, ds_strerror(rc));
	return rc;
}

/* Commit: each node leader renames its partial store(s) into place at
 * once; on failure the old ones go back. */
static int stage_commit(struct stage *S)
{
	int rc = 0;
	if (S->nd->local_rank != 0)
		return 0;
	char *old = NULL, *sold = NULL;
	struct stat st;
	/* the spill half first: the RAM half's rename is the commit (a
	 * reader finds the store by it), and undoes this one if it fails */
	if (S->spill_nodedir && lstat(S->spill_nodedir, &st) == 0) {
		if (asprintf(&sold, "%s.old.%d", S->spill_nodedir, (int)getpid()) < 0)
			exit(1);
		if (rename(S->spill_nodedir, sold) < 0) {
			rc = -errno;
			ds_error("'%s': %s", S->spill_nodedir, strerror(errno));
			ds_free(&sold);
		}
	}
	if (!rc && S->spill_bytes && rename(S->spill_partial, S->spill_nodedir) < 0) {
		rc = -errno;
		ds_error("'%s': %s", S->spill_nodedir, strerror(errno));
	}
	if (!rc && lstat(S->nodedir, &st) == 0) { /* --force: swap, then remove the old one */
		if (asprintf(&old, "%s.old.%d", S->nodedir, (int)getpid()) < 0)
			exit(1);
		if (rename(S->nodedir, old) < 0) {
			rc = -errno;
			ds_error("'%s': %s", S->nodedir, strerror(errno));
		}
	}
	if (!rc && rename(S->partial, S->nodedir) < 0) {
		rc = -errno;
		ds_error("'%s': %s", S->nodedir, strerror(errno));
	}
	if (old) {
		if (rc) {
			(void)rename(old, S->nodedir);
		} else {
			old_spill_drop(old, S->o->spill);
			ds_rm_rf(old);
		}
		free(old);
	}
	if (rc && S->spill_bytes)
		(void)rename(S->spill_nodedir, S->spill_partial); /* removed below */
	if (sold) {
		if (rc)
			(void)rename(sold, S->spill_nodedir);
		else
			ds_rm_rf(sold);
		free(sold);
	}
	return rc;
}

/* After the commit: every node's store is in place (the agreement before
 * this), tidy what the new store makes void. */
static void stage_settle(struct stage *S)
{
	if (S->nd->local_rank != 0)
		return;
	/* a spill job directory no node of this host spilled into goes
	 * (rmdir: only when empty) */
	if (S->spill_jobdir)
		(void)rmdir(S->spill_jobdir);
	if (!S->o->node_per_rank)
		ds__stage_note_host(S->jobdir, S->nd);
	/* a new staging: the node sets of an earlier one (failover) are void */
	char np[PATH_MAX];
	if (!ds_store_path(np, sizeof(np), S->jobdir, DS_NODES_NAME))
		unlink(np);
}

/* Rank 0's summary of a stage from every rank's counters. */
static void stage_summary(struct stage *S)
{
	const struct ds_stage_opts *o = S->o;
	struct ds_node *nd = S->nd;
	struct xfer *x = &S->x;
	struct ds_manifest *m = &S->m;
	struct ds_placement *pl = &S->pl;
	struct ds_s3_stats s3st = {0, 0, 0};
	if (x->s3)
		ds_s3_stats(x->s3, &s3st);
	uint64_t mine[8] = {x->shared_read, x->meta_read, x->received,  x->part_meta_read,
	                    s3st.requests,  s3st.bytes,   s3st.retries, x->src_opens};
	uint64_t sum[8];
	MPI_Reduce(mine, sum, 8, MPI_UINT64_T, MPI_SUM, 0, S->world);
	/* the smallest and largest store: one MPI_MAX of signed values (MPICH
	 * 4.0.2 and Open MPI 4.1.2-4.1.4 order unsigned ones as signed in
	 * MPI_MIN/MPI_MAX: docs/mpi.md); a store is far below 2^63 bytes */
	int64_t node_bytes = nd->local_rank == 0 ? (int64_t)pl->store_size[nd->node] : 0;
	int64_t nb[2] = {node_bytes, nd->local_rank == 0 ? INT64_MAX - node_bytes : 0};
	int64_t mx[2];
	MPI_Reduce(nb, mx, 2, MPI_INT64_T, MPI_MAX, 0, S->world);
	double dt = ds_now() - S->t0;
	if (S->rank != 0 || o->quiet)
		return;
	size_t files = S->mst.files, dirs = S->mst.dirs;
	for (size_t i = 0; i < m->n && !S->streamed; i++) {
		files += S_ISREG(m->e[i].mode) != 0;
		dirs += S_ISDIR(m->e[i].mode) != 0;
	}
	char a[32], b[32], c[32], d[32];
	uint64_t landed = 0;
	for (uint32_t k = 0; k < nd->nnodes; k++)
		landed += pl->store_size[k];
	printf("staged %zu files, %zu directories on %u node(s), R=%u\n", files, dirs, nd->nnodes,
	       S->r);
	printf("per node: min %s, max %s; landed %s in %.2f s (%s/s)\n",
	       ds_fmt_size((uint64_t)(INT64_MAX - mx[1]), a, sizeof(a)),
	       ds_fmt_size((uint64_t)mx[0], b, sizeof(b)),
	       ds_fmt_size(landed, c, sizeof(c)), dt,
	       ds_fmt_size(dt > 0 ? (uint64_t)(landed / dt) : 0, d, sizeof(d)));
	if (x->s3)
		printf("read from %s: %llu bytes (payload %llu + manifest %llu + partition "
		       "seals %llu; pack stores %llu)\n"
		       "s3: %llu requests, %llu bytes fetched, %llu retries, %s/s\n",
		       o->pack, (unsigned long long)(sum[0] + sum[1] + sum[3]),
		       (unsigned long long)sum[0], (unsigned long long)sum[1],
		       (unsigned long long)sum[3], (unsigned long long)m->total_stored,
		       (unsigned long long)sum[4], (unsigned long long)sum[5],
		       (unsigned long long)sum[6],
		       ds_fmt_size(dt > 0 ? (uint64_t)(sum[5] / dt) : 0, d, sizeof(d)));
	else
		printf("read from shared FS: %llu bytes (payload %llu + manifest %llu + partition "
		       "seals %llu; pack stores %llu)\n",
		       (unsigned long long)(sum[0] + sum[1] + sum[3]), (unsigned long long)sum[0],
		       (unsigned long long)sum[1], (unsigned long long)sum[3],
		       (unsigned long long)m->total_stored);
	if (m->root)
		printf("in place from '%s'%s: opened %llu source files\n", m->root,
		       m->nocrc ? " (a plain tree)" : "", (unsigned long long)sum[7]);
	printf("forwarded over MPI: %llu bytes\n", (unsigned long long)sum[2]);
	if (S->room.is_ram) {
		/* the store is the job's memory until clean: say so */
		char e[320];
		uint64_t ram0 = pl->ram_size ? pl->ram_size[0] : pl->store_size[0];
		printf("RAM: node 0's store takes %s of the job's memory until 'dstage "
		       "clean' (room was %s: %s)",
		       ds_fmt_size(ram0, a, sizeof(a)), ds_fmt_size(S->room.room, b, sizeof(b)),
		       ds_room_describe(&S->room, e, sizeof(e)));
		if (ram0 < pl->store_size[0])
			printf("; %s spilled to '%s'",
			       ds_fmt_size(pl->store_size[0] - ram0, a, sizeof(a)), o->spill);
		printf("\n");
	}
	fflush(stdout);
}

/* A failed step: every rank agreed on it.  Nothing half-written stays. */
static void stage_fail(struct stage *S)
{
	if (S->nd->local_rank == 0 && S->partial) {
		ds_rm_rf(S->partial);
		if (S->spill_partial)
			ds_rm_rf(S->spill_partial);
	}
	/* the job directory goes when nothing else is in it (other nodes' or an
	 * earlier stage's stores stay) */
	unlock_and_tidy(S->world, S->o->to, S->job, S->locked);
	/* the spill job directory too, once every node's partial is gone (the
	 * barrier in unlock_and_tidy); rmdir leaves one that is not empty */
	if (S->nd->local_rank == 0 && S->spill_jobdir)
		(void)rmdir(S->spill_jobdir);
	S->locked = 0;
}

/* The one cleanup path: what the step holds, in success or failure. */
static void stage_release(struct stage *S)
{
	struct xfer *x = &S->x;
	ds_step_unlock(S->o->to, S->job, S->locked);
	if (x->prog_win != MPI_WIN_NULL)
		MPI_Win_free(&x->prog_win);
	if (x->store_fd >= 0)
		close(x->store_fd);
	if (x->spill_fd >= 0)
		close(x->spill_fd);
	if (x->rootfd >= 0)
		close(x->rootfd);
	free(x->crc_read);
	free(x->crc_held);
	free(x->held);
	free(S->spill_jobdir);
	free(S->spill_nodedir);
	free(S->spill_partial);
	free(S->spill_store);
	free(S->store_path);
	free(S->partial);
	free(S->nodedir);
	free(S->jobdir);
	rankmap_release(&S->rm);
	ds_placement_release(&S->pl);
	layout_release(&S->L);
	ds_manifest_release(&S->m);
	ds_mstream_close(S->ms);
	if (S->ib)
		ds_index_builder_free(S->ib);
	stage_s3_release(x);
}

/* The stage step: open and lock, plan, land, index, commit; every failure
 * agreed on by all ranks, then one cleanup path. */
int ds_stage_step(MPI_Comm world, const struct ds_stage_opts *o, struct ds_node *nd)
{
	struct stage S;
	int rc = 1;
	stage_init(&S, world, o, nd);
	/* SIGINT/SIGTERM end the step as a failure does: every rank exits 1,
	 * no store is left (the reads and the S3 client stop at once) */
	ds_stop_on_signals();
	/* One owner per job directory: a second stage, a serve or a clean of
	 * this job is refused from here to the end, so two stages cannot both
	 * pass the "already staged" check and mix their bytes. */
	if (ds_step_lock(world, o->to, S.job, "stage", 1, &S.locked))
		return 1;
	if (stage_source(&S) || stage_plan(&S))
		goto fail;
	if (ds_any_failed(world, stage_make_store(&S)) ||
	    ds_any_failed(world, stage_open_store(&S)))
		goto fail;
	if (ds_any_failed(world, stage_land(&S)) || ds_any_failed(world, stage_index(&S)) ||
	    ds_any_failed(world, stage_commit(&S)))
		goto fail;
	stage_settle(&S);
	stage_summary(&S);
	rc = 0;
	goto out;
fail:
	stage_fail(&S);
out:
	stage_release(&S);
	return rc;
}

int ds_cmd_stage(int argc, char **argv)
{
	struct ds_stage_opts o;
	int rc = stage_parse(argc, argv, &o);
	if (o.help) {
		fputs(cmd_usage, stdout);
		return 0;
	}
	if (rc)
		return rc;
	/* -q drops the summary only: warnings (R capped, ...) still show */
	if (ds_mpi_init(&argc, &argv))
		return 1;
	struct ds_node nd;
	int rank;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (ds_node_identify(MPI_COMM_WORLD, o.node_per_rank, &nd)) {
		MPI_Finalize();
		return 1;
	}
	rc = ds_stage_step(MPI_COMM_WORLD, &o, &nd);
	ds_node_release(&nd);
	MPI_Finalize();
	return rc;
}
