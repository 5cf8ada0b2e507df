#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/readonce.sh: bytes read from the shared file system per staged byte
# (row 4).  A pack on /var/tmp staged on 2 simulated nodes with R=1 and R=2;
# every rank runs under a wrapper that adds its rchar (/proc/PID/io: every
# byte read() or pread() by the process) to a file: that is counted
# independently of dstage's own summary.  The peer: every node copying
# what it holds from the shared FS itself (R x the pack).
#   sh bench/readonce.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=1000; else NF=5000; fi
bytes=$(/usr/bin/python3 "$top/bench/mktree.py" "$WS/src/train" $NF 4096 262144)
mkfiles "$WS/src/val" 50 65536
"$DSTAGE" pack -q --no-fsync -p 8 --replicate val "$WS/src" "$WS/pack"
packb=$(cat "$WS"/pack/part-*.h5 | wc -c)
payload=$("$DSTAGE" ls -l "$WS/pack" | awk '$1 ~ /^-/ { s += $2 } END { print s }')
manif=$(stat -c %s "$WS/pack/index.h5")
: >"$RES/readonce.dat"
for R in 1 2; do
	: >"$W/rchar.$R"
	mpiexec.mpich -n 2 sh "$RCHAR" "$W/rchar.$R" "$DSTAGE" stage "$WS/pack" --to "$W/st" --job ro$R \
		--node-per-rank -R $R >"$W/sum.$R" 2>&1 || { cat "$W/sum.$R" >&2; exit 1; }
	_jobs="$_jobs $W/st:ro$R"
	staged=$(du -cb "$(jobdir "$W/st" ro$R)"/*/store | awk 'END { print $1 }')
	rch=$(awk '{ s += $1 } END { print s }' "$W/rchar.$R")
	said=$(sed -n 's/^read from shared FS: \([0-9]*\) bytes.*/\1/p' "$W/sum.$R")
	"$DSTAGE" clean --to "$W/st" --job ro$R
	per=$(awk -v a="$said" -v b="$staged" 'BEGIN { printf "%.3f", a / b }')
	row "bytes read from the shared FS (rchar of all ranks), 2 nodes, R=$R, over the pack's payload + manifest" \
		"$rch B (dstage says $said); $per per staged byte" "per-node copy: $((R * (payload + manif))) B" \
		"$(ratio3 "$rch" "$((payload + manif))")" "<= 1.01" "#3"
	echo "$R $said $rch $staged $payload $manif $packb" >>"$RES/readonce.dat"
done
note "Read once: $NF training files (4..256 KiB) + a replicated val/ of 50 files, staged from /var/tmp on 2 simulated nodes; 'rchar' is the sum over the ranks of /proc/PID/io rchar (every read/pread, including the HDF5 reads of index.h5 and small reads of the MPI runtime), the first figure is dstage's own count.  Payload $payload B, manifest $manif B, partition files $packb B."
