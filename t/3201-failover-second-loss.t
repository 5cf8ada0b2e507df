#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# Failover, a second loss (docs/failover.md): 4 simulated nodes, R = 2.
# Node 2 is lost, the service restarts on 0, 1, 3; then node 3 is lost and
# it restarts on 0, 1.  The files whose two holders were 2 and 3 are gone:
# reading one gives EIO at once (not after DSTAGE_TIMEOUT), named by the
# reader and by the service; every other file reads right, and the epoch
# lists over {0, 1} stay a permutation of the training set with equal shares.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

HOLDERS="$DSTAGE_TEST_BUILD/t/index-holders"

test_expect_success 'four nodes staged with R=2' '
	make_samples src 24 &&
	pack_stage src 4 -R 2 &&
	"$HOLDERS" "$JOBDIR/0/index" >holders &&
	awk "\$2 == \"2,3\" || \$2 == \"3,2\" { print \$1 }" holders | sort >lost.expected &&
	awk "\$2 != \"2,3\" && \$2 != \"3,2\" { print \$1 }" holders | sort >kept.expected &&
	echo "lost with nodes 2 and 3: $(wc -l <lost.expected) file(s)" &&
	test -s lost.expected && test -s kept.expected
'

restart_on() {
	n=$1 nodes=$2
	shift 2
	serve_start "$n" --nodes "$nodes" "$@"
}

serve_start 4 --failover
test_expect_success 'served on 4 nodes' 'serve_up 4'
test_expect_success 'readers start epoch 0' '
	for k in 0 1 2 3; do shim_on $k cat "$MOUNT/.dstage/epochs/0/all" >/dev/null || exit 1; done
'
test_expect_success 'lose node 2' 'kill -KILL "$(node_pid 2)"'
serve_wait
restart_on 3 0-1,3 --no-rereplicate # the copies would save them (t/3203)
test_expect_success 'restarted on 0, 1, 3' 'wait_until 60 running 0 1 3'
test_expect_success 'nothing is lost yet: every file reads right on node 0' '
	for f in $(cat lost.expected kept.expected); do
		shim_on 0 cat "$MOUNT/$f" | cmp -s - "src/$f" || { echo "bad $f"; exit 1; }
	done
'
test_expect_success 'lose node 3' 'kill -KILL "$(node_pid 3)"'
serve_wait
restart_on 2 0-1 --no-rereplicate
test_expect_success 'restarted on 0, 1' '
	wait_until 60 running 0 1 && cat "$JOBDIR/nodes" &&
	grep -q "^from=1 nodes=0-1$" "$JOBDIR/nodes"
'
for k in 0 1; do
	test_expect_success "node $k: exactly the files of nodes 2 and 3 give EIO, at once, named" '
		: >eio.'$k' && start=$(date +%s) &&
		for f in $(cat lost.expected kept.expected); do
			if DSTAGE_TIMEOUT=20 shim_on '$k' cat "$MOUNT/$f" >got 2>err; then
				cmp -s got "src/$f" || { echo "wrong bytes: $f"; exit 1; }
			else
				grep -q "Input/output error" err && grep -q "$f.: lost" err ||
					{ cat err; exit 1; }
				echo "$f" >>eio.'$k'
			fi
		done &&
		sort eio.'$k' | test_cmp lost.expected - &&
		test $(( $(date +%s) - start )) -lt 15
	'
done
test_expect_success 'the service names the lost files and their holders' '
	f=$(head -1 lost.expected) &&
	grep "$f.: lost: every node holding it (\(2,3\|3,2\)) is gone" serve.log
'
test_expect_success 'epoch 2 over {0, 1}: a permutation of the training set, equal shares' '
	(cd src/train && find . -type f | sed "s|^\./|train/|" | sort) >train.sorted &&
	shim_on 0 cat "$MOUNT/.dstage/epochs/2/all" >e2.0 &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/2/all" >e2.1 &&
	sort e2.0 e2.1 | test_cmp train.sorted - &&
	test "$(wc -l <e2.0)" = "$(wc -l <e2.1)"
'
serve_stop
test_expect_success 'stopped cleanly' 'test "$(cat serve.rc)" = 0'
test_done
