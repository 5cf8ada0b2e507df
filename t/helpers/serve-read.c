/* SPDX-License-Identifier: BSD-3-Clause */
/* serve-read: a reader that speaks dsproto.h to the node service directly
 * (no shim), for the service's tests and benchmarks.
 *
 *   serve-read [options] JOBDIR NODE
 *     -a            read every file of the index (default: the paths on stdin)
 *     -L, -R        with -a: only the files this node holds / does not hold
 *     -e E          follow node NODE's epoch-E list (ds_epoch_share with
 *                   JOBDIR/epoch.conf); announce E to the service first
 *     -c            with -e: take samples from the epoch cache when there
 *     -w SECS       with -c: wait up to SECS for a pending cache entry
 *     -t THREADS    readers in parallel (one connection each)
 *     -s USEC       sleep USEC between files (a slow reader)
 *     -r REPEAT     read everything REPEAT times
 *     -o FILE       write the bytes read, concatenated, to FILE
 *     -q ID:OFF:LEN:OP  one raw request (OP 1 read, 2 ping, 3 epoch, other):
 *                   prints "status=S len=N" and exits 0
 *
 * Every file's bytes are checked against the CRC-32C in the index (zlib
 * files are checked as stored: their CRC is of the inflated content, so
 * only their length is checked).  Prints one line of counts:
 *   files=N local=N cache=N remote=N stalls=N bytes=N errors=N seconds=S
 * and exits 1 when any read failed or mismatched. */
#include "cache_test.h"
#include "dscommon.h"
#include "dsepoch.h"
#include "dsindex.h"
#include "dsproto.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static struct ds_index ix;
static const unsigned char *store;
static uint32_t node;
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
static struct ds_cache_set *cache;
static uint32_t *ids;
static size_t nids;
static int use_cache, nthreads = 1, repeat = 1;
static double cache_wait;
static long sleep_us;
static FILE *out;
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

struct counts {
	uint64_t files, local, cached, remote, stalls, bytes, errors;
};

static int conn_open(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, sock_path, sizeof(sa.sun_path));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct timeval tv = {30, 0};
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

