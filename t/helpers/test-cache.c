/* SPDX-License-Identifier: BSD-3-Clause */
/* test-cache.c: unit tests of the epoch cache (common/cache.c): publish,
 * pending/ready, duplicates, retire while held, a service restart, a reader
 * in another process racing the writer (every READY entry's bytes complete),
 * recycling retired files (never under a reader's mapping). */
#include "cache_test.h"
#include "dscommon.h"
#include "dsepoch.h"
#include "tap.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char nodedir[64];

/* Content of entry id: a pattern the reader can verify byte for byte. */
static void fill(unsigned char *p, uint32_t id, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		p[i] = (unsigned char)(id * 131 + i * 7);
}
static int check(const unsigned char *p, uint32_t id, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != (unsigned char)(id * 131 + i * 7))
			return 0;
	return 1;
}

static void test_basic(void)
{
	struct ds_cache_svc *svc;
	ok(!ds_cache_svc_new(nodedir, &svc), "service creates NODEDIR/epochs");
	struct ds_cache_set *cs = ds_cache_set_new(nodedir);
	uint32_t ids[] = {50, 7, 9, 7, 1000};
	uint64_t lens[] = {100, 4096, 0, 4096, 70000};
	struct ds_cache_epoch *ep;
	ok(!ds_cache_epoch_new(svc, 3, ids, lens, 5, &ep), "epoch 3 cache created");
	is(ds_cache_epoch_count(ep), 4, "a repeated id is stored once");
	ok(ds_cache_epoch_bytes(ep) <= ds_cache_epoch_need(lens, 5), "need() bounds the file size");
	const void *d;
	uint64_t len;
	struct ds_cache_ref *ref;
	is(ds_cache_find(cs, 7, &d, &len, &ref), 0, "not visible before publish");
	ok(!ds_cache_epoch_publish(svc, ep), "published");
	is(ds_cache_find(cs, 7, &d, &len, &ref), -EAGAIN, "published, not fetched yet: -EAGAIN");
	is(ds_cache_find(cs, 8, &d, &len, &ref), 0, "an id not in the cache: 0");
	/* fill in fetch order: 50, 7, 9, 1000 */
	uint32_t want[] = {50, 7, 9, 1000};
	int order_ok = 1;
	for (size_t i = 0; i < ds_cache_epoch_count(ep); i++) {
		uint32_t id;
		uint64_t l;
		unsigned char *p = ds_cache_epoch_slot(ep, i, &id, &l);
		order_ok &= id == want[i] && ((uintptr_t)p % DS_CACHE_ALIGN) == 0;
		fill(p, id, l);
		ds_cache_epoch_mark(ep, i, 1);
	}
	ok(order_ok, "slots in fetch order, cache-line aligned");
	is(ds_cache_find(cs, 1000, &d, &len, &ref), 1, "ready: found");
	ok(len == 70000 && check(d, 1000, len), "its bytes are right");
	/* retire while held: the mapping stays valid */
	ds_cache_epoch_free(svc, ep);
	ok(check(d, 1000, len), "retired and unlinked while held: bytes still readable");
	const void *d2;
	struct ds_cache_ref *ref2;
	is(ds_cache_find(cs, 50, &d2, &len, &ref2), 0, "retired: no longer found");
	ds_cache_put(ref);
	ok(1, "last put unmaps");

	/* two live epochs; a failed fetch falls back to the other */
	struct ds_cache_epoch *a, *b;
	uint32_t ia[] = {1, 2}, ib[] = {2, 3};
	uint64_t la[] = {10, 20}, lb[] = {20, 30};
	ds_cache_epoch_new(svc, 4, ia, la, 2, &a);
	ds_cache_epoch_new(svc, 5, ib, lb, 2, &b);
	ds_cache_epoch_publish(svc, a);
	ds_cache_epoch_publish(svc, b);
	for (size_t i = 0; i < 2; i++) {
		uint32_t id = 0;
		uint64_t l = 0;
		unsigned char *p = ds_cache_epoch_slot(a, i, &id, &l);
		fill(p, id, l);
		ds_cache_epoch_mark(a, i, 1);
	}
	uint32_t id;
	uint64_t l;
	ds_cache_epoch_slot(b, 0, &id, &l);
	ds_cache_epoch_mark(b, 0, 0); /* id 2 failed in epoch 5 */
	ok(ds_cache_find(cs, 2, &d, &len, &ref) == 1 && check(d, 2, 20), "id in two epochs: the ready copy is used");
	ds_cache_put(ref);
	is(ds_cache_find(cs, 3, &d, &len, &ref), -EAGAIN, "epoch 5 id 3 still pending");

	/* a new service on the same node: readers follow it */
	ds_cache_epoch_free(svc, a);
	ds_cache_epoch_free(svc, b);
	ds_cache_svc_free(svc);
	is(ds_cache_find(cs, 3, &d, &len, &ref), 0, "service gone: nothing cached");
	ok(!ds_cache_svc_new(nodedir, &svc), "a new service");
	ds_cache_epoch_new(svc, 0, ib, lb, 2, &b);
	ds_cache_epoch_publish(svc, b);
	for (size_t i = 0; i < 2; i++) {
		unsigned char *p = ds_cache_epoch_slot(b, i, &id, &l);
		fill(p, id, l);
		ds_cache_epoch_mark(b, i, 1);
	}
	usleep(600000); /* the set looks for a new ctl at most every 0.5 s */
	ok(ds_cache_find(cs, 3, &d, &len, &ref) == 1 && check(d, 3, 30), "readers find the new service's cache");
	ds_cache_put(ref);
	ds_cache_epoch_free(svc, b);
	ds_cache_svc_free(svc);
	ds_cache_set_free(cs);
}

