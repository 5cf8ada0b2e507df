#!/bin/sh
# The service killed with outputs pending (docs/outputs.md): the drain is
# slow (--drain-rate 1MiB) and the service is SIGKILLed while it copies.
# `dstage drain --wait` then finds no service, names every output that was
# closed and not drained, removes the half-made copy and exits 1; nothing in
# the drain directory is half-written: what is there under an output's name
# is whole.  2 simulated nodes.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/helpers/serve-lib.sh"

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
	kill -9 $(node_pid 0) $(node_pid 1) &&
	wait_until 20 sh -c "! kill -0 $SERVE_PID 2>/dev/null" &&
	ls -la "$DR" && find "$DR" -name "*.dstage-drain.*" >tmp.list && test -s tmp.list
'
test_expect_code 1 'dstage drain --wait: no service; names what was not drained' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err; rc=$?; cat err >&2; exit $rc
'
test_expect_success 'the report names both and removed the half-made copy' '
	grep -q "big1.bin.*closed but not drained" err &&
	grep -q "big2.bin.*closed but not drained" err &&
	! grep -q small.txt err &&
	! find "$DR" -name "*.dstage-drain.*" | grep -q . &&
	! test -e "$DR/big1.bin" && ! test -e "$DR/big2.bin" &&
	test "$(cat "$DR/small.txt")" = small
'
test_done
