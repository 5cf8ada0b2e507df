# t/test-lib.sh: a small shell test library in the git style, printing TAP.
#
#   . ./test-lib.sh            (from a t/NNNN-name.t script)
#   test_expect_success 'title' 'cmd && cmd'
#   test_expect_failure_status 1 'title' 'cmd'   (cmd must exit with status 1)
#   test_done
#
# Each test script runs in its own scratch directory, $TRASH, removed at the
# end unless the script failed or DSTAGE_TEST_KEEP is set.  Helpers:
#   $DSTAGE       the dstage binary          $PRELOAD  the preload library
#   $T            build/t (test helpers)     $SRCDIR   the project root
#   mpirun_n N .. mpiexec.mpich -n N with settings for a shared 2-core box
#   skip_all why  print "1..0 # SKIP why" and exit 0
#   test_cmp A B  diff -u, failing when they differ

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
export SRCDIR
DSTAGE="$SRCDIR/build/bin/dstage"
PRELOAD="$SRCDIR/build/lib/libdstage-preload.so"
T="$SRCDIR/build/t"
PY=/usr/bin/python3
export DSTAGE PRELOAD T PY
unset DSTAGE_MOUNT DSTAGE_NODE LD_PRELOAD SLURM_JOB_ID SLURM_NODEID SLURM_PROCID
export DSTAGE_LOG=${DSTAGE_LOG:-warn}
export LC_ALL=C.UTF-8 TZ=UTC

test_name=$(basename "$0" .t)
TRASH="${DSTAGE_TEST_TMP:-/tmp}/dstage-test.$test_name.$$"
rm -rf "$TRASH" && mkdir -p "$TRASH" || { echo "Bail out! cannot make $TRASH"; exit 1; }
# A per-test node-store root in RAM, so tests never share a store.
SHM="/dev/shm/dstage-test.$test_name.$$"
mkdir -p "$SHM"
cd "$TRASH" || exit 1

test_count=0
test_failed=0
test_skipped_all=

[ -x "$DSTAGE" ] || { echo "Bail out! $DSTAGE not built (run make)"; exit 1; }

say() { printf '%s\n' "$*"; }

skip_all() {
	echo "1..0 # SKIP $*"
	test_skipped_all=1
	cleanup_trash
	exit 0
}

cleanup_trash() {
	cd /
	if [ -z "$DSTAGE_TEST_KEEP" ] && [ "$test_failed" = 0 ]; then
		rm -rf "$TRASH" "$SHM"
	fi
	# kill leftover processes started by this test (services, readers)
	if [ -n "$test_bg_pids" ]; then
		kill $test_bg_pids 2>/dev/null
	fi
}

test_bg_pids=
# Remember a background pid so it is killed at the end.
test_bg() { test_bg_pids="$test_bg_pids $1"; }

_run() {
	# run in a subshell so `exit` or `cd` in a test does not leak
	( eval "$1" ) >"$TRASH/.out" 2>&1
}

test_expect_success() {
	test_count=$((test_count + 1))
	if _run "$2"; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		sed -e 's/^/#   /' "$TRASH/.out" | tail -n 40
	fi
}

# test_expect_code STATUS 'title' 'cmd': cmd must exit exactly with STATUS.
test_expect_code() {
	test_count=$((test_count + 1))
	_run "$3"
	rc=$?
	if [ "$rc" = "$1" ]; then
		echo "ok $test_count - $2"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $2 (exit $rc, want $1)"
		sed -e 's/^/#   /' "$TRASH/.out" | tail -n 40
	fi
}

test_skip() {
	test_count=$((test_count + 1))
	echo "ok $test_count # skip $1: $2"
}

test_cmp() {
	diff -u "$1" "$2"
}

# grep that shows the file when it does not match
test_grep() {
	if ! grep "$@"; then
		eval "last=\${$#}"
		echo "--- no match for '$*' in:"
		cat "$last"
		return 1
	fi
}

# mpiexec with settings for a shared 2-core machine.
mpirun_n() {
	n=$1
	shift
	timeout -k 5 ${DSTAGE_TEST_MPI_TIMEOUT:-120} mpiexec.mpich -n "$n" "$@"
}

have_py_module() {
	"$PY" -c "import $1" >/dev/null 2>&1
}

test_done() {
	echo "1..$test_count"
	cleanup_trash
	[ "$test_failed" = 0 ]
}

trap 'cleanup_trash' INT TERM
