/* SPDX-License-Identifier: BSD-3-Clause */
/* hard-index: damage a node-store index (common/dsindex.h) in one named way,
 * for the hostile-store tests (t/9002):
 *
 *   hard-index list                       the names of every mutation
 *   hard-index MUTATION IN OUT [--reseal] write IN damaged into OUT
 *   hard-index flip SEED N IN OUT [--reseal]
 *                                         N random bytes of IN overwritten
 *   hard-index check IN                   ds_index_open(full=1): 0 or why
 *   hard-index builder                    the index builder refuses symlinks
 *                                         that leave the tree (defence in
 *                                         depth behind the pack readers)
 *
 * --reseal recomputes the header CRC afterwards, so the damage reaches the
 * semantic checks of a full open (the shim does not check the CRC).  Exit 0
 * when OUT was written, 2 when the mutation does not apply to this index
 * (no symlink, no file...), 1 on I/O errors.  The mutations follow the
 * index's sections (version 3: rows, directory table, runs, name blocks,
 * front-coded names, wide rows, partitions, locations, samples, pool). */
#include "dscommon.h"
#include "dsindex.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *img;
static size_t len;

#define H ((struct ds_index_header *)img)
#define R(i) ((struct ds_row *)(img + H->off_rows) + (i))
#define D(x) ((struct ds_dir *)(img + H->off_dirs) + (x))
#define RUN(x) ((struct ds_run *)(img + H->off_runs) + (x))
#define BLK ((uint32_t *)(img + H->off_blocks))
#define NAMES ((unsigned char *)img + H->off_names)
#define STR (img + H->off_strings)

static unsigned kind(uint32_t i) { return (R(i)->mode >> 12) & 3u; }
static int is_file(uint32_t i) { return kind(i) == DS_RK_FILE; }
static int is_dir(uint32_t i) { return kind(i) == DS_RK_DIR; }
static int is_link(uint32_t i) { return kind(i) == DS_RK_LINK; }
static void set_kind(uint32_t i, unsigned k)
{
	R(i)->mode = (uint16_t)((R(i)->mode & ~0x3000u) | k << 12);
}
static uint64_t fsize(uint32_t i) { return R(i)->size_lo | (uint64_t)R(i)->size_hi << 32; }
static void set40(uint32_t *lo, uint8_t *hi, uint64_t v)
{
	*lo = (uint32_t)v;
	*hi = (uint8_t)(v >> 32);
}
#define SET(i, f, v) set40(&R(i)->f##_lo, &R(i)->f##_hi, (v))
static uint32_t dirrow(uint32_t i) { return R(i)->poff_lo; }

static int64_t find_file(void)
{
	/* a file with content, preferably the largest */
	int64_t best = -1;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i) > 0 && (best < 0 || fsize(i) > fsize(best)))
			best = i;
	return best;
}

static int64_t find_subdir(void)
{
	/* a directory other than the root, with children */
	for (uint32_t i = 1; i < H->nentries; i++)
		if (is_dir(i) && D(dirrow(i))->nchildren > 0)
			return i;
	return -1;
}

static void reseal(void)
{
	H->crc = 0;
	H->crc = ds_crc32c(0, img, len);
}

/* The names of entry id's block, decoded (as common/ixbuild.c encodes them),
 * into nm[DS_IX_BLOCK][NAME_MAX + 1] and nl; how many. */
static unsigned block_names(uint32_t b, char nm[][NAME_MAX + 1], unsigned *nl)
{
	uint64_t pos = BLK[b], end = BLK[b + 1];
	unsigned k = 0, l = 0;
	while (pos < end && k < DS_IX_BLOCK && (uint64_t)b * DS_IX_BLOCK + k < H->nentries) {
		unsigned lead = NAMES[pos++], pre = lead >> 4, suf = lead & 15;
		if (pre == 15) {
			pre = NAMES[pos];
			suf = NAMES[pos + 1];
			pos += 2;
		}
		if (k)
			memcpy(nm[k], nm[k - 1], l);
		memcpy(nm[k] + pre, NAMES + pos, suf);
		pos += suf;
		l = pre + suf;
		nl[k++] = l;
	}
	return k;
}

