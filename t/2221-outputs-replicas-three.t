#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Replicated outputs with three holders (--outputs-replicas 3, docs/outputs.md
# "Replicated outputs"), 4 simulated nodes, two nodes lost at once.  Node 1
# writes a checkpoint the checkpoint way (a temporary name, then rename into
# place), another file it then unlinks, and a third it rewrites; nodes 2
# and 3 hold copies, node 0 placeholders.  The drain is too slow to finish
# (--drain-rate 1).  Then the step is killed and the stores of nodes 1 and
# 2 (the holder and one replica) are removed: `dstage drain --wait`
# recovers from node 3 what was closed under its last name and its last
# bytes (the renamed checkpoint, the rewritten file), nothing under a
# temporary or unlinked name, each once; the replica of another output on
# node 0 too.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'four nodes staged' '
	make_samples src 2 &&
	pack_stage src 4
'
DR="$TRASH/drain"
serve_start 4 --outputs out --drain-to "$DR" --outputs-replicas 3 --drain-rate 1 --failover
test_expect_success 'served with three holders per output and a drain too slow to finish' 'serve_up 4'

test_expect_success 'node 1: a checkpoint written to a temporary name and renamed; copies on nodes 2 and 3' '
	head -c 200000 /dev/urandom >e1.pt &&
	shim_on 1 mkdir "$MOUNT/out/ckpt" &&
	shim_on 1 cp e1.pt "$MOUNT/out/ckpt/e1.pt.tmp" &&
	shim_on 1 mv "$MOUNT/out/ckpt/e1.pt.tmp" "$MOUNT/out/ckpt/e1.pt" &&
	for k in 1 2 3; do cmp e1.pt "$JOBDIR/$k/outputs/ns/ckpt/e1.pt" || exit 1; done &&
	test "$(stat -c %b "$JOBDIR/0/outputs/ns/ckpt/e1.pt")" = 0 &&
	! test -e "$JOBDIR/3/outputs/ns/ckpt/e1.pt.tmp"
'
test_expect_success 'node 1: a file unlinked, another rewritten (the new bytes on every holder)' '
	echo gone >gone && shim_on 1 cp gone "$MOUNT/out/gone.txt" &&
	shim_on 2 rm "$MOUNT/out/gone.txt" &&
	echo v1 >v1 && echo version-2 >v2 &&
	shim_on 1 cp v1 "$MOUNT/out/log.txt" && shim_on 1 cp v2 "$MOUNT/out/log.txt" &&
	cmp v2 "$JOBDIR/3/outputs/ns/log.txt" && ! test -e "$JOBDIR/3/outputs/ns/gone.txt"
'
test_expect_success 'node 3 writes too: its copies are on nodes 0 and 1' '
	echo three >three && shim_on 3 cp three "$MOUNT/out/three.txt" &&
	cmp three "$JOBDIR/0/outputs/ns/three.txt" && cmp three "$JOBDIR/1/outputs/ns/three.txt" &&
	test "$(stat -c %b "$JOBDIR/2/outputs/ns/three.txt")" = 0
'
test_expect_success 'node 3 lists what it holds a copy of, by its last name, as not drained' '
	cat "$JOBDIR/3/outputs.status" &&
	grep -q "^undrained=200000 [0-9a-f]\{8\} ckpt/e1.pt$" "$JOBDIR/3/outputs.status" &&
	grep -q "^undrained=10 [0-9a-f]\{8\} log.txt$" "$JOBDIR/3/outputs.status" &&
	! grep -q "gone.txt\|e1.pt.tmp" "$JOBDIR/3/outputs.status"
'
test_expect_success 'the step is killed; the stores of nodes 1 and 2 removed' '
	kill -9 $(node_pid 1) &&
	wait_until 30 sh -c "! kill -0 $SERVE_PID 2>/dev/null" &&
	rm -rf "$JOBDIR/1" "$JOBDIR/2"
'
serve_wait
test_expect_success 'dstage drain --wait: every closed output recovered from nodes 3 and 0, once' '
	test_status --show err 0 "$DSTAGE" drain --wait --to "$SHM" --job "$JOB" 2>err &&
	cmp e1.pt "$DR/ckpt/e1.pt" && cmp v2 "$DR/log.txt" && cmp three "$DR/three.txt" &&
	grep -q "node 3: .ckpt/e1.pt.: recovered" err &&
	grep -q "node 0: .three.txt.: recovered" err &&
	! test -e "$DR/gone.txt" && ! test -e "$DR/ckpt/e1.pt.tmp" &&
	(cd "$DR" && find . -type f ! -name "*.dstage-drain.*" | sort) >got &&
	printf "%s\n" ./ckpt/e1.pt ./log.txt ./three.txt >want && test_cmp want got
'
test_expect_success 'the survivors may start again (nothing left not drained)' '
	for k in 0 3; do
		grep -q "^recovered=1" "$JOBDIR/$k/outputs.status" &&
			! grep -q "^undrained=" "$JOBDIR/$k/outputs.status" || exit 1
	done
'
test_done
