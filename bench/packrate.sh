#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/packrate.sh: dstage pack vs tar cf of the same tree (row 4), run by
# bench/run.sh when the pack module's own bench/pack.sh is not there.
# A tree of 20k files (QUICK: 2k) of 4 KiB..1 MiB (log-uniform) on /var/tmp
# (the "shared file system", page cache warm); serial pack, pack under
# mpiexec -n 2, and tar cf, all without fsync (--no-fsync: tar does not
# sync either), output to /dev/shm (so the disk's write-back, which other
# jobs share, does not decide), interleaved, medians.  Goal (issue 2): serial pack at
# least 0.8x tar's rate without compression.
#   sh bench/packrate.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=2000; else NF=20000; fi
bytes=$(/usr/bin/python3 "$top/bench/mktree.py" "$WS/src" $NF 4096 1048576)
say "$NF files, $bytes bytes, $ROUNDS rounds"
r=0
while [ $r -lt "$ROUNDS" ]; do
	t0=$(now); "$DSTAGE" pack -q --no-fsync -p 8 "$WS/src" "$W/p1"; echo "$(elapsed "$t0")" >>"$W/time.p1"; rm -rf "$W/p1"
	t0=$(now); tar -cf "$W/t.tar" -C "$WS/src" .; echo "$(elapsed "$t0")" >>"$W/time.tar"; rm -f "$W/t.tar"
	t0=$(now); mpiexec.mpich -n 2 "$DSTAGE" pack -q --no-fsync -p 8 "$WS/src" "$W/p2"; echo "$(elapsed "$t0")" >>"$W/time.p2"; rm -rf "$W/p2"
	r=$((r + 1))
done
p1=$(med "$W/time.p1") p2=$(med "$W/time.p2") tt=$(med "$W/time.tar")
rate() { awk -v b="$bytes" -v t="$1" 'BEGIN { printf "%.0f", b / t }'; }
echo "pack1 $p1 pack2 $p2 tar $tt bytes $bytes" >"$RES/packrate.dat"
row "pack of $NF files (4 KiB..1 MiB, $((bytes / 1048576)) MiB), serial, vs tar cf" \
	"pack $(fmt_bps "$(rate "$p1")") (${p1}s)" "tar cf $(fmt_bps "$(rate "$tt")") (${tt}s)" "$(ratio "$tt" "$p1")" ">= 0.8" "#2"
row "pack under mpiexec -n 2 vs tar cf" \
	"pack -n 2 $(fmt_bps "$(rate "$p2")") (${p2}s)" "tar cf $(fmt_bps "$(rate "$tt")") (${tt}s)" "$(ratio "$tt" "$p2")" "-"
note "Pack: $NF files of 4 KiB..1 MiB (log-uniform), $bytes bytes, source on /var/tmp (page cache warm), output on /dev/shm, no fsync on either side, -p 8, medians of $ROUNDS interleaved rounds (pack, tar, pack -n 2)."
