/* SPDX-License-Identifier: BSD-3-Clause */
/* write.c: write-once outputs under MOUNT/SUBDIR (dsout.h, docs/outputs.md).
 *
 * The outputs subtree is a real directory of this node (AREA/ns) that only
 * the node service changes.  Path resolution (path.c) hands every name
 * under MOUNT/SUBDIR to this file: it becomes AREA/ns/<rel> (".." applied
 * lexically: it never climbs out of ns, only back to the mount), so stat,
 * readdir, reads and mmap are the kernel's own on the node's files.  What
 * changes the namespace goes to the service (NODEDIR/osock):
 *
 *   open for writing  CREATE takes the path for this writer (EEXIST for a
 *                     second one anywhere in the job) and gets a private
 *                     file AREA/w/<token>; the program's descriptor is a
 *                     real one on it, so write, pwrite, writev, mmap,
 *                     ftruncate, fsync, fstat, flock are the kernel's.  An
 *                     OFD write lock on one far byte marks "still open";
 *                     it follows the open file across dup, fork and exec
 *                     and goes with the last descriptor (close or exit).
 *   close, fclose     CLOSE: when no descriptor holds the lock the service
 *                     publishes the output to every node before answering.
 *                     A writer that exits or execs without closing is
 *                     published when the service sees the lock gone (its
 *                     sweep, or the next OPEN of an output).
 *   open for reading  OPEN: a file held by another node is fetched first.
 *   mkdir, rmdir, unlink, rename   one request each, applied on every node.
 *
 * The staged dataset stays read-only (rofs.c); symlinks, hard links,
 * special files and truncate by name are refused in the outputs too. */
#include "shim.h"
#include "dsout.h"
#include "dssock.h"
#include "rawsys.h"

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/un.h>

_Atomic int ds__out_cwd;
static void out_atfork_child(void);
static int w_own(const char *rel, size_t rl, char *buf, size_t size);
_Atomic unsigned ds__out_nw;

static struct {
	pthread_once_t once;
	int on;
	char sub[NAME_MAX + 1];
	size_t sublen;
	char ns[PATH_MAX]; /* AREA/ns */
	size_t nslen;
	char w[PATH_MAX]; /* AREA/w */
	char sock[PATH_MAX];
} oc = {.once = PTHREAD_ONCE_INIT};

/* A directory the service made: ours alone (not a symlink, our uid, no
 * access for others). */
