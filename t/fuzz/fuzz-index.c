/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-index.c: libFuzzer target for the node-store index as the shim sees
 * it: mapped with ds_index_from_buf(full = 0), then used only through what
 * the shim relies on (ds_index_entry_ok before following any id read from
 * the index; lookups; partition locations; the shuffle check before the
 * epoch share; the cursors of epoch lists and readdir, ds_ix_paths and
 * ds_ix_child_named, which check what they follow themselves), and through
 * the full check the service runs.
 *
 * Inputs are images of NODEDIR/index.  As in fuzz-manifest, the CRC is made
 * to match first (the shim does not check it; the full check does, and a
 * mismatch would stop it before the structure checks).
 *
 * Build and run (make fuzz does both):
 *   make fuzz (or: clang -fsanitize=fuzzer,address,undefined -Icommon
 *   t/fuzz/fuzz-index.c common/[a-z]*.c -lz -lm)
 *   ./fuzz-index -max_total_time=60 t/fuzz/corpus-index */
#include "dscommon.h"
#include "dsepoch.h"
#include "dsindex.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path the cursor gives (ds_ix_paths_get: n bytes) is what a reader may
 * hold: shorter than PATH_MAX, components that are names ("" the root's
 * alone: no empty one, no "." or "..", no NUL). */
static void path_safe(const char *p, int n)
{
	if (n < 0) {
		if (*p)
			__builtin_trap();
		return;
	}
	if (n >= PATH_MAX || strlen(p) != (size_t)n)
		__builtin_trap();
	for (const char *c = p; n && c <= p + n;) {
		const char *e = memchr(c, '/', (size_t)(p + n - c));
		size_t l = e ? (size_t)(e - c) : (size_t)(p + n - c);
		if (!l || (c[0] == '.' && (l == 1 || (l == 2 && c[1] == '.'))))
			__builtin_trap();
		c += l + 1;
	}
}

/* The cursors over ids in increasing order, then in an order made of the
 * input's bytes: only safe paths, and children that pass the checks */
static void cursors(const struct ds_index *ix, const uint8_t *data, size_t size, uint32_t n)
{
	struct ds_ix_paths *c = ds_ix_paths_new(ix);
	const char *p;
	for (uint32_t i = 0; i < n; i++) {
		int l = ds_ix_paths_get(c, i, &p);
		path_safe(p, l);
	}
	for (size_t off = 0; off + 4 <= size && off < 4096; off += 4) {
		uint32_t id;
		memcpy(&id, data + off, 4);
		int l = ds_ix_paths_get(c, id % (ix->h->nentries + 2), &p);
		path_safe(p, l);
	}
	ds_ix_paths_free(c);
	struct ds_ix_names nm;
	ds_ix_names_init(&nm);
	for (uint32_t d = 0; d < n; d++) {
		if (!ds_index_entry_ok(ix, d) || !S_ISDIR(ds_ix_mode(ix, d)))
			continue;
		for (uint32_t k = 0; k < ds_ix_nchildren(ix, d) && k < 64; k++) {
			int64_t ch = ds_ix_child_named(ix, &nm, d, k);
			if (ch >= 0 && (!ds_index_entry_ok(ix, (uint64_t)ch) ||
			                ds_ix_parent(ix, (uint32_t)ch) != d || !nm.len ||
			                nm.len != strlen(nm.name) || memchr(nm.name, '/', nm.len)))
				__builtin_trap();
		}
	}
}