/* Writer fills 20000 entries in fetch order while a child process looks
 * them up at random: every READY hit must have complete bytes. */
static void test_race(void)
{
	struct ds_cache_svc *svc;
	ds_cache_svc_new(nodedir, &svc);
	enum { N = 20000 };
	uint32_t *ids = ds_xmalloc(N * 4);
	uint64_t *lens = ds_xmalloc(N * 8);
	for (uint32_t i = 0; i < N; i++) {
		ids[i] = (i * 7919u) % N;
		lens[i] = 1 + (i % 3000);
	}
	struct ds_cache_epoch *ep;
	ds_cache_epoch_new(svc, 1, ids, lens, N, &ep);
	ds_cache_epoch_publish(svc, ep);
	int pfd[2];
	if (pipe(pfd) < 0)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		struct ds_cache_set *cs = ds_cache_set_new(nodedir);
		long hits = 0, bad = 0, pending = 0;
		uint64_t x = 88172645463325252ull;
		double end = ds_now() + 20;
		while (hits < N && ds_now() < end) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			uint32_t id = (uint32_t)(x % N);
			const void *d;
			uint64_t len;
			struct ds_cache_ref *ref;
			int rc = ds_cache_find(cs, id, &d, &len, &ref);
			if (rc == 1) {
				hits++;
				bad += !check(d, id, len);
				ds_cache_put(ref);
			} else if (rc == -EAGAIN) {
				pending++;
			}
		}
		dprintf(pfd[1], "%ld %ld %ld\n", hits, bad, pending);
		_exit(0);
	}
	for (size_t i = 0; i < ds_cache_epoch_count(ep); i++) {
		uint32_t id;
		uint64_t l;
		unsigned char *p = ds_cache_epoch_slot(ep, i, &id, &l);
		fill(p, id, l);
		ds_cache_epoch_mark(ep, i, 1);
		if (i % 500 == 0)
			usleep(1000);
	}
	int st;
	waitpid(pid, &st, 0);
	char buf[128] = "";
	if (read(pfd[0], buf, sizeof(buf) - 1) < 0)
		buf[0] = 0;
	long hits = 0, bad = 1, pending = 0;
	sscanf(buf, "%ld %ld %ld", &hits, &bad, &pending);
	diag("reader process: %ld hits, %ld while pending", hits, pending);
	ok(hits > 0 && bad == 0, "a reader racing the writer never sees incomplete bytes (%ld bad)", bad);
	ok(pending > 0, "and did see pending entries (the race was real)");
	ds_cache_epoch_free(svc, ep);
	ds_cache_svc_free(svc);
	free(ids);
	free(lens);
}

