#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Multi-host figures on the bed of t/lib-hosts.sh (as root): H hosts (4),
# each with its own /dev/shm and network namespace, MPI (MPICH ch4:ucx) over
# TCP through veth pairs and a Linux bridge (UCX_TLS=tcp,self).  Side by
# side, interleaved (A B C A B C ...), medians of RUNS rounds:
#   1. stage-in of the pack: `srun -NH dstage stage` vs `srun -NH cp -r` of
#      the pack and `srun -NH tar -x` of the tree, each from the shared FS
#      into every host's /dev/shm; bytes read from the shared FS;
#   2. the epoch exchange over TCP: in one job, stage + serve (global
#      shuffle); per round every host opens its list of epoch r, every
#      service fetches its share of epoch r+1 from the others (MPI_Get), time
#      and bytes from each node's serve.status (the slowest node's time, the
#      mean bytes); peer: one MPI_Alltoallv of the same bytes per rank in
#      128 KiB pieces over the same links (bench/mpibench.c, H ranks on H
#      hosts), run while the services idle; the services' CPU seconds over
#      the whole exchange part;
#   3. reads through the shim on host 1 with the service up (--locality 1:
#      nothing prefetched, a remote read is an MPI_Get over TCP): 4 KiB and
#      128 KiB files held on host 1 (local) vs held only on other hosts.
# Usage: bench/hosts.sh [--quick] [RESULTS_DIR]   (writes hosts.md there)
# BENCH_HOSTS sets H (2..4).

quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$SRCDIR/bench/results}
mkdir -p "$out"
if [ $quick = 1 ]; then total_mb=64 runs=3 secs=2; else total_mb=2048 runs=5 secs=5; fi
H=${BENCH_HOSTS:-4}
export SRCDIR
T=$SRCDIR/build/t
DSTAGE=$SRCDIR/build/bin/dstage
TRASH=/var/tmp/dstage-bench-hosts.$$
SHM=/dev/shm/dstage-bench-hosts.$$
DSTAGE_HOSTS=$H
# cp and tar land the whole dataset on every host; the epoch cache holds up
# to two epochs' shares beside a node's store
DSTAGE_HOSTS_SHM=$((total_mb * 2 + 256))m
UCX_TLS=tcp,self
export UCX_TLS
mkdir -p "$TRASH" && cd "$TRASH" || exit 1
. "$SRCDIR/t/lib-hosts.sh"
hosts_start || { echo "bench/hosts.sh: $hosts_skip_reason" >&2; exit 1; }
hosts_slurm_start || { echo "bench/hosts.sh: $slurm_skip_reason" >&2; exit 1; }
trap 'hosts_stop; [ -n "${BENCH_KEEP:-}" ] || rm -rf "$TRASH"' EXIT
trap 'exit 1' INT TERM HUP
D=$SHM/d
for i in $(seq 1 $H); do hosts_exec $i mkdir -p "$D"; done
# the Alltoallv peer, with the same MPI_Finalize workaround as dstage
mpicc.mpich -O2 -Wall -o mpibench "$SRCDIR/bench/mpibench.c" "$SRCDIR/mpi/ucx_close.c" || exit 1
# the reader loop (bench/shim-bench.c), run inside the hosts from TRASH
gcc -O2 -Wall -Wextra -D_GNU_SOURCE -o shim-bench "$SRCDIR/bench/shim-bench.c" || exit 1

# the dataset: 128 KiB files for most of the bytes, 1000 files of 4 KiB, in
# 16 directories, both sizes in each (every partition holds some of each)
n128=$((total_mb * 8))
for k in $(seq 0 15); do
	mkdir -p src/d$k
	head -c $((n128 / 16 * 131072)) /dev/urandom | split -a 5 -d -b 131072 - src/d$k/big
	head -c $((1000 / 16 * 4096)) /dev/urandom | split -a 5 -d -b 4096 - src/d$k/small
