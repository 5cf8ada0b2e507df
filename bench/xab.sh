#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/xab.sh: the epoch exchange, A/B by a service setting, side by side in
# one run with MPI_Alltoallv of the same bytes (the peer of bench/exchange.sh).
#   sh bench/xab.sh [--quick] [RESULTS_DIR]
# XAB_A, XAB_B: the environment of the service in the two arms (default:
# DSTAGE_SERVE_DIRECT=0 vs =1).  Every round starts a fresh service per arm
# (rotated order) and times EPOCHS epochs of it (both nodes announce epoch
# r, both fetch r+1: serve.status fetch_s, the slower node), then one
# MPI_Alltoallv of the bytes moved; medians over every epoch of an arm, the
# slowest epoch of each arm, the service CPU seconds per epoch and node, and
# the load average.
set -eu
. "$(dirname "$0")/benchlib.sh"
A=${XAB_A:-DSTAGE_SERVE_DIRECT=0} B=${XAB_B:-DSTAGE_SERVE_DIRECT=1}
EPOCHS=${EPOCHS:-3}
if [ $QUICK = 1 ]; then NS=1024; else NS=8192; fi
mkfiles "$W/src/s" $NS 131072
"$DSTAGE" pack -q --no-fsync -p 8 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" xab 2 -q
JD=$(jobdir "$W/st" xab)
MNT=$(mount_prefix)
serve_start() { bench_serve_start xab "$@" --seed 11; }
serve_stop() { bench_serve_stop xab; }
sval() { sed -n "s/^$2=//p" "$JD/$1/serve.status"; }
svc_cpu() { bench_svc_cpu xab; }
prefetched() {
	pe=$(sval "$1" prefetch_epoch)
	[ -n "$pe" ] || return 1
	[ "$pe" -gt "$2" ] || { [ "$pe" = "$2" ] && [ "$(sval "$1" prefetch_done)" = "$(sval "$1" prefetch_total)" ]; }
}
wait_prefetched() {
	k=0
	until prefetched "$1" "$2"; do
		k=$((k + 1))
		[ $k -lt 1200 ] || { echo "bench: xab: node $1 never fetched epoch $2" >&2; exit 1; }
		sleep 0.02
	done
}
announce() { shim "$JD" "$1" "$MNT" cat "$MNT/.dstage/epochs/$2/all" >/dev/null; }
efield() { sed -n "s/^epoch\.$2=//p" "$JD/$1/serve.status" | tr ' ' '\n' | sed -n "s/^$3=//p"; }
export UCX_MM_FIFO_SIZE="${UCX_MM_FIFO_SIZE:-1024}"
r=0
while [ $r -lt "$ROUNDS" ]; do
	if [ $((r % 2)) = 0 ]; then arms="a b"; else arms="b a"; fi
	for arm in $arms; do
		if [ $arm = a ]; then serve_start $A; else serve_start $B; fi
		wait_prefetched 0 1
		wait_prefetched 1 1
		e=1
		while [ $e -le $EPOCHS ]; do
			cut -d' ' -f1 /proc/loadavg >>"$W/load"
			c0=$(svc_cpu)
			announce 0 $e
			announce 1 $e
			wait_prefetched 0 $((e + 1))
			wait_prefetched 1 $((e + 1))
			awk -v a="$c0" -v b="$(svc_cpu)" 'BEGIN { printf "%.4f\n", (b - a) / 2 }' >>"$W/$arm.cpu"
			k=0
			until [ -n "$(efield 0 $((e + 1)) fetch_s)" ] && [ -n "$(efield 1 $((e + 1)) fetch_s)" ]; do
				k=$((k + 1)); [ $k -lt 100 ] || exit 1; sleep 0.02
			done
			b0=$(efield 0 $((e + 1)) moved_bytes) b1=$(efield 1 $((e + 1)) moved_bytes)
			t0=$(efield 0 $((e + 1)) fetch_s) t1=$(efield 1 $((e + 1)) fetch_s)
			[ -z "${XAB_TRACE:-}" ] || echo "$arm e$e n0 t0=$(efield 0 $((e + 1)) t0) t1=$(efield 0 $((e + 1)) t1) n1 t0=$(efield 1 $((e + 1)) t0) t1=$(efield 1 $((e + 1)) t1)" >>"$W/trace"
			awk -v a="$b0" -v b="$b1" -v s="$t0" -v t="$t1" 'BEGIN { m = s > t ? s : t; if (m < 0.001) m = 0.001; printf "%.0f %.6f %.1f\n", (a + b) / 2, m, (a + b) / 2 / m }' >>"$W/$arm.x"
			# main's CPU from the first get to the last, mean of the nodes
			awk -v a="$(efield 0 $((e + 1)) fetch_cpu_s)" -v b="$(efield 1 $((e + 1)) fetch_cpu_s)" 'BEGIN { printf "%.6f\n", (a + b) / 2 }' >>"$W/$arm.fcpu"
			e=$((e + 1))
		done
		serve_stop
	done
	bytes=$(awk '{ b = $1 } END { printf "%.0f", b / 131072 * 131072 }' "$W/a.x")
	mpi_bench "$ds_mpilib" 2 alltoallv "$bytes" 131072 1 | awk -v b="$bytes" '{ print b, $2, b / $2 }' >>"$W/a2a"
	r=$((r + 1))
done
ld=$(median <"$W/load")
ar=$(awk '{ print $3 }' "$W/a2a" | median)
for arm in a b; do
	xr=$(awk '{ print $3 }' "$W/$arm.x" | median)
	xmin=$(awk '{ print $3 }' "$W/$arm.x" | sort -g | head -1)
	cpu=$(median <"$W/$arm.cpu") fcpu=$(median <"$W/$arm.fcpu")
	if [ $arm = a ]; then env=$A; else env=$B; fi
	row "exchange ($env), load $ld, $(wc -l <"$W/$arm.x") epochs: median; slowest" "$(fmt_bps "$xr") ($(ratio "$xr" "$ar")x); slowest $(fmt_bps "$xmin") ($(ratio "$xmin" "$ar")x); CPU $cpu s/epoch, main from first to last get $fcpu s" "Alltoallv $(fmt_bps "$ar")" "$(ratio "$xr" "$ar")" "-"
done