/* Rename entry id (its name bytes as given, any bytes): the names section
 * is written again at the end of the file, every name in full. */
static void rename_entry(uint32_t id, const char *name, size_t nlen)
{
	static char nm[DS_IX_BLOCK][NAME_MAX + 1];
	unsigned nl[DS_IX_BLOCK];
	uint32_t nb = (H->nentries + DS_IX_BLOCK - 1) / DS_IX_BLOCK;
	uint64_t at = (len + 7) & ~7ull;
	uint64_t total = (at + (uint64_t)H->nentries * (3 + NAME_MAX) + nlen + 7) & ~7ull;
	img = ds_xrealloc(img, total);
	memset(img + len, 0, total - len);
	unsigned char *out = (unsigned char *)img + at;
	uint64_t pos = 0;
	for (uint32_t b = 0; b < nb; b++) {
		unsigned k = block_names(b, nm, nl);
		BLK[b] = (uint32_t)pos;
		for (unsigned j = 0; j < k; j++) {
			int me = (uint64_t)b * DS_IX_BLOCK + j == id;
			size_t l = me ? nlen : nl[j];
			out[pos++] = 0xf0;
			out[pos++] = 0;
			out[pos++] = (unsigned char)l;
			memcpy(out + pos, me ? name : nm[j], l);
			pos += l;
		}
	}
	BLK[nb] = (uint32_t)pos;
	H->off_names = at;
	H->names_size = pos;
	len = (at + pos + 7) & ~7ull;
	H->total_size = len;
}

