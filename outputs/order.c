/* SPDX-License-Identifier: BSD-3-Clause */
/* order.c: the outputs namespace, changed in node 0's order (outputs.c
 * describes the protocol): main's sends, the changes every node applies to
 * its AREA/ns in that order, node 0's decisions (is the path free, does the
 * name fit, is the directory empty), the acknowledgements, and the main
 * loop's share of the service (ds_out_poll: requests from the connection
 * threads, messages of the other nodes, the drain waits). */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define pfmt ds__out_pfmt

static int parent_dir(struct ds_out *o, const char *rel)
{
	char p[PATH_MAX], b[PATH_MAX];
	pfmt(p, sizeof(p), "%s", rel);
	char *sl = strrchr(p, '/');
	if (!sl)
		return 0;
	*sl = 0;
	if (ds__out_nspath(o, p, b))
		return -ENAMETOOLONG;
	struct stat st;
	if (fstatat(o->nsfd, b, &st, 0) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* ---- main: sending ----------------------------------------------------- */
void ds__out_send(struct ds_out *o, int to, int tag, const struct ds__omsg *m)
{
	struct ds__osend *x = ds_xmalloc(sizeof(*x));
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
	for (struct ds__osend **pp = &o->sends; *pp;) {
		int done = 0;
		MPI_Test(&(*pp)->req, &done, MPI_STATUS_IGNORE);
		if (done) {
			struct ds__osend *x = *pp;
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
	for (struct ds__oreq **pp = &o->wait; *pp; pp = &(*pp)->next) {
		if ((*pp)->m.rid != rid)
			continue;
		struct ds__oreq *q = *pp;
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

static int placeholder(struct ds_out *o, const struct ds__omsg *m, const char *dst)
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

static int apply(struct ds_out *o, const struct ds__omsg *m)
{
	char a[PATH_MAX], b[PATH_MAX];
	int rc = 0;
	uint32_t me = o->h.node;
	if (ds__out_nspath(o, m->path, a) || ds__out_nspath(o, m->path2, b))
		return -ENAMETOOLONG;
	switch (m->op) {
	case DS__OUT_PUBLISH: {
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
		r->summed = !(m->flags & DS__OUT_SUM_LATER);
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
				struct ds__osum *q = ds_xcalloc(1, sizeof(*q));
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
			ds_error("node %u: rename '%s' -> '%s': %s", me, m->path, m->path2,
			         ds_strerror(rc));
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
	case DS_OUT_DRAIN: break; /* the acknowledgement waits for the drain (dwaits) */
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

static struct ds__owriting *writing_find(struct ds_out *o, const char *path)
{
	for (struct ds__owriting *w = o->writing; w; w = w->next)
		if (!strcmp(w->path, path))
			return w;
	return NULL;
}

static int writing_under(struct ds_out *o, const char *dir)
{
	size_t l = strlen(dir);
	for (struct ds__owriting *w = o->writing; w; w = w->next)
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
static int decide_dir_rename(struct ds_out *o, const struct ds__omsg *m, const char *b)
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
static int decide(struct ds_out *o, struct ds__omsg *m)
{
	char a[PATH_MAX], b[PATH_MAX];
	struct stat st, st2;
	if (ds__out_nspath(o, m->path, a) || ds__out_nspath(o, m->path2, b))
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
			struct ds__owriting *w = ds_xcalloc(1, sizeof(*w));
			w->path = ds_xstrdup(m->path);
			w->node = m->origin;
			w->token = m->token;
			w->next = o->writing;
			o->writing = w;
		}
		return 1;
	case DS__OUT_ABORT:
	case DS__OUT_PUBLISH:
		for (struct ds__owriting **pp = &o->writing; *pp; pp = &(*pp)->next)
			if ((*pp)->token == m->token && (*pp)->node == m->origin) {
				struct ds__owriting *w = *pp;
				*pp = w->next;
				free(w->path);
				free(w);
				return m->op == DS__OUT_ABORT ? 1 : parent_dir(o, m->path);
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
	case DS_OUT_DRAIN: return 0;
	}
	return -EINVAL;
}

static void drain_wait_add(struct ds_out *o, uint64_t seq)
{
	struct ds__odw *d = ds_xcalloc(1, sizeof(*d));
	d->seq = seq;
	d->upto = ds__drain_mark(o->dr);
	d->next = o->dwaits;
	o->dwaits = d;
}

static void ack_in(struct ds_out *o, uint64_t seq, int status);

/* rank 0: a request from node `origin` (or this rank's node) */
static void request(struct ds_out *o, struct ds__omsg *m)
{
	int rc = decide(o, m);
	if ((m->flags & DS_OUT_F_PREPARE) && (m->op == DS_OUT_RENAME || m->op == DS_OUT_UNLINK ||
	                                      m->op == DS_OUT_MKDIR || m->op == DS_OUT_RMDIR)) {
		/* only the check: the change comes again, without the flag, if
		 * its writer is still there to hear the answer (dsout.h) */
		struct ds__omsg d = *m;
		d.status = rc < 0 ? rc : 0;
		if (m->origin == o->h.node)
			finish(o, m->rid, d.status);
		else
			ds__out_send(o, ds__out_rank_of(&o->h, m->origin), DS__OUT_T_DONE, &d);
		return;
	}
	if (rc) {
		struct ds__omsg d = *m;
		d.status = rc == 1 ? 0 : rc;
		if (m->origin == o->h.node) /* this rank's own */
			finish(o, m->rid, d.status);
		else
			ds__out_send(o, ds__out_rank_of(&o->h, m->origin), DS__OUT_T_DONE, &d);
		return;
	}
	m->seq = ++o->seq;
	struct ds__oack *a = ds_xcalloc(1, sizeof(*a));
	a->seq = m->seq;
	a->rid = m->rid;
	a->origin = m->origin;
	a->drain = m->op == DS_OUT_DRAIN;
	a->left = (int)o->h.nnodes;
	a->next = o->acks;
	o->acks = a;
	for (uint32_t k = 1; k < o->h.nnodes; k++)
		ds__out_send(o, (int)k, DS__OUT_T_APPLY, m);
	int st = apply(o, m);
	if (m->op == DS_OUT_DRAIN)
		drain_wait_add(o, m->seq);
	else
		ack_in(o, m->seq, st);
}

static void ack_in(struct ds_out *o, uint64_t seq, int status)
{
	for (struct ds__oack **pp = &o->acks; *pp; pp = &(*pp)->next) {
		struct ds__oack *a = *pp;
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
			struct ds__omsg d;
			memset(&d, 0, sizeof(d));
			d.rid = a->rid;
			d.status = a->status;
			ds__out_send(o, ds__out_rank_of(&o->h, a->origin), DS__OUT_T_DONE, &d);
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
	struct ds__omsg d;
	memset(&d, 0, sizeof(d));
	d.seq = seq;
	d.status = status;
	ds__out_send(o, 0, DS__OUT_T_ACK, &d);
}

/* ---- main --------------------------------------------------------------- */
static void from_queue(struct ds_out *o)
{
	for (;;) {
		struct ds__oreq *q = o->queue;
		if (!q)
			return;
		o->queue = q->next;
		if (!o->queue)
			o->qtail = &o->queue;
		q->m.rid = ++o->rid;
		q->m.origin = o->h.node;
		if (q->m.op == DS__OUT_FETCH) { /* a fetch: answered by fetch_end */
			struct ds__orec *r = ds__out_find(o, q->m.path);
			q->done = 1;
			pthread_cond_broadcast(&q->cv);
			if (!r || r->local) {
				ds__fetch_end(o, r, 0);
				continue;
			}
			int holder = ds__out_rank_of(&o->h, r->holder);
			if (holder < 0) { /* its node is lost, and its outputs with it */
				ds_error(
					"node %u: '%s': its only copy was on node %u, which is lost",
					o->h.node, r->path, r->holder);
				ds__fetch_end(o, r, -EIO);
				continue;
			}
			q->m.xfer = 1 + (o->xfer_ctr++ % 30000);
			ds__out_send(o, holder, DS__OUT_T_FETCH, &q->m);
			continue;
		}
		q->next = o->wait;
		o->wait = q;
		if (o->rank == 0)
			request(o, &q->m);
		else
			ds__out_send(o, 0, DS__OUT_T_REQ, &q->m);
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
		struct ds__omsg *m = ds_xmalloc(sizeof(*m));
		MPI_Recv(m, (int)sizeof(*m), MPI_BYTE, stt.MPI_SOURCE, stt.MPI_TAG, o->oc,
		         MPI_STATUS_IGNORE);
		switch (stt.MPI_TAG) {
		case DS__OUT_T_REQ: request(o, m); break;
		case DS__OUT_T_APPLY: {
			int st = apply(o, m);
			if (m->op == DS_OUT_DRAIN)
				drain_wait_add(o, m->seq);
			else
				ack_out(o, m->seq, st);
			break;
		}
		case DS__OUT_T_ACK: ack_in(o, m->seq, m->status); break;
		case DS__OUT_T_DONE: finish(o, m->rid, m->status); break;
		case DS__OUT_T_FETCH: ds__fetch_serve(o, m, stt.MPI_SOURCE); break;
		case DS__OUT_T_FHDR: ds__fetch_header(o, m, stt.MPI_SOURCE); break;
		}
		free(m);
	}
	/* drain waits whose drain has caught up */
	for (struct ds__odw **pp = &o->dwaits; *pp;) {
		struct ds__odw *d = *pp;
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
	for (struct ds__odefer **pp = &o->fdefer; *pp;) {
		struct ds__odefer *f = *pp;
		struct ds__orec *r = ds__out_find(o, f->m.path);
		if (r && !r->summed) {
			pp = &f->next;
			continue;
		}
		*pp = f->next;
		ds__fetch_serve(o, &f->m, f->peer);
		free(f);
	}
	ds__fetch_poll(o);
	sends_test(o);
	ds__repl_poll(o->repl); /* outrepl.c */
	pthread_mutex_unlock(&o->mu);
}
