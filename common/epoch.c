/* SPDX-License-Identifier: BSD-3-Clause */
/* epoch.c: the epoch shuffle as a pure function of (index, cfg, epoch).
 *
 * docs/design.md section 4.  Every node service and every reader (through the
 * shim) computes the same assignment with no communication, so all of this
 * is integer arithmetic on a seeded PRNG: the result must be bit-identical
 * on every node, whatever compiler built the caller.
 *
 * The assignment of epoch e:
 *
 *  1. P = a Fisher-Yates permutation of the N sample positions (ix->samples)
 *     seeded from (seed, e).  Q = P stretched to T = S * K slots, S the
 *     share of each of the K nodes: S = ceil(N/K) with padding (Q[i] =
 *     P[i % N], DistributedSampler's "repeat from the start"), S = floor(N/K)
 *     with drop_last (the tail of P is dropped).
 *  2. Locality L > 0: each node may keep q = round(L * S) of its own
 *     samples.  "Own" = the sample's partition has this node as its FIRST
 *     location (its primary copy), so with replication every sample has
 *     exactly one owner and the quotas of the holders do not compete for it.
 *     Walking Q in order, a sample goes to its owner while the owner's quota
 *     lasts; when it is full, to another node holding a replica (the one
 *     with the fewest kept so far), if one has room.  Walking in Q order
 *     makes the kept subset a uniformly random subset of what a node holds.
 *  3. Every slot of Q not kept is dealt, in Q order, to the nodes' remaining
 *     free slots (node 0's first, then node 1's ...).  Q is random, so this
 *     is a uniform random assignment of the rest.  At L = 0 step 2 is empty
 *     and node k simply gets Q[kS, (k+1)S).
 *  4. With L > 0 a node's share is shuffled once more (stream 1 + node):
 *     otherwise its kept samples, which tend to sit early in Q, would be
 *     read first, and a node's own samples are whole partitions, i.e.
 *     neighbouring paths (often one class): a biased start of every epoch.
 *
 * Properties: every epoch is a permutation (each slot of Q goes to exactly
 * one node, every node gets exactly S slots); L = 1 moves no sample whenever
 * the placement allows it (each node's own count <= S, or replicas to fall
 * back on); when it does not (R = 1 and a node owns more than S samples: a
 * size-balanced placement need not be count-balanced), only that excess
 * moves, which is the least any equal-share assignment can move.
 *
 * Cost: O(N + K) time and 12 bytes per sample of scratch, per call; ~tens
 * of ms for a million samples, ~0.3 s for 14 million (the permutation's
 * random reads, prefetched).  The shim calls it when a reader opens a list
 * without a published share, the service once per epoch (off its main
 * thread: shuffle/exchange.c). */
#include "dscommon.h"
#include "dsepoch.h"

#include <fcntl.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- PRNG: xoshiro256** seeded through splitmix64 ----------------------- */
struct rng {
	uint64_t s[4];
};

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Independent streams per (seed, epoch, stream): each input goes through a
 * full splitmix64 round, so neighbouring epochs or seeds share no state. */
