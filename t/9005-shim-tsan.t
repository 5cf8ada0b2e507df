#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The shim under ThreadSanitizer.  A preloaded library cannot bring TSan's
# runtime into a program, so the shim's sources are linked into the test
# programs instead (-DDS_LINK_WRAP and -Wl,--wrap=NAME for every function it
# wraps, io/wrap.h) and everything is built with clang -fsanitize=thread
# into build-tsan/ (rebuilt when a source is newer).  Then:
#  - t/helpers/hard-mt: 16 threads open, fstat, stat, read in odd chunks,
#    pread, dup, lseek, close, readdir, realpath, access the same and
#    different files, read virtual epoch lists and share one descriptor; on
#    a zlib store (inflate under the per-file lock) and on node 0 of two
#    nodes with a stand-in service (remote reads, one connection per thread)
#  - t/helpers/shim-mt (t/2050's): threads, a shared descriptor, fork and a
#    signal handler reading
# Each must report no data race and read every byte right.  The plain
# (preloaded, uninstrumented) build runs the same at full speed.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-shim.sh"

TB="$SRCDIR/build-tsan"
CLANG=${CLANG:-clang}
# TSAN: does TSan run here at all (it needs a compatible address-space
# layout)?  A planted race must be reported.
test_require CLANG,TSAN

# build PROG from t/helpers/PROG.c with the shim linked in, when missing or
# older than a source
tsan_build() {
	out="$TB/$1-tsan"
	if [ -x "$out" ] && ! find "$SRCDIR/io" "$SRCDIR/common" "$SRCDIR/t/helpers/$1.c" \
		-name '*.[ch]' -newer "$out" | grep -q .; then
		return 0
	fi
	mkdir -p "$TB" &&
	wraps=$(sed -n '/#define DS__REAL_FUNCS/,/^$/p' "$SRCDIR/io/wrap.h" |
		grep -o 'X([^,]*, *[a-z_0-9]*' | sed 's/.*, *//' | sort -u |
		sed 's/^/-Wl,--wrap=/' | tr '\n' ' ') &&
	(cd "$SRCDIR" && "$CLANG" -fsanitize=thread -g -O1 -std=gnu11 -D_GNU_SOURCE -DDS_LINK_WRAP \
		-Icommon -Iio -It io/*.c common/*.c "t/helpers/$1.c" -o "$out.tmp" $wraps \
		-lz -lpthread -ldl -lm) && mv "$out.tmp" "$out"
}
no_races() {
	if grep -q "ThreadSanitizer" "$1"; then
		grep -A 30 "WARNING: ThreadSanitizer" "$1" | head -n 60
		return 1
	fi
}
tsan() {
	env DSTAGE_STORE="$JOBDIR" DSTAGE_MOUNT="$MOUNT" DSTAGE_NODE=${NODE:-0} \
		TSAN_OPTIONS="halt_on_error=0 history_size=4" "$@"
}

test_expect_success 'build: hard-mt and shim-mt with the shim, -fsanitize=thread (build-tsan/)' '
	tsan_build hard-mt && tsan_build shim-mt
'

test_expect_success 'setup: a tree in a zlib store on one node' '
	make_tree "$TRASH/src" &&
	stage_tree "$TRASH/src" -N 1 -p 3 -z &&
	(cd src && find . -type f ! -path "./modes/m000" | sed "s,^\./,," | sort) >paths
'

test_expect_success '16 threads, same and different files, zlib store: no race, every byte right' '
	rc=0 && { tsan "$TB/hard-mt-tsan" -t 16 -n 40 "$MOUNT" src <paths >out 2>err || rc=$?; } &&
	cat out && no_races err && test $rc = 0 && test_grep "errors=0" out
'

test_expect_success 't/2050 shim-mt (threads, a shared descriptor, fork, a signal handler): no race' '
	rc=0 && { tsan "$TB/shim-mt-tsan" "$MOUNT" "$TRASH/src" $(grep -v " " paths) >tap 2>err || rc=$?; } &&
	cat tap && no_races err && test $rc = 0 && ! grep "^not ok" tap
'

test_expect_success 'setup: two nodes, raw, a stand-in service for node 0' '
	stage_tree "$TRASH/src" -N 2 -R 1 -p 4 &&
	fake_service_start --log svc.log
'
test_bg "$(cat "$TRASH/svc.pid" 2>/dev/null)"

test_expect_success '16 threads with remote reads through the service: no race, every byte right' '
	rc=0 && { tsan "$TB/hard-mt-tsan" -t 16 -n 40 "$MOUNT" src <paths >out 2>err || rc=$?; } &&
	cat out && no_races err && test $rc = 0 && test_grep "errors=0" out &&
	test $(grep -c "^read" svc.log) -gt 50
'

test_expect_success 'the plain build, preloaded: 16 threads x 300 rounds' '
	shim "$T/hard-mt" -t 16 -n 300 "$MOUNT" src <paths >out && cat out &&
	test_grep "errors=0" out
'
kill "$(cat "$TRASH/svc.pid")" 2>/dev/null
test_done
