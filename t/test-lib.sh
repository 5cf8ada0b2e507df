# SPDX-License-Identifier: BSD-3-Clause
# t/test-lib.sh: a small shell test library in the git style, printing TAP.
# t/README.md describes the test families, how to run them and how to write
# a new one.
#
#   . "$(dirname "$0")/test-lib.sh"      (from a t/NNNN-name.t script)
#   test_expect_success [PREREQ] 'title' 'cmd && cmd'
#   test_expect_code [PREREQ] STATUS 'title' 'cmd'  (cmd must exit with STATUS)
#   test_status [--show FILE] STATUS CMD ARGS    (in a body: CMD exits STATUS)
#   test_done                                       (prints the plan, exits)
#
# Prerequisites, as in git's t/test-lib.sh.  A test with a PREREQ (several:
# "ROOT,TORCH"; "!ROOT" for "not root") that is not met does not run and
# says why: "ok 3 # skip title (missing TORCH: ...)".
#   test_set_prereq NAME            declare NAME present
#   test_lazy_prereq NAME 'script' ['what it means']
#                                   NAME is present when 'script' succeeds;
#                                   run once, on first use, in a subshell in
#                                   a scratch directory, its output discarded
#   test_have_prereq NAME[,NAME]    true when all are met (for `if`); the
#                                   missing ones are then in
#                                   $test_missing_prereq
#   test_require NAME[,NAME]        skip the whole script unless all are met
# Standard prerequisites (lazy, so a script pays only for what it asks):
#   ROOT PYTHON NUMPY H5PY PIL TORCH TORCHVISION YAML_C MPI MPICC CC CLANG
#   TSAN LIBFUZZER ASAN NETNS SLURM S3RVER NODE TMPFS LOOP SETPRIV USERADD
#   SPARSE SQUASHFUSE FUSE SOAK  (their meaning: `_test_std_prereqs` below).
#
# Each script runs in its own scratch directory, $TRASH, and its own node-
# store root in RAM, $SHM; both are removed at exit unless a test failed or
# DSTAGE_TEST_KEEP is set.  An EXIT trap does the cleanup whatever the way
# out: it kills what test_bg registered (and any child left), runs the
# test_atexit commands, unmounts what is left mounted under $TRASH or $SHM
# and removes them.  INT, TERM and HUP end the script at once (after the
# command running, which gets the signal too when it comes from the
# terminal or from timeout(1)): cleanup, "Bail out! interrupted", exit
# 128+signal; nothing ever runs from another directory afterwards.
# A script that exits before test_done says so and fails.
#
# Other helpers:
#   $DSTAGE       the dstage binary          $PRELOAD  the preload library
#   $T            build/t (test helpers)     $SRCDIR   the project root
#   $PY           /usr/bin/python3 (Debian's torch, h5py and Pillow)
#   mpirun_n N .. mpiexec.mpich (or mpiexec.openmpi) -n N with a timeout, for
#                 a shared 2-core box
#   test_bg PID   kill PID at the end (also works from inside a test body)
#   test_atexit 'cmd'   run cmd at the end (last registered runs first)
#   skip_all why  print "1..0 # SKIP why" and exit 0
#   test_skip 'title' why   one skipped test, with its reason
#   test_cmp A B  diff -u, failing when they differ
#   test_grep ... grep that shows the file when it does not match
#   kill_ranks SIG PID...  signal the live processes of one step (below)
#   proc_running PID   PID exists and has not exited (a zombie has)
#   wait_gone SECS PID...  wait until none of PIDS runs (any process, not
#                 only this shell's children: `wait` reaps only those)
#   have_py_module M   $PY can import M

SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
export SRCDIR
# DSTAGE_MPILIB=openmpi (make test MPI=openmpi): the Open MPI build in
# build-openmpi/ and its mpiexec (tools/mpienv.sh, docs/mpi.md)
top=$SRCDIR
. "$SRCDIR/tools/mpienv.sh"
DSTAGE_TEST_BUILD=$ds_build
DSTAGE="$DSTAGE_TEST_BUILD/bin/dstage"
PRELOAD="$DSTAGE_TEST_BUILD/lib/libdstage-preload.so"
T="$DSTAGE_TEST_BUILD/t"
PY=/usr/bin/python3
export DSTAGE PRELOAD T PY DSTAGE_TEST_BUILD
unset DSTAGE_MOUNT DSTAGE_NODE LD_PRELOAD SLURM_JOB_ID SLURM_NODEID SLURM_PROCID
export DSTAGE_LOG=${DSTAGE_LOG:-warn}
export LC_ALL=C.UTF-8 TZ=UTC