static void rng_init(struct rng *r, uint64_t seed, uint64_t epoch, uint64_t stream)
{
	uint64_t x = seed;
	uint64_t h = splitmix64(&x);
	x = h ^ epoch;
	h = splitmix64(&x);
	x = h ^ stream;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

/* Uniform in [0, n) without modulo bias (Lemire's multiply-and-reject). */
static inline uint32_t rng_below(struct rng *r, uint32_t n)
{
	uint64_t m = (rng_next(r) >> 32) * (uint64_t)n;
	uint32_t lo = (uint32_t)m;
	if (lo < n) {
		uint32_t t = (uint32_t)(-n) % n;
		while (lo < t) {
			m = (rng_next(r) >> 32) * (uint64_t)n;
			lo = (uint32_t)m;
		}
	}
	return (uint32_t)(m >> 32);
}

/* Fisher-Yates from the top.  The swap partners j do not depend on the
 * array's contents, only on the PRNG: they are drawn LOOKAHEAD steps early
 * (the same draws in the same order, so the same permutation) and their
 * cache lines prefetched, so that the random reads of a permutation larger
 * than the caches overlap instead of waiting one after another: 14M samples
 * (56 MB) measured 0.50 s plain, 0.25 s this way. */
#define LOOKAHEAD 16
static void shuffle_u32(struct rng *r, uint32_t *a, size_t n)
{
	uint32_t ring[LOOKAHEAD];
	size_t g = n; /* the next i whose partner is drawn */
	for (size_t i = n; i > 1; i--) {
		while (g > 1 && g + LOOKAHEAD > i) {
			uint32_t j = rng_below(r, (uint32_t)g);
			ring[g % LOOKAHEAD] = j;
			__builtin_prefetch(&a[j], 1);
			g--;
		}
		uint32_t j = ring[i % LOOKAHEAD];
		uint32_t t = a[i - 1];
		a[i - 1] = a[j];
		a[j] = t;
	}
}

/* ---- the share of one node ---------------------------------------------- */
#define UNASSIGNED UINT32_MAX

size_t ds_epoch_share_size(uint32_t nsamples, uint32_t nnodes, int drop_last)
{
	if (!nnodes)
		return 0;
	return drop_last ? nsamples / nnodes : ((size_t)nsamples + nnodes - 1) / nnodes;
}

/* The location index (into ix->locs) of `node` among part p's holders. */
static uint32_t loc_of(const struct ds_index *ix, uint32_t p, uint32_t node)
{
	const struct ds_part *pp = &ix->parts[p];
	for (uint32_t l = 0; l < pp->nloc; l++)
		if (ix->locs[pp->loc + l].node == node)
			return pp->loc + l;
	return UNASSIGNED;
}

/* With replicas, the greedy pass can strand a sample: all its holders are
 * full, while one of them could hand a sample of another partition to a
 * third holder with room.  Fix it on counts per (partition, location):
 * y[loc] = slots kept by that location's node for that partition, u[p] =
 * slots of p not kept.  Augmenting paths part -> holder -> part -> ... ->
 * node with room (a bipartite b-matching, max-flow style) until none is
 * left; then deal the kept counts back onto the slots in Q order, so each
 * partition's kept slots stay its first ones in Q, a random subset.
 * struct flow is repair()'s state; its phases are the functions below. */
struct flow {
	const struct ds_index *ix;
	uint32_t np, k, nl;
	uint64_t *y, *u; /* kept slots per location, stranded slots per partition */
	/* CSR: node -> locations it holds (one per partition) */
	uint32_t *nfirst, *nlocl, *fill, *loc_part;
	/* BFS state: predecessor location of a node / part, visit marks */
	uint32_t *from_node, *from_part, *queue;
};

static void flow_free(struct flow *f)
{
	free(f->y);
	free(f->u);
	free(f->nfirst);
	free(f->nlocl);
	free(f->from_node);
	free(f->from_part);
	free(f->queue);
	free(f->fill);
	free(f->loc_part);
}

static int flow_alloc(struct flow *f, const struct ds_index *ix)
{
	uint32_t np = ix->h->nparts, k = ix->h->nnodes, nl = ix->h->nlocs;
	*f = (struct flow){.ix = ix, .np = np, .k = k, .nl = nl};
	f->y = calloc(nl + 1, sizeof(uint64_t));
	f->u = calloc(np + 1, sizeof(uint64_t));
	f->nfirst = calloc((size_t)k + 1, sizeof(uint32_t));
	f->nlocl = malloc((nl + 1) * 4);
	f->from_node = malloc(((size_t)k + 1) * 4);
	f->from_part = malloc(((size_t)np + 1) * 4);
	f->queue = malloc(((size_t)np + k + 1) * 4);
	f->fill = calloc((size_t)k + 1, 4);
	f->loc_part = malloc((nl + 1) * 4);
	if (!f->y || !f->u || !f->nfirst || !f->nlocl || !f->from_node || !f->from_part ||
	    !f->queue || !f->fill || !f->loc_part)
		return -ENOMEM;
	return 0;
}

/* The graph: each location's partition, and each node's locations (CSR). */
static void flow_graph(struct flow *f)
{
	const struct ds_index *ix = f->ix;
	for (uint32_t p = 0; p < f->np; p++)
		for (uint32_t l = 0; l < ix->parts[p].nloc; l++) {
			uint32_t li = ix->parts[p].loc + l;
			f->loc_part[li] = p;
			if (ix->locs[li].node < f->k)
				f->nfirst[ix->locs[li].node + 1]++;
		}
	for (uint32_t h = 0; h < f->k; h++)
		f->nfirst[h + 1] += f->nfirst[h];
	for (uint32_t li = 0; li < f->nl; li++) {
		uint32_t h = ix->locs[li].node;
		if (h < f->k)
			f->nlocl[f->nfirst[h] + f->fill[h]++] = li;
	}
}

/* The counts of the greedy pass's assignment. */
static void flow_count(struct flow *f, const uint32_t *part, const uint32_t *perm, uint32_t n,
                       size_t t, const uint32_t *assign)
{
	for (size_t i = 0; i < t; i++) {
		uint32_t p = part[perm[i % n]];
		if (p >= f->np)
			continue;
		if (assign[i] == UNASSIGNED)
			f->u[p]++;
		else
			f->y[loc_of(f->ix, p, assign[i])]++;
	}
}

/* From full node h, queue every partition h keeps a slot of, not yet reached. */
static void flow_enqueue_kept(struct flow *f, uint32_t h, size_t *qt)
{
	for (uint32_t j = f->nfirst[h]; j < f->nfirst[h + 1]; j++) {
		uint32_t l2 = f->nlocl[j], p2 = f->loc_part[l2];
		if (f->y[l2] && f->from_part[p2] == UNASSIGNED) {
			f->from_part[p2] = l2;
			f->queue[(*qt)++] = p2;
		}
	}
}

/* Multi-source BFS from every partition with stranded slots: the node with
 * room an augmenting path ends at, or UNASSIGNED when there is none. */
static uint32_t flow_find_path(struct flow *f, const size_t *kept, size_t quota)
{
	const struct ds_index *ix = f->ix;
	size_t qh = 0, qt = 0;
	for (uint32_t h = 0; h < f->k; h++)
		f->from_node[h] = UNASSIGNED;
	for (uint32_t p = 0; p < f->np; p++) {
		f->from_part[p] = UNASSIGNED;
		if (f->u[p] && ix->parts[p].nloc > 1) {
			f->from_part[p] = f->nl; /* a source */
			f->queue[qt++] = p;
		}
	}
	while (qh < qt) {
		uint32_t p = f->queue[qh++];
		const struct ds_part *pp = &ix->parts[p];
		for (uint32_t l = 0; l < pp->nloc; l++) {
			uint32_t li = pp->loc + l, h = ix->locs[li].node;
			if (h >= f->k || f->from_node[h] != UNASSIGNED)
				continue;
			f->from_node[h] = li; /* reached h by adding a slot of p */
			if (kept[h] < quota)
				return h;
			/* h is full: it may give up a slot of a partition p2 it keeps */
			flow_enqueue_kept(f, h, &qt);
		}
	}
	return UNASSIGNED;
}

/* The bottleneck along the path ending at sink, then push it through. */
static void flow_augment(struct flow *f, uint32_t sink, size_t quota, size_t *kept)
{
	const struct ds_index *ix = f->ix;
	uint64_t d = quota - kept[sink];
	for (uint32_t h = sink;;) {
		uint32_t li = f->from_node[h], p = f->loc_part[li], back = f->from_part[p];
		if (back == f->nl) {
			d = d < f->u[p] ? d : f->u[p];
			break;
		}
		d = d < f->y[back] ? d : f->y[back];
		h = ix->locs[back].node;
	}
	for (uint32_t h = sink;;) {
		uint32_t li = f->from_node[h], p = f->loc_part[li], back = f->from_part[p];
		f->y[li] += d;
		if (back == f->nl) {
			f->u[p] -= d;
			break;
		}
		f->y[back] -= d;
		h = ix->locs[back].node;
	}
	kept[sink] += d;
}

/* Deal the counts onto the slots: the holder with the most left first. */
static void flow_deal(struct flow *f, const uint32_t *part, const uint32_t *perm, uint32_t n,
                      size_t t, uint32_t *assign)
{
	const struct ds_index *ix = f->ix;
	for (size_t i = 0; i < t; i++) {
		uint32_t p = part[perm[i % n]];
		assign[i] = UNASSIGNED;
		if (p >= f->np)
			continue;
		const struct ds_part *pp = &ix->parts[p];
		uint32_t best = UNASSIGNED;
		for (uint32_t l = 0; l < pp->nloc; l++)
			if (f->y[pp->loc + l] &&
			    (best == UNASSIGNED || f->y[pp->loc + l] > f->y[best]))
				best = pp->loc + l;
		if (best != UNASSIGNED) {
			f->y[best]--;
			assign[i] = ix->locs[best].node;
		}
	}
}

static int repair(const struct ds_index *ix, const uint32_t *part, const uint32_t *perm, uint32_t n,
                  size_t t, size_t quota, size_t *kept, uint32_t *assign)
{
	struct flow f;
	int rc = flow_alloc(&f, ix);
	if (rc == 0) {
		flow_graph(&f);
		flow_count(&f, part, perm, n, t, assign);
		for (uint32_t sink; (sink = flow_find_path(&f, kept, quota)) != UNASSIGNED;)
			flow_augment(&f, sink, quota, kept);
		flow_deal(&f, part, perm, n, t, assign);
	}
	flow_free(&f);
	return rc;
}

/* Step 2 for every slot of Q: assign[i] = node keeping it, or UNASSIGNED. */
static int keep_local(const struct ds_index *ix, const uint32_t *perm, uint32_t n, size_t t,
                      size_t quota, uint32_t *assign)
{
	uint32_t k = ix->h->nnodes;
	/* partition of each sample position, computed in path order: ix->samples
	 * is sorted like the entries, so this pass reads the entry table
	 * sequentially instead of 64-byte random reads per slot */
	uint32_t *part = malloc((size_t)n * sizeof(uint32_t));
	size_t *kept = calloc(k, sizeof(size_t));
	if (!part || !kept) {
		free(part);
		free(kept);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < n; j++)
		part[j] = ds_ix_part(ix, ds_ix_sample(ix, j));
	int stranded = 0; /* a replicated sample found every holder full */
	for (size_t i = 0; i < t; i++) {
		assign[i] = UNASSIGNED;
		uint32_t p = part[perm[i % n]];
		if (p >= ix->h->nparts)
			continue;
		const struct ds_part *pp = &ix->parts[p];
		if (!pp->nloc)
			continue;
		const struct ds_loc *loc = &ix->locs[pp->loc];
		uint32_t owner = loc[0].node;
		if (owner < k && kept[owner] < quota) {
			assign[i] = owner;
			kept[owner]++;
			continue;
		}
		uint32_t best = UNASSIGNED;
		for (uint32_t l = 1; l < pp->nloc; l++) {
			uint32_t h = loc[l].node;
			if (h < k && kept[h] < quota && (best == UNASSIGNED || kept[h] < kept[best]))
				best = h;
		}
		if (best != UNASSIGNED) {
			assign[i] = best;
			kept[best]++;
		} else if (pp->nloc > 1) {
			stranded = 1;
		}
	}
	int rc = 0;
	if (stranded) {
		int room = 0;
		for (uint32_t h = 0; h < k; h++)
			room |= kept[h] < quota;
		if (room)
			rc = repair(ix, part, perm, n, t, quota, kept, assign);
	}
	free(part);
	free(kept);
	return rc;
}

int ds_epoch_share(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, uint64_t epoch,
                   uint32_t node, uint32_t **ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	uint32_t ns = ix->h->nsamples, k = ix->h->nnodes;
	if (!k || node >= k)
		return -EINVAL;
	double loc = cfg->locality;
	if (!(loc >= 0.0 && loc <= 1.0)) /* also catches NaN */
		return -EINVAL;
	size_t s = ds_epoch_share_size(ns, k, cfg->drop_last), t = s * k;
	uint32_t *out = malloc(s ? s * sizeof(uint32_t) : 1);
	if (!out)
		return -ENOMEM;
	if (!s) {
		*ids = out;
		return 0;
	}
	uint32_t *perm = malloc((size_t)ns * sizeof(uint32_t));
	if (!perm) {
		free(out);
		return -ENOMEM;
	}
	for (uint32_t j = 0; j < ns; j++)
		perm[j] = j;
	struct rng r;
	rng_init(&r, cfg->seed, epoch, 0);
	shuffle_u32(&r, perm, ns);

	/* floor(L * S + 0.5): L and S are exact inputs, IEEE double arithmetic
	 * gives every node the same quota */
	size_t quota = (size_t)floor(loc * (double)s + 0.5);
	if (quota > s)
		quota = s;
	if (quota == 0) {
		/* random reads of the sample table: prefetched like the shuffle's */
		for (size_t i = 0; i < s; i++) {
			if (i + LOOKAHEAD < s)
				__builtin_prefetch(
					&ix->samples[perm[((size_t)node * s + i + LOOKAHEAD) %
				                          ns]]);
			out[i] = ds_ix_sample(ix, perm[((size_t)node * s + i) % ns]);
		}
		free(perm);
		*ids = out;
		*n = s;
		return 0;
	}

	uint32_t *assign = malloc(t * sizeof(uint32_t));
	size_t *room = calloc(k, sizeof(size_t));
	int rc = assign && room ? keep_local(ix, perm, ns, t, quota, assign) : -ENOMEM;
	if (!rc) {
		for (uint32_t h = 0; h < k; h++)
			room[h] = s;
		for (size_t i = 0; i < t; i++)
			if (assign[i] != UNASSIGNED)
				room[assign[i]]--;
		uint32_t c = 0;
		size_t m = 0;
		for (size_t i = 0; i < t; i++) {
			if (assign[i] == UNASSIGNED) {
				while (room[c] == 0)
					c++; /* total room == unassigned slots: c stays < k */
				assign[i] = c;
				room[c]--;
			}
			if (assign[i] == node)
				out[m++] = ds_ix_sample(ix, perm[i % ns]);
		}
		rng_init(&r, cfg->seed, epoch, 1 + (uint64_t)node);
		shuffle_u32(&r, out, m);
		*n = m; /* == s */
	}
	free(assign);
	free(room);
	free(perm);
	if (rc) {
		free(out);
		return rc;
	}
	*ids = out;
	return 0;
}

int ds_epoch_reader_slice(const uint32_t *share, size_t n, uint32_t l, uint32_t nreaders,
                          int drop_last, uint32_t **out, size_t *nout)
{
	*out = NULL;
	*nout = 0;
	if (!nreaders || l >= nreaders)
		return -EINVAL;
	size_t per = n ? (drop_last ? n / nreaders : (n + nreaders - 1) / nreaders) : 0;
	uint32_t *o = malloc(per ? per * sizeof(uint32_t) : 1);
	if (!o)
		return -ENOMEM;
	/* torch DistributedSampler: pad by repeating the list from its start
	 * (element t of the padded list is share[t % n]), reader l takes
	 * t = l, l + nreaders, ... */
	for (size_t j = 0; j < per; j++)
		o[j] = share[(l + j * nreaders) % n];
	*out = o;
	*nout = per;
	return 0;
}

/* ---- JOBDIR/epoch.conf -------------------------------------------------- */
#define CFG_NAME DS_EPOCH_CONF_NAME

/* The shim parses this inside arbitrary programs, which may have called
 * setlocale() with a decimal comma: parse numbers in the C locale. */
static double parse_double_c(const char *s, char **end)
{
	static locale_t c_loc;
	locale_t l = __atomic_load_n(&c_loc, __ATOMIC_ACQUIRE);
	if (!l) {
		locale_t nl = newlocale(LC_ALL_MASK, "C", (locale_t)0);
		if (!nl) {
			*end = (char *)s;
			return 0;
		}
		locale_t expect = (locale_t)0;
		if (!__atomic_compare_exchange_n(&c_loc, &expect, nl, 0, __ATOMIC_ACQ_REL,
		                                 __ATOMIC_ACQUIRE)) {
			freelocale(nl);
			nl = expect;
		}
		l = nl;
	}
	return strtod_l(s, end, l);
}

int ds_epoch_cfg_load(const char *jobdir, struct ds_epoch_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/" CFG_NAME, jobdir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	char buf[4096];
	size_t len = 0;
	for (;;) {
		ssize_t r = read(fd, buf + len, sizeof(buf) - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			return -e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == sizeof(buf) - 1)
			break;
	}
	close(fd);
	buf[len] = 0;
	/* key=value per line, '#' comments; unknown keys are ignored so that a
	 * newer service can add some */
	int have_seed = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (*line == '#' || !*line)
			continue;
		char *eq = strchr(line, '=');
		if (!eq)
			return -DS_ECORRUPT;
		*eq = 0;
		const char *key = line, *val = eq + 1;
		char *end;
		if (!strcmp(key, "seed")) {
			if (ds_parse_u64(val, &cfg->seed))
				return -DS_ECORRUPT;
			have_seed = 1;
		} else if (!strcmp(key, "locality")) {
			errno = 0;
			cfg->locality = parse_double_c(val, &end);
			if (errno || end == val || *end || !(cfg->locality >= 0 && cfg->locality <= 1))
				return -DS_ECORRUPT;
		} else if (!strcmp(key, "drop_last")) {
			if (strcmp(val, "0") && strcmp(val, "1"))
				return -DS_ECORRUPT;
			cfg->drop_last = *val == '1';
		} else if (!strcmp(key, "version")) {
			if (strcmp(val, "1"))
				return -DS_EFORMAT;
		}
	}
	return have_seed ? 0 : -DS_ECORRUPT;
}

int ds_epoch_cfg_save(const char *jobdir, const struct ds_epoch_cfg *cfg)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/" CFG_NAME, jobdir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if (!(cfg->locality >= 0 && cfg->locality <= 1))
		return -EINVAL;
	char text[256];
	/* %.17g round-trips a double exactly, so the shim's quota equals ours */
	int len = snprintf(text, sizeof(text),
	                   "# the epoch shuffle of this job (written by dstage serve)\n"
	                   "version=1\nseed=%llu\nlocality=%.17g\ndrop_last=%d\n",
	                   (unsigned long long)cfg->seed, cfg->locality, cfg->drop_last ? 1 : 0);
	/* the C locale's '.' whatever the caller's locale */
	for (char *p = strstr(text, "locality="); p && *p && *p != '\n'; p++)
		if (*p == ',')
			*p = '.';
	return ds_write_file_atomic(path, text, (size_t)len, 0600);
}
