/* SPDX-License-Identifier: BSD-3-Clause */
/* drain_cmd.c: `dstage drain`: wait until every closed output is durable in
 * the drain directory, or, when no service runs any more (stopped, killed),
 * report from NODEDIR/outputs.status what was closed and not drained and
 * remove the copy that was half made (it only ever has a temporary name). */
#include "dsout.h"
#include "dssock.h"
#include "jobcmd.h"
#include "dsserve.h"
#include "svc.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
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
	"  service running: report the outputs that were closed and not drained (exit 1 if\n"
	"  any) and remove a half-made copy.  Without --wait: print the drain figures of the\n"
	"  nodes stored here.\n";

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
	if (rc && rc != -ETIMEDOUT)
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

/* Copy AREA/ns/NAME to DIR/NAME the drain's way (temporary name, CRC
 * check, mode and mtime, fsync, rename, fsync of the directory). */
static int recover(const char *area, const char *dir, const char *name, uint64_t size, int have_crc,
                   uint32_t crc)
{
	const char *why;
	char src[PATH_MAX], tmp[PATH_MAX], dst[PATH_MAX];
	if (!area[0] || !dir[0] || ds_name_check(name, strlen(name), &why))
		return -EINVAL;
	if (snprintf(src, sizeof(src), "%s/" DS_OUT_NS "/%s", area, name) >= (int)sizeof(src) ||
	    snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= (int)sizeof(dst) ||
	    snprintf(tmp, sizeof(tmp), "%s" DS_OUT_DRAIN_TMP "recover.%ld", dst, (long)getpid()) >=
	            (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return -errno;
	struct stat st;
	int rc = fstat(in, &st) < 0 ? -errno : 0;
	if (!rc && (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size || (size && !st.st_blocks)))
		rc = -ESTALE; /* not the bytes the service knew */
	char parent[PATH_MAX];
	snprintf(parent, sizeof(parent), "%s", dst);
	*strrchr(parent, '/') = 0;
	if (!rc)
		rc = ds_mkdir_p(parent, 0755);
	int out = rc ? -1 : open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (!rc && out < 0)
		rc = -errno;
	char *buf = rc ? NULL : malloc(8u << 20);
	if (!rc && !buf)
		rc = -ENOMEM;
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
	if (!rc && have_crc && c != crc)
		rc = -DS_ECHECKSUM;
	struct timespec ts[2] = {st.st_atim, st.st_mtim};
	if (!rc && (fchmod(out, st.st_mode & 0777) < 0 || futimens(out, ts) < 0 || fsync(out) < 0))
		rc = -errno;
	if (out >= 0 && close(out) < 0 && !rc)
		rc = -errno;
	close(in);
	if (!rc && rename(tmp, dst) < 0)
		rc = -errno;
	if (!rc) {
		int dfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd < 0 || fsync(dfd) < 0)
			rc = -errno;
		if (dfd >= 0)
			close(dfd);
	}
	if (rc && out >= 0)
		unlink(tmp);
	return rc;
}

void ds_outputs_status_line(const char *jobdir, const char *name)
{
	char p[PATH_MAX], text[1 << 16], v[6][PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s/" DS_OUT_STATUS, jobdir, name);
	int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return;
	text[n] = 0;
	printf("node %s outputs: %s being written; drain to '%s': pending %s files (%s bytes), drained "
	       "%s files, last '%s'",
	       name, kv(text, "writing", v[0], PATH_MAX), kv(text, "drain_to", v[1], PATH_MAX),
	       kv(text, "pending_files", v[2], PATH_MAX), kv(text, "pending_bytes", v[3], PATH_MAX),
	       kv(text, "drained_files", v[4], PATH_MAX), kv(text, "last_drained", v[5], PATH_MAX));
	if (atoi(kv(text, "failed", v[0], PATH_MAX)))
		printf(", %s FAILED", v[0]);
	printf("\n");
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

int ds__out_report(const char *jobdir, int cleanup, int print)
{
	DIR *d = opendir(jobdir);
	if (!d)
		return 0;
	int bad = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		uint64_t k;
		if (ds_parse_u64(de->d_name, &k))
			continue;
		char p[PATH_MAX], text[1 << 16], v[PATH_MAX], dir[PATH_MAX];
		/* a recovery holds the node directory: several `dstage drain
		 * --wait` at once (one per node, the stores on a file system
		 * they share) recover each output once, and the next one reads
		 * the status the first left */
		int lk = -1;
		if (cleanup) {
			snprintf(p, sizeof(p), "%s/%s", jobdir, de->d_name);
			lk = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
			while (lk >= 0 && flock(lk, LOCK_EX) < 0 && errno == EINTR)
				;
		}
		snprintf(p, sizeof(p), "%s/%s/" DS_OUT_STATUS, jobdir, de->d_name);
		int fd = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);
		if (fd >= 0)
			close(fd);
		if (n <= 0) {
			if (lk >= 0)
				close(lk);
			continue;
		}
		text[n] = 0;
		kv(text, "drain_to", dir, sizeof(dir));
		if (print)
			printf("node %s: pending %s files, %s bytes; drained %s files, %s bytes; last "
			       "'%s'; failed %s\n",
			       de->d_name, kv(text, "pending_files", v, 64), kv(text, "pending_bytes", v + 64, 64),
			       kv(text, "drained_files", v + 128, 64), kv(text, "drained_bytes", v + 192, 64),
			       kv(text, "last_drained", v + 256, 2048), kv(text, "failed", v + 2400, 64));
		kv(text, "draining_tmp", v, sizeof(v));
		/* a temporary name of ours, in the drain directory: never
		 * anything else */
		if (cleanup && v[0] && dir[0] && !strncmp(v, dir, strlen(dir)) && v[strlen(dir)] == '/' &&
		    strstr(v, DS_OUT_DRAIN_TMP) && !strstr(v, "/../")) {
			if (unlink(v) == 0)
				ds_warn("node %s: removed the half-made copy '%s'", de->d_name, v);
		}
		char area[PATH_MAX];
		kv(text, "area", area, sizeof(area));
		int any = 0, lost = 0;
		for (const char *q = text; (q = strstr(q, "undrained=")); q++) {
			if (q != text && q[-1] != '\n')
				continue;
			unsigned long long size;
			unsigned crc = 0;
			int off = 0;
			char name[PATH_MAX], cs[9];
			if (sscanf(q + 10, "%llu %8s %n", &size, cs, &off) < 2 || !off)
				continue;
			/* "--------": the service died before it summed the file
			 * (just after its close): copied without the check */
			int have_crc = strcmp(cs, "--------") != 0;
			if (have_crc && sscanf(cs, "%x", &crc) != 1)
				continue;
			int nl = (int)strcspn(q + 10 + off, "\n");
			snprintf(name, sizeof(name), "%.*s", nl, q + 10 + off);
			any = 1;
			/* the service is gone, its bytes are here: copy them now */
			int rc = cleanup ? recover(area, dir, name, size, have_crc, crc) : -EAGAIN;
			if (!rc) {
				ds_warn("node %s: '%s': recovered from the node's output area into '%s' (the "
				        "service had not drained it)",
				        de->d_name, name, dir);
				continue;
			}
			ds_error("node %s: '%s': closed but not drained to '%s'%s%s", de->d_name, name, dir,
			         rc == -EAGAIN ? "" : ": ", rc == -EAGAIN ? "" : ds_strerror(rc));
			bad = lost = 1;
		}
		int failed = atoi(kv(text, "failed", v, sizeof(v)));
		if (!any && failed > 0) {
			ds_error("node %s: %s drain operation(s) to '%s' failed", de->d_name, v, dir);
			bad = lost = 1;
		}
		if (cleanup && (any || failed) && !lost) {
			/* all recovered: the status says so (a new service may start) */
			struct ds_buf b = {0};
			for (const char *l = text; *l;) {
				size_t ll = strcspn(l, "\n");
				if (strncmp(l, "undrained=", 10) && strncmp(l, "failed=", 7) &&
				    strncmp(l, "draining_tmp=", 13) && strncmp(l, "pending_", 8))
					ds_buf_add(&b, l, ll + (l[ll] == '\n'));
				l += ll + (l[ll] == '\n');
			}
			ds_buf_add(&b, "recovered=1\n", 12);
			ds_write_file_atomic(p, b.data, b.len, 0600);
			ds_buf_release(&b);
		}
		if (lk >= 0)
			close(lk); /* and its lock */
	}
	closedir(d);
	return bad;
}

int ds_cmd_drain(int argc, char **argv)
{
	struct ds__jobcmd j = {.timeout = 0};
	int st = ds__jobcmd_args(argc, argv, drain_usage, 1, &j);
	if (st >= 0)
		return st;
	double timeout = j.timeout;
	int wait = j.wait;
	char *jobdir = j.jobdir;
	DIR *d = j.d;
	if (!wait) {
		closedir(d);
		int bad = ds__out_report(jobdir, 0, 1);
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
		if (rc == -ECONNREFUSED)
			rc = -ENOENT; /* a socket left by a killed service */
	}
	closedir(d);
	free(q);
	int bad = 0;
	if (rc == -ENOENT) {
		/* nobody to wait for: what did the last service leave? */
		bad = ds__out_report(jobdir, 1, 0);
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