test_name=$(basename "$0" .t)
test_count=0
test_failed=0
test_skipped_all=
test_missing_prereq=
_test_finished=
_test_atexit=
_test_cleaned=
test_bg_pids=

# ---- scratch directories and the way out ----------------------------------

TRASH="${DSTAGE_TEST_TMP:-/tmp}/dstage-test.$test_name.$$"
# A per-script node-store root in RAM, so scripts never share a store.
SHM="/dev/shm/dstage-test.$test_name.$$"

# Kill PIDS (TERM, then KILL after about 2 s).
_test_kill() {
	[ -n "$*" ] || return 0
	# shellcheck disable=SC2086
	kill -TERM $* 2>/dev/null
	_k=0
	while [ $_k -lt 20 ]; do
		_alive=
		for _p in $*; do kill -0 "$_p" 2>/dev/null && _alive="$_alive $_p"; done
		[ -n "$_alive" ] || return 0
		sleep 0.1
		_k=$((_k + 1))
	done
	# shellcheck disable=SC2086
	kill -KILL $_alive 2>/dev/null
	return 0
}

# The pids of this shell's descendants (children of children...), deepest
# last; the scan's own ps and awk are gone by the time they are killed.
_test_descendants() {
	ps -e -o pid= -o ppid= 2>/dev/null | awk -v top=$$ '
		{ kids[$2] = kids[$2] " " $1 }
		END {
			n = split(kids[top], q, " ")
			for (i = 1; i <= n; i++) {
				print q[i]
				m = split(kids[q[i]], c, " ")
				for (j = 1; j <= m; j++) q[++n] = c[j]
			}
		}'
}

# Mount points under $1, deepest first.
_test_mounts_under() {
	awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts 2>/dev/null | sort -r
}

_test_cleanup() {
	[ -z "$_test_cleaned" ] || return 0
	_test_cleaned=1
	# leave $TRASH for its parent: nothing runs from "/", and the
	# directory can go
	cd "${TRASH%/*}" 2>/dev/null || cd /tmp || cd /
	# services, readers, fillers registered with test_bg (also from
	# inside a test body, through $TRASH/.bg-pids); any child left last
	_pids="$test_bg_pids $(cat "$TRASH/.bg-pids" 2>/dev/null)"
	_test_kill $_pids
	# test_atexit commands (a Slurm cluster, a multi-host bed, mounts),
	# last registered first, in this shell
	if [ -n "$_test_atexit" ]; then
		eval "$_test_atexit"
	fi
	_test_kill $(_test_descendants)
	if [ -z "$DSTAGE_TEST_KEEP" ] && [ "$test_failed" = 0 ]; then
		for _d in "$TRASH" "$SHM"; do
			[ -d "$_d" ] || continue
			for _m in $(_test_mounts_under "$_d"); do
				umount "$_m" 2>/dev/null || umount -l "$_m" 2>/dev/null
			done
			# never remove what a mount we could not undo holds
			if [ -z "$(_test_mounts_under "$_d")" ]; then
				rm -rf "$_d"
			else
				echo "# $test_name: $_d kept: still mounted: $(_test_mounts_under "$_d" | tr '\n' ' ')"
			fi
		done
	elif [ "$test_failed" != 0 ]; then
		echo "# $test_name: kept $TRASH and $SHM for inspection"
	fi
}

# kept for scripts that call it; the EXIT trap does it anyway
cleanup_trash() { _test_cleanup; }

_test_on_exit() {
	_rc=$?
	trap - EXIT
	if [ -z "$_test_finished" ]; then
		echo "# $test_name: the script exited with status $_rc after test $test_count, before test_done"
		[ "$_rc" != 0 ] || _rc=1
		test_failed=$((test_failed + 1))
	fi
	_test_cleanup
	exit "$_rc"
}

_test_on_signal() {
	trap - EXIT INT TERM HUP
	_test_finished=1
	echo "Bail out! interrupted (SIG$1) in $test_name at test $test_count"
	_test_cleanup
	exit "$2"
}

trap '_test_on_exit' EXIT
trap '_test_on_signal INT 130' INT
trap '_test_on_signal TERM 143' TERM
trap '_test_on_signal HUP 129' HUP

# test_atexit 'cmd': run cmd (in this shell) when the script ends, however
# it ends; the last registered runs first.
test_atexit() {
	_test_atexit="{ $1
} 2>/dev/null
$_test_atexit"
}

# Remember a background pid so it is killed at the end.  From inside a test
# body (a subshell) too: the pid goes to a file the cleanup reads.
test_bg() {
	test_bg_pids="$test_bg_pids $*"
	echo "$*" >>"$TRASH/.bg-pids"
}