static int private_dir(const char *p)
{
	struct stat st;
	return DS__REAL(lstat)(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
	       !(st.st_mode & 077);
}

static void conf_load(void)
{
	char path[PATH_MAX], buf[2 * PATH_MAX + 64];
	if (!ds__g.active)
		return;
	if (snprintf(path, sizeof(path), "%s/" DS_OUT_CONF, ds__g.nodedir) >= (int)sizeof(path))
		return;
	int fd = DS__REAL(open)(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct stat st;
	ssize_t n = -1;
	if (DS__REAL(fstat)(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() &&
	    !(st.st_mode & 022))
		n = DS__REAL(read)(fd, buf, sizeof(buf) - 1);
	DS__REAL(close)(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	char *nl = strchr(buf, '\n');
	if (!nl)
		return;
	*nl = 0;
	char *area = nl + 1, *nl2 = strchr(area, '\n');
	if (!nl2)
		return;
	*nl2 = 0;
	size_t sl = strlen(buf), al = strlen(area);
	const char *why;
	if (!sl || sl > NAME_MAX || strchr(buf, '/') || ds_name_check(buf, sl, &why) ||
	    ds_name_reserved(buf, sl, &why) || area[0] != '/' || al + 8 >= PATH_MAX)
		return;
	pthread_atfork(NULL, NULL, out_atfork_child);
	memcpy(oc.sub, buf, sl + 1);
	oc.sublen = sl;
	snprintf(oc.ns, sizeof(oc.ns), "%s/" DS_OUT_NS, area);
	oc.nslen = strlen(oc.ns);
	snprintf(oc.w, sizeof(oc.w), "%s/" DS_OUT_W, area);
	if (snprintf(oc.sock, sizeof(oc.sock), "%s/" DS_OUT_SOCK, ds__g.nodedir) >= (int)sizeof(oc.sock))
		return;
	if (!private_dir(area) || !private_dir(oc.ns) || !private_dir(oc.w))
		return;
	oc.on = 1;
}

static int out_on(void)
{
	if (!ds__g.active)
		return 0;
	int e = errno; /* errno is left untouched on success (docs/design.md section 5) */
	pthread_once(&oc.once, conf_load);
	errno = e;
	return oc.on;
}

int ds__out_match(const char *c, size_t cl)
{
	return out_on() && cl == oc.sublen && !memcmp(c, oc.sub, cl);
}

/* The rest of a walk that entered MOUNT/SUBDIR: *pp points after SUBDIR.
 * Components are applied lexically ("." dropped, ".." pops); a ".." above
 * SUBDIR goes back to the mount root: *pp moves past it and 1 is returned
 * (the walk goes on in the dataset).  Else r gets the real name, 0. */
int ds__out_walk(char **pp, struct ds__res *r)
{
	char rel[PATH_MAX];
	size_t rl = 0;
	char *p = *pp;
	int trail = 0;
	for (;;) {
		while (*p == '/') {
			p++;
			trail = 1;
		}
		if (!*p)
			break;
		trail = 0;
		char *c = p;
		while (*p && *p != '/')
			p++;
		size_t cl = p - c;
		if (cl > NAME_MAX)
			return -ENAMETOOLONG;
		if (cl == 1 && c[0] == '.')
			continue;
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			if (!rl) {
				*pp = p;
				return 1;
			}
			while (rl && rel[rl - 1] != '/')
				rl--;
			if (rl)
				rl--;
			continue;
		}
		if (rl + 1 + cl >= sizeof(rel))
			return -ENAMETOOLONG;
		if (rl)
			rel[rl++] = '/';
		memcpy(rel + rl, c, cl);
		rl += cl;
	}
	if (oc.nslen + 1 + rl + 2 >= sizeof(r->buf))
		return -ENAMETOOLONG;
	if (DS__UNLIKELY(atomic_load_explicit(&ds__out_nw, memory_order_relaxed)) && rl && !trail) {
		/* a writer sees the file it writes by its name (HDF5 lstat's
		 * it after the create); nobody else does before its close */
		char own[PATH_MAX];
		if (w_own(rel, rl, own, sizeof(own))) {
			size_t ol = strlen(own);
			if (ol + 1 + rl + 1 >= sizeof(r->buf))
				return -ENAMETOOLONG;
			memcpy(r->buf, own, ol + 1);
			/* the name relative to the outputs after it, for rel_of */
			memcpy(r->buf + ol + 1, rel, rl);
			r->buf[ol + 1 + rl] = 0;
			r->orel = r->buf + ol + 1;
			r->ours = 0;
			r->out = 2;
			r->rdirfd = AT_FDCWD;
			r->rpath = r->buf;
			return 0;
		}
	}
	memcpy(r->buf, oc.ns, oc.nslen);
	size_t n = oc.nslen;
	r->orel = r->buf + n + 1;
	if (rl) {
		r->buf[n++] = '/';
		memcpy(r->buf + n, rel, rl);
		n += rl;
	} else {
		r->orel = r->buf + n; /* "" : the outputs root */
	}
	if (trail && rl)
		r->buf[n++] = '/';
	r->buf[n] = 0;
	r->ours = 0;
	r->out = 1;
	r->rdirfd = AT_FDCWD;
	r->rpath = r->buf;
	return 0;
}

/* The relative name (r->orel) without a trailing '/' into out. */
static int rel_of(const struct ds__res *r, char *out)
{
	size_t l = strlen(r->orel);
	while (l && r->orel[l - 1] == '/')
		l--;
	if (l >= PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(out, r->orel, l);
	out[l] = 0;
	return 0;
}

/* ---- real directories inside the outputs ----------------------------------
 * A relative name from the real cwd or a real directory descriptor inside
 * AREA/ns is made absolute under the mount again, so that a creation through
 * it still goes to the service (tar -C, cd into the outputs).  Directory
 * descriptors opened here are marked; a mark is checked against the
 * descriptor's name before use. */
#define OUT_MAXDFD 4096
static _Atomic uint64_t dfd_bits[OUT_MAXDFD / 64];

static void dfd_mark(int fd, int on)
{
	if (fd < 0 || fd >= OUT_MAXDFD)
		return;
	uint64_t b = 1ull << (fd % 64);
	if (on)
		atomic_fetch_or(&dfd_bits[fd / 64], b);
	else
		atomic_fetch_and(&dfd_bits[fd / 64], ~b);
}

int ds__out_dirfd(int fd)
{
	return fd >= 0 && fd < OUT_MAXDFD &&
	       (atomic_load_explicit(&dfd_bits[fd / 64], memory_order_relaxed) >> (fd % 64)) & 1;
}

/* dirfd (AT_FDCWD: the cwd) is a real directory in AREA/ns: MOUNT/SUBDIR/<its
 * place>/path into work (PATH_MAX): 1.  0 when it is not. */
static int out_rel(int dirfd, const char *path, char *work);
int ds__out_rel(int dirfd, const char *path, char *work)
{
	int e = errno;
	int rc = out_rel(dirfd, path, work);
	errno = e;
	return rc;
}

static int out_rel(int dirfd, const char *path, char *work)
{
	char dir[PATH_MAX];
	if (!out_on())
		return 0;
	if (dirfd == AT_FDCWD) {
		if (!DS__REAL(getcwd)(dir, sizeof(dir)))
			return 0;
	} else {
		char link[40];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
		ssize_t n = DS__REAL(readlink)(link, dir, sizeof(dir) - 1);
		if (n <= 0)
			return 0;
		dir[n] = 0;
	}
	size_t dl = strlen(dir);
	if (dl < oc.nslen || memcmp(dir, oc.ns, oc.nslen) || (dir[oc.nslen] && dir[oc.nslen] != '/')) {
		if (dirfd != AT_FDCWD)
			dfd_mark(dirfd, 0); /* a stale mark */
		return 0;
	}
	int n = snprintf(work, PATH_MAX, "%s/%s%s/%s", ds__g.mount, oc.sub, dir + oc.nslen, path);
	return n > 0 && n < PATH_MAX;
}

/* ---- the service ------------------------------------------------------- */
/* One request, one answer.  0 with *resp, or -errno (-EIO: no service).
 * keep: the connection is left open in *keep (a CREATE: its writer's
 * confirmation goes on it, confirm()). */
static int ask(struct ds_out_req *q, struct ds_out_resp *a, int *keep)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(oc.sock) >= sizeof(sa.sun_path))
		return -EIO;
	strcpy(sa.sun_path, oc.sock);
	double deadline = ds_now() + ds__g.timeout_ms / 1000.0;
	int fd, rc = 0;
	for (int attempt = 0;; attempt++) {
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0)
			return -errno;
		ds__fd_private(fd, 1);
		if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS)
			break;
		int e = errno;
		ds__fd_private(fd, 0);
		DS__REAL(close)(fd);
		/* no service (yet): after a lost node one is restarted on the
		 * survivors, as for reads (io/failover.c).  Nothing was sent, so
		 * asking again is safe for every request. */
		if ((e == ENOENT || e == ECONNREFUSED) && ds__failover_retry(deadline, attempt))
			continue;
		return -EIO;
	}
	struct pollfd pf = {fd, POLLOUT, 0};
	poll(&pf, 1, ds__g.timeout_ms);
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	int so = 0;
	socklen_t sl = sizeof(so);
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0 || so ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid())
		rc = -EIO;
	q->magic = DS_OUT_MAGIC;
	if (!rc)
		rc = ds_sock_xfer(fd, q, sizeof(*q), 1, deadline);
	if (!rc)
		rc = ds_sock_xfer(fd, a, sizeof(*a), 0, deadline);
	if (rc)
		rc = rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	else if (a->magic != DS_OUT_MAGIC)
		rc = -EIO;
	if (keep && !rc && !a->status) {
		*keep = fd;
		return 0;
	}
	ds__fd_private(fd, 0);
	DS__REAL(close)(fd);
	return rc;
}

