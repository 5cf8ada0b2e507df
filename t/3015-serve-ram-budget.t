#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# The service's epoch cache under the RAM budget (issue 26; docs/guide.md
# "The RAM budget"): on tmpfs the cache is the job's memory, charged to its
# memory cgroup.  In a real cgroup v1 memory limit that holds one epoch's
# cache of both nodes but not two, the prefetch of the next epoch waits
# (said once per node) until the readers leave the older epoch, then goes
# on; with room for part of an epoch and nothing of its own to release, the
# prefetch shrinks to the samples read first; with a headroom that leaves no
# room at all, epochs are not prefetched and the readers read every byte
# remotely.  Bytes are right throughout,
# nobody is OOM-killed, the service ends cleanly.
. "$(dirname "$0")/test-lib.sh"
. "$SRCDIR/t/lib-serve.sh"

test_lazy_prereq MEMCG1 '
	[ "$(id -u)" = 0 ] && d=/sys/fs/cgroup/memory/dstage-probe-$$ && mkdir "$d" &&
	echo 1048576 >"$d/memory.limit_in_bytes" && rmdir "$d"
' "needs root and a writable cgroup v1 memory hierarchy at /sys/fs/cgroup/memory"
test_require MPI MEMCG1

CG=/sys/fs/cgroup/memory/dstage-test-$$
# the service (in the cgroup) is killed by test_bg's cleanup first; then
# every task back to the root, the stores and caches gone, the cgroup removed
test_atexit "[ -d '$CG' ] && { for p in \$(cat '$CG/tasks'); do kill -9 \$p; done; sleep 0.5; \
	rm -rf '$SHM'/dstage.*; rmdir '$CG'; }"
mkdir "$CG" || { echo "Bail out! cannot make $CG"; exit 1; }
echo 0 >"$CG/memory.swappiness" 2>/dev/null
MiB=1048576

# serve_in_cg LIMIT [serve options]: the service of N=2 simulated nodes in
# the cgroup (top level)
serve_in_cg() {
	echo "$1" >"$CG/memory.limit_in_bytes" || { echo "Bail out! limit $1"; exit 1; }
	shift
	# the previous run's log goes first: `>serve.log &` truncates it only in
	# the child, after the fork, and the waits below read it
	rm -f serve.rc stop.rc serve.log "$JOBDIR"/*/serve.status
	sh -c 'echo $$ >"$0/tasks" && exec "$@"' "$CG" \
		timeout -k 5 "${DSTAGE_TEST_MPI_TIMEOUT:-120}" mpiexec.mpich -n 2 \
		"$DSTAGE" serve --to "$SHM" --job "$JOB" --node-per-rank "$@" >serve.log 2>&1 &
	SERVE_PID=$!
	test_bg "$SERVE_PID"
}
memstat() { sed -n "s/^$1 //p" "$CG/memory.stat"; }
no_oom() { ! grep "^oom_kill [1-9]" "$CG/memory.oom_control"; }
prefetched() {
	pe=$(stat_val "$1" prefetch_epoch)
	test "$pe" -gt "$2" || { test "$pe" = "$2" &&
		test "$(stat_val "$1" prefetch_done)" = "$(stat_val "$1" prefetch_total)"; }
}
# read_epoch E K: the list of epoch E on node K, then each of its files
# through the shim, compared with the source
read_epoch() {
	shim_on "$2" cat "$MOUNT/.dstage/epochs/$1/all" >list.$1.$2 && test -s list.$1.$2 &&
	sed "s|^|$MOUNT/|" list.$1.$2 | shim_on "$2" xargs -d "\n" cat >got &&
	sed "s|^|src/|" list.$1.$2 | xargs -d "\n" cat >want &&
	cmp got want
}

test_expect_success 'two nodes staged (outside the cgroup): 256 MiB of samples' '
	make_samples src 64 $((1024 * 1024)) && pack_stage src 2
'

# 1. no room at all (the service's own memory is measured meanwhile):
# nothing prefetched, every byte read remotely
serve_in_cg $((4096 * MiB)) --ram-headroom 99%
test_expect_success 'a headroom of 99%: epochs 0 and 1 not prefetched, read remotely and right' '
	serve_up 2 &&
	wait_until 30 eval "test \$(grep -c \"epoch [01] not prefetched: its cache needs\" serve.log) = 4" &&
	cat serve.log &&
	ina=$(memstat total_inactive_file) && echo $(($(cat "$CG/memory.usage_in_bytes") - ina)) >base &&
	c0=$(stat_val 1 cache_reads) && r0=$(stat_val 1 remote_reads) &&
	read_epoch 0 0 && read_epoch 0 1 &&
	test "$(stat_val 1 cache_reads)" = "$c0" && test "$(stat_val 1 remote_reads)" -gt "$r0" &&
	no_oom
'
serve_stop
test_expect_success 'stopped, exit 0' 'test "$(cat serve.rc)" = 0'

# 2. room for both nodes' epoch 0 but not for an epoch 1 beside it, and for
# both nodes' epoch 1 once epoch 0 is gone (the middle of that range):
# epoch 1 waits, then goes
need() { # need E NODE: MiB of its cache, from the log of 1.
	sed -n "s/.*node $2: epoch $1 not prefetched: its cache needs \([0-9.]*\) MiB.*/\1/p" \
		serve.log | head -n 1
}
test_expect_success 'the needs of the epochs, from the log' '
	for e in 0 1; do for k in 0 1; do test -n "$(need $e $k)" || return 1; done; done &&
	need 0 0 >need.0.0 &&
	awk -v a=$(need 0 0) -v b=$(need 0 1) -v c=$(need 1 0) -v d=$(need 1 1) -v base=$(cat base) \
		"BEGIN { lo = a + b > c + d ? a + b : c + d; hi = a + b + (c < d ? c : d);
			printf \"%d\n\", base + (lo + hi) / 2 * 1048576 }" >limit &&
	cat base limit
