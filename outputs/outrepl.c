/* SPDX-License-Identifier: BSD-3-Clause */
/* outrepl.c: replicated write-once outputs (--outputs-replicas N,
 * docs/outputs.md "Replicated outputs").
 *
 * With N > 1 a writer's close publishes its file only once N-1 other nodes
 * hold a copy checked against the file's CRC-32C: the holder (the
 * writer's node) sums the closed file, sends its bytes to the next N-1
 * living nodes of the step in node order (R_HDR, then the bytes in chunks,
 * on a communicator of their own), each writes them to AREA/w/r.<token>,
 * sums them and answers (R_ACK); only when every replica has answered 0
 * does the holder ask node 0 for the publish, which names the replicas.
 * Every node applies it as before; a replica node renames its copy into
 * AREA/ns in place of the placeholder, records itself as a replica
 * (ds__orec.repl) and rewrites NODEDIR/outputs.status, listing the output
 * as not drained, before it acknowledges: when the close returns, a
 * recovery (`dstage drain --wait`, cmd_drain.c) on a replica node can copy
 * the output even if the holder's node and its store are gone.
 *
 * The drain is the holder's, as without replicas (one copy to the drain
 * directory, in the holder's order of renames and unlinks).  When it has
 * made an output durable the holder tells the replicas (R_DRAINED), which
 * stop listing it.  A rename or unlink is applied by every node to its
 * AREA/ns as before, the replica's real file included; a replaced or
 * unlinked output is no longer listed anywhere.  The copies are cleaned
 * with the area (a new service of the job wipes it once nothing is listed
 * as not drained; `dstage clean`).
 *
 * Threads: MPI only from main (ds__repl_poll, inside ds__out_poll); the
 * holder's connection thread waits on rp->cv for its push; the drain
 * thread queues notices.  The outputs mutex guards everything here. */
#include "outrepl.h"
#include "dsout.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define pfmt ds__out_pfmt
#define RCHUNK (16u << 20)
enum { R_CTL = 0 }; /* control messages; the bytes go under tags 1..30000 */
enum { R_HDR = 1, R_ACK, R_DROP, R_DRAINED };

struct rmsg {
	uint32_t type;
	int32_t status;
	uint64_t token, size, seq;
	uint32_t crc;
	int32_t xfer;
	char path[PATH_MAX];
};

struct rsend {
	struct rsend *next;
	struct rmsg m;
	MPI_Request req;
};

/* the holder: a closed file on its way to the replicas */
struct rpush {
	struct rpush *next;
	uint64_t token, size;
	uint32_t crc;
	const char *map;
	char *path;
	uint32_t repl[DS_OUT_MAX_REPL], nrepl;
	int started, left, status, done;
	MPI_Request *reqs;
	int nreq;
};

/* a replica: a copy being received */
struct rin {
	struct rin *next;
	uint64_t token, size;
	uint32_t crc, sum; /* the holder's; ours of chunks 0..nsum-1 */
	int src, xfer, fd;
	char *map;
	MPI_Request *reqs;
	int nreq, nsum;
	char tmp[PATH_MAX];
};

/* a replica: a complete, checked copy waiting for its publish */
struct rcopy {
	struct rcopy *next;
	uint64_t token;
	char tmp[PATH_MAX];
};

/* a replica: R_DRAINED of a publish this node has not applied yet (the
 * holder's drain may finish before node 0's APPLY reaches a replica: the
 * two travel on different communicators) */
struct rearly {
	struct rearly *next;
	uint64_t seq;
};

/* a control message for main to send (from another thread) */
struct rnote {
	struct rnote *next;
	struct rmsg m;
	uint32_t to; /* a node */
};

struct ds__orepl {
	struct ds_out *o;
	const struct ds_out_host *host; /* the service's (ds__out_host) */
	MPI_Comm rc;
	unsigned n; /* holders of each output, the writer's node included */
	int xfer_ctr, stopped;
	struct rpush *pushes;
	struct rin *ins;
	struct rcopy *copies;
	struct rnote *notes;
	struct rsend *sends;
	struct rearly *early;
	pthread_cond_t cv; /* a push ended */
};

static int nchunks(uint64_t size) { return (int)((size + RCHUNK - 1) / RCHUNK); }
static uint64_t chunk_len(uint64_t size, int i)
{
	uint64_t off = (uint64_t)i * RCHUNK;
	return size - off < RCHUNK ? size - off : RCHUNK;
}