static void test_enospc(void)
{
	/* a cache larger than the file system: a clean -ENOSPC, no SIGBUS */
	struct ds_cache_svc *svc;
	ds_cache_svc_new(nodedir, &svc);
	uint32_t id = 1;
	uint64_t huge = 1ull << 50;
	struct ds_cache_epoch *ep;
	int rc = ds_cache_epoch_new(svc, 0, &id, &huge, 1, &ep);
	ok(rc == -ENOSPC || rc == -EFBIG || rc == -EINVAL, "a cache the file system cannot hold: %s", ds_strerror(rc));
	ds_cache_svc_free(svc);
	struct stat st;
	char path[128];
	snprintf(path, sizeof(path), "%s/epochs", nodedir);
	ok(stat(path, &st) < 0 && errno == ENOENT, "service gone: NODEDIR/epochs removed");
}

/* An epoch of n entries of len bytes, published, every entry filled with
 * the pattern of (id + salt) and READY. */
static struct ds_cache_epoch *filled(struct ds_cache_svc *svc, uint64_t e, uint32_t salt,
                                     int publish)
{
	uint32_t ids[4] = {1, 2, 3, 4};
	uint64_t lens[4] = {100000, 100000, 100000, 100000};
	struct ds_cache_epoch *ep = NULL;
	if (ds_cache_epoch_new(svc, e, ids, lens, 4, &ep))
		return NULL;
	if (publish)
		ds_cache_epoch_publish(svc, ep);
	for (size_t i = 0; i < 4; i++) {
		uint32_t id;
		uint64_t l;
		unsigned char *p = ds_cache_epoch_slot(ep, i, &id, &l);
		fill(p, id + salt, l);
		ds_cache_epoch_mark(ep, i, 1);
	}
	return ep;
}

/* Recycling a retired epoch's file: never while any reader maps it (a held
 * reference, a mapping kept until the next look-up, a forked child's copy),
 * and a mapping held across the service's next epochs never changes. */