/* The second half of a create, on its connection: the writer has its file
 * and its lock.  One way, no answer to wait for: the service takes these
 * bytes as the confirmation (they reach it even if the writer closes at
 * once); a connection closed without them, a writer that gave up (its
 * DSTAGE_TIMEOUT passed) or died, rolls the create back (docs/outputs.md:
 * an open that failed never publishes anything).  0 or -EIO. */
static int confirm(int fd, uint64_t token)
{
	struct ds_out_req *q = calloc(1, sizeof(*q));
	int rc = q ? 0 : -ENOMEM;
	if (q) {
		q->magic = DS_OUT_MAGIC;
		q->op = DS_OUT_WATCH;
		q->token = token;
		rc = ds_sock_xfer(fd, q, sizeof(*q), 1, ds_now() + ds__g.timeout_ms / 1000.0) ? -EIO
		                                                                              : 0;
		free(q);
	}
	ds__fd_private(fd, 0);
	DS__REAL(close)(fd);
	return rc;
}

static int simple_keep(enum ds_out_op op, const char *rel, const char *rel2, int flags,
                       unsigned mode, uint64_t token, uint64_t *tok_out, int *keep,
                       struct ds_out_resp *resp)
{
	struct ds_out_req *q = malloc(sizeof(*q));
	if (!q)
		return -ENOMEM;
	memset(q, 0, sizeof(*q));
	q->op = op;
	q->flags = flags;
	q->mode = mode;
	q->token = token;
	if (rel)
		snprintf(q->path, sizeof(q->path), "%s", rel);
	if (rel2)
		snprintf(q->path2, sizeof(q->path2), "%s", rel2);
	struct ds_out_resp a;
	int rc = ask(q, &a, keep);
	free(q);
	if (rc) /* no answer within DSTAGE_TIMEOUT: EIO, as for reads */
		return rc == -ETIMEDOUT ? -EIO : rc;
	if (tok_out)
		*tok_out = a.token;
	if (resp)
		*resp = a;
	return a.status;
}

static int simple(enum ds_out_op op, const char *rel, const char *rel2, int flags, unsigned mode,
                  uint64_t token, uint64_t *tok_out)
{
	return simple_keep(op, rel, rel2, flags, mode, token, tok_out, NULL, NULL);
}

/* rename, unlink, mkdir, rmdir: never applied after the call failed
 * (docs/outputs.md).  Node 0 first checks it (DS_OUT_F_PREPARE, within
 * DSTAGE_TIMEOUT: EIO applies nothing, ever, as the service applies
 * only what comes again on this connection); then the same request on
 * the same connection is the point of no return, so its answer is
 * waited for as long as the service is there (a hard NFS mount's way):
 * the caller is told what happened, never EIO for a change that lands. */
static int ns_change(enum ds_out_op op, const char *rel, const char *rel2, int flags,
                     unsigned mode)
{
	int fd = -1;
	int rc = simple_keep(op, rel, rel2, flags | DS_OUT_F_PREPARE, mode, 0, NULL, &fd, NULL);
	if (rc || fd < 0)
		return rc;
	struct ds_out_req *q = calloc(1, sizeof(*q));
	struct ds_out_resp a;
	if (q) {
		q->magic = DS_OUT_MAGIC;
		q->op = op;
		q->flags = flags;
		q->mode = mode;
		snprintf(q->path, sizeof(q->path), "%s", rel);
		if (rel2)
			snprintf(q->path2, sizeof(q->path2), "%s", rel2);
		rc = ds_sock_xfer(fd, q, sizeof(*q), 1, 0);
		if (!rc)
			rc = ds_sock_xfer(fd, &a, sizeof(a), 0, 0);
		/* the service gone (its node lost): what it did is what the
		 * restarted one or the recovery shows (docs/failover.md) */
		rc = rc ? -EIO : a.magic != DS_OUT_MAGIC ? -EIO : a.status;
		free(q);
	} else {
		rc = -ENOMEM; /* nothing sent again: nothing applied */
	}
	ds__fd_private(fd, 0);
	DS__REAL(close)(fd);
	return rc;
}

/* ---- the writers' descriptors ------------------------------------------ */
struct wfd {
	int fd; /* -1: being closed (its close waits for the publish) */
	pid_t pid;
	uint64_t token;
	uint64_t serial;
	int gone;  /* being closed, and published: its name is the published file */
	char *rel; /* its name (the writer sees its own file by name) */
};
static uint64_t wserial;
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static struct wfd *wtab;
static size_t wlen, wcap;

