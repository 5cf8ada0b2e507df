#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/spill.sh: the spill tier (stage --spill, docs/guide.md "The spill
# tier").  A pack staged on one node with a RAM room of 0 (DSTAGE_RAM_ROOM):
# every partition lands in the spill directory on the disk (/var/tmp, the
# same disk as the source tree).
#   1, 2: every training file read once, through the shim from the spill
#         tier vs natively from the same files on that disk; cold (every
#         file and the spill store dropped from the page cache with
#         posix_fadvise DONTNEED before each run: no drop_caches, which
#         would disturb the other jobs on the machine) and warm; goal >= 0.95
#   3:    a stage that spills about half its bytes vs one that fits in RAM
#         (report only: the cost of writing to the disk)
# Interleaved (A B A B, alternating which goes first), medians.
#   sh bench/spill.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=400; else NF=2000; fi
bytes=$(/usr/bin/python3 "$top/bench/mktree.py" "$WS/src/train" $NF 65536 524288)
mkfiles "$WS/src/val" 20 65536
"$DSTAGE" pack -q --no-fsync -p 8 --replicate val "$WS/src" "$WS/pack"
(cd "$WS/src" && find train -type f | sort) >"$W/list"
M=/dstage-bench-spill-$$

# ---- read once: shim on the spill tier vs native on the same disk --------
DSTAGE_RAM_ROOM=0 stage_nodes "$WS/pack" "$W/st" sp 1 --spill "$WS/spill" -q
J=$(jobdir "$W/st" sp)
ram=$(stat -c %s "$J/0/store")
spill=$(stat -c %s "$(jobdir "$WS/spill" sp)/0/store")
say "staged: $ram B in RAM, $spill B spilled"
cat >"$W/drop.py" <<'EOS'
import os, sys
# drop.py FILE...: the files' pages out of the page cache (clean pages only)
for f in sys.argv[1:]:
    fd = os.open(f, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOS
drop() {
	(cd "$WS/src" && xargs -d '\n' /usr/bin/python3 "$W/drop.py" <"$W/list")
	/usr/bin/python3 "$W/drop.py" "$(jobdir "$WS/spill" sp)/0/store"
}
sync
for temp in cold warm; do
	: >"$W/$temp.shim"
	: >"$W/$temp.native"
	r=0
	while [ $r -lt $ROUNDS ]; do
		for who in shim native; do
			[ $((r % 2)) = 1 ] && who=$([ $who = shim ] && echo native || echo shim)
			[ $temp = cold ] && drop
			if [ $who = shim ]; then
				shim "$J" 0 "$M" "$READER" read "$M" "$W/list" | awk '{ print $5 }' >>"$W/$temp.shim"
			else
				"$READER" read "$WS/src" "$W/list" | awk '{ print $5 }' >>"$W/$temp.native"
			fi
		done
		r=$((r + 1))
	done
	s=$(med "$W/$temp.shim")
	n=$(med "$W/$temp.native")
	row "spill tier: $NF files read once through the shim vs natively from the same disk, $temp page cache" \
		"$(fmt_bps "$s")" "native: $(fmt_bps "$n")" "$(ratio "$s" "$n")" ">= 0.95" "issue 26"
done
"$DSTAGE" clean --to "$W/st" --job sp

# ---- stage: half spilled vs all in RAM ----------------------------------
# the room: half the store, plus the metadata allowance stage takes off it
half=$(((ram + spill) / 2 + (2 << 20)))
: >"$W/st.ram"
: >"$W/st.spill"
: >"$W/st.frac"
r=0
while [ $r -lt $ROUNDS ]; do
	for who in ram spill; do
		[ $((r % 2)) = 1 ] && who=$([ $who = ram ] && echo spill || echo ram)
		t0=$(now)
		if [ $who = ram ]; then
			stage_nodes "$WS/pack" "$W/st" h$r 1 -q
		else
			DSTAGE_RAM_ROOM=$half stage_nodes "$WS/pack" "$W/st" h$r 1 -q --spill "$WS/spill"
		fi
		dt=$(elapsed "$t0")
		echo "$dt" >>"$W/st.$who"
		if [ $who = spill ]; then
			a=$(stat -c %s "$(jobdir "$W/st" h$r)/0/store")
			b=$(stat -c %s "$(jobdir "$WS/spill" h$r)/0/store")
			awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f\n", b / (a + b) }' >>"$W/st.frac"
		fi
		"$DSTAGE" clean --to "$W/st" --job h$r
	done
	r=$((r + 1))
done
tr=$(med "$W/st.ram")
ts=$(med "$W/st.spill")
frac=$(med "$W/st.frac")
row "stage of $bytes B on 1 node, $frac of it spilled to the disk vs all in RAM (time)" \
	"${ts} s" "all in RAM: ${tr} s" "$(ratio3 "$ts" "$tr")" "-" "issue 26"
note "Spill tier: $NF training files (64..512 KiB, log-uniform, $bytes B) and a replicated val/ of 20 files, packed on /var/tmp (the machine's one disk, where the spill directory also is) and staged on one node with DSTAGE_RAM_ROOM=0, so that every partition is in the spill tier.  'reader read' opens, reads to EOF and closes every training file once in path order, through the shim (large reads are a pread of the spill store file) and natively on the source tree on the same disk.  Cold: before each run every source file and the spill store are dropped from the page cache with posix_fadvise(POSIX_FADV_DONTNEED) (drop_caches would disturb the other jobs on the machine; the disk is a virtual disk whose host may still cache).  Stage: the same pack staged with a RAM room of half the store (the median spilled fraction is in the row) vs with everything in RAM."
