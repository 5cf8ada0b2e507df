#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/failover.sh: one epoch with a node lost at mid-epoch, against an
# undisturbed epoch and against what dstage did before failover (the step
# fails; stage again from the shared FS on the survivors, then resume).
# Not part of `make test`.
#
#   sh bench/failover.sh [--files N] [--size BYTES] [--compute MS] [--rounds R]
#
# 4 simulated nodes, R = 2, N files of SIZE bytes (default 2048 x 128 KiB,
# 256 MiB).  One reader per node reads its epoch-0 list in order with MS ms
# of "training" (a sleep: the GPU's step) per sample (default 4: an epoch of
# ~2-3 s per node here).
#   undisturbed  the epoch: from the readers' start until the last one ends
#   failover     node 2's service and reader are SIGKILLed when reader 0 is
#                half-way; the script restarts the service on 0,1,3
#                (dstage serve --nodes 0-1,3) at once; the survivors go on
#                with no error; until the last survivor ends
#   restage      the same loss, then the old way: the job directory is
#                dropped, the pack staged again on 3 nodes from the "shared
#                FS" (a directory on disk here), the service started, and
#                the survivors resume with `dstage epoch --resume` lists
#                (the rest of the epoch over 3 nodes): until they end
# Medians of R rounds (default 3), the three in rotated order per round.
# Prints a Markdown table; goal: failover <= 1.2x undisturbed.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/bench/lib.sh"
FILES=2048 SIZE=131072 COMPUTE=4 ROUNDS=3
while [ $# -gt 0 ]; do
	case $1 in
	--files) FILES=$2; shift ;;
	--size) SIZE=$2; shift ;;
	--compute) COMPUTE=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--quick) FILES=512 ROUNDS=1 ;;
	*) echo "usage: sh bench/failover.sh [--files N] [--size BYTES] [--compute MS] [--rounds R]" >&2; exit 2 ;;
	esac
	shift
done
PY=/usr/bin/python3
PRELOAD="$top/build/lib/libdstage-preload.so"
[ -x "$B" ] && [ -f "$PRELOAD" ] || { echo "bench/failover.sh: run make first" >&2; exit 1; }
W=$(mktemp -d /dev/shm/dstage-bench-failover.XXXXXX)
# private copies: a rebuild in the tree during the run must not matter
mkdir -p "$W/bin" "$W/lib"
cp "$B" "$W/bin/" && cp "$PRELOAD" "$W/lib/"
B="$W/bin/dstage" PRELOAD="$W/lib/libdstage-preload.so"
D=$(mktemp -d "${TMPDIR:-/var/tmp}/dstage-bench-failover-pack.XXXXXX") # the "shared FS": on disk
MOUNT=/dstage-bench-failover-$$
export DSTAGE_LOG=warn UCX_MM_FIFO_SIZE=${UCX_MM_FIFO_SIZE:-1024}
SERVE= READERS=
cleanup() {
	for p in $SERVE $READERS; do kill -KILL "$p" 2>/dev/null || :; done
	wait 2>/dev/null || :
	rm -rf "$W" "$D"
}
trap cleanup EXIT INT TERM
mpi() { mpiexec.mpich -n "$@"; }