done
"$DSTAGE" pack -q -p $((4 * H)) src pack || exit 1
tar -cf src.tar src
bytes=$(du -sb src | cut -f1)

med() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
now() { date +%s.%N; }
run() { # NAME CMD...: time of one srun, appended to NAME.t
	_n=$1
	shift
	_t0=$(now)
	"$@" >>"$_n.log" 2>&1 || { echo "bench/hosts.sh: $_n failed" >&2; cat "$_n.log" >&2; exit 1; }
	awk "BEGIN { print $(now) - $_t0 }" >>"$_n.t"
}

# ---- 1. stage-in ---------------------------------------------------------------
job=1000
for r in $(seq 1 $runs); do
	job=$((job + 1))
	run stage srun -N$H --ntasks-per-node=1 "$DSTAGE" stage pack --to "$D" --job b$job
	srun -N$H --ntasks-per-node=1 "$DSTAGE" clean --to "$D" --job b$job
	run cp srun -N$H --ntasks-per-node=1 sh -c "cp -r '$TRASH/pack' '$D/cp' && sync -f '$D'"
	srun -N$H --ntasks-per-node=1 rm -rf "$D/cp"
	run tar srun -N$H --ntasks-per-node=1 sh -c "mkdir '$D/tar' && tar -xf '$TRASH/src.tar' -C '$D/tar'"
	srun -N$H --ntasks-per-node=1 rm -rf "$D/tar"
done
shared=$(sed -n 's/^read from shared FS: \([0-9]*\) bytes.*/\1/p' stage.log | tail -1)
packb=$(du -sb pack | cut -f1)

