/* SPDX-License-Identifier: BSD-3-Clause */
/* test-common.c: unit tests of common/ (checksums, sizes, names, index,
 * atomic file writes). */
#include "dscommon.h"
#include "dsindex.h"
#include "dsplace.h"
#include "tap.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

static void test_crc(void)
{
	is(ds_crc32c(0, "123456789", 9), 0xe3069283u, "crc32c check value");
	/* pieces and alignment must not matter, hardware and software agree */
	static unsigned char big[100003];
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (unsigned char)(i * 2654435761u >> 13);
	uint32_t whole = ds_crc32c(0, big, sizeof(big));
	uint32_t parts = ds_crc32c(ds_crc32c(ds_crc32c(0, big, 7), big + 7, 50000), big + 50007,
	                           sizeof(big) - 50007);
	is(parts, whole, "crc32c of pieces equals crc32c of the whole");
	setenv("DSTAGE_CRC_SOFT", "1", 1);
}

static void test_sizes(void)
{
	uint64_t v = 0;
	ok(!ds_parse_size("64KiB", &v) && v == 65536, "64KiB");
	ok(!ds_parse_size("1GiB", &v) && v == 1ull << 30, "1GiB");
	ok(!ds_parse_size("4096", &v) && v == 4096, "4096");
	ok(!ds_parse_size("1.5M", &v) && v == 3ull << 19, "1.5M");
	ok(ds_parse_size("12 apples", &v) == -EINVAL, "garbage refused");
	ok(ds_parse_size("-1", &v) == -EINVAL, "negative refused");
}

static void test_names(void)
{
	const char *why;
	ok(!ds_name_check("a/b c/\xc3\xa9t\xc3\xa9.jpg", strlen("a/b c/\xc3\xa9t\xc3\xa9.jpg"), &why), "unicode and spaces are fine");
	ok(ds_name_check("../x", 4, &why) == -DS_ENAME, "'..' refused");
	ok(ds_name_check("a/../x", 6, &why) == -DS_ENAME, "inner '..' refused");
	ok(ds_name_check("/etc/passwd", 11, &why) == -DS_ENAME, "absolute refused");
	ok(ds_name_check("a//b", 4, &why) == -DS_ENAME, "empty component refused");
	ok(ds_name_check("a\nb", 3, &why) == -DS_ENAME, "newline refused");
	ok(ds_name_check("a\xff" "b", 3, &why) == -DS_ENAME, "invalid UTF-8 refused");
	ok(ds_name_check("a\xc3", 2, &why) == -DS_ENAME, "truncated UTF-8 refused");
	char p[64] = "/a//b/./c/../d/";
	ds_path_normalise(p);
	is_str(p, "/a/b/d", "path normalised");
	ok(ds_path_cmp("a\x01", "a/b") > 0 && ds_path_cmp("a/b", "a\x01") < 0, "byte 1 and '/' order both ways");
	ok(ds_path_cmp("a/b", "a.b") < 0 && ds_path_cmp("a", "a/b") < 0, "a subtree right after its directory");
	char q[16] = "/../..";
	ds_path_normalise(q);
	is_str(q, "/", "'..' stops at the root");
}

/* test_index's index, built in any order: the sorted builder must match it */
static void *any_ix;
static size_t any_len;

