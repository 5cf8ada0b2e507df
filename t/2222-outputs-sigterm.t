#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# A service ended by SIGTERM (Slurm's at a job's time limit, KILL follows
# after KillWait) with outputs not drained and a `dstage drain --wait`
# connected: every node leaves within the bounded --drain-timeout and a
# second or two, not after the watchdog's --timeout (20 s) blaming a node,
# with outputs.status saved; `dstage drain --wait` then recovers what was
# left, CRC-checked, once.  2 simulated nodes, replicated outputs; the
# output is larger than one copy chunk (8 MiB), so that the stop comes in
# the middle of its copy, paced at --drain-rate 1.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'two nodes staged' '
	make_samples src 2 &&
	pack_stage src 2
'
DR="$TRASH/drain"
mkdir -p "$DR"
serve_start 2 --outputs out --drain-to "$DR" --outputs-replicas 2 --drain-rate 1 --drain-timeout 1
test_expect_success 'served with a drain too slow to finish' 'serve_up 2'
test_expect_success 'SIGTERM under drain --wait: every node leaves within 10 s, no watchdog' '
	head -c 9437184 /dev/urandom >w.ckpt && shim_on 1 cp w.ckpt "$MOUNT/out/w.ckpt" || exit 1
	"$DSTAGE" drain --wait --to "$SHM" --job "$JOB" >wait.out 2>&1 &
	dpid=$!
	wait_until 30 sh -c "ls -l /proc/$dpid/fd 2>/dev/null | grep -q socket:" &&
		sleep 0.5 && kill -0 $dpid || exit 1
	p0=$(node_pid 0) && p1=$(node_pid 1) || exit 1
	t0=$(date +%s.%N) &&
	kill_ranks TERM $p0 $p1 &&
	wait_gone 30 $p0 $p1 &&
	t1=$(date +%s.%N) &&
	rc=0 && { wait $dpid || rc=$?; } && echo $rc >wait.rc &&
	took=$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") &&
	echo "# the ranks left in $took s" &&
	cat serve.log wait.out &&
	awk "BEGIN { exit !($took < 10) }" &&
	! grep -q "has not returned" serve.log &&
	grep -q "w.ckpt.*the service stopped during its copy" serve.log
'
serve_wait
# drain --wait recovers only what a saved outputs.status lists undrained
test_expect_success 'drain --wait recovered the output, CRC-checked, once' '
	test "$(cat wait.rc)" = 0 &&
	grep -q "node 1: .w.ckpt.: recovered" wait.out &&
	cmp w.ckpt "$DR/w.ckpt" &&
	test "$(find "$DR" -name "w.ckpt" | wc -l)" = 1
'
test_done
