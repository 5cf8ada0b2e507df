/* SPDX-License-Identifier: BSD-3-Clause */
/* drain.c: the outputs this node holds, copied to --drain-to (the shared
 * file system) by one thread, oldest first, at most --drain-rate bytes/s.
 *
 * Each file goes to DIR/<path>.dstage-drain.<node>.<seq> first; its bytes
 * are summed on the way and must match the CRC-32C its holder took just
 * after the close (sum.c: ds__out_sum_main, at the same time: the copy is
 * renamed into place only once that sum is known and matches); then
 * fsync, the mode and mtime of the output, rename to DIR/<path>, fsync of
 * the directory.  Only then does it count as drained: a file is never
 * reported drained before its bytes are durable, and DIR never holds half
 * a file under an output's name.  Renames and unlinks of outputs already
 * drained are repeated in DIR, in order, behind the copies queued before
 * them; an output replaced before its turn is never copied (the newer one
 * is), and a replaced copy stays in DIR until the newer one takes its name
 * (so a checkpoint name is never empty on the shared file system).
 * Directories are made as files need them (empty ones are not drained). */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define pfmt ds__out_pfmt

enum { A_DRAIN = 1, A_RENAME, A_UNLINK };
#define COPY_CHUNK (8u << 20)

struct dq {
	struct dq *next;
	int kind;
	struct ds__orec *r;
	char *a, *b; /* names in DIR (rename, unlink) */
};

struct ds__drain {
	struct ds_out *o;
	char dir[PATH_MAX];
	int dfd;       /* DIR, opened once: every later use is relative to it */
	uint64_t rate; /* bytes/s, 0: no bound */
	pthread_t t;
	int on, quit;
	pthread_cond_t cv;
	struct dq *head, **tail;
	uint64_t queued, done; /* actions */
	uint64_t pending_bytes, drained_files, drained_bytes;
	unsigned failed, cancelled;
	char last[PATH_MAX];
	char tmp[PATH_MAX]; /* the copy in progress */
	struct ds__orec *cur; /* its output */
	struct ds__orec **failed_recs; /* outputs whose copy failed (for the report) */
	size_t nfailed_recs;
	double t_next;      /* rate: when the next byte may go */
};

static void enqueue(struct ds__drain *d, int kind, struct ds__orec *r, const char *a, const char *b)
{
	struct dq *q = ds_xcalloc(1, sizeof(*q));
	q->kind = kind;
	q->r = r;
	q->a = a ? ds_xstrdup(a) : NULL;
	q->b = b ? ds_xstrdup(b) : NULL;
	*d->tail = q;
	d->tail = &q->next;
	d->queued++;
	pthread_cond_signal(&d->cv);
}

void ds__drain_add(struct ds__drain *d, struct ds__orec *r)
{
	r->dstate = DS_D_QUEUED;
	d->pending_bytes += r->size;
	enqueue(d, A_DRAIN, r, NULL, NULL);
}

void ds__drain_forget(struct ds__drain *d, struct ds__orec *r, int unlink_copy)
{
	if (r->dstate == DS_D_QUEUED) {
		d->pending_bytes -= r->size;
		r->dstate = DS_D_NONE; /* skipped when its turn comes */
	} else if (r->dstate == DS_D_DRAINED && unlink_copy && r->dpath) {
		enqueue(d, A_UNLINK, r, r->dpath, NULL);
	}
	/* DRAINING: the thread sees r->gone when the copy ends */
}

void ds__drain_rename(struct ds__drain *d, struct ds__orec *r, const char *newpath)
{
	if (r->dstate == DS_D_DRAINED && r->dpath) {
		enqueue(d, A_RENAME, r, r->dpath, newpath);
		free(r->dpath);
		r->dpath = ds_xstrdup(newpath);
	}
	/* queued or in progress: it is copied under the name it has then */
}

uint64_t ds__drain_mark(struct ds__drain *d) { return d->queued; }

const char *ds__drain_dir(const struct ds__drain *d) { return d->dir; }

