#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/stage-in.sbatch, unmodified, on the 4-node Slurm cluster on loopback
# (t/lib-slurm.sh): clear usage errors; `sbatch -N4` stages the sample pack
# into every node's store (checked byte for byte against the source), prints
# the summary and every node's `dstage status`, and leaves the stores for
# `dstage clean`; DSTAGE_REPLICAS, DSTAGE_BIN and DSTAGE_CLEAN work.  First,
# without Slurm: racing cleans of one job (DSTAGE_CLEAN=1's step) all succeed.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

uid=$(id -u)
JOBS=$SRCDIR/jobs
DIR=$SHM/stores
PATH_NO_DSTAGE=$PATH
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH
unset DSTAGE_PACK DSTAGE_DIR DSTAGE_REPLICAS DSTAGE_BIN DSTAGE_CLEAN DSTAGE_STAGE_OPTS DSTAGE_MPI

submit_timeout=120 # submit OUT SCRIPT (t/lib-slurm.sh): a job's bound, seconds

test_expect_success 'outside a Slurm job: a usage error, exit 2' '
	test_status --show err 2 env DSTAGE_PACK=pack bash "$JOBS/stage-in.sbatch" 2>err &&
	grep -q "not in a Slurm job" err
'

# stage-in.sbatch's DSTAGE_CLEAN=1 step runs one `dstage clean` per task,
# and the bed's four "nodes" share one DIR: the cleans of one job race for
# its lock.  A loser must see the winner (a clean: wait for it), not the
# description the stage left in the lock file nor the empty one the winner
# has not yet replaced (common/joblock.c): each clean succeeds, every round.
test_expect_success 'racing cleans of one job on one DIR: all succeed, nothing left' '
	"$T/mksample" -c 2 -n 4 -v 1 rsrc >/dev/null && "$DSTAGE" pack -q -p 2 rsrc rpack &&
	for r in 1 2 3 4 5 6 7 8 9 10; do
		mpirun_n 2 "$DSTAGE" stage rpack --to "$TRASH/race" --job r$r --node-per-rank -q || exit 1
		pids= && for k in 1 2 3 4; do
			"$DSTAGE" clean --to "$TRASH/race" --job r$r 2>>race.err & pids="$pids $!"; done
		for p in $pids; do wait $p || { cat race.err; exit 1; }; done
		test ! -e "$TRASH/race/dstage.$uid.r$r" || exit 1
	done &&
	test_cmp /dev/null race.err
'

slurm_start || skip_all "$slurm_skip_reason"

test_expect_success 'the sample dataset, packed with val replicated' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack &&
	find src -type f | wc -l >nfiles && test "$(cat nfiles)" -gt 60
'

test_expect_success 'no DSTAGE_PACK: the job says so and exits 2' '
	test_status 2 submit nopack.out "$JOBS/stage-in.sbatch" &&
	grep -q "DSTAGE_PACK is not set" nopack.out
'

test_expect_success 'DSTAGE_PACK that is not a directory: exit 2' '
	DSTAGE_PACK=$TRASH/no-such-dataset test_status 2 submit badpack.out "$JOBS/stage-in.sbatch" &&
	grep -q "not a readable directory" badpack.out
'

test_expect_success 'DSTAGE_PACK a plain tree: staged as it is on four nodes, byte for byte' '
	DSTAGE_PACK=$TRASH/src DSTAGE_DIR=$DIR DSTAGE_STAGE_OPTS="--replicate val" \
		submit tree.out "$JOBS/stage-in.sbatch" &&
	job=$(job_of tree.out.sb) &&
	test_grep "^staged $(cat nfiles) files, .* on 4 node(s), R=1" tree.out &&
	test_grep "in place from .$TRASH/src. (a plain tree): opened $(cat nfiles) source files" tree.out &&
	"$T/storecheck" "$DIR/dstage.$uid.$job" src >holders &&
	wc -l <holders >got && test_cmp nfiles got &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 4 : \$2 != 1" holders >wrong &&
	test_cmp /dev/null wrong &&
	"$DSTAGE" clean --to "$DIR" --job $job
