#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/modelcheck.sh: the measurements bench/model is calibrated with and
# checked against, on 1, 2 and 4 simulated nodes of this machine.
#   - MPI_Bcast of 1 MiB .. 256 MiB (QUICK: 64 MiB) between 2 ranks;
#   - the stage of a metadata-only pack (100k, QUICK: 20k names shaped as
#     ImageNet-21k's, `train/n01440764/n01440764_10007.JPEG`: hard links to 4
#     small files, bench/scale.py) and of a 1-file pack on 1 node: the
#     per-entry cost of the metadata phase, the node index's bytes per entry,
#     the stage's peak RSS per entry (a rank's, above the 1-file pack's) and
#     the service's RSS per entry once it serves (above the 1-file store's);
#   - a data set of 64 KiB files (512 MiB, QUICK: 128 MiB) plus a replicated
#     val/ (5%), staged on N = 1, 2, 4 nodes (median wall time of ROUNDS,
#     interleaved over N), the 1-file pack too (fixed cost at N); then served
#     on N nodes: the bytes each node fetches for epoch 1;
# written as key=value lines to RESULTS_DIR/modelcheck.dat.
#   sh bench/modelcheck.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
if [ $QUICK = 1 ]; then NF=2048 NM=20000 BMAX=67108864; else NF=8192 NM=100000 BMAX=268435456; fi
OUT="$RES/modelcheck.dat"
: >"$OUT"
kv() { echo "$1=$2" >>"$OUT"; }
kv nproc "$(nproc)"

# ---- broadcast ----
mpiexec.mpich -n 2 "$MPIBENCH" bcast 1048576 $BMAX 5 | awk '{ print "bcast." $2 "=" $3 }' >>"$OUT"

# ---- data sets ----
mkfiles "$W/one" 1 16
"$DSTAGE" pack -q --no-fsync "$W/one" "$WS/p-one"
/usr/bin/python3 "$top/bench/scale.py" make "$W/meta" $NM $(((NM + 1279) / 1280))
"$DSTAGE" pack -q --no-fsync -p 2 --replicate .seed "$W/meta" "$WS/p-meta"
rm -rf "$W/meta"
i=0
while [ $i -lt $((NF / 256)) ]; do
	mkfiles "$W/data/train/d$(printf %03d $i)" 256 65536
	i=$((i + 1))
done
mkfiles "$W/data/val" $((NF / 20)) 65536
"$DSTAGE" pack -q --no-fsync -p 16 --replicate val "$W/data" "$WS/p-data"
D=$(cat "$WS"/p-data/part-*.h5 | wc -c)
train=$(du -sb "$W/data/train" | cut -f1)
val=$(du -sb "$W/data/val" | cut -f1)
rm -rf "$W/data"
kv data.files "$((NF + NF / 20))"
kv data.train_bytes "$train"
kv data.val_bytes "$val"
kv data.pack_bytes "$D"
kv data.manifest_bytes "$(stat -c %s "$WS/p-data/index.h5")"
# entries: what ls lists, plus the root
n=$("$DSTAGE" ls "$WS/p-data" | wc -l)
kv data.entries $((n + 1))
n=$("$DSTAGE" ls "$WS/p-meta" | wc -l)
kv meta.entries $((n + 1))
kv meta.manifest_bytes "$(stat -c %s "$WS/p-meta/index.h5")"

# peak_kb CMD...: CMD's largest process's peak RSS in KiB (mpiexec's ranks
# included: a waited-for child's ru_maxrss covers its own waited-for
# descendants)
peak_kb() {
	/usr/bin/python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' "$@"
}
# serve_kb JOB: the anonymous RSS in KiB of JOB's service (1 node) once it
# serves (its own memory: the mapped index and store are counted apart)
serve_kb() {
	$ds_mpiexec -n 1 "$DSTAGE" serve --to "$W/st" --job "$1" --node-per-rank --seed 3 >"$W/serve.log" 2>&1 &
	_sp=$!
	_bgpids="$_bgpids $_sp"
	_st=$(jobdir "$W/st" "$1")/0/serve.status
	_c=0
	until grep -qs '^epoch\.0=' "$_st"; do
		_c=$((_c + 1))
		[ $_c -lt 2400 ] || { cat "$W/serve.log" >&2; exit 1; }
		sleep 0.05
	done
	sleep 1 # the first epoch's plan and prefetch settle
	_pid=$(sed -n 's/^pid=//p' "$_st")
	sed -n 's/^RssAnon:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$_pid/status"
	"$DSTAGE" stop --to "$W/st" --job "$1" >/dev/null 2>&1 || :
	wait $_sp || :
}

