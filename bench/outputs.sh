#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/outputs.sh: write-once outputs (docs/outputs.md, issue 15): what a
# checkpoint costs the training, and the drain.
#
#   blocked: the time torch.save of a state dict of SIZE (1 GiB; --quick:
#     128 MiB) blocks the training process, from torch.save's start to its
#     file's close, written three ways in the same round:
#       shim    through the shim to DSTAGE_MOUNT/out (the node's RAM,
#               published to the other node at close, drained after);
#       direct  straight to the shared file system (/var/tmp here), flushed
#               and fsync'ed, the way a checkpoint must be written to count
#               as saved (the peer: issue 15's goal is shim <= 0.3x this);
#       tmpfs   straight to /dev/shm without the shim, no fsync: the floor,
#               the best any store in RAM can do (the pages are allocated
#               and copied once; nothing is summed or published).
#     Each is split into torch.save's own writes and the close (for the
#     shim: the publish to every node; the service's log gives its parts).
#   replicas: the same torch.save through the shim to a second service
#     started with --outputs-replicas 2 (outrepl.c: the close returns once
#     the other node holds a CRC-checked copy) vs the first one (1 holder),
#     interleaved (alternating which goes first), ROUNDS rounds, medians of
#     the close and of the whole save.
#   drain: from the close (the writer's clock) to `dstage drain --wait`
#     returning (the copy to
#     --drain-to with CRC check, fsync, rename, fsync of the directory) vs
#     `cp` of the same file from /dev/shm to /var/tmp followed by `sync FILE`,
#     at normal priority and at the drain thread's own (nice 19, best-effort
#     I/O level 7: the drain yields to training), to tell the mechanism's
#     cost from the policy's under load.
# Rotated order (shim direct tmpfs, direct tmpfs shim, ...), ROUNDS rounds,
# medians; each round waits for the drain before the next measure.  2
# simulated nodes (--node-per-rank).  Rows go to RESULTS_DIR/rows.tsv, the
# table to RESULTS_DIR/outputs.md.
#   sh bench/outputs.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then mib=128; else mib=${BENCH_MIB:-1024}; fi
PY=/usr/bin/python3
$PY -c 'import torch' 2>/dev/null || { say "no torch under $PY: skipped"; exit 0; }
JOB=bo$$
MOUNT=/dstage-bench-$$
ST="$W/st"
JD=$(jobdir "$ST" "$JOB")
mkdir -p "$WS/src/d" "$ST"
svc=
stop_svc() {
	[ -n "$svc" ] || return 0
	"$DSTAGE" stop --to "$ST" --job "$JOB" >/dev/null 2>&1 || :
	wait "$svc" || :
	svc=
}
svc2=
stop_svc2() {
	[ -n "$svc2" ] || return 0
	"$DSTAGE" stop --to "$ST" --job "$JOB2" >/dev/null 2>&1 || :
	wait "$svc2" || :
	svc2=
}
JOB2=br$$
JD2=$(jobdir "$ST" "$JOB2")
trap 'stop_svc; stop_svc2; bench_cleanup' EXIT
on() {
	k=$1
	shift
	env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JD" DSTAGE_NODE="$k" DSTAGE_MOUNT="$MOUNT" DSTAGE_LOG=error "$@"
}

for i in 1 2 3 4; do head -c 4096 /dev/urandom >"$WS/src/d/f$i"; done
"$DSTAGE" pack -q -p 2 "$WS/src" "$WS/pack"
stage_nodes "$WS/pack" "$ST" "$JOB" 2 -q
# the service logs each publish's parts at debug level (svc.log)
DSTAGE_LOG=debug mpiexec.mpich -n 2 "$DSTAGE" serve --to "$ST" --job "$JOB" --node-per-rank \
	--outputs out --drain-to "$WS/drain" --drain-rate 0 >"$W/svc.log" 2>&1 &
svc=$!
k=0
until [ -S "$JD/1/osock" ] && [ -S "$JD/0/osock" ] || [ $k -ge 300 ]; do sleep 0.1; k=$((k + 1)); done

