/* SPDX-License-Identifier: BSD-3-Clause */
/* epoch.c: the virtual epoch lists (docs/design.md section 4).
 *
 *   $DSTAGE_MOUNT/.dstage/epochs/<e>/all        this node's share of epoch e
 *   $DSTAGE_MOUNT/.dstage/epochs/<e>/<l>-of-<n> local reader l of n's part
 *
 * Read-only files whose content is the paths (relative to the mount, one a
 * line, in read order) from ds_epoch_share / ds_epoch_reader_slice, the pure
 * function every node and the service compute alike (cfg from
 * DSTAGE_STORE/epoch.conf).  Opening one tells the service the epoch started
 * (best effort).  .dstage is not listed in the root; .dstage/epochs lists
 * the epoch readers are in (stats), <e> lists "all". */
#include "shim.h"
#include "dsepoch.h"
#include "dsnodeset.h"

#include <stdio.h>

static int parse_u64(const char *s, size_t len, uint64_t *v)
{
	if (len == 0 || len > 19)
		return -1;
	uint64_t x = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		x = x * 10 + (s[i] - '0');
	}
	if (len > 1 && s[0] == '0')
		return -1; /* one name per number */
	*v = x;
	return 0;
}

int ds__virt_lookup(const char *rest, size_t len, struct ds__vent *v, size_t *used)
{
	const char *p = rest, *end = rest + len;
	memset(v, 0, sizeof(*v));
	v->kind = DS__V_ROOT;
	while (p < end) {
		while (p < end && *p == '/')
			p++;
		if (p == end)
			break;
		const char *c = p;
		while (p < end && *p != '/')
			p++;
		size_t cl = p - c;
		if (cl == 1 && c[0] == '.')
			continue;
		/* ".." climbs like in a real tree; out of .dstage it is the
		 * mount root again and the caller walks on from there */
		if (cl == 2 && c[0] == '.' && c[1] == '.') {
			switch (v->kind) {
			case DS__V_ROOT:
				*used = p - rest;
				return 1;
			case DS__V_EPOCHS: v->kind = DS__V_ROOT; break;
			case DS__V_EPOCH: v->kind = DS__V_EPOCHS; v->epoch = 0; break;
			default: return -ENOTDIR;
			}
			continue;
		}
		uint64_t a, b;
		switch (v->kind) {
		case DS__V_ROOT:
			if (cl != 6 || memcmp(c, "epochs", 6))
				return -ENOENT;
			v->kind = DS__V_EPOCHS;
			break;
		case DS__V_EPOCHS:
			if (parse_u64(c, cl, &v->epoch))
				return -ENOENT;
			v->kind = DS__V_EPOCH;
			break;
		case DS__V_EPOCH: {
			if (cl == 3 && !memcmp(c, "all", 3)) {
				v->n = 0;
			} else {
				const char *of = memmem(c, cl, "-of-", 4);
				if (!of || parse_u64(c, of - c, &a) ||
				    parse_u64(of + 4, cl - (of + 4 - c), &b) || b == 0 || a >= b ||
				    b > UINT32_MAX)
					return -ENOENT;
				v->l = (uint32_t)a;
				v->n = (uint32_t)b;
			}
			v->kind = DS__V_LIST;
			break;
		}
		default:
			return -ENOTDIR;
		}
	}
	if (v->kind == DS__V_LIST && len && rest[len - 1] == '/')
		return -ENOTDIR;
	return 0;
}