rm -rf "$TRASH" && mkdir -p "$TRASH" || { echo "Bail out! cannot make $TRASH"; exit 1; }
mkdir -p "$SHM"
cd "$TRASH" || { echo "Bail out! cannot enter $TRASH"; exit 1; }

[ -x "$DSTAGE" ] || { echo "Bail out! $DSTAGE not built (run make)"; exit 1; }

say() { printf '%s\n' "$*"; }

skip_all() {
	echo "1..0 # SKIP $*"
	test_skipped_all=1
	_test_finished=1
	exit 0
}

# ---- prerequisites ----------------------------------------------------------

_test_prereq_ok=" "
_test_prereq_no=" "

test_set_prereq() {
	for _p in "$@"; do
		_test_prereq_ok="$_test_prereq_ok$_p "
	done
}

# test_lazy_prereq NAME 'script' ['description shown when missing']
test_lazy_prereq() {
	case $1 in *[!A-Z0-9_]* | "") echo "Bail out! bad prerequisite name '$1'"; exit 1 ;; esac
	eval "_test_lazy_$1=\$2; _test_desc_$1=\${3:-}"
}

# _test_prereq NAME: 0 when met (evaluating a lazy one once)
_test_prereq() {
	case $_test_prereq_ok in *" $1 "*) return 0 ;; esac
	case $_test_prereq_no in *" $1 "*) return 1 ;; esac
	case $1 in *[!A-Z0-9_]* | "") echo "Bail out! bad prerequisite name '$1'"; exit 1 ;; esac
	eval "_script=\${_test_lazy_$1-}"
	if [ -z "$_script" ]; then
		# unknown and never set: missing
		_test_prereq_no="$_test_prereq_no$1 "
		return 1
	fi
	_dir="$TRASH/.prereq-$1"
	mkdir -p "$_dir"
	if (cd "$_dir" && eval "$_script") >"$_dir.log" 2>&1 </dev/null; then
		_test_prereq_ok="$_test_prereq_ok$1 "
		_r=0
	else
		_test_prereq_no="$_test_prereq_no$1 "
		_r=1
	fi
	rm -rf "$_dir"
	return $_r
}

# test_have_prereq NAME[,NAME...] (or several arguments): all met?
test_have_prereq() {
	test_missing_prereq=
	for _arg in "$@"; do
		_old_ifs=$IFS
		IFS=,
		# shellcheck disable=SC2086
		set -- $_arg
		IFS=$_old_ifs
		for _n in "$@"; do
			case $_n in
			!*)
				_test_prereq "${_n#!}" && test_missing_prereq="$test_missing_prereq${test_missing_prereq:+,}$_n"
				;;
			*)
				_test_prereq "$_n" || test_missing_prereq="$test_missing_prereq${test_missing_prereq:+,}$_n"
				;;
			esac
		done
	done
	[ -z "$test_missing_prereq" ]
}

# The reason for $test_missing_prereq: "TORCH: import torch fails..."
_test_missing_why() {
	_why=
	_old_ifs=$IFS
	IFS=,
	for _n in $test_missing_prereq; do
		case $_n in
		!*) _d="${_n#!} is present" ;;
		*) eval "_d=\${_test_desc_$_n:-}" ;;
		esac
		_why="$_why${_why:+; }$_n${_d:+: $_d}"
	done
	IFS=$_old_ifs
	printf '%s' "$_why"
}

test_require() {
	test_have_prereq "$@" || skip_all "missing $(_test_missing_why)"
}

# ---- running tests ------------------------------------------------------------

_run() {
	# run in a subshell so `exit` or `cd` in a test does not leak; fd 9 is
	# the test's own output too, for what the helpers say whatever the
	# redirections of the command they run (test_status)
	( eval "$1" ) >"$TRASH/.out" 2>&1 9>&1
}

# _test_skipped PREREQ TITLE: true (after printing the skip) when PREREQ is
# not met
_test_skipped() {
	test_have_prereq "$1" && return 1
	test_count=$((test_count + 1))
	echo "ok $test_count # skip $2 (missing $(_test_missing_why))"
	return 0
}