'
serve_in_cg $(cat limit) --ram-headroom 0 -v
test_expect_success 'epoch 0 prefetched on both nodes, epoch 1 waits, said once' '
	serve_up 2 && wait_until 60 prefetched 0 0 && wait_until 60 prefetched 1 0 &&
	wait_until 30 eval "test \$(grep -c \"epoch 1 prefetch waits: its cache needs\" serve.log) = 2" &&
	cat serve.log &&
	test_grep "node 0: epoch 1 prefetch waits: .*the RAM budget has .* (cgroup v1 memory limit .*$CG" serve.log &&
	test_grep "node 1: epoch 1 prefetch waits" serve.log &&
	! prefetched 0 1 && ! prefetched 1 1 && no_oom
'
test_expect_success 'epoch 0 read on both nodes, every byte right' '
	read_epoch 0 0 && read_epoch 0 1
'
test_expect_success 'the readers move on: epoch 0 released, epoch 1 fetched and read right' '
	shim_on 0 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	shim_on 1 cat "$MOUNT/.dstage/epochs/1/all" >/dev/null &&
	wait_until 60 prefetched 0 1 && wait_until 60 prefetched 1 1 &&
	c0=$(stat_val 0 cache_reads) && read_epoch 1 0 && read_epoch 1 1 &&
	test "$(stat_val 0 cache_reads)" -gt "$c0" &&
	no_oom && ! grep -i "error" serve.log
'
serve_stop
test_expect_success 'stopped, exit 0' 'test "$(cat serve.rc)" = 0 && no_oom'

# 3. room for half of one node's epoch 0, nothing of ours to release: the
# first node to start shrinks its epoch to the samples read first.  64 MiB
# of headroom stay for the service's own reads and for the race of simulated
# nodes: the two nodes of one host check the shared cgroup each on its own,
# so both may take the half epoch (docs/guide.md says so)
test_expect_success 'the limit: half a node-epoch above 64 MiB of headroom' '
	awk -v a=$(cat need.0.0) -v base=$(cat base) \
		"BEGIN { printf \"%d\n\", base + (a / 2 + 64) * 1048576 }" >limit
'
serve_in_cg $(cat limit) --ram-headroom 64MiB
test_expect_success 'epoch 0 shrunk to what fits, the rest read remotely, every byte right' '
	serve_up 2 &&
	wait_until 30 grep -q "epoch 0: prefetching the first [0-9]* of its [0-9]* remote samples" serve.log &&
	cat serve.log &&
	k=$(sed -n "s/.*node \([01]\): epoch 0: prefetching the first.*/\1/p" serve.log | head -n 1) &&
	wait_until 60 prefetched $k 0 &&
	c0=$(stat_val $k cache_reads) && r0=$(stat_val $k remote_reads) &&
	read_epoch 0 0 && read_epoch 0 1 &&
	test "$(stat_val $k cache_reads)" -gt "$c0" && test "$(stat_val $k remote_reads)" -gt "$r0" &&
	no_oom
'
serve_stop
test_expect_success 'stopped, exit 0' 'test "$(cat serve.rc)" = 0 && no_oom'

test_done
