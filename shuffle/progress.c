/* SPDX-License-Identifier: BSD-3-Clause */
/* progress.c: who needs this service to make MPI progress, and when.
 *
 * On shared memory (and over TCP) MPICH's ch4:ucx moves a one-sided get
 * only while the *target* calls into MPI: the get is emulated with active
 * messages that the target's progress engine answers.  Polling MPI all the
 * time would answer at once but burns a core the training needs; sleeping
 * between polls makes every get wait for the target's next poll (a remote
 * read paid up to the 1 ms idle sleep, 150 us median, ms at the 99th
 * percentile, and an idle service still woke 1000 times a second).
 *
 * Instead each service tells a target when it has gets in flight to it:
 *
 *   BEGIN  sent before the first get of a batch to that target (and again
 *          every REFRESH while they keep coming);
 *   END    sent once the requester has had nothing in flight to that target
 *          for END_AFTER (so a stream of reads costs one BEGIN, not one per
 *          read).
 *
 * The socket thread also sends a BEGIN to the holder as it hands a reader's
 * read to main (ds__pw_poke): the target wakes while main does.  When the
 * socket thread fetches reads itself (direct.c), it sends its own BEGIN and
 * END on a second channel (ds__pw_sock): a target polls while either
 * channel of any peer is begun, so that one thread's END never stops the
 * polls the other thread's gets still need.
 *
 * A target polls MPI (sched_yield between polls, see serve.c) while any
 * peer is between BEGIN and END, and at most HOLD after that peer's last
 * BEGIN or refresh (a lost END, a requester that died); otherwise it sleeps
 * until its socket thread, a wake-up or its next agreement is due.  The
 * messages are UDP datagrams of 16 bytes (one host: to 127.0.0.1; others:
 * to the peer's host name, resolved at start), carrying a cookie every rank
 * got from rank 0 over MPI: a datagram without it is dropped, so other
 * users cannot make the service poll.  A lost datagram costs speed, never
 * correctness: the target still polls at its idle period, and the
 * agreement's busy flag still keeps every node polling during a prefetch.
 *
 * When any rank cannot set this up (no UDP, a peer's name does not resolve)
 * every rank falls back to the periodic polls: ds__pw_on() says which.
 *
 * Where a get completes without its target (s->onesided, probed when the
 * window is made: Open MPI's osc/rdma, window.c), no BEGIN is sent for
 * gets, and the agreement's busy flag does not make targets poll either:
 * a target's polls would only take the core the requester's copy needs.
 * BEGIN still wakes a peer for the two-sided messages of the outputs.
 *
 * Peers are MPI ranks of s->comm here (the targets of ds__holder and
 * ds__flush), never staged node numbers: after a loss the service runs on
 * the survivors (failover.c) and rank != node (staged node 3 may be rank 2
 * of 3); a message naming the sender by its node would be dropped as out of
 * range, or taken for another peer. */
#include "svc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PW_MAGIC 0x64737077u /* "dspw" */
#define REFRESH 0.25         /* s between BEGINs while gets keep coming */
#define HOLD 1.0             /* s a target polls after a BEGIN without END */
#define END_AFTER 0.002      /* s without gets to a target before END */

/* BEGIN/END of main's gets, and of the socket thread's own (direct.c): two
 * channels per requester, so that one's END never stops the polls the
 * other still needs */
enum { PW_BEGIN = 1, PW_END = 2, PW_BEGIN_SOCK = 3, PW_END_SOCK = 4 };

struct pw_msg {
	uint32_t magic;
	uint32_t rank; /* the sender, in s->comm */
	uint32_t op;
	uint32_t cookie;
};

struct pw_addr {
	char host[256];
	uint32_t port; /* 0: this rank has no wake socket */
	uint32_t pad;
};

struct ds__pw {
	int fd;
	uint32_t me;              /* this rank in s->comm */
	uint32_t cookie;
	struct sockaddr_in *peer; /* per rank */
	double *sent;             /* per target: last BEGIN sent, 0: not begun */
	double *used;             /* per target: last batch with gets to it */
	double *until;            /* per requester and channel: poll for it until then */
	unsigned nbegun;          /* targets with a BEGIN outstanding */
};

