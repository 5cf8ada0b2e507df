/* SPDX-License-Identifier: BSD-3-Clause */
/* nodeset.c: node sets, the JOBDIR/nodes history, the epoch shuffle over a
 * set of surviving nodes and exact resume (dsnodeset.h, docs/failover.md).
 *
 * The shuffle over a set reuses ds_epoch_share unchanged on a shadow of the
 * index: the same header with nnodes = K' (the set's size) and the
 * locations renumbered to positions in the set, a lost node becoming K'
 * (ds_epoch_share ignores a location whose node is >= nnodes).  The
 * permutation of the samples depends on (seed, epoch) only, so the set
 * changes how it is dealt, not the permutation; on the full set the shadow
 * is the index itself and the lists are the ones of every earlier release. */
#include "dscommon.h"
#include "dsnodeset.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- sets ---------------------------------------------------------------- */
static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static int parse_num(const char **p, uint32_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	if (*s < '0' || *s > '9')
		return -1;
	while (*s >= '0' && *s <= '9') {
		x = x * 10 + (uint64_t)(*s - '0');
		if (x > UINT32_MAX - 1)
			return -1;
		s++;
	}
	*p = s;
	*v = (uint32_t)x;
	return 0;
}

int ds_nodeset_parse(const char *text, uint32_t limit, struct ds_nodeset *set)
{
	set->n = 0;
	set->node = NULL;
	size_t cap = 0;
	const char *p = text;
	if (!p || !*p)
		return -EINVAL;
	for (;;) {
		uint32_t a, b;
		if (parse_num(&p, &a))
			goto bad;
		b = a;
		if (*p == '-') {
			p++;
			if (parse_num(&p, &b) || b < a)
				goto bad;
		}
		if (limit && b >= limit)
			goto bad;
		if ((uint64_t)set->n + (b - a) + 1 > (1u << 24))
			goto bad;
		for (uint64_t v = a; v <= b; v++) {
			if (set->n == cap) {
				cap = cap ? cap * 2 : 16;
				uint32_t *nn = realloc(set->node, cap * sizeof(uint32_t));
				if (!nn) {
					ds_nodeset_release(set);
					return -ENOMEM;
				}
				set->node = nn;
			}
			set->node[set->n++] = (uint32_t)v;
		}
		if (!*p)
			break;
		if (*p++ != ',')
			goto bad;
	}
	qsort(set->node, set->n, sizeof(uint32_t), cmp_u32);
	for (uint32_t i = 1; i < set->n; i++)
		if (set->node[i] == set->node[i - 1])
			goto bad;
	return 0;
bad:
	ds_nodeset_release(set);
	return -EINVAL;
}

int ds_nodeset_format(const struct ds_nodeset *set, char *buf, size_t len)
{
	size_t w = 0;
	if (!len)
		return -ENAMETOOLONG;
	buf[0] = 0;
	for (uint32_t i = 0; i < set->n;) {
		uint32_t j = i;
		while (j + 1 < set->n && set->node[j + 1] == set->node[j] + 1)
			j++;
		int k = j == i ? snprintf(buf + w, len - w, "%s%u", w ? "," : "", set->node[i])
		               : snprintf(buf + w, len - w, "%s%u-%u", w ? "," : "", set->node[i], set->node[j]);
		if (k < 0 || (size_t)k >= len - w)
			return -ENAMETOOLONG;
		w += (size_t)k;
		i = j + 1;
	}
	return 0;
}

int ds_nodeset_all(uint32_t n, struct ds_nodeset *set)
{
	set->n = n;
	set->node = malloc((n ? n : 1) * sizeof(uint32_t));
	if (!set->node) {
		set->n = 0;
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i++)
		set->node[i] = i;
	return 0;
}

int ds_nodeset_copy(const struct ds_nodeset *from, struct ds_nodeset *to)
{
	to->n = from->n;
	to->node = malloc((from->n ? from->n : 1) * sizeof(uint32_t));
	if (!to->node) {
		to->n = 0;
		return -ENOMEM;
	}
	if (from->n)
		memcpy(to->node, from->node, from->n * sizeof(uint32_t));
	return 0;
}