static void test_index(void)
{
	struct ds_index_builder *b = ds_index_builder_new();
	uint64_t sizes[2] = {100, 50};
	ok(!ds_index_add_dir(b, "", 0755, 1, 4096), "root");
	ok(!ds_index_add_file(b, "train/b.jpg", 0644, 5, 10, 0, 0, 10, DS_CODEC_NONE, 7, 0), "file");
	ok(!ds_index_add_file(b, "train/a.jpg", 0600, 5, 20, 1, 0, 20, DS_CODEC_NONE, 8, 0), "file 2");
	ok(!ds_index_add_file(b, "val/x", 0644, 5, 30, 0, 10, 30, DS_CODEC_NONE, 9, DS_EF_REPLICATED), "file in implicit dir");
	ok(!ds_index_add_dir(b, "train", 0750, 3, 4096), "dir after its children");
	ok(!ds_index_add_dir(b, "train.old", 0755, 3, 4096), "sibling sorting between");
	ok(!ds_index_add_symlink(b, "train/c.jpg", 6, "a.jpg"), "symlink");
	ok(ds_index_add_file(b, "../x", 0644, 5, 1, 0, 0, 1, 0, 0, 0) == -DS_ENAME, "'..' refused by the builder");
	ds_index_set_parts(b, 2, sizes);
	ds_index_add_loc(b, 1, 1, 0);
	ds_index_add_loc(b, 0, 0, 0);
	ds_index_add_loc(b, 0, 1, 4096);
	ds_index_set_node(b, 1, 2, 8192, "42", 99);
	void *buf;
	size_t len;
	is(ds_index_build(b, &buf, &len), 0, "build");
	any_len = len;
	any_ix = malloc(len);
	memcpy(any_ix, buf, len);
	struct ds_index ix;
	is(ds_index_from_buf(&ix, buf, len, 1), 0, "the built index passes the full check");
	is(ix.h->nentries, 8, "root, train, train.old, val + 3 files + link");
	int64_t t = ds_index_lookup(&ix, "train", 5);
	ok(t > 0, "lookup train");
	char name[PATH_MAX];
	is(ds_ix_nchildren(&ix, t), 3, "train has 3 children");
	ds_ix_path(&ix, ds_ix_child(&ix, t, 0), name, sizeof(name));
	is_str(name, "train/a.jpg", "children in name order");
	is(ds_ix_mode(&ix, t), S_IFDIR | 0750, "explicit dir mode kept");
	int64_t r = ds_index_lookup(&ix, "", 0);
	is(r, 0, "root is entry 0");
	is(ds_ix_nchildren(&ix, 0), 3, "root has train, train.old, val");
	is(ds_ix_nlink(&ix, 0), 5, "root nlink = 2 + 3 subdirectories");
	int64_t v = ds_index_lookup(&ix, "val/x", 5);
	ok(v > 0 && (ds_ix_flags(&ix, v) & DS_EF_REPLICATED) &&
	           !(ds_ix_flags(&ix, v) & DS_EF_SAMPLE),
	   "replicated is not a sample");
	is(ix.h->nsamples, 2, "two samples");
	int64_t l = ds_index_lookup(&ix, "train/c.jpg", 11);
	ok(l > 0 && S_ISLNK(ds_ix_mode(&ix, l)) && !strcmp(ds_ix_target(&ix, l), "a.jpg"),
	   "symlink target");
	is(ds_index_lookup(&ix, "train/zzz", 9), -1, "missing path");
	uint64_t base = 0;
	ok(ds_index_part_on(&ix, 0, 1, &base) && base == 4096, "part 0 on node 1 at 4096");
	ok(!ds_index_part_on(&ix, 1, 0, &base), "part 1 not on node 0");
	struct stat st;
	ds_index_stat(&ix, t, &st);
	ok(st.st_ino == DS_INO(t) && st.st_nlink == 2 && st.st_mtim.tv_sec == 0 && st.st_mtim.tv_nsec == 3, "stat of a dir");
	((char *)buf)[len - 1] ^= 1;
	is(ds_index_from_buf(&ix, buf, len, 1), -DS_ECHECKSUM, "a flipped byte is caught");
	is(ds_index_from_buf(&ix, buf, len - 8, 0), -DS_ECORRUPT, "a truncated index is refused");
	free(buf);
	ds_index_builder_free(b);

	b = ds_index_builder_new();
	ds_index_add_file(b, "a", 0644, 0, 1, 0, 0, 1, 0, 0, 0);
	ds_index_add_file(b, "a", 0644, 0, 1, 0, 0, 1, 0, 0, 0);
	ds_index_set_parts(b, 1, sizes);
	is(ds_index_build(b, &buf, &len), -EEXIST, "duplicate path refused");
	ds_index_builder_free(b);
}

/* test_index's entries in path order; NULL path: in memory */
static int sorted_entries(struct ds_index_builder *b)
{
	static const uint64_t sizes[2] = {100, 50};
	int rc = ds_index_add_dir(b, "", 0755, 1, 4096);
	rc = rc ? rc : ds_index_add_dir(b, "train", 0750, 3, 4096);
	rc = rc ? rc
	        : ds_index_add_file(b, "train/a.jpg", 0600, 5, 20, 1, 0, 20, DS_CODEC_NONE, 8, 0);
	rc = rc ? rc
	        : ds_index_add_file(b, "train/b.jpg", 0644, 5, 10, 0, 0, 10, DS_CODEC_NONE, 7, 0);
	rc = rc ? rc : ds_index_add_symlink(b, "train/c.jpg", 6, "a.jpg");
	rc = rc ? rc : ds_index_add_dir(b, "train.old", 0755, 3, 4096);
	/* "val" never given: added as the builder that sorts adds it */
	rc = rc ? rc
	        : ds_index_add_file(b, "val/x", 0644, 5, 30, 0, 10, 30, DS_CODEC_NONE, 9,
	                            DS_EF_REPLICATED);
	ds_index_set_parts(b, 2, sizes);
	ds_index_add_loc(b, 1, 1, 0);
	ds_index_add_loc(b, 0, 0, 0);
	ds_index_add_loc(b, 0, 1, 4096);
	ds_index_set_node(b, 1, 2, 8192, "42", 99);
	return rc;
}

