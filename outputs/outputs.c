/* SPDX-License-Identifier: BSD-3-Clause */
/* outputs.c: write-once outputs, the service side (dsout.h, docs/outputs.md).
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
 * queue; main (ds__out_poll, from the service loop) does every MPI call;
 * the drain thread (drain.c) copies the held files to --drain-to.  One
 * mutex guards the state below. */
#include "dsindex.h" /* ds_store_jobdir */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdarg.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
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

enum { T_REQ = 1, T_APPLY, T_ACK, T_DONE, T_FETCH, T_FHDR };
enum { OP_PUBLISH = 100, OP_ABORT, OP_FETCH };
#define OM_SUM_LATER 1 /* OP_PUBLISH: the holder sums the bytes after the close */
#define CHUNK (16u << 20)
#define SWEEP_MS 5
#define OUT_MIN_FREE (1u << 20) /* a create needs this much free in the area */

struct omsg {
	uint32_t op;
	int32_t status;
	uint32_t origin, holder;
	uint64_t rid; /* the origin's request number */
	uint64_t seq; /* node 0's change number */
	uint64_t token, size;
	int64_t mtime_ns;
	uint32_t crc, mode;
	int32_t flags, xfer;
	char path[PATH_MAX];
	char path2[PATH_MAX];
	uint32_t nrepl, repl[DS_OUT_MAX_REPL]; /* OP_PUBLISH: the replica nodes (outrepl.c) */
};

/* a request waiting for main (from a connection thread) */
struct oreq {
	struct oreq *next;
	struct omsg m;
	int done, status;
	pthread_cond_t cv;
};

/* a file being written on this node */
struct opend {
	struct opend *next;
	uint64_t token;
	char *path;
	int fd;         /* the service's own descriptor on w/<token> */
	int committing; /* a thread publishes it */
	int armed;      /* the writer has its lock (WATCH or CLOSE came) */
	int watched;    /* a watcher thread waits for its locks */
	double t0;
	uint32_t mode;
};

/* a publish that failed, until the writer's CLOSE asks: the watcher or
 * the sweep often publishes before the CLOSE arrives, and the close must
 * still say that its file was not kept (a replica that failed: outrepl.c) */
struct ofail {
	struct ofail *next;
	uint64_t token;
	int rc;
};

/* node 0: a path taken by a writer */
struct owriting {
	struct owriting *next;
	char *path;
	uint32_t node;
	uint64_t token;
};

/* node 0: a change waiting for acknowledgements */
struct oack {
	struct oack *next;
	uint64_t seq, rid;
	uint32_t origin;
	int left, status;
	int drain; /* a DRAIN: waits for the drains, not for MPI */
};

/* a node's acknowledgement of DRAIN, held until its drain has caught up */
struct odw {
	struct odw *next;
	uint64_t seq, upto;
};

/* a transfer of a file's bytes in progress */
struct oxfer {
	struct oxfer *next;
	int xfer, peer, in; /* in: we receive */
	char *path;
	uint64_t size, seq;
	uint32_t crc, mode;
	int64_t mtime_ns;
	void *map;
	int fd;
	MPI_Request *reqs;
	int nreq;
	char tmp[PATH_MAX];
};

struct osend {
	struct osend *next;
	struct omsg m;
	MPI_Request req;
};

/* the holder: a file to sum after its close */
struct osum {
	struct osum *next;
	struct ds__orec *r;
};

/* the holder: a FETCH waiting for its file's sum */
struct odefer {
	struct odefer *next;
	struct omsg m;
	int peer;
};

struct ds_out {
	struct ds_out_host h;  /* the service's (dsoutputs.h) */
	struct ds_out_opts oo;
	MPI_Comm oc, dc;
	int rank; /* in oc: rank 0 orders the namespace.  Messages name nodes
	           * (origin, holder); after a failover rank != node, so a
	           * node is sent to at ds__rank_of() */
	pthread_mutex_t mu;
	pthread_mutex_t status_mu;       /* NODEDIR/outputs.status: one writer (after mu) */
	uint64_t status_gen, status_put; /* snapshots taken, and the newest written */
	int areafd, nsfd, wfd;           /* AREA, AREA/ns, AREA/w: every name in the area is
	                            * used from these (nspath), never by path */
	char area[PATH_MAX], sock[PATH_MAX];
	int lfd;
	pthread_t athread;
	int athread_on, quit;
	struct oreq *queue, **qtail;  /* to main */
	struct oreq *wait;            /* sent, waiting for DONE (by m.rid) */
	uint64_t rid, token_ctr, seq;
	uint32_t inst; /* this service of the job on this node: 1, 2, ... (in its
	                * tokens: a writer's token from an earlier one is refused) */
	int xfer_ctr;
	struct opend *pend;
	struct owriting *writing;     /* node 0 */
	struct oack *acks;            /* node 0 */
	struct odw *dwaits;
	struct oxfer *xfers;
	struct osend *sends;
	struct ds__orec *recs;
	pthread_cond_t fetched;       /* a fetch ended */
	struct ds__drain *dr;
	size_t rel_max;                 /* the longest relative name of an output (name_fits) */
	struct osum *sums, **sums_tail; /* to the sum thread, oldest first */
	struct odefer *fdefer;
	pthread_t sthread;
	int sthread_on, squit;
	pthread_cond_t sum_cv, summed;
	int nthreads, nwatch;
	pthread_cond_t threads_cv;
	struct ds__orepl *repl; /* --outputs-replicas: outrepl.c */
	struct ofail *fails;
};

/* ---- small helpers ------------------------------------------------------ */
/* rel's name relative to AREA/ns, for the *at() calls on o->nsfd: every
 * name in the area is used from the descriptors the service opened and
 * checked at its start, never by a path through --outputs-to DIR (another
 * user can rename things there: docs/outputs.md "Privacy") */
static int nspath(struct ds_out *o, const char *rel, char *buf)
{
	(void)o;
	int n = pfmt(buf, PATH_MAX, "%s", *rel ? rel : ".");
	return n < PATH_MAX ? 0 : -ENAMETOOLONG;
}

static int rel_ok(const char *rel, int root_ok)
{
	const char *why;
	size_t l = strnlen(rel, PATH_MAX);
	if (l == PATH_MAX)
		return -ENAMETOOLONG;
	if (!l)
		return root_ok ? 0 : -EINVAL;
	if (ds_name_check(rel, l, &why))
		return -EINVAL;
	return 0;
}

