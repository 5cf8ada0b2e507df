/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_drain.c: `dstage drain`: wait until every closed output is durable in
 * the drain directory, or, when no service runs any more (stopped, killed),
 * report from NODEDIR/outputs.status what was closed and not drained and
 * remove the copy that was half made (it only ever has a temporary name). */
#include "dsmpi.h"
#include "dsout.h"
#include "dsoutputs.h"
#include "dssock.h"
#include "outputs.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static const char *drain_usage =
	"usage: dstage drain --to DIR [--job ID] [--wait] [--timeout SECS]\n"
	"  --wait: block until every output closed so far on any node of the job is durable in\n"
	"  the service's --drain-to directory (exit 1 when one failed to drain).  With no\n"
	"  service running (or one ending: once its processes have, 60 s or --timeout at\n"
	"  most): report the outputs that were closed and not drained (exit 1 if any) and\n"
	"  remove a half-made copy.  Without --wait: print the drain figures of the nodes\n"
	"  stored here.\n";

/* One request to the outputs socket sock; status or -errno. */
static int ask(const char *sock, struct ds_out_req *q, double timeout)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(sock) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	struct ds_out_resp a;
	q->magic = DS_OUT_MAGIC;
	/* timeout 0: wait as long as the drain takes */
	double deadline = timeout > 0 ? ds_now() + timeout : 0;
	int rc = ds_sock_xfer(fd, q, sizeof(*q), 1, deadline);
	if (!rc)
		rc = ds_sock_xfer(fd, &a, sizeof(a), 0, deadline);
	/* the connection lost before an answer: the service ended under us
	 * (killed, or its step ended: a launcher's SIGTERM to the ranks
	 * left after one died), not a drain that failed */
	if (rc == -EPIPE || rc == -ECONNRESET)
		rc = -ESHUTDOWN;
	else if (rc && rc != -ETIMEDOUT)
		rc = -EIO;
	close(fd);
	if (!rc && a.magic != DS_OUT_MAGIC)
		rc = -EIO;
	return rc ? rc : a.status;
}

static const char *kv(const char *text, const char *key, char *buf, size_t len)
{
	size_t kl = strlen(key);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl) && p[kl] == '=') {
			const char *v = p + kl + 1;
			size_t n = strcspn(v, "\n");
			if (n >= len)
				n = len - 1;
			memcpy(buf, v, n);
			buf[n] = 0;
			return buf;
		}
	buf[0] = 0;
	return buf;
}

