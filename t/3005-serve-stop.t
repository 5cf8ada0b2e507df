#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Starting and stopping the service: one `dstage stop` from anywhere stops
# every node; SIGTERM to one rank stops all; --clean removes the stores;
# the service refuses to start, with the numbers, when it cannot work.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'serve --help, stop --help' '
	"$DSTAGE" serve --help >out && grep -q -- "--locality" out &&
	"$DSTAGE" stop --help >out && grep -q -- "--to DIR" out &&
	"$DSTAGE" run --help >out && grep -q -- "--shuffle-buffer" out
'
test_expect_code 2 'serve without --to: usage error' '"$DSTAGE" serve'
test_expect_code 2 'serve --locality 2: usage error' '"$DSTAGE" serve --to "$SHM" --locality 2'
test_expect_success 'stop with no service running says so' '
	mkdir -p "$JOBDIR" && test_status --show err 1 "$DSTAGE" stop --to "$SHM" --job "$JOB" 2>err &&
	grep -q "no node service is running" err
'
test_expect_success 'serve on a store that was never staged fails on every rank' '
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job nosuch --node-per-rank 2>err &&
	cat err && grep -q "run dstage stage first" err
'

test_expect_success 'three nodes staged' '
	make_samples src 20 &&
	pack_stage src 3
'
test_expect_success 'a shuffle buffer too small for one epoch: refused at start, with the numbers' '
	! mpirun_n 3 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank --shuffle-buffer 4KiB 2>err &&
	cat err && grep -q "cannot hold one epoch.s remote share (.* for epoch" err &&
	! test -e "$JOBDIR/0/sock"
'
test_expect_success 'a store staged for 3 nodes served by 2: refused' '
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank 2>err &&
	cat err && grep -q "staged as node 0 of 3, this step runs 2" err
'
test_expect_success 'two ranks on one node (no --node-per-rank): refused' '
	! mpirun_n 2 "$DSTAGE" serve --to "$SHM" --job "$JOB" 2>err &&
	cat err && grep -q "one rank per node" err
'

serve_start 3
test_expect_success 'served' 'serve_up 3'
test_expect_success 'epoch.conf written for the shim' '
	grep -q "^seed=0$" "$JOBDIR/epoch.conf" && grep -q "^locality=0$" "$JOBDIR/epoch.conf"
'
t0=$(date +%s)
serve_stop
t1=$(date +%s)
test_expect_success 'one dstage stop stops every node, quickly, exit 0' '
	cat stop.log serve.log &&
	test "$(cat stop.rc)" = 0 && test "$(cat serve.rc)" = 0 &&
	test $((t1 - t0)) -le 10 &&
	for k in 0 1 2; do ! test -e "$JOBDIR/$k/sock" && grep -q "^state=stopped" "$JOBDIR/$k/serve.status" || exit 1; done &&
	! test -e "$JOBDIR/stop"
'
test_expect_success 'the stores are kept for another serve' '
	for k in 0 1 2; do test -s "$JOBDIR/$k/store" && test -s "$JOBDIR/$k/index" || exit 1; done
'

serve_start 3 --seed 4 --drop-last
test_expect_success 'served again (seed 4, drop-last)' '
	serve_up 3 && grep -q "^seed=4$" "$JOBDIR/epoch.conf" && grep -q "^drop_last=1$" "$JOBDIR/epoch.conf"
'
test_expect_success 'SIGTERM to one rank' 'kill -TERM "$(node_pid 1)"'
serve_wait
test_expect_success 'stops every rank cleanly (exit 0)' '
	test "$(cat serve.rc)" = 0 &&
	for k in 0 1 2; do ! test -e "$JOBDIR/$k/sock" || exit 1; done
'

serve_start 3 --clean
test_expect_success 'served with --clean' 'serve_up 3'
serve_stop
test_expect_success '--clean: the node stores are gone' '
	test "$(cat serve.rc)" = 0 && ! test -e "$JOBDIR/0" && ! test -e "$JOBDIR/2"
'
test_done
