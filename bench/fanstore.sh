#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/fanstore.sh: FanStore's read benchmark, reproduced (row 1).
# Files of 128 KiB, 512 KiB, 2 MiB and 8 MiB; every file read once
# (open + fstat + read to EOF + close, random order) by each of 1 or 2
# reader processes; through the shim (a 1-node store in /dev/shm) vs the
# same files on tmpfs read natively vs a squashfs image of them
# (mksquashfs -noI -noD -noF) mounted with squashfuse, remounted before
# each of its runs so every run starts with cold FUSE caches.
# Interleaved native, shim, squashfuse per round; medians of ROUNDS.
#   sh bench/fanstore.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"

if [ $QUICK = 1 ]; then MB=64; else MB=256; fi
# single passes of a few tens of ms: more rounds than elsewhere
ROUNDS=$((2 * ROUNDS + 1))
SIZES="128 512 2048 8192" # KiB
say "files of 128 KiB..8 MiB, $MB MiB per size, $ROUNDS rounds"
for s in $SIZES; do
	mkfiles "$W/src/k$s" $((MB * 1024 / s)) $((s * 1024))
	(cd "$W/src" && ls "k$s" | sed "s,^,k$s/," | shuf) >"$W/k$s.list"
done
"$DSTAGE" pack -q --no-fsync -p 4 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" fs 1 -q
ST=$(jobdir "$W/st" fs)
MNT=$(mount_prefix)
HAVE_SQ=
if have_squashfuse; then
	sq_make "$W/src" "$W/img" && sq_mount "$W/img" "$W/sq" && HAVE_SQ=1
fi

# one run: prints "files_per_s bytes_per_s"
run() { "$@" | awk '{ print $4, $5 }'; }
r=0
while [ $r -lt "$ROUNDS" ]; do
	for s in $SIZES; do
		for P in 1 2; do
			# the order rotates from round to round (n s q, s q n, q n s)
			for peer in $(echo "n s q n s q" | cut -d' ' -f$((r % 3 + 1))-$((r % 3 + 3))); do
				case $peer in
				n) run "$READER" -P $P read "$W/src" "$W/k$s.list" >>"$W/n.$s.$P" ;;
				s) run shim "$ST" 0 "$MNT" "$READER" -P $P read "$MNT" "$W/k$s.list" >>"$W/s.$s.$P" ;;
				q)
					if [ -n "$HAVE_SQ" ]; then
						sq_remount "$W/img" "$W/sq"
						run "$READER" -P $P read "$W/sq" "$W/k$s.list" >>"$W/q.$s.$P"
					fi
					;;
				esac
			done
		done
	done
	r=$((r + 1))
done

col() { awk -v c="$2" '{ print $c }' "$1" | median; }
: >"$RES/fanstore.dat"
for s in $SIZES; do
	# issue 4: >= 10x squashfuse up to 128 KiB, >= 0.95x tmpfs at 2 MiB (8 MiB
	# interpolated); issue 13: >= 1.2x tmpfs at 128 KiB, >= 1.1x at 512 KiB
	case $s in
	128) goal=">= 1.2" gs="#13" gq=">= 10" gqs="#4" ;;
	512) goal=">= 1.1" gs="#13" gq="-" gqs="" ;;
	2048) goal=">= 0.95" gs="#4" gq="-" gqs="" ;;
	*) goal=">= 0.95" gs="ours" gq="-" gqs="" ;;
	esac
	label=$(awk -v s="$s" 'BEGIN { if (s >= 1024) printf "%d MiB", s / 1024; else printf "%d KiB", s }')
	for P in 1 2; do
		nf=$(col "$W/n.$s.$P" 1) nb=$(col "$W/n.$s.$P" 2)
		sf=$(col "$W/s.$s.$P" 1) sb=$(col "$W/s.$s.$P" 2)
		if [ -n "$HAVE_SQ" ]; then qf=$(col "$W/q.$s.$P" 1) qb=$(col "$W/q.$s.$P" 2); else qf=- qb=-; fi
		echo "$s $P $nb $sb $qb $nf $sf $qf" >>"$RES/fanstore.dat"
		rd=$([ $P = 1 ] && echo "1 reader" || echo "2 readers")
		row "FanStore read-once, $label files, $rd: shim vs tmpfs" \
			"$(fmt_rate "$sf" files) ($(fmt_bps "$sb"))" "tmpfs $(fmt_rate "$nf" files) ($(fmt_bps "$nb"))" \
			"$(ratio "$sf" "$nf")" "$goal" "$gs"
		row "FanStore read-once, $label files, $rd: shim vs squashfuse" \
			"$(fmt_rate "$sf" files) ($(fmt_bps "$sb"))" "squashfuse $(fmt_rate "$qf" files) ($(fmt_bps "$qb"))" \
			"$(ratio "$sf" "$qf")" "$gq" "$gqs"
	done
done
note "FanStore read-once: $MB MiB of files per size ($(for s in $SIZES; do printf '%s ' $((MB * 1024 / s)); done)files of $SIZES KiB), each read once by each reader in random order (reader k of 2 starts at k/2 of the list); squashfuse remounted before each of its runs; medians of $ROUNDS interleaved rounds (native, shim, squashfuse, the order rotating from round to round)."