static char *w_rel_of(uint64_t token);
static int w_add(int fd, uint64_t token, const char *rel)
{
	pthread_mutex_lock(&wlock);
	if (wlen == wcap) {
		size_t nc = wcap ? 2 * wcap : 16;
		struct wfd *n = realloc(wtab, nc * sizeof(*n));
		if (!n) {
			pthread_mutex_unlock(&wlock);
			return -ENOMEM;
		}
		wtab = n;
		wcap = nc;
	}
	/* a number reused after a raw close: the old entry is stale */
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].fd == fd) {
			free(wtab[i].rel);
			wtab[i] = wtab[--wlen];
			atomic_fetch_sub(&ds__out_nw, 1);
			break;
		}
	char *rc = rel ? strdup(rel) : w_rel_of(token);
	wtab[wlen++] = (struct wfd){fd, getpid(), token, ++wserial, 0, rc};
	atomic_fetch_add(&ds__out_nw, 1);
	pthread_mutex_unlock(&wlock);
	return 0;
}

/* (wlock held) a copy of the name of token's output, or NULL */
static char *w_rel_of(uint64_t token)
{
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].token == token && wtab[i].rel)
			return strdup(wtab[i].rel);
	return NULL;
}

/* (wlock held) This process writes rel: 1 and its token. */
static int w_own_locked(const char *rel, size_t rl, uint64_t *token)
{
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].rel && !wtab[i].gone && strlen(wtab[i].rel) == rl &&
		    !memcmp(wtab[i].rel, rel, rl)) {
			*token = wtab[i].token;
			return 1;
		}
	return 0;
}

/* token's output is published (its publish waited for): descriptors still
 * being closed no longer lead its name to the writer's file. */
static void w_published(uint64_t token)
{
	simple(DS_OUT_CLOSE, NULL, NULL, 0, 0, token, NULL); /* waits for the publish */
	pthread_mutex_lock(&wlock);
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].token == token && wtab[i].fd < 0)
			wtab[i].gone = 1;
	pthread_mutex_unlock(&wlock);
}

/* This process writes rel: the name of its private file into buf (1). */
static int w_own(const char *rel, size_t rl, char *buf, size_t size)
{
	uint64_t token;
	pthread_mutex_lock(&wlock);
	int found = w_own_locked(rel, rl, &token);
	pthread_mutex_unlock(&wlock);
	return found &&
	       snprintf(buf, size, "%s/%016llx", oc.w, (unsigned long long)token) < (int)size;
}

/* Creates of one name by threads of this process go one at a time: a
 * thread that opens a name another thread of this process is creating
 * waits for that create, then opens the file as the writer's own
 * (own_reopen) instead of getting a second writer's EEXIST.  One writer per
 * path is one process (docs/outputs.md). */
struct wcre {
	struct wcre *next;
	const char *rel;
};
static struct wcre *wcreating;
static pthread_cond_t wcond = PTHREAD_COND_INITIALIZER;

static void own_res(struct ds__res *r, const char *rel, uint64_t token);
static void ns_res(struct ds__res *r, const char *rel);

/* 1: rel is this process's output now (r names its file, out == 2); 0:
 * this thread creates it (me marks it until create_done). */
static int create_turn(struct ds__res *r, const char *rel, struct wcre *me)
{
	uint64_t token;
	pthread_mutex_lock(&wlock);
	for (;;) {
		struct wcre *c = wcreating;
		while (c && strcmp(c->rel, rel))
			c = c->next;
		if (!c)
			break;
		pthread_cond_wait(&wcond, &wlock);
	}
	int own = w_own_locked(rel, strlen(rel), &token);
	if (!own) {
		me->rel = rel;
		me->next = wcreating;
		wcreating = me;
	}
	pthread_mutex_unlock(&wlock);
	if (own)
		own_res(r, rel, token);
	return own;
}

static void create_done(struct wcre *me)
{
	pthread_mutex_lock(&wlock);
	for (struct wcre **pp = &wcreating; *pp; pp = &(*pp)->next)
		if (*pp == me) {
			*pp = me->next;
			break;
		}
	pthread_cond_broadcast(&wcond);
	pthread_mutex_unlock(&wlock);
}

static int w_token(int fd, uint64_t *token)
{
	int found = 0;
	pthread_mutex_lock(&wlock);
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].fd == fd) {
			*token = wtab[i].token;
			found = 1;
			break;
		}
	pthread_mutex_unlock(&wlock);
	return found;
}

/* Forget fd: 1 and *token when it was a writer's. */
static int w_take(int fd, uint64_t *token)
{
	int found = 0;
	pthread_mutex_lock(&wlock);
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].fd == fd) {
			*token = wtab[i].token;
			free(wtab[i].rel);
			wtab[i] = wtab[--wlen];
			atomic_fetch_sub(&ds__out_nw, 1);
			found = 1;
			break;
		}
	pthread_mutex_unlock(&wlock);
	return found;
}

/* The program closes fd, a writer's: while its close (and the publish it
 * may make) is under way the name still leads to the writer's own file, so
 * that another thread's open of it in the meantime is the writer's own
 * (own_reopen), not a second writer's EEXIST.  The entry's serial (0: not a
 * writer's) and *token. */
static uint64_t w_close_begin(int fd, uint64_t *token)
{
	uint64_t serial = 0;
	pthread_mutex_lock(&wlock);
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].fd == fd) {
			*token = wtab[i].token;
			serial = wtab[i].serial;
			wtab[i].fd = -1;
			break;
		}
	pthread_mutex_unlock(&wlock);
	return serial;
}

