#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Remote reads fetched by the service's socket thread (shuffle/direct.c,
# MPI_THREAD_MULTIPLE): the socket thread's gets and flushes run beside
# main's epoch prefetch on the same window and to the same targets; every
# byte is right either way, the BEGIN/END of the two threads (two channels,
# progress.c) do not stop each other's polls, and DSTAGE_SERVE_DIRECT=0
# hands every read to main as before.  Speed: bench/rlat.sh, never here.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'three nodes staged (R=1)' '
	make_samples src 40 &&
	pack_stage src 3 &&
	(cd src && find . -type f | sed "s|^\./||" | sort) >paths
'
serve_start 3 --seed 3 -v
test_expect_success 'the socket thread fetches the remote reads' '
	serve_up 3 &&
	test "$(grep -c "remote reads: fetched by the socket thread (MPI_THREAD_MULTIPLE)" serve.log)" = 3
'

test_expect_success 'remote reads on every node while every node prefetches epochs 1-3' '
	for k in 0 1 2; do
		(
			for e in 1 2 3; do
				"$T/serve-read" -e $e -c -w 20 "$JOBDIR" $k >ep.$e.$k || exit 1
			done
		) &
		"$T/serve-read" -a -R -t 4 -r 4 "$JOBDIR" $k >par.$k &
	done &&
	wait &&
	for k in 0 1 2; do
		cat par.$k && grep -q "errors=0" par.$k && ! grep -q "remote=0 " par.$k || exit 1
		for e in 1 2 3; do grep -q "errors=0" ep.$e.$k || { cat ep.$e.$k; exit 1; }; done
	done
'

test_expect_success 'unmodified readers through the shim: bytes equal the source' '
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
	test "$(stat_val 1 remote_reads)" -gt 0 && test "$(stat_val 1 read_errors)" = 0
'

test_expect_success 'reads spaced out past the END delay: each wakes its target anew' '
	n=0 &&
	while read -r p; do
		n=$((n + 1)) && [ $n -le 20 ] || break
		shim_on 0 cat "$MOUNT/$p" | cmp - "src/$p" || { echo "differs: $p"; exit 1; }
		sleep 0.01
	done <paths
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'

# serve asks MPI for MPI_THREAD_MULTIPLE and needs only FUNNELED: an MPI
# that gives FUNNELED (fault mpi.funneled) still serves, main fetching
DSTAGE_FAULT=mpi.funneled
export DSTAGE_FAULT
serve_start 3 --seed 3 --locality 1 -v
unset DSTAGE_FAULT
test_expect_success 'MPI gives MPI_THREAD_FUNNELED: the service runs, main fetches, bytes right' '
	serve_up 3 &&
	test "$(grep -c "remote reads: fetched by the main thread (MPI gives less than MPI_THREAD_MULTIPLE)" serve.log)" = 3 &&
	n=0 &&
	while read -r p; do
		n=$((n + 1)) && [ $n -le 20 ] || break
		shim_on 1 cat "$MOUNT/$p" | cmp - "src/$p" || { echo "differs: $p"; exit 1; }
	done <paths &&
	test "$(stat_val 1 remote_reads)" -gt 0
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'

DSTAGE_SERVE_DIRECT=0
export DSTAGE_SERVE_DIRECT
serve_start 3 --seed 3 --locality 1 -v
test_expect_success 'DSTAGE_SERVE_DIRECT=0: main fetches the reads, and the bytes are right' '
	serve_up 3 &&
	test "$(grep -c "remote reads: fetched by the main thread (DSTAGE_SERVE_DIRECT=0)" serve.log)" = 3 &&
	for k in 0 1 2; do
		"$T/serve-read" -a -R -t 4 -r 2 "$JOBDIR" $k >main.$k &
	done &&
	wait &&
	for k in 0 1 2; do
		cat main.$k && grep -q "errors=0" main.$k && ! grep -q "remote=0 " main.$k || exit 1
	done
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