"$PY" - "$D/src" "$FILES" "$SIZE" <<'PYEOF'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    c = os.path.join(d, "train", "c%d" % (i % 8))
    os.makedirs(c, exist_ok=True)
    with open(os.path.join(c, "s%05d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
PYEOF
"$B" pack -q -p 16 "$D/src" "$D/pack"

# run_case MODE ROUND: prints the epoch time in seconds
run_case() {
	mode=$1 job=b$2$1
	jd="$W/dstage.$(id -u).$job"
	mpi 4 "$B" stage "$D/pack" --to "$W" --job "$job" --node-per-rank -R 2 -q
	mpi 4 "$B" serve --to "$W" --job "$job" --node-per-rank --failover >"$W/serve.$job.log" 2>&1 &
	SERVE=$!
	k=0
	until [ -S "$jd/0/sock" ] && [ -S "$jd/1/sock" ] && [ -S "$jd/2/sock" ] && [ -S "$jd/3/sock" ]; do
		sleep 0.05
		k=$((k + 1))
		[ $k -lt 1200 ] || { echo "serve did not come up" >&2; cat "$W/serve.$job.log" >&2; exit 1; }
	done
	READERS=
	rm -f "$W"/r.*
	t0=$(now)
	for n in 0 1 2 3; do
		env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$jd" DSTAGE_NODE=$n DSTAGE_MOUNT="$MOUNT" \
			cat "$MOUNT/.dstage/epochs/0/all" >"$W/list.$n"
		env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$jd" DSTAGE_NODE=$n DSTAGE_MOUNT="$MOUNT" \
			"$PY" "$top/bench/failover-reader.py" "$MOUNT" "$W/list.$n" "$COMPUTE" "$W/r.$n" &
		READERS="$READERS $!"
		eval "R$n=\$!"
	done
	if [ "$mode" != undisturbed ]; then
		until [ -e "$W/r.0.half" ]; do sleep 0.01; done
		pid2=$(sed -n 's/^pid=//p' "$jd/2/serve.status")
		kill -KILL "$pid2" "$R2"
		wait "$SERVE" 2>/dev/null || :
		if [ "$mode" = failover ]; then
			tk=$(now)
			rm -f "$jd/0/sock" "$jd/1/sock" "$jd/3/sock"
			mpi 3 "$B" serve --to "$W" --job "$job" --node-per-rank --nodes 0-1,3 \
				>>"$W/serve.$job.log" 2>&1 &
			SERVE=$!
			until [ -S "$jd/0/sock" ] && [ -S "$jd/1/sock" ] && [ -S "$jd/3/sock" ]; do sleep 0.01; done
			elapsed "$tk" >"$W/restart.$2"
		else
			# the old way: every reader fails, the stores are dropped, the
			# survivors stage again from the pack, then resume
			kill -KILL "$R0" "$R1" "$R3" 2>/dev/null || :
			wait "$R0" "$R1" "$R3" 2>/dev/null || :
			"$B" epoch --to "$W" --job "$job" --node 0 --state 0 "$(($(wc -l <"$W/list.0") / 2))" >"$W/state.json"
			rm -rf "$jd"
			job2=${job}r jd="$W/dstage.$(id -u).$job2"
			mpi 3 "$B" stage "$D/pack" --to "$W" --job "$job2" --node-per-rank -R 2 -q
			mpi 3 "$B" serve --to "$W" --job "$job2" --node-per-rank >>"$W/serve.$job.log" 2>&1 &
			SERVE=$!
			until [ -S "$jd/0/sock" ] && [ -S "$jd/1/sock" ] && [ -S "$jd/2/sock" ]; do sleep 0.05; done
			READERS=
			for n in 0 1 2; do
				"$B" epoch --to "$W" --job "$job2" --node $n --resume "$W/state.json" >"$W/rest.$n"
				env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$jd" DSTAGE_NODE=$n DSTAGE_MOUNT="$MOUNT" \
					"$PY" "$top/bench/failover-reader.py" "$MOUNT" "$W/rest.$n" "$COMPUTE" "$W/r.$n" &
				READERS="$READERS $!"
			done
		fi
	fi
	for p in $READERS; do wait "$p" 2>/dev/null || :; done
	ends=
	for n in 0 1 2 3; do
		[ "$mode" != undisturbed ] && [ $n = 2 ] && [ "$mode" = failover ] && continue
		[ "$mode" = restage ] && [ $n = 3 ] && continue
		[ -s "$W/r.$n" ] || { echo "reader $n of $mode failed" >&2; cat "$W/serve.$job.log" >&2; exit 1; }
		ends="$ends $(cut -d' ' -f1 "$W/r.$n")"
	done
	last=$(printf '%s\n' $ends | sort -g | tail -1)
	"$B" stop --to "$W" --job "${job2:-$job}" >/dev/null 2>&1 || :
	wait "$SERVE" 2>/dev/null || :
	SERVE=
	job2=
	rm -rf "$W"/dstage.*
	[ "$mode" = failover ] && { cat "$W/restart.$2"; echo; } >>"$W/restarts"
	awk -v a="$t0" -v b="$last" 'BEGIN { printf "%.3f", b - a }'
}

U= F= S=
job2=
for r in $(seq 1 "$ROUNDS"); do
	case $((r % 3)) in
	1) order="undisturbed failover restage" ;;
	2) order="failover restage undisturbed" ;;
	0) order="restage undisturbed failover" ;;
	esac
	for m in $order; do
		t=$(run_case "$m" "$r")
		echo "round $r $m: $t s" >&2
		case $m in undisturbed) U="$U $t" ;; failover) F="$F $t" ;; restage) S="$S $t" ;; esac
	done
done
u=$(median $U) f=$(median $F) s=$(median $S)
mib=$(awk -v n="$FILES" -v s="$SIZE" 'BEGIN { printf "%.0f", n * s / 1048576 }')
echo "| what ($FILES x $SIZE B = $mib MiB, 4 nodes, R=2, $COMPUTE ms/sample, medians of $ROUNDS) | seconds | vs undisturbed | goal | met |"
echo "| --- | --- | --- | --- | --- |"
echo "| undisturbed epoch | $u | 1.00 | | |"
echo "| node 2 lost at mid-epoch, restart on 0,1,3 (failover) | $f | $(ratio "$f" "$u") | <= 1.2 | $(met "$(ratio "$f" "$u")" "<=" 1.2) |"
echo "| node 2 lost at mid-epoch, re-stage on 3 nodes, resume | $s | $(ratio "$s" "$u") | | |"
echo "| the restart alone: SIGKILL to the survivors' sockets up again (median) | $(median $(cat "$W/restarts")) | | | |"
