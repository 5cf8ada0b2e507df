#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/rab.sh: staged files read once through the shim, A/B by shim build
# or environment, side by side in one run with the same files read natively
# on tmpfs (the peer of rows 1.x and 2.1: bench/fanstore.sh, bench/small.sh).
#   sh bench/rab.sh [--quick] [RESULTS_DIR]
# RAB_A, RAB_B: the environment of the shim in arms A and B (default: none);
# RAB_PA, RAB_PB: the preload object of each arm (default: this build; copy
# a build aside to compare two).  SIZES (KiB; default "4 128 512 2048 8192"),
# PROCS (readers; default "1 2").  Every file is read once per run
# (open + fstat + read to EOF + close, random order), every run a fresh
# process; per round the order of tmpfs, A and B rotates.  Prints, per size
# and readers, the medians (files/s) and A/tmpfs, B/tmpfs and B/A (the
# median of the per-round ratios: the other jobs on the machine move both
# arms of one round alike), and the load average.
set -eu
. "$(dirname "$0")/benchlib.sh"
A=${RAB_A:-} B=${RAB_B:-}
PA=${RAB_PA:-$PRELOAD} PB=${RAB_PB:-$PRELOAD}
SIZES=${SIZES:-"4 128 512 2048 8192"}
PROCS=${PROCS:-"1 2"}
if [ $QUICK = 1 ]; then MB=64 NF=5000; else MB=256 NF=50000; fi
for s in $SIZES; do
	if [ "$s" = 4 ]; then
		n=$NF
		i=0
		while [ $i -lt $((n / 100)) ]; do
			mkfiles "$W/src/k4/d$(printf %04d $i)" 100 4096
			i=$((i + 1))
		done
		(cd "$W/src" && find k4 -type f | shuf) >"$W/k4.list"
	else
		mkfiles "$W/src/k$s" $((MB * 1024 / s)) $((s * 1024))
		(cd "$W/src" && ls "k$s" | sed "s,^,k$s/," | shuf) >"$W/k$s.list"
	fi
done
"$DSTAGE" pack -q --no-fsync -p 4 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" rab 1 -q
ST=$(jobdir "$W/st" rab)
MNT=$(mount_prefix)
say "sizes $SIZES KiB, readers $PROCS, $ROUNDS rounds; A: '$A' $PA; B: '$B' $PB"

arm() { # ARM P LIST: files/s of one run
	case $1 in
	n) "$READER" -P "$2" read "$W/src" "$3" ;;
	a) env LD_PRELOAD="$PA" DSTAGE_STORE="$ST" DSTAGE_NODE=0 DSTAGE_MOUNT="$MNT" $A \
		"$READER" -P "$2" read "$MNT" "$3" ;;
	b) env LD_PRELOAD="$PB" DSTAGE_STORE="$ST" DSTAGE_NODE=0 DSTAGE_MOUNT="$MNT" $B \
		"$READER" -P "$2" read "$MNT" "$3" ;;
	esac | awk '{ print $4 }'
}
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	cut -d' ' -f1 /proc/loadavg >>"$W/load"
	for s in $SIZES; do
		for P in $PROCS; do
			for x in $(echo "n a b n a b" | cut -d' ' -f$((r % 3 + 1))-$((r % 3 + 3))); do
				echo "$r $(arm $x "$P" "$W/k$s.list")" >>"$W/$x.$s.$P"
			done
		done
	done
	r=$((r + 1))
done
# per-round ratio X/Y of two arms' files
pr() { paste "$1" "$2" | awk '{ print $2 / $4 }' | median | awk '{ printf "%.2f\n", $1 }'; }
printf '%-6s %2s %12s %12s %12s %7s %7s %7s\n' KiB P tmpfs A B A/tmpfs B/tmpfs B/A
for s in $SIZES; do
	for P in $PROCS; do
		n=$(awk '{ print $2 }' "$W/n.$s.$P" | median)
		a=$(awk '{ print $2 }' "$W/a.$s.$P" | median)
		b=$(awk '{ print $2 }' "$W/b.$s.$P" | median)
		printf '%-6s %2s %12.0f %12.0f %12.0f %7s %7s %7s\n' "$s" "$P" "$n" "$a" "$b" \
			"$(pr "$W/a.$s.$P" "$W/n.$s.$P")" "$(pr "$W/b.$s.$P" "$W/n.$s.$P")" \
			"$(pr "$W/b.$s.$P" "$W/a.$s.$P")"
	done
done | tee "$RES/rab.txt"
echo "load average (1 min) per round: $(tr '\n' ' ' <"$W/load")" | tee -a "$RES/rab.txt"