void ds_nodeset_release(struct ds_nodeset *set)
{
	free(set->node);
	set->node = NULL;
	set->n = 0;
}

int ds_nodeset_pos(const struct ds_nodeset *set, uint32_t node)
{
	uint32_t lo = 0, hi = set->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (set->node[mid] < node)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < set->n && set->node[lo] == node ? (int)lo : -1;
}

int ds_nodeset_equal(const struct ds_nodeset *a, const struct ds_nodeset *b)
{
	return a->n == b->n && (!a->n || !memcmp(a->node, b->node, a->n * sizeof(uint32_t)));
}

int ds_nodeset_is_all(const struct ds_nodeset *set, uint32_t nstaged)
{
	return set->n == nstaged && (!nstaged || set->node[nstaged - 1] == nstaged - 1);
}

/* ---- JOBDIR/nodes -------------------------------------------------------- */
void ds_nodes_release(struct ds_nodes_hist *h)
{
	for (size_t i = 0; i < h->n; i++)
		ds_nodeset_release(&h->h[i].set);
	free(h->h);
	memset(h, 0, sizeof(*h));
}

int ds_nodes_add(struct ds_nodes_hist *h, uint64_t from, const struct ds_nodeset *set)
{
	while (h->n && h->h[h->n - 1].from >= from)
		ds_nodeset_release(&h->h[--h->n].set);
	if (h->n && ds_nodeset_equal(&h->h[h->n - 1].set, set))
		return 0;
	if (h->n >= DS_NODES_MAX_HIST)
		return -E2BIG;
	struct ds_nodes_change *nh = realloc(h->h, (h->n + 1) * sizeof(*nh));
	if (!nh)
		return -ENOMEM;
	h->h = nh;
	int rc = ds_nodeset_copy(set, &h->h[h->n].set);
	if (rc)
		return rc;
	h->h[h->n++].from = from;
	return 0;
}

const struct ds_nodeset *ds_nodes_for_epoch(const struct ds_nodes_hist *h, uint64_t e)
{
	const struct ds_nodeset *s = NULL;
	for (size_t i = 0; i < h->n && h->h[i].from <= e; i++)
		s = &h->h[i].set;
	if (s && ds_nodeset_is_all(s, h->nstaged))
		return NULL;
	return s;
}

/* JOBDIR/nodes holds at most DS_NODES_MAX_HIST short lines: a file this
 * large is not one (and is not read into memory). */
#define NODES_MAX_BYTES (64u << 20)

int ds_nodes_load(const char *jobdir, struct ds_nodes_hist *h)
{
	memset(h, 0, sizeof(*h));
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/" DS_NODES_NAME, jobdir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	/* bounded: DS_NODES_MAX_HIST lines of at most a few KiB each */
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap + 1);
	if (!buf) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = errno;
			close(fd);
			free(buf);
			return -e;
		}
		if (r == 0)
			break;
		len += (size_t)r;
		if (len == cap) {
			if (cap >= NODES_MAX_BYTES) {
				close(fd);
				free(buf);
				return -DS_ECORRUPT;
			}
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				close(fd);
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
	}
	close(fd);
	buf[len] = 0;
	int rc = 0, have_staged = 0;
	for (char *line = buf, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		if (*line == '#' || !*line)
			continue;
		if (!strncmp(line, "from=", 5)) {
			char *sp = strchr(line, ' ');
			uint64_t from;
			struct ds_nodeset set;
			if (!have_staged || !sp || strncmp(sp, " nodes=", 7)) {
				rc = -DS_ECORRUPT;
				break;
			}
			*sp = 0;
			if (ds_parse_u64(line + 5, &from) || ds_nodeset_parse(sp + 7, h->nstaged, &set)) {
				rc = -DS_ECORRUPT;
				break;
			}
			if ((h->n && from <= h->h[h->n - 1].from) || !set.n) {
				ds_nodeset_release(&set);
				rc = -DS_ECORRUPT;
				break;
			}
			rc = ds_nodes_add(h, from, &set);
			ds_nodeset_release(&set);
			if (rc)
				break;
			continue;
		}
		char *eq = strchr(line, '=');
		if (!eq) {
			rc = -DS_ECORRUPT;
			break;
		}
		*eq = 0;
		uint64_t v;
		if (ds_parse_u64(eq + 1, &v)) {
			rc = -DS_ECORRUPT;
			break;
		}
		if (!strcmp(line, "version") && v != 1) {
			rc = -DS_EFORMAT;
			break;
		} else if (!strcmp(line, "staged")) {
			if (!v || v > UINT32_MAX - 1) {
				rc = -DS_ECORRUPT;
				break;
			}
			h->nstaged = (uint32_t)v;
			have_staged = 1;
		} else if (!strcmp(line, "failover")) {
			h->failover = v != 0;
		}
	}
	free(buf);
	if (!rc && !have_staged)
		rc = -DS_ECORRUPT;
	if (rc)
		ds_nodes_release(h);
	return rc;
}

