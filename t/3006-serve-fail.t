#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failures: a node service that dies, hangs or fails ends the service on
# every node within seconds, with the reason; readers get EIO, bounded,
# never a hang and never wrong bytes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 20 &&
	pack_stage src 2
'
serve_start 2
test_expect_success 'served' 'serve_up 2'
t0=$(date +%s)
test_expect_success 'SIGKILL node 1' 'kill -KILL "$(node_pid 1)"'
serve_wait
t1=$(date +%s)
test_expect_success 'the job step ends within seconds, failed' '
	cat serve.log && test "$(cat serve.rc)" != 0 && test $((t1 - t0)) -le 10
'
test_expect_success 'a reader of a remote file then gets EIO at once' '
	f=$(cd src && find train -type f | head -1) &&
	start=$(date +%s) &&
	! DSTAGE_TIMEOUT=5 shim_on 0 sh -c "for f in \$(cd src && find train -type f); do cat $MOUNT/\$f >/dev/null || exit 1; done" 2>err &&
	cat err && grep -q "Input/output error" err &&
	test $(( $(date +%s) - start )) -le 5
'

serve_start 2 --timeout 3
test_expect_success 'served (--timeout 3)' 'serve_up 2'
test_expect_success 'node 1 hangs (SIGSTOP)' 'kill -STOP "$(node_pid 1)"'
t0=$(date +%s)
# Under Open MPI a get needs nothing of node 1's CPU (osc/rdma reads its
# window through shared memory, docs/mpi.md): the reads may then end well,
# within the bound too, and must give the right bytes.
test_expect_success 'a reader waiting on node 1 gets EIO within the bound' '
	start=$(date +%s) &&
	if DSTAGE_TIMEOUT=10 shim_on 0 sh -c "for f in \$(cd src && find train -type f); do cmp src/\$f $MOUNT/\$f || exit 1; done" 2>err; then
		echo "every read ended well" && test "$ds_mpilib" = openmpi
	else
		cat err && grep -q "Input/output error" err
	fi &&
	test $(( $(date +%s) - start )) -le 12
'
serve_wait
t1=$(date +%s)
kill -CONT "$(node_pid 1)" 2>/dev/null
test_expect_success 'node 0 notices within the timeout, says so, the step ends' '
	cat serve.log &&
	test "$(cat serve.rc)" != 0 && test $((t1 - t0)) -le 15 &&
	grep -q "node 0: \(no answer from the other nodes\|an MPI call has not returned\)" serve.log
'

# DSTAGE_FAULT (common/fault.c): node 1 fails when it starts fetching epoch 0
DSTAGE_FAULT=serve.fetch:rank=1
export DSTAGE_FAULT
serve_start 2
unset DSTAGE_FAULT
serve_wait
test_expect_success 'a failure on node 1 ends every node with exit 1 and the reason' '
	cat serve.log &&
	test "$(cat serve.rc)" = 1 &&
	grep -q "node 1: epoch 0: injected failure" serve.log &&
	grep -q "node 0: node 1 failed: stopping" serve.log
'

# serve.window: node 1 fails right after creating its window
DSTAGE_FAULT=serve.window:rank=1
export DSTAGE_FAULT
t0=$(date +%s)
serve_start 2
unset DSTAGE_FAULT
serve_wait
t1=$(date +%s)
test_expect_success 'a failure at window creation on node 1 ends every node, exit 1, named' '
	cat serve.log &&
	test "$(cat serve.rc)" = 1 && test $((t1 - t0)) -le 20 &&
	grep -q "fault injected at .serve.window. (rank 1)" serve.log
'

# serve.remote_read: node 0's service fails every remote read it is asked for
DSTAGE_FAULT=serve.remote_read:rank=0
export DSTAGE_FAULT
serve_start 2
unset DSTAGE_FAULT
test_expect_success 'served (node 0 fails remote reads)' 'serve_up 2'
test_expect_success 'node 0: remote files give EIO at once, local and cached ones their bytes' '
	ok=0 eio=0 &&
	for f in $(cd src && find train -type f); do
		if DSTAGE_TIMEOUT=5 shim_on 0 cat "$MOUNT/$f" >got 2>err; then
			cmp got "src/$f" || exit 1; ok=$((ok + 1))
		else
			grep -q "Input/output error" err || { cat err; exit 1; }; eio=$((eio + 1))
		fi
	done &&
	echo "ok $ok eio $eio" && test $ok -gt 0 && test $eio -gt 0
'
test_expect_success 'the service itself goes on: stop ends it, exit 0' '
	"$DSTAGE" stop --to "$SHM" --job "$JOB"
'
serve_wait
test_expect_success 'exit 0' 'test "$(cat serve.rc)" = 0'
test_done