# ---- 2. the epoch exchange over TCP vs MPI_Alltoallv ------------------------------
cat >exchange.sh <<EOF
#!/bin/sh
srun -N$H --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$D" -q || exit 1
srun -N$H --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$D" --seed 11 >serve.log 2>&1 &
j=$D/dstage.0.\$SLURM_JOB_ID
export j
# CPU seconds (user + system) of this bench's services on all hosts (one
# PID namespace: the batch host sees them all)
cpu() { for p in \$(pgrep -x dstage); do grep -qs "$D" /proc/\$p/cmdline && awk '{ print \$14 + \$15 }' /proc/\$p/stat; done | awk -v hz=\$(getconf CLK_TCK) '{ s += \$1 } END { printf "%.3f", s / hz }'; }
# efield E NAME: field NAME of epoch E's line of every node
efield() { srun -N$H --ntasks-per-node=1 --overlap sh -c "sed -n \"s/^epoch\\.\$1=//p\" \\\$j/\\\$SLURM_NODEID/serve.status | tr ' ' '\\\\n' | sed -n \"s/^\$2=//p\""; }
# fetched E: every node has fetched all of epoch E
fetched() {
	srun -N$H --ntasks-per-node=1 --overlap sh -c '
		s=\$j/\$SLURM_NODEID/serve.status
		pe=\$(sed -n "s/^prefetch_epoch=//p" \$s); [ -n "\$pe" ] || exit 1
		[ "\$pe" -gt '"\$1"' ] && exit 0
		[ "\$pe" = '"\$1"' ] && [ "\$(sed -n "s/^prefetch_done=//p" \$s)" = "\$(sed -n "s/^prefetch_total=//p" \$s)" ]'
}
i=0; until srun -N$H --overlap sh -c "test -S \$j/\\\$SLURM_NODEID/sock" 2>/dev/null; do sleep 0.3; i=\$((i+1)); [ \$i -lt 100 ] || exit 1; done
cpu0=\$(cpu)
for r in \$(seq 1 $runs); do
	srun -N$H --ntasks-per-node=1 --overlap sh -c 'eval "\$("$DSTAGE" env --to "$D")"; cat "\$DSTAGE_MOUNT/.dstage/epochs/'\$r'/all" >/dev/null' || exit 1
	e=\$((r + 1))
	k=0; until fetched \$e >/dev/null 2>&1; do k=\$((k+1)); [ \$k -lt 600 ] || { echo "epoch \$e never fetched"; exit 1; }; sleep 0.2; done
	k=0; until [ "\$(efield \$e fetch_s | grep -c .)" = $H ]; do k=\$((k+1)); [ \$k -lt 100 ] || exit 1; sleep 0.2; done
	t=\$(efield \$e fetch_s | sort -n | tail -1)
	b=\$(efield \$e moved_bytes | awk '{ s += \$1 } END { printf "%.0f", s / NR }')
	echo "rma \$b \$t"
	b128=\$(awk -v b=\$b 'BEGIN { printf "%.0f", int(b / 131072) * 131072 }')
	srun -N$H --ntasks-per-node=1 --overlap --mpi=pmi2 "$TRASH/mpibench" alltoallv \$b128 131072 1 | awk -v b=\$b128 '{ print "a2a", b, \$2 }'
done
cpu1=\$(cpu)
echo "cpu \$(awk -v a=\$cpu0 -v b=\$cpu1 -v h=$H -v r=$runs 'BEGIN { printf "%.3f", (b - a) / h / r }')"
"$DSTAGE" stop --to "$D"
wait
srun -N$H --ntasks-per-node=1 "$DSTAGE" clean --to "$D"
EOF
sbatch -N$H --wait -o exchange.job exchange.sh >/dev/null || { cat exchange.job serve.log >&2; exit 1; }
grep -E '^(rma|a2a|cpu) ' exchange.job >exchange.out
[ "$(grep -c '^rma ' exchange.out)" = $runs ] && [ "$(grep -c '^a2a ' exchange.out)" = $runs ] ||
	{ echo "bench/hosts.sh: exchange: missing rounds" >&2; cat exchange.job >&2; exit 1; }

# ---- 3. reads: one job, stage + serve, then shim-bench on host 1 ---------------
cat >reads.sh <<EOF
#!/bin/sh
srun -N$H --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$D" -q || exit 1
# --locality 1: nothing prefetched into the epoch cache, remote reads stay remote
srun -N$H --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$D" --locality 1 >serve.log 2>&1 &
j=$D/dstage.0.\$SLURM_JOB_ID
export j
i=0; until srun -N$H --overlap sh -c "test -S \$j/\\\$SLURM_NODEID/sock"; do sleep 0.2; i=\$((i+1)); [ \$i -lt 100 ] || exit 1; done
srun -N1 -n1 -w n1 --overlap sh -c '
	"$T/storecheck" "\$j" "$TRASH/src" >holders || exit 1
	for s in small big; do
		awk -v s=\$s "\\\$1 ~ \"/\" s && \\\$2 == 1 { print \\\$1 }" holders >\$s.local
		awk -v s=\$s "\\\$1 ~ \"/\" s && \\\$2 == 0 { print \\\$1 }" holders >\$s.remote
	done
	eval "\$("$DSTAGE" env --to "$D")"
	for r in $(seq -s ' ' 1 $runs); do for s in small big; do for w in local remote; do
		echo "\$s.\$w \$("$TRASH/shim-bench" files "\$DSTAGE_MOUNT" \$s.\$w $secs)"
	done; done; done' >reads.out
"$DSTAGE" stop --to "$D"
wait
srun -N$H --ntasks-per-node=1 "$DSTAGE" clean --to "$D"
EOF
sbatch -N$H --wait -o reads.job reads.sh >/dev/null || { cat reads.job reads.out >&2; exit 1; }

# ---- the rows ------------------------------------------------------------------
{
	echo "# Multi-host bed (bench/hosts.sh)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$SRCDIR" rev-parse --short HEAD), $runs rounds, medians."
	echo "$H hosts of t/lib-hosts.sh: own netns (veth + Linux bridge), own /dev/shm; MPICH 4.0.2"
	echo "ch4:ucx over TCP (UCX_TLS=tcp,self); the shared FS is the machine's disk (page cache warm)."
	echo "All $H hosts share this machine's 2 cores and one memory bus: the bridge moves bytes at"
	echo "memory speed, not a network's; read the ratios, side by side in the same run."
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share the 2 cores)."
	echo
	echo "| stage-in of $(awk "BEGIN { printf \"%.0f\", $bytes / 1048576 }") MiB ($n128 x 128 KiB + 1000 x 4 KiB) into the $H hosts' /dev/shm | s (median) | MiB/s landed | bytes read from the shared FS |"
	echo "| --- | --- | --- | --- |"
	for k in stage cp tar; do
		t=$(med <$k.t)
		case $k in
		stage) what="srun -N$H dstage stage (each host gets its share)"; land=$bytes; rd=${shared:-?} ;;
		cp) what="srun -N$H cp -r of the pack (each host the whole)"; land=$((H * packb)); rd=$((H * packb)) ;;
		tar) what="srun -N$H tar -x of the tree (each host the whole)"; land=$((H * bytes)); rd=$((H * $(stat -c %s src.tar))) ;;
		esac
		echo "| $what | $t | $(awk "BEGIN { printf \"%.0f\", $land / 1048576 / $t }") | $rd |"
	done
	echo
	rb=$(awk '$1 == "rma" { print $2 }' exchange.out | med)
	rt=$(awk '$1 == "rma" { print $3 }' exchange.out | med)
	rmin=$(awk '$1 == "rma" { r = $2 / $3; if (m == "" || r < m) m = r } END { print m }' exchange.out)
	ab=$(awk '$1 == "a2a" { print $2 }' exchange.out | med)
	at=$(awk '$1 == "a2a" { print $3 }' exchange.out | med)
	cpu=$(awk '$1 == "cpu" { print $2 }' exchange.out)
	echo "| epoch exchange over TCP, $H hosts, 128 KiB samples (global shuffle) | MiB per node | s (median) | MiB/s per node | ratio |"
	echo "| --- | --- | --- | --- | --- |"
	echo "| dstage serve: each service fetches its share of the next epoch (MPI_Get) | $(awk "BEGIN { printf \"%.0f\", $rb / 1048576 }") | $rt | $(awk "BEGIN { printf \"%.0f\", $rb / 1048576 / $rt }") | $(awk "BEGIN { printf \"%.2f\", ($rb / $rt) / ($ab / $at) }") |"
	echo "| MPI_Alltoallv of the same bytes per rank, 128 KiB pieces, $H ranks on $H hosts | $(awk "BEGIN { printf \"%.0f\", $ab / 1048576 }") | $at | $(awk "BEGIN { printf \"%.0f\", $ab / 1048576 / $at }") | 1 |"
	echo
	echo "Slowest exchange round: $(awk "BEGIN { printf \"%.0f\", $rmin / 1048576 }") MiB/s per node. Service CPU: $cpu s per node per epoch (the whole exchange part, the service's user + system time)."
	echo
	echo "| read through the shim on host 1, service up | files/s (median) | MiB/s | open+read+close |"
	echo "| --- | --- | --- | --- |"
	for s in small.local small.remote big.local big.remote; do
		f=$(awk -v s=$s '$1 == s { print $2 }' reads.out | med)
		b=$(awk -v s=$s '$1 == s { print $3 }' reads.out | med)
		case $s in small.*) sz="4 KiB" ;; *) sz="128 KiB" ;; esac
		case $s in *.local) w="held on host 1 (local)" ;; *) w="held only on other hosts (remote, TCP)" ;; esac
		echo "| $sz files $w | $(printf %.0f "$f") | $(awk "BEGIN { printf \"%.1f\", $b / 1048576 }") | $(awk "BEGIN { printf \"%.1f us\", 1e6 / $f }") |"
	done
} >"$out/hosts.md"
cat "$out/hosts.md"
