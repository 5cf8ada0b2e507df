/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz-manifest.c: libFuzzer target for ds_manifest_read_image, the reader
 * every rank of `dstage stage` runs on the index.h5 bytes rank 0 broadcast.
 *
 * A random change to an image is caught by the seal's CRC before HDF5 sees
 * it, so fuzzing through the seal would only ever test the CRC.  The
 * harness therefore reseals every input first (ds__seal_fixup_buf): what is
 * fuzzed is HDF5's parser and our validation behind it, i.e. what a
 * deliberately crafted pack could reach.  The seal itself is tested in
 * t/1004-pack-corrupt.t.
 *
 * Build and run: hdf5/fuzz/build.sh, then
 *   build/fuzz/fuzz-manifest -max_total_time=60 t/fuzz/corpus-manifest */
#include "pack_int.h"

#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* HDF5 identifiers alive between inputs: any growth is a leak of ours. */
static hsize_t ids_at_start;

static hsize_t open_ids(void)
{
	hsize_t n = 0, total = 0;
	const H5I_type_t types[] = {H5I_FILE, H5I_GROUP, H5I_DATATYPE, H5I_DATASPACE,
	                            H5I_DATASET, H5I_ATTR, H5I_GENPROP_LST};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (H5Inmembers(types[i], &n) >= 0)
			total += n;
	return total;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	ds_log_set_cmd("fuzz");
	/* our messages are expected on every rejected input: keep stderr quiet
	 * (-close_fd_mask=2 would also hide crash reports) */
	setenv("DSTAGE_LOG", "error", 1);
	ds_log_init(-1);
	ds__h5_quiet();
	ids_at_start = open_ids();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the image must be writable to reseal it: work on a copy */
	char *img = malloc(size ? size : 1);
	memcpy(img, data, size);
	ds__seal_fixup_buf(img, size, DS__SEAL_PACK_MAGIC);
	struct ds_manifest m;
	if (ds_manifest_read_image(img, size, "fuzz", &m) == 0) {
		/* what stage does next: look every entry up, walk partitions */
		for (size_t i = 0; i < m.n; i++)
			if (ds__manifest_find(&m, m.e[i].path) != (int64_t)i)
				__builtin_trap();
		uint64_t sum = 0;
		for (uint32_t p = 0; p < m.nparts; p++)
			sum += m.parts[p].size;
		(void)sum;
		ds_manifest_release(&m);
	}
	free(img);
	if (open_ids() != ids_at_start)
		__builtin_trap(); /* an HDF5 object left open on some path */
	return 0;
}