static int files_in(const char *dir)
{
	int n = 0;
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return n;
}

/* The builder for entries in path order (the stage's node leader's): the
 * same bytes as the one that sorts, in memory or written as they come; what
 * it refuses, and that a refusal leaves it whole. */
static void test_sorted_builder(void)
{
	uint32_t a = ds_crc32c(0, "12345", 5), b4 = ds_crc32c(0, "6789", 4);
	is(ds_crc32c_combine(a, b4, 4), 0xe3069283u, "crc32c of two pieces combined");
	struct ds_index_builder *b;
	void *buf;
	size_t len;
	is(ds_index_builder_sorted(NULL, &b), 0, "a sorted builder in memory");
	is(sorted_entries(b), 0, "its entries in path order");
	is(ds_index_build(b, &buf, &len), 0, "built");
	ok(len == any_len && !memcmp(buf, any_ix, len), "the bytes the sorting builder gives");
	is(ds_index_build(b, &buf, &len), -EINVAL, "built once");
	ds_index_builder_free(b);
	free(buf);

	const char *td = getenv("TMPDIR");
	char dir[PATH_MAX], path[PATH_MAX + 8], other[PATH_MAX + 8];
	snprintf(dir, sizeof(dir), "%s/dstage-test-sorted.XXXXXX", td && *td ? td : "/tmp");
	if (!mkdtemp(dir)) {
		skip(8, "no temporary directory");
		return;
	}
	snprintf(path, sizeof(path), "%s/index", dir);
	snprintf(other, sizeof(other), "%s/other", dir);
	is(ds_index_builder_sorted(path, &b), 0, "a sorted builder into a file");
	is(sorted_entries(b), 0, "its entries, each row written as it comes");
	is(files_in(dir), 1, "one temporary file meanwhile");
	is(ds_index_write(b, other), -EINVAL, "written only to its own path");
	is(ds_index_write(b, path), 0, "completed");
	ds_index_builder_free(b);
	struct ds_index ix;
	ok(!ds_index_open(&ix, path, 1) && ix.map_len == any_len && !memcmp(ix.h, any_ix, any_len),
	   "the file: the same bytes, passing the full check");
	ds_index_close(&ix);
	unlink(path);
	is(ds_index_builder_sorted(path, &b), 0, "another");
	ds_index_add_file(b, "a", 0644, 0, 1, 0, 0, 1, 0, 0, 0);
	ds_index_builder_free(b);
	is(files_in(dir), 0, "freed unwritten: its temporary is gone");
	rmdir(dir);

	ds_index_builder_sorted(NULL, &b);
	ok(!ds_index_add_file(b, "b", 0644, 0, 1, 0, 0, 1, 0, 0, 0), "b");
	is(ds_index_add_file(b, "a", 0644, 0, 1, 0, 0, 1, 0, 0, 0), -EINVAL,
	   "a after b: out of order");
	is(ds_index_add_file(b, "b", 0644, 0, 1, 0, 0, 1, 0, 0, 0), -EEXIST, "b twice");
	is(ds_index_add_dir(b, "", 0755, 0, 4096), -EINVAL, "the root after an entry");
	ok(!ds_index_add_file(b, "c", 0644, 0, 1, 0, 0, 1, 0, 0, 0), "c");
	is(ds_index_add_file(b, "c/d", 0644, 0, 1, 0, 0, 1, 0, 0, 0), -ENOTDIR, "under a file");
	ok(!ds_index_add_file(b, "d/e/f", 0644, 0, 1, 0, 0, 1, 0, 0, 0), "d/e/f: d, d/e added");
	is(ds_index_add_dir(b, "d/e", 0700, 0, 4096), -EINVAL, "d/e given after its file");
	ds_index_set_parts(b, 1, (uint64_t[]){3});
	is(ds_index_build(b, &buf, &len), 0, "what was taken builds");
	ok(!ds_index_from_buf(&ix, buf, len, 1) && ix.h->nentries == 6 && ix.h->nsamples == 3 &&
	           ds_index_lookup(&ix, "d/e/f", 5) == 5 && ds_ix_nlink(&ix, 0) == 3,
	   "root, b, c, d, d/e, d/e/f: checked in full");
	free(buf);
	ds_index_builder_free(b);
	free(any_ix);
}

