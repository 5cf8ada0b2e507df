#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch with DSTAGE_SPILL on separate hosts (t/lib-hosts.sh):
# each host's RAM room (DSTAGE_RAM_ROOM, standing for the job's memory
# budget) holds a part of its store, the rest lands in the host's own
# node-local spill directory (here the host's private /tmp).  The training
# step on every host, through the shim: every file of the dataset equals
# the source (most held only by another host, many of them in its spill
# tier: remote reads through the service's window over both tiers), three
# epochs' lists read right in their order; each host's RAM part is within
# the room; status shows every node's spill bytes; the script's clean
# leaves nothing in either tier on any host.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-hosts.sh"

DSTAGE_HOSTS=${DSTAGE_HOSTS:-4}
uid=$(id -u)
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_SPILL=/tmp/dstage-spill-t8540-$$
DSTAGE_MOUNT=/dstage-t8540-$$
DSTAGE_RAM_ROOM=1536KiB
ROOM=1572864
UCX_TLS=tcp,self
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_SPILL DSTAGE_MOUNT DSTAGE_RAM_ROOM UCX_TLS
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT

hosts_start || skip_all "$hosts_skip_reason"
hosts_slurm_start || skip_all "$slurm_skip_reason"
n=$hosts_n
for i in $(seq 1 $n); do hosts_exec $i mkdir -p "$DSTAGE_DIR" "$DSTAGE_SPILL"; done

submit_nodes=$n submit_timeout=180 # submit OUT SCRIPT (t/lib-slurm.sh): every host, 180 s

cat >node-check.sh <<\EOS
#!/bin/sh
rec=$1 k=$SLURM_NODEID m=$DSTAGE_MOUNT
hostname >"$rec/host.$k"
echo $(($(stat -c %s "$DSTAGE_STORE/$k/store") + $(stat -c %s "$DSTAGE_STORE/$k/index") +
	$(stat -c %s "$DSTAGE_STORE/$k/stats"))) >"$rec/ram.$k"
ls -A "$DSTAGE_SPILL/${DSTAGE_STORE##*/}" >"$rec/spilldirs.$k"
stat -c %s "$DSTAGE_SPILL/${DSTAGE_STORE##*/}/$k/store" >"$rec/spill.$k" 2>/dev/null
find "$m" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
for e in 0 1 2; do
	cat "$m/.dstage/epochs/$e/all" >"$rec/epoch.$e.$k" || exit 1
	sed "s|^|$m/|" "$rec/epoch.$e.$k" | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/esums.$e.$k" ||
		exit 1
done
sleep 1.5
dstage status --to "$DSTAGE_DIR" >"$rec/status.$k" 2>&1 || exit 1
echo "node $k checked"
EOS

test_expect_success 'the sample dataset (with 1 MiB files) packed on the shared file system' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	mkdir src/train/big && for i in 0 1 2 3 4 5; do
		head -c 1048576 /dev/urandom >src/train/big/f$i || exit 1
	done &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums &&
	mkdir rec
'

test_expect_success "sbatch -N$n train.sbatch with DSTAGE_SPILL on $n hosts: exit 0" '
	DSTAGE_PACK=$TRASH/pack DSTAGE_SEED=5 \
		submit t1.out "$JOBS/train.sbatch" sh "$TRASH/node-check.sh" "$TRASH/rec" &&
	test_grep "service up on $n node(s)" t1.out &&
	test "$(grep "^node [0-9]* checked$" t1.out | sort -u | wc -l)" = $n &&
	test_grep "node stores removed from $DSTAGE_DIR" t1.out &&
	! grep "still there" t1.out
'

test_expect_success 'each host kept its RAM part within the room and spilled the rest locally' '
	spilled=0 &&
	for k in $(seq 0 $((n - 1))); do
		echo "node $k: ram $(cat rec/ram.$k), spill $(cat rec/spill.$k 2>/dev/null)" &&
		test "$(cat rec/ram.$k)" -le $ROOM || exit 1
		if test -s rec/spill.$k; then
			echo $k >want && test_cmp want rec/spilldirs.$k || exit 1
			spilled=$((spilled + 1))
		fi
	done &&
	test $spilled -ge 2
'

test_expect_success 'on every host, every file read through the mount equals the source' '
	for k in $(seq 0 $((n - 1))); do test_cmp src.sums rec/sums.$k || exit 1; done
'

for e in 0 1 2; do
	test_expect_success "epoch $e: every byte read in list order is right on every host" '
		for k in $(seq 0 $((n - 1))); do
			awk "NR == FNR { s[\$2] = \$1; next } s[\$2] != \$1 { print; bad = 1 } END { exit bad }" \
				src.sums rec/esums.'$e'.$k &&
			test "$(wc -l <rec/esums.'$e'.$k)" = "$(wc -l <rec/epoch.'$e'.$k)" || exit 1
		done
	'
done

test_expect_success 'status on every host shows every node and its spill bytes' '
	for k in $(seq 0 $((n - 1))); do
		cat rec/status.$k &&
		test_grep "ram *spill$" rec/status.$k &&
		test "$(awk "/^[0-9]/ && \$(NF - 1) != \"0\"" rec/status.$k | wc -l)" -ge 2 &&
		for j in $(seq 0 $((n - 1))); do
			grep -q "^$j " rec/status.$k || { echo "host $k: node $j missing"; exit 1; }
		done || exit 1
	done
'

test_expect_success 'nothing is left in either tier on any host' '
	for i in $(seq 1 $n); do
		hosts_exec $i ls -A "$DSTAGE_DIR" "$DSTAGE_SPILL" >left &&
		printf "%s:\n\n%s:\n" "$DSTAGE_DIR" "$DSTAGE_SPILL" >none && test_cmp none left || exit 1
	done
'

test_done
