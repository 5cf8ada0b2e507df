#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The CRC-32C of a closed output is taken by its holder just after the
# close, not in it (docs/outputs.md): the sum is slowed down (DSTAGE_FAULT
# outputs.sum, 4 s) and the writer's close still returns at once, the file
# visible on the other node with its size; while the sum is pending the
# status shows its CRC as "--------"; a read on the other node waits for
# the sum and gets the right bytes; the drain waits for it too.  A service
# killed before the sum: `dstage drain --wait` recovers the file all the
# same (without a CRC to check).  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

DSTAGE_FAULT=outputs.sum:rank=0:action=sleep:secs=4
export DSTAGE_FAULT
outputs_up 2 --drain-rate 0
unset DSTAGE_FAULT

test_expect_success 'the close does not wait for the sum' '
	head -c 1048576 /dev/urandom >ck &&
	cat >save.py <<-\EOF2 &&
	import sys, time
	data = open(sys.argv[1], "rb").read()
	f = open(sys.argv[2], "wb")
	f.write(data)
	t0 = time.monotonic()
	f.close()
	print("%.3f" % (time.monotonic() - t0))
	EOF2
	shim_on 0 $PY save.py ck "$MOUNT/out/ck.pt" >close.t && cat close.t &&
	# the close returned before the sum was taken: its CRC is still
	# "--------" (a close that waited would have left the CRC there; a
	# bound on the close time would race the load instead)
	grep -q "^undrained=1048576 -------- ck.pt" "$JOBDIR/0/outputs.status" &&
	test "$(shim_on 1 stat -c %s "$MOUNT/out/ck.pt")" = 1048576
'
test_expect_success 'a read on the other node waits for the sum and gets the bytes' '
	shim_on 1 cat "$MOUNT/out/ck.pt" >got && cmp ck got &&
	grep -q "fault injected at .outputs.sum" serve.log
'
test_expect_success 'the drain: the file, checked against its sum' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" && cmp ck "$DR/ck.pt" &&
	! grep -q "^undrained=" "$JOBDIR/0/outputs.status"
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

rm -rf "$DR"
DSTAGE_FAULT=outputs.sum:rank=0:action=sleep:secs=60
export DSTAGE_FAULT
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 0
unset DSTAGE_FAULT
test_expect_success 'served again, the sum stalled' 'serve_up 2'
test_expect_success 'killed after the close, before the sum' '
	shim_on 0 cp ck "$MOUNT/out/late.pt" &&
	grep -q "^undrained=1048576 -------- late.pt" "$JOBDIR/0/outputs.status" &&
	kill_ranks KILL "$(node_pid 0)" "$(node_pid 1)" &&
	wait_until 20 sh -c "! kill -0 $SERVE_PID 2>/dev/null"
'
test_expect_success 'dstage drain --wait recovers it' '
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	grep -q "late.pt.*recovered" err && cmp ck "$DR/late.pt"
'
test_done
