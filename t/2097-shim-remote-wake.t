#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Remote reads under the service's wake-ups (shuffle/progress.c): a node
# polls MPI only while a peer has told it (UDP BEGIN/END) that gets to it
# are in flight, and sleeps otherwise.  Readers on every node at once, from
# services that have been idle (asleep) for a while, through the shim and
# through the raw protocol, get every byte right; three nodes (gets to two
# targets at once); the periodic polls (DSTAGE_SERVE_POLL=1) still serve.
# Speed is measured in bench/exchange.sh, never here.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'three nodes staged (R=1)' '
	make_samples src 30 &&
	pack_stage src 3 &&
	(cd src && find . -type f | sed "s|^\./||" | sort) >paths
'
serve_start 3 --seed 1 --locality 1 -v
test_expect_success 'served, with wake-ups over loopback (every node on this host)' '
	serve_up 3 &&
	grep "progress: wake-ups over UDP (loopback)" serve.log
'

test_expect_success 'the idle services sleep: a first read after 1 s of quiet is right' '
	sleep 1 &&
	for k in 0 1 2; do
		"$T/serve-read" -a -R "$JOBDIR" $k >out.$k && grep -q "errors=0" out.$k &&
		! grep -q "remote=0 " out.$k || { cat out.$k; exit 1; }
	done
'

test_expect_success 'every node reads the remote files at once, 6 threads each, 3 times' '
	for k in 0 1 2; do
		"$T/serve-read" -a -R -t 6 -r 3 "$JOBDIR" $k >par.$k &
	done &&
	wait &&
	for k in 0 1 2; do
		cat par.$k && grep -q "errors=0" par.$k && ! grep -q "remote=0 " par.$k || exit 1
	done
'

test_expect_success 'unmodified readers through the shim on all nodes at once: bytes equal the source' '
	for k in 0 1 2; do
		(
			while read -r p; do
				shim_on $k cat "$MOUNT/$p" | cmp - "src/$p" || { echo "node $k: differs: $p"; exit 1; }
			done <paths
		) >cmp.$k 2>&1 &
	done &&
	wait &&
	ok=1 &&
	for k in 0 1 2; do test ! -s cmp.$k || { ok=0; cat cmp.$k; } || exit 1; done &&
	test $ok = 1 &&
	test "$(stat_val 0 remote_reads)" -gt 0 && test "$(stat_val 0 read_errors)" = 0
'

test_expect_success 'reads spaced out past the END delay (each one wakes its target anew)' '
	n=0 &&
	while read -r p; do
		n=$((n + 1)) && [ $n -le 24 ] || break
		shim_on 2 cat "$MOUNT/$p" | cmp - "src/$p" || { echo "differs: $p"; exit 1; }
		sleep 0.01
	done <paths
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'

DSTAGE_SERVE_POLL=1
export DSTAGE_SERVE_POLL
serve_start 3 --seed 1 --locality 1 -v
test_expect_success 'DSTAGE_SERVE_POLL=1: the periodic polls, and the bytes are right' '
	serve_up 3 &&
	grep "progress: periodic polls (DSTAGE_SERVE_POLL)" serve.log &&
	for k in 0 1 2; do
		"$T/serve-read" -a -R -t 4 "$JOBDIR" $k >poll.$k &
	done &&
	wait &&
	for k in 0 1 2; do
		cat poll.$k && grep -q "errors=0" poll.$k && ! grep -q "remote=0 " poll.$k || exit 1
	done
'
serve_stop
unset DSTAGE_SERVE_POLL
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'

test_done
