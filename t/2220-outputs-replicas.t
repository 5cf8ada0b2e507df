#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Replicated outputs (--outputs-replicas 2, docs/outputs.md "Replicated
# outputs"), 3 simulated nodes.  A close returns only when the next node
# holds a copy checked against the CRC-32C: node 2's area has the bytes
# (not a placeholder) and its outputs.status lists the output until the
# holder reports it drained.  Renames and unlinks follow on the replica; a
# replica that cannot keep its copy fails the close (EIO), nothing is
# published.  Then the loss: node 1's service is SIGKILLed right after a
# close, before its (slow) drain, and node 1's store is removed; `dstage
# drain --wait` recovers the output from node 2's copy, CRC-checked, into
# the drain directory, once; the service restarts on the survivors 0 and
# 2 (--failover) and goes on replicating and draining.  Last, a service
# that ends while `dstage drain --wait` waits on it: recovered all the same.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_code 2 'usage: --outputs-replicas 0' '
	"$DSTAGE" serve --to "$SHM" --outputs out --drain-to d --outputs-replicas 0
'
test_expect_code 2 'usage: --outputs-replicas 9 (at most 8)' '
	"$DSTAGE" serve --to "$SHM" --outputs out --drain-to d --outputs-replicas 9
'
test_expect_code 2 'usage: --outputs-replicas without --outputs' '
	"$DSTAGE" serve --to "$SHM" --outputs-replicas 2
'
test_expect_success 'three nodes staged' '
	make_samples src 2 &&
	pack_stage src 3
'
DR="$TRASH/drain"
serve_start 3 --outputs out --drain-to "$DR" --outputs-replicas 2
test_expect_success 'served with two holders per output' 'serve_up 3'

test_expect_success 'a close on node 1: node 2 holds the bytes, node 0 a placeholder' '
	head -c 300000 /dev/urandom >a.bin &&
	shim_on 1 cp a.bin "$MOUNT/out/a.bin" &&
	cmp a.bin "$JOBDIR/1/outputs/ns/a.bin" &&
	cmp a.bin "$JOBDIR/2/outputs/ns/a.bin" &&
	test "$(stat -c %b "$JOBDIR/0/outputs/ns/a.bin")" = 0 &&
	test "$(stat -c %a "$JOBDIR/2/outputs/ns/a.bin")" = "$(stat -c %a "$JOBDIR/1/outputs/ns/a.bin")" &&
	test "$(stat -c %Y "$JOBDIR/2/outputs/ns/a.bin")" = "$(stat -c %Y "$JOBDIR/1/outputs/ns/a.bin")"
'
test_expect_success 'drained once by the holder; the replica stops listing it' '
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp a.bin "$DR/a.bin" &&
	wait_until 10 sh -c "! grep -q ^undrained= $JOBDIR/2/outputs.status" &&
	! grep -q "^undrained=" "$JOBDIR/1/outputs.status" &&
	test "$(ls "$DR")" = a.bin
'
test_expect_success 'a rename and an unlink follow on the replica and in the drain directory' '
	echo one >one && shim_on 1 cp one "$MOUNT/out/one.txt" &&
	shim_on 0 mv "$MOUNT/out/a.bin" "$MOUNT/out/b.bin" &&
	cmp a.bin "$JOBDIR/2/outputs/ns/b.bin" && ! test -e "$JOBDIR/2/outputs/ns/a.bin" &&
	shim_on 2 rm "$MOUNT/out/one.txt" &&
	! test -e "$JOBDIR/2/outputs/ns/one.txt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	cmp a.bin "$DR/b.bin" && test "$(ls "$DR")" = b.bin &&
	! grep -q "^undrained=" "$JOBDIR/2/outputs.status"
'
test_expect_success 'node 2 writes: its replica is on node 0 (the next node)' '
	echo two >two && shim_on 2 cp two "$MOUNT/out/two.txt" &&
	test "$(cat "$JOBDIR/0/outputs/ns/two.txt")" = two &&
	test "$(stat -c %b "$JOBDIR/1/outputs/ns/two.txt")" = 0
'
test_expect_success 'many closes at once on every node: each replicated, drained once' '
	mkdir many && for k in 0 1 2; do for i in 1 2 3 4 5 6 7 8; do
		head -c $((i * 70001)) /dev/urandom >many/n$k.$i || exit 1; done; done &&
	pids= && for k in 0 1 2; do for i in 1 2 3 4 5 6 7 8; do
		shim_on $k cp many/n$k.$i "$MOUNT/out/n$k.$i" & pids="$pids $!"; done; done &&
	for p in $pids; do wait $p || exit 1; done &&
	for k in 0 1 2; do for i in 1 2 3 4 5 6 7 8; do
		cmp many/n$k.$i "$JOBDIR/$(( (k + 1) % 3 ))/outputs/ns/n$k.$i" || exit 1; done; done &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	for k in 0 1 2; do for i in 1 2 3 4 5 6 7 8; do cmp many/n$k.$i "$DR/n$k.$i" || exit 1; done; done &&
	wait_until 10 sh -c "! grep -q ^undrained= $JOBDIR/0/outputs.status $JOBDIR/1/outputs.status $JOBDIR/2/outputs.status"
