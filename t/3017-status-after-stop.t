#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# After the service stops (or is killed), nothing says an epoch is being
# served: serve.status keeps state and configuration but drops the live
# figures and the epoch lines, and `dstage status` prints an epoch line only
# for a service that runs (issue 27: a stale "ready" misleads).
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 8 &&
	pack_stage src 2
'

epoch0() {
	grep -qs "^epoch\.0=" "$JOBDIR/0/serve.status" &&
		grep -qs "^epoch\.0=" "$JOBDIR/1/serve.status"
}
svc_col() {
	grep "^$1 " out | grep -q " $2 " || { echo "node $1: svc is not $2"; return 1; }
}

serve_start 2 --seed 5
test_expect_success 'running: the epoch lines in serve.status and in dstage status' '
	serve_up 2 &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null &&
	wait_until 30 epoch0 &&
	grep -q "^prefetch_epoch=" "$JOBDIR/0/serve.status" &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	test_grep "^node 0 epoch [0-9]*: share" out
'
serve_stop
test_expect_success 'stopped: state and configuration kept, no epoch line nor live figure' '
	test "$(cat serve.rc)" = 0 &&
	cat "$JOBDIR/0/serve.status" &&
	for k in 0 1; do
		grep -q "^state=stopped" "$JOBDIR/$k/serve.status" &&
		grep -q "^seed=5" "$JOBDIR/$k/serve.status" &&
		! grep -q "^epoch\.\|^reader_epoch=\|^prefetch_\|^cache_bytes=" "$JOBDIR/$k/serve.status" ||
		exit 1
	done &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	! grep -q "^node [0-9]* epoch" out && test_grep "service down" err
'

serve_start 2 --seed 5
test_expect_success 'killed while it served: no epoch line either, svc "-"' '
	serve_up 2 &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/0/all" >/dev/null &&
	wait_until 30 epoch0 &&
	p0=$(node_pid 0) && p1=$(node_pid 1) && kill_ranks KILL $p0 $p1 &&
	wait_until 20 eval "! kill -0 $p0 2>/dev/null && ! kill -0 $p1 2>/dev/null" &&
	grep -q "^state=running" "$JOBDIR/0/serve.status" &&
	test_status --show err 0 "$DSTAGE" status --to "$SHM" --job "$JOB" >out 2>err && cat out &&
	! grep -q "^node [0-9]* epoch" out && svc_col 0 - && svc_col 1 -
'
serve_wait
test_done
