#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Stage-in against its peers, side by side (A B C A B C ...), medians:
#   dstage stage of a pack into /dev/shm with 2 simulated nodes
#   cp of the partition files into /dev/shm (a plain copy of the same bytes)
#   tar -x of the same tree into /dev/shm
# Usage: bench/stage.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/lib.sh"
quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
out=${1:-$top/bench/results}
mkdir -p "$out"
if [ $quick = 1 ]; then nfiles=2000 total_mb=256 runs=5; else nfiles=20000 total_mb=2048 runs=5; fi
W=$(mktemp -d "${TMPDIR:-/var/tmp}/dstage-bench-stage.XXXXXX")
trap 'rm -rf "$W" /dev/shm/dstage-bench-stage.$$' EXIT
S=/dev/shm/dstage-bench-stage.$$
mkdir -p "$S"

# the "shared FS" is the local disk: files from 4 KiB to ~200 KiB averaging total/nfiles
avg=$((total_mb * 1024 * 1024 / nfiles))
python_gen() {
	awk -v n="$nfiles" -v avg="$avg" -v dir="$W/src" 'BEGIN {
		srand(7);
		for (i = 0; i < n; i++) {
			d = sprintf("%s/d%03d", dir, i % 100);
			sz = int(avg * (0.05 + 1.9 * rand())); if (sz < 4096) sz = 4096;
			printf "%s/f%06d %d\n", d, i, sz;
		}
	}'
}
mkdir -p "$W/src"
i=0; while [ $i -lt 100 ]; do mkdir -p "$W/src/$(printf d%03d $i)"; i=$((i + 1)); done
python_gen | while read -r f sz; do head -c "$sz" /dev/urandom >"$f"; done
"$B" pack -q -p 16 "$W/src" "$W/pack"
tar -cf "$W/src.tar" -C "$W/src" .
bytes=$(cat "$W"/pack/part-*.h5 | wc -c)

ts=; tc=; tt=
r=0
while [ $r -lt $runs ]; do
	t0=$(now); mpiexec.mpich -n 2 "$B" stage "$W/pack" --to "$S" --job b$r --node-per-rank -q; ts="$ts $(elapsed $t0)"
	"$B" clean --to "$S" --job b$r
	mkdir "$S/cp"; t0=$(now); cp "$W"/pack/part-*.h5 "$S/cp/"; sync -f "$S/cp"; tc="$tc $(elapsed $t0)"; rm -rf "$S/cp"
	mkdir "$S/tar"; t0=$(now); tar -xf "$W/src.tar" -C "$S/tar"; tt="$tt $(elapsed $t0)"; rm -rf "$S/tar"
	r=$((r + 1))
done
ms=$(median $ts); mc=$(median $tc); mt=$(median $tt)
vs_tar=$(ratio "$mt" "$ms"); vs_cp=$(ratio "$ms" "$mc")
{
	echo "| stage-in of $total_mb MiB ($nfiles files), 2 nodes | dstage stage ${ms}s | tar -x ${mt}s | ${vs_tar}x tar's speed | >= 1.0x | $(met "$vs_tar" ">=" 1.0) |"
	echo "| stage-in vs plain copy of the partitions | dstage stage ${ms}s | cp ${mc}s | ${vs_cp}x cp's time | <= 1.3x | $(met "$vs_cp" "<=" 1.3) |"
} | tee "$out/stage.md"
