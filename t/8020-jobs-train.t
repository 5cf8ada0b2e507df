#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch, unmodified, on the 4-node Slurm cluster on loopback
# (t/lib-slurm.sh).  The "training" is a shell script that runs on every
# node with the shim and records what it sees: the node's store holds its
# placement, every file of the dataset read through the shim equals the
# source, the epoch lists of the four nodes form a permutation of the
# training set.  The job ends with exit 0 and no store left; a failing
# training step, a failing task on one node, a failing stage-in, a service
# that cannot start, services killed during training (the training itself
# exiting 0) and a cancelled job all still clean up and exit non-zero.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

uid=$(id -u)
JOBS=$SRCDIR/jobs
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t8020-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT
[ -e "$DSTAGE_MOUNT" ] && { echo "Bail out! $DSTAGE_MOUNT exists on disk"; exit 1; }
mkdir -p "$DSTAGE_DIR"

nothing_left() {
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
}

slurm_start || skip_all "$slurm_skip_reason"

# The training step of the first job: on every node, with the shim (from
# `dstage env` in train.sbatch), record the environment, this node's
# figures, the stores against the source (node 0; on loopback every node
# store is visible from every node), the checksums of every file read
# through the mount, and epochs 0 and 1: the node's list and the checksums
# of its files read through the mount in that order.
cat >node-check.sh <<\EOF
#!/bin/sh
rec=$1 src=$2 k=$SLURM_NODEID m=$DSTAGE_MOUNT
printf 'LD_PRELOAD=%s\nDSTAGE_STORE=%s\nDSTAGE_MOUNT=%s\n' "$LD_PRELOAD" "$DSTAGE_STORE" "$m" >"$rec/env.$k"
dstage status --to "$DSTAGE_DIR" --node "$k" >"$rec/status.$k" || exit 1
if [ "$k" = 0 ]; then
	"$T/storecheck" "$DSTAGE_STORE" "$src" >"$rec/holders" 2>"$rec/storecheck.err" ||
		{ cat "$rec/storecheck.err"; exit 1; }
fi
find "$m" -type f | sort | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/sums.$k" || exit 1
for e in 0 1; do
	cat "$m/.dstage/epochs/$e/all" >"$rec/epoch.$e.$k" || exit 1
	sed "s|^|$m/|" "$rec/epoch.$e.$k" | xargs -d '\n' sha256sum | sed "s|  $m/|  |" >"$rec/esums.$e.$k" ||
		exit 1
done
echo "node $k checked"
EOF

test_expect_success 'the sample dataset, packed with val replicated; its checksums' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	(cd src && find . -type f | sed "s|^\./||" | sort | xargs -d "\n" sha256sum) >src.sums &&
	(cd src && find . -type f ! -path "./val/*" | sed "s|^\./||" | sort) >train.list &&
	test "$(wc -l <train.list)" -gt 60 &&
	mkdir rec
'

test_expect_success 'sbatch -N4 train.sbatch: stage, serve, the training step on every node, exit 0' '
	DSTAGE_PACK=$TRASH/pack DSTAGE_SEED=5 DSTAGE_LOG=info \
		submit t1.out "$JOBS/train.sbatch" sh "$TRASH/node-check.sh" "$TRASH/rec" "$TRASH/src" &&
	job=$(job_of t1.out.sb) && echo $job >job1 &&
	test_grep "^staged .* on 4 node(s), R=1" t1.out &&
	test_grep "service up on 4 node(s)" t1.out &&
	test "$(grep -c "^node [0-3] checked$" t1.out)" = 4 &&
	test_grep "training step: exit 0" t1.out &&
	test_grep "node stores removed from $DSTAGE_DIR" t1.out
'

test_expect_success 'no store is left, and the mount never existed on disk' '
	job=$(cat job1) &&
	test ! -e "$DSTAGE_DIR/dstage.$uid.$job" && nothing_left &&
	test ! -e "$DSTAGE_MOUNT"
