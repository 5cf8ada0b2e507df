/* SPDX-License-Identifier: BSD-3-Clause */
/* cache.c: the epoch cache (see dsepoch.h).
 *
 * The node service writes, the shim in every reader process maps read-only.
 * The two sides share nothing but files in NODEDIR/epochs/:
 *
 *   ctl            which epoch files are live (seqlock), and "closed"
 *   <e>.<gen>      one epoch: header, entry table sorted by id, data
 *
 * Why files and not shared memory segments: the node directory is already
 * private to the user (0700) and on the node-local file system the store
 * lives on (usually tmpfs), so nothing else needs cleaning up after a crash,
 * and `rm -rf` of the node store removes the caches too.
 *
 * Ordering: the service writes an entry's bytes, then stores its state READY
 * with release semantics; a reader loads the state with acquire and only
 * then touches the bytes.  Both map the same file MAP_SHARED, so they see
 * the same physical pages.  Retired epochs are unlinked while readers may
 * still hold a reference: their mapping stays valid until the last
 * ds_cache_put, then the pages go back to the system.  Except the last
 * retired one, kept as a spare: the next epoch takes its file and populated
 * mapping over (rename, rewrite) when no reader maps it.  Every reader holds
 * an OFD read lock on each epoch file it maps (two descriptors, parked by
 * the shim); the service rewrites a spare only under a write lock, and a
 * reader that opened it by its old name finds another epoch and gen in the
 * header. */
