#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch with write-once outputs (DSTAGE_OUTPUTS, DSTAGE_DRAIN_TO)
# on the 4-node Slurm cluster on loopback (t/lib-slurm.sh): every node's
# training task writes an output and node 0 a checkpoint through the mount;
# node 3 reads node 0's checkpoint back; the job drains before it cleans,
# exits 0 and every output is in the drain directory.  When node 1's
# service cannot drain (DSTAGE_FAULT), the job recovers its output from the
# node's output area after the service and exits 0; when no drain works at
# all, the job names every output not drained, exits 1 and still cleans.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t2206-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE
mkdir -p "$DSTAGE_DIR"


slurm_start || skip_all "$slurm_skip_reason"

cat >write.sh <<\EOF
#!/bin/sh
k=$SLURM_NODEID m=$DSTAGE_MOUNT/out
echo "node $k was here" >"$m/node$k.txt" || exit 1
if [ "$k" = 0 ]; then
	mkdir "$m/ckpt" && head -c 1000000 /dev/urandom >"$m/ckpt/e1.tmp" &&
	mv "$m/ckpt/e1.tmp" "$m/ckpt/e1.pt" && cp "$m/ckpt/e1.pt" "$1/ckpt.ref" || exit 1
fi
if [ "$k" = 3 ]; then
	# node 0's task of this step may start much later under load: 60 s is
	# the bound of a node 0 that never writes, not of a slow one
	i=0
	while [ ! -e "$m/ckpt/e1.pt" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
	sha256sum <"$m/ckpt/e1.pt" >"$1/ckpt.node3" || exit 1
fi
EOF

test_expect_success 'a small dataset, packed' '
	mkdir -p src/a && for i in 1 2 3 4 5 6 7 8; do echo "$i" >src/a/$i || exit 1; done &&
	"$DSTAGE" pack -q -p 4 src pack && mkdir rec
'
test_expect_success 'train.sbatch with outputs: written on every node, read across, drained, exit 0' '
	DSTAGE_PACK=$TRASH/pack DSTAGE_OUTPUTS=out DSTAGE_DRAIN_TO=$TRASH/drain \
		submit t1.out "$JOBS/train.sbatch" sh "$TRASH/write.sh" "$TRASH/rec" &&
	for k in 0 1 2 3; do test "$(cat drain/node$k.txt)" = "node $k was here" || exit 1; done &&
	cmp rec/ckpt.ref drain/ckpt/e1.pt && ! test -e drain/ckpt/e1.tmp &&
	test "$(sha256sum <rec/ckpt.ref)" = "$(cat rec/ckpt.node3)" &&
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
'
test_expect_success 'the service of node 1 cannot drain: the job recovers its output, exit 0' '
	rm -rf drain &&
	DSTAGE_FAULT=drain.write:rank=1 DSTAGE_PACK=$TRASH/pack DSTAGE_OUTPUTS=out \
		DSTAGE_DRAIN_TO=$TRASH/drain submit t2.out "$JOBS/train.sbatch" sh "$TRASH/write.sh" "$TRASH/rec" &&
	grep -q "node1.txt.*recovered" t2.out && grep -q "outputs recovered" t2.out &&
	for k in 0 1 2 3; do test "$(cat drain/node$k.txt)" = "node $k was here" || exit 1; done &&
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
'
test_expect_success 'no drain works at all: every output named, exit 1, every node cleaned' '
	rm -rf drain &&
	DSTAGE_FAULT=drain.write DSTAGE_PACK=$TRASH/pack DSTAGE_OUTPUTS=out \
		DSTAGE_DRAIN_TO=$TRASH/drain test_status 1 submit t3.out "$JOBS/train.sbatch" sh "$TRASH/write.sh" "$TRASH/rec" &&
	grep -q "node1.txt.*not drained" t3.out && grep -q "e1.pt.*not drained" t3.out &&
	grep -q "lost with the node stores" t3.out &&
	! test -e drain/node1.txt &&
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
'
test_expect_success 'the queue is empty' 'slurm_wait_idle 20'
test_done