cat >"$W/save.py" <<'EOF'
import os, sys, time, torch
mib, path, fsync = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "fsync"
# a state dict of mib MiB in 64 tensors, like a model's layers
sd = {"layer%02d.weight" % i: torch.randn(mib * 1024 * 1024 // 4 // 64) for i in range(64)}
t0 = time.perf_counter()
f = open(path, "wb")
torch.save(sd, f)
f.flush()
t1 = time.perf_counter()
if fsync:
    os.fsync(f.fileno())
f.close()
t2 = time.perf_counter()
print("%.4f %.4f %.4f %.6f" % (t2 - t0, t1 - t0, t2 - t1, time.time()))
EOF

: >"$W/shim.t"; : >"$W/direct.t"; : >"$W/tmpfs.t"; : >"$W/drain.t"; : >"$W/cp.t"; : >"$W/cplow.t"
load0=$(cut -d' ' -f1-3 /proc/loadavg)
r=0
while [ $r -lt "$ROUNDS" ]; do
	case $((r % 3)) in
	0) order="shim direct tmpfs" ;;
	1) order="direct tmpfs shim" ;;
	*) order="tmpfs shim direct" ;;
	esac
	for what in $order; do
		case $what in
		shim)
			on 0 "$PY" "$W/save.py" "$mib" "$MOUNT/out/ck$r.pt" nofsync >>"$W/shim.t"
			"$DSTAGE" drain --wait --to "$ST" --job "$JOB" >/dev/null
			# from the close (wall clock, printed by save.py) to durable
			tail -1 "$W/shim.t" | awk -v e="$(date +%s.%N)" '{ printf "%.4f\n", e - $4 }' >>"$W/drain.t"
			on 1 rm "$MOUNT/out/ck$r.pt"
			;;
		direct)
			"$PY" "$W/save.py" "$mib" "$WS/direct.pt" fsync >>"$W/direct.t"
			cp "$WS/direct.pt" "$W/src.pt"
			rm -f "$WS/cp.pt" "$WS/direct.pt"
			sync
			t0=$(now)
			cp "$W/src.pt" "$WS/cp.pt" && sync "$WS/cp.pt"
			elapsed "$t0" >>"$W/cp.t"
			echo >>"$W/cp.t"
			rm -f "$WS/cp.pt"
			sync
			t0=$(now)
			nice -n 19 ionice -c 2 -n 7 sh -c 'cp "$0" "$1" && sync "$1"' "$W/src.pt" "$WS/cp.pt"
			elapsed "$t0" >>"$W/cplow.t"
			echo >>"$W/cplow.t"
			rm -f "$WS/cp.pt" "$W/src.pt"
			;;
		tmpfs)
			"$PY" "$W/save.py" "$mib" "$W/tmpfs.pt" nofsync >>"$W/tmpfs.t"
			rm -f "$W/tmpfs.pt"
			;;
		esac
	done
	r=$((r + 1))
done
# replicas: a second job, its service with --outputs-replicas 2, next to
# the first (idle services sleep); A B / B A rounds
stage_nodes "$WS/pack" "$ST" "$JOB2" 2 -q
DSTAGE_LOG=debug mpiexec.mpich -n 2 "$DSTAGE" serve --to "$ST" --job "$JOB2" --node-per-rank \
	--outputs out --drain-to "$WS/drain2" --drain-rate 0 --outputs-replicas 2 >"$W/svc2.log" 2>&1 &
svc2=$!
k=0
until [ -S "$JD2/1/osock" ] && [ -S "$JD2/0/osock" ] || [ $k -ge 300 ]; do sleep 0.1; k=$((k + 1)); done
: >"$W/rep1.t"; : >"$W/rep2.t"
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) = 0 ]; then order="1 2"; else order="2 1"; fi
	for n in $order; do
		if [ "$n" = 1 ]; then jd=$JD job=$JOB; else jd=$JD2 job=$JOB2; fi
		env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$jd" DSTAGE_NODE=0 DSTAGE_MOUNT="$MOUNT" DSTAGE_LOG=error \
			"$PY" "$W/save.py" "$mib" "$MOUNT/out/rp$r.pt" nofsync >>"$W/rep$n.t"
		"$DSTAGE" drain --wait --to "$ST" --job "$job" >/dev/null
		env LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$jd" DSTAGE_NODE=1 DSTAGE_MOUNT="$MOUNT" rm "$MOUNT/out/rp$r.pt"
		rm -f "$WS/drain/rp$r.pt" "$WS/drain2/rp$r.pt"
	done
	r=$((r + 1))
