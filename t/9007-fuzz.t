#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The fuzz targets for a few seconds each (DSTAGE_FUZZ_SECS, default 4; `make
# fuzz` runs them for minutes): the node index as the shim maps it, the name
# rules, epoch.conf, index.h5 images and tar shards (hdf5/fuzz).  Each starts by
# running its whole checked-in corpus in t/fuzz/, the crashes found so far
# included (regress-*), so a fix that regresses fails here.
. "$(dirname "$0")/test-lib.sh"

test_require CLANG,LIBFUZZER

for t in index names epochconf manifest tar; do
	test_expect_success "fuzz-$t: its corpus and ${DSTAGE_FUZZ_SECS:-4} s of fuzzing, no crash" '
		sh "$SRCDIR/t/fuzz/run.sh" ${DSTAGE_FUZZ_SECS:-4} '$t'
	'
done
test_done
