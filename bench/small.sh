#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/small.sh: small files (4 KiB) and metadata (row 2).
#   - 4 KiB files, each read once (open + fstat + read + close, random
#     order): single pass, squashfuse freshly remounted, like row 1;
#   - open+close, stat, and readdir of every directory: repeated passes
#     for SECS (steady state: the kernel's caches of squashfuse are warm);
#   - a full os.walk + os.stat of a tree of 200k files (QUICK: 20k) in
#     Python, and the same walk in C (opendir/readdir + lstat);
# through the shim vs tmpfs natively vs squashfuse, interleaved per round.
#   sh bench/small.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
PY=/usr/bin/python3
if [ $QUICK = 1 ]; then NF=5000 SUB=10 SECS=0.1; else NF=50000 SUB=100 SECS=0.5; fi
NDIR=$((NF / 100))
say "$NF files of 4 KiB in $NDIR directories; a walk of $((20 * SUB * 100)) files; $ROUNDS rounds"
i=0
while [ $i -lt $NDIR ]; do
	mkfiles "$W/src/small/d$(printf %04d $i)" 100 4096
	i=$((i + 1))
done
$PY "$top/bench/walk.py" make "$W/src/tree" 20 "$SUB" 100 256
(cd "$W/src" && find small -type f | shuf) >"$W/files.list"
(cd "$W/src" && find small -mindepth 1 -type d | shuf) >"$W/dirs.list"
NWALK=$(cd "$W/src" && find tree -mindepth 1 | wc -l)
"$DSTAGE" pack -q --no-fsync -p 4 "$W/src" "$WS/pack"
t0=$(now)
stage_nodes "$WS/pack" "$W/st" sm 1 -q
say "staged $(wc -l <"$W/files.list") + $NWALK entries in $(elapsed "$t0") s"
ST=$(jobdir "$W/st" sm)
MNT=$(mount_prefix)
HAVE_SQ=
if have_squashfuse; then
	sq_make "$W/src" "$W/img" && sq_mount "$W/img" "$W/sq" && HAVE_SQ=1
fi
# index bytes per entry, for the model
ixb=$(stat -c %s "$ST/0/index")
nent=$(($(wc -l <"$W/files.list") + $(wc -l <"$W/dirs.list") + NWALK + 2))
echo "index_bytes $ixb" >"$RES/small-index.dat"
echo "index_entries $nent" >>"$RES/small-index.dat"

# "ops_per_s" of one run
rate() { "$@" | awk '{ print $4 }'; }
walkpy() { "$@" | awk '{ print $1 / $2 }'; }
r=0
while [ $r -lt "$ROUNDS" ]; do
	for m in read open stat readdir walk walkpy; do
		case $m in
		read) a="read" l=files.list t= ;;
		open) a="open" l=files.list t="-t $SECS" ;;
		stat) a="stat" l=files.list t="-t $SECS" ;;
		readdir) a="readdir" l=dirs.list t="-t $SECS" ;;
		walk) a="walk" l=- t= ;;
		esac
		sub=small
		case $m in walk*) sub=tree ;; esac
		for peer in $(echo "n s q n s q" | cut -d' ' -f$((r % 3 + 1))-$((r % 3 + 3))); do
			[ $peer = q ] && [ -z "$HAVE_SQ" ] && continue
			case $peer in
			n) root="$W/src" pre= ;;
			s) root="$MNT" pre="shim $ST 0 $MNT" ;;
			q) root="$W/sq" pre=; case $m in read | walk*) sq_remount "$W/img" "$W/sq" ;; esac ;;
			esac
			if [ $m = walkpy ]; then
				walkpy $pre $PY "$top/bench/walk.py" walk "$root/tree" >>"$W/$peer.$m"
			elif [ $m = walk ]; then
				rate $pre "$READER" walk "$root/tree" - >>"$W/$peer.$m"
			else
				# shellcheck disable=SC2086
				rate $pre "$READER" $t $a "$root" "$W/$l" >>"$W/$peer.$m"
			fi
		done
	done
	r=$((r + 1))
done

: >"$RES/small.dat"
for m in read open stat readdir walk walkpy; do
	n=$(med "$W/n.$m") s=$(med "$W/s.$m")
	q=-; [ -n "$HAVE_SQ" ] && q=$(med "$W/q.$m")
	echo "$m $n $s $q" >>"$RES/small.dat"
	case $m in
	read) what="4 KiB files read once (open+fstat+read+close)" u=files g=">= 3" gs="#13" gq=">= 10" gqs="#4" ;;
	open) what="open+close of 4 KiB files" u=opens g=">= 1.0" gs=ours gq="-" gqs= ;;
	stat) what="stat of 4 KiB files" u=stats g=">= 1.0" gs=ours gq="-" gqs= ;;
	readdir) what="readdir of 100-entry directories" u=entries g=">= 1.0" gs=ours gq="-" gqs= ;;
	walk) what="C walk (readdir + lstat) of $NWALK entries" u=entries g=">= 1.0" gs=ours gq="-" gqs= ;;
	walkpy) what="Python os.walk + os.stat of $NWALK entries" u=entries g=">= 1.0" gs=ours gq="-" gqs= ;;
	esac
	row "$what: shim vs tmpfs" "$(fmt_rate "$s" $u)" "tmpfs $(fmt_rate "$n" $u)" "$(ratio "$s" "$n")" "$g" "$gs"
	row "$what: shim vs squashfuse" "$(fmt_rate "$s" $u)" "squashfuse $(fmt_rate "$q" $u)" "$(ratio "$s" "$q")" "$gq" "$gqs"
done
note "Small files: $NF files of 4 KiB in $NDIR directories of 100; reads are one pass in random order (squashfuse remounted before each), open/stat/readdir are repeated passes for ${SECS}s (warm kernel caches); the walk tree has $NWALK entries (20 x $SUB directories of 100 files of 256 bytes), walked in Python (os.walk + os.stat of every entry) and in C (readdir + lstat), squashfuse remounted before each walk. Medians of $ROUNDS interleaved rounds (tmpfs, shim, squashfuse, the order rotating from round to round). The staged index takes $ixb bytes for $nent entries ($(awk -v a="$ixb" -v b="$nent" 'BEGIN{printf "%.0f", a/b}') bytes per entry)."