static void test_place(void)
{
	uint64_t sizes[6] = {100, 90, 80, 10, 5, 1000};
	uint8_t repl[6] = {0, 0, 0, 0, 0, 1};
	struct ds_placement pl, pl2;
	is(ds_place(&pl, 6, sizes, repl, 3, 2), 0, "place 6 parts on 3 nodes, R=2");
	int ok_r = 1;
	for (uint32_t p = 0; p < 6; p++)
		ok_r &= pl.first[p + 1] - pl.first[p] == (p == 5 ? 3u : 2u);
	ok(ok_r, "every part on R distinct nodes, the replicated one on all");
	uint64_t lo = UINT64_MAX, hi = 0;
	for (uint32_t k = 0; k < 3; k++) {
		lo = pl.store_size[k] < lo ? pl.store_size[k] : lo;
		hi = pl.store_size[k] > hi ? pl.store_size[k] : hi;
	}
	ok(hi - lo <= 4096 * 2, "stores balanced within two alignment units");
	ds_place(&pl2, 6, sizes, repl, 3, 2);
	ok(!memcmp(pl.node, pl2.node, pl.first[6] * 4) && !memcmp(pl.base, pl2.base, pl.first[6] * 8), "deterministic");
	ds_placement_release(&pl2);
	uint64_t base;
	ok(ds_placement_has(&pl, 5, 2, &base) && base % DS_STORE_ALIGN == 0, "aligned bases");
	ds_placement_release(&pl);
	is(ds_place(&pl, 2, sizes, NULL, 2, 5), 0, "R above the node count");
	is(pl.r, 2, "R capped at the node count");
	ds_placement_release(&pl);
}

/* The spill tier (ds_place_tiers): replicated partitions first in RAM,
 * then the rest in partition order, first fit; bases per tier; a node that
 * fits keeps ds_place's layout. */
static void test_tiers(void)
{
	/* one node: parts 0..3 of 3, 2, 1, 1 pages; part 4 replicated, 2 pages */
	uint64_t pg = DS_STORE_ALIGN;
	uint64_t sizes[5] = {3 * pg, 2 * pg, pg, pg - 100, 2 * pg};
	uint8_t repl[5] = {0, 0, 0, 0, 1};
	struct ds_placement pl;
	uint64_t room[2] = {5 * pg, UINT64_MAX}, base;
	is(ds_place(&pl, 5, sizes, repl, 1, 1), 0, "place 5 parts on 1 node");
	is(ds_place_tiers(&pl, sizes, repl, room), 0, "tiers with a room of 5 pages");
	/* replicated (2) in RAM, part 0 (3) fits: 5 pages; 1, 2, 3 spill */
	uint8_t want[5] = {DS_TIER_RAM, DS_TIER_SPILL, DS_TIER_SPILL, DS_TIER_SPILL, DS_TIER_RAM};
	int good = 1;
	for (uint32_t p = 0; p < 5; p++)
		good &= pl.tier[pl.first[p]] == want[p];
	ok(good, "replicated first, then partition order, first fit");
	is(pl.ram_size[0], DS_SPILL_ALIGN, "the RAM part rounded up to DS_SPILL_ALIGN");
	ok(ds_placement_has(&pl, 0, 0, &base) && base == 0, "RAM bases from 0 in partition order");
	ok(ds_placement_has(&pl, 4, 0, &base) && base == 3 * pg, "... the replicated one after part 0");
	ok(ds_placement_has(&pl, 1, 0, &base) && base == DS_SPILL_ALIGN, "spill bases from ram_size");
	ok(ds_placement_has(&pl, 3, 0, &base) && base == DS_SPILL_ALIGN + 3 * pg, "... in order");
	is(pl.store_size[0], DS_SPILL_ALIGN + 4 * pg, "store: RAM part, then the spilled bytes");
	ds_placement_release(&pl);
	/* first fit: a later, smaller part still fits what is left */
	room[0] = 4 * pg;
	ds_place(&pl, 5, sizes, repl, 1, 1);
	ds_place_tiers(&pl, sizes, repl, room);
	ok(pl.tier[pl.first[0]] == DS_TIER_SPILL && pl.tier[pl.first[1]] == DS_TIER_RAM &&
	   pl.tier[pl.first[2]] == DS_TIER_SPILL && pl.tier[pl.first[4]] == DS_TIER_RAM,
	   "a part that does not fit spills, a later one that does stays");
	ds_placement_release(&pl);
	/* two nodes, one fits: its layout is ds_place's */
	struct ds_placement p0;
	ds_place(&p0, 5, sizes, repl, 2, 1);
	ds_place(&pl, 5, sizes, repl, 2, 1);
	room[0] = 0;
	room[1] = UINT64_MAX;
	ds_place_tiers(&pl, sizes, repl, room);
	good = pl.ram_size[1] == p0.store_size[1] && pl.store_size[1] == p0.store_size[1] &&
	       pl.ram_size[0] == 0;
	for (uint32_t l = 0; l < pl.first[5]; l++)
		good &= pl.node[l] == 0 ? pl.tier[l] == DS_TIER_SPILL
		                        : pl.tier[l] == DS_TIER_RAM && pl.base[l] == p0.base[l];
	ok(good, "a node that fits keeps its layout; a room of 0 spills all");
	ds_placement_release(&p0);
	ds_placement_release(&pl);
}

