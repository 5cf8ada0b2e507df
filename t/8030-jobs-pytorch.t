#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch running jobs/train_example.py (PyTorch, DataLoader with
# two workers, dstage.EpochSampler) on the 4-node Slurm cluster on loopback:
# every reader's record of two epochs holds the bytes of the source, the
# records of the four nodes form a permutation of the training images each
# epoch, different each epoch; two readers per node split their node's
# share; a pack whose epoch lists hold files that are not images makes the
# example fail clearly, and the job still cleans up.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

test_require TORCH,PIL

JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8030-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT PYTHONPATH
[ -e "$DSTAGE_MOUNT" ] && { echo "Bail out! $DSTAGE_MOUNT exists on disk"; exit 1; }
mkdir -p "$DSTAGE_DIR"

submit_timeout=240 # submit OUT SCRIPT (t/lib-slurm.sh): a job's bound, seconds
nothing_left() {
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
}
# check_epoch E READERS: the records of epoch E (READERS per node) are a
# permutation of the training images, equal shares, bytes as the source
check_epoch() {
	ls rec/epoch$1.node* | wc -l >n && test "$(cat n)" = $((4 * $2)) &&
	cat rec/epoch$1.node* | sort >got &&
	test_cmp images.sums got &&
	for f in rec/epoch$1.node*; do
		test "$(wc -l <"$f")" = $((64 / (4 * $2))) || { echo "$f: $(wc -l <"$f") lines"; return 1; }
	done
}

slurm_start || skip_all "$slurm_skip_reason"

# The sample's top-level README and labels.txt are not images: replicated
# like val/, they stay out of the epoch lists, which then hold exactly the
# images of train/ (what train_example.py's dataset is).
test_expect_success 'the sample dataset, packed with val/, README and labels.txt replicated' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val --replicate README --replicate labels.txt src pack &&
	(cd src && find train -type f | sort | xargs -d "\n" sha256sum | awk "{ print \$2, \$1 }") >images.sums &&
	test "$(wc -l <images.sums)" = 64
'

test_expect_success 'sbatch -N4 train.sbatch python3 train_example.py: two epochs on every node, exit 0' '
	DSTAGE_PACK=$TRASH/pack submit p1.out "$JOBS/train.sbatch" \
		"$PY" "$JOBS/train_example.py" --epochs 2 --record "$TRASH/rec" &&
	for k in 0 1 2 3; do
		for e in 0 1; do
			grep -q "^node $k reader 0-of-1: epoch $e: 16 samples" p1.out || exit 1
		done
	done &&
	test_grep "training step: exit 0" p1.out &&
	nothing_left && test ! -e "$DSTAGE_MOUNT"
'

for e in 0 1; do
	test_expect_success "epoch $e: the readers' records are a permutation of the images, bytes as the source" '
		check_epoch '$e' 1
	'
done

test_expect_success 'the epochs are shuffled differently' '
	! cmp -s rec/epoch0.node0.0-of-1 rec/epoch1.node0.0-of-1
'

test_expect_success 'two readers per node (DSTAGE_TASKS_PER_NODE=2): each reads its half of its node share' '
	rm -rf rec &&
	DSTAGE_PACK=$TRASH/pack DSTAGE_TASKS_PER_NODE=2 submit p2.out --ntasks-per-node=2 \
		"$JOBS/train.sbatch" "$PY" "$JOBS/train_example.py" --epochs 1 --workers 1 \
		--record "$TRASH/rec" &&
	test "$(grep -c "^node [0-3] reader [01]-of-2: epoch 0: 8 samples" p2.out)" = 8 &&
	check_epoch 0 2 &&
	nothing_left
'

test_expect_success 'epoch lists with a file that is not an image: a clear error, non-zero, cleaned' '
	"$DSTAGE" pack -q -p 8 --replicate val src pack-val-only &&
	rc=0 && { DSTAGE_PACK=$TRASH/pack-val-only submit p3.out "$JOBS/train.sbatch" \
		"$PY" "$JOBS/train_example.py" --epochs 1 || rc=$?; } &&
	echo "exit $rc" && test $rc != 0 &&
	grep -q "is not in the dataset" p3.out &&
	grep -q "node stores removed" p3.out && nothing_left
'

test_expect_success 'the queue is empty' 'slurm_wait_idle 20'
test_done
