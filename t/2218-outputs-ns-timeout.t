#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A rename, unlink, mkdir or rmdir of outputs that timed out is never
# applied (docs/outputs.md "Renames, unlinks and directories"): node 0's
# service is stopped (SIGSTOP) while a program on node 1 with
# DSTAGE_TIMEOUT=3 rotates a checkpoint (`mv ckpt.tmp ckpt`), removes an
# old one, makes and removes a directory: each call fails with EIO.  Once
# node 0 runs again, none of them lands: a later change from node 1 (which
# node 0 takes after the stale requests) finds the tree as the program was
# told, on every node and in the drain directory.  Then the program's retry
# works.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

outputs_up 2

cat >nsops.py <<'PY'
import errno, os, sys
d = sys.argv[1]
bad = 0
for what, call in (("rename", lambda: os.rename(d + "/ckpt.tmp", d + "/ckpt")),
                   ("unlink", lambda: os.unlink(d + "/old.ckpt")),
                   ("mkdir", lambda: os.mkdir(d + "/newdir")),
                   ("rmdir", lambda: os.rmdir(d + "/emptydir"))):
    try:
        call()
        print(what + ": it worked")
        bad = 1
    except OSError as e:
        print(what + ":", errno.errorcode.get(e.errno, e.errno))
        if e.errno != errno.EIO:
            bad = 1
sys.exit(bad)
PY

# node 1's service said, for each of the four, that nothing was applied
gave_up_4() {
	test "$(grep -c "gave up its .* before node 0 had checked it" serve.log)" = 4
}
# the tree as the program was told it is: nothing changed
tree_unchanged() {
	shim_on $1 cmp new "$MOUNT/out/ckpt.tmp" &&
	shim_on $1 cmp good "$MOUNT/out/ckpt" &&
	shim_on $1 cmp old "$MOUNT/out/old.ckpt" &&
	shim_on $1 test -d "$MOUNT/out/emptydir" &&
	! shim_on $1 test -e "$MOUNT/out/newdir"
}

test_expect_success 'a checkpoint, its next version, an old one, an empty directory' '
	head -c 100000 /dev/urandom >good && head -c 70000 /dev/urandom >new &&
	echo old >old &&
	shim_on 1 cp good "$MOUNT/out/ckpt" &&
	shim_on 1 cp new "$MOUNT/out/ckpt.tmp" &&
	shim_on 0 cp old "$MOUNT/out/old.ckpt" &&
	shim_on 0 mkdir "$MOUNT/out/emptydir" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp good "$DR/ckpt" && cmp new "$DR/ckpt.tmp" && cmp old "$DR/old.ckpt"
'
test_expect_success 'node 0 stopped: rename, unlink, mkdir, rmdir on node 1 (DSTAGE_TIMEOUT=3) fail with EIO' '
	P0=$(node_pid 0) && kill -STOP $P0 &&
	rc=0 && { shim_on 1 env DSTAGE_TIMEOUT=3 "$PY" nsops.py "$MOUNT/out" >ops.out || rc=$?; } &&
	sleep 1 && kill -CONT $P0 && cat ops.out && test $rc = 0
'
test_expect_success 'once node 0 has taken the stale requests: none of them landed' '
	shim_on 1 mkdir "$MOUNT/out/after" &&
	tree_unchanged 0 && tree_unchanged 1 &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp good "$DR/ckpt" && cmp new "$DR/ckpt.tmp" && cmp old "$DR/old.ckpt" &&
	wait_until 10 gave_up_4 && grep "gave up its" serve.log
'
test_expect_success 'the retry works: the rotation lands everywhere' '
	shim_on 1 mv "$MOUNT/out/ckpt.tmp" "$MOUNT/out/ckpt" &&
	shim_on 1 rm "$MOUNT/out/old.ckpt" &&
	shim_on 0 cmp new "$MOUNT/out/ckpt" &&
	! shim_on 0 test -e "$MOUNT/out/ckpt.tmp" &&
	! shim_on 0 test -e "$MOUNT/out/old.ckpt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp new "$DR/ckpt" && ! test -e "$DR/ckpt.tmp" && ! test -e "$DR/old.ckpt"
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'

# The change slow to be applied after node 0 answered the check
# (DSTAGE_FAULT: node 1's service sleeps 7 s before it hands node 0 the
# confirmed change): it is decided, so the call waits for it past its
# DSTAGE_TIMEOUT=3 and returns 0, never EIO for a change that lands.
rm -f serve.log
DSTAGE_FAULT=outputs.ns_commit:rank=1:action=sleep:secs=7
export DSTAGE_FAULT
serve_start 2 --outputs out2 --drain-to "$DR"
unset DSTAGE_FAULT
test_expect_success 'served again, confirmed changes slow to reach node 0' 'serve_up 2'
cat >slowmv.py <<'PY'
import os, sys, time
t = time.monotonic()
os.rename(sys.argv[1], sys.argv[2])
print("rename took %.1f s" % (time.monotonic() - t))
sys.exit(0 if time.monotonic() - t > 3.5 else 5)
PY
test_expect_success 'a rename slow after its check returns 0 after its timeout, and lands' '
	shim_on 1 cp new "$MOUNT/out2/c.tmp" &&
	shim_on 1 env DSTAGE_TIMEOUT=3 "$PY" slowmv.py "$MOUNT/out2/c.tmp" "$MOUNT/out2/c" &&
	shim_on 0 cmp new "$MOUNT/out2/c" && shim_on 1 cmp new "$MOUNT/out2/c" &&
	! shim_on 0 test -e "$MOUNT/out2/c.tmp"
'
serve_stop
test_expect_success 'stopped cleanly again' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
