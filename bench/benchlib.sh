# SPDX-License-Identifier: BSD-3-Clause
# bench/benchlib.sh: what the section scripts of bench/run.sh share (sourced).
#
# A section script is run as `sh bench/SECTION.sh [--quick] RESULTS_DIR`; it
# adds its rows to RESULTS_DIR/rows.tsv, one a line, fields separated by tabs:
#   section  what  dstage  peer  ratio  goal  met  goal_source
# (ratio: dstage's figure over the peer's, "higher is better" unless the goal
# says <=), writes data for the plots as RESULTS_DIR/*.dat and notes as
# RESULTS_DIR/notes-SECTION.md.  Scratch space comes from run.sh (BENCH_SCR on
# /dev/shm for "node-local" data, BENCH_SHARED on /var/tmp for the "shared
# file system"); run alone, a script makes and removes its own.
top=$(cd "$(dirname "$0")/.." && pwd)
# DSTAGE_MPILIB=openmpi: the Open MPI build and its mpiexec (docs/mpi.md);
# its sections' rows are named SECTION-openmpi
. "$top/tools/mpienv.sh"
# run.sh hands us a snapshot of the build (BENCH_DSTAGE, BENCH_PRELOAD)
DSTAGE=${BENCH_DSTAGE:-$ds_build/bin/dstage}
PRELOAD=${BENCH_PRELOAD:-$ds_build/lib/libdstage-preload.so}
[ -x "$DSTAGE" ] && [ -f "$PRELOAD" ] || { echo "bench: run make first" >&2; exit 1; }

QUICK=0
if [ "${1:-}" = --quick ]; then QUICK=1; shift; fi
RES=${1:-$top/bench/results/tmp}
mkdir -p "$RES"
ROWS="$RES/rows.tsv"

# scratch: ours alone, removed by bench_cleanup
_own_scr=
if [ -z "${BENCH_SCR:-}" ]; then
	BENCH_SCR=$(mktemp -d /dev/shm/dstage-bench.XXXXXX)
	BENCH_SHARED=$(mktemp -d /var/tmp/dstage-bench.XXXXXX)
	_own_scr=1
fi
BENCH_BIN=${BENCH_BIN:-$BENCH_SCR/bin}
SEC=$(basename "$0" .sh)
[ "$ds_mpilib" = mpich ] || SEC="$SEC-$ds_mpilib"
W="$BENCH_SCR/$SEC"         # this section's node-local scratch
WS="$BENCH_SHARED/$SEC"     # its "shared FS" scratch
rm -rf "$W" "$WS"
mkdir -p "$W" "$WS"

# mounts and services to undo on exit
_mounts=
_jobs=
_bgpids=
bench_cleanup() {
	# BENCH_KEEP=DIR: keep the section's raw figures and logs (small files)
	if [ -n "${BENCH_KEEP:-}" ] && [ -d "$W" ]; then
		mkdir -p "$BENCH_KEEP"
		find "$W" -maxdepth 1 -type f -size -4M -exec cp {} "$BENCH_KEEP" \; 2>/dev/null || :
	fi
	for p in $_bgpids; do kill "$p" 2>/dev/null || :; done
	for m in $_mounts; do fusermount -u "$m" 2>/dev/null || fusermount3 -u "$m" 2>/dev/null || :; done
	for j in $_jobs; do "$DSTAGE" clean --to "${j%%:*}" --job "${j#*:}" >/dev/null 2>&1 || :; done
	rm -rf "$W" "$WS"
	if [ -n "$_own_scr" ]; then rm -rf "$BENCH_SCR" "$BENCH_SHARED"; fi
}
trap 'bench_cleanup' EXIT
trap 'exit 130' INT TERM

# the C helpers, compiled once per run (run.sh does it before the sections)
bench_build() {
	mkdir -p "$BENCH_BIN"
	[ -x "$BENCH_BIN/reader" ] || gcc -O2 -Wall -Wextra -o "$BENCH_BIN/reader" "$top/bench/reader.c" || exit 1
	[ -x "$BENCH_BIN/mpibench" ] || mpicc.mpich -O2 -Wall -Wextra -o "$BENCH_BIN/mpibench" "$top/bench/mpibench.c" || exit 1
	if command -v mpicc.openmpi >/dev/null; then
		[ -x "$BENCH_BIN/mpibench-openmpi" ] ||
			mpicc.openmpi -O2 -Wall -Wextra -o "$BENCH_BIN/mpibench-openmpi" "$top/bench/mpibench.c" || exit 1
	fi
}
bench_build
READER="$BENCH_BIN/reader"
MPIBENCH="$BENCH_BIN/mpibench"
[ "$ds_mpilib" = mpich ] || MPIBENCH="$BENCH_BIN/mpibench-$ds_mpilib"
# the MPIs whose peers a section can run side by side: mpich, and openmpi
# where its mpibench was built; mpi_bench MPI N ARGS...: bench/mpibench ARGS
# on N ranks under that MPI's mpiexec, with its settings (tools/mpienv.sh)
BENCH_MPIS=mpich
[ -x "$BENCH_BIN/mpibench-openmpi" ] && command -v mpiexec.openmpi >/dev/null && BENCH_MPIS="mpich openmpi"
mpi_bench() {
	(
		DSTAGE_MPILIB=$1 _n=$2
		shift 2
		. "$top/tools/mpienv.sh"
		_b="$BENCH_BIN/mpibench"
		[ "$ds_mpilib" = mpich ] || _b="$BENCH_BIN/mpibench-$ds_mpilib"
		$ds_mpiexec -n "$_n" "$_b" "$@"
	)
}