int ds__drain_reached(struct ds__drain *d, uint64_t mark, int *status)
{
	*status = d->failed ? -EIO : 0;
	return d->done >= mark;
}

int ds__drain_pending(struct ds__drain *d) { return d->done < d->queued; }

void ds__drain_status(struct ds__drain *d, struct ds_buf *b)
{
	char line[2 * PATH_MAX + 64];
	unsigned pending = 0;
	for (struct dq *q = d->head; q; q = q->next)
		pending += q->kind == A_DRAIN && q->r->dstate == DS_D_QUEUED;
	if (d->tmp[0])
		pending++;
	int n = pfmt(line, sizeof(line),
	                 "drain_to=%s\npending_files=%u\npending_bytes=%llu\ndrained_files=%llu\n"
	                 "drained_bytes=%llu\nfailed=%u\nlast_drained=%s\ndraining_tmp=%s\n",
	                 d->dir, pending, (unsigned long long)d->pending_bytes,
	                 (unsigned long long)d->drained_files, (unsigned long long)d->drained_bytes,
	                 d->failed, d->last, d->tmp);
	ds_buf_add(b, line, (size_t)n);
	/* what a report (and a recovery) after a crash must name: size,
	 * CRC-32C and name of every output not yet drained */
	char cs[9];
	if (d->tmp[0] && d->cur) {
		n = pfmt(line, sizeof(line), "undrained=%llu %s %s\n",
		         (unsigned long long)d->cur->size, ds__out_crc_str(d->cur, cs),
		         d->cur->path);
		ds_buf_add(b, line, (size_t)n);
	}
	for (struct dq *q = d->head; q; q = q->next)
		if (q->kind == A_DRAIN && q->r->dstate == DS_D_QUEUED) {
			n = pfmt(line, sizeof(line), "undrained=%llu %s %s\n",
			         (unsigned long long)q->r->size, ds__out_crc_str(q->r, cs),
			         q->r->path);
			ds_buf_add(b, line, (size_t)n);
		}
	for (size_t i = 0; i < d->nfailed_recs; i++) {
		struct ds__orec *r = d->failed_recs[i];
		if (r->gone || r->dstate != DS_D_FAILED)
			continue;
		n = pfmt(line, sizeof(line), "undrained=%llu %s %s\n", (unsigned long long)r->size,
		         ds__out_crc_str(r, cs), r->path);
		ds_buf_add(b, line, (size_t)n);
	}
}

/* The directory of rel (a name relative to the drain directory) opened by
 * descriptor from dfd, one component at a time (O_NOFOLLOW | O_DIRECTORY:
 * no symlink or rename in DIR can send a byte elsewhere), made when missing
 * with create; a directory made here is made durable at once (fsync of the
 * directory it was made in), or a file drained into it could vanish with
 * it at a power loss.  The descriptor (or -errno); *base: rel's last name. */
