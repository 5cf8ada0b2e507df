#!/bin/sh
# Failures: a node service that dies, hangs or fails ends the service on
# every node within seconds, with the reason; readers get EIO, bounded,
# never a hang and never wrong bytes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/helpers/serve-lib.sh"

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
	cat serve.log; test "$(cat serve.rc)" != 0 && test $((t1 - t0)) -le 10
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
test_expect_success 'a reader waiting on node 1 gets EIO within the bound' '
	start=$(date +%s) &&
	! DSTAGE_TIMEOUT=10 shim_on 0 sh -c "for f in \$(cd src && find train -type f); do cat $MOUNT/\$f >/dev/null || exit 1; done" 2>err &&
	cat err && grep -q "Input/output error" err &&
	test $(( $(date +%s) - start )) -le 12
'
serve_wait
t1=$(date +%s)
kill -CONT "$(node_pid 1)" 2>/dev/null
test_expect_success 'node 0 notices within the timeout, says so, the step ends' '
	cat serve.log;
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
	cat serve.log;
	test "$(cat serve.rc)" = 1 &&
	grep -q "node 1: epoch 0: injected failure" serve.log &&
	grep -q "node 0: node 1 failed: stopping" serve.log
'
test_done
