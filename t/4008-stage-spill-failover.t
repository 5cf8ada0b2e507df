#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The spill tier across a lost node (docs/failover.md): 4 simulated nodes,
# R = 2, most of every store spilled (DSTAGE_RAM_ROOM).  After node 2 is
# lost the survivors copy its partitions again from their stores, spill
# tiers included, through the service's windows (one store over two
# files), and keep the copies in their spill tiers, not in RAM; after node
# 3 is lost too, every file still reads right on every survivor, and an
# epoch over the survivors reads right in its order.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

uid=$(id -u)
SP="$TRASH/spill"

test_expect_success 'four nodes staged with R=2 and a spill tier, the pack removed' '
	make_samples src 24 8192 &&
	DSTAGE_RAM_ROOM=1200KiB pack_stage src 4 -R 2 --spill "$SP" &&
	rm -rf pack &&
	for k in 0 1 2 3; do test -s "$SP/dstage.$uid.$JOB/$k/store" || exit 1; done &&
	(cd src && find . -type f | sed "s|^\./||" | sort) >every
'
DSTAGE_LOG=info
serve_start 4 --failover
test_expect_success 'served on 4 nodes' 'serve_up 4'
test_expect_success 'lose node 2' 'kill -KILL "$(node_pid 2)"'
serve_wait
serve_start 3 --nodes 0-1,3
test_expect_success 'restarted on 0, 1, 3; the copies are made from both tiers' '
	wait_until 60 running 0 1 3 &&
	wait_until 60 sh -c "cat serve.log | grep -q \"re-replicated\"" &&
	cat serve.log && ls "$JOBDIR"/*/replicas.0.map
'
test_expect_success 'the copies are in the spill tier, not in RAM (every node spills)' '
	ls "$SP/dstage.$uid.$JOB"/*/replicas.0 &&
	! ls "$JOBDIR"/*/replicas.0 2>/dev/null
'
test_expect_success 'lose node 3 as well' 'kill -KILL "$(node_pid 3)"'
serve_wait
serve_start 2 --nodes 0-1
test_expect_success 'restarted on 0, 1 over both tiers and the copies' 'wait_until 60 running 0 1'
for k in 0 1; do
	test_expect_success "node $k: every file reads right, those of nodes 2 and 3 included" '
		(cd src && xargs -d "\n" sha256sum <../every) >native &&
		DSTAGE_TIMEOUT=20 shim_on '$k' sh -c "cd $MOUNT && xargs -d \"\\n\" sha256sum" <every >staged &&
		test_cmp native staged
	'
done
test_expect_success 'epoch 2 over {0, 1}, read in its order through the shim' '
	epoch_reads_right 2 0 1
'
serve_stop
test_expect_success 'stopped cleanly' 'cat serve.log && test "$(cat serve.rc)" = 0'
test_expect_success 'clean removes every spill tier' '
	"$DSTAGE" clean --to "$SHM" --job "$JOB" &&
	test ! -e "$JOBDIR" && test ! -e "$SP/dstage.$uid.$JOB"
'
test_done
