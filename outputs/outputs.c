/* SPDX-License-Identifier: BSD-3-Clause */
/* outputs.c: write-once outputs, the service side (dsoutputs.h, dsout.h,
 * docs/outputs.md): their start, stop and end, NODEDIR/outputs.status and
 * the options.  The rest of outputs/: the ordering of the changes and the
 * main loop's part (order.c), fetches (fetch.c), the writers' connections
 * (conn.c), the sums after close (sum.c), replicas (outrepl.c), the drain
 * (drain.c) and `dstage drain` (cmd_drain.c).
 *
 * Every node keeps the outputs namespace in AREA/ns: the files it holds,
 * placeholders (right size, mode and mtime, no bytes) of the files other
 * nodes hold, every directory.  Changes are serialised by node 0, the one
 * decision point: a node sends its request (REQ) to node 0, which checks it
 * against its own view (AREA/ns plus the set of paths being written), and
 * either answers at once (DONE: a refusal, or CREATE, which only takes the
 * path) or numbers the change and sends it to every other node (APPLY);
 * each applies it to its AREA/ns and acknowledges (ACK); when all have,
 * node 0 answers the origin (DONE).  Node 0 applies its own change when it
 * sends it, so the next request is checked against it.  Every node thus
 * applies the same changes in the same order, and a writer's close returns
 * only when every node shows its file.
 *
 * Bytes of a file held elsewhere move on demand (OPEN): FETCH to the holder,
 * which answers with a header (size, CRC-32C) and the bytes in chunks on a
 * second communicator; the copy is checked against the CRC, then renamed
 * over the placeholder.
 *
 * Threads: the socket thread accepts the shim's connections (one request
 * each) and runs each in a short-lived thread; those do the file work
 * (CRC of a closed file, copies) and hand what needs MPI to main through a
 * queue; main (ds_out_poll, from the service loop) does every MPI call;
 * the sum thread (sum.c) sums each published file; the drain thread
 * (drain.c) copies the held files to --drain-to.  One mutex guards the
 * state (struct ds_out, outputs.h). */
#include "dsindex.h" /* ds_store_jobdir */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* snprintf whose truncation the callers check where it matters (names are
 * bounded by PATH_MAX on the way in) */
#define pfmt ds__out_pfmt
int ds__out_pfmt(char *buf, size_t n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = vsnprintf(buf, n, fmt, ap);
	va_end(ap);
	return r;
}

/* rel's name relative to AREA/ns, for the *at() calls on o->nsfd: every
 * name in the area is used from the descriptors the service opened and
 * checked at its start, never by a path through --outputs-to DIR (another
 * user can rename things there: docs/outputs.md "Privacy") */
int ds__out_nspath(struct ds_out *o, const char *rel, char *buf)
{
	(void)o;
	int n = pfmt(buf, PATH_MAX, "%s", *rel ? rel : ".");
	return n < PATH_MAX ? 0 : -ENAMETOOLONG;
}

struct ds__orec *ds__out_find(struct ds_out *o, const char *path)
{
	for (struct ds__orec *r = o->recs; r; r = r->next)
		if (!r->gone && !strcmp(r->path, path))
			return r;
	return NULL;
}

/* ---- setup and end -------------------------------------------------------- */
/* dfd/name made 0700 when missing, opened without following a symlink and
 * checked on the descriptor (a directory of ours, 0700): the descriptor,
 * from which everything under it is used, or -errno.  Checked once and
 * then used by path, a directory in a shared --outputs-to DIR could be
 * swapped by another user for one of theirs, and the next outputs written
 * there (issue 24). */
