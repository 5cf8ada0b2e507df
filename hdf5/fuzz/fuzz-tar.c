/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-tar.c: libFuzzer target for ds__tar_scan (hdf5/tar.c), the scanner
 * that lists the members of a tar shard staged in place (--expand-tar): a
 * tar under SRC is input anyone with write access to the dataset controls.
 *
 * Each input is a tar image in a memfd.  Beyond memory errors (ASan/UBSan),
 * the harness checks what stage relies on for every member the scanner
 * accepts: a safe name (ds_name_check), sorted and unique paths, a file's
 * range inside the tar, a symlink's target inside the tar, its size its
 * target's length.
 *
 * Build and run: hdf5/fuzz/build.sh, then
 *   build/fuzz/fuzz-tar -max_total_time=60 t/fuzz/corpus-tar */
#include "tar.h"

#include "pack_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ds_log_set_cmd("fuzz");
	setenv("DSTAGE_LOG", "error", 1); /* refusals are expected: keep stderr quiet */
	ds_log_init(-1);
	return 0;
}

/* Give every block that carries the ustar magic a right checksum, so that
 * mutations reach the parsing behind the check (as fuzz-manifest reseals). */
static void fix_checksums(uint8_t *b, size_t size)
{
	for (size_t off = 0; off + 512 <= size; off += 512) {
		uint8_t *h = b + off;
		if (memcmp(h + 257, "ustar", 5))
			continue;
		unsigned sum = 0;
		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += h[i];
		char f[9];
		snprintf(f, sizeof(f), "%06o", sum & 0777777);
		memcpy(h + 148, f, 7); /* six digits and a NUL, then the space */
	}
}

static void scan(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz.tar", MFD_CLOEXEC);
	if (fd < 0 || (size && ds_write_full(fd, data, size)))
		abort();
	struct ds__tar_member *v;
	size_t n;
	if (!ds__tar_scan(fd, "fuzz.tar", &v, &n)) {
		const char *why;
		for (size_t i = 0; i < n; i++) {
			const struct ds__tar_member *m = &v[i];
			size_t len = strlen(m->name);
			if (ds_name_check(m->name, len, &why))
				abort(); /* an unsafe name accepted */
			if (i && ds_path_cmp(v[i - 1].name, m->name) >= 0)
				abort(); /* not sorted, or a name twice */
			if (S_ISREG(m->mode)) {
				if (m->data_off > size || m->size > size - m->data_off || m->target)
					abort(); /* a range outside the tar */
			} else if (S_ISLNK(m->mode)) {
				if (!m->target || m->size != strlen(m->target) ||
				    ds__target_check(m->name, len, m->target, strlen(m->target),
				                     &why))
					abort(); /* a link out of the tar */
			} else if (!S_ISDIR(m->mode) || m->target || m->size) {
				abort();
			}
		}
		ds__tar_free(v, n);
	}
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	scan(data, size); /* as it is: the checksums stop most changes */
	uint8_t *copy = malloc(size ? size : 1);
	memcpy(copy, data, size);
	fix_checksums(copy, size);
	scan(copy, size);
	free(copy);
	return 0;
}