static int parent_dir(struct ds_out *o, const char *rel)
{
	char p[PATH_MAX], b[PATH_MAX];
	pfmt(p, sizeof(p), "%s", rel);
	char *sl = strrchr(p, '/');
	if (!sl)
		return 0;
	*sl = 0;
	if (nspath(o, p, b))
		return -ENAMETOOLONG;
	struct stat st;
	if (fstatat(o->nsfd, b, &st, 0) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

struct ds__orec *ds__out_find(struct ds_out *o, const char *path)
{
	for (struct ds__orec *r = o->recs; r; r = r->next)
		if (!r->gone && !strcmp(r->path, path))
			return r;
	return NULL;
}

static int64_t mtime_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
}

/* ---- main: sending ----------------------------------------------------- */
static void send_msg(struct ds_out *o, int to, int tag, const struct omsg *m)
{
	struct osend *x = ds_xmalloc(sizeof(*x));
	x->m = *m;
	MPI_Isend(&x->m, (int)sizeof(x->m), MPI_BYTE, to, tag, o->oc, &x->req);
	x->next = o->sends;
	o->sends = x;
	/* the peer's main may sleep up to 50 ms between polls (progress.c):
	 * wake it, or each hop of a publish (REQ, APPLY, ACK, DONE) waits for
	 * it, 65 ms per close measured (bench/outputs.sh) */
	ds__out_poke(&o->h, to);
}

static void sends_test(struct ds_out *o)
{
	for (struct osend **pp = &o->sends; *pp;) {
		int done = 0;
		MPI_Test(&(*pp)->req, &done, MPI_STATUS_IGNORE);
		if (done) {
			struct osend *x = *pp;
			*pp = x->next;
			free(x);
		} else {
			pp = &(*pp)->next;
		}
	}
}

/* A request of this node is answered (DONE, or decided locally on node 0). */
static void finish(struct ds_out *o, uint64_t rid, int status)
{
	for (struct oreq **pp = &o->wait; *pp; pp = &(*pp)->next) {
		if ((*pp)->m.rid != rid)
			continue;
		struct oreq *q = *pp;
		*pp = q->next;
		q->status = status;
		q->done = 1;
		pthread_cond_broadcast(&q->cv);
		return;
	}
}

/* ---- applying a change (every node, in node 0's order) ------------------- */
static void rec_drop(struct ds_out *o, struct ds__orec *r, int unlinked)
{
	/* replaced or unlinked: the drain forgets or undoes it */
	r->gone = 1;
	if (r->local && r->holder == o->h.node)
		ds__drain_forget(o->dr, r, unlinked);
}

static int placeholder(struct ds_out *o, const struct omsg *m, const char *dst)
{
	char tmp[PATH_MAX];
	pfmt(tmp, sizeof(tmp), "ph.%llu", (unsigned long long)m->seq);
	int fd = openat(o->wfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	int rc = 0;
	struct timespec ts[2] = {{m->mtime_ns / 1000000000ll, m->mtime_ns % 1000000000ll},
	                         {m->mtime_ns / 1000000000ll, m->mtime_ns % 1000000000ll}};
	if (ftruncate(fd, (off_t)m->size) < 0 || fchmod(fd, m->mode & 07777) < 0 ||
	    futimens(fd, ts) < 0)
		rc = -errno;
	close(fd);
	if (!rc && renameat(o->wfd, tmp, o->nsfd, dst) < 0)
		rc = -errno;
	if (rc)
		unlinkat(o->wfd, tmp, 0);
	return rc;
}

static int apply(struct ds_out *o, const struct omsg *m)
{
	char a[PATH_MAX], b[PATH_MAX];
	int rc = 0;
	uint32_t me = o->h.node;
	if (nspath(o, m->path, a) || nspath(o, m->path2, b))
		return -ENAMETOOLONG;
	switch (m->op) {
	case OP_PUBLISH: {
		struct ds__orec *old = ds__out_find(o, m->path);
		int replica = 0; /* outrepl.c: this node holds a checked copy */
		for (uint32_t i = 0; i < m->nrepl && i < DS_OUT_MAX_REPL; i++)
			replica |= m->repl[i] == me;
		if (m->holder == me) {
			char wp[PATH_MAX];
			pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)m->token);
			if (fchmodat(o->wfd, wp, m->mode & 07777, 0) < 0 ||
			    renameat(o->wfd, wp, o->nsfd, a) < 0)
				rc = -errno;
		} else if (replica) {
			rc = ds__repl_take(o->repl, m->token, a, m->mode, m->mtime_ns);
		} else {
			rc = placeholder(o, m, a);
		}
		if (rc) {
			ds_error("node %u: '%s': cannot publish: %s", me, m->path, ds_strerror(rc));
			break;
		}
		if (old)
			rec_drop(o, old, 0);
		struct ds__orec *r = ds_xcalloc(1, sizeof(*r));
		r->path = ds_xstrdup(m->path);
		r->size = m->size;
		r->mtime_ns = m->mtime_ns;
		r->crc = m->crc;
		r->mode = m->mode;
		r->holder = m->holder;
		r->seq = m->seq;
		r->local = m->holder == me || replica;
		r->summed = !(m->flags & OM_SUM_LATER);
		r->nrepl = m->nrepl < DS_OUT_MAX_REPL ? m->nrepl : DS_OUT_MAX_REPL;
		memcpy(r->repl, m->repl, r->nrepl * sizeof(r->repl[0]));
		r->next = o->recs;
		o->recs = r;
		if (replica) { /* listed before the ack: recoverable here once the close returns */
			ds__repl_applied(o->repl, r);
			ds__out_status_write_held(o);
		}
		if (r->local && m->holder == me) {
			r->t_closed = ds_now();
			if (!r->summed) { /* the sum thread's, then the drain's */
				struct osum *q = ds_xcalloc(1, sizeof(*q));
				q->r = r;
				*o->sums_tail = q;
				o->sums_tail = &q->next;
				pthread_cond_signal(&o->sum_cv);
			}
			ds__drain_add(o->dr, r);
		}
		break;
	}
	case DS_OUT_RENAME: {
		struct ds__orec *r = ds__out_find(o, m->path), *old = ds__out_find(o, m->path2);
		if (renameat(o->nsfd, a, o->nsfd, b) < 0) {
			rc = -errno;
			ds_error("node %u: rename '%s' -> '%s': %s", me, m->path, m->path2, ds_strerror(rc));
			break;
		}
		if (old && old != r)
			rec_drop(o, old, 0);
		if (r) {
			if (r->holder == me)
				ds__drain_rename(o->dr, r, m->path2);
			free(r->path);
			r->path = ds_xstrdup(m->path2);
		}
		struct stat st;
		if (!r && fstatat(o->nsfd, b, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) {
			/* a directory: every output under it has a new name */
			size_t l = strlen(m->path);
			for (struct ds__orec *q = o->recs; q; q = q->next) {
				if (q->gone || strncmp(q->path, m->path, l) || q->path[l] != '/')
					continue;
				char np[PATH_MAX];
				if (pfmt(np, sizeof(np), "%s%s", m->path2, q->path + l) >=
				    (int)sizeof(np)) {
					/* node 0 refuses such a rename (name_fits): never
					 * here, and never a cut name if it were */
					ds_error(
						"node %u: '%s' under '%s': its new name is too long",
						me, q->path, m->path2);
					rc = -ENAMETOOLONG;
					continue;
				}
				if (q->holder == me)
					ds__drain_rename(o->dr, q, np);
				free(q->path);
				q->path = ds_xstrdup(np);
			}
		}
		break;
	}
	case DS_OUT_UNLINK: {
		struct ds__orec *r = ds__out_find(o, m->path);
		if (unlinkat(o->nsfd, a, 0) < 0)
			rc = -errno;
		if (r)
			rec_drop(o, r, 1);
		break;
	}
	case DS_OUT_MKDIR:
		if (mkdirat(o->nsfd, a, (m->mode & 0777) | 0700) < 0 && errno != EEXIST)
			rc = -errno;
		break;
	case DS_OUT_RMDIR:
		if (unlinkat(o->nsfd, a, AT_REMOVEDIR) < 0)
			rc = -errno;
		break;
	case DS_OUT_DRAIN:
		break; /* the acknowledgement waits for the drain (dwaits) */
	}
	return rc;
}

/* ---- node 0: deciding ------------------------------------------------------ */
/* The names every node and the drain can hold whole (dsout.h): a path that
 * fits every node's AREA/ns and the drain's temporary name in DIR, a file
 * name that leaves room for the drain's suffix.  Never cut later: refused
 * now (ENAMETOOLONG). */
static int name_fits(const struct ds_out *o, const char *rel, int file)
{
	size_t l = strlen(rel);
	if (l > o->rel_max)
		return -ENAMETOOLONG;
	const char *base = strrchr(rel, '/');
	base = base ? base + 1 : rel;
	if (file && strlen(base) > DS_OUT_FILE_NAME_MAX)
		return -ENAMETOOLONG;
	return 0;
}

/* The longest name under directory dfd (closed here), relative to it with
 * its leading '/' ("/a/b": 4); a file's name is counted with what the drain
 * adds (the limit is then rel_max alone). */
static size_t longest_under(int dfd, int depth)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return 0;
	}
	size_t best = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		size_t l = 1 + strlen(de->d_name);
		struct stat st;
		int isdir = de->d_type == DT_DIR ||
		            (de->d_type == DT_UNKNOWN &&
		             fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		             S_ISDIR(st.st_mode));
		if (isdir && depth < PATH_MAX / 2) {
			int sub = openat(dirfd(d), de->d_name,
			                 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				l += longest_under(sub, depth + 1);
		}
		if (l > best)
			best = l;
	}
	closedir(d);
	return best;
}

static struct owriting *writing_find(struct ds_out *o, const char *path)
{
	for (struct owriting *w = o->writing; w; w = w->next)
		if (!strcmp(w->path, path))
			return w;
	return NULL;
}

static int writing_under(struct ds_out *o, const char *dir)
{
	size_t l = strlen(dir);
	for (struct owriting *w = o->writing; w; w = w->next)
		if (!strncmp(w->path, dir, l) && w->path[l] == '/')
			return 1;
	return 0;
}

static int dir_empty(struct ds_out *o, const char *p)
{
	int fd = openat(o->nsfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		int e = -errno;
		if (fd >= 0)
			close(fd);
		return e;
	}
	struct dirent *de;
	int empty = 1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty;
}

/* A directory renamed (b: its new name in ns): what rename(2) refuses, and
 * a directory with a file being written under it (EBUSY: the writer's
 * publish names the file by its path).  Applied by every node as one
 * rename(2) of its directory, in node 0's order: every node shows the
 * directory under one name or the other, never half moved. */
