#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# t/fuzz/run.sh SECS [TARGET...]: build the libFuzzer targets with clang
# (ASan + UBSan) into build-fuzz/ when a source is newer, and run each for
# SECS seconds from its checked-in corpus t/fuzz/corpus-NAME.  New inputs go
# to build-fuzz/NAME.corpus (never into the checked-in corpus: add a find by
# hand, named regress-WHAT, when it is worth keeping); a crash leaves its
# input as build-fuzz/NAME.crash-* and makes the script exit 1.
#
#   targets   index      the node index as the shim maps it (t/fuzz/fuzz-index.c)
#             names      name, target and path rules (t/fuzz/fuzz-names.c)
#             epochconf  JOBDIR/epoch.conf (t/fuzz/fuzz-epochconf.c)
#             manifest   index.h5 images, resealed (hdf5/fuzz/fuzz-manifest.c)
#             tar        tar shards for --expand-tar (hdf5/fuzz/fuzz-tar.c)
#
# `make fuzz` runs this with FUZZ_SECS (default 300) and also builds the
# sanitizer variant of dstage (build-asan/) that t/9000 and t/9001 use; the
# test suite runs it for a few seconds per target (t/9007-fuzz.t).
set -u
cd "$(dirname "$0")/../.."
secs=${1:?usage: t/fuzz/run.sh SECS [TARGET...]}
shift
targets=${*:-index names epochconf manifest tar}
out=build-fuzz
CC=${FUZZ_CC:-clang}
mkdir -p "$out"
command -v "$CC" >/dev/null || { echo "run.sh: no $CC (clang with libFuzzer is needed)"; exit 2; }

fresh() { # fresh BIN SRC...: BIN exists and no SRC is newer
	b=$1
	shift
	[ -x "$b" ] && ! find "$@" -name '*.[ch]' -newer "$b" 2>/dev/null | grep -q .
}

build() {
	bin="$out/fuzz-$1"
	case $1 in
	manifest | tar)
		fresh "$bin" hdf5 common && return 0
		sh hdf5/fuzz/build.sh "$out" >"$out/build-$1.log" 2>&1 ;;
	*)
		fresh "$bin" "t/fuzz/fuzz-$1.c" common && return 0
		$CC -g -O1 -std=gnu11 -fsanitize=fuzzer,address,undefined -fno-omit-frame-pointer \
			-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -Icommon "t/fuzz/fuzz-$1.c" common/*.c \
			-o "$bin" -lz -lpthread -lm >"$out/build-$1.log" 2>&1 ;;
	esac || { echo "run.sh: building fuzz-$1 failed:"; cat "$out/build-$1.log"; return 1; }
}

rc=0
for t in $targets; do
	build "$t" || { rc=1; continue; }
	corpus="t/fuzz/corpus-$t"
	new="$out/$t.corpus"
	mkdir -p "$new"
	log="$out/$t.log"
	# -rss_limit_mb: HDF5 may allocate a lot for a crafted file before it
	# fails; what we look for are memory errors, crashes and hangs
	"$out/fuzz-$t" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
		-artifact_prefix="$out/$t." -print_final_stats=1 "$new" "$corpus" >"$log" 2>&1
	r=$?
	# (-a: HDF5's messages can make the log look binary)
	runs=$(grep -a '^stat::number_of_executed_units:' "$log" | tail -n 1 | sed 's/.*: *//')
	cov=$(grep -ao 'cov: [0-9]*' "$log" | tail -n 1)
	if [ $r = 0 ]; then
		echo "fuzz-$t: ${secs}s, ${runs:-?} runs, ${cov:-cov: ?}, no crash"
	else
		rc=1
		echo "fuzz-$t: FAILED (exit $r) after ${runs:-?} runs; input in $out/$t.*:"
		grep -a -m 1 -A 12 "ERROR\|runtime error\|deadly signal\|fuzz-names:\|timeout" "$log"
	fi
done
exit $rc