test_expect_success() {
	if [ $# = 3 ]; then
		_test_skipped "$1" "$2" && return 0
		shift
	fi
	test_count=$((test_count + 1))
	if _run "$2"; then
		echo "ok $test_count - $1"
	else
		test_failed=$((test_failed + 1))
		echo "not ok $test_count - $1"
		sed -e 's/^/#   /' "$TRASH/.out" | tail -n 40
	fi
}

# test_expect_code [PREREQ] STATUS 'title' 'cmd': cmd must exit exactly
# with STATUS.
test_expect_code() {
	if [ $# = 4 ]; then
		_test_skipped "$1" "$3" && return 0
		shift
	fi
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
# the same, under the name some notes use
test_expect_failure_status() { test_expect_code "$@"; }

# test_status [--show FILE] STATUS CMD [ARG...]: inside a test body, run
# CMD and succeed only when it exits with exactly STATUS (0 included): the
# hand-written `CMD; rc=$?; cat FILE && test $rc = STATUS` without
# breaking the && chain.  --show FILE: FILE (CMD's redirected output) goes
# to the test's output after CMD, whatever its status.  CMD is a program or
# a function, with no assignments in front (use env).
#   test_status --show err 1 "$DSTAGE" verify pack 2>err && test_grep sum err
test_status() {
	_ts_show=
	if [ "$1" = --show ]; then
		_ts_show=$2
		shift 2
	fi
	_ts_want=$1
	shift
	"$@"
	_ts_rc=$?
	[ -z "$_ts_show" ] || cat "$_ts_show" >&9
	[ "$_ts_rc" = "$_ts_want" ] && return 0
	echo "test_status: $1 exited $_ts_rc, want $_ts_want" >&9
	return 1
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

# kill_ranks SIG PID...: send SIG to every PID, e.g. several ranks of one
# MPI step.  Each must be running when it is called (an empty or gone PID
# fails: the step was not what the test thought).  Once one rank is killed,
# mpiexec.hydra takes the rest of the step down by itself: here the second
# rank was gone by the next shell command every time, and even between the
# two kill(2) of one `kill -9 A B` in 1 of 4 runs under load.  A PID that
# is gone by its turn is therefore not an error, one that still runs and
# cannot be signalled is.
kill_ranks() {
	_sig=$1
	shift
	[ $# -gt 0 ] || { echo "kill_ranks: no pid"; return 1; }
	for _p in "$@"; do
		case $_p in
		"" | *[!0-9]*) echo "kill_ranks: '$_p' is not a pid"; return 1 ;;
		esac
		proc_running "$_p" || { echo "kill_ranks: $_p is not running"; return 1; }
	done
	for _p in "$@"; do
		kill -"$_sig" "$_p" 2>/dev/null && continue
		if [ -e "/proc/$_p" ]; then
			echo "kill_ranks: cannot send SIG$_sig to $_p"
			return 1
		fi
	done
	return 0
}

proc_running() {
	_st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$1/status" 2>/dev/null)
	[ -n "$_st" ] && [ "$_st" != Z ] && [ "$_st" != X ]
}

# wait_gone SECS PID...: 0 once no PID runs; 1 (naming them) after SECS,
# a bound that only a process that does not die reaches
wait_gone() {
	_k=$(($1 * 10))
	shift
	while :; do
		_alive=
		for _p in "$@"; do proc_running "$_p" && _alive="$_alive $_p"; done
		[ -n "$_alive" ] || return 0
		[ $_k -gt 0 ] || { echo "still running:$_alive"; return 1; }
		sleep 0.1
		_k=$((_k - 1))
	done
}

# mpiexec with settings for a shared 2-core machine.
mpirun_n() {
	n=$1
	shift
	timeout -k 5 ${DSTAGE_TEST_MPI_TIMEOUT:-120} $ds_mpiexec -n "$n" "$@"
}

have_py_module() {
	"$PY" -c "import $1" >/dev/null 2>&1
}

test_done() {
	echo "1..$test_count"
	_test_finished=1
	[ "$test_failed" = 0 ] && exit 0
	exit 1
}

# ---- the standard prerequisites --------------------------------------------

_test_std_prereqs() {
	[ "$(id -u)" = 0 ] && test_set_prereq ROOT
	_test_desc_ROOT="needs root"
	test_lazy_prereq PYTHON '[ -x "$PY" ]' "no $PY"
	test_lazy_prereq NUMPY 'have_py_module numpy' "python3-numpy not importable by $PY"
	test_lazy_prereq H5PY 'have_py_module h5py' "python3-h5py not importable by $PY"
	test_lazy_prereq PIL 'have_py_module PIL.Image' "python3-pil not importable by $PY"
	test_lazy_prereq TORCH 'have_py_module torch' "python3-torch not importable by $PY"
	test_lazy_prereq TORCHVISION 'have_py_module torchvision' "python3-torchvision not importable by $PY"
	test_lazy_prereq YAML_C '"$PY" -c "import yaml; assert yaml.__with_libyaml__"' \
		"python3-yaml with its C extension (_yaml) not importable by $PY"
	test_lazy_prereq MPI 'command -v $ds_mpiexec' "$ds_mpiexec not installed (mpich, openmpi-bin)"
	test_lazy_prereq MPICC 'command -v mpicc.mpich' "mpicc.mpich not installed (libmpich-dev)"
	test_lazy_prereq CC 'command -v cc' "no C compiler"
	test_lazy_prereq CLANG 'command -v "${CLANG:-clang}"' "${CLANG:-clang} not installed (apt-get install clang)"
	test_lazy_prereq TSAN '
		printf "#include <pthread.h>\nint x;\nstatic void *f(void *a){(void)a;for(int i=0;i<1000;i++)x++;return 0;}\nint main(void){pthread_t t[2];for(int i=0;i<2;i++)pthread_create(&t[i],0,f,0);for(int i=0;i<2;i++)pthread_join(t[i],0);return 0;}\n" >race.c &&
		"${CLANG:-clang}" -fsanitize=thread -g race.c -o race && { ./race 2>race.err || :; } &&
		grep -q "WARNING: ThreadSanitizer: data race" race.err
	' "ThreadSanitizer does not work here (cannot build or run ${CLANG:-clang} -fsanitize=thread and see a planted race)"
	test_lazy_prereq LIBFUZZER '
		printf "int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n);\nint LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n" >probe.c &&
		"${FUZZ_CC:-clang}" -fsanitize=fuzzer,address probe.c -o probe
	' "${FUZZ_CC:-clang} cannot link -fsanitize=fuzzer,address (apt-get install clang libclang-rt-14-dev)"
	test_lazy_prereq ASAN '
		[ -x "$SRCDIR/build-asan/bin/dstage" ] &&
		! find "$SRCDIR"/common "$SRCDIR"/hdf5 "$SRCDIR"/stage "$SRCDIR"/shuffle "$SRCDIR"/cli \
			"$SRCDIR"/mpi "$SRCDIR"/s3 -name "*.[ch]" \
			-newer "$SRCDIR/build-asan/bin/dstage" | grep -q .
	' "no current build-asan/bin/dstage (make fuzz builds it)"
	test_lazy_prereq NETNS '
		[ "$(id -u)" = 0 ] && command -v ip && command -v unshare && command -v nsenter &&
		unshare --net --mount --uts --ipc true
	' "cannot make network and mount namespaces here (root, iproute2, util-linux)"
	test_lazy_prereq SLURM '
		[ "$(id -u)" = 0 ] &&
		for c in slurmctld slurmd slurmstepd munged srun sbatch; do
			command -v $c || [ -x /usr/sbin/$c ] || exit 1
		done
	' "needs root and slurm-wlm + munge installed (make deps)"
	test_lazy_prereq S3RVER '
		[ -x "$SRCDIR/build/npm/node_modules/.bin/s3rver" ] && { command -v node || command -v nodejs; }
	' "s3rver not installed (make npm-s3) or no node"
	test_lazy_prereq NODE 'command -v node || command -v nodejs' "node.js not installed"
	test_lazy_prereq TMPFS '
		[ "$(id -u)" = 0 ] && mkdir m && mount -t tmpfs -o size=1m tmpfs m && umount m
	' "cannot mount a tmpfs here (needs root)"
	test_lazy_prereq LOOP '
		[ "$(id -u)" = 0 ] && command -v mkfs.ext4 && truncate -s 8M img &&
		mkfs.ext4 -q -F img && mkdir m && mount -o loop img m && umount m
	' "cannot mount an ext4 image on a loop device here"
	test_lazy_prereq SETPRIV '[ "$(id -u)" = 0 ] && command -v setpriv' \
		"needs root and setpriv, to run as another user"
	test_lazy_prereq USERADD '[ "$(id -u)" = 0 ] && command -v useradd && command -v userdel && command -v setpriv' \
		"needs root, useradd and setpriv, to make another user"
	test_lazy_prereq SPARSE '
		truncate -s 1G probe && [ "$(du -k probe | cut -f1)" -lt 1024 ]
	' "$TRASH is on a file system without sparse files"
	test_lazy_prereq SQUASHFUSE 'command -v squashfuse && command -v mksquashfs' \
		"squashfuse or squashfs-tools not installed"
	test_lazy_prereq FUSE '[ -c /dev/fuse ] && { command -v fusermount3 || command -v fusermount; }' \
		"no /dev/fuse or fusermount"
	test_lazy_prereq SOAK '[ -n "$DSTAGE_SOAK" ]' "long: run by make soak (or DSTAGE_SOAK=1)"
}
_test_std_prereqs
