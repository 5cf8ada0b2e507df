#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/eab.sh: row 5.3 (an epoch read after its prefetch vs the same list
# on an all-local store), A/B side by side in one run: two builds of dstage
# or two service settings.
#   sh bench/eab.sh [--quick] [RESULTS_DIR]
# EAB_A, EAB_B: each arm's service environment (VAR=VALUE...; default: none);
# EAB_A_BUILD, EAB_B_BUILD: a build directory (bin/dstage,
# lib/libdstage-preload.so) for that arm (default: this tree's build/); each
# arm stages its own 2-node and 1-node stores with its own build.  Every
# round starts a fresh service per arm (rotated order), waits for epochs 1
# and 2 to be prefetched, then node 0's list of epoch 1 is read for SECS
# through the shim (store + epoch cache), then the same list on the arm's
# all-local 1-node store (no service); the ratio of the two rates is taken
# per round.  Medians over the rounds; the load average is printed.
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NS=1024 SECS=0.2; else NS=8192 SECS=0.5; fi
mkfiles "$W/src/s" $NS 131072
NEW_DSTAGE=$DSTAGE NEW_PRELOAD=$PRELOAD
arm_build() { # ARM: sets DSTAGE and PRELOAD for it
	if [ "$1" = a ]; then b=${EAB_A_BUILD:-}; else b=${EAB_B_BUILD:-}; fi
	if [ -n "$b" ]; then DSTAGE=$b/bin/dstage PRELOAD=$b/lib/libdstage-preload.so; else DSTAGE=$NEW_DSTAGE PRELOAD=$NEW_PRELOAD; fi
}
for arm in a b; do
	arm_build $arm
	"$DSTAGE" pack -q --no-fsync -p 8 "$W/src" "$WS/pack.$arm"
	stage_nodes "$WS/pack.$arm" "$W/st" e$arm 2 -q
	stage_nodes "$WS/pack.$arm" "$W/st" l$arm 1 -q
done
MNT=$(mount_prefix)
sval() { sed -n "s/^$3=//p" "$(jobdir "$W/st" e$1)/$2/serve.status"; }
prefetched() { # ARM NODE EPOCH
	pe=$(sval "$1" "$2" prefetch_epoch)
	[ -n "$pe" ] || return 1
	[ "$pe" -gt "$3" ] || { [ "$pe" = "$3" ] && [ "$(sval "$1" "$2" prefetch_done)" = "$(sval "$1" "$2" prefetch_total)" ]; }
}
wait_prefetched() {
	k=0
	until prefetched "$1" "$2" "$3"; do
		k=$((k + 1))
		[ $k -lt 1200 ] || { echo "bench: eab: node $2 never fetched epoch $3" >&2; exit 1; }
		sleep 0.02
	done
}
export UCX_MM_FIFO_SIZE="${UCX_MM_FIFO_SIZE:-1024}"
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) = 0 ]; then arms="a b"; else arms="b a"; fi
	for arm in $arms; do
		arm_build $arm
		if [ $arm = a ]; then bench_serve_start e$arm ${EAB_A:-} --seed 11; else bench_serve_start e$arm ${EAB_B:-} --seed 11; fi
		JD=$(jobdir "$W/st" e$arm) J1=$(jobdir "$W/st" l$arm)
		wait_prefetched $arm 0 1
		wait_prefetched $arm 1 1
		shim "$JD" 0 "$MNT" cat "$MNT/.dstage/epochs/1/all" >"$W/list"
		shim "$JD" 1 "$MNT" cat "$MNT/.dstage/epochs/1/all" >/dev/null
		wait_prefetched $arm 0 2
		wait_prefetched $arm 1 2
		cut -d' ' -f1 /proc/loadavg >>"$W/load"
		o=$(shim "$JD" 0 "$MNT" "$READER" -t $SECS read "$MNT" "$W/list" | awk '{ print $4 }')
		l=$(shim "$J1" 0 "$MNT" "$READER" -t $SECS read "$MNT" "$W/list" | awk '{ print $4 }')
		echo "$o $l" | awk '{ printf "%.0f %.0f %.4f\n", $1, $2, $1 / $2 }' >>"$W/$arm.r"
		bench_serve_stop e$arm
	done
	r=$((r + 1))
done
ld=$(median <"$W/load")
for arm in a b; do
	if [ $arm = a ]; then what="${EAB_A:-} ${EAB_A_BUILD:-build/}"; else what="${EAB_B:-} ${EAB_B_BUILD:-build/}"; fi
	rr=$(awk '{ print $3 }' "$W/$arm.r" | median)
	o=$(awk '{ print $1 }' "$W/$arm.r" | median) l=$(awk '{ print $2 }' "$W/$arm.r" | median)
	row "epoch read after prefetch vs all-local ($what), load $ld, per-round ratios $(awk '{ printf "%s ", $3 }' "$W/$arm.r")" \
		"$(fmt_rate "$o" files)" "all-local $(fmt_rate "$l" files)" "$rr" ">= 0.95"
done
