#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/startab.sh: A/B of process start (fork + exec of /bin/true) among
# preloaded objects, in one run: the arms run interleaved, their order
# rotated each round, medians of ROUNDS.  Row 3.4 of bench/bystander.sh
# compares only the shim with no preload; this compares builds of the shim
# (or any object) side by side, with the minor faults per exec.
#   STARTAB_ARMS='NAME:KIND:PATH ...' sh bench/startab.sh [--quick] [DIR]
# KIND: none (no LD_PRELOAD; PATH ignored), plain (LD_PRELOAD=PATH alone),
# shim (LD_PRELOAD=PATH with a staged store in DSTAGE_STORE, as row 3.4).
# Default arms: none, an empty object, this tree's shim.  Prints, per arm:
# the median execs per CPU second (spawner + children), its ratio to the
# first arm, and the median minor faults per exec.
set -eu
. "$(dirname "$0")/benchlib.sh"
ROUNDS=${STARTAB_ROUNDS:-15}
NEXEC=${STARTAB_NEXEC:-400}
[ $QUICK = 1 ] && ROUNDS=7 NEXEC=200
echo 'int dstage_bench_empty_preload;' >"$W/empty.c"
gcc -shared -fPIC -O2 -o "$W/empty.so" "$W/empty.c"
ARMS=${STARTAB_ARMS:-"none:none:- empty:plain:$W/empty.so shim:shim:$PRELOAD"}
case $ARMS in *:shim:*)
	i=0
	while [ $i -lt 20 ]; do
		mkfiles "$W/src/d$(printf %03d $i)" 100 1024
		i=$((i + 1))
	done
	"$DSTAGE" pack -q --no-fsync -p 2 "$W/src" "$WS/pack"
	stage_nodes "$WS/pack" "$W/st" sab 1 -q
	ST=$(jobdir "$W/st" sab)
	MNT=$(mount_prefix) ;;
esac
one() { # KIND PATH: "execs per CPU second" "minor faults per exec"
	case $1 in
	none) set -- env ;;
	plain) set -- env LD_PRELOAD="$2" ;;
	shim) set -- env LD_PRELOAD="$2" DSTAGE_STORE="$ST" DSTAGE_NODE=0 DSTAGE_MOUNT="$MNT" ;;
	esac
	rate=$(/usr/bin/time -f %R -o "$W/time" "$@" "$READER" spawn /bin/true $NEXEC | awk '{ print $4 }')
	echo "$rate $(awk -v n=$NEXEC '{ f = $1 } END { printf "%.1f", f / n }' "$W/time")"
}
n=0
for a in $ARMS; do n=$((n + 1)); done
r=0
while [ $r -lt "$ROUNDS" ]; do
	k=0
	# rotate: round r starts at arm r mod n
	set -- $ARMS
	s=$((r % n))
	while [ $s -gt 0 ]; do
		first=$1
		shift
		set -- "$@" "$first"
		s=$((s - 1))
	done
	for a in "$@"; do
		name=${a%%:*} rest=${a#*:}
		kind=${rest%%:*} path=${rest#*:}
		one "$kind" "$path" >>"$W/arm.$name"
		k=$((k + 1))
	done
	r=$((r + 1))
done
base=
printf '%-12s %10s %7s %8s   (%s rounds x %s execs, load %s)\n' arm execs/cpu-s ratio faults "$ROUNDS" "$NEXEC" "$(cut -d' ' -f1-3 /proc/loadavg)"
for a in $ARMS; do
	name=${a%%:*}
	m=$(cut -d' ' -f1 "$W/arm.$name" | median)
	f=$(cut -d' ' -f2 "$W/arm.$name" | median)
	[ -n "$base" ] || base=$m
	printf '%-12s %10s %7s %8s\n' "$name" "$m" "$(ratio3 "$m" "$base")" "$f"
	cp "$W/arm.$name" "$RES/startab.$name"
done