static void touch_entry(const struct ds_index *ix, uint32_t id)
{
	/* what the shim reads of an entry that passed ds_index_entry_ok */
	char name[PATH_MAX];
	int nl = ds_ix_path(ix, id, name, sizeof(name));
	char nb[DS_IX_NAME_BUF];
	volatile size_t n = (size_t)nl + strlen(ds_ix_base(ix, id, nb)) + ds_ix_base_len(ix, id);
	(void)n;
	struct stat st;
	ds_index_stat(ix, id, &st);
	uint32_t mode = ds_ix_mode(ix, id);
	if (S_ISDIR(mode)) {
		for (uint32_t k = 0; k < ds_ix_nchildren(ix, id) && k < 64; k++) {
			uint32_t c = ds_ix_child(ix, id, k);
			if (ds_index_entry_ok(ix, c)) {
				volatile char x = ds_ix_base(ix, c, nb)[0];
				(void)x;
			}
		}
	} else if (S_ISLNK(mode)) {
		volatile size_t t = strlen(ds_ix_target(ix, id));
		(void)t;
	} else if (S_ISREG(mode)) {
		uint64_t base;
		struct ds_ix_file f;
		ds_ix_file(ix, id, &f);
		if (ds_index_part_on(ix, f.part, ix->h->node, &base)) {
			volatile uint64_t end = base + f.poff + f.stored;
			(void)end;
		}
	}
	uint32_t p = ds_ix_parent(ix, id);
	if (ds_index_entry_ok(ix, p)) {
		volatile size_t l = ds_ix_path_len(ix, p);
		(void)l;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < sizeof(struct ds_index_header) || size > (16u << 20))
		return 0;
	/* an aligned, writable copy, the CRC made to match */
	void *buf = malloc(size);
	memcpy(buf, data, size);
	struct ds_index_header *h = buf;
	h->crc = 0;
	h->crc = ds_crc32c(0, buf, size);

	struct ds_index ix;
	if (ds_index_from_buf(&ix, buf, size, 0) == 0) {
		/* every entry the shim could reach, through the check */
		uint32_t n = ix.h->nentries < 4096 ? ix.h->nentries : 4096;
		for (uint32_t i = 0; i < n; i++)
			if (ds_index_entry_ok(&ix, i)) {
				touch_entry(&ix, i);
				/* the entry's own name finds an entry that passes */
				char name[PATH_MAX];
				int nl = ds_ix_path(&ix, i, name, sizeof(name));
				int64_t f = nl < 0 ? -1 : ds_index_lookup(&ix, name, (size_t)nl);
				if (f >= 0 && !ds_index_entry_ok(&ix, (uint64_t)f))
					__builtin_trap();
			}
		cursors(&ix, data, size, n);
		/* names made of the input's bytes */
		for (size_t off = 0; off + 8 <= size && off < 512; off += 8)
			(void)ds_index_lookup(&ix, (const char *)data + off, 8 + data[off] % 24 > size - off
			                                                         ? size - off
			                                                         : 8 + data[off] % 24);
		if (ds_index_check_shuffle(&ix) == 0 && ix.h->nsamples < 100000 && ix.h->nnodes < 64) {
			struct ds_epoch_cfg cfg = {.seed = 7, .locality = 0.5, .drop_last = data[0] & 1};
			uint32_t *ids;
			size_t m;
			if (ds_epoch_share(&ix, &cfg, 1, ix.h->node, &ids, &m) == 0) {
				for (size_t i = 0; i < m; i++)
					if (ids[i] >= ix.h->nentries)
						__builtin_trap();
				free(ids);
			}
		}
	}
	struct ds_index full;
	if (ds_index_from_buf(&full, buf, size, 1) == 0) {
		/* the full check passed: then every entry passes the O(1) one,
		 * and the cursor gives each the path ds_ix_path gives */
		struct ds_ix_paths *c = ds_ix_paths_new(&full);
		for (uint32_t i = 0; i < full.h->nentries; i++) {
			if (!ds_index_entry_ok(&full, i))
				__builtin_trap();
			char want[PATH_MAX];
			const char *got;
			int w = ds_ix_path(&full, i, want, sizeof(want));
			if (ds_ix_paths_get(c, i, &got) != w || (w >= 0 && strcmp(got, want)))
				__builtin_trap();
		}
		ds_ix_paths_free(c);
	}
	free(buf);
	return 0;
}
