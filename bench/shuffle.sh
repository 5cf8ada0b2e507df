#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/shuffle.sh: the node service against its peers, side by side, A/B
# interleaved, medians of ROUNDS (not part of `make test`).
#
#   sh bench/shuffle.sh [--size MiB] [--rounds N] [--quick]
#
#  1. epoch exchange: `dstage serve` on 2 simulated nodes fetches the remote
#     part of epochs 0 and 1 (MPI_Get into the epoch cache, 128 KiB samples,
#     SIZE MiB of data in all) vs MPI_Alltoallv moving the same bytes per
#     node (bench/mpi-a2a.c).  Rate = bytes moved by both nodes / time
#     from the first fetch's start to the last one's end (serve.status).
#  2. remote reads through the service (t/helpers/serve-read, a C reader on
#     the socket protocol) vs reads of files held locally, for 4 KiB and
#     128 KiB files: latency (1 reader) and throughput (4 readers).
#  3. epoch 2+ reads: a reader following its epoch list, remote samples
#     from the epoch cache, vs the same reader on an all-local run
#     (--locality 1, nothing moves): goal >= 0.95x.
# Prints a Markdown table.  Needs ~4x SIZE of free /dev/shm.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
B="$top/build/bin/dstage"
T="$top/build/t"
SIZE=512
ROUNDS=5
while [ $# -gt 0 ]; do
	case $1 in
	--size) SIZE=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--quick) SIZE=128; ROUNDS=3 ;;
	*) echo "usage: sh bench/shuffle.sh [--size MiB] [--rounds N] [--quick]" >&2; exit 2 ;;
	esac
	shift
done
for x in "$B" "$T/mkstore" "$T/serve-read"; do
	[ -x "$x" ] || { echo "bench/shuffle.sh: $x not built (run make)" >&2; exit 1; }
