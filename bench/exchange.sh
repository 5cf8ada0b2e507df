#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/exchange.sh: the epoch shuffle and remote reads (row 5), run by
# bench/run.sh when the service's own bench/shuffle.sh is not there.
#
# A training set of 128 KiB samples (1 GiB, QUICK: 128 MiB) and 256 files of
# 4 KiB, packed, staged on 2 simulated nodes, served with dstage serve:
#  1. epoch exchange: both nodes' readers announce epoch e (they open their
#     lists), both services fetch epoch e+1 with MPI_Get; the time and bytes
#     come from serve.status (fetch_s, moved_bytes).  Peers, interleaved: one
#     MPI_Alltoallv moving the same bytes per rank in 128 KiB pieces (2
#     ranks), and plain MPI_Get of the same bytes in 128 KiB gets: one rank
#     from an MPI_Win_allocate window (the RMA ceiling of this MPI on this
#     machine), and both ranks at once as the service gets (MPI_Win_create
#     over a tmpfs file, MPI_THREAD_MULTIPLE, into a tmpfs mapping).
#  2. epoch read with prefetch: once epoch e's prefetch is done, a C reader
#     on node 0 reads its list through the shim (store + epoch cache)
#     repeatedly for SECS; peer: the same list read on a 1-node store of the
#     same pack (all local).  Also: the first pass right after the list is
#     opened, while the service fetches e+1 beside it.
#  3. remote-read latency: with --locality 1 (nothing prefetched), an
#     unmodified reader on node 0 opens and reads files that only node 1
#     holds (Unix socket to its service, MPI_Get from node 1's window) vs
#     files node 0 holds.
#   sh bench/exchange.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NS=1024 SECS=0.2; else NS=8192 SECS=0.5; fi
mkfiles "$W/src/s128k" $NS 131072
# the 4 KiB files interleaved with the samples (s128k/fNNNNNNs), so that
# every partition, and so every node, holds some
mkfiles "$W/s4k" 256 4096
i=0
for f in "$W"/s4k/*; do
	mv "$f" "$W/src/s128k/$(printf f%06ds $((i * NS / 256)))"
	i=$((i + 1))
done
"$DSTAGE" pack -q --no-fsync -p 8 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" ex 2 -q
stage_nodes "$WS/pack" "$W/st" ex1 1 -q
JD=$(jobdir "$W/st" ex)
J1=$(jobdir "$W/st" ex1)
MNT=$(mount_prefix)
# who holds what: before any service runs, a reader on node 0 can read
# exactly the files node 0 holds (the others fail with EIO at once)
(cd "$W/src" && find s128k -type f) >"$W/all"
bench_holders "$JD" "$W/all" >"$W/holders"
say "$NS samples of 128 KiB on 2 nodes; $ROUNDS rounds"

serve_start() { bench_serve_start ex "$@"; }
serve_stop() { bench_serve_stop ex; }
sval() { sed -n "s/^$2=//p" "$JD/$1/serve.status"; }
svc_cpu() { bench_svc_cpu ex; }
# stats counters of node K (struct ds_stats, 8-byte words; see t/lib-serve.sh)
stat_val() {
	case $2 in remote_reads) w=7 ;; cache_reads) w=5 ;; stalls) w=9 ;; esac
	od -An -t u8 -j $((w * 8)) -N 8 "$JD/$1/stats" | tr -d ' '
}
prefetched() { # NODE EPOCH: the service has fetched all of EPOCH
	pe=$(sval "$1" prefetch_epoch)
	[ -n "$pe" ] || return 1
	[ "$pe" -gt "$2" ] || { [ "$pe" = "$2" ] && [ "$(sval "$1" prefetch_done)" = "$(sval "$1" prefetch_total)" ]; }
}
wait_prefetched() {
	k=0
	until prefetched "$1" "$2"; do
		k=$((k + 1))
		[ $k -lt 1200 ] || { echo "bench: exchange: node $1 never fetched epoch $2" >&2; cat "$W/serve.log" >&2; exit 1; }
		sleep 0.05
	done
}
announce() { shim "$JD" "$1" "$MNT" cat "$MNT/.dstage/epochs/$2/all" >/dev/null; }
# epoch.E=... field F of node K's serve.status
efield() { sed -n "s/^epoch\.$2=//p" "$JD/$1/serve.status" | tr ' ' '\n' | sed -n "s/^$3=//p"; }

# ---- 1. the exchange ---------------------------------------------------------
serve_start --seed 11
wait_prefetched 0 1
wait_prefetched 1 1
r=1
while [ $r -le "$ROUNDS" ]; do
	c0=$(svc_cpu)
	announce 0 $r
	announce 1 $r
	e=$((r + 1))
	wait_prefetched 0 $e
	wait_prefetched 1 $e
	# CPU seconds of one node's service for this epoch's exchange (both
	# ranks over 2), polled every 50 ms: an upper bound
	awk -v a="$c0" -v b="$(svc_cpu)" 'BEGIN { printf "%.4f\n", (b - a) / 2 }' >>"$W/x.cpu"
	k=0
	until [ -n "$(efield 0 $e fetch_s)" ] && [ -n "$(efield 1 $e fetch_s)" ]; do
		k=$((k + 1)); [ $k -lt 100 ] || exit 1; sleep 0.05
	done
	b0=$(efield 0 $e moved_bytes) b1=$(efield 1 $e moved_bytes)
	t0=$(efield 0 $e fetch_s) t1=$(efield 1 $e fetch_s)
	awk -v a="$b0" -v b="$b1" -v s="$t0" -v t="$t1" 'BEGIN { m = s > t ? s : t; printf "%.0f %.6f %.1f\n", (a + b) / 2, m, (a + b) / 2 / m }' >>"$W/x.rma"
	# main's CPU seconds from the first get to the last (the copies, on one
	# host), the mean of the two nodes
	awk -v a="$(efield 0 $e fetch_cpu_s)" -v b="$(efield 1 $e fetch_cpu_s)" 'BEGIN { printf "%.6f\n", (a + b) / 2 }' >>"$W/x.fcpu"
	bytes=$(awk -v a="$b0" -v b="$b1" 'BEGIN { printf "%.0f", (a + b) / 2 / 131072 * 131072 }')
	# the peers run with the UCX setting dstage serve gives itself
	export UCX_MM_FIFO_SIZE="${UCX_MM_FIFO_SIZE:-1024}"
	# every MPI built here (BENCH_MPIS), in an order rotated each round
	mpis=$BENCH_MPIS
	[ $((r % 2)) = 0 ] && mpis=$(echo "$BENCH_MPIS" | tr ' ' '\n' | sort -r | tr '\n' ' ')
	for m in $mpis; do
		mpi_bench $m 2 alltoallv "$bytes" 131072 1 | awk -v b="$bytes" '{ print b, $2, b / $2, $4 }' >>"$W/x.a2a.$m"
		mpi_bench $m 2 get "$bytes" 1 131072 | awk -v b="$bytes" '{ print b, $3, b / $3 }' >>"$W/x.get.$m"
		[ $m = "$ds_mpilib" ] || continue
		MPIBENCH_WIN=create MPIBENCH_MT=1 MPIBENCH_BOTH=1 MPIBENCH_DST=shm \
			mpi_bench $m 2 get "$bytes" 1 131072 | awk -v b="$bytes" '{ print b, $3, b / $3, $4 }' >>"$W/x.sget"
	done
	r=$((r + 1))
done

# ---- 2. reading an epoch with prefetch vs all local ----------------------------
e0=$((ROUNDS + 1))
r=0
while [ $r -lt "$ROUNDS" ]; do
	e=$((e0 + r))
	wait_prefetched 0 $e
	shim "$JD" 0 "$MNT" cat "$MNT/.dstage/epochs/$e/all" >"$W/list.$e"
	# first pass: the service fetches e+1 beside it
	shim "$JD" 0 "$MNT" "$READER" read "$MNT" "$W/list.$e" | awk '{ print $4, $5 }' >>"$W/o.first"
	"$READER" read "$MNT" "$W/list.$e" >/dev/null 2>&1 || :
	shim "$J1" 0 "$MNT" "$READER" read "$MNT" "$W/list.$e" | awk '{ print $4, $5 }' >>"$W/l.first"
	wait_prefetched 0 $((e + 1))
	rr0=$(stat_val 0 remote_reads) st0=$(stat_val 0 stalls)
	shim "$JD" 0 "$MNT" "$READER" -t $SECS read "$MNT" "$W/list.$e" | awk '{ print $4, $5 }' >>"$W/o.read"
	shim "$J1" 0 "$MNT" "$READER" -t $SECS read "$MNT" "$W/list.$e" | awk '{ print $4, $5 }' >>"$W/l.read"
	rr1=$(stat_val 0 remote_reads) st1=$(stat_val 0 stalls)
	echo "$((rr1 - rr0)) $((st1 - st0))" >>"$W/o.remote"
	r=$((r + 1))
done
serve_stop

# ---- 3. remote reads ---------------------------------------------------------
awk '$2 == "1" && $1 ~ /s$/ { print $1 }' "$W/holders" >"$W/r4k"
awk '$2 == "0" && $1 ~ /s$/ { print $1 }' "$W/holders" >"$W/l4k"
awk '$2 == "1" && $1 ~ /[0-9]$/ { print $1 }' "$W/holders" | head -256 >"$W/r128k"
awk '$2 == "0" && $1 ~ /[0-9]$/ { print $1 }' "$W/holders" | head -256 >"$W/l128k"
for f in r4k l4k r128k l128k; do
	[ -s "$W/$f" ] || { echo "bench: exchange: no file in $f (placement?)" >&2; exit 1; }
done
serve_start --seed 11 --locality 1
# an idle service: CPU over 3 s (both ranks, as a share of one core each)
sleep 1
c0=$(svc_cpu)
sleep 3
idle=$(awk -v a="$c0" -v b="$(svc_cpu)" 'BEGIN { printf "%.3f", (b - a) / 3 / 2 * 100 }')
r=0
rr0=$(stat_val 0 remote_reads)
while [ $r -lt "$ROUNDS" ]; do
	for f in r4k l4k r128k l128k; do
		# -L: every open+read+close timed: fields 6, 7 are its median and p99
		shim "$JD" 0 "$MNT" "$READER" -L -t $SECS read "$MNT" "$W/$f" | awk '{ print $4, $5, $6, $7 }' >>"$W/lat.$f"
	done
	r=$((r + 1))
done
rr1=$(stat_val 0 remote_reads)
serve_stop

# ---- the rows ------------------------------------------------------------------
col() { awk -v c="$2" '{ print $c }' "$1" | median; }
xb=$(col "$W/x.rma" 1) xr=$(col "$W/x.rma" 3) xt=$(col "$W/x.rma" 2)
# the peer: the faster median MPI_Alltoallv of the MPIs (issue 30); the
# MPI_Get ceiling: this build's MPI
ar=0 at=- am=
for m in $BENCH_MPIS; do
	r_=$(col "$W/x.a2a.$m" 3)
	if awk -v a="$r_" -v b="$ar" 'BEGIN { exit !(a > b) }'; then ar=$r_ at=$(col "$W/x.a2a.$m" 2) am=$m; fi
	a2a_all="${a2a_all:-}${a2a_all:+, }$m $(fmt_bps "$r_")"
done
gr=$(col "$W/x.get.$ds_mpilib" 3) gt=$(col "$W/x.get.$ds_mpilib" 2)
case $ds_mpilib in
mpich) mname="MPICH $(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p')" g1=">= 1.0" g2=">= 0.5" gs="#13" ;;
openmpi) mname="Open MPI $(ompi_info --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p')${OMPI_MCA_osc:+ osc=$OMPI_MCA_osc}" g1=">= 1.2" g2=">= 0.8" gs="#30" ;;
esac
mib=$(awk -v b="$xb" 'BEGIN { printf "%.0f", b / 1048576 }')
xc=$(median <"$W/x.cpu")
# the slowest of the rounds against the median Alltoallv
xmin=$(awk '{ print $3 }' "$W/x.rma" | sort -g | head -1)
row "epoch exchange ($mname), 2 nodes, $mib MiB per node in 128 KiB samples: dstage serve (MPI_Get) vs the faster MPI_Alltoallv ($a2a_all)" \
	"$(fmt_bps "$xr") per node ($(fmt_s "$xt"); service CPU $(printf %.3f "$xc") s per epoch)" "Alltoallv $am $(fmt_bps "$ar") ($(fmt_s "$at"))" "$(ratio "$xr" "$ar")" "$g1" "$gs"
row "epoch exchange ($mname), the slowest of $ROUNDS rounds vs the median MPI_Alltoallv" \
	"$(fmt_bps "$xmin") per node" "Alltoallv $am $(fmt_bps "$ar")" "$(ratio "$xmin" "$ar")" "$g2" "$gs"
row "epoch exchange ($mname) vs plain MPI_Get of the same bytes in 128 KiB gets (the RMA ceiling here)" \
	"$(fmt_bps "$xr") per node" "MPI_Get $(fmt_bps "$gr") ($(fmt_s "$gt"))" "$(ratio "$xr" "$gr")" "-"
# the same gets as the service makes them: what is left of the gap is the service's own
sr=$(col "$W/x.sget" 3) st=$(col "$W/x.sget" 2) sc=$(col "$W/x.sget" 4)
xf=$(median <"$W/x.fcpu") ac=$(col "$W/x.a2a.$am" 4)
row "epoch exchange ($mname) vs plain MPI_Get as the service gets (MPI_Win_create over tmpfs, both ranks at once, MPI_THREAD_MULTIPLE, into tmpfs)" \
	"$(fmt_bps "$xr") per node" "MPI_Get $(fmt_bps "$sr") ($(fmt_s "$st"))" "$(ratio "$xr" "$sr")" "-"
row "CPU seconds per node and epoch for the bytes: the service's main thread from first to last get vs those plain gets vs one rank's MPI_Alltoallv ($am)" \
	"$(printf %.4f "$xf") s" "gets $(printf %.4f "$sc") s, Alltoallv $(printf %.4f "$ac") s" "$(ratio "$xf" "$sc")" "-"
of=$(col "$W/o.read" 1) ob=$(col "$W/o.read" 2) lf=$(col "$W/l.read" 1) lb=$(col "$W/l.read" 2)
row "epoch read after prefetch (128 KiB samples, node 0's list, cache + store) vs all-local store" \
	"$(fmt_rate "$of" files) ($(fmt_bps "$ob"))" "all-local $(fmt_rate "$lf" files) ($(fmt_bps "$lb"))" "$(ratio "$of" "$lf")" ">= 0.95" "#5"
of1=$(col "$W/o.first" 1) lf1=$(col "$W/l.first" 1)
row "epoch read, first pass, while the next epoch is fetched beside it (2 cores shared)" \
	"$(fmt_rate "$of1" files)" "all-local $(fmt_rate "$lf1" files)" "$(ratio "$of1" "$lf1")" "-"
for s in 4k 128k; do
	rb=$(col "$W/lat.r$s" 2)
	rm=$(col "$W/lat.r$s" 3) lm=$(col "$W/lat.l$s" 3) rp=$(col "$W/lat.r$s" 4) lp=$(col "$W/lat.l$s" 4)
	case $s in 4k) g=25 ;; *) g=60 ;; esac
	us=$(awk -v v="$rm" 'BEGIN { printf "%.1f", v * 1e6 }') pus=$(awk -v v="$rp" 'BEGIN { printf "%.1f", v * 1e6 }')
	row "remote read of a $(echo $s | sed 's/k/ KiB/') file (open+read+close via the node service), median us" \
		"$(fmt_s "$rm") per file ($(fmt_bps "$rb"))" "local $(fmt_s "$lm")" "$us" "<= $g" "#13"
	row "remote read of a $(echo $s | sed 's/k/ KiB/') file, 99th percentile us" \
		"$(fmt_s "$rp")" "local $(fmt_s "$lp")" "$pus" "<= 200" "#13"
done
row "an idle service (locality 1, no reader), % of a core per node" "$idle%" "-" "$idle" "<= 1" "#13"
remote=$(awk '{ s += $1 } END { print s }' "$W/o.remote") stalls=$(awk '{ s += $2 } END { print s }' "$W/o.remote")
{
	echo "exchange_bytes_per_node $xb"
	echo "exchange_rate $xr"
	echo "alltoallv_rate $ar"
	echo "get_rate $gr"
	echo "service_get_rate $sr"
	echo "exchange_fetch_cpu $xf"
	echo "remote_latency_4k $(col "$W/lat.r4k" 3)"
} >"$RES/exchange.dat"
note "Exchange: $NS samples of 128 KiB + 256 of 4 KiB, 2 simulated nodes, seed 11, global shuffle; per round both nodes open their epoch-r list and both services fetch epoch r+1 (figures from serve.status: moved_bytes, fetch_s, the slower node's time); the service's CPU seconds per epoch and node from /proc (both ranks' threads, from the announcement to the end of the prefetch, over 2); then one MPI_Alltoallv and one run of 128 KiB MPI_Gets of the same bytes per rank (2 ranks, fresh processes and buffers, as the service fetches into a fresh epoch cache; UCX_MM_FIFO_SIZE=1024, as dstage serve sets for itself), and, for this build's MPI, the same gets made as the service makes them (bench/mpibench.c with MPIBENCH_WIN=create MPIBENCH_MT=1 MPIBENCH_BOTH=1 MPIBENCH_DST=shm: both ranks at once, the slower's time); CPU seconds: the service's main thread from its first get to its last (serve.status fetch_cpu_s, mean of the two nodes), the getting thread of those plain gets, one rank of the Alltoallv (its waiting included).  Epoch reads: after the prefetch of e (and of e+1) is done, node 0's list of e read repeatedly for ${SECS}s through the shim; the shim's counters saw $remote remote reads and $stalls stalls during these reads.  Remote reads: serve --locality 1 (no prefetch), $(wc -l <"$W/r4k") 4 KiB and $(wc -l <"$W/r128k") 128 KiB files held only by node 1, read from node 0 ($((rr1 - rr0)) remote reads counted), every open+read+close timed on its own (bench/reader -L): medians over the rounds of each round's median and 99th percentile; the idle figure is the CPU time of both service ranks over 3 s with no reader, per rank.  Medians of $ROUNDS rounds."
