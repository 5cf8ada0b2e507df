#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A step that ends with outputs not drained says so and exits non-zero
# (docs/outputs.md): the drain fails (DSTAGE_FAULT drain.write), and an
# output is still open for writing when the service is stopped: the service
# names both and exits 1, `dstage stop` and `dstage drain --wait` exit 1,
# nothing half-written is left in the drain directory; the writer's late
# close gets EIO.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

DSTAGE_FAULT=drain.write:rank=1
export DSTAGE_FAULT
outputs_up 2 --drain-rate 0
unset DSTAGE_FAULT

test_expect_success 'an output on node 1 cannot be drained: drain --wait exits 1' '
	shim_on 0 sh -c "echo fine >$MOUNT/out/fine.txt" &&
	shim_on 1 sh -c "echo doomed >$MOUNT/out/doomed.txt" &&
	! "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err && cat err &&
	test "$(cat "$DR/fine.txt")" = fine && ! test -e "$DR/doomed.txt" &&
	! find "$DR" -name "*.dstage-drain.*" | grep -q . &&
	grep -q "doomed.txt" serve.log
'
rm -f held go
test_expect_success 'a writer still open on node 0' '
	cat >hold.py <<-\EOF2 &&
	import sys, time, os, errno
	f = open(sys.argv[1], "w")
	f.write("closed too late\n")
	f.flush()
	with open(sys.argv[2], "w") as g:
	    g.write("%d\n" % os.getpid())
	for i in range(300):
	    if os.path.exists(sys.argv[3]):
	        break
	    time.sleep(0.1)
	try:
	    f.close()
	    r = "closed"
	except OSError as e:
	    r = errno.errorcode[e.errno]
	with open(sys.argv[4], "w") as g:
	    g.write(r + "\n")
	EOF2
	(shim_on 0 $PY hold.py "$MOUNT/out/open.txt" held go result &) &&
	wait_until 10 test -e held
'
serve_stop
test_expect_success 'the service and dstage stop exit 1 and say why' '
	cat serve.log stop.log &&
	test "$(cat serve.rc)" = 1 && test "$(cat stop.rc)" = 1 &&
	grep -q "open.txt.*still open for writing" serve.log &&
	grep -q "drain operation(s) .* failed" serve.log &&
	! test -e "$DR/open.txt"
'
test_expect_success 'the writer closing after the service left gets EIO, not silence' '
	touch go && wait_until 10 test -s result && test "$(cat result)" = EIO
'
kill "$(cat held)" 2>/dev/null
test_done
