/* SPDX-License-Identifier: BSD-3-Clause */
/* test-epoch.c: unit tests of the epoch shuffle (common/epoch.c):
 * permutation, equal shares, pad/drop, seeds and epochs, locality, reader
 * slices, epoch.conf, speed for a million samples. */
#include "dscommon.h"
#include "dsepoch.h"
#include "dsindex.h"
#include "dsplace.h"
#include "tap.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct fixture {
	struct ds_index ix;
	void *buf;
	uint32_t *pos_of; /* entry id -> sample position, UINT32_MAX for non-samples */
};

static void BAIL_OUT_add(const char *p)
{
	printf("Bail out! cannot add %s\n", p);
	exit(1);
}

/* n training files in nparts contiguous partitions of equal count (sizes
 * equal, so a size-balanced placement is count-balanced when nnodes divides
 * nparts), placed on k nodes with replication r; skew != 0 makes partition 0
 * hold `skew` times as many files as the others. Plus 3 replicated files. */
static void fixture_make(struct fixture *f, uint32_t n, uint32_t k, uint32_t r, uint32_t nparts,
                         uint32_t skew)
{
	struct ds_index_builder *b = ds_index_builder_new();
	uint64_t *psize = ds_xcalloc(nparts + 1, sizeof(uint64_t));
	uint8_t *prepl = ds_xcalloc(nparts + 1, 1);
	uint32_t weight = (skew ? skew : 1) + nparts - 1;
	char path[64];
	ds_index_add_dir(b, "", 0755, 0, 4096);
	for (uint32_t i = 0; i < n; i++) {
		/* partition by count: the first n*skew/weight files in part 0 */
		uint64_t w = (uint64_t)i * weight / n;
		uint32_t p = skew ? (w < skew ? 0 : (uint32_t)(w - skew + 1)) : (uint32_t)((uint64_t)i * nparts / n);
		if (p >= nparts)
			p = nparts - 1;
		snprintf(path, sizeof(path), "train/c%03u/f%08u.jpg", i / 1000, i);
		if (ds_index_add_file(b, path, 0644, 0, 100, p, psize[p], 100, DS_CODEC_NONE, 0, 0))
			BAIL_OUT_add(path);
		psize[p] += 100;
	}
	for (uint32_t i = 0; i < 3; i++) {
		snprintf(path, sizeof(path), "val/v%u", i);
		ds_index_add_file(b, path, 0644, 0, 10, nparts, psize[nparts], 10, DS_CODEC_NONE, 0,
		                  DS_EF_REPLICATED);
		psize[nparts] += 10;
	}
	prepl[nparts] = 1;
	struct ds_placement pl;
	if (ds_place(&pl, nparts + 1, psize, prepl, k, r))
		abort();
	ds_index_set_parts(b, nparts + 1, psize);
	for (uint32_t p = 0; p <= nparts; p++)
		for (uint32_t l = pl.first[p]; l < pl.first[p + 1]; l++)
			ds_index_add_loc(b, p, pl.node[l], pl.base[l]);
	ds_index_set_node(b, 0, k, pl.store_size[0], "t", 1);
	size_t len;
	if (ds_index_build(b, &f->buf, &len) || ds_index_from_buf(&f->ix, f->buf, len, 1))
		abort();
	ds_index_builder_free(b);
	ds_placement_release(&pl);
	free(psize);
	free(prepl);
	f->pos_of = ds_xmalloc((size_t)f->ix.h->nentries * sizeof(uint32_t));
	memset(f->pos_of, 0xff, (size_t)f->ix.h->nentries * sizeof(uint32_t));
	for (uint32_t j = 0; j < f->ix.h->nsamples; j++)
		f->pos_of[ds_ix_sample(&f->ix, j)] = j;
}

static void fixture_free(struct fixture *f)
{
	ds_index_close(&f->ix);
	free(f->buf);
	free(f->pos_of);
}

static uint32_t owner(const struct ds_index *ix, uint32_t id)
{
	return ix->locs[ix->parts[ds_ix_part(ix, id)].loc].node;
}

/* All shares of one epoch: checks equal shares and the permutation property
 * (pad: every sample at least once, exactly T-N repeats; drop: no repeats,
 * exactly N-T missing).  Returns a malloc'd K*S array, or NULL. */
