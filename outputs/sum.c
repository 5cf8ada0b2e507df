/* SPDX-License-Identifier: BSD-3-Clause */
/* sum.c: the sums after close.  One thread per node sums each file this
 * node publishes, oldest first, as soon as it is published: the writer's
 * close does not wait for it.  A fetch by another node is answered, and the
 * drain copies a file, only once its sum is known; both check the bytes
 * they move against it. */
#include "dsout.h"
#include "outputs.h"
#include "outrepl.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The CRC-32C of a mapped file, SUM_CHUNK bytes at a time: a stop
 * (ds_out_stop sets squit, then joins this thread) does not wait for the
 * rest of a large file (GiBs from an --outputs-to disk take seconds).
 * 0, or -ECANCELED. */
#define SUM_CHUNK (8u << 20)
static int sum_map(struct ds_out *o, const char *map, uint64_t size, uint32_t *crc)
{
	uint32_t c = 0;
	for (uint64_t off = 0; off < size;) {
		if (__atomic_load_n(&o->squit, __ATOMIC_RELAXED))
			return -ECANCELED;
		/* tests: a slow sum, each chunk (t/2209, t/2224) */
		ds_fault("outputs.sum", (int)o->h.node);
		size_t n = size - off < SUM_CHUNK ? (size_t)(size - off) : SUM_CHUNK;
		c = ds_crc32c(c, map + off, n);
		off += n;
	}
	*crc = c;
	return 0;
}

void *ds__out_sum_main(void *arg)
{
	struct ds_out *o = arg;
	pthread_mutex_lock(&o->mu);
	for (;;) {
		while (!o->sums && !o->squit)
			pthread_cond_wait(&o->sum_cv, &o->mu);
		if (o->squit)
			break;
		struct ds__osum *q = o->sums;
		o->sums = q->next;
		if (!o->sums)
			o->sums_tail = &o->sums;
		struct ds__orec *r = q->r;
		free(q);
		if (r->summed || r->gone)
			continue; /* nobody can ask for it any more */
		char p[PATH_MAX];
		int fd = ds__out_nspath(o, r->path, p)
		                 ? -1
		                 : openat(o->nsfd, p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		int rc = fd < 0 ? -errno : 0;
		uint64_t size = r->size;
		double t0 = ds_now();
		pthread_mutex_unlock(&o->mu);
		uint32_t crc = 0;
		struct stat st;
		if (!rc && (fstat(fd, &st) < 0 || (uint64_t)st.st_size != size))
			rc = -EIO;
		if (!rc && size) {
			void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
			if (map == MAP_FAILED) {
				rc = -errno;
			} else {
				madvise(map, size, MADV_SEQUENTIAL);
				rc = sum_map(o, map, size, &crc);
				munmap(map, size);
			}
		}
		if (fd >= 0)
			close(fd);
		pthread_mutex_lock(&o->mu);
		if (rc == -ECANCELED)
			break; /* stopping: left unsummed, as by a service that ended first */
		r->crc = crc;
		r->sum_err = rc;
		r->summed = 1;
		if (rc)
			ds_error("node %u: '%s': cannot read it back after its close: %s",
			         o->h.node, r->path, ds_strerror(rc));
		else
			ds_debug(
				"node %u: '%s' (%llu bytes) summed in %.4f s, %.4f s after its close",
				o->h.node, r->path, (unsigned long long)size, ds_now() - t0,
				ds_now() - r->t_closed);
		pthread_cond_broadcast(&o->summed);
		ds__out_wake(o); /* fetches waiting for it */
		pthread_mutex_unlock(&o->mu);
		ds__out_status_write(o); /* its CRC, for a recovery */
		pthread_mutex_lock(&o->mu);
	}
	pthread_mutex_unlock(&o->mu);
	return NULL;
}

void ds__out_wake(struct ds_out *o) { o->h.wake(o->h.ctx); }

void ds__out_wait_summed(struct ds_out *o)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 100000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_cond_timedwait(&o->summed, &o->mu, &ts);
}

const char *ds__out_crc_str(const struct ds__orec *r, char buf[9])
{
	if (!r->summed || r->sum_err)
		return "--------";
	snprintf(buf, 9, "%08x", r->crc);
	return buf;
}