static void test_recycle(void)
{
	struct ds_cache_svc *svc;
	ds_cache_svc_new(nodedir, &svc);
	struct ds_cache_set *cs = ds_cache_set_new(nodedir);
	struct ds_cache_epoch *e10 = filled(svc, 10, 0, 1);
	const void *d, *d2;
	uint64_t len, len2;
	struct ds_cache_ref *ref, *ref2;
	ok(ds_cache_find(cs, 2, &d, &len, &ref) == 1 && check(d, 2, len),
	   "epoch 10 read, reference held");
	ds_cache_epoch_free(svc, e10);
	struct ds_cache_epoch *e11 = filled(svc, 11, 1000, 1);
	ok(e11 && !ds_cache_epoch_recycled(e11),
	   "held by a reader: epoch 10's file is not recycled");
	ok(check(d, 2, len), "the held bytes of epoch 10 did not change");
	ds_cache_put(ref);
	ok(ds_cache_find(cs, 3, &d2, &len2, &ref2) == 1 && check(d2, 3 + 1000, len2),
	   "epoch 11 read (the reader lets epoch 10 go)");
	ds_cache_put(ref2);
	/* the reader still maps epoch 11 (no reference) until its next look-up */
	ds_cache_epoch_free(svc, e11);
	struct ds_cache_epoch *e12 = filled(svc, 12, 2000, 0);
	ok(e12 && !ds_cache_epoch_recycled(e12), "still mapped without a reference: not recycled");
	is(ds_cache_find(cs, 3, &d2, &len2, &ref2), 0,
	   "epoch 11 retired: not found (its mapping dropped)");
	ds_cache_epoch_free(svc, e12); /* never published, never mapped */
	struct ds_cache_epoch *e13 = filled(svc, 13, 3000, 1);
	ok(e13 && ds_cache_epoch_recycled(e13), "mapped by nobody: recycled");
	ok(ds_cache_find(cs, 4, &d, &len, &ref) == 1 && check(d, 4 + 3000, len),
	   "the recycled file reads as epoch 13");
	/* a child made by fork shares the parent's read lock */
	int pfd[2];
	if (pipe(pfd) < 0)
		abort();
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(pfd[1]);
		int good = check(d, 4 + 3000, len);
		(void)!read(pfd[0], &c, 1); /* until the parent is done */
		_exit(good && check(d, 4 + 3000, len) ? 0 : 1);
	}
	close(pfd[0]);
	ds_cache_put(ref);
	ds_cache_epoch_free(svc, e13);
	is(ds_cache_find(cs, 4, &d2, &len2, &ref2), 0, "the parent lets epoch 13 go");
	struct ds_cache_epoch *e14 = filled(svc, 14, 4000, 1);
	ok(e14 && !ds_cache_epoch_recycled(e14),
	   "a forked child still maps epoch 13: not recycled");
	close(pfd[1]);
	int st = -1;
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child's bytes of epoch 13 never changed");
	ds_cache_epoch_free(svc, e14);
	is(ds_cache_find(cs, 1, &d2, &len2, &ref2), 0, "epoch 14 retired");
	struct ds_cache_epoch *e15 = filled(svc, 15, 5000, 1);
	ok(e15 && ds_cache_epoch_recycled(e15), "nobody maps epoch 14: recycled");
	ok(ds_cache_find(cs, 1, &d, &len, &ref) == 1 && check(d, 1 + 5000, len),
	   "epoch 15 reads right");
	ds_cache_put(ref);
	/* a spare a little smaller or much bigger than the next epoch's cache
	 * is grown or cut to its size and taken over, with the right bytes */
	ds_cache_epoch_free(svc, e15);
	ds_cache_find(cs, 1, &d2, &len2, &ref2); /* drops epoch 15's mapping */
	uint32_t gid[5] = {1, 2, 3, 4, 5};
	uint64_t glen[5] = {100000, 100000, 100000, 100000, 100000};
	struct ds_cache_epoch *grown = NULL;
	ok(!ds_cache_epoch_new(svc, 20, gid, glen, 5, &grown) && ds_cache_epoch_recycled(grown),
	   "a 25%% bigger epoch: the spare is grown and recycled");
	if (grown) {
		ds_cache_epoch_publish(svc, grown);
		for (size_t i = 0; i < 5; i++) {
			uint32_t id;
			uint64_t l;
			unsigned char *p = ds_cache_epoch_slot(grown, i, &id, &l);
			fill(p, id + 7000, l);
			ds_cache_epoch_mark(grown, i, 1);
		}
		int good = 1;
		for (uint32_t id = 1; id <= 5; id++) {
			good &= ds_cache_find(cs, id, &d, &len, &ref) == 1 &&
			        check(d, id + 7000, len) && len == 100000;
			if (good)
				ds_cache_put(ref);
		}
		ok(good, "every entry of the grown file reads right");
		ok(ds_cache_epoch_bytes(grown) == ds_cache_epoch_need(glen, 5),
		   "the grown file has the size the epoch needs");
		ds_cache_epoch_free(svc, grown);
	}
	ds_cache_find(cs, 1, &d2, &len2, &ref2); /* drops epoch 20's mapping */
	/* a much bigger epoch does not fit the spare: a fresh file */
	uint32_t bid[1] = {9};
	uint64_t blen[1] = {4u << 20};
	struct ds_cache_epoch *big;
	ok(!ds_cache_epoch_new(svc, 16, bid, blen, 1, &big) && !ds_cache_epoch_recycled(big),
	   "a much bigger epoch: a fresh file");
	ds_cache_epoch_free(svc, big);
	uint64_t clen[1] = {(2u << 20) + 100000};
	struct ds_cache_epoch *cut = NULL;
	ok(!ds_cache_epoch_new(svc, 21, bid, clen, 1, &cut) && ds_cache_epoch_recycled(cut) &&
	           ds_cache_epoch_bytes(cut) == ds_cache_epoch_need(clen, 1),
	   "a much smaller epoch: the spare is cut to its size and recycled");
	ds_cache_epoch_free(svc, cut);
	ds_cache_svc_free(svc);
	ds_cache_set_free(cs);
}