static uint32_t *all_shares(struct fixture *f, const struct ds_epoch_cfg *cfg, uint64_t e,
                            int *perm_ok, int *equal_ok)
{
	uint32_t k = f->ix.h->nnodes, ns = f->ix.h->nsamples;
	size_t s = ds_epoch_share_size(ns, k, cfg->drop_last);
	uint32_t *all = ds_xmalloc(s * k * sizeof(uint32_t) + 4);
	uint32_t *seen = ds_xcalloc(ns + 1, sizeof(uint32_t));
	*equal_ok = 1;
	*perm_ok = 1;
	for (uint32_t node = 0; node < k; node++) {
		uint32_t *ids;
		size_t n;
		if (ds_epoch_share(&f->ix, cfg, e, node, &ids, &n) || n != s) {
			*equal_ok = 0;
			free(ids);
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			uint32_t p = ids[i] < f->ix.h->nentries ? f->pos_of[ids[i]] : UINT32_MAX;
			if (p == UINT32_MAX)
				*perm_ok = 0; /* not a training sample */
			else
				seen[p]++;
		}
		memcpy(all + node * s, ids, n * sizeof(uint32_t));
		free(ids);
	}
	size_t t = s * k, repeats = 0, missing = 0;
	for (uint32_t j = 0; j < ns; j++) {
		if (!seen[j])
			missing++;
		else
			repeats += seen[j] - 1;
	}
	if (cfg->drop_last ? (repeats || missing != ns - t) : (missing || repeats != t - ns))
		*perm_ok = 0;
	free(seen);
	return all;
}

static void test_permutation(uint32_t ns, uint32_t k, int drop)
{
	struct fixture f;
	fixture_make(&f, ns, k, 1, 2 * k, 0);
	struct ds_epoch_cfg cfg = {.seed = 42, .locality = 0, .drop_last = drop};
	int all_perm = 1, all_equal = 1, differ = 1;
	uint32_t *prev = NULL;
	size_t s = ds_epoch_share_size(ns, k, drop);
	for (uint64_t e = 0; e < 5; e++) {
		int p, q;
		uint32_t *sh = all_shares(&f, &cfg, e, &p, &q);
		all_perm &= p;
		all_equal &= q;
		if (prev && !memcmp(prev, sh, s * k * sizeof(uint32_t)))
			differ = 0;
		free(prev);
		prev = sh;
	}
	free(prev);
	ok(all_equal, "N=%u K=%u %s: 5 epochs, every node gets exactly %zu", ns, k,
	   drop ? "drop" : "pad", s);
	ok(all_perm, "N=%u K=%u %s: every epoch is one permutation of the samples", ns, k,
	   drop ? "drop" : "pad");
	if (s > 1)
		ok(differ, "N=%u K=%u %s: consecutive epochs differ", ns, k, drop ? "drop" : "pad");
	fixture_free(&f);
}

static void test_seeds(void)
{
	struct fixture f;
	fixture_make(&f, 5000, 3, 1, 6, 0);
	struct ds_epoch_cfg a = {.seed = 7}, b = {.seed = 8};
	int p, q;
	size_t s = ds_epoch_share_size(5000, 3, 0);
	uint32_t *x = all_shares(&f, &a, 3, &p, &q), *y = all_shares(&f, &a, 3, &p, &q);
	uint32_t *z = all_shares(&f, &b, 3, &p, &q);
	ok(!memcmp(x, y, s * 3 * 4), "same seed and epoch: same lists");
	ok(memcmp(x, z, s * 3 * 4), "different seed: different lists");
	/* a different seed must not just rotate the same permutation */
	size_t same = 0;
	for (size_t i = 0; i < s; i++)
		same += x[i] == z[i];
	ok(same < s / 100, "different seed: positions agree only by chance (%zu of %zu)", same, s);
	free(x);
	free(y);
	free(z);
	a.locality = b.locality = 0.5;
	x = all_shares(&f, &a, 3, &p, &q);
	y = all_shares(&f, &a, 3, &p, &q);
	z = all_shares(&f, &b, 3, &p, &q);
	ok(!memcmp(x, y, s * 3 * 4) && memcmp(x, z, s * 3 * 4), "L=0.5: same seed same, different seed different");
	free(x);
	free(y);
	free(z);
	fixture_free(&f);
}