/* ds_write_file_atomic from threads of one process writing the same file
 * at once (the service's status writers): every call succeeds, the file
 * always holds one whole version (one thread's bytes, all of them), and no
 * temporary is left.  With one temporary name per process the threads
 * truncate and rename each other's: ENOENT, torn or short files. */
#define AW_THREADS 4
#define AW_ROUNDS 60
#define AW_LEN (256 * 1024)
static char aw_path[PATH_MAX + 16];
static atomic_int aw_errors, aw_torn, aw_stop;

static void *aw_writer(void *arg)
{
	int id = (int)(intptr_t)arg;
	char *buf = malloc(AW_LEN);
	memset(buf, 'A' + id, AW_LEN);
	for (int i = 0; i < AW_ROUNDS; i++) {
		int rc = ds_write_file_atomic(aw_path, buf, AW_LEN, 0600);
		if (rc) {
			if (atomic_fetch_add(&aw_errors, 1) < 3)
				diag("thread %d: ds_write_file_atomic: %s", id, ds_strerror(rc));
		}
	}
	free(buf);
	return NULL;
}

static void *aw_reader(void *arg)
{
	(void)arg;
	char *buf = malloc(AW_LEN + 1);
	while (!atomic_load(&aw_stop)) {
		FILE *f = fopen(aw_path, "rb");
		if (!f)
			continue;
		size_t n = fread(buf, 1, AW_LEN + 1, f);
		fclose(f);
		int whole = n == AW_LEN;
		for (size_t k = 1; whole && k < n; k++)
			whole = buf[k] == buf[0];
		if (!whole && atomic_fetch_add(&aw_torn, 1) < 3)
			diag("read %zu bytes, not one whole version", n);
	}
	free(buf);
	return NULL;
}

static void test_write_atomic(void)
{
	const char *td = getenv("TMPDIR");
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/dstage-test-common.XXXXXX", td && *td ? td : "/tmp");
	if (!mkdtemp(dir)) {
		skip(4, "no temporary directory");
		return;
	}
	snprintf(aw_path, sizeof(aw_path), "%s/status", dir);
	pthread_t w[AW_THREADS], r;
	pthread_create(&r, NULL, aw_reader, NULL);
	for (int i = 0; i < AW_THREADS; i++)
		pthread_create(&w[i], NULL, aw_writer, (void *)(intptr_t)i);
	for (int i = 0; i < AW_THREADS; i++)
		pthread_join(w[i], NULL);
	atomic_store(&aw_stop, 1);
	pthread_join(r, NULL);
	is(atomic_load(&aw_errors), 0, "%d threads x %d atomic writes of one file: all succeed",
	   AW_THREADS, AW_ROUNDS);
	is(atomic_load(&aw_torn), 0, "a reader meanwhile always sees one whole version");
	struct stat st;
	ok(stat(aw_path, &st) == 0 && st.st_size == AW_LEN && (st.st_mode & 0777) == 0600,
	   "the file is whole, mode 0600");
	int left = 0;
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (strcmp(e->d_name, "status")) {
			left++;
			diag("left behind: %s", e->d_name);
		}
		char p[PATH_MAX + NAME_MAX + 2];
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		unlink(p);
	}
	if (d)
		closedir(d);
	rmdir(dir);
	is(left, 0, "no temporary left behind");
}

int main(void)
{
	test_place();
	test_tiers();
	test_crc();
	test_crc(); /* again with the software path */
	test_sizes();
	test_names();
	test_index();
	test_sorted_builder();
	test_write_atomic();
	return done_testing();
}
