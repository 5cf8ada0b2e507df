#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# dstage status while the service starts: its start takes seconds at
# millions of files (the index check, the first epoch, the window), and all
# that time the service already holds the job.  status says "starting" (and
# "start" in the svc column), never "service down"; a start that dies leaves
# no "starting" behind (issue 27).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 8 &&
	pack_stage src 2
'

# the start held for 6 s right after the window (a fault point that sleeps)
export DSTAGE_FAULT=serve.window:action=sleep:secs=6
serve_start 2 --seed 1
unset DSTAGE_FAULT

# svc_col K WORD: the svc column of node K's row in out says WORD
svc_col() {
	grep "^$1 " out | grep -q " $2 " || { echo "node $1: svc is not $2"; return 1; }
}

starting() {
	grep -qs "^state=starting" "$JOBDIR/0/serve.status" &&
		grep -qs "^state=starting" "$JOBDIR/1/serve.status"
}
test_expect_success 'while the service starts: "service starting", not "service down"' '
	wait_until 30 starting &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	! test -S "$JOBDIR/0/sock" &&
	test_grep "service starting: figures of the node(s) stored on this host only" err &&
	! grep -q "service down" err &&
	svc_col 0 start &&
	svc_col 1 start
'
test_expect_success 'then it serves: up' '
	serve_up 2 &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	! grep -q "service starting\|service down" err &&
	svc_col 0 up
'
serve_stop
test_expect_success 'stopped: down again' '
	test "$(cat serve.rc)" = 0 &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	test_grep "service down" err &&
	svc_col 0 -
'

export DSTAGE_FAULT=serve.window:action=sleep:secs=60
serve_start 2 --seed 1
unset DSTAGE_FAULT
test_expect_success 'a start killed midway is down, not starting for ever' '
	wait_until 30 starting &&
	p0=$(node_pid 0) && p1=$(node_pid 1) && kill_ranks KILL $p0 $p1 &&
	wait_until 20 eval "! kill -0 $p0 2>/dev/null && ! kill -0 $p1 2>/dev/null" &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	test_grep "service down" err &&
	svc_col 0 -
'
serve_wait
test_done