int ds__epoch_ids(uint64_t epoch, uint32_t l, uint32_t nr, uint32_t **out, size_t *count)
{
	struct ds_epoch_cfg cfg;
	uint32_t *own = NULL, *part = NULL;
	const uint32_t *ids = NULL;
	size_t n = 0, np = 0;
	void *map = NULL;
	size_t maplen = 0;
	int published = 0;
	*out = NULL;
	*count = 0;
	int rc = ds_epoch_cfg_load(ds__g.jobdir, &cfg);
	if (rc == 0) {
		/* after a lost node: the set this epoch is dealt over (JOBDIR/nodes) */
		struct ds_nodes_hist hist;
		rc = ds_nodes_load(ds__g.jobdir, &hist);
		/* a history of another staging of the job (node count) is not ours */
		const struct ds_nodeset *set = rc == 0 && hist.nstaged == ds__g.ix.h->nnodes
		                                       ? ds_nodes_for_epoch(&hist, epoch)
		                                       : NULL;
		/* the service's share of this epoch when it wrote it down for us
		 * and it is ours (same pack, cfg, node and set): the list then
		 * costs this reader's part only, not the permutation of every
		 * sample of the job */
		struct ds_share_key k;
		if (rc == 0) {
			ds_share_key_make(&k, &ds__g.ix, &cfg, epoch, set, ds__g.node);
			published = ds_share_map(ds__g.nodedir, &k, &ids, &n, &map, &maplen) == 0;
		}
		/* else compute it.  The share walks samples, partitions and
		 * locations: the index was mapped without the full check, so
		 * check those first (O(n), like the share itself), once: the
		 * mapping is the process's for its life */
		static int shuffle_ok;
		if (rc == 0 && !published && !__atomic_load_n(&shuffle_ok, __ATOMIC_ACQUIRE)) {
			rc = ds_index_check_shuffle(&ds__g.ix);
			if (rc == 0)
				__atomic_store_n(&shuffle_ok, 1, __ATOMIC_RELEASE);
		}
		if (rc == 0 && !published) {
			rc = ds_epoch_share_set(&ds__g.ix, &cfg, epoch, set, ds__g.node, &own, &n);
			ids = own;
		}
		ds_nodes_release(&hist);
	}
	if (rc == 0 && nr) {
		rc = ds_epoch_reader_slice(ids, n, l, nr, cfg.drop_last, &part, &np);
		ids = part;
		n = np;
	} else if (rc == 0 && published) {
		/* the whole share, out of the mapping that goes below */
		part = malloc(n ? n * sizeof(uint32_t) : 1);
		if (!part)
			rc = -ENOMEM;
		else
			memcpy(part, ids, n * sizeof(uint32_t));
		ids = part;
	}
	/* a published share's ids are the service's: each one used must be a
	 * sample the index can follow (the computed ones are, by the check);
	 * the caller checks the ones it follows (ds__virt_content all of them,
	 * in id order; ds_py_list's the ones it names), which saves a read of
	 * entries all over the index in read order here */
	ds_share_unmap(map, maplen);
	if (rc == 0 && ids == own) {
		*out = own;
		own = NULL;
	} else if (rc == 0) {
		*out = part;
		part = NULL;
	}
	free(own);
	free(part);
	if (rc)
		return rc < 0 && rc > -4096 ? rc : -EIO;
	*count = n;
	return 0;
}

int ds__virt_content(const struct ds__vent *v, char **data, size_t *len)
{
	uint32_t *ids;
	size_t n;
	/* the ids are checked by ds_ix_list, in id order, as their paths are
	 * built: a published share's ids are the service's, each must be a
	 * sample the index can follow (computed ones passed the shuffle's
	 * check) */
	int rc = ds__epoch_ids(v->epoch, v->l, v->n, &ids, &n);
	if (rc)
		return rc;
	rc = ds_ix_list(&ds__g.ix, ids, n, data, len);
	free(ids);
	return rc;
}

uint64_t ds__virt_ino(const struct ds__vent *v)
{
	/* above every real entry's; lists hashed by (epoch, l, n) */
	uint64_t base = DS_INO(ds__g.ix.h->nentries) + 1;
	switch (v->kind) {
	case DS__V_ROOT: return base;
	case DS__V_EPOCHS: return base + 1;
	case DS__V_EPOCH: return base + 2 + (v->epoch << 1);
	default: {
		char key[64];
		int k = snprintf(key, sizeof(key), "%llu/%u/%u", (unsigned long long)v->epoch, v->l, v->n);
		return base + 2 + (((ds_hash_path(key, k) >> 1) | 1) & ((1ull << 48) - 1));
	}
	}
}

void ds__virt_stat(const struct ds__vent *v, struct stat *st, int with_size)
{
	const struct ds_index_header *h = ds__g.ix.h;
	memset(st, 0, sizeof(*st));
	st->st_dev = h->dev;
	st->st_ino = ds__virt_ino(v);
	st->st_uid = h->uid;
	st->st_gid = h->gid;
	st->st_blksize = 4096;
	st->st_mtim.tv_sec = ds_ix_mtime(&ds__g.ix, 0) / 1000000000; /* the mount root's */
	st->st_mtim.tv_nsec = ds_ix_mtime(&ds__g.ix, 0) % 1000000000;
	st->st_atim = st->st_ctim = st->st_mtim;
	if (v->kind == DS__V_LIST) {
		char *data;
		size_t len = 0;
		if (with_size && ds__virt_content(v, &data, &len) == 0)
			free(data);
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = len;
		st->st_blocks = ds_stat_blocks(S_IFREG, len);
	} else {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = v->kind == DS__V_EPOCH ? 2 : 3;
		st->st_size = 4096;
		st->st_blocks = ds_stat_blocks(S_IFDIR, 4096);
	}
}

int ds__virt_child(const struct ds__vent *v, size_t i, char *name, size_t len, struct ds__vent *c)
{
	if (i != 0 || v->kind == DS__V_LIST)
		return -ENOENT;
	*c = *v;
	switch (v->kind) {
	case DS__V_ROOT:
		c->kind = DS__V_EPOCHS;
		snprintf(name, len, "epochs");
		break;
	case DS__V_EPOCHS:
		c->kind = DS__V_EPOCH;
		c->epoch = ds__g.stats ? __atomic_load_n(&ds__g.stats->epoch, __ATOMIC_RELAXED) : 0;
		snprintf(name, len, "%llu", (unsigned long long)c->epoch);
		break;
	default:
		c->kind = DS__V_LIST;
		c->n = 0;
		snprintf(name, len, "all");
		break;
	}
	return 0;
}