#include "cache_test.h"
#include "dscommon.h"
#include "dsepoch.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CACHE_DIR DS_CACHE_DIR_NAME
#define CTL_NAME "ctl"

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static int epoch_path(char *buf, size_t len, const char *dir, uint64_t epoch, uint64_t gen)
{
	int n = snprintf(buf, len, "%s/%llu.%016llx", dir, (unsigned long long)epoch,
	                 (unsigned long long)gen);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- writer side (the service) ------------------------------------------ */
struct ds_cache_svc {
	char *dir; /* NODEDIR/epochs */
	struct ds_cache_ctl *ctl;
	uint64_t next_gen;
	pthread_mutex_t mu;           /* spare: freed by main, taken by a helper */
	struct ds_cache_epoch *spare; /* a retired file kept for the next epoch */
};

struct ds_cache_epoch {
	uint64_t epoch, gen;
	char *path;
	int fd;
	unsigned char *map;
	size_t map_len;
	struct ds_cache_hdr *h;
	struct ds_cache_ent *tab; /* sorted by id */
	uint32_t *order;          /* i-th distinct entry in fetch order -> tab index */
	size_t m;                 /* distinct entries */
	int published;
	int recycled; /* took over a spare file */
};

static int recycle_on(void)
{
	static int v = -1;
	return ds_env_switch("DSTAGE_CACHE_RECYCLE", &v);
}

/* An OFD lock on all of fd: F_RDLCK, F_WRLCK or F_UNLCK; never waits. */
static int ofd_lock(int fd, short type)
{
	struct flock fl;
	memset(&fl, 0, sizeof(fl));
	fl.l_type = type;
	fl.l_whence = SEEK_SET;
	return fcntl(fd, F_OFD_SETLK, &fl) < 0 ? -errno : 0;
}

static void epoch_release(struct ds_cache_epoch *ep)
{
	if (ep->map)
		munmap(ep->map, ep->map_len);
	if (ep->fd >= 0) {
		unlink(ep->path);
		close(ep->fd);
	}
	free(ep->path);
	free(ep->order);
	free(ep);
}

/* A previous service that died may have left a ctl that readers still map:
 * mark it closed so they let go of it and find ours. */
static void close_stale_ctl(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" CTL_NAME, dir);
	int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return;
	struct stat st;
	if (!fstat(fd, &st) && st.st_size >= (off_t)sizeof(struct ds_cache_ctl)) {
		struct ds_cache_ctl *c =
		    mmap(NULL, sizeof(*c), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (c != MAP_FAILED) {
			if (c->magic == DS_CACHE_CTL_MAGIC)
				__atomic_store_n(&c->closed, 1, __ATOMIC_RELEASE);
			munmap(c, sizeof(*c));
		}
	}
	close(fd);
}

int ds_cache_svc_new(const char *nodedir, struct ds_cache_svc **out)
{
	*out = NULL;
	struct ds_cache_svc *svc = calloc(1, sizeof(*svc));
	if (!svc)
		return -ENOMEM;
	if (asprintf(&svc->dir, "%s/" CACHE_DIR, nodedir) < 0) {
		free(svc);
		return -ENOMEM;
	}
	close_stale_ctl(svc->dir);
	int rc = ds_rm_rf(svc->dir);
	if (rc && rc != -ENOENT)
		goto fail;
	if (mkdir(svc->dir, 0700) < 0) {
		rc = -errno;
		goto fail;
	}
	char tmp[PATH_MAX], path[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/" CTL_NAME DS_TMP_SUFFIX, svc->dir);
	snprintf(path, sizeof(path), "%s/" CTL_NAME, svc->dir);
	int fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		goto fail;
	}
	if (ftruncate(fd, sizeof(struct ds_cache_ctl)) < 0) {
		rc = -errno;
		close(fd);
		goto fail;
	}
	svc->ctl = mmap(NULL, sizeof(struct ds_cache_ctl), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (svc->ctl == MAP_FAILED) {
		svc->ctl = NULL;
		rc = -errno;
		goto fail;
	}
	svc->ctl->version = DS_CACHE_VERSION;
	__atomic_store_n(&svc->ctl->magic, DS_CACHE_CTL_MAGIC, __ATOMIC_RELEASE);
	if (rename(tmp, path) < 0) {
		rc = -errno;
		goto fail;
	}
	/* generations only need to differ between services of one node */
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	svc->next_gen = ((uint64_t)ts.tv_sec << 32) ^ ((uint64_t)ts.tv_nsec << 8) ^ (uint64_t)getpid();
	pthread_mutex_init(&svc->mu, NULL);
	*out = svc;
	return 0;
fail:
	if (svc->ctl)
		munmap(svc->ctl, sizeof(struct ds_cache_ctl));
	free(svc->dir);
	free(svc);
	return rc;
}

void ds_cache_svc_free(struct ds_cache_svc *svc)
{
	if (!svc)
		return;
	struct ds_cache_ctl *c = svc->ctl;
	__atomic_store_n(&c->seq, c->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
	__atomic_store_n(&c->nlive, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&c->closed, 1, __ATOMIC_RELAXED);
	__atomic_store_n(&c->seq, c->seq + 1, __ATOMIC_RELEASE);
	munmap(c, sizeof(*c));
	if (svc->spare)
		epoch_release(svc->spare);
	pthread_mutex_destroy(&svc->mu);
	ds_rm_rf(svc->dir);
	free(svc->dir);
	free(svc);
}

uint64_t ds_cache_epoch_need(const uint64_t *lens, size_t n)
{
	uint64_t data = 0;
	for (size_t i = 0; i < n; i++)
		data += align_up(lens[i], DS_CACHE_ALIGN);
	return align_up(sizeof(struct ds_cache_hdr) + n * sizeof(struct ds_cache_ent), 4096) + data;
}

/* MAP_POPULATE: the bytes land through MPI, on shared memory often
 * written by the peer process (CMA); a page that is not mapped yet
 * makes every such write fault in our address space, measured 10x
 * slower than into a populated mapping.  MADV_POPULATE_WRITE (Linux
 * 5.14) does the same work in one pass, measured ~40 ms CPU less per
 * 256 MiB on tmpfs than MAP_POPULATE (~75 vs ~115 ms); older kernels
 * say EINVAL and get MAP_POPULATE.  DSTAGE_CACHE_MADVISE=0 forces
 * MAP_POPULATE (for measurements). */
static int madv_state = -1; /* -1 unknown, 0 off, 1 on */

static int madvise_on(void)
{
	int use_madv = __atomic_load_n(&madv_state, __ATOMIC_RELAXED);
	if (use_madv < 0) {
		const char *v = getenv("DSTAGE_CACHE_MADVISE");
		use_madv = !(v && !strcmp(v, "0"));
		__atomic_store_n(&madv_state, use_madv, __ATOMIC_RELAXED);
	}
	return use_madv;
}

/* Make the spare file (write-locked, mapped by no reader) len bytes long,
 * its mapping populated.  A spare of about the size is kept as it is (up
 * to 1/8 + 1 MiB more); a bigger one is cut down, a smaller one grown: only
 * the pages added are reserved and populated.  An epoch's remote share
 * varies by a few percent from one epoch to the next, so the spare is
 * about as often smaller than the next epoch's cache as bigger; making a
 * fresh file each time it is smaller cost the whole cache's allocation and
 * population (33-120 ms of CPU per 32 MiB here, beside the fetch of the
 * other nodes) and the release of the old one. */
static int spare_fit(struct ds_cache_epoch *sp, size_t len)
{
	size_t have = sp->map_len;
	if (have >= len && have - len <= len / 8 + (1u << 20))
		return 0;
	if (have > len) {
		/* shrink the mapping in place, then the file: its pages go back */
		if (mremap(sp->map, have, len, 0) == MAP_FAILED ||
		    ftruncate(sp->fd, (off_t)len) < 0)
			return -errno;
		sp->map_len = len;
		return 0;
	}
	/* grow: the space first (a tmpfs that fills up under a mapping kills
	 * the writer with SIGBUS), then the mapping, then its new pages */
	int rc = -posix_fallocate(sp->fd, 0, (off_t)len);
	if (rc)
		return rc;
	void *m = mremap(sp->map, have, len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED) {
		rc = -errno;
		if (ftruncate(sp->fd, (off_t)have) < 0)
			rc = -errno;
		return rc;
	}
	sp->map = m;
	sp->map_len = len;
	size_t pg = (size_t)sysconf(_SC_PAGESIZE), from = have / pg * pg;
	if (madvise_on() && !madvise(sp->map + from, len - from, MADV_POPULATE_WRITE))
		return 0;
	/* an older kernel: touch the new pages for writing (their bytes are
	 * zero, and the layout is rewritten anyway) */
	for (size_t o = from; o < len; o += pg)
		__atomic_store_n(&sp->map[o], sp->map[o], __ATOMIC_RELAXED);
	return 0;
}

int ds_cache_epoch_new(struct ds_cache_svc *svc, uint64_t epoch, const uint32_t *ids,
                       const uint64_t *lens, size_t n, struct ds_cache_epoch **out)
{
	return ds_cache_epoch_new_runs(svc, epoch, ids, lens, NULL, n, out);
}

int ds_cache_epoch_new_runs(struct ds_cache_svc *svc, uint64_t epoch, const uint32_t *ids,
                            const uint64_t *lens, const uint8_t *joined, size_t n,
                            struct ds_cache_epoch **out)
{
	*out = NULL;
	if (n > UINT32_MAX)
		return -EINVAL;
	struct ds_cache_epoch *ep = calloc(1, sizeof(*ep));
	struct ds_id_at *ia = malloc((n + 1) * sizeof(*ia));
	uint32_t *slot_of_at = malloc((n + 1) * sizeof(uint32_t));
	uint64_t *offs = NULL;
	int rc = -ENOMEM;
	if (!ep || !ia || !slot_of_at)
		goto fail;
	ep->fd = -1;
	ep->epoch = epoch;
	ep->gen = __atomic_fetch_add(&svc->next_gen, 1, __ATOMIC_RELAXED);
	for (size_t i = 0; i < n; i++) {
		ia[i].id = ids[i];
		ia[i].at = (uint32_t)i;
		slot_of_at[i] = UINT32_MAX;
	}
	if (ds_sort_id_at(ia, n))
		goto fail;
	size_t m = 0;
	for (size_t i = 0; i < n; i++)
		if (!i || ia[i].id != ia[i - 1].id)
			slot_of_at[ia[i].at] = (uint32_t)m++; /* first occurrence wins */
	ep->m = m;
	ep->order = malloc((m + 1) * sizeof(uint32_t));
	if (!ep->order)
		goto fail;
	uint64_t off_entries = align_up(sizeof(struct ds_cache_hdr), DS_CACHE_ALIGN);
	uint64_t off_data = align_up(off_entries + m * sizeof(struct ds_cache_ent), 4096);
	/* each distinct entry's offset in the data, in fetch order: on the
	 * next DS_CACHE_ALIGN boundary, or right after the entry before when
	 * it is joined to it (both kept: a repeat breaks the run) */
	offs = malloc((m + 1) * sizeof(uint64_t));
	if (!offs)
		goto fail;
	uint64_t data = 0, end = 0;
	for (size_t i = 0, j = 0, last = SIZE_MAX; i < n; i++)
		if (slot_of_at[i] != UINT32_MAX) {
			ep->order[j] = slot_of_at[i];
			uint64_t o = joined && i && joined[i] && last == i - 1
			                     ? end
			                     : align_up(end, DS_CACHE_ALIGN);
			offs[j++] = o;
			end = o + lens[i];
			last = i;
		}
	data = align_up(end, DS_CACHE_ALIGN);
	ep->map_len = off_data + data;
	if (asprintf(&ep->path, "%s/%llu.%016llx", svc->dir, (unsigned long long)epoch,
	             (unsigned long long)ep->gen) < 0) {
		ep->path = NULL;
		goto fail;
	}
	/* a spare file of at least half the size, that no reader maps (a
	 * write lock: every reader that maps it holds a read lock), is taken
	 * over: cut or grown to the size (spare_fit), renamed and rewritten
	 * under the write lock; a reader
	 * that opened it by its old name before the rename takes its read lock
	 * after ours is gone and finds a header of another epoch and gen */
	pthread_mutex_lock(&svc->mu);
	struct ds_cache_epoch *sp = svc->spare;
	svc->spare = NULL;
	pthread_mutex_unlock(&svc->mu);
	if (sp && sp->map_len >= ep->map_len / 2 && ep->map_len && !ofd_lock(sp->fd, F_WRLCK)) {
		if (!spare_fit(sp, ep->map_len) && !rename(sp->path, ep->path)) {
			ep->fd = sp->fd;
			ep->map = sp->map;
			ep->map_len = sp->map_len;
			ep->recycled = 1;
			sp->fd = -1;
			sp->map = NULL;
		} else {
			ofd_lock(sp->fd, F_UNLCK);
		}
	}
	if (sp)
		epoch_release(sp);
	if (ep->recycled)
		goto layout;
	ep->fd = open(ep->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (ep->fd < 0) {
		rc = -errno;
		goto fail;
	}
	/* reserve the space now: a tmpfs that fills up under a mapping kills
	 * the writer with SIGBUS, in the middle of an MPI_Get */
	rc = -posix_fallocate(ep->fd, 0, (off_t)ep->map_len);
	if (rc)
		goto fail;
	int use_madv = madvise_on();
	ep->map = mmap(NULL, ep->map_len, PROT_READ | PROT_WRITE,
	               MAP_SHARED | (use_madv ? 0 : MAP_POPULATE), ep->fd, 0);
	if (ep->map == MAP_FAILED) {
		ep->map = NULL;
		rc = -errno;
		goto fail;
	}
	if (use_madv && ep->map_len && madvise(ep->map, ep->map_len, MADV_POPULATE_WRITE) < 0) {
		if (errno != EINVAL) {
			rc = -errno;
			munmap(ep->map, ep->map_len);
			ep->map = NULL;
			goto fail;
		}
		__atomic_store_n(&madv_state, 0, __ATOMIC_RELAXED); /* an older kernel */
		munmap(ep->map, ep->map_len);
		ep->map = mmap(NULL, ep->map_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		               ep->fd, 0);
		if (ep->map == MAP_FAILED) {
			ep->map = NULL;
			rc = -errno;
			goto fail;
		}
	}
layout:
	ep->h = (struct ds_cache_hdr *)ep->map;
	ep->tab = (struct ds_cache_ent *)(ep->map + off_entries);
	for (size_t i = 0; i < n; i++)
		if (slot_of_at[ia[i].at] != UINT32_MAX) {
			struct ds_cache_ent *e = &ep->tab[slot_of_at[ia[i].at]];
			e->id = ia[i].id;
			e->state = DS_CACHE_PENDING;
			e->len = lens[ia[i].at];
		}
	for (size_t j = 0; j < m; j++)
		ep->tab[ep->order[j]].off = offs[j];
	struct ds_cache_hdr *h = ep->h;
	memcpy(h->magic, DS_CACHE_MAGIC, 8);
	h->version = DS_CACHE_VERSION;
	h->hdr_size = sizeof(*h);
	h->epoch = epoch;
	h->gen = ep->gen;
	h->nentries = m;
	h->off_entries = off_entries;
	h->off_data = off_data;
	h->data_size = data;
	h->total_size = ep->map_len;
	if (ep->recycled) {
		/* every byte above is written: readers may look now */
		ofd_lock(ep->fd, F_UNLCK);
	}
	free(ia);
	free(slot_of_at);
	free(offs);
	*out = ep;
	return 0;
fail:
	free(ia);
	free(slot_of_at);
	free(offs);
	if (ep)
		epoch_release(ep);
	return rc;
}

uint64_t ds_cache_spare_bytes(struct ds_cache_svc *svc)
{
	pthread_mutex_lock(&svc->mu);
	uint64_t b = svc->spare && svc->spare->map ? svc->spare->map_len : 0;
	pthread_mutex_unlock(&svc->mu);
	return b;
}

size_t ds_cache_epoch_count(const struct ds_cache_epoch *ep) { return ep->m; }
uint64_t ds_cache_epoch_bytes(const struct ds_cache_epoch *ep) { return ep->map_len; }
int ds_cache_epoch_recycled(const struct ds_cache_epoch *ep) { return ep->recycled; }

void *ds_cache_epoch_slot(struct ds_cache_epoch *ep, size_t i, uint32_t *id, uint64_t *len)
{
	struct ds_cache_ent *e = &ep->tab[ep->order[i]];
	if (id)
		*id = e->id;
	if (len)
		*len = e->len;
	return ep->map + ep->h->off_data + e->off;
}

void ds_cache_epoch_mark(struct ds_cache_epoch *ep, size_t i, int ok)
{
	__atomic_store_n(&ep->tab[ep->order[i]].state, ok ? DS_CACHE_READY : DS_CACHE_FAILED,
	                 __ATOMIC_RELEASE);
}

void ds_cache_epoch_checked(struct ds_cache_epoch *ep, size_t i, int ok)
{
	uint32_t want = DS_CACHE_READY;
	__atomic_compare_exchange_n(&ep->tab[ep->order[i]].state, &want,
	                            ok ? DS_CACHE_VERIFIED : DS_CACHE_FAILED, 0, __ATOMIC_RELEASE,
	                            __ATOMIC_RELAXED);
}

uint32_t ds_cache_epoch_state(const struct ds_cache_epoch *ep, size_t i)
{
	return __atomic_load_n(&ep->tab[ep->order[i]].state, __ATOMIC_ACQUIRE);
}

/* Seqlock writer: one writer (the service's main thread). */
static void ctl_begin(struct ds_cache_ctl *c)
{
	__atomic_store_n(&c->seq, c->seq + 1, __ATOMIC_RELAXED);
	__atomic_thread_fence(__ATOMIC_RELEASE);
}
static void ctl_end(struct ds_cache_ctl *c) { __atomic_store_n(&c->seq, c->seq + 1, __ATOMIC_RELEASE); }

int ds_cache_epoch_publish(struct ds_cache_svc *svc, struct ds_cache_epoch *ep)
{
	struct ds_cache_ctl *c = svc->ctl;
	if (ep->published)
		return 0;
	if (c->nlive >= DS_CACHE_MAX_LIVE)
		return -ENOSPC;
	ctl_begin(c);
	__atomic_store_n(&c->live[c->nlive].epoch, ep->epoch, __ATOMIC_RELAXED);
	__atomic_store_n(&c->live[c->nlive].gen, ep->gen, __ATOMIC_RELAXED);
	__atomic_store_n(&c->nlive, c->nlive + 1, __ATOMIC_RELAXED);
	ctl_end(c);
	ep->published = 1;
	return 0;
}

void ds_cache_epoch_free(struct ds_cache_svc *svc, struct ds_cache_epoch *ep)
{
	if (!ep)
		return;
	if (ep->published) {
		struct ds_cache_ctl *c = svc->ctl;
		ctl_begin(c);
		uint64_t n = c->nlive, j = 0;
		for (uint64_t i = 0; i < n; i++) {
			if (c->live[i].gen == ep->gen)
				continue;
			__atomic_store_n(&c->live[j].epoch, c->live[i].epoch, __ATOMIC_RELAXED);
			__atomic_store_n(&c->live[j].gen, c->live[i].gen, __ATOMIC_RELAXED);
			j++;
		}
		__atomic_store_n(&c->nlive, j, __ATOMIC_RELAXED);
		ctl_end(c);
	}
	if (recycle_on() && ep->map && ep->fd >= 0) {
		/* kept, populated, for the next epoch; an older spare goes */
		pthread_mutex_lock(&svc->mu);
		struct ds_cache_epoch *old = svc->spare;
		svc->spare = ep;
		pthread_mutex_unlock(&svc->mu);
		if (old)
			epoch_release(old);
		return;
	}
	epoch_release(ep);
}

/* ---- reader side (the shim) --------------------------------------------- */
struct ds_cache_ref {
	struct ds_cache_set *cs;
	struct ds_cache_ref *next;
	int fd, fd2; /* kept open: their OFD read lock keeps the service off the
	              * file (two numbers: a dup2 onto one leaves the other) */
	uint64_t epoch, gen;
	const unsigned char *map;
	size_t map_len;
	const struct ds_cache_hdr *h;
	const struct ds_cache_ent *tab;
	long refs;   /* under cs->mu */
	int retired; /* no longer in ctl: unmap at the last put */
};

struct ds_cache_set {
	pthread_mutex_t mu;
	char *dir;
	const struct ds_cache_ctl *ctl;
	uint64_t seen_seq; /* ctl->seq when maps was last synced */
	double next_try;   /* when to look for ctl again (rate-limited) */
	struct ds_cache_ref *maps;
};

struct ds_cache_set *ds_cache_set_new(const char *nodedir)
{
	struct ds_cache_set *cs = calloc(1, sizeof(*cs));
	if (!cs)
		return NULL;
	if (asprintf(&cs->dir, "%s/" CACHE_DIR, nodedir) < 0) {
		free(cs);
		return NULL;
	}
	pthread_mutex_init(&cs->mu, NULL);
	cs->seen_seq = UINT64_MAX;
	return cs;
}

static int (*fd_hook)(int fd, int on);

void ds_cache_set_fd_hook(int (*fn)(int fd, int on)) { fd_hook = fn; }

static void close_kept(int fd)
{
	if (fd < 0)
		return;
	if (fd_hook)
		fd_hook(fd, 0);
	close(fd); /* the read lock goes with the last descriptor */
}

static void unmap_one(struct ds_cache_ref *m)
{
	munmap((void *)m->map, m->map_len);
	close_kept(m->fd);
	close_kept(m->fd2);
	free(m);
}

/* Drop every mapping nobody holds; mark the rest retired. */
static void drop_all(struct ds_cache_set *cs)
{
	for (struct ds_cache_ref **pp = &cs->maps; *pp;) {
		struct ds_cache_ref *m = *pp;
		if (m->refs == 0) {
			*pp = m->next;
			unmap_one(m);
		} else {
			m->retired = 1;
			pp = &m->next;
		}
	}
}

void ds_cache_set_free(struct ds_cache_set *cs)
{
	if (!cs)
		return;
	for (struct ds_cache_ref *m = cs->maps, *next; m; m = next) {
		next = m->next;
		unmap_one(m);
	}
	if (cs->ctl)
		munmap((void *)cs->ctl, sizeof(*cs->ctl));
	pthread_mutex_destroy(&cs->mu);
	free(cs->dir);
	free(cs);
}

void ds_cache_set_atfork_child(struct ds_cache_set *cs)
{
	/* another thread of the parent may have held the lock at fork time;
	 * the child has only this thread, so a fresh mutex is consistent.
	 * Refs held by threads that do not exist here just stay counted. */
	if (cs)
		pthread_mutex_init(&cs->mu, NULL);
}

static const struct ds_cache_ctl *map_ctl(const char *dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" CTL_NAME, dir);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	struct stat st;
	const struct ds_cache_ctl *c = MAP_FAILED;
	if (!fstat(fd, &st) && st.st_size >= (off_t)sizeof(*c) && st.st_uid == geteuid())
		c = mmap(NULL, sizeof(*c), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (c == MAP_FAILED)
		return NULL;
	if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != DS_CACHE_CTL_MAGIC ||
	    c->version != DS_CACHE_VERSION) {
		munmap((void *)c, sizeof(*c));
		return NULL;
	}
	return c;
}

static struct ds_cache_ref *map_epoch(struct ds_cache_set *cs, uint64_t epoch, uint64_t gen)
{
	char path[PATH_MAX];
	if (epoch_path(path, sizeof(path), cs->dir, epoch, gen))
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	/* the read lock first, for as long as we map the file: the service
	 * rewrites a retired file for a later epoch only under a write lock
	 * (ds_cache_epoch_new); one it holds now is being rewritten: not ours */
	struct stat st;
	void *p = MAP_FAILED;
	if (!ofd_lock(fd, F_RDLCK) && !fstat(fd, &st) &&
	    st.st_size >= (off_t)sizeof(struct ds_cache_hdr))
		p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	int fd2 = p == MAP_FAILED ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (p != MAP_FAILED && fd2 < 0) {
		munmap(p, (size_t)st.st_size);
		p = MAP_FAILED;
	}
	if (p == MAP_FAILED) {
		close(fd);
		return NULL;
	}
	/* both out of the program's way (the shim: high, private numbers) */
	if (fd_hook) {
		fd = fd_hook(fd, 1);
		fd2 = fd_hook(fd2, 1);
	}
	const struct ds_cache_hdr *h = p;
	size_t len = (size_t)st.st_size;
	if (memcmp(h->magic, DS_CACHE_MAGIC, 8) || h->version != DS_CACHE_VERSION ||
	    h->epoch != epoch || h->gen != gen || h->total_size != len ||
	    h->off_entries > len || h->nentries > (len - h->off_entries) / sizeof(struct ds_cache_ent) ||
	    h->off_data > len || h->data_size > len - h->off_data) {
		munmap(p, len);
		close_kept(fd);
		close_kept(fd2);
		return NULL;
	}
	struct ds_cache_ref *m = calloc(1, sizeof(*m));
	if (!m) {
		munmap(p, len);
		close_kept(fd);
		close_kept(fd2);
		return NULL;
	}
	m->fd = fd;
	m->fd2 = fd2;
	m->cs = cs;
	m->epoch = epoch;
	m->gen = gen;
	m->map = p;
	m->map_len = len;
	m->h = h;
	m->tab = (const void *)((const unsigned char *)p + h->off_entries);
	return m;
}

/* Bring the mappings in line with ctl's live set.  Under cs->mu. */
static void sync_maps(struct ds_cache_set *cs)
{
	if (cs->ctl && __atomic_load_n(&cs->ctl->closed, __ATOMIC_ACQUIRE)) {
		/* that service has left; a new one publishes a new ctl */
		munmap((void *)cs->ctl, sizeof(*cs->ctl));
		cs->ctl = NULL;
		cs->seen_seq = UINT64_MAX;
		drop_all(cs);
	}
	if (!cs->ctl) {
		double now = ds_now();
		if (now < cs->next_try)
			return;
		cs->ctl = map_ctl(cs->dir);
		if (!cs->ctl) {
			/* no service (yet): look again in a while, not on every open */
			cs->next_try = now + 0.5;
			return;
		}
	}
	const struct ds_cache_ctl *c = cs->ctl;
	uint64_t s1, n;
	uint64_t ep[DS_CACHE_MAX_LIVE], gen[DS_CACHE_MAX_LIVE];
	for (int tries = 0;; tries++) {
		s1 = __atomic_load_n(&c->seq, __ATOMIC_ACQUIRE);
		if (s1 == cs->seen_seq)
			return; /* nothing changed: the common case, no system call */
		if (s1 & 1) {
			if (tries > 1000)
				return;
			continue;
		}
		n = __atomic_load_n(&c->nlive, __ATOMIC_RELAXED);
		if (n > DS_CACHE_MAX_LIVE)
			n = DS_CACHE_MAX_LIVE;
		for (uint64_t i = 0; i < n; i++) {
			ep[i] = __atomic_load_n(&c->live[i].epoch, __ATOMIC_RELAXED);
			gen[i] = __atomic_load_n(&c->live[i].gen, __ATOMIC_RELAXED);
		}
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
		if (__atomic_load_n(&c->seq, __ATOMIC_RELAXED) == s1)
			break;
	}
	int all_ok = 1;
	/* retire what left the live set */
	for (struct ds_cache_ref **pp = &cs->maps; *pp;) {
		struct ds_cache_ref *m = *pp;
		int live = 0;
		for (uint64_t i = 0; i < n; i++)
			live |= gen[i] == m->gen && ep[i] == m->epoch;
		if (live) {
			pp = &m->next;
			continue;
		}
		m->retired = 1;
		if (m->refs == 0) {
			*pp = m->next;
			unmap_one(m);
		} else {
			pp = &m->next;
		}
	}
	/* map what joined it */
	for (uint64_t i = 0; i < n; i++) {
		int have = 0;
		for (struct ds_cache_ref *m = cs->maps; m; m = m->next)
			have |= !m->retired && m->gen == gen[i] && m->epoch == ep[i];
		if (have)
			continue;
		struct ds_cache_ref *m = map_epoch(cs, ep[i], gen[i]);
		if (!m) {
			all_ok = 0; /* retried at the next call */
			continue;
		}
		m->next = cs->maps;
		cs->maps = m;
	}
	if (all_ok)
		cs->seen_seq = s1;
}

static const struct ds_cache_ent *find_ent(const struct ds_cache_ref *m, uint32_t id)
{
	size_t lo = 0, hi = m->h->nentries;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint32_t v = m->tab[mid].id;
		if (v == id)
			return &m->tab[mid];
		if (v < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

int ds_cache_find(struct ds_cache_set *cs, uint32_t id, const void **data, uint64_t *len,
                  struct ds_cache_ref **ref)
{
	int checked;
	return ds_cache_find_checked(cs, id, data, len, ref, &checked);
}

int ds_cache_find_checked(struct ds_cache_set *cs, uint32_t id, const void **data, uint64_t *len,
                          struct ds_cache_ref **ref, int *checked)
{
	*checked = 0;
	*data = NULL;
	*len = 0;
	*ref = NULL;
	if (!cs)
		return 0;
	int saved = errno, rc = 0;
	pthread_mutex_lock(&cs->mu);
	sync_maps(cs);
	for (struct ds_cache_ref *m = cs->maps; m; m = m->next) {
		if (m->retired)
			continue;
		const struct ds_cache_ent *e = find_ent(m, id);
		if (!e)
			continue;
		uint32_t st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
		if ((st == DS_CACHE_READY || st == DS_CACHE_VERIFIED) &&
		    e->off <= m->h->data_size && e->len <= m->h->data_size - e->off) {
			*data = m->map + m->h->off_data + e->off;
			*len = e->len;
			*ref = m;
			m->refs++;
			*checked = st == DS_CACHE_VERIFIED;
			rc = 1;
			break;
		}
		if (st == DS_CACHE_PENDING)
			rc = -EAGAIN; /* unless another live epoch has it ready */
	}
	pthread_mutex_unlock(&cs->mu);
	errno = saved;
	return rc;
}

void ds_cache_put(struct ds_cache_ref *ref)
{
	if (!ref)
		return;
	struct ds_cache_set *cs = ref->cs;
	pthread_mutex_lock(&cs->mu);
	if (--ref->refs == 0 && ref->retired) {
		for (struct ds_cache_ref **pp = &cs->maps; *pp; pp = &(*pp)->next)
			if (*pp == ref) {
				*pp = ref->next;
				unmap_one(ref);
				break;
			}
	}
	pthread_mutex_unlock(&cs->mu);
}