tstage() { # PACK N JOB: wall seconds of dstage stage
	t0=$(now)
	stage_nodes "$1" "$W/st" "$3" "$2" -q
	elapsed "$t0"
}
r=0
while [ $r -lt "$ROUNDS" ]; do
	for n in 1 2 4; do
		tstage "$WS/p-one" $n one >>"$W/t.one.$n"
		echo >>"$W/t.one.$n"
		"$DSTAGE" clean --to "$W/st" --job one >/dev/null
		# the first round's stores stay, for the figures below
		j=data$n
		[ $r = 0 ] || j=d$n.$r
		tstage "$WS/p-data" $n $j >>"$W/t.data.$n"
		echo >>"$W/t.data.$n"
		[ $r = 0 ] || "$DSTAGE" clean --to "$W/st" --job $j >/dev/null
	done
	tstage "$WS/p-meta" 1 meta >>"$W/t.meta.1"
	echo >>"$W/t.meta.1"
	if [ $r = 0 ]; then
		kv meta.index_bytes "$(stat -c %s "$(jobdir "$W/st" meta)/0/index")"
	fi
	"$DSTAGE" clean --to "$W/st" --job meta >/dev/null
	r=$((r + 1))
done
for n in 1 2 4; do
	kv "stage.one.$n" "$(med "$W/t.one.$n")"
	kv "stage.data.$n" "$(med "$W/t.data.$n")"
done
kv stage.meta.1 "$(med "$W/t.meta.1")"

# ---- memory per entry: the stage's rank, the service ----
kv stage.rss_kb.one "$(peak_kb $ds_mpiexec -n 1 "$DSTAGE" stage "$WS/p-one" --to "$W/st" --job mone --node-per-rank -q)"
kv stage.rss_kb.meta "$(peak_kb $ds_mpiexec -n 1 "$DSTAGE" stage "$WS/p-meta" --to "$W/st" --job mmeta --node-per-rank -q)"
kv serve.rss_kb.one "$(serve_kb mone)"
kv serve.rss_kb.meta "$(serve_kb mmeta)"
"$DSTAGE" clean --to "$W/st" --job mone >/dev/null
"$DSTAGE" clean --to "$W/st" --job mmeta >/dev/null

# ---- what the first round's stores hold, and what serve moves ----
for n in 1 2 4; do
	JD=$(jobdir "$W/st" data$n)
	kv "index_bytes.$n" "$(stat -c %s "$JD/0/index")"
	k=0
	while [ $k -lt $n ]; do
		kv "store_bytes.$n.$k" "$(stat -c %s "$JD/$k/store")"
		k=$((k + 1))
	done
	mpiexec.mpich -n $n "$DSTAGE" serve --to "$W/st" --job data$n --node-per-rank --seed 3 >"$W/serve.log" 2>&1 &
	sp=$!
	_bgpids="$_bgpids $sp"
	k=0
	while [ $k -lt $n ]; do
		c=0
		until grep -qs '^epoch\.1=' "$JD/$k/serve.status"; do
			c=$((c + 1))
			[ $c -lt 2400 ] || { cat "$W/serve.log" >&2; exit 1; }
			sleep 0.05
		done
		sed -n 's/^epoch\.1=.*share_bytes=\([0-9]*\) .*moved_bytes=\([0-9]*\) .*fetch_s=\([0-9.]*\).*/\1 \2 \3/p' "$JD/$k/serve.status" |
			{ read -r sb mb fs; kv "share_bytes.$n.$k" "$sb"; kv "moved_bytes.$n.$k" "$mb"; kv "fetch_s.$n.$k" "$fs"; }
		k=$((k + 1))
	done
	"$DSTAGE" stop --to "$W/st" --job data$n >/dev/null 2>&1 || :
	wait $sp || :
	"$DSTAGE" clean --to "$W/st" --job data$n >/dev/null
done
say "done: $(wc -l <"$OUT") figures"
