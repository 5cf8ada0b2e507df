#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The RAM budget under Slurm (issue 26): jobs/train.sbatch on the loopback
# cluster (t/lib-slurm.sh) with task/cgroup and ConstrainRAMSpace=yes, so
# each job step runs in a cgroup v1 memory limit of sbatch --mem.  A pack
# too large for --mem less the default headroom is refused by stage on
# every node before a byte is written, the job exits 1 naming the node, the
# job's cgroup limit, the need and the room, and nothing is left (where the
# stage step was OOM-killed, its bytes left in DSTAGE_DIR); with
# enough --mem (and DSTAGE_RAM_HEADROOM) the same job stages, serves and
# every file read through the shim equals the source; with DSTAGE_SPILL a
# --mem too small for the pack stages, the rest on disk, and trains.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

test_require MPI

uid=$(id -u)
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t4006-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_SPILL DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_RAM_HEADROOM
[ -e "$DSTAGE_MOUNT" ] && { echo "Bail out! $DSTAGE_MOUNT exists on disk"; exit 1; }
mkdir -p "$DSTAGE_DIR"

submit_nodes=2 # submit OUT SBATCH-ARGS (t/lib-slurm.sh): the jobs run on two nodes
nothing_left() {
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
}

# task/cgroup with the RAM limit: several slurmds on one host each get their
# own hierarchy (slurm_nN/uid_U/job_J/step_S/task_T)
slurm_extra_conf="TaskPlugin=task/cgroup
ProctrackType=proctrack/cgroup
SelectTypeParameters=CR_Core_Memory"
slurm_cgroup_conf="ConstrainRAMSpace=yes
ConstrainSwapSpace=no"
slurm_start || skip_all "$slurm_skip_reason"

# what a step sees: its memory cgroup and the limit of its step's cgroup
cat >cg.sh <<\EOF
#!/bin/sh
p=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
echo "$p" && cat "/sys/fs/cgroup/memory${p%/task_*}/memory.limit_in_bytes"
EOF
test_expect_success 'the cluster constrains RAM: a step runs in its --mem cgroup' '
	timeout 60 srun -N1 --mem=64M sh "$TRASH/cg.sh" >cg && cat cg &&
	test_grep "^/slurm_n1/uid_$uid/job_[0-9]*/step_[0-9]*/task_0$" cg &&
	test "$(sed -n 2p cg)" = $((64 << 20))
'

# the training: every file of the dataset read through the mount
cat >check.sh <<\EOF
#!/bin/sh
find "$DSTAGE_MOUNT" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $DSTAGE_MOUNT/|  |" \
	>"$1/sums.$SLURM_NODEID" && echo "node $SLURM_NODEID checked"
EOF

test_expect_success 'an 80 MiB pack of incompressible data; its checksums' '
	mkdir -p src/train/a src/train/b src/val rec &&
	for i in 1 2 3 4 5 6 7 8 9 10; do
		head -c $((4 << 20)) /dev/urandom >src/train/a/f$i &&
		head -c $((4 << 20)) /dev/urandom >src/train/b/f$i || return 1
	done &&
	echo val >src/val/labels.txt &&
	"$DSTAGE" pack -q -p 4 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums
'

test_expect_success 'sbatch --mem=48M train.sbatch, 40 MiB a node: refused on the job cgroup, exit 1, nothing left' '
	! DSTAGE_PACK=$TRASH/pack submit t1.out --mem=48M "$JOBS/train.sbatch" \
		sh "$TRASH/check.sh" "$TRASH/rec" &&
	job=$(job_of t1.out.sb) &&
	test_grep "node [01]: .*not enough room: needs .* (store .* + .* of index and metadata), room 0 B: cgroup v1 memory limit 48.0 MiB (./sys/fs/cgroup/memory/slurm_n[12]/uid_$uid/job_$job/" t1.out &&
	test_grep "headroom 8.0 GiB" t1.out &&
	test_grep "dstage stage failed (exit 1)" t1.out &&
	! grep "node [01] checked" t1.out &&
	! grep -i "oom-kill\|killed\|BAD TERMINATION" t1.out &&
	nothing_left
'

test_expect_success 'with --mem=400M and DSTAGE_RAM_HEADROOM=64MiB: staged, trained, every byte right' '
	DSTAGE_PACK=$TRASH/pack DSTAGE_RAM_HEADROOM=64MiB \
		submit t2.out --mem=400M "$JOBS/train.sbatch" sh "$TRASH/check.sh" "$TRASH/rec" &&
	job=$(job_of t2.out.sb) &&
	test_grep "^RAM: node 0.s store takes .* of the job.s memory until .dstage clean. (room was .*: cgroup v1 memory limit 400.0 MiB (./sys/fs/cgroup/memory/slurm_n1/uid_$uid/job_$job[^0-9].*headroom 64.0 MiB)" t2.out &&
	test "$(grep -c "^node [01] checked$" t2.out)" = 2 &&
	test_cmp src.sums rec/sums.0 && test_cmp src.sums rec/sums.1 &&
	test_grep "training step: exit 0" t2.out &&
	nothing_left
'

# the same job with DSTAGE_SPILL (node-local disk): what does not fit --mem
# less the headroom lands there, the training reads every byte right
test_expect_success 'sbatch --mem=80M with DSTAGE_SPILL: staged in RAM and on disk, trained, every byte right' '
	mkdir -p spillroot rec3 &&
	DSTAGE_PACK=$TRASH/pack DSTAGE_RAM_HEADROOM=32MiB DSTAGE_SPILL=$TRASH/spillroot \
		submit t3.out --mem=80M "$JOBS/train.sbatch" sh "$TRASH/check.sh" "$TRASH/rec3" &&
	job=$(job_of t3.out.sb) &&
	test_grep "^RAM: node 0.s store takes .* of the job.s memory until .dstage clean. (room was .*: cgroup v1 memory limit 80.0 MiB .*; .* spilled to .$TRASH/spillroot." t3.out &&
	test "$(grep -c "^node [01] checked$" t3.out)" = 2 &&
	test_cmp src.sums rec3/sums.0 && test_cmp src.sums rec3/sums.1 &&
	test_grep "training step: exit 0" t3.out &&
	! grep -i "oom-kill\|BAD TERMINATION" t3.out &&
	nothing_left && ls -A spillroot >left && test_cmp /dev/null left
'

test_done