say() { echo "bench: $SEC: $*" >&2; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.4f", b - a }'; }
# median of the numbers on stdin
median() { sort -g | awk '{ v[NR] = $1 } END { if (!NR) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# medians of files: med FILE
med() { median <"$1"; }
# ratio A B, 2 decimals ("-" when either is missing)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
ratio3() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.3f", a / b }'; }
# met RATIO GOAL, GOAL like ">= 0.95", "<= 1.3" or "-" (no goal: report only)
met() {
	case $2 in
	-) echo "n/a" ;;
	*) awk -v r="$1" -v g="$2" 'BEGIN { split(g, a, " "); if (r == "-") { print "n/a"; exit }
		ok = (a[1] == ">=") ? (r + 0 >= a[2] + 0) : (r + 0 <= a[2] + 0); print ok ? "yes" : "no" }' ;;
	esac
}
# human figures
fmt_rate() { awk -v v="$1" -v u="$2" 'BEGIN { if (v == "-") { print "-"; exit }
	if (v >= 1e6) printf "%.2fM %s/s", v / 1e6, u; else if (v >= 1e4) printf "%.1fk %s/s", v / 1e3, u;
	else if (v >= 100) printf "%.0f %s/s", v, u; else printf "%.1f %s/s", v, u }'; }
fmt_bps() { awk -v v="$1" 'BEGIN { if (v == "-") { print "-"; exit }
	if (v >= 1e9) printf "%.2f GB/s", v / 1e9; else printf "%.0f MB/s", v / 1e6 }'; }
fmt_s() { awk -v v="$1" 'BEGIN { if (v == "-") { print "-"; exit }
	if (v < 1e-3) printf "%.1f us", v * 1e6; else if (v < 1) printf "%.1f ms", v * 1e3; else printf "%.2f s", v }'; }

# row WHAT DSTAGE PEER RATIO GOAL [SOURCE]: one row of the table; SOURCE
# of the goal: the issue that sets it ("#4"), else "ours" (set here)
row() {
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$SEC" "$1" "$2" "$3" "$4" "$5" "$(met "$4" "$5")" "${6:-}" >>"$ROWS"
	printf '  %-58s %-26s %-26s %6s %-8s %s\n' "$1" "$2" "$3" "$4" "$5" "$(met "$4" "$5")" >&2
}
note() { printf '%s\n' "$*" >>"$RES/notes-$SEC.md"; }

# rounds of interleaved runs: at least 5
if [ $QUICK = 1 ]; then ROUNDS=${ROUNDS:-5}; else ROUNDS=${ROUNDS:-7}; fi

