#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# rename(2) of a directory of closed outputs (docs/outputs.md): one change
# ordered by node 0 and applied on every node as one rename of its
# directory, so every node shows the tree under one name or the other.
# Files held by either node follow (read by their new names on both nodes),
# the drain directory follows (each holder moves its drained files there),
# and what rename(2) refuses is refused: into itself (EINVAL), onto a
# non-empty directory (ENOTEMPTY), onto a file (ENOTDIR); a directory with
# a file being written under it is EBUSY.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

outputs_up 2 --drain-rate 0

test_expect_success 'a tree of outputs written on both nodes, drained' '
	shim_on 0 mkdir -p "$MOUNT/out/run/ep1" &&
	shim_on 0 sh -c "echo a0 >$MOUNT/out/run/a.txt" &&
	shim_on 1 sh -c "echo b1 >$MOUNT/out/run/ep1/b.txt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/run/ep1/b.txt")" = b1
'
test_expect_success 'mv of the directory on node 1: both nodes see the new tree, not the old' '
	shim_on 1 mv "$MOUNT/out/run" "$MOUNT/out/final" &&
	for k in 0 1; do
		test "$(shim_on $k cat "$MOUNT/out/final/a.txt")" = a0 &&
		test "$(shim_on $k cat "$MOUNT/out/final/ep1/b.txt")" = b1 &&
		! shim_on $k test -e "$MOUNT/out/run" || return 1
	done
'
test_expect_success 'the drain directory follows' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/final/a.txt")" = a0 && test "$(cat "$DR/final/ep1/b.txt")" = b1 &&
	! test -e "$DR/run/a.txt" && ! test -e "$DR/run/ep1/b.txt"
'
test_expect_success 'what rename(2) refuses is refused' '
	cat >ren.py <<-\EOF2 &&
	import os, sys, errno
	m = sys.argv[1] + "/out/"
	def ren(a, b):
	    try:
	        os.rename(m + a, m + b)
	        print("ok")
	    except OSError as e:
	        print(errno.errorcode[e.errno])
	os.mkdir(m + "full")
	open(m + "full/x", "w").close()
	open(m + "file", "w").close()
	ren("final", "final/ep1/inside")
	ren("final", "full")
	ren("final", "file")
	os.mkdir(m + "empty")
	ren("final", "empty")
	EOF2
	shim_on 0 $PY ren.py "$MOUNT" >out && cat out &&
	printf "EINVAL\nENOTEMPTY\nENOTDIR\nok\n" >want && test_cmp want out &&
	test "$(shim_on 1 cat "$MOUNT/out/empty/ep1/b.txt")" = b1
'
rm -f held go
test_expect_success 'a directory with a file being written under it: EBUSY' '
	shim_on 0 mkdir "$MOUNT/out/busy" &&
	cat >hold.py <<-\EOF2 &&
	import sys, time, os
	f = open(sys.argv[1], "w")
	f.write("x\n")
	f.flush()
	open(sys.argv[2], "w").close()
	for i in range(300):
	    if os.path.exists(sys.argv[3]):
	        break
	    time.sleep(0.1)
	f.close()
	EOF2
	(shim_on 1 $PY hold.py "$MOUNT/out/busy/w.txt" held go &) &&
	wait_until 10 test -e held &&
	cat >ren2.py <<-\EOF2 &&
	import os, sys, errno
	try:
	    os.rename(sys.argv[1] + "/out/busy", sys.argv[1] + "/out/busy2")
	    print("ok")
	except OSError as e:
	    print(errno.errorcode[e.errno])
	EOF2
	test "$(shim_on 0 $PY ren2.py "$MOUNT")" = EBUSY &&
	touch go && wait_until 10 shim_on 0 test -e "$MOUNT/out/busy/w.txt" &&
	test "$(shim_on 0 $PY ren2.py "$MOUNT")" = ok &&
	test "$(shim_on 0 cat "$MOUNT/out/busy2/w.txt")" = x
'
serve_stop
test_expect_success 'stopped cleanly, everything drained under its last name' '
	test "$(cat serve.rc)" = 0 && test "$(cat "$DR/busy2/w.txt")" = x &&
	test "$(cat "$DR/empty/a.txt")" = a0
'
test_done