static void w_close_end(uint64_t serial)
{
	pthread_mutex_lock(&wlock);
	for (size_t i = 0; i < wlen; i++)
		if (wtab[i].serial == serial) {
			free(wtab[i].rel);
			wtab[i] = wtab[--wlen];
			atomic_fetch_sub(&ds__out_nw, 1);
			break;
		}
	pthread_mutex_unlock(&wlock);
}

static mode_t cur_umask(void)
{
	/* umask(2) is a set: read it from /proc instead (no race with threads) */
	char buf[1024];
	int fd = DS__REAL(open)("/proc/self/status", O_RDONLY | O_CLOEXEC);
	mode_t m = 022;
	if (fd < 0)
		return m;
	ssize_t n = DS__REAL(read)(fd, buf, sizeof(buf) - 1);
	DS__REAL(close)(fd);
	if (n > 0) {
		buf[n] = 0;
		char *u = strstr(buf, "Umask:");
		if (u)
			m = (mode_t)strtoul(u + 6, NULL, 8) & 0777;
	}
	return m;
}

/* A placeholder of an output held by another node has no bytes: never let
 * a reader take its zeros for the file when the service cannot fetch it. */
static int placeholder(int fd)
{
	struct stat st;
	return DS__REAL(fstat)(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
	       st.st_blocks == 0;
}

/* A write lock on one free byte of the lock range for the open file fd
 * (dsout.h): each open file of a writer's holds its own.  0 or -errno. */
static int lock_slot(int fd)
{
	for (int k = 0; k < DS_OUT_LOCK_SLOTS; k++) {
		struct flock lk = {.l_type = F_WRLCK,
		                   .l_whence = SEEK_SET,
		                   .l_start = DS_OUT_LOCK_OFF + k,
		                   .l_len = 1};
		if (DS__REAL(fcntl)(fd, F_OFD_SETLK, &lk) == 0)
			return 0;
		if (errno != EAGAIN && errno != EACCES)
			return -errno;
	}
	return -EMFILE; /* that many opens of one output at once */
}

/* The token of the writer's own file r names (AREA/w/<token>): 1. */
static int own_token(const struct ds__res *r, uint64_t *token)
{
	const char *tk = strrchr(r->rpath, '/');
	char *end;
	if (!tk)
		return 0;
	*token = strtoull(tk + 1, &end, 16);
	return !*end && end != tk + 1;
}

/* r: the writer's own file of rel, as ds__out_walk makes it (out == 2). */
static void own_res(struct ds__res *r, const char *rel, uint64_t token)
{
	int n = snprintf(r->buf, sizeof(r->buf), "%s/%016llx", oc.w, (unsigned long long)token);
	size_t rl = strlen(rel);
	/* fits: rel came from r->buf after AREA/ns, longer than AREA/w/<token> less 16 */
	if (n < 0 || (size_t)n + 1 + rl + 1 > sizeof(r->buf)) {
		ns_res(r, rel);
		return;
	}
	memcpy(r->buf + n + 1, rel, rl + 1);
	r->orel = r->buf + n + 1;
	r->ours = 0;
	r->out = 2;
	r->rdirfd = AT_FDCWD;
	r->rpath = r->buf;
}

/* r: rel in AREA/ns (the name every node sees), as ds__out_walk makes it. */
static void ns_res(struct ds__res *r, const char *rel)
{
	size_t rl = strlen(rel);
	memcpy(r->buf, oc.ns, oc.nslen);
	r->buf[oc.nslen] = '/';
	memcpy(r->buf + oc.nslen + 1, rel, rl + 1); /* fits: rel came from r->buf */
	r->orel = r->buf + oc.nslen + 1;
	r->ours = 0;
	r->out = 1;
	r->rdirfd = AT_FDCWD;
	r->rpath = r->buf;
}

/* The writer opens its own output again, for writing, while it writes it
 * (HDF5 does when a file it has open is opened again; a shell's `exec >f`
 * then `>>f`; a library that reopens).  The same file, as on any file
 * system, and it stays one output: the new open file takes a lock byte of
 * its own and the output is published when the last descriptor of all of
 * them goes, so no byte can change after the publish.  O_TRUNC truncates
 * it (only once the service has said it is still being written).  The fd,
 * -ESTALE when it was published meanwhile, or -errno. */
static int own_reopen(const struct ds__res *r, const char *rel, int flags)
{
	uint64_t token;
	if (!own_token(r, &token))
		return -EIO;
	int fl = (flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_DIRECTORY | O_NOCTTY)) | O_NOFOLLOW;
	if ((flags & O_ACCMODE) == O_RDONLY) /* O_RDONLY|O_TRUNC: the lock needs a writable file */
		fl = (fl & ~O_ACCMODE) | O_RDWR;
	int fd = DS__REAL(openat)(AT_FDCWD, r->rpath, fl, 0);
	if (fd < 0 && errno == ENOENT) {
		/* published meanwhile (renamed into AREA/ns): let the publish
		 * end, then it is the published file's turn */
		w_published(token);
		return -ESTALE;
	}
	if (fd < 0)
		return -errno;
	struct stat ws;
	if (DS__REAL(fstat)(fd, &ws) < 0 || ws.st_uid != geteuid()) {
		/* only the service makes files in the area: another user's is
		 * a directory swapped on the way (docs/outputs.md "Privacy") */
		DS__REAL(close)(fd);
		return -EIO;
	}
	/* known to this process's other threads before the lock that lets a
	 * last close of another descriptor go by without publishing */
	int rc = w_add(fd, token, rel);
	/* tests: the output published between this open and its lock (t/2210) */
	ds_fault("shim.out_reopen", (int)ds__g.node);
	if (!rc)
		rc = lock_slot(fd);
	/* every byte taken: 64 opens at once, or the service's watcher holding
	 * the range for an instant (the last other descriptor was just
	 * closed by another thread): ask again a few times */
	for (int i = 0; rc == -EMFILE && i < 20; i++) {
		usleep(1000);
		rc = lock_slot(fd);
	}
	/* the service checks, under the lock that orders it with the publish,
	 * that the output is still being written */
	if (!rc)
		rc = simple(DS_OUT_WATCH, NULL, NULL, 0, 0, token, NULL);
	if (!rc && (flags & O_TRUNC) && ftruncate(fd, 0) < 0)
		rc = -errno;
	if (rc) {
		uint64_t t;
		w_take(fd, &t);
		DS__REAL(close)(fd);
		if (rc == -ESTALE) /* let its publish end first */
			w_published(token);
		return rc == -ETIMEDOUT ? -EIO : rc;
	}
	return fd;
}

