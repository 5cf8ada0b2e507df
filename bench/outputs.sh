#!/bin/sh
# Write-once outputs (docs/outputs.md): what a checkpoint costs the training.
#   blocked: torch.save of a state dict of SIZE (default 1 GiB) by a process
#     with the shim, to DSTAGE_MOUNT/out (the node's RAM; published to the
#     other node at close; drained in the background) vs torch.save straight
#     to the shared file system (/var/tmp here), flushed and fsync'ed, the
#     way a checkpoint must be written to count as saved.  The time the
#     call blocks, from torch.save's start to its file's close.
#   drain: from the close to `dstage drain --wait` returning (the copy to
#     --drain-to with fsync, rename, fsync of the directory) vs `cp` of the
#     same file from /dev/shm to /var/tmp followed by `sync FILE`.
# Interleaved (A B A B ...), RUNS rounds, medians; each round waits for the
# drain before the next, so one measure never runs under the other.
# 2 simulated nodes (--node-per-rank).
# Usage: bench/outputs.sh [--quick] [RESULTS_DIR]  (writes outputs.md there)
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$SRCDIR/bench/results}
mkdir -p "$out"
if [ $quick = 1 ]; then mib=128 runs=3; else mib=${BENCH_MIB:-1024} runs=${BENCH_RUNS:-5}; fi
DSTAGE=$SRCDIR/build/bin/dstage
PRELOAD=$SRCDIR/build/lib/libdstage-preload.so
PY=/usr/bin/python3
T=/var/tmp/dstage-bench-outputs.$$
SHM=/dev/shm/dstage-bench-outputs.$$
JOB=bo$$
MOUNT=/dstage-bench-$$
mkdir -p "$T/src/d" "$SHM" && cd "$T" || exit 1
svc=
trap '[ -n "$svc" ] && { "$DSTAGE" stop --to "$SHM" --job "$JOB" >/dev/null 2>&1; wait $svc; }; rm -rf "$T" "$SHM"' EXIT
export DSTAGE_LOG=error
on() {
	k=$1
	shift
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$SHM/dstage.$(id -u).$JOB" DSTAGE_NODE="$k" DSTAGE_MOUNT="$MOUNT" "$@"
}

for i in 1 2 3 4; do head -c 4096 /dev/urandom >src/d/f$i; done
"$DSTAGE" pack -q -p 2 src pack || exit 1
mpiexec.mpich -n 2 "$DSTAGE" stage pack --to "$SHM" --job "$JOB" --node-per-rank -q || exit 1
mpiexec.mpich -n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank -q \
	--outputs out --drain-to "$T/drain" --drain-rate 0 &
svc=$!
k=0
until [ -S "$SHM/dstage.$(id -u).$JOB/1/osock" ] || [ $k -ge 300 ]; do sleep 0.1; k=$((k + 1)); done

cat >save.py <<'EOF'
import os, sys, time, torch
mib, path, fsync = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "fsync"
# a state dict of mib MiB in 64 tensors, like a model's layers
sd = {"layer%02d.weight" % i: torch.randn(mib * 1024 * 1024 // 4 // 64) for i in range(64)}
t0 = time.perf_counter()
with open(path, "wb") as f:
    torch.save(sd, f)
    if fsync:
        f.flush()
        os.fsync(f.fileno())
t1 = time.perf_counter()
print("%.4f" % (t1 - t0))
EOF

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
r=0
: >shim.t; : >direct.t; : >drain.t; : >cp.t
while [ $r -lt "$runs" ]; do
	for what in $( [ $((r % 2)) = 0 ] && echo "shim direct" || echo "direct shim"); do
		if [ $what = shim ]; then
			on 0 "$PY" save.py "$mib" "$MOUNT/out/ck$r.pt" nofsync >>shim.t || exit 1
			t0=$(date +%s.%N)
			"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" || exit 1
			echo "$(date +%s.%N) - $t0" | bc >>drain.t
			on 1 rm "$MOUNT/out/ck$r.pt"
		else
			"$PY" save.py "$mib" "$T/direct.pt" fsync >>direct.t || exit 1
			cp "$T/direct.pt" "$SHM/src.pt"
			rm -f "$T/cp.pt"
			t0=$(date +%s.%N)
			cp "$SHM/src.pt" "$T/cp.pt" && sync "$T/cp.pt"
			echo "$(date +%s.%N) - $t0" | bc >>cp.t
			rm -f "$T/direct.pt" "$T/cp.pt" "$SHM/src.pt"
		fi
	done
	r=$((r + 1))
done
s=$(median <shim.t) d=$(median <direct.t) dr=$(median <drain.t) c=$(median <cp.t)
{
	echo "# Write-once outputs: torch.save of a $mib MiB state dict ($(date -u +%Y-%m-%d), $runs rounds, medians)"
	echo
	echo "| measure | through the shim (MOUNT/out) | direct to /var/tmp | ratio |"
	echo "| --- | --- | --- | --- |"
	echo "| training blocked in torch.save (s) | $s | $d (with fsync) | $(echo "scale=3; $s / $d" | bc) |"
	echo "| drain after close vs cp + sync (s) | $dr | $c | $(echo "scale=3; $dr / $c" | bc) |"
	echo "| drain throughput vs cp (MiB/s) | $(echo "scale=0; $mib / $dr" | bc) | $(echo "scale=0; $mib / $c" | bc) | |"
	echo
	echo "raw (s): shim $(tr '\n' ' ' <shim.t); direct $(tr '\n' ' ' <direct.t); drain $(tr '\n' ' ' <drain.t); cp $(tr '\n' ' ' <cp.t)"
} | tee "$out/outputs.md"
