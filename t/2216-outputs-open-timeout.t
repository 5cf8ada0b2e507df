#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# An open for writing that timed out publishes nothing (docs/outputs.md
# "One writer per path"): node 0's service is stopped (SIGSTOP) for 6 s
# while a writer on node 1 with DSTAGE_TIMEOUT=3 opens an existing good
# checkpoint with "w".  Its open fails with EIO (what the docs say for a
# service that does not answer); when node 0 decides the create later, the
# writer is gone and never confirmed it: the create is rolled back.  The
# good checkpoint stays whole on every node and in the drain directory,
# and the path is free for the next writer.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

outputs_up 2

cat >openw.py <<'PY'
import errno, sys
try:
    f = open(sys.argv[1], "w")
except OSError as e:
    print("open:", errno.errorcode.get(e.errno, e.errno))
    sys.exit(0 if e.errno == errno.EIO else 4)
print("open: it worked")
sys.exit(3)
PY

test_expect_success 'a good checkpoint, drained' '
	head -c 100000 /dev/urandom >good &&
	shim_on 1 cp good "$MOUNT/out/m.ckpt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp good "$DR/m.ckpt"
'
test_expect_success 'node 0 stopped 6 s: the open on node 1 (DSTAGE_TIMEOUT=3) fails with EIO' '
	P0=$(node_pid 0) && kill -STOP $P0 &&
	rc=0 && { shim_on 1 env DSTAGE_TIMEOUT=3 "$PY" openw.py "$MOUNT/out/m.ckpt" >open.out || rc=$?; } &&
	sleep 3 && kill -CONT $P0 && cat open.out && test $rc = 0
'
test_expect_success 'once node 0 decided it (and 12 s more): nothing was published' '
	wait_until 20 grep -q "gave up its open" serve.log && sleep 12 &&
	grep "gave up" serve.log &&
	shim_on 0 cmp good "$MOUNT/out/m.ckpt" &&
	shim_on 1 cmp good "$MOUNT/out/m.ckpt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp good "$DR/m.ckpt"
'
test_expect_success 'the path is free: the next writer replaces it' '
	echo new >new && shim_on 0 cp new "$MOUNT/out/m.ckpt" &&
	shim_on 1 cmp new "$MOUNT/out/m.ckpt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" && cmp new "$DR/m.ckpt"
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