int ds__repl_start(struct ds_out *o, struct ds__orepl **out)
{
	*out = NULL;
	const struct ds_out_host *s = ds__out_host(o);
	unsigned want = ds__out_opts(o)->outputs_replicas, n = want ? want : 1;
	if (n > s->nnodes) {
		/* after a loss the survivors may be fewer than asked for:
		 * every output is then on every node */
		if (s->node == 0 || ds__out_rank_of(s, s->node) == 0)
			ds_warn("--outputs-replicas %u: the step has %u node(s); each output is held "
			        "by %u",
			        n, s->nnodes, s->nnodes);
		n = s->nnodes;
	}
	struct ds__orepl *rp = ds_xcalloc(1, sizeof(*rp));
	rp->o = o;
	rp->host = s;
	rp->n = n;
	pthread_cond_init(&rp->cv, NULL);
	MPI_Comm_dup(s->comm, &rp->rc); /* collective: every rank, whatever n */
	*out = rp;
	return 0;
}

static void send_ctl(struct ds__orepl *rp, int to, const struct rmsg *m)
{
	struct rsend *x = ds_xmalloc(sizeof(*x));
	x->m = *m;
	MPI_Isend(&x->m, (int)sizeof(x->m), MPI_BYTE, to, R_CTL, rp->rc, &x->req);
	x->next = rp->sends;
	rp->sends = x;
	/* wake the peer's main (it may sleep 50 ms between polls: shuffle/outhost.c) */
	ds__out_poke(rp->host, to);
}

static void note(struct ds__orepl *rp, uint32_t to, const struct rmsg *m)
{
	struct rnote *q = ds_xcalloc(1, sizeof(*q));
	q->m = *m;
	q->to = to;
	q->next = rp->notes;
	rp->notes = q;
	ds__out_wake(rp->o);
}

