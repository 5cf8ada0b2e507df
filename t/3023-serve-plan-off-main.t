#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Planning an epoch never stalls the service's main thread (issue 27).  A
# plan costs O(samples of the job) -- seconds at 14M, the share file's
# write on a slow file system any time -- and main must go on answering the
# other nodes meanwhile: their gets, the agreement every 0.1 s, the
# watchdog's heartbeat.  Here each node's write of epoch 2's share blocks
# in fsync until the test lets it go (an interposed fsync: the slowest file
# system there is), with --timeout 2.  While both nodes' plans of epoch 2
# hang, the nodes keep agreeing (JOBDIR/status.all, gathered every fifth
# agreement, is rewritten again and again), readers read and `dstage
# status` answers; released, epoch 2's shares are published and are
# `dstage epoch`'s lists, and the service stops cleanly.  (Before, main
# planned the epoch itself: the watchdog ended both nodes.)
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"
. "$SRCDIR/t/lib-plan.sh"

test_require CC


test_expect_success 'setup: a slow fsync for the shares of epoch 2, two staged nodes' '
	slowsync_setup
'
slowsync_serve 2 2 --seed 4 --timeout 2
test_expect_success 'served' 'serve_up 2'

# status_all_rewrites N: JOBDIR/status.all replaced N times (a new file
# each: another inode), each after five agreements of both nodes; fails as
# soon as the service is gone
status_all_rewrites() {
	seen= k=0
	while [ $k -lt 1200 ]; do
		kill -0 "$SERVE_PID" 2>/dev/null || { echo "the service is gone"; cat serve.log; return 1; }
		ino=$(stat -c %i "$JOBDIR/status.all" 2>/dev/null) &&
			case " $seen " in *" $ino "*) ;; *) seen="$seen $ino" ;; esac
		[ $(echo $seen | wc -w) -gt "$1" ] && return 0
		sleep 0.05
		k=$((k + 1))
	done
	echo "status.all rewritten $(echo $seen | wc -w) times"
	return 1
}

test_expect_success 'readers enter epoch 1: both nodes plan epoch 2, whose share write hangs' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >list.0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >list.1 &&
	wait_until 60 blocked && ! published 2
'
test_expect_success 'meanwhile the nodes keep agreeing: status.all rewritten 8 times (> --timeout)' '
	status_all_rewrites 8 && blocked && ! published 2 &&
	! grep -E "no answer|has not returned" serve.log
'
test_expect_success 'meanwhile readers read epoch 1 (every byte) and status answers' '
	sed "s|^|$MOUNT/|" list.0 | shim_on 0 xargs -d "\n" cat >got &&
	sed "s|^|src/|" list.0 | xargs -d "\n" cat >want && cmp got want &&
	"$DSTAGE" status --to "$SHM" --job "$JOB" >status.out && cat status.out &&
	test "$(status_val 0 state)" = running && test "$(status_val 1 state)" = running &&
	! published 2
'
test_expect_success 'released: epoch 2 planned, its shares are dstage epoch'"'"'s lists' '
	release &&
	wait_until 60 published 2 &&
	for k in 0 1; do
		"$DSTAGE" epoch --to "$SHM" --job "$JOB" --node $k 2 >want.$k &&
		shim_on $k cat "$MOUNT/.dstage/epochs/2/all" >got.$k &&
		test -s want.$k && cmp want.$k got.$k || exit 1
	done
'
serve_stop
test_expect_success 'stopped cleanly; no node was taken as gone' '
	cat serve.log && test "$(cat serve.rc)" = 0 &&
	! grep -E "no answer|has not returned|error" serve.log
'
test_done