'

test_expect_success 'the training step had the shim and its store in its environment' '
	job=$(cat job1) &&
	for k in 0 1 2 3; do
		cat rec/env.$k &&
		grep -q "^LD_PRELOAD=.*/libdstage-preload\.so" rec/env.$k &&
		grep -qx "DSTAGE_STORE=$DSTAGE_DIR/dstage.$uid.$job" rec/env.$k &&
		grep -qx "DSTAGE_MOUNT=$DSTAGE_MOUNT" rec/env.$k || exit 1
	done
'

test_expect_success 'the service ran with DSTAGE_SEED' '
	test_grep "seed 5" t1.out
'

test_expect_success 'every node held its placement: storecheck, one node per file, val on all' '
	cat rec/status.* &&
	test "$(wc -l <rec/holders)" = "$(wc -l <src.sums)" &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 4 : \$2 != 1" rec/holders >wrong &&
	test_cmp /dev/null wrong &&
	for k in 0 1 2 3; do
		awk -v k=$k "\$1 == k && \$2 > 0 { ok = 1 } END { exit !ok }" rec/status.$k || exit 1
	done
'

test_expect_success 'on every node, every file read through the mount equals the source' '
	for k in 0 1 2 3; do test_cmp src.sums rec/sums.$k || exit 1; done
'

test_expect_success 'the final figures: every node read local bytes' '
	awk "/^node  *files/ { n++ } n && /^[0-9]/ && \$5 > 0 { ok++ } END { exit ok != 4 }" t1.out
'

for e in 0 1; do
	test_expect_success "epoch $e: the four nodes' lists are a permutation of the training set, equal shares" '
		cat rec/epoch.'$e'.[0-3] | sort -u >union &&
		test_cmp train.list union &&
		n=$(wc -l <train.list) &&
		share=$(((n + 3) / 4)) &&
		for k in 0 1 2 3; do
			test "$(wc -l <rec/epoch.'$e'.$k)" = $share || exit 1
		done &&
		test "$(cat rec/epoch.'$e'.[0-3] | wc -l)" = $((4 * share))
	'
	test_expect_success "epoch $e: what every node read through the shim in list order equals the source" '
		for k in 0 1 2 3; do
			sort -k2 rec/esums.'$e'.$k >got && sort -k2 src.sums >want &&
			join -1 2 -2 2 got want >joined &&
			awk "\$2 != \$3 { print; bad = 1 } END { exit bad }" joined &&
			test "$(wc -l <joined)" = "$(sort -u -k2 got | wc -l)" &&
			test "$(wc -l <rec/esums.'$e'.$k)" = "$(wc -l <rec/epoch.'$e'.$k)" || exit 1
		done
	'
done

test_expect_success 'the two epochs are shuffled differently' '
	! cmp -s rec/epoch.0.0 rec/epoch.1.0 || ! cmp -s rec/epoch.0.1 rec/epoch.1.1
'

# (exit 1, or 143 when srun --kill-on-bad-exit terminated a task that had
# not failed yet: srun reports the highest status of its tasks)
test_expect_success 'a failing training step: non-zero, still stopped and cleaned' '
	rc=0 && { DSTAGE_PACK=$TRASH/pack submit t2.out "$JOBS/train.sbatch" false || rc=$?; } &&
	echo "exit $rc" && test $rc != 0 &&
	grep -q "training step: exit $rc" t2.out && grep -q "node stores removed" t2.out &&
	nothing_left
'

test_expect_success 'a task failing on one node ends the step on all: non-zero, cleaned, fast' '
	start=$(date +%s) &&
	rc=0 && {
		DSTAGE_PACK=$TRASH/pack submit t3.out "$JOBS/train.sbatch" \
			sh -c "[ \$SLURM_NODEID = 2 ] && exit 3; exec sleep 100" ||
		rc=$?
	} &&
	test $rc != 0 && end=$(date +%s) && echo "$((end - start)) s" &&
	test $((end - start)) -lt 60 &&
	grep -q "task 2: Exited with exit code 3" t3.out && grep -q "node stores removed" t3.out &&
	nothing_left
