#!/bin/sh
# Multi-host figures on the bed of t/lib-hosts.sh (as root): 2 hosts, each
# with its own /dev/shm and network namespace, MPI (MPICH ch4:ucx) over TCP
# through a veth pair and a Linux bridge (UCX_TLS=tcp,self).  Side by side,
# interleaved (A B C A B C ...), medians of RUNS rounds:
#   stage-in of the pack: `srun -N2 dstage stage` vs `srun -N2 cp -r` of the
#   pack and `srun -N2 tar -x` of the tree, each from the shared FS into
#   every host's /dev/shm; bytes read from the shared FS;
#   reads through the shim on host 1 with the service up (--locality 1:
#   nothing prefetched, a remote read is an MPI_Get over TCP): 4 KiB and
#   of 128 KiB held on host 1 (local) vs held only on host 2 (remote).
# Usage: bench/hosts.sh [--quick] [RESULTS_DIR]   (writes hosts.md there)
# 2 hosts: with 3 or more, this MPICH + UCX over TCP hang in MPI_Finalize
# about half the time (README, "Separate hosts on one machine").

quick=0
[ "${1:-}" = --quick ] && { quick=1; shift; }
SRCDIR=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$SRCDIR/bench/results}
mkdir -p "$out"
if [ $quick = 1 ]; then total_mb=64 runs=3 secs=2; else total_mb=512 runs=5 secs=5; fi
export SRCDIR
T=$SRCDIR/build/t
DSTAGE=$SRCDIR/build/bin/dstage
TRASH=/var/tmp/dstage-bench-hosts.$$
SHM=/dev/shm/dstage-bench-hosts.$$
DSTAGE_HOSTS=2
DSTAGE_HOSTS_SHM=$((total_mb * 3))m
UCX_TLS=tcp,self
export UCX_TLS
mkdir -p "$TRASH" && cd "$TRASH" || exit 1
. "$SRCDIR/t/lib-hosts.sh"
hosts_start || { echo "bench/hosts.sh: $hosts_skip_reason" >&2; exit 1; }
hosts_slurm_start || { echo "bench/hosts.sh: $slurm_skip_reason" >&2; exit 1; }
trap 'hosts_stop; [ -n "${BENCH_KEEP:-}" ] || rm -rf "$TRASH"' EXIT
D=$SHM/d
for i in 1 2; do hosts_exec $i mkdir -p "$D"; done

# the dataset: 128 KiB files for most of the bytes, 1000 files of 4 KiB
n128=$((total_mb * 8))
# (in 16 directories, both sizes in each: every partition holds some of each)
for k in $(seq 0 15); do mkdir -p src/d$k; done
i=0
while [ $i -lt $n128 ]; do head -c 131072 /dev/urandom >src/d$((i % 16))/big$i; i=$((i + 1)); done
i=0
while [ $i -lt 1000 ]; do head -c 4096 /dev/urandom >src/d$((i % 16))/small$i; i=$((i + 1)); done
"$DSTAGE" pack -q -p 8 src pack || exit 1
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
job=1000
for r in $(seq 1 $runs); do
	job=$((job + 1))
	run stage srun -N2 --ntasks-per-node=1 "$DSTAGE" stage pack --to "$D" --job b$job
	srun -N2 --ntasks-per-node=1 "$DSTAGE" clean --to "$D" --job b$job
	run cp srun -N2 --ntasks-per-node=1 sh -c "cp -r '$TRASH/pack' '$D/cp' && sync -f '$D'"
	srun -N2 --ntasks-per-node=1 rm -rf "$D/cp"
	run tar srun -N2 --ntasks-per-node=1 sh -c "mkdir '$D/tar' && tar -xf '$TRASH/src.tar' -C '$D/tar'"
	srun -N2 --ntasks-per-node=1 rm -rf "$D/tar"
done
shared=$("$DSTAGE" stage pack --help >/dev/null 2>&1; sed -n 's/^read from shared FS: \([0-9]*\) bytes.*/\1/p' stage.log | tail -1)
packb=$(du -sb pack | cut -f1)

