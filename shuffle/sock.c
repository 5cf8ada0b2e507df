/* SPDX-License-Identifier: BSD-3-Clause */
/* sock.c: the readers' socket (dsproto.h).
 *
 * One thread, one poll loop over every connection: a reader thread keeps
 * one connection and sends one request at a time, so each connection is a
 * small state machine (read a request -> wait for the data -> write the
 * answer) and many readers are served at once without a thread each.
 * Reads of data this node holds are answered from the store mapping at
 * once, with no copy (writev straight from the mapping); the others go to
 * the main thread, which fetches them with MPI_Get, and come back here to
 * be written; with MPI_THREAD_MULTIPLE this thread fetches them itself
 * (direct.c), and main only takes what that path leaves. */
#include "svc.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

enum conn_state { C_READ, C_WAIT, C_WRITE };

struct ds__conn {
	struct ds__conn *next;
	int fd;
	enum conn_state st;
	int hangup; /* the reader left while main was fetching for it */
	unsigned char rbuf[sizeof(struct ds_req)];
	size_t rlen;
	struct ds_resp resp;
	const unsigned char *data; /* answer bytes (store mapping or owned) */
	void *owned;               /* freed when written */
	uint64_t wtotal, wdone;    /* header + data */
};

struct ds__sock {
	pthread_t thread;
	int started;
	int lfd;
	char path[PATH_MAX];
	struct ds__conn *conns;
	size_t nconns;
	struct ds__rreq *direct, **direct_tail; /* this turn's reads for direct.c */
};