'

test_expect_success 'a stage-in that fails (corrupt pack): exit 1, no training, nothing left' '
	cp -r pack bad &&
	part=$(ls bad/part-*.h5 | head -n 1) &&
	size=$(stat -c %s "$part") &&
	printf "\377\377\377\377" | dd of="$part" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null &&
	DSTAGE_PACK=$TRASH/bad test_status 1 submit t4.out "$JOBS/train.sbatch" touch "$TRASH/trained" &&
	grep -q "dstage stage failed" t4.out && test ! -e trained && nothing_left
'

test_expect_success 'a service that cannot start: exit 1 at once, no training, nothing left' '
	DSTAGE_PACK=$TRASH/pack DSTAGE_SERVE_OPTS="--locality 7" \
		test_status 1 submit t5.out "$JOBS/train.sbatch" touch "$TRASH/trained" &&
	grep -q "dstage serve ended (exit [1-9][0-9]*) before it served on every node" t5.out &&
	test ! -e trained && nothing_left
'

# The OOM killer (or any SIGKILL) ends the node services during training,
# and the training step still exits 0 (a reader that skips samples it
# could not read): the job says so and fails; before, its exit was the
# training step's 0 and the service's end went unsaid.
test_expect_success 'the node services killed during training (as the OOM killer does): said, the job fails, cleaned' '
	DSTAGE_PACK=$TRASH/pack test_status 1 submit t9.out "$JOBS/train.sbatch" sh -c \
		"kill -KILL \$(sed -n s/^pid=//p \$DSTAGE_STORE/\$DSTAGE_NODE/serve.status) && sleep 2" &&
	grep -q "training step: exit 0" t9.out &&
	grep -q "the service step ended on its own during the job (exit [1-9]" t9.out &&
	grep -q "node stores removed" t9.out && nothing_left
'

test_expect_success 'no training command: a usage error' '
	DSTAGE_PACK=$TRASH/pack test_status 2 submit t6.out "$JOBS/train.sbatch" &&
	grep -q "no training command" t6.out
'

test_expect_success 'scancel during training: the trap stops the service and removes the stores' '
	DSTAGE_PACK=$TRASH/pack sbatch -N4 --export=ALL -o "$TRASH/job-%j.out" \
		"$JOBS/train.sbatch" sleep 300 >t7.sb &&
	job=$(job_of t7.sb) && test -n "$job" &&
	i=0 &&
	while ! grep -qs "^train.sbatch: training: sleep 300" job-$job.out && [ $i -lt 300 ]; do
		sleep 0.2 && i=$((i + 1)) || exit 1
	done &&
	sleep 1 &&
	test -d "$DSTAGE_DIR/dstage.$uid.$job" &&
	scancel $job &&
	i=0 &&
	while squeue -h -j $job 2>/dev/null | grep -q . && [ $i -lt 300 ]; do
		sleep 0.2 && i=$((i + 1)) || exit 1
	done &&
	cat job-$job.out &&
	grep -q "got SIGTERM" job-$job.out &&
	nothing_left
'

# train.sbatch asks for TERM 120 s before the time limit (#SBATCH
# --signal=B:TERM@120): with --time=1 it comes at once, while steps can
# still start, so the stores are removed by the clean step on every node
test_expect_success 'the time limit draws near: TERM, the training ends, every node cleaned by the step' '
	DSTAGE_PACK=$TRASH/pack test_status 143 submit t8.out --time=1 "$JOBS/train.sbatch" sleep 300 &&
	grep -q "got SIGTERM" t8.out &&
	! grep -q "dstage clean as a job step failed" t8.out &&
	grep -q "node stores removed" t8.out && nothing_left
'

test_expect_success 'the queue is empty' 'slurm_wait_idle 20'
test_done