done
stop_svc2
load1=$(cut -d' ' -f1-3 /proc/loadavg)
col() { awk -v c="$1" '{ print $c }' "$2" | median; }
s=$(col 1 "$W/shim.t") d=$(col 1 "$W/direct.t") f=$(col 1 "$W/tmpfs.t")
sw=$(col 2 "$W/shim.t") dw=$(col 2 "$W/direct.t") fw=$(col 2 "$W/tmpfs.t")
sc=$(col 3 "$W/shim.t") dc=$(col 3 "$W/direct.t") fc=$(col 3 "$W/tmpfs.t")
dr=$(median <"$W/drain.t") c=$(median <"$W/cp.t") cl=$(median <"$W/cplow.t")
# the service's own account of each publish (debug lines of outputs.c)
pub=$(sed -n 's/.*published in \([0-9.]*\) s (sum \([0-9.]*\) s, namespace \([0-9.]*\) s).*/\1 \2 \3/p' "$W/svc.log")
pt=$(echo "$pub" | awk 'NF { print $1 }' | median)
ps=$(echo "$pub" | awk 'NF { print $2 }' | median)
pn=$(echo "$pub" | awk 'NF { print $3 }' | median)
crc=$(grep -c 'summed' "$W/svc.log" || :)
# the drain's own account: copy + fsync, the wait for the sum, the rename
dra=$(sed -n 's/.*drained .* in \([0-9.]*\) s (copy and fsync \([0-9.]*\) s, then waiting for its sum \([0-9.]*\) s, rename \([0-9.]*\) s).*/\1 \2 \3 \4/p' "$W/svc.log")
dt=$(echo "$dra" | awk 'NF { print $1 }' | median)
dcp=$(echo "$dra" | awk 'NF { print $2 }' | median)
dsw=$(echo "$dra" | awk 'NF { print $3 }' | median)
drn=$(echo "$dra" | awk 'NF { print $4 }' | median)
r1=$(col 1 "$W/rep1.t") r2=$(col 1 "$W/rep2.t") rc1=$(col 3 "$W/rep1.t") rc2=$(col 3 "$W/rep2.t")
# the replicated service's publishes: sum + copy to the replica, namespace
pub2=$(sed -n 's/.*published in \([0-9.]*\) s (sum \([0-9.]*\) s, namespace \([0-9.]*\) s).*/\1 \2 \3/p' "$W/svc2.log")
p2s=$(echo "$pub2" | awk 'NF { print $2 }' | median)
p2n=$(echo "$pub2" | awk 'NF { print $3 }' | median)
# ... and its parts (outrepl.c): the holder's sum, then the copy and the replica's check
rep2=$(sed -n 's/.*replicated on [0-9]* other node(s) in [0-9.]* s (sum \([0-9.]*\) s, copy and check \([0-9.]*\) s).*/\1 \2/p' "$W/svc2.log")
r2s=$(echo "$rep2" | awk 'NF { print $1 }' | median)
r2c=$(echo "$rep2" | awk 'NF { print $2 }' | median)
sums=$(sed -n 's/.*summed in [0-9.]* s, \([0-9.]*\) s after its close.*/\1/p' "$W/svc.log" | median)