void ds__wake(int efd)
{
	uint64_t one = 1;
	while (write(efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

void ds__drain(int efd)
{
	uint64_t v;
	while (read(efd, &v, sizeof(v)) > 0)
		;
}

static void conn_free(struct ds__conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	free(c->owned);
	free(c);
}

static void answer(struct ds__conn *c, int status, const void *data, uint64_t len, void *owned)
{
	c->resp.magic = DS_PROTO_MAGIC;
	c->resp.status = status;
	c->resp.len = status ? 0 : len;
	c->data = data;
	c->owned = owned;
	c->wtotal = sizeof(c->resp) + c->resp.len;
	c->wdone = 0;
	c->st = C_WRITE;
}

/* Write what the socket takes.  Returns 0, or -1 when the connection is dead. */
static int flush_out(struct ds__conn *c)
{
	while (c->wdone < c->wtotal) {
		struct iovec iov[2];
		int n = 0;
		if (c->wdone < sizeof(c->resp)) {
			iov[n].iov_base = (char *)&c->resp + c->wdone;
			iov[n++].iov_len = sizeof(c->resp) - c->wdone;
			if (c->resp.len) {
				iov[n].iov_base = (void *)c->data;
				iov[n++].iov_len = c->resp.len;
			}
		} else {
			uint64_t at = c->wdone - sizeof(c->resp);
			iov[n].iov_base = (void *)(c->data + at);
			iov[n++].iov_len = c->resp.len - at;
		}
		struct msghdr mh = {.msg_iov = iov, .msg_iovlen = n};
		ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return 0;
			return -1;
		}
		c->wdone += (uint64_t)w;
	}
	free(c->owned);
	c->owned = NULL;
	c->data = NULL;
	c->rlen = 0;
	c->st = C_READ;
	return 0;
}

static void to_main(struct ds__svc *s, struct ds__rreq *r);

static void queue_fetch(struct ds__svc *s, struct ds__conn *c, uint32_t id, uint64_t off, uint64_t len)
{
	struct ds__rreq *r = calloc(1, sizeof(*r));
	if (!r) {
		answer(c, -ENOMEM, NULL, 0, NULL);
		return;
	}
	r->conn = c;
	r->id = id;
	r->off = off;
	r->len = len;
	c->st = C_WAIT;
	MPI_Aint disp;
	if (ds__direct_holder(s, id, &disp) >= 0) {
		/* fetched by this thread at the end of this turn */
		*s->sock->direct_tail = r;
		s->sock->direct_tail = &r->next;
		return;
	}
	to_main(s, r);
}

static void to_main(struct ds__svc *s, struct ds__rreq *r)
{
	uint32_t id = r->id;
	r->next = NULL;
	pthread_mutex_lock(&s->mu);
	*s->todo_tail = r;
	s->todo_tail = &r->next;
	pthread_mutex_unlock(&s->mu);
	ds__wake(s->wake_main);
	ds__pw_poke(s, id); /* the target wakes up meanwhile (progress.c) */
}

static void handle(struct ds__svc *s, struct ds__conn *c)
{
	struct ds_req q;
	memcpy(&q, c->rbuf, sizeof(q));
	switch (q.op) {
	case DS_OP_PING:
		answer(c, 0, NULL, 0, NULL);
		return;
	case DS_OP_EPOCH: {
		/* readers opened epoch q.off's list: the latest announcement is
		 * what the main loop follows (exchange.c: follow), backwards too,
		 * so one far-away epoch (a typo, set_epoch(step)) does not hold
		 * the prefetch there for good */
		__atomic_store_n(&s->reader_epoch, q.off, __ATOMIC_RELAXED);
		__atomic_store_n(&s->have_reader_epoch, 1, __ATOMIC_RELEASE);
		ds__wake(s->wake_main);
		answer(c, 0, NULL, 0, NULL);
		return;
	}
	case DS_OP_READ:
		break;
	default:
		answer(c, -EOPNOTSUPP, NULL, 0, NULL);
		return;
	}
	const struct ds_index *ix = &s->ix;
	if (q.id >= ix->h->nentries || !S_ISREG(ds_ix_mode(ix, (uint32_t)q.id))) {
		answer(c, -EINVAL, NULL, 0, NULL);
		return;
	}
	struct ds_ix_file fe, *e = &fe;
	ds_ix_file(ix, (uint32_t)q.id, e);
	if (q.off > e->stored || q.len > DS_MAX_READ) {
		answer(c, -EINVAL, NULL, 0, NULL);
		return;
	}
	uint64_t len = e->stored - q.off < q.len ? e->stored - q.off : q.len;
	uint64_t base;
	if (!len) {
		answer(c, 0, NULL, 0, NULL);
	} else if (ds_index_part_on(ix, e->part, s->node, &base)) {
		if (base + e->poff + q.off + len > s->store_len) {
			answer(c, -EIO, NULL, 0, NULL);
			return;
		}
		DS__COUNT(s, served_reads, 1);
		DS__COUNT(s, served_bytes, len);
		answer(c, 0, s->store + base + e->poff + q.off, len, NULL);
	} else {
		int frc = ds_fault("serve.remote_read", (int)s->node);
		if (frc) {
			answer(c, frc, NULL, 0, NULL);
			return;
		}
		queue_fetch(s, c, q.id, q.off, len);
	}
}

/* Read requests; returns -1 when the connection is finished. */
static int on_input(struct ds__svc *s, struct ds__conn *c)
{
	while (c->st == C_READ) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, MSG_DONTWAIT);
		if (n == 0)
			return -1;
		if (n < 0)
			return errno == EAGAIN || errno == EINTR ? 0 : -1;
		c->rlen += (size_t)n;
		if (c->rlen < sizeof(c->rbuf))
			continue;
		uint32_t magic;
		memcpy(&magic, c->rbuf, sizeof(magic));
		if (magic != DS_PROTO_MAGIC)
			return -1; /* not our protocol: out of step for good */
		handle(s, c);
		if (c->st == C_WRITE && flush_out(c))
			return -1;
	}
	return 0;
}