/* Each returns 0 (applied) or 2 (does not apply here). */
#define NA 2
static int m_magic(void) { memcpy(H->magic, "DSTAGEIY", 8); return 0; }
static int m_version(void) { H->version = 99; return 0; }
static int m_version2(void)
{
	H->version = 2;
	return 0;
}
static int m_header_size(void) { H->header_size = 8; return 0; }
static int m_total_size(void) { H->total_size += 4096; return 0; }
static int m_truncate(void) { len = len / 2; return 0; }
static int m_short(void) { len = 40; return 0; }
static int m_empty(void) { len = 0; return 0; }
static int m_nnodes0(void) { H->nnodes = 0; return 0; }
static int m_node_big(void) { H->node = H->nnodes + 5; return 0; }
static int m_nentries0(void) { H->nentries = 0; return 0; }
static int m_nentries_huge(void) { H->nentries = 0xfffffff0u; return 0; }
static int m_ndirs0(void)
{
	H->ndirs = 0;
	return 0;
}
static int m_ndirs_huge(void)
{
	H->ndirs = 0xfffffff0u;
	return 0;
}
static int m_nruns_huge(void)
{
	H->nruns = 0x7ffffff0u;
	return 0;
}
static int m_nwide_huge(void)
{
	H->nwide = 0x7ffffff0u;
	return 0;
}
static int m_off_rows(void)
{
	H->off_rows = H->total_size - 8;
	return 0;
}
static int m_off_rows_huge(void)
{
	H->off_rows = 0x7ffffffffffffff8ull;
	return 0;
}
static int m_off_dirs(void)
{
	H->off_dirs = H->total_size;
	return 0;
}
static int m_off_runs(void)
{
	H->off_runs = H->total_size - 8;
	return 0;
}
static int m_off_blocks(void)
{
	H->off_blocks = H->total_size;
	return 0;
}
static int m_off_names(void)
{
	H->off_names = H->total_size - 8;
	return 0;
}
static int m_off_strings(void) { H->off_strings = H->total_size; return 0; }
static int m_strings_huge(void) { H->strings_size = ~0ull; return 0; }
static int m_names_huge(void)
{
	H->names_size = ~0ull;
	return 0;
}
static int m_strings_unterminated(void)
{
	/* every NUL of the pool becomes 'x': no target ends */
	for (uint64_t i = 0; i < H->strings_size; i++)
		if (!STR[i])
			STR[i] = 'x';
	return 0;
}
static int m_names_short(void)
{
	/* the names section ends half way: blocks point past it */
	H->names_size /= 2;
	return 0;
}
static int m_blocks_off(void)
{
	uint32_t nb = (H->nentries + DS_IX_BLOCK - 1) / DS_IX_BLOCK;
	for (uint32_t b = 0; b <= nb; b++)
		BLK[b] = 0xfffffff0u - b;
	return 0;
}
static int m_blocks_order(void)
{
	/* every block ends before it starts */
	uint32_t nb = (H->nentries + DS_IX_BLOCK - 1) / DS_IX_BLOCK;
	for (uint32_t b = 0; b < nb; b++)
		BLK[b] = BLK[b + 1] + 1;
	return 0;
}
static int m_name_lead(void)
{
	/* every byte of the names an escape with the longest lengths */
	memset(NAMES, 0xff, H->names_size);
	return 0;
}
static int m_name_prefix(void)
{
	/* each name shares more bytes with the one before than it has */
	for (uint64_t i = 0; i < H->names_size; i++)
		if (NAMES[i] < 0xf0 && (NAMES[i] & 15))
			NAMES[i] = (unsigned char)(0xe0 | (NAMES[i] & 15));
	return 0;
}
static int m_name_nul(void)
{
	int64_t f = find_file();
	if (f < 0)
		return NA;
	rename_entry((uint32_t)f, "a\0b", 3);
	return 0;
}
static int m_name_slash(void)
{
	int64_t f = find_file();
	if (f < 0)
		return NA;
	rename_entry((uint32_t)f, "x/../../y", 9);
	return 0;
}
static int m_name_empty(void)
{
	int64_t f = find_file();
	if (f < 0)
		return NA;
	rename_entry((uint32_t)f, "", 0);
	return 0;
}
static int m_name_long(void)
{
	/* a name past NAME_MAX */
	static char big[NAME_MAX + 40];
	int64_t f = find_file();
	if (f < 0)
		return NA;
	memset(big, 'q', sizeof(big));
	rename_entry((uint32_t)f, big, 255);
	/* its lead: shares 200 bytes it never had, 255 of its own */
	uint64_t pos = BLK[f / DS_IX_BLOCK];
	for (uint32_t j = 0; j < f % DS_IX_BLOCK; j++)
		pos += 3 + NAMES[pos + 2];
	NAMES[pos + 1] = 200;
	return 0;
}
static int m_dir_pdir(void)
{
	for (uint32_t x = 0; x < H->ndirs; x++)
		D(x)->pdir = 0x7ffffff0u;
	return 0;
}
static int m_dir_id_file(void)
{
	/* every directory row names a regular file */
	int64_t f = find_file();
	if (f < 0)
		return NA;
	for (uint32_t x = 1; x < H->ndirs; x++)
		D(x)->id = (uint32_t)f;
	return 0;
}
static int m_dir_end(void)
{
	for (uint32_t x = 0; x < H->ndirs; x++)
		D(x)->end = x % 2 ? 0xfffffff0u : D(x)->id;
	return 0;
}
static int m_dir_plen(void)
{
	for (uint32_t x = 0; x < H->ndirs; x++)
		D(x)->plen = 0xfff0u + x;
	return 0;
}
static int m_dir_range(void)
{
	for (uint32_t x = 0; x < H->ndirs; x++) {
		D(x)->run = 0xfffffff0u;
		D(x)->nruns = 0xffffu;
		D(x)->nchildren = 0xfffffff0u;
	}
	return 0;
}
static int m_dir_nchildren(void)
{
	/* more children than the runs hold: child k past the last run */
	for (uint32_t x = 0; x < H->ndirs; x++)
		D(x)->nchildren = H->nentries - 1;
	return 0;
}
static int m_runs_first(void)
{
	for (uint32_t r = 0; r < H->nruns; r++)
		RUN(r)->first = 0xfffffff0u - r;
	return H->nruns ? 0 : NA;
}
static int m_runs_self(void)
{
	/* every directory lists itself: ls -R and find must not loop forever */
	for (uint32_t x = 0; x < H->ndirs; x++)
		if (D(x)->nruns)
			RUN(D(x)->run)->first = D(x)->id;
	return 0;
}
static int m_runs_cum(void)
{
	for (uint32_t r = 0; r < H->nruns; r++)
		RUN(r)->cum = 0xfffffff0u - r;
	return H->nruns ? 0 : NA;
}
static int m_file_part(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i)) {
			uint32_t p = H->nparts + 7;
			memcpy(R(i)->part, &p, 3);
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_poff(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			SET(i, poff, (1ull << 40) - 100);
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_stored(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			SET(i, stored, (1ull << 40) - 100);
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_size(void)
{
	/* size far beyond the stored bytes (a raw file reads size bytes) */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			SET(i, size, (1ull << 39) + fsize(i));
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_size_page(void)
{
	/* size a little beyond the stored bytes: past the end of the mapping */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			SET(i, size, fsize(i) + (64ull << 20));
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_wide(void)
{
	/* files claiming wide fields past the wide table */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			set_kind(i, DS_RK_WIDE);
			SET(i, poff, H->nwide + 3 + (uint64_t)i);
			n++;
		}
	return n ? 0 : NA;
}
static int m_zlib_lie(void)
{
	/* raw bytes claimed to be zlib: inflate must fail cleanly */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i) && !(R(i)->mode & DS_RM_ZLIB)) {
			R(i)->mode |= DS_RM_ZLIB;
			n++;
		}
	return n ? 0 : NA;
}
static int m_crc(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			R(i)->crc ^= 0x1;
			n++;
		}
	return n ? 0 : NA;
}
static int m_mode(void)
{
	/* every kind in turn, whatever the entry is */
	for (uint32_t i = 1; i < H->nentries; i++)
		set_kind(i, i % 4);
	return 0;
}
static int m_root_file(void)
{
	set_kind(0, DS_RK_FILE);
	return 0;
}
static int m_dir_is_file(void)
{
	/* a directory that claims to be a file (its offsets are whatever the
	 * directory fields held) */
	int64_t d = find_subdir();
	if (d < 0)
		return NA;
	set_kind((uint32_t)d, DS_RK_FILE);
	SET(d, size, 1 << 20);
	return 0;
}
static int m_file_is_dir(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i)) {
			set_kind(i, DS_RK_DIR);
			n++;
		}
	return n ? 0 : NA;
}
static int m_symlink_target(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_link(i)) {
			SET(i, poff, (1ull << 40) - 3);
			n++;
		}
	return n ? 0 : NA;
}
static int m_symlink_size(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_link(i)) {
			SET(i, size, (1ull << 40) - 3);
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_is_symlink(void)
{
	/* a file that claims to be a symlink: target = its payload offset */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (is_file(i) && fsize(i)) {
			set_kind(i, DS_RK_LINK);
			n++;
		}
	return n ? 0 : NA;
}
static int m_parts_loc(void)
{
	struct ds_part *p = (struct ds_part *)(img + H->off_parts);
	for (uint32_t i = 0; i < H->nparts; i++) {
		p[i].loc = 0xfffffff0u;
		p[i].nloc = 0xff;
	}
	return H->nparts ? 0 : NA;
}
static int m_parts_size(void)
{
	struct ds_part *p = (struct ds_part *)(img + H->off_parts);
	for (uint32_t i = 0; i < H->nparts; i++)
		p[i].size = ~0ull;
	return H->nparts ? 0 : NA;
}
static int m_loc_base(void)
{
	/* bases far past the store, and one that makes base + off wrap */
	struct ds_loc *l = (struct ds_loc *)(img + H->off_locs);
	for (uint32_t i = 0; i < H->nlocs; i++)
		l[i].base = i % 2 ? ~0ull - 4095 : (1ull << 50);
	return H->nlocs ? 0 : NA;
}
static int m_loc_node(void)
{
	struct ds_loc *l = (struct ds_loc *)(img + H->off_locs);
	for (uint32_t i = 0; i < H->nlocs; i++)
		l[i].node = 0xfffffff0u;
	return H->nlocs ? 0 : NA;
}
static int m_samples(void)
{
	uint32_t *s = (uint32_t *)(img + H->off_samples);
	for (uint32_t i = 0; i < H->nsamples; i++)
		s[i] = 0xfffffff0u - i;
	return H->nsamples ? 0 : NA;
}
static int m_samples_dir(void)
{
	/* samples that are directories */
	uint32_t *s = (uint32_t *)(img + H->off_samples);
	for (uint32_t i = 0; i < H->nsamples; i++)
		s[i] = 0;
	return H->nsamples ? 0 : NA;
}
static int m_nsamples_huge(void)
{
	H->nsamples = 0x7fffffffu;
	return 0;
}
static int m_store_size(void)
{
	H->store_size = ~0ull >> 1;
	return 0;
}
static int m_name_dotdot(void)
{
	/* a directory renamed "..", and a deeper directory (a/b/c) naming it
	 * as its parent: if a name ever became a real path (the shim's cwd
	 * shadow after `cd c/..`) it would climb out of the store.  The
	 * renamed directory is one off c's path (c stays reachable) and says
	 * its path is as long as c's parent's (c's own lengths add up) */
	for (uint32_t x = 1; x < H->ndirs; x++) {
		uint32_t p = D(x)->pdir;
		if (p == 0)
			continue;
		for (uint32_t e = 1; e < x; e++) {
			if (e == p || D(e)->end > D(x)->id)
				continue; /* c's parent, or one of c's ancestors */
			D(e)->plen = D(p)->plen;
			D(x)->pdir = e;
			rename_entry(D(e)->id, "..", 2);
			return 0;
		}
	}
	return NA;
}

static int m_root_parent_loop(void)
{
	/* a directory whose parent is itself and every ".." stays */
	int64_t d = find_subdir();
	if (d < 0)
		return NA;
	D(dirrow((uint32_t)d))->pdir = dirrow((uint32_t)d);
	return 0;
}

struct mut {
	const char *name;
	int (*fn)(void);
};
static const struct mut muts[] = {
#define M(x) {#x, m_##x}
	M(magic),
	M(version),
	M(version2),
	M(header_size),
	M(total_size),
	M(truncate),
	M(short),
	M(empty),
	M(nnodes0),
	M(node_big),
	M(nentries0),
	M(nentries_huge),
	M(ndirs0),
	M(ndirs_huge),
	M(nruns_huge),
	M(nwide_huge),
	M(off_rows),
	M(off_rows_huge),
	M(off_dirs),
	M(off_runs),
	M(off_blocks),
	M(off_names),
	M(off_strings),
	M(strings_huge),
	M(names_huge),
	M(strings_unterminated),
	M(names_short),
	M(blocks_off),
	M(blocks_order),
	M(name_lead),
	M(name_prefix),
	M(name_nul),
	M(name_slash),
	M(name_empty),
	M(name_long),
	M(dir_pdir),
	M(dir_id_file),
	M(dir_end),
	M(dir_plen),
	M(dir_range),
	M(dir_nchildren),
	M(runs_first),
	M(runs_self),
	M(runs_cum),
	M(file_part),
	M(file_poff),
	M(file_stored),
	M(file_size),
	M(file_size_page),
	M(file_wide),
	M(zlib_lie),
	M(crc),
	M(mode),
	M(root_file),
	M(dir_is_file),
	M(file_is_dir),
	M(symlink_target),
	M(symlink_size),
	M(file_is_symlink),
	M(parts_loc),
	M(parts_size),
	M(loc_base),
	M(loc_node),
	M(samples),
	M(samples_dir),
	M(nsamples_huge),
	M(store_size),
	M(name_dotdot),
	M(root_parent_loop),
#undef M
};

static int load(const char *path)
{
	int fd = open(path, O_RDONLY);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		perror(path);
		return -1;
	}
	len = st.st_size;
	img = ds_xcalloc(1, len + 1);
	if (ds_pread_full(fd, img, len, 0)) {
		perror(path);
		return -1;
	}
	close(fd);
	if (len < sizeof(struct ds_index_header) || memcmp(img, DS_INDEX_MAGIC, 8)) {
		fprintf(stderr, "%s: not an index\n", path);
		return -1;
	}
	return 0;
}