static int xfer(int fd, void *buf, size_t len, int send_it)
{
	char *p = buf;
	while (len) {
		ssize_t n = send_it ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int request(int *fd, uint32_t op, uint32_t id, uint64_t off, uint64_t len, void *buf,
                   uint64_t *got)
{
	if (*fd < 0 && (*fd = conn_open()) < 0)
		return -ECONNREFUSED;
	struct ds_req q = {DS_PROTO_MAGIC, op, id, 0, off, len};
	struct ds_resp a;
	if (xfer(*fd, &q, sizeof(q), 1) || xfer(*fd, &a, sizeof(a), 0) || a.magic != DS_PROTO_MAGIC ||
	    (a.status == 0 && a.len > len) || (a.status == 0 && a.len && xfer(*fd, buf, a.len, 0))) {
		close(*fd);
		*fd = -1;
		return -EIO;
	}
	if (got)
		*got = a.len;
	return a.status;
}

static int read_remote(int *fd, uint32_t id, unsigned char *buf, uint64_t len)
{
	uint64_t off = 0;
	while (off < len) {
		uint64_t want = len - off < DS_MAX_READ ? len - off : DS_MAX_READ, got = 0;
		int rc = request(fd, DS_OP_READ, id, off, want, buf + off, &got);
		if (rc)
			return rc;
		if (got != want)
			return -EIO;
		off += got;
	}
	return 0;
}

static void read_one(int *fd, uint32_t id, struct counts *c)
{
	struct ds_ix_file fe, *e = &fe;
	ds_ix_file(&ix, id, e);
	char name[PATH_MAX];
	ds_ix_path(&ix, id, name, sizeof(name));
	unsigned char *buf = malloc(e->stored ? e->stored : 1);
	const unsigned char *data = NULL;
	uint64_t base;
	struct ds_cache_ref *ref = NULL;
	int rc = 0;
	if (ds_index_part_on(&ix, e->part, node, &base)) {
		/* copy out, as read(2) through the shim would */
		memcpy(buf, store + base + e->poff, e->stored);
		data = buf;
		c->local++;
	} else {
		if (use_cache) {
			const void *d;
			uint64_t len;
			double until = ds_now() + cache_wait;
			int r;
			int stalled = 0;
			while ((r = ds_cache_find(cache, id, &d, &len, &ref)) == -EAGAIN && ds_now() < until) {
				stalled = 1;
				usleep(200);
			}
			if (r == -EAGAIN || stalled)
				c->stalls++;
			if (r == 1) {
				memcpy(buf, d, len);
				data = buf;
				c->cached++;
			}
		}
		if (!data) {
			rc = read_remote(fd, id, buf, e->stored);
			data = buf;
			c->remote++;
		}
	}
	if (rc) {
		fprintf(stderr, "serve-read: '%s': %s\n", name, strerror(-rc));
		c->errors++;
	} else if (e->codec == DS_CODEC_NONE && ds_crc32c(0, data, e->stored) != e->crc) {
		fprintf(stderr, "serve-read: '%s': checksum mismatch\n", name);
		c->errors++;
	} else if (out) {
		pthread_mutex_lock(&out_mu);
		fwrite(data, 1, e->stored, out);
		pthread_mutex_unlock(&out_mu);
	}
	c->files++;
	c->bytes += e->stored;
	if (ref)
		ds_cache_put(ref);
	free(buf);
	if (sleep_us)
		usleep(sleep_us);
}

struct worker {
	pthread_t t;
	int l;
	struct counts c;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	int fd = -1;
	for (int r = 0; r < repeat; r++)
		/* the torch DistributedSampler split: reader l takes l, l+n, ... */
		for (size_t i = (size_t)w->l; i < nids; i += (size_t)nthreads)
			read_one(&fd, ids[i], &w->c);
	if (fd >= 0)
		close(fd);
	return NULL;
}

int main(int argc, char **argv)
{
	int all = 0, only = 0, c;
	long long epoch = -1;
	const char *raw = NULL;
	while ((c = getopt(argc, argv, "aLRe:cw:t:s:r:o:q:")) != -1) {
		switch (c) {
		case 'a': all = 1; break;
		case 'L': only = 'L'; break;
		case 'R': only = 'R'; break;
		case 'e': epoch = atoll(optarg); break;
		case 'c': use_cache = 1; break;
		case 'w': cache_wait = atof(optarg); break;
		case 't': nthreads = atoi(optarg); break;
		case 's': sleep_us = atol(optarg); break;
		case 'r': repeat = atoi(optarg); break;
		case 'o': out = fopen(optarg, "w"); break;
		case 'q': raw = optarg; break;
		default: return 2;
		}
	}
	if (argc - optind != 2 || nthreads < 1)
		return 2;
	const char *jobdir = argv[optind];
	node = (uint32_t)atoi(argv[optind + 1]);
	char nodedir[PATH_MAX], path[PATH_MAX + 16];
	snprintf(nodedir, sizeof(nodedir), "%s/%u", jobdir, node);
	snprintf(path, sizeof(path), "%s/index", nodedir);
	int rc = ds_index_open(&ix, path, 0);
	if (rc) {
		fprintf(stderr, "serve-read: '%s': %s\n", path, ds_strerror(rc));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/store", nodedir);
	int fd = open(path, O_RDONLY);
	if (fd >= 0 && ix.h->store_size)
		store = mmap(NULL, ix.h->store_size, PROT_READ, MAP_SHARED, fd, 0);
	if (snprintf(sock_path, sizeof(sock_path), "%s/" DS_SOCK_NAME, nodedir) >= (int)sizeof(sock_path)) {
		fprintf(stderr, "serve-read: '%s': path too long for a socket\n", nodedir);
		return 1;
	}
	if (raw) {
		unsigned long long id = 0, off = 0, len = 0;
		unsigned op = DS_OP_READ;
		sscanf(raw, "%llu:%llu:%llu:%u", &id, &off, &len, &op);
		unsigned char *buf = malloc(len + 1);
		uint64_t got = 0;
		int cfd = -1;
		rc = request(&cfd, op, (uint32_t)id, off, len, buf, &got);
		printf("status=%d len=%llu\n", rc, (unsigned long long)got);
		return 0;
	}
	if (epoch >= 0) {
		struct ds_epoch_cfg cfg;
		if ((rc = ds_epoch_cfg_load(jobdir, &cfg)) ||
		    (rc = ds_epoch_share(&ix, &cfg, (uint64_t)epoch, node, &ids, &nids))) {
			fprintf(stderr, "serve-read: epoch %lld: %s\n", epoch, ds_strerror(rc));
			return 1;
		}
		int cfd = -1;
		if (request(&cfd, DS_OP_EPOCH, 0, (uint64_t)epoch, 0, NULL, NULL))
			fprintf(stderr, "serve-read: could not announce epoch %lld\n", epoch);
		if (cfd >= 0)
			close(cfd);
		if (use_cache)
			cache = ds_cache_set_new(nodedir);
	} else if (all) {
		ids = malloc(ix.h->nentries * sizeof(uint32_t));
		for (uint32_t i = 0; i < ix.h->nentries; i++) {
			if (!S_ISREG(ds_ix_mode(&ix, i)))
				continue;
			int here = ds_index_part_on(&ix, ds_ix_part(&ix, i), node, NULL);
			if ((only == 'L' && !here) || (only == 'R' && here))
				continue;
			ids[nids++] = i;
		}
	} else {
		char line[PATH_MAX];
		size_t cap = 0;
		while (fgets(line, sizeof(line), stdin)) {
			line[strcspn(line, "\n")] = 0;
			int64_t id = ds_index_lookup(&ix, line, strlen(line));
			if (id < 0 || !S_ISREG(ds_ix_mode(&ix, (uint32_t)id))) {
				fprintf(stderr, "serve-read: '%s': not a staged file\n", line);
				return 1;
			}
			if (nids == cap)
				ids = realloc(ids, (cap = cap ? 2 * cap : 1024) * sizeof(uint32_t));
			ids[nids++] = (uint32_t)id;
		}
	}
	struct worker *w = calloc((size_t)nthreads, sizeof(*w));
	double t0 = ds_now();
	for (int i = 0; i < nthreads; i++) {
		w[i].l = i;
		pthread_create(&w[i].t, NULL, work, &w[i]);
	}
	struct counts tot = {0};
	for (int i = 0; i < nthreads; i++) {
		pthread_join(w[i].t, NULL);
		tot.files += w[i].c.files;
		tot.local += w[i].c.local;
		tot.cached += w[i].c.cached;
		tot.remote += w[i].c.remote;
		tot.stalls += w[i].c.stalls;
		tot.bytes += w[i].c.bytes;
		tot.errors += w[i].c.errors;
	}
	double dt = ds_now() - t0;
	printf("files=%llu local=%llu cache=%llu remote=%llu stalls=%llu bytes=%llu errors=%llu seconds=%.3f\n",
	       (unsigned long long)tot.files, (unsigned long long)tot.local,
	       (unsigned long long)tot.cached, (unsigned long long)tot.remote,
	       (unsigned long long)tot.stalls, (unsigned long long)tot.bytes,
	       (unsigned long long)tot.errors, dt);
	if (out)
		fclose(out);
	free(w);
	free(ids);
	ds_cache_set_free(cache);
	return tot.errors ? 1 : 0;
}