static int pw_socket(int local_only, uint32_t *port)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_in a = {.sin_family = AF_INET};
	a.sin_addr.s_addr = htonl(local_only ? INADDR_LOOPBACK : INADDR_ANY);
	socklen_t al = sizeof(a);
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &al) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

static int resolve(const char *host, uint32_t port, struct sockaddr_in *out)
{
	struct addrinfo hints, *res = NULL;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, NULL, &hints, &res) || !res)
		return -EHOSTUNREACH;
	memcpy(out, res->ai_addr, sizeof(*out));
	out->sin_port = htons((uint16_t)port);
	freeaddrinfo(res);
	return 0;
}

int ds__pw_start(struct ds__svc *s)
{
	int rank;
	MPI_Comm_rank(s->comm, &rank);
	if (getenv("DSTAGE_SERVE_POLL") && strcmp(getenv("DSTAGE_SERVE_POLL"), "0")) {
		/* measurements, or a network that drops UDP: the periodic polls */
		if (rank == 0)
			ds_info("progress: periodic polls (DSTAGE_SERVE_POLL)");
		return 0;
	}
	struct pw_addr me, *all = ds_xcalloc(s->nnodes, sizeof(*all));
	memset(&me, 0, sizeof(me));
	if (gethostname(me.host, sizeof(me.host) - 1) < 0)
		me.host[0] = 0;
	/* the host names first: every node on this host means loopback only */
	char *hosts = ds_xcalloc(s->nnodes, sizeof(me.host));
	MPI_Allgather(me.host, (int)sizeof(me.host), MPI_CHAR, hosts, (int)sizeof(me.host), MPI_CHAR,
	              s->comm);
	int local_only = 1;
	for (uint32_t k = 0; k < s->nnodes; k++)
		if (strncmp(hosts + (size_t)k * sizeof(me.host), me.host, sizeof(me.host)))
			local_only = 0;
	free(hosts);
	struct ds__pw *p = ds_xcalloc(1, sizeof(*p));
	p->me = (uint32_t)rank;
	p->fd = me.host[0] ? pw_socket(local_only, &me.port) : -EHOSTUNREACH;
	if (p->fd < 0)
		me.port = 0;
	/* the cookie: rank 0's, a random one */
	uint32_t cookie = 0;
	if (rank == 0) {
		int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
		if (ufd < 0 || read(ufd, &cookie, sizeof(cookie)) != sizeof(cookie))
			cookie = (uint32_t)getpid() ^ (uint32_t)(ds_now() * 1e6);
		if (ufd >= 0)
			close(ufd);
	}
	MPI_Bcast(&cookie, 1, MPI_UINT32_T, 0, s->comm);
	p->cookie = cookie;
	MPI_Allgather(&me, (int)sizeof(me), MPI_BYTE, all, (int)sizeof(*all), MPI_BYTE, s->comm);
	p->peer = ds_xcalloc(s->nnodes, sizeof(*p->peer));
	int bad = p->fd < 0;
	for (uint32_t k = 0; k < s->nnodes && !bad; k++) {
		if (k == p->me)
			continue;
		if (!all[k].port) {
			bad = 1;
		} else if (!strcmp(all[k].host, me.host)) {
			p->peer[k].sin_family = AF_INET;
			p->peer[k].sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			p->peer[k].sin_port = htons((uint16_t)all[k].port);
		} else if (resolve(all[k].host, all[k].port, &p->peer[k])) {
			ds_info("node %u: host '%s' of rank %u does not resolve: polling MPI instead of wake-ups",
			        s->node, all[k].host, k);
			bad = 1;
		}
	}
	free(all);
	int anybad = 0;
	MPI_Allreduce(&bad, &anybad, 1, MPI_INT, MPI_MAX, s->comm);
	if (anybad) {
		if (p->fd >= 0)
			close(p->fd);
		free(p->peer);
		free(p);
		if (rank == 0)
			ds_info("progress: periodic polls (a node cannot take UDP wake-ups)");
		return 0;
	}
	if (rank == 0)
		ds_info("progress: wake-ups over UDP (%s)", local_only ? "loopback" : "every interface");
	p->sent = ds_xcalloc(s->nnodes, sizeof(double));
	p->used = ds_xcalloc(s->nnodes, sizeof(double));
	p->until = ds_xcalloc(2 * (size_t)s->nnodes, sizeof(double));
	s->pw = p;
	return 0;
}