static int save(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || ds_write_full(fd, img, len) || close(fd)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && !strcmp(argv[1], "list")) {
		for (size_t i = 0; i < sizeof(muts) / sizeof(muts[0]); i++)
			printf("%s\n", muts[i].name);
		return 0;
	}
	if (argc == 2 && !strcmp(argv[1], "builder")) {
		static const struct {
			const char *link, *target;
			int ok;
		} cases[] = {
			{"a/l", "x", 1},           {"a/l", "../x", 1},        {"a/b/l", "../../x", 1},
			{"a/l", "./x/../y", 1},    {"l", "..", 0},            {"a/l", "../..", 0},
			{"a/l", "../../x", 0},     {"a/l", "/etc/passwd", 0}, {"a/b/l", "../x/../../../y", 0},
			{"a/l", "", 0},            {"l", "x/../../y", 0},
		};
		int bad = 0;
		for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
			struct ds_index_builder *b = ds_index_builder_new();
			int rc = ds_index_add_symlink(b, cases[i].link, 0, cases[i].target);
			if ((rc == 0) != cases[i].ok) {
				printf("'%s' -> '%s': %s\n", cases[i].link, cases[i].target,
				       rc ? ds_strerror(rc) : "accepted");
				bad = 1;
			}
			ds_index_builder_free(b);
		}
		return bad;
	}
	if (argc == 3 && !strcmp(argv[1], "check")) {
		struct ds_index ix;
		int rc = ds_index_open(&ix, argv[2], 1);
		printf("%s\n", rc ? ds_strerror(rc) : "ok");
		if (!rc)
			ds_index_close(&ix);
		return rc ? 1 : 0;
	}
	if (argc >= 6 && !strcmp(argv[1], "flip")) {
		unsigned long seed = strtoul(argv[2], NULL, 0), n = strtoul(argv[3], NULL, 0);
		if (load(argv[4]))
			return 1;
		/* xorshift: the same damage for the same seed on every machine */
		uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
		for (unsigned long k = 0; k < n; k++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			size_t at = (size_t)(x % len);
			uint8_t v = (uint8_t)(x >> 32);
			img[at] = (k & 1) ? (char)v : (char)(img[at] ^ (1u << (v & 7)));
		}
		if (argc > 6 && !strcmp(argv[6], "--reseal") && len >= sizeof(struct ds_index_header))
			reseal();
		return save(argv[5]);
	}
	if (argc < 4) {
		fprintf(stderr, "usage: hard-index list | MUTATION IN OUT [--reseal] | "
		                "flip SEED N IN OUT [--reseal] | check IN\n");
		return 1;
	}
	for (size_t i = 0; i < sizeof(muts) / sizeof(muts[0]); i++) {
		if (strcmp(muts[i].name, argv[1]))
			continue;
		if (load(argv[2]))
			return 1;
		int rc = muts[i].fn();
		if (rc)
			return rc;
		if (argc > 4 && !strcmp(argv[4], "--reseal") && len >= sizeof(struct ds_index_header))
			reseal();
		return save(argv[3]);
	}
	fprintf(stderr, "hard-index: no mutation '%s'\n", argv[1]);
	return 1;
}