static void accept_all(struct ds__svc *s)
{
	struct ds__sock *k = s->sock;
	for (;;) {
		int fd = accept4(k->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t cl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid()) {
			/* the directory is 0700 already; this is the second lock */
			ds_warn("node %u: refused a connection from uid %d", s->node, (int)cr.uid);
			close(fd);
			continue;
		}
		struct ds__conn *c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		c->fd = fd;
		c->next = k->conns;
		k->conns = c;
		k->nconns++;
	}
}

/* A fetched read back to its reader. */
static void deliver(struct ds__svc *s, struct ds__rreq *r)
{
	struct ds__conn *c = r->conn;
	if (c->hangup) {
		free(r->buf);
		conn_free(c);
	} else {
		if (!r->status) {
			DS__COUNT(s, served_reads, 1);
			DS__COUNT(s, served_bytes, r->len);
		}
		answer(c, r->status, r->buf, r->len, r->buf);
		if (flush_out(c)) {
			close(c->fd); /* reaped by the loop */
			c->fd = -1;
		}
	}
	free(r);
}

static void take_done(struct ds__svc *s)
{
	pthread_mutex_lock(&s->mu);
	struct ds__rreq *r = s->done;
	s->done = NULL;
	pthread_mutex_unlock(&s->mu);
	while (r) {
		struct ds__rreq *next = r->next;
		deliver(s, r);
		r = next;
	}
}

/* This turn's reads on direct.c's path: fetched here; what failed goes to
 * main (which fetches it again, and stops the service if that fails too). */
static void take_direct(struct ds__svc *s)
{
	struct ds__sock *k = s->sock;
	struct ds__rreq *r = k->direct;
	k->direct = NULL;
	k->direct_tail = &k->direct;
	if (!r)
		return;
	ds__direct_fetch(s, r);
	while (r) {
		struct ds__rreq *next = r->next;
		if (r->status && !r->conn->hangup)
			to_main(s, r);
		else
			deliver(s, r);
		r = next;
	}
}

static void *sock_main(void *arg)
{
	struct ds__svc *s = arg;
	struct ds__sock *k = s->sock;
	struct pollfd *pf = NULL;
	struct ds__conn **pc = NULL;
	size_t cap = 0;
	while (!__atomic_load_n(&s->leaving, __ATOMIC_ACQUIRE)) {
		if (cap < k->nconns + 2) {
			cap = 2 * (k->nconns + 2);
			pf = ds_xrealloc(pf, cap * sizeof(*pf));
			pc = ds_xrealloc(pc, cap * sizeof(*pc));
		}
		size_t n = 0;
		pf[n++] = (struct pollfd){k->lfd, POLLIN, 0};
		pf[n++] = (struct pollfd){s->wake_sock, POLLIN, 0};
		for (struct ds__conn *c = k->conns; c; c = c->next) {
			if (c->fd < 0 || c->st == C_WAIT)
				continue; /* C_WAIT: nothing to do until main answers */
			pc[n] = c;
			pf[n++] = (struct pollfd){c->fd, c->st == C_WRITE ? POLLOUT : POLLIN, 0};
		}
		/* END to the targets of our own reads, once unused (direct.c) */
		double due = ds__direct_idle(s);
		int r = poll(pf, n, due < 0 || due > 0.2 ? 200 : (int)(due * 1000) + 1);
		if (r < 0 && errno != EINTR)
			break;
		if (pf[1].revents) {
			ds__drain(s->wake_sock);
			take_done(s);
		}
		if (pf[0].revents)
			accept_all(s);
		for (size_t i = 2; i < n; i++) {
			struct ds__conn *c = pc[i];
			if (!pf[i].revents || c->fd < 0)
				continue;
			int dead = 0;
			if (c->st == C_WRITE)
				dead = flush_out(c) || (pf[i].revents & (POLLERR | POLLHUP));
			if (!dead && c->st == C_READ)
				dead = on_input(s, c);
			if (dead) {
				close(c->fd);
				c->fd = -1;
			}
		}
		take_direct(s);
		/* reap closed connections, unless main still works for them */
		for (struct ds__conn **pp = &k->conns; *pp;) {
			struct ds__conn *c = *pp;
			if (c->fd >= 0 && !c->hangup) {
				pp = &c->next;
				continue;
			}
			*pp = c->next;
			k->nconns--;
			if (c->st == C_WAIT)
				c->hangup = 1; /* take_done frees it */
			else
				conn_free(c);
		}
	}
	free(pf);
	free(pc);
	ds__get_release();
	return NULL;
}