void ds__pw_stop(struct ds__svc *s)
{
	struct ds__pw *p = s->pw;
	if (!p)
		return;
	close(p->fd);
	free(p->peer);
	free(p->sent);
	free(p->used);
	free(p->until);
	free(p);
	s->pw = NULL;
}

int ds__pw_on(const struct ds__svc *s) { return s->pw != NULL; }

int ds__pw_fd(const struct ds__svc *s) { return s->pw ? s->pw->fd : -1; }

static void send_op(struct ds__svc *s, uint32_t t, uint32_t op)
{
	struct ds__pw *p = s->pw;
	struct pw_msg m = {PW_MAGIC, p->me, op, p->cookie};
	/* best effort: a full socket buffer or an error costs speed only */
	(void)sendto(p->fd, &m, sizeof(m), MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *)&p->peer[t],
	             sizeof(p->peer[t]));
}

void ds__pw_begin(struct ds__svc *s, const uint8_t *targets)
{
	struct ds__pw *p = s->pw;
	if (!p)
		return;
	double now = ds_now();
	for (uint32_t t = 0; t < s->nnodes; t++) {
		if (!targets[t] || t == p->me)
			continue;
		p->used[t] = now;
		if (p->sent[t] && now - p->sent[t] < REFRESH)
			continue;
		if (!p->sent[t])
			p->nbegun++;
		p->sent[t] = now;
		send_op(s, t, PW_BEGIN);
	}
}

void ds__pw_sock(struct ds__svc *s, uint32_t t, int begin)
{
	if (s->pw && !s->onesided && t != s->pw->me) /* onesided: window.c */
		send_op(s, t, begin ? PW_BEGIN_SOCK : PW_END_SOCK);
}

void ds__pw_poke(struct ds__svc *s, uint32_t id)
{
	struct ds__pw *p = s->pw;
	MPI_Aint disp;
	if (!p || s->onesided) /* the get needs no poll of its target (window.c) */
		return;
	int t = ds__holder(s, id, &disp);
	if (t >= 0)
		send_op(s, (uint32_t)t, PW_BEGIN);
}

double ds__pw_idle(struct ds__svc *s)
{
	struct ds__pw *p = s->pw;
	if (!p || !p->nbegun)
		return 1e9;
	double now = ds_now(), next = 1e9;
	for (uint32_t t = 0; t < s->nnodes; t++) {
		if (!p->sent[t])
			continue;
		double due = p->used[t] + END_AFTER;
		if (now >= due) {
			send_op(s, t, PW_END);
			p->sent[t] = 0;
			p->nbegun--;
		} else if (due - now < next) {
			next = due - now;
		}
	}
	return next;
}

int ds__pw_take(struct ds__svc *s)
{
	struct ds__pw *p = s->pw;
	if (!p)
		return 0;
	struct pw_msg m;
	int n = 0;
	double now = ds_now();
	for (;;) {
		ssize_t r = recv(p->fd, &m, sizeof(m), MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		if (r != (ssize_t)sizeof(m) || m.magic != PW_MAGIC || m.cookie != p->cookie ||
		    m.rank >= s->nnodes || m.rank == p->me || m.op < PW_BEGIN || m.op > PW_END_SOCK)
			continue;
		int chan = m.op >= PW_BEGIN_SOCK;
		p->until[2 * m.rank + chan] = m.op == PW_BEGIN || m.op == PW_BEGIN_SOCK ? now + HOLD : 0;
		n++;
	}
	return n;
}

int ds__pw_wanted(const struct ds__svc *s)
{
	const struct ds__pw *p = s->pw;
	if (!p)
		return 0;
	double now = ds_now();
	for (uint32_t k = 0; k < 2 * s->nnodes; k++)
		if (p->until[k] > now)
			return 1;
	return 0;
}