static int private_dirat(int dfd, const char *name)
{
	if (mkdirat(dfd, name, 0700) < 0 && errno != EEXIST)
		return -errno;
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP || errno == ENOTDIR ? -EPERM : -errno; /* planted */
	struct stat st;
	int rc = fstat(fd, &st) < 0 ? -errno : 0;
	if (!rc && (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()))
		rc = -EPERM; /* planted: another user's */
	if (!rc && (st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0)
		rc = -errno;
	if (rc) {
		close(fd);
		return rc;
	}
	return fd;
}

/* rm -rf dfd/name, by descriptor, never following a symlink */
static void rm_rf_at(int dfd, const char *name, int depth)
{
	int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		unlinkat(dfd, name, 0);
		return;
	}
	DIR *d = depth < 512 ? fdopendir(fd) : NULL;
	if (!d) {
		close(fd);
		return;
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (unlinkat(dirfd(d), de->d_name, 0) < 0 && (errno == EISDIR || errno == EPERM))
			rm_rf_at(dirfd(d), de->d_name, depth + 1);
	}
	closedir(d);
	unlinkat(dfd, name, AT_REMOVEDIR);
}

void ds_out_defaults(struct ds_out_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->drain_rate = 1ull << 30;
	o->drain_timeout = 600;
}

/* A new ds_out, its locks and communicators, nothing open yet. */
static struct ds_out *out_new(const struct ds_out_host *h, const struct ds_out_opts *so)
{
	struct ds_out *o = ds_xcalloc(1, sizeof(*o));
	o->h = *h;
	o->oo = *so;
	o->lfd = -1;
	o->qtail = &o->queue;
	pthread_mutex_init(&o->mu, NULL);
	pthread_mutex_init(&o->status_mu, NULL);
	pthread_cond_init(&o->fetched, NULL);
	pthread_cond_init(&o->threads_cv, NULL);
	pthread_cond_init(&o->sum_cv, NULL);
	pthread_cond_init(&o->summed, NULL);
	o->sums_tail = &o->sums;
	MPI_Comm_dup(o->h.comm, &o->oc);
	MPI_Comm_rank(o->oc, &o->rank);
	MPI_Comm_dup(o->h.comm, &o->dc);
	o->areafd = o->nsfd = o->wfd = -1;
	return o;
}

/* The output area's path into o->area (also when it fails, for the
 * message); with --outputs-to DIR the job's directory there too, by
 * descriptor into *jdfd (else it stays AT_FDCWD). */