ssize_t ds__out_read_text(const char *path, char **text)
{
	*text = NULL;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC), rc = 0;
	struct stat st;
	if (fd < 0)
		return errno == ELOOP || errno == ENXIO ? -DS_ENOTREG : -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		rc = S_ISREG(st.st_mode) ? -errno : -DS_ENOTREG;
		close(fd);
		return rc;
	}
	/* the whole file, however long: one line per output not drained, and
	 * 100,000 checkpoint shards are ordinary (a first 64 KiB is not the
	 * status: what lies past it would be neither recovered nor named) */
	size_t cap = 1 << 16, len = 0;
	char *b = malloc(cap);
	for (;;) {
		if (!b) {
			rc = -ENOMEM;
			break;
		}
		if (len + 1 >= cap) {
			char *nb = realloc(b, cap *= 2);
			if (!nb) {
				rc = -ENOMEM;
				break;
			}
			b = nb;
		}
		ssize_t n = read(fd, b + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			rc = -errno;
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (rc) {
		free(b);
		return rc;
	}
	b[len] = 0;
	*text = b;
	return (ssize_t)len;
}

/* A recovery's copy: the output's bytes in the area, and the temporary name
 * in the drain directory they go to. */
struct rcopy {
	int in, pdir, out;
	const char *base; /* the name in pdir */
	char tmp[PATH_MAX];
	struct stat st; /* of in */
};

/* Open AREA/ns/NAME: the bytes the service knew, size bytes. */
static int recover_source(struct rcopy *c, int afd, const char *name, uint64_t size)
{
	char src[PATH_MAX];
	if (snprintf(src, sizeof(src), DS_OUT_NS "/%s", name) >= (int)sizeof(src))
		return -ENAMETOOLONG;
	c->in = openat(afd, src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (c->in < 0)
		return -errno;
	if (fstat(c->in, &c->st) < 0)
		return -errno;
	if (!S_ISREG(c->st.st_mode) || (uint64_t)c->st.st_size != size ||
	    (size && !c->st.st_blocks))
		return -ESTALE; /* not the bytes the service knew */
	return 0;
}

/* The drain directory by descriptor (drain.c): the copy, its rename and the
 * fsync of the directory act on the directory opened here; the copy starts
 * under a temporary name. */
static int recover_target(struct rcopy *c, int dfd, const char *name)
{
	c->pdir = ds__drain_dirat(dfd, name, 1, &c->base);
	if (c->pdir < 0)
		return c->pdir;
	if (snprintf(c->tmp, sizeof(c->tmp), "%s" DS_OUT_DRAIN_TMP "recover.%ld", c->base,
	             (long)getpid()) >= (int)sizeof(c->tmp))
		return -ENAMETOOLONG;
	c->out =
		openat(c->pdir, c->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	return c->out < 0 ? -errno : 0;
}

/* size bytes from in to out, 8 MiB at a time, and their CRC-32C. */
static int recover_copy(int in, int out, uint64_t size, uint32_t *sum)
{
	char *buf = !size ? NULL : malloc(size < (8u << 20) ? size : (8u << 20));
	if (size && !buf)
		return -ENOMEM;
	int rc = 0;
	uint32_t c = 0;
	for (uint64_t off = 0; !rc && off < size;) {
		size_t n = size - off < (8u << 20) ? (size_t)(size - off) : (8u << 20);
		rc = ds_pread_full(in, buf, n, (off_t)off);
		if (!rc)
			rc = ds_pwrite_full(out, buf, n, (off_t)off);
		if (!rc && ds_fault("drain.write", -1))
			rc = -EIO; /* tests: the shared file system fails */
		c = ds_crc32c(c, buf, n);
		off += n;
	}
	free(buf);
	*sum = c;
	return rc;
}

/* The copy under its name, unless rc says it failed: the source's mode and
 * times, fsync, rename, fsync of the directory; on failure the temporary
 * name removed.  Closes the copy's descriptors; rc or the first failure. */
static int recover_finish(struct rcopy *c, int rc)
{
	struct timespec ts[2] = {c->st.st_atim, c->st.st_mtim};
	if (!rc && (fchmod(c->out, c->st.st_mode & 0777) < 0 || futimens(c->out, ts) < 0 ||
	            fsync(c->out) < 0))
		rc = -errno;
	if (c->out >= 0 && close(c->out) < 0 && !rc)
		rc = -errno;
	close(c->in);
	if (!rc && renameat(c->pdir, c->tmp, c->pdir, c->base) < 0)
		rc = -errno;
	if (!rc && fsync(c->pdir) < 0)
		rc = -errno;
	if (rc && c->out >= 0)
		unlinkat(c->pdir, c->tmp, 0);
	if (c->pdir >= 0)
		close(c->pdir);
	return rc;
}

/* Copy AREA/ns/NAME to DIR/NAME the drain's way (temporary name, CRC
 * check, mode and mtime, fsync, rename, fsync of the directory). */
static int recover(int afd, int dfd, const char *name, uint64_t size, int have_crc, uint32_t crc)
{
	const char *why;
	if (afd < 0 || dfd < 0 || ds_name_check(name, strlen(name), &why))
		return -EINVAL;
	struct rcopy c = {.in = -1, .pdir = -1, .out = -1};
	int rc = recover_source(&c, afd, name, size);
	if (c.in < 0)
		return rc;
	if (!rc)
		rc = recover_target(&c, dfd, name);
	uint32_t sum = 0;
	if (!rc)
		rc = recover_copy(c.in, c.out, size, &sum);
	if (!rc && have_crc && sum != crc)
		rc = -DS_ECHECKSUM;
	return recover_finish(&c, rc);
}

void ds_outputs_status_line(const char *jobdir, const char *name)
{
	char p[PATH_MAX], v[6][PATH_MAX], *text;
	snprintf(p, sizeof(p), "%s/%s/" DS_OUT_STATUS, jobdir, name);
	if (ds__out_read_text(p, &text) <= 0) {
		free(text);
		return;
	}
	printf("node %s outputs: %s being written; drain to '%s': pending %s files (%s bytes), drained "
	       "%s files, last '%s'",
	       name, kv(text, "writing", v[0], PATH_MAX), kv(text, "drain_to", v[1], PATH_MAX),
	       kv(text, "pending_files", v[2], PATH_MAX), kv(text, "pending_bytes", v[3], PATH_MAX),
	       kv(text, "drained_files", v[4], PATH_MAX), kv(text, "last_drained", v[5], PATH_MAX));
	if (atoi(kv(text, "failed", v[0], PATH_MAX)))
		printf(", %s FAILED", v[0]);
	printf("\n");
	free(text);
}

void ds_outputs_clean(const char *jobdir)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return;
	const char *jb = strrchr(jobdir, '/');
	jb = jb ? jb + 1 : jobdir;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t k;
		if (ds_parse_u64(de->d_name, &k))
			continue;
		char p[PATH_MAX], text[2 * PATH_MAX + 8];
		snprintf(p, sizeof(p), "%s/%s/" DS_OUT_CONF, jobdir, de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (n <= 0)
			continue;
		text[n] = 0;
		char *area = strchr(text, '\n');
		if (!area)
			continue;
		area++;
		area[strcspn(area, "\n")] = 0;
		/* only what the service made: .../dstage.<uid>.<job>/<node>.out,
		 * a directory of ours, not inside the job directory (that goes
		 * with it) */
		char want[NAME_MAX + 8], parent[PATH_MAX];
		snprintf(want, sizeof(want), "/%s.out", de->d_name);
		size_t al = strlen(area), wl = strlen(want), jl = strlen(jb);
		struct stat st;
		if (al <= wl + jl + 1 || strcmp(area + al - wl, want) ||
		    strncmp(area + al - wl - jl, jb, jl) || area[al - wl - jl - 1] != '/' ||
		    !strncmp(area, jobdir, strlen(jobdir)) || lstat(area, &st) < 0 ||
		    !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
			continue;
		int rc = ds_rm_rf(area);
		if (rc)
			ds_error("'%s': %s", area, ds_strerror(rc));
		snprintf(parent, sizeof(parent), "%.*s", (int)(al - wl), area);
		rmdir(parent); /* when no other node's area is left */
	}
	closedir(d);
}

/* What ds_out_report knows of one node while it reports it. */
struct report {
	const char *node; /* the node directory's name */
	int cleanup;
	char path[PATH_MAX]; /* NODEDIR/outputs.status */
	char *text;          /* its text */
	char dir[PATH_MAX];  /* the drain directory (drain_to) */
	int dfd, afd;        /* it and the output area, with cleanup */
	int dfd_err;         /* why a recovery cannot copy when one is -1 */
	struct ds_buf left;  /* the status lines of the outputs not recovered */
	int any;             /* the status lists an output not drained */
	int bad;
};

/* A recovery holds the node directory: several `dstage drain --wait` at
 * once (one per node, the stores on a file system they share) recover each
 * output once, and the next one reads the status the first left. */
static int report_lock(const char *jobdir, const char *node)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", jobdir, node);
	int lk = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	while (lk >= 0 && flock(lk, LOCK_EX) < 0 && errno == EINTR)
		;
	return lk;
}

/* NODEDIR/outputs.status into r->text: its length, 0 or -errno. */
static ssize_t report_read(struct report *r, const char *jobdir)
{
	snprintf(r->path, sizeof(r->path), "%s/%s/" DS_OUT_STATUS, jobdir, r->node);
	ssize_t n = ds__out_read_text(r->path, &r->text);
	if (n < 0 && n != -ENOENT) {
		/* a status that cannot be read may list outputs: say so */
		ds_error("node %s: '%s': %s", r->node, r->path, ds_strerror((int)n));
		r->bad = 1;
	}
	return n;
}

static void report_print(const struct report *r)
{
	char v[PATH_MAX];
	const char *t = r->text;
	printf("node %s: pending %s files, %s bytes; drained %s files, %s bytes; last "
	       "'%s'; failed %s\n",
	       r->node, kv(t, "pending_files", v, 64), kv(t, "pending_bytes", v + 64, 64),
	       kv(t, "drained_files", v + 128, 64), kv(t, "drained_bytes", v + 192, 64),
	       kv(t, "last_drained", v + 256, 2048), kv(t, "failed", v + 2400, 64));
}

/* The copy the service was making when it ended: a temporary name of ours,
 * in the drain directory, never anything else. */
static void report_remove_tmp(const struct report *r)
{
	char v[PATH_MAX];
	const char *dir = r->dir;
	kv(r->text, "draining_tmp", v, sizeof(v));
	if (r->cleanup && v[0] && dir[0] && !strncmp(v, dir, strlen(dir)) &&
	    v[strlen(dir)] == '/' && strstr(v, DS_OUT_DRAIN_TMP) && !strstr(v, "/../")) {
		if (unlink(v) == 0)
			ds_warn("node %s: removed the half-made copy '%s'", r->node, v);
	}
}

/* With cleanup: the drain directory, by descriptor for the whole recovery,
 * and the output area (it may be in a shared --outputs-to DIR): ours and
 * private, checked on the descriptor it is read from. */
static void report_open_dirs(struct report *r)
{
	char area[PATH_MAX];
	kv(r->text, "area", area, sizeof(area));
	r->dfd = r->cleanup && r->dir[0] ? open(r->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
	r->dfd_err = r->dfd < 0 ? (r->dir[0] ? -errno : -EINVAL) : 0;
	r->afd = r->cleanup && area[0] ? open(area, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
	                               : -1;
	struct stat ast;
	if (r->afd >= 0 &&
	    (fstat(r->afd, &ast) < 0 || ast.st_uid != geteuid() || (ast.st_mode & 077))) {
		close(r->afd);
		r->afd = -1;
		errno = EPERM;
	}
	if (r->afd < 0 && !r->dfd_err)
		r->dfd_err = area[0] ? -errno : -EINVAL;
}

/* The status line q (ll bytes) stays: its output was not recovered. */
static void report_keep(struct report *r, const char *q, size_t ll)
{
	ds_buf_add(&r->left, q, ll);
	ds_buf_add(&r->left, "\n", 1);
	r->bad = 1;
}

/* One line "undrained=SIZE CRC NAME" at q: the service is gone, its bytes
 * are here: copied now (with cleanup), else named and kept. */
static void report_undrained(struct report *r, const char *q)
{
	unsigned long long size;
	unsigned crc = 0;
	int off = 0;
	char name[PATH_MAX], cs[9];
	size_t ll = strcspn(q, "\n");
	if (sscanf(q + 10, "%llu %8s %n", &size, cs, &off) < 2 || !off) {
		/* never skipped in silence: named, and kept */
		ds_error("node %s: '%.*s': a status line that cannot be read", r->node,
		         (int)(ll < 200 ? ll : 200), q);
		report_keep(r, q, ll);
		return;
	}
	/* "--------": the service died before it summed the file (just after
	 * its close): copied without the check */
	int have_crc = strcmp(cs, "--------") != 0;
	size_t nl = strcspn(q + 10 + off, "\n");
	int rc = 0;
	if (have_crc && sscanf(cs, "%x", &crc) != 1)
		rc = -DS_EFORMAT;
	if (nl >= sizeof(name))
		rc = -ENAMETOOLONG; /* never a name cut short */
	snprintf(name, sizeof(name), "%.*s", (int)(nl < sizeof(name) ? nl : 0), q + 10 + off);
	if (!rc)
		rc = !r->cleanup ? -EAGAIN
		     : r->dfd < 0 || r->afd < 0
		             ? r->dfd_err
		             : recover(r->afd, r->dfd, name, size, have_crc, crc);
	if (!rc) {
		ds_warn("node %s: '%s': recovered from the node's output area into '%s' (the "
		        "service had not drained it)",
		        r->node, name, r->dir);
		return;
	}
	ds_error("node %s: '%.*s': closed but not drained to '%s'%s%s", r->node,
	         (int)(nl < 1024 ? nl : 1024), q + 10 + off, r->dir, rc == -EAGAIN ? "" : ": ",
	         rc == -EAGAIN ? "" : ds_strerror(rc));
	report_keep(r, q, ll);
}

/* The status says what is left: the outputs not recovered (a new service
 * refuses to start, and wipes nothing, while one is listed), or
 * recovered=1. */
static void report_rewrite(struct report *r)
{
	struct ds_buf b = {0};
	for (const char *l = r->text; *l;) {
		size_t ll = strcspn(l, "\n");
		if (strncmp(l, "undrained=", 10) && strncmp(l, "failed=", 7) &&
		    strncmp(l, "draining_tmp=", 13) && strncmp(l, "pending_", 8) &&
		    strncmp(l, "recovered=", 10))
			ds_buf_add(&b, l, ll + (l[ll] == '\n'));
		l += ll + (l[ll] == '\n');
	}
	if (r->left.len)
		ds_buf_add(&b, r->left.data, r->left.len);
	else
		ds_buf_add(&b, "recovered=1\n", 12);
	int wrc = ds_write_file_atomic(r->path, b.data, b.len, 0600);
	if (wrc) {
		ds_error("node %s: '%s': %s", r->node, r->path, ds_strerror(wrc));
		r->bad = 1;
	}
	ds_buf_release(&b);
}

/* One node of ds_out_report: 1 when it has outputs not drained (said). */
static int report_node(const char *jobdir, const char *node, int cleanup, int print)
{
	struct report r = {.node = node, .cleanup = cleanup, .dfd = -1, .afd = -1};
	int lk = cleanup ? report_lock(jobdir, node) : -1;
	if (report_read(&r, jobdir) > 0) {
		kv(r.text, "drain_to", r.dir, sizeof(r.dir));
		if (print)
			report_print(&r);
		report_remove_tmp(&r);
		report_open_dirs(&r);
		for (const char *q = r.text; (q = strstr(q, "undrained=")); q++)
			if (q == r.text || q[-1] == '\n') {
				r.any = 1;
				report_undrained(&r, q);
			}
		if (r.dfd >= 0)
			close(r.dfd);
		if (r.afd >= 0)
			close(r.afd);
		char v[PATH_MAX];
		int failed = atoi(kv(r.text, "failed", v, sizeof(v)));
		if (!r.any && failed > 0) {
			ds_error("node %s: %s drain operation(s) to '%s' failed", node, v, r.dir);
			r.bad = 1;
		}
		if (cleanup && r.any)
			report_rewrite(&r);
		ds_buf_release(&r.left);
	}
	free(r.text);
	if (lk >= 0)
		close(lk); /* and its lock */
	return r.bad;
}

int ds_out_report(const char *jobdir, int cleanup, int print)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return 0;
	int bad = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t k;
		if (!ds_parse_u64(de->d_name, &k) &&
		    report_node(jobdir, de->d_name, cleanup, print))
			bad = 1;
	}
	closedir(d);
	return bad;
}

/* Before a recovery: every node's last service (NODEDIR/serve.status) has
 * ended.  A leaving service still writes its outputs.status (ds_out_stop),
 * and its socket is gone or refuses well before its process is: a launcher
 * may return, and a drain come, while the ranks it signalled are leaving.
 * Waits until TIMEOUT (0: DRAIN_LEAVE_WAIT s); 0, or 1 (said) when one
 * has not ended. */
#define DRAIN_LEAVE_WAIT 60.0
static int services_gone(const char *jobdir, double timeout)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return 0;
	double until = ds_now() + (timeout > 0 ? timeout : DRAIN_LEAVE_WAIT);
	int bad = 0;
	struct dirent *de;
	while (!bad && (de = readdir(d))) {
		uint64_t k;
		char p[PATH_MAX], v[64], *text = NULL;
		if (ds_parse_u64(de->d_name, &k))
			continue;
		snprintf(p, sizeof(p), "%s/%s/" DS_SERVE_STATUS_NAME, jobdir, de->d_name);
		if (ds__out_read_text(p, &text) <= 0) {
			free(text);
			continue;
		}
		long pid = atol(kv(text, DS_SS_PID, v, sizeof(v)));
		free(text);
		if (pid <= 0 || pid == (long)getpid())
			continue;
		/* a pid reused since by another program is not the service */
		snprintf(p, sizeof(p), "/proc/%ld/comm", pid);
		for (;;) {
			char comm[32] = "";
			FILE *f = fopen(p, "re");
			if (!f)
				break; /* gone */
			int named = fgets(comm, sizeof(comm), f) && !strcmp(comm, "dstage\n");
			fclose(f);
			if (!named || (kill((pid_t)pid, 0) < 0 && errno == ESRCH))
				break;
			if (ds_now() > until) {
				ds_error("node %s: its service (pid %ld) is still leaving after %g s: not "
				         "recovering under it (try again once it has ended)",
				         de->d_name, pid, timeout > 0 ? timeout : DRAIN_LEAVE_WAIT);
				bad = 1;
				break;
			}
			usleep(20000);
		}
	}
	closedir(d);
	return bad;
}

int ds_cmd_drain(int argc, char **argv)
{
	struct ds_jobcmd j = {.timeout = 0};
	int st = ds_jobcmd_args(argc, argv, drain_usage, 1, &j);
	if (st >= 0)
		return st;
	double timeout = j.timeout;
	int wait = j.wait;
	char *jobdir = j.jobdir;
	DIR *d = j.d;
	if (!wait) {
		closedir(d);
		int bad = ds_out_report(jobdir, 0, 1);
		free(jobdir);
		return bad;
	}
	/* any node's outputs service: node 0 gathers the answer of every node */
	int rc = -ENOENT;
	struct dirent *de;
	struct ds_out_req *q = ds_xcalloc(1, sizeof(*q));
	q->op = DS_OUT_DRAIN;
	while (rc == -ENOENT && (de = readdir(d))) {
		uint64_t k;
		char sock[PATH_MAX];
		if (ds_parse_u64(de->d_name, &k))
			continue;
		snprintf(sock, sizeof(sock), "%s/%s/" DS_OUT_SOCK, jobdir, de->d_name);
		if (access(sock, F_OK))
			continue;
		rc = ask(sock, q, timeout);
		if (rc == -ECONNREFUSED || rc == -ESHUTDOWN)
			rc = -ENOENT; /* a socket left by a killed service, or one leaving */
	}
	closedir(d);
	free(q);
	int bad = 0;
	if (rc == -ENOENT) {
		/* nobody to wait for: what did the last service leave? */
		bad = services_gone(jobdir, timeout);
		if (!bad)
			bad = ds_out_report(jobdir, 1, 0);
		if (!bad)
			ds_info("'%s': no outputs service running; every closed output was drained", jobdir);
	} else if (rc) {
		ds_error("'%s': %s", jobdir,
		         rc == -EIO ? "some outputs could not be drained (see the service's log)"
		                    : ds_strerror(rc));
		bad = 1;
	}
	free(jobdir);
	return bad;
}