/* Fraction of node k's share it holds in its store (any copy), and the
 * fraction it owns (primary copy). */
static void local_fracs(struct fixture *f, const uint32_t *sh, size_t s, uint32_t node,
                        double *held, double *owned)
{
	size_t h = 0, o = 0;
	for (size_t i = 0; i < s; i++) {
		h += ds_index_part_on(&f->ix, ds_ix_part(&f->ix, sh[i]), node, NULL);
		o += owner(&f->ix, sh[i]) == node;
	}
	*held = (double)h / s;
	*owned = (double)o / s;
}

static void test_locality(void)
{
	struct fixture f;
	uint32_t k = 4, ns = 20000;
	fixture_make(&f, ns, k, 1, 8, 0);
	for (int d = 0; d < 2; d++) {
		for (double l = 0; l <= 1.0; l += 0.25) {
			struct ds_epoch_cfg cfg = {.seed = 1, .locality = l, .drop_last = d};
			int p, q, fracs_ok = 1;
			double lo = 1, hi = 0;
			size_t s = ds_epoch_share_size(ns, k, d);
			for (uint64_t e = 0; e < 3; e++) {
				uint32_t *sh = all_shares(&f, &cfg, e, &p, &q);
				fracs_ok &= p && q;
				for (uint32_t node = 0; node < k; node++) {
					double held, owned;
					local_fracs(&f, sh + node * s, s, node, &held, &owned);
					lo = held < lo ? held : lo;
					hi = held > hi ? held : hi;
					/* kept ~L, plus what the random rest brings by chance
					 * (1/K of it, R = 1) */
					double want = l + (1 - l) / k;
					if (held < want - 0.02 || held > want + 0.02)
						fracs_ok = 0;
				}
				free(sh);
			}
			ok(fracs_ok, "L=%.2f %s: local fraction %.3f..%.3f ~ L + (1-L)/K = %.3f, still a permutation with equal shares",
			   l, d ? "drop" : "pad", lo, hi, l + (1 - l) / k);
		}
	}
	fixture_free(&f);

	/* L = 1, R = 1, balanced placement: nothing moves */
	fixture_make(&f, 12000, 4, 1, 8, 0);
	struct ds_epoch_cfg one = {.seed = 5, .locality = 1};
	int p, q, all_held = 1;
	size_t s = ds_epoch_share_size(12000, 4, 0);
	for (uint64_t e = 0; e < 3; e++) {
		uint32_t *sh = all_shares(&f, &one, e, &p, &q);
		all_held &= p && q;
		for (uint32_t node = 0; node < 4; node++) {
			double held, owned;
			local_fracs(&f, sh + node * s, s, node, &held, &owned);
			all_held &= held == 1.0;
		}
		free(sh);
	}
	ok(all_held, "L=1 R=1 balanced: every sample read on the node that holds it, equal shares");
	/* and the order still changes every epoch */
	uint32_t *a0, *a1;
	size_t n0, n1;
	ds_epoch_share(&f.ix, &one, 0, 0, &a0, &n0);
	ds_epoch_share(&f.ix, &one, 1, 0, &a1, &n1);
	ok(n0 == n1 && memcmp(a0, a1, n0 * 4), "L=1: the read order still changes between epochs");
	free(a0);
	free(a1);
	fixture_free(&f);

	/* L = 1, R = 2, skewed partitions (part 0 has 5x the files): replicas let
	 * every sample stay on a holder */
	fixture_make(&f, 9000, 3, 2, 6, 5);
	s = ds_epoch_share_size(9000, 3, 0);
	all_held = 1;
	for (uint64_t e = 0; e < 3; e++) {
		uint32_t *sh = all_shares(&f, &one, e, &p, &q);
		all_held &= p && q;
		for (uint32_t node = 0; node < 3; node++) {
			double held, owned;
			local_fracs(&f, sh + node * s, s, node, &held, &owned);
			all_held &= held == 1.0;
		}
		free(sh);
	}
	ok(all_held, "L=1 R=2 skewed placement: replicas keep every sample on a holder");
	struct ds_epoch_cfg half = {.seed = 5, .locality = 0.5, .drop_last = 1};
	int fracs_ok = 1;
	s = ds_epoch_share_size(9000, 3, 1);
	for (uint64_t e = 0; e < 3; e++) {
		uint32_t *sh = all_shares(&f, &half, e, &p, &q);
		fracs_ok &= p && q;
		for (uint32_t node = 0; node < 3; node++) {
			double held, owned;
			local_fracs(&f, sh + node * s, s, node, &held, &owned);
			fracs_ok &= held >= 0.5;
		}
		free(sh);
	}
	ok(fracs_ok, "L=0.5 R=2 skewed, drop: at least half of every share held locally, a permutation");
	fixture_free(&f);

	/* L = 1, R = 1, skewed: only the excess over the share moves */
	fixture_make(&f, 8000, 2, 1, 4, 5);
	s = ds_epoch_share_size(8000, 2, 0);
	size_t own[2] = {0, 0};
	for (uint32_t j = 0; j < f.ix.h->nsamples; j++)
		own[owner(&f.ix, ds_ix_sample(&f.ix, j))]++;
	size_t excess = (own[0] > s ? own[0] - s : 0) + (own[1] > s ? own[1] - s : 0);
	uint32_t *sh = all_shares(&f, &one, 0, &p, &q);
	size_t moved = 0;
	for (uint32_t node = 0; node < 2; node++)
		for (size_t i = 0; i < s; i++)
			moved += !ds_index_part_on(&f.ix, ds_ix_part(&f.ix, sh[node * s + i]), node,
			                           NULL);
	ok(p && q && moved == excess && excess > 0,
	   "L=1 R=1 skewed (owns %zu/%zu of share %zu): only the excess moves (%zu, want %zu)",
	   own[0], own[1], s, moved, excess);
	free(sh);
	fixture_free(&f);
}

