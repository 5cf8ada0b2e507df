/* SPDX-License-Identifier: BSD-3-Clause */
/* fake-service: a stand-in for the node service (shuffle/), libc only, for
 * the shim's remote-read tests.  It speaks common/dsproto.h on
 * JOBDIR/NODE/sock and answers DS_OP_READ by reading the stored bytes
 * straight from the store of a node that holds them (all node stores of a
 * simulated job are on this machine).
 *
 *   fake-service [--hang] [--die-after N] [--log FILE] JOBDIR NODE
 *
 *   --hang          accept and read requests, never answer (a stuck service)
 *   --die-after N   exit after answering N requests (a crashed service)
 *   --log FILE      append one line per request ("read ID OFF LEN", "epoch E")
 *
 * Prints "ready" on stdout once it listens. */
#include "dscommon.h"
#include "dsindex.h"
#include "dsproto.h"

#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static struct ds_index ix;
static const char *jobdir;
static int hang, die_after = -1, served;
static FILE *logfp;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int full(int fd, void *buf, size_t len, int out)
{
	char *p = buf;
	while (len) {
		ssize_t n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n <= 0)
			return -1;
		p += n;
		len -= n;
	}
	return 0;
}

/* The stored bytes [off, off+len) of entry id from some node's store. */
static int read_stored(uint32_t id, uint64_t off, uint64_t len, char *buf)
{
	if (id >= ix.h->nentries || !S_ISREG(ds_ix_mode(&ix, id)))
		return -ENOENT;
	const struct ds_part *p = &ix.parts[ds_ix_part(&ix, id)];
	if (p->nloc == 0)
		return -EIO;
	const struct ds_loc *l = &ix.locs[p->loc];
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%u/store", jobdir, l->node);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int rc = ds_pread_full(fd, buf, len, l->base + ds_ix_poff(&ix, id) + off);
	close(fd);
	return rc;
}

static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	struct ds_req q;
	while (full(c, &q, sizeof(q), 0) == 0) {
		pthread_mutex_lock(&lock);
		if (logfp) {
			if (q.op == DS_OP_EPOCH)
				fprintf(logfp, "epoch %llu\n", (unsigned long long)q.off);
			else
				fprintf(logfp, "read %u %llu %llu\n", q.id, (unsigned long long)q.off,
				        (unsigned long long)q.len);
			fflush(logfp);
		}
		pthread_mutex_unlock(&lock);
		if (hang)
			continue;
		struct ds_resp a = {DS_PROTO_MAGIC, 0, 0};
		char *buf = NULL;
		if (q.magic != DS_PROTO_MAGIC) {
			a.status = -EPROTO;
		} else if (q.op == DS_OP_READ) {
			uint64_t stored = q.id < ix.h->nentries ? ds_ix_stored(&ix, q.id) : 0;
			uint64_t len = q.off >= stored ? 0 : stored - q.off < q.len ? stored - q.off : q.len;
			if (q.len > DS_MAX_READ) {
				a.status = -EINVAL;
			} else if ((buf = malloc(len ? len : 1)) == NULL) {
				a.status = -ENOMEM;
			} else {
				a.status = read_stored(q.id, q.off, len, buf);
				a.len = a.status ? 0 : len;
			}
		} else if (q.op != DS_OP_PING && q.op != DS_OP_EPOCH) {
			a.status = -EINVAL;
		}
		int bad = full(c, &a, sizeof(a), 1) || (a.len && full(c, buf, a.len, 1));
		free(buf);
		if (bad)
			break;
		pthread_mutex_lock(&lock);
		if (die_after >= 0 && ++served >= die_after)
			_exit(0);
		pthread_mutex_unlock(&lock);
	}
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {{"hang", no_argument, 0, 'h'},
	                                   {"die-after", required_argument, 0, 'd'},
	                                   {"log", required_argument, 0, 'l'},
	                                   {0, 0, 0, 0}};
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'h': hang = 1; break;
		case 'd': die_after = atoi(optarg); break;
		case 'l': logfp = fopen(optarg, "a"); break;
		default: return 2;
		}
	}
	if (argc - optind != 2) {
		fprintf(stderr, "usage: fake-service [--hang] [--die-after N] [--log FILE] JOBDIR NODE\n");
		return 2;
	}
	jobdir = argv[optind];
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%s/index", jobdir, argv[optind + 1]);
	int rc = ds_index_open(&ix, path, 1);
	if (rc) {
		fprintf(stderr, "fake-service: '%s': %s\n", path, ds_strerror(rc));
		return 1;
	}
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/%s", jobdir, argv[optind + 1], DS_SOCK_NAME);
	unlink(sa.sun_path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	mode_t old = umask(0077);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(s, 64) < 0) {
		perror("fake-service: listen");
		return 1;
	}
	umask(old);
	signal(SIGPIPE, SIG_IGN);
	printf("ready\n");
	fflush(stdout);
	for (;;) {
		int conn = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		pthread_t t;
		pthread_create(&t, NULL, serve, (void *)(intptr_t)conn);
		pthread_detach(t);
	}
}