int ds__sock_start(struct ds__svc *s)
{
	struct ds__sock *k = calloc(1, sizeof(*k));
	if (!k)
		return -ENOMEM;
	s->sock = k;
	k->lfd = -1;
	k->direct_tail = &k->direct;
	int rc = ds__direct_start(s);
	if (rc)
		return rc;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(k->path, sizeof(k->path), "%s/" DS_SOCK_NAME, s->nodedir);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		ds_error("node %u: '%s/" DS_SOCK_NAME "': path too long for a Unix socket (%zu bytes at most)",
		         s->node, s->nodedir, sizeof(sa.sun_path) - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, k->path, (size_t)n + 1);
	k->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (k->lfd < 0)
		return -errno;
	unlink(k->path); /* a stale socket of a service that was killed */
	/* 0600 from the start: no window where another user could connect */
	mode_t old = umask(0177);
	rc = bind(k->lfd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(k->lfd, 512) < 0) {
		rc = -errno;
		ds_error("node %u: '%s': %s", s->node, k->path, strerror(errno));
		return rc;
	}
	/* the socket thread takes no signals: SIGTERM goes to main */
	sigset_t all, prev;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	rc = -pthread_create(&k->thread, NULL, sock_main, s);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (rc) {
		unlink(k->path);
		return rc;
	}
	k->started = 1;
	return 0;
}

void ds__sock_stop(struct ds__svc *s)
{
	struct ds__sock *k = s->sock;
	if (!k)
		return;
	__atomic_store_n(&s->leaving, 1, __ATOMIC_RELEASE);
	if (k->started) {
		ds__wake(s->wake_sock);
		pthread_join(k->thread, NULL);
	}
	if (k->lfd >= 0) {
		close(k->lfd);
		unlink(k->path);
	}
	ds__direct_stop(s);
	/* readers waiting for an answer see the connection close: EIO at once.
	 * A connection whose reader left while main fetched for it is off the
	 * list and owned by its request. */
	pthread_mutex_lock(&s->mu);
	struct ds__rreq *lists[2] = {s->todo, s->done};
	for (int i = 0; i < 2; i++)
		for (struct ds__rreq *r = lists[i], *next; r; r = next) {
			next = r->next;
			if (r->conn->hangup)
				conn_free(r->conn);
			free(r->buf);
			free(r);
		}
	s->todo = s->done = NULL;
	s->todo_tail = &s->todo;
	pthread_mutex_unlock(&s->mu);
	for (struct ds__conn *c = k->conns, *next; c; c = next) {
		next = c->next;
		conn_free(c);
	}
	free(k);
	s->sock = NULL;
}

size_t ds__rreq_settle(struct ds__rreq *list, int rc)
{
	size_t failed = 0;
	for (struct ds__rreq *r = list; r; r = r->next) {
		if (rc && !r->status)
			r->status = rc;
		if (r->status) {
			free(r->buf);
			r->buf = NULL;
			failed++;
		}
	}
	return failed;
}

void ds__sock_done(struct ds__svc *s, struct ds__rreq *list)
{
	if (!list)
		return;
	pthread_mutex_lock(&s->mu);
	struct ds__rreq *last = list;
	while (last->next)
		last = last->next;
	last->next = s->done;
	s->done = list;
	pthread_mutex_unlock(&s->mu);
	ds__wake(s->wake_sock);
}