int ds_nodes_save(const char *jobdir, const struct ds_nodes_hist *h)
{
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s/" DS_NODES_NAME, jobdir) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	size_t cap = 256, len = 0;
	for (size_t i = 0; i < h->n; i++)
		cap += 48 + (size_t)h->h[i].set.n * 24;
	char *buf = malloc(cap);
	if (!buf)
		return -ENOMEM;
	len += (size_t)snprintf(buf, cap,
	                        "# node sets of this job, by first epoch (written by dstage serve)\n"
	                        "version=1\nstaged=%u\nfailover=%d\n",
	                        h->nstaged, h->failover ? 1 : 0);
	int rc = 0;
	for (size_t i = 0; i < h->n && !rc; i++) {
		len += (size_t)snprintf(buf + len, cap - len, "from=%llu nodes=",
		                        (unsigned long long)h->h[i].from);
		rc = ds_nodeset_format(&h->h[i].set, buf + len, cap - len);
		len += strlen(buf + len);
		if (!rc && len + 1 < cap)
			buf[len++] = '\n';
	}
	if (!rc)
		rc = ds_write_file_atomic(path, buf, len, 0600);
	free(buf);
	return rc;
}

/* ---- the shuffle over a set ------------------------------------------------ */
int ds_epoch_share_set(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, uint64_t epoch,
                       const struct ds_nodeset *set, uint32_t node, uint32_t **ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	if (!set || ds_nodeset_is_all(set, ix->h->nnodes))
		return ds_epoch_share(ix, cfg, epoch, node, ids, n);
	int pos = ds_nodeset_pos(set, node);
	if (pos < 0)
		return -ENOENT;
	struct ds_index_header hdr;
	memcpy(&hdr, ix->h, sizeof(hdr));
	hdr.nnodes = set->n;
	struct ds_loc *locs = malloc(((size_t)ix->h->nlocs + 1) * sizeof(*locs));
	if (!locs)
		return -ENOMEM;
	for (uint32_t i = 0; i < ix->h->nlocs; i++) {
		locs[i] = ix->locs[i];
		int p = ds_nodeset_pos(set, ix->locs[i].node);
		locs[i].node = p < 0 ? set->n : (uint32_t)p; /* lost: out of range */
	}
	struct ds_index shadow = *ix;
	shadow.h = &hdr;
	shadow.locs = locs;
	int rc = ds_epoch_share(&shadow, cfg, epoch, (uint32_t)pos, ids, n);
	free(locs);
	return rc;
}

/* ---- a node's share, published ---------------------------------------------- */
#define SHARE_MAGIC "DSSHARE1"
#define SHARE_VERSION 1u

struct share_hdr {
	char magic[8];
	uint32_t version, hdr_size;
	struct ds_share_key key;
	uint64_t n;
	uint32_t crc; /* CRC-32C of the ids */
	uint32_t pad;
};

