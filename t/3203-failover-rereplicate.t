#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Re-replication (docs/failover.md): 4 simulated nodes, R = 2.  After node
# 2 is lost, the service on 0, 1, 3 copies every partition that had a copy
# on node 2 from its other holder to a third survivor, in the background,
# from the survivors' stores (the pack is gone: nothing can come from the
# shared file system).  Then node 3 is lost too: the files whose holders
# were 2 and 3, lost without re-replication (t/3201), now read right from
# their copies, on every survivor, and nothing gives an error.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_expect_success 'four nodes staged with R=2, the pack removed' '
	stage_r2_nopack
'
DSTAGE_LOG=info
serve_start 4 --failover
test_expect_success 'served on 4 nodes' 'serve_up 4'
test_expect_success 'no copies while every node lives' '
	! ls "$JOBDIR"/*/replicas.* 2>/dev/null
'
test_expect_success 'lose node 2' 'kill -KILL "$(node_pid 2)"'
serve_wait
serve_start 3 --nodes 0-1,3
test_expect_success 'restarted on 0, 1, 3; the copies are made' '
	wait_until 60 running 0 1 3 &&
	wait_until 60 sh -c "cat serve.log | grep -q \"re-replicated\"" &&
	cat serve.log && grep "re-replicating .* from the survivors. stores" serve.log &&
	ls -l "$JOBDIR"/*/replicas.* && ls "$JOBDIR"/*/replicas.0.map
'
test_expect_success 'every partition of a file has 2 living holders again (copies count)' '
	for k in 0 1 3; do
		if test -e "$JOBDIR/$k/replicas.0.map"; then
			sed "s/^\([0-9]*\) .*/\1 $k/" "$JOBDIR/$k/replicas.0.map" || exit 1
		fi
	done >copies &&
	cat copies && test -s copies &&
	awk "NR == FNR { c[\$1] = c[\$1] \",\" \$2; next }
	     { n = 0; split(\$2 c[\$3], h, \",\"); delete seen
	       for (i in h) if (h[i] != \"\" && h[i] != 2 && !(h[i] in seen)) { seen[h[i]] = 1; n++ }
	       if (n < 2) { print \"only \" n \" holder(s): \" \$0; bad = 1 } }
	     END { exit bad }" copies holders
'
test_expect_success 'lose node 3 as well' 'kill -KILL "$(node_pid 3)"'
serve_wait
cp serve.log serve.2.log
serve_start 2 --nodes 0-1
test_expect_success 'restarted on 0, 1 over stores and copies' 'wait_until 60 running 0 1'
for k in 0 1; do
	test_expect_success "node $k: every file reads right, those of nodes 2 and 3 included" '
		for f in $(cat every); do
			DSTAGE_TIMEOUT=20 shim_on '$k' cat "$MOUNT/$f" >got 2>err || { cat err; echo "failed: $f"; exit 1; }
			cmp -s got "src/$f" || { echo "wrong bytes: $f"; exit 1; }
		done
	'
done
test_expect_success 'nothing was lost' '! grep -q "lost: every node" serve.log'
test_expect_success 'epoch 2 over {0, 1}, read through the shim with no error' '
	epoch_reads_right 2 0 1
'
serve_stop
test_expect_success 'stopped cleanly' 'cat serve.log && test "$(cat serve.rc)" = 0'
test_done
