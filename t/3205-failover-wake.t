#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service's wake-ups (shuffle/progress.c) on a failover set, where MPI
# rank != staged node: 4 nodes staged with R = 2, served on 1, 2, 3 only
# (--nodes 1-3: node 0 lost; ranks 0, 1, 2 serve nodes 1, 2, 3).  The
# wake-ups are set up and reported by rank 0 (node 1), and every node's
# remote reads, spaced out past the END delay so that each one wakes its
# target anew, are right.  Before the fix the peers were named by staged
# node: node 3's BEGINs were dropped by every target as out of range, and
# with node 0 gone no rank drew the cookie or said which progress it used.
# Speed is measured in bench/, never here.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'four nodes staged, R=2' '
	make_samples src 12 &&
	pack_stage src 4 -R 2
'
serve_start 3 --nodes 1-3 -v
test_expect_success 'served on 1, 2, 3 with wake-ups over loopback, reported once' '
	wait_until 60 sh -c "for i in 1 2 3; do grep -qs ^state=running $JOBDIR/\$i/serve.status &&
		test -S $JOBDIR/\$i/sock || exit 1; done" &&
	cat serve.log &&
	test "$(grep -c "progress: wake-ups over UDP (loopback)" serve.log)" = 1
'
test_expect_success 'every node reads its remote files, each read after the END delay' '
	for k in 1 2 3; do
		"$T/serve-read" -a -R "$JOBDIR" $k >out.$k &&
		cat out.$k && grep -q "errors=0" out.$k && ! grep -q "remote=0 " out.$k || exit 1
	done &&
	(cd src && find train -type f | sort) >paths &&
	for k in 3 1; do
		n=0 &&
		while read -r p; do
			n=$((n + 1)) && [ $n -le 16 ] || break
			shim_on $k cat "$MOUNT/$p" | cmp - "src/$p" || { echo "node $k: differs: $p"; exit 1; }
			sleep 0.01
		done <paths || exit 1
	done
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