/* ---- the holder --------------------------------------------------------- */
int ds__repl_push(struct ds__orepl *rp, int fd, uint64_t size, uint64_t token, const char *path,
                  uint32_t *crc, uint32_t *repl, uint32_t *nrepl)
{
	*nrepl = 0;
	if (!rp || rp->n <= 1)
		return 0;
	const struct ds_out_host *s = rp->host;
	pthread_mutex_t *mu = ds__out_mutex(rp->o);
	/* the next n-1 living nodes after this one, in staged-node order */
	uint32_t staged = s->staged_nnodes, k = 0;
	for (uint32_t i = 1; i < staged && k + 1 < rp->n; i++) {
		uint32_t node = (s->node + i) % staged;
		if (ds__out_rank_of(s, node) >= 0)
			repl[k++] = node;
	}
	*nrepl = k;
	if (!k)
		return 0;
	/* the sum the replicas check their copy against: taken here, on the
	 * close's path (without replicas it is taken just after: sum.c) */
	void *map = NULL;
	if (size) {
		map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			return -errno;
	}
	double t0 = ds_now();
	pthread_mutex_unlock(mu);
	if (map)
		madvise(map, size, MADV_SEQUENTIAL);
	uint32_t c = size ? ds_crc32c(0, map, size) : 0;
	pthread_mutex_lock(mu);
	double t1 = ds_now();
	*crc = c;
	struct rpush *p = ds_xcalloc(1, sizeof(*p));
	p->token = token;
	p->size = size;
	p->crc = c;
	p->map = map;
	p->path = ds_xstrdup(path);
	memcpy(p->repl, repl, k * sizeof(*repl));
	p->nrepl = k;
	p->left = (int)k;
	p->next = rp->pushes;
	rp->pushes = p;
	ds__out_wake(rp->o);
	while (!p->done)
		pthread_cond_wait(&rp->cv, mu);
	for (struct rpush **pp = &rp->pushes; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	int rc = p->status;
	if (map)
		munmap(map, size);
	free(p->reqs);
	free(p->path);
	free(p);
	if (rc) {
		ds_error("node %u: '%s': not replicated: %s", s->node, path, ds_strerror(rc));
		ds__repl_abandon(rp, token, repl, k);
		/* the writer's close gets an errno, not dstage's own codes
		 * (DS_ECHECKSUM, ...) */
		if (rc <= -DS_ECORRUPT)
			rc = -EIO;
	} else {
		ds_debug("node %u: '%s' (%llu bytes) replicated on %u other node(s) in %.4f s (sum "
		         "%.4f s, copy and check %.4f s)",
		         s->node, path, (unsigned long long)size, k, ds_now() - t0, t1 - t0,
		         ds_now() - t1);
	}
	return rc;
}

void ds__repl_abandon(struct ds__orepl *rp, uint64_t token, const uint32_t *repl, uint32_t nrepl)
{
	struct rmsg m;
	memset(&m, 0, sizeof(m));
	m.type = R_DROP;
	m.token = token;
	for (uint32_t i = 0; i < nrepl; i++)
		note(rp, repl[i], &m);
}

static void push_start(struct ds__orepl *rp, struct rpush *p)
{
	p->started = 1;
	int nc = p->size ? nchunks(p->size) : 0;
	p->reqs = ds_xcalloc((size_t)(nc * (int)p->nrepl) + 1, sizeof(MPI_Request));
	for (uint32_t i = 0; i < p->nrepl; i++) {
		int to = ds__out_rank_of(rp->host, p->repl[i]);
		if (to < 0) {
			p->status = -EHOSTDOWN;
			p->left--;
			continue;
		}
		struct rmsg h;
		memset(&h, 0, sizeof(h));
		h.type = R_HDR;
		h.token = p->token;
		h.size = p->size;
		h.crc = p->crc;
		h.xfer = 1 + (rp->xfer_ctr++ % 30000);
		pfmt(h.path, sizeof(h.path), "%s", p->path);
		send_ctl(rp, to, &h);
		for (int c = 0; c < nc; c++)
			MPI_Isend((void *)(p->map + (uint64_t)c * RCHUNK),
			          (int)chunk_len(p->size, c), MPI_BYTE, to, h.xfer, rp->rc,
			          &p->reqs[p->nreq++]);
	}
}

static void pushes_test(struct ds__orepl *rp)
{
	for (struct rpush *p = rp->pushes; p; p = p->next) {
		if (!p->started)
			push_start(rp, p);
		if (p->done)
			continue;
		int all = 1;
		for (int i = 0; i < p->nreq && all; i++) {
			int d = 0;
			MPI_Test(&p->reqs[i], &d, MPI_STATUS_IGNORE);
			all = d;
		}
		if (all && p->left <= 0) {
			p->done = 1;
			pthread_cond_broadcast(&rp->cv);
		}
	}
}

static void ack_in(struct ds__orepl *rp, const struct rmsg *m)
{
	for (struct rpush *p = rp->pushes; p; p = p->next)
		if (p->token == m->token && !p->done) {
			if (m->status && !p->status)
				p->status = m->status;
			p->left--;
			return;
		}
}

void ds__repl_drained(struct ds_out *o, struct ds__orec *r)
{
	struct ds__orepl *rp = ds__out_repl(o);
	if (!rp || !r->nrepl)
		return;
	struct rmsg m;
	memset(&m, 0, sizeof(m));
	m.type = R_DRAINED;
	m.seq = r->seq;
	pfmt(m.path, sizeof(m.path), "%s", r->path);
	for (uint32_t i = 0; i < r->nrepl; i++)
		note(rp, r->repl[i], &m);
}

/* ---- a replica -------------------------------------------------------------- */
static void in_free(struct rin *x)
{
	if (x->map)
		munmap(x->map, x->size);
	if (x->fd >= 0)
		close(x->fd);
	free(x->reqs);
	free(x);
}

static void ack_out(struct ds__orepl *rp, int to, uint64_t token, int status)
{
	struct rmsg a;
	memset(&a, 0, sizeof(a));
	a.type = R_ACK;
	a.token = token;
	a.status = status;
	send_ctl(rp, to, &a);
}

static void hdr_in(struct ds__orepl *rp, const struct rmsg *h, int src)
{
	const struct ds_out_host *s = rp->host;
	struct rin *x = ds_xcalloc(1, sizeof(*x));
	x->token = h->token;
	x->size = h->size;
	x->crc = h->crc;
	x->src = src;
	x->xfer = h->xfer;
	/* AREA/w by descriptor, as everything in the area (outputs.c) */
	pfmt(x->tmp, sizeof(x->tmp), "r.%016llx", (unsigned long long)h->token);
	x->fd = openat(ds__out_wfd(rp->o), x->tmp,
	               O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = x->fd < 0 ? -errno : 0;
	if (!rc && ds_fault("outputs.replica", (int)s->node))
		rc = -EIO; /* tests: a replica that cannot keep its copy */
	if (!rc && h->size && (rc = -posix_fallocate(x->fd, 0, (off_t)h->size)) == 0) {
		x->map = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0);
		if (x->map == MAP_FAILED) {
			x->map = NULL;
			rc = -errno;
		}
	}
	x->nreq = h->size ? nchunks(h->size) : 0;
	x->reqs = ds_xcalloc((size_t)x->nreq + 1, sizeof(MPI_Request));
	if (rc) {
		ds_error("node %u: '%s': cannot keep a replica: %s", s->node, h->path,
		         ds_strerror(rc));
		/* the holder sends anyway: take its bytes and drop them */
		void *junk = ds_xmalloc(RCHUNK);
		for (int i = 0; i < x->nreq; i++)
			MPI_Recv(junk, (int)chunk_len(h->size, i), MPI_BYTE, src, h->xfer, rp->rc,
			         MPI_STATUS_IGNORE);
		free(junk);
		if (x->fd >= 0)
			unlinkat(ds__out_wfd(rp->o), x->tmp, 0);
		in_free(x);
		ack_out(rp, src, h->token, rc);
		return;
	}
	for (int i = 0; i < x->nreq; i++)
		MPI_Irecv(x->map + (uint64_t)i * RCHUNK, (int)chunk_len(h->size, i), MPI_BYTE, src,
		          h->xfer, rp->rc, &x->reqs[i]);
	x->next = rp->ins;
	rp->ins = x;
}

static void ins_test(struct ds__orepl *rp)
{
	for (struct rin **pp = &rp->ins; *pp;) {
		struct rin *x = *pp;
		/* each chunk summed as soon as it and those before it are in:
		 * the sum runs while the rest of the bytes arrive */
		while (x->nsum < x->nreq) {
			int d = 0;
			MPI_Test(&x->reqs[x->nsum], &d, MPI_STATUS_IGNORE);
			if (!d)
				break;
			x->sum = ds_crc32c(x->sum, x->map + (uint64_t)x->nsum * RCHUNK,
			                   chunk_len(x->size, x->nsum));
			x->nsum++;
		}
		if (x->nsum < x->nreq) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		/* checked here, at the replica, before the writer's close may
		 * return: a copy that differs is refused (the close fails) */
		int rc = x->sum == x->crc ? 0 : -DS_ECHECKSUM;
		if (rc) {
			ds_error("node %u: a replica from node rank %d: %s", rp->host->node, x->src,
			         ds_strerror(rc));
			unlinkat(ds__out_wfd(rp->o), x->tmp, 0);
		} else {
			struct rcopy *k = ds_xcalloc(1, sizeof(*k));
			k->token = x->token;
			pfmt(k->tmp, sizeof(k->tmp), "%s", x->tmp);
			k->next = rp->copies;
			rp->copies = k;
		}
		ack_out(rp, x->src, x->token, rc);
		in_free(x);
	}
}

static struct rcopy *copy_take(struct ds__orepl *rp, uint64_t token)
{
	for (struct rcopy **pp = &rp->copies; *pp; pp = &(*pp)->next)
		if ((*pp)->token == token) {
			struct rcopy *k = *pp;
			*pp = k->next;
			return k;
		}
	return NULL;
}

int ds__repl_take(struct ds__orepl *rp, uint64_t token, const char *dst, uint32_t mode,
                  int64_t mtime_ns)
{
	struct rcopy *k = rp ? copy_take(rp, token) : NULL;
	if (!k)
		return -ENOENT;
	struct timespec ts[2] = {{mtime_ns / 1000000000ll, mtime_ns % 1000000000ll},
	                         {mtime_ns / 1000000000ll, mtime_ns % 1000000000ll}};
	/* dst: a name relative to AREA/ns (ds__out_nspath) */
	int wfd = ds__out_wfd(rp->o);
	int rc = 0, fd = openat(wfd, k->tmp, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0 || fchmod(fd, mode & 07777) < 0 || futimens(fd, ts) < 0 ||
	    renameat(wfd, k->tmp, ds__out_nsfd(rp->o), dst) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc)
		unlinkat(wfd, k->tmp, 0);
	free(k);
	return rc;
}

static void drained_in(struct ds__orepl *rp, const struct rmsg *m)
{
	/* by the publish's number: a rename may have reached this node first */
	struct ds__orec *r = ds__out_find_seq(rp->o, m->seq);
	if (!r) { /* its publish is still on its way here */
		ds_debug("node %u: '%s' drained by its holder before its publish reached this node",
		         rp->host->node, m->path);
		struct rearly *e = ds_xmalloc(sizeof(*e));
		e->seq = m->seq;
		e->next = rp->early;
		rp->early = e;
		return;
	}
	if (!r->repl_drained) {
		r->repl_drained = 1;
		ds__out_status_write_held(rp->o);
	}
}

void ds__repl_applied(struct ds__orepl *rp, struct ds__orec *r)
{
	if (!rp)
		return;
	for (struct rearly **pp = &rp->early; *pp; pp = &(*pp)->next)
		if ((*pp)->seq == r->seq) {
			struct rearly *e = *pp;
			*pp = e->next;
			free(e);
			r->repl_drained = 1; /* drained before its publish got here */
			return;
		}
}

/* ---- main ------------------------------------------------------------------ */
void ds__repl_poll(struct ds__orepl *rp)
{
	if (!rp)
		return;
	while (rp->notes) {
		struct rnote *q = rp->notes;
		rp->notes = q->next;
		int to = ds__out_rank_of(rp->host, q->to);
		if (to >= 0)
			send_ctl(rp, to, &q->m);
		free(q);
	}
	for (;;) {
		int flag = 0;
		MPI_Status st;
		MPI_Iprobe(MPI_ANY_SOURCE, R_CTL, rp->rc, &flag, &st);
		if (!flag)
			break;
		struct rmsg *m = ds_xmalloc(sizeof(*m));
		MPI_Recv(m, (int)sizeof(*m), MPI_BYTE, st.MPI_SOURCE, R_CTL, rp->rc,
		         MPI_STATUS_IGNORE);
		m->path[PATH_MAX - 1] = 0;
		switch (m->type) {
		case R_HDR: hdr_in(rp, m, st.MPI_SOURCE); break;
		case R_ACK: ack_in(rp, m); break;
		case R_DROP: {
			struct rcopy *k = copy_take(rp, m->token);
			if (k)
				unlinkat(ds__out_wfd(rp->o), k->tmp, 0);
			free(k);
			break;
		}
		case R_DRAINED: drained_in(rp, m); break;
		}
		free(m);
	}
	ins_test(rp);
	pushes_test(rp);
	for (struct rsend **pp = &rp->sends; *pp;) {
		int d = 0;
		MPI_Test(&(*pp)->req, &d, MPI_STATUS_IGNORE);
		if (d) {
			struct rsend *x = *pp;
			*pp = x->next;
			free(x);
		} else {
			pp = &(*pp)->next;
		}
	}
}

int ds__repl_busy(struct ds__orepl *rp)
{
	return rp && (rp->pushes || rp->ins || rp->notes || rp->sends);
}

void ds__repl_status(struct ds__orepl *rp, struct ds__orec *recs, struct ds_buf *b)
{
	if (!rp || rp->n <= 1 || rp->stopped)
		return;
	uint32_t me = rp->host->node;
	char line[PATH_MAX + 64], cs[9];
	for (struct ds__orec *r = recs; r; r = r->next) {
		if (r->gone || !r->local || r->holder == me || r->repl_drained || !r->nrepl)
			continue;
		int mine = 0;
		for (uint32_t i = 0; i < r->nrepl; i++)
			mine |= r->repl[i] == me;
		if (!mine)
			continue;
		int n = pfmt(line, sizeof(line), "undrained=%llu %s %s\n",
		             (unsigned long long)r->size, ds__out_crc_str(r, cs), r->path);
		ds_buf_add(b, line, (size_t)n);
	}
}

void ds__repl_stop(struct ds__orepl *rp)
{
	if (rp)
		rp->stopped = 1;
}

void ds__repl_free(struct ds__orepl *rp)
{
	if (!rp)
		return;
	MPI_Comm_free(&rp->rc);
	while (rp->copies) {
		struct rcopy *k = rp->copies;
		rp->copies = k->next;
		free(k);
	}
	while (rp->notes) {
		struct rnote *q = rp->notes;
		rp->notes = q->next;
		free(q);
	}
	while (rp->early) {
		struct rearly *e = rp->early;
		rp->early = e->next;
		free(e);
	}
	pthread_cond_destroy(&rp->cv);
	free(rp);
}