static int decide_dir_rename(struct ds_out *o, const struct omsg *m, const char *b)
{
	size_t l = strlen(m->path);
	if (!strncmp(m->path2, m->path, l) && (m->path2[l] == '/' || !m->path2[l]))
		return m->path2[l] ? -EINVAL : 1; /* into itself; or itself */
	int rc = parent_dir(o, m->path2);
	if (rc)
		return rc;
	struct stat st;
	if (fstatat(o->nsfd, b, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (m->flags & RENAME_NOREPLACE)
			return -EEXIST;
		if (dir_empty(o, b) != 1 || writing_under(o, m->path2))
			return -ENOTEMPTY;
	}
	if (writing_under(o, m->path))
		return -EBUSY;
	return 0;
}

/* Node 0's check of a change against its view: 0 to go on, 1 done without
 * a broadcast, or -errno. */
static int decide(struct ds_out *o, struct omsg *m)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat st, st2;
	if (nspath(o, m->path, a) || nspath(o, m->path2, b))
		return -ENAMETOOLONG;
	int ea = fstatat(o->nsfd, a, &st, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
	int rc;
	switch (m->op) {
	case DS_OUT_CREATE:
		if ((rc = name_fits(o, m->path, 1)) || (rc = parent_dir(o, m->path)))
			return rc;
		if (!ea && S_ISDIR(st.st_mode))
			return -EISDIR;
		if (writing_find(o, m->path))
			return -EEXIST; /* another writer has it */
		if (!ea && (m->flags & O_EXCL) && (m->flags & O_CREAT))
			return -EEXIST;
		if (ea && !(m->flags & O_CREAT))
			return -ENOENT;
		{
			struct owriting *w = ds_xcalloc(1, sizeof(*w));
			w->path = ds_xstrdup(m->path);
			w->node = m->origin;
			w->token = m->token;
			w->next = o->writing;
			o->writing = w;
		}
		return 1;
	case OP_ABORT:
	case OP_PUBLISH:
		for (struct owriting **pp = &o->writing; *pp; pp = &(*pp)->next)
			if ((*pp)->token == m->token && (*pp)->node == m->origin) {
				struct owriting *w = *pp;
				*pp = w->next;
				free(w->path);
				free(w);
				return m->op == OP_ABORT ? 1 : parent_dir(o, m->path);
			}
		return -ESTALE;
	case DS_OUT_RENAME:
		if ((rc = name_fits(o, m->path2, !ea && !S_ISDIR(st.st_mode))))
			return rc;
		if (ea)
			return ea;
		if (S_ISDIR(st.st_mode)) {
			/* every name under it gets the new prefix: all must fit */
			int dfd =
				openat(o->nsfd, a, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (dfd >= 0 && strlen(m->path2) + longest_under(dfd, 0) > o->rel_max)
				return -ENAMETOOLONG;
			return decide_dir_rename(o, m, b);
		}
		if ((rc = parent_dir(o, m->path2)))
			return rc;
		if (fstatat(o->nsfd, b, &st2, AT_SYMLINK_NOFOLLOW) == 0) {
			if (S_ISDIR(st2.st_mode))
				return -EISDIR;
			if (m->flags & RENAME_NOREPLACE)
				return -EEXIST;
			if (st2.st_ino == st.st_ino)
				return 1; /* the same file: nothing to do */
		}
		if (writing_find(o, m->path2))
			return -EBUSY;
		return 0;
	case DS_OUT_UNLINK:
		if (ea)
			return ea;
		return S_ISDIR(st.st_mode) ? -EISDIR : 0;
	case DS_OUT_MKDIR:
		if ((rc = name_fits(o, m->path, 0)) || (rc = parent_dir(o, m->path)))
			return rc;
		return ea ? 0 : -EEXIST;
	case DS_OUT_RMDIR:
		if (ea)
			return ea;
		if (!S_ISDIR(st.st_mode))
			return -ENOTDIR;
		if (dir_empty(o, a) != 1 || writing_under(o, m->path))
			return -ENOTEMPTY;
		return 0;
	case DS_OUT_DRAIN:
		return 0;
	}
	return -EINVAL;
}

static void drain_wait_add(struct ds_out *o, uint64_t seq)
{
	struct odw *d = ds_xcalloc(1, sizeof(*d));
	d->seq = seq;
	d->upto = ds__drain_mark(o->dr);
	d->next = o->dwaits;
	o->dwaits = d;
}

static void ack_in(struct ds_out *o, uint64_t seq, int status);

/* rank 0: a request from node `origin` (or this rank's node) */
static void request(struct ds_out *o, struct omsg *m)
{
	int rc = decide(o, m);
	if ((m->flags & DS_OUT_F_PREPARE) &&
	    (m->op == DS_OUT_RENAME || m->op == DS_OUT_UNLINK || m->op == DS_OUT_MKDIR ||
	     m->op == DS_OUT_RMDIR)) {
		/* only the check: the change comes again, without the flag, if
		 * its writer is still there to hear the answer (dsout.h) */
		struct omsg d = *m;
		d.status = rc < 0 ? rc : 0;
		if (m->origin == o->h.node)
			finish(o, m->rid, d.status);
		else
			send_msg(o, ds__out_rank_of(&o->h, m->origin), T_DONE, &d);
		return;
	}
	if (rc) {
		struct omsg d = *m;
		d.status = rc == 1 ? 0 : rc;
		if (m->origin == o->h.node) /* this rank's own */
			finish(o, m->rid, d.status);
		else
			send_msg(o, ds__out_rank_of(&o->h, m->origin), T_DONE, &d);
		return;
	}
	m->seq = ++o->seq;
	struct oack *a = ds_xcalloc(1, sizeof(*a));
	a->seq = m->seq;
	a->rid = m->rid;
	a->origin = m->origin;
	a->drain = m->op == DS_OUT_DRAIN;
	a->left = (int)o->h.nnodes;
	a->next = o->acks;
	o->acks = a;
	for (uint32_t k = 1; k < o->h.nnodes; k++)
		send_msg(o, (int)k, T_APPLY, m);
	int st = apply(o, m);
	if (m->op == DS_OUT_DRAIN)
		drain_wait_add(o, m->seq);
	else
		ack_in(o, m->seq, st);
}

static void ack_in(struct ds_out *o, uint64_t seq, int status)
{
	for (struct oack **pp = &o->acks; *pp; pp = &(*pp)->next) {
		struct oack *a = *pp;
		if (a->seq != seq)
			continue;
		if (status && !a->status)
			a->status = status;
		if (--a->left > 0)
			return;
		*pp = a->next;
		if (a->origin == o->h.node) { /* this rank's own */
			finish(o, a->rid, a->status);
		} else {
			struct omsg d;
			memset(&d, 0, sizeof(d));
			d.rid = a->rid;
			d.status = a->status;
			send_msg(o, ds__out_rank_of(&o->h, a->origin), T_DONE, &d);
		}
		free(a);
		return;
	}
}

static void ack_out(struct ds_out *o, uint64_t seq, int status)
{
	if (o->rank == 0) {
		ack_in(o, seq, status);
		return;
	}
	struct omsg d;
	memset(&d, 0, sizeof(d));
	d.seq = seq;
	d.status = status;
	send_msg(o, 0, T_ACK, &d);
}

/* ---- transfers of bytes ------------------------------------------------- */
static int nchunks(uint64_t size) { return (int)((size + CHUNK - 1) / CHUNK); }

static void xfer_free(struct oxfer *x)
{
	if (x->map && x->map != MAP_FAILED)
		munmap(x->map, x->size);
	if (x->fd >= 0)
		close(x->fd);
	free(x->reqs);
	free(x->path);
	free(x);
}

/* the holder: send path's bytes to node peer under transfer id xfer */
static void fetch_serve(struct ds_out *o, const struct omsg *m, int peer)
{
	struct omsg h;
	memset(&h, 0, sizeof(h));
	h.xfer = m->xfer;
	pfmt(h.path, sizeof(h.path), "%s", m->path);
	struct ds__orec *r = ds__out_find(o, m->path);
	if (r && r->local && r->holder == o->h.node && !r->summed) {
		/* closed a moment ago, not summed yet: answered when it is
		 * (ds__out_poll), so that the copy is checked against it */
		struct odefer *f = ds_xcalloc(1, sizeof(*f));
		f->m = *m;
		f->peer = peer;
		f->next = o->fdefer;
		o->fdefer = f;
		return;
	}
	char p[PATH_MAX];
	struct oxfer *x = ds_xcalloc(1, sizeof(*x));
	x->fd = -1;
	if (!r || !r->local || r->holder != o->h.node || nspath(o, m->path, p)) {
		h.status = -ENOENT;
	} else if (r->sum_err) {
		h.status = r->sum_err;
	} else {
		x->fd = openat(o->nsfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		struct stat st;
		if (x->fd < 0 || fstat(x->fd, &st) < 0 || (uint64_t)st.st_size != r->size)
			h.status = -EIO;
		else if (r->size && (x->map = mmap(NULL, r->size, PROT_READ, MAP_SHARED, x->fd, 0)) == MAP_FAILED)
			h.status = -errno;
		h.size = r->size;
		h.crc = r->crc;
		h.seq = r->seq;
		h.mode = r->mode;
		h.mtime_ns = r->mtime_ns;
	}
	send_msg(o, peer, T_FHDR, &h);
	if (h.status || !h.size) {
		if (x->map == MAP_FAILED)
			x->map = NULL;
		xfer_free(x);
		return;
	}
	x->size = h.size;
	x->nreq = nchunks(h.size);
	x->reqs = ds_xcalloc((size_t)x->nreq, sizeof(MPI_Request));
	for (int i = 0; i < x->nreq; i++) {
		uint64_t off = (uint64_t)i * CHUNK, len = h.size - off < CHUNK ? h.size - off : CHUNK;
		MPI_Isend((char *)x->map + off, (int)len, MPI_BYTE, peer, m->xfer, o->dc, &x->reqs[i]);
	}
	x->xfer = m->xfer;
	x->peer = peer;
	x->next = o->xfers;
	o->xfers = x;
	DS__OUT_COUNT(&o->h, served_bytes, h.size);
}

static void fetch_end(struct ds_out *o, struct ds__orec *r, int rc)
{
	if (r) {
		r->fetching = 0;
		r->fetch_err = rc;
	}
	pthread_cond_broadcast(&o->fetched);
}

/* the fetcher: the holder's header arrived */
static void fetch_header(struct ds_out *o, const struct omsg *h, int peer)
{
	struct ds__orec *r = ds__out_find(o, h->path);
	if (h->status) {
		fetch_end(o, r, h->status);
		return;
	}
	struct oxfer *x = ds_xcalloc(1, sizeof(*x));
	x->in = 1;
	x->xfer = h->xfer;
	x->peer = peer;
	x->path = ds_xstrdup(h->path);
	x->size = h->size;
	x->crc = h->crc;
	x->seq = h->seq;
	x->mode = h->mode;
	x->mtime_ns = h->mtime_ns;
	pfmt(x->tmp, sizeof(x->tmp), "f.%d", h->xfer);
	x->fd = openat(o->wfd, x->tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	int rc = x->fd < 0 ? -errno : 0;
	if (!rc && h->size && (rc = -posix_fallocate(x->fd, 0, (off_t)h->size)) == 0 &&
	    (x->map = mmap(NULL, h->size, PROT_READ | PROT_WRITE, MAP_SHARED, x->fd, 0)) == MAP_FAILED) {
		x->map = NULL;
		rc = -errno;
	}
	x->nreq = h->size ? nchunks(h->size) : 0;
	x->reqs = ds_xcalloc((size_t)x->nreq + 1, sizeof(MPI_Request));
	if (rc) {
		ds_error("node %u: '%s': cannot fetch from node %d: %s", o->h.node, h->path, peer,
		         ds_strerror(rc));
		/* the holder sends anyway: take its bytes and drop them */
		void *junk = ds_xmalloc(CHUNK);
		for (int i = 0; i < x->nreq; i++) {
			uint64_t off = (uint64_t)i * CHUNK, len = h->size - off < CHUNK ? h->size - off : CHUNK;
			MPI_Recv(junk, (int)len, MPI_BYTE, peer, h->xfer, o->dc, MPI_STATUS_IGNORE);
		}
		free(junk);
		unlinkat(o->wfd, x->tmp, 0);
		xfer_free(x);
		fetch_end(o, r, rc);
		return;
	}
	for (int i = 0; i < x->nreq; i++) {
		uint64_t off = (uint64_t)i * CHUNK, len = h->size - off < CHUNK ? h->size - off : CHUNK;
		MPI_Irecv((char *)x->map + off, (int)len, MPI_BYTE, peer, h->xfer, o->dc, &x->reqs[i]);
	}
	x->next = o->xfers;
	o->xfers = x;
}

static void fetch_complete(struct ds_out *o, struct oxfer *x)
{
	struct ds__orec *r = ds__out_find(o, x->path);
	int rc = 0;
	uint32_t crc = x->size ? ds_crc32c(0, x->map, x->size) : 0;
	if (crc != x->crc)
		rc = -DS_ECHECKSUM;
	struct timespec ts[2] = {{x->mtime_ns / 1000000000ll, x->mtime_ns % 1000000000ll},
	                         {x->mtime_ns / 1000000000ll, x->mtime_ns % 1000000000ll}};
	char p[PATH_MAX];
	if (!rc && (fchmod(x->fd, x->mode & 07777) < 0 || futimens(x->fd, ts) < 0))
		rc = -errno;
	if (!rc && (!r || r->seq != x->seq))
		rc = -ESTALE; /* replaced or removed meanwhile */
	if (!rc && (nspath(o, x->path, p) || renameat(o->wfd, x->tmp, o->nsfd, p) < 0))
		rc = -EIO;
	if (rc) {
		unlinkat(o->wfd, x->tmp, 0);
		if (rc != -ESTALE)
			ds_error("node %u: '%s' from node %d: %s", o->h.node, x->path, x->peer, ds_strerror(rc));
	} else {
		r->local = 1;
		r->crc = x->crc;
		r->summed = 1;
		DS__OUT_COUNT(&o->h, fetched_bytes, x->size);
	}
	fetch_end(o, r, rc == -ESTALE ? -EAGAIN : rc);
}

static void xfers_test(struct ds_out *o)
{
	for (struct oxfer **pp = &o->xfers; *pp;) {
		struct oxfer *x = *pp;
		int done = 1;
		for (int i = 0; i < x->nreq && done; i++) {
			int d1 = 0;
			MPI_Test(&x->reqs[i], &d1, MPI_STATUS_IGNORE);
			done = d1;
		}
		if (!done) {
			pp = &x->next;
			continue;
		}
		*pp = x->next;
		if (x->in)
			fetch_complete(o, x);
		xfer_free(x);
	}
}

/* ---- main --------------------------------------------------------------- */
static void from_queue(struct ds_out *o)
{
	for (;;) {
		struct oreq *q = o->queue;
		if (!q)
			return;
		o->queue = q->next;
		if (!o->queue)
			o->qtail = &o->queue;
		q->m.rid = ++o->rid;
		q->m.origin = o->h.node;
		if (q->m.op == OP_FETCH) { /* a fetch: answered by fetch_end */
			struct ds__orec *r = ds__out_find(o, q->m.path);
			q->done = 1;
			pthread_cond_broadcast(&q->cv);
			if (!r || r->local) {
				fetch_end(o, r, 0);
				continue;
			}
			int holder = ds__out_rank_of(&o->h, r->holder);
			if (holder < 0) { /* its node is lost, and its outputs with it */
				ds_error("node %u: '%s': its only copy was on node %u, which is lost",
				         o->h.node, r->path, r->holder);
				fetch_end(o, r, -EIO);
				continue;
			}
			q->m.xfer = 1 + (o->xfer_ctr++ % 30000);
			send_msg(o, holder, T_FETCH, &q->m);
			continue;
		}
		q->next = o->wait;
		o->wait = q;
		if (o->rank == 0)
			request(o, &q->m);
		else
			send_msg(o, 0, T_REQ, &q->m);
	}
}

void ds_out_poll(struct ds_out *o)
{
	if (!o)
		return;
	pthread_mutex_lock(&o->mu);
	from_queue(o);
	for (;;) {
		int flag = 0;
		MPI_Status stt;
		MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, o->oc, &flag, &stt);
		if (!flag)
			break;
		struct omsg *m = ds_xmalloc(sizeof(*m));
		MPI_Recv(m, (int)sizeof(*m), MPI_BYTE, stt.MPI_SOURCE, stt.MPI_TAG, o->oc, MPI_STATUS_IGNORE);
		switch (stt.MPI_TAG) {
		case T_REQ: request(o, m); break;
		case T_APPLY: {
			int st = apply(o, m);
			if (m->op == DS_OUT_DRAIN)
				drain_wait_add(o, m->seq);
			else
				ack_out(o, m->seq, st);
			break;
		}
		case T_ACK: ack_in(o, m->seq, m->status); break;
		case T_DONE: finish(o, m->rid, m->status); break;
		case T_FETCH: fetch_serve(o, m, stt.MPI_SOURCE); break;
		case T_FHDR: fetch_header(o, m, stt.MPI_SOURCE); break;
		}
		free(m);
	}
	/* drain waits whose drain has caught up */
	for (struct odw **pp = &o->dwaits; *pp;) {
		struct odw *d = *pp;
		int st;
		if (!ds__drain_reached(o->dr, d->upto, &st)) {
			pp = &d->next;
			continue;
		}
		*pp = d->next;
		ack_out(o, d->seq, st);
		free(d);
	}
	/* fetches whose file is summed now (or gone) */
	for (struct odefer **pp = &o->fdefer; *pp;) {
		struct odefer *f = *pp;
		struct ds__orec *r = ds__out_find(o, f->m.path);
		if (r && !r->summed) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		fetch_serve(o, &f->m, f->peer);
		free(f);
	}
	xfers_test(o);
	sends_test(o);
	ds__repl_poll(o->repl); /* outrepl.c */
	pthread_mutex_unlock(&o->mu);
}

/* ---- connection threads -------------------------------------------------- */
/* Hand m to main and wait for its answer (mu held). */
static int via_main(struct ds_out *o, struct omsg *m)
{
	struct oreq q;
	memset(&q, 0, sizeof(q));
	q.m = *m;
	pthread_cond_init(&q.cv, NULL);
	*o->qtail = &q;
	o->qtail = &q.next;
	ds__out_wake(o);
	while (!q.done)
		pthread_cond_wait(&q.cv, &o->mu);
	pthread_cond_destroy(&q.cv);
	return q.status;
}

/* No open file of the writer's holds a byte of the lock range (each of its
 * opens locks one, dsout.h). */
static int lock_free(int fd)
{
	struct flock lk = {.l_type = F_WRLCK,
	                   .l_whence = SEEK_SET,
	                   .l_start = DS_OUT_LOCK_OFF,
	                   .l_len = DS_OUT_LOCK_SLOTS};
	if (fcntl(fd, F_OFD_GETLK, &lk) < 0)
		return 0;
	return lk.l_type == F_UNLCK;
}

/* Publish pending output p (its writers are gone); mu held, dropped while
 * the bytes are summed. */
static int commit(struct ds_out *o, struct opend *p)
{
	p->committing = 1;
	double t0 = ds_now();
	pthread_mutex_unlock(&o->mu);
	/* The CRC-32C is not taken here: summing 1 GiB costs the writer 0.2 s
	 * more in close.  The file cannot change after its close (no
	 * descriptor is left; a rewrite makes a new file), so the holder's
	 * sum thread takes it just after, and everything that needs it waits
	 * for it: a fetch by another node, the drain (sum_main). */
	struct stat st;
	int rc = fstat(p->fd, &st) < 0 ? -errno : 0;
	uint32_t crc = 0, repl[DS_OUT_MAX_REPL] = {0}, nrepl = 0;
	pthread_mutex_lock(&o->mu);
	/* --outputs-replicas: N-1 other nodes hold a checked copy before the
	 * publish (outrepl.c); the sum is then taken here */
	if (!rc)
		rc = ds__repl_push(o->repl, p->fd, (uint64_t)st.st_size, p->token, p->path, &crc,
		                   repl, &nrepl);
	double t1 = ds_now();
	struct omsg m;
	memset(&m, 0, sizeof(m));
	m.op = rc ? OP_ABORT : OP_PUBLISH;
	m.token = p->token;
	m.holder = o->h.node;
	m.size = (uint64_t)st.st_size;
	m.mtime_ns = mtime_of(&st);
	m.crc = crc;
	m.flags = nrepl ? 0 : OM_SUM_LATER;
	m.nrepl = nrepl;
	memcpy(m.repl, repl, sizeof(repl));
	m.mode = p->mode;
	pfmt(m.path, sizeof(m.path), "%s", p->path);
	int prc = via_main(o, &m);
	if (!rc && prc && nrepl)
		ds__repl_abandon(o->repl, p->token, repl, nrepl);
	if (!rc)
		rc = prc;
	if (!rc)
		ds_debug(
			"node %u: '%s' (%llu bytes) published in %.4f s (sum %.4f s, namespace %.4f s)",
			o->h.node, p->path, (unsigned long long)m.size, ds_now() - t0, t1 - t0,
			ds_now() - t1);
	if (rc) {
		char wp[PATH_MAX];
		pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)p->token);
		unlinkat(o->wfd, wp, 0);
		ds_error("node %u: '%s': closed but not kept: %s", o->h.node, p->path, ds_strerror(rc));
		struct ofail *f = ds_xmalloc(sizeof(*f));
		f->token = p->token;
		f->rc = rc;
		f->next = o->fails;
		o->fails = f;
	}
	for (struct opend **pp = &o->pend; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	close(p->fd);
	free(p->path);
	free(p);
	pthread_cond_broadcast(&o->fetched);
	return rc;
}

/* the outcome of token's publish for its CLOSE: 0, or why it was not kept */
static int fail_take(struct ds_out *o, uint64_t token)
{
	for (struct ofail **pp = &o->fails; *pp; pp = &(*pp)->next)
		if ((*pp)->token == token) {
			struct ofail *f = *pp;
			int rc = f->rc;
			*pp = f->next;
			free(f);
			return rc;
		}
	return 0;
}

static struct opend *pend_find(struct ds_out *o, uint64_t token)
{
	for (struct opend *p = o->pend; p; p = p->next)
		if (p->token == token)
			return p;
	return NULL;
}

/* Publish every pending output whose writers are gone (mu held). */
static void sweep(struct ds_out *o)
{
	for (int again = 1; again;) {
		again = 0;
		for (struct opend *p = o->pend; p; p = p->next)
			/* not before the writer has confirmed its create (it
			 * has its lock then); one that never does is rolled
			 * back by confirm_wait, never published */
			if (!p->committing && p->armed && lock_free(p->fd)) {
				commit(o, p);
				again = 1; /* the list changed */
				break;
			}
	}
}

/* A writer's lock is in place: wait (blocking, in a thread of its own) until
 * every descriptor on it is gone, at close or at exit, then publish. */
struct watch_arg {
	struct ds_out *o;
	uint64_t token;
	int fd;
};

static void *watch_main(void *arg)
{
	struct watch_arg *w = arg;
	struct ds_out *o = w->o;
	struct opend *p;
	for (;;) {
		struct flock lk = {.l_type = F_WRLCK,
		                   .l_whence = SEEK_SET,
		                   .l_start = DS_OUT_LOCK_OFF,
		                   .l_len = DS_OUT_LOCK_SLOTS};
		if (fcntl(w->fd, F_OFD_SETLKW, &lk) < 0 && errno != EINTR)
			usleep(1000); /* (not expected) the check below decides */
		lk.l_type = F_UNLCK;
		fcntl(w->fd, F_OFD_SETLK, &lk);
		pthread_mutex_lock(&o->mu);
		p = o->quit ? NULL : pend_find(o, w->token);
		/* The writer may have opened its file again since (a byte of its
		 * own, then WATCH, under mu: the check and the commit below are
		 * one step for it): wait for that one too.  Publishing now would
		 * let it change the bytes behind every node's back. */
		if (!p || p->committing || lock_free(p->fd))
			break;
		pthread_mutex_unlock(&o->mu);
	}
	close(w->fd);
	int did = p && !p->committing;
	if (did)
		commit(o, p);
	o->nwatch--;
	pthread_mutex_unlock(&o->mu);
	if (did)
		ds__out_status_write(o);
	free(w);
	return NULL;
}

static int watch(struct ds_out *o, uint64_t token)
{
	struct opend *p = pend_find(o, token);
	/* published (or given up) while the writer took its lock: the open
	 * that took it must not write to what every node now shows */
	if (!p || p->committing)
		return -ESTALE;
	p->armed = 1;
	if (p->watched)
		return 0; /* one more open file of the writer's: the same watcher */
	char wp[PATH_MAX];
	pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)token);
	struct watch_arg *w = ds_xmalloc(sizeof(*w));
	w->o = o;
	w->token = token;
	w->fd = openat(o->wfd, wp, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (w->fd < 0) {
		free(w);
		return -errno;
	}
	pthread_t t;
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 64 << 10);
	int rc = pthread_create(&t, &at, watch_main, w);
	pthread_attr_destroy(&at);
	if (rc) {
		close(w->fd);
		free(w);
		return 0; /* the sweep publishes it */
	}
	o->nwatch++;
	p->watched = 1;
	return 0;
}

