#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/pack.sh: dstage pack against tar cf of the same tree (issue 2: serial
# pack at least 0.8x tar's rate, without compression).
#
#   sh bench/pack.sh [--quick] [--rounds N]
#
# A tree of 20k files (--quick: 2k) of 4 KiB..1 MiB, sizes log-uniform,
# random bytes, in directories of 500, is made in $BENCH_SRC (default
# /var/tmp, standing for the shared file system; page cache warm, as both
# sides read it alike).  Each round runs, in a rotating order, tar cf, dstage
# pack, and mpiexec -n 2 dstage pack into $BENCH_OUT (default /dev/shm, so
# the disk's write-back does not decide), none of them syncing (pack
# --no-fsync: tar does not fsync either); outputs are removed between runs.
# Medians of N rounds (default 5).  Prints a Markdown table.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
DSTAGE="$top/build/bin/dstage"
NF=20000
ROUNDS=5
while [ $# -gt 0 ]; do
	case $1 in
	--quick) NF=2000 ;;
	--rounds) ROUNDS=$2; shift ;;
	*) echo "usage: sh bench/pack.sh [--quick] [--rounds N]" >&2; exit 2 ;;
	esac
	shift
done
[ -x "$DSTAGE" ] || { echo "bench/pack.sh: build first (make)" >&2; exit 1; }

SRC=$(mktemp -d "${BENCH_SRC:-/var/tmp}/dstage-bench-pack.XXXXXX")
OUT=$(mktemp -d "${BENCH_OUT:-/dev/shm}/dstage-bench-pack.XXXXXX")
trap 'rm -rf "$SRC" "$OUT"' EXIT INT TERM

# The tree: deterministic sizes (seeded), random content.
bytes=$(/usr/bin/python3 - "$SRC/tree" "$NF" <<'EOF'
import math, os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
total = 0
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 500))
    os.makedirs(d, exist_ok=True)
    size = int(math.exp(rng.uniform(math.log(4096), math.log(1048576))))
    with open(os.path.join(d, "f%05d.bin" % i), "wb") as f:
        f.write(os.urandom(size))
    total += size
print(total)
EOF
)

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'; }
median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
rate() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.2f", b / t / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

run_tar() { tar -cf "$OUT/t.tar" -C "$SRC/tree" .; }
run_pack1() { "$DSTAGE" pack -q --no-fsync -p 8 "$SRC/tree" "$OUT/p"; }
run_pack2() { mpiexec.mpich -n 2 "$DSTAGE" pack -q --no-fsync -p 8 "$SRC/tree" "$OUT/p"; }

# one warm-up of each (page cache, first-touch of the output file system)
for k in tar pack1 pack2; do run_$k; rm -rf "$OUT/t.tar" "$OUT/p"; done

r=0
while [ $r -lt "$ROUNDS" ]; do
	# A/B interleaved, order rotating each round
	case $((r % 3)) in
	0) order="tar pack1 pack2" ;;
	1) order="pack1 pack2 tar" ;;
	2) order="pack2 tar pack1" ;;
	esac
	for k in $order; do
		t0=$(now)
		run_$k
		since "$t0" >>"$OUT/time.$k"
		echo >>"$OUT/time.$k"
		rm -rf "$OUT/t.tar" "$OUT/p"
	done
	r=$((r + 1))
done

tt=$(median "$OUT/time.tar")
p1=$(median "$OUT/time.pack1")
p2=$(median "$OUT/time.pack2")
mib=$((bytes / 1048576))
echo "| what | files | MiB | tar cf | dstage pack | ratio (pack rate / tar rate) | goal |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
echo "| pack, serial, -z none | $NF | $mib | ${tt} s, $(rate "$tt") GB/s | ${p1} s, $(rate "$p1") GB/s | $(ratio "$tt" "$p1") | >= 0.8 |"
echo "| pack, mpiexec -n 2, -z none | $NF | $mib | ${tt} s, $(rate "$tt") GB/s | ${p2} s, $(rate "$p2") GB/s | $(ratio "$tt" "$p2") | - |"
echo
echo "Medians of $ROUNDS interleaved rounds; source on ${BENCH_SRC:-/var/tmp} (page cache warm), output on ${BENCH_OUT:-/dev/shm}, no fsync on either side, pack -p 8; $(nproc) cores."
