/* SPDX-License-Identifier: BSD-3-Clause */
/* remote.c: the bytes of a file that are not simply in this node's store,
 * behind one small interface (shim.h: ds__materialize, ds__remote_read,
 * ds__remote_epoch):
 *
 *   - a zlib file: inflated once per open file, at its first read;
 *   - a file whose partition is on another node: the epoch cache
 *     (dsepoch.h: the service prefetched this epoch's samples), else the node
 *     service over NODEDIR/sock (dsproto.h), in chunks of at most
 *     DS_MAX_READ.
 *
 * Every remote answer is bounded by DSTAGE_TIMEOUT (poll with a deadline):
 * a dead or silent service gives EIO, counted in stats.read_errors, never a
 * hang.  Whole files fetched or inflated are checked against their CRC-32C.
 *
 * Connections are per thread (requests are one at a time per connection)
 * and per process: a forked child never talks on its parent's socket, it
 * connects anew (the pid is checked).  The service's uid is checked with
 * SO_PEERCRED; the socket itself lives in the 0700 node directory. */
#include "shim.h"
#include "dsepoch.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

static struct ds_cache_set *cache;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

/* An epoch file the cache keeps open (its OFD read lock): out of the
 * program's way, at a high number, private (io/offset.c parks its region
 * the same way). */
static int cache_fd(int fd, int on)
{
	if (!on) {
		ds__fd_private(fd, 0);
		return fd;
	}
	fd = ds__fd_high(fd, 64);
	ds__fd_private(fd, 1);
	return fd;
}

static void cache_init(void)
{
	/* the cache opens its files: through libc, not through us */
	ds__busy++;
	/* the epoch files it keeps open (their read locks) are ours, not the
	 * program's to close */
	ds_cache_set_fd_hook(cache_fd);
	cache = ds_cache_set_new(ds__g.nodedir);
	ds__busy--;
}

void ds__cache_release(struct ds__file *f)
{
	if (f->cref)
		ds_cache_put(f->cref);
	f->cref = NULL;
}

/* ---- the connection --------------------------------------------------------- */
struct conn {
	int fd;
	pid_t pid;
	dev_t dev;
	ino_t ino;
	uint32_t owed; /* answers to epoch announcements not read yet */
	uint64_t said; /* the epoch last announced on it (UINT64_MAX: none) */
};
static __thread struct conn conn = {-1, 0, 0, 0, 0, UINT64_MAX};
static pthread_key_t conn_key;
static pthread_once_t conn_once = PTHREAD_ONCE_INIT;

/* Is conn.fd still our socket?  A program may close descriptors behind our
 * back (raw close_range) and the number may now be its own file. */
static int conn_same(void)
{
	struct stat st;
	return conn.fd >= 0 && DS__REAL(fstat)(conn.fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
	       st.st_dev == conn.dev && st.st_ino == conn.ino;
}

/* Drop the connection: closed only when the number still is our socket, in
 * the process that made it; otherwise forgotten (docs/design.md section 5). */
static void conn_drop(void)
{
	if (conn.fd >= 0 && conn.pid == getpid() && ds__owner()) {
		if (conn_same()) {
			ds__fd_private(conn.fd, 0);
			DS__REAL(close)(conn.fd);
		} else if (ds__fd_is_private(conn.fd)) {
			ds__fd_private(conn.fd, 0);
		}
	}
	conn.fd = -1;
	conn.owed = 0;
}

static void conn_destructor(void *unused)
{
	(void)unused;
	conn_drop();
}

static void conn_key_init(void)
{
	pthread_key_create(&conn_key, conn_destructor);
}

static int deadline_left(double deadline)
{
	double left = deadline - ds_now();
	return left <= 0 ? 0 : (int)(left * 1000) + 1;
}

static int conn_get(double deadline)
{
	struct stat st;
	if (!ds__owner())
		return -EIO; /* a vfork child: the parent's sockets are not its own */
	if (conn.fd >= 0) {
		if (conn.pid == getpid() && conn_same())
			return conn.fd;
		if (conn.pid != getpid())
			conn.fd = -1; /* the parent's: leave it to the parent */
		else
			conn_drop(); /* forgotten, not closed, when not ours */
	}
	pthread_once(&conn_once, conn_key_init);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[PATH_MAX + 16];
	snprintf(path, sizeof(path), "%s/%s", ds__g.nodedir, DS_SOCK_NAME);
	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		if (e == EINPROGRESS || e == EAGAIN) {
			struct pollfd p = {fd, POLLOUT, 0};
			int so = 0;
			socklen_t sl = sizeof(so);
			if (poll(&p, 1, deadline_left(deadline)) != 1 ||
			    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so, &sl) < 0 || so) {
				DS__REAL(close)(fd);
				return -EIO;
			}
		} else {
			DS__REAL(close)(fd);
			return -e;
		}
	}
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != geteuid()) {
		ds_warn("'%s': the service runs as another user: not using it", path);
		DS__REAL(close)(fd);
		return -EACCES;
	}
	DS__REAL(fstat)(fd, &st);
	ds__fd_private(fd, 1);
	conn.fd = fd;
	conn.owed = 0;
	conn.said = UINT64_MAX;
	conn.pid = getpid();
	conn.dev = st.st_dev;
	conn.ino = st.st_ino;
	pthread_setspecific(conn_key, &conn);
	return fd;
}

