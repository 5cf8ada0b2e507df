#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/rlat.sh: remote-read latency, side by side in one run, A/B by a
# service setting: open+read+close of files that only node 1 holds, read from
# node 0 through the shim (bench/reader -L: every file timed on its own).
#   sh bench/rlat.sh [--quick] [RESULTS_DIR]
# RLAT_A, RLAT_B: the environment of the service in the two arms (default:
# DSTAGE_SERVE_DIRECT=0, the read fetched by the service's main thread, vs
# DSTAGE_SERVE_DIRECT=1, by its socket thread: shuffle/direct.c).  Every
# round starts a fresh service per arm, in rotated order; medians over the
# rounds of each round's median, 99th and 10th percentile; the load average is
# printed with the figures (the box is shared).
set -eu
. "$(dirname "$0")/benchlib.sh"
A=${RLAT_A:-DSTAGE_SERVE_DIRECT=0} B=${RLAT_B:-DSTAGE_SERVE_DIRECT=1}
if [ $QUICK = 1 ]; then NS=256 SECS=0.3; else NS=1024 SECS=1; fi
mkfiles "$W/src/s" $NS 131072
mkfiles "$W/s4k" 128 4096
i=0
for f in "$W"/s4k/*; do
	mv "$f" "$W/src/s/$(printf f%06ds $((i * NS / 128)))"
	i=$((i + 1))
done
"$DSTAGE" pack -q --no-fsync -p 8 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" rl 2 -q
JD=$(jobdir "$W/st" rl)
MNT=$(mount_prefix)
(cd "$W/src" && find s -type f) >"$W/all"
bench_holders "$JD" "$W/all" >"$W/holders"
awk '$2 == "1" && $1 ~ /s$/ { print $1 }' "$W/holders" >"$W/r4k"
awk '$2 == "1" && $1 ~ /[0-9]$/ { print $1 }' "$W/holders" | head -256 >"$W/r128k"
serve_start() { bench_serve_start rl "$@" --locality 1; }
serve_stop() { bench_serve_stop rl; }
load() { cut -d' ' -f1 /proc/loadavg; }
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) = 0 ]; then arms="a b"; else arms="b a"; fi
	for arm in $arms; do
		if [ $arm = a ]; then serve_start $A; else serve_start $B; fi
		sleep 0.3
		load >>"$W/load"
		for f in r4k r128k; do
			shim "$JD" 0 "$MNT" "$READER" -L -t $SECS read "$MNT" "$W/$f" | awk '{ print $6, $7, $8 }' >>"$W/$arm.$f"
		done
		serve_stop
	done
	r=$((r + 1))
done
col() { awk -v c="$2" '{ print $c * 1e6 }' "$1" | median; }
ld=$(median <"$W/load")
for f in r4k r128k; do
	am=$(col "$W/a.$f" 1) bm=$(col "$W/b.$f" 1) ap=$(col "$W/a.$f" 2) bp=$(col "$W/b.$f" 2)
	a10=$(col "$W/a.$f" 3) b10=$(col "$W/b.$f" 3)
	row "remote read ($f), median us: $B vs $A (load $ld)" "$bm us (p99 $bp, p10 $b10)" "$am us (p99 $ap, p10 $a10)" "$(ratio "$bm" "$am")" "-"
done