static int out_area_path(struct ds_out *o, int *jdfd)
{
	const struct ds_out_host *h = &o->h;
	const struct ds_out_opts *so = &o->oo;
	int rc = 0;
	if (so->outputs_to) {
		/* DIR may be a scratch directory others can write: DIR opened
		 * once, dstage.<uid>.<job> and <node>.out made and checked from
		 * it by descriptor, and only ever used from there */
		char *jd = ds_store_jobdir(so->outputs_to,
		                           h->job && *h->job ? h->job : ds_store_default_job());
		rc = ds_mkdir_p(so->outputs_to, 0700);
		int top = rc ? -1 : open(so->outputs_to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (!rc && top < 0)
			rc = -errno;
		if (!rc) {
			const char *jb = strrchr(jd, '/');
			*jdfd = private_dirat(top, jb ? jb + 1 : jd);
			if (*jdfd < 0)
				rc = *jdfd;
		}
		if (top >= 0)
			close(top);
		if ((size_t)pfmt(o->area, sizeof(o->area), "%s/%u.out", jd, h->node) >=
		    sizeof(o->area))
			rc = -ENAMETOOLONG;
		free(jd);
	} else if ((size_t)pfmt(o->area, sizeof(o->area), "%s/" DS_OUT_AREA_NAME, h->nodedir) >=
	           sizeof(o->area)) {
		rc = -ENAMETOOLONG;
	}
	return rc;
}

/* A new service starts from an empty namespace; outputs an earlier one of
 * this job left undrained are not thrown away: refused until `dstage drain
 * --wait` has recovered them.  Also this service's instance number. */
static int out_check_earlier(struct ds_out *o)
{
	const struct ds_out_host *h = &o->h;
	char st[PATH_MAX], *text;
	int rc = 0;
	pfmt(st, sizeof(st), "%s/" DS_OUT_STATUS, h->nodedir);
	/* all of it (one line per output not drained, any number): the area
	 * is wiped only when no line lists one */
	ssize_t n = ds__out_read_text(st, &text);
	unsigned long left = 0, inst = 0;
	if (n > 0) {
		for (const char *q = text; (q = strstr(q, "undrained=")); q++)
			left += q == text || q[-1] == '\n';
		const char *q = strstr(text, "\ninstance=");
		if (q)
			inst = (unsigned)strtoul(q + 10, NULL, 10);
	}
	free(text);
	o->inst = (inst + 1) & 0xffff ? (inst + 1) & 0xffff : 1;
	if (n < 0 && n != -ENOENT) {
		ds_error("node %u: '%s': %s (it may list outputs not drained: the output area "
		         "is not wiped)",
		         h->node, st, ds_strerror((int)n));
		rc = (int)n;
	} else if (left) {
		ds_error(
			"node %u: %lu output(s) of an earlier service of this job were not drained "
			"(%s): run 'dstage drain --wait --to %s%s%s' first to recover them",
			h->node, left, st, h->to, h->job ? " --job " : "", h->job ? h->job : "");
		rc = -EEXIST;
	}
	return rc;
}

/* The area, made or checked private, opened. */
static int out_open_area(struct ds_out *o, int jdfd)
{
	const char *an = strrchr(o->area, '/') + 1;
	o->areafd = private_dirat(jdfd, jdfd == AT_FDCWD ? o->area : an);
	return o->areafd < 0 ? o->areafd : 0;
}

/* The area's namespace and writers' directories emptied of what an earlier
 * service left, and opened. */
static int out_fresh_dirs(struct ds_out *o)
{
	char stale[64];
	pfmt(stale, sizeof(stale), "old.%ld", (long)getpid());
	if (renameat(o->areafd, DS_OUT_NS, o->areafd, stale) == 0)
		rm_rf_at(o->areafd, stale, 0);
	pfmt(stale, sizeof(stale), "oldw.%ld", (long)getpid());
	if (renameat(o->areafd, DS_OUT_W, o->areafd, stale) == 0)
		rm_rf_at(o->areafd, stale, 0);
	o->nsfd = private_dirat(o->areafd, DS_OUT_NS);
	if (o->nsfd < 0)
		return o->nsfd;
	o->wfd = private_dirat(o->areafd, DS_OUT_W);
	if (o->wfd < 0)
		return o->wfd;
	return 0;
}

/* The longest name of an output (name_fits), decided by the node that
 * orders the namespace: it must fit PATH_MAX in every node's AREA/ns (each
 * node's area differs from this one's by its node number: up to 9 more
 * digits) and in the drain directory with the drain's suffix.  Same on
 * every node. */
static void out_name_limit(struct ds_out *o)
{
	size_t ns = strlen(o->area) + 1 + strlen(DS_OUT_NS) + 9 + 1,
	       dr = strlen(ds__drain_dir(o->dr)) + 1 + DS_OUT_DRAIN_SUFFIX_MAX;
	size_t need = ns > dr ? ns : dr;
	o->rel_max = need < PATH_MAX - 1 ? PATH_MAX - 1 - need : 0;
}

static int out_thread(struct ds_out *o, pthread_t *t, int *on, void *(*fn)(void *))
{
	if (pthread_create(t, NULL, fn, o))
		return -EAGAIN;
	*on = 1;
	return 0;
}

/* The writers' socket, NODEDIR/outputs.sock, 0600 from its creation. */
static int out_listen(struct ds_out *o)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(o->sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	int rc = 0;
	strcpy(sa.sun_path, o->sock);
	unlink(o->sock);
	o->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t um = umask(077);
	if (o->lfd < 0 || bind(o->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    chmod(o->sock, 0600) < 0 || listen(o->lfd, 128) < 0)
		rc = -errno;
	umask(um);
	return rc;
}

/* NODEDIR/outputs.conf: the mount prefix and the area, for the shim and
 * `dstage clean`. */
static int out_write_conf(const struct ds_out *o)
{
	char conf[PATH_MAX], text[2 * PATH_MAX + 8];
	pfmt(conf, sizeof(conf), "%s/" DS_OUT_CONF, o->h.nodedir);
	int n = pfmt(text, sizeof(text), "%s\n%s\n", o->oo.outputs, o->area);
	return ds_write_file_atomic(conf, text, (size_t)n, 0600);
}

int ds_out_start(const struct ds_out_host *h, const struct ds_out_opts *so, struct ds_out **out)
{
	*out = NULL;
	if (!so->outputs)
		return 0;
	ds_fault("serve.outputs_start", (int)h->node); /* tests: a slow start (t/2207) */
	struct ds_out *o = out_new(h, so);
	*out = o;
	int jdfd = AT_FDCWD;
	int rc = out_area_path(o, &jdfd);
	pfmt(o->sock, sizeof(o->sock), "%s/" DS_OUT_SOCK, o->h.nodedir);
	if (!rc)
		rc = out_check_earlier(o);
	if (!rc)
		rc = out_open_area(o, jdfd);
	if (jdfd >= 0)
		close(jdfd);
	if (!rc)
		rc = out_fresh_dirs(o);
	if (!rc)
		rc = ds__drain_new(o, &o->oo, &o->dr);
	{ /* collective, whatever rc is here */
		int rrc = ds__repl_start(o, &o->repl);
		if (!rc)
			rc = rrc;
	}
	if (!rc)
		out_name_limit(o);
	if (!rc)
		rc = out_thread(o, &o->sthread, &o->sthread_on, ds__out_sum_main);
	if (!rc)
		rc = out_listen(o);
	if (!rc)
		rc = out_write_conf(o);
	if (!rc)
		rc = out_thread(o, &o->athread, &o->athread_on, ds__out_accept_main);
	if (rc)
		ds_error("node %u: outputs in '%s': %s", o->h.node, o->area, ds_strerror(rc));
	else
		ds__out_status_write(o);
	return rc;
}

int ds_out_busy(struct ds_out *o)
{
	if (!o || !o->dr)
		return 0;
	pthread_mutex_lock(&o->mu);
	int busy = o->queue || o->wait || o->acks || o->dwaits || o->xfers || o->sends || o->sums ||
	           o->fdefer || ds__drain_pending(o->dr) || ds__repl_busy(o->repl);
	pthread_mutex_unlock(&o->mu);
	return busy;
}

int ds_out_inflight(struct ds_out *o)
{
	if (!o)
		return 0;
	if (pthread_mutex_trylock(&o->mu))
		return 1; /* a thread is at work on the state: poll once more */
	/* not a DRAIN: it waits for the drain (minutes), not for MPI */
	int busy = o->queue || o->sends || o->xfers || ds__repl_busy(o->repl);
	for (struct ds__oreq *q = o->wait; q && !busy; q = q->next)
		busy = q->m.op != DS_OUT_DRAIN;
	for (struct ds__oack *a = o->acks; a && !busy; a = a->next)
		busy = !a->drain;
	pthread_mutex_unlock(&o->mu);
	return busy;
}

int ds_out_stop(struct ds_out *o)
{
	if (!o)
		return 0;
	__atomic_store_n(&o->quit, 1, __ATOMIC_RELAXED);
	if (o->athread_on)
		pthread_join(o->athread, NULL);
	char conf[PATH_MAX];
	pfmt(conf, sizeof(conf), "%s/" DS_OUT_CONF, o->h.nodedir);
	unlink(o->sock);
	if (o->lfd >= 0)
		close(o->lfd);
	pthread_mutex_lock(&o->mu);
	/* connection threads waiting for main: tell them the service is gone */
	for (struct ds__oreq *q = o->queue; q; q = q->next) {
		q->status = q->m.op == DS_OUT_DRAIN ? -ESHUTDOWN : -EIO;
		q->done = 1;
		pthread_cond_broadcast(&q->cv);
	}
	for (struct ds__oreq *q = o->wait; q; q = q->next) {
		/* a `dstage drain --wait`: not a drain that failed (it waits for
		 * the process to end, then recovers what is left) */
		q->status = q->m.op == DS_OUT_DRAIN ? -ESHUTDOWN : -EIO;
		q->done = 1;
		pthread_cond_broadcast(&q->cv);
	}
	o->queue = o->wait = NULL;
	o->qtail = &o->queue;
	for (struct ds__orec *r = o->recs; r; r = r->next)
		if (r->fetching)
			r->fetching = 0, r->fetch_err = -EIO;
	pthread_cond_broadcast(&o->fetched);
	while (o->nthreads)
		pthread_cond_wait(&o->threads_cv, &o->mu);
	int lost = 0;
	for (struct ds__opend *p = o->pend; p; p = p->next) {
		ds_error(
			"node %u: '%s/%s': still open for writing when the service stopped: not kept",
			o->h.node, o->oo.outputs, p->path);
		lost++;
	}
	pthread_mutex_unlock(&o->mu);
	lost += ds__drain_end(o->dr);
	if (o->sthread_on) {
		pthread_mutex_lock(&o->mu);
		/* atomic: the sum thread looks at it between chunks, unlocked */
		__atomic_store_n(&o->squit, 1, __ATOMIC_RELAXED);
		pthread_cond_signal(&o->sum_cv);
		pthread_mutex_unlock(&o->mu);
		pthread_join(o->sthread, NULL);
		o->sthread_on = 0;
	}
	pthread_mutex_lock(&o->mu);
	ds__repl_stop(o->repl); /* every holder reaches its own final status */
	pthread_mutex_unlock(&o->mu);
	if (o->dr) /* never over what a refused start found there */
		ds__out_status_write(o);
	return lost;
}

void ds_out_free(struct ds_out *o)
{
	if (!o)
		return;
	MPI_Comm_free(&o->oc);
	MPI_Comm_free(&o->dc);
	ds__repl_free(o->repl); /* collective */
	o->repl = NULL;
	pthread_mutex_lock(&o->mu);
	int watching = o->nwatch;
	pthread_mutex_unlock(&o->mu);
	if (watching)
		return; /* a watcher blocked on a writer's lock still has o: the process ends soon */
	ds__drain_free(o->dr);
	while (o->sums) {
		struct ds__osum *q = o->sums;
		o->sums = q->next;
		free(q);
	}
	while (o->fdefer) {
		struct ds__odefer *f = o->fdefer;
		o->fdefer = f->next;
		free(f);
	}
	while (o->pend) {
		struct ds__opend *p = o->pend;
		o->pend = p->next;
		close(p->fd);
		free(p->path);
		free(p);
	}
	while (o->recs) {
		struct ds__orec *r = o->recs;
		o->recs = r->next;
		free(r->path);
		free(r->dpath);
		free(r);
	}
	while (o->fails) {
		struct ds__ofail *f = o->fails;
		o->fails = f->next;
		free(f);
	}
	while (o->writing) {
		struct ds__owriting *w = o->writing;
		o->writing = w->next;
		free(w->path);
		free(w);
	}
	if (o->areafd >= 0)
		close(o->areafd);
	if (o->nsfd >= 0)
		close(o->nsfd);
	if (o->wfd >= 0)
		close(o->wfd);
	free(o);
}

/* ---- NODEDIR/outputs.status ------------------------------------------------ */
/* The snapshot (mu held): numbered, so that an older one never replaces a
 * newer one on disk (status_put). */
static uint64_t status_build(struct ds_out *o, struct ds_buf *b)
{
	char line[PATH_MAX + 64];
	unsigned writing = 0;
	for (struct ds__opend *p = o->pend; p; p = p->next)
		writing++;
	int n = pfmt(line, sizeof(line), "area=%s\nwriting=%u\ninstance=%u\n", o->area, writing,
	             o->inst);
	ds_buf_add(b, line, (size_t)n);
	ds__drain_status(o->dr, b);
	ds__repl_status(o->repl, o->recs, b); /* the replicas this node holds */
	return ++o->status_gen;
}

/* One writer at a time (status_mu, taken after mu when mu is held), so that
 * a snapshot older than the one on disk is dropped, never written over a
 * newer one (each write has a temporary of its own: ds_write_file_atomic). */
static void status_put(struct ds_out *o, struct ds_buf *b, uint64_t gen)
{
	pthread_mutex_lock(&o->status_mu);
	if (gen > o->status_put) {
		char p[PATH_MAX];
		pfmt(p, sizeof(p), "%s/" DS_OUT_STATUS, o->h.nodedir);
		int rc = ds_write_file_atomic(p, b->data ? b->data : "", b->len, 0600);
		if (rc) /* the crash record is behind: said, every time */
			ds_error(
				"node %u: '%s' not updated (a recovery after a crash reads it): %s",
				o->h.node, p, ds_strerror(rc));
		else
			o->status_put = gen;
	}
	pthread_mutex_unlock(&o->status_mu);
	ds_buf_release(b);
}

void ds__out_status_write_held(struct ds_out *o)
{
	if (!o->dr)
		return;
	struct ds_buf b = {0};
	uint64_t gen = status_build(o, &b);
	status_put(o, &b, gen);
}

void ds__out_status_write(struct ds_out *o)
{
	if (!o->dr)
		return;
	struct ds_buf b = {0};
	pthread_mutex_lock(&o->mu);
	uint64_t gen = status_build(o, &b);
	pthread_mutex_unlock(&o->mu);
	status_put(o, &b, gen);
}

pthread_mutex_t *ds__out_mutex(struct ds_out *o) { return &o->mu; }
int ds__out_nsfd(struct ds_out *o) { return o->nsfd; }
uint32_t ds__out_node(struct ds_out *o) { return o->h.node; }
const struct ds_out_host *ds__out_host(struct ds_out *o) { return &o->h; }
const struct ds_out_opts *ds__out_opts(struct ds_out *o) { return &o->oo; }
struct ds__orepl *ds__out_repl(struct ds_out *o) { return o->repl; }
struct ds__orec *ds__out_find_seq(struct ds_out *o, uint64_t seq)
{
	for (struct ds__orec *r = o->recs; r; r = r->next)
		if (!r->gone && r->seq == seq)
			return r;
	return NULL;
}
int ds__out_wfd(struct ds_out *o) { return o->wfd; }

/* ---- options -------------------------------------------------------------- */
int ds_out_opt(struct ds_out_opts *o, int c, const char *arg, int *bad)
{
	uint64_t v;
	double d;
	switch (c) {
	case 'O': o->outputs = arg; return c;
	case 'W': o->outputs_to = arg; return c;
	case 'D': o->drain_to = arg; return c;
	case 'Y':
		if (ds_parse_size(arg, &v)) {
			ds_error("--drain-rate '%s': not a size (bytes per second, 0: no bound)",
			         arg);
			*bad = 1;
		}
		o->drain_rate = v;
		return c;
	case 'X':
		if (ds_parse_double(arg, &d) || !(d >= 0)) {
			ds_error("--drain-timeout '%s': not a number of seconds", arg);
			*bad = 1;
		}
		o->drain_timeout = d;
		return c;
	case 'K': /* outrepl.c */
		if (ds_parse_u64(arg, &v) || v < 1 || v > DS_OUT_MAX_REPL) {
			ds_error("--outputs-replicas '%s': not a number of holders from 1 to %d",
			         arg, DS_OUT_MAX_REPL);
			*bad = 1;
		}
		o->outputs_replicas = (unsigned)v;
		return c;
	}
	return 0;
}

int ds_out_check_opts(const struct ds_out_opts *o)
{
	const char *why;
	if (!o->outputs) {
		if (o->drain_to || o->outputs_to || o->outputs_replicas) {
			ds_error(
				"--drain-to, --outputs-to and --outputs-replicas need --outputs SUBDIR");
			return 2;
		}
		return 0;
	}
	size_t l = strlen(o->outputs);
	if (!l || strchr(o->outputs, '/') || ds_name_check(o->outputs, l, &why) ||
	    ds_name_reserved(o->outputs, l, &why)) {
		ds_error("--outputs '%s': not one plain name under the mount (e.g. 'out')",
		         o->outputs);
		return 2;
	}
	if (!o->drain_to) {
		ds_error(
			"--outputs '%s' needs --drain-to DIR (a directory on the shared file system)",
			o->outputs);
		return 2;
	}
	return 0;
}
