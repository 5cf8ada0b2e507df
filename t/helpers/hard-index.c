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
 * (no symlink, no file...), 1 on I/O errors. */
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
#define E(i) ((struct ds_entry *)(img + H->off_entries) + (i))
#define STR (img + H->off_strings)

static int64_t find_file(void)
{
	/* a file with content, preferably the largest */
	int64_t best = -1;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size > 0 && (best < 0 || E(i)->size > E(best)->size))
			best = i;
	return best;
}

static int64_t find_subdir(void)
{
	/* a directory other than the root, with children */
	for (uint32_t i = 1; i < H->nentries; i++)
		if (S_ISDIR(E(i)->mode) && E(i)->stored > 0)
			return i;
	return -1;
}

static void reseal(void)
{
	H->crc = 0;
	H->crc = ds_crc32c(0, img, len);
}

/* Each returns 0 (applied) or 2 (does not apply here). */
#define NA 2
static int m_magic(void) { memcpy(H->magic, "DSTAGEIY", 8); return 0; }
static int m_version(void) { H->version = 99; return 0; }
static int m_header_size(void) { H->header_size = 8; return 0; }
static int m_total_size(void) { H->total_size += 4096; return 0; }
static int m_truncate(void) { len = len / 2; return 0; }
static int m_short(void) { len = 40; return 0; }
static int m_empty(void) { len = 0; return 0; }
static int m_nnodes0(void) { H->nnodes = 0; return 0; }
static int m_node_big(void) { H->node = H->nnodes + 5; return 0; }
static int m_nentries0(void) { H->nentries = 0; return 0; }
static int m_nentries_huge(void) { H->nentries = 0xfffffff0u; return 0; }
static int m_hash_cap_huge(void) { H->hash_cap = 1u << 31; return 0; }
static int m_hash_cap_odd(void) { H->hash_cap = 3; return 0; }
static int m_hash_cap_small(void) { H->hash_cap = 1; return 0; }
static int m_off_entries(void) { H->off_entries = H->total_size - 8; return 0; }
static int m_off_entries_huge(void) { H->off_entries = 0x7ffffffffffffff8ull; return 0; }
static int m_off_hash(void) { H->off_hash = H->total_size; return 0; }
static int m_off_strings(void) { H->off_strings = H->total_size; return 0; }
static int m_strings_huge(void) { H->strings_size = ~0ull; return 0; }
static int m_strings_unterminated(void)
{
	/* every NUL of the pool becomes 'x': no name ends */
	for (uint64_t i = 0; i < H->strings_size; i++)
		if (!STR[i])
			STR[i] = 'x';
	return 0;
}
static int m_name_nonul(void)
{
	int64_t f = find_file();
	if (f < 0)
		return NA;
	STR[E(f)->name + E(f)->name_len] = 'x';
	return 0;
}
static int m_name_off(void)
{
	for (uint32_t i = 0; i < H->nentries; i++)
		E(i)->name = 0xfffffff0u;
	return 0;
}
static int m_name_len(void)
{
	for (uint32_t i = 1; i < H->nentries; i++)
		E(i)->name_len = 0xffff;
	return 0;
}
static int m_base_off(void)
{
	for (uint32_t i = 1; i < H->nentries; i++)
		E(i)->base_off = 0xfff0;
	return 0;
}
static int m_parent(void)
{
	for (uint32_t i = 0; i < H->nentries; i++)
		E(i)->parent = 0x7ffffff0u;
	return 0;
}
static int m_parent_file(void)
{
	/* every parent is a regular file */
	int64_t f = find_file();
	if (f < 0)
		return NA;
	for (uint32_t i = 0; i < H->nentries; i++)
		E(i)->parent = (uint32_t)f;
	return 0;
}
static int m_hash_values(void)
{
	uint32_t *h = (uint32_t *)(img + H->off_hash);
	for (uint32_t i = 0; i < H->hash_cap; i++)
		if (h[i])
			h[i] = 0x7fffff00u + (i & 0xff);
	return 0;
}
static int m_hash_full(void)
{
	/* every slot points at entry 0: lookups must still end */
	uint32_t *h = (uint32_t *)(img + H->off_hash);
	for (uint32_t i = 0; i < H->hash_cap; i++)
		h[i] = 1;
	return 0;
}
static int m_dirents(void)
{
	uint32_t *d = (uint32_t *)(img + H->off_dirents);
	for (uint32_t i = 0; i < H->ndirents; i++)
		d[i] = 0xfffffff0u - i;
	return 0;
}
static int m_dirents_self(void)
{
	/* every directory lists itself: ls -R and find must not loop forever */
	uint32_t *d = (uint32_t *)(img + H->off_dirents);
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISDIR(E(i)->mode) && E(i)->stored)
			d[E(i)->poff] = i;
	return 0;
}
static int m_dir_range(void)
{
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISDIR(E(i)->mode)) {
			E(i)->poff = 0xfffffff0ull;
			E(i)->stored = 0xffffffffffull;
		}
	return 0;
}
static int m_file_part(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode)) {
			E(i)->part = H->nparts + 7;
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_poff(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->poff = ~0ull - 100;
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_stored(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->stored = ~0ull - 100;
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_size(void)
{
	/* size far beyond the stored bytes (a raw file reads size bytes) */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->size = (1ull << 40) + E(i)->size;
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_size_page(void)
{
	/* size a little beyond the stored bytes: past the end of the mapping */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->size = E(i)->size + (64ull << 20);
			n++;
		}
	return n ? 0 : NA;
}
static int m_codec(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->codec = 77;
			n++;
		}
	return n ? 0 : NA;
}
static int m_zlib_lie(void)
{
	/* raw bytes claimed to be zlib: inflate must fail cleanly */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size && E(i)->codec == DS_CODEC_NONE) {
			E(i)->codec = DS_CODEC_ZLIB;
			n++;
		}
	return n ? 0 : NA;
}
static int m_crc(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->crc ^= 0x1;
			n++;
		}
	return n ? 0 : NA;
}
static int m_mode(void)
{
	/* type bits of a FIFO, a socket, a device */
	static const mode_t kinds[] = {S_IFIFO, S_IFSOCK, S_IFCHR, S_IFBLK, 0};
	for (uint32_t i = 1; i < H->nentries; i++)
		E(i)->mode = kinds[i % 5] | 0644;
	return 0;
}
static int m_root_file(void)
{
	E(0)->mode = S_IFREG | 0644;
	return 0;
}
static int m_dir_is_file(void)
{
	/* a directory that claims to be a file (its "part"/offsets are
	 * whatever the directory fields held) */
	int64_t d = find_subdir();
	if (d < 0)
		return NA;
	E(d)->mode = S_IFREG | 0644;
	E(d)->part = 0;
	E(d)->size = 1 << 20;
	return 0;
}
static int m_file_is_dir(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode)) {
			E(i)->mode = S_IFDIR | 0755;
			n++;
		}
	return n ? 0 : NA;
}
static int m_symlink_target(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISLNK(E(i)->mode)) {
			E(i)->poff = ~0ull - 3;
			n++;
		}
	return n ? 0 : NA;
}
static int m_symlink_size(void)
{
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISLNK(E(i)->mode)) {
			E(i)->size = ~0ull - 3;
			n++;
		}
	return n ? 0 : NA;
}
static int m_file_is_symlink(void)
{
	/* a file that claims to be a symlink: target = its payload offset */
	int n = 0;
	for (uint32_t i = 0; i < H->nentries; i++)
		if (S_ISREG(E(i)->mode) && E(i)->size) {
			E(i)->mode = S_IFLNK | 0777;
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
	/* a directory (one with a subdirectory) renamed to a path that climbs
	 * out: "../../(...)/tmp/dstage-escape", appended to the pool.  If a name
	 * ever became a real path (the shim's cwd shadow after `cd sub/..`) it
	 * would escape the store */
	static const char evil[] = "../../../../../../../../../../../../../../tmp/dstage-escape";
	int64_t d = -1;
	for (uint32_t i = 1; i < H->nentries && d < 0; i++)
		if (S_ISDIR(E(i)->mode) && E(i)->parent != 0 && S_ISDIR(E(E(i)->parent)->mode))
			d = E(i)->parent;
	if (d < 0)
		return NA;
	uint64_t at = H->strings_size, end = H->off_strings + at + sizeof(evil);
	uint64_t total = (end + 7) & ~7ull;
	img = ds_xrealloc(img, total);
	memset(img + len, 0, total - len);
	memcpy(img + H->off_strings + at, evil, sizeof(evil));
	H->strings_size += sizeof(evil);
	H->total_size = total;
	len = total;
	E(d)->name = (uint32_t)at;
	E(d)->name_len = sizeof(evil) - 1;
	E(d)->base_off = (uint16_t)(strrchr(evil, '/') - evil + 1);
	return 0;
}

static int m_root_parent_loop(void)
{
	/* a directory whose parent is itself and every ".." stays */
	int64_t d = find_subdir();
	if (d < 0)
		return NA;
	E(d)->parent = (uint32_t)d;
	return 0;
}

struct mut {
	const char *name;
	int (*fn)(void);
};
static const struct mut muts[] = {
#define M(x) {#x, m_##x}
	M(magic), M(version), M(header_size), M(total_size), M(truncate), M(short), M(empty),
	M(nnodes0), M(node_big), M(nentries0), M(nentries_huge), M(hash_cap_huge), M(hash_cap_odd),
	M(hash_cap_small), M(off_entries), M(off_entries_huge), M(off_hash), M(off_strings),
	M(strings_huge), M(strings_unterminated), M(name_nonul), M(name_off), M(name_len),
	M(base_off), M(parent), M(parent_file), M(hash_values), M(hash_full), M(dirents),
	M(dirents_self), M(dir_range), M(file_part), M(file_poff), M(file_stored), M(file_size),
	M(file_size_page), M(codec), M(zlib_lie), M(crc), M(mode), M(root_file), M(dir_is_file),
	M(file_is_dir), M(symlink_target), M(symlink_size), M(file_is_symlink), M(parts_loc),
	M(parts_size), M(loc_base), M(loc_node), M(samples), M(samples_dir), M(nsamples_huge),
	M(store_size), M(name_dotdot), M(root_parent_loop),
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
