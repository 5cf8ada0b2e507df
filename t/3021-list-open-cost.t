#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A reader's epoch list costs its own part, whatever its reader number
# (issue 27): opening .dstage/epochs/<e>/<l>-of-<n> (or the sampler's
# ds_py_list) slices the share the service published and tells the service
# the epoch started without waiting for its answer: the open never sits in
# poll() on the service's socket (it did, up to 0.2 s, each open), and
# reader 7 of 8 makes the same system calls as reader 0 of 1.  The answers
# not waited for are read by the next request on the connection: remote
# reads after many list opens still get every byte right.  Counts from
# strace, never a time.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_lazy_prereq STRACE 'strace -f -qq -o /dev/null true' 'strace -f works here (ptrace allowed)'
test_require PYTHON STRACE

test_expect_success 'two nodes staged' '
	make_samples src 24 &&
	pack_stage src 2
'
serve_start 2 --seed 4
published() { test -s "$JOBDIR/0/epochs/share.$1"; }
test_expect_success 'served; epoch 0 published' 'serve_up 2 && wait_until 30 published 0'

# calls L: the system calls of one open + read of node 0's list L of epoch 0
# while node 0's service is stopped (SIGSTOP: it accepts nothing, answers
# nothing): poll/ppoll on any descriptor, opens of the share, connects
calls() {
	shim_on 0 strace -f -qq -e trace=poll,ppoll,select,pselect6,connect,openat,open \
		-o "trace.$1" cat "$MOUNT/.dstage/epochs/0/$1" >"list.$1" &&
	test -s "list.$1" &&
	polls=$(grep -c "poll(\|select(" "trace.$1" || :) &&
	shares=$(grep -c "share\.0\"" "trace.$1" || :) &&
	conns=$(grep -c "connect(" "trace.$1" || :) &&
	echo "$1: $(wc -l <"list.$1") entries, $polls polls, $shares opens of share.0, $conns connects" &&
	echo "$polls $shares $conns" >"count.$1"
}
test_expect_success 'a list open never waits for the service; reader 7 of 8 costs what reader 0 of 1 does' '
	pid=$(node_pid 0) && test -n "$pid" &&
	test_atexit "kill -CONT $pid 2>/dev/null" &&
	kill -STOP "$pid" &&
	rc=0 && { calls 0-of-1 && calls 3-of-4 && calls 7-of-8 || rc=$?; } && kill -CONT "$pid" && test $rc = 0 &&
	echo "0 1 1" >want &&
	test_cmp want count.0-of-1 && test_cmp want count.3-of-4 && test_cmp want count.7-of-8
'

cat >reads.py <<'PYEOF'
import os, sys
sys.path.insert(0, os.environ["PYDIR"])
import dstage
src, mount = sys.argv[1], os.environ["DSTAGE_MOUNT"]
ds = dstage.DstageFiles("train")
# announcements on one connection, answers not read yet: text lists and the
# sampler's ids, epochs back and forth
for e in (0, 1, 0, 2, 1):
    assert dstage.epoch_list(e, 1, 2)
    s = dstage.EpochSampler(ds, rank=0, num_replicas=2, epoch=e)
    assert s._fast is not None and len(s) > 0
# then every file of the dataset, a third of them held by node 1 (remote
# reads on that connection)
n = 0
for i in range(len(ds)):
    data, target = ds[i]
    with open(os.path.join(src, ds.paths[i]), "rb") as f:
        assert data == f.read(), ds.paths[i]
    n += 1
print("%d files read right after the announcements" % n)
PYEOF
test_expect_success 'remote reads after many list opens: every byte right' '
	shim_on 0 env PYDIR="$SRCDIR/io/python" "$PY" reads.py src &&
	remote=$(stat_val 0 remote_reads) && echo "remote reads: $remote" && test "$remote" -gt 0
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'
test_done
