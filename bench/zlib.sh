#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/zlib.sh: read rate of zlib-compressed vs uncompressed packs (row 6).
# Two kinds of 128 KiB files: compressible (text-like: words from a small
# vocabulary, about 3x with zlib) and JPEG-like (random bytes: as
# incompressible as JPEG's entropy-coded data; pack stores them raw when
# zlib saves under 5%).  Each kind packed with -z none and -z zlib, staged on
# 1 node (zlib files stay compressed: the shim inflates them on open), read
# once through the shim by one reader, interleaved, medians.
#   sh bench/zlib.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=512; else NF=2048; fi
# single passes of a few tens of ms: more rounds than elsewhere
ROUNDS=$((2 * ROUNDS + 1))
mkfiles "$W/src-jpeg/d" $NF 131072
/usr/bin/python3 - "$W/src-text/d" $NF <<'EOP'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
rng = random.Random(5)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(4000)]
for i in range(n):
    out, size = [], 0
    while size < 131072:
        w = rng.choice(words) + (" " if rng.random() < 0.9 else ",\n")
        out.append(w)
        size += len(w)
    with open(os.path.join(d, "f%06d" % i), "w") as f:
        f.write("".join(out)[:131072])
EOP
MNT=$(mount_prefix)
for kind in text jpeg; do
	(cd "$W/src-$kind" && find d -type f | shuf) >"$W/$kind.list"
	for z in none zlib; do
		"$DSTAGE" pack -q --no-fsync -p 2 -z $z "$W/src-$kind" "$WS/p-$kind-$z"
		stage_nodes "$WS/p-$kind-$z" "$W/st" "$kind$z" 1 -q
		cat "$WS/p-$kind-$z"/part-*.h5 | wc -c >"$W/size.$kind.$z"
	done
done
r=0
while [ $r -lt "$ROUNDS" ]; do
	for kind in text jpeg; do
		zs="none zlib"
		[ $((r % 2)) = 1 ] && zs="zlib none"
		for z in $zs; do
			shim "$(jobdir "$W/st" "$kind$z")" 0 "$MNT" "$READER" read "$MNT" "$W/$kind.list" |
				awk '{ print $4, $5 }' >>"$W/r.$kind.$z"
		done
	done
	r=$((r + 1))
done
col() { awk -v c="$2" '{ print $c }' "$1" | median; }
: >"$RES/zlib.dat"
for kind in text jpeg; do
	nf=$(col "$W/r.$kind.none" 1) nb=$(col "$W/r.$kind.none" 2)
	zf=$(col "$W/r.$kind.zlib" 1) zb=$(col "$W/r.$kind.zlib" 2)
	cr=$(ratio "$(cat "$W/size.$kind.none")" "$(cat "$W/size.$kind.zlib")")
	echo "$kind $nb $zb $cr" >>"$RES/zlib.dat"
	case $kind in
	text) what="zlib pack vs uncompressed, compressible 128 KiB files (text, ${cr}x smaller)" g="-" gs= ;;
	jpeg) what="zlib pack vs uncompressed, JPEG-like 128 KiB files (random bytes, stored raw: ${cr}x)" g=">= 0.97" gs="#13" ;;
	esac
	row "$what, read once through the shim" "zlib $(fmt_rate "$zf" files) ($(fmt_bps "$zb"))" \
		"none $(fmt_rate "$nf" files) ($(fmt_bps "$nb"))" "$(ratio "$zf" "$nf")" "$g" "$gs"
done
note "zlib: $NF files of 128 KiB per kind; -z zlib (level 6) vs -z none, staged without --inflate (the shim inflates a zlib file once per open); one reader, every file once, medians of $ROUNDS interleaved rounds (alternating which goes first).  No issue sets a goal for compressible data: the row shows what inflating costs against what it saves in memory and in shared-FS reads."