/* Many ids over the whole 32-bit range (the table is sorted by id: a
 * radix sort on two 16-bit digits), repeats included: every id stored
 * once, slots in fetch order (first occurrence), each one found. */
static void test_many(void)
{
	struct ds_cache_svc *svc;
	ok(!ds_cache_svc_new(nodedir, &svc), "many ids: service");
	struct ds_cache_set *cs = ds_cache_set_new(nodedir);
	size_t n = 20000, distinct = 0;
	uint32_t *ids = malloc(n * sizeof(uint32_t)), *first = malloc(n * sizeof(uint32_t));
	uint64_t *lens = malloc(n * sizeof(uint64_t)), x = 88172645463325252ull;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		/* every tenth repeats an earlier id; the rest spread over 32 bits */
		ids[i] = i && i % 10 == 0 ? ids[(x >> 8) % i] : (uint32_t)(x >> 32);
		lens[i] = 1 + (x & 63);
	}
	for (size_t i = 0; i < n; i++) { /* the first occurrences, in order */
		size_t j = 0;
		while (j < i && ids[j] != ids[i])
			j++;
		if (j == i)
			first[distinct++] = ids[i];
	}
	struct ds_cache_epoch *ep;
	ok(!ds_cache_epoch_new(svc, 4, ids, lens, n, &ep), "many ids: epoch cache created");
	is(ds_cache_epoch_count(ep), distinct, "many ids: each stored once");
	int order_ok = 1;
	for (size_t i = 0; i < ds_cache_epoch_count(ep); i++) {
		uint32_t id;
		uint64_t l;
		unsigned char *p = ds_cache_epoch_slot(ep, i, &id, &l);
		order_ok &= i < distinct && id == first[i];
		fill(p, id, l);
		ds_cache_epoch_mark(ep, i, 1);
	}
	ok(order_ok, "many ids: slots in fetch order");
	ok(!ds_cache_epoch_publish(svc, ep), "many ids: published");
	int found = 1;
	for (size_t i = 0; i < n; i++) {
		const void *d;
		uint64_t len;
		struct ds_cache_ref *ref;
		if (ds_cache_find(cs, ids[i], &d, &len, &ref) != 1) {
			found = 0;
			break;
		}
		found &= check(d, ids[i], len);
		ds_cache_put(ref);
	}
	ok(found, "many ids: every one found with its bytes");
	ds_cache_epoch_free(svc, ep);
	ds_cache_svc_free(svc);
	ds_cache_set_free(cs);
	free(ids);
	free(first);
	free(lens);
}

int main(void)
{
	snprintf(nodedir, sizeof(nodedir), "/dev/shm/dstage-test-cache.%d", (int)getpid());
	if (mkdir(nodedir, 0700) < 0)
		skip_all("cannot make a directory in /dev/shm");
	test_basic();
	test_many();
	test_race();
	test_recycle();
	test_enospc();
	ds_rm_rf(nodedir);
	return done_testing();
}
