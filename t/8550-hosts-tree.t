#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A plain tree staged as it is on separate hosts (t/lib-hosts.sh, issue 28):
# `dstage stage SRC` on 4 hosts (own /dev/shm, hostname, network; MPI over
# TCP) with R=2 and --replicate val walks SRC on the shared file system
# with every rank, opens each source file once in the whole job (strace of
# every rank, on every host), lands every byte with its CRC in each host's
# own store (copied out of each host and checked by storecheck), and the
# service then serves it: every file read through the shim on every host
# equals the source, about half of them held only by other hosts.  Nothing
# is left on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
uid=$(id -u)
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8550-$$
UCX_TLS=tcp,self
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT UCX_TLS
test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'
test_require STRACE

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR"; done

cat >job.sh <<\EOS
#!/bin/sh
# job.sh TRASH: in the batch job, on the first host
t=$1 n=$SLURM_JOB_NUM_NODES
on="-N $n -n $n --ntasks-per-node=1"
jd=$DSTAGE_DIR/dstage.$(id -u).$SLURM_JOB_ID
mkdir -p "$t/tr" "$t/rec"
srun $on strace -ff -qq -s 4096 -e trace=openat,openat2 -o "$t/tr/t" \
	dstage stage "$t/src" --to "$DSTAGE_DIR" -R 2 --replicate val >"$t/rec/stage.out" || exit 1
# each host's own store, copied out to be checked in one place
mkdir -p "$t/gather"
srun $on sh -c "hostname >$t/rec/host.\$SLURM_NODEID && cp -a $jd/\$SLURM_NODEID $t/gather/" ||
	exit 1
srun $on --overlap dstage serve --to "$DSTAGE_DIR" &
spid=$!
srun $on --overlap sh -c "k=0; until grep -qs '^state=running' $jd/\$SLURM_NODEID/serve.status &&
	[ -S $jd/\$SLURM_NODEID/sock ]; do k=\$((k + 1)); [ \$k -lt 300 ] || exit 1; sleep 0.1; done" ||
	{ echo "service not up"; exit 1; }
srun $on --overlap sh -c 'eval "$(dstage env --to "$DSTAGE_DIR")" && cd "$1/src" &&
	find . -type f | sed "s|^\./||" | sort | while read -r f; do
		cmp "$f" "$DSTAGE_MOUNT/$f" || exit 1
	done && echo "node $SLURM_NODEID read every file"' sh "$t" || rc=1
dstage stop --to "$DSTAGE_DIR"
wait $spid
srun $on dstage clean --to "$DSTAGE_DIR"
exit ${rc:-0}
EOS

test_expect_success 'a plain tree on the shared file system' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	mkdir src/train/big && for i in 0 1 2 3; do
		head -c 524288 /dev/urandom >src/train/big/f$i || exit 1
	done &&
	(cd src && find . -type f | sed "s|^\./||" | sort) >files
'

test_expect_success "sbatch -N$n: stage SRC, R=2, serve, every host reads every file: exit 0" '
	rc=0 && { sbatch_wait 240 -N$n --export=ALL -o "$TRASH/job.out" job.sh "$TRASH" \
		>sb 2>&1 || rc=$?; } &&
	cat sb job.out rec/stage.out && test $rc = 0 &&
	test "$(grep -c "^node [0-9]* read every file$" job.out)" = $n &&
	test_grep "in place from .$TRASH/src. (a plain tree): opened $(wc -l <files) source files" \
		rec/stage.out
'

test_expect_success 'each node on its own host' '
	for k in $(seq 0 $((n - 1))); do echo n$((k + 1)) >want && test_cmp want rec/host.$k || exit 1; done
'

test_expect_success 'every byte and CRC right in every host own store: val on every host, the rest on 2' '
	"$T/storecheck" gather src >count &&
	cut -d" " -f1 count >have && test_cmp files have &&
	awk "(\$1 ~ /^val\\//) ? \$2 != $n : \$2 != 2" count >wrong && test_cmp /dev/null wrong
'

test_expect_success 'each source file opened once in the whole job, over every rank on every host' '
	while read -r f; do
		c=$(cat tr/t.* | grep -c -F "\"$f\"" || test $? = 1) &&
		test "$c" = 1 || { echo "$f opened $c times"; exit 1; }
	done <files
'

test_expect_success 'no store is left on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left || exit 1
	done
'

test_done
