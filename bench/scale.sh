#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# bench/scale.sh: what a reader pays at millions of files (issue 27).
#   - DstageFiles + EpochSampler (reader 0 and reader 7 of 8 on node 0 of 2)
#     through the shim vs torchvision ImageFolder + DistributedSampler (rank
#     0 of 16, the same share) on tmpfs (ext4 past its inodes): seconds, CPU seconds and private
#     memory per sample of the reader's share, in a fresh process each;
#   - a reader's epoch list (open + read of .dstage/epochs/0/L-of-8) for
#     reader 0 and reader 7 of 8, per entry of its share, vs
#     DistributedSampler's index list of the same share; with the service
#     running (it publishes each epoch's share: the shim slices it), and
#     reader 0's without it (the shim computes the share);
#   - the service (svc_rows): start until serving and until epoch 0's
#     prefetch starts/ends, an epoch switch until the next epoch is planned
#     and its prefetch starts/ends, --timeout 2 trips;
#   - the node index (ix_rows, t/helpers/ixscale): bytes per entry at
#     ImageNet-21k's shape (N names in 21,841 class directories), the
#     builder's peak memory, the full check, and lookups + stat of 2,000
#     random files in a fresh process (faults, us) with the index on tmpfs,
#     kept in 2 MiB pages as stage leaves it (docs/shim.md);
# on a metadata-only tree: N hard links to 4 small files, ImageNet-shaped
# names (1280 per class directory), packed (dstage pack, the 4 files under
# --replicate) and staged on 2 simulated nodes.  N: 128k (--quick), 1.28M
# and 14M (full; ImageNet-21k's size); SCALE_N="N ..." to choose, e.g.
# "1280000 2000000" with --quick (fewer rounds).  The tree goes on the
# node-local scratch (tmpfs) when its free inodes hold N names (tmpfs
# counts every hard link), else on the shared scratch (ext4 on this box;
# the note says which; SCALE_TREE=shared puts it there always).  A size is
# run only when the machine has the memory it needs (~1 KB per name: two
# stage ranks, two node indexes, the ImageFolder process;
# SCALE_MEM_B_PER_NAME to change), else a note says why it was left out.
# Rounds interleaved, rotating which goes first; medians.
#   sh bench/scale.sh [--quick] [RESULTS_DIR]
set -eu
. "$(dirname "$0")/benchlib.sh"
PY=/usr/bin/python3
if [ $QUICK = 1 ]; then SIZES=${SCALE_N:-128000}; else SIZES=${SCALE_N:-1280000 14000000}; fi
$PY -c "import torch, torchvision" 2>/dev/null && HAVE_TV=1 || HAVE_TV=
: >"$RES/scale.dat"

# whether this machine has the memory for N names: 0, or 1 and a note why not
fits() {
	_need=$(($1 * ${SCALE_MEM_B_PER_NAME:-1000}))
	_avail=$(awk '$1 == "MemAvailable:" { printf "%.0f", $2 * 1024 }' /proc/meminfo)
	[ "$_avail" -ge "$_need" ] && return 0
	note "Scale, $1 names: not run here: it needs ~$((_need >> 30)) GiB of memory (two stage ranks, two node indexes, the ImageFolder process: ~${SCALE_MEM_B_PER_NAME:-1000} B per name), $((_avail >> 30)) GiB available."
	say "$1 names left out: ~$((_need >> 30)) GiB needed, $((_avail >> 30)) GiB available"
	return 1
}

one_size() {
N=$1
CLASSES=$(((N + 1279) / 1280))
# the tree: on tmpfs when its free inodes hold it, else on the shared scratch
SRC=$W/src TREEFS=tmpfs
case ${SCALE_TREE:-} in
shared) SRC=$WS/src TREEFS=$(stat -f -c %T "$BENCH_SHARED" | sed "s|ext2/ext3|ext4|") ;;
"") [ "$(df -Pi "$W" | awk 'NR == 2 { print $4 }')" -gt $((N + N / 10)) ] ||
	SRC=$WS/src TREEFS=$(stat -f -c %T "$BENCH_SHARED" | sed "s|ext2/ext3|ext4|") ;;