# reads: one job, stage + serve, then shim-bench on host 1
cat >reads.sh <<EOF
#!/bin/sh
srun -N2 --ntasks-per-node=1 "$DSTAGE" stage "$TRASH/pack" --to "$D" -q || exit 1
# --locality 1: nothing prefetched into the epoch cache, remote reads stay remote
srun -N2 --ntasks-per-node=1 --overlap "$DSTAGE" serve --to "$D" --locality 1 >serve.log 2>&1 &
j=$D/dstage.0.\$SLURM_JOB_ID
export j
i=0; until srun -N2 --overlap sh -c "test -S \$j/\\\$SLURM_NODEID/sock"; do sleep 0.2; i=\$((i+1)); [ \$i -lt 100 ] || exit 1; done
srun -N1 -n1 -w n1 --overlap sh -c '
	"$T/storecheck" "\$j" "$TRASH/src" >holders || exit 1
	for s in small big; do
		awk -v s=\$s "\\\$1 ~ \"/\" s && \\\$2 == 1 { print \\\$1 }" holders >\$s.local
		awk -v s=\$s "\\\$1 ~ \"/\" s && \\\$2 == 0 { print \\\$1 }" holders >\$s.remote
	done
	eval "\$("$DSTAGE" env --to "$D")"
	for r in $(seq -s ' ' 1 $runs); do for s in small big; do for w in local remote; do
		echo "\$s.\$w \$("$T/shim-bench" files "\$DSTAGE_MOUNT" \$s.\$w $secs)"
	done; done; done' >reads.out
"$DSTAGE" stop --to "$D"
wait
srun -N2 --ntasks-per-node=1 "$DSTAGE" clean --to "$D"
EOF
sbatch -N2 --wait -o reads.job reads.sh >/dev/null || { cat reads.job reads.out >&2; exit 1; }

{
	echo "# Multi-host bed (bench/hosts.sh)"
	echo
	echo "$(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$SRCDIR" rev-parse --short HEAD), $runs rounds, medians."
	echo "2 hosts of t/lib-hosts.sh: own netns (veth + Linux bridge), own /dev/shm; MPICH 4.0.2"
	echo "ch4:ucx over TCP (UCX_TLS=tcp,self); the shared FS is the machine's disk (page cache warm)."
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other jobs share the 2 cores)."
	echo
	echo "| stage-in of $(awk "BEGIN { printf \"%.0f\", $bytes / 1048576 }") MiB ($n128 x 128 KiB + 1000 x 4 KiB) into both hosts' /dev/shm | s (median) | MiB/s landed | bytes read from the shared FS |"
	echo "| --- | --- | --- | --- |"
	for k in stage cp tar; do
		t=$(med <$k.t)
		case $k in
		stage) what="srun -N2 dstage stage (each host gets its half)"; land=$bytes; rd=${shared:-?} ;;
		cp) what="srun -N2 cp -r of the pack (each host the whole)"; land=$((2 * packb)); rd=$((2 * packb)) ;;
		tar) what="srun -N2 tar -x of the tree (each host the whole)"; land=$((2 * bytes)); rd=$((2 * $(stat -c %s src.tar))) ;;
		esac
		echo "| $what | $t | $(awk "BEGIN { printf \"%.0f\", $land / 1048576 / $t }") | $rd |"
	done
	echo
	echo "| read through the shim on host 1, service up | files/s (median) | MiB/s |"
	echo "| --- | --- | --- |"
	for s in small.local small.remote big.local big.remote; do
		f=$(awk -v s=$s '$1 == s { print $2 }' reads.out | med)
		b=$(awk -v s=$s '$1 == s { print $3 }' reads.out | med)
		case $s in small.*) sz="4 KiB" ;; *) sz="128 KiB" ;; esac
		case $s in *.local) w="held on host 1 (local)" ;; *) w="held only on host 2 (remote, TCP)" ;; esac
		echo "| $sz files $w | $(printf %.0f "$f") | $(awk "BEGIN { printf \"%.1f\", $b / 1048576 }") |"
	done
} >"$out/hosts.md"
cat "$out/hosts.md"