'

test_expect_success 'sbatch -N4 stage-in.sbatch: every node staged, summary and status' '
	DSTAGE_PACK=$TRASH/pack DSTAGE_DIR=$DIR submit s1.out "$JOBS/stage-in.sbatch" &&
	job=$(job_of s1.out.sb) && echo $job >job1 &&
	test_grep "^staged $(cat nfiles) files, .* on 4 node(s), R=1" s1.out &&
	test_grep "^read from shared FS: " s1.out &&
	test "$(grep -c "^node  *files" s1.out)" = 1 &&
	awk "/^node  *files/ { on = 1; next } on && /^[0-9]/ { print \$1 }" s1.out >nodes &&
	printf "%s\n" 0 1 2 3 >want && test_cmp want nodes &&
	test_grep "stores kept in $DIR/dstage.$uid.$job" s1.out
'

test_expect_success 'the stores stay after the job: dstage status sees four nodes' '
	job=$(cat job1) &&
	"$DSTAGE" status --to "$DIR" --job $job >status &&
	cat status &&
	awk "NR > 1 { print \$1 }" status >nodes &&
	printf "%s\n" 0 1 2 3 >want && test_cmp want nodes
'

test_expect_success 'each node holds its placement, byte for byte: one node per file, val on all' '
	job=$(cat job1) &&
	"$T/storecheck" "$DIR/dstage.$uid.$job" src >holders &&
	wc -l <holders >got && test_cmp nfiles got &&
	awk "(\$1 ~ /^val\\//) ? \$2 != 4 : \$2 != 1" holders >wrong &&
	test_cmp /dev/null wrong
'

test_expect_success 'dstage clean removes them' '
	job=$(cat job1) &&
	"$DSTAGE" clean --to "$DIR" --job $job &&
	test ! -e "$DIR/dstage.$uid.$job" &&
	ls -A "$DIR" >left && test_cmp /dev/null left
'

test_expect_success 'DSTAGE_REPLICAS=2, DSTAGE_BIN instead of PATH, DSTAGE_CLEAN=1: nothing left' '
	PATH=$PATH_NO_DSTAGE DSTAGE_BIN=$DSTAGE_TEST_BUILD/bin DSTAGE_REPLICAS=2 DSTAGE_CLEAN=1 \
		DSTAGE_PACK=$TRASH/pack DSTAGE_DIR=$DIR submit s2.out "$JOBS/stage-in.sbatch" &&
	test_grep "^staged .* on 4 node(s), R=2" s2.out &&
	test_grep "^forwarded over MPI: [1-9]" s2.out &&
	# every training file twice, every val file on all four
	ntrain=$(find src -type f ! -path "src/val/*" | wc -l) &&
	nval=$(find src/val -type f | wc -l) &&
	held=$(awk "/^node  *files/ { on = 1; next } on && /^[0-9]/ { s += \$2 } END { print s }" s2.out) &&
	test "$held" = $((2 * ntrain + 4 * nval)) &&
	test_grep "stores removed (DSTAGE_CLEAN=1)" s2.out &&
	ls -A "$DIR" >left && test_cmp /dev/null left
'

test_expect_success 'a corrupt pack: stage fails, exit 1, nothing left behind' '
	cp -r pack bad &&
	part=$(ls bad/part-*.h5 | head -n 1) &&
	size=$(stat -c %s "$part") &&
	printf "\377\377\377\377" | dd of="$part" bs=1 seek=$((size - 100)) conv=notrunc 2>/dev/null &&
	DSTAGE_PACK=$TRASH/bad DSTAGE_DIR=$DIR test_status 1 submit s3.out "$JOBS/stage-in.sbatch" &&
	grep -q "checksum mismatch" s3.out && grep -q "dstage stage failed" s3.out && ls -A "$DIR" >left && test_cmp /dev/null left
'

test_expect_success 'the queue is empty' 'slurm_wait_idle 20'
test_done
