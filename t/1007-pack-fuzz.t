#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A short libFuzzer run of the manifest reader (ds_manifest_read_image, what
# every rank of stage runs on the broadcast index.h5), from the seed corpus
# in t/fuzz/corpus-manifest.  Longer runs: see hdf5/fuzz/build.sh.
. "$(dirname "$0")/test-lib.sh"

test_require CLANG,LIBFUZZER

FUZZ="$TRASH/fuzz/fuzz-manifest"
CORPUS="$SRCDIR/t/fuzz/corpus-manifest"

test_expect_success 'build the fuzz target' '
	"$SRCDIR/hdf5/fuzz/build.sh" "$TRASH/fuzz" >/dev/null 2>build.log || { cat build.log; exit 1; }
'

test_expect_success 'the seed corpus passes (each input once)' '
	"$FUZZ" "$CORPUS"/* >run.log 2>&1 || { tail -40 run.log; exit 1; }
'

test_expect_success 'ten seconds of fuzzing find nothing' '
	mkdir work && cp "$CORPUS"/* work/ &&
	ASAN_OPTIONS=allocator_may_return_null=1 "$FUZZ" -max_total_time=10 -rss_limit_mb=2048 \
		-artifact_prefix="$TRASH/" work >fuzz.log 2>&1 ||
		{ grep -A30 -e "ERROR" -e "==ABORTING" fuzz.log | head -60; exit 1; }
'

test_done
