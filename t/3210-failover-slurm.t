#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch's failover path, unmodified, on the 4-node Slurm cluster
# on loopback (t/lib-slurm.sh), R = 2: during the first training step node
# 2 is "lost" (its service SIGKILLed, its store removed, its task fails).
# The script starts the service again on the survivors n1, n2, n4 (nodes 0,
# 1, 3; srun -w, --nodes 0,1,3) and the training step again on them with
# DSTAGE_RESTART=1 and each task's staged node in DSTAGE_NODE.  The pack is
# moved away after stage-in: nothing is staged again.  Every file read
# through the shim on the survivors equals the source; epoch 1 is dealt over
# the survivors; the job exits 0 and leaves no store.  With write-once
# outputs (DSTAGE_OUTPUTS): what the nodes wrote before the loss is
# recovered to DSTAGE_DRAIN_TO before the restart (a new service refuses to
# start over outputs not drained; DSTAGE_DRAIN_RATE=1 keeps them, 266 bytes,
# undrained until the loss), each once although every survivor runs the recovery on
# the stores they share here, what they write after it (through the shim,
# before the restarted service listens) is drained at the end.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

uid=$(id -u)
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t3210-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_FAILOVER DSTAGE_RESTARTS DSTAGE_NODE DSTAGE_RESTART \
	DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE
mkdir -p "$DSTAGE_DIR"
slurm_start || skip_all "$slurm_skip_reason"

cat >node-train.sh <<\EOF
#!/bin/sh
rec=$1 src=$2 pack=$3 k=$DSTAGE_NODE m=$DSTAGE_MOUNT r=${DSTAGE_RESTART:-x}
echo "$SLURM_NODEID $k" >"$rec/ran.$r.$k"
if [ "$r" = 0 ]; then
	[ "$k" = 0 ] && mv "$pack" "$pack.gone"
	if [ "$k" = 2 ]; then
		sleep 2 # the others read meanwhile
		kill -KILL "$(sed -n 's/^pid=//p' "$DSTAGE_STORE/2/serve.status")"
		rm -rf "$DSTAGE_STORE/2"
		exit 1
	fi
	# 256 bytes more: at 1 byte/s its drain takes minutes, whatever the
	# time the survivors take to notice the loss (20 s when MPI does not)
	{ echo "before $k" && printf "%0256d\n" 0; } >"$m/out/before.$k" || exit 1
	while :; do
		for f in $(cd "$src" && find train -type f); do cat "$m/$f" >/dev/null; done
	done
fi
echo "after $k" >"$m/out/after.$k" || exit 1
find "$m" -path "$m/out" -prune -o -type f -print | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
cat "$m/.dstage/epochs/1/all" >"$rec/e1.$k" || exit 1
echo "node $k read everything"
EOF

test_expect_success 'the sample dataset, packed; its checksums' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums &&
	(cd src && find . -type f ! -path "./val/*" | sed "s|^\./||" | sort) >train.list &&
	mkdir rec
'
test_expect_success 'train.sbatch, R=2: node 2 lost in training; service and training restarted on 0,1,3' '
	rc=0 && {
	DSTAGE_PACK=$TRASH/pack DSTAGE_REPLICAS=2 DSTAGE_LOG=warn \
		DSTAGE_OUTPUTS=out DSTAGE_DRAIN_TO=$TRASH/drain DSTAGE_DRAIN_RATE=1 \
		sbatch_wait 200 -N4 --export=ALL -o "$TRASH/job-%j.out" \
		"$JOBS/train.sbatch" sh "$TRASH/node-train.sh" "$TRASH/rec" "$TRASH/src" "$TRASH/pack" >sb 2>&1 || rc=$?; } &&
	cat sb && job=$(sed -n "s/^Submitted batch job //p" sb) && cat "job-$job.out" >t.out &&
	echo $job >job && cat t.out && test $rc = 0 &&
	test "$(grep -c "staging .* into" t.out)" = 1 &&
	test_grep "failover: restarting the service on the survivors 0,1,3 (of 4)" t.out &&
	test_grep "failover: service up on 3 node(s)" t.out &&
	test_grep "failover: training step started again on 0,1,3 (DSTAGE_RESTART=1)" t.out &&
	test_grep "training step: exit 0" t.out &&
	test "$(grep -c "^node [013] read everything$" t.out)" = 3
'
test_expect_success 'the second step ran on nodes 0, 1, 3, each task on its own staged node' '
	ls rec && test ! -e rec/ran.1.2 &&
	test "$(cat rec/ran.1.0)" = "0 0" && test "$(cat rec/ran.1.1)" = "1 1" &&
	test "$(cat rec/ran.1.3)" = "2 3"
'
test_expect_success 'the pack was never read again (moved away after stage-in)' '
	test -d pack.gone && test ! -e pack
'
test_expect_success 'every file read through the shim on the survivors equals the source' '
	for k in 0 1 3; do test_cmp src.sums rec/sums.$k || exit 1; done
'
test_expect_success 'epoch 1 is dealt over the survivors: a permutation, equal shares' '
	sort -u rec/e1.0 rec/e1.1 rec/e1.3 | test_cmp train.list - &&
	test "$(wc -l <rec/e1.0)" = "$(wc -l <rec/e1.3)"
'
test_expect_success 'outputs: written before the loss (recovered) and after it (drained), on the shared FS' '
	for k in 0 1 3; do
		test "$(head -n 1 drain/before.$k)" = "before $k" && test "$(wc -c <drain/before.$k)" = 266 &&
		test "$(cat drain/after.$k)" = "after $k" || exit 1
	done &&
	! test -e drain/before.2 && ! test -e drain/after.2 &&
	for k in 0 1 3; do
		test "$(grep -c "node $k: .before.$k.: recovered from the node.s output area" t.out)" = 1 || exit 1
	done &&
	! ls drain | grep -q dstage-drain
'
test_expect_success 'no store is left' '
	job=$(cat job) && test ! -e "$DSTAGE_DIR/dstage.$uid.$job"
'
test_done
