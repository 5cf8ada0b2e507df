/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c: the writers' connections (dsout.h's requests from the shim):
 * the accept thread, one short-lived thread per connection, the creates,
 * the watchers that publish an output when its writer's last descriptor
 * goes (the OFD locks), the publish itself (commit: sum or replicas,
 * then the change through main), and the sweep of writers that are gone.
 * What needs MPI goes to main through the queue (via_main). */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#define pfmt ds__out_pfmt
#define SWEEP_MS 5
#define OUT_MIN_FREE (1u << 20) /* a create needs this much free in the area */

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

static int64_t mtime_of(const struct stat *st)
{
	return (int64_t)st->st_mtim.tv_sec * 1000000000ll + st->st_mtim.tv_nsec;
}

/* Hand m to main and wait for its answer (mu held).  Not once the
 * service stops: ds_out_stop has answered what was queued and waits for
 * this thread to end, main polls no more (a request queued now waited for
 * ever, and the stop with it).  The answer the stop gives. */
static int via_main(struct ds_out *o, struct ds__omsg *m)
{
	if (__atomic_load_n(&o->quit, __ATOMIC_RELAXED))
		return m->op == DS_OUT_DRAIN ? -ESHUTDOWN : -EIO;
	struct ds__oreq q;
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

/* Pending output p leaves the list, its descriptor closed; a fetch waiting
 * on it looks again (mu held). */
/* An output's file in the writer's area, while it is written (the
 * requested mode goes with the publish, unless the writer changed it). */
#define AREA_MODE 0600

static void pend_free(struct ds_out *o, struct ds__opend *p)
{
	for (struct ds__opend **pp = &o->pend; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	close(p->fd);
	free(p->path);
	free(p);
	pthread_cond_broadcast(&o->fetched);
}

/* Publish pending output p (its writers are gone); mu held, dropped while
 * the bytes are summed. */
static int commit(struct ds_out *o, struct ds__opend *p)
{
	p->committing = 1;
	double t0 = ds_now();
	pthread_mutex_unlock(&o->mu);
	/* The CRC-32C is not taken here: summing 1 GiB costs the writer 0.2 s
	 * more in close.  The file cannot change after its close (no
	 * descriptor is left; a rewrite makes a new file), so the holder's
	 * sum thread takes it just after, and everything that needs it waits
	 * for it: a fetch by another node, the drain (ds__out_sum_main). */
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
	struct ds__omsg m;
	memset(&m, 0, sizeof(m));
	m.op = rc ? DS__OUT_ABORT : DS__OUT_PUBLISH;
	m.token = p->token;
	m.holder = o->h.node;
	m.size = (uint64_t)st.st_size;
	m.mtime_ns = mtime_of(&st);
	m.crc = crc;
	m.flags = nrepl ? 0 : DS__OUT_SUM_LATER;
	m.nrepl = nrepl;
	memcpy(m.repl, repl, sizeof(repl));
	m.mode = p->mode;
	/* the area file is made 0600 (the writer reopens it for writing); a
	 * mode it has now was set on the descriptor by the writer (fchmod,
	 * or sed -i's copy of the old file's ACL): that one is published */
	if (!rc && (st.st_mode & 07777) != AREA_MODE)
		m.mode = (st.st_mode & 0777) | 0400; /* no set-id bits; the drain must read it */
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
		ds_error("node %u: '%s': closed but not kept: %s", o->h.node, p->path,
		         ds_strerror(rc));
		struct ds__ofail *f = ds_xmalloc(sizeof(*f));
		f->token = p->token;
		f->rc = rc;
		f->next = o->fails;
		o->fails = f;
	}
	pend_free(o, p);
	return rc;
}

/* the outcome of token's publish for its CLOSE: 0, or why it was not kept */
static int fail_take(struct ds_out *o, uint64_t token)
{
	for (struct ds__ofail **pp = &o->fails; *pp; pp = &(*pp)->next)
		if ((*pp)->token == token) {
			struct ds__ofail *f = *pp;
			int rc = f->rc;
			*pp = f->next;
			free(f);
			return rc;
		}
	return 0;
}

static struct ds__opend *pend_find(struct ds_out *o, uint64_t token)
{
	for (struct ds__opend *p = o->pend; p; p = p->next)
		if (p->token == token)
			return p;
	return NULL;
}

/* Publish every pending output whose writers are gone (mu held). */
static void sweep(struct ds_out *o)
{
	for (int again = 1; again;) {
		again = 0;
		for (struct ds__opend *p = o->pend; p; p = p->next)
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
	struct ds__opend *p;
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
	struct ds__opend *p = pend_find(o, token);
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
static void rollback(struct ds_out *o, struct ds__opend *p)
{
	p->committing = 1;
	if (!__atomic_load_n(&o->quit, __ATOMIC_RELAXED)) { /* stopping: main polls no more */
		struct ds__omsg m;
		memset(&m, 0, sizeof(m));
		m.op = DS__OUT_ABORT;
		m.token = p->token;
		pfmt(m.path, sizeof(m.path), "%s", p->path);
		via_main(o, &m);
	}
	char wp[PATH_MAX];
	pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)p->token);
	unlinkat(o->wfd, wp, 0);
	pend_free(o, p);
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
	struct ds__opend *p = pend_find(o, token);
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
	if (rc || (rc = ds__out_nspath(o, q->path, a)))
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
	struct ds__omsg m;
	memset(&m, 0, sizeof(m));
	m.op = DS_OUT_CREATE;
	m.flags = q->flags;
	m.token = ((uint64_t)o->h.node << 48) | ((uint64_t)o->inst << 32) |
	          (++o->token_ctr & 0xffffffffu);
	pfmt(m.path, sizeof(m.path), "%s", q->path);
	rc = via_main(o, &m);
	if (rc)
		return rc;
	pfmt(wp, sizeof(wp), "%016llx", (unsigned long long)m.token);
	int fd = openat(o->wfd, wp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, AREA_MODE);
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
		m.op = DS__OUT_ABORT;
		via_main(o, &m);
		return rc;
	}
	struct ds__opend *p = ds_xcalloc(1, sizeof(*p));
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
			struct ds__omsg m;
			memset(&m, 0, sizeof(m));
			m.op = DS__OUT_FETCH;
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
	struct ds__omsg m;
	int rc;
	if ((q->op == DS_OUT_WATCH || q->op == DS_OUT_CLOSE) && token_stale(o, q->token))
		return -EIO;
	switch (q->op) {
	case DS_OUT_PING: return 0;
	case DS_OUT_WATCH: return watch(o, q->token);
	case DS_OUT_ABORT: {
		struct ds__opend *p = pend_find(o, q->token);
		if (p && !p->committing)
			rollback(o, p);
		return 0;
	}
	case DS_OUT_CREATE: return do_create(o, q, a);
	case DS_OUT_CLOSE:
		/* the lock may look held for an instant by its watcher, which
		 * takes it to learn that the writers are gone: look again */
		for (int i = 0;; i++) {
			struct ds__opend *p = pend_find(o, q->token);
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
		if ((rc = rel_ok(q->path, 0)) ||
		    (q->op == DS_OUT_RENAME && (rc = rel_ok(q->path2, 0))))
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

void *ds__out_accept_main(void *arg)
{
	struct ds_out *o = arg;
	for (;;) {
		struct pollfd pf = {o->lfd, POLLIN, 0};
		int n = poll(&pf, 1, SWEEP_MS);
		if (__atomic_load_n(&o->quit, __ATOMIC_RELAXED))
			break;
		if (n <= 0) {
			pthread_mutex_lock(&o->mu);
			struct ds__opend *before = o->pend;
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
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
		    cred.uid != geteuid()) {
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
