#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A service whose outputs take longer to stop than its --timeout is not
# ended by the watchdog as if a node were gone (the watchdog watches MPI
# calls; the outputs' stop makes none): here node 1's confirmed rename is
# held 5 s (DSTAGE_FAULT outputs.ns_commit) when a SIGTERM comes, with
# --timeout 2.  Node 1's stop waits for it, the rename then gets EIO from
# the stopping service instead of waiting for ever for main, which polls no
# more, the long stop is said, node 0 waits for node 1 in the leave without
# its watchdog ending it, and both leave with exit 0: the rename is applied
# nowhere, the drained output stays under its old name.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

DSTAGE_FAULT=outputs.ns_commit:rank=1:action=sleep:secs=5
export DSTAGE_FAULT
outputs_up 2 --timeout 2
unset DSTAGE_FAULT
test_expect_success 'an output of node 1, drained' '
	head -c 65536 /dev/urandom >c &&
	shim_on 1 cp c "$MOUNT/out/c.tmp" &&
	wait_until 30 test -e "$DR/c.tmp"
'
test_expect_success 'its rename held after its check; SIGTERM meanwhile' '
	shim_bg 1 mv "$MOUNT/out/c.tmp" "$MOUNT/out/c" 2>mv.err &&
	mvpid=$! &&
	wait_until 30 grep -q "fault injected at .outputs.ns_commit" serve.log &&
	kill_ranks TERM "$(node_pid 0)" "$(node_pid 1)" &&
	rc=0 && { wait "$mvpid" || rc=$?; } && echo $rc >mv.rc &&
	cat mv.err
'
serve_wait
test_expect_success 'both nodes left, exit 0: no watchdog, the long stop said' '
	cat serve.log &&
	! grep -q "has not returned" serve.log &&
	! grep -q "have not stopped" serve.log &&
	grep -q "node 1: the outputs took [0-9]* s to stop" serve.log &&
	test "$(cat serve.rc)" = 0
'
test_expect_success 'the rename failed (EIO) and is applied nowhere' '
	test "$(cat mv.rc)" != 0 && grep -q "Input/output error" mv.err &&
	cmp c "$DR/c.tmp" && test ! -e "$DR/c"
'
test_done