void ds__remote_atfork_child(void)
{
	/* the thread that forked keeps its struct conn: the child's copy of
	 * the socket is closed (if it still is the socket), never used */
	if (conn.fd >= 0 && conn_same()) {
		ds__fd_private(conn.fd, 0);
		DS__REAL(close)(conn.fd);
	}
	conn.fd = -1;
	conn.owed = 0;
	if (cache)
		ds_cache_set_atfork_child(cache);
}

static int xfer(int fd, void *buf, size_t len, int out, double deadline)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n > 0) {
			p += n;
			len -= n;
			continue;
		}
		if (n == 0)
			return -EIO; /* the service went away */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -EIO;
		struct pollfd pf = {fd, out ? POLLOUT : POLLIN, 0};
		int left = deadline_left(deadline);
		if (left == 0)
			return -ETIMEDOUT;
		int r = poll(&pf, 1, left);
		if (r < 0 && errno != EINTR)
			return -EIO;
		if (r == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

/* Read the answers the service owes on this connection for epoch
 * announcements (ds__remote_epoch does not wait for them): all of them by
 * the deadline (wait = 1), or those already there (wait = 0: an answer is
 * taken only whole, so the stream never falls out of step). */
static int drain_owed(int fd, double deadline, int wait)
{
	while (conn.owed) {
		struct ds_resp a;
		if (!wait) {
			ssize_t k = recv(fd, &a, sizeof(a), MSG_DONTWAIT | MSG_PEEK);
			if (k != (ssize_t)sizeof(a))
				return 0;
		}
		int rc = xfer(fd, &a, sizeof(a), 0, deadline);
		if (rc)
			return rc;
		if (a.magic != DS_PROTO_MAGIC || a.len)
			return -EPROTO;
		conn.owed--;
	}
	return 0;
}

/* One request; the answer's data (resp.len bytes) into buf (cap bytes). */
static int request(uint32_t op, uint32_t id, uint64_t off, uint64_t len, void *buf, uint64_t cap,
                   uint64_t *got)
{
	double deadline = ds_now() + ds__g.timeout_ms / 1000.0;
	struct ds_req q = {DS_PROTO_MAGIC, op, id, 0, off, len};
	struct ds_resp a;
	int rc;
	for (int attempt = 0;; attempt++) {
		/* a connection kept from an earlier request may belong to a
		 * service that has been restarted since: if it is dead before
		 * the answer's header, try once on a fresh one (requests are
		 * idempotent; the deadline stays the same, so does the bound) */
		int reused = conn.fd >= 0 && conn.pid == getpid();
		int fd = conn_get(deadline);
		if (fd < 0) {
			/* no service (yet): after a lost node, one is restarted on the
			 * survivors (io/failover.c) */
			if (fd != -EACCES && fd != -ENAMETOOLONG && ds__failover_retry(deadline, attempt))
				continue;
			return fd;
		}
		rc = drain_owed(fd, deadline, 1);
		if (!rc)
			rc = xfer(fd, &q, sizeof(q), 1, deadline);
		if (!rc)
			rc = xfer(fd, &a, sizeof(a), 0, deadline);
		if (rc == -EIO && reused && attempt == 0) {
			conn_drop();
			continue;
		}
		if (!rc && (a.magic != DS_PROTO_MAGIC || (a.status == 0 && a.len > cap)))
			rc = -EPROTO;
		if (!rc && a.status == 0 && a.len)
			rc = xfer(fd, buf, a.len, 0, deadline);
		/* the service died under the request, or its get failed (a holder
		 * died): ask the restarted one, which picks a living holder */
		if ((rc == -EIO || (!rc && a.status == -EIO)) && ds__failover_retry(deadline, attempt)) {
			conn_drop();
			continue;
		}
		break;
	}
	if (rc) {
		/* the stream is out of step now: never reuse it */
		conn_drop();
		return rc;
	}
	if (a.status)
		return a.status < 0 ? a.status : -EIO;
	if (got)
		*got = a.len;
	return 0;
}

int ds__remote_read(uint32_t id, uint64_t off, void *buf, uint64_t len)
{
	char *p = buf;
	while (len) {
		uint64_t want = len < DS_MAX_READ ? len : DS_MAX_READ, got = 0;
		int rc = request(DS_OP_READ, id, off, want, p, want, &got);
		if (rc == 0 && got != want)
			rc = -EIO; /* short only at the end of the stored bytes */
		if (rc) {
			char name[PATH_MAX];
			if (rc == -EHOSTDOWN)
				ds_warn("'%s': lost: every node holding it is gone",
				        ds__ename(id, name));
			ds_debug("remote read of '%s': %s", ds__ename(id, name), strerror(-rc));
			DS__COUNT(read_errors, 1);
			return -EIO;
		}
		DS__COUNT(remote_bytes, got);
		p += got;
		off += got;
		len -= got;
	}
	return 0;
}

void ds__remote_epoch(uint64_t epoch)
{
	/* best effort, and quick: the service follows the epoch readers
	 * announce (shuffle/sock.c answers at once, but its socket thread may
	 * be busy), so the announcement is sent and its answer read later, by
	 * the next request on this connection (drain_owed), never waited for
	 * here: a list open used to wait up to 0.2 s for it.  A connection
	 * says each change of epoch once (a sampler may open its list more
	 * than once); a new one (a restarted service) says it again. */
	if (conn.fd >= 0 && conn.pid == getpid() && conn.said == epoch && conn_same())
		return;
	struct ds_req q = {DS_PROTO_MAGIC, DS_OP_EPOCH, 0, 0, epoch, 0};
	double deadline = ds_now() + 0.2; /* a connect, a 32-byte send */
	int fd = conn_get(deadline);
	if (fd < 0)
		return;
	if (drain_owed(fd, deadline, 0) || xfer(fd, &q, sizeof(q), 1, deadline)) {
		conn_drop();
		return;
	}
	conn.owed++;
	conn.said = epoch;
}

/* ---- making a file's bytes available ------------------------------------------- */
static int inflate_into(const void *z, uint64_t zlen, char *out, uint64_t size)
{
	z_stream s;
	memset(&s, 0, sizeof(s));
	if (inflateInit(&s) != Z_OK)
		return -ENOMEM;
	uint64_t in_left = zlen, out_left = size;
	s.next_in = (Bytef *)z;
	s.next_out = (Bytef *)out;
	int rc;
	do {
		if (!s.avail_in) {
			s.avail_in = in_left > UINT32_MAX ? UINT32_MAX : (uInt)in_left;
			in_left -= s.avail_in;
		}
		if (!s.avail_out) {
			s.avail_out = out_left > UINT32_MAX ? UINT32_MAX : (uInt)out_left;
			out_left -= s.avail_out;
		}
		rc = inflate(&s, Z_NO_FLUSH);
	} while (rc == Z_OK && (s.avail_in || in_left) && (s.avail_out || out_left));
	uint64_t total = s.total_out;
	inflateEnd(&s);
	return (rc == Z_STREAM_END && total == size) ? 0 : -EIO;
}

/* Fetch or find the stored bytes of a remote entry.  *stored points at
 * them; *owned is set when they were malloc'd (else they belong to the cache
 * reference f->cref); *checked when the service has checked their CRC in
 * the epoch cache already (VERIFIED). */
static int fetch_stored(struct ds__file *f, uint64_t nstored, const char **stored, char **owned,
                        int *checked)
{
	*owned = NULL;
	*checked = 0;
	pthread_once(&cache_once, cache_init);
	if (cache) {
		const void *data;
		uint64_t len;
		struct ds_cache_ref *ref;
		int rc = ds_cache_find_checked(cache, (uint32_t)f->id, &data, &len, &ref, checked);
		if (rc == 1 && len == nstored) {
			f->cref = ref;
			*stored = data;
			DS__COUNT(cache_reads, 1);
			DS__COUNT(cache_bytes, len);
			return 0;
		}
		if (rc == 1) {
			*checked = 0;
			ds_cache_put(ref);
		}
		if (rc == -EAGAIN)
			DS__COUNT(stalls, 1); /* being fetched: the service will wait for it */
	}
	char *buf = malloc(nstored ? nstored : 1);
	if (!buf)
		return -ENOMEM;
	DS__COUNT(remote_reads, 1);
	int rc = ds__remote_read((uint32_t)f->id, 0, buf, nstored);
	if (rc) {
		free(buf);
		return rc;
	}
	*stored = *owned = buf;
	return 0;
}

int ds__materialize(struct ds__file *f)
{
	int rc = 0;
	pthread_mutex_lock(&f->lock);
	if (atomic_load(&f->data))
		goto out;
	const struct ds_index *ix = &ds__g.ix;
	const uint32_t id = (uint32_t)f->id;
	const uint64_t size = ds_ix_size(ix, id), nstored = ds_ix_stored(ix, id);
	const uint8_t codec = ds_ix_codec(ix, id);
	const char *stored = NULL;
	char *owned = NULL;
	int checked = 0;
	if (f->remote) {
		rc = fetch_stored(f, nstored, &stored, &owned, &checked);
		if (rc)
			goto out;
	} else {
		uint64_t base = 0;
		ds_index_part_on(ix, ds_ix_part(ix, id), ds__g.node, &base);
		stored = ds__g.store + base + ds_ix_poff(ix, id);
	}
	const char *data = stored;
	if (codec == DS_CODEC_ZLIB) {
		char *out = malloc(size);
		rc = out ? inflate_into(stored, nstored, out, size) : -ENOMEM;
		free(owned);
		if (f->cref)
			ds__cache_release(f);
		if (rc) {
			free(out);
			DS__COUNT(read_errors, 1);
			rc = rc == -ENOMEM ? rc : -EIO;
			goto out;
		}
		owned = out;
		data = out;
	}
	/* bytes that crossed a socket or went through inflate: check them
	 * (an epoch cache entry the service has checked already is not
	 * checked twice: exchange.c, verify_main) */
	if ((f->remote && !checked) || codec != DS_CODEC_NONE) {
		if (ds_crc32c(0, data, size) != ds_ix_crc(ix, id)) {
			char name[PATH_MAX];
			ds_warn("'%s': checksum mismatch in the bytes %s", ds__ename(f->id, name),
			        f->remote ? "fetched" : "inflated");
			free(owned);
			if (f->cref)
				ds__cache_release(f);
			DS__COUNT(read_errors, 1);
			rc = -EIO;
			goto out;
		}
	}
	f->own = owned;
	atomic_store_explicit(&f->data, data, memory_order_release);
out:
	pthread_mutex_unlock(&f->lock);
	return rc;
}
