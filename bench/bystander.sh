#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/bystander.sh: what the shim costs calls it does not serve (row 3).
# The same native calls on /dev/shm with and without LD_PRELOAD of the shim
# (with a staged 20k-file store in its environment): open+fstat+read+close
# of a 4 KiB file, stat, open+close, and the start of a process (fork +
# exec of /bin/true: the shim loads and initialises in every process).
# Interleaved without/with, medians of ROUNDS.  The rates are per CPU
# second (user + system time of the process, and of its children for the
# process starts): what the shim adds is CPU work, and CPU time is much less
# disturbed than wall time by the other jobs sharing the machine.
#   sh bench/bystander.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
# cheap runs: more rounds than elsewhere, as the differences sought are small
ROUNDS=$((2 * ROUNDS + 1))
if [ $QUICK = 1 ]; then SECS=0.1 NEXEC=200; else SECS=0.3 NEXEC=500; fi
i=0
while [ $i -lt 200 ]; do
	mkfiles "$W/src/d$(printf %03d $i)" 100 1024
	i=$((i + 1))
done
"$DSTAGE" pack -q --no-fsync -p 2 "$W/src" "$WS/pack"
stage_nodes "$WS/pack" "$W/st" by 1 -q
ST=$(jobdir "$W/st" by)
MNT=$(mount_prefix)
F="$W/src/d000/f000000"
# the floor of any LD_PRELOAD: an object with nothing in it, loaded the same
# way (what the dynamic loader's mapping of a second object costs alone)
echo 'int dstage_bench_empty_preload;' >"$W/empty.c"
gcc -shared -fPIC -O2 -o "$W/empty.so" "$W/empty.c"
execs() { # fork + exec of /bin/true per CPU second (the spawner + children)
	"$@" "$READER" spawn /bin/true $NEXEC | awk '{ print $4 }'
}
r=0
while [ $r -lt "$ROUNDS" ]; do
	for m in read stat open; do
		"$READER" outside $m "$F" $SECS | awk '{ print $6 }' >>"$W/n.$m"
		shim "$ST" 0 "$MNT" "$READER" outside $m "$F" $SECS | awk '{ print $6 }' >>"$W/s.$m"
	done
	execs env >>"$W/n.exec"
	execs shim "$ST" 0 "$MNT" >>"$W/s.exec"
	execs env LD_PRELOAD="$W/empty.so" >>"$W/e.exec"
	r=$((r + 1))
done
: >"$RES/bystander.dat"
for m in read stat open exec; do
	n=$(med "$W/n.$m") s=$(med "$W/s.$m")
	echo "$m $n $s" >>"$RES/bystander.dat"
	case $m in
	read) what="outside the prefix: open+fstat+read+close, 4 KiB file on /dev/shm" u=files g="#4" ;;
	stat) what="outside the prefix: stat" u=stats g="#4" ;;
	open) what="outside the prefix: open+close" u=opens g="#4" ;;
	exec) what="process start (fork + exec /bin/true) with the shim loaded" u=execs g="#13" ;;
	esac
	row "$what (per CPU second)" "with shim $(fmt_rate "$s" $u)" "without $(fmt_rate "$n" $u)" "$(ratio3 "$s" "$n")" ">= 0.95" "$g"
done
n=$(med "$W/n.exec") e=$(med "$W/e.exec") s=$(med "$W/s.exec")
echo "exec-empty $n $e" >>"$RES/bystander.dat"
row "process start with an empty LD_PRELOAD object (the floor of any preload; per CPU second)" "with it $(fmt_rate "$e" execs)" "without $(fmt_rate "$n" execs)" "$(ratio3 "$e" "$n")" "-" "ours"
row "process start: the shim against the empty object (what the shim adds beyond loading an object)" "with shim $(fmt_rate "$s" execs)" "empty object $(fmt_rate "$e" execs)" "$(ratio3 "$s" "$e")" "-" "ours"
note "Bystanders: the same calls on a /dev/shm file with and without LD_PRELOAD (DSTAGE_STORE pointing at a staged store of 20k files), ${SECS}s per run, rates per CPU second of the process (getrusage); process start: $NEXEC fork + exec of /bin/true, per CPU second of the spawner and its children, also with an empty preloaded object (the floor); medians of $ROUNDS interleaved rounds."