static void test_randomness(void)
{
	/* overlap with the previous epoch: ~1/K at L=0, grows with L */
	struct fixture f;
	uint32_t k = 4, ns = 20000;
	fixture_make(&f, ns, k, 1, 8, 0);
	double ov[2];
	double ls[2] = {0, 0.75};
	for (int c = 0; c < 2; c++) {
		struct ds_epoch_cfg cfg = {.seed = 9, .locality = ls[c]};
		uint32_t *a, *b;
		size_t na, nb;
		ds_epoch_share(&f.ix, &cfg, 0, 1, &a, &na);
		ds_epoch_share(&f.ix, &cfg, 1, 1, &b, &nb);
		uint8_t *in = ds_xcalloc(f.ix.h->nentries, 1);
		for (size_t i = 0; i < na; i++)
			in[a[i]] = 1;
		size_t both = 0;
		for (size_t i = 0; i < nb; i++)
			both += in[b[i]];
		ov[c] = (double)both / nb;
		free(in);
		free(a);
		free(b);
	}
	ok(ov[0] > 0.23 && ov[0] < 0.27, "L=0: a node re-reads ~1/K of its previous share (%.3f)", ov[0]);
	ok(ov[1] > 0.5, "L=0.75: it re-reads more (%.3f): the randomness locality costs", ov[1]);
	fixture_free(&f);
}

static void test_small(void)
{
	/* fewer samples than nodes */
	struct fixture f;
	fixture_make(&f, 2, 4, 1, 1, 0);
	struct ds_epoch_cfg cfg = {.seed = 3};
	int p, q;
	uint32_t *sh = all_shares(&f, &cfg, 0, &p, &q);
	ok(p && q, "N=2 K=4 pad: one sample each, repeats to fill");
	free(sh);
	cfg.drop_last = 1;
	uint32_t *ids;
	size_t n;
	ok(!ds_epoch_share(&f.ix, &cfg, 0, 3, &ids, &n) && n == 0, "N=2 K=4 drop: empty shares");
	free(ids);
	ok(ds_epoch_share(&f.ix, &cfg, 0, 4, &ids, &n) == -EINVAL, "node out of range refused");
	cfg.locality = 1.5;
	ok(ds_epoch_share(&f.ix, &cfg, 0, 0, &ids, &n) == -EINVAL, "locality out of range refused");
	fixture_free(&f);
}

