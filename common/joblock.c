/* SPDX-License-Identifier: BSD-3-Clause */
/* joblock.c: the job directory's lock (see dslock.h). */
#include "dscommon.h"
#include "dslock.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The locks this process holds (a few at most: one per job it acts on).
 * Only a command's main thread takes or drops them. */
static struct held {
	char path[PATH_MAX];
	char line[384];
	int fd, refs;
} held[8];

static struct held *find(const char *jobdir)
{
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++)
		if (held[i].refs && !strcmp(held[i].path, jobdir))
			return &held[i];
	return NULL;
}

/* The holder's description, made printable (it is read from a file). */
static void read_who(int fd, char *who, size_t wholen)
{
	char buf[384];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	size_t j = 0;
	for (ssize_t i = 0; n > 0 && i < n && buf[i] != '\n' && j + 1 < wholen; i++)
		who[j++] = (buf[i] >= 0x20 && buf[i] < 0x7f) ? buf[i] : '?';
	if (wholen)
		who[j] = '\0';
}

/* Whether the description who names a live holder: "dstage WHAT, pid P on
 * host H, ..." with P alive when H is this host (another host's pid cannot
 * be checked from here: taken as alive).  The file keeps the description of
 * a holder that was killed (an orderly drop empties it), and a new holder
 * writes its own only after its flock: a loser reading in between finds ""
 * or a dead process's line, not the holder's. */
static int who_alive(const char *who)
{
	const char *p = strstr(who, ", pid ");
	int pid, n = 0;
	char host[256], me[256] = "";
	if (!*who)
		return 0;
	if (!p || sscanf(p, ", pid %d on host %255[^,]%n", &pid, host, &n) != 2 || !n || pid <= 0)
		return 1; /* not ours to judge */
	gethostname(me, sizeof(me) - 1);
	return strcmp(host, me) || kill(pid, 0) == 0 || errno != ESRCH;
}

/* The lock is busy: the holder's description, once the holder has written
 * it (it does so right after its flock; DS_WHO_WAIT seconds at most, which
 * only a loaded machine's scheduler approaches), "" when it never did.
 * 1 when the lock was freed meanwhile (take it again), else 0. */
#define DS_WHO_WAIT 5.0
static int busy_who(int fd, char *who, size_t wholen)
{
	char buf[384];
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		read_who(fd, buf, sizeof(buf));
		if (who_alive(buf))
			break;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > DS_WHO_WAIT) {
			buf[0] = '\0';
			break;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 1; /* the holder left (our close frees it again) */
		usleep(10000);
	}
	snprintf(who, wholen, "%s", buf);
	return 0;
}

static void write_who(struct held *h, const char *state)
{
	char line[sizeof(h->line) + 32];
	int n = snprintf(line, sizeof(line), "%s%s%s\n", h->line, state ? " " : "", state ? state : "");
	if (n > 0 && (size_t)n < sizeof(line) && ftruncate(h->fd, 0) == 0)
		(void)ds_pwrite_full(h->fd, line, (size_t)n, 0);
}

int ds_joblock_take(const char *jobdir, const char *what, char *who, size_t wholen)
{
	if (wholen)
		*who = '\0';
	struct held *h = find(jobdir);
	if (h) {
		h->refs++;
		return 0;
	}
	for (size_t i = 0; i < sizeof(held) / sizeof(held[0]) && !h; i++)
		if (!held[i].refs)
			h = &held[i];
	if (!h || strlen(jobdir) >= sizeof(h->path) - sizeof(DS_LOCK_NAME) - 1)
		return -ENOMEM;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" DS_LOCK_NAME, jobdir);
	/* A clean that removed the directory meanwhile leaves us a lock on an
	 * unlinked file: take the new one then (a few rounds at most). */
	for (int round = 0; round < 16; round++) {
		/* O_NONBLOCK: a FIFO planted as the lock must not hang us */
		int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
		if (fd < 0)
			return errno == ELOOP ? -EPERM : -errno;
		struct stat st, now;
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
			close(fd);
			return -EPERM;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			int e = errno;
			if (e == EWOULDBLOCK && wholen && busy_who(fd, who, wholen)) {
				close(fd);
				continue;
			}
			close(fd);
			return e == EWOULDBLOCK ? -EBUSY : -e;
		}
		if (stat(path, &now) < 0 || now.st_ino != st.st_ino || now.st_dev != st.st_dev) {
			close(fd);
			continue;
		}
		char host[256] = "?", when[64] = "?";
		gethostname(host, sizeof(host) - 1);
		time_t t = time(NULL);
		struct tm tm;
		if (localtime_r(&t, &tm))
			strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
		snprintf(h->path, sizeof(h->path), "%s", jobdir);
		snprintf(h->line, sizeof(h->line), "dstage %s, pid %d on host %s, since %s", what,
		         (int)getpid(), host, when);
		h->fd = fd;
		h->refs = 1;
		write_who(h, NULL);
		return 0;
	}
	return -EAGAIN;
}

void ds_joblock_note(const char *jobdir, const char *state)
{
	struct held *h = find(jobdir);
	if (h)
		write_who(h, state);
}

void ds_joblock_drop(const char *jobdir)
{
	struct held *h = find(jobdir);
	if (!h || --h->refs)
		return;
	/* no description of a process that holds nothing: the next holder's
	 * losers, before it writes its own, find "" (busy_who) */
	if (ftruncate(h->fd, 0) < 0 && errno != EBADF)
		ds_debug("'%s/" DS_LOCK_NAME "': %s", h->path, strerror(errno));
	close(h->fd); /* frees the lock */
	h->fd = -1;
	h->path[0] = '\0';
}

int ds_joblock_remove_dir(const char *jobdir, int all)
{
	if (!find(jobdir))
		return -ENOLCK;
	DIR *d = opendir(jobdir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	int rc = 0, others = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		const char *n = de->d_name;
		if (!strcmp(n, ".") || !strcmp(n, "..") || !strcmp(n, DS_LOCK_NAME))
			continue;
		if (!all) {
			others = 1;
			break;
		}
		char p[PATH_MAX];
		if ((size_t)snprintf(p, sizeof(p), "%s/%s", jobdir, n) >= sizeof(p))
			continue;
		int r = ds_rm_rf(p);
		if (r && !rc)
			rc = r;
	}
	closedir(d);
	if (others || rc)
		return rc;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/" DS_LOCK_NAME, jobdir);
	unlink(p);
	if (rmdir(jobdir) < 0 && errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST)
		return -errno;
	return 0;
}

int ds_jobdir_make(const char *to, const char *jobdir)
{
	struct stat st;
	int rc = ds_mkdir_p(to, 0755);
	if (rc) {
		ds_error("'%s': %s", to, ds_strerror(rc));
		return rc;
	}
	if (mkdir(jobdir, 0700) < 0 && errno != EEXIST) {
		rc = -errno;
		ds_error("'%s': %s", jobdir, strerror(errno));
	} else if (lstat(jobdir, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) {
		rc = -EPERM;
		ds_error("'%s': not a directory of this user", jobdir);
	} else if (chmod(jobdir, 0700) < 0) {
		rc = -errno;
		ds_error("'%s': %s", jobdir, strerror(errno));
	}
	return rc;
}
