#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/shim.sh: one reader, open+fstat+read+close of 4 KiB, 128 KiB and
# 2 MiB files in random order, through the shim vs the same files natively
# on /dev/shm (the limit) vs squashfuse (when installed); stat rate; calls
# outside the prefix with and without the shim.  A/B interleaved, medians of
# ROUNDS (default 5).  Prints a Markdown table with the ratios and goals.
#
# Files are read ONCE per run, each run a fresh process (the method of the
# full run's rows 1 and 2.1, bench/fanstore.sh and bench/small.sh).  This
# script used to repeat passes over the list for SECS: from the second pass
# on, the shim's process has every page of the store and of the index
# mapped already (no page fault left) while tmpfs still walks the path in
# the kernel each time, so its 4 KiB row said 4.98x where the full run's
# single cold pass over 50000 files said 2.19x.  Only stat (steady state,
# as in bench/small.sh) still repeats for SECS.
#
#   sh bench/shim.sh [--quick]
set -e
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
PRELOAD="$SRCDIR/build/lib/libdstage-preload.so"
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-0.5}
N4K=20000 N128K=1000 N2M=64
if [ "$1" = --quick ]; then ROUNDS=3 SECS=0.2 N4K=4000 N128K=200 N2M=16; fi
[ -f "$PRELOAD" ] || { echo "bench/shim.sh: run make first" >&2; exit 1; }

W=/dev/shm/dstage-bench.$$
MNT=/dstage-bench-$$
SQ=$W/sq
cleanup() {
	[ -n "$SQPID" ] && { fusermount -u "$SQ" 2>/dev/null || fusermount3 -u "$SQ" 2>/dev/null || true; }
	rm -rf "$W"
}
trap cleanup EXIT INT TERM
mkdir -p "$W/src/s4k" "$W/src/s128k" "$W/src/s2m" "$W/store"
B="$W/shim-bench"
gcc -O2 -Wall -Wextra -D_GNU_SOURCE -o "$B" "$SRCDIR/bench/shim-bench.c"
mk() { # DIR COUNT BYTES
	i=0
	head -c "$(( $2 * $3 ))" /dev/urandom >"$W/blob"
	split -a 5 -d -b "$3" "$W/blob" "$1/f"
	rm "$W/blob"
}
mk "$W/src/s4k" $N4K 4096
mk "$W/src/s128k" $N128K 131072
mk "$W/src/s2m" $N2M 2097152
JOB=$("$SRCDIR/build/t/mkstore" -N 1 -p 8 "$W/src" "$W/store")
for s in s4k s128k s2m; do (cd "$W/src" && ls $s | sed "s,^,$s/," | shuf) >"$W/$s.list"; done

HAVE_SQ=
if command -v squashfuse >/dev/null && command -v mksquashfs >/dev/null && [ -e /dev/fuse ]; then
	mksquashfs "$W/src" "$W/img" -noI -noD -noF -quiet -no-progress >/dev/null 2>&1 &&
	mkdir -p "$SQ" && squashfuse "$W/img" "$SQ" && SQPID=1 && HAVE_SQ=1
fi

shim() { LD_PRELOAD="$PRELOAD" DSTAGE_STORE="$JOB" DSTAGE_MOUNT="$MNT" "$@"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# measure MODE LIST [SECS]: prints "native shim squash" medians (files/s),
# interleaved; SECS 0 (files): one pass, each file read once
measure() {
	mode=$1 list=$2 secs=${3:-$SECS}
	: >"$W/n" ; : >"$W/s" ; : >"$W/q"
	r=0
	while [ $r -lt "$ROUNDS" ]; do
		"$B" "$mode" "$W/src" "$W/$list" "$secs" | cut -d" " -f1 >>"$W/n"
		shim "$B" "$mode" "$MNT" "$W/$list" "$secs" | cut -d" " -f1 >>"$W/s"
		[ -n "$HAVE_SQ" ] && "$B" "$mode" "$SQ" "$W/$list" "$secs" | cut -d" " -f1 >>"$W/q"
		r=$((r + 1))
	done
	echo "$(median <"$W/n") $(median <"$W/s") $( [ -n "$HAVE_SQ" ] && median <"$W/q" || echo -)"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == "-" || b == 0) print "-"; else printf "%.2f", a / b }'; }
meets() { awk -v r="$1" -v g="$2" 'BEGIN { if (r == "-") print "n/a"; else print (r + 0 >= g ? "yes" : "no") }'; }
fmt() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else if (v >= 1e6) printf "%.2fM", v/1e6; else printf "%.1fk", v/1e3 }'; }

set -- $(measure files s4k.list 0); n4=$1 s4=$2 q4=$3
set -- $(measure files s128k.list 0); n128=$1 s128=$2 q128=$3
set -- $(measure files s2m.list 0); n2=$1 s2=$2 q2=$3
set -- $(measure stat s4k.list); ns=$1 ss=$2 qs=$3

# outside the prefix: the same native file, without and with the shim
: >"$W/o0"; : >"$W/o1"
r=0
F="$W/src/s4k/f00000"
while [ $r -lt "$ROUNDS" ]; do
	"$B" outside "$F" "$SECS" | cut -d" " -f1 >>"$W/o0"
	shim "$B" outside "$F" "$SECS" | cut -d" " -f1 >>"$W/o1"
	r=$((r + 1))
done
o0=$(median <"$W/o0") o1=$(median <"$W/o1")

echo "| what (one reader) | native tmpfs | shim | shim/native | goal | met | squashfuse | shim/squashfuse | goal | met |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
row() { # name native shim squash goal_native goal_sq
	rn=$(ratio "$3" "$2") rq=$(ratio "$3" "$4")
	gq=$6; [ "$gq" = - ] && mq=- || mq=$(meets "$rq" "$gq")
	echo "| $1 | $(fmt "$2")/s | $(fmt "$3")/s | $rn | >= $5 | $(meets "$rn" "$5") | $(fmt "$4")/s | $rq | ${gq:+>= }$gq | $mq |"
}
row "4 KiB files: open+fstat+read+close" "$n4" "$s4" "$q4" 2 10
row "128 KiB files" "$n128" "$s128" "$q128" 1.1 10
row "2 MiB files" "$n2" "$s2" "$q2" 0.95 -
row "stat" "$ns" "$ss" "$qs" 1 -
ro=$(ratio "$o1" "$o0")
echo "| outside the prefix (4 KiB file on /dev/shm) | $(fmt "$o0")/s without shim | $(fmt "$o1")/s with | $ro | >= 0.95 | $(meets "$ro" 0.95) | | | | |"
echo
echo "2 MiB files in GB/s: native $(awk -v f="$n2" 'BEGIN{printf "%.1f", f*2097152/1e9}'), shim $(awk -v f="$s2" 'BEGIN{printf "%.1f", f*2097152/1e9}')$( [ -n "$HAVE_SQ" ] && awk -v f="$q2" 'BEGIN{printf ", squashfuse %.1f", f*2097152/1e9}')."
echo "Medians of $ROUNDS interleaved rounds; files: one pass per run (every file read once, fresh process), $N4K, $N128K, $N2M files in random order; stat: repeated passes for ${SECS}s."