/* Drop pending output p, publish nothing: its path is given back (node 0)
 * and its file removed; what the path held before stays (mu held). */
static void rollback(struct ds_out *o, struct opend *p)
{
	p->committing = 1;
	if (!__atomic_load_n(&o->quit, __ATOMIC_RELAXED)) { /* stopping: main polls no more */
		struct omsg m;
		memset(&m, 0, sizeof(m));
		m.op = OP_ABORT;
		m.token = p->token;
		pfmt(m.path, sizeof(m.path), "%s", p->path);
		via_main(o, &m);
	}
	char wp[PATH_MAX];
	pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)p->token);
	unlinkat(o->wfd, wp, 0);
	for (struct opend **pp = &o->pend; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	close(p->fd);
	free(p->path);
	free(p);
	pthread_cond_broadcast(&o->fetched);
}

/* The second message of a two-step request on its kept connection (a
 * create's confirmation, a namespace change's commit): 1 when a whole
 * request arrived, 0 when the connection closed first (the writer gave up
 * or died).  Waits as long as the writer is there; the service stopping
 * ends the wait, but a message already sent is still taken (its writer has
 * a descriptor and will close).  mu NOT held. */
static int recv_second(struct ds_out *o, int fd, struct ds_out_req *q)
{
	size_t got = 0;
	while (got < sizeof(*q)) {
		struct pollfd pf = {fd, POLLIN, 0};
		int n = poll(&pf, 1, 100);
		if (n < 0 && errno != EINTR)
			break;
		if (n <= 0 && __atomic_load_n(&o->quit, __ATOMIC_RELAXED))
			break;
		if (n <= 0)
			continue;
		ssize_t k = recv(fd, (char *)q + got, sizeof(*q) - got, 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	return got == sizeof(*q);
}

/* A create takes effect only once its writer confirms it, on the create's
 * own connection (the shim's confirm(): a WATCH with the token, sent when
 * the writer has opened its file and taken its lock, so that its open
 * returns a descriptor).  A connection that closes without it is a writer
 * that gave up (DSTAGE_TIMEOUT passed while node 0 decided: its open
 * failed with EIO) or died in its open: the create is rolled back, never
 * published (an empty file over a good checkpoint, issue 24).  Not
 * bounded in time: a writer stopped in its open holds its path as one
 * stopped in its write does.  mu NOT held. */
static void confirm_wait(struct ds_out *o, int fd, uint64_t token)
{
	struct ds_out_req *q = ds_xmalloc(sizeof(*q));
	int ok = recv_second(o, fd, q) && q->magic == DS_OUT_MAGIC && q->op == DS_OUT_WATCH &&
	         q->token == token;
	free(q);
	pthread_mutex_lock(&o->mu);
	struct opend *p = pend_find(o, token);
	if (p && ok) {
		watch(o, token); /* armed; without a watcher the sweep publishes it */
	} else if (p && !p->armed && !p->committing) {
		ds_warn("node %u: '%s/%s': its writer gave up its open before it had the file: "
		        "nothing published",
		        o->h.node, o->oo.outputs, p->path);
		rollback(o, p);
	}
	pthread_cond_broadcast(&o->fetched);
	pthread_mutex_unlock(&o->mu);
}

static int copy_fd(int from, int to)
{
	for (;;) {
		ssize_t n = copy_file_range(from, NULL, to, NULL, 1 << 30, 0);
		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
	}
}

static int do_create(struct ds_out *o, struct ds_out_req *q, struct ds_out_resp *a_out)
{
	char a[PATH_MAX], wp[PATH_MAX];
	int rc = rel_ok(q->path, 0);
	if (rc || (rc = nspath(o, q->path, a)))
		return rc;
	int keep = !(q->flags & O_TRUNC);
	/* the capacity check: a store with less than OUT_MIN_FREE left takes
	 * no new output (ENOSPC at open, not half a file later) */
	struct statvfs sv;
	if (fstatvfs(o->wfd, &sv) == 0 && (uint64_t)sv.f_bavail * sv.f_frsize < OUT_MIN_FREE)
		return -ENOSPC;
	struct ds__orec *r = ds__out_find(o, q->path);
	if (keep && r && !r->local) {
		/* the old bytes are kept: fetch them first */
		rc = ds__out_fetch_locked(o, q->path);
		if (rc)
			return rc;
	}
	struct omsg m;
	memset(&m, 0, sizeof(m));
	m.op = DS_OUT_CREATE;
	m.flags = q->flags;
	m.token = ((uint64_t)o->h.node << 48) | ((uint64_t)o->inst << 32) | (++o->token_ctr & 0xffffffffu);
	pfmt(m.path, sizeof(m.path), "%s", q->path);
	rc = via_main(o, &m);
	if (rc)
		return rc;
	pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)m.token);
	int fd = openat(o->wfd, wp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	rc = fd < 0 ? -errno : 0;
	if (!rc && keep) {
		int old = openat(o->nsfd, a, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (old >= 0) {
			pthread_mutex_unlock(&o->mu);
			rc = copy_fd(old, fd);
			pthread_mutex_lock(&o->mu);
			close(old);
		}
	}
	if (rc) {
		if (fd >= 0) {
			close(fd);
			unlinkat(o->wfd, wp, 0);
		}
		m.op = OP_ABORT;
		via_main(o, &m);
		return rc;
	}
	struct opend *p = ds_xcalloc(1, sizeof(*p));
	p->token = m.token;
	p->path = ds_xstrdup(q->path);
	p->fd = fd;
	p->mode = (q->mode & 0777) | 0400; /* no set-id bits; the drain must read it */
	p->t0 = ds_now();
	p->next = o->pend;
	o->pend = p;
	a_out->token = m.token;
	/* the writer opens AREA/w/<token> by its path: it checks that it got
	 * this very file (a directory swapped on the way cannot take a byte) */
	struct stat st;
	if (fstat(fd, &st) == 0) {
		a_out->dev = (uint64_t)st.st_dev;
		a_out->ino = (uint64_t)st.st_ino;
	}
	return 0;
}

/* Make path's bytes local (mu held).  0, or -errno. */
int ds__out_fetch_locked(struct ds_out *o, const char *path)
{
	for (int tries = 0; tries < 3; tries++) {
		struct ds__orec *r = ds__out_find(o, path);
		if (!r || r->local)
			return 0;
		if (!r->fetching) {
			r->fetching = 1;
			r->fetch_err = 0;
			struct omsg m;
			memset(&m, 0, sizeof(m));
			m.op = OP_FETCH;
			pfmt(m.path, sizeof(m.path), "%s", path);
			via_main(o, &m);
		}
		while ((r = ds__out_find(o, path)) && r->fetching)
			pthread_cond_wait(&o->fetched, &o->mu);
		if (!r)
			return -ENOENT;
		if (r->local)
			return 0;
		if (r->fetch_err != -EAGAIN)
			return r->fetch_err ? r->fetch_err : -EIO;
	}
	return -EIO;
}

/* A writer's token taken from an earlier service of this job (the one
 * before a failover restart): its file went with that service. */
static int token_stale(struct ds_out *o, uint64_t token)
{
	if (((token >> 32) & 0xffff) == o->inst)
		return 0;
	ds_warn("node %u: an output opened under an earlier service of this job (token %016llx) "
	        "is not kept: the writer gets EIO",
	        o->h.node, (unsigned long long)token);
	return 1;
}

static int handle(struct ds_out *o, struct ds_out_req *q, struct ds_out_resp *a)
{
	struct omsg m;
	int rc;
	if ((q->op == DS_OUT_WATCH || q->op == DS_OUT_CLOSE) && token_stale(o, q->token))
		return -EIO;
	switch (q->op) {
	case DS_OUT_PING:
		return 0;
	case DS_OUT_WATCH:
		return watch(o, q->token);
	case DS_OUT_ABORT: {
		struct opend *p = pend_find(o, q->token);
		if (p && !p->committing)
			rollback(o, p);
		return 0;
	}
	case DS_OUT_CREATE: return do_create(o, q, a);
	case DS_OUT_CLOSE:
		/* the lock may look held for an instant by its watcher, which
		 * takes it to learn that the writers are gone: look again */
		for (int i = 0;; i++) {
			struct opend *p = pend_find(o, q->token);
			if (!p)
				return fail_take(o, q->token); /* published already (or not kept) */
			if (p->committing) {
				while (pend_find(o, q->token))
					pthread_cond_wait(&o->fetched, &o->mu);
				return fail_take(o, q->token);
			}
			if (!p->armed) {
				/* its confirmation is on the create's connection,
				 * sent before this close: wait for it to be read
				 * (or the create rolled back) */
				pthread_cond_wait(&o->fetched, &o->mu);
				i--;
				continue;
			}
			if (lock_free(p->fd)) {
				rc = commit(o, p);
				fail_take(o, q->token); /* answered here */
				return rc;
			}
			if (i == 10)
				return 0; /* another descriptor still holds it */
			pthread_mutex_unlock(&o->mu);
			usleep(200);
			pthread_mutex_lock(&o->mu);
		}
	case DS_OUT_OPEN:
		if ((rc = rel_ok(q->path, 1)))
			return rc;
		if (!ds__out_find(o, q->path))
			sweep(o); /* a writer that exited without close */
		return ds__out_fetch_locked(o, q->path);
	case DS_OUT_RENAME:
	case DS_OUT_UNLINK:
	case DS_OUT_MKDIR:
	case DS_OUT_RMDIR:
		if ((rc = rel_ok(q->path, 0)) || (q->op == DS_OUT_RENAME && (rc = rel_ok(q->path2, 0))))
			return rc;
		if ((q->op == DS_OUT_MKDIR || q->op == DS_OUT_RMDIR || q->op == DS_OUT_UNLINK) &&
		    (q->flags & ~DS_OUT_F_PREPARE))
			return -EINVAL;
		if ((q->op == DS_OUT_UNLINK || q->op == DS_OUT_RENAME) &&
		    !(q->flags & DS_OUT_F_PREPARE))
			sweep(o);
		memset(&m, 0, sizeof(m));
		m.op = q->op;
		m.flags = q->flags;
		m.mode = q->mode;
		pfmt(m.path, sizeof(m.path), "%s", q->path);
		pfmt(m.path2, sizeof(m.path2), "%s", q->path2);
		return via_main(o, &m);
	case DS_OUT_DRAIN:
		sweep(o);
		memset(&m, 0, sizeof(m));
		m.op = DS_OUT_DRAIN;
		return via_main(o, &m);
	}
	return -EINVAL;
}

struct conn_arg {
	struct ds_out *o;
	int fd;
};

/* A rename, unlink, mkdir or rmdir node 0 has checked (DS_OUT_F_PREPARE,
 * answered 0): it is applied only when its writer sends the same request
 * again, without the flag, on this connection, which proves that the writer
 * heard the answer within its DSTAGE_TIMEOUT and will wait for the outcome.
 * A connection closed first (the writer gave up: its call failed with EIO)
 * applies nothing, ever (docs/outputs.md, issue 24's follow-up: a rename
 * reported failed must not land later).  Not bounded in time, as for a
 * create's confirmation: a writer stopped between the two holds nothing.
 * On 1, *q is the request to apply. */
static int ns_commit_wait(struct ds_out *o, int fd, struct ds_out_req *q)
{
	struct ds_out_req *n = ds_xmalloc(sizeof(*n));
	int ok = 0;
	if (recv_second(o, fd, n)) {
		n->path[PATH_MAX - 1] = n->path2[PATH_MAX - 1] = 0;
		ok = n->magic == DS_OUT_MAGIC && n->op == q->op &&
		     n->flags == (q->flags & ~DS_OUT_F_PREPARE) && n->mode == q->mode &&
		     !strcmp(n->path, q->path) && !strcmp(n->path2, q->path2);
	}
	if (ok) {
		q->flags = n->flags;
		/* tests: the way to node 0 slow after the check (t/2218) */
		ds_fault("outputs.ns_commit", (int)o->h.node);
	} else
		ds_warn("node %u: '%s/%s': its writer gave up its %s before node 0 had checked "
		        "it: nothing applied",
		        o->h.node, o->oo.outputs, q->path,
		        q->op == DS_OUT_RENAME   ? "rename"
		        : q->op == DS_OUT_UNLINK ? "unlink"
		        : q->op == DS_OUT_MKDIR  ? "mkdir"
		                                 : "rmdir");
	free(n);
	return ok;
}

static void *conn_main(void *arg)
{
	struct conn_arg *c = arg;
	struct ds_out *o = c->o;
	struct ds_out_req *q = ds_xmalloc(sizeof(*q));
	struct ds_out_resp a = {.magic = DS_OUT_MAGIC, .status = -EINVAL};
	size_t got = 0;
	while (got < sizeof(*q)) {
		ssize_t n = recv(c->fd, (char *)q + got, sizeof(*q) - got, 0);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			break;
		}
		got += (size_t)n;
	}
	if (got == sizeof(*q) && q->magic == DS_OUT_MAGIC) {
		q->path[PATH_MAX - 1] = q->path2[PATH_MAX - 1] = 0;
		pthread_mutex_lock(&o->mu);
		a.status = handle(o, q, &a);
		pthread_mutex_unlock(&o->mu);
		if (q->op == DS_OUT_CREATE || q->op == DS_OUT_CLOSE || q->op == DS_OUT_RENAME ||
		    q->op == DS_OUT_UNLINK)
			ds__out_status_write(o);
		(void)!send(c->fd, &a, sizeof(a), MSG_NOSIGNAL);
		if (q->op == DS_OUT_CREATE && !a.status) {
			confirm_wait(o, c->fd, a.token);
			ds__out_status_write(o);
		}
		if ((q->op == DS_OUT_RENAME || q->op == DS_OUT_UNLINK || q->op == DS_OUT_MKDIR ||
		     q->op == DS_OUT_RMDIR) &&
		    (q->flags & DS_OUT_F_PREPARE) && !a.status && ns_commit_wait(o, c->fd, q)) {
			pthread_mutex_lock(&o->mu);
			a.status = handle(o, q, &a);
			pthread_mutex_unlock(&o->mu);
			if (q->op == DS_OUT_RENAME || q->op == DS_OUT_UNLINK)
				ds__out_status_write(o);
			(void)!send(c->fd, &a, sizeof(a), MSG_NOSIGNAL);
		}
	}
	close(c->fd);
	free(q);
	free(c);
	pthread_mutex_lock(&o->mu);
	o->nthreads--;
	pthread_cond_broadcast(&o->threads_cv);
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

static void *accept_main(void *arg)
{
	struct ds_out *o = arg;
	for (;;) {
		struct pollfd pf = {o->lfd, POLLIN, 0};
		int n = poll(&pf, 1, SWEEP_MS);
		if (__atomic_load_n(&o->quit, __ATOMIC_RELAXED))
			break;
		if (n <= 0) {
			pthread_mutex_lock(&o->mu);
			struct opend *before = o->pend;
			if (o->pend)
				sweep(o);
			int changed = before != o->pend;
			pthread_mutex_unlock(&o->mu);
			if (changed)
				ds__out_status_write(o);
			continue;
		}
		int fd = accept4(o->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		struct ucred cred;
		socklen_t cl = sizeof(cred);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid()) {
			ds_warn("node %u: outputs: refused a connection from uid %u", o->h.node,
			        (unsigned)cred.uid);
			close(fd);
			continue;
		}
		struct conn_arg *c = ds_xmalloc(sizeof(*c));
		c->o = o;
		c->fd = fd;
		pthread_t t;
		pthread_attr_t at;
		pthread_attr_init(&at);
		pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
		pthread_mutex_lock(&o->mu);
		o->nthreads++;
		pthread_mutex_unlock(&o->mu);
		if (pthread_create(&t, &at, conn_main, c)) {
			close(fd);
			free(c);
			pthread_mutex_lock(&o->mu);
			o->nthreads--;
			pthread_mutex_unlock(&o->mu);
		}
		pthread_attr_destroy(&at);
	}
	return NULL;
}

/* ---- the sums after close ---------------------------------------------------
 * One thread per node sums each file this node publishes, oldest first, as
 * soon as it is published: the writer's close does not wait for it.  A
 * fetch by another node is answered, and the drain copies a file, only
 * once its sum is known; both check the bytes they move against it. */
static void *sum_main(void *arg)
{
	struct ds_out *o = arg;
	pthread_mutex_lock(&o->mu);
	for (;;) {
		while (!o->sums && !o->squit)
			pthread_cond_wait(&o->sum_cv, &o->mu);
		if (o->squit)
			break;
		struct osum *q = o->sums;
		o->sums = q->next;
		if (!o->sums)
			o->sums_tail = &o->sums;
		struct ds__orec *r = q->r;
		free(q);
		if (r->summed || r->gone)
			continue; /* nobody can ask for it any more */
		char p[PATH_MAX];
		int fd = nspath(o, r->path, p)
		                 ? -1
		                 : openat(o->nsfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		int rc = fd < 0 ? -errno : 0;
		uint64_t size = r->size;
		double t0 = ds_now();
		pthread_mutex_unlock(&o->mu);
		ds_fault("outputs.sum", (int)o->h.node); /* tests: a slow sum (t/2209) */
		uint32_t crc = 0;
		struct stat st;
		if (!rc && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size))
			rc = -EIO;
		if (!rc && size) {
			void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
			if (map == MAP_FAILED) {
				rc = -errno;
			} else {
				madvise(map, size, MADV_SEQUENTIAL);
				crc = ds_crc32c(0, map, size);
				munmap(map, size);
			}
		}
		if (fd >= 0)
			close(fd);
		pthread_mutex_lock(&o->mu);
		r->crc = crc;
		r->sum_err = rc;
		r->summed = 1;
		if (rc)
			ds_error("node %u: '%s': cannot read it back after its close: %s",
			         o->h.node, r->path, ds_strerror(rc));
		else
			ds_debug(
				"node %u: '%s' (%llu bytes) summed in %.4f s, %.4f s after its close",
				o->h.node, r->path, (unsigned long long)size, ds_now() - t0,
				ds_now() - r->t_closed);
		pthread_cond_broadcast(&o->summed);
		ds__out_wake(o); /* fetches waiting for it */
		pthread_mutex_unlock(&o->mu);
		ds__out_status_write(o); /* its CRC, for a recovery */
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

void ds__out_wake(struct ds_out *o) { o->h.wake(o->h.ctx); }

void ds__out_wait_summed(struct ds_out *o)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&o->summed, &o->mu, &ts);
}

const char *ds__out_crc_str(const struct ds__orec *r, char buf[9])
{
	if (!r->summed || r->sum_err)
		return "--------";
	snprintf(buf, 9, "%08x", r->crc);
	return buf;
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

int ds_out_start(const struct ds_out_host *h, const struct ds_out_opts *so, struct ds_out **out)
{
	*out = NULL;
	if (!so->outputs)
		return 0;
	ds_fault("serve.outputs_start", (int)h->node); /* tests: a slow start (t/2207) */
	struct ds_out *o = ds_xcalloc(1, sizeof(*o));
	o->h = *h;
	o->oo = *so;
	so = &o->oo;
	h = &o->h;
	o->lfd = -1;
	o->qtail = &o->queue;
	pthread_mutex_init(&o->mu, NULL);
	pthread_mutex_init(&o->status_mu, NULL);
	pthread_cond_init(&o->fetched, NULL);
	pthread_cond_init(&o->threads_cv, NULL);
	pthread_cond_init(&o->sum_cv, NULL);
	pthread_cond_init(&o->summed, NULL);
	o->sums_tail = &o->sums;
	*out = o;
	MPI_Comm_dup(h->comm, &o->oc);
	MPI_Comm_rank(o->oc, &o->rank);
	MPI_Comm_dup(h->comm, &o->dc);
	int rc = 0, jdfd = AT_FDCWD;
	o->areafd = o->nsfd = o->wfd = -1;
	if (so->outputs_to) {
		/* DIR may be a scratch directory others can write: DIR opened
		 * once, dstage.<uid>.<job> and <node>.out made and checked from
		 * it by descriptor, and only ever used from there */
		char *jd = ds_store_jobdir(so->outputs_to, h->job && *h->job ? h->job : ds_store_default_job());
		rc = ds_mkdir_p(so->outputs_to, 0700);
		int top = rc ? -1 : open(so->outputs_to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (!rc && top < 0)
			rc = -errno;
		if (!rc) {
			const char *jb = strrchr(jd, '/');
			jdfd = private_dirat(top, jb ? jb + 1 : jd);
			if (jdfd < 0)
				rc = jdfd;
		}
		if (top >= 0)
			close(top);
		if ((size_t)pfmt(o->area, sizeof(o->area), "%s/%u.out", jd, h->node) >= sizeof(o->area))
			rc = -ENAMETOOLONG;
		free(jd);
	} else if ((size_t)pfmt(o->area, sizeof(o->area), "%s/" DS_OUT_AREA_NAME, h->nodedir) >=
	           sizeof(o->area)) {
		rc = -ENAMETOOLONG;
	}
	pfmt(o->sock, sizeof(o->sock), "%s/" DS_OUT_SOCK, h->nodedir);
	/* a new service starts from an empty namespace; outputs an earlier one
	 * of this job left undrained are not thrown away: refused until
	 * `dstage drain --wait` has recovered them */
	if (!rc) {
		char st[PATH_MAX], *text;
		pfmt(st, sizeof(st), "%s/" DS_OUT_STATUS, h->nodedir);
		/* all of it (one line per output not drained, any number): the
		 * area is wiped below only when no line lists one */
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
			ds_error(
				"node %u: '%s': %s (it may list outputs not drained: the output area "
				"is not wiped)",
				h->node, st, ds_strerror((int)n));
			rc = (int)n;
		} else if (left) {
			ds_error(
				"node %u: %lu output(s) of an earlier service of this job were not drained "
				"(%s): run 'dstage drain --wait --to %s%s%s' first to recover them",
				h->node, left, st, h->to, h->job ? " --job " : "",
				h->job ? h->job : "");
			rc = -EEXIST;
		}
	}
	if (!rc) {
		const char *an = strrchr(o->area, '/') + 1;
		o->areafd = private_dirat(jdfd, jdfd == AT_FDCWD ? o->area : an);
		if (o->areafd < 0)
			rc = o->areafd;
	}
	if (jdfd >= 0)
		close(jdfd);
	if (!rc) {
		char stale[64];
		pfmt(stale, sizeof(stale), "old.%ld", (long)getpid());
		if (renameat(o->areafd, DS_OUT_NS, o->areafd, stale) == 0)
			rm_rf_at(o->areafd, stale, 0);
		pfmt(stale, sizeof(stale), "oldw.%ld", (long)getpid());
		if (renameat(o->areafd, DS_OUT_W, o->areafd, stale) == 0)
			rm_rf_at(o->areafd, stale, 0);
		o->nsfd = private_dirat(o->areafd, DS_OUT_NS);
		if (o->nsfd < 0)
			rc = o->nsfd;
	}
	if (!rc) {
		o->wfd = private_dirat(o->areafd, DS_OUT_W);
		if (o->wfd < 0)
			rc = o->wfd;
	}
	if (!rc)
		rc = ds__drain_new(o, so, &o->dr);
	{ /* collective, whatever rc is here */
		int rrc = ds__repl_start(o, &o->repl);
		if (!rc)
			rc = rrc;
	}
	if (!rc) {
		/* The longest name of an output (name_fits), decided by the
		 * node that orders the namespace: it must fit PATH_MAX in every
		 * node's AREA/ns (each node's area differs from this one's by
		 * its node number: up to 9 more digits) and in the drain
		 * directory with the drain's suffix.  Same on every node. */
		size_t ns = strlen(o->area) + 1 + strlen(DS_OUT_NS) + 9 + 1,
		       dr = strlen(ds__drain_dir(o->dr)) + 1 + DS_OUT_DRAIN_SUFFIX_MAX;
		size_t need = ns > dr ? ns : dr;
		o->rel_max = need < PATH_MAX - 1 ? PATH_MAX - 1 - need : 0;
	}
	if (!rc) {
		if (pthread_create(&o->sthread, NULL, sum_main, o))
			rc = -EAGAIN;
		else
			o->sthread_on = 1;
	}
	if (!rc) {
		struct sockaddr_un sa = {.sun_family = AF_UNIX};
		if (strlen(o->sock) >= sizeof(sa.sun_path)) {
			rc = -ENAMETOOLONG;
		} else {
			strcpy(sa.sun_path, o->sock);
			unlink(o->sock);
			o->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			mode_t um = umask(077);
			if (o->lfd < 0 || bind(o->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
			    chmod(o->sock, 0600) < 0 || listen(o->lfd, 128) < 0)
				rc = -errno;
			umask(um);
		}
	}
	if (!rc) {
		char conf[PATH_MAX], text[2 * PATH_MAX + 8];
		pfmt(conf, sizeof(conf), "%s/" DS_OUT_CONF, h->nodedir);
		int n = pfmt(text, sizeof(text), "%s\n%s\n", so->outputs, o->area);
		rc = ds_write_file_atomic(conf, text, (size_t)n, 0600);
	}
	if (!rc) {
		if (pthread_create(&o->athread, NULL, accept_main, o))
			rc = -EAGAIN;
		else
			o->athread_on = 1;
	}
	if (rc)
		ds_error("node %u: outputs in '%s': %s", h->node, o->area, ds_strerror(rc));
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
	for (struct oreq *q = o->wait; q && !busy; q = q->next)
		busy = q->m.op != DS_OUT_DRAIN;
	for (struct oack *a = o->acks; a && !busy; a = a->next)
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
	for (struct oreq *q = o->queue; q; q = q->next) {
		q->status = -EIO;
		q->done = 1;
		pthread_cond_broadcast(&q->cv);
	}
	for (struct oreq *q = o->wait; q; q = q->next) {
		q->status = -EIO;
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
	for (struct opend *p = o->pend; p; p = p->next) {
		ds_error("node %u: '%s/%s': still open for writing when the service stopped: not kept",
		         o->h.node, o->oo.outputs, p->path);
		lost++;
	}
	pthread_mutex_unlock(&o->mu);
	lost += ds__drain_end(o->dr);
	if (o->sthread_on) {
		pthread_mutex_lock(&o->mu);
		o->squit = 1;
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
		struct osum *q = o->sums;
		o->sums = q->next;
		free(q);
	}
	while (o->fdefer) {
		struct odefer *f = o->fdefer;
		o->fdefer = f->next;
		free(f);
	}
	while (o->pend) {
		struct opend *p = o->pend;
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
		struct ofail *f = o->fails;
		o->fails = f->next;
		free(f);
	}
	while (o->writing) {
		struct owriting *w = o->writing;
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
	for (struct opend *p = o->pend; p; p = p->next)
		writing++;
	int n = pfmt(line, sizeof(line), "area=%s\nwriting=%u\ninstance=%u\n", o->area, writing, o->inst);
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
			ds_error("--drain-rate '%s': not a size (bytes per second, 0: no bound)", arg);
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
		ds_error("--outputs '%s': not one plain name under the mount (e.g. 'out')", o->outputs);
		return 2;
	}
	if (!o->drain_to) {
		ds_error("--outputs '%s' needs --drain-to DIR (a directory on the shared file system)",
		         o->outputs);
		return 2;
	}
	return 0;
}
