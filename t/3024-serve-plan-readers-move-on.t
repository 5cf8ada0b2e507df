#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Readers move on while an epoch is being planned (issue 27: plans are made
# off the service's main thread).  Both nodes' plans of epoch 2 hang in the
# write of its share (an interposed fsync that waits for the test); the
# readers meanwhile leave for epoch 5.  The service follows them at once
# (reader_epoch 5, the agreement goes on), gives the hanging plan up, and
# plans 5 and 6 after it; released, epoch 2's share file is removed again
# (nobody reads 2 any more), 5's and 6's are published and are `dstage
# epoch`'s lists, epoch 5 is prefetched and read byte for byte, and the
# service stops cleanly.  (Before, main planned the epoch itself: the
# watchdog ended both nodes while the write hung.)
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
. "$SRCDIR/t/lib-plan.sh"

test_require CC


test_expect_success 'setup: a slow fsync for the shares of epoch 2, two staged nodes' '
	slowsync_setup
'
slowsync_serve 2 2 --seed 6 --timeout 2
test_expect_success 'served' 'serve_up 2'

followed() { test "$(status_val 0 reader_epoch)" = "$1" && test "$(status_val 1 reader_epoch)" = "$1"; }
alive() { kill -0 "$SERVE_PID" 2>/dev/null || { echo "the service is gone"; cat serve.log; return 1; }; }

test_expect_success 'readers enter epoch 1: the plans of epoch 2 hang' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	wait_until 60 blocked
'
test_expect_success 'readers leave for epoch 5 meanwhile: followed at once, the service lives on' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/5/all" >list.0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/5/all" >list.1 &&
	wait_until 60 followed 5 && alive && blocked && ! published 5 &&
	sleep 3 && alive && ! grep -E "no answer|has not returned" serve.log
'
test_expect_success 'released: 2 given up (its share removed), 5 and 6 published as dstage epoch'"'"'s' '
	release &&
	wait_until 60 published 6 && published 5 &&
	for k in 0 1; do
		for e in 5 6; do
			"$DSTAGE" epoch --to "$SHM" --job "$JOB" --node $k $e >want.$k.$e &&
			shim_on $k cat "$MOUNT/.dstage/epochs/$e/all" >got.$k.$e &&
			test -s want.$k.$e && cmp want.$k.$e got.$k.$e || exit 1
		done
	done &&
	wait_until 30 eval "! test -e \"$JOBDIR/0/epochs/share.2\" && ! test -e \"$JOBDIR/1/epochs/share.2\""
'
test_expect_success 'epoch 5 is prefetched and read byte for byte' '
	for k in 0 1; do
		wait_until 60 eval "test \"\$(status_val $k prefetch_epoch)\" -ge 5 &&
			test \"\$(stat_val $k prefetch_done)\" = \"\$(stat_val $k prefetch_total)\"" &&
		sed "s|^|$MOUNT/|" list.$k | shim_on $k xargs -d "\n" cat >got &&
		sed "s|^|src/|" list.$k | xargs -d "\n" cat >want && cmp got want || exit 1
	done &&
	grep -q "^epoch\.5=" "$JOBDIR/0/serve.status" && grep -q "^epoch\.5=" "$JOBDIR/1/serve.status"
'
serve_stop
test_expect_success 'stopped cleanly; no node was taken as gone' '
	cat serve.log && test "$(cat serve.rc)" = 0 &&
	! grep -E "no answer|has not returned|error" serve.log
'
test_done