# ---- fixtures --------------------------------------------------------------
# rotated R WORD...: the words rotated left by R (modulo their number): the
# order of round R of an interleaved comparison, each going first in turn
rotated() {
	_r=$(($1 % ($# - 1)))
	shift
	while [ $_r -gt 0 ]; do
		_x=$1
		shift
		set -- "$@" "$_x"
		_r=$((_r - 1))
	done
	echo "$*"
}

# files DIR COUNT BYTES: COUNT files of random bytes named f00000...
mkfiles() {
	mkdir -p "$1"
	head -c "$(($2 * $3))" /dev/urandom | split -a 6 -d -b "$3" - "$1/f"
}

# $RCHAR FILE CMD...: run CMD, then add its rchar (/proc/PID/io: every byte
# read() or pread() by the process) to FILE: the bytes a step read from the
# shared FS, counted outside dstage (readonce, tar)
RCHAR="$W/rchar.sh"
cat >"$RCHAR" <<'EOS'
#!/bin/sh
f=$1; shift
"$@"; rc=$?
awk '/^rchar/ { print $2 }' /proc/$$/io >>"$f"
exit $rc
EOS

# stage_local PACK TO JOB NODES [opts]: dstage stage on NODES simulated nodes
stage_nodes() {
	_p=$1 _to=$2 _job=$3 _n=$4
	shift 4
	_jobs="$_jobs $_to:$_job"
	$ds_mpiexec -n "$_n" "$DSTAGE" stage "$_p" --to "$_to" --job "$_job" --node-per-rank "$@"
}
# shim ENVSTORE NODE MOUNT CMD...: CMD as a reader of node NODE through the shim
shim() {
	_st=$1 _node=$2 _mnt=$3
	shift 3
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$_st" DSTAGE_NODE="$_node" DSTAGE_MOUNT="$_mnt" "$@"
}
jobdir() { echo "$1/dstage.$(id -u).$2"; }

# bench_serve_start JOB [VAR=VALUE...] [SERVE-OPTION...]: `dstage serve` on 2
# simulated nodes over the store staged in $W/st as JOB, with those
# variables in its environment, its log appended to $W/serve.log; returns
# once both nodes serve (SERVE_PID), ends the run with the log if it dies.
# bench_serve_stop JOB: stop it, and forget its status files (a next start
# waits for fresh ones).
SERVE_PID=
bench_serve_start() {
	_sj=$1
	shift
	_senv=
	while [ $# -gt 0 ]; do
		case $1 in -*) break ;; *=*) _senv="$_senv $1" && shift ;; *) break ;; esac
	done
	env $_senv $ds_mpiexec -n 2 "$DSTAGE" serve --to "$W/st" --job "$_sj" --node-per-rank "$@" \
		>>"$W/serve.log" 2>&1 &
	SERVE_PID=$!
	_bgpids="$_bgpids $SERVE_PID"
	_sd=$(jobdir "$W/st" "$_sj") _k=0
	while [ $_k -lt 300 ]; do
		_up=0
		for _n in 0 1; do
			grep -qs '^state=running' "$_sd/$_n/serve.status" && [ -S "$_sd/$_n/sock" ] && _up=$((_up + 1))
		done
		[ $_up = 2 ] && return 0
		kill -0 $SERVE_PID 2>/dev/null || break
		sleep 0.1
		_k=$((_k + 1))
	done
	cat "$W/serve.log" >&2
	exit 1
}
bench_serve_stop() {
	"$DSTAGE" stop --to "$W/st" --job "$1" >/dev/null 2>&1 || :
	wait $SERVE_PID || :
	SERVE_PID=
	rm -f "$(jobdir "$W/st" "$1")"/*/serve.status
}

# bench_svc_cpu JOB: CPU seconds so far of every thread of the service of JOB
# over $W/st (schedstat, ns).
bench_svc_cpu() {
	for _p in $(pgrep -f "$DSTAGE serve --to $W/st --job $1" || :); do
		cat /proc/"$_p"/task/*/schedstat 2>/dev/null || :
	done | awk '{ s += $1 } END { printf "%.6f\n", s / 1e9 }'
}

# bench_holders JOBDIR LIST: "PATH 0" for each path of LIST (relative to the
# mount) that a reader on node 0 reads from its own store, "PATH 1" for one
# held elsewhere (no service runs yet: the read fails at once).
bench_holders() {
	shim "$1" 0 "$(mount_prefix)" env DSTAGE_TIMEOUT=1 DSTAGE_LOG=error /usr/bin/python3 -c '
import sys
for l in open(sys.argv[1]):
    p = l.strip()
    try:
        with open(sys.argv[2] + "/" + p, "rb") as f:
            f.read()
        print(p, 0)
    except OSError:
        print(p, 1)
' "$2" "$(mount_prefix)"
}

# squashfs image of DIR mounted on MNT (remount MNT: fresh caches)
sq_make() { mksquashfs "$1" "$2" -noI -noD -noF -quiet -no-progress >/dev/null; }
sq_mount() {
	mkdir -p "$2"
	squashfuse "$1" "$2" || return 1
	case " $_mounts " in *" $2 "*) ;; *) _mounts="$_mounts $2" ;; esac
}
sq_umount() { fusermount -u "$1" 2>/dev/null || fusermount3 -u "$1"; }
sq_remount() { sq_umount "$2" && squashfuse "$1" "$2"; }
have_squashfuse() { command -v squashfuse >/dev/null && command -v mksquashfs >/dev/null && [ -e /dev/fuse ]; }

# a mount prefix that does not exist on disk
mount_prefix() {
	_m="/dstage-bench-$SEC-$$"
	[ -e "$_m" ] && { echo "bench: $_m exists" >&2; exit 1; }
	echo "$_m"
}