done
PY=/usr/bin/python3
W=$(mktemp -d /dev/shm/dstage-bench-shuffle.XXXXXX)
# run private copies: a rebuild in the tree during the run must not matter
mkdir -p "$W/bin"
cp "$B" "$T/mkstore" "$T/serve-read" "$W/bin/"
B="$W/bin/dstage"
T="$W/bin"
# the service sets this itself (shuffle/serve.c); the peer gets the same
export UCX_MM_FIFO_SIZE=${UCX_MM_FIFO_SIZE:-1024}
SERVE=
cleanup() {
	[ -n "$SERVE" ] && kill "$SERVE" 2>/dev/null && wait "$SERVE" 2>/dev/null
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
# the Alltoallv peer, with the same MPI_Finalize workaround as dstage
mpicc.mpich -O2 -Wall -Wextra -o "$W/bin/mpi-a2a" "$top/bench/mpi-a2a.c" "$top/mpi/ucx_close.c"
export DSTAGE_LOG=warn

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

# mkdata DIR COUNT BYTES: COUNT random files of BYTES in 8 classes
mkdata() {
	"$PY" - "$1" "$2" "$3" <<'EOF'
import os, sys
d, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    c = "%s/train/c%d" % (d, i % 8)
    os.makedirs(c, exist_ok=True)
    with open("%s/s%06d.bin" % (c, i), "wb") as f:
        f.write(os.urandom(size))
EOF
}

echo "bench/shuffle.sh: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); data in $W" >&2
nbig=$((SIZE * 8))    # 128 KiB samples
mkdata "$W/big" $nbig 131072
mkdata "$W/small" 8192 4096
# equal sizes, 4 partitions per node: count-balanced, so --locality 1 moves nothing
"$T/mkstore" -N 2 -p 8 -j big "$W/big" "$W/st" >/dev/null
"$T/mkstore" -N 2 -p 8 -j loc "$W/big" "$W/st" >/dev/null
"$T/mkstore" -N 2 -p 8 -j small "$W/small" "$W/st" >/dev/null
rm -rf "$W/big" "$W/small"
U=$(id -u)

serve() { # JOB [options]
	job=$1
	shift
	rm -f "$W/st/dstage.$U.$job"/*/serve.status
	mpiexec.mpich -n 2 "$B" serve --to "$W/st" --job "$job" --node-per-rank "$@" >"$W/serve.$job.log" 2>&1 &
	SERVE=$!
	k=0
	until grep -qs '^state=running' "$W/st/dstage.$U.$job/0/serve.status" &&
		grep -qs '^state=running' "$W/st/dstage.$U.$job/1/serve.status"; do
		k=$((k + 1))
		[ $k -lt 600 ] || { echo "serve did not start:" >&2; cat "$W/serve.$job.log" >&2; exit 1; }
		sleep 0.1
	done
}
unserve() {
	"$B" stop --to "$W/st" --job "$1" >/dev/null
	wait "$SERVE" || true
	SERVE=
}
# epoch_done JOB E: both nodes have fetched epoch E
epoch_done() {
	grep -qs "^epoch\.$2=" "$W/st/dstage.$U.$1/0/serve.status" &&
		grep -qs "^epoch\.$2=" "$W/st/dstage.$U.$1/1/serve.status"
}
wait_epoch() {
	k=0
	until epoch_done "$1" "$2"; do
		k=$((k + 1))
		[ $k -lt 1200 ] || { echo "epoch $2 of $1 never fetched" >&2; exit 1; }
		sleep 0.05
	done
}
# field JOB NODE E KEY
field() { sed -n "s/^epoch\.$3=.* $4=\([^ ]*\).*/\1/p" "$W/st/dstage.$U.$1/$2/serve.status"; }

# ---- 1. epoch exchange ------------------------------------------------------
: >"$W/x.rma"
: >"$W/x.a2a"
r=0
while [ $r -lt "$ROUNDS" ]; do
	# A: the service: epochs 0 and 1 are fetched right after start
	serve big
	wait_epoch big 1
	bytes=0
	for k in 0 1; do
		for e in 0 1; do
			bytes=$((bytes + $(field big $k $e moved_bytes)))
		done
	done
	t0=$( (field big 0 0 t0; field big 1 0 t0) | sort -g | head -1)
	t1=$( (field big 0 1 t1; field big 1 1 t1) | sort -g | tail -1)
	rma=$(awk "BEGIN { print $bytes / ($t1 - $t0) / 1e9 }")
	# what each node received, per epoch, for the Alltoallv
	r00=$(field big 0 0 moved_bytes) r10=$(field big 1 0 moved_bytes)
	r01=$(field big 0 1 moved_bytes) r11=$(field big 1 1 moved_bytes)
	unserve big
	# B: MPI_Alltoallv of the same bytes, one call per epoch
	ta=$(mpiexec.mpich -n 2 "$T/mpi-a2a" 1 "$r00" "$r10" | awk '{ print $2 }')
	tb=$(mpiexec.mpich -n 2 "$T/mpi-a2a" 1 "$r01" "$r11" | awk '{ print $2 }')
	a2a=$(awk "BEGIN { print $bytes / ($ta + $tb) / 1e9 }")
	echo "$rma" >>"$W/x.rma"
	echo "$a2a" >>"$W/x.a2a"
	echo "round $r: exchange $(awk "BEGIN { printf \"%.0f\", $bytes / 1048576 }") MiB: RMA $rma GB/s, Alltoallv $a2a GB/s" >&2
	r=$((r + 1))
done

# ---- 2. remote vs local reads -------------------------------------------------
# rate JOB NODE THREADS -L|-R: files/s and bytes/s of one pass over them
readrate() {
	"$T/serve-read" -a "$4" -t "$3" -r "$5" "$W/st/dstage.$U.$1" "$2" |
		sed 's/.*files=\([0-9]*\) .*bytes=\([0-9]*\) .*seconds=\([0-9.]*\)/\1 \2 \3/'
}
for job in small big; do
	serve "$job"
	reps=1
	[ "$job" = small ] && reps=4
	for what in lat thr; do
		: >"$W/r.$job.$what.L"
		: >"$W/r.$job.$what.R"
	done
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		for side in -R -L; do
			set -- $(readrate "$job" 0 1 "$side" "$reps")
			awk "BEGIN { print $3 / $1 * 1e6 }" >>"$W/r.$job.lat.${side#-}"
			set -- $(readrate "$job" 0 4 "$side" "$reps")
			awk "BEGIN { print $2 / $3 / 1e9 }" >>"$W/r.$job.thr.${side#-}"
		done
		r=$((r + 1))
	done
	unserve "$job"
done

# ---- 3. epoch 2+ reads: cache vs all-local ------------------------------------
serve big --seed 5
SB=$SERVE
serve loc --seed 5 --locality 1
SL=$SERVE
: >"$W/e.cache"
: >"$W/e.local"
r=0
while [ $r -lt "$ROUNDS" ]; do
	e=$((r + 2))
	# readers move to epoch e (announce), the service fetches e + 1: wait
	# until it is done, so the timed reads run on a quiet machine
	"$T/serve-read" -q "0:$e:0:3" "$W/st/dstage.$U.big" 0 >/dev/null
	"$T/serve-read" -q "0:$e:0:3" "$W/st/dstage.$U.big" 1 >/dev/null
	wait_epoch big $((e + 1))
	sleep 0.5 # the agreement settles: every service back to idle polling
	# ABBA: which of the two runs first alternates (the first run of a
	# pair was measured slower, whichever it is)
	for side in $( [ $((r % 2)) = 0 ] && echo "cache local" || echo "local cache"); do
		if [ "$side" = cache ]; then
			set -- $("$T/serve-read" -e "$e" -c -w 10 -t 2 -r 5 "$W/st/dstage.$U.big" 0 |
				sed 's/.*files=\([0-9]*\) .*cache=\([0-9]*\) remote=\([0-9]*\) stalls=\([0-9]*\) bytes=\([0-9]*\) .*seconds=\([0-9.]*\)/\1 \2 \3 \4 \5 \6/')
			[ "$3" = 0 ] && [ "$4" = 0 ] || echo "warning: epoch $e: $3 remote reads, $4 stalls" >&2
			awk "BEGIN { print $5 / $6 / 1e9 }" >>"$W/e.cache"
			cached=$2
		else
			set -- $("$T/serve-read" -e "$e" -t 2 -r 5 "$W/st/dstage.$U.loc" 0 |
				sed 's/.*files=\([0-9]*\) .*bytes=\([0-9]*\) .*seconds=\([0-9.]*\)/\1 \2 \3/')
			awk "BEGIN { print $2 / $3 / 1e9 }" >>"$W/e.local"
		fi
	done
	echo "round $r: epoch $e: $cached of the reads from the cache" >&2
	r=$((r + 1))
done
SERVE=$SB
unserve big
SERVE=$SL
unserve loc

# ---- the table ------------------------------------------------------------------
m() { median <"$W/$1"; }
ratio() { awk "BEGIN { printf \"%.2f\", $1 / $2 }"; }
rma=$(m x.rma) a2a=$(m x.a2a)
ec=$(m e.cache) el=$(m e.local)
echo
echo "dstage serve, 2 simulated nodes on $(nproc) cores (MPICH $(mpichversion 2>/dev/null | sed -n 's/MPICH Version:[[:space:]]*//p'), $(mpichversion 2>/dev/null | sed -n 's/MPICH Device:[[:space:]]*//p')); medians of $ROUNDS interleaved rounds"
echo
echo "| what | dstage | peer | ratio | goal |"
echo "| --- | --- | --- | --- | --- |"
printf '| epoch exchange, %d MiB of 128 KiB samples, 2 epochs (GB/s) | RMA (serve) %.2f | MPI_Alltoallv %.2f | %s | >= 0.8 |\n' \
	"$SIZE" "$rma" "$a2a" "$(ratio "$rma" "$a2a")"
for job in small big; do
	sz=4
	[ "$job" = big ] && sz=128
	lr=$(m r.$job.lat.R) ll=$(m r.$job.lat.L)
	tr=$(m r.$job.thr.R) tl=$(m r.$job.thr.L)
	printf '| %d KiB read latency, 1 reader (us) | remote %.1f | local %.1f | %s | - |\n' "$sz" "$lr" "$ll" "$(ratio "$lr" "$ll")"
	printf '| %d KiB read throughput, 4 readers (GB/s) | remote %.3f | local %.3f | %s | - |\n' "$sz" "$tr" "$tl" "$(ratio "$tr" "$tl")"
done
printf '| epoch 2+ reads, 128 KiB, 2 readers (GB/s) | store + epoch cache %.2f | all-local (L=1) %.2f | %s | >= 0.95 |\n' \
	"$ec" "$el" "$(ratio "$ec" "$el")"