static int out_create(const char *rel, int flags, mode_t mode);
static int out_open(struct ds__res *r, int flags, mode_t mode)
{
	char rel[PATH_MAX];
	int rc = rel_of(r, rel);
	if (rc)
		return ds__fail(-rc);
	int acc = flags & O_ACCMODE;
	int writing = acc != O_RDONLY || (flags & (O_CREAT | O_TRUNC));
	if ((flags & O_TMPFILE) == O_TMPFILE)
		return ds__fail(EOPNOTSUPP);
	if (r->out == 2) { /* our own output, still being written */
		if ((flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL))
			return ds__fail(EEXIST);
		if (writing && !(flags & O_PATH)) {
			int fd = own_reopen(r, rel, flags);
			if (fd != -ESTALE)
				return fd < 0 ? ds__fail(-fd) : ds__fd_fresh(fd);
			/* published meanwhile (its last other descriptor was
			 * closed by another thread): open the published file,
			 * a new version, as any writer would */
			ns_res(r, rel);
			return out_open(r, flags, mode);
		}
		int fd = DS__REAL(openat)(AT_FDCWD, r->rpath, flags & ~(O_CREAT | O_EXCL | O_TRUNC), 0);
		struct stat ws;
		if (fd >= 0 && (DS__REAL(fstat)(fd, &ws) < 0 || ws.st_uid != geteuid())) {
			DS__REAL(close)(fd); /* not the service's: see own_reopen */
			return ds__fail(EIO);
		}
		if (fd < 0 && errno == ENOENT) {
			/* published meanwhile: once it is, read the published file */
			uint64_t token;
			if (own_token(r, &token))
				w_published(token);
			ns_res(r, rel);
			return out_open(r, flags, mode);
		}
		return fd < 0 ? -1 : ds__fd_fresh(fd);
	}
	if (!writing || (flags & O_PATH)) {
		if (!(flags & O_PATH) && rel[0]) {
			struct stat st;
			if (DS__REAL(stat)(r->rpath, &st) < 0 || !S_ISDIR(st.st_mode)) {
				rc = simple(DS_OUT_OPEN, rel, NULL, 0, 0, 0, NULL);
				if (rc && rc != -EIO && rc != -ETIMEDOUT)
					return ds__fail(-rc);
			}
		}
		int fd = DS__REAL(openat)(AT_FDCWD, r->rpath, flags, mode);
		if (fd < 0)
			return -1;
		if (!(flags & O_PATH) && placeholder(fd)) {
			DS__REAL(close)(fd);
			return ds__fail(EIO);
		}
		struct stat st;
		if (DS__REAL(fstat)(fd, &st) < 0 || st.st_uid != geteuid()) {
			/* only the service (this user) makes files in the area:
			 * another user's is a directory swapped on the way */
			DS__REAL(close)(fd);
			return ds__fail(EIO);
		}
		if ((flags & O_DIRECTORY) || (DS__REAL(fstat)(fd, &st) == 0 && S_ISDIR(st.st_mode)))
			dfd_mark(fd, 1);
		return ds__fd_fresh(fd);
	}
	if (!rel[0])
		return ds__fail(EISDIR);
	struct stat st;
	if (DS__REAL(stat)(r->rpath, &st) == 0 && S_ISDIR(st.st_mode))
		return ds__fail(EISDIR);
	if (r->rpath[strlen(r->rpath) - 1] == '/')
		return ds__fail(EISDIR);
	struct wcre me;
	if (create_turn(r, rel, &me))
		return out_open(r, flags, mode); /* this process's own file now */
	int fd = out_create(rel, flags, mode);
	create_done(&me);
	return fd;
}