'
serve_stop
test_expect_success 'stopped cleanly; no replica listed as not drained' '
	cat serve.log && test "$(cat serve.rc)" = 0 && test "$(cat stop.rc)" = 0 &&
	! grep -q "^undrained=" "$JOBDIR"/*/outputs.status && test "$(cat "$DR/two.txt")" = two
'

# a replica that cannot keep its copy: the close fails, nothing is published
DSTAGE_FAULT=outputs.replica:rank=2
export DSTAGE_FAULT
serve_start 3 --outputs out --drain-to "$DR" --outputs-replicas 2
unset DSTAGE_FAULT
test_expect_success 'served, node 2 failing its replicas' 'serve_up 3'
test_expect_success 'the close on node 1 fails (EIO); the output is nowhere' '
	! shim_on 1 cp one "$MOUNT/out/bad.txt" 2>err && cat err &&
	! test -e "$JOBDIR/0/outputs/ns/bad.txt" && ! test -e "$JOBDIR/1/outputs/ns/bad.txt" &&
	! test -e "$JOBDIR/2/outputs/ns/bad.txt" &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" && ! test -e "$DR/bad.txt" &&
	grep -q "cannot keep a replica" serve.log && grep -q "bad.txt.*not replicated" serve.log
'
serve_stop
test_expect_success 'stopped' 'test "$(cat serve.rc)" = 0'

# the loss
serve_start 3 --outputs out --drain-to "$DR" --outputs-replicas 2 --drain-rate 1 --failover
test_expect_success 'served with a drain too slow to finish' 'serve_up 3'
test_expect_success 'node 1 closes m.ckpt; node 1 is killed at once and its store removed' '
	head -c 266666 /dev/urandom >m.ckpt &&
	shim_on 1 cp m.ckpt "$MOUNT/out/m.ckpt" &&
	kill -9 $(node_pid 1) &&
	wait_until 30 sh -c "! kill -0 $SERVE_PID 2>/dev/null" &&
	! test -e "$DR/m.ckpt" &&
	grep "^undrained=266666 " "$JOBDIR/2/outputs.status" &&
	rm -rf "$JOBDIR/1"
'
serve_wait
test_expect_success 'dstage drain --wait: recovered from node 2, CRC-checked, once' '
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	grep -q "node 2: .m.ckpt.: recovered" err &&
	cmp m.ckpt "$DR/m.ckpt" &&
	test "$(find "$DR" -name "m.ckpt" | wc -l)" = 1
'
serve_start 2 --nodes 0,2 --outputs out --drain-to "$DR" --outputs-replicas 2
test_expect_success 'restarted on the survivors 0 and 2' '
	wait_until 60 sh -c "for i in 0 2; do grep -qs ^state=running $JOBDIR/\$i/serve.status && test -S $JOBDIR/\$i/osock || exit 1; done" ||
	{ cat serve.log; false; }
'
test_expect_success 'a new output on node 2 is replicated on node 0 (node 1 is lost) and drained' '
	echo after >after && shim_on 2 cp after "$MOUNT/out/after.txt" &&
	test "$(cat "$JOBDIR/0/outputs/ns/after.txt")" = after &&
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" &&
	test "$(cat "$DR/after.txt")" = after && cmp m.ckpt "$DR/m.ckpt"
'
serve_stop
test_expect_success 'stopped cleanly' 'cat serve.log && test "$(cat serve.rc)" = 0'

# a service that ends under a waiting `dstage drain --wait` (a launcher's
# SIGTERM to the ranks left after one died: Open MPI's mpiexec may return
# before they have left): the drain is not "failed"; it waits for the
# processes to end, then recovers what they left undrained
rm -rf "$DR"/*
serve_start 2 --nodes 0,2 --outputs out --drain-to "$DR" --outputs-replicas 2 --drain-rate 1 --drain-timeout 1
test_expect_success 'served again on 0 and 2, with a drain too slow to finish' '
	wait_until 60 sh -c "for i in 0 2; do grep -qs ^state=running $JOBDIR/\$i/serve.status && test -S $JOBDIR/\$i/osock || exit 1; done" ||
	{ cat serve.log; false; }
'
# (more than one copy chunk, 8 MiB: a stop cuts the copy between chunks,
# a copy already whole is finished)
test_expect_success 'the service ends while dstage drain --wait waits: it recovers, exit 0' '
	head -c 9437184 /dev/urandom >w.ckpt && shim_on 2 cp w.ckpt "$MOUNT/out/w.ckpt" || exit 1
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" >wait.out 2>&1 &
	dpid=$!
	wait_until 30 sh -c "ls -l /proc/$dpid/fd 2>/dev/null | grep -q socket:" &&
		sleep 0.5 && kill -0 $dpid || exit 1
	for i in 0 2; do kill -TERM $(node_pid $i) || exit 1; done
	test_status --show wait.out 0 wait $dpid &&
	grep -q "node 2: .w.ckpt.: recovered" wait.out &&
	cmp w.ckpt "$DR/w.ckpt"
'
serve_wait
test_done
