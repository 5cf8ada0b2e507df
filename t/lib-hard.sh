# SPDX-License-Identifier: BSD-3-Clause
# t/lib-hard.sh: what the hardening tests (t/9NNN-*.t) share.  Source it after
# test-lib.sh.
#
#   test_expect_todo 'title' 'reason' 'cmd'
#                        a known bug, reported to the owner of the code: TAP
#                        "not ok N - title # TODO reason" while cmd fails,
#                        "ok N - title # TODO reason" once it passes (prove
#                        then says the TODO "unexpectedly succeeded": drop the
#                        TODO)
#   exit_is RC WANT...   RC is one of WANT ("0 1"); says what it was if not
#   no_crash RC          RC is not a signal death (>= 128) nor a timeout (124)
#   make_hard_src DIR    a small source tree: training classes, a replicated
#                        val/, compressible text in docs/, a symlink inside
#   ASAN_DSTAGE          build-asan/bin/dstage when `make SANITIZE=address,
#                        undefined O=build-asan` built it, else empty

test_expect_todo() {
	test_count=$((test_count + 1))
	if _run "$3"; then
		echo "ok $test_count - $1 # TODO $2"
	else
		echo "not ok $test_count - $1 # TODO $2"
		sed -e 's/^/#   /' "$TRASH/.out" | tail -n 10
	fi
}

exit_is() {
	rc=$1
	shift
	for w in "$@"; do
		[ "$rc" = "$w" ] && return 0
	done
	echo "exit status $rc, want one of: $*"
	return 1
}

no_crash() {
	[ "$1" -lt 124 ] || { echo "exit status $1: killed by a signal or timed out"; return 1; }
}

make_hard_src() {
	"$T/mksample" -c 2 -n 4 -v 2 "$1" &&
	mkdir -p "$1/docs/sub" &&
	seq 1 20000 >"$1/docs/seq.txt" &&
	seq 5 9000 >"$1/docs/sub/more.txt" &&
	ln -s ../seq.txt "$1/docs/sub/link"
}

# (the ASAN prerequisite of t/test-lib.sh)
ASAN_DSTAGE=
if test_have_prereq ASAN; then
	ASAN_DSTAGE="$SRCDIR/build-asan/bin/dstage"
fi
