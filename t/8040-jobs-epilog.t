#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/epilog-dstage.sh, the admins' Epilog snippet: run by hand, it removes
# exactly ROOT/dstage.<SLURM_JOB_UID>.<SLURM_JOB_ID> under each root it is
# given, nothing of other jobs or users, no symlink, and always exits 0; as
# the Epilog of the 4-node Slurm cluster on loopback it removes the stores a
# stage-in job kept and those of a job killed before its trap could run.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

EPI=$SRCDIR/jobs/epilog-dstage.sh
uid=$(id -u)
other=$((uid + 4242))

# run the epilog as slurmd would: a bare environment, SLURM_JOB_ID/UID
epilog() {
	env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin SLURM_JOB_ID="$1" SLURM_JOB_UID="$2" \
		DSTAGE_EPILOG_DIRS="$3" sh "$EPI"
}

test_expect_success 'by hand: removes the job'"'"'s stores under every root, globs included' '
	mkdir -p r1 r2/a r2/b &&
	for d in r1 r2/a r2/b; do
		mkdir -p $d/dstage.$uid.77/0/epochs $d/dstage.$uid.78/0 $d/dstage.$other.77/0 &&
		echo x >$d/dstage.$uid.77/0/store && echo x >$d/dstage.$uid.77/0/epochs/0.c || exit 1
	done &&
	chown -R $other r1/dstage.$other.77 r2/a/dstage.$other.77 r2/b/dstage.$other.77 &&
	epilog 77 $uid "$TRASH/r1 $TRASH/r2/*" &&
	for d in r1 r2/a r2/b; do
		test ! -e $d/dstage.$uid.77 && test -d $d/dstage.$uid.78/0 &&
		test -d $d/dstage.$other.77/0 || exit 1
	done
'

test_expect_success 'by hand: another user'"'"'s job: only its own directories' '
	epilog 77 $other "$TRASH/r1" &&
	test ! -e r1/dstage.$other.77 && test -d r1/dstage.$uid.78 && test -d r2/a/dstage.$other.77
'

test_expect_success 'by hand: a symlink or a directory of someone else under the name is left alone' '
	mkdir -p r3 target/keep && ln -s "$TRASH/target" r3/dstage.$uid.90 &&
	mkdir -p r3/dstage.$uid.91/0 && chown -R $other r3/dstage.$uid.91 &&
	epilog 90 $uid "$TRASH/r3" && epilog 91 $uid "$TRASH/r3" &&
	test -L r3/dstage.$uid.90 && test -d target/keep && test -d r3/dstage.$uid.91/0
'

test_expect_success 'by hand: no or odd job ids, missing roots: nothing removed, exit 0' '
	mkdir -p r4/dstage.$uid.5 &&
	epilog "" $uid "$TRASH/r4" && epilog "5/../5" $uid "$TRASH/r4" && epilog 5 "" "$TRASH/r4" &&
	epilog 5 "0 1" "$TRASH/r4" && epilog 5 $uid "$TRASH/none $TRASH/none/*" &&
	test -d r4/dstage.$uid.5 &&
	epilog 5 $uid "$TRASH/none $TRASH/r4" && test ! -e r4/dstage.$uid.5
'

test_expect_success 'the default roots: /dev/shm among them' '
	grep -q "^DSTAGE_EPILOG_DIRS=\${DSTAGE_EPILOG_DIRS:-/dev/shm " "$EPI"
'

# The cluster's Epilog: the snippet, unmodified, with this test's root, and
# a note that it ran on that node for that job.
cat >"$TRASH/epilog.sh" <<EOF
#!/bin/sh
DSTAGE_EPILOG_DIRS="$SHM/epi" sh "$EPI"
echo "\$SLURMD_NODENAME \$SLURM_JOB_ID \$?" >>"$TRASH/epilog.ran"
EOF
chmod +x "$TRASH/epilog.sh"
slurm_extra_conf="Epilog=$TRASH/epilog.sh"
slurm_start || skip_all "$slurm_skip_reason"

PATH=$DSTAGE_TEST_BUILD/bin:$PATH
DSTAGE_DIR=$SHM/epi
export PATH DSTAGE_DIR
unset DSTAGE_REPLICAS DSTAGE_CLEAN DSTAGE_BIN DSTAGE_MPI DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS
mkdir -p "$DSTAGE_DIR"
# epilog_ran JOB: wait until the Epilog ran on the four nodes for JOB
epilog_ran() {
	i=0
	# 60 s: the bound of an Epilog that never runs, not of a slow one
	while [ "$(grep -c " $1 0$" epilog.ran 2>/dev/null)" != 4 ] && [ $i -lt 300 ]; do
		sleep 0.2
		i=$((i + 1))
	done
	grep " $1 " epilog.ran
	test "$(grep -c " $1 0$" epilog.ran)" = 4
}

test_expect_success 'the sample dataset, packed' '
	"$T/mksample" -c 4 -n 16 -v 2 src &&
	"$DSTAGE" pack -q -p 8 --replicate val src pack
'

test_expect_success 'stage-in.sbatch keeps its stores; the Epilog removes them at the job'"'"'s end' '
	DSTAGE_PACK=$TRASH/pack sbatch_wait 120 -N4 --export=ALL -o "$TRASH/job-%j.out" \
		"$SRCDIR/jobs/stage-in.sbatch" >s1.sb &&
	job=$(job_of s1.sb) && cat job-$job.out &&
	grep -q "stores kept in $DSTAGE_DIR/dstage.$uid.$job" job-$job.out &&
	epilog_ran $job &&
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
'

test_expect_success 'a training job killed outright (no trap runs): the Epilog removes its stores' '
	DSTAGE_PACK=$TRASH/pack sbatch -N4 --export=ALL -o "$TRASH/job-%j.out" \
		"$SRCDIR/jobs/train.sbatch" sleep 300 >t1.sb &&
	job=$(job_of t1.sb) && test -n "$job" &&
	i=0 &&
	while ! grep -qs "^train.sbatch: training: sleep 300" job-$job.out && [ $i -lt 300 ]; do
		sleep 0.2 && i=$((i + 1)) || exit 1
	done &&
	test -d "$DSTAGE_DIR/dstage.$uid.$job" &&
	scancel --batch --signal=KILL $job &&
	epilog_ran $job &&
	cat job-$job.out &&
	! grep -q "node stores removed" job-$job.out &&
	ls -A "$DSTAGE_DIR" >left && test_cmp /dev/null left
'

test_expect_success 'the queue is empty' 'slurm_wait_idle 30'
test_done
