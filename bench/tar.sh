#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/tar.sh: tar shards staged in place (issue 28 item 3, --expand-tar,
# docs/guide.md "Tar shards").  WebDataset-style shards (KEY.jpg 8..64 KiB,
# KEY.cls) on /var/tmp, "the shared file system".
#   1, 2: staging the shards on 2 simulated nodes with stage --expand-tar
#         vs copying them to node-local storage: tar xf of every shard (the
#         members as files, what a reader without a tar library needs) and
#         cp of the tars (the tars only), 2 processes like the 2 nodes;
#         time, report only
#   3, 4: bytes read from the shared FS (rchar of every process, counted
#         outside dstage) and opens of the tars (strace), for stage
#         --expand-tar of the tree, stage of an in-place pack, and tar xf;
#         goal <= 1.05 of the tars' bytes
#   5, 6: every member read once through the shim, in a global random order
#         and in path order, vs streaming the same shards with Python's
#         tarfile (what WebDataset does: it is not installable here, no PyPI;
#         its reader is tarfile in mode "r|"), samples/s, warm page cache
# Interleaved (A B C A B C ..., rotating which goes first), medians.
#   sh bench/tar.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NS=8 NM=200; else NS=24 NM=500; fi
PY=/usr/bin/python3
TP="$top/bench/tar.py"
mbytes=$($PY "$TP" shards "$WS/src/train" $NS $NM)
tbytes=$(cat "$WS"/src/train/*.tar | wc -c)
ls "$WS"/src/train/*.tar >"$W/shards"
M=$(mount_prefix)
# untar_all DIR [WRAP...]: every shard extracted into DIR/shard-N.tar/ by 2
# processes (the 2 nodes), each tar run under WRAP when given
untar_all() {
	_d=$1
	shift
	xargs -P 2 -I{} "$@" sh -c 'd="$1/$(basename "$2")" && mkdir -p "$d" && tar -xf "$2" -C "$d"' \
		sh "$_d" {} <"$W/shards"
}
say "$NS shards x $NM samples: $tbytes B of tars, $mbytes B of members"

# ---- 1, 2: stage in place vs tar xf vs cp -------------------------------
for who in dstage tarx cp; do : >"$W/t.$who"; done
r=0
while [ $r -lt $ROUNDS ]; do
	for who in $(rotated $r dstage tarx cp); do
		rm -rf "$W/x"
		mkdir -p "$W/x"
		t0=$(now)
		case $who in
		dstage) stage_nodes "$WS/src" "$W/st" s$r 2 --expand-tar -q ;;
		tarx) untar_all "$W/x" ;;
		cp) xargs -P 2 -I{} cp {} "$W/x/" <"$W/shards" ;;
		esac
		elapsed "$t0" >>"$W/t.$who"
		[ $who = dstage ] && "$DSTAGE" clean --to "$W/st" --job s$r
	done
	r=$((r + 1))
done
rm -rf "$W/x"
td=$(med "$W/t.dstage")
tx=$(med "$W/t.tarx")
tc=$(med "$W/t.cp")
row "stage --expand-tar of $NS tar shards ($tbytes B), 2 nodes, vs tar xf of every shard (time)" \
	"$(fmt_s "$td")" "tar xf: $(fmt_s "$tx")" "$(ratio "$td" "$tx")" "-" "issue 28"
row "stage --expand-tar of the same shards vs cp of the tars (time; cp leaves tars, not files)" \
	"$(fmt_s "$td")" "cp: $(fmt_s "$tc")" "$(ratio "$td" "$tc")" "-" "issue 28"

# ---- 3, 4: bytes and opens on the shared side -----------------------------
have_strace=0
strace -f -qq -o /dev/null true 2>/dev/null && have_strace=1
# opens TRACEPREFIX: successful opens of a shard, all processes
# (not tar -C's directories of the same names)
opens() { cat "$1".* 2>/dev/null | grep -v O_DIRECTORY | grep -cE 'shard-[0-9]+\.tar", (\{flags=)?O_RDONLY.*= [0-9]+$' || :; }
# tracer NAME: the strace prefix that records a command's opens as
# $W/tr.NAME.PID (empty without strace); opens_of NAME: their count -> $W/op.NAME
tracer() { [ $have_strace = 1 ] && echo "strace -f -ff -qq -e trace=open,openat,openat2 -o $W/tr.$1"; }
opens_of() {
	if [ $have_strace = 1 ]; then opens "$W/tr.$1" >"$W/op.$1"; else echo - >"$W/op.$1"; fi
	rm -f "$W/tr.$1".*
}
$(tracer dstage-trace) $ds_mpiexec -n 2 "$DSTAGE" stage "$WS/src" --expand-tar --to "$W/st" --job bo \
	--node-per-rank -q
opens_of dstage-trace
"$DSTAGE" clean --to "$W/st" --job bo
$ds_mpiexec -n 2 sh "$RCHAR" "$W/rc.dstage" "$DSTAGE" stage "$WS/src" --expand-tar --to "$W/st" \
	--job bb --node-per-rank -q
_jobs="$_jobs $W/st:bb $W/st:bo $W/st:bp"
"$DSTAGE" clean --to "$W/st" --job bb
t0=$(now)
"$DSTAGE" pack -q --no-fsync --in-place --expand-tar "$WS/src" "$WS/ipack"
tpack=$(elapsed "$t0")
ibytes=$(stat -c %s "$WS/ipack/index.h5")
$(tracer pack-trace) $ds_mpiexec -n 2 "$DSTAGE" stage "$WS/ipack" --to "$W/st" --job bo --node-per-rank -q
opens_of pack-trace
"$DSTAGE" clean --to "$W/st" --job bo
$ds_mpiexec -n 2 sh "$RCHAR" "$W/rc.pack" "$DSTAGE" stage "$WS/ipack" --to "$W/st" --job bp \
	--node-per-rank -q
"$DSTAGE" clean --to "$W/st" --job bp
mkdir -p "$W/x"
untar_all "$W/x" $(tracer tarx-trace)
opens_of tarx-trace
rm -rf "$W/x" && mkdir -p "$W/x"
untar_all "$W/x" sh "$RCHAR" "$W/rc.tarx"
rm -rf "$W/x"
sum() { awk '{ s += $1 } END { print s + 0 }' "$1"; }
bd=$(sum "$W/rc.dstage")
bp=$(sum "$W/rc.pack")
bx=$(sum "$W/rc.tarx")
od=$(cat "$W/op.dstage-trace")
op=$(cat "$W/op.pack-trace")
ox=$(cat "$W/op.tarx-trace")
row "bytes read from the shared FS, stage --expand-tar of the tree vs tar xf ($NS shards; opens of the tars)" \
	"$bd B, $od opens" "tar xf: $bx B, $ox opens" "$(ratio3 "$bd" "$tbytes")" "<= 1.05" "issue 28"
row "the same, stage of an in-place pack (its index.h5: $ibytes B, pack --in-place took $(fmt_s "$tpack"))" \
	"$bp B, $op opens" "tar xf: $bx B, $ox opens" "$(ratio3 "$bp" "$tbytes")" "<= 1.05" "issue 28"

# ---- 5, 6: reading members: the shim vs tarfile streaming -----------------
stage_nodes "$WS/src" "$W/st" rd 1 --expand-tar -q
J=$(jobdir "$W/st" rd)
(cd "$WS/src" && for s in train/*.tar; do $PY -c '
import sys, tarfile
for m in tarfile.open(sys.argv[1]):
    if m.isfile():
        print(sys.argv[1] + "/" + m.name)' "$s"; done) >"$W/members"
nmem=$(wc -l <"$W/members")
for who in rand path stream; do : >"$W/r.$who"; done
r=0
while [ $r -lt $ROUNDS ]; do
	for who in $(rotated $r rand path stream); do
		case $who in
		rand) shim "$J" 0 "$M" $PY "$TP" files "$M" "$W/members" $r ;;
		path) shim "$J" 0 "$M" $PY "$TP" files "$M" "$W/members" ;;
		stream) xargs $PY "$TP" stream <"$W/shards" ;;
		esac | awk '{ printf "%.1f\n", $1 / $3 }' >>"$W/r.$who"
	done
	r=$((r + 1))
done
"$DSTAGE" clean --to "$W/st" --job rd
rr=$(med "$W/r.rand")
rp=$(med "$W/r.path")
rs=$(med "$W/r.stream")
row "$nmem members read once through the shim in a global random order vs tarfile streaming the shards (WebDataset's way)" \
	"$(fmt_rate "$rr" samples)" "tarfile stream: $(fmt_rate "$rs" samples)" "$(ratio "$rr" "$rs")" "-" "issue 28"
row "the same members through the shim in path order vs tarfile streaming" \
	"$(fmt_rate "$rp" samples)" "tarfile stream: $(fmt_rate "$rs" samples)" "$(ratio "$rp" "$rs")" "-" "issue 28"
note "Tar shards: $NS WebDataset-style shards of $NM samples (KEY.jpg of 8..64 KiB log-uniform, KEY.cls), $tbytes B of tars ($mbytes B of members) on /var/tmp (the shared FS here).  Staging: 'dstage stage --expand-tar' of the tree on 2 simulated nodes into /dev/shm vs 'tar xf' of every shard and 'cp' of the tars into /dev/shm by 2 processes (xargs -P 2), interleaved, medians of $ROUNDS.  Bytes: rchar of every process (/proc/PID/io, MPI runtime and index.h5 included); opens: successful open/openat/openat2 of a shard under strace -f -ff (the stage of the tree opens each tar twice: the walk reads the headers, one reader the data; an in-place pack once).  Reading: one node, every member read once with open/read by /usr/bin/python3 through the shim, in a seeded global random order (what no tar streamer can do) and in path order, vs tarfile.open(mode='r|') streaming each shard and reading every member (WebDataset's reader; WebDataset itself is not installable here: no PyPI); warm page cache, samples/s."