/* The create itself (out_open): the fd, or -1 with errno. */
static int out_create(const char *rel, int flags, mode_t mode)
{
	int rc, acc = flags & O_ACCMODE;
	uint64_t token = 0;
	int cfd = -1; /* the create's connection: closed without confirm(), it is rolled back */
	struct ds_out_resp ra;
	rc = simple_keep(DS_OUT_CREATE, rel, NULL, flags, mode & 07777 & ~cur_umask(), 0, &token,
	                 &cfd, &ra);
	if (rc)
		return ds__fail(-rc);
	char wp[PATH_MAX];
	if (snprintf(wp, sizeof(wp), "%s/%016llx", oc.w, (unsigned long long)token) >=
	    (int)sizeof(wp)) {
		ds__fd_private(cfd, 0);
		DS__REAL(close)(cfd);
		return ds__fail(ENAMETOOLONG);
	}
	int fl = (flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_DIRECTORY | O_NOFOLLOW | O_NOCTTY)) | O_NOFOLLOW;
	if (acc == O_RDONLY) /* O_RDONLY|O_TRUNC: the lock needs a writable file */
		fl = (fl & ~O_ACCMODE) | O_RDWR;
	int fd = DS__REAL(openat)(AT_FDCWD, wp, fl, 0);
	int e = errno == ENOENT ? EIO : errno; /* not the service's file: never "no such file" */
	if (fd >= 0) {
		uint64_t t;
		struct stat ws;
		int lrc = 0;
		if (DS__REAL(fstat)(fd, &ws) < 0 || (uint64_t)ws.st_dev != ra.dev ||
		    (uint64_t)ws.st_ino != ra.ino)
			/* not the file the service made (it uses its area by
			 * descriptor; this path went through a directory
			 * swapped meanwhile): not a byte into it */
			lrc = -EIO;
		else if (!(lrc = lock_slot(fd)))
			lrc = w_add(fd, token, rel);
		if (lrc) {
			e = lrc == -ESTALE || lrc == -ETIMEDOUT ? EIO : -lrc;
			DS__REAL(close)(fd);
			fd = -1;
		} else if (confirm(cfd, token)) {
			cfd = -1;
			e = EIO;
			w_take(fd, &t);
			DS__REAL(close)(fd);
			fd = -1;
		} else {
			cfd = -1;
		}
	}
	if (fd < 0) {
		/* give the path back, publish nothing: the connection closed
		 * without the confirmation */
		if (cfd >= 0) {
			ds__fd_private(cfd, 0);
			DS__REAL(close)(cfd);
		}
		return ds__fail(e);
	}
	return ds__fd_fresh(fd);
}

/* The program closes fd (close wrapper, before the real close). */
int ds__out_close(int fd)
{
	int e0 = errno;
	uint64_t token, serial = w_close_begin(fd, &token);
	if (!serial) {
		dfd_mark(fd, 0);
		return DS__REAL(close)(fd);
	}
	int rc = DS__REAL(close)(fd);
	int e = errno;
	int src = simple(DS_OUT_CLOSE, NULL, NULL, 0, 0, token, NULL);
	w_close_end(serial);
	if (src && rc == 0) {
		/* the close worked but the output could not be kept (no space,
		 * a failed publish, the service gone): the writer must know, as
		 * NFS reports it at close */
		return ds__fail(src == -ETIMEDOUT ? EIO : -src);
	}
	errno = rc == 0 ? e0 : e;
	return rc;
}

int ds__out_dupped(int oldfd, int newfd)
{
	uint64_t token;
	if (newfd >= 0 && DS__UNLIKELY(atomic_load_explicit(&ds__out_nw, memory_order_relaxed)) &&
	    w_token(oldfd, &token))
		w_add(newfd, token, NULL);
	return newfd;
}

int ds__out_dup_pre(int newfd, uint64_t *token) { return w_take(newfd, token); }

void ds__out_dup_post(int oldfd, int newfd, int rc, int had, uint64_t token)
{
	int e = errno;
	if (rc < 0) {
		if (had)
			w_add(newfd, token, NULL); /* nothing happened */
		errno = e;
		return;
	}
	uint64_t t2;
	if (w_token(oldfd, &t2))
		w_add(newfd, t2, NULL);
	if (had) /* the old file on newfd was closed by dup2 */
		simple(DS_OUT_CLOSE, NULL, NULL, 0, 0, token, NULL);
	errno = e;
}

/* Does NODEDIR/outputs.conf exist (a job with outputs)?  At every exit of
 * a process that named no staged path: no libc call (not even a strlen),
 * no dlsym, no 4 KiB frame (rawsys.h).  -1: longer than size. */
static int conf_at(char *conf, size_t size)
{
	static const char tail[] = "/" DS_OUT_CONF;
	const char *d = ds__g.nodedir;
	size_t i = 0;
	for (; d[i]; i++) {
		if (i + sizeof(tail) >= size)
			return -1;
		conf[i] = d[i];
	}
	for (size_t k = 0; k < sizeof(tail); k++)
		conf[i + k] = tail[k];
	return ds__raw_lexists(conf);
}

static __attribute__((noinline)) int conf_long(void)
{
	char conf[PATH_MAX];
	return conf_at(conf, sizeof(conf)) > 0; /* longer: no such file */
}

static int out_conf_exists(void)
{
	char conf[256];
	int r = conf_at(conf, sizeof(conf));
	return r < 0 ? conf_long() : r;
}

static void out_flush_all(void);

/* At exit: a writer's descriptor still open here (an exec'd program writing
 * to a redirected stdout never closes it) is flushed and closed now, so the
 * output is published before the process is gone, as at close. */
__attribute__((destructor)) static void out_fini(void)
{
	if (ds__busy || !ds__g.nodedir[0] || ds__raw_getpid() != ds__g.pid)
		return;
	/* The shim starts lazily (init.c): a program that only writes to
	 * an inherited output (`exec >MOUNT/out/f; exec prog`) never
	 * names a path under the mount.  In a job with outputs, start it
	 * now, so that the output is published before the process goes. */
	if (!ds__g.active && (!out_conf_exists() || !ds__activate()))
		return;
	if (out_on())
		out_flush_all();
}