esac
rm -rf "$W/src" "$WS/src" "$W/st" "$WS/pack" "$W"/*.txt
say "$N names in $CLASSES classes (hard links on $TREEFS), 2 nodes, 8 readers a node; $ROUNDS rounds"
t0=$(now)
$PY "$top/bench/scale.py" make "$SRC" "$N" "$CLASSES"
say "tree made in $(elapsed "$t0") s"
t0=$(now)
"$DSTAGE" pack -q --no-fsync -p 8 --replicate .seed "$SRC" "$WS/pack"
say "packed in $(elapsed "$t0") s"
t0=$(now)
stage_nodes "$WS/pack" "$W/st" sc 2 -q
say "staged in $(elapsed "$t0") s"
ST=$(jobdir "$W/st" sc)
MNT=$(mount_prefix)
SHARE=$(((N / 2 + 7) / 8))

# one measurement: NAME, then scale.py's line into $W/NAME.txt
run() {
	name=$1
	shift
	"$@" >>"$W/$name.txt" || { say "$name failed"; exit 1; }
}
# without the service: the shim computes the share for each list
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	run lc shim "$ST" 0 "$MNT" $PY "$top/bench/scale.py" list 0 8
	r=$((r + 1))
done
# the service up (readers of a job read with it): it publishes the shares
bench_serve_start sc --seed 1
r=0
while [ "$r" -lt "$ROUNDS" ]; do
	for m in $(echo "ds d7 fo l0 l7 di ds d7 fo l0 l7 di" | cut -d' ' -f$((r % 6 + 1))-$((r % 6 + 6))); do
		case $m in
		ds) run ds shim "$ST" 0 "$MNT" env PYTHONPATH="$top/io/python" $PY "$top/bench/scale.py" dstage 0 ;;
		d7) run d7 shim "$ST" 0 "$MNT" env PYTHONPATH="$top/io/python" $PY "$top/bench/scale.py" dstage 7 ;;
		fo) [ -n "$HAVE_TV" ] && run fo $PY "$top/bench/scale.py" folder "$SRC/train" 16 ;;
		l0) run l0 shim "$ST" 0 "$MNT" $PY "$top/bench/scale.py" list 0 8 ;;
		l7) run l7 shim "$ST" 0 "$MNT" $PY "$top/bench/scale.py" list 7 8 ;;
		di) [ -n "$HAVE_TV" ] && run di $PY "$top/bench/scale.py" dist "$N" 16 ;;
		esac
	done
	r=$((r + 1))
done
bench_serve_stop sc

# median of field F (1 s, 2 held bytes, 3 peak bytes, 4 samples, 5 CPU s)
# of NAME, per sample of the share (field 4)
per() {
	[ -s "$W/$1.txt" ] || { echo -; return; }
	awk -v f="$2" '{ print $f / $4 }' "$W/$1.txt" | median
}
us() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.2f", v * 1e6 }'; }
bb() { awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else printf "%.0f", v }'; }
ds_t=$(us "$(per ds 1)") fo_t=$(us "$(per fo 1)") d7_t=$(us "$(per d7 1)")
ds_c=$(us "$(per ds 5)") fo_c=$(us "$(per fo 5)") d7_c=$(us "$(per d7 5)")
ds_m=$(bb "$(per ds 2)") fo_m=$(bb "$(per fo 2)") d7_m=$(bb "$(per d7 2)")
ds_p=$(bb "$(per ds 3)") fo_p=$(bb "$(per fo 3)")
l0_t=$(us "$(per l0 1)") l7_t=$(us "$(per l7 1)") di_t=$(us "$(per di 1)") lc_t=$(us "$(per lc 1)")
l0_c=$(us "$(per l0 5)") l7_c=$(us "$(per l7 5)") lc_c=$(us "$(per lc 5)")
nk=$(awk -v n="$N" 'BEGIN { if (n >= 1e6) printf "%.2fM", n / 1e6; else printf "%.0fk", n / 1e3 }')
row "DstageFiles+EpochSampler, $nk files, reader 0 of 8 (share $SHARE): time per sample of the share" \
	"$ds_t us" "ImageFolder+DistributedSampler $fo_t us" "$(ratio "$ds_t" "$fo_t")" "-" "#27"
row "DstageFiles+EpochSampler, $nk files, reader 0 of 8: CPU time per sample of the share" \
	"$ds_c us" "goal 1 us" "$(ratio "$ds_c" 1)" "<= 1" "#27"
row "DstageFiles+EpochSampler, $nk files, reader 7 of 8: CPU time per sample of the share" \
	"$d7_c us" "reader 0 $ds_c us" "$(ratio "$d7_c" "$ds_c")" "<= 1.5" "ours"
row "DstageFiles+EpochSampler, $nk files: private memory per sample of the share" \
	"$ds_m B" "ImageFolder+DistributedSampler $fo_m B" "$(ratio "$ds_m" "$fo_m")" "-" "#27"
row "DstageFiles+EpochSampler, $nk files: private memory per sample of the share, vs the goal" \
	"$ds_m B" "goal 64 B" "$(ratio "$ds_m" 64)" "<= 1" "#27"
row "epoch list of reader 0 of 8, $nk files: per entry of its share" \
	"$l0_t us" "DistributedSampler indices $di_t us" "$(ratio "$l0_t" "$di_t")" "-" "#27"
row "epoch list of reader 0 of 8, $nk files: CPU per entry of its share" \
	"$l0_c us" "goal 0.3 us" "$(ratio "$l0_c" 0.3)" "<= 1" "#27"
row "epoch list of reader 7 of 8, $nk files: CPU per entry of its share" \
	"$l7_c us" "reader 0 $l0_c us" "$(ratio "$l7_c" "$l0_c")" "<= 1.5" "ours"
row "epoch list of reader 0 of 8, $nk files, service up vs not (share published vs computed)" \
	"$l0_t us" "computed $lc_t us" "$(ratio "$l0_t" "$lc_t")" "-" "#27"
{
	echo "# $N names"
	echo "dstage_sampler_us_per_sample_$N $ds_t"
	echo "dstage_sampler_cpu_us_per_sample_$N $ds_c"
	echo "dstage_sampler_reader7_cpu_us_per_sample_$N $d7_c"
	echo "dstage_sampler_private_B_per_sample_$N $ds_m"
	echo "dstage_sampler_reader7_private_B_per_sample_$N $d7_m"
	echo "dstage_sampler_peak_B_per_sample_$N $ds_p"
	echo "imagefolder_us_per_sample_$N $fo_t"
	echo "imagefolder_cpu_us_per_sample_$N $fo_c"
	echo "imagefolder_private_B_per_sample_$N $fo_m"
	echo "imagefolder_peak_B_per_sample_$N $fo_p"
	echo "list_reader0_us_per_entry_$N $l0_t"
	echo "list_reader0_cpu_us_per_entry_$N $l0_c"
	echo "list_reader7_us_per_entry_$N $l7_t"
	echo "list_reader7_cpu_us_per_entry_$N $l7_c"
	echo "list_reader0_computed_us_per_entry_$N $lc_t"
	echo "list_reader0_computed_cpu_us_per_entry_$N $lc_c"
	echo "distsampler_us_per_index_$N $di_t"
} >>"$RES/scale.dat"
note "Scale (issue 27), $nk: $N names (hard links to 4 files of 48-96 B; ImageNet-shaped, $CLASSES class directories of up to 1280), packed and staged on 2 simulated nodes; a reader's share is N/16 = $SHARE samples (reader 0 of 8 on node 0; DistributedSampler rank 0 of 16).  Each figure is one fresh Python process (/usr/bin/python3), timed from after its imports: DstageFiles(\"train\") + EpochSampler(rank 0 or 7 of 8) + iterating it, through the shim; ImageFolder(the tree, on $TREEFS) + DistributedSampler + iterating it, natively; open + read of .dstage/epochs/0/L-of-8 through the shim, the median of 5 in one process once the shim has started (with dstage serve running, which publishes each epoch's share for the shim to slice; reader 0's also without it, the shim computing the share); DistributedSampler's index list alone.  CPU: user + system seconds of the same span (getrusage), what the wall time is on an idle core.  Memory: the anonymous (private) memory held at the end over that after the imports; the peak RSS, which also counts the mapped index pages it touched (shared by the node's processes), was $ds_p B per sample (dstage) and $fo_p B (ImageFolder).  Goals of issue 27: <= 1 us and <= 64 B per sample of the share, a list in <= 0.3 us per entry whatever the reader number.  Medians of $ROUNDS rounds, interleaved in rotating order.$( [ -n "$HAVE_TV" ] || echo '  torchvision missing: no ImageFolder/DistributedSampler figures.')"
	svc_rows
	ix_rows
}

# ---- the node index at this size (issue 27: <= 48 B per entry) -------------
# ImageNet-21k-shaped names (21,841 class directories; below 1.28M names,
# 59 files a class as at 1.28M), built and fully checked by ixscale (the
# index builder alone: no pack); lookups in a fresh process, the index in
# the node-local scratch (tmpfs, as a node store), median of $ROUNDS.
ix_rows() {
	IXC=21841
	[ "$N" -ge 1280000 ] || IXC=$(((N + 58) / 59))
	"$top/build/t/ixscale" build "$N" "$IXC" "$W/ix" >"$W/ix.txt" || { say "ixscale build failed"; exit 1; }
	r=0
	: >"$W/ixl.txt"
	while [ "$r" -lt "$ROUNDS" ]; do
		"$top/build/t/ixscale" lookup "$W/ix" "$N" "$IXC" 2000 | tr '\n' ' ' >>"$W/ixl.txt"
		echo >>"$W/ixl.txt"
		r=$((r + 1))
	done
	rm -f "$W/ix"
	ixv() { awk -v k="$1" '$1 == k { print $2 }' "$W/ix.txt"; }
	ixl() { awk -v k="$1" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$W/ixl.txt" | median; }
	ix_b=$(ixv bytes_per_entry) ix_peak=$(ixv builder_peak_B_per_entry) ix_chk=$(ixv full_check_cpu_ms)
	ix_f=$(ixl lookup_faults_per_file) ix_us=$(ixl lookup_us_per_file) ix_cpu=$(ixl lookup_cpu_us_per_file)
	ix_pmd=$(ixl lookup_pmd_mapped_kB)
	row "node index, $nk ImageNet-21k-shaped names: bytes per entry (all sections)" "$ix_b B" "goal 48 B" "$(ratio "$ix_b" 48)" "<= 1" "#27"
	row "node index, $nk names: the builder's peak memory per entry" "$ix_peak B" "-" "-" "-" "#27"
	row "node index, $nk names: the full check (service start, dstage epoch), CPU" "$ix_chk ms" "-" "-" "-" "#27"
	row "node index, $nk names: lookup + stat per file in a fresh process" "$ix_us us, $ix_f faults" "CPU $ix_cpu us" "-" "-" "#27"
	{
		echo "index_B_per_entry_$N $ix_b"
		for k in rows_B dirs_B runs_B blocks_B names_B samples_B builder_held_B_per_entry builder_peak_B_per_entry full_check_ms full_check_cpu_ms hugify_ms hugify_cpu_ms; do
			echo "index_${k}_$N $(ixv $k)"
		done
		echo "index_lookup_faults_per_file_$N $ix_f"
		echo "index_lookup_us_per_file_$N $ix_us"
		echo "index_lookup_cpu_us_per_file_$N $ix_cpu"
		echo "index_lookup_pmd_mapped_kB_$N $ix_pmd"
	} >>"$RES/scale.dat"
	note "Node index (issue 27), $N ImageNet-21k-shaped names in $IXC class directories (train/<wnid>/<wnid>_<n>.JPEG, file numbers spread over 1-20,000), built by build/t/ixscale (the index builder, then the full check): $ix_b bytes per entry ($(ixv rows_B) rows, $(ixv names_B) names, $(ixv samples_B) samples, $(ixv runs_B) runs, $(ixv dirs_B) directories, $(ixv blocks_B) name blocks); the builder's peak $ix_peak B per entry; the full check $(ixv full_check_ms) ms ($ix_chk ms CPU); then, as stage's ds_index_write does, its page cache collapsed into 2 MiB pages ($(ixv hugify): $(ixv hugify_ms) ms, $(ixv hugify_cpu_ms) ms CPU; docs/shim.md \"The index in 2 MiB pages\").  A fresh process maps it from tmpfs as the shim does (2 MiB-aligned) and looks up and stats 2,000 random files: $ix_us us and $ix_f page faults per file ($ix_cpu us CPU), $ix_pmd kB of the index mapped in 2 MiB pages, median of $ROUNDS."
}

# ---- the service at this size (issue 27's service side) --------------------
# (svc_rows, at the end of one_size)
# Per round, on the same store: `dstage serve` started (--timeout 2, debug
# log) until both nodes serve, until epoch 0's prefetch starts and ends;
# then readers enter epoch 1 on both nodes and the service, which follows,
# plans epoch 2 (share published), starts and ends its prefetch.  Times
# from the start, and from the moment both readers' list opens returned
# (their own cost not counted; the service learnt of the epoch during
# them); the plans' own seconds from the service's debug log; every "no
# answer" / watchdog trip counted.
svc_uptime() { cut -d' ' -f1 /proc/uptime; } # CLOCK_MONOTONIC-like seconds, as serve.status's t0/t1
svc_both() { grep -qs "$1" "$ST/0/serve.status" && grep -qs "$1" "$ST/1/serve.status"; }
svc_t0() { grep -h "^epoch\.$1=" "$ST/0/serve.status" "$ST/1/serve.status" | sed 's/.* t0=\([0-9.]*\) .*/\1/' | sort -g | tail -1; }
svc_until() {
	_k=0
	while ! eval "$1"; do
		_k=$((_k + 1))
		[ $_k -lt 6000 ] || { say "service: timed out waiting for: $1"; cat "$W/serve.log" >&2; exit 1; }
		sleep 0.02
	done
}
svc_round() {
	: >"$W/serve.log"
	m0=$(svc_uptime) t0=$(now)
	bench_serve_start sc DSTAGE_LOG=debug --seed 1 --timeout 2
	up=$(elapsed "$t0")
	svc_until 'svc_both "^epoch\.0="'
	e0=$(elapsed "$t0")
	p0=$(awk -v a="$(svc_t0 0)" -v b="$m0" 'BEGIN { printf "%.3f", a - b }')
	svc_until 'svc_both "^epoch\.1="'
	rp=
	for k in 0 1; do
		shim "$ST" $k "$MNT" sh -c "exec 3<'$MNT/.dstage/epochs/1/all'" &
		rp="$rp $!"
	done
	wait $rp
	m1=$(svc_uptime) t1=$(now)
	svc_until 'test -s "$ST/0/epochs/share.2" && test -s "$ST/1/epochs/share.2"'
	pl=$(elapsed "$t1")
	svc_until 'svc_both "^epoch\.2="'
	f2=$(elapsed "$t1")
	s2=$(awk -v a="$(svc_t0 2)" -v b="$m1" 'BEGIN { printf "%.3f", a - b }')
	# node 0's epoch 0: samples fetched and the gets that fetched them
	fe=$(sed -n 's/^epoch\.0=.* fetched=\([0-9]*\) .*/\1/p' "$ST/0/serve.status")
	ge=$(sed -n 's/^epoch\.0=.* gets=\([0-9]*\).*/\1/p' "$ST/0/serve.status")
	bench_serve_stop sc
	echo "$up $p0 $e0 $pl $s2 $f2 ${fe:-0} ${ge:-0}" >>"$W/svc.txt"
	sed -n 's/.*serving [0-9.]* s after the start: the store and its index \([0-9.]*\) s, the first epoch.s plan \([0-9.]*\) s.*/\1 \2/p' "$W/serve.log" >>"$W/svc-start.txt"
	sed -n 's/.*epoch [0-9]* planned in \([0-9.]*\) s.*/\1/p' "$W/serve.log" >>"$W/svc-plan.txt"
	grep -cE "no answer|has not returned" "$W/serve.log" >>"$W/svc-trips.txt" || :
}
# the rows of one size: called at the end of one_size, on its store
svc_rows() {
	r=0
	while [ "$r" -lt "$ROUNDS" ]; do
		svc_round
		r=$((r + 1))
	done
	svc() { awk -v f="$1" '{ print $f }' "$W/svc.txt" | median; }
	svc_up=$(svc 1) svc_p0=$(svc 2) svc_e0=$(svc 3) svc_pl=$(svc 4) svc_s2=$(svc 5) svc_f2=$(svc 6)
	svc_fe=$(svc 7) svc_ge=$(svc 8)
	svc_ix=$(awk '{ print $1 }' "$W/svc-start.txt" | median) svc_p01=$(awk '{ print $2 }' "$W/svc-start.txt" | median)
	svc_plan=$(median <"$W/svc-plan.txt")
	svc_trips=$(awk '{ s += $1 } END { print s + 0 }' "$W/svc-trips.txt")
	row "service start, $nk samples, 2 nodes: serving (index checked, epoch 0 planned)" "$svc_up s" "-" "$svc_up" "-" "#27"
	row "service start, $nk samples: epoch 0's prefetch starts / ends" "$svc_p0 / $svc_e0 s" "-" "$svc_p0" "-" "#27"
	row "epoch switch, $nk samples: from the readers' epoch to the next epoch planned (share published)" "$svc_pl s" "-" "$svc_pl" "-" "#27"
	row "epoch switch, $nk samples: to its prefetch started / ended" "$svc_s2 / $svc_f2 s" "-" "$svc_s2" "-" "#27"
	row "service, $nk samples: MPI gets for epoch 0's remote samples (node 0)" "$svc_ge gets / $svc_fe samples" "-" "$svc_ge" "-" "#27"
	row "service, $nk samples: --timeout 2 trips over $ROUNDS starts and switches" "$svc_trips" "-" "$svc_trips" "<= 0" "#27"
	{
		echo "service_serving_s_$N $svc_up"
		echo "service_index_s_$N $svc_ix"
		echo "service_plans01_s_$N $svc_p01"
		echo "service_epoch0_prefetch_start_s_$N $svc_p0"
		echo "service_epoch0_prefetched_s_$N $svc_e0"
		echo "service_plan_s_$N $svc_plan"
		echo "service_switch_planned_s_$N $svc_pl"
		echo "service_switch_prefetch_start_s_$N $svc_s2"
		echo "service_switch_prefetched_s_$N $svc_f2"
		echo "service_timeout_trips_$N $svc_trips"
		echo "service_epoch0_fetched_$N $svc_fe"
		echo "service_epoch0_gets_$N $svc_ge"
	} >>"$RES/scale.dat"
	note "Service (issue 27's service side), $N samples on the same 2 simulated nodes, $ROUNDS rounds (medians): dstage serve --timeout 2 started until both nodes serve ($svc_up s: the store's index opened (and checked, where it is not checked beside the plan) $svc_ix s, epoch 0 planned $svc_p01 s, from the service's debug log; epoch 1 is planned once epoch 0's prefetch has started), until epoch 0's prefetch starts ($svc_p0 s) and ends ($svc_e0 s); then readers enter epoch 1 on both nodes, and from the moment both readers' list opens returned: epoch 2 planned and its share published $svc_pl s (a plan alone, in the planner thread: $svc_plan s), its prefetch started $svc_s2 s and ended $svc_f2 s.  The prefetch's own time is the gets' (bench/exchange.sh): one MPI_Get per run of samples adjacent in the holder's store, $svc_ge gets for node 0's $svc_fe remote samples of epoch 0.  Planning runs off the main thread: --timeout 2 trips: $svc_trips.  Issue 27's goals at 14M: epoch 0 ready <= 5 s after start, a switch <= 2 s, no 2 s --timeout trip."
}

for n in $SIZES; do
	fits "$n" && one_size "$n"
	rm -rf "$W/src" "$WS/src" "$W/st" "$WS/pack"
done