row "torch.save of $mib MiB, training blocked: shim vs /var/tmp + fsync (s)" "$s" "$d" "$(ratio3 "$s" "$d")" "<= 0.3" "#15"
row "torch.save of $mib MiB, floor: /dev/shm without the shim vs /var/tmp + fsync (s)" "$f" "$d" "$(ratio3 "$f" "$d")" "-"
row "torch.save of $mib MiB, shim vs /dev/shm without the shim (s)" "$s" "$f" "$(ratio3 "$s" "$f")" "-"
row "torch.save of $mib MiB, close with --outputs-replicas 2 vs 1 (s)" "$rc2" "$rc1" "$(ratio3 "$rc2" "$rc1")" "-"
row "torch.save of $mib MiB, training blocked with --outputs-replicas 2 vs 1 (s)" "$r2" "$r1" "$(ratio3 "$r2" "$r1")" "-"
row "drain of $mib MiB after close vs cp + sync (s)" "$dr" "$c" "$(ratio3 "$dr" "$c")" "-"
row "drain of $mib MiB after close vs cp + sync at the drain's priority (s)" "$dr" "$cl" "$(ratio3 "$dr" "$cl")" "-"
note "outputs: bench/outputs.sh: torch.save of a $mib MiB state dict (64 tensors) through the shim to MOUNT/out, to /var/tmp with flush + fsync, and to /dev/shm without the shim (the floor); rotated order; the close through a second service with --outputs-replicas 2 vs the first (1 holder), interleaved A B / B A; $ROUNDS rounds, medians; 2 simulated nodes; load $load0 at the start, $load1 at the end."
{
	echo "# Write-once outputs: torch.save of a $mib MiB state dict ($(date -u '+%Y-%m-%d %H:%M UTC'), $ROUNDS rounds, rotated order, medians)"
	echo
	echo "Load average $load0 at the start, $load1 at the end (2 cores shared with other jobs)."
	echo
	echo "| training blocked (s) | total | torch.save's writes | close (+ fsync) | vs /var/tmp + fsync |"
	echo "| --- | --- | --- | --- | --- |"
	echo "| through the shim (MOUNT/out) | $s | $sw | $sc | $(ratio3 "$s" "$d") (goal <= 0.3) |"
	echo "| /dev/shm, no shim (the floor) | $f | $fw | $fc | $(ratio3 "$f" "$d") |"
	echo "| /var/tmp + fsync (the peer) | $d | $dw | $dc | 1 |"
	echo
	echo "The shim's close as the service counts it (medians of $(echo "$pub" | grep -c . || :) publishes): $pt s, of which summing the bytes $ps s and the namespace round trip (node 0 orders it, every node applies it) $pn s.  CRC-32C taken after the close: $crc files, median $sums s after the close."
	echo
	echo "| replicated outputs (interleaved, $ROUNDS rounds) | total | close | close vs 1 holder |"
	echo "| --- | --- | --- | --- |"
	echo "| --outputs-replicas 1 (the default) | $r1 | $rc1 | 1 |"
	echo "| --outputs-replicas 2 (close waits for a CRC-checked copy on the other node) | $r2 | $rc2 | $(ratio3 "$rc2" "$rc1") |"
	echo
	echo "The replicated close as the service counts it (medians of $(echo "$pub2" | grep -c . || :) publishes): the CRC-32C and the copy to the other node (sent over MPI, written and summed there, acknowledged) $p2s s (the holder's sum $r2s s, then the copy and the replica's check $r2c s), then the namespace round trip $p2n s."
	echo
	echo "The drain thread's own account (medians of $(echo "$dra" | grep -c . || :) files, at nice 19 / best-effort I/O 7): $dt s from the start of its copy to durable, of which copy with its CRC + fsync $dcp s, then waiting for the holder's sum $dsw s, rename + fsync of the directory $drn s; the rest of \"close to durable\" is the queue (the sum running meanwhile) and the round trip of drain --wait."
	echo
	echo "| drain | dstage | cp + sync | ratio | cp + sync, nice 19 + ionice 7 (the drain's priority) | ratio |"
	echo "| --- | --- | --- | --- | --- | --- |"
	echo "| close to durable on /var/tmp (s) | $dr | $c | $(ratio3 "$dr" "$c") | $cl | $(ratio3 "$dr" "$cl") |"
	echo "| throughput (MiB/s) | $(awk -v m="$mib" -v t="$dr" 'BEGIN { printf "%.0f", m / t }') | $(awk -v m="$mib" -v t="$c" 'BEGIN { printf "%.0f", m / t }') | | $(awk -v m="$mib" -v t="$cl" 'BEGIN { printf "%.0f", m / t }') | |"
	echo
	echo "raw (total, writes, close in s; the close's end, epoch s): shim $(tr '\n' ';' <"$W/shim.t") direct $(tr '\n' ';' <"$W/direct.t") replicas 1 $(tr '\n' ';' <"$W/rep1.t") replicas 2 $(tr '\n' ';' <"$W/rep2.t") tmpfs $(tr '\n' ';' <"$W/tmpfs.t") drain $(tr '\n' ' ' <"$W/drain.t"); cp $(tr '\n' ' ' <"$W/cp.t"); cp at low priority $(tr '\n' ' ' <"$W/cplow.t")"
} >"$RES/outputs.md"
cat "$RES/outputs.md"
