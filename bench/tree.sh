#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/tree.sh: staging what users already have (issue 28), side by side
# (A B C D E, A B C D E, ...), medians of the rounds:
#   A  dstage stage SRC        a plain tree staged as it is, 2 simulated nodes
#   B  dstage pack + stage     a pack made (the second copy), then staged
#   C  dstage pack --in-place + stage   a manifest only, then staged
#   D  cp -r SRC               one node's copy of the whole tree
#   E  tar xf SRC.tar          one node's extraction of a tar of it (made
#                              beforehand, like a pack: not timed)
# and, in one extra run of each under strace and an rchar counter (not
# timed), what each costs the "shared" file system (/var/tmp here): bytes
# read (the sum of /proc/PID/io rchar over its processes, every read and
# pread, runtime reads included) and opens of files there.
#   sh bench/tree.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=2000; else NF=20000; fi
bytes=$(/usr/bin/python3 "$top/bench/mktree.py" "$WS/src/train" $NF 4096 131072)
mkfiles "$WS/src/val" 50 16384
bytes=$((bytes + 50 * 16384))
nfiles=$((NF + 50))
tar -cf "$WS/src.tar" -C "$WS/src" .

n=0
# one method's run: M FILE-OF-TIMES; the stores and copies go at once
run_A() {
	t0=$(now)
	$ds_mpiexec -n 2 $1 "$DSTAGE" stage "$WS/src" --to "$W/st" --job a$n --node-per-rank -q
	elapsed "$t0" >>"$W/t.A"
	"$DSTAGE" clean --to "$W/st" --job a$n
}
# packed M JOB NAME WRAP PACK-OPTION...: pack SRC to $WS/NAME$n, stage it
# as job JOB$n; times pack + stage (t.M) and the stage alone (s.M)
packed() {
	_m=$1 _j=$2$n _p=$WS/$3$n _w=$4
	shift 4
	t0=$(now)
	$_w "$DSTAGE" pack -q --no-fsync "$@" "$WS/src" "$_p"
	t1=$(now)
	$ds_mpiexec -n 2 $_w "$DSTAGE" stage "$_p" --to "$W/st" --job $_j --node-per-rank -q
	elapsed "$t0" >>"$W/t.$_m"
	elapsed "$t1" >>"$W/s.$_m"
	du -sb "$_p" | cut -f1 >"$W/size.$_m"
	"$DSTAGE" clean --to "$W/st" --job $_j
	rm -rf "$_p"
}
run_B() { packed B b pack "$1" -S 64MiB; }
run_C() { packed C c ip "$1" --in-place; }
run_D() {
	t0=$(now)
	$1 cp -r "$WS/src" "$W/cp"
	elapsed "$t0" >>"$W/t.D"
	rm -rf "$W/cp"
}
run_E() {
	mkdir "$W/x"
	t0=$(now)
	$1 tar -xf "$WS/src.tar" -C "$W/x"
	elapsed "$t0" >>"$W/t.E"
	rm -rf "$W/x"
}
mkdir -p "$W/st"
r=0
while [ $r -lt $ROUNDS ]; do
	for m in A B C D E; do
		n=$((n + 1))
		run_$m ""
	done
	r=$((r + 1))
done

# the costs on the shared side: one run each under strace -f (opens) and
# $RCHAR (benchlib.sh)
opens() {
	# files opened under the shared scratch: absolute paths there, and the
	# relative ones dstage opens below a directory descriptor there (pack:
	# openat, stage: openat2) for reading; never directories, O_PATH
	# lookups (hwloc's), writes or failed opens
	grep -E 'open(at2?)?\(' "$1" | grep -v -E 'O_DIRECTORY|O_PATH|O_WRONLY|O_RDWR|O_CREAT|= -1' |
		grep -E "\"$WS/|openat2?\([0-9]+, \"" | wc -l
}
for m in A B C D E; do
	n=$((n + 1))
	: >"$W/rchar.$m"
	# strace around each command of the method (each rank, pack, cp, tar):
	# one trace file per process (-ff), gathered
	run_$m "strace -ff -qq -s 4096 -e trace=open,openat,openat2 -o $W/trace.$m sh $RCHAR $W/rchar.$m"
	cat "$W"/trace.$m.* >"$W/trace.$m" 2>/dev/null || :
	rm -f "$W"/trace.$m.*
	echo "$(awk '{ s += $1 } END { print s + 0 }' "$W/rchar.$m") $(opens "$W/trace.$m")" >"$W/cost.$m"