void ds_share_key_make(struct ds_share_key *k, const struct ds_index *ix,
                       const struct ds_epoch_cfg *cfg, uint64_t epoch, const struct ds_nodeset *set,
                       uint32_t node)
{
	memset(k, 0, sizeof(*k));
	k->epoch = epoch;
	k->seed = cfg->seed;
	memcpy(&k->locality_bits, &cfg->locality, sizeof(k->locality_bits));
	k->pack_id = ix->h->pack_id;
	k->node = node;
	k->drop_last = cfg->drop_last ? 1 : 0;
	/* a set of every staged node deals as no set (ds_epoch_share_set) */
	if (set && !ds_nodeset_is_all(set, ix->h->nnodes)) {
		uint64_t h = 0xcbf29ce484222325ull ^ set->n;
		for (uint32_t i = 0; i < set->n; i++)
			h = (h ^ set->node[i]) * 0x100000001b3ull;
		k->set_sig = h | 1;
	}
}

static int share_path(char *buf, size_t len, const char *nodedir, uint64_t epoch)
{
	int k = snprintf(buf, len, "%s/" DS_CACHE_DIR_NAME "/" DS_SHARE_PREFIX "%llu", nodedir,
	                 (unsigned long long)epoch);
	return k < 0 || (size_t)k >= len ? -ENAMETOOLONG : 0;
}

int ds_share_publish(const char *nodedir, const struct ds_share_key *k, const uint32_t *ids,
                     size_t n)
{
	char path[PATH_MAX];
	int rc = share_path(path, sizeof(path), nodedir, k->epoch);
	if (rc)
		return rc;
	size_t len = sizeof(struct share_hdr) + n * sizeof(uint32_t);
	struct share_hdr *h = calloc(1, len);
	if (!h)
		return -ENOMEM;
	memcpy(h->magic, SHARE_MAGIC, 8);
	h->version = SHARE_VERSION;
	h->hdr_size = sizeof(*h);
	h->key = *k;
	h->n = n;
	memcpy(h + 1, ids, n * sizeof(uint32_t));
	h->crc = ds_crc32c(0, ids, n * sizeof(uint32_t));
	rc = ds_write_file_atomic(path, h, len, 0600);
	free(h);
	return rc;
}

int ds_share_map(const char *nodedir, const struct ds_share_key *k, const uint32_t **ids, size_t *n,
                 void **map, size_t *maplen)
{
	char path[PATH_MAX];
	int rc = share_path(path, sizeof(path), nodedir, k->epoch);
	if (rc)
		return rc;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0) {
		rc = -errno;
		close(fd);
		return rc;
	}
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size < sizeof(struct share_hdr)) {
		close(fd);
		return -DS_ECORRUPT;
	}
	size_t len = (size_t)st.st_size;
	void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return -errno;
	const struct share_hdr *h = m;
	rc = 0;
	if (memcmp(h->magic, SHARE_MAGIC, 8) || h->version != SHARE_VERSION ||
	    h->hdr_size != sizeof(*h) || h->n > (len - sizeof(*h)) / sizeof(uint32_t) ||
	    len != sizeof(*h) + h->n * sizeof(uint32_t))
		rc = -DS_ECORRUPT;
	else if (memcmp(&h->key, k, sizeof(*k)))
		rc = -ESTALE;
	else if (ds_crc32c(0, h + 1, h->n * sizeof(uint32_t)) != h->crc)
		rc = -DS_ECORRUPT;
	if (rc) {
		munmap(m, len);
		return rc;
	}
	*ids = (const uint32_t *)(h + 1);
	*n = h->n;
	*map = m;
	*maplen = len;
	return 0;
}

void ds_share_unmap(void *map, size_t maplen)
{
	if (map)
		munmap(map, maplen);
}

void ds_share_unlink(const char *nodedir, uint64_t epoch)
{
	char path[PATH_MAX];
	if (!share_path(path, sizeof(path), nodedir, epoch))
		unlink(path);
}