static void test_slices(void)
{
	uint32_t share[10];
	for (uint32_t i = 0; i < 10; i++)
		share[i] = 100 + i;
	uint32_t *o;
	size_t n;
	/* pad: 10 over 4 readers -> 3 each, list padded with share[0], share[1] */
	int good = 1;
	uint32_t cnt[10] = {0};
	for (uint32_t l = 0; l < 4; l++) {
		good &= !ds_epoch_reader_slice(share, 10, l, 4, 0, &o, &n) && n == 3;
		for (size_t j = 0; j < n; j++) {
			good &= o[j] == share[(l + j * 4) % 10];
			cnt[o[j] - 100]++;
		}
		free(o);
	}
	good &= cnt[0] == 2 && cnt[1] == 2 && cnt[9] == 1;
	ok(good, "reader slices, pad: DistributedSampler's rule, share covered, 2 repeats");
	good = 1;
	memset(cnt, 0, sizeof(cnt));
	for (uint32_t l = 0; l < 4; l++) {
		good &= !ds_epoch_reader_slice(share, 10, l, 4, 1, &o, &n) && n == 2;
		for (size_t j = 0; j < n; j++)
			cnt[o[j] - 100]++;
		free(o);
	}
	good &= cnt[8] == 0 && cnt[9] == 0 && cnt[0] == 1 && cnt[7] == 1;
	ok(good, "reader slices, drop: 2 each, the last 2 dropped");
	ok(!ds_epoch_reader_slice(share, 10, 0, 1, 0, &o, &n) && n == 10 && !memcmp(o, share, 40),
	   "one reader gets the whole share in order");
	free(o);
	ok(ds_epoch_reader_slice(share, 10, 4, 4, 0, &o, &n) == -EINVAL, "reader out of range refused");
}

static void test_cfg(void)
{
	char dir[] = "/tmp/dstage-test-epoch.XXXXXX";
	if (!mkdtemp(dir)) {
		skip(4, "mkdtemp");
		return;
	}
	struct ds_epoch_cfg c = {.seed = 99, .locality = 0.1, .drop_last = 1}, d;
	ok(!ds_epoch_cfg_load(dir, &d) && d.seed == 0 && d.locality == 0 && !d.drop_last,
	   "no epoch.conf: defaults");
	ok(!ds_epoch_cfg_save(dir, &c) && !ds_epoch_cfg_load(dir, &d) && d.seed == 99 &&
	       d.locality == 0.1 && d.drop_last == 1,
	   "epoch.conf round-trips exactly (locality 0.1 bit for bit)");
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/epoch.conf", dir);
	FILE *fp = fopen(path, "w");
	fputs("seed=1\nlocality=2\n", fp);
	fclose(fp);
	ok(ds_epoch_cfg_load(dir, &d) == -DS_ECORRUPT, "locality 2 refused");
	fp = fopen(path, "w");
	fputs("seed=1\nfuture_key=x\nlocality=0.25\n", fp);
	fclose(fp);
	ok(!ds_epoch_cfg_load(dir, &d) && d.locality == 0.25, "unknown keys ignored");
	ds_rm_rf(dir);
}

static void test_speed(void)
{
	struct fixture f;
	uint32_t ns = 1000000, k = 4;
	fixture_make(&f, ns, k, 1, 64, 0);
	struct ds_epoch_cfg cfg = {.seed = 1};
	uint32_t *ids;
	size_t n;
	double t0 = ds_now();
	int rc = ds_epoch_share(&f.ix, &cfg, 0, 2, &ids, &n);
	double t1 = ds_now();
	free(ids);
	cfg.locality = 0.5;
	rc |= ds_epoch_share(&f.ix, &cfg, 0, 2, &ids, &n);
	double t2 = ds_now();
	free(ids);
	diag("1M samples: share in %.1f ms (L=0), %.1f ms (L=0.5)", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
	ok(!rc && t1 - t0 < 0.5 && t2 - t1 < 1.0, "1M samples: one share well under a second");
	fixture_free(&f);
}

int main(void)
{
	test_permutation(1000, 2, 0);
	test_permutation(1000, 2, 1);
	test_permutation(1001, 3, 0);
	test_permutation(1001, 3, 1);
	test_permutation(997, 4, 0);
	test_permutation(997, 4, 1);
	test_permutation(7, 4, 0);
	test_seeds();
	test_locality();
	test_randomness();
	test_small();
	test_slices();
	test_cfg();
	test_speed();
	return done_testing();
}