/* The flush itself, apart from out_fini: its frame is 12 KiB. */
static __attribute__((noinline)) void out_flush_all(void)
{
	int dfd = DS__REAL(open)("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return;
	int fds[64];
	uint64_t toks[64];
	int n = 0;
	char buf[8192];
	for (;;) {
		ssize_t got = DS__REAL(getdents64)(dfd, buf, sizeof(buf));
		if (got <= 0)
			break;
		for (ssize_t off = 0; off < got;) {
			struct {
				uint64_t ino;
				int64_t off;
				unsigned short reclen;
				unsigned char type;
				char name[];
			} *de = (void *)(buf + off);
			off += de->reclen;
			char link[64], tgt[PATH_MAX];
			int fd = atoi(de->name);
			if (de->name[0] < '0' || de->name[0] > '9' || fd == dfd || n == 64)
				continue;
			snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
			ssize_t l = DS__REAL(readlink)(link, tgt, sizeof(tgt) - 1);
			size_t wl = strlen(oc.w);
			if (l != (ssize_t)(wl + 17) || memcmp(tgt, oc.w, wl) || tgt[wl] != '/')
				continue;
			tgt[l] = 0;
			char *end;
			uint64_t tok = strtoull(tgt + wl + 1, &end, 16);
			if (*end)
				continue;
			fds[n] = fd;
			toks[n++] = tok;
		}
	}
	DS__REAL(close)(dfd);
	if (!n)
		return;
	fflush(NULL);
	for (int i = 0; i < n; i++) {
		uint64_t t;
		w_take(fds[i], &t);
		DS__REAL(close)(fds[i]);
	}
	for (int i = 0; i < n; i++)
		simple(DS_OUT_CLOSE, NULL, NULL, 0, 0, toks[i], NULL);
}

DS__EXPORT int DS__WRAP(fclose)(FILE *fp)
{
	ds__ensure_init();
	if (DS__LIKELY(!atomic_load_explicit(&ds__out_nw, memory_order_relaxed)) || ds__null(fp))
		return DS__REAL(fclose)(fp);
	int e0 = errno;
	int fd = DS__REAL(fileno)(fp);
	uint64_t token, serial = fd < 0 ? 0 : w_close_begin(fd, &token);
	if (!serial) {
		errno = e0;
		return DS__REAL(fclose)(fp);
	}
	int rc = DS__REAL(fclose)(fp);
	int e = rc == 0 ? e0 : errno;
	int src = simple(DS_OUT_CLOSE, NULL, NULL, 0, 0, token, NULL);
	w_close_end(serial);
	if (src && rc == 0) {
		errno = src == -ETIMEDOUT ? EIO : -src;
		return EOF;
	}
	errno = e;
	return rc;
}

/* ---- calls by name that change the outputs -------------------------------- */
static int out_path_op(int op, struct ds__res *r, unsigned arg)
{
	char rel[PATH_MAX];
	int rc = rel_of(r, rel);
	if (rc)
		return ds__fail(-rc);
	switch (op) {
	case DS_OUT_MKDIR:
		if (!rel[0])
			return ds__fail(EEXIST);
		rc = ns_change(DS_OUT_MKDIR, rel, NULL, 0, arg & 07777 & ~cur_umask());
		break;
	case DS_OUT_UNLINK:
	case DS_OUT_RMDIR:
		if (!rel[0])
			return ds__fail(EBUSY);
		rc = ns_change(op, rel, NULL, 0, 0);
		break;
	default: /* symlink, link, mknod, truncate: not in write-once outputs */
		rc = -EPERM;
	}
	return rc ? ds__fail(-rc) : 0;
}

static int out_rename(struct ds__res *a, struct ds__res *b, unsigned flags)
{
	char ra[PATH_MAX], rb[PATH_MAX];
	if (rel_of(a, ra) || rel_of(b, rb))
		return ds__fail(ENAMETOOLONG);
	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return ds__fail(EINVAL);
	if (!ra[0] || !rb[0])
		return ds__fail(EBUSY);
	int rc = ns_change(DS_OUT_RENAME, ra, rb, (int)flags, 0);
	return rc ? ds__fail(-rc) : 0;
}

int ds__out_root_entry(const char **name, size_t *nlen, uint64_t *ino)
{
	if (!out_on())
		return 0;
	if (name) {
		struct stat st;
		int e = errno;
		*name = oc.sub;
		*nlen = oc.sublen;
		*ino = DS__REAL(stat)(oc.ns, &st) == 0 ? (uint64_t)st.st_ino : 1;
		errno = e;
	}
	return 1;
}

void ds__out_chdir(void) { atomic_store(&ds__out_cwd, 1); }

static void out_atfork_child(void)
{
	/* the child's entries name the same open files: keep them (its close
	 * tells the service, which sees the parent's lock); not those another
	 * thread of the parent was closing */
	pthread_mutex_init(&wlock, NULL);
	pthread_cond_init(&wcond, NULL);
	wcreating = NULL; /* other threads' creates: not in the child */
	for (size_t i = 0; i < wlen;)
		if (wtab[i].fd < 0) {
			free(wtab[i].rel);
			wtab[i] = wtab[--wlen];
			atomic_fetch_sub(&ds__out_nw, 1);
		} else {
			i++;
		}
}

/* The calls above leave errno untouched when they succeed (docs/design.md section 5): the
 * checks on the way (stat of a name that does not exist yet, the umask)
 * set it. */
int ds__out_open(struct ds__res *r, int flags, mode_t mode)
{
	int e = errno;
	int fd = out_open(r, flags, mode);
	if (fd >= 0)
		errno = e;
	return fd;
}

int ds__out_path_op(int op, struct ds__res *r, unsigned arg)
{
	int e = errno;
	int rc = out_path_op(op, r, arg);
	if (rc == 0)
		errno = e;
	return rc;
}

int ds__out_rename(struct ds__res *a, struct ds__res *b, unsigned flags)
{
	int e = errno;
	int rc = out_rename(a, b, flags);
	if (rc == 0)
		errno = e;
	return rc;
}