/* ---- exact resume ---------------------------------------------------------- */
int ds_resume_list(const struct ds_index *ix, const struct ds_epoch_cfg *cfg, const struct ds_resume *r,
                   const struct ds_nodeset *to, uint32_t node, uint32_t l, uint32_t nreaders,
                   uint32_t **ids, size_t *n)
{
	*ids = NULL;
	*n = 0;
	if (!r->nreaders || !r->from.n || !nreaders || l >= nreaders)
		return -EINVAL;
	struct ds_nodeset all = {0, NULL};
	if (!to) {
		if (ds_nodeset_all(ix->h->nnodes, &all))
			return -ENOMEM;
		to = &all;
	}
	int rc = 0, pos = ds_nodeset_pos(to, node);
	if (pos >= 0 && ds_nodeset_equal(to, &r->from) && nreaders == r->nreaders) {
		/* same nodes, same readers: exactly the rest of this reader's list,
		 * padding repeats included, as the uninterrupted run reads it */
		uint32_t *share = NULL, *sl = NULL;
		size_t ns = 0, nsl = 0;
		rc = ds_epoch_share_set(ix, cfg, r->epoch, &r->from, node, &share, &ns);
		if (!rc && ns)
			rc = ds_epoch_reader_slice(share, ns, l, nreaders, cfg->drop_last, &sl, &nsl);
		free(share);
		ds_nodeset_release(&all);
		if (rc) {
			free(sl);
			return rc;
		}
		size_t k = r->k < nsl ? (size_t)r->k : nsl;
		if (sl && k)
			memmove(sl, sl + k, (nsl - k) * sizeof(uint32_t));
		*ids = sl ? sl : malloc(sizeof(uint32_t));
		*n = nsl - k;
		return *ids ? 0 : -ENOMEM;
	}
	uint32_t ne = ix->h->nentries;
	uint8_t *mark = calloc((size_t)ne + 1, 1); /* 1: read before the checkpoint, 2: taken */
	uint32_t *rest = malloc(((size_t)ix->h->nsamples + 1) * sizeof(uint32_t));
	size_t nrest = 0;
	if (pos < 0)
		rc = -ENOENT;
	else if (!mark || !rest)
		rc = -ENOMEM;
	/* with locality the old lists depend on the placement: the same staging */
	for (uint32_t i = 0; cfg->locality > 0 && i < r->from.n && !rc; i++)
		if (r->from.node[i] >= ix->h->nnodes)
			rc = -EINVAL;
	/* two passes over the old lists: what was read, then the rest in order */
	for (int pass = 0; pass < 2 && !rc; pass++) {
		for (uint32_t i = 0; i < r->from.n && !rc; i++) {
			uint32_t *share = NULL;
			size_t ns = 0;
			rc = ds_epoch_share_set(ix, cfg, r->epoch, &r->from, r->from.node[i], &share, &ns);
			for (uint32_t rl = 0; rl < r->nreaders && !rc; rl++) {
				uint32_t *sl = NULL;
				size_t nsl = 0;
				if (ns)
					rc = ds_epoch_reader_slice(share, ns, rl, r->nreaders, cfg->drop_last, &sl, &nsl);
				if (rc)
					break;
				size_t k = r->k < nsl ? (size_t)r->k : nsl;
				if (pass == 0) {
					for (size_t j = 0; j < k; j++)
						mark[sl[j]] = 1;
				} else {
					for (size_t j = k; j < nsl; j++)
						if (!mark[sl[j]]) {
							mark[sl[j]] = 2;
							rest[nrest++] = sl[j];
						}
				}
				free(sl);
			}
			free(share);
		}
	}
	uint32_t *out = NULL;
	size_t m = 0;
	if (!rc) {
		/* node pos of K' takes i % K' == pos, its reader l of n j % n == l */
		out = malloc((nrest / to->n / nreaders + 2) * sizeof(uint32_t));
		if (!out)
			rc = -ENOMEM;
		size_t j = 0;
		for (size_t i = (size_t)pos; !rc && i < nrest; i += to->n, j++)
			if (j % nreaders == l)
				out[m++] = rest[i];
	}
	free(mark);
	free(rest);
	ds_nodeset_release(&all);
	if (rc) {
		free(out);
		return rc;
	}
	*ids = out;
	*n = m;
	return 0;
}