done

for m in A B C D E; do
	eval "t$m=\$(med \"$W/t.$m\")"
	eval "rd$m=\$(cut -d' ' -f1 \"$W/cost.$m\")"
	eval "op$m=\$(cut -d' ' -f2 \"$W/cost.$m\")"
done
sizeB=$(cat "$W/size.B") sizeC=$(cat "$W/size.C")
sB=$(med "$W/s.B") sC=$(med "$W/s.C")
row "stage a plain tree (2 nodes) vs cp -r of it (1 node), time" "$(fmt_s "$tA")" "$(fmt_s "$tD")" \
	"$(ratio "$tA" "$tD")" "-" "ours"
row "stage a plain tree (2 nodes) vs tar xf (1 node), time" "$(fmt_s "$tA")" "$(fmt_s "$tE")" \
	"$(ratio "$tA" "$tE")" "-" "ours"
row "stage a plain tree vs pack + stage, time" "$(fmt_s "$tA")" "$(fmt_s "$tB")" \
	"$(ratio "$tA" "$tB")" "<= 1" "ours"
row "pack --in-place + stage vs pack + stage, time" "$(fmt_s "$tC")" "$(fmt_s "$tB")" \
	"$(ratio "$tC" "$tB")" "-" "ours"
row "stage alone (a job after the first): in-place pack vs pack" "$(fmt_s "$sC")" "$(fmt_s "$sB")" \
	"$(ratio "$sC" "$sB")" "-" "ours"
row "stage alone: a plain tree vs a pack" "$(fmt_s "$tA")" "$(fmt_s "$sB")" \
	"$(ratio "$tA" "$sB")" "-" "ours"
row "second copy on the shared FS: pack --in-place vs pack (bytes)" "$sizeC B" "$sizeB B" \
	"$(ratio3 "$sizeC" "$sizeB")" "<= 0.05" "#28"
row "shared FS bytes read: stage a plain tree vs cp -r" "$rdA B" "$rdD B" "$(ratio3 "$rdA" "$rdD")" \
	"<= 1.05" "#28"
row "shared FS bytes read: pack + stage vs stage a plain tree" "$rdB B" "$rdA B" \
	"$(ratio3 "$rdB" "$rdA")" "-" "ours"
row "shared FS bytes read: pack --in-place + stage vs stage a plain tree" "$rdC B" "$rdA B" \
	"$(ratio3 "$rdC" "$rdA")" "-" "ours"
row "shared FS file opens: stage a plain tree vs cp -r ($nfiles files)" "$opA" "$opD" \
	"$(ratio3 "$opA" "$opD")" "<= 1" "#28"
row "shared FS file opens: pack + stage / pack --in-place + stage / tar xf" "$opB / $opC" "$opE" \
	"-" "-" "ours"
printf '%s\n' "A $tA $rdA $opA" "B $tB $rdB $opB $sB" "C $tC $rdC $opC $sC" "D $tD $rdD $opD" \
	"E $tE $rdE $opE" >"$RES/tree.dat"
note "Sources that are not packs (issue 28): $nfiles files (4..128 KiB, $bytes bytes) on /var/tmp as the shared FS, staged into /dev/shm on 2 simulated nodes (R=1), $ROUNDS interleaved rounds, medians.  A: dstage stage of the plain tree; B: dstage pack -S 64MiB, then stage of the pack (the pack's time included: the second copy); C: dstage pack --in-place, then stage; D: cp -r of the tree (one node's copy); E: tar xf of a tar made beforehand (one node).  Bytes read: the sum of /proc/PID/io rchar over every process of the method (reads of the MPI runtime, HDF5 and cp/tar's own included); opens: successful opens of files (not directories) on the shared side, counted with strace -f, in one extra untimed run each.  B reads the tree once to pack it and the pack once to stage it; C reads the tree twice (once for the CRCs, once to stage); A once.  A pack pays back when many jobs stage it: each costs a manifest read and one open per partition instead of a walk and one open per file."