int ds__drain_dirat(int dfd, const char *rel, int create, const char **base)
{
	char p[PATH_MAX];
	if ((size_t)pfmt(p, sizeof(p), "%s", rel) >= sizeof(p))
		return -ENAMETOOLONG;
	const char *sl = strrchr(rel, '/');
	*base = sl ? sl + 1 : rel;
	int fd = dup(dfd);
	if (fd < 0)
		return -errno;
	char *save = NULL, *last = strrchr(p, '/');
	if (!last)
		return fd;
	*last = 0;
	for (char *c = strtok_r(p, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int made = 0, rc = 0;
		int nfd = openat(fd, c, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (nfd < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, c, 0777 & ~0022) == 0)
				made = 1;
			else if (errno != EEXIST)
				rc = -errno;
			if (!rc)
				nfd = openat(fd, c,
				             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		if (!rc && nfd < 0) /* a symlink where a directory should be: ELOOP */
			rc = errno == ELOOP ? -ENOTDIR : -errno;
		if (!rc && made && fsync(fd) < 0)
			rc = -errno;
		close(fd);
		if (rc) {
			if (nfd >= 0)
				close(nfd);
			return rc;
		}
		fd = nfd;
	}
	return fd;
}

static int fsync_fd(int fd) { return fsync(fd) < 0 ? -errno : 0; }

static void pace(struct ds__drain *d, size_t n)
{
	if (!d->rate)
		return;
	double now = ds_now();
	if (d->t_next < now - 0.1)
		d->t_next = now; /* no credit for idle time */
	d->t_next += (double)n / (double)d->rate;
	double wait = d->t_next - now;
	if (wait <= 0)
		return;
	/* on d->cv, not a plain sleep: a stop (ds__drain_end) wakes it at
	 * once.  A sleep of the whole wait (150 KB at --drain-rate 1: days)
	 * kept the service's stop joining this thread until the watchdog
	 * ended the process, blaming a node, and the other nodes waited on
	 * this one in their leaving collectives. */
	struct timespec dl;
	clock_gettime(CLOCK_MONOTONIC, &dl);
	dl.tv_sec += (time_t)wait;
	dl.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
	if (dl.tv_nsec >= 1000000000L) {
		dl.tv_sec++;
		dl.tv_nsec -= 1000000000L;
	}
	pthread_mutex_t *mu = ds__out_mutex(d->o);
	pthread_mutex_lock(mu);
	while (!d->quit && !pthread_cond_timedwait(&d->cv, mu, &dl))
		; /* woken (a new action, a spurious wake-up): wait on */
	pthread_mutex_unlock(mu);
}

/* Copy src to tmp in pdir (open, sum into *crc_out, pace, fsync).  0 or -errno.
 * The caller checks the sum against the output's (which may still be on
 * its way: the copy does not wait for it). */
static int copy_out(struct ds__drain *d, int src, const struct ds__orec *r, int pdir,
                    const char *tmp, uint32_t *crc_out)
{
	int fd = openat(pdir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	/* the source is in the node's RAM (or a local disk): written straight
	 * from its mapping, summed on the way, one copy */
	const char *map = NULL;
	int rc = 0;
	if (r->size) {
		void *m = mmap(NULL, r->size, PROT_READ, MAP_SHARED, src, 0);
		if (m == MAP_FAILED)
			rc = -errno;
		else
			map = m;
	}
	if (map)
		madvise((void *)map, r->size, MADV_SEQUENTIAL);
	uint64_t off = 0;
	uint32_t crc = 0;
	while (!rc && off < r->size) {
		if (__atomic_load_n(&d->quit, __ATOMIC_RELAXED)) {
			rc = -ECANCELED;
			break;
		}
		size_t n = r->size - off < COPY_CHUNK ? (size_t)(r->size - off) : COPY_CHUNK;
		crc = ds_crc32c(crc, map + off, n);
		rc = ds_pwrite_full(fd, map + off, n, (off_t)off);
		/* start the write-back of this chunk now: the final fsync then
		 * has little left to do, and the dirty pages (which the
		 * training's own writes would be throttled behind) stay few.
		 * 1 GiB to /var/tmp: 1.6 s instead of 2.1 s (medians of 4).
		 * Not every file system does it: the fsync below is what counts. */
		if (!rc)
			(void)sync_file_range(fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE);
		if (!rc && ds_fault("drain.write", (int)ds__out_node(d->o)))
			rc = -EIO;
		off += n;
		pace(d, n);
	}
	if (map)
		munmap((void *)map, r->size);
	*crc_out = crc;
	struct timespec ts[2] = {{r->mtime_ns / 1000000000ll, r->mtime_ns % 1000000000ll},
	                         {r->mtime_ns / 1000000000ll, r->mtime_ns % 1000000000ll}};
	if (!rc && (fchmod(fd, r->mode & 07777) < 0 || futimens(fd, ts) < 0 || fsync(fd) < 0))
		rc = -errno;
	if (close(fd) < 0 && !rc)
		rc = -errno;
	return rc;
}

static void drain_one(struct ds__drain *d, struct dq *q, pthread_mutex_t *mu)
{
	struct ds__orec *r = q->r;
	uint32_t node = ds__out_node(d->o);
	if (r->dstate != DS_D_QUEUED || r->gone)
		return; /* replaced or unlinked before its turn */
	char tmp[PATH_MAX], full[PATH_MAX];
	/* a name that does not fit is a failure, never a cut name in DIR
	 * (node 0 refuses such names at create: ENAMETOOLONG) */
	int sfd = -1, e = ENAMETOOLONG;
	if (pfmt(full, sizeof(full), "%s/%s" DS_OUT_DRAIN_TMP "%u.%llu", d->dir, r->path, node,
	         (unsigned long long)r->seq) < (int)sizeof(full)) {
		sfd = openat(ds__out_nsfd(d->o), r->path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		e = errno;
	}
	if (sfd < 0) {
		ds_error("node %u: drain: '%s': %s", node, r->path, ds_strerror(e));
		r->dstate = DS_D_FAILED;
		d->failed++;
		d->pending_bytes -= r->size;
		return;
	}
	r->dstate = DS_D_DRAINING;
	pfmt(d->tmp, sizeof(d->tmp), "%s", full);
	d->cur = r;
	char *rpath = ds_xstrdup(r->path);
	pthread_mutex_unlock(mu);
	ds__out_status_write(d->o);
	double t0 = ds_now();
	/* DIR by descriptor: the copy, its rename and the fsync of the
	 * directory it is renamed in all act on the directory opened here */
	const char *base;
	int pdir = ds__drain_dirat(d->dfd, rpath, 1, &base), ddir = -1;
	int rc = pdir < 0 ? pdir : 0;
	uint32_t crc = 0;
	if (!rc && (size_t)pfmt(tmp, sizeof(tmp), "%s" DS_OUT_DRAIN_TMP "%u.%llu", base, node,
	                        (unsigned long long)r->seq) >= sizeof(tmp))
		rc = -ENAMETOOLONG;
	int have_tmp = !rc;
	if (!rc)
		rc = copy_out(d, sfd, r, pdir, tmp, &crc);
	close(sfd);
	pthread_mutex_lock(mu);
	double t1 = ds_now();
	/* the output's sum, taken just after its close by the sum
	 * thread, at the same time as this copy: the copy is renamed into
	 * place only if it matches */
	while (!rc && !r->summed && !r->gone && !d->quit)
		ds__out_wait_summed(d->o);
	double t2 = ds_now();
	if (!rc && !r->gone && !r->summed)
		rc = -ECANCELED; /* the service stops */
	else if (!rc && !r->gone && r->sum_err)
		rc = r->sum_err;
	else if (!rc && !r->gone && crc != r->crc)
		rc = -DS_ECHECKSUM;
	if (!rc && !r->gone) {
		/* the output may have been renamed meanwhile: its name now */
		const char *dbase;
		ddir = ds__drain_dirat(d->dfd, r->path, 1, &dbase);
		rc = ddir < 0 ? ddir : 0;
		if (!rc && renameat(pdir, tmp, ddir, dbase) < 0)
			rc = -errno;
		if (!rc)
			rc = fsync_fd(ddir);
	}
	if ((rc || r->gone) && have_tmp && rc != -EEXIST)
		unlinkat(pdir, tmp, 0);
	if (pdir >= 0)
		close(pdir);
	if (ddir >= 0)
		close(ddir);
	free(rpath);
	d->tmp[0] = 0;
	d->cur = NULL;
	d->pending_bytes -= r->size;
	if (r->gone) {
		r->dstate = DS_D_NONE;
	} else if (rc == -ECANCELED) {
		ds_error("node %u: '%s': closed but not drained to '%s' (the service stopped during "
		         "its copy)",
		         node, r->path, d->dir);
		d->cancelled++;
		r->dstate = DS_D_FAILED;
		/* listed as not drained in outputs.status: a recovery copies it */
		d->failed_recs = ds_xrealloc(d->failed_recs,
		                             (d->nfailed_recs + 1) * sizeof(*d->failed_recs));
		d->failed_recs[d->nfailed_recs++] = r;
	} else if (rc) {
		ds_error("node %u: drain: '%s' to '%s': %s", node, r->path, d->dir, ds_strerror(rc));
		d->failed++;
		r->dstate = DS_D_FAILED;
		d->failed_recs = ds_xrealloc(d->failed_recs, (d->nfailed_recs + 1) * sizeof(*d->failed_recs));
		d->failed_recs[d->nfailed_recs++] = r;
	} else {
		r->dstate = DS_D_DRAINED;
		free(r->dpath);
		r->dpath = ds_xstrdup(r->path);
		d->drained_files++;
		d->drained_bytes += r->size;
		ds__repl_drained(d->o, r); /* outrepl.c: the replicas stop listing it */
		pfmt(d->last, sizeof(d->last), "%s", r->path);
		ds_info("node %u: drained '%s' (%llu bytes) in %.4f s (copy and fsync %.4f s, then "
		        "waiting for its sum %.4f s, rename %.4f s)",
		        node, r->path, (unsigned long long)r->size, ds_now() - t0, t1 - t0, t2 - t1,
		        ds_now() - t2);
	}
}

/* A rename or unlink of a drained output, repeated in DIR, by descriptor
 * (ds__drain_dirat): the directory the new name is in is fsynced, and the
 * one the old name was in too when it is another (or the old name could
 * come back at a power loss: the file twice). */
static int redo(struct ds__drain *d, const struct dq *q)
{
	const char *ba, *bb;
	int fa = ds__drain_dirat(d->dfd, q->a, 0, &ba), fb = -1;
	int rc = fa < 0 ? fa : 0;
	if (!rc && q->kind == A_UNLINK) {
		if (unlinkat(fa, ba, 0) < 0 && errno != ENOENT)
			rc = -errno;
		else
			rc = fsync_fd(fa);
	} else if (!rc) {
		fb = ds__drain_dirat(d->dfd, q->b, 1, &bb);
		rc = fb < 0 ? fb : 0;
		if (!rc && renameat(fa, ba, fb, bb) < 0)
			rc = -errno;
		if (!rc)
			rc = fsync_fd(fb);
		struct stat sa, sb;
		if (!rc && fstat(fa, &sa) == 0 && fstat(fb, &sb) == 0 &&
		    (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino))
			rc = fsync_fd(fa);
	}
	if (fa >= 0)
		close(fa);
	if (fb >= 0)
		close(fb);
	return rc;
}

static void *drain_main(void *arg)
{
	struct ds__drain *d = arg;
	/* the drain must not compete with training: the lowest CPU priority
	 * and the lowest best-effort I/O priority for this thread (not the
	 * idle class: a busy disk would starve it for good); not fatal */
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
	syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, (int)syscall(SYS_gettid),
	        (2 << 13) | 7 /* IOPRIO_CLASS_BE, level 7 */);
	pthread_mutex_t *mu = ds__out_mutex(d->o);
	pthread_mutex_lock(mu);
	for (;;) {
		while (!d->head && !d->quit)
			pthread_cond_wait(&d->cv, mu);
		if (d->quit)
			break;
		struct dq *q = d->head;
		d->head = q->next;
		if (!d->head)
			d->tail = &d->head;
		int rc = 0;
		switch (q->kind) {
		case A_DRAIN:
			drain_one(d, q, mu);
			break;
		case A_RENAME:
		case A_UNLINK:
			/* unlocked: DIR is a network file system */
			pthread_mutex_unlock(mu);
			rc = redo(d, q);
			pthread_mutex_lock(mu);
			break;
		}
		if (rc) {
			ds_error("node %u: drain: %s '%s' in '%s': %s", ds__out_node(d->o),
			         q->kind == A_RENAME ? "rename of" : "unlink of", q->a, d->dir, ds_strerror(rc));
			d->failed++;
		}
		d->done++;
		ds__out_wake(d->o); /* a drain --wait may be waiting for this one */
		free(q->a);
		free(q->b);
		free(q);
		pthread_mutex_unlock(mu);
		ds__out_status_write(d->o);
		pthread_mutex_lock(mu);
	}
	pthread_mutex_unlock(mu);
	return NULL;
}

/* mkdir -p DIR, each directory made fsynced into its parent (the drained
 * files' names are durable only if their directories are). */
static int mkdir_durable(const char *dir)
{
	char p[PATH_MAX];
	if ((size_t)pfmt(p, sizeof(p), "%s", dir) >= sizeof(p))
		return -ENAMETOOLONG;
	for (char *c = p + 1;; c++) {
		if (*c && *c != '/')
			continue;
		char save = *c;
		*c = 0;
		if (mkdir(p, 0777 & ~0022) == 0) {
			char *sl = strrchr(p, '/');
			char keep = sl[1];
			sl[sl == p] = 0; /* the parent ("/" for a top-level one) */
			int fd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			int rc = fd < 0 || fsync(fd) < 0 ? -errno : 0;
			if (fd >= 0)
				close(fd);
			sl[sl == p] = sl == p ? keep : '/';
			if (rc) {
				*c = save;
				return rc;
			}
		} else if (errno != EEXIST) {
			*c = save;
			return -errno;
		}
		*c = save;
		if (!save)
			return 0;
	}
}

int ds__drain_new(struct ds_out *o, const struct ds_out_opts *so, struct ds__drain **out)
{
	struct ds__drain *d = ds_xcalloc(1, sizeof(*d));
	d->o = o;
	d->tail = &d->head;
	d->dfd = -1;
	d->rate = so->drain_rate;
	pthread_condattr_t ca; /* pace's deadline: monotonic, as ds_now */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&d->cv, &ca);
	pthread_condattr_destroy(&ca);
	*out = d;
	char *rp = NULL;
	int rc = mkdir_durable(so->drain_to);
	if (!rc && !(rp = realpath(so->drain_to, NULL)))
		rc = -errno;
	if (!rc && access(rp, W_OK | X_OK) < 0)
		rc = -errno;
	if (!rc && strlen(rp) >= sizeof(d->dir) - 1024)
		rc = -ENAMETOOLONG;
	if (rc) {
		ds_error("node %u: --drain-to '%s': %s", ds__out_node(o), so->drain_to, ds_strerror(rc));
		free(rp);
		return rc;
	}
	pfmt(d->dir, sizeof(d->dir), "%s", rp);
	free(rp);
	d->dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (d->dfd < 0) {
		rc = -errno;
		ds_error("node %u: --drain-to '%s': %s", ds__out_node(o), so->drain_to,
		         ds_strerror(rc));
		return rc;
	}
	if (pthread_create(&d->t, NULL, drain_main, d))
		return -EAGAIN;
	d->on = 1;
	return 0;
}

int ds__drain_end(struct ds__drain *d)
{
	if (!d)
		return 0;
	pthread_mutex_t *mu = ds__out_mutex(d->o);
	pthread_mutex_lock(mu);
	d->quit = 1;
	pthread_cond_signal(&d->cv);
	pthread_mutex_unlock(mu);
	if (d->on)
		pthread_join(d->t, NULL);
	d->on = 0;
	pthread_mutex_lock(mu);
	int lost = 0;
	for (struct dq *q = d->head; q; q = q->next) {
		if (q->kind != A_DRAIN || q->r->dstate != DS_D_QUEUED)
			continue;
		ds_error("node %u: '%s': closed but not drained to '%s' (its bytes are in the node's "
		         "output area until clean)",
		         ds__out_node(d->o), q->r->path, d->dir);
		lost++;
	}
	if (d->failed) {
		ds_error("node %u: %u drain operation(s) to '%s' failed (see above)", ds__out_node(d->o),
		         d->failed, d->dir);
		lost += (int)d->failed;
	}
	lost += (int)d->cancelled;
	pthread_mutex_unlock(mu);
	return lost;
}

void ds__drain_free(struct ds__drain *d)
{
	if (!d)
		return;
	while (d->head) {
		struct dq *q = d->head;
		d->head = q->next;
		free(q->a);
		free(q->b);
		free(q);
	}
	pthread_cond_destroy(&d->cv);
	if (d->dfd >= 0)
		close(d->dfd);
	free(d->failed_recs);
	free(d);
}
