#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service killed with outputs pending (docs/outputs.md): the drain is
# slow (--drain-rate 1MiB) and the service is SIGKILLed while it copies.
# Nothing in the drain directory is half-written under an output's name.
# `dstage drain` then names every output that was closed and not drained
# (exit 1); `dstage drain --wait` finds no service, removes the half-made
# copy and recovers those outputs from the node's output area, the drain's
# way (CRC-checked, fsync, rename), naming each.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$TRASH/drain"
serve_start 2 --outputs out --drain-to "$DR" --drain-rate 1MiB
test_expect_success 'served with a slow drain' 'serve_up 2'

test_expect_success 'a small output drains; two 3 MiB ones are queued behind it' '
	echo small >small &&
	shim_on 0 cp small "$MOUNT/out/small.txt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	head -c 3145728 /dev/urandom >big &&
	shim_on 0 cp big "$MOUNT/out/big1.bin" &&
	shim_on 0 cp big "$MOUNT/out/big2.bin" &&
	wait_until 10 grep -q "^draining_tmp=/" "$JOBDIR/0/outputs.status" &&
	cat "$JOBDIR/0/outputs.status"
'
test_expect_success 'the service is killed while it copies' '
	kill_ranks KILL "$(node_pid 0)" "$(node_pid 1)" &&
	wait_until 20 sh -c "! kill -0 $SERVE_PID 2>/dev/null" &&
	ls -la "$DR" && find "$DR" -name "*.dstage-drain.*" >tmp.list && test -s tmp.list
'
serve_start 2 --outputs out --drain-to "$DR"
serve_wait
test_expect_success 'a new service of the job is refused while they are not recovered' '
	cat serve.log && test "$(cat serve.rc)" = 1 &&
	grep -q "were not drained" serve.log && test -e "$JOBDIR/0/outputs/ns/big1.bin"
'
test_expect_success 'dstage drain: names what was closed and not drained, exit 1' '
	test_status --show err 1 "$DSTAGE" drain --to "$SHM" --job "$JOB" 2>err &&
	grep -q "big1.bin.*closed but not drained" err &&
	grep -q "big2.bin.*closed but not drained" err &&
	! grep -q small.txt err && ! test -e "$DR/big1.bin" && ! test -e "$DR/big2.bin"
'
test_expect_success 'dstage drain --wait: no service; the half-made copy removed, both recovered' '
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	grep -q "big1.bin.*recovered" err && grep -q "big2.bin.*recovered" err &&
	grep -q "removed the half-made copy" err &&
	! find "$DR" -name "*.dstage-drain.*" | grep -q . &&
	cmp big "$DR/big1.bin" && cmp big "$DR/big2.bin" &&
	test "$(cat "$DR/small.txt")" = small
'
serve_start 2 --outputs out --drain-to "$DR"
test_expect_success 'recovered: a new service of the job starts' 'serve_up 2'
serve_stop
test_expect_success 'and stops cleanly' 'test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0'
test_done
