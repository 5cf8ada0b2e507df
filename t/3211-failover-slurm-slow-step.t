#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# jobs/train.sbatch's failover when the service ends before the training
# step does (4-node Slurm cluster on loopback, R = 2, write-once outputs):
# node 2's task kills its service and removes its store, but fails only
# later; the other nodes' services give up on it after --timeout 3, the
# script restarts the service on 0,1,3 while the step still runs, then the
# step fails.  The step is started again on the survivors (not taken for a
# training that failed by itself), and the writes of the new step, which
# may come before the restarted service listens, wait for it (no EIO).  A
# file node 0 opened for writing under the old service and closes under the
# new one is not kept: its close says EIO (not 0 with the file lost).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-slurm.sh"

uid=$(id -u)
DSTAGE_DIR=$SHM/stores
DSTAGE_MOUNT=/dstage-t3211-$$
PATH=$DSTAGE_TEST_BUILD/bin:$PATH
export PATH DSTAGE_DIR DSTAGE_MOUNT
unset DSTAGE_PACK DSTAGE_REPLICAS DSTAGE_SEED DSTAGE_LOCALITY DSTAGE_DROP_LAST DSTAGE_BIN \
	DSTAGE_MPI DSTAGE_TASKS_PER_NODE DSTAGE_SRUN_OPTS DSTAGE_STAGE_OPTS DSTAGE_SERVE_OPTS \
	DSTAGE_SERVE_TIMEOUT DSTAGE_FAILOVER DSTAGE_RESTARTS DSTAGE_NODE DSTAGE_RESTART \
	DSTAGE_OUTPUTS DSTAGE_DRAIN_TO DSTAGE_DRAIN_RATE
mkdir -p "$DSTAGE_DIR"
slurm_start || skip_all "$slurm_skip_reason"

cat >node-train.sh <<\EOF2
#!/bin/sh
rec=$1 k=$DSTAGE_NODE m=$DSTAGE_MOUNT r=${DSTAGE_RESTART:-x}
echo "$SLURM_NODEID $k" >"$rec/ran.$r.$k"
if [ "$r" = 0 ]; then
	if [ "$k" = 0 ]; then
		/usr/bin/python3 -c '
import errno, os, sys, time
m, rec = sys.argv[1], sys.argv[2]
f = open(m + "/out/held.0", "w")
f.write("held\n")
f.flush()
open(rec + "/held.open", "w").close()
st = os.environ["DSTAGE_STORE"] + "/0/serve.status"
for i in range(600):
    try:
        t = open(st).read().split("\n")
        if "state=running" in t and "nnodes=3" in t:
            break
    except OSError:
        pass
    time.sleep(0.1)
try:
    f.close()
    r = "ok"
except OSError as e:
    r = errno.errorcode.get(e.errno, str(e.errno))
open(rec + "/held.result", "w").write(r + "\n")
' "$m" "$rec" &
	fi
	if [ "$k" = 2 ]; then
		i=0
		while [ ! -e "$rec/held.open" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
		kill -KILL "$(sed -n 's/^pid=//p' "$DSTAGE_STORE/2/serve.status")"
		rm -rf "$DSTAGE_STORE/2"
		# the step fails once the service runs again without this node
		# (and node 0 closed its file under it)
		i=0
		while [ ! -e "$rec/held.result" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
		exit 1
	fi
	while :; do cat "$m/labels.txt" >/dev/null; sleep 0.1; done
fi
echo "after $k" >"$m/out/after.$k" || exit 1
echo "node $k wrote"
EOF2

test_expect_success 'train.sbatch: the service restarted during the step, the step started again on 0,1,3' '
	"$T/mksample" -c 2 -n 8 -v 1 src && "$DSTAGE" pack -q -p 4 src pack && mkdir rec &&
	rc=0 && {
	DSTAGE_PACK=$TRASH/pack DSTAGE_REPLICAS=2 DSTAGE_LOG=warn DSTAGE_SERVE_OPTS="--timeout 3" \
		DSTAGE_OUTPUTS=out DSTAGE_DRAIN_TO=$TRASH/drain \
		sbatch_wait 200 -N4 --export=ALL -o "$TRASH/job-%j.out" \
		"$SRCDIR/jobs/train.sbatch" sh "$TRASH/node-train.sh" "$TRASH/rec" >sb 2>&1 || rc=$?; } &&
	cat sb && job=$(sed -n "s/^Submitted batch job //p" sb) && cat "job-$job.out" >t.out &&
	echo $job >job && cat t.out && test $rc = 0 &&
	test_grep "the node service ended (exit [0-9]*) during training" t.out &&
	test_grep "failover: service up on 3 node(s)" t.out &&
	test_grep "failover: training step started again on 0,1,3 (DSTAGE_RESTART=1)" t.out &&
	test "$(grep -c "^node [013] wrote$" t.out)" = 3 &&
	test "$(cat rec/ran.1.3)" = "2 3" && test ! -e rec/ran.1.2
'
test_expect_success 'the outputs of the second step are on the shared FS' '
	for k in 0 1 3; do test "$(cat drain/after.$k)" = "after $k" || exit 1; done
'
test_expect_success 'a file open across the restart: its close is EIO, it is not kept, the service says so' '
	test "$(cat rec/held.result)" = EIO && ! test -e drain/held.0 &&
	test_grep "an output opened under an earlier service of this job .* is not kept" t.out
'
test_expect_success 'no store is left' '
	job=$(cat job) && test ! -e "$DSTAGE_DIR/dstage.$uid.$job"
'
test_done
